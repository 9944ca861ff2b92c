#!/usr/bin/env bash
# Test command: builds (installing what is missing) in ${BUILD_DIR:-build/}
# and runs the whole suite: the gtest suite through `make check`, the module
# activation checks against the installed ucx_info, a short run of the demo
# (ucx_perftest between two pods over cu_ipc_ns, a few sizes), and the rkey
# parser fuzz run (FUZZ_SECONDS, default 30).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}

"$top/contrib/build.sh"

cd "$build"
if ! make -j"$(nproc)" check >check.out 2>&1; then
    cat test/gtest/gtest.log 2>/dev/null || tail -100 check.out
    exit 1
fi
grep -E '^\[  (PASSED|SKIPPED|FAILED) ' test/gtest/gtest.log || true

"$top/test/activation/check_activation.sh" "$build"
# the plain driver-API program (no module) on the emulator
"$build/test/cudasim/cuda_ipc_demo" "$build/test/cudasim/.libs/libcudasim.so"
# the demo, short: every run must cross PID and network namespaces and pass
SHORT=1 BUILD_DIR=$build OUT_DIR=$build/perftest-ci \
    TESTS=uct:put_bw,uct:get_bw,uct:put_lat,ucp:tag_bw,ucp:tag_lat,ucp:stream_bw,ucp:ucp_put_bw,ucp:ucp_get \
    "$top/contrib/perftest-ns.sh"
make -s fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
