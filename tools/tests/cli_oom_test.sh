#!/bin/sh
# cli_oom_test.sh MIXPREC_OOM MKST - the command-line tool when memory runs out. MIXPREC_OOM is
# the tool linked with tools/tests/oom_shim.c, which makes allocation K fail (MXP_OOM_AT=K),
# alone (MXP_OOM_ONLY=1) or with every later one. Each command runs once to count its
# allocations, then once per K in both modes. Every run must either succeed with the same output
# (files and text) as the clean run, or exit 3 with "out of memory" on stderr, without a signal
# or a sanitizer report, and leave the output directory empty (no output file, no shard, no
# temporary file).
set -u
M=$1
K=$2
scratch=mixprec_oom
. "$(dirname "$0")/cli_lib.sh" # ASAN_OPTIONS, the scratch directory $T (now current), ok / bad
runs=0

"$K" write model.safetensors 'fc.weight=F32[16,40]:rand' 'fc.bias=F32[16]:rand' \
    'layer_norm.weight=F32[40]:ones' 'emb=BF16[8,12]:rand' 'step=I64[]:ramp' || exit 1
printf '@default = bf16\n.*norm.* = f32\n' > policy.map
mkdir out

# sweep DESC CMD... (a command that writes files writes them in out/)
sweep() {
    desc=$1; shift
    rm -rf out; mkdir out
    MXP_OOM_REPORT=count.txt "$@" >clean.out 2>clean.err
    rc=$?
    if [ $rc != 0 ]; then bad "$desc: fails with no allocation failing (exit $rc)"; cat clean.err; return; fi
    n=$(cat count.txt)
    rm -rf want; cp -r out want
    k=0; failed=0
    while [ "$k" -lt "$n" ]; do
        for only in 0 1; do
            rm -rf out; mkdir out
            MXP_OOM_AT=$k MXP_OOM_ONLY=$only "$@" >got.out 2>got.err
            rc=$?
            runs=$((runs + 1))
            case $rc in
            0)
                if ! diff -r out want >/dev/null; then
                    bad "$desc: allocation $k failing (only=$only): success with different files"; failed=1
                elif ! cmp -s got.out clean.out; then
                    bad "$desc: allocation $k failing (only=$only): success with different output text"; failed=1
                fi ;;
            3)
                if ! grep -q "out of memory" got.err; then
                    bad "$desc: allocation $k failing (only=$only): exit 3 without 'out of memory'"; cat got.err; failed=1
                fi
                if [ -n "$(ls -A out)" ]; then
                    bad "$desc: allocation $k failing (only=$only): files left: $(ls -A out)"; failed=1
                fi ;;
            *)
                bad "$desc: allocation $k failing (only=$only): exit $rc"; cat got.err; failed=1 ;;
            esac
            [ $failed = 1 ] && return
        done
        k=$((k + 1))
    done
    ok "$desc: $n allocations, each failing alone and with every later one"
}

sweep "inspect" "$M" inspect model.safetensors
sweep "validate --strict" "$M" validate --strict model.safetensors
sweep "cast --policy" "$M" cast model.safetensors out/a.safetensors --policy bf16 --threads 1 --quiet
sweep "cast --map" "$M" cast model.safetensors out/b.safetensors --map policy.map --threads 1 --quiet
sweep "cast to shards" "$M" cast model.safetensors out/c.json --policy f16 --max-shard-size 1KB --threads 1 --quiet
sweep "quantize int4" "$M" quantize model.safetensors out/d.safetensors --scheme int4 --threads 1 --quiet
sweep "quantize fp8" "$M" quantize model.safetensors out/e.safetensors --scheme fp8 --threads 1 --quiet
sweep "report" "$M" report model.safetensors --dtype f16

echo "$runs runs"
if [ $fails -ne 0 ]; then echo "$fails FAILED"; exit 1; fi
echo "all passed"
