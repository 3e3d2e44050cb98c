/*
 * fp8.c - float8 training of dense layers with delayed scaling. See fp8.h for the recipe.
 *
 * Every float8 tensor exists twice: as bytes (what a GPU would keep: 1 byte per element) and as
 * their float32 values (exact: every e4m3fn / e5m2 value is a float32), which the plain-C
 * matrix products of matmul.c read. The float32 values are the scaled ones (x * s rounded to
 * float8); the scale inverses are applied once to each result.
 */
#include "fp8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "matmul.h"

const char *const FP8_SCALER_NAMES[FP8_NSCALERS] = {"x", "kernel", "grad"};

struct fp8_dense {
    size_t batch, in, out;
    mxp_fp8_scaler *s[FP8_NSCALERS];
    uint8_t *bytes; /* [max(B*in, in*out, B*out)] float8 bytes of the tensor being quantized */
    float *x8;      /* [B,in]   e4m3fn values of x * s_x, kept for dW */
    float *w8;      /* [in,out] e4m3fn values of w * s_w, kept for dx */
    float *g8;      /* [B,out]  e5m2 values of dz * s_g */
    float inv_x, inv_w; /* the scale inverses x8 and w8 were made with */
};

static void fatal(const char *what)
{
    /* Only a bug (a bad argument) makes these calls fail. */
    fprintf(stderr, "train_mlp: %s failed: %s\n", what, mxp_last_error());
    exit(1);
}

static const mxp_dtype FORMAT[FP8_NSCALERS] = {MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E4M3FN,
                                                MXP_FLOAT8_E5M2};

void fp8_dense_free(struct fp8_dense *f)
{
    if (!f) return;
    for (int k = 0; k < FP8_NSCALERS; k++) mxp_fp8_scaler_free(f->s[k]);
    free(f->bytes);
    free(f->x8);
    free(f->w8);
    free(f->g8);
    free(f);
}

static struct fp8_dense *fp8_dense_new(size_t batch, size_t in, size_t out, uint32_t history)
{
    struct fp8_dense *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    *f = (struct fp8_dense){.batch = batch, .in = in, .out = out, .inv_x = 1.0f, .inv_w = 1.0f};
    size_t nb = batch * in;
    if (in * out > nb) nb = in * out;
    if (batch * out > nb) nb = batch * out;
    f->bytes = malloc(nb);
    f->x8 = malloc(batch * in * sizeof(float));
    f->w8 = malloc(in * out * sizeof(float));
    f->g8 = malloc(batch * out * sizeof(float));
    bool ok = f->bytes && f->x8 && f->w8 && f->g8;
    for (int k = 0; k < FP8_NSCALERS && ok; k++) {
        mxp_fp8_recipe r = mxp_fp8_recipe_default(FORMAT[k]);
        r.history_len = history;
        ok = mxp_fp8_scaler_new(&r, &f->s[k]) == MXP_OK;
    }
    if (!ok) {
        fp8_dense_free(f);
        return NULL;
    }
    return f;
}

int fp8_attach_layer(model *m, layer *l, char *err, size_t cap)
{
    fp8_dense_free(l->fp8);
    l->fp8 = fp8_dense_new(m->batch, l->in, l->out, l->pol.amax_history_len);
    if (!l->fp8) {
        snprintf(err, cap, "layer '%s': cannot create the float8 state: %s", l->path,
                 mxp_last_error());
        return -1;
    }
    return 0;
}

int fp8_attach(model *m, char *err, size_t cap)
{
    int n = 0;
    for (int i = 0; i < NLAYERS; i++) {
        layer *l = &m->L[i];
        if (l->op != OP_DENSE || l->pol.quant != MXP_QUANT_FLOAT8) continue;
        if (fp8_attach_layer(m, l, err, cap) != 0) return -1;
        n++;
    }
    return n;
}

/* q8 <- float8 values of src * s (current scale), as float32; returns the scale inverse used.
 * record: merge this call's amax into the step's amax (training), or leave it as it was. */
static float quantize(struct fp8_dense *f, int which, float *q8, const void *src, mxp_dtype st,
                      size_t n, bool record)
{
    mxp_fp8_scaler *s = f->s[which];
    float inv = mxp_fp8_scaler_scale_inv(s), amax = mxp_fp8_scaler_amax(s);
    if (mxp_fp8_quantize_delayed(f->bytes, src, st, n, s) != MXP_OK)
        fatal("mxp_fp8_quantize_delayed");
    if (!record && mxp_fp8_scaler_set_amax(s, amax) != MXP_OK) fatal("mxp_fp8_scaler_set_amax");
    if (mxp_convert(q8, MXP_FLOAT32, f->bytes, FORMAT[which], n) != MXP_OK)
        fatal("mxp_convert (float8 -> float32)");
    return inv;
}

void fp8_dense_forward(struct fp8_dense *f, float *z, const tbuf *x, const tbuf *w,
                       const float *bias, size_t rows, bool train, int threads)
{
    const size_t in = f->in, out = f->out;
    f->inv_x = quantize(f, FP8_X, f->x8, x->data, x->dtype, rows * in, train);
    f->inv_w = quantize(f, FP8_W, f->w8, w->data, w->dtype, in * out, train);
    matmul_forward(z, f->x8, f->w8, NULL, rows, in, out, threads); /* [rows,out] float32 sums */
    const float d = f->inv_x * f->inv_w;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < out; j++) z[i * out + j] = z[i * out + j] * d + bias[j];
}

void fp8_dense_backward(struct fp8_dense *f, float *dw, float *dx, float *ws_wt, const float *dz,
                        size_t rows, int threads)
{
    const size_t in = f->in, out = f->out;
    const float inv_g = quantize(f, FP8_G, f->g8, dz, MXP_FLOAT32, rows * out, true);
    matmul_weight_grad(dw, f->x8, f->g8, rows, in, out, threads); /* [in,out] */
    const float dw_scale = f->inv_x * inv_g;
    for (size_t i = 0; i < in * out; i++) dw[i] *= dw_scale;
    if (!dx) return;
    transpose(ws_wt, f->w8, in, out);                              /* [out,in] w8^T */
    matmul_forward(dx, f->g8, ws_wt, NULL, rows, out, in, threads); /* [rows,in] */
    const float dx_scale = inv_g * f->inv_w;
    for (size_t i = 0; i < rows * in; i++) dx[i] *= dx_scale;
}

void fp8_step_end(model *m)
{
    for (int i = 0; i < NLAYERS; i++)
        for (int k = 0; m->L[i].fp8 && k < FP8_NSCALERS; k++)
            if (mxp_fp8_scaler_update(m->L[i].fp8->s[k]) != MXP_OK) fatal("mxp_fp8_scaler_update");
}

mxp_fp8_scaler *fp8_scaler(const layer *l, int which)
{
    return l->fp8 && which >= 0 && which < FP8_NSCALERS ? l->fp8->s[which] : NULL;
}

int fp8_set_scaler(layer *l, int which, mxp_fp8_scaler *s, char *err, size_t cap)
{
    if (!l->fp8 || which < 0 || which >= FP8_NSCALERS) {
        snprintf(err, cap, "layer '%s' has no float8 scaler %d", l->path, which);
        return -1;
    }
    if (mxp_fp8_scaler_recipe(s).format != FORMAT[which]) {
        snprintf(err, cap, "layer '%s': the %s scaler must be %s", l->path,
                 FP8_SCALER_NAMES[which], mxp_dtype_name(FORMAT[which]));
        return -1;
    }
    mxp_fp8_scaler_free(l->fp8->s[which]);
    l->fp8->s[which] = s;
    return 0;
}
