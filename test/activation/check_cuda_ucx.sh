#!/usr/bin/env bash
# The module beside UCX's own CUDA modules, in a UCX 1.22 built with CUDA as
# NIXL builds it (contrib/setup-ucx.sh cuda; README, "With a UCX built with
# CUDA"; docs/ucx-versions.md, "Beside a UCX built with CUDA").
#
# Usage: check_cuda_ucx.sh BUILD_DIR     (a build against that UCX,
#                                        UCX=1.22-cuda contrib/build.sh,
#                                        its gtest built: make check)
# UCX's libuct_cuda needs libcuda.so.1 to load. The emulator has every
# driver entry libuct_cuda and libucm_cuda import or look up
# (test/cudasim/README.md, "UCX's own CUDA modules"), so it stands in for
# libcuda.so.1 as on a GPU node. Both states are checked:
#  not loaded (no libcuda.so.1, as on a host without a GPU driver):
#   - UCX's log says why libuct_cuda was not loaded (libcuda.so.1);
#   - ucx_info -d lists cu_ipc_ns and cu_cpy_ns, no cuda_copy: our two
#     transports carry the traffic (check_activation.sh and the pod run
#     exercise them);
#  loaded (the emulator on the library path as libcuda.so.1):
#   - no driver entry UCX's CUDA modules import is missing from it;
#   - ucx_info -d lists UCX's cuda_copy and cuda_ipc beside cu_ipc_ns, and
#     cu_cpy_ns steps aside (UCX_CUDA_CPY_NS_ENABLE=auto);
#   - with UCX_CUDA_CPY_NS_ENABLE=y it is listed again;
#   - UCT: UCX's cuda_ipc, as cu_ipc_ns, puts and gets VMM and legacy
#     (cuMemAlloc) memory of another process in this PID namespace, bytes
#     checked (test/bench/bench_datapath -v);
#   - the suite's UCP, NIXL-pattern and pod tests (CUDA_UCX_GTEST_FILTER)
#     pass with UCX's cuda_copy doing the copies of CUDA memory, and stock
#     cuda_ipc carrying RMA in one PID namespace, failing between pods
#     (stock/ucp_pair_stock.*); the tests that check cu_cpy_ns itself skip,
#     saying so. Log: BUILD_DIR/logs/check-cuda-ucx.log.
set -u
build=$(cd "${1:?build dir}" && pwd)
mkvar() { sed -n "s/^$1 = //p" "$build/Makefile"; }
ucx_info=$(mkvar UCX_INFO)
ucx_libdir=$(mkvar UCX_LIBDIR)
top=$(cd "$(dirname "$0")/../.." && pwd)
# the suite's part that UCX's own CUDA modules change: UCP, the NIXL
# pattern, the pods
filter=${CUDA_UCX_GTEST_FILTER:-*ucp*:*nixl*:pod_net.*}
cudasim=$build/test/cudasim/.libs/libcudasim.so
plugin=UCX_PLUGIN_PATH=$build/src/uct/cuda_ipc_ns/plugin
unset LD_PRELOAD UCX_PLUGIN_PATH
ldir=$(mktemp -d /tmp/cuda_ipc_ns_libcuda.XXXXXX)
trap 'rm -rf "$ldir"' EXIT
ln -s "$cudasim" "$ldir/libcuda.so.1"
grep -q -- '--with-cuda' <<<"$("$ucx_info" -v)" ||
    { echo "$ucx_info: not a UCX built with CUDA"; exit 2; }
echo "UCX built with CUDA: $ucx_info"

. "$(dirname "$0")/checks.sh"
tl_listed() { grep -q "^#      Transport: $1\$" <<<"$2"; }

no_driver_reason_logged() {
    local out
    out=$(env "$plugin" UCX_LOG_LEVEL=info UCX_MODULE_LOG_LEVEL=info UCX_CUDA_IPC_NS_DRIVER="$cudasim" \
          "$ucx_info" -d 2>&1) || return 1
    grep -q "dlopen(.*/libuct_cuda\(-[0-9A-Za-z_]*\)\{0,1\}\.so\.0.*failed: libcuda.so.1" <<<"$out" ||
        { grep -i "libuct_cuda" <<<"$out" | head -3; return 1; }
}

not_loaded_ours_carry() {
    local out
    out=$(env "$plugin" UCX_CUDA_IPC_NS_DRIVER="$cudasim" "$ucx_info" -d) || return 1
    tl_listed cu_ipc_ns "$out" && tl_listed cu_cpy_ns "$out" &&
    ! tl_listed cuda_copy "$out" && ! tl_listed cuda_ipc "$out"
}

no_entry_missing() {
    local missing
    missing=$(comm -23 \
        <(nm -D --undefined-only "$ucx_libdir"/ucx/libuct_cuda.so "$ucx_libdir"/ucx/libucm_cuda.so |
          awk '$2 ~ /^cu[A-Z]/ {print $2}' | sort -u) \
        <(nm -D --defined-only "$cudasim" | awk '{print $3}' | sort -u))
    [ -z "$missing" ] || { echo "    missing: $missing"; return 1; }
}

# stock_uct_moves_bytes TL MEM: bench_datapath -v through TL on MEM memory
stock_uct_moves_bytes() {
    local out
    out=$(env LD_LIBRARY_PATH="$ldir" UCX_CUDA_IPC_NS_DRIVER="$cudasim" \
          BENCH_TL="$1" BENCH_MEM="$2" timeout 120 \
          "$build/test/bench/bench_datapath" -v 2>&1) ||
        { tail -5 <<<"$out" | sed 's/^/    /'; return 1; }
    grep -q '^bytes checked' <<<"$out"
}

loaded_suite_passes() {
    local log=$build/logs/check-cuda-ucx.log
    mkdir -p "$build/logs"
    if ! (cd "$build/test/gtest" && env LD_LIBRARY_PATH="$ldir" \
              UCX_CUDA_IPC_NS_DRIVER="$cudasim" GTEST_FILTER="$filter" \
              "$top/test/gtest/run_shards.sh" ./gtest) >"$log" 2>&1; then
        grep -E '^\[  FAILED  \] ' "$log" | sed 's/^/    /'
        echo "    log: $log"
        return 1
    fi
    grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ tests' "$log" | sed 's/^/    /'
}

loaded_cu_cpy_ns_steps_aside() {
    local out
    out=$(env "$plugin" LD_LIBRARY_PATH="$ldir" UCX_CUDA_IPC_NS_DRIVER="$cudasim" \
          "$ucx_info" -d) || return 1
    tl_listed cuda_copy "$out" && tl_listed cuda_ipc "$out" &&
    tl_listed cu_ipc_ns "$out" && ! tl_listed cu_cpy_ns "$out"
}

loaded_cu_cpy_ns_forced() {
    local out
    out=$(env "$plugin" LD_LIBRARY_PATH="$ldir" UCX_CUDA_IPC_NS_DRIVER="$cudasim" \
          UCX_CUDA_CPY_NS_ENABLE=y "$ucx_info" -d) || return 1
    tl_listed cuda_copy "$out" && tl_listed cu_cpy_ns "$out"
}

check "not loaded: UCX's log says libuct_cuda needs libcuda.so.1" no_driver_reason_logged
check "not loaded: ucx_info -d lists cu_ipc_ns and cu_cpy_ns, no cuda_copy/cuda_ipc" \
    not_loaded_ours_carry
check "the emulator has every driver entry libuct_cuda and libucm_cuda import" no_entry_missing
check "loaded (emulator as libcuda.so.1): cuda_copy, cuda_ipc and cu_ipc_ns listed, cu_cpy_ns steps aside" \
    loaded_cu_cpy_ns_steps_aside
check "loaded, UCX_CUDA_CPY_NS_ENABLE=y: cu_cpy_ns listed beside cuda_copy" \
    loaded_cu_cpy_ns_forced
for tl in cuda_ipc cu_ipc_ns; do
    for mem in vmm legacy; do
        check "loaded, UCT: $tl puts and gets $mem memory of another process, bytes checked" \
            stock_uct_moves_bytes $tl $mem
    done
done
check "loaded: the UCP, NIXL-pattern and pod tests pass with UCX's cuda_copy and cuda_ipc ($filter)" \
    loaded_suite_passes
checks_summary
