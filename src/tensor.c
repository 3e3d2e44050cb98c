/*
 * tensor.c - trees of named tensors and jmp-style casting (floating leaves converted, integer
 * and bool leaves copied as they are).
 *
 * A tree keeps one heap node per tensor (so mxp_tensor pointers handed out never move), an
 * array of node pointers in insertion order, and an open-addressing hash index name -> slot
 * (linear probing, power-of-two capacity, load <= 1/2) for O(1) lookup.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- tensors ------------------------------------------------------------------------------ */

size_t mxp_tensor_numel(const mxp_tensor *t)
{
    if (!t || t->ndim < 0 || t->ndim > MXP_TENSOR_MAX_NDIM) return 0;
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        size_t d = t->shape[i];
        if (d != 0 && n > SIZE_MAX / d) return 0;
        n *= d;
    }
    return n;
}

size_t mxp_tensor_nbytes(const mxp_tensor *t)
{
    size_t n = mxp_tensor_numel(t), sz = t ? mxp_dtype_size(t->dtype) : 0;
    if (sz == 0 || n > SIZE_MAX / sz) return 0;
    return n * sz;
}

/* Shape equality over the first ndim dimensions. */
static bool same_shape(const mxp_tensor *a, const mxp_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* Valid: ndim in range, dtype valid, size representable, data present when there are bytes. */
/* role: "src" / "dst" (mxp_tensor_cast_into's arguments) or "source" / "destination" (a tree's
 * leaves, which never have NULL data with bytes: the tree allocates or checks it). */
static mxp_status check_tensor(const char *fn, const mxp_tensor *t, const char *role)
{
    const char *name = t->name ? t->name : "(unnamed)";
    if (t->ndim < 0 || t->ndim > MXP_TENSOR_MAX_NDIM)
        return mxp__fail(MXP_EINVAL, "%s: %s tensor '%s': ndim %d outside 0..%d", fn, role, name, t->ndim,
                         MXP_TENSOR_MAX_NDIM);
    if (!mxp__dtype_valid(t->dtype))
        return mxp__fail(MXP_EINVAL, "%s: %s tensor '%s': invalid dtype %d", fn, role, name,
                         (int)t->dtype);
    bool empty = false;
    for (int i = 0; i < t->ndim; i++) empty = empty || t->shape[i] == 0;
    size_t bytes = 0;
    if (!empty && (mxp_tensor_nbytes(t) == 0 ||
                   !mxp__span_ok(t->data, mxp_tensor_numel(t), mxp_dtype_size(t->dtype), &bytes)))
        return mxp__fail(MXP_EINVAL, "%s: %s tensor '%s': byte size overflows (more than "
                         "PTRDIFF_MAX bytes, or past the end of the address space)", fn, role, name);
    if (!empty && !t->data)
        return mxp__fail(MXP_EINVAL, "%s: %s->data is NULL (tensor '%s' has %zu bytes)", fn, role, name, bytes);
    return MXP_OK;
}

/* t's shape as "[2, 3]" into out (a valid tensor: ndim in 0..MXP_TENSOR_MAX_NDIM; 8 dimensions of
 * 20 digits fit in 200 bytes). */
static const char *shape_text(const mxp_tensor *t, char out[200])
{
    size_t n = 0;
    out[n++] = '[';
    for (int i = 0; i < t->ndim; i++)
        n += (size_t)snprintf(out + n, 200 - n, "%s%zu", i ? ", " : "", t->shape[i]);
    snprintf(out + n, 200 - n, "]");
    return out;
}

/* Everything mxp_tensor_cast_into checks, without writing. */
static mxp_status check_leaf_cast(const char *fn, const mxp_tensor *dst, const mxp_tensor *src, mxp_dtype dtype,
                                  bool args)
{
    mxp_status s;
    if ((s = check_tensor(fn, src, args ? "src" : "source")) != MXP_OK) return s;
    if ((s = check_tensor(fn, dst, args ? "dst" : "destination")) != MXP_OK) return s;
    const char *sn = src->name ? src->name : "(unnamed)";
    const char *dn = dst->name ? dst->name : "(unnamed)";
    if (!same_shape(dst, src)) {
        char ss[200], ds[200];
        return mxp__fail(MXP_EINVAL, "%s: shape mismatch: source tensor '%s' is %s, destination '%s' is %s", fn, sn,
                         shape_text(src, ss), dn, shape_text(dst, ds));
    }
    mxp_dtype want = mxp_dtype_is_floating(src->dtype) ? dtype : src->dtype;
    /* Buffers may be the very same (same size elements, converted in place) or disjoint. */
    uintptr_t d0 = (uintptr_t)dst->data, s0 = (uintptr_t)src->data;
    size_t db = mxp_tensor_nbytes(dst), sb = mxp_tensor_nbytes(src);
    bool same = d0 == s0 && mxp_dtype_size(dst->dtype) == mxp_dtype_size(src->dtype);
    if (db && sb && !same && d0 < s0 + sb && s0 < d0 + db)
        return mxp__fail(MXP_EINVAL, "%s: tensors '%s' and '%s' overlap in memory (only the very "
                                     "same buffer with same-size elements is allowed)",
                         fn, sn, dn);
    if (dst->dtype != want)
        return mxp__fail(MXP_EINVAL, "%s: dtype mismatch: source tensor '%s' (%s) needs a %s "
                                     "destination, but '%s' is %s%s",
                         fn, sn, mxp_dtype_name(src->dtype), mxp_dtype_name(want), dn,
                         mxp_dtype_name(dst->dtype),
                         mxp_dtype_is_floating(src->dtype) ? ""
                                                           : " (integer and bool leaves are never converted)");
    return MXP_OK;
}

/* The write half of a leaf cast; arguments already checked. */
static mxp_status write_leaf(const char *fn, mxp_tensor *dst, const mxp_tensor *src, const mxp_convert_opts *opts)
{
    size_t n = mxp_tensor_numel(src);
    if (n == 0) return MXP_OK;
    if (mxp_dtype_is_floating(src->dtype)) {
        if (dst->data == src->data && dst->dtype == src->dtype) return MXP_OK;
        return mxp__convert(fn, dst->data, dst->dtype, src->data, src->dtype, n, opts);
    }
    if (dst->data != src->data) memmove(dst->data, src->data, n * mxp_dtype_size(src->dtype));
    return MXP_OK;
}

mxp_status mxp_tensor_cast_into(mxp_tensor *dst, const mxp_tensor *src, mxp_dtype dtype,
                                const mxp_convert_opts *opts)
{
    static const char fn[] = "mxp_tensor_cast_into";
    if (!dst) return mxp__fail(MXP_EINVAL, "%s: dst is NULL", fn);
    if (!src) return mxp__fail(MXP_EINVAL, "%s: src is NULL", fn);
    if (!mxp_dtype_is_floating(dtype))
        return mxp__fail(MXP_EINVAL, "%s: cannot cast to dtype %s (%d): casts target floating dtypes only", fn,
                         mxp_dtype_name(dtype), (int)dtype);
    mxp_status s = mxp__check_opts(fn, opts);
    if (s == MXP_OK) s = check_leaf_cast(fn, dst, src, dtype, true);
    return s != MXP_OK ? s : write_leaf(fn, dst, src, opts);
}

/* ---- trees -------------------------------------------------------------------------------- */

typedef struct node {
    mxp_tensor t;
    char *name;  /* owned copy; t.name points here */
    bool owned;  /* t.data allocated by the tree */
    size_t hash;
} node;

struct mxp_tree {
    node **nodes; /* insertion order */
    size_t count, cap;
    size_t *index; /* hash slots: node position + 1, 0 = empty */
    size_t index_cap;
};

static size_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

mxp_tree *mxp_tree_new(void)
{
    mxp_tree *t = calloc(1, sizeof *t);
    if (!t) (void)mxp__fail(MXP_ENOMEM, "mxp_tree_new: out of memory");
    return t;
}

static void node_free(node *n)
{
    if (!n) return;
    if (n->owned) free(n->t.data);
    free(n->name);
    free(n);
}

void mxp_tree_free(mxp_tree *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->count; i++) node_free(t->nodes[i]);
    free(t->nodes);
    free(t->index);
    free(t);
}

/* Slot of `name` in the index, or of the empty slot where it would go. */
static size_t index_probe(const mxp_tree *t, const char *name, size_t h)
{
    size_t mask = t->index_cap - 1, i = h & mask;
    while (t->index[i] != 0) {
        const node *n = t->nodes[t->index[i] - 1];
        if (n->hash == h && strcmp(n->name, name) == 0) return i;
        i = (i + 1) & mask;
    }
    return i;
}

static long find_pos(const mxp_tree *t, const char *name)
{
    if (!t || !name || t->index_cap == 0) return -1;
    size_t i = index_probe(t, name, hash_str(name));
    return t->index[i] ? (long)(t->index[i] - 1) : -1;
}

/* Make room for one more node: grow the node array and, at load 1/2, rebuild the index. */
static mxp_status reserve_one(mxp_tree *t, const char *fn)
{
    if (t->count == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 8;
        node **nn = realloc(t->nodes, nc * sizeof *nn);
        if (!nn) return mxp__fail(MXP_ENOMEM, "%s: out of memory growing the tree to %zu tensors", fn, nc);
        t->nodes = nn;
        t->cap = nc;
    }
    if ((t->count + 1) * 2 > t->index_cap) {
        size_t ic = t->index_cap ? t->index_cap * 2 : 16;
        size_t *ix = calloc(ic, sizeof *ix);
        if (!ix) return mxp__fail(MXP_ENOMEM, "%s: out of memory growing the tree's name index", fn);
        free(t->index);
        t->index = ix;
        t->index_cap = ic;
        for (size_t k = 0; k < t->count; k++) {
            size_t i = index_probe(t, t->nodes[k]->name, t->nodes[k]->hash);
            t->index[i] = k + 1;
        }
    }
    return MXP_OK;
}

static mxp_status add_node(mxp_tree *t, const char *name, mxp_dtype dtype, int ndim,
                           const size_t *shape, void *data, bool borrow, const char *fn)
{
    if (!t) return mxp__fail(MXP_EINVAL, "%s: tree is NULL", fn);
    if (!name) return mxp__fail(MXP_EINVAL, "%s: name is NULL", fn);
    if (!*name) return mxp__fail(MXP_EINVAL, "%s: empty tensor name", fn);
    if (!mxp__dtype_valid(dtype))
        return mxp__fail(MXP_EINVAL, "%s: tensor '%s' has invalid dtype %d", fn, name, (int)dtype);
    if (ndim < 0 || ndim > MXP_TENSOR_MAX_NDIM)
        return mxp__fail(MXP_EINVAL, "%s: tensor '%s' has ndim %d outside 0..%d", fn, name, ndim,
                         MXP_TENSOR_MAX_NDIM);
    if (ndim > 0 && !shape)
        return mxp__fail(MXP_EINVAL, "%s: tensor '%s' has ndim %d, but shape is NULL", fn, name, ndim);
    mxp_tensor tt = {NULL, dtype, ndim, {0}, NULL};
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        tt.shape[i] = shape[i];
        empty = empty || shape[i] == 0;
    }
    size_t bytes = 0;
    /* n * size must fit in ptrdiff_t (no object is larger; also keeps the 64-byte rounding
     * below from wrapping), and a borrowed buffer must not run past the address space */
    if (!empty && (mxp_tensor_nbytes(&tt) == 0 ||
                   !mxp__span_ok(NULL, mxp_tensor_numel(&tt), mxp_dtype_size(dtype), &bytes)))
        return mxp__fail(MXP_EINVAL, "%s: tensor '%s' is too large (byte size overflows or exceeds "
                         "PTRDIFF_MAX)", fn, name);
    size_t span;
    if (!empty && borrow && !mxp__span_ok(data, mxp_tensor_numel(&tt), mxp_dtype_size(dtype), &span))
        return mxp__fail(MXP_EINVAL, "%s: tensor '%s': data + %zu bytes runs past the end of the address space",
                         fn, name, bytes);
    if (borrow && bytes > 0 && !data)
        return mxp__fail(MXP_EINVAL, "%s: tensor '%s' has %zu bytes, but data is NULL", fn, name, bytes);
    if (find_pos(t, name) >= 0)
        return mxp__fail(MXP_EEXIST, "%s: a tensor named '%s' is already in the tree", fn, name);
    mxp_status s = reserve_one(t, fn);
    if (s != MXP_OK) return s;

    node *n = calloc(1, sizeof *n);
    size_t len = strlen(name);
    char *nm = n ? malloc(len + 1) : NULL;
    void *buf = NULL;
    if (n && nm && !borrow) {
        size_t alloc = (bytes + 63) / 64 * 64;
        buf = aligned_alloc(64, alloc ? alloc : 64);
        if (buf) {
            if (data) memcpy(buf, data, bytes);
            else memset(buf, 0, alloc ? alloc : 64);
        }
    }
    if (!n || !nm || (!borrow && !buf)) {
        free(n);
        free(nm);
        free(buf);
        return mxp__fail(MXP_ENOMEM, "%s: out of memory adding tensor '%s' (%zu bytes)", fn, name, bytes);
    }
    memcpy(nm, name, len + 1);
    n->t = tt;
    n->t.name = nm;
    n->t.data = borrow ? data : buf;
    n->name = nm;
    n->owned = !borrow;
    n->hash = hash_str(nm);
    t->nodes[t->count] = n;
    t->index[index_probe(t, nm, n->hash)] = t->count + 1;
    t->count++;
    return MXP_OK;
}

mxp_status mxp_tree_add(mxp_tree *t, const char *name, mxp_dtype dtype, int ndim,
                        const size_t *shape, const void *data)
{
    /* The cast only lets the shared helper take one pointer type; owned data is only read. */
    return add_node(t, name, dtype, ndim, shape, (void *)(uintptr_t)data, false, "mxp_tree_add");
}

mxp_status mxp_tree_add_borrowed(mxp_tree *t, const char *name, mxp_dtype dtype, int ndim,
                                 const size_t *shape, void *data)
{
    return add_node(t, name, dtype, ndim, shape, data, true, "mxp_tree_add_borrowed");
}

size_t mxp_tree_count(const mxp_tree *t) { return t ? t->count : 0; }

const mxp_tensor *mxp_tree_at(const mxp_tree *t, size_t i)
{
    return t && i < t->count ? &t->nodes[i]->t : NULL;
}

const mxp_tensor *mxp_tree_get(const mxp_tree *t, const char *name)
{
    long k = find_pos(t, name);
    return k >= 0 ? &t->nodes[k]->t : NULL;
}

mxp_status mxp_tree_find(const mxp_tree *t, const char *name, const mxp_tensor **out)
{
    if (!t) return mxp__fail(MXP_EINVAL, "mxp_tree_find: tree is NULL");
    if (!name) return mxp__fail(MXP_EINVAL, "mxp_tree_find: name is NULL");
    if (!out) return mxp__fail(MXP_EINVAL, "mxp_tree_find: out is NULL");
    long k = find_pos(t, name);
    if (k < 0)
        return mxp__fail(MXP_ENOTFOUND, "mxp_tree_find: no tensor named '%s' in the tree (%zu tensors)", name,
                         t->count);
    *out = &t->nodes[k]->t;
    return MXP_OK;
}

/* Sums saturate at SIZE_MAX instead of wrapping (borrowed tensors may describe more bytes in
 * total than one object can hold). */
static size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

size_t mxp_tree_nbytes(const mxp_tree *t)
{
    size_t s = 0;
    for (size_t i = 0; t && i < t->count; i++) s = add_sat(s, mxp_tensor_nbytes(&t->nodes[i]->t));
    return s;
}

size_t mxp_tree_numel(const mxp_tree *t)
{
    size_t s = 0;
    for (size_t i = 0; t && i < t->count; i++) s = add_sat(s, mxp_tensor_numel(&t->nodes[i]->t));
    return s;
}

/* A new tree with src's names and shapes; floating leaves of dtype `to` (or their own dtype when
 * to is negative), zero-filled. */
static mxp_status alloc_like(const char *fn, const mxp_tree *src, int to, mxp_tree **out)
{
    mxp_tree *t = mxp_tree_new();
    if (!t) return mxp__fail(MXP_ENOMEM, "%s: out of memory", fn);
    for (size_t i = 0; i < src->count; i++) {
        const mxp_tensor *s = &src->nodes[i]->t;
        mxp_dtype d = (to >= 0 && mxp_dtype_is_floating(s->dtype)) ? (mxp_dtype)to : s->dtype;
        mxp_status st = add_node(t, s->name, d, s->ndim, s->shape, NULL, false, fn);
        if (st != MXP_OK) {
            mxp_tree_free(t);
            return st;
        }
    }
    *out = t;
    return MXP_OK;
}

/* splitmix64 finaliser: decorrelates the per-leaf stochastic-rounding seeds. */
static uint64_t mix_seed(uint64_t seed, size_t i)
{
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * ((uint64_t)i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Write every leaf of src into its namesake in dst (already validated). */
static mxp_status write_all(const char *fn, mxp_tree *dst, const mxp_tree *src, const mxp_convert_opts *opts)
{
    for (size_t i = 0; i < src->count; i++) {
        const mxp_tensor *s = &src->nodes[i]->t;
        mxp_tensor *d = &dst->nodes[find_pos(dst, s->name)]->t;
        mxp_convert_opts o, *op = NULL;
        if (opts) {
            o = *opts;
            if (o.rounding == MXP_ROUND_STOCHASTIC) o.seed = mix_seed(opts->seed, i);
            op = &o;
        }
        mxp_status st = write_leaf(fn, d, s, op);
        if (st != MXP_OK) return st;
    }
    return MXP_OK;
}

mxp_status mxp__tree_cast_into(const char *fn, mxp_tree *dst, const mxp_tree *src, mxp_dtype dtype,
                               const mxp_convert_opts *opts)
{
    if (!dst) return mxp__fail(MXP_EINVAL, "%s: dst is NULL", fn);
    if (!src) return mxp__fail(MXP_EINVAL, "%s: src is NULL", fn);
    if (!mxp_dtype_is_floating(dtype))
        return mxp__fail(MXP_EINVAL, "%s: cannot cast a tree to dtype %s (%d): casts target floating dtypes only",
                         fn, mxp_dtype_name(dtype), (int)dtype);
    mxp_status s = mxp__check_opts(fn, opts);
    if (s != MXP_OK) return s;
    if (dst->count != src->count)
        return mxp__fail(MXP_EINVAL, "%s: the destination tree has %zu tensors, the source %zu", fn, dst->count,
                         src->count);
    for (size_t i = 0; i < src->count; i++) {
        const mxp_tensor *st = &src->nodes[i]->t;
        long k = find_pos(dst, st->name);
        if (k < 0)
            return mxp__fail(MXP_ENOTFOUND, "%s: source tensor '%s' has no namesake in the destination tree", fn,
                             st->name);
        /* dst == src (in place): each leaf is its own namesake, so a dtype change is the dtype
         * mismatch refused here */
        if ((s = check_leaf_cast(fn, &dst->nodes[k]->t, st, dtype, false)) != MXP_OK) return s;
    }
    return write_all(fn, dst, src, opts);
}

mxp_status mxp_tree_cast_into_ex(mxp_tree *dst, const mxp_tree *src, mxp_dtype dtype,
                                 const mxp_convert_opts *opts)
{
    return mxp__tree_cast_into("mxp_tree_cast_into_ex", dst, src, dtype, opts);
}

mxp_status mxp_tree_cast_into(mxp_tree *dst, const mxp_tree *src, mxp_dtype dtype)
{
    return mxp__tree_cast_into("mxp_tree_cast_into", dst, src, dtype, NULL);
}

mxp_status mxp__tree_cast(const char *fn, const mxp_tree *src, mxp_dtype dtype, const mxp_convert_opts *opts,
                          mxp_tree **out)
{
    if (!src) return mxp__fail(MXP_EINVAL, "%s: src is NULL", fn);
    if (!out) return mxp__fail(MXP_EINVAL, "%s: out is NULL", fn);
    if (!mxp_dtype_is_floating(dtype))
        return mxp__fail(MXP_EINVAL, "%s: cannot cast a tree to dtype %s (%d): casts target floating dtypes only",
                         fn, mxp_dtype_name(dtype), (int)dtype);
    mxp_status s = mxp__check_opts(fn, opts);
    if (s != MXP_OK) return s;
    mxp_tree *t;
    if ((s = alloc_like(fn, src, (int)dtype, &t)) != MXP_OK) return s;
    if ((s = write_all(fn, t, src, opts)) != MXP_OK) {
        mxp_tree_free(t);
        return s;
    }
    *out = t;
    return MXP_OK;
}

mxp_status mxp_tree_cast_ex(const mxp_tree *src, mxp_dtype dtype, const mxp_convert_opts *opts,
                            mxp_tree **out)
{
    return mxp__tree_cast("mxp_tree_cast_ex", src, dtype, opts, out);
}

mxp_status mxp_tree_cast(const mxp_tree *src, mxp_dtype dtype, mxp_tree **out)
{
    return mxp__tree_cast("mxp_tree_cast", src, dtype, NULL, out);
}

mxp_status mxp_tree_clone(const mxp_tree *src, mxp_tree **out)
{
    if (!src) return mxp__fail(MXP_EINVAL, "mxp_tree_clone: src is NULL");
    if (!out) return mxp__fail(MXP_EINVAL, "mxp_tree_clone: out is NULL");
    mxp_tree *t;
    mxp_status s = alloc_like("mxp_tree_clone", src, -1, &t);
    if (s != MXP_OK) return s;
    for (size_t i = 0; i < src->count; i++) {
        size_t bytes = mxp_tensor_nbytes(&src->nodes[i]->t);
        if (bytes) memcpy(t->nodes[i]->t.data, src->nodes[i]->t.data, bytes);
    }
    *out = t;
    return MXP_OK;
}
