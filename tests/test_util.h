/*
 * test_util.h - small helpers every test shares (header-only, tests/ only; no cmocka needed, so
 * the dependency-free tests/isa_check.c uses it too).
 *   - bit casts between floats and their patterns;
 *   - a stateless scrambler (tu_fmix32) and a seeded generator (splitmix64) with its state in
 *     the caller, so each test has its own reproducible stream;
 *   - reading element i of an array of 1/2/4/8-byte elements as a number, and finding the first
 *     element where two arrays differ (for messages that name the index, input, want and got);
 *   - "mostly regular" float32 data for the SIMD tests (tu_fill_mix);
 *   - switching LC_NUMERIC to an installed locale whose decimal point is a comma
 *     (tu_comma_locale), for the tests of locale-independent text.
 */
#ifndef MIXPREC_TEST_UTIL_H
#define MIXPREC_TEST_UTIL_H

#include <locale.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* murmur3's 32-bit finaliser: a cheap stateless scrambler for test data (not the library's
 * stochastic-rounding hash, which is kernels.h's mxp__sr_bits) */
static inline uint32_t tu_fmix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

static inline float tu_f32(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint32_t tu_bits32(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static inline double tu_f64(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

static inline uint64_t tu_bits64(double d)
{
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}

/* splitmix64: the next 64 random bits of the stream *state. */
static inline uint64_t tu_rand64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Element i of an array of `size`-byte elements (size <= 8), as an unsigned number. */
static inline uint64_t tu_elem(const void *p, size_t i, size_t size)
{
    uint64_t v = 0;
    memcpy(&v, (const unsigned char *)p + i * size, size < 8 ? size : 8);
    return v;
}

/* Index of the first element where a and b (n elements of `size` bytes) differ, or n. */
static inline size_t tu_first_diff(const void *a, const void *b, size_t n, size_t size)
{
    if (memcmp(a, b, n * size) == 0) return n;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const unsigned char *)a + i * size, (const unsigned char *)b + i * size, size))
            return i;
    return n;
}

/*
 * float32 data that mostly takes the SIMD fast paths: values uniform in [-8, 8] (like the
 * benchmark's) with, one time in `rate`, an irregular element: one of the caller's special
 * patterns (zero, tiny, subnormal, overflow, inf, NaN, format boundaries), any bit pattern, a
 * tiny normal float32 (exponent field 1..40) or a float32 subnormal. Irregular elements at
 * random places make every step pattern happen: wide steps that pass, wide steps that fail at
 * each of their lanes, runs of the slower paths and their ends. relu: half the values +-0
 * besides (ReLU outputs). Writes n float32 at p (any alignment).
 */
static inline void tu_fill_mix(unsigned char *p, size_t n, uint32_t rate, int relu, uint64_t *state,
                               const uint32_t *specials, size_t nspecials)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t v;
        if (relu && tu_rand64(state) % 2) {
            v = tu_rand64(state) % 8 ? 0u : 0x80000000u;
        } else if (tu_rand64(state) % rate == 0) {
            const uint32_t k = (uint32_t)(tu_rand64(state) % 8), r = (uint32_t)tu_rand64(state);
            if (k < 5) v = specials[r % nspecials];
            else if (k < 6) v = r;
            else if (k < 7) v = (r & 0x807FFFFFu) | ((1u + (r >> 23) % 40) << 23);
            else v = r & 0x807FFFFFu;
        } else {
            v = tu_bits32((float)((double)(uint32_t)tu_rand64(state) * 0x1p-32 * 16.0 - 8.0));
        }
        memcpy(p + 4 * i, &v, 4);
    }
}

/* Set LC_NUMERIC to the first installed locale of a few whose decimal point is ",", and return
 * its name; NULL (LC_NUMERIC left "C") when none is. tests/CMakeLists.txt builds de_DE.UTF-8 into
 * the build tree with localedef and points LOCPATH at it when it can. The caller restores
 * LC_NUMERIC to "C". */
static inline const char *tu_comma_locale(void)
{
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "de_DE", "fr_FR.UTF-8", "fr_FR.utf8",
                                        "nl_NL.UTF-8", "es_ES.UTF-8", "it_IT.UTF-8", "ru_RU.UTF-8"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *got = setlocale(LC_NUMERIC, names[i]);
        if (got && strcmp(localeconv()->decimal_point, ",") == 0) return names[i];
    }
    setlocale(LC_NUMERIC, "C");
    return NULL;
}

#ifdef MIXPREC_KERNELS_H /* the ISA tests (kernels.h included first) */
#include <stdbool.h>
#include <stdlib.h>

/* Why a program does not check an ISA's table, or NULL when it does. Checked: every table,
 * except that
 *  - the *_emu512 programs (MXP_EMU512, linked against the emulated-AVX-512 test library) check
 *    avx512 only: the other tables are the native ones, checked by the plain program;
 *  - MXP_TEST_ISA=name[,name...] in the environment restricts a program to the named tables
 *    (scripts/bochs_avx512.sh sets avx512: under an instruction-set emulator every other
 *    table would only cost time). */
static inline const char *tu_isa_unchecked(mxp__isa_id isa)
{
#ifdef MXP_EMU512
    if (isa != MXP__ISA_AVX512) return "checked by the native program; this one checks the emulated avx512 table";
#endif
    const char *only = getenv("MXP_TEST_ISA");
    if (only && *only) {
        const char *name = mxp__isa_name(isa);
        const size_t len = strlen(name);
        for (const char *p = only; *p;) {
            const size_t tok = strcspn(p, ",");
            if (tok == len && strncmp(p, name, len) == 0) return NULL;
            p += tok;
            if (*p == ',') p++;
        }
        return "not named in MXP_TEST_ISA";
    }
    return NULL;
}

static inline bool tu_isa_checked(mxp__isa_id isa) { return tu_isa_unchecked(isa) == NULL; }

#ifdef MXP_EMU512
/* The avx512 table (its own kernels) with the kernels of its optional instruction sets, which
 * dispatch.c registers only on CPUs that have them: AVX512_BF16 and AVX512_VBMI (the emulated
 * library's own table has neither), built in *t; false when there is no avx512 table. */
static inline bool tu_avx512_ext_table(mxp__kernels *t)
{
    const mxp__kernels *k = mxp__kernels_own(MXP__ISA_AVX512);
    if (!k) return false;
    *t = *k;
    mxp__cvt_register_avx512_bf16(t);
    mxp__cvt_register_avx512_f64(t, true); /* float64 -> bfloat16 through VCVTNEPS2BF16 too */
    mxp__cvt_register_avx512_vbmi(t);      /* float8 sources by byte tables */
    t->name = "avx512+bf16+vbmi";
    return t->cvt[MXP_BFLOAT16][MXP_FLOAT32][MXP__RNE] != k->cvt[MXP_BFLOAT16][MXP_FLOAT32][MXP__RNE] &&
           t->cvt[MXP_FLOAT32][MXP_FLOAT8_E4M3FN][MXP__RNE] != k->cvt[MXP_FLOAT32][MXP_FLOAT8_E4M3FN][MXP__RNE];
}
#endif
#endif

#endif /* MIXPREC_TEST_UTIL_H */
