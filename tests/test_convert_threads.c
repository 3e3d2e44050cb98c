/*
 * test_convert_threads.c - mxp_convert_ex over several threads (the persistent workers of
 * src/pool.c) against the scalar reference run in one piece.
 *
 *  - every floating pair, both rounding modes and both overflow modes, sizes 0 .. 20011 around
 *    the 64-element chunk boundaries, unaligned buffers, thread counts 1 .. 9 and 64, seeds and
 *    data varying: the same bits as the reference (stochastic rounding draws by element index);
 *  - concurrent callers: four threads converting at once, each with several threads, each
 *    checking its own results;
 *  - fork: a child of a process whose workers are running converts with threads and gets the
 *    reference's bits (the child has no workers until it starts its own), and so does the
 *    parent afterwards;
 *  - the pool itself: every task index runs exactly once, for any task and helper count, and
 *    the number of workers stays bounded;
 *  - interleaved streams (src/convert.c's mxp__cvt_run): how a large call is cut, with a
 *    recording kernel, and the bits, with the split forced on small arrays.
 * The split is forced on small arrays by lowering mxp__convert_min_per_thread (internal.h).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "kernels.h"
#include "mixprec.h"
#include "pool.h"
#include "test_util.h"

static void fill_bits(unsigned char *p, size_t bytes, uint64_t *state)
{
    for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(tu_rand64(state) >> 56);
}

/* float32 / float64 data in the narrow formats' range (plus whatever the random bits give for
 * the narrow sources), so that rounding really happens */
static void fill_src(unsigned char *p, int dt, size_t n, uint64_t *state)
{
    const size_t sz = mxp_dtype_size((mxp_dtype)dt);
    fill_bits(p, n * sz, state);
    for (size_t i = 0; i < n; i++) {
        const uint64_t r = tu_rand64(state);
        if (r % 4 == 0) continue; /* any pattern */
        if (dt == MXP_FLOAT32) {
            const uint32_t v = ((uint32_t)r & 0x807FFFFFu) | (uint32_t)(100 + (r >> 40) % 50) << 23;
            memcpy(p + 4 * i, &v, 4);
        } else if (dt == MXP_FLOAT64) {
            const uint64_t v = (r & 0x800FFFFFFFFFFFFFull) | (uint64_t)(1023 - 30 + (r >> 33) % 50) << 52;
            memcpy(p + 8 * i, &v, 8);
        }
    }
}

/* mxp_convert_ex(threads) of n elements against the reference in one call; returns the first
 * differing element or n. */
static size_t convert_vs_ref(int d, int s, const mxp_convert_opts *o, const unsigned char *src, size_t n,
                             unsigned char *got, unsigned char *want)
{
    const size_t ob = mxp_dtype_size((mxp_dtype)d);
    const mxp__cvt_args a = {o->saturate, o->seed, 0, false};
    const int mode = o->rounding == MXP_ROUND_STOCHASTIC ? MXP__SR : MXP__RNE;
    mxp__scalar_kernels()->cvt[d][s][mode](want, src, n, &a);
    memset(got, 0xA5, n * ob + 16);
    if (mxp_convert_ex(got, (mxp_dtype)d, src, (mxp_dtype)s, n, o) != MXP_OK) return 0;
    for (size_t g = 0; g < 16; g++)
        if (got[n * ob + g] != 0xA5) return 0; /* wrote past the end */
    /* NaN patterns compare as bits: every path gives the reference's */
    for (size_t i = 0; i < n; i++)
        if (memcmp(got + i * ob, want + i * ob, ob) != 0) return i;
    return n;
}

enum { MAXN = 20011 };

static void test_thread_counts(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 63, 64, 65, 127, 129, 1000, 4099, MAXN};
    static const int threads[] = {1, 2, 3, 4, 5, 7, 8, 9, 64};
    unsigned char *src = malloc(8 * MAXN + 3), *got = malloc(8 * MAXN + 19), *want = malloc(8 * MAXN);
    assert_non_null(src);
    assert_non_null(got);
    assert_non_null(want);
    const size_t saved = mxp__convert_min_per_thread;
    mxp__convert_min_per_thread = 64; /* split from 128 elements up */
    uint64_t rs = 0x9E3779B97F4A7C15ull;
    int calls = 0;
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
        for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++)
            for (int v = 0; v < 4; v++) {
                /* sizes and thread counts rotate with the pair, so every combination of them
                 * meets several pairs without running all of them for every pair */
                for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                    const size_t n = sizes[si];
                    const int t = threads[(size_t)(d * 7 + s * 3 + v + (int)si) % (sizeof threads / sizeof threads[0])];
                    const size_t so = 1 + (si + (size_t)v) % 3, dof = 1 + si % 3;
                    fill_src(src + so, s, n, &rs);
                    const mxp_convert_opts o = {v & 2 ? MXP_ROUND_STOCHASTIC : MXP_ROUND_NEAREST_EVEN, (v & 1) != 0,
                                                tu_rand64(&rs), t};
                    const size_t i = convert_vs_ref(d, s, &o, src + so, n, got + dof, want);
                    calls++;
                    if (i < n)
                        fail_msg("%s -> %s %s sat=%d n=%zu threads=%d seed=0x%llx: element %zu differs",
                                 mxp_dtype_name((mxp_dtype)s), mxp_dtype_name((mxp_dtype)d),
                                 o.rounding ? "SR" : "RNE", (int)o.saturate, n, t, (unsigned long long)o.seed, i);
                }
            }
    /* the same call at every thread count, stochastic float32 -> float16 and float64 -> e4m3fn */
    static const int pairs[2][2] = {{MXP_FLOAT16, MXP_FLOAT32}, {MXP_FLOAT8_E4M3FN, MXP_FLOAT64}};
    for (int p = 0; p < 2; p++) {
        fill_src(src + 1, pairs[p][1], MAXN, &rs);
        for (int t = 1; t <= 12; t++) {
            const mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, false, 12345, t};
            const size_t i = convert_vs_ref(pairs[p][0], pairs[p][1], &o, src + 1, MAXN, got + 2, want);
            if (i < MAXN) fail_msg("pair %d threads=%d: element %zu differs", p, t, i);
        }
    }
    mxp__convert_min_per_thread = saved;
    print_message("%d calls; %zu pool workers\n", calls, mxp__pool_workers());
    assert_true(mxp__pool_workers() <= 63);
    free(src);
    free(got);
    free(want);
}

/* Several threads calling mxp_convert_ex with threads > 1 at once. */
typedef struct caller {
    int id;
    int bad; /* calls that differed */
} caller;

static void *caller_main(void *p)
{
    caller *c = p;
    enum { N = 5000 };
    unsigned char *src = malloc(8 * N), *got = malloc(8 * N + 16), *want = malloc(8 * N);
    if (!src || !got || !want) {
        c->bad = -1;
    } else {
        uint64_t rs = 0x1234567ull + (uint64_t)c->id;
        for (int k = 0; k < 60; k++) {
            const int d = (c->id + k) % MXP_FLOAT_DTYPE_COUNT, s = (c->id * 5 + k / 6) % MXP_FLOAT_DTYPE_COUNT;
            fill_src(src, s, N, &rs);
            const mxp_convert_opts o = {k & 1 ? MXP_ROUND_STOCHASTIC : MXP_ROUND_NEAREST_EVEN, (k & 2) != 0,
                                        (uint64_t)k, 2 + (c->id + k) % 4};
            if (convert_vs_ref(d, s, &o, src, N, got, want) < N) c->bad++;
        }
    }
    free(src);
    free(got);
    free(want);
    return NULL;
}

static void test_concurrent_callers(void **state)
{
    (void)state;
    enum { NC = 4 };
    const size_t saved = mxp__convert_min_per_thread;
    mxp__convert_min_per_thread = 64;
    pthread_t tid[NC];
    caller cs[NC];
    for (int i = 0; i < NC; i++) {
        cs[i] = (caller){i, 0};
        assert_int_equal(pthread_create(&tid[i], NULL, caller_main, &cs[i]), 0);
    }
    for (int i = 0; i < NC; i++) assert_int_equal(pthread_join(tid[i], NULL), 0);
    mxp__convert_min_per_thread = saved;
    for (int i = 0; i < NC; i++)
        if (cs[i].bad) fail_msg("caller %d: %d calls differed from the reference", i, cs[i].bad);
}

/* A threaded conversion checked against the reference: 0 when equal. */
static int threaded_check(void)
{
    enum { N = 9000 };
    unsigned char *src = malloc(4 * N), *got = malloc(2 * N + 16), *want = malloc(2 * N);
    if (!src || !got || !want) return 2;
    uint64_t rs = 77;
    fill_src(src, MXP_FLOAT32, N, &rs);
    const mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, false, 99, 4};
    const int r = convert_vs_ref(MXP_FLOAT16, MXP_FLOAT32, &o, src, N, got, want) == N ? 0 : 1;
    free(src);
    free(got);
    free(want);
    return r;
}

static void test_fork(void **state)
{
    (void)state;
    const size_t saved = mxp__convert_min_per_thread;
    mxp__convert_min_per_thread = 64;
    assert_int_equal(threaded_check(), 0); /* the parent's workers exist now */
    assert_true(mxp__pool_workers() > 0);
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        /* no workers here until this call starts them; then the same bits */
        const size_t before = mxp__pool_workers();
        const int r = threaded_check();
        _exit(before != 0 ? 3 : r);
    }
    assert_true(pid > 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(threaded_check(), 0); /* the parent's pool still works */
    mxp__convert_min_per_thread = saved;
}

/* The pool: every task index exactly once, whatever the counts. */
typedef struct tally {
    unsigned hits[200];
} tally;
static void count_task(void *ctx, size_t i)
{
    tally *t = ctx;
    __atomic_fetch_add(&t->hits[i], 1u, __ATOMIC_RELAXED);
}

static void test_pool_tasks(void **state)
{
    (void)state;
    static const size_t counts[] = {0, 1, 2, 3, 17, 64, 200};
    static const size_t helpers[] = {0, 1, 2, 7, 62, 63, 100};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
        for (size_t hi = 0; hi < sizeof helpers / sizeof helpers[0]; hi++) {
            tally t;
            memset(&t, 0, sizeof t);
            mxp__pool_run(count_task, &t, counts[ci], helpers[hi]);
            for (size_t i = 0; i < 200; i++)
                if (t.hits[i] != (i < counts[ci] ? 1u : 0u))
                    fail_msg("count %zu helpers %zu: task %zu ran %u times", counts[ci], helpers[hi], i, t.hits[i]);
        }
    assert_true(mxp__pool_workers() <= 63);
}

/*
 * Interleaved streams (src/convert.c's mxp__cvt_run, kernels.h's mxp__cvt_streams).
 *
 * The split itself, with a kernel that records its calls: for every stream count, size around
 * the minimum and destination alignment, the calls cover [0, n) exactly once; each carries
 * index0 = the offset of its first element (stochastic rounding's index); after the head every
 * call starts on a 64-byte destination boundary, has args.stream set and is at most one step
 * long; the S parts are taken in turn (call k of a round belongs to part k). A call below the
 * streaming threshold, from a source other than float32, to a dtype as wide as the source, or
 * with a misaligned destination is one call with the caller's arguments.
 */
enum { REC_MAX = 4096 };
static struct rec {
    size_t off, n;
    mxp__cvt_args a;
} rec[REC_MAX];
static size_t nrec;
static const unsigned char *rec_base;
static size_t rec_size;
static void rec_kernel(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    (void)src;
    if (nrec < REC_MAX) rec[nrec] = (struct rec){(size_t)((unsigned char *)dst - rec_base) / rec_size, n, *a};
    nrec++;
}

static void check_split(int S, size_t n, size_t dalign, mxp_dtype dt)
{
    const size_t ds = mxp_dtype_size(dt), step = MXP__CVT_STREAM_STEP;
    unsigned char *buf = malloc(n * ds + 128);
    assert_non_null(buf);
    unsigned char *dst = (unsigned char *)(((uintptr_t)buf + 63) & ~(uintptr_t)63) + dalign;
    unsigned char *cover = calloc(n, 1);
    assert_non_null(cover);
    rec_base = dst;
    rec_size = ds;
    nrec = 0;
    const mxp__cvt_args a = {true, 99, 1000, false};
    mxp__cvt_run(rec_kernel, dt, MXP_FLOAT32, dst, buf, n, &a);
    assert_true(nrec > 0 && nrec <= REC_MAX);
    const bool split = nrec > 1;
    /* the head: at most one call, unstreamed, with the caller's arguments */
    size_t first = 0;
    if (split && (uintptr_t)dst % 64 != 0) {
        assert_int_equal(rec[0].off, 0);
        assert_int_equal(rec[0].n, (64 - (uintptr_t)dst % 64) / ds);
        assert_false(rec[0].a.stream);
        first = 1;
    }
    const size_t body = n - (first ? rec[0].n : 0), per = ((body + (size_t)S - 1) / (size_t)S + step - 1) / step * step;
    for (size_t c = 0; c < nrec; c++) {
        const struct rec *r = &rec[c];
        assert_true(r->off + r->n <= n && r->n > 0);
        for (size_t i = r->off; i < r->off + r->n; i++) {
            if (cover[i]) fail_msg("S=%d n=%zu align=%zu: element %zu converted twice", S, n, dalign, i);
            cover[i] = 1;
        }
        assert_int_equal(r->a.index0, 1000 + r->off);
        assert_true(r->a.saturate);
        assert_int_equal(r->a.seed, 99);
        if (!split) {
            assert_false(r->a.stream);
            continue;
        }
        if (c < first) continue;
        assert_true(r->a.stream);
        assert_true(r->n <= step);
        assert_int_equal((uintptr_t)(dst + r->off * ds) % 64, 0);
        /* part (offset - head) / per, at j = (offset - head) % per in it: the parts are taken in
         * turn, each round a step further into every part */
        const size_t head = first ? rec[0].n : 0, part = (r->off - head) / per, j = (r->off - head) % per;
        const size_t prev = c > first ? (rec[c - 1].off - head) / per : (size_t)S - 1;
        const size_t pj = c > first ? (rec[c - 1].off - head) % per : j - step;
        const bool next = c == first ? part == 0 && j == 0 : part == 0 ? j == pj + step : part == prev + 1 && j == pj;
        if (!next) fail_msg("S=%d n=%zu: call %zu takes part %zu at %zu after part %zu at %zu", S, n, c, part, j, prev, pj);
    }
    for (size_t i = 0; i < n; i++)
        if (!cover[i]) fail_msg("S=%d n=%zu align=%zu: element %zu never converted", S, n, dalign, i);
    free(cover);
    free(buf);
}

static void test_streams_split(void **state)
{
    (void)state;
    const int saved_s = mxp__cvt_streams;
    const size_t saved_t = mxp__nt_threshold;
    mxp__nt_threshold = 1;
    static const int counts[] = {2, 3, 4, 7, 16};
    static const mxp_dtype dts[] = {MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        const int S = counts[ci];
        mxp__cvt_streams = S;
        const size_t min = (size_t)S * 8 * MXP__CVT_STREAM_STEP;
        const size_t sizes[] = {min - 1, min, min + 1, min + 63, 3 * min + 129, 20011};
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
            for (size_t di = 0; di < 4; di++)
                for (size_t al = 0; al < 64; al += 2) {
                    const mxp_dtype dt = dts[di];
                    if (al % mxp_dtype_size(dt)) continue;
                    if (sizes[si] * (size_t)S > 3 * 20011 && al > 8) continue; /* keep it short */
                    check_split(S, sizes[si], al, dt);
                    /* split exactly when the rules say so */
                    if ((nrec > 1) != (sizes[si] >= min)) fail_msg("S=%d n=%zu: %zu calls", S, sizes[si], nrec);
                }
    }
    /* one call: below the threshold, not from float32, widening, misaligned destination */
    mxp__cvt_streams = 4;
    unsigned char *buf = malloc(8 * 20000 + 64);
    assert_non_null(buf);
    const mxp__cvt_args a = {false, 1, 7, false};
    /* {dst, src, threshold 0 = lowered, split expected} */
    static const struct {
        mxp_dtype d, s;
        bool high, split;
    } cases[] = {
        {MXP_FLOAT8_E4M3FN, MXP_FLOAT32, true, false}, /* below the threshold */
        {MXP_FLOAT8_E4M3FN, MXP_FLOAT64, false, false}, {MXP_FLOAT64, MXP_FLOAT32, false, false},
        {MXP_FLOAT32, MXP_FLOAT8_E4M3FN, false, false}, {MXP_BFLOAT16, MXP_FLOAT16, false, false},
        {MXP_FLOAT8_E5M2, MXP_BFLOAT16, false, false},  {MXP_FLOAT32, MXP_FLOAT16, false, true},
    };
    rec_base = buf;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mxp__nt_threshold = cases[c].high ? (size_t)1 << 40 : 1;
        rec_size = mxp_dtype_size(cases[c].d);
        nrec = 0;
        mxp__cvt_run(rec_kernel, cases[c].d, cases[c].s, buf, buf, 20000, &a);
        if ((nrec > 1) != cases[c].split)
            fail_msg("%s -> %s: %zu calls", mxp_dtype_name(cases[c].s), mxp_dtype_name(cases[c].d), nrec);
    }
    mxp__nt_threshold = 1;
    rec_size = 2;
    rec_base = buf + 1;
    nrec = 0;
    mxp__cvt_run(rec_kernel, MXP_FLOAT16, MXP_FLOAT32, buf + 1, buf, 20000, &a);
    assert_int_equal(nrec, 1);
    assert_int_equal(rec[0].n, 20000);
    assert_int_equal(rec[0].a.index0, 7);
    assert_false(rec[0].a.stream);
    free(buf);
    mxp__cvt_streams = saved_s;
    mxp__nt_threshold = saved_t;
}

/* The bits: mxp_convert_ex with the split forced on small arrays (threshold lowered, 2 to 16
 * streams, one and three threads) against the scalar reference in one piece, every pair the
 * split applies to (float32 -> narrow, float16 / bfloat16 -> float32), both
 * rounding and overflow modes, destinations at every small misalignment. */
static void test_streams_bits(void **state)
{
    (void)state;
    const int saved_s = mxp__cvt_streams;
    const size_t saved_t = mxp__nt_threshold, saved_m = mxp__convert_min_per_thread;
    mxp__nt_threshold = 1;
    mxp__convert_min_per_thread = 4096;
    enum { N = 3 * 16 * 8 * 128 + 77 };
    unsigned char *src = malloc(4 * N + 8), *got = malloc(4 * N + 19 + 64), *want = malloc(4 * N);
    assert_non_null(src);
    assert_non_null(got);
    assert_non_null(want);
    uint64_t rs = 0xC0FFEEull;
    static const int counts[] = {2, 4, 5, 16};
    static const mxp_dtype pairs[][2] = {
        {MXP_FLOAT16, MXP_FLOAT32}, {MXP_BFLOAT16, MXP_FLOAT32}, {MXP_FLOAT8_E4M3FN, MXP_FLOAT32},
        {MXP_FLOAT8_E5M2, MXP_FLOAT32}, {MXP_FLOAT32, MXP_FLOAT16}, {MXP_FLOAT32, MXP_BFLOAT16}};
    enum { NP = sizeof pairs / sizeof pairs[0] };
    int calls = 0;
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
        for (size_t di = 0; di < NP; di++)
            for (int v = 0; v < 4; v++) {
                mxp__cvt_streams = counts[ci];
                const size_t n = N - (size_t)(v * 1000) - ci * 3, dof = (di + (size_t)v + ci) % 5,
                             so = (size_t)v % 3;
                const mxp_dtype dt = pairs[di][0], st = pairs[di][1];
                assert_true(mxp__cvt_streams_apply(dt, st, got, n)); /* n and the rule */
                fill_src(src + so, st, n, &rs);
                const mxp_convert_opts o = {v & 2 ? MXP_ROUND_STOCHASTIC : MXP_ROUND_NEAREST_EVEN, (v & 1) != 0,
                                            tu_rand64(&rs), 1 + 2 * (int)(ci % 2)};
                const size_t i = convert_vs_ref(dt, st, &o, src + so, n, got + dof, want);
                calls++;
                if (i < n)
                    fail_msg("%s -> %s %s sat=%d n=%zu streams=%d threads=%d dst+%zu: element %zu differs",
                             mxp_dtype_name(st), mxp_dtype_name(dt), o.rounding ? "SR" : "RNE", (int)o.saturate, n,
                             counts[ci], o.threads, dof, i);
            }
    print_message("%d calls with interleaved streams on %s\n", calls, mxp_isa());
    mxp__cvt_streams = saved_s;
    mxp__nt_threshold = saved_t;
    mxp__convert_min_per_thread = saved_m;
    free(src);
    free(got);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_tasks),
        cmocka_unit_test(test_thread_counts),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_streams_split),
        cmocka_unit_test(test_streams_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
