/*
 * cvt_avx512.c - float32 <-> float16 / bfloat16 / float8 (e4m3fn, e5m2) with AVX-512 (16 lanes).
 *
 * The algorithm is cvt_simd_impl.h's (shared with AVX2 and NEON, which are tested against the
 * scalar reference natively and under qemu); this file only maps its primitives to AVX-512F
 * intrinsics (compares give __mmask16, selects are mask blends, narrowing stores are
 * VPMOVDW / VPMOVDB). Only AVX512F is needed, so dispatch.c selects this path on every
 * AVX-512 CPU (F/BW/VL/DQ required for the table as a whole, OS ZMM state checked).
 *
 * Not used on purpose:
 *  - AVX512_BF16 VCVTNEPS2BF16: it treats float32 subnormal inputs as zero (bfloat16 keeps them)
 *    and always quiets NaN; fixing both up costs as much as the 6-instruction integer rounding.
 *  - AVX512_FP16: nothing here needs it (float32 <-> float16 uses AVX512F's VCVTPS2PH /
 *    VCVTPH2PS, the F16C operation, bit-exact as explained in cvt_avx2.c), and Zen 4 lacks it.
 * The integer path is exact whatever MXCSR says and runs at memory bandwidth.
 */
#ifdef MXP_AVX512_EMULATED /* test builds: portable AVX-512 (tests/emu/avx512_emu.h) */
#include "avx512_emu.h"
#else
#include <immintrin.h>
#endif
#include <stdbool.h>

#include "kernels.h"

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
    _mm512_stream_si512(p, _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(x)),
                                              _mm512_cvtepi32_epi16(y), 1));
}
PRIM void st8x2_nt(void *p, V x, V y)
{
    _mm256_stream_si256((__m256i *)p, _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(x)),
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

/* AVX512F VCVTPS2PH / VCVTPH2PS: the same operation as F16C's (cvt_avx2.c, tested there). */
#define MXP_SIMD_HW_F16 1
PRIM void hw_f16_st2(void *p, V x, V y, int sat, int nt)
{
    const __m256i hx = _mm512_cvtps_ph(_mm512_castsi512_ps(x), _MM_FROUND_TO_NEAREST_INT);
    const __m256i hy = _mm512_cvtps_ph(_mm512_castsi512_ps(y), _MM_FROUND_TO_NEAREST_INT);
    V h = _mm512_inserti64x4(_mm512_castsi256_si512(hx), hy, 1);
    if (sat) { /* +-inf (0x7C00 / 0xFC00) - 1 = +-max (0x7BFF / 0xFBFF) */
        const __mmask32 inf = _mm512_cmpeq_epi16_mask(_mm512_and_si512(h, _mm512_set1_epi16(0x7FFF)),
                                                      _mm512_set1_epi16(0x7C00));
        h = _mm512_mask_sub_epi16(h, inf, h, _mm512_set1_epi16(1));
    }
    if (nt) _mm512_stream_si512(p, h);
    else _mm512_storeu_si512(p, h);
}
PRIM V hw_f16_ld(const void *p)
{
    return _mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)));
}

/* Streaming-store threshold: as cvt_avx2.c (bytes read + written by one call). */
#ifndef MXP_SIMD_NT_THRESHOLD
#define MXP_SIMD_NT_THRESHOLD ((size_t)24 << 20)
#endif
#define MXP_SIMD_NT_STORE32(p, x) _mm512_stream_si512((void *)(p), (x))
#define MXP_SIMD_NT_FENCE() _mm_sfence()

#include "cvt_simd_impl.h"

void mxp__cvt_register_avx512(mxp__kernels *k) { simd_register(k); }
