#!/usr/bin/env bash
# The hot paths' instruction counts against the values recorded in
# test/bench/icount.expected (contrib/icount.sh --check). ICOUNT_BUILD_DIR:
# the build (default build/ of the tree, or ../build beside it as the
# mutation check lays its copies out; not BUILD_DIR, which the test command
# exports for its own build and a mutated copy must not take).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${ICOUNT_BUILD_DIR:-$top/build}
[ -d "$build" ] || build=$top/../build
exec "$top/contrib/icount.sh" --check "$top/test/bench/icount.expected" "$build"
