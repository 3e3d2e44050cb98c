/*
 * quant_scalar.c - the scalar reference of the quantization kernels (quant_kernels.h), and the
 * per-ISA tables.
 *
 * The reference is the truth every SIMD file must match bit for bit, and SIMD files call it
 * for their tails. Floating-point arithmetic here is limited to float32 products x * s (one
 * rounding, nearest even: quant.c runs the kernels in the default environment,
 * mxp__qfenv_enter) and to exact steps (truncation of a float in [-128, 128] and its exact
 * remainder); maxima are integer maxima on bit patterns.
 */
#include <pthread.h>
#include <string.h>

#include "quant_kernels.h"

int mxp__quant_isa_override = -1;

static uint32_t mag_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u & 0x7FFFFFFFu;
}

static uint32_t amax_bits_scalar(const float *x, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t a = mag_bits(x[i]);
        m = a > m ? a : m;
    }
    return m;
}

static void amax_cols_scalar(float *acc, const float *x, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        const uint32_t a = mag_bits(x[j]);
        uint32_t c;
        memcpy(&c, &acc[j], 4);
        if (a > c) memcpy(&acc[j], &a, 4);
    }
}

/*
 * clamp(rne(y), lo, hi) for a finite float32 y: clamp first (the same result, since rounding
 * is monotone and lo, hi are integers), so |y| <= 128; then t = trunc(y) (exact) and f = y - t
 * (exact: t = 0, or t and y have the same sign with |t| <= |y| < 2|t|, Sterbenz), and the tie
 * |f| = 0.5 goes to the even neighbour.
 */
static int8_t rne_clamp(float y, int lo, int hi)
{
    if (y > (float)hi) y = (float)hi;
    if (y < (float)lo) y = (float)lo;
    int r = (int)y;
    const float f = y - (float)r;
    if (f > 0.5f || (f == 0.5f && (r & 1))) r++;
    else if (f < -0.5f || (f == -0.5f && (r & 1))) r--;
    return (int8_t)r;
}

static void cast_int_scalar(int8_t *q, const float *x, size_t n, float s, int lo, int hi, int pf)
{
    (void)pf;
    for (size_t i = 0; i < n; i++) {
        const float y = x[i] * s;
        q[i] = rne_clamp(y, lo, hi);
    }
}

static void cast_int_v_scalar(int8_t *q, const float *x, const float *s, size_t n, int lo, int hi)
{
    for (size_t i = 0; i < n; i++) {
        const float y = x[i] * s[i];
        q[i] = rne_clamp(y, lo, hi);
    }
}

static uint32_t mul_amax_scalar(float *y, const float *x, size_t n, float s)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t a = mag_bits(x[i]);
        m = a > m ? a : m;
        y[i] = x[i] * s;
    }
    return m;
}

static void mul_v_scalar(float *y, const float *x, const float *s, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] * s[i];
}

static void mx_scale_scalar(float *y, uint8_t *e, const float *x, size_t n, int e5m2, int floor_rule)
{
    for (size_t b = 0; b < n; b += MXP__MX_BLOCK) {
        const size_t len = n - b < MXP__MX_BLOCK ? n - b : MXP__MX_BLOCK;
        const uint8_t eb = mxp__mx_e8m0(amax_bits_scalar(x + b, len), e5m2, floor_rule);
        e[b / MXP__MX_BLOCK] = eb;
        const float s = mxp__mx_inv(eb);
        for (size_t i = b; i < b + len; i++) y[i] = x[i] * s;
    }
}

static const mxp__cvt_args SAT = {true, 0, 0, false};
enum { QBLK = 256 };

/* The definitions of the fused entries: the product (or the MX scaling) into a block, then
 * the conversion table's saturating cast. */
static uint32_t fp8_encode_scalar(uint8_t *q, const float *x, size_t n, float s, int e5m2, int nt,
                                  mxp__cvt_fn slow)
{
    (void)e5m2;
    (void)nt;
    float y[QBLK];
    uint32_t m = 0;
    for (size_t b = 0; b < n; b += QBLK) {
        const size_t len = n - b < QBLK ? n - b : QBLK;
        const uint32_t a = mul_amax_scalar(y, x + b, len, s);
        m = a > m ? a : m;
        slow(q + b, y, len, &SAT);
    }
    return m;
}

static void mx_encode_scalar(uint8_t *q, uint8_t *e, const float *x, size_t n, int e5m2, int floor_rule,
                             int nt, mxp__cvt_fn slow)
{
    (void)nt;
    float y[QBLK]; /* a multiple of the block size */
    for (size_t b = 0; b < n; b += QBLK) {
        const size_t len = n - b < QBLK ? n - b : QBLK;
        mx_scale_scalar(y, e + b / MXP__MX_BLOCK, x + b, len, e5m2, floor_rule);
        slow(q + b, y, len, &SAT);
    }
}

static void store_nt_scalar(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
static void store_fence_scalar(void) {}

void mxp__quant_register_scalar(mxp__qkernels *k)
{
    k->store_nt = store_nt_scalar;
    k->store_fence = store_fence_scalar;
    k->amax_bits = amax_bits_scalar;
    k->amax_cols = amax_cols_scalar;
    k->cast_int = cast_int_scalar;
    k->cast_int_v = cast_int_v_scalar;
    k->mul_amax = mul_amax_scalar;
    k->mul_v = mul_v_scalar;
    k->mx_scale = mx_scale_scalar;
    k->fp8_encode = fp8_encode_scalar;
    k->mx_encode = mx_encode_scalar;
}

/* ---- tables: one per ISA whose conversion table exists ----------------------------------- */

static mxp__qkernels tables[MXP__ISA_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
    for (int i = 0; i < MXP__ISA_COUNT; i++) {
        const mxp__kernels *c = mxp__kernels_for((mxp__isa_id)i);
        if (!c) continue;
        mxp__qkernels *k = &tables[i];
        k->name = c->name;
        mxp__quant_register_scalar(k);
        switch ((mxp__isa_id)i) {
#if defined(__x86_64__) || defined(_M_X64)
        case MXP__ISA_AVX2: mxp__quant_register_avx2(k); break;
        case MXP__ISA_AVX512: mxp__quant_register_avx512(k); break;
#endif
        default: break;
        }
    }
}

const mxp__qkernels *mxp__qkernels_for(mxp__isa_id isa)
{
    if ((unsigned)isa >= MXP__ISA_COUNT || !mxp__kernels_for(isa)) return NULL;
    pthread_once(&once, init);
    return &tables[isa];
}

const mxp__qkernels *mxp__qkernels_active(void)
{
    const int o = mxp__quant_isa_override;
    const mxp__qkernels *k = o >= 0 ? mxp__qkernels_for((mxp__isa_id)o) : NULL;
    return k ? k : mxp__qkernels_for(mxp__kernels_active()->isa);
}
