#!/usr/bin/env bash
# The CUDA driver the scripts load, on two lines: its path, then why.
# UCX_CUDA_IPC_NS_DRIVER when set; the real libcuda.so.1 when it is
# installed and a GPU (/dev/nvidia0) is present; else the CPU emulator
# built in BUILD_DIR ($1). Exits 1 when that emulator is not built.
set -euo pipefail
build=$1

if [ -n "${UCX_CUDA_IPC_NS_DRIVER:-}" ]; then
    echo "$UCX_CUDA_IPC_NS_DRIVER"
    echo "given by UCX_CUDA_IPC_NS_DRIVER"
elif [[ $(ldconfig -p 2>/dev/null) == *"libcuda.so.1 "* ]] && [ -e /dev/nvidia0 ]; then
    echo libcuda.so.1
    echo "real CUDA driver (GPU /dev/nvidia0 present)"
else
    emulator=$build/test/cudasim/.libs/libcudasim.so
    [ -f "$emulator" ] || { echo "no GPU driver and no emulator at $emulator" >&2; exit 1; }
    readlink -f "$emulator"
    echo "CPU emulator cudasim: no libcuda.so.1 with a GPU here"
fi
