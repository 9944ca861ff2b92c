#!/usr/bin/env bash
# Checks that contrib/gpu-proof.sh keeps its results however a step or the
# proof itself ends, in dry runs on the emulator (as root, with a build):
#   1. a hung step (PROOF_HANG) is cut at its cap: TIMEOUT, its log kept,
#      the steps after it still run, every step has a row and a log in the
#      archive, the exit status is 1;
#   2. the proof stopped from outside (SIGTERM, as a command limit does):
#      the step in flight is TIMEOUT, the rest SKIP, the archive is made;
#   3. the proof killed from outside (SIGKILL): the archive made before the
#      step in flight is there, with the finished steps and that step
#      marked as running.
# With an archive of a whole dry run as argument, checks that one too: a log
# for every step, every step PASS or SKIP (contrib/run-tests.sh passes it).
# Only a few cheap steps run (PROOF_STEPS), so it takes seconds.
#
# usage: test/gpu/check_gpu_proof.sh [ARCHIVE]
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
proof=$top/contrib/gpu-proof.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_gpu_proof.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passes=0 failures=0
steps=$(sed -n '/^step_table="$/,/^"$/p' "$proof" | awk 'NF > 1 {print $1}')

pass() { echo "PASS: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {   # check WHAT cmd...
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}

# the one archive in $1 (none left half-written)
archive_in() {
    local a
    a=$(find "$1" -maxdepth 1 -name 'gpu-proof-*.tgz')
    [ "$(grep -c . <<<"$a")" = 1 ] && [ -z "$(find "$1" -maxdepth 1 -name '.*.part')" ] &&
        echo "$a"
}
# the status of step $2 in archive $1's results.tsv
status_of() {
    tar -xzf "$1" -O --wildcards '*/results.tsv' | awk -F'\t' -v n="$2" '$1 == n {print $2}'
}
# every step has a log in archive $1
every_log() {
    local list n
    list=$(tar -tzf "$1")
    for n in $steps; do
        grep -q "/$n\.log$" <<<"$list" || { echo "no $n.log in $1"; return 1; }
    done
    grep -q '/results.tsv$' <<<"$list" && grep -q '/summary.txt$' <<<"$list"
}
# every step of archive $1 has a row, each PASS or SKIP but $2 (with status $3)
rows_pass_or_skip() {
    local n s
    for n in $steps; do
        s=$(status_of "$1" "$n")
        if [ "$n" = "${2:-}" ]; then
            [ "$s" = "$3" ] || { echo "$n: '$s', not $3"; return 1; }
        else
            [ "$s" = PASS ] || [ "$s" = SKIP ] || { echo "$n: '$s', not PASS or SKIP"; return 1; }
        fi
    done
}
in_archive() {   # in_archive ARCHIVE FILE PATTERN: FILE (a glob) holds PATTERN
    tar -xzf "$1" -O --wildcards "*/$2" 2>/dev/null | grep -q -E -- "$3"
}
# waits until the work folder under $1 shows step $2 sleeping (PROOF_HANG)
wait_hung() {
    local i
    for ((i = 0; i < 300; i++)); do
        grep -qs '^proof-hang:' "$1"/gpu-proof-*/"$2.log" && return 0
        sleep 0.1
    done
    return 1
}

# ---- 1. a hung step, cut at its cap ---------------------------------------
t=$SECONDS
PROOF_STEPS=env,contract,demo,activation PROOF_HANG=demo PROOF_CAP_DEMO=3 \
    PROOF_WORK_DIR=$tmp/w1 "$proof" --dry "$tmp/o1" >"$tmp/o1.out" 2>"$tmp/o1.err"
rc=$?
echo "hung step: $((SECONDS - t)) s"
check "a hung step: the proof exits 1 (it did $rc)" test $rc = 1
a=$(archive_in "$tmp/o1")
check "a hung step: one archive in OUT_DIR" test -n "$a"
if [ -n "$a" ]; then
    check "a hung step: the archive has every step's log, results.tsv, summary.txt" every_log "$a"
    check "a hung step: demo is TIMEOUT, every other step PASS or SKIP" rows_pass_or_skip "$a" demo TIMEOUT
    check "a hung step: the steps after it ran (activation PASS)" test "$(status_of "$a" activation)" = PASS
    check "a hung step: its log keeps what it printed before the cut" in_archive "$a" demo.log '^proof-hang:'
    check "a hung step: the summary says TIMEOUT and the cut" in_archive "$a" summary.txt '^demo +TIMEOUT .*cut at 3 s'
fi
check "a hung step: the summary table on stdout" grep -q -E '^demo +TIMEOUT' "$tmp/o1.out"
check "a hung step: the step is gone (no running.pid left)" \
    test -z "$(find "$tmp/w1" -name running.pid)"

# ---- 2. the proof stopped by SIGTERM during a step --------------------------
PROOF_STEPS=env,demo,activation PROOF_HANG=activation PROOF_CAP_ACTIVATION=60 \
    PROOF_WORK_DIR=$tmp/w2 "$proof" --dry "$tmp/o2" >"$tmp/o2.out" 2>"$tmp/o2.err" &
pid=$!
if wait_hung "$tmp/w2" activation; then
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    check "stopped by SIGTERM: the proof exits 1 (it did $rc)" test $rc = 1
    a=$(archive_in "$tmp/o2")
    check "stopped by SIGTERM: one archive in OUT_DIR" test -n "$a"
    if [ -n "$a" ]; then
        check "stopped by SIGTERM: every step's log in the archive" every_log "$a"
        check "stopped by SIGTERM: the step in flight TIMEOUT, the others PASS or SKIP" \
            rows_pass_or_skip "$a" activation TIMEOUT
        check "stopped by SIGTERM: env and demo PASS" \
            test "$(status_of "$a" env) $(status_of "$a" demo)" = "PASS PASS"
        check "stopped by SIGTERM: the summary says so" in_archive "$a" summary.txt 'stopped by SIGTERM'
    fi
else
    fail "stopped by SIGTERM: the hung step never started"
    kill -TERM "$pid"
    wait "$pid"
fi

# ---- 3. the proof killed by SIGKILL during a step ---------------------------
PROOF_STEPS=env,demo,activation PROOF_HANG=activation PROOF_CAP_ACTIVATION=60 \
    PROOF_WORK_DIR=$tmp/w3 "$proof" --dry "$tmp/o3" >"$tmp/o3.out" 2>"$tmp/o3.err" &
pid=$!
if wait_hung "$tmp/w3" activation; then
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    # the step's timeout(1) outlives the proof: stop it and what it runs
    step=$(cat "$tmp"/w3/gpu-proof-*/running.pid 2>/dev/null)
    if [ -n "$step" ]; then
        kill -TERM -- "-$step" 2>/dev/null
        for ((i = 0; i < 50; i++)); do kill -0 "$step" 2>/dev/null || break; sleep 0.1; done
    fi
    check "killed by SIGKILL: the step's pid was recorded, and it stops" \
        test -n "$step" -a "$i" -lt 50
    a=$(archive_in "$tmp/o3")
    check "killed by SIGKILL: the archive made before the step is in OUT_DIR" test -n "$a"
    if [ -n "$a" ]; then
        check "killed by SIGKILL: env and demo PASS in it" \
            test "$(status_of "$a" env) $(status_of "$a" demo)" = "PASS PASS"
        check "killed by SIGKILL: its summary shows activation running" \
            in_archive "$a" summary.txt '^activation +RUNNING'
        check "killed by SIGKILL: its summary shows the later steps not reached" \
            in_archive "$a" summary.txt '^nixl +- .*not reached'
    fi
else
    fail "killed by SIGKILL: the hung step never started"
    kill -KILL "$pid"
fi

# ---- a whole dry run's archive ----------------------------------------------
if [ $# -ge 1 ]; then
    check "the dry run's archive has every step's log" every_log "$1"
    check "the dry run's steps are all PASS or SKIP" rows_pass_or_skip "$1"
fi

echo "$passes passed, $failures failed"
[ $failures = 0 ]
