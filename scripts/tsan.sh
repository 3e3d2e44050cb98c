#!/bin/sh
# tsan.sh [BUILD_DIR] - the library's threaded paths under ThreadSanitizer (clang): the
# converter's worker pool (test_convert_threads, with MIXPREC_ISA forced to each table the CPU
# has), two threads making random calls of every public function (test_stress), concurrent
# default-policy and policy-map lookups (test_policy, test_policy_map), tree casts
# (test_tensor), and the training demo's matrix threads (train_mlp --threads 2, when the
# Fashion-MNIST package is installed). Fails on any report (halt_on_error).
#
# test_convert_threads forks on purpose (the pool after fork): TSan does not support threads
# started after a multi-threaded fork and would stop there, so die_after_fork=0 lets the child
# run (it only converts and exits).
set -e
cd "$(dirname "$0")/.."
dir=${1:-build-tsan}
command -v clang >/dev/null 2>&1 || { echo "tsan.sh: clang not found" >&2; exit 1; }
CC=clang cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMIXPREC_BUILD_BENCH=OFF \
  -DCMAKE_C_FLAGS="-fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" >/dev/null
jobs=$(nproc 2>/dev/null || echo 2)
cmake --build "$dir" -j "$jobs" --target test_convert_threads test_stress test_policy test_policy_map \
  test_tensor train_mlp
export TSAN_OPTIONS="halt_on_error=1 die_after_fork=0 second_deadlock_stack=1"
isas="scalar"
grep -q ' avx2' /proc/cpuinfo 2>/dev/null && isas="$isas avx2"
grep -q ' avx512bw' /proc/cpuinfo 2>/dev/null && isas="$isas avx512"
for isa in $isas; do
  echo "tsan.sh: test_convert_threads, MIXPREC_ISA=$isa"
  MIXPREC_ISA=$isa "$dir/tests/test_convert_threads" >/dev/null
done
for t in test_stress test_policy test_policy_map test_tensor; do
  echo "tsan.sh: $t"
  "$dir/tests/$t" >/dev/null
done
data=/usr/share/datasets/fashion-mnist
if [ -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "tsan.sh: train_mlp --threads 2 --epochs 1 --limit 2000"
  "$dir/examples/train_mlp/train_mlp" --threads 2 --epochs 1 --limit 2000 >/dev/null
else
  echo "tsan.sh: train_mlp skipped ($data not installed)"
fi
echo "tsan.sh: no data race reported"
