#!/usr/bin/env bash
# Main job: from a fresh clone to ucx_perftest moving CUDA buffers over
# cu_ipc_ns between two processes in different PID and network namespaces.
#
# Installs what is missing and builds (contrib/build.sh), shows the
# activation (ucx_info with the module preloaded), then runs
# contrib/perftest-ns.sh: the ucx_perftest server is "another pod" (its own
# PID and network namespaces, a veth pair, the broker socket directory on a
# shared path), the client runs here. UCT put_bw/get_bw over cu_ipc_ns and
# UCP tag_bw/ucp_put_bw with UCX_TLS=cu_ipc_ns,cu_cpy_ns,tcp, -m cuda,
# 8 B .. 64 MiB. Prints a table and writes a PNG plot (OUT_DIR, default
# build/perftest-out). With a GPU and libcuda.so.1 the real driver is used,
# otherwise the CPU emulator; the output says which. Everything it creates
# (namespaces, veth, processes, socket directory) is removed however it exits.
#
# Quiet: one line per setup/build step (the tools' output goes to logs, see
# contrib/build.sh), the activation, one line per test and the table.
#
# Against UCX 1.22: UCX=1.22 contrib/demo.sh (builds in build-1.22/; the
# module is loaded through UCX_PLUGIN_PATH, with 1.22's ucx_info/ucx_perftest).
# Against UCX 1.21 (Dynamo's): UCX=1.21 contrib/demo.sh (build-1.21/, the
# module preloaded into 1.21's tools).
# Environment: BUILD_DIR, OUT_DIR, TESTS, SIZES, SHORT=1 (a few sizes),
# QUIET=0 (a line per ucx_perftest run), and the rest of
# contrib/perftest-ns.sh -h.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
case ${UCX:-} in
"") export BUILD_DIR=${BUILD_DIR:-$top/build} ;;
1.21 | 1.21.0) export BUILD_DIR=${BUILD_DIR:-$top/build-1.21} ;;   # as contrib/build.sh
*) export BUILD_DIR=${BUILD_DIR:-$top/build-1.22} ;;   # as contrib/build.sh (UCX=1.22)
esac
export OUT_DIR=${OUT_DIR:-$BUILD_DIR/perftest-out}
export TESTS=${TESTS:-uct:put_bw,uct:get_bw,ucp:tag_bw,ucp:ucp_put_bw}
export QUIET=${QUIET:-1}

"$top/contrib/build.sh"

module=$BUILD_DIR/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so
driver=$("$top/contrib/driver.sh" "$BUILD_DIR" | sed -n 1p)
ucx_version=$(sed -n 's/^UCX_VERSION = //p' "$BUILD_DIR/Makefile")
case $ucx_version in
1.1[0-9].*)   # 1.13.1: the module preloaded
    activation=("LD_PRELOAD=$module") ucx_info=ucx_info ;;
1.21.*)       # 1.21: loads no external plugin; its own ucx_info, the module preloaded
    activation=("LD_PRELOAD=$module")
    ucx_info=$(sed -n 's/^UCX_INFO = //p' "$BUILD_DIR/Makefile") ;;
*)            # 1.22: that UCX's own ucx_info, the module as a plugin
    activation=("UCX_PLUGIN_PATH=$BUILD_DIR/src/uct/cuda_ipc_ns/plugin")
    ucx_info=$(sed -n 's/^UCX_INFO = //p' "$BUILD_DIR/Makefile") ;;
esac
echo "== activation (UCX $ucx_version): ${activation[*]}"
env "${activation[@]}" UCX_CUDA_IPC_NS_DRIVER="$driver" "$ucx_info" -d |
    awk '/^# Memory domain:/ {p = ($4 == "cuda_ipc_ns" || $4 == "cuda_cpy_ns")}
         p && /(Memory domain|Component|Transport|Device):/'

echo "== ucx_perftest between two pods"
exec "$top/contrib/perftest-ns.sh"
