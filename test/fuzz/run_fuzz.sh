#!/bin/bash
#
# cuda_ipc_ns: build and run the rkey/address parser fuzzer for a bounded time.
#
# usage: run_fuzz.sh [SECONDS]       (default 30)
#        `make fuzz [FUZZ_SECONDS=N]` in the build directory runs it with the
#        directories configure found.
#
# With clang + libFuzzer: builds fuzz_rkey_parse with
# -fsanitize=fuzzer,address,undefined, fuzzes for SECONDS starting from the
# seed corpus, then replays the seeds and everything it found.
# Otherwise: builds fuzz_replay_main.c with gcc + ASan/UBSan, replays the
# seeds and runs seeded random mutations for up to SECONDS.
#
# Environment:
#   UCX_SRC           configured UCX source tree (config.h and headers), as
#                     configure found it (--with-ucx-src)
#   CUDA_INCLUDE      CUDA include directory, as configure found it
#                     (--with-cuda)
#   CC_FUZZ           clang to use (default clang)
#   FUZZ_FORCE_REPLAY 1: skip libFuzzer, use the gcc replay driver
#   FUZZ_BUILD_DIR    build/work directory (default: a fresh temp dir)
#   FUZZ_MUTATIONS, FUZZ_SEED  passed to the replay driver
#
set -euo pipefail

seconds=${1:-30}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
ucx_src=${UCX_SRC:-}
cuda_include=${CUDA_INCLUDE:-}
cc_fuzz=${CC_FUZZ:-clang}
build=${FUZZ_BUILD_DIR:-$(mktemp -d /tmp/cuda_ipc_ns_fuzz.XXXXXX)}
corpus=$here/corpus

if [ -z "$ucx_src" ] || [ -z "$cuda_include" ]; then
    echo "run_fuzz.sh: set UCX_SRC and CUDA_INCLUDE, or run 'make fuzz' in" \
         "the build directory" >&2
    exit 2
elif [ ! -f "$ucx_src/config.h" ]; then
    echo "run_fuzz.sh: no configured UCX tree at $ucx_src" >&2
    exit 2
fi
mkdir -p "$build"

# regenerate the seeds if they are missing (they are normally committed)
if [ ! -d "$corpus" ] || [ -z "$(ls -A "$corpus" 2>/dev/null)" ]; then
    python3 "$here/make_corpus.py" "$corpus"
fi

module=$top/src/uct/cuda_ipc_ns
cppflags=(-I"$ucx_src" -I"$ucx_src/src" -DHAVE_CONFIG_H
          -I"$cuda_include" -I"$module/base" -I"$module/ipc" -I"$module/ipc/broker")
sources=("$module/ipc/cuda_ipc_ns_rkey.c"
         "$module/base/cuda_ipc_ns_addr.c"
         "$module/ipc/broker/cuda_ipc_ns_broker_proto.c"
         "$here/fuzz_rkey_parse.c")
libs=(-lucs)
# ASan: libucs keeps some allocations for the process lifetime
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

libfuzzer_works() {
    local probe=$build/probe
    printf '#include <stdint.h>\n#include <stddef.h>\n%s\n' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
        > "$probe.c"
    "$cc_fuzz" -fsanitize=fuzzer,address,undefined "$probe.c" -o "$probe" \
        >/dev/null 2>&1 && "$probe" -runs=1 >/dev/null 2>&1
}

if [ "${FUZZ_FORCE_REPLAY:-0}" != 1 ] && command -v "$cc_fuzz" >/dev/null &&
   libfuzzer_works; then
    echo "== libFuzzer build ($cc_fuzz) in $build"
    "$cc_fuzz" -std=gnu11 -g -O1 -Wall -Werror \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        "${cppflags[@]}" "${sources[@]}" "${libs[@]}" -o "$build/fuzz_rkey_parse"

    # new inputs go to a work dir; the committed seeds stay as they are
    mkdir -p "$build/work"
    echo "== fuzzing for ${seconds}s"
    "$build/fuzz_rkey_parse" -max_total_time="$seconds" -max_len=512 \
        -print_final_stats=1 "$build/work" "$corpus"

    echo "== replaying seed corpus and found inputs"
    "$build/fuzz_rkey_parse" -runs=0 "$corpus" "$build/work"
    echo "== corpus: $(ls "$corpus" | wc -l) seeds," \
         "$(ls "$build/work" | wc -l) inputs found"
else
    cc=${CC:-gcc}
    echo "== libFuzzer not available; replay build ($cc) in $build"
    "$cc" -std=gnu11 -g -O1 -Wall -Werror \
        -fsanitize=address,undefined -fno-sanitize-recover=all \
        -fno-omit-frame-pointer \
        "${cppflags[@]}" "${sources[@]}" "$here/fuzz_replay_main.c" \
        "${libs[@]}" -o "$build/fuzz_rkey_replay"
    FUZZ_SECONDS=$seconds "$build/fuzz_rkey_replay" "$corpus"
fi
echo "== fuzz run OK"
