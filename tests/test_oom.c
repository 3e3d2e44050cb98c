/*
 * test_oom.c - every allocation the library makes can fail, and each failure is handled: the call
 * returns MXP_ENOMEM with a message headed by the function called, frees what it allocated, and
 * leaves its inputs as they were (a map, a tree, an existing file); or, where the allocation is
 * only an optimisation (the policy map's lookup cache, the converter's worker threads), the call
 * succeeds with the same result.
 *
 * How: this program is linked with -Wl,--wrap for malloc, calloc, realloc, aligned_alloc,
 * posix_memalign, free, strdup, strndup (tests/oom_wrap.h) and pthread_create
 * (tests/CMakeLists.txt), so every such call in the library's objects comes here first. A
 * scenario is a short sequence of library calls. It runs once to count its allocations, then
 * once per allocation k with the k-th allocation failing ("one"), and once per k with every
 * allocation from the k-th on failing ("rest", the way a process runs out of memory). Each run must end with exactly the blocks it started with.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>

#include "mixprec.h"
#include "test_util.h"

/* ---- the allocator wrappers (oom_wrap.h) and pthread_create ------------------------------------ */

#include "oom_wrap.h"

int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);

static struct {
    int no_threads; /* pthread_create fails */
    long tries;
} thr = {0, 0};

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    thr.tries++;
    if (thr.no_threads) return EAGAIN;
    return __real_pthread_create(t, a, fn, arg);
}

/* ---- the sweep ------------------------------------------------------------------------------ */

/* A scenario returns the status of the call under test, checks what it can of the results and of
 * its inputs' state itself (cmocka asserts), and frees everything it made, on every path. */
typedef mxp_status (*scenario_fn)(void *ctx);

typedef struct scenario {
    const char *name;
    scenario_fn fn;
    const char *const *heads; /* NULL-terminated: the functions that may head the message */
    int may_succeed;          /* an injected failure may still give MXP_OK (optional allocations) */
} scenario;

static int has_head(const char *msg, const char *const *heads)
{
    for (size_t i = 0; heads[i]; i++) {
        const size_t n = strlen(heads[i]);
        if (strncmp(msg, heads[i], n) == 0 && strncmp(msg + n, ": ", 2) == 0) return 1;
    }
    return 0;
}

static long run_once(const scenario *sc, void *ctx, long fail_at, int rest, mxp_status *st)
{
    mxp_clear_error();
    return oom_run(sc->name, sc->fn, ctx, fail_at, rest, st);
}

/* Run sc with no failure, then with each allocation failing, alone and with every later one.
 * Returns the number of allocations the clean run made. */
static long sweep(const scenario *sc, void *ctx)
{
    mxp_status st;
    const long total = run_once(sc, ctx, -1, 0, &st);
    if (st != MXP_OK) fail_msg("%s: fails with no allocation failing: %s", sc->name, mxp_last_error());
    for (int rest = 0; rest <= 1; rest++) {
        for (long k = 0; k < total; k++) {
            run_once(sc, ctx, k, rest, &st);
            if (oom.failed == 0) /* the allocations before k are the clean run's, so k is reached */
                fail_msg("%s: allocation %ld of %ld was not made this time", sc->name, k, total);
            if (st == MXP_OK) {
                if (!sc->may_succeed)
                    fail_msg("%s: allocation %ld of %ld failed, and the call still returned MXP_OK",
                             sc->name, k, total);
                continue;
            }
            const char *msg = mxp_last_error();
            if (st != MXP_ENOMEM)
                fail_msg("%s: allocation %ld of %ld failed: %s instead of MXP_ENOMEM (\"%s\")", sc->name, k,
                         total, mxp_status_name(st), msg);
            if (!has_head(msg, sc->heads))
                fail_msg("%s: allocation %ld of %ld failed: message \"%s\" is not headed by %s", sc->name, k,
                         total, msg, sc->heads[0]);
            if (!strstr(msg, "memory") && !strstr(msg, "allocate"))
                fail_msg("%s: allocation %ld of %ld failed: message \"%s\" does not say memory ran out",
                         sc->name, k, total, msg);
        }
    }
    return total;
}

/* ---- policy maps ---------------------------------------------------------------------------- */

static mxp_policy pol(const char *text)
{
    mxp_policy p;
    assert_int_equal(mxp_policy_parse(text, &p), MXP_OK);
    return p;
}

/* A map parsed, and freed, outside the count (the scenario's own setup) */
static mxp_policy_map *parse_quiet(const char *text)
{
    const int armed = oom.armed;
    oom.armed = 0;
    mxp_policy_map *m = NULL;
    assert_int_equal(mxp_policy_map_parse(text, &m), MXP_OK);
    oom.armed = armed;
    return m;
}

static void free_quiet(mxp_policy_map *m)
{
    const int armed = oom.armed;
    oom.armed = 0;
    mxp_policy_map_free(m);
    oom.armed = armed;
}

/* A map text with a default, exact keys, regex keys and a quoted key. */
static const char map_text[] = "@default = p=f32,c=bf16,o=f32\n"
                               "encoder/layer_0/dense = f32\n"
                               "encoder/layer_1/dense = c=f16\n"
                               "\"odd key # with hash\" = bf16\n"
                               ".*/norm(_[0-9]+)? = f32\n"
                               "decoder/(attn|mlp)/.* = c=f16,o=f32\n";

typedef struct map_ctx {
    mxp_policy_map *ref; /* parsed once, with no failures */
    const char *text;
    char dir[64];        /* a scratch directory for load/save */
} map_ctx;

/* A map made by the call under test (parse, load): on failure *out stayed at its sentinel 0x1,
 * on success it equals ref (then freed). */
static mxp_status check_map(mxp_status s, mxp_policy_map *m, const mxp_policy_map *ref)
{
    if (s != MXP_OK) {
        assert_ptr_equal(m, (mxp_policy_map *)0x1);
        return s;
    }
    assert_true(mxp_policy_map_equal(m, ref));
    mxp_policy_map_free(m);
    return s;
}

static mxp_status sc_map_parse(void *vctx)
{
    map_ctx *c = vctx;
    mxp_policy_map *m = (mxp_policy_map *)0x1; /* must stay as it is on failure */
    mxp_status s = mxp_policy_map_parse(c->text, &m);
    return check_map(s, m, c->ref);
}

/* get / match through the regex keys and the cache (the cache may fail: the answer must not) */
static mxp_status sc_map_get(void *vctx)
{
    map_ctx *c = vctx;
    static const char *const paths[] = {"encoder/layer_0/dense", "encoder/block/norm_3", "decoder/mlp/w1",
                                        "odd key # with hash", "unmatched/path", "encoder/block/norm_3"};
    static const char *const want[] = {"f32", "f32", "c=f16,o=f32", "bf16", "p=f32,c=bf16,o=f32", "f32"};
    mxp_policy_map *m = parse_quiet(c->text); /* a fresh map each run, so that its cache is cold */
    mxp_status s = MXP_OK;
    for (size_t i = 0; i < sizeof paths / sizeof *paths && s == MXP_OK; i++) {
        mxp_policy out = pol("f16"), before = out;
        const char *key = "untouched";
        s = mxp_policy_map_match(m, paths[i], &out, &key);
        if (s != MXP_OK) {
            assert_true(mxp_policy_equal(&out, &before));
            assert_string_equal(key, "untouched");
            break;
        }
        mxp_policy w = pol(want[i]);
        assert_true(mxp_policy_equal(&out, &w));
    }
    free_quiet(m);
    return s;
}

/* set: an exact key, a regex key, then a remove and set again; on failure the map is as before */
static mxp_status sc_map_set(void *vctx)
{
    map_ctx *c = vctx;
    mxp_policy_map *m = parse_quiet(c->text), *before = parse_quiet(c->text);
    static const char *const keys[] = {"head/out", "head/(q|k|v)_proj/[a-z]+", "x", "y[0-9]*"};
    const mxp_policy p = pol("c=f16");
    mxp_status s = MXP_OK;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        s = mxp_policy_map_set(m, keys[i], &p);
        if (s != MXP_OK) break;
        oom.armed = 0;
        assert_int_equal(mxp_policy_map_set(before, keys[i], &p), MXP_OK);
        oom.armed = 1;
    }
    assert_true(mxp_policy_map_equal(m, before)); /* unchanged by the failing set */
    free_quiet(m);
    free_quiet(before);
    return s;
}

/* a map with many keys: the entry array, the regex list and the key index all grow */
static mxp_status sc_map_grow(void *vctx)
{
    (void)vctx;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    if (!m) return MXP_ENOMEM;
    const mxp_policy p = pol("bf16");
    mxp_status s = MXP_OK;
    char key[32];
    size_t i = 0;
    for (; i < 40 && s == MXP_OK; i++) {
        snprintf(key, sizeof key, i % 2 ? "layer_%zu/w" : "layer_%zu/.*", i);
        s = mxp_policy_map_set(m, key, &p);
    }
    oom.armed = 0;
    assert_int_equal(mxp_policy_map_count(m), s == MXP_OK ? i : i - 1);
    mxp_policy_map_free(m);
    oom.armed = 1;
    return s;
}

/* a regex over ~400 states: matching needs heap scratch (get, and the ambiguous-key message) */
static mxp_status sc_map_big_regex(void *vctx)
{
    (void)vctx;
    static const char big[] = "([ab]{225}){2}.*"; /* intervals copy their operand: ~450 states */
    mxp_policy_map *m = NULL;
    oom.armed = 0;
    m = mxp_policy_map_new(NULL);
    assert_non_null(m);
    const mxp_policy p = pol("f16"), q = pol("bf16");
    assert_int_equal(mxp_policy_map_set(m, big, &p), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, "a.*", &q), MXP_OK);
    assert_int_equal(mxp_policy_map_set_cache_capacity(m, 0), MXP_OK);
    char path[500];
    memset(path, 'b', 480);
    path[480] = '\0';
    oom.armed = 1;
    mxp_policy out;
    mxp_status s = mxp_policy_map_get(m, path, &out);
    if (s == MXP_OK) {
        assert_true(mxp_policy_equal(&out, &p));
        path[0] = 'a'; /* both keys match */
        s = mxp_policy_map_get(m, path, &out);
        if (s == MXP_EAMBIGUOUS) s = MXP_OK;
        else if (s == MXP_OK) fail_msg("a path both keys match was not reported ambiguous");
    }
    free_quiet(m);
    return s;
}

/* apply: on failure the map is as before */
static mxp_status sc_map_apply(void *vctx)
{
    map_ctx *c = vctx;
    mxp_policy_map *m = parse_quiet(c->text), *before = parse_quiet(c->text);
    static const mxp_layer layers[] = {{"encoder/layer_0/dense", "dense"}, {"encoder/layer_0/bn", "batch_norm"},
                                       {"encoder/layer_2/dense", "dense"}, {"head/out", "dense"},
                                       {"encoder/layer_2/dense", "dense"}};
    static const char *const except[] = {"batch_norm"};
    const mxp_layer_select sel = {NULL, 0, except, 1, NULL, NULL};
    const mxp_policy p = pol("c=f16");
    size_t applied = 99;
    mxp_status s = mxp_policy_map_apply(m, layers, 5, &p, &sel, &applied);
    oom.armed = 0;
    if (s == MXP_OK) {
        assert_int_equal(applied, 4); /* the selected layers, the repeat included */
        assert_int_equal(mxp_policy_map_count(m), mxp_policy_map_count(before) + 2);
    } else {
        assert_int_equal(applied, 99);
        assert_true(mxp_policy_map_equal(m, before));
    }
    mxp_policy_map_free(m);
    mxp_policy_map_free(before);
    oom.armed = 1;
    return s;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[8192];
    *len = fread(buf, 1, sizeof buf - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* names in dir other than keep */
static size_t strays(const char *dir, const char *keep)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, keep)) n++;
    closedir(d);
    return n;
}

/* save over an existing file: on failure the old file is whole and no temporary file is left */
static mxp_status sc_map_save(void *vctx)
{
    map_ctx *c = vctx;
    char path[96];
    snprintf(path, sizeof path, "%s/map.txt", c->dir);
    static const char old[] = "# the previous map\nkeep/me = f16\n";
    oom.armed = 0;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(old, 1, sizeof old - 1, f), sizeof old - 1);
    assert_int_equal(fclose(f), 0);
    oom.armed = 1;
    mxp_status s = mxp_policy_map_save(c->ref, path);
    oom.armed = 0;
    size_t len = 0;
    const char *now = slurp(path, &len);
    assert_non_null(now);
    if (s != MXP_OK) {
        assert_int_equal(len, sizeof old - 1);
        assert_memory_equal(now, old, len);
    } else {
        mxp_policy_map *back = NULL;
        assert_int_equal(mxp_policy_map_parse(now, &back), MXP_OK);
        assert_true(mxp_policy_map_equal(back, c->ref));
        mxp_policy_map_free(back);
    }
    assert_int_equal(strays(c->dir, "map.txt"), 0);
    oom.armed = 1;
    return s;
}

static mxp_status sc_map_load(void *vctx)
{
    map_ctx *c = vctx;
    char path[96];
    snprintf(path, sizeof path, "%s/load.txt", c->dir);
    oom.armed = 0;
    if (access(path, F_OK) != 0) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fputs(c->text, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
    }
    oom.armed = 1;
    mxp_policy_map *m = (mxp_policy_map *)0x1;
    mxp_status s = mxp_policy_map_load(path, &m);
    return check_map(s, m, c->ref);
}

/* A FIFO is read in chunks that grow: a writer thread feeds it a map padded past the first
 * 64 KiB chunk with comment lines. */
typedef struct fifo_feed {
    const char *path;
    const char *text;
} fifo_feed;

static void *feed_fifo(void *arg)
{
    const fifo_feed *f = arg;
    const int fd = open(f->path, O_WRONLY); /* blocks until a reader opens it */
    if (fd < 0) return NULL;
    static char pad[81];
    memset(pad, ' ', 80);
    pad[0] = '#';
    pad[79] = '\n';
    int ok = 1;
    for (int i = 0; i < 2000 && ok; i++) ok = write(fd, pad, 80) == 80; /* EPIPE once the reader gave up */
    if (ok) ok = write(fd, f->text, strlen(f->text)) >= 0;
    close(fd);
    return NULL;
}

static mxp_status sc_map_load_fifo(void *vctx)
{
    map_ctx *c = vctx;
    char path[96];
    snprintf(path, sizeof path, "%s/fifo", c->dir);
    oom.armed = 0;
    if (access(path, F_OK) != 0) assert_int_equal(mkfifo(path, 0600), 0);
    fifo_feed feed = {path, c->text};
    pthread_t writer;
    assert_int_equal(pthread_create(&writer, NULL, feed_fifo, &feed), 0);
    oom.armed = 1;
    mxp_policy_map *m = (mxp_policy_map *)0x1;
    mxp_status s = mxp_policy_map_load(path, &m);
    oom.armed = 0;
    /* a load that failed before opening the FIFO left the writer waiting for a reader */
    const int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd >= 0) close(fd);
    assert_int_equal(pthread_join(writer, NULL), 0);
    oom.armed = 1;
    return check_map(s, m, c->ref);
}

static mxp_status sc_map_new(void *vctx)
{
    (void)vctx;
    const mxp_policy p = pol("bf16");
    mxp_policy_map *m = mxp_policy_map_new(&p);
    if (!m) return MXP_ENOMEM;
    mxp_policy_map_free(m);
    return MXP_OK;
}

static const char *const heads_parse[] = {"mxp_policy_map_parse", NULL};
static const char *const heads_get[] = {"mxp_policy_map_match", "mxp_policy_map_get", NULL};
static const char *const heads_set[] = {"mxp_policy_map_set", NULL};
static const char *const heads_apply[] = {"mxp_policy_map_apply", NULL};
static const char *const heads_save[] = {"mxp_policy_map_save", NULL};
static const char *const heads_load[] = {"mxp_policy_map_load", NULL};
static const char *const heads_new[] = {"mxp_policy_map_new", "mxp_policy_map_set", NULL};

static void test_policy_map_oom(void **state)
{
    (void)state;
    map_ctx c = {NULL, map_text, "/tmp/mxp_oom_XXXXXX"};
    signal(SIGPIPE, SIG_IGN); /* the FIFO's writer sees EPIPE, not a signal, when a load fails */
    assert_non_null(mkdtemp(c.dir));
    assert_int_equal(mxp_policy_map_parse(map_text, &c.ref), MXP_OK);
    const scenario list[] = {
        {"mxp_policy_map_new", sc_map_new, heads_new, 0},
        {"mxp_policy_map_parse", sc_map_parse, heads_parse, 0},
        {"mxp_policy_map_match (cold cache)", sc_map_get, heads_get, 1},
        {"mxp_policy_map_set", sc_map_set, heads_set, 0},
        {"mxp_policy_map_set x40", sc_map_grow, heads_new, 0},
        {"mxp_policy_map_get (heap scratch)", sc_map_big_regex, heads_get, 0},
        {"mxp_policy_map_apply", sc_map_apply, heads_apply, 0},
        {"mxp_policy_map_save", sc_map_save, heads_save, 0},
        {"mxp_policy_map_load", sc_map_load, heads_load, 0},
        {"mxp_policy_map_load (FIFO)", sc_map_load_fifo, heads_load, 0},
    };
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) {
        const long n = sweep(&list[i], &c);
        if (getenv("MXP_TEST_VERBOSE")) printf("# %s: %ld allocations, each failed\n", list[i].name, n);
        assert_true(n > 0);
    }
    char path[96];
    snprintf(path, sizeof path, "%s/map.txt", c.dir);
    remove(path);
    snprintf(path, sizeof path, "%s/load.txt", c.dir);
    remove(path);
    snprintf(path, sizeof path, "%s/fifo", c.dir);
    remove(path);
    assert_int_equal(rmdir(c.dir), 0);
    mxp_policy_map_free(c.ref);
}

/* ---- trees ---------------------------------------------------------------------------------- */

enum { NT = 12 };

/* a tree of NT float32 tensors (one an int8 one, left alone by casts), values i + j / 8 */
static mxp_status build_tree(mxp_tree **out, float *borrowed)
{
    mxp_tree *t = mxp_tree_new();
    if (!t) return MXP_ENOMEM;
    float data[6];
    for (int i = 0; i < NT; i++) {
        char name[32];
        snprintf(name, sizeof name, "block_%d/w", i);
        const size_t shape[2] = {2, 3};
        for (int j = 0; j < 6; j++) data[j] = (float)i + (float)j / 8.0f;
        mxp_status s;
        if (i == 3) {
            const int8_t q[6] = {1, -2, 3, -4, 5, -6};
            s = mxp_tree_add(t, "block_3/q", MXP_INT8, 2, shape, q);
        } else if (i == 5 && borrowed) {
            memcpy(borrowed, data, sizeof data);
            s = mxp_tree_add_borrowed(t, name, MXP_FLOAT32, 2, shape, borrowed);
        } else {
            s = mxp_tree_add(t, name, MXP_FLOAT32, 2, shape, data);
        }
        if (s != MXP_OK) {
            assert_int_equal(mxp_tree_count(t), (size_t)i); /* the failed add changed nothing */
            mxp_tree_free(t);
            return s;
        }
    }
    *out = t;
    return MXP_OK;
}

/* every float tensor of t holds i + j / 8 in dtype dt (the int8 one its own bytes) */
static void check_tree(const mxp_tree *t, mxp_dtype dt)
{
    assert_int_equal(mxp_tree_count(t), NT);
    for (size_t i = 0; i < NT; i++) {
        const mxp_tensor *x = mxp_tree_at(t, i);
        assert_non_null(x);
        if (i == 3) {
            assert_int_equal(x->dtype, MXP_INT8);
            assert_int_equal(((const int8_t *)x->data)[5], -6);
            continue;
        }
        assert_int_equal(x->dtype, dt);
        float back[6];
        assert_int_equal(mxp_convert(back, MXP_FLOAT32, x->data, dt, 6), MXP_OK);
        for (int j = 0; j < 6; j++) assert_true(back[j] == (float)i + (float)j / 8.0f);
    }
}

static mxp_status sc_tree_build(void *vctx)
{
    (void)vctx;
    float borrowed[6];
    mxp_tree *t = NULL;
    mxp_status s = build_tree(&t, borrowed);
    if (s != MXP_OK) return s;
    check_tree(t, MXP_FLOAT32);
    assert_ptr_equal(mxp_tree_at(t, 5)->data, borrowed);
    mxp_tree_free(t);
    return s;
}

typedef mxp_status (*tree_op)(const mxp_tree *src, mxp_tree **out);

static mxp_status op_clone(const mxp_tree *src, mxp_tree **out) { return mxp_tree_clone(src, out); }
static mxp_status op_cast(const mxp_tree *src, mxp_tree **out) { return mxp_tree_cast(src, MXP_BFLOAT16, out); }
static mxp_status op_cast_ex(const mxp_tree *src, mxp_tree **out)
{
    const mxp_convert_opts o = {MXP_ROUND_NEAREST_EVEN, true, 0, 2};
    return mxp_tree_cast_ex(src, MXP_FLOAT16, &o, out);
}
static mxp_status op_half(const mxp_tree *src, mxp_tree **out) { return mxp_tree_cast_to_half(src, out); }
static mxp_status op_compute(const mxp_tree *src, mxp_tree **out)
{
    const mxp_policy p = pol("p=f32,c=bf16,o=f32");
    return mxp_policy_cast_to_compute(&p, src, out);
}

static const mxp_dtype op_dtype[] = {MXP_FLOAT32, MXP_BFLOAT16, MXP_FLOAT16, (mxp_dtype)MXP_DTYPE_COUNT, MXP_BFLOAT16};
static const tree_op ops[] = {op_clone, op_cast, op_cast_ex, op_half, op_compute};
static size_t cur_op;

static mxp_status sc_tree_op(void *vctx)
{
    const mxp_tree *src = vctx;
    mxp_tree *out = (mxp_tree *)0x1;
    mxp_status s = ops[cur_op](src, &out);
    if (s != MXP_OK) {
        assert_ptr_equal(out, (mxp_tree *)0x1);
        return s;
    }
    const mxp_dtype dt = op_dtype[cur_op];
    check_tree(out, dt == (mxp_dtype)MXP_DTYPE_COUNT ? mxp_half_dtype(mxp_get_backend()) : dt);
    mxp_tree_free(out);
    check_tree(src, MXP_FLOAT32);
    return s;
}

static void test_tree_oom(void **state)
{
    (void)state;
    static const char *const heads_build[] = {"mxp_tree_new", "mxp_tree_add", "mxp_tree_add_borrowed", NULL};
    const scenario build = {"mxp_tree_new/add/add_borrowed", sc_tree_build, heads_build, 0};
    assert_true(sweep(&build, NULL) > NT);

    float borrowed[6];
    mxp_tree *src = NULL;
    assert_int_equal(build_tree(&src, borrowed), MXP_OK);
    static const char *const names[] = {"mxp_tree_clone", "mxp_tree_cast", "mxp_tree_cast_ex", "mxp_tree_cast_to_half",
                                        "mxp_policy_cast_to_compute"};
    for (cur_op = 0; cur_op < sizeof ops / sizeof *ops; cur_op++) {
        const char *const heads[] = {names[cur_op], NULL};
        const scenario sc = {names[cur_op], sc_tree_op, heads, 0};
        assert_true(sweep(&sc, src) > NT);
    }
    mxp_tree_free(src);
}

/* ---- float8 scalers, int8 matmul ------------------------------------------------------------ */

static mxp_status sc_scaler(void *vctx)
{
    (void)vctx;
    mxp_fp8_recipe r = mxp_fp8_recipe_default(MXP_FLOAT8_E4M3FN);
    r.history_len = 16;
    mxp_fp8_scaler *s = (mxp_fp8_scaler *)0x1;
    mxp_status st = mxp_fp8_scaler_new(&r, &s);
    if (st != MXP_OK) {
        assert_ptr_equal(s, (mxp_fp8_scaler *)0x1);
        return st;
    }
    oom.armed = 0;
    assert_int_equal(mxp_fp8_scaler_set_amax(s, 3.0f), MXP_OK);
    assert_int_equal(mxp_fp8_scaler_update(s), MXP_OK);
    char text[4096];
    const int n = mxp_fp8_scaler_save(s, text, sizeof text);
    assert_true(n > 0 && (size_t)n < sizeof text);
    oom.armed = 1;
    mxp_fp8_scaler *back = (mxp_fp8_scaler *)0x1;
    st = mxp_fp8_scaler_restore(text, &back);
    if (st == MXP_OK) {
        assert_true(mxp_fp8_scaler_scale(back) == mxp_fp8_scaler_scale(s));
        mxp_fp8_scaler_free(back);
    } else {
        assert_ptr_equal(back, (mxp_fp8_scaler *)0x1);
    }
    mxp_fp8_scaler_free(s);
    return st;
}

enum { MM = 40, MK = 300, MN = 70 };

static mxp_status sc_matmul(void *vctx)
{
    (void)vctx;
    static int8_t a[MM * MK], b[MK * MN];
    static float sa[MM], sb[MN], y[MM * MN], want[MM * MN];
    uint64_t rng = 42;
    for (size_t i = 0; i < sizeof a; i++) a[i] = (int8_t)(tu_rand64(&rng) % 255 - 127);
    for (size_t i = 0; i < sizeof b; i++) b[i] = (int8_t)(tu_rand64(&rng) % 255 - 127);
    for (size_t i = 0; i < MM; i++) sa[i] = 1.0f / 64;
    for (size_t i = 0; i < MN; i++) sb[i] = 1.0f / 128;
    for (size_t i = 0; i < MM; i++)
        for (size_t j = 0; j < MN; j++) {
            long acc = 0;
            for (size_t k = 0; k < MK; k++) acc += (long)a[i * MK + k] * b[k * MN + j];
            want[i * MN + j] = (float)acc / (sa[i] * sb[j]); /* exact: |acc| < 2^24, powers of 2 */
        }
    for (size_t i = 0; i < MM * MN; i++) y[i] = -1.0f;
    mxp_status s = mxp_matmul_int8(y, MXP_FLOAT32, a, sa, b, sb, MM, MK, MN);
    if (s != MXP_OK) {
        for (size_t i = 0; i < MM * MN; i++) assert_true(y[i] == -1.0f); /* nothing written */
        return s;
    }
    for (size_t i = 0; i < MM * MN; i++) assert_true(y[i] == want[i]);
    return s;
}

static void test_quant_oom(void **state)
{
    (void)state;
    static const char *const heads_scaler[] = {"mxp_fp8_scaler_new", "mxp_fp8_scaler_restore", NULL};
    static const char *const heads_mm[] = {"mxp_matmul_int8", NULL};
    const scenario scaler = {"mxp_fp8_scaler_new/restore", sc_scaler, heads_scaler, 0};
    const scenario mm = {"mxp_matmul_int8", sc_matmul, heads_mm, 0};
    assert_true(sweep(&scaler, NULL) >= 2);
    sweep(&mm, NULL); /* small products may use no heap at all */
}

/* ---- worker threads that cannot start -------------------------------------------------------- */

/* Runs first, before anything in this process has started the converter's workers: with
 * pthread_create failing, a threaded conversion runs on the calling thread and is still exact. */
static void test_threads_refused(void **state)
{
    (void)state;
    const size_t n = (size_t)1 << 24;
    float *src = malloc(n * sizeof *src);
    uint16_t *dst = malloc(n * sizeof *dst), *want = malloc(n * sizeof *want);
    assert_true(src && dst && want);
    for (size_t i = 0; i < n; i++) src[i] = tu_f32(tu_fmix32((uint32_t)i));
    assert_int_equal(mxp_convert(want, MXP_BFLOAT16, src, MXP_FLOAT32, n), MXP_OK);
    thr.no_threads = 1;
    thr.tries = 0;
    const mxp_convert_opts o = {MXP_ROUND_NEAREST_EVEN, false, 0, 4};
    memset(dst, 0xAA, n * sizeof *dst);
    assert_int_equal(mxp_convert_ex(dst, MXP_BFLOAT16, src, MXP_FLOAT32, n, &o), MXP_OK);
    thr.no_threads = 0;
    assert_memory_equal(dst, want, n * sizeof *dst);
    if (thr.tries == 0)
        print_message("# note: no worker was started (the pool was already running or the call stayed "
                      "single-threaded): refused threads not exercised\n");
    /* once threads can start again, the next threaded call uses them and agrees */
    memset(dst, 0x55, n * sizeof *dst);
    assert_int_equal(mxp_convert_ex(dst, MXP_BFLOAT16, src, MXP_FLOAT32, n, &o), MXP_OK);
    assert_memory_equal(dst, want, n * sizeof *dst);
    free(src);
    free(dst);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_refused),
        cmocka_unit_test(test_policy_map_oom),
        cmocka_unit_test(test_tree_oom),
        cmocka_unit_test(test_quant_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
