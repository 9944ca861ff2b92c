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
# Side by side: with a build against the CUDA-built UCX 1.22
# (ICOUNT_STOCK_BUILD, default build-1.22-cuda/ when it is there; made by
# `UCX=1.22-cuda contrib/build.sh`), the same phases through cu_ipc_ns and
# through UCX's own cuda_ipc on the same emulator (there as libcuda.so.1),
# in that build: "module" is then libuct_cuda_ipc_ns.so's own instructions
# and libuct_cuda.so's (cuda_ipc and cuda_copy's library). Each transport's
# key is packed with its address (uct_md_mkey_pack_v2), as UCP packs it.
# The side by side is on legacy (cuMemAlloc) memory (BENCH_MEM=legacy):
# stock cuda_ipc imports VMM memory with pidfd_open + pidfd_getfd, system
# calls valgrind 3.19 does not handle (its run fails at the rkey unpack).
#
# usage: contrib/icount.sh [--check FILE] [BUILD_DIR]   (default build/)
#   --check FILE  compare with the counts recorded in FILE (lines "PHASE
#                 OURS MODULE SYSCALLS" per op: instructions ours and the
#                 module's own, system calls ours): fail when a phase costs
#                 more than 10% more instructions, or more system calls,
#                 than recorded; no side by side (ICOUNT_STOCK_BUILD= )
# environment: ICOUNT_REPS (repetitions of a phase, default 20),
#   ICOUNT_STOCK_BUILD ("" for none)
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

# The same count in two runs: process ids and addresses are hashed, and
# change with each run unless the run has a PID namespace of its own (the
# program is pid 1, its exporter pid 2) and no address randomization
# (setarch -R), where this machine allows them. The driver's share still
# moves by a few percent (its copy thread and the locks it shares with it:
# timing), so nothing gates on it.
det=()
if unshare --pid --fork --kill-child true 2>/dev/null; then
    det+=(unshare --pid --fork --kill-child)
fi
if setarch -R true 2>/dev/null; then
    det+=(setarch -R)
fi

# measure BUILD TL MODULE_SO TABLE [MEM]: the phases of bench_datapath -c
# through TL (BENCH_TL) on MEM memory (BENCH_MEM, default vmm) in BUILD, per
# op, into TABLE
measure() {
    local b=$1 tl=$2 module=$3 table=$4 mem=${5:-vmm} dir=$out/$2.$RANDOM
    local i=0 p name n dump
    local libpath=${LD_LIBRARY_PATH:-}
    mkdir -p "$dir"
    if [ "$tl" != cu_ipc_ns ]; then
        # UCX's CUDA modules load the driver as libcuda.so.1: the emulator
        ln -s "$b/test/cudasim/.libs/libcudasim.so" "$dir/libcuda.so.1"
        libpath=$dir${libpath:+:$libpath}
    fi
    # the emulator keeps a descriptor of each imported allocation, which
    # valgrind can map again (it cannot duplicate a mapping with mremap)
    echo "$prog: callgrind of test/bench/bench_datapath -c through $tl, $mem memory ($reps repetitions a phase, $(basename "$b"))" >&2
    if ! LD_LIBRARY_PATH=$libpath BENCH_TL=$tl BENCH_MEM=$mem \
         UCX_CUDA_IPC_NS_DRIVER=$b/test/cudasim/.libs/libcudasim.so \
         CUDASIM_IMPORT_KEEPS_FD=1 \
         "${det[@]}" "$b/libtool" --mode=execute valgrind --tool=callgrind \
            --collect-atstart=no --separate-threads=yes --collect-systime=yes \
            --callgrind-out-file="$dir/cg.%p" \
            "$b/test/bench/bench_datapath" -c -n "$reps" >"$dir/run.log" 2>&1; then
        tail -20 "$dir/run.log" >&2
        echo "$prog: the callgrind run failed" >&2
        exit 1
    fi
    # dump N of the main thread holds phase N, in the order the program named them
    mapfile -t phases < <(sed -n 's/^icount-phase //p' "$dir/run.log")
    [ ${#phases[@]} -gt 0 ] || { cat "$dir/run.log" >&2; exit 1; }
    printf '%-12s %10s %10s %10s %8s %8s\n' phase ours module driver sys_ours \
        sys_driver >"$table"
    for p in "${phases[@]}"; do
        i=$((i + 1))
        read -r name n <<<"$p"
        dump=$(ls "$dir"/cg.*."$i"-01)
        python3 "$top/test/bench/callgrind_split.py" bench_datapath \
            "$module" libcudasim.so "$dump" |
            awk -v name="$name" -v n="$n" '{
                printf "%-12s %10.0f %10.0f %10.0f %8.2f %8.2f\n", name,
                       $2 / n, $3 / n, $4 / n, $5 / n, $6 / n }' >>"$table"
    done
}

table=$out/table
measure "$build" cu_ipc_ns libuct_cuda_ipc_ns.so "$table"
echo "$prog: per op on the emulator (instructions; system calls; ours: the module, UCX and the C library they call; driver: the emulator's share)" >&2
sed "s/^/$prog:   /" "$table" >&2

stock=${ICOUNT_STOCK_BUILD-$top/build-1.22-cuda}
[ -z "$check" ] || stock=""
if [ -n "$stock" ] && [ -x "$stock/test/bench/bench_datapath" ]; then
    stock=$(cd "$stock" && pwd)
    measure "$stock" cu_ipc_ns libuct_cuda_ipc_ns.so "$out/ns.table" legacy
    measure "$stock" cuda_ipc libuct_cuda.so.0.0.0 "$out/stock.table" legacy
    echo "$prog: side by side, UCX $(sed -n 's/^UCX_VERSION = //p' "$stock/Makefile") built with CUDA ($stock), legacy memory, per op: cu_ipc_ns vs UCX's cuda_ipc on the same emulator (ours: the module, UCX and the C library; module: the transport's library alone, libuct_cuda_ipc_ns.so or libuct_cuda.so; sys: system calls, ours)" >&2
    printf '%-12s %10s %10s %10s %10s %6s %6s %7s %7s\n' phase ns_ours \
        stock_ours ns_module stock_mod ns_sys st_sys ours_x module_x |
        sed "s/^/$prog:   /" >&2
    join <(tail -n +2 "$out/ns.table" | sort) <(tail -n +2 "$out/stock.table" | sort) |
        awk '{ printf "%-12s %10d %10d %10d %10d %6.2f %6.2f %7.2f %7.2f\n",
                      $1, $2, $7, $3, $8, $5, $10,
                      ($7 ? $2 / $7 : 0), ($8 ? $3 / $8 : 0) }' |
        sed "s/^/$prog:   /" >&2
    echo "$prog: ours_x, module_x: cu_ipc_ns / cuda_ipc (goal for put_hit and get_hit: ours_x <= 1, no system call)" >&2
elif [ -n "$stock" ] && [ -n "${ICOUNT_STOCK_BUILD:-}" ]; then
    echo "$prog: no bench_datapath in $stock: no side by side" >&2
fi

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
