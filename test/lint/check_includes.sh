#!/bin/sh
# The module's files are layers (docs/architecture.md): no unit (x.c and
# x.h) may include, directly or through other units, a unit that includes it
# back. tsort finds such a loop. Usage: check_includes.sh [MODULE_DIR]
set -eu
dir=${1:-$(dirname "$0")/../../src/uct/cuda_ipc_ns}
cd "$dir"

edges=$(for f in *.c *.h; do
    unit=${f%.*}
    sed -n 's/^#[[:space:]]*include[[:space:]]*"\(cuda_\(ipc\|cpy\)_ns_[a-z0-9_]*\)\.h".*/\1/p' "$f" |
        while read -r dep; do
            [ "$dep" = "$unit" ] || echo "$unit $dep"
        done
done)

if ! printf '%s\n' "$edges" | tsort >/dev/null 2>&1; then
    echo "check_includes: the includes of $dir form a loop:" >&2
    printf '%s\n' "$edges" | tsort 2>&1 >/dev/null | sed 's/^/  /' >&2
    exit 1
fi
echo "check_includes: $(printf '%s\n' "$edges" | wc -l) include edges, no loop"
