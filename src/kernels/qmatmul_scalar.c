/*
 * qmatmul_scalar.c - the int8 matmul reference kernels (kernels.h, mxp__qmm_ops).
 *
 * "Packing" copies a block of a or b as it is (row-major, leading dimension = the block width),
 * so the portable blocking of qmatmul.c runs unchanged on this table; the product is the plain
 * i-p-j triple loop in int32. It is exact: every partial sum the loop forms adds at most kc
 * products of magnitude <= 2^14, and qmatmul.c never asks for more than MXP__QMM_K32_MAX of them
 * (kernels.h), so no int32 sum overflows. The descale is three float32 operations per element,
 * exactly the formula of mxp_matmul_int8 (every SIMD descale must give the same bits).
 */
#include <string.h>

#include "kernels.h"

static size_t b_size(size_t kc, size_t nc) { return kc * nc; }
static size_t a_size(size_t mc, size_t kc) { return mc * kc; }

static void copy_block(int8_t *dst, const int8_t *src, size_t ld, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++) memcpy(dst + r * cols, src + r * ld, cols);
}

static void pack_b(void *dst, const int8_t *b, size_t ldb, size_t kc, size_t nc)
{
    copy_block(dst, b, ldb, kc, nc);
}

static void pack_a(void *dst, const int8_t *a, size_t lda, size_t mc, size_t kc)
{
    copy_block(dst, a, lda, mc, kc);
}

/* c[i][j] (+)= sum_p a[i * lda + p] * b[p * ldb + j] */
static void mul(int32_t *c, size_t ldc, const int8_t *a, size_t lda, const int8_t *b, size_t ldb,
                size_t mc, size_t kc, size_t nc, bool first)
{
    for (size_t i = 0; i < mc; i++) {
        int32_t *row = c + i * ldc;
        if (first) memset(row, 0, nc * sizeof *row);
        for (size_t p = 0; p < kc; p++) {
            const int32_t av = a[i * lda + p];
            const int8_t *brow = b + p * ldb;
            for (size_t j = 0; j < nc; j++) row[j] += av * (int32_t)brow[j];
        }
    }
}

static void block(int32_t *c, size_t ldc, const void *ap, const void *bp, size_t mc, size_t kc,
                  size_t nc, bool first)
{
    mul(c, ldc, ap, kc, bp, nc, mc, kc, nc, first);
}

static void descale(void *y, const int32_t *acc, size_t n, float sa, const float *sb)
{
    for (size_t j = 0; j < n; j++) {
        const float d = sa * sb[j];         /* float32 product */
        const float v = (float)acc[j] / d;  /* one rounding of acc, float32 division */
        memcpy((char *)y + j * sizeof v, &v, sizeof v);
    }
}

void mxp__qmm_register_scalar(mxp__kernels *k)
{
    mxp__qmm_ops *o = &k->qmm;
    o->name = "scalar";
    o->kc = 256;
    o->mc = 64;
    o->nc = 256;
    o->rows_max_m = 0; /* rows() exists (tests reach it) but the packed path is the reference */
    o->rows_kc = 256;
    o->rows_nc = 1024;
    o->b_size = b_size;
    o->a_size = a_size;
    o->pack_b = pack_b;
    o->pack_a = pack_a;
    o->block = block;
    o->rows = mul;
    o->descale = descale;
}
