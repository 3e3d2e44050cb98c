/*
 * cvt_avx512.c - float32 <-> float16 / bfloat16 / float8 (e4m3fn, e5m2) with AVX-512 (16 lanes).
 *
 * The algorithm is cvt_simd_impl.h's (shared with AVX2 and NEON); this file maps its
 * primitives to AVX-512 intrinsics (compares give __mmask16, selects are mask blends, narrowing
 * stores are VPMOVDW / VPMOVDB) and gives the AVX-512 versions of cvt_avx2.c's fast steps
 * (4-vector NaN check, float8 normal / zero-aware / subnormal steps, integer bfloat16 step,
 * float8 decodes through VCVTPH2PS). The table needs AVX512 F/BW/VL/DQ (dispatch.c).
 *
 * AVX512_BF16: VCVTNEPS2BF16 rounds float32 -> bfloat16 nearest-even in one instruction, but it
 * treats float32 subnormal inputs as zero (bfloat16 keeps them); bf16_hw2 sends a step with a
 * subnormal lane to the integer step instead. Its NaN rule (quiet bit set, payload truncated) is
 * the reference's, and NaN steps take the general path anyway. Registered separately
 * (mxp__cvt_register_avx512_bf16) and only on CPUs with AVX512_BF16: Skylake-X has AVX-512
 * without it. AVX512_FP16: only float64 -> float16, by VCVTPD2PH in inline assembly
 * (cvt_f16_f64_fp16__avx512, registered by mxp__cvt_register_avx512_fp16 on CPUs with it);
 * float32 <-> float16 is AVX512F's VCVTPS2PH / VCVTPH2PS (the F16C operation, bit-exact as
 * explained in cvt_avx2.c), and Zen 4 lacks FP16. The file is compiled with -mavx512bf16 (not
 * -mavx512fp16: gcc may then move 16-bit values with VMOVW, which only FP16 CPUs have);
 * VCVTNEPS2BF16 appears only in the BF16 kernels (cvt_bf16_f32_hw__avx512,
 * cvt_bf16_f16_hw__avx512, cvt_bf16_f64_hw__avx512).
 *
 * Testing: the development and CI machines have no AVX-512, so the tests also run this file on
 * emulated intrinsics (MXP_AVX512_EMULATED: tests/emu/avx512_emu.h, SIMDe plus a few written
 * from Intel's descriptions, VCVTNEPS2BF16 with its subnormal flush): test_isa_emu512 and
 * test_isa_exhaustive_emu512 check every entry, the BF16 kernel included, bit for bit against
 * the scalar reference. On an AVX-512 CPU, test_isa and test_isa_exhaustive check the real
 * instructions (the FP16 kernel is not emulated: it is checked natively only, on CPUs with it).
 */
#ifdef MXP_AVX512_EMULATED /* test builds: portable AVX-512 (tests/emu/avx512_emu.h) */
#include "avx512_emu.h"
#else
#include <immintrin.h>
#endif
#include <math.h>
#include <stdbool.h>

#include "kernels.h"
#include "nt_store.h"

#define MXP_SIMD_ISA avx512
#define VL 16
typedef __m512i V;
typedef __mmask16 M;

#define PRIM static inline __attribute__((always_inline))
PRIM V v_set1(uint32_t x) { return _mm512_set1_epi32((int)x); }
PRIM V v_and(V a, V b) { return _mm512_and_si512(a, b); }
PRIM V v_or(V a, V b) { return _mm512_or_si512(a, b); }
PRIM V v_xor(V a, V b) { return _mm512_xor_si512(a, b); }
PRIM V v_add(V a, V b) { return _mm512_add_epi32(a, b); }
PRIM V v_sub(V a, V b) { return _mm512_sub_epi32(a, b); }
PRIM V v_mullo(V a, V b) { return _mm512_mullo_epi32(a, b); }
#define v_srli(x, imm) _mm512_srli_epi32((x), (unsigned)(imm))
#define v_slli(x, imm) _mm512_slli_epi32((x), (unsigned)(imm))
PRIM V v_srlv(V x, V c) { return _mm512_srlv_epi32(x, c); } /* count >= 32 -> 0 */
PRIM V v_shls(V x, V c)
{
    /* as in cvt_avx2.c: one of the two shifts has a count >= 32 (unsigned) and gives 0 */
    return _mm512_or_si512(_mm512_sllv_epi32(x, c), _mm512_srlv_epi32(x, _mm512_sub_epi32(_mm512_setzero_si512(), c)));
}
PRIM M m_gt(V a, V b) { return _mm512_cmpgt_epi32_mask(a, b); }
PRIM M m_gtu(V a, V b) { return _mm512_cmpgt_epu32_mask(a, b); }
PRIM M m_eq(V a, V b) { return _mm512_cmpeq_epi32_mask(a, b); }
PRIM V v_sel(M m, V t, V f) { return _mm512_mask_blend_epi32(m, f, t); } /* m ? t : f */
PRIM V v_inc(V x, M m) { return _mm512_mask_add_epi32(x, m, x, _mm512_set1_epi32(1)); }
PRIM V v_i2f_bits(V x) { return _mm512_castps_si512(_mm512_cvtepi32_ps(x)); }
PRIM V v_iota(void) { return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
PRIM V ld32(const void *p) { return _mm512_loadu_si512(p); }
PRIM V ld16(const void *p) { return _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)); }
PRIM V ld8(const void *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
PRIM void st32(void *p, V x) { _mm512_storeu_si512(p, x); }
PRIM void st16x2(void *p, V x, V y)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(x)); /* VPMOVDW: truncate */
    _mm256_storeu_si256((__m256i *)((char *)p + 32), _mm512_cvtepi32_epi16(y));
}
PRIM void st16x2_nt(void *p, V x, V y)
{
    MXP__STREAM512(p, _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(x)),
                                              _mm512_cvtepi32_epi16(y), 1));
}
PRIM void st8x2_nt(void *p, V x, V y)
{
    MXP__STREAM256((__m256i *)p, _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(x)),
                                                              _mm512_cvtepi32_epi8(y), 1));
}
PRIM void st8x2(void *p, V x, V y)
{
    _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8(x)); /* VPMOVDB: truncate */
    _mm_storeu_si128((__m128i *)((char *)p + 16), _mm512_cvtepi32_epi8(y));
}
PRIM M m_or(M a, M b) { return (M)(a | b); }
PRIM M m_and(M a, M b) { return (M)(a & b); }
PRIM bool m_any(M m) { return m != 0; }
PRIM V v_keep(M m, V x) { return _mm512_maskz_mov_epi32(m, x); }

/* 32 float16 / bfloat16 results (words lo: elements 0-15, hi: 16-31) to p; sat: a result that
 * is +-infinity (magnitude `inf`) becomes +-max finite (the pattern below it: inf - 1). */
PRIM void st16_vec(void *p, V h, short inf, int sat, int nt)
{
    if (sat) {
        const __mmask32 m = _mm512_cmpeq_epi16_mask(_mm512_and_si512(h, _mm512_set1_epi16(0x7FFF)),
                                                    _mm512_set1_epi16(inf));
        h = _mm512_mask_sub_epi16(h, m, h, _mm512_set1_epi16(1));
    }
    if (nt) MXP__STREAM512(p, h);
    else _mm512_storeu_si512(p, h);
}
PRIM void st16_words(void *p, __m256i lo, __m256i hi, short inf, int sat, int nt)
{
    st16_vec(p, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), inf, sat, nt);
}

/* AVX512F VCVTPS2PH / VCVTPH2PS: the same operation as F16C's (cvt_avx2.c, tested there). */
#define MXP_SIMD_HW_F16 1
PRIM void hw_f16_st2(void *p, V x, V y, int sat, int nt)
{
    st16_words(p, _mm512_cvtps_ph(_mm512_castsi512_ps(x), _MM_FROUND_TO_NEAREST_INT),
               _mm512_cvtps_ph(_mm512_castsi512_ps(y), _MM_FROUND_TO_NEAREST_INT), 0x7C00, sat, nt);
}
PRIM void hw_f16_st2_rz(void *p, V x, V y, int nt) /* truncating: see cvt_avx2.c */
{
    st16_words(p, _mm512_cvtps_ph(_mm512_castsi512_ps(x), _MM_FROUND_TO_ZERO),
               _mm512_cvtps_ph(_mm512_castsi512_ps(y), _MM_FROUND_TO_ZERO), 0x7C00, 0, nt);
}
PRIM V hw_f16_ld(const void *p)
{
    return _mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)));
}

/* The ISA-specific fast steps of cvt_avx2.c (see there for the arithmetic), with 16 lanes and
 * mask registers. */
#ifndef MXP_AVX512_EMULATED /* the emulated vector type lives in memory, not in a register */
#define MXP_SIMD_PIN(v) __asm__("" : "+v"(v))
#endif

#define MXP_SIMD_ANY_NAN4 1
PRIM bool any_nan4(V x, V y, V z, V w)
{
    const M u = _mm512_cmp_ps_mask(_mm512_castsi512_ps(x), _mm512_castsi512_ps(y), _CMP_UNORD_Q);
    const M v = _mm512_cmp_ps_mask(_mm512_castsi512_ps(z), _mm512_castsi512_ps(w), _CMP_UNORD_Q);
    return (u | v) != 0;
}

/*
 * float32 -> float8 nearest-even on the signed bits, as cvt_avx2.c's narrow8_words but kept in
 * dwords (masks make the range test one compare per vector):
 *   tq = (u + add + bit D of u) >> D = S << (31 - D) | q,   q = tq & (2^(31-D) - 1)
 * taken iff minq <= q <= maxq (unsigned q - minq <= maxq - minq); the byte is q | S << 7, and
 * S << 7 is tq >> (24 - D) masked to bit 7 (tq has nothing above bit 31 - D).
 */
PRIM V n8_tq(V x, int D, V k)
{
    const V lsb = _mm512_and_si512(_mm512_srli_epi32(x, (unsigned)D), _mm512_set1_epi32(1));
    return _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, k), lsb), (unsigned)D);
}
PRIM M n8_bad(V tq, V qm, V mn, V span)
{
    return _mm512_cmpgt_epu32_mask(_mm512_sub_epi32(_mm512_and_si512(tq, qm), mn), span);
}
PRIM V n8_byte(V tq, V qm, int D)
{
    /* for a lane taken, q <= maxfin < 0x80: bits 0..6 from tq, bit 7 (S) from tq >> (24 - D),
     * which has nothing above it; VPTERNLOGD 0xE4 = C ? A : B bit by bit, C = 0x7F */
    (void)qm;
    return _mm512_ternarylogic_epi32(tq, _mm512_srli_epi32(tq, (unsigned)(24 - D)), _mm512_set1_epi32(0x7F), 0xE4);
}
/* 64 byte lanes (4 vectors) -> 64 bytes at p; streaming as two 32-byte stores (p is only
 * 2*VL = 32-byte aligned there: a 2*VL step before may have moved it by 32) */
PRIM void n8_store4(void *p, V b0, V b1, V b2, V b3, int nt)
{
    /* VPACKUSDW / VPACKUSWB (lanes 0..255 pass unchanged) work within 128-bit lanes; one VPERMD
     * puts the 16 dwords in element order (quant_avx512.c's f8_pack) */
    const V b = _mm512_packus_epi16(_mm512_packus_epi32(b0, b1), _mm512_packus_epi32(b2, b3));
    const V v = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), b);
    if (nt) {
        MXP__STREAM256((__m256i *)p, _mm512_castsi512_si256(v));
        MXP__STREAM256((__m256i *)p + 1, _mm512_extracti64x4_epi64(v, 1));
    } else {
        _mm512_storeu_si512(p, v);
    }
}
#define MXP_SIMD_NARROW8_FAST 1
/*
 * The fast loop's step, on 16-bit lanes: half the vector operations of the dword arithmetic
 * above for the rounding and the range test. The high words of two float32 vectors (one
 * VPERMT2W, elements in order) keep the sign, the exponent, the top 7 mantissa bits; the
 * dropped low word only matters through "is it nonzero", which is or-ed into bit 0 (a sticky
 * bit: rounding to odd, so the one rounding after it is exact). For float8, D >= 20, so bit 0
 * is below the rounding bit (D - 17 >= 3) and the word w = hi | (lo != 0) rounds at D - 16
 * exactly as u rounds at D: the nearest-even decision reads only the kept lsb, the rounding
 * bit and "anything below it nonzero", which w keeps. The arithmetic is n8_tq's modulo 2^16:
 *   tq = (w + add_w + bit (D - 16) of w) >> (D - 16),   add_w = add >> 16,
 * which gives the same S << (15 - D') | q as the dword tq (add's low half is 0xFFFF and its
 * high half 2^(D'-1) - 1 - rebias >> 16: the floor division splits). Then the range test as
 * above and the byte by VPMADDUBSW, on 32 lanes at once, and VPACKUSWB + VPERMQ put 64 bytes in
 * order.
 * AMD Zen 5, f32 -> e4m3fn in cache: 0.058 ns/element with the dword step (n8_tq, n8_bad,
 * n8_byte, which the zero-aware step below still uses), 0.046-0.049 with this one; e5m2 0.050
 * -> 0.037 (bench/RESULTS.md, session 12). AMD Zen 4 (session 21, with the later steps): e4m3fn
 * 0.078, e5m2 0.075 in cache, against the AVX2 kernel's 0.114 and 0.091, so Zen 4's dispatch
 * choices (dispatch.c) take this kernel in cache too now. Since session 22 the float32 steps
 * fold the lsb into the sticky bit and minq into the add (n8m_word / n8m_tq below), and since
 * session 40 the bfloat16 source's step (n8w_tq, whose words have no dropped low half) folds
 * minq in too.
 */
/* x >> Dw on 16-bit lanes for the counts used (4 and 5 for e4m3fn and e5m2 from float32 or
 * bfloat16; 7 to 12 in sr8w16_codes): written with literal counts because the emulated
 * intrinsics (SIMDe under clang) insist on a constant expression; inlined, the switch folds
 * away */
PRIM V srli16_dw(V x, int Dw)
{
    switch (Dw) {
    case 4: return _mm512_srli_epi16(x, 4);
    case 5: return _mm512_srli_epi16(x, 5);
    case 7: return _mm512_srli_epi16(x, 7);
    case 8: return _mm512_srli_epi16(x, 8);
    case 9: return _mm512_srli_epi16(x, 9);
    case 11: return _mm512_srli_epi16(x, 11);
    default: return _mm512_srli_epi16(x, 12);
    }
}
PRIM V n8w_tq(V w, int Dw, V k)
{
    /* + 1 where bit Dw (the kept lsb) is set: VPTESTMW and a masked add, one operation fewer than
     * shift, and, add (AMD Zen 5, in cache, five alternating runs: bf16 -> e4m3fn 0.0306 -> 0.0283
     * ns/element, f32 -> e4m3fn 0.0471 -> 0.0454; bench/RESULTS.md session 17) */
    const __mmask32 odd = _mm512_test_epi16_mask(w, _mm512_set1_epi16((short)(1 << Dw)));
    const V t = _mm512_add_epi16(w, k);
    return srli16_dw(_mm512_mask_add_epi16(t, odd, t, _mm512_set1_epi16(1)), Dw);
}
PRIM V n8w_byte(V tq, int Dw)
{
    /* for a lane taken, tq's low byte is q (< 0x80) and its high byte S << (7 - Dw); VPMADDUBSW
     * with bytes (1, 2^Dw) gives q + S * 128 (cvt_avx2.c's narrow8_store4) */
    return _mm512_maddubs_epi16(tq, _mm512_set1_epi16((short)(1 | (1 << Dw) << 8)));
}
/* the byte of a +-0 lane in word w (a float32's high word or a bfloat16): its sign */
PRIM V n8w_sign(V w)
{
    V m = _mm512_set1_epi16(0x80);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(m); /* kept in a register (gcc rebuilt it in every step of sr8_zrun) */
#endif
    return _mm512_and_si512(_mm512_srli_epi16(w, 8), m);
}
/* bytes b with the lanes of mask z replaced by the signs of w's lanes (their +-0 results) */
PRIM V n8w_zbyte(V b, __mmask32 z, V w) { return _mm512_mask_mov_epi16(b, z, n8w_sign(w)); }
/* The word step's VPERMT2W indices of the low / high words of two vectors in element order
 * (dword lane i: words 4i and 4i + 2, then + 1). */
PRIM V n8w_ilo(void)
{
    const V i4 = _mm512_slli_epi32(v_iota(), 2);
    return _mm512_add_epi32(_mm512_or_si512(i4, _mm512_slli_epi32(i4, 16)), v_set1(0x00020000u));
}
PRIM V n8w_ihi(void) { return _mm512_add_epi32(n8w_ilo(), v_set1(0x00010001u)); }
/* the high words of x's and y's 32 dwords, in element order, to p: one VPERMT2W for the two
 * shifts right by 16 and two VPMOVDW of st16x2. Stochastic rounding to bfloat16 stores its
 * fast steps so: AMD EPYC Zen 5, in cache, four alternating runs: 0.062-0.063 -> 0.054-0.057
 * ns/element (bench/RESULTS.md session 14). */
#define MXP_SIMD_ST16_HI2 1
PRIM void st16_hi2(void *p, V x, V y, int nt)
{
    st16_vec(p, _mm512_permutex2var_epi16(x, n8w_ihi(), y), 0x7F80, 0, nt);
}
/* two vectors of 32 byte lanes (words < 256) -> 64 bytes in element order (n8w_pack), stored at
 * p (n8w_put): streaming as two 32-byte stores (p is only 2*VL = 32-byte aligned there, as
 * n8_store4) */
PRIM V n8w_pack(V b0, V b1)
{
    return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), _mm512_packus_epi16(b0, b1));
}
PRIM void n8w_put(void *p, V v, int nt)
{
    if (nt) {
        MXP__STREAM256((__m256i *)p, _mm512_castsi512_si256(v));
        MXP__STREAM256((__m256i *)p + 1, _mm512_extracti64x4_epi64(v, 1));
    } else {
        _mm512_storeu_si512(p, v);
    }
}
/* n8w_put for a 64-byte aligned p when streaming: one 64-byte store (the 16-bit sources' float8
 * steps, whose loops align the destination to 64 bytes: AMD Zen 4, six alternating runs of
 * bench_convert --isa avx512-own, medians, f16 -> e4m3fn at 2^26 0.0986 -> 0.0968 ns/element,
 * within the noise but never slower in cache; session 40) */
PRIM void n8w_put64(void *p, V v, int nt)
{
    if (nt) MXP__STREAM512(p, v);
    else _mm512_storeu_si512(p, v);
}
/* the word step of narrow8_fast4 / narrow8_fast4d: 4*VL float32 -> two vectors of 32 byte lanes
 * (words < 256) holding each code minus minq (mod 256; n8w_store_mn adds it back) and the lanes
 * outside the normal range, whose bytes are wrong. Two operations fewer per 32 lanes than
 * the session 21 step (the high and low words or-ed, n8w_tq, a range test with a VPSUBW):
 *  - the kept lsb joins the sticky bit: s = (l | (h & 2^Dw)) != 0 (since session 31 by a test
 *    of each dword, n8m_word), w = h | s, and tq = (w + 2^(Dw-1) - 1 - rebias) >> Dw rounds up iff the rounding
 *    bit is set and anything below it, the kept lsb included, is nonzero: nearest-even, with
 *    no VPTESTMW and masked add for the lsb;
 *  - minq << Dw is subtracted in the same add (a multiple of 2^Dw: the rounding is unchanged),
 *    so the range test is (tq' & qm) > maxq - minq without a VPSUBW: a lane with q < minq
 *    borrows into the sign bit and its masked value is at least 2^(15-Dw) - minq > maxq - minq.
 *    For a lane taken, tq' = S << (15 - Dw) | (q - minq) and VPMADDUBSW gives S * 128 + q - minq.
 * AMD Zen 4, in cache, five alternating runs of bench_convert (--isa avx512-own): e4m3fn 0.0785
 * -> 0.0730 ns/element (0.55x -> 0.59x of the load/store loop), e5m2 0.0747 -> 0.0686; 2^26 and
 * clang builds unchanged (bench/RESULTS.md, session 22).
 */
typedef struct n8w_out {
    V b0, b1;
    __mmask32 bad0, bad1; /* the lanes of b0 (elements 0 .. 31) and of b1 (32 .. 63) */
    uint32_t mn;          /* minq: the bytes are code - minq */
} n8w_out;
/* the constants of n8w_step and narrow8_fast4t (pinned: gcc rebuilt some in every step) */
typedef struct n8m_c {
    V ilo, ihi, k, qm, span, km, b16;
    int Dw;
    uint32_t mn;
} n8m_c;
PRIM n8m_c n8m_consts(int D, uint32_t add, uint32_t minq, uint32_t maxq)
{
    n8m_c c;
    c.Dw = D - 16;
    c.mn = minq;
    c.ilo = n8w_ilo();
    c.ihi = n8w_ihi();
    c.k = _mm512_set1_epi16((short)((add >> 16) - (minq << c.Dw))); /* add >> 16: the rounding add's high half */
    c.qm = _mm512_set1_epi16((short)((1u << (15 - c.Dw)) - 1u));
    c.span = _mm512_set1_epi16((short)(maxq - minq));
    c.km = v_set1(0xFFFFu | (uint32_t)1 << D); /* n8m_word: the low word and the kept lsb */
    c.b16 = v_set1(0x10000u);
#ifdef MXP_SIMD_PIN
    /* opaque, so that the loops keep them in registers as they are: gcc rebuilt some in every
     * step, and clang 14 once rewrote an operation with a constant as three (a VPMINUW with 1 of
     * the session 22 step, f32 -> e5m2 in cache 0.048 ns/element against gcc's 0.036 on Zen 5) */
    MXP_SIMD_PIN(c.k);
    MXP_SIMD_PIN(c.qm);
    MXP_SIMD_PIN(c.span);
    MXP_SIMD_PIN(c.km);
    MXP_SIMD_PIN(c.b16);
#endif
    return c;
}
/*
 * The high words of x and y (elements in order) with the sticky bit: h | ((l | (h & kb)) != 0),
 * set in each dword before the one VPERMT2W of the high words: VPTESTMD of u & (0xFFFF | 2^D)
 * (the low word or the kept lsb nonzero) and a masked VPORD of bit 16. Until session 31 the low
 * words went through a VPERMT2W of their own, then VPTERNLOGD, VPMINUW with 1 and VPORD on the
 * words: the same operation count, but on the Intel Xeon of session 31 VPERMT2W issues one
 * every 2 cycles, on the same port as the tests (VPTESTMD, VPCMPUW: one per cycle), and the
 * float32 -> float8 step was bound there. There, f32 -> e5m2 in cache 0.0765 -> 0.066
 * ns/element, e4m3fn 0.0815 -> 0.070 (one process per build, median of 301 calls, two
 * alternating runs; bench/RESULTS.md, session 31). AMD Zen 4 (session 39, the builds before and
 * after it, five alternating runs each, medians, before -> after): in cache e4m3fn 0.0709 ->
 * 0.0729 (3% slower, the noise threshold of dispatch.c's rule), e5m2 0.0711 -> 0.0709, at 2^26
 * ties within the noise; kept on every CPU. Zen 5 has not run it.
 */
PRIM V n8m_word(V x, V y, const n8m_c *c)
{
    const V xs = _mm512_mask_or_epi32(x, _mm512_test_epi32_mask(x, c->km), x, c->b16);
    const V ys = _mm512_mask_or_epi32(y, _mm512_test_epi32_mask(y, c->km), y, c->b16);
    return _mm512_permutex2var_epi16(xs, c->ihi, ys);
}
PRIM V n8m_tq(V w, const n8m_c *c) { return srli16_dw(_mm512_add_epi16(w, c->k), c->Dw); }
PRIM __mmask32 n8m_bad(V tq, const n8m_c *c)
{
    return _mm512_cmpgt_epu16_mask(_mm512_and_si512(tq, c->qm), c->span);
}
/* n8w_zbyte for n8m bytes: the sign byte minus minq, (w >> 8 & 0x80) ^ (-minq & 0xFF) (bit 7 of
 * -minq is set, so subtracting minq from 0x80 only clears it) */
PRIM V n8m_zbyte(V b, __mmask32 z, V w, const n8m_c *c)
{
    V m = _mm512_set1_epi16(0x80);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(m);
#endif
    const V nm = _mm512_set1_epi16((short)(-c->mn & 0xFFu));
    const V sm = _mm512_ternarylogic_epi32(_mm512_srli_epi16(w, 8), m, nm, 0x6A); /* (A & B) ^ C */
    return _mm512_mask_mov_epi16(b, z, sm);
}
PRIM n8w_out n8w_step(V x, V y, V z, V w, int D, uint32_t add, uint32_t minq, uint32_t maxq)
{
    const n8m_c c = n8m_consts(D, add, minq, maxq);
    const V t0 = n8m_tq(n8m_word(x, y, &c), &c), t1 = n8m_tq(n8m_word(z, w, &c), &c);
    n8w_out o;
    o.bad0 = n8m_bad(t0, &c);
    o.bad1 = n8m_bad(t1, &c);
    o.b0 = n8w_byte(t0, c.Dw);
    o.b1 = n8w_byte(t1, c.Dw);
    o.mn = minq;
    return o;
}
/* n8w_step's 64 bytes in element order with minq added back (no carry: code < 256), and those
 * stored (n8w_store_mn) */
PRIM V n8w_pack_mn(V b0, V b1, uint32_t mn)
{
    V m = _mm512_set1_epi8((char)mn);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(m); /* gcc rebuilt it in every step */
#endif
    return _mm512_add_epi8(n8w_pack(b0, b1), m);
}
PRIM void n8w_store_mn(void *p, V b0, V b1, uint32_t mn, int nt) { n8w_put(p, n8w_pack_mn(b0, b1, mn), nt); }
/* The fast step in parts (cvt_simd_impl.h's narrow8_fast4p; there is no narrow8_fast4 here),
 * for a caller that takes a lone lane below the normal range itself (MXP_SIMD_NARROW8_PATCH in
 * cvt_simd_impl.h): the step's codes and its lanes outside the normal range; those lanes as one
 * mask; the store; the store with the bytes of a mask set to a code (narrow8_store_lone). The
 * lone lane goes in by that masked byte broadcast after the pack. Until session 23 it went into
 * its 16-bit lane before the pack, in b0 or b1 by the element: clang 14 chose between the two
 * through their addresses, so it kept b0 and b1 on the stack in every step. */
#define MXP_SIMD_NARROW8_PATCH 1
typedef n8w_out n8p;
PRIM n8p narrow8_codes4(V x, V y, V z, V w, int D, uint32_t add, uint32_t minq, uint32_t maxq)
{
    return n8w_step(x, y, z, w, D, add, minq, maxq);
}
PRIM void narrow8_store(void *p, const n8p *r, int nt) { n8w_store_mn(p, r->b0, r->b1, r->mn, nt); }
PRIM uint64_t narrow8_bad(const n8p *r) { return (uint64_t)r->bad1 << 32 | r->bad0; }
/* narrow8_store with the bytes of mask lone (element order) set to code, after minq is added */
PRIM void narrow8_store_lone(void *p, const n8p *r, uint64_t lone, uint32_t code, int nt)
{
    n8w_put(p, _mm512_mask_set1_epi8(n8w_pack_mn(r->b0, r->b1, r->mn), (__mmask64)lone, (char)code), nt);
}

/* narrow8_fast4 that always stores (not streaming): returns nonzero when a lane was outside the
 * normal range, whose bytes are then wrong and the caller fixes them (narrow8_fix4) or redoes
 * the step (MXP_SIMD_NARROW8_DEFER in cvt_simd_impl.h) */
#define MXP_SIMD_NARROW8_DEFER 1
PRIM int narrow8_fast4d(void *p, V x, V y, V z, V w, int D, uint32_t add, uint32_t minq, uint32_t maxq)
{
    const n8w_out o = n8w_step(x, y, z, w, D, add, minq, maxq);
    n8w_store_mn(p, o.b0, o.b1, o.mn, 0);
    return (o.bad0 | o.bad1) != 0;
}

/* The lanes below the normal range of a step that narrow8_fast4d stored at p (the other lanes'
 * bytes are right): their bytes rewritten by masked stores, as narrow8_fast4t computes them
 * (a + magic with {rn-sae}: the low word is the code; the sign or-ed in). False when a lane
 * overflows or is NaN (|x| > hi), some bytes then stored and the step to be redone whole. */
PRIM bool narrow8_fix4(unsigned char *p, const unsigned char *s, int D, uint32_t lo, uint32_t hi)
{
    const int m = 23 - D, bias = m == 3 ? 7 : 15; /* e4m3fn or e5m2 */
    const __m512 magic = _mm512_castsi512_ps(v_set1((uint32_t)(127 + 24 - bias - m) << 23));
    const V ab = v_set1(0x7FFFFFFFu), L = v_set1(lo), H = v_set1(hi), sg = v_set1(0x80u);
    __mmask16 hard = 0;
    for (int j = 0; j < 4; j++) {
        const V x = ld32(s + 4 * VL * j), a = v_and(x, ab);
        hard |= m_gt(a, H);
        const V sv = _mm512_castps_si512(
            _mm512_add_round_ps(_mm512_castsi512_ps(a), magic, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* sv | (x >> 24 & 0x80) */
        const V b = _mm512_ternarylogic_epi32(sv, _mm512_srli_epi32(x, 24), sg, 0xF8);
        _mm512_mask_cvtepi32_storeu_epi8(p + VL * j, m_gt(L, a), b);
    }
    return hard == 0;
}
/*
 * Stochastic rounding to float8 on 16-bit lanes (the fast loop of sr_run): the random bits are
 * added to the float32 bits as in sr_fast, t = u + (r >> (32 - D)) (in range, the carry stops
 * below the sign), then the high words of t (VPERMT2W) hold sign, exponent and the kept
 * mantissa bits: tq = (w - rebias_w) >> (D - 16) = S << (15 - D') | q, and VPMADDUBSW makes the
 * byte as in n8w_byte. The range test reads the high words of u: lo's low half is 0, so
 * a >= lo <=> a_w >= lo_w; hi (max finite exactly) is taken with a strict a_w < hi_w, which
 * sends |x| = max finite itself to the general path (it drops no bits) and keeps every taken
 * lane below it.
 */
#define MXP_SIMD_SR8_FAST 1
/* the lanes outside [lo, hi) (their high words aw = |hw|), as a 32-bit mask */
PRIM __mmask32 sr8w_out(V aw, uint32_t lo, uint32_t hi)
{
    V l = _mm512_set1_epi16((short)(lo >> 16)), span = _mm512_set1_epi16((short)((hi >> 16) - 1u - (lo >> 16)));
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(l); /* as n8w_sign's */
    MXP_SIMD_PIN(span);
#endif
    return _mm512_cmpgt_epu16_mask(_mm512_sub_epi16(aw, l), span);
}
/* the codes from the high words w of t = u + (r >> (32 - D)): rebias, shift, VPMADDUBSW */
PRIM V sr8w_code(V w, int D, V rebw, V mad)
{
    return _mm512_maddubs_epi16(srli16_dw(_mm512_sub_epi16(w, rebw), D - 16), mad);
}
/* the 32 codes (word lanes, S << 7 | q for the lanes in range), with the constants as vectors:
 * rebw = rebias >> 16 in every word, mad = n8w_byte's multipliers (sr8z_byte passes its pinned
 * ones) */
PRIM V sr8w_byte_v(V u0, V u1, V r0, V r1, V ihi, int D, V rebw, V mad)
{
    const V t0 = _mm512_add_epi32(u0, D == 20 ? _mm512_srli_epi32(r0, 12) : _mm512_srli_epi32(r0, 11));
    const V t1 = _mm512_add_epi32(u1, D == 20 ? _mm512_srli_epi32(r1, 12) : _mm512_srli_epi32(r1, 11));
    return sr8w_code(_mm512_permutex2var_epi16(t0, ihi, t1), D, rebw, mad);
}
/* sr8w_code's constants: rebias >> 16 in every word, n8w_byte's multipliers */
PRIM V sr8w_rebw(uint32_t rebias) { return _mm512_set1_epi16((short)(rebias >> 16)); }
PRIM V sr8w_mad(int D) { return _mm512_set1_epi16((short)(1 | (1 << (D - 16)) << 8)); }
PRIM V sr8w_byte(V u0, V u1, V r0, V r1, V ihi, int D, uint32_t rebias)
{
    return sr8w_byte_v(u0, u1, r0, r1, ihi, D, sr8w_rebw(rebias), sr8w_mad(D));
}
/* 32 word lanes (< 256) -> 32 bytes at p */
PRIM void sr8w_store(void *p, V b, int nt)
{
    const __m256i b8 = _mm512_cvtepi16_epi8(b);
    if (nt) MXP__STREAM256((__m256i *)p, b8);
    else _mm256_storeu_si256((__m256i *)p, b8);
}
/* The stochastic fast step (sr_run's MXP_SIMD_SR8_PATCH loop; there is no sr8_fast2 here): its
 * codes (word lanes) and its lanes outside [lo, hi) (*out, element order) */
PRIM V sr8_codes2(V u0, V u1, V r0, V r1, int D, uint32_t lo, uint32_t hi, uint32_t rebias, uint32_t *out)
{
    const V ihi = n8w_ihi();
    const V aw = _mm512_and_si512(_mm512_permutex2var_epi16(u0, ihi, u1), _mm512_set1_epi16(0x7FFF));
    *out = sr8w_out(aw, lo, hi);
    return sr8w_byte(u0, u1, r0, r1, ihi, D, rebias);
}
/* Stochastic rounding from a 16-bit format to float8 on the 32 words at p as loaded (srn_run's
 * fast step, MXP_SIMD_SR8_W16), no widening. For bfloat16 the words are the high words that
 * sr8_codes2 builds from their float32 values (whose low words are 0): the random bits join in
 * the word, x + (r >> (32 - Dw)) (sr8w_byte_v's dword add seen in the high word; its low-word
 * part, below 2^16, cannot carry into it), then the same rebias, shift and VPMADDUBSW. A float16
 * is the same with its own field widths: Dw = 10 - m dropped bits, rebias (15 - B) << 10. In
 * word terms (srn_run computes them from the two formats): Dw dropped bits, rebw the rebias, lw
 * and hw the range taken, lw <= |x| < hw (hw: max finite, which drops no bits and goes to the
 * general step, as in sr8w_out; float16 -> e5m2 has lw = 0: the two share their exponent field,
 * so the code is the float16 pattern's high byte everywhere, subnormals and zeros included). The
 * byte is VPMADDUBSW's low * 1 + high * 2^Dw: for Dw = 7 (float16 -> e4m3fn) the high multiplier
 * is -128 and the word q - 128 S, whose low byte, the only one sr8w_store keeps (VPMOVWB
 * truncates), is q + 128 S; for Dw = 8 the shifted word is the code already. AMD Zen 4,
 * bfloat16 -> e4m3fn, five alternating runs of bench_convert --isa avx512-own, medians: in cache
 * 0.198 -> 0.174 ns/element, at 2^26 0.234 -> 0.205 (session 40; nearest-even: 0.063 and 0.106);
 * float16 -> e5m2 and e4m3fn: bench/RESULTS.md, session 41. *out: the lanes outside, as a mask. */
#define MXP_SIMD_SR8_W16 1
/* sr8w16_codes' random addends, r >> (32 - Dw) in word lanes in element order, from the vector h
 * of the elements' random top halves (kernels.h's mxp__sr_bits_src: element j's is halfword j;
 * until session 46 each had a word of its own, and two hashed vectors gave them by VPERMT2W) */
PRIM V sr8w16_rwh(V h, int Dw) { return srli16_dw(h, 16 - Dw); }
/* halfwords 0 .. VL - 1 (hi = 0) or VL .. 2 VL - 1 of h zero-extended to dwords (srn_run's words) */
PRIM V sr_h16_ext(V h, int hi)
{
    return _mm512_cvtepu16_epi32(hi ? _mm512_extracti64x4_epi64(h, 1) : _mm512_castsi512_si256(h));
}
/* srb_run's and srh_run's halves in unpack order (MXP_SIMD_H16_UNPK, cvt_simd_impl.h): the
 * halfwords 0 .. 3 (hi = 0) or 4 .. 7 of each 128-bit lane of h zero-extended to dwords by
 * VPUNPCKLWD / VPUNPCKHWD, one operation where sr_h16_ext takes two (three for hi);
 * sr_h16_unpk3 shifts them right by 3 first, in one VPSRLW for both (r >> 19 for float16's 13
 * dropped bits) */
#define MXP_SIMD_H16_UNPK 1
PRIM V sr_h16_unpk(V h, int hi)
{
    return hi ? _mm512_unpackhi_epi16(h, _mm512_setzero_si512()) : _mm512_unpacklo_epi16(h, _mm512_setzero_si512());
}
PRIM V sr_h16_unpk3(V h, int hi) { return sr_h16_unpk(_mm512_srli_epi16(h, 3), hi); }
/* bfloat16 -> float16 on 16-bit lanes (the comment on bf16_f16_fix below explains the rule): the
 * in-range result of 32 lanes; *out: the lanes outside float16's normal range but +-0 */
PRIM V bf16_f16_w(V h, __mmask32 *out)
{
    const V a = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
    const __mmask32 nz = _mm512_test_epi16_mask(a, a);
    *out = nz & _mm512_cmpgt_epu16_mask(_mm512_sub_epi16(a, _mm512_set1_epi16(0x3880)),
                                        _mm512_set1_epi16(0x4780 - 0x3880 - 1));
    const V t = _mm512_maskz_add_epi16(nz, _mm512_slli_epi16(h, 3), _mm512_set1_epi16(0x4000));
    return _mm512_ternarylogic_epi32(t, h, _mm512_set1_epi16((short)0x8000), 0xF8); /* t | (h & 0x8000) */
}
/* srn_run's bfloat16 -> float16 steps that need no random bits (MXP_SIMD_BFH, cvt_simd_impl.h):
 * the 2*VL bfloat16 at s to float16 at d (64-byte aligned when nt: streaming) when every lane is
 * exact in float16 (bf16_f16_w's range, or +-0); returns 0, storing nothing, when one is not */
#define MXP_SIMD_BFH 1
PRIM int bfh_exact(unsigned char *d, const unsigned char *s, int nt)
{
    __mmask32 out;
    const V r = bf16_f16_w(_mm512_loadu_si512(s), &out);
    if (out != 0) return 0;
    if (nt) MXP__STREAM512(d, r);
    else _mm512_storeu_si512(d, r);
    return 1;
}
/* srn_run's bfloat16 -> float16 stochastic step for a step that bfh_exact did not take, with the
 * words w (VL finished words, half k of w element k's): every lane in [2^-31, 65280] or +-0 (a =
 * |x| in [0x3000, 0x477F]: a float32 exponent field E >= 96); returns 0, storing nothing, when one
 * is not. In dword lanes (VPUNPCKLWD / VPUNPCKHWD with 0, VPACKUSDW restores the order): below
 * float16's normal range (E <= 112) the result counts steps of 2^-24, of which the value holds S
 * >> k, S = the significand 1.m7 as an 8-bit integer << 2, k = 112 - E <= 16; the k dropped bits
 * put at the top of 16 bits, F = (S << (16 - k)) mod 2^16, round up iff F + the half >= 2^16
 * (kernels.h's rule: the dropped part's top 32 bits are F << 16, so the half's low word cannot
 * carry), and the carry out of F + half is bit 16 of their sum. +-0 gives 0 by the same
 * arithmetic (the shifts by k = 112 and 16 - k < 0 give 0). In the normal range, bfh_exact's exact
 * value, (a << 3) - (112 << 10). */
#define MXP_SIMD_BFH_TINY 1
PRIM V bfh_tiny_dw(V a, V h)
{
    const V E = _mm512_srli_epi32(a, 7);
    const V S = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi32(a, 2), v_set1(0x1FCu)), v_set1(0x200u));
    const V q = _mm512_srlv_epi32(S, _mm512_sub_epi32(v_set1(112u), E));
    const V F = _mm512_and_si512(_mm512_sllv_epi32(S, _mm512_sub_epi32(E, v_set1(96u))), v_set1(0xFFFFu));
    const V sub = _mm512_add_epi32(q, _mm512_srli_epi32(_mm512_add_epi32(F, h), 16));
    const V nrm = _mm512_sub_epi32(_mm512_slli_epi32(a, 3), v_set1(112u << 10));
    return _mm512_mask_mov_epi32(sub, _mm512_cmpgt_epu32_mask(E, v_set1(112u)), nrm);
}
PRIM int bfh_tiny(unsigned char *d, const unsigned char *s, V w, int nt)
{
    const V x = _mm512_loadu_si512(s), z = _mm512_setzero_si512();
    const V a = _mm512_and_si512(x, _mm512_set1_epi16(0x7FFF));
    const __mmask32 nz = _mm512_test_epi16_mask(a, a);
    if ((nz & _mm512_cmpgt_epu16_mask(_mm512_sub_epi16(a, _mm512_set1_epi16(0x3000)),
                                      _mm512_set1_epi16(0x477F - 0x3000))) != 0)
        return 0;
    const V r0 = bfh_tiny_dw(_mm512_unpacklo_epi16(a, z), _mm512_unpacklo_epi16(w, z));
    const V r1 = bfh_tiny_dw(_mm512_unpackhi_epi16(a, z), _mm512_unpackhi_epi16(w, z));
    const V r = _mm512_ternarylogic_epi32(_mm512_packus_epi32(r0, r1), x, _mm512_set1_epi16((short)0x8000), 0xF8);
    if (nt) MXP__STREAM512(d, r);
    else _mm512_storeu_si512(d, r);
    return 1;
}
/* srn_run's float16 -> bfloat16 stochastic steps on 16-bit lanes (MXP_SIMD_HBF): the 2*VL
 * float16 at s to bfloat16 at d (64-byte aligned when nt) with the random words w (VL words, half
 * k of w element k's) when every lane is normal or +-0; returns 0, storing nothing, when one is
 * not. A normal a = |x| = e << 10 | m drops its low 3 bits: adding the half's top 3 bits carries
 * out of them as often as stochastic rounding goes up (kernels.h's rule with D = 3), into the
 * exponent when m is all ones; then (t >> 3) + (112 << 7) rebiases the exponent from 15 to 127.
 * The largest, 0x7BFF, rounds at most to 0x4780, 2^16, which bfloat16 holds. +-0 stays +-0 (a
 * masked add). */
#define MXP_SIMD_HBF 1
PRIM int hbf_words(unsigned char *d, const unsigned char *s, V w, int nt)
{
    const V x = _mm512_loadu_si512(s);
    const V a = _mm512_and_si512(x, _mm512_set1_epi16(0x7FFF));
    const __mmask32 nz = _mm512_test_epi16_mask(a, a);
    const __mmask32 out = nz & _mm512_cmpgt_epu16_mask(_mm512_sub_epi16(a, _mm512_set1_epi16(0x0400)),
                                                       _mm512_set1_epi16(0x7C00 - 0x0400 - 1));
    if (out != 0) return 0;
    const V t = _mm512_add_epi16(a, _mm512_srli_epi16(w, 13));
    const V b = _mm512_maskz_add_epi16(nz, _mm512_srli_epi16(t, 3), _mm512_set1_epi16(0x3800));
    const V r = _mm512_ternarylogic_epi32(b, x, _mm512_set1_epi16((short)0x8000), 0xF8); /* b | (x & 0x8000) */
    if (nt) MXP__STREAM512(d, r);
    else _mm512_storeu_si512(d, r);
    return 1;
}
/* hbf_words' step when it failed: every lane widened (VCVTPH2PS, exact: a float16 subnormal is a
 * float32 normal) and its half added below the kept high word, as srb_run does from float32, the
 * round up being the carry out of the low word; returns 0, storing nothing, for a step with an
 * infinity or NaN. Out of the fast loop: inside hbf_words it slowed uniform data by 17% in
 * cache. */
PRIM int hbf_wide(unsigned char *d, const unsigned char *s, V w, int nt)
{
    const V x = _mm512_loadu_si512(s);
    if (_mm512_cmpge_epu16_mask(_mm512_and_si512(x, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(0x7C00)) != 0)
        return 0;
    const V u0 = hw_f16_ld(s), u1 = hw_f16_ld(s + 2 * VL);
    const V hi = _mm512_permutex2var_epi16(u0, n8w_ihi(), u1), lo = _mm512_permutex2var_epi16(u0, n8w_ilo(), u1);
    const __mmask32 up = _mm512_cmpgt_epu16_mask(lo, _mm512_add_epi16(lo, w)); /* the carry */
    const V r = _mm512_mask_add_epi16(hi, up, hi, _mm512_set1_epi16(1));
    if (nt) MXP__STREAM512(d, r);
    else _mm512_storeu_si512(d, r);
    return 1;
}
/* the dwords hw[j] << 16 | lw[j] for halfwords j = 0 .. VL - 1 (hi = 0) or VL .. 2 VL - 1: one
 * VPERMT2W (dword k takes word k + 16 hi of lw, then of hw) */
PRIM V sr_h16_pair(V lw, V hw, int hi)
{
    const V k = _mm512_or_si512(v_iota(), _mm512_slli_epi32(v_iota(), 16));
    return _mm512_permutex2var_epi16(lw, _mm512_add_epi32(k, v_set1(hi ? 0x00300010u : 0x00200000u)), hw);
}
/* the codes of the words t = x + rw (sr8w16_codes, sr8w16_codes_in; rebw, mad: sr8w_code's) */
PRIM V sr8w16_tcode(V t, int Dw, V rebw, V mad) { return Dw == 8 ? srli16_dw(t, 8) : sr8w_code(t, Dw + 16, rebw, mad); }
/* b with the lanes where x is +-0 set to their codes, the sign alone (x's high byte) */
PRIM V sr8w16_zcode(V b, V x, V mag)
{
    return _mm512_mask_mov_epi16(b, _mm512_testn_epi16_mask(x, mag), _mm512_srli_epi16(x, 8));
}
PRIM V sr8w16_codes(const unsigned char *p, V rw, int Dw, uint32_t lw, uint32_t hw, uint32_t rebw, uint32_t *out)
{
    const V x = _mm512_loadu_si512(p);
    *out = sr8w_out(_mm512_and_si512(x, _mm512_set1_epi16(0x7FFF)), lw << 16, hw << 16);
    return sr8w16_tcode(_mm512_add_epi16(x, rw), Dw, sr8w_rebw(rebw << 16), sr8w_mad(Dw + 16));
}
/* sr8w16_codes in two parts, for srn_run's streaming loop on the CPUs set to test ahead
 * (kernels.h's mxp__avx512_ahead, MXP_SIMD_SR8_AHEAD in cvt_simd_impl.h): the class of the 32
 * words at p, tested steps before their codes: 0 when every word is in [lw, hw), 1 when those
 * outside are all +-0 (ReLU data), 2 otherwise; and the codes of a step of class 0 or 1 (zeros
 * = 1: the +-0 lanes' codes, their sign, put in as sr8w16_zeros does), without the test. Their
 * constants (sr8a_consts) are built once per run and pinned (built in the step, gcc rebuilt
 * three of them in every step). */
#define MXP_SIMD_SR8_AHEAD 1
typedef struct {
    V mag, l, span, rebw, mad;
} sr8a_c;
PRIM sr8a_c sr8a_consts(uint32_t lw, uint32_t hw, uint32_t rebw, int Dw)
{
    sr8a_c c;
    c.mag = _mm512_set1_epi16(0x7FFF);
    c.l = _mm512_set1_epi16((short)lw);
    c.span = _mm512_set1_epi16((short)(hw - 1u - lw));
    c.rebw = sr8w_rebw(rebw << 16);
    c.mad = sr8w_mad(Dw + 16);
    return c;
}
PRIM unsigned char sr8w16_class(const unsigned char *p, const sr8a_c *c)
{
    const V x = _mm512_loadu_si512(p);
    const uint32_t out = _mm512_cmpgt_epu16_mask(_mm512_sub_epi16(_mm512_and_si512(x, c->mag), c->l), c->span);
    const uint32_t z = _mm512_testn_epi16_mask(x, c->mag);
    return (unsigned char)((out != 0) + ((out & ~z) != 0));
}
PRIM V sr8w16_codes_in(const unsigned char *p, V rw, int Dw, const sr8a_c *c, int zeros)
{
    const V x = _mm512_loadu_si512(p), b = sr8w16_tcode(_mm512_add_epi16(x, rw), Dw, c->rebw, c->mad);
    return zeros ? sr8w16_zcode(b, x, c->mag) : b;
}
/* After sr8w16_codes found lanes outside (out): when they are all +-0 (ReLU data: nearly every
 * step of e4m3fn), their codes (the sign alone: the word's high byte) put into *b, and 1; else 0
 * (*b unchanged). Before, such a step widened and took the zero-aware float32 step. AMD Zen 4,
 * --relu data (half +0), three alternating runs, medians, ns/element, avx512 / avx2 tables:
 * bf16 -> e4m3fn stochastic in cache 0.270 -> 0.175 / 0.373 -> 0.213, at 2^26 0.306 -> 0.195 /
 * 0.411 -> 0.238; f16 -> e4m3fn in cache 0.282 -> 0.176 / 0.371 -> 0.223 (session 41). */
PRIM int sr8w16_zeros(const unsigned char *p, V *b, uint32_t out, uint32_t lw, uint32_t hw)
{
    (void)lw;
    (void)hw;
    const V x = _mm512_loadu_si512(p);
    const __mmask32 z = _mm512_testn_epi16_mask(x, _mm512_set1_epi16(0x7FFF));
    if ((out & ~(uint32_t)z) != 0) return 0;
    *b = _mm512_mask_mov_epi16(*b, z, _mm512_srli_epi16(x, 8));
    return 1;
}
/* sr8_codes2's codes with the lanes of mask one replaced by code (to be stored by sr8w_store) */
#define MXP_SIMD_SR8_PATCH 1
#define MXP_SIMD_SR8W16_PATCH 1
PRIM uint32_t sr8w16_lanes(uint32_t out) { return out; } /* sr8w16_codes' out is the lane mask */
PRIM V sr8_patch(V b, uint32_t one, uint32_t code) { return _mm512_mask_set1_epi16(b, (__mmask32)one, (short)code); }

/* sr8_fast2zc's constants, loaded once per run from sr8z_tab and pinned: built in the step, gcc
 * rebuilt six of them in every step; built by broadcasts at the run's start (18 of them, each a
 * 64-bit immediate and a VPBROADCASTQ), they cost more than the step saved on data that enters
 * the run every few steps */
typedef struct sr8zc {
    V ilo, ihi, absw, low, span, rebw, mad, abs32, one, magic, scale, ms;
    int Dw;
} sr8zc;
/* sr8z_tab[f] for e4m3fn (f = 0: m = 3, bias = 7, max finite code 0x7E) and e5m2 (f = 1: m = 2,
 * bias = 15, 0x7B), as sr_consts (cvt_simd_impl.h) makes lo, hi and rebias: per row 16 dwords */
#define SR8Z_X16(v) {v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v}
#define SR8Z_W2(w) ((((uint32_t)(w)) & 0xFFFFu) * 0x00010001u) /* a word in both halves */
#define SR8Z_LO(b) ((uint32_t)(128 - (b)) << 23)
#define SR8Z_REB(b) ((uint32_t)(127 - (b)) << 23)
#define SR8Z_HI(m, b, mf) (((uint32_t)(mf) << (23 - (m))) + SR8Z_REB(b))
#define SR8Z_ROWS(m, b, mf)                                                                       \
    {SR8Z_X16(SR8Z_W2(SR8Z_LO(b) >> 16)),                                                         \
     SR8Z_X16(SR8Z_W2((SR8Z_HI(m, b, mf) >> 16) - 1u - (SR8Z_LO(b) >> 16))),                      \
     SR8Z_X16(SR8Z_W2(SR8Z_REB(b) >> 16)), SR8Z_X16(SR8Z_W2(1u | 1u << (7 - (m)) << 8)),          \
     SR8Z_X16((uint32_t)(127 + 24 - (b) - (m)) << 23), SR8Z_X16((uint32_t)(127 + 31 + (b) + (m)) << 23)}
enum { SR8Z_LOW, SR8Z_SPAN, SR8Z_REBW, SR8Z_MAD, SR8Z_MAGIC, SR8Z_SCALE, SR8Z_ROWS_N };
static _Alignas(64) const uint32_t sr8z_tab[2][SR8Z_ROWS_N][16] = {SR8Z_ROWS(3, 7, 0x7Eu), SR8Z_ROWS(2, 15, 0x7Bu)};
static _Alignas(64) const uint32_t sr8z_com[4][16] = {SR8Z_X16(0x7FFF7FFFu), SR8Z_X16(0x7FFFFFFFu), SR8Z_X16(1u),
                                                      SR8Z_X16((uint32_t)(127 + 55) << 23)}; /* magic * scale = 2^55 */
PRIM V sr8z_ld(const uint32_t *row)
{
    V v = _mm512_load_si512((const void *)row);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(v);
#endif
    return v;
}
/* the constants for D = 20 (e4m3fn) or 21 (e5m2); the tables' addresses go through an empty asm,
 * since gcc otherwise read their contents and went back to the broadcasts */
PRIM sr8zc sr8z_consts(int D)
{
    const uint32_t *tf = &sr8z_tab[D - 20][0][0], *tc = &sr8z_com[0][0];
#if defined(__GNUC__) || defined(__clang__)
    __asm__("" : "+r"(tf), "+r"(tc));
#endif
    sr8zc c;
    c.Dw = D - 16;
    c.ilo = n8w_ilo();
    c.ihi = n8w_ihi();
    c.absw = sr8z_ld(tc);
    c.abs32 = sr8z_ld(tc + 16);
    c.one = sr8z_ld(tc + 32);
    c.ms = sr8z_ld(tc + 48);
    c.low = sr8z_ld(tf + 16 * SR8Z_LOW);
    c.span = sr8z_ld(tf + 16 * SR8Z_SPAN);
    c.rebw = sr8z_ld(tf + 16 * SR8Z_REBW);
    c.mad = sr8z_ld(tf + 16 * SR8Z_MAD);
    c.magic = sr8z_ld(tf + 16 * SR8Z_MAGIC);
    c.scale = sr8z_ld(tf + 16 * SR8Z_SCALE);
    return c;
}
/* sr8w_byte with sr8zc's constants */
PRIM V sr8z_byte(V u0, V u1, V r0, V r1, const sr8zc *c)
{
    return sr8w_byte_v(u0, u1, r0, r1, c->ihi, c->Dw + 16, c->rebw, c->mad);
}
/*
 * The codes of 16 lanes below the normal range (low words; the sign not included), rounded
 * stochastically with the full random words r, in float32 arithmetic with magic = 2^(24 - bias
 * - m), whose ulp is the subnormal quantum Q = 2^(1 - bias - m), and scale = 2^32 / Q:
 *   - s = a + magic rounded toward zero ({rz-sae}) has q = floor(a / Q) in its low word (magic's
 *     low 23 bits are zero), and t = s - magic = q * Q;
 *   - f = a * scale - t * scale = (a - t) * 2^32 / Q by two FMAs, -(s * scale) + magic * scale
 *     (= -t * scale) and a * scale + that: every product is exact (powers of two), and each sum
 *     is exact too (t * scale = q * 2^32; a - t has at most 24 significant bits), so neither
 *     rounding nor the rounding mode changes it (one FMA fewer than t, a - t and the product as
 *     three operations);
 *   - F = f truncated to an integer (VCVTTPS2UDQ) is the top 32 bits of the dropped part
 *     (kernels.h). The lane rounds up iff F + r >= 2^32, i.e. r >u ~F, with the full random word
 *     r (the fast path's words stop before the hash's last step, sr_words_hi).
 * A float32 subnormal (F = 0 in the reference) counts as 0 under DAZ (s = magic, f = 0); without
 * DAZ, f = a * scale < 2^-85 truncates to 0 as well.
 */
PRIM V sr8z_tiny(V u, V r, const sr8zc *c)
{
    const __m512 a = _mm512_castsi512_ps(v_and(u, c->abs32)), magic = _mm512_castsi512_ps(c->magic);
    const __m512 scale = _mm512_castsi512_ps(c->scale);
    const __m512 s = _mm512_add_round_ps(a, magic, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_fmadd_ps(a, scale, _mm512_fnmadd_ps(s, scale, _mm512_castsi512_ps(c->ms)));
    const V F = _mm512_cvttps_epu32(f);
    const V rf = _mm512_xor_si512(r, _mm512_srli_epi32(r, 21)); /* the hash's last step */
    const V sb = _mm512_castps_si512(s);
    /* r >u ~F: ~F by VPTERNLOGD (not A) */
    return _mm512_mask_add_epi32(sb, _mm512_cmpgt_epu32_mask(rf, _mm512_ternarylogic_epi32(F, F, F, 0x55)), sb,
                                 c->one);
}
/*
 * sr8_fast2 that also takes the lanes below the normal range (cvt_simd_impl.h's
 * MXP_SIMD_SR8_FASTZ, here with the constants of a run: MXP_SIMD_SR8_ZC): 0 = not stored (a
 * lane overflows, is max finite or above, or NaN), else stored. Taken in a run of steps after
 * the fast loop of sr_run failed, as narrow8_fast4t for nearest-even.
 *   - zm (the zero mode, for ReLU data): a step whose only lanes outside the normal range are
 *     +-0 stores their signs (an exact value never moves): 3 when it had such a lane, 2 when it
 *     had none; a step with other small lanes as below: 1, or 4 when it had a +-0 lane too.
 *   - Otherwise, or when that fails, every lane below 2^(1 - bias) (+-0 too) takes sr8z_tiny's
 *     code, without a branch on which lanes: 1 when there was such a lane, 2 when none.
 * With e4m3fn on data over [-8, 8] 6% of 32-element steps have a lane below 2^-6, over
 * [-0.5, 0.5] nearly all; before session 13, such a step took the general path (narrow1).
 */
#define MXP_SIMD_SR8_FASTZ 1
#define MXP_SIMD_SR8_ZC 1
PRIM int sr8_fast2zc(void *p, V u0, V u1, V r0, V r1, const sr8zc *c, int nt, int zm)
{
    const V hw = _mm512_permutex2var_epi16(u0, c->ihi, u1);
    const V aw = _mm512_and_si512(hw, c->absw);
    const __mmask32 out = _mm512_cmpgt_epu16_mask(_mm512_sub_epi16(aw, c->low), c->span);
    __mmask32 z = 0;
    if (zm) {
        /* +-0: both the high word (without the sign) and the low word zero */
        const V azw = _mm512_or_si512(aw, _mm512_permutex2var_epi16(u0, c->ilo, u1));
        z = _mm512_testn_epi16_mask(azw, azw);
        if ((out & (__mmask32)~z) == 0) {
            sr8w_store(p, n8w_zbyte(sr8z_byte(u0, u1, r0, r1, c), z, hw), nt);
            return z != 0 ? 3 : 2;
        }
    }
    const __mmask32 tn = _mm512_cmpgt_epu16_mask(c->low, aw);
    if ((out & (__mmask32)~tn) != 0) return 0;
    const V sw = _mm512_permutex2var_epi16(sr8z_tiny(u0, r0, c), c->ilo, sr8z_tiny(u1, r1, c));
    const V codes = _mm512_or_si512(sw, n8w_sign(hw));
    sr8w_store(p, _mm512_mask_mov_epi16(sr8z_byte(u0, u1, r0, r1, c), tn, codes), nt);
    if (zm) return z != 0 ? 4 : 1;
    return tn != 0 ? 1 : 2;
}

/*
 * The step after narrow8_fast4 failed: 4*VL float32 -> float8 nearest-even when no lane
 * overflows or is NaN, subnormal and +-0 results included (1: stored, a lane was below the
 * normal range; 2: stored, none was), else 0 with nothing stored. The word step of
 * narrow8_fast4 for the lanes in the normal range; the lanes below it (their words' magnitude
 * under 2^(1 - bias)'s high word), branch-free:
 *   - only +-0 among them (ReLU data): the byte is the sign;
 *   - otherwise s = a + magic, magic = 2^(24 - bias - m) = 2^(1 - bias - m) * 2^23 (a = |x|, as
 *     float32): the float add rounds a to the subnormal quantum 2^(1 - bias - m), nearest-even,
 *     once, with its own rounding whatever the MXCSR says ({rn-sae}), and as magic's low 23 bits
 *     are zero, s's low word is the code itself (0 .. 2^m, 2^m being the smallest normal when a
 *     rounds up to it); VPERMT2W gathers those words, the sign is or-ed in. A float32 subnormal
 *     under DAZ counts as 0, which is its code anyway.
 * AMD Zen 5, f32 -> e4m3fn, 2^16 elements in cache, one thread (medians of runs alternating with
 * the former dword step, which redid the rounding on 16 lanes per vector with the same float
 * add): data over [-8, 8] (12% of 64-element steps have a lane below 2^-6) 0.047 -> 0.045
 * ns/element; over [-0.5, 0.5] (86%) 0.118 -> 0.061; over [-0.05, 0.05] (all) 0.126 -> 0.051.
 * narrow8_fast4tz (MXP_SIMD_NARROW8_TINY_Z, cvt_simd_impl.h's narrow8_tiny_run): the first
 * store ("only +-0 among them", and a step with no lane below the normal range) only when zm,
 * returning 3 for a step it stored with a +-0 lane; narrow8_fast4t is narrow8_fast4tz with zm.
 */
#define MXP_SIMD_NARROW8_FAST_TINY 1
#define MXP_SIMD_NARROW8_TINY_CARRY 1 /* cvt_simd_impl.h's narrow8_tiny_run */
/* The lone failing step inside the fast loop (cvt_simd_impl.h) with gcc only. clang 14 keeps the
 * fast loop's constants in memory across that call and reloads them in every step; without it
 * the loop keeps them in registers. AMD Zen 5, three alternating runs, ns/element, lone step in
 * the loop / not: clang, in cache e4m3fn 0.046 / 0.048, e5m2 0.041 / 0.038; 2^26 e4m3fn 0.131 /
 * 0.110, e5m2 0.137 / 0.106. gcc, in cache e4m3fn 0.0455 / 0.0486, e5m2 0.036 / 0.037; 2^26
 * e4m3fn 0.113 / 0.111, e5m2 0.101 / 0.103 (bench/RESULTS.md session 17). */
#if !defined(__clang__)
#define MXP_SIMD_NARROW8_FAST_TINY_LONE 1
#endif
#define MXP_SIMD_NARROW8_TINY_Z 1
PRIM int narrow8_fast4tz(void *p, const unsigned char *s, int D, uint32_t add, uint32_t minq, uint32_t maxq, int nt,
                         int zm)
{
    const V x = ld32(s), y = ld32(s + 4 * VL), z = ld32(s + 8 * VL), w = ld32(s + 12 * VL);
    const n8m_c c = n8m_consts(D, add, minq, maxq);
    const int m = 23 - D, bias = m == 3 ? 7 : 15; /* e4m3fn or e5m2 */
    const V w0 = n8m_word(x, y, &c), w1 = n8m_word(z, w, &c);
    const V t0 = n8m_tq(w0, &c), t1 = n8m_tq(w1, &c);
    const __mmask32 b0 = n8m_bad(t0, &c), b1 = n8m_bad(t1, &c);
    const V mag = _mm512_set1_epi16(0x7FFF);
    /* w's bit 0 may hold the kept lsb, but only when the magnitude is nonzero: +-0 is w & mag == 0 */
    const __mmask32 o0 = _mm512_testn_epi16_mask(w0, mag), o1 = _mm512_testn_epi16_mask(w1, mag);
    if (zm && ((b0 & (__mmask32)~o0) | (b1 & (__mmask32)~o1)) == 0) {
        n8w_store_mn(p, n8m_zbyte(n8w_byte(t0, c.Dw), o0, w0, &c), n8m_zbyte(n8w_byte(t1, c.Dw), o1, w1, &c), c.mn,
                     nt);
        return (o0 | o1) != 0 ? 3 : 2;
    }
    /* lo is even: a | 1 < lo iff a < lo, so w's extra bit 0 does not move a lane across it */
    const V lo = _mm512_set1_epi16((short)((128 - bias) << 7));
    const __mmask32 z0 = _mm512_cmpgt_epu16_mask(lo, _mm512_and_si512(w0, mag));
    const __mmask32 z1 = _mm512_cmpgt_epu16_mask(lo, _mm512_and_si512(w1, mag));
    if (((b0 & (__mmask32)~z0) | (b1 & (__mmask32)~z1)) != 0) return 0;
    const __m512 magic = _mm512_castsi512_ps(v_set1((uint32_t)(127 + 24 - bias - m) << 23));
    const V ab = v_set1(0x7FFFFFFFu);
    V sv[4];
    const V xs[4] = {x, y, z, w};
    for (int j = 0; j < 4; j++)
        sv[j] = _mm512_castps_si512(_mm512_add_round_ps(_mm512_castsi512_ps(v_and(xs[j], ab)), magic,
                                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    /* the codes minus minq, bytewise (mod 256) as n8w_store_mn expects; the high bytes stay 0 */
    const V mnw = _mm512_set1_epi16((short)c.mn);
    const V q0 = _mm512_sub_epi8(_mm512_or_si512(_mm512_permutex2var_epi16(sv[0], c.ilo, sv[1]), n8w_sign(w0)), mnw);
    const V q1 = _mm512_sub_epi8(_mm512_or_si512(_mm512_permutex2var_epi16(sv[2], c.ilo, sv[3]), n8w_sign(w1)), mnw);
    n8w_store_mn(p, _mm512_mask_mov_epi16(n8w_byte(t0, c.Dw), z0, q0),
                 _mm512_mask_mov_epi16(n8w_byte(t1, c.Dw), z1, q1), c.mn, nt);
    return 1;
}
PRIM int narrow8_fast4t(void *p, const unsigned char *s, int D, uint32_t add, uint32_t minq, uint32_t maxq, int nt)
{
    const int r = narrow8_fast4tz(p, s, D, add, minq, maxq, nt, 1);
    return r == 3 ? 1 : r;
}

/* narrow8_fast4 that also takes +-0 lanes (0: not stored; 1: stored, a lane was +-0; 2: stored,
 * none was): a zero lane is exempt from the range test and its byte is its sign alone. */
#define MXP_SIMD_NARROW8_FASTZ 1
PRIM V n8_zbyte(V x, V tq, V qm, int D, M z)
{
    return _mm512_mask_mov_epi32(n8_byte(tq, qm, D), z,
                                 _mm512_and_si512(_mm512_srli_epi32(x, 24), _mm512_set1_epi32(0x80)));
}
PRIM int narrow8_fast4z(void *p, V x, V y, V z, V w, int D, uint32_t add, uint32_t minq, uint32_t maxq,
                        int nt)
{
    const V k = v_set1(add), qm = v_set1((1u << (31 - D)) - 1u), mn = v_set1(minq), span = v_set1(maxq - minq);
    const V absm = v_set1(0x7FFFFFFFu), zero = _mm512_setzero_si512();
    const M z0 = m_eq(v_and(x, absm), zero), z1 = m_eq(v_and(y, absm), zero), z2 = m_eq(v_and(z, absm), zero),
            z3 = m_eq(v_and(w, absm), zero);
    const V t0 = n8_tq(x, D, k), t1 = n8_tq(y, D, k), t2 = n8_tq(z, D, k), t3 = n8_tq(w, D, k);
    if (((n8_bad(t0, qm, mn, span) & (M)~z0) | (n8_bad(t1, qm, mn, span) & (M)~z1) |
         (n8_bad(t2, qm, mn, span) & (M)~z2) | (n8_bad(t3, qm, mn, span) & (M)~z3)) != 0)
        return 0;
    n8_store4(p, n8_zbyte(x, t0, qm, D, z0), n8_zbyte(y, t1, qm, D, z1), n8_zbyte(z, t2, qm, D, z2),
              n8_zbyte(w, t3, qm, D, z3), nt);
    return (z0 | z1 | z2 | z3) != 0 ? 1 : 2;
}

/* float32 -> float8 for 32 lanes without overflow, infinity or NaN, subnormal results through
 * VCVTPS2PH of a * 2^(B - 1 + m - 24) (cvt_avx2.c's narrow8_sub2 explains why it is exact). */
#define MXP_SIMD_NARROW8_SUB 1
PRIM V narrow8_sub1(V x, V a, int D, V k, V lo, __m512 scale)
{
    const V qn = n8_tq(a, D, k);
    const __m256i h = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_castsi512_ps(a), scale), _MM_FROUND_TO_NEAREST_INT);
    const V q = _mm512_mask_blend_epi32(m_gt(lo, a), qn, _mm512_cvtepu16_epi32(h)); /* lo > a: h */
    return _mm512_or_si512(q, _mm512_and_si512(_mm512_srli_epi32(x, 24), _mm512_set1_epi32(0x80)));
}
PRIM bool narrow8_sub2(void *p, V x, V y, int D, uint32_t add, uint32_t lo, uint32_t hi, uint32_t scale, int nt)
{
    const V absm = v_set1(0x7FFFFFFFu), H = v_set1(hi);
    const V ax = v_and(x, absm), ay = v_and(y, absm);
    if ((m_gt(ax, H) | m_gt(ay, H)) != 0) return false;
    const V k = v_set1(add), L = v_set1(lo);
    const __m512 sc = _mm512_castsi512_ps(v_set1(scale));
    const V qx = narrow8_sub1(x, ax, D, k, L, sc), qy = narrow8_sub1(y, ay, D, k, L, sc);
    if (nt) st8x2_nt(p, qx, qy);
    else st8x2(p, qx, qy);
    return true;
}

/* float32 -> bfloat16 nearest-even for 32 lanes without NaN: t = u + 0x7FFF + bit 16 of u,
 * result t >> 16 (the carry trick of cvt_scalar.c); VPMOVDW packs. */
#define MXP_SIMD_BF16_RNE2 1
PRIM __m256i bf16_words(V x, V k)
{
    const V lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, k), lsb), 16));
}
PRIM void bf16_rne2(void *p, V x, V y, V k, int sat, int nt)
{
    st16_words(p, bf16_words(x, k), bf16_words(y, k), 0x7F80, sat, nt);
}

/*
 * AVX512_BF16 VCVTNEPS2BF16, for CPUs that have it (registered by mxp__cvt_register_avx512_bf16).
 * Intel SDM: a float32 zero or subnormal input gives a signed zero (denormals are zero, whatever
 * MXCSR says), infinity its top half, NaN its top half with the quiet bit set (the reference's
 * NaN rule, and bf16_hw2 never sees NaN anyway), every other input nearest-even: the same
 * carry trick as bf16_rne2. So the one difference from the reference is a subnormal input
 * (bfloat16 keeps it: its top half, rounded); a half-step with one takes bf16_rne2 instead, or,
 * when it also has a NaN (which bf16_rne2 cannot take), the general path (false).
 * Subnormal: 1 <= |u| <= 0x007FFFFF, i.e. |u| - 1 < 0x007FFFFF unsigned. The fast loop does not
 * test for NaN before this step (test_isa_exhaustive checks every NaN pattern against the
 * reference): AMD EPYC Zen 5, in cache (2^16), one thread, five alternating runs, median
 * 0.0255 -> 0.0235 ns/element without that test (bench/RESULTS.md session 13); testing the
 * four vectors for subnormals at once, before two bf16_hw2 without a test, was slower (0.029).
 */
#define MXP_SIMD_BF16_HW 1
#ifdef MXP_AVX512_EMULATED
#define CVTNEPS2BF16(v) emu_mm512_cvtneps2bf16(_mm512_castsi512_ps(v))
#else
#define CVTNEPS2BF16(v) ((__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(v)))
#endif
/* 32 float32 (x's 16, then y's) -> 32 bfloat16 by two VCVTNEPS2BF16 and a VINSERTI64X4
 * (bf16_hw4's form on Zen 4; CVTNE2BF16 on emulated intrinsics) */
#define CVTNE2BF16_SPLIT(x, y) _mm512_inserti64x4(_mm512_castsi256_si512(CVTNEPS2BF16(x)), CVTNEPS2BF16(y), 1)
/* the same in one instruction: VCVTNE2PS2BF16 (its second source fills the low half) */
#ifdef MXP_AVX512_EMULATED
#define CVTNE2BF16(x, y) CVTNE2BF16_SPLIT(x, y)
#else
#define CVTNE2BF16(x, y) ((V)_mm512_cvtne2ps_pbh(_mm512_castsi512_ps(y), _mm512_castsi512_ps(x)))
#endif
PRIM bool bf16_hw2(void *p, V x, V y, V k, int sat, int nt)
{
    const V absm = v_set1(0x7FFFFFFFu), one = v_set1(1u), top = v_set1(0x007FFFFFu);
    const M sub = m_gtu(top, v_sub(v_and(x, absm), one)) | m_gtu(top, v_sub(v_and(y, absm), one));
    if (sub != 0) {
        if (any_nan4(x, y, x, y)) return false; /* bf16_rne2 assumes no NaN */
        bf16_rne2(p, x, y, k, sat, nt);
        return true;
    }
    st16_vec(p, CVTNE2BF16(x, y), 0x7F80, sat, nt);
    return true;
}

/* bf16_hw2 for a half whose conversion h is done, z its +-0 results: those lanes are right
 * unless their input was subnormal (nonzero), which takes bf16_hw2 */
PRIM bool bf16_hw2z(void *p, V x, V y, V h, __mmask32 z, V k, int sat, int nt)
{
    if (z != 0) {
        const V absm = v_set1(0x7FFFFFFFu);
        const uint32_t nz = (uint32_t)_mm512_test_epi32_mask(x, absm) | (uint32_t)_mm512_test_epi32_mask(y, absm) << 16;
        if ((z & nz) != 0) return bf16_hw2(p, x, y, k, sat, nt);
    }
    st16_vec(p, h, 0x7F80, sat, nt);
    return true;
}

/* The streaming step (large calls, memory-bound), 64 lanes: convert first, then one test of the
 * 64 results. A result is +-0 only for a +-0 or subnormal input (a normal float32 rounds to a
 * normal bfloat16; inf and NaN stay nonzero), so a step without a zero result is done; in one
 * with a zero result, each half whose zero lanes all had a +-0 input (ReLU data) is done too
 * (bf16_hw2z), a half with a subnormal input takes bf16_hw2. Out of cache the subnormal test on
 * the inputs was a sixth of the time: AMD EPYC Zen 5, 2^26, the own avx512 kernel, four
 * alternating runs (median of 9 calls each): 0.136-0.141 -> 0.111-0.117 ns/element, which is
 * float32 -> float16's 0.114-0.119 in the same runs; ReLU data (half +-0, every step takes
 * the exact test) 0.135-0.138 -> 0.126-0.143. In cache this step was slower than bf16_hw2's
 * (0.031 against 0.029-0.030 ns, ReLU 0.031 against 0.026-0.030), so only streaming calls take
 * it (bench/RESULTS.md session 14). */
#define MXP_SIMD_BF16_HW4 1
/* On Intel (the CPUs dispatch.c sets to MXP__PREFETCH_L2) in cache too. Intel Xeon with
 * AVX512_FP16 (CPU 4 of bench/RESULTS.md, session 31), 2^16 elements, one process per build,
 * median of 301 calls, ns/element: data over [-8, 8] 0.054 (bf16_hw2 by halves) -> 0.049-0.052;
 * ReLU data 0.054-0.055 -> 0.050-0.052. VCVTNE2PS2BF16 there: one instruction every 2 cycles,
 * as VCVTNEPS2BF16, which converts half as many lanes.
 * On AMD Zen 4 (mxp__avx512_half_width: 512-bit operations on 256-bit units) the step keeps two
 * VCVTNEPS2BF16 and a VINSERTI64X4 per 32 lanes, its form before session 31: with VCVTNE2PS2BF16
 * it ran 5-7% slower at 2^26 there (bench/RESULTS.md session 39; AMD EPYC family 19h, 2 vCPUs,
 * f32->bf16, the own avx512 kernel, six alternating runs per build, medians, ns/element: 0.202
 * -> 0.188, 0.96x -> 1.04x of the limit; the same in two more A/B runs against the older build).
 * In cache, where bf16_hw2 runs, the two forms tie there (0.052), and float16 -> bfloat16
 * (bf16_f16_run) keeps the pair instruction on every CPU (Zen 4 in cache 0.036 against 0.063
 * with the two-instruction form, a tie at 2^26). */
#define MXP_SIMD_BF16_HW4_CACHE PF_L2
PRIM bool bf16_hw4(unsigned char *p, V x0, V x1, V x2, V x3, V k, int sat, int nt)
{
    V h0, h1;
    if (mxp__avx512_half_width) { /* Zen 4: see above */
        h0 = CVTNE2BF16_SPLIT(x0, x1);
        h1 = CVTNE2BF16_SPLIT(x2, x3);
    } else {
        h0 = CVTNE2BF16(x0, x1);
        h1 = CVTNE2BF16(x2, x3);
    }
    const V w = _mm512_set1_epi16(0x7FFF);
    const __mmask32 z0 = _mm512_testn_epi16_mask(h0, w), z1 = _mm512_testn_epi16_mask(h1, w);
    if ((z0 | z1) == 0) {
        st16_vec(p, h0, 0x7F80, sat, nt);
        st16_vec(p + 64, h1, 0x7F80, sat, nt);
        return true;
    }
    return bf16_hw2z(p, x0, x1, h0, z0, k, sat, nt) && bf16_hw2z(p + 64, x2, x3, h1, z1, k, sat, nt);
}

/* float8 -> float32 through VCVTPH2PS, as cvt_avx2.c's hw_e5m2_ld / hw_e4m3_ld (see there):
 * e5m2 byte b is the float16 b << 8; e4m3fn moves to float16 with a rebias, then x 256 exactly,
 * and its NaN (+-480 after the multiply) gets the reference's pattern by one XOR. */
#define MXP_SIMD_HW_E5M2 1
PRIM __m256i b16_words_hi(const void *p) /* 16 bytes at p, each the high byte of a word */
{
    return _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)), 8);
}
PRIM V hw_e5m2_ld(const void *p) { return _mm512_castps_si512(_mm512_cvtph_ps(b16_words_hi(p))); }
#define MXP_SIMD_HW_E4M3 1
PRIM V hw_e4m3_ld_nonan(const void *p)
{
    const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)); /* sign-extended */
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(w, 7), _mm256_set1_epi16((short)0xBF80));
    return _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f)));
}
PRIM V hw_e4m3_ld(const void *p)
{
    const V u = hw_e4m3_ld_nonan(p);
    const M nan = m_eq(v_and(u, v_set1(0x7FFFFFFFu)), v_set1(0x43F00000u));
    return _mm512_mask_xor_epi32(u, nan, u, v_set1(0x43F00000u ^ 0x7FC00000u));
}
PRIM bool hw_e4m3_nan4(const void *p) /* a NaN (S.1111.111) among the 64 bytes at p */
{
    const V b = _mm512_and_si512(_mm512_loadu_si512(p), _mm512_set1_epi8(0x7F));
    return _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8(0x7F)) != 0;
}

/* Streaming-store threshold: as cvt_avx2.c (bytes read + written by one call). */
#define MXP_SIMD_NT_THRESHOLD mxp__nt_threshold /* MXP__NT_THRESHOLD_DEFAULT, kernels.h */
#define MXP_SIMD_NT_STORE32(p, x) MXP__STREAM512((void *)(p), (x))
#define MXP_SIMD_NT_FENCE() _mm_sfence()
/* Source prefetch in the streaming loops: a run-time choice per CPU (mxp__avx512_prefetch, set by
 * dispatch.c, kernels.h), 6144 bytes ahead, in the float32 -> float8 narrowings and every
 * stochastic one; in the nearest-even bfloat16 and float16 narrowings only on Intel; never in
 * the widenings.
 * - AMD EPYC Zen 4 (issue 17, bench_convert --isa avx512-own, 2^26 elements, one thread,
 *   ns/element, three alternating runs each): a prefetch 2048 bytes ahead made the streaming
 *   float32 -> float8 passes 10-20% slower (f32->e5m2 sat 0.188-0.189 with it, 0.154-0.163
 *   without; f32->e4m3fn sat 0.193-0.198 / 0.167-0.176), left the stochastic ones unchanged and,
 *   in a bare loop of loads and 64-byte streaming stores, cost 10-15% too. 6144 bytes ahead
 *   (session 21, commit 4817550, four alternating runs with it forced on / off, avx512-own, 2^26,
 *   ns/element, medians) is no better: f32->e4m3fn 0.162 / 0.152, sat 0.164 / 0.156, f32->e5m2
 *   0.157 / 0.141, sat 0.156 / 0.141, stochastic e4m3fn 0.196 / 0.194, e5m2 0.174 / 0.168,
 *   float16 0.188 / 0.189, bfloat16 0.146 / 0.161 (its ranges overlap: 0.144-0.177 / 0.154-0.167).
 *   So off there. Session 39 ran Zen 5's and Intel's schemes there too, on the current code
 *   (bench_convert --prefetch, three alternating runs of avx512-own, 2^26, medians, off / l1 /
 *   l2, ns/element): f32->e4m3fn 0.185 / 0.207 / 0.197, sat 0.166 / 0.192 / 0.204, f32->e5m2
 *   0.182 / 0.192 / 0.193, stochastic e4m3fn 0.222 / 0.222 / 0.224, float16 0.208 / 0.212 /
 *   0.225, f64->f32 0.350 / 0.355 / 0.546, f16->bf16 0.117 / 0.120 / 0.147: still off.
 * - AMD EPYC Zen 5: 2048 bytes ahead was slower too (bench/RESULTS.md session 11), but 6144
 *   is faster: three alternating runs of one build with the prefetch on / off, ratio to the
 *   limit (median): f32->e4m3fn 0.78 -> 0.87, sat 0.78 -> 0.87, f32->e5m2 0.84 -> 0.93, sat 0.77
 *   -> 0.91, stochastic e4m3fn 0.69 -> 0.80, e5m2 0.77 -> 0.92, float16 0.87 -> 0.95, bfloat16
 *   0.89 -> 0.98. 4096 and 8192 bytes were no better (session 15). Nearest-even bfloat16 (the
 *   VCVTNEPS2BF16 step) went 0.95 -> 0.75 with it, hence MXP_SIMD_PREFETCH_BF16 0; the
 *   widenings were unchanged, hence MXP_SIMD_PREFETCH_WIDEN 0.
 * The runs of tiny-aware float8 steps (ReLU data, small values) follow the same choice since
 * session 25; before, they prefetched on every CPU. On Zen 4 that cost 10-20% (both builds in one
 * process, 2^26 elements, nine alternating calls, medians, f32 -> e4m3fn nearest-even, with /
 * without: N(0, 1) data 0.221 / 0.195 ns/element, over [-0.5, 0.5] 0.245 / 0.195, ReLU 0.210 /
 * 0.183, e5m2 ReLU 0.189 / 0.174; uniform data 0.161 / 0.163; the stochastic runs 0.96-0.99x).
 * Before that, on the AMD EPYC Zen 5 (no prefetch
 * anywhere else then), 2^26 elements, one thread, random ReLU data (half +0), 2048 bytes ahead
 * took f32->e4m3fn from 0.165-0.166 to 0.119-0.121 ns/element and f32->e5m2 from 0.168-0.169 to
 * 0.115-0.118 (the limit: about 0.095), uniform data unchanged (session 13); 6144 bytes ahead,
 * three alternating `--relu` runs, ratio to the limit 2048 -> 6144: f32->e4m3fn 0.79 -> 0.87,
 * sat 0.80 -> 0.87, f32->e5m2 0.80 -> 0.89, sat 0.82 -> 0.94, stochastic e4m3fn 0.71 -> 0.77,
 * e5m2 0.76 -> 0.89 (session 15). A build may set another distance
 * (-DMXP_SIMD_PREFETCH_DIST=BYTES) to measure it.
 * - Intel Xeon with AVX512_FP16 and AMX (session 30, KVM, 2 vCPUs; bench/RESULTS.md): here the
 *   hardware prefetcher does not keep a compute-heavy streaming loop fed. A bare loop that loads
 *   a line, runs 64 dependent vector operations on it and streams it out took 40 ns per line at
 *   2^26 bytes against 10 ns in cache; PREFETCHT0 or PREFETCHT2 4096 bytes ahead brought it to
 *   10.7 / 11.5 ns. So Intel prefetches (MXP__PREFETCH_L2), with PREFETCHT2 (into L2), which beat
 *   PREFETCHT0 in the kernels: 2^26 elements, one process per kernel, median of 9 calls,
 *   ns/element, none / T0 / T2 at 6144 bytes: f32->e4m3fn 0.474 / 0.431 / 0.354, f32->f16
 *   stochastic 0.431 / 0.386 / 0.319, f32->bf16 (VCVTNEPS2BF16) 0.375 / 0.364 / 0.341, f32->f16
 *   (VCVTPS2PH) 0.327 / 0.340 / 0.321, bf16->e4m3fn 0.229 / 0.233 / 0.173; e4m3fn->e5m2
 *   stochastic (f8s_run, VBMI) 0.319 without, 0.141 with T2; the float64 stochastic kernels
 *   (F64Z_PREFETCH, T0 elsewhere) T0 -> T2: f64->f32 0.655 -> 0.608, f64->bf16 0.752 -> 0.657.
 *   On Intel the nearest-even 16-bit narrowings prefetch too (MXP_SIMD_PREFETCH_BF16 and
 *   MXP_SIMD_PREFETCH_HW_F16 follow the choice), and so do two loops that prefetch nowhere else:
 *   the stochastic roundings from float16 / bfloat16 (MXP_SIMD_PREFETCH_SRN, srn_run; two runs,
 *   without -> with: bf16->e4m3fn 0.660 / 0.632 -> 0.301 / 0.297, bf16->f16 0.564 / 0.537 ->
 *   0.265 / 0.273) and the float64 nearest-even narrowings' fast steps (MXP_SIMD_PREFETCH_N64,
 *   n64_run: f64->f16 0.697 / 0.757 -> 0.618 / 0.637, f64->bf16 0.806 / 0.789 -> 0.666 / 0.668,
 *   f64->e4m3fn 0.882 / 0.849 -> 0.685 / 0.684), and the float16 <-> bfloat16 kernels (bfh_run,
 *   bf16_f16_run; three runs: f16->bf16 0.245-0.254 -> 0.174-0.191, bf16->f16 0.237-0.243 ->
 *   0.177-0.195), and since session 50 the float8 sources' byte-table loops (f8v_run: e4m3fn ->
 *   e5m2 0.110 -> 0.081). Other distances with T2 (3072 / 6144 / 12288 /
 *   24576 bytes) were no better: f32->e4m3fn 0.330 / 0.365 / 0.371 / 0.360, f32->f16 stochastic
 *   0.336 / 0.315 / 0.319 / 0.335, bf16->e4m3fn 0.186 / 0.173 / 0.172 / 0.190. */
#ifndef MXP_SIMD_PREFETCH_DIST
#define MXP_SIMD_PREFETCH_DIST 6144
#endif
/* Intel's second prefetch: the line PF_NEAR bytes ahead of the loads into L1 (below) */
#ifndef PF_NEAR
#define PF_NEAR MXP__PF_NEAR
#endif
/* Whether this CPU prefetches into L2 (Intel), and so also in the loops that only it prefetches in */
#define PF_L2 (mxp__avx512_prefetch == MXP__PREFETCH_L2)
/* One source line's prefetch, p = the line MXP_SIMD_PREFETCH_DIST bytes ahead of the loads: into
 * L1 on the CPUs set to MXP__PREFETCH_L1 (AMD Zen 5); on those set to MXP__PREFETCH_L2 (Intel)
 * into L2, and the line PF_NEAR bytes ahead of the loads (which is in L2 by then) into L1.
 * Intel Xeon (session 31), 2^26, medians of three alternating bench_convert runs of the own
 * kernels, T2 only -> T2 and T0 near, ns/element (ratio to the limit): f32->e4m3fn 0.364 ->
 * 0.301 (0.76x -> 0.90x), sat 0.369 -> 0.317, f32->e5m2 0.354 -> 0.305, sat 0.363 -> 0.301,
 * f32->f16 0.315 -> 0.297 (1.01x), f32->bf16 0.309 -> 0.300, stochastic f32->bf16 0.338 -> 0.320,
 * f32->f16 0.368 -> 0.325, f32->e4m3fn 0.380 -> 0.336, f32->e5m2 0.356 -> 0.328, bf16->e4m3fn
 * 0.178 -> 0.146, f16->e4m3fn 0.169 -> 0.148, e4m3fn->e5m2 stochastic 0.144 -> 0.138, f64->e4m3fn
 * 0.618 -> 0.599, f64->bf16 stochastic 0.701 -> 0.672; but f64->f16 (VCVTPD2PH) 0.575 -> 0.586,
 * f16->bf16 0.171 -> 0.178 and bf16->f16 0.178 -> 0.195, loops with little work per line, which
 * keep the L2 prefetch alone (pf_line_far), as do the float64 stochastic kernels (F64Z_PREFETCH:
 * another distance, not measured with it). A bare 4:1 streaming loop with 16 dependent
 * operations per 64 elements: T0 512 / 1024 / 2048 / 3072 bytes ahead, 0.314 / 0.310 / 0.312 /
 * 0.292-0.308 against 0.319-0.327 without. In the kernels, PF_NEAR 1536 / 3072 / 4608, two runs:
 * f32->e4m3fn 0.312-0.315 / 0.290 / 0.324-0.331, f32->f16 stochastic 0.307-0.308 / 0.296-0.299 /
 * 0.333, bf16->e4m3fn 0.155-0.168 / 0.151-0.158 / 0.171-0.173. */
static inline __attribute__((always_inline)) void pf_line(const void *p)
{
    if (PF_L2) {
        _mm_prefetch((const char *)p, _MM_HINT_T2);
        _mm_prefetch((const char *)p - MXP_SIMD_PREFETCH_DIST + PF_NEAR, _MM_HINT_T0);
    } else {
        _mm_prefetch((const char *)p, _MM_HINT_T0);
    }
}
/* pf_line without Intel's second prefetch (the loops above that it slowed) */
static inline __attribute__((always_inline)) void pf_line_far(const void *p)
{
    if (PF_L2) _mm_prefetch((const char *)p, _MM_HINT_T2);
    else _mm_prefetch((const char *)p, _MM_HINT_T0);
}
#define MXP_SIMD_PREFETCH(p) pf_line(p)
#define MXP_SIMD_PREFETCH_ON mxp__avx512_prefetch
#define MXP_SIMD_PREFETCH_BF16 PF_L2
#define MXP_SIMD_PREFETCH_HW_F16 PF_L2
#define MXP_SIMD_PREFETCH_SRN PF_L2
#define MXP_SIMD_PREFETCH_N64 PF_L2
#define MXP_SIMD_PREFETCH_WIDEN 0

/* float64 <-> narrow without a float32 block (cvt_simd_impl.h's n64_loop / w64_loop): 16 float64
 * -> 16 float32 rounded to odd (VCVTPD2PS toward zero by its embedded rounding, then the lowest
 * bit set where the conversion was inexact: full, where VCVTPS2PD reads back another value (an
 * unordered compare is false, so a NaN lane keeps its quiet NaN); else where the 29 dropped
 * mantissa bits are not all zero, cvt_avx2.c's test and its limits; the frame sets MXCSR's FTZ
 * and DAZ off), and 16 float32 -> 16 float64 (exact with DAZ off; sat: +-inf -> +-DBL_MAX, the
 * pattern below it). */
#define MXP_SIMD_F64 1
#define MXP_SIMD_F64_CSR 0x1F80u /* every exception masked, nearest-even, FTZ and DAZ off */
PRIM V f64_odd_ld(const unsigned char *p, int full)
{
    const __m512d x0 = _mm512_loadu_pd((const void *)p), x1 = _mm512_loadu_pd((const void *)(p + 64));
    const __m256 y0 = _mm512_cvt_roundpd_ps(x0, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 y1 = _mm512_cvt_roundpd_ps(x1, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __mmask8 e0, e1;
    if (full) {
        e0 = _mm512_cmp_pd_mask(_mm512_cvtps_pd(y0), x0, _CMP_NEQ_OQ);
        e1 = _mm512_cmp_pd_mask(_mm512_cvtps_pd(y1), x1, _CMP_NEQ_OQ);
    } else {
        const __m512i low = _mm512_set1_epi64(0x1FFFFFFF);
        e0 = _mm512_test_epi64_mask(_mm512_castpd_si512(x0), low);
        e1 = _mm512_test_epi64_mask(_mm512_castpd_si512(x1), low);
    }
    const V y = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_castps_si256(y0)), _mm256_castps_si256(y1), 1);
    /* opaque 1: clang otherwise turns the masked OR into VPMOVM2D, a shift and an OR (its
     * float64 -> bfloat16 was 9% slower than gcc's in cache) */
    V one = _mm512_set1_epi32(1);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(one);
#endif
    return _mm512_mask_or_epi32(y, (__mmask16)((unsigned)e0 | (unsigned)e1 << 8), y, one);
}
PRIM void f64_st8(unsigned char *p, __m256 x, int sat, int nt)
{
    __m512i y = _mm512_castpd_si512(_mm512_cvtps_pd(x));
    if (sat) {
        const __mmask8 inf = _mm512_cmpeq_epi64_mask(_mm512_and_si512(y, _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll)),
                                                     _mm512_set1_epi64(0x7FF0000000000000ll));
        y = _mm512_mask_sub_epi64(y, inf, y, _mm512_set1_epi64(1));
    }
    if (nt) MXP__STREAM512((void *)p, y);
    else _mm512_storeu_si512((void *)p, y);
}
PRIM void f64_st(unsigned char *p, V x, int sat, int nt)
{
    f64_st8(p, _mm256_castsi256_ps(_mm512_castsi512_si256(x)), sat, nt);
    f64_st8(p + 64, _mm256_castsi256_ps(_mm512_extracti64x4_epi64(x, 1)), sat, nt);
}
/* 16 float16 at s -> 16 float64 at p: VCVTPH2PS on 8 lanes (one 512-bit conversion and a
 * 256-bit extract cost more on Zen 4, which runs 512-bit operations as two halves) */
#define MXP_SIMD_F64_F16 1
PRIM void f64_st_f16(unsigned char *p, const unsigned char *s, int sat, int nt)
{
    f64_st8(p, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)s)), sat, nt);
    f64_st8(p + 64, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + 16))), sat, nt);
}

#define MXP_SIMD_F16_F8 1 /* f16_f8_run, below */
#include "cvt_simd_impl.h"

void mxp__cvt_register_avx512(mxp__kernels *k) { simd_register(k); }

/*
 * bfloat16 -> float8 nearest-even, direct (the composed path, cvt_compose.c, widens blocks to
 * float32 and runs the float32 kernel on them: 0.074 ns/element in cache on Zen 5, a fifth of
 * the load/store loop). A bfloat16 value is the high word of a float32 whose low word is zero, so
 * it is exactly the word that narrow8_fast4 builds with VPERMT2W and its sticky bit: the word
 * step runs on the loaded bfloat16 vectors as they are, 32 lanes per vector.
 * A step whose only irregular lanes are +-0 (ReLU data) stores their signs (VPTESTNMW finds
 * them). A step with other lanes below the normal range (subnormal and +-0 results) takes them
 * by float32 arithmetic (bf16_tiny8). A step with an overflowing, infinite or NaN lane is widened
 * to float32 on the stack and converted by the float32 kernel.
 */
/* The codes of the lanes of x below the normal range, sign included (word lanes; the other lanes'
 * words are not codes): each dword's two words as two float32 magnitudes (the even word moved
 * up, the odd one with the even masked off) plus magic = 2^(24 - bias - m), whose ulp is the
 * quantum 2^(1 - bias - m) of the target's subnormals, added with nearest-even: the sum is magic
 * + RNE(|x| / quantum) * quantum, so its low word is the code (at most 2^m, the smallest normal
 * one). Exact for every such lane, a bfloat16 subnormal included (it rounds to 0 whether or not
 * the CPU flushes it). Until session 42 the same codes came from 16-bit integer operations
 * (VPSRLVW / VPSLLVW of the significand by 135 - bias - m - e): AMD Zen 4, N(0, 1) data,
 * bf16 -> e4m3fn in cache 0.122 -> 0.094 ns/element (three alternating runs, medians).
 */
PRIM V bf16_tiny8(V x, __m512 magic)
{
    const V xa = _mm512_and_si512(x, _mm512_set1_epi16(0x7FFF));
    const __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(xa, 16));
    const __m512 od = _mm512_castsi512_ps(_mm512_and_si512(xa, _mm512_set1_epi32((int)0xFFFF0000u)));
    const V se = _mm512_castps_si512(_mm512_add_round_ps(ev, magic, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const V so = _mm512_castps_si512(_mm512_add_round_ps(od, magic, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const V code = _mm512_mask_blend_epi16((__mmask32)0xAAAAAAAAu, se, _mm512_slli_epi32(so, 16));
    return _mm512_ternarylogic_epi32(code, _mm512_srli_epi16(x, 8), _mm512_set1_epi16(0x80), 0xF8); /* | sign */
}
/* the 64 elements at s through float32 (stack) and the float32 kernel f32k: overflow, NaN */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
static void bf16_f8_wide(unsigned char *d, const unsigned char *s, const mxp__cvt_args *a, mxp__cvt_fn f32k)
{
    uint32_t tmp[64];
    for (int j = 0; j < 4; j++) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)(s + 32 * j));
        _mm512_storeu_si512(tmp + 16 * j, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    f32k(d, tmp, 64, a);
}
/* bf16_f8_run's constants */
typedef struct bf8c {
    n8m_c c;
    V lo, mag, mn;
    __m512 magic;
} bf8c;
/* The lanes of x (bytes b0v) and y (b1v) below the normal range (*z0, *z1; +-0 included) with
 * bf16_tiny8's codes, minus minq mod 256 in the low byte (VPSUBB: the high byte stays 0), and 1;
 * 0 (nothing changed) when a lane among the step's irregular ones b0, b1 is not such a lane
 * (overflow, infinity, NaN: the step is widened) */
PRIM int bf16_f8_small(V x, V y, __mmask32 b0, __mmask32 b1, V *b0v, V *b1v, const bf8c *k, __mmask32 *z0,
                       __mmask32 *z1)
{
    *z0 = _mm512_cmpgt_epu16_mask(k->lo, _mm512_and_si512(x, k->mag));
    *z1 = _mm512_cmpgt_epu16_mask(k->lo, _mm512_and_si512(y, k->mag));
    if (((b0 & (__mmask32)~*z0) | (b1 & (__mmask32)~*z1)) != 0) return 0;
    *b0v = _mm512_mask_mov_epi16(*b0v, *z0, _mm512_sub_epi8(bf16_tiny8(x, k->magic), k->mn));
    *b1v = _mm512_mask_mov_epi16(*b1v, *z1, _mm512_sub_epi8(bf16_tiny8(y, k->magic), k->mn));
    return 1;
}
/*
 * One step of bf16_f8_run: the 64 elements at s + 2 i to d + i. Its return value is 1 when the
 * step had a lane below the normal range other than +-0, else 0. bl = 0: such lanes are taken only
 * in a step that has them (a branch); bl = 1: their codes are made in every step and selected by
 * a mask, so no branch depends on them. On data where such lanes come in a random part of the
 * steps (N(0, 1) to e4m3fn: about half of them) the branch mispredicts, and out of cache that
 * costs far more than in cache: the load that decides it comes from memory, and every mispredict
 * waits for it. AMD Zen 4, bf16 -> e4m3fn on N(0, 1), ns/element, three alternating runs, medians:
 * bl = 0 in cache 0.094, at 2^26 0.240; bl = 1 0.117 and 0.123 (on uniform data bl = 0 is 0.057
 * and 0.100, bl = 1 0.118 and 0.124). bf16_f8_run picks bl from the steps before (below).
 */
static SIMD_INLINE int bf16_f8_step(unsigned char *d, const unsigned char *s, size_t i, const bf8c *k,
                                    const mxp__cvt_args *a, mxp__cvt_fn f32k, int nt, int pf, int bl)
{
    const n8m_c *c = &k->c;
    const V x = _mm512_loadu_si512(s + 2 * i);
    if (pf) MXP_SIMD_PREFETCH(s + 2 * i + MXP_SIMD_PREFETCH_DIST);
    const V y = _mm512_loadu_si512(s + 2 * i + 64);
    if (pf) MXP_SIMD_PREFETCH(s + 2 * i + 64 + MXP_SIMD_PREFETCH_DIST);
    const V t0 = n8w_tq(x, c->Dw, c->k), t1 = n8w_tq(y, c->Dw, c->k);
    const __mmask32 b0 = n8m_bad(t0, c), b1 = n8m_bad(t1, c);
    V b0v = n8w_byte(t0, c->Dw), b1v = n8w_byte(t1, c->Dw);
    int tiny = 0;
    if (bl) {
        /* every lane below the normal range, +-0 included, from bf16_tiny8 */
        __mmask32 z0, z1;
        if (!bf16_f8_small(x, y, b0, b1, &b0v, &b1v, k, &z0, &z1)) {
            bf16_f8_wide(d + i, s + 2 * i, a, f32k);
            return 0;
        }
        const __mmask32 o0 = _mm512_testn_epi16_mask(x, k->mag), o1 = _mm512_testn_epi16_mask(y, k->mag);
        tiny = ((z0 & (__mmask32)~o0) | (z1 & (__mmask32)~o1)) != 0;
    } else if ((b0 | b1) != 0) {
        /* +-0 lanes only (ReLU data): the byte is the sign */
        const __mmask32 o0 = _mm512_testn_epi16_mask(x, k->mag), o1 = _mm512_testn_epi16_mask(y, k->mag);
        if (((b0 & (__mmask32)~o0) | (b1 & (__mmask32)~o1)) == 0) {
            b0v = n8m_zbyte(b0v, o0, x, c);
            b1v = n8m_zbyte(b1v, o1, y, c);
        } else {
            __mmask32 z0, z1;
            if (!bf16_f8_small(x, y, b0, b1, &b0v, &b1v, k, &z0, &z1)) {
                bf16_f8_wide(d + i, s + 2 * i, a, f32k);
                return 0;
            }
            tiny = 1;
        }
    }
    /* streaming: one 64-byte store (the destination is 64-byte aligned here) */
    n8w_put64(d + i, n8w_pack_mn(b0v, b1v, c->mn), nt);
    return tiny;
}
/* The steps of bf16_f8_run that streaming runs take in turn: TINY_RUNS (cvt_simd_impl.h) with runs
 * of TINY_RUN steps, bl = 1 for the next run if at least TINY_BL of them had a tiny lane
 * (bf16_f8_step's return), else bl = 0. AMD Zen 4, bf16 -> e4m3fn at 2^26, three alternating runs,
 * medians, ns/element, before (bl = 0 always) -> thresholds 3 / 5 / 8 of 16: uniform on [-8, 8]
 * (12% of the steps have such a lane) 0.106 -> 0.118 / 0.105 / 0.111; N(0, 1) 0.270 -> 0.134 /
 * 0.136 / 0.163; N(0, 4) 0.129 -> 0.135 / 0.125 / 0.123; uniform on [-1, 1] 0.264 -> 0.134 /
 * 0.145 / 0.144 (bench/RESULTS.md, session 42). Below a third of the steps the branch is cheaper,
 * as in cache. */
enum { TINY_RUN = 16, TINY_BL = 5 };
static SIMD_INLINE size_t bf16_f8_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, const sfmt t,
                                      const mxp__cvt_args *a, mxp__cvt_fn f32k, int nt)
{
    const int D = 23 - t.m;
    /* n8m's constants: minq folded into the add, so the range test is one VPANDD and one VPCMPUW
     * (n8m_bad) and the bytes come out as code - minq (n8w_pack_mn adds it back); streaming, one
     * 64-byte store per step. Both since session 40: AMD Zen 4, bf16 -> e4m3fn, ten alternating
     * runs of bench_convert --isa avx512-own, medians: in cache 0.0650 -> 0.0628 ns/element, at
     * 2^26 0.1123 -> 0.1101 (bench/RESULTS.md) */
    bf8c k;
    k.c = n8m_consts(D, fast_consts(t).add, 1u << t.m, t.maxfin);
    k.lo = _mm512_set1_epi16((short)((128 - t.bias) << 7));
    k.mag = _mm512_set1_epi16(0x7FFF);
    k.mn = _mm512_set1_epi16((short)k.c.mn);
    k.magic = _mm512_castsi512_ps(v_set1((uint32_t)(127 + 24 - t.bias - t.m) << 23));
    /* the source prefetch of the float32 narrowings (MXP_SIMD_PREFETCH_ON, above): Zen 5, 2^26,
     * seven alternating runs, 0.0786 -> 0.0737 ns/element (medians); each line's prefetch after
     * its load instead of both before the loads (cvt_simd_impl.h's PF_LINES), six runs, 0.0723 ->
     * 0.0680 */
    const int pf = nt && MXP_SIMD_PREFETCH_ON;
    if (!nt) {
        /* in cache the branch costs less than bl = 1's operations (above) */
        for (; i + 64 <= n; i += 64) bf16_f8_step(d, s, i, &k, a, f32k, 0, 0, 0);
        return i;
    }
#define BF8_STEP(bl) bf16_f8_step(d, s, i, &k, a, f32k, 1, pf, bl)
    TINY_RUNS(i, n, 64, TINY_RUN, TINY_BL, BF8_STEP);
#undef BF8_STEP
    return i;
}
static SIMD_INLINE void bf16_f8_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, const sfmt t,
                                     mxp__cvt_fn f32k)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    size_t i = 0;
    if (n >= 64 && (n * 3 >= MXP_SIMD_NT_THRESHOLD || a->stream)) {
        /* streaming: bf16_f8_run's 64-byte stores need a 64-byte aligned destination */
        i = (64 - (uintptr_t)d % 64) % 64;
        scalar_tail(t.dt, MXP_BFLOAT16, MXP__RNE, d, s, i, a, a->index0);
        i = bf16_f8_run(d, s, i, n, t, a, f32k, 1);
        if (!a->stream) _mm_sfence(); /* a->stream: the caller fences */
    } else {
        i = bf16_f8_run(d, s, i, n, t, a, f32k, 0);
    }
    scalar_tail(t.dt, MXP_BFLOAT16, MXP__RNE, d + i, s + 2 * i, n - i, a, a->index0 + i);
}
static void cvt_e4m3_bf16__avx512(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    bf16_f8_loop(dst, src, n, a, SF_E4M3, cvt_e4m3_f32__avx512);
}
static void cvt_e5m2_bf16__avx512(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    bf16_f8_loop(dst, src, n, a, SF_E5M2, cvt_e5m2_f32__avx512);
}
void mxp__cvt_register_avx512_bf16_f8(mxp__kernels *k)
{
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_BFLOAT16][MXP__RNE] = cvt_e4m3_bf16__avx512;
    k->cvt[MXP_FLOAT8_E5M2][MXP_BFLOAT16][MXP__RNE] = cvt_e5m2_bf16__avx512;
}

/*
 * float8 -> float16 / bfloat16 by table lookup (the generic step, cvt_simd_impl.h's to16_loop,
 * widened through VCVTPH2PS and narrowed back: about nine operations per 16 lanes). The result
 * is a function of the byte: a 128-entry table of results for the magnitude (sign cleared) in
 * 16-bit lanes, two VPERMT2W lookups of 64 entries each (a word index's low six bits pick the
 * entry) and a blend on the index's bit 6; the sign is the byte's bit 7, moved to bit 15. Seven
 * operations per 32 lanes. The tables are filled once, at registration, from the scalar
 * reference (every entry, NaN and saturation included), so a kernel result differs from the
 * reference only if the lookup is wrong, which the tests check on all 256 bytes (test_isa's
 * test_narrow_sources). Every result is exact, so stochastic rounding takes the same kernel.
 * (Until session 27 the same tables took e4m3fn <-> e5m2: see f8z_loop below.)
 */
enum { F8W_E4M3_F16, F8W_E5M2_F16, F8W_E5M2_F16_SAT, F8W_E4M3_BF16, F8W_E5M2_BF16, F8W_E5M2_BF16_SAT, F8W_N };
static const struct {
    mxp_dtype to, from;
    bool sat;
} f8w_kinds[F8W_N] = {{MXP_FLOAT16, MXP_FLOAT8_E4M3FN, false},   {MXP_FLOAT16, MXP_FLOAT8_E5M2, false},
                      {MXP_FLOAT16, MXP_FLOAT8_E5M2, true},       {MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, false},
                      {MXP_BFLOAT16, MXP_FLOAT8_E5M2, false},     {MXP_BFLOAT16, MXP_FLOAT8_E5M2, true}};
static _Alignas(64) uint16_t f8w_tab[F8W_N][128];

/* 64 16-bit results at p (64-byte aligned when nt: streaming) */
PRIM void st_words2(unsigned char *p, V r0, V r1, int nt)
{
    if (nt) {
        MXP__STREAM512(p, r0);
        MXP__STREAM512(p + 64, r1);
    } else {
        _mm512_storeu_si512(p, r0);
        _mm512_storeu_si512(p + 64, r1);
    }
}
/* w: 32 bytes zero-extended to words */
PRIM V f8w_word(V w, const V tb[4])
{
    const V lo = _mm512_permutex2var_epi16(tb[0], w, tb[1]), hi = _mm512_permutex2var_epi16(tb[2], w, tb[3]);
    const V r = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(w, _mm512_set1_epi16(0x40)), lo, hi);
    /* r | (w << 8 & 0x8000) */
    return _mm512_ternarylogic_epi32(r, _mm512_slli_epi16(w, 8), _mm512_set1_epi16((short)0x8000), 0xF8);
}
static SIMD_INLINE size_t f8w_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, const uint16_t *tab,
                                  int nt)
{
    const V tb[4] = {_mm512_load_si512(tab), _mm512_load_si512(tab + 32), _mm512_load_si512(tab + 64),
                     _mm512_load_si512(tab + 96)};
    for (; i + 64 <= n; i += 64) {
        const V r0 = f8w_word(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(s + i))), tb);
        const V r1 = f8w_word(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(s + i + 32))), tb);
        st_words2(d + 2 * i, r0, r1, nt);
    }
    return i;
}
/* kind: the table without saturation; the saturating one follows it (those with an infinity) */
static SIMD_INLINE void f8w_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, int kind)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    const mxp_dtype to = f8w_kinds[kind].to, from = f8w_kinds[kind].from;
    const uint16_t *tab = f8w_tab[kind + (from == MXP_FLOAT8_E5M2 && a->saturate)];
    int nt;
    size_t i = pair_head(d, s, n, a, to, from, 1, 2, 64, &nt);
    i = nt ? f8w_run(d, s, i, n, tab, 1) : f8w_run(d, s, i, n, tab, 0);
    pair_done(d, s, i, n, a, to, from, 1, 2, nt);
}
#define F8W(name, kind)                                                                        \
    static void name(void *dst, const void *src, size_t n, const mxp__cvt_args *a)             \
    {                                                                                          \
        f8w_loop(dst, src, n, a, kind);                                                        \
    }
F8W(cvt_f16_e4m3_tab__avx512, F8W_E4M3_F16)
F8W(cvt_f16_e5m2_tab__avx512, F8W_E5M2_F16)
F8W(cvt_bf16_e4m3_tab__avx512, F8W_E4M3_BF16)
F8W(cvt_bf16_e5m2_tab__avx512, F8W_E5M2_BF16)
/*
 * e4m3fn <-> e5m2 nearest-even on 64 bytes per step: cvt_avx2.c's e5m2_e4m3_b / e4m3_e5m2_b
 * (the rules are explained there; the same VPSHUFB tables, mxp__f8b_sub, in every 128-bit lane)
 * with mask registers for the blends and VPTERNLOGD for the and-or steps. Until session 27 these
 * pairs used the 16-bit-lane tables above (VPMOVZXBW, two VPERMT2W, a blend and a pack per 32
 * elements); AMD Zen 4, in cache, that took 0.040 ns/element, the AVX2 byte kernel 0.032.
 */
PRIM V e5m2_e4m3_z(V b, V tab, int sat)
{
    const V a = _mm512_and_si512(b, _mm512_set1_epi8(0x7F));
    const V nrm = _mm512_sub_epi8(_mm512_add_epi8(a, a), _mm512_set1_epi8(64));
    const V sub = _mm512_shuffle_epi8(tab, _mm512_sub_epi8(a, _mm512_set1_epi8(20)));
    V r = _mm512_mask_blend_epi8(_mm512_cmpgt_epi8_mask(a, _mm512_set1_epi8(35)), sub, nrm);
    r = _mm512_min_epu8(r, _mm512_set1_epi8(sat ? 0x7E : 0x7F));
    if (sat) r = _mm512_mask_mov_epi8(r, _mm512_cmpgt_epi8_mask(a, _mm512_set1_epi8(0x7C)), _mm512_set1_epi8(0x7F));
    return _mm512_ternarylogic_epi32(r, b, _mm512_set1_epi8((char)0x80), 0xF8); /* r | (b & 0x80) */
}
PRIM V e4m3_e5m2_z(V b, V tab, V nanc)
{
    const V a = _mm512_and_si512(b, _mm512_set1_epi8(0x7F));
    const V h = _mm512_and_si512(_mm512_srli_epi16(a, 1), _mm512_set1_epi8(0x7F)); /* a >> 1 per byte */
    const V lsb = _mm512_ternarylogic_epi32(a, h, _mm512_set1_epi8(1), 0x80);       /* a & h & 1 */
    const V nrm = _mm512_add_epi8(_mm512_add_epi8(h, _mm512_set1_epi8(32)), lsb);
    V r = _mm512_mask_blend_epi8(_mm512_cmplt_epu8_mask(a, _mm512_set1_epi8(8)), nrm, _mm512_shuffle_epi8(tab, a));
    r = _mm512_mask_mov_epi8(r, _mm512_cmpeq_epi8_mask(a, _mm512_set1_epi8(0x7F)), nanc);
    return _mm512_ternarylogic_epi32(r, b, _mm512_set1_epi8((char)0x80), 0xF8);
}
static SIMD_INLINE size_t f8z_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, int e4, int sat,
                                  int nt)
{
    const V tab = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)mxp__f8b_sub[e4 ? 0 : 1]));
    const V nanc = _mm512_set1_epi8((char)mxp__f8b_nan);
    const int pf = nt && PF_L2; /* Intel, as f8v_run (not measured here: every CPU timed has VBMI) */
    for (; i + 64 <= n; i += 64) {
        const V b = _mm512_loadu_si512(s + i);
        if (pf) pf_line_far(s + i + MXP_SIMD_PREFETCH_DIST);
        const V r = e4 ? e5m2_e4m3_z(b, tab, sat) : e4m3_e5m2_z(b, tab, nanc);
        if (nt) MXP__STREAM512(d + i, r);
        else _mm512_storeu_si512(d + i, r);
    }
    return i;
}
/* e4: e5m2 -> e4m3fn (else e4m3fn -> e5m2, where saturation changes nothing) */
static SIMD_INLINE void f8z_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, int e4)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    const mxp_dtype to = e4 ? MXP_FLOAT8_E4M3FN : MXP_FLOAT8_E5M2, from = e4 ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN;
    const int sat = e4 && a->saturate;
    int nt;
    size_t i = pair_head(d, s, n, a, to, from, 1, 1, 64, &nt); /* the streaming stores: 64-byte aligned */
    if (sat) i = nt ? f8z_run(d, s, i, n, e4, 1, 1) : f8z_run(d, s, i, n, e4, 1, 0);
    else i = nt ? f8z_run(d, s, i, n, e4, 0, 1) : f8z_run(d, s, i, n, e4, 0, 0);
    pair_done(d, s, i, n, a, to, from, 1, 1, nt);
}
static void cvt_e4m3_e5m2__avx512(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    f8z_loop(dst, src, n, a, 1);
}
static void cvt_e5m2_e4m3__avx512(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    f8z_loop(dst, src, n, a, 0);
}
/*
 * float16 -> float8 nearest-even on 32 16-bit lanes (the composed path, cvt_compose.c, widened
 * blocks to float32 and ran the float32 kernel: 0.11-0.13 ns/element in cache on Zen 4). With a
 * = |h| (the float16's bits without the sign):
 *  - e5m2 is float16's top byte (same exponent field and bias, 2 of the 10 mantissa bits), so
 *    the code is a rounded to its top 8 bits, (a + 0x7F + lsb) >> 8, lsb = bit 8 of a: over the
 *    subnormals too, and a carry out of max finite gives 0x7C, infinity, as the reference's
 *    "max finite + 1" rule does (infinity itself stays 0x7C). NaN: S.11111.1m, m the payload's
 *    top bit (the reference's: quiet bit forced, payload truncated), i.e. (h >> 8) | 2.
 *  - e4m3fn: for a >= 2^-6 (0x2400) the same rounding to 3 mantissa bits, (a + 0x3F + lsb) >> 7,
 *    minus 64 (exponent bias 15 -> 7); every overflow, infinity and NaN lands at or above 0x7F
 *    (the NaN slot: 464 -> 448, above it NaN, as the reference), so min(code, 0x7F), or 0x7E
 *    when saturating with NaN lanes set to 0x7F after. Below 2^-6 the code is the value over
 *    the quantum 2^-9, nearest-even, by float32 arithmetic (f16_e4m3_tiny; in a step with such
 *    a lane other than +-0, or in every step of a streaming run where they are frequent,
 *    f16_e4m3_step; a step whose only such lanes are +-0 keeps their signs).
 * The sign is or-ed in as bit 7. Stochastic rounding from float16 is srn_run's (cvt_simd_impl.h).
 */
PRIM V f16_e5m2_w(V h, int sat)
{
    const V a = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF)), hs = _mm512_srli_epi16(h, 8);
    const V lsb = _mm512_and_si512(hs, _mm512_set1_epi16(1));
    V t = _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(a, _mm512_set1_epi16(0x7F)), lsb), 8);
    if (sat) t = _mm512_min_epu16(t, _mm512_set1_epi16(0x7B));
    t = _mm512_ternarylogic_epi32(t, hs, _mm512_set1_epi16(0x80), 0xF8); /* t | (hs & 0x80) */
    const __mmask32 nan = _mm512_cmpgt_epu16_mask(a, _mm512_set1_epi16(0x7C00));
    return _mm512_mask_mov_epi16(t, nan, _mm512_or_si512(hs, _mm512_set1_epi16(2)));
}
PRIM V f16_e4m3_w(V h, int sat, __mmask32 *tiny)
{
    const V a = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
    /* the rebias (- 64 << 7) in the rounding add: a lane below 2^-7 (a < 64 << 7) wraps, but
     * every lane below 2^-6 (0x2400) is tiny and replaced; + 1 where the kept lsb (bit 7) is
     * set, by VPTESTMW and a masked add. Two operations fewer: AMD Zen 4, in cache, 0.071 ->
     * 0.061 ns/element (bench/RESULTS.md, session 27) */
    const __mmask32 odd = _mm512_test_epi16_mask(a, _mm512_set1_epi16(0x80));
    V t = _mm512_add_epi16(a, _mm512_set1_epi16(0x3F - (64 << 7)));
    t = _mm512_srli_epi16(_mm512_mask_add_epi16(t, odd, t, _mm512_set1_epi16(1)), 7);
    t = _mm512_min_epu16(t, _mm512_set1_epi16(sat ? 0x7E : 0x7F));
    if (sat) /* NaN lanes: 0x7F */
        t = _mm512_mask_mov_epi16(t, _mm512_cmpgt_epu16_mask(a, _mm512_set1_epi16(0x7C00)), _mm512_set1_epi16(0x7F));
    *tiny = _mm512_cmpgt_epu16_mask(_mm512_set1_epi16(0x2400), a);
    return _mm512_ternarylogic_epi32(t, _mm512_srli_epi16(h, 8), _mm512_set1_epi16(0x80), 0xF8);
}
/* the codes of the lanes tiny (below 2^-6) into t, by float32 arithmetic as bf16_tiny8: each
 * dword's two float16 magnitudes at float32's field positions (<< 13 and >> 3, masked to bits 13 ..
 * 27: the value times 2^-112), plus magic = 2^-98, whose ulp is the quantum 2^-9 times 2^-112, so
 * that the sum's low word is the code. Until session 42 by VPSRLVW / VPSLLVW of the significand.
 * AMD Zen 4, f16 -> e4m3fn, three alternating runs, medians, ns/element, before -> after this and
 * f16_e4m3_step's bl: N(0, 1) in cache 0.095 -> 0.081, at 2^26 0.202 -> 0.110; uniform on [-1, 1]
 * 0.102 -> 0.082 and 0.182 -> 0.111; ReLU data 0.130 -> 0.105 and 0.137 -> 0.109; uniform on
 * [-8, 8] 0.062 -> 0.058 and 0.098 -> 0.096 */
PRIM V f16_e4m3_tiny(V h, V t, __mmask32 tiny)
{
    const V fm = _mm512_set1_epi32(0x0FFFE000);
    const __m512 magic = _mm512_castsi512_ps(_mm512_set1_epi32((127 - 98) << 23));
    const __m512 ev = _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(h, 13), fm));
    const __m512 od = _mm512_castsi512_ps(_mm512_and_si512(_mm512_srli_epi32(h, 3), fm));
    const V se = _mm512_castps_si512(_mm512_add_round_ps(ev, magic, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const V so = _mm512_castps_si512(_mm512_add_round_ps(od, magic, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const V code = _mm512_mask_blend_epi16((__mmask32)0xAAAAAAAAu, se, _mm512_slli_epi32(so, 16));
    /* the tiny lanes: code | the sign (bit 7 of t) */
    return _mm512_mask_mov_epi16(t, tiny, _mm512_ternarylogic_epi32(t, _mm512_set1_epi16(0x80), code, 0xEA));
}
/* One step of f16_f8_run to e4m3fn, as bf16_f8_step: bl = 1 makes the tiny lanes' codes in every
 * step, without a branch; the return value is 1 when the step had a lane below 2^-6 other than
 * +-0. With bl = 0 a step whose only such lanes are +-0 keeps their signs alone (ReLU data; until
 * session 43 they took f16_e4m3_tiny, and every ReLU step counted as tiny) */
static SIMD_INLINE int f16_e4m3_step(unsigned char *d, const unsigned char *s, size_t i, int sat, int nt, int pf,
                                     int bl)
{
    const V h0 = _mm512_loadu_si512(s + 2 * i);
    if (pf) MXP_SIMD_PREFETCH(s + 2 * i + MXP_SIMD_PREFETCH_DIST);
    const V h1 = _mm512_loadu_si512(s + 2 * i + 64);
    if (pf) MXP_SIMD_PREFETCH(s + 2 * i + 64 + MXP_SIMD_PREFETCH_DIST);
    __mmask32 z0, z1;
    V b0 = f16_e4m3_w(h0, sat, &z0), b1 = f16_e4m3_w(h1, sat, &z1);
    int tiny = 0;
    if (bl || (z0 | z1) != 0) {
        /* the lanes below 2^-6 that are not +-0 */
        const V mag = _mm512_set1_epi16(0x7FFF);
        tiny = ((_mm512_test_epi16_mask(h0, mag) & z0) | (_mm512_test_epi16_mask(h1, mag) & z1)) != 0;
        if (bl || tiny) {
            b0 = f16_e4m3_tiny(h0, b0, z0);
            b1 = f16_e4m3_tiny(h1, b1, z1);
        } else { /* only +-0 there (ReLU data): the sign alone, bit 7 */
            const V sg = _mm512_set1_epi16(0x80);
            b0 = _mm512_mask_mov_epi16(b0, z0, _mm512_and_si512(b0, sg));
            b1 = _mm512_mask_mov_epi16(b1, z1, _mm512_and_si512(b1, sg));
        }
    }
    n8w_put64(d + i, n8w_pack(b0, b1), nt);
    return tiny;
}
static SIMD_INLINE size_t f16_f8_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, int e4, int bf,
                                     int sat, int nt)
{
    (void)bf; /* float16 only here: bfloat16 -> float8 has bf16_f8_loop */
    const int pf = nt && MXP_SIMD_PREFETCH_ON;
    if (!e4) {
        for (; i + 64 <= n; i += 64) {
            const V h0 = _mm512_loadu_si512(s + 2 * i);
            if (pf) MXP_SIMD_PREFETCH(s + 2 * i + MXP_SIMD_PREFETCH_DIST);
            const V h1 = _mm512_loadu_si512(s + 2 * i + 64);
            if (pf) MXP_SIMD_PREFETCH(s + 2 * i + 64 + MXP_SIMD_PREFETCH_DIST);
            n8w_put64(d + i, n8w_pack(f16_e5m2_w(h0, sat), f16_e5m2_w(h1, sat)), nt);
        }
        return i;
    }
    if (!nt) { /* in cache the branch costs less (bf16_f8_step) */
        for (; i + 64 <= n; i += 64) f16_e4m3_step(d, s, i, sat, 0, 0, 0);
        return i;
    }
    /* streaming: bl chosen from the steps before, as bf16_f8_run's */
#define F8E4_STEP(bl) f16_e4m3_step(d, s, i, sat, 1, pf, bl)
    TINY_RUNS(i, n, 64, TINY_RUN, TINY_BL, F8E4_STEP);
#undef F8E4_STEP
    return i;
}
SIMD_F16_F8(cvt_e4m3_f16__avx512, MXP_FLOAT8_E4M3FN, MXP_FLOAT16)
SIMD_F16_F8(cvt_e5m2_f16__avx512, MXP_FLOAT8_E5M2, MXP_FLOAT16)
/*
 * bfloat16 -> float16 nearest-even on 16-bit lanes, 64 elements per step (to16_loop widened to
 * float32 and narrowed by VCVTPS2PH: 0.089 ns/element in cache on Zen 4). With a = |h|, in
 * float16's normal range, 2^-14 <= |x| < 2^16 (0x3880 <= a < 0x4780), the value is exact in
 * float16 (7 mantissa bits into 10): t = (a << 3) - (112 << 10), the exponent rebiased from 127
 * to 15, which modulo 2^16 is (h << 3) + 0x4000 (the shift drops the sign); bfloat16's largest
 * value below 2^16, 65280, is below float16's max, 65504, so nothing in range rounds. +-0 is
 * taken too (a masked add leaves it 0). A step with any other lane (below 2^-14, where float16
 * rounds to its subnormals; overflow, infinity, NaN) converts the old way, by widening to
 * float32 and VCVTPS2PH (bf16_f16_fix): data dense in such values (bfloat16 gradients below
 * 2^-14) keeps to16_loop's speed instead of paying for a second path.
 */
PRIM V bf16_f16_fix(V h, int sat)
{
    const V x0 = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16);
    const V x1 = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16);
    V r = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(_mm512_castsi512_ps(x0), _MM_FROUND_TO_NEAREST_INT)),
                             _mm512_cvtps_ph(_mm512_castsi512_ps(x1), _MM_FROUND_TO_NEAREST_INT), 1);
    if (sat) { /* +-inf - 1 = +-max */
        const __mmask32 inf = _mm512_cmpeq_epi16_mask(_mm512_and_si512(r, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(0x7C00));
        r = _mm512_mask_sub_epi16(r, inf, r, _mm512_set1_epi16(1));
    }
    return r;
}
static SIMD_INLINE size_t bfh_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, int sat, int nt)
{
    const int pf = nt && PF_L2; /* Intel: see bf16_f16_run */
    for (; i + 64 <= n; i += 64) {
        const V h0 = _mm512_loadu_si512(s + 2 * i), h1 = _mm512_loadu_si512(s + 2 * i + 64);
        if (pf) {
            pf_line_far(s + 2 * i + MXP_SIMD_PREFETCH_DIST);
            pf_line_far(s + 2 * i + 64 + MXP_SIMD_PREFETCH_DIST);
        }
        __mmask32 o0, o1;
        V r0 = bf16_f16_w(h0, &o0), r1 = bf16_f16_w(h1, &o1);
        if ((o0 | o1) != 0) {
            r0 = bf16_f16_fix(h0, sat);
            r1 = bf16_f16_fix(h1, sat);
        }
        st_words2(d + 2 * i, r0, r1, nt);
    }
    return i;
}
static void cvt_f16_bf16_w__avx512(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    int nt;
    size_t i = pair_head(d, s, n, a, MXP_FLOAT16, MXP_BFLOAT16, 2, 2, 64, &nt);
    if (a->saturate) i = nt ? bfh_run(d, s, i, n, 1, 1) : bfh_run(d, s, i, n, 1, 0);
    else i = nt ? bfh_run(d, s, i, n, 0, 1) : bfh_run(d, s, i, n, 0, 0);
    pair_done(d, s, i, n, a, MXP_FLOAT16, MXP_BFLOAT16, 2, 2, nt);
}
void mxp__cvt_register_avx512_pairs(mxp__kernels *k)
{
    simd_register_to16(k); /* float16 -> bfloat16 (AVX512_BF16 replaces it), SR from 16-bit */
    k->cvt[MXP_FLOAT16][MXP_BFLOAT16][MXP__RNE] = cvt_f16_bf16_w__avx512;
    /* the reference's kernels from a table of our own: mxp__scalar_kernels() would wait for the
     * dispatcher's initialisation, which is what calls this */
    static mxp__kernels ref;
    mxp__cvt_register_scalar(&ref);
    unsigned char bytes[128];
    for (int b = 0; b < 128; b++) bytes[b] = (unsigned char)b;
    for (int j = 0; j < F8W_N; j++) {
        const mxp__cvt_args a = {f8w_kinds[j].sat, 0, 0, false};
        unsigned char out[2 * 128];
        ref.cvt[f8w_kinds[j].to][f8w_kinds[j].from][MXP__RNE](out, bytes, 128, &a);
        for (int b = 0; b < 128; b++) f8w_tab[j][b] = (uint16_t)(out[2 * b] | out[2 * b + 1] << 8);
    }
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT16][MXP__RNE] = cvt_e4m3_f16__avx512;
    k->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT16][MXP__RNE] = cvt_e5m2_f16__avx512;
    for (int mode = 0; mode < MXP__NMODES; mode++) {
        k->cvt[MXP_FLOAT16][MXP_FLOAT8_E4M3FN][mode] = cvt_f16_e4m3_tab__avx512;
        k->cvt[MXP_FLOAT16][MXP_FLOAT8_E5M2][mode] = cvt_f16_e5m2_tab__avx512;
        k->cvt[MXP_BFLOAT16][MXP_FLOAT8_E4M3FN][mode] = cvt_bf16_e4m3_tab__avx512;
        k->cvt[MXP_BFLOAT16][MXP_FLOAT8_E5M2][mode] = cvt_bf16_e5m2_tab__avx512;
    }
    mxp__f8b_init();
    k->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT8_E4M3FN][MXP__RNE] = cvt_e5m2_e4m3__avx512;
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT8_E5M2][MXP__RNE] = cvt_e4m3_e5m2__avx512;
}

/* float32 -> bfloat16 nearest-even with VCVTNEPS2BF16 (bf16_hw2); stochastic rounding keeps
 * the integer kernel. For CPUs with AVX512_BF16 only (dispatch.c). */
#define SF_BF16_HW ((sfmt){16, 7, 127, 0x7F7Fu, 0x7F80u, 0, MXP_BFLOAT16, 1})
static void cvt_bf16_f32_hw__avx512(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    narrow_loop(dst, src, n, a, SF_BF16_HW, 0);
}
/*
 * float16 -> bfloat16 nearest-even by VCVTPH2PS then VCVTNEPS2BF16, 32 elements per step (the
 * composed path, cvt_compose.c, ran the two table kernels through a float32 block). Exact: every
 * float16 is a float32 (VCVTPH2PS, as the f16 -> f32 entry, NaN quieted), and none is a float32
 * subnormal, so VCVTNEPS2BF16's flush never applies and it rounds each value once, nearest-even,
 * with the reference's NaN rule. Nothing overflows; with saturate +-inf becomes +-max (st16_words).
 */
static SIMD_INLINE void bf16_f16_run(unsigned char *d, const unsigned char *s, size_t n, int sat, int nt)
{
    /* streaming on Intel (MXP__PREFETCH_L2): each source line prefetched into L2 (cvt_avx512.c's
     * prefetch comment; bench/RESULTS.md, session 30) */
    const int pf = nt && PF_L2;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        const V h = CVTNE2BF16(hw_f16_ld(s + 2 * i), hw_f16_ld(s + 2 * i + 32));
        if (pf) pf_line_far(s + 2 * i + MXP_SIMD_PREFETCH_DIST);
        st16_vec(d + 2 * i, h, 0x7F80, sat, nt);
    }
}
/* A kernel whose loop run(d, s, n, sat, nt) takes 32 elements of ib bytes per step to 16-bit
 * results (format D from S, nearest-even): streaming when the call is large (or a->stream), from
 * the first 64-byte boundary of the destination, the head and the tail by the reference; the
 * loop specialised on saturate and streaming. */
#define HW16_KERNEL(name, D, S, ib, run)                                                       \
    static void name(void *dst, const void *src, size_t n, const mxp__cvt_args *a)             \
    {                                                                                          \
        unsigned char *d = (unsigned char *)dst;                                               \
        const unsigned char *s = (const unsigned char *)src;                                   \
        size_t i = 0;                                                                          \
        if (n >= 32 && (n * ((ib) + 2) >= MXP_SIMD_NT_THRESHOLD || a->stream) && (uintptr_t)d % 2 == 0) { \
            i = (64 - (uintptr_t)d % 64) % 64 / 2; /* 64-byte streaming stores */              \
            scalar_tail(D, S, MXP__RNE, d, s, i, a, a->index0);                                \
            if (a->saturate) run(d + 2 * i, s + (ib) * i, n - i, 1, 1);                        \
            else run(d + 2 * i, s + (ib) * i, n - i, 0, 1);                                    \
            _mm_sfence();                                                                      \
        } else if (a->saturate) {                                                              \
            run(d, s, n, 1, 0);                                                                \
        } else {                                                                               \
            run(d, s, n, 0, 0);                                                                \
        }                                                                                      \
        const size_t done = i + (n - i) / 32 * 32;                                             \
        scalar_tail(D, S, MXP__RNE, d + 2 * done, s + (ib) * done, n - done, a, a->index0 + done); \
    }
HW16_KERNEL(cvt_bf16_f16_hw__avx512, MXP_BFLOAT16, MXP_FLOAT16, 2, bf16_f16_run)
void mxp__cvt_register_avx512_bf16(mxp__kernels *k)
{
    k->cvt[MXP_BFLOAT16][MXP_FLOAT32][MXP__RNE] = cvt_bf16_f32_hw__avx512;
    k->cvt[MXP_BFLOAT16][MXP_FLOAT16][MXP__RNE] = cvt_bf16_f16_hw__avx512;
}

/* float64 -> bfloat16 nearest-even with VCVTNEPS2BF16 after the round-to-odd step (n64_loop) */
SIMD_F64N(cvt_bf16_f64_hw, SF_BF16_HW)
void mxp__cvt_register_avx512_f64(mxp__kernels *k, bool bf16)
{
    simd_register_f64(k);
    if (bf16) k->cvt[MXP_BFLOAT16][MXP_FLOAT64][MXP__RNE] = cvt_bf16_f64_hw__avx512;
}

#ifndef MXP_AVX512_EMULATED
/*
 * AVX512_FP16 VCVTPD2PH: 8 float64 -> 8 float16 in one rounding, nearest-even by its embedded
 * rounding ({rn-sae}: MXCSR's rounding mode not read, no exception flag raised), for CPUs that
 * have it (mxp__cvt_register_avx512_fp16; dispatch.c registers it only there). Written as
 * inline assembly: gcc 12 has the intrinsic, clang 14 has neither it nor the __m128h type, and
 * both assemblers know the instruction. The SDM's rules are the reference's (cvt_scalar.c):
 * a result below float16's range is its float16 subnormal or +-0 (float16 subnormals are never
 * flushed, whatever MXCSR.FTZ says; an input float64 subnormal, flushed or not under DAZ, gives
 * +-0 either way), an overflow is +-inf, and NaN keeps its sign and the top 9 payload bits with
 * the quiet bit set. test_isa checks it on CPUs that have it, its MXCSR settings included.
 * Intel Xeon (session 31), one process per build, median of 301 calls: in cache 0.124 ns/element
 * by n64_loop (the round-to-odd float32 step, then VCVTPS2PH) -> 0.072 (the limit: 0.062); at
 * 2^26 0.58-0.60 both (memory-bound). VCVTPD2PH issues one every 2 cycles there.
 */
PRIM __m128i f64h_cvt8(const unsigned char *p)
{
    const __m512d x = _mm512_loadu_pd((const double *)p);
    __m128i h;
    __asm__("vcvtpd2ph %{rn-sae%}, %1, %0" : "=v"(h) : "v"(x));
    return h;
}
static SIMD_INLINE void f64h_run(unsigned char *d, const unsigned char *s, size_t n, int sat, int nt)
{
    const int pf = nt && PF_L2; /* Intel: see bf16_f16_run */
    const __m128i mag = _mm_set1_epi16(0x7FFF), inf = _mm_set1_epi16(0x7C00), one = _mm_set1_epi16(1);
    for (size_t i = 0; i + 32 <= n; i += 32) {
        const unsigned char *p = s + 8 * i;
        /* each result stored as it is (16 bytes): no VINSERTI128 / VINSERTI64X4, which share
         * VCVTPD2PH's port (in cache 0.089-0.091 -> 0.072-0.081 ns/element with them gone) */
        for (int j = 0; j < 4; j++) {
            __m128i h = f64h_cvt8(p + 64 * j);
            if (sat) h = _mm_mask_sub_epi16(h, _mm_cmpeq_epi16_mask(_mm_and_si128(h, mag), inf), h, one);
            if (pf) pf_line_far(p + 64 * j + MXP_SIMD_PREFETCH_DIST);
            if (nt) _mm_stream_si128((__m128i *)(void *)(d + 2 * i + 16 * j), h);
            else _mm_storeu_si128((__m128i *)(void *)(d + 2 * i + 16 * j), h);
        }
    }
}
HW16_KERNEL(cvt_f16_f64_fp16__avx512, MXP_FLOAT16, MXP_FLOAT64, 8, f64h_run)
void mxp__cvt_register_avx512_fp16(mxp__kernels *k)
{
    k->cvt[MXP_FLOAT16][MXP_FLOAT64][MXP__RNE] = cvt_f16_f64_fp16__avx512;
}
#endif

/*
 * Stochastic rounding from float64 on 8 64-bit lanes per vector, 16 elements per step: the
 * algorithm of cvt_f64_avx2.c (see there; the same general path, the same fast path and range
 * check, +-0 lanes in the fast path), with mask registers for the selects and one vector of 16
 * random words per step. Integer-only, so MXCSR cannot change a result.
 */
typedef struct f64z {
    int bits, m, bias, fn;
    uint32_t maxfin, inf;
} f64z;

#define Q1(x) _mm512_set1_epi64((long long)(x))
/* Streaming calls prefetch their source this many bytes ahead. Unlike the float32 kernels
 * (no prefetch, see above), these read 8 bytes per element and gained: Zen 5, 2^26 elements,
 * avx512-own, two runs each, ns/element: f64->bf16 SR 0.306-0.315 without, 0.250-0.252 at
 * 4096 bytes (0.276-0.285 at 2048, 0.301-0.307 at 1024); f64->f32 SR 0.282-0.299 without,
 * 0.268-0.301 at 4096. Each line's prefetch after its load rather than both before the loads
 * (as cvt_simd_impl.h's PF_LINES), six alternating runs, medians: f64->bf16 SR 0.248 -> 0.233,
 * f64->f32 SR 0.274 -> 0.262. The hint is pf_line's: PREFETCHT2 on Intel, PREFETCHT0 elsewhere. */
#define F64Z_PREFETCH 4096

/* 8 doubles (bits u) and their random words r (zero-extended to 64-bit lanes) -> 8 target
 * patterns in 64-bit lanes: every case (cvt_f64_avx2.c's sr_f64_4) */
PRIM __m512i sr_f64z_general(__m512i u, __m512i r, const f64z t, int sat)
{
    const __m512i a = _mm512_and_si512(u, Q1(0x7FFFFFFFFFFFFFFFll));
    const __m512i E = _mm512_srli_epi64(a, 52);
    const __mmask8 nrm = _mm512_cmpgt_epi64_mask(E, Q1(1023 - t.bias));
    const __m512i base = _mm512_mask_blend_epi64(
        nrm, _mm512_or_si512(_mm512_and_si512(a, Q1(0xFFFFFFFFFFFFFll)), Q1(1ll << 52)),
        _mm512_sub_epi64(a, Q1((long long)(1023 - t.bias) << 52)));
    const __m512i sh = _mm512_mask_blend_epi64(nrm, _mm512_sub_epi64(Q1(1076 - t.bias - t.m), E), Q1(52 - t.m));
    const __m512i q = _mm512_srlv_epi64(base, sh);
    const __m512i F = _mm512_and_si512(_mm512_or_si512(_mm512_srlv_epi64(base, _mm512_sub_epi64(sh, Q1(32))),
                                                       _mm512_sllv_epi64(base, _mm512_sub_epi64(Q1(32), sh))),
                                       Q1(0xFFFFFFFFll));
    const __mmask8 up = _mm512_cmpgt_epi64_mask(r, _mm512_xor_si512(F, Q1(0xFFFFFFFFll)));
    __m512i mag = _mm512_mask_add_epi64(q, up, q, Q1(1));
    mag = _mm512_mask_mov_epi64(mag, _mm512_cmpgt_epi64_mask(mag, Q1(t.maxfin)),
                                Q1(sat ? t.maxfin : t.fn ? 0x7Fu : t.inf));
    const __m512i nanv = t.fn ? Q1(0x7F)
                              : _mm512_or_si512(Q1(t.inf | (1u << (t.m - 1))),
                                                _mm512_srli_epi64(_mm512_and_si512(a, Q1(0xFFFFFFFFFFFFFll)), 52 - t.m));
    mag = _mm512_mask_mov_epi64(mag, _mm512_cmpgt_epi64_mask(a, Q1(0x7FF0000000000000ll)), nanv);
    return _mm512_or_si512(mag, _mm512_slli_epi64(_mm512_srli_epi64(u, 63), t.bits - 1));
}

/* 16 results y (dwords in element order, each < 2^t.bits) as 16 elements of t.bits at d; nt:
 * streaming stores (d aligned to 16 * t.bits / 8 bytes) */
PRIM void st_f64z_y(unsigned char *d, __m512i y, const f64z t, int nt)
{
    if (t.bits == 32) {
        if (nt) MXP__STREAM512((void *)d, y);
        else _mm512_storeu_si512((void *)d, y);
    } else if (t.bits == 16) {
        if (nt) MXP__STREAM256((__m256i *)(void *)d, _mm512_cvtepi32_epi16(y));
        else _mm256_storeu_si256((__m256i *)(void *)d, _mm512_cvtepi32_epi16(y));
    } else {
        if (nt) MXP__STREAM128((__m128i *)(void *)d, _mm512_cvtepi32_epi8(y));
        else _mm_storeu_si128((__m128i *)(void *)d, _mm512_cvtepi32_epi8(y));
    }
}

/* the low dwords of q0 then q1 (values < 2^32) as 16 elements of t.bits at d; nt: streaming
 * stores (d aligned to 16 * t.bits / 8 bytes) */
PRIM void st_f64z(unsigned char *d, __m512i q0, __m512i q1, const f64z t, int nt)
{
    const __m512i lo = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    st_f64z_y(d, _mm512_permutex2var_epi32(q0, lo, q1), t, nt);
}

/*
 * The elements i .. end (a multiple of 16 later) of one block of 2^32 indices (key; element i's
 * low index half lo): the fast path in the inner loop, a failing step by the general path.
 * The fast path is cvt_f64_avx2.c's sr_f64_run's (see there): for every lane in the target's
 * normal range up to max finite, the result is the high dword of T = (base shifted into place)
 * + r, one VPERMT2D collects the 16 high dwords in element order, and the range check and the
 * sign come from the inputs' high dwords, collected by another VPERMT2D, as 32-bit numbers. A
 * lane whose high dword is +-0 takes the fast path too, with the sign alone as its result
 * (the masked VPTERNLOGD keeps the shifted high dword there). The random words: the Weyl states
 * are laid out so that the low dwords of r are the words of elements 0..7 (the first vector's)
 * and the high dwords those of elements 8..15: dword lane 2k holds index k, lane 2k + 1 index
 * 8 + k. Until session 45 the fast path worked on the 64-bit lanes (two VPERMD for the words, a
 * shift, add and shift per vector for the result, a shift and VPTERNLOGQ for the sign, the range
 * check per vector, a VPERMT2D for the low dwords): Intel Xeon (CPU 4 of bench/RESULTS.md),
 * medians of three alternating runs, ns/element before -> after, in cache / 2^26: f64->f32
 * stochastic 0.352 / 0.725 -> 0.269 / 0.710, f64->bf16 0.376 / 0.760 -> 0.304 / 0.656
 * (nearest-even 0.12 / 0.69 and 0.15 / 0.62); ReLU data alike.
 */
PRIM void sr_f64z_run(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t lo,
                      uint64_t key, const f64z t, int sat, int nt)
{
    const size_t ob = (size_t)t.bits / 8;
    const int D = 52 - t.m;
    const long long lo64 = (long long)(1024 - t.bias) << 52;
    const long long hi64 = ((long long)t.maxfin << (52 - t.m)) + ((long long)(1023 - t.bias) << 52);
    const uint32_t lo32 = (uint32_t)((unsigned long long)lo64 >> 32);
    const uint32_t hi32 = (uint32_t)(((unsigned long long)hi64 + 1u) >> 32) - 1u;
    V khi = v_set1((uint32_t)(key >> 32)), step = v_set1(16u * MXP__SR_W);
    V m1 = v_set1(MXP__SR_M1), m2 = v_set1(MXP__SR_M2);
    V abs32 = v_set1(0x7FFFFFFFu), oadd = v_set1(0x7FFFFFFFu - hi32), olim = v_set1(0x7FFFFFFFu - (hi32 - lo32));
    V ihi = _mm512_add_epi32(_mm512_slli_epi32(v_iota(), 1), v_set1(1u)); /* dwords 1, 3, .., 31 */
    __m512i reb = Q1((long long)(1023 - t.bias) << 52), low = Q1(0xFFFFFFFFll);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(khi);
    MXP_SIMD_PIN(step);
    MXP_SIMD_PIN(m1);
    MXP_SIMD_PIN(m2);
    MXP_SIMD_PIN(abs32);
    MXP_SIMD_PIN(oadd);
    MXP_SIMD_PIN(olim);
    MXP_SIMD_PIN(ihi);
    MXP_SIMD_PIN(reb);
    MXP_SIMD_PIN(low);
#endif
    /* dword lane j: index j / 2 (j even) or 8 + j / 2 (j odd), as above */
    const V lay = _mm512_or_si512(_mm512_srli_epi32(v_iota(), 1),
                                  _mm512_slli_epi32(_mm512_and_si512(v_iota(), v_set1(1u)), 3));
    V il = v_add(v_set1(lo * MXP__SR_W + (uint32_t)key), v_mullo(lay, v_set1(MXP__SR_W)));
    while (i < end) {
        for (; i < end; i += 16) {
            /* each source line's prefetch after its load, 4096 bytes ahead (see F64Z_PREFETCH) */
            const __m512i u0 = _mm512_loadu_si512((const void *)(s + 8 * i));
            if (nt) pf_line_far(s + 8 * i + F64Z_PREFETCH);
            const __m512i u1 = _mm512_loadu_si512((const void *)(s + 8 * i + 64));
            if (nt) pf_line_far(s + 8 * i + F64Z_PREFETCH + 64);
            const V h = _mm512_permutex2var_epi32(u0, ihi, u1); /* sign and high bits, in order */
            const V ah = _mm512_and_si512(h, abs32);
            const __mmask16 nz = _mm512_test_epi32_mask(ah, ah);
            if (_mm512_mask_cmpgt_epi32_mask(nz, olim, _mm512_add_epi32(ah, oadd)) != 0) break;
            const V r = sr_finish(sr_words_hi(il, khi, m1, m2));
            /* base from the signed bits: for float32 the sign is shifted out; for the narrower
             * targets it lands at bit 31 - (D - 32) >= 13 of the high dword, above the result's
             * t.bits, where VPMOVDW / VPMOVDB drop it (cvt_f64_avx2.c clears it first: VPACKUSDW
             * saturates) */
            __m512i t0, t1;
            if (D < 32) {
                t0 = _mm512_slli_epi64(_mm512_sub_epi64(u0, reb), (unsigned)(32 - D));
                t1 = _mm512_slli_epi64(_mm512_sub_epi64(u1, reb), (unsigned)(32 - D));
            } else {
                t0 = _mm512_srli_epi64(_mm512_sub_epi64(u0, reb), (unsigned)(D - 32));
                t1 = _mm512_srli_epi64(_mm512_sub_epi64(u1, reb), (unsigned)(D - 32));
            }
            const V q = _mm512_permutex2var_epi32(_mm512_add_epi64(t0, _mm512_and_si512(r, low)), ihi,
                                                  _mm512_add_epi64(t1, _mm512_srli_epi64(r, 32)));
            /* q | the sign at bit t.bits - 1 where nz, the shifted high dword (the sign alone) elsewhere */
            const V sg = t.bits == 32 ? h : _mm512_srli_epi32(h, (unsigned)(32 - t.bits));
            st_f64z_y(d + ob * i, _mm512_mask_ternarylogic_epi32(sg, nz, q, v_set1(1u << (t.bits - 1)), 0xEC), t, nt);
            il = v_add(il, step);
        }
        if (i >= end) break;
        const V r = sr_finish(sr_words_hi(il, khi, m1, m2));
        const __m512i u0 = _mm512_loadu_si512((const void *)(s + 8 * i));
        const __m512i u1 = _mm512_loadu_si512((const void *)(s + 8 * i + 64));
        st_f64z(d + ob * i, sr_f64z_general(u0, _mm512_and_si512(r, low), t, sat),
                sr_f64z_general(u1, _mm512_srli_epi64(r, 32), t, sat), t, nt);
        il = v_add(il, step);
        i += 16;
    }
}

PRIM void sr_from_f64z(void *dst, const void *src, size_t n, const mxp__cvt_args *a, mxp_dtype dt,
                       const f64z t, int sat)
{
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *d = (unsigned char *)dst;
    const size_t ob = (size_t)t.bits / 8;
    const mxp__cvt_fn ref = mxp__scalar_kernels()->cvt[dt][MXP_FLOAT64][MXP__SR];
    size_t i = 0;
    int nt = 0;
    /* large calls stream their output (cvt_simd_impl.h's narrow_loop): the reference up to the
     * first destination address aligned to a step's 16 * ob bytes */
    if (n >= 32 && n * (8 + ob) >= MXP_SIMD_NT_THRESHOLD && (uintptr_t)d % ob == 0) {
        const size_t align = 16 * ob;
        i = (align - (uintptr_t)d % align) % align / ob; /* < 16 */
        ref(d, s, i, a);
        nt = 1;
    }
    while (i + 16 <= n) {
        const uint64_t idx = a->index0 + i;
        const uint32_t lo = (uint32_t)idx;
        const uint64_t room = 0x100000000ull - lo; /* indices before the low half wraps */
        if (room < 16) {
            /* the reference re-keys the straddling elements (streaming: a whole step of 16,
             * so that the destination stays aligned) */
            mxp__cvt_args b = *a;
            b.index0 = idx;
            const size_t cnt = nt ? 16 : (size_t)room;
            ref(d + ob * i, s + 8 * i, cnt, &b);
            i += cnt;
            continue;
        }
        size_t cnt = n - i;
        if ((uint64_t)cnt > room) cnt = (size_t)room;
        const size_t end = i + cnt / 16 * 16;
        sr_f64z_run(d, s, i, end, lo, mxp__sr_key(a->seed, (uint32_t)(idx >> 32)), t, sat, nt);
        i = end;
    }
    if (nt) MXP_SIMD_NT_FENCE();
    mxp__cvt_args b = *a;
    b.index0 = a->index0 + i;
    if (i < n) ref(d + ob * i, s + 8 * i, n - i, &b);
}

#ifdef MXP_SIMD_NO_SPECIALISE
#define SR_F64Z(name, dt, ...)                                                                   \
    static void name(void *dst, const void *src, size_t n, const mxp__cvt_args *a)              \
    {                                                                                            \
        sr_from_f64z(dst, src, n, a, dt, (f64z){__VA_ARGS__}, a->saturate);                      \
    }
#else
#define SR_F64Z(name, dt, ...)                                                                   \
    static void name(void *dst, const void *src, size_t n, const mxp__cvt_args *a)              \
    {                                                                                            \
        const f64z t = {__VA_ARGS__};                                                            \
        if (a->saturate) sr_from_f64z(dst, src, n, a, dt, t, 1);                                 \
        else sr_from_f64z(dst, src, n, a, dt, t, 0);                                             \
    }
#endif
/*                                     bits  m  bias fn maxfin       inf */
SR_F64Z(cvt_f32_f64_sr__avx512, MXP_FLOAT32, 32, 23, 127, 0, 0x7F7FFFFFu, 0x7F800000u)
SR_F64Z(cvt_f16_f64_sr__avx512, MXP_FLOAT16, 16, 10, 15, 0, 0x7BFFu, 0x7C00u)
SR_F64Z(cvt_bf16_f64_sr__avx512, MXP_BFLOAT16, 16, 7, 127, 0, 0x7F7Fu, 0x7F80u)
SR_F64Z(cvt_e4m3_f64_sr__avx512, MXP_FLOAT8_E4M3FN, 8, 3, 7, 1, 0x7Eu, 0u)
SR_F64Z(cvt_e5m2_f64_sr__avx512, MXP_FLOAT8_E5M2, 8, 2, 15, 0, 0x7Bu, 0x7Cu)

void mxp__cvt_register_f64_avx512(mxp__kernels *k)
{
    k->cvt[MXP_FLOAT32][MXP_FLOAT64][MXP__SR] = cvt_f32_f64_sr__avx512;
    k->cvt[MXP_FLOAT16][MXP_FLOAT64][MXP__SR] = cvt_f16_f64_sr__avx512;
    k->cvt[MXP_BFLOAT16][MXP_FLOAT64][MXP__SR] = cvt_bf16_f64_sr__avx512;
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT64][MXP__SR] = cvt_e4m3_f64_sr__avx512;
    k->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT64][MXP__SR] = cvt_e5m2_f64_sr__avx512;
}

/*
 * AVX512_VBMI: float8 sources by byte tables (mxp__cvt_register_avx512_vbmi; dispatch.c registers
 * it on CPUs with the instruction set, last). Each conversion below is a function of the float8
 * byte whose result, for the magnitude (the byte's low 7 bits), fits in its top two bytes (the
 * float8 value's sign, exponent and at most three mantissa bits; every lower byte zero), and
 * whose negative is the positive with the top bit set. So one VPERMI2B on the 64 source bytes,
 * with a 128-entry table in two registers (it reads an index byte's low 7 bits: the sign is
 * ignored), gives the top byte of 64 results, the sign or-ed in by one VPTERNLOGD; a second
 * VPERMI2B the byte below it; unpacks put the two in place, with zeros below for float32 and
 * float64 results (f8v_run). Per 64 elements: 2 operations for float8 -> float8, 6 for
 * float16 / bfloat16, 10 for float32 and 18 for float64 results, against 9-24 without the
 * instruction set (the word tables of f8w_loop; VCVTPH2PS and a
 * multiply for e4m3fn -> float32; the byte rules of f8z_loop). The tables are filled at
 * registration from the scalar reference's results for all 256 bytes, and a conversion is
 * registered only if those results have the shape above (so its kernel can only be wrong in
 * the lookup, which the tests check on every byte: test_isa's test_narrow_sources); e5m2 ->
 * float64 has it only without saturation and passes saturating calls to its previous kernel.
 * Widenings are exact, so their stochastic entry is the same kernel; e4m3fn <-> e5m2 rounds, and
 * its stochastic entries are f8s_loop below (whose aligned head and 2^32 split are
 * sr_from_f64z's, with the reference's stochastic kernel: pair_head runs nearest-even).
 */
#ifdef MXP_AVX512_EMULATED
#define MXP_VBMI_FN
#else
#define MXP_VBMI_FN __attribute__((target("avx512vbmi")))
#endif
enum {
    F8V_E4M3_F32,
    F8V_E4M3_F64,
    F8V_E4M3_F16,
    F8V_E4M3_BF16,
    F8V_E5M2_BF16, /* then its saturating table (and so on below) */
    F8V_E5M2_BF16_SAT,
    F8V_E5M2_F16,
    F8V_E5M2_F16_SAT,
    F8V_E5M2_F64,
    F8V_E5M2_F64_SAT,
    F8V_E4M3_E5M2,
    F8V_E5M2_E4M3,
    F8V_E5M2_E4M3_SAT,
    F8V_N
};
static const struct {
    mxp_dtype to, from;
    bool sat;
} f8v_kinds[F8V_N] = {{MXP_FLOAT32, MXP_FLOAT8_E4M3FN, false},      {MXP_FLOAT64, MXP_FLOAT8_E4M3FN, false},
                      {MXP_FLOAT16, MXP_FLOAT8_E4M3FN, false},      {MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, false},
                      {MXP_BFLOAT16, MXP_FLOAT8_E5M2, false},       {MXP_BFLOAT16, MXP_FLOAT8_E5M2, true},
                      {MXP_FLOAT16, MXP_FLOAT8_E5M2, false},        {MXP_FLOAT16, MXP_FLOAT8_E5M2, true},
                      {MXP_FLOAT64, MXP_FLOAT8_E5M2, false},        {MXP_FLOAT64, MXP_FLOAT8_E5M2, true},
                      {MXP_FLOAT8_E5M2, MXP_FLOAT8_E4M3FN, false},  {MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2, false},
                      {MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2, true}};
/* [kind][0]: the result's top byte for magnitudes 0 .. 127 (sign clear); [1]: the byte below */
static _Alignas(64) unsigned char f8v_tab[F8V_N][2][128];
/* A kind whose saturating results do not have that shape (e5m2 -> float64: +-inf becomes +-max,
 * whose low bytes are ones) keeps its previous kernel for saturating calls: f8v_prev[kind] */
static bool f8v_sat_ok[F8V_N];
static mxp__cvt_fn f8v_prev[F8V_N];
/* The order of the source bytes that makes the unpacks of f8v_run store the results in order,
 * for 2, 4 and 8-byte results ([0], [1], [2]): VPERMB indices. The unpacks work within 128-bit
 * lanes: output vector k (of ob) gets, in lane L, the permuted bytes 16 L + (16 / ob) k + t
 * (t < 16 / ob), which must be elements 64 / ob * k + (16 / ob) L + t. */
static _Alignas(64) unsigned char f8v_ix[3][64];

static void f8v_init_idx(void)
{
    for (int e = 0; e < 3; e++) {
        const int ob = 2 << e, ub = 16 / ob;
        for (int p = 0; p < 64; p++) {
            const int L = p / 16, k = p % 16 / ub, t = p % ub;
            f8v_ix[e][p] = (unsigned char)(ub * (4 * k + L) + t);
        }
    }
}
/* Fill kind's tables from the reference (ref: a scalar table); false when its results do not
 * have the shape the kernel needs (then the conversion keeps its other kernel) */
static bool f8v_fill(const mxp__kernels *ref, int kind)
{
    const mxp_dtype to = f8v_kinds[kind].to, from = f8v_kinds[kind].from;
    const size_t ob = mxp_dtype_size(to);
    const mxp__cvt_args a = {f8v_kinds[kind].sat, 0, 0, false};
    unsigned char in[256], out[256 * 8];
    for (int b = 0; b < 256; b++) in[b] = (unsigned char)b;
    ref->cvt[to][from][MXP__RNE](out, in, 256, &a);
    for (size_t b = 0; b < 128; b++) {
        const unsigned char *pos = out + ob * b, *neg = out + ob * (b + 128);
        for (size_t j = 0; j + 2 < ob; j++)
            if (pos[j] != 0 || neg[j] != 0) return false;
        if ((pos[ob - 1] & 0x80) != 0 || neg[ob - 1] != (pos[ob - 1] | 0x80)) return false;
        if (ob >= 2 && neg[ob - 2] != pos[ob - 2]) return false;
        f8v_tab[kind][0][b] = pos[ob - 1];
        f8v_tab[kind][1][b] = ob >= 2 ? pos[ob - 2] : 0;
    }
    return true;
}
PRIM void st64(unsigned char *p, V v, int nt)
{
    if (nt) MXP__STREAM512(p, v);
    else _mm512_storeu_si512(p, v);
}
/* tab: f8v_tab[kind]; ob: result bytes (1, 2, 4, 8); nt: streaming (d + ob * i 64-byte aligned).
 * Wider results are built by unpacking: the two bytes into words (VPUNPCKLBW / VPUNPCKHBW), then
 * with zeros below into dwords and qwords; the source bytes are permuted first (f8v_ix) so that
 * the 128-bit lanes of the unpacks come out in element order. (VPERMT2B with zero masking, one
 * per output vector, was slower on AMD Zen 4: e4m3fn -> float32 in cache 0.052 ns/element
 * against 0.045, -> float64 0.127 against 0.105.) */
MXP_VBMI_FN PRIM size_t f8v_run(unsigned char *d, const unsigned char *s, size_t i, size_t n,
                                const unsigned char *tab, int ob, int nt)
{
    const V h0 = _mm512_load_si512(tab), h1 = _mm512_load_si512(tab + 64);
    const V l0 = _mm512_load_si512(tab + 128), l1 = _mm512_load_si512(tab + 192);
    const V sg = _mm512_set1_epi8((char)0x80), z = _mm512_setzero_si512();
    const V ix = _mm512_load_si512(f8v_ix[ob == 2 ? 0 : ob == 4 ? 1 : 2]);
    /* streaming on Intel (PF_L2): each source line into L2, as in bf16_f16_run. Session 50 (Intel
     * Xeon, CPU 4), 2^26, medians of five alternating runs without -> with, ns/element: e4m3fn ->
     * e5m2 0.110 -> 0.081 (the limit: about 0.080), e5m2 -> e4m3fn 0.086 -> 0.080, e4m3fn ->
     * bfloat16 0.150 -> 0.128, e5m2 -> float16 0.151 -> 0.138, e4m3fn -> float64 0.402 -> 0.401
     * (1.02x of the limit before); in cache unchanged. */
    const int pf = nt && PF_L2;
    unsigned char *p = d + (size_t)ob * i;
    for (; i + 64 <= n; i += 64, p += 64 * (size_t)ob) {
        V x = _mm512_loadu_si512(s + i);
        if (pf) pf_line_far(s + i + MXP_SIMD_PREFETCH_DIST);
        if (ob > 1) x = _mm512_permutexvar_epi8(ix, x);
        const V hb = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(h0, x, h1), x, sg, 0xF8); /* | x & 0x80 */
        if (ob == 1) {
            st64(p, hb, nt);
            continue;
        }
        const V lb = _mm512_permutex2var_epi8(l0, x, l1);
        const V w0 = _mm512_unpacklo_epi8(lb, hb), w1 = _mm512_unpackhi_epi8(lb, hb);
        if (ob == 2) {
            st64(p, w0, nt);
            st64(p + 64, w1, nt);
            continue;
        }
        const V a[4] = {_mm512_unpacklo_epi16(z, w0), _mm512_unpackhi_epi16(z, w0), _mm512_unpacklo_epi16(z, w1),
                        _mm512_unpackhi_epi16(z, w1)};
        for (int m = 0; m < 4; m++) {
            if (ob == 4) {
                st64(p + 64 * m, a[m], nt);
            } else {
                st64(p + 128 * m, _mm512_unpacklo_epi32(z, a[m]), nt);
                st64(p + 128 * m + 64, _mm512_unpackhi_epi32(z, a[m]), nt);
            }
        }
    }
    return i;
}
MXP_VBMI_FN PRIM void f8v_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, int kind, int ob)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    const mxp_dtype to = f8v_kinds[kind].to, from = f8v_kinds[kind].from;
    /* the saturating table follows the kinds that have one */
    const bool has_sat = kind + 1 < F8V_N && f8v_kinds[kind + 1].sat;
    if (a->saturate && has_sat && !f8v_sat_ok[kind]) {
        f8v_prev[kind](dst, src, n, a);
        return;
    }
    const int kk = kind + (a->saturate && has_sat);
    int nt;
    size_t i = pair_head(d, s, n, a, to, from, 1, (size_t)ob, 64, &nt); /* streaming: 64-byte stores */
    const unsigned char *tab = f8v_tab[kk][0]; /* then f8v_tab[kk][1] */
    i = nt ? f8v_run(d, s, i, n, tab, ob, 1) : f8v_run(d, s, i, n, tab, ob, 0);
    pair_done(d, s, i, n, a, to, from, 1, (size_t)ob, nt);
}
#define F8V(name, kind, ob)                                                                    \
    MXP_VBMI_FN static void name(void *dst, const void *src, size_t n, const mxp__cvt_args *a) \
    {                                                                                          \
        f8v_loop(dst, src, n, a, kind, ob);                                                    \
    }
F8V(cvt_f32_e4m3_vbmi__avx512, F8V_E4M3_F32, 4)
F8V(cvt_f64_e4m3_vbmi__avx512, F8V_E4M3_F64, 8)
F8V(cvt_f16_e4m3_vbmi__avx512, F8V_E4M3_F16, 2)
F8V(cvt_bf16_e4m3_vbmi__avx512, F8V_E4M3_BF16, 2)
F8V(cvt_bf16_e5m2_vbmi__avx512, F8V_E5M2_BF16, 2)
F8V(cvt_f16_e5m2_vbmi__avx512, F8V_E5M2_F16, 2)
F8V(cvt_f64_e5m2_vbmi__avx512, F8V_E5M2_F64, 8)
F8V(cvt_e5m2_e4m3_vbmi__avx512, F8V_E4M3_E5M2, 1)
F8V(cvt_e4m3_e5m2_vbmi__avx512, F8V_E5M2_E4M3, 1)

/*
 * Stochastic rounding between the two float8 formats by byte tables (AVX512_VBMI; it was the
 * composed path, cvt_compose.c). Either way at most 7 bits are dropped (e4m3fn -> e5m2: one; e5m2
 * -> e4m3fn: none where e4m3fn is normal, up to 7 below 2^-6), so the dropped part of a magnitude
 * m, as a fraction of the step between its two neighbours, is F / 256 with an integer F < 256, and
 * kernels.h's rule "up iff F * 2^24 + r >= 2^32" is "up iff r >> 24 > 255 - F": only the random
 * word's top byte counts (e4m3fn -> e5m2: its top bit, since session 48 an element's one random
 * bit, f8b_steps below). Two tables per direction and saturation: [0] the code toward zero (for
 * NaN, infinity and magnitudes beyond the target's range, which never round stochastically, the
 * reference's result), [1] 255 - F. From e5m2, the random byte of element i is byte i % 4 of the
 * word of index i / 4 (kernels.h's mxp__sr_bits_src), so one vector of 16 hashed words is the 64
 * elements' bytes in order. Per 64 elements: that hash, two VPERMI2B lookups, one compare, a masked
 * add of 1 (the next code up) and the sign. Until session 46 each element had a word of its own:
 * four hashes of 16 words and two VPERMT2B gathering their top bytes per 64 elements; Intel Xeon
 * (CPU 4), medians of three alternating runs, ns/element in cache / at 2^26: e4m3fn -> e5m2 0.132 /
 * 0.194 -> 0.053 / 0.090, e5m2 -> e4m3fn 0.132 / 0.203 -> 0.053 / 0.113 (nearest-even: 0.022 /
 * 0.09-0.12). Since session 47, e5m2 -> e4m3fn takes a step none of whose lanes drops bits
 * (magnitudes 0 and >= 32) by table 0 and the sign alone, without random bytes (f8s_ne; f8s_run
 * splits the steps as cvt_avx2.c's f8s2_run, with more runs allowed per chunk: a step of 64 lanes
 * has a lane that rounds twice as often). Same CPU, medians of five alternating runs, in cache / at
 * 2^26: uniform data 0.052 / 0.074 -> 0.027 / 0.074 (nearest-even 0.022 / 0.077), ReLU data 0.052
 * -> 0.025 in cache, N(0, 1) unchanged (0.050-0.051 / 0.074-0.075), N(0, 10^-4) in cache 0.051 ->
 * 0.054. The tables are derived from the reference's values and checked at registration against the
 * reference on 4096 elements (kernels.h's mxp__f8s_fill, which cvt_avx2.c's kernels use too); a
 * direction is registered only if both agree.
 */
static _Alignas(64) unsigned char f8s_tab[MXP__F8S_N][2][128]; /* kernels.h's mxp__f8s_fill */
/* e5m2 -> e4m3fn: the lanes of x whose magnitude (1 .. 31) drops bits */
MXP_VBMI_FN PRIM __mmask64 f8s_drops(V x, V x7f, V x1f)
{
    return _mm512_cmplt_epu8_mask(_mm512_sub_epi8(_mm512_and_si512(x, x7f), _mm512_set1_epi8(1)), x1f);
}
/* elements i .. end (a multiple of 64 later), one block of 2^32 indices (key; element i's word
 * index w, element i a word's first byte). stop: e5m2 -> e4m3fn, the steps end at the first
 * after i none of whose lanes drops bits (f8s_drops). Returns where they ended. */
MXP_VBMI_FN PRIM size_t f8s_steps(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t w,
                                  uint64_t key, const unsigned char *tab, int nt, int stop)
{
    const V t0 = _mm512_load_si512(tab), t1 = _mm512_load_si512(tab + 64);
    const V g0 = _mm512_load_si512(tab + 128), g1 = _mm512_load_si512(tab + 192);
    const V sg = _mm512_set1_epi8((char)0x80), one = _mm512_set1_epi8(1);
    const V x7f = _mm512_set1_epi8(0x7F), x1f = _mm512_set1_epi8(31);
    V khi = v_set1((uint32_t)(key >> 32)), step = v_set1(16u * MXP__SR_W);
    V m1 = v_set1(MXP__SR_M1), m2 = v_set1(MXP__SR_M2);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(khi);
    MXP_SIMD_PIN(step);
    MXP_SIMD_PIN(m1);
    MXP_SIMD_PIN(m2);
#endif
    const int pf = nt && PF_L2; /* Intel only: 0.319 -> 0.141 ns/element at 2^26 (session 30) */
    /* the Weyl states of words w .. w + 15 */
    V il = v_add(v_set1(w * MXP__SR_W + (uint32_t)key), v_mullo(v_iota(), v_set1(MXP__SR_W)));
    const size_t first = i; /* taken whatever its lanes: the caller found one that drops bits */
    for (; i < end; i += 64) {
        const V x = _mm512_loadu_si512(s + i);
        if (stop && !f8s_drops(x, x7f, x1f) && i != first) break;
        const V rt = sr_finish(sr_words_hi(il, khi, m1, m2)); /* the 64 elements' random bytes */
        il = v_add(il, step);
        if (pf) pf_line(s + i + MXP_SIMD_PREFETCH_DIST);
        const V dn = _mm512_permutex2var_epi8(t0, x, t1);
        const __mmask64 up = _mm512_cmpgt_epu8_mask(rt, _mm512_permutex2var_epi8(g0, x, g1));
        st64(d + i, _mm512_ternarylogic_epi32(_mm512_mask_add_epi8(dn, up, dn, one), x, sg, 0xF8), nt);
    }
    return i;
}
/* e5m2 -> e4m3fn's steps none of whose lanes drops bits, from i to the first that has one (or
 * end): the code toward zero (table 0) with the sign; returns where they ended */
MXP_VBMI_FN PRIM size_t f8s_ne(unsigned char *d, const unsigned char *s, size_t i, size_t end,
                               const unsigned char *tab, int nt)
{
    const V t0 = _mm512_load_si512(tab), t1 = _mm512_load_si512(tab + 64);
    const V sg = _mm512_set1_epi8((char)0x80), x7f = _mm512_set1_epi8(0x7F), x1f = _mm512_set1_epi8(31);
    const int pf = nt && PF_L2;
    for (; i < end; i += 64) {
        const V x = _mm512_loadu_si512(s + i);
        if (f8s_drops(x, x7f, x1f)) break;
        if (pf) pf_line(s + i + MXP_SIMD_PREFETCH_DIST);
        st64(d + i, _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t0, x, t1), x, sg, 0xF8), nt);
    }
    return i;
}
/*
 * e4m3fn -> e5m2 since session 48: the target drops at most one bit, so an element draws one
 * random bit, bit i % 32 of the word of index i / 32 (kernels.h's mxp__sr_bits_src): a step of
 * 64 elements takes two words, its lanes' bits in order, as a mask, and one hashed vector of 16
 * words serves 8 steps. f8s_tb: the code toward zero (f8s_tab's table 0), bit 7 set where the
 * lane drops its bit (table 1 is 127 there: F = 128, up iff the random bit is 1). Per step one
 * VPERMI2B, a masked test of bit 7, a masked add of 1 and the sign. Until then it drew a byte
 * (f8s_steps, of which the rule used the top bit) from a vector of 16 words hashed per step.
 * Intel Xeon (CPU 4), medians of five alternating runs, ns/element in cache / at 2^26: 0.0505 /
 * 0.077 -> 0.029 / 0.073 (nearest-even 0.021 / 0.078: 1.37x / 0.94x, was 2.4x / 0.98x).
 */
static _Alignas(64) unsigned char f8s_tb[128];
/* f8s_tb from f8s_tab[MXP__F8S_E4M3_E5M2]; false if a lane's rule is not one bit (g 255 or 127,
 * and below 127 where it is 127, so that adding 1 keeps bit 7) */
static bool f8s_tb_fill(void)
{
    unsigned char(*t)[128] = f8s_tab[MXP__F8S_E4M3_E5M2];
    for (int m = 0; m < 128; m++) {
        if (t[1][m] != 255 && (t[1][m] != 127 || t[0][m] >= 127)) return false;
        f8s_tb[m] = (unsigned char)(t[0][m] | (t[1][m] == 127 ? 0x80 : 0));
    }
    return true;
}
/* e4m3fn -> e5m2, elements i .. end (a multiple of 64 later), one block of 2^32 indices (key;
 * element i's word index w, element i a word's first bit) */
MXP_VBMI_FN PRIM void f8b_steps(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t w,
                                uint64_t key, int nt)
{
    const V t0 = _mm512_load_si512(f8s_tb), t1 = _mm512_load_si512(f8s_tb + 64);
    const V sg = _mm512_set1_epi8((char)0x80), one = _mm512_set1_epi8(1);
    const V khi = v_set1((uint32_t)(key >> 32)), step = v_set1(16u * MXP__SR_W);
    const V m1 = v_set1(MXP__SR_M1), m2 = v_set1(MXP__SR_M2);
    const int pf = nt && PF_L2;
    /* the Weyl states of words w .. w + 15 */
    V il = v_add(v_set1(w * MXP__SR_W + (uint32_t)key), v_mullo(v_iota(), v_set1(MXP__SR_W)));
    _Alignas(64) uint64_t rb[8]; /* the bits of 8 steps, a step's in one: word 2j low, 2j + 1 high */
    while (i < end) {
        _mm512_store_si512(rb, sr_finish(sr_words_hi(il, khi, m1, m2)));
        il = v_add(il, step);
        const size_t e8 = end - i > 8 * 64 ? i + 8 * 64 : end;
        for (const uint64_t *b = rb; i < e8; i += 64, b++) {
            const V x = _mm512_loadu_si512(s + i);
            if (pf) pf_line(s + i + MXP_SIMD_PREFETCH_DIST);
            const V v = _mm512_permutex2var_epi8(t0, x, t1);
            const __mmask64 up = _mm512_mask_test_epi8_mask((__mmask64)*b, v, sg);
            /* bits 0-6 from the code (+1 where up), bit 7 from x (the sign) */
            st64(d + i, _mm512_ternarylogic_epi32(_mm512_mask_add_epi8(v, up, v, one), x, sg, 0xD8), nt);
        }
    }
}
#define F8S_CB(nt)                                                                             \
    MXP_VBMI_FN static size_t f8s_ne_cb##nt(const void *ctx, size_t i, size_t end)             \
    {                                                                                          \
        const sr_split_ctx *c = (const sr_split_ctx *)ctx;                                     \
        return f8s_ne(c->d, c->s, i, end, c->tab, nt);                                         \
    }                                                                                          \
    MXP_VBMI_FN static size_t f8s_stop_cb##nt(const void *ctx, size_t i, size_t end)           \
    {                                                                                          \
        const sr_split_ctx *c = (const sr_split_ctx *)ctx;                                     \
        return f8s_steps(c->d, c->s, i, end, sr_split_word(c, i), c->key, c->tab, nt, 1);      \
    }                                                                                          \
    MXP_VBMI_FN static size_t f8s_all_cb##nt(const void *ctx, size_t i, size_t end)            \
    {                                                                                          \
        const sr_split_ctx *c = (const sr_split_ctx *)ctx;                                     \
        return f8s_steps(c->d, c->s, i, end, sr_split_word(c, i), c->key, c->tab, nt, 0);      \
    }
F8S_CB(0)
F8S_CB(1)
#undef F8S_CB
/* elements i .. end (a multiple of 64 later), one block of 2^32 indices (key; element i's low
 * index half lo, a multiple of 4, of 32 from e4m3fn); e4: e5m2 -> e4m3fn, whose steps with no
 * lane that drops bits take f8s_ne (sr_split_run; a step of 64 lanes has a lane that rounds
 * twice as often as AVX2's 32, so a chunk may have 8 runs of the others) */
MXP_VBMI_FN PRIM void f8s_run(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t lo,
                              uint64_t key, const unsigned char *tab, int nt, int e4)
{
    if (!e4) {
        f8b_steps(d, s, i, end, lo >> 5, key, nt);
        return;
    }
    const sr_split_ctx c = {d, s, i, lo, key, tab};
    if (nt) sr_split_run(&c, i, end, 64, 8, f8s_ne_cb1, f8s_stop_cb1, f8s_all_cb1);
    else sr_split_run(&c, i, end, 64, 8, f8s_ne_cb0, f8s_stop_cb0, f8s_all_cb0);
}
MXP_VBMI_FN PRIM void f8s_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, int e4)
{
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *d = (unsigned char *)dst;
    const mxp_dtype to = e4 ? MXP_FLOAT8_E4M3FN : MXP_FLOAT8_E5M2, from = e4 ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN;
    const mxp__cvt_fn ref = mxp__scalar_kernels()->cvt[to][from][MXP__SR];
    const unsigned char *tab =
        f8s_tab[e4 ? (a->saturate ? MXP__F8S_E5M2_E4M3_SAT : MXP__F8S_E5M2_E4M3) : MXP__F8S_E4M3_E5M2][0];
    int nt;
    /* steps start at a word's first byte (e5m2: indices that are multiples of 4) or bit (e4m3fn:
     * of 32); streaming: 64-byte stores */
    size_t i = sr_start(a->index0, d, n, 1, 64, e4 ? 4 : 32, n >= 128 && (n * 2 >= MXP_SIMD_NT_THRESHOLD || a->stream),
                        &nt);
    ref(d, s, i, a);
    while (i + 64 <= n) {
        uint32_t lo = 0;
        uint64_t key = 0;
        const size_t end = sr_block(i, n, a->index0, a->seed, 64, &lo, &key);
        if (end == i) {
            /* the straddling step by the reference (a whole step: d stays aligned) */
            mxp__cvt_args b = *a;
            b.index0 = a->index0 + i;
            ref(d + i, s + i, 64, &b);
            i += 64;
            continue;
        }
        if (e4) {
            if (nt) f8s_run(d, s, i, end, lo, key, tab, 1, 1);
            else f8s_run(d, s, i, end, lo, key, tab, 0, 1);
        } else {
            if (nt) f8s_run(d, s, i, end, lo, key, tab, 1, 0);
            else f8s_run(d, s, i, end, lo, key, tab, 0, 0);
        }
        i = end;
    }
    if (nt && !a->stream) _mm_sfence(); /* a->stream: the caller fences */
    mxp__cvt_args b = *a;
    b.index0 = a->index0 + i;
    if (i < n) ref(d + i, s + i, n - i, &b);
}
MXP_VBMI_FN static void cvt_e5m2_e4m3_sr_vbmi__avx512(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    f8s_loop(dst, src, n, a, 0);
}
MXP_VBMI_FN static void cvt_e4m3_e5m2_sr_vbmi__avx512(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    f8s_loop(dst, src, n, a, 1);
}
void mxp__cvt_register_avx512_vbmi(mxp__kernels *k)
{
    static const struct {
        int kind;
        mxp__cvt_fn fn;
    } ents[] = {{F8V_E4M3_F32, cvt_f32_e4m3_vbmi__avx512},   {F8V_E4M3_F64, cvt_f64_e4m3_vbmi__avx512},
                {F8V_E4M3_F16, cvt_f16_e4m3_vbmi__avx512},   {F8V_E4M3_BF16, cvt_bf16_e4m3_vbmi__avx512},
                {F8V_E5M2_BF16, cvt_bf16_e5m2_vbmi__avx512}, {F8V_E5M2_F16, cvt_f16_e5m2_vbmi__avx512},
                {F8V_E5M2_F64, cvt_f64_e5m2_vbmi__avx512},   {F8V_E4M3_E5M2, cvt_e5m2_e4m3_vbmi__avx512},
                {F8V_E5M2_E4M3, cvt_e4m3_e5m2_vbmi__avx512}};
    static mxp__kernels ref; /* as in mxp__cvt_register_avx512_pairs */
    mxp__cvt_register_scalar(&ref);
    f8v_init_idx();
    for (size_t e = 0; e < sizeof ents / sizeof ents[0]; e++) {
        const int kind = ents[e].kind;
        const bool has_sat = kind + 1 < F8V_N && f8v_kinds[kind + 1].sat;
        if (!f8v_fill(&ref, kind)) continue;
        const mxp_dtype to = f8v_kinds[kind].to, from = f8v_kinds[kind].from;
        f8v_sat_ok[kind] = has_sat && f8v_fill(&ref, kind + 1);
        /* the same function whichever table registers (the avx512 table's own kernel); never
         * this kernel itself, should a table be registered twice */
        if (has_sat && !f8v_sat_ok[kind] && k->cvt[to][from][MXP__RNE] != ents[e].fn)
            f8v_prev[kind] = k->cvt[to][from][MXP__RNE];
        k->cvt[to][from][MXP__RNE] = ents[e].fn;
        if (mxp_dtype_size(to) > 1) k->cvt[to][from][MXP__SR] = ents[e].fn; /* exact */
    }
    if (mxp__f8s_fill(&ref, MXP__F8S_E4M3_E5M2, f8s_tab[MXP__F8S_E4M3_E5M2]) && f8s_tb_fill())
        k->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT8_E4M3FN][MXP__SR] = cvt_e5m2_e4m3_sr_vbmi__avx512;
    if (mxp__f8s_fill(&ref, MXP__F8S_E5M2_E4M3, f8s_tab[MXP__F8S_E5M2_E4M3]) &&
        mxp__f8s_fill(&ref, MXP__F8S_E5M2_E4M3_SAT, f8s_tab[MXP__F8S_E5M2_E4M3_SAT]))
        k->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT8_E5M2][MXP__SR] = cvt_e4m3_e5m2_sr_vbmi__avx512;
}
