#!/usr/bin/env bash
# Build the module, the CUDA emulator and the test suite with sanitizers, out
# of the source tree (UCX 1.13.1, Debian's), and run the whole suite:
#   asan: build-asan/, --enable-sanitizers=address,undefined (leaks too)
#   tsan: build-tsan/, --enable-sanitizers=thread: the broker thread, the
#         emulator's copy engine threads, the thread tests (datapath
#         threads.*, ucp_threads.*) and the NIXL progress thread.
#         UCM's mmap hooks are off (UCX_MEM_MMAP_HOOK_MODE=none): its madvise
#         hook runs while glibc frees an exiting thread's stack, after TSan
#         dropped that thread's state, and crashes inside libtsan.
#         die_after_fork=0: the fork tests start a broker thread in the child
#         of a threaded parent.
# Usage: contrib/run-sanitizers.sh [asan] [tsan]   (default: both)
# Environment: SAN_BUILD_BASE (default: build in the source tree; the build
#              dirs are BASE-asan and BASE-tsan), TSAN_FILTER, ASAN_FILTER
#              (gtest filters).
# One progress line per step; configure and make write to DIR/logs/, the
# suite to DIR/gtest.log. Exit status 0 when every run passed with no
# sanitizer report; otherwise the failed tests and the first report are
# shown. Suppressions (UCX internals only, each justified) are in
# contrib/sanitizers/ (none needed so far); the sanitizer options are in
# contrib/sanitizers/env.sh, which hands the processes copies of the
# suppression files under /tmp (a peer of another uid cannot read the clone).
set -euo pipefail
prog=sanitizers
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"
. "$top/contrib/sanitizers/env.sh"
base=${SAN_BUILD_BASE:-$top/build}
: "${ASAN_FILTER:=*}"
# TSan runs each test once per thread structure (the ASan run, all of them):
# - forked_child_starts_own_broker: the child's broker thread gets the
#   pthread id of the parent's, which TSan still holds ("dup thread with used
#   id"): a TSan limit with fork;
# - the variants that differ from a kept one only in what no thread of ours
#   sees: a network namespace (UCP's TCP device, the broker's socket by path;
#   other_pid_ns is kept), the memory kind or fd route of the scenarios
#   (vmm_other_pid_ns and legacy_same_ns kept), the GPU visibility case in
#   one PID namespace (same_gpu_other_pid_ns kept), UCP over 32 chunks of
#   2 MiB (the 4, 64 and 2,048 chunks of 4 KiB kept). They took a third of
#   the TSan run (docs/testing.md, "Sanitizers").
: "${TSAN_FILTER:=-test_fdx.forked_child_starts_own_broker:*/*other_pid_and_net_ns*:*/*other_net_ns:scenarios/datapath.put_get_all_sizes/vmm_same_ns:scenarios/datapath.put_get_all_sizes/vmm_importer_pidfd_getfd_blocked:pods/ucp_pair_gpus.*/same_gpu_same_pid_ns:namespaces/ucp_pair_chunks.*/other_pid_ns}"
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(asan tsan)
for kind in "${kinds[@]}"; do
    case $kind in
    asan|tsan) ;;
    *) echo "run-sanitizers: unknown kind '$kind' (asan, tsan)" >&2; exit 2 ;;
    esac
done

ucx_src=$("$top/contrib/setup-deps.sh" | tail -n 1)
if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
    step "$base-asan/logs/autogen.log" "autogen" in_dir "$top" ./autogen.sh
fi

configure_san() { # sanitizers
    if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
        "$top/configure" --with-ucx-src="$ucx_src" --prefix="$PWD/install" \
            --enable-sanitizers="$1"
    fi
}

make_san() {
    make -j"$(nproc)" && make -j"$(nproc)" -C test/gtest gtest
}

# the failed tests and the first sanitizer report of log $1
show_failure() {
    {
        grep -E '^\[  FAILED  \] [^ ]+' "$1" | sort -u | head -20
        awk '/^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|.*runtime error:)/ {p = 1}
             p && n < 40 {print; n++}' "$1"
    } | sed 's/^/    /' >&2
}

# the suppression files, where a peer of another uid can read them too
san_stage_supp
trap 'rm -rf "$san_supp_dir"' EXIT

rc=0
for kind in "${kinds[@]}"; do
    start=$SECONDS
    dir=$base-$kind
    mkdir -p "$dir/logs"
    case $kind in
    asan) sanitizers=address,undefined; what="ASan+UBSan"; filter=$ASAN_FILTER ;;
    tsan) sanitizers=thread;            what="TSan";       filter=$TSAN_FILTER ;;
    esac
    step "$dir/logs/configure.log" "$what: configure ($dir)" \
        in_dir "$dir" configure_san "$sanitizers"
    step "$dir/logs/make.log" "$what: make (module, emulator, gtest)" \
        in_dir "$dir" make_san
    say "$what: the gtest suite (log $dir/gtest.log)"
    san_env "$kind"
    # as shards side by side (test/gtest/run_shards.sh, GTEST_SHARDS): most
    # tests wait on their peers, even under a sanitizer
    env "${san_env[@]}" "$top/test/gtest/run_shards.sh" "$dir/test/gtest/gtest" \
        --gtest_filter="$filter" >"$dir/gtest.log" 2>&1 || true
    summary=$(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$dir/gtest.log" |
              tr '\n' ' ' | sed 's/ *$//')
    # a sanitizer report in a peer process fails its test; one in the
    # runner itself may end it before gtest's summary
    reports=$(grep -c -E '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|.*runtime error:)' \
              "$dir/gtest.log" || true)
    say "$what: ${summary:-no gtest summary (the runner died)}, $reports sanitizer report(s), $((SECONDS - start)) s"
    if [ -z "$summary" ] || [ "$reports" != 0 ] ||
       grep -q -E '^\[  FAILED  \]' "$dir/gtest.log"; then
        show_failure "$dir/gtest.log"
        say "$what: FAILED (whole log: $dir/gtest.log)"
        rc=1
    fi
done
exit $rc
