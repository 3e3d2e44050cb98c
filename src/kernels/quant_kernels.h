/*
 * quant_kernels.h - the kernel table behind mixprec/quant.h (src/quant.c). Not installed.
 *
 * A table of its own, beside kernels.h's conversion table (so that the two evolve without
 * touching each other): quant_scalar.c builds one per ISA, the same ISA as the conversion table
 * in use (mxp__kernels_active()), and src/quant.c pairs the two: the quantization passes here,
 * the float32 -> float8 / float16 ... casts through the conversion table of the same ISA.
 *
 * What the kernels do (every ISA bit-identical to quant_scalar.c, which is the truth):
 *   - magnitude maxima on float32 BIT PATTERNS: max over (bits & 0x7FFFFFFF) as unsigned
 *     integers. For non-negative floats the integer order is the numeric order, and every NaN
 *     pattern lies above +inf (0x7F800000), which lies above every finite value. So one integer
 *     max gives the amax, tells whether a value was non-finite (result >= 0x7F800000) and
 *     propagates NaN over inf (delayed scaling), with no floating-point compare that DAZ or a
 *     NaN could disturb;
 *   - x * s as float32 products (round to nearest even: quant.c runs every kernel inside
 *     mxp__qfenv_enter / _leave, which sets the default floating-point environment);
 *   - integer rounding with ties to even after clamping to [lo, hi] (clamping first is the
 *     same as clamping after: rounding is monotone and lo, hi are integers).
 * Inputs are float32 arrays (quant.c widens float16 / bfloat16 blocks first, exactly);
 * pointers are float-aligned; n may be 0.
 */
#ifndef MIXPREC_QUANT_KERNELS_H
#define MIXPREC_QUANT_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

typedef struct mxp__qkernels {
    const char *name; /* the ISA name, as the conversion table's */
    /* max over i < n of bits(x[i]) & 0x7FFFFFFF (0 when n == 0) */
    uint32_t (*amax_bits)(const float *x, size_t n);
    /* acc[j] = max(acc[j], |x[j]|) for j < n, compared as bit patterns (acc holds
     * non-negative floats or NaN patterns) */
    void (*amax_cols)(float *acc, const float *x, size_t n);
    /* q[i] = clamp(rne(x[i] * s), lo, hi); x finite, -128 <= lo < hi <= 127. pf: nonzero when
     * the caller's next read is an amax pass over the group after this one (x + n onwards), which
     * the kernel may prefetch while it casts from the cache; 0 when casts run back to back over
     * data read once (a prefetch there only competes with the hardware's; the AVX-512 kernel
     * honours it, the AVX2 one prefetches either way, as measured on Zen 3) */
    void (*cast_int)(int8_t *q, const float *x, size_t n, float s, int lo, int hi, int pf);
    /* the same with one scale per element: q[i] = clamp(rne(x[i] * s[i]), lo, hi) */
    void (*cast_int_v)(int8_t *q, const float *x, const float *s, size_t n, int lo, int hi);
    /* y[i] = x[i] * s; returns amax_bits(x, n). This entry and mx_scale are the scalar
     * reference's steps of the fused kernels (fp8_encode, mx_encode), which call them for the
     * elements they do not take themselves; the library calls the fused kernels only, so no ISA
     * registers its own version of these two. */
    uint32_t (*mul_amax)(float *y, const float *x, size_t n, float s);
    /* y[i] = x[i] * s[i] */
    void (*mul_v)(float *y, const float *x, const float *s, size_t n);
    /* MX: x[0..n) is a run of blocks of MXP__MX_BLOCK (the last may be shorter); for block b:
     * e[b] = mxp__mx_e8m0(amax_bits of the block, e5m2, floor), then y[i] = x[i] * 2^(127 - e[b])
     * (mxp__mx_inv). x finite. */
    void (*mx_scale)(float *y, uint8_t *e, const float *x, size_t n, int e5m2, int floor);
    /* Fused float8 cast: q[i] = float8(x[i] * s), the float32 product rounded to nearest even
     * and saturating (+-inf -> +-max, NaN stays NaN) into e4m3fn (e5m2 = 0) or e5m2: the bits
     * of `slow`, the conversion table's float32 -> float8 kernel (called with saturation on),
     * which the kernel also uses for what it does not handle itself (products that are NaN,
     * tails). Returns amax_bits(x, n). nt: q through streaming stores (then store_fence). */
    uint32_t (*fp8_encode)(uint8_t *q, const float *x, size_t n, float s, int e5m2, int nt,
                           mxp__cvt_fn slow);
    /* Fused MX: mx_scale, then the saturating float8 cast of y into q as above. x finite. */
    void (*mx_encode)(uint8_t *q, uint8_t *e, const float *x, size_t n, int e5m2, int floor, int nt,
                      mxp__cvt_fn slow);
    /* memcpy(dst, src, n) with streaming (non-temporal) stores where the ISA has them, for
     * outputs larger than the cache (no read-for-ownership of the destination). dst any
     * alignment. A call that used it ends with store_fence (once, not per block). */
    void (*store_nt)(void *dst, const void *src, size_t n);
    void (*store_fence)(void);
} mxp__qkernels;

enum { MXP__MX_BLOCK = 32 };

/* The quantization table paired with the active conversion table (the same ISA). Never NULL. */
const mxp__qkernels *mxp__qkernels_active(void);
/* The table of one ISA, or NULL when mxp__kernels_for(isa) is NULL. */
const mxp__qkernels *mxp__qkernels_for(mxp__isa_id isa);

/* Register functions (one per ISA file); the scalar one fills every entry. */
void mxp__quant_register_scalar(mxp__qkernels *k);
#if defined(__x86_64__) || defined(_M_X64)
void mxp__quant_register_avx2(mxp__qkernels *k);
void mxp__quant_register_avx512(mxp__qkernels *k);
#endif

/*
 * The E8M0 exponent of an MX block from its amax bit pattern a (finite, >= 0), exactly:
 *   a = 0: 0 (all-zero block);
 *   FLOOR (OCP v1.0): X = 2^(floor(log2 amax) - emax), emax = 8 (e4m3fn) / 15 (e5m2);
 *   RCEIL: the smallest power of two X with amax / X <= fmax. With k = floor(log2 amax) - emax,
 *     amax / 2^k = 1.f * 2^emax lies in [2^emax, 2^(emax+1)); fmax = 1.75 * 2^emax for both
 *     formats (448, 57344), so X = 2^k works iff the 24-bit significand 1.f <= 1.75
 *     (<= 0xE00000), and otherwise X = 2^(k+1) (amax / 2^(k+1) < 2^emax < fmax) does;
 *     2^(k-1) never does (amax / 2^(k-1) >= 2^(emax+1) > fmax).
 * e = log2 X + 127, clamped to 0..254 (e = 0, X = 2^-127, only for amax below 2^-119 or so,
 * where amax / X <= fmax still holds; e = 254 is never reached from a finite float32).
 */
static inline uint8_t mxp__mx_e8m0(uint32_t a, int e5m2, int floor_rule)
{
    if (a == 0) return 0;
    const int emax = e5m2 ? 15 : 8;
    const uint32_t ef = a >> 23;
    uint32_t sig = a & 0x7FFFFFu;
    int fl;
    if (ef) {
        fl = (int)ef - 127;
        sig |= 0x800000u;
    } else { /* subnormal: normalise */
        fl = -126;
        while (!(sig & 0x800000u)) {
            sig <<= 1;
            fl--;
        }
    }
    int k = fl - emax;
    if (!floor_rule && sig > 0xE00000u) k++;
    int e = k + 127;
    return (uint8_t)(e < 0 ? 0 : e > 254 ? 254 : e);
}

/* 1 / X = 2^(127 - e) for e in 0..254, as a float32 (exact; 2^-127 is subnormal). */
static inline float mxp__mx_inv(uint8_t e)
{
    const uint32_t bits = e <= 253 ? (uint32_t)(254 - e) << 23 : 0x00400000u;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/*
 * The floating-point environment of a quantization call: round to nearest even, no
 * flush-to-zero / denormals-are-zero, every exception masked; the caller's environment
 * (mode, masks, flags) comes back exactly on leave. The kernels compute float32 products and
 * divisions whose results the contract fixes, so a caller's FTZ/DAZ (e.g. -ffast-math's
 * start-up code) or directed rounding must not change them, and a caller's unmasked
 * exception must not trap on a NaN input.
 *   x86-64: MXCSR (one read; a write only when it differs from the wanted state);
 *   AArch64: FPCR (FZ, FZ16, rounding mode, trap enables, AH/FIZ cleared) and FPSR restored;
 *   elsewhere: fesetround(FE_TONEAREST) (flush modes are not reachable portably).
 */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && defined(__SSE__)
typedef struct mxp__qfenv { unsigned csr; } mxp__qfenv;
static inline mxp__qfenv mxp__qfenv_enter(void)
{
    const unsigned csr = __builtin_ia32_stmxcsr();
    const unsigned want = (csr & 0x3Fu) | 0x1F80u; /* keep the flags; masks on; RN; no FTZ/DAZ */
    if (csr != want) __builtin_ia32_ldmxcsr(want);
    return (mxp__qfenv){csr};
}
static inline void mxp__qfenv_leave(mxp__qfenv f)
{
    if (__builtin_ia32_stmxcsr() != f.csr) __builtin_ia32_ldmxcsr(f.csr);
}
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
typedef struct mxp__qfenv { uint64_t fpcr, fpsr; } mxp__qfenv;
static inline mxp__qfenv mxp__qfenv_enter(void)
{
    mxp__qfenv f;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(f.fpcr));
    __asm__ __volatile__("mrs %0, fpsr" : "=r"(f.fpsr));
    /* FZ (24), RMode (23:22), FZ16 (19), trap enables (15, 12:8), AH/FIZ (1:0) */
    const uint64_t want = f.fpcr & ~(uint64_t)((1u << 24) | (3u << 22) | (1u << 19) | (1u << 15) |
                                               (0x1Fu << 8) | 0x3u);
    if (want != f.fpcr) __asm__ __volatile__("msr fpcr, %0" ::"r"(want));
    return f;
}
static inline void mxp__qfenv_leave(mxp__qfenv f)
{
    uint64_t c;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(c));
    if (c != f.fpcr) __asm__ __volatile__("msr fpcr, %0" ::"r"(f.fpcr));
    __asm__ __volatile__("msr fpsr, %0" ::"r"(f.fpsr));
}
#else
#include <fenv.h>
typedef struct mxp__qfenv { int round; } mxp__qfenv;
static inline mxp__qfenv mxp__qfenv_enter(void)
{
    mxp__qfenv f = {fegetround()};
    if (f.round != FE_TONEAREST) fesetround(FE_TONEAREST);
    return f;
}
static inline void mxp__qfenv_leave(mxp__qfenv f)
{
    if (f.round != FE_TONEAREST) fesetround(f.round);
}
#endif

/* Test hook (tests only): when >= 0, mxp__qkernels_active() and the conversion table quant.c
 * pairs with it are those of this ISA (which must be available). Set only while no
 * quantization runs. -1 by default. */
extern int mxp__quant_isa_override;

#endif /* MIXPREC_QUANT_KERNELS_H */
