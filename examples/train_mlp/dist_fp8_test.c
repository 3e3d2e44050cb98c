/*
 * dist_fp8_test.c - CTest (label "mpi", run under mpirun -np 3): the float8 reductions of dist.c.
 *
 * 1. dist_amax_max against a reference every rank computes by itself: each rank's inputs are a
 *    known function of (rank, index), so every rank can fold all of them in double precision:
 *    any NaN gives NaN, else the largest value (inf included).
 * 2. Delayed scaling across ranks: every rank quantizes its own data into two mxp_fp8_scalers
 *    (e4m3fn, history 4, max; e5m2, history 1, most recent) for 24 steps, then dist_fp8_sync and
 *    mxp_fp8_scaler_update. Step 9 puts inf into rank 1's data, step 15 NaN into the last
 *    rank's. After every step the scales must be bitwise the same on every rank
 *    (dist_fp8_check) and equal to those of a reference scaler on each rank that quantized ALL
 *    ranks' data of the step itself (no reduction involved). A rank that used its own amax
 *    would fail both checks (the data maxima differ by rank).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"

enum { NAMAX = 7, NSTEPS = 24, NX = 257, NSC = 2 };

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* rank r's amax input i (>= 0, inf or NaN) */
static float amax_input(int r, int nranks, int i)
{
    switch (i) {
    case 0: return (float)(r + 1);                        /* the last rank's is largest */
    case 1: return r == nranks - 1 ? NAN : 1.0f;          /* NaN on the last rank only */
    case 2: return r == 0 ? INFINITY : 2.0f;              /* inf on rank 0 only */
    case 3: return 0.0f;                                  /* zero everywhere */
    case 4: return r == 0 ? NAN : r == 1 ? INFINITY : 3.0f; /* NaN beats inf */
    default: /* random finite values, largest on an arbitrary rank */
        return (float)(mix((uint64_t)r * 131 + (uint64_t)i) >> 40) * 0x1p-10f;
    }
}

/* rank r's data of step t for scaler k: x[i] in roughly +-2^(t%9 - 4 + r) */
static void data(int r, int nranks, int t, int k, float *x)
{
    for (int i = 0; i < NX; i++) {
        uint64_t h = mix(((uint64_t)t << 40) ^ ((uint64_t)k << 32) ^ ((uint64_t)r << 20) ^
                         (uint64_t)i);
        float u = (float)(h >> 40) * 0x1p-24f * 2.0f - 1.0f;
        x[i] = ldexpf(u, t % 9 - 4 + r);
    }
    if (t == 9 && r == 1) x[17] = INFINITY;
    if (t == 15 && r == nranks - 1) x[200] = NAN;
}

int main(int argc, char **argv)
{
    dist d;
    if (dist_init(&argc, &argv, &d) != 0) return 1;
    d.opt.verify = true;
    int fails = 0;

    /* 1. dist_amax_max */
    float a[NAMAX];
    for (int i = 0; i < NAMAX; i++) a[i] = amax_input(d.rank, d.size, i);
    dist_amax_max(&d, a, NAMAX);
    for (int i = 0; i < NAMAX; i++) {
        double want = 0.0;
        int nan = 0;
        for (int q = 0; q < d.size; q++) {
            double v = (double)amax_input(q, d.size, i);
            if (isnan(v)) nan = 1;
            else if (v > want) want = v;
        }
        int ok = nan ? isnan(a[i]) : (!isnan(a[i]) && (double)a[i] == want);
        if (!ok) {
            fprintf(stderr, "rank %d: amax[%d] = %a, want %s%a\n", d.rank, i, (double)a[i],
                    nan ? "NaN, not " : "", want);
            fails++;
        }
    }

    /* 2. delayed scaling */
    const mxp_fp8_recipe rec[NSC] = {{MXP_FLOAT8_E4M3FN, 4, MXP_AMAX_MAX, 0},
                                     {MXP_FLOAT8_E5M2, 1, MXP_AMAX_MOST_RECENT, 1}};
    mxp_fp8_scaler *s[NSC] = {NULL, NULL}, *ref[NSC] = {NULL, NULL};
    for (int k = 0; k < NSC; k++)
        if (mxp_fp8_scaler_new(&rec[k], &s[k]) != MXP_OK ||
            mxp_fp8_scaler_new(&rec[k], &ref[k]) != MXP_OK) {
            fprintf(stderr, "mxp_fp8_scaler_new: %s\n", mxp_last_error());
            dist_abort(&d, 1);
        }
    float x[NX];
    uint8_t q[NX];
    int changes = 0;
    for (int t = 0; t < NSTEPS; t++) {
        float before = mxp_fp8_scaler_scale(s[0]);
        for (int k = 0; k < NSC; k++) {
            data(d.rank, d.size, t, k, x);
            mxp_fp8_quantize_delayed(q, x, MXP_FLOAT32, NX, s[k]);
            for (int r = 0; r < d.size; r++) { /* the reference sees every rank's data */
                data(r, d.size, t, k, x);
                mxp_fp8_quantize_delayed(q, x, MXP_FLOAT32, NX, ref[k]);
            }
        }
        dist_fp8_sync(&d, s, NSC);
        for (int k = 0; k < NSC; k++) {
            mxp_fp8_scaler_update(s[k]);
            mxp_fp8_scaler_update(ref[k]);
            float got[2] = {mxp_fp8_scaler_scale(s[k]), mxp_fp8_scaler_scale_inv(s[k])};
            float want[2] = {mxp_fp8_scaler_scale(ref[k]), mxp_fp8_scaler_scale_inv(ref[k])};
            if (memcmp(got, want, sizeof got) != 0) {
                fprintf(stderr, "rank %d step %d scaler %d: scale %a inv %a, want %a %a\n", d.rank,
                        t, k, (double)got[0], (double)got[1], (double)want[0], (double)want[1]);
                fails++;
            }
        }
        changes += mxp_fp8_scaler_scale(s[0]) != before;
        if (dist_fp8_check(&d, s, NSC, (uint64_t)t) != 0) fails++;
    }
    if (mxp_fp8_scaler_nonfinite_steps(s[0]) != 2 || mxp_fp8_scaler_nonfinite_steps(s[1]) != 2) {
        fprintf(stderr, "rank %d: non-finite steps %llu %llu, want 2 2 (steps 9 and 15)\n", d.rank,
                (unsigned long long)mxp_fp8_scaler_nonfinite_steps(s[0]),
                (unsigned long long)mxp_fp8_scaler_nonfinite_steps(s[1]));
        fails++;
    }
    if (changes < 5) {
        fprintf(stderr, "rank %d: the e4m3fn scale changed only %d times (it must move)\n", d.rank,
                changes);
        fails++;
    }
    for (int k = 0; k < NSC; k++) {
        mxp_fp8_scaler_free(s[k]);
        mxp_fp8_scaler_free(ref[k]);
    }
    bool ok = dist_all(&d, fails == 0);
    if (d.rank == 0)
        printf("dist_fp8_test: %d ranks, amax reduction and %d steps of delayed scaling: %s\n",
               d.size, NSTEPS, ok ? "passed" : "FAILED");
    return dist_finish(&d, ok ? 0 : 1);
}
