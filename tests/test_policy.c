/*
 * test_policy.c - policy parsing (jmp policy_test.py cases, every DESIGN section 5 example and
 * error), the canonical format and its round trip over every valid policy, the global default
 * policy under concurrent writers, the backend's half dtype, and casting trees by a policy.
 *
 * Expected values are written by hand from the jmp / Keras / Axon rules, never copied from the
 * code's output.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "mixprec.h"

#define F64 MXP_FLOAT64
#define F32 MXP_FLOAT32
#define F16 MXP_FLOAT16
#define BF16 MXP_BFLOAT16
#define E4M3 MXP_FLOAT8_E4M3FN
#define E5M2 MXP_FLOAT8_E5M2

static mxp_policy pol(mxp_dtype p, mxp_dtype c, mxp_dtype o, mxp_quant q, uint32_t h)
{
    mxp_policy x = {p, c, o, q, h};
    return x;
}

static void expect_policy(const char *text, mxp_policy want)
{
    mxp_policy got = pol(MXP_INT8, MXP_INT8, MXP_INT8, MXP_QUANT_INT4, 7);
    mxp_status s = mxp_policy_parse(text, &got);
    if (s != MXP_OK) fail_msg("'%s': %s: %s", text, mxp_status_name(s), mxp_last_error());
    if (!mxp_policy_equal(&got, &want))
        fail_msg("'%s': got p=%s c=%s o=%s q=%s h=%u, want p=%s c=%s o=%s q=%s h=%u", text,
                 mxp_dtype_name(got.param), mxp_dtype_name(got.compute), mxp_dtype_name(got.output),
                 mxp_quant_name(got.quant), (unsigned)got.amax_history_len, mxp_dtype_name(want.param),
                 mxp_dtype_name(want.compute), mxp_dtype_name(want.output), mxp_quant_name(want.quant),
                 (unsigned)want.amax_history_len);
}

/* Parse must fail with `status`, leave *out untouched, and the message must contain each of the
 * NULL-terminated fragments. */
static void expect_error(const char *text, mxp_status status, ...)
{
    mxp_policy sentinel = pol(F64, E5M2, BF16, MXP_QUANT_INT4, 0), got = sentinel;
    mxp_status s = mxp_policy_parse(text, &got);
    if (s != status)
        fail_msg("'%s': status %s, want %s (%s)", text, mxp_status_name(s), mxp_status_name(status),
                 mxp_last_error());
    if (memcmp(&got, &sentinel, sizeof got) != 0) fail_msg("'%s': output modified on failure", text);
    va_list ap;
    va_start(ap, status);
    for (const char *frag; (frag = va_arg(ap, const char *)) != NULL;)
        if (!strstr(mxp_last_error(), frag))
            fail_msg("'%s': message \"%s\" lacks \"%s\"", text, mxp_last_error(), frag);
    va_end(ap);
}

/* Every spelling of every floating dtype that the policy grammar must accept (DESIGN 3). */
static const struct {
    const char *text;
    mxp_dtype d;
} spellings[] = {
    {"float64", F64},      {"f64", F64},        {"fp64", F64},        {"double", F64},
    {"{:f, 64}", F64},     {"float32", F32},    {"f32", F32},         {"fp32", F32},
    {"full", F32},         {"{:f, 32}", F32},   {"float16", F16},     {"f16", F16},
    {"fp16", F16},         {"{:f, 16}", F16},   {"bfloat16", BF16},   {"bf16", BF16},
    {"{:bf, 16}", BF16},   {"float8_e4m3fn", E4M3}, {"f8_e4m3", E4M3}, {"fp8_e4m3", E4M3},
    {"float8_e4m3", E4M3}, {"e4m3", E4M3},      {"float8_e5m2", E5M2}, {"f8_e5m2", E5M2},
    {"fp8_e5m2", E5M2},    {"e5m2", E5M2},
};
#define NSPELL (sizeof spellings / sizeof spellings[0])

/* Runs first, with no setup: the process starts with an all-float32 default and the CPU backend. */
static void test_initial_globals(void **state)
{
    (void)state;
    mxp_policy d = mxp_default_policy();
    assert_int_equal(d.param, MXP_FLOAT32);
    assert_int_equal(d.compute, MXP_FLOAT32);
    assert_int_equal(d.output, MXP_FLOAT32);
    assert_int_equal(d.quant, MXP_QUANT_NONE);
    assert_int_equal(d.amax_history_len, 0);
    assert_int_equal(mxp_get_backend(), MXP_BACKEND_CPU);
}

/* jmp policy_test.py: a single dtype sets all three. */
static void test_single_dtype(void **state)
{
    (void)state;
    for (size_t i = 0; i < NSPELL; i++) {
        mxp_dtype d = spellings[i].d;
        expect_policy(spellings[i].text, pol(d, d, d, MXP_QUANT_NONE, 0));
    }
    expect_policy("bf16", pol(BF16, BF16, BF16, MXP_QUANT_NONE, 0));
    expect_policy("  FLOAT16\t", pol(F16, F16, F16, MXP_QUANT_NONE, 0));
}

/* jmp: "c=f16" -> params full, compute+output f16; "c=<dtype>,o=full" for every dtype. */
static void test_jmp_key_value(void **state)
{
    (void)state;
    expect_policy("c=f16", pol(F32, F16, F16, MXP_QUANT_NONE, 0));
    expect_policy("p=f16", pol(F16, F16, F16, MXP_QUANT_NONE, 0));
    expect_policy("p=f16,c=f16", pol(F16, F16, F16, MXP_QUANT_NONE, 0));
    expect_policy("p=f16,c=bf16", pol(F16, BF16, BF16, MXP_QUANT_NONE, 0));
    expect_policy("c=bf16,o=full", pol(F32, BF16, F32, MXP_QUANT_NONE, 0));
    expect_policy("p=f32,c=bf16,o=f32", pol(F32, BF16, F32, MXP_QUANT_NONE, 0));
    expect_policy("o=f16", pol(F32, F32, F16, MXP_QUANT_NONE, 0));
    for (size_t i = 0; i < NSPELL; i++) {
        char text[64];
        snprintf(text, sizeof text, "c=%s,o=full", spellings[i].text);
        expect_policy(text, pol(F32, spellings[i].d, F32, MXP_QUANT_NONE, 0));
        snprintf(text, sizeof text, "compute=%s,output=full", spellings[i].text);
        expect_policy(text, pol(F32, spellings[i].d, F32, MXP_QUANT_NONE, 0));
    }
    /* Every combination of the three keys, long and short names, in any order. */
    static const char *const pk[] = {"p", "param", "params"};
    for (size_t a = 0; a < NSPELL; a += 3)
        for (size_t b = 1; b < NSPELL; b += 4)
            for (size_t c = 2; c < NSPELL; c += 5) {
                char text[128];
                snprintf(text, sizeof text, "o=%s, %s=%s ,compute=%s", spellings[c].text, pk[a % 3],
                         spellings[a].text, spellings[b].text);
                expect_policy(text, pol(spellings[a].d, spellings[b].d, spellings[c].d, MXP_QUANT_NONE, 0));
            }
    /* Keys and values are case-insensitive, blanks around tokens ignored. */
    expect_policy(" P = F16 , C=BF16 ,  O=Float32 ", pol(F16, BF16, F32, MXP_QUANT_NONE, 0));
    /* Axon's create_policy examples in Nx spelling. */
    expect_policy("p={:f, 16},o={:f, 16},c={:f, 32}", pol(F16, F32, F16, MXP_QUANT_NONE, 0));
    expect_policy("c={:bf, 16},o={:f, 32}", pol(F32, BF16, F32, MXP_QUANT_NONE, 0));
}

static void test_keras_presets_and_quantized(void **state)
{
    (void)state;
    expect_policy("mixed_float16", pol(F32, F16, F16, MXP_QUANT_NONE, 0));
    expect_policy("mixed_bfloat16", pol(F32, BF16, BF16, MXP_QUANT_NONE, 0));
    expect_policy(" Mixed_BFloat16 ", pol(F32, BF16, BF16, MXP_QUANT_NONE, 0));
    expect_policy("int8_from_mixed_bfloat16", pol(F32, BF16, BF16, MXP_QUANT_INT8, 0));
    expect_policy("float8_from_mixed_bfloat16", pol(F32, BF16, BF16, MXP_QUANT_FLOAT8, 1024));
    expect_policy("int4_from_mixed_float16", pol(F32, F16, F16, MXP_QUANT_INT4, 0));
    expect_policy("float8_from_mixed_float16", pol(F32, F16, F16, MXP_QUANT_FLOAT8, 1024));
    expect_policy("int8_from_float32", pol(F32, F32, F32, MXP_QUANT_INT8, 0));
    expect_policy("int8_from_bfloat16", pol(BF16, BF16, BF16, MXP_QUANT_INT8, 0));
    expect_policy("int4_from_c=bf16,o=f32", pol(F32, BF16, F32, MXP_QUANT_INT4, 0));
    expect_policy("float8_from_c=bf16,h=16", pol(F32, BF16, BF16, MXP_QUANT_FLOAT8, 16));
    /* Form 3 with explicit quantization. */
    expect_policy("c=bf16,q=int8", pol(F32, BF16, BF16, MXP_QUANT_INT8, 0));
    expect_policy("q=int4", pol(F32, F32, F32, MXP_QUANT_INT4, 0));
    expect_policy("quant=float8,c=bf16", pol(F32, BF16, BF16, MXP_QUANT_FLOAT8, 1024));
    expect_policy("h=4,q=FLOAT8", pol(F32, F32, F32, MXP_QUANT_FLOAT8, 4));
    expect_policy("q=float8,amax_history=65536", pol(F32, F32, F32, MXP_QUANT_FLOAT8, 65536));
    /* int4 and float8 with float16 compute are fine; only int8 is rejected (Keras). */
    expect_policy("c=f16,q=float8", pol(F32, F16, F16, MXP_QUANT_FLOAT8, 1024));
}

/* h is capped at MXP_FP8_HISTORY_MAX (65536) by the grammar and by validate (so that
 * parse(format(p)) == p still holds for every valid p). Before the fix "q=float8,h=4294967295"
 * was a valid policy: a 16 GiB amax history for mxp_fp8_scaler_new. */
static void test_amax_history_cap(void **state)
{
    (void)state;
    assert_int_equal(MXP_FP8_HISTORY_MAX, 65536);
    expect_policy("q=float8,h=65536", pol(F32, F32, F32, MXP_QUANT_FLOAT8, 65536));
    expect_policy("float8_from_c=bf16,amax_history=00065536", pol(F32, BF16, BF16, MXP_QUANT_FLOAT8, 65536));
    expect_error("q=float8,h=65537", MXP_EPARSE, "'65537'", "65536", NULL);
    expect_error("q=float8,amax_history=4294967295", MXP_EPARSE, "'4294967295'", "65536", NULL);
    expect_error("q=float8,h=99999999999999999999999", MXP_EPARSE, "'99999999999999999999999'", "65536", NULL);
    mxp_policy p = pol(F32, BF16, BF16, MXP_QUANT_FLOAT8, MXP_FP8_HISTORY_MAX + 1u);
    mxp_clear_error();
    assert_int_equal(mxp_policy_validate(&p), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "65536"));
    char buf[64];
    assert_int_equal(mxp_policy_format(&p, buf, sizeof buf), -1);
    p.amax_history_len = MXP_FP8_HISTORY_MAX;
    assert_int_equal(mxp_policy_validate(&p), MXP_OK);
}

static void test_half_follows_backend(void **state)
{
    (void)state;
    assert_int_equal(mxp_half_dtype(MXP_BACKEND_CPU), F16);
    assert_int_equal(mxp_half_dtype(MXP_BACKEND_GPU), F16);
    assert_int_equal(mxp_half_dtype(MXP_BACKEND_TPU), BF16);
    assert_int_equal(mxp_get_backend(), MXP_BACKEND_CPU); /* initially CPU */
    expect_policy("half", pol(F16, F16, F16, MXP_QUANT_NONE, 0));
    expect_policy("c=half", pol(F32, F16, F16, MXP_QUANT_NONE, 0));
    mxp_set_backend(MXP_BACKEND_TPU);
    assert_int_equal(mxp_get_backend(), MXP_BACKEND_TPU);
    expect_policy("HALF", pol(BF16, BF16, BF16, MXP_QUANT_NONE, 0));
    expect_policy("c=half,o=full", pol(F32, BF16, F32, MXP_QUANT_NONE, 0));
    expect_policy("int8_from_c=half", pol(F32, BF16, BF16, MXP_QUANT_INT8, 0));
    mxp_set_backend(MXP_BACKEND_GPU);
    expect_policy("half", pol(F16, F16, F16, MXP_QUANT_NONE, 0));
    /* int8 with half compute is fine on TPU (bfloat16) but rejected on GPU (float16). */
    expect_error("int8_from_c=half", MXP_EPARSE, "int8", "float16", NULL);
    mxp_set_backend((mxp_backend)7); /* ignored */
    assert_int_equal(mxp_get_backend(), MXP_BACKEND_GPU);
    mxp_set_backend(MXP_BACKEND_CPU);
}

static void test_parse_errors(void **state)
{
    (void)state;
    /* jmp rejects Keras-style names that are not policies. */
    expect_error("compute_float16", MXP_EPARSE, "'compute_float16'", NULL);
    expect_error("c=f13", MXP_EPARSE, "unknown dtype 'f13'", "'c=f13'", NULL);
    expect_error("p=f13", MXP_EPARSE, "'f13'", "'p=f13'", NULL);
    expect_error("f13", MXP_EPARSE, "'f13'", NULL);
    expect_error("x=f16", MXP_EPARSE, "unknown key 'x'", NULL);
    expect_error("comp=f16", MXP_EPARSE, "'comp'", NULL);
    expect_error("p=f32,p=f16", MXP_EPARSE, "repeated key 'p'", NULL);
    expect_error("p=f32,params=f16", MXP_EPARSE, "repeated key 'params'", NULL);
    expect_error("c=f16,compute=bf16", MXP_EPARSE, "repeated key", "'compute'", NULL);
    expect_error("q=int8,quant=int4", MXP_EPARSE, "repeated key", NULL);
    expect_error("c=f16,", MXP_EPARSE, "empty part", NULL);
    expect_error(",c=f16", MXP_EPARSE, "empty part", NULL);
    expect_error("c=f16,,o=f32", MXP_EPARSE, "empty part", NULL);
    expect_error("c=f16, ", MXP_EPARSE, "empty part", NULL);
    expect_error("c=", MXP_EPARSE, "missing value", "'c'", NULL);
    expect_error("c= ,o=f32", MXP_EPARSE, "missing value", NULL);
    expect_error("=f16", MXP_EPARSE, "missing key", NULL);
    expect_error("f32,c=f16", MXP_EPARSE, "'f32'", NULL);
    expect_error("int8", MXP_EPARSE, "non-floating", "'int8'", NULL);
    expect_error("c=int32", MXP_EPARSE, "non-floating", "'int32'", NULL);
    expect_error("o=bool", MXP_EPARSE, "'bool'", NULL);
    expect_error("h=16", MXP_EPARSE, "'h'", "float8", NULL);
    expect_error("q=int8,h=16", MXP_EPARSE, "'h'", NULL);
    expect_error("int8_from_c=bf16,h=16", MXP_EPARSE, "'h'", NULL);
    expect_error("q=float8,h=0", MXP_EPARSE, "'0'", NULL);
    expect_error("q=float8,h=-1", MXP_EPARSE, "'-1'", NULL);
    expect_error("q=float8,h=4294967296", MXP_EPARSE, "'4294967296'", NULL);
    expect_error("q=float8,h=12x", MXP_EPARSE, "'12x'", NULL);
    expect_error("q=float8,h=", MXP_EPARSE, "missing value", NULL);
    expect_error("q=int2", MXP_EPARSE, "unknown quantization 'int2'", NULL);
    expect_error("q=none", MXP_EPARSE, "'none'", NULL);
    expect_error("q=int8,c=f16", MXP_EPARSE, "int8", "float16", NULL);
    expect_error("int8_from_mixed_float16", MXP_EPARSE, "int8", "float16", NULL);
    expect_error("int8_from_float16", MXP_EPARSE, "int8", NULL);
    expect_error("int8_from_c=bf16,q=int4", MXP_EPARSE, "twice", NULL);
    expect_error("int8_from_", MXP_EPARSE, "missing source", NULL);
    expect_error("int8_from_int8_from_bf16", MXP_EPARSE, "'int8_from_bf16'", NULL);
    expect_error("int16_from_bf16", MXP_EPARSE, "'int16_from_bf16'", NULL);
    expect_error("mixed_float32", MXP_EPARSE, "'mixed_float32'", NULL);
    expect_error("", MXP_EPARSE, "empty", NULL);
    expect_error("   ", MXP_EPARSE, "empty", NULL);
    expect_error("c=f16 o=f32", MXP_EPARSE, "'f16 o=f32'", NULL);
    /* fp8 alone is ambiguous: reported as a parse error naming both float8 formats. */
    expect_error("fp8", MXP_EPARSE, "'fp8'", "float8_e4m3fn", "float8_e5m2", NULL);
    expect_error("c=fp8", MXP_EPARSE, "'fp8'", "ambiguous", NULL);
    expect_error("half_float", MXP_EPARSE, "'half_float'", NULL);
    /* A very long token is quoted (not silently truncated into a valid one). */
    char long_text[400];
    memset(long_text, 'f', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    long_text[0] = 'c';
    long_text[1] = '=';
    expect_error(long_text, MXP_EPARSE, "unknown dtype 'fff", NULL);
    mxp_policy p = pol(F32, F32, F32, MXP_QUANT_NONE, 0);
    assert_int_equal(mxp_policy_parse(NULL, &p), MXP_EINVAL);
    assert_int_equal(mxp_policy_parse("f32", NULL), MXP_EINVAL);
}

/* Canonical text of a valid policy, composed here from the DESIGN's table of names. */
static void canonical(const mxp_policy *p, char *buf, size_t cap)
{
    static const char *const names[] = {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn",
                                        "float8_e5m2"};
    int n = snprintf(buf, cap, "p=%s,c=%s,o=%s", names[p->param], names[p->compute], names[p->output]);
    if (p->quant == MXP_QUANT_INT8) snprintf(buf + n, cap - (size_t)n, ",q=int8");
    if (p->quant == MXP_QUANT_INT4) snprintf(buf + n, cap - (size_t)n, ",q=int4");
    if (p->quant == MXP_QUANT_FLOAT8)
        snprintf(buf + n, cap - (size_t)n, ",q=float8,h=%u", (unsigned)p->amax_history_len);
}

/* Every valid policy: format is canonical and parse(format(p)) == p. */
static void test_format_round_trip_all(void **state)
{
    (void)state;
    static const uint32_t hs[] = {1, 2, 1024, MXP_FP8_HISTORY_MAX};
    size_t checked = 0;
    for (int a = 0; a < MXP_FLOAT_DTYPE_COUNT; a++)
        for (int b = 0; b < MXP_FLOAT_DTYPE_COUNT; b++)
            for (int c = 0; c < MXP_FLOAT_DTYPE_COUNT; c++)
                for (int q = 0; q <= MXP_QUANT_FLOAT8; q++)
                    for (size_t k = 0; k < (q == MXP_QUANT_FLOAT8 ? 4u : 1u); k++) {
                        mxp_policy p = pol((mxp_dtype)a, (mxp_dtype)b, (mxp_dtype)c, (mxp_quant)q,
                                           q == MXP_QUANT_FLOAT8 ? hs[k] : 0);
                        char want[128], got[128];
                        if (q == MXP_QUANT_INT8 && b == F16) {
                            assert_int_equal(mxp_policy_validate(&p), MXP_EINVAL);
                            assert_int_equal(mxp_policy_format(&p, got, sizeof got), -1);
                            continue;
                        }
                        canonical(&p, want, sizeof want);
                        int n = mxp_policy_format(&p, got, sizeof got);
                        assert_int_equal(n, (int)strlen(want));
                        assert_string_equal(got, want);
                        mxp_policy back;
                        assert_int_equal(mxp_policy_parse(got, &back), MXP_OK);
                        assert_true(mxp_policy_equal(&back, &p));
                        checked++;
                    }
    /* 216 dtype triples x (none, int4, 4 float8 lengths) + 180 int8 (compute not float16). */
    assert_int_equal(checked, 216 * 6 + 180);
}

static void test_format_snprintf_semantics(void **state)
{
    (void)state;
    mxp_policy p = pol(F32, BF16, F32, MXP_QUANT_NONE, 0);
    const char *want = "p=float32,c=bfloat16,o=float32";
    char buf[64];
    assert_int_equal(mxp_policy_format(&p, NULL, 0), (int)strlen(want));
    memset(buf, 'X', sizeof buf);
    assert_int_equal(mxp_policy_format(&p, buf, 5), (int)strlen(want));
    assert_string_equal(buf, "p=fl");
    assert_int_equal(buf[5], 'X');
    assert_int_equal(mxp_policy_format(&p, buf, 1), (int)strlen(want));
    assert_string_equal(buf, "");
    assert_int_equal(mxp_policy_format(&p, buf, strlen(want)), (int)strlen(want));
    assert_string_equal(buf, "p=float32,c=bfloat16,o=float3");
    assert_int_equal(mxp_policy_format(&p, buf, sizeof buf), (int)strlen(want));
    assert_string_equal(buf, want);
    mxp_policy f8 = pol(F32, BF16, BF16, MXP_QUANT_FLOAT8, 1024);
    const char *want8 = "p=float32,c=bfloat16,o=bfloat16,q=float8,h=1024";
    assert_int_equal(mxp_policy_format(&f8, buf, sizeof buf), (int)strlen(want8));
    assert_string_equal(buf, want8);

    /* Invalid policies: -1 and buf untouched. */
    const mxp_policy bad[] = {
        pol(MXP_INT8, F32, F32, MXP_QUANT_NONE, 0),  pol(F32, MXP_BOOL, F32, MXP_QUANT_NONE, 0),
        pol(F32, F32, (mxp_dtype)40, MXP_QUANT_NONE, 0), pol(F32, F32, F32, (mxp_quant)9, 0),
        pol(F32, F32, F32, MXP_QUANT_FLOAT8, 0),    pol(F32, F32, F32, MXP_QUANT_INT8, 5),
        pol(F32, F32, F32, MXP_QUANT_NONE, 1024),   pol(F32, F16, F16, MXP_QUANT_INT8, 0),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(buf, 'Y', sizeof buf);
        assert_int_equal(mxp_policy_format(&bad[i], buf, sizeof buf), -1);
        assert_int_equal(buf[0], 'Y');
        assert_int_equal(mxp_policy_validate(&bad[i]), MXP_EINVAL);
    }
    assert_int_equal(mxp_policy_format(NULL, buf, sizeof buf), -1);
    assert_int_equal(mxp_policy_validate(NULL), MXP_EINVAL);
}

static void test_equal_and_names(void **state)
{
    (void)state;
    mxp_policy a = pol(F32, F16, F32, MXP_QUANT_NONE, 0), b = a;
    assert_true(mxp_policy_equal(&a, &b));
    b.output = F16;
    assert_false(mxp_policy_equal(&a, &b));
    b = a;
    b.quant = MXP_QUANT_INT4;
    assert_false(mxp_policy_equal(&a, &b));
    b = pol(F32, BF16, BF16, MXP_QUANT_FLOAT8, 1024);
    mxp_policy c = b;
    c.amax_history_len = 16;
    assert_false(mxp_policy_equal(&b, &c));
    assert_false(mxp_policy_equal(&a, NULL));
    assert_false(mxp_policy_equal(NULL, &a));
    assert_string_equal(mxp_quant_name(MXP_QUANT_NONE), "none");
    assert_string_equal(mxp_quant_name(MXP_QUANT_INT8), "int8");
    assert_string_equal(mxp_quant_name(MXP_QUANT_INT4), "int4");
    assert_string_equal(mxp_quant_name(MXP_QUANT_FLOAT8), "float8");
    assert_string_equal(mxp_quant_name((mxp_quant)12), "invalid");
}

static void test_default_policy(void **state)
{
    (void)state;
    mxp_policy d = mxp_default_policy();
    mxp_policy f32 = pol(F32, F32, F32, MXP_QUANT_NONE, 0);
    assert_true(mxp_policy_equal(&d, &f32)); /* initially all float32 */
    mxp_policy mixed = pol(F32, F16, F16, MXP_QUANT_NONE, 0);
    mxp_set_default_policy(&mixed);
    d = mxp_default_policy();
    assert_true(mxp_policy_equal(&d, &mixed));
    mxp_policy bad = pol(F32, F32, MXP_INT32, MXP_QUANT_NONE, 0);
    mxp_set_default_policy(&bad); /* ignored */
    mxp_set_default_policy(NULL); /* ignored */
    d = mxp_default_policy();
    assert_true(mxp_policy_equal(&d, &mixed));
    mxp_set_default_policy(&f32);
}

/* Writers alternate two policies that differ in every field; readers must always see one of
 * them whole. */
static const mxp_policy pa = {MXP_FLOAT32, MXP_FLOAT16, MXP_FLOAT32, MXP_QUANT_NONE, 0};
static const mxp_policy pb = {MXP_BFLOAT16, MXP_FLOAT64, MXP_FLOAT8_E5M2, MXP_QUANT_FLOAT8, 77};
static void *writer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200000; i++) mxp_set_default_policy(i % 2 ? &pa : &pb);
    return NULL;
}

static void *reader(void *arg)
{
    long *torn = arg;
    for (int i = 0; i < 200000; i++) {
        mxp_policy p = mxp_default_policy();
        if (!mxp_policy_equal(&p, &pa) && !mxp_policy_equal(&p, &pb)) (*torn)++;
    }
    return NULL;
}

static void test_default_policy_threads(void **state)
{
    (void)state;
    pthread_t w[2], r[2];
    long torn[2] = {0, 0};
    mxp_set_default_policy(&pa);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&w[i], NULL, writer, NULL), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&r[i], NULL, reader, &torn[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(w[i], NULL);
    for (int i = 0; i < 2; i++) pthread_join(r[i], NULL);
    assert_int_equal(torn[0] + torn[1], 0);
    mxp_policy f32 = pol(F32, F32, F32, MXP_QUANT_NONE, 0);
    mxp_set_default_policy(&f32);
}

/* ---- casting by a policy ------------------------------------------------------------------ */

static uint16_t u16_at(const void *p, size_t i)
{
    uint16_t v;
    memcpy(&v, (const char *)p + 2 * i, 2);
    return v;
}

/* A small model: float32 kernel and bias, an int32 step counter, a bool mask, an int8 table. */
static mxp_tree *make_model(void)
{
    mxp_tree *t = mxp_tree_new();
    assert_non_null(t);
    const float kernel[6] = {1.0f, 0.5f, -2.0f, 65504.0f, 1e-8f, 0.1f};
    const float bias[2] = {3.0f, -0.25f};
    const int32_t step[1] = {123456789};
    const uint8_t mask[3] = {1, 0, 1};
    const int8_t table[4] = {-128, -1, 0, 127};
    assert_int_equal(mxp_tree_add(t, "dense_0/kernel", F32, 2, (size_t[]){2, 3}, kernel), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "dense_0/bias", F32, 1, (size_t[]){2}, bias), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "step", MXP_INT32, 0, NULL, step), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "mask", MXP_BOOL, 1, (size_t[]){3}, mask), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "table", MXP_INT8, 1, (size_t[]){4}, table), MXP_OK);
    return t;
}

/* Integer and bool leaves are never converted: same dtype, same bytes (jmp's
 * test_cast_to_*_ignores_non_floating). */
static void expect_int_leaves_untouched(const mxp_tree *t)
{
    const mxp_tensor *s = mxp_tree_get(t, "step"), *m = mxp_tree_get(t, "mask"),
                     *tb = mxp_tree_get(t, "table");
    assert_non_null(s);
    assert_non_null(m);
    assert_non_null(tb);
    assert_int_equal(s->dtype, MXP_INT32);
    assert_int_equal(m->dtype, MXP_BOOL);
    assert_int_equal(tb->dtype, MXP_INT8);
    int32_t step;
    memcpy(&step, s->data, 4);
    assert_int_equal(step, 123456789);
    assert_memory_equal(m->data, ((const uint8_t[]){1, 0, 1}), 3);
    assert_memory_equal(tb->data, ((const int8_t[]){-128, -1, 0, 127}), 4);
}

static void test_policy_casts(void **state)
{
    (void)state;
    mxp_tree *model = make_model();
    mxp_policy p;
    assert_int_equal(mxp_policy_parse("p=f32,c=f16,o=bf16", &p), MXP_OK);

    mxp_tree *c = NULL;
    assert_int_equal(mxp_policy_cast_to_compute(&p, model, &c), MXP_OK);
    assert_int_equal(mxp_tree_count(c), 5);
    const mxp_tensor *k = mxp_tree_get(c, "dense_0/kernel");
    assert_int_equal(k->dtype, F16);
    assert_int_equal(k->ndim, 2);
    assert_int_equal(k->shape[0], 2);
    assert_int_equal(k->shape[1], 3);
    /* binary16 by hand: 1 = 0x3C00, 0.5 = 0x3800, -2 = 0xC000, 65504 = max 0x7BFF,
     * 1e-8 < 2^-25 (half the smallest subnormal) -> +0, 0.1f -> 0x2E66 (0.0999755859375). */
    const uint16_t want_k[6] = {0x3C00, 0x3800, 0xC000, 0x7BFF, 0x0000, 0x2E66};
    for (int i = 0; i < 6; i++) assert_int_equal(u16_at(k->data, (size_t)i), want_k[i]);
    const mxp_tensor *bias = mxp_tree_get(c, "dense_0/bias");
    assert_int_equal(bias->dtype, F16);
    assert_int_equal(u16_at(bias->data, 0), 0x4200); /* 3 */
    assert_int_equal(u16_at(bias->data, 1), 0xB400); /* -0.25 */
    expect_int_leaves_untouched(c);
    /* Iteration order is kept. */
    assert_string_equal(mxp_tree_at(c, 0)->name, "dense_0/kernel");
    assert_string_equal(mxp_tree_at(c, 4)->name, "table");

    mxp_tree *o = NULL;
    assert_int_equal(mxp_policy_cast_to_output(&p, c, &o), MXP_OK);
    k = mxp_tree_get(o, "dense_0/kernel");
    assert_int_equal(k->dtype, BF16);
    /* float16 -> bfloat16: 1 = 0x3F80, 0.5 = 0x3F00, -2 = 0xC000, 65504 = 0x477FE0 -> rounds to
     * 0x4780 (65536), 0 = 0, 0.0999755859375 = 0x3DCCC000 -> 0x3DCD (upper half dropped 0xC000 >
     * half). */
    const uint16_t want_o[6] = {0x3F80, 0x3F00, 0xC000, 0x4780, 0x0000, 0x3DCD};
    for (int i = 0; i < 6; i++) assert_int_equal(u16_at(k->data, (size_t)i), want_o[i]);
    expect_int_leaves_untouched(o);

    mxp_tree *full = NULL;
    assert_int_equal(mxp_tree_cast_to_full(o, &full), MXP_OK);
    k = mxp_tree_get(full, "dense_0/kernel");
    assert_int_equal(k->dtype, F32);
    const float want_f[6] = {1.0f, 0.5f, -2.0f, 65536.0f, 0.0f, 0.10009765625f};
    assert_memory_equal(k->data, want_f, sizeof want_f);
    expect_int_leaves_untouched(full);

    /* cast_to_param into a preallocated tree (param is float32: a plain copy of the floats). */
    mxp_tree *dst = NULL;
    assert_int_equal(mxp_tree_cast(model, F32, &dst), MXP_OK);
    memset((void *)mxp_tree_get(dst, "dense_0/kernel")->data, 0, 24);
    assert_int_equal(mxp_policy_cast_to_param_into(&p, dst, model), MXP_OK);
    assert_memory_equal(mxp_tree_get(dst, "dense_0/kernel")->data,
                        mxp_tree_get(model, "dense_0/kernel")->data, 24);
    /* compute_into needs float16 leaves: dst has float32 ones -> EINVAL naming the leaf. */
    assert_int_equal(mxp_policy_cast_to_compute_into(&p, dst, model), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "dense_0/kernel"));
    assert_int_equal(mxp_policy_cast_to_compute_into(&p, c, model), MXP_OK);
    assert_int_equal(mxp_policy_cast_to_output_into(&p, o, model), MXP_OK);
    assert_int_equal(u16_at(mxp_tree_get(o, "dense_0/bias")->data, 0), 0x4040); /* 3 in bf16 */

    /* cast_to_half follows the backend. */
    mxp_tree *h = NULL;
    assert_int_equal(mxp_tree_cast_to_half(model, &h), MXP_OK);
    assert_int_equal(mxp_tree_get(h, "dense_0/kernel")->dtype, F16);
    assert_int_equal(mxp_tree_cast_to_half_into(c, model), MXP_OK);
    mxp_set_backend(MXP_BACKEND_TPU);
    mxp_tree *h2 = NULL;
    assert_int_equal(mxp_tree_cast_to_half(model, &h2), MXP_OK);
    assert_int_equal(mxp_tree_get(h2, "dense_0/kernel")->dtype, BF16);
    assert_int_equal(mxp_tree_cast_to_half_into(o, model), MXP_OK);
    assert_int_equal(mxp_tree_cast_to_half_into(c, model), MXP_EINVAL); /* c is float16 */
    mxp_set_backend(MXP_BACKEND_CPU);
    assert_int_equal(mxp_tree_cast_to_full_into(full, o), MXP_OK);
    expect_int_leaves_untouched(full);

    /* Invalid arguments. */
    mxp_tree *none = NULL;
    mxp_policy bad = pol(F32, MXP_INT8, F32, MXP_QUANT_NONE, 0);
    assert_int_equal(mxp_policy_cast_to_param(&bad, model, &none), MXP_EINVAL);
    assert_int_equal(mxp_policy_cast_to_param(NULL, model, &none), MXP_EINVAL);
    assert_int_equal(mxp_policy_cast_to_output(&p, NULL, &none), MXP_EINVAL);
    assert_int_equal(mxp_policy_cast_to_output(&p, model, NULL), MXP_EINVAL);
    assert_null(none);

    mxp_tree_free(h2);
    mxp_tree_free(h);
    mxp_tree_free(dst);
    mxp_tree_free(full);
    mxp_tree_free(o);
    mxp_tree_free(c);
    mxp_tree_free(model);
}

/* Every test starts from the initial global state (a failed test may leave it changed). */
static int reset_globals(void **state)
{
    (void)state;
    const mxp_policy f32 = {MXP_FLOAT32, MXP_FLOAT32, MXP_FLOAT32, MXP_QUANT_NONE, 0};
    mxp_set_default_policy(&f32);
    mxp_set_backend(MXP_BACKEND_CPU);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initial_globals),
        cmocka_unit_test_setup(test_single_dtype, reset_globals),
        cmocka_unit_test_setup(test_jmp_key_value, reset_globals),
        cmocka_unit_test_setup(test_keras_presets_and_quantized, reset_globals),
        cmocka_unit_test_setup(test_half_follows_backend, reset_globals),
        cmocka_unit_test_setup(test_parse_errors, reset_globals),
        cmocka_unit_test_setup(test_amax_history_cap, reset_globals),
        cmocka_unit_test_setup(test_format_round_trip_all, reset_globals),
        cmocka_unit_test_setup(test_format_snprintf_semantics, reset_globals),
        cmocka_unit_test_setup(test_equal_and_names, reset_globals),
        cmocka_unit_test_setup(test_default_policy, reset_globals),
        cmocka_unit_test_setup(test_default_policy_threads, reset_globals),
        cmocka_unit_test_setup(test_policy_casts, reset_globals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
