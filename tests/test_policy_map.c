/*
 * test_policy_map.c - Keras DTypePolicyMap semantics (exact key wins, whole-path regex match,
 * ambiguity lists every key, duplicate -> EEXIST, invalid regex rejected at set), the lookup
 * cache against a slow independent model under random set/remove/default changes, the text
 * config (round trip, line-numbered errors), and Axon's apply_policy with only/except/predicate.
 *
 * The slow model in this file compiles each key as it is and accepts a path when regexec's
 * leftmost-longest match spans all of it (offsets 0..strlen): a different way to get "whole
 * path" than the library's anchoring ("^(key)$"), so the two can disagree if either is wrong.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "mixprec.h"
#include "path_regex.h"
#include "test_util.h"

static mxp_policy P(const char *text)
{
    mxp_policy p;
    if (mxp_policy_parse(text, &p) != MXP_OK) fail_msg("bad policy '%s': %s", text, mxp_last_error());
    return p;
}

static void expect_get(const mxp_policy_map *m, const char *path, const char *want_policy)
{
    mxp_policy got, want = P(want_policy);
    mxp_status s = mxp_policy_map_get(m, path, &got);
    if (s != MXP_OK) fail_msg("get '%s': %s %s", path, mxp_status_name(s), mxp_last_error());
    if (!mxp_policy_equal(&got, &want)) {
        char g[96];
        mxp_policy_format(&got, g, sizeof g);
        fail_msg("get '%s': got %s, want %s", path, g, want_policy);
    }
}

/* Keras DTypePolicyMap docstring example. */
static void test_keras_example(void **state)
{
    (void)state;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    assert_non_null(m);
    mxp_policy bf16 = P("bfloat16"), q = P("int8_from_bfloat16");
    assert_int_equal(mxp_policy_map_set(m, "layer/dense_0", &bf16), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, "layer/dense_1", &q), MXP_OK);
    expect_get(m, "layer/dense_0", "bfloat16");
    expect_get(m, "layer/dense_1", "p=bf16,q=int8");
    expect_get(m, "layer/dense_2", "float32"); /* no hit: the global default */
    /* A NULL-default map follows the global default at lookup time (cache included). */
    mxp_policy mixed = P("mixed_float16");
    mxp_set_default_policy(&mixed);
    expect_get(m, "layer/dense_2", "mixed_float16");
    mxp_policy f32 = P("float32");
    mxp_set_default_policy(&f32);
    expect_get(m, "layer/dense_2", "float32");
    assert_false(mxp_policy_map_default(m, NULL));

    /* A map with its own default ignores the global one. */
    mxp_policy_map *m2 = mxp_policy_map_new(&mixed);
    mxp_policy d;
    assert_true(mxp_policy_map_default(m2, &d));
    assert_true(mxp_policy_equal(&d, &mixed));
    expect_get(m2, "anything", "mixed_float16");
    mxp_set_default_policy(&bf16);
    expect_get(m2, "anything", "mixed_float16");
    mxp_set_default_policy(&f32);

    mxp_policy bad = {MXP_FLOAT32, MXP_INT8, MXP_FLOAT32, MXP_QUANT_NONE, 0};
    assert_null(mxp_policy_map_new(&bad));
    mxp_policy_map_free(m2);
    mxp_policy_map_free(m);
    mxp_policy_map_free(NULL);
}

static void test_full_match_and_exact_wins(void **state)
{
    (void)state;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    mxp_policy a = P("bf16"), b = P("f16"), c = P("c=bf16,o=f32");
    assert_int_equal(mxp_policy_map_set(m, "attention/query", &a), MXP_OK);
    /* re.fullmatch: the key does not catch longer or shorter paths. */
    expect_get(m, "attention/query", "bf16");
    expect_get(m, "attention/query_norm", "float32");
    expect_get(m, "my_attention/query", "float32");
    expect_get(m, "attention/quer", "float32");
    assert_int_equal(mxp_policy_map_set(m, "dense_.*", &b), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, "dense_0", &c), MXP_OK);
    expect_get(m, "dense_0", "c=bf16,o=f32"); /* exact wins over the regex */
    expect_get(m, "dense_1", "f16");
    expect_get(m, "dense_", "f16");
    expect_get(m, "x/dense_1", "float32");
    /* Alternation must match whole, not just one branch's prefix: "a|ab" on "ab". */
    assert_int_equal(mxp_policy_map_set(m, "conv|conv_1x", &a), MXP_OK);
    expect_get(m, "conv_1x", "bf16");
    expect_get(m, "conv", "bf16");
    expect_get(m, "conv_1", "float32");
    /* A key with its own anchors and an escaped paren. */
    assert_int_equal(mxp_policy_map_set(m, "^head\\(0\\)$", &c), MXP_OK);
    expect_get(m, "head(0)", "c=bf16,o=f32");
    expect_get(m, "head(0)x", "float32");
    /* Which key decided. */
    mxp_policy out;
    const char *key = "sentinel";
    assert_int_equal(mxp_policy_map_match(m, "dense_7", &out, &key), MXP_OK);
    assert_string_equal(key, "dense_.*");
    assert_int_equal(mxp_policy_map_match(m, "dense_0", &out, &key), MXP_OK);
    assert_string_equal(key, "dense_0");
    assert_int_equal(mxp_policy_map_match(m, "nothing", &out, &key), MXP_OK);
    assert_null(key);
    mxp_policy_map_free(m);
}

static void test_ambiguous(void **state)
{
    (void)state;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    mxp_policy a = P("bf16"), b = P("f16"), c = P("f64");
    assert_int_equal(mxp_policy_map_set(m, "decoder/.*", &a), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, ".*/dense", &b), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, "unrelated", &c), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, "decoder/dens.", &c), MXP_OK);
    for (int round = 0; round < 2; round++) { /* the second round is served by the cache */
        mxp_policy out = P("e5m2"), keep = out;
        assert_int_equal(mxp_policy_map_get(m, "decoder/dense", &out), MXP_EAMBIGUOUS);
        assert_true(mxp_policy_equal(&out, &keep));
        const char *msg = mxp_last_error();
        assert_non_null(strstr(msg, "'decoder/dense'"));
        assert_non_null(strstr(msg, "'decoder/.*'"));
        assert_non_null(strstr(msg, "'.*/dense'"));
        assert_non_null(strstr(msg, "'decoder/dens.'"));
        assert_null(strstr(msg, "'unrelated'"));
        assert_non_null(strstr(msg, "3 keys"));
    }
    expect_get(m, "decoder/attention", "bf16");
    expect_get(m, "encoder/dense", "f16");
    /* An exact key removes the ambiguity. */
    assert_int_equal(mxp_policy_map_set(m, "decoder/dense", &c), MXP_OK);
    expect_get(m, "decoder/dense", "f64");
    mxp_policy_map_free(m);

    /* Long keys are quoted in part so that every one shows (three of 600 bytes used to fill the
     * message and cut the third off); past what fits, the message says how many it leaves out. */
    m = mxp_policy_map_new(NULL);
    char key[3][620];
    for (int k = 0; k < 3; k++) {
        int w = snprintf(key[k], sizeof key[k], "(k%d)?", k); /* optional: each matches the path */
        for (; w < 600; w++) key[k][w] = 'x';
        strcpy(key[k] + 600, ".*");
        assert_int_equal(mxp_policy_map_set(m, key[k], &a), MXP_OK);
    }
    char path[700];
    memset(path, 'x', 650);
    path[650] = '\0';
    mxp_policy out;
    assert_int_equal(mxp_policy_map_get(m, path, &out), MXP_EAMBIGUOUS);
    const char *msg = mxp_last_error();
    assert_non_null(strstr(msg, "3 keys match"));
    for (int k = 0; k < 3; k++) {
        char head[80];
        snprintf(head, sizeof head, "'%.64s...'", key[k]);
        if (!strstr(msg, head)) fail_msg("message '%s' lacks key %d as %s", msg, k, head);
    }
    assert_null(strstr(msg, "more"));
    for (int k = 3; k < 30; k++) {
        char kk[128]; /* (yK)? then 100 x's and x*: matches the path, quoted in part */
        int w = snprintf(kk, sizeof kk, "(y%d)?", k);
        memset(kk + w, 'x', 100);
        strcpy(kk + w + 100, "x*");
        assert_int_equal(mxp_policy_map_set(m, kk, &b), MXP_OK);
    }
    assert_int_equal(mxp_policy_map_get(m, path, &out), MXP_EAMBIGUOUS);
    msg = mxp_last_error();
    assert_non_null(strstr(msg, "30 keys match"));
    size_t shown = 0;
    for (const char *q = strstr(msg, "keys match it: "); q && (q = strchr(q + 1, '\'')) != NULL;) {
        q = strchr(q + 1, '\''); /* a quoted key, opening then closing quote */
        if (!q) break;
        shown++;
    }
    char tail[48];
    snprintf(tail, sizeof tail, ", and %zu more", 30 - shown);
    if (!strstr(msg, tail)) fail_msg("message '%s' lacks '%s'", msg, tail);
    assert_true(shown >= 3 && shown < 30);
    mxp_policy_map_free(m);
}

static void test_set_remove_errors(void **state)
{
    (void)state;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    mxp_policy a = P("bf16"), b = P("f16");
    assert_int_equal(mxp_policy_map_set(m, "dense_0", &a), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, "dense_0", &b), MXP_EEXIST);
    assert_non_null(strstr(mxp_last_error(), "'dense_0'"));
    assert_int_equal(mxp_policy_map_set(m, "dense_(", &b), MXP_EPARSE);
    assert_non_null(strstr(mxp_last_error(), "'dense_('"));
    assert_int_equal(mxp_policy_map_set(m, "[z-a]", &b), MXP_EPARSE);
    assert_int_equal(mxp_policy_map_set(m, "a{2,1}", &b), MXP_EPARSE);
    /* Outside the supported ERE subset: back-references, stacked repetitions, a stray ')',
     * intervals over 255 or multiplying past 1000. Each message quotes the key. */
    static const char *const unsupported[] = {"(a)\\1", "T+++", "a**", "a+{2}", "a{2}?", "a)|b",
                                              "x{256}", "((a{1,100}){1,100}){1,10}", "a{0,300}"};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        if (mxp_policy_map_set(m, unsupported[i], &b) != MXP_EPARSE) fail_msg("'%s' accepted", unsupported[i]);
        char want[64];
        snprintf(want, sizeof want, "'%s'", unsupported[i]);
        assert_non_null(strstr(mxp_last_error(), want));
    }
    /* ...while these stay fine: bracket expressions holding the same characters, escapes,
     * classes, ordinary intervals. */
    static const char *const fine[] = {"[*+?]+", "a\\*+", "[[:digit:]]{1,3}/[)]", "b{2}c{3,}d{1,5}",
                                       "(x|y)*z?", "[]a]*", "\\(lit\\)"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        if (mxp_policy_map_set(m, fine[i], &b) != MXP_OK) fail_msg("'%s': %s", fine[i], mxp_last_error());
        assert_int_equal(mxp_policy_map_remove(m, fine[i]), MXP_OK);
    }
    assert_int_equal(mxp_policy_map_set(m, "", &b), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_set(m, NULL, &b), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_set(m, "x", NULL), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_set(NULL, "x", &b), MXP_EINVAL);
    mxp_policy bad = {MXP_FLOAT32, MXP_FLOAT16, MXP_FLOAT16, MXP_QUANT_INT8, 0};
    assert_int_equal(mxp_policy_map_set(m, "x", &bad), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_count(m), 1);

    assert_int_equal(mxp_policy_map_set(m, "b", &b), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, "c", &a), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, "d", &b), MXP_OK);
    assert_int_equal(mxp_policy_map_remove(m, "b"), MXP_OK);
    assert_int_equal(mxp_policy_map_remove(m, "b"), MXP_ENOTFOUND);
    assert_non_null(strstr(mxp_last_error(), "'b'"));
    assert_int_equal(mxp_policy_map_remove(m, "d."), MXP_ENOTFOUND); /* keys, not regexes */
    assert_int_equal(mxp_policy_map_count(m), 3);
    const char *want[] = {"dense_0", "c", "d"};
    for (size_t i = 0; i < 3; i++) {
        const char *k;
        mxp_policy p;
        assert_int_equal(mxp_policy_map_entry(m, i, &k, &p), MXP_OK);
        assert_string_equal(k, want[i]);
        assert_true(mxp_policy_equal(&p, i == 2 ? &b : &a));
    }
    const char *k = "keep";
    assert_int_equal(mxp_policy_map_entry(m, 3, &k, NULL), MXP_ENOTFOUND);
    assert_string_equal(k, "keep");
    /* Removing then setting replaces (at the end of the order). */
    assert_int_equal(mxp_policy_map_remove(m, "dense_0"), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, "dense_0", &b), MXP_OK);
    expect_get(m, "dense_0", "f16");
    assert_int_equal(mxp_policy_map_entry(m, 2, &k, NULL), MXP_OK);
    assert_string_equal(k, "dense_0");
    mxp_policy out;
    assert_int_equal(mxp_policy_map_get(m, NULL, &out), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_get(NULL, "x", &out), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_get(m, "x", NULL), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_count(NULL), 0);
    /* Absurd cache capacities are clamped, not trusted. */
    assert_int_equal(mxp_policy_map_set_cache_capacity(m, SIZE_MAX / 2 + 1), MXP_OK);
    for (int i = 0; i < 50; i++) {
        char path[32];
        snprintf(path, sizeof path, "p%d", i);
        assert_int_equal(mxp_policy_map_get(m, path, &out), MXP_OK);
    }
    assert_int_equal(mxp_policy_map_set_cache_capacity(NULL, 1), MXP_EINVAL);
    mxp_policy_map_free(m);
}

/* ---- cache vs a slow independent model ---------------------------------------------------- */

typedef struct model {
    const char *keys[64];
    mxp_policy pols[64];
    regex_t re[64];
    int n;
} model;

static void model_set(model *md, const char *key, mxp_policy p)
{
    assert_int_equal(regcomp(&md->re[md->n], key, REG_EXTENDED), 0);
    md->keys[md->n] = key;
    md->pols[md->n] = p;
    md->n++;
}

static void model_remove(model *md, int i)
{
    regfree(&md->re[i]);
    for (int j = i; j + 1 < md->n; j++) {
        md->keys[j] = md->keys[j + 1];
        md->pols[j] = md->pols[j + 1];
        md->re[j] = md->re[j + 1];
    }
    md->n--;
}

/* Slow lookup: MXP_OK with *out, or MXP_EAMBIGUOUS. */
static mxp_status model_get(const model *md, const char *path, const mxp_policy *def, mxp_policy *out)
{
    for (int i = 0; i < md->n; i++)
        if (strcmp(md->keys[i], path) == 0) {
            *out = md->pols[i];
            return MXP_OK;
        }
    int hits = 0;
    regmatch_t mt[1];
    for (int i = 0; i < md->n; i++)
        if (regexec(&md->re[i], path, 1, mt, 0) == 0 && mt[0].rm_so == 0 &&
            (size_t)mt[0].rm_eo == strlen(path)) {
            hits++;
            *out = md->pols[i];
        }
    if (hits > 1) return MXP_EAMBIGUOUS;
    if (hits == 0) *out = def ? *def : mxp_default_policy();
    return MXP_OK;
}

static const char *const key_pool[] = {
    "dense_0",        "dense_[0-9]+",          "dense_.*",         "block_[0-9]/attention/.*",
    ".*/kernel",      "block_1/attention/query", "attention/query", "(dense|conv)_1",
    "[a-z]+_2/.*",    "layer.*",               "conv_1",           "block_2/attention/key",
    /* keys whose literal prefix is shorter than it looks (the pre-check must not over-reach) */
    "dense_?1",       "dens(e|a)_0",           "x|dense_1",        "la{1,2}yer_3/kernel",
    "conv_1+x?",
};
static const char *const path_pool[] = {
    "dense_0",       "dense_1",       "dense_12",        "block_1/attention/query",
    "block_1/attention/query_norm", "block_2/attention/key", "x/kernel", "conv_1",
    "layer_3/kernel", "attention/query", "attention/query_norm", "dense_",
    "conv_2/kernel", "unmatched",   "dense1",          "densa_0",
    "laayer_3/kernel", "x",         "conv_11x",        "conv_",
};
#define NKEYS (sizeof key_pool / sizeof key_pool[0])
#define NPATHS (sizeof path_pool / sizeof path_pool[0])

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(uint32_t n) { return (uint32_t)(tu_rand64(&rng_state) % n); }

static mxp_policy random_policy(void)
{
    mxp_policy p = {(mxp_dtype)rnd(6), (mxp_dtype)rnd(6), (mxp_dtype)rnd(6), MXP_QUANT_NONE, 0};
    return p;
}

static void compare_all(mxp_policy_map *const maps[3], const model *md, const mxp_policy *def)
{
    for (size_t i = 0; i < NPATHS; i++) {
        mxp_policy want, got;
        mxp_status ws = model_get(md, path_pool[i], def, &want);
        for (int k = 0; k < 3; k++) {
            mxp_status gs = mxp_policy_map_get(maps[k], path_pool[i], &got);
            if (gs != ws) fail_msg("map %d path '%s': %s, model %s", k, path_pool[i], mxp_status_name(gs),
                                   mxp_status_name(ws));
            if (gs == MXP_OK && !mxp_policy_equal(&got, &want))
                fail_msg("map %d path '%s': policy differs from the model", k, path_pool[i]);
        }
    }
}

static void run_cache_model(const mxp_policy *def)
{
    /* maps[0]: default cache; [1]: no cache; [2]: a 3-path cache (constant eviction). */
    mxp_policy_map *maps[3];
    for (int k = 0; k < 3; k++) maps[k] = mxp_policy_map_new(def);
    assert_int_equal(mxp_policy_map_set_cache_capacity(maps[1], 0), MXP_OK);
    assert_int_equal(mxp_policy_map_set_cache_capacity(maps[2], 3), MXP_OK);
    model md = {.n = 0};
    for (int step = 0; step < 600; step++) {
        uint32_t op = rnd(10);
        if (op < 5) {
            const char *key = key_pool[rnd(NKEYS)];
            mxp_policy p = random_policy();
            bool present = false;
            for (int i = 0; i < md.n; i++) present = present || strcmp(md.keys[i], key) == 0;
            for (int k = 0; k < 3; k++)
                assert_int_equal(mxp_policy_map_set(maps[k], key, &p), present ? MXP_EEXIST : MXP_OK);
            if (!present) model_set(&md, key, p);
        } else if (op < 8) {
            if (md.n == 0) continue;
            int i = (int)rnd((uint32_t)md.n);
            for (int k = 0; k < 3; k++) assert_int_equal(mxp_policy_map_remove(maps[k], md.keys[i]), MXP_OK);
            model_remove(&md, i);
        } else {
            mxp_policy p = random_policy();
            mxp_set_default_policy(&p);
        }
        compare_all(maps, &md, def);
        compare_all(maps, &md, def); /* again: now from the cache */
    }
    while (md.n > 0) model_remove(&md, 0);
    for (int k = 0; k < 3; k++) mxp_policy_map_free(maps[k]);
    mxp_policy f32 = P("float32");
    mxp_set_default_policy(&f32);
}

static void test_cache_matches_slow_model(void **state)
{
    (void)state;
    run_cache_model(NULL);
    mxp_policy own = P("c=bf16,o=f32");
    run_cache_model(&own);
}

/* Concurrent gets on one map agree with single-threaded answers. */
typedef struct getter_arg {
    const mxp_policy_map *m;
    const mxp_policy *want;
    const mxp_status *want_s;
    long bad;
} getter_arg;

static void *getter(void *p)
{
    getter_arg *a = p;
    for (int r = 0; r < 3000; r++) {
        size_t i = (size_t)r * 7 % NPATHS;
        mxp_policy got;
        mxp_status s = mxp_policy_map_get(a->m, path_pool[i], &got);
        if (s != a->want_s[i] || (s == MXP_OK && !mxp_policy_equal(&got, &a->want[i]))) a->bad++;
    }
    return NULL;
}

static void test_concurrent_get(void **state)
{
    (void)state;
    mxp_policy_map *m = mxp_policy_map_new(NULL), *slow = mxp_policy_map_new(NULL);
    mxp_policy_map_set_cache_capacity(slow, 0);
    mxp_policy_map_set_cache_capacity(m, 5); /* evictions while threads race */
    for (size_t k = 0; k < NKEYS; k += 2) {
        mxp_policy p = random_policy();
        assert_int_equal(mxp_policy_map_set(m, key_pool[k], &p), MXP_OK);
        assert_int_equal(mxp_policy_map_set(slow, key_pool[k], &p), MXP_OK);
    }
    mxp_policy want[NPATHS];
    mxp_status want_s[NPATHS];
    for (size_t i = 0; i < NPATHS; i++) want_s[i] = mxp_policy_map_get(slow, path_pool[i], &want[i]);
    pthread_t th[4];
    getter_arg args[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (getter_arg){m, want, want_s, 0};
        assert_int_equal(pthread_create(&th[t], NULL, getter, &args[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(args[t].bad, 0);
    }
    mxp_policy_map_free(slow);
    mxp_policy_map_free(m);
}

/* ---- text config -------------------------------------------------------------------------- */

static void test_config_parse(void **state)
{
    (void)state;
    const char *text = "# per-layer policies\n"
                       "\n"
                       "@default = mixed_bfloat16\r\n"
                       "  dense_0 = p=f32,c=f16,o=f32   # the first layer\n"
                       "block_[0-9]+/attention/.* = bf16\n"
                       "\"a=b # not a comment\" = float8_from_mixed_bfloat16\n"
                       "\"esc\\\"aped\\\\\\\\\" = q=int4\n" /* key: esc"aped\\ */
                       "   # indented comment\n"
                       "last=f64"; /* no final newline */
    mxp_policy_map *m = NULL;
    mxp_status s = mxp_policy_map_parse(text, &m);
    if (s != MXP_OK) fail_msg("%s", mxp_last_error());
    assert_int_equal(mxp_policy_map_count(m), 5);
    mxp_policy d;
    assert_true(mxp_policy_map_default(m, &d));
    mxp_policy want_d = P("mixed_bfloat16");
    assert_true(mxp_policy_equal(&d, &want_d));
    const char *keys[] = {"dense_0", "block_[0-9]+/attention/.*", "a=b # not a comment", "esc\"aped\\\\", "last"};
    const char *pols[] = {"c=f16,o=f32", "bf16", "float8_from_mixed_bfloat16", "q=int4", "f64"};
    for (size_t i = 0; i < 5; i++) {
        const char *k;
        mxp_policy p, w = P(pols[i]);
        assert_int_equal(mxp_policy_map_entry(m, i, &k, &p), MXP_OK);
        assert_string_equal(k, keys[i]);
        assert_true(mxp_policy_equal(&p, &w));
    }
    expect_get(m, "block_12/attention/query", "bf16");
    expect_get(m, "other", "mixed_bfloat16");

    /* The canonical text, written out by hand. */
    char buf[1024];
    size_t len = 0;
    assert_int_equal(mxp_policy_map_format(m, buf, sizeof buf, &len), MXP_OK);
    const char *want = "@default = p=float32,c=bfloat16,o=bfloat16\n"
                       "dense_0 = p=float32,c=float16,o=float32\n"
                       "block_[0-9]+/attention/.* = p=bfloat16,c=bfloat16,o=bfloat16\n"
                       "\"a=b # not a comment\" = p=float32,c=bfloat16,o=bfloat16,q=float8,h=1024\n"
                       "\"esc\\\"aped\\\\\\\\\" = p=float32,c=float32,o=float32,q=int4\n"
                       "last = p=float64,c=float64,o=float64\n";
    assert_string_equal(buf, want);
    assert_int_equal(len, strlen(want));
    /* snprintf semantics. */
    char small[10];
    memset(small, 'Z', sizeof small);
    assert_int_equal(mxp_policy_map_format(m, small, sizeof small, &len), MXP_OK);
    assert_int_equal(len, strlen(want));
    assert_string_equal(small, "@default ");
    assert_int_equal(mxp_policy_map_format(m, NULL, 0, &len), MXP_OK);
    assert_int_equal(len, strlen(want));
    assert_int_equal(mxp_policy_map_format(m, NULL, 5, &len), MXP_EINVAL);
    mxp_policy_map_free(m);

    /* Empty and comment-only configs are empty maps following the global default. */
    assert_int_equal(mxp_policy_map_parse("", &m), MXP_OK);
    assert_int_equal(mxp_policy_map_count(m), 0);
    assert_false(mxp_policy_map_default(m, NULL));
    mxp_policy_map_free(m);
    assert_int_equal(mxp_policy_map_parse("# nothing\n\n  \n", &m), MXP_OK);
    assert_int_equal(mxp_policy_map_count(m), 0);
    mxp_policy_map_free(m);
}

static void expect_config_error(const char *text, mxp_status status, const char *frag1, const char *frag2)
{
    mxp_policy_map *m = (mxp_policy_map *)1;
    mxp_status s = mxp_policy_map_parse(text, &m);
    if (s != status)
        fail_msg("config \"%s\": %s, want %s (%s)", text, mxp_status_name(s), mxp_status_name(status),
                 mxp_last_error());
    assert_ptr_equal(m, (mxp_policy_map *)1);
    if (!strstr(mxp_last_error(), frag1)) fail_msg("\"%s\" lacks \"%s\"", mxp_last_error(), frag1);
    if (frag2 && !strstr(mxp_last_error(), frag2)) fail_msg("\"%s\" lacks \"%s\"", mxp_last_error(), frag2);
}

static void test_config_errors(void **state)
{
    (void)state;
    expect_config_error("a = f32\n# c\nnot a pair\n", MXP_EPARSE, "line 3: ", "'not a pair'");
    expect_config_error("a = f32\nb = c=f13\n", MXP_EPARSE, "line 2: ", "'f13'");
    expect_config_error("\n\n\n = f32\n", MXP_EPARSE, "line 4: ", "empty key");
    expect_config_error("a = f32\nb = f16\nc = bf16\na = f64\n", MXP_EEXIST, "line 4: ", "'a'");
    expect_config_error("dense_( = f32\n", MXP_EPARSE, "line 1: ", "'dense_('");
    expect_config_error("x = f32\n@defualt = f32\n", MXP_EPARSE, "line 2: ", "'@defualt'");
    expect_config_error("@default = f32\n@default = f16\n", MXP_EPARSE, "line 2: ", "@default");
    expect_config_error("\"open = f32\n", MXP_EPARSE, "line 1: ", "unterminated");
    expect_config_error("\"k\\t\" = f32\n", MXP_EPARSE, "line 1: ", "escape");
    expect_config_error("\"k\" f32\n", MXP_EPARSE, "line 1: ", "'='");
    expect_config_error("ok = f32\n\"ab\\", MXP_EPARSE, "line 2: ", "unterminated quoted key '\"ab\\'");
    expect_config_error("k = # nothing\n", MXP_EPARSE, "line 1: ", "missing policy");
    expect_config_error("k # = f32\n", MXP_EPARSE, "line 1: ", "no '='");
    expect_config_error("k = p=f32,\n", MXP_EPARSE, "line 1: ", "empty part");
    expect_config_error("ok = f32\r\nk = fp8\r\n", MXP_EPARSE, "line 2: ", "'fp8'");
    mxp_policy_map *m;
    assert_int_equal(mxp_policy_map_parse(NULL, &m), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_parse("a = f32", NULL), MXP_EINVAL);
}

static void test_config_round_trip(void **state)
{
    (void)state;
    static const char *const keys[] = {
        "dense_0", "block_[0-9]+/(query|key|value)", "a=b", "#hash", "@at", " lead", "trail ",
        "quo\"te", "back\\.slash", "new\nline", "\"q\"", "x#y=z", "tab\tin", "@default", "car\rret\r\n",
    };
    const mxp_policy def = P("float8_from_c=bf16,h=7");
    for (int with_default = 0; with_default < 2; with_default++) {
        mxp_policy_map *m = mxp_policy_map_new(with_default ? &def : NULL);
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            mxp_policy p = random_policy();
            if (i % 3 == 1) p.quant = MXP_QUANT_INT4;
            if (mxp_policy_map_set(m, keys[i], &p) != MXP_OK) fail_msg("%s", mxp_last_error());
        }
        size_t len;
        assert_int_equal(mxp_policy_map_format(m, NULL, 0, &len), MXP_OK);
        char *text = malloc(len + 1);
        assert_int_equal(mxp_policy_map_format(m, text, len + 1, &len), MXP_OK);
        mxp_policy_map *back = NULL;
        if (mxp_policy_map_parse(text, &back) != MXP_OK) fail_msg("%s\n%s", mxp_last_error(), text);
        assert_true(mxp_policy_map_equal(m, back));
        for (size_t i = 0; i < mxp_policy_map_count(m); i++) { /* same order too */
            const char *k1, *k2;
            mxp_policy_map_entry(m, i, &k1, NULL);
            mxp_policy_map_entry(back, i, &k2, NULL);
            assert_string_equal(k1, k2);
        }
        char *text2 = malloc(len + 1);
        size_t len2;
        assert_int_equal(mxp_policy_map_format(back, text2, len + 1, &len2), MXP_OK);
        assert_int_equal(len2, len);
        assert_string_equal(text, text2);

        /* File round trip. */
        char path[64];
        snprintf(path, sizeof path, "/tmp/mxp_test_policy_map_%d.cfg", (int)getpid());
        assert_int_equal(mxp_policy_map_save(m, path), MXP_OK);
        mxp_policy_map *loaded = NULL;
        assert_int_equal(mxp_policy_map_load(path, &loaded), MXP_OK);
        assert_true(mxp_policy_map_equal(m, loaded));
        remove(path);
        mxp_policy_map_free(loaded);
        free(text2);
        free(text);
        mxp_policy_map_free(back);
        mxp_policy_map_free(m);
    }
    mxp_policy_map *m = NULL;
    assert_int_equal(mxp_policy_map_load("/nonexistent/dir/x.cfg", &m), MXP_EIO);
    assert_non_null(strstr(mxp_last_error(), "/nonexistent/dir/x.cfg"));
    assert_null(m);
    /* the reason in the user's words: a file used as a directory, a symbolic link to itself */
    char file[64], below[80];
    snprintf(file, sizeof file, "/tmp/mxp_test_pm_notdir_%d", (int)getpid());
    snprintf(below, sizeof below, "%s/x.cfg", file);
    FILE *f = fopen(file, "wb");
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(mxp_policy_map_load(below, &m), MXP_EIO);
    if (!strstr(mxp_last_error(), "a component of the path is not a directory")) fail_msg("%s", mxp_last_error());
    remove(file);
    assert_int_equal(symlink(file, file), 0); /* file -> file */
    assert_int_equal(mxp_policy_map_load(file, &m), MXP_EIO);
    if (!strstr(mxp_last_error(), "too many symbolic links")) fail_msg("%s", mxp_last_error());
    remove(file);
    assert_null(m);

    /* equal: order ignored, policies and defaults compared. */
    mxp_policy a = P("bf16"), b = P("f16");
    mxp_policy_map *x = mxp_policy_map_new(NULL), *y = mxp_policy_map_new(NULL);
    mxp_policy_map_set(x, "k1", &a);
    mxp_policy_map_set(x, "k2", &b);
    mxp_policy_map_set(y, "k2", &b);
    mxp_policy_map_set(y, "k1", &a);
    assert_true(mxp_policy_map_equal(x, y));
    mxp_policy_map_remove(y, "k1");
    mxp_policy_map_set(y, "k1", &b);
    assert_false(mxp_policy_map_equal(x, y));
    mxp_policy_map *z = mxp_policy_map_new(&a);
    mxp_policy_map_set(z, "k1", &a);
    mxp_policy_map_set(z, "k2", &b);
    assert_false(mxp_policy_map_equal(x, z));
    assert_false(mxp_policy_map_equal(x, NULL));
    mxp_policy_map_free(x);
    mxp_policy_map_free(y);
    mxp_policy_map_free(z);
}

/* ---- apply_policy ------------------------------------------------------------------------- */

/* Axon's docs model. */
static const mxp_layer axon_model[] = {
    {"dense_0", "dense"},   {"batch_norm_0", "batch_norm"}, {"dropout_0", "dropout"},
    {"dense_1", "dense"},   {"batch_norm_1", "batch_norm"}, {"dropout_1", "dropout"},
    {"dense_2", "dense"},
};
#define NLAYERS (sizeof axon_model / sizeof axon_model[0])

static void test_apply_except(void **state)
{
    (void)state;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    mxp_policy p = P("p={:f, 32},c={:f, 16},o={:f, 32}");
    const char *const except[] = {"batch_norm"};
    mxp_layer_select sel = {.except = except, .n_except = 1};
    size_t n = 0;
    assert_int_equal(mxp_policy_map_apply(m, axon_model, NLAYERS, &p, &sel, &n), MXP_OK);
    assert_int_equal(n, 5);
    assert_int_equal(mxp_policy_map_count(m), 5);
    for (size_t i = 0; i < NLAYERS; i++) {
        bool bn = strcmp(axon_model[i].op, "batch_norm") == 0;
        expect_get(m, axon_model[i].path, bn ? "float32" : "p=f32,c=f16,o=f32");
    }
    /* Entries appended in layer order. */
    const char *k;
    assert_int_equal(mxp_policy_map_entry(m, 0, &k, NULL), MXP_OK);
    assert_string_equal(k, "dense_0");
    assert_int_equal(mxp_policy_map_entry(m, 4, &k, NULL), MXP_OK);
    assert_string_equal(k, "dense_2");
    mxp_policy_map_free(m);
}

static bool ends_in_1(const char *path, const char *op, void *user)
{
    (void)op;
    (*(int *)user)++;
    size_t n = strlen(path);
    return n > 0 && path[n - 1] == '1';
}

static void test_apply_only_pred_replace(void **state)
{
    (void)state;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    mxp_policy bf = P("bf16"), mixed = P("mixed_float16"), f64 = P("f64");
    assert_int_equal(mxp_policy_map_set(m, "head", &f64), MXP_OK);
    assert_int_equal(mxp_policy_map_set(m, "dense_1", &bf), MXP_OK);
    const char *const only[] = {"dense", "conv"};
    mxp_layer_select sel = {.only = only, .n_only = 2};
    size_t n = 0;
    assert_int_equal(mxp_policy_map_apply(m, axon_model, NLAYERS, &mixed, &sel, &n), MXP_OK);
    assert_int_equal(n, 3);
    /* dense_1 replaced in place (position 1), dense_0 and dense_2 appended. */
    const char *want[] = {"head", "dense_1", "dense_0", "dense_2"};
    assert_int_equal(mxp_policy_map_count(m), 4);
    for (size_t i = 0; i < 4; i++) {
        const char *k;
        mxp_policy_map_entry(m, i, &k, NULL);
        assert_string_equal(k, want[i]);
    }
    expect_get(m, "dense_1", "mixed_float16");
    expect_get(m, "dropout_0", "float32");
    expect_get(m, "head", "f64");

    /* Predicate (called once per layer, in order) combined with except. */
    int calls = 0;
    const char *const except[] = {"dropout"};
    mxp_layer_select ps = {.except = except, .n_except = 1, .pred = ends_in_1, .user = &calls};
    assert_int_equal(mxp_policy_map_apply(m, axon_model, NLAYERS, &bf, &ps, &n), MXP_OK);
    assert_int_equal(n, 2); /* dense_1, batch_norm_1 (dropout_1 excluded) */
    expect_get(m, "dense_1", "bf16");
    expect_get(m, "batch_norm_1", "bf16");
    expect_get(m, "dropout_1", "float32");
    expect_get(m, "dense_0", "mixed_float16");
    assert_true(calls >= 2 && calls <= (int)NLAYERS);

    /* only with an empty list selects nothing; NULL sel selects everything. */
    mxp_layer_select none = {.only = only, .n_only = 0};
    assert_int_equal(mxp_policy_map_apply(m, axon_model, NLAYERS, &f64, &none, &n), MXP_OK);
    assert_int_equal(n, 0);
    assert_int_equal(mxp_policy_map_count(m), 5);
    assert_int_equal(mxp_policy_map_apply(m, axon_model, NLAYERS, &f64, NULL, &n), MXP_OK);
    assert_int_equal(n, NLAYERS);
    assert_int_equal(mxp_policy_map_count(m), 1 + NLAYERS);
    for (size_t i = 0; i < NLAYERS; i++) expect_get(m, axon_model[i].path, "f64");
    mxp_policy_map_free(m);
}

static void test_apply_errors_leave_map_unchanged(void **state)
{
    (void)state;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    mxp_policy bf = P("bf16"), f16 = P("f16");
    assert_int_equal(mxp_policy_map_set(m, "dense_0", &bf), MXP_OK);
    const mxp_layer bad_re[] = {{"dense_0", "dense"}, {"new_1", "dense"}, {"bad(", "dense"}};
    size_t n = 99;
    assert_int_equal(mxp_policy_map_apply(m, bad_re, 3, &f16, NULL, &n), MXP_EPARSE);
    assert_non_null(strstr(mxp_last_error(), "'bad('"));
    assert_int_equal(n, 99);
    assert_int_equal(mxp_policy_map_count(m), 1);
    expect_get(m, "dense_0", "bf16"); /* not replaced */
    /* ...but an unselected bad path is fine: only selected layers become keys. */
    const char *const except[] = {"weird"};
    const mxp_layer skip_bad[] = {{"dense_0", "dense"}, {"bad(", "weird"}};
    mxp_layer_select sel = {.except = except, .n_except = 1};
    assert_int_equal(mxp_policy_map_apply(m, skip_bad, 2, &f16, &sel, &n), MXP_OK);
    assert_int_equal(n, 1);
    expect_get(m, "dense_0", "f16");
    const mxp_layer null_op[] = {{"x", NULL}};
    const mxp_layer empty_path[] = {{"", "dense"}};
    assert_int_equal(mxp_policy_map_apply(m, null_op, 1, &f16, NULL, NULL), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_apply(m, empty_path, 1, &f16, NULL, NULL), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_apply(m, NULL, 1, &f16, NULL, NULL), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_apply(m, NULL, 0, &f16, NULL, NULL), MXP_OK);
    assert_int_equal(mxp_policy_map_apply(NULL, axon_model, 1, &f16, NULL, NULL), MXP_EINVAL);
    assert_int_equal(mxp_policy_map_apply(m, axon_model, 1, NULL, NULL, NULL), MXP_EINVAL);
    const char *const nulls[] = {"dense", NULL};
    mxp_layer_select ns = {.only = nulls, .n_only = 2};
    assert_int_equal(mxp_policy_map_apply(m, axon_model, 1, &f16, &ns, NULL), MXP_EINVAL);
    /* Repeated paths in the layer list give one entry. */
    const mxp_layer dup[] = {{"d", "dense"}, {"d", "dense"}};
    assert_int_equal(mxp_policy_map_apply(m, dup, 2, &bf, NULL, &n), MXP_OK);
    assert_int_equal(mxp_policy_map_count(m), 2);
    mxp_policy_map_free(m);
}

/* ---- hostile keys and files (issue 16) ---------------------------------------------------- */

static char *repeat_str(const char *head, const char *unit, size_t times, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * times + tl + 1);
    assert_non_null(s);
    memcpy(s, head, hl);
    for (size_t i = 0; i < times; i++) memcpy(s + hl + i * ul, unit, ul);
    memcpy(s + hl + ul * times, tail, tl + 1);
    return s;
}

static void expect_set_refused(mxp_policy_map *m, char *key, const char *frag)
{
    mxp_policy b = P("f16");
    size_t before = mxp_policy_map_count(m);
    mxp_status s = mxp_policy_map_set(m, key, &b);
    if (s != MXP_EPARSE) fail_msg("%zu-byte key: %s, want MXP_EPARSE", strlen(key), mxp_status_name(s));
    if (!strstr(mxp_last_error(), frag)) fail_msg("\"%s\" lacks \"%s\"", mxp_last_error(), frag);
    assert_int_equal(mxp_policy_map_count(m), before);
    free(key);
}

/* Each of these crashed (stack overflow in glibc's regcomp) or ran for seconds to minutes
 * before the library had its own bounded matcher. */
static void test_adversarial_keys_refused(void **state)
{
    (void)state;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    expect_set_refused(m, repeat_str("", "(", 100000, ""), "MXP_POLICY_MAP_KEY_MAX (1024)");
    expect_set_refused(m, repeat_str("(", "a|", 100000, "b)*"), "MXP_POLICY_MAP_KEY_MAX");
    expect_set_refused(m, repeat_str("", "a?", 500000, ""), "MXP_POLICY_MAP_KEY_MAX");
    expect_set_refused(m, repeat_str("", ".*", 10000, ""), "MXP_POLICY_MAP_KEY_MAX");
    expect_set_refused(m, repeat_str("", "(", 1000, ""), "MXP_POLICY_MAP_DEPTH_MAX (32)");
    expect_set_refused(m, repeat_str("(", "a|", 300, "b)*"), "MXP_POLICY_MAP_OPS_MAX (256)");
    expect_set_refused(m, repeat_str("", "a?", 300, ""), "MXP_POLICY_MAP_OPS_MAX");
    expect_set_refused(m, repeat_str("", ".*", 300, ""), "MXP_POLICY_MAP_OPS_MAX");
    expect_set_refused(m, repeat_str("", "(.*){255}", 20, ""), "MXP_POLICY_MAP_STATES_MAX (4096)");
    /* Literal keys obey the length limit too (apply_policy's paths included). */
    expect_set_refused(m, repeat_str("", "x", 1025, ""), "MXP_POLICY_MAP_KEY_MAX");
    char *longest = repeat_str("", "x", 1024, "");
    mxp_policy b = P("f16");
    assert_int_equal(mxp_policy_map_set(m, longest, &b), MXP_OK);
    free(longest);
    mxp_policy_map_free(m);

    /* A 1 MB "a|a|...|a" line in a config file. */
    char path[64];
    snprintf(path, sizeof path, "/tmp/mxp_test_pm_long_%d.cfg", (int)getpid());
    char *line = repeat_str("", "a|", 500000, "a = f32\n");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("ok = bf16\n", f);
    fputs(line, f);
    fclose(f);
    free(line);
    mxp_policy_map *loaded = (mxp_policy_map *)1;
    assert_int_equal(mxp_policy_map_load(path, &loaded), MXP_EPARSE);
    assert_ptr_equal(loaded, (mxp_policy_map *)1);
    assert_non_null(strstr(mxp_last_error(), "line 2: "));
    assert_non_null(strstr(mxp_last_error(), "MXP_POLICY_MAP_KEY_MAX"));
    remove(path);
}

/* Issue 16 item 11: the message speaks of the user's key, not of the "^(key)$" it was once
 * wrapped in ("Unmatched ( or \(" for a trailing backslash). */
static void test_key_errors_in_user_terms(void **state)
{
    (void)state;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    mxp_policy b = P("f16");
    assert_int_equal(mxp_policy_map_set(m, "a\\", &b), MXP_EPARSE);
    assert_non_null(strstr(mxp_last_error(), "'a\\'"));
    assert_non_null(strstr(mxp_last_error(), "trailing backslash at offset 1"));
    assert_null(strstr(mxp_last_error(), "Unmatched"));
    assert_int_equal(mxp_policy_map_set(m, "block_(0|1", &b), MXP_EPARSE);
    assert_non_null(strstr(mxp_last_error(), "unbalanced parenthesis: '(' at offset 6 is never closed"));
    assert_int_equal(mxp_policy_map_set(m, "x)", &b), MXP_EPARSE);
    assert_non_null(strstr(mxp_last_error(), "')' at offset 1 has no matching '('"));
    assert_int_equal(mxp_policy_map_set(m, "layer_\\d+", &b), MXP_EPARSE);
    assert_non_null(strstr(mxp_last_error(), "unsupported escape '\\d' at offset 6"));
    assert_int_equal(mxp_policy_map_count(m), 0);
    mxp_policy_map_free(m);
    expect_config_error("ok = f32\n\"x\\\\\" = f32\n", MXP_EPARSE, "line 2: ", "trailing backslash at offset 1");
}

/* Lookups are linear in the path, counted: a map holding the largest key of every adversarial
 * shape the limits allow, looked up without the cache on paths of growing length, visits at
 * most sum over keys of 2 * states * (length + 1) NFA instructions (test_path_regex checks each
 * key's work doubles at most with the path); literal keys cost nothing. */
static void test_lookup_work_counted(void **state)
{
    (void)state;
    char *keys[] = {
        repeat_str("(", "a|", 254, "b)*"), repeat_str("", "a|", 256, "a"), repeat_str("", "a?", 256, ""),
        repeat_str("", ".*", 256, ""),     repeat_str("", "(a|ab)*", 100, "b"), repeat_str("((.*){15}){85}", "", 0, ""),
        repeat_str("", "((a*)*)*", 40, ""), repeat_str("", "[[:alnum:]_]", 85, ""),
    };
    size_t nkeys = sizeof keys / sizeof *keys;
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    assert_int_equal(mxp_policy_map_set_cache_capacity(m, 0), MXP_OK);
    unsigned long long per_byte = 0; /* 2 * sum of states */
    for (size_t k = 0; k < nkeys; k++) {
        mxp__re *re;
        assert_int_equal(mxp__re_compile(keys[k], &re), MXP_OK);
        per_byte += 2 * mxp__re_states(re);
        mxp__re_free(re);
        mxp_policy p = random_policy();
        if (mxp_policy_map_set(m, keys[k], &p) != MXP_OK) fail_msg("%s", mxp_last_error());
    }
    /* 20 000 literal keys: never scanned as regexes. */
    for (int i = 0; i < 20000; i++) {
        char k[32];
        snprintf(k, sizeof k, "model/layer_%d/dense", i);
        mxp_policy p = random_policy();
        assert_int_equal(mxp_policy_map_set(m, k, &p), MXP_OK);
    }
    static const char *const units[] = {"a", "ab", "a_"};
    for (size_t u = 0; u < 3; u++) {
        for (size_t n = 256; n <= 1024; n *= 2) {
            char *path = repeat_str("", units[u], n, "");
            size_t len = strlen(path);
            unsigned long long w0 = mxp__re_match_work;
            mxp_policy out;
            mxp_status s = mxp_policy_map_get(m, path, &out);
            assert_true(s == MXP_OK || s == MXP_EAMBIGUOUS);
            unsigned long long work = mxp__re_match_work - w0;
            /* get (one pass) plus, when ambiguous, the pass that lists the matching keys */
            unsigned long long bound = (s == MXP_EAMBIGUOUS ? 2 : 1) * per_byte * (len + 1);
            if (work > bound) fail_msg("path of %zu bytes: %llu visits > %llu", len, work, bound);
            if (n == 1024) assert_true(work > 1000 * len); /* the bound is not vacuous: real work ran */
            free(path);
        }
    }
    for (size_t k = 0; k < nkeys; k++) free(keys[k]);
    mxp_policy_map_free(m);
}

/* Issue 16 item 5: building a map is O(1) amortised per key, counted in hash-table probes
 * (the old duplicate search compared each new key with every earlier one). */
static void test_build_is_linear_counted(void **state)
{
    (void)state;
    for (size_t n = 1000; n <= 30000; n *= 30) {
        /* set */
        mxp_policy_map *m = mxp_policy_map_new(NULL);
        mxp_policy p = P("bf16");
        unsigned long long p0 = mxp__policy_map_probes;
        for (size_t i = 0; i < n; i++) {
            char k[48];
            snprintf(k, sizeof k, i % 100 ? "model/layer_%zu/dense" : "model/block_%zu/.*", i);
            assert_int_equal(mxp_policy_map_set(m, k, &p), MXP_OK);
        }
        assert_int_equal(mxp_policy_map_set(m, "model/layer_1/dense", &p), MXP_EEXIST);
        unsigned long long probes = mxp__policy_map_probes - p0;
        if (probes > 4 * n) fail_msg("set of %zu keys: %llu probes", n, probes);
        /* parse of the same map as text */
        size_t len;
        assert_int_equal(mxp_policy_map_format(m, NULL, 0, &len), MXP_OK);
        char *text = malloc(len + 1);
        assert_int_equal(mxp_policy_map_format(m, text, len + 1, &len), MXP_OK);
        mxp_policy_map *back = NULL;
        p0 = mxp__policy_map_probes;
        assert_int_equal(mxp_policy_map_parse(text, &back), MXP_OK);
        probes = mxp__policy_map_probes - p0;
        if (probes > 4 * n) fail_msg("parse of %zu lines: %llu probes", n, probes);
        p0 = mxp__policy_map_probes;
        assert_true(mxp_policy_map_equal(m, back));
        probes = mxp__policy_map_probes - p0;
        if (probes > 2 * n) fail_msg("equal on %zu keys: %llu probes", n, probes);
        /* apply: n layers, each path twice */
        mxp_layer *layers = malloc(2 * n * sizeof *layers);
        char (*names)[32] = malloc(n * sizeof *names);
        for (size_t i = 0; i < n; i++) {
            snprintf(names[i], sizeof names[i], "enc/%zu/attn", i);
            layers[2 * i] = layers[2 * i + 1] = (mxp_layer){names[i], "dense"};
        }
        size_t applied = 0;
        p0 = mxp__policy_map_probes;
        assert_int_equal(mxp_policy_map_apply(back, layers, 2 * n, &p, NULL, &applied), MXP_OK);
        probes = mxp__policy_map_probes - p0;
        assert_int_equal(applied, 2 * n);
        assert_int_equal(mxp_policy_map_count(back), 2 * n);
        if (probes > 8 * n) fail_msg("apply of %zu layers: %llu probes", 2 * n, probes);
        free(names);
        free(layers);
        free(text);
        mxp_policy_map_free(back);
        mxp_policy_map_free(m);
    }
}

/* Issue 16 item 6: load reads at most MXP_POLICY_MAP_FILE_MAX bytes and no binary data. The
 * cap is lowered here (mxp__policy_map_file_max) to test it on small files and FIFOs. */
typedef struct fifo_writer {
    const char *path;
    const char *text;
    size_t len;
    int err;
} fifo_writer;

static void *write_fifo(void *arg)
{
    fifo_writer *w = arg;
    int fd = open(w->path, O_WRONLY);
    if (fd < 0) {
        w->err = errno;
        return NULL;
    }
    for (size_t done = 0; done < w->len;) {
        ssize_t n = write(fd, w->text + done, w->len - done);
        if (n < 0) {
            w->err = errno; /* EPIPE once the reader has given up */
            break;
        }
        done += (size_t)n;
    }
    close(fd);
    return NULL;
}

static mxp_status load_from_fifo(const char *fifo, const char *text, size_t len, mxp_policy_map **out, int *err)
{
    fifo_writer w = {fifo, text, len, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, write_fifo, &w), 0);
    mxp_status s = mxp_policy_map_load(fifo, out);
    pthread_join(th, NULL);
    *err = w.err;
    return s;
}

static void test_load_bounded(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN); /* the FIFO writer must see EPIPE, not die */
    mxp_policy_map *m = (mxp_policy_map *)1;
    /* /dev/zero: refused at its first byte (before: 4 GiB read, then MXP_ENOMEM). */
    assert_int_equal(mxp_policy_map_load("/dev/zero", &m), MXP_EFORMAT);
    assert_non_null(strstr(mxp_last_error(), "'/dev/zero'"));
    assert_non_null(strstr(mxp_last_error(), "NUL byte at offset 0"));
    assert_int_equal(mxp_policy_map_load("/tmp", &m), MXP_EIO);
    assert_non_null(strstr(mxp_last_error(), "is a directory"));
    assert_ptr_equal(m, (mxp_policy_map *)1);

    char dir[64], file[96], fifo[96];
    snprintf(dir, sizeof dir, "/tmp/mxp_test_pm_%d", (int)getpid());
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(file, sizeof file, "%s/big.cfg", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);

    /* 5 000 bytes of valid config. */
    size_t len = 0;
    char *text = malloc(6000);
    for (int i = 0; len < 5000; i++) len += (size_t)sprintf(text + len, "layer_%d = bf16\n", i);
    mxp_policy_map *want = NULL;
    assert_int_equal(mxp_policy_map_parse(text, &want), MXP_OK);

    /* Under the cap: a regular file and a FIFO both load. */
    FILE *f = fopen(file, "wb");
    fwrite(text, 1, len, f);
    fclose(f);
    assert_int_equal(mxp_policy_map_load(file, &m), MXP_OK);
    assert_true(mxp_policy_map_equal(m, want));
    mxp_policy_map_free(m);
    int err = -1;
    m = NULL;
    assert_int_equal(load_from_fifo(fifo, text, len, &m, &err), MXP_OK);
    assert_int_equal(err, 0);
    assert_true(mxp_policy_map_equal(m, want));
    mxp_policy_map_free(m);

    /* Over a lowered cap: refused naming the limit; the regular file without being read. */
    size_t saved = mxp__policy_map_file_max;
    mxp__policy_map_file_max = 4096;
    m = (mxp_policy_map *)1;
    assert_int_equal(mxp_policy_map_load(file, &m), MXP_EFORMAT);
    assert_non_null(strstr(mxp_last_error(), "MXP_POLICY_MAP_FILE_MAX (4096 bytes)"));
    assert_non_null(strstr(mxp_last_error(), file));
    assert_int_equal(load_from_fifo(fifo, text, len, &m, &err), MXP_EFORMAT);
    assert_non_null(strstr(mxp_last_error(), "MXP_POLICY_MAP_FILE_MAX (4096 bytes)"));
    assert_non_null(strstr(mxp_last_error(), "FIFO"));
    assert_ptr_equal(m, (mxp_policy_map *)1);
    /* save refuses what load would refuse, and writes nothing. */
    char out[96];
    snprintf(out, sizeof out, "%s/out.cfg", dir);
    assert_int_equal(mxp_policy_map_save(want, out), MXP_EFORMAT);
    assert_non_null(strstr(mxp_last_error(), "MXP_POLICY_MAP_FILE_MAX"));
    assert_int_equal(access(out, F_OK), -1);
    mxp__policy_map_file_max = saved;
    assert_int_equal(mxp_policy_map_save(want, out), MXP_OK);
    remove(out);

    /* A NUL byte inside a file. */
    f = fopen(file, "wb");
    fwrite("a = f32\n\0b = f16\n", 1, 17, f);
    fclose(f);
    assert_int_equal(mxp_policy_map_load(file, &m), MXP_EFORMAT);
    assert_non_null(strstr(mxp_last_error(), "NUL byte at offset 8"));

    mxp_policy_map_free(want);
    free(text);
    remove(file);
    remove(fifo);
    rmdir(dir);
}

/* Every test starts from the initial global state (a failed test may leave it changed). */
static int reset_globals(void **state)
{
    (void)state;
    const mxp_policy f32 = {MXP_FLOAT32, MXP_FLOAT32, MXP_FLOAT32, MXP_QUANT_NONE, 0};
    mxp_set_default_policy(&f32);
    mxp_set_backend(MXP_BACKEND_CPU);
    return 0;
}

/* A save into a missing directory says why; a save that fails part-way (a full disk: RLIMIT_FSIZE
 * of 4 KiB in a child process) leaves the file that was there as it was, and no temporary file
 * beside it. */
static void test_save_failure_keeps_old_file(void **state)
{
    (void)state;
    char dir[64], path[96];
    snprintf(dir, sizeof dir, "/tmp/mxp_test_pmsave_%d", (int)getpid());
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/map.cfg", dir);
    char *text = malloc(64 * 1024);
    assert_non_null(text);
    size_t n = 0;
    for (int i = 0; i < 500; i++) n += (size_t)snprintf(text + n, 64 * 1024 - n, "layer%03d.weight = bf16\n", i);
    mxp_policy_map *m = NULL, *back = NULL;
    assert_int_equal(mxp_policy_map_parse(text, &m), MXP_OK);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/no_such_dir/map.cfg", dir);
    assert_int_equal(mxp_policy_map_save(m, missing), MXP_EIO); /* cannot even create the file */
    assert_non_null(strstr(mxp_last_error(), missing));
    assert_non_null(strstr(mxp_last_error(), "no such file or directory"));
    assert_int_equal(mxp_policy_map_save(m, path), MXP_OK);
    struct stat before;
    assert_int_equal(stat(path, &before), 0);
    assert_true(before.st_size > 8192);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        const struct rlimit rl = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &rl);
        const mxp_status st = mxp_policy_map_save(m, path);
        _exit(st == MXP_EIO && strstr(mxp_last_error(), path) ? 0 : 1);
    }
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0); /* the child's save failed with MXP_EIO */
    struct stat after;
    assert_int_equal(stat(path, &after), 0);
    assert_int_equal(after.st_size, before.st_size);
    assert_int_equal(mxp_policy_map_load(path, &back), MXP_OK);
    assert_true(mxp_policy_map_equal(m, back));
    DIR *d = opendir(dir);
    assert_non_null(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entries++;
    closedir(d);
    assert_int_equal(entries, 1); /* map.cfg alone: the temporary file was removed */
    remove(path);
    rmdir(dir);
    mxp_policy_map_free(back);
    mxp_policy_map_free(m);
    free(text);
}

/* Messages name the function called, once: a failure inside a shared step (the file read and
 * the parse inside load, the policy parse inside a config line) carries load's head in place of
 * the step's, a message quoted inside another loses its own head, and a head added to a message
 * that already fills the buffer cuts its end, never its start, and stays NUL-terminated. */
static void test_messages_name_the_function_once(void **state)
{
    (void)state;
    mxp_policy_map *m = NULL;
    /* a config line whose policy is bad: the policy parser's words, without its head */
    assert_int_equal(mxp_policy_map_parse("k = c=f13\n", &m), MXP_EPARSE);
    const char *want = "mxp_policy_map_parse: line 1: key 'k': unknown dtype 'f13'";
    if (strncmp(mxp_last_error(), want, strlen(want)) != 0) fail_msg("got \"%s\"", mxp_last_error());
    assert_null(strstr(mxp_last_error() + 1, "mxp_"));
    /* the same text from a file: load's head, not parse's */
    char path[128];
    snprintf(path, sizeof path, "/tmp/mxp_test_pm_head_%d.cfg", (int)getpid());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("ok = f32\nk = c=f13\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(mxp_policy_map_load(path, &m), MXP_EPARSE);
    remove(path);
    want = "mxp_policy_map_load: line 2: key 'k': unknown dtype 'f13'";
    if (strncmp(mxp_last_error(), want, strlen(want)) != 0) fail_msg("got \"%s\"", mxp_last_error());
    assert_null(strstr(mxp_last_error() + 1, "mxp_"));
    assert_null(m);
    /* a path of 3000 bytes: the read's message fills the 1 KiB buffer before load adds its head */
    char *longp = malloc(3001);
    assert_non_null(longp);
    memset(longp, 'a', 3000);
    longp[0] = '/';
    longp[3000] = '\0';
    assert_int_equal(mxp_policy_map_load(longp, &m), MXP_EIO);
    const char *msg = mxp_last_error();
    want = "mxp_policy_map_load: cannot open policy map file '/aaa";
    if (strncmp(msg, want, strlen(want)) != 0) fail_msg("got \"%.80s...\"", msg);
    const size_t len = strlen(msg);
    assert_true(len > 900 && len < 1024);
    for (size_t i = strlen(want); i < len; i++) assert_int_equal(msg[i], 'a'); /* the cut end */
    free(longp);
    assert_null(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_keras_example, reset_globals),
        cmocka_unit_test_setup(test_full_match_and_exact_wins, reset_globals),
        cmocka_unit_test_setup(test_ambiguous, reset_globals),
        cmocka_unit_test_setup(test_set_remove_errors, reset_globals),
        cmocka_unit_test_setup(test_cache_matches_slow_model, reset_globals),
        cmocka_unit_test_setup(test_concurrent_get, reset_globals),
        cmocka_unit_test_setup(test_config_parse, reset_globals),
        cmocka_unit_test_setup(test_config_errors, reset_globals),
        cmocka_unit_test_setup(test_config_round_trip, reset_globals),
        cmocka_unit_test_setup(test_apply_except, reset_globals),
        cmocka_unit_test_setup(test_apply_only_pred_replace, reset_globals),
        cmocka_unit_test_setup(test_apply_errors_leave_map_unchanged, reset_globals),
        cmocka_unit_test_setup(test_adversarial_keys_refused, reset_globals),
        cmocka_unit_test_setup(test_key_errors_in_user_terms, reset_globals),
        cmocka_unit_test_setup(test_lookup_work_counted, reset_globals),
        cmocka_unit_test_setup(test_build_is_linear_counted, reset_globals),
        cmocka_unit_test_setup(test_load_bounded, reset_globals),
        cmocka_unit_test_setup(test_save_failure_keeps_old_file, reset_globals),
        cmocka_unit_test_setup(test_messages_name_the_function_once, reset_globals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
