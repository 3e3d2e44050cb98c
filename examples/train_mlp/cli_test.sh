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

# bad command lines: exit 2 with a message and the usage
expect 2 "unknown option '--bogus'" --bogus
expect 2 "usage: train_mlp" --epochs 0
expect 2 "needs a value" --policy
expect 2 "unknown dtype 'f13'" --policy p=f13
expect 2 "unknown op 'batchnorm'" --except batchnorm
expect 2 "bad --loss-scale 'dynamic:0.5'" --loss-scale dynamic:0.5
expect 2 "bad --loss-scale 'static:-1'" --loss-scale static:-1
expect 2 "quantized policies" --policy int8_from_mixed_bfloat16
expect 2 "--threads needs" --threads x
"$exe" --help >/dev/null 2>&1 || { echo "FAIL: --help"; fails=$((fails + 1)); }

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

[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
