/*
 * cvt_f64_avx2.c - float64 <-> float32 with AVX (VCVTPD2PS / VCVTPS2PD), for the avx2 and
 * avx512 tables, stochastic rounding from float64, and why float64 -> narrow nearest-even can
 * round to odd first (cvt_simd_impl.h's n64_loop, with the ISA files' f64_odd_ld).
 *
 * Unlike F16C, these instructions take their rounding and their subnormal handling from MXCSR
 * (RC, FTZ, DAZ), which belongs to the caller. So every kernel here sets MXCSR to what it needs
 * for the length of the call and puts the caller's value back before it returns:
 *   all exceptions masked (a caller that unmasked one must not get SIGFPE from us), FTZ and DAZ
 *   off, RC nearest-even.
 * Restoring the whole register also drops the exception flags the conversion raised, so a call
 * leaves the floating-point environment exactly as it found it, like the integer-only scalar
 * reference (cvt_scalar.c), whose results these equal bit for bit:
 *  - float64 -> float32 nearest-even with FTZ/DAZ off is IEEE 754's correctly rounded
 *    conversion, subnormal results included; overflow gives +-inf (exactly the reference's
 *    "max finite + 1" rule: a magnitude from half an ulp above FLT_MAX up rounds to infinity);
 *    a NaN keeps its sign and the top 23 bits of its payload with the quiet bit set (x86's
 *    rule, and the reference's). saturate: every +-inf result (overflow or an infinite input)
 *    becomes +-FLT_MAX.
 *  - float32 -> float64 with DAZ off is exact (subnormals normalised); NaN quieted, payload
 *    zero-filled below. saturate: +-inf -> +-DBL_MAX.
 *  - Round to odd (f64_odd_ld in cvt_avx2.c / cvt_avx512.c): truncate toward zero, then set the lowest bit
 *    of every inexact result. A value rounded to odd with p >= q + 2 bits and then rounded to
 *    nearest-even with q bits gets the correctly rounded q-bit result (the odd bit stands for
 *    "something below", so ties and near-ties cannot be confused). float32 has 24 bits and the
 *    narrow formats at most 11 (also in their subnormal ranges, which sit far above float32's
 *    own subnormal step 2^-149), so float64 -> narrow = round-to-odd -> float32 -> narrow
 *    nearest-even, and float32 never overflows on the way (toward zero stops at FLT_MAX, which
 *    is odd and overflows every narrow format as the float64 would).
 * Calls that read + write at least mxp__nt_threshold bytes store with streaming stores (no
 * read-for-ownership of the destination), as the float32 kernels do: at 2^26 elements on the
 * Zen 3 VM float32 -> float64 went from 0.68 to 0.47-0.48 ns/element and float64 -> float32
 * from 0.62-0.79 to 0.48-0.59 (bench/RESULTS.md, session 5).
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "nt_store.h"

#define CSR_MASK_ALL 0x1F80u /* exception masks, bits 7-12 */

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* 8 float64 at p (any alignment) -> 8 float32, rounded as MXCSR says. */
ALWAYS_INLINE __m256 cvt8_pd_ps(const unsigned char *p)
{
    const __m128 lo = _mm256_cvtpd_ps(_mm256_loadu_pd((const double *)(const void *)p));
    const __m128 hi = _mm256_cvtpd_ps(_mm256_loadu_pd((const double *)(const void *)(p + 32)));
    return _mm256_set_m128(hi, lo);
}

/* One step of 8 elements at s -> d; sat: +-inf results -> +-max finite (the pattern minus 1:
 * 0x7F800000 - 1 = FLT_MAX, 0x7FF0000000000000 - 1 = DBL_MAX, sign kept); nt: streaming
 * stores (d 32-byte aligned). Constant flags in every caller. */
ALWAYS_INLINE void f32_from_f64_8(unsigned char *d, const unsigned char *s, int sat, int nt)
{
    __m256i y = _mm256_castps_si256(cvt8_pd_ps(s));
    if (sat)
        y = _mm256_add_epi32(y, _mm256_cmpeq_epi32(_mm256_and_si256(y, _mm256_set1_epi32(0x7FFFFFFF)),
                                                   _mm256_set1_epi32(0x7F800000)));
    if (nt) MXP__STREAM256((__m256i *)(void *)d, y);
    else _mm256_storeu_si256((__m256i *)(void *)d, y);
}
ALWAYS_INLINE void f64_from_f32_8(unsigned char *d, const unsigned char *s, int sat, int nt)
{
    for (int h = 0; h < 2; h++) {
        __m256i y = _mm256_castpd_si256(_mm256_cvtps_pd(_mm_loadu_ps((const float *)(const void *)(s + 16 * h))));
        if (sat)
            y = _mm256_add_epi64(y, _mm256_cmpeq_epi64(_mm256_and_si256(y, _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll)),
                                                       _mm256_set1_epi64x(0x7FF0000000000000ll)));
        if (nt) MXP__STREAM256((__m256i *)(void *)(d + 32 * h), y);
        else _mm256_storeu_si256((__m256i *)(void *)(d + 32 * h), y);
    }
}

/*
 * The frame both kernels share: MXCSR set for the call (masked, no FTZ/DAZ, nearest-even) and
 * restored; steps of 8 specialised on saturate and streaming; the scalar reference (ref) for
 * the tail, and for the head up to the 32-byte boundary when streaming. Streaming: calls that
 * read + write at least mxp__nt_threshold bytes, without saturation (rare, and the plain loop
 * keeps one fewer copy), with an element-aligned destination.
 */
/* On CPUs set to MXP__PREFETCH_L2 (Intel, dispatch.c) the streaming float64 -> float32 loop
 * prefetches its source into L2 this many bytes ahead: Intel Xeon (session 30), 2^26 elements,
 * one process per build, median of 9 calls, three runs: 0.693 / 0.730 / 0.760 ns/element
 * without, 0.589 / 0.578 / 0.581 with (the limit: about 0.60). Elsewhere it does not (kernels.h). */
#define F64_PREFETCH_L2 MXP__PF_FAR
#define F64_KERNEL(name, ib, ob, step)                                                            \
    static void name(void *dst, const void *src, size_t n, const mxp__cvt_args *a)               \
    {                                                                                             \
        const unsigned char *s = (const unsigned char *)src;                                      \
        unsigned char *d = (unsigned char *)dst;                                                  \
        const mxp__cvt_fn ref = mxp__scalar_kernels()->cvt[(ob) == 4 ? MXP_FLOAT32 : MXP_FLOAT64] \
                                                         [(ib) == 4 ? MXP_FLOAT32 : MXP_FLOAT64][MXP__RNE]; \
        const unsigned old = _mm_getcsr();                                                        \
        _mm_setcsr(CSR_MASK_ALL);                                                                 \
        size_t i = 0;                                                                             \
        if (a->saturate) {                                                                        \
            for (; i + 8 <= n; i += 8) step(d + (ob) * i, s + (ib) * i, 1, 0);                    \
        } else if ((n * ((ib) + (ob)) >= mxp__nt_threshold || a->stream) && (uintptr_t)d % (ob) == 0) { \
            i = ((32 - (uintptr_t)d % 32) % 32) / (ob);                                           \
            if (i > n) i = n;                                                                     \
            ref(d, s, i, a);                                                                      \
            if ((ib) == 8 && mxp__avx512_prefetch == MXP__PREFETCH_L2)                           \
                for (; i + 8 <= n; i += 8) {                                                      \
                    _mm_prefetch((const char *)(s + (ib) * i + F64_PREFETCH_L2), _MM_HINT_T2);   \
                    step(d + (ob) * i, s + (ib) * i, 0, 1);                                       \
                }                                                                                 \
            for (; i + 8 <= n; i += 8) step(d + (ob) * i, s + (ib) * i, 0, 1);                    \
            if (!a->stream) _mm_sfence(); /* a->stream: the caller fences */                      \
        } else {                                                                                  \
            for (; i + 8 <= n; i += 8) step(d + (ob) * i, s + (ib) * i, 0, 0);                    \
        }                                                                                         \
        _mm_setcsr(old);                                                                          \
        ref(d + (ob) * i, s + (ib) * i, n - i, a);                                                \
    }

/* float64 -> float32 nearest-even (the RNE entry; stochastic rounding: sr_from_f64 below) */
F64_KERNEL(cvt_f32_f64, 8, 4, f32_from_f64_8)
/* float32 -> float64, exact (the RNE and SR entries) */
F64_KERNEL(cvt_f64_f32, 4, 8, f64_from_f32_8)

/*
 * Stochastic rounding from float64 (to float32, float16, bfloat16, e4m3fn, e5m2), integer-only
 * on 64-bit lanes (no MXCSR dependency), 8 elements per step: two vectors of 4 doubles and one
 * vector of 8 random words r = mxp__sr_bits(seed, index) (kernels.h; the hash on 32-bit lanes,
 * as the float32 kernels compute it). For a magnitude a (the double's bits, sign cleared) and a
 * target with m mantissa bits and bias B, the target pattern before rounding is q = base >> sh:
 *   normal target range (exponent field E >= 1024 - B):
 *       base = a - ((1023 - B) << 52)  (the exponent rebiased in place),  sh = 52 - m
 *   below it: the value is (2^52 + M) * 2^(E - 1075) and the step 2^(1 - B - m), so
 *       base = 2^52 | M,  sh = 1076 - B - m - E   (> 52 - m; a double subnormal or zero gets a
 *       wrong implicit bit, but sh >= 926 then and q = F = 0, as the reference's)
 * F = the top 32 bits of the dropped part = the low 32 bits of base >> (sh - 32) (sh >= 32) or
 * base << (32 - sh) (float32's normal range, sh = 29); VPSRLVQ / VPSLLVQ give 0 for a count
 * >= 64, which covers both the other case and every sh far beyond 64. Round up iff r > ~F
 * (F + r >= 2^32, cvt_scalar.c's encode). Then, as the reference: q > max finite (infinity,
 * larger finite values, e4m3fn's 480 slot) -> the overflow pattern (max finite when
 * saturating, else infinity, e4m3fn: 0x7F); NaN -> the target's quiet NaN with the top payload
 * bits (e4m3fn: 0x7F); the sign on top.
 */
typedef struct f64t {
    int bits, m, bias, fn;
    uint32_t maxfin, inf;
} f64t;

/* the random words of 8 consecutive indices from their Weyl states x (kernels.h's
 * mxp__sr_bits_k on 32-bit lanes; m1, m2: its multipliers, as vectors) */
ALWAYS_INLINE __m256i sr_words8(__m256i x, __m256i khi, __m256i m1, __m256i m2)
{
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, m1);
    x = _mm256_add_epi32(_mm256_xor_si256(x, _mm256_srli_epi32(x, 15)), khi);
    x = _mm256_mullo_epi32(x, m2);
    return _mm256_xor_si256(x, _mm256_srli_epi32(x, 21));
}

/* 4 doubles (bits u) and their random words r (zero-extended to 64-bit lanes) -> 4 target
 * patterns in 64-bit lanes */
ALWAYS_INLINE __m256i sr_f64_4(__m256i u, __m256i r, const f64t t, int sat)
{
    const __m256i a = _mm256_and_si256(u, _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll));
    const __m256i E = _mm256_srli_epi64(a, 52);
    const __m256i nrm = _mm256_cmpgt_epi64(E, _mm256_set1_epi64x(1023 - t.bias));
    const __m256i base = _mm256_blendv_epi8(
        _mm256_or_si256(_mm256_and_si256(a, _mm256_set1_epi64x(0xFFFFFFFFFFFFFll)), _mm256_set1_epi64x(1ll << 52)),
        _mm256_sub_epi64(a, _mm256_set1_epi64x((long long)(1023 - t.bias) << 52)), nrm);
    const __m256i sh = _mm256_blendv_epi8(_mm256_sub_epi64(_mm256_set1_epi64x(1076 - t.bias - t.m), E),
                                          _mm256_set1_epi64x(52 - t.m), nrm);
    const __m256i q = _mm256_srlv_epi64(base, sh);
    const __m256i F = _mm256_and_si256(
        _mm256_or_si256(_mm256_srlv_epi64(base, _mm256_sub_epi64(sh, _mm256_set1_epi64x(32))),
                        _mm256_sllv_epi64(base, _mm256_sub_epi64(_mm256_set1_epi64x(32), sh))),
        _mm256_set1_epi64x(0xFFFFFFFFll));
    /* up iff r > 2^32 - 1 - F (both below 2^32: a signed 64-bit compare) */
    const __m256i up = _mm256_cmpgt_epi64(r, _mm256_xor_si256(F, _mm256_set1_epi64x(0xFFFFFFFFll)));
    __m256i mag = _mm256_sub_epi64(q, up);
    const __m256i over = _mm256_set1_epi64x(sat ? t.maxfin : t.fn ? 0x7F : t.inf);
    mag = _mm256_blendv_epi8(mag, over, _mm256_cmpgt_epi64(mag, _mm256_set1_epi64x(t.maxfin)));
    const __m256i nanv =
        t.fn ? _mm256_set1_epi64x(0x7F)
             : _mm256_or_si256(_mm256_set1_epi64x(t.inf | (1u << (t.m - 1))),
                               _mm256_srli_epi64(_mm256_and_si256(a, _mm256_set1_epi64x(0xFFFFFFFFFFFFFll)), 52 - t.m));
    mag = _mm256_blendv_epi8(mag, nanv, _mm256_cmpgt_epi64(a, _mm256_set1_epi64x(0x7FF0000000000000ll)));
    return _mm256_or_si256(mag, _mm256_slli_epi64(_mm256_srli_epi64(u, 63), t.bits - 1));
}

/*
 * The steps' element order. A step loads its 8 doubles as two vectors of elements 0, 1, 4, 5
 * and 2, 3, 6, 7 (two 16-byte halves each): VSHUFPS of two such vectors, taking the high dwords
 * (imm 0xDD) or the low ones (0x88), gives 8 dwords in element order, with no lane-crossing
 * permutation. The random words come from Weyl states laid out so that the low dwords of r
 * (r & (2^32 - 1) as 64-bit lanes) are the words of the first vector's elements and the high
 * dwords (r >> 32) the second's: dword lanes 0..7 hold the indices 0, 2, 1, 3, 4, 6, 5, 7.
 */
ALWAYS_INLINE __m256i ld_f64_pair(const unsigned char *p)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p)),
                                   _mm_loadu_si128((const __m128i *)(const void *)(p + 32)), 1);
}
ALWAYS_INLINE __m256i dw_hi(__m256i x, __m256i y)
{
    return _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(x), _mm256_castsi256_ps(y), 0xDD));
}
ALWAYS_INLINE __m256i dw_lo(__m256i x, __m256i y)
{
    return _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(x), _mm256_castsi256_ps(y), 0x88));
}

/* 8 results y (dwords in element order, each < 2^t.bits) as 8 elements of t.bits at d; nt:
 * streaming stores (d aligned to 8 * t.bits / 8 bytes; float8 results never stream: see
 * sr_from_f64) */
ALWAYS_INLINE void st_f64_8(unsigned char *d, __m256i y, const f64t t, int nt)
{
    if (t.bits == 32) {
        if (nt) MXP__STREAM256((__m256i *)(void *)d, y);
        else _mm256_storeu_si256((__m256i *)(void *)d, y);
        return;
    }
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1)); /* 8 words */
    if (t.bits == 16) {
        if (nt) MXP__STREAM128((__m128i *)(void *)d, w);
        else _mm_storeu_si128((__m128i *)(void *)d, w);
    } else {
        _mm_storel_epi64((__m128i *)(void *)d, _mm_packus_epi16(w, w));
    }
}

/* 8 elements at s -> d (t.bits wide) by the general path, r: the random words of their
 * indices in the steps' layout (above) */
ALWAYS_INLINE void sr_f64_8(unsigned char *d, const unsigned char *s, __m256i r, const f64t t, int sat, int nt)
{
    const __m256i q0 = sr_f64_4(ld_f64_pair(s), _mm256_and_si256(r, _mm256_set1_epi64x(0xFFFFFFFFll)), t, sat);
    const __m256i q1 = sr_f64_4(ld_f64_pair(s + 16), _mm256_srli_epi64(r, 32), t, sat);
    st_f64_8(d, dw_lo(q0, q1), t, nt);
}

/* an empty asm that makes v opaque, so that gcc keeps a hoisted constant in a register instead
 * of rebuilding it in the loop (cvt_simd_impl.h's MXP_SIMD_PIN) */
#define PIN(v) __asm__("" : "+x"(v))

/*
 * The elements i .. end (a multiple of 8 later) of one block of 2^32 indices, whose key is key
 * and whose element i has the low index half lo. The inner loop holds only the fast path, for
 * steps whose magnitudes all lie in the target's normal range up to max finite; a step that
 * fails the check takes the general path (sr_f64_4) outside it.
 *
 * The fast path. For a in [lo64, hi64], base = a - ((1023 - B) << 52) is the target pattern
 * with D = 52 - m dropped bits below it, and "round up iff F + r >= 2^32" is a carry out of the
 * dropped bits when r is added at the top of them: q = (base + r * 2^(D - 32)) >> D, which is
 * floor((floor(base / 2^c) + r) / 2^32) for c = D - 32 >= 0 (the inner floor cannot change the
 * outer one: r is an integer) and floor((base * 2^-c + r) / 2^32) for c < 0 (float32, c = -3:
 * base < 2^60, so base << 3 stays below 2^63). So q is the high dword of T = (base shifted by
 * c) + r (r zero-extended), and VSHUFPS collects the 8 high dwords in element order. A carry
 * out of the mantissa moves into the exponent, which is the next pattern; a <= hi64 cannot go
 * past max finite. For float32 base << 3 is taken from the signed bits u (the sign, shifted out,
 * drops away), elsewhere from a. The sign comes from the high dwords of the inputs, collected
 * by the same VSHUFPS for the range check: that check runs on them as 32-bit numbers,
 * lo64 >> 32 <= |high dword| <= hi32 = ((hi64 + 1) >> 32) - 1 (lo64's low dword is 0; every
 * a with that high dword is at most hi64; a step with a magnitude just below max finite in
 * that last 2^32 may take the general path, which is exact everywhere). A lane whose high
 * dword is +-0 (a double below 2^-1042: +-0, ReLU data) takes the fast path too, its result
 * masked to the sign alone: its dropped fraction's top 32 bits F are 0 for every target, so it
 * never rounds up (the general path's result). Until session 45 the fast path shifted r into
 * place, added, shifted q down, moved the sign from bit 63 and put the halves in order with a
 * VPERMQ (the words by two VPMOVZXDQ), +-0 lanes took the general path, and no call streamed.
 * Intel Xeon (CPU 4 of bench/RESULTS.md), --isa avx2, medians of three alternating runs,
 * ns/element before -> after, in cache / 2^26: f64->f32 stochastic 0.582 / 1.004 -> 0.462 /
 * 0.844, f64->bf16 0.614 / 0.931 -> 0.537 / 0.871 (nearest-even at 2^26: 0.67 and 0.78); on
 * ReLU data (half +-0) f64->f32 1.378 / 1.832 -> 0.458 / 0.932, f64->bf16 1.405 / 1.776 ->
 * 0.533 / 0.920. (Without the +-0 lanes, 0.428 and 0.507 in cache.)
 *
 * nt: streaming stores. pf: large calls on Intel (MXP__PREFETCH_L2) prefetch the source
 * (kernels.h's mxp__pf_intel). Intel Xeon (session 33), the avx2 table, 2^26 elements, medians of
 * three alternating runs, ns/element before -> after: f64->f32 stochastic 1.287 -> 0.800,
 * f64->bf16 stochastic 1.871 -> 0.690 (nearest-even: 0.56 and 0.61). The avx512 table's float64
 * stochastic kernels are cvt_avx512.c's (F64Z_PREFETCH).
 */
ALWAYS_INLINE void sr_f64_run(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t lo,
                              uint64_t key, const f64t t, int sat, int nt, int pf)
{
    const size_t ob = (size_t)t.bits / 8;
    const int D = 52 - t.m;
    const long long lo64 = (long long)(1024 - t.bias) << 52;
    const long long hi64 = ((long long)t.maxfin << (52 - t.m)) + ((long long)(1023 - t.bias) << 52);
    const uint32_t lo32 = (uint32_t)((unsigned long long)lo64 >> 32);
    const uint32_t hi32 = (uint32_t)(((unsigned long long)hi64 + 1u) >> 32) - 1u;
    __m256i khi = _mm256_set1_epi32((int)(uint32_t)(key >> 32));
    __m256i step = _mm256_set1_epi32((int)(8u * MXP__SR_W));
    __m256i absm = _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll), abs32 = _mm256_set1_epi32(0x7FFFFFFF);
    __m256i oadd = _mm256_set1_epi32((int)(0x7FFFFFFFu - hi32));
    __m256i olim = _mm256_set1_epi32((int)(0x7FFFFFFFu - (hi32 - lo32)));
    __m256i reb = _mm256_set1_epi64x((long long)(1023 - t.bias) << 52);
    __m256i m1 = _mm256_set1_epi32((int)MXP__SR_M1), m2 = _mm256_set1_epi32((int)MXP__SR_M2);
    PIN(khi);
    PIN(step);
    PIN(absm);
    PIN(abs32);
    PIN(oadd);
    PIN(olim);
    PIN(reb);
    PIN(m1);
    PIN(m2);
    /* the Weyl states of the indices lo + 0, 2, 1, 3, 4, 6, 5, 7 (the layout above), 8 * W
     * further per step */
    __m256i il = _mm256_add_epi32(_mm256_set1_epi32((int)(lo * MXP__SR_W + (uint32_t)key)),
                                  _mm256_mullo_epi32(_mm256_setr_epi32(0, 2, 1, 3, 4, 6, 5, 7),
                                                     _mm256_set1_epi32((int)MXP__SR_W)));
    while (i < end) {
        for (; i < end; i += 8) {
            const unsigned char *p = s + 8 * i;
            if (pf) mxp__pf_intel(p);
            const __m256i u0 = ld_f64_pair(p), u1 = ld_f64_pair(p + 16);
            const __m256i h = dw_hi(u0, u1); /* sign and high bits of elements 0..7 */
            const __m256i ah = _mm256_and_si256(h, abs32);
            /* z: the lanes whose results are +-0 (below); a step goes on if every lane outside the
             * range is one of them (VPTEST's carry: bad & ~z == 0) */
            const __m256i z = _mm256_cmpeq_epi32(ah, _mm256_setzero_si256());
            const __m256i bad = _mm256_cmpgt_epi32(olim, _mm256_add_epi32(ah, oadd));
            if (!_mm256_testc_si256(z, bad)) break;
            const __m256i r = sr_words8(il, khi, m1, m2);
            const __m256i r0 = _mm256_and_si256(r, _mm256_set1_epi64x(0xFFFFFFFFll)), r1 = _mm256_srli_epi64(r, 32);
            __m256i t0, t1;
            if (D < 32) {
                t0 = _mm256_slli_epi64(_mm256_sub_epi64(u0, reb), 32 - D);
                t1 = _mm256_slli_epi64(_mm256_sub_epi64(u1, reb), 32 - D);
            } else {
                t0 = _mm256_srli_epi64(_mm256_sub_epi64(_mm256_and_si256(u0, absm), reb), D - 32);
                t1 = _mm256_srli_epi64(_mm256_sub_epi64(_mm256_and_si256(u1, absm), reb), D - 32);
            }
            const __m256i q = _mm256_andnot_si256(z, dw_hi(_mm256_add_epi64(t0, r0), _mm256_add_epi64(t1, r1)));
            const __m256i sg = t.bits == 32 ? _mm256_andnot_si256(abs32, h)
                                            : _mm256_and_si256(_mm256_srli_epi32(h, 32 - t.bits),
                                                               _mm256_set1_epi32((int)(1u << (t.bits - 1))));
            st_f64_8(d + ob * i, _mm256_or_si256(q, sg), t, nt);
            il = _mm256_add_epi32(il, step);
        }
        if (i >= end) break;
        sr_f64_8(d + ob * i, s + 8 * i, sr_words8(il, khi, m1, m2), t, sat, nt);
        il = _mm256_add_epi32(il, step);
        i += 8;
    }
}

ALWAYS_INLINE void sr_from_f64(void *dst, const void *src, size_t n, const mxp__cvt_args *a, mxp_dtype dt,
                               const f64t t, int sat)
{
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *d = (unsigned char *)dst;
    const size_t ob = (size_t)t.bits / 8;
    const mxp__cvt_fn ref = mxp__scalar_kernels()->cvt[dt][MXP_FLOAT64][MXP__SR];
    size_t i = 0;
    const int big = n * (8 + ob) >= mxp__nt_threshold;
    const int pf = mxp__avx512_prefetch == MXP__PREFETCH_L2 && big;
    int nt = 0;
    /* large calls (or a->stream) into float32 or a 16-bit format stream their output, from the
     * first destination address aligned to a step's 8 * ob bytes (the reference before it);
     * float8 steps store 8 bytes, which no vector streaming store takes */
    if (ob >= 2 && n >= 16 && (big || a->stream) && (uintptr_t)d % ob == 0) {
        const size_t align = 8 * ob;
        i = (align - (uintptr_t)d % align) % align / ob; /* < 8 */
        ref(d, s, i, a);
        nt = 1;
    }
    while (i + 8 <= n) {
        const uint64_t idx = a->index0 + i;
        const uint32_t lo = (uint32_t)idx;
        const uint64_t room = 0x100000000ull - lo; /* indices before the low half wraps */
        mxp__cvt_args b = *a;
        b.index0 = idx;
        if (room < 8) {
            /* the reference re-keys the straddling elements (streaming: a whole step of 8, so
             * that the destination stays aligned) */
            const size_t cnt = nt ? 8 : (size_t)room;
            ref(d + ob * i, s + 8 * i, cnt, &b);
            i += cnt;
            continue;
        }
        size_t cnt = n - i;
        if ((uint64_t)cnt > room) cnt = (size_t)room;
        const size_t end = i + cnt / 8 * 8;
        const uint64_t key = mxp__sr_key(a->seed, (uint32_t)(idx >> 32));
        if (nt) {
            if (pf) sr_f64_run(d, s, i, end, lo, key, t, sat, 1, 1);
            else sr_f64_run(d, s, i, end, lo, key, t, sat, 1, 0);
        } else {
            if (pf) sr_f64_run(d, s, i, end, lo, key, t, sat, 0, 1);
            else sr_f64_run(d, s, i, end, lo, key, t, sat, 0, 0);
        }
        i = end;
    }
    if (nt && !a->stream) _mm_sfence(); /* a->stream: the caller fences */
    mxp__cvt_args b = *a;
    b.index0 = a->index0 + i;
    if (i < n) ref(d + ob * i, s + 8 * i, n - i, &b);
}

#define SR_F64(name, dt, ...)                                                                    \
    static void name(void *dst, const void *src, size_t n, const mxp__cvt_args *a)              \
    {                                                                                            \
        const f64t t = {__VA_ARGS__};                                                            \
        if (a->saturate) sr_from_f64(dst, src, n, a, dt, t, 1);                                  \
        else sr_from_f64(dst, src, n, a, dt, t, 0);                                              \
    }
/*                                 bits  m  bias fn maxfin       inf */
SR_F64(cvt_f32_f64_sr, MXP_FLOAT32, 32, 23, 127, 0, 0x7F7FFFFFu, 0x7F800000u)
SR_F64(cvt_f16_f64_sr, MXP_FLOAT16, 16, 10, 15, 0, 0x7BFFu, 0x7C00u)
SR_F64(cvt_bf16_f64_sr, MXP_BFLOAT16, 16, 7, 127, 0, 0x7F7Fu, 0x7F80u)
SR_F64(cvt_e4m3_f64_sr, MXP_FLOAT8_E4M3FN, 8, 3, 7, 1, 0x7Eu, 0u)
SR_F64(cvt_e5m2_f64_sr, MXP_FLOAT8_E5M2, 8, 2, 15, 0, 0x7Bu, 0x7Cu)

void mxp__cvt_register_f64_avx2(mxp__kernels *k)
{
    k->cvt[MXP_FLOAT32][MXP_FLOAT64][MXP__RNE] = cvt_f32_f64;
    k->cvt[MXP_FLOAT64][MXP_FLOAT32][MXP__RNE] = cvt_f64_f32;
    k->cvt[MXP_FLOAT64][MXP_FLOAT32][MXP__SR] = cvt_f64_f32;
    /* stochastic rounding from float64 (nearest-even to the narrow formats: cvt_compose.c) */
    k->cvt[MXP_FLOAT32][MXP_FLOAT64][MXP__SR] = cvt_f32_f64_sr;
    k->cvt[MXP_FLOAT16][MXP_FLOAT64][MXP__SR] = cvt_f16_f64_sr;
    k->cvt[MXP_BFLOAT16][MXP_FLOAT64][MXP__SR] = cvt_bf16_f64_sr;
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT64][MXP__SR] = cvt_e4m3_f64_sr;
    k->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT64][MXP__SR] = cvt_e5m2_f64_sr;
}
