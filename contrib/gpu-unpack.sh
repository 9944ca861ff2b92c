#!/usr/bin/env bash
# Puts an archive of contrib/gpu-bundle.sh in place on a GPU machine that
# cannot build (run as root, from the repository's copy there): each file
# at its own path, never over a file the machine has; the repository's
# copy reachable at the path it had where the archive was made (a link);
# ip and ss from the archive when the machine has none. Then
# contrib/gpu-proof.sh runs (docs/gpu-results.md, "Running the proof").
#
# usage: contrib/gpu-unpack.sh ARCHIVE
set -euo pipefail
prog=gpu-unpack
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"
[ $# -eq 1 ] || { sed -n '2,9p' "$0"; exit 2; }
archive=$(readlink -f "$1")
tools=/opt/cuda_ipc_ns-tools
[ "$(id -u)" = 0 ] || { say "needs root: it writes under / (/usr/lib, /opt)"; exit 1; }

was=$(tar -xzf "$archive" -O ./.gpu-bundle-top)
if [ "$(readlink -f "$was" 2>/dev/null)" != "$top" ]; then
    [ ! -e "$was" ] || { say "$was exists and is not this repository ($top)"; exit 1; }
    say "link $was -> $top"
    mkdir -p "$(dirname "$was")"
    ln -s "$top" "$was"
fi
# a UCX of the machine's own (Ubuntu's libucx0) would be loaded in place of
# Debian's 1.13.1 that build/ was made against: set it aside, whole
lib=/usr/lib/x86_64-linux-gnu
ucs_is_ours() { cmp -s <(tar -xzf "$archive" -O .$lib/libucs.so.0) $lib/libucs.so.0; }
if [ -e $lib/libucs.so.0 ] && ! ucs_is_ours; then
    say "this machine's own UCX ($(readlink -f $lib/libucs.so.0)): set aside in $lib/ucx.machine/"
    mkdir -p $lib/ucx.machine
    mv $lib/libuc[mpst]*.so* $lib/ucx.machine/
    [ ! -d $lib/ucx ] || mv $lib/ucx $lib/ucx.machine/modules
    for f in /usr/bin/ucx_info /usr/bin/ucx_perftest; do
        [ ! -e $f ] || mv $f $lib/ucx.machine/
    done
fi
# the machine's own files win (its libraries); the links to directories
# (a merged /usr's /lib, the link above) stay links
say "unpack $archive into /"
tar -C / --keep-directory-symlink --skip-old-files --exclude=./.gpu-bundle-top -xzf "$archive"
# the record of this archive, over one an earlier archive left (an archive
# older than the record has none)
tar -C / -xzf "$archive" ".$tools/bundle-info" 2>/dev/null || true
ldconfig

for tool in ip ss; do
    command -v "$tool" >/dev/null && continue
    say "$tool: none here, the archive's ($tools)"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/bin/%s "$@"\n' \
        "$tools" "$tools" "$tool" >/usr/local/bin/$tool
    chmod +x /usr/local/bin/$tool
done
ucs_is_ours || { say "$lib/libucs.so.0 is still not the archive's after unpacking"; exit 1; }
v=$(ucx_info -v 2>&1 | sed -n 's/^# Version //p')
say "in place: UCX $v, $(command -v ip), the builds of $(dirname "$was")"
