/*
 * finite_check.c - a dependency-free checker of the all_finite / unscale_check / unscale_into
 * kernels of every SIMD table against the scalar reference, for targets without cmocka (AArch64
 * under qemu: scripts/ci_aarch64.sh builds and runs it). Not a CTest test (the name does not
 * start with test_); tests/test_finite.c is the cmocka version on the host, which also checks
 * the scalar reference itself against an independent double-arithmetic model.
 *
 * For every ISA this CPU has and every entry that differs from the scalar one:
 *   - sizes 0..300 at unaligned source / destination addresses, random patterns dense with
 *     special values (zeros, subnormals, tiny normals, inf, NaN with payloads), guard bytes
 *     after the output, several inverse scales (normal, tiny products, huge, subnormal, inf);
 *   - NaN / inf planted at every position for sizes up to 40;
 *   - all of it again with flush-to-zero set (mxp__fp_set_flush_denormals: AArch64 FPCR.FZ,
 *     x86 MXCSR FTZ + DAZ), and with the rounding direction upward.
 * Usage: finite_check. Exit status 0 when all match.
 */
#include <fenv.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "finite.h"
#include "kernels.h"
#include "mixprec.h"
#include "test_util.h"

static int failures, checks;
static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { return tu_rand64(&rng); }

static void report(const char *what, size_t i, uint64_t in, uint64_t want, uint64_t got)
{
    if (failures++ < 20)
        printf("MISMATCH %s: element %zu input 0x%llx want 0x%llx got 0x%llx\n", what, i,
               (unsigned long long)in, (unsigned long long)want, (unsigned long long)got);
}

/* A random pattern of an es-byte float dtype, often a special one. */
static uint64_t pattern(mxp_dtype d)
{
    uint64_t v = rnd();
    const size_t es = mxp_dtype_size(d);
    const int kind = (int)(rnd() % 8);
    switch (d) {
    case MXP_FLOAT32:
        if (kind == 0) v &= 0x807FFFFFu;                            /* subnormal */
        else if (kind == 1) v = (v & 0x83FFFFFFu);                  /* tiny */
        else if (kind == 2) v |= 0x7F800000u;                       /* inf / NaN */
        else if (kind == 3) v = (v & 0x807FFFFFu) | 0x3F000000u;    /* ~1 */
        break;
    case MXP_FLOAT16:
        if (kind == 0) v &= 0x83FFu;
        else if (kind == 1) v |= 0x7C00u;
        break;
    case MXP_BFLOAT16:
        if (kind == 0) v &= 0x807Fu;
        else if (kind == 1) v |= 0x7F80u;
        else if (kind == 2) v = (v & 0x807Fu) | 0x0080u;
        break;
    default: break;
    }
    if (es < 8) v &= (1ull << (8 * es)) - 1;
    return v;
}

/* A finite pattern: the top exponent bit cleared, so the exponent field is not all ones. */
static uint64_t finite_pattern(mxp_dtype d)
{
    const size_t es = mxp_dtype_size(d);
    return pattern(d) & ~(1ull << (8 * es - 2));
}

static uint64_t nonfinite(mxp_dtype d, uint64_t r)
{
    switch (d) {
    case MXP_FLOAT64: return (r & 0x800FFFFFFFFFFFFFull) | 0x7FF0000000000000ull;
    case MXP_FLOAT32: return (r & 0x807FFFFFu) | 0x7F800000u;
    case MXP_FLOAT16: return (r & 0x83FFu) | 0x7C00u;
    case MXP_BFLOAT16: return (r & 0x807Fu) | 0x7F80u;
    case MXP_FLOAT8_E4M3FN: return (r & 0x80u) | 0x7Fu;
    default: return (r & 0x83u) | 0x7Cu;
    }
}

static void put(unsigned char *p, size_t i, size_t es, uint64_t v) { memcpy(p + i * es, &v, es); }

enum { MAXN = 300, GUARD = 32, EVERY = 40 };

static void one_call(const mxp__kernels *k, mxp_dtype d, const unsigned char *src, size_t n,
                     float inv, size_t so, size_t dof, const char *mode)
{
    const mxp__kernels *ref = mxp__scalar_kernels();
    static unsigned char want[4 * MAXN + 16 + GUARD], got[4 * MAXN + 16 + GUARD],
        wx[8 * MAXN + 16], gx[8 * MAXN + 16];
    const size_t es = mxp_dtype_size(d);
    char what[160];
    /* all_finite */
    if (k->all_finite[d] != ref->all_finite[d]) {
        snprintf(what, sizeof what, "%s all_finite %s n %zu %s", k->name, mxp_dtype_name(d), n, mode);
        bool w = ref->all_finite[d](src + so, n), g = k->all_finite[d](src + so, n);
        checks++;
        if (w != g) report(what, n, 0, w, g);
    }
    /* unscale_check, in place */
    if (k->unscale_check[d] != ref->unscale_check[d]) {
        snprintf(what, sizeof what, "%s unscale_check %s n %zu inv %a %s", k->name, mxp_dtype_name(d),
                 n, (double)inv, mode);
        memcpy(wx, src + so, n * es);
        memcpy(gx + dof, src + so, n * es);
        bool w = ref->unscale_check[d](wx, n, inv), g = k->unscale_check[d](gx + dof, n, inv);
        checks++;
        size_t i = tu_first_diff(wx, gx + dof, n, es);
        if (i < n) report(what, i, tu_elem(src + so, i, es), tu_elem(wx, i, es), tu_elem(gx + dof, i, es));
        if (w != g) report(what, n, 0, w, g);
    }
    /* unscale_into, float32 destination */
    if (k->unscale_into[d] && k->unscale_into[d] != ref->unscale_into[d]) {
        snprintf(what, sizeof what, "%s unscale_into %s n %zu inv %a dst+%zu %s", k->name,
                 mxp_dtype_name(d), n, (double)inv, dof, mode);
        memset(want, 0xA5, sizeof want);
        memset(got, 0xA5, sizeof got);
        bool w = ref->unscale_into[d](want, src + so, n, inv);
        bool g = k->unscale_into[d](got + dof, src + so, n, inv);
        checks++;
        size_t i = tu_first_diff(want, got + dof, n, 4);
        if (i < n) report(what, i, tu_elem(src + so, i, es), tu_elem(want, i, 4), tu_elem(got + dof, i, 4));
        for (size_t j = 0; j < GUARD; j++)
            if (got[dof + 4 * n + j] != 0xA5) report(what, n + j, 0, 0xA5, got[dof + 4 * n + j]);
        for (size_t j = 0; j < dof; j++)
            if (got[j] != 0xA5) report(what, j, 0, 0xA5, got[j]);
        if (w != g) report(what, n, 0, w, g);
    }
}

static void check_table(const mxp__kernels *k, const char *mode)
{
    static const float scales[] = {65536.0f, 3.0f, 0.7f, 0x1p110f, 0x1p127f, 1e-45f, 0x1p-20f};
    static unsigned char src[8 * MAXN + 16];
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++) {
        const size_t es = mxp_dtype_size((mxp_dtype)d);
        for (size_t n = 0; n <= MAXN; n++) {
            const float inv = (float)(1.0 / (double)scales[n % 7]);
            const size_t so = n % 5, dof = 1 + n % 3;
            for (size_t i = 0; i < n; i++) put(src + so, i, es, pattern((mxp_dtype)d));
            one_call(k, (mxp_dtype)d, src, n, inv, so, dof, mode);
            /* mostly finite data with NaN / inf planted at every position (small n) */
            if (n > EVERY) continue;
            for (size_t i = 0; i < n; i++) put(src + so, i, es, finite_pattern((mxp_dtype)d));
            for (size_t pos = 0; pos < n; pos++) {
                uint64_t old = tu_elem(src + so, pos, es);
                put(src + so, pos, es, nonfinite((mxp_dtype)d, rnd()));
                one_call(k, (mxp_dtype)d, src, n, inv, so, dof, mode);
                put(src + so, pos, es, old);
            }
        }
    }
}

int main(void)
{
    int tables = 0;
    for (int isa = 1; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
        if (!k) continue;
        tables++;
        check_table(k, "default environment");
        if (mxp__fp_set_flush_denormals(true)) {
            check_table(k, "flush-to-zero");
            mxp__fp_set_flush_denormals(false);
        }
        fesetround(FE_UPWARD);
        check_table(k, "rounding upward");
        fesetround(FE_TONEAREST);
    }
    printf("finite_check: active path %s, %d SIMD table(s), %d calls compared, %d mismatches\n",
           mxp_isa(), tables, checks, failures);
    return failures ? 1 : 0;
}
