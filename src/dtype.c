/*
 * dtype.c - the dtype traits table and the dtype spelling parser.
 */
#include <ctype.h>
#include <string.h>

#include "internal.h"

/* One row per dtype, in enum order; the enum is append-only and the static assert below ties
 * the table to MXP_DTYPE_COUNT. */
static const struct {
    const char *name;
    size_t size;
    bool is_floating;
} traits[] = {
    [MXP_FLOAT64] = {"float64", 8, true},
    [MXP_FLOAT32] = {"float32", 4, true},
    [MXP_FLOAT16] = {"float16", 2, true},
    [MXP_BFLOAT16] = {"bfloat16", 2, true},
    [MXP_FLOAT8_E4M3FN] = {"float8_e4m3fn", 1, true},
    [MXP_FLOAT8_E5M2] = {"float8_e5m2", 1, true},
    [MXP_INT8] = {"int8", 1, false},
    [MXP_UINT8] = {"uint8", 1, false},
    [MXP_INT16] = {"int16", 2, false},
    [MXP_INT32] = {"int32", 4, false},
    [MXP_INT64] = {"int64", 8, false},
    [MXP_BOOL] = {"bool", 1, false},
};
_Static_assert(sizeof traits / sizeof traits[0] == MXP_DTYPE_COUNT, "one traits row per dtype");

const char *mxp_dtype_name(mxp_dtype d) { return mxp__dtype_valid(d) ? traits[d].name : "invalid"; }

size_t mxp_dtype_size(mxp_dtype d) { return mxp__dtype_valid(d) ? traits[d].size : 0; }

bool mxp_dtype_is_floating(mxp_dtype d) { return mxp__dtype_valid(d) && traits[d].is_floating; }

/* Aliases beyond the canonical names. Spellings are compared after lower-casing and, for Nx
 * tuples, after removing every blank ("{:f, 16}" -> "{:f,16}"). */
static const struct {
    const char *text;
    mxp_dtype dtype;
} aliases[] = {
    {"f64", MXP_FLOAT64},        {"fp64", MXP_FLOAT64},        {"double", MXP_FLOAT64},
    {"{:f,64}", MXP_FLOAT64},    {"f32", MXP_FLOAT32},         {"fp32", MXP_FLOAT32},
    {"full", MXP_FLOAT32},       {"float", MXP_FLOAT32},       {"{:f,32}", MXP_FLOAT32},
    {"f16", MXP_FLOAT16},        {"fp16", MXP_FLOAT16},        {"{:f,16}", MXP_FLOAT16},
    {"bf16", MXP_BFLOAT16},      {"{:bf,16}", MXP_BFLOAT16},   {"f8_e4m3", MXP_FLOAT8_E4M3FN},
    {"fp8_e4m3", MXP_FLOAT8_E4M3FN}, {"float8_e4m3", MXP_FLOAT8_E4M3FN},
    {"e4m3", MXP_FLOAT8_E4M3FN}, {"e4m3fn", MXP_FLOAT8_E4M3FN}, {"f8_e4m3fn", MXP_FLOAT8_E4M3FN},
    {"fp8_e4m3fn", MXP_FLOAT8_E4M3FN}, {"f8_e5m2", MXP_FLOAT8_E5M2}, {"fp8_e5m2", MXP_FLOAT8_E5M2},
    {"e5m2", MXP_FLOAT8_E5M2},   {"i8", MXP_INT8},             {"{:s,8}", MXP_INT8},
    {"u8", MXP_UINT8},           {"{:u,8}", MXP_UINT8},        {"i16", MXP_INT16},
    {"{:s,16}", MXP_INT16},      {"i32", MXP_INT32},           {"{:s,32}", MXP_INT32},
    {"i64", MXP_INT64},          {"{:s,64}", MXP_INT64},
};

static mxp_status dtype_parse(const char *text, mxp_dtype *out)
{
    if (!text) return mxp__fail(MXP_EINVAL, "text is NULL");
    if (!out) return mxp__fail(MXP_EINVAL, "out is NULL");

    /* Trim, lower-case, and drop blanks inside Nx tuples, into a bounded buffer. */
    char key[32];
    size_t len = 0;
    const char *s = text;
    while (isspace((unsigned char)*s)) s++;
    const char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) e--;
    bool tuple = (e > s && *s == '{');
    for (const char *p = s; p < e; p++) {
        if (tuple && isspace((unsigned char)*p)) continue;
        if (len + 1 >= sizeof key) goto unknown;
        key[len++] = (char)tolower((unsigned char)*p);
    }
    key[len] = '\0';

    for (int d = 0; d < MXP_DTYPE_COUNT; d++) {
        if (strcmp(key, traits[d].name) == 0) {
            *out = (mxp_dtype)d;
            return MXP_OK;
        }
    }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (strcmp(key, aliases[i].text) == 0) {
            *out = aliases[i].dtype;
            return MXP_OK;
        }
    }
    if (strcmp(key, "fp8") == 0 || strcmp(key, "f8") == 0 || strcmp(key, "float8") == 0)
        return mxp__fail(MXP_EAMBIGUOUS,
                         "ambiguous dtype '%.*s': say float8_e4m3fn (e4m3) or float8_e5m2 (e5m2)",
                         (int)(e - s), s);
    if (strcmp(key, "half") == 0)
        return mxp__fail(MXP_EPARSE,
                         "'half' is not a dtype: it depends on the backend and is resolved by "
                         "mxp_policy_parse (use mxp_half_dtype)");
unknown:
    return mxp__fail(MXP_EPARSE,
                     "unknown dtype '%.*s' (expected one of: float64 f64 fp64 double, float32 f32 "
                     "fp32 full, float16 f16 fp16, bfloat16 bf16, float8_e4m3fn e4m3, float8_e5m2 "
                     "e5m2, {:f, 32}, int8 uint8 int16 int32 int64 bool)",
                     (int)(e - s), s);
}

mxp_status mxp_dtype_parse(const char *text, mxp_dtype *out)
{
    return mxp__in("mxp_dtype_parse", dtype_parse(text, out));
}
