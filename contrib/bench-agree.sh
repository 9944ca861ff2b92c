#!/usr/bin/env bash
# Whether runs of the benchmark command agree (docs/architecture.md,
# "Performance"): reads the summaries of several runs of contrib/bench.sh
# (each run's BUILD/bench-out/summary.txt, or its whole output) and prints,
# per UCX version and figure with a goal, the verdict of every run (PASS,
# FAIL, or inc for inconclusive) with each run's median and range, and
# whether they differ. Exits 0 when every verdict is the same in every run,
# 1 when some differ, 2 when a summary holds no verdict or a figure is
# missing from a run.
#
# Usage: contrib/bench-agree.sh SUMMARY SUMMARY [SUMMARY...]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 SUMMARY SUMMARY [SUMMARY...]" >&2; exit 2; }
for f in "$@"; do
    [ -r "$f" ] || { echo "bench-agree: cannot read $f" >&2; exit 2; }
done

awk '
FNR == 1 { ++run; ver = "" }
/^== summary, UCX / { ver = $4; next }
# a figure with a goal: "NAME  MED [LO-HI] N rounds  goal ...: VERDICT ..."
ver != "" && / rounds  goal / {
    name = substr($0, 1, 46); sub(/ +$/, "", name)
    rest = substr($0, 47)
    v = rest; sub(/.*: /, "", v); split(v, w, " ")   # after the goal
    verdict = (w[1] == "inconclusive") ? "inc" : (w[1] ~ /^(PASS|FAIL)$/) ? w[1] : "?"
    split(rest, f, " ")
    key = ver SUBSEP name
    if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key }
    cell[key, run] = sprintf("%-4s %s %s", verdict, f[1], f[2])
    vd[key, run] = verdict
    next
}
END {
    if (nkeys == 0) { print "bench-agree: no verdict in the summaries"; exit 2 }
    missing = differ = 0
    for (k = 1; k <= nkeys; ++k) {
        key = order[k]; split(key, p, SUBSEP)
        line = sprintf("%-6s %-46s", p[1], p[2]); same = 1
        for (r = 1; r <= run; ++r) {
            if (!((key, r) in vd)) { line = line "  (missing)"; ++missing; same = 0; continue }
            line = line "  " cell[key, r]
            if (vd[key, r] != vd[key, 1]) same = 0
        }
        if (!same) ++differ
        print line (same ? "" : "  DIFFERS")
    }
    printf "bench-agree: %d figures with a goal, %d runs: %s\n", nkeys, run,
           differ ? differ " differ" : "every verdict the same in every run"
    exit missing ? 2 : differ ? 1 : 0
}' "$@"
