/*
 * test_bad_args.c - the bad-argument sweep over every public function (every MXP_API
 * declaration of include/mixprec.h's headers).
 *
 * The project rule (status.h): a bad call - a NULL pointer, an out-of-range enum or dtype, an
 * unsupported dtype pair, a size whose byte count overflows - gets the documented failure (a
 * status, false, -1, 0, NULL) and a message in mxp_last_error() that names the bad argument
 * (or quotes the bad value); it never crashes, aborts, prints, or writes through the other
 * arguments. Each sweep below calls its function once per bad argument with the others valid,
 * and checks what the function's header comment promises for that input:
 *   - the return value and status;
 *   - the message, cleared before the call so that a stale one cannot pass for it, must name
 *     the function called and contain a given word (the argument's name, or the name the
 *     message uses for it, or the bad value), as a whole word; for a NULL argument it must say
 *     "<word> is NULL", so that a message listing every pointer ("a, b and c must be
 *     non-NULL") does not pass;
 *   - output buffers given as valid pointers hold a canary pattern that must survive
 *     ("untouched on failure");
 *   - arguments documented to accept NULL (free functions, a NULL default policy, optional
 *     outputs) are called with NULL and must succeed.
 * Sizes: SIZE_MAX (and other counts whose byte size overflows) where a size argument exists;
 * enums: 99 and -1, plus valid dtypes of the wrong kind (an integer dtype where a floating one
 * is needed: the unsupported pairs).
 *
 * The sweep table (sweeps[]) has one row per public function; test_table_matches_headers reads
 * the installed headers (MXP_SOURCE_DIR, set by tests/CMakeLists.txt) and fails when a public
 * function has no row, or a row names no public function, so a new function without a sweep
 * fails the quick tests. Each row also runs as its own cmocka test, named after the function.
 */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mixprec.h"

/* ---- helpers ------------------------------------------------------------------------------ */

#define BAD_DTYPE ((mxp_dtype)99)
#define NEG_DTYPE ((mxp_dtype)-1)
#define CANARY    0xA5

/* True when msg contains word as a whole word: not preceded or followed by a letter, digit or
 * '_' (so "n" matches "n = 5" but not "nan", and "99" matches "dtype 99 is"). */
static bool has_word(const char *msg, const char *word)
{
    const size_t len = strlen(word);
    for (const char *p = strstr(msg, word); p; p = strstr(p + 1, word)) {
        const char before = p == msg ? ' ' : p[-1], after = p[len];
        const bool ident_before = before == '_' || (before >= '0' && before <= '9') ||
                                  ((before | 32) >= 'a' && (before | 32) <= 'z');
        const bool ident_after = after == '_' || (after >= '0' && after <= '9') ||
                                 ((after | 32) >= 'a' && (after | 32) <= 'z');
        if (!ident_before && !ident_after) return true;
    }
    return false;
}

/* True when msg says that `word` is the NULL one: "word is NULL", where word may carry an
 * index or a member ("layers[2] is NULL", "layers[2].path is NULL", "src->data is NULL"). A message that lists
 * several arguments ("a, b and c must be non-NULL") does not say which one was NULL. */
static bool names_null(const char *msg, const char *word)
{
    const size_t len = strlen(word);
    for (const char *p = strstr(msg, word); p; p = strstr(p + 1, word)) {
        const char before = p == msg ? ' ' : p[-1];
        if (before == '_' || (before >= '0' && before <= '9') || ((before | 32) >= 'a' && (before | 32) <= 'z'))
            continue;
        const char *q = p + len;
        if (*q == '[') {
            while (*q && *q != ']') q++;
            if (*q) q++;
        }
        if (*q == '.' || (q[0] == '-' && q[1] == '>'))
            for (q += *q == '.' ? 1 : 2; *q == '_' || ((*q | 32) >= 'a' && (*q | 32) <= 'z'); q++) continue;
        if (strncmp(q, " is NULL", 8) == 0) return true;
    }
    return false;
}

/* The function of the sweep row being run (run_row sets it). */
static const char *current_row = "";

/* The function a message about `call` must name, into buf: the row's function when the call
 * text names it (a call such as "borrowed ? mxp_tree_add_borrowed(...) : mxp_tree_add(...)"
 * names both), else the first identifier of the call that starts with "mxp_" (a sweep that
 * calls another function on purpose), else the row's function (a call through a helper macro
 * or a function pointer). */
static void called_function(const char *call, char *buf, size_t cap)
{
    const char *p = strstr(call, "mxp_");
    size_t n = 0;
    if (p)
        while (p[n] == '_' || (p[n] >= '0' && p[n] <= '9') || ((p[n] | 32) >= 'a' && (p[n] | 32) <= 'z'))
            n++;
    if (!p || has_word(call, current_row))
        snprintf(buf, cap, "%s", current_row);
    else
        snprintf(buf, cap, "%.*s", (int)n, p);
}

/* The current message must be non-empty, name the function called (called_function), and
 * contain `words`: '|'-separated alternatives, any one of
 * which suffices (e.g. "p|policy": the parameter p, which messages call the policy). A message
 * about a NULL argument must say which alternative is NULL (names_null). */
static void check_message(const char *call, int line, const char *words)
{
    const char *msg = mxp_last_error();
    if (!*msg) fail_msg("line %d: %s: no message in mxp_last_error()", line, call);
    /* MXP_TEST_VERBOSE=1 lists every message, to read them all at once */
    const char *verbose = getenv("MXP_TEST_VERBOSE");
    if (verbose && *verbose == '1') printf("line %d: %s\n    -> %s\n", line, call, msg);
    char fn[128];
    called_function(call, fn, sizeof fn);
    if (*fn && !has_word(msg, fn))
        fail_msg("line %d: %s: the message \"%s\" does not name the function %s", line, call, msg, fn);
    const bool null = has_word(msg, "NULL");
    char buf[128];
    for (const char *w = words; *w;) {
        const size_t n = strcspn(w, "|");
        snprintf(buf, sizeof buf, "%.*s", (int)n, w);
        if (null ? names_null(msg, buf) : has_word(msg, buf)) return;
        w += n;
        if (*w == '|') w++;
    }
    fail_msg("line %d: %s: the message \"%s\" does not %s %s", line, call, msg,
             null ? "say which is NULL of" : "name", words);
}

static void check_status(const char *call, int line, mxp_status got, mxp_status want,
                         const char *words)
{
    if (got != want)
        fail_msg("line %d: %s: got %s, want %s (message \"%s\")", line, call, mxp_status_name(got),
                 mxp_status_name(want), mxp_last_error());
    check_message(call, line, words);
}

/* The message is cleared before each call (comma operator), so only the call can set it. */
#define FAILS(want, words, call)                                                                   \
    check_status(#call, __LINE__, (mxp_clear_error(), (call)), (want), (words))
#define EINVAL(words, call) FAILS(MXP_EINVAL, words, call)
/* A call whose failure is a value (false, -1, 0, NULL): the value is compared with `want`. */
#define FAILS_AS(want, words, call)                                                                \
    do {                                                                                           \
        mxp_clear_error();                                                                         \
        if ((call) != (want))                                                                      \
            fail_msg("line %d: %s: not the documented failure value", __LINE__, #call);            \
        check_message(#call, __LINE__, (words));                                                   \
    } while (0)
/* A call documented to accept its arguments (NULL where allowed): status MXP_OK. */
#define ACCEPTS(call)                                                                              \
    do {                                                                                           \
        mxp_status s_ = (call);                                                                    \
        if (s_ != MXP_OK)                                                                          \
            fail_msg("line %d: %s: got %s (message \"%s\"), want MXP_OK", __LINE__, #call,         \
                     mxp_status_name(s_), mxp_last_error());                                       \
    } while (0)
/* A call documented to record no message. */
#define SILENT(call)                                                                               \
    do {                                                                                           \
        mxp_clear_error();                                                                         \
        (void)(call);                                                                              \
        if (*mxp_last_error())                                                                     \
            fail_msg("line %d: %s: recorded \"%s\"", __LINE__, #call, mxp_last_error());           \
    } while (0)

static void fill(void *p, size_t n) { memset(p, CANARY, n); }

static void check_untouched(const void *p, size_t n, const char *what, int line)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != CANARY)
            fail_msg("line %d: %s byte %zu written on failure (0x%02X)", line, what, i, b[i]);
}
#define UNTOUCHED(buf)    check_untouched((buf), sizeof(buf), #buf, __LINE__)
#define UNTOUCHED_N(p, n) check_untouched((p), (n), #p, __LINE__)

/* A tree holding "w" (float32 [2, 2], owned) and "i" (int32 [2], owned). */
static mxp_tree *small_tree(void)
{
    mxp_tree *t = mxp_tree_new();
    assert_non_null(t);
    const size_t s2[2] = {2, 2}, s1[1] = {2};
    const float w[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    const int32_t i[2] = {7, -7};
    assert_int_equal(mxp_tree_add(t, "w", MXP_FLOAT32, 2, s2, w), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "i", MXP_INT32, 1, s1, i), MXP_OK);
    return t;
}

/* The bytes of every leaf of t filled with the canary (the trees written on failure). */
static void fill_tree(mxp_tree *t)
{
    for (size_t i = 0; i < mxp_tree_count(t); i++)
        fill(mxp_tree_at(t, i)->data, mxp_tensor_nbytes(mxp_tree_at(t, i)));
}
static void check_tree_untouched(const mxp_tree *t, int line)
{
    for (size_t i = 0; i < mxp_tree_count(t); i++)
        check_untouched(mxp_tree_at(t, i)->data, mxp_tensor_nbytes(mxp_tree_at(t, i)),
                        mxp_tree_at(t, i)->name, line);
}

static const mxp_policy f32_policy = {MXP_FLOAT32, MXP_FLOAT32, MXP_FLOAT32, MXP_QUANT_NONE, 0};
static const mxp_policy f16_policy = {MXP_FLOAT32, MXP_FLOAT16, MXP_FLOAT32, MXP_QUANT_NONE, 0};

/* A few policies each invalid in one field, with the field's name (what the message must say). */
static const struct {
    mxp_policy p;
    const char *field;
} bad_policies[] = {
    {{BAD_DTYPE, MXP_FLOAT32, MXP_FLOAT32, MXP_QUANT_NONE, 0}, "param"},
    {{MXP_FLOAT32, NEG_DTYPE, MXP_FLOAT32, MXP_QUANT_NONE, 0}, "compute"},
    {{MXP_FLOAT32, MXP_FLOAT32, MXP_INT8, MXP_QUANT_NONE, 0}, "output"},
    {{MXP_FLOAT32, MXP_FLOAT32, MXP_FLOAT32, (mxp_quant)99, 0}, "quant"},
    {{MXP_FLOAT32, MXP_FLOAT32, MXP_FLOAT32, MXP_QUANT_FLOAT8, 0}, "amax_history_len"},
    {{MXP_FLOAT32, MXP_FLOAT32, MXP_FLOAT32, MXP_QUANT_FLOAT8, MXP_FP8_HISTORY_MAX + 1},
     "amax_history_len"},
    {{MXP_FLOAT32, MXP_FLOAT32, MXP_FLOAT32, MXP_QUANT_NONE, 5}, "amax_history_len"},
};
#define N_BAD_POLICIES (sizeof bad_policies / sizeof bad_policies[0])

static const mxp_convert_opts bad_rounding = {(mxp_rounding)99, false, 0, 0};
static const mxp_convert_opts bad_threads = {MXP_ROUND_NEAREST_EVEN, false, 0, -1};

/* ---- common.h, status.h, dtype.h ---------------------------------------------------------- */

static void sweep_version(void)
{
    /* no arguments: the documented results */
    assert_string_equal(mxp_version(), MXP_VERSION_STRING);
}

static void sweep_version_number(void)
{
    assert_int_equal(mxp_version_number(), MXP_VERSION_NUMBER);
}

static void sweep_status_name(void)
{
    assert_string_equal(mxp_status_name((mxp_status)99), "MXP_E?");
    assert_string_equal(mxp_status_name((mxp_status)-1), "MXP_E?");
    assert_string_equal(mxp_status_name((mxp_status)MXP_STATUS_COUNT), "MXP_E?");
}

static void sweep_last_error(void)
{
    mxp_clear_error();
    assert_non_null(mxp_last_error());
    assert_string_equal(mxp_last_error(), "");
}

static void sweep_clear_error(void)
{
    (void)mxp_dtype_size(BAD_DTYPE);
    EINVAL("text", mxp_dtype_parse(NULL, &(mxp_dtype){MXP_FLOAT32}));
    mxp_clear_error();
    assert_string_equal(mxp_last_error(), "");
}

static void sweep_dtype_name(void)
{
    assert_string_equal(mxp_dtype_name(BAD_DTYPE), "invalid");
    assert_string_equal(mxp_dtype_name(NEG_DTYPE), "invalid");
    assert_string_equal(mxp_dtype_name((mxp_dtype)MXP_DTYPE_COUNT), "invalid");
}

static void sweep_dtype_parse(void)
{
    mxp_dtype out;
    fill(&out, sizeof out);
    EINVAL("text", mxp_dtype_parse(NULL, &out));
    UNTOUCHED_N(&out, sizeof out);
    EINVAL("out", mxp_dtype_parse("f32", NULL));
    FAILS(MXP_EPARSE, "'f13'", mxp_dtype_parse("f13", &out));
    FAILS(MXP_EAMBIGUOUS, "'fp8'", mxp_dtype_parse("fp8", &out));
    UNTOUCHED_N(&out, sizeof out);
}

static void sweep_dtype_size(void)
{
    assert_int_equal(mxp_dtype_size(BAD_DTYPE), 0);
    assert_int_equal(mxp_dtype_size(NEG_DTYPE), 0);
}

static void sweep_dtype_is_floating(void)
{
    assert_false(mxp_dtype_is_floating(BAD_DTYPE));
    assert_false(mxp_dtype_is_floating(NEG_DTYPE));
    assert_false(mxp_dtype_is_floating(MXP_INT8));
}

/* ---- convert.h ---------------------------------------------------------------------------- */

static void sweep_convert(void)
{
    float src[4] = {1, 2, 3, 4};
    uint16_t dst[4];
    fill(dst, sizeof dst);
    EINVAL("dst", mxp_convert(NULL, MXP_FLOAT16, src, MXP_FLOAT32, 4));
    EINVAL("src", mxp_convert(dst, MXP_FLOAT16, NULL, MXP_FLOAT32, 4));
    EINVAL("dst_type", mxp_convert(dst, BAD_DTYPE, src, MXP_FLOAT32, 4));
    EINVAL("dst_type", mxp_convert(dst, NEG_DTYPE, src, MXP_FLOAT32, 4));
    EINVAL("src_type", mxp_convert(dst, MXP_FLOAT16, src, BAD_DTYPE, 4));
    EINVAL("src_type", mxp_convert(dst, MXP_FLOAT16, src, NEG_DTYPE, 4));
    EINVAL("dst_type", mxp_convert(dst, MXP_INT16, src, MXP_FLOAT32, 4));
    EINVAL("src_type", mxp_convert(dst, MXP_FLOAT16, src, MXP_INT32, 4));
    EINVAL("n", mxp_convert(dst, MXP_FLOAT16, src, MXP_FLOAT32, SIZE_MAX));
    EINVAL("n", mxp_convert(dst, MXP_FLOAT16, src, MXP_FLOAT32, SIZE_MAX / 2));
    /* a bad dtype is refused even with n == 0 */
    EINVAL("dst_type", mxp_convert(NULL, BAD_DTYPE, NULL, MXP_FLOAT32, 0));
    EINVAL("overlap", mxp_convert((char *)src + 2, MXP_FLOAT16, src, MXP_FLOAT32, 2));
    UNTOUCHED(dst);
    ACCEPTS(mxp_convert(NULL, MXP_FLOAT16, NULL, MXP_FLOAT32, 0));
}

static void sweep_convert_ex(void)
{
    float src[4] = {1, 2, 3, 4};
    uint16_t dst[4];
    fill(dst, sizeof dst);
    EINVAL("dst", mxp_convert_ex(NULL, MXP_FLOAT16, src, MXP_FLOAT32, 4, NULL));
    EINVAL("src", mxp_convert_ex(dst, MXP_FLOAT16, NULL, MXP_FLOAT32, 4, NULL));
    EINVAL("dst_type", mxp_convert_ex(dst, BAD_DTYPE, src, MXP_FLOAT32, 4, NULL));
    EINVAL("src_type", mxp_convert_ex(dst, MXP_FLOAT16, src, NEG_DTYPE, 4, NULL));
    EINVAL("src_type", mxp_convert_ex(dst, MXP_FLOAT16, src, MXP_BOOL, 4, NULL));
    EINVAL("n", mxp_convert_ex(dst, MXP_FLOAT16, src, MXP_FLOAT32, SIZE_MAX, NULL));
    EINVAL("opts->rounding", mxp_convert_ex(dst, MXP_FLOAT16, src, MXP_FLOAT32, 4, &bad_rounding));
    EINVAL("opts->threads", mxp_convert_ex(dst, MXP_FLOAT16, src, MXP_FLOAT32, 4, &bad_threads));
    UNTOUCHED(dst);
    ACCEPTS(mxp_convert_ex(dst, MXP_FLOAT16, src, MXP_FLOAT32, 4, NULL)); /* opts NULL: defaults */
}

static void sweep_isa(void) { assert_non_null(mxp_isa()); } /* no arguments */
static void sweep_isa_requested(void)
{
    (void)mxp_isa_requested();
} /* no arguments; NULL allowed */
static void sweep_isa_fallback(void) { (void)mxp_isa_fallback(); } /* no arguments; NULL allowed */

/* ---- tensor.h ----------------------------------------------------------------------------- */

static void sweep_tensor_numel(void)
{
    assert_int_equal(mxp_tensor_numel(NULL), 0);
    mxp_tensor t = {"t", MXP_FLOAT32, MXP_TENSOR_MAX_NDIM + 1, {1, 1, 1, 1, 1, 1, 1, 1}, NULL};
    assert_int_equal(mxp_tensor_numel(&t), 0);
    t.ndim = -1;
    assert_int_equal(mxp_tensor_numel(&t), 0);
    t.ndim = 2;
    t.shape[0] = SIZE_MAX;
    t.shape[1] = 2;
    assert_int_equal(mxp_tensor_numel(&t), 0);
}

static void sweep_tensor_nbytes(void)
{
    assert_int_equal(mxp_tensor_nbytes(NULL), 0);
    mxp_tensor t = {"t", BAD_DTYPE, 1, {4}, NULL};
    assert_int_equal(mxp_tensor_nbytes(&t), 0);
    t.dtype = MXP_FLOAT32;
    t.ndim = MXP_TENSOR_MAX_NDIM + 1;
    assert_int_equal(mxp_tensor_nbytes(&t), 0);
    t.ndim = 1;
    t.shape[0] = SIZE_MAX / 2; /* numel fits, numel * 4 does not */
    assert_int_equal(mxp_tensor_nbytes(&t), 0);
}

static void sweep_tensor_cast_into(void)
{
    float s[4] = {1, 2, 3, 4};
    uint16_t d[4];
    fill(d, sizeof d);
    /* tensor names unlike the argument names, so that a message must name the argument itself */
    mxp_tensor src = {"w_in", MXP_FLOAT32, 1, {4}, s}, dst = {"w_out", MXP_FLOAT16, 1, {4}, d};
    EINVAL("dst", mxp_tensor_cast_into(NULL, &src, MXP_FLOAT16, NULL));
    EINVAL("src", mxp_tensor_cast_into(&dst, NULL, MXP_FLOAT16, NULL));
    EINVAL("dtype|99", mxp_tensor_cast_into(&dst, &src, BAD_DTYPE, NULL));
    EINVAL("dtype|-1", mxp_tensor_cast_into(&dst, &src, NEG_DTYPE, NULL));
    EINVAL("dtype|int16", mxp_tensor_cast_into(&dst, &src, MXP_INT16, NULL));
    EINVAL("opts->rounding", mxp_tensor_cast_into(&dst, &src, MXP_FLOAT16, &bad_rounding));
    EINVAL("opts->threads", mxp_tensor_cast_into(&dst, &src, MXP_FLOAT16, &bad_threads));
    mxp_tensor bad = src;
    bad.dtype = BAD_DTYPE; /* a source tensor of an invalid dtype */
    EINVAL("src", mxp_tensor_cast_into(&dst, &bad, MXP_FLOAT16, NULL));
    bad = src;
    bad.ndim = MXP_TENSOR_MAX_NDIM + 1;
    EINVAL("src", mxp_tensor_cast_into(&dst, &bad, MXP_FLOAT16, NULL));
    bad = src;
    bad.data = NULL;
    EINVAL("src", mxp_tensor_cast_into(&dst, &bad, MXP_FLOAT16, NULL));
    bad = src;
    bad.shape[0] = SIZE_MAX; /* shapes differ, and the byte size overflows */
    EINVAL("src", mxp_tensor_cast_into(&dst, &bad, MXP_FLOAT16, NULL));
    mxp_tensor bd = dst;
    bd.dtype = BAD_DTYPE;
    EINVAL("dst", mxp_tensor_cast_into(&bd, &src, MXP_FLOAT16, NULL));
    bd = dst;
    bd.data = NULL;
    EINVAL("dst", mxp_tensor_cast_into(&bd, &src, MXP_FLOAT16, NULL));
    bd = dst;
    bd.shape[0] = 3; /* a shape unlike src's */
    EINVAL("shape", mxp_tensor_cast_into(&bd, &src, MXP_FLOAT16, NULL));
    bd = dst;
    bd.dtype = MXP_BFLOAT16; /* not the dtype asked for */
    EINVAL("dtype", mxp_tensor_cast_into(&bd, &src, MXP_FLOAT16, NULL));
    UNTOUCHED(d);
    /* a destination that overlaps the source without being the same buffer: 4 float16 written
     * from the source's third byte on would overwrite source values not yet read */
    float o[4] = {1, 2, 3, 4};
    const float o0[4] = {1, 2, 3, 4};
    mxp_tensor osrc = {"w_in", MXP_FLOAT32, 1, {4}, o}, odst = {"w_out", MXP_FLOAT16, 1, {4}, (char *)o + 2};
    EINVAL("overlap", mxp_tensor_cast_into(&odst, &osrc, MXP_FLOAT16, NULL));
    assert_memory_equal(o, o0, sizeof o);
    ACCEPTS(mxp_tensor_cast_into(&dst, &src, MXP_FLOAT16, NULL));
}

static void sweep_tree_new(void)
{
    mxp_tree *t = mxp_tree_new(); /* no arguments */
    assert_non_null(t);
    mxp_tree_free(t);
}

static void sweep_tree_free(void) { mxp_tree_free(NULL); /* documented to accept NULL */ }

/* mxp_tree_add and mxp_tree_add_borrowed take the same arguments: one sweep for both. */
static void sweep_add(bool borrowed)
{
    mxp_tree *t = mxp_tree_new();
    assert_non_null(t);
    float data[4] = {1, 2, 3, 4};
    const size_t shape[1] = {4}, huge[2] = {SIZE_MAX, 2}, big[1] = {SIZE_MAX / 2};
#define ADD(tree, name, dtype, ndim, shape, data)                                                  \
    (borrowed ? mxp_tree_add_borrowed(tree, name, dtype, ndim, shape, data)                        \
              : mxp_tree_add(tree, name, dtype, ndim, shape, data))
    EINVAL("t|tree", ADD(NULL, "a", MXP_FLOAT32, 1, shape, data));
    EINVAL("name", ADD(t, NULL, MXP_FLOAT32, 1, shape, data));
    EINVAL("name", ADD(t, "", MXP_FLOAT32, 1, shape, data));
    EINVAL("dtype|99", ADD(t, "a", BAD_DTYPE, 1, shape, data));
    EINVAL("dtype|-1", ADD(t, "a", NEG_DTYPE, 1, shape, data));
    EINVAL("ndim", ADD(t, "a", MXP_FLOAT32, MXP_TENSOR_MAX_NDIM + 1, shape, data));
    EINVAL("ndim", ADD(t, "a", MXP_FLOAT32, -1, shape, data));
    EINVAL("shape", ADD(t, "a", MXP_FLOAT32, 1, NULL, data));
    EINVAL("shape|byte", ADD(t, "a", MXP_FLOAT32, 2, huge, data));
    EINVAL("shape|byte", ADD(t, "a", MXP_FLOAT32, 1, big, data));
    if (borrowed) EINVAL("data", ADD(t, "a", MXP_FLOAT32, 1, shape, NULL));
    /* 16 bytes from 8 bytes before the end of the address space (never dereferenced) */
    if (borrowed) EINVAL("data", ADD(t, "a", MXP_FLOAT32, 1, shape, (void *)(UINTPTR_MAX - 7)));
    assert_int_equal(mxp_tree_count(t), 0);
    /* documented NULLs: shape with ndim 0; data for an owned tensor (zero-filled) */
    ACCEPTS(ADD(t, "scalar", MXP_FLOAT32, 0, NULL, data));
    if (!borrowed) ACCEPTS(ADD(t, "zeros", MXP_FLOAT32, 1, shape, NULL));
    FAILS(MXP_EEXIST, "'scalar'|scalar", ADD(t, "scalar", MXP_FLOAT32, 0, NULL, data));
#undef ADD
    mxp_tree_free(t);
}
static void sweep_tree_add(void) { sweep_add(false); }
static void sweep_tree_add_borrowed(void) { sweep_add(true); }

static void sweep_tree_count(void) { assert_int_equal(mxp_tree_count(NULL), 0); }

static void sweep_tree_at(void)
{
    mxp_tree *t = small_tree();
    assert_null(mxp_tree_at(NULL, 0));
    assert_null(mxp_tree_at(t, 2));
    assert_null(mxp_tree_at(t, SIZE_MAX));
    mxp_tree_free(t);
}

static void sweep_tree_get(void)
{
    mxp_tree *t = small_tree();
    SILENT(assert_null(mxp_tree_get(NULL, "w")));
    SILENT(assert_null(mxp_tree_get(t, "nope")));
    SILENT(assert_null(mxp_tree_get(t, NULL)));
    mxp_tree_free(t);
}

static void sweep_tree_find(void)
{
    mxp_tree *t = small_tree();
    const mxp_tensor *out;
    fill(&out, sizeof out);
    EINVAL("t|tree", mxp_tree_find(NULL, "w", &out));
    EINVAL("name", mxp_tree_find(t, NULL, &out));
    EINVAL("out", mxp_tree_find(t, "w", NULL));
    FAILS(MXP_ENOTFOUND, "'nope'|nope", mxp_tree_find(t, "nope", &out));
    UNTOUCHED_N(&out, sizeof out);
    mxp_tree_free(t);
}

static void sweep_tree_nbytes(void) { assert_int_equal(mxp_tree_nbytes(NULL), 0); }
static void sweep_tree_numel(void) { assert_int_equal(mxp_tree_numel(NULL), 0); }

static void sweep_tree_clone(void)
{
    mxp_tree *t = small_tree(), *out;
    fill(&out, sizeof out);
    EINVAL("src", mxp_tree_clone(NULL, &out));
    EINVAL("out", mxp_tree_clone(t, NULL));
    UNTOUCHED_N(&out, sizeof out);
    mxp_tree_free(t);
}

static void sweep_tree_cast(void)
{
    mxp_tree *t = small_tree(), *out;
    fill(&out, sizeof out);
    EINVAL("src", mxp_tree_cast(NULL, MXP_FLOAT16, &out));
    EINVAL("out", mxp_tree_cast(t, MXP_FLOAT16, NULL));
    EINVAL("dtype|99", mxp_tree_cast(t, BAD_DTYPE, &out));
    EINVAL("dtype|-1", mxp_tree_cast(t, NEG_DTYPE, &out));
    EINVAL("dtype|int8", mxp_tree_cast(t, MXP_INT8, &out));
    UNTOUCHED_N(&out, sizeof out);
    mxp_tree_free(t);
}

static void sweep_tree_cast_ex(void)
{
    mxp_tree *t = small_tree(), *out;
    fill(&out, sizeof out);
    EINVAL("src", mxp_tree_cast_ex(NULL, MXP_FLOAT16, NULL, &out));
    EINVAL("out", mxp_tree_cast_ex(t, MXP_FLOAT16, NULL, NULL));
    EINVAL("dtype|99", mxp_tree_cast_ex(t, BAD_DTYPE, NULL, &out));
    EINVAL("dtype|int8", mxp_tree_cast_ex(t, MXP_INT8, NULL, &out));
    EINVAL("opts->rounding", mxp_tree_cast_ex(t, MXP_FLOAT16, &bad_rounding, &out));
    EINVAL("opts->threads", mxp_tree_cast_ex(t, MXP_FLOAT16, &bad_threads, &out));
    UNTOUCHED_N(&out, sizeof out);
    ACCEPTS(mxp_tree_cast_ex(t, MXP_FLOAT16, NULL, &out)); /* opts NULL: defaults */
    mxp_tree_free(out);
    mxp_tree_free(t);
}

/* mxp_tree_cast_into and _ex (with = true: the options too). */
static void sweep_cast_into(bool with)
{
    mxp_tree *src = small_tree(), *dst = NULL;
    assert_int_equal(mxp_tree_cast(src, MXP_FLOAT16, &dst), MXP_OK);
    fill_tree(dst);
#define CAST(d, s, dt, o) (with ? mxp_tree_cast_into_ex(d, s, dt, o) : mxp_tree_cast_into(d, s, dt))
    EINVAL("dst", CAST(NULL, src, MXP_FLOAT16, NULL));
    EINVAL("src", CAST(dst, NULL, MXP_FLOAT16, NULL));
    EINVAL("dtype|99", CAST(dst, src, BAD_DTYPE, NULL));
    EINVAL("dtype|-1", CAST(dst, src, NEG_DTYPE, NULL));
    EINVAL("dtype|int8", CAST(dst, src, MXP_INT8, NULL));
    if (with) {
        EINVAL("opts->rounding", CAST(dst, src, MXP_FLOAT16, &bad_rounding));
        EINVAL("opts->threads", CAST(dst, src, MXP_FLOAT16, &bad_threads));
    }
#undef CAST
    check_tree_untouched(dst, __LINE__);
    mxp_tree_free(dst);
    mxp_tree_free(src);
}
static void sweep_tree_cast_into(void) { sweep_cast_into(false); }
static void sweep_tree_cast_into_ex(void) { sweep_cast_into(true); }

/* ---- policy.h ----------------------------------------------------------------------------- */

static void sweep_policy_parse(void)
{
    mxp_policy out;
    fill(&out, sizeof out);
    EINVAL("text", mxp_policy_parse(NULL, &out));
    EINVAL("out", mxp_policy_parse("f16", NULL));
    FAILS(MXP_EPARSE, "'f13'", mxp_policy_parse("c=f13", &out));
    UNTOUCHED_N(&out, sizeof out);
}

static void sweep_policy_format(void)
{
    char buf[64];
    fill(buf, sizeof buf);
    FAILS_AS(-1, "p|policy", mxp_policy_format(NULL, buf, sizeof buf));
    for (size_t i = 0; i < N_BAD_POLICIES; i++)
        FAILS_AS(-1, bad_policies[i].field, mxp_policy_format(&bad_policies[i].p, buf, sizeof buf));
    FAILS_AS(-1, "buf", mxp_policy_format(&f32_policy, NULL, sizeof buf));
    /* a zero capacity writes nothing, even with a buffer, and measures */
    const int len = mxp_policy_format(&f32_policy, NULL, 0);
    assert_true(len > 0);
    assert_int_equal(mxp_policy_format(&f32_policy, buf, 0), len);
    UNTOUCHED(buf);
    /* any capacity is a bound, not a size: SIZE_MAX writes the text */
    assert_int_equal(mxp_policy_format(&f32_policy, buf, SIZE_MAX), len);
    assert_string_equal(buf, "p=float32,c=float32,o=float32");
}

static void sweep_policy_equal(void)
{
    SILENT(assert_false(mxp_policy_equal(NULL, &f32_policy)));
    assert_false(mxp_policy_equal(&f32_policy, NULL));
    assert_false(mxp_policy_equal(NULL, NULL));
}

static void sweep_policy_validate(void)
{
    EINVAL("p|policy", mxp_policy_validate(NULL));
    for (size_t i = 0; i < N_BAD_POLICIES; i++)
        EINVAL(bad_policies[i].field, mxp_policy_validate(&bad_policies[i].p));
}

static void sweep_quant_name(void)
{
    assert_string_equal(mxp_quant_name((mxp_quant)99), "invalid");
    assert_string_equal(mxp_quant_name((mxp_quant)-1), "invalid");
}

static void sweep_set_default_policy(void)
{
    const mxp_policy before = mxp_default_policy();
    FAILS_AS(true, "p|policy", (mxp_set_default_policy(NULL), true));
    for (size_t i = 0; i < N_BAD_POLICIES; i++)
        FAILS_AS(true, bad_policies[i].field, (mxp_set_default_policy(&bad_policies[i].p), true));
    const mxp_policy after = mxp_default_policy();
    assert_true(mxp_policy_equal(&before, &after));
}

static void sweep_default_policy(void)
{
    const mxp_policy p = mxp_default_policy(); /* no arguments */
    assert_int_equal(mxp_policy_validate(&p), MXP_OK);
}

static void sweep_set_backend(void)
{
    const mxp_backend before = mxp_get_backend();
    mxp_set_backend((mxp_backend)99); /* documented: ignored */
    mxp_set_backend((mxp_backend)-1);
    assert_int_equal(mxp_get_backend(), before);
}

static void sweep_get_backend(void)
{
    const mxp_backend b = mxp_get_backend(); /* no arguments */
    assert_true(b == MXP_BACKEND_CPU || b == MXP_BACKEND_GPU || b == MXP_BACKEND_TPU);
}

static void sweep_half_dtype(void)
{
    assert_int_equal(mxp_half_dtype((mxp_backend)99), MXP_FLOAT16);
    assert_int_equal(mxp_half_dtype((mxp_backend)-1), MXP_FLOAT16);
}

/* The ten tree casts of policy.h, one table: kind 0 policy -> new tree, 1 policy -> into,
 * 2 no policy -> new tree, 3 no policy -> into. */
typedef struct policy_cast {
    int kind;
    mxp_status (*new_p)(const mxp_policy *, const mxp_tree *, mxp_tree **);
    mxp_status (*into_p)(const mxp_policy *, mxp_tree *, const mxp_tree *);
    mxp_status (*new_t)(const mxp_tree *, mxp_tree **);
    mxp_status (*into_t)(mxp_tree *, const mxp_tree *);
} policy_cast;

static void sweep_policy_cast(policy_cast c)
{
    mxp_tree *src = small_tree(), *dst = NULL, *out;
    /* dst as the policy's and the backend's casts would make it: every floating leaf float16 */
    const mxp_backend backend = mxp_get_backend();
    mxp_set_backend(MXP_BACKEND_GPU);
    assert_int_equal(mxp_tree_cast(src, MXP_FLOAT16, &dst), MXP_OK);
    const mxp_policy p16 = {MXP_FLOAT16, MXP_FLOAT16, MXP_FLOAT16, MXP_QUANT_NONE, 0};
    fill_tree(dst);
    fill(&out, sizeof out);
    switch (c.kind) {
    case 0:
        EINVAL("p|policy", c.new_p(NULL, src, &out));
        EINVAL("src", c.new_p(&p16, NULL, &out));
        EINVAL("out", c.new_p(&p16, src, NULL));
        for (size_t i = 0; i < N_BAD_POLICIES; i++)
            EINVAL(bad_policies[i].field, c.new_p(&bad_policies[i].p, src, &out));
        break;
    case 1:
        EINVAL("p|policy", c.into_p(NULL, dst, src));
        EINVAL("dst", c.into_p(&p16, NULL, src));
        EINVAL("src", c.into_p(&p16, dst, NULL));
        for (size_t i = 0; i < N_BAD_POLICIES; i++)
            EINVAL(bad_policies[i].field, c.into_p(&bad_policies[i].p, dst, src));
        break;
    case 2:
        EINVAL("src", c.new_t(NULL, &out));
        EINVAL("out", c.new_t(src, NULL));
        break;
    default:
        EINVAL("dst", c.into_t(NULL, src));
        EINVAL("src", c.into_t(dst, NULL));
        break;
    }
    UNTOUCHED_N(&out, sizeof out);
    check_tree_untouched(dst, __LINE__);
    mxp_set_backend(backend);
    mxp_tree_free(dst);
    mxp_tree_free(src);
}
static void sweep_policy_cast_to_param(void)
{
    sweep_policy_cast((policy_cast){0, mxp_policy_cast_to_param, 0, 0, 0});
}
static void sweep_policy_cast_to_compute(void)
{
    sweep_policy_cast((policy_cast){0, mxp_policy_cast_to_compute, 0, 0, 0});
}
static void sweep_policy_cast_to_output(void)
{
    sweep_policy_cast((policy_cast){0, mxp_policy_cast_to_output, 0, 0, 0});
}
static void sweep_policy_cast_to_param_into(void)
{
    sweep_policy_cast((policy_cast){1, 0, mxp_policy_cast_to_param_into, 0, 0});
}
static void sweep_policy_cast_to_compute_into(void)
{
    sweep_policy_cast((policy_cast){1, 0, mxp_policy_cast_to_compute_into, 0, 0});
}
static void sweep_policy_cast_to_output_into(void)
{
    sweep_policy_cast((policy_cast){1, 0, mxp_policy_cast_to_output_into, 0, 0});
}
static void sweep_tree_cast_to_full(void)
{
    sweep_policy_cast((policy_cast){2, 0, 0, mxp_tree_cast_to_full, 0});
}
static void sweep_tree_cast_to_half(void)
{
    sweep_policy_cast((policy_cast){2, 0, 0, mxp_tree_cast_to_half, 0});
}
static void sweep_tree_cast_to_full_into(void)
{
    sweep_policy_cast((policy_cast){3, 0, 0, 0, mxp_tree_cast_to_full_into});
}
static void sweep_tree_cast_to_half_into(void)
{
    sweep_policy_cast((policy_cast){3, 0, 0, 0, mxp_tree_cast_to_half_into});
}

/* ---- policy_map.h ------------------------------------------------------------------------- */

static mxp_policy_map *small_map(void)
{
    mxp_policy_map *m = mxp_policy_map_new(NULL); /* documented: NULL = the global default */
    assert_non_null(m);
    assert_int_equal(mxp_policy_map_set(m, "dense_0", &f16_policy), MXP_OK);
    return m;
}

static void sweep_policy_map_new(void)
{
    for (size_t i = 0; i < N_BAD_POLICIES; i++)
        FAILS_AS(NULL, bad_policies[i].field, mxp_policy_map_new(&bad_policies[i].p));
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    assert_non_null(m);
    assert_false(mxp_policy_map_default(m, NULL));
    mxp_policy_map_free(m);
}

static void sweep_policy_map_free(void) { mxp_policy_map_free(NULL); }

static void sweep_policy_map_set(void)
{
    mxp_policy_map *m = small_map();
    EINVAL("m|map", mxp_policy_map_set(NULL, "k", &f16_policy));
    EINVAL("key", mxp_policy_map_set(m, NULL, &f16_policy));
    EINVAL("key", mxp_policy_map_set(m, "", &f16_policy));
    EINVAL("p|policy", mxp_policy_map_set(m, "k", NULL));
    for (size_t i = 0; i < N_BAD_POLICIES; i++)
        EINVAL(bad_policies[i].field, mxp_policy_map_set(m, "k", &bad_policies[i].p));
    FAILS(MXP_EEXIST, "'dense_0'|dense_0", mxp_policy_map_set(m, "dense_0", &f32_policy));
    FAILS(MXP_EPARSE, "'a\\'|offset", mxp_policy_map_set(m, "a\\", &f32_policy));
    assert_int_equal(mxp_policy_map_count(m), 1);
    mxp_policy_map_free(m);
}

static void sweep_policy_map_get(void)
{
    mxp_policy_map *m = small_map();
    mxp_policy out;
    fill(&out, sizeof out);
    EINVAL("m|map", mxp_policy_map_get(NULL, "dense_0", &out));
    EINVAL("path", mxp_policy_map_get(m, NULL, &out));
    EINVAL("out", mxp_policy_map_get(m, "dense_0", NULL));
    UNTOUCHED_N(&out, sizeof out);
    mxp_policy_map_free(m);
}

static void sweep_policy_map_match(void)
{
    mxp_policy_map *m = small_map();
    mxp_policy out;
    const char *key;
    fill(&out, sizeof out);
    fill(&key, sizeof key);
    EINVAL("m|map", mxp_policy_map_match(NULL, "dense_0", &out, &key));
    EINVAL("path", mxp_policy_map_match(m, NULL, &out, &key));
    EINVAL("out", mxp_policy_map_match(m, "dense_0", NULL, &key));
    UNTOUCHED_N(&out, sizeof out);
    UNTOUCHED_N(&key, sizeof key);
    ACCEPTS(mxp_policy_map_match(m, "dense_0", &out, NULL)); /* key NULL: documented optional */
    mxp_policy_map_free(m);
}

static void sweep_policy_map_remove(void)
{
    mxp_policy_map *m = small_map();
    EINVAL("m|map", mxp_policy_map_remove(NULL, "dense_0"));
    EINVAL("key", mxp_policy_map_remove(m, NULL));
    FAILS(MXP_ENOTFOUND, "'nope'|nope", mxp_policy_map_remove(m, "nope"));
    assert_int_equal(mxp_policy_map_count(m), 1);
    mxp_policy_map_free(m);
}

static void sweep_policy_map_count(void) { assert_int_equal(mxp_policy_map_count(NULL), 0); }

static void sweep_policy_map_entry(void)
{
    mxp_policy_map *m = small_map();
    mxp_policy p;
    const char *key;
    fill(&p, sizeof p);
    fill(&key, sizeof key);
    EINVAL("m|map", mxp_policy_map_entry(NULL, 0, &key, &p));
    FAILS(MXP_ENOTFOUND, "i|1", mxp_policy_map_entry(m, 1, &key, &p));
    FAILS(MXP_ENOTFOUND, "i|18446744073709551615", mxp_policy_map_entry(m, SIZE_MAX, &key, &p));
    UNTOUCHED_N(&p, sizeof p);
    UNTOUCHED_N(&key, sizeof key);
    ACCEPTS(mxp_policy_map_entry(m, 0, NULL, NULL)); /* both outputs documented optional */
    mxp_policy_map_free(m);
}

static void sweep_policy_map_default(void)
{
    mxp_policy out;
    fill(&out, sizeof out);
    assert_false(mxp_policy_map_default(NULL, &out));
    UNTOUCHED_N(&out, sizeof out);
    mxp_policy_map *m = mxp_policy_map_new(&f16_policy);
    assert_non_null(m);
    assert_true(mxp_policy_map_default(m, NULL)); /* out documented optional */
    mxp_policy_map_free(m);
}

static void sweep_policy_map_equal(void)
{
    mxp_policy_map *m = small_map();
    assert_false(mxp_policy_map_equal(NULL, m));
    assert_false(mxp_policy_map_equal(m, NULL));
    assert_false(mxp_policy_map_equal(NULL, NULL));
    mxp_policy_map_free(m);
}

static void sweep_policy_map_set_cache_capacity(void)
{
    mxp_policy_map *m = small_map();
    EINVAL("m|map", mxp_policy_map_set_cache_capacity(NULL, 16));
    ACCEPTS(mxp_policy_map_set_cache_capacity(m, 0));        /* 0 disables the cache */
    ACCEPTS(mxp_policy_map_set_cache_capacity(m, SIZE_MAX)); /* clamped */
    mxp_policy out;
    ACCEPTS(mxp_policy_map_get(m, "dense_0", &out));
    mxp_policy_map_free(m);
}

static void sweep_policy_map_format(void)
{
    mxp_policy_map *m = small_map();
    char buf[128];
    size_t len;
    fill(buf, sizeof buf);
    fill(&len, sizeof len);
    EINVAL("m|map", mxp_policy_map_format(NULL, buf, sizeof buf, &len));
    EINVAL("buf", mxp_policy_map_format(m, NULL, 8, &len));
    UNTOUCHED(buf);
    UNTOUCHED_N(&len, sizeof len);
    ACCEPTS(mxp_policy_map_format(m, NULL, 0, &len)); /* measure */
    ACCEPTS(mxp_policy_map_format(m, buf, 0, NULL));  /* zero capacity: nothing written */
    UNTOUCHED(buf);
    ACCEPTS(mxp_policy_map_format(m, buf, SIZE_MAX, NULL));
    assert_int_equal(strlen(buf), len);
    mxp_policy_map_free(m);
}

static void sweep_policy_map_parse(void)
{
    mxp_policy_map *out;
    fill(&out, sizeof out);
    EINVAL("text", mxp_policy_map_parse(NULL, &out));
    EINVAL("out", mxp_policy_map_parse("a = f16\n", NULL));
    FAILS(MXP_EPARSE, "line", mxp_policy_map_parse("a f16\n", &out));
    UNTOUCHED_N(&out, sizeof out);
}

static void sweep_policy_map_load(void)
{
    mxp_policy_map *out;
    fill(&out, sizeof out);
    EINVAL("path", mxp_policy_map_load(NULL, &out));
    EINVAL("out", mxp_policy_map_load("/nonexistent/mixprec/map.txt", NULL));
    FAILS(MXP_EIO, "/nonexistent/mixprec/map.txt|'/nonexistent/mixprec/map.txt'",
          mxp_policy_map_load("/nonexistent/mixprec/map.txt", &out));
    UNTOUCHED_N(&out, sizeof out);
}

static void sweep_policy_map_save(void)
{
    mxp_policy_map *m = small_map();
    EINVAL("m|map", mxp_policy_map_save(NULL, "/nonexistent/mixprec/map.txt"));
    EINVAL("path", mxp_policy_map_save(m, NULL));
    mxp_policy_map_free(m);
}

static bool pred_false(const char *path, const char *op, void *user)
{
    (void)path, (void)op, (void)user;
    return false;
}

static void sweep_policy_map_apply(void)
{
    mxp_policy_map *m = small_map();
    const mxp_layer layers[2] = {{"dense_1", "dense"}, {"norm", "batch_norm"}};
    const mxp_layer null_path[1] = {{NULL, "dense"}}, empty_path[1] = {{"", "dense"}},
                    null_op[1] = {{"d", NULL}};
    const char *const null_entry[1] = {NULL};
    const mxp_layer_select only = {null_entry, 1, NULL, 0, NULL, NULL},
                           except = {NULL, 0, null_entry, 1, NULL, NULL};
    size_t n_applied;
    fill(&n_applied, sizeof n_applied);
    EINVAL("m|map", mxp_policy_map_apply(NULL, layers, 2, &f16_policy, NULL, &n_applied));
    EINVAL("layers", mxp_policy_map_apply(m, NULL, 2, &f16_policy, NULL, &n_applied));
    EINVAL("p|policy", mxp_policy_map_apply(m, layers, 2, NULL, NULL, &n_applied));
    for (size_t i = 0; i < N_BAD_POLICIES; i++)
        EINVAL(bad_policies[i].field,
               mxp_policy_map_apply(m, layers, 2, &bad_policies[i].p, NULL, &n_applied));
    EINVAL("path", mxp_policy_map_apply(m, null_path, 1, &f16_policy, NULL, &n_applied));
    EINVAL("path", mxp_policy_map_apply(m, empty_path, 1, &f16_policy, NULL, &n_applied));
    EINVAL("op", mxp_policy_map_apply(m, null_op, 1, &f16_policy, NULL, &n_applied));
    EINVAL("only", mxp_policy_map_apply(m, layers, 2, &f16_policy, &only, &n_applied));
    EINVAL("except", mxp_policy_map_apply(m, layers, 2, &f16_policy, &except, &n_applied));
    UNTOUCHED_N(&n_applied, sizeof n_applied);
    assert_int_equal(mxp_policy_map_count(m), 1);
    /* documented NULLs: sel (every layer), n_applied, layers with n == 0; a predicate too */
    ACCEPTS(mxp_policy_map_apply(m, NULL, 0, &f16_policy, NULL, NULL));
    const mxp_layer_select none = {NULL, 0, NULL, 0, pred_false, NULL};
    ACCEPTS(mxp_policy_map_apply(m, layers, 2, &f16_policy, &none, &n_applied));
    assert_int_equal(n_applied, 0);
    ACCEPTS(mxp_policy_map_apply(m, layers, 2, &f16_policy, NULL, NULL));
    assert_int_equal(mxp_policy_map_count(m), 3);
    mxp_policy_map_free(m);
}

/* ---- loss_scale.h ------------------------------------------------------------------------- */

/* Dynamic states each invalid in one field, with the rule the message must state: the messages
 * list every field ("period=2000"), so the field's name alone would always be found. */
static mxp_loss_scale ls_with(int field, float v)
{
    mxp_loss_scale s = mxp_loss_scale_dynamic(1024.0f);
    switch (field) {
    case 0:
        s.kind = (mxp_loss_scale_kind)(int)v;
        break; /* via int: float -> enum is UB out of range */
    case 1:
        s.scale = v;
        break;
    case 2:
        s.counter = (int32_t)v;
        break;
    case 3:
        s.period = (int32_t)v;
        break;
    case 4:
        s.factor = v;
        break;
    case 5:
        s.min_scale = v;
        break;
    default:
        s.max_scale = v;
        break;
    }
    return s;
}
static const struct {
    int field;
    float v;
    const char *name;
} bad_ls[] = {
    {0, 99.0f, "kind must"},      {0, -1.0f, "kind must"},        {1, 0.0f, "scale must"},
    {1, -1.0f, "scale must"},     {1, NAN, "scale must"},         {1, INFINITY, "scale must"},
    {2, -1.0f, "counter must"},   {2, 2000.0f, "counter must"},   {3, 0.0f, "period must"},
    {3, -5.0f, "period must"},    {4, 1.0f, "factor must"},       {4, NAN, "factor must"},
    {5, -1.0f, "min_scale must"}, {5, 4096.0f, "min_scale must"}, {5, NAN, "min_scale must"},
    {6, 2.0f, "max_scale must"},  {6, NAN, "max_scale must"},
};
#define N_BAD_LS (sizeof bad_ls / sizeof bad_ls[0])
static const float bad_scales[] = {0.0f, -0.0f, -1.0f, INFINITY, -INFINITY, NAN};
#define N_BAD_SCALES (sizeof bad_scales / sizeof bad_scales[0])

static void sweep_loss_scale_noop(void)
{
    assert_true(mxp_loss_scale_is_valid(mxp_loss_scale_noop()));
}

static void sweep_loss_scale_static(void)
{
    /* cannot report a bad scale: documented to give an invalid state */
    for (size_t i = 0; i < N_BAD_SCALES; i++)
        assert_false(mxp_loss_scale_is_valid(mxp_loss_scale_static(bad_scales[i])));
}

static void sweep_loss_scale_dynamic(void)
{
    for (size_t i = 0; i < N_BAD_SCALES; i++)
        assert_false(mxp_loss_scale_is_valid(mxp_loss_scale_dynamic(bad_scales[i])));
}

static void sweep_loss_scale_static_ex(void)
{
    mxp_loss_scale out;
    fill(&out, sizeof out);
    EINVAL("out", mxp_loss_scale_static_ex(2.0f, NULL));
    for (size_t i = 0; i < N_BAD_SCALES; i++)
        EINVAL("scale", mxp_loss_scale_static_ex(bad_scales[i], &out));
    UNTOUCHED_N(&out, sizeof out);
}

static void sweep_loss_scale_dynamic_ex(void)
{
    mxp_loss_scale out;
    fill(&out, sizeof out);
    EINVAL("out", mxp_loss_scale_dynamic_ex(2.0f, 10, 2.0f, 1.0f, INFINITY, NULL));
    for (size_t i = 0; i < N_BAD_SCALES; i++)
        EINVAL("initial_scale",
               mxp_loss_scale_dynamic_ex(bad_scales[i], 10, 2.0f, 0.0f, INFINITY, &out));
    EINVAL("period", mxp_loss_scale_dynamic_ex(2.0f, 0, 2.0f, 1.0f, INFINITY, &out));
    EINVAL("period", mxp_loss_scale_dynamic_ex(2.0f, INT32_MIN, 2.0f, 1.0f, INFINITY, &out));
    EINVAL("factor", mxp_loss_scale_dynamic_ex(2.0f, 10, 1.0f, 1.0f, INFINITY, &out));
    EINVAL("factor", mxp_loss_scale_dynamic_ex(2.0f, 10, NAN, 1.0f, INFINITY, &out));
    EINVAL("factor", mxp_loss_scale_dynamic_ex(2.0f, 10, INFINITY, 1.0f, INFINITY, &out));
    EINVAL("min_scale", mxp_loss_scale_dynamic_ex(2.0f, 10, 2.0f, -1.0f, INFINITY, &out));
    EINVAL("min_scale", mxp_loss_scale_dynamic_ex(2.0f, 10, 2.0f, NAN, INFINITY, &out));
    EINVAL("min_scale", mxp_loss_scale_dynamic_ex(2.0f, 10, 2.0f, 4.0f, INFINITY, &out));
    EINVAL("max_scale", mxp_loss_scale_dynamic_ex(2.0f, 10, 2.0f, 1.0f, 1.5f, &out));
    EINVAL("max_scale", mxp_loss_scale_dynamic_ex(2.0f, 10, 2.0f, 1.0f, NAN, &out));
    UNTOUCHED_N(&out, sizeof out);
}

static void sweep_loss_scale_adjust(void)
{
    /* an invalid state comes back unchanged (bit for bit), for either step outcome */
    for (size_t i = 0; i < N_BAD_LS; i++) {
        const mxp_loss_scale s = ls_with(bad_ls[i].field, bad_ls[i].v);
        for (int ok = 0; ok < 2; ok++) {
            const mxp_loss_scale r = mxp_loss_scale_adjust(s, ok != 0);
            if (memcmp(&r, &s, sizeof s) != 0)
                fail_msg("adjust changed a state with a bad %s", bad_ls[i].name);
        }
    }
}

static void sweep_loss_scale_validate(void)
{
    EINVAL("s|loss scale", mxp_loss_scale_validate(NULL));
    for (size_t i = 0; i < N_BAD_LS; i++) {
        const mxp_loss_scale s = ls_with(bad_ls[i].field, bad_ls[i].v);
        EINVAL(bad_ls[i].name, mxp_loss_scale_validate(&s));
    }
}

static void sweep_loss_scale_is_valid(void)
{
    for (size_t i = 0; i < N_BAD_LS; i++)
        SILENT(assert_false(mxp_loss_scale_is_valid(ls_with(bad_ls[i].field, bad_ls[i].v))));
}

static void sweep_loss_scale_at_min(void)
{
    /* true only for a DYNAMIC kind: an unknown kind is not one */
    assert_false(mxp_loss_scale_at_min(ls_with(0, 99.0f)));
    assert_false(mxp_loss_scale_at_min(ls_with(0, -1.0f)));
}

static void sweep_loss_scale_scale(void)
{
    /* loss * s.scale for every kind but NOOP (documented as a plain product) */
    assert_true(mxp_loss_scale_scale(ls_with(0, 99.0f), 2.0f) == 2048.0f);
    assert_true(isnan(mxp_loss_scale_scale(ls_with(1, NAN), 2.0f)));
}

static void sweep_all_finite(void)
{
    const float x[4] = {1, 2, 3, 4};
    FAILS_AS(false, "x", mxp_all_finite(NULL, MXP_FLOAT32, 4));
    FAILS_AS(false, "dtype|99", mxp_all_finite(x, BAD_DTYPE, 4));
    FAILS_AS(false, "dtype|-1", mxp_all_finite(x, NEG_DTYPE, 4));
    FAILS_AS(false, "n", mxp_all_finite(x, MXP_FLOAT32, SIZE_MAX));
    FAILS_AS(false, "n", mxp_all_finite(x, MXP_FLOAT32, SIZE_MAX / 4));
    SILENT(assert_true(mxp_all_finite(NULL, MXP_FLOAT32, 0)));
}

static void sweep_all_finite_s(void)
{
    const float x[4] = {1, 2, 3, 4};
    unsigned char fb[sizeof(bool)]; /* *finite as bytes: a canary is not a valid bool to read */
    bool *finite = (bool *)(void *)fb;
    fill(fb, sizeof fb);
    EINVAL("finite", mxp_all_finite_s(x, MXP_FLOAT32, 4, NULL));
    EINVAL("x", mxp_all_finite_s(NULL, MXP_FLOAT32, 4, finite));
    EINVAL("dtype|99", mxp_all_finite_s(x, BAD_DTYPE, 4, finite));
    EINVAL("dtype|-1", mxp_all_finite_s(x, NEG_DTYPE, 0, finite));
    EINVAL("n", mxp_all_finite_s(x, MXP_FLOAT32, SIZE_MAX, finite));
    UNTOUCHED(fb);
}

static void sweep_unscale_check(void)
{
    float x[4];
    fill(x, sizeof x);
    FAILS_AS(false, "x", mxp_unscale_check(NULL, MXP_FLOAT32, 4, 2.0f));
    FAILS_AS(false, "dtype|99", mxp_unscale_check(x, BAD_DTYPE, 4, 2.0f));
    FAILS_AS(false, "dtype|-1", mxp_unscale_check(x, NEG_DTYPE, 4, 2.0f));
    FAILS_AS(false, "dtype|int32", mxp_unscale_check(x, MXP_INT32, 4, 2.0f));
    FAILS_AS(false, "n", mxp_unscale_check(x, MXP_FLOAT32, SIZE_MAX, 2.0f));
    for (size_t i = 0; i < N_BAD_SCALES; i++)
        FAILS_AS(false, "scale", mxp_unscale_check(x, MXP_FLOAT32, 4, bad_scales[i]));
    UNTOUCHED(x);
}

static void sweep_unscale_check_s(void)
{
    float x[4];
    unsigned char fb[sizeof(bool)];
    bool *finite = (bool *)(void *)fb;
    fill(x, sizeof x);
    fill(fb, sizeof fb);
    EINVAL("finite", mxp_unscale_check_s(x, MXP_FLOAT32, 4, 2.0f, NULL));
    EINVAL("x", mxp_unscale_check_s(NULL, MXP_FLOAT32, 4, 2.0f, finite));
    EINVAL("dtype|99", mxp_unscale_check_s(x, BAD_DTYPE, 4, 2.0f, finite));
    EINVAL("dtype|int32", mxp_unscale_check_s(x, MXP_INT32, 4, 2.0f, finite));
    EINVAL("n", mxp_unscale_check_s(x, MXP_FLOAT32, SIZE_MAX, 2.0f, finite));
    for (size_t i = 0; i < N_BAD_SCALES; i++)
        EINVAL("scale", mxp_unscale_check_s(x, MXP_FLOAT32, 4, bad_scales[i], finite));
    UNTOUCHED(x);
    UNTOUCHED(fb);
}

static void sweep_unscale_check_into(void)
{
    const uint16_t src[4] = {0x3C00, 0x4000, 0x4200, 0x4400};
    float dst[4];
    fill(dst, sizeof dst);
    FAILS_AS(false, "dst", mxp_unscale_check_into(NULL, MXP_FLOAT32, src, MXP_FLOAT16, 4, 2.0f));
    FAILS_AS(false, "src", mxp_unscale_check_into(dst, MXP_FLOAT32, NULL, MXP_FLOAT16, 4, 2.0f));
    FAILS_AS(false, "dt|99", mxp_unscale_check_into(dst, BAD_DTYPE, src, MXP_FLOAT16, 4, 2.0f));
    FAILS_AS(false, "dt|float16",
             mxp_unscale_check_into(dst, MXP_FLOAT16, src, MXP_FLOAT16, 4, 2.0f));
    FAILS_AS(false, "st|99", mxp_unscale_check_into(dst, MXP_FLOAT32, src, BAD_DTYPE, 4, 2.0f));
    FAILS_AS(false, "st|-1", mxp_unscale_check_into(dst, MXP_FLOAT32, src, NEG_DTYPE, 4, 2.0f));
    FAILS_AS(false, "st|float64",
             mxp_unscale_check_into(dst, MXP_FLOAT32, src, MXP_FLOAT64, 4, 2.0f));
    FAILS_AS(false, "st|int16", mxp_unscale_check_into(dst, MXP_FLOAT32, src, MXP_INT16, 4, 2.0f));
    FAILS_AS(false, "n",
             mxp_unscale_check_into(dst, MXP_FLOAT32, src, MXP_FLOAT16, SIZE_MAX, 2.0f));
    for (size_t i = 0; i < N_BAD_SCALES; i++)
        FAILS_AS(false, "scale",
                 mxp_unscale_check_into(dst, MXP_FLOAT32, src, MXP_FLOAT16, 4, bad_scales[i]));
    FAILS_AS(false, "overlap",
             mxp_unscale_check_into(dst, MXP_FLOAT32, (char *)dst + 2, MXP_FLOAT16, 4, 2.0f));
    UNTOUCHED(dst);
}

static void sweep_unscale_check_into_s(void)
{
    const uint16_t src[4] = {0x3C00, 0x4000, 0x4200, 0x4400};
    float dst[4];
    unsigned char fb[sizeof(bool)];
    bool *finite = (bool *)(void *)fb;
    fill(dst, sizeof dst);
    fill(fb, sizeof fb);
    EINVAL("finite", mxp_unscale_check_into_s(dst, MXP_FLOAT32, src, MXP_FLOAT16, 4, 2.0f, NULL));
    EINVAL("dst", mxp_unscale_check_into_s(NULL, MXP_FLOAT32, src, MXP_FLOAT16, 4, 2.0f, finite));
    EINVAL("src", mxp_unscale_check_into_s(dst, MXP_FLOAT32, NULL, MXP_FLOAT16, 4, 2.0f, finite));
    EINVAL("dt|99", mxp_unscale_check_into_s(dst, BAD_DTYPE, src, MXP_FLOAT16, 4, 2.0f, finite));
    EINVAL("dt|bfloat16",
           mxp_unscale_check_into_s(dst, MXP_BFLOAT16, src, MXP_FLOAT16, 4, 2.0f, finite));
    EINVAL("st|99", mxp_unscale_check_into_s(dst, MXP_FLOAT32, src, BAD_DTYPE, 4, 2.0f, finite));
    EINVAL("st|float64",
           mxp_unscale_check_into_s(dst, MXP_FLOAT32, src, MXP_FLOAT64, 4, 2.0f, finite));
    EINVAL("n",
           mxp_unscale_check_into_s(dst, MXP_FLOAT32, src, MXP_FLOAT16, SIZE_MAX, 2.0f, finite));
    for (size_t i = 0; i < N_BAD_SCALES; i++)
        EINVAL("scale", mxp_unscale_check_into_s(dst, MXP_FLOAT32, src, MXP_FLOAT16, 4,
                                                 bad_scales[i], finite));
    UNTOUCHED(dst);
    UNTOUCHED(fb);
}

static void sweep_select(void)
{
    const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float out[4];
    fill(out, sizeof out);
    for (int pred = 0; pred < 2; pred++) { /* a NULL buffer is refused whichever is selected */
        EINVAL("out", mxp_select(pred, NULL, a, b, MXP_FLOAT32, 4));
        EINVAL("a", mxp_select(pred, out, NULL, b, MXP_FLOAT32, 4));
        EINVAL("b", mxp_select(pred, out, a, NULL, MXP_FLOAT32, 4));
    }
    EINVAL("dtype|99", mxp_select(true, out, a, b, BAD_DTYPE, 4));
    EINVAL("dtype|-1", mxp_select(true, out, a, b, NEG_DTYPE, 4));
    EINVAL("n", mxp_select(true, out, a, b, MXP_FLOAT32, SIZE_MAX));
    EINVAL("overlap|overlaps", mxp_select(true, out, (const char *)out + 2, b, MXP_FLOAT32, 2));
    UNTOUCHED(out);
    ACCEPTS(mxp_select(true, NULL, NULL, NULL, MXP_FLOAT32, 0));
}

static int reduce_calls;
static int reduce_ok(int *flag, void *ctx)
{
    (void)flag, (void)ctx;
    reduce_calls++;
    return 0;
}
static int reduce_fails(int *flag, void *ctx)
{
    (void)ctx;
    *flag = 0;
    reduce_calls++;
    return 42;
}

static void sweep_loss_scale_adjust_reduce(void)
{
    unsigned char fb[sizeof(bool)];
    bool *gf = (bool *)(void *)fb;
    fill(fb, sizeof fb);
    reduce_calls = 0;
    EINVAL("s|loss scale", mxp_loss_scale_adjust_reduce(NULL, true, reduce_ok, NULL, gf));
    assert_int_equal(reduce_calls, 0); /* documented: not called for a NULL s */
    for (size_t i = 0; i < N_BAD_LS; i++) {
        mxp_loss_scale s = ls_with(bad_ls[i].field, bad_ls[i].v);
        const mxp_loss_scale before = s;
        EINVAL(bad_ls[i].name, mxp_loss_scale_adjust_reduce(&s, true, reduce_ok, NULL, gf));
        assert_memory_equal(&s, &before, sizeof s);
    }
    assert_int_equal(reduce_calls, (int)N_BAD_LS); /* documented: called for an invalid *s */
    mxp_loss_scale s = mxp_loss_scale_dynamic(1024.0f);
    const mxp_loss_scale before = s;
    FAILS(MXP_EIO, "42", mxp_loss_scale_adjust_reduce(&s, true, reduce_fails, NULL, gf));
    assert_memory_equal(&s, &before, sizeof s);
    UNTOUCHED(fb);
    ACCEPTS(mxp_loss_scale_adjust_reduce(&s, true, NULL, NULL,
                                         NULL)); /* reduce, ctx, grads_finite optional */
}

static void sweep_loss_scale_save(void)
{
    char buf[MXP_LOSS_SCALE_TEXT_MAX];
    const mxp_loss_scale s = mxp_loss_scale_dynamic(1024.0f);
    fill(buf, sizeof buf);
    FAILS_AS(-1, "s|loss scale", mxp_loss_scale_save(NULL, buf, sizeof buf));
    FAILS_AS(-1, "buf", mxp_loss_scale_save(&s, NULL, sizeof buf));
    const int len = mxp_loss_scale_save(&s, NULL, 0);
    assert_true(len > 0);
    assert_int_equal(mxp_loss_scale_save(&s, buf, 0), len); /* zero capacity: nothing written */
    UNTOUCHED(buf);
    /* any state can be saved, invalid ones too (an unknown kind included) */
    for (size_t i = 0; i < N_BAD_LS; i++) {
        const mxp_loss_scale b = ls_with(bad_ls[i].field, bad_ls[i].v);
        assert_true(mxp_loss_scale_save(&b, buf, sizeof buf) > 0);
    }
    assert_int_equal(mxp_loss_scale_save(&s, buf, SIZE_MAX), len);
    assert_int_equal(strlen(buf), (size_t)len);
}

static void sweep_loss_scale_restore(void)
{
    mxp_loss_scale out;
    char text[MXP_LOSS_SCALE_TEXT_MAX];
    const mxp_loss_scale s = mxp_loss_scale_dynamic(1024.0f);
    assert_true(mxp_loss_scale_save(&s, text, sizeof text) > 0);
    fill(&out, sizeof out);
    EINVAL("text", mxp_loss_scale_restore(NULL, &out));
    EINVAL("out", mxp_loss_scale_restore(text, NULL));
    const mxp_loss_scale bad = ls_with(3, 0.0f);
    assert_true(mxp_loss_scale_save(&bad, text, sizeof text) > 0);
    EINVAL("period must", mxp_loss_scale_restore(text, &out));
    FAILS(MXP_EPARSE, "tag|mxp-loss-scale/1", mxp_loss_scale_restore("kind=noop", &out));
    UNTOUCHED_N(&out, sizeof out);
}

static void sweep_tree_all_finite(void) { SILENT(assert_true(mxp_tree_all_finite(NULL))); }

static void sweep_tree_unscale_check(void)
{
    SILENT(assert_true(mxp_tree_unscale_check(NULL, 2.0f)));
    mxp_tree *t = small_tree();
    const mxp_tree *c = t;
    fill_tree(t);
    for (size_t i = 0; i < N_BAD_SCALES; i++)
        FAILS_AS(false, "scale", mxp_tree_unscale_check(t, bad_scales[i]));
    check_tree_untouched(c, __LINE__);
    mxp_tree_free(t);
}

static void sweep_tree_select(void)
{
    mxp_tree *a = small_tree(), *b = small_tree(), *out = small_tree();
    fill_tree(out);
    for (int pred = 0; pred < 2; pred++) {
        EINVAL("out", mxp_tree_select(pred, NULL, a, b));
        EINVAL("a", mxp_tree_select(pred, out, NULL, b));
        EINVAL("b", mxp_tree_select(pred, out, a, NULL));
    }
    mxp_tree *one = mxp_tree_new(), *other = mxp_tree_new(), *wide = mxp_tree_new();
    assert_non_null(one);
    assert_non_null(other);
    assert_non_null(wide);
    const size_t s1[1] = {2}, s4[1] = {4}, s22[2] = {2, 2};
    assert_int_equal(mxp_tree_add(one, "w", MXP_FLOAT32, 1, s1, NULL), MXP_OK);
    EINVAL("tensors", mxp_tree_select(true, out, one, b)); /* 1 tensor against 2 */
    assert_int_equal(mxp_tree_add(other, "w", MXP_FLOAT32, 2, s22, NULL), MXP_OK);
    assert_int_equal(mxp_tree_add(other, "j", MXP_INT32, 1, s1, NULL), MXP_OK);
    FAILS(MXP_ENOTFOUND, "'i'|b", mxp_tree_select(false, out, a, other)); /* no "i" in b */
    assert_int_equal(mxp_tree_add(wide, "w", MXP_FLOAT32, 1, s4, NULL), MXP_OK);
    assert_int_equal(mxp_tree_add(wide, "i", MXP_INT32, 1, s1, NULL), MXP_OK);
    EINVAL("shape|'w'", mxp_tree_select(true, out, wide, b)); /* "w" is [4] in a, [2, 2] in out */
    check_tree_untouched(out, __LINE__);
    /* out's leaf overlapping a's namesake without being the same buffer */
    float buf[6] = {1, 2, 3, 4, 5, 6};
    const float buf0[6] = {1, 2, 3, 4, 5, 6};
    int32_t ib[2] = {1, 2};
    const size_t *s2 = s22;
    mxp_tree *ov_out = mxp_tree_new(), *ov_a = mxp_tree_new();
    assert_non_null(ov_out);
    assert_non_null(ov_a);
    assert_int_equal(mxp_tree_add_borrowed(ov_out, "w", MXP_FLOAT32, 2, s2, buf + 2), MXP_OK);
    assert_int_equal(mxp_tree_add_borrowed(ov_out, "i", MXP_INT32, 1, s1, ib), MXP_OK);
    assert_int_equal(mxp_tree_add_borrowed(ov_a, "w", MXP_FLOAT32, 2, s2, buf), MXP_OK);
    assert_int_equal(mxp_tree_add(ov_a, "i", MXP_INT32, 1, s1, NULL), MXP_OK);
    EINVAL("overlaps", mxp_tree_select(true, ov_out, ov_a, b));
    assert_memory_equal(buf, buf0, sizeof buf);
    assert_int_equal(ib[0], 1);
    mxp_tree_free(ov_a);
    mxp_tree_free(ov_out);
    mxp_tree_free(wide);
    mxp_tree_free(other);
    mxp_tree_free(one);
    mxp_tree_free(out);
    mxp_tree_free(b);
    mxp_tree_free(a);
}

/* ---- quant.h ------------------------------------------------------------------------------ */

/* 2 x 4 float32 input, per-row scales (2 of them) */
static const float qx[8] = {1, -2, 3, -4, 0.5f, 0.25f, -8, 2};
static const mxp_qlayout qrow = {2, 4, MXP_QAXIS_ROW, 0};

/* Layouts each invalid in one way, with what the message must say. */
static const struct {
    mxp_qlayout l;
    const char *words;
} bad_layouts[] = {
    {{2, 4, (mxp_qaxis)99, 0}, "axis|99"},
    {{2, 4, (mxp_qaxis)-1, 0}, "axis|-1"},
    {{2, 4, MXP_QAXIS_TENSOR, 2}, "group"},
    {{SIZE_MAX, 2, MXP_QAXIS_ROW, 0}, "rows|overflow|overflows"},
    {{SIZE_MAX / 2, 4, MXP_QAXIS_ROW, 0}, "rows|overflow|overflows|PTRDIFF_MAX"},
};
#define N_BAD_LAYOUTS (sizeof bad_layouts / sizeof bad_layouts[0])
/* rows * cols fits in size_t even as float64 bytes, but those bytes exceed PTRDIFF_MAX: no
 * buffer can be that large (n * 8 = SIZE_MAX - 7), so a float64 output is refused, not written
 * (a bound of SIZE_MAX / 8 elements let it through) */
static const mxp_qlayout f64_span_layout = {SIZE_MAX / 8, 1, MXP_QAXIS_ROW, 0};

static void sweep_qlayout_nscales(void)
{
    assert_int_equal(mxp_qlayout_nscales(NULL), 0);
    for (size_t i = 0; i < 3; i++) assert_int_equal(mxp_qlayout_nscales(&bad_layouts[i].l), 0);
    const mxp_qlayout over = {SIZE_MAX, SIZE_MAX, MXP_QAXIS_ROW,
                              1}; /* rows * cols scales overflow */
    assert_int_equal(mxp_qlayout_nscales(&over), 0);
}

/* The four int quantizers with their _ex forms: int4 = packed output; ex = with flags. */
static void sweep_quantize_int(bool int4, bool ex, unsigned flags)
{
    unsigned char q[8];
    float scales[2];
    fill(q, sizeof q);
    fill(scales, sizeof scales);
#define QI(q_, s_, x_, xt_, l_)                                                                    \
    (int4 ? (ex ? mxp_quantize_int4_ex((uint8_t *)(q_), s_, x_, xt_, l_, flags)                    \
                : mxp_quantize_int4((uint8_t *)(q_), s_, x_, xt_, l_))                             \
          : (ex ? mxp_quantize_int8_ex((int8_t *)(q_), s_, x_, xt_, l_, flags)                     \
                : mxp_quantize_int8((int8_t *)(q_), s_, x_, xt_, l_)))
    EINVAL(int4 ? "packed" : "q", QI(NULL, scales, qx, MXP_FLOAT32, &qrow));
    EINVAL("scales", QI(q, NULL, qx, MXP_FLOAT32, &qrow));
    EINVAL("x", QI(q, scales, NULL, MXP_FLOAT32, &qrow));
    EINVAL("l|layout", QI(q, scales, qx, MXP_FLOAT32, NULL));
    FAILS(MXP_EUNSUPPORTED, "xt|99", QI(q, scales, qx, BAD_DTYPE, &qrow));
    FAILS(MXP_EUNSUPPORTED, "xt|-1", QI(q, scales, qx, NEG_DTYPE, &qrow));
    FAILS(MXP_EUNSUPPORTED, "xt|float64", QI(q, scales, qx, MXP_FLOAT64, &qrow));
    FAILS(MXP_EUNSUPPORTED, "xt|int8", QI(q, scales, qx, MXP_INT8, &qrow));
    for (size_t i = 0; i < N_BAD_LAYOUTS; i++)
        EINVAL(bad_layouts[i].words, QI(q, scales, qx, MXP_FLOAT32, &bad_layouts[i].l));
    if (ex) {
        EINVAL("flags", int4 ? mxp_quantize_int4_ex(q, scales, qx, MXP_FLOAT32, &qrow, 2u)
                             : mxp_quantize_int8_ex((int8_t *)q, scales, qx, MXP_FLOAT32, &qrow,
                                                    0x80000000u));
    }
#undef QI
    UNTOUCHED(q);
    UNTOUCHED(scales);
}
static void sweep_quantize_int8(void) { sweep_quantize_int(false, false, 0); }
static void sweep_quantize_int4(void) { sweep_quantize_int(true, false, 0); }
static void sweep_quantize_int8_ex(void) { sweep_quantize_int(false, true, MXP_QUANT_ONE_PASS); }
static void sweep_quantize_int4_ex(void) { sweep_quantize_int(true, true, MXP_QUANT_ONE_PASS); }

static void sweep_dequantize_int(bool int4)
{
    const unsigned char q[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const float scales[2] = {1.0f, 2.0f}, zero[2] = {1.0f, 0.0f};
    float y[8];
    fill(y, sizeof y);
#define DQ(y_, yt_, q_, s_, l_)                                                                    \
    (int4 ? mxp_dequantize_int4(y_, yt_, (const uint8_t *)(q_), s_, l_)                            \
          : mxp_dequantize_int8(y_, yt_, (const int8_t *)(q_), s_, l_))
    EINVAL("y", DQ(NULL, MXP_FLOAT32, q, scales, &qrow));
    EINVAL(int4 ? "packed" : "q", DQ(y, MXP_FLOAT32, NULL, scales, &qrow));
    EINVAL("scales", DQ(y, MXP_FLOAT32, q, NULL, &qrow));
    EINVAL("l|layout", DQ(y, MXP_FLOAT32, q, scales, NULL));
    EINVAL("yt|99", DQ(y, BAD_DTYPE, q, scales, &qrow));
    EINVAL("yt|-1", DQ(y, NEG_DTYPE, q, scales, &qrow));
    EINVAL("yt|int32", DQ(y, MXP_INT32, q, scales, &qrow));
    EINVAL("scales|1", DQ(y, MXP_FLOAT32, q, zero, &qrow));
    for (size_t i = 0; i < N_BAD_LAYOUTS; i++)
        EINVAL(bad_layouts[i].words, DQ(y, MXP_FLOAT32, q, scales, &bad_layouts[i].l));
    EINVAL("rows|overflow|overflows", DQ(y, MXP_FLOAT64, q, scales, &f64_span_layout));
#undef DQ
    UNTOUCHED(y);
}
static void sweep_dequantize_int8(void) { sweep_dequantize_int(false); }
static void sweep_dequantize_int4(void) { sweep_dequantize_int(true); }

static void sweep_int4_pack(void)
{
    const int8_t q[8] = {1, -2, 3, -4, 5, -6, 7, -8}, bad[2] = {1, 9};
    uint8_t packed[4];
    fill(packed, sizeof packed);
    EINVAL("packed", mxp_int4_pack(NULL, q, 2, 4));
    EINVAL("q", mxp_int4_pack(packed, NULL, 2, 4));
    EINVAL("rows|overflow|overflows", mxp_int4_pack(packed, q, SIZE_MAX, 2));
    EINVAL("cols|overflow|overflows", mxp_int4_pack(packed, q, 2, SIZE_MAX));
    EINVAL("9", mxp_int4_pack(packed, bad, 1, 2));
    UNTOUCHED(packed);
    ACCEPTS(mxp_int4_pack(NULL, NULL, 0, 4));
}

static void sweep_int4_unpack(void)
{
    const uint8_t packed[4] = {0x12, 0x34, 0x56, 0x78};
    int8_t q[8];
    fill(q, sizeof q);
    EINVAL("q", mxp_int4_unpack(NULL, packed, 2, 4));
    EINVAL("packed", mxp_int4_unpack(q, NULL, 2, 4));
    EINVAL("rows|overflow|overflows", mxp_int4_unpack(q, packed, SIZE_MAX, 2));
    EINVAL("cols|overflow|overflows", mxp_int4_unpack(q, packed, 2, SIZE_MAX));
    UNTOUCHED(q);
}

static void sweep_matmul_int8(void)
{
    const int8_t a[4] = {1, 2, 3, 4}, b[4] = {1, -1, 2, -2};
    const float sa[2] = {1, 2}, sb[2] = {1, 2}, zero[2] = {1, 0};
    float y[4];
    fill(y, sizeof y);
    EINVAL("y", mxp_matmul_int8(NULL, MXP_FLOAT32, a, sa, b, sb, 2, 2, 2));
    EINVAL("a", mxp_matmul_int8(y, MXP_FLOAT32, NULL, sa, b, sb, 2, 2, 2));
    EINVAL("sa", mxp_matmul_int8(y, MXP_FLOAT32, a, NULL, b, sb, 2, 2, 2));
    EINVAL("b", mxp_matmul_int8(y, MXP_FLOAT32, a, sa, NULL, sb, 2, 2, 2));
    EINVAL("sb", mxp_matmul_int8(y, MXP_FLOAT32, a, sa, b, NULL, 2, 2, 2));
    FAILS(MXP_EUNSUPPORTED, "yt|99", mxp_matmul_int8(y, BAD_DTYPE, a, sa, b, sb, 2, 2, 2));
    FAILS(MXP_EUNSUPPORTED, "yt|-1", mxp_matmul_int8(y, NEG_DTYPE, a, sa, b, sb, 2, 2, 2));
    FAILS(MXP_EUNSUPPORTED, "yt|int32", mxp_matmul_int8(y, MXP_INT32, a, sa, b, sb, 2, 2, 2));
    EINVAL("m|overflow|overflows", mxp_matmul_int8(y, MXP_FLOAT32, a, sa, b, sb, SIZE_MAX, 2, 2));
    EINVAL("k|overflow|overflows", mxp_matmul_int8(y, MXP_FLOAT32, a, sa, b, sb, 2, SIZE_MAX, 2));
    EINVAL("n|overflow|overflows", mxp_matmul_int8(y, MXP_FLOAT32, a, sa, b, sb, 2, 2, SIZE_MAX));
    /* m * n * 8 fits in size_t but exceeds PTRDIFF_MAX: past any possible y */
    EINVAL("n|overflow|overflows|PTRDIFF_MAX",
           mxp_matmul_int8(y, MXP_FLOAT64, a, sa, b, sb, 1, 1, SIZE_MAX / 8));
    EINVAL("m|overflow|overflows|PTRDIFF_MAX",
           mxp_matmul_int8(y, MXP_FLOAT64, a, sa, b, sb, SIZE_MAX / 8, 1, 1));
    EINVAL("sa", mxp_matmul_int8(y, MXP_FLOAT32, a, zero, b, sb, 2, 2, 2));
    EINVAL("sb", mxp_matmul_int8(y, MXP_FLOAT32, a, sa, b, zero, 2, 2, 2));
    UNTOUCHED(y);
    ACCEPTS(mxp_matmul_int8(NULL, MXP_FLOAT32, NULL, NULL, NULL, NULL, 0, 2, 2));
}

static void sweep_quantize_fp8_(bool ex)
{
    unsigned char q[8];
    float scales[2];
    fill(q, sizeof q);
    fill(scales, sizeof scales);
#define QF(q_, fmt_, s_, x_, xt_, l_)                                                              \
    (ex ? mxp_quantize_fp8_ex(q_, fmt_, s_, x_, xt_, l_, MXP_QUANT_ONE_PASS)                       \
        : mxp_quantize_fp8(q_, fmt_, s_, x_, xt_, l_))
    EINVAL("q", QF(NULL, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT32, &qrow));
    EINVAL("scales", QF(q, MXP_FLOAT8_E4M3FN, NULL, qx, MXP_FLOAT32, &qrow));
    EINVAL("x", QF(q, MXP_FLOAT8_E4M3FN, scales, NULL, MXP_FLOAT32, &qrow));
    EINVAL("l|layout", QF(q, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT32, NULL));
    EINVAL("fmt|99", QF(q, BAD_DTYPE, scales, qx, MXP_FLOAT32, &qrow));
    EINVAL("fmt|-1", QF(q, NEG_DTYPE, scales, qx, MXP_FLOAT32, &qrow));
    EINVAL("fmt|float16", QF(q, MXP_FLOAT16, scales, qx, MXP_FLOAT32, &qrow));
    FAILS(MXP_EUNSUPPORTED, "xt|99", QF(q, MXP_FLOAT8_E4M3FN, scales, qx, BAD_DTYPE, &qrow));
    FAILS(MXP_EUNSUPPORTED, "xt|float8_e5m2",
          QF(q, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT8_E5M2, &qrow));
    for (size_t i = 0; i < N_BAD_LAYOUTS; i++)
        EINVAL(bad_layouts[i].words,
               QF(q, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT32, &bad_layouts[i].l));
    if (ex)
        EINVAL("flags",
               mxp_quantize_fp8_ex(q, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT32, &qrow, 4u));
#undef QF
    UNTOUCHED(q);
    UNTOUCHED(scales);
}
static void sweep_quantize_fp8(void) { sweep_quantize_fp8_(false); }
static void sweep_quantize_fp8_ex(void) { sweep_quantize_fp8_(true); }

static void sweep_dequantize_fp8(void)
{
    const unsigned char q[8] = {0x38, 0x40, 0x44, 0x48, 0x30, 0x28, 0xC8, 0x40};
    const float scales[2] = {1, 2}, zero[2] = {1, 0};
    float y[8];
    fill(y, sizeof y);
    EINVAL("y", mxp_dequantize_fp8(NULL, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, scales, &qrow));
    EINVAL("q", mxp_dequantize_fp8(y, MXP_FLOAT32, NULL, MXP_FLOAT8_E4M3FN, scales, &qrow));
    EINVAL("scales", mxp_dequantize_fp8(y, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, NULL, &qrow));
    EINVAL("l|layout", mxp_dequantize_fp8(y, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, scales, NULL));
    EINVAL("yt|99", mxp_dequantize_fp8(y, BAD_DTYPE, q, MXP_FLOAT8_E4M3FN, scales, &qrow));
    EINVAL("yt|int8", mxp_dequantize_fp8(y, MXP_INT8, q, MXP_FLOAT8_E4M3FN, scales, &qrow));
    EINVAL("fmt|99", mxp_dequantize_fp8(y, MXP_FLOAT32, q, BAD_DTYPE, scales, &qrow));
    EINVAL("fmt|-1", mxp_dequantize_fp8(y, MXP_FLOAT32, q, NEG_DTYPE, scales, &qrow));
    EINVAL("fmt|bfloat16", mxp_dequantize_fp8(y, MXP_FLOAT32, q, MXP_BFLOAT16, scales, &qrow));
    EINVAL("scales|1", mxp_dequantize_fp8(y, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, zero, &qrow));
    EINVAL("rows|overflow|overflows",
           mxp_dequantize_fp8(y, MXP_FLOAT64, q, MXP_FLOAT8_E4M3FN, scales, &f64_span_layout));
    for (size_t i = 0; i < N_BAD_LAYOUTS; i++)
        EINVAL(bad_layouts[i].words,
               mxp_dequantize_fp8(y, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, scales, &bad_layouts[i].l));
    UNTOUCHED(y);
}

static void sweep_fp8_recipe_default(void)
{
    /* documented: an invalid format gives a recipe that mxp_fp8_scaler_new refuses, naming it */
    const mxp_fp8_recipe r = mxp_fp8_recipe_default(BAD_DTYPE);
    mxp_fp8_scaler *s;
    fill(&s, sizeof s);
    EINVAL("format", mxp_fp8_scaler_new(&r, &s));
    const mxp_fp8_recipe r16 = mxp_fp8_recipe_default(MXP_FLOAT16);
    EINVAL("format", mxp_fp8_scaler_new(&r16, &s));
    UNTOUCHED_N(&s, sizeof s);
}

static void sweep_fp8_scaler_new(void)
{
    mxp_fp8_scaler *s;
    fill(&s, sizeof s);
    const mxp_fp8_recipe ok = mxp_fp8_recipe_default(MXP_FLOAT8_E4M3FN);
    EINVAL("r|recipe", mxp_fp8_scaler_new(NULL, &s));
    EINVAL("out", mxp_fp8_scaler_new(&ok, NULL));
    mxp_fp8_recipe r = ok;
    r.format = NEG_DTYPE;
    EINVAL("format", mxp_fp8_scaler_new(&r, &s));
    r = ok;
    r.history_len = 0;
    EINVAL("history_len", mxp_fp8_scaler_new(&r, &s));
    r.history_len = MXP_FP8_HISTORY_MAX + 1;
    EINVAL("history_len", mxp_fp8_scaler_new(&r, &s));
    r.history_len = UINT32_MAX;
    EINVAL("history_len", mxp_fp8_scaler_new(&r, &s));
    r = ok;
    r.algo = (mxp_amax_algo)99;
    EINVAL("algo", mxp_fp8_scaler_new(&r, &s));
    r.algo = (mxp_amax_algo)-1;
    EINVAL("algo", mxp_fp8_scaler_new(&r, &s));
    r = ok;
    r.margin = -1;
    EINVAL("margin", mxp_fp8_scaler_new(&r, &s));
    r.margin = MXP_FP8_MARGIN_MAX + 1;
    EINVAL("margin", mxp_fp8_scaler_new(&r, &s));
    UNTOUCHED_N(&s, sizeof s);
}

static mxp_fp8_scaler *new_scaler(void)
{
    const mxp_fp8_recipe r = {MXP_FLOAT8_E4M3FN, 4, MXP_AMAX_MAX, 0};
    mxp_fp8_scaler *s = NULL;
    assert_int_equal(mxp_fp8_scaler_new(&r, &s), MXP_OK);
    return s;
}

static void sweep_fp8_scaler_free(void) { mxp_fp8_scaler_free(NULL); }

static void sweep_fp8_scaler_recipe(void)
{
    const mxp_fp8_recipe r = mxp_fp8_scaler_recipe(NULL), zero = {0};
    assert_memory_equal(&r, &zero, sizeof r);
}

static void sweep_fp8_scaler_scale(void) { assert_true(mxp_fp8_scaler_scale(NULL) == 0.0f); }
static void sweep_fp8_scaler_scale_inv(void)
{
    assert_true(mxp_fp8_scaler_scale_inv(NULL) == 0.0f);
}
static void sweep_fp8_scaler_amax(void) { assert_true(mxp_fp8_scaler_amax(NULL) == 0.0f); }
static void sweep_fp8_scaler_nonfinite_steps(void)
{
    assert_int_equal(mxp_fp8_scaler_nonfinite_steps(NULL), 0);
}

static void sweep_fp8_quantize_delayed(void)
{
    mxp_fp8_scaler *s = new_scaler();
    unsigned char q[8];
    fill(q, sizeof q);
    EINVAL("q", mxp_fp8_quantize_delayed(NULL, qx, MXP_FLOAT32, 8, s));
    EINVAL("x", mxp_fp8_quantize_delayed(q, NULL, MXP_FLOAT32, 8, s));
    EINVAL("s|scaler", mxp_fp8_quantize_delayed(q, qx, MXP_FLOAT32, 8, NULL));
    FAILS(MXP_EUNSUPPORTED, "xt|99", mxp_fp8_quantize_delayed(q, qx, BAD_DTYPE, 8, s));
    FAILS(MXP_EUNSUPPORTED, "xt|-1", mxp_fp8_quantize_delayed(q, qx, NEG_DTYPE, 8, s));
    FAILS(MXP_EUNSUPPORTED, "xt|int32", mxp_fp8_quantize_delayed(q, qx, MXP_INT32, 8, s));
    EINVAL("n", mxp_fp8_quantize_delayed(q, qx, MXP_FLOAT32, SIZE_MAX, s));
    EINVAL("n", mxp_fp8_quantize_delayed(q, qx, MXP_FLOAT32, SIZE_MAX / 4, s));
    UNTOUCHED(q);
    assert_true(mxp_fp8_scaler_amax(s) == 0.0f); /* nothing merged */
    mxp_fp8_scaler_free(s);
}

static void sweep_fp8_scaler_set_amax(void)
{
    mxp_fp8_scaler *s = new_scaler();
    EINVAL("s|scaler", mxp_fp8_scaler_set_amax(NULL, 1.0f));
    EINVAL("amax", mxp_fp8_scaler_set_amax(s, -1.0f));
    EINVAL("amax", mxp_fp8_scaler_set_amax(s, -INFINITY));
    assert_true(mxp_fp8_scaler_amax(s) == 0.0f);
    ACCEPTS(mxp_fp8_scaler_set_amax(s, NAN)); /* documented: inf and NaN accepted */
    ACCEPTS(mxp_fp8_scaler_set_amax(s, -0.0f));
    mxp_fp8_scaler_free(s);
}

static void sweep_fp8_scaler_update(void) { EINVAL("s|scaler", mxp_fp8_scaler_update(NULL)); }

static void sweep_fp8_scaler_history(void)
{
    mxp_fp8_scaler *s = new_scaler();
    float h[4];
    fill(h, sizeof h);
    assert_int_equal(mxp_fp8_scaler_history(NULL, h, 4), 0);
    UNTOUCHED(h);
    assert_int_equal(mxp_fp8_scaler_history(s, NULL, 0), 4); /* out NULL with cap 0: measure */
    assert_int_equal(mxp_fp8_scaler_history(s, h, 0), 4);
    UNTOUCHED(h);
    /* out NULL with cap > 0 is a bad call: 0 and a message, nothing written */
    FAILS_AS((size_t)0, "out", mxp_fp8_scaler_history(s, NULL, 4));
    FAILS_AS((size_t)0, "out", mxp_fp8_scaler_history(s, NULL, SIZE_MAX));
    assert_int_equal(mxp_fp8_scaler_history(s, h, SIZE_MAX), 4);
    mxp_fp8_scaler_free(s);
}

static void sweep_fp8_scaler_save(void)
{
    mxp_fp8_scaler *s = new_scaler();
    char buf[512];
    fill(buf, sizeof buf);
    FAILS_AS(-1, "s|scaler", mxp_fp8_scaler_save(NULL, buf, sizeof buf));
    FAILS_AS(-1, "buf", mxp_fp8_scaler_save(s, NULL, sizeof buf));
    const int len = mxp_fp8_scaler_save(s, NULL, 0);
    assert_true(len > 0 && (size_t)len < sizeof buf);
    assert_int_equal(mxp_fp8_scaler_save(s, buf, 0), len);
    UNTOUCHED(buf);
    assert_int_equal(mxp_fp8_scaler_save(s, buf, SIZE_MAX), len);
    assert_int_equal(strlen(buf), (size_t)len);
    mxp_fp8_scaler_free(s);
}

static void sweep_fp8_scaler_restore(void)
{
    mxp_fp8_scaler *s = new_scaler(), *out;
    char text[512];
    assert_true(mxp_fp8_scaler_save(s, text, sizeof text) > 0);
    fill(&out, sizeof out);
    EINVAL("text", mxp_fp8_scaler_restore(NULL, &out));
    EINVAL("out", mxp_fp8_scaler_restore(text, NULL));
    FAILS(MXP_EPARSE, "tag|mxp-fp8-scaler/1|field", mxp_fp8_scaler_restore("garbage", &out));
    UNTOUCHED_N(&out, sizeof out);
    mxp_fp8_scaler_free(s);
}

static void sweep_quantize_mx_(bool ex)
{
    unsigned char q[8];
    uint8_t scales[2];
    fill(q, sizeof q);
    fill(scales, sizeof scales);
#define QM(q_, fmt_, s_, x_, xt_, r_, c_, rr_)                                                     \
    (ex ? mxp_quantize_mx_ex(q_, fmt_, s_, x_, xt_, r_, c_, rr_, MXP_QUANT_ONE_PASS)               \
        : mxp_quantize_mx(q_, fmt_, s_, x_, xt_, r_, c_, rr_))
    EINVAL("q", QM(NULL, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT32, 2, 4, MXP_MX_RCEIL));
    EINVAL("scales", QM(q, MXP_FLOAT8_E4M3FN, NULL, qx, MXP_FLOAT32, 2, 4, MXP_MX_RCEIL));
    EINVAL("x", QM(q, MXP_FLOAT8_E4M3FN, scales, NULL, MXP_FLOAT32, 2, 4, MXP_MX_RCEIL));
    EINVAL("fmt|99", QM(q, BAD_DTYPE, scales, qx, MXP_FLOAT32, 2, 4, MXP_MX_RCEIL));
    EINVAL("fmt|-1", QM(q, NEG_DTYPE, scales, qx, MXP_FLOAT32, 2, 4, MXP_MX_RCEIL));
    EINVAL("fmt|float32", QM(q, MXP_FLOAT32, scales, qx, MXP_FLOAT32, 2, 4, MXP_MX_RCEIL));
    FAILS(MXP_EUNSUPPORTED, "xt|99",
          QM(q, MXP_FLOAT8_E4M3FN, scales, qx, BAD_DTYPE, 2, 4, MXP_MX_RCEIL));
    FAILS(MXP_EUNSUPPORTED, "xt|uint8",
          QM(q, MXP_FLOAT8_E4M3FN, scales, qx, MXP_UINT8, 2, 4, MXP_MX_RCEIL));
    EINVAL("r|rounding|99",
           QM(q, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT32, 2, 4, (mxp_mx_rounding)99));
    EINVAL("r|rounding|-1",
           QM(q, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT32, 2, 4, (mxp_mx_rounding)-1));
    EINVAL("rows|overflow|overflows",
           QM(q, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT32, SIZE_MAX, 4, MXP_MX_RCEIL));
    EINVAL("cols|overflow|overflows",
           QM(q, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT32, 2, SIZE_MAX, MXP_MX_RCEIL));
    if (ex)
        EINVAL("flags", mxp_quantize_mx_ex(q, MXP_FLOAT8_E4M3FN, scales, qx, MXP_FLOAT32, 2, 4,
                                           MXP_MX_RCEIL, 2u));
#undef QM
    UNTOUCHED(q);
    UNTOUCHED(scales);
}
static void sweep_quantize_mx(void) { sweep_quantize_mx_(false); }
static void sweep_quantize_mx_ex(void) { sweep_quantize_mx_(true); }

static void sweep_dequantize_mx(void)
{
    const unsigned char q[8] = {0x38, 0x40, 0x44, 0x48, 0x30, 0x28, 0xC8, 0x40};
    const uint8_t scales[2] = {127, 128};
    float y[8];
    fill(y, sizeof y);
    EINVAL("y", mxp_dequantize_mx(NULL, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, scales, 2, 4));
    EINVAL("q", mxp_dequantize_mx(y, MXP_FLOAT32, NULL, MXP_FLOAT8_E4M3FN, scales, 2, 4));
    EINVAL("scales", mxp_dequantize_mx(y, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, NULL, 2, 4));
    EINVAL("yt|99", mxp_dequantize_mx(y, BAD_DTYPE, q, MXP_FLOAT8_E4M3FN, scales, 2, 4));
    EINVAL("yt|bool", mxp_dequantize_mx(y, MXP_BOOL, q, MXP_FLOAT8_E4M3FN, scales, 2, 4));
    EINVAL("fmt|99", mxp_dequantize_mx(y, MXP_FLOAT32, q, BAD_DTYPE, scales, 2, 4));
    EINVAL("fmt|-1", mxp_dequantize_mx(y, MXP_FLOAT32, q, NEG_DTYPE, scales, 2, 4));
    EINVAL("fmt|float16", mxp_dequantize_mx(y, MXP_FLOAT32, q, MXP_FLOAT16, scales, 2, 4));
    EINVAL("rows|overflow|overflows",
           mxp_dequantize_mx(y, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, scales, SIZE_MAX, 4));
    EINVAL("cols|overflow|overflows",
           mxp_dequantize_mx(y, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, scales, 2, SIZE_MAX));
    EINVAL("rows|overflow|overflows",
           mxp_dequantize_mx(y, MXP_FLOAT64, q, MXP_FLOAT8_E4M3FN, scales, SIZE_MAX / 8, 1));
    UNTOUCHED(y);
}

/* ---- the table ---------------------------------------------------------------------------- */

typedef struct sweep_row {
    const char *name; /* the public function swept */
    void (*sweep)(void);
} sweep_row;

#define ROW(f)                                                                                     \
    {                                                                                              \
        "mxp_" #f, sweep_##f                                                                       \
    }
/* In the order of mixprec.h's headers: common, status, dtype, convert, tensor, policy,
 * policy_map, loss_scale, quant. */
static const sweep_row sweeps[] = {
    /* common.h */
    ROW(version),
    ROW(version_number),
    /* status.h */
    ROW(status_name),
    ROW(last_error),
    ROW(clear_error),
    /* dtype.h */
    ROW(dtype_name),
    ROW(dtype_parse),
    ROW(dtype_size),
    ROW(dtype_is_floating),
    /* convert.h */
    ROW(convert),
    ROW(convert_ex),
    ROW(isa),
    ROW(isa_requested),
    ROW(isa_fallback),
    /* tensor.h */
    ROW(tensor_numel),
    ROW(tensor_nbytes),
    ROW(tensor_cast_into),
    ROW(tree_new),
    ROW(tree_free),
    ROW(tree_add),
    ROW(tree_add_borrowed),
    ROW(tree_count),
    ROW(tree_at),
    ROW(tree_get),
    ROW(tree_find),
    ROW(tree_nbytes),
    ROW(tree_numel),
    ROW(tree_clone),
    ROW(tree_cast),
    ROW(tree_cast_ex),
    ROW(tree_cast_into),
    ROW(tree_cast_into_ex),
    /* policy.h */
    ROW(policy_parse),
    ROW(policy_format),
    ROW(policy_equal),
    ROW(policy_validate),
    ROW(quant_name),
    ROW(set_default_policy),
    ROW(default_policy),
    ROW(set_backend),
    ROW(get_backend),
    ROW(half_dtype),
    ROW(policy_cast_to_param),
    ROW(policy_cast_to_compute),
    ROW(policy_cast_to_output),
    ROW(policy_cast_to_param_into),
    ROW(policy_cast_to_compute_into),
    ROW(policy_cast_to_output_into),
    ROW(tree_cast_to_full),
    ROW(tree_cast_to_half),
    ROW(tree_cast_to_full_into),
    ROW(tree_cast_to_half_into),
    /* policy_map.h */
    ROW(policy_map_new),
    ROW(policy_map_free),
    ROW(policy_map_set),
    ROW(policy_map_get),
    ROW(policy_map_match),
    ROW(policy_map_remove),
    ROW(policy_map_count),
    ROW(policy_map_entry),
    ROW(policy_map_default),
    ROW(policy_map_equal),
    ROW(policy_map_set_cache_capacity),
    ROW(policy_map_format),
    ROW(policy_map_parse),
    ROW(policy_map_load),
    ROW(policy_map_save),
    ROW(policy_map_apply),
    /* loss_scale.h */
    ROW(loss_scale_noop),
    ROW(loss_scale_static),
    ROW(loss_scale_dynamic),
    ROW(loss_scale_static_ex),
    ROW(loss_scale_dynamic_ex),
    ROW(loss_scale_adjust),
    ROW(loss_scale_validate),
    ROW(loss_scale_is_valid),
    ROW(loss_scale_at_min),
    ROW(loss_scale_scale),
    ROW(all_finite),
    ROW(all_finite_s),
    ROW(unscale_check),
    ROW(unscale_check_s),
    ROW(unscale_check_into),
    ROW(unscale_check_into_s),
    ROW(select),
    ROW(loss_scale_adjust_reduce),
    ROW(loss_scale_save),
    ROW(loss_scale_restore),
    ROW(tree_all_finite),
    ROW(tree_unscale_check),
    ROW(tree_select),
    /* quant.h */
    ROW(qlayout_nscales),
    ROW(quantize_int8),
    ROW(dequantize_int8),
    ROW(quantize_int4),
    ROW(dequantize_int4),
    ROW(int4_pack),
    ROW(int4_unpack),
    ROW(matmul_int8),
    ROW(quantize_fp8),
    ROW(dequantize_fp8),
    ROW(fp8_recipe_default),
    ROW(fp8_scaler_new),
    ROW(fp8_scaler_free),
    ROW(fp8_scaler_recipe),
    ROW(fp8_scaler_scale),
    ROW(fp8_scaler_scale_inv),
    ROW(fp8_quantize_delayed),
    ROW(fp8_scaler_amax),
    ROW(fp8_scaler_set_amax),
    ROW(fp8_scaler_update),
    ROW(fp8_scaler_nonfinite_steps),
    ROW(fp8_scaler_history),
    ROW(fp8_scaler_save),
    ROW(fp8_scaler_restore),
    ROW(quantize_mx),
    ROW(quantize_int8_ex),
    ROW(quantize_int4_ex),
    ROW(quantize_fp8_ex),
    ROW(quantize_mx_ex),
    ROW(dequantize_mx),
};
#undef ROW
#define N_SWEEPS (sizeof sweeps / sizeof sweeps[0])

/* cmocka runs each row as a test named after its function; the state is the row. */
static void run_row(void **state)
{
    const sweep_row *row = *state;
    current_row = row->name;
    row->sweep();
    current_row = "";
}

/* ---- every public function has a row ------------------------------------------------------ */

/* The whole file at path, NUL-terminated (the caller frees), or NULL. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += got;
        if (cap - len - 1 == 0) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) free(buf);
            buf = grown;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

/* Blank out comments and preprocessor lines (in place), so that only declarations remain:
 * common.h's "#define MXP_API ..." and comments mentioning MXP_API are not declarations. */
static void strip_c(char *s)
{
    bool line_start = true;
    for (char *p = s; *p;) {
        if (p[0] == '/' && p[1] == '*') {
            char *e = strstr(p + 2, "*/");
            e = e ? e + 2 : p + strlen(p);
            for (; p < e; p++)
                if (*p != '\n') *p = ' ';
        } else if (p[0] == '/' && p[1] == '/') {
            for (; *p && *p != '\n'; p++) *p = ' ';
        } else if (line_start && *p == '#') {
            /* a directive, with its backslash continuations */
            for (; *p && !(*p == '\n' && p[-1] != '\\'); p++)
                if (*p != '\n') *p = ' ';
        } else {
            if (*p == '\n')
                line_start = true;
            else if (*p != ' ' && *p != '\t')
                line_start = false;
            p++;
        }
    }
}

static bool is_ident(char c)
{
    return c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
}

/* Append to names[*n] the function name of every MXP_API declaration in text: the identifier
 * just before the first '(' after the macro. */
static void collect_api(char *text, char names[][64], size_t *n, size_t max)
{
    strip_c(text);
    for (char *p = strstr(text, "MXP_API"); p; p = strstr(p + 7, "MXP_API")) {
        if ((p > text && is_ident(p[-1])) || is_ident(p[7])) continue;
        char *paren = strchr(p, '(');
        assert_non_null(paren);
        char *e = paren;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n')) e--;
        char *b = e;
        while (b > p && is_ident(b[-1])) b--;
        assert_true(e > b && (size_t)(e - b) < 64);
        assert_true(*n < max);
        snprintf(names[(*n)++], 64, "%.*s", (int)(e - b), b);
    }
}

static void test_table_matches_headers(void **state)
{
    (void)state;
    const char *root = getenv("MXP_SOURCE_DIR");
    if (!root || !*root)
        fail_msg("MXP_SOURCE_DIR is not set (tests/CMakeLists.txt sets it for every test)");
    char path[4096];
    snprintf(path, sizeof path, "%s/include/mixprec.h", root);
    char *umbrella = read_text(path);
    if (!umbrella) fail_msg("cannot read %s", path);
    static char names[512][64];
    size_t n = 0, headers = 0;
    /* the umbrella's own declarations, then every header it includes */
    char *copy = strdup(umbrella);
    assert_non_null(copy);
    collect_api(copy, names, &n, 512);
    free(copy);
    for (const char *p = strstr(umbrella, "#include \""); p; p = strstr(p + 1, "#include \"")) {
        const char *b = p + 10, *e = strchr(b, '"');
        assert_non_null(e);
        snprintf(path, sizeof path, "%s/include/%.*s", root, (int)(e - b), b);
        char *text = read_text(path);
        if (!text) fail_msg("cannot read %s", path);
        collect_api(text, names, &n, 512);
        free(text);
        headers++;
    }
    free(umbrella);
    assert_true(headers >= 9 && n >= 100); /* the parse found the headers and their functions */
    size_t missing = 0, stale = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < N_SWEEPS && strcmp(sweeps[k].name, names[i]) != 0) k++;
        if (k == N_SWEEPS) {
            print_error("public function %s has no bad-argument sweep in tests/test_bad_args.c\n",
                        names[i]);
            missing++;
        }
    }
    for (size_t k = 0; k < N_SWEEPS; k++) {
        size_t i = 0;
        while (i < n && strcmp(sweeps[k].name, names[i]) != 0) i++;
        if (i == n) {
            print_error("sweep %s names no MXP_API function of the headers\n", sweeps[k].name);
            stale++;
        }
    }
    if (missing || stale)
        fail_msg("%zu public functions without a sweep, %zu sweeps of no function", missing, stale);
    assert_int_equal(n, N_SWEEPS);
}

/* MXP_TEST_ONLY=mxp_name runs that function's sweep alone (under ASan a crash ends the program,
 * so a crashing row would otherwise hide the rows after it). */
int main(void)
{
    static struct CMUnitTest tests[N_SWEEPS + 1];
    const char *only = getenv("MXP_TEST_ONLY");
    size_t n = 0;
    if (!only || !*only)
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_table_matches_headers);
    for (size_t i = 0; i < N_SWEEPS; i++)
        if (!only || !*only || strcmp(only, sweeps[i].name) == 0)
            tests[n++] =
                (struct CMUnitTest){sweeps[i].name, run_row, NULL, NULL, (void *)&sweeps[i]};
    if (n == 0) {
        fprintf(stderr, "MXP_TEST_ONLY=%s names no sweep\n", only);
        return 1;
    }
    return _cmocka_run_group_tests("bad_args", tests, n, NULL, NULL);
}
