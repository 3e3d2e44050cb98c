/*
 * mixprec/loss_scale.h - loss scaling for float16/float8 training: no-op, static and dynamic
 * loss scales (jmp semantics), the fused unscale-and-check pass, and the helpers a training
 * loop needs around them (skip-step select, data-parallel agreement, checkpointing).
 *
 * A training step with dynamic loss scaling:
 *
 *     mxp_loss_scale ls = mxp_loss_scale_dynamic(32768.0f);  // 2^15, period 2000, factor 2
 *     for (...) {
 *         float loss = mxp_loss_scale_scale(ls, compute_loss());        // loss * scale
 *         backward(loss, grads);                                        // grads are scaled
 *         bool ok = mxp_unscale_check(grads, MXP_FLOAT16, n, ls.scale); // grads /= scale
 *         if (ok) sgd_update(params, grads);                            // skip the step if not
 *         ls = mxp_loss_scale_adjust(ls, ok);
 *         if (mxp_loss_scale_at_min(ls)) ...                            // scale collapsed: warn
 *     }
 *
 * The state is a plain value (docs/DESIGN.md section 7): copy it, compare it, store it. Every
 * function here is pure or acts only on the buffers / trees you pass; none allocates, and all
 * are thread-safe on distinct data.
 */
#ifndef MIXPREC_LOSS_SCALE_H
#define MIXPREC_LOSS_SCALE_H

#include "dtype.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Kind of loss scale. */
typedef enum mxp_loss_scale_kind {
    MXP_LOSS_SCALE_NOOP = 0, /**< scale 1, never changes */
    MXP_LOSS_SCALE_STATIC,   /**< a fixed scale */
    MXP_LOSS_SCALE_DYNAMIC   /**< grows by factor after period finite steps, shrinks on overflow */
} mxp_loss_scale_kind;

/** Loss-scale state (a value type). */
typedef struct mxp_loss_scale {
    mxp_loss_scale_kind kind;
    float scale;       /**< current scale; 1 for NOOP */
    int32_t counter;   /**< consecutive finite steps since the last change (dynamic) */
    int32_t period;    /**< finite steps before growing; default 2000 */
    float factor;      /**< growth / shrink factor; default 2 */
    float min_scale;   /**< never shrink below this; default 1; 0 allowed */
    float max_scale;   /**< never grow above this; default +inf (only "stay finite") */
} mxp_loss_scale;

/** Default period and factor of mxp_loss_scale_dynamic. */
#define MXP_LOSS_SCALE_DEFAULT_PERIOD 2000
#define MXP_LOSS_SCALE_DEFAULT_FACTOR 2.0f

/**
 * The no-op loss scale: kind NOOP, scale 1, counter 0, period 2000, factor 2, min_scale 1,
 * max_scale +inf. adjust returns it unchanged. Thread-safety: safe.
 */
MXP_API mxp_loss_scale mxp_loss_scale_noop(void);

/**
 * A static loss scale: kind STATIC, the given scale, counter 0, period 2000, factor 2,
 * min_scale 0, max_scale +inf (unused by a static scale, but valid values). adjust returns it
 * unchanged. The result is valid exactly when scale is finite and > 0 (check with
 * mxp_loss_scale_validate). Thread-safety: safe.
 */
MXP_API mxp_loss_scale mxp_loss_scale_static(float scale);

/**
 * A dynamic loss scale (jmp's DynamicLossScale): kind DYNAMIC, scale initial_scale, counter 0,
 * period 2000, factor 2, min_scale 1, max_scale +inf. Change the fields afterwards for other
 * settings (e.g. .min_scale = 0). The result is valid exactly when initial_scale is finite and
 * >= 1 (the default min_scale). Thread-safety: safe.
 */
MXP_API mxp_loss_scale mxp_loss_scale_dynamic(float initial_scale);

/**
 * The next state after a step whose gradients were (not) all finite - jmp's rule exactly:
 *  - DYNAMIC, grads_finite: counter + 1; when that reaches period, the scale becomes
 *    min(scale * factor, max_scale) if scale * factor is finite (otherwise it stays), and the
 *    counter returns to 0;
 *  - DYNAMIC, not finite: scale = max(min_scale, scale / factor), counter = 0; except that
 *    when that would be 0 (min_scale 0 and ~150 halvings underflow float32) the scale stays,
 *    so a valid state stays valid (jmp would reach a zero scale that can never grow back);
 *  - NOOP and STATIC: s unchanged.
 * Arithmetic is float32 (as jmp's). An invalid state (see mxp_loss_scale_validate) is returned
 * unchanged. Thread-safety: safe (pure function).
 */
MXP_API mxp_loss_scale mxp_loss_scale_adjust(mxp_loss_scale s, bool grads_finite);

/**
 * MXP_OK when s is a valid state, else MXP_EINVAL with a message naming the first bad field.
 * Valid (every kind): period >= 1, factor finite and > 1, scale finite and > 0,
 * 0 <= min_scale <= scale <= max_scale (max_scale may be +inf); NOOP also needs scale == 1,
 * DYNAMIC also 0 <= counter < period. NaN anywhere is invalid. The constructors' defaults
 * (period 2000, factor 2, min_scale 1 / 0 for STATIC, max_scale +inf) satisfy the rules.
 * @retval MXP_EINVAL  s is NULL, the kind is unknown, or a rule above fails
 * Thread-safety: safe.
 */
MXP_API mxp_status mxp_loss_scale_validate(const mxp_loss_scale *s);

/** True when mxp_loss_scale_validate(&s) would return MXP_OK (records no message).
 *  Thread-safety: safe. */
MXP_API bool mxp_loss_scale_is_valid(mxp_loss_scale s);

/**
 * True when a DYNAMIC scale has collapsed to its floor: scale <= min_scale, or (min_scale 0)
 * the scale is so small that dividing it by factor would give 0, so it can shrink no further.
 * Repeated non-finite gradients at the floor mean loss scaling cannot help any more (the
 * gradients overflow even unscaled, or contain NaN): a training loop should notice and stop.
 * False for NOOP and STATIC. Thread-safety: safe.
 */
MXP_API bool mxp_loss_scale_at_min(mxp_loss_scale s);

/** loss * s.scale as a float32 product (jmp's scale()). NOOP gives loss unchanged.
 *  Thread-safety: safe. */
MXP_API float mxp_loss_scale_scale(mxp_loss_scale s, float loss);

/**
 * True when all n elements of x (dtype) are finite - no NaN, no infinity. n == 0 gives true.
 * One full pass (no early exit, so the time does not depend on the data). Integer and bool
 * dtypes are always finite (true). Any alignment.
 * Returns false when x is NULL with n > 0 or dtype is not a valid mxp_dtype (nothing read).
 * Thread-safety: safe. Allocates nothing.
 * Never traps, even with floating-point exceptions unmasked, and leaves MXCSR (x86) as it
 * found it, flags included.
 */
MXP_API bool mxp_all_finite(const void *x, mxp_dtype dtype, size_t n);

/**
 * Unscale in place and check, in one pass (PyTorch's fused kernel): with
 * inv = (float)(1.0 / (double)scale), every element x becomes x * inv - a float32 product for
 * float32 and narrower dtypes, then rounded to nearest-even into the element's dtype
 * (subnormals kept; overflow gives inf, NaN for float8_e4m3fn); a float64 product for float64.
 * Returns false when any input or any result is non-finite, true otherwise (n == 0: true).
 * Every element is processed, also after a non-finite one.
 * Results are those of the default IEEE environment whatever the CPU's flush-to-zero /
 * denormals-are-zero modes or rounding direction, and the same bits on every ISA path.
 * NaN results: float32/float64 keep an input NaN (quieted), else the NaN scale's (quieted),
 * else (0 * inf) the x86 default NaN, sign set (0xFFC00000 / 0xFFF8000000000000); narrower
 * dtypes get their canonical quiet NaN with the sign of that float32 NaN (float16 0x7E00,
 * bfloat16 0x7FC0, e5m2 0x7E, e4m3fn 0x7F, sign bit added).
 * Any alignment. scale is not validated (0 gives inv = inf, NaN gives NaN: both return false
 * for n > 0).
 * Returns false without touching x when x is NULL with n > 0 or dtype is not floating.
 * Thread-safety: safe on distinct buffers. Allocates nothing.
 * Never traps, even with floating-point exceptions unmasked, and leaves MXCSR (x86) as it
 * found it, flags included.
 */
MXP_API bool mxp_unscale_check(void *x, mxp_dtype dtype, size_t n, float scale);

/**
 * jmp's select_tree for one buffer: out = pred ? a : b, n elements of dtype (bytes copied
 * unchanged, any dtype). out may be the same buffer as a or b (then nothing is copied from it
 * to itself); other overlaps are not allowed. Typical skip-step use:
 *     mxp_select(grads_finite, params, new_params, params, MXP_FLOAT32, n);
 * @retval MXP_OK      out written (n == 0 does nothing)
 * @retval MXP_EINVAL  NULL buffer with n > 0, invalid dtype, or n * size overflows; out untouched
 * Thread-safety: safe on distinct out. Allocates nothing.
 */
MXP_API mxp_status mxp_select(bool pred, void *out, const void *a, const void *b, mxp_dtype dtype,
                              size_t n);

/**
 * Data-parallel hook: the reduction that ANDs the local "gradients are finite" flag across
 * workers. On entry *flag is 1 (finite) or 0; on return it must hold the logical AND over all
 * workers. Return 0 on success, anything else on failure. With MPI:
 *
 *     static int and_over_ranks(int *flag, void *ctx)
 *     {
 *         return MPI_Allreduce(MPI_IN_PLACE, flag, 1, MPI_INT, MPI_LAND, *(MPI_Comm *)ctx);
 *     }
 *     ... mxp_loss_scale_adjust_reduce(&ls, local_ok, and_over_ranks, &comm, &ok);
 *
 * (MPI_SUCCESS is 0). NCCL users reduce with ncclMin over an int on the device instead.
 */
typedef int (*mxp_finite_reduce_fn)(int *flag, void *ctx);

/**
 * Agree on finiteness across workers, then adjust: flag = local_finite; reduce(&flag, ctx)
 * (skipped when reduce is NULL: single worker); *s = mxp_loss_scale_adjust(*s, flag != 0);
 * *grads_finite (may be NULL) = flag != 0 - use it, not local_finite, to decide whether to
 * apply the update, so every worker skips or applies the same steps and the scales stay equal.
 * The callback is called on every call (NOOP/STATIC/invalid states too), so collective calls
 * stay matched across workers.
 * @retval MXP_OK      *s adjusted
 * @retval MXP_EINVAL  s is NULL (reduce is not called)
 * @retval MXP_EIO     reduce returned nonzero (the message gives the code); *s and *grads_finite
 *                     untouched
 * Thread-safety: needs exclusive access to *s; reduce is called on the calling thread.
 */
MXP_API mxp_status mxp_loss_scale_adjust_reduce(mxp_loss_scale *s, bool local_finite,
                                                mxp_finite_reduce_fn reduce, void *ctx,
                                                bool *grads_finite);

/** Buffer size that always holds mxp_loss_scale_save's text and its terminating NUL. */
#define MXP_LOSS_SCALE_TEXT_MAX 192

/**
 * Write every field of s as one line (no newline), snprintf style, e.g.
 *   mxp-loss-scale/1 kind=dynamic scale=0x1p+15 counter=0 period=2000 factor=0x1p+1
 *   min_scale=0x1p+0 max_scale=inf
 * (one line; split here for width). Floats are exact hexadecimal (C99 %a form, written by
 * mixprec itself so the locale does not matter): mxp_loss_scale_restore gives back s bit for
 * bit. Any state, valid or not, can be saved.
 * Returns the length of the full text (excluding the NUL); at most cap - 1 characters and a NUL
 * are written when cap > 0 (buf may be NULL when cap is 0). -1 when s is NULL.
 * Thread-safety: safe.
 */
MXP_API int mxp_loss_scale_save(const mxp_loss_scale *s, char *buf, size_t cap);

/**
 * Parse a line written by mxp_loss_scale_save into *out. Blanks (spaces, tabs, a trailing
 * newline) separate fields; the fields may come in any order, each exactly once, after the
 * "mxp-loss-scale/1" tag. kind is noop|static|dynamic; counter and period are decimal int32;
 * floats are C99 hexadecimal (must be exact float32 values), "inf", or decimal (rounded to the
 * nearest float32).
 * @retval MXP_OK      *out set
 * @retval MXP_EINVAL  text or out NULL, or the parsed state is invalid (message names the field)
 * @retval MXP_EPARSE  malformed text: missing tag, unknown / repeated / missing field, or a bad
 *                     value (the message names the field and quotes the value)
 * *out is untouched on failure. Thread-safety: safe. Allocates nothing.
 */
MXP_API mxp_status mxp_loss_scale_restore(const char *text, mxp_loss_scale *out);

/* ---- trees: every floating leaf of a gradient tree ------------------------------------- */

/**
 * mxp_all_finite over every floating leaf of t (integer and bool leaves are ignored).
 * A NULL or empty tree gives true. Thread-safety: safe with other readers of t.
 */
MXP_API bool mxp_tree_all_finite(const mxp_tree *t);

/**
 * mxp_unscale_check over every floating leaf of t, in place (integer and bool leaves are left
 * alone). Every leaf is processed even after a non-finite one. Returns true when every input
 * and result is finite (a NULL or empty tree: true).
 * Thread-safety: needs exclusive access to t's data. Allocates nothing.
 */
MXP_API bool mxp_tree_unscale_check(mxp_tree *t, float scale);

/**
 * jmp's select_tree: every leaf of out becomes the leaf of the same name of (pred ? a : b).
 * The three trees must hold the same names (any order) with equal dtypes and shapes; out may
 * be a or b itself (its leaves are then left as they are when selected).
 * Everything is checked before anything is written.
 * @retval MXP_OK        out written
 * @retval MXP_EINVAL    NULL tree, counts differ, or a dtype / shape mismatch (message names it)
 * @retval MXP_ENOTFOUND a name of out is missing from a or b (message names it)
 * On failure out is untouched. Thread-safety: needs exclusive access to out. Allocates nothing.
 */
MXP_API mxp_status mxp_tree_select(bool pred, mxp_tree *out, const mxp_tree *a, const mxp_tree *b);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_LOSS_SCALE_H */
