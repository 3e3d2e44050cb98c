#!/bin/sh
# bench_cli.sh [BUILD_DIR] [DIR] [BYTES] [RUNS] - `mixprec cast` of a float32 checkpoint to
# bfloat16 against `cp` of the same input file, in the same run, with a warm page cache.
#
# The input (default 2 GiB of float32, one tensor) is made by BUILD_DIR/tools/mkst in DIR
# (default /dev/shm when it exists, so that both sides run at memory speed: the comparison is
# then the tool's own overhead; give a disk directory to include the disk). The page cache is
# warmed by reading the file once; then RUNS (default 5) alternating runs of
#     cp IN copy                         (2 GiB read, 2 GiB written)
#     cp IN copy && sync copy            (the same, made durable: fsync of the copy)
#     mixprec cast IN OUT --policy bf16  (2 GiB read, 1 GiB written, fsync included)
# Reported: medians, throughput as input bytes per second, and the ratio cast / cp (target
# >= 0.8). Free space is checked first (3 x BYTES + 10%); every big file is removed at the end.
set -eu
build=${1:-build}
dir=${2:-}
bytes=${3:-2147483648}
runs=${4:-5}
if [ -z "$dir" ]; then
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then dir=/dev/shm; else dir=$build; fi
fi
M=$build/tools/mixprec
K=$build/tools/mkst
[ -x "$M" ] && [ -x "$K" ] || { echo "need $M and $K (build with tests on)" >&2; exit 2; }
need_kb=$((bytes / 1024 * 33 / 10))
avail_kb=$(df -Pk "$dir" | awk 'NR==2 {print $4}')
df -h "$dir" | sed 's/^/  /'
if [ "$avail_kb" -lt "$need_kb" ]; then
    echo "not enough space in $dir: $avail_kb KiB free, $need_kb KiB needed" >&2
    exit 2
fi
w=$(mktemp -d "$dir/mixprec_bench.XXXXXX")
trap 'rm -rf "$w"' EXIT INT TERM
in=$w/in.safetensors
"$K" big "$in" "$bytes"
cat "$in" > /dev/null   # warm the page cache
now() { date +%s.%N; }
t_cp=""; t_cps=""; t_cast=""
i=0
while [ $i -lt "$runs" ]; do
    a=$(now); cp "$in" "$w/copy"; b=$(now); rm -f "$w/copy"
    t_cp="$t_cp $(echo "$a $b" | awk '{printf "%.4f", $2 - $1}')"
    a=$(now); cp "$in" "$w/copy"; sync "$w/copy"; b=$(now); rm -f "$w/copy"
    t_cps="$t_cps $(echo "$a $b" | awk '{printf "%.4f", $2 - $1}')"
    a=$(now); "$M" cast "$in" "$w/out.safetensors" --policy bf16 --force --quiet; b=$(now)
    rm -f "$w/out.safetensors"
    t_cast="$t_cast $(echo "$a $b" | awk '{printf "%.4f", $2 - $1}')"
    i=$((i + 1))
done
median() { echo "$@" | tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
m_cp=$(median $t_cp); m_cps=$(median $t_cps); m_cast=$(median $t_cast)
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
echo "mixprec cast float32 -> bfloat16 vs cp, $bytes bytes, $runs runs, dir $dir"
echo "cpu: ${cpu:-unknown}, $(nproc) threads; kernels: $("$M" --version | sed 's/.*, //; s/)//')"
awk -v b="$bytes" -v cp="$m_cp" -v cps="$m_cps" -v ca="$m_cast" -v tcp="$t_cp" -v tcps="$t_cps" -v tca="$t_cast" 'BEGIN {
    printf "  %-28s %9s %12s   runs (s)\n", "", "median s", "GB/s (in)"
    printf "  %-28s %9.3f %12.3f  %s\n", "cp", cp, b / cp / 1e9, tcp
    printf "  %-28s %9.3f %12.3f  %s\n", "cp + sync of the copy", cps, b / cps / 1e9, tcps
    printf "  %-28s %9.3f %12.3f  %s\n", "mixprec cast --policy bf16", ca, b / ca / 1e9, tca
    printf "  ratio cast / cp: %.2fx   cast / (cp + sync): %.2fx   (target >= 0.8x)\n", cp / ca, cps / ca
}'
