#!/usr/bin/env bash
# Mutation check: applies each mutation of a list (default
# test/mutation/mutations.list) to a copy of the tree, one at a time,
# rebuilds, runs the gtest suite and requires it to FAIL. Prints a table and
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
#              counts as killed), BUILD_JOBS (default nproc)
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
jobs=${BUILD_JOBS:-$(nproc)}

work=$(mktemp -d /tmp/cuda_ipc_ns_mutation.XXXXXX)
cleanup() {
    if [ "$keep" = 1 ]; then
        echo "mutation: copy kept in $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
mkdir -p "$work/src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "mutation: copying the tree (tracked files as in the work tree) to $work"
    (cd "$top" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$work/src"
else
    # a source tarball, no .git: every file but the build directories (those
    # with a config.status) and autoconf's cache
    echo "mutation: copying the tree (no git: all but build directories) to $work"
    excl=(--exclude=./autom4te.cache --exclude=./.git)
    for d in "$top"/*/; do
        if [ -f "$d/config.status" ]; then
            excl+=(--exclude="./$(basename "$d")")
        fi
    done
    (cd "$top" && tar "${excl[@]}" -cf - .) | tar -xf - -C "$work/src"
fi
cp -a "$work/src" "$work/pristine"

echo "mutation: building the copy"
BUILD_DIR=$work/build "$work/src/contrib/build.sh" >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; exit 1; }
make -C "$work/build/test/gtest" gtest >>"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; exit 1; }

# the suite must pass before anything is mutated
gtest=$work/build/test/gtest/gtest
if [ "$baseline" = 0 ]; then
    echo "mutation: baseline suite not run (--no-baseline)"
elif ! (cd "$work/build/test/gtest" && timeout "$timeout_s" "$gtest" \
        >"$work/baseline.log" 2>&1); then
    grep -E '^\[  FAILED  \]' "$work/baseline.log" | head -20
    echo "mutation: the unmutated suite fails; fix that first" >&2
    exit 1
else
    echo "mutation: baseline suite passes ($(( $(date +%s) - start )) s so far)"
fi

results=()
failed=0
n=0
while IFS= read -r line; do
    case "$line" in ''|'#'*) continue ;; esac
    id=$(awk -F' @@ ' '{print $1}' <<<"$line")
    file=$(awk -F' @@ ' '{print $2}' <<<"$line")
    script=$(awk -F' @@ ' '{print $3}' <<<"$line")
    filter=$(awk -F' @@ ' '{print $4}' <<<"$line")
    if [ -n "$only" ] && [[ "$only" != *",$id,"* ]]; then
        continue
    fi
    n=$((n + 1))
    t0=$(date +%s)
    # relative to src/uct/cuda_ipc_ns, or to the top with a leading /
    case "$file" in
    /*) rel=${file#/} ;;
    *) rel=src/uct/cuda_ipc_ns/$file ;;
    esac
    target=$work/src/$rel
    sed -i "$script" "$target"
    if cmp -s "$target" "$work/pristine/$rel"; then
        result="NOT APPLIED"
    elif ! make -C "$work/build" -j"$jobs" >"$work/$id.build.log" 2>&1 ||
         ! make -C "$work/build/test/gtest" gtest >>"$work/$id.build.log" 2>&1; then
        result="BUILD FAILED"
    else
        args=()
        if [ "$full" = 0 ]; then
            args=(--gtest_filter="$filter")
        fi
        set +e
        (cd "$work/build/test/gtest" &&
         timeout "$timeout_s" "$gtest" "${args[@]}" >"$work/$id.log" 2>&1)
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
            result="killed${red:+: $red}"
            [ -n "$red" ] || result="killed (rc $rc)"
        fi
    fi
    # restore from the pristine copy, whatever happened
    cp "$work/pristine/$rel" "$target"
    case "$result" in killed*) ;; *) failed=$((failed + 1)) ;; esac
    results+=("$(printf '%-22s %-52s %s (%ss)' "$id" "$filter" "$result" \
                 "$(( $(date +%s) - t0 ))")")
    echo "mutation: ${results[-1]}"
done <"$list"

# leave the copy's build as the tree is, for --keep
make -C "$work/build" -j"$jobs" >/dev/null 2>&1 || true

echo
printf '%-22s %-52s %s\n' "mutation" "expected red (filter)" "result"
printf '%s\n' "${results[@]}"
echo
echo "mutation: $n mutations, $failed not killed, mode $([ $full = 1 ] &&
      echo 'whole suite' || echo 'filters'), $(( $(date +%s) - start )) s"
[ "$failed" = 0 ]
