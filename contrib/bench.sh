#!/usr/bin/env bash
# Benchmark command: the performance figures of docs/architecture.md
# ("Performance") as ratios measured in one run, on this machine, with the
# real driver when a GPU and libcuda.so.1 are present, else the emulator:
#
#   data path      put/get bandwidth vs a single-process cuMemcpyDtoD (1, 16,
#                  64 MiB; goal >= 0.90 at 16 and 64 MiB, get/put within
#                  0.85-1.15), 8 B put latency vs async copy + event in one
#                  process, mapping cache hit cost 100,000 vs 1,000 regions
#   fd import      broker vs pidfd_getfd median
#   framework mem  put/get over 64 VMM chunks vs one allocation of the same
#                  size (4, 16, 64 MiB; goal >= 0.95), first use of a chunk
#                  (test/bench/bench_chunks, docs/framework-memory.md)
#   detection      ucp_memory_detect() per call, default vs memtype cache
#   UCP vs UCT     ucp tag_bw / uct put_bw at 64 MiB, between two pods
#   peer errors    tag_bw, ucp_put_bw, ucp_get at 4 MiB between two pods
#                  with ucx_perftest -e (peer error handling, NIXL's mode)
#                  vs without, interleaved rounds (goal >= 0.8)
#   legacy memory  legacy cuMemAlloc memory between two pods whose pid
#                  numbers differ (the pod's server is pid 1, the client
#                  is not), both sides alike, tag_bw, ucp_put_bw, ucp_get
#                  at 4 and 64 MiB: opened by the importer itself
#                  (UCX_CUDA_IPC_NS_LEGACY_DIRECT=auto: one copy) vs VMM
#                  memory (goal >= 0.95), copied by its owner through the
#                  importer's staging ring (LEGACY_DIRECT=n: two copies)
#                  vs VMM (goal >= 0.45), direct vs owner copies
#                  (printed); ucp_put_lat 8 B owner copies vs VMM
#                  (printed); and the one copy into
#                  the importer's VMM buffer vs zero copy, get and put, 8
#                  in flight, 4 and 64 MiB (test/bench/bench_owner_copy,
#                  goal >= 0.85)
#   host ring      legacy memory staged through pinned host memory (the
#                  path of pods whose GPUs cannot see each other) vs UCP's
#                  fallback without cu_ipc_ns (TCP): tag_bw, ucp_get at 4
#                  MiB between two pods, interleaved (goal >= 5)
#   side by side   (a build against the CUDA-built UCX 1.22, BUILD_DIR_122C,
#                  default build-1.22-cuda/, made by `UCX=1.22-cuda
#                  contrib/build.sh`; brought up to date, not created):
#                  the emulator as libcuda.so.1, so UCX's own cuda_copy and
#                  cuda_ipc load as on a GPU node. In one PID namespace:
#                  cu_ipc_ns vs UCX's cuda_ipc on the same memory, VMM and
#                  legacy, put/get bandwidth 64 KiB-64 MiB and the 8 B put
#                  latency (test/bench/bench_datapath, BENCH_TL; goals >=
#                  0.95 and <= 1.0); between two pods: cu_ipc_ns vs what
#                  stock UCX does there (UCX_TLS=cuda_copy,tcp: its fallback,
#                  cuda_ipc refusing another PID namespace's keys), UCP
#                  tag_bw 64 KiB and 4 MiB, tag_lat 8 B (printed). Runs
#                  alternate, SBS_ROUNDS of each (default PT_ROUNDS, else
#                  3; a bench_datapath run takes about 2 min on a 2-vCPU
#                  VM); the instruction counts (contrib/icount.sh) come
#                  with them. SIDE_BY_SIDE_ONLY=1: this part alone
#   NIXL           (UCX 1.22) NIXL WRITE / UCP put and NIXL READ / UCP get
#                  bandwidth on the same buffers between two pods, 4 and 64
#                  MiB (test/nixl/bench_nixl; NIXL from contrib/setup-nixl.sh)
#
# How figures are taken (docs/architecture.md, Performance): every timed
# operation is warmed up on the buffers it times and starts with them out of
# the CPU caches (the emulator's copies write memory, not a cache: a GPU's
# copy engine does not leave them in a CPU's); each figure is measured in
# rounds (BENCH_ROUNDS, default 5, of at least BENCH_MIN_TIME / rounds s,
# default 0.5 s per figure, 2 s for the bandwidth programs bench_datapath,
# bench_chunks and bench_owner_copy, whose copies take milliseconds); the
# bandwidth programs run every thread on one CPU (BENCH_CPU), and
# bench_chunks times fresh buffers in each round; a ratio is computed per
# round and printed as the median with its range over the rounds.
# ucx_perftest figures are taken in PT_ROUNDS runs (default 5) of each
# side, alternately: their ratio is the median of one side's runs over the
# other's, its range every run of one over every run of the other
# (ratio_line). The summary (contrib/bench-verdicts.sh) says PASS or FAIL
# against a goal only when the whole range lies on one side of it, else
# "inconclusive" with the spread; contrib/bench-agree.sh tells whether the
# summaries of several runs give every figure the same verdict.
#
# Runs them against UCX 1.13.1 (BUILD_DIR, default build/), then, when a UCX
# 1.22 build is present (BUILD_DIR_122, default build-1.22/, made by
# `UCX=1.22 contrib/build.sh` or contrib/run-tests.sh; it is brought up to
# date, not created), against UCX 1.22 too (the module through
# UCX_PLUGIN_PATH); each section and summary is labelled with the version.
# Writes BUILD/bench-out per build (OUT_DIR overrides it for 1.13.1): each
# program's output, a summary, and two plots: datapath.png (bandwidth of
# put, get and the local copy vs size) and perftest/bandwidth.png (UCT
# put_bw and UCP tag_bw vs size). The summaries of both versions come last.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build113=${BUILD_DIR:-$top/build}
build122=${BUILD_DIR_122:-$top/build-1.22}
user_driver=${UCX_CUDA_IPC_NS_DRIVER:-}   # else each build's emulator (contrib/driver.sh)

# bench BUILD_DIR OUT_DIR: every benchmark against the UCX BUILD_DIR is for
bench() {
    local BUILD_DIR=$1 out=$2 bench=$1/test/bench ver ucp uct
    export BUILD_DIR
    mkdir -p "$out"
    ver=$(sed -n 's/^UCX_VERSION = //p' "$BUILD_DIR/Makefile")
    UCX_CUDA_IPC_NS_DRIVER=$(UCX_CUDA_IPC_NS_DRIVER=$user_driver \
        "$top/contrib/driver.sh" "$BUILD_DIR" | sed -n 1p)
    export UCX_CUDA_IPC_NS_DRIVER
    echo "== UCX $ver ($BUILD_DIR), driver: $UCX_CUDA_IPC_NS_DRIVER"

    echo "== UCX $ver: data path: test/bench/bench_datapath"
    BENCH_MIN_TIME=${BENCH_MIN_TIME:-2} "$bench/bench_datapath" |
        tee "$out/datapath.txt"
    echo "== UCX $ver: mapping cache: test/bench/bench_cache"
    "$bench/bench_cache" | tee "$out/cache.txt"
    echo "== UCX $ver: fd import: test/bench/bench_fd_import"
    "$bench/bench_fd_import" | tee "$out/fd_import.txt"
    echo "== UCX $ver: framework memory (64 chunks vs one allocation): test/bench/bench_chunks"
    BENCH_MIN_TIME=${BENCH_MIN_TIME:-2} "$bench/bench_chunks" |
        tee "$out/chunks.txt"
    echo "== UCX $ver: memory-type detection: test/bench/bench_memtype_detect"
    "$bench/bench_memtype_detect" "$UCX_CUDA_IPC_NS_DRIVER" |
        tee "$out/memtype_detect.txt"
    # ucx_perftest: ITER_BYTES/size iterations (at least 64 at 64 MiB, about
    # 0.5 s on the emulator), its own warm-up (a tenth as many) on the same
    # buffers; rounds: round 1 gives the plot too
    local round rounds=${PT_ROUNDS:-5} t
    echo "== UCX $ver: UCP tag_bw vs UCT put_bw, server in another pod, $rounds rounds"
    for ((round = 1; round <= rounds; round++)); do
        OUT_DIR=$out/perftest-$round TESTS=uct:put_bw,ucp:tag_bw ITER_BYTES=4G \
            SIZES=$([ $round = 1 ] && echo 1M,4M,16M,64M || echo 64M) \
            "$top/contrib/perftest-ns.sh" >"$out/perftest-$round.log" 2>&1
    done
    rm -rf "$out/perftest" && cp -r "$out/perftest-1" "$out/perftest"
    tail -n 12 "$out/perftest-1.log"

    # -e progresses on events: each run's figure moves with the wakeups it
    # waited for, so these runs are four times as long (4,096 iterations of
    # 4 MiB, about 1 s): with 1,024, rounds of one run ranged 0.66-0.96
    echo "== UCX $ver: peer error handling (ucx_perftest -e) vs none, between two pods, $rounds rounds"
    for ((round = 1; round <= rounds; round++)); do
        OUT_DIR=$out/errh-none-$round TESTS=ucp:tag_bw,ucp:ucp_put_bw,ucp:ucp_get \
            ITER_BYTES=16G SIZES=4M "$top/contrib/perftest-ns.sh" \
            >"$out/errh-none-$round.log" 2>&1
        OUT_DIR=$out/errh-peer-$round PERFTEST_ARGS=-e ITER_BYTES=16G \
            TESTS=ucp:tag_bw,ucp:ucp_put_bw,ucp:ucp_get SIZES=4M \
            "$top/contrib/perftest-ns.sh" >"$out/errh-peer-$round.log" 2>&1
    done

    # legacy memory between pods (docs/owner-copies.md, "Which path a legacy
    # key takes"): ucx_perftest's buffers allocated with cuMemCreate (VMM:
    # mapped) or cuMemAlloc, opened by the importer itself (direct) or
    # copied by its owner through the importer's staging ring (copy),
    # interleaved
    echo "== UCX $ver: legacy memory (direct, copies by the owner) vs VMM, between two pods, $rounds rounds"
    local mem env
    for ((round = 1; round <= rounds; round++)); do
        for mem in vmm direct copy; do
            case $mem in
            vmm) env="UCX_CUDA_CPY_NS_MEM_ALLOC=vmm" ;;
            direct) env="UCX_CUDA_CPY_NS_MEM_ALLOC=legacy UCX_CUDA_IPC_NS_LEGACY_DIRECT=y" ;;
            copy) env="UCX_CUDA_CPY_NS_MEM_ALLOC=legacy UCX_CUDA_IPC_NS_LEGACY_DIRECT=n" ;;
            esac
            OUT_DIR=$out/ocopy-$mem-$round ITER_BYTES=4G SIZES=4M,64M \
                TESTS=ucp:tag_bw,ucp:ucp_put_bw,ucp:ucp_get EXTRA_ENV="$env" \
                "$top/contrib/perftest-ns.sh" >"$out/ocopy-$mem-$round.log" 2>&1
            [ $mem != direct ] || continue
            OUT_DIR=$out/ocopy-lat-$mem-$round SIZES=8 TESTS=ucp:ucp_put_lat \
                EXTRA_ENV="$env" \
                "$top/contrib/perftest-ns.sh" >"$out/ocopy-lat-$mem-$round.log" 2>&1
        done
    done
    # the pinned host ring (pods whose GPUs cannot see each other): two
    # copies through host memory against UCP's fallback without cu_ipc_ns
    # (the owner packs no broker: UCX_CUDA_IPC_NS_OWNER_COPY=n), legacy
    # memory both; 1 GiB per run, the fallback takes seconds
    echo "== UCX $ver: legacy memory through the pinned host ring vs UCP's fallback (TCP), between two pods, $rounds rounds"
    local path
    for ((round = 1; round <= rounds; round++)); do
        for path in ring tcp; do
            OUT_DIR=$out/hostring-$path-$round ITER_BYTES=1G SIZES=4M \
                TESTS=ucp:tag_bw,ucp:ucp_get \
                EXTRA_ENV="UCX_CUDA_CPY_NS_MEM_ALLOC=legacy UCX_CUDA_IPC_NS_LEGACY_DIRECT=n $([ $path = ring ] &&
                           echo UCX_CUDA_IPC_NS_OWNER_COPY_STAGING=host ||
                           echo UCX_CUDA_IPC_NS_OWNER_COPY=n)" \
                "$top/contrib/perftest-ns.sh" >"$out/hostring-$path-$round.log" 2>&1
        done
    done
    echo "== UCX $ver: one copy by the owner into our VMM buffer vs zero copy: test/bench/bench_owner_copy"
    BENCH_MIN_TIME=${BENCH_MIN_TIME:-2} "$bench/bench_owner_copy" |
        tee "$out/owner_copy.txt"

    # the perftest ratios, in the line the benchmark programs print
    # theirs in: "ratio NAME: MEDIAN (min MIN, max MAX, N rounds)"
    {
        awk -F'\t' '$1 == "uct:put_bw" && $2 == 67108864 {
                split(FILENAME, p, "/perftest-"); r = p[2] + 0; put[r] = $4; n[r] = $6 }
            $1 == "ucp:tag_bw" && $2 == 67108864 {
                split(FILENAME, p, "/perftest-"); r = p[2] + 0; tag[r] = $4 }
            END { for (r in put) if (tag[r] && put[r]) {
                      printf "%s %s %s %s\n", tag[r] / put[r], tag[r], put[r], n[r] } }' \
            "$out"/perftest-[0-9]*/results.tsv |
            ratio_line "UCP tag_bw / UCT put_bw 64 MiB" "MB/s tag_bw / put_bw"
        for t in ucp:tag_bw ucp:ucp_put_bw ucp:ucp_get; do
            awk -F'\t' -v t="$t" '$1 == t && $2 == 4194304 {
                    split(FILENAME, p, "/errh-"); split(p[2], q, "[-/]"); r = q[2] + 0
                    if (q[1] == "peer") peer[r] = $4; else { none[r] = $4; n[r] = $6 } }
                END { for (r in peer) if (none[r] && peer[r]) {
                          printf "%s %s %s %s\n", peer[r] / none[r], peer[r], none[r], n[r] } }' \
                "$out"/errh-*/results.tsv |
                ratio_line "$t -e / no -e 4 MiB" "MB/s -e / none"
        done
        local size pair a b
        for t in ucp:tag_bw ucp:ucp_put_bw ucp:ucp_get; do
            for size in 4194304 67108864; do
                for pair in direct/vmm copy/vmm direct/copy; do
                    a=${pair%/*} b=${pair#*/}
                    awk -F'\t' -v t="$t" -v size=$size -v a=$a '$1 == t && $2 == size {
                            split(FILENAME, p, "/ocopy-"); split(p[2], q, "[-/]"); r = q[2] + 0
                            if (q[1] == a) num[r] = $4; else { den[r] = $4; n[r] = $6 } }
                        END { for (r in num) if (den[r] && num[r]) {
                                  printf "%s %s %s %s\n", num[r] / den[r], num[r], den[r], n[r] } }' \
                        "$out"/ocopy-$a-*/results.tsv "$out"/ocopy-$b-*/results.tsv |
                        ratio_line "$t legacy $pair $((size >> 20)) MiB" "MB/s $a / $b"
                done
            done
        done
        awk -F'\t' '$1 == "ucp:ucp_put_lat" && $2 == 8 {
                split(FILENAME, p, "/ocopy-lat-"); split(p[2], q, "[-/]"); r = q[2] + 0
                if (q[1] == "copy") leg[r] = $3; else { vmm[r] = $3; n[r] = $6 } }
            END { for (r in leg) if (vmm[r] && leg[r]) {
                      printf "%s %s %s %s\n", leg[r] / vmm[r], leg[r], vmm[r], n[r] } }' \
            "$out"/ocopy-lat-*/results.tsv |
            ratio_line "ucp_put_lat 8 B legacy copy/vmm" "us copy / VMM"
        for t in ucp:tag_bw ucp:ucp_get; do
            awk -F'\t' -v t="$t" '$1 == t && $2 == 4194304 {
                    split(FILENAME, p, "/hostring-"); split(p[2], q, "[-/]"); r = q[2] + 0
                    if (q[1] == "ring") ring[r] = $4; else { tcp[r] = $4; n[r] = $6 } }
                END { for (r in ring) if (tcp[r] && ring[r]) {
                          printf "%s %s %s %s\n", ring[r] / tcp[r], ring[r], tcp[r], n[r] } }' \
                "$out"/hostring-*/results.tsv |
                ratio_line "$t host ring / TCP 4 MiB" "MB/s host ring / fallback"
        done
    } >"$out/perftest-ratios.txt"

    # NIXL (UCX 1.22 builds): WRITE/READ vs UCP put/get on the same buffers
    : >"$out/nixl-ratios.txt"
    if [ "${ver%.*}" = 1.22 ]; then
        local nixl_prefix nixl_rc=0
        nixl_prefix=$("$top/contrib/setup-nixl.sh" | tail -n 1) || nixl_rc=$?
        if [ $nixl_rc = 0 ]; then
            echo "== UCX $ver: NIXL WRITE/READ vs UCP put/get, target in another pod: test/nixl/bench_nixl"
            make -s -C "$BUILD_DIR/test/nixl" bench-nixl NIXL_PREFIX="$nixl_prefix" |
                tee "$out/nixl.txt"
            grep '^ratio ' "$out/nixl.txt" >"$out/nixl-ratios.txt" || true
        else
            echo "== UCX $ver: no NIXL figures (contrib/setup-nixl.sh exited $nixl_rc)"
        fi
    fi

    # bandwidth columns of the data-path table: size DtoD DtoD-r async put get
    awk '$1 ~ /^[0-9]+$/ && NF == 10 {print $1 / 1048576, $3, $5, $6, $7}' \
        "$out/datapath.txt" >"$out/datapath.dat"
    gnuplot <<GP
set terminal png size 900,560 noenhanced
set output "$out/datapath.png"
set title "UCX $ver: cu_ipc_ns put/get vs a single-process cuMemcpyDtoD ($(basename "$UCX_CUDA_IPC_NS_DRIVER"))"
set xlabel "message size (MiB)"
set ylabel "bandwidth (MB/s, medians of the rounds)"
set logscale x 2
set key top right
set grid
plot "$out/datapath.dat" using 1:2 with linespoints title "cuMemcpyDtoD, one process", \
     "" using 1:3 with linespoints title "cuMemcpyDtoDAsync + sync, one process", \
     "" using 1:4 with linespoints title "put_zcopy, another process", \
     "" using 1:5 with linespoints title "get_zcopy, another process"
GP

    {
        echo "== summary, UCX $ver (goals: docs/architecture.md, Performance): median [min-max] over the rounds"
        cat "$out/datapath.txt" "$out/cache.txt" "$out/fd_import.txt" "$out/chunks.txt" \
            "$out/memtype_detect.txt" "$out/owner_copy.txt" "$out/perftest-ratios.txt" \
            "$out/nixl-ratios.txt" | "$top/contrib/bench-verdicts.sh"
        echo "plots: $out/datapath.png $out/perftest/bandwidth.png"
    } | tee "$out/summary.txt"
}

# ratio_line NAME UNITS: reads "ratio a b iterations" per round (a and b:
# the figures of two ucx_perftest runs), prints a ratio line and what it
# came from. Each run is a process of its own, with its own buffers, so its
# figure moves from run to run by more than within one (their placement in
# memory; measured: a 4 MiB put_bw ranged 17-25 GB/s over 8 runs) and
# pairing run i of a with run i of b says nothing: the ratio is median(a) /
# median(b), and its range every run of a over every run of b, min(a) /
# max(b) to max(a) / min(b)
ratio_line() {
    awk -v name="$1" -v units="$2" '
        function median(x, k,    i, j, t) {
            for (i = 2; i <= k; i++)
                for (j = i; j > 1 && x[j - 1] > x[j]; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
            return (k % 2) ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
        }
        { a[++n] = $2; b[n] = $3; it = it (it ? "," : "") $4 }
        END {
            if (!n) { printf "ratio %s: none (a run failed)\n", name; exit }
            runs = sprintf("  runs (%s):", units)
            for (i = 1; i <= n; i++) runs = runs sprintf(" %.0f/%.0f", a[i], b[i])
            ma = median(a, n); mb = median(b, n)
            printf "ratio %s: %.3f (min %.3f, max %.3f, %d rounds)\n", name, ma / mb,
                a[1] / b[n], a[n] / b[1], n
            printf "%s; iterations per run: %s\n", runs, it
        }'
}

# side_by_side BUILD_DIR OUT_DIR: the module beside UCX's own cuda_ipc, and
# beside stock UCX's fallback between pods, on a UCX built with CUDA
side_by_side() {
    local BUILD_DIR=$1 out=$2 ldir round mem tl t size op col
    local rounds=${SBS_ROUNDS:-${PT_ROUNDS:-3}}
    export BUILD_DIR
    mkdir -p "$out"
    ldir=$(mktemp -d /tmp/cuda_ipc_ns_libcuda.XXXXXX)
    ln -s "$BUILD_DIR/test/cudasim/.libs/libcudasim.so" "$ldir/libcuda.so.1"
    local drv=$BUILD_DIR/test/cudasim/.libs/libcudasim.so
    [ -z "$user_driver" ] || drv=$user_driver
    echo "== side by side, UCX built with CUDA ($BUILD_DIR): cu_ipc_ns vs UCX's cuda_ipc in one PID namespace, $rounds rounds (test/bench/bench_datapath)"
    for ((round = 1; round <= rounds; round++)); do
        for mem in vmm legacy; do
            for tl in cu_ipc_ns cuda_ipc; do
                LD_LIBRARY_PATH=$ldir UCX_CUDA_IPC_NS_DRIVER=$drv BENCH_TL=$tl \
                    BENCH_MEM=$mem BENCH_ROUNDS=1 BENCH_MIN_TIME=${BENCH_MIN_TIME:-0.4} \
                    BENCH_SIZES=64K,1M,16M,64M "$BUILD_DIR/test/bench/bench_datapath" \
                    >"$out/sbs-$mem-$tl-$round.txt" 2>&1 ||
                    echo "bench_datapath through $tl on $mem memory failed (round $round)"
            done
        done
    done
    echo "== side by side: between two pods, cu_ipc_ns vs stock UCX's fallback (UCX_TLS=cuda_copy,tcp), $rounds rounds"
    for ((round = 1; round <= rounds; round++)); do
        for tl in ns stock; do
            OUT_DIR=$out/pods-$tl-$round ITER_BYTES=1G SIZES=64K,4M \
                TESTS=ucp:tag_bw UCP_TLS=$([ $tl = ns ] && echo cu_ipc_ns,cuda_copy,tcp || echo cuda_copy,tcp) \
                EXTRA_ENV="LD_LIBRARY_PATH=$ldir" \
                "$top/contrib/perftest-ns.sh" >"$out/pods-$tl-$round.log" 2>&1
            OUT_DIR=$out/podslat-$tl-$round SIZES=8 TESTS=ucp:tag_lat \
                UCP_TLS=$([ $tl = ns ] && echo cu_ipc_ns,cuda_copy,tcp || echo cuda_copy,tcp) \
                EXTRA_ENV="LD_LIBRARY_PATH=$ldir" \
                "$top/contrib/perftest-ns.sh" >"$out/podslat-$tl-$round.log" 2>&1
        done
    done
    rm -rf "$ldir"
    {
        # bench_datapath's table: size iters DtoD DtoD-r async put get ...
        for mem in vmm legacy; do
            for size in 65536 1048576 16777216 67108864; do
                for op in put get; do
                    col=$([ $op = put ] && echo 6 || echo 7)
                    awk -v size=$size -v col=$col '$1 == size && NF == 10 {
                            split(FILENAME, p, "/sbs-"); split(p[2], q, "[-.]")
                            r = q[3] + 0
                            if (q[2] == "cu_ipc_ns") ns[r] = $col; else st[r] = $col }
                        END { for (r in ns) if (ns[r] && st[r]) {
                                  printf "%s %s %s 1\n", ns[r] / st[r], ns[r], st[r] } }' \
                        "$out"/sbs-$mem-*.txt |
                        ratio_line "$op $mem cu_ipc_ns/cuda_ipc $((size >> 10)) KiB" \
                                   "MB/s cu_ipc_ns / cuda_ipc"
                done
            done
            awk '/^8-byte put latency:/ {
                    split(FILENAME, p, "/sbs-"); split(p[2], q, "[-.]"); r = q[3] + 0
                    if (q[2] == "cu_ipc_ns") ns[r] = $4; else st[r] = $4 }
                END { for (r in ns) if (ns[r] && st[r]) {
                          printf "%s %s %s 1\n", ns[r] / st[r], ns[r], st[r] } }' \
                "$out"/sbs-$mem-*.txt |
                ratio_line "8 B put latency $mem cu_ipc_ns/cuda_ipc" "us cu_ipc_ns / cuda_ipc"
        done
        for size in 65536 4194304; do
            awk -F'\t' -v size=$size '$1 == "ucp:tag_bw" && $2 == size {
                    split(FILENAME, p, "/pods-"); split(p[2], q, "[-/]"); r = q[2] + 0
                    if (q[1] == "ns") ns[r] = $4; else { st[r] = $4; n[r] = $6 } }
                END { for (r in ns) if (ns[r] && st[r]) {
                          printf "%s %s %s %s\n", ns[r] / st[r], ns[r], st[r], n[r] } }' \
                "$out"/pods-*/results.tsv |
                ratio_line "ucp:tag_bw pods cu_ipc_ns/fallback $((size >> 10)) KiB" \
                           "MB/s cu_ipc_ns / stock fallback"
        done
        awk -F'\t' '$1 == "ucp:tag_lat" && $2 == 8 {
                split(FILENAME, p, "/podslat-"); split(p[2], q, "[-/]"); r = q[2] + 0
                if (q[1] == "ns") ns[r] = $3; else { st[r] = $3; n[r] = $6 } }
            END { for (r in ns) if (ns[r] && st[r]) {
                      printf "%s %s %s %s\n", ns[r] / st[r], ns[r], st[r], n[r] } }' \
            "$out"/podslat-*/results.tsv |
            ratio_line "ucp:tag_lat 8 B pods cu_ipc_ns/fallback" "us cu_ipc_ns / stock fallback"
    } >"$out/side-by-side.txt"
    echo "== side by side: instruction counts (contrib/icount.sh)"
    ICOUNT_STOCK_BUILD=$BUILD_DIR "$top/contrib/icount.sh" "$build113" 2>&1 |
        grep -v '^==' | tee "$out/icount.txt"
    {
        echo "== summary, side by side (UCX built with CUDA): median [min-max] over the rounds"
        "$top/contrib/bench-verdicts.sh" <"$out/side-by-side.txt"
    } | tee "$out/summary.txt"
}

BUILD_DIR=$build113 "$top/contrib/build.sh"
summaries=()
if [ "${SIDE_BY_SIDE_ONLY:-0}" != 1 ]; then
    summaries=("${OUT_DIR:-$build113/bench-out}/summary.txt")
    bench "$build113" "${OUT_DIR:-$build113/bench-out}"
    if [ -f "$build122/Makefile" ]; then
        BUILD_DIR=$build122 UCX=1.22 "$top/contrib/build.sh"
        bench "$build122" "$build122/bench-out"
        summaries+=("$build122/bench-out/summary.txt")
    else
        echo "== no UCX 1.22 build at $build122 (UCX=1.22 contrib/build.sh makes one): 1.13.1 only"
    fi
fi
build122c=${BUILD_DIR_122C:-$top/build-1.22-cuda}
if [ -f "$build122c/Makefile" ]; then
    BUILD_DIR=$build122c UCX=1.22-cuda "$top/contrib/build.sh"
    make -s -C "$build122c" -j2 >/dev/null
    side_by_side "$build122c" "$build122c/bench-out/side-by-side"
    summaries+=("$build122c/bench-out/side-by-side/summary.txt")
else
    echo "== no build against the CUDA-built UCX 1.22 at $build122c (UCX=1.22-cuda contrib/build.sh makes one): no side by side"
fi
if [ ${#summaries[@]} -gt 1 ]; then
    echo
    echo "== the summaries"
    cat "${summaries[@]}"
fi
