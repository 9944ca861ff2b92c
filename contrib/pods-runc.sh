#!/usr/bin/env bash
# ucx_perftest -m cuda between two pods as Kubernetes makes them, started by
# runc (Debian's package; contrib/setup-deps.sh installs it): a SERVER and a
# CLIENT container, each with
#  - its own PID, IPC, UTS and mount namespaces, and a network namespace of
#    its own (ip netns add, as the CNI plugin makes the pod's) joined to the
#    other's by a veth pair (eth0 in both, 10.214.0.1 and .2/30);
#  - containerd's default capability set (pkg/oci/spec.go, defaultUnixCaps:
#    CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID SETUID SETFCAP
#    SETPCAP NET_BIND_SERVICE SYS_CHROOT KILL AUDIT_WRITE; no SYS_PTRACE, no
#    SYS_ADMIN);
#  - containerd's default seccomp profile (contrib/pods/seccomp.json, which
#    says where it comes from): pidfd_getfd, ptrace, process_vm_readv/writev,
#    unshare, mount and setns are refused;
#  - a read-only root of its own (a skeleton with /usr and /etc bound
#    read-only, `runc run --no-pivot`), its own /dev, /dev/shm and /tmp, the
#    source and build tree bound read-only at their paths (the module, the
#    emulator), and the broker's socket directory as a read-write volume
#    (a host directory of mode 0700 at /run/cuda-ipc-ns in both).
# Each process is pid 1 of its container, as in a pod without
# shareProcessNamespace.
#
# Steps: a probe in each container (contrib/pods/probe.py) must show pid 1,
# containerd's capability mask, a seccomp filter, and each of the calls above
# refused where the kernel alone would allow it; then for every allocator,
# test and size a server container and a client container: the run passes
# when both exit 0, the client prints its "Final:" line, the two processes
# share none of the five namespaces (each prints its own before it starts
# ucx_perftest) and neither shares one with this shell; and for UCP tests
# UCP's endpoint configuration puts cu_ipc_ns on the data lanes (UCT tests
# name the transport); then, per allocator, test/pods/ucp_pods_check.c
# checks every byte of a UCP put, get and tagged message between the two,
# and the importer's debug lines show the path the allocator's memory must
# take (zero copy through the broker, or the owner's copies). One
# line per step and allocator; the tools' output goes to OUT_DIR/logs/;
# figures in OUT_DIR/results.tsv. docs/testing.md ("Pods on runc").
#
# Usage: contrib/pods-runc.sh [options]     (as root)
#   -a ALLOCS  memory of ucx_perftest -m cuda, the module's allocator
#              (UCX_CUDA_CPY_NS_MEM_ALLOC), comma separated     ($ALLOCS)
#   -t TESTS   [uct:|ucp:]NAME, comma separated                ($TESTS)
#   -s SIZES   message sizes, K/M suffixes allowed              ($SIZES)
#   -o DIR     output directory (default BUILD_DIR/pods-runc)   ($OUT_DIR)
#   -h         this help
# Defaults: ALLOCS=vmm,chunked,legacy,pool
#   TESTS=uct:put_bw,uct:get_bw,ucp:tag_bw,ucp:ucp_put_bw  SIZES=8,64K,4M
# More environment: BUILD_DIR (default build/ of the source tree, a UCX
#   1.13.1 build: the module is preloaded in both containers; a UCX 1.21
#   build preloads it too, a 1.22 build names its plugin directory; the
#   build's UCX is bound read-only into the pods), ITERS (200),
#   CHECK_SIZES (the byte check's, 8,65536,4194317), RUN_TIMEOUT (60 s per
#   run), EXTRA_ENV ("VAR=value ..." for both sides), LOG_LEVEL (UCX's in
#   the byte check, debug: its path check reads it), PERF_LOG_LEVEL (UCX's
#   in ucx_perftest, info: the lane check reads it; debug adds the path
#   check to every run, and time), SERVER_PID1=0 (the server's process
#   runs under a shell, not as pid 1: the two pid numbers differ), PORT
#   (13337); UCP_TLS (UCX_TLS of the UCP runs and the byte check, default
#   cu_ipc_ns,cu_cpy_ns,tcp; UCP_TLS= leaves UCX_TLS unset, UCX's default
#   transports, as NIXL runs); USERNS=1: each container in a user namespace of its own,
#   container uids 0-65535 on host uids USERNS_SRV+ (1000000) and
#   USERNS_CLI+ (2000000), as hostUsers: false gives; SOCK_OWNER=idmap
#   (the default) mounts the socket volume, a host directory of root's,
#   idmapped into each pod (contrib/pods/idmap-mount.py), as Kubernetes
#   1.30+ with runc 1.2+ does, so each pod's root owns it; srv or cli: owned
#   by that side's root, root: by the host's, no idmapped mount (runc 1.1.5's
#   own way). With USERNS=1 the module runs with UCX_CUDA_IPC_NS_USERNS_PEERS
#   (USERNS_PEERS, default y; n shows the default's refusal).
# Exit status: 0 all passed, 1 a run failed, 2 bad usage, 77 cannot run here
# (not root, no runc, no cgroup file system, runc cannot start a container:
# the line says which).
set -euo pipefail
prog=pods-runc
top=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '/^# Usage:/,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "$prog: $*" >&2; exit 2; }
skip() { echo "$prog: skipped: $*" >&2; exit 77; }
say() { echo "$prog: $*"; }

while getopts "a:t:s:o:h" opt; do
    case $opt in
    a) ALLOCS=$OPTARG ;;
    t) TESTS=$OPTARG ;;
    s) SIZES=$OPTARG ;;
    o) OUT_DIR=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || die "unexpected argument '$1' (see -h)"

ALLOCS=${ALLOCS:-vmm,chunked,legacy,pool}
TESTS=${TESTS:-uct:put_bw,uct:get_bw,ucp:tag_bw,ucp:ucp_put_bw}
SIZES=${SIZES:-8,64K,4M}
ITERS=${ITERS:-200}
CHECK_SIZES=${CHECK_SIZES:-8,65536,4194317}
RUN_TIMEOUT=${RUN_TIMEOUT:-60}
PORT=${PORT:-13337}
EXTRA_ENV=${EXTRA_ENV:-}
SERVER_PID1=${SERVER_PID1:-1}
LOG_LEVEL=${LOG_LEVEL:-debug}
PERF_LOG_LEVEL=${PERF_LOG_LEVEL:-info}
UCP_TLS=${UCP_TLS-cu_ipc_ns,cu_cpy_ns,tcp}
USERNS=${USERNS:-0}
USERNS_SRV=${USERNS_SRV:-1000000} USERNS_CLI=${USERNS_CLI:-2000000}
SOCK_OWNER=${SOCK_OWNER:-idmap}
USERNS_PEERS=${USERNS_PEERS:-y}
build=$(cd "${BUILD_DIR:-$top/build}" 2>/dev/null && pwd) ||
    skip "no build at ${BUILD_DIR:-$top/build} (run contrib/build.sh)"
OUT_DIR=${OUT_DIR:-$build/pods-runc}
module=$build/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so
emulator=$build/test/cudasim/.libs/libcudasim.so
containerd_caps=00000000a80425fb   # CapEff of containerd's default set

# --- can runc start a pod here? ------------------------------------------
[ "$(id -u)" -eq 0 ] || skip "needs root (runc, ip netns); nothing was changed"
for tool in runc ip ss timeout python3 cc; do
    command -v "$tool" >/dev/null ||
        skip "'$tool' is not installed (contrib/setup-deps.sh installs it)"
done
mkvar() { sed -n "s/^$1 = //p" "$build/Makefile" 2>/dev/null || true; }
ucx_version=$(mkvar UCX_VERSION)
# the build's UCX: its ucx_perftest, libraries (bound read-only into the
# pods when they are not under /usr) and how it finds the module: UCX 1.13
# and 1.21 load only compiled-in modules, the module is preloaded; 1.22
# scans UCX_PLUGIN_PATH (docs/ucx-versions.md)
perftest=$(mkvar UCX_PERFTEST) ucx_libdir=$(mkvar UCX_LIBDIR)
[ -n "$perftest" ] || skip "no UCX_PERFTEST in $build/Makefile (run contrib/build.sh)"
case $ucx_version in
1.13.* | 1.21.*) activation=("LD_PRELOAD=$module") ;;
1.22.*) activation=("UCX_PLUGIN_PATH=$build/src/uct/cuda_ipc_ns/plugin") ;;
*) skip "BUILD_DIR=$build is for UCX ${ucx_version:-?}: the harness knows 1.13, 1.21 and 1.22" ;;
esac
if [ ! -f "$module" ] || [ ! -f "$emulator" ]; then
    skip "module or emulator not built in $build (run contrib/build.sh)"
fi
[ -n "$(ls -A /sys/fs/cgroup 2>/dev/null)" ] || skip "no cgroup file system at /sys/fs/cgroup (runc needs one)"
python=/usr/bin/python3   # the container sees /usr, not this PATH
[ -x $python ] || skip "no $python for the probe"

# 4K -> 4096
bytes() {
    local v=$1 m=1
    case $v in
    *[kK]) m=1024 v=${v%?} ;;
    *[mM]) m=$((1024 * 1024)) v=${v%?} ;;
    esac
    [[ $v =~ ^[0-9]+$ ]] || die "bad size '$1'"
    echo $((v * m))
}
sizes=() allocs=() specs=()
for s in ${SIZES//,/ }; do sizes+=("$(bytes "$s")"); done
check_sizes=()
for s in ${CHECK_SIZES//,/ }; do check_sizes+=("$(bytes "$s")"); done
CHECK_SIZES=$(IFS=,; echo "${check_sizes[*]}")
for a in ${ALLOCS//,/ }; do
    case $a in vmm | chunked | legacy | pool) allocs+=("$a") ;; *) die "bad allocator '$a'" ;; esac
done
for t in ${TESTS//,/ }; do
    api=${t%%:*} name=${t#*:}
    if [ "$api" = "$t" ]; then
        case $t in ucp_* | tag_* | stream_*) api=ucp ;; *) api=uct ;; esac
    fi
    case $api:$name in
    uct:get_bw) [[ $ucx_version != 1.13.* ]] || name="get" ;;   # 1.13.1's names
    ucp:ucp_get_bw) [[ $ucx_version != 1.13.* ]] || name=ucp_get ;;
    uct:* | ucp:*) ;;
    *) die "bad test '$t'" ;;
    esac
    specs+=("$api:$name")
done
if [ ${#sizes[@]} -eq 0 ] || [ ${#allocs[@]} -eq 0 ] || [ ${#specs[@]} -eq 0 ]; then
    die "nothing to run"
fi

mkdir -p "$OUT_DIR/logs"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
logs=$OUT_DIR/logs
rm -f "$logs"/*.log "$logs"/*.json "$OUT_DIR/results.tsv"

# --- the two pods: netns, veth, rootfs, socket volume; cleaned up at exit ---
id=pr$$
work=""
nets=() idmapped=()
cleanup() {
    local rc=$? c n
    trap - EXIT INT TERM
    for c in "$id-srv" "$id-cli" "$id-probe-srv" "$id-probe-cli"; do
        runc --root "$work/state" delete -f "$c" >/dev/null 2>&1 || true
    done
    for n in "${nets[@]}"; do ip netns del "$n" 2>/dev/null || true; done
    for n in "${idmapped[@]}"; do umount "$n" 2>/dev/null || true; done
    [ -z "$work" ] || rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "$prog: interrupted" >&2; exit 130' INT
trap 'echo "$prog: terminated" >&2; exit 143' TERM

work=$(mktemp -d /tmp/pods-runc.XXXXXX)
mkdir -p "$work/state" "$work/srv" "$work/cli" "$work/sock" "$work/bin"
chmod 0700 "$work/sock"   # the broker refuses a directory others can enter
# user-namespaced pods (USERNS=1): disjoint host uid ranges, as
# hostUsers: false gives; the volume belongs to one of them (SOCK_OWNER)
declare -A userns_base=([srv]=$USERNS_SRV [cli]=$USERNS_CLI)
if [ "$USERNS" = 1 ]; then
    chmod 0755 "$work"
    case $SOCK_OWNER in
    srv | cli) chown "${userns_base[$SOCK_OWNER]}:${userns_base[$SOCK_OWNER]}" "$work/sock" ;;
    root | idmap) ;;
    *) die "SOCK_OWNER=$SOCK_OWNER: idmap, srv, cli or root" ;;
    esac
fi
# the volume as each pod mounts it: $work/sock, or idmapped into its range
declare -A sock_src=([srv]=$work/sock [cli]=$work/sock)
if [ "$USERNS" = 1 ] && [ "$SOCK_OWNER" = idmap ]; then
    for side in srv cli; do
        mkdir -p "$work/sock-$side"
        python3 "$top/contrib/pods/idmap-mount.py" "$work/sock" "$work/sock-$side" \
            "${userns_base[$side]}" 2>"$work/idmap.log" ||
            skip "no idmapped mount of the socket volume here: $(cat "$work/idmap.log")"
        idmapped+=("$work/sock-$side")
        sock_src[$side]=$work/sock-$side
    done
fi
rootfs=$work/rootfs
mkdir -p "$rootfs"/{usr,etc,proc,dev,sys,tmp,run/cuda-ipc-ns}
for l in bin lib lib32 lib64 sbin; do
    [ ! -L "/$l" ] || ln -s "$(readlink "/$l")" "$rootfs/$l"
done
mounts=(--ro /usr --ro /etc --ro "$top" --ro "$work/bin")
ucx_prefix=""
case $ucx_libdir/ in
/usr/*) ;;
*) ucx_prefix=$(dirname "$ucx_libdir")
   mounts+=(--ro "$ucx_prefix"); mkdir -p "$rootfs$ucx_prefix" ;;
esac
mkdir -p "$rootfs$top" "$rootfs$work/bin"
case $build/ in
"$top"/*) ;;
*) mounts+=(--ro "$build"); mkdir -p "$rootfs$build" ;;
esac
# a root of each pod's own; a user-namespaced pod's belongs to its root, as
# the runtime makes the image's (the broker checks the directories above
# its socket directory)
for side in srv cli; do
    cp -a "$rootfs" "$work/rootfs-$side"
    if [ "$USERNS" = 1 ]; then
        chown -R -h "${userns_base[$side]}:${userns_base[$side]}" "$work/rootfs-$side"
    fi
done

# both ends live in the pods' namespaces: no clash with the host's
# addresses or another pair's
srv_ip=10.214.0.1 cli_ip=10.214.0.2
nets=("$id-srv" "$id-cli")
ip netns add "$id-srv"
ip netns add "$id-cli"
ip link add eth0 netns "$id-srv" type veth peer name eth0 netns "$id-cli"
ip -n "$id-srv" addr add "$srv_ip/30" dev eth0
ip -n "$id-cli" addr add "$cli_ip/30" dev eth0
for n in "$id-srv" "$id-cli"; do
    ip -n "$n" link set eth0 up
    ip -n "$n" link set lo up
done

env_common=(PATH=/usr/bin:/usr/sbin:/bin "${activation[@]}"
            "UCX_CUDA_IPC_NS_DRIVER=$emulator" UCX_CUDA_IPC_NS_SOCK_DIR=/run/cuda-ipc-ns
            UCX_NET_DEVICES=eth0)
for e in $EXTRA_ENV; do
    [[ $e == *=* ]] || die "EXTRA_ENV entry '$e' is not VAR=value"
    env_common+=("$e")
done

# config.json of container $1 (srv|cli) in its bundle, env from "${cenv[@]}"
# and the command from "$@"
config() {
    local side=$1 e opts=()
    shift
    for e in "${cenv[@]}"; do opts+=(--env "$e"); done
    if [ "$USERNS" = 1 ]; then
        opts+=(--userns "${userns_base[$side]}" --env "UCX_CUDA_IPC_NS_USERNS_PEERS=$USERNS_PEERS")
    fi
    python3 "$top/contrib/pods/runc-config.py" "$work/$side/config.json" "$work/rootfs-$side" \
        "/run/netns/$id-$side" "$top/contrib/pods/seccomp.json" "pod-$side" \
        "${opts[@]}" "${mounts[@]}" --rw "${sock_src[$side]}:/run/cuda-ipc-ns" -- "$@"
}

# the byte check (test/pods/ucp_pods_check.c), built against this UCX
checker=$work/bin/ucp_pods_check
ucx_cc=()
[ -z "$ucx_prefix" ] || ucx_cc=(-isystem "$ucx_prefix/include" -L"$ucx_libdir" -Wl,-rpath,"$ucx_libdir")
cc -O2 -Wall -Wextra -Werror -o "$checker" "$top/test/pods/ucp_pods_check.c" \
    "${ucx_cc[@]}" -lucp -lucs -ldl >"$logs/ucp_pods_check-build.log" 2>&1 || {
    echo "$prog: building test/pods/ucp_pods_check.c FAILED:" >&2
    sed 's/^/    /' "$logs/ucp_pods_check-build.log" >&2
    exit 1
}

say "runc $(runc --version | sed -n 's/^runc version //p'), UCX $ucx_version ($perftest), module ${activation[*]}"
say "pods: netns $id-srv eth0 $srv_ip <-> netns $id-cli eth0 $cli_ip; socket volume $work/sock -> /run/cuda-ipc-ns"
say "output: $OUT_DIR"

# --- step 1: what each container may do ------------------------------------
probe() {
    local side=$1 log=$logs/probe-$1.log line
    cenv=("${env_common[@]}")
    config "$side" $python "$top/contrib/pods/probe.py"
    cp "$work/$side/config.json" "$logs/config-$side.json"
    if ! runc --root "$work/state" run --no-pivot -b "$work/$side" "$id-probe-$side" \
            </dev/null >"$log" 2>&1; then
        if grep -q -e 'cgroup' -e 'operation not permitted' "$log"; then
            skip "runc cannot start a container here: $(grep -m1 -o 'msg=.*' "$log")"
        fi
        echo "$prog: probe in the $side container FAILED:" >&2
        sed 's/^/    /' "$log" >&2
        exit 1
    fi
    local uid_map="uid_map 0 0 4294967295"
    [ "$USERNS" != 1 ] || uid_map="uid_map 0 ${userns_base[$side]} 65536"
    for line in "pid 1" "$uid_map" "CapEff $containerd_caps" "Seccomp 2" "pidfd_getfd EPERM" \
            "ptrace EPERM" "process_vm_readv EPERM" "process_vm_writev EPERM" \
            "unshare EPERM" "mount EPERM" "setns EPERM"; do
        grep -qx "$line" "$log" || {
            echo "$prog: the $side container is not a pod's: no line '$line' in $log:" >&2
            sed 's/^/    /' "$log" >&2
            exit 1
        }
    done
}
probe srv
probe cli
[ "$USERNS" != 1 ] ||
    say "user namespaces: uids 0-65535 are host uids $USERNS_SRV+ (server) and $USERNS_CLI+ (client); the socket volume belongs to $SOCK_OWNER; UCX_CUDA_IPC_NS_USERNS_PEERS=$USERNS_PEERS"
say "probe: both pid 1, CapEff ${containerd_caps#00000000} (containerd's), seccomp refuses" \
    "pidfd_getfd ptrace process_vm_* unshare mount setns"

# --- step 2: ucx_perftest between them ---------------------------------------
host_ns=$(readlink /proc/self/ns/{pid,net,ipc,uts,mnt} | paste -sd' ')
# the five namespaces a container's process printed (line "ns: ...")
ns_of() { sed -n 's/^ns: //p' "$1" | head -n 1; }
# shellcheck disable=SC2016
nsprint='echo ns: $(LD_PRELOAD= readlink /proc/self/ns/pid /proc/self/ns/net /proc/self/ns/ipc /proc/self/ns/uts /proc/self/ns/mnt); echo "pid: $$"'
failures=0
printf 'alloc\ttest\tsize\tbandwidth_MBs\tlatency_us\tstatus\n' >"$OUT_DIR/results.tsv"
srv_pid=""
# pair TAG: a server container running "${srv_cmd[@]}" (which listens on
# $PORT), then a client container running "${cli_cmd[@]}", both with the
# environment "${cenv[@]}"; logs/TAG.{server,client}.log, and in $status
# "ok" or what failed. Each prints its namespaces and pid first.
pair() {
    local tag=$1 rc=0 i slog=$logs/$1.server.log clog=$logs/$1.client.log
    status=ok
    if [ "$SERVER_PID1" = 1 ]; then
        config srv /bin/sh -c "$nsprint; exec \"\$@\"" sh "${srv_cmd[@]}"
    else
        config srv /bin/sh -c "$nsprint; \"\$@\" & wait \$!" sh "${srv_cmd[@]}"
    fi
    config cli /bin/sh -c "$nsprint; exec \"\$@\"" sh "${cli_cmd[@]}"
    {
        echo "server container: ${cenv[*]} ${srv_cmd[*]}"
        echo "client container: ${cenv[*]} ${cli_cmd[*]}"
    } >"$logs/$tag.cmd"

    timeout -s KILL $((RUN_TIMEOUT + 15)) runc --root "$work/state" run --no-pivot \
        -b "$work/srv" "$id-srv" </dev/null >"$work/srv.log" 2>&1 &
    srv_pid=$!
    for ((i = 0; i < 100; i++)); do
        [ -z "$(ip netns exec "$id-srv" ss -ltnH "sport = :$PORT" 2>/dev/null)" ] || break
        kill -0 "$srv_pid" 2>/dev/null || { status="FAIL(server exited)"; break; }
        sleep 0.1
    done
    [ $i -lt 100 ] || status="FAIL(server not listening after 10 s)"
    if [ "$status" = ok ]; then
        timeout -s KILL "$RUN_TIMEOUT" runc --root "$work/state" run --no-pivot \
            -b "$work/cli" "$id-cli" </dev/null >"$work/cli.log" 2>&1 || rc=$?
        case $rc in
        0) ;;
        137) status="TIMEOUT(client, ${RUN_TIMEOUT}s)" ;;
        *) status="FAIL(client exit $rc)" ;;
        esac
    fi
    rc=0
    if [ "$status" = ok ]; then
        wait "$srv_pid" || rc=$?
        [ $rc -eq 0 ] || status="FAIL(server exit $rc)"
    else
        runc --root "$work/state" kill "$id-srv" KILL >/dev/null 2>&1 || true
        wait "$srv_pid" 2>/dev/null || true
    fi
    srv_pid=""
    runc --root "$work/state" delete -f "$id-srv" >/dev/null 2>&1 || true
    runc --root "$work/state" delete -f "$id-cli" >/dev/null 2>&1 || true
    # the copy client's polls of its socket fill a debug log: leave them out
    grep -v 'recvmsg(socket [0-9]*) failed: Resource temporarily unavailable' \
        "$work/srv.log" >"$slog" || true
    grep -v 'recvmsg(socket [0-9]*) failed: Resource temporarily unavailable' \
        "$work/cli.log" >"$clog" || true
    rm -f "$work/srv.log" "$work/cli.log"
    [ "$status" = ok ] || return 0
    # neither process shares a namespace with the other or with this shell
    local sns cns a b h
    sns=$(ns_of "$slog") cns=$(ns_of "$clog")
    # shellcheck disable=SC2206
    a=($sns) b=($cns) h=($host_ns)
    if [ ${#a[@]} -ne 5 ] || [ ${#b[@]} -ne 5 ]; then
        status="FAIL(no namespaces printed)"
        return 0
    fi
    for i in 0 1 2 3 4; do
        if [ "${a[i]}" = "${b[i]}" ] || [ "${a[i]}" = "${h[i]}" ] || [ "${b[i]}" = "${h[i]}" ]; then
            status="FAIL(a shared namespace: ${a[i]} ${b[i]})"
        fi
    done
}

# the lines of the path the allocator's memory must take
# (docs/owner-copies.md), seen in the importer's debug lines, into
# path_lines; $2 the size
set_path_lines() {
    case $1 in
    # zero copy: the importer got the fd from the owner's broker (no
    # pidfd_getfd between pods) and mapped the allocation (each chunk)
    vmm) path_lines=("watching peer pid .* through its broker" "mapped allocation") ;;
    chunked)
        path_lines=("watching peer pid .* through its broker" "mapped allocation")
        # one chunk below the granularity (2 MiB): a layout above it
        [ "$2" -le $((2 << 20)) ] || path_lines+=(": [0-9]* chunks")
        ;;
    # both pid 1: the importer's open would find its own pid in the key
    legacy) path_lines=("copies made by its owner") ;;
    pool) path_lines=("unshareable VMM allocation .*: copies made by its owner") ;;
    esac
}

# the failure of run TAG: the commands, each side's namespaces, UCX's
# errors and last lines
report() {
    local f
    echo "$prog: FAILED $1: $status"
    sed "s/^/$prog:   /" "$logs/$2.cmd"
    for f in "$logs/$2.client.log" "$logs/$2.server.log"; do
        echo "---- $f: its namespaces, UCX's errors, warnings and diag lines, its own lines"
        grep -E '^(ns|pid):|UCX +(ERROR|WARN|DIAG)|^Final:|^ucp_pods_check' "$f" | tail -n 12
    done
    echo "----"
}

run_one() {
    local alloc=$1 api=${2%%:*} name=${2#*:} size=$3 tag slog clog
    local args cenv_side line pat
    tag=$alloc-$name-$size
    slog=$logs/$tag.server.log clog=$logs/$tag.client.log
    args=(-t "$name" -s "$size" -n "$ITERS" -w $((ITERS / 10 + 1)) -p "$PORT" -m cuda)
    cenv_side=("${env_common[@]}" "UCX_CUDA_CPY_NS_MEM_ALLOC=$alloc" "UCX_LOG_LEVEL=$PERF_LOG_LEVEL")
    if [ "$api" = uct ]; then
        args+=(-x cu_ipc_ns -d cuda -D zcopy)
    else
        # cu_ipc_ns moves the data, cu_cpy_ns detects the memory type, tcp
        # carries UCP's messages (and eager tag messages)
        [ -z "$UCP_TLS" ] || cenv_side+=("UCX_TLS=$UCP_TLS")
    fi
    cenv=("${cenv_side[@]}")
    set_path_lines "$alloc" "$size"
    srv_cmd=("$perftest" -p "$PORT") cli_cmd=("$perftest" "$srv_ip" "${args[@]}")
    # from 1.21 on, the server of a UCT test names its transport and device too
    [ "$api" != uct ] || [[ $ucx_version == 1.13.* ]] || srv_cmd+=(-x cu_ipc_ns -d cuda)
    pair "$tag"
    line=$(awk '$1 == "Final:" {l = $0} END {print l}' "$clog")
    [ "$status" != ok ] || [ -n "$line" ] || status="FAIL(no 'Final:' line)"
    # the lane: UCP's endpoint configuration (UCT tests name the transport)
    if [ "$status" = ok ] && [ "$api" = ucp ] &&
        ! grep -Eq 'ep_cfg\[[0-9]+\]: .*cu_ipc_ns/cuda| cfg#[0-9]+ .*cu_ipc_ns/cuda' "$clog"; then
        status="FAIL(no cu_ipc_ns lane in the client's endpoint configuration)"
    fi
    # the path the allocator's memory must take (docs/owner-copies.md), seen
    # in the importer's debug lines (the byte check's always); a small
    # tagged message goes eagerly over tcp and takes none
    if [ "$status" = ok ] && [ "$PERF_LOG_LEVEL" = debug ] &&
        { [ "$size" -ge 65536 ] || [ "$name" != tag_bw ]; }; then
        for pat in "${path_lines[@]}"; do
            grep -q -- "$pat" "$slog" "$clog" ||
                status="FAIL(no line '$pat': not the path of $alloc memory)"
        done
    fi
    if [ "$status" = ok ]; then
        # shellcheck disable=SC2086
        set -- $line
        printf '%s\t%s\t%s\t%s\t%s\tok\n' "$alloc" "$api:$name" "$size" "$7" "$5" >>"$OUT_DIR/results.tsv"
        return 0
    fi
    printf '%s\t%s\t%s\t\t\t%s\n' "$alloc" "$api:$name" "$size" "${status%%(*}" >>"$OUT_DIR/results.tsv"
    failures=$((failures + 1))
    report "$alloc $api:$name size $size" "$tag" >&2
    return 1
}

for alloc in "${allocs[@]}"; do
    before=$failures
    for spec in "${specs[@]}"; do
        for size in "${sizes[@]}"; do run_one "$alloc" "$spec" "$size" || true; done
    done
    # the rows of this allocator, "test size: MB/s" for the largest size
    summary=$(awk -F'\t' -v a="$alloc" -v s="${sizes[-1]}" \
        '$1 == a && $3 == s && $6 == "ok" {printf "%s%s %.0f MB/s", sep, $2, $4; sep = ", "}' \
        "$OUT_DIR/results.tsv")
    if [ $failures -eq $before ]; then
        say "$alloc: ${#specs[@]} tests x ${#sizes[@]} sizes passed (at ${sizes[-1]} B: $summary)"
    else
        say "$alloc: $((failures - before)) run(s) FAILED"
    fi
done

# --- step 3: the bytes, UCP put, get and tag between the pods ----------------
# the path memory of allocator $1 took, from the logs of run $2
path_taken() {
    local f=("$logs/$2.server.log" "$logs/$2.client.log")
    case $1 in
    vmm | chunked) echo "zero copy, the fd from the owner's broker" ;;
    pool) echo "the owner's copies (the default pool exports no handle)" ;;
    legacy)
        if grep -q "not opened here, its pid is ours" "${f[@]}"; then
            echo "the owner's copies: both pid 1, the importer's open predicted to fail"
        elif grep -q "copies made by its owner" "${f[@]}"; then
            echo "the owner's copies after the importer's open failed"
        else
            echo "the importer's own open"
        fi
        ;;
    esac
}
for alloc in "${allocs[@]}"; do
    tag=$alloc-bytes
    cenv=("${env_common[@]}" "UCX_CUDA_CPY_NS_MEM_ALLOC=$alloc" "UCX_LOG_LEVEL=$LOG_LEVEL")
    [ -z "$UCP_TLS" ] || cenv+=("UCX_TLS=$UCP_TLS")
    srv_cmd=("$checker" -l "$PORT" -s "$CHECK_SIZES")
    cli_cmd=("$checker" "$srv_ip" "$PORT" -s "$CHECK_SIZES")
    pair "$tag"
    for f in server client; do
        [ "$status" != ok ] || grep -q "^ucp_pods_check: $f: all bytes as expected" "$logs/$tag.$f.log" ||
            status="FAIL(the $f found other bytes)"
    done
    set_path_lines "$alloc" "${check_sizes[-1]}"
    for pat in "${path_lines[@]}"; do
        [ "$status" != ok ] || grep -q -- "$pat" "$logs/$tag.server.log" "$logs/$tag.client.log" ||
            status="FAIL(no line '$pat': not the path of $alloc memory)"
    done
    if [ "$status" = ok ]; then
        say "$alloc: bytes as expected after UCP put, get and tag of $CHECK_SIZES B ($(path_taken "$alloc" "$tag"))"
    else
        failures=$((failures + 1))
        report "$alloc: UCP bytes (test/pods/ucp_pods_check.c)" "$tag" >&2
    fi
done

if [ $failures -gt 0 ]; then
    say "$failures run(s) FAILED (logs in $logs)"
    exit 1
fi
say "all runs passed: ${#allocs[@]} allocators x (${#specs[@]} tests x ${#sizes[@]} sizes + the byte check) in $SECONDS s"
