/*
 * ckpt.h - train_mlp checkpoints in safetensors, with the reader / writer of the `mixprec` tool
 * (tools/safetensors.h), so `mixprec inspect / cast / quantize / report` read what train_mlp
 * writes and train_mlp --eval reads what they write.
 *
 * Tensors (row-major; a dense weight is [out,in], the PyTorch / compressed-tensors layout that
 * `mixprec quantize` expects, so its per-row scales are per output channel):
 *   dense_0/weight [128,784]  dense_0/bias [128]
 *   batch_norm_0/gamma [128]  batch_norm_0/beta [128]
 *   batch_norm_0/moving_mean [128]  batch_norm_0/moving_variance [128]
 *   dense_1/weight [64,128] ...  batch_norm_1/... [64]  dense_2/weight [10,64]  dense_2/bias [10]
 * train_mlp writes float32 (the master weights). Read back, any floating dtype is accepted
 * (a `mixprec cast` output), and a dense weight may be stored quantized with a `<name>_scale`
 * tensor beside it (a `mixprec quantize` output): I8 (int8), U8 [out, ceil(in/2)] (packed
 * int4, with an optional `<name>_shape` I64 [2] = [out,in]), F8_E4M3 / F8_E5M2 (float8) with
 * float32 dequantization scales (one per output channel, [out] or [out,1], or one in all), or
 * float8 with F8_E8M0 / U8 scales [out, ceil(in/32)] (MXFP8).
 *
 * Metadata (string -> string):
 *   mixprec.model        "train_mlp 784-128(bn,dropout)-64(bn,dropout)-10"
 *   mixprec.policy_map   the training policy map, as mxp_policy_map_format writes it
 *   mixprec.loss_scale   mxp_loss_scale_save of the final loss-scale state
 *   mixprec.fp8.<layer>.<x|kernel|grad>  mxp_fp8_scaler_save of each float8 scaler (float8
 *                        training only)
 *   mixprec.test_accuracy, mixprec.epochs, mixprec.seed, mixprec.train_images
 */
#ifndef TRAIN_MLP_CKPT_H
#define TRAIN_MLP_CKPT_H

#include <stdbool.h>
#include <stddef.h>

#include "mixprec.h"
#include "model.h"

/* True when train_mlp was built with checkpoint support (the mixprec_safetensors library,
 * which needs jansson). Without it ckpt_save / ckpt_open fail with a message. */
extern const bool CKPT_SUPPORTED;

typedef struct ckpt_info {
    const mxp_policy_map *map;  /* the training policy map */
    mxp_loss_scale loss_scale;  /* its final state */
    double test_accuracy;
    int epochs;
    uint64_t seed;
    size_t train_images;
} ckpt_info;

/* Write the model (float32 masters, batch-norm running statistics, float8 scaler states) and
 * the metadata to path, atomically (temporary file, fsync, rename; an existing file is
 * replaced). Returns 0, or -1 with a message in err. */
int ckpt_save(const char *path, const model *m, const ckpt_info *info, char *err, size_t cap);

/* Can a checkpoint be written to path? (its directory takes a temporary file, and path is not
 * a directory) Checked before training so that a bad --save fails at once. 0, or -1 with a
 * message. */
int ckpt_check_writable(const char *path, char *err, size_t cap);

typedef struct ckpt ckpt;

/* Open and validate a checkpoint: the safetensors rules, then every tensor this model needs
 * present with its shape and a usable dtype, no unknown tensors. Returns 0, or -1 with a
 * message naming the file, the tensor and what is wrong. */
int ckpt_open(const char *path, ckpt **out, char *err, size_t cap);
void ckpt_close(ckpt *c);

/* A metadata value, or NULL. */
const char *ckpt_meta(const ckpt *c, const char *key);

/* True when dense layer `path` is stored quantized (a `_scale` tensor beside its weight). */
bool ckpt_layer_quantized(const ckpt *c, const char *path);

/* Load the checkpoint into m (built with model_init for the same architecture): masters (then
 * rounded into the param dtypes), batch-norm running statistics, quantized kernels (attached
 * with qdense_from_stored, run as they are), and, for layers with float8 state (fp8_attach
 * done by the caller), the scalers from the metadata. Refuses non-finite weights, negative
 * variances and bad scales. Returns 0, or -1 with a message. */
int ckpt_load(const ckpt *c, model *m, char *err, size_t cap);

#endif /* TRAIN_MLP_CKPT_H */
