#!/usr/bin/env bash
# Main job: from a fresh clone to a UCX that lists cuda_ipc_ns.
# Installs what is missing, builds, then runs the installed ucx_info with the
# module preloaded (the activation step) and the driver set to the CPU
# emulator unless UCX_CUDA_IPC_NS_DRIVER names a real libcuda.so.1.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}

"$top/contrib/build.sh"

module=$build/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so
export UCX_CUDA_IPC_NS_DRIVER=${UCX_CUDA_IPC_NS_DRIVER:-$build/test/cudasim/.libs/libcudasim.so}

echo "== activation: LD_PRELOAD=$module"
echo "== driver:     UCX_CUDA_IPC_NS_DRIVER=$UCX_CUDA_IPC_NS_DRIVER"
echo "== ucx_info -d (cuda_ipc_ns memory domain):"
LD_PRELOAD=$module ucx_info -d |
    awk '/^# Memory domain:/ {p = ($4 == "cuda_ipc_ns")} p'
echo "== ucx_info -c -f (cuda_ipc_ns variables):"
LD_PRELOAD=$module ucx_info -c -f | grep '^UCX_CUDA_IPC_NS_'
