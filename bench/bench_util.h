/*
 * bench_util.h - timing helpers shared by the benchmarks (header-only, bench/ only).
 *
 * Numbers on a shared machine are noisy, so every benchmark reports medians of repeated runs
 * and a ratio to a baseline measured in the same run on the same bytes:
 *   - bu_memcpy_gbps(bytes_in, bytes_out): glibc memcpy moving the same number of bytes as
 *     the operation (read bytes_in, write bytes_out -> memcpy of max(bytes_in, bytes_out)
 *     ... see below), reported as GB/s of bytes moved (read + written);
 *   - bu_read_gbps(bytes): a plain summing read loop over the same bytes.
 */
#ifndef MIXPREC_BENCH_UTIL_H
#define MIXPREC_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int bu_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static inline double bu_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bu_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Repetitions so that one sample set takes roughly target_ns in total (at least 5, at most 201). */
static inline int bu_reps_for(double one_ns, double target_ns)
{
    int r = one_ns > 0 ? (int)(target_ns / one_ns) : 201;
    if (r < 5) r = 5;
    if (r > 201) r = 201;
    return r | 1;
}

/*
 * Median time in ns of fn(ctx), after one warm-up call; the number of repetitions adapts to
 * the cost of one call (about 0.3 s per measurement).
 */
static inline double bu_time_median(void (*fn)(void *), void *ctx)
{
    double t0 = bu_now_ns();
    fn(ctx);
    double one = bu_now_ns() - t0;
    int reps = bu_reps_for(one, 3e8);
    double *v = malloc((size_t)reps * sizeof *v);
    if (!v) return one;
    for (int i = 0; i < reps; i++) {
        double a = bu_now_ns();
        fn(ctx);
        v[i] = bu_now_ns() - a;
    }
    double m = bu_median(v, reps);
    free(v);
    return m;
}

/* memcpy of `bytes` bytes between two buffers of that size, as a timing baseline. */
struct bu_copy {
    void *dst;
    const void *src;
    size_t bytes;
};
static inline void bu_copy_fn(void *p)
{
    struct bu_copy *c = p;
    memcpy(c->dst, c->src, c->bytes);
    /* dst handed to the asm: clang deleted the copy into a malloc'd buffer that nothing read
     * ("memory" alone only covers memory whose address escaped), and reported 20000 GB/s */
    __asm__ __volatile__("" : : "r"(c->dst) : "memory");
}

/*
 * The memcpy-equivalent baseline for an operation that reads bytes_in and writes bytes_out:
 * time of memcpy copying (bytes_in + bytes_out) / 2 bytes, i.e. the same total traffic.
 * Returns the median ns; the ratio "op speed / memcpy speed" is memcpy_ns / op_ns.
 */
static inline double bu_memcpy_equiv_ns(size_t bytes_in, size_t bytes_out)
{
    size_t bytes = (bytes_in + bytes_out) / 2;
    if (bytes == 0) bytes = 1;
    struct bu_copy c = {malloc(bytes), malloc(bytes), bytes};
    if (!c.dst || !c.src) {
        free(c.dst);
        free((void *)c.src);
        return 0;
    }
    memset(c.dst, 1, bytes);
    memset((void *)c.src, 2, bytes);
    /* both escape here, or clang turns the copy of a memset buffer into a memset (twice as fast) */
    __asm__ __volatile__("" : : "r"(c.src), "r"(c.dst) : "memory");
    double ns = bu_time_median(bu_copy_fn, &c);
    free(c.dst);
    free((void *)c.src);
    return ns;
}

/* A plain read loop (sum of 64-bit words) over `bytes` bytes: the baseline for read-only passes. */
struct bu_read {
    const uint64_t *p;
    size_t words;
    uint64_t sink;
};
static inline void bu_read_fn(void *p)
{
    struct bu_read *r = p;
    uint64_t s = 0;
    for (size_t i = 0; i < r->words; i++) s += r->p[i];
    __asm__ __volatile__("" : "+r"(s)::"memory"); /* keep gcc from deleting the loop */
    r->sink += s;
    __asm__ __volatile__("" ::: "memory");
}

static inline double bu_read_ns(size_t bytes)
{
    size_t words = bytes / 8 ? bytes / 8 : 1;
    uint64_t *buf = malloc(words * 8);
    if (!buf) return 0;
    memset(buf, 3, words * 8);
    struct bu_read r = {buf, words, 0};
    double ns = bu_time_median(bu_read_fn, &r);
    free(buf);
    return ns;
}

/* GB/s for `bytes` moved in `ns`. */
static inline double bu_gbps(size_t bytes, double ns) { return ns > 0 ? (double)bytes / ns : 0; }

#endif /* MIXPREC_BENCH_UTIL_H */
