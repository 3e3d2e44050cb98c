/*
 * convert.c - mxp_convert / mxp_convert_ex: argument checks, then dispatch to the kernel table
 * (kernels.h), optionally over several threads.
 *
 * Work splitting: the element index i of the call is the stochastic-rounding index, so any
 * split gives the same bits as one call. Threads take contiguous chunks whose boundaries are
 * multiples of 64 elements (whole cache lines for every dtype, whole vectors for every ISA),
 * and no single kernel call ever straddles a multiple of 2^32 in the element index (a vector
 * kernel computes the stochastic-rounding key of the high index half once per call).
 */
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "kernels.h"
#include "pool.h"

/* A call is split over threads only for at least this many elements per thread (2 threads from
 * 2^23 elements). With the persistent workers (pool.c) a split costs a wake-up, not a thread
 * start: bench_convert --scan on the development VM (2 vCPUs) measured 1-8 us of overhead per
 * two-thread call with the pool against 38-43 us with a thread started and joined per call.
 * But even so, two threads were not faster than one anywhere from 2^13 to 2^22 elements there
 * (e.g. float32 -> bfloat16 at 2^19: 0.106 ns/element on one thread, 0.129 on two, load 2), so
 * the threshold stays where the thread-per-call measurement put it (bench/RESULTS.md). */
size_t mxp__convert_min_per_thread = (size_t)1 << 22;
/* Upper bound on the threads one call uses (requests above it are clamped). */
#define MXP__CONVERT_MAX_THREADS 64
/* Chunk boundaries are multiples of this many elements. */
#define MXP__CONVERT_CHUNK_ALIGN ((size_t)64)

typedef struct chunk {
    mxp__cvt_fn fn;
    mxp_dtype dt, st; /* the kernel's destination and source dtypes */
    unsigned char *dst;
    const unsigned char *src;
    size_t dsize, ssize;
    size_t begin, end; /* element indices of this call */
    mxp__cvt_args args;
} chunk;

/*
 * Interleaved streams (kernels.h, mxp__cvt_streams). One core streaming one array keeps fewer
 * memory requests in flight than it could: the loads of the next lines wait behind the vector
 * work on the current ones, and the hardware prefetcher follows one stream at a time within a
 * page. Cutting the range into S parts and taking MXP__CVT_STREAM_STEP elements of each in turn
 * keeps S streams going at once. Measured on the Intel Xeon of sessions 30-34 (bench_convert
 * --streams, bench/RESULTS.md "Session 34"), one thread at 2^26 elements, 4 streams of
 * 128-element steps against one pass: float32 -> float8 8-13% faster (avx512 table; 9-13% on the
 * avx2 one), float32 -> float16 / bfloat16 4-15%, float16 / bfloat16 -> float32 12-23%; two
 * threads gain as much. Steps of 256 elements gained less, 8 streams no more, steps of 1024 or
 * more nothing (the streams must alternate within the core's out-of-order window). Not applied
 * where it was measured to lose or not to gain: the float64 sources (20-40% slower: their
 * kernels pay a per-call setup), float8 -> float32 (a tie), float16 <-> bfloat16 (its kernel
 * then ignored args.stream), float16 / bfloat16 -> float8 (mixed: bfloat16 -> e4m3fn 13% faster
 * on the avx512 table, a tie on the avx2 one, its stochastic rounding up to 20% slower there).
 * On AMD Zen 4 (session 39; bench/RESULTS.md) 4 streams lost: float32 -> float8 nearest-even
 * 0.95-0.99x -> 0.75-0.83x of the one-pass limit, stochastic rounding 12-39% slower, the 16-bit
 * pairs within the noise, though the bare copy loop cut into 4 streams ran about 11% faster
 * there too; 2 streams or steps of 512 elements did no better. So Zen 4 keeps one pass, and so
 * does Zen 5, which has not measured it (dispatch.c).
 *
 * The destination is first brought to a 64-byte boundary by one plain call, so that every step
 * starts aligned (a misaligned step would do its own scalar head); the parts are multiples of
 * the step, so every step boundary keeps that alignment. Steps carry args.stream (their n is
 * far below the streaming threshold) and the last one is followed by one SFENCE.
 */
bool mxp__cvt_streams_apply(mxp_dtype dt, mxp_dtype st, const void *dst, size_t n)
{
    const size_t dsize = mxp_dtype_size(dt), ssize = mxp_dtype_size(st);
    const bool pair = st == MXP_FLOAT32 ? dsize < ssize : dt == MXP_FLOAT32 && ssize == 2;
    return mxp__cvt_streams > 1 && pair &&
           n >= (size_t)mxp__cvt_streams * 8 * MXP__CVT_STREAM_STEP && n * (dsize + ssize) >= mxp__nt_threshold &&
           (uintptr_t)dst % dsize == 0;
}

void mxp__cvt_run(mxp__cvt_fn fn, mxp_dtype dt, mxp_dtype st, void *dst, const void *src, size_t n,
                  const mxp__cvt_args *a)
{
    if (!mxp__cvt_streams_apply(dt, st, dst, n)) {
        fn(dst, src, n, a);
        return;
    }
    const size_t dsize = mxp_dtype_size(dt), ssize = mxp_dtype_size(st), step = MXP__CVT_STREAM_STEP;
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    const size_t head = (64 - (uintptr_t)d % 64) % 64 / dsize; /* < 64 / dsize elements */
    if (head) fn(d, s, head, a);
    const size_t S = (size_t)(mxp__cvt_streams < MXP__CVT_STREAMS_MAX ? mxp__cvt_streams : MXP__CVT_STREAMS_MAX);
    const size_t body = n - head, per = ((body + S - 1) / S + step - 1) / step * step;
    mxp__cvt_args as = *a;
    as.stream = true;
    for (size_t j = 0; j < per; j += step)
        for (size_t k = 0; k < S; k++) {
            const size_t b = head + k * per + j; /* this step: [b, e) */
            if (b >= n) break;
            size_t e = b + step;
            if (e > n) e = n;
            as.index0 = a->index0 + (uint64_t)b;
            fn(d + b * dsize, s + b * ssize, e - b, &as);
        }
#if defined(__x86_64__)
    _mm_sfence(); /* elsewhere no kernel stores non-temporally */
#endif
}

/* Every chunk runs with FP exceptions masked and restores MXCSR (kernels.h, mxp__fenv_enter). */
/* Run [begin, end) as kernel calls that never cross a multiple of 2^32 in the index. */
static void run_chunk(const chunk *c)
{
    const unsigned csr = mxp__fenv_enter();
    size_t i = c->begin;
    while (i < c->end) {
        uint64_t next = ((uint64_t)i | 0xFFFFFFFFull) + 1u; /* next multiple of 2^32 */
        size_t stop = (uint64_t)c->end < next ? c->end : (size_t)next;
        mxp__cvt_args a = c->args;
        a.index0 = c->args.index0 + (uint64_t)i;
        mxp__cvt_run(c->fn, c->dt, c->st, c->dst + i * c->dsize, c->src + i * c->ssize, stop - i, &a);
        i = stop;
    }
    mxp__fenv_leave(csr);
}

/* The chunks of one threaded call: chunk t is [t * per, min(n, (t + 1) * per)). */
typedef struct split {
    chunk whole;
    size_t per;
} split;

static void run_split_task(void *ctx, size_t t)
{
    const split *sp = (const split *)ctx;
    chunk c = sp->whole;
    c.begin = t * sp->per;
    c.end = sp->whole.end - c.begin > sp->per ? c.begin + sp->per : sp->whole.end;
    run_chunk(&c);
}

static const char *const float_names =
    "float64, float32, float16, bfloat16, float8_e4m3fn or float8_e5m2";

static mxp_status check_dtype(const char *fn, mxp_dtype d, const char *what)
{
    if ((unsigned)d < MXP_FLOAT_DTYPE_COUNT) return MXP_OK;
    if (mxp__dtype_valid(d))
        return mxp__fail(MXP_EINVAL, "%s: %s %s is not a floating dtype (expected %s)", fn, what,
                         mxp_dtype_name(d), float_names);
    return mxp__fail(MXP_EINVAL, "%s: %s %d is not a valid dtype (expected %s)", fn, what, (int)d,
                     float_names);
}

mxp_status mxp__check_opts(const char *fn, const mxp_convert_opts *opts)
{
    if (!opts) return MXP_OK;
    if (opts->rounding != MXP_ROUND_NEAREST_EVEN && opts->rounding != MXP_ROUND_STOCHASTIC)
        return mxp__fail(MXP_EINVAL,
                         "%s: opts->rounding = %d is not a rounding mode (expected "
                         "MXP_ROUND_NEAREST_EVEN or MXP_ROUND_STOCHASTIC)",
                         fn, (int)opts->rounding);
    if (opts->threads < 0)
        return mxp__fail(MXP_EINVAL, "%s: opts->threads = %d is negative (expected 0, 1 or a thread count)",
                         fn, opts->threads);
    return MXP_OK;
}

/* mxp_convert_ex, its messages headed by fn (the public function called; internal.h). */
mxp_status mxp__convert(const char *fn, void *dst, mxp_dtype dst_type, const void *src, mxp_dtype src_type,
                        size_t n, const mxp_convert_opts *opts)
{
    static const mxp_convert_opts defaults = {MXP_ROUND_NEAREST_EVEN, false, 0, 0};
    const mxp_convert_opts *o = opts ? opts : &defaults;
    mxp_status s;
    if ((s = check_dtype(fn, dst_type, "dst_type")) != MXP_OK) return s;
    if ((s = check_dtype(fn, src_type, "src_type")) != MXP_OK) return s;
    if ((s = mxp__check_opts(fn, opts)) != MXP_OK) return s;
    if (n == 0) return MXP_OK;
    if (!dst) return mxp__fail(MXP_EINVAL, "%s: dst is NULL with n = %zu", fn, n);
    if (!src) return mxp__fail(MXP_EINVAL, "%s: src is NULL with n = %zu", fn, n);

    const size_t dsize = mxp_dtype_size(dst_type), ssize = mxp_dtype_size(src_type);
    size_t dbytes, sbytes; /* n * size must fit in ptrdiff_t and not wrap the address space */
    if (!mxp__span_ok(dst, n, dsize, &dbytes) || !mxp__span_ok(src, n, ssize, &sbytes))
        return mxp__fail(MXP_EINVAL, "%s: n = %zu elements is past any possible buffer "
                         "(n * size exceeds PTRDIFF_MAX or wraps the address space)", fn, n);
    /* Overlap is allowed only as the very same buffer with equal element sizes. */
    const uintptr_t d0 = (uintptr_t)dst, s0 = (uintptr_t)src;
    const bool overlap = d0 < s0 + n * ssize && s0 < d0 + n * dsize;
    if (overlap && !(d0 == s0 && dsize == ssize))
        return mxp__fail(MXP_EINVAL, "%s: dst and src overlap (%s -> %s, n = %zu); only "
                         "in-place conversion between dtypes of the same size is allowed",
                         fn, mxp_dtype_name(src_type), mxp_dtype_name(dst_type), n);

    const int mode = o->rounding == MXP_ROUND_STOCHASTIC ? MXP__SR : MXP__RNE;
    chunk whole = {mxp__kernels_active()->cvt[dst_type][src_type][mode], dst_type, src_type,
                   (unsigned char *)dst, (const unsigned char *)src, dsize, ssize, 0, n,
                   {o->saturate, o->seed, 0, false}};

    /* How many threads: at most the request, at most one per MIN_PER_THREAD elements. */
    size_t nt = o->threads > 1 ? (size_t)o->threads : 1;
    if (nt > MXP__CONVERT_MAX_THREADS) nt = MXP__CONVERT_MAX_THREADS;
    if (nt > n / mxp__convert_min_per_thread) nt = n / mxp__convert_min_per_thread;
    if (nt <= 1) {
        run_chunk(&whole);
        return MXP_OK;
    }

    /* Contiguous chunks, boundaries at multiples of 64 elements, run by the calling thread and
     * the library's persistent workers (pool.c; the caller takes chunks too, so a worker that
     * cannot be started costs speed, never the result). */
    split sp = {whole, (n + nt - 1) / nt};
    sp.per = (sp.per + MXP__CONVERT_CHUNK_ALIGN - 1) / MXP__CONVERT_CHUNK_ALIGN * MXP__CONVERT_CHUNK_ALIGN;
    const size_t count = (n + sp.per - 1) / sp.per;
    mxp__pool_run(run_split_task, &sp, count, count - 1);
    return MXP_OK;
}

mxp_status mxp_convert(void *dst, mxp_dtype dst_type, const void *src, mxp_dtype src_type, size_t n)
{
    return mxp__convert("mxp_convert", dst, dst_type, src, src_type, n, NULL);
}

mxp_status mxp_convert_ex(void *dst, mxp_dtype dst_type, const void *src, mxp_dtype src_type,
                          size_t n, const mxp_convert_opts *opts)
{
    return mxp__convert("mxp_convert_ex", dst, dst_type, src, src_type, n, opts);
}
