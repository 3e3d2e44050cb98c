/*
 * model.c - the layers of Axon's MixedPrecision example MLP, forward and backward, each in the
 * dtypes its policy asks for. See model.h for the shapes and the precision rules.
 *
 * Reading guide: every buffer is a tbuf {data, dtype, n}. Values move between dtypes only
 * through four helpers:
 *   cast(dst, src)        dtype -> dtype with mxp_convert (nothing when the buffers are shared)
 *   widen(src, ws)        a float32 view of a buffer (exact; the buffer itself when float32)
 *   store(dst, f32)       round float32 results into dst's dtype (mxp_convert, nearest-even)
 *   store_grad / cast_grad the same for gradients, counting values that underflow to zero
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "matmul.h"
#include "mnist.h"
#include "qinfer.h"

enum { MAX_FEATURES = 128 }; /* widest layer: batch_norm statistics live in fixed arrays */
static const float BN_EPS = 1e-5f, BN_MOMENTUM = 0.1f, DROP_RATE = 0.5f;

/* ---- small utilities ------------------------------------------------------------------------ */

static void fatal(const char *what, mxp_status s)
{
    /* Conversions between valid floating dtypes cannot fail; if one does it is a bug here. */
    fprintf(stderr, "train_mlp: %s failed: %s: %s\n", what, mxp_status_name(s), mxp_last_error());
    exit(1);
}

static void convert(void *dst, mxp_dtype dt, const void *src, mxp_dtype st, size_t n)
{
    if (n == 0 || (dst == src && dt == st)) return;
    if (dt == st) {
        memcpy(dst, src, n * mxp_dtype_size(dt));
        return;
    }
    mxp_status s = mxp_convert(dst, dt, src, st, n);
    if (s != MXP_OK) fatal("mxp_convert", s);
}

/* dst <- src (first n elements), rounding when dst is narrower. */
static void cast(tbuf *dst, const tbuf *src, size_t n)
{
    convert(dst->data, dst->dtype, src->data, src->dtype, n);
}

/* A float32 view of the first n elements: the buffer itself when it is float32, else ws. */
static float *widen(const tbuf *src, float *ws, size_t n)
{
    if (src->dtype == MXP_FLOAT32) return src->data;
    convert(ws, MXP_FLOAT32, src->data, src->dtype, n);
    return ws;
}

/* dst <- float32 values, rounded to nearest-even into dst's dtype. */
static void store(tbuf *dst, const float *src, size_t n)
{
    convert(dst->data, dst->dtype, src, MXP_FLOAT32, n);
}

/* Count values non-zero in `before` (float32) and zero in `after`. */
static uint64_t count_lost(const float *before, const float *after, size_t n)
{
    uint64_t lost = 0;
    for (size_t i = 0; i < n; i++) lost += (before[i] != 0.0f) & (after[i] == 0.0f);
    return lost;
}

/* store() for a gradient: these values count in the underflow statistics. */
static void store_grad(model *m, tbuf *dst, const float *src, size_t n, underflow_stats *u)
{
    store(dst, src, n);
    if (!u->active) return;
    u->total += n;
    if (dst->dtype != MXP_FLOAT32 && dst->dtype != MXP_FLOAT64)
        u->lost += count_lost(src, widen(dst, m->ws_chk, n), n);
}

/* cast() for a gradient: a narrowing cast can lose more values (already counted in total). */
static void cast_grad(model *m, tbuf *dst, const tbuf *src, size_t n, underflow_stats *u)
{
    cast(dst, src, n);
    if (!u->active || dst->data == src->data) return;
    if (mxp_dtype_size(dst->dtype) < mxp_dtype_size(src->dtype))
        u->lost += count_lost(widen(src, m->ws_chk2, n), widen(dst, m->ws_chk, n), n);
}

/* splitmix64: small, good enough for initialisation, shuffling and dropout masks. */
uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float rng_uniform(uint64_t *s) /* [0, 1) */
{
    return (float)(rng_next(s) >> 40) * 0x1p-24f;
}

/* ---- allocation ------------------------------------------------------------------------------ */

static void *zalloc(model *m, size_t bytes)
{
    if (m->nallocs == m->cap_allocs) {
        size_t cap = m->cap_allocs ? 2 * m->cap_allocs : 64;
        void **a = realloc(m->allocs, cap * sizeof *a);
        if (!a) return NULL;
        m->allocs = a;
        m->cap_allocs = cap;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (p) m->allocs[m->nallocs++] = p;
    return p;
}

/* A new buffer of n elements, or (share != NULL and the same dtype) a view of *share. */
static tbuf buffer(model *m, mxp_dtype dt, size_t n, const tbuf *share, bool *ok)
{
    if (share && share->dtype == dt) return (tbuf){share->data, dt, n};
    tbuf b = {zalloc(m, n * mxp_dtype_size(dt)), dt, n};
    if (!b.data) *ok = false;
    return b;
}

/* ---- the architecture ------------------------------------------------------------------------ */

static const struct {
    const char *path, *op;
    op_kind kind;
    act_kind act;
    size_t in, out;
} ARCH[NLAYERS] = {
    {"dense_0", "dense", OP_DENSE, ACT_RELU, MNIST_PIXELS, 128},
    {"batch_norm_0", "batch_norm", OP_BATCH_NORM, ACT_NONE, 128, 128},
    {"dropout_0", "dropout", OP_DROPOUT, ACT_NONE, 128, 128},
    {"dense_1", "dense", OP_DENSE, ACT_RELU, 128, 64},
    {"batch_norm_1", "batch_norm", OP_BATCH_NORM, ACT_NONE, 64, 64},
    {"dropout_1", "dropout", OP_DROPOUT, ACT_NONE, 64, 64},
    {"dense_2", "dense", OP_DENSE, ACT_SOFTMAX, 64, MNIST_CLASSES},
};

void model_layer_list(mxp_layer out[NLAYERS])
{
    for (int i = 0; i < NLAYERS; i++) out[i] = (mxp_layer){ARCH[i].path, ARCH[i].op};
}

int model_init(model *m, const mxp_policy_map *map, size_t batch, uint64_t seed, int threads,
               char *err, size_t cap)
{
    memset(m, 0, sizeof *m);
    m->batch = batch;
    m->threads = 1; /* the thread pool starts once everything else has succeeded */
    const size_t B = batch;
    bool ok = true;

    /* policies and parameter layout */
    size_t np = 0;
    for (int i = 0; i < NLAYERS; i++) {
        layer *l = &m->L[i];
        snprintf(l->path, sizeof l->path, "%s", ARCH[i].path);
        l->op = ARCH[i].kind;
        l->act = ARCH[i].act;
        l->in = ARCH[i].in;
        l->out = ARCH[i].out;
        mxp_status s = mxp_policy_map_get(map, l->path, &l->pol);
        if (s != MXP_OK) {
            snprintf(err, cap, "policy lookup for layer '%s': %s", l->path, mxp_last_error());
            return -1;
        }
        l->in_dtype = i == 0 ? MXP_FLOAT32 : m->L[i - 1].pol.output;
        l->nparams = l->op == OP_DROPOUT ? 0 : 2;
        l->psize[0] = l->op == OP_DENSE ? l->in * l->out : l->out;
        l->psize[1] = l->out;
        for (int k = 0; k < l->nparams; k++) {
            l->poff[k] = np;
            np += l->psize[k];
        }
    }
    m->nparams = np;
    m->master = zalloc(m, np * sizeof(float));
    m->grad = zalloc(m, np * sizeof(float));
    m->adam_m = zalloc(m, np * sizeof(float));
    m->adam_v = zalloc(m, np * sizeof(float));
    const size_t wmax = (size_t)MNIST_PIXELS * 128, xmax = B * MNIST_PIXELS, ymax = B * 128;
    m->ws_x = zalloc(m, xmax * sizeof(float));
    m->ws_y = zalloc(m, ymax * sizeof(float));
    m->ws_g = zalloc(m, ymax * sizeof(float));
    m->ws_wt = zalloc(m, wmax * sizeof(float));
    m->ws_w = zalloc(m, wmax * sizeof(float));
    m->ws_chk = zalloc(m, (xmax > wmax ? xmax : wmax) * sizeof(float));
    m->ws_chk2 = zalloc(m, (xmax > wmax ? xmax : wmax) * sizeof(float));
    m->input = (tbuf){zalloc(m, xmax * sizeof(float)), MXP_FLOAT32, xmax};
    ok = m->master && m->grad && m->adam_m && m->adam_v && m->ws_x && m->ws_y && m->ws_g &&
         m->ws_wt && m->ws_w && m->ws_chk && m->ws_chk2 && m->input.data;

    /* buffers, layer by layer; `buffer(..., share)` shares memory when the dtypes agree */
    for (int i = 0; i < NLAYERS && ok; i++) {
        layer *l = &m->L[i];
        const mxp_dtype p = l->pol.param, c = l->pol.compute, o = l->pol.output;
        const tbuf *prev_y = i == 0 ? &m->input : &m->L[i - 1].y;
        for (int k = 0; k < l->nparams; k++) {
            size_t n = l->psize[k];
            tbuf master = {m->master + l->poff[k], MXP_FLOAT32, n};
            tbuf grad = {m->grad + l->poff[k], MXP_FLOAT32, n};
            l->param[k] = buffer(m, p, n, &master, &ok);
            l->param_c[k] = buffer(m, c, n, &l->param[k], &ok);
            l->param_f[k] = buffer(m, MXP_FLOAT32, n, &l->param_c[k], &ok).data;
            l->grad_p[k] = buffer(m, p, n, &grad, &ok);
            l->grad_c[k] = buffer(m, c, n, &l->grad_p[k], &ok);
        }
        l->x_c = buffer(m, c, B * l->in, prev_y, &ok);
        if (l->op != OP_DROPOUT) l->act_c = buffer(m, c, B * l->out, NULL, &ok);
        if (l->op == OP_DENSE && l->act != ACT_SOFTMAX) l->out_c = l->act_c;
        else l->out_c = buffer(m, c, B * l->out, NULL, &ok);
        l->y = buffer(m, o, B * l->out, &l->out_c, &ok);
        if (l->op == OP_DROPOUT) {
            l->mask = zalloc(m, B * l->out);
            ok = ok && l->mask;
        }
        if (l->op == OP_BATCH_NORM) {
            l->bn_inv_std = zalloc(m, l->out * sizeof(float));
            l->bn_run_mean = zalloc(m, l->out * sizeof(float));
            l->bn_run_var = zalloc(m, l->out * sizeof(float));
            l->bn_batch_mean = zalloc(m, l->out * sizeof(float));
            l->bn_batch_var = zalloc(m, l->out * sizeof(float));
            ok = ok && l->bn_inv_std && l->bn_run_mean && l->bn_run_var && l->bn_batch_mean &&
                 l->bn_batch_var;
        }
        /* what the backward pass needs from this layer's forward pass, per batch of B rows */
        size_t cs = mxp_dtype_size(c);
        if (l->op == OP_DENSE) m->activation_bytes += B * (l->in + l->out) * cs; /* x_c, act_c */
        if (l->op == OP_BATCH_NORM) m->activation_bytes += B * l->out * cs + l->out * sizeof(float);
        if (l->op == OP_DROPOUT) m->activation_bytes += B * l->out; /* mask */
        l->dz_c = buffer(m, c, B * l->out, NULL, &ok);
        if (i > 0) {
            l->dx_c = buffer(m, c, B * l->in, NULL, &ok);
            l->dx = buffer(m, l->in_dtype, B * l->in, &l->dx_c, &ok);
        }
    }
    if (!ok) {
        model_free(m);
        snprintf(err, cap, "out of memory allocating the model for batch %zu", B);
        return -1;
    }

    if (threads > 1) m->threads = matmul_threads_start(threads);

    /* initial weights: Glorot uniform kernels, zero biases (Axon's defaults), gamma 1, beta 0 */
    uint64_t rng = seed ^ 0x5EEDC0DEull;
    for (int i = 0; i < NLAYERS; i++) {
        layer *l = &m->L[i];
        if (l->op == OP_DENSE) {
            float limit = sqrtf(6.0f / (float)(l->in + l->out));
            float *w = m->master + l->poff[0];
            for (size_t j = 0; j < l->psize[0]; j++) w[j] = (2.0f * rng_uniform(&rng) - 1.0f) * limit;
        } else if (l->op == OP_BATCH_NORM) {
            float *gamma = m->master + l->poff[0];
            for (size_t j = 0; j < l->psize[0]; j++) gamma[j] = 1.0f;
            for (size_t j = 0; j < l->out; j++) l->bn_run_var[j] = 1.0f;
        }
        for (int k = 0; k < l->nparams; k++) /* master -> param dtype */
            convert(l->param[k].data, l->param[k].dtype, m->master + l->poff[k], MXP_FLOAT32,
                    l->psize[k]);
    }
    return 0;
}

void model_free(model *m)
{
    if (!m) return;
    if (m->threads > 1) matmul_threads_stop();
    for (int i = 0; i < NLAYERS; i++) {
        fp8_dense_free(m->L[i].fp8);
        qdense_free(m->L[i].q);
    }
    for (size_t i = 0; i < m->nallocs; i++) free(m->allocs[i]);
    free(m->allocs);
    memset(m, 0, sizeof *m);
}

void model_set_input(model *m, const uint8_t *images, const size_t *idx, size_t rows)
{
    float *x = m->input.data; /* [rows,784] */
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *img = images + (idx ? idx[r] : r) * MNIST_PIXELS;
        for (size_t j = 0; j < MNIST_PIXELS; j++)
            x[r * MNIST_PIXELS + j] = (float)img[j] * (1.0f / 255.0f);
    }
}

/* ---- forward --------------------------------------------------------------------------------- */

/* Parameters in the param dtype -> compute dtype -> float32 view for the kernels. */
static void params_to_compute(layer *l)
{
    for (int k = 0; k < l->nparams; k++) {
        if (k == 0 && l->q) continue; /* a quantized kernel is read by qinfer.c as it is */
        cast(&l->param_c[k], &l->param[k], l->psize[k]);
        convert(l->param_f[k], MXP_FLOAT32, l->param_c[k].data, l->param_c[k].dtype, l->psize[k]);
    }
}

static void dense_forward(model *m, layer *l, const tbuf *in, size_t rows, bool train)
{
    const size_t nin = rows * l->in, nout = rows * l->out;
    cast(&l->x_c, in, nin);                             /* [rows,in] input in compute dtype */
    float *z = m->ws_y;                                 /* [rows,out] float32 accumulators */
    if (l->q) {                                         /* quantized kernel (qinfer.c) */
        qdense_forward(l->q, z, &l->x_c, l->param_f[1], rows, m->threads);
    } else if (l->fp8) {                                /* float8 training (fp8.c) */
        fp8_dense_forward(l->fp8, z, &l->x_c, &l->param_c[0], l->param_f[1], rows, train,
                          m->threads);
    } else {
        const float *x = widen(&l->x_c, m->ws_x, nin);  /* [rows,in] float32 view */
        matmul_forward(z, x, l->param_f[0], l->param_f[1], rows, l->in, l->out, m->threads);
    }
    if (l->act == ACT_RELU)
        for (size_t i = 0; i < nout; i++) z[i] = z[i] > 0.0f ? z[i] : 0.0f;
    store(&l->act_c, z, nout);                          /* [rows,out] rounded: relu(z) or logits */
    if (l->act == ACT_SOFTMAX) {
        const float *logit = widen(&l->act_c, m->ws_y, nout); /* [rows,out] rounded logits */
        float *prob = m->ws_g;                                /* [rows,out] float32 softmax */
        for (size_t i = 0; i < rows; i++) {
            const float *zi = logit + i * l->out;
            float *pi = prob + i * l->out, mx = zi[0], sum = 0.0f;
            for (size_t j = 1; j < l->out; j++) mx = zi[j] > mx ? zi[j] : mx;
            for (size_t j = 0; j < l->out; j++) sum += pi[j] = expf(zi[j] - mx);
            for (size_t j = 0; j < l->out; j++) pi[j] /= sum;
        }
        store(&l->out_c, prob, nout);                   /* [rows,out] probabilities, compute */
    }
    cast(&l->y, &l->out_c, nout);                       /* [rows,out] output dtype */
}

static void batch_norm_forward(model *m, layer *l, const tbuf *in, size_t rows, bool train)
{
    const size_t C = l->out, n = rows * C;
    float mean[MAX_FEATURES], var[MAX_FEATURES];
    cast(&l->x_c, in, n);
    const float *x = widen(&l->x_c, m->ws_x, n);        /* [rows,C] */
    if (train) {                                        /* batch statistics, float32 */
        for (size_t j = 0; j < C; j++) mean[j] = var[j] = 0.0f;
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < C; j++) mean[j] += x[i * C + j];
        for (size_t j = 0; j < C; j++) mean[j] /= (float)rows;
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < C; j++) {
                float d = x[i * C + j] - mean[j];
                var[j] += d * d;
            }
        for (size_t j = 0; j < C; j++) {
            var[j] /= (float)rows;
            l->bn_batch_mean[j] = mean[j];
            l->bn_batch_var[j] = rows > 1 ? var[j] * (float)rows / (float)(rows - 1) : var[j];
            l->bn_inv_std[j] = 1.0f / sqrtf(var[j] + BN_EPS);
        }
        if (!m->bn_defer) model_bn_update_running(l, l->bn_batch_mean, l->bn_batch_var);
    } else {                                            /* running statistics */
        for (size_t j = 0; j < C; j++) {
            mean[j] = l->bn_run_mean[j];
            l->bn_inv_std[j] = 1.0f / sqrtf(l->bn_run_var[j] + BN_EPS);
        }
    }
    float *xh = m->ws_y;                                /* [rows,C] x_hat, float32 */
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < C; j++) xh[i * C + j] = (x[i * C + j] - mean[j]) * l->bn_inv_std[j];
    store(&l->act_c, xh, n);                            /* [rows,C] x_hat kept, compute dtype */
    xh = widen(&l->act_c, m->ws_y, n);                  /* the rounded x_hat */
    const float *gamma = l->param_f[0], *beta = l->param_f[1];
    float *y = m->ws_g;                                 /* [rows,C] gamma * x_hat + beta */
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < C; j++) y[i * C + j] = gamma[j] * xh[i * C + j] + beta[j];
    store(&l->out_c, y, n);
    cast(&l->y, &l->out_c, n);
}

void model_bn_update_running(layer *l, const float *mean, const float *unbiased_var)
{
    for (size_t j = 0; j < l->out; j++) {
        l->bn_run_mean[j] += BN_MOMENTUM * (mean[j] - l->bn_run_mean[j]);
        l->bn_run_var[j] += BN_MOMENTUM * (unbiased_var[j] - l->bn_run_var[j]);
    }
}

/* splitmix64 adds this to its state on every call: word w of a stream that starts at state s
 * is rng_next() of s + w * GOLDEN, so any word can be drawn directly. */
static const uint64_t GOLDEN = 0x9E3779B97F4A7C15ull;

static uint64_t rng_word(uint64_t s, uint64_t w)
{
    s += w * GOLDEN;
    return rng_next(&s);
}

/* Training: element e = row * C + feature of the whole batch keeps its value when bit e % 64
 * of word e / 64 of the stream *rng is set; rows [row0, row0 + rows) are computed here. The
 * stream then moves past the words of all total_rows rows. */
static void dropout_forward(model *m, layer *l, const tbuf *in, size_t rows, bool train,
                            uint64_t *rng, size_t row0, size_t total_rows)
{
    const size_t n = rows * l->out;
    cast(&l->x_c, in, n);
    const float *x = widen(&l->x_c, m->ws_x, n);        /* [rows,C] */
    float *y = m->ws_y;                                 /* [rows,C] */
    if (train) {                                        /* inverted dropout: keep * 1/(1-rate) */
        const float keep_scale = 1.0f / (1.0f - DROP_RATE);
        const size_t e0 = row0 * l->out;
        uint64_t bits = 0;
        for (size_t i = 0; i < n; i++) {
            size_t e = e0 + i;
            if (i == 0 || e % 64 == 0) bits = rng_word(*rng, e / 64);
            l->mask[i] = (uint8_t)((bits >> (e % 64)) & 1u); /* rate 0.5: one random bit each */
            y[i] = l->mask[i] ? x[i] * keep_scale : 0.0f;
        }
        *rng += (uint64_t)((total_rows * l->out + 63) / 64) * GOLDEN;
    } else {
        memcpy(y, x, n * sizeof *y);
    }
    store(&l->out_c, y, n);
    cast(&l->y, &l->out_c, n);
}

uint64_t model_forward_part(model *m, size_t rows, bool train, uint64_t rng, size_t row0,
                            size_t total_rows)
{
    const tbuf *in = &m->input;
    for (int i = 0; i < NLAYERS; i++) {
        layer *l = &m->L[i];
        params_to_compute(l);
        switch (l->op) {
        case OP_DENSE: dense_forward(m, l, in, rows, train); break;
        case OP_BATCH_NORM: batch_norm_forward(m, l, in, rows, train); break;
        case OP_DROPOUT: dropout_forward(m, l, in, rows, train, &rng, row0, total_rows); break;
        }
        in = &l->y;
    }
    return rng;
}

void model_forward(model *m, size_t rows, bool train, uint64_t *rng)
{
    uint64_t next = model_forward_part(m, rows, train, rng ? *rng : 0, 0, rows);
    if (rng) *rng = next;
}

/* ---- loss ------------------------------------------------------------------------------------ */

float model_loss(model *m, const uint8_t *labels, size_t rows, float scale, float *dlogits)
{
    layer *l = &m->L[NLAYERS - 1];
    const size_t K = l->out;
    const float *z = widen(&l->act_c, m->ws_chk, rows * K); /* [rows,10] logits */
    float total = 0.0f;
    /* Cross-entropy in float32 from the logits (log-softmax), like Keras' float32 loss. Its
     * gradient with respect to the logits is softmax - onehot: softmax and cross-entropy are
     * differentiated together, as every framework does. */
    for (size_t i = 0; i < rows; i++) {
        const float *zi = z + i * K;
        float mx = zi[0], sum = 0.0f;
        for (size_t j = 1; j < K; j++) mx = zi[j] > mx ? zi[j] : mx;
        for (size_t j = 0; j < K; j++) sum += expf(zi[j] - mx);
        float lse = mx + logf(sum);
        total += lse - zi[labels[i]];
        if (dlogits) {
            float g = scale / (float)rows;
            for (size_t j = 0; j < K; j++)
                dlogits[i * K + j] = (expf(zi[j] - lse) - (j == labels[i] ? 1.0f : 0.0f)) * g;
        }
    }
    return total / (float)rows;
}

size_t model_correct(const model *m, const uint8_t *labels, size_t rows)
{
    const layer *l = &m->L[NLAYERS - 1];
    const float *p = widen(&l->y, m->ws_chk, rows * l->out); /* [rows,10] probabilities */
    size_t correct = 0;
    for (size_t i = 0; i < rows; i++) {
        size_t best = 0;
        for (size_t j = 1; j < l->out; j++)
            if (p[i * l->out + j] > p[i * l->out + best]) best = j;
        correct += best == labels[i];
    }
    return correct;
}

/* ---- backward -------------------------------------------------------------------------------- */

/* Parameter gradient k of layer l: float32 sums -> compute dtype -> param dtype (each step a
 * no-op when the dtypes agree). It stays scaled, in the param dtype: model_unscale_grads takes
 * it into the float32 master gradient. */
static void param_grad(model *m, layer *l, int k, const float *g, underflow_stats *u)
{
    size_t n = l->psize[k];
    store_grad(m, &l->grad_c[k], g, n, u);
    cast_grad(m, &l->grad_p[k], &l->grad_c[k], n, u);
}

/*
 * The scaled param-dtype gradients (float16 with a float16 param policy) become float32 master
 * gradients divided by the scale in one fused pass, which also says whether they are all
 * finite. Never divide inside float16: the scale lifted small gradients out of float16's
 * underflow range, and unscaling in float16 would flush them to zero again. With float32
 * params grad_p is m->grad itself and the pass runs in place.
 */
bool model_unscale_grads(model *m, float scale)
{
    bool finite = true;
    for (int i = 0; i < NLAYERS; i++) { /* every parameter, also after a non-finite one */
        const layer *l = &m->L[i];
        for (int k = 0; k < l->nparams; k++) {
            const tbuf *g = &l->grad_p[k];
            float *master = m->grad + l->poff[k];
            bool ok = false;
            mxp_status s;
            if (g->dtype == MXP_FLOAT64) { /* a float64 param policy: float64 product in place */
                s = mxp_unscale_check_s(g->data, MXP_FLOAT64, l->psize[k], scale, &ok);
                convert(master, MXP_FLOAT32, g->data, MXP_FLOAT64, l->psize[k]);
                ok = ok && mxp_all_finite(master, MXP_FLOAT32, l->psize[k]);
            } else {
                s = mxp_unscale_check_into_s(master, MXP_FLOAT32, g->data, g->dtype, l->psize[k],
                                             scale, &ok);
            }
            if (s != MXP_OK) fatal("unscaling the gradients", s); /* a bug here, not overflow */
            finite = finite && ok;
        }
    }
    return finite;
}

void model_scaled_grads(const model *m, float *out)
{
    for (int i = 0; i < NLAYERS; i++) {
        const layer *l = &m->L[i];
        for (int k = 0; k < l->nparams; k++)
            convert(out + l->poff[k], MXP_FLOAT32, l->grad_p[k].data, l->grad_p[k].dtype,
                    l->psize[k]);
    }
}

/* The incoming gradient in the compute dtype: dy itself when it already has that dtype. */
static tbuf grad_in_compute(model *m, layer *l, const tbuf *dy, size_t n, underflow_stats *u)
{
    if (dy->dtype == l->dz_c.dtype) return (tbuf){dy->data, dy->dtype, n};
    cast_grad(m, &l->dz_c, dy, n, u);
    return l->dz_c;
}

/* dx_c <- float32 input gradient (rounded), then dx <- dx_c in the input's dtype. */
static void input_grad(model *m, layer *l, const float *dxf, size_t n, underflow_stats *u)
{
    store_grad(m, &l->dx_c, dxf, n, u);
    cast_grad(m, &l->dx, &l->dx_c, n, u);
}

static void dense_backward(model *m, layer *l, bool first, const tbuf *dy, const float *dlogits,
                           size_t rows, underflow_stats *u)
{
    const size_t nin = rows * l->in, nout = rows * l->out;
    float *dz;                                          /* [rows,out] float32 view */
    if (l->act == ACT_SOFTMAX) {
        store_grad(m, &l->dz_c, dlogits, nout, u);      /* scaled dlogits, compute dtype */
        dz = widen(&l->dz_c, m->ws_g, nout);
    } else {
        tbuf dzc = grad_in_compute(m, l, dy, nout, u);
        dz = widen(&dzc, m->ws_g, nout);
        const float *a = widen(&l->act_c, m->ws_y, nout); /* relu output: > 0 where active */
        for (size_t i = 0; i < nout; i++) dz[i] = a[i] > 0.0f ? dz[i] : 0.0f;
    }
    if (l->fp8) {                                       /* float8 products (fp8.c) */
        fp8_dense_backward(l->fp8, m->ws_w, first ? NULL : m->ws_x, m->ws_wt, dz, rows,
                           m->threads);                 /* dW [in,out], dx [rows,in] */
    } else {
        const float *x = widen(&l->x_c, m->ws_x, nin);  /* [rows,in] saved input */
        matmul_weight_grad(m->ws_w, x, dz, rows, l->in, l->out, m->threads); /* [in,out] */
    }
    param_grad(m, l, 0, m->ws_w, u);
    float db[MAX_FEATURES] = {0};                       /* [out] */
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < l->out; j++) db[j] += dz[i * l->out + j];
    param_grad(m, l, 1, db, u);
    if (first) return;                                  /* nobody needs d(input) */
    if (!l->fp8) {
        transpose(m->ws_wt, l->param_f[0], l->in, l->out); /* [out,in] w^T */
        matmul_forward(m->ws_x, dz, m->ws_wt, NULL, rows, l->out, l->in,
                       m->threads); /* [rows,in] */
    }
    input_grad(m, l, m->ws_x, nin, u);
}

static void batch_norm_backward(model *m, layer *l, const tbuf *dy, size_t rows,
                                underflow_stats *u)
{
    const size_t C = l->out, n = rows * C;
    tbuf dyc = grad_in_compute(m, l, dy, n, u);
    const float *g = widen(&dyc, m->ws_g, n);           /* [rows,C] */
    const float *xh = widen(&l->act_c, m->ws_y, n);     /* [rows,C] saved x_hat */
    float dgamma[MAX_FEATURES] = {0}, dbeta[MAX_FEATURES] = {0};
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < C; j++) {
            dgamma[j] += g[i * C + j] * xh[i * C + j];
            dbeta[j] += g[i * C + j];
        }
    param_grad(m, l, 0, dgamma, u);
    param_grad(m, l, 1, dbeta, u);
    /* dx = gamma * inv_std / N * (N * dy - sum(dy) - x_hat * sum(dy * x_hat)) */
    const float *gamma = l->param_f[0];
    const float N = (float)rows;
    float *dx = m->ws_x;                                /* [rows,C] */
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < C; j++)
            dx[i * C + j] = gamma[j] * l->bn_inv_std[j] / N *
                            (N * g[i * C + j] - dbeta[j] - xh[i * C + j] * dgamma[j]);
    input_grad(m, l, dx, n, u);
}

static void dropout_backward(model *m, layer *l, const tbuf *dy, size_t rows, underflow_stats *u)
{
    const size_t n = rows * l->out;
    const float keep_scale = 1.0f / (1.0f - DROP_RATE);
    tbuf dyc = grad_in_compute(m, l, dy, n, u);
    const float *g = widen(&dyc, m->ws_g, n);           /* [rows,C] */
    float *dx = m->ws_x;                                /* [rows,C] */
    for (size_t i = 0; i < n; i++) dx[i] = l->mask[i] ? g[i] * keep_scale : 0.0f;
    input_grad(m, l, dx, n, u);
}

void model_backward(model *m, const float *dlogits, size_t rows, underflow_stats *u)
{
    const tbuf *dy = NULL; /* gradient w.r.t. the current layer's output, in its output dtype */
    for (int i = NLAYERS - 1; i >= 0; i--) {
        layer *l = &m->L[i];
        switch (l->op) {
        case OP_DENSE: dense_backward(m, l, i == 0, dy, dlogits, rows, u); break;
        case OP_BATCH_NORM: batch_norm_backward(m, l, dy, rows, u); break;
        case OP_DROPOUT: dropout_backward(m, l, dy, rows, u); break;
        }
        dy = &l->dx;
    }
}

/* ---- optimizer ------------------------------------------------------------------------------- */

void model_adam_step(model *m, float lr)
{
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f; /* Axon's (Optax's) Adam defaults */
    m->adam_t++;
    const float c1 = 1.0f - powf(b1, (float)m->adam_t), c2 = 1.0f - powf(b2, (float)m->adam_t);
    for (size_t i = 0; i < m->nparams; i++) {
        float g = m->grad[i];
        m->adam_m[i] = b1 * m->adam_m[i] + (1.0f - b1) * g;
        m->adam_v[i] = b2 * m->adam_v[i] + (1.0f - b2) * g * g;
        float mhat = m->adam_m[i] / c1, vhat = m->adam_v[i] / c2;
        m->master[i] -= lr * mhat / (sqrtf(vhat) + eps);
    }
    model_sync_params(m);
}

void model_sync_params(model *m)
{
    for (int i = 0; i < NLAYERS; i++) { /* the model reads its parameters in the param dtype */
        layer *l = &m->L[i];
        for (int k = 0; k < l->nparams; k++)
            convert(l->param[k].data, l->param[k].dtype, m->master + l->poff[k], MXP_FLOAT32,
                    l->psize[k]);
    }
}
