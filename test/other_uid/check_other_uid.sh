#!/usr/bin/env bash
# The other-uid tests (gtest '*other_uid*': their peer drops to uid 65534) of
# each build given, run with the clone behind a directory that uid 65534
# cannot enter, as a clone under /root (0700) is. Whatever a process of
# another uid reads from the clone (a binary or library the peer staging
# missed, a sanitizer's suppressions file named in its environment, ...)
# then fails them, wherever this clone sits. Every file a sanitizer option
# names must also be readable by that uid, as LSan and UBSan read theirs only
# at a report.
#
# No second clone and no rebuild: the script runs itself in a private mount
# namespace, mounts a tmpfs of mode 0700 over the clone's top directory (and
# over each build dir outside it) and binds every entry of the directory back
# onto it, so every path stays the same for root while none under it opens to
# another uid. It first checks that uid 65534 indeed cannot enter them: a
# check that cannot fail is none. Nothing is left behind: the mounts go with
# the namespace.
#
# usage: test/other_uid/check_other_uid.sh KIND:BUILD_DIR...
#   KIND: plain, asan or tsan (the sanitizer options and staged suppression
#   files of contrib/sanitizers/env.sh, as contrib/run-sanitizers.sh runs them)
# environment: OTHER_UID_FILTER (default '*other_uid*')
# One progress line per build; the tests' output goes to
# BUILD_DIR/logs/other-uid.log, shown when they fail. Needs root (as the suite).
set -euo pipefail
prog=other-uid
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/contrib/steps.sh"
. "$top/contrib/sanitizers/env.sh"
filter=${OTHER_UID_FILTER:-*other_uid*}
other_uid=65534   # the uid of test_fdx's peers

[ $# -gt 0 ] || { sed -n '2,25p' "$0" >&2; exit 2; }
kinds=() dirs=()
for arg in "$@"; do
    kind=${arg%%:*} dir=${arg#*:}
    case $kind in
    plain|asan|tsan) ;;
    *) say "unknown kind '$kind' in '$arg' (plain, asan, tsan)"; exit 2 ;;
    esac
    [ -x "$dir/test/gtest/gtest" ] || { say "no gtest in $dir/test/gtest"; exit 2; }
    kinds+=("$kind") dirs+=("$(cd "$dir" && pwd)")
done

if [ "${CUDA_IPC_NS_CLOSED_TOP:-}" != "$top" ]; then
    export CUDA_IPC_NS_CLOSED_TOP=$top
    exec unshare --mount --propagation private -- "$0" "$@"
fi
unset CUDA_IPC_NS_CLOSED_TOP

# close_dir DIR: DIR becomes a tmpfs of mode 0700 on which each of its
# entries is bound back (a symbolic link is made again); the shell's working
# directory, the covered DIR, is where the entries are taken from
close_dir() {
    local dir=$1 name
    cd "$dir"
    mount -t tmpfs -o mode=0700,size=1m cuda_ipc_ns_closed "$dir"
    for name in * .[!.]* ..?*; do
        [ -e "$name" ] || [ -L "$name" ] || continue
        if [ -L "$name" ]; then
            ln -s "$(readlink "$name")" "$dir/$name"
        elif [ -d "$name" ]; then
            mkdir "$dir/$name"
            mount --no-canonicalize --rbind "$name" "$dir/$name"
        else
            touch "$dir/$name"
            mount --no-canonicalize --bind "$name" "$dir/$name"
        fi
    done
    cd /
}

# as_other_uid CMD...: CMD run as the peers' uid
as_other_uid() {
    setpriv --reuid="$other_uid" --regid="$other_uid" --clear-groups "$@"
}

closed=("$top")
for dir in "${dirs[@]}"; do
    case $dir/ in "$top"/*) ;; *) closed+=("$dir") ;; esac
done
for dir in "${closed[@]}"; do
    close_dir "$dir"
    if as_other_uid test -x "$dir"; then
        say "FAILED: uid $other_uid can still enter $dir; the tests would not see a path into it"
        exit 1
    fi
done
say "uid $other_uid cannot enter ${closed[*]} (a tmpfs of mode 0700 over each, in a mount namespace)"

san_stage_supp
trap 'rm -rf "$san_supp_dir"' EXIT

# options_readable VAR=VALUE...: every absolute path a sanitizer option names
# (suppressions=, ...) can be read by the peers' uid. LSan and UBSan read
# theirs only at a report, which a passing test never makes: without this a
# path into the clone there would go unseen
options_readable() {
    local word opt opts path ok=0
    for word in "$@"; do
        case ${word%%=*} in *SAN_OPTIONS) ;; *) continue ;; esac
        IFS=: read -r -a opts <<<"${word#*=}"
        for opt in "${opts[@]}"; do
            path=${opt#*=}
            case $path in /*) ;; *) continue ;; esac
            if ! as_other_uid test -r "$path"; then
                say "uid $other_uid cannot read $path (${word%%=*}: $opt)"
                ok=1
            fi
        done
    done
    return $ok
}

rc=0
for i in "${!dirs[@]}"; do
    kind=${kinds[$i]} dir=${dirs[$i]}
    log=$dir/logs/other-uid.log
    mkdir -p "$dir/logs"
    case $kind in
    plain) what="plain";      env=() ;;
    asan)  what="ASan+UBSan"; san_env asan; env=("${san_env[@]}") ;;
    tsan)  what="TSan";       san_env tsan; env=("${san_env[@]}") ;;
    esac
    if ! options_readable "${env[@]}"; then
        say "$what: FAILED: a sanitizer option names a file the peers cannot read"
        rc=1
    fi
    run_rc=0
    (cd "$dir/test/gtest" && env "${env[@]}" ./gtest --gtest_filter="$filter") \
        </dev/null >"$log" 2>&1 || run_rc=$?
    summary=$(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$log" |
              tr '\n' ' ' | sed 's/ *$//')
    reports=$(grep -c -E '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|.*runtime error:|[A-Za-z]+Sanitizer: )' \
              "$log" || true)
    say "$what ($dir): ${summary:-no gtest summary}, $reports sanitizer line(s)"
    # a filter that matches nothing passes 0 tests: that is a failure too
    if [ $run_rc != 0 ] || [ "$reports" != 0 ] ||
       ! grep -q -E '^\[  PASSED  \] [1-9][0-9]* test' "$log" ||
       grep -q -E '^\[  FAILED  \]' "$log"; then
        {
            grep -E '^\[  FAILED  \] [^ ]+' "$log" | sort -u | head -10
            grep -E 'Sanitizer|runtime error|Permission denied|cannot|Failure' "$log" |
                head -10
        } | sed 's/^/    /' >&2
        say "$what: FAILED (rc $run_rc; whole log: $log)"
        rc=1
    fi
done
exit $rc
