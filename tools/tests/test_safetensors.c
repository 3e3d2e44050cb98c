/*
 * test_safetensors.c - the safetensors reader and writer of tools/safetensors.c.
 *
 * Every validation rule gets a hand-made file (header text written out literally here, data
 * bytes counted by hand) that must be refused with MXP_EFORMAT and a message naming the rule
 * and the tensor; well-formed files (including the reference implementation's own documented
 * example) must be accepted. The writer's output is compared byte for byte with a file spelled
 * out by hand from the format's rules (order: dtype descending then name; compact JSON; spaces
 * to a multiple of 8; "format":"pt" added). Sharded checkpoints and the cross-file rules use
 * files in a temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "safetensors.h"

/* A file: 8-byte LE length of `header`, the header, then `ndata` bytes of value 0xAB. */
static unsigned char *mkfile(const char *header, size_t ndata, size_t *size)
{
    size_t n = strlen(header);
    unsigned char *b = malloc(8 + n + ndata + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, header, n);
    memset(b + 8 + n, 0xAB, ndata);
    *size = 8 + n + ndata;
    return b;
}

/* Expect header+data to be refused with MXP_EFORMAT and a message containing each of the
 * NULL-terminated strings. The strings reach the function as an array, not as variadic
 * arguments: a bare NULL after the last typed argument of a variadic call is undefined where
 * NULL is a plain 0 (cppcheck's varFuncNullUB). */
static void expect_bad_list(const char *header, size_t ndata, const char *const *want)
{
    size_t size;
    unsigned char *b = mkfile(header, ndata, &size);
    mxst_file *f = (mxst_file *)(uintptr_t)0x1;
    mxp_status s = mxst_open_mem(b, size, "bad.safetensors", false, &f);
    if (s != MXP_EFORMAT) print_error("accepted or wrong status %d for header %s\n", s, header);
    assert_int_equal(s, MXP_EFORMAT);
    assert_ptr_equal(f, (mxst_file *)(uintptr_t)0x1); /* untouched */
    const char *msg = mxst_last_error();
    assert_non_null(strstr(msg, "bad.safetensors"));
    for (; *want; want++) {
        if (!strstr(msg, *want)) print_error("message '%s' lacks '%s'\n", msg, *want);
        assert_non_null(strstr(msg, *want));
    }
    free(b);
}
#define expect_bad(header, ndata, ...) expect_bad_list((header), (ndata), (const char *const[]){__VA_ARGS__})

static unsigned char *g_keep[64];
static int g_nkeep;

static mxst_file *expect_good(const char *header, size_t ndata)
{
    size_t size;
    unsigned char *b = mkfile(header, ndata, &size);
    mxst_file *f = NULL;
    mxp_status s = mxst_open_mem(b, size, "good.safetensors", false, &f);
    if (s != MXP_OK) print_error("refused: %s\n", mxst_last_error());
    assert_int_equal(s, MXP_OK);
    /* the buffer must outlive f: main frees them all at the end */
    assert_true(g_nkeep < 64);
    g_keep[g_nkeep++] = b;
    return f;
}

static void test_dtypes(void **state)
{
    (void)state;
    /* the 22 names and bit sizes of the reference implementation (safetensors Dtype) */
    static const struct {
        const char *name;
        unsigned bits;
    } ref[] = {{"BOOL", 8},    {"F4", 4},          {"F6_E2M3", 6},     {"F6_E3M2", 6},
               {"U8", 8},      {"I8", 8},          {"F8_E5M2", 8},     {"F8_E4M3", 8},
               {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"I16", 16},
               {"U16", 16},    {"F16", 16},        {"BF16", 16},       {"I32", 32},
               {"U32", 32},    {"F32", 32},        {"C64", 64},        {"F64", 64},
               {"I64", 64},    {"U64", 64}};
    assert_int_equal(sizeof ref / sizeof ref[0], MXST_DTYPE_COUNT);
    for (int i = 0; i < MXST_DTYPE_COUNT; i++) {
        mxst_dtype d;
        assert_true(mxst_dtype_parse(ref[i].name, &d));
        assert_int_equal(d, i); /* the reference's order */
        assert_int_equal(mxst_dtype_bits(d), ref[i].bits);
        assert_string_equal(mxst_dtype_name(d), ref[i].name);
        /* every name is accepted in a file, with a size matching its bits */
        char h[256];
        snprintf(h, sizeof h, "{\"t\":{\"dtype\":\"%s\",\"shape\":[2,4],\"data_offsets\":[0,%u]}}",
                 ref[i].name, ref[i].bits);
        mxst_close(expect_good(h, ref[i].bits));
    }
    assert_false(mxst_dtype_parse("f32", NULL));
    assert_false(mxst_dtype_parse("F8_E4M3FN", NULL));
    mxp_dtype m;
    assert_true(mxst_dtype_to_mxp(MXST_F8_E4M3, &m));
    assert_int_equal(m, MXP_FLOAT8_E4M3FN);
    assert_false(mxst_dtype_to_mxp(MXST_F8_E8M0, &m));
    for (int i = 0; i < MXP_DTYPE_COUNT; i++) {
        mxst_dtype d;
        assert_true(mxst_dtype_from_mxp((mxp_dtype)i, &d));
        assert_true(mxst_dtype_to_mxp(d, &m));
        assert_int_equal(m, i);
    }
}

static void test_good_files(void **state)
{
    (void)state;
    /* the reference's documented example: I32 [2,2], 16 bytes */
    mxst_file *f =
        expect_good("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16);
    assert_int_equal(mxst_count(f), 1);
    const mxst_tensor *t = mxst_find(f, "test");
    assert_non_null(t);
    assert_int_equal(t->dtype, MXST_I32);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->numel, 4);
    assert_int_equal(t->nbytes, 16);
    unsigned char buf[16];
    assert_int_equal(mxst_read(f, t, 4, buf, 12), MXP_OK);
    for (int i = 0; i < 12; i++) assert_int_equal(buf[i], 0xAB);
    assert_int_equal(mxst_read(f, t, 8, buf, 9), MXP_EINVAL);
    assert_null(mxst_find(f, "nope"));
    mxst_close(f);

    /* blanks around the object, metadata, scalars, empty tensors, out-of-order entries */
    f = expect_good("  \n{\"__metadata__\":{\"format\":\"pt\",\"k\":\"v\"},"
                    "\"b\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[4,10]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                    "\"z\":{\"dtype\":\"F64\",\"shape\":[0,7],\"data_offsets\":[10,10]}}  \t",
                    10);
    assert_int_equal(mxst_count(f), 3);
    assert_string_equal(mxst_tensor_at(f, 0)->name, "a"); /* offset order */
    assert_string_equal(mxst_tensor_at(f, 1)->name, "b");
    assert_string_equal(mxst_tensor_at(f, 2)->name, "z");
    assert_int_equal(mxst_tensor_at(f, 0)->numel, 1);
    assert_int_equal(mxst_tensor_at(f, 2)->numel, 0);
    assert_int_equal(mxst_metadata_count(f), 2);
    assert_string_equal(mxst_metadata_get(f, "k"), "v");
    mxst_close(f);

    /* no tensors at all, empty data */
    mxst_close(expect_good("{}", 0));
    mxst_close(expect_good("{\"__metadata__\":{}}", 0));
    /* F4: 2 elements per byte; [3,2] = 6 elements = 3 bytes */
    mxst_close(expect_good("{\"q\":{\"dtype\":\"F4\",\"shape\":[3,2],\"data_offsets\":[0,3]}}", 3));
    /* huge shape with a zero dimension: 0 bytes */
    mxst_close(expect_good("{\"q\":{\"dtype\":\"F32\",\"shape\":[0,9223372036854775807],"
                           "\"data_offsets\":[0,0]}}",
                           0));
}

static void test_bad_files(void **state)
{
    (void)state;
    const char *T1 = "\"dtype\":\"F32\",\"shape\":[2]";
    char h[512];
    /* truncated: the tensor needs 8 bytes, the file has 5 */
    snprintf(h, sizeof h, "{\"w\":{%s,\"data_offsets\":[0,8]}}", T1);
    expect_bad(h, 5, "'w'", "rule: truncated", NULL);
    /* trailing bytes */
    expect_bad(h, 11, "3 trailing bytes", "rule: trailing", NULL);
    /* overlapping */
    snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[0,8]},\"b\":{%s,\"data_offsets\":[4,12]}}",
             T1, T1);
    expect_bad(h, 12, "'b'", "'a'", "rule: overlap", NULL);
    /* gapped */
    snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[0,8]},\"b\":{%s,\"data_offsets\":[12,20]}}",
             T1, T1);
    expect_bad(h, 20, "'b'", "gap of 4 bytes", "rule: gap", NULL);
    /* first tensor not at 0 */
    snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[4,12]}}", T1);
    expect_bad(h, 12, "'a'", "rule: gap", NULL);
    /* offsets out of range (far past the end of the file) */
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[1000000000000],"
               "\"data_offsets\":[0,1000000000000]}}",
               4, "'a'", "rule: truncated", NULL);
    /* a name from the file in a message: C0 and C1 controls as '?', cut after 150 bytes of the
     * original, never inside a UTF-8 character (here U+00E9, 2 bytes, straddling byte 150) */
    {
        char nm[400];
        int k = snprintf(nm, sizeof nm, "x\\u001b[31m\\u009b");
        for (int i = 0; i < 141; i++) nm[k++] = 'y'; /* bytes 8-148 (x, ESC, [31m, C1: 0-7) */
        memcpy(nm + k, "\xc3\xa9zzzz", 7);         /* U+00E9 is bytes 149-150: past the cut */
        nm[k + 7] = '\0';
        snprintf(h, sizeof h, "{\"%s\":{%s,\"data_offsets\":[0,8]}}", nm, T1);
        char want[200];
        int w = snprintf(want, sizeof want, "'x?[31m?");
        for (int i = 0; i < 141; i++) want[w++] = 'y';
        strcpy(want + w, "...'");
        expect_bad(h, 5, want, "rule: truncated", NULL);
    }
    /* end before begin */
    snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[8,0]}}", T1);
    expect_bad(h, 8, "'a'", "rule: offsets", NULL);
    /* shape / size mismatch */
    snprintf(h, sizeof h, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}");
    expect_bad(h, 12, "'w'", "hold 12 bytes but F32 [2, 2] needs 16", "rule: size", NULL);
    /* bad dtype */
    expect_bad("{\"w\":{\"dtype\":\"F13\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "'w'",
               "unknown dtype 'F13'", "rule: dtype", NULL);
    expect_bad("{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "rule: dtype",
               NULL);
    expect_bad("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "rule: dtype",
               NULL);
    /* non-integer numbers, negative numbers, wrong types */
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
               "shape[0] is a non-integer number", "rule: shape", NULL);
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 4,
               "data_offsets[1] is a non-integer number", "rule: offsets", NULL);
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4e0]}}", 4,
               "rule: offsets", NULL);
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "negative",
               "rule: shape", NULL);
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4,
               "rule: shape", NULL);
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4,
               "rule: offsets", NULL);
    /* numbers past 64 bits */
    expect_bad(
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999]}}", 4,
        "rule: json", NULL);
    /* huge shapes whose product overflows, and element bits that overflow */
    expect_bad(
        "{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0,
        "'w'", "rule: overflow", NULL);
    expect_bad("{\"w\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}",
               0, "'w'", "rule: overflow", NULL);
    /* an overflowing product is refused even when a later dimension is 0 */
    expect_bad("{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,2,0],"
               "\"data_offsets\":[0,0]}}",
               0, "rule: overflow", NULL);
    /* sub-byte sizes that are not whole bytes */
    expect_bad("{\"w\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2,
               "rule: whole-bytes", NULL);
    /* entries: missing / extra keys, not an object */
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "missing 'data_offsets'",
               "rule: entry", NULL);
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
               "unexpected key 'x'", "rule: entry", NULL);
    expect_bad("{\"w\":[1,2]}", 0, "rule: entry", NULL);
    /* duplicate keys at every level */
    expect_bad("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
               "\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
               1, "rule: duplicate-key", NULL);
    expect_bad("{\"w\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
               1, "rule: duplicate-key", NULL);
    expect_bad("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0, "rule: duplicate-key", NULL);
    /* metadata must map strings to strings */
    expect_bad("{\"__metadata__\":{\"a\":1}}", 0, "'a'", "rule: metadata", NULL);
    expect_bad("{\"__metadata__\":[\"a\"]}", 0, "rule: metadata", NULL);
    /* NUL in a name or value */
    expect_bad("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
               "rule: json", NULL);
    expect_bad("{\"__metadata__\":{\"a\":\"x\\u0000\"}}", 0, "rule: json", NULL);
    /* not an object / not JSON / trailing garbage / invalid UTF-8 */
    expect_bad("[]", 0, "rule: json-object", NULL);
    expect_bad("{\"a\":", 0, "rule: json", NULL);
    expect_bad("{} x", 0, "rule: json", NULL);
    expect_bad("{}{}", 0, "rule: json", NULL);
    expect_bad("{\"\xff\":1}", 0, "rule: json", NULL);
    expect_bad("", 0, "rule: json", NULL);
    expect_bad("   ", 0, "rule: json", NULL);
    expect_bad("\"str\"", 0, "rule: json", NULL);

    /* header length past the end, over the limit, file shorter than 8 bytes */
    unsigned char b[16] = {0};
    mxst_file *f = NULL;
    b[0] = 9; /* 9 header bytes, 8 present */
    memcpy(b + 8, "{}      ", 8);
    assert_int_equal(mxst_open_mem(b, 16, "x", false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: header-length"));
    uint64_t big = 100000001;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(big >> (8 * i));
    assert_int_equal(mxst_open_mem(b, 16, "x", false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: header-limit"));
    memset(b, 0xFF, 8); /* 2^64 - 1 */
    assert_int_equal(mxst_open_mem(b, 16, "x", false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: header-limit"));
    assert_int_equal(mxst_open_mem(b, 7, "x", false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: header-length"));
    b[0] = 8;
    memset(b + 1, 0, 7);
    assert_int_equal(mxst_open_mem(b, 16, "x", false, &f), MXP_OK); /* 8 bytes "{}      " */
    mxst_close(f);
    f = NULL;

    /* strict mode: data start not a multiple of 8, misaligned element */
    size_t size;
    unsigned char *s1 = mkfile("{}", 0, &size); /* header of 2 bytes */
    assert_int_equal(mxst_open_mem(s1, size, "s", false, &f), MXP_OK);
    mxst_close(f);
    assert_int_equal(mxst_open_mem(s1, size, "s", true, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: strict-alignment"));
    free(s1);
    char hs[200];
    int hl = snprintf(hs, sizeof hs,
                      "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":"
                      "[0,2]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}");
    while (hl % 8) hs[hl++] = ' ';
    hs[hl] = '\0';
    s1 = mkfile(hs, 6, &size);
    assert_int_equal((size - 6) % 8, 0);
    assert_int_equal(mxst_open_mem(s1, size, "s", false, &f), MXP_OK);
    mxst_close(f);
    assert_int_equal(mxst_open_mem(s1, size, "s", true, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "'b'"));
    free(s1);
}

/* A JSON header whose parse tree would need far more memory than the file holds. */
static void test_memory_bound(void **state)
{
    (void)state;
    size_t n = 3u << 20; /* 3 MiB of "[0,0,0,...]" in a shape */
    char *h = malloc(n + 64);
    size_t j = (size_t)sprintf(h, "{\"w\":{\"dtype\":\"U8\",\"data_offsets\":[0,0],\"shape\":[");
    while (j < n) {
        memcpy(h + j, "0,", 2);
        j += 2;
    }
    strcpy(h + j, "0]}}");
    size_t size;
    unsigned char *b = mkfile(h, 0, &size);
    mxst_file *f = NULL;
    assert_int_equal(mxst_open_mem(b, size, "big", false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: header-memory"));
    free(b);
    free(h);

    /* One long string, over the budget while jansson lexes it. jansson 2.14 ignored the failed
     * append to its string buffer and wrote past the buffer: a valid 1.1 MB file crashed every
     * subcommand (an audit, 2026-11-28). Now the parse is abandoned cleanly. Then the same
     * header with 4 MB of data after it, in budget: accepted, the string intact. */
    const size_t L = 1100000;
    h = malloc(L + 256);
    j = (size_t)sprintf(h, "{\"__metadata__\":{\"k\":\"");
    memset(h + j, 'x', L);
    j += L;
    strcpy(h + j, "\"},\"t\":{\"dtype\":\"F32\",\"shape\":[1000000],\"data_offsets\":[0,4000000]}}");
    b = mkfile(h, 0, &size);
    f = NULL;
    assert_int_equal(mxst_open_mem(b, size, "long", false, &f), MXP_EFORMAT); /* data missing too */
    free(b);
    char *hs = malloc(L + 64);
    j = (size_t)sprintf(hs, "{\"__metadata__\":{\"k\":\"");
    memset(hs + j, 'x', L);
    strcpy(hs + j + L, "\"}}");
    b = mkfile(hs, 0, &size); /* nothing but the string: over the 1.1 MB budget */
    assert_int_equal(mxst_open_mem(b, size, "long", false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: header-memory"));
    free(b);
    b = mkfile(h, 4000000, &size);
    assert_int_equal(mxst_open_mem(b, size, "long", false, &f), MXP_OK);
    const char *v = mxst_metadata_get(f, "k");
    assert_non_null(v);
    assert_int_equal(strlen(v), L);
    assert_true(v[0] == 'x' && v[L - 1] == 'x');
    mxst_close(f);
    free(b);
    free(h);
    free(hs);
}

/* A FIFO named as the input is refused at once: opening it for reading used to wait for a writer */
static void test_fifo_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/mxst_fifo_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/f.safetensors", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    mxst_file *f = NULL;
    assert_int_equal(mxst_open(path, false, &f), MXP_EIO);
    assert_non_null(strstr(mxst_last_error(), "not a regular file"));
    assert_null(f);
    unlink(path);
    rmdir(dir);
}

static char g_dir[256];

static void slurp(const char *path, unsigned char **data, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    *data = malloc((size_t)n + 1);
    assert_int_equal(fread(*data, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *size = (size_t)n;
}

static void test_writer_layout(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/w.safetensors", g_dir);
    unlink(path);
    uint64_t s2[] = {2}, s3[] = {1, 3};
    mxst_spec specs[] = {
        {"b", MXST_F16, 1, s2},
        {"a", MXST_F16, 1, s2},
        {"i", MXST_I8, 2, s3},
        {"c", MXST_F32, 0, NULL},
    };
    const char *meta[] = {"k", "v\"q"};
    mxst_writer *w = NULL;
    assert_int_equal(mxst_writer_begin(path, specs, 4, meta, 1, 0, &w), MXP_OK);
    /* order: F32 (17) > F16 (13) > I8 (5); names ascending within F16 */
    assert_int_equal(mxst_writer_order(w, 0), 3);
    assert_int_equal(mxst_writer_order(w, 1), 1);
    assert_int_equal(mxst_writer_order(w, 2), 0);
    assert_int_equal(mxst_writer_order(w, 3), 2);
    assert_int_equal(mxst_writer_data_size(w), 4 + 4 + 4 + 3);
    assert_int_equal(mxst_writer_current(w), 3);
    const unsigned char data[15] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    assert_int_equal(mxst_writer_write(w, data, 6), MXP_OK); /* spans c and a */
    assert_int_equal(mxst_writer_current(w), 1);
    /* nothing at the final path yet */
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
    assert_int_equal(mxst_writer_write(w, data + 6, 9), MXP_OK);
    assert_int_equal(mxst_writer_current(w), 4);
    assert_int_equal(mxst_writer_write(w, data, 1), MXP_EINVAL); /* too many bytes */
    mxst_writer_abort(w);
    assert_int_not_equal(stat(path, &sb), 0);

    assert_int_equal(mxst_writer_begin(path, specs, 4, meta, 1, 0, &w), MXP_OK);
    assert_int_equal(mxst_writer_write(w, data, 15), MXP_OK);
    assert_int_equal(mxst_writer_commit(w), MXP_OK);

    const char *want = "{\"__metadata__\":{\"k\":\"v\\\"q\",\"format\":\"pt\"},"
                       "\"c\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                       "\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]},"
                       "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]},"
                       "\"i\":{\"dtype\":\"I8\",\"shape\":[1,3],\"data_offsets\":[12,15]}}";
    size_t wl = strlen(want), padded = (wl + 7) / 8 * 8;
    unsigned char *got;
    size_t gs;
    slurp(path, &got, &gs);
    assert_int_equal(gs, 8 + padded + 15);
    for (int i = 0; i < 8; i++) assert_int_equal(got[i], (padded >> (8 * i)) & 0xFF);
    assert_memory_equal(got + 8, want, wl);
    for (size_t i = wl; i < padded; i++) assert_int_equal(got[8 + i], ' ');
    assert_memory_equal(got + 8 + padded, data, 15);
    /* and it reads back, strictly */
    mxst_file *f = NULL;
    assert_int_equal(mxst_open(path, true, &f), MXP_OK);
    assert_int_equal(mxst_count(f), 4);
    assert_string_equal(mxst_metadata_get(f, "format"), "pt");
    unsigned char r[3];
    assert_int_equal(mxst_read(f, mxst_find(f, "i"), 0, r, 3), MXP_OK);
    assert_memory_equal(r, data + 12, 3);
    mxst_close(f);
    free(got);

    /* an existing file is refused without MXST_OVERWRITE, replaced with it */
    assert_int_equal(mxst_writer_begin(path, specs, 4, meta, 1, 0, &w), MXP_EEXIST);
    assert_int_equal(mxst_writer_begin(path, specs, 4, NULL, 0, MXST_OVERWRITE, &w), MXP_OK);
    assert_int_equal(mxst_writer_write(w, data, 14), MXP_OK);
    assert_int_equal(mxst_writer_commit(w), MXP_EINVAL); /* incomplete: aborted */
    slurp(path, &got, &gs);
    assert_int_equal(gs, 8 + padded + 15); /* old file intact */
    free(got);

    /* invalid specs */
    mxst_spec dup[] = {{"x", MXST_F16, 1, s2}, {"x", MXST_F32, 1, s2}};
    assert_int_equal(mxst_writer_begin(path, dup, 2, NULL, 0, MXST_OVERWRITE, &w), MXP_EINVAL);
    mxst_spec md[] = {{"__metadata__", MXST_F16, 1, s2}};
    assert_int_equal(mxst_writer_begin(path, md, 1, NULL, 0, MXST_OVERWRITE, &w), MXP_EINVAL);
    uint64_t odd[] = {3};
    mxst_spec f4[] = {{"x", MXST_F4, 1, odd}};
    assert_int_equal(mxst_writer_begin(path, f4, 1, NULL, 0, MXST_OVERWRITE, &w), MXP_EINVAL);
    const char *dm[] = {"a", "1", "a", "2"};
    assert_int_equal(mxst_writer_begin(path, specs, 1, dm, 2, MXST_OVERWRITE, &w), MXP_EINVAL);
    /* names and metadata must be UTF-8 (JSON strings): the message says which, not "or out of
     * memory" as it did when the header's build failed for either reason */
    mxst_spec latin1[] = {{"caf\xE9", MXST_F16, 1, s2}};
    assert_int_equal(mxst_writer_begin(path, latin1, 1, NULL, 0, MXST_OVERWRITE, &w), MXP_EINVAL);
    assert_non_null(strstr(mxst_last_error(), "tensor name"));
    assert_non_null(strstr(mxst_last_error(), "not valid UTF-8"));
    const char *bad_value[] = {"note", "\xC0\xAF"}; /* an overlong '/' */
    assert_int_equal(mxst_writer_begin(path, specs, 1, bad_value, 1, MXST_OVERWRITE, &w), MXP_EINVAL);
    assert_non_null(strstr(mxst_last_error(), "metadata value"));
    const char *bad_key[] = {"\xED\xA0\x80", "x"}; /* a surrogate */
    assert_int_equal(mxst_writer_begin(path, specs, 1, bad_key, 1, MXST_OVERWRITE, &w), MXP_EINVAL);
    assert_non_null(strstr(mxst_last_error(), "metadata key"));

    /* no temporary file is left in the directory */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -q tmp-", g_dir);
    assert_int_not_equal(system(cmd), 0);
}

/* A file with its header padded to a multiple of 8 (as strict mode wants). */
static void write_file(const char *path, const char *header, size_t ndata)
{
    size_t size, hl = strlen(header);
    char *padded = malloc(hl + 8);
    memcpy(padded, header, hl);
    while (hl % 8) padded[hl++] = ' ';
    padded[hl] = '\0';
    unsigned char *b = mkfile(padded, ndata, &size);
    free(padded);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, size, fp), size);
    fclose(fp);
    free(b);
}

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void test_sharded(void **state)
{
    (void)state;
    char p1[512], p2[512], idx[512];
    snprintf(p1, sizeof p1, "%s/model-00001-of-00002.safetensors", g_dir);
    snprintf(p2, sizeof p2, "%s/model-00002-of-00002.safetensors", g_dir);
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", g_dir);
    write_file(p1,
               "{\"__metadata__\":{\"format\":\"pt\"},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               8);
    write_file(p2,
               "{\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
               "\"c\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[4,5]}}",
               5);
    write_text(idx, "{\"metadata\":{\"total_size\":13},\"weight_map\":{"
                    "\"a\":\"model-00001-of-00002.safetensors\","
                    "\"c\":\"model-00002-of-00002.safetensors\","
                    "\"b\":\"model-00002-of-00002.safetensors\"}}");
    mxst_file *f = NULL;
    assert_int_equal(mxst_open(idx, true, &f), MXP_OK);
    assert_true(mxst_is_sharded(f));
    assert_int_equal(mxst_shard_count(f), 2);
    assert_int_equal(mxst_count(f), 3);
    assert_int_equal(mxst_find(f, "c")->shard, 1);
    assert_string_equal(mxst_metadata_get(f, "format"), "pt");
    unsigned char r[5];
    assert_int_equal(mxst_read(f, mxst_find(f, "c"), 0, r, 1), MXP_OK);
    assert_int_equal(r[0], 0xAB);
    mxst_close(f);

    /* total_size wrong: only strict refuses */
    write_text(idx, "{\"metadata\":{\"total_size\":14},\"weight_map\":{"
                    "\"a\":\"model-00001-of-00002.safetensors\","
                    "\"c\":\"model-00002-of-00002.safetensors\","
                    "\"b\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_equal(mxst_open(idx, false, &f), MXP_OK);
    mxst_close(f);
    f = NULL;
    assert_int_equal(mxst_open(idx, true, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: strict-total-size"));
    /* mapped to the wrong shard */
    write_text(idx, "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                    "\"c\":\"model-00001-of-00002.safetensors\","
                    "\"b\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_equal(mxst_open(idx, false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "'c'"));
    assert_non_null(strstr(mxst_last_error(), "rule: index-shard"));
    /* mapped but absent */
    write_text(idx, "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                    "\"c\":\"model-00002-of-00002.safetensors\","
                    "\"b\":\"model-00002-of-00002.safetensors\","
                    "\"d\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_equal(mxst_open(idx, false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "'d'"));
    assert_non_null(strstr(mxst_last_error(), "rule: index-missing"));
    /* present in a shard but unmapped */
    write_text(idx, "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                    "\"b\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_equal(mxst_open(idx, false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: index-unmapped"));
    /* a tensor in two shards */
    write_file(p1,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"c\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[8,9]}}",
               9);
    write_text(idx, "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                    "\"c\":\"model-00002-of-00002.safetensors\","
                    "\"b\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_equal(mxst_open(idx, false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "'c'"));
    assert_non_null(strstr(mxst_last_error(), "rule: index-duplicate"));
    /* shard names must be plain; a missing shard is an I/O error; bad index JSON */
    write_text(idx, "{\"weight_map\":{\"a\":\"../x.safetensors\"}}");
    assert_int_equal(mxst_open(idx, false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: index-shard-name"));
    write_text(idx, "{\"weight_map\":{\"a\":\"nothere.safetensors\"}}");
    assert_int_equal(mxst_open(idx, false, &f), MXP_EIO);
    assert_non_null(strstr(mxst_last_error(), "nothere.safetensors"));
    write_text(idx, "{\"weight_map\":{\"a\":\"x\",\"a\":\"x\"}}");
    assert_int_equal(mxst_open(idx, false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "rule: duplicate-key"));
    write_text(idx, "{\"metadata\":{}}");
    assert_int_equal(mxst_open(idx, false, &f), MXP_EFORMAT);
    assert_non_null(strstr(mxst_last_error(), "weight_map"));
    assert_null(f);

    /* the index writer's text reads back */
    const char *names[] = {"z", "a"}, *shards[] = {"s2", "s1"};
    char *text = mxst_index_json(names, shards, 2, 99);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"total_size\": 99"));
    assert_true(strstr(text, "\"a\": \"s1\"") < strstr(text, "\"z\": \"s2\""));
    free(text);
}

static void test_parse_size(void **state)
{
    (void)state;
    uint64_t v;
    assert_true(mxst_parse_size("5GB", &v));
    assert_true(v == 5000000000ull);
    assert_true(mxst_parse_size("2GiB", &v));
    assert_true(v == 2147483648ull);
    assert_true(mxst_parse_size("100 kB", &v));
    assert_true(v == 100000);
    assert_true(mxst_parse_size("4096B", &v));
    assert_true(v == 4096);
    assert_true(mxst_parse_size("1mib", &v));
    assert_true(v == 1048576);
    assert_false(mxst_parse_size("4096", &v));
    assert_false(mxst_parse_size("5G", &v));
    assert_false(mxst_parse_size("GB", &v));
    assert_false(mxst_parse_size("-5GB", &v));
    assert_false(mxst_parse_size("99999999999TB", &v));
    assert_false(mxst_parse_size("5GB x", &v));
}

/* A NULL argument gets MXP_EINVAL and a message naming the function and the argument, leaves
 * *out untouched, and writes no file. */
static void expect_null(mxp_status s, const char *text)
{
    assert_int_equal(s, MXP_EINVAL);
    if (!strstr(mxst_last_error(), text)) print_error("message '%s' lacks '%s'\n", mxst_last_error(), text);
    assert_non_null(strstr(mxst_last_error(), text));
}

static void test_null_args(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/null_args.safetensors", g_dir);
    mxst_file *const untouched = (mxst_file *)(uintptr_t)0x1;
    mxst_file *f = untouched;
    expect_null(mxst_open(NULL, false, &f), "mxst_open: path is NULL");
    expect_null(mxst_open(path, false, NULL), "mxst_open: out is NULL");
    expect_null(mxst_open_mem(NULL, 8, "m", false, &f), "mxst_open_mem: data (with size > 0) is NULL");
    expect_null(mxst_open_mem("x", 1, NULL, false, &f), "mxst_open_mem: name is NULL");
    expect_null(mxst_open_mem("x", 1, "m", false, NULL), "mxst_open_mem: out is NULL");
    assert_ptr_equal(f, untouched);

    f = expect_good("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4);
    const mxst_tensor *t = mxst_find(f, "w");
    assert_non_null(t);
    unsigned char buf[4];
    expect_null(mxst_read(NULL, t, 0, buf, 4), "mxst_read: f is NULL");
    expect_null(mxst_read(f, NULL, 0, buf, 4), "mxst_read: t is NULL");
    expect_null(mxst_read(f, t, 0, NULL, 4), "mxst_read: buf (with len > 0) is NULL");
    assert_int_equal(mxst_read(f, t, 0, NULL, 0), MXP_OK); /* nothing to read */
    mxst_close(f);

    expect_null(mxst_write_small_file(NULL, "x", 1, 0), "mxst_write_small_file: path is NULL");
    expect_null(mxst_write_small_file(path, NULL, 1, 0), "mxst_write_small_file: data (with len > 0) is NULL");

    const uint64_t shape[] = {2};
    const mxst_spec spec[] = {{"w", MXST_U8, 1, shape}};
    const char *kv[] = {"k", "v"};
    mxst_writer *const wkeep = (mxst_writer *)(uintptr_t)0x1;
    mxst_writer *w = wkeep;
    expect_null(mxst_writer_begin(NULL, spec, 1, kv, 1, 0, &w), "mxst_writer_begin: path is NULL");
    expect_null(mxst_writer_begin(path, NULL, 1, kv, 1, 0, &w), "mxst_writer_begin: tensors (with n > 0) is NULL");
    expect_null(mxst_writer_begin(path, spec, 1, NULL, 1, 0, &w), "mxst_writer_begin: meta_kv (with npairs > 0) is NULL");
    expect_null(mxst_writer_begin(path, spec, 1, kv, 1, 0, NULL), "mxst_writer_begin: out is NULL");
    const char *no_key[] = {NULL, "v"}, *no_value[] = {"k", NULL};
    expect_null(mxst_writer_begin(path, spec, 1, no_key, 1, 0, &w), "metadata pair 0: its key is NULL");
    expect_null(mxst_writer_begin(path, spec, 1, no_value, 1, 0, &w), "metadata pair 0: its value is NULL");
    assert_ptr_equal(w, wkeep);
    expect_null(mxst_writer_write(NULL, "ab", 2), "mxst_writer_write: w is NULL");
    expect_null(mxst_writer_finish(NULL), "mxst_writer_finish: w is NULL");
    expect_null(mxst_writer_commit(NULL), "mxst_writer_commit: w is NULL");
    assert_int_equal(mxst_writer_begin(path, spec, 1, kv, 1, 0, &w), MXP_OK);
    expect_null(mxst_writer_write(w, NULL, 2), "mxst_writer_write: buf (with len > 0) is NULL");
    mxst_writer_abort(w);
    assert_int_equal(access(path, F_OK), -1); /* no file was written */
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/test_safetensors.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtypes),        cmocka_unit_test(test_good_files),
        cmocka_unit_test(test_bad_files),     cmocka_unit_test(test_memory_bound),
        cmocka_unit_test(test_writer_layout), cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_parse_size),    cmocka_unit_test(test_fifo_refused),
        cmocka_unit_test(test_null_args),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int i = 0; i < g_nkeep; i++) free(g_keep[i]);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) rc = rc ? rc : 1;
    return rc;
}
