/*
 * loss_scale_tree.c - the loss-scaling passes over a whole gradient tree (jmp's all_finite,
 * unscale and select_tree over a pytree): every floating leaf, integer and bool leaves skipped.
 */
#include <string.h>

#include "internal.h"
#include "mixprec/loss_scale.h"

bool mxp_tree_all_finite(const mxp_tree *t)
{
    bool ok = true;
    size_t count = mxp_tree_count(t);
    for (size_t i = 0; i < count; i++) {
        const mxp_tensor *x = mxp_tree_at(t, i);
        if (!mxp_dtype_is_floating(x->dtype)) continue;
        ok &= mxp_all_finite(x->data, x->dtype, mxp_tensor_numel(x));
    }
    return ok;
}

bool mxp_tree_unscale_check(mxp_tree *t, float scale)
{
    /* a bad scale is refused before any leaf is touched (mxp_unscale_check would refuse it
     * leaf by leaf). Checked and quoted from its bits, as mxp_unscale_check does: under the
     * caller's denormals-are-zero a comparison, or a conversion to double, sees a subnormal
     * scale as 0. */
    bool ok = true;
    if (!mxp__positive_finite(scale)) {
        char text[32];
        mxp__format_hex_float(scale, text);
        (void)mxp__fail(MXP_EINVAL, "mxp_tree_unscale_check: scale %s is not a loss scale "
                        "(expected finite and > 0); no leaf touched", text);
        return false;
    }
    size_t count = mxp_tree_count(t);
    for (size_t i = 0; i < count; i++) { /* no early exit: every leaf is unscaled */
        const mxp_tensor *x = mxp_tree_at(t, i);
        if (!mxp_dtype_is_floating(x->dtype)) continue;
        ok &= mxp_unscale_check(x->data, x->dtype, mxp_tensor_numel(x), scale);
    }
    return ok;
}

static bool same_shape(const mxp_tensor *a, const mxp_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

mxp_status mxp_tree_select(bool pred, mxp_tree *out, const mxp_tree *a, const mxp_tree *b)
{
    if (!out) return mxp__fail(MXP_EINVAL, "mxp_tree_select: out is NULL");
    if (!a) return mxp__fail(MXP_EINVAL, "mxp_tree_select: a is NULL");
    if (!b) return mxp__fail(MXP_EINVAL, "mxp_tree_select: b is NULL");
    size_t count = mxp_tree_count(out);
    if (mxp_tree_count(a) != count || mxp_tree_count(b) != count)
        return mxp__fail(MXP_EINVAL, "mxp_tree_select: trees hold %zu (out), %zu (a) and %zu (b) tensors",
                         count, mxp_tree_count(a), mxp_tree_count(b));
    /* check everything first, so out is untouched on failure */
    for (size_t i = 0; i < count; i++) {
        const mxp_tensor *o = mxp_tree_at(out, i);
        const mxp_tensor *ta = mxp_tree_get(a, o->name), *tb = mxp_tree_get(b, o->name);
        if (!ta || !tb)
            return mxp__fail(MXP_ENOTFOUND, "mxp_tree_select: tensor '%s' of out is missing from %s",
                             o->name, !ta ? "a" : "b");
        if (!same_shape(o, ta) || !same_shape(o, tb))
            return mxp__fail(MXP_EINVAL,
                             "mxp_tree_select: tensor '%s' differs in dtype or shape between out and %s",
                             o->name, !same_shape(o, ta) ? "a" : "b");
        /* as in mxp_select: out's leaf may be its a or b namesake itself, else disjoint from both
         * (a and b may overlap each other: they are only read) */
        const size_t bytes = mxp_tensor_nbytes(o);
        const bool over_a = o->data != ta->data && mxp__overlap(o->data, bytes, ta->data, bytes);
        if (over_a || (o->data != tb->data && mxp__overlap(o->data, bytes, tb->data, bytes)))
            return mxp__fail(MXP_EINVAL,
                             "mxp_tree_select: tensor '%s' of out overlaps %s's without being the same "
                             "buffer (%zu bytes); a leaf of out may only be its namesake in a or b itself "
                             "or disjoint from both",
                             o->name, over_a ? "a" : "b", bytes);
    }
    const mxp_tree *src = pred ? a : b;
    if (src == out) return MXP_OK;
    for (size_t i = 0; i < count; i++) {
        const mxp_tensor *o = mxp_tree_at(out, i);
        const mxp_tensor *s = mxp_tree_get(src, o->name);
        size_t bytes = mxp_tensor_nbytes(o);
        if (bytes && s->data != o->data) memcpy(o->data, s->data, bytes);
    }
    return MXP_OK;
}
