#!/usr/bin/env bash
# The GPU proof: everything the project checks on a real driver, in one
# command that fits the GPU machines it can use (a few minutes per command,
# no package registry, no compiler, only one folder's files come back). Run
# it as root (the pod steps need namespaces), from the repository, with the
# builds as they are: here, or carried there by contrib/gpu-bundle.sh and
# contrib/gpu-unpack.sh (docs/gpu-results.md, "Running the proof").
#
# usage: contrib/gpu-proof.sh [--dry] OUT_DIR
#   --dry  the same steps, the same archive and summary, on the CPU emulator
#          and short: CI runs it (contrib/run-tests.sh) so that the command
#          cannot rot
#
# Steps, in order of proof per second; each has its own time cap (seconds on
# a GPU / in a dry run) and its own log, written as it runs:
#   env              30/30  the machine: GPU, driver version (nvidia-smi and
#                           the driver itself), persistence mode, CUDA
#                           headers, fd limit, veth and bridge in a throwaway
#                           netns, unshare --pid --fork --mount-proc
#   contract         90/60  the driver's contract (gtest driver_contract.*,
#                           docs/driver-contract.md) and the driver's answers
#                           where its behaviour is unknown ("driver-answer:"
#                           lines); no test is a failure
#   demo             30/30  the plain driver-API program (cuda_ipc_demo), as
#                           is and in a PID namespace with its own /proc
#   activation       60/60  test/activation/check_activation.sh
#   suite           210/150 the gtest suite in GTEST_SHARDS shards, less
#                           test/gpu-skip.list (every pattern must still name
#                           a test) and driver_contract.*
#   bench            90/60  put/get vs a single-process cuMemcpyDtoD at 1, 16
#                           and 64 MiB and the 8 B latency (bench_datapath)
#   perftest-vmm     75/60  ucx_perftest between two pods (perftest-ns.sh),
#   perftest-legacy  75/60    UCX_CUDA_CPY_NS_MEM_ALLOC=vmm, legacy, chunked
#   perftest-chunked 75/60    (the expandable-segments layout) and pool (a
#   perftest-pool    75/60    stream-ordered pool: skipped when the module's
#                             UCX_CUDA_CPY_NS_MEM_ALLOC has no such mode)
#   nixl             90/120 NIXL between two pods (BUILD_DIR_122's nixl_pods,
#                           and bench_nixl on a GPU), skipped when not built
# A step cut at its cap is TIMEOUT and keeps its log; a failed step does not
# stop the later ones. A step runs when a third of its cap is left of the
# budget, and is cut at what is left; otherwise it is SKIP ("no time left").
# The pod steps are skipped when env found no veth or bridge.
#
# Output: OUT_DIR/gpu-proof-STAMP.tgz (the work folder: every step's log,
# results.tsv with one row per step: step, status, seconds, cap, figures
# joined by "; ", and summary.txt), made again before each step and every
# PROOF_PACK_S seconds while one runs, so that a command killed from outside
# still leaves the latest; the summary table on stdout at the end; one
# progress line per step on stderr, and the end of a failed step's log.
# Exit status: 0 when no step failed or timed out, 1 otherwise, 2 bad usage.
#
# Environment:
#   BUILD_DIR          the build (default build/); BUILD_DIR_122 the UCX 1.22
#                      build of the NIXL step (default build-1.22/),
#                      NIXL_PREFIX its NIXL (default the newest
#                      ~/.cache/cuda_ipc_ns/nixl-*-install)
#   UCX_CUDA_IPC_NS_DRIVER  the driver (default contrib/driver.sh: the real
#                      one with a GPU; always the emulator with --dry)
#   PROOF_BUDGET_S     the whole proof's seconds (default 480)
#   PROOF_STEPS        the steps to run, comma-separated (default all; the
#                      others are SKIP)
#   PROOF_CAP_<STEP>   a step's cap in seconds (PROOF_CAP_PERFTEST_VMM=...)
#   PROOF_WORK_DIR     where the work folder gpu-proof-STAMP is made
#                      (default BUILD_DIR/gpu-proof)
#   PROOF_SUITE_FILTER the suite's tests (default all; a sample with --dry)
#   GTEST_SHARDS       the suite's shards (default the CPUs, at most 8)
#   TEST_HANG_GUARD_MS every hang guard of the tests (default 10000:
#                      docs/testing.md, "Hang guards")
#   PROOF_PACK_S       seconds between archives during a step (default 30)
#   PROOF_HANG=STEP    test hook: that step sleeps in place of its work, to
#                      check that a hung step is cut and the rest is kept
#                      (test/gpu/check_gpu_proof.sh)
#
# shellcheck disable=SC2317  # the steps and their figures are called by name
set -uo pipefail
prog="gpu-proof"
self=$(readlink -f "$0")
top=$(cd "$(dirname "$self")/.." && pwd)
. "$top/contrib/steps.sh"

# name, cap on a GPU, cap in a dry run, what it proves
step_table="
env               30   30 the machine (GPU, driver, persistence, fd limit, veth and bridge, --mount-proc)
contract          90   60 the driver's contract (driver_contract.*) and the driver's answers
demo              30   30 the plain driver-API program (cuda_ipc_demo), also in a PID namespace
activation        60   60 activation checks (test/activation/check_activation.sh)
suite            210  150 the gtest suite in shards, less test/gpu-skip.list
bench             90   60 put/get vs cuMemcpyDtoD at 1-64 MiB and the 8 B latency (bench_datapath)
perftest-vmm      75   60 ucx_perftest between two pods, VMM memory
perftest-legacy   75   60 ucx_perftest between two pods, legacy memory (cuMemAlloc)
perftest-chunked  75   60 ucx_perftest between two pods, the expandable-segments layout
perftest-pool     75   60 ucx_perftest between two pods, memory of a stream-ordered pool
nixl              90  120 NIXL between two pods (UCX 1.22)
"
names=()
while read -r name _; do [ -z "$name" ] || names+=("$name"); done <<<"$step_table"
pod_steps=" perftest-vmm perftest-legacy perftest-chunked perftest-pool nixl "

# ============================================================================
# The steps. Each runs as `gpu-proof.sh --step NAME` under timeout(1), its
# output going straight to its log (a file, not a pipe: what it printed stays
# when it is cut, and nothing it leaves behind can block the proof). Exit 77
# with a line "proof-skip: WHY" is SKIP. The context comes in PROOF_* and
# UCX_CUDA_IPC_NS_DRIVER (exported by the main part below).
# ============================================================================
skip_step() { echo "proof-skip: $*"; exit 77; }
gtest_of() { echo "$PROOF_BUILD/test/gtest/gtest"; }
skip_list=$top/test/gpu-skip.list
skip_patterns() { sed -n 's/^\([^#][^ ]*\) @@ .*/\1/p' "$skip_list"; }

# the CUDA version of the headers the build was compiled with: the bundle's
# record on a GPU machine (its own headers, if any, may be others), else the
# build's headers
cuda_headers() {
    local info=/opt/cuda_ipc_ns-tools/bundle-info inc v="" b rest
    # the bundle names the build by its path here, linked to this copy there
    while read -r _ b rest; do
        [ "$(readlink -f "${b%:}")" != "$(readlink -f "$PROOF_BUILD")" ] ||
            v=$(sed -n 's/.*(CUDA_VERSION \([0-9]*\)).*/\1/p' <<<"$rest")
    done < <(grep '^build ' "$info" 2>/dev/null)
    if [ -z "$v" ]; then
        inc=$(sed -n 's/^CUDA_CPPFLAGS = -I\([^ ]*\).*/\1/p' "$PROOF_BUILD/Makefile")
        v=$(awk '$1 == "#define" && $2 == "CUDA_VERSION" {print $3; exit}' "$inc/cuda.h" 2>/dev/null)
    fi
    [ -n "$v" ] && echo "$((v / 1000)).$((v % 1000 / 10)) (CUDA_VERSION $v)" || echo unknown
}

# the driver itself, through ctypes (no compiler on a GPU machine): its
# version, devices and the first one's name
driver_probe() {
    command -v python3 >/dev/null || { echo "no python3 here"; return 0; }
    python3 -u - "$UCX_CUDA_IPC_NS_DRIVER" <<'EOF'
import ctypes, sys
try:
    cu = ctypes.CDLL(sys.argv[1])
except OSError as e:
    print("cannot load %s: %s" % (sys.argv[1], e)); sys.exit(1)
r = cu.cuInit(0)
if r != 0:
    print("cuInit: error %d" % r); sys.exit(1)
v, n, d = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
name = ctypes.create_string_buffer(256)
cu.cuDriverGetVersion(ctypes.byref(v))
cu.cuDeviceGetCount(ctypes.byref(n))
cu.cuDeviceGet(ctypes.byref(d), 0)
cu.cuDeviceGetName(name, 256, d)
print("cuDriverGetVersion %d, %d device(s), device 0: %s"
      % (v.value, n.value, name.value.decode(errors="replace")))
EOF
}

step_env() {
    local rc=0 q ns=proofenv$$ why
    echo "env: date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "env: machine: $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}"), kernel $(uname -r)," \
         "$(nproc) CPUs, $(awk '/^MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)," \
         "virtualization $(systemd-detect-virt 2>/dev/null | head -n 1 | grep . || echo unknown)"
    if [ -f /opt/cuda_ipc_ns-tools/bundle-info ]; then
        sed 's/^/env: bundle: /' /opt/cuda_ipc_ns-tools/bundle-info
    else
        echo "env: commit: $(git --no-optional-locks -C "$top" describe --always --dirty 2>/dev/null || echo unknown)"
    fi
    if [ "$PROOF_DRY" = 1 ]; then
        echo "env: GPU: none (dry run: the CPU emulator)"
    elif command -v nvidia-smi >/dev/null; then
        nvidia-smi
        q=$(nvidia-smi --query-gpu=name,memory.total,driver_version,persistence_mode,compute_mode \
                       --format=csv,noheader | head -n 1)
        IFS=, read -r g_name g_mem g_drv g_pm g_cm <<<"$q"
        echo "env: GPU: $g_name,$g_mem, driver$g_drv, persistence mode$g_pm, compute mode$g_cm"
    else
        echo "env: GPU: no nvidia-smi here; $(head -n 1 /proc/driver/nvidia/version 2>/dev/null || echo 'no /proc/driver/nvidia')"
    fi
    q=$(driver_probe 2>&1) || rc=1
    echo "env: driver: $UCX_CUDA_IPC_NS_DRIVER"
    echo "env: driver probe: $q"
    echo "env: CUDA headers of the build: $(cuda_headers)"
    echo "env: UCX: $(sed -n 's/^UCX_VERSION = //p' "$PROOF_BUILD/Makefile") (build $PROOF_BUILD)"
    echo "env: fd limit: $(ulimit -Sn) (hard $(ulimit -Hn))"
    # what every pod test needs from the kernel, tried where nothing else sees it
    if why=$( { ip netns add "$ns" &&
                ip -n "$ns" link add pv0 type veth peer name pv1 &&
                ip -n "$ns" link add pbr type bridge &&
                ip -n "$ns" link set pv0 master pbr &&
                ip -n "$ns" link set pbr up; } 2>&1); then
        echo "env: veth and bridge: ok"
    else
        echo "env: veth and bridge: FAILED: $(echo "$why" | tr '\n' ' ')(every pod test fails)"
        rc=1
    fi
    ip netns del "$ns" 2>/dev/null
    # a pod's own /proc: cuInit fails in a PID namespace that keeps the parent's
    if why=$(unshare --pid --fork --mount-proc true 2>&1); then
        echo "env: unshare --pid --fork --mount-proc: ok"
    else
        echo "env: unshare --pid --fork --mount-proc: FAILED: $why"
        rc=1
    fi
    return "$rc"
}

# the gtest counts of log $1: "N ran" from its last "[==========] N tests"
gtest_ran() {
    sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$1" | tail -n 1
}

step_contract() {
    local rc log=$PROOF_WORK/contract.log
    "$(gtest_of)" --gtest_filter='driver_contract.*'
    rc=$?
    if [ "$(gtest_ran "$log")" = 0 ]; then
        echo "proof: no test matches driver_contract.* in this build: nothing was checked"
        return 1
    fi
    return "$rc"
}

# "$@" with its stdout line-buffered, so that a cut keeps every line it
# printed (a program's stdout to a file is block-buffered)
linebuf() {
    if stdbuf -oL true 2>/dev/null; then stdbuf -oL "$@"; else "$@"; fi
}

step_demo() {
    local demo=$PROOF_BUILD/test/cudasim/cuda_ipc_demo rc=0
    if linebuf "$demo" "$UCX_CUDA_IPC_NS_DRIVER"; then
        echo "demo: two processes: PASS"
    else
        echo "demo: two processes: FAIL"; rc=1
    fi
    if linebuf unshare --pid --fork --mount-proc "$demo" "$UCX_CUDA_IPC_NS_DRIVER"; then
        echo "demo: in a PID namespace with its own /proc: PASS"
    else
        echo "demo: in a PID namespace with its own /proc: FAIL"; rc=1
    fi
    return "$rc"
}

step_activation() { "$top/test/activation/check_activation.sh" "$PROOF_BUILD"; }

# every pattern of the skip list must name a test of the suite
check_skip_list() {
    local list pat stale=0
    list=$(awk '/^[^ ]/ {s = $1} /^  / {print s $1}' < <("$(gtest_of)" --gtest_list_tests))
    while read -r pat; do
        # a gtest pattern: * and ? only
        if ! grep -q -x -- "$(sed 's/[.[\^$]/\\&/g; s/\*/.*/g; s/?/./g' <<<"$pat")" <<<"$list"; then
            echo "test/gpu-skip.list: '$pat' names no test of the suite"
            stale=1
        fi
    done < <(skip_patterns)
    echo "test/gpu-skip.list: $(skip_patterns | wc -l) patterns, $(grep -c . <<<"$list") tests in the suite"
    return "$stale"
}

step_suite() {
    local rc stale=0 filter
    check_skip_list || stale=1
    filter="${PROOF_SUITE_FILTER}-$(skip_patterns | paste -sd: -):driver_contract.*"
    echo "proof: --gtest_filter=$filter GTEST_SHARDS=$GTEST_SHARDS TEST_HANG_GUARD_MS=$TEST_HANG_GUARD_MS"
    SHARD_LOG_DIR=$PROOF_WORK/suite-shards \
        "$top/test/gtest/run_shards.sh" "$(gtest_of)" --gtest_filter="$filter"
    rc=$?
    [ "$stale" = 0 ] || { echo "proof: test/gpu-skip.list is stale (above)"; rc=1; }
    return "$rc"
}

step_bench() {
    if [ "$PROOF_DRY" = 1 ]; then
        # the emulator's figures mean nothing: one short round, caches kept
        BENCH_CACHE=keep BENCH_ROUNDS=1 BENCH_MIN_TIME=0.05 \
            linebuf "$PROOF_BUILD/test/bench/bench_datapath" -n 1
    else
        linebuf "$PROOF_BUILD/test/bench/bench_datapath"
    fi
}

# ucx_perftest between two pods, the module allocating -m cuda memory as $1:
# bandwidth (bw/) at 1-64 MiB, then the 8 B latency (lat/), each run cut at
# 20 s so that one hung run leaves the next to run
perftest_with() {
    local dir=$PROOF_WORK/perftest-$1 short=() rc=0 r
    [ "$PROOF_DRY" = 0 ] || short=(SHORT=1)
    perftest_run "$1" "$dir/bw" "${short[@]}" TESTS=uct:put_bw,uct:get_bw,ucp:tag_bw \
        SIZES="$([ "$PROOF_DRY" = 1 ] && echo 4M || echo 1M,16M,64M)" || rc=$?
    [ $rc != 77 ] || skip_step "contrib/perftest-ns.sh cannot run here (the line above)"
    perftest_run "$1" "$dir/lat" "${short[@]}" TESTS=uct:put_lat SIZES=8 || r=$?
    return $((rc ? rc : ${r:-0}))
}
perftest_run() {   # perftest_run MODE OUT_DIR VAR=value...
    env "${@:3}" QUIET=1 KEEP_GOING=1 RUN_TIMEOUT=20 BUILD_DIR="$PROOF_BUILD" OUT_DIR="$2" \
        EXTRA_ENV="UCX_CUDA_CPY_NS_MEM_ALLOC=$1" "$top/contrib/perftest-ns.sh"
}

# the allocation modes UCX_CUDA_CPY_NS_MEM_ALLOC accepts, as ucx_info -c -f
# documents them with the module loaded ("[vmm|legacy|chunked]")
alloc_modes() {
    local ver
    ver=$(sed -n 's/^UCX_VERSION = //p' "$PROOF_BUILD/Makefile")
    case $ver in
    1.1[0-9].*)
        LD_PRELOAD=$PROOF_BUILD/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so ucx_info -c -f ;;
    *)
        UCX_PLUGIN_PATH=$PROOF_BUILD/src/uct/cuda_ipc_ns/plugin \
            "$(sed -n 's/^UCX_INFO = //p' "$PROOF_BUILD/Makefile")" -c -f ;;
    esac 2>/dev/null | awk '/^# syntax:/ {s = $3} /^UCX_CUDA_CPY_NS_MEM_ALLOC=/ {print s; exit}'
}

step_perftest_pool() {
    local modes m
    modes=$(alloc_modes)
    echo "proof: UCX_CUDA_CPY_NS_MEM_ALLOC accepts ${modes:-nothing (ucx_info lists no such variable)}"
    m=${modes#[} m=${m%]}
    [[ "|$m|" == *"|pool|"* ]] ||
        skip_step "no stream-ordered pool allocation mode in this module (UCX_CUDA_CPY_NS_MEM_ALLOC ${modes:-?})"
    perftest_with pool
}

step_nixl() {
    local b122=${BUILD_DIR_122:-$top/build-1.22} prefix rc
    [ -x "$b122/test/nixl/nixl_pods" ] ||
        skip_step "no NIXL test built ($b122/test/nixl/nixl_pods: make -C build-1.22/test/nixl check-nixl NIXL_PREFIX=DIR, docs/testing.md \"NIXL between pods\")"
    prefix=${NIXL_PREFIX:-$(find "${CUDA_IPC_NS_CACHE:-$HOME/.cache/cuda_ipc_ns}" -maxdepth 1 \
                                 -name 'nixl-*-install' 2>/dev/null | sort | tail -n 1)}
    [ -d "$prefix/lib/plugins" ] || skip_step "no NIXL install (NIXL_PREFIX=DIR; contrib/setup-nixl.sh makes one)"
    echo "proof: NIXL $prefix, UCX 1.22 build $b122"
    export UCX_PLUGIN_PATH=$b122/src/uct/cuda_ipc_ns/plugin NIXL_PLUGIN_DIR=$prefix/lib/plugins
    "$b122/test/nixl/nixl_pods"
    rc=$?
    if [ "$PROOF_DRY" = 0 ] && [ -x "$b122/test/nixl/bench_nixl" ]; then
        BENCH_ROUNDS=3 linebuf "$b122/test/nixl/bench_nixl" || rc=1
    fi
    return "$rc"
}

if [ "${1:-}" = --step ]; then
    name=$2
    if [ "${PROOF_HANG:-}" = "$name" ]; then
        echo "proof-hang: PROOF_HANG=$name: this step sleeps in place of its work (a test hook)"
        exec sleep 100000
    fi
    case $name in
    perftest-pool) step_perftest_pool ;;
    perftest-*) perftest_with "${name#perftest-}" ;;
    *) "step_$name" ;;
    esac
    exit
fi

# ============================================================================
# The figures of each step, read after it (also when it was cut) from its log
# and its folder: one figure a line.
# ============================================================================
figures_env() {
    sed -n 's/^env: \(GPU\|driver probe\|CUDA headers\|UCX\|fd limit\|veth and bridge\|unshare\|commit\|bundle: made\)/\1/p' "$1"
}

figures_contract() {
    gtest_summary "$1"
    sed -n 's/^driver-answer: /answer: /p' "$1"
    grep '^proof: no test' "$1"
}

# gtest's summary lines and the failed tests' names
gtest_summary() {
    grep -E '^\[  (PASSED|SKIPPED|FAILED)  ?\] [0-9]+ tests?' "$1" |
        sed -E 's/^\[ *([A-Z]+) *\] ([0-9]+) .*/\2 \L\1/' | paste -sd, - | sed 's/,/, /g'
    grep -E '^\[  FAILED  \] [^ ]+\.[^ ]+' "$1" | sed 's/ (.*//; s/^\[  FAILED  \] /failed: /' |
        sort -u | head -n 10
}

figures_demo() { sed -n 's/^demo: //p' "$1"; }

figures_activation() {
    grep -E '^[0-9]+ passed, [0-9]+ failed' "$1"
    sed -n 's/^FAIL: /failed: /p' "$1" | head -n 5
}

figures_suite() {
    local dir f
    dir=$(dirname "$1")/suite-shards
    grep -E '^test/gpu-skip.list: ' "$1"
    grep -E '^\[==========\] [0-9]+ tests ran in' "$1" | sed 's/^\[==========\] //'
    if grep -q -E '^\[  PASSED  \] [0-9]+ tests' "$1"; then
        gtest_summary "$1"
        grep -E '^\[  FAILED  \] shard .*no gtest summary' "$1" | sed 's/^\[  FAILED  \] /failed: /'
        return
    fi
    # cut, or one shard: count from each shard's log what finished, and
    # name the test each shard was in
    for f in "$1" "$dir"/[0-9]*; do
        if [ ! -f "$f" ] || [[ $f == *.rc ]]; then continue; fi
        awk -v shard="${f##*/}" '
            /^\[ RUN      \] / {cur = $4}
            /^\[       OK \] .* \([0-9]+ ms\)$/ {ok++; cur = ""}
            /^\[  FAILED  \] .* \([0-9]+ ms\)$/ {bad++; t = $4; sub(/,$/, "", t); failed = failed " " t; cur = ""}
            /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ {sk++; cur = ""}
            END {
                if (ok + bad + sk + (cur != "") == 0) exit
                printf "%s: %d passed, %d skipped, %d failed%s%s\n",
                       (shard ~ /^[0-9]+$/ ? "shard " shard : "run"), ok, sk, bad,
                       (bad ? " (" substr(failed, 2) ")" : ""),
                       (cur != "" ? "; cut in " cur : "")
            }' "$f"
    done
}

figures_bench() {
    # the bandwidth rows (size iters DtoD DtoD-r async put get ...), the ratios
    awk '$1 ~ /^[0-9]+$/ && NF >= 7 {
             printf "%d MiB: DtoD %s, put %s, get %s MB/s\n", $1 / 1048576, $3, $6, $7
         }
         /^ratio (put|get)\/DtoD / {sub(/^ratio /, ""); print}
         /^8-byte put latency: / {sub(/ \(medians.*/, ""); print}
         /^ratio 8 B put latency/ {sub(/^ratio /, ""); print}' "$1"
    grep -E '^bench_[a-z]*: .*(fail|error|FAIL)' "$1" | head -n 3
}

figures_perftest() {
    grep -E '^proof: UCX_CUDA_CPY_NS_MEM_ALLOC' "$1" | sed 's/^proof: //'
    [ -n "$(find "$2" -name results.tsv 2>/dev/null)" ] || return 0
    # per test: bandwidth (MB/s) or latency (us) at each size, or the status
    awk -F'\t' 'function human(b) {
            if (b >= 1048576 && b % 1048576 == 0) return b / 1048576 "M"
            if (b >= 1024 && b % 1024 == 0) return b / 1024 "K"
            return b "B"
        }
        FNR > 1 {
            if (!($1 in row)) order[++n] = $1
            v = $8 != "ok" ? $8 : ($1 ~ /_lat$/ ? $3 " us" : $4 " MB/s")
            row[$1] = row[$1] (row[$1] == "" ? "" : ", ") human($2) " " v
            runs++; ok += $8 == "ok"
        }
        END {
            for (i = 1; i <= n; i++) print order[i] ": " row[order[i]]
            if (runs) print ok " of " runs " runs ok"
        }' "$2"/bw/results.tsv "$2"/lat/results.tsv 2>/dev/null
}

figures_nixl() {
    sed -n 's/^proof: NIXL /NIXL /p' "$1"
    gtest_summary "$1"
    grep -E '^ratio ' "$1" | sed 's/^ratio //'
}

# ============================================================================
# The main part: the steps in order, each under its cap, the archive remade
# ============================================================================
usage() { sed -n '9,13p' "$self" | sed 's/^# \{0,1\}//'; exit 2; }
dry=0
case ${1:-} in
--dry) dry=1; shift ;;
-*) usage ;;
esac
[ $# -eq 1 ] || usage
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)

build=$(cd "${BUILD_DIR:-$top/build}" 2>/dev/null && pwd) ||
    { say "no build at ${BUILD_DIR:-$top/build} (contrib/build.sh here; contrib/gpu-unpack.sh there)"; exit 2; }
if [ ! -x "$build/test/gtest/gtest" ] || [ ! -x "$build/test/cudasim/cuda_ipc_demo" ]; then
    say "the build in $build lacks the suite or the demo (make -C $build check TESTS=)"
    exit 2
fi
[ "$(id -u)" = 0 ] || { say "needs root: the pod steps make namespaces"; exit 2; }
budget=${PROOF_BUDGET_S:-480}
selected=,${PROOF_STEPS:-$(IFS=,; echo "${names[*]}")},
steps_given=${PROOF_STEPS:-}
for n in ${steps_given//,/ } ${PROOF_HANG:-}; do
    [[ " ${names[*]} " == *" $n "* ]] || { say "no step '$n' (steps: ${names[*]})"; exit 2; }
done

if [ $dry = 1 ]; then
    driver=$(readlink -f "$build/test/cudasim/.libs/libcudasim.so")
    why="the CPU emulator, dry run"
    : "${PROOF_SUITE_FILTER:=test_ctx.*:test_cudasim_stream.*:scenarios/datapath.*:datapath_pair.short_and_bcopy_copy_through_the_driver:pid_ns/*}"
else
    { read -r driver; read -r why; } < <(UCX_CUDA_IPC_NS_DRIVER=${UCX_CUDA_IPC_NS_DRIVER:-} \
                                         "$top/contrib/driver.sh" "$build") ||
        { say "no driver: see contrib/driver.sh"; exit 2; }
    case $driver in
    */libcudasim.so) say "warning: no GPU here, the driver is the emulator (--dry is the short run)" ;;
    esac
fi
cpus=$(nproc)
export UCX_CUDA_IPC_NS_DRIVER=$driver PROOF_BUILD=$build PROOF_DRY=$dry
export PROOF_SUITE_FILTER=${PROOF_SUITE_FILTER:-*}
export GTEST_SHARDS=${GTEST_SHARDS:-$((cpus < 8 ? cpus : 8))}
export TEST_HANG_GUARD_MS=${TEST_HANG_GUARD_MS:-10000}

stamp=$(date -u +%Y%m%dT%H%M%SZ)
base=gpu-proof-$stamp
work_dir=${PROOF_WORK_DIR:-$build/gpu-proof}
export PROOF_WORK=$work_dir/$base
mkdir -p "$PROOF_WORK" || exit 2
results=$PROOF_WORK/results.tsv
printf 'step\tstatus\tseconds\tcap\tfigures\n' >"$results"
t0=$SECONDS
running=""       # the step in flight, for the summary
step_pid=""      # its timeout(1)
stopped=""       # the signal that stopped the proof
reserve=10       # seconds kept for the last archive

cap_of() {   # the cap of step $1: PROOF_CAP_<STEP>, else the table's
    local var=PROOF_CAP_${1^^} gpu dry_cap
    var=${var//-/_}
    read -r _ gpu dry_cap _ < <(grep -E "^$1 " <<<"$step_table")
    [ $dry = 1 ] && echo "${!var:-$dry_cap}" || echo "${!var:-$gpu}"
}
what_of() { grep -E "^$1 " <<<"$step_table" | sed -E 's/^[^ ]+ +[0-9]+ +[0-9]+ //'; }

# summary.txt: the run, one row per step (figures one per line), totals
render_summary() {
    local n row status secs cap figs first f
    echo "GPU proof $stamp: $([ $dry = 1 ] && echo "dry run on the CPU emulator" || echo "on the driver")"
    echo "driver: $driver ($why)"
    echo "build: $build (UCX $(sed -n 's/^UCX_VERSION = //p' "$build/Makefile")); budget $budget s; shards $GTEST_SHARDS; hang guards $TEST_HANG_GUARD_MS ms"
    echo
    printf '%-17s %-8s %5s %5s  %s\n' step status secs cap figures
    for n in "${names[@]}"; do
        row=$(awk -F'\t' -v n="$n" '$1 == n' "$results")
        if [ -z "$row" ]; then
            if [ "$n" = "$running" ]; then
                printf '%-17s %-8s %5s %5s  %s\n' "$n" RUNNING "$((SECONDS - step_t0))" "$step_cap" "(in flight when this was written)"
            else
                printf '%-17s %-8s %5s %5s  %s\n' "$n" - - - "(not reached)"
            fi
            continue
        fi
        IFS=$'\t' read -r _ status secs cap figs <<<"$row"
        first=1
        while IFS= read -r f; do
            if [ $first = 1 ]; then
                printf '%-17s %-8s %5s %5s  %s\n' "$n" "$status" "$secs" "$cap" "$f"
                first=0
            else
                printf '%40s%s\n' "" "$f"
            fi
        done <<<"${figs//; /$'\n'}"
        [ $first = 0 ] || printf '%-17s %-8s %5s %5s\n' "$n" "$status" "$secs" "$cap"
    done
    echo
    awk -F'\t' 'NR > 1 {c[$2]++}
                END {printf "%d passed, %d failed, %d timed out, %d skipped", c["PASS"], c["FAIL"], c["TIMEOUT"], c["SKIP"]}' "$results"
    echo " in $((SECONDS - t0)) s${stopped:+ (stopped by SIG$stopped)}; archive $base.tgz"
}

# the archive, replaced whole (written beside, then renamed)
pack() {
    render_summary >"$PROOF_WORK/summary.txt"
    tar -C "$work_dir" --warning=no-file-changed -czf "$out/.$base.tgz.part" "$base" 2>/dev/null
    [ $? -le 1 ] && mv -f "$out/.$base.tgz.part" "$out/$base.tgz"
}

# record STEP STATUS SECONDS CAP FIGURES...: a row of results.tsv
record() {
    local figs
    # one figure an item: "; " joins them, so none may hold one
    figs=$(printf '%s\n' "${@:5}" | tr '\t' ' ' | sed 's/; /, /g' | grep -v '^$' | paste -sd';' - |
           sed 's/;/; /g')
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$figs" >>"$results"
}
skip() {   # skip STEP WHY: a SKIP row and a log that says why
    echo "proof-skip: $2" >"$PROOF_WORK/$1.log"
    record "$1" SKIP 0 "$(cap_of "$1")" "$2"
    say "$1: skipped: $2"
}

on_signal() {
    stopped=$1
    [ -z "$step_pid" ] || kill -TERM "$step_pid" 2>/dev/null
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap pack EXIT

run_step() {
    local n=$1 cap left log=$PROOF_WORK/$1.log rc secs status figs last=$SECONDS
    cap=$(cap_of "$n")
    [[ $selected == *,$n,* ]] || { skip "$n" "not in PROOF_STEPS"; return; }
    [ -z "$stopped" ] || { skip "$n" "not run: the proof was stopped (SIG$stopped)"; return; }
    if [[ $pod_steps == *" $n "* ]] && grep -q '^env: veth and bridge: FAILED' "$PROOF_WORK/env.log" 2>/dev/null; then
        skip "$n" "no veth or bridge in this kernel (env)"
        return
    fi
    left=$((budget - (SECONDS - t0) - reserve))
    if [ $left -lt $((cap / 3)) ] || [ $left -lt 5 ]; then
        skip "$n" "no time left ($left s of the budget, cap $cap s)"
        return
    fi
    [ $left -ge "$cap" ] || cap=$left
    say "$n: $(what_of "$n") (cap $cap s)"
    running=$n step_cap=$cap step_t0=$SECONDS
    pack
    timeout -k 5 "$cap" "$self" --step "$n" </dev/null >"$log" 2>&1 &
    step_pid=$!
    # who to stop should the proof itself be killed (test/gpu/check_gpu_proof.sh)
    echo "$step_pid" >"$PROOF_WORK/running.pid"
    # poll rather than wait: the archive is remade while the step runs
    while kill -0 "$step_pid" 2>/dev/null; do
        sleep 0.2
        if [ $((SECONDS - last)) -ge "${PROOF_PACK_S:-30}" ]; then pack; last=$SECONDS; fi
    done
    # (a wait cut short by a trapped signal returns while the step runs on)
    while :; do
        wait "$step_pid"
        rc=$?
        kill -0 "$step_pid" 2>/dev/null || break
    done
    step_pid="" running=""
    rm -f "$PROOF_WORK/running.pid"
    secs=$((SECONDS - step_t0))
    if { [ $rc = 124 ] || [ $rc = 137 ]; } && [ "$secs" -ge $((cap - 1)) ]; then
        status=TIMEOUT
    elif [ -n "$stopped" ] && [ $rc -ge 124 ]; then
        status=TIMEOUT
    elif [ $rc = 0 ]; then
        status=PASS
    elif [ $rc = 77 ]; then
        status=SKIP
    else
        status=FAIL
    fi
    case $n in
    perftest-*) figs=$(figures_perftest "$log" "$PROOF_WORK/$n") ;;
    *) figs=$("figures_$n" "$log") ;;
    esac
    if [ $status = SKIP ]; then
        figs=$(sed -n 's/^proof-skip: //p' "$log" | tail -n 1)
        say "$n: skipped: $figs"
    fi
    if [ $status = TIMEOUT ] && [ -n "$stopped" ]; then
        figs=$(printf '%s\n' "stopped after $secs s: the proof got SIG$stopped" "$figs")
    elif [ $status = TIMEOUT ]; then
        figs=$(printf '%s\n' "cut at $cap s" "$figs")
    fi
    mapfile -t figs_a <<<"$figs"
    record "$n" "$status" "$secs" "$cap" "${figs_a[@]}"
    if [ $status = FAIL ] || [ $status = TIMEOUT ]; then
        {
            echo "$prog: $n: $status after $secs s; the last 30 lines of its log ($log):"
            tail -n 30 "$log" | sed 's/^/    /'
        } >&2
    fi
}

say "driver: $driver ($why); work folder $PROOF_WORK; archive $out/$base.tgz"
for n in "${names[@]}"; do run_step "$n"; done
pack
trap - EXIT
cat "$PROOF_WORK/summary.txt"
say "$(tail -n 1 "$PROOF_WORK/summary.txt")"
if [ -n "$stopped" ] || awk -F'\t' 'NR > 1 && ($2 == "FAIL" || $2 == "TIMEOUT") {bad = 1} END {exit !bad}' "$results"; then
    exit 1
fi
exit 0
