/*
 * test_isa_exhaustive.c - every SIMD path against the scalar reference on every input:
 *   float32 -> float16 / bfloat16 / e4m3fn / e5m2: all 2^32 bit patterns, in each of
 *     nearest-even (saturate off, on) and stochastic rounding (saturate off, on; fixed seed,
 *     index0 = the bit pattern, so every element sees a different random word and every lane
 *     position meets every pattern class);
 *   float16 / bfloat16 -> float32: all 2^16 patterns; e4m3fn / e5m2 -> float32: all 2^8
 *     (saturate off and on);
 *   float64 -> narrow: every tie and near-tie of every narrow format, and float64 -> float32
 *     around one float32 pattern in 1024 (f64_sweep), plus a double with a random mantissa in
 *     each binade met, in nearest-even and stochastic rounding.
 * Inputs go in blocks of 2^20 (both tables see the same block), split over two threads.
 * An ISA this CPU lacks is reported as skipped.
 *
 * Cost: the scalar oracle dominates; all 16 float32 sweeps took 2 minutes on two idle Zen 3
 * cores (up to 9 on a loaded machine). By default (30 s on two idle cores per ISA)
 * nearest-even without saturation sweeps all 2^32 patterns for every target, and the other
 * three modes sweep one block in eight: in every run of eight consecutive blocks (one sign and
 * exponent, 2^23 mantissas) one block, chosen by a hash so every mantissa prefix appears.
 * MXP_EXHAUSTIVE_FULL=1 in the environment sweeps all 2^32 patterns in all four modes;
 * MXP_EXHAUSTIVE_STRIDE=N one block in N in every mode (for emulators, see env_stride);
 * MXP_TEST_ISA=avx512 (or another name list) restricts the tables checked (test_util.h).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels.h"
#include "mixprec.h"
#include "test_util.h"
#include "bochs/f16c_ties.h"

#define BLOCK ((size_t)1 << 20)
#define NTHREADS 2

typedef struct job {
    const mxp__kernels *k;
    int dst;
    int mode;
    bool sat;
    uint32_t first_block, nblocks; /* blocks of BLOCK patterns (groups of `stride` blocks) */
    uint32_t stride;               /* one block per group of stride (a power of two) */
    /* result: the first mismatch */
    bool bad;
    uint32_t bad_in, bad_want, bad_got;
    size_t tolerated; /* differences accepted under MXP_TEST_F16C_TIES_AWAY (bochs/f16c_ties.h) */
} job;

static size_t tolerated; /* summed over the jobs */

static void *run_job(void *p)
{
    job *j = p;
    const size_t ob = mxp_dtype_size((mxp_dtype)j->dst);
    uint32_t *src = malloc(BLOCK * 4);
    unsigned char *want = malloc(BLOCK * ob), *got = malloc(BLOCK * ob);
    if (!src || !want || !got) {
        j->bad = true; /* reported as a failure with input 0 */
        goto out;
    }
    const mxp__cvt_fn ref = mxp__scalar_kernels()->cvt[j->dst][MXP_FLOAT32][j->mode];
    const mxp__cvt_fn fn = j->k->cvt[j->dst][MXP_FLOAT32][j->mode];
    for (uint32_t g = j->first_block; g < j->first_block + j->nblocks && !j->bad; g++) {
        const uint32_t b = j->stride * g + (tu_fmix32(g) & (j->stride - 1u));
        const uint32_t base = (uint32_t)(b * BLOCK);
        for (size_t i = 0; i < BLOCK; i++) src[i] = base + (uint32_t)i;
        const mxp__cvt_args a = {j->sat, 0x5EEDull, base, false};
        ref(want, src, BLOCK, &a);
        fn(got, src, BLOCK, &a);
        const size_t i = tie_away_first_diff(want, got, src, MXP_FLOAT32, BLOCK, ob, j->dst, j->mode, &j->tolerated);
        if (i < BLOCK) {
            j->bad = true;
            j->bad_in = src[i];
            j->bad_want = (uint32_t)tu_elem(want, i, ob);
            j->bad_got = (uint32_t)tu_elem(got, i, ob);
        }
    }
out:
    free(src);
    free(want);
    free(got);
    return NULL;
}

static void sweep_f32(const mxp__kernels *k, int dst, int mode, bool sat, uint32_t stride)
{
    const uint32_t nblocks = (uint32_t)((1ull << 32) / BLOCK) / stride;
    job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    bool started[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        const uint32_t lo = nblocks * (uint32_t)t / NTHREADS, hi = nblocks * (uint32_t)(t + 1) / NTHREADS;
        jobs[t] = (job){k, dst, mode, sat, lo, hi - lo, stride, false, 0, 0, 0, 0};
        started[t] = pthread_create(&th[t], NULL, run_job, &jobs[t]) == 0;
        if (!started[t]) run_job(&jobs[t]);
    }
    for (int t = 0; t < NTHREADS; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        tolerated += jobs[t].tolerated;
        if (jobs[t].bad)
            fail_msg("%s float32 -> %s %s sat=%d: input 0x%08x: want 0x%x, got 0x%x", k->name,
                     mxp_dtype_name((mxp_dtype)dst), mode ? "SR" : "RNE", (int)sat, jobs[t].bad_in,
                     jobs[t].bad_want, jobs[t].bad_got);
    }
}

static void decode_all(const mxp__kernels *k, int srcd)
{
    const size_t ib = mxp_dtype_size((mxp_dtype)srcd);
    const size_t n = (size_t)1 << (8 * ib);
    unsigned char *src = malloc(n * ib);
    uint32_t *want = malloc(n * 4), *got = malloc(n * 4);
    assert_non_null(src);
    assert_non_null(want);
    assert_non_null(got);
    for (size_t i = 0; i < n; i++) {
        const uint16_t v = (uint16_t)i;
        if (ib == 2) memcpy(src + 2 * i, &v, 2);
        else src[i] = (unsigned char)i;
    }
    for (int sat = 0; sat < 2; sat++) {
        for (int mode = 0; mode < MXP__NMODES; mode++) {
            const mxp__cvt_args a = {sat != 0, 1, 0, false};
            mxp__scalar_kernels()->cvt[MXP_FLOAT32][srcd][mode](want, src, n, &a);
            k->cvt[MXP_FLOAT32][srcd][mode](got, src, n, &a);
            for (size_t i = 0; i < n; i++)
                if (want[i] != got[i])
                    fail_msg("%s %s -> float32 sat=%d: input 0x%zx: want 0x%08x, got 0x%08x", k->name,
                             mxp_dtype_name((mxp_dtype)srcd), sat, i, want[i], got[i]);
        }
    }
    free(src);
    free(want);
    free(got);
}

/* MXP_EXHAUSTIVE_STRIDE=N (a power of two, 1..4096): every float32 sweep checks one block of
 * 2^20 patterns in N, whatever the mode (for runs under an instruction-set emulator, which are
 * a hundred times slower); 0 when unset. A malformed value fails the test rather than
 * silently checking something else. */
static uint32_t env_stride(void)
{
    const char *e = getenv("MXP_EXHAUSTIVE_STRIDE");
    if (!e || !*e) return 0;
    char *end;
    const unsigned long v = strtoul(e, &end, 10);
    if (*end || v == 0 || v > 4096 || (v & (v - 1)))
        fail_msg("MXP_EXHAUSTIVE_STRIDE='%s': want a power of two from 1 to 4096", e);
    return (uint32_t)v;
}

static const int targets[] = {MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};

/* float64 -> dst on the n doubles at x, nearest-even and stochastic (seed and index0 varying
 * from call to call, index0 straddling 2^32 every fourth call), saturate off and on, against
 * the reference (cvt_compose.c's round-to-odd path for the narrow formats, AVX for float32;
 * stochastic: cvt_f64_avx2.c's integer kernels). */
static void f64_check(const mxp__kernels *k, int dst, const uint64_t *x, size_t n)
{
    static uint64_t calls;
    const size_t ob = mxp_dtype_size((mxp_dtype)dst);
    unsigned char *want = malloc(n * ob), *got = malloc(n * ob);
    assert_non_null(want);
    assert_non_null(got);
    for (int mode = 0; mode < MXP__NMODES; mode++)
        for (int sat = 0; sat < 2; sat++) {
            calls++;
            const uint64_t index0 = calls % 4 == 0 ? 0xFFFFFFFFull - n / 2 : tu_fmix32((uint32_t)calls) * 977ull;
            const mxp__cvt_args a = {sat != 0, mode ? mxp__sr_key(calls, 7) : 1, mode ? index0 : 0, false};
            mxp__scalar_kernels()->cvt[dst][MXP_FLOAT64][mode](want, x, n, &a);
            k->cvt[dst][MXP_FLOAT64][mode](got, x, n, &a);
            const size_t i = tie_away_first_diff(want, got, x, MXP_FLOAT64, n, ob, dst, mode, &tolerated);
            if (i < n)
                fail_msg("%s float64 -> %s %s sat=%d index0=0x%llx: element %zu, input 0x%016llx: want 0x%llx, "
                         "got 0x%llx", k->name, mxp_dtype_name((mxp_dtype)dst), mode ? "SR" : "RNE", sat,
                         (unsigned long long)a.index0, i, (unsigned long long)x[i],
                         (unsigned long long)tu_elem(want, i, ob), (unsigned long long)tu_elem(got, i, ob));
        }
    free(want);
    free(got);
}

/* The pattern of double d, moved by `ulps` units in the last place (same sign). */
static uint64_t f64_move(double d, int ulps) { return tu_bits64(d) + (uint64_t)(int64_t)ulps; }

/*
 * float64 sources: every rounding boundary of every narrow format. For each finite pattern p of
 * the target (both signs), its value v, the midpoint m between v and the next pattern's value
 * (for max finite: the overflow boundary, half a step above), and the doubles v - 1 ulp, v,
 * v + 1 ulp, m - 2 .. m + 2 ulps: exactly the ties and the near-ties on either side, where a
 * float64 -> float32 -> narrow double rounding would go wrong (every pstep-th pattern: 1, or 7
 * under MXP_EXHAUSTIVE_STRIDE). Then float64 -> float32 the same way around float32 patterns
 * (one in `every`, all signs and exponents). Values are made in
 * double arithmetic, exact here (at most 24 significant bits, midpoints of neighbours).
 */
static void f64_sweep(const mxp__kernels *k, uint32_t every, size_t pstep)
{
    uint64_t *x = malloc(BLOCK * sizeof *x);
    assert_non_null(x);
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        const int d = targets[t];
        const size_t ob = mxp_dtype_size((mxp_dtype)d), npat = (size_t)1 << (8 * ob);
        size_t n = 0;
        for (size_t p = 0; p < npat; p += pstep) {
            double v, w;
            uint64_t pp = p;
            const mxp__cvt_args a = {false, 0, 0, false};
            mxp__scalar_kernels()->cvt[MXP_FLOAT64][d][MXP__RNE](&v, &pp, 1, &a);
            if (v != v || v - v != 0) continue; /* NaN, inf */
            uint64_t q = p + 1;
            mxp__scalar_kernels()->cvt[MXP_FLOAT64][d][MXP__RNE](&w, &q, 1, &a);
            if (w != w || w - w != 0 || (q & (1u << (8 * ob - 1))) != (p & (1u << (8 * ob - 1)))) {
                /* p is max finite: the overflow boundary, half a step above */
                double u;
                q = p - 1;
                mxp__scalar_kernels()->cvt[MXP_FLOAT64][d][MXP__RNE](&u, &q, 1, &a);
                w = v + (v - u);
            }
            const double m = (v + w) / 2;
            if (n + 9 > BLOCK) {
                f64_check(k, d, x, n);
                n = 0;
            }
            for (int u = -1; u <= 1; u++) x[n++] = f64_move(v, u);
            for (int u = -2; u <= 2; u++) x[n++] = f64_move(m, u);
            /* v's sign and exponent with a random mantissa (for stochastic rounding) */
            x[n++] = (tu_bits64(v) & 0xFFF0000000000000ull) |
                     (((uint64_t)tu_fmix32((uint32_t)p) << 32 | tu_fmix32((uint32_t)p + 99u)) & 0xFFFFFFFFFFFFFull);
        }
        f64_check(k, d, x, n);
    }
    size_t n = 0;
    for (uint64_t i = 0; i < (1ull << 32); i += every) {
        const uint32_t b = (uint32_t)(i + (i * 0x9E3779B9u) % every); /* varying low bits */
        float f, g;
        memcpy(&f, &b, 4);
        const uint32_t b1 = b + 1u;
        memcpy(&g, &b1, 4);
        if (f != f || f - f != 0 || g != g || g - g != 0 || (b1 ^ b) >> 31) continue;
        const double m = ((double)f + (double)g) / 2;
        if (n + 9 > BLOCK) {
            f64_check(k, MXP_FLOAT32, x, n);
            n = 0;
        }
        for (int u = -1; u <= 1; u++) x[n++] = f64_move((double)f, u);
        for (int u = -2; u <= 2; u++) x[n++] = f64_move(m, u);
        /* and one with f's sign and exponent and a random 52-bit mantissa (stochastic rounding
         * draws on all dropped bits) */
        x[n++] = (tu_bits64((double)f) & 0xFFF0000000000000ull) |
                 (((uint64_t)tu_fmix32(b) << 32 | tu_fmix32(b ^ 0x5A5A5A5Au)) & 0xFFFFFFFFFFFFFull);
    }
    f64_check(k, MXP_FLOAT32, x, n);
    free(x);
}

/* MXP_EXHAUSTIVE_FULL set (and not "0"): every sweep complete. */
static bool env_full(void)
{
    const char *e = getenv("MXP_EXHAUSTIVE_FULL");
    return e && *e && strcmp(e, "0") != 0;
}

/* The emulated program (MXP_EMU512) checks the avx512 kernels compiled on emulated intrinsics,
 * for CPUs without AVX-512. On a CPU with AVX-512 F/BW/VL/DQ (and AVX512_BF16 when bf16) the
 * plain program already sweeps the same kernel source natively and in full, so the emulated
 * copy samples one block in EMU_NATIVE_STRIDE in every mode instead (its 286 s were the longest
 * test of CI on such a CPU). Always false in the plain program. */
enum { EMU_NATIVE_STRIDE = 16 };
static bool emu_covered_natively(bool bf16)
{
#if defined(MXP_EMU512) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           (!bf16 || __builtin_cpu_supports("avx512bf16"));
#else
    (void)bf16;
    return false;
#endif
}

static void run_isa(mxp__isa_id isa)
{
    if (!tu_isa_checked(isa)) {
        print_message("%s: skipped (%s)\n", mxp__isa_name(isa), tu_isa_unchecked(isa));
        skip();
    }
    /* the ISA's own kernels (the dispatched avx512 table mixes them with avx2 ones, checked
     * through the avx2 table here and as a table by test_isa) */
    const mxp__kernels *k = mxp__kernels_own(isa);
    if (!k) {
        print_message("ISA %s not available on this CPU/build: skipped\n", mxp__isa_name(isa));
        skip();
    }
    const bool full = env_full();
    uint32_t stride = env_stride();
    if (!stride && !full && emu_covered_natively(false)) stride = EMU_NATIVE_STRIDE;
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        decode_all(k, targets[t]);
        for (int mode = 0; mode < MXP__NMODES; mode++)
            for (int sat = 0; sat < 2; sat++)
                sweep_f32(k, targets[t], mode, sat != 0,
                          stride ? stride : full || (mode == MXP__RNE && !sat) ? 1u : 8u);
    }
    if (k->cvt[MXP_FLOAT16][MXP_FLOAT64][MXP__RNE] != mxp__scalar_kernels()->cvt[MXP_FLOAT16][MXP_FLOAT64][MXP__RNE])
        f64_sweep(k, stride ? 4096u * stride : 1024u, stride ? 7 : 1); /* emulators: 1 pattern in 7 */
    else
        print_message("%s: float64 -> narrow not accelerated: its boundary sweep skipped\n", k->name);
    if (stride)
        print_message("%s: float32 sweeps 1/%u in every mode (%s)\n", k->name, (unsigned)stride,
                      env_stride() ? "MXP_EXHAUSTIVE_STRIDE"
                                   : "this CPU sweeps the same kernels natively; MXP_EXHAUSTIVE_FULL=1 for all");
    else
        print_message("%s: float32 sweeps %s\n", k->name,
                      full ? "complete (all 2^32 in every mode)"
                           : "RNE complete, other modes 1/8 (MXP_EXHAUSTIVE_FULL=1 for all)");
}

static void test_avx2(void **state)
{
    (void)state;
    run_isa(MXP__ISA_AVX2);
}
static void test_avx512(void **state)
{
    (void)state;
    run_isa(MXP__ISA_AVX512);
}
/* The avx512 table's AVX512_BF16 kernel (float32 -> bfloat16 nearest-even; registered by
 * dispatch.c only on CPUs with the instruction): the emulated program sweeps it in full. */
static void test_avx512_bf16(void **state)
{
    (void)state;
#ifdef MXP_EMU512
    mxp__kernels t;
    assert_true(tu_avx512_ext_table(&t));
    uint32_t stride = env_stride();
    if (!stride) stride = !env_full() && emu_covered_natively(true) ? EMU_NATIVE_STRIDE : 1;
    if (stride > 1)
        print_message("float32 -> bfloat16 (AVX512_BF16 kernel) sampled 1/%u: %s\n", (unsigned)stride,
                      env_stride() ? "MXP_EXHAUSTIVE_STRIDE"
                                   : "this CPU runs it natively in test_isa_exhaustive's test_avx512");
    sweep_f32(&t, MXP_BFLOAT16, MXP__RNE, false, stride);
    sweep_f32(&t, MXP_BFLOAT16, MXP__RNE, true, stride);
#else
    print_message("checked by test_isa_exhaustive_emu512 (and by test_avx512 on a CPU with AVX512_BF16)\n");
    skip();
#endif
}

static void test_neon(void **state)
{
    (void)state;
    run_isa(MXP__ISA_NEON);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avx2),
        cmocka_unit_test(test_avx512),
        cmocka_unit_test(test_avx512_bf16),
        cmocka_unit_test(test_neon),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (tolerated)
        printf("MXP_TEST_F16C_TIES_AWAY: accepted %zu ties rounded away from zero (emulator erratum)\n",
               tolerated);
    return failed;
}
