#!/usr/bin/env bash
# Runs a gtest binary as GTEST_SHARDS shards side by side (gtest's own
# sharding: GTEST_TOTAL_SHARDS, GTEST_SHARD_INDEX) and prints one log: each
# shard's output as gtest wrote it, less its closing summary, then one
# summary for the whole run in gtest's words ("[  PASSED  ] N tests.", the
# skipped and failed tests by name), which contrib/run-tests.sh and
# contrib/run-sanitizers.sh read.
#
# Why: most tests wait on peer processes, brokers and copy threads; one
# runner keeps about one of two cores busy (the plain suite: 140 s of wall
# for 157 s of CPU; two shards: 93 s). docs/testing.md, "Shards".
#
# usage: test/gtest/run_shards.sh GTEST [ARGS...]   (make check's
#        LOG_COMPILER; the sanitizer runs)
# environment: GTEST_SHARDS (default 2, or 1 on one CPU; 1 runs GTEST as
#              is), GTEST_FILTER and every other variable reach each shard;
#              SHARD_LOG_DIR: write each shard's log there (N, N.rc) as it
#              runs and keep it, also when the runner is killed (by default
#              the logs go to a temporary directory removed on exit), so
#              that a run cut at a time limit still shows what each shard
#              did (contrib/gpu-proof.sh).
# Exit status: 0 when every shard passed, else the first shard's non-zero
# status (1 when a shard's summary is missing).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 GTEST [ARGS...]" >&2; exit 2; }
cpus=$(nproc)
shards=${GTEST_SHARDS:-$((cpus > 1 ? 2 : 1))}
case $shards in
'' | *[!0-9]* | 0) echo "run_shards: GTEST_SHARDS=$shards: a count of 1 or more" >&2; exit 2 ;;
esac
[ "$shards" -gt 1 ] || exec "$@"

if [ -n "${SHARD_LOG_DIR:-}" ]; then
    logs=$SHARD_LOG_DIR keep_logs=1
    mkdir -p "$logs" || exit 2
else
    logs=$(mktemp -d "${TMPDIR:-/tmp}/gtest_shards.XXXXXX") keep_logs=0
fi
pids=()
cleanup() {
    [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null
    [ "$keep_logs" = 1 ] || rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$SECONDS
for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$@" >"$logs/$i" 2>&1 &
    pids+=($!)
done
rc=0
for ((i = 0; i < shards; i++)); do
    wait "${pids[$i]}"
    r=$?
    echo "$r" >"$logs/$i.rc"
    [ "$rc" != 0 ] || rc=$r
done
pids=()

# each shard's body; its summary (after the last "[==========] N tests from")
# goes into the totals
passed=0 ran=0
skipped=() failed=()
for ((i = 0; i < shards; i++)); do
    echo "[----------] shard $i of $shards (exit status $(cat "$logs/$i.rc"))"
    end=$(grep -n -E '^\[==========\] [0-9]+ tests? from' "$logs/$i" | tail -n 1 | cut -d: -f1)
    if [ -z "$end" ]; then
        cat "$logs/$i"
        echo "[  FAILED  ] shard $i of $shards: no gtest summary (the runner died)"
        failed+=("shard $i of $shards (no summary)")
        [ "$rc" != 0 ] || rc=1
        continue
    fi
    head -n "$end" "$logs/$i"
    summary=$(tail -n +"$end" "$logs/$i")
    ran=$((ran + $(sed -n "1s/^\[==========\] \([0-9]*\) test.*/\1/p" <<<"$summary")))
    n=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' <<<"$summary")
    passed=$((passed + ${n:-0}))
    mapfile -t -O "${#skipped[@]}" skipped < <(
        sed -n 's/^\[  SKIPPED \] \([^ ,]*\.[^ ,]*\).*/\1/p' <<<"$summary")
    mapfile -t -O "${#failed[@]}" failed < <(
        sed -n 's/^\[  FAILED  \] \([^ ,]*\.[^ ,]*\).*/\1/p' <<<"$summary")
done

echo "[==========] $ran tests ran in $shards shards side by side. ($((SECONDS - start)) s total)"
echo "[  PASSED  ] $passed tests."
if [ ${#skipped[@]} -gt 0 ]; then
    echo "[  SKIPPED ] ${#skipped[@]} tests, listed below:"
    printf '[  SKIPPED ] %s\n' "${skipped[@]}"
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "[  FAILED  ] ${#failed[@]} tests, listed below:"
    printf '[  FAILED  ] %s\n' "${failed[@]}"
fi
exit "$rc"
