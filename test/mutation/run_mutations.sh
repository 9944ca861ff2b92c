#!/usr/bin/env bash
# Mutation check: applies each mutation of a list (default
# test/mutation/mutations.list) to a copy of the tree, one at a time,
# rebuilds, runs the gtest suite (or, for an entry whose tests are
# script:PATH, that shell check of the copy's scripts) and requires it to
# FAIL. The suite is
# built in the first copy only and run by every copy against its own
# module and emulator (docs/testing.md, "Mutation check"). Prints a table and
# exits non-zero when a mutation survives (the suite passed), does not apply,
# or does not build. The real tree is never modified: everything happens in a
# temporary copy, removed on exit (also on Ctrl-C or failure).
#
# usage: test/mutation/run_mutations.sh [--full] [--keep] [--only ID[,ID...]]
#                                       [--no-baseline] [LIST]
#   --full   run the whole suite for each mutation (the honest check; slow),
#            instead of the filter the list names
#   --keep   keep the temporary copy (its path is printed)
#   --only   run only these mutation ids
#   --no-baseline  skip the run of the unmutated suite in the copy: for a
#            caller that has just passed it on the same tree
#            (contrib/run-tests.sh runs this after make check)
# environment: MUTATION_TIMEOUT (seconds per suite run, default 600: a hang
#              counts as killed), BUILD_JOBS (default nproc),
#              MUTATION_WORKERS (copies that run mutations side by side,
#              default 2: a mutant's tests spend most of their time waiting
#              on peers and deadlines, so two share two cores well),
#              TEST_HANG_GUARD_MS (default 20000 here: the tests' hang
#              guards, 60 s and more, end a mutant's hung wait this soon;
#              test/gtest/common/hang_guard.h)
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
list=$top/test/mutation/mutations.list
full=0
keep=0
only=""
baseline=1
while [ $# -gt 0 ]; do
    case "$1" in
    --full) full=1 ;;
    --keep) keep=1 ;;
    --only) only=",$2,"; shift ;;
    --no-baseline) baseline=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) list=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") ;;
    esac
    shift
done
timeout_s=${MUTATION_TIMEOUT:-600}
# a wait a mutant hangs fails its test sooner; the baseline runs with the
# same bound, so no test needs longer on this machine
export TEST_HANG_GUARD_MS=${TEST_HANG_GUARD_MS:-20000}
jobs=${BUILD_JOBS:-$(nproc)}
workers=${MUTATION_WORKERS:-2}

work=$(mktemp -d /tmp/cuda_ipc_ns_mutation.XXXXXX)
pids=()   # the copies' builds, then their workers
cleanup() {
    if [ ${#pids[@]} -gt 0 ]; then
        kill "${pids[@]}" 2>/dev/null || true
    fi
    if [ "$keep" = 1 ]; then
        echo "mutation: copy kept in $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
# the tree as git tracks it, into directory $1
copy_tree() {
    mkdir -p "$1"
    if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$top" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$1"
    else
        # a source tarball, no .git: every file but the build directories
        # (those with a config.status) and autoconf's cache
        local excl=(--exclude=./autom4te.cache --exclude=./.git) d
        for d in "$top"/*/; do
            if [ -f "$d/config.status" ]; then
                excl+=(--exclude="./$(basename "$d")")
            fi
        done
        (cd "$top" && tar "${excl[@]}" -cf - .) | tar -xf - -C "$1"
    fi
}

# worker $1's copy: $work/$1/{src,pristine,build}. Only copy 0 builds the
# gtest suite: every worker runs that one binary against its own copy's
# module and emulator (run_suite), as mutations change only those libraries;
# a mutation of the suite's own sources runs in copy 0 (see the schedule)
prepare_copy() {
    local w=$work/$1
    copy_tree "$w/src" && cp -a "$w/src" "$w/pristine" &&
        BUILD_DIR=$w/build "$w/src/contrib/build.sh" >"$w/build.log" 2>&1 ||
        return 1
    if [ "$1" = 0 ]; then
        make -C "$w/build/test/gtest" -j"$jobs" gtest >>"$w/build.log" 2>&1
    fi
}

echo "mutation: copying the tree and building $workers copies in $work"
for ((w = 0; w < workers; w++)); do
    prepare_copy "$w" &
    pids+=($!)
done
for ((w = 0; w < workers; w++)); do
    wait "${pids[$w]}" || { tail -30 "$work/$w/build.log"; exit 1; }
done
# the suite as built from the unmutated tree, apart from copy 0's build
suite=$work/gtest
cp "$work/0/build/test/gtest/.libs/gtest" "$suite"
# ... which must load each copy's own module, or its mutants would survive
# (grep reads all of ldd's output: with -q, ldd may die of SIGPIPE, which
# pipefail reports)
for ((w = 0; w < workers; w++)); do
    module=$work/$w/build/src/uct/cuda_ipc_ns/.libs/libuct_cuda_ipc_ns.so
    LD_LIBRARY_PATH=$(dirname "$module")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        ldd "$suite" | grep -F "$module" >/dev/null ||
        { echo "mutation: the suite would not load copy $w's module $module" >&2; exit 1; }
done

# the suite must pass before anything is mutated
if [ "$baseline" = 0 ]; then
    echo "mutation: baseline suite not run (--no-baseline)"
elif ! (cd "$work/0/build/test/gtest" && timeout "$timeout_s" ./gtest \
        >"$work/baseline.log" 2>&1); then
    grep -E '^\[  FAILED  \]' "$work/baseline.log" | head -20
    echo "mutation: the unmutated suite fails; fix that first" >&2
    exit 1
else
    echo "mutation: baseline suite passes ($(( $(date +%s) - start )) s so far)"
fi

# rebuild, in copy $1, what the mutated file $2 is part of: the module and
# the emulator are shared libraries the suite loads, so neither the suite
# nor the benchmarks are relinked for them
rebuild() {
    case "$2" in
    contrib/*)             ;; # scripts: nothing to build
    src/uct/cuda_ipc_ns/*) make -C "$1/build/src/uct/cuda_ipc_ns" -j"$jobs" ;;
    test/cudasim/*)        make -C "$1/build/test/cudasim" -j"$jobs" ;;
    *) make -C "$1/build" -j"$jobs" && make -C "$1/build/test/gtest" gtest ;;
    esac
}

# the suite in copy $1 for a mutation of file $2, with the gtest arguments
# that follow: the suite's own rebuilt binary for a file of the suite, else
# the shared one with this copy's module (LD_LIBRARY_PATH: the binary's
# RUNPATH does not name the build), emulator and partial emulator
run_suite() {
    local w=$1 rel=$2 lib=$1/build/test/cudasim/.libs
    shift 2
    cd "$w/build/test/gtest" || return 1
    case "$rel" in
    test/gtest/*) timeout "$timeout_s" ./gtest "$@" ;;
    *) LD_LIBRARY_PATH=$w/build/src/uct/cuda_ipc_ns/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
       UCX_CUDA_IPC_NS_DRIVER=$lib/libcudasim.so \
       TEST_CUDASIM_PARTIAL=$lib/libcudasim_partial.so \
       timeout "$timeout_s" "$suite" "$@" ;;
    esac
}

# the mutation of list line $2 in copy $1: its result line on stdout
run_one() {
    local w=$1 line=$2 id file script filter rel target result rc red t0
    id=$(awk -F' @@ ' '{print $1}' <<<"$line")
    file=$(awk -F' @@ ' '{print $2}' <<<"$line")
    script=$(awk -F' @@ ' '{print $3}' <<<"$line")
    filter=$(awk -F' @@ ' '{print $4}' <<<"$line")
    t0=$(date +%s)
    # relative to src/uct/cuda_ipc_ns, or to the top with a leading /
    case "$file" in
    /*) rel=${file#/} ;;
    *) rel=src/uct/cuda_ipc_ns/$file ;;
    esac
    target=$w/src/$rel
    sed -i "$script" "$target"
    if cmp -s "$target" "$w/pristine/$rel"; then
        result="NOT APPLIED"
    elif ! rebuild "$w" "$rel" >"$work/$id.build.log" 2>&1; then
        result="BUILD FAILED"
    else
        local args=()
        if [ "$full" = 0 ]; then
            args=(--gtest_filter="$filter")
        fi
        set +e
        case "$filter" in
        script:*) # a shell check of the copy's scripts, --full or not
            (timeout "$timeout_s" "$w/src/${filter#script:}" >"$work/$id.log" 2>&1) ;;
        *) (run_suite "$w" "$rel" "${args[@]}" >"$work/$id.log" 2>&1) ;;
        esac
        rc=$?
        set -e
        if [ $rc = 0 ]; then
            result="SURVIVED"
        elif [ $rc = 124 ]; then
            result="killed (hang)"
        elif [ $rc -gt 128 ]; then
            result="killed (signal $((rc - 128)))"
        else
            red=$(grep -E '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$work/$id.log" |
                  awk '{print $4}' | tr -d , | head -3 | paste -sd, - || true)
            # a shell check's first failed check (checks.sh's FAIL: lines)
            [ -n "$red" ] || red=$(sed -n 's/^FAIL: //p' "$work/$id.log" | head -1)
            result="killed${red:+: $red}"
            [ -n "$red" ] || result="killed (rc $rc)"
        fi
    fi
    # restore from the pristine copy, whatever happened
    cp "$w/pristine/$rel" "$target"
    printf '%-22s %-52s %s (%ss)\n' "$id" "$filter" "$result" \
        "$(( $(date +%s) - t0 ))"
}

# the list's mutations, in order, that --only selects
lines=()
while IFS= read -r line; do
    case "$line" in ''|'#'*) continue ;; esac
    id=$(awk -F' @@ ' '{print $1}' <<<"$line")
    if [ -z "$only" ] || [[ "$only" == *",$id,"* ]]; then
        lines+=("$line")
    fi
done <"$list"
n=${#lines[@]}

# the schedule: a mutation of the suite's own sources goes to copy 0 (the
# only one that builds the suite), the others in turn to every worker;
# each result line goes to the output as it comes and to the worker's
# results file
turns=()
next=0
for ((i = 0; i < n; i++)); do
    case "$(awk -F' @@ ' '{print $2}' <<<"${lines[$i]}")" in
    /test/gtest/*) turns[$i]=0 ;;
    *) turns[$i]=$next; next=$(((next + 1) % workers)) ;;
    esac
done
for ((w = 0; w < workers; w++)); do
    (
        for ((i = 0; i < n; i++)); do
            [ "${turns[$i]}" = "$w" ] || continue
            r=$(run_one "$work/$w" "${lines[$i]}")
            echo "mutation: $r"
            printf '%d\t%s\n' "$i" "$r" >>"$work/results.$w"
        done
        # leave the copy's build as the tree is, for --keep
        make -C "$work/$w/build" -j"$jobs" >/dev/null 2>&1 || true
    ) &
    pids[$w]=$!
done
for ((w = 0; w < workers; w++)); do
    wait "${pids[$w]}" || true
done
pids=()

results=()
if [ "$n" -gt 0 ]; then
    mapfile -t results < <(cat "$work"/results.* 2>/dev/null | sort -n | cut -f2-)
fi
failed=$((n - ${#results[@]}))   # a mutation with no result line failed too
for r in "${results[@]}"; do
    case "$r" in *" killed"*) ;; *) failed=$((failed + 1)) ;; esac
done

echo
printf '%-22s %-52s %s\n' "mutation" "expected red (filter)" "result"
printf '%s\n' "${results[@]}"
echo
echo "mutation: $n mutations, $failed not killed, mode $([ $full = 1 ] &&
      echo 'whole suite' || echo 'filters'), $workers workers, $(( $(date +%s) - start )) s"
[ "$failed" = 0 ]
