#!/usr/bin/env bash
# The benchmark's verdicts (docs/architecture.md, "Performance"), on ratio
# lines written here, no benchmark run:
#  - contrib/bench-verdicts.sh says PASS or FAIL only when the whole range
#    over the rounds lies on one side of the goal, else inconclusive (a
#    median past the goal with a range across it is not a PASS), for goals
#    ">=", "<=" and "within";
#  - figures without a goal, of one round, or that failed get no verdict;
#  - contrib/bench-agree.sh exits 0 for runs whose verdicts are all the
#    same, 1 and DIFFERS on the figure whose verdict moved, 2 for a figure
#    missing from a run or a summary without verdicts.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/activation/checks.sh"
tmp=$(mktemp -d /tmp/cuda_ipc_ns_verdicts.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# verdict_of NAME MED MIN MAX: the verdict part of NAME's summary line
verdict_of() {
    printf 'ratio %s: %s (min %s, max %s, 5 rounds)\n' "$@" |
        "$top/contrib/bench-verdicts.sh" | sed 's/.* rounds  //'
}

# expect WANT NAME MED MIN MAX
expect() {
    local want=$1 got
    shift
    got=$(verdict_of "$@")
    [[ $got == $want ]] || { echo "    $1 [$3-$4]: '$got', want '$want'"; return 1; }
}

at_least_goal() {
    expect 'goal >= 0.90: PASS' 'put/DtoD 16 MiB' 0.95 0.91 0.99 &&
    expect 'goal >= 0.90: PASS' 'get/DtoD 64 MiB' 0.95 0.90 0.99 &&
    expect 'goal >= 0.90: FAIL' 'get/DtoD 16 MiB' 0.85 0.80 0.89 &&
    expect 'goal >= 0.90: inconclusive (spread 0.890-0.990 spans the goal)' \
        'put/DtoD 64 MiB' 0.95 0.89 0.99
}

median_past_goal_range_across() {
    expect 'goal >= 0.95: inconclusive (spread 0.900-1.010 spans the goal)' \
        'put chunks/single 16 MiB' 0.990 0.900 1.010 &&
    expect 'goal >= 0.45: inconclusive (spread 0.300-0.500 spans the goal)' \
        'ucp:tag_bw legacy copy/vmm 4 MiB' 0.350 0.300 0.500 &&
    expect 'goal >= 0.95: FAIL' 'ucp:ucp_get legacy direct/vmm 64 MiB' 0.90 \
        0.85 0.94 &&
    expect '(no goal)' 'ucp:ucp_get legacy direct/copy 64 MiB' 2.0 1.9 2.1
}

at_most_goal() {
    expect 'goal <= 1.5: PASS' '8 B put latency / async copy + event' 1.0 0.9 1.5 &&
    expect 'goal <= 1.5: FAIL' '8 B put latency / async copy + event' 1.7 1.6 1.8 &&
    expect 'goal <= 2: inconclusive*' 'cache hit 100,000 / 1,000 regions' 1.9 1.8 2.1 &&
    expect 'goal <= 10: PASS' 'fd import broker/pidfd' 4.0 3.9 4.3
}

within_goal() {
    expect 'goal 0.85-1.15: PASS' 'get/put 16 MiB' 1.00 0.90 1.10 &&
    expect 'goal 0.85-1.15: FAIL' 'get/put 64 MiB' 1.25 1.20 1.30 &&
    expect 'goal 0.85-1.15: FAIL' 'get/put 64 MiB' 0.75 0.70 0.80 &&
    expect 'goal 0.85-1.15: inconclusive*' 'get/put 16 MiB' 1.10 1.00 1.20 &&
    expect 'goal 0.85-1.15: inconclusive*' 'get/put 16 MiB' 0.90 0.80 1.00
}

no_verdict() {
    local out
    out=$(printf '%s\n' 'ratio put/DtoD 1 MiB: 0.86 (min 0.85, max 0.87, 5 rounds)' \
              'ratio first use of a chunk / of one allocation: 0.026' \
              'ratio NIXL READ / UCP get 4 MiB: none (a run failed)' \
              'bandwidth: not a ratio line' |
          "$top/contrib/bench-verdicts.sh")
    [ "$(wc -l <<<"$out")" = 3 ] &&
    grep -q '^put/DtoD 1 MiB  .*(no goal)$' <<<"$out" &&
    grep -q '^first use of a chunk / of one allocation  *0.026 (one figure, no rounds)$' <<<"$out" &&
    grep -q '^NIXL READ / UCP get 4 MiB  *none (a run failed)$' <<<"$out" ||
        { echo "$out" | sed 's/^/    /'; return 1; }
}

# summary FILE VERSION "NAME MED MIN MAX"...: a summary as contrib/bench.sh writes it
summary() {
    local f=$1 ver=$2 fig
    shift 2
    {
        echo "== summary, UCX $ver (goals: docs/architecture.md, Performance): median [min-max] over the rounds"
        for fig in "$@"; do
            set -- $fig
            printf 'ratio %s %s %s: %s (min %s, max %s, 5 rounds)\n' "$1" "$2" "$3" "$4" "$5" "$6"
        done | "$top/contrib/bench-verdicts.sh"
        echo "plots: none"
    } >"$f"
}

agree() {
    local rc=0 out
    summary "$tmp/a" 1.13.1 "put/DtoD 16 MiB 0.95 0.91 0.99" "get/DtoD 16 MiB 0.85 0.80 0.89"
    summary "$tmp/b" 1.13.1 "put/DtoD 16 MiB 0.97 0.93 0.99" "get/DtoD 16 MiB 0.86 0.81 0.88"
    out=$("$top/contrib/bench-agree.sh" "$tmp/a" "$tmp/b" "$tmp/a") || rc=$?
    [ $rc = 0 ] && ! grep -q DIFFERS <<<"$out" &&
    grep -q '2 figures with a goal, 3 runs: every verdict the same' <<<"$out" ||
        { echo "    exit $rc:"; echo "$out" | sed 's/^/    /'; return 1; }
}

one_verdict_moved() {
    local rc=0 out
    summary "$tmp/a" 1.22.0 "put/DtoD 16 MiB 0.95 0.91 0.99" "get/DtoD 16 MiB 0.95 0.91 0.99"
    summary "$tmp/b" 1.22.0 "put/DtoD 16 MiB 0.95 0.91 0.99" "get/DtoD 16 MiB 0.95 0.89 0.99"
    out=$("$top/contrib/bench-agree.sh" "$tmp/a" "$tmp/b") || rc=$?
    [ $rc = 1 ] &&
    [ "$(grep -c DIFFERS <<<"$out")" = 1 ] &&
    grep -q '^1.22.0 get/DtoD 16 MiB .*PASS .*inc .*DIFFERS$' <<<"$out" ||
        { echo "    exit $rc:"; echo "$out" | sed 's/^/    /'; return 1; }
}

versions_apart() {
    local rc=0 out
    # the same figure, PASS on one version and FAIL on the other, in both runs
    summary "$tmp/a" 1.13.1 "put/DtoD 16 MiB 0.95 0.91 0.99"
    summary "$tmp/b" 1.22.0 "put/DtoD 16 MiB 0.85 0.80 0.89"
    cat "$tmp/a" "$tmp/b" >"$tmp/ab"
    out=$("$top/contrib/bench-agree.sh" "$tmp/ab" "$tmp/ab") || rc=$?
    [ $rc = 0 ] || { echo "    exit $rc:"; echo "$out" | sed 's/^/    /'; return 1; }
}

figure_missing() {
    local rc=0 rc2=0
    summary "$tmp/a" 1.13.1 "put/DtoD 16 MiB 0.95 0.91 0.99" "get/DtoD 16 MiB 0.95 0.91 0.99"
    summary "$tmp/b" 1.13.1 "put/DtoD 16 MiB 0.95 0.91 0.99"
    echo "no summary here" >"$tmp/c"
    "$top/contrib/bench-agree.sh" "$tmp/a" "$tmp/b" >/dev/null || rc=$?
    "$top/contrib/bench-agree.sh" "$tmp/c" "$tmp/c" >/dev/null 2>&1 || rc2=$?
    [ $rc = 2 ] && [ $rc2 = 2 ] || { echo "    exit $rc and $rc2, want 2 and 2"; return 1; }
}

check "verdicts: goal >=, the whole range above (PASS), below (FAIL), across (inconclusive)" at_least_goal
check "verdicts: a median past the goal with the range across it is inconclusive" \
    median_past_goal_range_across
check "verdicts: goal <=" at_most_goal
check "verdicts: goal within a band" within_goal
check "verdicts: no goal, one figure, a failed figure: no verdict, other lines left out" no_verdict
check "bench-agree: runs with the same verdicts exit 0" agree
check "bench-agree: one verdict moved: exit 1, DIFFERS on that figure only" one_verdict_moved
check "bench-agree: figures are compared per UCX version" versions_apart
check "bench-agree: a figure missing from a run, or no verdict at all: exit 2" figure_missing
checks_summary
