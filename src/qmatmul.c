/*
 * qmatmul.c - mxp_matmul_int8: argument checks, cache blocking, exact accumulation beyond int32,
 * descale and output rounding. The ISA kernels (kernels.h, mxp__qmm_ops; qmatmul_<isa>.c) pack
 * blocks and multiply them into int32 sums; everything here is portable.
 *
 * Loop nest (BLIS order; block sizes come from the ISA's ops):
 *   for row blocks i0 (mb rows: the int32 accumulator block stays near 1 MiB)
 *     for column blocks j0 (nc)
 *       for k chunks c0 (at most MXP__QMM_K32_MAX products: exact in int32)
 *         for k blocks p0 (kc): pack the kc x nc block of b once, then
 *           for row blocks (mc): pack the mc x kc block of a; acc += a block * b block
 *         (more than one chunk: acc64 += acc, in int64)
 *       for each row: y = (float)acc / (sa[i] * sb[j]), then rounded into yt
 * Small m (ops.rows_max_m): no packing; rows() reads a and b in place (packing b would cost more
 * than the product). The b block (kc x nc int16 on the SIMD paths) is the one reused across
 * rows; the a block is repacked for each column block, which costs 1 / (n / nc) of a's size.
 *
 * Exactness: each chunk is exact in int32 (kernels.h), chunks add in int64, so acc is the exact
 * dot product for every k (|acc| <= k * 2^14 < 2^63). The descale then rounds acc to float32
 * once: int32 sums by the ISA's descale, int64 sums (k > MXP__QMM_K32_MAX) by the scalar loop
 * here, both the formula of the header, under round-to-nearest-even without flush-to-zero
 * (mxp__fenv_enter_ieee), whatever mode the caller runs in.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kernels.h"

#define QMM_ACC_ELEMS ((size_t)1 << 18) /* int32 accumulator block: 1 MiB */

static mxp_status check_scales(const float *s, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!mxp__positive_finite(s[i])) { /* a subnormal too, whatever the caller's DAZ */
            char t[32];
            mxp__format_float(s[i], t);
            return mxp__fail(MXP_EINVAL, "mxp_matmul_int8: %s[%zu] = %s is not a finite scale > 0", name, i, t);
        }
    return MXP_OK;
}

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* Exact int64 sums: y[j] = (float)acc[j] / (sa * sb[j]) (the same three operations as every
 * ISA's descale of int32 sums). */
static void descale64(void *y, const int64_t *acc, size_t n, float sa, const float *sb)
{
    for (size_t j = 0; j < n; j++) {
        const float d = sa * sb[j];
        const float v = (float)acc[j] / d;
        memcpy((char *)y + j * sizeof v, &v, sizeof v);
    }
}

typedef struct plan {
    const mxp__kernels *k;
    const mxp__qmm_ops *o;
    void *y;
    mxp_dtype yt;
    size_t ysize;
    const int8_t *a, *b;
    const float *sa, *sb;
    size_t m, k_, n;
    size_t chunk;          /* k values per exact int32 chunk (a multiple of kc) */
    size_t kc, mc, nc, mb; /* block sizes */
    bool small;            /* rows() path */
    /* buffers */
    void *bp, *ap;
    int32_t *acc;
    int64_t *acc64;
    float *frow;
} plan;

/* acc[mb x nb] (ldc nb) = the exact int32 sums of rows i0.., columns j0.., k values c0..c0+kl */
static void chunk_sums(const plan *p, size_t i0, size_t mbl, size_t j0, size_t nb, size_t c0,
                       size_t kl)
{
    const mxp__qmm_ops *o = p->o;
    for (size_t p0 = c0; p0 < c0 + kl; p0 += p->kc) {
        const size_t kb = c0 + kl - p0 < p->kc ? c0 + kl - p0 : p->kc;
        const bool first = p0 == c0;
        if (p->small) {
            o->rows(p->acc, nb, p->a + i0 * p->k_ + p0, p->k_, p->b + p0 * p->n + j0, p->n, mbl,
                    kb, nb, first);
            continue;
        }
        o->pack_b(p->bp, p->b + p0 * p->n + j0, p->n, kb, nb);
        for (size_t ii = 0; ii < mbl; ii += p->mc) {
            const size_t mcl = mbl - ii < p->mc ? mbl - ii : p->mc;
            o->pack_a(p->ap, p->a + (i0 + ii) * p->k_ + p0, p->k_, mcl, kb);
            o->block(p->acc + ii * nb, nb, p->ap, p->bp, mcl, kb, nb, first);
        }
    }
}

static void run(const plan *p)
{
    const mxp__qmm_ops *o = p->o;
    const bool wide = p->k_ > p->chunk;
    const mxp__cvt_args args = {false, 0, 0, false};
    const mxp__cvt_fn cvt = p->yt == MXP_FLOAT32 ? NULL : p->k->cvt[p->yt][MXP_FLOAT32][MXP__RNE];
    for (size_t i0 = 0; i0 < p->m; i0 += p->mb) {
        const size_t mbl = p->m - i0 < p->mb ? p->m - i0 : p->mb;
        for (size_t j0 = 0; j0 < p->n; j0 += p->nc) {
            const size_t nb = p->n - j0 < p->nc ? p->n - j0 : p->nc;
            if (p->k_ == 0) memset(p->acc, 0, mbl * nb * sizeof *p->acc);
            for (size_t c0 = 0; c0 < p->k_; c0 += p->chunk) {
                const size_t kl = p->k_ - c0 < p->chunk ? p->k_ - c0 : p->chunk;
                chunk_sums(p, i0, mbl, j0, nb, c0, kl);
                if (!wide) continue;
                for (size_t t = 0; t < mbl * nb; t++)
                    p->acc64[t] = (c0 == 0 ? 0 : p->acc64[t]) + p->acc[t];
            }
            for (size_t i = 0; i < mbl; i++) {
                unsigned char *yrow = (unsigned char *)p->y + ((i0 + i) * p->n + j0) * p->ysize;
                void *f = cvt ? (void *)p->frow : (void *)yrow;
                if (wide) descale64(f, p->acc64 + i * nb, nb, p->sa[i0 + i], p->sb + j0);
                else o->descale(f, p->acc + i * nb, nb, p->sa[i0 + i], p->sb + j0);
                if (cvt) cvt(yrow, p->frow, nb, &args);
            }
        }
    }
}

mxp_status mxp__matmul_int8_k(const mxp__kernels *kt, size_t k32_max, void *y, mxp_dtype yt,
                              const int8_t *a, const float *sa, const int8_t *b, const float *sb,
                              size_t m, size_t k, size_t n)
{
    /* any floating yt: the float32 results go through the conversion table (float64 exact, the
     * narrower formats nearest-even, non-saturating) */
    if (!mxp_dtype_is_floating(yt)) {
        if (mxp__dtype_valid(yt))
            return mxp__fail(MXP_EUNSUPPORTED,
                             "mxp_matmul_int8: output dtype %s is not a floating dtype (expected "
                             "float32, float64, bfloat16, float16, float8_e4m3fn or float8_e5m2)",
                             mxp_dtype_name(yt));
        return mxp__fail(MXP_EUNSUPPORTED,
                         "mxp_matmul_int8: output dtype %d is not a valid dtype (expected a "
                         "floating dtype)", (int)yt);
    }
    const size_t ysize = mxp_dtype_size(yt);
    /* every operand must be a possible object: bytes up to PTRDIFF_MAX (internal.h,
     * mxp__span_ok). With SIZE_MAX, a float64 y of m * n = SIZE_MAX / 8 passed, and sb was read
     * far past its end (tests/test_bad_args.c, under ASan). */
    const size_t most = (size_t)PTRDIFF_MAX;
    if ((k && m > most / k) || (n && k > most / n) || (n && m > most / ysize / n))
        return mxp__fail(MXP_EINVAL,
                         "mxp_matmul_int8: size overflow (m = %zu, k = %zu, n = %zu: m * k, "
                         "k * n or m * n * %zu bytes exceeds PTRDIFF_MAX)", m, k, n, ysize);
    if (m == 0 || n == 0) return MXP_OK;
    if (!y || !sa || !sb || (k && (!a || !b)))
        return mxp__fail(MXP_EINVAL, "mxp_matmul_int8: %s is NULL (m = %zu, k = %zu, n = %zu)",
                         !y ? "y" : !sa ? "sa" : !sb ? "sb" : !a ? "a" : "b", m, k, n);
    mxp_status st = check_scales(sa, m, "sa");
    if (st == MXP_OK) st = check_scales(sb, n, "sb");
    if (st != MXP_OK) return st;

    plan p;
    memset(&p, 0, sizeof p);
    p.k = kt;
    p.o = &kt->qmm;
    p.y = y;
    p.yt = yt;
    p.ysize = ysize;
    p.a = a;
    p.b = b;
    p.sa = sa;
    p.sb = sb;
    p.m = m;
    p.k_ = k;
    p.n = n;
    if (k32_max == 0 || k32_max > MXP__QMM_K32_MAX) k32_max = MXP__QMM_K32_MAX;
    p.small = p.o->rows_max_m > 0 && m <= p.o->rows_max_m;
    p.kc = p.small ? p.o->rows_kc : p.o->kc;
    if (p.kc > k32_max) p.kc = k32_max;
    p.chunk = k32_max / p.kc * p.kc;
    p.nc = p.small ? p.o->rows_nc : p.o->nc;
    if (p.nc > n) p.nc = n;
    p.mc = p.o->mc < m ? p.o->mc : m;
    if (p.mc == 0) p.mc = 1; /* every kernel table has mc > 0; a zero must not divide below */
    /* rows per outer block: a multiple of mc with an accumulator block near QMM_ACC_ELEMS */
    p.mb = p.small ? m : QMM_ACC_ELEMS / p.nc / p.mc * p.mc;
    if (p.mb < p.mc) p.mb = p.mc;
    if (p.mb > m) p.mb = m;
    const size_t kb = p.kc < k ? p.kc : (k ? k : 1);

    /* one allocation: b block, a block, int32 sums, int64 sums, a float32 row */
    const size_t bsz = p.small ? 0 : round_up(p.o->b_size(kb, p.nc), 64);
    const size_t asz = p.small ? 0 : round_up(p.o->a_size(p.mc, kb), 64);
    const size_t accsz = round_up(p.mb * p.nc * sizeof(int32_t), 64);
    const size_t acc64sz = k > p.chunk ? round_up(p.mb * p.nc * sizeof(int64_t), 64) : 0;
    const size_t fsz = yt != MXP_FLOAT32 ? round_up(p.nc * sizeof(float), 64) : 0;
    const size_t total = bsz + asz + accsz + acc64sz + fsz;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, total) != 0 || !mem)
        return mxp__fail(MXP_ENOMEM, "mxp_matmul_int8: out of memory (%zu bytes of buffers)",
                         total);
    unsigned char *q = mem;
    p.bp = bsz ? q : NULL;
    q += bsz;
    p.ap = asz ? q : NULL;
    q += asz;
    p.acc = (int32_t *)(void *)q;
    q += accsz;
    p.acc64 = acc64sz ? (int64_t *)(void *)q : NULL;
    q += acc64sz;
    p.frow = fsz ? (float *)(void *)q : NULL;

    const unsigned csr = mxp__fenv_enter_ieee();
    run(&p);
    mxp__fenv_leave(csr);
    free(mem);
    return MXP_OK;
}

mxp_status mxp_matmul_int8(void *y, mxp_dtype yt, const int8_t *a, const float *sa,
                           const int8_t *b, const float *sb, size_t m, size_t k, size_t n)
{
    return mxp__matmul_int8_k(mxp__kernels_active(), 0, y, yt, a, sa, b, sb, m, k, n);
}
