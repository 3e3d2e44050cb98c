/*
 * model.h - Axon's MixedPrecision example MLP, layer by layer, with a policy per layer.
 *
 *   input [B,784] float32
 *   dense_0        784 -> 128, relu        op "dense"
 *   batch_norm_0   128                     op "batch_norm"
 *   dropout_0      rate 0.5                op "dropout"
 *   dense_1        128 -> 64, relu         op "dense"
 *   batch_norm_1   64                      op "batch_norm"
 *   dropout_1      rate 0.5                op "dropout"
 *   dense_2        64 -> 10, softmax       op "dense"
 *
 * Each layer gets its mxp_policy from a policy map by its path. A layer casts its input and its
 * parameters to the policy's compute dtype (mxp_convert into buffers allocated once), keeps the
 * activations it needs for the backward pass and the gradients in the compute dtype, and
 * returns its output in the output dtype. Arithmetic runs on float32 copies of compute-dtype
 * values (exact widening) and every result is rounded back into the compute dtype, i.e. the
 * numerics of float16/bfloat16 tensor cores: half inputs, float32 accumulation, half results.
 *
 * The optimizer owns float32 master weights; after each update they are rounded into the
 * policy's param dtype, and those param-dtype tensors are what the forward pass reads.
 */
#ifndef TRAIN_MLP_MODEL_H
#define TRAIN_MLP_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixprec.h"

/* A buffer of n elements of one dtype. Buffers whose values would be identical share memory
 * (e.g. a float32 layer's "input cast to compute dtype" is the previous layer's output). */
typedef struct tbuf {
    void *data;
    mxp_dtype dtype;
    size_t n;
} tbuf;

typedef enum op_kind { OP_DENSE, OP_BATCH_NORM, OP_DROPOUT } op_kind;
typedef enum act_kind { ACT_NONE, ACT_RELU, ACT_SOFTMAX } act_kind;

/* Gradient underflow accounting: how many gradient values were non-zero in float32 and became
 * zero when rounded into the compute dtype, out of how many values rounded. */
typedef struct underflow_stats {
    bool active; /* count on this step? (a sample of steps: it costs a little) */
    uint64_t lost, total;
} underflow_stats;

struct fp8_dense; /* fp8.h: float8 training state of a dense layer (delayed scaling) */
struct qdense;    /* qinfer.h: quantized kernel of a dense layer (inference) */

enum { MAX_PARAMS = 2 }; /* dense: kernel, bias; batch_norm: gamma (scale), beta (bias) */

typedef struct layer {
    char path[32];       /* "dense_0": the key this layer looks up in the policy map */
    op_kind op;
    act_kind act;        /* dense only */
    size_t in, out;      /* features in and out (equal except for dense) */
    mxp_policy pol;      /* from the policy map */
    mxp_dtype in_dtype;  /* dtype of the input it receives (previous layer's output dtype) */

    /* parameters: p[0] dense kernel [in,out] / bn gamma [out]; p[1] bias / beta [out] */
    int nparams;
    size_t psize[MAX_PARAMS];  /* elements */
    size_t poff[MAX_PARAMS];   /* offset into the model's flat float32 master/grad arrays */
    tbuf param[MAX_PARAMS];    /* the parameters in the param dtype (rounded masters) */
    tbuf param_c[MAX_PARAMS];  /* [same] cast to the compute dtype, every forward */
    float *param_f[MAX_PARAMS]; /* [same] param_c widened to float32 for the kernels */
    tbuf grad_c[MAX_PARAMS];   /* [same] gradients in the compute dtype */
    tbuf grad_p[MAX_PARAMS];   /* [same] scaled gradients in the param dtype (unscaled into masters) */

    /* activations, B = batch rows */
    tbuf x_c;     /* [B,in]  input cast to the compute dtype (dense: kept for dW) */
    tbuf act_c;   /* [B,out] dense: activation after relu / logits; bn: x_hat; dropout: unused */
    tbuf out_c;   /* [B,out] the result in the compute dtype (dense+relu: = act_c; dense+softmax:
                     probabilities; bn: gamma*x_hat+beta; dropout: kept inputs * 2) */
    tbuf y;       /* [B,out] output in the output dtype */
    uint8_t *mask; /* [B,out] dropout keep mask (1 keep, 0 drop) */
    float *bn_inv_std;  /* [out] batch_norm: 1/sqrt(var+eps) of the current batch (float32 stats) */
    float *bn_run_mean; /* [out] batch_norm running mean (state for inference, float32) */
    float *bn_run_var;  /* [out] batch_norm running variance */
    float *bn_batch_mean; /* [out] batch_norm: mean of the last training batch (float32) */
    float *bn_batch_var;  /* [out] batch_norm: its unbiased variance (the running var tracks it) */

    /* gradients, B rows */
    tbuf dz_c;    /* [B,out] gradient w.r.t. the layer's output/pre-activation, compute dtype */
    tbuf dx_c;    /* [B,in]  gradient w.r.t. the input, compute dtype */
    tbuf dx;      /* [B,in]  the same in the input's dtype (what the previous layer receives) */

    /* dense only, at most one of the two (NULL: the float matrix products of matmul.c) */
    struct fp8_dense *fp8; /* float8 training with delayed scaling (fp8.c), owned */
    struct qdense *q;      /* quantized kernel for inference (qinfer.c), owned */
} layer;

enum { NLAYERS = 7 };

typedef struct model {
    layer L[NLAYERS];
    size_t batch;    /* B: rows every buffer is sized for */
    int threads;
    tbuf input;      /* [B,784] float32 model input (pixels / 255) */

    size_t nparams;  /* total parameter count */
    float *master;   /* [nparams] float32 master weights */
    float *grad;     /* [nparams] float32 master gradients, unscaled (model_unscale_grads) */
    float *adam_m;   /* [nparams] Adam first moment */
    float *adam_v;   /* [nparams] Adam second moment */
    uint64_t adam_t; /* Adam step count */
    bool bn_defer;   /* training forward passes leave the running statistics alone (the caller
                        combines bn_batch_mean/var of several shards: dist.c) */

    /* float32 workspaces (transient, shared by all layers) */
    float *ws_x;     /* [B,784] a layer input widened to float32 */
    float *ws_y;     /* [B,128] a layer result in float32 before rounding */
    float *ws_g;     /* [B,128] an incoming gradient widened to float32 */
    float *ws_wt;    /* [784*128] a transposed kernel w^T [out,in] */
    float *ws_w;     /* [784*128] a kernel gradient in float32 before rounding */
    float *ws_chk;   /* [B,784] scratch for underflow counting */
    float *ws_chk2;  /* [B,784] scratch for underflow counting */

    size_t activation_bytes; /* per batch of B rows: what the forward pass keeps for the backward
                              * pass (dense: input and activation in the compute dtype;
                              * batch_norm: x_hat and 1/std; dropout: the mask) */

    void **allocs;   /* everything malloc'd, freed by model_free */
    size_t nallocs, cap_allocs;
} model;

/*
 * Build the model for batch size B: look up each layer's policy in `map` (by its path), allocate
 * every buffer once, initialise weights (Glorot uniform, zero biases, gamma 1, beta 0) from seed.
 * Quantized policies are accepted here; what they mean is decided by the caller: fp8_attach
 * (float8 training) or qinfer (quantized inference) set the dense layers' fp8 / q members.
 * Returns 0, or -1 with a message in err.
 */
int model_init(model *m, const mxp_policy_map *map, size_t batch, uint64_t seed, int threads,
               char *err, size_t cap);
void model_free(model *m);

/* The layers as (path, op) pairs for mxp_policy_map_apply. */
void model_layer_list(mxp_layer out[NLAYERS]);

/* Fill m->input rows [0,rows) with pixels / 255: row r is image idx[r] of images [n,784]
 * (idx NULL: image r). */
void model_set_input(model *m, const uint8_t *images, const size_t *idx, size_t rows);

/* splitmix64 step: the next 64 random bits of the stream *state (any seed works). */
uint64_t rng_next(uint64_t *state);

/* Forward pass over `rows` (<= B) rows. train: batch statistics + dropout (rng advances).
 * The output (probabilities, output dtype of dense_2) is m->L[NLAYERS-1].y. */
void model_forward(model *m, size_t rows, bool train, uint64_t *rng);

/* The same for rows [row0, row0 + rows) of a batch of total_rows rows (a shard, dist.c): the
 * dropout masks are those model_forward(total_rows) would draw for those rows (each mask bit is
 * a function of the stream state, the row and the feature), so they do not depend on how the
 * batch is split. Returns the stream state after the whole batch (model_forward's *rng). */
uint64_t model_forward_part(model *m, size_t rows, bool train, uint64_t rng, size_t row0,
                            size_t total_rows);

/* Batch norm running statistics: run += momentum * (stat - run), for mean and unbiased var. */
void model_bn_update_running(layer *l, const float *mean, const float *unbiased_var);

/* Loss on the last forward pass: returns the mean cross-entropy (float32, from the logits),
 * and when dlogits is non-NULL writes d(loss * scale)/d(logits) [rows,10] float32. */
float model_loss(model *m, const uint8_t *labels, size_t rows, float scale, float *dlogits);

/* Number of correct argmax predictions in the last forward pass. */
size_t model_correct(const model *m, const uint8_t *labels, size_t rows);

/* Backward pass from dlogits [rows,10] (already multiplied by the loss scale). Leaves every
 * layer's parameter gradients in its param dtype (grad_p, still scaled). u counts gradient
 * underflow when u->active. */
void model_backward(model *m, const float *dlogits, size_t rows, underflow_stats *u);

/* m->grad = the param-dtype gradients / scale, as float32 (mxp_unscale_check_into: one fused
 * pass, never unscaled in float16). Returns true when every gradient is finite. */
bool model_unscale_grads(model *m, float scale);

/* The scaled param-dtype gradients of the last backward pass, widened to float32 (exact from
 * float16 / bfloat16) into out[nparams]: a shard's contribution in dist.c. */
void model_scaled_grads(const model *m, float *out);

/* Round the float32 masters into every layer's param dtype (after loading or updating them). */
void model_sync_params(model *m);

/* Adam on the float32 masters with the float32 (unscaled) gradients, then round the masters
 * into every layer's param dtype. */
void model_adam_step(model *m, float lr);

#endif /* TRAIN_MLP_MODEL_H */
