/*
 * test_safetensors_oom.c - every allocation the safetensors reader / writer (tools/safetensors.c)
 * makes can fail, and each failure is handled: the call returns MXP_ENOMEM with a message saying
 * memory ran out (mxst_last_error), frees everything it allocated, leaves *out as it was, and
 * leaves the file system as it was: no output file, an existing output whole byte for byte, no
 * temporary file. mxst_index_json, whose documented failure is NULL, must return NULL. Without a
 * failure every call gives the right result (names, dtypes, shapes, offsets, data, metadata).
 *
 * How: like tests/test_oom.c. This program is linked with -Wl,--wrap for malloc, calloc,
 * realloc, aligned_alloc, posix_memalign, free, strdup and strndup (tests/oom_wrap.h), so
 * every such call in the objects it links (mixprec_safetensors' included) comes here first. That
 * covers jansson too: safetensors.c gives jansson its own budget_malloc / budget_free
 * (json_set_alloc_funcs), which call malloc / free from safetensors.c (test_jansson_seen checks
 * it). A scenario is a short sequence of calls. It runs once to count its allocations, then once
 * per allocation k with the k-th failing ("one") and once per k with every allocation from the
 * k-th on failing ("rest", the way a process runs out of memory). Each run must end with exactly
 * the blocks it started with. safetensors.c allocates with nothing else: no strndup, getline,
 * asprintf, open_memstream, realpath or opendir (glibc's own internal allocations, in qsort or
 * strerror, are glibc's business and never reach our free). Run with MXP_TEST_VERBOSE=1 to print
 * the allocation count of each scenario.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "safetensors.h"

/* ---- the allocator wrappers: tests/oom_wrap.h (one thread allocates: the reader / writer start
 * none) ---------------------------------------------------------------------------------------- */

#include "oom_wrap.h"

/* ---- the sweep ------------------------------------------------------------------------------ */

/* A scenario returns the status of the calls under test, checks the results and the state of the
 * files itself (cmocka asserts), and frees everything it made, on every path. */
typedef mxp_status (*scenario_fn)(void *ctx);

typedef struct scenario {
    const char *name;
    scenario_fn fn;
    void *ctx;
    int no_message; /* the failure is a NULL return, with no message (mxst_index_json) */
} scenario;

/* mxst_ has no "clear error": before each run the message is set to this one (a call that fails
 * without allocating), so that a failing run must have written its own. */
static const char *stale_message(void)
{
    assert_int_equal(mxst_read(NULL, NULL, 0, NULL, 0), MXP_EINVAL);
    return mxst_last_error();
}

static long run_once(const scenario *sc, long fail_at, int rest, mxp_status *st)
{
    (void)stale_message();
    return oom_run(sc->name, sc->fn, sc->ctx, fail_at, rest, st);
}

/* Run sc with no failure, then with each allocation failing, alone and with every later one.
 * Returns the number of allocations the clean run made. */
static long sweep(const scenario *sc)
{
    mxp_status st;
    const long total = run_once(sc, -1, 0, &st);
    if (st != MXP_OK) fail_msg("%s: fails with no allocation failing: %s", sc->name, mxst_last_error());
    char stale[128];
    snprintf(stale, sizeof stale, "%s", stale_message());
    for (int rest = 0; rest <= 1; rest++) {
        for (long k = 0; k < total; k++) {
            run_once(sc, k, rest, &st);
            if (oom.failed == 0) fail_msg("%s: allocation %ld of %ld was not made this time", sc->name, k, total);
            const char *msg = mxst_last_error();
            if (st == MXP_OK)
                fail_msg("%s: allocation %ld of %ld failed (%s), and the call still returned MXP_OK",
                         sc->name, k, total, rest ? "and every later one" : "alone");
            if (st != MXP_ENOMEM)
                fail_msg("%s: allocation %ld of %ld failed (%s): %s instead of MXP_ENOMEM (\"%s\")", sc->name,
                         k, total, rest ? "and every later one" : "alone", mxp_status_name(st), msg);
            if (sc->no_message) continue;
            if (strcmp(msg, stale) == 0)
                fail_msg("%s: allocation %ld of %ld failed (%s): MXP_ENOMEM but no message recorded", sc->name,
                         k, total, rest ? "and every later one" : "alone");
            if (!strstr(msg, "memory") && !strstr(msg, "allocate"))
                fail_msg("%s: allocation %ld of %ld failed (%s): message \"%s\" does not say memory ran out",
                         sc->name, k, total, rest ? "and every later one" : "alone", msg);
        }
    }
    if (getenv("MXP_TEST_VERBOSE")) printf("# %s: %ld allocations, each failed\n", sc->name, total);
    return total;
}

/* ---- the test file ------------------------------------------------------------------------- */

/* Eight tensors of seven dtypes (a scalar, an empty one, a 4-bit one), listed in the header in
 * another order than their data, which is in offset order here. */
typedef struct tinfo {
    const char *name;
    mxst_dtype dtype;
    size_t ndim;
    uint64_t shape[2];
    uint64_t begin, end; /* in the hand-made file */
} tinfo;

enum { NT = 8, NDATA = 50 };

static const tinfo T[NT] = {
    {"step", MXST_I64, 0, {0, 0}, 0, 8},
    {"layer.0.weight", MXST_F32, 2, {2, 3}, 8, 32},
    {"layer.0.bias", MXST_BF16, 2, {2, 2}, 32, 40},
    {"emb", MXST_F16, 1, {3, 0}, 40, 46},
    {"q", MXST_I8, 1, {2, 0}, 46, 48},
    {"mask", MXST_BOOL, 1, {1, 0}, 48, 49},
    {"packed", MXST_F4, 1, {2, 0}, 49, 50},
    {"empty", MXST_U8, 1, {0, 0}, 50, 50},
};

static const char HEADER[] =
    "{\"layer.0.bias\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[32,40]},"
    "\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\xc3\xa9\"},"
    "\"empty\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[50,50]},"
    "\"emb\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[40,46]},"
    "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
    "\"q\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[46,48]},"
    "\"layer.0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
    "\"packed\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[49,50]},"
    "\"mask\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[48,49]}}";

static unsigned char g_data[NDATA]; /* the data buffer: byte i is (37 i + 11) mod 256 */

/* header (padded with spaces to a multiple of 8, so that strict mode accepts it) + data, in a
 * malloc'd buffer (made unarmed) */
static unsigned char *make_file(const char *header, const unsigned char *data, size_t ndata, size_t *size)
{
    const size_t hl = strlen(header), padded = (hl + 7) / 8 * 8;
    unsigned char *b = malloc(8 + padded + ndata);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(b + 8, header, hl);
    memset(b + 8 + hl, ' ', padded - hl);
    if (ndata) memcpy(b + 8 + padded, data, ndata);
    *size = 8 + padded + ndata;
    return b;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* the whole file at path, malloc'd (made unarmed) */
static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    const long len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    unsigned char *b = malloc((size_t)len + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* Check tensor x against T[i] (its data: g_data from T[i].begin), in shard `shard`. */
static void check_tensor(const mxst_file *f, const mxst_tensor *x, size_t i, size_t shard)
{
    assert_non_null(x);
    assert_string_equal(x->name, T[i].name);
    assert_int_equal(x->dtype, T[i].dtype);
    assert_int_equal(x->ndim, T[i].ndim);
    uint64_t numel = 1;
    for (size_t d = 0; d < T[i].ndim; d++) {
        assert_int_equal(x->shape[d], T[i].shape[d]);
        numel *= T[i].shape[d];
    }
    if (T[i].ndim == 0) assert_null(x->shape);
    assert_int_equal(x->numel, numel);
    assert_int_equal(x->nbytes, T[i].end - T[i].begin);
    assert_int_equal(x->end - x->begin, x->nbytes);
    assert_int_equal(x->shard, shard);
    unsigned char buf[NDATA];
    memset(buf, 0xEE, sizeof buf);
    assert_int_equal(mxst_read(f, x, 0, buf, (size_t)x->nbytes), MXP_OK);
    assert_memory_equal(buf, g_data + T[i].begin, (size_t)x->nbytes);
    assert_ptr_equal(mxst_find(f, T[i].name), x);
}

/* f holds the hand-made file: the tensors in offset order at their offsets, and the metadata */
static void check_single(const mxst_file *f)
{
    assert_int_equal(mxst_count(f), NT);
    assert_int_equal(mxst_shard_count(f), 1);
    assert_false(mxst_is_sharded(f));
    for (size_t i = 0; i < NT; i++) {
        const mxst_tensor *x = mxst_tensor_at(f, i);
        check_tensor(f, x, i, 0);
        assert_int_equal(x->begin, T[i].begin);
        assert_int_equal(x->end, T[i].end);
    }
    assert_null(mxst_tensor_at(f, NT));
    assert_null(mxst_find(f, "absent"));
    assert_int_equal(mxst_metadata_count(f), 2);
    const char *k, *v;
    assert_true(mxst_metadata_at(f, 0, &k, &v));
    assert_string_equal(k, "format");
    assert_string_equal(v, "pt");
    assert_true(mxst_metadata_at(f, 1, &k, &v));
    assert_string_equal(k, "note");
    assert_string_equal(v, "caf\xc3\xa9");
}

/* ---- 1. mxst_open_mem ---------------------------------------------------------------------- */

typedef struct mem_ctx {
    const unsigned char *bytes;
    size_t size;
    bool strict;
} mem_ctx;

static mxp_status sc_open_mem(void *vctx)
{
    const mem_ctx *c = vctx;
    mxst_file *f = (mxst_file *)(uintptr_t)0x1; /* must stay as it is on failure */
    const mxp_status s = mxst_open_mem(c->bytes, c->size, "mem.safetensors", c->strict, &f);
    if (s != MXP_OK) {
        assert_ptr_equal(f, (mxst_file *)(uintptr_t)0x1);
        return s;
    }
    check_single(f);
    assert_string_equal(mxst_path(f), "mem.safetensors");
    mxst_close(f);
    return s;
}

/* ---- 2. mxst_open: a file, and a sharded checkpoint ----------------------------------------- */

typedef struct dir_ctx {
    char dir[64];   /* made by mkdtemp */
    char path[128]; /* the file opened or written */
    bool strict;
    unsigned flags;           /* writer */
    const unsigned char *old; /* writer over an existing file: its content before each run */
    size_t nold;
} dir_ctx;

/* names in dir other than the NULL-terminated keep list */
static size_t strays(const char *dir, const char *const *keep)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int kept = 0;
        for (size_t i = 0; keep[i]; i++) kept |= !strcmp(e->d_name, keep[i]);
        if (!kept) {
            print_message("# stray file %s/%s\n", dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

/* mxst_open of c->path; on failure *f is checked untouched */
static mxp_status open_path(const dir_ctx *c, mxst_file **out)
{
    mxst_file *f = (mxst_file *)(uintptr_t)0x1;
    const mxp_status s = mxst_open(c->path, c->strict, &f);
    if (s != MXP_OK) assert_ptr_equal(f, (mxst_file *)(uintptr_t)0x1);
    *out = f;
    return s;
}

static mxp_status sc_open_file(void *vctx)
{
    const dir_ctx *c = vctx;
    mxst_file *f;
    const mxp_status s = open_path(c, &f);
    if (s != MXP_OK) return s;
    check_single(f);
    assert_string_equal(mxst_path(f), c->path);
    assert_string_equal(mxst_shard_path(f, 0), c->path);
    uint64_t dev, ino;
    assert_true(mxst_shard_identity(f, 0, &dev, &ino));
    mxst_close(f);
    return s;
}

/* The checkpoint: shard 1 holds step and layer.0.weight (and metadata), shard 2 emb and q;
 * the index maps them in yet another order. */
static const char SHARD1[] = "model-00001-of-00002.safetensors", SHARD2[] = "model-00002-of-00002.safetensors";
static const size_t in_shard1[] = {0, 1}, in_shard2[] = {3, 4};

static void make_checkpoint(const char *dir, char *index, size_t cap)
{
    char p[160];
    size_t size;
    unsigned char *b = make_file("{\"__metadata__\":{\"format\":\"pt\"},"
                                 "\"layer.0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
                                 "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}}",
                                 g_data, 32, &size);
    snprintf(p, sizeof p, "%s/%s", dir, SHARD1);
    write_bytes(p, b, size);
    free(b);
    b = make_file("{\"q\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[6,8]},"
                  "\"emb\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]}}",
                  g_data + 40, 8, &size);
    snprintf(p, sizeof p, "%s/%s", dir, SHARD2);
    write_bytes(p, b, size);
    free(b);
    snprintf(index, cap, "%s/model.safetensors.index.json", dir);
    char text[512];
    snprintf(text, sizeof text,
             "{\"metadata\":{\"total_size\":40},\"weight_map\":{\"q\":\"%s\",\"layer.0.weight\":\"%s\","
             "\"emb\":\"%s\",\"step\":\"%s\"}}",
             SHARD2, SHARD1, SHARD2, SHARD1);
    write_bytes(index, text, strlen(text));
}

static mxp_status sc_open_sharded(void *vctx)
{
    const dir_ctx *c = vctx;
    mxst_file *f;
    const mxp_status s = open_path(c, &f);
    if (s != MXP_OK) return s;
    assert_true(mxst_is_sharded(f));
    assert_int_equal(mxst_shard_count(f), 2);
    assert_string_equal(mxst_path(f), c->path);
    char want[160];
    snprintf(want, sizeof want, "%s/%s", c->dir, SHARD1);
    assert_string_equal(mxst_shard_path(f, 0), want);
    snprintf(want, sizeof want, "%s/%s", c->dir, SHARD2);
    assert_string_equal(mxst_shard_path(f, 1), want);
    assert_int_equal(mxst_count(f), 4);
    /* shard by shard, in offset order within a shard */
    for (size_t k = 0; k < 2; k++) {
        check_tensor(f, mxst_tensor_at(f, k), in_shard1[k], 0);
        check_tensor(f, mxst_tensor_at(f, 2 + k), in_shard2[k], 1);
    }
    assert_int_equal(mxst_tensor_at(f, 2)->begin, 0);
    assert_int_equal(mxst_metadata_count(f), 1);
    assert_string_equal(mxst_metadata_get(f, "format"), "pt");
    mxst_close(f);
    return s;
}

/* ---- 3. the writer -------------------------------------------------------------------------- */

static const char *const META[] = {"note", "caf\xc3\xa9", "author", "mixprec"};

/* the file at path is what the writer was given: every tensor, its data, the metadata */
/* After a failed write: c->path as it was (the old file whole, or no file), and nothing else in
 * the directory but keep (keep[0] is c->path's own name; a fresh path has no file to keep). */
static void check_as_before(const dir_ctx *c, const char *const *keep)
{
    if (c->old) {
        size_t n;
        unsigned char *now = slurp(c->path, &n);
        assert_int_equal(n, c->nold);
        assert_memory_equal(now, c->old, n);
        free(now);
    } else {
        assert_int_not_equal(access(c->path, F_OK), 0);
    }
    assert_int_equal(strays(c->dir, c->old ? keep : keep + 1), 0);
}

static void check_written(const char *path)
{
    mxst_file *f = NULL;
    if (mxst_open(path, true, &f) != MXP_OK) fail_msg("%s: %s", path, mxst_last_error());
    assert_int_equal(mxst_count(f), NT);
    for (size_t i = 0; i < NT; i++) check_tensor(f, mxst_find(f, T[i].name), i, 0);
    assert_int_equal(mxst_metadata_count(f), 3);
    assert_string_equal(mxst_metadata_get(f, "note"), "caf\xc3\xa9");
    assert_string_equal(mxst_metadata_get(f, "author"), "mixprec");
    assert_string_equal(mxst_metadata_get(f, "format"), "pt");
    mxst_close(f);
}

/* A directory scenario's prologue, unarmed: the old file (if any) put back in place. Returns the
 * output's base name, the one file the directory may hold afterwards. */
static const char *dir_prologue(const dir_ctx *c)
{
    oom.armed = 0;
    if (c->old) write_bytes(c->path, c->old, c->nold);
    return strrchr(c->path, '/') + 1;
}

static mxp_status sc_writer(void *vctx)
{
    const dir_ctx *c = vctx;
    const char *const keep[] = {dir_prologue(c), NULL};
    mxst_spec spec[NT];
    for (size_t i = 0; i < NT; i++) spec[i] = (mxst_spec){T[i].name, T[i].dtype, T[i].ndim, T[i].shape};
    oom.armed = 1;

    mxst_writer *w = (mxst_writer *)(uintptr_t)0x1;
    mxp_status s = mxst_writer_begin(c->path, spec, NT, META, 2, c->flags, &w);
    if (s != MXP_OK) {
        assert_ptr_equal(w, (mxst_writer *)(uintptr_t)0x1);
    } else {
        assert_int_equal(mxst_writer_count(w), NT);
        assert_int_equal(mxst_writer_data_size(w), NDATA);
        /* the data in file order, each tensor in two pieces (the second spans into the next) */
        unsigned char data[NDATA];
        size_t n = 0;
        for (size_t k = 0; k < NT; k++) {
            const size_t i = mxst_writer_order(w, k);
            assert_true(i < NT);
            assert_int_equal(mxst_writer_nbytes(w, i), T[i].end - T[i].begin);
            memcpy(data + n, g_data + T[i].begin, (size_t)(T[i].end - T[i].begin));
            n += (size_t)(T[i].end - T[i].begin);
        }
        assert_int_equal(n, NDATA);
        for (size_t at = 0; at < NDATA && s == MXP_OK; at += 7)
            s = mxst_writer_write(w, data + at, NDATA - at < 7 ? NDATA - at : 7);
        if (s == MXP_OK) {
            assert_int_equal(mxst_writer_current(w), NT);
            s = mxst_writer_commit(w); /* frees w whatever the result */
        } else {
            mxst_writer_abort(w);
        }
    }

    oom.armed = 0;
    if (s != MXP_OK) {
        check_as_before(c, keep);
    } else {
        check_written(c->path);
        assert_int_equal(strays(c->dir, keep), 0);
        if (!c->old) assert_int_equal(unlink(c->path), 0);
    }
    oom.armed = 1;
    return s;
}

/* ---- 4. mxst_write_small_file, mxst_index_json ----------------------------------------------- */

static const char INDEX_WANT[] = "{\n"
                                 "  \"metadata\": {\n"
                                 "    \"total_size\": 40\n"
                                 "  },\n"
                                 "  \"weight_map\": {\n"
                                 "    \"emb\": \"model-00002-of-00002.safetensors\",\n"
                                 "    \"layer.0.weight\": \"model-00001-of-00002.safetensors\",\n"
                                 "    \"q\": \"model-00002-of-00002.safetensors\",\n"
                                 "    \"step\": \"model-00001-of-00002.safetensors\"\n"
                                 "  }\n"
                                 "}\n";

/* A second index of NBIG tensors, whose text (over 2 KiB) makes the dump buffer grow twice. */
enum { NBIG = 40 };
typedef struct big_index {
    char names[NBIG][24];
    const char *name[NBIG], *shard[NBIG];
    char want[4096];
} big_index;

static void make_big_index(big_index *b)
{
    size_t j = (size_t)snprintf(b->want, sizeof b->want,
                                "{\n  \"metadata\": {\n    \"total_size\": 123456789012\n  },\n"
                                "  \"weight_map\": {\n");
    for (size_t i = 0; i < NBIG; i++) {
        const size_t k = (i * 17) % NBIG; /* given out of order */
        snprintf(b->names[i], sizeof b->names[i], "layer.%02zu.weight", k);
        b->name[i] = b->names[i];
        b->shard[i] = k % 2 ? SHARD2 : SHARD1;
    }
    for (size_t k = 0; k < NBIG; k++)
        j += (size_t)snprintf(b->want + j, sizeof b->want - j, "    \"layer.%02zu.weight\": \"%s\"%s\n", k,
                              k % 2 ? SHARD2 : SHARD1, k + 1 < NBIG ? "," : "");
    snprintf(b->want + j, sizeof b->want - j, "  }\n}\n");
    assert_true(strlen(b->want) > 2048 && strlen(b->want) < sizeof b->want - 1);
}

static mxp_status sc_index_json(void *vctx)
{
    const big_index *b = vctx;
    static const char *const names[] = {"q", "layer.0.weight", "emb", "step"};
    static const char *const shards[] = {SHARD2, SHARD1, SHARD2, SHARD1};
    char *text = mxst_index_json(names, shards, 4, 40);
    if (!text) return MXP_ENOMEM;
    assert_string_equal(text, INDEX_WANT);
    free(text);
    text = mxst_index_json(b->name, b->shard, NBIG, 123456789012u);
    if (!text) return MXP_ENOMEM;
    assert_string_equal(text, b->want);
    free(text);
    return MXP_OK;
}

static mxp_status sc_small_file(void *vctx)
{
    const dir_ctx *c = vctx;
    const char *const keep[] = {dir_prologue(c), NULL};
    oom.armed = 1;
    const mxp_status s = mxst_write_small_file(c->path, INDEX_WANT, strlen(INDEX_WANT), c->flags);
    oom.armed = 0;
    if (s != MXP_OK) {
        check_as_before(c, keep);
    } else {
        size_t n;
        unsigned char *now = slurp(c->path, &n);
        assert_int_equal(n, strlen(INDEX_WANT));
        assert_memory_equal(now, INDEX_WANT, n);
        free(now);
        assert_int_equal(strays(c->dir, keep), 0);
        if (!c->old) assert_int_equal(unlink(c->path), 0);
    }
    oom.armed = 1;
    return s;
}

/* ---- the tests ------------------------------------------------------------------------------ */

static void fill_data(void)
{
    for (size_t i = 0; i < NDATA; i++) g_data[i] = (unsigned char)(37 * i + 11);
}

/* jansson allocates through the wrappers: once the reader has set its allocator, a json_t made
 * here is counted, and refused when its allocation fails. */
static void test_jansson_seen(void **state)
{
    (void)state;
    char *text = mxst_index_json(NULL, NULL, 0, 0); /* sets jansson's allocator */
    assert_non_null(text);
    free(text);
    const long live0 = oom.live;
    oom.count = 0;
    oom.fail_at = -1;
    oom.armed = 1;
    json_t *s = json_string("counted");
    oom.armed = 0;
    assert_non_null(s);
    assert_true(oom.count >= 1);
    assert_true(oom.live > live0);
    json_decref(s);
    assert_int_equal(oom.live, live0);
    oom.count = 0;
    oom.fail_at = 0;
    oom.rest = 1;
    oom.armed = 1;
    s = json_string("refused");
    oom.armed = 0;
    assert_null(s);
    assert_int_equal(oom.live, live0);
}

static void test_open_mem_oom(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = make_file(HEADER, g_data, NDATA, &size);
    for (int strict = 0; strict <= 1; strict++) {
        mem_ctx c = {bytes, size, strict != 0};
        const scenario sc = {strict ? "mxst_open_mem (strict)" : "mxst_open_mem", sc_open_mem, &c, 0};
        /* own: the file, names, paths, header text, tables; the rest is jansson's */
        assert_true(sweep(&sc) > 2 * NT);
    }
    free(bytes);
}

/* A zeroed scenario context with a fresh directory of its own (c->dir). */
static void dir_init(dir_ctx *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/mxst_oom_XXXXXX");
    assert_non_null(mkdtemp(c->dir));
}

static void test_open_oom(void **state)
{
    (void)state;
    dir_ctx c;
    dir_init(&c);
    size_t size;
    unsigned char *bytes = make_file(HEADER, g_data, NDATA, &size);
    snprintf(c.path, sizeof c.path, "%s/model.safetensors", c.dir);
    write_bytes(c.path, bytes, size);
    free(bytes);
    for (int strict = 0; strict <= 1; strict++) {
        c.strict = strict != 0;
        const scenario sc = {strict ? "mxst_open (strict)" : "mxst_open", sc_open_file, &c, 0};
        assert_true(sweep(&sc) > 2 * NT);
    }
    assert_int_equal(unlink(c.path), 0);

    make_checkpoint(c.dir, c.path, sizeof c.path);
    for (int strict = 0; strict <= 1; strict++) {
        c.strict = strict != 0;
        const scenario sc = {strict ? "mxst_open index (strict)" : "mxst_open index", sc_open_sharded, &c, 0};
        assert_true(sweep(&sc) > 8);
    }
    const char *const keep[] = {SHARD1, SHARD2, "model.safetensors.index.json", NULL};
    assert_int_equal(strays(c.dir, keep), 0);
    char p[160];
    for (size_t i = 0; keep[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", c.dir, keep[i]);
        assert_int_equal(unlink(p), 0);
    }
    assert_int_equal(rmdir(c.dir), 0);
}

static void test_writer_oom(void **state)
{
    (void)state;
    dir_ctx c;
    dir_init(&c);
    snprintf(c.path, sizeof c.path, "%s/out.safetensors", c.dir);
    /* a fresh path (no fsync of the data: tests only; the directory is fsynced all the same) */
    c.flags = MXST_NO_FSYNC;
    const scenario fresh = {"mxst_writer begin/write/commit (new file)", sc_writer, &c, 0};
    assert_true(sweep(&fresh) > 2 * NT);
    /* over an existing file, with fsync */
    static const unsigned char old[] = "the previous file\n\0\xff and binary bytes";
    c.flags = MXST_OVERWRITE;
    c.old = old;
    c.nold = sizeof old;
    const scenario over = {"mxst_writer begin/write/commit (MXST_OVERWRITE)", sc_writer, &c, 0};
    assert_true(sweep(&over) > 2 * NT);
    assert_int_equal(unlink(c.path), 0);
    assert_int_equal(rmdir(c.dir), 0);
}

static void test_index_oom(void **state)
{
    (void)state;
    static big_index big;
    make_big_index(&big);
    const scenario json = {"mxst_index_json (4 and 40 tensors)", sc_index_json, &big, 1};
    assert_true(sweep(&json) > 3 * NBIG);

    dir_ctx c;
    dir_init(&c);
    snprintf(c.path, sizeof c.path, "%s/model.safetensors.index.json", c.dir);
    c.flags = 0;
    const scenario fresh = {"mxst_write_small_file (new file)", sc_small_file, &c, 0};
    assert_true(sweep(&fresh) >= 1);
    static const unsigned char old[] = "{\"old\": true}\n";
    c.flags = MXST_OVERWRITE;
    c.old = old;
    c.nold = sizeof old - 1;
    const scenario over = {"mxst_write_small_file (MXST_OVERWRITE)", sc_small_file, &c, 0};
    assert_true(sweep(&over) >= 1);
    assert_int_equal(unlink(c.path), 0);
    assert_int_equal(rmdir(c.dir), 0);
}

int main(void)
{
    fill_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jansson_seen),
        cmocka_unit_test(test_open_mem_oom),
        cmocka_unit_test(test_open_oom),
        cmocka_unit_test(test_writer_oom),
        cmocka_unit_test(test_index_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
