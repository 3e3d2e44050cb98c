#!/bin/sh
# smoke_test.sh TRAIN_MLP [DATA_DIR] - CTest smoke test of the training demo (label "demo").
# One epoch on 6000 training images with float16 compute and a dynamic loss scale that starts
# far too high (2^24) with a short period, so it must drop (and later grow). train_mlp --check
# asserts: test accuracy >= 0.6 (chance is 0.1) and the loss scale changed at least once.
# Exits 77 (CTest: skipped) when the Fashion-MNIST files are not installed.
exe=${1:?usage: smoke_test.sh TRAIN_MLP [DATA_DIR]}
data=${2:-/usr/share/datasets/fashion-mnist}
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz \
         t10k-labels-idx1-ubyte.gz; do
  if [ ! -r "$data/$f" ]; then
    echo "smoke_test: $data/$f not found (apt-get install dataset-fashion-mnist); skipping"
    exit 77
  fi
done
exec "$exe" --data "$data" --limit 6000 --epochs 1 --batch 64 --seed 7 \
  --policy p=f32,c=f16,o=f32 --loss-scale dynamic:16777216:50 --check 0.6
