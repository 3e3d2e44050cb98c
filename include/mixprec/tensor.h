/*
 * mixprec/tensor.h - tensors and trees: ordered lists of named tensors, and casting them.
 *
 * A tree is what jmp calls a pytree of parameters, flattened: an ordered list of named
 * tensors ("dense_0/kernel", "dense_0/bias", "step") in insertion order, looked up by name in
 * O(1). Each tensor either belongs to the tree (the tree allocated it: a copy of your data,
 * or zeros) or is borrowed (the tree points at your buffer, which must outlive the tree).
 *
 * Casting follows jmp: floating leaves are converted with mxp_convert (nearest-even, or the
 * options you pass); integer and bool leaves are never converted, only copied as they are.
 *
 * Ownership: a tree owns every name and every buffer it allocated; mxp_tree_free releases
 * them. Pointers returned by mxp_tree_at / mxp_tree_get / mxp_tree_find stay valid until the
 * tree is freed (adding more tensors does not move existing ones).
 * Thread-safety: a tree is not locked. Any number of threads may read a tree (lookups, casts
 * *from* it) at once; adding to it, or casting *into* it, needs exclusive access.
 */
#ifndef MIXPREC_TENSOR_H
#define MIXPREC_TENSOR_H

#include "convert.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most dimensions a tensor may have. */
#define MXP_TENSOR_MAX_NDIM 8

/**
 * A dense, row-major tensor: a view, it owns nothing by itself. Inside a tree, name and data
 * belong to the tree (or, for a borrowed tensor, data to you); change the *contents* of data
 * freely, never the other fields.
 */
typedef struct mxp_tensor {
    const char *name;                  /**< path such as "dense_0/kernel" (never NULL in a tree) */
    mxp_dtype dtype;                   /**< element type */
    int ndim;                          /**< 0 (a scalar: one element) .. MXP_TENSOR_MAX_NDIM */
    size_t shape[MXP_TENSOR_MAX_NDIM]; /**< shape[0..ndim); entries past ndim are ignored */
    void *data;                        /**< numel elements of dtype; 64-byte aligned when the tree allocated it */
} mxp_tensor;

/**
 * Number of elements: the product of shape[0..ndim), 1 for ndim == 0 (a scalar).
 * Returns 0 for NULL, an ndim outside 0..MXP_TENSOR_MAX_NDIM, or a product that overflows.
 * Thread-safety: safe.
 */
MXP_API size_t mxp_tensor_numel(const mxp_tensor *t);

/** Bytes of data: mxp_tensor_numel(t) * mxp_dtype_size(t->dtype) (0 when invalid, as above).
 *  Thread-safety: safe. */
MXP_API size_t mxp_tensor_nbytes(const mxp_tensor *t);

/**
 * Cast one leaf, jmp style, into a preallocated tensor of the same shape (dst->name is ignored):
 *  - src floating: dst->dtype must be `dtype`; the elements are converted with mxp_convert_ex
 *    (opts may be NULL for nearest-even);
 *  - src integer or bool: dst->dtype must equal src->dtype; the bytes are copied unchanged
 *    (`dtype` does not apply to such leaves).
 * dst->data and src->data must not overlap unless they are the same buffer with the same dtype
 * size.
 * @retval MXP_OK      dst->data written
 * @retval MXP_EINVAL  NULL tensor, `dtype` not floating, an invalid tensor (bad ndim, NULL data
 *                     with elements), shapes differ, dst->dtype is not the one required above,
 *                     or the buffers overlap otherwise than allowed; the message names the
 *                     tensors. dst untouched.
 * Thread-safety: safe on distinct dst. Allocates nothing (threads only if opts->threads > 1).
 */
MXP_API mxp_status mxp_tensor_cast_into(mxp_tensor *dst, const mxp_tensor *src, mxp_dtype dtype,
                                        const mxp_convert_opts *opts);

/** Opaque ordered collection of uniquely named tensors. */
typedef struct mxp_tree mxp_tree;

/**
 * A new, empty tree. Free it with mxp_tree_free.
 * Returns NULL when out of memory (mxp_last_error says so).
 * Thread-safety: safe (the new tree is the caller's).
 */
MXP_API mxp_tree *mxp_tree_new(void);

/** Free the tree, its names and every buffer it owns (borrowed buffers are left alone).
 *  NULL is accepted. Thread-safety: needs exclusive access to t (no other call on t running). */
MXP_API void mxp_tree_free(mxp_tree *t);

/**
 * Append a tensor that the tree owns: the tree allocates numel * size bytes (64-byte aligned)
 * and copies `data` into it, or zero-fills it when data is NULL. The name is copied.
 * shape may be NULL when ndim is 0. Any dtype (floating, integer, bool) is accepted.
 * @retval MXP_OK      appended at index mxp_tree_count(t) - 1
 * @retval MXP_EINVAL  NULL tree or name, empty name, invalid dtype, ndim outside 0..8, NULL
 *                     shape with ndim > 0, or a byte size that overflows size_t or exceeds
 *                     PTRDIFF_MAX (no object can be larger)
 * @retval MXP_EEXIST  a tensor with this name is already in the tree (the message names it)
 * @retval MXP_ENOMEM  allocation failed
 * On failure the tree is unchanged. Thread-safety: needs exclusive access to t.
 */
MXP_API mxp_status mxp_tree_add(mxp_tree *t, const char *name, mxp_dtype dtype, int ndim,
                                const size_t *shape, const void *data);

/**
 * Append a tensor that borrows your buffer: the tree stores the pointer (the name is copied),
 * never frees it, and reads/writes it in place. The buffer must outlive the tree.
 * @retval MXP_OK      appended
 * @retval MXP_EINVAL  as mxp_tree_add, data NULL while the tensor has elements, or data plus
 *                     the byte size running past the end of the address space
 * @retval MXP_EEXIST  the name is already in the tree
 * @retval MXP_ENOMEM  allocation failed (of the tree's bookkeeping)
 * On failure the tree is unchanged. Thread-safety: needs exclusive access to t.
 */
MXP_API mxp_status mxp_tree_add_borrowed(mxp_tree *t, const char *name, mxp_dtype dtype, int ndim,
                                         const size_t *shape, void *data);

/** Number of tensors (0 for NULL). Thread-safety: safe with other readers. */
MXP_API size_t mxp_tree_count(const mxp_tree *t);

/** The i-th tensor in insertion order, or NULL when t is NULL or i >= count.
 *  Thread-safety: safe with other readers. */
MXP_API const mxp_tensor *mxp_tree_at(const mxp_tree *t, size_t i);

/** The tensor named `name`, or NULL when absent (no error is recorded). O(1).
 *  Thread-safety: safe with other readers. */
MXP_API const mxp_tensor *mxp_tree_get(const mxp_tree *t, const char *name);

/**
 * Look a tensor up by name.
 * @retval MXP_OK        *out points at it
 * @retval MXP_EINVAL    NULL tree, name or out
 * @retval MXP_ENOTFOUND no such name (the message quotes it); *out untouched
 * Thread-safety: safe with other readers.
 */
MXP_API mxp_status mxp_tree_find(const mxp_tree *t, const char *name, const mxp_tensor **out);

/** Total bytes of all tensors' data (0 for NULL; SIZE_MAX when the sum does not fit in size_t).
 *  Thread-safety: safe with other readers. */
MXP_API size_t mxp_tree_nbytes(const mxp_tree *t);

/** Total number of elements of all tensors (0 for NULL; SIZE_MAX when the sum does not fit).
 *  Thread-safety: safe with other readers. */
MXP_API size_t mxp_tree_numel(const mxp_tree *t);

/**
 * A deep copy of src: same names, order, dtypes, shapes and bytes; every buffer of the copy is
 * owned by the copy (borrowed tensors become owned ones).
 * @retval MXP_OK      *out is a new tree (free with mxp_tree_free)
 * @retval MXP_EINVAL  NULL src or out
 * @retval MXP_ENOMEM  allocation failed; *out untouched
 * Thread-safety: safe with other readers of src.
 */
MXP_API mxp_status mxp_tree_clone(const mxp_tree *src, mxp_tree **out);

/**
 * Cast a tree into a new one (jmp semantics): same names, order and shapes; every floating
 * leaf converted to `dtype` (nearest-even), every integer/bool leaf copied with its own dtype.
 * The new tree owns all its buffers.
 * @retval MXP_OK      *out is a new tree (free with mxp_tree_free)
 * @retval MXP_EINVAL  NULL src or out, or `dtype` not floating; *out untouched
 * @retval MXP_ENOMEM  allocation failed; *out untouched
 * Thread-safety: safe with other readers of src.
 */
MXP_API mxp_status mxp_tree_cast(const mxp_tree *src, mxp_dtype dtype, mxp_tree **out);

/** mxp_tree_cast with conversion options (opts may be NULL); see mxp_tree_cast_into_ex for how
 *  a stochastic-rounding seed is spread over the leaves. */
MXP_API mxp_status mxp_tree_cast_ex(const mxp_tree *src, mxp_dtype dtype,
                                    const mxp_convert_opts *opts, mxp_tree **out);

/**
 * Cast src into a preallocated tree without allocating: dst must hold exactly the names of src
 * (any order), each with the same shape; a floating leaf of src needs a `dtype` leaf in dst,
 * an integer/bool leaf of src a leaf of the same dtype in dst (copied as it is).
 * Everything is checked before anything is written. Each dst leaf's buffer must be disjoint from
 * its src leaf's (or the very same buffer, with same-size elements: converted in place); that is
 * checked. Buffers shared across different leaves (a dst leaf borrowing another leaf's src or
 * dst memory) are not checked - it would take time quadratic in the number of leaves - and
 * give unspecified contents.
 * @retval MXP_OK        every leaf of dst written
 * @retval MXP_EINVAL    NULL tree, `dtype` not floating, the trees' counts differ, or a shape
 *                       or dtype mismatch (the message names the first mismatching tensor)
 * @retval MXP_ENOTFOUND a name of src is missing from dst (the message names it)
 * On failure dst is untouched. dst == src is allowed when nothing changes dtype.
 * Thread-safety: needs exclusive access to dst; src may be read by others. Allocates nothing.
 */
MXP_API mxp_status mxp_tree_cast_into(mxp_tree *dst, const mxp_tree *src, mxp_dtype dtype);

/**
 * mxp_tree_cast_into with conversion options (opts may be NULL). With stochastic rounding each
 * leaf gets its own stream: leaf i (in src order) uses seed = opts->seed mixed with i (a fixed
 * splitmix64 step), so results are reproducible and leaves are not correlated.
 * Errors as mxp_tree_cast_into, plus MXP_EINVAL for invalid options.
 */
MXP_API mxp_status mxp_tree_cast_into_ex(mxp_tree *dst, const mxp_tree *src, mxp_dtype dtype,
                                         const mxp_convert_opts *opts);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_TENSOR_H */
