#!/usr/bin/env bash
# Activation checks against the UCX tools the build was configured with
# (issue "Build and load"; issue 15 for UCX 1.22).
#
# Usage: check_activation.sh BUILD_DIR [preload|plugin]
#   preload  UCX 1.13.1 and 1.21: the module is activated with LD_PRELOAD;
#            the tools are ucx_info/ucx_perftest from PATH (Debian's) for
#            1.13.1, the build's UCX's for 1.21
#   plugin   UCX 1.22: UCX loads the module by itself; the tools are the
#            build's (BUILD_DIR/Makefile: UCX_INFO, UCX_PERFTEST), the module
#            is found through UCX_PLUGIN_PATH=BUILD_DIR/src/uct/cuda_ipc_ns/plugin
#            (never LD_PRELOAD), and after make install with no environment
#   default: plugin when the build is configured against UCX 1.22, else preload
#
# Checks, both flavours:
#  - module + emulator driver: ucx_info -d shows the cuda_ipc_ns memory
#    domain with its transport, also when the driver lacks an optional entry
#    (test/cudasim's libcudasim_partial.so);
#  - a missing driver: ucx_info -d exits 0 and lists no cuda_ipc_ns;
#  - with the driver the caller names in UCX_CUDA_IPC_NS_DRIVER, when it is
#    not the emulator (a GPU's): ucx_info -d shows it too;
#  - ucx_info -c -f documents UCX_CUDA_IPC_NS_DRIVER (the value in effect:
#    libcuda.so.1, or the caller's);
#  - the module file name;
#  - the loopback copy transport: ucx_info -d lists cu_cpy_ns, and
#    ucx_perftest accepts -m cuda with the module only (UCP and UCT tests).
# plugin only:
#  - the links UCX scans for (plugin/lib{uct,ucx_perftest}_cudaipcns.so.0);
#  - ucx_info -c -f lists exactly the variables docs/configuration.md names;
#  - make install into UCX's own module dir (a scratch copy of that directory,
#    bind-mounted over it in a private mount namespace: needs root): ucx_info
#    with no environment at all loads the module (-c -f lists its variables),
#    lists both transports once UCX_CUDA_IPC_NS_DRIVER names the emulator
#    (that variable picks the driver; it plays no part in activation), lists
#    none without a driver, and ucx_perftest -m cuda runs.
set -u
build=${1:?build dir}
build=$(cd "$build" && pwd)
module=$build/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so
cudasim=$build/test/cudasim/.libs/libcudasim.so
partial=$build/test/cudasim/.libs/libcudasim_partial.so
top=$(cd "$(dirname "$0")/../.." && pwd)

mkvar() { sed -n "s/^$1 = //p" "$build/Makefile"; }
ucx_version=$(mkvar UCX_VERSION)
flavour=${2:-}
if [ -z "$flavour" ]; then
    case $ucx_version in 1.13.* | 1.21.*) flavour=preload ;; *) flavour=plugin ;; esac
fi
case $flavour in
preload)
    # the module preloaded: UCX 1.13.1 (Debian's tools from PATH) and 1.21
    # (the build's: it loads no external plugin)
    ucx_info=ucx_info ucx_perftest=ucx_perftest
    case $ucx_version in
    1.13.*) ;;
    *) ucx_info=$(mkvar UCX_INFO) ucx_perftest=$(mkvar UCX_PERFTEST) ;;
    esac
    act=("LD_PRELOAD=$module")
    ;;
plugin)
    ucx_info=$(mkvar UCX_INFO) ucx_perftest=$(mkvar UCX_PERFTEST)
    plugin_dir=$build/src/uct/cuda_ipc_ns/plugin
    unset LD_PRELOAD UCX_PLUGIN_PATH
    act=("UCX_PLUGIN_PATH=$plugin_dir")
    echo "UCX $ucx_version: $ucx_info, module through UCX_PLUGIN_PATH=$plugin_dir"
    ;;
*) echo "flavour '$flavour': preload or plugin" >&2; exit 2 ;;
esac
. "$(dirname "$0")/checks.sh"

md_block() {
    awk -v md="${1:-cuda_ipc_ns}" '/^# Memory domain:/ {p = ($4 == md)} p'
}

# ucx_info -d with driver $1 (and the VAR=value words after it) shows the
# cuda_ipc_ns memory domain with its transport on device cuda
lists_device() {
    local out block
    out=$(env "${@:2}" "${act[@]}" UCX_CUDA_IPC_NS_DRIVER="$1" \
          "$ucx_info" -d) || return 1
    block=$(md_block <<<"$out")
    grep -q '^#      Transport: cu_ipc_ns$' <<<"$block" &&
    grep -q '^#         Device: cuda$' <<<"$block"
}

without_driver() {
    local out
    out=$(env "${act[@]}" UCX_CUDA_IPC_NS_DRIVER=/nonexistent/libcuda.so.1 \
          "$ucx_info" -d) || return 1
    ! grep -q -e cuda_ipc_ns -e cu_ipc_ns -e cuda_cpy_ns -e cu_cpy_ns <<<"$out"
}

config_documented() {
    local out
    out=$(env "${act[@]}" "$ucx_info" -c -f) || return 1
    # here-strings, not pipes: grep -q closing a pipe early would make
    # pipefail report the writer's SIGPIPE
    # the value in effect: the default, or the caller's (a GPU machine may
    # name its driver by path)
    grep -q -x -F "UCX_CUDA_IPC_NS_DRIVER=${UCX_CUDA_IPC_NS_DRIVER:-libcuda.so.1}" <<<"$out" &&
    grep -q 'CUDA driver library to load at run time' \
        <<<"$(grep -B12 '^UCX_CUDA_IPC_NS_DRIVER=' <<<"$out")"
}

copy_transport_listed() {
    local out block
    out=$(env "${act[@]}" UCX_CUDA_IPC_NS_DRIVER="$cudasim" "$ucx_info" -d) || return 1
    block=$(md_block cuda_cpy_ns <<<"$out")
    grep -q '^#      Transport: cu_cpy_ns$' <<<"$block" &&
    grep -q '^#         Device: cuda_cpy$' <<<"$block"
}

copy_config_documented() {
    local out
    out=$(env "${act[@]}" "$ucx_info" -c -f) || return 1
    grep -q '^UCX_CUDA_CPY_NS_MEM_ALLOC=vmm$' <<<"$out"
}

# ucx_perftest in loopback (-l) with CUDA buffers; extra arguments follow
perftest_cuda() {
    timeout 120 "$ucx_perftest" -l -m cuda -n 20 -w 2 "$@" 2>&1
}

perftest_cuda_refused_without_module() {
    local out
    out=$(perftest_cuda -t tag_bw -s 8) && return 1
    # 1.13.1: "unsupported memory type"; 1.22: "Unsupported memory types"
    grep -qi 'unsupported memory type' <<<"$out"
}

perftest_cuda_ucp() {
    local out size
    for size in 8 1048576; do  # eager and rendezvous
        out=$(export "${act[@]}" UCX_CUDA_IPC_NS_DRIVER="$cudasim" \
              UCX_TLS=self,cu_cpy_ns && perftest_cuda -t tag_bw -s $size) ||
            { echo "$out"; return 1; }
        ! grep -qi -e 'unsupported' -e 'error' <<<"$out" || return 1
    done
}

perftest_cuda_uct() {
    local out
    out=$(export "${act[@]}" UCX_CUDA_IPC_NS_DRIVER="$cudasim" &&
          perftest_cuda -t put_bw -x cu_cpy_ns -d cuda_cpy -D zcopy -s 65536) ||
        { echo "$out"; return 1; }
    ! grep -qi -e 'unsupported' -e 'error' -e 'warn' <<<"$out"
}

check "module file is libuct_cuda_ipc_ns.so" test -f "$module"
check "ucx_info -d lists cuda_ipc_ns with the emulator" lists_device "$cudasim"
# the driver the caller uses (contrib/gpu-proof.sh: the real one), when other
if [ -n "${UCX_CUDA_IPC_NS_DRIVER:-}" ] &&
   [ "$(readlink -f "$UCX_CUDA_IPC_NS_DRIVER" 2>/dev/null)" != "$(readlink -f "$cudasim")" ]; then
    check "ucx_info -d lists cuda_ipc_ns with the driver in use ($UCX_CUDA_IPC_NS_DRIVER)" \
        lists_device "$UCX_CUDA_IPC_NS_DRIVER"
fi
check "ucx_info -d lists cuda_ipc_ns with a driver lacking optional cuMemsetD8Async" \
    lists_device "$partial" CUDASIM_PARTIAL_HIDE=cuMemsetD8Async
check "ucx_info -d without a driver exits 0, no cuda_ipc_ns" without_driver
check "ucx_info -c -f documents UCX_CUDA_IPC_NS_DRIVER" config_documented
check "ucx_info -d lists cuda_cpy_ns with transport cu_cpy_ns" copy_transport_listed
check "ucx_info -c -f documents UCX_CUDA_CPY_NS_MEM_ALLOC" copy_config_documented
check "ucx_perftest -m cuda is refused without the module" \
      perftest_cuda_refused_without_module
check "ucx_perftest -l -m cuda tag_bw (UCP) with the module" perftest_cuda_ucp
check "ucx_perftest -l -m cuda put_bw (UCT, cu_cpy_ns)" perftest_cuda_uct

if [ "$flavour" = plugin ]; then
    plugin_links_made() {
        local link
        for link in libuct_cudaipcns libucx_perftest_cudaipcns; do
            [ "$(readlink -f "$plugin_dir/$link.so.0")" = "$(readlink -f "$module")" ] ||
                { echo "$plugin_dir/$link.so.0 does not lead to $module"; return 1; }
        done
    }
    # every UCX_CUDA_{IPC,CPY}_NS_* variable docs/configuration.md names is
    # printed by ucx_info -c -f (the transports' variables)
    all_variables_documented() {
        local out doc have missing
        out=$(env "${act[@]}" "$ucx_info" -c -f) || return 1
        doc=$(grep -oE 'UCX_CUDA_(IPC|CPY)_NS_[A-Z_]*[A-Z]' "$top/docs/configuration.md" | sort -u)
        have=$(sed -n 's/^\(UCX_CUDA_\(IPC\|CPY\)_NS_[A-Z_]*\)=.*/\1/p' <<<"$out" | sort -u)
        missing=$(comm -23 <(echo "$doc") <(echo "$have"))
        [ -n "$doc" ] && [ -z "$missing" ] ||
            { echo "    documented but not printed:" $missing; return 1; }
    }
    check "plugin/ links libuct_cudaipcns.so.0 and libucx_perftest_cudaipcns.so.0 to the module" \
        plugin_links_made
    check "ucx_info -c -f lists every UCX_CUDA_{IPC,CPY}_NS_* variable docs/configuration.md names" \
        all_variables_documented

    # make install into UCX's module dir (configure's default with
    # --with-ucx: UCX's <libdir>/ucx, the directory 1.22 scans beside the
    # libucs it loaded): a scratch copy of that directory is bind-mounted
    # over it in a private mount namespace for each command, so that the
    # install and the runs see the module there while the real directory
    # (and every other process) stays untouched
    copy="" install_log=$build/logs/activation-install.log
    moduledir=$(mkvar moduledir)
    cleanup_copy() { [ -z "$copy" ] || rm -rf "$copy"; }
    trap cleanup_copy EXIT
    in_installed() {
        unshare --mount --propagation private \
            bash -c 'mount --bind "$0" "$1" && shift && exec "$@"' \
            "$copy" "$moduledir" "$@"
    }
    installed() {
        local link
        [ -d "$moduledir" ] || { echo "    no module dir $moduledir"; return 1; }
        copy=$(mktemp -d /tmp/ucx-moduledir.XXXXXX) &&
        cp -a "$moduledir/." "$copy/" &&
        in_installed make -C "$build" install >"$install_log" 2>&1 ||
            { echo "    make install failed: $install_log"; return 1; }
        [ -f "$copy/libuct_cuda_ipc_ns.so" ] || return 1
        for link in libuct_cudaipcns libucx_perftest_cudaipcns; do
            [ "$(readlink "$copy/$link.so.0")" = libuct_cuda_ipc_ns.so ] || return 1
        done
    }
    installed_config_no_env() {
        local out
        out=$(in_installed env -i "$ucx_info" -c -f) || return 1
        grep -q '^UCX_CUDA_IPC_NS_DRIVER=libcuda.so.1$' <<<"$out" &&
        grep -q '^UCX_CUDA_CPY_NS_MEM_ALLOC=vmm$' <<<"$out"
    }
    installed_lists_both() {
        local out
        out=$(in_installed env -i UCX_CUDA_IPC_NS_DRIVER="$cudasim" \
              "$ucx_info" -d) || return 1
        grep -q '^#      Transport: cu_ipc_ns$' <<<"$(md_block cuda_ipc_ns <<<"$out")" &&
        grep -q '^#      Transport: cu_cpy_ns$' <<<"$(md_block cuda_cpy_ns <<<"$out")"
    }
    installed_without_driver() {
        local out
        out=$(in_installed env -i UCX_CUDA_IPC_NS_DRIVER=/nonexistent/libcuda.so.1 \
              "$ucx_info" -d) || return 1
        grep -q '^#      Transport: tcp$' <<<"$out" &&
        ! grep -q -e cu_ipc_ns -e cu_cpy_ns <<<"$out"
    }
    installed_perftest_cuda() {
        local out
        out=$(in_installed env -i UCX_CUDA_IPC_NS_DRIVER="$cudasim" UCX_TLS=self,cu_cpy_ns \
              timeout 120 "$ucx_perftest" -l -m cuda -n 20 -w 2 \
              -t tag_bw -s 1048576 2>&1) || { echo "$out"; return 1; }
        ! grep -qi -e 'unsupported' -e 'error' <<<"$out"
    }
    if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP: make install into UCX's module dir (needs root: a private mount namespace)"
    elif check "make install puts the module and its links into UCX's module dir $moduledir (a scratch copy)" installed; then
        check "installed: ucx_info -c -f with no environment lists the module's variables" \
            installed_config_no_env
        check "installed: ucx_info -d lists cu_ipc_ns and cu_cpy_ns (environment: the driver only)" \
            installed_lists_both
        check "installed: ucx_info -d without a driver exits 0, lists tcp, no cu_*" \
            installed_without_driver
        check "installed: ucx_perftest -l -m cuda tag_bw (environment: the driver, UCX_TLS)" \
            installed_perftest_cuda
    fi
fi

checks_summary
