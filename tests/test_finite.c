/*
 * test_finite.c - all_finite and unscale_check, every floating dtype, every available ISA
 * path, against a reference written here in a different way: values are decoded with ldexp,
 * the float32 product is (float)((double)x * (double)inv) (the double product of two floats
 * is exact, so the cast is the one IEEE rounding), and rounding into a narrow dtype uses
 * nearbyint on value / ulp in double arithmetic (the kernels use integer bit manipulation).
 * The reference is always computed with the default floating-point environment; the kernels
 * are also run with FTZ/DAZ on and with the rounding direction set upward, and must not care.
 */
#include <fenv.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "finite.h"
#include "kernels.h"
#include "mixprec.h"
#include "test_util.h"

/* ---- random ------------------------------------------------------------------------------ */

static uint64_t rng_state = 0x1234567887654321ull;
static uint64_t rnd(void) { return tu_rand64(&rng_state); }

/* ---- formats, described as numbers (not masks) ------------------------------------------ */

typedef struct tfmt {
    const char *name;
    int width, mant, ebits, bias;
    bool fn; /* e4m3fn: no infinities, NaN only s.1111.111 */
} tfmt;

static const tfmt FMT[MXP_FLOAT_DTYPE_COUNT] = {
    [MXP_FLOAT64] = {"float64", 64, 52, 11, 1023, false},
    [MXP_FLOAT32] = {"float32", 32, 23, 8, 127, false},
    [MXP_FLOAT16] = {"float16", 16, 10, 5, 15, false},
    [MXP_BFLOAT16] = {"bfloat16", 16, 7, 8, 127, false},
    [MXP_FLOAT8_E4M3FN] = {"float8_e4m3fn", 8, 3, 4, 7, true},
    [MXP_FLOAT8_E5M2] = {"float8_e5m2", 8, 2, 5, 15, false},
};

static uint64_t get_elem(const unsigned char *p, int width, size_t i)
{
    uint64_t v = 0;
    for (int b = 0; b < width / 8; b++) v |= (uint64_t)p[i * (size_t)(width / 8) + (size_t)b] << (8 * b);
    return v; /* little-endian byte order, as on every supported target */
}

static void set_elem(unsigned char *p, int width, size_t i, uint64_t v)
{
    for (int b = 0; b < width / 8; b++) p[i * (size_t)(width / 8) + (size_t)b] = (unsigned char)(v >> (8 * b));
}

/* Value of a bit pattern as a double (exact for every format here; NaN and inf kept). */
static double ref_decode(const tfmt *f, uint64_t bits)
{
    if (f->width == 64) {
        double d;
        memcpy(&d, &bits, 8);
        return d;
    }
    bool neg = (bits >> (f->width - 1)) & 1;
    uint64_t field = (bits >> f->mant) % (1ull << f->ebits);
    uint64_t frac = bits % (1ull << f->mant);
    double v;
    if (f->fn && field == (1ull << f->ebits) - 1 && frac == (1ull << f->mant) - 1)
        v = (double)NAN;
    else if (!f->fn && field == (1ull << f->ebits) - 1)
        v = frac ? (double)NAN : (double)INFINITY;
    else if (field == 0)
        v = ldexp((double)frac, 1 - f->bias - f->mant);
    else
        v = ldexp((double)(frac + (1ull << f->mant)), (int)field - f->bias - f->mant);
    return neg ? -v : v;
}

static bool ref_finite(const tfmt *f, uint64_t bits) { return isfinite(ref_decode(f, bits)); }

static double max_finite(const tfmt *f)
{
    if (f->fn) return ldexp(2.0 - ldexp(1.0, 1 - f->mant), (1 << f->ebits) - 1 - f->bias);
    return ldexp(2.0 - ldexp(1.0, -f->mant), (1 << f->ebits) - 2 - f->bias);
}

/* Round a double (not NaN) to nearest-even in narrow format f and encode it. */
static uint64_t ref_encode(const tfmt *f, double v)
{
    uint64_t sign = signbit(v) ? 1ull << (f->width - 1) : 0;
    uint64_t inf_bits = f->fn ? (1ull << (f->width - 1)) - 1 : ((1ull << f->ebits) - 1) << f->mant;
    double a = fabs(v);
    if (a == 0) return sign;
    int emin = 1 - f->bias;
    if (isinf(a)) return sign | inf_bits;
    int e = ilogb(a) < emin ? emin : ilogb(a);
    double ulp = ldexp(1.0, e - f->mant);
    double r = nearbyint(a / ulp) * ulp;
    if (r > max_finite(f)) return sign | inf_bits;
    if (r == 0) return sign;
    if (r < ldexp(1.0, emin)) return sign | (uint64_t)(r / ldexp(1.0, emin - f->mant));
    int er = ilogb(r);
    uint64_t m = (uint64_t)(r / ldexp(1.0, er - f->mant)) - (1ull << f->mant);
    return sign | ((uint64_t)(er + f->bias) << f->mant) | m;
}

static uint32_t fbits(float f) { return tu_bits32(f); }
static float bitsf(uint32_t u) { return tu_f32(u); }

/* The reference result of unscaling one element x (pattern of dtype d) by inv. */
static uint64_t ref_unscale(mxp_dtype d, uint64_t x, float inv)
{
    const tfmt *f = &FMT[d];
    double xv = ref_decode(f, x), iv = (double)inv;
    if (d == MXP_FLOAT64) {
        if (isnan(xv)) return x | (1ull << 51);
        if (isnan(iv)) {
            double w = iv;
            uint64_t u;
            memcpy(&u, &w, 8);
            return u | (1ull << 51);
        }
        if ((isinf(xv) && iv == 0) || (xv == 0 && isinf(iv))) return 0xFFF8000000000000ull;
        double p = xv * iv;
        uint64_t u;
        memcpy(&u, &p, 8);
        return u;
    }
    /* the float32 product, NaN rules of x86 */
    uint32_t p;
    if (isnan(xv))
        p = (signbit(xv) ? 0x80000000u : 0) | 0x7FC00000u | (d == MXP_FLOAT32 ? (uint32_t)x : 0);
    else if (isnan(iv))
        p = fbits(inv) | 0x00400000u;
    else if ((isinf(xv) && iv == 0) || (xv == 0 && isinf(iv)))
        p = 0xFFC00000u;
    else
        p = fbits((float)(xv * iv)); /* exact double product, one rounding */
    if (d == MXP_FLOAT32) return p;
    float pf = bitsf(p);
    if (isnan(pf)) {
        uint64_t sign = (p >> 31) ? 1ull << (f->width - 1) : 0;
        uint64_t qnan = f->fn ? 0x7F : (((1ull << f->ebits) - 1) << f->mant) | (1ull << (f->mant - 1));
        return sign | qnan;
    }
    return ref_encode(f, (double)pf);
}

/* ---- helpers to run kernels ------------------------------------------------------------ */

static int skipped_isas = 0;

static const mxp__kernels *isa_table(int isa)
{
    const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
    return k;
}

static void report_skips(void)
{
    static bool done = false;
    if (done) return;
    done = true;
    for (int isa = 0; isa < MXP__ISA_COUNT; isa++)
        if (!isa_table(isa)) {
            skipped_isas++;
            print_message("[ SKIPPED  ] ISA %s: not available on this CPU/build\n",
                          mxp__isa_name((mxp__isa_id)isa));
        }
}

/* Check an unscale call on every ISA against the reference; returns number of mismatches. */
static void check_unscale(mxp_dtype d, const unsigned char *src, size_t n, float inv, size_t offset,
                          const char *what)
{
    const tfmt *f = &FMT[d];
    size_t es = (size_t)f->width / 8;
    unsigned char *want = malloc(n * es + 1), *buf = malloc(n * es + 64);
    assert_non_null(want);
    assert_non_null(buf);
    bool want_ok = true;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = get_elem(src, f->width, i);
        uint64_t r = ref_unscale(d, x, inv);
        set_elem(want, f->width, i, r);
        want_ok = want_ok && ref_finite(f, x) && ref_finite(f, r);
    }
    for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *k = isa_table(isa);
        if (!k) continue;
        unsigned char *x = buf + offset;
        memcpy(x, src, n * es);
        bool ok = k->unscale_check[d](x, n, inv);
        for (size_t i = 0; i < n; i++) {
            uint64_t g = get_elem(x, f->width, i), w = get_elem(want, f->width, i);
            if (g != w)
                fail_msg("%s unscale %s (%s) n=%zu off=%zu: element %zu input 0x%llx inv %a: want "
                         "0x%llx got 0x%llx",
                         k->name, f->name, what, n, offset, i,
                         (unsigned long long)get_elem(src, f->width, i), (double)inv,
                         (unsigned long long)w, (unsigned long long)g);
        }
        if (ok != want_ok)
            fail_msg("%s unscale %s (%s) n=%zu off=%zu inv %a: returned %d, want %d", k->name, f->name,
                     what, n, offset, (double)inv, ok, want_ok);
    }
    free(want);
    free(buf);
}

static uint64_t random_finite(const tfmt *f)
{
    for (;;) {
        uint64_t v = rnd();
        if (f->width < 64) v &= (1ull << f->width) - 1;
        if (ref_finite(f, v)) return v;
    }
}

static uint64_t nan_bits(const tfmt *f, bool neg)
{
    uint64_t s = neg ? 1ull << (f->width - 1) : 0;
    if (f->fn) return s | 0x7F;
    return s | (((1ull << f->ebits) - 1) << f->mant) | 1; /* a signalling NaN, payload 1 */
}

static uint64_t inf_bits(const tfmt *f, bool neg)
{
    uint64_t s = neg ? 1ull << (f->width - 1) : 0;
    if (f->fn) return s | 0x7F; /* no infinity: NaN */
    return s | (((1ull << f->ebits) - 1) << f->mant);
}

/* ---- tests ------------------------------------------------------------------------------- */

/* NaN / inf planted at every position, sizes 0..100, unaligned, every dtype and ISA. */
static void test_all_finite_planted(void **state)
{
    (void)state;
    report_skips();
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++) {
        const tfmt *f = &FMT[d];
        size_t es = (size_t)f->width / 8;
        unsigned char *src = malloc(140 * es), *buf = malloc(140 * es + 16);
        for (size_t n = 0; n <= 130; n++) {
            for (size_t i = 0; i < n; i++) set_elem(src, f->width, i, random_finite(f));
            for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
                const mxp__kernels *k = isa_table(isa);
                if (!k) continue;
                size_t off = 1 + n % 7;
                memcpy(buf + off, src, n * es);
                if (!k->all_finite[d](buf + off, n))
                    fail_msg("%s all_finite %s n=%zu: false on finite data", k->name, f->name, n);
                for (size_t pos = 0; pos < n; pos++) {
                    for (int kind = 0; kind < 4; kind++) {
                        uint64_t bad = kind < 2 ? nan_bits(f, kind) : inf_bits(f, kind == 3);
                        uint64_t old = get_elem(buf + off, f->width, pos);
                        set_elem(buf + off, f->width, pos, bad);
                        if (k->all_finite[d](buf + off, n))
                            fail_msg("%s all_finite %s n=%zu: true with 0x%llx at %zu", k->name,
                                     f->name, n, (unsigned long long)bad, pos);
                        set_elem(buf + off, f->width, pos, old);
                    }
                }
            }
        }
        free(src);
        free(buf);
    }
}

/* unscale_check with random finite data and NaN/inf planted at every position. */
static void test_unscale_planted(void **state)
{
    (void)state;
    report_skips();
    static const float scales[] = {32768.0f, 3.0f, 0.1f};
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++) {
        const tfmt *f = &FMT[d];
        size_t es = (size_t)f->width / 8;
        unsigned char *src = malloc(140 * es);
        for (size_t n = 0; n <= 100; n++) {
            float inv = (float)(1.0 / (double)scales[n % 3]);
            for (size_t i = 0; i < n; i++) set_elem(src, f->width, i, random_finite(f));
            check_unscale((mxp_dtype)d, src, n, inv, 1 + n % 5, "finite");
            for (size_t pos = 0; pos < n; pos++) {
                uint64_t old = get_elem(src, f->width, pos);
                set_elem(src, f->width, pos, (pos & 1) ? nan_bits(f, pos & 2) : inf_bits(f, pos & 2));
                check_unscale((mxp_dtype)d, src, n, inv, pos % 4, "planted");
                set_elem(src, f->width, pos, old);
            }
        }
        free(src);
    }
}

/* inv values that exercise normal, subnormal and overflowing results, and odd scales. */
static const float test_scales[] = {1.0f,     2.0f,    65536.0f, 3.0f,   0.7f,   0x1p-20f,
                                    0x1p20f,  0x1p40f, 1e-30f,   1e30f,  0x1p127f, 0x1.fffffep127f,
                                    -4.0f,    0.0f,    INFINITY, NAN,    1e-45f, 12345.678f};
#define NSCALES (sizeof test_scales / sizeof test_scales[0])

/* Every 16-bit pattern of float16 and bfloat16, every 8-bit pattern of the float8s. */
static void test_unscale_exhaustive_narrow(void **state)
{
    (void)state;
    report_skips();
    static const mxp_dtype ds[] = {MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    for (size_t t = 0; t < sizeof ds / sizeof ds[0]; t++) {
        const tfmt *f = &FMT[ds[t]];
        size_t n = (size_t)1 << f->width;
        unsigned char *src = malloc(n * (size_t)f->width / 8);
        for (size_t i = 0; i < n; i++) set_elem(src, f->width, i, i);
        for (size_t s = 0; s < NSCALES; s++) {
            float inv = (float)(1.0 / (double)test_scales[s]);
            check_unscale(ds[t], src, n, inv, s % 3, "all patterns");
        }
        /* inv values (passed straight to the kernels) that land products exactly on the
         * overflow ties: e4m3fn 16 * 29 = 464 (-> 448), e5m2 4096 * 15 = 61440 (-> inf),
         * float16 65504 * (1 + 2^-12) ~ 65520 (-> inf), and one ulp either side */
        static const float invs[] = {29.0f, 0x1.cffffep+4f, 0x1.d00002p+4f, 15.0f, 0x1.dffffep+3f,
                                     0x1.e00002p+3f, 0x1.002p+0f, 0x1.001ffep+0f, 0x1.002002p+0f};
        for (size_t s = 0; s < sizeof invs / sizeof invs[0]; s++)
            check_unscale(ds[t], src, n, invs[s], 0, "overflow ties");
        free(src);
    }
}

/* float32 / float64: random patterns (all classes), subnormal inputs and results. */
static void test_unscale_wide(void **state)
{
    (void)state;
    report_skips();
    size_t n = 1 << 16;
    unsigned char *src = malloc(n * 8);
    for (int d = 0; d <= MXP_FLOAT32; d++) {
        const tfmt *f = &FMT[d];
        for (size_t s = 0; s < NSCALES; s++) {
            for (size_t i = 0; i < n; i++) {
                uint64_t v = rnd();
                int mode = (int)(i % 4);
                if (f->width == 32) {
                    v &= 0xFFFFFFFFu;
                    if (mode == 1) v &= 0x80FFFFFFu;        /* tiny: subnormal or near it */
                    if (mode == 2) v = (v & 0x83FFFFFFu) | 0x04000000u; /* small */
                } else {
                    if (mode == 1) v &= 0x801FFFFFFFFFFFFFull;
                    if (mode == 2) v = (v & 0x803FFFFFFFFFFFFFull) | 0x0010000000000000ull;
                }
                set_elem(src, f->width, i, v);
            }
            float inv = (float)(1.0 / (double)test_scales[s]);
            check_unscale((mxp_dtype)d, src, n, inv, s % 8, "random patterns");
        }
    }
    free(src);
}

/* Every ISA against the scalar kernel (itself checked against the reference above): used for
 * buffers too large for the slow reference. */
static void check_against_scalar(mxp_dtype d, const unsigned char *src, size_t n, float inv,
                                 size_t offset, const char *what)
{
    const tfmt *f = &FMT[d];
    size_t es = (size_t)f->width / 8;
    unsigned char *want = malloc(n * es), *buf = malloc(n * es + 64);
    assert_non_null(want);
    assert_non_null(buf);
    memcpy(want, src, n * es);
    bool want_ok = mxp__scalar_kernels()->unscale_check[d](want, n, inv);
    for (int isa = 1; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *k = isa_table(isa);
        if (!k) continue;
        memcpy(buf + offset, src, n * es);
        bool ok = k->unscale_check[d](buf + offset, n, inv);
        if (memcmp(buf + offset, want, n * es) != 0 || ok != want_ok) {
            size_t i = 0;
            while (i < n && get_elem(buf + offset, f->width, i) == get_elem(want, f->width, i)) i++;
            fail_msg("%s unscale %s (%s) n=%zu off=%zu: returned %d want %d; first difference at %zu",
                     k->name, f->name, what, n, offset, ok, want_ok, i);
        }
    }
    free(want);
    free(buf);
}

/* Buffers past 16 MiB take the non-temporal-store path of the SIMD kernels (aligned head
 * done separately); element-aligned and misaligned starts, NaN/inf near both ends. */
static void test_unscale_large(void **state)
{
    (void)state;
    static const mxp_dtype ds[] = {MXP_FLOAT32, MXP_BFLOAT16, MXP_FLOAT16};
    for (size_t t = 0; t < 3; t++) {
        const tfmt *f = &FMT[ds[t]];
        size_t es = (size_t)f->width / 8, n = ((size_t)17 << 20) / es + 77;
        unsigned char *src = malloc(n * es);
        assert_non_null(src);
        for (size_t i = 0; i < n; i++) set_elem(src, f->width, i, random_finite(f));
        check_against_scalar(ds[t], src, n, 0.25f, es, "large, finite");
        set_elem(src, f->width, 3, nan_bits(f, true));
        set_elem(src, f->width, n / 2, nan_bits(f, false));
        set_elem(src, f->width, n - 2, inf_bits(f, false));
        check_against_scalar(ds[t], src, n, 1.0f / 3.0f, es * 3, "large, planted");
        check_against_scalar(ds[t], src, n, 4.0f, 1, "large, misaligned");
        free(src);
    }
}

/* Results do not depend on FTZ/DAZ nor on the rounding direction. */
static void test_unscale_fp_modes(void **state)
{
    (void)state;
    report_skips();
    size_t n = 4096;
    for (int mode = 0; mode < 2; mode++) {
        for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++) {
            const tfmt *f = &FMT[d];
            size_t es = (size_t)f->width / 8;
            unsigned char *src = malloc(n * es), *want = malloc(n * es), *buf = malloc(n * es);
            for (size_t s = 0; s < NSCALES; s++) {
                float inv = (float)(1.0 / (double)test_scales[s]);
                for (size_t i = 0; i < n; i++) {
                    uint64_t v = rnd() & (f->width == 64 ? ~0ull : (1ull << f->width) - 1);
                    if (i % 2 && f->width >= 32) /* tiny magnitudes: subnormal in or out */
                        v &= f->width == 32 ? 0x80FFFFFFull : 0x803FFFFFFFFFFFFFull;
                    set_elem(src, f->width, i, v);
                    set_elem(want, f->width, i, ref_unscale((mxp_dtype)d, v, inv));
                }
                for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
                    const mxp__kernels *k = isa_table(isa);
                    if (!k) continue;
                    memcpy(buf, src, n * es);
                    if (mode == 0) {
                        if (!mxp__fp_set_flush_denormals(true)) {
                            print_message("[ SKIPPED  ] FTZ/DAZ cannot be set on this target\n");
                            break; /* the rounding-direction half still runs */
                        }
                        k->unscale_check[d](buf, n, inv);
                        mxp__fp_set_flush_denormals(false);
                    } else {
                        assert_int_equal(fesetround(FE_UPWARD), 0);
                        k->unscale_check[d](buf, n, inv);
                        fesetround(FE_TONEAREST);
                    }
                    for (size_t i = 0; i < n; i++)
                        if (get_elem(buf, f->width, i) != get_elem(want, f->width, i))
                            fail_msg("%s %s with %s: element %zu input 0x%llx inv %a: want 0x%llx "
                                     "got 0x%llx",
                                     k->name, f->name, mode == 0 ? "FTZ+DAZ" : "FE_UPWARD", i,
                                     (unsigned long long)get_elem(src, f->width, i), (double)inv,
                                     (unsigned long long)get_elem(want, f->width, i),
                                     (unsigned long long)get_elem(buf, f->width, i));
                }
            }
            free(src), free(want), free(buf);
        }
    }
}

/* all_finite on every pattern of the narrow formats, one element at a time and in blocks. */
static void test_all_finite_patterns(void **state)
{
    (void)state;
    report_skips();
    for (int d = MXP_FLOAT16; d < MXP_FLOAT_DTYPE_COUNT; d++) {
        const tfmt *f = &FMT[d];
        size_t n = (size_t)1 << f->width, es = (size_t)f->width / 8;
        unsigned char *src = malloc(n * es);
        for (size_t i = 0; i < n; i++) set_elem(src, f->width, i, i);
        for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
            const mxp__kernels *k = isa_table(isa);
            if (!k) continue;
            for (size_t i = 0; i < n; i++) {
                bool want = ref_finite(f, i);
                /* a block of 37 finite zeros with the pattern in the middle */
                unsigned char blk[37 * 2] = {0};
                set_elem(blk, f->width, 18, i);
                if (k->all_finite[d](src + i * es, 1) != want ||
                    k->all_finite[d](blk, 37) != want)
                    fail_msg("%s all_finite %s pattern 0x%zx: want %d", k->name, f->name, i, want);
            }
        }
        free(src);
    }
}

/* inv = (float)(1.0 / (double)scale) bit for bit, also with FTZ/DAZ on and rounding upward. */
static void test_inv(void **state)
{
    (void)state;
    bool can_ftz = mxp__fp_set_flush_denormals(false);
    for (uint64_t k = 0; k < (1ull << 32); k += 1021) {
        uint32_t b = (uint32_t)(k ^ (rnd() & 0x3FF));
        float sc = bitsf(b);
        uint32_t want = fbits((float)(1.0 / (double)sc));
        uint32_t got = fbits(mxp__unscale_inv(sc));
        if (isnan(sc)) want |= 0x00400000u; /* NaN: quieted scale (x86 and AArch64 agree) */
        if (got != want) fail_msg("inv of 0x%08x: want 0x%08x got 0x%08x", b, want, got);
        if ((k / 1021) % 64 == 0) {
            if (can_ftz) {
                mxp__fp_set_flush_denormals(true);
                uint32_t g2 = fbits(mxp__unscale_inv(sc));
                mxp__fp_set_flush_denormals(false);
                if (g2 != want) fail_msg("inv of 0x%08x with FTZ/DAZ: 0x%08x", b, g2);
            }
            fesetround(FE_UPWARD);
            uint32_t g3 = fbits(mxp__unscale_inv(sc));
            fesetround(FE_TONEAREST);
            if (g3 != want) fail_msg("inv of 0x%08x with FE_UPWARD: 0x%08x", b, g3);
        }
    }
    /* the public call uses it: a huge scale gives a subnormal inv even under FTZ */
    if (can_ftz) {
        float x[2] = {0x1p100f, 1.0f};
        mxp__fp_set_flush_denormals(true);
        bool ok = mxp_unscale_check(x, MXP_FLOAT32, 2, 0x1p127f);
        mxp__fp_set_flush_denormals(false);
        assert_true(ok);
        assert_true(x[0] == 0x1p-27f && x[1] == 0x1p-127f);
    }
}

/* The rounding into the element dtype is the one mxp_convert does (float32 -> dtype,
 * nearest-even): every pattern of the 16- and 8-bit dtypes, a few inv values. NaN payloads
 * are not promised by mxp_convert, so NaN results are compared by sign only. */
static void test_agrees_with_convert(void **state)
{
    (void)state;
    static const mxp_dtype ds[] = {MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    static const float invs[] = {1.0f, 0x1p-20f, 3.0f, 0.1f, 29.0f, 0x1p+20f};
    for (size_t t = 0; t < 4; t++) {
        const tfmt *f = &FMT[ds[t]];
        size_t n = (size_t)1 << f->width, es = (size_t)f->width / 8;
        unsigned char *x = malloc(n * es), *via = malloc(n * es);
        float *prod = malloc(n * sizeof *prod);
        for (size_t s = 0; s < sizeof invs / sizeof invs[0]; s++) {
            float scale = (float)(1.0 / (double)invs[s]);
            float inv = (float)(1.0 / (double)scale); /* what mxp_unscale_check multiplies by */
            for (size_t i = 0; i < n; i++) {
                set_elem(x, f->width, i, i);
                prod[i] = bitsf((uint32_t)ref_unscale(MXP_FLOAT32, fbits((float)ref_decode(f, i)), inv));
            }
            mxp_unscale_check(x, ds[t], n, scale);
            assert_int_equal(mxp_convert(via, ds[t], prod, MXP_FLOAT32, n), MXP_OK);
            for (size_t i = 0; i < n; i++) {
                uint64_t a = get_elem(x, f->width, i), b = get_elem(via, f->width, i);
                bool an = isnan(ref_decode(f, a)), bn = isnan(ref_decode(f, b));
                bool same = (an || bn) ? (an && bn && (a >> (f->width - 1)) == (b >> (f->width - 1)))
                                       : a == b;
                if (!same)
                    fail_msg("%s pattern 0x%zx inv %a: unscale 0x%llx, mxp_convert of the float32 "
                             "product %a gives 0x%llx",
                             f->name, i, (double)inv, (unsigned long long)a, (double)prod[i],
                             (unsigned long long)b);
            }
        }
        free(x), free(via), free(prod);
    }
}

/* The public entry points: argument handling and dispatch. */
static void test_public_api(void **state)
{
    (void)state;
    float v[5] = {1.0f, -2.0f, 0.5f, 0x1p-149f, 3.0f};
    assert_true(mxp_all_finite(v, MXP_FLOAT32, 5));
    assert_true(mxp_all_finite(NULL, MXP_FLOAT32, 0));
    assert_false(mxp_all_finite(NULL, MXP_FLOAT32, 3));
    assert_false(mxp_all_finite(v, (mxp_dtype)77, 3));
    int32_t ints[2] = {-1, 0x7F800000};
    assert_true(mxp_all_finite(ints, MXP_INT32, 2)); /* integers are always finite */
    v[2] = NAN;
    assert_false(mxp_all_finite(v, MXP_FLOAT32, 5));
    v[2] = 0.5f;
    /* unscale: x * (float)(1/(double)scale) */
    assert_true(mxp_unscale_check(v, MXP_FLOAT32, 5, 4.0f));
    assert_true(v[0] == 0.25f && v[1] == -0.5f && v[2] == 0.125f && v[3] == 0.0f && v[4] == 0.75f);
    float w[2] = {3.0f, 1.0f};
    assert_true(mxp_unscale_check(w, MXP_FLOAT32, 2, 3.0f));
    assert_true(w[0] == 3.0f * (float)(1.0 / 3.0) && w[1] == (float)(1.0 / 3.0));
    assert_true(mxp_unscale_check(NULL, MXP_FLOAT16, 0, 2.0f));
    assert_false(mxp_unscale_check(NULL, MXP_FLOAT16, 4, 2.0f));
    assert_false(mxp_unscale_check(ints, MXP_INT32, 2, 2.0f));
    assert_int_equal(ints[0], -1); /* untouched */
    /* float16 result that overflows with a scale below 1 */
    uint16_t h[3] = {0x7BFF /* 65504 */, 0x3C00 /* 1 */, 0x0001};
    assert_false(mxp_unscale_check(h, MXP_FLOAT16, 3, 0.5f));
    assert_int_equal(h[0], 0x7C00);
    assert_int_equal(h[1], 0x4000);
    assert_int_equal(h[2], 0x0002); /* subnormal kept */
    /* every element processed after a non-finite one */
    double dd[3] = {(double)INFINITY, 8.0, -2.0};
    assert_false(mxp_unscale_check(dd, MXP_FLOAT64, 3, 2.0f));
    assert_true(dd[1] == 4.0 && dd[2] == -1.0);
    /* scale 0 and NaN make everything non-finite */
    float z[1] = {1.0f};
    assert_false(mxp_unscale_check(z, MXP_FLOAT32, 1, 0.0f));
    assert_true(isinf(z[0]));
    z[0] = 1.0f;
    assert_false(mxp_unscale_check(z, MXP_FLOAT32, 1, NAN));
    assert_true(isnan(z[0]));
}

/* The public passes with every floating-point exception unmasked and no flag set (x86): no
 * trap (SIGFPE would end the test), the same answers and products as under the default
 * environment, and MXCSR exactly as before each call. */
static void test_public_api_fenv(void **state)
{
    (void)state;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    const size_t n = 3001;
    const unsigned old = __builtin_ia32_stmxcsr();
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++) {
        const tfmt *f = &FMT[d];
        const size_t es = (size_t)f->width / 8;
        unsigned char *src = malloc(n * es), *want = malloc(n * es), *buf = malloc(n * es);
        assert_non_null(src);
        assert_non_null(want);
        assert_non_null(buf);
        for (int finite = 0; finite < 2; finite++) {
            const float scale = finite ? 3.0f : 0x1p-20f; /* 2^20 times: overflow and inexact */
            const float inv = (float)(1.0 / (double)scale);
            for (size_t i = 0; i < n; i++) {
                uint64_t v = rnd() & (f->width == 64 ? ~0ull : (1ull << f->width) - 1);
                if (finite) v &= f->width == 64 ? 0xBFFFFFFFFFFFFFFFull : (1ull << (f->width - 2)) - 1u;
                set_elem(src, f->width, i, v);
                set_elem(want, f->width, i, ref_unscale((mxp_dtype)d, v, inv));
            }
            const bool want_fin = mxp_all_finite(src, (mxp_dtype)d, n);
            memcpy(buf, src, n * es);
            const bool want_ok = mxp_unscale_check(buf, (mxp_dtype)d, n, scale);
            memcpy(buf, src, n * es);
            __builtin_ia32_ldmxcsr(0x0000u); /* every exception unmasked, no flag */
            const bool fin = mxp_all_finite(src, (mxp_dtype)d, n);
            const unsigned after1 = __builtin_ia32_stmxcsr();
            const bool ok = mxp_unscale_check(buf, (mxp_dtype)d, n, scale);
            const unsigned after2 = __builtin_ia32_stmxcsr();
            __builtin_ia32_ldmxcsr(old);
            if (after1 != 0 || after2 != 0)
                fail_msg("%s: MXCSR 0x%04x after mxp_all_finite, 0x%04x after mxp_unscale_check", f->name,
                         after1, after2);
            assert_true(fin == want_fin);
            assert_true(ok == want_ok);
            for (size_t i = 0; i < n; i++)
                if (get_elem(buf, f->width, i) != get_elem(want, f->width, i))
                    fail_msg("%s unscale with exceptions unmasked: element %zu: want 0x%llx got 0x%llx", f->name,
                             i, (unsigned long long)get_elem(want, f->width, i),
                             (unsigned long long)get_elem(buf, f->width, i));
        }
        free(src), free(want), free(buf);
    }
#else
    print_message("no MXCSR on this target: skipped\n");
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_public_api),
        cmocka_unit_test(test_public_api_fenv),
        cmocka_unit_test(test_inv),
        cmocka_unit_test(test_all_finite_planted),
        cmocka_unit_test(test_all_finite_patterns),
        cmocka_unit_test(test_unscale_planted),
        cmocka_unit_test(test_unscale_exhaustive_narrow),
        cmocka_unit_test(test_unscale_wide),
        cmocka_unit_test(test_unscale_fp_modes),
        cmocka_unit_test(test_unscale_large),
        cmocka_unit_test(test_agrees_with_convert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
