#!/usr/bin/env bash
# GPU command: everything the project can check, on a machine with a GPU and
# its driver (libcuda.so.1), against UCX 1.13.1 (Debian's, BUILD_DIR,
# default build/). Run as root (the pod runs need namespaces).
#
#   1. build            contrib/build.sh
#   2. suite            the gtest suite on the real driver, less the tests
#                       test/gpu-skip.list names (emulator only, each with
#                       its reason; docs/testing.md); every pattern of the
#                       list must still name a test
#   3. demo             the plain driver-API program (test/cudasim's
#                       cuda_ipc_demo: two processes, legacy IPC and VMM fd)
#   4. activation       test/activation/check_activation.sh, also with the
#                       driver in use
#   5. perftest         ucx_perftest between two pods (contrib/perftest-ns.sh)
#   6. benchmark        test/bench/bench_datapath: put/get vs cuMemcpyDtoD
#   7. ASan             the suite built with ASan+UBSan
#                       (contrib/run-sanitizers.sh asan) on the real driver,
#                       with protect_shadow_gap=0 (CUDA maps memory where
#                       ASan's shadow gap is); GPU_ASAN=0 skips it
# and a summary with the figures. A failed step does not stop the later
# ones; the exit status is 1 when one failed.
#
# usage: contrib/gpu-check.sh [--dry | --no-build]
#   --dry  the same steps with the CPU emulator as the driver, short: the
#          build as it is (not rebuilt), the suite only DRY_FILTER (default
#          a sample) less the skip list, short pod and benchmark runs, ASan
#          only DRY_FILTER and only when BUILD-asan exists. CI runs it
#          (contrib/run-tests.sh) so that the command stays runnable.
#   --no-build  every step on the driver, with the build as it is: for a
#          GPU machine that reaches no package registry, where the builds
#          come from contrib/gpu-bundle.sh (contrib/gpu-unpack.sh)
# Environment: BUILD_DIR; UCX_CUDA_IPC_NS_DRIVER (default libcuda.so.1 with
# a GPU, contrib/driver.sh; the emulator with --dry); OUT_DIR (default
# BUILD/gpu-check); GPU_ASAN=0; DRY_FILTER; GPU_STEPS (the steps to run, by
# name: default build,suite,demo,activation,perftest,bench,asan);
# GTEST_SHARDS (the suite as that many shards side by side,
# test/gtest/run_shards.sh; default 1).
# One progress line per step; each step's output goes to OUT_DIR/STEP.log,
# whose end is shown when it fails.
set -uo pipefail
prog=gpu-check
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"
build=${BUILD_DIR:-$top/build}
dry=0 build_it=1
case ${1:-} in
--dry) dry=1 build_it=0 ;;
--no-build) build_it=0 ;;
"") ;;
*) sed -n '2,40p' "$0"; exit 2 ;;
esac
steps=,${GPU_STEPS:-build,suite,demo,activation,perftest,bench,asan},
out=${OUT_DIR:-$build/gpu-check}
mkdir -p "$out"
skip_list=$top/test/gpu-skip.list
: "${DRY_FILTER:=test_ctx.*:test_cudasim_stream.*:test_cudasim_faults.*:scenarios/datapath.*:datapath_pair.short_and_bcopy_copy_through_the_driver}"
results=()   # "STATUS step: figures", in order
failed=0

# run STEP WHAT FIGURES_CMD cmd...: the step's output to OUT_DIR/STEP.log;
# its status and the figures that FIGURES_CMD (a function, given the log)
# prints. A step that GPU_STEPS leaves out is skipped.
run() {
    local name=$1 what=$2 figures=$3 log=$out/$1.log rc
    shift 3
    [[ $steps == *,$name,* ]] || { skip "$name" "not in GPU_STEPS"; return 0; }
    say "$what (log $log)"
    ("$@") </dev/null >"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        results+=("PASS $name: $($figures "$log")")
    else
        failed=1
        results+=("FAIL $name (exit $rc): $($figures "$log")")
        {
            echo "$prog: $what FAILED; the last 30 lines of $log:"
            tail -n 30 "$log" | sed 's/^/    /'
        } >&2
    fi
}
skip() { say "$1: skipped: $2"; results+=("SKIP $1: $2"); }
no_figures() { :; }

# ---- 1. build, and the driver ---------------------------------------------
if [ $dry = 1 ]; then
    [ -x "$build/test/cudasim/cuda_ipc_demo" ] ||
        { say "--dry reuses a build: none in $build (contrib/build.sh)"; exit 2; }
    skip build "dry run: the build in $build as it is"
    driver=$(readlink -f "$build/test/cudasim/.libs/libcudasim.so")
    why="the CPU emulator (dry run)"
else
    if [ $build_it = 1 ]; then
        run build "build (contrib/build.sh, $build)" no_figures "$top/contrib/build.sh"
    else
        skip build "--no-build: the build in $build as it is"
    fi
    { read -r driver; read -r why; } < <(UCX_CUDA_IPC_NS_DRIVER=${UCX_CUDA_IPC_NS_DRIVER:-} \
                                         "$top/contrib/driver.sh" "$build") ||
        { say "no driver: see contrib/driver.sh"; exit 1; }
    case $driver in
    */libcudasim.so) say "warning: no GPU here, the driver is the emulator (use --dry)" ;;
    esac
fi
export UCX_CUDA_IPC_NS_DRIVER=$driver
say "driver: $driver ($why)"

# ---- 2. the suite, less the skip list ------------------------------------
# the skip list's patterns, each checked against the suite's tests
skip_patterns() { sed -n 's/^\([^#][^ ]*\) @@ .*/\1/p' "$skip_list"; }
check_skip_list() {
    local list pat stale=0
    list=$(awk '/^[^ ]/ {s = $1} /^  / {print s $1}' < <("$build/test/gtest/gtest" --gtest_list_tests))
    while read -r pat; do
        # a gtest pattern: * and ? only
        if ! grep -q -x -- "$(sed 's/[.[\^$]/\\&/g; s/\*/.*/g; s/?/./g' <<<"$pat")" <<<"$list"; then
            echo "test/gpu-skip.list: '$pat' names no test of the suite"
            stale=1
        fi
    done < <(skip_patterns)
    echo "test/gpu-skip.list: $(skip_patterns | wc -l) patterns, $(grep -c . <<<"$list") tests in the suite"
    return $stale
}
suite() {
    if [ $build_it = 1 ]; then
        make -C "$build" -j"$(nproc)" >/dev/null && make -C "$build/test/gtest" -j"$(nproc)" gtest >/dev/null ||
            return 1
    fi
    check_skip_list || return 1
    local filter
    filter=$(skip_patterns | paste -sd: -)
    [ $dry = 1 ] && filter="$DRY_FILTER-$filter" || filter="-$filter"
    echo "GTEST_FILTER=$filter GTEST_SHARDS=${GTEST_SHARDS:=1}"
    GTEST_SHARDS=$GTEST_SHARDS "$top/test/gtest/run_shards.sh" "$build/test/gtest/gtest" --gtest_filter="$filter"
}
gtest_figures() {
    grep -E '^\[  (PASSED|SKIPPED|FAILED)  \] [0-9]+ test' "$1" | tr '\n' ' ' | sed 's/ *$//'
    grep -E '^\[  FAILED  \] [^ ]+\.' "$1" | sort -u | head -10 | sed 's/^\[  FAILED  \] / failed: /'
}
run suite "the gtest suite on the driver, less test/gpu-skip.list" gtest_figures suite

# ---- 3. the plain driver-API program -------------------------------------
run demo "the plain driver-API program (cuda_ipc_demo) on the driver" \
    no_figures "$build/test/cudasim/cuda_ipc_demo" "$driver"

# ---- 4. activation checks ------------------------------------------------
activation_figures() { grep -E '^[0-9]+ passed, [0-9]+ failed' "$1"; }
run activation "activation checks" activation_figures \
    "$top/test/activation/check_activation.sh" "$build"

# ---- 5. ucx_perftest between two pods ------------------------------------
perftest_figures() {
    grep -E 'all runs passed|run\(s\) FAILED' "$1" | sed 's/^perftest-ns: //'
    # the largest size of each bandwidth test
    awk -F'\t' 'NR > 1 && $1 ~ /_bw$/ && $8 == "ok" && $2 + 0 >= s[$1] + 0 {
                     s[$1] = $2; m[$1] = $1 " " $2 " B: " $4 " MB/s"
                 }
                 END {for (k in m) print " " m[k]}' "$out/perftest/results.tsv" 2>/dev/null
}
perftest() {
    local tests=uct:put_bw,uct:get_bw,uct:put_lat,ucp:tag_bw,ucp:ucp_put_bw,ucp:ucp_get
    if [ $dry = 1 ]; then
        SHORT=1 QUIET=1 TESTS=uct:put_bw,ucp:tag_bw SIZES=64K,4M \
            OUT_DIR="$out/perftest" "$top/contrib/perftest-ns.sh"
    else
        QUIET=1 TESTS=$tests OUT_DIR="$out/perftest" "$top/contrib/perftest-ns.sh"
    fi
}
run perftest "ucx_perftest between two pods (contrib/perftest-ns.sh)" perftest_figures perftest

# ---- 6. the benchmark ----------------------------------------------------
bench_figures() {
    grep -E '^ratio (put|get)/DtoD 64 MiB|^ratio 8 B put' "$1" | sed 's/^ratio / /'
}
bench() {
    if [ $dry = 1 ]; then
        BENCH_ROUNDS=1 BENCH_MIN_TIME=0.05 "$build/test/bench/bench_datapath" -n 1
    else
        "$build/test/bench/bench_datapath"
    fi
}
run bench "the benchmark (test/bench/bench_datapath)" bench_figures bench

# ---- 7. ASan -------------------------------------------------------------
asan_figures() { grep -E '^sanitizers: ASan\+UBSan: \[' "$1" | sed 's/^sanitizers: //'; }
asan() {
    ASAN_FILTER=$1 ASAN_EXTRA_OPTIONS=protect_shadow_gap=0 SAN_BUILD_BASE=$build \
        "$top/contrib/run-sanitizers.sh" asan
}
skip_filter="-$(skip_patterns | paste -sd: -)"
if [ "${GPU_ASAN:-1}" = 0 ]; then
    skip asan "GPU_ASAN=0"
elif [ $dry = 1 ] && [ ! -x "$build-asan/test/gtest/gtest" ]; then
    skip asan "dry run: no ASan build in $build-asan (contrib/run-sanitizers.sh asan makes one)"
elif [ $dry = 1 ]; then
    run asan "the suite with ASan+UBSan, protect_shadow_gap=0 ($build-asan)" asan_figures \
        asan "$DRY_FILTER$skip_filter"
else
    run asan "the suite with ASan+UBSan, protect_shadow_gap=0 ($build-asan)" asan_figures \
        asan "$skip_filter"
fi

# ---- summary -------------------------------------------------------------
say "summary (driver $driver; logs in $out):"
for r in "${results[@]}"; do
    echo "$prog: $r" | sed '2,$s/^/    /' >&2
done
if [ $failed = 1 ]; then
    say "FAILED"
    exit 1
fi
say "all steps passed"
