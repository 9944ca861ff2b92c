#!/usr/bin/env bash
# The summary lines of contrib/bench.sh (docs/architecture.md,
# "Performance"): reads the benchmark programs' output on stdin and prints
# each ratio line as "NAME  MEDIAN [MIN-MAX] N rounds  VERDICT", where a
# figure with a goal (docs/architecture.md) is PASS or FAIL only when the
# whole range over the rounds lies on one side of the goal, else
# "inconclusive" with the spread. Lines "  runs ..." (contrib/bench.sh's
# ucx_perftest figures) follow their ratio, indented; everything else is
# left out.
#
#   ratio NAME: MEDIAN (min MIN, max MAX, N rounds)
#   ratio NAME: VALUE                  (one figure, no rounds: no verdict)
#   ratio NAME: none (WHY)
set -euo pipefail
awk '
function goal(name) {
    if (name ~ /^(put|get)\/DtoD (16|64) MiB/) return ">= 0.90"
    if (name ~ /^get\/put (16|64) MiB/) return "within 0.85 1.15"
    if (name ~ /^(put|get) (vmm|legacy) cu_ipc_ns\/cuda_ipc /) return ">= 0.95"
    if (name ~ /^8 B put latency (vmm|legacy) cu_ipc_ns\/cuda_ipc/) return "<= 1.0"
    if (name ~ /^8 B put latency/) return "<= 1.5"
    if (name ~ /^cache hit 100,000/) return "<= 2"
    if (name ~ /^fd import/) return "<= 10"
    if (name ~ /^(put|get) chunks\/single /) return ">= 0.95"
    if (name ~ / -e \/ no -e /) return ">= 0.8"
    if (name ~ /legacy direct\/vmm [0-9]+ MiB/) return ">= 0.95"
    if (name ~ /legacy copy\/vmm [0-9]+ MiB/) return ">= 0.45"
    if (name ~ /host ring \/ TCP/) return ">= 5"
    if (name ~ /^owner_copy\/ipc (get|put) (4096|65536) KiB/) return ">= 0.85"
    return ""
}
/^  runs / { print "    " substr($0, 3); next }
/^ratio / {
    line = substr($0, 7); c = index(line, ": ")
    name = substr(line, 1, c - 1); rest = substr(line, c + 2)
    if (rest ~ /^none/) { printf "%-46s %s\n", name, rest; next }
    gsub(/[(),]/, "", rest); split(rest, f, " ")
    med = f[1]; lo = f[3]; hi = f[5]; n = f[6]
    if (n == "") { printf "%-46s %.3f (one figure, no rounds)\n", name, med; next }
    g = goal(name); split(g, gg, " ")
    if (g == "") v = "(no goal)"
    else {
        if (gg[1] == ">=") { ok = lo >= gg[2]; bad = hi < gg[2]; gt = "goal >= " gg[2] }
        else if (gg[1] == "<=") { ok = hi <= gg[2]; bad = lo > gg[2]; gt = "goal <= " gg[2] }
        else { ok = lo >= gg[2] && hi <= gg[3]; bad = hi < gg[2] || lo > gg[3]
               gt = "goal " gg[2] "-" gg[3] }
        v = gt ": " (ok ? "PASS" : bad ? "FAIL" : sprintf("inconclusive (spread %.3f-%.3f spans the goal)", lo, hi))
    }
    printf "%-46s %.3f [%.3f-%.3f] %2d rounds  %s\n", name, med, lo, hi, n, v
}'
