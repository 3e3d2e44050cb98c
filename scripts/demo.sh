#!/bin/sh
# demo.sh BUILD_DIR - the main job (see README).
set -e
build=${1:-build}
"$build/examples/quickstart"
