/*
 * matmul.h - the three float32 matrix products a dense layer needs, in plain C.
 *
 * Inputs are float32 arrays that hold values already rounded to the layer's compute dtype
 * (float16 / bfloat16 values widen to float32 exactly), and every product accumulates in
 * float32: the arithmetic of a tensor core. The caller rounds the results into the compute
 * dtype with mxp_convert.
 *
 * Threads: matmul_threads_start(T) starts T-1 worker threads once; each product then splits
 * its OUTPUT rows over up to `threads` of them (the caller included). Every output element is
 * summed in the same order whatever the split, so results are bit-identical for any thread
 * count. Without a started pool everything runs on the calling thread. The pool is global: one
 * model (one caller) at a time.
 */
#ifndef TRAIN_MLP_MATMUL_H
#define TRAIN_MLP_MATMUL_H

#include <stddef.h>

/* y[m,n] = x[m,k] . w[k,n] + bias[n]   (bias may be NULL). Split over the m rows. */
void matmul_forward(float *y, const float *x, const float *w, const float *bias, size_t m,
                    size_t k, size_t n, int threads);

/* Block-scaled product (OCP MX): y[i,j] = sum over blocks b of `block` consecutive p of
 *   (sum_{p in b} x[i,p] * w[p,j]) * xs[i,b] * ws[b,j]
 * x [m,k], xs [m,nb], w [k,n], ws [nb,n], nb = ceil(k / block). Each block's partial sum is
 * accumulated in float32 in ascending p, scaled (two float32 multiplies; exact for power-of-two
 * scales without overflow or underflow) and added in ascending b. Split over the m rows. */
void matmul_block_scaled(float *y, const float *x, const float *xs, const float *w,
                         const float *ws, size_t m, size_t k, size_t n, size_t block, int threads);

/* dw[k,n] = x[m,k]^T . dy[m,n]   (the weight gradient). Split over the k rows of dw. */
void matmul_weight_grad(float *dw, const float *x, const float *dy, size_t m, size_t k, size_t n,
                        int threads);

/* Start the pool with `threads` threads in all (stopping a previous one); returns how many it
 * got (1 when threads <= 1 or no thread could be created). */
int matmul_threads_start(int threads);
/* Stop and join the workers (safe to call when none run). */
void matmul_threads_stop(void);

/* dst[c,r] = src[r,c] (used to turn w[k,n] into w^T[n,k] so dx = dy . w^T is a forward product). */
void transpose(float *dst, const float *src, size_t r, size_t c);

#endif /* TRAIN_MLP_MATMUL_H */
