#!/usr/bin/env bash
# Open MPI (pml ucx + osc ucx) moving cuMemAlloc memory between two ranks on
# this host through the module: builds test/mpi/mpi_legacy.c with mpicc and
# runs it with the mpirun line of README.md ("Open MPI"). Exit 77 (skip)
# without Open MPI.
#
#   test/mpi/run_mpi.sh [--other-pid-ns] [SIZE]
#
# --other-pid-ns: each rank is pid 1 of its own PID namespace (unshare), so
# that legacy keys cross namespaces: cu_ipc_ns refuses them with a warning
# and UCP moves the data without it (docs/ucp.md, "Legacy memory from another
# PID namespace"); UCX_TLS then excludes sm (posix and sysv do not connect
# across PID namespaces). Environment: BUILD_DIR (default build/ of the
# source tree), MPIRUN_ARGS (extra mpirun arguments, e.g.
# "-x UCX_PROTO_ENABLE=y").
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$top/build}
module=$build/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so
driver=${UCX_CUDA_IPC_NS_DRIVER:-$build/test/cudasim/.libs/libcudasim.so}

wrap=()
tls=()
if [ "${1:-}" = --other-pid-ns ]; then
    shift
    wrap=(unshare --pid --fork)
    tls=(-x UCX_TLS=self,tcp,cu_ipc_ns,cu_cpy_ns)
fi
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
    { echo "run_mpi: no mpicc/mpirun (apt-get install openmpi-bin libopenmpi-dev): skipped"; exit 77; }
[ -f "$module" ] || { echo "run_mpi: no $module: build first (contrib/build.sh)"; exit 1; }

mkdir -p "$build/test/mpi"
prog=$build/test/mpi/mpi_legacy
mpicc -O2 -Wall -Werror -o "$prog" "$top/test/mpi/mpi_legacy.c" -ldl

root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
# shellcheck disable=SC2086
exec timeout 300 mpirun "${root[@]}" -np 2 --oversubscribe \
    -x LD_PRELOAD="$module" -x UCX_CUDA_IPC_NS_DRIVER="$driver" "${tls[@]}" \
    --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
    --mca osc ucx ${MPIRUN_ARGS:-} "${wrap[@]}" "$prog" "$@"
