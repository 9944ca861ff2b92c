#!/usr/bin/env bash
# Install cuda_ipc_ns into the private UCX that NIXL's Python wheel bundles
# (`pip install nixl`), so that this UCX loads the module with no environment
# variable (README, "With NIXL's Python wheel").
#
# Usage: contrib/install-into-wheel.sh SITE_PACKAGES_OR_PREFIX
#   a site-packages directory holding nixl.libs/, or a prefix (a virtual
#   environment) with lib/python3*/site-packages/nixl.libs
#
# Steps, one progress line each:
#  1. find nixl.libs/ and its bundled UCX: libucs, libuct, libucp, libucm,
#     renamed either by auditwheel (libucs-1a2b3c4d.so.0.0.0) or by UCX's
#     --with-soname-suffix (libucs-nixl[-1a2b3c4d].so...), and UCX's modules
#     in nixl.libs/ucx/;
#  2. read the bundled UCX's version (ucp_get_version() of the bundled
#     libucp, through Python's ctypes); only 1.22 loads plugins by itself;
#  3. build the module against the same release configured as NIXL builds it
#     (contrib/build.sh with UCX=1.22-cuda: contrib/setup-ucx.sh cuda, in
#     build-1.22-cuda/; for a bundle with a soname suffix, NIXL's
#     --private-ucx, UCX=1.22-cuda-nixl: setup-ucx.sh cuda-nixl, in
#     build-1.22-cuda-nixl/). UCX= and BUILD_DIR change it (UCX=1.22 builds
#     against the CUDA-less 1.22, for a bundle built that way). The soname
#     suffix and deepbind change no layout the module uses; the module's ABI
#     guard checks the rest at load;
#  4. copy it into nixl.libs/ucx/ under the name UCX's scan looks for there
#     (libuct_cudaipcns[-SUFFIX] + the extension of the bundled libucs, as
#     the bundled modules are named), patched as NIXL patches UCX's modules
#     (patchelf: DT_NEEDED to the bundled names, RPATH $ORIGIN/..:$ORIGIN),
#     and list it in the wheel's RECORD so that pip uninstall removes it;
#  5. check: the bundled libs resolve every DT_NEEDED of the module (ldd),
#     and a ucx_info run on the bundled libraries (the build's, patched like
#     the module, in a scratch directory) lists UCX_CUDA_IPC_NS_DRIVER, i.e.
#     the bundled UCX loaded the module and its ABI guard admitted it.
# Refuses, naming the cause, a directory without nixl.libs, a bundle without
# exactly one of each library, a UCX other than 1.22, a missing patchelf.
set -euo pipefail
prog=install-into-wheel
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"

where=${1:?usage: $0 SITE_PACKAGES_OR_PREFIX}
[ -d "$where" ] || { say "$where: not a directory"; exit 2; }
where=$(cd "$where" && pwd)

# ---- 1. the bundled UCX ------------------------------------------------------
libs=""
if [ -d "$where/nixl.libs" ]; then
    libs=$where/nixl.libs
else
    found=()
    for d in "$where"/lib/python3*/site-packages/nixl.libs \
             "$where"/lib64/python3*/site-packages/nixl.libs \
             "$where"/local/lib/python3*/dist-packages/nixl.libs; do
        [ -d "$d" ] && found+=("$d")
    done
    [ ${#found[@]} -eq 1 ] ||
        { say "$where: ${#found[@]} nixl.libs directories (want a site-packages with nixl.libs/, or a prefix with one)"; exit 2; }
    libs=${found[0]}
fi
[ -d "$libs/ucx" ] ||
    { say "$libs has no ucx/ directory: this wheel bundles no UCX modules"; exit 2; }

bundled() {   # bundled NAME: the one file nixl.libs/libNAME-*.so* (not libucs_signal)
    local m=() f
    for f in "$libs"/lib"$1"-*.so*; do
        f=$(basename "$f")
        [[ "$f" =~ ^lib$1-[0-9A-Za-z]+(-[0-9a-f]{8})?\.so ]] && m+=("$f")
    done
    [ ${#m[@]} -eq 1 ] ||
        { say "$libs: ${#m[@]} files named lib$1-*.so* (${m[*]:-none}), want one"; return 1; }
    echo "${m[0]}"
}
ucs=$(bundled ucs) && uct=$(bundled uct) && ucp=$(bundled ucp) && ucm=$(bundled ucm) ||
    exit 2
# the soname suffix: libucs-nixl-1a2b3c4d.so... or libucs-nixl.so...; a bare
# auditwheel hash (libucs-1a2b3c4d.so...) is no suffix
sfx=$(sed -n 's/^libucs-\([0-9A-Za-z]*\)\(-[0-9a-f]\{8\}\)\{0,1\}\.so.*/\1/p' <<<"$ucs")
if [[ "$ucs" =~ ^libucs-[0-9a-f]{8}\.so ]]; then
    sfx=""
fi
# UCX's scan wants lib<framework>_<name> + libucs's extension (from its first '.')
ext=.${ucs#*.}
name=libuct_cudaipcns${sfx:+-$sfx}$ext
say "bundled UCX in $libs: $ucs $uct $ucp $ucm (scheme: ${sfx:+soname suffix -$sfx}${sfx:-auditwheel hash}; module name $name)"

# ---- 2. its version ------------------------------------------------------------
version=$(python3 - "$libs/$ucp" <<'PY'
import ctypes, sys
ucp = ctypes.CDLL(sys.argv[1])
v = [ctypes.c_uint() for _ in range(3)]
ucp.ucp_get_version(*[ctypes.byref(x) for x in v])
print("%d.%d.%d" % tuple(x.value for x in v))
PY
) || { say "cannot load $libs/$ucp to read its version"; exit 1; }
case $version in
1.22.*) say "bundled UCX $version loads plugins from $libs/ucx" ;;
*) say "bundled UCX $version: the module installs into UCX 1.22 only (earlier releases load no third-party plugin; docs/ucx-versions.md)"; exit 2 ;;
esac

command -v patchelf >/dev/null ||
    { say "patchelf is needed (Debian: apt-get install patchelf)"; exit 2; }

# ---- 3. the module, built for that release ---------------------------------------
# a suffixed bundle is NIXL's --private-ucx build: the same configuration
ucx_default=1.22-cuda
[ -z "$sfx" ] || ucx_default=1.22-cuda-nixl
ucx=${UCX:-$ucx_default}
build=${BUILD_DIR:-$top/build-$ucx}
UCX=$ucx BUILD_DIR=$build "$top/contrib/build.sh"
module=$build/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so
built_version=$(sed -n 's/^UCX_VERSION = //p' "$build/Makefile")
[ "$built_version" = "$version" ] ||
    { say "built against UCX $built_version, the wheel bundles $version"; exit 1; }

# patch FILE: DT_NEEDED of UCX's libraries to the bundled names, and an RPATH
# that finds them from nixl.libs/ucx/ (as NIXL's wheel_add_ucx_plugins.py
# patches UCX's own modules)
patch_to_bundle() {
    local f=$1 rpath=$2 lib needed
    patchelf --set-rpath "$rpath" "$f" || return 1
    for lib in ucs uct ucp ucm; do
        needed=$(patchelf --print-needed "$f" | grep -E "^lib$lib(-[0-9A-Za-z]+)?\.so" || true)
        [ -z "$needed" ] ||
            patchelf --replace-needed "$needed" "$(bundled $lib)" "$f" || return 1
    done
}

# ---- 4. install -------------------------------------------------------------------
logs=$build/logs
tmp=$(mktemp -d /tmp/cuda_ipc_ns_wheel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
install_module() {
    cp "$module" "$tmp/$name" &&
    patch_to_bundle "$tmp/$name" '$ORIGIN/..:$ORIGIN' &&
    install -m 0755 "$tmp/$name" "$libs/ucx/$name"
}
step "$logs/wheel-install.log" "installing $libs/ucx/$name" install_module
record=$(ls -d "$(dirname "$libs")"/nixl-*.dist-info/RECORD 2>/dev/null | head -n 1 || true)
if [ -n "$record" ] && ! grep -q "^nixl.libs/ucx/$name," "$record"; then
    echo "nixl.libs/ucx/$name,," >>"$record"
fi

# ---- 5. check -----------------------------------------------------------------------
unresolved=$(cd "$libs/ucx" && ldd "./$name" | grep 'not found' || true)
[ -z "$unresolved" ] || { say "the installed module misses libraries: $unresolved"; exit 1; }
ucx_info=$(sed -n 's/^UCX_INFO = //p' "$build/Makefile")
check_loaded() {
    local out
    cp "$ucx_info" "$tmp/ucx_info" &&
    patch_to_bundle "$tmp/ucx_info" "$libs" &&
    out=$(env -i "$tmp/ucx_info" -c -f 2>&1) &&
    ! grep -q 'cuda_ipc_ns: built for' <<<"$out" &&
    grep -q '^UCX_CUDA_IPC_NS_DRIVER=' <<<"$out"
}
step "$logs/wheel-check.log" "checking: ucx_info on the bundled UCX, no environment, loads the module" \
    check_loaded
say "done: the bundled UCX $version loads $libs/ucx/$name by itself"
