#!/bin/sh
# demo.sh BUILD_DIR - the main job: mixed-precision training of Axon's MixedPrecision MLP on
# Fashion-MNIST with several precision setups (same seed; float16 / bfloat16 compute, float8
# training with delayed scaling), one comparison table, then quantized inference (int8, int4,
# float8, MXFP8) of the trained float32 checkpoint with a second table, `mixprec report` of the
# checkpoint, and, when gnuplot is installed, a PNG of the curves. Outputs go to BUILD_DIR/demo/.
#   EPOCHS (default 3), SEED (default 7), THREADS (default: up to 2 cores) override the runs.
# With Open MPI installed (train_mlp_mpi built), one more run: the f16_dynamic setup
# data-parallel on 2 ranks (mpirun -np 2, one thread each, 2 shards of 64 rows per batch).
set -e
build=${1:-build}
exe="$build/examples/train_mlp/train_mlp"
out="$build/demo"
epochs=${EPOCHS:-3}
seed=${SEED:-7}
cores=$(nproc 2>/dev/null || echo 1)
threads=${THREADS:-$([ "$cores" -ge 2 ] && echo 2 || echo 1)}

[ -x "$build/examples/quickstart" ] && "$build/examples/quickstart" && echo
if [ ! -x "$exe" ]; then
  echo "demo: $exe not built (run: make demo)" >&2
  exit 1
fi
mkdir -p "$out"

# name | policy | loss scale. dynamic = 2^15 growing x2 after 2000 finite steps (Keras/jmp
# defaults): over 3 epochs (1407 steps) it never needs to move. The last run grows it every 200
# steps, so the table also shows the scale adapting: it grows until float16 overflows, the step
# is skipped and the scale halves. The float8 runs train every dense layer's three matrix
# products in float8 (e4m3fn inputs and kernels, e5m2 gradients) with delayed scaling and amax
# histories of 16 and 1024 steps (Transformer Engine's recipe; Keras' float8_from_* policies).
runs="float32|float32|none
f16_dynamic|p=f32,c=f16,o=f32|dynamic
f16_noscale|p=f32,c=f16,o=f32|none
mixed_bf16|mixed_bfloat16|none
f16_dyn_p200|p=f32,c=f16,o=f32|dynamic:32768:200
fp8_h16|p=f32,c=bf16,o=bf16,q=float8,h=16|none
fp8_h1024|float8_from_mixed_bfloat16|none"

echo "train_mlp: $epochs epochs, seed $seed, $threads thread(s) per run; logs and CSVs in $out/"
echo "$runs" | while IFS='|' read -r name policy scale; do
  printf '  %-12s --policy %-34s --loss-scale %-17s ... ' "$name" "$policy" "$scale"
  if ! "$exe" --policy "$policy" --loss-scale "$scale" --epochs "$epochs" --seed "$seed" \
       --threads "$threads" --csv "$out/$name.csv" --save "$out/$name.safetensors" \
       >"$out/$name.log" 2>&1; then
    echo "FAILED"; cat "$out/$name.log" >&2; exit 1
  fi
  tail -n 1 "$out/$name.csv" | awk -F, '{printf "test accuracy %.4f (%.1fs)\n", $3, $7}'
done

# Data-parallel: the f16_dynamic run on 2 MPI ranks. --shards 2: each rank computes one half
# of every batch of 128 (its own batch norm statistics, as DDP without SyncBatchNorm); the two
# gradients are added in a fixed order, so the result is the same for any number of ranks.
mpi_exe="$build/examples/train_mlp/train_mlp_mpi"
mpi_row=""
if [ -x "$mpi_exe" ] && command -v mpirun >/dev/null 2>&1; then
  root=""
  [ "$(id -u)" = 0 ] && root=--allow-run-as-root
  printf '  %-12s mpirun -np 2 --policy %-18s --loss-scale %-7s --shards 2 ... ' mpi2_f16_dyn p=f32,c=f16,o=f32 dynamic
  # A waiting rank yields its core instead of spinning: on a shared 2-core machine the
  # spinning rank would steal time from the one it waits for.
  if ! mpirun $root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 2 "$mpi_exe" --policy p=f32,c=f16,o=f32 --loss-scale dynamic \
       --shards 2 --threads 1 --epochs "$epochs" --seed "$seed" --csv "$out/mpi2_f16_dyn.csv" \
       >"$out/mpi2_f16_dyn.log" 2>&1; then
    echo "FAILED"; cat "$out/mpi2_f16_dyn.log" >&2; exit 1
  fi
  tail -n 1 "$out/mpi2_f16_dyn.csv" | awk -F, '{printf "test accuracy %.4f (%.1fs)\n", $3, $7}'
  mpi_row="mpi2_f16_dyn|p=f32,c=f16,o=f32|dynamic"
else
  echo "  mpi2_f16_dyn skipped: Open MPI not installed (apt-get install openmpi-bin libopenmpi-dev, then make demo)"
fi

# One table: the last CSV row of each run, the activation bytes from its log.
echo
ref=$(tail -n 1 "$out/float32.csv" | cut -d, -f3)
printf '%-12s %-47s %-17s %8s %8s %11s %7s %10s %7s %11s\n' run policy scaling test_acc \
  "vs_f32" "final_scale" skipped underflow "time_s" "act_bytes"
printf '%s\n%s\n' "$runs" "$mpi_row" | while IFS='|' read -r name policy scale; do
  [ -n "$name" ] || continue
  canon=$(sed -n 's/^train_mlp: policy \([^ ]*\),.*/\1/p' "$out/$name.log")
  bytes=$(sed -n 's/.*activation_bytes=\([0-9]*\).*/\1/p' "$out/$name.log")
  total=$(awk -F, 'NR > 1 { s += $7 } END { printf "%.1f", s }' "$out/$name.csv")
  tail -n 1 "$out/$name.csv" | awk -F, -v n="$name" -v p="$canon" -v l="$scale" -v r="$ref" \
    -v b="$bytes" -v t="$total" \
    '{ printf "%-12s %-47s %-17s %8.4f %+8.4f %11g %7d %10.3g %7s %11d\n", n, p, l, $3, $3 - r, $4, $5, $6, t, b }'
done
echo "(test_acc after the last epoch; underflow = share of gradient values non-zero in float32"
echo " but zero in the compute dtype, last epoch, sampled; act_bytes = activations kept for the"
echo " backward pass per batch of 128; mpi2_f16_dyn: 2 ranks x 1 thread, per 64-row shard)"

# Quantized inference of the float32 model (its checkpoint from the run above), one thread so
# the times compare kernels, not thread pools. name | --eval-policy | --eval-map | --eval-fp8 |
# checkpoint (empty: the float32 one). keep_last_float32.map keeps dense_2 (the classifier) in
# float32. With the mixprec tool built, the same schemes also come from `mixprec quantize`
# (per-output-channel scales in the file, run as stored) and a bfloat16 cast from `mixprec cast`.
mixprec="$build/tools/mixprec"
map="$(dirname "$0")/../examples/train_mlp/keep_last_float32.map"
ckpt="$out/float32.safetensors"
evals="float32||||
int8|int8_from_float32|||
int8_keep_last|int8_from_float32|$map||
int4|int4_from_float32|||
int4_keep_last|int4_from_float32|$map||
float8|float8_from_bfloat16||current|
mxfp8|float8_from_bfloat16||mxfp8|"
if [ -x "$mixprec" ]; then
  for scheme in int8 int4 fp8 mxfp8; do
    "$mixprec" quantize "$ckpt" "$out/float32.$scheme.safetensors" --scheme "$scheme" --force \
      --quiet >"$out/quantize_$scheme.log" 2>&1 \
      && evals="$evals
cli_$scheme||||$out/float32.$scheme.safetensors"
  done
  "$mixprec" cast "$ckpt" "$out/float32.bf16.safetensors" --policy bfloat16 --force --quiet \
    >"$out/cast_bf16.log" 2>&1 && evals="$evals
cli_cast_bf16||||$out/float32.bf16.safetensors"
fi
echo
echo "inference of the float32 model (1 thread; ms = median CPU time of the forward pass over the"
echo "78 full batches of 128):"
printf '%-15s %-22s %-9s %8s %8s %12s %9s %9s %8s\n' eval eval_policy fp8 test_acc vs_f32 \
  weight_bytes ms_batch ms_f32 speedup
echo "$evals" | while IFS='|' read -r name policy emap recipe file; do
  set -- --eval "${file:-$ckpt}" --threads 1
  [ -n "$policy" ] && set -- "$@" --eval-policy "$policy"
  [ -n "$emap" ] && set -- "$@" --eval-map "$emap"
  [ -n "$recipe" ] && set -- "$@" --eval-fp8 "$recipe"
  if ! "$exe" "$@" >"$out/eval_$name.log" 2>&1; then
    echo "$name: FAILED"; cat "$out/eval_$name.log" >&2; exit 1
  fi
  line=$(grep '^eval: test_accuracy=' "$out/eval_$name.log")
  acc=$(echo "$line" | sed 's/^eval: test_accuracy=\([0-9.]*\).*/\1/')
  wb=$(echo "$line" | sed 's/.*weight_bytes=\([0-9]*\).*/\1/')
  ms=$(echo "$line" | sed 's/.* batch_cpu_ms=\([0-9.]*\).*/\1/')
  [ "$name" = float32 ] && echo "$acc $ms" >"$out/eval_ref"
  read -r ref_acc ref_ms <"$out/eval_ref"
  # the float32 time measured in the same run, on the same batches (alternating), when there is one
  case $line in *float32_batch_cpu_ms=*) ref_ms=$(echo "$line" | sed 's/.*float32_batch_cpu_ms=\([0-9.]*\).*/\1/') ;; esac
  awk -v n="$name" -v p="${policy:--}" -v r="${recipe:--}" -v a="$acc" \
      -v ra="$ref_acc" -v w="$wb" -v m="$ms" -v rm="$ref_ms" \
    'BEGIN { printf "%-15s %-22s %-9s %8.4f %+8.4f %12d %9.3f %9.3f %7.2fx\n", n, p, r, a, a - ra, w, m, rm, rm / m }'
done
echo "(weight_bytes: every parameter as held for inference: quantized kernels with their scales,"
echo " biases and batch-norm parameters and statistics in float32; *_keep_last: dense_2 stays"
echo " float32 (--eval-map keep_last_float32.map); ms_f32: a float32 model timed in the same run"
echo " on the same batches, alternating with the quantized one (the float32 row's own time for"
echo " the cli_* rows); cli_*: checkpoints written by \`mixprec quantize\` / \`mixprec cast\`, run"
echo " as stored)"

# What float16 and float8 would do to each tensor of the float32 checkpoint.
if [ -x "$mixprec" ]; then
  for target in "--dtype float16" "--scheme fp8"; do
    echo
    echo "mixprec report float32.safetensors $target:"
    # shellcheck disable=SC2086
    "$mixprec" report "$ckpt" $target | tee "$out/report_$(echo "$target" | sed 's/.* //').txt"
  done
else
  echo; echo "(the mixprec tool is not built: no \`mixprec report\`)"
fi

# Curves: test accuracy and training loss per epoch.
if command -v gnuplot >/dev/null 2>&1; then
  if gnuplot -e "set terminal pngcairo" >/dev/null 2>&1; then term="pngcairo size 1500,450 noenhanced"
  else term="png size 1500,450"; fi
  if gnuplot >"$out/gnuplot.log" 2>&1 <<GP
set terminal $term
set output '$out/curves.png'
set datafile separator ','
set key autotitle columnhead
set termoption noenhanced
set multiplot layout 1,3 title 'train_mlp on Fashion-MNIST, seed $seed'
runs = 'float32 f16_dynamic f16_noscale mixed_bf16 f16_dyn_p200 fp8_h16 fp8_h1024'
file(i) = '$out/'.word(runs, i).'.csv'
set xlabel 'epoch'; set xtics 1; set grid
set ylabel 'test accuracy'; set key bottom right
plot for [i=1:7] file(i) using 1:3 with linespoints lc i title word(runs, i)
set ylabel 'training loss'; set key top right
plot for [i=1:7] file(i) using 1:2 with linespoints lc i title word(runs, i)
set ylabel 'gradient underflow fraction (float16 runs)'; set logscale y; set format y '%g'; set key top left
plot for [i in '2 3 5'] file(int(i)) using 1:6 with linespoints lc int(i) title word(runs, int(i))
unset multiplot
GP
  then echo "curves: $out/curves.png"
  else echo "gnuplot failed (see $out/gnuplot.log); no plot"; fi
else
  echo "gnuplot not installed: no plot (apt-get install gnuplot-nox)"
fi
