/*
 * mixprec/quant.h - quantization: int8 / int4 abs-max (Keras), int8 matmul (Keras' int8 Dense),
 * float8 with current and delayed scaling (Transformer Engine), MX block scaling (OCP MXFP8).
 *
 * The semantics are docs/DESIGN.md section 8. In one screen:
 *   - A scale s is the multiplier applied on the way in: q = round(x * s). Each format says how
 *     values come back (int8 / int4: y = q / s; float8: y = q * (1/s); MX: y = q * 2^(e-127)).
 *   - Inputs x are float32, float16 or bfloat16 (widened exactly); any other dtype is
 *     MXP_EUNSUPPORTED. x * s is a float32 product rounded to nearest even, then rounded once
 *     more into the target: integers with ties to even, float8 nearest-even and saturating
 *     (+-inf -> +-max finite; NaN stays NaN).
 *   - The static quantizers (int8, int4, float8 current scaling, MX) refuse a non-finite input
 *     with MXP_EINVAL naming the first bad index, outputs untouched: a weight with NaN is a
 *     corrupt checkpoint, not something to round.
 *   - Scales are float32; int8 / int4 / float8 scales are stored row-major over the
 *     (row-group, column-group) grid of the layout (mxp_qlayout_nscales of them).
 *
 * Conventions of every function here: sizes are element counts; a layout with rows * cols == 0
 * is a no-op that accepts NULL buffers; "size overflow" (MXP_EINVAL) is a count whose bytes
 * could not be one object: rows * cols * 8 (any output dtype) or m * n * size(yt) past
 * PTRDIFF_MAX, or n * size past PTRDIFF_MAX or the end of the address space; outputs (values
 * and scales) are untouched on failure; mxp_last_error() names the bad argument. Results do not
 * depend on the caller's floating-point environment (rounding direction, flush-to-zero /
 * denormals-are-zero, unmasked exceptions): every call computes in the default one and gives the
 * caller's back unchanged. The stateless functions are thread-safe and allocate nothing unless
 * stated; an mxp_fp8_scaler is one tensor's state and must not be used from two threads at once
 * without external locking.
 */
#ifndef MIXPREC_QUANT_H
#define MIXPREC_QUANT_H

#include "common.h"
#include "dtype.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- layouts ------------------------------------------------------------------------------ */

/** Which elements share a scale. */
typedef enum mxp_qaxis {
    MXP_QAXIS_TENSOR = 0, /**< one scale for the whole matrix */
    MXP_QAXIS_ROW,        /**< a scale per row: per token (activations), per output channel of a
                               [out, in] weight */
    MXP_QAXIS_COL         /**< a scale per column: per output channel of a Keras kernel [in, units] */
} mxp_qaxis;

/** A row-major matrix and how its scales are laid out. A vector is 1 x n. */
typedef struct mxp_qlayout {
    size_t rows, cols;  /**< row-major, row stride = cols elements */
    mxp_qaxis axis;
    size_t group;       /**< 0: the whole row (ROW) / column (COL) shares a scale; g > 0: groups of g
                             consecutive elements along it (the last group may be shorter).
                             Must be 0 for MXP_QAXIS_TENSOR. */
} mxp_qlayout;

/**
 * Number of scales a layout has: 1 (TENSOR), rows * ceil(cols / g) (ROW; g = cols when group is
 * 0), ceil(rows / g) * cols (COL; g = rows when group is 0). 0 when l is NULL or invalid (bad
 * axis, a group with TENSOR, an overflowing count) or when rows * cols == 0.
 * Thread-safety: safe.
 */
MXP_API size_t mxp_qlayout_nscales(const mxp_qlayout *l);

/* ---- int8 / int4 abs-max (Keras abs_max_quantize, bit for bit) --------------------------- */

/**
 * int8 abs-max quantization. Per scale group: amax = max |x|; s = 127 / (amax + 1e-7f)
 * (float32 addition, then float32 division); q = clamp(rne(x * s), -127, 127).
 * q has rows * cols elements, scales mxp_qlayout_nscales(l).
 * @retval MXP_OK            q and scales written
 * @retval MXP_EINVAL        NULL buffer with rows * cols > 0, invalid layout, rows * cols
 *                           overflowing, or a non-finite x (the message names its index)
 * @retval MXP_EUNSUPPORTED  xt is not float32, float16 or bfloat16
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_quantize_int8(int8_t *q, float *scales, const void *x, mxp_dtype xt,
                                     const mxp_qlayout *l);

/**
 * y = (float)q / s (a float32 division), rounded to nearest even into yt (a floating dtype).
 * Any int8 value is accepted (-128 included).
 * @retval MXP_EINVAL        NULL buffer with rows * cols > 0, invalid layout, a scale that is not
 *                           finite and > 0 (the message names its index), or a non-floating yt
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_dequantize_int8(void *y, mxp_dtype yt, const int8_t *q, const float *scales,
                                       const mxp_qlayout *l);

/**
 * int4 abs-max: as mxp_quantize_int8 with s = 7 / (amax + 1e-7f) and q = clamp(rne(x * s), -8, 7),
 * packed two per byte along each row: element 2i in the low nibble, 2i + 1 in the high nibble,
 * two's complement; a row of odd length ends with a zero high nibble. packed holds
 * rows * ceil(cols / 2) bytes.
 * Errors and thread-safety as mxp_quantize_int8.
 */
MXP_API mxp_status mxp_quantize_int4(uint8_t *packed, float *scales, const void *x, mxp_dtype xt,
                                     const mxp_qlayout *l);

/** Dequantize packed int4 (layout as mxp_quantize_int4); errors as mxp_dequantize_int8. */
MXP_API mxp_status mxp_dequantize_int4(void *y, mxp_dtype yt, const uint8_t *packed,
                                       const float *scales, const mxp_qlayout *l);

/**
 * Pack a rows x cols int8 matrix of values in -8..7 into rows * ceil(cols / 2) bytes (layout of
 * mxp_quantize_int4).
 * @retval MXP_EINVAL  NULL buffer with rows * cols > 0, size overflow, or a value outside -8..7
 *                     (the message names its row, column and value); packed untouched
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_int4_pack(uint8_t *packed, const int8_t *q, size_t rows, size_t cols);

/**
 * Unpack rows * ceil(cols / 2) bytes into a rows x cols int8 matrix (values -8..7, sign
 * extended). The high nibble of an odd row's last byte is ignored.
 * @retval MXP_EINVAL  NULL buffer with rows * cols > 0, or size overflow
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_int4_unpack(int8_t *q, const uint8_t *packed, size_t rows, size_t cols);

/* ---- int8 matmul (Keras' int8 Dense) ------------------------------------------------------ */

/**
 * y[i][j] = (float)acc[i][j] / (sa[i] * sb[j]) rounded into yt, where a is [m, k] int8 row-major
 * with per-row scales sa (m of them), b is [k, n] int8 row-major with per-column scales sb
 * (n of them), acc is the exact integer dot product (exact for every k and every int8 value,
 * -128 included: no int32 wrap-around), (float)acc is one rounding to float32, sa[i] * sb[j] is a
 * float32 product, the division is float32, and the result is rounded to nearest even into yt
 * (any floating dtype: float32 as it is, float64 exactly, bfloat16, float16 and the float8
 * formats rounded as mxp_convert does, not saturating: overflow gives inf, NaN for e4m3fn).
 * y is [m, n] row-major, any
 * alignment. Every ISA path gives bit-identical results. These float32 steps are IEEE
 * round-to-nearest-even whatever the caller's floating-point mode: flush-to-zero,
 * denormals-are-zero and directed rounding in MXCSR are set aside for the call, exceptions are
 * masked, and MXCSR is given back as it was. A product of scales that underflows to 0 gives
 * +-inf (or NaN where acc is 0), as the formula says; k == 0 gives acc = 0.
 * m * n == 0 is a no-op that accepts NULL buffers (sizes are still checked for overflow).
 * @retval MXP_EINVAL        NULL buffer with m * n > 0 (a and b may be NULL when k == 0), size
 *                           overflow (m * k, k * n or the bytes of y), or a scale that is not
 *                           finite and > 0 (the first bad sa[i] / sb[j] is named); y untouched
 * @retval MXP_EUNSUPPORTED  yt not a floating dtype; y untouched
 * @retval MXP_ENOMEM        the packing buffers (about 1 MiB) could not be allocated
 * Threads: runs on the calling thread only (no threads are started); safe to call concurrently.
 * Allocates its packing buffers per call and frees them before returning.
 */
MXP_API mxp_status mxp_matmul_int8(void *y, mxp_dtype yt, const int8_t *a, const float *sa,
                                   const int8_t *b, const float *sb, size_t m, size_t k, size_t n);

/* ---- float8, current scaling ------------------------------------------------------------- */

/**
 * float8 with current scaling: per scale group fmax = 448 (fmt = MXP_FLOAT8_E4M3FN) or 57344
 * (MXP_FLOAT8_E5M2); s = fmax / amax (float32 division); amax == 0 gives s = 1; s = inf (amax
 * tiny) gives s = FLT_MAX. q = sat_fp8(x * s), one byte per element.
 * @retval MXP_EINVAL        NULL buffer with rows * cols > 0, invalid layout, fmt not a float8
 *                           dtype, or a non-finite x (index named)
 * @retval MXP_EUNSUPPORTED  xt not float32, float16 or bfloat16
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_quantize_fp8(void *q, mxp_dtype fmt, float *scales, const void *x,
                                    mxp_dtype xt, const mxp_qlayout *l);

/**
 * y = (float)q * inv with inv = 1 / s correctly rounded in float32 (Transformer Engine's
 * scale_inv), rounded into yt. A float8 NaN gives NaN.
 * @retval MXP_EINVAL  NULL buffer with rows * cols > 0, invalid layout, fmt not float8, a
 *                     non-floating yt, or a scale that is not finite and > 0 (index named)
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_dequantize_fp8(void *y, mxp_dtype yt, const void *q, mxp_dtype fmt,
                                      const float *scales, const mxp_qlayout *l);

/* ---- float8, delayed scaling (Transformer Engine's DelayedScaling, with one fix) --------- */

/** How the scale is derived from the amax history. */
typedef enum mxp_amax_algo {
    MXP_AMAX_MAX = 0,     /**< a = max over the history (TE's default) */
    MXP_AMAX_MOST_RECENT  /**< a = the newest entry */
} mxp_amax_algo;

/** A delayed-scaling recipe. Valid when format is float8, 1 <= history_len <=
 *  MXP_FP8_HISTORY_MAX and 0 <= margin <= MXP_FP8_MARGIN_MAX. */
typedef struct mxp_fp8_recipe {
    mxp_dtype format;      /**< MXP_FLOAT8_E4M3FN (weights, activations) or MXP_FLOAT8_E5M2 (gradients) */
    uint32_t history_len;  /**< 1..MXP_FP8_HISTORY_MAX; Keras and TE default 1024 */
    mxp_amax_algo algo;
    int margin;            /**< >= 0: the scale is divided by 2^margin */
} mxp_fp8_recipe;

/** Largest accepted margin. */
#define MXP_FP8_MARGIN_MAX 64

/** Largest accepted amax history length (an implementation limit: recipes, the policy
 *  grammar's h= and restored states are refused above it). Every update scans the history and
 *  a state saves it as text, so a longer one would only cost time and memory; Keras and
 *  Transformer Engine default to 1024. */
#define MXP_FP8_HISTORY_MAX 65536

/** The default recipe for a format: history 1024, MXP_AMAX_MAX, margin 0. A format that is not
 *  float8 is copied as it is: mxp_fp8_scaler_new refuses that recipe, naming the format.
 *  Thread-safety: safe. */
MXP_API mxp_fp8_recipe mxp_fp8_recipe_default(mxp_dtype format);

/** One tensor's delayed-scaling state: scale, scale_inv, amax history, this step's amax. */
typedef struct mxp_fp8_scaler mxp_fp8_scaler;

/**
 * A new state: scale 1, scale_inv 1, history of history_len zeros, this step's amax 0,
 * non-finite step count 0. *out receives the state (owned by the caller: mxp_fp8_scaler_free).
 * @retval MXP_EINVAL  r or out NULL, or an invalid recipe (the message names the field), a
 *                     history_len above MXP_FP8_HISTORY_MAX included
 * @retval MXP_ENOMEM  allocation failed
 * *out is untouched on failure. Thread-safety: safe.
 */
MXP_API mxp_status mxp_fp8_scaler_new(const mxp_fp8_recipe *r, mxp_fp8_scaler **out);

/** Free a state. NULL is accepted. */
MXP_API void mxp_fp8_scaler_free(mxp_fp8_scaler *s);

/** The recipe the state was made with (a zeroed recipe for NULL). */
MXP_API mxp_fp8_recipe mxp_fp8_scaler_recipe(const mxp_fp8_scaler *s);

/** The current scale (the multiplier on the way in); 0 for NULL. */
MXP_API float mxp_fp8_scaler_scale(const mxp_fp8_scaler *s);

/** 1 / scale correctly rounded in float32 (the dequantization multiplier); 0 for NULL. */
MXP_API float mxp_fp8_scaler_scale_inv(const mxp_fp8_scaler *s);

/**
 * Quantize n elements with the CURRENT scale in one pass: q = sat_fp8(x * scale) (+-inf ->
 * +-max finite, NaN stays NaN; no refusal: this is the training path), and max-merge the
 * call's amax = max |x| into this step's amax (a NaN anywhere makes it NaN, an inf makes it inf).
 * @retval MXP_EINVAL        s NULL, NULL buffer with n > 0, or n * size overflowing
 * @retval MXP_EUNSUPPORTED  xt not float32, float16 or bfloat16
 * Nothing is written or merged on failure. Thread-safety: not for one s from two threads.
 */
MXP_API mxp_status mxp_fp8_quantize_delayed(void *q, const void *x, mxp_dtype xt, size_t n,
                                            mxp_fp8_scaler *s);

/** This step's amax so far (0 at the start of a step; NaN/inf when such a value was seen);
 *  0 for NULL. */
MXP_API float mxp_fp8_scaler_amax(const mxp_fp8_scaler *s);

/**
 * Replace this step's amax, e.g. with the MAX all-reduce of every data-parallel rank's
 * mxp_fp8_scaler_amax, before mxp_fp8_scaler_update. Any value >= 0, inf or NaN is accepted.
 * @retval MXP_EINVAL  s NULL or amax negative (or -0 is fine: it is 0)
 */
MXP_API mxp_status mxp_fp8_scaler_set_amax(mxp_fp8_scaler *s, float amax);

/**
 * End the step. With a = this step's amax:
 *   a == 0: nothing changes (a layer that did not run does not roll the history);
 *   a non-finite: the history and scale are kept, the non-finite step count grows by one
 *     (Keras and TE would let one inf freeze the scale for history_len steps);
 *   otherwise a becomes the newest history entry (the oldest drops out), then
 *     h = max(history) (MXP_AMAX_MAX) or a (MXP_AMAX_MOST_RECENT),
 *     s = (fmax / h) / 2^margin, each a float32 operation; s = inf gives FLT_MAX, and s below
 *     2^-127 gives 2^-127 (so that scale_inv stays finite); scale_inv = 1 / s (float32).
 * This step's amax returns to 0 in every case.
 * @retval MXP_EINVAL  s NULL
 * Thread-safety: not for one s from two threads.
 */
MXP_API mxp_status mxp_fp8_scaler_update(mxp_fp8_scaler *s);

/** Number of steps whose amax was non-finite (skipped by mxp_fp8_scaler_update); 0 for NULL. */
MXP_API uint64_t mxp_fp8_scaler_nonfinite_steps(const mxp_fp8_scaler *s);

/**
 * Copy the amax history, oldest first, into out (at most cap entries). Returns history_len
 * (0 for NULL); out may be NULL when cap is 0. out NULL with cap > 0 is a bad call: 0, with a
 * message in mxp_last_error(), and nothing written.
 */
MXP_API size_t mxp_fp8_scaler_history(const mxp_fp8_scaler *s, float *out, size_t cap);

/**
 * Write the whole state (recipe, scale, scale_inv, this step's amax, non-finite step count,
 * history) as text, snprintf style: returns the length of the full text (excluding the NUL),
 * writes at most cap - 1 characters and a NUL when cap > 0 (buf may be NULL when cap is 0, to
 * measure). -1, with a message in mxp_last_error() and nothing written, when s is NULL, buf is
 * NULL with cap > 0, or the text would exceed INT_MAX (it cannot: a history of
 * MXP_FP8_HISTORY_MAX entries takes under 1 MiB). Floats are exact (hexadecimal, locale
 * independent): mxp_fp8_scaler_restore gives back the state bit for bit.
 * Thread-safety: safe for concurrent readers of s.
 */
MXP_API int mxp_fp8_scaler_save(const mxp_fp8_scaler *s, char *buf, size_t cap);

/**
 * Rebuild a state from mxp_fp8_scaler_save's text; *out receives a new state (caller frees).
 * Floats are read as by mxp_loss_scale_restore: exact hexadecimal, inf, nan, or a decimal
 * (rounded to float32; the decimal point is '.' whatever the caller's LC_NUMERIC locale).
 * @retval MXP_EINVAL  text or out NULL, or the state it describes is invalid (bad recipe, a
 *                     scale outside [2^-127, FLT_MAX] (the range mxp_fp8_scaler_update keeps it
 *                     in, so that scale_inv is finite), a scale_inv other than 1 / scale, a
 *                     negative history entry)
 * @retval MXP_EPARSE  malformed text (the message names the field), a history_len above
 *                     MXP_FP8_HISTORY_MAX included (refused before anything is allocated)
 * @retval MXP_ENOMEM  allocation failed
 * *out is untouched on failure. Thread-safety: safe.
 */
MXP_API mxp_status mxp_fp8_scaler_restore(const char *text, mxp_fp8_scaler **out);

/* ---- MX block scaling (OCP Microscaling MXFP8) ------------------------------------------- */

/** How an MX block's shared scale is chosen. */
typedef enum mxp_mx_rounding {
    MXP_MX_RCEIL = 0, /**< X = the smallest power of two with amax / X <= fmax (Transformer Engine,
                           cuBLAS): the block maximum never saturates */
    MXP_MX_FLOOR      /**< X = 2^(floor(log2 amax) - emax), emax = 8 (e4m3fn) or 15 (e5m2) (OCP v1.0) */
} mxp_mx_rounding;

/** Elements per MX block (along each row). */
#define MXP_MX_BLOCK 32

/**
 * MXFP8: blocks of 32 consecutive elements along each row (the last block of a row may be
 * shorter); per block one E8M0 byte e (scale X = 2^(e - 127), clamped to e in 0..254); elements
 * q = x / X rounded ONCE (nearest even, saturating) into fmt, with no intermediate float32
 * rounding even when x / X falls in float32's subnormal range. An all-zero block gets e = 0.
 * scales holds rows * ceil(cols / 32) bytes.
 * @retval MXP_EINVAL        NULL buffer with rows * cols > 0, fmt not float8, bad r, size
 *                           overflow, or a non-finite x (index named)
 * @retval MXP_EUNSUPPORTED  xt not float32, float16 or bfloat16
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_quantize_mx(void *q, mxp_dtype fmt, uint8_t *scales, const void *x,
                                   mxp_dtype xt, size_t rows, size_t cols, mxp_mx_rounding r);

/* ---- one-pass variants of the static quantizers ------------------------------------------- */

/** Flag of the _ex quantizers: read the input once (see below). */
#define MXP_QUANT_ONE_PASS 1u

/**
 * The static quantizers with flags (0 or MXP_QUANT_ONE_PASS); flags = 0 is exactly the plain
 * function. The plain functions check the whole input for non-finite values before writing
 * anything, so that a refused call leaves every output untouched; out of cache that check is a
 * second read of the input (about half the time of a per-row quantization of a matrix larger
 * than the last-level cache: bench/RESULTS_quant.md).
 *
 * MXP_QUANT_ONE_PASS drops that guarantee for layouts whose groups are independent (ROW, with
 * or without groups, and MX blocks): each group (MX: each piece of up to 1024 elements of a
 * row) is checked while its amax is taken and then cast from the cache, so the input is read
 * from memory once. A non-finite x is still refused with MXP_EINVAL naming its index (the
 * first in row-major order), but q and scales of the groups before it have been written; the
 * group holding it and every later one are untouched (int4: a byte shared by the last written
 * group and the bad one holds the former's nibble and a zero). On success the outputs are bit for bit
 * those of the plain function. TENSOR and COL layouts need every amax before the first write,
 * so the flag changes nothing for them.
 * Use it when a refused call discards the outputs anyway (activations quantized per token in a
 * forward pass); keep the plain functions for data that must survive a corrupt input
 * (checkpoints, weights quantized in place of a previous version).
 * @retval MXP_EINVAL  as the plain function, or flags with unknown bits (named)
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_quantize_int8_ex(int8_t *q, float *scales, const void *x, mxp_dtype xt,
                                        const mxp_qlayout *l, unsigned flags);
/** mxp_quantize_int4 with flags; see mxp_quantize_int8_ex. */
MXP_API mxp_status mxp_quantize_int4_ex(uint8_t *packed, float *scales, const void *x, mxp_dtype xt,
                                        const mxp_qlayout *l, unsigned flags);
/** mxp_quantize_fp8 with flags; see mxp_quantize_int8_ex. */
MXP_API mxp_status mxp_quantize_fp8_ex(void *q, mxp_dtype fmt, float *scales, const void *x,
                                       mxp_dtype xt, const mxp_qlayout *l, unsigned flags);
/** mxp_quantize_mx with flags; see mxp_quantize_int8_ex. */
MXP_API mxp_status mxp_quantize_mx_ex(void *q, mxp_dtype fmt, uint8_t *scales, const void *x,
                                      mxp_dtype xt, size_t rows, size_t cols, mxp_mx_rounding r,
                                      unsigned flags);

/**
 * y = q * 2^(e - 127), rounded into yt (a floating dtype). e = 0xFF (NaN scale) gives NaN for
 * the whole block; a float8 NaN gives NaN.
 * @retval MXP_EINVAL  NULL buffer with rows * cols > 0, fmt not float8, non-floating yt, size
 *                     overflow
 * Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_dequantize_mx(void *y, mxp_dtype yt, const void *q, mxp_dtype fmt,
                                     const uint8_t *scales, size_t rows, size_t cols);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_QUANT_H */
