#!/usr/bin/env bash
# The suite N times in a row while the machine is loaded: a parallel build
# (make -j 2 x nproc of the module and emulator, cleaned and rebuilt over
# and over in a scratch build dir) runs beside it. One line per run: result,
# gtest summary, seconds, load average. Exits non-zero when a run failed
# (its make check and gtest logs are kept under the build dir's logs/).
#
# usage: test/stress/run_under_load.sh [RUNS]     (default 10)
# environment: BUILD_DIR (the built tree whose `make check` runs; default
#              build/ of the source tree; build it first, contrib/build.sh)
set -euo pipefail
prog=under-load
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/contrib/steps.sh"
runs=${1:-10}
build=${BUILD_DIR:-$top/build}
[ -f "$build/Makefile" ] || { say "no build in $build (run contrib/build.sh)"; exit 2; }

# the load: a scratch copy of the build's configuration, rebuilt in a loop
scratch=$(mktemp -d /tmp/cuda_ipc_ns_load.XXXXXX)
load_pid=
cleanup() {
    if [ -n "$load_pid" ]; then
        kill -- -"$load_pid" 2>/dev/null || kill "$load_pid" 2>/dev/null || true
        wait "$load_pid" 2>/dev/null || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
conf=$(sed -n 's/^  \$ \(.*\/configure .*\)$/\1/p' "$build/config.log" | head -1)
[ -n "$conf" ] || { say "cannot read the configure line of $build/config.log"; exit 1; }
step "$scratch/configure.log" "configuring the load build in $scratch" \
    in_dir "$scratch" eval "$conf"
set -m   # the load loop gets its own process group, killed as one
(
    while :; do
        make -s -C "$scratch" clean >/dev/null 2>&1 || true
        make -j"$(( 2 * $(nproc) ))" -C "$scratch" >/dev/null 2>&1 || true
    done
) &
load_pid=$!
set +m

mkdir -p "$build/logs"
failed=0
for i in $(seq 1 "$runs"); do
    start=$SECONDS
    if make -C "$build" check >"$build/logs/under-load-$i.log" 2>&1; then
        result=PASS
    else
        result=FAIL
        failed=$((failed + 1))
        cp "$build/test/gtest/gtest.log" "$build/logs/under-load-$i.gtest.log" 2>/dev/null || true
    fi
    summary=$(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$build/test/gtest/gtest.log" 2>/dev/null |
              tr '\n' ' ' | sed 's/ *$//')
    say "run $i/$runs: $result ${summary:-no gtest summary} in $((SECONDS - start)) s, load average $(cut -d' ' -f1 /proc/loadavg)"
done
say "$((runs - failed)) of $runs runs passed under load (logs: $build/logs/under-load-N.log)"
[ "$failed" = 0 ]
