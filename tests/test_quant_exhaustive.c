/*
 * test_quant_exhaustive.c - the fused float8 quantization kernels against the conversion
 * table's scalar float32 -> float8 kernel on every float32 input.
 *
 * The quantization tables (src/kernels/quant_kernels.h) encode x * s into float8 in one sweep
 * (fp8_encode: delayed and current scaling; mx_encode: MX blocks) with their own rounding
 * code instead of calling the conversion table. The truth here is the scalar conversion
 * kernel with saturation (itself checked on all 2^32 inputs against an independent model by
 * test_convert_exhaustive), applied to the float32 product computed in C:
 *   - fp8_encode with s = 1 on all 2^32 patterns (NaN and inf included), e4m3fn and e5m2,
 *     plain and streaming stores (the output shifted by a few bytes so that the unaligned head
 *     before the streaming loop is met), and the returned amax against a plain loop;
 *   - fp8_encode with a different power-of-two scale per block (2^-20 .. 2^20: the product is
 *     exact, so the encoder sees every pattern class in and out of range) on one block in 16;
 *   - mx_encode on all finite patterns (non-finite ones replaced by their index as a float) in
 *     blocks of 32 consecutive patterns, both rules, against the scalar quantization table
 *     (mx_scale, then the scalar conversion), scales compared too.
 * Every SIMD table this CPU has is checked (MXP_TEST_ISA restricts it); the scalar table is
 * the reference's own code and is not. Blocks of 2^20, split over two threads.
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
#include "quant_kernels.h"
#include "test_util.h"

#define BLOCK ((size_t)1 << 20)
#define NBLOCKS ((uint32_t)4096) /* 2^32 / BLOCK */
#define NTHREADS 2
#define SHIFT 5 /* output offset for the streaming runs: an unaligned head */

typedef struct job {
    const mxp__qkernels *qk;
    int e5m2;
    uint32_t first, count;
    char msg[256]; /* the first mismatch, empty when none */
} job;

static const mxp__cvt_args SAT = {true, 0, 0, false};

static uint32_t ref_amax(const uint32_t *x, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t a = x[i] & 0x7FFFFFFFu;
        if (a > m) m = a;
    }
    return m;
}

static void *run_job(void *p)
{
    job *j = p;
    const mxp_dtype fmt = j->e5m2 ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN;
    const mxp__cvt_fn slow = mxp__scalar_kernels()->cvt[fmt][MXP_FLOAT32][MXP__RNE];
    const mxp__qkernels *sq = mxp__qkernels_for(MXP__ISA_SCALAR);
    uint32_t *x = malloc(BLOCK * 4);
    float *y = malloc(BLOCK * 4);
    unsigned char *want = malloc(BLOCK), *got = malloc(BLOCK + 64), *ew = malloc(BLOCK / 32),
                  *eg = malloc(BLOCK / 32);
    j->msg[0] = '\0';
    if (!x || !y || !want || !got || !ew || !eg) {
        snprintf(j->msg, sizeof j->msg, "out of memory");
        goto out;
    }
    for (uint32_t b = j->first; b < j->first + j->count && !j->msg[0]; b++) {
        const uint32_t base = (uint32_t)(b * BLOCK);
        for (size_t i = 0; i < BLOCK; i++) x[i] = base + (uint32_t)i;
        const float *xf = (const float *)(const void *)x;

        /* s = 1: y = x */
        slow(want, xf, BLOCK, &SAT);
        const uint32_t am = ref_amax(x, BLOCK);
        for (int nt = 0; nt < 2 && !j->msg[0]; nt++) {
            unsigned char *q = got + (nt ? SHIFT : 0);
            const uint32_t a = j->qk->fp8_encode(q, xf, BLOCK, 1.0f, j->e5m2, nt, slow);
            if (nt) j->qk->store_fence();
            const size_t i = tu_first_diff(want, q, BLOCK, 1);
            if (i < BLOCK)
                snprintf(j->msg, sizeof j->msg, "%s fp8_encode s=1 nt=%d: x=0x%08x want 0x%02x got 0x%02x",
                         j->e5m2 ? "e5m2" : "e4m3fn", nt, (unsigned)x[i], want[i], q[i]);
            else if (a != am)
                snprintf(j->msg, sizeof j->msg, "fp8_encode amax of block %u: want 0x%08x got 0x%08x",
                         (unsigned)b, (unsigned)am, (unsigned)a);
        }

        /* a power-of-two scale per block, one block in 16 */
        if ((b & 15u) == 5u && !j->msg[0]) {
            const int e = (int)(tu_fmix32(b) % 41u) - 20;
            const float s = tu_f32((uint32_t)(127 + e) << 23);
            for (size_t i = 0; i < BLOCK; i++) y[i] = xf[i] * s;
            slow(want, y, BLOCK, &SAT);
            (void)j->qk->fp8_encode(got, xf, BLOCK, s, j->e5m2, 0, slow);
            const size_t i = tu_first_diff(want, got, BLOCK, 1);
            if (i < BLOCK)
                snprintf(j->msg, sizeof j->msg, "%s fp8_encode s=2^%d: x=0x%08x want 0x%02x got 0x%02x",
                         j->e5m2 ? "e5m2" : "e4m3fn", e, (unsigned)x[i], want[i], got[i]);
        }

        /* MX on finite inputs */
        for (size_t i = 0; i < BLOCK; i++)
            if ((x[i] & 0x7F800000u) == 0x7F800000u) x[i] = tu_bits32((float)i);
        for (int fl = 0; fl < 2 && !j->msg[0]; fl++) {
            sq->mx_encode(want, ew, xf, BLOCK, j->e5m2, fl, 0, slow);
            j->qk->mx_encode(got, eg, xf, BLOCK, j->e5m2, fl, fl, slow); /* FLOOR: streaming */
            if (fl) j->qk->store_fence();
            const size_t i = tu_first_diff(want, got, BLOCK, 1), k = tu_first_diff(ew, eg, BLOCK / 32, 1);
            if (i < BLOCK)
                snprintf(j->msg, sizeof j->msg, "%s mx_encode %s: x=0x%08x (block amax from there) want 0x%02x got 0x%02x",
                         j->e5m2 ? "e5m2" : "e4m3fn", fl ? "FLOOR" : "RCEIL", (unsigned)x[i], want[i], got[i]);
            else if (k < BLOCK / 32)
                snprintf(j->msg, sizeof j->msg, "mx_encode scale of the block at 0x%08x: want %u got %u",
                         (unsigned)x[32 * k], ew[k], eg[k]);
        }
    }
out:
    free(x);
    free(y);
    free(want);
    free(got);
    free(ew);
    free(eg);
    return NULL;
}

static void sweep(void **state)
{
    (void)state;
    int checked = 0;
    for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
        if (isa == MXP__ISA_SCALAR) continue;
        if (!mxp__kernels_for((mxp__isa_id)isa)) {
            printf("# %s: not on this CPU, skipped\n", mxp__isa_name((mxp__isa_id)isa));
            continue;
        }
        if (!tu_isa_checked((mxp__isa_id)isa)) continue;
        const mxp__qkernels *qk = mxp__qkernels_for((mxp__isa_id)isa);
        assert_non_null(qk);
        for (int e5m2 = 0; e5m2 < 2; e5m2++) {
            job jobs[NTHREADS];
            pthread_t th[NTHREADS];
            for (int t = 0; t < NTHREADS; t++) {
                jobs[t] = (job){qk, e5m2, NBLOCKS / NTHREADS * (uint32_t)t, NBLOCKS / NTHREADS, {0}};
                assert_int_equal(pthread_create(&th[t], NULL, run_job, &jobs[t]), 0);
            }
            for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
            for (int t = 0; t < NTHREADS; t++)
                if (jobs[t].msg[0]) fail_msg("%s: %s", mxp__isa_name((mxp__isa_id)isa), jobs[t].msg);
        }
        printf("# %s: fp8_encode and mx_encode match on every input\n", mxp__isa_name((mxp__isa_id)isa));
        checked++;
    }
    if (!checked) skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(sweep)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
