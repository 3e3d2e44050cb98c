#!/bin/sh
# bench.sh BUILD_DIR - runs every benchmark program; each prints its own table.
set -e
build=${1:-build}
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
done
