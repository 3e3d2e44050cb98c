/*
 * bench_convert.c - conversion throughput per ISA path, thread count and size, against memcpy.
 *
 * For each conversion (float32 <-> float16 / bfloat16 / float8, nearest-even and saturating,
 * stochastic rounding to every narrow format, and since session 55 every other pair, nearest-even
 * and, where the target drops bits, stochastic), each ISA table this CPU has (scalar, avx2, avx512,
 * neon), 1 and 2 threads, and n in {2^12, 2^16, 2^20, 2^24, 2^26}: the median ns per element, the
 * GB/s of bytes moved (read + written), the ratio to the memcpy-equivalent baseline of bench_util.h
 * (memcpy of (bytes_in + bytes_out) / 2, measured in the same run; ratio > 1 means faster than
 * memcpy moving the same traffic), and the ratio to the physical limit of bench_limit.h (a loop
 * reading the same source bytes and writing the same destination bytes, with non-temporal stores
 * out of cache and plain ones in cache, one thread, measured in the same run; 1.00 = as fast as the
 * hardware moves those bytes), and to that loop run as the library runs the row (limit_s: where
 * src/convert.c cuts a large call into interleaved streams, the loop is cut the same way,
 * bench_limit.h's bl_streams, since one core moves more bytes that way; elsewhere it is the limit
 * again). The header names the CPU (/proc/cpuinfo) and, on AVX-512 CPUs, whether the AVX-512
 * kernels prefetch their source in streaming calls (a per-CPU choice, src/kernels/dispatch.c).
 * ISA rows: each table's own kernels ("avx512-own" where the dispatched avx512 table keeps some
 * avx2 kernels) and, where it differs, the avx512 table as dispatched ("avx512").
 *
 * Threads are split the way src/convert.c splits them: contiguous chunks on 64-element
 * boundaries, chunk 0 on the calling thread, the others on the library's persistent workers
 * (src/pool.c: waking them is part of the cost, as it is for mxp_convert_ex). A "2 threads" row asks for
 * two threads the way mxp_convert_ex does: below 2 * mxp__convert_min_per_thread elements the
 * library runs one thread, and so does the row (th column "2>1"). --scan forces the split at
 * every size, which is how the threshold was measured.
 *
 * Peer rows ("ggml-style", one thread): the row loops an engine without a conversion library
 * writes (see peer_for below), for float32 <-> float16 / bfloat16 nearest-even.
 *
 * Usage: bench_convert [--quick] [--csv] [--isa NAME] [--only CONVERSION] [--peers] [--relu] [--range R]
 *                      [--normal S] [--scan] [--streams S] [--prefetch off|l1|l2] [--ahead on|off]
 *                      [--thp]
 *   --quick   n in {2^16, 2^26} only
 *   --csv     one CSV row per measurement instead of the table
 *   --isa     only this path (scalar, avx2, avx512, avx512-own, neon, or ggml-style for the peer rows only)
 *   --peers   with --isa: the peer rows too
 *   --relu    source data with half the values zero (ReLU outputs) instead of all in [-8, 8]
 *   --range R source values over [-R, R] instead of [-8, 8] (R > 0): small values (R = 0.05)
 *             put float8 results below the normal range in most 64-element steps
 *   --normal S source values drawn from N(0, S^2) instead (S > 0; S = 1: 1.25% of them below
 *             e4m3fn's normal range 2^-6, in 55% of 64-element steps)
 *   --only    only the conversions whose name starts with this (e.g. "f32->e5m2")
 *   --scan    instead: n = 2^13 .. 2^22 (per-layer sizes), float32 -> bfloat16 and float16 ->
 *             float32, the active path: one thread ("1"); two threads with a thread started and
 *             joined per call ("2s", how mxp_convert_ex worked before its worker pool); two
 *             threads on the library's persistent workers ("2", src/pool.c), the split forced
 *             at every size. Tells the threshold mxp__convert_min_per_thread.
 *   --streams S  large float32 -> narrow calls as S interleaved streams (1-16; 1: one pass) instead
 *             of the dispatcher's choice for this CPU (kernels.h's mxp__cvt_streams); every library
 *             row runs as mxp_convert_ex runs it (mxp__cvt_run), the peer rows as they are
 *   --prefetch L  the streaming source prefetch (kernels.h's mxp__avx512_prefetch) for this run
 *             instead of the dispatcher's choice for this CPU: off, l1 (AMD Zen 5's scheme) or l2
 *             (Intel's); how one CPU's choice is measured against the others'
 *   --ahead A the range tests ahead of the streaming 16-bit -> float8 stochastic steps (kernels.h's
 *             mxp__avx512_ahead) on or off for this run
 *   --thp     back the source and destination (shared by the limit loop) with transparent huge
 *             pages where the kernel allows it (madvise MADV_HUGEPAGE; Linux): what a caller whose
 *             large buffers are huge pages gets. Without it they are what malloc gives (4 KiB pages
 *             unless the system's THP setting is "always"), as for most callers.
 * Not a test: numbers on a shared machine are noisy; read medians and ratios.
 */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* madvise and MADV_HUGEPAGE (--thp) beyond _POSIX_C_SOURCE */
#endif
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "bench_limit.h"
#include "bench_util.h"
#include "internal.h"
#include "kernels.h"
#include "mixprec.h"
#include "pool.h"

typedef struct conv {
    const char *name;
    int dst, src, mode;
    bool sat;
} conv;

static const conv convs[] = {
    {"f32->f16", MXP_FLOAT16, MXP_FLOAT32, MXP__RNE, false},
    {"f32->bf16", MXP_BFLOAT16, MXP_FLOAT32, MXP__RNE, false},
    {"f16->f32", MXP_FLOAT32, MXP_FLOAT16, MXP__RNE, false},
    {"bf16->f32", MXP_FLOAT32, MXP_BFLOAT16, MXP__RNE, false},
    {"f32->e4m3fn", MXP_FLOAT8_E4M3FN, MXP_FLOAT32, MXP__RNE, false},
    {"f32->e4m3fn sat", MXP_FLOAT8_E4M3FN, MXP_FLOAT32, MXP__RNE, true},
    {"f32->e5m2", MXP_FLOAT8_E5M2, MXP_FLOAT32, MXP__RNE, false},
    {"f32->e5m2 sat", MXP_FLOAT8_E5M2, MXP_FLOAT32, MXP__RNE, true},
    {"e4m3fn->f32", MXP_FLOAT32, MXP_FLOAT8_E4M3FN, MXP__RNE, false},
    {"e5m2->f32", MXP_FLOAT32, MXP_FLOAT8_E5M2, MXP__RNE, false},
    {"f32->bf16 SR", MXP_BFLOAT16, MXP_FLOAT32, MXP__SR, false},
    {"f32->f16 SR", MXP_FLOAT16, MXP_FLOAT32, MXP__SR, false},
    {"f32->e4m3fn SR", MXP_FLOAT8_E4M3FN, MXP_FLOAT32, MXP__SR, false},
    {"f32->e5m2 SR", MXP_FLOAT8_E5M2, MXP_FLOAT32, MXP__SR, false},
    /* the other pairs (float64 by AVX, and float64 <-> narrow by direct kernels on x86; the
     * narrow <-> narrow nearest-even pairs by their own kernels on x86; stochastic rounding
     * between the two float8 formats by bytes: AVX2 kernels, or byte tables on AVX512_VBMI; on
     * NEON the narrow pairs are composed from the float32 kernels, src/kernels/cvt_compose.c) */
    {"f64->f32", MXP_FLOAT32, MXP_FLOAT64, MXP__RNE, false},
    {"f32->f64", MXP_FLOAT64, MXP_FLOAT32, MXP__RNE, false},
    {"f64->f16", MXP_FLOAT16, MXP_FLOAT64, MXP__RNE, false},
    {"f64->bf16", MXP_BFLOAT16, MXP_FLOAT64, MXP__RNE, false},
    {"f64->e4m3fn", MXP_FLOAT8_E4M3FN, MXP_FLOAT64, MXP__RNE, false},
    {"f16->f64", MXP_FLOAT64, MXP_FLOAT16, MXP__RNE, false},
    {"e4m3fn->f64", MXP_FLOAT64, MXP_FLOAT8_E4M3FN, MXP__RNE, false},
    {"f64->bf16 SR", MXP_BFLOAT16, MXP_FLOAT64, MXP__SR, false},
    {"f64->f32 SR", MXP_FLOAT32, MXP_FLOAT64, MXP__SR, false},
    {"f64->f16 SR", MXP_FLOAT16, MXP_FLOAT64, MXP__SR, false},
    {"f64->e4m3fn SR", MXP_FLOAT8_E4M3FN, MXP_FLOAT64, MXP__SR, false},
    {"f16->bf16 SR", MXP_BFLOAT16, MXP_FLOAT16, MXP__SR, false},
    {"bf16->f16 SR", MXP_FLOAT16, MXP_BFLOAT16, MXP__SR, false},
    {"f16->bf16", MXP_BFLOAT16, MXP_FLOAT16, MXP__RNE, false},
    {"bf16->e4m3fn", MXP_FLOAT8_E4M3FN, MXP_BFLOAT16, MXP__RNE, false},
    {"e4m3fn->bf16", MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP__RNE, false},
    {"f16->e4m3fn", MXP_FLOAT8_E4M3FN, MXP_FLOAT16, MXP__RNE, false},
    {"bf16->f16", MXP_FLOAT16, MXP_BFLOAT16, MXP__RNE, false},
    {"e4m3fn->e5m2", MXP_FLOAT8_E5M2, MXP_FLOAT8_E4M3FN, MXP__RNE, false},
    {"e4m3fn->e5m2 SR", MXP_FLOAT8_E5M2, MXP_FLOAT8_E4M3FN, MXP__SR, false},
    {"e5m2->e4m3fn", MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2, MXP__RNE, false},
    {"e5m2->e4m3fn SR", MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2, MXP__SR, false},
    {"e5m2->f16", MXP_FLOAT16, MXP_FLOAT8_E5M2, MXP__RNE, false},
    /* the remaining nearest-even pairs, so that each avx512 kernel meets its avx2 twin (session
     * 55, src/kernels/dispatch.c) */
    {"f64->e5m2", MXP_FLOAT8_E5M2, MXP_FLOAT64, MXP__RNE, false},
    {"f64->e5m2 SR", MXP_FLOAT8_E5M2, MXP_FLOAT64, MXP__SR, false},
    {"bf16->f64", MXP_FLOAT64, MXP_BFLOAT16, MXP__RNE, false},
    {"e5m2->f64", MXP_FLOAT64, MXP_FLOAT8_E5M2, MXP__RNE, false},
    {"f16->e5m2", MXP_FLOAT8_E5M2, MXP_FLOAT16, MXP__RNE, false},
    {"bf16->e5m2", MXP_FLOAT8_E5M2, MXP_BFLOAT16, MXP__RNE, false},
    {"e5m2->bf16", MXP_BFLOAT16, MXP_FLOAT8_E5M2, MXP__RNE, false},
    {"e4m3fn->f16", MXP_FLOAT16, MXP_FLOAT8_E4M3FN, MXP__RNE, false},
    {"bf16->e4m3fn SR", MXP_FLOAT8_E4M3FN, MXP_BFLOAT16, MXP__SR, false},
    {"bf16->e5m2 SR", MXP_FLOAT8_E5M2, MXP_BFLOAT16, MXP__SR, false},
    {"f16->e4m3fn SR", MXP_FLOAT8_E4M3FN, MXP_FLOAT16, MXP__SR, false},
    {"f16->e5m2 SR", MXP_FLOAT8_E5M2, MXP_FLOAT16, MXP__SR, false},
};
#define NCONVS (sizeof convs / sizeof convs[0])

typedef struct work {
    mxp__cvt_fn fn;
    mxp_dtype dt, st; /* the conversion's destination and source dtypes */
    bool lib;         /* a library kernel: called through mxp__cvt_run, as mxp_convert_ex does */
    unsigned char *dst;
    const unsigned char *src;
    size_t n, ib, ob;
    mxp__cvt_args args;
    int threads;
    bool spawn; /* threads started per call (the old mxp_convert_ex) instead of the pool */
} work;

typedef struct part {
    mxp__cvt_fn fn;
    mxp_dtype dt, st;
    bool lib;
    unsigned char *dst;
    const unsigned char *src;
    size_t n;
    mxp__cvt_args args;
} part;

static void *run_part(void *p)
{
    part *c = p;
    if (c->lib) mxp__cvt_run(c->fn, c->dt, c->st, c->dst, c->src, c->n, &c->args);
    else c->fn(c->dst, c->src, c->n, &c->args);
    return NULL;
}

static void run_part_task(void *ctx, size_t t)
{
    part *parts = ctx;
    run_part(&parts[t]);
}

/* One call, split like src/convert.c: contiguous 64-aligned chunks, chunk 0 here, the others on
 * the library's persistent workers (src/pool.c), or (spawn) on threads started for this call
 * and joined, as mxp_convert_ex did before it had workers. */
static void run_work(void *p)
{
    work *w = p;
    if (w->threads <= 1) {
        if (w->lib) mxp__cvt_run(w->fn, w->dt, w->st, w->dst, w->src, w->n, &w->args);
        else w->fn(w->dst, w->src, w->n, &w->args);
    } else {
        enum { MAXT = 16 };
        part parts[MAXT];
        pthread_t tid[MAXT];
        bool started[MAXT];
        int nt = w->threads < MAXT ? w->threads : MAXT;
        size_t per = (w->n + (size_t)nt - 1) / (size_t)nt;
        per = (per + 63) / 64 * 64;
        int cnt = 0;
        for (size_t b = 0; b < w->n && cnt < nt; b += per, cnt++) {
            const size_t len = w->n - b > per ? per : w->n - b;
            parts[cnt] = (part){w->fn, w->dt, w->st, w->lib, w->dst + b * w->ob, w->src + b * w->ib, len, w->args};
            parts[cnt].args.index0 = w->args.index0 + b;
        }
        if (!w->spawn) {
            mxp__pool_run(run_part_task, parts, (size_t)cnt, (size_t)cnt - 1);
        } else {
            for (int t = 1; t < cnt; t++) started[t] = pthread_create(&tid[t], NULL, run_part, &parts[t]) == 0;
            if (cnt > 0) run_part(&parts[0]);
            for (int t = 1; t < cnt; t++) {
                if (started[t]) pthread_join(tid[t], NULL);
                else run_part(&parts[t]);
            }
        }
    }
    __asm__ __volatile__("" ::: "memory");
}

/* Source data: float32 values spread over [-8, 8] (plus the other formats converted from them),
 * or over [-R, R] (--range), or drawn from N(0, S^2) (--normal);
 * with --relu every other value (at random) is +0, like the output of a ReLU. Every element is
 * drawn afresh: until 2026-11-26 a block of 4096 values was repeated over the buffer, and on Zen 5
 * that periodic source made the AVX-512 float8 encodes at 2^26 30% slower than on the same
 * values drawn without a period (0.165 against 0.125 ns/element, bench/RESULTS.md session 13);
 * real tensors have no period of 16 KiB, and a period also lets the branch predictor learn which
 * steps leave the fast loop. */
static bool relu;
static double range = 8.0;
static double sigma; /* --normal: > 0 for N(0, sigma^2) data instead */
static void fill_src(unsigned char *src, int dt, size_t n)
{
    enum { CHUNK = 4096 };
    uint64_t s = 88172645463325252ull;
    float *f = malloc(CHUNK * sizeof *f);
    unsigned char *tmp = malloc(CHUNK * 8);
    if (!f || !tmp) {
        free(f);
        free(tmp);
        memset(src, 0x3C, n * mxp_dtype_size((mxp_dtype)dt));
        return;
    }
    const size_t sz = mxp_dtype_size((mxp_dtype)dt);
    for (size_t i = 0; i < n; i += CHUNK) {
        const size_t len = n - i < CHUNK ? n - i : CHUNK;
        for (size_t j = 0; j < len; j++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            f[j] = (float)(((double)(s >> 11) * 0x1p-53 * 2.0 - 1.0) * range);
            if (sigma > 0.0) { /* Box-Muller with a second draw */
                const double u1 = (double)((s >> 11) + 1) * 0x1p-53;
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                f[j] = (float)(sigma * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * (double)(s >> 11) * 0x1p-53));
            }
            if (relu && (s >> 7) % 2) f[j] = 0.0f;
        }
        mxp_convert(tmp, (mxp_dtype)dt, f, MXP_FLOAT32, len);
        memcpy(src + i * sz, tmp, len * sz);
    }
    free(f);
    free(tmp);
}

/* memcpy-equivalent baselines, cached by traffic. */
typedef struct mc {
    size_t in, out;
    double ns;
} mc;
static mc mc_cache[64];
static int mc_count;
static double memcpy_ns(size_t in, size_t out)
{
    for (int i = 0; i < mc_count; i++)
        if (mc_cache[i].in == in && mc_cache[i].out == out) return mc_cache[i].ns;
    const double ns = bu_memcpy_equiv_ns(in, out);
    if (mc_count < 64) mc_cache[mc_count++] = (mc){in, out, ns};
    return ns;
}

static bool csv, forced;

/*
 * Peer baselines: "ggml-style" row loops, the way ggml-like engines convert a row when they
 * have no library for it (written here from the usual idioms, not copied): float32 <-> float16
 * eight at a time with F16C and plain stores, float32 -> bfloat16 one element at a time with the
 * NaN check and the carry trick, bfloat16 -> float32 one shift per element. Plain C loops the
 * compiler may vectorize as it likes; no threads, no streaming stores. Float8 has no such
 * baseline (ggml has no float8 type). Only on a CPU with F16C (AVX2 machines).
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PEER_F16C __attribute__((target("avx2,f16c")))
PEER_F16C static void peer_f32_f16(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    (void)a;
    const float *x = src;
    uint16_t *y = dst;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = (uint16_t)_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
PEER_F16C static void peer_f16_f32(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    (void)a;
    const uint16_t *x = src;
    float *y = dst;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}
#define HAVE_PEER_F16C 1
#endif
static void peer_f32_bf16(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    (void)a;
    const unsigned char *x = src;
    uint16_t *y = dst;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + 4 * i, 4);
        if ((u & 0x7FFFFFFFu) > 0x7F800000u) y[i] = (uint16_t)((u >> 16) | 64); /* quiet NaN */
        else y[i] = (uint16_t)((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16);
    }
}
static void peer_bf16_f32(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    (void)a;
    const uint16_t *x = src;
    unsigned char *y = dst;
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = (uint32_t)x[i] << 16;
        memcpy(y + 4 * i, &u, 4);
    }
}

/* The peer loop for conversion c, or NULL. */
static mxp__cvt_fn peer_for(const conv *c)
{
    if (c->mode != MXP__RNE || c->sat) return NULL;
#ifdef HAVE_PEER_F16C
    if (mxp__kernels_for(MXP__ISA_AVX2)) { /* the library's check: AVX2 + F16C + OS support */
        if (c->dst == MXP_FLOAT16 && c->src == MXP_FLOAT32) return peer_f32_f16;
        if (c->dst == MXP_FLOAT32 && c->src == MXP_FLOAT16) return peer_f16_f32;
    }
#endif
    if (c->dst == MXP_BFLOAT16 && c->src == MXP_FLOAT32) return peer_f32_bf16;
    if (c->dst == MXP_FLOAT32 && c->src == MXP_BFLOAT16) return peer_bf16_f32;
    return NULL;
}

static void measure_fn(const conv *c, const char *name, mxp__cvt_fn fn, bool lib, int threads, size_t n,
                       unsigned char *dst, const unsigned char *src);
static void measure_work(const conv *c, const char *name, mxp__cvt_fn fn, bool lib, int threads, bool spawn,
                         size_t n, unsigned char *dst, const unsigned char *src);

static void measure(const conv *c, const mxp__kernels *k, int threads, size_t n, unsigned char *dst,
                    const unsigned char *src)
{
    measure_fn(c, k->name, k->cvt[c->dst][c->src][c->mode], true, threads, n, dst, src);
}

static void measure_fn(const conv *c, const char *name, mxp__cvt_fn fn, bool lib, int threads, size_t n,
                       unsigned char *dst, const unsigned char *src)
{
    measure_work(c, name, fn, lib, threads, false, n, dst, src);
}

/* lib: a library kernel, run as mxp_convert_ex runs it (mxp__cvt_run: interleaved streams where
 * they apply); else a peer loop, called as it is */
static void measure_work(const conv *c, const char *name, mxp__cvt_fn fn, bool lib, int threads, bool spawn,
                         size_t n, unsigned char *dst, const unsigned char *src)
{
    const size_t ib = mxp_dtype_size((mxp_dtype)c->src), ob = mxp_dtype_size((mxp_dtype)c->dst);
    /* as mxp_convert_ex: at most one thread per mxp__convert_min_per_thread elements */
    int run = threads;
    if (!forced && (size_t)run > n / mxp__convert_min_per_thread)
        run = n / mxp__convert_min_per_thread > 1 ? (int)(n / mxp__convert_min_per_thread) : 1;
    char th[16];
    if (run == threads) snprintf(th, sizeof th, "%d%s", threads, spawn ? "s" : "");
    else snprintf(th, sizeof th, "%d>%d", threads, run);
    work w = {fn, (mxp_dtype)c->dst, (mxp_dtype)c->src, lib, dst, src, n, ib, ob, {c->sat, 42, 0, false}, run, spawn};
    const double ns = bu_time_median(run_work, &w);
    const double base = memcpy_ns(n * ib, n * ob);
    /* the limit on this row's own buffers, right after it (not cached: the VM's speed drifts) */
    const double lim = bl_limit_ns_on(dst, src, n * ib, n * ob);
    /* and the limit loop run as the library runs this row: interleaved streams where it
     * interleaves (src/convert.c), else the same one pass */
    const bool inter = lib && mxp__cvt_streams_apply((mxp_dtype)c->dst, (mxp_dtype)c->src, dst, n);
    const double lims = inter ? bl_limit_ns_on_streams(dst, src, n * ib, n * ob, mxp__cvt_streams) : lim;
    const double gbps = bu_gbps(n * (ib + ob), ns);
    const double ratio = ns > 0 ? base / ns : 0, lratio = ns > 0 ? lim / ns : 0, sratio = ns > 0 ? lims / ns : 0;
    if (csv) {
        printf("%s,%s,%s,%zu,%.4f,%.2f,%.2f,%.3f,%.4f,%.3f,%.4f,%.3f\n", c->name, name, th, n, ns / (double)n, gbps,
               bu_gbps(n * (ib + ob), base), ratio, lim / (double)n, lratio, lims / (double)n, sratio);
    } else {
        printf("%-16s %-10s %3s  2^%-3d %9.4f %8.2f %8.2f %7.2fx %9.4f %7.2fx %9.4f %7.2fx\n", c->name, name, th,
               (int)__builtin_ctzll(n), ns / (double)n, gbps, bu_gbps(n * (ib + ob), base), ratio,
               lim / (double)n, lratio, lims / (double)n, sratio);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    bool quick = false, scan = false, peers = false, thp = false;
    int streams = 0; /* --streams: mxp__cvt_streams for this run (0: the dispatcher's choice) */
    int pf_level = -1; /* --prefetch: mxp__avx512_prefetch for this run (-1: the dispatcher's choice) */
    int ahead = -1;    /* --ahead: mxp__avx512_ahead for this run (-1: the dispatcher's choice) */
    const char *only = NULL, *conv_only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = true;
        else if (strcmp(argv[i], "--csv") == 0) csv = true;
        else if (strcmp(argv[i], "--scan") == 0) scan = forced = true;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) conv_only = argv[++i];
        else if (strcmp(argv[i], "--peers") == 0) peers = true;
        else if (strcmp(argv[i], "--thp") == 0) thp = true;
        else if (strcmp(argv[i], "--relu") == 0) relu = true;
        else if (strcmp(argv[i], "--range") == 0 && i + 1 < argc && atof(argv[i + 1]) > 0.0) range = atof(argv[++i]);
        else if (strcmp(argv[i], "--normal") == 0 && i + 1 < argc && atof(argv[i + 1]) > 0.0) sigma = atof(argv[++i]);
        else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) only = argv[++i];
        else if (strcmp(argv[i], "--streams") == 0 && i + 1 < argc && atoi(argv[i + 1]) >= 1 &&
                 atoi(argv[i + 1]) <= MXP__CVT_STREAMS_MAX)
            streams = atoi(argv[++i]);
        else if (strcmp(argv[i], "--prefetch") == 0 && i + 1 < argc &&
                 (pf_level = strcmp(argv[i + 1], "off") == 0  ? MXP__PREFETCH_OFF
                             : strcmp(argv[i + 1], "l1") == 0 ? MXP__PREFETCH_L1
                             : strcmp(argv[i + 1], "l2") == 0 ? MXP__PREFETCH_L2
                                                              : -1) >= 0)
            i++;
        else if (strcmp(argv[i], "--ahead") == 0 && i + 1 < argc &&
                 (ahead = strcmp(argv[i + 1], "off") == 0 ? 0 : strcmp(argv[i + 1], "on") == 0 ? 1 : -1) >= 0)
            i++;
        else {
            fprintf(stderr,
                    "usage: %s [--quick] [--csv] [--isa NAME] [--only CONVERSION] [--peers] [--relu] [--range R]\n"
                    "       [--normal S] [--scan] [--streams S] [--prefetch off|l1|l2] [--ahead on|off] [--thp]\n",
                    argv[0]);
            return 2;
        }
    }
    static const int full_sizes[] = {12, 16, 20, 24, 26}, quick_sizes[] = {16, 26},
                     scan_sizes[] = {13, 14, 15, 16, 17, 18, 19, 20, 21, 22};
    const int *sizes = scan ? scan_sizes : quick ? quick_sizes : full_sizes;
    const int nsizes = scan ? 10 : quick ? 2 : 5;
    const size_t maxn = (size_t)1 << sizes[nsizes - 1];

    /* 64-byte aligned, as the limit loop's buffers (bench_limit.h); MXP_BENCH_OFFSET=k moves the
     * source k bytes (a multiple of 8) off a line boundary. A large malloc is 16 bytes past a page
     * boundary: until 2026-11-25 every 64-byte source load here split two cache lines, the limit
     * loop's did not. */
    const char *off_env = getenv("MXP_BENCH_OFFSET");
    const size_t off = off_env ? (size_t)strtoul(off_env, NULL, 10) / 8 * 8 % 64 : 0;
    /* --thp: 2 MiB aligned and sized, so that every page of them can be a huge one */
    const size_t align = thp ? (size_t)2 << 20 : 64;
    const size_t srcsize = (maxn * 8 + 64 + align - 1) / align * align;
    const size_t dstsize = (maxn * 8 + align - 1) / align * align;
    unsigned char *srcbuf = aligned_alloc(align, srcsize), *dst = aligned_alloc(align, dstsize);
    unsigned char *src = srcbuf ? srcbuf + off : NULL;
    if (!srcbuf || !dst) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    const char *pages = "as malloc gives them";
    if (thp) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        pages = madvise(srcbuf, srcsize, MADV_HUGEPAGE) == 0 && madvise(dst, dstsize, MADV_HUGEPAGE) == 0
                    ? "transparent huge pages requested (madvise MADV_HUGEPAGE)"
                    : "transparent huge pages refused by madvise: as malloc gives them";
#else
        pages = "no transparent huge pages on this system: as malloc gives them";
#endif
    }
    memset(dst, 0, maxn * 8);
    char cpu[512];
    bl_cpu_name(cpu, sizeof cpu);
    /* the AVX-512 kernels' streaming prefetch is a per-CPU choice (dispatch.c): say which ran */
    const int has512 = mxp__kernels_for(MXP__ISA_AVX512) != NULL; /* also runs the dispatcher */
    if (pf_level >= 0) mxp__avx512_prefetch = pf_level; /* after the dispatcher set it (above) */
    static const char *const pf_names[] = {"off", "on (into L1, AMD Zen 5's scheme)", "on (into L2, Intel's scheme)"};
    const char *prefetch = pf_names[mxp__avx512_prefetch];
    if (streams) mxp__cvt_streams = streams; /* after the dispatcher set it (above) */
    if (ahead >= 0) mxp__avx512_ahead = ahead;
    if (csv) {
        printf("# CPU: %s\n", cpu);
        if (has512) printf("# AVX-512 streaming source prefetch: %s\n", prefetch);
        if (has512) printf("# 16-bit -> float8 stochastic range tests ahead: %s\n", mxp__avx512_ahead ? "on" : "off");
        printf("# source and destination pages: %s\n", pages);
        printf("# interleaved streams for large float32 -> narrow calls: %d\n", mxp__cvt_streams);
        if (sigma > 0.0) printf("# source data: N(0, %g^2)%s\n", sigma, relu ? ", half of it +0" : "");
        else printf("# source data: over [-%g, %g]%s\n", range, range, relu ? ", half of it +0" : "");
        printf("conversion,isa,threads,n,ns_per_elem,gbps,memcpy_gbps,ratio_to_memcpy,limit_ns_per_elem,ratio_to_limit,"
               "limit_s_ns_per_elem,ratio_to_limit_s\n");
    } else {
        printf("mixprec conversions; CPU: %s\nactive path %s; GB/s = bytes read + written per second;\n"
               "memcpy = GB/s of the memcpy-equivalent baseline, ratio = its time / conversion time;\n"
               "limit = ns/elem of a loop moving the same bytes (non-temporal stores out of cache, plain in\n"
               "cache; one thread), lim.ratio = its time / conversion time; limit.s, s.ratio: the same loop run\n"
               "as the library runs the row (interleaved streams where it interleaves, src/convert.c; else\n"
               "limit again) (all measured in this run)\n\n",
               cpu, mxp_isa());
        if (has512) printf("AVX-512 streaming source prefetch: %s (src/kernels/dispatch.c)\n\n", prefetch);
        if (has512)
            printf("16-bit -> float8 stochastic range tests ahead: %s (src/kernels/kernels.h)\n\n",
                   mxp__avx512_ahead ? "on" : "off");
        printf("source and destination pages: %s\n\n", pages);
        printf("interleaved streams for large float32 -> narrow calls: %d (src/convert.c)\n\n", mxp__cvt_streams);
        if (sigma > 0.0) printf("source data: N(0, %g^2)%s\n\n", sigma, relu ? ", half of it +0" : "");
        else printf("source data: over [-%g, %g]%s\n\n", range, range, relu ? ", half of it +0" : "");
        printf("%-16s %-10s %3s  %-5s %9s %8s %8s %8s %9s %8s %9s %8s\n", "conversion", "isa", "th", "n", "ns/elem",
               "GB/s", "memcpy", "ratio", "limit", "lim.ratio", "limit.s", "s.ratio");
    }
    for (size_t ci = 0; ci < NCONVS; ci++) {
        const conv *c = &convs[ci];
        if (scan && ci != 1 && ci != 2) continue; /* f32->bf16 and f16->f32 tell the threshold */
        if (conv_only && strncmp(c->name, conv_only, strlen(conv_only)) != 0) continue;
        fill_src(src, c->src, maxn);
        if (scan) {
            const mxp__kernels *k = mxp__kernels_active();
            if (only && strcmp(only, k->name) != 0) continue;
            for (int si = 0; si < nsizes; si++) {
                const size_t n = (size_t)1 << sizes[si];
                measure_work(c, k->name, k->cvt[c->dst][c->src][c->mode], true, 1, false, n, dst, src);
                measure_work(c, k->name, k->cvt[c->dst][c->src][c->mode], true, 2, true, n, dst, src);
                measure_work(c, k->name, k->cvt[c->dst][c->src][c->mode], true, 2, false, n, dst, src);
            }
            continue;
        }
        for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
            /* the ISA's own kernels, then the dispatched table where it differs */
            const mxp__kernels *tabs[2] = {mxp__kernels_own((mxp__isa_id)isa), mxp__kernels_for((mxp__isa_id)isa)};
            for (int v = 0; v < 2; v++) {
                const mxp__kernels *k = tabs[v];
                if (!k || (v == 1 && strcmp(k->name, tabs[0]->name) == 0)) continue;
                if (only && strcmp(only, k->name) != 0) continue;
                for (int si = 0; si < nsizes; si++)
                    for (int th = 1; th <= 2; th++) measure(c, k, th, (size_t)1 << sizes[si], dst, src);
            }
        }
        const mxp__cvt_fn peer = peer_for(c);
        if (peer && (!only || strcmp(only, "ggml-style") == 0 || peers))
            for (int si = 0; si < nsizes; si++) measure_fn(c, "ggml-style", peer, false, 1, (size_t)1 << sizes[si], dst, src);
    }
    free(srcbuf);
    free(dst);
    return 0;
}
