/*
 * isa_check.c - a dependency-free checker of every SIMD kernel table against the scalar
 * reference, for targets without cmocka (AArch64 under qemu: scripts/ci_aarch64.sh builds and
 * runs it). Not a CTest test (the name does not start with test_); test_isa.c and
 * test_isa_exhaustive.c are the cmocka versions on the host.
 *
 * Checks, for every ISA this CPU has and every entry it accelerates:
 *   - sizes 0..300 at unaligned source/destination addresses, random patterns dense with
 *     special values, saturate off/on, stochastic rounding with index0 near and across 2^32,
 *     guard bytes after the output;
 *   - float32 -> narrow on mostly-regular data (uniform values with a few irregular ones at
 *     several rates), so that the fast paths and the switches between paths run;
 *   - float32 -> narrow on a strided sample of all 2^32 patterns (every 2^32/N-th pattern plus
 *     a moving offset, so all exponents and low bits appear) in all four modes;
 *   - every float16 / bfloat16 / float8 pattern -> float32, saturate off/on;
 *   - all of it again with flush-to-zero set (AArch64 FPCR.FZ + FZ16; x86 MXCSR FTZ + DAZ);
 *   - dispatch: MIXPREC_ISA fallback through mxp__isa_select.
 * Usage: isa_check [samples-per-mode-log2 (default 22)]. Exit status 0 when all match.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "mixprec.h"
#include "test_util.h"

static int failures;
static uint64_t rng = 0x853C49E6748FEA9Bull;
static uint32_t rnd(void) { return (uint32_t)tu_rand64(&rng); }

static const uint32_t specials[] = {
    0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u,
    0x7FBFFFFFu, 0x7FFFFFFFu, 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu,
    0x7F7F8000u, 0x477FEFFFu, 0x477FF000u, 0x47800000u, 0x387FFFFFu, 0x38800000u, 0x33000000u,
    0x33000001u, 0x43E80000u, 0x43E80001u, 0x43F00000u, 0x3A800000u, 0x3C800000u, 0x3C7FFFFFu,
    0x476FFFFFu, 0x47700000u, 0x37000000u, 0x37800000u, 0x3F808000u, 0x3F818000u, 0x00008000u,
};

static void report(const char *what, size_t i, uint64_t in, uint64_t want, uint64_t got)
{
    if (failures++ < 20)
        printf("MISMATCH %s: element %zu input 0x%llx want 0x%llx got 0x%llx\n", what, i,
               (unsigned long long)in, (unsigned long long)want, (unsigned long long)got);
}

static void compare(const unsigned char *want, const unsigned char *got, const unsigned char *in,
                    size_t n, size_t ob, size_t ib, const char *what)
{
    const size_t i = tu_first_diff(want, got, n, ob);
    if (i < n) report(what, i, tu_elem(in, i, ib), tu_elem(want, i, ob), tu_elem(got, i, ob));
}

static void sizes_check(const mxp__kernels *k)
{
    const mxp__kernels *ref = mxp__scalar_kernels();
    enum { MAXN = 300, GUARD = 32 };
    static unsigned char src[8 * MAXN + 16], want[8 * MAXN + GUARD], got[8 * MAXN + 16 + GUARD];
    static const uint64_t idx[] = {0, 77, 0xFFFFFFFFull - 100, 0xFFFFFFFFull - 3, 0x500000000ull};
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
        for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++)
            for (int mode = 0; mode < MXP__NMODES; mode++) {
                if (k->cvt[d][s][mode] == ref->cvt[d][s][mode]) continue;
                const size_t ib = mxp_dtype_size((mxp_dtype)s), ob = mxp_dtype_size((mxp_dtype)d);
                for (size_t n = 0; n <= MAXN; n++) {
                    const size_t so = 1 + n % 3, dof = 1 + (n / 3) % 3;
                    for (size_t i = 0; i < n; i++) {
                        uint32_t v = rnd();
                        if (ib == 4 && rnd() % 3 == 0) v = specials[rnd() % (sizeof specials / 4)];
                        else if (ib == 4 && rnd() % 2) v = (v & 0x807FFFFFu) | ((90 + rnd() % 70) << 23);
                        if (ib == 8) {
                            const double x = (double)(int32_t)v * 0x1p-20;
                            memcpy(src + so + 8 * i, &x, 8);
                        } else {
                            memcpy(src + so + ib * i, &v, ib);
                        }
                    }
                    for (int sat = 0; sat < 2; sat++)
                        for (size_t j = 0; j < (mode ? sizeof idx / sizeof idx[0] : 1); j++) {
                            const mxp__cvt_args a = {sat != 0, 0xABCDEFull + n, idx[j], false};
                            memset(want, 0xA5, sizeof want);
                            memset(got, 0xA5, sizeof got);
                            ref->cvt[d][s][mode](want, src + so, n, &a);
                            k->cvt[d][s][mode](got + dof, src + so, n, &a);
                            char what[128];
                            snprintf(what, sizeof what, "%s %s->%s mode %d sat %d n %zu index0 0x%llx",
                                     k->name, mxp_dtype_name((mxp_dtype)s), mxp_dtype_name((mxp_dtype)d),
                                     mode, sat, n, (unsigned long long)a.index0);
                            compare(want, got + dof, src + so, n, ob, ib, what);
                            for (size_t g = 0; g < GUARD; g++)
                                if (got[dof + n * ob + g] != 0xA5) report(what, n + g, 0, 0xA5, got[dof + n * ob + g]);
                            for (size_t g = 0; g < dof; g++)
                                if (got[g] != 0xA5) report(what, g, 0, 0xA5, got[g]);
                        }
                }
            }
}

/* Mostly-regular float32 data (tu_fill_mix; ReLU-like half-zero data at the larger size), so
 * that the fast paths, their wide steps and the switches between paths run. */
static void mixed_check(const mxp__kernels *k)
{
    const mxp__kernels *ref = mxp__scalar_kernels();
    enum { MIXN = 4099 };
    static unsigned char src[4 * MIXN], want[4 * MIXN], got[4 * MIXN + 64];
    static const uint32_t rates[] = {2, 16, 256};
    static const size_t sizes[] = {1000, 4099}, dofs[] = {0, 1, 2, 16};
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
        for (int mode = 0; mode < MXP__NMODES; mode++) {
            if (k->cvt[d][MXP_FLOAT32][mode] == ref->cvt[d][MXP_FLOAT32][mode]) continue;
            const size_t ob = mxp_dtype_size((mxp_dtype)d);
            for (size_t ri = 0; ri < sizeof rates / sizeof rates[0]; ri++)
                for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                    const size_t n = sizes[si];
                    tu_fill_mix(src, n, rates[ri], si == 1, &rng, specials, sizeof specials / 4);
                    for (size_t oi = 0; oi < sizeof dofs / sizeof dofs[0]; oi++)
                        for (int sat = 0; sat < 2; sat++) {
                            const mxp__cvt_args a = {sat != 0, 99 + ri, 0xFFFFF000ull * (si & 1), false};
                            ref->cvt[d][MXP_FLOAT32][mode](want, src, n, &a);
                            k->cvt[d][MXP_FLOAT32][mode](got + dofs[oi], src, n, &a);
                            char what[128];
                            snprintf(what, sizeof what, "%s float32->%s mode %d sat %d n %zu rate 1/%u dst+%zu",
                                     k->name, mxp_dtype_name((mxp_dtype)d), mode, sat, n,
                                     (unsigned)rates[ri], dofs[oi]);
                            compare(want, got + dofs[oi], src, n, ob, 4, what);
                        }
                }
        }
}

static void sweep_check(const mxp__kernels *k, int log2n)
{
    static const int targets[] = {MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    const size_t block = 1u << 16;
    const uint64_t total = 1ull << log2n, stride = (1ull << 32) >> log2n;
    uint32_t *src = malloc(block * 4);
    unsigned char *want = malloc(block * 2), *got = malloc(block * 2);
    if (!src || !want || !got) {
        report("sweep: out of memory", 0, 0, 0, 0);
        free(src);
        free(want);
        free(got);
        return;
    }
    for (size_t t = 0; t < 4; t++)
        for (int mode = 0; mode < 2; mode++)
            for (int sat = 0; sat < 2; sat++) {
                const size_t ob = mxp_dtype_size((mxp_dtype)targets[t]);
                for (uint64_t b = 0; b < total; b += block) {
                    for (size_t i = 0; i < block; i++)
                        src[i] = (uint32_t)((b + i) * stride + ((b + i) * 0x9E3779B9u) % stride);
                    const mxp__cvt_args a = {sat != 0, 0x5EEDull, src[0], false};
                    mxp__scalar_kernels()->cvt[targets[t]][MXP_FLOAT32][mode](want, src, block, &a);
                    k->cvt[targets[t]][MXP_FLOAT32][mode](got, src, block, &a);
                    char what[96];
                    snprintf(what, sizeof what, "%s sweep float32->%s mode %d sat %d", k->name,
                             mxp_dtype_name((mxp_dtype)targets[t]), mode, sat);
                    compare(want, got, (const unsigned char *)src, block, ob, 4, what);
                }
            }
    free(src);
    free(want);
    free(got);
}

/* Every narrow source pattern through every accelerated entry from it: the decodes to
 * float32 and the pairs composed from them (narrow -> narrow / float64, cvt_compose.c), both
 * modes, both overflow modes, index0 also straddling 2^32. */
static void decode_check(const mxp__kernels *k)
{
    static const int sources[] = {MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    static unsigned char src[2 << 16];
    static uint64_t want[1 << 16], got[1 << 16];
    const mxp__kernels *ref = mxp__scalar_kernels();
    for (size_t t = 0; t < 4; t++) {
        const int s = sources[t];
        const size_t ib = mxp_dtype_size((mxp_dtype)s), n = (size_t)1 << (8 * ib);
        for (size_t i = 0; i < n; i++) {
            const uint16_t v = (uint16_t)i;
            memcpy(src + ib * i, &v, ib); /* little-endian: the low byte for float8 */
        }
        for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
            for (int mode = 0; mode < MXP__NMODES; mode++) {
                if (k->cvt[d][s][mode] == ref->cvt[d][s][mode]) continue;
                for (int v = 0; v < 4; v++) {
                    const mxp__cvt_args a = {v & 1, 0x5EEDull + (uint64_t)v, v < 2 ? 0 : 0xFFFFFFFFull - 999, false};
                    ref->cvt[d][s][mode](want, src, n, &a);
                    k->cvt[d][s][mode](got, src, n, &a);
                    char what[96];
                    snprintf(what, sizeof what, "%s all %s->%s mode %d sat %d", k->name,
                             mxp_dtype_name((mxp_dtype)s), mxp_dtype_name((mxp_dtype)d), mode, v & 1);
                    compare((unsigned char *)want, (unsigned char *)got, src, n,
                            mxp_dtype_size((mxp_dtype)d), ib, what);
                }
            }
    }
}

/* Flush-to-zero on: AArch64 FPCR.FZ (bit 24) and FZ16 (bit 19); x86 MXCSR FTZ (15) and DAZ (6). */
static uint64_t ftz_on(void)
{
#if defined(__aarch64__)
    uint64_t old;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(old));
    const uint64_t v = old | (1ull << 24) | (1ull << 19);
    __asm__ __volatile__("msr fpcr, %0" ::"r"(v));
    return old;
#elif defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    const unsigned old = __builtin_ia32_stmxcsr();
    __builtin_ia32_ldmxcsr(old | 0x8040u);
    return old;
#else
    return 0;
#endif
}

static void ftz_restore(uint64_t old)
{
#if defined(__aarch64__)
    __asm__ __volatile__("msr fpcr, %0" ::"r"(old));
#elif defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_ia32_ldmxcsr((unsigned)old);
#else
    (void)old;
#endif
}

int main(int argc, char **argv)
{
    int log2n = argc > 1 ? atoi(argv[1]) : 22;
    if (log2n < 16) log2n = 16;
    if (log2n > 32) log2n = 32;
    int checked = 0;
    printf("isa_check: active path %s\n", mxp_isa());
    for (int isa = 1; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
        if (!k) {
            printf("  %s: not available, skipped\n", mxp__isa_name((mxp__isa_id)isa));
            continue;
        }
        checked++;
        for (int pass = 0; pass < 2; pass++) {
            const uint64_t old = pass ? ftz_on() : 0;
            sizes_check(k);
            mixed_check(k);
            decode_check(k);
            sweep_check(k, pass ? 18 : log2n);
            if (pass) ftz_restore(old);
        }
        printf("  %s: sizes 0..300, mostly-regular data, decodes, float32 sweep of 2^%d per mode (and with FTZ): %s\n",
               k->name, log2n, failures ? "FAILED" : "ok");
    }
    /* Dispatch: "scalar" forces the scalar path; a path this CPU lacks falls back below it. */
    if (mxp__isa_select("scalar") != MXP__ISA_SCALAR) report("MIXPREC_ISA=scalar", 0, 0, 0, 1);
    for (int i = 1; i < MXP__ISA_COUNT; i++) {
        int want = 0;
        for (int j = i; j >= 0; j--)
            if (mxp__kernels_for((mxp__isa_id)j)) {
                want = j;
                break;
            }
        if ((int)mxp__isa_select(mxp__isa_name((mxp__isa_id)i)) != want)
            report("MIXPREC_ISA fallback", (size_t)i, 0, (uint64_t)want,
                   (uint64_t)mxp__isa_select(mxp__isa_name((mxp__isa_id)i)));
    }
#if defined(__aarch64__)
    if (!mxp__kernels_for(MXP__ISA_NEON)) report("neon table missing on AArch64", 0, 0, 1, 0);
#endif
    printf("isa_check: %d SIMD path(s) checked, %d mismatch(es)\n", checked, failures);
    return failures ? 1 : 0;
}
