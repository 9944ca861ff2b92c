#!/usr/bin/env bash
# Build and install NIXL 1.4.0 (its core library and UCX backend plugin)
# against the project's UCX 1.22.0 build, cached outside the source tree, for
# the NIXL test between pods (test/nixl, docs/testing.md "NIXL").
# The sources are git archives kept in the project's shared directory
# (../shared/nixl/ from the project root, override NIXL_SHARED=DIR; its
# README says what each is and why Debian's does not do):
#   nixl-1.4.0.tar.gz               NIXL itself
#   abseil-cpp-20250814.1.tar.gz    NIXL needs absl_log; bookworm's is older
#   taskflow-3.10.0.tar.gz          header-only, a meson subproject of NIXL
#   tomlplusplus-3.4.0.tar.gz       header-only; bookworm's lacks toml.hpp
#
# In $CUDA_IPC_NS_CACHE (default ~/.cache/cuda_ipc_ns, as setup-ucx.sh):
#   nixl-1.4.0-src/        the unpacked sources (abseil, NIXL with taskflow
#                          in its subprojects/, toml++) and the build trees,
#                          removed once installed
#   nixl-1.4.0-install/    abseil and NIXL installed: lib/libnixl.so,
#                          lib/plugins/libplugin_UCX.so (NIXL_PLUGIN_DIR),
#                          include/nixl.h, lib/pkgconfig/ (with the .pc
#                          files made for toml++ and Debian's asio)
#   logs/nixl-1.4.0-*.log  the output of each step
# The UCX is the one contrib/setup-ucx.sh builds (or UCX_PREFIX=DIR, an
# installed UCX 1.22). NIXL is built without CUDA (CUDA_HOME pointed at a
# directory that does not exist): its UCX backend makes no CUDA call and
# accepts a VRAM_SEG registration when ucp_mem_query says CUDA memory.
# Debian's libabsl-dev (20220623, no absl_log) makes NIXL's configure stop
# ("Your Abseil version is too old") when pkg-config finds it first: our
# abseil's .pc files come first on PKG_CONFIG_PATH and configure is checked
# to have taken them, so an installed libabsl-dev is left alone.
# Idempotent: a stamp file keyed by the four tarballs' checksums, the UCX
# prefix and that UCX's own stamp marks a finished install; a re-run takes a
# second. A cold build is about 9 minutes of CPU, most of it abseil: about 5
# minutes on an idle 2-core machine, 27 measured on one loaded by other
# builds (load average 8-18).
#
# Output: progress lines on stderr; on stdout, one line: the install prefix.
# Exits 77 with a line saying why, printing nothing on stdout, when a tarball
# or the UCX 1.22 tarball is absent.
set -euo pipefail
prog=setup-nixl
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/steps.sh"

ver=1.4.0
absl_ver=20250814.1
taskflow_ver=3.10.0
toml_ver=3.4.0
cache=${CUDA_IPC_NS_CACHE:-${HOME:-/root}/.cache/cuda_ipc_ns}
shared=${NIXL_SHARED:-$top/../shared/nixl}
srcdir=$cache/nixl-$ver-src
prefix=$cache/nixl-$ver-install
logs=$cache/logs
stamp=$prefix/.cuda_ipc_ns-installed
tarballs=("$shared/nixl-$ver.tar.gz" "$shared/abseil-cpp-$absl_ver.tar.gz"
          "$shared/taskflow-$taskflow_ver.tar.gz" "$shared/tomlplusplus-$toml_ver.tar.gz")

for t in "${tarballs[@]}"; do
    if [ ! -f "$t" ]; then
        say "skipped: no $(basename "$t") in $shared (NIXL_SHARED=DIR: where the NIXL tarballs are)"
        exit 77
    fi
done

# the UCX NIXL links: the project's 1.22 build, unless one is given
if [ -n "${UCX_PREFIX:-}" ]; then
    ucx_prefix=$UCX_PREFIX
else
    rc=0
    ucx_prefix=$("$top/contrib/setup-ucx.sh" | tail -n 1) || rc=$?
    if [ $rc = 77 ]; then
        say "skipped: no UCX 1.22 to build NIXL against (contrib/setup-ucx.sh skipped)"
        exit 77
    fi
    [ $rc = 0 ] && [ -n "$ucx_prefix" ] || { say "contrib/setup-ucx.sh failed"; exit 1; }
fi
[ -f "$ucx_prefix/include/ucp/api/ucp.h" ] ||
    { say "no UCX headers under $ucx_prefix (UCX_PREFIX=DIR: an installed UCX 1.22)"; exit 1; }

# the stamp holds what was built: other sources or another UCX rebuild
sums=$(for t in "${tarballs[@]}"; do cksum <"$t" | cut -d' ' -f1; done | tr '\n' ' ')
want="$ver $sums$ucx_prefix $(cat "$ucx_prefix/.cuda_ipc_ns-installed" 2>/dev/null | cksum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    say "NIXL $ver ready in $prefix (UCX $ucx_prefix)"
    echo "$prefix"
    exit 0
fi

# what the builds need (NIXL's Python bindings always build: pybind11)
pkgs="meson ninja-build cmake pkg-config g++ libasio-dev pybind11-dev python3-dev
      liburing-dev"
missing=()
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    apt_install() {
        $sudo_cmd apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq \
                -o DPkg::Lock::Timeout=300 "${missing[@]}"
    }
    step "$logs/nixl-$ver-apt.log" \
        "installing ${#missing[@]} Debian packages: ${missing[*]}" apt_install
fi
if dpkg-query -W -f='${Status}' libabsl-dev 2>/dev/null | grep -q "ok installed"; then
    say "Debian's libabsl-dev is installed: left alone, our abseil comes first on PKG_CONFIG_PATH"
fi

rm -rf "$srcdir" "$prefix"
mkdir -p "$srcdir" "$prefix/lib/pkgconfig" "$prefix/include"
unpack() {
    for t in "$@"; do
        tar -xzf "$t" -C "$srcdir" || return 1
    done
}
step "$logs/nixl-$ver-unpack.log" "unpacking the NIXL, abseil, taskflow and toml++ tarballs" \
    unpack "${tarballs[@]}"

# abseil: shared libraries and .pc files, C++20 as NIXL (ABI of absl types)
absl_src=$srcdir/abseil-cpp-$absl_ver
step "$logs/nixl-$ver-abseil-configure.log" "cmake (abseil $absl_ver)" \
    cmake -S "$absl_src" -B "$absl_src/build" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=20 \
        -DABSL_PROPAGATE_CXX_STD=ON -DBUILD_SHARED_LIBS=ON \
        -DBUILD_TESTING=OFF -DABSL_BUILD_TESTING=OFF \
        -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
        -DCMAKE_INSTALL_RPATH="$prefix/lib"
step "$logs/nixl-$ver-abseil-build.log" "ninja -j$(nproc) (abseil $absl_ver, about 3 minutes)" \
    ninja -C "$absl_src/build" -j"$(nproc)" install

# toml++ header-only, and Debian's standalone asio, which ships no .pc
cp -r "$srcdir/tomlplusplus-$toml_ver/include/toml++" "$prefix/include/"
cat >"$prefix/lib/pkgconfig/tomlplusplus.pc" <<PC
Name: tomlplusplus
Description: toml++ $toml_ver, header-only (made by contrib/setup-nixl.sh)
Version: $toml_ver
Cflags: -I$prefix/include
PC
asio_ver=$(dpkg-query -W -f='${Version}' libasio-dev | sed 's/^[0-9]*://; s/-.*//')
cat >"$prefix/lib/pkgconfig/asio.pc" <<PC
Name: asio
Description: Debian's standalone asio $asio_ver (made by contrib/setup-nixl.sh)
Version: $asio_ver
Cflags: -DASIO_STANDALONE
PC

# NIXL: its taskflow subproject from our tarball (no download), the UCX
# backend only, no tests or examples, no CUDA
nixl_src=$srcdir/nixl-$ver
rm -rf "$nixl_src/subprojects/taskflow-$taskflow_ver"
mv "$srcdir/taskflow-$taskflow_ver" "$nixl_src/subprojects/"
cp "$nixl_src/subprojects/packagefiles/taskflow/meson.build" \
    "$nixl_src/subprojects/taskflow-$taskflow_ver/"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export CUDA_HOME=$srcdir/no-cuda
step "$logs/nixl-$ver-configure.log" "meson setup (NIXL $ver, UCX backend, UCX $ucx_prefix)" \
    meson setup "$nixl_src/build" "$nixl_src" --wrap-mode=nodownload \
        --prefix="$prefix" --libdir=lib --buildtype=release \
        -Denable_plugins=UCX -Ducx_path="$ucx_prefix" \
        -Dbuild_tests=false -Dbuild_examples=false \
        -Dcpp_link_args="-Wl,-rpath,$prefix/lib -Wl,-rpath,$ucx_prefix/lib"
# the abseil meson took must be ours, and no CUDA
absl_pc_ver=$(pkg-config --modversion absl_log)
grep -q "dependency absl_log found: YES $absl_pc_ver" "$logs/nixl-$ver-configure.log" ||
    fail_log "$logs/nixl-$ver-configure.log" "NIXL configure took another abseil than $absl_pc_ver"
grep -q "CUDA not found" "$logs/nixl-$ver-configure.log" ||
    fail_log "$logs/nixl-$ver-configure.log" "NIXL configure found a CUDA"
step "$logs/nixl-$ver-build.log" "ninja -j$(nproc) (NIXL $ver, about 3 minutes)" \
    ninja -C "$nixl_src/build" -j"$(nproc)"
step "$logs/nixl-$ver-install.log" "ninja install (NIXL $ver)" \
    ninja -C "$nixl_src/build" install
for f in "$prefix"/include/nixl.h "$prefix"/lib/libnixl.so \
         "$prefix"/lib/plugins/libplugin_UCX.so; do
    [ -e "$f" ] || { say "missing after the install: $f"; exit 1; }
done
# the sources and build trees are not needed once installed
rm -rf "$srcdir"
echo "$want" >"$stamp"
say "NIXL $ver ready in $prefix (UCX $ucx_prefix; logs: $logs)"
echo "$prefix"
