/*
 * fp8.h - float8 training of the dense layers with delayed scaling (Transformer Engine's recipe,
 * what Keras' float8_from_* policies do).
 *
 * A dense layer whose policy has q=float8 keeps its float32 master weights (Adam updates them as
 * always) and runs its three matrix products on float8 values:
 *
 *   forward   z  = (x8 . w8)  * (inv_x * inv_w) + bias    x8 = e4m3fn(x * s_x)
 *                                                         w8 = e4m3fn(w * s_w)
 *   backward  dW = (x8^T . g8) * (inv_x * inv_g)            g8 = e5m2(dz * s_g)
 *             dx = (g8 . w8^T) * (inv_g * inv_w)
 *
 * x is the layer input in the compute dtype, w the kernel in the compute dtype, dz the output
 * gradient (after relu). Each of the three tensors has its own mxp_fp8_scaler (amax history of
 * the policy's h): it quantizes with the CURRENT scale and records this step's amax; fp8_step_end
 * (once per training step, after the backward pass) rolls every history and derives the next
 * scale. Products of two float8 values are exact in float32 and the sums accumulate in float32
 * (matmul.c), as in a float8 tensor-core GEMM; the result is multiplied by the two scale
 * inverses and then rounded into the compute dtype by the caller.
 *
 * Evaluation (train = false) quantizes with the same scales but leaves the recorded amax alone,
 * so evaluating between epochs does not change training.
 */
#ifndef TRAIN_MLP_FP8_H
#define TRAIN_MLP_FP8_H

#include <stdbool.h>
#include <stddef.h>

#include "mixprec.h"
#include "model.h"

/* The scalers of one layer: input, kernel, output gradient. */
enum { FP8_X = 0, FP8_W, FP8_G, FP8_NSCALERS };
extern const char *const FP8_SCALER_NAMES[FP8_NSCALERS]; /* "x", "kernel", "grad" */

/* For every dense layer whose policy has q=float8, create its float8 state (history length from
 * the policy). Returns the number of such layers, or -1 with a message in err. */
int fp8_attach(model *m, char *err, size_t cap);
/* The same for one dense layer (whatever its policy says); 0 or -1 with a message. */
int fp8_attach_layer(model *m, layer *l, char *err, size_t cap);

/* Free one layer's state (NULL ok). */
void fp8_dense_free(struct fp8_dense *f);

/* z[rows,out] = dequantized float8 product of x[rows,in] and w[in,out] (both in their compute
 * dtype, any of float32 / bfloat16 / float16) plus bias[out] (float32). Keeps x8 and w8 for the
 * backward pass. */
void fp8_dense_forward(struct fp8_dense *f, float *z, const tbuf *x, const tbuf *w,
                       const float *bias, size_t rows, bool train, int threads);

/* From dz[rows,out] (float32 values of the compute dtype): dw[in,out] and, when dx is non-NULL,
 * dx[rows,in]. ws_wt is a float32 workspace of in*out elements. */
void fp8_dense_backward(struct fp8_dense *f, float *dw, float *dx, float *ws_wt, const float *dz,
                        size_t rows, int threads);

/* End of a training step: mxp_fp8_scaler_update on every scaler of the model. */
void fp8_step_end(model *m);

/* Scaler `which` of a layer (NULL when the layer trains without float8). */
mxp_fp8_scaler *fp8_scaler(const layer *l, int which);

/* Replace scaler `which` of a layer by s (ownership passes; the old one is freed). The recipe
 * must have the scaler's format; returns 0, or -1 with a message. */
int fp8_set_scaler(layer *l, int which, mxp_fp8_scaler *s, char *err, size_t cap);

#endif /* TRAIN_MLP_FP8_H */
