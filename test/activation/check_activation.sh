#!/usr/bin/env bash
# Activation checks against the installed UCX tools (issue "Build and load"):
#  - preloaded module + emulator driver: ucx_info -d shows the cuda_ipc_ns
#    memory domain with its transport, also when the driver lacks an
#    optional entry (test/cudasim's libcudasim_partial.so);
#  - a missing driver: ucx_info -d exits 0 and lists no cuda_ipc_ns;
#  - ucx_info -c -f documents UCX_CUDA_IPC_NS_DRIVER;
#  - the module file name;
#  - the loopback copy transport: ucx_info -d lists cu_cpy_ns, and
#    ucx_perftest accepts -m cuda with the module only (UCP and UCT tests).
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
    awk -v md="${1:-cuda_ipc_ns}" '/^# Memory domain:/ {p = ($4 == md)} p'
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
    ! grep -q -e cuda_ipc_ns -e cu_ipc_ns -e cuda_cpy_ns -e cu_cpy_ns <<<"$out"
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

copy_transport_listed() {
    local out block
    out=$(LD_PRELOAD=$module UCX_CUDA_IPC_NS_DRIVER=$cudasim ucx_info -d) || return 1
    block=$(md_block cuda_cpy_ns <<<"$out")
    grep -q '^#      Transport: cu_cpy_ns$' <<<"$block" &&
    grep -q '^#         Device: cuda_cpy$' <<<"$block"
}

copy_config_documented() {
    local out
    out=$(LD_PRELOAD=$module ucx_info -c -f) || return 1
    grep -q '^UCX_CUDA_CPY_NS_MEM_ALLOC=vmm$' <<<"$out"
}

# ucx_perftest in loopback (-l) with CUDA buffers; extra arguments follow
perftest_cuda() {
    timeout 120 ucx_perftest -l -m cuda -n 20 -w 2 "$@" 2>&1
}

perftest_cuda_refused_without_module() {
    local out
    out=$(perftest_cuda -t tag_bw -s 8) && return 1
    grep -q 'unsupported memory type' <<<"$out"
}

perftest_cuda_ucp() {
    local out size
    for size in 8 1048576; do  # eager and rendezvous
        out=$(LD_PRELOAD=$module UCX_CUDA_IPC_NS_DRIVER=$cudasim \
              UCX_TLS=self,cu_cpy_ns perftest_cuda -t tag_bw -s $size) ||
            { echo "$out"; return 1; }
        ! grep -qi -e 'unsupported' -e 'error' <<<"$out" || return 1
    done
}

perftest_cuda_uct() {
    local out
    out=$(LD_PRELOAD=$module UCX_CUDA_IPC_NS_DRIVER=$cudasim \
          perftest_cuda -t put_bw -x cu_cpy_ns -d cuda_cpy -D zcopy -s 65536) ||
        { echo "$out"; return 1; }
    ! grep -qi -e 'unsupported' -e 'error' -e 'warn' <<<"$out"
}

check "module file is libuct_cuda_ipc_ns.so" test -f "$module"
check "ucx_info -d lists cuda_ipc_ns with the emulator" lists_device "$cudasim"
check "ucx_info -d lists cuda_ipc_ns with a driver lacking optional cuMemsetD8Async" \
    lists_device "$partial" CUDASIM_PARTIAL_HIDE=cuMemsetD8Async
check "ucx_info -d without a driver exits 0, no cuda_ipc_ns" without_driver
check "ucx_info -c -f documents UCX_CUDA_IPC_NS_DRIVER" config_documented
check "ucx_info -d lists cuda_cpy_ns with transport cu_cpy_ns" copy_transport_listed
check "ucx_info -c -f documents UCX_CUDA_CPY_NS_MEM_ALLOC" copy_config_documented
check "ucx_perftest -m cuda is refused without the module" \
      perftest_cuda_refused_without_module
check "ucx_perftest -l -m cuda tag_bw (UCP) with the module" perftest_cuda_ucp
check "ucx_perftest -l -m cuda put_bw (UCT, cu_cpy_ns)" perftest_cuda_uct

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
