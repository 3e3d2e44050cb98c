/*
 * bench_finite.c - all_finite and unscale_check (float32, bfloat16, float16) for every
 * available ISA path, n = 2^12 .. 2^26 elements, one thread.
 *
 * Reported per row: median ns/element, GB/s (bytes read for all_finite; bytes read + written
 * for unscale_check), and the ratio to a baseline timed in the same run on the same number of
 * bytes (bench_util.h): the plain read loop for all_finite, the memcpy-equivalent (memcpy of
 * the same total traffic) for unscale_check. Ratio > 1 means faster than the baseline.
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

static double read_ns(size_t bytes)
{
    size_t words = bytes / 8 ? bytes / 8 : 1;
    uint64_t *buf = malloc(words * 8);
    if (!buf) return 0;
    for (size_t i = 0; i < words; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
    struct bu_read r = {buf, words, 0};
    double ns = bu_time_median(read_fn, &r);
    free(buf);
    return ns;
}

typedef struct ctx {
    const mxp__kernels *k;
    mxp_dtype dt;
    void *buf;
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

int main(int argc, char **argv)
{
    int max_log = argc > 1 ? atoi(argv[1]) : 26, min_log = argc > 2 ? atoi(argv[2]) : 12;
    static const mxp_dtype dts[] = {MXP_FLOAT32, MXP_BFLOAT16, MXP_FLOAT16};
    size_t max_bytes = ((size_t)1 << max_log) * 4;
    void *buf = malloc(max_bytes);
    if (!buf) return 1;
    printf("# bench_finite: median of repeated runs, 1 thread; ratio = baseline_ns / op_ns\n");
    printf("%-13s %-9s %-7s %10s %9s %8s %12s %7s\n", "op", "dtype", "isa", "n", "ns/elem", "GB/s",
           "base GB/s", "ratio");
    for (int lg = min_log; lg <= max_log; lg += 2) {
        size_t n = (size_t)1 << lg;
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
            size_t bytes = n * mxp_dtype_size(dts[d]);
            fill(buf, dts[d], n);
            double rd_ns = read_ns(bytes);
            double copy_ns = bu_memcpy_equiv_ns(bytes, bytes);
            for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
                const mxp__kernels *k = mxp__kernels_for((mxp__isa_id)isa);
                if (!k) continue;
                ctx c = {k, dts[d], buf, n, 0, false};
                double t = bu_time_median(run_finite, &c);
                printf("%-13s %-9s %-7s %10zu %9.4f %8.2f %12.2f %7.2f\n", "all_finite",
                       mxp_dtype_name(dts[d]), k->name, n, t / (double)n, bu_gbps(bytes, t),
                       bu_gbps(bytes, rd_ns), rd_ns / t);
                t = bu_time_median(run_unscale, &c);
                printf("%-13s %-9s %-7s %10zu %9.4f %8.2f %12.2f %7.2f\n", "unscale_check",
                       mxp_dtype_name(dts[d]), k->name, n, t / (double)n, bu_gbps(2 * bytes, t),
                       bu_gbps(2 * bytes, copy_ns), copy_ns / t);
                fflush(stdout);
            }
        }
    }
    free(buf);
    return 0;
}
