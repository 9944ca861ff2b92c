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
#
# Writes OUT_DIR (default build/bench-out): each program's output, a summary,
# and two plots: datapath.png (bandwidth of put, get and the local copy vs
# size) and perftest/bandwidth.png (UCT put_bw and UCP tag_bw vs size).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
export BUILD_DIR=${BUILD_DIR:-$top/build}
out=${OUT_DIR:-$BUILD_DIR/bench-out}
bench=$BUILD_DIR/test/bench

"$top/contrib/build.sh"
mkdir -p "$out"

UCX_CUDA_IPC_NS_DRIVER=$("$top/contrib/driver.sh" "$BUILD_DIR" | sed -n 1p)
export UCX_CUDA_IPC_NS_DRIVER
echo "== driver: $UCX_CUDA_IPC_NS_DRIVER"

echo "== data path: test/bench/bench_datapath"
"$bench/bench_datapath" | tee "$out/datapath.txt"
echo "== mapping cache: test/bench/bench_cache"
"$bench/bench_cache" | tee "$out/cache.txt"
echo "== fd import: test/bench/bench_fd_import"
"$bench/bench_fd_import" | tee "$out/fd_import.txt"
echo "== memory-type detection: test/bench/bench_memtype_detect"
"$bench/bench_memtype_detect" -n 2000000 "$UCX_CUDA_IPC_NS_DRIVER" |
    tee "$out/memtype_detect.txt"
echo "== UCP tag_bw vs UCT put_bw, server in another pod"
OUT_DIR=$out/perftest TESTS=uct:put_bw,ucp:tag_bw SIZES=1M,4M,16M,64M \
    "$top/contrib/perftest-ns.sh" | tail -n 14

# bandwidth columns of the data-path table: size DtoD async put get
awk '$1 ~ /^[0-9]+$/ && NF == 8 {print $1 / 1048576, $2, $3, $4, $5}' \
    "$out/datapath.txt" >"$out/datapath.dat"
gnuplot <<GP
set terminal png size 900,560 noenhanced
set output "$out/datapath.png"
set title "cu_ipc_ns put/get vs a single-process cuMemcpyDtoD ($(basename "$UCX_CUDA_IPC_NS_DRIVER"))"
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
    echo "== summary (goals: docs/architecture.md, Performance)"
    grep -E '^(1048576|16777216|67108864) ' "$out/datapath.txt" |
        awk '{printf "put/DtoD and get/DtoD at %3d MiB: %s %s (goal >= 0.90); put/async copy: %s\n", $1 / 1048576, $6, $7, $8}'
    sed -n 's/^8-byte put latency.*ratio \([0-9.]*\).*/8 B put latency vs async copy + event: \1 (goal <= 1.5)/p' "$out/datapath.txt"
    sed -n 's/^mapping cache hit, 1,000 regions in use.*ratio \([0-9.]*\).*/cache hit, 100,000 vs 1,000 regions: \1 (goal <= 2)/p' "$out/datapath.txt"
    sed -n 's/^mapping cache hit, every cached region.*ratio \([0-9.]*\).*/cache hit, every region in use, 100,000 vs 1,000: \1 (memory-bound)/p' "$out/datapath.txt"
    sed -n 's/.*ratio broker\/pidfd (median): \([0-9.]*\).*/fd import broker\/pidfd: \1 (goal <= 10)/p' "$out/fd_import.txt"
    sed -n 's/^ratio host pointer default\/cache: \([0-9.]*\).*/detection of a host pointer, default\/cache: \1/p' "$out/memtype_detect.txt"
    awk -v a="$ucp" -v b="$uct" 'BEGIN {if (a && b) printf "UCP tag_bw / UCT put_bw at 64 MiB: %.3f (%s / %s MB/s)\n", a / b, a, b}'
    echo "plots: $out/datapath.png $out/perftest/bandwidth.png"
} | tee "$out/summary.txt"
