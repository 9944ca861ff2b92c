#!/usr/bin/env bash
# A directory laid out as NIXL 1.4's Python wheel installs its private UCX
# (read from its contrib/build-wheel.sh, wheel_add_ucx_plugins.py and
# check_ucx_wheel_bundle.py), built from an installed CUDA-configured UCX
# (contrib/setup-ucx.sh cuda or cuda-nixl), for testing
# contrib/install-into-wheel.sh, and with NIXL's own libraries bundled the
# same way, for a NIXL run in that layout.
#
# Usage: make_fixture.sh UCX_PREFIX OUT_DIR [NIXL_PREFIX [PROGRAM...]]
#   UCX_PREFIX  an installed UCX; its libraries' names give the scheme:
#               libucs.so.0 (setup-ucx.sh cuda)      -> auditwheel's hashed
#                 names: nixl.libs/libucs-1a2b3c4d.so.0.0.0
#               libucs-nixl.so.0 (setup-ucx.sh cuda-nixl, NIXL's
#                 --private-ucx) -> nixl.libs/libucs-nixl-1a2b3c4d.so.0.0.0
#   OUT_DIR     created (must not exist):
#     site-packages/nixl/__init__.py        the package (empty)
#     site-packages/nixl-1.4.0.dist-info/   METADATA and RECORD
#     site-packages/nixl.libs/lib{ucs,uct,ucp,ucm}<sfx>-<hash>.so.0.0.0
#                      renamed as auditwheel does (8 hex digits of the
#                      file's sha256), soname and DT_NEEDED among them set
#                      to the new names, RPATH $ORIGIN
#     site-packages/nixl.libs/ucx/          UCX's modules, one real file each
#                      (libuct_cuda<sfx>.so.0.0.0: symlinks dropped, as NIXL
#                      dedups them), DT_NEEDED rewritten to the bundled names
#                      and RPATH $ORIGIN/..:$ORIGIN (patchelf, as NIXL does)
#     bin/ucx_info     the prefix's ucx_info on the bundled libraries (not in
#                      the wheel: the tests' window on the bundled UCX)
#   NIXL_PREFIX  an installed NIXL (contrib/setup-nixl.sh; built against
#                another UCX 1.22 of the same API; either scheme) whose
#                libraries join the bundle as auditwheel bundles what
#                NIXL's extension needs:
#     site-packages/nixl.libs/libnixl-<hash>.so, libnixl_build-..., and every
#                      library of NIXL_PREFIX they or the UCX backend need
#                      (abseil's), renamed, soname and DT_NEEDED set to the
#                      bundled names (UCX's included), RPATH $ORIGIN
#     site-packages/nixl.libs/nixl/libplugin_UCX.so   NIXL's UCX backend,
#                      where wheel_add_ucx_plugins.py puts NIXL's plugins,
#                      patched as UCX's modules (NIXL_PLUGIN_DIR names it)
#   PROGRAM      programs linked against NIXL and UCX (test/nixl/nixl_pods):
#     site-packages/nixl/PROGRAM  as auditwheel leaves NIXL's extension
#                      module: DT_NEEDED the bundled names, RPATH
#                      $ORIGIN/../nixl.libs, nothing of either prefix
set -euo pipefail
usage="usage: $0 UCX_PREFIX OUT_DIR [NIXL_PREFIX [PROGRAM...]]"
prefix=$(cd "${1:?$usage}" && pwd)
out=${2:?$usage}
nixl=""
if [ $# -ge 3 ]; then
    nixl=$(cd "$3" && pwd)
    [ -f "$nixl/lib/libnixl.so" ] && [ -f "$nixl/lib/plugins/libplugin_UCX.so" ] ||
        { echo "make_fixture: $nixl: no lib/libnixl.so and lib/plugins/libplugin_UCX.so" >&2; exit 2; }
fi
programs=("${@:4}")
[ ! -e "$out" ] || { echo "make_fixture: $out exists" >&2; exit 2; }
command -v patchelf >/dev/null || { echo "make_fixture: needs patchelf" >&2; exit 2; }

if [ -e "$prefix/lib/libucs.so.0" ]; then
    sfx=""
else
    ucs=$(cd "$prefix/lib" && ls libucs-*.so.0 | head -n 1)
    sfx=${ucs#libucs}
    sfx=${sfx%.so.0}                      # e.g. -nixl
fi
site=$out/site-packages
libs=$site/nixl.libs
mkdir -p "$libs/ucx" "$site/nixl" "$site/nixl-1.4.0.dist-info" "$out/bin"
: >"$site/nixl/__init__.py"
printf 'Metadata-Version: 2.1\nName: nixl\nVersion: 1.4.0\n' \
    >"$site/nixl-1.4.0.dist-info/METADATA"

declare -A new   # libucs.so.0 (the name dependents need) -> bundled name
for l in ucs uct ucp ucm; do
    real=$(readlink -f "$prefix/lib/lib$l$sfx.so.0")
    hash=$(sha256sum "$real" | cut -c1-8)
    new[lib$l$sfx.so.0]=lib$l$sfx-$hash.so.0.0.0
    cp "$real" "$libs/${new[lib$l$sfx.so.0]}"
done
# rewrite FILE's DT_NEEDED to the bundled names, RPATH $2
rename_needed() {
    local f=$1 n
    patchelf --set-rpath "$2" "$f"
    for n in $(patchelf --print-needed "$f"); do
        [ -z "${new[$n]:-}" ] || patchelf --replace-needed "$n" "${new[$n]}" "$f"
    done
}
for n in "${!new[@]}"; do
    patchelf --set-soname "${new[$n]}" "$libs/${new[$n]}"
    rename_needed "$libs/${new[$n]}" '$ORIGIN'
done
# NIXL_PREFIX's libraries and programs need libucp.so.0 (setup-nixl.sh
# builds against the plain 1.22, of the same API): in the suffix scheme
# they get the bundled lib*-nixl names too, as NIXL's own wheel build links
# its private UCX
if [ -n "$nixl" ] && [ -n "$sfx" ]; then
    for l in ucs uct ucp ucm; do
        new[lib$l.so.0]=${new[lib$l$sfx.so.0]}
    done
fi
for f in "$prefix"/lib/ucx/*.so*; do
    [ ! -L "$f" ] || continue
    cp "$f" "$libs/ucx/"
    rename_needed "$libs/ucx/$(basename "$f")" '$ORIGIN/..:$ORIGIN'
done
cp "$prefix/bin/ucx_info" "$out/bin/ucx_info"
rename_needed "$out/bin/ucx_info" '$ORIGIN/../site-packages/nixl.libs'

if [ -n "$nixl" ]; then
    # what auditwheel bundles: each library of the NIXL prefix that NIXL's
    # libraries, its UCX backend or the programs load (ldd: the whole
    # closure), under its DT_NEEDED name; UCX's are the bundled ones already
    declare -A from   # DT_NEEDED name -> the file in NIXL_PREFIX
    bundled_programs=()
    for f in "$nixl"/lib/libnixl.so "$nixl"/lib/libnixl_build.so \
             "$nixl"/lib/plugins/libplugin_UCX.so "${programs[@]}"; do
        while read -r n path; do
            case $path in "$nixl"/lib/*) from[$n]=$(readlink -f "$path") ;; esac
        done < <(ldd "$f" | sed -n 's/^[[:space:]]*\([^ ]*\) => \([^ ]*\) .*/\1 \2/p')
    done
    for n in "${!from[@]}"; do
        hash=$(sha256sum "${from[$n]}" | cut -c1-8)
        new[$n]=${n%%.so*}-$hash.so${n#*.so}   # libfoo.so.1 -> libfoo-1a2b3c4d.so.1
        cp "${from[$n]}" "$libs/${new[$n]}"
    done
    for n in "${!from[@]}"; do
        patchelf --set-soname "${new[$n]}" "$libs/${new[$n]}"
        rename_needed "$libs/${new[$n]}" '$ORIGIN'
    done
    mkdir -p "$libs/nixl"
    cp "$nixl/lib/plugins/libplugin_UCX.so" "$libs/nixl/"
    rename_needed "$libs/nixl/libplugin_UCX.so" '$ORIGIN/..:$ORIGIN'
    for p in "${programs[@]}"; do
        cp "$p" "$site/nixl/"
        rename_needed "$site/nixl/$(basename "$p")" '$ORIGIN/../nixl.libs'
    done
    # every library they load is the bundle's or the system's: one found in
    # a prefix would be a second copy beside the bundled one
    for p in "${programs[@]}"; do
        bundled_programs+=("$site/nixl/$(basename "$p")")
    done
    for f in "$libs"/*.so* "$libs"/nixl/*.so "${bundled_programs[@]}"; do
        if ldd "$f" | grep '=>' | grep -v -E "=> ($site/|/lib/|/usr/lib/|/lib64/)" >&2; then
            echo "make_fixture: $f loads the above from outside the bundle" >&2
            exit 1
        fi
    done
fi
(cd "$site" && find . -type f | sed 's|^\./||; s|$|,,|') \
    >"$site/nixl-1.4.0.dist-info/RECORD"
bundle=("$libs"/*.so*) modules=("$libs"/ucx/*.so*)
echo "make_fixture: $site (${#bundle[@]} libraries, ${#modules[@]} UCX modules; scheme ${sfx:-hashed}${nixl:+; NIXL from $nixl, ${#programs[@]} program(s)})"
