#!/usr/bin/env bash
# Test command: builds (installing what is missing) in ${BUILD_DIR:-build/}
# and runs the whole suite: the gtest suite through `make check`, the module
# activation checks against the installed ucx_info, a short run of the demo
# (ucx_perftest between two pods over cu_ipc_ns, a few sizes), and the rkey
# parser fuzz run (FUZZ_SECONDS, default 30).
# One progress line per step; make check and the fuzz run write to
# $BUILD_DIR/logs/{check,fuzz}.log, shown when they fail. The output ends
# with the results CI reads: the gtest summary ("[  PASSED  ] N tests."),
# the activation checks ("N passed, N failed"), "perftest-ns: all runs
# passed" and "tests: fuzz run OK".
set -euo pipefail
prog=tests
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"
build=${BUILD_DIR:-$top/build}
export BUILD_DIR=$build

"$top/contrib/build.sh"

cd "$build"
say "make check (the gtest suite)"
if ! make -j"$(nproc)" check >logs/check.log 2>&1; then
    if [ -f test/gtest/gtest.log ]; then
        grep -E '^\[  (FAILED|SKIPPED) ' test/gtest/gtest.log >&2 || true
        echo "$prog: gtest output: $build/test/gtest/gtest.log" >&2
    fi
    fail_log "$build/logs/check.log" "make check"
fi
grep -E '^\[  (PASSED|SKIPPED|FAILED) ' test/gtest/gtest.log || true

say "activation checks (installed ucx_info, module preloaded)"
"$top/test/activation/check_activation.sh" "$build"
say "the plain driver-API program (no module) on the emulator"
"$build/test/cudasim/cuda_ipc_demo" "$build/test/cudasim/.libs/libcudasim.so"
# the demo, short: every run must cross PID and network namespaces and pass
say "ucx_perftest between two pods, short"
SHORT=1 BUILD_DIR=$build OUT_DIR=$build/perftest-ci \
    TESTS=uct:put_bw,uct:get_bw,uct:put_lat,ucp:tag_bw,ucp:tag_lat,ucp:stream_bw,ucp:ucp_put_bw,ucp:ucp_get \
    "$top/contrib/perftest-ns.sh"
step "$build/logs/fuzz.log" "fuzz run of the rkey parser (${FUZZ_SECONDS:-30} s)" \
    make -s fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
grep -E '^(#[0-9]+.*DONE|Done [0-9]+ runs|== corpus)' logs/fuzz.log | sed "s/^/$prog: /" || true
say "fuzz run OK (log: $build/logs/fuzz.log)"
