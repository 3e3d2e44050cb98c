/*
 * mixprec/dtype.h - the element types mixprec knows, their names, sizes and spellings.
 *
 * Formats: float16 = IEEE binary16; bfloat16 = the top half of binary32; float8_e4m3fn = OCP
 * E4M3 (bias 7, no infinities, NaN only S.1111.111, max 448); float8_e5m2 = OCP E5M2 (bias 15,
 * IEEE-like with infinities, max 57344). Integer and bool types exist so that trees can hold
 * them; mixprec never converts them.
 */
#ifndef MIXPREC_DTYPE_H
#define MIXPREC_DTYPE_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Element types. The enum is append-only: values never change. */
typedef enum mxp_dtype {
    MXP_FLOAT64,
    MXP_FLOAT32,
    MXP_FLOAT16,
    MXP_BFLOAT16,
    MXP_FLOAT8_E4M3FN,
    MXP_FLOAT8_E5M2,
    MXP_INT8,
    MXP_UINT8,
    MXP_INT16,
    MXP_INT32,
    MXP_INT64,
    MXP_BOOL
} mxp_dtype;

/** Number of dtypes (one past MXP_BOOL). */
#define MXP_DTYPE_COUNT 12
/** Number of floating dtypes; they are exactly the values 0 .. MXP_FLOAT_DTYPE_COUNT-1. */
#define MXP_FLOAT_DTYPE_COUNT 6

/**
 * Canonical name: "float64" "float32" "float16" "bfloat16" "float8_e4m3fn" "float8_e5m2"
 * "int8" "uint8" "int16" "int32" "int64" "bool". An invalid value gives "invalid" (never NULL).
 * Thread-safety: safe. The string is static.
 */
MXP_API const char *mxp_dtype_name(mxp_dtype dtype);

/**
 * Parse a dtype spelling into *out. Case-insensitive; blanks around the text are ignored.
 * Accepted: the canonical names; f64 fp64 double; f32 fp32 full; f16 fp16; bf16;
 * f8_e4m3 fp8_e4m3 float8_e4m3 e4m3 e4m3fn (-> float8_e4m3fn); f8_e5m2 fp8_e5m2 e5m2;
 * Nx tuples {:f, 64} {:f, 32} {:f, 16} {:bf, 16} {:s, 8|16|32|64} {:u, 8}; i8 i16 i32 i64 u8.
 * @retval MXP_OK          *out set
 * @retval MXP_EINVAL      text or out is NULL
 * @retval MXP_EAMBIGUOUS  "fp8" / "f8" / "float8": the message names both float8 formats
 * @retval MXP_EPARSE      anything else (including "half", which only the policy parser
 *                         resolves); the message quotes the text. *out is untouched on failure.
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_dtype_parse(const char *text, mxp_dtype *out);

/** Bytes per element (float8: 1, bool: 1); 0 for an invalid value. Thread-safety: safe. */
MXP_API size_t mxp_dtype_size(mxp_dtype dtype);

/** True for float64, float32, float16, bfloat16 and both float8 formats. Thread-safety: safe. */
MXP_API bool mxp_dtype_is_floating(mxp_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_DTYPE_H */
