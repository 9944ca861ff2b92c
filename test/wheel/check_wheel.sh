#!/usr/bin/env bash
# contrib/install-into-wheel.sh on a directory laid out as NIXL's wheel
# (test/wheel/make_fixture.sh) from an installed UCX.
#
# Usage: check_wheel.sh UCX_PREFIX BUILD_DIR UCX_FOR_BUILD
#   UCX_PREFIX     the UCX the fixture bundles (setup-ucx.sh cuda: hashed
#                  names; cuda-nixl: soname suffix -nixl)
#   BUILD_DIR      where install-into-wheel.sh builds the module
#   UCX_FOR_BUILD  its UCX= (1.22-cuda; 1.22 for the CUDA-less bundle)
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
#  - a second run of the installer leaves one module file.
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

"$top/test/wheel/make_fixture.sh" "$prefix" "$work/fixture" || exit 1
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
checks_summary
