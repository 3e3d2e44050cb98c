/*
 * test_dtype.c - dtype names, sizes, spellings and parse errors; status names and the
 * per-thread last-error message.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mixprec.h"

static void test_names_and_sizes(void **state)
{
    (void)state;
    static const struct {
        mxp_dtype d;
        const char *name;
        size_t size;
        bool floating;
    } want[] = {
        {MXP_FLOAT64, "float64", 8, true},     {MXP_FLOAT32, "float32", 4, true},
        {MXP_FLOAT16, "float16", 2, true},     {MXP_BFLOAT16, "bfloat16", 2, true},
        {MXP_FLOAT8_E4M3FN, "float8_e4m3fn", 1, true}, {MXP_FLOAT8_E5M2, "float8_e5m2", 1, true},
        {MXP_INT8, "int8", 1, false},          {MXP_UINT8, "uint8", 1, false},
        {MXP_INT16, "int16", 2, false},        {MXP_INT32, "int32", 4, false},
        {MXP_INT64, "int64", 8, false},        {MXP_BOOL, "bool", 1, false},
    };
    assert_int_equal(sizeof want / sizeof want[0], MXP_DTYPE_COUNT);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(mxp_dtype_name(want[i].d), want[i].name);
        assert_int_equal(mxp_dtype_size(want[i].d), want[i].size);
        assert_int_equal(mxp_dtype_is_floating(want[i].d), want[i].floating);
        /* every canonical name parses back to its dtype */
        mxp_dtype got = MXP_BOOL;
        assert_int_equal(mxp_dtype_parse(want[i].name, &got), MXP_OK);
        assert_int_equal(got, want[i].d);
    }
    assert_string_equal(mxp_dtype_name((mxp_dtype)99), "invalid");
    assert_int_equal(mxp_dtype_size((mxp_dtype)-1), 0);
    assert_false(mxp_dtype_is_floating((mxp_dtype)12));
}

static void test_spellings(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        mxp_dtype d;
    } cases[] = {
        {"f64", MXP_FLOAT64}, {"FP64", MXP_FLOAT64}, {"double", MXP_FLOAT64},
        {"{:f, 64}", MXP_FLOAT64}, {"f32", MXP_FLOAT32}, {"fp32", MXP_FLOAT32},
        {"full", MXP_FLOAT32}, {"  Float32\t", MXP_FLOAT32}, {"{:f, 32}", MXP_FLOAT32},
        {"{:f,32}", MXP_FLOAT32}, {" { :f , 16 } ", MXP_FLOAT16}, {"f16", MXP_FLOAT16},
        {"fp16", MXP_FLOAT16}, {"FLOAT16", MXP_FLOAT16}, {"bf16", MXP_BFLOAT16},
        {"BFloat16", MXP_BFLOAT16}, {"{:bf, 16}", MXP_BFLOAT16}, {"f8_e4m3", MXP_FLOAT8_E4M3FN},
        {"fp8_e4m3", MXP_FLOAT8_E4M3FN}, {"float8_e4m3", MXP_FLOAT8_E4M3FN},
        {"e4m3", MXP_FLOAT8_E4M3FN}, {"E4M3FN", MXP_FLOAT8_E4M3FN}, {"f8_e5m2", MXP_FLOAT8_E5M2},
        {"fp8_e5m2", MXP_FLOAT8_E5M2}, {"e5m2", MXP_FLOAT8_E5M2}, {"float8_e5m2", MXP_FLOAT8_E5M2},
        {"int8", MXP_INT8}, {"{:s, 32}", MXP_INT32}, {"bool", MXP_BOOL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mxp_dtype got = MXP_BOOL;
        mxp_status s = mxp_dtype_parse(cases[i].text, &got);
        if (s != MXP_OK || got != cases[i].d)
            fail_msg("'%s': status %s, got %s, want %s", cases[i].text, mxp_status_name(s),
                     mxp_dtype_name(got), mxp_dtype_name(cases[i].d));
    }
}

static void test_parse_errors(void **state)
{
    (void)state;
    mxp_dtype d = MXP_INT64; /* must stay untouched on every failure */
    assert_int_equal(mxp_dtype_parse("fp8", &d), MXP_EAMBIGUOUS);
    assert_non_null(strstr(mxp_last_error(), "float8_e4m3fn"));
    assert_non_null(strstr(mxp_last_error(), "float8_e5m2"));
    assert_int_equal(mxp_dtype_parse("f13", &d), MXP_EPARSE);
    assert_non_null(strstr(mxp_last_error(), "'f13'"));
    assert_int_equal(mxp_dtype_parse("half", &d), MXP_EPARSE);
    assert_non_null(strstr(mxp_last_error(), "half"));
    assert_int_equal(mxp_dtype_parse("", &d), MXP_EPARSE);
    assert_int_equal(mxp_dtype_parse("float32x", &d), MXP_EPARSE);
    assert_int_equal(mxp_dtype_parse("float 32", &d), MXP_EPARSE);
    assert_int_equal(mxp_dtype_parse("{:f, 8}", &d), MXP_EPARSE);
    /* A long token is rejected and quoted, not truncated into a valid one. */
    char long_text[200];
    memset(long_text, 'f', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    assert_int_equal(mxp_dtype_parse(long_text, &d), MXP_EPARSE);
    assert_non_null(strstr(mxp_last_error(), long_text));
    assert_int_equal(mxp_dtype_parse(NULL, &d), MXP_EINVAL);
    assert_int_equal(mxp_dtype_parse("f32", NULL), MXP_EINVAL);
    assert_int_equal(d, MXP_INT64);
}

static void test_status_names(void **state)
{
    (void)state;
    const char *want[] = {"MXP_OK",         "MXP_EINVAL", "MXP_ENOMEM", "MXP_EPARSE",
                          "MXP_ENOTFOUND",  "MXP_EAMBIGUOUS", "MXP_EEXIST", "MXP_EIO",
                          "MXP_EFORMAT",    "MXP_EUNSUPPORTED"};
    for (int s = 0; s < MXP_STATUS_COUNT; s++) assert_string_equal(mxp_status_name((mxp_status)s), want[s]);
    assert_string_equal(mxp_status_name((mxp_status)MXP_STATUS_COUNT), "MXP_E?");
    assert_string_equal(mxp_version(), MXP_VERSION_STRING);
    assert_int_equal(mxp_version_number(), MXP_VERSION_NUMBER);
}

/* The last-error message is per thread: a failure on another thread leaves ours alone. */
static void *fail_other(void *arg)
{
    (void)arg;
    mxp_dtype d;
    (void)mxp_dtype_parse("other_thread_token", &d);
    return strstr(mxp_last_error(), "other_thread_token") ? (void *)1 : NULL;
}

static void test_last_error_is_per_thread(void **state)
{
    (void)state;
    mxp_dtype d;
    assert_int_equal(mxp_dtype_parse("main_thread_token", &d), MXP_EPARSE);
    pthread_t t;
    void *ok = NULL;
    assert_int_equal(pthread_create(&t, NULL, fail_other, NULL), 0);
    assert_int_equal(pthread_join(t, &ok), 0);
    assert_non_null(ok);
    assert_non_null(strstr(mxp_last_error(), "main_thread_token"));
    assert_null(strstr(mxp_last_error(), "other_thread_token"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_sizes),
        cmocka_unit_test(test_spellings),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_last_error_is_per_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
