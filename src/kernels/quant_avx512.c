/*
 * quant_avx512.c - the quantization kernels of the avx512 table.
 *
 * The fused float8 kernels (fp8_encode: delayed / current float8 scaling; mx_encode: MXFP8) are
 * AVX-512 here: they are compute-bound with 8 lanes (on a Zen 4, MX one pass took 0.34 ns per
 * element with the AVX2 kernel, about its in-cache speed, against a memory-equivalent of about
 * 0.2), so 16 lanes and mask registers pay; so is the int8 / int4 cast of a group read from the
 * cache (cast_int: one-pass per-row int8 on Zen 4 4.4-4.9 -> 3.4-3.6 ms for 4096 x 4096). The
 * other entries (amax passes, per-element-scale casts, mul_v) run near memory speed with AVX2
 * and stay the AVX2 ones, as finite_avx512.c does (an AVX-512 CPU has AVX2: dispatch.c requires
 * it for this path).
 *
 * The arithmetic is quant_avx2.c's f8_code, lane for lane (see there: integer round-to-nearest-
 * even for the float8 normal range, a magic-number float add for its subnormal range, the sign
 * on top), with the subnormal lanes picked by a mask compare (a masked subtraction) instead of
 * BLENDVPS's sign bit, and the sign merged by one VPTERNLOGD; an MX block's amax by VRANGEPS.
 * Four vectors of codes (64 elements) are packed with VPACKUSDW / VPACKUSWB and one VPERMD (on
 * Zen 4 the conversion kernels' VPMOVDB stores lost to the AVX2 pack sequence).
 * Bits: identical to the scalar reference (quant_scalar.c) and to the conversion table's float32
 * -> float8 kernel with saturation; test_quant (every layout, boundaries) and
 * test_quant_exhaustive (all 2^32 float32 inputs) check every table the CPU runs, and
 * test_quant_emu512 runs this file on emulated intrinsics where the CPU lacks AVX-512.
 */
#ifdef MXP_AVX512_EMULATED /* test builds: portable AVX-512 (tests/emu/avx512_emu.h) */
#include "avx512_emu.h"
#else
#include <immintrin.h>
#endif
#include <string.h>

#include "quant_kernels.h"
#include "nt_store.h"

#if defined(__GNUC__) || defined(__clang__)
#define QINLINE inline __attribute__((always_inline))
#else
#define QINLINE inline
#endif

/* the scalar reference's steps, for what the vector loops do not take (filled at registration) */
static uint32_t (*ref_mul_amax)(float *y, const float *x, size_t n, float s);
static void (*ref_mx_scale)(float *y, uint8_t *e, const float *x, size_t n, int e5m2, int floor);
static void (*ref_cast_int)(int8_t *q, const float *x, size_t n, float s, int lo, int hi, int pf);

static const mxp__cvt_args SAT = {true, 0, 0, false};

/* Prefetch of the next group (as quant_avx2.c's group_prefetch: quant.c walks groups in memory
 * order, a group is first read by its amax pass, and this prefetches the same offset one group
 * ahead while the current group is cast from L1): the distance in bytes for a call of n
 * elements, or 0 for none. Long runs (one group, delayed scaling) take none: on Zen 4 a
 * prefetch a fixed distance ahead of a linear read only slowed it (cvt_avx512.c). */
static QINLINE size_t group_prefetch(size_t n) { return n <= 16384 ? 4 * n : 0; }

/* Prefetch the 64 floats pf bytes past p (pf = 0: nothing); a prefetch never faults. */
static QINLINE void prefetch64(const float *p, size_t pf)
{
    if (pf)
        for (size_t o = 0; o < 256; o += 64) _mm_prefetch((const char *)p + pf + o, _MM_HINT_T0);
}

/* the largest of 16 unsigned lanes */
static QINLINE uint32_t hmax_epu32(__m512i v)
{
    __m256i m = _mm256_max_epu32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    __m128i a = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    a = _mm_max_epu32(a, _mm_shuffle_epi32(a, 0x4E));
    a = _mm_max_epu32(a, _mm_shuffle_epi32(a, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(a);
}

static QINLINE __m512i mag(__m512 x) { return _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)); }

/* 16 finite-or-infinite products -> 16 float8 codes in the low byte of each lane (e5m2 is a
 * constant wherever this is inlined) */
static QINLINE __m512i f8_code(__m512 y, const int e5m2)
{
    const int m = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, shift = 23 - m;
    const __m512i yb = _mm512_castps_si512(y);
    const __m512i a = _mm512_min_epu32(mag(y), _mm512_set1_epi32(e5m2 ? 0x47600000 : 0x43E00000)); /* 57344 / 448 */
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, shift), _mm512_set1_epi32(1));
    const __m512i nrm = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32((1 << (shift - 1)) - 1 - ((127 - bias) << 23))), odd),
        shift);
    const __m512 magic = _mm512_castsi512_ps(_mm512_set1_epi32((127 + 1 - bias - m + 23) << 23));
    const __mmask16 tiny = _mm512_cmpgt_epu32_mask(_mm512_set1_epi32((127 + 1 - bias) << 23), a);
    /* the subnormal lanes: (a + magic) - magic as integers, a masked subtraction over nrm */
    const __m512i code = _mm512_mask_sub_epi32(nrm, tiny, _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), magic)),
                                               _mm512_castps_si512(magic));
    /* code | (sign bit >> 24 & 0x80): VPTERNLOGD 0xF8 = a | (b & c) */
    return _mm512_ternarylogic_epi32(code, _mm512_srli_epi32(yb, 24), _mm512_set1_epi32(0x80), 0xF8);
}

/*
 * MX codes under RCEIL: the block scale makes every |y| <= the format's largest finite value
 * (amax / X <= 448 or 57344 by the choice of X), so no saturation min is needed, and the
 * nearest-even step runs on the signed bits, as the conversion kernels' n8_tq does:
 * tq = (u + add + bit D of u) >> D = S << (31 - D) | q for a lane in the normal range (q < 0x80);
 * a lane below it (a < 2^(1 - bias)) takes the magic-number add of f8_code, and the sign comes
 * from u itself (there the addition borrows from it). The constants live in a struct built once
 * per call and pinned in registers (with them written in f8_code's style the compiler rebuilt
 * some of them, a MOV + VPBROADCASTD each, in every step of the MX loop).
 */
typedef struct mxk {
    __m512i abs, add, one, bitd, lo, low7;
    __m512 magic;
} mxk;
#if defined(__GNUC__) && !defined(MXP_AVX512_EMULATED)
#define MXK_PIN(v) __asm__("" : "+v"(v))
#else
#define MXK_PIN(v) ((void)0)
#endif
static QINLINE mxk mxk_make(const int e5m2)
{
    const int m = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, D = 23 - m;
    mxk k;
    k.abs = _mm512_set1_epi32(0x7FFFFFFF);
    k.add = _mm512_set1_epi32((1 << (D - 1)) - 1 - ((127 - bias) << 23));
    k.one = _mm512_set1_epi32(1);
    k.bitd = _mm512_set1_epi32(1 << D);
    k.lo = _mm512_set1_epi32((127 + 1 - bias) << 23);
    k.low7 = _mm512_set1_epi32(0x7F);
    k.magic = _mm512_castsi512_ps(_mm512_set1_epi32((127 + 1 - bias - m + 23) << 23));
    MXK_PIN(k.abs);
    MXK_PIN(k.add);
    MXK_PIN(k.one);
    MXK_PIN(k.bitd);
    MXK_PIN(k.lo);
    MXK_PIN(k.low7);
    MXK_PIN(k.magic);
    return k;
}
static QINLINE __m512i mx_code(__m512 y, const mxk *k, const int e5m2)
{
    const int D = e5m2 ? 21 : 20;
    const __m512i u = _mm512_castps_si512(y), a = _mm512_and_si512(u, k->abs);
    const __mmask16 tiny = _mm512_cmpgt_epu32_mask(k->lo, a);
    /* + bit D of u: a VPTESTMD mask and a masked add (no shift) */
    const __m512i t = _mm512_add_epi32(u, k->add);
    const __m512i tq = _mm512_srli_epi32(_mm512_mask_add_epi32(t, _mm512_test_epi32_mask(u, k->bitd), t, k->one), (unsigned)D);
    const __m512i q = _mm512_mask_sub_epi32(tq, tiny, _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), k->magic)),
                                            _mm512_castps_si512(k->magic));
    /* bits 0..6 from q, bit 7 (the sign) from u >> 24: VPTERNLOGD 0xE4 = C ? A : B, C = 0x7F */
    return _mm512_ternarylogic_epi32(q, _mm512_srli_epi32(u, 24), k->low7, 0xE4);
}

/* mx_code for a lane known to be in the normal range (a >= 2^(1 - bias)) */
static QINLINE __m512i mx_normal(__m512i u, const mxk *k, const int e5m2)
{
    const int D = e5m2 ? 21 : 20;
    const __m512i t = _mm512_add_epi32(u, k->add);
    const __m512i tq = _mm512_srli_epi32(_mm512_mask_add_epi32(t, _mm512_test_epi32_mask(u, k->bitd), t, k->one), (unsigned)D);
    return _mm512_ternarylogic_epi32(tq, _mm512_srli_epi32(u, 24), k->low7, 0xE4);
}

/* 4 x 16 codes (each 0..255) -> 64 bytes in element order. The packs work within 128-bit
 * lanes: after them, 128-bit lane L holds dwords [c0 L, c1 L, c2 L, c3 L] (4 bytes each). */
static QINLINE __m512i f8_pack(__m512i c0, __m512i c1, __m512i c2, __m512i c3)
{
    const __m512i b = _mm512_packus_epi16(_mm512_packus_epi32(c0, c1), _mm512_packus_epi32(c2, c3));
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), b);
}

static QINLINE int any_nan(__m512 y0, __m512 y1, __m512 y2, __m512 y3)
{
    const __mmask16 u = (__mmask16)(_mm512_cmp_ps_mask(y0, y0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(y1, y1, _CMP_UNORD_Q) |
                                    _mm512_cmp_ps_mask(y2, y2, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(y3, y3, _CMP_UNORD_Q));
    return u != 0;
}

static QINLINE void store64(uint8_t *q, __m512i v, int nt)
{
    if (nt) MXP__STREAM512((void *)q, v);
    else _mm512_storeu_si512((void *)q, v);
}

/* Elements the vector loop does not take (an unaligned head before streaming, the tail). */
static uint32_t fp8_encode_part(uint8_t *q, const float *x, size_t n, float s, mxp__cvt_fn slow)
{
    float y[32];
    uint32_t m = 0;
    for (size_t b = 0; b < n; b += 32) {
        const size_t len = n - b < 32 ? n - b : 32;
        const uint32_t a = ref_mul_amax(y, x + b, len, s);
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
    if (nt) { /* streaming stores: 64-byte aligned destination */
        i = (64 - ((uintptr_t)q & 63)) & 63;
        if (i > n) i = n;
        head_amax = fp8_encode_part(q, x, i, s, slow);
    }
    const __m512 vs = _mm512_set1_ps(s);
    const size_t pf = group_prefetch(n);
    __m512i m0 = _mm512_setzero_si512(), m1 = m0;
    for (; i + 64 <= n; i += 64) {
        prefetch64(x + i, pf);
        const __m512 a0 = _mm512_loadu_ps(x + i), a1 = _mm512_loadu_ps(x + i + 16),
                     a2 = _mm512_loadu_ps(x + i + 32), a3 = _mm512_loadu_ps(x + i + 48);
        m0 = _mm512_max_epu32(m0, _mm512_max_epu32(mag(a0), mag(a1)));
        m1 = _mm512_max_epu32(m1, _mm512_max_epu32(mag(a2), mag(a3)));
        const __m512 y0 = _mm512_mul_ps(a0, vs), y1 = _mm512_mul_ps(a1, vs), y2 = _mm512_mul_ps(a2, vs),
                     y3 = _mm512_mul_ps(a3, vs);
        if (any_nan(y0, y1, y2, y3)) { /* rare: the conversion kernel's NaN patterns */
            float y[64];
            _mm512_storeu_ps(y, y0);
            _mm512_storeu_ps(y + 16, y1);
            _mm512_storeu_ps(y + 32, y2);
            _mm512_storeu_ps(y + 48, y3);
            slow(q + i, y, 64, &SAT);
            continue;
        }
        store64(q + i, f8_pack(f8_code(y0, e5m2), f8_code(y1, e5m2), f8_code(y2, e5m2), f8_code(y3, e5m2)), nt);
    }
    uint32_t v = hmax_epu32(_mm512_max_epu32(m0, m1));
    v = head_amax > v ? head_amax : v;
    const uint32_t t = fp8_encode_part(q + i, x + i, n - i, s, slow);
    return v > t ? v : t;
}

/* One MX block of 32 floats at x: its E8M0 exponent into *e, and 1 / X = 2^(127 - e). */
static QINLINE float mx_block_scale(const float *x, uint8_t *e, const int e5m2, int floor_rule)
{
    const uint32_t am = hmax_epu32(_mm512_max_epu32(mag(_mm512_loadu_ps(x)), mag(_mm512_loadu_ps(x + 16))));
    *e = mxp__mx_e8m0(am, e5m2, floor_rule);
    return mxp__mx_inv(*e);
}

/*
 * Eight MX blocks (256 floats at x) at once: their E8M0 exponents into e[0..8) and 1 / X into
 * inv[0..8), as quant_avx2.c's mx_block_scale computes them for nonzero normal amax (every
 * block of normal data): e = biased exponent of amax - emax, +1 under RCEIL when the 24-bit
 * significand is above 1.75 (0xE00000), at least 0; 1 / X = 2^(127 - e). A block whose amax is
 * zero or a float32 subnormal sends all eight through mxp__mx_e8m0 / mxp__mx_inv (rare).
 * The eight 16-lane maxima are reduced together (a transpose-like tree of 128-bit and in-lane
 * shuffles, 15 operations for the eight), not one horizontal reduction per block, whose
 * dependency chains and scalar tails were the MX loop's bottleneck.
 */
static QINLINE void mx_scales8(const float *x, uint8_t *e, float *inv, const int e5m2, int floor_rule)
{
    __m512i m[8], a[4];
    for (int k = 0; k < 8; k++) /* VRANGEPS 0x0B: the larger magnitude, sign cleared (x finite) */
        m[k] = _mm512_castps_si512(_mm512_range_ps(_mm512_loadu_ps(x + 32 * k), _mm512_loadu_ps(x + 32 * k + 16), 0x0B));
    /* 256-bit halves: a[j] = [block 2j's 8 partial maxima | block 2j+1's] */
    for (int j = 0; j < 4; j++)
        a[j] = _mm512_max_epu32(_mm512_shuffle_i32x4(m[2 * j], m[2 * j + 1], 0x44),
                                _mm512_shuffle_i32x4(m[2 * j], m[2 * j + 1], 0xEE));
    /* 128-bit lanes: b0 = blocks 0..3, b1 = blocks 4..7, 4 partial maxima per lane */
    const __m512i b0 = _mm512_max_epu32(_mm512_shuffle_i32x4(a[0], a[1], 0x88), _mm512_shuffle_i32x4(a[0], a[1], 0xDD));
    const __m512i b1 = _mm512_max_epu32(_mm512_shuffle_i32x4(a[2], a[3], 0x88), _mm512_shuffle_i32x4(a[2], a[3], 0xDD));
    /* within lanes: dword 4L = block L's max, dword 4L + 2 = block L + 4's */
    __m512i c = _mm512_max_epu32(_mm512_unpacklo_epi64(b0, b1), _mm512_unpackhi_epi64(b0, b1));
    c = _mm512_max_epu32(c, _mm512_srli_epi64(c, 32)); /* low dword of each qword: the max of its two */
    const __m512i am = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0), c);
    if (__builtin_expect((_mm512_cmpgt_epu32_mask(_mm512_set1_epi32(0x00800000), am) & 0xFF) != 0, 0)) {
        uint32_t v[16];
        _mm512_storeu_si512((void *)v, am);
        for (int k = 0; k < 8; k++) {
            e[k] = mxp__mx_e8m0(v[k], e5m2, floor_rule);
            inv[k] = mxp__mx_inv(e[k]);
        }
        return;
    }
    __m512i ev = _mm512_sub_epi32(_mm512_srli_epi32(am, 23), _mm512_set1_epi32(e5m2 ? 15 : 8));
    if (!floor_rule)
        ev = _mm512_mask_add_epi32(ev, _mm512_cmpgt_epi32_mask(_mm512_and_si512(am, _mm512_set1_epi32(0x7FFFFF)),
                                                                _mm512_set1_epi32(0x600000)),
                                   ev, _mm512_set1_epi32(1));
    ev = _mm512_max_epi32(ev, _mm512_setzero_si512());
    _mm_storel_epi64((__m128i *)(void *)e, _mm512_cvtepi32_epi8(ev));
    _mm256_storeu_si256((__m256i *)(void *)inv,
                        _mm512_castsi512_si256(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(254), ev), 23)));
}

/* Two MX blocks' codes (32 + 32 elements at x, scales inv0 and inv1) -> 64 bytes; rceil: by
 * mx_code (no saturation needed), else (FLOOR: amax / X may exceed the largest finite value)
 * by f8_code. */
static QINLINE __m512i mx_codes2(const float *x, float inv0, float inv1, const int e5m2, const int rceil,
                                 const mxk *k)
{
    const __m512 s0 = _mm512_set1_ps(inv0), s1 = _mm512_set1_ps(inv1);
    const __m512 y0 = _mm512_mul_ps(_mm512_loadu_ps(x), s0), y1 = _mm512_mul_ps(_mm512_loadu_ps(x + 16), s0),
                 y2 = _mm512_mul_ps(_mm512_loadu_ps(x + 32), s1), y3 = _mm512_mul_ps(_mm512_loadu_ps(x + 48), s1);
    if (rceil) {
        /* the subnormal-range fix only where a lane needs it (rare in scaled blocks: |y| < 2^-6
         * means |x| < 2^-15 amax or so; zeros take it too) */
        const __m512i u0 = _mm512_castps_si512(y0), u1 = _mm512_castps_si512(y1), u2 = _mm512_castps_si512(y2),
                      u3 = _mm512_castps_si512(y3);
        const __mmask16 m0 = _mm512_cmpgt_epu32_mask(k->lo, _mm512_and_si512(u0, k->abs)),
                        m1 = _mm512_cmpgt_epu32_mask(k->lo, _mm512_and_si512(u1, k->abs)),
                        m2 = _mm512_cmpgt_epu32_mask(k->lo, _mm512_and_si512(u2, k->abs)),
                        m3 = _mm512_cmpgt_epu32_mask(k->lo, _mm512_and_si512(u3, k->abs));
        if (__builtin_expect((m0 | m1 | m2 | m3) == 0, 1)) {
            return f8_pack(mx_normal(u0, k, e5m2), mx_normal(u1, k, e5m2), mx_normal(u2, k, e5m2), mx_normal(u3, k, e5m2));
        }
        return f8_pack(mx_code(y0, k, e5m2), mx_code(y1, k, e5m2), mx_code(y2, k, e5m2), mx_code(y3, k, e5m2));
    }
    return f8_pack(f8_code(y0, e5m2), f8_code(y1, e5m2), f8_code(y2, e5m2), f8_code(y3, e5m2));
}

/*
 * MX in runs of 8 blocks (as quant_avx2.c: the 8 scales first, 8 short independent chains, then
 * the casts from L1), two blocks per 64-byte store. Streaming stores where the destination is
 * 64-byte aligned (quant.c passes nt for outputs larger than the cache), plain ones elsewhere.
 */
static QINLINE void mx_encode_loop(uint8_t *q, uint8_t *e, const float *x, size_t n, const int e5m2,
                                   const int floor_rule, int nt, mxp__cvt_fn slow)
{
    enum { RUN = 8 };
    const mxk k8 = mxk_make(e5m2);
    const size_t pf = group_prefetch(n);
    size_t b = 0;
    for (; b + RUN * 32 <= n; b += RUN * 32) {
        if (pf)
            for (size_t o = 0; o < RUN * 32 * 4; o += 64) _mm_prefetch((const char *)(x + b) + pf + o, _MM_HINT_T0);
        float inv[RUN];
        mx_scales8(x + b, e + b / 32, inv, e5m2, floor_rule);
        for (int k = 0; k < RUN; k += 2) {
            uint8_t *d = q + b + 32 * k;
            store64(d, mx_codes2(x + b + 32 * k, inv[k], inv[k + 1], e5m2, !floor_rule, &k8),
                    nt && ((uintptr_t)d & 63) == 0);
        }
    }
    for (; b + 32 <= n; b += 32) { /* fewer than RUN blocks left: one at a time, 32 bytes */
        const float inv = mx_block_scale(x + b, e + b / 32, e5m2, floor_rule);
        const __m512 s0 = _mm512_set1_ps(inv);
        const __m512i c0 = f8_code(_mm512_mul_ps(_mm512_loadu_ps(x + b), s0), e5m2);
        const __m512i c1 = f8_code(_mm512_mul_ps(_mm512_loadu_ps(x + b + 16), s0), e5m2);
        const __m512i v = f8_pack(c0, c1, _mm512_setzero_si512(), _mm512_setzero_si512());
        _mm256_storeu_si256((__m256i *)(void *)(q + b), _mm512_castsi512_si256(v));
    }
    if (b < n) {
        float y[32];
        ref_mx_scale(y, e + b / 32, x + b, n - b, e5m2, floor_rule);
        slow(q + b, y, n - b, &SAT);
    }
}

/*
 * int8 / int4 cast, q[i] = clamp(rne(x[i] * s), lo, hi), 64 elements per step: the product
 * clamped as a float (lo and hi are small integers, so clamping before or after the rounding
 * gives the same integer), VCVTPS2DQ (nearest-even: quant.c runs the kernels in the default
 * rounding mode), VPACKSSDW / VPACKSSWB (no saturation left to do) and one VPERMD for element
 * order. The prefetch of the next group as fp8_encode_loop's, when the caller says its amax pass
 * comes next (pf_hint): on Zen 4 it took the one-pass per-row int8 from 4.4-4.9 to 3.4-4.0 ms
 * (4096 x 4096) but the plain one, whose second pass casts every row back to back, from 5.9 to
 * 6.3-8.4 ms. Tails: the scalar reference.
 */
static void cast_int_avx512(int8_t *q, const float *x, size_t n, float s, int lo, int hi, int pf_hint)
{
    const __m512 vs = _mm512_set1_ps(s), vlo = _mm512_set1_ps((float)lo), vhi = _mm512_set1_ps((float)hi);
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const size_t pf = pf_hint ? group_prefetch(n) : 0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        prefetch64(x + i, pf);
        __m512i v[4];
        for (int t = 0; t < 4; t++)
            v[t] = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i + 16 * t), vs), vlo), vhi));
        const __m512i b = _mm512_packs_epi16(_mm512_packs_epi32(v[0], v[1]), _mm512_packs_epi32(v[2], v[3]));
        _mm512_storeu_si512((void *)(q + i), _mm512_permutexvar_epi32(perm, b));
    }
    ref_cast_int(q + i, x + i, n - i, s, lo, hi, 0);
}

static uint32_t fp8_encode_avx512(uint8_t *q, const float *x, size_t n, float s, int e5m2, int nt,
                                  mxp__cvt_fn slow)
{
    return e5m2 ? fp8_encode_loop(q, x, n, s, 1, nt, slow) : fp8_encode_loop(q, x, n, s, 0, nt, slow);
}

static void mx_encode_avx512(uint8_t *q, uint8_t *e, const float *x, size_t n, int e5m2, int floor_rule,
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

void mxp__quant_register_avx512(mxp__qkernels *k)
{
    mxp__quant_register_avx2(k); /* every other entry; mul_amax and mx_scale stay the scalar ones */
    ref_mul_amax = k->mul_amax;
    ref_mx_scale = k->mx_scale;
    static mxp__qkernels sref;
    mxp__quant_register_scalar(&sref);
    ref_cast_int = sref.cast_int;
    k->cast_int = cast_int_avx512;
    k->fp8_encode = fp8_encode_avx512;
    k->mx_encode = mx_encode_avx512;
}
