/*
 * policy_map.c - per-path policies with Keras DTypePolicyMap semantics (exact key wins, else
 * every key is a POSIX ERE that must match the whole path, more than one match is ambiguous,
 * none gives the default), a text config format, and Axon's apply_policy.
 *
 * Lookup cost: an uncached lookup compares the path with every key and runs every regex. The
 * map therefore remembers, per path, *which* entry decided (an entry index, "the default" or
 * "ambiguous") in a small hash table guarded by a mutex. Storing the decision rather than the
 * policy means a change of the global default never makes the cache stale; set/remove/apply
 * empty it. Whole-path matching: each key K is compiled once as "^(K)$" (REG_NOSUB), see
 * entry_new.
 */
#include <ctype.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DEFAULT_CACHE_CAPACITY 4096
#define MAX_CACHE_CAPACITY ((size_t)1 << 20)
#define QUOTE_MAX 300

enum { RES_DEFAULT = -1, RES_AMBIGUOUS = -2 };

typedef struct entry {
    char *key;
    mxp_policy policy;
    regex_t re;
    size_t prefix_len; /* every whole-path match starts with key[0..prefix_len) (see literal_prefix) */
} entry;

typedef struct cache_slot {
    char *path; /* NULL: empty */
    size_t hash;
    long result; /* entry index, RES_DEFAULT or RES_AMBIGUOUS */
} cache_slot;

struct mxp_policy_map {
    entry **entries; /* insertion order; entries never move in memory */
    size_t count, cap;
    bool has_default;
    mxp_policy def;
    /* lookup cache, guarded by lock (get is logically const) */
    pthread_mutex_t lock;
    cache_slot *slots;
    size_t nslots, used, cache_cap;
};

static size_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

/* ---- create / free ------------------------------------------------------------------------ */

mxp_policy_map *mxp_policy_map_new(const mxp_policy *default_policy)
{
    if (default_policy && mxp_policy_validate(default_policy) != MXP_OK) return NULL;
    mxp_policy_map *m = calloc(1, sizeof *m);
    if (!m || pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        (void)mxp__fail(MXP_ENOMEM, "mxp_policy_map_new: out of memory");
        return NULL;
    }
    if (default_policy) {
        m->has_default = true;
        m->def = *default_policy;
    }
    m->cache_cap = DEFAULT_CACHE_CAPACITY;
    return m;
}

static void entry_free(entry *e)
{
    if (!e) return;
    regfree(&e->re);
    free(e->key);
    free(e);
}

/* Drop every cached path (caller holds the lock or has exclusive access). */
static void cache_clear(mxp_policy_map *m)
{
    for (size_t i = 0; i < m->nslots; i++) {
        free(m->slots[i].path);
        m->slots[i].path = NULL;
    }
    m->used = 0;
}

void mxp_policy_map_free(mxp_policy_map *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->count; i++) entry_free(m->entries[i]);
    free(m->entries);
    cache_clear(m);
    free(m->slots);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static void invalidate(mxp_policy_map *m)
{
    pthread_mutex_lock(&m->lock);
    cache_clear(m);
    pthread_mutex_unlock(&m->lock);
}

mxp_status mxp_policy_map_set_cache_capacity(mxp_policy_map *m, size_t capacity)
{
    if (!m) return mxp__fail(MXP_EINVAL, "mxp_policy_map_set_cache_capacity: NULL map");
    pthread_mutex_lock(&m->lock);
    cache_clear(m);
    free(m->slots);
    m->slots = NULL;
    m->nslots = 0;
    m->cache_cap = capacity < MAX_CACHE_CAPACITY ? capacity : MAX_CACHE_CAPACITY;
    pthread_mutex_unlock(&m->lock);
    return MXP_OK;
}

/* ---- entries ------------------------------------------------------------------------------ */

static long find_exact(const mxp_policy_map *m, const char *key)
{
    for (size_t i = 0; i < m->count; i++)
        if (strcmp(m->entries[i]->key, key) == 0) return (long)i;
    return -1;
}

/*
 * Keys are POSIX EREs, minus the constructs POSIX leaves undefined or that make glibc's regcomp
 * or regexec blow up, rejected here with a message naming the key:
 *  - back-references (\1..\9: not part of POSIX EREs; exponential to match);
 *  - a duplication symbol right after another ("a**", "a+{2}": undefined in POSIX; "T+++..."
 *    makes regcomp exponential);
 *  - an unmatched ')' (undefined in POSIX EREs; it would also break the anchoring below);
 *  - intervals whose bounds exceed 255 (RE_DUP_MAX's POSIX minimum) or whose bounds multiply
 *    past 1000 over the key (nested intervals are expanded by copying).
 * Returns NULL when the key passes, else a static explanation.
 */
static const char *ere_subset_problem(const char *k)
{
    bool prev_dup = false;
    int depth = 0;
    unsigned long product = 1;
    for (size_t i = 0; k[i];) {
        char c = k[i];
        if (c == '\\') {
            if (!k[i + 1]) return NULL; /* trailing backslash: regcomp explains */
            if (k[i + 1] >= '1' && k[i + 1] <= '9') return "back-references are not supported";
            i += 2;
            prev_dup = false;
            continue;
        }
        if (c == '[') { /* bracket expression: skip to its closing ']' */
            size_t j = i + 1;
            if (k[j] == '^') j++;
            if (k[j] == ']') j++;
            while (k[j] && k[j] != ']') {
                if (k[j] == '[' && (k[j + 1] == ':' || k[j + 1] == '.' || k[j + 1] == '=')) {
                    char d = k[j + 1];
                    const char *end = NULL;
                    for (const char *q = k + j + 2; *q; q++)
                        if (q[0] == d && q[1] == ']') {
                            end = q;
                            break;
                        }
                    if (!end) return NULL; /* malformed: regcomp explains */
                    j = (size_t)(end - k) + 2;
                } else {
                    j++;
                }
            }
            if (!k[j]) return NULL; /* unterminated: regcomp explains */
            i = j + 1;
            prev_dup = false;
            continue;
        }
        if (c == '*' || c == '+' || c == '?') {
            if (prev_dup) return "a repetition operator directly follows another (undefined in POSIX EREs)";
            prev_dup = true;
            i++;
            continue;
        }
        if (c == '{') {
            size_t j = i + 1;
            unsigned long lo = 0, hi = 0;
            bool digits = false, comma = false, hi_digits = false;
            while (k[j] >= '0' && k[j] <= '9') {
                lo = lo < 100000 ? lo * 10 + (unsigned long)(k[j] - '0') : lo;
                digits = true;
                j++;
            }
            if (k[j] == ',') {
                comma = true;
                j++;
                while (k[j] >= '0' && k[j] <= '9') {
                    hi = hi < 100000 ? hi * 10 + (unsigned long)(k[j] - '0') : hi;
                    hi_digits = true;
                    j++;
                }
            }
            if (digits && k[j] == '}') { /* an interval */
                if (prev_dup) return "a repetition operator directly follows another (undefined in POSIX EREs)";
                unsigned long top = !comma ? lo : hi_digits ? hi : lo + 1;
                if (lo > 255 || (hi_digits && hi > 255)) return "an interval bound exceeds 255";
                product *= top > 1 ? top : 1;
                if (product > 1000) return "intervals multiply past 1000 repetitions";
                prev_dup = true;
                i = j + 1;
                continue;
            }
        }
        if (c == '(') depth++;
        if (c == ')') {
            if (depth == 0) return "unmatched ')'";
            depth--;
        }
        prev_dup = false;
        i++;
    }
    return NULL;
}

/*
 * Length of the literal text every match of key must start with, for a cheap pre-check before
 * regexec: the leading characters up to the first ERE special character, minus the last one if
 * a repetition operator follows it ("dense_?" only promises "dense"); 0 when the key has an
 * alternation '|' outside parentheses ("ab|cd" promises nothing). Brackets and escapes are
 * skipped when looking for '|'.
 */
static size_t literal_prefix(const char *k)
{
    size_t n = strcspn(k, "\\.[]()*+?{}|^$");
    if (n > 0 && (k[n] == '*' || k[n] == '?' || k[n] == '{' || k[n] == '+')) n--;
    int depth = 0;
    for (size_t i = 0; k[i]; i++) {
        if (k[i] == '\\') {
            if (!k[i + 1]) break;
            i++;
        } else if (k[i] == '[') {
            size_t j = i + 1;
            if (k[j] == '^') j++;
            if (k[j] == ']') j++;
            while (k[j] && k[j] != ']') {
                if (k[j] == '[' && (k[j + 1] == ':' || k[j + 1] == '.' || k[j + 1] == '=')) {
                    const char *end = strstr(k + j + 2, (char[]){k[j + 1], ']', '\0'});
                    if (!end) return 0;
                    j = (size_t)(end - k) + 2;
                } else {
                    j++;
                }
            }
            if (!k[j]) return 0;
            i = j;
        } else if (k[i] == '(') {
            depth++;
        } else if (k[i] == ')') {
            depth--;
        } else if (k[i] == '|' && depth == 0) {
            return 0;
        }
    }
    return n;
}

/*
 * A new entry with its regex compiled; *out untouched on failure. The key K is compiled as
 * "^(K)$" with REG_NOSUB: whole-path matching by anchoring (safe because K has balanced
 * parentheses and no back-references), and glibc can then match with its DFA alone.
 */
static mxp_status entry_new(const char *key, const mxp_policy *p, entry **out)
{
    const char *problem = ere_subset_problem(key);
    if (problem) return mxp__fail(MXP_EPARSE, "invalid regex key '%.*s': %s", QUOTE_MAX, key, problem);
    entry *e = calloc(1, sizeof *e);
    size_t len = strlen(key);
    char *k = e ? malloc(len + 1) : NULL;
    char *anchored = k ? malloc(len + 5) : NULL;
    if (!e || !k || !anchored) {
        free(e);
        free(k);
        return mxp__fail(MXP_ENOMEM, "policy map: out of memory adding key '%.*s'", QUOTE_MAX, key);
    }
    memcpy(k, key, len + 1);
    memcpy(anchored, "^(", 2);
    memcpy(anchored + 2, key, len);
    memcpy(anchored + 2 + len, ")$", 3);
    int rc = regcomp(&e->re, anchored, REG_EXTENDED | REG_NOSUB);
    free(anchored);
    if (rc != 0) {
        char why[256];
        regerror(rc, &e->re, why, sizeof why);
        free(k);
        free(e);
        if (rc == REG_ESPACE)
            return mxp__fail(MXP_ENOMEM, "policy map: out of memory compiling key '%.*s'", QUOTE_MAX, key);
        return mxp__fail(MXP_EPARSE, "invalid regex key '%.*s': %s", QUOTE_MAX, key, why);
    }
    e->key = k;
    e->policy = *p;
    e->prefix_len = literal_prefix(k);
    *out = e;
    return MXP_OK;
}

static mxp_status reserve(mxp_policy_map *m, size_t extra)
{
    if (m->count + extra <= m->cap) return MXP_OK;
    size_t nc = m->cap ? m->cap : 8;
    while (nc < m->count + extra) nc *= 2;
    entry **ne = realloc(m->entries, nc * sizeof *ne);
    if (!ne) return mxp__fail(MXP_ENOMEM, "policy map: out of memory growing to %zu entries", nc);
    m->entries = ne;
    m->cap = nc;
    return MXP_OK;
}

mxp_status mxp_policy_map_set(mxp_policy_map *m, const char *key, const mxp_policy *p)
{
    if (!m || !key || !p) return mxp__fail(MXP_EINVAL, "mxp_policy_map_set: map, key and policy must be non-NULL");
    if (!*key) return mxp__fail(MXP_EINVAL, "mxp_policy_map_set: empty key");
    mxp_status s = mxp_policy_validate(p);
    if (s != MXP_OK) return s;
    if (find_exact(m, key) >= 0)
        return mxp__fail(MXP_EEXIST, "key '%.*s' is already in the policy map", QUOTE_MAX, key);
    if ((s = reserve(m, 1)) != MXP_OK) return s;
    entry *e;
    if ((s = entry_new(key, p, &e)) != MXP_OK) return s;
    m->entries[m->count++] = e;
    invalidate(m);
    return MXP_OK;
}

mxp_status mxp_policy_map_remove(mxp_policy_map *m, const char *key)
{
    if (!m || !key) return mxp__fail(MXP_EINVAL, "mxp_policy_map_remove: map and key must be non-NULL");
    long i = find_exact(m, key);
    if (i < 0) return mxp__fail(MXP_ENOTFOUND, "no key '%.*s' in the policy map", QUOTE_MAX, key);
    entry_free(m->entries[i]);
    memmove(m->entries + i, m->entries + i + 1, (m->count - (size_t)i - 1) * sizeof *m->entries);
    m->count--;
    invalidate(m);
    return MXP_OK;
}

size_t mxp_policy_map_count(const mxp_policy_map *m) { return m ? m->count : 0; }

mxp_status mxp_policy_map_entry(const mxp_policy_map *m, size_t i, const char **key, mxp_policy *p)
{
    if (!m) return mxp__fail(MXP_EINVAL, "mxp_policy_map_entry: NULL map");
    if (i >= m->count)
        return mxp__fail(MXP_ENOTFOUND, "policy map entry %zu out of range (%zu entries)", i, m->count);
    if (key) *key = m->entries[i]->key;
    if (p) *p = m->entries[i]->policy;
    return MXP_OK;
}

bool mxp_policy_map_default(const mxp_policy_map *m, mxp_policy *out)
{
    if (!m || !m->has_default) return false;
    if (out) *out = m->def;
    return true;
}

bool mxp_policy_map_equal(const mxp_policy_map *a, const mxp_policy_map *b)
{
    if (!a || !b) return false;
    if (a->has_default != b->has_default) return false;
    if (a->has_default && !mxp_policy_equal(&a->def, &b->def)) return false;
    if (a->count != b->count) return false;
    for (size_t i = 0; i < a->count; i++) {
        long j = find_exact(b, a->entries[i]->key);
        if (j < 0 || !mxp_policy_equal(&a->entries[i]->policy, &b->entries[j]->policy)) return false;
    }
    return true;
}

/* ---- lookup ------------------------------------------------------------------------------- */

/* Does entry e's (anchored) regex match the whole path? 1 yes, 0 no, -1 out of memory. */
static int full_match(const entry *e, const char *path)
{
    if (e->prefix_len && strncmp(path, e->key, e->prefix_len) != 0) return 0;
    int rc = regexec(&e->re, path, 0, NULL, 0);
    if (rc == REG_NOMATCH) return 0;
    return rc == 0 ? 1 : -1;
}

/* The decision for path without the cache: entry index, RES_DEFAULT or RES_AMBIGUOUS. */
static mxp_status resolve(const mxp_policy_map *m, const char *path, long *result)
{
    long ex = find_exact(m, path);
    if (ex >= 0) {
        *result = ex;
        return MXP_OK;
    }
    long found = RES_DEFAULT;
    for (size_t i = 0; i < m->count; i++) {
        int r = full_match(m->entries[i], path);
        if (r < 0)
            return mxp__fail(MXP_ENOMEM, "policy map: out of memory matching key '%.*s' against '%.*s'",
                             QUOTE_MAX, m->entries[i]->key, QUOTE_MAX, path);
        if (r) {
            if (found != RES_DEFAULT) {
                *result = RES_AMBIGUOUS;
                return MXP_OK;
            }
            found = (long)i;
        }
    }
    *result = found;
    return MXP_OK;
}

/* Build the MXP_EAMBIGUOUS message listing every key that matches path. */
static mxp_status ambiguous(const mxp_policy_map *m, const char *path)
{
    char keys[768];
    size_t n = 0, matched = 0;
    keys[0] = '\0';
    for (size_t i = 0; i < m->count; i++) {
        if (full_match(m->entries[i], path) != 1) continue;
        matched++;
        if (n < sizeof keys) {
            int w = snprintf(keys + n, sizeof keys - n, "%s'%s'", matched > 1 ? ", " : "",
                             m->entries[i]->key);
            n += w > 0 ? (size_t)w : 0;
        }
    }
    if (n >= sizeof keys) memcpy(keys + sizeof keys - 5, "...", 4);
    return mxp__fail(MXP_EAMBIGUOUS, "ambiguous policy for path '%.*s': %zu keys match it: %s",
                     QUOTE_MAX, path, matched, keys);
}

static bool cache_lookup(mxp_policy_map *m, const char *path, size_t h, long *result)
{
    if (!m->slots) return false;
    size_t mask = m->nslots - 1;
    for (size_t i = h & mask; m->slots[i].path; i = (i + 1) & mask) {
        if (m->slots[i].hash == h && strcmp(m->slots[i].path, path) == 0) {
            *result = m->slots[i].result;
            return true;
        }
    }
    return false;
}

/* Grow the slot table to ns slots (a power of two), rehashing; false when out of memory. */
static bool cache_grow(mxp_policy_map *m, size_t ns)
{
    cache_slot *slots = calloc(ns, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < m->nslots; i++) {
        if (!m->slots[i].path) continue;
        size_t j = m->slots[i].hash & (ns - 1);
        while (slots[j].path) j = (j + 1) & (ns - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->nslots = ns;
    return true;
}

/* Remember path -> result (best effort: silently skipped when out of memory). The table starts
 * small and doubles up to 2 * cache_cap slots (load <= 1/2); at capacity it is emptied. */
static void cache_insert(mxp_policy_map *m, const char *path, size_t h, long result)
{
    if (m->cache_cap == 0) return;
    if (m->used >= m->cache_cap) cache_clear(m);
    if ((m->used + 1) * 2 > m->nslots && !cache_grow(m, m->nslots ? m->nslots * 2 : 16)) return;
    long dummy;
    if (cache_lookup(m, path, h, &dummy)) return; /* another thread got here first */
    size_t len = strlen(path);
    char *copy = malloc(len + 1);
    if (!copy) return;
    memcpy(copy, path, len + 1);
    size_t mask = m->nslots - 1, i = h & mask;
    while (m->slots[i].path) i = (i + 1) & mask;
    m->slots[i] = (cache_slot){copy, h, result};
    m->used++;
}

mxp_status mxp_policy_map_match(const mxp_policy_map *cm, const char *path, mxp_policy *out,
                                const char **key)
{
    if (!cm || !path || !out)
        return mxp__fail(MXP_EINVAL, "mxp_policy_map_get: map, path and out must be non-NULL");
    /* The map is logically const; only the cache (guarded by the lock) changes. */
    mxp_policy_map *m = (mxp_policy_map *)(uintptr_t)cm;
    long result = RES_DEFAULT;
    bool hit = false;
    size_t h = 0;
    if (m->cache_cap > 0) {
        h = hash_str(path);
        pthread_mutex_lock(&m->lock);
        hit = cache_lookup(m, path, h, &result);
        pthread_mutex_unlock(&m->lock);
    }
    if (!hit) {
        mxp_status s = resolve(m, path, &result);
        if (s != MXP_OK) return s;
        if (m->cache_cap > 0) {
            pthread_mutex_lock(&m->lock);
            cache_insert(m, path, h, result);
            pthread_mutex_unlock(&m->lock);
        }
    }
    if (result == RES_AMBIGUOUS) return ambiguous(m, path);
    if (result >= 0) {
        *out = m->entries[result]->policy;
        if (key) *key = m->entries[result]->key;
    } else {
        *out = m->has_default ? m->def : mxp_default_policy();
        if (key) *key = NULL;
    }
    return MXP_OK;
}

mxp_status mxp_policy_map_get(const mxp_policy_map *m, const char *path, mxp_policy *out)
{
    return mxp_policy_map_match(m, path, out, NULL);
}

/* ---- text config -------------------------------------------------------------------------- */

/* A growing output with snprintf semantics: writes what fits, counts everything. */
typedef struct sink {
    char *buf;
    size_t cap, len;
} sink;

static void put(sink *s, const char *text, size_t n)
{
    if (s->len < s->cap) {
        size_t room = s->cap - 1 - s->len; /* keep one byte for the NUL */
        size_t k = n < room ? n : room;
        memcpy(s->buf + s->len, text, k);
    }
    s->len += n;
}

static void putc_(sink *s, char c) { put(s, &c, 1); }

/* Keys that would be misread unquoted: directive or quote start, '=' '#' '"' or a line break
 * inside, or blanks at either end (they would be trimmed). */
static bool needs_quotes(const char *k)
{
    size_t n = strlen(k);
    if (k[0] == '@' || k[0] == '"' || isspace((unsigned char)k[0]) || isspace((unsigned char)k[n - 1]))
        return true;
    return strpbrk(k, "=#\"\n\r") != NULL;
}

static void put_key(sink *s, const char *k)
{
    if (!needs_quotes(k)) {
        put(s, k, strlen(k));
        return;
    }
    putc_(s, '"');
    for (const char *p = k; *p; p++) {
        switch (*p) {
        case '"': put(s, "\\\"", 2); break;
        case '\\': put(s, "\\\\", 2); break;
        case '\n': put(s, "\\n", 2); break;
        case '\r': put(s, "\\r", 2); break;
        default: putc_(s, *p);
        }
    }
    putc_(s, '"');
}

static void put_policy(sink *s, const mxp_policy *p)
{
    char tmp[96];
    int n = mxp_policy_format(p, tmp, sizeof tmp);
    if (n > 0) put(s, tmp, (size_t)n);
}

mxp_status mxp_policy_map_format(const mxp_policy_map *m, char *buf, size_t cap, size_t *len)
{
    if (!m) return mxp__fail(MXP_EINVAL, "mxp_policy_map_format: NULL map");
    if (!buf && cap > 0) return mxp__fail(MXP_EINVAL, "mxp_policy_map_format: NULL buf with cap %zu", cap);
    sink s = {buf, cap, 0};
    if (m->has_default) {
        put(&s, "@default = ", 11);
        put_policy(&s, &m->def);
        putc_(&s, '\n');
    }
    for (size_t i = 0; i < m->count; i++) {
        put_key(&s, m->entries[i]->key);
        put(&s, " = ", 3);
        put_policy(&s, &m->entries[i]->policy);
        putc_(&s, '\n');
    }
    if (cap > 0) buf[s.len < cap ? s.len : cap - 1] = '\0';
    if (len) *len = s.len;
    return MXP_OK;
}

/* Parse one config line [b, e) into m. `key_buf` has room for e - b + 1 bytes. */
static mxp_status parse_line(mxp_policy_map *m, const char *b, const char *e, int line, char *key_buf,
                             bool *seen_default)
{
    while (b < e && isspace((unsigned char)*b)) b++;
    if (b == e || *b == '#') return MXP_OK;
    size_t klen = 0;
    bool quoted = false;
    const char *p = b;
    if (*p == '"') {
        quoted = true;
        for (p++;; p++) {
            if (p == e)
                return mxp__fail(MXP_EPARSE, "line %d: unterminated quoted key '%.*s'", line,
                                 (int)(e - b) < QUOTE_MAX ? (int)(e - b) : QUOTE_MAX, b);
            if (*p == '"') break;
            if (*p == '\\') {
                if (++p == e)
                    return mxp__fail(MXP_EPARSE, "line %d: unterminated quoted key '%.*s'", line,
                                     (int)(e - b) < QUOTE_MAX ? (int)(e - b) : QUOTE_MAX, b);
                switch (*p) {
                case '"': key_buf[klen++] = '"'; break;
                case '\\': key_buf[klen++] = '\\'; break;
                case 'n': key_buf[klen++] = '\n'; break;
                case 'r': key_buf[klen++] = '\r'; break;
                default:
                    return mxp__fail(MXP_EPARSE, "line %d: unknown escape '\\%c' in quoted key (use "
                                                 "\\\" \\\\ \\n \\r)",
                                     line, *p);
                }
            } else {
                key_buf[klen++] = *p;
            }
        }
        p++; /* past the closing quote */
        while (p < e && isspace((unsigned char)*p)) p++;
        if (p == e || *p != '=')
            return mxp__fail(MXP_EPARSE, "line %d: expected '=' after quoted key, got '%.*s'", line,
                             (int)(e - p) < QUOTE_MAX ? (int)(e - p) : QUOTE_MAX, p);
    } else {
        while (p < e && *p != '=' && *p != '#') p++;
        if (p == e || *p == '#') {
            const char *t = p;
            while (t > b && isspace((unsigned char)t[-1])) t--;
            return mxp__fail(MXP_EPARSE, "line %d: expected 'key = policy', got '%.*s' (no '=')", line,
                             (int)(t - b) < QUOTE_MAX ? (int)(t - b) : QUOTE_MAX, b);
        }
        const char *t = p;
        while (t > b && isspace((unsigned char)t[-1])) t--;
        klen = (size_t)(t - b);
        memcpy(key_buf, b, klen);
    }
    key_buf[klen] = '\0';
    if (klen == 0) return mxp__fail(MXP_EPARSE, "line %d: empty key before '='", line);

    /* The policy: after '=', up to a '#' comment, trimmed. */
    const char *vb = p + 1, *ve = vb;
    while (ve < e && *ve != '#') ve++;
    while (vb < ve && isspace((unsigned char)*vb)) vb++;
    while (ve > vb && isspace((unsigned char)ve[-1])) ve--;
    if (vb == ve)
        return mxp__fail(MXP_EPARSE, "line %d: missing policy after '=' for key '%.*s'", line, QUOTE_MAX,
                         key_buf);
    char *val = malloc((size_t)(ve - vb) + 1);
    if (!val) return mxp__fail(MXP_ENOMEM, "line %d: out of memory", line);
    memcpy(val, vb, (size_t)(ve - vb));
    val[ve - vb] = '\0';
    mxp_policy pol;
    mxp_status s = mxp_policy_parse(val, &pol);
    free(val);
    if (s != MXP_OK) {
        char why[768];
        snprintf(why, sizeof why, "%s", mxp_last_error());
        return mxp__fail(s, "line %d: key '%.*s': %s", line, QUOTE_MAX, key_buf, why);
    }
    if (!quoted && key_buf[0] == '@') {
        if (strcmp(key_buf, "@default") != 0)
            return mxp__fail(MXP_EPARSE, "line %d: unknown directive '%.*s' (only @default exists; "
                                         "quote a key that starts with '@')",
                             line, QUOTE_MAX, key_buf);
        if (*seen_default) return mxp__fail(MXP_EPARSE, "line %d: repeated @default", line);
        *seen_default = true;
        m->has_default = true;
        m->def = pol;
        return MXP_OK;
    }
    s = mxp_policy_map_set(m, key_buf, &pol);
    if (s != MXP_OK) {
        char why[768];
        snprintf(why, sizeof why, "%s", mxp_last_error());
        return mxp__fail(s, "line %d: %s", line, why);
    }
    return MXP_OK;
}

mxp_status mxp_policy_map_parse(const char *text, mxp_policy_map **out)
{
    if (!text || !out) return mxp__fail(MXP_EINVAL, "mxp_policy_map_parse: text and out must be non-NULL");
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    if (!m) return MXP_ENOMEM;
    size_t longest = 0;
    for (const char *b = text; *b;) {
        const char *nl = strchr(b, '\n');
        size_t n = nl ? (size_t)(nl - b) : strlen(b);
        if (n > longest) longest = n;
        b += n + (nl ? 1 : 0);
    }
    char *key_buf = malloc(longest + 1);
    if (!key_buf) {
        mxp_policy_map_free(m);
        return mxp__fail(MXP_ENOMEM, "mxp_policy_map_parse: out of memory");
    }
    bool seen_default = false;
    int line = 1;
    mxp_status s = MXP_OK;
    for (const char *b = text; *b; line++) {
        const char *nl = strchr(b, '\n');
        const char *e = nl ? nl : b + strlen(b);
        if ((s = parse_line(m, b, e, line, key_buf, &seen_default)) != MXP_OK) break;
        if (!nl) break;
        b = nl + 1;
    }
    free(key_buf);
    if (s != MXP_OK) {
        mxp_policy_map_free(m);
        return s;
    }
    *out = m;
    return MXP_OK;
}

mxp_status mxp_policy_map_load(const char *path, mxp_policy_map **out)
{
    if (!path || !out) return mxp__fail(MXP_EINVAL, "mxp_policy_map_load: path and out must be non-NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return mxp__fail(MXP_EIO, "cannot open policy map file '%s'", path);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 1 >= cap) {
            size_t nc = cap ? cap * 2 : 4096;
            char *nb = realloc(buf, nc);
            if (!nb) {
                free(buf);
                fclose(f);
                return mxp__fail(MXP_ENOMEM, "out of memory reading '%s'", path);
            }
            buf = nb;
            cap = nc;
        }
        size_t got = fread(buf + len, 1, cap - 1 - len, f);
        len += got;
        if (got == 0) break;
    }
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(buf);
        return mxp__fail(MXP_EIO, "error reading policy map file '%s'", path);
    }
    buf[len] = '\0';
    mxp_status s = mxp_policy_map_parse(buf, out);
    free(buf);
    return s;
}

mxp_status mxp_policy_map_save(const mxp_policy_map *m, const char *path)
{
    if (!m || !path) return mxp__fail(MXP_EINVAL, "mxp_policy_map_save: map and path must be non-NULL");
    size_t len;
    mxp_status s = mxp_policy_map_format(m, NULL, 0, &len);
    if (s != MXP_OK) return s;
    char *buf = malloc(len + 1);
    if (!buf) return mxp__fail(MXP_ENOMEM, "out of memory formatting the policy map");
    (void)mxp_policy_map_format(m, buf, len + 1, &len);
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(buf);
        return mxp__fail(MXP_EIO, "cannot create policy map file '%s'", path);
    }
    bool ok = fwrite(buf, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    free(buf);
    return ok ? MXP_OK : mxp__fail(MXP_EIO, "error writing policy map file '%s'", path);
}

/* ---- apply_policy ------------------------------------------------------------------------- */

static bool in_list(const char *op, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(op, list[i]) == 0) return true;
    return false;
}

mxp_status mxp_policy_map_apply(mxp_policy_map *m, const mxp_layer *layers, size_t n,
                                const mxp_policy *p, const mxp_layer_select *sel, size_t *n_applied)
{
    if (!m || !p) return mxp__fail(MXP_EINVAL, "mxp_policy_map_apply: map and policy must be non-NULL");
    if (!layers && n > 0) return mxp__fail(MXP_EINVAL, "mxp_policy_map_apply: NULL layers with n = %zu", n);
    mxp_status s = mxp_policy_validate(p);
    if (s != MXP_OK) return s;
    for (size_t i = 0; i < n; i++) {
        if (!layers[i].path || !layers[i].path[0] || !layers[i].op)
            return mxp__fail(MXP_EINVAL, "mxp_policy_map_apply: layer %zu has a NULL or empty path or "
                                         "a NULL op",
                             i);
    }
    static const mxp_layer_select all = {NULL, 0, NULL, 0, NULL, NULL};
    if (!sel) sel = &all;
    for (size_t i = 0; sel->only && i < sel->n_only; i++)
        if (!sel->only[i]) return mxp__fail(MXP_EINVAL, "mxp_policy_map_apply: only[%zu] is NULL", i);
    for (size_t i = 0; sel->except && i < sel->n_except; i++)
        if (!sel->except[i]) return mxp__fail(MXP_EINVAL, "mxp_policy_map_apply: except[%zu] is NULL", i);

    /* action[i]: -1 not applied (unselected or a repeat), -2 new entry (fresh[i]), k >= 0 replace k. */
    long *action = calloc(n ? n : 1, sizeof *action);
    entry **fresh = calloc(n ? n : 1, sizeof *fresh);
    if (!action || !fresh) {
        free(action);
        free(fresh);
        return mxp__fail(MXP_ENOMEM, "mxp_policy_map_apply: out of memory");
    }
    size_t selected = 0, added = 0;
    for (size_t i = 0; i < n; i++) {
        const mxp_layer *l = &layers[i];
        bool take = (!sel->only || in_list(l->op, sel->only, sel->n_only)) &&
                    (!sel->except || !in_list(l->op, sel->except, sel->n_except)) &&
                    (!sel->pred || sel->pred(l->path, l->op, sel->user));
        action[i] = -1;
        if (!take) continue;
        selected++;
        bool repeat = false;
        for (size_t j = 0; j < i && !repeat; j++)
            repeat = action[j] != -1 && strcmp(layers[j].path, l->path) == 0;
        if (repeat) continue;
        long k = find_exact(m, l->path);
        if (k >= 0) {
            action[i] = k;
        } else {
            if ((s = entry_new(l->path, p, &fresh[i])) != MXP_OK) break;
            action[i] = -2;
            added++;
        }
    }
    if (s == MXP_OK) s = reserve(m, added);
    if (s != MXP_OK) {
        for (size_t i = 0; i < n; i++) entry_free(fresh[i]);
        free(action);
        free(fresh);
        return s;
    }
    for (size_t i = 0; i < n; i++) {
        if (action[i] >= 0) m->entries[action[i]]->policy = *p;
        else if (action[i] == -2) m->entries[m->count++] = fresh[i];
    }
    free(action);
    free(fresh);
    invalidate(m);
    if (n_applied) *n_applied = selected;
    return MXP_OK;
}
