/*
 * avx512_emu.h - AVX-512 intrinsics in portable C, so that the avx512 kernels can be tested
 * bit for bit on a CPU without AVX-512 (this project's development and CI machines).
 *
 * Test builds only (tests/CMakeLists.txt: the mixprec_emu512 library and the *_emu512 tests);
 * never part of the installed library. cvt_avx512.c includes this header instead of
 * <immintrin.h> when MXP_AVX512_EMULATED is defined.
 *
 * Most intrinsics come from SIMDe (Debian's libsimde-dev, "SIMD Everywhere"), whose native
 * aliases map the _mm512_* names to portable implementations. SIMDe 0.7.4 lacks a few that the
 * kernels use; they are written below, one lane at a time, from the operation descriptions in
 * Intel's Intrinsics Guide / SDM (written independently of the kernels: they do not share code
 * with cvt_simd_impl.h). The float32 <-> float16 conversions (VCVTPS2PH / VCVTPH2PS) are the
 * same operation as F16C's on 8 lanes, so they are built from two F16C calls (this file is
 * compiled with -mavx2 -mf16c); their MXCSR behaviour (DAZ applies to the float32 input of
 * VCVTPS2PH, FTZ does not apply to its float16 output) is therefore the hardware's own.
 */
#ifndef MIXPREC_AVX512_EMU_H
#define MIXPREC_AVX512_EMU_H

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>

#include <stdint.h>
#include <string.h>

#define EMU_FN static inline

typedef struct emu_u32x16 { uint32_t v[16]; } emu_u32x16;
typedef struct emu_u16x32 { uint16_t v[32]; } emu_u16x32;

EMU_FN emu_u32x16 emu_lanes32(simde__m512i x)
{
    emu_u32x16 r;
    memcpy(r.v, &x, sizeof r.v);
    return r;
}
EMU_FN simde__m512i emu_vec32(emu_u32x16 r)
{
    simde__m512i x;
    memcpy(&x, r.v, sizeof r.v);
    return x;
}
EMU_FN emu_u16x32 emu_lanes16(simde__m512i x)
{
    emu_u16x32 r;
    memcpy(r.v, &x, sizeof r.v);
    return r;
}
EMU_FN simde__m512i emu_vec16(emu_u16x32 r)
{
    simde__m512i x;
    memcpy(&x, r.v, sizeof r.v);
    return x;
}

/* VPCMPUD k, a, b, 6 (not-less-or-equal, unsigned): bit i = a[i] > b[i] */
EMU_FN simde__mmask16 emu_mm512_cmpgt_epu32_mask(simde__m512i a, simde__m512i b)
{
    const emu_u32x16 x = emu_lanes32(a), y = emu_lanes32(b);
    unsigned m = 0;
    for (int i = 0; i < 16; i++) m |= (unsigned)(x.v[i] > y.v[i]) << i;
    return (simde__mmask16)m;
}

/* VPCMPUW k, a, b, 6: bit i = a[i] > b[i], 32 unsigned 16-bit lanes */
EMU_FN simde__mmask32 emu_mm512_cmpgt_epu16_mask(simde__m512i a, simde__m512i b)
{
    const emu_u16x32 x = emu_lanes16(a), y = emu_lanes16(b);
    uint32_t m = 0;
    for (int i = 0; i < 32; i++) m |= (uint32_t)(x.v[i] > y.v[i]) << i;
    return (simde__mmask32)m;
}

/* VPTESTNMW (zero = 1: lanes whose AND is zero) and VPTESTMW (zero = 0: nonzero); SIMDe 0.7.4's
 * VPTESTMW shifts 1 into an int's sign bit, which UBSan rejects */
EMU_FN simde__mmask32 emu_mm512_test16(simde__m512i a, simde__m512i b, int zero)
{
    const emu_u16x32 x = emu_lanes16(a), y = emu_lanes16(b);
    uint32_t m = 0;
    for (int i = 0; i < 32; i++) m |= (uint32_t)(((x.v[i] & y.v[i]) == 0) == (zero != 0)) << i;
    return (simde__mmask32)m;
}

/* VPMULLD: low 32 bits of each product (SIMDe 0.7.4's portable version multiplies signed ints,
 * which is undefined behaviour on overflow and trips UBSan) */
EMU_FN simde__m512i emu_mm512_mullo_epi32(simde__m512i a, simde__m512i b)
{
    emu_u32x16 x = emu_lanes32(a);
    const emu_u32x16 y = emu_lanes32(b);
    for (int i = 0; i < 16; i++) x.v[i] *= y.v[i];
    return emu_vec32(x);
}

/* VPCMPEQW k, a, b: bit i = a.word[i] == b.word[i] */
EMU_FN simde__mmask32 emu_mm512_cmpeq_epi16_mask(simde__m512i a, simde__m512i b)
{
    const emu_u16x32 x = emu_lanes16(a), y = emu_lanes16(b);
    uint32_t m = 0;
    for (int i = 0; i < 32; i++) m |= (uint32_t)(x.v[i] == y.v[i]) << i;
    return (simde__mmask32)m;
}

/* VPSUBW with merge masking: lane i = k[i] ? a[i] - b[i] (mod 2^16) : src[i] */
EMU_FN simde__m512i emu_mm512_mask_sub_epi16(simde__m512i src, simde__mmask32 k, simde__m512i a,
                                                    simde__m512i b)
{
    emu_u16x32 r = emu_lanes16(src);
    const emu_u16x32 x = emu_lanes16(a), y = emu_lanes16(b);
    for (int i = 0; i < 32; i++)
        if ((k >> i) & 1u) r.v[i] = (uint16_t)(x.v[i] - y.v[i]);
    return emu_vec16(r);
}

/* VPMOVDW: each dword truncated to its low word */
EMU_FN simde__m256i emu_mm512_cvtepi32_epi16(simde__m512i a)
{
    const emu_u32x16 x = emu_lanes32(a);
    uint16_t w[16];
    for (int i = 0; i < 16; i++) w[i] = (uint16_t)x.v[i];
    simde__m256i r;
    memcpy(&r, w, sizeof w);
    return r;
}

/* VPMOVZXWD: 16 words zero-extended to dwords */
EMU_FN simde__m512i emu_mm512_cvtepu16_epi32(simde__m256i a)
{
    uint16_t w[16];
    memcpy(w, &a, sizeof w);
    emu_u32x16 r;
    for (int i = 0; i < 16; i++) r.v[i] = w[i];
    return emu_vec32(r);
}

/* VPMOVZXBD: 16 bytes zero-extended to dwords */
EMU_FN simde__m512i emu_mm512_cvtepu8_epi32(simde__m128i a)
{
    uint8_t b[16];
    memcpy(b, &a, sizeof b);
    emu_u32x16 r;
    for (int i = 0; i < 16; i++) r.v[i] = b[i];
    return emu_vec32(r);
}

/* VPMOVZXBW: 32 bytes zero-extended to words */
EMU_FN simde__m512i emu_mm512_cvtepu8_epi16(simde__m256i a)
{
    uint8_t b[32];
    memcpy(b, &a, sizeof b);
    emu_u16x32 r;
    for (int i = 0; i < 32; i++) r.v[i] = b[i];
    return emu_vec16(r);
}

/* VPMOVDB: each dword truncated to its low byte */
EMU_FN simde__m128i emu_mm512_cvtepi32_epi8(simde__m512i a)
{
    const emu_u32x16 x = emu_lanes32(a);
    uint8_t b[16];
    for (int i = 0; i < 16; i++) b[i] = (uint8_t)x.v[i];
    simde__m128i r;
    memcpy(&r, b, sizeof b);
    return r;
}

/* VCVTDQ2PS: signed dword -> float32 under the current MXCSR rounding mode (the cast rounds
 * the same way: C's int -> float conversion uses the dynamic rounding mode). */
EMU_FN simde__m512 emu_mm512_cvtepi32_ps(simde__m512i a)
{
    const emu_u32x16 x = emu_lanes32(a);
    float f[16];
    for (int i = 0; i < 16; i++) f[i] = (float)(int32_t)x.v[i];
    simde__m512 r;
    memcpy(&r, f, sizeof f);
    return r;
}

/* VMOVNTDQ m512: a store (the non-temporal hint has no visible effect) that faults unless the
 * address is 64-byte aligned; the emulation aborts there, so a misaligned streaming store fails
 * the test as it would crash on hardware. */
EMU_FN void emu_mm512_stream_si512(void *p, simde__m512i a)
{
    if ((uintptr_t)p % 64 != 0) __builtin_trap();
    memcpy(p, &a, sizeof a);
}

/* VMOVUPD with zero-masking / VMOVDQU32 to memory with a write mask: only the selected lanes'
 * memory is read or written (on the hardware the others cannot fault; here they are not touched,
 * so AddressSanitizer sees any selected lane past a buffer's end) */
EMU_FN simde__m512d emu_mm512_maskz_loadu_pd(simde__mmask8 k, const void *p)
{
    double v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 8; i++)
        if (k >> i & 1) memcpy(&v[i], (const char *)p + 8 * i, 8);
    simde__m512d r;
    memcpy(&r, v, sizeof r);
    return r;
}
EMU_FN void emu_mm512_mask_storeu_epi32(void *p, simde__mmask16 k, simde__m512i a)
{
    for (int i = 0; i < 16; i++)
        if (k >> i & 1) memcpy((char *)p + 4 * i, (const char *)&a + 4 * i, 4);
}
EMU_FN void emu_mm512_mask_cvtepi32_storeu_epi8(void *p, simde__mmask16 k, simde__m512i a)
{
    for (int i = 0; i < 16; i++)
        if (k >> i & 1) memcpy((char *)p + i, (const char *)&a + 4 * i, 1); /* little-endian low byte */
}
/* A 512-bit conversion as its 256-bit (AVX / F16C) form applied to each half of the input, the
 * two results put side by side: VCVTPS2PH / VCVTPH2PS (16 lanes), VCVTPD2PS / VCVTPS2PD (8). The
 * hardware does the same per lane, so rounding, FTZ and DAZ are the MXCSR's as on AVX-512
 * (cvt_avx512.c's round-to-odd step sets it). */
#define EMU_TWICE(name, T_out, T_in, H_in, H_out, op)                                             \
    EMU_FN T_out name(T_in a)                                                                      \
    {                                                                                              \
        H_in lo, hi;                                                                               \
        memcpy(&lo, &a, sizeof lo);                                                                \
        memcpy(&hi, (const char *)&a + sizeof lo, sizeof hi);                                      \
        const H_out rl = op(lo), rh = op(hi);                                                      \
        T_out r;                                                                                   \
        memcpy(&r, &rl, sizeof rl);                                                                \
        memcpy((char *)&r + sizeof rl, &rh, sizeof rh);                                            \
        return r;                                                                                  \
    }
/* F16C's rounding is an immediate: one function per mode the kernels use */
EMU_FN __m128i emu_ph_rne(__m256 x) { return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT); }
EMU_FN __m128i emu_ph_rz(__m256 x) { return _mm256_cvtps_ph(x, _MM_FROUND_TO_ZERO); }
EMU_TWICE(emu_mm512_cvtps_ph_rne, simde__m256i, simde__m512, __m256, __m128i, emu_ph_rne)
EMU_TWICE(emu_mm512_cvtps_ph_rz, simde__m256i, simde__m512, __m256, __m128i, emu_ph_rz)
EMU_TWICE(emu_mm512_cvtph_ps, simde__m512, simde__m256i, __m128i, __m256, _mm256_cvtph_ps)
EMU_TWICE(emu_mm512_cvtpd_ps, simde__m256, simde__m512d, __m256d, __m128, _mm256_cvtpd_ps)
EMU_TWICE(emu_mm512_cvtps_pd, simde__m512d, simde__m256, __m128, __m256d, _mm256_cvtps_pd)
EMU_FN simde__m256i emu_mm512_cvtps_ph(simde__m512 a, int rounding)
{
    if (rounding == _MM_FROUND_TO_NEAREST_INT) return emu_mm512_cvtps_ph_rne(a);
    if (rounding != _MM_FROUND_TO_ZERO) __builtin_trap(); /* the kernels use only these two */
    return emu_mm512_cvtps_ph_rz(a); /* the stochastic fast path */
}

/* AVX512_BF16 VCVTNEPS2BF16 (16 float32 -> 16 bfloat16, returned as the 16 words of a 256-bit
 * integer vector), following the SDM's convert_fp32_to_bfloat16: zero or denormal input ->
 * signed zero (denormals are zero, MXCSR not consulted); infinity -> its top half; NaN -> its
 * top half with the quiet bit (bit 6 of the result) set; otherwise round to nearest even by
 * adding 0x7FFF + bit 16 and keeping the top half. */
EMU_FN simde__m256i emu_mm512_cvtneps2bf16(simde__m512 a)
{
    uint32_t x[16];
    uint16_t r[16];
    memcpy(x, &a, sizeof x);
    for (int i = 0; i < 16; i++) {
        const uint32_t u = x[i], e = (u >> 23) & 0xFFu, m = u & 0x7FFFFFu;
        if (e == 0) r[i] = (uint16_t)((u >> 16) & 0x8000u);
        else if (e == 0xFFu && m == 0) r[i] = (uint16_t)(u >> 16);
        else if (e == 0xFFu) r[i] = (uint16_t)((u >> 16) | 0x40u);
        else r[i] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    }
    simde__m256i v;
    memcpy(&v, r, sizeof r);
    return v;
}

/* AVX512_VNNI VPDPBUSD: lane i = src[i] + sum_{t<4} a.byte[4i+t] (unsigned) * b.byte[4i+t]
 * (signed), added modulo 2^32 (no saturation; that is VPDPBUSDS). SIMDe's portable version adds
 * signed int32, which is undefined behaviour on wrap-around. (qmatmul_avx512.c) */
EMU_FN simde__m512i emu_mm512_dpbusd_epi32(simde__m512i src, simde__m512i a, simde__m512i b)
{
    emu_u32x16 r = emu_lanes32(src);
    uint8_t ua[64];
    int8_t sb[64];
    memcpy(ua, &a, sizeof ua);
    memcpy(sb, &b, sizeof sb);
    for (int i = 0; i < 16; i++)
        for (int t = 0; t < 4; t++)
            r.v[i] += (uint32_t)((int32_t)ua[4 * i + t] * (int32_t)sb[4 * i + t]);
    return emu_vec32(r);
}

#undef _mm512_cmpgt_epu32_mask
#undef _mm512_mullo_epi32
#undef _mm512_cmpeq_epi16_mask
#undef _mm512_mask_sub_epi16
#undef _mm512_cvtepi32_epi16
#undef _mm512_cvtepu16_epi32
#undef _mm512_cvtepi32_ps
#undef _mm512_cvtepu8_epi32
#undef _mm512_cvtepu8_epi16
#undef _mm512_cvtepi32_epi8
#undef _mm512_stream_si512
#undef _mm512_cvtps_ph
#undef _mm512_cvtph_ps
#undef _mm512_dpbusd_epi32
#define _mm512_dpbusd_epi32 emu_mm512_dpbusd_epi32
/* SIMDe 0.7.4 aliases _mm512_madd_epi16 with the four arguments of the masked form; its
 * function (VPMADDWD: int16 pairs multiplied and added into int32 lanes) is right */
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
#define _mm512_cmpgt_epu32_mask emu_mm512_cmpgt_epu32_mask
#undef _mm512_cmpgt_epu16_mask /* clang's avx512bwintrin.h defines it as a macro */
#define _mm512_cmpgt_epu16_mask emu_mm512_cmpgt_epu16_mask
#undef _mm512_testn_epi16_mask
#define _mm512_testn_epi16_mask(a, b) emu_mm512_test16((a), (b), 1)
#undef _mm512_test_epi16_mask
#define _mm512_test_epi16_mask(a, b) emu_mm512_test16((a), (b), 0)
#define _mm512_mullo_epi32 emu_mm512_mullo_epi32
#define _mm512_cmpeq_epi16_mask emu_mm512_cmpeq_epi16_mask
#define _mm512_mask_sub_epi16 emu_mm512_mask_sub_epi16
#define _mm512_cvtepi32_epi16 emu_mm512_cvtepi32_epi16
#define _mm512_cvtepu16_epi32 emu_mm512_cvtepu16_epi32
#define _mm512_cvtepi32_ps emu_mm512_cvtepi32_ps
#define _mm512_cvtepu8_epi32 emu_mm512_cvtepu8_epi32
#define _mm512_cvtepu8_epi16 emu_mm512_cvtepu8_epi16
#define _mm512_cvtepi32_epi8 emu_mm512_cvtepi32_epi8
#define _mm512_stream_si512 emu_mm512_stream_si512
#define _mm512_cvtps_ph emu_mm512_cvtps_ph
#define _mm512_cvtph_ps emu_mm512_cvtph_ps
#define _mm512_cvtpd_ps emu_mm512_cvtpd_ps
#define _mm512_maskz_loadu_pd emu_mm512_maskz_loadu_pd
#define _mm512_mask_storeu_epi32 emu_mm512_mask_storeu_epi32
#define _mm512_mask_cvtepi32_storeu_epi8 emu_mm512_mask_cvtepi32_storeu_epi8
#define _mm512_cvtps_pd emu_mm512_cvtps_pd

/* VCVTPD2PS with embedded rounding, toward zero (the one the kernels use): MXCSR's rounding set
 * for the two conversions (FTZ and DAZ as the caller has them, as the instruction keeps them),
 * then the whole register given back (no flag raised) */
EMU_FN simde__m256 emu_mm512_cvt_roundpd_ps(simde__m512d a, int r)
{
    if ((r & 3) != _MM_FROUND_TO_ZERO) __builtin_trap();
    const unsigned old = _mm_getcsr();
    _mm_setcsr(old | 0x7F80u); /* every exception masked, toward zero */
    /* through volatile objects, so that the compiler cannot move the conversion (a register
     * operation to it) out from between the two MXCSR writes: clang did */
    volatile simde__m512d in = a;
    volatile simde__m256 out = emu_mm512_cvtpd_ps(in);
    _mm_setcsr(old);
    return out;
}
#undef _mm512_cvt_roundpd_ps
#define _mm512_cvt_roundpd_ps(a, r) emu_mm512_cvt_roundpd_ps((a), (r))

/* VADDPS / VSUBPS / VMULPS with embedded rounding (_MM_FROUND_TO_NEAREST_INT etc. |
 * _MM_FROUND_NO_EXC; op 0: a + b, 1: a - b, 2: a * b): the result per lane in the given direction
 * whatever the floating-point environment says, raising no flag (the environment is saved and
 * given back whole) */
#include <fenv.h>
EMU_FN simde__m512 emu_mm512_op_round_ps(simde__m512 a, simde__m512 b, int r, int op)
{
    float x[16], y[16];
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
    fenv_t env;
    fegetenv(&env);
    const int mode = r & 3;
    fesetround(mode == 0 ? FE_TONEAREST : mode == 1 ? FE_DOWNWARD : mode == 2 ? FE_UPWARD : FE_TOWARDZERO);
    for (int i = 0; i < 16; i++) {
        volatile float s = op == 0 ? x[i] + y[i] : op == 1 ? x[i] - y[i] : x[i] * y[i];
        x[i] = s;
    }
    fesetenv(&env);
    simde__m512 out;
    memcpy(&out, x, sizeof x);
    return out;
}
#undef _mm512_add_round_ps
#define _mm512_add_round_ps(a, b, r) emu_mm512_op_round_ps((a), (b), (r), 0)
#undef _mm512_sub_round_ps
#define _mm512_sub_round_ps(a, b, r) emu_mm512_op_round_ps((a), (b), (r), 1)
#undef _mm512_mul_round_ps
#define _mm512_mul_round_ps(a, b, r) emu_mm512_op_round_ps((a), (b), (r), 2)

/* VCVTTPS2UDQ: each lane truncated toward zero to an unsigned integer, 0xFFFFFFFF for NaN and
 * values outside [0, 2^32) after truncation */
EMU_FN simde__m512i emu_mm512_cvttps_epu32(simde__m512 a)
{
    float x[16];
    memcpy(x, &a, sizeof x);
    emu_u32x16 r;
    for (int i = 0; i < 16; i++)
        r.v[i] = (x[i] > -1.0f && x[i] < 4294967296.0f) ? (uint32_t)x[i] : 0xFFFFFFFFu;
    simde__m512i out;
    memcpy(&out, &r, sizeof out);
    return out;
}
#undef _mm512_cvttps_epu32
#define _mm512_cvttps_epu32 emu_mm512_cvttps_epu32

/* VCVTPS2DQ: each lane rounded to an integer in the current rounding direction (MXCSR.RC), the
 * "integer indefinite" 0x80000000 for NaN and values outside the int32 range */
#include <math.h>
EMU_FN simde__m512i emu_mm512_cvtps_epi32(simde__m512 a)
{
    float x[16];
    memcpy(x, &a, sizeof x);
    emu_u32x16 r;
    for (int i = 0; i < 16; i++) {
        const float v = nearbyintf(x[i]);
        r.v[i] = (v >= -2147483648.0f && v < 2147483648.0f) ? (uint32_t)(int32_t)v : 0x80000000u;
    }
    return emu_vec32(r);
}
#undef _mm512_cvtps_epi32
#define _mm512_cvtps_epi32(a) emu_mm512_cvtps_epi32(a)

#endif /* MIXPREC_AVX512_EMU_H */
