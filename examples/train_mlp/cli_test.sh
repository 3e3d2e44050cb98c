#!/bin/sh
# cli_test.sh TRAIN_MLP - CTest (label "demo"): exit codes and error messages of train_mlp on
# bad command lines and on missing / corrupt data files. Builds tiny synthetic IDX files, so it
# needs neither the Fashion-MNIST package nor more than a second.
exe=${1:?usage: cli_test.sh TRAIN_MLP}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect CODE PATTERN ARGS...: train_mlp ARGS exits with CODE and its stderr matches PATTERN.
expect() {
  code=$1 pattern=$2
  shift 2
  "$exe" "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -ne "$code" ] || { [ -n "$pattern" ] && ! grep -q -- "$pattern" "$tmp/err"; }; then
    echo "FAIL: train_mlp $* -> exit $got (want $code), stderr:"; sed 's/^/    /' "$tmp/err"
    fails=$((fails + 1))
  else
    echo "ok:   train_mlp $* -> $code"
  fi
}

# IDX files: images (magic 0x803, n, 28, 28, pixels) and labels (magic 0x801, n, labels 0..9).
be32() { printf "\\$(printf %03o $(($1 >> 24 & 255)))\\$(printf %03o $(($1 >> 16 & 255)))"; \
         printf "\\$(printf %03o $(($1 >> 8 & 255)))\\$(printf %03o $(($1 & 255)))"; }
images() { { be32 $((0x803)); be32 "$2"; be32 28; be32 28; head -c $(($2 * 784)) /dev/zero; } | gzip >"$1"; }
labels() { { be32 $((0x801)); be32 "$2"; i=0; while [ $i -lt "$2" ]; do printf "\\$(printf %03o $((i % 10)))"; i=$((i + 1)); done; } | gzip >"$1"; }
mkset() {
  mkdir -p "$1"
  images "$1/train-images-idx3-ubyte.gz" 40; labels "$1/train-labels-idx1-ubyte.gz" 40
  images "$1/t10k-images-idx3-ubyte.gz" 20; labels "$1/t10k-labels-idx1-ubyte.gz" 20
}

mkset "$tmp/good"
expect 0 '' --data "$tmp/good" --epochs 1 --batch 8 --csv "$tmp/good.csv"
head -n 1 "$tmp/good.csv" | grep -qx 'epoch,train_loss,test_accuracy,loss_scale,skipped_steps,grad_underflow_fraction,seconds' \
  || { echo "FAIL: CSV header"; fails=$((fails + 1)); }
[ "$(wc -l <"$tmp/good.csv")" -eq 2 ] || { echo "FAIL: CSV rows"; fails=$((fails + 1)); }
[ ! -e "$tmp/good.csv.tmp" ] || { echo "FAIL: CSV temp file left"; fails=$((fails + 1)); }

# bad command lines: exit 2 with the message and one line pointing to --help (not the whole
# usage text: exactly two lines on stderr)
usage_error() {
  expect 2 "$@"
  if [ "$(wc -l <"$tmp/err")" -ne 2 ] || ! tail -n 1 "$tmp/err" | grep -qx "Try 'train_mlp --help' for the options."; then
    shift
    echo "FAIL: train_mlp $*: want the message and one --help line on stderr, got:"; sed 's/^/    /' "$tmp/err"
    fails=$((fails + 1))
  fi
}
usage_error "unknown option '--bogus'" --bogus
usage_error "--epochs needs an integer 1..1000, not '0'" --epochs 0
usage_error "needs a value" --policy
usage_error "unknown dtype 'f13'" --policy p=f13
usage_error "unknown op 'batchnorm'" --except batchnorm
usage_error "bad --loss-scale 'dynamic:0'" --loss-scale dynamic:0
usage_error "bad --loss-scale 'dynamic:-2'" --loss-scale dynamic:-2
usage_error "bad --loss-scale 'dynamic:8:0'" --loss-scale dynamic:8:0
usage_error "bad --loss-scale 'static:-1'" --loss-scale static:-1
usage_error "int8 / int4 policies" --policy int8_from_mixed_bfloat16
usage_error "needs --eval FILE" --eval-policy int8_from_float32
usage_error "bad --eval-policy" --eval x.safetensors --eval-policy q=int9
usage_error "--eval-fp8 needs" --eval-fp8 mx4
usage_error "--threads needs" --threads x
"$exe" --help >"$tmp/out" 2>&1 || { echo "FAIL: --help"; fails=$((fails + 1)); }
grep -q "usage: train_mlp" "$tmp/out" || { echo "FAIL: --help prints no usage"; fails=$((fails + 1)); }

# a dynamic loss scale below 1 is accepted (min_scale 0: it can still shrink)
expect 0 '' --data "$tmp/good" --epochs 1 --batch 8 --loss-scale dynamic:0.5
# float16 params: the float16 gradients are unscaled into float32 masters
expect 0 '' --data "$tmp/good" --epochs 1 --batch 8 --policy p=f16,c=f16,o=f32

# an output that cannot be written fails before training (nothing trained, no epoch printed)
expect_early() {
  expect 1 "$@"
  if grep -q '^epoch' "$tmp/out"; then
    shift
    echo "FAIL: train_mlp $*: trained before failing on the output"; fails=$((fails + 1))
  fi
}
expect_early "cannot write --csv file /nonexistent/x.csv" --data "$tmp/good" --epochs 1 --batch 8 --csv /nonexistent/x.csv
mkdir -p "$tmp/adir"
expect_early "cannot write --csv file $tmp/adir" --data "$tmp/good" --epochs 1 --batch 8 --csv "$tmp/adir"
[ ! -e "$tmp/adir.tmp" ] || { echo "FAIL: probe file left behind"; fails=$((fails + 1)); }
if ! "$exe" --data "$tmp/good" --eval "$tmp/none.safetensors" 2>&1 | grep -q 'without checkpoint support'; then
  expect_early "cannot write checkpoint /nonexistent/x.safetensors" --data "$tmp/good" --epochs 1 --batch 8 --save /nonexistent/x.safetensors
  expect_early "cannot write checkpoint $tmp/adir: Is a directory" --data "$tmp/good" --epochs 1 --batch 8 --save "$tmp/adir"
  [ -z "$(ls -A "$tmp/adir")" ] || { echo "FAIL: --save probe file left behind"; fails=$((fails + 1)); }
fi

# data problems: exit 1 and a message naming the file
expect 1 "$tmp/none/train-images-idx3-ubyte.gz: cannot open" --data "$tmp/none"
mkset "$tmp/magic"
{ be32 $((0x803)); be32 20; } | gzip >"$tmp/magic/t10k-labels-idx1-ubyte.gz"
expect 1 "t10k-labels-idx1-ubyte.gz: bad magic 0x00000803" --data "$tmp/magic"
mkset "$tmp/trunc"
{ be32 $((0x803)); be32 40; be32 28; be32 28; head -c 1000 /dev/zero; } | gzip >"$tmp/trunc/train-images-idx3-ubyte.gz"
expect 1 "train-images-idx3-ubyte.gz: truncated" --data "$tmp/trunc"
mkset "$tmp/size"
{ be32 $((0x803)); be32 20; be32 32; be32 32; } | gzip >"$tmp/size/t10k-images-idx3-ubyte.gz"
expect 1 "t10k-images-idx3-ubyte.gz: images are 32x32" --data "$tmp/size"
mkset "$tmp/count"
labels "$tmp/count/train-labels-idx1-ubyte.gz" 39
expect 1 "has 40 images but .* has 39 labels" --data "$tmp/count"
mkset "$tmp/extra"
{ be32 $((0x801)); be32 20; head -c 21 /dev/zero; } | gzip >"$tmp/extra/t10k-labels-idx1-ubyte.gz"
expect 1 "t10k-labels-idx1-ubyte.gz: unexpected extra bytes" --data "$tmp/extra"
mkset "$tmp/label"
{ be32 $((0x801)); be32 40; printf '\001\002\012'; head -c 37 /dev/zero; } | gzip >"$tmp/label/train-labels-idx1-ubyte.gz"
expect 1 "label 10 at index 2" --data "$tmp/label"
mkset "$tmp/gz"
head -c 30 "$tmp/good/train-images-idx3-ubyte.gz" >"$tmp/gz/train-images-idx3-ubyte.gz"
expect 1 "train-images-idx3-ubyte.gz: " --data "$tmp/gz"

# checkpoints: --save then --eval works; a damaged checkpoint is refused with exit 1 and a message
if ! "$exe" --data "$tmp/good" --eval "$tmp/none.safetensors" 2>&1 | grep -q 'without checkpoint support'; then
  ck="$tmp/good.safetensors"
  expect 0 '' --data "$tmp/good" --epochs 1 --batch 8 --save "$ck"
  expect 0 '' --data "$tmp/good" --eval "$ck" --batch 8
  expect 0 '' --data "$tmp/good" --eval "$ck" --batch 8 --eval-policy int8_from_float32
  size=$(wc -c <"$ck")
  head -c $((size - 100)) "$ck" >"$tmp/trunc.safetensors"
  expect 1 "cannot read checkpoint: .*trunc.safetensors" --data "$tmp/good" --eval "$tmp/trunc.safetensors"
  head -c 20 "$ck" >"$tmp/short.safetensors"
  expect 1 "cannot read checkpoint: .*short.safetensors" --data "$tmp/good" --eval "$tmp/short.safetensors"
  { printf 'garbage!'; tail -c +9 "$ck"; } >"$tmp/header.safetensors"
  expect 1 "cannot read checkpoint: .*header.safetensors" --data "$tmp/good" --eval "$tmp/header.safetensors"
  # a NaN in the last 4 bytes: the last tensor in file order (dense_2/weight, names sorted)
  { head -c $((size - 4)) "$ck"; printf '\377\377\377\177'; } >"$tmp/nan.safetensors"
  expect 1 "dense_2/weight' element 639 is nan" --data "$tmp/good" --eval "$tmp/nan.safetensors"
  expect 1 "cannot read checkpoint: .*missing.safetensors" --data "$tmp/good" --eval "$tmp/missing.safetensors"
  [ ! -e "$tmp/missing.safetensors" ] || { echo "FAIL: --eval created a file"; fails=$((fails + 1)); }
else
  echo "skip: train_mlp built without checkpoint support"
fi

[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
