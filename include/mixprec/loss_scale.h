/*
 * mixprec/loss_scale.h - loss scaling for float16/float8 training: no-op, static and dynamic
 * loss scales (jmp semantics), the fused unscale-and-check pass, and the helpers a training
 * loop needs around them (skip-step select, data-parallel agreement, checkpointing).
 *
 * A training step with dynamic loss scaling, float16 gradients and float32 master weights:
 *
 *     mxp_loss_scale ls;
 *     if (mxp_loss_scale_dynamic_ex(32768.0f, 2000, 2.0f, 1.0f, INFINITY, &ls) != MXP_OK) ...
 *     for (...) {
 *         float loss = mxp_loss_scale_scale(ls, compute_loss());        // loss * scale
 *         backward(loss, grads_f16);                                    // scaled, float16
 *         bool ok = mxp_unscale_check_into(master_grads, MXP_FLOAT32,   // float32 = f16 / scale
 *                                          grads_f16, MXP_FLOAT16, n, ls.scale);
 *         if (ok) sgd_update(master_params, master_grads);              // skip the step if not
 *         ls = mxp_loss_scale_adjust(ls, ok);
 *         if (mxp_loss_scale_at_min(ls)) ...                            // scale collapsed: warn
 *     }
 *
 * Unscale into float32, never in place in float16: the scale exists to lift small gradients
 * out of float16's underflow range, and dividing them back inside float16 flushes them to zero
 * again (a gradient of 1e-8 scaled by 65536 is a normal float16, 6.6e-4; divided back in float16
 * it is 0, below the smallest float16 subnormal 6e-8). PyTorch's GradScaler refuses to unscale
 * float16 gradients for the same reason. mxp_unscale_check in place is right for gradients that
 * already are float32 (or bfloat16, whose range is float32's).
 *
 * Telling "not finite" from "bad call": mxp_all_finite, mxp_unscale_check and
 * mxp_unscale_check_into answer false both when a value is not finite and when the call itself
 * is wrong (NULL buffer, bad dtype, an n past any buffer, a scale that is not finite and > 0);
 * a wrong call also sets mxp_last_error(). The _s variants (mxp_all_finite_s, ...) return an
 * mxp_status for the call and the finiteness through a bool pointer, so a training loop with a
 * bug stops instead of skipping every step as if the gradients overflowed. (An n that is
 * possible but larger than your buffer cannot be detected: only spans past PTRDIFF_MAX or past
 * the end of the address space are.)
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

/**
 * Loss-scale state (a value type). The fields are the contract (docs/DESIGN.md section 7) and
 * the checkpoint format; there is one factor for growing and shrinking, as in jmp and Keras
 * (scale * factor after `period` finite steps, scale / factor on overflow). PyTorch's
 * GradScaler has separate growth_factor / backoff_factor, whose defaults (2, 0.5) are this
 * symmetric rule; an asymmetric pair is rarely used, and a second field would change the
 * struct (ABI of a value type users embed and copy) and the saved text, so it is not offered.
 * Construct with the checked constructors (mxp_loss_scale_dynamic_ex, _static_ex) or check a
 * hand-edited state with mxp_loss_scale_validate: mxp_loss_scale_adjust returns an invalid
 * state unchanged (period 0, factor <= 1, ...), i.e. such a scale never moves.
 */
typedef struct mxp_loss_scale {
    mxp_loss_scale_kind kind;
    float scale;       /**< current scale; 1 for NOOP */
    int32_t counter;   /**< consecutive finite steps since the last change (dynamic) */
    int32_t period;    /**< finite steps before growing; default 2000 */
    float factor;      /**< growth / shrink factor; default 2 */
    float min_scale;   /**< never shrink below this; default 1 (0 when the initial scale is < 1); 0 allowed */
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
 * unchanged. The result is valid exactly when scale is finite and > 0; this function cannot
 * report a bad scale: use mxp_loss_scale_static_ex, which does. Thread-safety: safe.
 */
MXP_API mxp_loss_scale mxp_loss_scale_static(float scale);

/**
 * A dynamic loss scale (jmp's DynamicLossScale): kind DYNAMIC, scale initial_scale, counter 0,
 * period 2000, factor 2, min_scale 1, max_scale +inf. Change the fields afterwards for other
 * settings (e.g. .min_scale = 0), or better build it with mxp_loss_scale_dynamic_ex, which
 * checks them.
 * Scales below 1 are accepted: for 0 < initial_scale < 1 the min_scale is 0 instead of 1, so
 * the state is valid and overflows keep halving the scale, as PyTorch's GradScaler (no floor)
 * does. (jmp accepts such a scale with its floor of 1, and then *raises* it to 1 on the first
 * overflow; a floor of 1 here would be an invalid state that adjust never changes; a floor at
 * initial_scale would keep the scale from ever shrinking. A scale below 1 means the loss is
 * scaled down, which only makes sense when even the unscaled gradients overflow, so the floor
 * must not stop it.) The result is invalid only when initial_scale is not finite and > 0, which
 * this function cannot report: mxp_loss_scale_dynamic_ex does. Thread-safety: safe.
 */
MXP_API mxp_loss_scale mxp_loss_scale_dynamic(float initial_scale);

/**
 * Checked constructor of a static scale: *out = mxp_loss_scale_static(scale).
 * @retval MXP_OK      *out set (a valid state)
 * @retval MXP_EINVAL  out NULL, or scale not finite and > 0 (the message gives it); *out untouched
 * Thread-safety: safe.
 */
MXP_API mxp_status mxp_loss_scale_static_ex(float scale, mxp_loss_scale *out);

/**
 * Checked constructor of a dynamic scale with every setting: kind DYNAMIC, scale initial_scale,
 * counter 0, and the given period, factor, min_scale and max_scale (jmp's defaults are 2000,
 * 2, 1, INFINITY; PyTorch's GradScaler: 65536, 2000, 2, 0, INFINITY).
 * @retval MXP_OK      *out set (a valid state: mxp_loss_scale_validate accepts it)
 * @retval MXP_EINVAL  out NULL, or an argument breaks a rule of mxp_loss_scale_validate:
 *                     initial_scale finite and > 0, period >= 1, factor finite and > 1,
 *                     0 <= min_scale <= initial_scale <= max_scale; the message names the
 *                     argument and its value. *out untouched.
 * Thread-safety: safe.
 */
MXP_API mxp_status mxp_loss_scale_dynamic_ex(float initial_scale, int32_t period, float factor,
                                             float min_scale, float max_scale,
                                             mxp_loss_scale *out);

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
 * unchanged (the contract), so it never moves: build states with the checked constructors, or
 * adjust with mxp_loss_scale_adjust_reduce(&s, finite, NULL, NULL, NULL), which reports an
 * invalid state as MXP_EINVAL. Thread-safety: safe (pure function).
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
 * A bad call - x NULL with n > 0, dtype not a valid mxp_dtype, or n so large that n * size
 * exceeds PTRDIFF_MAX or wraps the address space (e.g. n = SIZE_MAX) - returns false, reads
 * nothing and sets mxp_last_error(); mxp_all_finite_s tells it apart from "not finite".
 * Thread-safety: safe. Allocates nothing.
 * Never traps, even with floating-point exceptions unmasked, and leaves MXCSR (x86) as it
 * found it, flags included.
 */
MXP_API bool mxp_all_finite(const void *x, mxp_dtype dtype, size_t n);

/**
 * mxp_all_finite with the call's status apart from the answer: *finite = all n elements finite.
 * @retval MXP_OK      *finite set (n == 0: true; x may then be NULL)
 * @retval MXP_EINVAL  finite NULL, dtype invalid, x NULL with n > 0, or n * size past any buffer
 *                     (> PTRDIFF_MAX or wrapping); the message says which; *finite untouched
 * Thread-safety: safe. Allocates nothing. Same floating-point environment promise.
 */
MXP_API mxp_status mxp_all_finite_s(const void *x, mxp_dtype dtype, size_t n, bool *finite);

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
 * Any alignment.
 * For float16 (and float8) gradients use mxp_unscale_check_into instead: dividing in float16
 * flushes the small gradients the scale was protecting back to zero (see the top of this file).
 * The scale must be finite and > 0 (a loss scale): 0, a negative scale (it would flip every
 * gradient's sign and report success), +-inf (every gradient silently 0) and NaN are refused.
 * A refused call - scale as above, x NULL with n > 0, dtype not floating, or n * size past any
 * buffer (> PTRDIFF_MAX or wrapping, e.g. n = SIZE_MAX) - returns false without touching x and
 * sets mxp_last_error(); mxp_unscale_check_s tells it apart from "not finite".
 * Thread-safety: safe on distinct buffers. Allocates nothing.
 * Never traps, even with floating-point exceptions unmasked, and leaves MXCSR (x86) as it
 * found it, flags included.
 */
MXP_API bool mxp_unscale_check(void *x, mxp_dtype dtype, size_t n, float scale);

/**
 * mxp_unscale_check with the call's status apart from the answer: *finite = every input and
 * result finite.
 * @retval MXP_OK      x unscaled, *finite set (n == 0: true, nothing touched)
 * @retval MXP_EINVAL  finite NULL, dtype not floating, scale not finite and > 0, x NULL with
 *                     n > 0, or n * size past any buffer; the message says which; x and *finite
 *                     untouched
 * Thread-safety, allocation and floating-point environment: as mxp_unscale_check.
 */
MXP_API mxp_status mxp_unscale_check_s(void *x, mxp_dtype dtype, size_t n, float scale,
                                       bool *finite);

/**
 * Unscale scaled gradients into float32 master gradients and check them, in one pass:
 * dst[i] = (float32)src[i] * inv with inv = (float)(1.0 / (double)scale) - src widened exactly
 * to float32, one float32 product rounded to nearest-even (subnormals kept), stored as float32.
 * Returns false when any input or any result is non-finite, true otherwise (n == 0: true).
 * Every element is processed, also after a non-finite one.
 * Accepted pairs: dt = MXP_FLOAT32, and st = MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT32,
 * MXP_FLOAT8_E5M2 or MXP_FLOAT8_E4M3FN (float8 gradients, Transformer Engine style).
 * Other destinations are refused: the point is float32 master gradients (a float16 destination
 * is the underflow this function exists to avoid), and a float64 source would need a float64
 * product (use mxp_unscale_check in place).
 * The bits are exactly those of mxp_convert(dst, MXP_FLOAT32, src, st, n) followed by
 * mxp_unscale_check(dst, MXP_FLOAT32, n, scale): a NaN input stays NaN with its sign and
 * payload (quieted; e4m3fn's NaN has no payload), an infinity stays infinite, and a finite
 * value whose product overflows becomes +-inf. Same bits on every ISA path, whatever FTZ/DAZ or
 * the rounding direction; vectorised for float16, bfloat16 and float32 sources (float8 sources
 * take the scalar path). Reads n * size(st) and writes n * 4 bytes, memory-bound for large n
 * (bench/RESULTS_loss_scale.md compares it with a memcpy of the same bytes).
 * dst and src must not overlap, except dst == src with st = MXP_FLOAT32 (in place, the same
 * as mxp_unscale_check). Any alignment.
 * The scale must be finite and > 0, as for mxp_unscale_check.
 * A refused call - a pair not accepted, a bad scale, NULL buffer with n > 0, overlap, n * size
 * past any buffer - returns false, writes nothing and sets mxp_last_error();
 * mxp_unscale_check_into_s tells it apart from "not finite".
 * Thread-safety: safe on distinct dst. Allocates nothing. Never traps, even with
 * floating-point exceptions unmasked, and leaves MXCSR (x86) as it found it, flags included.
 */
MXP_API bool mxp_unscale_check_into(void *dst, mxp_dtype dt, const void *src, mxp_dtype st,
                                    size_t n, float scale);

/**
 * mxp_unscale_check_into with the call's status apart from the answer.
 * @retval MXP_OK      dst written, *finite set (n == 0: true, nothing touched)
 * @retval MXP_EINVAL  finite NULL, a (dt, st) pair not accepted, scale not finite and > 0, NULL
 *                     dst or src with n > 0, dst and src overlapping (other than in place for
 *                     float32), or n * size past any buffer; the message says which; dst and
 *                     *finite untouched
 * Thread-safety, allocation and floating-point environment: as mxp_unscale_check_into.
 */
MXP_API mxp_status mxp_unscale_check_into_s(void *dst, mxp_dtype dt, const void *src, mxp_dtype st,
                                            size_t n, float scale, bool *finite);

/**
 * jmp's select_tree for one buffer: out = pred ? a : b, n elements of dtype (bytes copied
 * unchanged, any dtype). out may be the same buffer as a or b (then nothing is copied from it
 * to itself); any other overlap of out with a or b is refused, whichever is selected (a and b
 * may overlap each other). Typical skip-step use:
 *     mxp_select(grads_finite, params, new_params, params, MXP_FLOAT32, n);
 * @retval MXP_OK      out written (n == 0 does nothing)
 * @retval MXP_EINVAL  NULL buffer with n > 0, invalid dtype, n * size past any buffer
 *                     (> PTRDIFF_MAX or wrapping), or out overlapping a or b without being it;
 *                     out untouched
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
 * With reduce NULL this is an adjust that reports an invalid state instead of returning it
 * unchanged: mxp_loss_scale_adjust_reduce(&ls, finite, NULL, NULL, NULL).
 * @retval MXP_OK      *s adjusted
 * @retval MXP_EINVAL  s is NULL (reduce is not called), or *s is invalid (reduce was called;
 *                     the message names the bad field); *s and *grads_finite untouched
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
 * are written when cap > 0 (buf may be NULL when cap is 0, to measure).
 * -1, with a message in mxp_last_error() and nothing written, when s is NULL or buf is NULL
 * with cap > 0. Thread-safety: safe.
 */
MXP_API int mxp_loss_scale_save(const mxp_loss_scale *s, char *buf, size_t cap);

/**
 * Parse a line written by mxp_loss_scale_save into *out. Blanks (spaces, tabs, a trailing
 * newline) separate fields; the fields may come in any order, each exactly once, after the
 * "mxp-loss-scale/1" tag. kind is noop|static|dynamic; counter and period are decimal int32;
 * floats are C99 hexadecimal (must be exact float32 values), "inf", or decimal (rounded to the
 * nearest float32; the decimal point is '.' whatever the caller's LC_NUMERIC locale).
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
 * and result is finite (a NULL or empty tree: true). A scale that is not finite and > 0 is
 * refused before any leaf is touched: false, with a message in mxp_last_error() quoting the
 * scale exactly (hexadecimal). The scale is checked from its bits, as mxp_unscale_check does,
 * so a subnormal scale is accepted under the caller's denormals-are-zero too.
 * For float16 gradient trees unscale leaf by leaf into float32 masters with
 * mxp_unscale_check_into instead (see the top of this file).
 * Thread-safety: needs exclusive access to t's data. Allocates nothing.
 */
MXP_API bool mxp_tree_unscale_check(mxp_tree *t, float scale);

/**
 * jmp's select_tree: every leaf of out becomes the leaf of the same name of (pred ? a : b).
 * The three trees must hold the same names (any order) with equal dtypes and shapes; out may
 * be a or b itself (its leaves are then left as they are when selected). As in mxp_select, each
 * leaf of out must be its namesake in a (or b) itself or not overlap it at all (a and b may
 * overlap each other). A leaf of out must not overlap a leaf of another name in a or b either:
 * that is not checked (it would cost a comparison of every pair of leaves), and the leaves are
 * copied in out's order, so such a leaf may be overwritten before it is read.
 * Everything is checked before anything is written.
 * @retval MXP_OK        out written
 * @retval MXP_EINVAL    NULL tree, counts differ, a dtype / shape mismatch, or a leaf of out
 *                       overlapping its a or b namesake without being it (message names the leaf)
 * @retval MXP_ENOTFOUND a name of out is missing from a or b (message names it)
 * On failure out is untouched. Thread-safety: needs exclusive access to out. Allocates nothing.
 */
MXP_API mxp_status mxp_tree_select(bool pred, mxp_tree *out, const mxp_tree *a, const mxp_tree *b);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_LOSS_SCALE_H */
