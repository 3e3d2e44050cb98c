/*
 * fuzz_policy_map.c - libFuzzer target for the policy-map text config and lookups.
 *
 * The input (NUL-terminated copy, at most 4 KiB so that pathological regexes stay quick) is
 * parsed as a config. Invariants checked (abort on violation):
 *  - parse fails with MXP_EPARSE/MXP_EEXIST and a "mxp_policy_map_parse: line N: " message (or MXP_ENOMEM), leaving
 *    the output untouched; or succeeds, and then:
 *  - format -> parse gives an equal map with the same keys in the same order, and formatting
 *    that map gives byte-identical text;
 *  - looking up every key gives exactly that key's policy (an exact key always wins);
 *  - lookups of derived paths give the same answer with the cache on, off, and on again
 *    (served from the cache), and the same decision as a slow model that compiles each key with
 *    glibc's regcomp and accepts a path when regexec's leftmost-longest match spans all of it
 *    (the library has its own matcher, src/path_regex.c; glibc is the independent reference).
 *    The model abstains when a key has '^' or '$' and the path a newline: glibc anchors at
 *    embedded newlines even without REG_NEWLINE, POSIX and the library only at the ends.
 *    It also abstains for a map holding a key whose size with every {m,n} written out exceeds
 *    MODEL_WEIGHT_MAX: glibc's lazily built DFA then needs hundreds of MiB for one 4 KiB path,
 *    which trips libFuzzer's -rss_limit_mb inside the oracle, not the library (the library
 *    bounds its own keys: src/path_regex.c, tested by test_path_regex).
 */
#include <regex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mixprec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MODEL_WEIGHT_MAX 2048u

/* An upper bound on the key's size once every {m,n} is expanded: its length times, for each
 * brace, one more than the largest count written in it (capped so it cannot overflow). */
static size_t model_weight(const char *k)
{
    size_t w = strlen(k) + 1;
    for (const char *p = strchr(k, '{'); p; p = strchr(p + 1, '{')) {
        size_t big = 0, cur = 0;
        for (const char *q = p + 1; *q && *q != '}'; q++) {
            if (*q >= '0' && *q <= '9') {
                cur = cur * 10 + (size_t)(*q - '0');
                if (cur > 100000) cur = 100000;
            } else {
                cur = 0;
            }
            if (cur > big) big = cur;
        }
        w *= big + 1;
        if (w > MODEL_WEIGHT_MAX) return MODEL_WEIGHT_MAX + 1;
    }
    return w;
}

static void check_lookup(const mxp_policy_map *a, const mxp_policy_map *b, const char *path)
{
    mxp_policy pa, pb;
    mxp_status sa = mxp_policy_map_get(a, path, &pa), sb = mxp_policy_map_get(b, path, &pb);
    if (sa != sb) abort();
    if (sa == MXP_OK && !mxp_policy_equal(&pa, &pb)) abort();
    if (sa != MXP_OK && sa != MXP_EAMBIGUOUS && sa != MXP_ENOMEM) abort();
}

/* The slow model: index of the deciding key, -1 for the default, -2 ambiguous, -3 unknown
 * (a model regex failed). */
static long model_decide(const mxp_policy_map *m, regex_t *re, const char *path)
{
    size_t n = mxp_policy_map_count(m);
    for (size_t i = 0; i < n; i++) {
        const char *k;
        mxp_policy_map_entry(m, i, &k, NULL);
        if (strcmp(k, path) == 0) return (long)i;
    }
    long found = -1;
    regmatch_t mt[1];
    bool newline = strchr(path, '\n') != NULL;
    for (size_t i = 0; i < n; i++) {
        const char *k;
        mxp_policy_map_entry(m, i, &k, NULL);
        if (newline && strpbrk(k, "^$")) return -3;
        int rc = regexec(&re[i], path, 1, mt, 0);
        if (rc != 0 && rc != REG_NOMATCH) return -3;
        if (rc == 0 && mt[0].rm_so == 0 && (size_t)mt[0].rm_eo == strlen(path)) {
            if (found >= 0) return -2;
            found = (long)i;
        }
    }
    return found;
}

static void check_model(const mxp_policy_map *m, regex_t *re, const char *path)
{
    long want = model_decide(m, re, path);
    if (want == -3) return;
    mxp_policy p;
    const char *key = NULL;
    mxp_status s = mxp_policy_map_match(m, path, &p, &key);
    if (want == -2) {
        if (s != MXP_EAMBIGUOUS) abort();
        return;
    }
    if (s != MXP_OK) abort();
    if (want == -1) {
        if (key != NULL) abort();
        return;
    }
    const char *k;
    mxp_policy_map_entry(m, (size_t)want, &k, NULL);
    if (key == NULL || strcmp(key, k) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    mxp_policy_map *m = (mxp_policy_map *)&size; /* sentinel: must stay untouched on failure */
    mxp_status s = mxp_policy_map_parse(text, &m);
    if (s != MXP_OK) {
        if (m != (mxp_policy_map *)&size) abort();
        if (s == MXP_EPARSE || s == MXP_EEXIST) {
            static const char head[] = "mxp_policy_map_parse: line ";
            if (strncmp(mxp_last_error(), head, sizeof head - 1) != 0) abort();
        } else if (s != MXP_ENOMEM) {
            abort();
        }
        free(text);
        return 0;
    }

    size_t len = 0;
    if (mxp_policy_map_format(m, NULL, 0, &len) != MXP_OK) abort();
    char *out = malloc(len + 1), *out2 = malloc(len + 1);
    if (!out || !out2) abort();
    size_t len1 = 0, len2 = 0;
    if (mxp_policy_map_format(m, out, len + 1, &len1) != MXP_OK || len1 != len || strlen(out) != len) abort();
    mxp_policy_map *back = NULL;
    if (mxp_policy_map_parse(out, &back) != MXP_OK) abort();
    if (!mxp_policy_map_equal(m, back)) abort();
    if (mxp_policy_map_count(m) != mxp_policy_map_count(back)) abort();
    if (mxp_policy_map_format(back, out2, len + 1, &len2) != MXP_OK || len2 != len || strcmp(out, out2) != 0)
        abort();

    mxp_policy_map *uncached = NULL;
    if (mxp_policy_map_parse(text, &uncached) != MXP_OK) abort();
    mxp_policy_map_set_cache_capacity(uncached, 0);

    size_t nk = mxp_policy_map_count(m);
    regex_t *re = calloc(nk ? nk : 1, sizeof *re);
    bool model_ok = re != NULL;
    size_t compiled = 0;
    for (; model_ok && compiled < nk; compiled++) {
        const char *k;
        mxp_policy_map_entry(m, compiled, &k, NULL);
        if (model_weight(k) > MODEL_WEIGHT_MAX) {
            model_ok = false;
            compiled++; /* the decrement below leaves exactly the compiled ones */
            break;
        }
        if (regcomp(&re[compiled], k, REG_EXTENDED) != 0) model_ok = false;
    }
    if (!model_ok && compiled > 0) compiled--; /* the failed one holds nothing to free */

    for (size_t i = 0; i < mxp_policy_map_count(m); i++) {
        const char *key;
        mxp_policy want, got;
        if (mxp_policy_map_entry(m, i, &key, &want) != MXP_OK) abort();
        if (mxp_policy_map_get(m, key, &got) != MXP_OK || !mxp_policy_equal(&got, &want)) abort();
        /* Derived paths: the key with a suffix, a prefix, and without its last byte. */
        size_t kl = strlen(key);
        char *path = malloc(kl + 3);
        if (!path) abort();
        memcpy(path, key, kl);
        memcpy(path + kl, "_x", 3);
        for (int round = 0; round < 2; round++) {
            check_lookup(m, uncached, path);
            check_lookup(m, uncached, path + (kl > 0 ? 1 : 0));
        }
        if (model_ok) {
            check_model(m, re, path);
            check_model(m, re, path + (kl > 0 ? 1 : 0));
        }
        path[kl > 0 ? kl - 1 : 0] = '\0';
        check_lookup(m, uncached, path);
        if (model_ok) check_model(m, re, path);
        free(path);
    }
    check_lookup(m, uncached, "");
    check_lookup(m, uncached, "dense_0/kernel");

    for (size_t i = 0; i < compiled; i++) regfree(&re[i]);
    free(re);
    mxp_policy_map_free(uncached);
    mxp_policy_map_free(back);
    mxp_policy_map_free(m);
    free(out2);
    free(out);
    free(text);
    return 0;
}
