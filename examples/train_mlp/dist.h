/*
 * dist.h - data-parallel training for train_mlp: the global batch is cut into a fixed number
 * of shards, each rank computes the gradients of the shards it owns, and the shard gradients
 * are added in shard order on every rank, so the result does not depend on how many ranks
 * there are. Built twice: with MPI (train_mlp_mpi, TRAIN_MLP_MPI defined) and without it
 * (train_mlp: one rank, the same arithmetic done locally).
 *
 * One training step with S shards over N ranks (rank r owns shards [r*S/N, (r+1)*S/N)):
 *
 *   1. every local shard s (rows [s*B/S, (s+1)*B/S) of the global batch of B rows): forward
 *      with its own batch norm statistics, loss, backward -> G_s, its float32 master gradient
 *      (of the shard's mean loss, still multiplied by the loss scale)
 *   2. all-gather every shard's loss, underflow counts and batch norm mean / variance
 *   3. reduce-scatter in fixed order: the parameter vector is cut into N slices; rank r
 *      receives slice r of every G_s (MPI_Alltoallv) and adds them in shard order:
 *      g = w_0 G_0 + w_1 G_1 + ... + w_{S-1} G_{S-1},  w_s = rows_s / B  (float32)
 *   4. unscale and check its slice (mxp_unscale_check): finite only says "MY slice is finite",
 *      so the flag is AND-reduced (mxp_loss_scale_adjust_reduce) and every rank skips or
 *      applies the same steps and moves the loss scale the same way
 *   5. when finite: all-gather the slices (every rank holds the whole gradient), Adam
 *      (replicated: the same arithmetic on the same bits on every rank)
 *
 * The batch norm running statistics move once per step by the w_s-weighted means of the shard
 * statistics, added in shard order. Float8 amax values are MAX-reduced with dist_amax_max
 * (exact, so the order does not matter; NaN wins deterministically).
 *
 * Errors: an MPI call that fails prints which call, on which rank, at which step, and aborts
 * the job (MPI_Abort): the communicator uses MPI_ERRORS_RETURN so the message is ours.
 */
#ifndef TRAIN_MLP_DIST_H
#define TRAIN_MLP_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mixprec.h"
#include "mnist.h"
#include "model.h"

enum { DIST_MAX_SHARDS = 64, DIST_DEFAULT_SHARDS = 8 };

/* Options parsed by dist_parse_option (0 / -1: not given). */
typedef struct dist_options {
    long shards;          /* --shards S (0: not given) */
    const char *trace;    /* --trace PREFIX: every rank writes PREFIX.rank<R> */
    long inject_step;     /* --inject-inf STEP[:RANK]: -1 none */
    long inject_rank;
    long die_step;        /* --die-at STEP[:RANK]: -1 none */
    long die_rank;
    bool verify;          /* --verify-ranks */
} dist_options;

typedef struct dist {
    int rank, size;        /* this process and the number of processes (1 without MPI) */
    size_t shards;         /* S; 0: the unsharded single-process path of train_mlp */
    size_t shard_lo, shard_hi; /* this rank's shards [lo, hi) */
    size_t nparams, p_lo, p_hi; /* this rank's slice [p_lo, p_hi) of the parameter vector */
    dist_options opt;
    FILE *trace;
    /* buffers (dist_setup) */
    float *local_grads;    /* [hi-lo][nparams] G_s of the local shards */
    float *send, *recv;    /* packing for the reduce-scatter: recv is [S][p_hi-p_lo] */
    unsigned char *aux;    /* [S][aux_bytes] per-shard loss, underflow counts, bn statistics */
    size_t aux_bytes, bn_floats;
    float *dlogits;        /* [rows,10] */
    uint8_t *labels;       /* [rows] */
    float *bn_sum;         /* [bn_floats] the combined batch norm statistics */
    int *counts, *displs, *rcounts, *rdispls; /* [size] for the v-collectives */
} dist;

/* Start (MPI_Init when built with MPI). Ranks other than 0 send stdout to /dev/null. Returns
 * 0, or -1 after a message. */
int dist_init(int *argc, char ***argv, dist *d);

/* End: frees everything, MPI_Finalize. Returns rc. */
int dist_finish(dist *d, int rc);

/* Abort every rank (MPI_Abort; exit without MPI). */
void dist_abort(dist *d, int rc);

/* Options of this module: dist_option_known(name) tells whether --name is one;
 * dist_parse_option parses its value (false: bad value, *why set). */
bool dist_option_known(const char *name);
bool dist_parse_option(dist_options *o, const char *name, const char *val, const char **why);
void dist_usage(FILE *f);

/* Check the options against the batch size and the number of ranks (the same answer on every
 * rank): 0, or -1 with a message in err. */
int dist_validate(const dist *d, size_t batch, char *err, size_t cap);

/* After the model exists: check the options against the batch size and the number of ranks,
 * choose S, allocate. Returns 0, or -1 with a message in err (every rank gets the same). */
int dist_setup(dist *d, const model *m, size_t batch, char *err, size_t cap);

/* Rows per shard the model must hold: ceil(batch / S), or batch when unsharded. */
size_t dist_model_batch(const dist_options *o, int size, size_t batch);

/* Results of one step. */
typedef struct dist_step_out {
    float loss;          /* sum of w_s * loss_s, shard order */
    uint64_t lost, total; /* gradient underflow counts of the sampled step, all shards */
    bool finite;         /* the AND over ranks: apply the update (m->grad then holds the
                            combined, unscaled gradient on every rank) */
} dist_step_out;

/* One sharded training step over rows idx[0..rows) of the training set (see the top). Moves
 * *drop_rng past the whole batch and *ls by mxp_loss_scale_adjust_reduce. Does not run Adam. */
void dist_step(dist *d, model *m, const mnist_split *train, const size_t *idx, size_t rows,
               uint64_t *drop_rng, bool sample_underflow, mxp_loss_scale *ls, uint64_t step,
               dist_step_out *out);

/* The unsharded path's fault injection (--inject-inf on rank 0): the last parameter's scaled
 * gradient (in the param dtype, before model_unscale_grads) becomes +inf. */
void dist_inject(const dist *d, uint64_t step, model *m);

/* --die-at: the chosen rank kills itself (SIGKILL) at the start of that step. */
void dist_maybe_die(const dist *d, uint64_t step);

/* Sum over ranks (exact). */
uint64_t dist_sum_u64(dist *d, uint64_t v);

/* AND over ranks. */
bool dist_all(dist *d, bool ok);

/* amax[i] = max over ranks of amax[i] (NaN on any rank gives NaN, else inf wins, else the
 * largest): the float8 delayed-scaling reduction, before mxp_fp8_scaler_set_amax / update. */
void dist_amax_max(dist *d, float *amax, size_t n);

/* Float8 delayed scaling across ranks: every scaler's amax of this step (mxp_fp8_scaler_amax,
 * the max over this rank's shards) becomes the MAX over all ranks (dist_amax_max, then
 * mxp_fp8_scaler_set_amax). Call it on every rank, same scalers in the same order, after the
 * step's backward pass and before mxp_fp8_scaler_update, so every rank derives the same scale. */
void dist_fp8_sync(dist *d, mxp_fp8_scaler *const *s, size_t n);

/* --verify-ranks: all-gather every scaler's scale and scale_inv (after the update) and compare;
 * -1 on every rank when any rank differs (rank 0 says which), 0 otherwise or without
 * --verify-ranks. */
int dist_fp8_check(dist *d, mxp_fp8_scaler *const *s, size_t n, uint64_t step);

/* Rank 0 writing a file: SIGTERM / SIGINT (what mpirun sends when another rank dies) wait
 * until the write + rename is over, so no partial file is left. */
void dist_write_begin(void);
void dist_write_end(void);

/* --trace: one line per step and a final line with hashes of the whole state. --verify-ranks:
 * all-gather the loss scale, skipped count and hashes of the weights, Adam state and batch norm
 * statistics after every step; -1 (rank 0 prints which rank disagrees) when any rank differs,
 * on every rank alike. */
int dist_after_step(dist *d, const model *m, uint64_t step, float loss, float scale_before,
                    const mxp_loss_scale *ls, bool finite, uint64_t skipped);
void dist_trace_final(dist *d, const model *m, double acc, const mxp_loss_scale *ls,
                      uint64_t skipped);

/* All-gather `bytes` bytes from every rank and compare them with rank 0's: 0 when every rank
 * holds the same bytes, else -1 on every rank (rank 0 names the first rank that differs and
 * `what`). For --verify-ranks checks, e.g. the float8 scales after mxp_fp8_scaler_update. */
int dist_check_same(dist *d, const void *data, size_t bytes, const char *what, uint64_t step);

#endif /* TRAIN_MLP_DIST_H */
