#!/bin/sh
# Print the version (major.minor.patch) of the UCX source tree in $1, read
# from its configure.ac.
sed -n 's/^define(\[ucx_ver_\(major\|minor\|patch\)\], *\([0-9]*\)).*/\2/p' \
    "$1/configure.ac" | paste -sd. -
