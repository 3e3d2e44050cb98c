/*
 * finite_avx2.c - all_finite (every floating dtype) and unscale_check (float32, bfloat16,
 * float16) with AVX2 + F16C; bit-identical to finite_scalar.c, which also does the tails.
 *
 * all_finite: a value is non-finite exactly when its magnitude bits exceed the largest finite
 * pattern, so one pass keeps the unsigned max of (bits & ~sign) per lane and compares once at
 * the end - two instructions per vector, no branch, no early exit:
 *     float32  |x| > 0x7F7FFFFF       float16  |x| > 0x7BFF     bfloat16 |x| > 0x7F7F
 *     e5m2     |x| > 0x7B             e4m3fn   |x| > 0x7E (only 0x7F, the NaN, is above)
 *     float64  high dword of |x| > 0x7FEFFFFF (the low dwords are masked to 0)
 *
 * unscale_check: the product is a hardware vmulps, which matches IEEE round-to-nearest when
 * MXCSR.RC is nearest (checked once per call, else the whole call is scalar) and no lane is
 * touched by FTZ/DAZ. For float32 and bfloat16 a lane with 0 < |x| < the tiny threshold
 * (finite.h) could be subnormal or give a subnormal product: a block containing one is handed
 * to the scalar reference (rare: gradients that small are below float32's normal range after
 * unscaling). float16 needs no such test: its values are normal in float32, and a product
 * below 2^-126 rounds to a float16 zero of the same sign whether or not FTZ flushed it.
 *   float32 -> bfloat16, nearest-even on the top half (blocks with a NaN go scalar):
 *     bits:  S EEEEEEEE MMMMMMM | dddddddd dddddddd
 *            '--- kept (16) ---'  '-- dropped --'
 *     adding 0x7FFF plus the lowest kept bit carries into the kept half exactly when the
 *     dropped part is above one half, or equal to it with an odd kept part.
 *   float32 -> float16: vcvtps2ph with an explicit nearest-even immediate (F16C ignores
 *     FTZ/DAZ and MXCSR.RC); NaN lanes are first made canonical (sign | 0x7FC00000), which
 *     converts to sign | 0x7E00 like the scalar reference.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "finite.h"
#include "kernels.h"
#include "nt_store.h"

#define ALL_FINITE_AVX2(NAME, DT, ESIZE, MASKV, MAXOP, CMPV)                                     \
    static bool NAME(const void *x, size_t n)                                                    \
    {                                                                                            \
        const unsigned char *p = x;                                                              \
        const size_t per = 32 / (ESIZE);                                                         \
        const __m256i mask = MASKV;                                                              \
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;                         \
        size_t i = 0;                                                                            \
        for (; i + 4 * per <= n; i += 4 * per) {                                                 \
            const unsigned char *q = p + i * (ESIZE);                                            \
            a0 = MAXOP(a0, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)q), mask));      \
            a1 = MAXOP(a1, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(q + 32)), mask)); \
            a2 = MAXOP(a2, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(q + 64)), mask)); \
            a3 = MAXOP(a3, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(q + 96)), mask)); \
        }                                                                                        \
        for (; i + per <= n; i += per)                                                           \
            a0 = MAXOP(a0, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + i * (ESIZE))), \
                                            mask));                                              \
        __m256i m = MAXOP(MAXOP(a0, a1), MAXOP(a2, a3));                                         \
        /* max == limit + 1 .. : compare "max(m, limit) != limit" lane-wise */                   \
        const __m256i lim = CMPV;                                                                \
        bool ok = _mm256_movemask_epi8(_mm256_cmpeq_epi8(MAXOP(m, lim), lim)) == -1;              \
        if (i < n) ok &= mxp__scalar_kernels()->all_finite[DT](p + i * (ESIZE), n - i);          \
        return ok;                                                                               \
    }

ALL_FINITE_AVX2(all_finite_f64, MXP_FLOAT64, 8, _mm256_set1_epi64x(0x7FFFFFFF00000000ll),
                _mm256_max_epu32, _mm256_set1_epi64x(0x7FEFFFFF00000000ll))
ALL_FINITE_AVX2(all_finite_f32, MXP_FLOAT32, 4, _mm256_set1_epi32(0x7FFFFFFF), _mm256_max_epu32,
                _mm256_set1_epi32(0x7F7FFFFF))
ALL_FINITE_AVX2(all_finite_f16, MXP_FLOAT16, 2, _mm256_set1_epi16(0x7FFF), _mm256_max_epu16,
                _mm256_set1_epi16(0x7BFF))
ALL_FINITE_AVX2(all_finite_bf16, MXP_BFLOAT16, 2, _mm256_set1_epi16(0x7FFF), _mm256_max_epu16,
                _mm256_set1_epi16(0x7F7F))
ALL_FINITE_AVX2(all_finite_e4m3, MXP_FLOAT8_E4M3FN, 1, _mm256_set1_epi8(0x7F), _mm256_max_epu8,
                _mm256_set1_epi8(0x7E))
ALL_FINITE_AVX2(all_finite_e5m2, MXP_FLOAT8_E5M2, 1, _mm256_set1_epi8(0x7F), _mm256_max_epu8,
                _mm256_set1_epi8(0x7B))

/* ---- unscale_check -------------------------------------------------------------------------- */

/* Per-call set-up shared by the float32 and bfloat16 kernels: false -> use the scalar path. */
static bool fast_setup(float inv, uint32_t *thr)
{
    uint32_t ib;
    memcpy(&ib, &inv, 4);
    uint32_t ie = (ib >> 23) & 0xFF;
    if (ie == 0 || ie == 0xFF || !mxp__unscale_hw_ok()) return false;
    *thr = mxp__unscale_tiny_threshold(inv);
    return true;
}

/* Mask of lanes with 0 < |v| < thr, i.e. (|v| - 1) <u (thr - 1): a signed compare after
 * flipping the top bit; thr_m1 = (thr - 1) ^ 0x80000000 in every lane. */
static inline __m256i tiny_lanes(__m256i v, __m256i thr_m1)
{
    const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), one = _mm256_set1_epi32(1),
                  top = _mm256_set1_epi32((int)0x80000000u);
    __m256i a = _mm256_xor_si256(_mm256_sub_epi32(_mm256_and_si256(v, abs), one), top);
    return _mm256_cmpgt_epi32(thr_m1, a);
}

/*
 * Large passes (STREAM_MIN_BYTES and up: past the last-level cache share of one core) store
 * with non-temporal stores: the in-place write-back then streams to memory like memcpy's
 * large-copy path instead of evicting dirty lines one by one. Non-temporal stores need
 * 32-byte alignment, so the elements before the first aligned address go to the scalar path
 * (never more than one vector); a buffer not even aligned to its element size keeps ordinary
 * stores. An sfence at the end orders the streamed stores before the function returns.
 */
#define STREAM_MIN_BYTES ((size_t)16 << 20)

static size_t stream_head(const void *x, size_t n, size_t es, bool *stream)
{
    uintptr_t a = (uintptr_t)x;
    *stream = false;
    if (n < STREAM_MIN_BYTES / es || a % es) return 0;
    *stream = true;
    return ((32 - a % 32) % 32) / es;
}

static inline void store256(void *q, __m256i v, bool stream)
{
    if (stream)
        MXP__STREAM256((__m256i *)q, v);
    else
        _mm256_storeu_si256((__m256i *)q, v);
}

static bool unscale_f32(void *x, size_t n, float inv)
{
    mxp__unscale_fn scalar = mxp__scalar_kernels()->unscale_check[MXP_FLOAT32];
    uint32_t thr;
    if (!fast_setup(inv, &thr)) return scalar(x, n, inv);
    const __m256i thr_m1 = _mm256_set1_epi32((int)((thr - 1u) ^ 0x80000000u));
    unsigned char *p = x;
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
    __m256i acc = _mm256_setzero_si256();
    bool stream;
    size_t i = stream_head(x, n, 4, &stream);
    bool ok = i ? scalar(x, i, inv) : true;
    for (; i + 16 <= n; i += 16) {
        float *q = (float *)(void *)(p + 4 * i);
        __m256i v0 = _mm256_loadu_si256((const __m256i *)q);
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(q + 8));
        __m256i t = _mm256_or_si256(tiny_lanes(v0, thr_m1), tiny_lanes(v1, thr_m1));
        if (!_mm256_testz_si256(t, t)) {
            ok &= scalar(q, 16, inv);
            continue;
        }
        __m256 y0 = _mm256_mul_ps(_mm256_castsi256_ps(v0), vinv);
        __m256 y1 = _mm256_mul_ps(_mm256_castsi256_ps(v1), vinv);
        store256(q, _mm256_castps_si256(y0), stream);
        store256(q + 8, _mm256_castps_si256(y1), stream);
        acc = _mm256_max_epu32(acc, _mm256_and_si256(_mm256_castps_si256(y0), abs));
        acc = _mm256_max_epu32(acc, _mm256_and_si256(_mm256_castps_si256(y1), abs));
    }
    /* inv is finite and nonzero: a non-finite input gives a non-finite product */
    if (stream) _mm_sfence();
    const __m256i lim = _mm256_set1_epi32(0x7F7FFFFF);
    ok &= _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu32(acc, lim), lim)) == -1;
    if (i < n) ok &= scalar(p + 4 * i, n - i, inv);
    return ok;
}

/* float32 bits -> bfloat16 in the low half of each 32-bit lane, nearest-even. y is never NaN
 * here (NaN inputs go to the scalar path; a non-NaN x times a finite nonzero inv is not NaN);
 * inf and overflow carry into 0x7F80 by themselves. */
static inline __m256i round_bf16(__m256 yf)
{
    __m256i y = _mm256_castps_si256(yf);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(y, 16), _mm256_set1_epi32(1));
    return _mm256_srli_epi32(_mm256_add_epi32(y, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb)), 16);
}

static bool unscale_bf16(void *x, size_t n, float inv)
{
    mxp__unscale_fn scalar = mxp__scalar_kernels()->unscale_check[MXP_BFLOAT16];
    uint32_t thr;
    if (!fast_setup(inv, &thr)) return scalar(x, n, inv);
    /* lanes for the scalar path, tested on the 16-bit values: tiny ones, 0 < |b| << 16 < thr
     * <=> 0 <= |b| - 1 <= t16 with t16 = ((thr - 1) >> 16) - 1 (thr >= 0x00800000, so
     * t16 >= 0x7E), and NaNs, |b| > 0x7F80 (rare; the vector path then needs no NaN fix-up) */
    const __m256i t16 = _mm256_set1_epi16((short)(((thr - 1u) >> 16) - 1u));
    unsigned char *p = x;
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i zero = _mm256_setzero_si256(), abs16 = _mm256_set1_epi16(0x7FFF),
                  one16 = _mm256_set1_epi16(1), inf16 = _mm256_set1_epi16(0x7F80);
    __m256i acc = zero;
    bool stream;
    size_t i = stream_head(x, n, 2, &stream);
    bool ok = i ? scalar(x, i, inv) : true;
    for (; i + 16 <= n; i += 16) {
        unsigned char *q = p + 2 * i;
        __m256i v = _mm256_loadu_si256((const __m256i *)q);
        __m256i b = _mm256_and_si256(v, abs16), a = _mm256_sub_epi16(b, one16);
        __m256i t = _mm256_or_si256(_mm256_cmpeq_epi16(_mm256_min_epu16(a, t16), a),
                                    _mm256_cmpgt_epi16(b, inf16));
        if (!_mm256_testz_si256(t, t)) {
            ok &= scalar(q, 16, inv);
            continue;
        }
        /* bfloat16 is the top half of float32: interleave zeros below (in-lane order,
         * undone by the in-lane pack below) */
        __m256 lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v));
        __m256 hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v));
        __m256i out = _mm256_packus_epi32(round_bf16(_mm256_mul_ps(lo, vinv)),
                                          round_bf16(_mm256_mul_ps(hi, vinv)));
        store256(q, out, stream);
        acc = _mm256_max_epu16(acc, _mm256_and_si256(out, abs16));
    }
    if (stream) _mm_sfence();
    const __m256i lim = _mm256_set1_epi16(0x7F7F);
    ok &= _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu16(acc, lim), lim)) == -1;
    if (i < n) ok &= scalar(p + 2 * i, n - i, inv);
    return ok;
}

static bool unscale_f16(void *x, size_t n, float inv)
{
    mxp__unscale_fn scalar = mxp__scalar_kernels()->unscale_check[MXP_FLOAT16];
    uint32_t ib;
    memcpy(&ib, &inv, 4);
    uint32_t ie = (ib >> 23) & 0xFF;
    if (ie == 0 || ie == 0xFF || !mxp__unscale_hw_ok()) return scalar(x, n, inv);
    unsigned char *p = x;
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256 keep_nan = _mm256_castsi256_ps(_mm256_set1_epi32((int)0xFFC00000u));
    const __m256i abs16 = _mm256_set1_epi16(0x7FFF);
    __m256i acc = _mm256_setzero_si256();
    bool stream;
    size_t i = stream_head(x, n, 2, &stream);
    bool ok = i ? scalar(x, i, inv) : true;
    for (; i + 16 <= n; i += 16) {
        unsigned char *q = p + 2 * i;
        __m256 y0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)q)), vinv);
        __m256 y1 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(q + 16))), vinv);
        /* NaN lanes -> sign | 0x7FC00000 (products are quiet NaNs, so an AND does it) */
        y0 = _mm256_blendv_ps(y0, _mm256_and_ps(y0, keep_nan), _mm256_cmp_ps(y0, y0, _CMP_UNORD_Q));
        y1 = _mm256_blendv_ps(y1, _mm256_and_ps(y1, keep_nan), _mm256_cmp_ps(y1, y1, _CMP_UNORD_Q));
        __m128i h0 = _mm256_cvtps_ph(y0, _MM_FROUND_TO_NEAREST_INT);
        __m128i h1 = _mm256_cvtps_ph(y1, _MM_FROUND_TO_NEAREST_INT);
        __m256i out = _mm256_set_m128i(h1, h0);
        store256(q, out, stream);
        acc = _mm256_max_epu16(acc, _mm256_and_si256(out, abs16));
    }
    if (stream) _mm_sfence();
    const __m256i lim = _mm256_set1_epi16(0x7BFF);
    ok &= _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu16(acc, lim), lim)) == -1;
    if (i < n) ok &= scalar(p + 2 * i, n - i, inv);
    return ok;
}

/* ---- unscale_into: float32 / bfloat16 / float16 scaled gradients -> float32 ---------------- */

/*
 * The destination is written once and not read, so large passes stream it (non-temporal
 * stores, like memcpy's large-copy path: no read-for-ownership of the destination lines); the
 * source is only read. Same threshold and head handling as above, on the destination address.
 * NaN lanes need no fix-up here: the product of a NaN lane and a finite nonzero inv is that
 * NaN quieted (sign and payload kept), as the scalar rule says, and the widenings below keep
 * payloads (vcvtph2ps moves a float16 payload up 13 bits, bfloat16 is shifted into place).
 * Tiny lanes (0 < |widened x| < threshold, finite.h) could be subnormal inputs (bfloat16) or
 * give subnormal products that FTZ would flush: their 16-element block goes to the scalar
 * reference. float16 values widen to normal float32 (>= 2^-24), so there only products can be
 * tiny, which takes inv below 2^-100 (a loss scale above 2^100).
 */
static inline void store_f32x8(unsigned char *q, __m256 v, bool stream)
{
    store256(q, _mm256_castps_si256(v), stream);
}

/* Store 16 float32 results (y0 at q, y1 at q + 32) and fold their magnitudes into acc, the
 * running unsigned max of |bits| that folded_finite checks once at the end. */
static inline __m256i store2_fold(unsigned char *q, __m256 y0, __m256 y1, bool stream, __m256i acc)
{
    const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
    store_f32x8(q, y0, stream);
    store_f32x8(q + 32, y1, stream);
    acc = _mm256_max_epu32(acc, _mm256_and_si256(_mm256_castps_si256(y0), abs));
    return _mm256_max_epu32(acc, _mm256_and_si256(_mm256_castps_si256(y1), abs));
}

/* True when every folded magnitude is at most FLT_MAX's bits (no inf, no NaN was stored). */
static inline bool folded_finite(__m256i acc)
{
    const __m256i lim = _mm256_set1_epi32(0x7F7FFFFF);
    return _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu32(acc, lim), lim)) == -1;
}

static bool into_f32(void *dst, const void *src, size_t n, float inv)
{
    mxp__unscale_into_fn scalar = mxp__scalar_kernels()->unscale_into[MXP_FLOAT32];
    uint32_t thr;
    if (!fast_setup(inv, &thr)) return scalar(dst, src, n, inv);
    const __m256i thr_m1 = _mm256_set1_epi32((int)((thr - 1u) ^ 0x80000000u));
    const unsigned char *s = src;
    unsigned char *d = dst;
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i acc = _mm256_setzero_si256();
    bool stream;
    size_t i = stream_head(dst, n, 4, &stream);
    bool ok = i ? scalar(dst, src, i, inv) : true;
    for (; i + 16 <= n; i += 16) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(s + 4 * i));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(s + 4 * i + 32));
        __m256i t = _mm256_or_si256(tiny_lanes(v0, thr_m1), tiny_lanes(v1, thr_m1));
        if (!_mm256_testz_si256(t, t)) {
            ok &= scalar(d + 4 * i, s + 4 * i, 16, inv);
            continue;
        }
        __m256 y0 = _mm256_mul_ps(_mm256_castsi256_ps(v0), vinv);
        __m256 y1 = _mm256_mul_ps(_mm256_castsi256_ps(v1), vinv);
        acc = store2_fold(d + 4 * i, y0, y1, stream, acc);
    }
    if (stream) _mm_sfence();
    ok &= folded_finite(acc);
    if (i < n) ok &= scalar(d + 4 * i, s + 4 * i, n - i, inv);
    return ok;
}

static bool into_bf16(void *dst, const void *src, size_t n, float inv)
{
    mxp__unscale_into_fn scalar = mxp__scalar_kernels()->unscale_into[MXP_BFLOAT16];
    uint32_t thr;
    if (!fast_setup(inv, &thr)) return scalar(dst, src, n, inv);
    /* tiny lanes on the 16-bit values: 0 <= |b| - 1 <= t16 (see unscale_bf16) */
    const __m256i t16 = _mm256_set1_epi16((short)(((thr - 1u) >> 16) - 1u));
    const unsigned char *s = src;
    unsigned char *d = dst;
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i abs16 = _mm256_set1_epi16(0x7FFF), one16 = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
    bool stream;
    size_t i = stream_head(dst, n, 4, &stream);
    bool ok = i ? scalar(dst, src, i, inv) : true;
    for (; i + 16 <= n; i += 16) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(s + 2 * i));
        __m256i a = _mm256_sub_epi16(_mm256_and_si256(v, abs16), one16);
        __m256i t = _mm256_cmpeq_epi16(_mm256_min_epu16(a, t16), a);
        if (!_mm256_testz_si256(t, t)) {
            ok &= scalar(d + 4 * i, s + 2 * i, 16, inv);
            continue;
        }
        /* bfloat16 -> float32, in order: zero-extend 8 lanes to 32 bits, shift into the top half */
        __m256 x0 = _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(v)), 16));
        __m256 x1 = _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(v, 1)), 16));
        __m256 y0 = _mm256_mul_ps(x0, vinv), y1 = _mm256_mul_ps(x1, vinv);
        acc = store2_fold(d + 4 * i, y0, y1, stream, acc);
    }
    if (stream) _mm_sfence();
    ok &= folded_finite(acc);
    if (i < n) ok &= scalar(d + 4 * i, s + 2 * i, n - i, inv);
    return ok;
}

static bool into_f16(void *dst, const void *src, size_t n, float inv)
{
    mxp__unscale_into_fn scalar = mxp__scalar_kernels()->unscale_into[MXP_FLOAT16];
    uint32_t thr;
    if (!fast_setup(inv, &thr)) return scalar(dst, src, n, inv);
    const bool check_tiny = thr > 0x33800000u; /* 2^-24, the smallest float16 magnitude */
    const __m256i thr_m1 = _mm256_set1_epi32((int)((thr - 1u) ^ 0x80000000u));
    const unsigned char *s = src;
    unsigned char *d = dst;
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i acc = _mm256_setzero_si256();
    bool stream;
    size_t i = stream_head(dst, n, 4, &stream);
    bool ok = i ? scalar(dst, src, i, inv) : true;
    for (; i + 16 <= n; i += 16) {
        __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i)));
        __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i + 16)));
        if (check_tiny) {
            __m256i t = _mm256_or_si256(tiny_lanes(_mm256_castps_si256(x0), thr_m1),
                                        tiny_lanes(_mm256_castps_si256(x1), thr_m1));
            if (!_mm256_testz_si256(t, t)) {
                ok &= scalar(d + 4 * i, s + 2 * i, 16, inv);
                continue;
            }
        }
        __m256 y0 = _mm256_mul_ps(x0, vinv), y1 = _mm256_mul_ps(x1, vinv);
        acc = store2_fold(d + 4 * i, y0, y1, stream, acc);
    }
    if (stream) _mm_sfence();
    ok &= folded_finite(acc);
    if (i < n) ok &= scalar(d + 4 * i, s + 2 * i, n - i, inv);
    return ok;
}

void mxp__finite_register_avx2(mxp__kernels *k)
{
    k->all_finite[MXP_FLOAT64] = all_finite_f64;
    k->all_finite[MXP_FLOAT32] = all_finite_f32;
    k->all_finite[MXP_FLOAT16] = all_finite_f16;
    k->all_finite[MXP_BFLOAT16] = all_finite_bf16;
    k->all_finite[MXP_FLOAT8_E4M3FN] = all_finite_e4m3;
    k->all_finite[MXP_FLOAT8_E5M2] = all_finite_e5m2;
    k->unscale_check[MXP_FLOAT32] = unscale_f32;
    k->unscale_check[MXP_FLOAT16] = unscale_f16;
    k->unscale_check[MXP_BFLOAT16] = unscale_bf16;
    k->unscale_into[MXP_FLOAT32] = into_f32;
    k->unscale_into[MXP_FLOAT16] = into_f16;
    k->unscale_into[MXP_BFLOAT16] = into_bf16;
}
