#!/usr/bin/env bash
# Build and install UCX 1.22.0 from its source tarball, cached outside the
# source tree, for building cuda_ipc_ns against it (contrib/build.sh with
# UCX=1.22). The tarball is a git archive of the v1.22.0 tag, kept in the
# project's shared directory: ../shared/ucx/ucx-1.22.0.tar.gz from the
# project root (override: UCX122_TARBALL=FILE).
#
# In $CUDA_IPC_NS_CACHE (default ~/.cache/cuda_ipc_ns, as setup-deps.sh):
#   ucx-1.22.0/            the source tree, autogen'd and configured: its
#                          internal headers (uct/base/*.h) and config.h are
#                          those of the install below (--with-ucx-src)
#   ucx-1.22.0-install/    the installed UCX: lib/, lib/pkgconfig/ucx.pc,
#                          bin/ucx_info, bin/ucx_perftest (--with-ucx)
#   logs/ucx-1.22.0-*.log  the output of each step
# Configured --without-cuda (no nvml.h here: the module loads the CUDA driver
# itself), --enable-mt (as Debian's build), shared libraries only, without
# InfiniBand/verbs, the other hardware transports and the language bindings
# (none is used here, and they would double the build time).
# Idempotent: a stamp file marks a finished install; a re-run takes a second.
# A cold build takes about 3 minutes on 2 cores (2 min 49 s measured).
#
# Output: progress lines on stderr; on stdout, two lines: the configured
# source dir, then the install prefix (build.sh reads them). Exits 77 with
# a message, printing nothing on stdout, when the tarball is absent.
set -euo pipefail
prog=setup-ucx
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"

ver=1.22.0
cache=${CUDA_IPC_NS_CACHE:-${HOME:-/root}/.cache/cuda_ipc_ns}
tarball=${UCX122_TARBALL:-$top/../shared/ucx/ucx-$ver.tar.gz}
srcdir=$cache/ucx-$ver
prefix=$cache/ucx-$ver-install
logs=$cache/logs
flags=(--prefix="$prefix" --without-cuda --enable-mt --disable-static
       --without-verbs --without-rdmacm --without-knem --without-xpmem
       --without-ugni --without-rocm --without-ze --without-gdrcopy
       --without-java --without-go --without-fuse3 --without-mpi
       --disable-doxygen-doc)
stamp=$prefix/.cuda_ipc_ns-installed

if [ ! -f "$tarball" ]; then
    say "skipped: no UCX $ver tarball at $tarball (set UCX122_TARBALL=FILE)"
    exit 77
fi
tarball=$(readlink -f "$tarball")
# the stamp holds what was built: another tarball or other flags rebuild
want="$ver $(cksum <"$tarball" | cut -d' ' -f1) ${flags[*]}"

if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    # what autogen, configure and make need (setup-deps.sh installs them too)
    pkgs="autoconf automake libtool pkg-config make gcc g++ libnuma-dev"
    missing=()
    for p in $pkgs; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
            missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        sudo_cmd=""
        [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
        apt_install() {
            $sudo_cmd apt-get update -qq &&
                DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
        }
        step "$logs/ucx-$ver-apt.log" \
            "installing ${#missing[@]} Debian packages: ${missing[*]}" apt_install
    fi

    rm -rf "$srcdir" "$prefix"
    mkdir -p "$cache"
    step "$logs/ucx-$ver-unpack.log" "unpacking $tarball" \
        tar -xzf "$tarball" -C "$cache"
    [ -f "$srcdir/configure.ac" ] ||
        { say "$tarball did not unpack to $srcdir"; exit 1; }
    # (autogen.sh tries a git submodule update and warns: no git tree here)
    step "$logs/ucx-$ver-autogen.log" "autogen (UCX $ver)" \
        in_dir "$srcdir" ./autogen.sh
    step "$logs/ucx-$ver-configure.log" "configure (UCX $ver)" \
        in_dir "$srcdir" ./configure "${flags[@]}"
    step "$logs/ucx-$ver-make.log" "make -j$(nproc) (UCX $ver, a few minutes)" \
        make -C "$srcdir" -j"$(nproc)"
    step "$logs/ucx-$ver-install.log" "make install (UCX $ver)" \
        make -C "$srcdir" install
    for f in "$prefix"/lib/pkgconfig/ucx.pc "$prefix"/bin/ucx_info \
             "$prefix"/bin/ucx_perftest "$srcdir"/config.h; do
        [ -e "$f" ] || { say "missing after the install: $f"; exit 1; }
    done
    echo "$want" >"$stamp"
fi
say "UCX $ver ready: source $srcdir, installed in $prefix (logs: $logs)"
echo "$srcdir"
echo "$prefix"
