#!/usr/bin/env bash
# Prepare dependencies (contrib/setup-deps.sh) and build the module and the
# CUDA emulator out of the source tree. Idempotent.
#
# Environment:
#   BUILD_DIR   where to build; default build/ of the source tree, or
#               build-VERSION/ when building against another UCX (below), so
#               that each UCX version has its own build directory
#   UCX=1.22    build against UCX 1.22.0, built and cached by
#               contrib/setup-ucx.sh from ../shared/ucx/ucx-1.22.0.tar.gz
#               (default build dir build-1.22/)
#   UCX=1.22-cuda  the same release configured as NIXL builds it, with CUDA
#               (contrib/setup-ucx.sh cuda; default build dir build-1.22-cuda/)
#   UCX=1.22-cuda-nixl  as NIXL's --private-ucx wheel builds it: with CUDA,
#               libraries named lib*-nixl.so.0, modules loaded with
#               RTLD_DEEPBIND (setup-ucx.sh cuda-nixl; build-1.22-cuda-nixl/)
#   UCX=1.21    build against UCX 1.21.0, the release Dynamo's containers
#               pin, built and cached by contrib/setup-ucx.sh (UCX_VER=1.21.0)
#               from ../shared/ucx/ucx-1.21.0.tar.gz (default build dir
#               build-1.21/); it loads no external plugin: preload the module
#   UCX_PREFIX  an installed UCX (configure --with-ucx=PREFIX: its
#               lib/pkgconfig, bin/ucx_info, and an rpath to its lib/)
#   UCX_SRC     its configured source tree (configure --with-ucx-src=DIR)
# Without them: Debian's UCX 1.13.1 and the source tree setup-deps.sh
# prepared. One progress line per step; the output of autogen, configure and
# make goes to $BUILD_DIR/logs/*.log, whose end is shown when a step fails.
set -euo pipefail
prog=build
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"

ucx_src=$("$top/contrib/setup-deps.sh" | tail -n 1)
ucx_prefix=${UCX_PREFIX:-}
case ${UCX:-} in
"") ;;
1.22 | 1.22.0)
    { read -r ucx_src; read -r ucx_prefix; } < <("$top/contrib/setup-ucx.sh" | tail -n 2) ||
        { say "UCX=$UCX: contrib/setup-ucx.sh gave no UCX 1.22.0"; exit 1; }
    ;;
1.21 | 1.21.0)
    { read -r ucx_src; read -r ucx_prefix; } < <(UCX_VER=1.21.0 "$top/contrib/setup-ucx.sh" | tail -n 2) ||
        { say "UCX=$UCX: contrib/setup-ucx.sh gave no UCX 1.21.0"; exit 1; }
    ;;
1.22-cuda | 1.22.0-cuda | 1.22-cuda-nixl | 1.22.0-cuda-nixl)
    flavour=${UCX#1.22}; flavour=${flavour#.0}; flavour=${flavour#-}
    { read -r ucx_src; read -r ucx_prefix; } < <("$top/contrib/setup-ucx.sh" "$flavour" | tail -n 2) ||
        { say "UCX=$UCX: contrib/setup-ucx.sh $flavour gave no UCX 1.22.0"; exit 1; }
    BUILD_DIR=${BUILD_DIR:-$top/build-1.22-$flavour}
    ;;
*) say "UCX=$UCX: only 1.21, 1.22, 1.22-cuda and 1.22-cuda-nixl are known (or set UCX_PREFIX and UCX_SRC)"; exit 2 ;;
esac
ucx_src=${UCX_SRC:-$ucx_src}
conf_args=(--with-ucx-src="$ucx_src")
if [ -n "$ucx_prefix" ]; then
    conf_args+=(--with-ucx="$ucx_prefix")
    ucx_ver=$(PKG_CONFIG_PATH=$ucx_prefix/lib/pkgconfig pkg-config --modversion ucx) ||
        { say "no lib/pkgconfig/ucx.pc under UCX_PREFIX=$ucx_prefix"; exit 1; }
    build=${BUILD_DIR:-$top/build-${ucx_ver%.*}}
else
    build=${BUILD_DIR:-$top/build}
fi
conf_args+=(--prefix="$build/install")
logs=$build/logs
mkdir -p "$logs"

if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
    step "$logs/autogen.log" "autogen" "$top/autogen.sh"
fi
# configure again when configure is newer or the options changed
if [ ! -f "$build/Makefile" ] || [ "$top/configure" -nt "$build/Makefile" ] ||
        [ "$(cat "$logs/configure.args" 2>/dev/null)" != "${conf_args[*]}" ]; then
    rm -f "$logs/configure.args"
    step "$logs/configure.log" "configure${ucx_prefix:+ (UCX $ucx_prefix)}" \
        in_dir "$build" "$top/configure" "${conf_args[@]}"
    echo "${conf_args[*]}" >"$logs/configure.args"
fi
step "$logs/make.log" "make" make -C "$build" -j"$(nproc)"
say "module $build/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so"
say "emulator $build/test/cudasim/.libs/libcudasim.so"
