/*
 * cvt_neon.c - float32 <-> float16 / bfloat16 / float8 (e4m3fn, e5m2) with AArch64 Advanced
 * SIMD (4 lanes, two vectors per step).
 *
 * The algorithm is cvt_simd_impl.h's (shared with AVX2, tested natively, and AVX-512); this
 * file only maps its primitives to NEON. Shifts are USHL with a per-lane signed count (the low
 * byte of each lane; positive = left, negative = right, |count| >= 32 gives 0); every count the
 * algorithm forms lies in [-141, 141], where that reading is exact or gives the 0 wanted (see
 * v_srlv). FCVTN / FCVTL (float16) and BFCVTN are not used: FPCR.FZ / FZ16 can flush them, the
 * integer path cannot be flushed, and it is what the other ISAs run. Checked against the scalar
 * reference under qemu by scripts/ci_aarch64.sh.
 */
#include <arm_neon.h>
#include <stdbool.h>
#include <string.h>

#include "kernels.h"

#define MXP_SIMD_ISA neon
#define VL 4
typedef uint32x4_t V;
typedef uint32x4_t M; /* all-ones / all-zeros lanes */

#define PRIM static inline __attribute__((always_inline))
PRIM V v_set1(uint32_t x) { return vdupq_n_u32(x); }
PRIM V v_and(V a, V b) { return vandq_u32(a, b); }
PRIM V v_or(V a, V b) { return vorrq_u32(a, b); }
PRIM V v_xor(V a, V b) { return veorq_u32(a, b); }
PRIM V v_add(V a, V b) { return vaddq_u32(a, b); }
PRIM V v_sub(V a, V b) { return vsubq_u32(a, b); }
PRIM V v_mullo(V a, V b) { return vmulq_u32(a, b); }
/* constant shifts through USHL too (compilers fold a constant count into USHR / SHL) */
PRIM V v_srli(V x, int n) { return vshlq_u32(x, vdupq_n_s32(-n)); }
PRIM V v_slli(V x, int n) { return vshlq_u32(x, vdupq_n_s32(n)); }
/* Right shift by an unsigned count c in [1, 141]: -c's low byte is -c for c <= 128 (a right
 * shift, 0 when c >= 32), and 256 - c in [115, 127] for c > 128 (a left shift by >= 32: 0). */
PRIM V v_srlv(V x, V c) { return vshlq_u32(x, vnegq_s32(vreinterpretq_s32_u32(c))); }
PRIM V v_shls(V x, V c) { return vshlq_u32(x, vreinterpretq_s32_u32(c)); }
PRIM M m_gt(V a, V b) { return vcgtq_s32(vreinterpretq_s32_u32(a), vreinterpretq_s32_u32(b)); }
PRIM M m_gtu(V a, V b) { return vcgtq_u32(a, b); }
PRIM M m_eq(V a, V b) { return vceqq_u32(a, b); }
PRIM V v_sel(M m, V t, V f) { return vbslq_u32(m, t, f); }
PRIM V v_inc(V x, M m) { return vsubq_u32(x, m); }
PRIM V v_i2f_bits(V x) { return vreinterpretq_u32_f32(vcvtq_f32_u32(x)); } /* exact: x < 2^24 */
PRIM V v_iota(void)
{
    static const uint32_t iota[4] = {0, 1, 2, 3};
    return vld1q_u32(iota);
}
PRIM M m_or(M a, M b) { return vorrq_u32(a, b); }
PRIM M m_and(M a, M b) { return vandq_u32(a, b); }
PRIM bool m_any(M m) { return vmaxvq_u32(m) != 0; }
PRIM V v_keep(M m, V x) { return vandq_u32(m, x); }
/* Byte loads and stores: any alignment. */
PRIM V ld32(const void *p) { return vreinterpretq_u32_u8(vld1q_u8((const uint8_t *)p)); }
PRIM V ld16(const void *p) { return vmovl_u16(vreinterpret_u16_u8(vld1_u8((const uint8_t *)p))); }
PRIM V ld8(const void *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(w)))));
}
PRIM void st32(void *p, V x) { vst1q_u8((uint8_t *)p, vreinterpretq_u8_u32(x)); }
PRIM void st16x2(void *p, V x, V y)
{
    vst1q_u8((uint8_t *)p, vreinterpretq_u8_u16(vcombine_u16(vmovn_u32(x), vmovn_u32(y))));
}
/* halfwords 0 .. VL - 1 (hi = 0) or VL .. 2 VL - 1 of h zero-extended to 32-bit lanes (the
 * elements' r >> 16 in srb_run: halfword j of h is element j's half) */
PRIM V sr_h16_ext(V h, int hi)
{
    const uint16x8_t w = vreinterpretq_u16_u32(h);
    return hi ? vmovl_high_u16(w) : vmovl_u16(vget_low_u16(w));
}
PRIM void st8x2(void *p, V x, V y)
{
    vst1_u8((uint8_t *)p, vmovn_u16(vcombine_u16(vmovn_u32(x), vmovn_u32(y))));
}

#include "cvt_simd_impl.h"

void mxp__cvt_register_neon(mxp__kernels *k) { simd_register(k); }
