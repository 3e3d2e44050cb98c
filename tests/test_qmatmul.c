/*
 * test_qmatmul.c - mxp_matmul_int8 against an independent reference, on every kernel table.
 *
 * Reference (written differently from src/qmatmul.c and the kernels): the dot product is a plain
 * triple loop in int64; the descale is done in double, each float32 step emulated by an exact
 * double operation followed by one conversion to float (an int64 below 2^53 and the product of
 * two floats are exact in double; for the quotient, double's 53 bits are more than 2 * 24 + 2,
 * so rounding to double and then to float equals one rounding to float); bfloat16 / float16
 * are produced by a ldexp / nearbyint rounding of that float and compared as values (sign of
 * zero included, NaN as NaN), after decoding the library's bits arithmetically.
 *
 * Tables: scalar and every SIMD table this CPU has (the *_emu512 program: the emulated avx512
 * table in both variants, VNNI and AVX-512BW), each as registered, with tiny block sizes (many
 * k / row / column blocks and partial tiles), with the packed path forced and with the
 * small-m path forced; each also with int32 chunks of a few products (the int64 path). SIMD
 * results must equal the scalar table's bit for bit.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "kernels.h"
#include "mixprec.h"
#include "test_util.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { return (uint32_t)tu_rand64(&rng); }

/* ---- reference ---------------------------------------------------------------------------- */

static float ref_f32(double x) { return (float)x; } /* one rounding of a double to float */

/* y = (float)acc / (sa * sb), each step of the header emulated in double */
static float ref_descale(int64_t acc, float sa, float sb)
{
    const float fa = ref_f32((double)acc);                 /* |acc| < 2^53: exact in double */
    const float d = ref_f32((double)sa * (double)sb);      /* exact product, one rounding */
    return ref_f32((double)fa / (double)d);                /* innocuous double rounding */
}

/* x (a float) rounded to nearest even into a binary format with p significand bits, minimum
 * normal exponent emin and largest finite value maxv (overflow: inf). */
static double ref_round(double x, int p, int emin, double maxv)
{
    if (isnan(x) || isinf(x) || x == 0) return x;
    int e;
    frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    int q = e - 1;
    if (q < emin) q = emin;
    const double quantum = ldexp(1.0, q - (p - 1));
    const double r = nearbyint(x / quantum) * quantum; /* default mode: ties to even */
    if (fabs(r) > maxv) return x > 0 ? (double)INFINITY : -(double)INFINITY;
    return r == 0 ? copysign(0.0, x) : r;
}

static double decode_f16(uint16_t h)
{
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? (double)NAN : (double)INFINITY;
    else if (e == 0) v = ldexp(m, -24);
    else v = ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static double decode_bf16(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    return (double)tu_f32(u);
}

/* float8: e5m2 is float16's high byte; e4m3fn S.EEEE.MMM, bias 7, no inf, S.1111.111 NaN */
static double decode_f8(uint8_t c, mxp_dtype t)
{
    if (t == MXP_FLOAT8_E5M2) return decode_f16((uint16_t)(c << 8));
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    double v;
    if (e == 15 && m == 7) v = (double)NAN;
    else if (e == 0) v = ldexp(m, -9);
    else v = ldexp(8 + m, e - 10);
    return s ? -v : v;
}

/* the library's element i of y (type yt) as a double */
static double got_value(const void *y, mxp_dtype yt, size_t i)
{
    if (yt == MXP_FLOAT32) {
        float f;
        memcpy(&f, (const char *)y + 4 * i, 4);
        return (double)f;
    }
    if (yt == MXP_FLOAT64) {
        double d;
        memcpy(&d, (const char *)y + 8 * i, 8);
        return d;
    }
    if (yt == MXP_FLOAT8_E4M3FN || yt == MXP_FLOAT8_E5M2) return decode_f8(((const uint8_t *)y)[i], yt);
    uint16_t h;
    memcpy(&h, (const char *)y + 2 * i, 2);
    return yt == MXP_FLOAT16 ? decode_f16(h) : decode_bf16(h);
}

static double want_value(float v, mxp_dtype yt)
{
    if (yt == MXP_FLOAT32 || yt == MXP_FLOAT64) return (double)v; /* float64: the float32 exactly */
    if (yt == MXP_FLOAT16) return ref_round((double)v, 11, -14, 65504.0);
    if (yt == MXP_FLOAT8_E5M2) return ref_round((double)v, 3, -14, 57344.0);
    if (yt == MXP_FLOAT8_E4M3FN) { /* no infinity: an overflow is NaN */
        const double r = ref_round((double)v, 4, -6, 448.0);
        return isinf(r) ? (double)NAN : r;
    }
    return ref_round((double)v, 8, -126, (double)FLT_MAX * (1.0 - 0x1p-8) / (1.0 - 0x1p-24));
}

static bool same_value(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* want[i * n + j] (double) for yt */
static void reference(double *want, mxp_dtype yt, const int8_t *a, const float *sa,
                      const int8_t *b, const float *sb, size_t m, size_t k, size_t n)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            int64_t s = 0;
            for (size_t p = 0; p < k; p++) s += (int64_t)a[i * k + p] * (int64_t)b[p * n + j];
            want[i * n + j] = want_value(ref_descale(s, sa[i], sb[j]), yt);
        }
}

/* ---- tables ------------------------------------------------------------------------------- */

#define MAXT 128
static mxp__kernels tabs[MAXT];
static size_t tab_k32[MAXT]; /* k32_max to call the table with */
static char tab_names[MAXT][64];
static int ntabs;

static void add_tab(const mxp__kernels *k, const char *what, size_t k32)
{
    assert_true(ntabs < MAXT);
    tabs[ntabs] = *k;
    tab_k32[ntabs] = k32;
    snprintf(tab_names[ntabs], sizeof tab_names[ntabs], "%s/%s/%s k32=%zu", k->name,
             k->qmm.name, what, k32);
    ntabs++;
}

/* every variant of one table */
static void add_variants(const mxp__kernels *k)
{
    static const size_t k32s[] = {0, 5, 64};
    for (size_t t = 0; t < sizeof k32s / sizeof k32s[0]; t++) {
        add_tab(k, "as registered", k32s[t]);
        mxp__kernels v = *k;
        v.qmm.kc = 7;
        v.qmm.mc = 5;
        v.qmm.nc = 19;
        v.qmm.rows_kc = 9;
        v.qmm.rows_nc = 21;
        add_tab(&v, "tiny blocks", k32s[t]);
        v.qmm.rows_max_m = 0;
        add_tab(&v, "tiny blocks, packed", k32s[t]);
        v = *k;
        v.qmm.rows_max_m = SIZE_MAX;
        add_tab(&v, "rows", k32s[t]);
        v.qmm.rows_kc = 600; /* above the AVX2 rows() pass of 512 */
        v.qmm.rows_nc = 5;
        add_tab(&v, "rows, long k", k32s[t]);
        v.qmm.rows_nc = 70; /* one 64-column strip of the VNNI rows() and a tail */
        add_tab(&v, "rows, long k, strips", k32s[t]);
        v.qmm.rows_kc = 9; /* many calls continuing c (first = false), partial quads of k */
        v.qmm.rows_nc = 4096;
        add_tab(&v, "rows, short k blocks", k32s[t]);
    }
}

static void build_tables(void)
{
    if (ntabs) return;
#ifndef MXP_EMU512
    add_variants(mxp__scalar_kernels());
#else
    add_tab(mxp__scalar_kernels(), "as registered", 0); /* first: the bits the others must match */
#endif
    for (int isa = 1; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
        if (!k || !tu_isa_checked((mxp__isa_id)isa)) {
            print_message("%s: not checked (%s)\n", mxp__isa_name((mxp__isa_id)isa),
                          k ? tu_isa_unchecked((mxp__isa_id)isa) : "not available");
            continue;
        }
        add_variants(k);
#if defined(__x86_64__)
        if (isa == MXP__ISA_AVX512) {
            /* the other variant: AVX-512BW when VNNI was registered (it always can run where
             * the table does); VNNI only on emulated intrinsics or where it was registered */
            mxp__kernels v = *k;
            const bool vnni = strcmp(k->qmm.name, "avx512vnni") == 0;
#ifdef MXP_EMU512
            mxp__qmm_register_avx512(&v, !vnni);
            add_variants(&v);
#else
            if (vnni) {
                mxp__qmm_register_avx512(&v, false);
                add_variants(&v);
            }
#endif
        }
#endif
    }
    print_message("%d table variants\n", ntabs);
}

/* ---- data --------------------------------------------------------------------------------- */

static float rand_scale(void)
{
    switch (rnd() % 6) {
    case 0: return 1.0f;
    case 1: return ldexpf(1.0f, (int)(rnd() % 40) - 20);
    case 2: return (float)(127.0 / (1e-3 + (double)(rnd() % 100000) * 1e-4)); /* Keras-like */
    case 3: return tu_f32(0x3F800000u + (rnd() & 0x7FFFFFu));                   /* [1, 2) */
    case 4: return tu_f32(((uint32_t)(rnd() % 200 + 20) << 23) | (rnd() & 0x7FFFFFu));
    default: return tu_f32(((uint32_t)(rnd() % 30 + 1) << 23) | (rnd() & 0x7FFFFFu)); /* tiny */
    }
}

static void fill_i8(int8_t *p, size_t n, int mode)
{
    for (size_t i = 0; i < n; i++) {
        switch (mode) {
        case 0: p[i] = (int8_t)(rnd() & 0xFF); break;
        case 1: p[i] = (rnd() % 4) ? (int8_t)(rnd() & 0xFF) : (rnd() % 2 ? -128 : 127); break;
        case 2: p[i] = -128; break;
        default: p[i] = 127; break;
        }
    }
}

static const mxp_dtype ytypes[] = {MXP_FLOAT32, MXP_BFLOAT16, MXP_FLOAT16, MXP_FLOAT64, MXP_FLOAT8_E4M3FN,
                                   MXP_FLOAT8_E5M2};
#define NYT (sizeof ytypes / sizeof ytypes[0])

/* Run every table on one problem, y at byte offset yoff; compare with want and with the scalar
 * table's bits. Returns the number of table runs. */
static bool long_k_only; /* test_long_k: the tables with full int32 chunks only (time) */
static int check_all(const int8_t *a, const float *sa, const int8_t *b, const float *sb, size_t m,
                     size_t k, size_t n, mxp_dtype yt, const double *want, size_t yoff)
{
    const size_t es = mxp_dtype_size(yt), bytes = m * n * es;
    unsigned char *y = malloc(bytes + yoff + 16), *first = malloc(bytes + 1);
    assert_non_null(y);
    assert_non_null(first);
    int runs = 0;
    for (int t = 0; t < ntabs; t++) {
        if (long_k_only && tab_k32[t] != 0) continue;
        memset(y, 0xA5, bytes + yoff + 16);
        const mxp_status st =
            mxp__matmul_int8_k(&tabs[t], tab_k32[t], y + yoff, yt, a, sa, b, sb, m, k, n);
        if (st != MXP_OK) fail_msg("%s: status %d (%s)", tab_names[t], (int)st, mxp_last_error());
        for (size_t i = 0; i < yoff; i++) assert_int_equal(y[i], 0xA5);
        for (size_t i = 0; i < 16; i++) assert_int_equal(y[yoff + bytes + i], 0xA5);
        for (size_t e = 0; e < m * n; e++) {
            const double g = got_value(y + yoff, yt, e);
            if (!same_value(g, want[e]))
                fail_msg("%s: m=%zu k=%zu n=%zu %s y[%zu][%zu] = %a, want %a", tab_names[t], m, k,
                         n, mxp_dtype_name(yt), e / n, e % n, g, want[e]);
        }
        if (runs == 0) memcpy(first, y + yoff, bytes);
        else if (memcmp(first, y + yoff, bytes) != 0) {
            const size_t e = tu_first_diff(first, y + yoff, m * n, es);
            fail_msg("%s: not bit-identical to %s at y[%zu] (m=%zu k=%zu n=%zu %s)", tab_names[t],
                     tab_names[0], e, m, k, n, mxp_dtype_name(yt));
        }
        runs++;
    }
    free(y);
    free(first);
    return runs;
}

static void run_problem(size_t m, size_t k, size_t n, int amode, int bmode, size_t yoff)
{
    int8_t *a = malloc(m * k + 1), *b = malloc(k * n + 1);
    float *sa = malloc((m + 1) * sizeof *sa), *sb = malloc((n + 1) * sizeof *sb);
    double *want = malloc((m * n + 1) * sizeof *want);
    assert_true(a && b && sa && sb && want);
    fill_i8(a, m * k, amode);
    fill_i8(b, k * n, bmode);
    for (size_t i = 0; i < m; i++) sa[i] = rand_scale();
    for (size_t j = 0; j < n; j++) sb[j] = rand_scale();
    for (size_t t = 0; t < NYT; t++) {
        reference(want, ytypes[t], a, sa, b, sb, m, k, n);
        check_all(a, sa, b, sb, m, k, n, ytypes[t], want, yoff);
    }
    free(a);
    free(b);
    free(sa);
    free(sb);
    free(want);
}

/* ---- tests -------------------------------------------------------------------------------- */

static size_t rand_dim(void)
{
    static const size_t special[] = {0, 1, 2, 3, 5, 6, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65};
    return rnd() % 3 ? rnd() % 71 : special[rnd() % (sizeof special / sizeof special[0])];
}

static void test_random_shapes(void **state)
{
    (void)state;
    build_tables();
    for (int it = 0; it < 60; it++) {
        const size_t m = rand_dim(), k = rand_dim(), n = rand_dim();
        run_problem(m, k, n, (int)(rnd() % 2), (int)(rnd() % 2), rnd() % 4);
    }
    /* shapes where the SIMD tiles are full and where they are one short or one over */
    static const size_t dims[][3] = {{6, 32, 16},  {12, 64, 32}, {5, 31, 15},  {7, 33, 17},
                                     {1, 70, 70},  {4, 70, 33},  {70, 1, 70},  {70, 70, 1},
                                     {13, 17, 49}, {24, 9, 48},  {25, 128, 47}, {2, 3, 1}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        run_problem(dims[d][0], dims[d][1], dims[d][2], 1, 0, d % 4);
}

static void test_extremes(void **state)
{
    (void)state;
    build_tables();
    for (int am = 2; am <= 3; am++)
        for (int bm = 2; bm <= 3; bm++) {
            run_problem(9, 67, 35, am, bm, 1);
            run_problem(3, 1000, 20, am, bm, 0);
            run_problem(1, 1000, 135, am, bm, 2); /* one row: the VNNI rows(), k blocks of 512 */
        }
}

/* a 2 x k times k x 2 product with acc values a wrapping int32 would get wrong */
static void long_k(size_t k, int pattern)
{
    const size_t m = 2, n = 2;
    int8_t *a = malloc(m * k), *b = malloc(k * n);
    assert_true(a && b);
    for (size_t p = 0; p < k; p++) {
        for (size_t i = 0; i < m; i++) {
            int8_t v;
            switch (pattern) {
            case 0: v = 127; break;
            case 1: v = -128; break;
            default: v = (int8_t)(i ? -128 : 127); break;
            }
            a[i * k + p] = v;
        }
        for (size_t j = 0; j < n; j++) {
            int8_t v;
            switch (pattern) {
            case 0: v = 127; break;
            case 1: v = -128; break;
            /* cancellation: the first half adds 2^14-ish products, the second half subtracts
             * them, the last product leaves a small exact remainder */
            default: v = (int8_t)(p + 1 == k ? (j ? 3 : 1) : (p < k / 2 ? -128 : 127)); break;
            }
            b[p * n + j] = v;
        }
    }
    const float sa[2] = {1.0f, 1.0f}, sb[2] = {1.0f, 0.5f};
    double want[4];
    for (size_t t = 0; t < NYT; t++) {
        reference(want, ytypes[t], a, sa, b, sb, m, k, n);
        check_all(a, sa, b, sb, m, k, n, ytypes[t], want, t);
    }
    /* the float32 result directly from exact integers (no wrap-around anywhere) */
    float y[4];
    assert_int_equal(mxp_matmul_int8(y, MXP_FLOAT32, a, sa, b, sb, m, k, n), MXP_OK);
    const double kk = (double)k;
    if (pattern == 0) assert_true(y[0] == (float)(kk * 16129.0));
    if (pattern == 1) assert_true(y[3] == (float)(kk * 16384.0 * 2.0));
    free(a);
    free(b);
}

static void test_long_k(void **state)
{
    (void)state;
    build_tables();
    /* int32 chunks of a few products (the int64 path) are checked on small k elsewhere */
    long_k_only = true;
    static const size_t ks[] = {131071, 131072, 140001};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        for (int pat = 0; pat < 3; pat++) long_k(ks[i], pat);
    long_k_only = false;
}

/* a (1 x k) and b (k x 1) whose dot product is T: products of 127 * q, then a last r * 1 */
static void dot_for(int32_t T, int8_t *a, int8_t *b, size_t k)
{
    int32_t r = T;
    for (size_t i = 0; i + 1 < k; i++) {
        int32_t q = r / 127;
        if (q > 127) q = 127;
        if (q < -127) q = -127;
        a[i] = (int8_t)q;
        b[i] = 127;
        r -= q * 127;
    }
    assert_true(r >= -127 && r <= 127);
    a[k - 1] = (int8_t)r;
    b[k - 1] = 1;
}

/* 1 x 8 times 8 x n with chosen exact sums and scales: rounding ties, float16 / bfloat16
 * overflow, subnormal scale products */
static void test_boundaries(void **state)
{
    (void)state;
    build_tables();
    struct { int32_t acc; float sa, sb; } cases[] = {
        {257, 1, 1},     {259, 1, 1},      {-257, 1, 1},   {2049, 1, 1},   {2051, 1, 1},
        {-2049, 1, 1},   {65520, 1, 1},    {65519, 1, 1},  {-65520, 1, 1}, {65504, 1, 1},
        {4095, 0.0625f, 1},                {48000, 0.5f, 0.5f},            {1, 1e-20f, 1e-20f},
        {-1, 1e-20f, 1e-25f},              {0, 1e-30f, 1e-30f},            {0, 1, 1},
        {3, 3, 1},       {1, 3, 3},        {100000, 1e-30f, 1e30f},        {7, FLT_MAX, 2},
        {-16129, 1e-19f, 1e-19f},          {12345, 1.5f, 1e-10f},          {16777217, 1, 1},
    };
    const size_t nc = sizeof cases / sizeof cases[0];
    /* each case as a 1 x k times k x 1 product */
    for (size_t c = 0; c < nc; c++) {
        const int32_t T = cases[c].acc;
        const size_t k = (size_t)((T < 0 ? -(int64_t)T : T) / 16129) + 3;
        int8_t *a = malloc(k), *b = malloc(k);
        assert_true(a && b);
        dot_for(T, a, b, k);
        double want[1];
        for (size_t t = 0; t < NYT; t++) {
            reference(want, ytypes[t], a, &cases[c].sa, b, &cases[c].sb, 1, k, 1);
            check_all(a, &cases[c].sa, b, &cases[c].sb, 1, k, 1, ytypes[t], want, t);
        }
        free(a);
        free(b);
    }
    /* the reference itself, on values whose rounding is known by hand */
    assert_true(want_value(257.0f, MXP_BFLOAT16) == 256.0);
    assert_true(want_value(259.0f, MXP_BFLOAT16) == 260.0);
    assert_true(want_value(2049.0f, MXP_FLOAT16) == 2048.0);
    assert_true(want_value(2051.0f, MXP_FLOAT16) == 2052.0);
    assert_true(isinf(want_value(65520.0f, MXP_FLOAT16)));
    assert_true(want_value(65519.0f, MXP_FLOAT16) == 65504.0);
    assert_true(ref_descale(1, 1e-20f, 1e-20f) > 1e38f || isinf(ref_descale(1, 1e-20f, 1e-20f)));
    assert_true(isnan(ref_descale(0, 1e-30f, 1e-30f)));
    /* one row of many columns with per-column scales: the vector descale on every lane */
    const size_t n = 37, k = 8;
    int8_t *a = malloc(k), *b = malloc(k * n);
    float sa = 1.0f, *sb = malloc(n * sizeof *sb);
    double *want = malloc(n * sizeof *want);
    for (size_t p = 0; p < k; p++) a[p] = 127;
    for (size_t j = 0; j < n; j++) {
        sb[j] = j % 3 == 0 ? 1.0f : j % 3 == 1 ? 1e-38f : 3.0f;
        for (size_t p = 0; p < k; p++) b[p * n + j] = (int8_t)((int)(j * 7 + p) % 256 - 128);
    }
    for (size_t t = 0; t < NYT; t++) {
        reference(want, ytypes[t], a, &sa, b, sb, 1, k, n);
        check_all(a, &sa, b, sb, 1, k, n, ytypes[t], want, 3);
    }
    free(a);
    free(b);
    free(sb);
    free(want);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_MXCSR 1
static unsigned get_csr(void) { return __builtin_ia32_stmxcsr(); }
static void set_csr(unsigned v) { __builtin_ia32_ldmxcsr(v); }
#endif

/* the caller's floating-point mode (FTZ + DAZ, round toward zero, round up) changes nothing,
 * and is given back */
static void test_fenv(void **state)
{
    (void)state;
#ifdef HAVE_MXCSR
    build_tables();
    const size_t m = 5, k = 40, n = 23;
    int8_t a[5 * 40], b[40 * 23];
    float sa[5], sb[23];
    double want[5 * 23];
    fill_i8(a, m * k, 1);
    fill_i8(b, k * n, 1);
    for (size_t i = 0; i < m; i++) sa[i] = i % 2 ? 1e-20f : rand_scale();
    for (size_t j = 0; j < n; j++) sb[j] = j % 2 ? 1e-21f : rand_scale();
    sa[3] = 0x1p-130f; /* subnormal: a valid scale, also under DAZ (it compared as 0 until 2026-11-28) */
    sb[4] = 0x1p-140f;
    const unsigned modes[] = {0x8040u, 0x6000u, 0x4000u, 0x8040u | 0x2000u};
    for (size_t t = 0; t < NYT; t++) {
        reference(want, ytypes[t], a, sa, b, sb, m, k, n);
        for (size_t md = 0; md < sizeof modes / sizeof modes[0]; md++) {
            const unsigned old = get_csr();
            set_csr((old & ~0xE040u) | modes[md]);
            const unsigned before = get_csr();
            unsigned char y[5 * 23 * 8]; /* float64 the widest */
            const mxp_status st = mxp_matmul_int8(y, ytypes[t], a, sa, b, sb, m, k, n);
            const unsigned after = get_csr();
            set_csr(old);
            assert_int_equal(st, MXP_OK);
            assert_int_equal(after, before);
            for (size_t e = 0; e < m * n; e++)
                if (!same_value(got_value(y, ytypes[t], e), want[e]))
                    fail_msg("MXCSR mode %#x, %s: y[%zu] = %a, want %a", modes[md],
                             mxp_dtype_name(ytypes[t]), e, got_value(y, ytypes[t], e), want[e]);
        }
    }
#else
    print_message("no MXCSR on this target: skipped\n");
    skip();
#endif
}

static void expect_error(mxp_status st, mxp_status want_st, const char *needle,
                         const unsigned char *y, size_t bytes)
{
    assert_int_equal(st, want_st);
    if (!strstr(mxp_last_error(), needle))
        fail_msg("message '%s' does not name '%s'", mxp_last_error(), needle);
    for (size_t i = 0; i < bytes; i++) assert_int_equal(y[i], 0x5A);
}

static void test_errors(void **state)
{
    (void)state;
    enum { M = 3, K = 4, N = 6 };
    int8_t a[M * K], b[K * N];
    float sa[M] = {1, 2, 3}, sb[N] = {1, 1, 1, 1, 1, 1};
    unsigned char y[M * N * 4];
    memset(a, 1, sizeof a);
    memset(b, 1, sizeof b);
    memset(y, 0x5A, sizeof y);
#define CALL(yy, yt, aa, ssa, bb, ssb, m, k, n) mxp_matmul_int8(yy, yt, aa, ssa, bb, ssb, m, k, n)
    expect_error(CALL(NULL, MXP_FLOAT32, a, sa, b, sb, M, K, N), MXP_EINVAL, "y is NULL", y, sizeof y);
    expect_error(CALL(y, MXP_FLOAT32, NULL, sa, b, sb, M, K, N), MXP_EINVAL, "a is NULL", y, sizeof y);
    expect_error(CALL(y, MXP_FLOAT32, a, NULL, b, sb, M, K, N), MXP_EINVAL, "sa is NULL", y, sizeof y);
    expect_error(CALL(y, MXP_FLOAT32, a, sa, NULL, sb, M, K, N), MXP_EINVAL, "b is NULL", y, sizeof y);
    expect_error(CALL(y, MXP_FLOAT32, a, sa, b, NULL, M, K, N), MXP_EINVAL, "sb is NULL", y, sizeof y);
    expect_error(CALL(y, MXP_INT8, a, sa, b, sb, M, K, N), MXP_EUNSUPPORTED, "int8", y, sizeof y);
    expect_error(CALL(y, MXP_INT32, a, sa, b, sb, M, K, N), MXP_EUNSUPPORTED, "int32", y, sizeof y);
    expect_error(CALL(y, MXP_BOOL, a, sa, b, sb, M, K, N), MXP_EUNSUPPORTED, "not a floating dtype", y, sizeof y);
    expect_error(CALL(y, (mxp_dtype)999, a, sa, b, sb, M, K, N), MXP_EUNSUPPORTED, "999", y, sizeof y);
    /* sizes whose products overflow (the buffers cannot exist; nothing is read) */
    expect_error(CALL(y, MXP_FLOAT32, a, sa, b, sb, SIZE_MAX / 2, 3, 1), MXP_EINVAL, "overflow", y, sizeof y);
    expect_error(CALL(y, MXP_FLOAT32, a, sa, b, sb, 1, SIZE_MAX / 2, 3), MXP_EINVAL, "overflow", y, sizeof y);
    expect_error(CALL(y, MXP_FLOAT32, a, sa, b, sb, SIZE_MAX / 8, 1, 3), MXP_EINVAL, "overflow", y, sizeof y);
    expect_error(CALL(y, MXP_BFLOAT16, a, sa, b, sb, SIZE_MAX / 4, 0, 3), MXP_EINVAL, "overflow", y, sizeof y);
    /* bad scales, the first bad index named */
    const float bad[] = {0.0f, -1.0f, -0.0f, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        float s2[M] = {1, 2, 3}, t2[N] = {1, 1, 1, 1, 1, 1};
        s2[2] = bad[i];
        expect_error(CALL(y, MXP_FLOAT32, a, s2, b, sb, M, K, N), MXP_EINVAL, "sa[2]", y, sizeof y);
        t2[5] = bad[i];
        t2[4] = bad[i];
        expect_error(CALL(y, MXP_FLOAT16, a, sa, b, t2, M, K, N), MXP_EINVAL, "sb[4]", y, sizeof y);
    }
    /* empty products: nothing to write, NULL accepted */
    assert_int_equal(CALL(NULL, MXP_FLOAT32, NULL, NULL, NULL, NULL, 0, 5, 7), MXP_OK);
    assert_int_equal(CALL(NULL, MXP_FLOAT32, NULL, NULL, NULL, NULL, 4, 5, 0), MXP_OK);
    assert_int_equal(CALL(NULL, MXP_FLOAT32, NULL, NULL, NULL, NULL, 0, 0, 0), MXP_OK);
    /* k == 0: a and b may be NULL, y = 0 / (sa * sb) = +0 */
    assert_int_equal(CALL(y, MXP_FLOAT32, NULL, sa, NULL, sb, M, 0, N), MXP_OK);
    for (size_t e = 0; e < (size_t)M * N; e++) {
        float f;
        memcpy(&f, y + 4 * e, 4);
        assert_true(f == 0.0f && !signbit(f));
    }
#undef CALL
}

/* the public entry takes the active table */
static void test_public_matches_active(void **state)
{
    (void)state;
    const size_t m = 9, k = 50, n = 40;
    int8_t a[9 * 50], b[50 * 40];
    float sa[9], sb[40];
    fill_i8(a, m * k, 1);
    fill_i8(b, k * n, 1);
    for (size_t i = 0; i < m; i++) sa[i] = rand_scale();
    for (size_t j = 0; j < n; j++) sb[j] = rand_scale();
    uint16_t y1[9 * 40], y2[9 * 40];
    assert_int_equal(mxp_matmul_int8(y1, MXP_BFLOAT16, a, sa, b, sb, m, k, n), MXP_OK);
    assert_int_equal(mxp__matmul_int8_k(mxp__kernels_active(), 0, y2, MXP_BFLOAT16, a, sa, b, sb,
                                        m, k, n), MXP_OK);
    assert_memory_equal(y1, y2, sizeof y1);
    print_message("active table %s, int8 matmul kernels %s\n", mxp__kernels_active()->name,
                  mxp__kernels_active()->qmm.name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_extremes),
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_long_k),
        cmocka_unit_test(test_fenv),
        cmocka_unit_test(test_public_matches_active),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
