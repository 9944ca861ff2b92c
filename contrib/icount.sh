#!/usr/bin/env bash
# Instruction counts of the module's paths that make latency
# (docs/architecture.md, "Performance"): callgrind counts instructions, the
# same from run to run whatever else the machine does, where wall-clock on a
# shared VM moves by 10-50%.
#
# test/bench/bench_datapath -c runs, against the emulator, each phase with
# callgrind's collection on only around the module's calls: the first use
# of another process's VMM allocation (the fd import, the driver's import
# and mapping), an 8-byte put and get with a mapping-cache hit (each from
# its post to its completion in progress; the copy is waited for outside
# the count, so one progress call completes it), and an rkey unpack and
# release. test/bench/callgrind_split.py divides what each phase cost into
# ours (the module, UCX, the C library they call) and the driver's (the
# calls into the emulator), and counts the system calls of each.
#
# usage: contrib/icount.sh [--check FILE] [BUILD_DIR]   (default build/)
#   --check FILE  compare with the counts recorded in FILE (lines "PHASE
#                 OURS MODULE SYSCALLS" per op: instructions ours and the
#                 module's own, system calls ours): fail when a phase costs
#                 more than 10% more instructions, or more system calls,
#                 than recorded
# environment: ICOUNT_REPS (repetitions of a phase, default 20)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
check=""
if [ "${1:-}" = --check ]; then
    check=$2
    shift 2
fi
build=$(cd "${1:-$top/build}" && pwd)
reps=${ICOUNT_REPS:-20}
prog=icount

command -v valgrind >/dev/null ||
    { echo "$prog: valgrind is not installed (contrib/setup-deps.sh installs it)" >&2; exit 2; }
out=$(mktemp -d /tmp/cuda_ipc_ns_icount.XXXXXX)
trap 'rm -rf "$out"' EXIT

# the emulator keeps a descriptor of each imported allocation, which
# valgrind can map again (it cannot duplicate a mapping with mremap)
echo "$prog: callgrind of test/bench/bench_datapath -c ($reps repetitions a phase)" >&2
if ! UCX_CUDA_IPC_NS_DRIVER=$build/test/cudasim/.libs/libcudasim.so \
     CUDASIM_IMPORT_KEEPS_FD=1 \
     "$build/libtool" --mode=execute valgrind --tool=callgrind \
        --collect-atstart=no --separate-threads=yes --collect-systime=yes \
        --callgrind-out-file="$out/cg.%p" \
        "$build/test/bench/bench_datapath" -c -n "$reps" >"$out/run.log" 2>&1; then
    tail -20 "$out/run.log" >&2
    echo "$prog: the callgrind run failed" >&2
    exit 1
fi

# dump N of the main thread holds phase N, in the order the program named them
mapfile -t phases < <(sed -n 's/^icount-phase //p' "$out/run.log")
[ ${#phases[@]} -gt 0 ] || { cat "$out/run.log" >&2; exit 1; }
table=$out/table
printf '%-12s %10s %10s %10s %8s %8s\n' phase ours module driver sys_ours \
    sys_driver >"$table"
i=0
for p in "${phases[@]}"; do
    i=$((i + 1))
    read -r name n <<<"$p"
    dump=$(ls "$out"/cg.*."$i"-01)
    python3 "$top/test/bench/callgrind_split.py" bench_datapath \
        libuct_cuda_ipc_ns.so libcudasim.so "$dump" |
        awk -v name="$name" -v n="$n" '{
            printf "%-12s %10.0f %10.0f %10.0f %8.2f %8.2f\n", name,
                   $2 / n, $3 / n, $4 / n, $5 / n, $6 / n }' >>"$table"
done
echo "$prog: per op on the emulator (instructions; system calls; ours: the module, UCX and the C library they call; driver: the emulator's share)" >&2
sed "s/^/$prog:   /" "$table" >&2

[ -n "$check" ] || exit 0
status=0
over() { awk -v o="$1" -v r="$2" 'BEGIN { exit !(o > 1.10 * r) }'; }
while read -r name instr modinstr sys; do
    case $name in ''|\#*) continue ;; esac
    line=$(awk -v name="$name" '$1 == name' "$table")
    [ -n "$line" ] || { echo "$prog: phase $name: not measured" >&2; status=1; continue; }
    read -r _ ours module _ sys_ours _ <<<"$line"
    if over "$ours" "$instr" || over "$module" "$modinstr"; then
        echo "$prog: FAIL: $name costs $ours instructions ($module the module's), more than 10% over the $instr ($modinstr) recorded in $check" >&2
        status=1
    elif awk -v o="$sys_ours" -v r="$sys" 'BEGIN { exit !(o > r) }'; then
        echo "$prog: FAIL: $name makes $sys_ours system calls, more than the $sys recorded in $check" >&2
        status=1
    else
        echo "$prog: PASS: $name $ours instructions, $module the module's (recorded $instr, $modinstr), $sys_ours system calls (recorded $sys)" >&2
    fi
done <"$check"
exit $status
