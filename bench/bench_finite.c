/*
 * bench_finite.c - all_finite, unscale_check and unscale_into (float32, bfloat16, float16
 * scaled gradients; unscale_into writes float32) for every available ISA path, n = 2^12 ..
 * 2^26 elements, one thread.
 *
 * Reported per row: median ns/element, GB/s (bytes read for all_finite; bytes read + written
 * for unscale_check and unscale_into), and the ratio to a baseline on the same number of bytes:
 * the plain summing read loop for all_finite, the memcpy-equivalent (bench_util.h: memcpy of
 * the same total traffic, i.e. `bytes` bytes for an in-place pass over `bytes`, and
 * (n * size + 4 * n) / 2 bytes for unscale_into, which reads n * size and writes 4 * n) for
 * the other two.
 * Ratio > 1 means faster than the baseline. This machine is shared, and memory bandwidth
 * drifts by 2x within a minute, so baselines and ops are timed in interleaved rounds and the
 * ratio is the median of per-round ratios (each round times everything within ~1 s).
 *
 * unscale_check runs in place, so calls alternate scale 2 and 0.5: the data returns to its
 * starting values every two calls and never drifts into the subnormal range.
 *
 * Usage: bench_finite [max_log2_n (default 26)] [min_log2_n (default 12)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "kernels.h"
#include "mixprec.h"

/*
 * The read-loop baseline. bench_util.h's bu_read_ns is not used: its loop result only reaches
 * a field of a local struct that is never read, so gcc -O2 deletes the loop (it reports the same
 * ~30 ns for 16 KiB and for 256 MiB). This is the same summing loop with the sum forced to
 * exist through an empty asm.
 */
static void read_fn(void *p)
{
    struct bu_read *r = p;
    uint64_t s = 0;
    for (size_t i = 0; i < r->words; i++) s += r->p[i];
    __asm__ __volatile__("" : "+r"(s)::"memory");
    r->sink += s;
}

typedef struct ctx {
    const mxp__kernels *k;
    mxp_dtype dt;
    void *buf;
    void *dst; /* unscale_into: the float32 destination */
    size_t n;
    int toggle;
    bool sink;
} ctx;

static void run_finite(void *p)
{
    ctx *c = p;
    c->sink ^= c->k->all_finite[c->dt](c->buf, c->n);
    __asm__ __volatile__("" ::: "memory");
}

static void run_unscale(void *p)
{
    ctx *c = p;
    float inv = (c->toggle ^= 1) ? 0.5f : 2.0f;
    c->sink ^= c->k->unscale_check[c->dt](c->buf, c->n, inv);
    __asm__ __volatile__("" ::: "memory");
}

static void run_into(void *p)
{
    ctx *c = p;
    c->sink ^= c->k->unscale_into[c->dt](c->dst, c->buf, c->n, 1.0f / 65536.0f);
    __asm__ __volatile__("" ::: "memory");
}

static void fill(void *buf, mxp_dtype dt, size_t n)
{
    /* gradient-like values: uniform in (-1, 1) scaled by 2^-10 .. 2^5, all finite */
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float v = (float)((double)(int32_t)(s >> 32) * 0x1p-31) * (float)(1u << (s >> 13 & 15)) * 0x1p-10f;
        uint32_t u;
        memcpy(&u, &v, 4);
        if (dt == MXP_FLOAT32) {
            memcpy((char *)buf + 4 * i, &u, 4);
        } else {
            uint16_t h;
            if (dt == MXP_BFLOAT16) {
                h = (uint16_t)(u >> 16);
            } else { /* float16 by truncation (value within float16's normal range) */
                uint32_t e = (u >> 23) & 0xFF, sign = (u >> 16) & 0x8000;
                int he = (int)e - 127 + 15;
                h = he <= 0 ? (uint16_t)sign : (uint16_t)(sign | (uint32_t)he << 10 | ((u >> 13) & 0x3FF));
            }
            memcpy((char *)buf + 2 * i, &h, 2);
        }
    }
}

/* Mean ns of `reps` back-to-back calls. */
static double time_reps(void (*fn)(void *), void *c, int reps)
{
    double t0 = bu_now_ns();
    for (int i = 0; i < reps; i++) fn(c);
    return (bu_now_ns() - t0) / reps;
}

/* Calls per sample so one sample takes about 20 ms (at least 1). */
static int reps_for(void (*fn)(void *), void *c)
{
    double one = time_reps(fn, c, 1);
    int r = one > 0 ? (int)(2e7 / one) : 1000;
    return r < 1 ? 1 : r > 100000 ? 100000 : r;
}

#define ROUNDS 11
#define NOPS 3 /* all_finite, unscale_check, unscale_into */
#define MAXK (NOPS * MXP__ISA_COUNT)

int main(int argc, char **argv)
{
    int max_log = argc > 1 ? atoi(argv[1]) : 26, min_log = argc > 2 ? atoi(argv[2]) : 12;
    static const mxp_dtype dts[] = {MXP_FLOAT32, MXP_BFLOAT16, MXP_FLOAT16};
    size_t max_bytes = ((size_t)1 << max_log) * 4;
    void *buf = malloc(max_bytes), *cp_dst = malloc(max_bytes), *cp_src = malloc(max_bytes);
    void *into_dst = malloc(max_bytes);
    uint64_t *rd = malloc(max_bytes);
    if (!buf || !cp_dst || !cp_src || !rd || !into_dst) return 1;
    memset(into_dst, 0, max_bytes);
    memset(cp_dst, 1, max_bytes);
    memset(cp_src, 2, max_bytes);
    for (size_t i = 0; i < max_bytes / 8; i++) rd[i] = i * 0x9E3779B97F4A7C15ull;
    printf("# bench_finite: 1 thread; %d interleaved rounds of (baselines, every ISA); ns/elem is\n"
           "# the median over rounds, ratio the median of per-round baseline_ns / op_ns\n", ROUNDS);
    printf("%-13s %-9s %-7s %10s %9s %8s %12s %7s\n", "op", "dtype", "isa", "n", "ns/elem", "GB/s",
           "base GB/s", "ratio");
    for (int lg = min_log; lg <= max_log; lg += 2) {
        size_t n = (size_t)1 << lg;
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
            size_t bytes = n * mxp_dtype_size(dts[d]);
            fill(buf, dts[d], n);
            struct bu_read rb = {rd, bytes / 8, 0};
            struct bu_copy cb = {cp_dst, cp_src, bytes};
            const size_t into_bytes = (bytes + 4 * n) / 2; /* memcpy-equivalent of unscale_into */
            struct bu_copy cb2 = {cp_dst, cp_src, into_bytes};
            /* one context per (ISA, op): k % 3 == 0 all_finite, 1 unscale_check, 2 unscale_into */
            ctx cs[MAXK];
            void (*fns[MAXK])(void *);
            const mxp__kernels *ks[MAXK];
            int nk = 0;
            for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
                const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
                if (!k) continue;
                for (int op = 0; op < NOPS; op++) {
                    cs[nk] = (ctx){k, dts[d], buf, into_dst, n, 0, false};
                    fns[nk] = op == 2 ? run_into : op ? run_unscale : run_finite;
                    ks[nk++] = k;
                }
            }
            int r_read = reps_for(read_fn, &rb), r_copy = reps_for(bu_copy_fn, &cb),
                r_copy2 = reps_for(bu_copy_fn, &cb2), reps[MAXK];
            for (int k = 0; k < nk; k++) reps[k] = reps_for(fns[k], &cs[k]);
            double t_read[ROUNDS], t_copy[ROUNDS], t_copy2[ROUNDS], t_op[MAXK][ROUNDS],
                ratio[MAXK][ROUNDS];
            for (int r = 0; r < ROUNDS; r++) {
                t_read[r] = time_reps(read_fn, &rb, r_read);
                t_copy[r] = time_reps(bu_copy_fn, &cb, r_copy);
                t_copy2[r] = time_reps(bu_copy_fn, &cb2, r_copy2);
                for (int k = 0; k < nk; k++) {
                    t_op[k][r] = time_reps(fns[k], &cs[k], reps[k]);
                    const double base = k % NOPS == 0 ? t_read[r] : k % NOPS == 1 ? t_copy[r] : t_copy2[r];
                    ratio[k][r] = base / t_op[k][r];
                }
            }
            double m_read = bu_median(t_read, ROUNDS), m_copy = bu_median(t_copy, ROUNDS),
                   m_copy2 = bu_median(t_copy2, ROUNDS);
            static const char *const op_names[NOPS] = {"all_finite", "unscale_check", "unscale_into"};
            for (int k = 0; k < nk; k++) {
                double t = bu_median(t_op[k], ROUNDS), q = bu_median(ratio[k], ROUNDS);
                const int op = k % NOPS;
                size_t moved = op == 0 ? bytes : op == 1 ? 2 * bytes : bytes + 4 * n;
                double base = op == 0 ? m_read : op == 1 ? m_copy : m_copy2;
                printf("%-13s %-9s %-7s %10zu %9.4f %8.2f %12.2f %7.2f\n", op_names[op],
                       mxp_dtype_name(dts[d]), ks[k]->name, n, t / (double)n, bu_gbps(moved, t),
                       bu_gbps(moved, base), q);
            }
            fflush(stdout);
        }
    }
    free(buf);
    free(into_dst);
    free(cp_dst);
    free(cp_src);
    free(rd);
    return 0;
}
