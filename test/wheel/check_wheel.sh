#!/usr/bin/env bash
# contrib/install-into-wheel.sh on a directory laid out as NIXL's wheel
# (test/wheel/make_fixture.sh) from an installed UCX.
#
# Usage: check_wheel.sh UCX_PREFIX BUILD_DIR UCX_FOR_BUILD [NIXL_PREFIX NIXL_PODS]
#   UCX_PREFIX     the UCX the fixture bundles (setup-ucx.sh cuda: hashed
#                  names; cuda-nixl: soname suffix -nixl)
#   BUILD_DIR      where install-into-wheel.sh builds the module
#   UCX_FOR_BUILD  its UCX= (1.22-cuda; 1.22 for the CUDA-less bundle)
#   NIXL_PREFIX    NIXL installed by contrib/setup-nixl.sh, and NIXL_PODS the
#   NIXL_PODS      test/nixl/nixl_pods built against it (make check-nixl):
#                  both bundled into the fixture as NIXL's wheel bundles
#                  its libraries (make_fixture.sh); without them the NIXL
#                  checks are skipped with a line saying so
# Checks:
#  - the installer refuses a directory without nixl.libs (exit 2, a line);
#  - it installs into the fixture: one real file nixl.libs/ucx/
#    libuct_cudaipcns[-SUFFIX]<libucs's extension>, whose UCX libraries are
#    the bundled ones (ldd) and whose RPATH is $ORIGIN/..:$ORIGIN;
#  - the bundled UCX (its ucx_info, on the bundled libraries) with no
#    environment at all lists the module's variables (-c -f): loaded, and
#    admitted by the ABI guard;
#  - with only UCX_CUDA_IPC_NS_DRIVER naming the emulator, ucx_info -d lists
#    cu_ipc_ns and cu_cpy_ns;
#  - a second run of the installer leaves one module file;
#  - NIXL in the wheel layout: nixl_pods, patched as NIXL's extension module
#    (only the bundled libraries), run with no UCX variable but the pod
#    list UCX_TLS the test sets itself: WRITE and READ descriptor lists of
#    VMM memory between two pods, bytes verified, every descriptor through
#    the mapping cache of the module the bundled UCX loaded from
#    nixl.libs/ucx/, one file each of libucs, libuct, libucp, libucm and the
#    module mapped, all in nixl.libs (NIXL_PODS_UCX_LIBDIR), and NIXL's UCX
#    backend bound to the bundled libucp (NIXL_UCX_EXPECTED_SONAME);
#  - and those checks can fail: with UCX_TLS=cu_cpy_ns,tcp (bytes over TCP)
#    the run fails on the mapping-cache lookups; with the module taken out
#    of nixl.libs/ucx/ the bundled UCX has no cu_ipc_ns; with a second
#    libucm preloaded (UCX_PREFIX's own, the transfers still pass) it fails
#    on the one-UCX check.
set -u
prefix=$(cd "${1:?UCX prefix}" && pwd)
build=${2:?build dir}
ucx_for_build=${3:?UCX= for contrib/build.sh}
top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/cuda_ipc_ns_wheel_fixture.XXXXXX)
trap 'rm -rf "$work"' EXIT
site=$work/fixture/site-packages
log=$work/install.log

. "$(dirname "$0")/../activation/checks.sh"

nixl=() nixl_pods=""
if [ $# -ge 4 ]; then
    [ -d "$4" ] && [ -x "${5:-}" ] ||
        { echo "check_wheel: want NIXL_PREFIX (a directory) and NIXL_PODS (a built program): '$4' '${5:-}'"; exit 2; }
    nixl=("$(cd "$4" && pwd)" "$5")
    nixl_pods=$site/nixl/$(basename "$5")
fi
"$top/test/wheel/make_fixture.sh" "$prefix" "$work/fixture" "${nixl[@]}" || exit 1
ucx_info=$work/fixture/bin/ucx_info
installer() {
    UCX=$ucx_for_build BUILD_DIR=$build "$top/contrib/install-into-wheel.sh" "$@"
}

refuses_without_nixl_libs() {
    local out rc
    mkdir -p "$work/empty"
    out=$(installer "$work/empty" 2>&1); rc=$?
    [ $rc = 2 ] && grep -q 'nixl.libs' <<<"$out" || { echo "    rc $rc: $out"; return 1; }
}

installed() {
    installer "$site" >"$log" 2>&1 || { tail -20 "$log"; return 1; }
    local files
    files=$(cd "$site/nixl.libs/ucx" && ls libuct_cudaipcns*)
    module=$site/nixl.libs/ucx/$files
    [ "$(wc -l <<<"$files")" = 1 ] && [ -f "$module" ] && [ ! -L "$module" ] ||
        { echo "    module files: $files"; return 1; }
    ucs=$(cd "$site/nixl.libs" && ls libucs-*)
    [ "$files" = "libuct_cudaipcns$(sed -n 's/^libucs\(-nixl\)\{0,1\}-[0-9a-f]\{8\}\..*/\1/p' <<<"$ucs").${ucs#*.}" ] ||
        { echo "    $files does not follow $ucs"; return 1; }
}

bound_to_bundle() {
    local deps
    [ "$(patchelf --print-rpath "$module")" = '$ORIGIN/..:$ORIGIN' ] || return 1
    deps=$(ldd "$module" | grep -E 'libuc[stpm]') || return 1
    echo "$deps" | sed 's/^/    /'
    ! grep -v "=> $site/nixl.libs/ucx/\.\./libuc" <<<"$deps" | grep -q .
}

loaded_without_environment() {
    local out
    out=$(env -i "$ucx_info" -c -f 2>&1) || return 1
    ! grep -q 'cuda_ipc_ns: built for' <<<"$out" &&
    grep -q '^UCX_CUDA_IPC_NS_DRIVER=libcuda.so.1$' <<<"$out"
}

lists_transports() {
    local out
    out=$(env -i UCX_CUDA_IPC_NS_DRIVER="$build/test/cudasim/.libs/libcudasim.so" \
          "$ucx_info" -d 2>&1) || return 1
    grep -q '^#      Transport: cu_ipc_ns$' <<<"$out" &&
    grep -q '^#      Transport: cu_cpy_ns$' <<<"$out"
}

idempotent() {
    installer "$site" >>"$log" 2>&1 || return 1
    [ "$(cd "$site/nixl.libs/ucx" && ls libuct_cudaipcns* | wc -l)" = 1 ] &&
    [ "$(grep -c '^nixl.libs/ucx/libuct_cudaipcns' "$site"/nixl-*.dist-info/RECORD)" = 1 ]
}

check "the installer refuses a directory without nixl.libs" refuses_without_nixl_libs
if check "installed: one file in nixl.libs/ucx, named as the bundled modules" installed; then
    check "its UCX libraries are the bundled ones, RPATH \$ORIGIN/..:\$ORIGIN" bound_to_bundle
    check "the bundled UCX with no environment loads and admits it (ucx_info -c -f)" \
        loaded_without_environment
    check "the bundled UCX lists cu_ipc_ns and cu_cpy_ns (environment: the driver)" \
        lists_transports
    check "installing again leaves one module file and one RECORD line" idempotent
fi

# nixl_pods in the wheel layout, no environment but NIXL's plugin directory
# (the wheel's nixl.libs/nixl/), NIXL's own check that its UCX backend bound
# to the bundled libucp, the directory the test checks its UCX against, and
# $@; output in $work/nixl.log
run_nixl_pods() {
    local libs=$site/nixl.libs ucp
    ucp=$(cd "$libs" && ls libucp-*)
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin NIXL_PLUGIN_DIR="$libs/nixl" \
        NIXL_UCX_EXPECTED_SONAME="$ucp" NIXL_PODS_UCX_LIBDIR="$libs" "$@" \
        "$nixl_pods" >"$work/nixl.log" 2>&1
}

nixl_between_pods() {
    run_nixl_pods || { tail -30 "$work/nixl.log"; return 1; }
    grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$work/nixl.log" | sed 's/^/    /'
    ! grep -q '^\[  SKIPPED \]' "$work/nixl.log"
}

# the run fails, and its log says $1
fails_with() {
    ! run_nixl_pods "${@:2}" && grep -q -- "$1" "$work/nixl.log" ||
        { echo "    rc 0 or no '$1':"; tail -30 "$work/nixl.log"; return 1; }
}

lane_check_fails_over_tcp() {
    fails_with "the transfers did not map the target's memory here" \
        UCX_TLS=cu_cpy_ns,tcp GTEST_FILTER='*write_and_read*'
}

fails_without_the_module() {
    local rc=0
    mv "$module" "$work/module.away" || return 1
    fails_with "'cu_ipc_ns','cu_cpy_ns' are not available" \
        GTEST_FILTER='*write_and_read*' || rc=1
    mv "$work/module.away" "$module" || return 1
    return $rc
}

one_ucx_check_fails_on_a_second_libucm() {
    fails_with "libucm mapped from .* .*" \
        LD_PRELOAD="$(readlink -f "$(ls "$prefix"/lib/libucm.so.0 "$prefix"/lib/libucm-*.so.0 2>/dev/null | head -n 1)")" \
        GTEST_FILTER='*write_and_read*'
}

if [ -z "$nixl_pods" ]; then
    echo "SKIP: NIXL in the wheel layout: no NIXL_PREFIX and built nixl_pods given (contrib/run-tests.sh gives them once its NIXL step passed)"
elif [ -n "${module:-}" ] && [ -f "$module" ]; then
    check "NIXL between pods in the wheel layout: bytes verified, lane cu_ipc_ns, only the bundled UCX mapped" \
        nixl_between_pods
    check "the lane check fails when the bytes go over TCP (UCX_TLS=cu_cpy_ns,tcp)" \
        lane_check_fails_over_tcp
    check "the NIXL run fails without the module in nixl.libs/ucx" fails_without_the_module
    check "the one-UCX check fails with a second libucm in the process (LD_PRELOAD)" \
        one_ucx_check_fails_on_a_second_libucm
fi
checks_summary
