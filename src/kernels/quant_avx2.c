/*
 * quant_avx2.c - the quantization kernels (quant_kernels.h) for AVX2, 8 float32 lanes.
 *
 * Each kernel is the scalar reference's loop (quant_scalar.c) on 32 elements per step, with
 * the same operations in the same order, so the results are the same bits:
 *   - magnitude maxima: VPAND with 0x7FFFFFFF, then VPMAXUD (unsigned integer max of the bit
 *     patterns, as the reference's integer compare);
 *   - x * s: VMULPS (one float32 rounding, nearest even in the environment quant.c sets);
 *   - clamp then round: VMAXPS / VMINPS against lo / hi (inputs are finite: no NaN ordering
 *     question), then VCVTPS2DQ, which rounds with MXCSR's mode, i.e. nearest even, exactly
 *     the reference's tie rule; two saturating packs (VPACKSSDW, VPACKSSWB) narrow the already
 *     clamped int32 lanes to bytes, and a VPERMD puts the 128-bit lanes back in order:
 *         after the packs, dwords hold  a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
 *         permutation 0 4 1 5 2 6 3 7 gives a0-7 b0-7 c0-7 d0-7;
 *   - MX blocks: the block maximum by the same integer max, then the shared scalar
 *     mxp__mx_e8m0 / mxp__mx_inv for the exponent and the multiplier.
 * Tails (fewer than a full step) go to the scalar reference.
 */
#include <immintrin.h>
#include <string.h>

#include "quant_kernels.h"

static mxp__qkernels ref;

/* How far ahead of the streaming loops the source is prefetched (the delayed-scaling pass reads
 * its input exactly once, so nothing else brings it in early). */
enum { PREFETCH_BYTES = 2048 }; /* the scalar reference, for tails (filled at registration) */

static inline uint32_t hmax_epu32(__m256i v)
{
    __m128i a = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    a = _mm_max_epu32(a, _mm_shuffle_epi32(a, 0x4E));
    a = _mm_max_epu32(a, _mm_shuffle_epi32(a, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(a);
}

static inline __m256i mag(__m256 x) { return _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7FFFFFFF)); }

static uint32_t amax_bits_avx2(const float *x, size_t n)
{
    __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_epu32(m0, mag(_mm256_loadu_ps(x + i)));
        m1 = _mm256_max_epu32(m1, mag(_mm256_loadu_ps(x + i + 8)));
        m2 = _mm256_max_epu32(m2, mag(_mm256_loadu_ps(x + i + 16)));
        m3 = _mm256_max_epu32(m3, mag(_mm256_loadu_ps(x + i + 24)));
    }
    for (; i + 8 <= n; i += 8) m0 = _mm256_max_epu32(m0, mag(_mm256_loadu_ps(x + i)));
    const uint32_t v = hmax_epu32(_mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3)));
    const uint32_t t = ref.amax_bits(x + i, n - i);
    return v > t ? v : t;
}

static void amax_cols_avx2(float *acc, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(acc + i));
        _mm256_storeu_si256((__m256i *)(void *)(acc + i), _mm256_max_epu32(a, mag(_mm256_loadu_ps(x + i))));
    }
    ref.amax_cols(acc + i, x + i, n - i);
}

/* 32 clamped float32 lanes (already rounded-to-be) -> 32 int8 at q. */
static inline void store32(int8_t *q, __m256 y0, __m256 y1, __m256 y2, __m256 y3)
{
    const __m256i p01 = _mm256_packs_epi32(_mm256_cvtps_epi32(y0), _mm256_cvtps_epi32(y1));
    const __m256i p23 = _mm256_packs_epi32(_mm256_cvtps_epi32(y2), _mm256_cvtps_epi32(y3));
    const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23),
                                                  _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)q, b);
}

#define CLAMP(v) _mm256_min_ps(_mm256_max_ps((v), vlo), vhi)

static void cast_int_avx2(int8_t *q, const float *x, size_t n, float s, int lo, int hi)
{
    const __m256 vs = _mm256_set1_ps(s), vlo = _mm256_set1_ps((float)lo), vhi = _mm256_set1_ps((float)hi);
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        store32(q + i, CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs)),
                CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vs)),
                CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), vs)),
                CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), vs)));
    ref.cast_int(q + i, x + i, n - i, s, lo, hi);
}

static void cast_int_v_avx2(int8_t *q, const float *x, const float *s, size_t n, int lo, int hi)
{
    const __m256 vlo = _mm256_set1_ps((float)lo), vhi = _mm256_set1_ps((float)hi);
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        store32(q + i, CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(s + i))),
                CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(s + i + 8))),
                CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(s + i + 16))),
                CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(s + i + 24))));
    ref.cast_int_v(q + i, x + i, s + i, n - i, lo, hi);
}

static uint32_t mul_amax_avx2(float *y, const float *x, size_t n, float s)
{
    const __m256 vs = _mm256_set1_ps(s);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm_prefetch((const char *)(x + i) + PREFETCH_BYTES, _MM_HINT_T0); /* never faults */
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        m0 = _mm256_max_epu32(m0, mag(a));
        m1 = _mm256_max_epu32(m1, mag(b));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(a, vs));
        _mm256_storeu_ps(y + i + 8, _mm256_mul_ps(b, vs));
    }
    const uint32_t v = hmax_epu32(_mm256_max_epu32(m0, m1));
    const uint32_t t = ref.mul_amax(y + i, x + i, n - i, s);
    return v > t ? v : t;
}

static void mul_v_avx2(float *y, const float *x, const float *s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(s + i)));
    ref.mul_v(y + i, x + i, s + i, n - i);
}

static void mx_scale_avx2(float *y, uint8_t *e, const float *x, size_t n, int e5m2, int floor_rule)
{
    size_t b = 0;
    for (; b + 32 <= n; b += 32) {
        const __m256 a0 = _mm256_loadu_ps(x + b), a1 = _mm256_loadu_ps(x + b + 8),
                     a2 = _mm256_loadu_ps(x + b + 16), a3 = _mm256_loadu_ps(x + b + 24);
        const __m256i m = _mm256_max_epu32(_mm256_max_epu32(mag(a0), mag(a1)), _mm256_max_epu32(mag(a2), mag(a3)));
        const uint8_t eb = mxp__mx_e8m0(hmax_epu32(m), e5m2, floor_rule);
        e[b / 32] = eb;
        const __m256 vs = _mm256_set1_ps(mxp__mx_inv(eb));
        _mm256_storeu_ps(y + b, _mm256_mul_ps(a0, vs));
        _mm256_storeu_ps(y + b + 8, _mm256_mul_ps(a1, vs));
        _mm256_storeu_ps(y + b + 16, _mm256_mul_ps(a2, vs));
        _mm256_storeu_ps(y + b + 24, _mm256_mul_ps(a3, vs));
    }
    ref.mx_scale(y + b, e + b / 32, x + b, n - b, e5m2, floor_rule);
}

static void store_nt_avx2(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (32 - ((uintptr_t)d & 31)) & 31;
    if (head > n) head = n;
    memcpy(d, s, head);
    size_t i = head;
    for (; i + 32 <= n; i += 32)
        _mm256_stream_si256((__m256i *)(void *)(d + i), _mm256_loadu_si256((const __m256i *)(const void *)(s + i)));
    memcpy(d + i, s + i, n - i);
}

static void store_fence_avx2(void) { _mm_sfence(); }

void mxp__quant_register_avx2(mxp__qkernels *k)
{
    k->store_nt = store_nt_avx2;
    k->store_fence = store_fence_avx2;
    ref = *k; /* still the scalar entries (quant_scalar.c registers them first) */
    k->amax_bits = amax_bits_avx2;
    k->amax_cols = amax_cols_avx2;
    k->cast_int = cast_int_avx2;
    k->cast_int_v = cast_int_v_avx2;
    k->mul_amax = mul_amax_avx2;
    k->mul_v = mul_v_avx2;
    k->mx_scale = mx_scale_avx2;
}
