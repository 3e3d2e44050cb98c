/*
 * test_stress.c - two threads, each making a long random mix of calls to every public function
 * (dtype names and parsing, conversions, policy parse / format / validate / casts, the global
 * default policy and backend, policy maps including text and files, trees and tensors, loss-scale
 * states, save / restore, select, the finite checks and unscaling), with random valid and
 * invalid arguments: NULL pointers, bad enums, n = SIZE_MAX, overlapping buffers, malformed
 * text, bad scales.
 *
 * Asserted for every call:
 *   - nothing crashes, traps or leaks (run it under ASan/UBSan, valgrind, helgrind);
 *   - a failing call (a status other than MXP_OK, -1 from a formatter, false from a bool pass
 *     given a bad argument) leaves a non-empty message (the message is cleared before each call);
 *   - its outputs are untouched (they are filled with a sentinel before the call);
 *   - the messages a thread reads are its own: every malformed token a thread makes up carries
 *     its tag ("zqT0" / "zqT1"), messages that quote such a token quote the caller's, and the
 *     other thread's tag never shows up.
 * Both threads also read one shared policy map (get / match / count / entry / format / equal are
 * documented as safe with other readers, the lookup cache included) and set the process-wide
 * default policy and backend (documented thread-safe).
 *
 * MXP_STRESS_CALLS sets the total number of calls (both threads together); the default keeps the
 * test at a few seconds in Release and reasonable under the sanitizers:
 *     MXP_STRESS_CALLS=1000000 ./build/tests/test_stress
 */
#include <float.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mixprec.h"
#include "test_util.h"

/* Some calls rightly ask for absurd allocations (a borrowed view of 2^63 bytes cast into an
 * owned tree) and must get MXP_ENOMEM; AddressSanitizer aborts on those instead of returning
 * NULL unless told otherwise. (Ignored without ASan.) */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

#define DEFAULT_CALLS 40000
enum { BUF = 512 }; /* elements in each scratch buffer (8 bytes each at most) */

typedef struct worker {
    int id;
    uint64_t rng;
    size_t calls;
    char tag[8], other[8]; /* "zqT0" / "zqT1" */
    const mxp_policy_map *shared;
    char path[256];        /* this thread's temp file for save / load */
    /* owned state, changed by the calls */
    mxp_tree *tree;
    mxp_policy_map *map;
    mxp_loss_scale ls;
    /* results */
    size_t failures, failed_calls, ok_calls;
    char first[768];
    /* scratch: two buffers that may be used overlapping (one array) and a sentinel copy */
    unsigned char mem[4 * BUF * 8], keep[4 * BUF * 8];
} worker;

static uint64_t rnd(worker *w) { return tu_rand64(&w->rng); }
static size_t pick(worker *w, size_t n) { return (size_t)(rnd(w) % n); }
static bool coin(worker *w) { return rnd(w) & 1; }

static void failf(worker *w, const char *fmt, ...)
{
    va_list ap;
    if (w->failures++ == 0) {
        va_start(ap, fmt);
        vsnprintf(w->first, sizeof w->first, fmt, ap);
        va_end(ap);
    }
}

/* Sentinel-fill the scratch memory and remember it. */
static void arm(worker *w)
{
    for (size_t i = 0; i < sizeof w->mem; i++) w->mem[i] = (unsigned char)(0xA5 ^ (i * 7));
    memcpy(w->keep, w->mem, sizeof w->mem);
    mxp_clear_error();
}

static bool untouched(const worker *w) { return memcmp(w->mem, w->keep, sizeof w->mem) == 0; }

/* The checks after a call that failed (or is known to have had a bad argument). */
static void failed(worker *w, const char *op, mxp_status st, bool outputs_untouched)
{
    const char *m = mxp_last_error();
    w->failed_calls++;
    if (st == MXP_OK) failf(w, "%s: MXP_OK where a failure was due", op);
    if (!m || !*m) failf(w, "%s: failed (%s) with an empty message", op, mxp_status_name(st));
    else if (strstr(m, w->other)) failf(w, "%s: message of the other thread: '%s'", op, m);
    if (!outputs_untouched) failf(w, "%s: failed (%s) but changed its outputs", op, mxp_status_name(st));
}

/* After a call: status OK, or a failure that is checked as above. */
static void check(worker *w, const char *op, mxp_status st)
{
    if (st == MXP_OK) w->ok_calls++;
    else failed(w, op, st, untouched(w));
}

/* The message of the last failure quotes this thread's made-up token. */
static void names_own_token(worker *w, const char *op)
{
    if (!strstr(mxp_last_error(), w->tag))
        failf(w, "%s: message does not quote the bad token %s: '%s'", op, w->tag, mxp_last_error());
}

/* ---- random arguments ------------------------------------------------------------------- */

static mxp_dtype any_dtype(worker *w)
{
    static const int odd[] = {-1, -100, MXP_DTYPE_COUNT, MXP_DTYPE_COUNT + 5, 1 << 20};
    if (pick(w, 8) == 0) return (mxp_dtype)odd[pick(w, 5)];
    return (mxp_dtype)pick(w, MXP_DTYPE_COUNT);
}

static mxp_dtype float_dtype(worker *w) { return (mxp_dtype)pick(w, MXP_FLOAT_DTYPE_COUNT); }

static size_t any_n(worker *w)
{
    switch (pick(w, 10)) {
    case 0: return 0;
    case 1: return SIZE_MAX;
    case 2: return SIZE_MAX / 2 + 1;
    case 3: return (size_t)PTRDIFF_MAX + 1;
    default: return pick(w, BUF + 1);
    }
}

static float any_scale(worker *w)
{
    static const float s[] = {65536.0f, 1.0f, 0.5f, 3.0f, 0x1p100f, 0.0f, -2.0f, -0.0f,
                              0x1p-149f, 1e38f};
    switch (pick(w, 14)) {
    case 0: return tu_f32(0x7FC00000u);  /* NaN */
    case 1: return tu_f32(0x7F800000u);  /* inf */
    case 2: return tu_f32(0xFF800000u);  /* -inf */
    case 3: return tu_f32((uint32_t)rnd(w));
    default: return s[pick(w, 10)];
    }
}

/* A pointer into the scratch memory (unaligned often), or NULL. */
static void *any_ptr(worker *w)
{
    if (pick(w, 12) == 0) return NULL;
    return w->mem + pick(w, sizeof w->mem / 2);
}

static void fill_random(worker *w, void *p, size_t bytes)
{
    unsigned char *b = p;
    for (size_t i = 0; i < bytes; i++) b[i] = (unsigned char)rnd(w);
}

/* A text that is valid for `kind` or a made-up one that carries the thread's tag. */
static const char *policy_text(worker *w, char *buf, size_t cap)
{
    static const char *const good[] = {"p=f32,c=f16,o=f32", "mixed_bfloat16", "half", "float32",
                                       "c=bf16", "p={:f, 32},c={:f, 16}", "int8_from_mixed_bfloat16",
                                       "bfloat16"};
    static const char *const bad[] = {"c=%s", "p=f32,%s=f16", "%s", "p=f32,c=f16,o=%s", "q=%s"};
    if (coin(w)) return good[pick(w, 8)];
    snprintf(buf, cap, bad[pick(w, 5)], w->tag);
    return buf;
}

/* ---- the operations ---------------------------------------------------------------------- */

static void op_status_dtype(worker *w)
{
    char text[64];
    arm(w);
    (void)mxp_status_name((mxp_status)(int)(pick(w, 30) - 10));
    (void)mxp_version();
    (void)mxp_version_number();
    (void)mxp_isa();
    (void)mxp_isa_requested();
    (void)mxp_isa_fallback();
    mxp_dtype d = any_dtype(w);
    const char *name = mxp_dtype_name(d);
    if (!name) failf(w, "mxp_dtype_name(%d) returned NULL", (int)d);
    (void)mxp_dtype_size(d);
    (void)mxp_dtype_is_floating(d);
    static const char *const good[] = {"float16", "f32", "bf16", "float64", "fp8_e4m3", "int8", "{:f, 16}"};
    mxp_dtype *out = (mxp_dtype *)(void *)w->mem; /* sentinel-filled */
    const char *t = good[pick(w, 7)];
    if (coin(w)) {
        snprintf(text, sizeof text, "%s%s", coin(w) ? "f" : "", w->tag);
        t = text;
    }
    mxp_status st = mxp_dtype_parse(pick(w, 20) ? t : NULL, pick(w, 20) ? out : NULL);
    check(w, "mxp_dtype_parse", st);
    if (st == MXP_EPARSE && t == text) names_own_token(w, "mxp_dtype_parse");
}

static void op_convert(worker *w)
{
    arm(w);
    mxp_dtype dt = pick(w, 6) ? float_dtype(w) : any_dtype(w), st = pick(w, 6) ? float_dtype(w) : any_dtype(w);
    size_t n = any_n(w);
    void *dst = any_ptr(w), *src = any_ptr(w);
    if (coin(w) && dst && src) { /* disjoint halves, the usual case */
        dst = w->mem + pick(w, 64);
        src = w->mem + sizeof w->mem / 2 + pick(w, 64);
        fill_random(w, src, sizeof w->mem / 2 - 64);
        memcpy(w->keep, w->mem, sizeof w->mem);
    }
    mxp_convert_opts o = {coin(w) ? MXP_ROUND_NEAREST_EVEN : MXP_ROUND_STOCHASTIC, coin(w), rnd(w),
                          (int)pick(w, 3)};
    if (pick(w, 10) == 0) o.rounding = (mxp_rounding)7;
    if (pick(w, 10) == 0) o.threads = -1;
    mxp_status s = pick(w, 3) ? mxp_convert_ex(dst, dt, src, st, n, pick(w, 4) ? &o : NULL)
                              : mxp_convert(dst, dt, src, st, n);
    check(w, "mxp_convert", s);
}

static void op_policy(worker *w)
{
    char text[64];
    arm(w);
    mxp_policy *p = (mxp_policy *)(void *)w->mem;
    const char *t = policy_text(w, text, sizeof text);
    mxp_status st = mxp_policy_parse(pick(w, 30) ? t : NULL, pick(w, 30) ? p : NULL);
    check(w, "mxp_policy_parse", st);
    if (st == MXP_EPARSE && strstr(t, w->tag)) names_own_token(w, "mxp_policy_parse");
    mxp_policy q;
    if (st != MXP_OK) mxp_policy_parse("p=f32,c=bf16,o=f32", &q);
    else q = *p;
    if (pick(w, 4) == 0) q.compute = any_dtype(w);
    if (pick(w, 6) == 0) q.quant = (mxp_quant)(int)pick(w, 9);
    arm(w);
    char *buf = (char *)w->mem + 1000;
    size_t cap = pick(w, 80);
    int len = mxp_policy_format(pick(w, 20) ? &q : NULL, cap || coin(w) ? buf : NULL, cap);
    if (len < 0) failed(w, "mxp_policy_format", MXP_EINVAL, untouched(w));
    arm(w);
    st = mxp_policy_validate(pick(w, 20) ? &q : NULL);
    if (st != MXP_OK) failed(w, "mxp_policy_validate", st, true);
    (void)mxp_policy_equal(&q, pick(w, 5) ? &q : NULL);
    (void)mxp_quant_name((mxp_quant)(int)(pick(w, 12) - 2));
    /* process-wide settings: thread-safe by contract, any value (invalid ones are ignored) */
    if (pick(w, 8) == 0) mxp_set_default_policy(pick(w, 3) ? &q : NULL);
    if (pick(w, 8) == 0) mxp_set_backend((mxp_backend)(int)(pick(w, 5) - 1));
    (void)mxp_default_policy();
    (void)mxp_half_dtype(mxp_get_backend());
}

/* A small random tree (owned or borrowed leaves) for the cast operations. */
static mxp_tree *random_tree(worker *w, bool allow_int)
{
    mxp_tree *t = mxp_tree_new();
    if (!t) return NULL;
    size_t k = pick(w, 4);
    for (size_t i = 0; i < k; i++) {
        char name[32];
        snprintf(name, sizeof name, "layer_%zu/w", i);
        size_t shape[2] = {1 + pick(w, 5), 1 + pick(w, 5)};
        mxp_dtype d = allow_int && pick(w, 4) == 0 ? MXP_INT32 : float_dtype(w);
        if (mxp_tree_add(t, name, d, (int)pick(w, 3), shape, NULL) != MXP_OK)
            failf(w, "random_tree: add failed: %s", mxp_last_error());
    }
    return t;
}

static void op_policy_casts(worker *w)
{
    char text[64];
    mxp_policy p;
    if (mxp_policy_parse(policy_text(w, text, sizeof text), &p) != MXP_OK) mxp_policy_parse("half", &p);
    if (pick(w, 6) == 0) p.param = (mxp_dtype)99;
    mxp_tree *src = random_tree(w, true), *out = (mxp_tree *)(uintptr_t)0x1234;
    mxp_clear_error();
    mxp_status st;
    switch (pick(w, 5)) {
    case 0: st = mxp_policy_cast_to_param(pick(w, 10) ? &p : NULL, src, &out); break;
    case 1: st = mxp_policy_cast_to_compute(&p, pick(w, 10) ? src : NULL, &out); break;
    case 2: st = mxp_policy_cast_to_output(&p, src, pick(w, 10) ? &out : NULL); break;
    case 3: st = mxp_tree_cast_to_full(src, &out); break;
    default: st = mxp_tree_cast_to_half(pick(w, 10) ? src : NULL, &out); break;
    }
    if (st == MXP_OK) {
        w->ok_calls++;
        /* cast into a second tree of the same layout, or into a mismatched one */
        mxp_tree *dst = coin(w) ? out : random_tree(w, true);
        mxp_clear_error();
        switch (pick(w, 5)) {
        case 0: st = mxp_policy_cast_to_param_into(&p, dst, src); break;
        case 1: st = mxp_policy_cast_to_compute_into(&p, dst, src); break;
        case 2: st = mxp_policy_cast_to_output_into(&p, dst, pick(w, 10) ? src : NULL); break;
        case 3: st = mxp_tree_cast_to_full_into(dst, src); break;
        default: st = mxp_tree_cast_to_half_into(dst, src); break;
        }
        if (st != MXP_OK) failed(w, "policy cast into", st, true);
        if (dst != out) mxp_tree_free(dst);
        mxp_tree_free(out);
    } else {
        failed(w, "policy cast", st, out == (mxp_tree *)(uintptr_t)0x1234);
    }
    mxp_tree_free(src);
}

static void op_map(worker *w)
{
    char text[64], key[64], cfg[512];
    mxp_policy p, *pout = (mxp_policy *)(void *)w->mem;
    if (mxp_policy_parse(policy_text(w, text, sizeof text), &p) != MXP_OK) mxp_policy_parse("float32", &p);
    static const char *const keys[] = {"dense_0", "block_[0-9]+/attn", "encoder/.*", "a|b", "x?y",
                                       "(conv|dense)_[0-9]"};
    switch (pick(w, 14)) {
    case 0: { /* set: a valid key, a malformed regex with the tag, NULL */
        const char *k = keys[pick(w, 6)];
        if (coin(w)) {
            snprintf(key, sizeof key, coin(w) ? "(%s" : "%s[", w->tag);
            k = key;
        }
        mxp_clear_error();
        mxp_status st = mxp_policy_map_set(pick(w, 20) ? w->map : NULL, pick(w, 20) ? k : NULL,
                                           pick(w, 20) ? &p : NULL);
        if (st != MXP_OK) failed(w, "mxp_policy_map_set", st, true);
        if (st == MXP_EPARSE && k == key) names_own_token(w, "mxp_policy_map_set");
        break;
    }
    case 1:
        mxp_clear_error();
        if (mxp_policy_map_remove(w->map, keys[pick(w, 6)]) != MXP_OK)
            failed(w, "mxp_policy_map_remove", MXP_ENOTFOUND, true);
        break;
    case 2: case 3: case 4: { /* lookups on the own and the shared map */
        static const char *const paths[] = {"dense_0", "block_3/attn", "encoder/x/y", "a", "y",
                                            "conv_1", "nothing/here"};
        const mxp_policy_map *m = coin(w) ? w->shared : w->map;
        const char *k = NULL;
        arm(w);
        mxp_status st = coin(w) ? mxp_policy_map_get(m, paths[pick(w, 7)], pout)
                                : mxp_policy_map_match(m, paths[pick(w, 7)], pout, &k);
        check(w, "mxp_policy_map_get", st);
        break;
    }
    case 5: {
        const mxp_policy_map *m = coin(w) ? w->shared : w->map;
        const char *k = NULL;
        arm(w);
        check(w, "mxp_policy_map_entry",
              mxp_policy_map_entry(m, pick(w, mxp_policy_map_count(m) + 2), &k, pout));
        (void)mxp_policy_map_default(m, &p);
        (void)mxp_policy_map_equal(m, coin(w) ? w->shared : NULL);
        break;
    }
    case 6: {
        const mxp_policy_map *m = coin(w) ? w->shared : w->map;
        size_t cap = pick(w, 300), len = 77;
        arm(w);
        mxp_status st = mxp_policy_map_format(pick(w, 20) ? m : NULL, cap || coin(w) ? cfg : NULL, cap, &len);
        if (st != MXP_OK) failed(w, "mxp_policy_map_format", st, len == 77);
        break;
    }
    case 7: { /* parse a formatted map, or a broken line with the tag */
        size_t len = 0;
        if (mxp_policy_map_format(w->map, cfg, sizeof cfg, &len) != MXP_OK || len >= sizeof cfg) cfg[0] = 0;
        if (coin(w)) snprintf(cfg, sizeof cfg, "dense_0 = p=%s\n", w->tag);
        mxp_policy_map *out = (mxp_policy_map *)(uintptr_t)0x5678;
        mxp_clear_error();
        mxp_status st = mxp_policy_map_parse(pick(w, 20) ? cfg : NULL, &out);
        if (st == MXP_OK) mxp_policy_map_free(out);
        else {
            failed(w, "mxp_policy_map_parse", st, out == (mxp_policy_map *)(uintptr_t)0x5678);
            if (st == MXP_EPARSE && strstr(cfg, w->tag)) names_own_token(w, "mxp_policy_map_parse");
        }
        break;
    }
    case 8: { /* save and load through this thread's file, or a path that cannot exist */
        char bad[300];
        snprintf(bad, sizeof bad, "/nonexistent-%s/map.cfg", w->tag);
        const char *path = coin(w) ? w->path : bad;
        mxp_clear_error();
        mxp_status st = mxp_policy_map_save(w->map, path);
        if (st != MXP_OK) failed(w, "mxp_policy_map_save", st, true);
        mxp_policy_map *out = (mxp_policy_map *)(uintptr_t)0x5678;
        mxp_clear_error();
        st = mxp_policy_map_load(path, &out);
        if (st == MXP_OK) mxp_policy_map_free(out);
        else failed(w, "mxp_policy_map_load", st, out == (mxp_policy_map *)(uintptr_t)0x5678);
        break;
    }
    case 9: { /* apply to a few layers with a selection */
        static const mxp_layer layers[] = {{"dense_0", "dense"}, {"bn_0", "batch_norm"},
                                           {"dense_1", "dense"}, {"drop", "dropout"}};
        static const char *const ops[] = {"batch_norm", "dense"};
        mxp_layer_select sel = {NULL, 0, NULL, 0, NULL, NULL};
        if (coin(w)) {
            sel.except = ops;
            sel.n_except = 1 + pick(w, 2);
        }
        size_t applied = 999;
        mxp_clear_error();
        mxp_status st = mxp_policy_map_apply(pick(w, 20) ? w->map : NULL, pick(w, 20) ? layers : NULL,
                                             4, &p, coin(w) ? &sel : NULL, &applied);
        if (st != MXP_OK) failed(w, "mxp_policy_map_apply", st, applied == 999);
        break;
    }
    case 10:
        mxp_clear_error();
        if (mxp_policy_map_set_cache_capacity(coin(w) ? w->map : NULL, pick(w, 3) ? pick(w, 64) : SIZE_MAX) !=
            MXP_OK)
            failed(w, "mxp_policy_map_set_cache_capacity", MXP_EINVAL, true);
        break;
    default: /* a fresh map now and then (new with or without a default; free) */
        if (pick(w, 4) == 0) {
            mxp_policy_map_free(w->map);
            w->map = mxp_policy_map_new(coin(w) ? &p : NULL);
            if (!w->map) failf(w, "mxp_policy_map_new returned NULL");
        }
        mxp_policy_map_free(NULL);
        break;
    }
}

static void op_tree(worker *w)
{
    char name[64];
    size_t shape[3] = {1 + pick(w, 6), 1 + pick(w, 6), pick(w, 3)};
    if (pick(w, 16) == 0) shape[0] = SIZE_MAX / 2 + 1; /* 2^63: refused (past PTRDIFF_MAX) */
    if (mxp_tree_count(w->tree) > 24) {
        mxp_tree_free(w->tree);
        w->tree = mxp_tree_new();
    }
    switch (pick(w, 8)) {
    case 0: case 1: { /* add, owned or borrowed; duplicates, bad dtypes, bad ndim, NULL name */
        if (pick(w, 4)) snprintf(name, sizeof name, "t%zu", pick(w, 40));
        else snprintf(name, sizeof name, "%s/dup", w->tag); /* added again and again: EEXIST */
        int ndim = (int)pick(w, 4) - (pick(w, 10) == 0 ? 3 : 0);
        if (pick(w, 10) == 0) ndim = 9;
        mxp_dtype d = any_dtype(w);
        size_t before = mxp_tree_count(w->tree);
        mxp_clear_error();
        mxp_status st;
        if (coin(w)) {
            st = mxp_tree_add(pick(w, 20) ? w->tree : NULL, pick(w, 20) ? name : NULL, d, ndim,
                              pick(w, 20) ? shape : NULL, coin(w) ? w->mem : NULL);
        } else { /* borrowed: the scratch memory is big enough for shapes up to 6x6x2 x 8 bytes */
            st = mxp_tree_add_borrowed(w->tree, name, d, ndim, shape, pick(w, 10) ? (void *)w->mem : NULL);
        }
        /* (borrowed leaves point into the worker's scratch memory, which outlives the tree) */
        if (st != MXP_OK) {
            failed(w, "mxp_tree_add", st, mxp_tree_count(w->tree) == before);
            if (st == MXP_EEXIST && strstr(name, w->tag)) names_own_token(w, "mxp_tree_add");
        }
        break;
    }
    case 2: {
        const mxp_tensor *t = (const mxp_tensor *)(uintptr_t)0x99;
        snprintf(name, sizeof name, "missing-%s", w->tag);
        mxp_clear_error();
        mxp_status st = mxp_tree_find(pick(w, 20) ? w->tree : NULL, coin(w) ? name : "t1", &t);
        if (st != MXP_OK) failed(w, "mxp_tree_find", st, t == (const mxp_tensor *)(uintptr_t)0x99);
        (void)mxp_tree_get(w->tree, name);
        (void)mxp_tree_at(w->tree, pick(w, 30));
        (void)mxp_tree_nbytes(w->tree);
        (void)mxp_tree_numel(w->tree);
        break;
    }
    case 3: {
        mxp_tree *out = (mxp_tree *)(uintptr_t)0x77;
        mxp_clear_error();
        mxp_status st = mxp_tree_clone(pick(w, 20) ? w->tree : NULL, &out);
        if (st == MXP_OK) mxp_tree_free(out);
        else failed(w, "mxp_tree_clone", st, out == (mxp_tree *)(uintptr_t)0x77);
        break;
    }
    case 4: case 5: {
        mxp_tree *out = (mxp_tree *)(uintptr_t)0x77;
        mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, coin(w), rnd(w), 0};
        if (pick(w, 8) == 0) o.rounding = (mxp_rounding)5;
        mxp_dtype d = pick(w, 5) ? float_dtype(w) : any_dtype(w);
        mxp_clear_error();
        mxp_status st = coin(w) ? mxp_tree_cast(w->tree, d, &out)
                                : mxp_tree_cast_ex(w->tree, d, coin(w) ? &o : NULL, &out);
        if (st != MXP_OK) {
            failed(w, "mxp_tree_cast", st, out == (mxp_tree *)(uintptr_t)0x77);
            break;
        }
        mxp_tree *dst = coin(w) ? out : random_tree(w, true);
        mxp_clear_error();
        st = coin(w) ? mxp_tree_cast_into(dst, w->tree, d) : mxp_tree_cast_into_ex(dst, w->tree, d, &o);
        if (st != MXP_OK) failed(w, "mxp_tree_cast_into", st, true);
        if (dst != out) mxp_tree_free(dst);
        mxp_tree_free(out);
        break;
    }
    case 6: { /* tensor views: cast_into between scratch buffers, sometimes overlapping */
        mxp_tensor a = {"a", float_dtype(w), (int)pick(w, 3), {shape[0] % 7, shape[1], 2}, any_ptr(w)};
        mxp_tensor b = {"b", pick(w, 5) ? float_dtype(w) : any_dtype(w), a.ndim, {a.shape[0], a.shape[1], 2},
                        any_ptr(w)};
        if (pick(w, 8) == 0) b.ndim = 11;
        arm(w);
        (void)mxp_tensor_numel(coin(w) ? &a : NULL);
        (void)mxp_tensor_nbytes(&b);
        check(w, "mxp_tensor_cast_into",
              mxp_tensor_cast_into(pick(w, 20) ? &b : NULL, &a, pick(w, 5) ? b.dtype : any_dtype(w), NULL));
        break;
    }
    default: /* the loss-scale passes over the tree */
        mxp_clear_error();
        (void)mxp_tree_all_finite(coin(w) ? w->tree : NULL);
        {
            float s = any_scale(w);
            bool ok = mxp_tree_unscale_check(w->tree, s);
            if (!ok && !(s > 0.0f && s <= FLT_MAX) && !*mxp_last_error())
                failf(w, "mxp_tree_unscale_check: bad scale %g without a message", (double)s);
        }
        mxp_tree *a = mxp_tree_new();
        mxp_clear_error();
        mxp_status st = mxp_tree_select(coin(w), w->tree, coin(w) ? w->tree : a, pick(w, 20) ? w->tree : NULL);
        if (st != MXP_OK) failed(w, "mxp_tree_select", st, true);
        mxp_tree_free(a);
        break;
    }
}

static int failing_reduce(int *flag, void *ctx)
{
    (void)ctx;
    *flag = 0;
    return 3;
}

static void op_loss_scale(worker *w)
{
    char text[MXP_LOSS_SCALE_TEXT_MAX + 32];
    mxp_loss_scale *out = (mxp_loss_scale *)(void *)w->mem;
    switch (pick(w, 7)) {
    case 0: {
        arm(w);
        mxp_status st = coin(w) ? mxp_loss_scale_static_ex(any_scale(w), pick(w, 20) ? out : NULL)
                                : mxp_loss_scale_dynamic_ex(any_scale(w), (int32_t)(pick(w, 5) - 1),
                                                            coin(w) ? 2.0f : any_scale(w),
                                                            coin(w) ? 1.0f : any_scale(w),
                                                            coin(w) ? tu_f32(0x7F800000u) : any_scale(w),
                                                            pick(w, 20) ? out : NULL);
        check(w, "mxp_loss_scale_*_ex", st);
        if (st == MXP_OK && mxp_loss_scale_validate(out) != MXP_OK)
            failf(w, "a checked constructor returned an invalid state: %s", mxp_last_error());
        break;
    }
    case 1: { /* the state machine on this thread's state; random edits */
        if (pick(w, 50) == 0) w->ls = coin(w) ? mxp_loss_scale_dynamic(any_scale(w)) : mxp_loss_scale_static(any_scale(w));
        if (pick(w, 50) == 0) w->ls = mxp_loss_scale_noop();
        if (pick(w, 50) == 0) w->ls.period = (int32_t)pick(w, 4);
        bool fin = coin(w);
        mxp_loss_scale before = w->ls;
        mxp_clear_error();
        mxp_status st = mxp_loss_scale_adjust_reduce(&w->ls, fin, pick(w, 10) ? NULL : failing_reduce, NULL,
                                                     coin(w) ? &fin : NULL);
        if (st != MXP_OK) failed(w, "mxp_loss_scale_adjust_reduce", st, memcmp(&before, &w->ls, sizeof before) == 0);
        if (st == MXP_EINVAL && mxp_loss_scale_is_valid(before))
            failf(w, "adjust_reduce refused a valid state: %s", mxp_last_error());
        if (!mxp_loss_scale_is_valid(w->ls)) w->ls = mxp_loss_scale_dynamic(1024.0f);
        (void)mxp_loss_scale_adjust(w->ls, coin(w));
        (void)mxp_loss_scale_at_min(w->ls);
        (void)mxp_loss_scale_scale(w->ls, 0.25f);
        break;
    }
    case 2: { /* save: snprintf semantics; NULL buffer with cap > 0 refused */
        size_t cap = pick(w, MXP_LOSS_SCALE_TEXT_MAX + 1);
        arm(w);
        char *buf = pick(w, 10) ? (char *)w->mem : NULL;
        int len = mxp_loss_scale_save(pick(w, 20) ? &w->ls : NULL, buf, cap);
        if (len < 0) failed(w, "mxp_loss_scale_save", MXP_EINVAL, untouched(w));
        break;
    }
    case 3: { /* restore a saved line, a damaged one with the tag, NULLs */
        mxp_loss_scale_save(&w->ls, text, sizeof text);
        if (coin(w)) {
            size_t len = strlen(text), at = pick(w, len + 1);
            snprintf(text + at, sizeof text - at, " %s=1", w->tag);
        }
        arm(w);
        mxp_status st = mxp_loss_scale_restore(pick(w, 20) ? text : NULL, pick(w, 20) ? out : NULL);
        check(w, "mxp_loss_scale_restore", st);
        if (st == MXP_EPARSE && strstr(text, w->tag) && !strstr(mxp_last_error(), w->tag))
            names_own_token(w, "mxp_loss_scale_restore");
        break;
    }
    case 4: {
        arm(w);
        mxp_status st = mxp_loss_scale_validate(pick(w, 20) ? (const mxp_loss_scale *)(void *)w->mem : NULL);
        if (st != MXP_OK) failed(w, "mxp_loss_scale_validate", st, true);
        (void)mxp_loss_scale_is_valid(*(const mxp_loss_scale *)(void *)w->mem);
        break;
    }
    default: { /* select over scratch memory: disjoint, identical, overlapping */
        arm(w);
        size_t n = any_n(w);
        if (n > 64 && n <= BUF) n = 64;
        void *o = any_ptr(w), *a = coin(w) ? o : any_ptr(w), *b = any_ptr(w);
        check(w, "mxp_select", mxp_select(coin(w), o, a, b, any_dtype(w), n));
        break;
    }
    }
}

static void op_finite(worker *w)
{
    arm(w);
    size_t n = any_n(w);
    void *x = any_ptr(w), *y = any_ptr(w);
    if (x && n <= BUF) fill_random(w, x, n * 8 < sizeof w->mem / 2 ? n * 8 : sizeof w->mem / 2);
    memcpy(w->keep, w->mem, sizeof w->mem);
    mxp_dtype d = pick(w, 4) ? float_dtype(w) : any_dtype(w);
    float s = any_scale(w);
    bool fin = true, *fp = pick(w, 20) ? &fin : NULL;
    mxp_clear_error();
    switch (pick(w, 6)) {
    case 0: check(w, "mxp_all_finite_s", mxp_all_finite_s(x, d, n, fp)); break;
    case 1: check(w, "mxp_unscale_check_s", mxp_unscale_check_s(x, d, n, s, fp)); break;
    case 2: {
        mxp_dtype dt = pick(w, 4) ? MXP_FLOAT32 : any_dtype(w);
        if (coin(w) && x && y) { /* disjoint: dst in the first half, src in the second */
            x = w->mem + pick(w, 16);
            y = w->mem + sizeof w->mem / 2 + pick(w, 16);
        }
        check(w, "mxp_unscale_check_into_s", mxp_unscale_check_into_s(x, dt, y, d, n, s, fp));
        break;
    }
    default: { /* the bool forms: a bad call must leave a message */
        bool bad_args = (n > 0 && (!x || n > BUF)) || (unsigned)d >= MXP_DTYPE_COUNT;
        bool r = pick(w, 3) == 0 ? mxp_all_finite(x, d, n)
                 : coin(w)      ? mxp_unscale_check(x, d, n, s)
                                : mxp_unscale_check_into(x, MXP_FLOAT32, y, d, n, s);
        if (!r && bad_args && !*mxp_last_error()) failf(w, "bool pass refused a bad call without a message");
        break;
    }
    }
}

static void (*const ops[])(worker *) = {op_status_dtype, op_convert, op_policy, op_policy_casts,
                                        op_map,          op_map,     op_tree,   op_tree,
                                        op_loss_scale,   op_finite,  op_finite};

static void *run(void *arg)
{
    worker *w = arg;
    w->tree = mxp_tree_new();
    w->map = mxp_policy_map_new(NULL);
    w->ls = mxp_loss_scale_dynamic(1024.0f);
    for (size_t i = 0; i < w->calls && w->failures < 50; i++) ops[pick(w, sizeof ops / sizeof ops[0])](w);
    mxp_tree_free(w->tree);
    mxp_policy_map_free(w->map);
    remove(w->path);
    return NULL;
}

static void test_two_threads(void **state)
{
    (void)state;
    size_t total = DEFAULT_CALLS;
    const char *env = getenv("MXP_STRESS_CALLS");
    if (env && *env) total = (size_t)strtoull(env, NULL, 10);
    /* The kernel tables are built once, under pthread_once, by the first call that needs them.
     * glibc's pthread_once is correct, but helgrind does not model its fast path and reports
     * the other thread's first read of the tables as a race; building them here, before the
     * threads start, keeps the helgrind report to the races it can judge. */
    (void)mxp_isa();
    mxp_policy p;
    assert_int_equal(mxp_policy_parse("p=f32,c=f16,o=f32", &p), MXP_OK);
    mxp_policy_map *shared = mxp_policy_map_new(NULL);
    assert_non_null(shared);
    assert_int_equal(mxp_policy_map_set(shared, "dense_0", &p), MXP_OK);
    assert_int_equal(mxp_policy_map_set(shared, "block_[0-9]+/attn", &p), MXP_OK);
    assert_int_equal(mxp_policy_map_set(shared, "encoder/.*", &p), MXP_OK);
    assert_int_equal(mxp_policy_map_set_cache_capacity(shared, 4), MXP_OK); /* refills often */
    worker *w[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        w[i] = calloc(1, sizeof *w[i]);
        assert_non_null(w[i]);
        w[i]->id = i;
        w[i]->rng = 0xC0FFEEull ^ ((uint64_t)i + 1) * 0x5851F42D4C957F2Dull; /* distinct streams */
        w[i]->calls = total / 2 + (i == 0 ? total % 2 : 0);
        snprintf(w[i]->tag, sizeof w[i]->tag, "zqT%d", i);
        snprintf(w[i]->other, sizeof w[i]->other, "zqT%d", 1 - i);
        w[i]->shared = shared;
        snprintf(w[i]->path, sizeof w[i]->path, "/tmp/mxp_stress_%ld_%d.cfg", (long)getpid(), i);
    }
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, run, w[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        print_message("thread %d: %zu calls, %zu succeeded, %zu failed as expected, %zu problems\n", i,
                      w[i]->calls, w[i]->ok_calls, w[i]->failed_calls, w[i]->failures);
        if (w[i]->failures) fail_msg("thread %d: %zu problems; first: %s", i, w[i]->failures, w[i]->first);
        assert_true(w[i]->failed_calls > w[i]->calls / 50); /* the invalid arguments did come */
        free(w[i]);
    }
    mxp_policy_map_free(shared);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_threads)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
