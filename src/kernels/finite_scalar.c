/*
 * finite_scalar.c - the scalar reference for all_finite and unscale_check, every floating dtype.
 *
 * all_finite: one full pass ORing "exponent field all ones" tests (no early exit).
 *
 * unscale_check (docs/DESIGN.md section 7): x := x * inv, as a float32 product rounded once to
 * nearest-even (float64 product for float64), then rounded to nearest-even into the element's
 * dtype. The reference does the arithmetic on integers - decode both operands to
 * (sign, integer significand, power of two), multiply the significands exactly, round once
 * with round_pack() - so neither FTZ/DAZ nor the rounding direction in MXCSR/FPCR can change a
 * result. Where the hardware multiply is provably identical (both operands normal, result
 * certainly normal, rounding mode nearest; see finite.h) it is used instead, for speed; the
 * tests check both routes against an independent reference, with FTZ/DAZ on and off.
 *
 * NaN results (fixed so every ISA path agrees, and equal to what an x86 `x * inv` gives):
 *   float32/float64: x NaN -> x quieted; else inv NaN -> inv quieted (widened for float64);
 *   else 0 * inf -> the x86 default NaN, sign set (0xFFC00000 / 0xFFF8000000000000).
 *   narrower dtypes: the canonical quiet NaN of the dtype with the float32 product's sign:
 *   float16 s.11111.1000000000, bfloat16 s.11111111.1000000, e5m2 s.11111.10, e4m3fn s.1111.111.
 */
#include <float.h>
#include <string.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#else
#include <fenv.h>
#endif

#include "finite.h"
#include "kernels.h"

/* ---- formats ---------------------------------------------------------------------------- */

/* A binary format: `mant` fraction bits, exponent bias, largest finite bit pattern (sign
 * clear), the pattern an overflow gives (inf; NaN 0x7F for e4m3fn), canonical quiet NaN,
 * total width. */
typedef struct fmt {
    int mant, bias, width;
    uint64_t maxfin, ovf, qnan;
} fmt;

static const fmt F64 = {52, 1023, 64, 0x7FEFFFFFFFFFFFFFull, 0x7FF0000000000000ull,
                        0x7FF8000000000000ull};
static const fmt F32 = {23, 127, 32, 0x7F7FFFFF, 0x7F800000, 0x7FC00000};
static const fmt F16 = {10, 15, 16, 0x7BFF, 0x7C00, 0x7E00};
static const fmt E4M3 = {3, 7, 8, 0x7E, 0x7F, 0x7F};
static const fmt E5M2 = {2, 15, 8, 0x7B, 0x7C, 0x7E};

static int clz64(uint64_t v) { return __builtin_clzll(v); } /* v != 0 */

/*
 * Round sign * sig * 2^(e - 63) (sig has bit 63 set; `sticky`: nonzero bits below sig) to
 * nearest-even in format f; returns the bit pattern (overflow: f->ovf).
 *
 *   sig:  1xxxxxxxxxxxxxxxxxxxxxxx | rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr  (+ sticky)
 *         '-- kept: mant+1 bits --'  '----------- dropped: shift bits ---------'
 * Below the normal range (e < emin) the kept part shrinks by emin - e bits (a subnormal).
 * The kept part q, incremented when the dropped part is above half or exactly half with q
 * odd, is added to (biased exponent - 1) << mant: the hidden bit of q supplies the missing 1,
 * and a carry out of q (rounding up to the next binade, or from the largest subnormal to the
 * smallest normal) lands in the exponent field by itself.
 */
static uint64_t round_pack(uint64_t sign, uint64_t sig, bool sticky, int e, const fmt *f)
{
    uint64_t s = sign << (f->width - 1);
    int emin = 1 - f->bias;
    if (e > f->bias + 1) return s | f->ovf; /* >= 2^(bias+2): past every finite value */
    int ee = e < emin ? emin : e;
    int shift = 63 - f->mant + (ee - e);
    uint64_t q;
    if (shift > 64) {
        q = 0; /* below half of the smallest subnormal */
    } else if (shift == 64) {
        q = (sig > (1ull << 63) || sticky) ? 1 : 0; /* exactly half ties to even 0 */
    } else {
        q = sig >> shift;
        uint64_t rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
        if (rem > half || (rem == half && (sticky || (q & 1)))) q++;
    }
    uint64_t bits = ((uint64_t)(ee + f->bias - 1) << f->mant) + q;
    if (bits > f->maxfin) bits = f->ovf;
    return s | bits;
}

/* Classes of a decoded value. */
enum { C_ZERO, C_FINITE, C_INF, C_NAN };

/* Decode bits of format f: value = (-1)^sign * m * 2^e for C_FINITE (m != 0). */
static int decode(uint64_t bits, const fmt *f, uint64_t *sign, uint64_t *m, int *e)
{
    int ebits = f->width - 1 - f->mant;
    uint64_t frac = bits & ((1ull << f->mant) - 1);
    uint64_t E = (bits >> f->mant) & ((1ull << ebits) - 1);
    *sign = (bits >> (f->width - 1)) & 1;
    if (f == &E4M3) {
        if ((bits & 0x7F) == 0x7F) return C_NAN; /* no infinities */
    } else if (E == (1ull << ebits) - 1) {
        return frac ? C_NAN : C_INF;
    }
    if (E == 0) {
        if (!frac) return C_ZERO;
        *m = frac;
        *e = 1 - f->bias - f->mant;
    } else {
        *m = frac | (1ull << f->mant);
        *e = (int)E - f->bias - f->mant;
    }
    return C_FINITE;
}

/* Exact widening of a narrow (or float32) pattern to float32 bits. NaN: canonical, same sign. */
static uint32_t widen_to_f32(uint64_t bits, const fmt *f)
{
    uint64_t sign, m = 0;
    int e = 0;
    switch (decode(bits, f, &sign, &m, &e)) {
    case C_ZERO: return (uint32_t)(sign << 31);
    case C_INF: return (uint32_t)(sign << 31) | 0x7F800000u;
    case C_NAN: return (uint32_t)(sign << 31) | 0x7FC00000u;
    default: break;
    }
    int lz = clz64(m);
    return (uint32_t)round_pack(sign, m << lz, false, e + 63 - lz, &F32); /* exact */
}

/* Round float32 bits to format f (nearest-even; NaN -> canonical NaN with the same sign). */
static uint64_t narrow_from_f32(uint32_t bits, const fmt *f)
{
    uint64_t sign, m = 0;
    int e = 0;
    switch (decode(bits, &F32, &sign, &m, &e)) {
    case C_ZERO: return sign << (f->width - 1);
    case C_INF: return (sign << (f->width - 1)) | f->ovf;
    case C_NAN: return (sign << (f->width - 1)) | f->qnan;
    default: break;
    }
    int lz = clz64(m);
    return round_pack(sign, m << lz, false, e + 63 - lz, f);
}

/* The float32 product a * b, IEEE round-to-nearest-even, subnormals kept, integers only. */
static uint32_t mul_f32_exact(uint32_t a, uint32_t b)
{
    uint64_t sa, sb, ma = 0, mb = 0;
    int ea = 0, eb = 0;
    int ca = decode(a, &F32, &sa, &ma, &ea), cb = decode(b, &F32, &sb, &mb, &eb);
    uint64_t sign = sa ^ sb;
    if (ca == C_NAN) return a | 0x00400000u;
    if (cb == C_NAN) return b | 0x00400000u;
    if (ca == C_INF || cb == C_INF) {
        if (ca == C_ZERO || cb == C_ZERO) return 0xFFC00000u; /* x86 default NaN */
        return (uint32_t)(sign << 31) | 0x7F800000u;
    }
    if (ca == C_ZERO || cb == C_ZERO) return (uint32_t)(sign << 31);
    uint64_t p = ma * mb; /* <= 48 bits */
    int lz = clz64(p);
    return (uint32_t)round_pack(sign, p << lz, false, ea + eb + 63 - lz, &F32);
}

/* The float64 product x * (double)inv, IEEE round-to-nearest-even, subnormals kept. */
static uint64_t mul_f64_exact(uint64_t a, uint32_t invbits)
{
    uint64_t sa, sb, ma = 0, mb = 0;
    int ea = 0, eb = 0;
    int ca = decode(a, &F64, &sa, &ma, &ea), cb = decode(invbits, &F32, &sb, &mb, &eb);
    uint64_t sign = sa ^ sb;
    if (ca == C_NAN) return a | 0x0008000000000000ull;
    if (cb == C_NAN) /* widen the float NaN: sign, payload moved up 29 bits, quiet */
        return (sb << 63) | 0x7FF8000000000000ull | ((uint64_t)(invbits & 0x7FFFFF) << 29);
    if (ca == C_INF || cb == C_INF) {
        if (ca == C_ZERO || cb == C_ZERO) return 0xFFF8000000000000ull;
        return (sign << 63) | 0x7FF0000000000000ull;
    }
    if (ca == C_ZERO || cb == C_ZERO) return sign << 63;
    /* ma (<= 53 bits) * mb (<= 24 bits) = up to 77 bits, as hi:lo */
    uint64_t pl = (ma & 0xFFFFFFFFu) * mb, ph = (ma >> 32) * mb;
    uint64_t lo = pl + (ph << 32);
    uint64_t hi = (ph >> 32) + (lo < pl);
    int e = ea + eb;
    if (hi) {
        int lz = clz64(hi); /* >= 51 */
        uint64_t sig = (hi << lz) | (lo >> (64 - lz));
        return round_pack(sign, sig, (lo << lz) != 0, e + 127 - lz, &F64);
    }
    int lz = clz64(lo);
    return round_pack(sign, lo << lz, false, e + 63 - lz, &F64);
}

/*
 * inv = (float)(1.0 / (double)scale), computed on integers so that FTZ/DAZ and the rounding
 * direction cannot change it. In the default environment the C expression gives the same
 * bits: for a quotient of two 24-bit integers the double result is never close enough to a
 * float32 rounding midpoint for the second rounding to differ from a single one.
 *   scale = m * 2^e (m normalised to 24 bits); 2^50 / m = q + r/m with q in (2^26, 2^27];
 *   1/scale = (q + r/m) * 2^(-e-50), rounded once by round_pack (r != 0 is the sticky bit).
 */
float mxp__unscale_inv(float scale)
{
    uint32_t b;
    memcpy(&b, &scale, 4);
    uint64_t sign, m = 0;
    int e = 0;
    uint32_t r;
    switch (decode(b, &F32, &sign, &m, &e)) {
    case C_NAN: r = b | 0x00400000u; break;
    case C_ZERO: r = (uint32_t)(sign << 31) | 0x7F800000u; break;
    case C_INF: r = (uint32_t)(sign << 31); break;
    default: {
        while (!(m & 0x800000u)) { /* subnormal scale: normalise */
            m <<= 1;
            e--;
        }
        uint64_t q = (1ull << 50) / m, rem = (1ull << 50) % m;
        int lz = clz64(q);
        r = (uint32_t)round_pack(sign, q << lz, rem != 0, -e - 50 + 63 - lz, &F32);
    }
    }
    float inv;
    memcpy(&inv, &r, 4);
    return inv;
}

/* ---- environment checks (finite.h) ------------------------------------------------------- */

bool mxp__unscale_hw_ok(void)
{
#if FLT_EVAL_METHOD != 0
    return false;
#elif defined(__x86_64__) || defined(_M_X64)
    return (_mm_getcsr() & 0x6000u) == 0; /* MXCSR.RC == round to nearest */
#else
    return fegetround() == FE_TONEAREST;
#endif
}

bool mxp__fp_set_flush_denormals(bool on)
{
#if defined(__x86_64__) || defined(_M_X64)
    unsigned csr = _mm_getcsr();
    _mm_setcsr(on ? (csr | 0x8040u) : (csr & ~0x8040u)); /* FTZ bit 15, DAZ bit 6 */
    return true;
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    uint64_t fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    fpcr = on ? (fpcr | (1ull << 24)) : (fpcr & ~(1ull << 24)); /* FPCR.FZ: inputs and outputs */
    __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
    return true;
#else
    (void)on;
    return false;
#endif
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint32_t mxp__unscale_tiny_threshold(float inv)
{
    /* t = 2^-124 / |inv|, in double (inv is normal, so the conversion is exact and mode-free) */
    double t = 0x1p-124 / (double)bits_f32(f32_bits(inv) & 0x7FFFFFFFu);
    if (t < 0x1p-126) return 0x00800000u; /* every normal x qualifies */
    if (t > (double)FLT_MAX) return 0x7F800000u;
    float tf = (float)t; /* normal; round up to stay conservative */
    uint32_t tb = f32_bits(tf);
    if ((double)tf < t) tb++;
    return tb;
}

/* ---- all_finite ------------------------------------------------------------------------- */

/* One loop per element width: OR of "exponent field all ones" (float8 e4m3fn: NaN pattern). */
#define ALL_FINITE(NAME, T, MASK, TEST)                                                          \
    static bool NAME(const void *x, size_t n)                                                    \
    {                                                                                            \
        const unsigned char *p = x;                                                              \
        unsigned bad = 0;                                                                        \
        for (size_t i = 0; i < n; i++) {                                                         \
            T v;                                                                                 \
            memcpy(&v, p + i * sizeof v, sizeof v);                                              \
            bad |= (unsigned)((T)(v & (MASK)) == (T)(TEST));                                     \
        }                                                                                        \
        return bad == 0;                                                                         \
    }

ALL_FINITE(all_finite_f64, uint64_t, 0x7FF0000000000000ull, 0x7FF0000000000000ull)
ALL_FINITE(all_finite_f32, uint32_t, 0x7F800000u, 0x7F800000u)
ALL_FINITE(all_finite_f16, uint16_t, 0x7C00u, 0x7C00u)
ALL_FINITE(all_finite_bf16, uint16_t, 0x7F80u, 0x7F80u)
ALL_FINITE(all_finite_e4m3, uint8_t, 0x7Fu, 0x7Fu)
ALL_FINITE(all_finite_e5m2, uint8_t, 0x7Cu, 0x7Cu)

/* ---- unscale_check ------------------------------------------------------------------------ */

/* The float32 product, hardware where provably identical (see finite.h), else exact. */
static inline uint32_t mul_f32(uint32_t xb, uint32_t ib, float inv, uint32_t thr, bool hw)
{
    uint32_t ax = xb & 0x7FFFFFFFu;
    if (hw && ax >= thr && ax < 0x7F800000u) return f32_bits(bits_f32(xb) * inv);
    return mul_f32_exact(xb, ib);
}

static bool unscale_f32(void *x, size_t n, float inv)
{
    unsigned char *p = x;
    uint32_t ib = f32_bits(inv), ie = (ib >> 23) & 0xFF;
    bool hw = ie != 0 && ie != 0xFF && mxp__unscale_hw_ok();
    uint32_t thr = hw ? mxp__unscale_tiny_threshold(inv) : 0x7F800000u;
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, p + 4 * i, 4);
        uint32_t r = mul_f32(v, ib, inv, thr, hw);
        bad |= (unsigned)((v & 0x7F800000u) == 0x7F800000u) | ((r & 0x7F800000u) == 0x7F800000u);
        memcpy(p + 4 * i, &r, 4);
    }
    return bad == 0;
}

/*
 * Narrow dtypes: widen exactly, float32 product, round into the dtype. widen_to_f32 and
 * narrow_from_f32 are the general (integer) routines; for bfloat16 and float16 the common
 * cases take bit shortcuts that give the same bits:
 *   bfloat16 -> float32: b << 16.  float32 -> bfloat16 (not NaN, subnormals and inf included):
 *     (y + 0x7FFF + lowest kept bit) >> 16 (see finite_avx2.c).
 *   float16 -> float32 for normal h (exponent field 1..30): move the 15 magnitude bits up 13
 *     and rebias the exponent by 127 - 15 = 112 (0x38000000 = 112 << 23).
 *   float32 -> float16 when the result is a normal float16 (2^-14 <= |y| < 65520): the same
 *     rebias downwards, then round away 13 bits with the 0xFFF + lowest-kept-bit carry.
 */
static inline uint32_t widen_bf16(uint16_t v) { return (uint32_t)v << 16; }

static inline uint16_t narrow_bf16(uint32_t y)
{
    if ((y & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((y >> 16 & 0x8000u) | 0x7FC0u);
    return (uint16_t)((y + 0x7FFFu + ((y >> 16) & 1u)) >> 16);
}

static inline uint32_t widen_f16(uint16_t v)
{
    uint32_t e = (v >> 10) & 0x1F;
    if (e == 0 || e == 31) return widen_to_f32(v, &F16);
    return ((uint32_t)(v & 0x8000u) << 16) | (((uint32_t)(v & 0x7FFFu) << 13) + 0x38000000u);
}

static inline uint16_t narrow_f16(uint32_t y)
{
    uint32_t a = y & 0x7FFFFFFFu;
    if (a < 0x38800000u || a >= 0x477FF000u) return (uint16_t)narrow_from_f32(y, &F16);
    uint32_t m = a - 0x38000000u;
    return (uint16_t)((y >> 16 & 0x8000u) | ((m + 0xFFFu + ((m >> 13) & 1u)) >> 13));
}

/* float8: e5m2 is the top byte of a float16, so it widens through widen_f16. Rounding into
 * either float8 uses the float16 trick with the float8's bias (e5m2: 15, rebias 112 << 23;
 * e4m3fn: 7, rebias 120 << 23) and 21 / 20 dropped bits, inside the normal range up to the
 * last value that does not overflow (e5m2: below 61440, which ties up to inf; e4m3fn: up to
 * 464, which ties down to 448; above it the carry makes 0x7F, the NaN, as it should). */
static inline uint32_t widen_e4m3(uint8_t v) { return widen_to_f32(v, &E4M3); }

static inline uint8_t narrow_e4m3(uint32_t y)
{
    uint32_t a = y & 0x7FFFFFFFu;
    if (a < 0x3C800000u || a > 0x43E80000u) return (uint8_t)narrow_from_f32(y, &E4M3);
    uint32_t m = a - 0x3C000000u;
    return (uint8_t)((y >> 24 & 0x80u) | ((m + 0x7FFFFu + ((m >> 20) & 1u)) >> 20));
}

static inline uint32_t widen_e5m2(uint8_t v) { return widen_f16((uint16_t)(v << 8)); }

static inline uint8_t narrow_e5m2(uint32_t y)
{
    uint32_t a = y & 0x7FFFFFFFu;
    if (a < 0x38800000u || a >= 0x47700000u) return (uint8_t)narrow_from_f32(y, &E5M2);
    uint32_t m = a - 0x38000000u;
    return (uint8_t)((y >> 24 & 0x80u) | ((m + 0xFFFFFu + ((m >> 21) & 1u)) >> 21));
}

#define UNSCALE_NARROW(NAME, T, WIDEN, NARROW, NONFINITE)                                       \
    static bool NAME(void *x, size_t n, float inv)                                               \
    {                                                                                            \
        unsigned char *p = x;                                                                    \
        uint32_t ib = f32_bits(inv), ie = (ib >> 23) & 0xFF;                                     \
        bool hw = ie != 0 && ie != 0xFF && mxp__unscale_hw_ok();                                 \
        uint32_t thr = hw ? mxp__unscale_tiny_threshold(inv) : 0x7F800000u;                      \
        unsigned bad = 0;                                                                        \
        for (size_t i = 0; i < n; i++) {                                                         \
            T v;                                                                                 \
            memcpy(&v, p + i * sizeof v, sizeof v);                                              \
            T r = NARROW(mul_f32(WIDEN(v), ib, inv, thr, hw));                                   \
            bad |= (unsigned)(NONFINITE(v) | NONFINITE(r));                                      \
            memcpy(p + i * sizeof v, &r, sizeof r);                                              \
        }                                                                                        \
        return bad == 0;                                                                         \
    }

#define NF_F16(v) ((v & 0x7C00u) == 0x7C00u)
#define NF_BF16(v) ((v & 0x7F80u) == 0x7F80u)
#define NF_E4M3(v) ((v & 0x7Fu) == 0x7Fu)
#define NF_E5M2(v) ((v & 0x7Cu) == 0x7Cu)

UNSCALE_NARROW(unscale_f16, uint16_t, widen_f16, narrow_f16, NF_F16)
UNSCALE_NARROW(unscale_bf16, uint16_t, widen_bf16, narrow_bf16, NF_BF16)
UNSCALE_NARROW(unscale_e4m3, uint8_t, widen_e4m3, narrow_e4m3, NF_E4M3)
UNSCALE_NARROW(unscale_e5m2, uint8_t, widen_e5m2, narrow_e5m2, NF_E5M2)

/*
 * unscale_into: float32 destination. The source is widened exactly to float32 - NaNs keep their
 * sign and payload (float16 / e5m2 payload moved up, e4m3fn's only NaN has none), as mxp_convert
 * widens - and then multiplied like unscale_f32, whose NaN rule (an input NaN is kept, quieted)
 * then applies. widen_f16 above makes NaNs canonical (the narrowing that follows in
 * unscale_f16 drops payloads anyway), so NaN inputs are widened here with their payload.
 */
static inline uint32_t widen_f16_payload(uint16_t v)
{
    if ((v & 0x7C00u) == 0x7C00u) /* inf or NaN: S 11111111 (10 payload bits) 0000000000000 */
        return ((uint32_t)(v & 0x8000u) << 16) | 0x7F800000u | ((uint32_t)(v & 0x3FFu) << 13);
    return widen_f16(v);
}

static inline uint32_t widen_e5m2_payload(uint8_t v) { return widen_f16_payload((uint16_t)(v << 8)); }

static inline uint32_t widen_f32(uint32_t v) { return v; }

#define NF_F32(v) ((v & 0x7F800000u) == 0x7F800000u)

#define UNSCALE_INTO(NAME, T, WIDEN, NONFINITE)                                                  \
    static bool NAME(void *dst, const void *src, size_t n, float inv)                            \
    {                                                                                            \
        const unsigned char *s = src;                                                            \
        unsigned char *d = dst;                                                                  \
        uint32_t ib = f32_bits(inv), ie = (ib >> 23) & 0xFF;                                     \
        bool hw = ie != 0 && ie != 0xFF && mxp__unscale_hw_ok();                                 \
        uint32_t thr = hw ? mxp__unscale_tiny_threshold(inv) : 0x7F800000u;                      \
        unsigned bad = 0;                                                                        \
        for (size_t i = 0; i < n; i++) {                                                         \
            T v;                                                                                 \
            memcpy(&v, s + i * sizeof v, sizeof v);                                              \
            uint32_t r = mul_f32(WIDEN(v), ib, inv, thr, hw);                                    \
            bad |= (unsigned)(NONFINITE(v) | NF_F32(r));                                         \
            memcpy(d + 4 * i, &r, 4);                                                            \
        }                                                                                        \
        return bad == 0;                                                                         \
    }

UNSCALE_INTO(into_f32, uint32_t, widen_f32, NF_F32)
UNSCALE_INTO(into_f16, uint16_t, widen_f16_payload, NF_F16)
UNSCALE_INTO(into_bf16, uint16_t, widen_bf16, NF_BF16)
UNSCALE_INTO(into_e4m3, uint8_t, widen_e4m3, NF_E4M3)
UNSCALE_INTO(into_e5m2, uint8_t, widen_e5m2_payload, NF_E5M2)

static bool unscale_f64(void *x, size_t n, float inv)
{
    unsigned char *p = x;
    uint32_t ib = f32_bits(inv), ie = (ib >> 23) & 0xFF;
    bool hw = ie != 0 && ie != 0xFF && mxp__unscale_hw_ok();
    double dinv = hw ? (double)inv : 0.0; /* inv normal: exact, no DAZ */
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v, r;
        memcpy(&v, p + 8 * i, 8);
        uint64_t E = (v >> 52) & 0x7FF;
        r = 0;
        bool done = false;
        if (hw && E != 0 && E != 0x7FF) {
            double d, prod;
            memcpy(&d, &v, 8);
            prod = d * dinv;
            memcpy(&r, &prod, 8);
            /* exponent field >= 2: |product| >= 2^-1021, normal, not flushed (or inf) */
            done = ((r >> 52) & 0x7FF) >= 2;
        }
        if (!done) r = mul_f64_exact(v, ib);
        bad |= (unsigned)(E == 0x7FF) | (((r >> 52) & 0x7FF) == 0x7FF);
        memcpy(p + 8 * i, &r, 8);
    }
    return bad == 0;
}

void mxp__finite_register_scalar(mxp__kernels *k)
{
    k->all_finite[MXP_FLOAT64] = all_finite_f64;
    k->all_finite[MXP_FLOAT32] = all_finite_f32;
    k->all_finite[MXP_FLOAT16] = all_finite_f16;
    k->all_finite[MXP_BFLOAT16] = all_finite_bf16;
    k->all_finite[MXP_FLOAT8_E4M3FN] = all_finite_e4m3;
    k->all_finite[MXP_FLOAT8_E5M2] = all_finite_e5m2;
    k->unscale_check[MXP_FLOAT64] = unscale_f64;
    k->unscale_check[MXP_FLOAT32] = unscale_f32;
    k->unscale_check[MXP_FLOAT16] = unscale_f16;
    k->unscale_check[MXP_BFLOAT16] = unscale_bf16;
    k->unscale_check[MXP_FLOAT8_E4M3FN] = unscale_e4m3;
    k->unscale_check[MXP_FLOAT8_E5M2] = unscale_e5m2;
    k->unscale_into[MXP_FLOAT64] = NULL; /* not accepted (mxp_unscale_check_into) */
    k->unscale_into[MXP_FLOAT32] = into_f32;
    k->unscale_into[MXP_FLOAT16] = into_f16;
    k->unscale_into[MXP_BFLOAT16] = into_bf16;
    k->unscale_into[MXP_FLOAT8_E4M3FN] = into_e4m3;
    k->unscale_into[MXP_FLOAT8_E5M2] = into_e5m2;
}
