#!/usr/bin/env bash
# Build the module, the CUDA emulator and the test suite with sanitizers, out
# of the source tree, and run them:
#   asan: build-asan/, --enable-sanitizers=address,undefined, the whole suite
#   tsan: build-tsan/, --enable-sanitizers=thread, the whole suite too
#         ($TSAN_FILTER narrows it): the broker thread, the emulator's copy
#         engine threads and the thread tests. UCM's mmap hooks are off
#         (UCX_MEM_MMAP_HOOK_MODE=none): its madvise hook runs while glibc
#         frees an exiting thread's stack, after TSan dropped that thread's
#         state, and crashes inside libtsan. die_after_fork=0: the fork tests
#         start a broker thread in the child of a threaded parent.
# Usage: contrib/run-sanitizers.sh [asan] [tsan]   (default: both)
# Exit status: 0 when every run is clean. Suppressions (UCX internals only,
# each justified) are in contrib/sanitizers/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
san_dir=$top/contrib/sanitizers
# forked_child_starts_own_broker: the child's broker thread gets the
# pthread id of the parent's, which TSan still holds ("dup thread with used
# id"): a TSan limit with fork; the ASan run covers the test
: "${TSAN_FILTER:=-test_fdx.forked_child_starts_own_broker}"
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(asan tsan)

ucx_src=$("$top/contrib/setup-deps.sh" | tail -n 1)
cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
    ./autogen.sh >/dev/null
fi

build() { # dir sanitizers
    mkdir -p "$1"
    (cd "$1"
     if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
         "$top/configure" --with-ucx-src="$ucx_src" --prefix="$1/install" \
             --enable-sanitizers="$2" >configure.out ||
             { cat configure.out; exit 1; }
     fi
     make -j"$(nproc)" >make.out 2>&1 &&
         make -j"$(nproc)" -C test/gtest gtest >>make.out 2>&1 ||
         { tail -50 make.out; exit 1; })
}

rc=0
for kind in "${kinds[@]}"; do
    start=$SECONDS
    case $kind in
    asan)
        dir=$top/build-asan
        build "$dir" address,undefined
        # UCX's memory events stay on: UCP's memtype cache needs them
        # (cpy_ucp_test), and they work under ASan
        env ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=66" \
            LSAN_OPTIONS="suppressions=$san_dir/lsan.supp:print_suppressions=0" \
            UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$san_dir/ubsan.supp" \
            "$dir/test/gtest/gtest" >"$dir/gtest.log" 2>&1 || rc=1
        ;;
    tsan)
        dir=$top/build-tsan
        build "$dir" thread
        env TSAN_OPTIONS="halt_on_error=1:exitcode=66:die_after_fork=0:suppressions=$san_dir/tsan.supp" \
            UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no \
            "$dir/test/gtest/gtest" --gtest_filter="$TSAN_FILTER" \
            >"$dir/gtest.log" 2>&1 || rc=1
        ;;
    *)
        echo "run-sanitizers: unknown kind '$kind' (asan, tsan)" >&2
        exit 2
        ;;
    esac
    summary=$(grep -E '^\[  (PASSED|FAILED)  \]' "$dir/gtest.log" | head -1)
    # a sanitizer report in a peer process fails its test; one in the
    # runner itself may end it before gtest's summary
    reports=$(grep -c -E '^(SUMMARY: [A-Za-z]+Sanitizer|.*runtime error:)' "$dir/gtest.log" || true)
    echo "run-sanitizers: $kind: ${summary:-no gtest summary (the runner died)}, $reports sanitizer report(s), in $((SECONDS - start)) s (log $dir/gtest.log)"
    if [ -z "$summary" ] || [ "$reports" != 0 ]; then
        rc=1
    fi
done
exit $rc
