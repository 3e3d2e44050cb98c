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
#include "nt_store.h"

static mxp__qkernels ref; /* the scalar reference, for tails (filled at registration) */

/* How far ahead of the streaming loops the source is prefetched (the delayed-scaling pass reads
 * its input exactly once, so nothing else brings it in early). */
enum { PREFETCH_BYTES = 2048 };

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

/* Prefetch distance of the group kernels: the same offset in the next group (quant.c walks
 * groups in memory order, and a group is first read by its amax pass, which then finds it in
 * the cache while this group's cast runs from L1); for long runs (one group, delayed scaling)
 * a fixed distance ahead. */
static inline size_t group_prefetch(size_t n) { return n <= 16384 ? 4 * n : PREFETCH_BYTES; }

static void cast_int_avx2(int8_t *q, const float *x, size_t n, float s, int lo, int hi, int pf_hint)
{
    (void)pf_hint; /* the group prefetch either way (quant_kernels.h) */
    const __m256 vs = _mm256_set1_ps(s), vlo = _mm256_set1_ps((float)lo), vhi = _mm256_set1_ps((float)hi);
    const size_t pf = group_prefetch(n);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm_prefetch((const char *)(x + i) + pf, _MM_HINT_T0); /* never faults */
        _mm_prefetch((const char *)(x + i) + pf + 64, _MM_HINT_T0);
        store32(q + i, CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs)),
                CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vs)),
                CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), vs)),
                CLAMP(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), vs)));
    }
    ref.cast_int(q + i, x + i, n - i, s, lo, hi, 0);
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

static void mul_v_avx2(float *y, const float *x, const float *s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(s + i)));
    ref.mul_v(y + i, x + i, s + i, n - i);
}

/*
 * Fused float8 encode of 8 finite-or-infinite float32 products y (NaN lanes are the caller's):
 * with a = |y| as bits, clamped to the bits of the max finite value (saturation; an integer min
 * on magnitudes, so +-inf clamps too), then
 *   normal range (a >= bits of 2^(1 - bias)): round the float32 pattern to M mantissa bits with
 *     ties to even in the integer domain (add half - 1 plus the lowest kept bit, shift; a carry
 *     moves into the exponent, which is the right next value) and rebias the exponent;
 *   subnormal range: a + 2^(1 - bias - M + 23) in float32 arithmetic, whose ulp is the
 *     float8's smallest subnormal, rounds a to a multiple of it with ties to even (MXCSR is in
 *     nearest-even, no DAZ: quant.c sets it); the low bits of the sum are the code, and a value
 *     that rounds up to 2^(1 - bias) gives the smallest normal's code, as it must;
 * then the sign goes into bit 7. Clamping before rounding is the same as saturating after it:
 * rounding is monotone and the max is representable.
 */
#if defined(__GNUC__) || defined(__clang__)
#define QINLINE inline __attribute__((always_inline))
#else
#define QINLINE inline
#endif

/* e5m2 is a constant wherever this is inlined (the loops below are instantiated per format),
 * so the shifts are immediates and the constants need no registers of their own. */
static QINLINE __m256i f8_code(__m256 y, const int e5m2)
{
    /* Vector shifts issue on fewer pipes than adds and logic (Zen 3: two of four), so this
     * uses three per 8 lanes: the kept bit, the normal code, the sign. */
    const int m = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, shift = 23 - m;
    const __m256i yb = _mm256_castps_si256(y);
    const __m256i a = _mm256_min_epu32(mag(y), _mm256_set1_epi32(e5m2 ? 0x47600000 : 0x43E00000)); /* 57344 / 448 */
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(a, shift), _mm256_set1_epi32(1));
    /* half - 1 and the exponent rebias in one constant: (a + half - 1 + odd - rebias') >> shift */
    const __m256i nrm = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(a, _mm256_set1_epi32((1 << (shift - 1)) - 1 - ((127 - bias) << 23))), odd),
        shift);
    const __m256 magic = _mm256_castsi256_ps(_mm256_set1_epi32((127 + 1 - bias - m + 23) << 23));
    const __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), magic)),
                                         _mm256_castps_si256(magic));
    /* a - 2^(1 - bias) is negative exactly for the subnormal lanes (both below 2^31): its sign
     * bit picks them (BLENDVPS reads only the sign bit) */
    const __m256 tiny = _mm256_castsi256_ps(_mm256_sub_epi32(a, _mm256_set1_epi32((127 + 1 - bias) << 23)));
    const __m256i code = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(nrm), _mm256_castsi256_ps(sub), tiny));
    return _mm256_or_si256(code, _mm256_srli_epi32(_mm256_and_si256(yb, _mm256_set1_epi32((int)0x80000000u)), 24));
}

/* 4 x 8 codes (each 0..255) -> 32 bytes in order. */
static inline __m256i f8_pack(__m256i c0, __m256i c1, __m256i c2, __m256i c3)
{
    const __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline int any_nan(__m256 y0, __m256 y1, __m256 y2, __m256 y3)
{
    const __m256 u = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(y0, y0, _CMP_UNORD_Q), _mm256_cmp_ps(y1, y1, _CMP_UNORD_Q)),
                                  _mm256_or_ps(_mm256_cmp_ps(y2, y2, _CMP_UNORD_Q), _mm256_cmp_ps(y3, y3, _CMP_UNORD_Q)));
    return _mm256_movemask_ps(u) != 0;
}

static const mxp__cvt_args SAT = {true, 0, 0, false};

/* Elements the vector loop does not take (an unaligned head before streaming, the tail). */
static uint32_t fp8_encode_part(uint8_t *q, const float *x, size_t n, float s, mxp__cvt_fn slow)
{
    float y[32];
    uint32_t m = 0;
    for (size_t b = 0; b < n; b += 32) {
        const size_t len = n - b < 32 ? n - b : 32;
        const uint32_t a = ref.mul_amax(y, x + b, len, s);
        m = a > m ? a : m;
        slow(q + b, y, len, &SAT);
    }
    return m;
}

static QINLINE uint32_t fp8_encode_loop(uint8_t *q, const float *x, size_t n, float s, const int e5m2, int nt,
                                        mxp__cvt_fn slow)
{
    size_t i = 0;
    uint32_t head_amax = 0;
    if (nt) {
        i = (32 - ((uintptr_t)q & 31)) & 31;
        if (i > n) i = n;
        head_amax = fp8_encode_part(q, x, i, s, slow);
    }
    const __m256 vs = _mm256_set1_ps(s);
    const size_t pf = group_prefetch(n);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    for (; i + 32 <= n; i += 32) {
        _mm_prefetch((const char *)(x + i) + pf, _MM_HINT_T0); /* never faults */
        _mm_prefetch((const char *)(x + i) + pf + 64, _MM_HINT_T0);
        const __m256 a0 = _mm256_loadu_ps(x + i), a1 = _mm256_loadu_ps(x + i + 8),
                     a2 = _mm256_loadu_ps(x + i + 16), a3 = _mm256_loadu_ps(x + i + 24);
        m0 = _mm256_max_epu32(m0, _mm256_max_epu32(mag(a0), mag(a1)));
        m1 = _mm256_max_epu32(m1, _mm256_max_epu32(mag(a2), mag(a3)));
        const __m256 y0 = _mm256_mul_ps(a0, vs), y1 = _mm256_mul_ps(a1, vs), y2 = _mm256_mul_ps(a2, vs),
                     y3 = _mm256_mul_ps(a3, vs);
        if (any_nan(y0, y1, y2, y3)) { /* rare: the conversion kernel's NaN patterns */
            float y[32];
            _mm256_storeu_ps(y, y0);
            _mm256_storeu_ps(y + 8, y1);
            _mm256_storeu_ps(y + 16, y2);
            _mm256_storeu_ps(y + 24, y3);
            slow(q + i, y, 32, &SAT);
            continue;
        }
        const __m256i b = f8_pack(f8_code(y0, e5m2), f8_code(y1, e5m2), f8_code(y2, e5m2), f8_code(y3, e5m2));
        if (nt) MXP__STREAM256((__m256i *)(void *)(q + i), b);
        else _mm256_storeu_si256((__m256i *)(void *)(q + i), b);
    }
    uint32_t v = hmax_epu32(_mm256_max_epu32(m0, m1));
    v = head_amax > v ? head_amax : v;
    const uint32_t t = fp8_encode_part(q + i, x + i, n - i, s, slow);
    return v > t ? v : t;
}

/* The E8M0 exponent of one MX block of 32 floats at x, and 1 / X as a float32: mxp__mx_e8m0
 * and mxp__mx_inv, with the normal-amax case (every block of nonzero normal data) computed in
 * the vector unit without a data-dependent branch: e = biased exponent - emax (+1 under RCEIL
 * when the significand is above 1.75), at least 0 (at most 247 from a finite float32);
 * 1 / X = 2^(127 - e). */
static QINLINE float mx_block_scale(const float *x, uint8_t *e, const int e5m2, int floor_rule)
{
    __m256i m = _mm256_max_epu32(_mm256_max_epu32(mag(_mm256_loadu_ps(x)), mag(_mm256_loadu_ps(x + 8))),
                                 _mm256_max_epu32(mag(_mm256_loadu_ps(x + 16)), mag(_mm256_loadu_ps(x + 24))));
    m = _mm256_max_epu32(m, _mm256_permute2x128_si256(m, m, 1)); /* the max in every lane */
    m = _mm256_max_epu32(m, _mm256_shuffle_epi32(m, 0x4E));
    m = _mm256_max_epu32(m, _mm256_shuffle_epi32(m, 0xB1));
    const __m128i m4 = _mm256_castsi256_si128(m);
    const uint32_t am = (uint32_t)_mm_cvtsi128_si32(m4);
    if (__builtin_expect(am < 0x00800000u, 0)) { /* zero or a float32-subnormal amax */
        *e = mxp__mx_e8m0(am, e5m2, floor_rule);
        return mxp__mx_inv(*e);
    }
    __m128i ev = _mm_sub_epi32(_mm_srli_epi32(m4, 23), _mm_set1_epi32(e5m2 ? 15 : 8));
    if (!floor_rule)
        ev = _mm_sub_epi32(ev, _mm_cmpgt_epi32(_mm_and_si128(m4, _mm_set1_epi32(0x7FFFFF)), _mm_set1_epi32(0x600000)));
    ev = _mm_max_epi32(ev, _mm_setzero_si128());
    *e = (uint8_t)_mm_cvtsi128_si32(ev);
    return _mm_cvtss_f32(_mm_castsi128_ps(_mm_slli_epi32(_mm_sub_epi32(_mm_set1_epi32(254), ev), 23)));
}

static QINLINE __m256i mx_block_codes(const float *x, float inv, const int e5m2)
{
    const __m256 vs = _mm256_set1_ps(inv);
    return f8_pack(f8_code(_mm256_mul_ps(_mm256_loadu_ps(x), vs), e5m2),
                   f8_code(_mm256_mul_ps(_mm256_loadu_ps(x + 8), vs), e5m2),
                   f8_code(_mm256_mul_ps(_mm256_loadu_ps(x + 16), vs), e5m2),
                   f8_code(_mm256_mul_ps(_mm256_loadu_ps(x + 24), vs), e5m2));
}

/*
 * The same under RCEIL, where the block scale bounds every |y| by the largest finite value (no
 * saturation min): when no lane of the block is below the float8 normal range (one compare per
 * vector, a MOVMSKPS for the block), the normal-range code alone on the magnitude a, the sign
 * ORed in: 10 operations per 8 lanes instead of f8_code's 14; otherwise f8_code.
 */
static QINLINE __m256i mx_normal(__m256i a, __m256i u, const int e5m2)
{
    const int m = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, shift = 23 - m;
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(a, shift), _mm256_set1_epi32(1));
    const __m256i nrm = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(a, _mm256_set1_epi32((1 << (shift - 1)) - 1 - ((127 - bias) << 23))), odd),
        shift);
    return _mm256_or_si256(nrm, _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80)));
}
static QINLINE __m256i mx_block_codes_rceil(const float *x, float inv, const int e5m2)
{
    const int bias = e5m2 ? 15 : 7;
    const __m256 vs = _mm256_set1_ps(inv);
    const __m256 y0 = _mm256_mul_ps(_mm256_loadu_ps(x), vs), y1 = _mm256_mul_ps(_mm256_loadu_ps(x + 8), vs),
                 y2 = _mm256_mul_ps(_mm256_loadu_ps(x + 16), vs), y3 = _mm256_mul_ps(_mm256_loadu_ps(x + 24), vs);
    const __m256i a0 = mag(y0), a1 = mag(y1), a2 = mag(y2), a3 = mag(y3);
    const __m256i lo = _mm256_set1_epi32((127 + 1 - bias) << 23); /* a, lo < 2^31: a signed compare */
    const __m256i t = _mm256_or_si256(_mm256_or_si256(_mm256_cmpgt_epi32(lo, a0), _mm256_cmpgt_epi32(lo, a1)),
                                      _mm256_or_si256(_mm256_cmpgt_epi32(lo, a2), _mm256_cmpgt_epi32(lo, a3)));
    if (__builtin_expect(_mm256_movemask_ps(_mm256_castsi256_ps(t)) == 0, 1))
        return f8_pack(mx_normal(a0, _mm256_castps_si256(y0), e5m2), mx_normal(a1, _mm256_castps_si256(y1), e5m2),
                       mx_normal(a2, _mm256_castps_si256(y2), e5m2), mx_normal(a3, _mm256_castps_si256(y3), e5m2));
    return f8_pack(f8_code(y0, e5m2), f8_code(y1, e5m2), f8_code(y2, e5m2), f8_code(y3, e5m2));
}

/*
 * MX in runs of 8 blocks: first the 8 scales (8 independent short chains: block max, horizontal
 * max, exponent), then the 8 blocks' casts from L1. Done block by block, each block's chain
 * (load, reductions, exponent, multiply, encode, pack: about 45 cycles of latency) was longer
 * than the out-of-order window could hide, and the loop ran at half the speed of its
 * instruction count.
 */
static QINLINE void mx_encode_loop(uint8_t *q, uint8_t *e, const float *x, size_t n, const int e5m2,
                                   const int floor_rule, int nt, mxp__cvt_fn slow)
{
    enum { RUN = 8 };
    const size_t pf = group_prefetch(n);
    size_t b = 0;
    for (; b + RUN * 32 <= n; b += RUN * 32) {
        for (size_t o = 0; o < RUN * 32 * 4; o += 64) _mm_prefetch((const char *)(x + b) + pf + o, _MM_HINT_T0);
        float inv[RUN];
        for (int k = 0; k < RUN; k++) inv[k] = mx_block_scale(x + b + 32 * k, e + b / 32 + k, e5m2, floor_rule);
        for (int k = 0; k < RUN; k++) {
            const __m256i v = floor_rule ? mx_block_codes(x + b + 32 * k, inv[k], e5m2)
                                         : mx_block_codes_rceil(x + b + 32 * k, inv[k], e5m2);
            unsigned char *d = q + b + 32 * k;
            if (nt && ((uintptr_t)d & 31) == 0) MXP__STREAM256((__m256i *)(void *)d, v);
            else _mm256_storeu_si256((__m256i *)(void *)d, v);
        }
    }
    for (; b + 32 <= n; b += 32) {
        const __m256i v = mx_block_codes(x + b, mx_block_scale(x + b, e + b / 32, e5m2, floor_rule), e5m2);
        if (nt && ((uintptr_t)(q + b) & 31) == 0) MXP__STREAM256((__m256i *)(void *)(q + b), v);
        else _mm256_storeu_si256((__m256i *)(void *)(q + b), v);
    }
    if (b < n) {
        float y[32];
        ref.mx_scale(y, e + b / 32, x + b, n - b, e5m2, floor_rule);
        slow(q + b, y, n - b, &SAT);
    }
}

static uint32_t fp8_encode_avx2(uint8_t *q, const float *x, size_t n, float s, int e5m2, int nt,
                                mxp__cvt_fn slow)
{
    return e5m2 ? fp8_encode_loop(q, x, n, s, 1, nt, slow) : fp8_encode_loop(q, x, n, s, 0, nt, slow);
}

static void mx_encode_avx2(uint8_t *q, uint8_t *e, const float *x, size_t n, int e5m2, int floor_rule,
                           int nt, mxp__cvt_fn slow)
{
    if (floor_rule) {
        if (e5m2) mx_encode_loop(q, e, x, n, 1, 1, nt, slow);
        else mx_encode_loop(q, e, x, n, 0, 1, nt, slow);
    } else {
        if (e5m2) mx_encode_loop(q, e, x, n, 1, 0, nt, slow);
        else mx_encode_loop(q, e, x, n, 0, 0, nt, slow);
    }
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
        MXP__STREAM256((__m256i *)(void *)(d + i), _mm256_loadu_si256((const __m256i *)(const void *)(s + i)));
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
    k->mul_v = mul_v_avx2;
    k->fp8_encode = fp8_encode_avx2;
    k->mx_encode = mx_encode_avx2;
}
