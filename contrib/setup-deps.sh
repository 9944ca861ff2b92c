#!/usr/bin/env bash
# Prepare everything cuda_ipc_ns builds against, with no hand steps:
#  - the Debian packages (UCX 1.13.1 runtime/dev/utils, gtest, autotools,
#    runc for the container pods, ...)
#  - the bookworm deb-src source, if absent
#  - the UCX source package of exactly the installed version, configured with
#    the flags the installed build reports (ucx_info -v), so that internal
#    headers and config.h match the installed libraries' struct layouts.
# Idempotent; the configured source is cached outside the source tree
# (CUDA_IPC_NS_CACHE, default ~/.cache/cuda_ipc_ns) and a re-run takes seconds.
# One progress line per step on stderr; the tools' output goes to logs in
# $CUDA_IPC_NS_CACHE/logs/ (apt.log, ucx-VERSION-*.log), whose last lines
# are shown when a step fails.
# Prints the configured UCX source directory on its last line (stdout).
set -euo pipefail
prog=setup
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"

cache=${CUDA_IPC_NS_CACHE:-${HOME:-/root}/.cache/cuda_ipc_ns}
logs=$cache/logs

sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"

pkgs="libucx-dev libucx0 ucx-utils libgtest-dev autoconf automake libtool
      pkg-config make gcc g++ dpkg-dev libibverbs-dev librdmacm-dev
      libnuma-dev util-linux iproute2 clang libclang-rt-14-dev gnuplot-nox
      python3-yaml valgrind"

missing=()
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing+=("$p")
done
apt_install() {
    $sudo_cmd apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@"
}
if [ ${#missing[@]} -gt 0 ]; then
    step "$logs/apt.log" "installing ${#missing[@]} Debian packages (${missing[*]})" \
        apt_install "${missing[@]}"
fi
# runc starts the pods of contrib/pods-runc.sh; without its recommends (criu)
if ! dpkg-query -W -f='${Status}' runc 2>/dev/null | grep -q "ok installed"; then
    step "$logs/apt-runc.log" "installing runc (Debian's, for the pods of contrib/pods-runc.sh)" \
        apt_install --no-install-recommends runc
fi

ucx_ver=$(dpkg-query -W -f='${Version}' libucx0)   # e.g. 1.13.1-1
ucx_upstream=${ucx_ver%-*}
srcdir="$cache/ucx-$ucx_upstream"
stamp="$srcdir/.cuda_ipc_ns-configured-$ucx_ver"

enable_deb_src() {
    $sudo_cmd tee /etc/apt/sources.list.d/cuda-ipc-ns-deb-src.sources >/dev/null <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    $sudo_cmd apt-get update -qq
}
fetch_source() {
    # dpkg-source applies Debian's patches: we match what the binary was built from
    cd "$cache" && apt-get source -qq --download-only "ucx=$ucx_ver" &&
        dpkg-source -x ucx_"$ucx_ver".dsc "ucx-$ucx_upstream"
}
configure_source() {
    echo "configure flags (ucx_info -v): $flags"
    cd "$srcdir" && { [ -x configure ] || ./autogen.sh; } &&
        # the flags hold literal ${prefix}: keep it literal, configure expands it
        eval "./configure $(printf '%s' "$flags" | sed 's/\$/\\$/g')"
}

if [ ! -f "$stamp" ]; then
    mkdir -p "$cache"
    # deb-src line for the suite the system uses, if no source index exists
    if ! grep -rqs '^\(Types:.*deb-src\|deb-src\)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        step "$logs/apt-deb-src.log" "enabling bookworm deb-src" enable_deb_src
    fi
    rm -rf "$srcdir" "$cache"/ucx_*
    step "$logs/ucx-$ucx_upstream-source.log" \
        "fetching the UCX $ucx_upstream source package (ucx=$ucx_ver)" fetch_source
    flags=$(ucx_info -v | sed -n 's/^# Configured with: //p')
    [ -n "$flags" ] || { say "cannot read configure flags from ucx_info -v"; exit 1; }
    # Debian's build machine had no CUDA, so configure found none; this one
    # may have (nvcc, NVML's header once setup-ucx.sh cuda installed it)
    ucx_info -b | grep -q '^#define HAVE_CUDA ' ||
        flags+=" --without-cuda --without-gdrcopy"
    step "$logs/ucx-$ucx_upstream-configure.log" \
        "configuring the UCX $ucx_upstream source like the installed build (ucx_info -v)" \
        configure_source
    touch "$stamp"
fi
# The build defines of the installed libraries must be those of config.h, or
# internal struct layouts could differ (JNI headers only concern bindings;
# the configure command line is only printed, and ours may add --without-cuda)
defines() {
    grep '^#define' | sed 's/[[:space:]]\+/ /g; s/ $//' |
        grep -v -e HAVE_JNI -e UCX_CONFIGURE_FLAGS | sort
}
if ! diff <(ucx_info -b | defines) <(defines < "$srcdir/config.h") >&2; then
    say "config.h of $srcdir differs from the installed build (ucx_info -b)"
    exit 1
fi
say "UCX $ucx_ver source ready: $srcdir"
echo "$srcdir"
