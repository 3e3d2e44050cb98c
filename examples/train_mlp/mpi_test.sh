#!/bin/sh
# mpi_test.sh CHECK MPIEXEC TRAIN_MLP TRAIN_MLP_MPI [DATA_DIR] - CTest tests of data-parallel
# train_mlp (label "mpi"; built only when MPI is found). CHECK is one of
#   bitwise  train_mlp --shards 4 (one process, no MPI) is the reference; mpirun -np 1, 2 and 4
#            train_mlp_mpi --shards 4 must write the same trace on every rank: the loss and the
#            loss scale of every step, finite / skipped, the final accuracy and hashes of the
#            weights, Adam state and batch norm statistics. The runs use a loss scale that starts
#            far too high (2^24, period 20) so steps are skipped and the scale moves both ways.
#            Also: --shards 1 is the plain path bit for bit, and --shards 2 differs from 4
#            (the trace notices a different summation order).
#   fault    --inject-inf 5:1 (an inf in rank 1's gradient at step 5) with -np 2 and -np 4: every
#            rank skips step 5 and halves the scale (2^10 -> 2^9); the traces equal the
#            one-process run with the inf injected on rank 0, and the run without a fault does
#            not skip step 5.
#   killed   rank 1 kills itself (SIGKILL) at step 20 of 3 epochs: mpirun must fail (not hang:
#            120 s timeout) naming the signal; the CSV written by rank 0 is complete, no
#            checkpoint (--save, written at the end) and no temporary file is left.
#   fp8      dist_fp8_test (passed as TRAIN_MLP_MPI) on 3 ranks: dist_amax_max against a
#            reference, and 24 steps of float8 delayed scaling whose scales must agree on every
#            rank and equal a scaler that saw every rank's data.
#   fp8train float8 training with delayed scaling (--policy ...,q=float8,h=16) --shards 4: the
#            traces of mpirun -np 2 and 4 equal the one-process run (the amax MAX over ranks).
#   cli      bad options (--shards 0, fewer shards than ranks) exit 2 on every rank with one
#            message; missing data exits 1.
# Every run: --limit 2000 images, --verify-ranks (every rank compares its loss scale, skipped
# count and state hashes with the others after every step). Exit 77 (skipped) without the data.
check=${1:?usage: mpi_test.sh CHECK MPIEXEC TRAIN_MLP TRAIN_MLP_MPI [DATA_DIR]}
mpiexec=${2:?} exe=${3:?} exe_mpi=${4:?}
data=${5:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

if [ "$check" != cli ] && [ "$check" != fp8 ]; then
  for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz \
           t10k-labels-idx1-ubyte.gz; do
    if [ ! -r "$data/$f" ]; then
      echo "mpi_test: $data/$f not found (apt-get install dataset-fashion-mnist); skipping"
      exit 77
    fi
  done
fi

# mpirun: more ranks than cores (--oversubscribe); CI runs as root (--allow-run-as-root).
run_mpi() {
  np=$1
  shift
  root=""
  [ "$(id -u)" = 0 ] && root=--allow-run-as-root
  timeout 120 "$mpiexec" $root --oversubscribe -np "$np" "$exe_mpi" "$@"
}

common="--data $data --limit 2000 --epochs 1 --batch 128 --seed 3 --policy p=f32,c=f16,o=f32"

# same_traces REF PREFIX NP: every PREFIX.rank<R>, R < NP, equals REF.
same_traces() {
  r=0
  while [ "$r" -lt "$3" ]; do
    if [ ! -f "$2.rank$r" ]; then
      fail "$2.rank$r missing"
    elif ! cmp -s "$1" "$2.rank$r"; then
      fail "$2.rank$r differs from $1:"
      diff "$1" "$2.rank$r" | head -n 6
    else
      echo "ok:   $(basename "$2").rank$r = $(basename "$1")"
    fi
    r=$((r + 1))
  done
}

case "$check" in
bitwise)
  ls="--loss-scale dynamic:16777216:20"
  "$exe" $common $ls --shards 4 --trace "$tmp/ref" >"$tmp/ref.log" 2>&1 || fail "train_mlp --shards 4"
  grep -q 'finite 0' "$tmp/ref.rank0" || fail "the reference run skipped no step (the test needs some)"
  for np in 1 2 4; do
    run_mpi "$np" $common $ls --shards 4 --verify-ranks --trace "$tmp/np$np" >"$tmp/np$np.log" 2>&1 \
      || { fail "mpirun -np $np"; cat "$tmp/np$np.log"; }
    same_traces "$tmp/ref.rank0" "$tmp/np$np" "$np"
  done
  "$exe" $common $ls --trace "$tmp/plain" >/dev/null 2>&1 || fail "train_mlp (plain)"
  "$exe" $common $ls --shards 1 --trace "$tmp/one" >/dev/null 2>&1 || fail "train_mlp --shards 1"
  same_traces "$tmp/plain.rank0" "$tmp/one" 1
  run_mpi 2 $common $ls --shards 2 --trace "$tmp/two" >/dev/null 2>&1 || fail "mpirun --shards 2"
  if cmp -s "$tmp/two.rank0" "$tmp/ref.rank0"; then fail "--shards 2 and --shards 4 gave the same trace"
  else echo "ok:   --shards 2 differs from --shards 4"; fi
  ;;
fault)
  ls="--loss-scale dynamic:1024:1000" # 2^10, no growth within the run
  "$exe" $common $ls --shards 4 --trace "$tmp/nofault" >/dev/null 2>&1 || fail "train_mlp (no fault)"
  grep -q '^step 5 .* finite 1 skipped 0$' "$tmp/nofault.rank0" || fail "step 5 is not finite without a fault"
  "$exe" $common $ls --shards 4 --inject-inf 5:0 --trace "$tmp/ref" >/dev/null 2>&1 || fail "train_mlp --inject-inf 5:0"
  for np in 2 4; do
    run_mpi "$np" $common $ls --shards 4 --inject-inf 5:1 --verify-ranks --trace "$tmp/np$np" \
      >"$tmp/np$np.log" 2>&1 || { fail "mpirun -np $np --inject-inf 5:1"; cat "$tmp/np$np.log"; }
    r=0
    while [ "$r" -lt "$np" ]; do
      line=$(sed -n '/^step 5 /p' "$tmp/np$np.rank$r")
      case "$line" in
        *"scale 0x1p+10 -> 0x1p+9 finite 0 skipped 1") echo "ok:   -np $np rank $r skipped step 5, scale 2^10 -> 2^9" ;;
        *) fail "-np $np rank $r at step 5: '$line'" ;;
      esac
      [ "$(grep -c 'finite 0' "$tmp/np$np.rank$r")" = 1 ] || fail "-np $np rank $r skipped other steps too"
      r=$((r + 1))
    done
    same_traces "$tmp/ref.rank0" "$tmp/np$np" "$np"
  done
  ;;
killed)
  mkdir "$tmp/out"
  save=""
  "$exe" --help | grep -q -- '--save' && save="--save $tmp/out/model.safetensors"
  run_mpi 2 $common --epochs 3 --shards 4 --csv "$tmp/out/run.csv" $save --die-at 20:1 \
    >"$tmp/log" 2>"$tmp/err"
  rc=$?
  sed 's/^/    /' "$tmp/err"
  if [ "$rc" = 0 ]; then fail "mpirun succeeded although rank 1 died"
  elif [ "$rc" = 124 ]; then fail "mpirun hung (killed by the 120 s timeout)"
  else echo "ok:   mpirun failed with exit $rc"; fi
  grep -q 'signal 9\|Killed' "$tmp/err" || fail "mpirun's message does not name the killed rank"
  left=$(ls "$tmp/out" | grep -v '^run\.csv$')
  [ -z "$left" ] || fail "files left behind: $left"
  if [ -f "$tmp/out/run.csv" ]; then # written after epoch 1 (16 steps): header + whole rows
    n=$(wc -l <"$tmp/out/run.csv")
    [ "$n" -ge 2 ] || fail "run.csv has $n lines"
    awk -F, 'NR > 1 && NF != 7 { bad = 1 } END { exit bad }' "$tmp/out/run.csv" || fail "run.csv has a partial row"
  fi
  ;;
cli)
  run_mpi 2 --shards 0 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" = 2 ] || fail "--shards 0: exit $rc (want 2)"
  [ "$(grep -c -- '--shards needs an integer' "$tmp/err")" = 1 ] || { fail "--shards 0: want one message"; cat "$tmp/err"; }
  run_mpi 2 --data "$tmp/none" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" = 1 ] || fail "missing data: exit $rc (want 1)"
  grep -q 'cannot\|No such' "$tmp/err" || { fail "missing data: no message"; cat "$tmp/err"; }
  run_mpi 2 --shards 1 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" = 2 ] || fail "-np 2 --shards 1: exit $rc (want 2)"
  [ "$(grep -c '2 ranks but 1 shards' "$tmp/err")" = 1 ] || { fail "-np 2 --shards 1: want one message"; cat "$tmp/err"; }
  [ "$fails" = 0 ] && echo "ok:   bad options and missing data stop every rank"
  ;;
fp8)
  # TRAIN_MLP_MPI is dist_fp8_test here: the float8 reductions on 3 ranks (see its header)
  run_mpi 3 || fail "dist_fp8_test on 3 ranks"
  ;;
fp8train)
  # float8 training (fp8.c, delayed scaling, amax history 16): every rank's shards record their
  # amaxes, dist_fp8_sync takes the MAX over the ranks, so -np 2 and 4 equal one process
  f8="--data $data --limit 2000 --epochs 1 --batch 128 --seed 3 --loss-scale none --shards 4"
  f8="$f8 --policy p=f32,c=bf16,o=bf16,q=float8,h=16"
  "$exe" $f8 --trace "$tmp/ref" >"$tmp/ref.log" 2>&1 || { fail "train_mlp float8 --shards 4"; cat "$tmp/ref.log"; }
  for np in 2 4; do
    run_mpi "$np" $f8 --verify-ranks --trace "$tmp/np$np" >"$tmp/np$np.log" 2>&1 \
      || { fail "mpirun -np $np float8"; cat "$tmp/np$np.log"; }
    same_traces "$tmp/ref.rank0" "$tmp/np$np" "$np"
  done
  ;;
*) echo "mpi_test: unknown check '$check'"; exit 2 ;;
esac
[ "$fails" = 0 ] && echo "mpi_test $check: passed" && exit 0
echo "mpi_test $check: $fails failure(s)"
exit 1
