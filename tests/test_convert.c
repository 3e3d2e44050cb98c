/*
 * test_convert.c - mxp_convert / mxp_convert_ex: argument errors, the DESIGN.md examples,
 * saturation for every pair, stochastic rounding statistics and reproducibility, threads,
 * in-place conversion, and independence from the CPU's flush-to-zero mode (label: quick).
 *
 * Expected bit patterns are written out by hand from the format definitions; random samples of
 * every pair are compared with the independent reference in ref_convert.h.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#if defined(__x86_64__) || defined(__SSE2__)
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#endif

#include "internal.h"
#include "kernels.h"
#include "mixprec.h"
#include "ref_convert.h"
#include "test_util.h"
#include "bochs/f16c_ties.h"

static float f32_of(uint32_t b) { return tu_f32(b); }
static uint32_t bits_of_f32(float f) { return tu_bits32(f); }

/* Convert one float32 value to dst and return the output bits. */
static uint64_t one_from_f32(mxp_dtype dst, float x, const mxp_convert_opts *o)
{
    uint64_t out = 0;
    assert_int_equal(mxp_convert_ex(&out, dst, &x, MXP_FLOAT32, 1, o), MXP_OK);
    return ref_load(&out, 0, dst);
}

static uint64_t one_from_f64(mxp_dtype dst, double x, const mxp_convert_opts *o)
{
    uint64_t out = 0;
    assert_int_equal(mxp_convert_ex(&out, dst, &x, MXP_FLOAT64, 1, o), MXP_OK);
    return ref_load(&out, 0, dst);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void expect_einval(mxp_status s, const char *needle, const unsigned char *dst, size_t len)
{
    assert_int_equal(s, MXP_EINVAL);
    if (!strstr(mxp_last_error(), needle))
        fail_msg("message '%s' does not name '%s'", mxp_last_error(), needle);
    for (size_t i = 0; i < len; i++)
        if (dst[i] != 0xAB) fail_msg("dst byte %zu changed on failure ('%s')", i, needle);
}

static void test_errors(void **state)
{
    (void)state;
    float src[4] = {1, 2, 3, 4};
    unsigned char dst[64];
    memset(dst, 0xAB, sizeof dst);
    mxp_convert_opts o = {0};

    expect_einval(mxp_convert(NULL, MXP_FLOAT16, src, MXP_FLOAT32, 4), "dst", dst, sizeof dst);
    expect_einval(mxp_convert(dst, MXP_FLOAT16, NULL, MXP_FLOAT32, 4), "src", dst, sizeof dst);
    expect_einval(mxp_convert(dst, MXP_INT8, src, MXP_FLOAT32, 4), "int8", dst, sizeof dst);
    assert_non_null(strstr(mxp_last_error(), "dst_type"));
    expect_einval(mxp_convert(dst, MXP_FLOAT16, src, MXP_BOOL, 4), "bool", dst, sizeof dst);
    assert_non_null(strstr(mxp_last_error(), "src_type"));
    expect_einval(mxp_convert(dst, (mxp_dtype)99, src, MXP_FLOAT32, 4), "99", dst, sizeof dst);
    expect_einval(mxp_convert(dst, MXP_FLOAT16, src, (mxp_dtype)-1, 4), "-1", dst, sizeof dst);
    /* a non-floating dtype is rejected even with n == 0 */
    expect_einval(mxp_convert(NULL, MXP_INT32, NULL, MXP_FLOAT32, 0), "int32", dst, sizeof dst);

    o.rounding = (mxp_rounding)7;
    expect_einval(mxp_convert_ex(dst, MXP_FLOAT16, src, MXP_FLOAT32, 4, &o), "rounding", dst, sizeof dst);
    o.rounding = MXP_ROUND_NEAREST_EVEN;
    o.threads = -2;
    expect_einval(mxp_convert_ex(dst, MXP_FLOAT16, src, MXP_FLOAT32, 4, &o), "threads", dst, sizeof dst);
    o.threads = 0;

    /* overlapping buffers other than exact in-place of equal sizes */
    float buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    float keep[8];
    memcpy(keep, buf, sizeof buf);
    assert_int_equal(mxp_convert(buf, MXP_FLOAT16, buf, MXP_FLOAT32, 8), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "overlap"));
    assert_int_equal(mxp_convert(buf + 1, MXP_FLOAT32, buf, MXP_FLOAT32, 4), MXP_EINVAL);
    assert_memory_equal(buf, keep, sizeof buf);

    /* n == 0: nothing to do, NULL buffers allowed, opts may be NULL */
    assert_int_equal(mxp_convert(NULL, MXP_FLOAT16, NULL, MXP_FLOAT32, 0), MXP_OK);
    assert_int_equal(mxp_convert_ex(NULL, MXP_FLOAT8_E5M2, NULL, MXP_FLOAT64, 0, NULL), MXP_OK);
    assert_int_equal(mxp_convert_ex(dst, MXP_FLOAT16, src, MXP_FLOAT32, 0, &o), MXP_OK);
    for (size_t i = 0; i < sizeof dst; i++) assert_int_equal(dst[i], 0xAB);
}

/* ---- the DESIGN.md examples, by hand ------------------------------------------------------ */

static void test_design_examples(void **state)
{
    (void)state;
    const mxp_convert_opts rne = {0};
    const mxp_convert_opts sat = {MXP_ROUND_NEAREST_EVEN, true, 0, 0};
    static const struct {
        mxp_dtype d;
        float x;
        uint64_t want, want_sat;
    } cases[] = {
        /* float16: 1 5 10, bias 15, max 65504 = 0x7BFF */
        {MXP_FLOAT16, 0.1f, 0x2E66, 0x2E66},       /* 0.0999755859375 */
        {MXP_FLOAT16, 65504.0f, 0x7BFF, 0x7BFF},
        {MXP_FLOAT16, 65519.996f, 0x7BFF, 0x7BFF}, /* just below the midpoint 65520 */
        {MXP_FLOAT16, 65520.0f, 0x7C00, 0x7BFF},   /* tie with an odd max: rounds up -> inf */
        {MXP_FLOAT16, 70000.0f, 0x7C00, 0x7BFF},
        {MXP_FLOAT16, -70000.0f, 0xFC00, 0xFBFF},
        {MXP_FLOAT16, 1e-8f, 0x0000, 0x0000},      /* below half of 2^-24 */
        {MXP_FLOAT16, -1e-8f, 0x8000, 0x8000},     /* sign kept on underflow */
        {MXP_FLOAT16, 5.9604645e-8f, 0x0001, 0x0001}, /* 2^-24, the smallest subnormal */
        {MXP_FLOAT16, 2.9802322e-8f, 0x0000, 0x0000}, /* 2^-25: tie -> even (0) */
        {MXP_FLOAT16, 8.940697e-8f, 0x0002, 0x0002},  /* 1.5 * 2^-24: tie -> even (2) */
        {MXP_FLOAT16, 6.097555e-5f, 0x03FF, 0x03FF},  /* largest subnormal 1023 * 2^-24 */
        {MXP_FLOAT16, 6.1035156e-5f, 0x0400, 0x0400}, /* 2^-14, smallest normal */
        {MXP_FLOAT16, -0.0f, 0x8000, 0x8000},
        {MXP_FLOAT16, 448.0f, 0x5F00, 0x5F00},
        {MXP_FLOAT16, INFINITY, 0x7C00, 0x7BFF},
        {MXP_FLOAT16, -INFINITY, 0xFC00, 0xFBFF},
        /* bfloat16: top half of float32, max 0x7F7F */
        {MXP_BFLOAT16, 0.1f, 0x3DCD, 0x3DCD},
        {MXP_BFLOAT16, 65504.0f, 0x4780, 0x4780},  /* 65536 */
        {MXP_BFLOAT16, 70000.0f, 0x4789, 0x4789},  /* 70144 */
        {MXP_BFLOAT16, 1e-8f, 0x322C, 0x322C},
        {MXP_BFLOAT16, 3.4028235e38f, 0x7F80, 0x7F7F}, /* FLT_MAX rounds up past 0x7F7F */
        {MXP_BFLOAT16, 1e-40f, 0x0001, 0x0001},        /* float32 subnormal 0x000116C2 */
        {MXP_BFLOAT16, -0.0f, 0x8000, 0x8000},
        /* float8_e4m3fn: 1 4 3, bias 7, max 448 = 0x7E, NaN 0x7F, no inf */
        {MXP_FLOAT8_E4M3FN, 448.0f, 0x7E, 0x7E},
        {MXP_FLOAT8_E4M3FN, 464.0f, 0x7E, 0x7E},    /* tie with even max: stays 448 */
        {MXP_FLOAT8_E4M3FN, 465.0f, 0x7F, 0x7E},    /* above: NaN (ml_dtypes) */
        {MXP_FLOAT8_E4M3FN, -465.0f, 0xFF, 0xFE},
        {MXP_FLOAT8_E4M3FN, 70000.0f, 0x7F, 0x7E},
        {MXP_FLOAT8_E4M3FN, INFINITY, 0x7F, 0x7E},
        {MXP_FLOAT8_E4M3FN, -INFINITY, 0xFF, 0xFE},
        {MXP_FLOAT8_E4M3FN, 0.1f, 0x1D, 0x1D},      /* 0.1015625 */
        {MXP_FLOAT8_E4M3FN, 0.001953125f, 0x01, 0x01}, /* 2^-9, the smallest subnormal */
        {MXP_FLOAT8_E4M3FN, 0.0009765625f, 0x00, 0x00}, /* 2^-10: tie -> even (0) */
        {MXP_FLOAT8_E4M3FN, 0.0029296875f, 0x02, 0x02}, /* 1.5 * 2^-9: tie -> even (2) */
        {MXP_FLOAT8_E4M3FN, 1e-8f, 0x00, 0x00},
        {MXP_FLOAT8_E4M3FN, -0.0f, 0x80, 0x80},
        /* float8_e5m2: 1 5 2, bias 15, max 57344 = 0x7B, inf 0x7C */
        {MXP_FLOAT8_E5M2, 57344.0f, 0x7B, 0x7B},
        {MXP_FLOAT8_E5M2, 61439.0f, 0x7B, 0x7B},
        {MXP_FLOAT8_E5M2, 61440.0f, 0x7C, 0x7B},    /* tie with odd max: inf */
        {MXP_FLOAT8_E5M2, 65504.0f, 0x7C, 0x7B},
        {MXP_FLOAT8_E5M2, 448.0f, 0x5F, 0x5F},
        {MXP_FLOAT8_E5M2, 465.0f, 0x5F, 0x5F},      /* 448 */
        {MXP_FLOAT8_E5M2, 0.1f, 0x2E, 0x2E},        /* 0.09375 */
        {MXP_FLOAT8_E5M2, 1.5258789e-5f, 0x01, 0x01}, /* 2^-16, the smallest subnormal */
        {MXP_FLOAT8_E5M2, 1e-8f, 0x00, 0x00},
        {MXP_FLOAT8_E5M2, -INFINITY, 0xFC, 0xFB},
        {MXP_FLOAT8_E5M2, -0.0f, 0x80, 0x80},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t got = one_from_f32(cases[i].d, cases[i].x, &rne);
        uint64_t got_sat = one_from_f32(cases[i].d, cases[i].x, &sat);
        if (got != cases[i].want || got_sat != cases[i].want_sat)
            fail_msg("float32 %a -> %s: got 0x%llX / saturate 0x%llX, want 0x%llX / 0x%llX",
                     (double)cases[i].x, mxp_dtype_name(cases[i].d), (unsigned long long)got,
                     (unsigned long long)got_sat, (unsigned long long)cases[i].want,
                     (unsigned long long)cases[i].want_sat);
    }
    /* NaN keeps its sign in every target (e4m3fn: exactly 0x7F / 0xFF) */
    const mxp_dtype targets[] = {MXP_FLOAT64, MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        for (int neg = 0; neg < 2; neg++) {
            const float nan = neg ? -NAN : NAN;
            for (int s = 0; s < 2; s++) {
                uint64_t got = one_from_f32(targets[t], nan, s ? &sat : &rne);
                assert_true(ref_is_nan_bits(targets[t], got));
                assert_int_equal((got & ref_sign_bit(targets[t])) != 0, neg);
                if (targets[t] == MXP_FLOAT8_E4M3FN) assert_int_equal(got, neg ? 0xFF : 0x7F);
            }
        }
    }
    /* widening is exact: e4m3fn 0x7E -> 448, float16 0x0001 -> 2^-24, bf16 0x0001 -> 2^-133 */
    float back = 0;
    uint8_t e4 = 0x7E;
    assert_int_equal(mxp_convert(&back, MXP_FLOAT32, &e4, MXP_FLOAT8_E4M3FN, 1), MXP_OK);
    assert_true(back == 448.0f);
    uint16_t h = 0x0001;
    assert_int_equal(mxp_convert(&back, MXP_FLOAT32, &h, MXP_FLOAT16, 1), MXP_OK);
    assert_int_equal(bits_of_f32(back), 0x33800000u);
    assert_int_equal(mxp_convert(&back, MXP_FLOAT32, &h, MXP_BFLOAT16, 1), MXP_OK);
    assert_int_equal(bits_of_f32(back), 0x00010000u); /* a float32 subnormal, exact */
    double wide = 0;
    assert_int_equal(mxp_convert(&wide, MXP_FLOAT64, &h, MXP_FLOAT16, 1), MXP_OK);
    assert_true(wide == ldexp(1.0, -24));

    /* float64 -> float16 rounds once: 1 + 2^-11 + 2^-40 is just above a float16 tie. Through
     * float32 it would become the tie 1 + 2^-11 and then 1.0; directly it is 1 + 2^-10. */
    assert_int_equal(one_from_f64(MXP_FLOAT16, 1.0 + ldexp(1.0, -11) + ldexp(1.0, -40), &rne), 0x3C01);
    assert_int_equal(one_from_f64(MXP_FLOAT16, 1.0 + ldexp(1.0, -11), &rne), 0x3C00);
    /* the same for bfloat16 and e4m3fn, and float64 subnormal -> float32 */
    assert_int_equal(one_from_f64(MXP_BFLOAT16, 1.0 + ldexp(1.0, -8) + ldexp(1.0, -40), &rne), 0x3F81);
    assert_int_equal(one_from_f64(MXP_FLOAT8_E4M3FN, 1.0 + ldexp(1.0, -4) + ldexp(1.0, -40), &rne), 0x39);
    assert_int_equal(one_from_f64(MXP_FLOAT32, ldexp(1.0, -149) * 0.75, &rne), 0x00000001u);
    assert_int_equal(one_from_f64(MXP_FLOAT32, ldexp(1.0, -150), &rne), 0x00000000u);
    assert_int_equal(one_from_f64(MXP_FLOAT32, -1e300, &rne), 0xFF800000u);
    assert_int_equal(one_from_f64(MXP_FLOAT32, -1e300, &sat), 0xFF7FFFFFu);
    assert_int_equal(one_from_f64(MXP_FLOAT8_E5M2, 1e-300, &rne), 0x00);
}

/* ---- saturate for every pair -------------------------------------------------------------- */

static const uint64_t maxfin_bits[MXP_FLOAT_DTYPE_COUNT] = {
    [MXP_FLOAT64] = 0x7FEFFFFFFFFFFFFFull, [MXP_FLOAT32] = 0x7F7FFFFF, [MXP_FLOAT16] = 0x7BFF,
    [MXP_BFLOAT16] = 0x7F7F, [MXP_FLOAT8_E4M3FN] = 0x7E, [MXP_FLOAT8_E5M2] = 0x7B,
};
static const uint64_t inf_bits[MXP_FLOAT_DTYPE_COUNT] = {
    [MXP_FLOAT64] = 0x7FF0000000000000ull, [MXP_FLOAT32] = 0x7F800000, [MXP_FLOAT16] = 0x7C00,
    [MXP_BFLOAT16] = 0x7F80, [MXP_FLOAT8_E4M3FN] = 0x7F /* NaN: no inf */, [MXP_FLOAT8_E5M2] = 0x7C,
};
static const uint64_t nan_bits[MXP_FLOAT_DTYPE_COUNT] = {
    [MXP_FLOAT64] = 0x7FF8000000000000ull, [MXP_FLOAT32] = 0x7FC00000, [MXP_FLOAT16] = 0x7E00,
    [MXP_BFLOAT16] = 0x7FC0, [MXP_FLOAT8_E4M3FN] = 0x7F, [MXP_FLOAT8_E5M2] = 0x7E,
};
/* max finite values: a source max above the target's max overflows it (every such pair is far
 * enough apart that nearest-even rounds up past the target's max) */
static const double max_value[MXP_FLOAT_DTYPE_COUNT] = {
    [MXP_FLOAT64] = 1.7976931348623157e308, [MXP_FLOAT32] = 3.4028234663852886e38,
    [MXP_FLOAT16] = 65504.0, [MXP_BFLOAT16] = 3.3895313892515355e38,
    [MXP_FLOAT8_E4M3FN] = 448.0, [MXP_FLOAT8_E5M2] = 57344.0,
};

static void test_saturate_every_pair(void **state)
{
    (void)state;
    for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++) {
        for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++) {
            const int sb = (int)mxp_dtype_size((mxp_dtype)s) * 8;
            const uint64_t ssign = 1ull << (sb - 1);
            const uint64_t dsign = 1ull << (mxp_dtype_size((mxp_dtype)d) * 8 - 1);
            /* +inf, -inf, +max, -max, +NaN, -NaN (e4m3fn has no inf: max and NaN only) */
            uint64_t in[6] = {inf_bits[s], inf_bits[s] | ssign, maxfin_bits[s], maxfin_bits[s] | ssign,
                              nan_bits[s], nan_bits[s] | ssign};
            unsigned char src[48], dst[48], dst_plain[48];
            for (int i = 0; i < 6; i++) ref_store(src, (size_t)i, (mxp_dtype)s, in[i]);
            for (int mode = 0; mode < 2; mode++) {
                const mxp_convert_opts sat = {(mxp_rounding)mode, true, 3, 0};
                const mxp_convert_opts plain = {(mxp_rounding)mode, false, 3, 0};
                assert_int_equal(mxp_convert_ex(dst, (mxp_dtype)d, src, (mxp_dtype)s, 6, &sat), MXP_OK);
                assert_int_equal(mxp_convert_ex(dst_plain, (mxp_dtype)d, src, (mxp_dtype)s, 6, &plain), MXP_OK);
                const bool src_has_inf = s != MXP_FLOAT8_E4M3FN;
                const bool max_overflows = max_value[s] > max_value[d];
                for (int i = 0; i < 6; i++) {
                    const uint64_t got = ref_load(dst, (size_t)i, (mxp_dtype)d);
                    const uint64_t got_plain = ref_load(dst_plain, (size_t)i, (mxp_dtype)d);
                    const uint64_t sign = (i & 1) ? dsign : 0;
                    uint64_t want;
                    if (i >= 4 || (i < 2 && !src_has_inf)) { /* NaN stays NaN, sign kept */
                        if (!ref_is_nan_bits((mxp_dtype)d, got) || (got & dsign) != sign)
                            fail_msg("saturate %s -> %s: NaN input %d gave 0x%llX", mxp_dtype_name((mxp_dtype)s),
                                     mxp_dtype_name((mxp_dtype)d), i, (unsigned long long)got);
                        continue;
                    }
                    /* nearest-even: the source max overflows exactly when it is above the
                     * target's max; stochastic may round it down instead */
                    const bool plain_overflowed = (got_plain & ~dsign) == inf_bits[d];
                    if (i >= 2 && mode == 0 && plain_overflowed != max_overflows)
                        fail_msg("%s -> %s: max 0x%llX gave 0x%llX", mxp_dtype_name((mxp_dtype)s),
                                 mxp_dtype_name((mxp_dtype)d), (unsigned long long)in[i],
                                 (unsigned long long)got_plain);
                    if (i < 2 || plain_overflowed) want = sign | maxfin_bits[d];
                    else want = got_plain; /* in range: saturate changes nothing */
                    if (got != want)
                        fail_msg("saturate %s -> %s (%s): input 0x%llX gave 0x%llX, want 0x%llX",
                                 mxp_dtype_name((mxp_dtype)s), mxp_dtype_name((mxp_dtype)d),
                                 mode ? "stochastic" : "nearest-even", (unsigned long long)in[i],
                                 (unsigned long long)got, (unsigned long long)want);
                    if (i < 2 && got_plain != (sign | inf_bits[d]))
                        fail_msg("no saturate %s -> %s: inf gave 0x%llX", mxp_dtype_name((mxp_dtype)s),
                                 mxp_dtype_name((mxp_dtype)d), (unsigned long long)got_plain);
                }
            }
        }
    }
}

/* ---- every pair against the reference, random patterns, every ISA, via mxp_convert_ex ----- */

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rng64(void) { return tu_rand64(&rng_state); }

/* Special patterns of a source dtype: zeros, smallest/largest subnormal, smallest normal, max,
 * inf, NaNs (quiet and signalling, with payloads), of both signs. */
static size_t special_patterns(mxp_dtype s, uint64_t *out)
{
    const ref_format f = ref_format_of(s);
    const uint64_t sign = ref_sign_bit(s);
    const uint64_t man = (1ull << f.mbits) - 1u, exp_all = ((1ull << f.ebits) - 1u) << f.mbits;
    const uint64_t mags[] = {0, 1, 2, 3, man, man + 1u, man + 2u, exp_all - 1u - man,
                             ref_maxfin_bits(s), ref_maxfin_bits(s) - 1u, exp_all, exp_all | 1u,
                             exp_all | (1ull << (f.mbits - 1)), exp_all | man, exp_all | (man >> 1)};
    size_t n = 0;
    for (size_t i = 0; i < sizeof mags / sizeof mags[0]; i++) {
        out[n++] = mags[i];
        out[n++] = mags[i] | sign;
    }
    return n;
}

/*
 * Every pair, every ISA table and the public entry point, nearest-even and stochastic, with and
 * without saturate, on special patterns followed by random ones (float64 / float32 sources are
 * biased towards the narrow formats' exponent range), against the reference.
 */
static void test_every_pair_random(void **state)
{
    (void)state;
    enum { N = 2000 };
    static unsigned char src[N * 8], dst[N * 8];
    ref_table tables[MXP_FLOAT_DTYPE_COUNT] = {{0}};
    for (int d = MXP_FLOAT16; d < MXP_FLOAT_DTYPE_COUNT; d++) assert_true(ref_table_init(&tables[d], (mxp_dtype)d));
    for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++) {
        uint64_t spec[64];
        const size_t nspec = special_patterns((mxp_dtype)s, spec);
        for (size_t i = 0; i < N; i++) {
            uint64_t x = rng64();
            if (i < nspec) x = spec[i];
            else if (s == MXP_FLOAT64 && (i & 1))
                x = (x & 0x800FFFFFFFFFFFFFull) | ((uint64_t)(1023 - 30 + (int)(rng64() % 50)) << 52);
            else if (s == MXP_FLOAT32 && (i & 1))
                x = (x & 0x807FFFFFull) | ((uint64_t)(127 - 30 + (int)(rng64() % 50)) << 23);
            ref_store(src, i, (mxp_dtype)s, x);
        }
        for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++) {
            for (int mode = 0; mode < 4; mode++) {
                const bool sr = mode & 1, sat = mode & 2;
                for (int isa = -1; isa < MXP__ISA_COUNT; isa++) {
                    const char *path = "mxp_convert_ex";
                    if (isa < 0) {
                        const mxp_convert_opts o = {sr ? MXP_ROUND_STOCHASTIC : MXP_ROUND_NEAREST_EVEN,
                                                    sat, 77, 1};
                        assert_int_equal(mxp_convert_ex(dst, (mxp_dtype)d, src, (mxp_dtype)s, N, &o), MXP_OK);
                    } else {
                        const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
                        if (!k) continue;
                        path = k->name;
                        const mxp__cvt_args a = {sat, 77, 0, false};
                        k->cvt[d][s][sr ? MXP__SR : MXP__RNE](dst, src, N, &a);
                    }
                    for (size_t i = 0; i < N; i++) {
                        const uint64_t x = ref_load(src, i, (mxp_dtype)s);
                        const uint32_t r = sr ? ref_sr_r(77, i, (mxp_dtype)s, (mxp_dtype)d) : 0;
                        const uint64_t want = ref_convert(d >= MXP_FLOAT16 ? &tables[d] : NULL, (mxp_dtype)d,
                                                          (mxp_dtype)s, x, sat, sr, r);
                        const uint64_t got = ref_load(dst, i, (mxp_dtype)d);
                        /* an emulator erratum accepted only under MXP_TEST_F16C_TIES_AWAY (Bochs) */
                        if (got != want && !tie_away_tolerated_src(d, sr ? MXP__SR : MXP__RNE, s, x, want, got))
                            fail_msg("[%s] %s -> %s (%s%s): input 0x%llX got 0x%llX want 0x%llX", path,
                                     mxp_dtype_name((mxp_dtype)s), mxp_dtype_name((mxp_dtype)d),
                                     sr ? "stochastic" : "nearest-even", sat ? ", saturate" : "",
                                     (unsigned long long)x, (unsigned long long)got, (unsigned long long)want);
                    }
                }
            }
        }
    }
    for (int d = MXP_FLOAT16; d < MXP_FLOAT_DTYPE_COUNT; d++) ref_table_free(&tables[d]);
}

/* ---- stochastic rounding ------------------------------------------------------------------ */

/*
 * n copies of x (float64) rounded stochastically to d: only the two neighbours lo < x < hi
 * appear, the fraction of hi is (x - lo) / (hi - lo) within 5 standard deviations, so the mean
 * error is ~0.
 */
static void sr_statistics(mxp_dtype d, double x, double lo, double hi)
{
    enum { N = 200000 };
    static double src[N];
    static unsigned char dst[N * 8];
    for (size_t i = 0; i < N; i++) src[i] = x;
    const mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, false, 12345, 0};
    assert_int_equal(mxp_convert_ex(dst, d, src, MXP_FLOAT64, N, &o), MXP_OK);
    double back[64];
    size_t ups = 0;
    double sum = 0;
    for (size_t i = 0; i < N; i += 64) {
        size_t m = N - i < 64 ? N - i : 64;
        assert_int_equal(mxp_convert(back, MXP_FLOAT64, dst + i * mxp_dtype_size(d), d, m), MXP_OK);
        for (size_t j = 0; j < m; j++) {
            if (back[j] != lo && back[j] != hi)
                fail_msg("%s: stochastic rounding of %.17g gave %.17g, not %.17g or %.17g",
                         mxp_dtype_name(d), x, back[j], lo, hi);
            ups += back[j] == hi;
            sum += back[j] - x;
        }
    }
    const double p = (x - lo) / (hi - lo);
    const double sd = sqrt(N * p * (1 - p));
    if (fabs((double)ups - N * p) > 5 * sd)
        fail_msg("%s: %zu of %d rounded up, expected %.0f +- %.0f", mxp_dtype_name(d), ups, N, N * p, sd);
    /* mean error in units of the gap: |mean| <= 5 sd / N */
    assert_true(fabs(sum / N) / (hi - lo) <= 5 * sd / N + 1e-12);
}

static void test_stochastic_statistics(void **state)
{
    (void)state;
    sr_statistics(MXP_BFLOAT16, 1.0 + 0.3 * ldexp(1.0, -7), 1.0, 1.0 + ldexp(1.0, -7));
    sr_statistics(MXP_FLOAT16, -(1.0 + 0.7 * ldexp(1.0, -10)), -(1.0 + ldexp(1.0, -10)), -1.0);
    sr_statistics(MXP_FLOAT16, 0.25 * ldexp(1.0, -24), 0.0, ldexp(1.0, -24)); /* subnormal */
    sr_statistics(MXP_FLOAT8_E4M3FN, 3.3, 3.25, 3.5);
    sr_statistics(MXP_FLOAT8_E5M2, 0.1, 0.09375, 0.109375);
    sr_statistics(MXP_FLOAT32, 1.0 + 0.5 * ldexp(1.0, -23), 1.0, 1.0 + ldexp(1.0, -23));
    /* float32 source: the whole dropped part is used */
    {
        enum { N = 100000 };
        static float src[N];
        static uint16_t dst[N];
        const float x = f32_of(0x3F800000u | 0x5555u); /* 1 + 0x5555 * 2^-23; bf16 drops 0x5555 */
        for (size_t i = 0; i < N; i++) src[i] = x;
        const mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, false, 99, 0};
        assert_int_equal(mxp_convert_ex(dst, MXP_BFLOAT16, src, MXP_FLOAT32, N, &o), MXP_OK);
        size_t ups = 0;
        for (size_t i = 0; i < N; i++) {
            assert_true(dst[i] == 0x3F80 || dst[i] == 0x3F81);
            ups += dst[i] == 0x3F81;
        }
        const double p = 0x5555 / 65536.0, sd = sqrt(N * p * (1 - p));
        assert_true(fabs((double)ups - N * p) <= 5 * sd);
    }
    /* e4m3fn near the top: 456 lies between 448 and the NaN slot (480): NaN with p = 1/4 */
    {
        enum { N = 40000 };
        static float src[N];
        static uint8_t dst[N];
        for (size_t i = 0; i < N; i++) src[i] = 456.0f;
        mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, false, 5, 0};
        assert_int_equal(mxp_convert_ex(dst, MXP_FLOAT8_E4M3FN, src, MXP_FLOAT32, N, &o), MXP_OK);
        size_t nans = 0;
        for (size_t i = 0; i < N; i++) {
            assert_true(dst[i] == 0x7E || dst[i] == 0x7F);
            nans += dst[i] == 0x7F;
        }
        const double sd = sqrt(N * 0.25 * 0.75);
        assert_true(fabs((double)nans - N * 0.25) <= 5 * sd);
        o.saturate = true; /* saturating: always 448 */
        assert_int_equal(mxp_convert_ex(dst, MXP_FLOAT8_E4M3FN, src, MXP_FLOAT32, N, &o), MXP_OK);
        for (size_t i = 0; i < N; i++) assert_int_equal(dst[i], 0x7E);
    }
}

/* Exact values never move, whatever the random word. */
static void test_stochastic_exact_values(void **state)
{
    (void)state;
    enum { N = 4096 };
    static uint16_t h[N], back16[N];
    static float f[N];
    for (size_t i = 0; i < N; i++) h[i] = (uint16_t)(i * 16 + (i & 15)); /* spread over all patterns */
    for (size_t i = 0; i < N; i++) {
        if ((h[i] & 0x7C00) == 0x7C00) h[i] &= 0x83FF; /* no inf/NaN: keep to finite values */
    }
    assert_int_equal(mxp_convert(f, MXP_FLOAT32, h, MXP_FLOAT16, N), MXP_OK);
    for (uint64_t seed = 0; seed < 8; seed++) {
        const mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, seed & 1, seed * 0x9E3779B97F4A7C15ull, 0};
        assert_int_equal(mxp_convert_ex(back16, MXP_FLOAT16, f, MXP_FLOAT32, N, &o), MXP_OK);
        assert_memory_equal(back16, h, sizeof h);
    }
}

/* Same bits for 1 and several threads, for any chunking, and different seeds differ. */
static void test_stochastic_reproducible(void **state)
{
    (void)state;
    const size_t n = ((size_t)1 << 20) + 37;
    float *src = malloc(n * sizeof *src);
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2), *c = malloc(n * 2);
    assert_non_null(src);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    for (size_t i = 0; i < n; i++) src[i] = (float)((double)(rng64() >> 11) * 0x1p-53 * 8.0 - 4.0);
    mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, false, 2024, 1};
    assert_int_equal(mxp_convert_ex(a, MXP_BFLOAT16, src, MXP_FLOAT32, n, &o), MXP_OK);
    /* Really split this array over threads (the production threshold is 2^22 per thread). */
    const size_t saved_min = mxp__convert_min_per_thread;
    mxp__convert_min_per_thread = 4096;
    for (int threads = 2; threads <= 5; threads++) {
        o.threads = threads;
        memset(b, 0, n * 2);
        assert_int_equal(mxp_convert_ex(b, MXP_BFLOAT16, src, MXP_FLOAT32, n, &o), MXP_OK);
        assert_memory_equal(a, b, n * 2);
    }
    /* the same with nearest-even and float16, 4 threads */
    o.rounding = MXP_ROUND_NEAREST_EVEN;
    o.threads = 1;
    assert_int_equal(mxp_convert_ex(a, MXP_FLOAT16, src, MXP_FLOAT32, n, &o), MXP_OK);
    o.threads = 4;
    assert_int_equal(mxp_convert_ex(b, MXP_FLOAT16, src, MXP_FLOAT32, n, &o), MXP_OK);
    assert_memory_equal(a, b, n * 2);
    mxp__convert_min_per_thread = saved_min;

    /* chunked kernel calls with their own index0 give the same bits as one call, on every ISA,
     * also across a multiple of 2^32 in the element index */
    const size_t m = 5000;
    for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
        if (!k) continue;
        /* callers never let one SIMD kernel call straddle a multiple of 2^32 (kernels.h); the
         * scalar kernels handle it too, so only they get the straddling starts */
        const uint64_t starts[] = {0, 1000, 1ull << 32, (5ull << 32) + 123, (1ull << 32) - 2500,
                                   (5ull << 32) - 1};
        const size_t nstarts = isa == MXP__ISA_SCALAR ? 6 : 4;
        for (size_t q = 0; q < nstarts; q++) {
            const mxp__cvt_args whole = {false, 77, starts[q], false};
            k->cvt[MXP_FLOAT16][MXP_FLOAT32][MXP__SR](a, src, m, &whole);
            const size_t cuts[] = {0, 1, 7, 64, 999, 2500, 4999, m};
            for (size_t z = 0; z + 1 < sizeof cuts / sizeof cuts[0]; z++) {
                const mxp__cvt_args part = {false, 77, starts[q] + cuts[z], false};
                k->cvt[MXP_FLOAT16][MXP_FLOAT32][MXP__SR](c + cuts[z], src + cuts[z], cuts[z + 1] - cuts[z], &part);
            }
            assert_memory_equal(a, c, m * 2);
            /* and the reference: element i uses ref_sr_r(seed, index0 + i) (ref_convert.h; from
             * float32 to float16 two neighbours share words, a half each, since session 53) */
            ref_table t = {0};
            assert_true(ref_table_init(&t, MXP_FLOAT16));
            for (size_t i = 0; i < m; i++) {
                uint64_t want = ref_convert(&t, MXP_FLOAT16, MXP_FLOAT32, bits_of_f32(src[i]), false, true,
                                            ref_sr_r(77, starts[q] + i, MXP_FLOAT32, MXP_FLOAT16));
                if (a[i] != want)
                    fail_msg("[%s] index %llu: got 0x%04X want 0x%04llX", k->name,
                             (unsigned long long)(starts[q] + i), a[i], (unsigned long long)want);
            }
            ref_table_free(&t);
        }
    }

    /* different seeds give different streams */
    o.rounding = MXP_ROUND_STOCHASTIC;
    o.threads = 1;
    o.seed = 1;
    assert_int_equal(mxp_convert_ex(a, MXP_BFLOAT16, src, MXP_FLOAT32, 100000, &o), MXP_OK);
    o.seed = 2;
    assert_int_equal(mxp_convert_ex(b, MXP_BFLOAT16, src, MXP_FLOAT32, 100000, &o), MXP_OK);
    size_t diff = 0;
    for (size_t i = 0; i < 100000; i++) diff += a[i] != b[i];
    assert_true(diff > 10000); /* about half of the inexact elements differ */
    free(src);
    free(a);
    free(b);
    free(c);
}

/* ---- in place ------------------------------------------------------------------------------ */

static void test_in_place(void **state)
{
    (void)state;
    enum { N = 1000 };
    static uint16_t buf[N], want[N], orig[N];
    for (size_t i = 0; i < N; i++) orig[i] = (uint16_t)rng64();
    memcpy(buf, orig, sizeof buf);
    assert_int_equal(mxp_convert(want, MXP_BFLOAT16, orig, MXP_FLOAT16, N), MXP_OK);
    assert_int_equal(mxp_convert(buf, MXP_BFLOAT16, buf, MXP_FLOAT16, N), MXP_OK);
    assert_memory_equal(buf, want, sizeof buf);
    memcpy(buf, orig, sizeof buf);
    assert_int_equal(mxp_convert(want, MXP_FLOAT16, orig, MXP_BFLOAT16, N), MXP_OK);
    const mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, true, 8, 0};
    assert_int_equal(mxp_convert_ex(want, MXP_FLOAT16, orig, MXP_BFLOAT16, N, &o), MXP_OK);
    assert_int_equal(mxp_convert_ex(buf, MXP_FLOAT16, buf, MXP_BFLOAT16, N, &o), MXP_OK);
    assert_memory_equal(buf, want, sizeof buf);
    /* identity in place with saturate: inf -> max, the rest unchanged */
    float f[4] = {INFINITY, -INFINITY, 1.5f, -0.0f};
    const mxp_convert_opts sat = {MXP_ROUND_NEAREST_EVEN, true, 0, 0};
    assert_int_equal(mxp_convert_ex(f, MXP_FLOAT32, f, MXP_FLOAT32, 4, &sat), MXP_OK);
    assert_int_equal(bits_of_f32(f[0]), 0x7F7FFFFFu);
    assert_int_equal(bits_of_f32(f[1]), 0xFF7FFFFFu);
    assert_true(f[2] == 1.5f);
    assert_int_equal(bits_of_f32(f[3]), 0x80000000u);
    /* unaligned buffers */
    static unsigned char raw[4 * N + 8], out[2 * N + 8];
    for (size_t i = 0; i < 4 * N + 8; i++) raw[i] = (unsigned char)rng64();
    assert_int_equal(mxp_convert(out + 1, MXP_FLOAT16, raw + 1, MXP_FLOAT32, N), MXP_OK);
    for (size_t i = 0; i < N; i++) {
        uint32_t x;
        memcpy(&x, raw + 1 + 4 * i, 4);
        uint16_t y, z;
        memcpy(&y, out + 1 + 2 * i, 2);
        assert_int_equal(mxp_convert(&z, MXP_FLOAT16, &x, MXP_FLOAT32, 1), MXP_OK);
        assert_int_equal(y, z);
    }
}

/* ---- flush-to-zero / denormals-are-zero must not change anything --------------------------- */

/*
 * Every pair on every ISA table and through mxp_convert_ex, on inputs rich in subnormals (of
 * the source, and values that land in the target's subnormal range), gives the same bits with
 * the MXCSR's flush-to-zero and denormals-are-zero bits set as without them, and the result
 * without them matches the reference.
 */
static void test_ftz_daz_independent(void **state)
{
    (void)state;
#ifdef HAVE_MXCSR
    enum { N = 1024, PATHS = MXP__ISA_COUNT + 1 };
    static unsigned char src[N * 8], want[N * 8], got[N * 8];
    ref_table tables[MXP_FLOAT_DTYPE_COUNT] = {{0}};
    for (int d = MXP_FLOAT16; d < MXP_FLOAT_DTYPE_COUNT; d++) assert_true(ref_table_init(&tables[d], (mxp_dtype)d));
    for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++) {
        const ref_format f = ref_format_of((mxp_dtype)s);
        for (size_t i = 0; i < N; i++) {
            uint64_t x = rng64();
            const uint64_t keep = ref_sign_bit((mxp_dtype)s) | ((1ull << f.mbits) - 1u);
            if (i % 3 == 0) x &= keep; /* a subnormal (or zero) of the source */
            else if (s == MXP_FLOAT64) /* around 2^-150 .. 2^-126 (float32 subnormals) and 2^-40 .. 2^-14 */
                x = (x & keep) | (uint64_t)(i % 3 == 1 ? 1023 - 150 + (int)(i % 25) : 1023 - 40 + (int)(i % 27)) << 52;
            else if (s == MXP_FLOAT32) /* around 2^-40 .. 2^-14: float16 / float8 subnormals */
                x = (x & keep) | (uint64_t)(127 - 40 + (int)(i % 27)) << 23;
            ref_store(src, i, (mxp_dtype)s, x);
        }
        for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++) {
            for (int mode = 0; mode < 2; mode++) {
                for (int path = 0; path < PATHS; path++) {
                    const mxp__kernels *k = path < MXP__ISA_COUNT ? mxp__kernels_for((mxp__isa_id)path) : NULL;
                    if (path < MXP__ISA_COUNT && !k) continue;
                    const mxp__cvt_args a = {false, 4, 0, false};
                    const mxp_convert_opts o = {(mxp_rounding)mode, false, 4, 0};
                    for (int ftz = 0; ftz < 2; ftz++) {
                        unsigned char *out = ftz ? got : want;
                        const unsigned int saved = _mm_getcsr();
                        if (ftz) _mm_setcsr(saved | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
                        mxp_status st = MXP_OK;
                        if (k) k->cvt[d][s][mode](out, src, N, &a);
                        else st = mxp_convert_ex(out, (mxp_dtype)d, src, (mxp_dtype)s, N, &o);
                        _mm_setcsr(saved);
                        assert_int_equal(st, MXP_OK);
                    }
                    const size_t bytes = N * mxp_dtype_size((mxp_dtype)d);
                    if (memcmp(want, got, bytes) != 0) {
                        for (size_t i = 0; i < N; i++)
                            if (ref_load(want, i, (mxp_dtype)d) != ref_load(got, i, (mxp_dtype)d))
                                fail_msg("[%s] %s -> %s mode %d: input 0x%llX gives 0x%llX, with FTZ/DAZ 0x%llX",
                                         k ? k->name : "mxp_convert_ex", mxp_dtype_name((mxp_dtype)s),
                                         mxp_dtype_name((mxp_dtype)d), mode,
                                         (unsigned long long)ref_load(src, i, (mxp_dtype)s),
                                         (unsigned long long)ref_load(want, i, (mxp_dtype)d),
                                         (unsigned long long)ref_load(got, i, (mxp_dtype)d));
                    }
                    for (size_t i = 0; i < N; i++) {
                        const uint64_t x = ref_load(src, i, (mxp_dtype)s);
                        const uint32_t r = ref_sr_r(4, i, (mxp_dtype)s, (mxp_dtype)d);
                        const uint64_t w = ref_convert(d >= MXP_FLOAT16 ? &tables[d] : NULL, (mxp_dtype)d,
                                                       (mxp_dtype)s, x, false, mode == 1, r);
                        if (ref_load(want, i, (mxp_dtype)d) != w &&
                            !tie_away_tolerated_src(d, mode, s, x, w, ref_load(want, i, (mxp_dtype)d)))
                            fail_msg("%s -> %s mode %d: input 0x%llX gives 0x%llX, want 0x%llX",
                                     mxp_dtype_name((mxp_dtype)s), mxp_dtype_name((mxp_dtype)d), mode,
                                     (unsigned long long)x, (unsigned long long)ref_load(want, i, (mxp_dtype)d),
                                     (unsigned long long)w);
                    }
                }
            }
        }
    }
    for (int d = MXP_FLOAT16; d < MXP_FLOAT_DTYPE_COUNT; d++) ref_table_free(&tables[d]);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_design_examples),
        cmocka_unit_test(test_saturate_every_pair),
        cmocka_unit_test(test_every_pair_random),
        cmocka_unit_test(test_stochastic_statistics),
        cmocka_unit_test(test_stochastic_exact_values),
        cmocka_unit_test(test_stochastic_reproducible),
        cmocka_unit_test(test_in_place),
        cmocka_unit_test(test_ftz_daz_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
