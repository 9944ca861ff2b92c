#!/usr/bin/env bash
# Test command: builds (installing what is missing) and runs the whole suite
# against UCX 1.13.1 (Debian's, in ${BUILD_DIR:-build/}), then against
# UCX 1.22 (in ${BUILD_DIR_122:-build-1.22/}) when one is at hand.
#
# UCX 1.13.1: the gtest suite through `make check`, the module activation
# checks against the installed ucx_info (module preloaded), a short run of
# the demo (ucx_perftest between two pods over cu_ipc_ns, a few sizes), and
# the benchmark's verdict rule on written ratio lines
# (test/bench/check_bench_verdicts.sh), the rkey parser fuzz run
# (FUZZ_SECONDS, default 30), then the whole suite
# again built with ASan+UBSan and with TSan (contrib/run-sanitizers.sh, in
# BUILD-asan/ and BUILD-tsan/ beside the build dir; SKIP_SANITIZERS=1 skips),
# the other-uid tests of each build with the clone closed to other uids
# (test/other_uid/check_other_uid.sh: a tmpfs of mode 0700 over it in a
# mount namespace, as a clone under /root is), the GPU proof's dry run
# (contrib/gpu-proof.sh --dry: its steps on the emulator, short, archive in
# BUILD/gpu-proof/, summary table in BUILD/logs/gpu-proof.log) and its check
# that a hung or killed step still leaves the archive
# (test/gpu/check_gpu_proof.sh, log BUILD/logs/gpu-proof-check.log), and the
# mutation check
# (test/mutation/run_mutations.sh, log BUILD/logs/mutation.log;
# SKIP_MUTATIONS=1 skips).
# UCX 1.22: the build (UCX=1.22 contrib/build.sh), `make check` and its
# other-uid tests with the clone closed, the
# activation checks against 1.22's own ucx_info/ucx_perftest through
# UCX_PLUGIN_PATH and after make install into (a scratch copy of) its module
# dir (test/activation/check_activation.sh BUILD plugin), and the same short
# pod demo with 1.22's ucx_perftest and UCX_PLUGIN_PATH on both sides, and
# NIXL between two pods (contrib/setup-nixl.sh builds NIXL 1.4.0 once from
# ../shared/nixl, then test/nixl's check-nixl; log BUILD/logs/nixl.log;
# skipped with a line saying why without the tarballs).
# Which UCX 1.22:
#   UCX_PREFIX=DIR UCX_SRC=DIR   your own installed UCX 1.22 and its configured
#                                source tree (as for contrib/build.sh)
#   otherwise                    contrib/setup-ucx.sh builds and caches one from
#                                ../shared/ucx/ucx-1.22.0.tar.gz (UCX122_TARBALL)
#   SKIP_UCX122=1                only 1.13.1; without a tarball and without
#                                UCX_PREFIX, 1.22 is skipped with a line saying so
# UCX 1.21.0, the release Dynamo's containers pin (contrib/setup-ucx.sh with
# UCX_VER=1.21.0, cached; build dir ${BUILD_DIR_121:-build-1.21/};
# SKIP_UCX121=1 skips): the suite's UCP and NIXL-pattern tests (the
# gtest_ucp binary, not the whole suite), the activation checks and the ABI guard with the
# module preloaded, and a short run between runc pods with UCX_TLS unset.
# UCX 1.22 built with CUDA as NIXL builds it (contrib/setup-ucx.sh cuda, cached;
# build dir ${BUILD_DIR_122_CUDA:-build-1.22-cuda/}; SKIP_UCX122_CUDA=1 skips):
# make check on the suite's UCX-dependent part (GTEST_FILTER_CUDA), the
# activation checks, the module beside UCX's own CUDA modules
# (test/activation/check_cuda_ucx.sh: not loaded, and loaded with the
# emulator as libcuda.so.1, where the suite's UCP, NIXL-pattern and pod tests
# run again with UCX's cuda_copy and cuda_ipc, log
# BUILD/logs/check-cuda-ucx.log), the ABI guard across the three builds
# (test/activation/check_abi_guard.sh), contrib/install-into-wheel.sh on a
# directory laid out as NIXL's wheel (test/wheel/check_wheel.sh) and, when
# the NIXL step passed, NIXL between pods in that layout (its nixl_pods and
# NIXL's libraries bundled as the wheel bundles them, the module found in
# nixl.libs/ucx/), and the short pod run.
#
# One progress line per step; make check and the fuzz run write to
# BUILD/logs/{check,fuzz}.log, shown when they fail. 1.13.1 stops at the
# first failure; the 1.22 steps all run, and the run then fails at the end
# ("tests: FAILED on UCX 1.22.0: ..."). The output carries the
# results CI reads, once per UCX version: the gtest summary ("[  PASSED  ] N
# tests."), the activation checks ("N passed, N failed"), "perftest-ns: all
# runs passed"; then "tests: fuzz run OK" and the sanitizer summaries
# ("sanitizers: ASan+UBSan: [  PASSED  ] N tests., 0 sanitizer report(s)")
# (1.13.1) and the last line,
# "tests: all passed (UCX ...)".
set -euo pipefail
prog=tests
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"
build=${BUILD_DIR:-$top/build}
build122=${BUILD_DIR_122:-$top/build-1.22}
# the user's UCX 1.22 (UCX_PREFIX/UCX_SRC) is for the second pass only
ucx_prefix=${UCX_PREFIX:-} ucx_src=${UCX_SRC:-}
unset UCX UCX_PREFIX UCX_SRC
export BUILD_DIR=$build
t0=$SECONDS

# where the time goes: a lap per part, listed before the last line
laps=()
lap_t=$SECONDS
lap() { laps+=("$1 $((SECONDS - lap_t)) s"); lap_t=$SECONDS; }
say_laps() { say "times: $(IFS=,; echo "${laps[*]}" | sed 's/,/, /g')"; }

failed=()   # the UCX 1.22 steps that failed (1.13.1 stops at the first)

# the names of the tests gtest log $1 lists as failed, comma-separated
failed_tests() {
    sed -n 's/^\[  FAILED  \] \([^ ,]*\.[^ ,]*\).*/\1/p' "$1" 2>/dev/null |
        sort -u | paste -sd, - | sed 's/,/, /g'
}

# make check in build dir $1; the gtest summary on stdout. A failure ends
# the run, or with $2 = keep-going is added to $failed (the next steps run)
make_check() {
    cd "$1"
    say "make check (the gtest suite)"
    if ! make -j"$(nproc)" check >logs/check.log 2>&1; then
        if [ "${2:-}" = keep-going ]; then
            ( fail_log "$1/logs/check.log" "make check" ) || true
            echo "$prog: gtest output: $1/test/gtest/gtest.log" >&2
            # the failed tests' names go into the run's last line, which CI
            # always shows
            failed+=("make check ($(failed_tests test/gtest/gtest.log))")
        else
            if [ -f test/gtest/gtest.log ]; then
                grep -E '^\[  (FAILED|SKIPPED) ' test/gtest/gtest.log >&2 || true
                echo "$prog: gtest output: $1/test/gtest/gtest.log" >&2
            fi
            fail_log "$1/logs/check.log" "make check ($(failed_tests test/gtest/gtest.log))"
        fi
    fi
    grep -E '^\[  (PASSED|SKIPPED|FAILED) ' test/gtest/gtest.log || true
}

# ---- UCX 1.13.1 (Debian's), module preloaded ----------------------------
say "== UCX 1.13.1 (Debian's; module activated with LD_PRELOAD) in $build"
"$top/contrib/build.sh"

make_check "$build"

say "activation checks (installed ucx_info, module preloaded)"
"$top/test/activation/check_activation.sh" "$build" preload
step "$build/logs/bench-verdicts.log" \
    "the benchmark's verdict rule and run comparison (test/bench/check_bench_verdicts.sh)" \
    "$top/test/bench/check_bench_verdicts.sh"
step "$build/logs/icount.log" \
    "instruction counts of the hot paths vs test/bench/icount.expected (test/bench/check_icount.sh)" \
    env ICOUNT_BUILD_DIR="$build" "$top/test/bench/check_icount.sh"
grep -E '^icount:   ' "$build/logs/icount.log" | sed "s/^icount:/$prog:/" >&2 || true
say "the plain driver-API program (no module) on the emulator"
"$build/test/cudasim/cuda_ipc_demo" "$build/test/cudasim/.libs/libcudasim.so"
# the demo, short: every run must cross PID and network namespaces and pass
pod_tests=uct:put_bw,uct:get_bw,uct:put_lat,ucp:tag_bw,ucp:tag_lat,ucp:stream_bw,ucp:ucp_put_bw,ucp:ucp_get
say "ucx_perftest between two pods, short"
SHORT=1 BUILD_DIR=$build OUT_DIR=$build/perftest-ci TESTS=$pod_tests \
    "$top/contrib/perftest-ns.sh"
lap "1.13.1 build and suite"
# the same between two pods as Kubernetes makes them: runc containers with
# containerd's capabilities and seccomp profile (contrib/pods-runc.sh);
# skipped with its reason where runc cannot start one
say "ucx_perftest between two runc pods (containerd's capabilities and seccomp profile), short"
pods_rc=0
"$top/contrib/pods-runc.sh" >"$build/logs/pods-runc.log" 2>&1 || pods_rc=$?
case $pods_rc in
0) grep -E '^pods-runc: (probe|all runs passed)' "$build/logs/pods-runc.log" ;;
77) sed -n 's/^pods-runc: skipped: /tests: runc pods skipped: /p' "$build/logs/pods-runc.log" ;;
*) fail_log "$build/logs/pods-runc.log" "ucx_perftest between two runc pods" ;;
esac
# user-namespaced pods (hostUsers: false: disjoint uid ranges, the socket
# volume idmapped into each) with UCX_CUDA_IPC_NS_USERNS_PEERS=y, and
# UCX_TLS unset (UCX's default transports, as NIXL runs): every memory,
# one UCP test and size, and the byte check
if [ $pods_rc = 0 ]; then
    say "the same between user-namespaced runc pods (UCX_CUDA_IPC_NS_USERNS_PEERS=y), UCX_TLS unset"
    pods_rc=0
    USERNS=1 UCP_TLS= TESTS=ucp:tag_bw SIZES=4M OUT_DIR=$build/pods-runc-userns \
        "$top/contrib/pods-runc.sh" >"$build/logs/pods-runc-userns.log" 2>&1 || pods_rc=$?
    case $pods_rc in
    0) grep -E '^pods-runc: (user namespaces|all runs passed)' "$build/logs/pods-runc-userns.log" ;;
    77) sed -n 's/^pods-runc: skipped: /tests: user-namespaced runc pods skipped: /p' "$build/logs/pods-runc-userns.log" ;;
    *) fail_log "$build/logs/pods-runc-userns.log" "ucx_perftest between two user-namespaced runc pods" ;;
    esac
fi
lap "runc pods"
step "$build/logs/fuzz.log" "fuzz run of the rkey parser (${FUZZ_SECONDS:-30} s)" \
    make -s fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
grep -E '^(#[0-9]+.*DONE|Done [0-9]+ runs|== corpus)' logs/fuzz.log | sed "s/^/$prog: /" || true
say "fuzz run OK (log: $build/logs/fuzz.log)"
lap "fuzz run"
# the suite again under ASan+UBSan and under TSan (contrib/run-sanitizers.sh)
if [ "${SKIP_SANITIZERS:-0}" = 1 ]; then
    say "sanitizer runs: skipped (SKIP_SANITIZERS=1)"
else
    SAN_BUILD_BASE=$build "$top/contrib/run-sanitizers.sh" asan tsan
fi
lap "sanitizers"
# the other-uid tests of each build again, the clone closed to other uids as
# one under /root is: nothing their peer (uid 65534) needs may be read from it
if [ "${SKIP_SANITIZERS:-0}" = 1 ]; then
    "$top/test/other_uid/check_other_uid.sh" "plain:$build"
else
    "$top/test/other_uid/check_other_uid.sh" "plain:$build" \
        "asan:$build-asan" "tsan:$build-tsan"
fi
lap "other-uid"
# each mutation of test/mutation/mutations.list must turn the suite red
if [ "${SKIP_MUTATIONS:-0}" = 1 ]; then
    say "mutation check: skipped (SKIP_MUTATIONS=1)"
else
    step "$build/logs/mutation.log" "mutation check (test/mutation/run_mutations.sh)" \
        "$top/test/mutation/run_mutations.sh" --no-baseline   # make check just passed
    grep -E '^mutation: [0-9]+ mutations' "$build/logs/mutation.log" | sed "s/^/$prog: /"
fi
lap "mutations"
versions="1.13.1"

# ---- UCX 1.22, the module loaded as a plugin ------------------------------
nixl_in_wheel=()   # NIXL's prefix and nixl_pods, once the NIXL step passed
tarball=${UCX122_TARBALL:-$top/../shared/ucx/ucx-1.22.0.tar.gz}
if [ "${SKIP_UCX122:-0}" = 1 ]; then
    say "UCX 1.22: skipped (SKIP_UCX122=1)"
elif [ -z "$ucx_prefix" ] && [ ! -f "$tarball" ]; then
    say "UCX 1.22: skipped: no tarball at $tarball (UCX122_TARBALL=FILE, or UCX_PREFIX=DIR UCX_SRC=DIR)"
else
    if [ -n "$ucx_prefix" ]; then
        [ -n "$ucx_src" ] || { say "UCX_PREFIX=$ucx_prefix needs UCX_SRC (its configured source tree)"; exit 2; }
        say "== UCX from $ucx_prefix (UCX_PREFIX; module loaded through UCX_PLUGIN_PATH) in $build122"
        BUILD_DIR=$build122 UCX_PREFIX=$ucx_prefix UCX_SRC=$ucx_src "$top/contrib/build.sh"
    else
        say "== UCX 1.22.0 (contrib/setup-ucx.sh; module loaded through UCX_PLUGIN_PATH) in $build122"
        BUILD_DIR=$build122 UCX=1.22 "$top/contrib/build.sh"
    fi
    ver=$(sed -n 's/^UCX_VERSION = //p' "$build122/Makefile")
    # every 1.22 step runs even when one before it failed; the run fails at the end
    make_check "$build122" keep-going
    "$top/test/other_uid/check_other_uid.sh" "plain:$build122" ||
        failed+=("other-uid tests with the clone closed")
    say "activation checks (UCX $ver's ucx_info, UCX_PLUGIN_PATH; make install into its module dir)"
    "$top/test/activation/check_activation.sh" "$build122" plugin || failed+=("activation checks")
    say "ucx_perftest between two pods, short (UCX $ver's ucx_perftest, UCX_PLUGIN_PATH)"
    SHORT=1 BUILD_DIR=$build122 OUT_DIR=$build122/perftest-ci TESTS=$pod_tests \
        "$top/contrib/perftest-ns.sh" || failed+=("ucx_perftest between two pods")
    versions+=" and $ver"
    # NIXL between two pods (test/nixl), NIXL built once by setup-nixl.sh
    # from ../shared/nixl against this UCX; skipped with its reason without
    # the tarballs
    lap "1.22 build and suite"
    nixl_rc=0
    nixl_prefix=$(UCX_PREFIX=$ucx_prefix "$top/contrib/setup-nixl.sh" | tail -n 1) ||
        nixl_rc=$?
    if [ $nixl_rc = 77 ]; then
        say "NIXL: skipped (the line above says why)"
    elif [ $nixl_rc != 0 ]; then
        failed+=("NIXL build (contrib/setup-nixl.sh)")
    else
        say "NIXL between two pods (test/nixl: WRITE and READ descriptor lists over cu_ipc_ns)"
        if make -C "$build122/test/nixl" check-nixl NIXL_PREFIX="$nixl_prefix" \
                >"$build122/logs/nixl.log" 2>&1; then
            grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$build122/logs/nixl.log" || true
            nixl_in_wheel=("$nixl_prefix" "$build122/test/nixl/nixl_pods")
            versions+=" (NIXL $(basename "${nixl_prefix%-install}" | sed 's/^nixl-//'))"
        else
            ( fail_log "$build122/logs/nixl.log" "NIXL between two pods" ) || true
            failed+=("NIXL between two pods")
        fi
    fi
    lap "NIXL build and test"
    if [ ${#failed[@]} -gt 0 ]; then
        say_laps
        say "FAILED on UCX $ver: $(IFS=,; echo "${failed[*]}" | sed 's/,/, /g') (1.13.1 passed; $((SECONDS - t0)) s)"
        exit 1
    fi
fi
# the GPU proof's steps on the emulator, short, on the 1.13.1 build (and
# NIXL between pods on the 1.22 one, built above): a progress line per
# step here, the summary table in the log (shown when it fails)
"$top/contrib/gpu-proof.sh" --dry "$build/gpu-proof" >"$build/logs/gpu-proof.log" ||
    fail_log "$build/logs/gpu-proof.log" "the GPU proof, dry run (contrib/gpu-proof.sh --dry)"
# its summary's last line names the archive it wrote
proof_archive=$build/gpu-proof/$(sed -n 's/.*; archive \(gpu-proof-[^ ]*\.tgz\)$/\1/p' \
                                     "$build/logs/gpu-proof.log" | tail -n 1)
step "$build/logs/gpu-proof-check.log" \
    "the GPU proof keeps its archive when a step hangs or the proof is killed (test/gpu/check_gpu_proof.sh)" \
    "$top/test/gpu/check_gpu_proof.sh" "$proof_archive"
lap "GPU proof dry run"
# ---- UCX 1.22 built with CUDA as NIXL builds it, the ABI guard, the wheel ----
# (README "With a UCX built with CUDA", "With NIXL's Python wheel"; docs/ucx-versions.md)
if [ "${SKIP_UCX122:-0}" = 1 ] || [ "${SKIP_UCX122_CUDA:-0}" = 1 ] || [ ! -f "$build122/Makefile" ]; then
    say "UCX 1.22 built with CUDA: skipped (SKIP_UCX122_CUDA=1, or no UCX 1.22 build)"
else
    build122c=${BUILD_DIR_122_CUDA:-$top/build-1.22-cuda}
    say "== UCX 1.22.0 built with CUDA (contrib/setup-ucx.sh cuda, cached) in $build122c"
    BUILD_DIR=$build122c UCX=1.22-cuda "$top/contrib/build.sh"
    lap "CUDA UCX and module build"
    # the suite's part that depends on how UCX was built: loading, UCP, the
    # data path; not the emulator's, the driver table's or the broker's own
    # tests, which run on both builds above (docs/testing.md)
    GTEST_FILTER=${GTEST_FILTER_CUDA:--*test_cudasim_*:test_driver*:driver_calls/*:test_fdx*:broker_dos*:trust*:chunk_batches*:test_owner_copy*:first_use*} \
        make_check "$build122c" keep-going
    say "activation checks (the CUDA-built UCX's ucx_info, UCX_PLUGIN_PATH; make install)"
    "$top/test/activation/check_activation.sh" "$build122c" plugin ||
        failed+=("activation checks (CUDA)")
    lap "CUDA-built UCX suite"
    say "beside UCX's own CUDA modules (not loaded; loaded: the UCP, NIXL-pattern and pod tests with UCX's cuda_copy and cuda_ipc)"
    "$top/test/activation/check_cuda_ucx.sh" "$build122c" || failed+=("beside UCX's CUDA modules")
    lap "beside UCX's CUDA modules"
    say "ABI guard: each module loaded by another version and another configuration"
    for pair in "$build122 $build" "$build $build122" "$build122 $build122c"; do
        # shellcheck disable=SC2086
        "$top/test/activation/check_abi_guard.sh" $pair || failed+=("ABI guard ($pair)")
    done
    say "NIXL's wheel layout: contrib/install-into-wheel.sh on a fixture, NIXL between pods in it"
    "$top/test/wheel/check_wheel.sh" "$(sed -n 's/^UCX_LIBDIR = //p' "$build122c/Makefile")/.." \
        "$build122c" 1.22-cuda "${nixl_in_wheel[@]}" || failed+=("wheel layout")
    say "ucx_perftest between two pods, short (the CUDA-built UCX)"
    SHORT=1 BUILD_DIR=$build122c OUT_DIR=$build122c/perftest-ci TESTS=$pod_tests \
        "$top/contrib/perftest-ns.sh" || failed+=("ucx_perftest between two pods (CUDA)")
    lap "CUDA-built UCX checks"
    if [ ${#failed[@]} -gt 0 ]; then
        say_laps
        say "FAILED on UCX 1.22.0 built with CUDA: $(IFS=,; echo "${failed[*]}" | sed 's/,/, /g') ($((SECONDS - t0)) s)"
        exit 1
    fi
    versions+=" and 1.22.0 built with CUDA"
fi
# ---- UCX 1.21.0 as Dynamo's containers build it, the module preloaded ----
# (it loads no external plugin: docs/ucx-versions.md). The cheap part only:
# the build, the suite's UCP and NIXL-pattern tests (gtest_ucp), the
# activation checks, the ABI guard against 1.13.1 both ways, and a short
# run between runc pods with UCX_TLS unset
tarball121=${UCX121_TARBALL:-$top/../shared/ucx/ucx-1.21.0.tar.gz}
if [ "${SKIP_UCX121:-0}" = 1 ] || [ ! -f "$tarball121" ]; then
    say "UCX 1.21: skipped (SKIP_UCX121=1, or no tarball at $tarball121)"
else
    build121=${BUILD_DIR_121:-$top/build-1.21}
    say "== UCX 1.21.0 (contrib/setup-ucx.sh, cached; module preloaded) in $build121"
    BUILD_DIR=$build121 UCX=1.21 "$top/contrib/build.sh"
    lap "1.21 UCX and module build"
    # gtest_ucp: the suite's UCP, NIXL-pattern and ABI-guard tests alone,
    # without compiling the whole suite (test/gtest/Makefile.am)
    say "the suite's UCP and NIXL-pattern tests (gtest_ucp)"
    if make -C "$build121/test/gtest" -j"$(nproc)" gtest_ucp >"$build121/logs/gtest-ucp.log" 2>&1 &&
        (cd "$build121/test/gtest" && "$top/test/gtest/run_shards.sh" ./gtest_ucp) \
            >>"$build121/logs/gtest-ucp.log" 2>&1; then
        grep -E '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?' "$build121/logs/gtest-ucp.log" || true
    else
        ( fail_log "$build121/logs/gtest-ucp.log" "gtest_ucp" ) || true
        failed+=("gtest_ucp ($(failed_tests "$build121/logs/gtest-ucp.log"))")
    fi
    say "activation checks (UCX 1.21's ucx_info, module preloaded)"
    "$top/test/activation/check_activation.sh" "$build121" preload ||
        failed+=("activation checks (1.21)")
    say "ABI guard: the 1.21 module loaded by 1.13.1, and the 1.13.1 module by 1.21"
    for pair in "$build121 $build" "$build $build121"; do
        # shellcheck disable=SC2086
        "$top/test/activation/check_abi_guard.sh" $pair || failed+=("ABI guard ($pair)")
    done
    say "ucx_perftest between two runc pods, short (UCX 1.21's, module preloaded, UCX_TLS unset)"
    pods_rc=0
    BUILD_DIR=$build121 UCP_TLS= ALLOCS=vmm,legacy TESTS=uct:put_bw,ucp:tag_bw SIZES=4M \
        OUT_DIR=$build121/pods-runc "$top/contrib/pods-runc.sh" \
        >"$build121/logs/pods-runc.log" 2>&1 || pods_rc=$?
    case $pods_rc in
    0) grep -E '^pods-runc: all runs passed' "$build121/logs/pods-runc.log" ;;
    77) sed -n 's/^pods-runc: skipped: /tests: runc pods (1.21) skipped: /p' "$build121/logs/pods-runc.log" ;;
    *) ( fail_log "$build121/logs/pods-runc.log" "runc pods (UCX 1.21)" ) || true
       failed+=("runc pods (UCX 1.21)") ;;
    esac
    lap "1.21 checks"
    if [ ${#failed[@]} -gt 0 ]; then
        say_laps
        say "FAILED on UCX 1.21.0: $(IFS=,; echo "${failed[*]}" | sed 's/,/, /g') ($((SECONDS - t0)) s)"
        exit 1
    fi
    versions+=" and 1.21.0"
fi
say_laps
say "all passed (UCX $versions) in $((SECONDS - t0)) s"
