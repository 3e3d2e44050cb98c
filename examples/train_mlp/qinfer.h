/*
 * qinfer.h - quantized inference of the dense layers (Keras' int8 / int4 Dense, float8 with
 * current scaling, OCP MXFP8).
 *
 * A dense layer's kernel is kept quantized and every batch runs on it as it is:
 *
 *   int8    kernel int8 [in,out], one scale per output channel (Keras: abs-max over each column);
 *           each input row is quantized at run time (per-row abs-max), mxp_matmul_int8 computes
 *           the exact integer products and descales: z = acc / (s_x[i] * s_w[j]) + bias.
 *   int4    the same with 4-bit values (-8..7, scale 7 / amax), stored packed two per byte and
 *           unpacked to int8 for each batch (as Keras' int4 Dense does), then mxp_matmul_int8.
 *   fp8     kernel e4m3fn with a scale per output channel; the input quantized to e4m3fn with
 *           one scale per batch (current scaling: s = 448 / amax of this batch); the float8
 *           values are multiplied exactly and summed in float32, then
 *           z = acc * (inv_x * inv_w[j]) + bias.
 *   mxfp8   OCP MXFP8 (e4m3fn elements, one E8M0 power of two per 32 consecutive elements along
 *           the reduction dimension, for the kernel and for each input row): the 32-element
 *           partial sums are multiplied by 2^(e_x + e_w - 254) and added in float32.
 *
 * Layouts: a kernel quantized here from float comes from the model's [in,out] kernel (Keras);
 * a kernel read from a checkpoint is [out,in] (compressed-tensors / vLLM layout, what
 * `mixprec quantize` writes) with `_scale` = the DEQUANTIZATION multipliers (x ~ q * scale);
 * it is rearranged once at load (a transpose of the stored integers / float8 bytes, never
 * dequantized).
 */
#ifndef TRAIN_MLP_QINFER_H
#define TRAIN_MLP_QINFER_H

#include <stdbool.h>
#include <stddef.h>

#include "mixprec.h"
#include "model.h"

typedef enum qformat { QF_INT8 = 0, QF_INT4, QF_FP8, QF_MXFP8 } qformat;

/* "int8", "int4", "fp8", "mxfp8". */
const char *qformat_name(qformat f);

/* Quantize the kernel of every dense layer whose policy has q set (int8, int4, float8; float8
 * means per-channel current scaling, or MXFP8 when mx is true), from the layer's parameters in
 * its param dtype; layers already holding a kernel (from a checkpoint) or float8 training
 * state are left alone. Returns the number of layers quantized, or -1 with a message in err (e.g. a
 * kernel with a NaN). */
int qinfer_quantize_model(model *m, bool mx, char *err, size_t cap);

/*
 * Give dense layer l the kernel stored quantized in a checkpoint, [out,in] row-major:
 *   QF_INT8   q: int8 [out,in];                     scale: float32 [out] (or 1 value)
 *   QF_INT4   q: packed int4 [out, ceil(in/2)];     scale: float32 [out] (or 1 value)
 *   QF_FP8    q: fmt bytes [out,in];                scale: float32 [out] (or 1 value)
 *   QF_MXFP8  q: fmt bytes [out,in];                scale: uint8 E8M0 [out, ceil(in/32)]
 * float32 scales are dequantization multipliers and must be finite and > 0; E8M0 0xFF (NaN) and
 * float8 NaN elements are refused. nscale is the number of scales given. Returns 0, or -1 with
 * a message naming the layer and the bad index.
 */
int qdense_from_stored(layer *l, qformat f, mxp_dtype fmt, const void *q, const void *scale,
                       size_t nscale, size_t batch, char *err, size_t cap);

/* z[rows,out] = the quantized product of x[rows,in] (in any of float32 / bfloat16 / float16)
 * with the kernel, descaled, plus bias[out]. */
void qdense_forward(struct qdense *q, float *z, const tbuf *x, const float *bias, size_t rows,
                    int threads);

/* Bytes of the stored kernel and its scales. */
size_t qdense_bytes(const struct qdense *q);
qformat qdense_format(const struct qdense *q);

void qdense_free(struct qdense *q);

/* Bytes of every parameter as the model holds it for inference: dense kernels (quantized with
 * their scales, or in the param dtype), biases and batch-norm gamma / beta in the param dtype,
 * batch-norm running mean and variance (float32). */
size_t qinfer_weight_bytes(const model *m);

#endif /* TRAIN_MLP_QINFER_H */
