/*
 * ckpt.c - train_mlp checkpoints (see ckpt.h for the tensors and metadata), written and read
 * with tools/safetensors.h, the library the `mixprec` tool is built on. Tensor data is in the
 * host's byte order, which safetensors defines as little-endian: like the tool, this assumes a
 * little-endian host.
 */
#include "ckpt.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp8.h"
#include "matmul.h"
#include "qinfer.h"

int ckpt_check_writable(const char *path, char *err, size_t cap)
{
    /* the writer creates its temporary file in path's directory: probe that directory */
    char probe[4096];
    const char *slash = strrchr(path, '/');
    int dlen = slash ? (int)(slash - path) + 1 : 0;
    int len = snprintf(probe, sizeof probe, "%.*s.train_mlp-probe-XXXXXX", dlen, path);
    if (len < 0 || len >= (int)sizeof probe) {
        snprintf(err, cap, "cannot write checkpoint %s: path too long", path);
        return -1;
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, cap, "cannot write checkpoint %s: %s", path, strerror(EISDIR));
        return -1;
    }
    int fd = mkstemp(probe);
    if (fd < 0) {
        snprintf(err, cap, "cannot write checkpoint %s: %s", path, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

#ifndef TRAIN_MLP_CHECKPOINTS

const bool CKPT_SUPPORTED = false;
struct ckpt {
    int unused;
};
static const char NO_SUPPORT[] = "this train_mlp was built without checkpoint support (the "
                                 "safetensors library needs jansson: apt-get install "
                                 "libjansson-dev, then rebuild)";
int ckpt_save(const char *path, const model *m, const ckpt_info *info, char *err, size_t cap)
{
    (void)path, (void)m, (void)info;
    snprintf(err, cap, "%s", NO_SUPPORT);
    return -1;
}
int ckpt_open(const char *path, ckpt **out, char *err, size_t cap)
{
    (void)path, (void)out;
    snprintf(err, cap, "%s", NO_SUPPORT);
    return -1;
}
void ckpt_close(ckpt *c) { (void)c; }
const char *ckpt_meta(const ckpt *c, const char *key) { (void)c, (void)key; return NULL; }
bool ckpt_layer_quantized(const ckpt *c, const char *path) { (void)c, (void)path; return false; }
int ckpt_load(const ckpt *c, model *m, char *err, size_t cap)
{
    (void)c, (void)m;
    snprintf(err, cap, "%s", NO_SUPPORT);
    return -1;
}

#else /* TRAIN_MLP_CHECKPOINTS */

#include "safetensors.h"

const bool CKPT_SUPPORTED = true;

struct ckpt {
    mxst_file *f;
    char *path;
};

/* The parameter names of each op, in the order of the model's parameters (then state). */
static const char *const DENSE_NAMES[] = {"weight", "bias"};
static const char *const BN_NAMES[] = {"gamma", "beta", "moving_mean", "moving_variance"};

/* ---- saving ------------------------------------------------------------------------------- */

enum { MAX_TENSORS = 4 * NLAYERS, MAX_META = 64 };

int ckpt_save(const char *path, const model *m, const ckpt_info *info, char *err, size_t cap)
{
    char names[MAX_TENSORS][64];
    uint64_t shapes[MAX_TENSORS][2];
    mxst_spec spec[MAX_TENSORS];
    const float *data[MAX_TENSORS];
    float *owned[NLAYERS] = {0}; /* transposed dense kernels */
    size_t n = 0;
    int rc = -1;

    for (int i = 0; i < NLAYERS; i++) {
        const layer *l = &m->L[i];
        if (l->op == OP_DROPOUT) continue;
        int k_count = l->op == OP_DENSE ? 2 : 4;
        for (int k = 0; k < k_count; k++) {
            snprintf(names[n], sizeof names[n], "%s/%s", l->path,
                     l->op == OP_DENSE ? DENSE_NAMES[k] : BN_NAMES[k]);
            spec[n] = (mxst_spec){names[n], MXST_F32, 1, shapes[n]};
            shapes[n][0] = l->out;
            if (l->op == OP_DENSE && k == 0) { /* master [in,out] -> weight [out,in] */
                owned[i] = malloc(l->in * l->out * sizeof(float));
                if (!owned[i]) {
                    snprintf(err, cap, "%s: out of memory", path);
                    goto done;
                }
                transpose(owned[i], m->master + l->poff[0], l->in, l->out);
                spec[n].ndim = 2;
                shapes[n][1] = l->in;
                data[n] = owned[i];
            } else if (k < 2) {
                data[n] = m->master + l->poff[k];
            } else {
                data[n] = k == 2 ? l->bn_run_mean : l->bn_run_var;
            }
            n++;
        }
    }

    /* metadata: keys and values alternate */
    const char *kv[2 * MAX_META];
    char *texts[MAX_META] = {0};
    size_t npairs = 0, ntexts = 0;
    char acc[32], epochs[32], seed[32], images[32], ls[MXP_LOSS_SCALE_TEXT_MAX];
    char fp8_keys[NLAYERS * FP8_NSCALERS][64];
    size_t map_len = 0;
    mxp_policy_map_format(info->map, NULL, 0, &map_len);
    char *map_text = malloc(map_len + 1);
    if (!map_text || mxp_policy_map_format(info->map, map_text, map_len + 1, NULL) != MXP_OK) {
        snprintf(err, cap, "%s: cannot format the policy map: %s", path, mxp_last_error());
        free(map_text);
        goto done;
    }
    texts[ntexts++] = map_text;
    snprintf(acc, sizeof acc, "%.4f", info->test_accuracy);
    snprintf(epochs, sizeof epochs, "%d", info->epochs);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)info->seed);
    snprintf(images, sizeof images, "%zu", info->train_images);
    mxp_loss_scale_save(&info->loss_scale, ls, sizeof ls);
#define META(k, v) (kv[2 * npairs] = (k), kv[2 * npairs + 1] = (v), npairs++)
    META("mixprec.model", "train_mlp 784-128(bn,dropout)-64(bn,dropout)-10");
    META("mixprec.policy_map", map_text);
    META("mixprec.loss_scale", ls);
    META("mixprec.test_accuracy", acc);
    META("mixprec.epochs", epochs);
    META("mixprec.seed", seed);
    META("mixprec.train_images", images);
    for (int i = 0; i < NLAYERS; i++)
        for (int k = 0; k < FP8_NSCALERS; k++) {
            const mxp_fp8_scaler *s = fp8_scaler(&m->L[i], k);
            if (!s) continue;
            int len = mxp_fp8_scaler_save(s, NULL, 0);
            char *t = len >= 0 ? malloc((size_t)len + 1) : NULL;
            if (!t) {
                snprintf(err, cap, "%s: cannot save the float8 state of %s", path, m->L[i].path);
                goto free_meta;
            }
            mxp_fp8_scaler_save(s, t, (size_t)len + 1);
            texts[ntexts++] = t;
            char *key = fp8_keys[i * FP8_NSCALERS + k];
            snprintf(key, sizeof fp8_keys[0], "mixprec.fp8.%s.%s", m->L[i].path,
                     FP8_SCALER_NAMES[k]);
            META(key, t);
        }
#undef META

    mxst_writer *w = NULL;
    if (mxst_writer_begin(path, spec, n, kv, npairs, MXST_OVERWRITE, &w) != MXP_OK) {
        snprintf(err, cap, "cannot write checkpoint %s: %s", path, mxst_last_error());
        goto free_meta;
    }
    for (size_t i = 0; i < mxst_writer_count(w); i++) {
        size_t t = mxst_writer_order(w, i);
        if (mxst_writer_write(w, data[t], (size_t)mxst_writer_nbytes(w, t)) != MXP_OK) {
            snprintf(err, cap, "cannot write checkpoint %s: %s", path, mxst_last_error());
            mxst_writer_abort(w);
            goto free_meta;
        }
    }
    if (mxst_writer_commit(w) != MXP_OK) {
        snprintf(err, cap, "cannot write checkpoint %s: %s", path, mxst_last_error());
        goto free_meta;
    }
    rc = 0;
free_meta:
    for (size_t i = 0; i < ntexts; i++) free(texts[i]);
done:
    for (int i = 0; i < NLAYERS; i++) free(owned[i]);
    return rc;
}

/* ---- opening ------------------------------------------------------------------------------ */

/* Is `name` a tensor this model can have? (layer path + parameter, or a dense weight's _scale) */
static bool known_name(const char *name)
{
    mxp_layer layers[NLAYERS];
    model_layer_list(layers);
    char buf[96];
    for (int i = 0; i < NLAYERS; i++) {
        bool dense = strcmp(layers[i].op, "dense") == 0;
        bool bn = strcmp(layers[i].op, "batch_norm") == 0;
        size_t k_count = dense ? 2 : bn ? 4 : 0;
        for (size_t k = 0; k < k_count; k++) {
            snprintf(buf, sizeof buf, "%s/%s", layers[i].path,
                     dense ? DENSE_NAMES[k] : BN_NAMES[k]);
            if (strcmp(name, buf) == 0) return true;
        }
        for (int k = 0; dense && k < 2; k++) { /* a quantized weight's scales, int4's shape */
            snprintf(buf, sizeof buf, "%s/weight_%s", layers[i].path, k ? "shape" : "scale");
            if (strcmp(name, buf) == 0) return true;
        }
    }
    return false;
}

int ckpt_open(const char *path, ckpt **out, char *err, size_t cap)
{
    mxst_file *f = NULL;
    if (mxst_open(path, false, &f) != MXP_OK) {
        snprintf(err, cap, "cannot read checkpoint: %s", mxst_last_error());
        return -1;
    }
    for (size_t i = 0; i < mxst_count(f); i++) {
        const mxst_tensor *t = mxst_tensor_at(f, i);
        if (!known_name(t->name)) {
            snprintf(err, cap, "%s: tensor '%s' is not part of this model (is it a train_mlp "
                     "checkpoint?)", path, t->name);
            mxst_close(f);
            return -1;
        }
    }
    ckpt *c = calloc(1, sizeof *c);
    char *p = malloc(strlen(path) + 1);
    if (!c || !p) {
        snprintf(err, cap, "%s: out of memory", path);
        free(c);
        free(p);
        mxst_close(f);
        return -1;
    }
    strcpy(p, path);
    c->f = f;
    c->path = p;
    *out = c;
    return 0;
}

void ckpt_close(ckpt *c)
{
    if (!c) return;
    mxst_close(c->f);
    free(c->path);
    free(c);
}

const char *ckpt_meta(const ckpt *c, const char *key) { return mxst_metadata_get(c->f, key); }

bool ckpt_layer_quantized(const ckpt *c, const char *path)
{
    char name[96];
    snprintf(name, sizeof name, "%s/weight_scale", path);
    return mxst_find(c->f, name) != NULL;
}

/* ---- loading ------------------------------------------------------------------------------ */

/* Shape check: the tensor is [d0] (nd 1) or [d0,d1] (nd 2). */
static bool has_shape(const mxst_tensor *t, size_t nd, uint64_t d0, uint64_t d1)
{
    return t->ndim == nd && t->shape[0] == d0 && (nd == 1 || t->shape[1] == d1);
}

static const char *shape_text(const mxst_tensor *t, char *buf, size_t cap)
{
    int len = snprintf(buf, cap, "[");
    for (size_t i = 0; i < t->ndim && len > 0 && (size_t)len < cap; i++)
        len += snprintf(buf + len, cap - (size_t)len, "%s%llu", i ? "," : "",
                        (unsigned long long)t->shape[i]);
    if (len > 0 && (size_t)len < cap) snprintf(buf + len, cap - (size_t)len, "]");
    return buf;
}

/* Read a whole tensor into a new buffer (NULL and a message on failure). */
static void *read_all(const ckpt *c, const mxst_tensor *t, char *err, size_t cap)
{
    void *buf = malloc(t->nbytes ? (size_t)t->nbytes : 1);
    if (!buf) {
        snprintf(err, cap, "%s: out of memory reading '%s'", c->path, t->name);
        return NULL;
    }
    if (mxst_read(c->f, t, 0, buf, (size_t)t->nbytes) != MXP_OK) {
        snprintf(err, cap, "cannot read checkpoint: %s", mxst_last_error());
        free(buf);
        return NULL;
    }
    return buf;
}

/* A floating tensor of n elements with the expected shape -> float32 dst (finite values only). */
static int load_float(const ckpt *c, const char *name, size_t nd, uint64_t d0, uint64_t d1,
                      float *dst, char *err, size_t cap)
{
    const mxst_tensor *t = mxst_find(c->f, name);
    mxp_dtype dt;
    char sh[64];
    if (!t) {
        snprintf(err, cap, "%s: tensor '%s' is missing", c->path, name);
        return -1;
    }
    if (!has_shape(t, nd, d0, d1)) {
        char want[64];
        if (nd == 2) snprintf(want, sizeof want, "[%llu,%llu]", (unsigned long long)d0,
                              (unsigned long long)d1);
        else snprintf(want, sizeof want, "[%llu]", (unsigned long long)d0);
        snprintf(err, cap, "%s: tensor '%s' has shape %s, expected %s", c->path, name,
                 shape_text(t, sh, sizeof sh), want);
        return -1;
    }
    if (!mxst_dtype_to_mxp(t->dtype, &dt) || !mxp_dtype_is_floating(dt)) {
        snprintf(err, cap, "%s: tensor '%s' has dtype %s (a floating dtype was expected, or a "
                 "quantized weight with a '_scale' tensor)", c->path, name,
                 mxst_dtype_name(t->dtype));
        return -1;
    }
    void *raw = read_all(c, t, err, cap);
    if (!raw) return -1;
    size_t n = (size_t)t->numel;
    mxp_status s = mxp_convert(dst, MXP_FLOAT32, raw, dt, n);
    free(raw);
    if (s != MXP_OK) {
        snprintf(err, cap, "%s: tensor '%s': %s", c->path, name, mxp_last_error());
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(dst[i])) {
            snprintf(err, cap, "%s: tensor '%s' element %zu is %g (corrupt checkpoint)", c->path,
                     name, i, (double)dst[i]);
            return -1;
        }
    return 0;
}

/* A dense weight stored quantized: decide the format from the dtypes and shapes, attach it. */
static int load_quantized(const ckpt *c, layer *l, size_t batch, char *err, size_t cap)
{
    char wname[96], sname[96], sh[64];
    snprintf(wname, sizeof wname, "%s/weight", l->path);
    snprintf(sname, sizeof sname, "%s/weight_scale", l->path);
    const mxst_tensor *w = mxst_find(c->f, wname), *s = mxst_find(c->f, sname);
    if (!w) {
        snprintf(err, cap, "%s: tensor '%s' is missing (its scale '%s' is there)", c->path, wname,
                 sname);
        return -1;
    }
    const uint64_t out = l->out, in = l->in, nb = (in + MXP_MX_BLOCK - 1) / MXP_MX_BLOCK;
    qformat f;
    mxp_dtype fmt = MXP_INT8;
    bool float_scales = s->dtype == MXST_F32 && s->ndim <= 2 && (s->numel == out || s->numel == 1);
    if (w->dtype == MXST_I8 && has_shape(w, 2, out, in) && float_scales) {
        f = QF_INT8;
    } else if (w->dtype == MXST_U8 && has_shape(w, 2, out, (in + 1) / 2) && float_scales) {
        f = QF_INT4;
    } else if ((w->dtype == MXST_F8_E4M3 || w->dtype == MXST_F8_E5M2) && has_shape(w, 2, out, in)) {
        fmt = w->dtype == MXST_F8_E4M3 ? MXP_FLOAT8_E4M3FN : MXP_FLOAT8_E5M2;
        if (float_scales) {
            f = QF_FP8;
        } else if ((s->dtype == MXST_F8_E8M0 || s->dtype == MXST_U8) && has_shape(s, 2, out, nb)) {
            f = QF_MXFP8;
        } else {
            goto bad;
        }
    } else {
        goto bad;
    }
    char shname[96];
    snprintf(shname, sizeof shname, "%s/weight_shape", l->path);
    const mxst_tensor *shp = mxst_find(c->f, shname);
    if (shp) { /* `mixprec quantize` records an int4 tensor's original shape: it must be [out,in] */
        int64_t dims[2] = {0, 0};
        if (f != QF_INT4 || shp->dtype != MXST_I64 || !has_shape(shp, 1, 2, 0) ||
            mxst_read(c->f, shp, 0, dims, sizeof dims) != MXP_OK || dims[0] != (int64_t)out ||
            dims[1] != (int64_t)in) {
            snprintf(err, cap, "%s: '%s' must be I64 [2] holding [%llu,%llu] beside an int4 "
                     "weight", c->path, shname, (unsigned long long)out, (unsigned long long)in);
            return -1;
        }
    }
    void *q = read_all(c, w, err, cap);
    void *sc = q ? read_all(c, s, err, cap) : NULL;
    int rc = sc ? qdense_from_stored(l, f, fmt, q, sc, (size_t)s->numel, batch, err, cap) : -1;
    if (rc != 0 && sc) { /* prefix the file name to qinfer's message */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", err);
        snprintf(err, cap, "%s: %s", c->path, msg);
    }
    free(q);
    free(sc);
    return rc;
bad:;
    char sh2[64];
    snprintf(err, cap, "%s: '%s' %s %s with '%s' %s %s is not a quantized format train_mlp runs "
             "(int8: I8 [out,in] + F32 [out]; int4: U8 [out,ceil(in/2)] + F32 [out]; float8: "
             "F8_* [out,in] + F32 [out]; MXFP8: F8_* [out,in] + F8_E8M0 [out,ceil(in/32)])",
             c->path, wname, mxst_dtype_name(w->dtype), shape_text(w, sh, sizeof sh), sname,
             mxst_dtype_name(s->dtype), shape_text(s, sh2, sizeof sh2));
    return -1;
}

int ckpt_load(const ckpt *c, model *m, char *err, size_t cap)
{
    char name[96];
    for (int i = 0; i < NLAYERS; i++) {
        layer *l = &m->L[i];
        if (l->op == OP_DENSE) {
            snprintf(name, sizeof name, "%s/weight", l->path);
            if (ckpt_layer_quantized(c, l->path)) {
                if (load_quantized(c, l, m->batch, err, cap) != 0) return -1;
            } else {
                float *wt = malloc(l->in * l->out * sizeof *wt); /* [out,in] */
                if (!wt) {
                    snprintf(err, cap, "%s: out of memory", c->path);
                    return -1;
                }
                int rc = load_float(c, name, 2, l->out, l->in, wt, err, cap);
                if (rc == 0) transpose(m->master + l->poff[0], wt, l->out, l->in);
                free(wt);
                if (rc != 0) return -1;
            }
            snprintf(name, sizeof name, "%s/bias", l->path);
            if (load_float(c, name, 1, l->out, 0, m->master + l->poff[1], err, cap) != 0) return -1;
        } else if (l->op == OP_BATCH_NORM) {
            float *dst[4] = {m->master + l->poff[0], m->master + l->poff[1], l->bn_run_mean,
                             l->bn_run_var};
            for (int k = 0; k < 4; k++) {
                snprintf(name, sizeof name, "%s/%s", l->path, BN_NAMES[k]);
                if (load_float(c, name, 1, l->out, 0, dst[k], err, cap) != 0) return -1;
            }
            for (size_t j = 0; j < l->out; j++)
                if (l->bn_run_var[j] < 0.0f) {
                    snprintf(err, cap, "%s: tensor '%s' element %zu is negative (%g): a variance "
                             "cannot be", c->path, name, j, (double)l->bn_run_var[j]);
                    return -1;
                }
        }
        for (int k = 0; l->fp8 && k < FP8_NSCALERS; k++) {
            char key[96];
            snprintf(key, sizeof key, "mixprec.fp8.%s.%s", l->path, FP8_SCALER_NAMES[k]);
            const char *text = ckpt_meta(c, key);
            mxp_fp8_scaler *s = NULL;
            if (!text) {
                snprintf(err, cap, "%s: metadata '%s' is missing", c->path, key);
                return -1;
            }
            if (mxp_fp8_scaler_restore(text, &s) != MXP_OK) {
                snprintf(err, cap, "%s: metadata '%s': %s", c->path, key, mxp_last_error());
                return -1;
            }
            if (fp8_set_scaler(l, k, s, err, cap) != 0) {
                mxp_fp8_scaler_free(s);
                return -1;
            }
        }
    }
    model_sync_params(m);
    return 0;
}

#endif /* TRAIN_MLP_CHECKPOINTS */
