#!/usr/bin/env bash
# A GPU machine that can reach no package registry cannot run
# contrib/build.sh. This packs what contrib/gpu-proof.sh needs there into
# one archive, built here:
#   - each BUILD_DIR given, less its objects and logs, debug info stripped;
#   - the UCX each of them was configured against when it is not Debian's
#     (UCX_LIBDIR/.. of its Makefile), stripped the same way;
#   - each directory of BUNDLE_DIRS (a NIXL install), stripped the same way;
#   - Debian's UCX 1.13.1 runtime (libucx0, ucx-utils);
#   - the libraries outside glibc that all of these load from the system;
#   - ip and ss (iproute2, for the pod runs) with their libraries, used
#     there only when the machine has none;
#   - a record of what was packed (/opt/cuda_ipc_ns-tools/bundle-info: the
#     date, the commit, each build's UCX and the CUDA_VERSION of the headers
#     it was compiled with, which the proof reports).
# Every file keeps its absolute path, so that the libtool wrappers, rpaths
# and Makefile paths of the builds hold there. contrib/gpu-unpack.sh puts
# them in place. docs/gpu-results.md, "Running the proof".
#
# usage: [BUNDLE_DIRS="DIR..."] contrib/gpu-bundle.sh ARCHIVE BUILD_DIR...
set -euo pipefail
prog=gpu-bundle
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"
[ $# -ge 2 ] || { sed -n '2,20p' "$0"; exit 2; }
archive=$1
shift
stage=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bundle.XXXXXX")
trap 'rm -rf "$stage"' EXIT
tools=/opt/cuda_ipc_ns-tools   # where ip and ss wait, used only when missing

# copy_tree DIR: DIR into the stage at its own path, less build leftovers
copy_tree() {
    tar -C / --exclude='*.o' --exclude='*.lo' --exclude='.deps' --exclude='*.a' \
        --exclude='*.log' --exclude='*.trs' --exclude='bench-out' --exclude='gpu-proof' \
        --exclude='perftest*' --exclude='logs' -cf - "${1#/}" | tar -C "$stage" -xf -
}
# copy_files FILE...: each file (and the target of a link) at its own path
copy_files() {
    local f
    for f in "$@"; do
        tar -C / -chf - "${f#/}" | tar -C "$stage" -xf -
    done
}
# the libraries outside glibc that the programs given need, less the GPU
# driver's own (libcuda, libnvidia-*: the machine's, matching its kernel)
needed_libs() {
    # merged /usr: name them under /usr/lib, never through the /lib link
    ldd "$@" 2>/dev/null | awk '$3 ~ /^\// {print $3}' | sed 's#^/lib/#/usr/lib/#' |
        grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64|libcuda)\.so|/libnvidia-' |
        sort -u
}
# the ELF files (programs and libraries) in the stage so far
stage_elfs() {
    find "$stage" -type f \( -name '*.so*' -o -perm -u+x \) -print0 | xargs -0 file |
        awk -F: '/ELF/ {print $1}'
}

mkdir -p "$stage$tools/bin" "$stage$tools/lib"
info=$stage$tools/bundle-info
echo "made $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git --no-optional-locks -C "$top" describe --always --dirty 2>/dev/null || echo unknown)" >"$info"
for build in "$@"; do
    build=$(cd "$build" && pwd)
    [ -f "$build/Makefile" ] || { say "$build: not a configured build"; exit 1; }
    say "build $build"
    copy_tree "$build"
    inc=$(sed -n 's/^CUDA_CPPFLAGS = -I\([^ ]*\).*/\1/p' "$build/Makefile")
    echo "build $build: UCX $(sed -n 's/^UCX_VERSION = //p' "$build/Makefile"), CUDA headers $inc" \
         "(CUDA_VERSION $(awk '$1 == "#define" && $2 == "CUDA_VERSION" {print $3; exit}' "$inc/cuda.h"))" >>"$info"
    libdir=$(sed -n 's/^UCX_LIBDIR = //p' "$build/Makefile")
    case $libdir in
    /usr/lib*) ;;
    ?*) say "its UCX $(dirname "$libdir")"
        copy_tree "$(dirname "$libdir")" ;;
    esac
done

for dir in ${BUNDLE_DIRS:-}; do
    say "$dir"
    copy_tree "$(cd "$dir" && pwd)"
done

say "Debian's UCX runtime (libucx0, ucx-utils)"
# shellcheck disable=SC2046
copy_files $(dpkg -L libucx0 ucx-utils | grep -E '^/usr/(bin/|lib/x86_64-linux-gnu/(ucx/)?lib.*\.so)')

say "the system libraries that these load"
# shellcheck disable=SC2046
copy_files $(needed_libs $(stage_elfs) | grep -v -E "^$stage|/libuc[mpst]\.")

say "ip and ss, in $tools"
cp "$(command -v ip)" "$(command -v ss)" "$stage$tools/bin/"
# shellcheck disable=SC2046
cp -L $(needed_libs "$(command -v ip)" "$(command -v ss)") "$stage$tools/lib/"

say "strip debug info"
stage_elfs | xargs -r strip --strip-debug 2>/dev/null || true
echo "$top" >"$stage/.gpu-bundle-top"

say "archive $archive"
mkdir -p "$(dirname "$archive")"
tar -C "$stage" -czf "$archive" .
say "$(du -h "$archive" | cut -f1) for $*"
