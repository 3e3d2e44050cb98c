/*
 * ref_convert.h - an independent reference for mixprec's conversions (tests only, header-only).
 *
 * Written differently from src/kernels/cvt_scalar.c on purpose, so that the two cannot share
 * a mistake:
 *  - values are decoded with ldexp() into doubles (exact for every format here);
 *  - rounding searches a sorted table of every non-negative finite value of the target
 *    (float16 / bfloat16 / float8), or for float32 finds the neighbours with the hardware cast
 *    and nextafterf(); the decision compares x with the midpoint of the two neighbours in
 *    double arithmetic (exact: the midpoints have at most 26 significant bits); a tie goes to
 *    the neighbour with the even bit pattern;
 *  - above max finite sits one more entry, "beyond" = max + (max - the value below max), i.e.
 *    infinity for the IEEE-like formats and the NaN slot 0x7F (480) for e4m3fn; anything that
 *    rounds to it, or lies at or above it, is overflow: +-inf (NaN for e4m3fn), or +-max finite
 *    when saturating;
 *  - stochastic rounding computes F = floor((|x| - lo) / (hi - lo) * 2^32) in double (exact:
 *    |x| - lo is exact by Sterbenz's lemma or because lo is 0, hi - lo is a power of two) and
 *    rounds up iff F + r >= 2^32 (kernels.h).
 * NaN results follow the rule in ref_nan_bits() (the same decision as cvt_scalar.c's header,
 * coded separately).
 *
 * The FPU must be in its default state (round to nearest, no flush-to-zero) while the
 * reference runs; the tests set FTZ/DAZ only around kernel calls.
 */
#ifndef MIXPREC_TEST_REF_CONVERT_H
#define MIXPREC_TEST_REF_CONVERT_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mixprec.h"

typedef struct ref_format {
    int bits;    /* storage bits */
    int mbits;   /* stored mantissa bits */
    int ebits;   /* exponent bits */
    bool fn;     /* e4m3fn: no infinity, only NaN is S.1111.111 */
} ref_format;

static inline ref_format ref_format_of(mxp_dtype d)
{
    switch (d) {
    case MXP_FLOAT64: return (ref_format){64, 52, 11, false};
    case MXP_FLOAT32: return (ref_format){32, 23, 8, false};
    case MXP_FLOAT16: return (ref_format){16, 10, 5, false};
    case MXP_BFLOAT16: return (ref_format){16, 7, 8, false};
    case MXP_FLOAT8_E4M3FN: return (ref_format){8, 3, 4, true};
    default: return (ref_format){8, 2, 5, false}; /* MXP_FLOAT8_E5M2 */
    }
}

static inline int ref_bias(ref_format f) { return (1 << (f.ebits - 1)) - 1; }

/* Bit helpers that a test needs to read and write elements. */
static inline uint64_t ref_load(const void *p, size_t i, mxp_dtype d)
{
    const unsigned char *b = (const unsigned char *)p;
    switch (ref_format_of(d).bits) {
    case 8: return b[i];
    case 16: { uint16_t v; memcpy(&v, b + 2 * i, 2); return v; }
    case 32: { uint32_t v; memcpy(&v, b + 4 * i, 4); return v; }
    default: { uint64_t v; memcpy(&v, b + 8 * i, 8); return v; }
    }
}

static inline void ref_store(void *p, size_t i, mxp_dtype d, uint64_t v)
{
    unsigned char *b = (unsigned char *)p;
    switch (ref_format_of(d).bits) {
    case 8: b[i] = (unsigned char)v; break;
    case 16: { uint16_t w = (uint16_t)v; memcpy(b + 2 * i, &w, 2); break; }
    case 32: { uint32_t w = (uint32_t)v; memcpy(b + 4 * i, &w, 4); break; }
    default: memcpy(b + 8 * i, &v, 8); break;
    }
}

static inline uint64_t ref_sign_bit(mxp_dtype d) { return 1ull << (ref_format_of(d).bits - 1); }

static inline bool ref_is_nan_bits(mxp_dtype d, uint64_t bits)
{
    ref_format f = ref_format_of(d);
    uint64_t mag = bits & (ref_sign_bit(d) - 1u);
    uint64_t exp_all = ((1ull << f.ebits) - 1u) << f.mbits;
    if (f.fn) return mag == (exp_all | ((1ull << f.mbits) - 1u));
    return (mag & exp_all) == exp_all && (mag & ((1ull << f.mbits) - 1u)) != 0;
}

/* The exact value of a bit pattern (NaN: a NaN of the pattern's sign). */
static inline double ref_decode(mxp_dtype d, uint64_t bits)
{
    if (d == MXP_FLOAT64) {
        double x;
        memcpy(&x, &bits, 8);
        return x;
    }
    ref_format f = ref_format_of(d);
    const bool neg = (bits >> (f.bits - 1)) & 1u;
    const uint64_t frac = bits & ((1ull << f.mbits) - 1u);
    const uint64_t expf = (bits >> f.mbits) & ((1ull << f.ebits) - 1u);
    const uint64_t expmax = (1ull << f.ebits) - 1u;
    double v;
    if (ref_is_nan_bits(d, bits)) v = (double)NAN;
    else if (!f.fn && expf == expmax) v = HUGE_VAL;
    else if (expf == 0) v = ldexp((double)frac, 1 - ref_bias(f) - f.mbits);
    else v = ldexp((double)(frac + (1ull << f.mbits)), (int)expf - ref_bias(f) - f.mbits);
    return neg ? -v : v;
}

/* Pattern of +max finite, and of the overflow result without saturation (+inf, e4m3fn NaN). */
static inline uint64_t ref_maxfin_bits(mxp_dtype d)
{
    ref_format f = ref_format_of(d);
    uint64_t ones_exp = ((1ull << f.ebits) - 1u) << f.mbits;
    uint64_t ones_man = (1ull << f.mbits) - 1u;
    return f.fn ? (ones_exp | ones_man) - 1u : ones_exp - 1u;
}

static inline uint64_t ref_overflow_bits(mxp_dtype d, bool sat)
{
    return sat ? ref_maxfin_bits(d) : ref_maxfin_bits(d) + 1u;
}

/*
 * The NaN mixprec produces for a NaN source pattern (DESIGN: NaN of the same sign; the payload
 * rule is mixprec's choice, shared by every ISA path):
 *  - identity pairs keep the pattern;
 *  - to e4m3fn: S.1111.111;
 *  - otherwise: S, exponent all ones, quiet bit (top mantissa bit) set, and the source payload
 *    (mantissa field; none for an e4m3fn source) aligned at the top of the target mantissa.
 */
static inline uint64_t ref_nan_bits(mxp_dtype dst, mxp_dtype src, uint64_t src_bits)
{
    if (dst == src) return src_bits;
    ref_format fs = ref_format_of(src), fd = ref_format_of(dst);
    const uint64_t neg = (src_bits >> (fs.bits - 1)) & 1u;
    const uint64_t sign = neg ? ref_sign_bit(dst) : 0;
    const uint64_t exp_all = ((1ull << fd.ebits) - 1u) << fd.mbits;
    if (fd.fn) return sign | exp_all | ((1ull << fd.mbits) - 1u);
    uint64_t payload = fs.fn ? 0 : src_bits & ((1ull << fs.mbits) - 1u);
    /* Scale the payload as a fraction of 2^mbits from one width to the other. */
    if (fs.mbits >= fd.mbits) payload /= (1ull << (fs.mbits - fd.mbits));
    else payload *= (1ull << (fd.mbits - fs.mbits));
    return sign | exp_all | (1ull << (fd.mbits - 1)) | payload;
}

/*
 * Sorted table of the non-negative finite values of a format of at most 16 bits, plus the
 * "beyond" entry (see the top of the file). val[k] ascending, pat[k] the matching pattern;
 * count includes the beyond entry (last).
 */
typedef struct ref_table {
    mxp_dtype dtype;
    size_t count;
    double *val;
    uint64_t *pat;
} ref_table;

typedef struct ref_pair {
    double v;
    uint64_t p;
} ref_pair;

static int ref_pair_cmp(const void *a, const void *b)
{
    const ref_pair *x = (const ref_pair *)a, *y = (const ref_pair *)b;
    return (x->v > y->v) - (x->v < y->v);
}

static inline void ref_table_free(ref_table *t)
{
    free(t->val);
    free(t->pat);
    t->val = NULL;
    t->pat = NULL;
    t->count = 0;
}

/* Returns false on allocation failure. Only for 8- and 16-bit formats. */
static inline bool ref_table_init(ref_table *t, mxp_dtype d)
{
    ref_format f = ref_format_of(d);
    const size_t npat = (size_t)1 << (f.bits - 1); /* non-negative patterns */
    ref_pair *pairs = (ref_pair *)malloc((npat + 1) * sizeof *pairs);
    if (!pairs) return false;
    size_t n = 0;
    for (uint64_t p = 0; p < npat; p++) {
        double v = ref_decode(d, p);
        if (isfinite(v)) pairs[n++] = (ref_pair){v, p};
    }
    qsort(pairs, n, sizeof *pairs, ref_pair_cmp);
    /* beyond: one step of the top binade above max finite; its pattern is max + 1 */
    pairs[n] = (ref_pair){pairs[n - 1].v + (pairs[n - 1].v - pairs[n - 2].v), pairs[n - 1].p + 1u};
    n++;
    t->dtype = d;
    t->count = n;
    t->val = (double *)malloc(n * sizeof *t->val);
    t->pat = (uint64_t *)malloc(n * sizeof *t->pat);
    if (!t->val || !t->pat) {
        ref_table_free(t);
        free(pairs);
        return false;
    }
    for (size_t k = 0; k < n; k++) {
        t->val[k] = pairs[k].v;
        t->pat[k] = pairs[k].p;
    }
    free(pairs);
    return true;
}

/*
 * The two neighbours of a magnitude x >= 0 in the target: lo <= x < hi, with their patterns
 * (hi may be the beyond entry). Returns false when x is at or above beyond (overflow).
 */
typedef struct ref_nb {
    double lo, hi;
    uint64_t plo, phi;
} ref_nb;

static inline bool ref_neighbours(const ref_table *t, mxp_dtype d, double x, ref_nb *nb)
{
    if (d == MXP_FLOAT32) {
        const double beyond = ldexp(1.0, 128);
        if (x >= beyond) return false;
        float c = (float)x; /* hardware round-to-nearest; may be +inf near the top */
        if (isinf(c) || (double)c > x) c = nextafterf(c, 0.0f);
        float h = nextafterf(c, INFINITY);
        uint32_t pc, ph;
        memcpy(&pc, &c, 4);
        memcpy(&ph, &h, 4);
        nb->lo = (double)c;
        nb->hi = isinf(h) ? beyond : (double)h;
        nb->plo = pc;
        nb->phi = ph;
        return true;
    }
    const size_t last = t->count - 1; /* beyond */
    if (x >= t->val[last]) return false;
    size_t lo = 0, hi = last; /* invariant: val[lo] <= x < val[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->val[mid] <= x) lo = mid;
        else hi = mid;
    }
    nb->lo = t->val[lo];
    nb->hi = t->val[hi];
    nb->plo = t->pat[lo];
    nb->phi = t->pat[hi];
    return true;
}

/* Top 32 bits of the fraction (x - lo) / (hi - lo), exactly. */
static inline uint64_t ref_fraction32(const ref_nb *nb, double x)
{
    return (uint64_t)floor((x - nb->lo) / (nb->hi - nb->lo) * 4294967296.0);
}

/*
 * Round a finite or infinite, non-NaN x into format d (d != float64). t: the table of d
 * (ignored for float32). sr: stochastic with random word r, else nearest-even.
 */
static inline uint64_t ref_round(const ref_table *t, mxp_dtype d, double x, bool sat, bool sr,
                                 uint32_t r)
{
    const uint64_t sign = signbit(x) ? ref_sign_bit(d) : 0;
    const double m = fabs(x);
    ref_nb nb;
    if (!ref_neighbours(t, d, m, &nb)) return sign | ref_overflow_bits(d, sat);
    uint64_t p;
    if (m == nb.lo) {
        p = nb.plo;
    } else if (sr) {
        p = ref_fraction32(&nb, m) + r >= 4294967296ull ? nb.phi : nb.plo;
    } else {
        const double mid = nb.lo + (nb.hi - nb.lo) / 2;
        if (m < mid) p = nb.plo;
        else if (m > mid) p = nb.phi;
        else p = (nb.plo % 2 == 0) ? nb.plo : nb.phi;
    }
    if (p > ref_maxfin_bits(d)) p = ref_overflow_bits(d, sat);
    return sign | p;
}

/*
 * The expected output pattern of converting one source pattern, for any pair.
 * t: the table of dst when dst is an 8- or 16-bit format (else ignored, may be NULL).
 */
static inline uint64_t ref_convert(const ref_table *t, mxp_dtype dst, mxp_dtype src,
                                   uint64_t src_bits, bool sat, bool sr, uint32_t r)
{
    if (ref_is_nan_bits(src, src_bits)) return ref_nan_bits(dst, src, src_bits);
    const double x = ref_decode(src, src_bits);
    if (isinf(x)) {
        const uint64_t sign = x < 0 ? ref_sign_bit(dst) : 0;
        return sign | ref_overflow_bits(dst, sat);
    }
    if (dst == src) return src_bits;
    if (dst == MXP_FLOAT64) {
        uint64_t b;
        memcpy(&b, &x, 8);
        return b;
    }
    return ref_round(t, dst, x, sat, sr, r);
}

/*
 * For the exhaustive float32 sweep: bounds[k] = the smallest non-negative float32 pattern that
 * rounds (nearest-even) to table entry k, for k = 0 .. count-1 (bounds[0] = 0; entry count-1
 * is "beyond", i.e. overflow). Non-negative float32 patterns increase with their value, so the
 * patterns [bounds[k], bounds[k+1]) all give table entry k. Computed from the midpoints: the
 * smallest float32 >= mid (> mid when a tie goes down to the even entry k-1).
 */
static inline void ref_f32_bounds(const ref_table *t, uint32_t *bounds)
{
    bounds[0] = 0;
    for (size_t k = 1; k < t->count; k++) {
        const double mid = t->val[k - 1] + (t->val[k] - t->val[k - 1]) / 2;
        float c = (float)mid;
        if ((double)c < mid) c = nextafterf(c, INFINITY);
        if ((double)c == mid && t->pat[k - 1] % 2 == 0) c = nextafterf(c, INFINITY);
        uint32_t b;
        memcpy(&b, &c, 4);
        bounds[k] = b;
    }
}

#ifdef MIXPREC_KERNELS_H
/* The r of element `index` of a stochastic conversion from src, from the library's word hash
 * (kernels.h's mxp__sr_bits, the definition of the random stream) but picked apart here, not by
 * the library's mxp__sr_bits_src. With j = index's low half within its block of 2^32 indices:
 * from an e4m3fn source 32 elements share the word of index j / 32 (same block), element index
 * taking its bit index % 32 (bit 0 the least significant) as the top bit of r; from an e5m2
 * source four share the word of index j / 4, element index taking its byte index % 4
 * (little-endian: byte 0 is the low byte) as the top byte of r; from a
 * float16 or bfloat16 source two share the words of j / 2 and 2^31 + j / 2, each taking its half
 * (index % 2) of the first as the top half of r and of the second as the low half; float32 ->
 * bfloat16 takes its r as a 16-bit source does (the low half cannot count there: exactly 16 bits
 * are dropped; the library's kernels leave it 0, this function does not), and so does float32 ->
 * float16 (since session 53; its low half counts below 2^-17); every other pair has a word of
 * its own. */
static inline uint32_t ref_sr_part(uint32_t word, unsigned part, unsigned bytes_per_part)
{
    const unsigned char b[4] = {(unsigned char)(word & 0xFF), (unsigned char)(word >> 8 & 0xFF),
                                (unsigned char)(word >> 16 & 0xFF), (unsigned char)(word >> 24)};
    uint32_t v = 0;
    for (unsigned k = bytes_per_part; k-- > 0;) v = v * 256u + b[part * bytes_per_part + k];
    return v;
}
static inline uint32_t ref_sr_r(uint64_t seed, uint64_t index, mxp_dtype src, mxp_dtype dst)
{
    const unsigned per = src == MXP_FLOAT8_E4M3FN                       ? 32u
                         : src == MXP_FLOAT8_E5M2                       ? 4u
                         : src == MXP_FLOAT16 || src == MXP_BFLOAT16    ? 2u
                         : src == MXP_FLOAT32 && dst == MXP_BFLOAT16    ? 2u
                         : src == MXP_FLOAT32 && dst == MXP_FLOAT16     ? 2u
                                                                        : 1u;
    if (per == 1) return mxp__sr_bits(seed, index);
    const uint64_t block = index & 0xFFFFFFFF00000000ull, j = index & 0xFFFFFFFFull;
    if (per == 32) { /* the bit as a number: the word halved index % 32 times, odd or even */
        uint32_t w = mxp__sr_bits(seed, block + j / 32);
        for (unsigned k = 0; k < (unsigned)(index % 32); k++) w /= 2u;
        return w % 2u ? 0x80000000u : 0u;
    }
    const unsigned part = (unsigned)(index % per);
    if (per == 4) return ref_sr_part(mxp__sr_bits(seed, block + j / 4), part, 1) * 16777216u;
    return ref_sr_part(mxp__sr_bits(seed, block + j / 2), part, 2) * 65536u +
           ref_sr_part(mxp__sr_bits(seed, block + 0x80000000ull + j / 2), part, 2);
}
#endif

#endif /* MIXPREC_TEST_REF_CONVERT_H */
