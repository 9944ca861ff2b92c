#!/usr/bin/env bash
# Build and install UCX 1.22.0 (or 1.21.0, the release Dynamo's containers
# pin) from its source tarball, cached outside the source tree, for building
# cuda_ipc_ns against it (contrib/build.sh with UCX=1.22, UCX=1.22-cuda or
# UCX=1.21). The tarball is a git archive of the release's tag, kept in the
# project's shared directory: ../shared/ucx/ucx-VERSION.tar.gz from the
# project root (override: UCX122_TARBALL=FILE, UCX121_TARBALL=FILE).
#
# Usage: [UCX_VER=1.21.0] setup-ucx.sh [FLAVOUR]
#   UCX_VER          1.22.0 (default) or 1.21.0; 1.21.0 plain only
#   plain (default)  configured --without-cuda (the module loads the CUDA
#                    driver itself), --enable-mt (as Debian's build)
#   cuda             configured as NIXL 1.4 builds UCX for its containers and
#                    wheel (contrib/Dockerfile*: contrib/configure-release-mt,
#                    --with-cuda=/usr/local/cuda, --enable-cma, devel headers),
#                    so UCX's own cuda_copy/cuda_ipc transports and UCM's CUDA
#                    hooks sit beside the module. Needs NVML's header and
#                    library: Debian's libnvidia-ml-dev, from the contrib and
#                    non-free components, which this script enables
#                    (/etc/apt/sources.list.d/cuda-ipc-ns-non-free.sources)
#   cuda-nixl        cuda with what NIXL's --private-ucx wheel adds:
#                    --with-soname-suffix=nixl --enable-module-deepbind
#                    (libucs-nixl.so.0, modules dlopened with RTLD_DEEPBIND)
# All flavours: shared libraries only, without InfiniBand/verbs, the other
# hardware transports and the language bindings (none is used here, and they
# would double the build time).
#
# In $CUDA_IPC_NS_CACHE (default ~/.cache/cuda_ipc_ns, as setup-deps.sh),
# with SFX "" for plain and "-cuda" or "-cuda-nixl" for the others:
#   ucx-1.22.0SFX/          the source tree, autogen'd and configured: its
#                          internal headers (uct/base/*.h) and config.h are
#                          those of the install below (--with-ucx-src)
#   ucx-1.22.0SFX-install/  the installed UCX: lib/, lib/pkgconfig/ucx.pc,
#                          bin/ucx_info, bin/ucx_perftest (--with-ucx)
#   logs/ucx-1.22.0SFX-*.log  the output of each step
# The cuda flavours build with make -k: ucx_perftest's CUDA kernels
# (src/tools/perf/cuda) include DOCA GPUNetIO headers whenever
# infiniband/mlx5dv.h exists (libibverbs-dev, which setup-deps.sh installs),
# and Debian has no DOCA; everything else must build and install, which the
# script checks file by file.
# Idempotent: a stamp file marks a finished install; a re-run takes a second.
# A cold build takes about 3 minutes on 2 cores (2 min 49 s measured) for
# plain; the cuda flavour took 3342 s from an empty cache on the 2-core VM
# while other builds kept its load average at 13-15 (its configure probes
# nvcc, and nvcc compiles UCX's device code); cuda-nixl took 1065 s (17.8
# min: configure 4 min, make 12 min, install 1.5 min) at a load average of
# 3-4 (a test suite beside it). contrib/run-tests.sh builds cuda, not
# cuda-nixl (docs/ucx-versions.md, "RTLD_DEEPBIND": one more UCX build
# would take CI over its budget; the wheel check runs on it by hand).
#
# Output: progress lines on stderr; on stdout, two lines: the configured
# source dir, then the install prefix (build.sh reads them). Exits 77 with
# a message, printing nothing on stdout, when the tarball is absent.
set -euo pipefail
prog=setup-ucx
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"

ver=${UCX_VER:-1.22.0}
flavour=${1:-plain}
cache=${CUDA_IPC_NS_CACHE:-${HOME:-/root}/.cache/cuda_ipc_ns}
case $ver in
1.22.0) tarball=${UCX122_TARBALL:-$top/../shared/ucx/ucx-$ver.tar.gz} ;;
1.21.0)
    tarball=${UCX121_TARBALL:-$top/../shared/ucx/ucx-$ver.tar.gz}
    [ "$flavour" = plain ] || { say "UCX $ver: plain only"; exit 2; } ;;
*) say "UCX_VER=$ver: 1.22.0 or 1.21.0"; exit 2 ;;
esac
case $flavour in
plain) sfx="" ;;
cuda | cuda-nixl) sfx=-$flavour ;;
*) say "flavour '$flavour': plain, cuda or cuda-nixl"; exit 2 ;;
esac
name=ucx-$ver$sfx
srcdir=$cache/$name
prefix=$cache/$name-install
logs=$cache/logs
without=(--disable-static --without-verbs --without-rdmacm --without-knem
         --without-xpmem --without-ugni --without-rocm --without-ze
         --without-gdrcopy --without-java --without-go --without-fuse3
         --without-mpi --disable-doxygen-doc)
configure=./configure
make_k=()
case $flavour in
plain)
    flags=(--prefix="$prefix" --without-cuda --enable-mt "${without[@]}") ;;
cuda | cuda-nixl)
    # NIXL's contrib/Dockerfile: configure-release-mt adds --disable-logging,
    # --disable-debug, --disable-assertions, --disable-params-check,
    # --enable-mt
    configure=./contrib/configure-release-mt
    make_k=(-k)
    flags=(--prefix="$prefix" --enable-shared --enable-optimizations
           --enable-cma --enable-devel-headers --with-cuda=/usr/local/cuda
           "${without[@]}")
    [ "$flavour" = cuda ] ||
        flags+=(--with-soname-suffix=nixl --enable-module-deepbind) ;;
esac
stamp=$prefix/.cuda_ipc_ns-installed

if [ ! -f "$tarball" ]; then
    say "skipped: no UCX $ver tarball at $tarball (set UCX12${ver:3:1}_TARBALL=FILE)"
    exit 77
fi
tarball=$(readlink -f "$tarball")
# the stamp holds what was built: another tarball or other flags rebuild
want="$ver $(cksum <"$tarball" | cut -d' ' -f1) ${flags[*]}"

if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    # what autogen, configure and make need (setup-deps.sh installs them too)
    pkgs="autoconf automake libtool pkg-config make gcc g++ libnuma-dev"
    # NVML for UCX's CUDA modules; patchelf for the wheel layout (test/wheel,
    # contrib/install-into-wheel.sh)
    [ "$flavour" = plain ] || pkgs+=" libnvidia-ml-dev patchelf"
    missing=()
    for p in $pkgs; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
            missing+=("$p")
    done
    # NVML (libnvidia-ml-dev) is in non-free and needs glx-alternative-nvidia
    # from contrib
    enable_non_free() {
        [ "$flavour" != plain ] || return 0
        grep -rqs '^Components:.*non-free' /etc/apt/sources.list.d/ && return 0
        $sudo_cmd tee /etc/apt/sources.list.d/cuda-ipc-ns-non-free.sources >/dev/null <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    }
    if [ ${#missing[@]} -gt 0 ]; then
        sudo_cmd=""
        [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
        apt_install() {
            enable_non_free &&
            $sudo_cmd apt-get update -qq &&
                DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
        }
        step "$logs/$name-apt.log" \
            "installing ${#missing[@]} Debian packages: ${missing[*]}" apt_install
    fi

    rm -rf "$srcdir" "$prefix"
    mkdir -p "$cache"
    unpack() {
        local tmp
        tmp=$(mktemp -d "$cache/unpack.XXXXXX") &&
            tar -xzf "$tarball" -C "$tmp" && mv "$tmp/ucx-$ver" "$srcdir" &&
            rmdir "$tmp"
    }
    step "$logs/$name-unpack.log" "unpacking $tarball" unpack
    [ -f "$srcdir/configure.ac" ] ||
        { say "$tarball did not unpack to $srcdir"; exit 1; }
    # (autogen.sh tries a git submodule update and warns: no git tree here)
    step "$logs/$name-autogen.log" "autogen (UCX $ver $flavour)" \
        in_dir "$srcdir" ./autogen.sh
    step "$logs/$name-configure.log" "configure (UCX $ver $flavour)" \
        in_dir "$srcdir" "$configure" "${flags[@]}"
    # with make -k a failure is known only by what is missing (below)
    # with make -k only ucx_perftest's CUDA kernels may fail (the DOCA headers)
    only_known_failures() {
        local bad
        bad=$(grep -o '\*\*\* \[[^]]*\] Error' "$1" | sed 's/.*: \(.*\)\] Error/\1/' |
              grep -v -x -e all -e all-recursive -e all-am -e install -e install-recursive \
                  -e install-am -e ucp_cuda_kernel.lo -e libucx_perftest_cuda.la |
              sort -u) || true
        [ -z "$bad" ] || { echo "failed beyond ucx_perftest's CUDA kernels: $bad"; return 1; }
    }
    make_all() {
        make -C "$srcdir" -j"$(nproc)" "${make_k[@]}" ||
            { [ ${#make_k[@]} -gt 0 ] && only_known_failures "$logs/$name-make.log"; }
    }
    make_install() {
        make -C "$srcdir" "${make_k[@]}" install ||
            { [ ${#make_k[@]} -gt 0 ] && only_known_failures "$logs/$name-install.log"; }
    }
    step "$logs/$name-make.log" "make -j$(nproc) (UCX $ver $flavour, a few minutes)" make_all
    step "$logs/$name-install.log" "make install (UCX $ver $flavour)" make_install
    lib_sfx=""
    [ "$flavour" != cuda-nixl ] || lib_sfx=-nixl
    needed=("$prefix"/lib/pkgconfig/ucx.pc "$prefix"/bin/ucx_info
            "$prefix"/bin/ucx_perftest "$srcdir"/config.h)
    for l in ucs uct ucp ucm; do
        needed+=("$prefix/lib/lib$l$lib_sfx.so.0")
    done
    [ "$flavour" = plain ] ||
        needed+=("$prefix/lib/ucx/libuct_cuda$lib_sfx.so.0"
                 "$prefix/lib/ucx/libucm_cuda$lib_sfx.so.0")
    for f in "${needed[@]}"; do
        [ -e "$f" ] || { say "missing after the install: $f (logs: $logs/$name-*.log)"; exit 1; }
    done
    echo "$want" >"$stamp"
fi
say "UCX $ver ($flavour) ready: source $srcdir, installed in $prefix (logs: $logs)"
echo "$srcdir"
echo "$prefix"
