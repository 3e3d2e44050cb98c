/*
 * test_convert_exhaustive.c - exhaustive and boundary tests of the conversions against the
 * independent reference in ref_convert.h (label: exhaustive).
 *
 * Coverage (printed as it runs):
 *  - all 2^32 float32 patterns -> float16, bfloat16, e4m3fn, e5m2, nearest-even with saturate
 *    off and on through the scalar table, and saturate off through the public mxp_convert
 *    (the active ISA path); checked as runs between precomputed rounding boundaries, so the
 *    check costs far less than the conversions;
 *  - stochastic rounding of float32 on a strided sample of patterns, every narrow target,
 *    every ISA this CPU has;
 *  - every float16 / bfloat16 / float8 pattern to all six floating dtypes (decode to float32
 *    and float64 included), nearest-even with and without saturate and stochastic with three
 *    seeds, on every ISA this CPU has;
 *  - float64 inputs at, and one float64 ulp either side of, every rounding midpoint of every
 *    8/16-bit target (both signs), and around float32 midpoints for a large random sample;
 *  - float64 values stepped ulp by ulp around the subnormal boundaries and overflow thresholds
 *    of every target.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kernels.h"
#include "mixprec.h"
#include "ref_convert.h"
#include "test_util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const mxp_dtype narrow_targets[] = {MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN,
                                           MXP_FLOAT8_E5M2};
#define NTARGETS 4

/* A small deterministic generator for samples (xorshift64*). */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng64(void) { return tu_rand64(&rng_state); }

/* ---- all 2^32 float32 inputs, nearest-even ---------------------------------------------- */

#define BLOCK ((size_t)1 << 16)

typedef struct sweep_target {
    mxp_dtype d;
    ref_table t;
    uint32_t *bounds; /* bounds[k]: first non-negative float32 pattern rounding to entry k */
} sweep_target;

/* Report the first element of out[0..n) (inputs base + i) that differs from want. */
static void fail_at(const char *what, mxp_dtype d, uint32_t input, uint64_t got, uint64_t want)
{
    fail_msg("%s float32 -> %s: input 0x%08X: got 0x%llX, want 0x%llX", what, mxp_dtype_name(d),
             (unsigned)input, (unsigned long long)got, (unsigned long long)want);
}

/*
 * Check one block of outputs: inputs are the float32 patterns p0 .. p0 + n - 1 (one sign, no
 * NaN boundary inside except the inf/NaN step, which is handled element by element).
 */
static void check_block(const char *what, const sweep_target *st, uint32_t p0, size_t n,
                        const void *out, bool sat)
{
    const mxp_dtype d = st->d;
    const uint32_t sign_in = p0 & 0x80000000u;
    const uint64_t sign_out = sign_in ? ref_sign_bit(d) : 0;
    const uint32_t m0 = p0 & 0x7FFFFFFFu;
    const size_t K = st->t.count; /* entry K-1 is "beyond" (overflow) */
    const int bits = ref_format_of(d).bits;
    /* k: the entry of m0 (largest k with bounds[k] <= m0) */
    size_t lo = 0, hi = K;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->bounds[mid] <= m0) lo = mid;
        else hi = mid;
    }
    size_t k = lo;
    size_t i = 0;
    while (i < n) {
        const uint32_t m = m0 + (uint32_t)i;
        if (m > 0x7F800000u) { /* NaN inputs: one by one */
            const uint64_t want = ref_nan_bits(d, MXP_FLOAT32, sign_in | m);
            const uint64_t got = ref_load(out, i, d);
            if (got != want) fail_at(what, d, sign_in | m, got, want);
            i++;
            continue;
        }
        while (k + 1 < K && st->bounds[k + 1] <= m) k++;
        /* run [i, end): every input rounds to entry k */
        size_t end = n;
        if (k + 1 < K && (size_t)(st->bounds[k + 1] - m0) < end) end = st->bounds[k + 1] - m0;
        if (0x7F800001u - m0 < end) end = 0x7F800001u - m0; /* NaNs start after inf */
        const uint64_t want = sign_out | (k + 1 == K ? ref_overflow_bits(d, sat) : st->t.pat[k]);
        unsigned acc = 0;
        if (bits == 8) {
            const uint8_t *o = (const uint8_t *)out;
            for (size_t j = i; j < end; j++) acc |= o[j] ^ (unsigned)want;
        } else {
            const uint16_t *o = (const uint16_t *)out;
            for (size_t j = i; j < end; j++) acc |= o[j] ^ (unsigned)want;
        }
        if (acc) {
            for (size_t j = i; j < end; j++)
                if (ref_load(out, j, d) != want)
                    fail_at(what, d, sign_in | (m0 + (uint32_t)j), ref_load(out, j, d), want);
        }
        i = end;
    }
}

static void test_f32_all_patterns(void **state)
{
    (void)state;
    const double t0 = now_s();
    const mxp__kernels *sk = mxp__kernels_for(MXP__ISA_SCALAR);
    assert_non_null(sk);
    sweep_target st[NTARGETS];
    for (int j = 0; j < NTARGETS; j++) {
        st[j].d = narrow_targets[j];
        assert_true(ref_table_init(&st[j].t, st[j].d));
        st[j].bounds = malloc(st[j].t.count * sizeof *st[j].bounds);
        assert_non_null(st[j].bounds);
        ref_f32_bounds(&st[j].t, st[j].bounds);
    }
    uint32_t *src = malloc(BLOCK * sizeof *src);
    uint16_t *out = malloc(BLOCK * sizeof *out);
    assert_non_null(src);
    assert_non_null(out);
    uint64_t checked = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += BLOCK) {
        for (size_t i = 0; i < BLOCK; i++) src[i] = (uint32_t)(base + i);
        for (int j = 0; j < NTARGETS; j++) {
            const mxp_dtype d = st[j].d;
            for (int sat = 0; sat < 2; sat++) {
                const mxp__cvt_args a = {sat != 0, 0, base, false};
                sk->cvt[d][MXP_FLOAT32][MXP__RNE](out, src, BLOCK, &a);
                check_block(sat ? "scalar, saturate" : "scalar", &st[j], (uint32_t)base, BLOCK, out,
                            sat != 0);
                checked += BLOCK;
            }
            assert_int_equal(mxp_convert(out, d, src, MXP_FLOAT32, BLOCK), MXP_OK);
            check_block(mxp_isa(), &st[j], (uint32_t)base, BLOCK, out, false);
            checked += BLOCK;
        }
    }
    for (int j = 0; j < NTARGETS; j++) {
        ref_table_free(&st[j].t);
        free(st[j].bounds);
    }
    free(src);
    free(out);
    print_message("all 2^32 float32 -> {f16, bf16, e4m3fn, e5m2} x {scalar, scalar+saturate, "
                  "mxp_convert(%s)}: %llu conversions checked in %.1f s\n",
                  mxp_isa(), (unsigned long long)checked, now_s() - t0);
}

/* ---- float32 stochastic rounding on a strided sample -------------------------------------- */

static void test_f32_stochastic_sample(void **state)
{
    (void)state;
    const double t0 = now_s();
    const size_t n = (size_t)1 << 20;
    const uint32_t stride = 4093; /* prime: every exponent and mantissa bit pattern visits */
    uint32_t *src = malloc(n * sizeof *src);
    uint16_t *out = malloc(n * sizeof *out);
    uint16_t *want = malloc(n * sizeof *want);
    assert_non_null(src);
    assert_non_null(out);
    assert_non_null(want);
    uint64_t checked = 0;
    for (int j = 0; j < NTARGETS; j++) {
        const mxp_dtype d = narrow_targets[j];
        ref_table t = {0};
        assert_true(ref_table_init(&t, d));
        for (uint64_t start = 0; start < (1ull << 32); start += (uint64_t)n * stride) {
            size_t cnt = 0;
            for (uint64_t p = start; p < (1ull << 32) && cnt < n; p += stride) src[cnt++] = (uint32_t)p;
            for (int sat = 0; sat < 2; sat++) {
                const mxp__cvt_args a = {sat != 0, 0xC0FFEEull + start, start, false};
                for (size_t i = 0; i < cnt; i++)
                    want[i] = (uint16_t)ref_convert(&t, d, MXP_FLOAT32, src[i], sat != 0, true,
                                                    ref_sr_r(a.seed, a.index0 + i, MXP_FLOAT32, d));
                for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
                    const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
                    if (!k) continue;
                    k->cvt[d][MXP_FLOAT32][MXP__SR](out, src, cnt, &a);
                    for (size_t i = 0; i < cnt; i++) {
                        const uint64_t got = ref_load(out, i, d);
                        if (got != want[i])
                            fail_msg("[%s] stochastic float32 -> %s (saturate %d): input 0x%08X r 0x%08X: "
                                     "got 0x%llX, want 0x%llX", k->name, mxp_dtype_name(d), sat,
                                     (unsigned)src[i], (unsigned)ref_sr_r(a.seed, a.index0 + i, MXP_FLOAT32, d),
                                     (unsigned long long)got, (unsigned long long)want[i]);
                    }
                    checked += cnt;
                }
            }
        }
        ref_table_free(&t);
    }
    free(src);
    free(out);
    free(want);
    print_message("stochastic float32 -> 4 narrow targets, every 4093rd pattern, saturate off/on, "
                  "every ISA: %llu checked in %.1f s\n", (unsigned long long)checked, now_s() - t0);
}

/* ---- every 8/16-bit source pattern to every floating dtype, every ISA ---------------------- */

static void check_pair_inputs(const mxp__kernels *k, mxp_dtype dst, mxp_dtype src, const void *in,
                              size_t n, const ref_table *t, uint64_t *checked)
{
    unsigned char *out = malloc(n * 8 + 1);
    assert_non_null(out);
    const uint64_t seeds[] = {1, 0xDEADBEEFull, 0x123456789ABCDEFull};
    for (int mode = 0; mode < 5; mode++) { /* RNE, RNE+sat, SR x 3 seeds (sat on for the last) */
        const bool sr = mode >= 2;
        const bool sat = mode == 1 || mode == 4;
        const mxp__cvt_args a = {sat, sr ? seeds[mode - 2] : 0, sr ? (uint64_t)mode << 40 : 0, false};
        k->cvt[dst][src][sr ? MXP__SR : MXP__RNE](out, in, n, &a);
        for (size_t i = 0; i < n; i++) {
            const uint64_t x = ref_load(in, i, src);
            const uint32_t r = sr ? ref_sr_r(a.seed, a.index0 + i, src, dst) : 0;
            const uint64_t want = ref_convert(t, dst, src, x, sat, sr, r);
            const uint64_t got = ref_load(out, i, dst);
            if (got != want)
                fail_msg("[%s] %s -> %s (%s%s): input 0x%llX: got 0x%llX, want 0x%llX", k->name,
                         mxp_dtype_name(src), mxp_dtype_name(dst), sr ? "stochastic" : "nearest-even",
                         sat ? ", saturate" : "", (unsigned long long)x, (unsigned long long)got,
                         (unsigned long long)want);
        }
        *checked += n;
    }
    free(out);
}

static void test_small_sources_all_patterns(void **state)
{
    (void)state;
    const double t0 = now_s();
    const mxp_dtype smalls[] = {MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    ref_table tables[MXP_FLOAT_DTYPE_COUNT] = {{0}};
    for (int d = MXP_FLOAT16; d < MXP_FLOAT_DTYPE_COUNT; d++) assert_true(ref_table_init(&tables[d], (mxp_dtype)d));
    uint16_t *in = malloc(((size_t)1 << 16) * sizeof *in);
    assert_non_null(in);
    uint64_t checked = 0;
    int isas = 0;
    for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
        if (!k) continue;
        isas++;
        for (int s = 0; s < 4; s++) {
            const mxp_dtype src = smalls[s];
            const size_t n = (size_t)1 << ref_format_of(src).bits;
            for (size_t i = 0; i < n; i++) ref_store(in, i, src, i);
            for (int dst = 0; dst < MXP_FLOAT_DTYPE_COUNT; dst++)
                check_pair_inputs(k, (mxp_dtype)dst, src, in, n, dst >= MXP_FLOAT16 ? &tables[dst] : NULL,
                                  &checked);
        }
    }
    for (int d = MXP_FLOAT16; d < MXP_FLOAT_DTYPE_COUNT; d++) ref_table_free(&tables[d]);
    free(in);
    print_message("every f16/bf16/e4m3fn/e5m2 pattern -> all 6 dtypes x {RNE, RNE+sat, SR x3} on %d "
                  "ISA(s): %llu checked in %.1f s\n", isas, (unsigned long long)checked, now_s() - t0);
}

/* ---- float64 inputs around midpoints and boundaries --------------------------------------- */

/* Convert the n doubles in x to dst on every ISA, nearest-even (sat off/on) and stochastic. */
static void check_f64_inputs(mxp_dtype dst, const double *x, size_t n, const ref_table *t,
                             uint64_t *checked)
{
    for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
        if (k) check_pair_inputs(k, dst, MXP_FLOAT64, x, n, t, checked);
    }
}

static void test_f64_midpoints(void **state)
{
    (void)state;
    const double t0 = now_s();
    uint64_t checked = 0;
    for (int j = 0; j < NTARGETS; j++) {
        const mxp_dtype d = narrow_targets[j];
        ref_table t = {0};
        assert_true(ref_table_init(&t, d));
        /* at each midpoint (including max/beyond), one ulp below and above, both signs */
        const size_t n = (t.count - 1) * 6;
        double *x = malloc(n * sizeof *x);
        assert_non_null(x);
        size_t c = 0;
        for (size_t k = 1; k < t.count; k++) {
            const double mid = t.val[k - 1] + (t.val[k] - t.val[k - 1]) / 2;
            const double v[3] = {nextafter(mid, 0.0), mid, nextafter(mid, HUGE_VAL)};
            for (int q = 0; q < 3; q++) {
                x[c++] = v[q];
                x[c++] = -v[q];
            }
        }
        check_f64_inputs(d, x, c, &t, &checked);
        free(x);
        ref_table_free(&t);
    }
    /* float32 midpoints: a random sample of patterns and their upper neighbour */
    const size_t n = (size_t)1 << 19;
    double *x = malloc(n * 6 * sizeof *x);
    assert_non_null(x);
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t p = (uint32_t)(rng64() >> 33) % 0x7F800000u; /* finite, non-negative */
        float lo, hi;
        memcpy(&lo, &p, 4);
        hi = nextafterf(lo, INFINITY);
        const double mid = isinf(hi) ? (double)lo + ((ldexp(1.0, 128) - (double)lo) / 2)
                                     : (double)lo + (((double)hi - (double)lo) / 2);
        const double v[3] = {nextafter(mid, 0.0), mid, nextafter(mid, HUGE_VAL)};
        for (int q = 0; q < 3; q++) {
            x[c++] = v[q];
            x[c++] = -v[q];
        }
    }
    check_f64_inputs(MXP_FLOAT32, x, c, NULL, &checked);
    free(x);
    print_message("float64 at and +-1 ulp around every midpoint of f16/bf16/e4m3fn/e5m2 and %zu "
                  "float32 midpoints: %llu checked in %.1f s\n", n, (unsigned long long)checked,
                  now_s() - t0);
}

static void test_f64_boundaries(void **state)
{
    (void)state;
    const double t0 = now_s();
    uint64_t checked = 0;
    for (int d = MXP_FLOAT64; d < MXP_FLOAT_DTYPE_COUNT; d++) {
        const mxp_dtype dt = (mxp_dtype)d;
        ref_table t = {0};
        const bool small = d >= MXP_FLOAT16;
        if (small) assert_true(ref_table_init(&t, dt));
        const ref_format f = ref_format_of(dt);
        const int bias = ref_bias(f);
        const double minsub = ldexp(1.0, 1 - bias - f.mbits);
        const double minnorm = ldexp(1.0, 1 - bias);
        const double maxfin = ref_decode(dt, ref_maxfin_bits(dt));
        const double ulp_top = ldexp(1.0, (1 << (f.ebits - 1)) - 1 - f.mbits - (f.fn ? -1 : 0));
        const double anchors[] = {0.0,
                                  minsub / 4,
                                  minsub / 2,
                                  minsub,
                                  minsub * 1.5,
                                  minsub * 2.5,
                                  minnorm - minsub,
                                  minnorm - minsub / 2,
                                  minnorm,
                                  minnorm + minsub / 2,
                                  maxfin,
                                  maxfin + ulp_top / 2,
                                  maxfin + ulp_top,
                                  maxfin * 4,
                                  DBL_MAX,
                                  DBL_TRUE_MIN,
                                  DBL_MIN,
                                  HUGE_VAL};
        const size_t na = sizeof anchors / sizeof anchors[0];
        const int steps = 40;
        double *x = malloc(na * (size_t)(2 * steps + 1) * 2 * sizeof *x);
        assert_non_null(x);
        size_t c = 0;
        for (size_t a = 0; a < na; a++) {
            /* walk from `steps` ulps below to `steps` ulps above the anchor */
            double v = anchors[a];
            for (int s = 0; s < steps && v > 0; s++) v = nextafter(v, 0.0);
            for (int s = 0; s <= 2 * steps; s++) {
                x[c++] = v;
                x[c++] = -v;
                if (isinf(v)) break;
                v = nextafter(v, HUGE_VAL);
            }
        }
        /* d == float64 (identity) checks saturate's inf -> max and exact copies */
        check_f64_inputs(dt, x, c, small ? &t : NULL, &checked);
        free(x);
        if (small) ref_table_free(&t);
    }
    print_message("float64 stepped ulp by ulp around subnormal, normal and overflow boundaries of "
                  "all 6 targets: %llu checked in %.2f s\n", (unsigned long long)checked, now_s() - t0);
}

/* An optional argument selects tests by name pattern, e.g. "test_f64*". */
int main(int argc, char **argv)
{
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_sources_all_patterns),
        cmocka_unit_test(test_f64_midpoints),
        cmocka_unit_test(test_f64_boundaries),
        cmocka_unit_test(test_f32_stochastic_sample),
        cmocka_unit_test(test_f32_all_patterns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
