#!/usr/bin/env bash
# Activation checks against the installed UCX tools (issue "Build and load"):
#  - preloaded module + emulator driver: ucx_info -d shows the cuda_ipc_ns
#    memory domain with its transport, also when the driver lacks an
#    optional entry (test/cudasim's libcudasim_partial.so);
#  - a missing driver: ucx_info -d exits 0 and lists no cuda_ipc_ns;
#  - ucx_info -c -f documents UCX_CUDA_IPC_NS_DRIVER;
#  - the module file name.
set -u
build=${1:?build dir}
module=$build/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so
cudasim=$build/test/cudasim/.libs/libcudasim.so
partial=$build/test/cudasim/.libs/libcudasim_partial.so
pass=0 fail=0

check() {
    local name=$1; shift
    if "$@"; then
        echo "PASS: $name"; pass=$((pass + 1))
    else
        echo "FAIL: $name"; fail=$((fail + 1))
    fi
}

md_block() {
    awk '/^# Memory domain:/ {p = ($4 == "cuda_ipc_ns")} p'
}

# ucx_info -d with driver $1 (and the VAR=value words after it) shows the
# cuda_ipc_ns memory domain with its transport on device cuda
lists_device() {
    local out block
    out=$(env "${@:2}" LD_PRELOAD="$module" UCX_CUDA_IPC_NS_DRIVER="$1" \
          ucx_info -d) || return 1
    block=$(md_block <<<"$out")
    grep -q '^#      Transport: cu_ipc_ns$' <<<"$block" &&
    grep -q '^#         Device: cuda$' <<<"$block"
}

without_driver() {
    local out
    out=$(LD_PRELOAD=$module UCX_CUDA_IPC_NS_DRIVER=/nonexistent/libcuda.so.1 \
          ucx_info -d) || return 1
    ! grep -q -e cuda_ipc_ns -e cu_ipc_ns <<<"$out"
}

config_documented() {
    local out
    out=$(LD_PRELOAD=$module ucx_info -c -f) || return 1
    # here-strings, not pipes: grep -q closing a pipe early would make
    # pipefail report the writer's SIGPIPE
    grep -q '^UCX_CUDA_IPC_NS_DRIVER=libcuda.so.1$' <<<"$out" &&
    grep -q 'CUDA driver library to load at run time' \
        <<<"$(grep -B12 '^UCX_CUDA_IPC_NS_DRIVER=' <<<"$out")"
}

check "module file is libuct_cuda_ipc_ns.so" test -f "$module"
check "ucx_info -d lists cuda_ipc_ns with the emulator" lists_device "$cudasim"
check "ucx_info -d lists cuda_ipc_ns with a driver lacking optional cuMemsetD8" \
    lists_device "$partial" CUDASIM_PARTIAL_HIDE=cuMemsetD8
check "ucx_info -d without a driver exits 0, no cuda_ipc_ns" without_driver
check "ucx_info -c -f documents UCX_CUDA_IPC_NS_DRIVER" config_documented

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
