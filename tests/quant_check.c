/*
 * quant_check.c - the quantization functions on every ISA table, and under a hostile
 * floating-point environment, give the same bytes (dependency-free: no cmocka, so that
 * scripts/ci_aarch64.sh runs it under qemu-aarch64 for the neon table; x86 runs it too).
 *
 * One deterministic workload (int8 / int4 / float8 in every layout, MX with both rules, a
 * 40-step delayed-scaling trajectory and its saved text) is hashed per table, once in the
 * default environment and once with flush-to-zero, denormals-are-zero and rounding toward
 * minus infinity set (x86 MXCSR, AArch64 FPCR), which must be given back unchanged. Every hash
 * must equal the scalar table's in the default environment. test_quant checks the values
 * themselves against an independent reference; this checks that the paths agree.
 * Exit 0 when they do, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "mixprec.h"
#include "quant_kernels.h"

static uint64_t h;
static void mix(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
}

enum { R = 37, C = 301, N = R * C };
static float x[N], s[N];
static unsigned char q[N];
static uint8_t e[N];

static int workload(void)
{
    h = 1469598103934665603ull;
    uint64_t st = 99;
    for (int i = 0; i < N; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(st >> 32);
        if (i % 5 == 0) u &= 0x807FFFFFu; /* subnormals */
        else if ((u & 0x7F800000u) == 0x7F800000u) u ^= 0x40000000u;
        if (i % 7 == 0) u = (u & 0x80FFFFFFu) | 0x3C000000u;
        memcpy(&x[i], &u, 4);
    }
    for (int axis = 0; axis < 3; axis++)
        for (int g = 0; g < 3; g++) {
            const mxp_qlayout l = {R, C, (mxp_qaxis)axis, axis ? (size_t)(g * 5) : 0};
            const size_t ns = mxp_qlayout_nscales(&l) * 4;
            if (mxp_quantize_int8((int8_t *)q, s, x, MXP_FLOAT32, &l)) return 1;
            mix(q, N);
            mix(s, ns);
            if (mxp_quantize_int4(q, s, x, MXP_FLOAT32, &l)) return 1;
            mix(q, R * ((C + 1) / 2));
            mix(s, ns);
            for (int f = 0; f < 2; f++) {
                if (mxp_quantize_fp8(q, f ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN, s, x, MXP_FLOAT32, &l)) return 1;
                mix(q, N);
                mix(s, ns);
            }
        }
    for (int r = 0; r < 2; r++)
        for (int f = 0; f < 2; f++) {
            if (mxp_quantize_mx(q, f ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN, e, x, MXP_FLOAT32, R, C, (mxp_mx_rounding)r))
                return 1;
            mix(q, N);
            mix(e, R * 10);
        }
    mxp_fp8_recipe rc = mxp_fp8_recipe_default(MXP_FLOAT8_E4M3FN);
    rc.history_len = 7;
    mxp_fp8_scaler *sc;
    if (mxp_fp8_scaler_new(&rc, &sc)) return 1;
    for (int step = 0; step < 40; step++) {
        for (int i = 0; i < N; i++) x[i] *= 1.5f;
        if (mxp_fp8_quantize_delayed(q, x + step, MXP_FLOAT32, N - 40, sc)) return 1;
        mix(q, N - 40);
        mxp_fp8_scaler_update(sc);
        const float a = mxp_fp8_scaler_scale(sc);
        mix(&a, 4);
    }
    char buf[4096];
    const int len = mxp_fp8_scaler_save(sc, buf, sizeof buf);
    mix(buf, (size_t)len);
    mxp_fp8_scaler_free(sc);
    return 0;
}

/* FTZ + DAZ + round toward minus infinity; returns the previous control word */
static uint64_t hostile_on(void)
{
#if defined(__aarch64__)
    uint64_t c;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(c));
    const uint64_t w = c | (1u << 24) | (2u << 22);
    __asm__ __volatile__("msr fpcr, %0" ::"r"(w));
    return c;
#elif defined(__x86_64__)
    const unsigned c = __builtin_ia32_stmxcsr();
    __builtin_ia32_ldmxcsr(c | 0x8040u | 0x2000u);
    return c;
#else
    return 0;
#endif
}

static uint64_t control_word(void)
{
#if defined(__aarch64__)
    uint64_t c;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(c));
    return c;
#elif defined(__x86_64__)
    return __builtin_ia32_stmxcsr() & ~0x3Fu; /* without the sticky flags */
#else
    return 0;
#endif
}

static void hostile_off(uint64_t c)
{
#if defined(__aarch64__)
    __asm__ __volatile__("msr fpcr, %0" ::"r"(c));
#elif defined(__x86_64__)
    __builtin_ia32_ldmxcsr((unsigned)c);
#else
    (void)c;
#endif
}

int main(void)
{
    int bad = 0;
    uint64_t want = 0;
    for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
        if (!mxp__kernels_for((mxp__isa_id)isa)) continue;
        mxp__quant_isa_override = isa;
        for (int env = 0; env < 2; env++) {
            uint64_t saved = 0, inside = 0;
            if (env) {
                saved = hostile_on();
                inside = control_word();
            }
            const int rc = workload();
            const uint64_t after = env ? control_word() : 0;
            if (env) hostile_off(saved);
            if (rc) {
                printf("quant_check: %s: a call failed: %s\n", mxp__isa_name((mxp__isa_id)isa), mxp_last_error());
                return 1;
            }
            if (isa == 0 && env == 0) want = h;
            const int ok = h == want && after == inside;
            printf("quant_check: %-7s %s environment: %016llx %s\n", mxp__isa_name((mxp__isa_id)isa),
                   env ? "hostile" : "default", (unsigned long long)h,
                   !ok ? (after != inside ? "MISMATCH (environment not given back)" : "MISMATCH") : "ok");
            bad |= !ok;
        }
    }
    mxp__quant_isa_override = -1;
    return bad;
}
