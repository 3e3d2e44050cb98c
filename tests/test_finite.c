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
                                    -4.0f,    0.0f,    INFINITY, NAN,    1e-45f, 12345.678f,
                                    0x1p110f, 0x1p-110f};
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
    /* a scale that is not finite and > 0 is refused: false, x untouched, a message */
    static const float bad_scales[] = {0.0f, -0.0f, -4.0f, -0x1p-149f, NAN, -NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad_scales / sizeof bad_scales[0]; i++) {
        float z[3] = {1.0f, -2.0f, 0.5f};
        mxp_clear_error();
        assert_false(mxp_unscale_check(z, MXP_FLOAT32, 3, bad_scales[i]));
        assert_true(z[0] == 1.0f && z[1] == -2.0f && z[2] == 0.5f);
        assert_non_null(strstr(mxp_last_error(), "not a loss scale"));
        bool fin = true;
        assert_int_equal(mxp_unscale_check_s(z, MXP_FLOAT32, 3, bad_scales[i], &fin), MXP_EINVAL);
        assert_true(fin && z[0] == 1.0f);
        assert_int_equal(mxp_unscale_check_s(NULL, MXP_FLOAT32, 0, bad_scales[i], &fin), MXP_EINVAL);
    }
    /* a positive finite scale whose inverse overflows (a subnormal scale) is a valid call whose
     * results are not finite */
    float z[1] = {1.0f};
    bool fin = true;
    assert_int_equal(mxp_unscale_check_s(z, MXP_FLOAT32, 1, 0x1p-149f, &fin), MXP_OK);
    assert_false(fin);
    assert_true(isinf(z[0]));
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

/* ---- unscale_check_into: scaled float32 / float16 / bfloat16 / float8 -> float32 ----------- */

static const mxp_dtype into_srcs[] = {MXP_FLOAT32, MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN,
                                      MXP_FLOAT8_E5M2};
#define NINTO (sizeof into_srcs / sizeof into_srcs[0])

/* The reference float32 result of unscaling x (a pattern of st) into float32: the value of x
 * as a double (ref_decode, ldexp), times inv in double (exact: two 24-bit significands), cast
 * to float once. NaN input: the float32 quiet NaN with x's sign and payload moved to the top of
 * the float32 fraction (e4m3fn's NaN has none); NaN inv: inv quieted; 0 * inf: the x86 default
 * NaN 0xFFC00000. */
static uint32_t ref_into(mxp_dtype st, uint64_t x, float inv)
{
    const tfmt *f = &FMT[st];
    double xv = ref_decode(f, x), iv = (double)inv;
    if (isnan(xv)) {
        uint32_t sign = ((x >> (f->width - 1)) & 1) ? 0x80000000u : 0u;
        uint32_t payload = f->fn ? 0u : (uint32_t)((x % (1ull << f->mant)) << (23 - f->mant));
        return sign | 0x7FC00000u | payload;
    }
    if (isnan(iv)) return fbits(inv) | 0x00400000u;
    if ((isinf(xv) && iv == 0) || (xv == 0 && isinf(iv))) return 0xFFC00000u;
    return fbits((float)(xv * iv));
}

static bool f32_finite(uint32_t b) { return (b & 0x7F800000u) != 0x7F800000u; }

enum { GUARD = 16 };

/* Every ISA's unscale_into[st] on src (n elements), the source at byte offset soff and the
 * destination at byte offset doff of their buffers (so both are unaligned in every way), must
 * give want[] and want_ok, and leave the guard bytes after dst alone. */
static void expect_into(mxp_dtype st, const unsigned char *src, size_t n, float inv,
                        const uint32_t *want, bool want_ok, size_t soff, size_t doff,
                        const char *what)
{
    const tfmt *f = &FMT[st];
    size_t es = (size_t)f->width / 8;
    unsigned char *sbuf = malloc(n * es + soff + 1), *dbuf = malloc(4 * n + doff + GUARD);
    assert_non_null(sbuf);
    assert_non_null(dbuf);
    memcpy(sbuf + soff, src, n * es);
    for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *k = isa_table(isa);
        if (!k) continue;
        memset(dbuf, 0xA5, 4 * n + doff + GUARD);
        bool ok = k->unscale_into[st](dbuf + doff, sbuf + soff, n, inv);
        for (size_t i = tu_first_diff(want, dbuf + doff, n, 4); i < n; i++) {
            uint32_t g = (uint32_t)get_elem(dbuf + doff, 32, i);
            if (g != want[i])
                fail_msg("%s unscale_into %s -> float32 (%s) n=%zu soff=%zu doff=%zu: element %zu "
                         "input 0x%llx inv %a: want 0x%08x got 0x%08x",
                         k->name, f->name, what, n, soff, doff, i,
                         (unsigned long long)get_elem(src, f->width, i), (double)inv, want[i], g);
        }
        for (size_t i = 0; i < GUARD; i++)
            if (dbuf[doff + 4 * n + i] != 0xA5)
                fail_msg("%s unscale_into %s (%s) n=%zu: wrote past the end (byte %zu)", k->name,
                         f->name, what, n, i);
        for (size_t i = 0; i < doff; i++)
            if (dbuf[i] != 0xA5) fail_msg("%s unscale_into %s: wrote before dst", k->name, f->name);
        if (ok != want_ok)
            fail_msg("%s unscale_into %s (%s) n=%zu inv %a: returned %d, want %d", k->name, f->name,
                     what, n, (double)inv, ok, want_ok);
    }
    free(sbuf);
    free(dbuf);
}

/* want[] and the expected return value for src by the reference. */
static bool ref_into_all(mxp_dtype st, const unsigned char *src, size_t n, float inv, uint32_t *want)
{
    const tfmt *f = &FMT[st];
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = get_elem(src, f->width, i);
        want[i] = ref_into(st, x, inv);
        ok = ok && ref_finite(f, x) && f32_finite(want[i]);
    }
    return ok;
}

/* Sizes 0..1000, unaligned source and destination, random finite data and NaN / inf planted:
 * at every position for sizes 0..70, around the vector and block widths and 1000; at the ends,
 * the middle and three random places for every other size. */
static void test_unscale_into_planted(void **state)
{
    (void)state;
    report_skips();
    static const float scales[] = {65536.0f, 3072.0f, 0.1f, 0x1p120f};
    enum { MAXN = 1000 };
    uint32_t *want = malloc(MAXN * sizeof *want);
    unsigned char *src = malloc(MAXN * 4);
    assert_non_null(want);
    assert_non_null(src);
    for (size_t t = 0; t < NINTO; t++) {
        const mxp_dtype st = into_srcs[t];
        const tfmt *f = &FMT[st];
        for (size_t n = 0; n <= MAXN; n++) {
            float inv = (float)(1.0 / (double)scales[n % 4]);
            for (size_t i = 0; i < n; i++) set_elem(src, f->width, i, random_finite(f));
            bool ok = ref_into_all(st, src, n, inv, want);
            assert_true(ok || scales[n % 4] < 1.0f); /* finite data, no overflow at scale >= 1 */
            size_t soff = n % 5, doff = 1 + n % 3;
            expect_into(st, src, n, inv, want, ok, soff, doff, "finite");
            bool every = n <= 70 || (n >= 127 && n <= 129) || (n >= 255 && n <= 257) || n == MAXN;
            size_t picks[6] = {0, 1, n / 2, n - 2, (size_t)(rnd() % (n + 1)), (size_t)(rnd() % (n + 1))};
            size_t npos = every ? n : 6;
            for (size_t k = 0; k < npos; k++) {
                size_t pos = every ? k : picks[k];
                if (pos >= n) continue;
                uint64_t old = get_elem(src, f->width, pos);
                uint32_t old_want = want[pos];
                uint64_t bad = (pos & 1) ? nan_bits(f, pos & 2) : inf_bits(f, pos & 2);
                set_elem(src, f->width, pos, bad);
                want[pos] = ref_into(st, bad, inv);
                expect_into(st, src, n, inv, want, false, (soff + pos) % 7, (doff + pos) % 5, "planted");
                set_elem(src, f->width, pos, old);
                want[pos] = old_want;
            }
        }
    }
    free(want);
    free(src);
}

/* Every 16-bit pattern of float16 / bfloat16 and 8-bit pattern of the float8s, and random
 * float32 patterns (dense in tiny and subnormal values), at every test scale. */
static void test_unscale_into_patterns(void **state)
{
    (void)state;
    report_skips();
    size_t nmax = (size_t)1 << 16;
    unsigned char *src = malloc(nmax * 4);
    uint32_t *want = malloc(nmax * sizeof *want);
    assert_non_null(src);
    assert_non_null(want);
    for (size_t t = 0; t < NINTO; t++) {
        const mxp_dtype st = into_srcs[t];
        const tfmt *f = &FMT[st];
        size_t n = f->width == 32 ? nmax : (size_t)1 << f->width;
        for (size_t sc = 0; sc < NSCALES; sc++) {
            for (size_t i = 0; i < n; i++) {
                uint64_t v = i;
                if (f->width == 32) {
                    v = rnd() & 0xFFFFFFFFu;
                    if (i % 4 == 1) v &= 0x80FFFFFFu;                   /* tiny or subnormal */
                    if (i % 4 == 2) v = (v & 0x83FFFFFFu) | 0x04000000u; /* small normal */
                }
                set_elem(src, f->width, i, v);
            }
            float inv = (float)(1.0 / (double)test_scales[sc]);
            bool ok = ref_into_all(st, src, n, inv, want);
            expect_into(st, src, n, inv, want, ok, sc % 4, sc % 3, "patterns");
        }
    }
    free(src);
    free(want);
}

/* The same bits whatever FTZ/DAZ and the rounding direction say. */
static void test_unscale_into_fp_modes(void **state)
{
    (void)state;
    report_skips();
    size_t n = 4096;
    unsigned char *src = malloc(n * 4), *dst = malloc(n * 4);
    uint32_t *want = malloc(n * sizeof *want);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(want);
    for (int mode = 0; mode < 2; mode++) {
        for (size_t t = 0; t < NINTO; t++) {
            const mxp_dtype st = into_srcs[t];
            const tfmt *f = &FMT[st];
            for (size_t sc = 0; sc < NSCALES; sc++) {
                float inv = (float)(1.0 / (double)test_scales[sc]);
                for (size_t i = 0; i < n; i++) {
                    uint64_t v = rnd() & ((1ull << f->width) - 1);
                    if (i % 2 && f->width == 32) v &= 0x80FFFFFFull;
                    set_elem(src, f->width, i, v);
                }
                ref_into_all(st, src, n, inv, want);
                for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
                    const mxp__kernels *k = isa_table(isa);
                    if (!k) continue;
                    if (mode == 0) {
                        if (!mxp__fp_set_flush_denormals(true)) break;
                        k->unscale_into[st](dst, src, n, inv);
                        mxp__fp_set_flush_denormals(false);
                    } else {
                        assert_int_equal(fesetround(FE_UPWARD), 0);
                        k->unscale_into[st](dst, src, n, inv);
                        fesetround(FE_TONEAREST);
                    }
                    size_t i = tu_first_diff(want, dst, n, 4);
                    if (i < n)
                        fail_msg("%s unscale_into %s with %s: element %zu input 0x%llx inv %a: want "
                                 "0x%08x got 0x%08x",
                                 k->name, f->name, mode == 0 ? "FTZ+DAZ" : "FE_UPWARD", i,
                                 (unsigned long long)get_elem(src, f->width, i), (double)inv, want[i],
                                 (unsigned)get_elem(dst, 32, i));
                }
            }
        }
    }
    free(src), free(dst), free(want);
}

/* Past 16 MiB of destination the SIMD kernels stream their stores (aligned head done by the
 * scalar path): every ISA against the scalar kernel, aligned and misaligned destinations. */
static void test_unscale_into_large(void **state)
{
    (void)state;
    static const mxp_dtype ds[] = {MXP_FLOAT32, MXP_BFLOAT16, MXP_FLOAT16};
    size_t n = ((size_t)17 << 20) / 4 + 77;
    unsigned char *want = malloc(n * 4), *got = malloc(n * 4 + 8), *src = malloc(n * 4);
    assert_non_null(want);
    assert_non_null(got);
    assert_non_null(src);
    for (size_t t = 0; t < 3; t++) {
        const tfmt *f = &FMT[ds[t]];
        for (size_t i = 0; i < n; i++) set_elem(src, f->width, i, random_finite(f));
        for (int planted = 0; planted < 2; planted++) {
            if (planted) {
                set_elem(src, f->width, 5, nan_bits(f, true));
                set_elem(src, f->width, n - 3, inf_bits(f, false));
            }
            bool want_ok = mxp__scalar_kernels()->unscale_into[ds[t]](want, src, n, 0.25f);
            for (int isa = 1; isa < MXP__ISA_COUNT; isa++) {
                const mxp__kernels *k = isa_table(isa);
                if (!k) continue;
                for (size_t off = 0; off < 8; off += 4 + planted * 3) {
                    bool ok = k->unscale_into[ds[t]](got + off, src, n, 0.25f);
                    size_t i = tu_first_diff(want, got + off, n, 4);
                    if (i < n || ok != want_ok)
                        fail_msg("%s unscale_into %s large (planted %d, off %zu): first difference at "
                                 "%zu, returned %d want %d",
                                 k->name, f->name, planted, off, i, ok, want_ok);
                }
            }
        }
    }
    free(want), free(got), free(src);
}

/* The public call: the bits of mxp_convert to float32 followed by mxp_unscale_check, the
 * accepted pairs, in place for float32, and every refusal (false, nothing written, a message;
 * the _s variant says MXP_EINVAL). */
static void test_unscale_into_public(void **state)
{
    (void)state;
    enum { N = 777 };
    static const float scales[] = {65536.0f, 3.0f, 0.75f, 0x1p-140f, 0x1p127f};
    unsigned char src[N * 4];
    float via[N], got[N + 1];
    for (size_t t = 0; t < NINTO; t++) {
        const tfmt *f = &FMT[into_srcs[t]];
        for (size_t sc = 0; sc < sizeof scales / sizeof scales[0]; sc++) {
            for (size_t i = 0; i < N; i++)
                set_elem(src, f->width, i, (i % 50 == 7) ? nan_bits(f, i & 1) : random_finite(f));
            assert_int_equal(mxp_convert(via, MXP_FLOAT32, src, into_srcs[t], N), MXP_OK);
            bool want = mxp_unscale_check(via, MXP_FLOAT32, N, scales[sc]);
            assert_false(want); /* NaNs planted */
            memset(got, 0x5A, sizeof got);
            bool fin = true;
            assert_int_equal(mxp_unscale_check_into_s(got, MXP_FLOAT32, src, into_srcs[t], N, scales[sc], &fin),
                             MXP_OK);
            assert_false(fin);
            if (memcmp(got, via, sizeof via) != 0)
                fail_msg("%s scale %g: mxp_unscale_check_into differs from convert + unscale_check at %zu",
                         f->name, (double)scales[sc], tu_first_diff(got, via, N, 4));
            assert_int_equal(tu_bits32(got[N]), 0x5A5A5A5Au);
            /* without the NaNs: finite, and the bool form agrees */
            for (size_t i = 7; i < N; i += 50) set_elem(src, f->width, i, 0);
            bool want2 = mxp_all_finite(src, into_srcs[t], N);
            assert_true(want2);
            bool r = mxp_unscale_check_into(got, MXP_FLOAT32, src, into_srcs[t], N, scales[sc]);
            assert_int_equal(mxp_convert(via, MXP_FLOAT32, src, into_srcs[t], N), MXP_OK);
            assert_true(r == mxp_unscale_check(via, MXP_FLOAT32, N, scales[sc]));
            assert_memory_equal(got, via, sizeof via);
        }
    }
    /* in place for float32: the same as mxp_unscale_check */
    float a[4] = {1.0f, -6.0f, 0x1p-149f, 3.0f}, b[4];
    memcpy(b, a, sizeof a);
    assert_true(mxp_unscale_check_into(a, MXP_FLOAT32, a, MXP_FLOAT32, 4, 2.0f));
    assert_true(mxp_unscale_check(b, MXP_FLOAT32, 4, 2.0f));
    assert_memory_equal(a, b, sizeof a);
    /* n == 0: true, NULL buffers allowed */
    assert_true(mxp_unscale_check_into(NULL, MXP_FLOAT32, NULL, MXP_FLOAT16, 0, 8.0f));

    /* refusals */
    uint16_t h[8] = {0x3C00, 0x4000, 0x4200, 0x4400, 0x3C00, 0x3C00, 0x3C00, 0x3C00}, hkeep[8];
    float out[8], keep[8];
    memcpy(hkeep, h, sizeof h);
    static const float bad_scales[] = {0.0f, -1.0f, NAN, INFINITY, -INFINITY};
    struct {
        void *dst;
        mxp_dtype dt;
        const void *src;
        mxp_dtype st;
        size_t n;
        float scale;
        const char *word;
    } cases[] = {
        {out, MXP_FLOAT16, h, MXP_FLOAT16, 8, 2.0f, "destination dtype float16"},
        {out, MXP_FLOAT64, h, MXP_FLOAT16, 8, 2.0f, "destination dtype float64"},
        {out, (mxp_dtype)99, h, MXP_FLOAT16, 8, 2.0f, "destination dtype 99"},
        {out, MXP_FLOAT32, h, MXP_FLOAT64, 2, 2.0f, "source dtype float64"},
        {out, MXP_FLOAT32, h, MXP_INT32, 2, 2.0f, "source dtype int32"},
        {out, MXP_FLOAT32, h, (mxp_dtype)-3, 2, 2.0f, "source dtype -3"},
        {NULL, MXP_FLOAT32, h, MXP_FLOAT16, 8, 2.0f, "dst is NULL"},
        {out, MXP_FLOAT32, NULL, MXP_FLOAT16, 8, 2.0f, "src is NULL"},
        {out, MXP_FLOAT32, h, MXP_FLOAT16, SIZE_MAX, 2.0f, "past any possible buffer"},
        {out, MXP_FLOAT32, h, MXP_FLOAT16, SIZE_MAX / 4 + 1, 2.0f, "past any possible buffer"},
        {out, MXP_FLOAT32, h, MXP_FLOAT16, (size_t)PTRDIFF_MAX / 4 + 1, 2.0f, "past any possible buffer"},
        {out, MXP_FLOAT32, (const char *)out + 4, MXP_FLOAT32, 4, 2.0f, "overlap"},
        {(char *)out + 2, MXP_FLOAT32, out, MXP_FLOAT16, 4, 2.0f, "overlap"},
        {out, MXP_FLOAT32, out, MXP_FLOAT16, 4, 2.0f, "overlap"}, /* same start, float16 */
        {out, MXP_FLOAT32, out, MXP_BFLOAT16, 1, 2.0f, "overlap"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] + 5; i++) {
        bool scale_case = i >= sizeof cases / sizeof cases[0];
        void *d = scale_case ? out : cases[i].dst;
        const void *sp = scale_case ? (const void *)h : cases[i].src;
        mxp_dtype dt = scale_case ? MXP_FLOAT32 : cases[i].dt, st = scale_case ? MXP_FLOAT16 : cases[i].st;
        size_t n = scale_case ? 8 : cases[i].n;
        float scale = scale_case ? bad_scales[i - sizeof cases / sizeof cases[0]] : cases[i].scale;
        const char *word = scale_case ? "not a loss scale" : cases[i].word;
        for (size_t j = 0; j < 8; j++) out[j] = (float)j + 0.5f;
        memcpy(keep, out, sizeof out);
        mxp_clear_error();
        assert_false(mxp_unscale_check_into(d, dt, sp, st, n, scale));
        if (!strstr(mxp_last_error(), word))
            fail_msg("case %zu: message '%s' lacks '%s'", i, mxp_last_error(), word);
        assert_memory_equal(out, keep, sizeof out);
        assert_memory_equal(h, hkeep, sizeof h);
        bool fin = true;
        mxp_clear_error();
        assert_int_equal(mxp_unscale_check_into_s(d, dt, sp, st, n, scale, &fin), MXP_EINVAL);
        assert_true(fin);
        assert_true(*mxp_last_error() != '\0');
        assert_memory_equal(out, keep, sizeof out);
    }
    assert_int_equal(mxp_unscale_check_into_s(out, MXP_FLOAT32, h, MXP_FLOAT16, 8, 2.0f, NULL), MXP_EINVAL);
    assert_memory_equal(out, keep, sizeof out);
}

/* The reason for unscale_check_into (issue 16): float16 gradients of ~1e-8 scaled by 65536
 * are normal float16 values; unscaling them in place in float16 flushes most of them back to
 * zero (below float16's smallest subnormal, 6e-8), unscaling into float32 keeps every one,
 * within float16's relative precision of the true gradient. */
static void test_unscale_into_keeps_small_gradients(void **state)
{
    (void)state;
    enum { N = 4096 };
    const float scale = 65536.0f;
    float true_g[N], scaled[N], master[N];
    uint16_t g16[N], old_pattern[N];
    for (size_t i = 0; i < N; i++) {
        double u = (double)(rnd() >> 11) * 0x1p-53; /* [0, 1) */
        true_g[i] = (float)((0.5 + u) * 1e-8 * ((i & 1) ? -1.0 : 1.0)); /* 5e-9 .. 1.5e-8 */
        scaled[i] = true_g[i] * scale;                                   /* exact: power of 2 */
    }
    assert_int_equal(mxp_convert(g16, MXP_FLOAT16, scaled, MXP_FLOAT32, N), MXP_OK);
    memcpy(old_pattern, g16, sizeof g16);
    /* the old pattern: unscale in place in float16 */
    assert_true(mxp_unscale_check(old_pattern, MXP_FLOAT16, N, scale));
    size_t lost_old = 0, lost_new = 0;
    for (size_t i = 0; i < N; i++) lost_old += (old_pattern[i] & 0x7FFF) == 0;
    /* the right pattern: float16 scaled gradients into float32 master gradients */
    assert_true(mxp_unscale_check_into(master, MXP_FLOAT32, g16, MXP_FLOAT16, N, scale));
    for (size_t i = 0; i < N; i++) {
        lost_new += master[i] == 0.0f;
        /* float16 keeps 11 significant bits of the scaled value: relative error <= 2^-11 */
        double rel = fabs((double)master[i] - (double)true_g[i]) / fabs((double)true_g[i]);
        if (!(rel <= 0x1p-11)) fail_msg("gradient %zu: %a unscaled to %a (relative error %g)", i,
                                        (double)true_g[i], (double)master[i], rel);
        assert_true(signbit(master[i]) == signbit(true_g[i]));
    }
    print_message("small gradients lost: %zu of %d unscaled in float16, %zu into float32\n", lost_old,
                  N, lost_new);
    assert_true(lost_old > N / 2); /* the setup does show the problem */
    assert_int_equal(lost_new, 0);
}

/* Misuse of the bool passes is reported, not mistaken for an overflow; mxp_clear_error. */
static void test_misuse_reported(void **state)
{
    (void)state;
    float v[4] = {1.0f, 2.0f, 3.0f, 4.0f}, keep[4];
    memcpy(keep, v, sizeof v);
    bool fin = true;
    /* a stale message from an unrelated earlier failure must not be mistaken for this call's */
    (void)mxp_select(true, NULL, NULL, NULL, MXP_FLOAT32, 3);
    assert_true(*mxp_last_error() != '\0');
    mxp_clear_error();
    assert_string_equal(mxp_last_error(), "");
    /* good calls leave the (cleared) message alone */
    assert_true(mxp_all_finite(v, MXP_FLOAT32, 4));
    assert_string_equal(mxp_last_error(), "");
    struct {
        const void *x;
        mxp_dtype dt;
        size_t n;
        const char *word;
    } bad[] = {
        {NULL, MXP_FLOAT32, 3, "x is NULL"},
        {v, (mxp_dtype)77, 3, "dtype 77"},
        {v, (mxp_dtype)-1, 3, "dtype -1"},
        {v, MXP_FLOAT32, SIZE_MAX, "past any possible buffer"},
        {v, MXP_FLOAT64, SIZE_MAX / 8 + 1, "past any possible buffer"},
        {v, MXP_FLOAT16, (size_t)PTRDIFF_MAX, "past any possible buffer"},
        {v, MXP_INT32, SIZE_MAX, "past any possible buffer"},
        {(const void *)(UINTPTR_MAX - 15), MXP_FLOAT32, 8, "past any possible buffer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mxp_clear_error();
        assert_false(mxp_all_finite(bad[i].x, bad[i].dt, bad[i].n));
        if (!strstr(mxp_last_error(), bad[i].word))
            fail_msg("all_finite case %zu: '%s' lacks '%s'", i, mxp_last_error(), bad[i].word);
        fin = true;
        assert_int_equal(mxp_all_finite_s(bad[i].x, bad[i].dt, bad[i].n, &fin), MXP_EINVAL);
        assert_true(fin);
        if (!mxp_dtype_is_floating(bad[i].dt)) continue;
        mxp_clear_error();
        assert_false(mxp_unscale_check((void *)(uintptr_t)bad[i].x, bad[i].dt, bad[i].n, 2.0f));
        if (!strstr(mxp_last_error(), bad[i].word))
            fail_msg("unscale_check case %zu: '%s' lacks '%s'", i, mxp_last_error(), bad[i].word);
        assert_int_equal(mxp_unscale_check_s((void *)(uintptr_t)bad[i].x, bad[i].dt, bad[i].n, 2.0f, &fin),
                         MXP_EINVAL);
        assert_memory_equal(v, keep, sizeof v);
    }
    int32_t ints[2] = {1, 2};
    mxp_clear_error();
    assert_false(mxp_unscale_check(ints, MXP_INT32, 2, 2.0f));
    assert_non_null(strstr(mxp_last_error(), "int32 is not a floating dtype"));
    assert_int_equal(mxp_all_finite_s(v, MXP_FLOAT32, 4, NULL), MXP_EINVAL);
    assert_int_equal(mxp_unscale_check_s(v, MXP_FLOAT32, 4, 2.0f, NULL), MXP_EINVAL);
    assert_memory_equal(v, keep, sizeof v);
    /* not finite is MXP_OK with false */
    v[2] = INFINITY;
    assert_int_equal(mxp_all_finite_s(v, MXP_FLOAT32, 4, &fin), MXP_OK);
    assert_false(fin);
    assert_int_equal(mxp_unscale_check_s(v, MXP_FLOAT32, 4, 2.0f, &fin), MXP_OK);
    assert_false(fin);
    assert_true(v[0] == 0.5f);
    assert_int_equal(mxp_all_finite_s(NULL, MXP_FLOAT32, 0, &fin), MXP_OK);
    assert_true(fin);
    assert_int_equal(mxp_all_finite_s(ints, MXP_INT32, 2, &fin), MXP_OK);
    assert_true(fin);
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
        cmocka_unit_test(test_misuse_reported),
        cmocka_unit_test(test_unscale_into_public),
        cmocka_unit_test(test_unscale_into_keeps_small_gradients),
        cmocka_unit_test(test_unscale_into_planted),
        cmocka_unit_test(test_unscale_into_patterns),
        cmocka_unit_test(test_unscale_into_fp_modes),
        cmocka_unit_test(test_unscale_into_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
