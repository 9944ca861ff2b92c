#!/usr/bin/env bash
# Benchmark command: the performance figures of docs/architecture.md
# ("Performance") as ratios measured in one run, on this machine, with the
# real driver when a GPU and libcuda.so.1 are present, else the emulator:
#
#   data path      put/get bandwidth vs a single-process cuMemcpyDtoD (1, 16,
#                  64 MiB), 8 B put latency vs async copy + event in one
#                  process, mapping cache hit cost 100,000 vs 1,000 regions
#   fd import      broker vs pidfd_getfd median
#   detection      ucp_memory_detect() per call, default vs memtype cache
#   UCP vs UCT     ucp tag_bw / uct put_bw at 64 MiB, between two pods
#   peer errors    tag_bw, ucp_put_bw, ucp_get at 4 MiB between two pods
#                  with ucx_perftest -e (peer error handling, NIXL's mode)
#                  vs without, interleaved rounds (goal >= 0.8)
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
    "$bench/bench_datapath" | tee "$out/datapath.txt"
    echo "== UCX $ver: mapping cache: test/bench/bench_cache"
    "$bench/bench_cache" | tee "$out/cache.txt"
    echo "== UCX $ver: fd import: test/bench/bench_fd_import"
    "$bench/bench_fd_import" | tee "$out/fd_import.txt"
    echo "== UCX $ver: memory-type detection: test/bench/bench_memtype_detect"
    "$bench/bench_memtype_detect" -n 2000000 "$UCX_CUDA_IPC_NS_DRIVER" |
        tee "$out/memtype_detect.txt"
    echo "== UCX $ver: UCP tag_bw vs UCT put_bw, server in another pod"
    OUT_DIR=$out/perftest TESTS=uct:put_bw,ucp:tag_bw SIZES=1M,4M,16M,64M \
        "$top/contrib/perftest-ns.sh" | tail -n 14

    echo "== UCX $ver: peer error handling (ucx_perftest -e) vs none, between two pods"
    local round
    for round in 1 2 3; do
        OUT_DIR=$out/errh-none-$round TESTS=ucp:tag_bw,ucp:ucp_put_bw,ucp:ucp_get \
            SIZES=4M "$top/contrib/perftest-ns.sh" >/dev/null
        OUT_DIR=$out/errh-peer-$round PERFTEST_ARGS=-e \
            TESTS=ucp:tag_bw,ucp:ucp_put_bw,ucp:ucp_get SIZES=4M \
            "$top/contrib/perftest-ns.sh" >/dev/null
    done

    # bandwidth columns of the data-path table: size DtoD async put get
    awk '$1 ~ /^[0-9]+$/ && NF == 8 {print $1 / 1048576, $2, $3, $4, $5}' \
        "$out/datapath.txt" >"$out/datapath.dat"
    gnuplot <<GP
set terminal png size 900,560 noenhanced
set output "$out/datapath.png"
set title "UCX $ver: cu_ipc_ns put/get vs a single-process cuMemcpyDtoD ($(basename "$UCX_CUDA_IPC_NS_DRIVER"))"
set xlabel "message size (MiB)"
set ylabel "bandwidth (MB/s)"
set logscale x 2
set key top right
set grid
plot "$out/datapath.dat" using 1:2 with linespoints title "cuMemcpyDtoD, one process", \
     "" using 1:3 with linespoints title "cuMemcpyDtoDAsync + sync, one process", \
     "" using 1:4 with linespoints title "put_zcopy, another process", \
     "" using 1:5 with linespoints title "get_zcopy, another process"
GP

    bw() {   # bandwidth of test $1 at size 64M from the perftest TSV
        awk -F'\t' -v t="$1" '$1 == t && $2 == 67108864 {print $4}' \
            "$out/perftest/results.tsv"
    }
    ucp=$(bw ucp:tag_bw) uct=$(bw uct:put_bw)
    {
        echo "== summary, UCX $ver (goals: docs/architecture.md, Performance)"
        grep -E '^(1048576|16777216|67108864) ' "$out/datapath.txt" |
            awk '{printf "put/DtoD and get/DtoD at %3d MiB: %s %s (goal >= 0.90); put/async copy: %s\n", $1 / 1048576, $6, $7, $8}'
        sed -n 's/^8-byte put latency.*ratio \([0-9.]*\).*/8 B put latency vs async copy + event: \1 (goal <= 1.5)/p' "$out/datapath.txt"
        sed -n 's/^mapping cache hit, 1,000 regions in use.*ratio \([0-9.]*\).*/cache hit, 100,000 vs 1,000 regions: \1 (goal <= 2)/p' "$out/cache.txt"
        sed -n 's/^mapping cache hit, every cached region.*ratio \([0-9.]*\).*/cache hit, every region in use, 100,000 vs 1,000: \1 (memory-bound)/p' "$out/cache.txt"
        sed -n 's/.*ratio broker\/pidfd (median): \([0-9.]*\).*/fd import broker\/pidfd: \1 (goal <= 10)/p' "$out/fd_import.txt"
        sed -n 's/^ratio host pointer default\/cache: \([0-9.]*\).*/detection of a host pointer, default\/cache: \1/p' "$out/memtype_detect.txt"
        awk -v a="$ucp" -v b="$uct" 'BEGIN {if (a && b) printf "UCP tag_bw / UCT put_bw at 64 MiB: %.3f (%s / %s MB/s)\n", a / b, a, b}'
        # median over the rounds of each mode, per test, at 4 MiB
        for t in ucp:tag_bw ucp:ucp_put_bw ucp:ucp_get; do
            awk -F'\t' -v t="$t" '$1 == t && $2 == 4194304 {
                    mode = (FILENAME ~ /errh-peer/) ? "peer" : "none"
                    v[mode, ++n[mode]] = $4 }
                function median(m,   i, j, x) {
                    for (i = 1; i <= n[m]; i++) for (j = i + 1; j <= n[m]; j++)
                        if (v[m, j] < v[m, i]) { x = v[m, i]; v[m, i] = v[m, j]; v[m, j] = x }
                    return v[m, int((n[m] + 1) / 2)] }
                END { if (n["peer"] && n["none"])
                    printf "%s -e / no -e at 4 MiB: %.2f (goal >= 0.8; medians %.0f / %.0f MB/s)\n",
                           t, median("peer") / median("none"), median("peer"), median("none") }' \
                "$out"/errh-*/results.tsv
        done
        echo "plots: $out/datapath.png $out/perftest/bandwidth.png"
    } | tee "$out/summary.txt"
}

BUILD_DIR=$build113 "$top/contrib/build.sh"
summaries=("${OUT_DIR:-$build113/bench-out}/summary.txt")
bench "$build113" "${OUT_DIR:-$build113/bench-out}"
if [ -f "$build122/Makefile" ]; then
    BUILD_DIR=$build122 UCX=1.22 "$top/contrib/build.sh"
    bench "$build122" "$build122/bench-out"
    summaries+=("$build122/bench-out/summary.txt")
else
    echo "== no UCX 1.22 build at $build122 (UCX=1.22 contrib/build.sh makes one): 1.13.1 only"
fi
if [ ${#summaries[@]} -gt 1 ]; then
    echo
    echo "== the summaries of both versions"
    cat "${summaries[@]}"
fi
