#!/usr/bin/env bash
# The ABI guard end to end (docs/ucx-versions.md, "The ABI guard"): the
# module of one build loaded by the UCX of another, which differs in version
# or in configuration, writes one line naming both, registers nothing, and
# UCX runs on without it.
#
# Usage: check_abi_guard.sh MODULE_BUILD LOADER_BUILD
#   MODULE_BUILD  the build whose module is loaded
#   LOADER_BUILD  the build whose UCX loads it: UCX 1.13.x -> Debian's
#                 ucx_info/ucx_perftest with the module preloaded; 1.21.x ->
#                 that build's, the module preloaded; else that
#                 build's UCX_INFO/UCX_PERFTEST with the module reached
#                 through UCX_PLUGIN_PATH (a scratch directory holding the
#                 plugin links to it)
# Checks:
#  - ucx_info -d exits 0, lists tcp and no cu_* transport, and stderr holds
#    exactly one line "cuda_ipc_ns: built for UCX <module's> ..., loaded by
#    UCX <loader's> ... not registered";
#  - ucx_info -c -f lists no UCX_CUDA_IPC_NS_* variable (nothing registered);
#  - ucx_perftest -l tag_bw (host memory) runs;
#  - control: the loader's own module, loaded the same way, writes no such
#    line and lists cu_ipc_ns.
set -u
mod_build=$(cd "${1:?module build dir}" && pwd)
ldr_build=$(cd "${2:?loader build dir}" && pwd)

mkvar() { sed -n "s/^$2 = //p" "$1/Makefile"; }
module_of() { echo "$1/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so"; }
mod_version=$(mkvar "$mod_build" UCX_VERSION)
ldr_version=$(mkvar "$ldr_build" UCX_VERSION)
cudasim=$ldr_build/test/cudasim/.libs/libcudasim.so
plugdir=""
trap '[ -z "$plugdir" ] || rm -rf "$plugdir"' EXIT
unset LD_PRELOAD UCX_PLUGIN_PATH

# act MODULE: the environment words that make the loader's UCX load MODULE
case $ldr_version in
1.13.*)
    ucx_info=ucx_info ucx_perftest=ucx_perftest
    act() { echo "LD_PRELOAD=$1"; }
    ;;
1.21.*)
    # loads no external plugin (its NEWS): its own tools, the module preloaded
    ucx_info=$(mkvar "$ldr_build" UCX_INFO)
    ucx_perftest=$(mkvar "$ldr_build" UCX_PERFTEST)
    act() { echo "LD_PRELOAD=$1"; }
    ;;
*)
    ucx_info=$(mkvar "$ldr_build" UCX_INFO)
    ucx_perftest=$(mkvar "$ldr_build" UCX_PERFTEST)
    sfx=$(mkvar "$ldr_build" UCS_MODULE_SUFFIX)
    plugdir=$(mktemp -d /tmp/cuda_ipc_ns_abi.XXXXXX)
    act() {
        local d
        d=$plugdir/$(cksum <<<"$1" | cut -d' ' -f1)   # one per module
        mkdir -p "$d" &&
        ln -sf "$1" "$d/libuct_cudaipcns$sfx" &&
        ln -sf "$1" "$d/libucx_perftest_cudaipcns$sfx" &&
        echo "UCX_PLUGIN_PATH=$d"
    }
    ;;
esac
echo "module of $mod_build (UCX $mod_version) loaded by UCX $ldr_version ($ucx_info)"

. "$(dirname "$0")/checks.sh"

refusal='cuda_ipc_ns: built for UCX .*, loaded by UCX .* not registered$'
foreign=$(act "$(module_of "$mod_build")")
own=$(act "$(module_of "$ldr_build")")

refused_in_ucx_info() {
    local out err lines
    err=$(mktemp)
    out=$(env "$foreign" UCX_CUDA_IPC_NS_DRIVER="$cudasim" "$ucx_info" -d 2>"$err") ||
        { echo "    ucx_info -d failed:"; cat "$err"; rm -f "$err"; return 1; }
    lines=$(grep -c "$refusal" "$err")
    echo "    stderr: $(head -n 3 "$err")"
    rm -f "$err"
    [ "$lines" = 1 ] || { echo "    $lines refusal lines"; return 1; }
    grep -q '^#      Transport: tcp$' <<<"$out" &&
    ! grep -q -e cu_ipc_ns -e cu_cpy_ns <<<"$out"
}

names_both_versions() {
    local err
    err=$(env "$foreign" "$ucx_info" -d 2>&1 >/dev/null)
    grep -q "built for UCX $mod_version .*loaded by UCX $ldr_version " <<<"$err" ||
        { echo "    '$err' does not name $mod_version and $ldr_version"; return 1; }
}

nothing_registered() {
    local out
    out=$(env "$foreign" "$ucx_info" -c -f 2>/dev/null) || return 1
    grep -q '^UCX_TLS=' <<<"$out" && ! grep -q '^UCX_CUDA_IPC_NS_' <<<"$out"
}

ucx_runs_on() {
    local out
    out=$(env "$foreign" UCX_TLS=self,tcp,sm timeout 120 "$ucx_perftest" -l -t tag_bw \
          -s 65536 -n 20 -w 2 2>&1) || { echo "$out" | tail -5; return 1; }
    grep -q '^Final:' <<<"$out"
}

own_module_admitted() {
    local out err
    err=$(mktemp)
    out=$(env "$own" UCX_CUDA_IPC_NS_DRIVER="$cudasim" "$ucx_info" -d 2>"$err") ||
        { rm -f "$err"; return 1; }
    ! grep -q 'cuda_ipc_ns: built for' "$err" || { cat "$err"; rm -f "$err"; return 1; }
    rm -f "$err"
    grep -q '^#      Transport: cu_ipc_ns$' <<<"$out"
}

check "ucx_info -d: one line refuses the module, tcp listed, no cu_*" refused_in_ucx_info
check "the line names UCX $mod_version (built for) and UCX $ldr_version (loaded by)" \
    names_both_versions
check "ucx_info -c -f: no UCX_CUDA_IPC_NS_* variable registered" nothing_registered
check "ucx_perftest -l tag_bw runs on without the module" ucx_runs_on
check "control: the loader's own module is admitted and lists cu_ipc_ns" own_module_admitted

checks_summary
