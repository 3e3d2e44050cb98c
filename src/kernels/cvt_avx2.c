/*
 * cvt_avx2.c - float32 <-> float16 / bfloat16 / float8 (e4m3fn, e5m2) with AVX2 (8 lanes).
 *
 * The algorithm is cvt_simd_impl.h's (shared with AVX-512 and NEON); this file only maps its
 * primitives to AVX2 intrinsics. Registered: the 16 entries float32 -> narrow (nearest-even and
 * stochastic) and narrow -> float32; every other pair keeps the scalar entry.
 *
 * F16C (VCVTPS2PH / VCVTPH2PS) does float32 <-> float16 nearest-even: its results equal the
 * reference's for every input whatever MXCSR says (FTZ is ignored by both instructions, DAZ by
 * VCVTPH2PS, and DAZ on VCVTPS2PH only zeroes float32 subnormals, which round to +-0 anyway;
 * x86 NaN conversion sets the quiet bit and truncates / zero-fills the payload, which is the
 * reference's NaN rule). Saturation is a fix-up; stochastic rounding uses the integer path.
 */
#include <immintrin.h>
#include <stdbool.h>

#include "kernels.h"
#include "nt_store.h"

#define MXP_SIMD_ISA avx2
#define VL 8
typedef __m256i V;
typedef __m256i M; /* all-ones / all-zeros lanes */

#define PRIM static inline __attribute__((always_inline))
PRIM V v_set1(uint32_t x) { return _mm256_set1_epi32((int)x); }
PRIM V v_and(V a, V b) { return _mm256_and_si256(a, b); }
PRIM V v_or(V a, V b) { return _mm256_or_si256(a, b); }
PRIM V v_xor(V a, V b) { return _mm256_xor_si256(a, b); }
PRIM V v_add(V a, V b) { return _mm256_add_epi32(a, b); }
PRIM V v_sub(V a, V b) { return _mm256_sub_epi32(a, b); }
PRIM V v_mullo(V a, V b) { return _mm256_mullo_epi32(a, b); }
#define v_srli(x, imm) _mm256_srli_epi32((x), (imm))
#define v_slli(x, imm) _mm256_slli_epi32((x), (imm))
PRIM V v_srlv(V x, V c) { return _mm256_srlv_epi32(x, c); } /* count >= 32 -> 0 */
PRIM V v_shls(V x, V c)
{
    /* c >= 0: the right shift by -c (>= 2^32 - 127 unsigned, or 0 when c == 0) adds nothing
     * (or x itself); c < 0: the left shift by a huge count gives 0. */
    return _mm256_or_si256(_mm256_sllv_epi32(x, c), _mm256_srlv_epi32(x, _mm256_sub_epi32(_mm256_setzero_si256(), c)));
}
PRIM M m_gt(V a, V b) { return _mm256_cmpgt_epi32(a, b); }
PRIM M m_gtu(V a, V b)
{
    const V k = _mm256_set1_epi32((int)0x80000000u);
    return _mm256_cmpgt_epi32(_mm256_xor_si256(a, k), _mm256_xor_si256(b, k));
}
PRIM M m_eq(V a, V b) { return _mm256_cmpeq_epi32(a, b); }
PRIM V v_sel(M m, V t, V f) { return _mm256_blendv_epi8(f, t, m); }
PRIM V v_inc(V x, M m) { return _mm256_sub_epi32(x, m); }
PRIM V v_i2f_bits(V x) { return _mm256_castps_si256(_mm256_cvtepi32_ps(x)); }
PRIM V v_iota(void) { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
PRIM V ld32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
PRIM V ld16(const void *p) { return _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)); }
/* unused while both float8 decodes go through F16C (MXP_SIMD_HW_E4M3 / _E5M2) */
__attribute__((unused)) PRIM V ld8(const void *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
PRIM void st32(void *p, V x) { _mm256_storeu_si256((__m256i *)p, x); }
PRIM void st16x2(void *p, V x, V y)
{
    /* packus: [x0-3 y0-3 | x4-7 y4-7] (lanes < 2^16, so no saturation); qwords 0,2,1,3 */
    const V w = _mm256_permute4x64_epi64(_mm256_packus_epi32(x, y), 0xD8);
    _mm256_storeu_si256((__m256i *)p, w);
}
PRIM void st16x2_nt(void *p, V x, V y)
{
    MXP__STREAM256((__m256i *)p, _mm256_permute4x64_epi64(_mm256_packus_epi32(x, y), 0xD8));
}
PRIM __m128i pack8x2(V x, V y)
{
    const V w = _mm256_packus_epi32(x, y);
    const V b = _mm256_packus_epi16(w, w);
    return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5)));
}
PRIM void st8x2_nt(void *p, V x, V y) { MXP__STREAM128((__m128i *)p, pack8x2(x, y)); }
PRIM void st8x2(void *p, V x, V y)
{
    /* words [x0-3 y0-3 | x4-7 y4-7] -> bytes, dwords 0:x0-3 1:y0-3 4:x4-7 5:y4-7 */
    const V w = _mm256_packus_epi32(x, y);
    const V b = _mm256_packus_epi16(w, w);
    const V o = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(o));
}
PRIM M m_or(M a, M b) { return _mm256_or_si256(a, b); }
PRIM M m_and(M a, M b) { return _mm256_and_si256(a, b); }
/* lanes are all-ones or all-zeros: the sign bits tell (VMOVMSKPS, one instruction; with VPTEST
 * gcc rewrote the compares feeding it into min + equal, one instruction more per compare) */
PRIM bool m_any(M m) { return _mm256_movemask_ps(_mm256_castsi256_ps(m)) != 0; }
#define MXP_SIMD_M_BITS 1
PRIM uint32_t m_bits(M m) { return (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(m)); } /* bit k: lane k */
PRIM V v_keep(M m, V x) { return _mm256_and_si256(m, x); }

#define MXP_SIMD_PIN(v) __asm__("" : "+x"(v))

#define MXP_SIMD_ANY_NAN4 1
PRIM bool any_nan4(V x, V y, V z, V w)
{
    const __m256 u = _mm256_cmp_ps(_mm256_castsi256_ps(x), _mm256_castsi256_ps(y), _CMP_UNORD_Q);
    const __m256 v = _mm256_cmp_ps(_mm256_castsi256_ps(z), _mm256_castsi256_ps(w), _CMP_UNORD_Q);
    return _mm256_movemask_ps(_mm256_or_ps(u, v)) != 0;
}

/*
 * float32 -> float8 (e4m3fn, e5m2) nearest-even for 32 lanes whose result is a normal float8
 * value (narrow8_fast4); false (nothing stored) when some lane needs another path. D = 23 - m
 * dropped bits, add = 2^(D-1) - 1 - rebias (cvt_simd_impl.h's fast_consts), minq = 1 << m (the
 * smallest normal pattern), maxq = max finite pattern. The rounding runs on the signed bits:
 *   u = S | a:   t = u + add + lsb,  lsb = bit D of u   (nearest-even carry, exponent rebiased)
 * For 1 <= q <= maxq the sum never reaches bit 31, so S stays put and t >> D = S << (31-D) | q,
 * q = the rounded magnitude pattern. Packed to 16-bit words (values < 2^12, no saturation):
 *   word:  0000 S qqq qqqq qqqq  (S at bit 31 - D: 11 for e4m3fn, 10 for e5m2)
 * The lane is taken iff minq <= q <= maxq (one unsigned test on 16 words at once: q - minq,
 * wrapping, saturating-minus (maxq - minq) is zero). That is exact: a lane in the normal range
 * gives such a q; a larger |x| (overflow, inf, NaN) gives q > maxq; an |x| below the normal
 * range gives q < minq or a wrapped (huge) q, except in the binade just below it where the
 * formula, missing the implicit bit, gives q = minq only when the true rounding is minq too
 * (the value is then within a quarter step of the smallest normal, which rounds up to it).
 * Storing (narrow8_store4): word = high byte 0000 S000 (e4m3fn) or 00000 S00 (e5m2) | low byte
 * 0qqq qqqq; one multiply-add of unsigned bytes by signed ones, low * 1 + high * 2^(D - 16),
 * gives q + 128 S (< 2^15: no saturation). The two word vectors x|y and z|w pack to bytes
 * [x0-3 y0-3 z0-3 w0-3 | x4-7 y4-7 z4-7 w4-7] (dwords 0-3 | 4-7), put in order by one dword
 * permutation (0 4 1 5 2 6 3 7).
 */
PRIM V narrow8_words(V x, V y, int D, V k)
{
    const V one = _mm256_set1_epi32(1);
    const V tx = _mm256_add_epi32(_mm256_add_epi32(x, k), _mm256_and_si256(_mm256_srli_epi32(x, D), one));
    const V ty = _mm256_add_epi32(_mm256_add_epi32(y, k), _mm256_and_si256(_mm256_srli_epi32(y, D), one));
    return _mm256_packus_epi32(_mm256_srli_epi32(tx, D), _mm256_srli_epi32(ty, D));
}
/* Two word vectors of checked lanes -> 32 float8 bytes in element order (narrow8_bytes4), and
 * those stored at p (narrow8_put): streaming stores are 16 bytes each, since p is only 16-byte
 * aligned there (a 2*VL step before may have moved it by 16). */
PRIM V narrow8_bytes4(V w0, V w1, int D)
{
    const V mul = _mm256_set1_epi16((short)(1 | (1 << (D - 16)) << 8));
    const V b = _mm256_packus_epi16(_mm256_maddubs_epi16(w0, mul), _mm256_maddubs_epi16(w1, mul));
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
PRIM void narrow8_put(void *p, V o, int nt)
{
    if (nt) {
        MXP__STREAM128((__m128i *)p, _mm256_castsi256_si128(o));
        MXP__STREAM128((__m128i *)p + 1, _mm256_extracti128_si256(o, 1));
    } else {
        _mm256_storeu_si256((__m256i *)p, o);
    }
}
PRIM void narrow8_store4(void *p, V w0, V w1, int D, int nt) { narrow8_put(p, narrow8_bytes4(w0, w1, D), nt); }
/* narrow8_store4 of words holding S << (31 - D) | (q - minq): minq added back to the bytes */
PRIM void narrow8_store4m(void *p, V w0, V w1, int D, uint32_t minq, int nt)
{
    narrow8_put(p, _mm256_add_epi8(narrow8_bytes4(w0, w1, D), _mm256_set1_epi8((char)minq)), nt);
}
/* minq << D is subtracted in the rounding add (a multiple of 2^D: the rounding is unchanged), so
 * the range test needs no VPSUBW: a lane with q < minq borrows into the sign bit (S = 1) or
 * wraps below 2^(32 - D) (S = 0), and either way its word masked by qm is at least
 * 2^(31 - D) - minq > maxq - minq; the bytes are code - minq until narrow8_store4m adds it back.
 * (cvt_avx512.c's n8w_step does the same on 16-bit lanes.) AMD Zen 4 running these AVX2
 * kernels, in cache, five alternating runs: e4m3fn 0.1142 -> 0.1117 ns/element, e5m2 0.0912 ->
 * 0.0888; 2^26 unchanged (bench/RESULTS.md, session 22). */
PRIM bool narrow8_fast4(void *p, V x, V y, V z, V w, int D, uint32_t add, uint32_t minq, uint32_t maxq,
                        int nt)
{
    const V k = _mm256_set1_epi32((int)(add - (minq << D)));
    const V w0 = narrow8_words(x, y, D, k), w1 = narrow8_words(z, w, D, k);
    const V qm = _mm256_set1_epi16((short)((1 << (31 - D)) - 1)), span = _mm256_set1_epi16((short)(maxq - minq));
    const V bad = _mm256_or_si256(_mm256_subs_epu16(_mm256_and_si256(w0, qm), span),
                                  _mm256_subs_epu16(_mm256_and_si256(w1, qm), span));
    if (!_mm256_testz_si256(bad, bad)) return false;
    narrow8_store4m(p, w0, w1, D, minq, nt);
    return true;
}
#define MXP_SIMD_NARROW8_FAST 1

/*
 * narrow8_fast4 in parts, for cvt_simd_impl.h's narrow8_fast4p (MXP_SIMD_NARROW8_PATCH), which
 * takes a step whose one lane outside the normal range is below it inside the fast loop: the
 * words and the packed range test (narrow8_codes4); narrow8_ok, the whole-step test that
 * narrow8_fast4 branches on (MXP_SIMD_NARROW8_OK: the branch comes first, and the rest runs
 * only on a failing step); the lanes outside as a 32-bit mask in element order (narrow8_bad:
 * the tested words, packed to bytes with signed saturation, which keeps a nonzero word nonzero,
 * put in narrow8_bytes4's order, compared with zero, VPMOVMSKB); the store (narrow8_store); the
 * store with the byte of mask lone (one bit, or none) set to code (narrow8_store_lone: a byte
 * compare against the lane numbers and a blend). A wrong lane in that mask could cost time but
 * not a wrong byte: the lane read would be in the normal range, which sends the step away.
 * Used for e4m3fn in cache only (MXP_SIMD_NARROW8_PATCH_WHEN). On data over [-8, 8], 6% of its
 * 32-element steps have one value below 2^-6, and each left the loop for the out-of-line run of
 * tiny-aware steps. AMD Zen 4 running these kernels, 2^16 elements, alternating runs, ns/element:
 * over [-8, 8] 0.1117 -> 0.1020, over [-0.5, 0.5] 0.267 -> 0.237. Elsewhere it lost: e5m2 in
 * cache (whose normal range reaches 2^-14) 0.0889 -> 0.0929, as session 20 found on Zen 5;
 * streaming e4m3fn over [-0.5, 0.5] 0.52 -> 0.56, though over [-8, 8] 0.187 -> 0.175
 * (bench/RESULTS.md, session 24).
 */
#define MXP_SIMD_NARROW8_PATCH 1
#define MXP_SIMD_NARROW8_PATCH_WHEN(t, nt) ((t).m == 3 && !(nt))
typedef struct n8p {
    V w0, w1, b;
    uint32_t mn;
    int D;
} n8p;
PRIM n8p narrow8_codes4(V x, V y, V z, V w, int D, uint32_t add, uint32_t minq, uint32_t maxq)
{
    n8p r;
    const V k = _mm256_set1_epi32((int)(add - (minq << D)));
    r.w0 = narrow8_words(x, y, D, k);
    r.w1 = narrow8_words(z, w, D, k);
    const V qm = _mm256_set1_epi16((short)((1 << (31 - D)) - 1)), span = _mm256_set1_epi16((short)(maxq - minq));
    r.b = _mm256_packs_epi16(_mm256_subs_epu16(_mm256_and_si256(r.w0, qm), span),
                             _mm256_subs_epu16(_mm256_and_si256(r.w1, qm), span));
    r.mn = minq;
    r.D = D;
    return r;
}
#define MXP_SIMD_NARROW8_OK 1
PRIM bool narrow8_ok(const n8p *r) { return _mm256_testz_si256(r->b, r->b); }
PRIM uint64_t narrow8_bad(const n8p *r)
{
    const V bo = _mm256_permutevar8x32_epi32(r->b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    return ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(bo, _mm256_setzero_si256()));
}
PRIM void narrow8_store(void *p, const n8p *r, int nt) { narrow8_store4m(p, r->w0, r->w1, r->D, r->mn, nt); }
PRIM void narrow8_store_lone(void *p, const n8p *r, uint64_t lone, uint32_t code, int nt)
{
    const V o = _mm256_add_epi8(narrow8_bytes4(r->w0, r->w1, r->D), _mm256_set1_epi8((char)r->mn));
    /* lane 32 (no lane) when lone is 0 */
    const V at = _mm256_cmpeq_epi8(_mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
                                                    19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31),
                                   _mm256_set1_epi8((char)__builtin_ctzll(lone | (uint64_t)1 << 32)));
    narrow8_put(p, _mm256_blendv_epi8(o, _mm256_set1_epi8((char)code), at), nt);
}

/*
 * narrow8_fast4 that also takes +-0 lanes (ReLU outputs): 0 when some lane needs another path
 * (nothing stored), 1 when stored and some lane was +-0, 2 when stored without a zero lane.
 * A zero lane's word is known: +0 gives w0 = (add >> D) (the rebias wraps), -0 gives w0 with
 * bit 31 - D flipped (0x80000000 + add only flips bit 31, and bit D of either zero is 0), so
 * XOR with w0 turns them into the words of +0 and -0 (0 and the sign bit alone). The zero
 * lanes are found on the inputs (|x| == 0), packed to words in the same lane order.
 */
PRIM int narrow8_fast4z(void *p, V x, V y, V z, V w, int D, uint32_t add, uint32_t minq, uint32_t maxq,
                        int nt)
{
    const V k = _mm256_set1_epi32((int)add), absm = _mm256_set1_epi32(0x7FFFFFFF), zero = _mm256_setzero_si256();
    const V w0 = narrow8_words(x, y, D, k), w1 = narrow8_words(z, w, D, k);
    const V z0 = _mm256_packs_epi32(_mm256_cmpeq_epi32(_mm256_and_si256(x, absm), zero),
                                    _mm256_cmpeq_epi32(_mm256_and_si256(y, absm), zero));
    const V z1 = _mm256_packs_epi32(_mm256_cmpeq_epi32(_mm256_and_si256(z, absm), zero),
                                    _mm256_cmpeq_epi32(_mm256_and_si256(w, absm), zero));
    const V qm = _mm256_set1_epi16((short)((1 << (31 - D)) - 1)), mn = _mm256_set1_epi16((short)minq),
            span = _mm256_set1_epi16((short)(maxq - minq));
    const V bad = _mm256_or_si256(
        _mm256_andnot_si256(z0, _mm256_subs_epu16(_mm256_sub_epi16(_mm256_and_si256(w0, qm), mn), span)),
        _mm256_andnot_si256(z1, _mm256_subs_epu16(_mm256_sub_epi16(_mm256_and_si256(w1, qm), mn), span)));
    if (!_mm256_testz_si256(bad, bad)) return 0;
    const V zw = _mm256_set1_epi16((short)(add >> D));
    narrow8_store4(p, _mm256_xor_si256(w0, _mm256_and_si256(z0, zw)), _mm256_xor_si256(w1, _mm256_and_si256(z1, zw)),
                   D, nt);
    return _mm256_testz_si256(_mm256_or_si256(z0, z1), _mm256_or_si256(z0, z1)) ? 2 : 1;
}
#define MXP_SIMD_NARROW8_FASTZ 1

/*
 * float32 -> float8 nearest-even for 16 lanes without overflow, infinity or NaN (|x| <= hi, the
 * largest magnitude that rounds to max finite); false, with nothing stored, when a lane has one.
 * Lanes in the normal range as in narrow8_fast4 (on the magnitude a); lanes below it (|x| < lo,
 * the smallest normal: float8 subnormals, and everything that rounds to +-0) through F16C:
 *     q = VCVTPS2PH(a * 2^(B - 1 + m - 24))
 * The product is the wanted result in units of float16's subnormal step 2^-24, so the
 * hardware's nearest-even rounding onto float16 subnormals (immediate rounding, MXCSR.RC
 * ignored) is exactly the float8 subnormal rounding; q <= 2^m, and q = 2^m is the smallest
 * normal pattern, as it should be. The multiply by a power of two is exact unless the product
 * is below float32's normal range (a < 2^(102 - B - m)), where the true result is 0 and FTZ, DAZ
 * or any rounding of the product still give 0. The sign goes to bit 7.
 */
PRIM V narrow8_sub1(V x, V a, int D, V k, V lo, __m256 scale)
{
    const V qn = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(a, k),
                                                    _mm256_and_si256(_mm256_srli_epi32(a, D), _mm256_set1_epi32(1))), D);
    const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_castsi256_ps(a), scale), _MM_FROUND_TO_NEAREST_INT);
    const V q = _mm256_blendv_epi8(qn, _mm256_cvtepu16_epi32(h), _mm256_cmpgt_epi32(lo, a));
    return _mm256_or_si256(q, _mm256_and_si256(_mm256_srli_epi32(x, 24), _mm256_set1_epi32(0x80)));
}
PRIM bool narrow8_sub2(void *p, V x, V y, int D, uint32_t add, uint32_t lo, uint32_t hi, uint32_t scale, int nt)
{
    const V absm = _mm256_set1_epi32(0x7FFFFFFF), H = _mm256_set1_epi32((int)hi);
    const V ax = _mm256_and_si256(x, absm), ay = _mm256_and_si256(y, absm);
    const V over = _mm256_or_si256(_mm256_cmpgt_epi32(ax, H), _mm256_cmpgt_epi32(ay, H));
    if (!_mm256_testz_si256(over, over)) return false;
    const V k = _mm256_set1_epi32((int)add), L = _mm256_set1_epi32((int)lo);
    const __m256 sc = _mm256_castsi256_ps(_mm256_set1_epi32((int)scale));
    const V qx = narrow8_sub1(x, ax, D, k, L, sc), qy = narrow8_sub1(y, ay, D, k, L, sc);
    if (nt) st8x2_nt(p, qx, qy);
    else st8x2(p, qx, qy);
    return true;
}
#define MXP_SIMD_NARROW8_SUB 1

/*
 * Stochastic rounding to float8 for 16 lanes after sr_run's fast loop failed (cvt_simd_impl.h's
 * MXP_SIMD_SR8_FASTZ, taken in out-of-line runs): 0 = not stored (a lane at or above max
 * finite, or NaN), 1 = stored with a lane below the normal range (+-0 included), 2 = stored
 * without one. The lanes in [lo, hi) as sr_fast: q = (a - rebias + (r >> (32 - D))) >> D. The
 * lanes below lo (Q = 2^(1 - bias - m), the subnormal quantum), in integer arithmetic (no
 * MXCSR, FTZ or DAZ to mind):
 *   - a = mant * 2^(E - 150) with mant = 2^23 | M, so a / Q = mant / 2^sh, sh = 151 - bias - m - E;
 *   - q0 = floor(a / Q) = mant >> sh (VPSRLVD; 0 for sh >= 32);
 *   - F, the top 32 bits of the dropped part: mant << (32 - sh) when sh <= 32, mant >> (sh - 32)
 *     when sh >= 32, or-ed (VPSLLVD / VPSRLVD give 0 for the other case's count, negative as
 *     unsigned, or >= 32). A float32 subnormal or +-0 (E = 0) has sh > 100: q0 = F = 0, as in
 *     the reference;
 *   - up iff r > ~F with the full random word (the fast loop's words stop before the hash's
 *     last step, sr_words_hi): q = q0 + up.
 * The first version took q0 from VCVTPS2PH (round toward zero) and F from float arithmetic on
 * q0 * Q: on AMD Zen 5, data over [-0.05, 0.05], f32 -> e4m3fn in cache 0.544 -> 0.439
 * ns/element with this one (bench/RESULTS.md session 17). Before either, every such step
 * (ReLU data: nearly every step) took the general path.
 */
PRIM V sr8_tiny_q(V a, V r, int m, int bias)
{
    /* a = (2^23 | M) * 2^(E - 150), E = a >> 23, so a / Q = mant / 2^sh with mant = 2^23 | M and
     * sh = 151 - bias - m - E (>= 24 - m below lo) */
    const V sh = _mm256_sub_epi32(_mm256_set1_epi32(151 - bias - m), _mm256_srli_epi32(a, 23));
    const V mant = _mm256_or_si256(_mm256_and_si256(a, _mm256_set1_epi32(0x7FFFFF)), _mm256_set1_epi32(0x800000));
    const V q0 = _mm256_srlv_epi32(mant, sh);
    /* F: the dropped low sh bits moved to the top (sh <= 32), or mant >> (sh - 32) (sh >= 32); a
     * count outside 0..31 (the other case's, negative as unsigned) gives 0 */
    const V c32 = _mm256_set1_epi32(32);
    const V F = _mm256_or_si256(_mm256_sllv_epi32(mant, _mm256_sub_epi32(c32, sh)),
                                _mm256_srlv_epi32(mant, _mm256_sub_epi32(sh, c32)));
    const V rf = _mm256_xor_si256(r, _mm256_srli_epi32(r, 21)); /* the hash's last step */
    /* r >u ~F as a signed compare with the top bits flipped: ~F ^ 2^31 = F ^ 0x7FFFFFFF */
    const V sb = _mm256_set1_epi32((int)0x80000000u);
    const V up = _mm256_cmpgt_epi32(_mm256_xor_si256(rf, sb), _mm256_xor_si256(F, _mm256_set1_epi32(0x7FFFFFFF)));
    return _mm256_sub_epi32(q0, up);
}
PRIM V sr8_code(V u, V r, int D, V rebias, V lo, V *tiny, int m, int bias)
{
    const V a = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
    const V qn = _mm256_srli_epi32(_mm256_add_epi32(_mm256_sub_epi32(a, rebias), _mm256_srli_epi32(r, 32 - D)), D);
    *tiny = _mm256_cmpgt_epi32(lo, a);
    /* no lane below lo: qn; only +-0 there (ReLU data): 0 for them; else sr8_tiny_q */
    const V zero = _mm256_cmpeq_epi32(a, _mm256_setzero_si256());
    const V q = _mm256_testc_si256(zero, *tiny) ? _mm256_andnot_si256(*tiny, qn)
                                                : _mm256_blendv_epi8(qn, sr8_tiny_q(a, r, m, bias), *tiny);
    return _mm256_or_si256(q, _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80)));
}
#define MXP_SIMD_SR8_FASTZ 1
PRIM int sr8_fast2z(void *p, V u0, V u1, V r0, V r1, int D, uint32_t lo, uint32_t hi, uint32_t rebias, int nt)
{
    const int m = 23 - D, bias = m == 3 ? 7 : 15; /* e4m3fn or e5m2 */
    /* a lane at or above hi (max finite, which drops no bits, goes to the general path too) or
     * NaN: |u| > hi - 1 as signed integers */
    const V absm = _mm256_set1_epi32(0x7FFFFFFF), H = _mm256_set1_epi32((int)(hi - 1u));
    const V over = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_and_si256(u0, absm), H),
                                   _mm256_cmpgt_epi32(_mm256_and_si256(u1, absm), H));
    if (!_mm256_testz_si256(over, over)) return 0;
    const V rb = _mm256_set1_epi32((int)rebias), L = _mm256_set1_epi32((int)lo);
    V t0, t1;
    const V c0 = sr8_code(u0, r0, D, rb, L, &t0, m, bias), c1 = sr8_code(u1, r1, D, rb, L, &t1, m, bias);
    if (nt) st8x2_nt(p, c0, c1);
    else st8x2(p, c0, c1);
    const V tt = _mm256_or_si256(t0, t1);
    return _mm256_testz_si256(tt, tt) ? 2 : 1;
}

/*
 * Stochastic rounding from a 16-bit format to float8 on the 16 loaded words (srn_run's fast
 * step, MXP_SIMD_SR8_W16), as cvt_avx512.c's sr8w16_codes (which has the arithmetic and the word
 * constants Dw, lw, hw, rebw): a bfloat16 x is the high word of its float32 value u = x << 16, so
 * sr_fast's t = u + (r >> (32 - D)) has the high word x + (r >> (32 - Dw)), Dw = D - 16 (the
 * low-word part, below 2^16, cannot carry into it); a float16 the same with its own fields. The
 * code is (t - rebw) >> Dw with the sign at bit 15 - Dw, made the signed word q - 128 S by
 * VPMADDUBSW (sr8w16_tcode; Dw = 8: the word shifted right arithmetically), which sr8w_store
 * packs with signed saturation. The random addends are the elements' random
 * halves shifted right by 16 - Dw (sr8w16_rwh; until session 46 the top Dw bits of their own
 * words, by VPACKUSDW and one VPERMQ into element order). The lanes taken are
 * lw <= |x| < hw: the wrapping |x| - lw saturating-minus the span is zero. *out: nonzero
 * when a lane is outside, two bits a word (sr8w16_lanes makes it a lane mask). Before,
 * each step widened the 16 words to two float32 vectors and ran sr_fast on each. AMD Zen 4
 * running these kernels (--isa avx2), three alternating runs each, medians, ns/element: bf16 ->
 * e4m3fn in cache 0.261 -> 0.216, at 2^26 0.312 -> 0.257; bf16 -> e5m2 0.253 -> 0.199 and 0.300
 * -> 0.227; float16 sources: bench/RESULTS.md, session 41.
 */
#define MXP_SIMD_SR8_W16 1
PRIM V srli16_n(V x, int n)
{
    switch (n) {
    case 4: return _mm256_srli_epi16(x, 4);
    case 5: return _mm256_srli_epi16(x, 5);
    case 7: return _mm256_srli_epi16(x, 7);
    case 9: return _mm256_srli_epi16(x, 9);
    case 11: return _mm256_srli_epi16(x, 11);
    case 12: return _mm256_srli_epi16(x, 12);
    default: return _mm256_srli_epi16(x, 8);
    }
}
/* nonzero in the words whose magnitude a is outside [lw, hw): the wrapping a - lw
 * saturating-minus the span hw - 1 - lw */
PRIM V w16_out(V a, uint32_t lw, uint32_t hw)
{
    return _mm256_subs_epu16(_mm256_sub_epi16(a, _mm256_set1_epi16((short)lw)),
                             _mm256_set1_epi16((short)(hw - 1u - lw)));
}
/* sr8w16_codes' out (two bits a word, VPMOVMSKB's) as lanes (bit j: word j), for srn_run's lone
 * lane (MXP_SIMD_SR8W16_PATCH): compacted there only, since a step that the +-0 lanes' store
 * takes (ReLU data: nearly every step) does not read it. Compacted in every step, --relu data,
 * bf16 -> e4m3fn stochastic in cache took 0.157 -> 0.184 ns/element (session 52). */
PRIM uint32_t sr8w16_lanes(uint32_t out)
{
    uint32_t m = out & 0x55555555u;
    m = (m | m >> 1) & 0x33333333u;
    m = (m | m >> 2) & 0x0F0F0F0Fu;
    m = (m | m >> 4) & 0x00FF00FFu;
    return (m | m >> 8) & 0xFFFFu;
}
/* sr8w16_codes' random addends, r >> (32 - Dw) in word lanes in element order, from the vector h
 * of the elements' random top halves (kernels.h's mxp__sr_bits_src: element j's is halfword j;
 * until session 46 each had a word of its own, and two hashed vectors gave them by VPACKUSDW and
 * VPERMQ) */
PRIM V sr8w16_rwh(V h, int Dw) { return srli16_n(h, 16 - Dw); }
/* halfwords 0 .. VL - 1 (hi = 0) or VL .. 2 VL - 1 of h zero-extended to dwords (srn_run's words) */
PRIM V sr_h16_ext(V h, int hi)
{
    return _mm256_cvtepu16_epi32(hi ? _mm256_extracti128_si256(h, 1) : _mm256_castsi256_si128(h));
}
/* srb_run's and srh_run's halves in unpack order (MXP_SIMD_H16_UNPK, cvt_simd_impl.h): the
 * halfwords 0 .. 3 (hi = 0) or 4 .. 7 of each 128-bit lane of h zero-extended to dwords by
 * VPUNPCKLWD / VPUNPCKHWD, one operation where sr_h16_ext takes two (three for hi);
 * sr_h16_unpk3 shifts them right by 3 first, in one VPSRLW for both (r >> 19 for float16's 13
 * dropped bits) */
#define MXP_SIMD_H16_UNPK 1
PRIM V sr_h16_unpk(V h, int hi)
{
    return hi ? _mm256_unpackhi_epi16(h, _mm256_setzero_si256()) : _mm256_unpacklo_epi16(h, _mm256_setzero_si256());
}
PRIM V sr_h16_unpk3(V h, int hi) { return sr_h16_unpk(_mm256_srli_epi16(h, 3), hi); }
/* The codes of the words t = x + rw (sr8w16_codes) as signed words, code - 256 for a negative
 * one, which sr8w_store packs with VPACKSSWB: VPMADDUBSW with bytes (1, -2^Dw) gives q - 128 S
 * (the high byte of tq is S << (7 - Dw)), and for Dw = 8 the shift is arithmetic. Until session
 * 52 the words were the codes, packed with VPACKUSWB, and float16 -> e4m3fn (Dw = 7, whose
 * multiplier -128 gave q - 128 S all the same) masked each word to its low byte: one operation
 * more per step. AMD Zen 4, a timing driver, float16 -> e4m3fn stochastic, three runs: in cache
 * 0.140 -> 0.133 ns/element, at 2^26 0.175-0.192 -> 0.165-0.167. */
PRIM V sr8w16_tcode(V t, int Dw, uint32_t rebw)
{
    if (Dw == 8) return _mm256_srai_epi16(t, 8);
    const V mad = _mm256_set1_epi16((short)(1 | (-(1 << Dw) & 0xFF) << 8));
    return _mm256_maddubs_epi16(srli16_n(_mm256_sub_epi16(t, _mm256_set1_epi16((short)rebw)), Dw), mad);
}
PRIM V sr8w16_codes(const unsigned char *p, V rw, int Dw, uint32_t lw, uint32_t hw, uint32_t rebw, uint32_t *out)
{
    const V x = _mm256_loadu_si256((const __m256i *)(const void *)p);
    const V bad = w16_out(_mm256_and_si256(x, _mm256_set1_epi16(0x7FFF)), lw, hw);
    *out = ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi16(bad, _mm256_setzero_si256()));
    return sr8w16_tcode(_mm256_add_epi16(x, rw), Dw, rebw);
}
/* After sr8w16_codes found a lane outside: when every such lane is +-0 (ReLU data: nearly every
 * step of e4m3fn), their codes (the sign alone: the word's high byte, as a signed word) put into
 * *b, and 1; else 0 (*b unchanged). The range test again, without the zero lanes. */
PRIM int sr8w16_zeros(const unsigned char *p, V *b, uint32_t out, uint32_t lw, uint32_t hw)
{
    (void)out;
    const V x = _mm256_loadu_si256((const __m256i *)(const void *)p);
    const V a = _mm256_and_si256(x, _mm256_set1_epi16(0x7FFF));
    const V z = _mm256_cmpeq_epi16(a, _mm256_setzero_si256());
    const V bad = _mm256_andnot_si256(z, w16_out(a, lw, hw));
    if (!_mm256_testz_si256(bad, bad)) return 0;
    *b = _mm256_blendv_epi8(*b, _mm256_srai_epi16(x, 8), z);
    return 1;
}
/* b with the word lanes of mask one (bit j: lane j) set to code, as a signed word (srn_run's
 * lone lane, MXP_SIMD_SR8W16_PATCH) */
#define MXP_SIMD_SR8W16_PATCH 1
PRIM V sr8_patch(V b, uint32_t one, uint32_t code)
{
    const V bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, -32768);
    const V m = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16((short)one), bit), bit);
    return _mm256_blendv_epi8(b, _mm256_set1_epi16((short)((int)code - (int)(code & 0x80u) * 2)), m);
}
/* 16 word lanes (codes as signed words, element order) -> 16 bytes at p */
PRIM void sr8w_store(void *p, V b, int nt)
{
    const __m128i b8 = _mm_packs_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    if (nt) MXP__STREAM128((__m128i *)p, b8);
    else _mm_storeu_si128((__m128i *)p, b8);
}

/*
 * The step after narrow8_fast4 failed (cvt_simd_impl.h runs it out of line, in runs; not for a
 * lone failing step inside the fast loop, MXP_SIMD_NARROW8_FAST_TINY_LONE: with 16 registers a
 * call there made gcc rebuild the fast loop's constants, uniform f32 -> e5m2 0.080 -> 0.087
 * ns/element in cache on AMD Zen 5): 32 float32 -> float8 nearest-even when no lane overflows
 * or is NaN, subnormal and +-0 results included (1: stored, a lane was below the normal range;
 * 2: stored, none was), else 0 with nothing stored. The lanes in the normal range as in
 * narrow8_fast4; the others:
 *   - only +-0 among them (ReLU data): their words as in narrow8_fast4z;
 *   - otherwise (|x| < lo, found on the inputs and packed to words in narrow8_words' order)
 *     their codes by VCVTPS2PH as in narrow8_sub1 (exact whatever MXCSR says), the halves put
 *     in narrow8_words' order (VINSERTI128 + VPERMQ), the sign or-ed into bit 7, blended into
 *     the bytes after narrow8_store4's multiply-add.
 * It replaces, for such steps, the zero-aware step, narrow8_sub2 per half and the dword
 * tiny_run. It is narrow8_fast4tz here (narrow8_tiny_run, its only caller on AVX2, calls that
 * with MXP_SIMD_NARROW8_TINY_Z; MXP_SIMD_NARROW8_TINY_STOP): the first store only when zm, then
 * returning 3 when a lane was +-0 (no branch between the stores on data with small values), and
 * when streaming the general store returns 2 when no lane was below the normal range, through an
 * empty asm so that the run's count makes no branch on it.
 */
#define MXP_SIMD_NARROW8_FAST_TINY 1
#define MXP_SIMD_NARROW8_TINY_STOP 1
#define MXP_SIMD_NARROW8_TINY_Z 1
PRIM V narrow8_tiny_words(V ax, V ay, __m256 sc)
{
    const __m128i hx = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_castsi256_ps(ax), sc), _MM_FROUND_TO_NEAREST_INT);
    const __m128i hy = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_castsi256_ps(ay), sc), _MM_FROUND_TO_NEAREST_INT);
    /* [x0-7 | y0-7] -> [x0-3 y0-3 | x4-7 y4-7], packus_epi32's order */
    return _mm256_permute4x64_epi64(_mm256_inserti128_si256(_mm256_castsi128_si256(hx), hy, 1), 0xD8);
}
PRIM int narrow8_fast4tz(void *p, const unsigned char *s, int D, uint32_t add, uint32_t minq, uint32_t maxq, int nt,
                         int zm)
{
    const V x = ld32(s), y = ld32(s + 32), z = ld32(s + 64), w = ld32(s + 96);
    const int m = 23 - D, bias = m == 3 ? 7 : 15; /* e4m3fn or e5m2 */
    const V k = _mm256_set1_epi32((int)add);
    const V w0 = narrow8_words(x, y, D, k), w1 = narrow8_words(z, w, D, k);
    const V qm = _mm256_set1_epi16((short)((1 << (31 - D)) - 1)), mn = _mm256_set1_epi16((short)minq),
            span = _mm256_set1_epi16((short)(maxq - minq));
    const V b0 = _mm256_subs_epu16(_mm256_sub_epi16(_mm256_and_si256(w0, qm), mn), span);
    const V b1 = _mm256_subs_epu16(_mm256_sub_epi16(_mm256_and_si256(w1, qm), mn), span);
    const V absm = _mm256_set1_epi32(0x7FFFFFFF), zero = _mm256_setzero_si256();
    const V ax = _mm256_and_si256(x, absm), ay = _mm256_and_si256(y, absm), az = _mm256_and_si256(z, absm),
            aw = _mm256_and_si256(w, absm);
    const V z0 = _mm256_packs_epi32(_mm256_cmpeq_epi32(ax, zero), _mm256_cmpeq_epi32(ay, zero));
    const V z1 = _mm256_packs_epi32(_mm256_cmpeq_epi32(az, zero), _mm256_cmpeq_epi32(aw, zero));
    const V bz = _mm256_or_si256(_mm256_andnot_si256(z0, b0), _mm256_andnot_si256(z1, b1));
    if (zm && _mm256_testz_si256(bz, bz)) {
        /* normal and +-0 lanes only: narrow8_fast4z's words */
        const V zw = _mm256_set1_epi16((short)(add >> D));
        narrow8_store4(p, _mm256_xor_si256(w0, _mm256_and_si256(z0, zw)), _mm256_xor_si256(w1, _mm256_and_si256(z1, zw)),
                       D, nt);
        const V zz = _mm256_or_si256(z0, z1);
        return _mm256_testz_si256(zz, zz) ? 2 : 3;
    }
    const V lo = _mm256_set1_epi32((int)((uint32_t)(128 - bias) << 23));
    const V t0 = _mm256_packs_epi32(_mm256_cmpgt_epi32(lo, ax), _mm256_cmpgt_epi32(lo, ay));
    const V t1 = _mm256_packs_epi32(_mm256_cmpgt_epi32(lo, az), _mm256_cmpgt_epi32(lo, aw));
    const V bad = _mm256_or_si256(_mm256_andnot_si256(t0, b0), _mm256_andnot_si256(t1, b1));
    if (!_mm256_testz_si256(bad, bad)) return 0;
    const __m256 sc = _mm256_castsi256_ps(_mm256_set1_epi32((int)((uint32_t)(127 + bias - 1 + m - 24) << 23)));
    const V sm = _mm256_set1_epi16(0x80);
    /* the codes below the normal range with the sign in bit 7 (the sign words: -1 or 0) */
    const V c0 = _mm256_or_si256(narrow8_tiny_words(ax, ay, sc),
                                 _mm256_and_si256(_mm256_packs_epi32(_mm256_srai_epi32(x, 31), _mm256_srai_epi32(y, 31)), sm));
    const V c1 = _mm256_or_si256(narrow8_tiny_words(az, aw, sc),
                                 _mm256_and_si256(_mm256_packs_epi32(_mm256_srai_epi32(z, 31), _mm256_srai_epi32(w, 31)), sm));
    const V mul = _mm256_set1_epi16((short)(1 | (1 << (D - 16)) << 8));
    const V m0 = _mm256_blendv_epi8(_mm256_maddubs_epi16(w0, mul), c0, t0);
    const V m1 = _mm256_blendv_epi8(_mm256_maddubs_epi16(w1, mul), c1, t1);
    const V o = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(m0, m1), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    if (nt) {
        MXP__STREAM128((__m128i *)p, _mm256_castsi256_si128(o));
        MXP__STREAM128((__m128i *)p + 1, _mm256_extracti128_si256(o, 1));
    } else {
        _mm256_storeu_si256((__m256i *)p, o);
    }
    if (!nt) return 1;
    const V tt = _mm256_or_si256(t0, t1);
    int clean = _mm256_testz_si256(tt, tt);
    __asm__("" : "+r"(clean)); /* opaque: the caller's run makes no branch on it */
    return 1 + clean;
}

/*
 * float32 -> bfloat16 nearest-even for 16 lanes without NaN (the caller checks):
 *   t = u + 0x7FFF + lsb,  lsb = bit 16 of u;  result = t >> 16
 * (cvt_scalar.c's carry trick; the sign bit never receives a carry). Saturation is fixed up on
 * the packed 16-bit results, 16 lanes at once: a result 0x7F80 / 0xFF80 (infinity) plus the
 * all-ones compare mask (-1) is 0x7F7F / 0xFF7F (max finite).
 */
PRIM void bf16_rne2(void *p, V x, V y, V k, int sat, int nt)
{
    const V one = _mm256_set1_epi32(1);
    const V tx = _mm256_add_epi32(_mm256_add_epi32(x, k), _mm256_and_si256(_mm256_srli_epi32(x, 16), one));
    const V ty = _mm256_add_epi32(_mm256_add_epi32(y, k), _mm256_and_si256(_mm256_srli_epi32(y, 16), one));
    /* packus: [x0-3 y0-3 | x4-7 y4-7] (lanes < 2^16, so no saturation); qwords 0,2,1,3 */
    V h = _mm256_permute4x64_epi64(_mm256_packus_epi32(_mm256_srli_epi32(tx, 16), _mm256_srli_epi32(ty, 16)), 0xD8);
    if (sat) {
        const V inf = _mm256_cmpeq_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)),
                                         _mm256_set1_epi16(0x7F80));
        h = _mm256_add_epi16(h, inf);
    }
    if (nt) MXP__STREAM256((__m256i *)p, h);
    else _mm256_storeu_si256((__m256i *)p, h);
}
#define MXP_SIMD_BF16_RNE2 1

/* F16C, nearest-even from the immediate (MXCSR.RC ignored); see cvt_simd_impl.h for why its
 * results equal the reference's (FTZ ignored, NaN pattern identical).
 * The two halves stay in registers (MXP_SIMD_PIN): clang 14 otherwise stored each one with
 * VCVTPS2PH's memory form, which is slow on AMD cores: f32 -> f16 in cache took 0.061 ns/element
 * on the AMD EPYC Zen 5, against 0.029 from gcc's register form (bench/RESULTS.md session 17). */
#define MXP_SIMD_HW_F16 1
PRIM V hw_f16_pair(V x, V y, int imm_rz)
{
    __m128i hx = imm_rz ? _mm256_cvtps_ph(_mm256_castsi256_ps(x), _MM_FROUND_TO_ZERO)
                        : _mm256_cvtps_ph(_mm256_castsi256_ps(x), _MM_FROUND_TO_NEAREST_INT);
    __m128i hy = imm_rz ? _mm256_cvtps_ph(_mm256_castsi256_ps(y), _MM_FROUND_TO_ZERO)
                        : _mm256_cvtps_ph(_mm256_castsi256_ps(y), _MM_FROUND_TO_NEAREST_INT);
    MXP_SIMD_PIN(hx);
    MXP_SIMD_PIN(hy);
    return _mm256_set_m128i(hy, hx);
}
PRIM void hw_f16_st2(void *p, V x, V y, int sat, int nt)
{
    V h = hw_f16_pair(x, y, 0);
    if (sat) { /* +-inf (0x7C00 / 0xFC00) - 1 = +-max (0x7BFF / 0xFBFF) */
        const V inf = _mm256_cmpeq_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)),
                                         _mm256_set1_epi16(0x7C00));
        h = _mm256_add_epi16(h, inf);
    }
    if (nt) MXP__STREAM256((__m256i *)p, h);
    else _mm256_storeu_si256((__m256i *)p, h);
}
/* The same conversion truncating (imm _MM_FROUND_TO_ZERO, MXCSR not consulted): for the
 * stochastic fast path, whose inputs already carry the random bits (see cvt_simd_impl.h) and
 * lie in float16's normal range up to max finite, so no lane overflows or is subnormal. */
PRIM void hw_f16_st2_rz(void *p, V x, V y, int nt)
{
    const V h = hw_f16_pair(x, y, 1);
    if (nt) MXP__STREAM256((__m256i *)p, h);
    else _mm256_storeu_si256((__m256i *)p, h);
}
PRIM V hw_f16_ld(const void *p)
{
    return _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)));
}

/* e5m2 is float16's top byte: byte b is the float16 b << 8 exactly (same sign, exponent and
 * bias; the two mantissa bits on top), so VCVTPH2PS widens it with the reference's result for
 * every byte, NaN included (quiet bit set, payload kept: S 0x7FC00000 | mm << 21). */
#define MXP_SIMD_HW_E5M2 1
PRIM V hw_e5m2_ld(const void *p)
{
    const __m128i b = _mm_loadl_epi64((const __m128i *)p);
    return _mm256_castps_si256(_mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), b)));
}

/* e4m3fn byte S EEEE MMM -> the float16 S EEEE0 MMM0000000 read with float16's 5-bit exponent
 * field: the same bits one place lower, i.e. the value times 2^-8 (bias 15 instead of 7), and
 * e4m3fn subnormals land on float16 subnormals (m * 2^-9 -> m << 7 = m * 2^-17). VCVTPH2PS then
 * times 256 (VMULPS) is exact: the products are normal float32 (>= 2^-9) or +-0, so MXCSR
 * (FTZ, DAZ, rounding) cannot touch them. The NaN S.1111.111 came out as +-480 (the float16
 * 1.875 * 256): its magnitude bits 0x43F00000 become the reference's 0x7FC00000 by one XOR.
 *   word w = b sign-extended (VPMOVSXBW: bits 15..7 = S, 6..0 = EEEEMMM),
 *   float16 = (w << 7) & 0xBF80 (S at bit 15, bit 14 cleared, EEEEMMM at bits 13..7)
 * Three integer operations per 8 bytes (an earlier form, w = b << 8 by unpacking with zero and
 * float16 = w - ((w >> 1) & 0x3F80), took four; 2^16 elements in cache on Zen 4: e4m3fn->f32
 * avx2 0.085 -> 0.073 ns/element, avx512 0.070 -> 0.057). */
#define MXP_SIMD_HW_E4M3 1
PRIM V hw_e4m3_ld_nonan(const void *p) /* no NaN among the 8 bytes */
{
    const __m128i w = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)p)); /* sign-extended */
    const __m128i h = _mm_and_si128(_mm_slli_epi16(w, 7), _mm_set1_epi16((short)0xBF80));
    return _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f)));
}
PRIM V hw_e4m3_ld(const void *p)
{
    const V u = hw_e4m3_ld_nonan(p);
    const V nan = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                     _mm256_set1_epi32(0x43F00000));
    return _mm256_blendv_epi8(u, _mm256_xor_si256(u, _mm256_set1_epi32(0x43F00000 ^ 0x7FC00000)), nan);
}
/* true when one of the 4*VL = 32 bytes at p is an e4m3fn NaN (S.1111.111) */
PRIM bool hw_e4m3_nan4(const void *p)
{
    const V b = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)p), _mm256_set1_epi8(0x7F));
    return _mm256_movemask_epi8(_mm256_cmpeq_epi8(b, _mm256_set1_epi8(0x7F))) != 0;
}

/* Streaming stores when one call reads + writes at least this many bytes: measured here
 * (Zen 3, 32 MB L3) float16 -> float32 streams 2x faster at 2^22 elements (24 MB) and 1.3x
 * slower at 2^21 (12 MB, still cache-resident); see bench/RESULTS.md. */
#define MXP_SIMD_NT_THRESHOLD mxp__nt_threshold /* MXP__NT_THRESHOLD_DEFAULT, kernels.h */
#define MXP_SIMD_NT_STORE32(p, x) MXP__STREAM256((__m256i *)(void *)(p), (x))
#define MXP_SIMD_NT_FENCE() _mm_sfence()
/* Streaming kernels also prefetch their source this many bytes ahead: the hardware prefetcher
 * alone left one core waiting on DRAM. Measured at 2^26 elements, 1 thread (ns/elem, best of
 * runs, no prefetch -> 2 KB ahead): float32 -> bfloat16 0.285 -> 0.254, -> e5m2 0.349 -> 0.255,
 * -> e4m3fn 0.357 -> 0.258; float16 -> float32 0.234 -> 0.207 (0.5 to 8 KB ahead: 2 KB was as
 * good as any). float32 -> float16 (F16C) went 0.259 -> 0.299, so it does not prefetch. */
#ifndef MXP_SIMD_PREFETCH_DIST
#define MXP_SIMD_PREFETCH_DIST 2048
#endif
/* Intel (the CPUs dispatch.c sets to MXP__PREFETCH_L2, AVX2-only ones included): the scheme of
 * cvt_avx512.c's pf_line (kernels.h's mxp__pf_intel: PREFETCHT2 of the line 6144 bytes ahead of
 * the loads, PREFETCHT0 of the one 3072 bytes ahead; p is MXP_SIMD_PREFETCH_DIST bytes ahead), and, as there, in the
 * nearest-even float16 narrowing, the stochastic roundings from 16-bit sources and the float64
 * narrowings too; the loops between narrow formats take the far prefetch alone (avx2_pf_far).
 * Until session 33 these kernels prefetched as on the Zen 3 they were tuned on (PREFETCHT0 2048
 * bytes ahead, and not at all in those loops), which left an Intel core waiting on DRAM: Intel
 * Xeon (CPU 4 of bench/RESULTS.md, session 33), `bench_convert --quick --csv --isa avx2`, 2^26
 * elements, one thread, medians of three alternating runs, ns/element before -> after (ratio to
 * the limit): f32->f16 0.349 -> 0.307 (0.84x -> 0.94x), f32->bf16 0.360 -> 0.293 (0.81x ->
 * 0.98x), f32->e4m3fn 0.346 -> 0.317 (0.73x -> 0.81x), f32->e5m2 0.326 -> 0.292 (0.76x -> 0.89x),
 * f64->f16 0.711 -> 0.557, f64->e4m3fn 0.798 -> 0.596, f16->bf16 0.286 -> 0.189, bf16->f16 0.251
 * -> 0.174, e4m3fn->bf16 0.294 -> 0.128, e4m3fn->e5m2 0.135 -> 0.079, bf16->e4m3fn stochastic
 * 0.865 -> 0.356; the widenings unchanged (f16->f32 0.250 / 0.255, e4m3fn->f32 0.198 / 0.200;
 * the avx512 table on Intel runs these two avx2 kernels at 2^26: 0.964 -> 0.976 of the limit in
 * five alternating runs of that table). Only speed depends on it, never a result. */
#define AVX2_PF_L2 (mxp__avx512_prefetch == MXP__PREFETCH_L2)
static inline __attribute__((always_inline)) void avx2_pf_line(const void *p)
{
    if (AVX2_PF_L2) mxp__pf_intel((const char *)p - MXP_SIMD_PREFETCH_DIST);
    else _mm_prefetch((const char *)p, _MM_HINT_T0);
}
#define MXP_SIMD_PREFETCH(p) avx2_pf_line(p)
/* The far prefetch alone (PREFETCHT2 MXP__PF_FAR bytes ahead of the loads at p), on Intel only:
 * the loops between narrow formats with little work per line, as cvt_avx512.c's pf_line_far */
static inline __attribute__((always_inline)) void avx2_pf_far(const void *p)
{
    if (AVX2_PF_L2) _mm_prefetch((const char *)p + MXP__PF_FAR, _MM_HINT_T2);
}
#define MXP_SIMD_PF_FAR(p) avx2_pf_far(p)
#define MXP_SIMD_PREFETCH_HW_F16 AVX2_PF_L2
#define MXP_SIMD_PREFETCH_SRN AVX2_PF_L2
#define MXP_SIMD_PREFETCH_N64 AVX2_PF_L2

/* float64 <-> narrow without a float32 block (cvt_simd_impl.h's n64_loop / w64_loop). AVX2 has
 * no embedded rounding, so the frame sets MXCSR to toward zero (FTZ and DAZ off, every exception
 * masked) for the call; the float32 steps that run under it do not depend on MXCSR's rounding
 * (integer operations, and F16C's rounding comes from its immediate), and the float32 kernel of
 * a composed block runs under the caller's MXCSR. f64_odd_ld: 8 float64 -> 8 float32 rounded to
 * odd, the odd bit where the conversion was inexact: full, the float32 read back differs
 * (cvt_f64_avx2.c's step; exact everywhere); else where the 29 low mantissa bits are not all
 * zero (exact where the float32 is normal, overflow and infinity included; a NaN's odd bit
 * never reaches a narrow NaN; below 2^-126 it may be wrong, where only a bfloat16 subnormal
 * result can tell, which n64_step sends to the full step). f64_st: 8 float32 -> 8 float64 (exact
 * with DAZ off; sat: +-inf -> +-DBL_MAX, the pattern below it). */
#define MXP_SIMD_F64 1
#define MXP_SIMD_F64_CSR 0x7F80u
PRIM V f64_odd_ld(const unsigned char *p, int full)
{
    const __m256d x0 = _mm256_loadu_pd((const double *)(const void *)p);
    const __m256d x1 = _mm256_loadu_pd((const double *)(const void *)(p + 32));
    const __m128 y0 = _mm256_cvtpd_ps(x0), y1 = _mm256_cvtpd_ps(x1);
    const V y = _mm256_castps_si256(_mm256_set_m128(y1, y0));
    V odd;
    if (full) {
        /* two 4-lane qword masks -> one 8-lane dword mask in element order (dwords 0 and 2 of
         * each 128-bit lane, then qwords 0, 2, 1, 3) */
        const __m256d ne0 = _mm256_cmp_pd(_mm256_cvtps_pd(y0), x0, _CMP_NEQ_OQ);
        const __m256d ne1 = _mm256_cmp_pd(_mm256_cvtps_pd(y1), x1, _CMP_NEQ_OQ);
        const __m256 m = _mm256_shuffle_ps(_mm256_castpd_ps(ne0), _mm256_castpd_ps(ne1), 0x88);
        odd = _mm256_and_si256(_mm256_permute4x64_epi64(_mm256_castps_si256(m), 0xD8), _mm256_set1_epi32(1));
    } else {
        /* the low dword of each float64 (mantissa bits 0-31), in element order as above */
        const __m256 lo = _mm256_shuffle_ps(_mm256_castpd_ps(x0), _mm256_castpd_ps(x1), 0x88);
        const V l = _mm256_and_si256(_mm256_permute4x64_epi64(_mm256_castps_si256(lo), 0xD8),
                                     _mm256_set1_epi32(0x1FFFFFFF));
        V one = _mm256_set1_epi32(1);
        MXP_SIMD_PIN(one); /* opaque: clang made the VPMINUD a compare and a shift */
        odd = _mm256_min_epu32(l, one);
    }
    return _mm256_or_si256(y, odd);
}
PRIM void f64_st(unsigned char *p, V x, int sat, int nt)
{
    for (int h = 0; h < 2; h++) {
        const __m128 xh = _mm_castsi128_ps(h ? _mm256_extracti128_si256(x, 1) : _mm256_castsi256_si128(x));
        __m256i y = _mm256_castpd_si256(_mm256_cvtps_pd(xh));
        if (sat)
            y = _mm256_add_epi64(y, _mm256_cmpeq_epi64(_mm256_and_si256(y, _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll)),
                                                       _mm256_set1_epi64x(0x7FF0000000000000ll)));
        if (nt) MXP__STREAM256((__m256i *)(void *)(p + 32 * h), y);
        else _mm256_storeu_si256((__m256i *)(void *)(p + 32 * h), y);
    }
}

#define MXP_SIMD_F16_F8 1 /* f16_f8_run, below */
/* srn_run's bfloat16 -> float16 steps that need no random bits (MXP_SIMD_BFH, cvt_simd_impl.h):
 * the 2*VL bfloat16 at s to float16 at d (32-byte aligned when nt: streaming) when every lane is
 * exact in float16, returning 0 and storing nothing when one is not. bf16_f16_w's rule (below)
 * with +-0 taken too, since ReLU data would otherwise leave in nearly every step: a = |h| is in
 * range when (a - 0x3880) mod 2^16 <= 0x0EFF (VPMINUW, as AVX2 has no unsigned compare) or 0. */
#define MXP_SIMD_BFH 1
/* all ones in the word lanes whose a (< 2^15) is 0 or in [lo, lo + span] */
PRIM V w16_in(V a, short lo, short span, V z)
{
    const V y = _mm256_sub_epi16(a, _mm256_set1_epi16(lo));
    return _mm256_or_si256(_mm256_cmpeq_epi16(_mm256_min_epu16(y, _mm256_set1_epi16(span)), y), z);
}
PRIM int bfh_exact(unsigned char *d, const unsigned char *s, int nt)
{
    const V h = _mm256_loadu_si256((const __m256i *)(const void *)s);
    const V a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
    const V z = _mm256_cmpeq_epi16(a, _mm256_setzero_si256());
    if (!_mm256_testc_si256(w16_in(a, 0x3880, 0x0EFF, z), _mm256_set1_epi32(-1))) return 0;
    const V t = _mm256_andnot_si256(z, _mm256_add_epi16(_mm256_slli_epi16(h, 3), _mm256_set1_epi16(0x4000)));
    const V r = _mm256_or_si256(t, _mm256_and_si256(h, _mm256_set1_epi16((short)0x8000)));
    if (nt) MXP__STREAM256((__m256i *)(void *)d, r);
    else _mm256_storeu_si256((__m256i *)(void *)d, r);
    return 1;
}
/* srn_run's bfloat16 -> float16 stochastic step for lanes down to 2^-31 (MXP_SIMD_BFH_TINY):
 * cvt_avx512.c's bfh_tiny (explained there), the range test as bfh_exact's */
#define MXP_SIMD_BFH_TINY 1
PRIM V bfh_tiny_dw(V a, V h)
{
    const V E = _mm256_srli_epi32(a, 7);
    const V S = _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(a, 2), _mm256_set1_epi32(0x1FC)),
                                _mm256_set1_epi32(0x200));
    const V q = _mm256_srlv_epi32(S, _mm256_sub_epi32(_mm256_set1_epi32(112), E));
    const V F = _mm256_and_si256(_mm256_sllv_epi32(S, _mm256_sub_epi32(E, _mm256_set1_epi32(96))),
                                 _mm256_set1_epi32(0xFFFF));
    const V sub = _mm256_add_epi32(q, _mm256_srli_epi32(_mm256_add_epi32(F, h), 16));
    const V nrm = _mm256_sub_epi32(_mm256_slli_epi32(a, 3), _mm256_set1_epi32(112 << 10));
    return _mm256_blendv_epi8(sub, nrm, _mm256_cmpgt_epi32(E, _mm256_set1_epi32(112)));
}
PRIM int bfh_tiny(unsigned char *d, const unsigned char *s, V w, int nt)
{
    const V x = _mm256_loadu_si256((const __m256i *)(const void *)s), z = _mm256_setzero_si256();
    const V a = _mm256_and_si256(x, _mm256_set1_epi16(0x7FFF));
    const V in = w16_in(a, 0x3000, 0x477F - 0x3000, _mm256_cmpeq_epi16(a, z));
    if (!_mm256_testc_si256(in, _mm256_set1_epi32(-1))) return 0;
    const V r0 = bfh_tiny_dw(_mm256_unpacklo_epi16(a, z), _mm256_unpacklo_epi16(w, z));
    const V r1 = bfh_tiny_dw(_mm256_unpackhi_epi16(a, z), _mm256_unpackhi_epi16(w, z));
    const V r = _mm256_or_si256(_mm256_packus_epi32(r0, r1), _mm256_and_si256(x, _mm256_set1_epi16((short)0x8000)));
    if (nt) MXP__STREAM256((__m256i *)(void *)d, r);
    else _mm256_storeu_si256((__m256i *)(void *)d, r);
    return 1;
}
/* srn_run's float16 -> bfloat16 stochastic steps on 16-bit lanes (MXP_SIMD_HBF): cvt_avx512.c's
 * hbf_words and hbf_wide (the arithmetic is explained there), the range test as bfh_exact's */
#define MXP_SIMD_HBF 1
PRIM int hbf_words(unsigned char *d, const unsigned char *s, V w, int nt)
{
    const V x = _mm256_loadu_si256((const __m256i *)(const void *)s);
    const V a = _mm256_and_si256(x, _mm256_set1_epi16(0x7FFF));
    const V z = _mm256_cmpeq_epi16(a, _mm256_setzero_si256());
    if (!_mm256_testc_si256(w16_in(a, 0x0400, 0x7C00 - 0x0400 - 1, z), _mm256_set1_epi32(-1))) return 0;
    const V t = _mm256_add_epi16(a, _mm256_srli_epi16(w, 13));
    const V b = _mm256_andnot_si256(z, _mm256_add_epi16(_mm256_srli_epi16(t, 3), _mm256_set1_epi16(0x3800)));
    const V r = _mm256_or_si256(b, _mm256_and_si256(x, _mm256_set1_epi16((short)0x8000)));
    if (nt) MXP__STREAM256((__m256i *)(void *)d, r);
    else _mm256_storeu_si256((__m256i *)(void *)d, r);
    return 1;
}
PRIM int hbf_wide(unsigned char *d, const unsigned char *s, V w, int nt)
{
    const V a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)s), _mm256_set1_epi16(0x7FFF));
    if (!_mm256_testz_si256(_mm256_cmpgt_epi16(a, _mm256_set1_epi16(0x7BFF)), _mm256_set1_epi32(-1)))
        return 0; /* infinity or NaN (a signed compare: a < 2^15) */
    const V t0 = _mm256_srli_epi32(_mm256_add_epi32(hw_f16_ld(s), sr_h16_ext(w, 0)), 16);
    const V t1 = _mm256_srli_epi32(_mm256_add_epi32(hw_f16_ld(s + 2 * VL), sr_h16_ext(w, 1)), 16);
    const V r = _mm256_permute4x64_epi64(_mm256_packus_epi32(t0, t1), 0xD8);
    if (nt) MXP__STREAM256((__m256i *)(void *)d, r);
    else _mm256_storeu_si256((__m256i *)(void *)d, r);
    return 1;
}
#include "cvt_simd_impl.h"

void mxp__cvt_register_avx2(mxp__kernels *k) { simd_register(k); }
void mxp__cvt_register_avx2_f64(mxp__kernels *k) { simd_register_f64(k); }

/*
 * float16 / bfloat16 -> float8 nearest-even on 16-bit lanes, 32 elements per step: cvt_avx512.c's
 * f16_e5m2_w / f16_e4m3_w / f16_e4m3_tiny (the float16 rules are explained there) on two
 * 16-lane vectors, written for both sources. With a = |h|, D = the dropped mantissa bits (m_src
 * - m_dst: 8 float16 -> e5m2, 7 -> e4m3fn, 5 bfloat16 -> e5m2, 4 -> e4m3fn) and R = the rebias
 * (bias_src - bias_dst) << m_dst (0, 64, 448, 960), a target normal's code is
 *     ((a + 2^(D-1) - 1 + lsb) >> D) - R,   lsb = bit D of a,
 * a carry out of the mantissa moving into the exponent; a source above max finite lands above it
 * (capped: e5m2 at 0x7C, infinity, or 0x7B when saturating; e4m3fn at 0x7F, NaN, or 0x7E), and a
 * NaN becomes the target's quiet NaN with the top payload bits, ((a >> D) & 0x7F) | 2 for e5m2
 * (the reference's rule), 0x7F for e4m3fn. float16 -> e5m2 needs nothing else (the same exponent
 * range); in the other three, a below the target's normal range (2^-6 or 2^-14) takes the step's
 * tiny pass: the code is the value over the target's quantum, nearest-even (f16_f8_tiny16, by
 * VCVTPS2PH; in a step with such a lane, or in every step of a streaming run where they are
 * frequent, f16_f8_step). The composed path these replace widened every block to float32 on
 * the stack: Zen 4, --isa avx2, float16 -> e4m3fn 0.137 ns/element in cache, 0.23 at 2^26;
 * bfloat16 -> e4m3fn 0.165 in cache.
 */
PRIM __m256i f16_f8_w(__m256i h, int e4, int bf, int sat, __m256i *tiny)
{
    const int D = (bf ? 7 : 10) - (e4 ? 3 : 2), R = bf ? (e4 ? 960 : 448) : (e4 ? 64 : 0);
    const int lo = bf ? (e4 ? 121 << 7 : 113 << 7) : 0x2400; /* the target's normal range: a >= lo */
    const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)), hs = _mm256_srli_epi16(h, 8);
    const __m256i nan = _mm256_cmpgt_epi16(a, _mm256_set1_epi16(bf ? 0x7F80 : 0x7C00)); /* a < 2^15: signed is fine */
    const __m256i sign = _mm256_and_si256(hs, _mm256_set1_epi16(0x80));
    const __m256i lsb = _mm256_and_si256(D == 8 ? hs : _mm256_srli_epi16(a, D), _mm256_set1_epi16(1));
    /* the rebias in the rounding add (R << D <= lo): only lanes below lo wrap, and those are tiny */
    const short k = (short)((1 << (D - 1)) - 1 - (R << D));
    __m256i t = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(a, _mm256_set1_epi16(k)), lsb), D);
    if (!e4 || bf) *tiny = _mm256_setzero_si256();
    if (!e4) {
        if (sat || bf) t = _mm256_min_epu16(t, _mm256_set1_epi16(sat ? 0x7B : 0x7C));
        if (bf) *tiny = _mm256_cmpgt_epi16(_mm256_set1_epi16((short)lo), a);
        /* float16: hs already holds the sign, the exponent field and the top payload bits */
        const __m256i nanv = bf ? _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, D), _mm256_set1_epi16(0x7F)), sign)
                                : hs;
        return _mm256_blendv_epi8(_mm256_or_si256(t, sign), _mm256_or_si256(nanv, _mm256_set1_epi16(2)), nan);
    }
    t = _mm256_min_epu16(t, _mm256_set1_epi16(sat ? 0x7E : 0x7F));
    if (sat) t = _mm256_blendv_epi8(t, _mm256_set1_epi16(0x7F), nan);
    *tiny = _mm256_cmpgt_epi16(_mm256_set1_epi16((short)lo), a);
    return _mm256_or_si256(t, sign);
}
/* The float8 codes of the 16 lanes of h below the target's normal range, without the sign (word
 * lanes; the other lanes' words are not codes), by VCVTPS2PH: each dword's two words become two
 * float32 magnitudes scaled so that the target's quantum 2^q (q = -9 for e4m3fn, -16 for e5m2)
 * lands on float16's subnormal quantum 2^-24, and VCVTPS2PH's nearest-even rounding (from its
 * immediate: MXCSR is not read) to a float16 subnormal gives the code as its pattern (at most
 * 2^m, the smallest normal code). A bfloat16 moves up into the float32 fields; the scaling
 * subtracts (24 + q) << 23 from the exponent field after raising every magnitude to at least
 * 2^(q - 2) (they round to 0 either way), so it never wraps and no float32 subnormal arises.
 * A float16 (to e4m3fn only: e5m2 shares its range) goes to bits 13 .. 27 (<< 13 and >> 3,
 * masked: the value times 2^-112) and the exponent field gains 112 - 24 - q; its zeros and
 * subnormals become values below 2^-29, which round to 0 as they should. No step of this raises
 * a floating-point assist or depends on MXCSR. Until session 43 the codes came from the
 * significand shifted right by 32-bit variable shifts, eight lanes at a time (VPSRLVD,
 * VPSLLVD), repacked to words. */
PRIM __m256i f16_f8_tiny16(__m256i h, int e4, int bf)
{
    const int q = e4 ? -9 : -16;
    __m256i ev, od;
    if (bf) {
        const __m256i mg = _mm256_set1_epi32(0x7FFF0000), fl = _mm256_set1_epi32((127 + q - 2) << 23);
        const __m256i sc = _mm256_set1_epi32((24 + q) << 23);
        ev = _mm256_sub_epi32(_mm256_max_epi32(_mm256_and_si256(_mm256_slli_epi32(h, 16), mg), fl), sc);
        od = _mm256_sub_epi32(_mm256_max_epi32(_mm256_and_si256(h, mg), fl), sc);
    } else {
        const __m256i fm = _mm256_set1_epi32(0x0FFFE000), ad = _mm256_set1_epi32((112 - 24 - q) << 23);
        ev = _mm256_add_epi32(_mm256_and_si256(_mm256_slli_epi32(h, 13), fm), ad);
        od = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 3), fm), ad);
    }
    const __m128i ce = _mm256_cvtps_ph(_mm256_castsi256_ps(ev), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i co = _mm256_cvtps_ph(_mm256_castsi256_ps(od), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(ce, co)), _mm_unpackhi_epi16(ce, co), 1);
}
/* t with its tiny lanes (mask z) replaced by their codes, the sign (bit 7 of t) kept */
PRIM __m256i f16_f8_tiny(__m256i h, __m256i t, __m256i z, int e4, int bf)
{
    const __m256i sign = _mm256_and_si256(t, _mm256_set1_epi16(0x80));
    return _mm256_blendv_epi8(t, _mm256_or_si256(f16_f8_tiny16(h, e4, bf), sign), z);
}
/* One step of f16_f8_run, 32 elements at s + 2 i to d + i; 1 when it had a lane below the
 * target's normal range other than +-0. bl = 1: those lanes' codes made without a branch
 * (TINY_RUNS, cvt_simd_impl.h); bl = 0: a branch, and a step whose only such lanes are +-0
 * clears their code bits (their byte is the sign) */
static SIMD_INLINE int f16_f8_step(unsigned char *d, const unsigned char *s, size_t i, int e4, int bf, int sat,
                                   int nt, int pf, int bl)
{
    const __m256i h0 = _mm256_loadu_si256((const __m256i *)(const void *)(s + 2 * i));
    const __m256i h1 = _mm256_loadu_si256((const __m256i *)(const void *)(s + 2 * i + 32));
    if (pf) MXP_SIMD_PREFETCH(s + 2 * i + MXP_SIMD_PREFETCH_DIST);
    __m256i z0, z1;
    __m256i b0 = f16_f8_w(h0, e4, bf, sat, &z0), b1 = f16_f8_w(h1, e4, bf, sat, &z1);
    int tiny = 0;
    if ((e4 || bf) && (bl || !_mm256_testz_si256(_mm256_or_si256(z0, z1), _mm256_or_si256(z0, z1)))) {
        /* whether a lane below the normal range is not +-0: a nonzero magnitude under z0, z1 */
        const __m256i nz = _mm256_or_si256(_mm256_and_si256(z0, h0), _mm256_and_si256(z1, h1));
        tiny = !_mm256_testz_si256(nz, _mm256_set1_epi16(0x7FFF));
        if (bl || tiny) {
            b0 = f16_f8_tiny(h0, b0, z0, e4, bf);
            b1 = f16_f8_tiny(h1, b1, z1, e4, bf);
        } else { /* only +-0 there (ReLU data): the sign alone, bit 7 of b */
            const __m256i c = _mm256_set1_epi16(0x7F);
            b0 = _mm256_andnot_si256(_mm256_and_si256(z0, c), b0);
            b1 = _mm256_andnot_si256(_mm256_and_si256(z1, c), b1);
        }
    }
    const __m256i b = _mm256_permute4x64_epi64(_mm256_packus_epi16(b0, b1), 0xD8); /* element order */
    if (nt) MXP__STREAM256((__m256i *)(void *)(d + i), b);
    else _mm256_storeu_si256((__m256i *)(void *)(d + i), b);
    return tiny;
}
/* TINY_RUNS's runs here: 32 steps of 32 elements (the 1024 elements of cvt_avx512.c's 16 steps of
 * 64), bl = 1 after 7 or more steps with a lane below the normal range (22%; AVX-512: 5 of 16,
 * 31%). Intel Xeon (CPU 4), --isa avx2, 2^26, three alternating runs, medians, ns/element,
 * bf16 / f16 -> e4m3fn, runs of 16 with threshold 5 -> 32 with 5 -> 32 with 7: uniform on
 * [-8, 8] 0.177 / 0.151 -> 0.204 / 0.162 -> 0.159 / 0.153; N(0, 4) 0.186 / 0.166 -> 0.178 /
 * 0.186 -> 0.170 / 0.171; N(0, 1) 0.246 / 0.274 -> 0.225 / 0.227 -> 0.235 / 0.255 (bl = 1
 * always: 0.218 / 0.221). (bench/RESULTS.md, session 43) */
enum { F16F8_RUN = 32, F16F8_BL = 7 };
static SIMD_INLINE size_t f16_f8_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, int e4, int bf,
                                     int sat, int nt)
{
    const int pf = nt && MXP_SIMD_PREFETCH_ON;
    if (!nt || !(e4 || bf)) { /* in cache the branch costs less */
        for (; i + 32 <= n; i += 32) f16_f8_step(d, s, i, e4, bf, sat, nt, pf, 0);
        return i;
    }
#define F16F8_STEP(bl) f16_f8_step(d, s, i, e4, bf, sat, 1, pf, bl)
    TINY_RUNS(i, n, 32, F16F8_RUN, F16F8_BL, F16F8_STEP);
#undef F16F8_STEP
    return i;
}
SIMD_F16_F8(cvt_e4m3_f16__avx2, MXP_FLOAT8_E4M3FN, MXP_FLOAT16)
SIMD_F16_F8(cvt_e5m2_f16__avx2, MXP_FLOAT8_E5M2, MXP_FLOAT16)
SIMD_F16_F8(cvt_e4m3_bf16__avx2, MXP_FLOAT8_E4M3FN, MXP_BFLOAT16)
SIMD_F16_F8(cvt_e5m2_bf16__avx2, MXP_FLOAT8_E5M2, MXP_BFLOAT16)

/*
 * e4m3fn <-> e5m2 nearest-even on 32 bytes at a time (they went through a float32 block,
 * cvt_compose.c: Zen 4, --isa avx2, 0.22-0.23 ns/element in cache). With a = the byte's
 * magnitude (b & 0x7F) and the sign, bit 7, or-ed in at the end:
 *  - e5m2 -> e4m3fn: a value with e5m2 exponent field E >= 9 is an e4m3fn normal with one more
 *    mantissa bit, so its code is a << 1 with the exponent rebiased by 15 - 7: 2a - 64, exact.
 *    From E = 24 (a >= 0x60: above 448, infinity, NaN) 2a - 64 wraps to 0x80 or more, so
 *    min(code, 0x7F) is e4m3fn's NaN, as the reference's overflow rule (with saturation:
 *    min(code, 0x7E) = 448, and NaN, a > 0x7C, set back to 0x7F). Below E = 9 (a < 36) the
 *    value is a multiple of e4m3fn's quantum 2^-9 up to rounding: the codes of a = 20 .. 35 come
 *    from a 16-entry table (VPSHUFB on a - 20), and a < 20 (below 2^-10, half the quantum, or
 *    the tie 2^-10 itself) gives a - 20 with bit 7 set, for which VPSHUFB returns 0.
 *  - e4m3fn -> e5m2: a normal (a >= 8) drops one mantissa bit: (a >> 1) + lsb with the exponent
 *    rebiased by + 8 << 2 = 32, lsb = a & (a >> 1) & 1 (the dropped bit and the kept lsb: ties
 *    to even); every e4m3fn magnitude is far below e5m2's max, so there is no overflow and
 *    saturation changes nothing. The subnormals (a < 8, exact in e5m2) and the NaN (a = 0x7F)
 *    come from the reference's codes.
 * The table entries and the NaN code are filled at registration from the scalar reference
 * (mxp__f8b_init); test_isa checks every byte of both kernels against it.
 */
_Alignas(32) unsigned char mxp__f8b_sub[2][32]; /* kernels.h */
unsigned char mxp__f8b_nan;
/* e5m2_e4m3_b's constants (f8s2_mix keeps them in registers across its calls) */
typedef struct {
    __m256i x7f, x40, sub, x14, x23, top, x7c;
} e54_k;
PRIM e54_k e54_consts(int sat)
{
    e54_k k;
    k.x7f = _mm256_set1_epi8(0x7F);
    k.x40 = _mm256_set1_epi8(64);
    k.sub = _mm256_load_si256((const __m256i *)(const void *)mxp__f8b_sub[0]);
    k.x14 = _mm256_set1_epi8(20);
    k.x23 = _mm256_set1_epi8(35);
    k.top = _mm256_set1_epi8(sat ? 0x7E : 0x7F);
    k.x7c = _mm256_set1_epi8(0x7C);
    return k;
}
PRIM __m256i e5m2_e4m3_bk(__m256i b, int sat, const e54_k *k)
{
    const __m256i a = _mm256_and_si256(b, k->x7f);
    const __m256i nrm = _mm256_sub_epi8(_mm256_add_epi8(a, a), k->x40);
    const __m256i sub = _mm256_shuffle_epi8(k->sub, _mm256_sub_epi8(a, k->x14));
    __m256i r = _mm256_blendv_epi8(sub, nrm, _mm256_cmpgt_epi8(a, k->x23));
    r = _mm256_min_epu8(r, k->top);
    if (sat) r = _mm256_blendv_epi8(r, k->x7f, _mm256_cmpgt_epi8(a, k->x7c));
    return _mm256_or_si256(r, _mm256_andnot_si256(k->x7f, b));
}
PRIM __m256i e5m2_e4m3_b(__m256i b, int sat)
{
    const e54_k k = e54_consts(sat);
    return e5m2_e4m3_bk(b, sat, &k);
}
PRIM __m256i e4m3_e5m2_b(__m256i b)
{
    const __m256i a = _mm256_and_si256(b, _mm256_set1_epi8(0x7F));
    /* a >> 1 per byte: a's bit 7 is 0, so the word shift brings in only the next byte's bit 0 */
    const __m256i h = _mm256_and_si256(_mm256_srli_epi16(a, 1), _mm256_set1_epi8(0x7F));
    const __m256i lsb = _mm256_and_si256(_mm256_and_si256(a, h), _mm256_set1_epi8(1));
    const __m256i nrm = _mm256_add_epi8(_mm256_add_epi8(h, _mm256_set1_epi8(32)), lsb);
    const __m256i sub = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)(const void *)mxp__f8b_sub[1]), a);
    __m256i r = _mm256_blendv_epi8(nrm, sub, _mm256_cmpgt_epi8(_mm256_set1_epi8(8), a));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi8((char)mxp__f8b_nan), _mm256_cmpeq_epi8(a, _mm256_set1_epi8(0x7F)));
    return _mm256_or_si256(r, _mm256_andnot_si256(_mm256_set1_epi8(0x7F), b));
}
/* e4: e5m2 -> e4m3fn (else e4m3fn -> e5m2); nt: streaming stores, d + i 32-byte aligned */
static SIMD_INLINE size_t f8b_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, int e4, int sat,
                                  int nt)
{
    for (; i + 32 <= n; i += 32) {
        if (nt) avx2_pf_far(s + i);
        const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        const __m256i r = e4 ? e5m2_e4m3_b(b, sat) : e4m3_e5m2_b(b);
        if (nt) MXP__STREAM256((__m256i *)(void *)(d + i), r);
        else _mm256_storeu_si256((__m256i *)(void *)(d + i), r);
    }
    return i;
}
static SIMD_INLINE void f8b_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, int e4)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    const mxp_dtype to = e4 ? MXP_FLOAT8_E4M3FN : MXP_FLOAT8_E5M2, from = e4 ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN;
    const int sat = e4 && a->saturate;
    int nt;
    size_t i = pair_head(d, s, n, a, to, from, 1, 1, 32, &nt); /* the streaming stores: 32-byte aligned */
    if (sat) i = nt ? f8b_run(d, s, i, n, e4, 1, 1) : f8b_run(d, s, i, n, e4, 1, 0);
    else i = nt ? f8b_run(d, s, i, n, e4, 0, 1) : f8b_run(d, s, i, n, e4, 0, 0);
    pair_done(d, s, i, n, a, to, from, 1, 1, nt);
}
static void cvt_e4m3_e5m2__avx2(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    f8b_loop(dst, src, n, a, 1);
}
static void cvt_e5m2_e4m3__avx2(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    f8b_loop(dst, src, n, a, 0);
}
void mxp__f8b_init(void)
{
    /* the reference's kernels from a table of our own (mxp__scalar_kernels() would wait for the
     * dispatcher's initialisation, which is what calls this) */
    static mxp__kernels ref;
    mxp__cvt_register_scalar(&ref);
    const mxp__cvt_args args = {false, 0, 0, false};
    unsigned char in[32], out[32];
    for (int j = 0; j < 32; j++) in[j] = (unsigned char)(20 + j % 16);
    ref.cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT8_E5M2][MXP__RNE](mxp__f8b_sub[0], in, 32, &args);
    for (int j = 0; j < 32; j++) in[j] = (unsigned char)(j % 16 < 8 ? j % 16 : 0x7F);
    ref.cvt[MXP_FLOAT8_E5M2][MXP_FLOAT8_E4M3FN][MXP__RNE](out, in, 32, &args);
    memcpy(mxp__f8b_sub[1], out, 32);
    mxp__f8b_nan = out[8];
}

/*
 * e4m3fn <-> e5m2 stochastic rounding on 32 bytes at a time (it went through a float32 block,
 * cvt_compose.c). The rule is cvt_avx512.c's byte-table one (kernels.h's mxp__f8s_fill): a
 * magnitude a rounds up iff the top byte of its random word exceeds 255 - F, F / 256 its dropped
 * fraction. AVX2 has no 128-entry byte lookup, so each direction uses the shape of its tables,
 * checked at registration against them (f8s2_init; no kernel is registered where it differs):
 *  - e4m3fn -> e5m2: F is 0 or 128. A normal a drops one mantissa bit, as in e4m3_e5m2_b, and
 *    rounds up iff that bit and the element's random bit are both set: (a >> 1) + 32 + (a & r
 *    & 1). The subnormals (exact) and the NaN come from e4m3_e5m2_b's table and code. Since
 *    session 48 the random bit is bit i % 32 of the word of index i / 32 (f8b2_steps); before,
 *    the top bit of a random byte.
 *  - e5m2 -> e4m3fn: only a < 32 (below 2^-7) drops bits; the others are exact or overflow.
 *    For a < 48 both table rows come from three VPSHUFB on 16 entries each, xor-ed:
 *    row[a] = t0[a & 15] ^ t1[(a - 16) & 15] ^ t2[(a - 32) & 15], a lookup whose index a - 16 or
 *    a - 32 is negative (bit 7 set) giving 0, with t1 = rows 16 .. 31 ^ rows 0 .. 15 and t2 =
 *    rows 32 .. 47 ^ rows 16 .. 31 (for a >= 32, g = 255: never up). From a = 48, e5m2_e4m3_b's
 *    normal code 2a - 64 with its overflow rule. 255 - F is kept xor 0x80, so a signed byte
 *    compare with the random byte xor 0x80 is the unsigned one. (Until session 46 two lookups
 *    covered a < 32 and the whole of e5m2_e4m3_b ran beside them, with its own lookup for a =
 *    20 .. 35: the same Intel Xeon, in cache, 0.128 -> 0.112 ns/element.)
 * e5m2 -> e4m3fn's random bytes: element i's is byte i % 4 of the word of index i / 4
 * (kernels.h's mxp__sr_bits_src), so one vector of 8 hashed words is the 32 elements' bytes in order. Until
 * session 46 each element had a word of its own: four vectors of 8 words (sr_words_hi) per 32
 * elements, their top bytes gathered by two packs (e4m3fn -> e5m2) or four VPSHUFB (e5m2 ->
 * e4m3fn) from Weyl states laid out for it. dn's lo16 row is all zeros (e5m2
 * magnitudes below 16 are under an eighth of e4m3fn's quantum), so leaving it out of the second
 * lookup's entries is an equivalent mutation, which the tests cannot catch; g's row is not zero.
 * Intel Xeon (CPU 4 of bench/RESULTS.md), --isa avx2, one thread, medians of three alternating
 * runs, ns/element in cache / at 2^26, composed -> these: e4m3fn -> e5m2 0.370 / 0.501 -> 0.192
 * / 0.203, e5m2 -> e4m3fn 0.339 / 0.459 -> 0.220 / 0.241 (nearest-even: 0.053 / 0.085 and
 * 0.038 / 0.082). Both stayed 2.4-3x nearest-even at 2^26: the hash (two VPMULLD per 8 words)
 * was most of the in-cache time. With a quarter of the hashes and, e5m2 -> e4m3fn, the three
 * lookups (session 46): e4m3fn -> e5m2 0.193 / 0.285 -> 0.099 / 0.181, e5m2 -> e4m3fn 0.224 /
 * 0.297 -> 0.112 / 0.192 (nearest-even 0.053 / 0.149 and 0.038 / 0.108: 1.2x and 1.8x at 2^26;
 * the far prefetch alone instead of the L2 + L1 pair: a tie).
 * e5m2 -> e4m3fn since session 47: a step none of whose lanes drops bits (every magnitude 0 or
 * >= 32, f8s2_exact) is nearest-even's, e5m2_e4m3_b, with no random bytes; the words are
 * counters, so skipping some changes no other's. The runs of such steps and of the others each
 * had a loop in a function of its own (until session 52; in one loop gcc 12 rebuilt the
 * constants in every step, MOV + VMOVD + VPBROADCASTB, six per step, on the shuffles' port), and
 * where a chunk of 64 steps is broken into more than 4 runs (8 since session 48), or more than
 * half its steps have random bytes, the next 8 chunks hash every step without looking
 * (mispredicted branches cost more than the nearest-even steps save there). Same CPU, medians of five alternating runs,
 * ns/element in cache / at 2^26: uniform data over [-8, 8] (1 step in 30 rounds) 0.112 / 0.149
 * -> 0.079 / 0.114 (nearest-even 0.038 / 0.086-0.088: 1.3x), ReLU data 0.112 / 0.147 -> 0.062 /
 * 0.095, N(0, 1) (a step in 5) 0.112 / 0.150 -> 0.116 / 0.155, N(0, 10^-4) (every step) 0.118 /
 * 0.152 -> 0.123 / 0.160 (every ninth chunk tries the split again).
 * Session 48: more than 8 runs instead of 4. A chunk of uniform data has about 2 runs; if they
 * come as a Poisson count, about 4% of chunks have more than 4 and each sent the next 8 chunks to
 * hashing every step, about a quarter of all chunks (perf: 38% of the in-cache time in the loop
 * that hashes every step). Five alternating runs, in cache / at 2^26: uniform 0.080 / 0.111 ->
 * 0.066 / 0.101, ReLU 0.062 / 0.094 -> 0.062 / 0.096, N(0, 1) 0.121 / 0.156 -> 0.121 / 0.158,
 * N(0, 10^-4) 0.120 / 0.155 -> 0.120 / 0.153. In three runs, 12 or 16 made N(0, 1) at 2^26
 * slower (0.174 / 0.187).
 * Session 52: one loop (f8s2_mix) takes the exact steps and calls f8s2_one for each of the others,
 * instead of leaving for a loop of the others, which then left again at the next exact step: one
 * mispredicted branch per such step instead of two, which out of cache wait for their loads. Its
 * constants are pinned, since after the call gcc rebuilt three of them in every step. AMD Zen 4,
 * uniform data, bench_convert --isa avx2, the builds before and after alternating, medians of
 * seven runs (a noisy machine, its in-cache times bimodal): in cache 0.047 -> 0.054 (the best
 * runs 0.046 -> 0.040), at 2^26 0.085 -> 0.075 (nearest-even 0.050-0.058); a timing driver, 2001
 * calls in cache, six runs: 0.046 -> 0.040; ReLU data 0.043 / 0.067 -> 0.038 / 0.065; N(0, 1)
 * (mostly the chunks that hash every step) 0.088 / 0.125 -> 0.099 / 0.117, two runs, within the
 * noise.
 * e4m3fn -> e5m2 since session 48: a bit per element, one hashed vector per 8 steps (f8b2_steps).
 * Same CPU, medians of five alternating runs, ns/element in cache / at 2^26: 0.098 / 0.119 ->
 * 0.076 / 0.093 (nearest-even 0.053 / 0.083-0.086: 1.44x / 1.1x, was 1.85x / 1.4x).
 */
/* e5m2 -> e4m3fn: dn rows 0 .. 15, rows 16 .. 31 ^ rows 0 .. 15, rows 32 .. 47 ^ rows 16 .. 31;
 * g ^ 0x80 likewise */
static _Alignas(32) unsigned char f8s2_lut[6][32];
static int f8s2_ok[2]; /* [e4]: the shape checked (f8s2_init) */
/* e4m3fn -> e5m2; rbit: per lane nonzero where its random bit is 1 */
PRIM V f8s2_e5m2(V b, V rbit)
{
    const V a = _mm256_and_si256(b, _mm256_set1_epi8(0x7F));
    const V h = _mm256_and_si256(_mm256_srli_epi16(a, 1), _mm256_set1_epi8(0x7F));
    /* the dropped bit (a's last) where the random bit is 1 */
    const V up = _mm256_and_si256(a, _mm256_min_epu8(rbit, _mm256_set1_epi8(1)));
    const V nrm = _mm256_add_epi8(_mm256_add_epi8(h, _mm256_set1_epi8(32)), up);
    const V sub = _mm256_shuffle_epi8(_mm256_load_si256((const V *)(const void *)mxp__f8b_sub[1]), a);
    V r = _mm256_blendv_epi8(nrm, sub, _mm256_cmpgt_epi8(_mm256_set1_epi8(8), a));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi8((char)mxp__f8b_nan), _mm256_cmpeq_epi8(a, _mm256_set1_epi8(0x7F)));
    return _mm256_or_si256(r, _mm256_andnot_si256(_mm256_set1_epi8(0x7F), b));
}
/* e5m2 -> e4m3fn: whether no lane of b drops bits (every magnitude a is 0 or >= 32: a - 1, as
 * an unsigned byte, above 30), so the step is nearest-even's */
PRIM int f8s2_exact(V b, V x7f, V x1e)
{
    const V am1 = _mm256_add_epi8(_mm256_and_si256(b, x7f), _mm256_cmpeq_epi8(b, b));
    const V drops = _mm256_cmpeq_epi8(_mm256_min_epu8(am1, x1e), am1);
    return _mm256_testz_si256(drops, drops);
}
/* f8s2_e4m3's constants, each made opaque (MXP_SIMD_PIN) once per run: gcc 12 otherwise rebuilt
 * them in the loop from general registers (MOV, VMOVD, VPBROADCASTB: six of each per step, on
 * the shuffles' port) and spilled the loaded tables; a constant it cannot see is instead kept in
 * a register or reloaded from the stack */
typedef struct {
    V t[6], x7f, x10, x80, x40, top, x30, x7c, x1e;
} f8s2_k;
static SIMD_INLINE f8s2_k f8s2_consts(int sat)
{
    f8s2_k k;
    for (int j = 0; j < 6; j++) {
        k.t[j] = _mm256_load_si256((const V *)(const void *)f8s2_lut[j]);
        MXP_SIMD_PIN(k.t[j]);
    }
    k.x7f = _mm256_set1_epi8(0x7F);
    k.x10 = _mm256_set1_epi8(16);
    k.x80 = _mm256_set1_epi8((char)0x80);
    k.x40 = _mm256_set1_epi8(64);
    k.top = _mm256_set1_epi8(sat ? 0x7E : 0x7F);
    k.x30 = _mm256_set1_epi8(48);
    k.x7c = _mm256_set1_epi8(0x7C);
    k.x1e = _mm256_set1_epi8(30);
    MXP_SIMD_PIN(k.x7f);
    MXP_SIMD_PIN(k.x10);
    MXP_SIMD_PIN(k.x80);
    MXP_SIMD_PIN(k.x40);
    MXP_SIMD_PIN(k.top);
    MXP_SIMD_PIN(k.x30);
    MXP_SIMD_PIN(k.x7c);
    MXP_SIMD_PIN(k.x1e);
    return k;
}
/* rx: the random bytes xor 0x80 */
PRIM V f8s2_e4m3(V b, V rx, int sat, const f8s2_k *k)
{
    const V a = _mm256_and_si256(b, k->x7f);
    const V a16 = _mm256_sub_epi8(a, k->x10), a32 = _mm256_sub_epi8(a16, k->x10);
    const V dn = _mm256_xor_si256(_mm256_xor_si256(_mm256_shuffle_epi8(k->t[0], a), _mm256_shuffle_epi8(k->t[1], a16)),
                                  _mm256_shuffle_epi8(k->t[2], a32));
    const V gx = _mm256_xor_si256(_mm256_xor_si256(_mm256_shuffle_epi8(k->t[3], a), _mm256_shuffle_epi8(k->t[4], a16)),
                                  _mm256_shuffle_epi8(k->t[5], a32));
    /* dn + up (up is -1 where rx > gx) below 48; above, e5m2_e4m3_b's normal code 2a - 64 with its
     * overflow rule */
    const V q = _mm256_sub_epi8(dn, _mm256_cmpgt_epi8(rx, gx));
    V nrm = _mm256_min_epu8(_mm256_sub_epi8(_mm256_add_epi8(a, a), k->x40), k->top);
    if (sat) nrm = _mm256_blendv_epi8(nrm, k->x7f, _mm256_cmpgt_epi8(a, k->x7c));
    const V r = _mm256_blendv_epi8(nrm, q, _mm256_cmpgt_epi8(k->x30, a));
    return _mm256_or_si256(r, _mm256_andnot_si256(k->x7f, b));
}
/* e5m2 -> e4m3fn, elements i .. end (multiples of 32 apart), one block of 2^32 indices (key;
 * element i's word index w, element i a word's first byte), every step with its random bytes */
static SIMD_INLINE void f8s2_steps(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t w,
                                   uint64_t key, int sat, int nt)
{
    const V khi = v_set1((uint32_t)(key >> 32)), step = v_set1(8u * MXP__SR_W);
    const V m1 = v_set1(MXP__SR_M1), m2 = v_set1(MXP__SR_M2);
    /* the Weyl states of words w .. w + 7 */
    V x = v_add(v_set1(w * MXP__SR_W + (uint32_t)key), v_mullo(v_iota(), v_set1(MXP__SR_W)));
    const f8s2_k k = f8s2_consts(sat);
    for (; i < end; i += 32) {
        if (nt) avx2_pf_line(s + i + MXP_SIMD_PREFETCH_DIST);
        const V b = _mm256_loadu_si256((const V *)(const void *)(s + i));
        /* the 32 elements' random bytes, xor 0x80 */
        const V rx = _mm256_xor_si256(sr_finish(sr_words_hi(x, khi, m1, m2)), k.x80);
        x = v_add(x, step);
        const V o = f8s2_e4m3(b, rx, sat, &k);
        if (nt) MXP__STREAM256((V *)(void *)(d + i), o);
        else _mm256_storeu_si256((V *)(void *)(d + i), o);
    }
}
/* e4m3fn -> e5m2 since session 48, elements i .. end (multiples of 32 apart), one block of 2^32
 * indices (key; element i's word index w, element i a word's first bit). The target drops at most
 * one bit, so an element draws one random bit, bit i % 32 of the word of index i / 32 (kernels.h's
 * mxp__sr_bits_src): a step of 32 takes one word, and one hashed vector of 8 words serves 8
 * steps. The word, broadcast, goes to the lanes by VPSHUFB (byte j / 8 to lane j), and lane j
 * keeps bit j % 8. Until then an element drew a byte (of which the rule used the top bit), and
 * every step hashed 8 words. */
static SIMD_INLINE void f8b2_steps(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t w,
                                   uint64_t key, int nt)
{
    const V khi = v_set1((uint32_t)(key >> 32)), step = v_set1(8u * MXP__SR_W);
    const V m1 = v_set1(MXP__SR_M1), m2 = v_set1(MXP__SR_M2);
    const V spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                      3, 3, 3, 3, 3, 3);
    const V sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    /* the Weyl states of words w .. w + 7 */
    V x = v_add(v_set1(w * MXP__SR_W + (uint32_t)key), v_mullo(v_iota(), v_set1(MXP__SR_W)));
    _Alignas(32) uint32_t rw[8]; /* the bits of 8 steps, a word each */
    while (i < end) {
        _mm256_store_si256((V *)(void *)rw, sr_finish(sr_words_hi(x, khi, m1, m2)));
        x = v_add(x, step);
        const size_t e8 = end - i > 8 * 32 ? i + 8 * 32 : end;
        for (const uint32_t *r = rw; i < e8; i += 32, r++) {
            if (nt) avx2_pf_line(s + i + MXP_SIMD_PREFETCH_DIST);
            const V b = _mm256_loadu_si256((const V *)(const void *)(s + i));
            const V rbit = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)*r), spread), sel);
            const V o = f8s2_e5m2(b, rbit);
            if (nt) MXP__STREAM256((V *)(void *)(d + i), o);
            else _mm256_storeu_si256((V *)(void *)(d + i), o);
        }
    }
}
/* One step of e5m2 -> e4m3fn with its random bytes (f8s2_steps), out of line: f8s2_mix's steps
 * whose lanes drop bits */
static __attribute__((noinline)) void f8s2_one(const sr_split_ctx *c, size_t i, int sat, int nt)
{
    f8s2_steps(c->d, c->s, i, i + 32, sr_split_word(c, i), c->key, sat, nt);
}
/* e5m2 -> e4m3fn, elements i .. end: a step none of whose lanes drops bits by nearest-even's
 * e5m2_e4m3_b, the others by f8s2_one (counted in *nx) */
static SIMD_INLINE void f8s2_mix(const sr_split_ctx *c, size_t i, size_t end, int sat, int nt, unsigned *nx)
{
    unsigned char *d = c->d;
    const unsigned char *s = c->s;
    /* opaque (MXP_SIMD_PIN): gcc otherwise rebuilt three of them in every step */
    e54_k k = e54_consts(sat);
    V x1e = _mm256_set1_epi8(30);
    MXP_SIMD_PIN(k.x7f);
    MXP_SIMD_PIN(k.x40);
    MXP_SIMD_PIN(k.sub);
    MXP_SIMD_PIN(k.x14);
    MXP_SIMD_PIN(k.x23);
    MXP_SIMD_PIN(k.top);
    MXP_SIMD_PIN(k.x7c);
    MXP_SIMD_PIN(x1e);
    unsigned n = 0;
    for (; i < end; i += 32) {
        if (nt) avx2_pf_line(s + i + MXP_SIMD_PREFETCH_DIST);
        const V b = _mm256_loadu_si256((const V *)(const void *)(s + i));
        if (!f8s2_exact(b, k.x7f, x1e)) {
            f8s2_one(c, i, sat, nt);
            n++;
            continue;
        }
        const V o = e5m2_e4m3_bk(b, sat, &k);
        if (nt) MXP__STREAM256((V *)(void *)(d + i), o);
        else _mm256_storeu_si256((V *)(void *)(d + i), o);
    }
    *nx = n;
}
/* f8s2_run's chunks, each loop a function of its own so that the compiler keeps its constants in
 * registers (in one function, gcc 12 spilled and rebuilt them) */
#define F8S2_CB(sat, nt)                                                                                   \
    static __attribute__((noinline)) void f8s2_mix_cb##sat##nt(const sr_split_ctx *c, size_t i, size_t end, \
                                                               unsigned *nx)                               \
    {                                                                                                      \
        f8s2_mix(c, i, end, sat, nt, nx);                                                                  \
    }                                                                                                      \
    static __attribute__((noinline)) void f8s2_all_cb##sat##nt(const sr_split_ctx *c, size_t i, size_t end) \
    {                                                                                                      \
        f8s2_steps(c->d, c->s, i, end, sr_split_word(c, i), c->key, sat, nt);                              \
    }
F8S2_CB(0, 0)
F8S2_CB(0, 1)
F8S2_CB(1, 0)
F8S2_CB(1, 1)
#undef F8S2_CB
/* e5m2 -> e4m3fn in chunks of 64 steps: f8s2_mix, and after a chunk with more than 8 steps that
 * drop bits, the next 8 chunks by f8s2_steps alone (every step hashed, no branch) */
static SIMD_INLINE void f8s2_chunks(const sr_split_ctx *c, size_t i, size_t end,
                                    void (*mix)(const sr_split_ctx *, size_t, size_t, unsigned *),
                                    void (*all)(const sr_split_ctx *, size_t, size_t))
{
    unsigned dense = 0;
    while (i < end) {
        const size_t ce = end - i > 64 * 32 ? i + 64 * 32 : end;
        if (dense) {
            all(c, i, ce);
            dense--;
        } else {
            unsigned nx = 0;
            mix(c, i, ce, &nx);
            if (nx > 8) dense = 8;
        }
        i = ce;
    }
}
/* elements i .. end (multiples of 32 apart), one block of 2^32 indices (key; element i's low
 * index half lo, a multiple of 4, of 32 from e4m3fn); e4: to e4m3fn */
static SIMD_INLINE void f8s2_run(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t lo,
                                 uint64_t key, int e4, int sat, int nt)
{
    if (!e4) {
        f8b2_steps(d, s, i, end, lo >> 5, key, nt);
        return;
    }
    /* e5m2 -> e4m3fn: the steps in which no lane drops bits are nearest-even's and need no random
     * bytes (f8s2_chunks; after a chunk of 64 steps with more than 8 of the others, the next 8
     * chunks hash every step) */
    const sr_split_ctx c = {d, s, i, lo, key, NULL};
    if (sat) {
        if (nt) f8s2_chunks(&c, i, end, f8s2_mix_cb11, f8s2_all_cb11);
        else f8s2_chunks(&c, i, end, f8s2_mix_cb10, f8s2_all_cb10);
    } else {
        if (nt) f8s2_chunks(&c, i, end, f8s2_mix_cb01, f8s2_all_cb01);
        else f8s2_chunks(&c, i, end, f8s2_mix_cb00, f8s2_all_cb00);
    }
}
static SIMD_INLINE void f8s2_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, int e4)
{
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *d = (unsigned char *)dst;
    const mxp_dtype to = e4 ? MXP_FLOAT8_E4M3FN : MXP_FLOAT8_E5M2, from = e4 ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN;
    const int sat = e4 && a->saturate;
    int nt;
    /* steps start at a word's first byte (e5m2: indices that are multiples of 4) or bit (e4m3fn:
     * of 32); streaming: 32-byte stores */
    size_t i = sr_start(a->index0, d, n, 1, 32, e4 ? 4 : 32, n >= 64 && (n * 2 >= MXP_SIMD_NT_THRESHOLD || a->stream),
                        &nt);
    scalar_tail(to, from, MXP__SR, d, s, i, a, a->index0);
    while (i + 32 <= n) {
        uint32_t lo = 0;
        uint64_t key = 0;
        const size_t end = sr_block(i, n, a->index0, a->seed, 32, &lo, &key);
        if (end == i) {
            /* the straddling step by the reference (a whole step: d stays aligned) */
            scalar_tail(to, from, MXP__SR, d + i, s + i, 32, a, a->index0 + i);
            i += 32;
            continue;
        }
        if (!e4) {
            if (nt) f8s2_run(d, s, i, end, lo, key, 0, 0, 1);
            else f8s2_run(d, s, i, end, lo, key, 0, 0, 0);
        } else if (sat) {
            if (nt) f8s2_run(d, s, i, end, lo, key, 1, 1, 1);
            else f8s2_run(d, s, i, end, lo, key, 1, 1, 0);
        } else {
            if (nt) f8s2_run(d, s, i, end, lo, key, 1, 0, 1);
            else f8s2_run(d, s, i, end, lo, key, 1, 0, 0);
        }
        i = end;
    }
    if (nt && !a->stream) _mm_sfence(); /* a->stream: the caller fences */
    scalar_tail(to, from, MXP__SR, d + i, s + i, n - i, a, a->index0 + i);
}
static void cvt_e5m2_e4m3_sr__avx2(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    f8s2_loop(dst, src, n, a, 0);
}
static void cvt_e4m3_e5m2_sr__avx2(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    f8s2_loop(dst, src, n, a, 1);
}
/* The tables from the reference (mxp__f8s_fill), their shape checked against what the kernels
 * assume (f8s2_ok); after mxp__f8b_init */
static void f8s2_init(const mxp__kernels *ref)
{
    static unsigned char tab[MXP__F8S_N][2][128];
    int ok = mxp__f8s_fill(ref, MXP__F8S_E4M3_E5M2, tab[MXP__F8S_E4M3_E5M2]);
    for (int m = 0; ok && m < 128; m++) {
        const unsigned char *t0 = tab[MXP__F8S_E4M3_E5M2][0], *t1 = tab[MXP__F8S_E4M3_E5M2][1];
        if (m >= 8 && m != 0x7F) ok = t0[m] == (m >> 1) + 32 && t1[m] == (m & 1 ? 127 : 255);
        else ok = t1[m] == 255 && t0[m] == (m == 0x7F ? mxp__f8b_nan : mxp__f8b_sub[1][m]);
    }
    f8s2_ok[0] = ok;
    ok = mxp__f8s_fill(ref, MXP__F8S_E5M2_E4M3, tab[MXP__F8S_E5M2_E4M3]) &&
         mxp__f8s_fill(ref, MXP__F8S_E5M2_E4M3_SAT, tab[MXP__F8S_E5M2_E4M3_SAT]);
    /* a >= 32: nothing dropped, and the code is e5m2_e4m3_b's (nearest-even, exact or overflow);
     * a < 32: the same rows with and without saturation */
    unsigned char ne[2][128];
    for (int sat = 0; ok && sat < 2; sat++) {
        _Alignas(32) unsigned char in[128];
        for (int m = 0; m < 128; m++) in[m] = (unsigned char)m;
        for (int j = 0; j < 128; j += 32)
            _mm256_storeu_si256((V *)(void *)(ne[sat] + j),
                                e5m2_e4m3_b(_mm256_load_si256((const V *)(const void *)(in + j)), sat));
        unsigned char(*t)[128] = tab[sat ? MXP__F8S_E5M2_E4M3_SAT : MXP__F8S_E5M2_E4M3];
        for (int m = 0; ok && m < 128; m++) {
            if (m >= 32) ok = t[1][m] == 255 && t[0][m] == ne[sat][m];
            else ok = t[0][m] == tab[MXP__F8S_E5M2_E4M3][0][m] && t[1][m] == tab[MXP__F8S_E5M2_E4M3][1][m];
        }
    }
    for (int j = 0; ok && j < 32; j++) {
        const unsigned char *dn = tab[MXP__F8S_E5M2_E4M3][0], *g = tab[MXP__F8S_E5M2_E4M3][1];
        const int m = j % 16;
        f8s2_lut[0][j] = dn[m];
        f8s2_lut[1][j] = (unsigned char)(dn[m] ^ dn[m + 16]);
        f8s2_lut[2][j] = (unsigned char)(dn[m + 16] ^ dn[m + 32]);
        f8s2_lut[3][j] = (unsigned char)(g[m] ^ 0x80);
        f8s2_lut[4][j] = (unsigned char)(g[m] ^ g[m + 16]);
        f8s2_lut[5][j] = (unsigned char)(g[m + 16] ^ g[m + 32]);
    }
    f8s2_ok[1] = ok;
}

/*
 * float8 -> float16 / bfloat16 on 32 bytes at a time, each result built as its two bytes (the
 * generic step, cvt_simd_impl.h's to16_loop, widened through VCVTPH2PS to float32 and narrowed
 * back: Zen 4, --isa avx2, e4m3fn -> bfloat16 0.104 ns/element in cache). Every float8 value is
 * exact in both targets. For a normal float8 magnitude a (b & 0x7F, exponent field >= 1, not
 * infinity or NaN) the result is a shifted left by k = m16 - m8 (the mantissas aligned) plus the
 * rebias (bias16 - bias8) << m16, whose low byte is 0:
 *     high byte = (a >> (8 - k)) + rebias >> 8,   low byte = (a << k) & 0xFF
 * (k = 4 e4m3fn -> bfloat16, 7 e4m3fn -> float16, 5 e5m2 -> bfloat16, 8 e5m2 -> float16, where
 * this also holds for the subnormals: e5m2 is float16's top byte). The other float8 subnormals
 * (a < 8 or < 4) and the specials (e4m3fn's NaN 0x7F; e5m2's infinity and
 * NaNs, a >= 0x7C, with saturation: infinity -> max) come from 16-entry VPSHUFB tables of the
 * reference's results, one per byte plane; the sign (bit 7) goes to bit 15. VPUNPCKLBW /
 * VPUNPCKHBW interleave the planes into words and two VPERM2I128 put them in element order.
 * Stochastic rounding takes the same kernel (nothing rounds). The tables are filled at
 * registration (f8h_init); test_isa checks every byte of every kind against the reference.
 */
/* 32 16-bit results at p (32-byte aligned when nt: streaming) */
PRIM void st_words2(unsigned char *p, __m256i r0, __m256i r1, int nt)
{
    if (nt) {
        MXP__STREAM256((__m256i *)(void *)p, r0);
        MXP__STREAM256((__m256i *)(void *)(p + 32), r1);
    } else {
        _mm256_storeu_si256((__m256i *)(void *)p, r0);
        _mm256_storeu_si256((__m256i *)(void *)(p + 32), r1);
    }
}
enum { F8H_E4M3_F16, F8H_E4M3_BF16, F8H_E5M2_F16, F8H_E5M2_F16_SAT, F8H_E5M2_BF16, F8H_E5M2_BF16_SAT, F8H_N };
/* per kind, four 32-byte vectors (the 16 entries twice): small low / high byte plane, then
 * special low / high */
static __m256i f8h_tab[F8H_N][4];
PRIM void f8h_step(unsigned char *p, __m256i b, const __m256i *tab, int k, int small, int special,
                   int nt)
{
    const __m256i a = _mm256_and_si256(b, _mm256_set1_epi8(0x7F));
    const int rebias_hi = k == 4 ? 0x3C : k == 7 ? 0x20 : k == 5 ? 0x38 : 0;
    __m256i hi = _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(a, 8 - k), _mm256_set1_epi8((char)(0xFF >> (8 - k)))),
                                 _mm256_set1_epi8((char)rebias_hi));
    __m256i lo = _mm256_and_si256(_mm256_slli_epi16(a, k), _mm256_set1_epi8((char)(0xFF << k & 0xFF)));
    if (k != 8) { /* e5m2 -> float16 (k = 8) keeps its subnormals: the formula gives them */
        const __m256i sm = _mm256_cmpgt_epi8(_mm256_set1_epi8((char)small), a);
        lo = _mm256_blendv_epi8(lo, _mm256_shuffle_epi8(tab[0], a), sm);
        hi = _mm256_blendv_epi8(hi, _mm256_shuffle_epi8(tab[1], a), sm);
    }
    /* a - special: below 0 (bit 7 set) for the other bytes, where the lookup gives 0 */
    const __m256i si = _mm256_sub_epi8(a, _mm256_set1_epi8((char)special));
    const __m256i sp = _mm256_cmpgt_epi8(a, _mm256_set1_epi8((char)(special - 1)));
    lo = _mm256_blendv_epi8(lo, _mm256_shuffle_epi8(tab[2], si), sp);
    hi = _mm256_blendv_epi8(hi, _mm256_shuffle_epi8(tab[3], si), sp);
    hi = _mm256_or_si256(hi, _mm256_andnot_si256(_mm256_set1_epi8(0x7F), b));
    const __m256i w0 = _mm256_unpacklo_epi8(lo, hi), w1 = _mm256_unpackhi_epi8(lo, hi); /* [0-7 16-23], [8-15 24-31] */
    const __m256i r0 = _mm256_permute2x128_si256(w0, w1, 0x20), r1 = _mm256_permute2x128_si256(w0, w1, 0x31);
    st_words2(p, r0, r1, nt);
}
static SIMD_INLINE size_t f8h_run(unsigned char *d, const unsigned char *s, size_t i, size_t n,
                                  const __m256i *tab, int k, int small, int special, int nt)
{
    for (; i + 32 <= n; i += 32) {
        if (nt) avx2_pf_far(s + i);
        f8h_step(d + 2 * i, _mm256_loadu_si256((const __m256i *)(const void *)(s + i)), tab, k, small, special, nt);
    }
    return i;
}
/* kind: the one without saturation (the saturating one follows those with an infinity) */
static SIMD_INLINE void f8h_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, int kind)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    const int e5 = kind >= F8H_E5M2_F16, bf = kind == F8H_E4M3_BF16 || kind == F8H_E5M2_BF16;
    const mxp_dtype to = bf ? MXP_BFLOAT16 : MXP_FLOAT16, from = e5 ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN;
    const __m256i *tab = f8h_tab[kind + (e5 && a->saturate)];
    const int k = (bf ? 7 : 10) - (e5 ? 2 : 3), small = e5 ? 4 : 8, special = e5 ? 0x7C : 0x7F;
    int nt; /* the streaming stores: 32-byte aligned, two per step */
    size_t i = pair_head(d, s, n, a, to, from, 1, 2, 64, &nt);
    i = nt ? f8h_run(d, s, i, n, tab, k, small, special, 1) : f8h_run(d, s, i, n, tab, k, small, special, 0);
    pair_done(d, s, i, n, a, to, from, 1, 2, nt);
}
#define F8H(name, kind)                                                                        \
    static void name(void *dst, const void *src, size_t n, const mxp__cvt_args *a)             \
    {                                                                                          \
        f8h_loop(dst, src, n, a, kind);                                                        \
    }
F8H(cvt_f16_e4m3_b__avx2, F8H_E4M3_F16)
F8H(cvt_bf16_e4m3_b__avx2, F8H_E4M3_BF16)
F8H(cvt_f16_e5m2_b__avx2, F8H_E5M2_F16)
F8H(cvt_bf16_e5m2_b__avx2, F8H_E5M2_BF16)
static void f8h_init(const mxp__kernels *ref)
{
    for (int kind = 0; kind < F8H_N; kind++) {
        const int e5 = kind >= F8H_E5M2_F16, bf = kind == F8H_E4M3_BF16 || kind == F8H_E5M2_BF16 ||
                                                   kind == F8H_E5M2_BF16_SAT;
        const int sat = kind == F8H_E5M2_F16_SAT || kind == F8H_E5M2_BF16_SAT, special = e5 ? 0x7C : 0x7F;
        const mxp__cvt_args args = {sat, 0, 0, false};
        unsigned char in[32];
        uint16_t out[32];
        /* the small magnitudes 0 .. 15 (those below the normal range are used), then the
         * specials from `special` on (the rest of the 16 are never selected) */
        for (int j = 0; j < 32; j++) in[j] = (unsigned char)(j < 16 ? j : special + (j - 16) % (0x80 - special));
        ref->cvt[bf ? MXP_BFLOAT16 : MXP_FLOAT16][e5 ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN][MXP__RNE](out, in, 32,
                                                                                                     &args);
        unsigned char planes[4][32];
        for (int t = 0; t < 2; t++)
            for (int j = 0; j < 32; j++) {
                planes[2 * t][j] = (unsigned char)(out[16 * t + j % 16] & 0xFF);
                planes[2 * t + 1][j] = (unsigned char)(out[16 * t + j % 16] >> 8);
            }
        for (int v = 0; v < 4; v++) f8h_tab[kind][v] = _mm256_loadu_si256((const __m256i *)(const void *)planes[v]);
    }
}

/*
 * bfloat16 -> float16 nearest-even on 16-bit lanes, 32 elements per step: cvt_avx512.c's
 * bf16_f16_w / bf16_f16_fix (the rules are explained there) with signed 16-bit compares (a =
 * |h| < 2^15); a step with a lane outside float16's normal range (+-0 included here: two more
 * operations per vector cost more than they saved on uniform data) converts by widening to
 * float32 and VCVTPS2PH, as to16_loop did for every step: 0.087 ns/element in cache on Zen 4.
 */
PRIM __m256i bf16_f16_fix(__m256i h, int sat)
{
    const __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16);
    const __m256i y = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16);
    __m256i r = hw_f16_pair(x, y, 0);
    if (sat) /* +-inf - 1 = +-max */
        r = _mm256_add_epi16(r, _mm256_cmpeq_epi16(_mm256_and_si256(r, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x7C00)));
    return r;
}
/* the in-range result of 16 lanes; *out: all ones in the lanes outside float16's normal range */
PRIM __m256i bf16_f16_w(__m256i h, __m256i *out)
{
    const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
    *out = _mm256_or_si256(_mm256_cmpgt_epi16(_mm256_set1_epi16(0x3880), a), _mm256_cmpgt_epi16(a, _mm256_set1_epi16(0x477F)));
    const __m256i t = _mm256_add_epi16(_mm256_slli_epi16(h, 3), _mm256_set1_epi16(0x4000));
    return _mm256_or_si256(t, _mm256_and_si256(h, _mm256_set1_epi16((short)0x8000)));
}
static SIMD_INLINE size_t bfh_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, int sat, int nt)
{
    for (; i + 32 <= n; i += 32) {
        if (nt) avx2_pf_far(s + 2 * i);
        const __m256i h0 = _mm256_loadu_si256((const __m256i *)(const void *)(s + 2 * i));
        const __m256i h1 = _mm256_loadu_si256((const __m256i *)(const void *)(s + 2 * i + 32));
        __m256i o0, o1;
        __m256i r0 = bf16_f16_w(h0, &o0), r1 = bf16_f16_w(h1, &o1);
        if (!_mm256_testz_si256(_mm256_or_si256(o0, o1), _mm256_or_si256(o0, o1))) {
            r0 = bf16_f16_fix(h0, sat);
            r1 = bf16_f16_fix(h1, sat);
        }
        st_words2(d + 2 * i, r0, r1, nt);
    }
    return i;
}
static void cvt_f16_bf16_w__avx2(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    int nt;
    size_t i = pair_head(d, s, n, a, MXP_FLOAT16, MXP_BFLOAT16, 2, 2, 32, &nt);
    if (a->saturate) i = nt ? bfh_run(d, s, i, n, 1, 1) : bfh_run(d, s, i, n, 1, 0);
    else i = nt ? bfh_run(d, s, i, n, 0, 1) : bfh_run(d, s, i, n, 0, 0);
    pair_done(d, s, i, n, a, MXP_FLOAT16, MXP_BFLOAT16, 2, 2, nt);
}

void mxp__cvt_register_avx2_f8s(mxp__kernels *k)
{
    mxp__f8b_init();
    static mxp__kernels ref; /* as in mxp__f8b_init */
    mxp__cvt_register_scalar(&ref);
    f8s2_init(&ref);
    if (f8s2_ok[0]) k->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT8_E4M3FN][MXP__SR] = cvt_e5m2_e4m3_sr__avx2;
    if (f8s2_ok[1]) k->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT8_E5M2][MXP__SR] = cvt_e4m3_e5m2_sr__avx2;
}

void mxp__cvt_register_avx2_pairs(mxp__kernels *k)
{
    simd_register_to16(k);
    k->cvt[MXP_FLOAT16][MXP_BFLOAT16][MXP__RNE] = cvt_f16_bf16_w__avx2;
    mxp__f8b_init();
    static mxp__kernels ref; /* as in mxp__f8b_init */
    mxp__cvt_register_scalar(&ref);
    f8h_init(&ref);
    mxp__cvt_register_avx2_f8s(k);
    for (int mode = 0; mode < MXP__NMODES; mode++) {
        k->cvt[MXP_FLOAT16][MXP_FLOAT8_E4M3FN][mode] = cvt_f16_e4m3_b__avx2;
        k->cvt[MXP_BFLOAT16][MXP_FLOAT8_E4M3FN][mode] = cvt_bf16_e4m3_b__avx2;
        k->cvt[MXP_FLOAT16][MXP_FLOAT8_E5M2][mode] = cvt_f16_e5m2_b__avx2;
        k->cvt[MXP_BFLOAT16][MXP_FLOAT8_E5M2][mode] = cvt_bf16_e5m2_b__avx2;
    }
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT8_E5M2][MXP__RNE] = cvt_e4m3_e5m2__avx2;
    k->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT8_E4M3FN][MXP__RNE] = cvt_e5m2_e4m3__avx2;
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT16][MXP__RNE] = cvt_e4m3_f16__avx2;
    k->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT16][MXP__RNE] = cvt_e5m2_f16__avx2;
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_BFLOAT16][MXP__RNE] = cvt_e4m3_bf16__avx2;
    k->cvt[MXP_FLOAT8_E5M2][MXP_BFLOAT16][MXP__RNE] = cvt_e5m2_bf16__avx2;
}
