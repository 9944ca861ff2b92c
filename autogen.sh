#!/bin/sh
# Generate configure and Makefile.in files.
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf -fi
