/*
 * qinfer.c - quantized dense kernels for inference. See qinfer.h for the four formats.
 *
 * Internally every kernel is kept in the layout the product reads, [in,out] row-major (the
 * reduction dimension first, like the model's float kernels):
 *   int8   w8 [in,out] int8, sw [out] quantization scales (s, the multiplier on the way in)
 *   int4   w4 [in, ceil(out/2)] packed (pairs along out), sw [out]; w8 is the unpack workspace
 *   fp8    f8 [in,out] float8 bytes, inv [out] dequantization multipliers
 *   mxfp8  f8 [in,out] float8 bytes; blocks are 32 consecutive rows (along in), and
 *          bscale [nb,out] holds each block's 2^(e - 127) (decoded E8M0, a power of two)
 */
#include "qinfer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"

static const mxp_dtype F8 = MXP_FLOAT8_E4M3FN; /* the element format used when quantizing here */

struct qdense {
    qformat f;
    mxp_dtype fmt;     /* fp8 / mxfp8 element format */
    size_t batch, in, out, nb; /* nb = ceil(in / 32) MX blocks per column */
    size_t stored;     /* bytes of the kernel and its scales as stored */
    int8_t *w8;        /* [in,out] int8 kernel (int8), unpacked int4 (workspace, int4) */
    uint8_t *w4;       /* [in,ceil(out/2)] packed int4 */
    float *sw;         /* [out] int8 / int4 per-channel scales */
    uint8_t *f8;       /* [in,out] float8 bytes */
    float *inv;        /* [out] fp8 per-channel dequantization multipliers */
    float *bscale;     /* [nb,out] mxfp8 block scales of the kernel */
    /* per-batch workspaces */
    int8_t *xq;        /* [B,in] int8 input */
    float *sx;         /* [B] per-row input scales */
    uint8_t *x8;       /* [B,in] float8 input bytes */
    uint8_t *ex;       /* [B,nb] E8M0 input block scales */
    float *xf;         /* [B,in] float8 input values as float32 */
    float *wf;         /* [in,out] float8 kernel values as float32 */
    float *xs;         /* [B,nb] mxfp8 input block scales 2^(e - 127) */
};

const char *qformat_name(qformat f)
{
    static const char *const names[] = {"int8", "int4", "fp8", "mxfp8"};
    return (unsigned)f < 4 ? names[f] : "?";
}

qformat qdense_format(const struct qdense *q) { return q->f; }
size_t qdense_bytes(const struct qdense *q) { return q->stored; }

void qdense_free(struct qdense *q)
{
    if (!q) return;
    free(q->w8);
    free(q->w4);
    free(q->sw);
    free(q->f8);
    free(q->inv);
    free(q->bscale);
    free(q->xq);
    free(q->sx);
    free(q->x8);
    free(q->ex);
    free(q->xf);
    free(q->wf);
    free(q->xs);
    free(q);
}

static void fatal(const char *what)
{
    /* Only a bug (bad sizes) makes the per-batch calls fail: inputs are finite activations. */
    fprintf(stderr, "train_mlp: %s failed: %s\n", what, mxp_last_error());
    exit(1);
}

/* A new kernel of format f for an [in,out] layer: every buffer the format needs. */
static struct qdense *qdense_new(qformat f, mxp_dtype fmt, size_t batch, size_t in, size_t out)
{
    struct qdense *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->f = f;
    q->fmt = fmt;
    q->batch = batch;
    q->in = in;
    q->out = out;
    q->nb = (in + MXP_MX_BLOCK - 1) / MXP_MX_BLOCK;
    bool ok = true;
#define ALLOC(p, n) ok = ok && ((p) = calloc((n) > 0 ? (size_t)(n) : 1u, sizeof *(p))) != NULL
    if (f == QF_INT8 || f == QF_INT4) {
        ALLOC(q->w8, in * out);
        ALLOC(q->sw, out);
        ALLOC(q->xq, batch * in);
        ALLOC(q->sx, batch);
        if (f == QF_INT4) ALLOC(q->w4, in * ((out + 1) / 2));
        q->stored = (f == QF_INT8 ? in * out : out * ((in + 1) / 2)) + out * sizeof(float);
    } else {
        ALLOC(q->f8, in * out);
        ALLOC(q->x8, batch * in);
        ALLOC(q->xf, batch * in);
        ALLOC(q->wf, in * out);
        if (f == QF_FP8) {
            ALLOC(q->inv, out);
            q->stored = in * out + out * sizeof(float);
        } else {
            ALLOC(q->bscale, q->nb * out);
            ALLOC(q->ex, batch * q->nb);
            ALLOC(q->xs, batch * q->nb);
            q->stored = in * out + q->nb * out;
        }
    }
#undef ALLOC
    if (!ok) {
        qdense_free(q);
        return NULL;
    }
    return q;
}

/* dst[c,r] = src[r,c] for elements of `size` bytes. */
static void transpose_bytes(void *dst, const void *src, size_t r, size_t c, size_t size)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++) memcpy(d + (j * r + i) * size, s + (i * c + j) * size, size);
}

/* Decode the E8M0 block scales e[out,nb] of an [out,in] MX kernel into q->bscale[nb,out]. */
static int set_block_scales(struct qdense *q, const uint8_t *e, const char *path, char *err,
                            size_t cap)
{
    for (size_t j = 0; j < q->out; j++)
        for (size_t b = 0; b < q->nb; b++) {
            uint8_t v = e[j * q->nb + b];
            if (v == 0xFF) {
                snprintf(err, cap, "layer '%s': MX block scale [%zu,%zu] is NaN (0xFF)", path, j,
                         b);
                return -1;
            }
            q->bscale[b * q->out + j] = ldexpf(1.0f, (int)v - 127);
        }
    return 0;
}

/* ---- from a float kernel -------------------------------------------------------------------- */

static struct qdense *quantize_kernel(const layer *l, qformat f, size_t batch, char *err,
                                      size_t cap)
{
    const size_t in = l->in, out = l->out;
    struct qdense *q = qdense_new(f, F8, batch, in, out);
    float *w = malloc(in * out * sizeof *w);          /* [in,out] kernel widened to float32 */
    float *wt = malloc(in * out * sizeof *wt);        /* [out,in] (MX) */
    float *s = malloc(out * sizeof *s);               /* [out] fp8 scales */
    uint8_t *qt = malloc(in * out), *e = malloc(((in + 31) / 32) * out); /* MX [out,in], [out,nb] */
    mxp_status st = MXP_ENOMEM;
    bool told = false; /* err already written */
    if (q && w && wt && s && qt && e) {
        st = mxp_convert(w, MXP_FLOAT32, l->param[0].data, l->param[0].dtype, in * out);
        const mxp_qlayout per_channel = {in, out, MXP_QAXIS_COL, 0}; /* a scale per column */
        if (st == MXP_OK) switch (f) {
        case QF_INT8: st = mxp_quantize_int8(q->w8, q->sw, w, MXP_FLOAT32, &per_channel); break;
        case QF_INT4: st = mxp_quantize_int4(q->w4, q->sw, w, MXP_FLOAT32, &per_channel); break;
        case QF_FP8:
            st = mxp_quantize_fp8(q->f8, F8, s, w, MXP_FLOAT32, &per_channel);
            for (size_t j = 0; st == MXP_OK && j < out; j++) q->inv[j] = 1.0f / s[j];
            break;
        case QF_MXFP8: /* blocks run along `in`: quantize the rows of w^T [out,in] */
            transpose(wt, w, in, out);
            st = mxp_quantize_mx(qt, F8, e, wt, MXP_FLOAT32, out, in, MXP_MX_RCEIL);
            if (st == MXP_OK) {
                transpose_bytes(q->f8, qt, out, in, 1);
                if (set_block_scales(q, e, l->path, err, cap) != 0) {
                    st = MXP_EINVAL;
                    told = true;
                }
            }
            break;
        }
    }
    if (st != MXP_OK) {
        if (!told)
            snprintf(err, cap, "layer '%s': %s quantization of the kernel failed: %s", l->path,
                     qformat_name(f), mxp_last_error());
        qdense_free(q);
        q = NULL;
    }
    free(w);
    free(wt);
    free(s);
    free(qt);
    free(e);
    return q;
}

int qinfer_quantize_model(model *m, bool mx, char *err, size_t cap)
{
    int n = 0;
    for (int i = 0; i < NLAYERS; i++) {
        layer *l = &m->L[i];
        if (l->op != OP_DENSE || l->pol.quant == MXP_QUANT_NONE || l->q || l->fp8)
            continue; /* not quantized, stored quantized, or float8 with delayed scaling */
        qformat f = l->pol.quant == MXP_QUANT_INT8 ? QF_INT8
                  : l->pol.quant == MXP_QUANT_INT4 ? QF_INT4 : mx ? QF_MXFP8 : QF_FP8;
        struct qdense *q = quantize_kernel(l, f, m->batch, err, cap);
        if (!q) return -1;
        l->q = q;
        n++;
    }
    return n;
}

/* ---- from a checkpoint -------------------------------------------------------------------- */

/* Dequantization multipliers d (nscale = 1 or out of them) -> what the format needs. */
static int check_scales(const float *d, size_t nscale, const char *path, char *err, size_t cap)
{
    for (size_t j = 0; j < nscale; j++)
        if (!(isfinite(d[j]) && d[j] > 0.0f)) {
            snprintf(err, cap, "layer '%s': kernel scale %zu is %g (must be finite and > 0)", path,
                     j, (double)d[j]);
            return -1;
        }
    return 0;
}

int qdense_from_stored(layer *l, qformat f, mxp_dtype fmt, const void *qv, const void *scale,
                       size_t nscale, size_t batch, char *err, size_t cap)
{
    const size_t in = l->in, out = l->out;
    if (f == QF_MXFP8 ? nscale != out * ((in + 31) / 32) : nscale != 1 && nscale != out) {
        snprintf(err, cap, "layer '%s': %zu kernel scales for a %s kernel [%zu,%zu]", l->path,
                 nscale, qformat_name(f), out, in);
        return -1;
    }
    if ((f == QF_FP8 || f == QF_MXFP8) && !mxp_all_finite(qv, fmt, in * out)) {
        snprintf(err, cap, "layer '%s': the %s kernel holds NaN", l->path, mxp_dtype_name(fmt));
        return -1;
    }
    if (f != QF_MXFP8 && check_scales(scale, nscale, l->path, err, cap) != 0) return -1;
    struct qdense *q = qdense_new(f, fmt, batch, in, out);
    int8_t *t = f == QF_INT4 ? malloc(in * out) : NULL; /* [out,in] unpacked int4 */
    if (!q || (f == QF_INT4 && !t)) {
        snprintf(err, cap, "layer '%s': out of memory", l->path);
        qdense_free(q);
        free(t);
        return -1;
    }
    const float *d = scale;
    int rc = 0;
    switch (f) {
    case QF_INT8:
    case QF_INT4:
        /* matmul_int8 divides by the quantization scale s = 1 / d */
        for (size_t j = 0; j < out; j++) q->sw[j] = 1.0f / d[nscale == 1 ? 0 : j];
        if (f == QF_INT8) {
            transpose_bytes(q->w8, qv, out, in, 1);
            break;
        }
        /* int4: unpack [out,in], transpose, pack again along out: [in, ceil(out/2)] */
        if (mxp_int4_unpack(t, qv, out, in) == MXP_OK) {
            transpose_bytes(q->w8, t, out, in, 1);
            if (mxp_int4_pack(q->w4, q->w8, in, out) == MXP_OK) break;
        }
        snprintf(err, cap, "layer '%s': int4 kernel: %s", l->path, mxp_last_error());
        rc = -1;
        break;
    case QF_FP8:
        for (size_t j = 0; j < out; j++) q->inv[j] = d[nscale == 1 ? 0 : j];
        transpose_bytes(q->f8, qv, out, in, 1);
        break;
    case QF_MXFP8:
        transpose_bytes(q->f8, qv, out, in, 1);
        rc = set_block_scales(q, scale, l->path, err, cap);
        break;
    }
    free(t);
    if (rc != 0) {
        qdense_free(q);
        return -1;
    }
    qdense_free(l->q);
    l->q = q;
    return 0;
}

/* ---- the products ------------------------------------------------------------------------- */

static void add_bias(float *z, const float *bias, size_t rows, size_t out)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < out; j++) z[i * out + j] += bias[j];
}

void qdense_forward(struct qdense *q, float *z, const tbuf *x, const float *bias, size_t rows,
                    int threads)
{
    const size_t in = q->in, out = q->out;
    if (q->f == QF_INT8 || q->f == QF_INT4) {
        const mxp_qlayout per_row = {rows, in, MXP_QAXIS_ROW, 0};
        /* activations: one pass over x (a refused batch is discarded whole, so the outputs of
         * the rows before a NaN need not stay untouched) */
        if (mxp_quantize_int8_ex(q->xq, q->sx, x->data, x->dtype, &per_row, MXP_QUANT_ONE_PASS) != MXP_OK)
            fatal("mxp_quantize_int8_ex (input)");
        if (q->f == QF_INT4 && mxp_int4_unpack(q->w8, q->w4, in, out) != MXP_OK)
            fatal("mxp_int4_unpack");
        if (mxp_matmul_int8(z, MXP_FLOAT32, q->xq, q->sx, q->w8, q->sw, rows, in, out) != MXP_OK)
            fatal("mxp_matmul_int8");
        add_bias(z, bias, rows, out);
        return;
    }
    /* float8: the kernel's bytes widen to their float32 values for this batch */
    if (mxp_convert(q->wf, MXP_FLOAT32, q->f8, q->fmt, in * out) != MXP_OK)
        fatal("mxp_convert (float8 kernel)");
    if (q->f == QF_FP8) {
        const mxp_qlayout per_tensor = {rows, in, MXP_QAXIS_TENSOR, 0};
        float s;
        if (mxp_quantize_fp8(q->x8, F8, &s, x->data, x->dtype, &per_tensor) != MXP_OK)
            fatal("mxp_quantize_fp8 (input)");
        if (mxp_convert(q->xf, MXP_FLOAT32, q->x8, F8, rows * in) != MXP_OK)
            fatal("mxp_convert (float8 input)");
        matmul_forward(z, q->xf, q->wf, NULL, rows, in, out, threads);
        const float inv_x = 1.0f / s;
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < out; j++)
                z[i * out + j] = z[i * out + j] * (inv_x * q->inv[j]) + bias[j];
        return;
    }
    if (mxp_quantize_mx_ex(q->x8, F8, q->ex, x->data, x->dtype, rows, in, MXP_MX_RCEIL, MXP_QUANT_ONE_PASS) != MXP_OK)
        fatal("mxp_quantize_mx_ex (input)");
    if (mxp_convert(q->xf, MXP_FLOAT32, q->x8, F8, rows * in) != MXP_OK)
        fatal("mxp_convert (float8 input)");
    for (size_t i = 0; i < rows * q->nb; i++) q->xs[i] = ldexpf(1.0f, (int)q->ex[i] - 127);
    matmul_block_scaled(z, q->xf, q->xs, q->wf, q->bscale, rows, in, out, MXP_MX_BLOCK, threads);
    add_bias(z, bias, rows, out);
}

size_t qinfer_weight_bytes(const model *m)
{
    size_t bytes = 0;
    for (int i = 0; i < NLAYERS; i++) {
        const layer *l = &m->L[i];
        for (int k = 0; k < l->nparams; k++)
            bytes += k == 0 && l->q ? qdense_bytes(l->q)
                                    : l->psize[k] * mxp_dtype_size(l->param[k].dtype);
        if (l->op == OP_BATCH_NORM) bytes += 2 * l->out * sizeof(float); /* running stats */
    }
    return bytes;
}
