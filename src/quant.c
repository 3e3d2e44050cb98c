/*
 * quant.c - int8 / int4 abs-max, float8 current and delayed scaling, MX blocks
 * (docs/DESIGN.md section 8; mixprec/quant.h documents every function). mxp_matmul_int8 lives
 * in qmatmul.c.
 *
 * How a static quantizer runs (int8, int4, float8 current scaling, MX):
 *   1. arguments, layout and sizes are checked; nothing is written on any failure;
 *   2. non-finite inputs must leave every output untouched, so the whole input is known finite
 *      before the first byte is written. For one scale per tensor that is the amax pass, which
 *      must see every element before the scale exists anyway; per-row layouts with at most
 *      AMAX_STASH scales compute every group's amax in that first pass (kept on the stack), so
 *      that the second pass only casts; other per-row / per-column / grouped layouts and MX
 *      blocks take a read-only pre-pass (the conversion table's all_finite kernel), after
 *      which each group is quantized while it is in cache: its amax pass, then its
 *      scale-and-cast pass over the same elements;
 *   3. the casts: integers by the quantization kernels (quant_kernels.h), float8 as float32
 *      products x * s into a small block, then the conversion table's saturating nearest-even
 *      float32 -> float8 kernel on that block (the same bits as mxp_convert_ex with saturate).
 * float16 / bfloat16 inputs are widened (exactly) in blocks of BLK elements first; float32
 * inputs are read in place.
 * Everything between mxp__qfenv_enter and _leave runs in the default floating-point
 * environment (nearest even, no FTZ/DAZ, exceptions masked), whatever the caller's.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kernels.h"
#include "quant_kernels.h"

enum { BLK = 1024 };                         /* elements per widened / product block */
enum { FINITE_CHUNK = 1 << 16 };             /* elements per all_finite call of the pre-pass */
enum { AMAX_STASH = 4096 };                  /* per-row layouts with at most this many scales
                                                keep the checking pass's amaxes (16 KiB) */
static const uint32_t NONFINITE = 0x7F800000u; /* magnitude bits >= this: inf or NaN */

static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The conversion table paired with mxp__qkernels_active() (the same ISA). */
static const mxp__kernels *conv_table(void)
{
    const int o = mxp__quant_isa_override;
    const mxp__kernels *k = o >= 0 ? mxp__kernels_for((mxp__isa_id)o) : NULL;
    return k ? k : mxp__kernels_active();
}

static bool is_input_dtype(mxp_dtype d)
{
    return d == MXP_FLOAT32 || d == MXP_FLOAT16 || d == MXP_BFLOAT16;
}

static bool is_fp8(mxp_dtype d) { return d == MXP_FLOAT8_E4M3FN || d == MXP_FLOAT8_E5M2; }

static const char *dname(mxp_dtype d) { return mxp__dtype_valid(d) ? mxp_dtype_name(d) : "(invalid)"; }

static mxp_status check_input_dtype(const char *fn, mxp_dtype xt)
{
    if (is_input_dtype(xt)) return MXP_OK;
    return mxp__fail(MXP_EUNSUPPORTED, "%s: input dtype %s (%d) is not supported (expected float32, "
                                       "float16 or bfloat16)", fn, dname(xt), (int)xt);
}

/* rows * cols, and whether it (times the largest element size, 8) fits in ptrdiff_t. */
static bool count_ok(size_t rows, size_t cols, size_t *n)
{
    /* PTRDIFF_MAX, not SIZE_MAX: n float64 outputs must be a possible object (internal.h,
     * mxp__span_ok); with SIZE_MAX / 8 a float64 y of SIZE_MAX / 8 elements passed, and its
     * scales were read far past their buffer (tests/test_bad_args.c, under ASan) */
    if (cols && rows > (size_t)PTRDIFF_MAX / 8 / cols) return false;
    *n = rows * cols;
    return true;
}

static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

size_t mxp_qlayout_nscales(const mxp_qlayout *l)
{
    size_t n;
    if (!l || (unsigned)l->axis > MXP_QAXIS_COL || (l->axis == MXP_QAXIS_TENSOR && l->group) ||
        !count_ok(l->rows, l->cols, &n) || n == 0)
        return 0;
    switch (l->axis) {
    case MXP_QAXIS_TENSOR: return 1;
    case MXP_QAXIS_ROW: return l->rows * ceil_div(l->cols, l->group ? l->group : l->cols);
    default: return ceil_div(l->rows, l->group ? l->group : l->rows) * l->cols;
    }
}

static mxp_status check_layout(const char *fn, const mxp_qlayout *l, size_t *n)
{
    *n = 0;
    if (!l) return mxp__fail(MXP_EINVAL, "%s: layout is NULL", fn);
    if ((unsigned)l->axis > MXP_QAXIS_COL)
        return mxp__fail(MXP_EINVAL, "%s: layout axis %d is not MXP_QAXIS_TENSOR, _ROW or _COL", fn,
                         (int)l->axis);
    if (l->axis == MXP_QAXIS_TENSOR && l->group)
        return mxp__fail(MXP_EINVAL, "%s: layout group %zu with MXP_QAXIS_TENSOR (must be 0)", fn,
                         l->group);
    if (!count_ok(l->rows, l->cols, n))
        return mxp__fail(MXP_EINVAL, "%s: layout %zu x %zu overflows the size range", fn, l->rows,
                         l->cols);
    return MXP_OK;
}

static size_t elem_size(mxp_dtype d) { return mxp_dtype_size(d); }

/* Whether element i of x (dtype xt: float32 / float16 / bfloat16) is finite; its name if not. */
static const char *nonfinite_name(const void *x, mxp_dtype xt, size_t i)
{
    const unsigned char *p = (const unsigned char *)x;
    if (xt == MXP_FLOAT32) {
        uint32_t u;
        memcpy(&u, p + 4 * i, 4);
        if ((u & 0x7FFFFFFFu) < 0x7F800000u) return NULL;
        return (u & 0x7FFFFFFFu) > 0x7F800000u ? "nan" : (u >> 31) ? "-inf" : "inf";
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    const uint16_t inf = xt == MXP_FLOAT16 ? 0x7C00u : 0x7F80u;
    if ((h & 0x7FFFu) < inf) return NULL;
    return (h & 0x7FFFu) > inf ? "nan" : (h >> 15) ? "-inf" : "inf";
}

/* Index of the first non-finite element of x[0..n), or n. */
static size_t first_nonfinite(const void *x, mxp_dtype xt, size_t n, const mxp__kernels *ck)
{
    const size_t sz = elem_size(xt);
    for (size_t b = 0; b < n; b += FINITE_CHUNK) {
        const size_t m = n - b < FINITE_CHUNK ? n - b : FINITE_CHUNK;
        if (ck->all_finite[xt]((const unsigned char *)x + b * sz, m)) continue;
        for (size_t i = b; i < b + m; i++)
            if (nonfinite_name(x, xt, i)) return i;
    }
    return n;
}

static mxp_status fail_nonfinite(const char *fn, const void *x, mxp_dtype xt, size_t i, size_t cols)
{
    return mxp__fail(MXP_EINVAL,
                     "%s: x[%zu] (row %zu, column %zu) is %s: static quantization needs finite "
                     "inputs; nothing was written",
                     fn, i, cols ? i / cols : 0, cols ? i % cols : 0, nonfinite_name(x, xt, i));
}

/* The same refusal under MXP_QUANT_ONE_PASS, where groups before the bad one were written. */
static mxp_status fail_nonfinite_part(const char *fn, const void *x, mxp_dtype xt, size_t i, size_t cols)
{
    return mxp__fail(MXP_EINVAL,
                     "%s: x[%zu] (row %zu, column %zu) is %s: static quantization needs finite "
                     "inputs; with MXP_QUANT_ONE_PASS the groups before it were written, the rest not",
                     fn, i, cols ? i / cols : 0, cols ? i % cols : 0, nonfinite_name(x, xt, i));
}

static mxp_status check_flags(const char *fn, unsigned flags)
{
    if (flags & ~(unsigned)MXP_QUANT_ONE_PASS)
        return mxp__fail(MXP_EINVAL, "%s: flags 0x%x has unknown bits 0x%x (known: MXP_QUANT_ONE_PASS = 0x%x)",
                         fn, flags, flags & ~(unsigned)MXP_QUANT_ONE_PASS, (unsigned)MXP_QUANT_ONE_PASS);
    return MXP_OK;
}

/* Whether a call over n elements of elem_bytes each (plus one output byte each) streams its
 * output: the same threshold as the conversions (kernels.h), above which source and
 * destination no longer fit in the last-level cache. */
static bool stream(size_t n, size_t elem_bytes) { return n * (elem_bytes + 1) >= mxp__nt_threshold; }

/* ---- the static quantizers' engine ------------------------------------------------------- */

typedef enum { Q_INT8, Q_INT4, Q_FP8 } qkind;

typedef struct qjob {
    qkind kind;
    mxp_dtype fmt;          /* Q_FP8: the float8 dtype */
    unsigned char *out;     /* int8 / float8: rows x cols bytes; int4: rows x pb bytes */
    float *scales;
    const unsigned char *x; /* rows x cols elements of xt */
    mxp_dtype xt;
    size_t rows, cols, pb;  /* pb: int4 bytes per row */
    const mxp__qkernels *qk;
    const mxp__kernels *ck;
    bool nt;                /* large call: outputs through blocks and streaming stores */
    bool one_pass;          /* MXP_QUANT_ONE_PASS: ROW layouts check each group as they go */
    bool cast_only;         /* the current pass casts groups back to back (no amax pass between) */
} qjob;

static const mxp__cvt_args SAT = {true, 0, 0, false};
static const mxp__cvt_args PLAIN = {false, 0, 0, false};

/* float32 elements off .. off + len of x (len <= BLK), in place or widened into buf. */
static const float *view(const unsigned char *x, mxp_dtype xt, size_t off, size_t len, float *buf,
                         const mxp__kernels *ck)
{
    if (xt == MXP_FLOAT32) {
        const unsigned char *p = x + 4 * off;
        if (((uintptr_t)p & 3u) == 0) return (const float *)(const void *)p;
        memcpy(buf, p, 4 * len);
        return buf;
    }
    ck->cvt[MXP_FLOAT32][xt][MXP__RNE](buf, x + 2 * off, len, &PLAIN);
    return buf;
}

/* Magnitude bits of max |x| over elements off .. off + len. */
static uint32_t amax_range(const qjob *j, size_t off, size_t len)
{
    float buf[BLK];
    uint32_t m = 0;
    if (j->xt == MXP_FLOAT32 && (((uintptr_t)j->x & 3u) == 0))
        return j->qk->amax_bits((const float *)(const void *)j->x + off, len);
    for (size_t b = 0; b < len; b += BLK) {
        const size_t n = len - b < BLK ? len - b : BLK;
        const uint32_t a = j->qk->amax_bits(view(j->x, j->xt, off + b, n, buf, j->ck), n);
        m = a > m ? a : m;
    }
    return m;
}

static float scale_of(const qjob *j, uint32_t amax_bits)
{
    const float amax = f32_of(amax_bits);
    switch (j->kind) {
    case Q_INT8: return 127.0f / (amax + 1e-7f);
    case Q_INT4: return 7.0f / (amax + 1e-7f);
    default: {
        if (amax == 0.0f) return 1.0f;
        const float fmax = j->fmt == MXP_FLOAT8_E4M3FN ? 448.0f : 57344.0f;
        const float s = fmax / amax;
        return s > FLT_MAX ? FLT_MAX : s;
    }
    }
}

/* Quantize len (<= BLK) float32 values xf, elements (r, c0 .. c0 + len) of the matrix, with the
 * scale s, or with the per-element scales sv when sv is not NULL. */
static void emit(const qjob *j, size_t r, size_t c0, const float *xf, size_t len, float s,
                 const float *sv)
{
    const size_t off = r * j->cols + c0;
    switch (j->kind) {
    case Q_INT8: {
        int8_t t[BLK];
        int8_t *q = j->nt ? t : (int8_t *)(void *)(j->out + off);
        if (sv) j->qk->cast_int_v(q, xf, sv, len, -127, 127);
        else j->qk->cast_int(q, xf, len, s, -127, 127, !j->cast_only);
        if (j->nt) j->qk->store_nt(j->out + off, t, len);
        break;
    }
    case Q_INT4: {
        int8_t t[BLK];
        if (sv) j->qk->cast_int_v(t, xf, sv, len, -8, 7);
        else j->qk->cast_int(t, xf, len, s, -8, 7, !j->cast_only);
        unsigned char *row = j->out + r * j->pb;
        size_t i = 0;
        if ((c0 & 1u) == 0) { /* whole bytes, two elements each (a loop the compiler vectorises) */
            unsigned char *o = row + c0 / 2;
            for (; i + 2 <= len; i += 2)
                o[i / 2] = (unsigned char)(((unsigned)(uint8_t)t[i] & 0xFu) | ((unsigned)(uint8_t)t[i + 1] << 4));
        }
        for (; i < len; i++) {
            const size_t c = c0 + i;
            const unsigned v = (unsigned)(uint8_t)t[i] & 0xFu;
            if (c & 1u) row[c / 2] = (unsigned char)(row[c / 2] | (v << 4));
            else row[c / 2] = (unsigned char)v; /* clears the high nibble (odd rows end with 0) */
        }
        break;
    }
    default: {
        const mxp__cvt_fn cvt = j->ck->cvt[j->fmt][MXP_FLOAT32][MXP__RNE];
        if (!sv) {
            (void)j->qk->fp8_encode(j->out + off, xf, len, s, j->fmt == MXP_FLOAT8_E5M2, j->nt, cvt);
            break;
        }
        float y[BLK];
        unsigned char t[BLK];
        j->qk->mul_v(y, xf, sv, len);
        cvt(j->nt ? t : j->out + off, y, len, &SAT);
        if (j->nt) j->qk->store_nt(j->out + off, t, len);
        break;
    }
    }
}

/* Quantize elements (r, c0 .. c0 + len) with one scale s, block by block. */
static void emit_range(const qjob *j, size_t r, size_t c0, size_t len, float s)
{
    if (j->kind == Q_FP8 && j->xt == MXP_FLOAT32 && ((uintptr_t)j->x & 3u) == 0) {
        /* the fused float8 kernel takes the whole group (it streams its own stores and
         * prefetches the next group while this one is cast) */
        const size_t off = r * j->cols + c0;
        (void)j->qk->fp8_encode(j->out + off, (const float *)(const void *)j->x + off, len, s,
                                j->fmt == MXP_FLOAT8_E5M2, j->nt, j->ck->cvt[j->fmt][MXP_FLOAT32][MXP__RNE]);
        return;
    }
    float buf[BLK];
    for (size_t b = 0; b < len; b += BLK) {
        const size_t n = len - b < BLK ? len - b : BLK;
        emit(j, r, c0 + b, view(j->x, j->xt, r * j->cols + c0 + b, n, buf, j->ck), n, s, NULL);
    }
}

/* Runs after the checks; the input is known finite unless axis is TENSOR (checked here). */
static mxp_status run_static(const char *fn, qjob *j, const mxp_qlayout *l)
{
    const size_t n = j->rows * j->cols;
    if (l->axis == MXP_QAXIS_TENSOR) {
        const uint32_t a = amax_range(j, 0, n);
        if (a >= NONFINITE) return fail_nonfinite(fn, j->x, j->xt, first_nonfinite(j->x, j->xt, n, j->ck), j->cols);
        const float s = scale_of(j, a);
        j->scales[0] = s;
        j->cast_only = true; /* the amax pass above read everything; the casts stream */
        if (j->kind == Q_INT4) {
            for (size_t r = 0; r < j->rows; r++) emit_range(j, r, 0, j->cols, s);
        } else {
            emit_range(j, 0, 0, n, s); /* flat: row 0, "column" = flat index */
        }
        return MXP_OK;
    }
    if (l->axis == MXP_QAXIS_ROW && j->one_pass) {
        /* One sweep: each group's amax pass brings it into the cache and checks it, the cast
         * reads it from there; a non-finite group stops the call (earlier groups written). */
        const size_t g = l->group ? l->group : j->cols, ncg = ceil_div(j->cols, g);
        for (size_t r = 0; r < j->rows; r++)
            for (size_t cg = 0; cg < ncg; cg++) {
                const size_t c0 = cg * g, len = j->cols - c0 < g ? j->cols - c0 : g, off = r * j->cols + c0;
                const uint32_t a = amax_range(j, off, len);
                if (a >= NONFINITE) {
                    const size_t bad = first_nonfinite(j->x + off * elem_size(j->xt), j->xt, len, j->ck);
                    return fail_nonfinite_part(fn, j->x, j->xt, off + bad, j->cols);
                }
                const float s = scale_of(j, a);
                j->scales[r * ncg + cg] = s;
                emit_range(j, r, c0, len, s);
            }
        return MXP_OK;
    }
    if (l->axis == MXP_QAXIS_ROW) {
        const size_t g = l->group ? l->group : j->cols, ncg = ceil_div(j->cols, g);
        if (j->rows * ncg <= AMAX_STASH) {
            /* Few enough groups: the checking pass computes every group's amax (the finite
             * check comes with it), and the second pass only casts. */
            uint32_t stash[AMAX_STASH], worst = 0;
            for (size_t r = 0; r < j->rows; r++)
                for (size_t cg = 0; cg < ncg; cg++) {
                    const size_t c0 = cg * g, len = j->cols - c0 < g ? j->cols - c0 : g;
                    const uint32_t a = amax_range(j, r * j->cols + c0, len);
                    stash[r * ncg + cg] = a;
                    worst = a > worst ? a : worst;
                }
            if (worst >= NONFINITE)
                return fail_nonfinite(fn, j->x, j->xt, first_nonfinite(j->x, j->xt, n, j->ck), j->cols);
            j->cast_only = true;
            for (size_t r = 0; r < j->rows; r++)
                for (size_t cg = 0; cg < ncg; cg++) {
                    const size_t c0 = cg * g, len = j->cols - c0 < g ? j->cols - c0 : g;
                    const float s = scale_of(j, stash[r * ncg + cg]);
                    j->scales[r * ncg + cg] = s;
                    emit_range(j, r, c0, len, s);
                }
            return MXP_OK;
        }
    }
    const size_t bad = first_nonfinite(j->x, j->xt, n, j->ck);
    if (bad < n) return fail_nonfinite(fn, j->x, j->xt, bad, j->cols);
    if (l->axis == MXP_QAXIS_ROW) {
        const size_t g = l->group ? l->group : j->cols, ncg = ceil_div(j->cols, g);
        for (size_t r = 0; r < j->rows; r++) {
            for (size_t cg = 0; cg < ncg; cg++) {
                const size_t c0 = cg * g, len = j->cols - c0 < g ? j->cols - c0 : g;
                const float s = scale_of(j, amax_range(j, r * j->cols + c0, len));
                j->scales[r * ncg + cg] = s;
                emit_range(j, r, c0, len, s);
            }
        }
        return MXP_OK;
    }
    /* COL: per block of g rows, the column maxima accumulate in that block's scale row, which
     * then turns into the scales in place (the input is known finite: writing is allowed). */
    const size_t g = l->group ? l->group : j->rows, nrg = ceil_div(j->rows, g);
    float buf[BLK];
    for (size_t rb = 0; rb < nrg; rb++) {
        float *acc = j->scales + rb * j->cols;
        const size_t r0 = rb * g, r1 = j->rows - r0 < g ? j->rows : r0 + g;
        memset(acc, 0, j->cols * sizeof *acc);
        for (size_t r = r0; r < r1; r++)
            for (size_t c = 0; c < j->cols; c += BLK) {
                const size_t m = j->cols - c < BLK ? j->cols - c : BLK;
                j->qk->amax_cols(acc + c, view(j->x, j->xt, r * j->cols + c, m, buf, j->ck), m);
            }
        for (size_t c = 0; c < j->cols; c++) acc[c] = scale_of(j, bits_of(acc[c]));
        for (size_t r = r0; r < r1; r++)
            for (size_t c = 0; c < j->cols; c += BLK) {
                const size_t m = j->cols - c < BLK ? j->cols - c : BLK;
                emit(j, r, c, view(j->x, j->xt, r * j->cols + c, m, buf, j->ck), m, 0.0f, acc + c);
            }
    }
    return MXP_OK;
}

static mxp_status quantize_static(const char *fn, qkind kind, mxp_dtype fmt, void *out, float *scales,
                                  const void *x, mxp_dtype xt, const mxp_qlayout *l, unsigned flags)
{
    size_t n;
    mxp_status st = check_flags(fn, flags);
    if (st) return st;
    if ((st = check_layout(fn, l, &n))) return st;
    if (kind == Q_FP8 && !is_fp8(fmt))
        return mxp__fail(MXP_EINVAL, "%s: fmt %s (%d) is not a float8 dtype (expected float8_e4m3fn "
                                     "or float8_e5m2)", fn, dname(fmt), (int)fmt);
    if ((st = check_input_dtype(fn, xt))) return st;
    if (n == 0) return MXP_OK;
    if (!out || !scales || !x)
        return mxp__fail(MXP_EINVAL, "%s: %s is NULL with %zu x %zu elements", fn,
                         !out ? (kind == Q_INT4 ? "packed" : "q") : !scales ? "scales" : "x",
                         l->rows, l->cols);
    qjob j = {kind, fmt, (unsigned char *)out, scales, (const unsigned char *)x, xt, l->rows, l->cols,
              (l->cols + 1) / 2, mxp__qkernels_active(), conv_table(), stream(n, mxp_dtype_size(xt)),
              (flags & MXP_QUANT_ONE_PASS) != 0, false};
    const mxp__qfenv env = mxp__qfenv_enter();
    st = run_static(fn, &j, l);
    if (j.nt) j.qk->store_fence();
    mxp__qfenv_leave(env);
    return st;
}

mxp_status mxp_quantize_int8(int8_t *q, float *scales, const void *x, mxp_dtype xt, const mxp_qlayout *l)
{
    return quantize_static("mxp_quantize_int8", Q_INT8, MXP_INT8, q, scales, x, xt, l, 0);
}

mxp_status mxp_quantize_int8_ex(int8_t *q, float *scales, const void *x, mxp_dtype xt, const mxp_qlayout *l,
                                unsigned flags)
{
    return quantize_static("mxp_quantize_int8_ex", Q_INT8, MXP_INT8, q, scales, x, xt, l, flags);
}

mxp_status mxp_quantize_int4(uint8_t *packed, float *scales, const void *x, mxp_dtype xt,
                             const mxp_qlayout *l)
{
    return quantize_static("mxp_quantize_int4", Q_INT4, MXP_INT8, packed, scales, x, xt, l, 0);
}

mxp_status mxp_quantize_int4_ex(uint8_t *packed, float *scales, const void *x, mxp_dtype xt,
                                const mxp_qlayout *l, unsigned flags)
{
    return quantize_static("mxp_quantize_int4_ex", Q_INT4, MXP_INT8, packed, scales, x, xt, l, flags);
}

mxp_status mxp_quantize_fp8(void *q, mxp_dtype fmt, float *scales, const void *x, mxp_dtype xt,
                            const mxp_qlayout *l)
{
    return quantize_static("mxp_quantize_fp8", Q_FP8, fmt, q, scales, x, xt, l, 0);
}

mxp_status mxp_quantize_fp8_ex(void *q, mxp_dtype fmt, float *scales, const void *x, mxp_dtype xt,
                               const mxp_qlayout *l, unsigned flags)
{
    return quantize_static("mxp_quantize_fp8_ex", Q_FP8, fmt, q, scales, x, xt, l, flags);
}

/* ---- dequantizers ------------------------------------------------------------------------ */

/* f < 0 (NaN and -0 are not), from the bits, as mxp__positive_finite (internal.h) */
static bool negative(float f)
{
    const uint32_t u = bits_of(f);
    return (u >> 31) && (u & 0x7FFFFFFFu) != 0 && (u & 0x7FFFFFFFu) <= NONFINITE;
}

static mxp_status negative_amax(const char *fn, float amax)
{
    char t[32];
    mxp__format_float(amax, t);
    return mxp__fail(MXP_EINVAL, "%s: amax %s is negative", fn, t);
}

static mxp_status check_scales(const char *fn, const float *scales, size_t ns)
{
    for (size_t i = 0; i < ns; i++)
        if (!mxp__positive_finite(scales[i])) {
            char t[32];
            mxp__format_float(scales[i], t);
            return mxp__fail(MXP_EINVAL, "%s: scales[%zu] = %s is not finite and > 0", fn, i, t);
        }
    return MXP_OK;
}

static mxp_status check_out_dtype(const char *fn, mxp_dtype yt)
{
    if (mxp__dtype_valid(yt) && mxp_dtype_is_floating(yt)) return MXP_OK;
    return mxp__fail(MXP_EINVAL, "%s: output dtype %s (%d) is not a floating dtype", fn, dname(yt),
                     (int)yt);
}

/* Index of the scale of element (r, c). */
static size_t scale_index(const mxp_qlayout *l, size_t r, size_t c)
{
    switch (l->axis) {
    case MXP_QAXIS_TENSOR: return 0;
    case MXP_QAXIS_ROW: {
        const size_t g = l->group ? l->group : l->cols;
        return r * ceil_div(l->cols, g) + c / g;
    }
    default: return (r / (l->group ? l->group : l->rows)) * l->cols + c;
    }
}

typedef enum { D_INT8, D_INT4, D_FP8 } dkind;

static mxp_status dequantize(const char *fn, dkind kind, void *y, mxp_dtype yt, const void *q,
                             mxp_dtype fmt, const float *scales, const mxp_qlayout *l)
{
    size_t n;
    mxp_status st = check_layout(fn, l, &n);
    if (st) return st;
    if (kind == D_FP8 && !is_fp8(fmt))
        return mxp__fail(MXP_EINVAL, "%s: fmt %s (%d) is not a float8 dtype", fn, dname(fmt), (int)fmt);
    if ((st = check_out_dtype(fn, yt))) return st;
    if (n == 0) return MXP_OK;
    if (!y || !q || !scales)
        return mxp__fail(MXP_EINVAL, "%s: %s is NULL with %zu x %zu elements", fn,
                         !y ? "y" : !q ? (kind == D_INT4 ? "packed" : "q") : "scales", l->rows, l->cols);
    if ((st = check_scales(fn, scales, mxp_qlayout_nscales(l)))) return st;
    const mxp__kernels *ck = conv_table();
    const unsigned char *qb = (const unsigned char *)q;
    unsigned char *yb = (unsigned char *)y;
    const size_t ysz = elem_size(yt), pb = (l->cols + 1) / 2;
    float v[BLK];
    const mxp__qfenv env = mxp__qfenv_enter();
    for (size_t r = 0; r < l->rows; r++) {
        for (size_t c0 = 0; c0 < l->cols; c0 += BLK) {
            const size_t m = l->cols - c0 < BLK ? l->cols - c0 : BLK;
            const size_t off = r * l->cols + c0;
            if (kind == D_FP8) ck->cvt[MXP_FLOAT32][fmt][MXP__RNE](v, qb + off, m, &PLAIN);
            for (size_t i = 0; i < m; i++) {
                const size_t c = c0 + i;
                const float s = scales[scale_index(l, r, c)];
                if (kind == D_INT8) {
                    v[i] = (float)(int8_t)qb[off + i] / s;
                } else if (kind == D_INT4) {
                    const unsigned byte = qb[r * pb + c / 2];
                    const int nib = (int)((c & 1u) ? byte >> 4 : byte & 0xFu);
                    v[i] = (float)((nib ^ 8) - 8) / s;
                } else {
                    const float inv = 1.0f / s;
                    v[i] = v[i] * inv;
                }
            }
            if (yt == MXP_FLOAT32) memcpy(yb + 4 * off, v, 4 * m);
            else ck->cvt[yt][MXP_FLOAT32][MXP__RNE](yb + ysz * off, v, m, &PLAIN);
        }
    }
    mxp__qfenv_leave(env);
    return MXP_OK;
}

mxp_status mxp_dequantize_int8(void *y, mxp_dtype yt, const int8_t *q, const float *scales,
                               const mxp_qlayout *l)
{
    return dequantize("mxp_dequantize_int8", D_INT8, y, yt, q, MXP_INT8, scales, l);
}

mxp_status mxp_dequantize_int4(void *y, mxp_dtype yt, const uint8_t *packed, const float *scales,
                               const mxp_qlayout *l)
{
    return dequantize("mxp_dequantize_int4", D_INT4, y, yt, packed, MXP_INT8, scales, l);
}

mxp_status mxp_dequantize_fp8(void *y, mxp_dtype yt, const void *q, mxp_dtype fmt, const float *scales,
                              const mxp_qlayout *l)
{
    return dequantize("mxp_dequantize_fp8", D_FP8, y, yt, q, fmt, scales, l);
}

/* ---- int4 pack / unpack ------------------------------------------------------------------ */

mxp_status mxp_int4_pack(uint8_t *packed, const int8_t *q, size_t rows, size_t cols)
{
    size_t n;
    if (!count_ok(rows, cols, &n))
        return mxp__fail(MXP_EINVAL, "mxp_int4_pack: %zu x %zu overflows the size range", rows, cols);
    if (n == 0) return MXP_OK;
    if (!packed || !q)
        return mxp__fail(MXP_EINVAL, "mxp_int4_pack: %s is NULL with %zu x %zu elements",
                         !packed ? "packed" : "q", rows, cols);
    for (size_t i = 0; i < n; i++)
        if (q[i] < -8 || q[i] > 7)
            return mxp__fail(MXP_EINVAL,
                             "mxp_int4_pack: q[%zu] (row %zu, column %zu) = %d is outside -8..7; "
                             "nothing was written", i, i / cols, i % cols, (int)q[i]);
    const size_t pb = (cols + 1) / 2;
    for (size_t r = 0; r < rows; r++) {
        const int8_t *row = q + r * cols;
        for (size_t b = 0; b < pb; b++) {
            const unsigned lo = (unsigned)(uint8_t)row[2 * b] & 0xFu;
            const unsigned hi = 2 * b + 1 < cols ? (unsigned)(uint8_t)row[2 * b + 1] & 0xFu : 0u;
            packed[r * pb + b] = (uint8_t)(lo | (hi << 4));
        }
    }
    return MXP_OK;
}

mxp_status mxp_int4_unpack(int8_t *q, const uint8_t *packed, size_t rows, size_t cols)
{
    size_t n;
    if (!count_ok(rows, cols, &n))
        return mxp__fail(MXP_EINVAL, "mxp_int4_unpack: %zu x %zu overflows the size range", rows, cols);
    if (n == 0) return MXP_OK;
    if (!packed || !q)
        return mxp__fail(MXP_EINVAL, "mxp_int4_unpack: %s is NULL with %zu x %zu elements",
                         !q ? "q" : "packed", rows, cols);
    const size_t pb = (cols + 1) / 2;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const unsigned byte = packed[r * pb + c / 2];
            const int nib = (int)((c & 1u) ? byte >> 4 : byte & 0xFu);
            q[r * cols + c] = (int8_t)((nib ^ 8) - 8);
        }
    return MXP_OK;
}

/* ---- MX blocks --------------------------------------------------------------------------- */

/*
 * q = x / X rounded once into fmt. The kernels compute x * 2^(127 - e) as a float32 product,
 * then the conversion rounds that to float8: the product is exact (a power-of-two scaling of a
 * float32) except where it falls below 2^-126, float32's normal range; there the exact x / X
 * is below 2^-126, far below half the smallest float8 subnormal (2^-10 for e4m3fn, 2^-17 for
 * e5m2), so the one correct rounding of x / X is a signed zero, and so is the float8 rounding
 * of whatever float32 value (a subnormal or a signed zero of the same sign) the product gave.
 * So the result is always the single rounding of the exact x / X; tests/test_quant.c checks
 * it against exact double arithmetic, subnormal quotients included.
 */
static mxp_status quantize_mx(const char *fn, void *q, mxp_dtype fmt, uint8_t *scales, const void *x,
                              mxp_dtype xt, size_t rows, size_t cols, mxp_mx_rounding r, unsigned flags)
{
    size_t n;
    mxp_status st0 = check_flags(fn, flags);
    if (st0) return st0;
    if (!count_ok(rows, cols, &n))
        return mxp__fail(MXP_EINVAL, "%s: %zu x %zu overflows the size range", fn, rows, cols);
    if (!is_fp8(fmt))
        return mxp__fail(MXP_EINVAL, "%s: fmt %s (%d) is not a float8 dtype", fn, dname(fmt), (int)fmt);
    if ((unsigned)r > MXP_MX_FLOOR)
        return mxp__fail(MXP_EINVAL, "%s: rounding %d is not MXP_MX_RCEIL or MXP_MX_FLOOR", fn, (int)r);
    mxp_status st = check_input_dtype(fn, xt);
    if (st) return st;
    if (n == 0) return MXP_OK;
    if (!q || !scales || !x)
        return mxp__fail(MXP_EINVAL, "%s: %s is NULL with %zu x %zu elements", fn,
                         !q ? "q" : !scales ? "scales" : "x", rows, cols);
    const mxp__kernels *ck = conv_table();
    const mxp__qkernels *qk = mxp__qkernels_active();
    const bool one_pass = (flags & MXP_QUANT_ONE_PASS) != 0;
    if (!one_pass) {
        const size_t bad = first_nonfinite(x, xt, n, ck);
        if (bad < n) return fail_nonfinite(fn, x, xt, bad, cols);
    }
    const size_t nb = ceil_div(cols, MXP__MX_BLOCK);
    const int e5m2 = fmt == MXP_FLOAT8_E5M2, fl = r == MXP_MX_FLOOR;
    float buf[BLK];
    const bool nt = stream(n, mxp_dtype_size(xt));
    const mxp__cvt_fn cvt = ck->cvt[fmt][MXP_FLOAT32][MXP__RNE];
    const mxp__qfenv env = mxp__qfenv_enter();
    for (size_t row = 0; row < rows; row++)
        for (size_t c = 0; c < cols; c += BLK) { /* BLK is a multiple of the block size */
            const size_t m = cols - c < BLK ? cols - c : BLK, off = row * cols + c;
            if (one_pass) { /* check this piece (it comes into the cache), then cast it from there */
                const unsigned char *xp = (const unsigned char *)x + off * elem_size(xt);
                const size_t bad = first_nonfinite(xp, xt, m, ck);
                if (bad < m) {
                    if (nt) qk->store_fence();
                    mxp__qfenv_leave(env);
                    return fail_nonfinite_part(fn, x, xt, off + bad, cols);
                }
            }
            qk->mx_encode((unsigned char *)q + off, scales + row * nb + c / MXP__MX_BLOCK,
                          view((const unsigned char *)x, xt, off, m, buf, ck), m, e5m2, fl, nt, cvt);
        }
    if (nt) qk->store_fence();
    mxp__qfenv_leave(env);
    return MXP_OK;
}

mxp_status mxp_quantize_mx(void *q, mxp_dtype fmt, uint8_t *scales, const void *x, mxp_dtype xt,
                           size_t rows, size_t cols, mxp_mx_rounding r)
{
    return quantize_mx("mxp_quantize_mx", q, fmt, scales, x, xt, rows, cols, r, 0);
}

mxp_status mxp_quantize_mx_ex(void *q, mxp_dtype fmt, uint8_t *scales, const void *x, mxp_dtype xt,
                              size_t rows, size_t cols, mxp_mx_rounding r, unsigned flags)
{
    return quantize_mx("mxp_quantize_mx_ex", q, fmt, scales, x, xt, rows, cols, r, flags);
}

/*
 * y = q * 2^(e - 127) rounded into yt. As a float32 product q * X is exact unless it overflows
 * (q has at most 4 significant bits, and X >= 2^-127 keeps it above 2^-149), and an overflow
 * (>= 2^128) is also what rounding the exact value gives in every floating dtype but float64,
 * whose elements are computed exactly in double instead.
 */
mxp_status mxp_dequantize_mx(void *y, mxp_dtype yt, const void *q, mxp_dtype fmt, const uint8_t *scales,
                             size_t rows, size_t cols)
{
    static const char fn[] = "mxp_dequantize_mx";
    size_t n;
    if (!count_ok(rows, cols, &n))
        return mxp__fail(MXP_EINVAL, "%s: %zu x %zu overflows the size range", fn, rows, cols);
    if (!is_fp8(fmt))
        return mxp__fail(MXP_EINVAL, "%s: fmt %s (%d) is not a float8 dtype", fn, dname(fmt), (int)fmt);
    mxp_status st = check_out_dtype(fn, yt);
    if (st) return st;
    if (n == 0) return MXP_OK;
    if (!y || !q || !scales)
        return mxp__fail(MXP_EINVAL, "%s: %s is NULL with %zu x %zu elements", fn,
                         !y ? "y" : !q ? "q" : "scales", rows, cols);
    const mxp__kernels *ck = conv_table();
    const size_t nb = ceil_div(cols, MXP__MX_BLOCK), ysz = elem_size(yt);
    float v[BLK];
    const mxp__qfenv env = mxp__qfenv_enter();
    for (size_t row = 0; row < rows; row++)
        for (size_t c0 = 0; c0 < cols; c0 += BLK) {
            const size_t m = cols - c0 < BLK ? cols - c0 : BLK, off = row * cols + c0;
            ck->cvt[MXP_FLOAT32][fmt][MXP__RNE](v, (const unsigned char *)q + off, m, &PLAIN);
            if (yt == MXP_FLOAT64) {
                for (size_t i = 0; i < m; i++) {
                    const uint8_t e = scales[row * nb + (c0 + i) / MXP__MX_BLOCK];
                    const double d = e == 0xFF ? (double)NAN : (double)v[i] * ldexp(1.0, (int)e - 127);
                    memcpy((unsigned char *)y + 8 * (off + i), &d, 8);
                }
                continue;
            }
            for (size_t i = 0; i < m; i++) {
                const uint8_t e = scales[row * nb + (c0 + i) / MXP__MX_BLOCK];
                const uint32_t xb = e == 0xFF ? 0x7FC00000u : e ? (uint32_t)e << 23 : 0x00400000u;
                v[i] = v[i] * f32_of(xb);
            }
            if (yt == MXP_FLOAT32) memcpy((unsigned char *)y + 4 * off, v, 4 * m);
            else ck->cvt[yt][MXP_FLOAT32][MXP__RNE]((unsigned char *)y + ysz * off, v, m, &PLAIN);
        }
    mxp__qfenv_leave(env);
    return MXP_OK;
}

/* ---- float8 delayed scaling -------------------------------------------------------------- */

struct mxp_fp8_scaler {
    mxp_fp8_recipe r;
    float scale, scale_inv;
    float amax;            /* this step's: >= 0, +inf, or the canonical NaN 0x7FC00000 */
    uint64_t nonfinite;    /* steps skipped for a non-finite amax */
    size_t head;           /* index of the oldest history entry */
    float *hist;           /* r.history_len entries, a ring */
};

static const char *recipe_invalid(const mxp_fp8_recipe *r)
{
    if (!is_fp8(r->format)) return "format must be float8_e4m3fn or float8_e5m2";
    if (r->history_len < 1 || r->history_len > MXP_FP8_HISTORY_MAX)
        return "history_len must be in 1..MXP_FP8_HISTORY_MAX (65536)";
    if ((unsigned)r->algo > MXP_AMAX_MOST_RECENT) return "algo must be MXP_AMAX_MAX or MXP_AMAX_MOST_RECENT";
    if (r->margin < 0 || r->margin > MXP_FP8_MARGIN_MAX) return "margin must be in 0..MXP_FP8_MARGIN_MAX (64)";
    return NULL;
}

mxp_fp8_recipe mxp_fp8_recipe_default(mxp_dtype format)
{
    mxp_fp8_recipe r = {format, 1024, MXP_AMAX_MAX, 0};
    return r;
}

/* A state with the recipe's zero history (r valid). NULL when allocation fails. */
static mxp_fp8_scaler *scaler_alloc(const mxp_fp8_recipe *r)
{
    mxp_fp8_scaler *s = malloc(sizeof *s);
    if (!s) return NULL;
    s->hist = calloc(r->history_len, sizeof *s->hist);
    if (!s->hist) {
        free(s);
        return NULL;
    }
    s->r = *r;
    s->scale = s->scale_inv = 1.0f;
    s->amax = 0.0f;
    s->nonfinite = 0;
    s->head = 0;
    return s;
}

mxp_status mxp_fp8_scaler_new(const mxp_fp8_recipe *r, mxp_fp8_scaler **out)
{
    if (!r || !out) return mxp__fail(MXP_EINVAL, "mxp_fp8_scaler_new: %s is NULL", !r ? "recipe" : "out");
    const char *why = recipe_invalid(r);
    if (why) return mxp__fail(MXP_EINVAL, "mxp_fp8_scaler_new: invalid recipe: %s", why);
    mxp_fp8_scaler *s = scaler_alloc(r);
    if (!s)
        return mxp__fail(MXP_ENOMEM, "mxp_fp8_scaler_new: cannot allocate a history of %lu entries",
                         (unsigned long)r->history_len);
    *out = s;
    return MXP_OK;
}

void mxp_fp8_scaler_free(mxp_fp8_scaler *s)
{
    if (!s) return;
    free(s->hist);
    free(s);
}

mxp_fp8_recipe mxp_fp8_scaler_recipe(const mxp_fp8_scaler *s)
{
    if (!s) {
        mxp_fp8_recipe z;
        memset(&z, 0, sizeof z);
        return z;
    }
    return s->r;
}

float mxp_fp8_scaler_scale(const mxp_fp8_scaler *s) { return s ? s->scale : 0.0f; }
float mxp_fp8_scaler_scale_inv(const mxp_fp8_scaler *s) { return s ? s->scale_inv : 0.0f; }
float mxp_fp8_scaler_amax(const mxp_fp8_scaler *s) { return s ? s->amax : 0.0f; }
uint64_t mxp_fp8_scaler_nonfinite_steps(const mxp_fp8_scaler *s) { return s ? s->nonfinite : 0; }

/* max-merge magnitude bits a into the step's amax (NaN canonical). */
static void merge_amax(mxp_fp8_scaler *s, uint32_t a)
{
    const uint32_t cur = bits_of(s->amax);
    uint32_t m = a > cur ? a : cur;
    if (m > NONFINITE) m = 0x7FC00000u;
    s->amax = f32_of(m);
}

mxp_status mxp_fp8_quantize_delayed(void *q, const void *x, mxp_dtype xt, size_t n, mxp_fp8_scaler *s)
{
    static const char fn[] = "mxp_fp8_quantize_delayed";
    if (!s) return mxp__fail(MXP_EINVAL, "%s: scaler is NULL", fn);
    mxp_status st = check_input_dtype(fn, xt);
    if (st) return st;
    /* n * size must fit in ptrdiff_t and not wrap the address space at x or q: a bound on n
     * alone (n <= SIZE_MAX / 4) let n = SIZE_MAX / 4 float32 run the kernel far past x (found
     * by tests/test_bad_args.c under ASan) */
    size_t xbytes, qbytes;
    if (!mxp__span_ok(x, n, mxp_dtype_size(xt), &xbytes) || !mxp__span_ok(q, n, 1, &qbytes))
        return mxp__fail(MXP_EINVAL, "%s: n = %zu elements is past any possible buffer (n * %zu bytes "
                         "exceeds PTRDIFF_MAX or wraps the address space)", fn, n, mxp_dtype_size(xt));
    if (n == 0) return MXP_OK;
    if (!q || !x) return mxp__fail(MXP_EINVAL, "%s: %s is NULL with n = %zu", fn, !q ? "q" : "x", n);
    const mxp__kernels *ck = conv_table();
    const mxp__qkernels *qk = mxp__qkernels_active();
    const mxp__cvt_fn cvt = ck->cvt[s->r.format][MXP_FLOAT32][MXP__RNE];
    const unsigned char *xb = (const unsigned char *)x;
    const float scale = s->scale;
    const int e5m2 = s->r.format == MXP_FLOAT8_E5M2;
    float buf[BLK];
    uint32_t amax = 0;
    const bool nt = stream(n, mxp_dtype_size(xt));
    const mxp__qfenv env = mxp__qfenv_enter();
    if (xt == MXP_FLOAT32 && ((uintptr_t)x & 3u) == 0) { /* one sweep over the whole input */
        amax = qk->fp8_encode((unsigned char *)q, (const float *)x, n, scale, e5m2, nt, cvt);
    } else {
        for (size_t b = 0; b < n; b += BLK) {
            const size_t m = n - b < BLK ? n - b : BLK;
            const uint32_t a = qk->fp8_encode((unsigned char *)q + b, view(xb, xt, b, m, buf, ck), m, scale,
                                              e5m2, nt, cvt);
            amax = a > amax ? a : amax;
        }
    }
    if (nt) qk->store_fence();
    mxp__qfenv_leave(env);
    merge_amax(s, amax);
    return MXP_OK;
}

mxp_status mxp_fp8_scaler_set_amax(mxp_fp8_scaler *s, float amax)
{
    if (!s) return mxp__fail(MXP_EINVAL, "mxp_fp8_scaler_set_amax: scaler is NULL");
    if (negative(amax)) return negative_amax("mxp_fp8_scaler_set_amax", amax);
    uint32_t a = bits_of(amax) & 0x7FFFFFFFu; /* -0 -> 0 (NaN of either sign -> canonical) */
    if (a > NONFINITE) a = 0x7FC00000u;
    s->amax = f32_of(a);
    return MXP_OK;
}

/* s = (fmax / h) / 2^margin with the two clamps; h finite and > 0. In the default FP
 * environment (callers enter it). */
static float delayed_scale(const mxp_fp8_recipe *r, float h)
{
    const float fmax = r->format == MXP_FLOAT8_E4M3FN ? 448.0f : 57344.0f;
    float s = fmax / h;
    s = s / ldexpf(1.0f, r->margin); /* 2^margin <= 2^64: exact */
    if (s > FLT_MAX) s = FLT_MAX;
    if (s < 0x1p-127f) s = 0x1p-127f;
    return s;
}

mxp_status mxp_fp8_scaler_update(mxp_fp8_scaler *s)
{
    if (!s) return mxp__fail(MXP_EINVAL, "mxp_fp8_scaler_update: scaler is NULL");
    const float a = s->amax; /* >= 0 or NaN (set_amax): tested by its bits, which DAZ cannot flush */
    s->amax = 0.0f;
    if ((bits_of(a) & 0x7FFFFFFFu) == 0) return MXP_OK;
    if ((bits_of(a) & 0x7FFFFFFFu) >= NONFINITE) {
        s->nonfinite++;
        return MXP_OK;
    }
    const size_t len = s->r.history_len;
    s->hist[s->head] = a; /* the oldest drops out, a becomes the newest */
    s->head = s->head + 1 == len ? 0 : s->head + 1;
    float h = a;
    if (s->r.algo == MXP_AMAX_MAX) {
        uint32_t m = 0;
        for (size_t i = 0; i < len; i++) {
            const uint32_t b = bits_of(s->hist[i]);
            m = b > m ? b : m;
        }
        h = f32_of(m);
    }
    const mxp__qfenv env = mxp__qfenv_enter();
    s->scale = delayed_scale(&s->r, h);
    s->scale_inv = 1.0f / s->scale;
    mxp__qfenv_leave(env);
    return MXP_OK;
}

size_t mxp_fp8_scaler_history(const mxp_fp8_scaler *s, float *out, size_t cap)
{
    if (!s) return 0;
    /* a bad call, not a measurement: copying would write through NULL (found by
     * tests/test_bad_args.c); 0 is never a history length, so it is the failure value */
    if (!out && cap > 0) {
        (void)mxp__fail(MXP_EINVAL, "mxp_fp8_scaler_history: out is NULL with cap = %zu (NULL is allowed "
                        "only with cap 0, to measure)", cap);
        return 0;
    }
    const size_t len = s->r.history_len;
    for (size_t i = 0; i < len && i < cap; i++) {
        const size_t k = s->head + i < len ? s->head + i : s->head + i - len;
        out[i] = s->hist[k];
    }
    return len;
}

/* ---- save / restore ---------------------------------------------------------------------- */

#define FP8_TAG "mxp-fp8-scaler/1"

/* Appends to a growing snprintf-style output. */
typedef struct sbuf {
    char *buf;
    size_t cap, len; /* len: the full length so far (may exceed cap) */
    bool overflow;   /* the text would exceed INT_MAX */
} sbuf;

static void sb_put(sbuf *b, const char *t)
{
    const size_t k = strlen(t);
    if (b->len + k > (size_t)INT_MAX) {
        b->overflow = true;
        return;
    }
    if (b->len < b->cap) {
        const size_t room = b->cap - b->len;
        memcpy(b->buf + b->len, t, k < room ? k : room);
    }
    b->len += k;
}

int mxp_fp8_scaler_save(const mxp_fp8_scaler *s, char *buf, size_t cap)
{
    static const char fn[] = "mxp_fp8_scaler_save";
    if (!s) {
        (void)mxp__fail(MXP_EINVAL, "%s: scaler is NULL", fn);
        return -1;
    }
    if (!buf && cap > 0) {
        (void)mxp__fail(MXP_EINVAL, "%s: buf is NULL with cap = %zu (NULL is allowed only with cap 0, "
                        "to measure the text)", fn, cap);
        return -1;
    }
    sbuf b = {cap ? buf : NULL, cap ? cap - 1 : 0, 0, false};
    char t[192], f1[32], f2[32], f3[32];
    mxp__format_hex_float(s->scale, f1);
    mxp__format_hex_float(s->scale_inv, f2);
    mxp__format_hex_float(s->amax, f3);
    snprintf(t, sizeof t, FP8_TAG " format=%s history_len=%lu algo=%s margin=%d",
             mxp_dtype_name(s->r.format), (unsigned long)s->r.history_len,
             s->r.algo == MXP_AMAX_MAX ? "max" : "most_recent", s->r.margin);
    sb_put(&b, t);
    snprintf(t, sizeof t, " scale=%s scale_inv=%s amax=%s nonfinite_steps=%llu history=", f1, f2, f3,
             (unsigned long long)s->nonfinite);
    sb_put(&b, t);
    for (size_t i = 0; i < s->r.history_len && !b.overflow; i++) {
        const size_t k = s->head + i < s->r.history_len ? s->head + i : s->head + i - s->r.history_len;
        mxp__format_hex_float(s->hist[k], f1);
        if (i) sb_put(&b, ",");
        sb_put(&b, f1);
    }
    if (b.overflow) { /* cannot happen within MXP_FP8_HISTORY_MAX: 65536 entries are < 1 MiB */
        (void)mxp__fail(MXP_EUNSUPPORTED, "%s: the text of a history of %lu entries would exceed INT_MAX bytes", fn,
                        (unsigned long)s->r.history_len);
        return -1;
    }
    if (cap) buf[b.len < cap - 1 ? b.len : cap - 1] = '\0';
    return (int)b.len;
}

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static bool parse_u64(const char *p, size_t len, uint64_t max, uint64_t *out)
{
    if (len == 0) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return false;
        const unsigned d = (unsigned)(p[i] - '0');
        if (v > (max - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

enum { R_FORMAT, R_HLEN, R_ALGO, R_MARGIN, R_SCALE, R_INV, R_AMAX, R_NONFINITE, R_HISTORY, R_COUNT };
static const char *const rfield[R_COUNT] = {"format", "history_len", "algo", "margin", "scale",
                                            "scale_inv", "amax", "nonfinite_steps", "history"};

/* Parses the comma-separated history, whose entry count the caller checked is len, into h. */
static mxp_status parse_history(const char *v, size_t vlen, float *h, size_t len)
{
    size_t i = 0;
    for (size_t k = 0; k < len; k++) {
        size_t e = i;
        while (e < vlen && v[e] != ',') e++;
        float f;
        const int shown = (int)(e - i < 40 ? e - i : 40); /* the entry as quoted in messages */
        if (e == i || !mxp__parse_float(v + i, e - i, &f))
            return mxp__fail(MXP_EPARSE, "mxp_fp8_scaler_restore: bad history entry %zu '%.*s' "
                                         "(expected an exact float32 such as 0x1.8p+3)",
                             k, shown, v + i);
        if (!(f >= 0.0f && f <= FLT_MAX) || (bits_of(f) >> 31))
            return mxp__fail(MXP_EINVAL, "mxp_fp8_scaler_restore: history entry %zu is '%.*s' (entries "
                                         "are finite and >= 0)",
                             k, shown, v + i);
        h[k] = f;
        i = e + 1;
    }
    return MXP_OK;
}

mxp_status mxp_fp8_scaler_restore(const char *text, mxp_fp8_scaler **out)
{
    static const char fn[] = "mxp_fp8_scaler_restore";
    if (!text || !out) return mxp__fail(MXP_EINVAL, "%s: %s is NULL", fn, !text ? "text" : "out");
    const char *val[R_COUNT] = {NULL};
    size_t vlen[R_COUNT] = {0};
    const char *p = text;
    bool tagged = false;
    for (;;) {
        while (*p && blank(*p)) p++;
        if (!*p) break;
        const char *tok = p;
        while (*p && !blank(*p)) p++;
        const size_t len = (size_t)(p - tok);
        if (!tagged) {
            if (len != strlen(FP8_TAG) || memcmp(tok, FP8_TAG, len) != 0)
                return mxp__fail(MXP_EPARSE, "%s: text must start with '" FP8_TAG "', got '%.*s'", fn,
                                 (int)(len < 40 ? len : 40), tok);
            tagged = true;
            continue;
        }
        const char *eq = memchr(tok, '=', len);
        if (!eq) return mxp__fail(MXP_EPARSE, "%s: field '%.*s' has no '=value'", fn, (int)(len < 40 ? len : 40), tok);
        const size_t klen = (size_t)(eq - tok);
        int f = -1;
        for (int k = 0; k < R_COUNT; k++)
            if (klen == strlen(rfield[k]) && memcmp(tok, rfield[k], klen) == 0) f = k;
        if (f < 0)
            return mxp__fail(MXP_EPARSE, "%s: unknown field '%.*s' (expected format, history_len, algo, "
                                         "margin, scale, scale_inv, amax, nonfinite_steps, history)",
                             fn, (int)(klen < 40 ? klen : 40), tok);
        if (val[f]) return mxp__fail(MXP_EPARSE, "%s: field '%s' repeated", fn, rfield[f]);
        val[f] = eq + 1;
        vlen[f] = len - klen - 1;
    }
    if (!tagged) return mxp__fail(MXP_EPARSE, "%s: empty text (expected '" FP8_TAG " format=...')", fn);
    for (int k = 0; k < R_COUNT; k++)
        if (!val[k]) return mxp__fail(MXP_EPARSE, "%s: field '%s' missing", fn, rfield[k]);

    mxp_fp8_recipe r;
    memset(&r, 0, sizeof r);
    float scale = 0, inv = 0, amax = 0;
    uint64_t u = 0, nonfinite = 0;
    char name[32];
    int bad = -1;
    if (vlen[R_FORMAT] >= sizeof name) bad = R_FORMAT;
    else {
        memcpy(name, val[R_FORMAT], vlen[R_FORMAT]);
        name[vlen[R_FORMAT]] = '\0';
        if (mxp_dtype_parse(name, &r.format) != MXP_OK) bad = R_FORMAT;
    }
    if (bad < 0 && !parse_u64(val[R_HLEN], vlen[R_HLEN], UINT32_MAX, &u)) bad = R_HLEN;
    if (bad < 0 && u > MXP_FP8_HISTORY_MAX) /* before anything is counted or allocated */
        return mxp__fail(MXP_EPARSE, "%s: history_len %llu is above MXP_FP8_HISTORY_MAX (%d)", fn,
                         (unsigned long long)u, MXP_FP8_HISTORY_MAX);
    r.history_len = (uint32_t)u;
    if (bad < 0) {
        if (vlen[R_ALGO] == 3 && memcmp(val[R_ALGO], "max", 3) == 0) r.algo = MXP_AMAX_MAX;
        else if (vlen[R_ALGO] == 11 && memcmp(val[R_ALGO], "most_recent", 11) == 0) r.algo = MXP_AMAX_MOST_RECENT;
        else bad = R_ALGO;
    }
    if (bad < 0 && !parse_u64(val[R_MARGIN], vlen[R_MARGIN], INT_MAX, &u)) bad = R_MARGIN;
    r.margin = (int)u;
    if (bad < 0 && !(vlen[R_SCALE] && mxp__parse_float(val[R_SCALE], vlen[R_SCALE], &scale))) bad = R_SCALE;
    if (bad < 0 && !(vlen[R_INV] && mxp__parse_float(val[R_INV], vlen[R_INV], &inv))) bad = R_INV;
    if (bad < 0 && !(vlen[R_AMAX] && mxp__parse_float(val[R_AMAX], vlen[R_AMAX], &amax))) bad = R_AMAX;
    if (bad < 0 && !parse_u64(val[R_NONFINITE], vlen[R_NONFINITE], UINT64_MAX, &nonfinite)) bad = R_NONFINITE;
    if (bad >= 0)
        return mxp__fail(MXP_EPARSE, "%s: bad value '%.*s' for field '%s'", fn,
                         (int)(vlen[bad] < 40 ? vlen[bad] : 40), val[bad], rfield[bad]);
    const char *why = recipe_invalid(&r);
    if (why) return mxp__fail(MXP_EINVAL, "%s: invalid recipe: %s", fn, why);
    /* the scales update() produces: 2^-127 <= scale <= FLT_MAX (its clamps keep scale_inv
     * finite); from the bits, so the caller's denormals-are-zero cannot change the answer */
    if (bits_of(scale) < bits_of(0x1p-127f) || bits_of(scale) > bits_of(FLT_MAX)) {
        char quoted[32];
        mxp__format_hex_float(scale, quoted);
        return mxp__fail(MXP_EINVAL, "%s: scale %s is outside [0x1p-127, FLT_MAX] (the scales "
                                     "mxp_fp8_scaler_update produces: scale_inv = 1 / scale stays finite)",
                         fn, quoted);
    }
    const mxp__qfenv env = mxp__qfenv_enter();
    MXP__PIN_F(scale); /* kernels.h: gcc 12 moved the division after the leave, into the caller's FTZ */
    float want_inv = 1.0f / scale;
    MXP__PIN_F(want_inv);
    mxp__qfenv_leave(env);
    if (bits_of(inv) != bits_of(want_inv)) {
        char got[32], want[32];
        mxp__format_hex_float(inv, got);
        mxp__format_hex_float(want_inv, want);
        return mxp__fail(MXP_EINVAL, "%s: scale_inv %s is not 1 / scale = %s", fn, got, want);
    }
    if (negative(amax)) return negative_amax(fn, amax);
    /* Count the history's entries before allocating: the allocation never exceeds what the
     * text itself holds (a short text cannot claim a history of 2^32 entries). */
    size_t entries = 1;
    for (size_t i = 0; i < vlen[R_HISTORY]; i++) entries += val[R_HISTORY][i] == ',';
    if (entries != r.history_len)
        return mxp__fail(MXP_EPARSE, "%s: history has %zu entries, history_len is %lu", fn, entries,
                         (unsigned long)r.history_len);
    mxp_fp8_scaler *s = scaler_alloc(&r);
    if (!s) return mxp__fail(MXP_ENOMEM, "%s: cannot allocate a history of %lu entries", fn,
                             (unsigned long)r.history_len);
    mxp_status st = parse_history(val[R_HISTORY], vlen[R_HISTORY], s->hist, r.history_len);
    if (st) {
        mxp_fp8_scaler_free(s);
        return st;
    }
    s->scale = scale;
    s->scale_inv = inv;
    uint32_t ab = bits_of(amax) & 0x7FFFFFFFu;
    if (ab > NONFINITE) ab = 0x7FC00000u;
    s->amax = f32_of(ab);
    s->nonfinite = nonfinite;
    *out = s;
    return MXP_OK;
}
