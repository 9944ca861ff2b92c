#!/usr/bin/env bash
# ucx_perftest between "two pods" on one host: the SERVER runs in its own
# network namespace (ip netns + a veth pair with private IPv4 addresses) and
# its own PID namespace (unshare --pid), the CLIENT in the root namespaces
# connects to the pod's address. The pod keeps the host's filesystem, so a
# socket directory (mktemp -d, mode 0700) is shared by both sides
# (UCX_CUDA_IPC_NS_SOCK_DIR: abstract Unix sockets do not cross netns).
#
# For every (test, size): start the server in the pod, wait until it listens,
# run the client, keep both logs, parse the client's "Final:" line and add a
# row to $OUT_DIR/results.tsv. At the end: a table per test and a PNG plot of
# bandwidth vs message size ($OUT_DIR/bandwidth.png, gnuplot).
#
# Usage: contrib/perftest-ns.sh [options]     (as root)
#   -t TESTS   tests, comma/space separated, each [uct:|ucp:]NAME    ($TESTS)
#              e.g. uct:put_bw,uct:get_bw,uct:put_lat,ucp:tag_bw,ucp:ucp_put_bw
#              (get_bw/ucp_get_bw are aliases of 1.13.1's get/ucp_get)
#   -s SIZES   message sizes in bytes, K/M/G suffixes allowed        ($SIZES)
#   -m MEM     ucx_perftest memory type: cuda (default) or host      ($MEM_TYPE)
#   -x TL      UCT transport (default cu_ipc_ns)                     ($UCT_TL)
#   -d DEV     UCT device (default: cuda, memory, or the veth for tcp) ($UCT_DEV)
#   -T TLS     UCX_TLS of UCP tests (default cu_ipc_ns,cu_cpy_ns,tcp) ($UCP_TLS)
#   -o DIR     output directory (default ./perftest-out)             ($OUT_DIR)
#   -S         short mode for CI: a few sizes, few iterations        (SHORT=1)
#   -k         keep going after a failed run (exit status still 1)   (KEEP_GOING=1)
#   -q         quiet: one line per test instead of one per run; the
#              table at the end has every run                        (QUIET=1)
#   -h         this help
# More environment:
#   BUILD_DIR    where contrib/build.sh built (default: build/ of the source
#                tree). Its configuration (BUILD_DIR/Makefile: UCX_VERSION,
#                UCX_PERFTEST) decides how the module is activated, on both sides:
#                UCX 1.13.1 (build/): LD_PRELOAD of the module, ucx_perftest
#                from PATH; UCX 1.21 (build-1.21/): that UCX's own
#                ucx_perftest, LD_PRELOAD of the module (1.21 loads no
#                external plugin); UCX 1.22 (build-1.22/): that UCX's own ucx_perftest
#                and UCX_PLUGIN_PATH=BUILD_DIR/src/uct/cuda_ipc_ns/plugin, no
#                LD_PRELOAD (UCX loads the module itself)
#   MODULE       module to LD_PRELOAD on both sides; default "auto": the
#                build's libuct_cuda_ipc_ns.so when MEM is cuda or a
#                transport is cu_*, and the build is for 1.13.1; "" for none
#   PLUGIN_PATH  UCX_PLUGIN_PATH of both sides; default "auto": the build's
#                plugin/ directory when the build is for UCX 1.22 and MEM is
#                cuda or a transport is cu_*; "" for none
#   PERFTEST     the ucx_perftest to run; default: the build's UCX_PERFTEST
#                for a UCX 1.22 build, else ucx_perftest from PATH
#   UCX_CUDA_IPC_NS_DRIVER  driver for the module; default libcuda.so.1 when
#                it is installed and /dev/nvidia0 exists, else the emulator
#                $BUILD_DIR/test/cudasim/.libs/libcudasim.so
#   EXTRA_ENV    "VAR=value ..." added to both sides' environment
#   UCT_LAYOUT   UCT data layout -D (default zcopy)
#   UCP_NET_DEVICES  UCX_NET_DEVICES of UCP tests (default: the veth; "" = all)
#   PERFTEST_ARGS    extra ucx_perftest arguments (e.g. "-O 4")
#   ITERS        fixed iteration count; default: scaled to the size,
#                ITER_BYTES/size clamped to [MIN_ITERS, MAX_ITERS]
#                (1G, 20, 20000; short mode 64M, 20, 10000); warm-up n/10
#   RUN_TIMEOUT  seconds per run (default 120, short mode 60)
#   POD_SUBNET   first three octets of the /30 (default 10.213.0; the next
#                free 10.213.X is taken when it is in use)
#   PORT         ucx_perftest's TCP port in the pod (default 13337)
# Exit status: 0 all runs passed, 1 a run failed or timed out, 2 bad usage,
# 77 cannot run here (not root, a tool missing).
# Examples:
#   # the orchestration alone: host memory, stock transports, no module
#   MEM_TYPE=host UCT_TL=tcp UCP_TLS=tcp \
#     TESTS=uct:put_bw,uct:put_lat,ucp:tag_bw,ucp:ucp_put_bw,ucp:stream_bw \
#     contrib/perftest-ns.sh
#   # cu_ipc_ns with the defaults (-m cuda; UCT -x cu_ipc_ns -d cuda -D zcopy;
#   # UCP UCX_TLS=cu_ipc_ns,cu_cpy_ns,tcp; module and driver from BUILD_DIR)
#   BUILD_DIR=/tmp/build contrib/perftest-ns.sh
#   # CI: 4 sizes, few iterations, non-zero exit on any failure
#   SHORT=1 contrib/perftest-ns.sh -m host -x tcp -T tcp -t uct:put_bw,ucp:tag_bw
set -euo pipefail

prog=perftest-ns
top=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '/^# Usage:/,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "$prog: $*" >&2; exit 2; }
skip() { echo "$prog: $*" >&2; exit 77; }
say() { echo "$prog: $*"; }

while getopts "t:s:m:x:d:T:o:Skqh" opt; do
    case $opt in
    t) TESTS=$OPTARG ;;
    s) SIZES=$OPTARG ;;
    m) MEM_TYPE=$OPTARG ;;
    x) UCT_TL=$OPTARG ;;
    d) UCT_DEV=$OPTARG ;;
    T) UCP_TLS=$OPTARG ;;
    o) OUT_DIR=$OPTARG ;;
    S) SHORT=1 ;;
    k) KEEP_GOING=1 ;;
    q) QUIET=1 ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || die "unexpected argument '$1' (see -h)"

SHORT=${SHORT:-0}
if [ "$SHORT" = 1 ]; then
    SIZES=${SIZES:-8,4K,256K,4M}
    ITER_BYTES=${ITER_BYTES:-64M}
    MAX_ITERS=${MAX_ITERS:-10000}
    RUN_TIMEOUT=${RUN_TIMEOUT:-60}
fi
TESTS=${TESTS:-uct:put_bw,uct:get_bw,ucp:tag_bw,ucp:ucp_put_bw}
SIZES=${SIZES:-8,64,512,4K,32K,256K,1M,4M,16M,64M}
MEM_TYPE=${MEM_TYPE:-cuda}
UCT_TL=${UCT_TL:-cu_ipc_ns}
UCT_LAYOUT=${UCT_LAYOUT:-zcopy}
UCP_TLS=${UCP_TLS:-cu_ipc_ns,cu_cpy_ns,tcp}
OUT_DIR=${OUT_DIR:-./perftest-out}
KEEP_GOING=${KEEP_GOING:-0}
QUIET=${QUIET:-0}
ITER_BYTES=${ITER_BYTES:-1G}
MIN_ITERS=${MIN_ITERS:-20}
MAX_ITERS=${MAX_ITERS:-20000}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
POD_SUBNET=${POD_SUBNET:-10.213.0}
PORT=${PORT:-13337}
EXTRA_ENV=${EXTRA_ENV:-}
PERFTEST_ARGS=${PERFTEST_ARGS:-}
MODULE=${MODULE-auto}
PLUGIN_PATH=${PLUGIN_PATH-auto}
build=${BUILD_DIR:-$top/build}
# the UCX the build is configured against: 1.22 loads plugins by itself
ucx_version=$(sed -n 's/^UCX_VERSION = //p' "$build/Makefile" 2>/dev/null || true)
# plugin_build: not Debian's 1.13.1 (the build's own ucx_perftest, whose
# UCT server names its transport too); preload_build: a UCX that loads no
# external plugin (1.13, and 1.21, which reverted it): LD_PRELOAD
plugin_build=0 preload_build=1
case $ucx_version in "" | 1.1[0-9].*) ;; *) plugin_build=1 ;; esac
case $ucx_version in "" | 1.1[0-9].* | 1.21.*) ;; *) preload_build=0 ;; esac
if [ -z "${PERFTEST:-}" ]; then
    PERFTEST=ucx_perftest
    [ $plugin_build = 0 ] || PERFTEST=$(sed -n 's/^UCX_PERFTEST = //p' "$build/Makefile")
fi

# --- checks before touching anything ----------------------------------------
[ "$(id -u)" -eq 0 ] ||
    skip "needs root (ip netns, veth, unshare --pid); run it with sudo. Nothing was changed."
for tool in ip ss unshare timeout "$PERFTEST" awk readlink; do
    command -v "$tool" >/dev/null || skip "'$tool' is not installed (contrib/setup-deps.sh installs it)"
done

# 4K -> 4096
bytes() {
    local v=$1 m=1
    case $v in
    *[kK]) m=1024 v=${v%?} ;;
    *[mM]) m=$((1024 * 1024)) v=${v%?} ;;
    *[gG]) m=$((1024 * 1024 * 1024)) v=${v%?} ;;
    esac
    [[ $v =~ ^[0-9]+$ ]] || die "bad size '$1'"
    echo $((v * m))
}
# 4096 -> 4K
human() {
    local b=$1
    if [ "$b" -ge $((1 << 30)) ] && [ $((b % (1 << 30))) -eq 0 ]; then echo "$((b >> 30))G"
    elif [ "$b" -ge $((1 << 20)) ] && [ $((b % (1 << 20))) -eq 0 ]; then echo "$((b >> 20))M"
    elif [ "$b" -ge 1024 ] && [ $((b % 1024)) -eq 0 ]; then echo "$((b >> 10))K"
    else echo "$b"; fi
}

sizes=()
for s in ${SIZES//,/ }; do sizes+=("$(bytes "$s")"); done
[ ${#sizes[@]} -gt 0 ] || die "no message sizes"
iter_bytes=$(bytes "$ITER_BYTES")

# 1.13.1 names its get tests get/ucp_get; 1.22 has get_bw too
has_get_bw=0
[[ $("$PERFTEST" -h 2>&1) != *" get_bw - "* ]] || has_get_bw=1
# specs: label api name
specs=()
for t in ${TESTS//,/ }; do
    api=${t%%:*} name=${t#*:}
    if [ "$api" = "$t" ]; then   # bare name: UCP names start with ucp_/tag_/stream_
        case $t in ucp_* | tag_* | stream_*) api=ucp ;; *) api=uct ;; esac
        t=$api:$t
    fi
    case $api:$name in
    uct:get_bw) [ $has_get_bw = 1 ] || name="get" ;;   # 1.13.1 names: get, ucp_get
    ucp:ucp_get_bw) name=ucp_get ;;
    uct:* | ucp:*) ;;
    *) die "bad test '$t': expected uct:NAME or ucp:NAME" ;;
    esac
    specs+=("$t $api $name")
done
[ ${#specs[@]} -gt 0 ] || die "no tests"

# the module is needed for cuda memory or a cu_* transport the tests use
uses=$MEM_TYPE
[[ " ${specs[*]} " != *" uct "* ]] || uses+=",$UCT_TL"
[[ " ${specs[*]} " != *" ucp "* ]] || uses+=",$UCP_TLS"
uses_cuda=0
case $uses in *cuda* | *cu_ipc_ns* | *cu_cpy_ns*) uses_cuda=1 ;; esac
if [ "$PLUGIN_PATH" = auto ]; then
    PLUGIN_PATH=""
    if [ $uses_cuda = 1 ] && [ $preload_build = 0 ]; then
        PLUGIN_PATH=$build/src/uct/cuda_ipc_ns/plugin
        [ -e "$PLUGIN_PATH/libuct_cudaipcns.so.0" ] ||
            die "no plugin links in $PLUGIN_PATH: run UCX=1.22 BUILD_DIR=$build contrib/build.sh"
    fi
fi
if [ "$MODULE" = auto ]; then
    MODULE=""
    if [ $uses_cuda = 1 ] && [ $preload_build = 1 ]; then
        MODULE=$build/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so
        [ -f "$MODULE" ] ||
            die "module $MODULE not built: run BUILD_DIR=$build contrib/build.sh (or set MODULE/BUILD_DIR)"
    fi
fi
driver=""
[ -z "$MODULE" ] || [ -f "$MODULE" ] || die "MODULE=$MODULE does not exist"
[ -z "$MODULE" ] || MODULE=$(readlink -f "$MODULE")
if [ -n "$MODULE$PLUGIN_PATH" ]; then
    { read -r driver; read -r driver_what; } < <("$top/contrib/driver.sh" "$build") ||
        die "no CUDA driver (run contrib/build.sh, or set UCX_CUDA_IPC_NS_DRIVER)"
fi

mkdir -p "$OUT_DIR/logs"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
tsv=$OUT_DIR/results.tsv
rm -f "$OUT_DIR"/logs/*.log "$OUT_DIR"/logs/*.ns "$OUT_DIR"/logs/*.cmd "$OUT_DIR"/*.dat "$tsv" "$OUT_DIR/bandwidth.png"

# --- the pod: netns + veth + shared socket dir; cleaned up however we exit --
ns=ptns$$
veth=ptv$$       # same name on both sides: UCT's -d names the server's device too
srv=""           # server's process group (timeout + ip/unshare + ucx_perftest)
cli=""           # client's timeout process
sockdir=""
cleanup() {
    local rc=$? p pids="" i alive
    trap - EXIT INT TERM
    # whatever lives in the pod's netns keeps it and the veth alive
    [ ! -e "/run/netns/$ns" ] || pids=$(ip netns pids "$ns" 2>/dev/null || true)
    {
        [ -z "$cli" ] || kill -TERM -- "-$cli" || kill -TERM "$cli"
        [ -z "$srv" ] || kill -KILL -- "-$srv"
        for p in $pids; do kill -KILL "$p"; done
        for p in $cli $srv; do wait "$p"; done   # quietly: no "Killed" notices
    } 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do   # up to 5 s until the pod's zombies are reaped
        alive=""
        for p in $pids; do [ ! -e "/proc/$p" ] || alive=$p; done
        [ -n "$alive" ] || break
        sleep 0.1
    done
    [ ! -e "/run/netns/$ns" ] || ip netns del "$ns" 2>/dev/null || true
    ip link del "$veth" 2>/dev/null || true
    [ -z "$sockdir" ] || rm -rf "$sockdir"
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "$prog: interrupted" >&2; exit 130' INT
trap 'echo "$prog: terminated" >&2; exit 143' TERM

x=${POD_SUBNET##*.} pre=${POD_SUBNET%.*}
# (no pipe into grep -q: under pipefail its SIGPIPE makes tests flaky)
while [[ $(ip -4 -o addr show) == *" $pre.$x."* ]]; do
    x=$((x + 1))
    [ $x -lt 256 ] || die "no free $pre.X.0/30 for the veth (set POD_SUBNET)"
done
host_ip=$pre.$x.1 pod_ip=$pre.$x.2

ip netns add "$ns"
ip link add "$veth" type veth peer name "$veth" netns "$ns"
ip addr add "$host_ip/30" dev "$veth"
ip link set "$veth" up
ip -n "$ns" addr add "$pod_ip/30" dev "$veth"
ip -n "$ns" link set "$veth" up
ip -n "$ns" link set lo up
sockdir=$(mktemp -d /tmp/perftest-ns.XXXXXX)
chmod 0700 "$sockdir"

UCP_NET_DEVICES=${UCP_NET_DEVICES-$veth}
if [ -z "${UCT_DEV:-}" ]; then
    case $UCT_TL in
    tcp) UCT_DEV=$veth ;;
    cu_ipc_ns | cu_cpy_ns) UCT_DEV=cuda ;;
    self) UCT_DEV=memory0 ;;
    *) UCT_DEV=memory ;;   # posix, sysv, cma, xpmem, knem
    esac
fi

env_common=()
[ -z "$MODULE" ] || env_common+=("LD_PRELOAD=$MODULE")
[ -z "$PLUGIN_PATH" ] || env_common+=("UCX_PLUGIN_PATH=$PLUGIN_PATH")
if [ -n "$MODULE$PLUGIN_PATH" ]; then
    env_common+=("UCX_CUDA_IPC_NS_DRIVER=$driver" "UCX_CUDA_IPC_NS_SOCK_DIR=$sockdir")
fi
for e in $EXTRA_ENV; do
    [[ $e == *=* ]] || die "EXTRA_ENV entry '$e' is not VAR=value"
    env_common+=("$e")
done

say "pod: netns $ns, PID namespace of its own, $veth $host_ip (host) <-> $pod_ip (pod)"
say "shared socket dir: $sockdir"
say "memory: $MEM_TYPE; UCT: -x $UCT_TL -d $UCT_DEV -D $UCT_LAYOUT; UCP: UCX_TLS=$UCP_TLS${UCP_NET_DEVICES:+ UCX_NET_DEVICES=$UCP_NET_DEVICES}"
[ -z "$ucx_version" ] || say "UCX $ucx_version (build $build): $PERFTEST"
[ -z "$MODULE" ] || say "module: LD_PRELOAD=$MODULE"
[ -z "$PLUGIN_PATH" ] || say "module: UCX_PLUGIN_PATH=$PLUGIN_PATH (UCX loads it; no LD_PRELOAD)"
if [ -n "$MODULE$PLUGIN_PATH" ]; then
    say "driver: UCX_CUDA_IPC_NS_DRIVER=$driver ($driver_what)"
fi
say "output: $OUT_DIR"

printf 'test\tsize\tlatency_us\tbandwidth_MBs\tmsgrate\titers\tlatency_p50_us\tstatus\n' >"$tsv"

# --- one run -------------------------------------------------------------
iters_for() {
    local n
    if [ -n "${ITERS:-}" ]; then echo "$ITERS"; return; fi
    n=$((iter_bytes / $1))
    [ "$n" -ge "$MIN_ITERS" ] || n=$MIN_ITERS
    [ "$n" -le "$MAX_ITERS" ] || n=$MAX_ITERS
    echo "$n"
}

# why the logs say a run failed, in one line (empty if nothing known);
# the most specific messages first, client log before server log
diagnose() {
    local pat why f
    while IFS='|' read -r pat why; do
        [ -n "$pat" ] || continue
        for f in "$@"; do
            [ -f "$f" ] && grep -q -- "$pat" "$f" && { echo "$why"; return; }
        done
    done <<EOF2
nsupported memory type|ucx_perftest has no allocator for memory type '$MEM_TYPE' (UCX 1.13.1 and this 1.22 are built without CUDA: the module must register one)
no copy across memory types transport|UCP finds no copy transport for a memory type a memory domain detects (cuda: needs cu_cpy_ns)
is not available, please use|UCX_TLS names a transport that is not registered (module not preloaded, or not implemented yet)
does not support operation|the transport does not support this operation/data layout
No such device|the UCT device does not exist (see -d / UCT_DEV)
Destination is unreachable|the transport cannot reach the peer (across these namespaces?)
Endpoint timeout|the peers could not connect (endpoint timeout)
EOF2
}

perftest_comm=$(basename "$PERFTEST" | cut -c1-15)   # as /proc/PID/comm shows it
nscheck_printed=0
failures=0
run_one() {
    local label=$1 api=$2 name=$3 size=$4 iters warm tag clog slog nsf rc=0 i
    local p spid="" args srv_args env_side line status diag row cmd
    iters=$(iters_for "$size")
    warm=$((iters / 10)); [ $warm -ge 1 ] || warm=1; [ $warm -le 1000 ] || warm=1000
    tag=${label//:/_}-$(human "$size")
    clog=$OUT_DIR/logs/$tag.client.log slog=$OUT_DIR/logs/$tag.server.log
    nsf=$OUT_DIR/logs/$tag.ns   # the client writes its namespaces, we add the server's
    args=(-t "$name" -s "$size" -n "$iters" -w "$warm" -p "$PORT" -m "$MEM_TYPE")
    env_side=("${env_common[@]}")
    srv_args=(-p "$PORT")
    if [ "$api" = uct ]; then
        args+=(-x "$UCT_TL" -d "$UCT_DEV" -D "$UCT_LAYOUT")
        # 1.22's server checks -x/-d itself before it takes the client's test
        [ $plugin_build = 0 ] || srv_args+=(-x "$UCT_TL" -d "$UCT_DEV")
    else
        env_side+=("UCX_TLS=$UCP_TLS")
        [ -z "$UCP_NET_DEVICES" ] || env_side+=("UCX_NET_DEVICES=$UCP_NET_DEVICES")
    fi
    # shellcheck disable=SC2206
    args+=($PERFTEST_ARGS)
    row=$(printf '%-16s %6s  n=%-7s' "$label" "$(human "$size")" "$iters")
    cmd=$PERFTEST
    [ ${#env_side[@]} -eq 0 ] || cmd="env ${env_side[*]} $PERFTEST"
    {
        echo "server (pod: ip netns exec $ns unshare --pid --fork --mount-proc): $cmd ${srv_args[*]}"
        echo "client (root namespaces): $cmd $pod_ip ${args[*]}"
    } >"$OUT_DIR/logs/$tag.cmd"

    # server: own process group (set -m), pid 1 of a new PID namespace in the pod
    set -m
    timeout -s KILL $((RUN_TIMEOUT + 15)) ip netns exec "$ns" \
        unshare --pid --fork --kill-child --mount-proc \
        env "${env_side[@]}" "$PERFTEST" "${srv_args[@]}" </dev/null >"$slog" 2>&1 &
    srv=$!
    set +m

    status=ok
    for ((i = 0; i < 100; i++)); do
        [ -z "$(ip netns exec "$ns" ss -ltnH "sport = :$PORT" 2>/dev/null)" ] || break
        kill -0 "$srv" 2>/dev/null || { status="FAIL(server exited)"; break; }
        sleep 0.1
    done
    [ $i -lt 100 ] || status="FAIL(server not listening after 10 s)"

    # the server, seen from the root namespaces: its netns and pidns must differ
    if [ "$status" = ok ]; then
        for p in $(ip netns pids "$ns"); do
            [ "$(readlink "/proc/$p/ns/pid" 2>/dev/null)" != "$(readlink /proc/self/ns/pid)" ] || continue
            [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$perftest_comm" ] && spid=$p && break
        done
        [ -n "$spid" ] || status="FAIL(no ucx_perftest in a PID namespace of its own)"
    fi
    if [ "$status" = ok ]; then
        srv_pidns=$(readlink "/proc/$spid/ns/pid") srv_netns=$(readlink "/proc/$spid/ns/net")
        srv_nspid=$(awk '/^NSpid:/ {$1 = ""; print substr($0, 2)}' "/proc/$spid/status")
        # client: its own namespaces, read by itself just before exec
        # shellcheck disable=SC2016
        timeout -k 5 "$RUN_TIMEOUT" bash -c 'readlink /proc/self/ns/pid /proc/self/ns/net >"$0"; exec "$@"' \
            "$nsf" env "${env_side[@]}" "$PERFTEST" "$pod_ip" "${args[@]}" </dev/null >"$clog" 2>&1 &
        cli=$!
        wait "$cli" || rc=$?
        cli=""
        cli_pidns=$(sed -n 1p "$nsf") cli_netns=$(sed -n 2p "$nsf")
        {
            echo "server: $srv_pidns $srv_netns (pid $spid in the root ns, NSpid: $srv_nspid)"
            echo "client: $cli_pidns $cli_netns"
        } >"$nsf"
        if [ "$srv_pidns" = "$cli_pidns" ] || [ "$srv_netns" = "$cli_netns" ]; then
            status="FAIL(server shares a namespace with the client)"
        elif [ $nscheck_printed = 0 ]; then
            nscheck_printed=1
            say "namespaces: server pid $spid in the root PID ns, ${srv_nspid##* } in its own (NSpid: $srv_nspid)"
            say "  server: $srv_pidns $srv_netns"
            say "  client: $cli_pidns $cli_netns  (both differ: yes)"
        fi
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            status="TIMEOUT(client, ${RUN_TIMEOUT}s)"
        elif [[ " 132 134 135 136 139 " == *" $rc "* ]]; then   # 128 + a crash signal
            status="FAIL(client crashed: SIG$(kill -l $((rc - 128))))"
        elif [ $rc -ne 0 ]; then
            status="FAIL(client exit $rc)"
        fi
    fi

    # the server exits after its test; give it 15 s, then kill the group
    if [ "$status" = ok ]; then
        for ((i = 0; i < 150; i++)); do
            kill -0 "$srv" 2>/dev/null || break
            sleep 0.1
        done
    fi
    if kill -KILL -- "-$srv" 2>/dev/null && [ "$status" = ok ]; then
        status="FAIL(server still running 15 s after the client)"
    fi
    rc=0
    { wait "$srv"; } 2>/dev/null || rc=$?
    srv=""
    if [ "$status" = ok ] && [ $rc -ne 0 ]; then
        status="FAIL(server exit $rc)"
    fi
    for ((i = 0; i < 50; i++)); do   # until the pod's pid 1 is reaped
        if [ -z "$spid" ] || [ ! -e "/proc/$spid" ]; then break; fi
        sleep 0.1
    done

    line=""
    [ ! -f "$clog" ] || line=$(awk '$1 == "Final:" {l = $0} END {print l}' "$clog")
    if [ "$status" = ok ] && [ -z "$line" ]; then
        status="FAIL(no 'Final:' line in the client output)"
    fi
    if [ "$status" = ok ]; then
        # Final: iters lat_p50 lat_avg lat_overall bw_avg bw_overall mr_avg mr_overall
        # shellcheck disable=SC2086
        set -- $line
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\tok\n' "$label" "$size" "$5" "$7" "$9" "$2" "$3" >>"$tsv"
        [ "$QUIET" = 1 ] || printf '%s %10s MB/s %10s us\n' "$row" "$7" "$5"
        return 0
    fi

    printf '%s\t%s\t\t\t\t%s\t\t%s\n' "$label" "$size" "$iters" "${status%%(*}" >>"$tsv"
    echo "$row $status"
    failures=$((failures + 1))
    diag=$(diagnose "$clog" "$slog")
    {
        echo "$prog: FAILED $label size $(human "$size"): $status"
        [ -z "$diag" ] || echo "$prog:   cause: $diag"
        sed "s/^/$prog:   /" "$OUT_DIR/logs/$tag.cmd"
        for f in "$clog" "$slog"; do
            [ -f "$f" ] || continue
            echo "---- $f: UCX errors"
            grep -E ' UCX +(ERROR|WARN)' "$f" | head -n 5 || true
            echo "---- $f: tail"
            # ucx_perftest prints its whole usage on bad arguments: cut it
            awk '/^ *Usage: ucx_perftest/ {
                    print "  (usage text cut: ucx_perftest rejected its arguments)"; exit }
                {print}' "$f" | tail -n 8
        done
        echo "----"
    } >&2
    return 1
}

for spec in "${specs[@]}"; do
    # shellcheck disable=SC2086
    set -- $spec
    before=$failures
    for size in "${sizes[@]}"; do
        if ! run_one "$1" "$2" "$3" "$size"; then
            [ "$KEEP_GOING" = 1 ] || break 2
        fi
    done
    [ "$QUIET" = 0 ] || [ $failures -ne $before ] || say "$1: ${#sizes[@]} sizes ok"
done

# --- summary: table, plot ---------------------------------------------------
echo
say "results ($tsv), bandwidth in MB/s as ucx_perftest prints it (2^20 B/s):"
awk -F'\t' 'function human(b) {
        if (b >= 1048576 && b % 1048576 == 0) return b / 1048576 "M"
        if (b >= 1024 && b % 1024 == 0) return b / 1024 "K"
        return b
    }
    NR > 1 {
        if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
        row[$1] = row[$1] sprintf("  %10s %12s %12s %12s %8s\n", human($2),
                  ($8 == "ok" ? $4 : $8), $3, $5, $6)
    }
    END {
        for (i = 1; i <= n; i++) {
            printf "%s\n  %10s %12s %12s %12s %8s\n", order[i], "size",
                   "bw[MB/s]", "lat[us]", "msg/s", "iters"
            printf "%s", row[order[i]]
        }
    }' "$tsv"

png=$OUT_DIR/bandwidth.png
if ! command -v gnuplot >/dev/null; then
    say "gnuplot not installed (apt-get install gnuplot-nox): no plot"
elif ! awk -F'\t' 'NR > 1 && $8 == "ok" {ok = 1} END {exit !ok}' "$tsv"; then
    say "no successful run: no plot"
else
    plots=""
    for spec in "${specs[@]}"; do
        label=${spec%% *}
        dat=$OUT_DIR/${label//:/_}.dat
        awk -F'\t' -v t="$label" 'NR > 1 && $1 == t && $8 == "ok" {print $2, $4}' "$tsv" >"$dat"
        [ -s "$dat" ] || continue
        plots="${plots:+$plots, }'$dat' using 1:2 with linespoints title '$label'"
    done
    xtics=""
    for size in "${sizes[@]}"; do xtics="${xtics:+$xtics, }'$(human "$size")' $size"; done
    term=png
    gnuplot -e 'set terminal pngcairo' 2>/dev/null && term="pngcairo"
    gnuplot <<EOF
set terminal $term size 1000,650 noenhanced
set output '$png'
set title "ucx_perftest across namespaces (server in its own netns + pidns), memory: $MEM_TYPE"
set xlabel 'message size [bytes]'
set ylabel 'bandwidth [MB/s]'
set logscale x 2
set logscale y 10
set xtics ($xtics)
set offsets graph 0.03, graph 0.03, 0, 0
set grid
set key top left
plot $plots
EOF
    say "plot: $png"
fi

if [ $failures -gt 0 ]; then
    say "$failures run(s) FAILED (logs in $OUT_DIR/logs)"
    exit 1
fi
say "all runs passed"
