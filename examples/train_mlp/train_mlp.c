/*
 * train_mlp.c - mixed-precision training of Axon's MixedPrecision example MLP on Fashion-MNIST.
 *
 *   model = input(784) |> dense(128, relu) |> batch_norm |> dropout(0.5)
 *                      |> dense(64, relu)  |> batch_norm |> dropout(0.5) |> dense(10, softmax)
 *   policy = create_policy(params: f32, compute: f16, output: f32)
 *   mp_model = apply_policy(model, policy, except: [:batch_norm])
 *
 * The same in C with mixprec: the policy text is parsed with mxp_policy_parse, applied to the
 * layers with mxp_policy_map_apply (except: a list of op names), and every layer looks up its
 * policy by path in the map (model.c). Adam updates float32 master weights. Loss scaling uses
 * mxp_loss_scale_*: the loss gradient is multiplied by the scale, mxp_unscale_check_into turns
 * the scaled param-dtype gradients (float16 with a float16 param policy) into float32 master
 * gradients divided by the scale and says whether they are all finite (model_unscale_grads),
 * the update is skipped when they are not, and mxp_loss_scale_adjust moves a dynamic scale.
 *
 * Data-parallel (dist.c): with --shards S, or built as train_mlp_mpi and run under mpirun,
 * every batch is cut into S shards whose gradients are added in a fixed order, so the result
 * does not depend on the number of ranks; rank 0 prints and writes the files.
 *
 * Run `train_mlp --help` for the options. Exit codes: 0 ok, 1 runtime failure (data, memory,
 * a --check assertion), 2 bad command line.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt.h"
#include "dist.h"
#include "fp8.h"
#include "mixprec.h"
#include "mnist.h"
#include "model.h"
#include "qinfer.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
enum { MAX_EPOCHS = 1000, UNDERFLOW_SAMPLE_EVERY = 8 };

typedef struct options {
    const char *policy, *except, *loss_scale, *csv, *data;
    int epochs, threads;
    size_t batch, limit;
    float lr;
    uint64_t seed;
    double check; /* < 0: no --check */
    const char *save, *eval, *eval_policy, *eval_map; /* checkpoints and quantized inference */
    bool eval_mx; /* --eval-fp8 mxfp8 */
    dist_options *dist; /* --shards and the data-parallel test options (dist.c) */
} options;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: train_mlp [options]\n"
        "Mixed-precision training of Axon's MixedPrecision MLP (784-128-64-10 with batch norm\n"
        "and dropout) on Fashion-MNIST, with mixprec policies and loss scaling.\n"
        "\n"
        "  --policy P        precision policy, anything mxp_policy_parse accepts\n"
        "                    (default \"p=f32,c=f16,o=f32\"; e.g. float32, mixed_bfloat16)\n"
        "  --except OPS      comma list of op names that keep float32 (default batch_norm;\n"
        "                    \"\" or none: apply the policy to every layer). Ops: dense,\n"
        "                    batch_norm, dropout\n"
        "  --loss-scale S    none | static:N | dynamic[:INITIAL[:PERIOD]]\n"
        "                    (default dynamic = dynamic:32768:2000)\n"
        "  --epochs N        passes over the training set (default 3)\n"
        "  --batch B         batch size (default 128)\n"
        "  --lr X            Adam learning rate (default 0.001)\n"
        "  --seed S          seed for initialisation, shuffling and dropout (default 7)\n"
        "  --threads T       threads for the matrix products (default 1; results do not\n"
        "                    depend on T)\n"
        "  --csv FILE        write one row per epoch: epoch,train_loss,test_accuracy,\n"
        "                    loss_scale,skipped_steps,grad_underflow_fraction,seconds\n"
        "  --data DIR        directory with the four Fashion-MNIST .gz files\n"
        "                    (default " DEFAULT_DATA ")\n"
        "  --limit N         use only the first N training images\n"
        "  --check ACC       exit 1 unless the final test accuracy is >= ACC and, with a\n"
        "                    dynamic loss scale, the scale changed at least once\n"
        "                    (with --eval: unless the checkpoint's accuracy is >= ACC)\n"
        "  --save FILE       after training, write the model to FILE (safetensors: float32\n"
        "                    master weights, batch-norm statistics, loss-scale and float8\n"
        "                    scaler states in the metadata); replaced atomically\n"
        "  --eval FILE       do not train: evaluate the checkpoint FILE on the test set (also\n"
        "                    `mixprec cast` / `mixprec quantize` outputs: quantized weights run\n"
        "                    quantized) and print the accuracy, the weight bytes and the median\n"
        "                    time per batch\n"
        "  --eval-policy P   with --eval: the policy of the layers (applied like --policy, with\n"
        "                    --except); q=int8 / int4 / float8 quantizes the dense kernels,\n"
        "                    e.g. int8_from_float32, int4_from_float32, float8_from_bfloat16\n"
        "                    (default: the policies the checkpoint was trained with)\n"
        "  --eval-map FILE   with --eval: a policy-map config whose keys override the policy of\n"
        "                    the layers they match, e.g. \"dense_2 = float32\"\n"
        "  --eval-fp8 R      float8 inference recipe: current (per-channel kernel scales, one\n"
        "                    scale per batch for the input; default) or mxfp8 (OCP MX blocks)\n");
    dist_usage(f);
    fprintf(f, "  --help            this text\n");
}

static bool quiet_usage; /* ranks other than 0 of an MPI job: rank 0 reports usage errors */

/* A bad command line: the message and one line pointing to --help (the full usage is long). */
static int bad_usage(const char *fmt, const char *arg)
{
    if (quiet_usage) return 2;
    fprintf(stderr, "train_mlp: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'train_mlp --help' for the options.\n");
    return 2;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static bool parse_float(const char *s, float *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* Parse argv into *o. Returns 0, or 2 after printing the error (1 never), or -1 for --help. */
static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.policy = "p=f32,c=f16,o=f32", .except = "batch_norm", .loss_scale = "dynamic",
                   .data = DEFAULT_DATA, .epochs = 3, .threads = 1, .batch = 128, .lr = 1e-3f,
                   .seed = 7, .check = -1.0, .dist = o->dist};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return -1;
        if (strncmp(a, "--", 2) != 0) return bad_usage("unexpected argument '%s'", a);
        if (strcmp(a, "--verify-ranks") == 0) { /* the one option without a value */
            o->dist->verify = true;
            continue;
        }
        /* --name value or --name=value */
        char name[32];
        const char *val = strchr(a, '=');
        size_t len = val ? (size_t)(val - a) : strlen(a);
        if (len >= sizeof name) return bad_usage("unknown option '%s'", a);
        memcpy(name, a, len);
        name[len] = '\0';
        static const char *const known[] = {"--policy", "--except", "--loss-scale", "--csv",
                                             "--data", "--epochs", "--batch", "--threads",
                                             "--limit", "--seed", "--lr", "--check",
                                             "--save", "--eval", "--eval-policy", "--eval-map",
                                             "--eval-fp8"};
        bool is_known = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            is_known = is_known || strcmp(name, known[k]) == 0;
        if (!is_known && !dist_option_known(name)) return bad_usage("unknown option '%s'", a);
        if (val) val++;
        else if (i + 1 < argc) val = argv[++i];
        else return bad_usage("option '%s' needs a value", a);

        uint64_t u = 0;
        float f = 0;
        const char *why = NULL;
        if (dist_option_known(name)) {
            if (!dist_parse_option(o->dist, name, val, &why)) return bad_usage("%s", why);
        } else if (strcmp(name, "--policy") == 0) o->policy = val;
        else if (strcmp(name, "--except") == 0) o->except = val;
        else if (strcmp(name, "--loss-scale") == 0) o->loss_scale = val;
        else if (strcmp(name, "--csv") == 0) o->csv = val;
        else if (strcmp(name, "--data") == 0) o->data = val;
        else if (strcmp(name, "--save") == 0) o->save = val;
        else if (strcmp(name, "--eval") == 0) o->eval = val;
        else if (strcmp(name, "--eval-policy") == 0) o->eval_policy = val;
        else if (strcmp(name, "--eval-map") == 0) o->eval_map = val;
        else if (strcmp(name, "--eval-fp8") == 0) {
            if (strcmp(val, "current") != 0 && strcmp(val, "mxfp8") != 0)
                return bad_usage("--eval-fp8 needs current or mxfp8, not '%s'", val);
            o->eval_mx = strcmp(val, "mxfp8") == 0;
        }
        else if (strcmp(name, "--epochs") == 0) {
            if (!parse_u64(val, &u) || u < 1 || u > MAX_EPOCHS)
                return bad_usage("--epochs needs an integer 1..1000, not '%s'", val);
            o->epochs = (int)u;
        } else if (strcmp(name, "--batch") == 0) {
            if (!parse_u64(val, &u) || u < 2 || u > 65536)
                return bad_usage("--batch needs an integer 2..65536, not '%s'", val);
            o->batch = (size_t)u;
        } else if (strcmp(name, "--threads") == 0) {
            if (!parse_u64(val, &u) || u < 1 || u > 64)
                return bad_usage("--threads needs an integer 1..64, not '%s'", val);
            o->threads = (int)u;
        } else if (strcmp(name, "--limit") == 0) {
            if (!parse_u64(val, &u) || u < 1)
                return bad_usage("--limit needs a positive integer, not '%s'", val);
            o->limit = (size_t)u;
        } else if (strcmp(name, "--seed") == 0) {
            if (!parse_u64(val, &u)) return bad_usage("--seed needs an unsigned integer, not '%s'", val);
            o->seed = u;
        } else if (strcmp(name, "--lr") == 0) {
            if (!parse_float(val, &f) || f <= 0.0f)
                return bad_usage("--lr needs a positive number, not '%s'", val);
            o->lr = f;
        } else if (strcmp(name, "--check") == 0) {
            if (!parse_float(val, &f) || f < 0.0f || f > 1.0f)
                return bad_usage("--check needs an accuracy in [0,1], not '%s'", val);
            o->check = (double)f;
        } else return bad_usage("unknown option '%s'", a);
    }
    if ((o->eval_policy || o->eval_map) && !o->eval)
        return bad_usage("%s needs --eval FILE", o->eval_policy ? "--eval-policy" : "--eval-map");
    if (o->eval && o->save) return bad_usage("%s", "--eval and --save do not go together");
    return 0;
}

/* "none" | "static:N" | "dynamic[:INITIAL[:PERIOD]]" -> a valid mxp_loss_scale, or false.
 * The checked constructors refuse bad values (message in mxp_last_error()). A dynamic scale
 * below 1 gets min_scale 0, as mxp_loss_scale_dynamic does, so it can keep shrinking. */
static bool parse_loss_scale(const char *text, mxp_loss_scale *out)
{
    float v = 0;
    if (strcmp(text, "none") == 0) {
        *out = mxp_loss_scale_noop();
        return true;
    }
    if (strncmp(text, "static:", 7) == 0)
        return parse_float(text + 7, &v) && mxp_loss_scale_static_ex(v, out) == MXP_OK;
    if (strncmp(text, "dynamic", 7) != 0) return false;
    const char *rest = text + 7;
    float initial = 32768.0f; /* 2^15, the usual starting point (Keras, jmp examples) */
    uint64_t period = MXP_LOSS_SCALE_DEFAULT_PERIOD;
    if (*rest == ':') {
        char buf[64];
        snprintf(buf, sizeof buf, "%s", rest + 1);
        char *colon = strchr(buf, ':');
        if (colon) *colon = '\0';
        if (!parse_float(buf, &initial)) return false;
        if (colon && (!parse_u64(colon + 1, &period) || period < 1 || period > INT32_MAX))
            return false;
    } else if (*rest != '\0') {
        return false;
    }
    float min_scale = initial > 0.0f && initial < 1.0f ? 0.0f : 1.0f;
    return mxp_loss_scale_dynamic_ex(initial, (int32_t)period, MXP_LOSS_SCALE_DEFAULT_FACTOR,
                                     min_scale, INFINITY, out) == MXP_OK;
}

/* Fail before training, not after it: the --csv file must be creatable where write_csv puts
 * it (FILE.tmp, renamed to FILE each epoch) and FILE must not be a directory. */
static int check_csv_path(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "train_mlp: --csv path too long: %s\n", path);
        return 1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "train_mlp: cannot write --csv file %s (%s: %s)\n", path, tmp,
                strerror(errno));
        return 1;
    }
    fclose(f);
    remove(tmp);
    FILE *d = fopen(path, "r+");
    if (!d && errno == EISDIR) {
        fprintf(stderr, "train_mlp: cannot write --csv file %s: %s\n", path, strerror(EISDIR));
        return 1;
    }
    if (d) fclose(d);
    return 0;
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Split a comma list of op names; every name must be an op of this model. */
static int parse_except(const char *text, char *storage, size_t cap, const char **ops, size_t *n)
{
    *n = 0;
    if (strcmp(text, "") == 0 || strcmp(text, "none") == 0) return 0;
    snprintf(storage, cap, "%s", text);
    for (char *tok = storage; tok;) {
        char *comma = strchr(tok, ',');
        if (comma) *comma = '\0';
        while (*tok == ' ') tok++;
        for (char *e = tok + strlen(tok); e > tok && e[-1] == ' ';) *--e = '\0';
        if (strcmp(tok, "dense") != 0 && strcmp(tok, "batch_norm") != 0 &&
            strcmp(tok, "dropout") != 0)
            return bad_usage("unknown op '%s' in --except (this model has: dense, batch_norm, "
                             "dropout)", tok);
        if (*n < 8) ops[(*n)++] = tok;
        tok = comma ? comma + 1 : NULL;
    }
    return 0;
}

/* One CSV row per epoch, kept in memory and rewritten whole (temp file + rename) each epoch. */
typedef struct csv_row {
    int epoch;
    double loss, acc, scale, underflow, seconds;
    uint64_t skipped;
} csv_row;

static int write_csv(const char *path, const csv_row *rows, int n)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    dist_write_begin(); /* a SIGTERM from mpirun waits until the file is complete or gone */
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "train_mlp: cannot write %s: %s\n", tmp, strerror(errno));
        dist_write_end();
        return -1;
    }
    fprintf(f, "epoch,train_loss,test_accuracy,loss_scale,skipped_steps,grad_underflow_fraction,"
               "seconds\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "%d,%.6f,%.4f,%.9g,%llu,%.6g,%.3f\n", rows[i].epoch, rows[i].loss, rows[i].acc,
                rows[i].scale, (unsigned long long)rows[i].skipped, rows[i].underflow,
                rows[i].seconds);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "train_mlp: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        dist_write_end();
        return -1;
    }
    dist_write_end();
    return 0;
}

/* Each rank evaluates its part of the test set (predictions are per row, so the split does not
 * change them); the counts are summed exactly. */
static double evaluate(model *m, const mnist_split *test, dist *d)
{
    size_t correct = 0, lo = test->n * (size_t)d->rank / (size_t)d->size,
           hi = test->n * (size_t)(d->rank + 1) / (size_t)d->size;
    for (size_t i = lo; i < hi; i += m->batch) {
        size_t rows = hi - i < m->batch ? hi - i : m->batch;
        model_set_input(m, test->images + i * MNIST_PIXELS, NULL, rows);
        model_forward(m, rows, false, NULL);
        correct += model_correct(m, test->labels + i, rows);
    }
    return (double)dist_sum_u64(d, correct) / (double)test->n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_seconds(void) /* CPU time of the process: all its threads */
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Times of an evaluation: medians over the full batches, in milliseconds, of the forward pass
 * of the model and (when one was given) of a reference model run on the same batches,
 * alternately. wall: elapsed time; cpu: CPU time of the process, which does not count the time
 * other jobs on a shared machine hold the CPU (with one thread, the time the pass computed). */
typedef struct eval_times {
    double ms, ref_ms, cpu_ms, ref_cpu_ms, ref_acc;
    size_t batches;
} eval_times;

static double median(double *t, size_t n)
{
    qsort(t, n, sizeof *t, cmp_double);
    return n == 0 ? 0.0 : n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* --eval: test accuracy of m (the whole test set, one process). With times non-NULL, every
 * full batch's forward pass is timed; with ref non-NULL (times too) ref runs on every batch as
 * well, after m on even batches and before it on odd ones, so both medians see the same machine
 * load (other jobs share this CPU). */
static double evaluate_timed(model *m, const mnist_split *test, model *ref, eval_times *times)
{
    size_t correct = 0, ref_correct = 0, nt = 0, nmax = test->n / m->batch + 1;
    double *t = times ? malloc(4 * nmax * sizeof *t) : NULL; /* wall m, wall ref, cpu m, cpu ref */
    for (size_t i = 0, b = 0; i < test->n; i += m->batch, b++) {
        size_t rows = test->n - i < m->batch ? test->n - i : m->batch;
        for (int pass = 0; pass < (ref && t ? 2 : 1); pass++) {
            model *x = ref && t && (pass ^ (int)(b & 1)) ? ref : m;
            model_set_input(x, test->images + i * MNIST_PIXELS, NULL, rows);
            double t0 = now_seconds(), c0 = cpu_seconds();
            model_forward(x, rows, false, NULL);
            double c1 = cpu_seconds(), t1 = now_seconds();
            if (t && rows == m->batch) {
                t[(x == m ? 0 : 1) * nmax + nt] = t1 - t0;
                t[(x == m ? 2 : 3) * nmax + nt] = c1 - c0;
            }
            size_t c = model_correct(x, test->labels + i, rows);
            if (x == m) correct += c;
            else ref_correct += c;
        }
        if (t && rows == m->batch) nt++;
    }
    if (times) {
        *times = (eval_times){0};
        if (t) {
            times->ms = 1e3 * median(t, nt);
            times->cpu_ms = 1e3 * median(t + 2 * nmax, nt);
            if (ref) {
                times->ref_ms = 1e3 * median(t + nmax, nt);
                times->ref_cpu_ms = 1e3 * median(t + 3 * nmax, nt);
                times->ref_acc = (double)ref_correct / (double)test->n;
            }
            times->batches = nt;
        }
    }
    free(t);
    return (double)correct / (double)test->n;
}

/* Axon's apply_policy(model, p, except: ...): a map whose default is float32 and whose layers
 * selected by sel get p. NULL (message printed) on failure. */
static mxp_policy_map *policy_to_map(const mxp_policy *p, const mxp_layer_select *sel)
{
    mxp_policy full;
    mxp_policy_parse("float32", &full);
    mxp_policy_map *map = mxp_policy_map_new(&full); /* layers left out keep float32 */
    mxp_layer layers[NLAYERS];
    model_layer_list(layers);
    if (!map || mxp_policy_map_apply(map, layers, NLAYERS, p, sel, NULL) != MXP_OK) {
        fprintf(stderr, "train_mlp: applying the policy failed: %s\n", mxp_last_error());
        mxp_policy_map_free(map);
        return NULL;
    }
    return map;
}

/* ---- --eval: evaluate a checkpoint, quantized or not ---------------------------------------- */

/* The policy of every layer for --eval, as a map with one exact key per layer. Base: the
 * --eval-policy applied like --policy (with --except), else the checkpoint's training map, else
 * float32. A layer matched by a key of --eval-map takes that key's policy (and a layer matched
 * by none takes the map's @default when there is one and no --eval-policy). */
static mxp_policy_map *eval_map(const options *o, const mxp_layer_select *sel, const ckpt *c,
                                const mxp_policy_map *over, char *err, size_t cap)
{
    mxp_policy_map *base = NULL, *map = NULL;
    mxp_policy full, p;
    mxp_policy_parse("float32", &full);
    const char *text = ckpt_meta(c, "mixprec.policy_map");
    if (o->eval_policy) {
        mxp_policy_parse(o->eval_policy, &p); /* checked by the caller */
        if (!(base = policy_to_map(&p, sel))) {
            snprintf(err, cap, "cannot build the evaluation policy map");
            return NULL;
        }
    } else if (text) {
        if (mxp_policy_map_parse(text, &base) != MXP_OK) {
            snprintf(err, cap, "%s: metadata mixprec.policy_map: %s", o->eval, mxp_last_error());
            return NULL;
        }
    } else if (!(base = mxp_policy_map_new(&full))) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    mxp_layer layers[NLAYERS];
    model_layer_list(layers);
    map = mxp_policy_map_new(&full);
    bool ok = map != NULL;
    for (int i = 0; i < NLAYERS && ok; i++) {
        ok = mxp_policy_map_get(base, layers[i].path, &p) == MXP_OK;
        mxp_policy po;
        const char *key = NULL;
        if (ok && over) {
            ok = mxp_policy_map_match(over, layers[i].path, &po, &key) == MXP_OK;
            if (ok && (key || (!o->eval_policy && mxp_policy_map_default(over, NULL)))) p = po;
        }
        ok = ok && mxp_policy_map_set(map, layers[i].path, &p) == MXP_OK;
    }
    if (!ok) {
        snprintf(err, cap, "evaluation policies: %s", mxp_last_error());
        mxp_policy_map_free(map);
        map = NULL;
    }
    mxp_policy_map_free(base);
    return map;
}

static int run_eval(const options *o, const mxp_layer_select *sel)
{
    char err[8192];
    mxp_policy ep;
    mxp_policy_map *over = NULL, *map = NULL;
    if (o->eval_policy && mxp_policy_parse(o->eval_policy, &ep) != MXP_OK)
        return bad_usage("bad --eval-policy: %s", mxp_last_error());
    if (o->eval_map && mxp_policy_map_load(o->eval_map, &over) != MXP_OK)
        return bad_usage("bad --eval-map: %s", mxp_last_error());

    ckpt *c = NULL;
    mnist_split test = {0};
    model m, ref;
    bool have_model = false, have_ref = false;
    int rc;
    if (ckpt_open(o->eval, &c, err, sizeof err) != 0) goto fail;
    if (!(map = eval_map(o, sel, c, over, err, sizeof err))) goto fail;
    if (mnist_load(o->data, "t10k", 0, &test, err, sizeof err) != 0) goto fail;
    if (model_init(&m, map, o->batch, o->seed, o->threads, err, sizeof err) != 0) goto fail;
    have_model = true;
    /* float8 layers keep their delayed-scaling state when evaluated with the policies they were
     * trained with (what training's own evaluation did); otherwise float8 is current scaling */
    for (int i = 0; i < NLAYERS; i++) {
        layer *l = &m.L[i];
        char key[96];
        snprintf(key, sizeof key, "mixprec.fp8.%s.x", l->path);
        if (l->op == OP_DENSE && l->pol.quant == MXP_QUANT_FLOAT8 && !o->eval_policy &&
            !ckpt_layer_quantized(c, l->path) && ckpt_meta(c, key) &&
            fp8_attach_layer(&m, l, err, sizeof err) != 0)
            goto fail;
    }
    if (ckpt_load(c, &m, err, sizeof err) != 0) goto fail;
    if (qinfer_quantize_model(&m, o->eval_mx, err, sizeof err) < 0) goto fail;

    /* When layers run quantized from float weights, a float32 model of the same checkpoint runs
     * on the same batches too: its time is the baseline of the speed comparison. */
    bool quantized = false, stored = false;
    for (int i = 0; i < NLAYERS; i++) {
        quantized = quantized || m.L[i].q || m.L[i].fp8;
        stored = stored || ckpt_layer_quantized(c, m.L[i].path);
    }
    if (quantized && !stored) {
        mxp_policy full;
        mxp_policy_parse("float32", &full);
        mxp_policy_map *fmap = mxp_policy_map_new(&full);
        int r = fmap ? model_init(&ref, fmap, o->batch, o->seed, 1, err, sizeof err) : -1;
        mxp_policy_map_free(fmap);
        if (r != 0) {
            if (!fmap) snprintf(err, sizeof err, "out of memory");
            goto fail;
        }
        have_ref = true;
        ref.threads = m.threads; /* uses m's matmul threads (model_free(&ref) must not stop them) */
        if (ckpt_load(c, &ref, err, sizeof err) != 0) goto fail;
    }

    const char *reported = ckpt_meta(c, "mixprec.test_accuracy");
    printf("eval: %s (trained: test_accuracy %s), %zu test images, batch %zu, %d thread%s, "
           "kernels %s\n", o->eval, reported ? reported : "unknown", test.n, o->batch, o->threads,
           o->threads == 1 ? "" : "s", mxp_isa());
    for (int i = 0; i < NLAYERS; i++) {
        const layer *l = &m.L[i];
        char ptext[64], what[96] = "";
        mxp_policy_format(&l->pol, ptext, sizeof ptext);
        if (l->q)
            snprintf(what, sizeof what, "  %s kernel%s, %zu bytes",
                     qformat_name(qdense_format(l->q)),
                     ckpt_layer_quantized(c, l->path) ? " (from the checkpoint)" : "",
                     qdense_bytes(l->q));
        else if (l->fp8)
            snprintf(what, sizeof what, "  float8 with the delayed scales of training");
        else if (l->op == OP_DENSE)
            snprintf(what, sizeof what, "  %s kernel", mxp_dtype_name(l->param[0].dtype));
        printf("  %-13s %s%s\n", l->path, ptext, what);
    }
    eval_times et;
    double acc = evaluate_timed(&m, &test, have_ref ? &ref : NULL, &et);
    printf("eval: test_accuracy=%.4f weight_bytes=%zu batch_ms=%.3f batch_cpu_ms=%.3f", acc,
           qinfer_weight_bytes(&m), et.ms, et.cpu_ms);
    if (have_ref)
        printf(" float32_batch_ms=%.3f float32_batch_cpu_ms=%.3f float32_test_accuracy=%.4f",
               et.ref_ms, et.ref_cpu_ms, et.ref_acc);
    printf(" (median%s of %zu batches of %zu%s)\n", have_ref ? "s" : "", et.batches, o->batch,
           have_ref ? ", the two models alternating" : "");
    rc = 0;
    if (o->check >= 0.0) {
        if (acc < o->check) {
            fprintf(stderr, "train_mlp: check failed: test accuracy %.4f < %.4f\n", acc, o->check);
            rc = 1;
        } else {
            printf("check passed: test accuracy %.4f >= %.4f\n", acc, o->check);
        }
    }
    goto done;
fail:
    fprintf(stderr, "train_mlp: %s\n", err);
    rc = 1;
done:
    if (have_ref) {
        ref.threads = 1;
        model_free(&ref);
    }
    if (have_model) model_free(&m);
    mnist_free(&test);
    mxp_policy_map_free(map);
    mxp_policy_map_free(over);
    ckpt_close(c);
    return rc;
}


static int train(int argc, char **argv, dist *d)
{
    options o = {.dist = &d->opt};
    quiet_usage = d->rank != 0;
    int rc = parse_args(argc, argv, &o);
    if (rc == -1) {
        usage(stdout);
        return 0;
    }
    if (rc != 0) return rc;

    /* ---- policy -> policy map (Axon's apply_policy with except:) ---- */
    mxp_policy policy;
    if (mxp_policy_parse(o.policy, &policy) != MXP_OK)
        return bad_usage("bad --policy: %s", mxp_last_error());
    if (policy.quant == MXP_QUANT_INT8 || policy.quant == MXP_QUANT_INT4)
        return bad_usage("--policy '%s': int8 / int4 policies quantize a trained model: use "
                         "them with --eval-policy (training supports q=float8)", o.policy);
    char derr[256];
    if (dist_validate(d, o.batch, derr, sizeof derr) != 0) return bad_usage("%s", derr);
    if (o.eval && d->size > 1) return bad_usage("%s", "--eval runs in one process (no mpirun)");
    mxp_loss_scale ls;
    if (!parse_loss_scale(o.loss_scale, &ls))
        return bad_usage("bad --loss-scale '%s' (expected none, static:N with N > 0, or "
                         "dynamic[:INITIAL[:PERIOD]] with INITIAL > 0)", o.loss_scale);
    char except_buf[256];
    const char *except_ops[8];
    mxp_layer_select sel = {0};
    if ((rc = parse_except(o.except, except_buf, sizeof except_buf, except_ops, &sel.n_except)))
        return rc;
    sel.except = except_ops;
    if (o.eval) return run_eval(&o, &sel);
    if (o.save && !CKPT_SUPPORTED)
        return bad_usage("%s", "--save: this train_mlp was built without checkpoint support "
                               "(libjansson-dev missing)");

    bool writable = true; /* rank 0 writes the files: its checks stop every rank */
    if (d->rank == 0 && o.csv && check_csv_path(o.csv) != 0) writable = false;
    if (d->rank == 0 && writable && o.save) {
        char msg[4200];
        if (ckpt_check_writable(o.save, msg, sizeof msg) != 0) {
            fprintf(stderr, "train_mlp: %s\n", msg);
            writable = false;
        }
    }
    if (!dist_all(d, writable)) return 1;

    mxp_policy_map *map = policy_to_map(&policy, &sel); /* kept for the checkpoint */
    if (!map) return 1;

    /* ---- data ---- */
    char err[8192];
    mnist_split train = {0}, test = {0};
    bool loaded = mnist_load(o.data, "train", o.limit, &train, err, sizeof err) == 0 &&
                  mnist_load(o.data, "t10k", 0, &test, err, sizeof err) == 0;
    if (!dist_all(d, loaded)) { /* every rank stops when any rank could not read the data */
        if (loaded) snprintf(err, sizeof err, "another rank could not read the data");
        fprintf(stderr, "train_mlp: %s\n", err);
        mnist_free(&test);
        mnist_free(&train);
        mxp_policy_map_free(map);
        return 1;
    }

    /* ---- model ---- */
    model m;
    size_t mbatch = dist_model_batch(&d->opt, d->size, o.batch); /* rows per shard */
    bool built = model_init(&m, map, mbatch, o.seed, o.threads, err, sizeof err) == 0 &&
                 fp8_attach(&m, err, sizeof err) >= 0 && /* q=float8: train in float8 */
                 dist_setup(d, &m, o.batch, err, sizeof err) == 0;
    if (!dist_all(d, built)) {
        if (built) snprintf(err, sizeof err, "another rank could not set up the model");
        fprintf(stderr, "train_mlp: %s\n", err);
        model_free(&m);
        mnist_free(&train);
        mnist_free(&test);
        mxp_policy_map_free(map);
        return 1;
    }

    mxp_fp8_scaler *fp8s[NLAYERS * FP8_NSCALERS]; /* every float8 scaler, layer order */
    size_t nfp8s = 0;
    for (int i = 0; i < NLAYERS; i++)
        for (int k = 0; k < FP8_NSCALERS; k++)
            if (fp8_scaler(&m.L[i], k)) fp8s[nfp8s++] = fp8_scaler(&m.L[i], k);

    char ptext[64];
    mxp_policy_format(&policy, ptext, sizeof ptext);
    printf("train_mlp: policy %s, except [%s], loss scale %s, %zu train / %zu test images, "
           "batch %zu, %d thread%s, kernels %s\n",
           ptext, o.except, o.loss_scale, train.n, test.n, o.batch, o.threads,
           o.threads == 1 ? "" : "s", mxp_isa());
    for (int i = 0; i < NLAYERS; i++) {
        mxp_policy_format(&m.L[i].pol, ptext, sizeof ptext);
        printf("  %-13s %s%s\n", m.L[i].path, ptext,
               m.L[i].fp8 ? "  (float8 products: e4m3fn x and kernel, e5m2 gradient)" : "");
    }
    printf("  activations: %zu bytes per batch of %zu\n", m.activation_bytes, mbatch);
    if (d->shards)
        printf("  data-parallel: %zu shards of the batch over %d rank%s (batch norm per shard)\n",
               d->shards, d->size, d->size == 1 ? "" : "s");

    /* ---- training ---- */
    float *dlogits = malloc(o.batch * MNIST_CLASSES * sizeof *dlogits);    /* [B,10] */
    size_t *order = malloc(train.n * sizeof *order);                       /* [n] shuffled */
    uint8_t *batch_labels = malloc(o.batch);                               /* [B] */
    csv_row *rows_out = calloc((size_t)o.epochs, sizeof *rows_out);
    if (!dlogits || !order || !batch_labels || !rows_out) {
        fprintf(stderr, "train_mlp: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < train.n; i++) order[i] = i;
    uint64_t shuffle_rng = o.seed ^ 0x53485546464C45ull, dropout_rng = o.seed ^ 0x44524F504F5554ull;
    uint64_t skipped = 0, scale_changes = 0, step = 0;
    double acc = 0.0;
    rc = 0;
    for (int epoch = 1; epoch <= o.epochs; epoch++) {
        double t0 = now_seconds(), loss_sum = 0.0;
        size_t nsteps = 0;
        underflow_stats u = {0};
        for (size_t i = train.n - 1; i > 0; i--) { /* Fisher-Yates shuffle */
            size_t j = (size_t)(rng_next(&shuffle_rng) % (i + 1)); /* bias < 2^-45: fine */
            size_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (size_t b = 0; b < train.n; b += o.batch) {
            size_t rows = train.n - b < o.batch ? train.n - b : o.batch;
            if (rows < 2 || rows < 2 * d->shards) break; /* batch norm needs two rows (a shard) */
            dist_maybe_die(d, step);
            float before = ls.scale, loss;
            bool finite;
            u.active = step % UNDERFLOW_SAMPLE_EVERY == 0;
            if (d->shards) { /* data-parallel: dist.c; m.grad = the combined gradient */
                dist_step_out so;
                dist_step(d, &m, &train, order + b, rows, &dropout_rng, u.active, &ls, step, &so);
                loss = so.loss;
                u.lost += so.lost;
                u.total += so.total;
                finite = so.finite;
            } else {
                model_set_input(&m, train.images, order + b, rows);
                for (size_t r = 0; r < rows; r++) batch_labels[r] = train.labels[order[b + r]];

                model_forward(&m, rows, true, &dropout_rng);
                loss = model_loss(&m, batch_labels, rows, ls.scale, dlogits);
                model_backward(&m, dlogits, rows, &u);
                dist_inject(d, step, &m);

                finite = model_unscale_grads(&m, ls.scale); /* -> float32 masters / scale */
                ls = mxp_loss_scale_adjust(ls, finite);
            }
            loss_sum += (double)loss;
            scale_changes += ls.scale != before;
            if (finite) model_adam_step(&m, o.lr);
            else skipped++;
            /* this step's amaxes: the MAX over every rank's shards (nothing for 0 scalers) */
            if (d->shards) dist_fp8_sync(d, fp8s, nfp8s);
            fp8_step_end(&m); /* float8 layers: roll the amax histories, next scales */
            if (dist_fp8_check(d, fp8s, nfp8s, step) != 0 || /* --verify-ranks */
                dist_after_step(d, &m, step, loss, before, &ls, finite, skipped) != 0) {
                rc = 1;
                break;
            }
            nsteps++;
            step++;
        }
        if (rc) break;
        acc = evaluate(&m, &test, d);
        double secs = now_seconds() - t0;
        csv_row *r = &rows_out[epoch - 1];
        *r = (csv_row){epoch, loss_sum / (double)nsteps, acc, (double)ls.scale,
                       u.total ? (double)u.lost / (double)u.total : 0.0, secs, skipped};
        printf("epoch %d  train_loss %.4f  test_accuracy %.4f  loss_scale %g  skipped %llu  "
               "underflow %.4g  %.1fs\n",
               epoch, r->loss, acc, r->scale, (unsigned long long)skipped, r->underflow, secs);
        fflush(stdout);
        if (!dist_all(d, !o.csv || d->rank != 0 || write_csv(o.csv, rows_out, epoch) == 0)) {
            rc = 1; /* every rank stops when rank 0 could not write */
            break;
        }
    }
    printf("summary: test_accuracy=%.4f loss_scale=%g skipped_steps=%llu scale_changes=%llu "
           "activation_bytes=%zu\n",
           acc, (double)ls.scale, (unsigned long long)skipped, (unsigned long long)scale_changes,
           m.activation_bytes);
    if (rc == 0 && o.save && d->rank == 0) {
        ckpt_info info = {map, ls, acc, o.epochs, o.seed, train.n};
        dist_write_begin(); /* a SIGTERM from mpirun waits until the checkpoint is complete */
        int saved = ckpt_save(o.save, &m, &info, err, sizeof err);
        dist_write_end();
        if (saved != 0) {
            fprintf(stderr, "train_mlp: %s\n", err);
            rc = 1;
        } else {
            printf("saved: %s\n", o.save);
        }
    }

    if (rc == 0 && o.check >= 0.0) {
        if (acc < o.check) {
            fprintf(stderr, "train_mlp: check failed: test accuracy %.4f < %.4f\n", acc, o.check);
            rc = 1;
        } else if (ls.kind == MXP_LOSS_SCALE_DYNAMIC && scale_changes == 0) {
            fprintf(stderr, "train_mlp: check failed: the dynamic loss scale never changed\n");
            rc = 1;
        } else {
            printf("check passed: test accuracy %.4f >= %.4f%s\n", acc, o.check,
                   ls.kind == MXP_LOSS_SCALE_DYNAMIC ? ", dynamic loss scale changed" : "");
        }
    }
    dist_trace_final(d, &m, acc, &ls, skipped);
    free(dlogits);
    free(order);
    free(batch_labels);
    free(rows_out);
    mxp_policy_map_free(map);
    model_free(&m);
    mnist_free(&train);
    mnist_free(&test);
    return rc;
}

int main(int argc, char **argv)
{
    dist d;
    if (dist_init(&argc, &argv, &d) != 0) return 1;
    int rc = train(argc, argv, &d);
    return dist_finish(&d, rc);
}
