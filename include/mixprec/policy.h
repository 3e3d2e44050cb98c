/*
 * mixprec/policy.h - mixed-precision policies (jmp / Keras / Axon), the global default
 * policy, the backend's half dtype, and casting trees by a policy.
 *
 * A policy names three floating dtypes: param (how parameters are stored), compute (what the
 * forward and backward passes run in) and output (what a layer returns), plus an optional
 * quantization mode. Policies are small values: copy them freely.
 *
 * Text grammar of mxp_policy_parse (blanks around tokens ignored; keys and values
 * case-insensitive):
 *   1. one dtype, or `half`:      "bf16" -> p=c=o=bfloat16
 *   2. Keras presets:             "mixed_float16"  -> p=float32,c=float16,o=float16
 *                                 "mixed_bfloat16" -> p=float32,c=bfloat16,o=bfloat16
 *   3. key=value list, `,`-joined: keys p|param|params, c|compute, o|output, q|quant
 *      (int8|int4|float8), h|amax_history (an integer in 1..MXP_FP8_HISTORY_MAX = 65536, an
 *      implementation limit; only with q=float8).
 *      p defaults to float32, c follows p, o follows c, h is 1024 when q=float8.
 *      "c=f16" -> p=float32,c=float16,o=float16;  "c=bf16,o=full" -> p=float32,c=bfloat16,o=float32
 *   4. Keras quantized names <mode>_from_<source>, mode int8|int4|float8, source any of 1-3:
 *      "int8_from_mixed_bfloat16" -> p=float32,c=bfloat16,o=bfloat16,q=int8
 * `half` (as a whole policy or as a value) is the half dtype of the backend set when the text is
 * parsed (mxp_set_backend): float16 on CPU and GPU, bfloat16 on TPU.
 * Canonical form (mxp_policy_format): "p=float32,c=bfloat16,o=float32", then ",q=int8",
 * ",q=int4" or ",q=float8,h=1024" when quantized.
 */
#ifndef MIXPREC_POLICY_H
#define MIXPREC_POLICY_H

#include "quant.h" /* MXP_FP8_HISTORY_MAX */
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Quantization mode of a policy. */
typedef enum mxp_quant {
    MXP_QUANT_NONE = 0, /**< plain mixed precision */
    MXP_QUANT_INT8,     /**< Keras int8: per-channel abs-max int8 weights */
    MXP_QUANT_INT4,     /**< Keras int4: the same with range +-7, two values per byte */
    MXP_QUANT_FLOAT8    /**< float8 delayed scaling (Transformer Engine / Keras float8) */
} mxp_quant;

/**
 * A precision policy. Valid when param, compute and output are floating dtypes; quant is one
 * of mxp_quant; amax_history_len in 1..MXP_FP8_HISTORY_MAX exactly when quant ==
 * MXP_QUANT_FLOAT8 (0 otherwise); and
 * not (quant == MXP_QUANT_INT8 and compute == MXP_FLOAT16) (Keras rejects it: int8 matmul
 * outputs overflow float16).
 * Example: mxp_policy p = {MXP_FLOAT32, MXP_FLOAT16, MXP_FLOAT32, MXP_QUANT_NONE, 0};
 */
typedef struct mxp_policy {
    mxp_dtype param, compute, output; /**< floating dtypes only */
    mxp_quant quant;                  /**< MXP_QUANT_NONE for plain mixed precision */
    uint32_t amax_history_len;        /**< float8 only: 1..MXP_FP8_HISTORY_MAX (default 1024); 0 otherwise */
} mxp_policy;

/**
 * Parse a policy string (grammar above) into *out.
 * @retval MXP_OK      *out set
 * @retval MXP_EINVAL  text or out is NULL
 * @retval MXP_EPARSE  anything else; the message names the offending token and quotes the text:
 *                     unknown key, unknown dtype (e.g. "unknown dtype 'f13' in policy 'c=f13'",
 *                     jmp's "compute_float16" included), ambiguous dtype "fp8" (the message
 *                     names float8_e4m3fn and float8_e5m2; reported as MXP_EPARSE, not
 *                     MXP_EAMBIGUOUS, so that every bad policy text is one status), repeated key
 *                     ("p=f32,params=f16" too), empty part ("c=f16,"), missing key or value,
 *                     non-floating dtype, unknown quantization mode, `h` without q=float8, h = 0
 *                     or not a number, h above MXP_FP8_HISTORY_MAX (the message names the
 *                     token and the limit), q given twice, and q=int8 with compute float16.
 *                     *out is untouched on failure.
 * Thread-safety: safe (reads the backend atomically). Allocates nothing.
 */
MXP_API mxp_status mxp_policy_parse(const char *text, mxp_policy *out);

/**
 * Write the canonical form of *p into buf with snprintf semantics: at most cap bytes including
 * the terminating NUL (buf may be NULL when cap is 0); returns the length of the full canonical
 * text (excluding the NUL), so a return value >= cap means the text was truncated.
 * parse(format(p)) == p for every valid p.
 * Returns -1, leaving buf untouched, when p is NULL or not a valid policy (see mxp_policy), or
 * buf is NULL with cap > 0; mxp_last_error says why. 64 bytes always suffice.
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API int mxp_policy_format(const mxp_policy *p, char *buf, size_t cap);

/** True when a and b have the same param, compute, output, quant and amax_history_len.
 *  False when either is NULL. Thread-safety: safe. */
MXP_API bool mxp_policy_equal(const mxp_policy *a, const mxp_policy *b);

/**
 * Check that *p is a valid policy (see mxp_policy).
 * @retval MXP_OK      valid
 * @retval MXP_EINVAL  NULL or invalid; the message names the bad field
 * Thread-safety: safe.
 */
MXP_API mxp_status mxp_policy_validate(const mxp_policy *p);

/** Name of a quantization mode: "none", "int8", "int4", "float8"; "invalid" otherwise.
 *  Thread-safety: safe. The string is static. */
MXP_API const char *mxp_quant_name(mxp_quant q);

/**
 * Set the process-wide default policy (initially p=c=o=float32, no quantization), which policy
 * maps created with a NULL default return for paths no key matches. NULL or an invalid policy
 * is ignored (the default stays as it was; mxp_last_error says why).
 * Thread-safety: safe; set and get are guarded by one mutex, so a reader always sees one
 * complete policy, never a mix of two.
 */
MXP_API void mxp_set_default_policy(const mxp_policy *p);

/** The process-wide default policy (a copy). Thread-safety: safe; never torn (see above). */
MXP_API mxp_policy mxp_default_policy(void);

/** Backends, which decide what `half` means. */
typedef enum mxp_backend { MXP_BACKEND_CPU = 0, MXP_BACKEND_GPU, MXP_BACKEND_TPU } mxp_backend;

/** Set the process-wide backend (initially CPU); later parses resolve `half` with it. An
 *  invalid value is ignored. Thread-safety: safe (atomic). */
MXP_API void mxp_set_backend(mxp_backend b);

/** The process-wide backend set by mxp_set_backend. Thread-safety: safe (atomic). */
MXP_API mxp_backend mxp_get_backend(void);

/** The half dtype of backend b: MXP_BFLOAT16 for TPU; MXP_FLOAT16 for GPU, CPU (and any other
 *  value). Thread-safety: safe. */
MXP_API mxp_dtype mxp_half_dtype(mxp_backend b);

/*
 * Casting trees by a policy (jmp's Policy.cast_to_param / cast_to_compute / cast_to_output and
 * jmp.cast_to_full / cast_to_half): every floating leaf is converted (nearest-even) to the
 * policy's param / compute / output dtype, float32 (full), or the current backend's half dtype;
 * integer and bool leaves are copied untouched.
 *
 * The plain forms return a new tree (*out, which you free with mxp_tree_free; untouched on
 * failure). The _into forms write a preallocated tree of the same names and shapes without
 * allocating (exactly mxp_tree_cast_into: everything is checked before dst is written).
 * Errors: MXP_EINVAL for NULL arguments or an invalid policy; otherwise those of mxp_tree_cast /
 * mxp_tree_cast_into. Thread-safety: as mxp_tree_cast / mxp_tree_cast_into.
 */
MXP_API mxp_status mxp_policy_cast_to_param(const mxp_policy *p, const mxp_tree *src, mxp_tree **out);
MXP_API mxp_status mxp_policy_cast_to_compute(const mxp_policy *p, const mxp_tree *src, mxp_tree **out);
MXP_API mxp_status mxp_policy_cast_to_output(const mxp_policy *p, const mxp_tree *src, mxp_tree **out);
MXP_API mxp_status mxp_policy_cast_to_param_into(const mxp_policy *p, mxp_tree *dst, const mxp_tree *src);
MXP_API mxp_status mxp_policy_cast_to_compute_into(const mxp_policy *p, mxp_tree *dst,
                                                   const mxp_tree *src);
MXP_API mxp_status mxp_policy_cast_to_output_into(const mxp_policy *p, mxp_tree *dst, const mxp_tree *src);
MXP_API mxp_status mxp_tree_cast_to_full(const mxp_tree *src, mxp_tree **out);
MXP_API mxp_status mxp_tree_cast_to_half(const mxp_tree *src, mxp_tree **out);
MXP_API mxp_status mxp_tree_cast_to_full_into(mxp_tree *dst, const mxp_tree *src);
MXP_API mxp_status mxp_tree_cast_to_half_into(mxp_tree *dst, const mxp_tree *src);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_POLICY_H */
