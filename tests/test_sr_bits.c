/*
 * test_sr_bits.c - the statistics of the stochastic-rounding random words,
 * r = mxp__sr_bits(seed, index) (src/kernels/kernels.h).
 *
 * Stochastic rounding is unbiased only if r is uniform and the words of nearby elements are
 * independent: a rounding that goes up at element i and, because of a correlated hash, tends to
 * go up at i + 1 too, biases the sum of a gradient over a row even when each element alone is
 * fine. test_convert checks P(round up) = f element by element; this file checks the words
 * themselves with a battery of chi-square and binomial tests:
 *   - balance: each of the 32 bits is 1 half of the time;
 *   - uniformity of the top 12 bits (4096 cells);
 *   - lags: the joint distribution of a 4-bit field of r[i] and the same field of r[i + L]
 *     (256 cells) for lags 1 .. 2^16 and fields at bits 28, 24, 20, 16, 12 (the bits the
 *     conversions use: float16 takes the top 13, bfloat16 16, float8 20-21);
 *   - avalanche: flipping index bit k flips output bit b half of the time, for all 32 x 32;
 *   - seeds: the words of neighbouring seeds (s, s + 1) at the same index are independent.
 * The same battery runs on the bytes that elements of an e5m2 source draw (four neighbours
 * share a word, mxp__sr_bits_src), on their 8 bits, on the bits of an e4m3fn source's elements
 * (32 share a word, a bit each; the lags then pair single bits, and a serial test counts the
 * 256 patterns of 8 neighbours' bits, across bytes and words), and on the words of a 16-bit
 * source's elements (two share two words, a half of each), on all 32: lags 1 to 3 then pair
 * parts of one word, and the avalanche flips the part an index picks as well as the word; and
 * on the halves that float32 -> bfloat16 draws (two neighbours share a word, a half each), on
 * their 16 bits. float32 -> float16 draws a 16-bit source's words (checked equal to them).
 * Each statistic is turned into a z score (a chi-square X with df degrees of freedom:
 * (X - df) / sqrt(2 df)); the battery's result is the worst |z|. The runs cover several seeds
 * and a window that straddles a 2^32 index boundary (where the key changes).
 *
 * A battery that cannot fail proves nothing, so the same battery runs on two controls written
 * here: the previous hash (murmur3's fmix32 applied twice; a good hash: it must pass) and the
 * current hash without its Weyl step (counter + key, then the same two rounds: it must fail,
 * by a wide margin; it was a candidate during development and its lag correlations are
 * plain). The three print their worst statistic.
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

#include "kernels.h"

typedef uint32_t (*wordfn)(uint64_t seed, uint64_t index);

static uint32_t gen_library(uint64_t seed, uint64_t index) { return mxp__sr_bits(seed, index); }

/* control 1: fmix32 (murmur3's finaliser, written out here) twice around the key */
static uint32_t fmix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    return x ^ (x >> 16);
}

static uint32_t gen_double_fmix(uint64_t seed, uint64_t index)
{
    const uint64_t key = mxp__sr_key(seed, (uint32_t)(index >> 32));
    return fmix(fmix((uint32_t)index ^ (uint32_t)key) + (uint32_t)(key >> 32));
}

/* control 2: the library's rounds without the Weyl step (index + key instead of index * W + key):
 * the library's own function at index * W^-1 (mod 2^32), so that the control follows its rounds */
#define SR_W_INV 0x144CBC89u /* W * W_INV = 1 mod 2^32 (checked in main) */
static uint32_t gen_no_weyl(uint64_t seed, uint64_t index)
{
    return mxp__sr_bits_k(mxp__sr_key(seed, (uint32_t)(index >> 32)), (uint32_t)index * SR_W_INV);
}

/* The r of an e5m2 source's elements (kernels.h's mxp__sr_bits_src): four neighbours share a
 * word, one byte each, at the top of r. The battery runs on them with top = 8, and must fail on
 * control 3, where the four take the same byte (the word's top one), as a kernel that gathered
 * the wrong bytes would draw. */
static uint32_t gen_f8(uint64_t seed, uint64_t index)
{
    return mxp__sr_bits_src(seed, index, MXP_FLOAT8_E5M2, MXP_FLOAT8_E4M3FN);
}
/* and those of a 16-bit source: two neighbours share two words, a half of each (all 32 bits) */
static uint32_t gen_16(uint64_t seed, uint64_t index)
{
    return mxp__sr_bits_src(seed, index, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN);
}
static uint32_t gen_f8_same_byte(uint64_t seed, uint64_t index)
{
    return mxp__sr_bits_src(seed, index | 3u, MXP_FLOAT8_E5M2, MXP_FLOAT8_E4M3FN); /* byte 3 for all four */
}
/* the r of an e4m3fn source's elements: 32 neighbours share a word, one bit each, at the top of
 * r (top = 1); control 4 gives the 32 the same bit (the word's top one) and must fail */
static uint32_t gen_e4_bits(uint64_t seed, uint64_t index)
{
    return mxp__sr_bits_src(seed, index, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2);
}
static uint32_t gen_e4_same_bit(uint64_t seed, uint64_t index)
{
    return mxp__sr_bits_src(seed, index | 31u, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2);
}
/* float32 -> bfloat16 (since session 49): two neighbours share a word, a half each, at the top of
 * r (top = 16); control 5 gives both the same half (the word's top one) and must fail */
static uint32_t gen_f32_bf16(uint64_t seed, uint64_t index)
{
    return mxp__sr_bits_src(seed, index, MXP_FLOAT32, MXP_BFLOAT16);
}
static uint32_t gen_f32_bf16_same_half(uint64_t seed, uint64_t index)
{
    return mxp__sr_bits_src(seed, index | 1u, MXP_FLOAT32, MXP_BFLOAT16);
}

#define N_WORDS (1u << 21)
#define MAX_LAG (1u << 16)

static double chi2_z(const uint32_t *cells, size_t ncells, double total)
{
    const double e = total / (double)ncells;
    double x = 0;
    for (size_t c = 0; c < ncells; c++) x += ((double)cells[c] - e) * ((double)cells[c] - e) / e;
    const double df = (double)ncells - 1;
    return (x - df) / sqrt(2 * df);
}

static double binom_z(double ones, double n) { return (ones - n / 2) / sqrt(n / 4); }

typedef struct worst {
    double z;
    char what[96];
} worst;

static void note(worst *w, double z, const char *fmt, ...)
{
    if (fabs(z) <= fabs(w->z)) return;
    w->z = z;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->what, sizeof w->what, fmt, ap);
    va_end(ap);
}

/* the battery on the words of (seed, index0 .. index0 + N_WORDS + MAX_LAG), of which the top
 * `top` bits are random (32; 8 for the bytes of e5m2 sources, 1 for the bits of e4m3fn ones; the
 * rest are 0). The lag and seed tests take 4-bit fields, or the `top` bits when fewer. */
static void battery_window(wordfn g, int top, uint64_t seed, uint64_t index0, worst *w)
{
    const size_t n = N_WORDS, total = N_WORDS + MAX_LAG;
    uint32_t *r = malloc(total * sizeof *r), *cells = calloc(4096, sizeof *cells);
    assert_non_null(r);
    assert_non_null(cells);
    for (size_t i = 0; i < total; i++) r[i] = g(seed, index0 + i);

    /* balance of every bit */
    for (int b = 32 - top; b < 32; b++) {
        size_t ones = 0;
        for (size_t i = 0; i < n; i++) ones += r[i] >> b & 1u;
        note(w, binom_z((double)ones, (double)n), "seed %llx: bit %d balance", (unsigned long long)seed, b);
    }
    /* uniformity of the top 12 bits (or all `top` when fewer) */
    const int ub = top < 12 ? top : 12;
    for (size_t i = 0; i < n; i++) cells[r[i] >> (32 - ub)]++;
    note(w, chi2_z(cells, (size_t)1 << ub, (double)n), "seed %llx: top %d bits", (unsigned long long)seed, ub);
    /* lags */
    static const uint32_t lags[] = {1, 2, 3, 4, 5, 7, 8, 16, 32, 64, 256, 1000, 4096, MAX_LAG};
    static const int fields[] = {28, 24, 20, 16, 12};
    const int fw = top < 4 ? top : 4;                   /* field width */
    const uint32_t fm = (1u << fw) - 1u, nc = 1u << 2 * fw; /* its mask, the cells of a pair */
    /* fewer than 4 random bits: the one field of all of them */
    const size_t nf = top < 4 ? 1 : sizeof fields / sizeof fields[0];
    for (size_t l = 0; l < sizeof lags / sizeof lags[0]; l++) {
        for (size_t f = 0; f < nf; f++) {
            const int sh = top < 4 ? 32 - top : fields[f];
            if (sh < 32 - top) continue;
            memset(cells, 0, nc * sizeof *cells);
            for (size_t i = 0; i < n; i++) cells[(r[i] >> sh & fm) << fw | (r[i + lags[l]] >> sh & fm)]++;
            note(w, chi2_z(cells, nc, (double)n), "seed %llx: lag %u, bits %d..%d", (unsigned long long)seed,
                 (unsigned)lags[l], sh, sh + fw - 1);
        }
    }
    /* serial (one bit per element): the patterns of 8 neighbours' bits, the windows starting at
     * every element index = 3 mod 8, so that they straddle bytes and, now and then, words */
    if (top == 1) {
        memset(cells, 0, 256 * sizeof *cells);
        size_t nw = 0;
        for (size_t i = (size_t)((3u - index0 % 8u) % 8u); i + 8 <= n; i += 8, nw++) {
            unsigned pat = 0;
            for (size_t k = 0; k < 8; k++) pat = pat << 1 | r[i + k] >> 31;
            cells[pat]++;
        }
        note(w, chi2_z(cells, 256, (double)nw), "seed %llx: 8 neighbours' bits", (unsigned long long)seed);
    }
    /* seeds s and s + 1 at the same indices */
    memset(cells, 0, nc * sizeof *cells);
    for (size_t i = 0; i < n; i++) cells[(r[i] >> (32 - fw)) << fw | g(seed + 1, index0 + i) >> (32 - fw)]++;
    note(w, chi2_z(cells, nc, (double)n), "seeds %llx and +1: top %d bits", (unsigned long long)seed, fw);
    free(r);
    free(cells);
}

/* avalanche: index bit k (low half, so the key stays) flipped -> output bit b flips half the time */
static void battery_avalanche(wordfn g, int top, uint64_t seed, worst *w)
{
    enum { M = 1 << 14 };
    static uint32_t flips[32][32];
    memset(flips, 0, sizeof flips);
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int t = 0; t < M; t++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t idx = st >> 16;
        const uint32_t base = g(seed, idx);
        for (int k = 0; k < 32; k++) {
            const uint32_t d = base ^ g(seed, idx ^ (1ull << k));
            for (int b = 0; b < 32; b++) flips[k][b] += d >> b & 1u;
        }
    }
    for (int k = 0; k < 32; k++)
        for (int b = 32 - top; b < 32; b++)
            note(w, binom_z(flips[k][b], M), "seed %llx: avalanche index bit %d -> bit %d",
                 (unsigned long long)seed, k, b);
}

static worst battery(wordfn g, int top)
{
    worst w = {0, ""};
    static const uint64_t seeds[] = {0, 1, 0xDEADBEEFull, 0x0123456789ABCDEFull};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) battery_window(g, top, seeds[s], 0, &w);
    /* a window across the first 2^32 boundary (indices 2^32 - 2^20 .. 2^32 + 2^20 + 2^16) */
    battery_window(g, top, 42, 0x100000000ull - N_WORDS / 2, &w);
    battery_avalanche(g, top, 7, &w);
    battery_avalanche(g, top, 0xFFFFFFFFFFFFFFFFull, &w);
    return w;
}

/* The bound: a fixed battery over fixed seeds is deterministic, so this is not a flaky test;
 * with about 2,600 statistics (2,048 of them the avalanche binomials), a good generator's worst
 * |z| is about 3.6 (a chi-square's upper tail is a little heavier than the normal's) and 6
 * leaves room without admitting a real correlation (the failing control scores about 100). */
#define Z_PASS 6.0
#define Z_FAIL 30.0

/* the battery on g's words (their top `top` bits): it must pass (|z| < Z_PASS), or, for a
 * control, fail (|z| >= Z_FAIL); what: the generator's name in the messages */
static void expect_pass(wordfn g, int top, const char *what)
{
    const worst w = battery(g, top);
    print_message("%s: %.2f at %s\n", what, w.z, w.what);
    if (fabs(w.z) >= Z_PASS) fail_msg("%s: |z| = %.1f at %s (bound %.0f)", what, fabs(w.z), w.what, Z_PASS);
}

static void expect_fail(wordfn g, int top, const char *what)
{
    const worst w = battery(g, top);
    if (fabs(w.z) < Z_FAIL) fail_msg("the battery missed %s: worst |z| = %.1f at %s", what, fabs(w.z), w.what);
    print_message("%s caught: |z| = %.0f at %s\n", what, fabs(w.z), w.what);
}

/* one battery case: the generator, its random top bits, its name, and whether it must fail */
typedef struct battery_case {
    wordfn g;
    int top;
    const char *what;
    int must_fail;
} battery_case;

static const battery_case cases[] = {
    {gen_library, 32, "mxp__sr_bits", 0},
    {gen_double_fmix, 32, "double fmix32", 0},
    {gen_no_weyl, 32, "the weak control", 1},
    {gen_f8, 8, "float8 source bytes", 0},
    {gen_16, 32, "16-bit source words", 0},
    {gen_f8_same_byte, 8, "the shared bytes", 1},
    {gen_e4_bits, 1, "e4m3fn source bits", 0},
    {gen_e4_same_bit, 1, "the shared bits", 1},
    {gen_f32_bf16, 16, "float32 -> bfloat16 halves", 0},
    {gen_f32_bf16_same_half, 16, "the shared halves", 1},
};

static void run_case(void **state)
{
    const battery_case *c = (const battery_case *)*state;
    if (c->must_fail) expect_fail(c->g, c->top, c->what);
    else expect_pass(c->g, c->top, c->what);
}

/* The words are a bijection of the index within a 2^32 block (every step of the hash is):
 * distinct over a window, checked by sorting. */
static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void words_are_distinct_within_a_block(void **state)
{
    (void)state;
    const size_t n = 1u << 20;
    uint32_t *r = malloc(n * sizeof *r);
    assert_non_null(r);
    for (size_t i = 0; i < n; i++) r[i] = mxp__sr_bits(99, 0x7FF00000ull + 1021u * i); /* one block */
    qsort(r, n, sizeof *r, cmp_u32);
    for (size_t i = 1; i < n; i++)
        if (r[i] == r[i - 1]) fail_msg("two indices of one block share the word %08x", (unsigned)r[i]);
    free(r);
}

/* float32 -> float16 (since session 53) draws a 16-bit source's r (two neighbours share two
 * words, a half of each), so the 16-bit battery above covers its bits: checked element by
 * element over a window that straddles a 2^32 boundary, for a few seeds. Fails if the pair
 * drew a word of its own again, or the top halves alone. */
static void f32_f16_draws_16bit_words(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed < 4; seed++)
        for (uint64_t i = (1ull << 32) - 5000; i < (1ull << 32) + 5000; i++) {
            const uint32_t got = mxp__sr_bits_src(seed, i, MXP_FLOAT32, MXP_FLOAT16);
            const uint32_t want = gen_16(seed, i);
            if (got != want)
                fail_msg("seed %llu index %llu: float32 -> float16 r %08x, 16-bit source r %08x",
                         (unsigned long long)seed, (unsigned long long)i, (unsigned)got, (unsigned)want);
        }
}

int main(void)
{
    if ((uint32_t)(MXP__SR_W * SR_W_INV) != 1u) {
        fprintf(stderr, "test_sr_bits: SR_W_INV is not the inverse of MXP__SR_W\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        {"library_words_pass", run_case, NULL, NULL, (void *)&cases[0]},
        {"battery_passes_a_good_hash", run_case, NULL, NULL, (void *)&cases[1]},
        {"battery_fails_a_weak_hash", run_case, NULL, NULL, (void *)&cases[2]},
        cmocka_unit_test(words_are_distinct_within_a_block),
        {"float8_bytes_pass", run_case, NULL, NULL, (void *)&cases[3]},
        {"halves_16bit_pass", run_case, NULL, NULL, (void *)&cases[4]},
        {"battery_fails_shared_bytes", run_case, NULL, NULL, (void *)&cases[5]},
        {"e4m3fn_bits_pass", run_case, NULL, NULL, (void *)&cases[6]},
        {"battery_fails_shared_bits", run_case, NULL, NULL, (void *)&cases[7]},
        {"f32_bf16_halves_pass", run_case, NULL, NULL, (void *)&cases[8]},
        {"battery_fails_shared_halves", run_case, NULL, NULL, (void *)&cases[9]},
        cmocka_unit_test(f32_f16_draws_16bit_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
