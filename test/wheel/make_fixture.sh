#!/usr/bin/env bash
# A directory laid out as NIXL 1.4's Python wheel installs its private UCX
# (read from its contrib/build-wheel.sh, wheel_add_ucx_plugins.py and
# check_ucx_wheel_bundle.py), built from an installed CUDA-configured UCX
# (contrib/setup-ucx.sh cuda or cuda-nixl), for testing
# contrib/install-into-wheel.sh without NIXL.
#
# Usage: make_fixture.sh UCX_PREFIX OUT_DIR
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
set -euo pipefail
prefix=$(cd "${1:?usage: $0 UCX_PREFIX OUT_DIR}" && pwd)
out=${2:?usage: $0 UCX_PREFIX OUT_DIR}
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
for f in "$prefix"/lib/ucx/*.so*; do
    [ ! -L "$f" ] || continue
    cp "$f" "$libs/ucx/"
    rename_needed "$libs/ucx/$(basename "$f")" '$ORIGIN/..:$ORIGIN'
done
cp "$prefix/bin/ucx_info" "$out/bin/ucx_info"
rename_needed "$out/bin/ucx_info" '$ORIGIN/../site-packages/nixl.libs'
(cd "$site" && find . -type f | sed 's|^\./||; s|$|,,|') \
    >"$site/nixl-1.4.0.dist-info/RECORD"
bundle=("$libs"/*.so*) modules=("$libs"/ucx/*.so*)
echo "make_fixture: $site (${#bundle[@]} libraries, ${#modules[@]} UCX modules; scheme ${sfx:-hashed})"
