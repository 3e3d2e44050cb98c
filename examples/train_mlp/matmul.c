/*
 * matmul.c - blocked float32 matrix products that gcc and clang vectorise at -O2/-O3.
 *
 * Both kernels are written as "axpy over a contiguous row": the innermost loop adds a scalar
 * times one row to another row, j = 0..n-1, which the compiler turns into SIMD multiply-adds
 * without any reassociation (so no -ffast-math is needed and the results are exact IEEE).
 * Four output rows share each loaded row of the right-hand matrix to save memory traffic,
 * and the reduction dimension is cut into blocks that stay in L1/L2.
 */
#include "matmul.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

enum { KBLOCK = 64, MAX_THREADS = 64 };

/* On x86-64 the two kernels are also compiled for AVX2 (8 floats per vector instead of SSE2's
 * 4) and the loader picks the best copy for the CPU (GNU ifunc). AVX2 only, no FMA: the code
 * does exactly the same float32 multiplies and adds in the same order, so the bits are the
 * same on every x86-64 CPU. */
/* Not under ThreadSanitizer: its instrumented ifunc resolver runs before the runtime is set up
 * and crashes at load time (a TSan limitation), so a TSan build keeps the portable copy only. */
#if defined(__SANITIZE_THREAD__)
#define MLP_NO_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MLP_NO_CLONES 1
#endif
#endif
#if defined(__x86_64__) && defined(__linux__) && defined(__has_attribute) && !defined(MLP_NO_CLONES)
#if __has_attribute(target_clones)
#define KERNEL __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef KERNEL
#define KERNEL
#endif

/* ---- forward: y = x . w + bias, rows [r0, r1) --------------------------------------------- */
KERNEL static void forward_rows(float *restrict y, const float *restrict x, const float *restrict w,
                         const float *restrict bias, size_t r0, size_t r1, size_t k, size_t n)
{
    for (size_t i = r0; i < r1; i++) {
        float *yi = y + i * n;
        if (bias) memcpy(yi, bias, n * sizeof *yi);
        else memset(yi, 0, n * sizeof *yi);
    }
    for (size_t kb = 0; kb < k; kb += KBLOCK) {
        size_t ke = kb + KBLOCK < k ? kb + KBLOCK : k;
        size_t i = r0;
        for (; i + 4 <= r1; i += 4) { /* four rows of y at once: each w row is loaded once */
            float *restrict y0 = y + i * n, *restrict y1 = y0 + n, *restrict y2 = y1 + n,
                  *restrict y3 = y2 + n;
            const float *x0 = x + i * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
            for (size_t p = kb; p < ke; p++) {
                const float *restrict wp = w + p * n;
                float a0 = x0[p], a1 = x1[p], a2 = x2[p], a3 = x3[p];
                for (size_t j = 0; j < n; j++) {
                    float wj = wp[j];
                    y0[j] += a0 * wj;
                    y1[j] += a1 * wj;
                    y2[j] += a2 * wj;
                    y3[j] += a3 * wj;
                }
            }
        }
        for (; i < r1; i++) {
            float *restrict yi = y + i * n;
            const float *xi = x + i * k;
            for (size_t p = kb; p < ke; p++) {
                const float *restrict wp = w + p * n;
                float a = xi[p];
                for (size_t j = 0; j < n; j++) yi[j] += a * wp[j];
            }
        }
    }
}

/* ---- weight gradient: dw = x^T . dy, rows [r0, r1) of dw ------------------------------------ */
KERNEL static void weight_grad_rows(float *restrict dw, const float *restrict x, const float *restrict dy,
                             size_t r0, size_t r1, size_t m, size_t k, size_t n)
{
    memset(dw + r0 * n, 0, (r1 - r0) * n * sizeof *dw);
    /* dw[p,:] = sum_i x[i,p] * dy[i,:], i ascending for every p: the order never depends on
     * how rows of dw are split between threads. */
    for (size_t pb = r0; pb < r1; pb += 16) {
        size_t pe = pb + 16 < r1 ? pb + 16 : r1;
        for (size_t i = 0; i < m; i++) {
            const float *restrict dyi = dy + i * n;
            const float *xi = x + i * k;
            for (size_t p = pb; p < pe; p++) {
                float a = xi[p];
                if (a == 0.0f) continue; /* relu/dropout zeros: exact to skip (a*dy adds +-0) */
                float *restrict dwp = dw + p * n;
                for (size_t j = 0; j < n; j++) dwp[j] += a * dyi[j];
            }
        }
    }
}

/* ---- block-scaled forward (MX): rows [r0, r1) ---------------------------------------------- */
enum { MX_CHUNK = 128 }; /* output columns per pass: the partial sums live on the stack */

/* Rows i0..i0+nr-1 (nr <= 4), output columns [j0, j0+nj): four rows share each loaded w row. */
KERNEL static void block_scaled_tile(float *restrict y, const float *restrict x,
                                     const float *restrict xs, const float *restrict w,
                                     const float *restrict ws, size_t i0, size_t nr, size_t j0,
                                     size_t nj, size_t k, size_t n, size_t block)
{
    const size_t nb = (k + block - 1) / block;
    float t[4][MX_CHUNK]; /* one block's partial sums, per row */
    for (size_t r = 0; r < nr; r++) memset(y + (i0 + r) * n + j0, 0, nj * sizeof *y);
    for (size_t b = 0; b < nb; b++) {
        const size_t p0 = b * block, p1 = p0 + block < k ? p0 + block : k;
        memset(t, 0, sizeof t);
        for (size_t p = p0; p < p1; p++) {
            const float *restrict wp = w + p * n + j0;
            if (nr == 4) { /* the common case, written out so the compiler keeps 4 rows live */
                const float a0 = x[i0 * k + p], a1 = x[(i0 + 1) * k + p],
                            a2 = x[(i0 + 2) * k + p], a3 = x[(i0 + 3) * k + p];
                for (size_t j = 0; j < nj; j++) {
                    const float wj = wp[j];
                    t[0][j] += a0 * wj;
                    t[1][j] += a1 * wj;
                    t[2][j] += a2 * wj;
                    t[3][j] += a3 * wj;
                }
            } else {
                for (size_t r = 0; r < nr; r++) {
                    const float a = x[(i0 + r) * k + p];
                    for (size_t j = 0; j < nj; j++) t[r][j] += a * wp[j];
                }
            }
        }
        const float *restrict sw = ws + b * n + j0;
        for (size_t r = 0; r < nr; r++) {
            const float sx = xs[(i0 + r) * nb + b];
            float *restrict yr = y + (i0 + r) * n + j0;
            for (size_t j = 0; j < nj; j++) yr[j] += t[r][j] * sx * sw[j];
        }
    }
}

static void block_scaled_rows(float *y, const float *x, const float *xs, const float *w,
                              const float *ws, size_t r0, size_t r1, size_t k, size_t n,
                              size_t block)
{
    for (size_t i = r0; i < r1; i += 4)
        for (size_t j0 = 0; j0 < n; j0 += MX_CHUNK)
            block_scaled_tile(y, x, xs, w, ws, i, r1 - i < 4 ? r1 - i : 4, j0,
                              n - j0 < MX_CHUNK ? n - j0 : MX_CHUNK, k, n, block);
}

/* ---- threads: a small pool started once, so a training step creates no threads ---------- */
typedef struct job {
    int kind; /* 0 forward, 1 weight grad, 2 block-scaled forward */
    float *out;
    const float *a, *b, *bias;
    const float *as, *bs; /* block-scaled: the scales of a and b */
    size_t r0, r1, m, k, n, block;
} job;

static void run_job(const job *j)
{
    if (j->kind == 0) forward_rows(j->out, j->a, j->b, j->bias, j->r0, j->r1, j->k, j->n);
    else if (j->kind == 1) weight_grad_rows(j->out, j->a, j->b, j->r0, j->r1, j->m, j->k, j->n);
    else block_scaled_rows(j->out, j->a, j->as, j->b, j->bs, j->r0, j->r1, j->k, j->n, j->block);
}

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t tid[MAX_THREADS];
    int nworkers;           /* threads besides the caller */
    job jobs[MAX_THREADS];  /* jobs[0] is the caller's, jobs[i] worker i-1's */
    int njobs, pending;     /* jobs this round; worker jobs not finished yet */
    unsigned long round;    /* bumped for every batch of jobs */
    bool quit;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,
            .done = PTHREAD_COND_INITIALIZER};

static void *worker(void *arg)
{
    const int me = (int)(intptr_t)arg + 1; /* my job index */
    unsigned long seen = 0;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (pool.round == seen && !pool.quit) pthread_cond_wait(&pool.work, &pool.mu);
        if (pool.quit) break;
        seen = pool.round;
        if (me >= pool.njobs) continue; /* nothing for me this round */
        job j = pool.jobs[me];
        pthread_mutex_unlock(&pool.mu);
        run_job(&j);
        pthread_mutex_lock(&pool.mu);
        if (--pool.pending == 0) pthread_cond_signal(&pool.done);
    }
    pthread_mutex_unlock(&pool.mu);
    return NULL;
}

int matmul_threads_start(int threads)
{
    matmul_threads_stop();
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    pool.quit = false;
    for (int i = 0; i < threads - 1; i++) {
        if (pthread_create(&pool.tid[i], NULL, worker, (void *)(intptr_t)i) != 0) break;
        pool.nworkers++;
    }
    return pool.nworkers + 1;
}

void matmul_threads_stop(void)
{
    pthread_mutex_lock(&pool.mu);
    pool.quit = true;
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.nworkers; i++) pthread_join(pool.tid[i], NULL);
    pool.nworkers = 0;
}

/* Split rows [0, rows) into contiguous parts (multiples of 4 rows), one per thread. The parts
 * only decide who computes which output rows, never the order of any sum. */
static void split(job base, size_t rows, int threads, size_t work_per_row)
{
    if (threads > pool.nworkers + 1) threads = pool.nworkers + 1;
    if (threads < 2 || rows < 8 || rows * work_per_row < 65536) {
        base.r0 = 0;
        base.r1 = rows;
        run_job(&base);
        return;
    }
    size_t per = (rows + (size_t)threads - 1) / (size_t)threads;
    per = (per + 3) / 4 * 4;
    pthread_mutex_lock(&pool.mu);
    int t = 0;
    for (size_t r = 0; r < rows; r += per, t++) {
        pool.jobs[t] = base;
        pool.jobs[t].r0 = r;
        pool.jobs[t].r1 = r + per < rows ? r + per : rows;
    }
    pool.njobs = t;
    pool.pending = t - 1;
    pool.round++;
    pthread_cond_broadcast(&pool.work);
    job mine = pool.jobs[0];
    pthread_mutex_unlock(&pool.mu);
    run_job(&mine);
    pthread_mutex_lock(&pool.mu);
    while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
}

void matmul_forward(float *y, const float *x, const float *w, const float *bias, size_t m,
                    size_t k, size_t n, int threads)
{
    job j = {.kind = 0, .out = y, .a = x, .b = w, .bias = bias, .m = m, .k = k, .n = n};
    split(j, m, threads, k * n);
}

void matmul_block_scaled(float *y, const float *x, const float *xs, const float *w,
                         const float *ws, size_t m, size_t k, size_t n, size_t block, int threads)
{
    job j = {.kind = 2, .out = y, .a = x, .b = w, .as = xs, .bs = ws, .m = m, .k = k, .n = n,
             .block = block};
    split(j, m, threads, k * n);
}

void matmul_weight_grad(float *dw, const float *x, const float *dy, size_t m, size_t k, size_t n,
                        int threads)
{
    job j = {.kind = 1, .out = dw, .a = x, .b = dy, .m = m, .k = k, .n = n};
    split(j, k, threads, m * n);
}

void transpose(float *dst, const float *src, size_t r, size_t c)
{
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++) dst[j * r + i] = src[i * c + j];
}
