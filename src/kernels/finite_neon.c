/*
 * finite_neon.c - all_finite and unscale_check (float32, bfloat16, float16) with AArch64
 * Advanced SIMD; bit-identical to finite_scalar.c, which also does the tails. The float8 and
 * float64 entries stay scalar.
 *
 * all_finite: unsigned max of the magnitude bits per lane, compared once at the end with the
 * largest finite pattern (see finite_avx2.c).
 *
 * unscale_check: a hardware fmul equals IEEE round-to-nearest-even when FPCR says so. Read once
 * per call, FPCR must have RMode = nearest, DN = 0 (NaN operands propagate, quieted, as the
 * scalar rules say), FZ16 = 0 (float16 conversions keep subnormals), AH = 0 and FIZ = 0
 * (FEAT_AFP's alternative behaviours), else the whole call is scalar. FPCR.FZ (flush float32
 * subnormals in and out) is allowed: as in the AVX2 kernels, a block with a lane
 * 0 < |x| < tiny threshold (finite.h) goes to the scalar path, and for float16 a flushed
 * product is below half the smallest float16 subnormal anyway.
 * unscale_into (float32 / bfloat16 / float16 -> float32) is at the end.
 */
#include <arm_neon.h>
#include <string.h>

#include "finite.h"
#include "kernels.h"

static bool fpcr_plain(void)
{
    uint64_t fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    const uint64_t must_be_zero = (3ull << 22) | (1ull << 25) | (1ull << 19) | (1ull << 1) | 1ull;
    return (fpcr & must_be_zero) == 0;
}

static bool inv_normal(float inv)
{
    uint32_t ib;
    memcpy(&ib, &inv, 4);
    uint32_t ie = (ib >> 23) & 0xFF;
    return ie != 0 && ie != 0xFF;
}

/* ---- all_finite ------------------------------------------------------------------------ */

static bool all_finite_f32(const void *x, size_t n)
{
    const uint8_t *b = x; /* read through vld1q_u8: any alignment */
    const uint32x4_t abs = vdupq_n_u32(0x7FFFFFFFu);
    uint32x4_t a0 = vdupq_n_u32(0), a1 = a0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 = vmaxq_u32(a0, vandq_u32(vreinterpretq_u32_u8(vld1q_u8(b + 4 * i)), abs));
        a1 = vmaxq_u32(a1, vandq_u32(vreinterpretq_u32_u8(vld1q_u8(b + 4 * i + 16)), abs));
    }
    bool ok = vmaxvq_u32(vmaxq_u32(a0, a1)) <= 0x7F7FFFFFu;
    if (i < n) ok &= mxp__scalar_kernels()->all_finite[MXP_FLOAT32](b + 4 * i, n - i);
    return ok;
}

#define ALL_FINITE_NEON16(NAME, DT, LIMIT)                                                      \
    static bool NAME(const void *x, size_t n)                                                    \
    {                                                                                            \
        const uint8_t *b = x;                                                                    \
        const uint16x8_t abs = vdupq_n_u16(0x7FFF);                                              \
        uint16x8_t a0 = vdupq_n_u16(0), a1 = a0;                                                 \
        size_t i = 0;                                                                            \
        for (; i + 16 <= n; i += 16) {                                                           \
            a0 = vmaxq_u16(a0, vandq_u16(vreinterpretq_u16_u8(vld1q_u8(b + 2 * i)), abs));       \
            a1 = vmaxq_u16(a1, vandq_u16(vreinterpretq_u16_u8(vld1q_u8(b + 2 * i + 16)), abs));  \
        }                                                                                        \
        bool ok = vmaxvq_u16(vmaxq_u16(a0, a1)) <= (LIMIT);                                      \
        if (i < n) ok &= mxp__scalar_kernels()->all_finite[DT](b + 2 * i, n - i);                \
        return ok;                                                                               \
    }

ALL_FINITE_NEON16(all_finite_f16, MXP_FLOAT16, 0x7BFF)
ALL_FINITE_NEON16(all_finite_bf16, MXP_BFLOAT16, 0x7F7F)

/* ---- unscale_check -------------------------------------------------------------------------- */

static bool unscale_f32(void *x, size_t n, float inv)
{
    mxp__unscale_fn scalar = mxp__scalar_kernels()->unscale_check[MXP_FLOAT32];
    if (!inv_normal(inv) || !fpcr_plain() || !mxp__unscale_hw_ok()) return scalar(x, n, inv);
    const uint32x4_t thr_m1 = vdupq_n_u32(mxp__unscale_tiny_threshold(inv) - 1u);
    const uint32x4_t abs = vdupq_n_u32(0x7FFFFFFFu), one = vdupq_n_u32(1);
    const float32x4_t vinv = vdupq_n_f32(inv);
    uint8_t *b = x;
    uint32x4_t acc = vdupq_n_u32(0);
    bool ok = true;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint8_t *q = b + 4 * i;
        uint32x4_t v0 = vreinterpretq_u32_u8(vld1q_u8(q)), v1 = vreinterpretq_u32_u8(vld1q_u8(q + 16));
        /* tiny lanes: (|x| - 1) <u (thr - 1) */
        uint32x4_t t = vorrq_u32(vcltq_u32(vsubq_u32(vandq_u32(v0, abs), one), thr_m1),
                                 vcltq_u32(vsubq_u32(vandq_u32(v1, abs), one), thr_m1));
        if (vmaxvq_u32(t)) {
            ok &= scalar(q, 8, inv);
            continue;
        }
        uint32x4_t y0 = vreinterpretq_u32_f32(vmulq_f32(vreinterpretq_f32_u32(v0), vinv));
        uint32x4_t y1 = vreinterpretq_u32_f32(vmulq_f32(vreinterpretq_f32_u32(v1), vinv));
        vst1q_u8(q, vreinterpretq_u8_u32(y0));
        vst1q_u8(q + 16, vreinterpretq_u8_u32(y1));
        acc = vmaxq_u32(acc, vmaxq_u32(vandq_u32(y0, abs), vandq_u32(y1, abs)));
    }
    ok &= vmaxvq_u32(acc) <= 0x7F7FFFFFu; /* inv finite, nonzero: bad input -> bad product */
    if (i < n) ok &= scalar(b + 4 * i, n - i, inv);
    return ok;
}

/* float32 product bits -> bfloat16 (nearest-even; never NaN here), narrowed to 16 bits. */
static inline uint16x4_t round_bf16(uint32x4_t y)
{
    uint32x4_t lsb = vandq_u32(vshrq_n_u32(y, 16), vdupq_n_u32(1));
    return vshrn_n_u32(vaddq_u32(y, vaddq_u32(vdupq_n_u32(0x7FFF), lsb)), 16);
}

static bool unscale_bf16(void *x, size_t n, float inv)
{
    mxp__unscale_fn scalar = mxp__scalar_kernels()->unscale_check[MXP_BFLOAT16];
    if (!inv_normal(inv) || !fpcr_plain() || !mxp__unscale_hw_ok()) return scalar(x, n, inv);
    /* scalar lanes: tiny (0 <= |b| - 1 <= t16, see finite_avx2.c) or NaN (|b| > 0x7F80) */
    uint32_t thr = mxp__unscale_tiny_threshold(inv);
    const uint16x8_t t16 = vdupq_n_u16((uint16_t)(((thr - 1u) >> 16) - 1u));
    const uint16x8_t abs16 = vdupq_n_u16(0x7FFF), one16 = vdupq_n_u16(1), inf16 = vdupq_n_u16(0x7F80);
    const float32x4_t vinv = vdupq_n_f32(inv);
    uint8_t *b = x;
    uint16x8_t acc = vdupq_n_u16(0);
    bool ok = true;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint8_t *q = b + 2 * i;
        uint16x8_t v = vreinterpretq_u16_u8(vld1q_u8(q));
        uint16x8_t m = vandq_u16(v, abs16);
        uint16x8_t t = vorrq_u16(vcleq_u16(vsubq_u16(m, one16), t16), vcgtq_u16(m, inf16));
        if (vmaxvq_u16(t)) {
            ok &= scalar(q, 8, inv);
            continue;
        }
        /* bfloat16 -> float32: shift each 16-bit lane into the top half of a 32-bit lane */
        float32x4_t lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16));
        float32x4_t hi = vreinterpretq_f32_u32(vshll_high_n_u16(v, 16));
        uint16x8_t out = vcombine_u16(round_bf16(vreinterpretq_u32_f32(vmulq_f32(lo, vinv))),
                                      round_bf16(vreinterpretq_u32_f32(vmulq_f32(hi, vinv))));
        vst1q_u8(q, vreinterpretq_u8_u16(out));
        acc = vmaxq_u16(acc, vandq_u16(out, abs16));
    }
    ok &= vmaxvq_u16(acc) <= 0x7F7F;
    if (i < n) ok &= scalar(b + 2 * i, n - i, inv);
    return ok;
}

static bool unscale_f16(void *x, size_t n, float inv)
{
    mxp__unscale_fn scalar = mxp__scalar_kernels()->unscale_check[MXP_FLOAT16];
    if (!inv_normal(inv) || !fpcr_plain() || !mxp__unscale_hw_ok()) return scalar(x, n, inv);
    const float32x4_t vinv = vdupq_n_f32(inv);
    const uint32x4_t keep_nan = vdupq_n_u32(0xFFC00000u);
    const uint16x8_t abs16 = vdupq_n_u16(0x7FFF);
    uint8_t *b = x;
    uint16x8_t acc = vdupq_n_u16(0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint8_t *q = b + 2 * i;
        uint16x8_t v = vreinterpretq_u16_u8(vld1q_u8(q));
        float32x4_t y0 = vmulq_f32(vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(v))), vinv);
        float32x4_t y1 = vmulq_f32(vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(v))), vinv);
        /* NaN lanes -> sign | 0x7FC00000 (quiet products: an AND does it), so the conversion
         * gives the scalar path's canonical sign | 0x7E00 */
        uint32x4_t n0 = vmvnq_u32(vceqq_f32(y0, y0)), n1 = vmvnq_u32(vceqq_f32(y1, y1));
        uint32x4_t u0 = vreinterpretq_u32_f32(y0), u1 = vreinterpretq_u32_f32(y1);
        u0 = vbslq_u32(n0, vandq_u32(u0, keep_nan), u0);
        u1 = vbslq_u32(n1, vandq_u32(u1, keep_nan), u1);
        float16x4_t h0 = vcvt_f16_f32(vreinterpretq_f32_u32(u0));
        float16x4_t h1 = vcvt_f16_f32(vreinterpretq_f32_u32(u1));
        uint16x8_t out = vcombine_u16(vreinterpret_u16_f16(h0), vreinterpret_u16_f16(h1));
        vst1q_u8(q, vreinterpretq_u8_u16(out));
        acc = vmaxq_u16(acc, vandq_u16(out, abs16));
    }
    bool ok = vmaxvq_u16(acc) <= 0x7BFF;
    if (i < n) ok &= scalar(b + 2 * i, n - i, inv);
    return ok;
}

/* ---- unscale_into: float32 / bfloat16 / float16 -> float32 ---------------------------------- */

/* As in finite_avx2.c: NaN lanes need no fix-up (fmul with DN = 0 returns the NaN operand
 * quieted, and the widenings keep payloads); a block with a tiny widened lane (0 < |x| < the
 * threshold) goes to the scalar reference, since FPCR.FZ may flush it or its product. */
static inline uint32x4_t tiny4(uint32x4_t v, uint32x4_t thr_m1)
{
    return vcltq_u32(vsubq_u32(vandq_u32(v, vdupq_n_u32(0x7FFFFFFFu)), vdupq_n_u32(1)), thr_m1);
}

#define INTO_NEON(NAME, DT, ES, LOAD8)                                                          \
    static bool NAME(void *dst, const void *src, size_t n, float inv)                            \
    {                                                                                            \
        mxp__unscale_into_fn scalar = mxp__scalar_kernels()->unscale_into[DT];                   \
        if (!inv_normal(inv) || !fpcr_plain() || !mxp__unscale_hw_ok())                          \
            return scalar(dst, src, n, inv);                                                     \
        const uint32x4_t thr_m1 = vdupq_n_u32(mxp__unscale_tiny_threshold(inv) - 1u);            \
        const uint32x4_t abs = vdupq_n_u32(0x7FFFFFFFu);                                         \
        const float32x4_t vinv = vdupq_n_f32(inv);                                               \
        const uint8_t *s = src;                                                                  \
        uint8_t *d = dst;                                                                        \
        uint32x4_t acc = vdupq_n_u32(0);                                                         \
        bool ok = true;                                                                          \
        size_t i = 0;                                                                            \
        for (; i + 8 <= n; i += 8) {                                                             \
            uint32x4_t x0, x1;                                                                   \
            LOAD8(s + (ES) * i, x0, x1);                                                         \
            if (vmaxvq_u32(vorrq_u32(tiny4(x0, thr_m1), tiny4(x1, thr_m1)))) {                   \
                ok &= scalar(d + 4 * i, s + (ES) * i, 8, inv);                                   \
                continue;                                                                        \
            }                                                                                    \
            uint32x4_t y0 = vreinterpretq_u32_f32(vmulq_f32(vreinterpretq_f32_u32(x0), vinv));   \
            uint32x4_t y1 = vreinterpretq_u32_f32(vmulq_f32(vreinterpretq_f32_u32(x1), vinv));   \
            vst1q_u8(d + 4 * i, vreinterpretq_u8_u32(y0));                                       \
            vst1q_u8(d + 4 * i + 16, vreinterpretq_u8_u32(y1));                                  \
            acc = vmaxq_u32(acc, vmaxq_u32(vandq_u32(y0, abs), vandq_u32(y1, abs)));             \
        }                                                                                        \
        ok &= vmaxvq_u32(acc) <= 0x7F7FFFFFu;                                                    \
        if (i < n) ok &= scalar(d + 4 * i, s + (ES) * i, n - i, inv);                            \
        return ok;                                                                               \
    }

/* 8 elements at p, widened to float32 bits in x0 (elements 0..3) and x1 (4..7) */
#define LOAD8_F32(p, x0, x1)                                                                    \
    do {                                                                                         \
        x0 = vreinterpretq_u32_u8(vld1q_u8(p));                                                  \
        x1 = vreinterpretq_u32_u8(vld1q_u8((p) + 16));                                           \
    } while (0)
#define LOAD8_BF16(p, x0, x1)                                                                   \
    do {                                                                                         \
        uint16x8_t v_ = vreinterpretq_u16_u8(vld1q_u8(p));                                       \
        x0 = vshll_n_u16(vget_low_u16(v_), 16);                                                  \
        x1 = vshll_high_n_u16(v_, 16);                                                           \
    } while (0)
#define LOAD8_F16(p, x0, x1)                                                                    \
    do {                                                                                         \
        uint16x8_t v_ = vreinterpretq_u16_u8(vld1q_u8(p));                                       \
        x0 = vreinterpretq_u32_f32(vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(v_))));        \
        x1 = vreinterpretq_u32_f32(vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(v_))));       \
    } while (0)

INTO_NEON(into_f32, MXP_FLOAT32, 4, LOAD8_F32)
INTO_NEON(into_bf16, MXP_BFLOAT16, 2, LOAD8_BF16)
INTO_NEON(into_f16, MXP_FLOAT16, 2, LOAD8_F16)

void mxp__finite_register_neon(mxp__kernels *k)
{
    k->all_finite[MXP_FLOAT32] = all_finite_f32;
    k->all_finite[MXP_FLOAT16] = all_finite_f16;
    k->all_finite[MXP_BFLOAT16] = all_finite_bf16;
    k->unscale_check[MXP_FLOAT32] = unscale_f32;
    k->unscale_check[MXP_FLOAT16] = unscale_f16;
    k->unscale_check[MXP_BFLOAT16] = unscale_bf16;
    k->unscale_into[MXP_FLOAT32] = into_f32;
    k->unscale_into[MXP_FLOAT16] = into_f16;
    k->unscale_into[MXP_BFLOAT16] = into_bf16;
}
