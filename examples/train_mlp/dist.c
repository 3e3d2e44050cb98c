/*
 * dist.c - data-parallel train_mlp: fixed shards, fixed-order gradient reduction, agreement on
 * the loss scale and on float8 amax across ranks (see dist.h for the step).
 *
 * Compiled twice: with TRAIN_MLP_MPI (train_mlp_mpi, Open MPI or any MPI-3 library) and
 * without (train_mlp: one rank; every collective below is then a copy). Both run the same
 * arithmetic in the same order, so `train_mlp --shards S` and `mpirun -np N train_mlp_mpi
 * --shards S` give the same bits for every N <= S.
 *
 * Why not MPI_Allreduce(MPI_SUM) for the gradients: MPI does not specify the order in which it
 * adds the contributions (it depends on the algorithm, hence on N and on the message size), and
 * float32 addition is not associative. The reduce-scatter here is an MPI_Alltoallv (exact
 * copies) followed by an addition in shard order that every rank does the same way.
 */
#include "dist.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#ifdef TRAIN_MLP_MPI
#include <mpi.h>
static MPI_Comm comm = MPI_COMM_NULL; /* a duplicate of MPI_COMM_WORLD, MPI_ERRORS_RETURN */
#endif

static uint64_t current_step; /* for error messages */

/* ---- collectives (copies when there is one rank and no MPI) ------------------------------ */

#ifdef TRAIN_MLP_MPI
static void mpi_check(const dist *d, int err, const char *call)
{
    if (err == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", err);
    fprintf(stderr, "train_mlp: rank %d of %d: %s failed at step %llu: %s (did another rank "
                    "die?); aborting every rank\n",
            d->rank, d->size, call, (unsigned long long)current_step, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}
#endif

/* Every rank contributes `bytes` bytes; out receives size * bytes, rank order. */
static void allgather_bytes(dist *d, const void *in, void *out, size_t bytes)
{
#ifdef TRAIN_MLP_MPI
    mpi_check(d, MPI_Allgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, comm),
              "MPI_Allgather");
#else
    (void)d;
    memmove(out, in, bytes);
#endif
}

uint64_t dist_sum_u64(dist *d, uint64_t v)
{
#ifdef TRAIN_MLP_MPI
    uint64_t sum = 0;
    mpi_check(d, MPI_Allreduce(&v, &sum, 1, MPI_UINT64_T, MPI_SUM, comm), "MPI_Allreduce(SUM)");
    return sum; /* integers: exact in any order */
#else
    (void)d;
    return v;
#endif
}

bool dist_all(dist *d, bool ok)
{
#ifdef TRAIN_MLP_MPI
    int flag = ok, all = 0;
    mpi_check(d, MPI_Allreduce(&flag, &all, 1, MPI_INT, MPI_LAND, comm), "MPI_Allreduce(LAND)");
    return all != 0;
#else
    (void)d;
    return ok;
#endif
}

/* mxp_finite_reduce_fn for mxp_loss_scale_adjust_reduce: AND of the finite flags. */
static int and_over_ranks(int *flag, void *ctx)
{
#ifdef TRAIN_MLP_MPI
    (void)ctx;
    return MPI_Allreduce(MPI_IN_PLACE, flag, 1, MPI_INT, MPI_LAND, comm);
#else
    (void)flag;
    (void)ctx;
    return 0;
#endif
}

void dist_amax_max(dist *d, float *amax, size_t n)
{
    if (n == 0) return;
    float *all = malloc((size_t)d->size * n * sizeof *all); /* [size][n] */
    if (!all) {
        fprintf(stderr, "train_mlp: out of memory in dist_amax_max\n");
        dist_abort(d, 1);
        return;
    }
    allgather_bytes(d, amax, all, n * sizeof *amax);
    for (size_t i = 0; i < n; i++) { /* rank order, NaN first: the same answer on every rank */
        float r = all[i];
        for (int q = 1; q < d->size; q++) {
            float x = all[(size_t)q * n + i];
            if (isnan(r) || isnan(x)) r = NAN;
            else if (x > r) r = x;
        }
        amax[i] = r;
    }
    free(all);
}

void dist_fp8_sync(dist *d, mxp_fp8_scaler *const *s, size_t n)
{
    if (n == 0) return;
    float *amax = malloc(n * sizeof *amax);
    if (!amax) {
        fprintf(stderr, "train_mlp: out of memory in dist_fp8_sync\n");
        dist_abort(d, 1);
        return;
    }
    for (size_t i = 0; i < n; i++) amax[i] = mxp_fp8_scaler_amax(s[i]);
    dist_amax_max(d, amax, n);
    for (size_t i = 0; i < n; i++)
        if (mxp_fp8_scaler_set_amax(s[i], amax[i]) != MXP_OK) { /* amax >= 0 or NaN: cannot fail */
            fprintf(stderr, "train_mlp: mxp_fp8_scaler_set_amax: %s\n", mxp_last_error());
            dist_abort(d, 1);
        }
    free(amax);
}

int dist_fp8_check(dist *d, mxp_fp8_scaler *const *s, size_t n, uint64_t step)
{
    if (!d->opt.verify || n == 0) return 0;
    float *v = malloc(2 * n * sizeof *v); /* scale, scale_inv of every scaler */
    if (!v) {
        fprintf(stderr, "train_mlp: out of memory in dist_fp8_check\n");
        dist_abort(d, 1);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        v[2 * i] = mxp_fp8_scaler_scale(s[i]);
        v[2 * i + 1] = mxp_fp8_scaler_scale_inv(s[i]);
    }
    int rc = dist_check_same(d, v, 2 * n * sizeof *v, "the float8 scales", step);
    free(v);
    return rc;
}

/* ---- life cycle ---------------------------------------------------------------------------- */

int dist_init(int *argc, char ***argv, dist *d)
{
    memset(d, 0, sizeof *d);
    d->size = 1;
    d->opt.inject_step = d->opt.die_step = -1;
    d->opt.inject_rank = d->opt.die_rank = 1;
#ifdef TRAIN_MLP_MPI
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "train_mlp: MPI_Init failed\n");
        return -1;
    }
    /* Errors come back to us (default: MPI_ERRORS_ARE_FATAL, a generic abort); mpi_check
     * names the call and the step, then aborts every rank. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &comm) != MPI_SUCCESS) {
        fprintf(stderr, "train_mlp: MPI_Comm_dup failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
        return -1;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &d->rank);
    MPI_Comm_size(comm, &d->size);
    if (d->rank != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "train_mlp: rank %d: cannot silence stdout\n", d->rank);
    }
#else
    (void)argc;
    (void)argv;
#endif
    return 0;
}

int dist_finish(dist *d, int rc)
{
    if (d->trace) fclose(d->trace);
    free(d->local_grads);
    free(d->send);
    free(d->recv);
    free(d->aux);
    free(d->dlogits);
    free(d->labels);
    free(d->bn_sum);
    free(d->counts);
    free(d->displs);
    free(d->rcounts);
    free(d->rdispls);
#ifdef TRAIN_MLP_MPI
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    MPI_Finalize();
#endif
    memset(d, 0, sizeof *d);
    return rc;
}

void dist_abort(dist *d, int rc)
{
    (void)d;
    fflush(stdout);
    fflush(stderr);
#ifdef TRAIN_MLP_MPI
    MPI_Abort(MPI_COMM_WORLD, rc);
#endif
    exit(rc);
}

/* ---- options ------------------------------------------------------------------------------- */

static const char *const OPTIONS[] = {"--shards", "--trace", "--inject-inf", "--die-at"};

bool dist_option_known(const char *name)
{
    for (size_t i = 0; i < sizeof OPTIONS / sizeof OPTIONS[0]; i++)
        if (strcmp(name, OPTIONS[i]) == 0) return true;
    return false;
}

static bool parse_long(const char *s, long max, long *out)
{
    if (!s || *s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || v > max || (*end && *end != ':')) return false;
    *out = v;
    return true;
}

/* "STEP" or "STEP:RANK" */
static bool parse_step_rank(const char *s, long *step, long *rank)
{
    if (!parse_long(s, LONG_MAX, step)) return false;
    const char *colon = strchr(s, ':');
    if (!colon) return true;
    return parse_long(colon + 1, 1 << 20, rank) && !strchr(colon + 1, ':');
}

bool dist_parse_option(dist_options *o, const char *name, const char *val, const char **why)
{
    long v = 0;
    if (strcmp(name, "--shards") == 0) {
        *why = "--shards needs an integer 1..64";
        if (!parse_long(val, DIST_MAX_SHARDS, &v) || v < 1 || strchr(val, ':')) return false;
        o->shards = v;
    } else if (strcmp(name, "--trace") == 0) {
        *why = "--trace needs a file name prefix";
        if (!*val) return false;
        o->trace = val;
    } else if (strcmp(name, "--inject-inf") == 0) {
        *why = "--inject-inf needs STEP or STEP:RANK";
        return parse_step_rank(val, &o->inject_step, &o->inject_rank);
    } else if (strcmp(name, "--die-at") == 0) {
        *why = "--die-at needs STEP or STEP:RANK";
        return parse_step_rank(val, &o->die_step, &o->die_rank);
    } else {
        *why = "unknown option";
        return false;
    }
    return true;
}

void dist_usage(FILE *f)
{
    fprintf(f,
        "  --shards S        cut every batch into S shards (1..64) with their own batch norm\n"
        "                    statistics and add their gradients in a fixed order: the result\n"
        "                    is the same for every number of MPI ranks N <= S (default: 1\n"
        "                    shard in one process = the plain batch; %d under mpirun -np > 1)\n"
        "test options (data-parallel checks):\n"
        "  --trace PREFIX    every rank writes PREFIX.rank<R>: one line per step (loss, loss\n"
        "                    scale, finite, skipped, in hexadecimal) and hashes of the state\n"
        "  --verify-ranks    after every step, all-gather the loss scale, the skipped count\n"
        "                    and hashes of the weights from every rank; exit 1 on any mismatch\n"
        "  --inject-inf STEP[:RANK]  put +inf into RANK's (default 1) gradient at step STEP\n"
        "                    (steps count from 0); every rank must skip that step\n"
        "  --die-at STEP[:RANK]      RANK (default 1) kills itself (SIGKILL) at step STEP\n",
        DIST_DEFAULT_SHARDS);
}

/* ---- set-up -------------------------------------------------------------------------------- */

static size_t chosen_shards(const dist_options *o, int size)
{
    if (o->shards > 0) return (size_t)o->shards;
    return size > 1 ? DIST_DEFAULT_SHARDS : 0;
}

size_t dist_model_batch(const dist_options *o, int size, size_t batch)
{
    size_t s = chosen_shards(o, size);
    return s ? (batch + s - 1) / s : batch;
}

/* Part i of n equal parts of [0, total): [i*total/n, (i+1)*total/n). */
static size_t part(size_t total, size_t n, size_t i)
{
    return (size_t)((unsigned long long)total * i / n);
}

typedef struct aux_head { /* the start of each shard's record; bn statistics follow */
    float loss;           /* the shard's mean cross-entropy */
    float pad;
    uint64_t lost, total; /* gradient underflow counts */
} aux_head;

int dist_validate(const dist *d, size_t batch, char *err, size_t cap)
{
    const dist_options *o = &d->opt;
    size_t S = chosen_shards(o, d->size);
    if (o->inject_step >= 0 && o->inject_rank >= d->size) {
        snprintf(err, cap, "--inject-inf: rank %ld does not exist (%d rank%s)", o->inject_rank,
                 d->size, d->size == 1 ? "" : "s");
        return -1;
    }
    if (o->die_step >= 0 && o->die_rank >= d->size) {
        snprintf(err, cap, "--die-at: rank %ld does not exist (%d rank%s)", o->die_rank, d->size,
                 d->size == 1 ? "" : "s");
        return -1;
    }
    if (S > 0 && S * 2 > batch) {
        snprintf(err, cap, "%zu shards need a batch of at least %zu rows (batch norm needs two "
                 "rows per shard); got --batch %zu", S, 2 * S, batch);
        return -1;
    }
    if (S > 0 && (size_t)d->size > S) {
        snprintf(err, cap, "%d ranks but %zu shards: every rank needs a shard (--shards >= %d)",
                 d->size, S, d->size);
        return -1;
    }
    return 0;
}

int dist_setup(dist *d, const model *m, size_t batch, char *err, size_t cap)
{
    const dist_options *o = &d->opt;
    if (dist_validate(d, batch, err, cap) != 0) return -1;
    size_t S = chosen_shards(o, d->size);
    if (o->trace) {
        char path[4096];
        snprintf(path, sizeof path, "%s.rank%d", o->trace, d->rank);
        d->trace = fopen(path, "w");
        if (!d->trace) {
            snprintf(err, cap, "cannot write %s: %s", path, strerror(errno));
            return -1;
        }
    }
    d->shards = S;
    d->nparams = m->nparams;
    if (S == 0) return 0; /* the plain single-process path */

    const size_t P = m->nparams, N = (size_t)d->size, r = (size_t)d->rank;
    d->shard_lo = part(S, N, r);
    d->shard_hi = part(S, N, r + 1);
    d->p_lo = part(P, N, r);
    d->p_hi = part(P, N, r + 1);
    d->bn_floats = 0;
    for (int i = 0; i < NLAYERS; i++)
        if (m->L[i].op == OP_BATCH_NORM) d->bn_floats += 2 * m->L[i].out;
    d->aux_bytes = (sizeof(aux_head) + d->bn_floats * sizeof(float) + 7) / 8 * 8;
    const size_t local = d->shard_hi - d->shard_lo, slice_max = P / N + 1;
    if ((unsigned long long)S * slice_max > INT_MAX || S * d->aux_bytes > INT_MAX) {
        snprintf(err, cap, "%zu shards of %zu parameters are too many for one MPI message", S, P);
        return -1;
    }
    const size_t rows = m->batch; /* ceil(batch / S) */
    d->local_grads = malloc(local * P * sizeof(float));
    d->send = malloc(local * P * sizeof(float));
    d->recv = malloc(S * slice_max * sizeof(float));
    d->aux = malloc(S * d->aux_bytes);
    d->dlogits = malloc(rows * MNIST_CLASSES * sizeof(float));
    d->labels = malloc(rows);
    d->bn_sum = malloc((d->bn_floats + 1) * sizeof(float));
    d->counts = malloc(N * sizeof(int));
    d->displs = malloc(N * sizeof(int));
    d->rcounts = malloc(N * sizeof(int));
    d->rdispls = malloc(N * sizeof(int));
    if (!d->local_grads || !d->send || !d->recv || !d->aux || !d->dlogits || !d->labels ||
        !d->bn_sum || !d->counts || !d->displs || !d->rcounts || !d->rdispls) {
        snprintf(err, cap, "out of memory for %zu shards", S);
        return -1;
    }
    memset(d->aux, 0, S * d->aux_bytes);
    return 0;
}

/* ---- the step ------------------------------------------------------------------------------ */

static aux_head *aux_at(const dist *d, size_t s)
{
    return (aux_head *)(void *)(d->aux + s * d->aux_bytes);
}

static float *aux_bn(const dist *d, size_t s)
{
    return (float *)(void *)(d->aux + s * d->aux_bytes + sizeof(aux_head));
}

/* Forward + backward of local shard s; its G_s, loss, counts and bn statistics are stored. */
static uint64_t run_shard(dist *d, model *m, const mnist_split *train, const size_t *idx,
                          size_t rows, size_t s, uint64_t drop_base, bool sample, float scale)
{
    const size_t S = d->shards, r0 = part(rows, S, s), n = part(rows, S, s + 1) - r0;
    model_set_input(m, train->images, idx + r0, n);
    for (size_t i = 0; i < n; i++) d->labels[i] = train->labels[idx[r0 + i]];
    uint64_t next = model_forward_part(m, n, true, drop_base, r0, rows);
    aux_head *h = aux_at(d, s);
    h->loss = model_loss(m, d->labels, n, scale, d->dlogits);
    underflow_stats u = {.active = sample};
    model_backward(m, d->dlogits, n, &u);
    h->lost = u.lost;
    h->total = u.total;
    model_scaled_grads(m, d->local_grads + (s - d->shard_lo) * d->nparams);
    float *bn = aux_bn(d, s);
    for (int i = 0; i < NLAYERS; i++) {
        const layer *l = &m->L[i];
        if (l->op != OP_BATCH_NORM) continue;
        memcpy(bn, l->bn_batch_mean, l->out * sizeof *bn);
        memcpy(bn + l->out, l->bn_batch_var, l->out * sizeof *bn);
        bn += 2 * l->out;
    }
    return next;
}

/* Every shard's record, shard order, on every rank (rank q's records are shards [lo_q, hi_q),
 * so concatenating by rank is shard order). */
static void gather_aux(dist *d)
{
    const size_t S = d->shards, N = (size_t)d->size;
    for (size_t q = 0; q < N; q++) {
        d->rcounts[q] = (int)((part(S, N, q + 1) - part(S, N, q)) * d->aux_bytes);
        d->rdispls[q] = (int)(part(S, N, q) * d->aux_bytes);
    }
#ifdef TRAIN_MLP_MPI
    mpi_check(d, MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d->aux, d->rcounts,
                                d->rdispls, MPI_BYTE, comm),
              "MPI_Allgatherv(shard records)");
#endif
}

/* recv[s][0 .. p_hi-p_lo) = slice (this rank) of G_s for every shard s, shard order. */
static void reduce_scatter_exchange(dist *d)
{
    const size_t S = d->shards, N = (size_t)d->size, P = d->nparams;
    const size_t local = d->shard_hi - d->shard_lo, mine = d->p_hi - d->p_lo;
    size_t off = 0;
    for (size_t q = 0; q < N; q++) { /* to rank q: its slice of each local G_s */
        size_t lo = part(P, N, q), len = part(P, N, q + 1) - lo;
        d->counts[q] = (int)(local * len);
        d->displs[q] = (int)off;
        for (size_t ls = 0; ls < local; ls++, off += len)
            memcpy(d->send + off, d->local_grads + ls * P + lo, len * sizeof(float));
        d->rcounts[q] = (int)((part(S, N, q + 1) - part(S, N, q)) * mine);
        d->rdispls[q] = (int)(part(S, N, q) * mine);
    }
#ifdef TRAIN_MLP_MPI
    mpi_check(d, MPI_Alltoallv(d->send, d->counts, d->displs, MPI_FLOAT, d->recv, d->rcounts,
                               d->rdispls, MPI_FLOAT, comm),
              "MPI_Alltoallv(gradient slices)");
#else
    memcpy(d->recv, d->send, off * sizeof(float));
#endif
}

void dist_step(dist *d, model *m, const mnist_split *train, const size_t *idx, size_t rows,
               uint64_t *drop_rng, bool sample_underflow, mxp_loss_scale *ls, uint64_t step,
               dist_step_out *out)
{
    current_step = step;
    const size_t S = d->shards, mine = d->p_hi - d->p_lo;
    float w[DIST_MAX_SHARDS]; /* w_s = rows_s / B: the shard's share of the batch mean */
    for (size_t s = 0; s < S; s++)
        w[s] = (float)(part(rows, S, s + 1) - part(rows, S, s)) / (float)rows;

    /* 1. local shards */
    m->bn_defer = true;
    uint64_t next = *drop_rng;
    for (size_t s = d->shard_lo; s < d->shard_hi; s++)
        next = run_shard(d, m, train, idx, rows, s, *drop_rng, sample_underflow, ls->scale);
    *drop_rng = next;
    if (d->opt.inject_step == (long)step && d->opt.inject_rank == d->rank)
        d->local_grads[d->nparams - 1] = INFINITY; /* the last parameter: rank N-1's slice */

    /* 2. loss, counts and batch norm statistics of every shard; combined in shard order */
    gather_aux(d);
    float loss = 0.0f;
    uint64_t lost = 0, total = 0;
    for (size_t s = 0; s < S; s++) {
        const aux_head *h = aux_at(d, s);
        loss = s == 0 ? w[s] * h->loss : loss + w[s] * h->loss;
        lost += h->lost;
        total += h->total;
    }
    float *bn = d->bn_sum; /* [bn_floats], the layout of a record's statistics */
    for (size_t s = 0; s < S; s++) {
        const float *x = aux_bn(d, s);
        for (size_t j = 0; j < d->bn_floats; j++)
            bn[j] = s == 0 ? w[s] * x[j] : bn[j] + w[s] * x[j];
    }
    for (int i = 0; i < NLAYERS; i++) {
        layer *l = &m->L[i];
        if (l->op != OP_BATCH_NORM) continue;
        model_bn_update_running(l, bn, bn + l->out); /* mean, unbiased variance */
        bn += 2 * l->out;
    }

    /* 3. reduce-scatter: this rank's slice of sum_s w_s G_s, shard order */
    reduce_scatter_exchange(d);
    float *g = m->grad + d->p_lo;
    for (size_t i = 0; i < mine; i++) g[i] = w[0] * d->recv[i];
    for (size_t s = 1; s < S; s++) {
        const float *r = d->recv + s * mine;
        for (size_t i = 0; i < mine; i++) g[i] += w[s] * r[i];
    }

    /* 4. unscale + check the slice; agree across ranks; move the loss scale */
    bool local_ok = mxp_unscale_check(g, MXP_FLOAT32, mine, ls->scale), finite = false;
    mxp_status st = mxp_loss_scale_adjust_reduce(ls, local_ok, and_over_ranks, d, &finite);
    if (st != MXP_OK) {
        fprintf(stderr, "train_mlp: rank %d: agreeing on finite gradients failed at step %llu: "
                        "%s; aborting every rank\n",
                d->rank, (unsigned long long)step, mxp_last_error());
        dist_abort(d, 1);
    }

    /* 5. every rank gets the whole gradient (only for a step that is applied) */
    if (finite) {
#ifdef TRAIN_MLP_MPI
        const size_t N = (size_t)d->size, P = d->nparams;
        for (size_t q = 0; q < N; q++) {
            d->rcounts[q] = (int)(part(P, N, q + 1) - part(P, N, q));
            d->rdispls[q] = (int)part(P, N, q);
        }
        mpi_check(d, MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, m->grad, d->rcounts,
                                    d->rdispls, MPI_FLOAT, comm),
                  "MPI_Allgatherv(gradient)");
#endif
    }
    *out = (dist_step_out){loss, lost, total, finite};
}

void dist_inject(const dist *d, uint64_t step, model *m)
{
    if (d->opt.inject_step != (long)step || d->opt.inject_rank != d->rank) return;
    const layer *l = &m->L[NLAYERS - 1]; /* its last parameter is the model's last one */
    const tbuf *g = &l->grad_p[l->nparams - 1];
    const float inf = INFINITY;
    mxp_convert((char *)g->data + (g->n - 1) * mxp_dtype_size(g->dtype), g->dtype, &inf,
                MXP_FLOAT32, 1);
}

void dist_maybe_die(const dist *d, uint64_t step)
{
    current_step = step;
    if (d->opt.die_step == (long)step && d->opt.die_rank == d->rank) {
        fprintf(stderr, "train_mlp: rank %d: --die-at %llu: killing myself (SIGKILL)\n", d->rank,
                (unsigned long long)step);
        fflush(stderr);
        raise(SIGKILL);
    }
}

/* ---- files written by rank 0 ----------------------------------------------------------------- */

static volatile sig_atomic_t writing, pending_signal;

static void on_stop_signal(int sig)
{
    if (writing) {
        pending_signal = sig; /* dist_write_end re-raises it */
        return;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void dist_write_begin(void)
{
    static bool installed;
    if (!installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        installed = true;
    }
    writing = 1;
}

void dist_write_end(void)
{
    writing = 0;
    if (pending_signal) {
        signal(pending_signal, SIG_DFL);
        raise(pending_signal);
    }
}

/* ---- trace and verification ---------------------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

enum { HASH_MASTER, HASH_ADAM, HASH_BN, NHASH };

static void state_hashes(const model *m, uint64_t h[NHASH])
{
    const uint64_t seed = 0xCBF29CE484222325ull;
    h[HASH_MASTER] = fnv1a(seed, m->master, m->nparams * sizeof(float));
    h[HASH_ADAM] = fnv1a(seed, m->adam_m, m->nparams * sizeof(float));
    h[HASH_ADAM] = fnv1a(h[HASH_ADAM], m->adam_v, m->nparams * sizeof(float));
    h[HASH_ADAM] = fnv1a(h[HASH_ADAM], &m->adam_t, sizeof m->adam_t);
    h[HASH_BN] = seed;
    for (int i = 0; i < NLAYERS; i++)
        if (m->L[i].op == OP_BATCH_NORM) {
            h[HASH_BN] = fnv1a(h[HASH_BN], m->L[i].bn_run_mean, m->L[i].out * sizeof(float));
            h[HASH_BN] = fnv1a(h[HASH_BN], m->L[i].bn_run_var, m->L[i].out * sizeof(float));
        }
}

typedef struct verify_rec {
    uint32_t scale_bits;
    int32_t counter;
    uint64_t skipped;
    uint64_t hash[NHASH];
} verify_rec;

int dist_check_same(dist *d, const void *data, size_t bytes, const char *what, uint64_t step)
{
    unsigned char *all = malloc((size_t)d->size * bytes);
    if (!all) {
        fprintf(stderr, "train_mlp: out of memory in --verify-ranks\n");
        dist_abort(d, 1);
        return -1;
    }
    allgather_bytes(d, data, all, bytes);
    int bad = -1;
    for (int q = 1; q < d->size && bad < 0; q++)
        if (memcmp(all, all + (size_t)q * bytes, bytes) != 0) bad = q;
    free(all);
    if (bad >= 0 && d->rank == 0)
        fprintf(stderr, "train_mlp: --verify-ranks: rank %d disagrees with rank 0 on %s after "
                        "step %llu\n",
                bad, what, (unsigned long long)step);
    return bad >= 0 ? -1 : 0;
}

int dist_after_step(dist *d, const model *m, uint64_t step, float loss, float scale_before,
                    const mxp_loss_scale *ls, bool finite, uint64_t skipped)
{
    if (d->trace)
        fprintf(d->trace, "step %llu loss %a scale %a -> %a finite %d skipped %llu\n",
                (unsigned long long)step, (double)loss, (double)scale_before, (double)ls->scale,
                finite, (unsigned long long)skipped);
    if (!d->opt.verify) return 0;
    verify_rec v;
    memset(&v, 0, sizeof v);
    memcpy(&v.scale_bits, &ls->scale, sizeof v.scale_bits);
    v.counter = ls->counter;
    v.skipped = skipped;
    state_hashes(m, v.hash);
    return dist_check_same(d, &v, sizeof v, "the loss scale, skipped steps or weights", step);
}

void dist_trace_final(dist *d, const model *m, double acc, const mxp_loss_scale *ls,
                      uint64_t skipped)
{
    if (!d->trace) return;
    uint64_t h[NHASH];
    state_hashes(m, h);
    fprintf(d->trace, "final accuracy %.6f scale %a skipped %llu master %016llx adam %016llx "
                      "bn %016llx\n",
            acc, (double)ls->scale, (unsigned long long)skipped,
            (unsigned long long)h[HASH_MASTER], (unsigned long long)h[HASH_ADAM],
            (unsigned long long)h[HASH_BN]);
}
