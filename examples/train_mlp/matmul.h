/*
 * matmul.h - the three float32 matrix products a dense layer needs, in plain C.
 *
 * Inputs are float32 arrays that hold values already rounded to the layer's compute dtype
 * (float16 / bfloat16 values widen to float32 exactly), and every product accumulates in
 * float32: the arithmetic of a tensor core. The caller rounds the results into the compute
 * dtype with mxp_convert.
 *
 * Threads: each call splits its OUTPUT over up to `threads` pthreads, and every output element
 * is summed in the same order whatever the split, so results are bit-identical for any thread
 * count (and the same seed).
 */
#ifndef TRAIN_MLP_MATMUL_H
#define TRAIN_MLP_MATMUL_H

#include <stddef.h>

/* y[m,n] = x[m,k] . w[k,n] + bias[n]   (bias may be NULL). Split over the m rows. */
void matmul_forward(float *y, const float *x, const float *w, const float *bias, size_t m,
                    size_t k, size_t n, int threads);

/* dw[k,n] = x[m,k]^T . dy[m,n]   (the weight gradient). Split over the k rows of dw. */
void matmul_weight_grad(float *dw, const float *x, const float *dy, size_t m, size_t k, size_t n,
                        int threads);

/* dst[c,r] = src[r,c] (used to turn w[k,n] into w^T[n,k] so dx = dy . w^T is a forward product). */
void transpose(float *dst, const float *src, size_t r, size_t c);

#endif /* TRAIN_MLP_MATMUL_H */
