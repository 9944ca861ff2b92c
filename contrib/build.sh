#!/usr/bin/env bash
# Prepare dependencies (contrib/setup-deps.sh) and build the module and the
# CUDA emulator in ${BUILD_DIR:-build/ of the source tree}, out of the source
# tree. Idempotent.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}

ucx_src=$("$top/contrib/setup-deps.sh" | tail -n 1)

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
    ./autogen.sh >/dev/null
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
    "$top/configure" --with-ucx-src="$ucx_src" --prefix="$build/install" >configure.out ||
        { cat configure.out; exit 1; }
fi
make -j"$(nproc)" >make.out 2>&1 || { tail -50 make.out; exit 1; }
echo "build: module $build/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so"
echo "build: emulator $build/test/cudasim/.libs/libcudasim.so"
