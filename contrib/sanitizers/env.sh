# shellcheck shell=bash disable=SC2034
# Sourced (not run) by contrib/run-sanitizers.sh and
# test/other_uid/check_other_uid.sh: the environment a sanitizer build of the
# suite runs in, the same for both.
#
#   san_stage_supp        copies the suppression files of this directory into
#                         a new directory under /tmp that every uid can read
#                         and sets san_supp_dir to it; the caller removes it
#                         (rm -rf "$san_supp_dir")
#   san_env asan|tsan     sets the array san_env to the VAR=value words for
#                         env(1), the suppressions taken from $san_supp_dir;
#                         ASAN_EXTRA_OPTIONS is appended to ASAN_OPTIONS
#                         (on a GPU: protect_shadow_gap=0, where CUDA maps
#                         memory into ASan's shadow gap)
#
# Why staged: the other-uid tests' peer drops to uid 65534, which may not
# enter the clone (one under /root is 0700), and it inherits these variables;
# TSan reads its suppressions file when the process starts and fails the
# peer when it cannot (LSan and UBSan read theirs later, at the first report
# or the leak check). The binaries are staged the same way
# (test/gtest/common/peer.h).

san_stage_supp() {
    local src
    src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    san_supp_dir=$(mktemp -d /tmp/cuda_ipc_ns_san.XXXXXX)
    chmod 0755 "$san_supp_dir"
    install -m 0644 "$src"/*.supp "$san_supp_dir"/
}

san_env() {
    case $1 in
    asan)
        # UCX's memory events stay on: UCP's memtype cache needs them
        # (cpy_ucp_test), and they work under ASan
        san_env=(
            ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=66${ASAN_EXTRA_OPTIONS:+:$ASAN_EXTRA_OPTIONS}"
            LSAN_OPTIONS="suppressions=$san_supp_dir/lsan.supp:print_suppressions=0"
            UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$san_supp_dir/ubsan.supp"
        ) ;;
    tsan)
        san_env=(
            TSAN_OPTIONS="halt_on_error=1:exitcode=66:die_after_fork=0:suppressions=$san_supp_dir/tsan.supp"
            UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no
        ) ;;
    *)
        echo "san_env: unknown kind '$1' (asan, tsan)" >&2
        return 2 ;;
    esac
}
