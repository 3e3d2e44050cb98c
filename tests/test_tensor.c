/*
 * test_tensor.c - trees of named tensors: ownership (owned copy, zeroed, borrowed), lookup,
 * iteration, sizes, errors; jmp casting of trees and single tensors (floating leaves converted,
 * integer and bool leaves copied), cast_into validation (dst untouched on any mismatch), and the
 * per-leaf stochastic-rounding seeds.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "mixprec.h"

static void test_add_lookup_iterate(void **state)
{
    (void)state;
    mxp_tree *t = mxp_tree_new();
    assert_non_null(t);
    assert_int_equal(mxp_tree_count(t), 0);
    float k[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(mxp_tree_add(t, "dense_0/kernel", MXP_FLOAT32, 2, (size_t[]){2, 3}, k), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "dense_0/bias", MXP_FLOAT16, 1, (size_t[]){3}, NULL), MXP_OK);
    int64_t step = 42;
    assert_int_equal(mxp_tree_add_borrowed(t, "step", MXP_INT64, 0, NULL, &step), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "empty", MXP_BFLOAT16, 2, (size_t[]){0, 7}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_count(t), 4);

    /* Owned copy: independent of the caller's buffer, 64-byte aligned. */
    const mxp_tensor *kt = mxp_tree_get(t, "dense_0/kernel");
    assert_non_null(kt);
    assert_ptr_not_equal(kt->data, k);
    assert_int_equal((uintptr_t)kt->data % 64, 0);
    k[0] = 99;
    assert_true(((float *)kt->data)[0] == 1.0f);
    assert_true(((float *)kt->data)[5] == 6.0f);
    assert_string_equal(kt->name, "dense_0/kernel");
    assert_int_equal(kt->ndim, 2);
    assert_int_equal(mxp_tensor_numel(kt), 6);
    assert_int_equal(mxp_tensor_nbytes(kt), 24);

    /* Zero-filled when data is NULL. */
    const mxp_tensor *bt = mxp_tree_get(t, "dense_0/bias");
    assert_memory_equal(bt->data, ((const uint16_t[]){0, 0, 0}), 6);

    /* Borrowed: the tree reads and writes the caller's buffer. */
    const mxp_tensor *st = mxp_tree_get(t, "step");
    assert_ptr_equal(st->data, &step);
    *(int64_t *)st->data = 43;
    assert_int_equal(step, 43);
    assert_int_equal(mxp_tensor_numel(st), 1); /* scalar */

    const mxp_tensor *et = mxp_tree_get(t, "empty");
    assert_int_equal(mxp_tensor_numel(et), 0);
    assert_int_equal(mxp_tensor_nbytes(et), 0);

    /* Iteration in insertion order; pointers are stable while the tree grows. */
    const char *names[] = {"dense_0/kernel", "dense_0/bias", "step", "empty"};
    for (size_t i = 0; i < 4; i++) assert_string_equal(mxp_tree_at(t, i)->name, names[i]);
    assert_null(mxp_tree_at(t, 4));
    char name[32];
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "layer_%d/w", i);
        assert_int_equal(mxp_tree_add(t, name, MXP_FLOAT32, 1, (size_t[]){(size_t)i % 5}, NULL), MXP_OK);
    }
    assert_ptr_equal(mxp_tree_get(t, "dense_0/kernel"), kt);
    assert_ptr_equal(mxp_tree_at(t, 0), kt);
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "layer_%d/w", i);
        const mxp_tensor *x = NULL;
        assert_int_equal(mxp_tree_find(t, name, &x), MXP_OK);
        assert_ptr_equal(x, mxp_tree_at(t, 4 + (size_t)i));
        assert_int_equal(x->shape[0], (size_t)i % 5);
    }
    assert_int_equal(mxp_tree_count(t), 204);

    /* Sizes: 6*4 + 3*2 + 8 + 0 + sum over i of (i%5)*4 (= 40 * (0+1+2+3+4) * 4). */
    assert_int_equal(mxp_tree_nbytes(t), 24 + 6 + 8 + 0 + 40 * 10 * 4);
    assert_int_equal(mxp_tree_numel(t), 6 + 3 + 1 + 0 + 40 * 10);

    /* Lookup failures. */
    const mxp_tensor *x = (const mxp_tensor *)1;
    assert_int_equal(mxp_tree_find(t, "dense_0/kernel2", &x), MXP_ENOTFOUND);
    assert_non_null(strstr(mxp_last_error(), "'dense_0/kernel2'"));
    assert_ptr_equal(x, (const mxp_tensor *)1);
    assert_null(mxp_tree_get(t, "nope"));
    assert_null(mxp_tree_get(t, NULL));
    assert_int_equal(mxp_tree_find(NULL, "a", &x), MXP_EINVAL);
    assert_int_equal(mxp_tree_count(NULL), 0);
    assert_null(mxp_tree_at(NULL, 0));
    mxp_tree_free(t);
    mxp_tree_free(NULL);
}

static void test_add_errors(void **state)
{
    (void)state;
    mxp_tree *t = mxp_tree_new();
    float v[2] = {1, 2};
    assert_int_equal(mxp_tree_add(t, "w", MXP_FLOAT32, 1, (size_t[]){2}, v), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "w", MXP_FLOAT16, 1, (size_t[]){2}, NULL), MXP_EEXIST);
    assert_non_null(strstr(mxp_last_error(), "'w'"));
    assert_int_equal(mxp_tree_add_borrowed(t, "w", MXP_FLOAT32, 1, (size_t[]){2}, v), MXP_EEXIST);
    assert_int_equal(mxp_tree_add(NULL, "x", MXP_FLOAT32, 0, NULL, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tree_add(t, NULL, MXP_FLOAT32, 0, NULL, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tree_add(t, "", MXP_FLOAT32, 0, NULL, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tree_add(t, "x", (mxp_dtype)12, 0, NULL, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tree_add(t, "x", MXP_FLOAT32, 9, (size_t[9]){1}, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tree_add(t, "x", MXP_FLOAT32, -1, NULL, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tree_add(t, "x", MXP_FLOAT32, 1, NULL, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tree_add(t, "x", MXP_FLOAT64, 2, (size_t[]){SIZE_MAX / 4, 3}, NULL), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "'x'"));
    assert_int_equal(mxp_tree_add_borrowed(t, "x", MXP_FLOAT32, 1, (size_t[]){2}, NULL), MXP_EINVAL);
    /* Borrowed with no elements may have NULL data. */
    assert_int_equal(mxp_tree_add_borrowed(t, "z", MXP_FLOAT32, 1, (size_t[]){0}, NULL), MXP_OK);
    /* Eight dimensions is the maximum. */
    assert_int_equal(mxp_tree_add(t, "d8", MXP_INT8, 8, (size_t[]){1, 2, 1, 2, 1, 2, 1, 2}, NULL), MXP_OK);
    assert_int_equal(mxp_tensor_numel(mxp_tree_get(t, "d8")), 16);
    assert_int_equal(mxp_tree_count(t), 3); /* failures added nothing */
    assert_int_equal(mxp_tensor_numel(NULL), 0);
    mxp_tensor bad = {"b", MXP_FLOAT32, 9, {1}, NULL};
    assert_int_equal(mxp_tensor_numel(&bad), 0);
    mxp_tree_free(t);
}

/* bfloat16 rounding of float32, by hand: 1 + 2^-8 is a tie between 1 (0x3F80, even) and 1 + 2^-7
 * (0x3F81) -> 0x3F80; 1 + 3*2^-8 is a tie between 0x3F81 (odd) and 0x3F82 -> 0x3F82; 1 + 2^-8 +
 * 2^-20 is above the tie -> 0x3F81. */
static void test_tree_cast_bf16(void **state)
{
    (void)state;
    mxp_tree *t = mxp_tree_new();
    const float w[5] = {1.0f, 1.00390625f, 1.01171875f, 1.0039072036743164f, -0.0f};
    const int32_t ids[3] = {-7, 0, 2147483647};
    const uint8_t flags[2] = {1, 0};
    assert_int_equal(mxp_tree_add(t, "w", MXP_FLOAT32, 1, (size_t[]){5}, w), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "ids", MXP_INT32, 1, (size_t[]){3}, ids), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "flags", MXP_BOOL, 1, (size_t[]){2}, flags), MXP_OK);
    mxp_tree *b = NULL;
    assert_int_equal(mxp_tree_cast(t, MXP_BFLOAT16, &b), MXP_OK);
    const mxp_tensor *bw = mxp_tree_get(b, "w");
    assert_int_equal(bw->dtype, MXP_BFLOAT16);
    assert_memory_equal(bw->data, ((const uint16_t[]){0x3F80, 0x3F80, 0x3F82, 0x3F81, 0x8000}), 10);
    const mxp_tensor *bi = mxp_tree_get(b, "ids"), *bf = mxp_tree_get(b, "flags");
    assert_int_equal(bi->dtype, MXP_INT32);
    assert_int_equal(bf->dtype, MXP_BOOL);
    assert_memory_equal(bi->data, ids, sizeof ids);
    assert_memory_equal(bf->data, flags, sizeof flags);

    /* Widening back is exact: float64 of the bfloat16 values. */
    mxp_tree *d = NULL;
    assert_int_equal(mxp_tree_cast(b, MXP_FLOAT64, &d), MXP_OK);
    const double *dw = mxp_tree_get(d, "w")->data;
    assert_true(dw[0] == 1.0 && dw[1] == 1.0 && dw[2] == 1.015625 && dw[3] == 1.0078125);
    assert_true(dw[4] == 0.0 && signbit(dw[4]));
    assert_memory_equal(mxp_tree_get(d, "ids")->data, ids, sizeof ids);

    /* Errors: non-floating target, NULLs. */
    mxp_tree *none = NULL;
    assert_int_equal(mxp_tree_cast(t, MXP_INT8, &none), MXP_EINVAL);
    assert_int_equal(mxp_tree_cast(NULL, MXP_FLOAT16, &none), MXP_EINVAL);
    assert_int_equal(mxp_tree_cast(t, MXP_FLOAT16, NULL), MXP_EINVAL);
    assert_null(none);
    mxp_tree_free(d);
    mxp_tree_free(b);
    mxp_tree_free(t);
}

/* Snapshot of every byte of a tree, to prove "dst untouched". */
static size_t snapshot(const mxp_tree *t, unsigned char *buf)
{
    size_t n = 0;
    for (size_t i = 0; i < mxp_tree_count(t); i++) {
        const mxp_tensor *x = mxp_tree_at(t, i);
        memcpy(buf + n, x->data, mxp_tensor_nbytes(x));
        n += mxp_tensor_nbytes(x);
    }
    return n;
}

static void test_cast_into(void **state)
{
    (void)state;
    mxp_tree *src = mxp_tree_new();
    const float a[4] = {0.5f, -1.5f, 3.0f, 1e30f};
    const int16_t c[2] = {-300, 300};
    assert_int_equal(mxp_tree_add(src, "a", MXP_FLOAT32, 2, (size_t[]){2, 2}, a), MXP_OK);
    assert_int_equal(mxp_tree_add(src, "c", MXP_INT16, 1, (size_t[]){2}, c), MXP_OK);

    /* dst built in another order with float16 leaves: names, not positions, pair leaves up. */
    mxp_tree *dst = mxp_tree_new();
    assert_int_equal(mxp_tree_add(dst, "c", MXP_INT16, 1, (size_t[]){2}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_add(dst, "a", MXP_FLOAT16, 2, (size_t[]){2, 2}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_cast_into(dst, src, MXP_FLOAT16), MXP_OK);
    /* 0.5 = 0x3800, -1.5 = 0xBE00, 3 = 0x4200, 1e30 overflows -> +inf 0x7C00. */
    assert_memory_equal(mxp_tree_get(dst, "a")->data, ((const uint16_t[]){0x3800, 0xBE00, 0x4200, 0x7C00}), 8);
    assert_memory_equal(mxp_tree_get(dst, "c")->data, c, sizeof c);

    unsigned char before[64], after[64];
    size_t nb = snapshot(dst, before);
    /* Wrong target dtype for the floating leaf. */
    assert_int_equal(mxp_tree_cast_into(dst, src, MXP_BFLOAT16), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "'a'"));
    /* Non-floating target. */
    assert_int_equal(mxp_tree_cast_into(dst, src, MXP_INT16), MXP_EINVAL);

    /* Name missing from dst -> ENOTFOUND naming it; nothing written even though "c" would fit. */
    mxp_tree *d2 = mxp_tree_new();
    assert_int_equal(mxp_tree_add(d2, "c", MXP_INT16, 1, (size_t[]){2}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_add(d2, "b", MXP_FLOAT16, 2, (size_t[]){2, 2}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_cast_into(d2, src, MXP_FLOAT16), MXP_ENOTFOUND);
    assert_non_null(strstr(mxp_last_error(), "'a'"));
    assert_memory_equal(mxp_tree_get(d2, "c")->data, ((const int16_t[]){0, 0}), 4);

    /* Shape mismatch on the second leaf: the first leaf must not have been written. */
    mxp_tree *d3 = mxp_tree_new();
    assert_int_equal(mxp_tree_add(d3, "a", MXP_FLOAT16, 2, (size_t[]){2, 2}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_add(d3, "c", MXP_INT16, 1, (size_t[]){3}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_cast_into(d3, src, MXP_FLOAT16), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "'c'"));
    assert_memory_equal(mxp_tree_get(d3, "a")->data, ((const uint16_t[]){0, 0, 0, 0}), 8);

    /* Same element count but different shape is still a mismatch. */
    mxp_tree *d4 = mxp_tree_new();
    assert_int_equal(mxp_tree_add(d4, "a", MXP_FLOAT16, 1, (size_t[]){4}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_add(d4, "c", MXP_INT16, 1, (size_t[]){2}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_cast_into(d4, src, MXP_FLOAT16), MXP_EINVAL);

    /* Integer leaf of another dtype: never converted -> mismatch. */
    mxp_tree *d5 = mxp_tree_new();
    assert_int_equal(mxp_tree_add(d5, "a", MXP_FLOAT16, 2, (size_t[]){2, 2}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_add(d5, "c", MXP_INT32, 1, (size_t[]){2}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_cast_into(d5, src, MXP_FLOAT16), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "never converted"));

    /* Different counts. */
    mxp_tree *d6 = mxp_tree_new();
    assert_int_equal(mxp_tree_add(d6, "a", MXP_FLOAT16, 2, (size_t[]){2, 2}, NULL), MXP_OK);
    assert_int_equal(mxp_tree_cast_into(d6, src, MXP_FLOAT16), MXP_EINVAL);
    assert_int_equal(mxp_tree_cast_into(NULL, src, MXP_FLOAT16), MXP_EINVAL);
    assert_int_equal(mxp_tree_cast_into(dst, NULL, MXP_FLOAT16), MXP_EINVAL);

    assert_int_equal(snapshot(dst, after), nb);
    assert_memory_equal(before, after, nb);

    /* In place with nothing changing dtype is allowed (a no-op). */
    assert_int_equal(mxp_tree_cast_into(src, src, MXP_FLOAT32), MXP_OK);
    assert_memory_equal(mxp_tree_get(src, "a")->data, a, sizeof a);

    mxp_tree_free(d6);
    mxp_tree_free(d5);
    mxp_tree_free(d4);
    mxp_tree_free(d3);
    mxp_tree_free(d2);
    mxp_tree_free(dst);
    mxp_tree_free(src);
}

static void test_tensor_cast_into(void **state)
{
    (void)state;
    float s[3] = {2.0f, -0.0f, 65520.0f};
    uint16_t d[3] = {0};
    mxp_tensor src = {"s", MXP_FLOAT32, 1, {3}, s};
    mxp_tensor dst = {"d", MXP_FLOAT16, 1, {3}, d};
    assert_int_equal(mxp_tensor_cast_into(&dst, &src, MXP_FLOAT16, NULL), MXP_OK);
    /* 2 = 0x4000, -0 = 0x8000, 65520 is the tie between 65504 and 65536 -> rounds to even, i.e.
     * up to 2^16, which overflows -> +inf 0x7C00. */
    assert_int_equal(d[0], 0x4000);
    assert_int_equal(d[1], 0x8000);
    assert_int_equal(d[2], 0x7C00);
    mxp_convert_opts sat = {MXP_ROUND_NEAREST_EVEN, true, 0, 1};
    assert_int_equal(mxp_tensor_cast_into(&dst, &src, MXP_FLOAT16, &sat), MXP_OK);
    assert_int_equal(d[2], 0x7BFF); /* saturated to max finite */
    /* Integer leaf: copied, the target dtype does not apply. */
    int8_t si[2] = {-5, 9}, di[2] = {0, 0};
    mxp_tensor isrc = {"i", MXP_INT8, 1, {2}, si}, idst = {"j", MXP_INT8, 1, {2}, di};
    assert_int_equal(mxp_tensor_cast_into(&idst, &isrc, MXP_BFLOAT16, NULL), MXP_OK);
    assert_memory_equal(di, si, 2);
    idst.dtype = MXP_UINT8;
    assert_int_equal(mxp_tensor_cast_into(&idst, &isrc, MXP_BFLOAT16, NULL), MXP_EINVAL);
    dst.shape[0] = 2;
    assert_int_equal(mxp_tensor_cast_into(&dst, &src, MXP_FLOAT16, NULL), MXP_EINVAL);
    dst.shape[0] = 3;
    dst.data = NULL;
    assert_int_equal(mxp_tensor_cast_into(&dst, &src, MXP_FLOAT16, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tensor_cast_into(NULL, &src, MXP_FLOAT16, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tensor_cast_into(&dst, &src, MXP_BOOL, NULL), MXP_EINVAL);

    /* Overlap: float32 -> float16 into the same buffer (different element sizes) is refused;
     * float16 -> bfloat16 in place (same size) is fine: 1.0 0x3C00 -> 0x3F80, -2 0xC000 -> 0xC000. */
    float buf[4] = {1, 2, 3, 4};
    mxp_tensor f32t = {"f", MXP_FLOAT32, 1, {4}, buf}, f16t = {"h", MXP_FLOAT16, 1, {4}, buf};
    assert_int_equal(mxp_tensor_cast_into(&f16t, &f32t, MXP_FLOAT16, NULL), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "overlap"));
    assert_true(buf[0] == 1.0f && buf[3] == 4.0f);
    f16t.data = (char *)buf + 2; /* partial overlap */
    assert_int_equal(mxp_tensor_cast_into(&f16t, &f32t, MXP_FLOAT16, NULL), MXP_EINVAL);
    uint16_t hb[2] = {0x3C00, 0xC000};
    mxp_tensor h = {"h", MXP_FLOAT16, 1, {2}, hb}, b = {"b", MXP_BFLOAT16, 1, {2}, hb};
    assert_int_equal(mxp_tensor_cast_into(&b, &h, MXP_BFLOAT16, NULL), MXP_OK);
    assert_int_equal(hb[0], 0x3F80);
    assert_int_equal(hb[1], 0xC000);
}

static void test_clone(void **state)
{
    (void)state;
    mxp_tree *t = mxp_tree_new();
    double x[2] = {1.25, -3};
    int32_t n[1] = {5};
    assert_int_equal(mxp_tree_add_borrowed(t, "x", MXP_FLOAT64, 1, (size_t[]){2}, x), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "n", MXP_INT32, 0, NULL, n), MXP_OK);
    mxp_tree *c = NULL;
    assert_int_equal(mxp_tree_clone(t, &c), MXP_OK);
    assert_int_equal(mxp_tree_count(c), 2);
    const mxp_tensor *cx = mxp_tree_get(c, "x");
    assert_ptr_not_equal(cx->data, x); /* borrowed becomes owned */
    assert_memory_equal(cx->data, x, sizeof x);
    x[0] = 7;
    assert_true(((double *)cx->data)[0] == 1.25);
    assert_string_equal(mxp_tree_at(c, 1)->name, "n");
    assert_int_equal(*(int32_t *)mxp_tree_at(c, 1)->data, 5);
    assert_int_equal(mxp_tree_clone(NULL, &c), MXP_EINVAL);
    mxp_tree_free(c);
    mxp_tree_free(t);
}

/* Stochastic rounding through cast_into_ex: reproducible for a seed, and two leaves with the same
 * contents get different streams (their own seeds), so their roundings differ somewhere. */
static void test_stochastic_per_leaf(void **state)
{
    (void)state;
    enum { N = 512 };
    static float v[N];
    for (int i = 0; i < N; i++) v[i] = 1.0f + (float)(i % 127 + 1) * (1.0f / 32768.0f); /* not on the bf16 grid */
    mxp_tree *src = mxp_tree_new();
    assert_int_equal(mxp_tree_add(src, "a", MXP_FLOAT32, 1, (size_t[]){N}, v), MXP_OK);
    assert_int_equal(mxp_tree_add(src, "b", MXP_FLOAT32, 1, (size_t[]){N}, v), MXP_OK);
    mxp_tree *d1 = NULL, *d2 = NULL;
    mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, false, 1234, 1};
    assert_int_equal(mxp_tree_cast_ex(src, MXP_BFLOAT16, &o, &d1), MXP_OK);
    assert_int_equal(mxp_tree_cast(src, MXP_BFLOAT16, &d2), MXP_OK);
    assert_int_equal(mxp_tree_cast_into_ex(d2, src, MXP_BFLOAT16, &o), MXP_OK);
    const uint16_t *a1 = mxp_tree_get(d1, "a")->data, *b1 = mxp_tree_get(d1, "b")->data;
    const uint16_t *a2 = mxp_tree_get(d2, "a")->data;
    assert_memory_equal(a1, a2, 2 * N); /* same seed, same bits */
    assert_memory_not_equal(a1, b1, 2 * N);
    /* Every result is one of the two bfloat16 neighbours: 0x3F80 or 0x3F81 (1 + 2^-7). */
    for (int i = 0; i < N; i++) assert_true(a1[i] == 0x3F80 || a1[i] == 0x3F81);
    mxp_convert_opts bad = {(mxp_rounding)5, false, 0, 1};
    assert_int_equal(mxp_tree_cast_into_ex(d2, src, MXP_BFLOAT16, &bad), MXP_EINVAL);
    mxp_tree_free(d2);
    mxp_tree_free(d1);
    mxp_tree_free(src);
}

/* Sizes past any possible buffer (issue 16, the n * size class): a byte size just below SIZE_MAX
 * used to be rounded up to a multiple of 64 with a wrap, so the tree got a 64-byte buffer for a
 * tensor of ~2^64 bytes; a borrowed buffer running past the address space was accepted; the
 * whole-tree sums wrapped; mxp_convert accepted n up to SIZE_MAX / 8 whatever the pointers. */
static void test_huge_sizes(void **state)
{
    (void)state;
    mxp_tree *t = mxp_tree_new();
    assert_non_null(t);
    size_t huge[1] = {SIZE_MAX - 10}, half[1] = {(size_t)PTRDIFF_MAX / 2 + 1};
    size_t two[2] = {(size_t)1 << 40, (size_t)1 << 30};
    int8_t small[64] = {0};
    mxp_clear_error();
    assert_int_equal(mxp_tree_add(t, "huge", MXP_INT8, 1, huge, NULL), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "too large"));
    assert_int_equal(mxp_tree_add(t, "huge", MXP_INT8, 1, huge, small), MXP_EINVAL);
    assert_int_equal(mxp_tree_add(t, "half", MXP_FLOAT32, 1, half, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tree_add(t, "two", MXP_FLOAT32, 2, two, NULL), MXP_EINVAL);
    assert_int_equal(mxp_tree_add_borrowed(t, "b", MXP_INT8, 1, huge, small), MXP_EINVAL);
    size_t len[1] = {64};
    assert_int_equal(mxp_tree_add_borrowed(t, "wrap", MXP_INT8, 1, len, (void *)(UINTPTR_MAX - 15)),
                     MXP_EINVAL);
    assert_int_equal(mxp_tree_count(t), 0);
    /* sums saturate instead of wrapping: borrowed tensors each under PTRDIFF_MAX bytes */
    size_t big[1] = {(size_t)PTRDIFF_MAX / 4};
    static float anchor[1];
    for (int i = 0; i < 6; i++) {
        char name[8];
        snprintf(name, sizeof name, "b%d", i);
        assert_int_equal(mxp_tree_add_borrowed(t, name, MXP_FLOAT32, 1, big, anchor), MXP_OK);
    }
    assert_true(mxp_tree_nbytes(t) == SIZE_MAX);
    assert_true(mxp_tree_numel(t) == ((size_t)PTRDIFF_MAX / 4) * 6);
    mxp_tree_free(t);
    /* a hand-made tensor view that wraps is refused by the cast */
    mxp_tensor src = {"s", MXP_FLOAT32, 1, {64}, (void *)(UINTPTR_MAX - 63)}, dst = src;
    float d[64];
    dst.data = d;
    dst.name = "d";
    assert_int_equal(mxp_tensor_cast_into(&dst, &src, MXP_FLOAT32, NULL), MXP_EINVAL);
    /* mxp_convert: n so large that n * size passes PTRDIFF_MAX */
    mxp_clear_error();
    assert_int_equal(mxp_convert(d, MXP_FLOAT32, small, MXP_FLOAT16, SIZE_MAX), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "past any possible buffer"));
    assert_int_equal(mxp_convert(d, MXP_FLOAT64, small, MXP_FLOAT16, (size_t)PTRDIFF_MAX / 8 + 1),
                     MXP_EINVAL);
}

/* A tree cast into itself: the same dtype is a no-op, a new one is refused (each leaf is its own
 * destination, which cannot change dtype) and changes nothing. */
static void test_cast_into_itself(void **state)
{
    (void)state;
    mxp_tree *t = mxp_tree_new();
    assert_non_null(t);
    const size_t shape[1] = {3};
    const float w[3] = {1.5f, -2.0f, 0.1f};
    const int32_t k[3] = {7, -7, 0};
    assert_int_equal(mxp_tree_add(t, "w", MXP_FLOAT32, 1, shape, w), MXP_OK);
    assert_int_equal(mxp_tree_add(t, "k", MXP_INT32, 1, shape, k), MXP_OK);
    assert_int_equal(mxp_tree_cast_into(t, t, MXP_FLOAT32), MXP_OK);
    assert_memory_equal(mxp_tree_get(t, "w")->data, w, sizeof w);
    mxp_clear_error();
    assert_int_equal(mxp_tree_cast_into(t, t, MXP_FLOAT16), MXP_EINVAL);
    assert_non_null(strstr(mxp_last_error(), "mxp_tree_cast_into: dtype mismatch"));
    assert_non_null(strstr(mxp_last_error(), "'w'"));
    assert_int_equal(mxp_tree_get(t, "w")->dtype, MXP_FLOAT32);
    assert_memory_equal(mxp_tree_get(t, "w")->data, w, sizeof w);
    assert_memory_equal(mxp_tree_get(t, "k")->data, k, sizeof k);
    mxp_tree_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_lookup_iterate), cmocka_unit_test(test_add_errors),
        cmocka_unit_test(test_tree_cast_bf16),     cmocka_unit_test(test_cast_into),
        cmocka_unit_test(test_tensor_cast_into),   cmocka_unit_test(test_clone),
        cmocka_unit_test(test_stochastic_per_leaf), cmocka_unit_test(test_huge_sizes),
        cmocka_unit_test(test_cast_into_itself),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
