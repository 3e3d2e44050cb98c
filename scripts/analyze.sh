#!/bin/sh
# analyze.sh [BUILD_DIR] - the Clang static analyzer (scan-build) over the library, every kernel
# included, the safetensors module and the mixprec tool: fails when it reports anything.
#
# A Debug build with the bench off, every file analysed with its own flags (scan-build runs the
# analyzer beside the compiler). About a minute on two cores. Reports, when there are any, go
# to BUILD_DIR/reports (open them with scan-view). CI runs this (.ci/run, step 8).
#
# The analyzer does not step into variadic functions, so it would take a failure recorded by
# mxp__fail (src/internal.h), fail (tools/safetensors.c) or err (tools/mixprec.c) for success
# and walk on with an output unset: under __clang_analyzer__ those are also seen to return
# their status. The examples and tests are not gated: their reports were read once
# (2026-11-28) and were invariants the analyzer cannot see (a model whose last layer is dense,
# a shard count of at least 1, cmocka's assertions leaving a test early).
set -e
cd "$(dirname "$0")/.."
dir=${1:-build-analyze}
command -v scan-build >/dev/null 2>&1 || { echo "analyze.sh: scan-build not found (Debian: clang-tools)" >&2; exit 1; }
rm -rf "$dir"
scan-build -o "$dir/reports" cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DMIXPREC_BUILD_BENCH=OFF >/dev/null
jobs=$(nproc 2>/dev/null || echo 2)
scan-build -o "$dir/reports" --status-bugs cmake --build "$dir" -j "$jobs" \
  --target mixprec_objects mixprec_safetensors mixprec_cli
