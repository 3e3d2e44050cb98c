/*
 * policy_map.c - per-path policies with Keras DTypePolicyMap semantics (exact key wins, else
 * every key is a POSIX ERE that must match the whole path, more than one match is ambiguous,
 * none gives the default), a text config format, and Axon's apply_policy.
 *
 * Costs (docs/DESIGN.md §6):
 *  - keys live in an array in insertion order plus a hash index (key -> position), so set, an
 *    exact lookup and a duplicate check are O(1) amortised (O(key length)); remove is O(n)
 *    (it keeps the order);
 *  - a key without ERE special characters matches only itself, so it is not compiled and never
 *    scanned as a regex; the other keys are compiled by path_regex.c (bounded, see there) and
 *    kept in a second, insertion-ordered list;
 *  - an uncached lookup hashes the path, then runs every regex key: each costs at most
 *    2 * states * (strlen(path) + 1) instruction visits (path_regex.h), so a lookup is linear
 *    in the path for a given map;
 *  - the lookup cache remembers, per path, *which* entry decided (an entry index, "the default"
 *    or "ambiguous") in a hash table guarded by a mutex. Storing the decision rather than the
 *    policy means a change of the global default never makes the cache stale; set/remove/apply
 *    empty it, in O(cached paths) thanks to a list of occupied slots.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "path_regex.h"

#define DEFAULT_CACHE_CAPACITY 4096
#define MAX_CACHE_CAPACITY ((size_t)1 << 20)
#define QUOTE_MAX 300

size_t mxp__policy_map_file_max = MXP_POLICY_MAP_FILE_MAX;
_Thread_local unsigned long long mxp__policy_map_probes;

enum { RES_DEFAULT = -1, RES_AMBIGUOUS = -2 };

typedef struct entry {
    char *key;
    size_t hash; /* hash_str(key) */
    mxp_policy policy;
    mxp__re *re; /* NULL for a literal key (no ERE special character: it matches only itself) */
} entry;

typedef struct index_slot {
    size_t hash; /* the key's hash, compared before the entry is touched */
    size_t pos;  /* entry position + 1; 0: empty */
} index_slot;

typedef struct cache_slot {
    char *path; /* NULL: empty */
    size_t hash;
    long result; /* entry index, RES_DEFAULT or RES_AMBIGUOUS */
} cache_slot;

struct mxp_policy_map {
    entry **entries; /* insertion order; entries never move in memory */
    size_t count, cap;
    index_slot *index; /* open addressing, key hash -> entry position; load <= 1/2 */
    size_t nindex;   /* slots, a power of two (0 before the first key) */
    size_t *rx;      /* positions of the regex (non-literal) entries, in insertion order */
    size_t nrx, rx_cap;
    size_t max_states; /* largest compiled regex among the entries */
    bool has_default;
    mxp_policy def;
    /* lookup cache, guarded by lock (get is logically const) */
    pthread_mutex_t lock;
    cache_slot *slots;
    size_t *occupied; /* indices of the used slots, so that emptying costs O(used) */
    size_t nslots, used, cache_cap;
};

static size_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29)); /* fold the high bits into the low ones the tables use */
}

/* ---- create / free ------------------------------------------------------------------------ */

mxp_policy_map *mxp_policy_map_new(const mxp_policy *default_policy)
{
    if (default_policy && mxp__policy_check("mxp_policy_map_new", default_policy) != MXP_OK) return NULL;
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
    mxp__re_free(e->re);
    free(e->key);
    free(e);
}

/* Drop every cached path (caller holds the lock or has exclusive access). O(used). */
static void cache_clear(mxp_policy_map *m)
{
    for (size_t j = 0; j < m->used; j++) {
        cache_slot *s = &m->slots[m->occupied[j]];
        free(s->path);
        s->path = NULL;
    }
    m->used = 0;
}

void mxp_policy_map_free(mxp_policy_map *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->count; i++) entry_free(m->entries[i]);
    free(m->entries);
    free(m->index);
    free(m->rx);
    cache_clear(m);
    free(m->slots);
    free(m->occupied);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static void invalidate(mxp_policy_map *m)
{
    pthread_mutex_lock(&m->lock);
    cache_clear(m);
    pthread_mutex_unlock(&m->lock);
}

/* The map_* functions below record their messages without a head; the public function that
 * wraps each adds its own name (mxp__in), also to messages recorded by the steps they share. */
static mxp_status map_set_cache_capacity(mxp_policy_map *m, size_t capacity)
{
    if (!m) return mxp__fail(MXP_EINVAL, "map is NULL");
    pthread_mutex_lock(&m->lock);
    cache_clear(m);
    free(m->slots);
    free(m->occupied);
    m->slots = NULL;
    m->occupied = NULL;
    m->nslots = 0;
    m->cache_cap = capacity < MAX_CACHE_CAPACITY ? capacity : MAX_CACHE_CAPACITY;
    pthread_mutex_unlock(&m->lock);
    return MXP_OK;
}

mxp_status mxp_policy_map_set_cache_capacity(mxp_policy_map *m, size_t capacity)
{
    return mxp__in("mxp_policy_map_set_cache_capacity", map_set_cache_capacity(m, capacity));
}

/* ---- the key index ------------------------------------------------------------------------ */

static long find_exact_h(const mxp_policy_map *m, const char *key, size_t h)
{
    if (m->nindex == 0) return -1;
    size_t mask = m->nindex - 1;
    for (size_t i = h & mask; m->index[i].pos; i = (i + 1) & mask) {
        mxp__policy_map_probes++;
        if (m->index[i].hash == h && strcmp(m->entries[m->index[i].pos - 1]->key, key) == 0)
            return (long)(m->index[i].pos - 1);
    }
    return -1;
}

static long find_exact(const mxp_policy_map *m, const char *key) { return find_exact_h(m, key, hash_str(key)); }

/* Put entry position pos into the index (room is guaranteed by index_reserve). */
static void index_put(mxp_policy_map *m, size_t pos)
{
    size_t h = m->entries[pos]->hash, mask = m->nindex - 1, i = h & mask;
    for (; m->index[i].pos; i = (i + 1) & mask) mxp__policy_map_probes++;
    m->index[i] = (index_slot){h, pos + 1};
}

/* Make room for `total` entries in the index (load <= 1/2), rehashing when it grows. */
static mxp_status index_reserve(mxp_policy_map *m, size_t total)
{
    if (total * 2 <= m->nindex) return MXP_OK;
    size_t ns = m->nindex ? m->nindex : 16;
    while (ns < total * 2) ns *= 2;
    index_slot *idx = calloc(ns, sizeof *idx);
    if (!idx) return mxp__fail(MXP_ENOMEM, "policy map: out of memory growing the key index to %zu slots", ns);
    free(m->index);
    m->index = idx;
    m->nindex = ns;
    for (size_t i = 0; i < m->count; i++) index_put(m, i);
    return MXP_OK;
}

/* After positions changed (remove): rebuild the index, the regex list and max_states. */
static void reindex(mxp_policy_map *m)
{
    if (m->nindex) memset(m->index, 0, m->nindex * sizeof *m->index);
    m->nrx = 0;
    m->max_states = 0;
    for (size_t i = 0; i < m->count; i++) {
        index_put(m, i);
        if (m->entries[i]->re) {
            m->rx[m->nrx++] = i;
            size_t st = mxp__re_states(m->entries[i]->re);
            if (st > m->max_states) m->max_states = st;
        }
    }
}

/* Room for `extra` more entries in the entry array, the index and the regex list. */
static mxp_status reserve(mxp_policy_map *m, size_t extra)
{
    size_t total = m->count + extra;
    if (total > m->cap) {
        size_t nc = m->cap ? m->cap : 8;
        while (nc < total) nc *= 2;
        entry **ne = realloc(m->entries, nc * sizeof *ne);
        if (!ne) return mxp__fail(MXP_ENOMEM, "policy map: out of memory growing to %zu entries", nc);
        m->entries = ne;
        m->cap = nc;
    }
    if (m->nrx + extra > m->rx_cap) {
        size_t nc = m->rx_cap ? m->rx_cap : 8;
        while (nc < m->nrx + extra) nc *= 2;
        size_t *nr = realloc(m->rx, nc * sizeof *nr);
        if (!nr) return mxp__fail(MXP_ENOMEM, "policy map: out of memory growing to %zu regex keys", nc);
        m->rx = nr;
        m->rx_cap = nc;
    }
    return index_reserve(m, total);
}

/* Append e (room reserved). */
static void append(mxp_policy_map *m, entry *e)
{
    size_t pos = m->count++;
    m->entries[pos] = e;
    index_put(m, pos);
    if (e->re) {
        m->rx[m->nrx++] = pos;
        size_t st = mxp__re_states(e->re);
        if (st > m->max_states) m->max_states = st;
    }
}

/* ---- entries ------------------------------------------------------------------------------ */

/*
 * A new entry; *out untouched on failure. Keys with an ERE special character are compiled
 * (path_regex.c: POSIX EREs within the limits of policy_map.h, refused with MXP_EPARSE naming
 * the key and the problem); literal keys are only length-checked.
 */
static mxp_status entry_new(const char *key, size_t h, const mxp_policy *p, entry **out)
{
    size_t len = strlen(key);
    mxp__re *re = NULL;
    mxp_status s = mxp__re_is_literal(key) ? mxp__re_check_length(key, len) : mxp__re_compile(key, &re);
    if (s != MXP_OK) return s;
    entry *e = malloc(sizeof *e);
    char *k = e ? malloc(len + 1) : NULL;
    if (!e || !k) {
        free(e);
        mxp__re_free(re);
        return mxp__fail(MXP_ENOMEM, "policy map: out of memory adding key '%.*s'", QUOTE_MAX, key);
    }
    memcpy(k, key, len + 1);
    *e = (entry){k, h, *p, re};
    *out = e;
    return MXP_OK;
}

static mxp_status map_set(mxp_policy_map *m, const char *key, const mxp_policy *p)
{
    if (!m) return mxp__fail(MXP_EINVAL, "map is NULL");
    if (!key) return mxp__fail(MXP_EINVAL, "key is NULL");
    if (!p) return mxp__fail(MXP_EINVAL, "policy is NULL");
    if (!*key) return mxp__fail(MXP_EINVAL, "empty key");
    mxp_status s = mxp__policy_check("mxp_policy_map_set", p);
    if (s != MXP_OK) return s;
    size_t h = hash_str(key);
    if (find_exact_h(m, key, h) >= 0)
        return mxp__fail(MXP_EEXIST, "key '%.*s' is already in the policy map", QUOTE_MAX,
                         key);
    if ((s = reserve(m, 1)) != MXP_OK) return s;
    entry *e;
    if ((s = entry_new(key, h, p, &e)) != MXP_OK) return s;
    append(m, e);
    invalidate(m);
    return MXP_OK;
}

mxp_status mxp_policy_map_set(mxp_policy_map *m, const char *key, const mxp_policy *p)
{
    return mxp__in("mxp_policy_map_set", map_set(m, key, p));
}

mxp_status mxp_policy_map_remove(mxp_policy_map *m, const char *key)
{
    if (!m) return mxp__fail(MXP_EINVAL, "mxp_policy_map_remove: map is NULL");
    if (!key) return mxp__fail(MXP_EINVAL, "mxp_policy_map_remove: key is NULL");
    long i = find_exact(m, key);
    if (i < 0)
        return mxp__fail(MXP_ENOTFOUND, "mxp_policy_map_remove: no key '%.*s' in the policy map", QUOTE_MAX, key);
    entry_free(m->entries[i]);
    memmove(m->entries + i, m->entries + i + 1, (m->count - (size_t)i - 1) * sizeof *m->entries);
    m->count--;
    reindex(m);
    invalidate(m);
    return MXP_OK;
}

size_t mxp_policy_map_count(const mxp_policy_map *m) { return m ? m->count : 0; }

mxp_status mxp_policy_map_entry(const mxp_policy_map *m, size_t i, const char **key, mxp_policy *p)
{
    if (!m) return mxp__fail(MXP_EINVAL, "mxp_policy_map_entry: map is NULL");
    if (i >= m->count)
        return mxp__fail(MXP_ENOTFOUND, "mxp_policy_map_entry: entry %zu out of range (the map has %zu %s)", i,
                         m->count, m->count == 1 ? "entry" : "entries");
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
        long j = find_exact_h(b, a->entries[i]->key, a->entries[i]->hash);
        if (j < 0 || !mxp_policy_equal(&a->entries[i]->policy, &b->entries[j]->policy)) return false;
    }
    return true;
}

/* ---- lookup ------------------------------------------------------------------------------- */

/* Scratch for matching the map's regexes: on the stack when small, else on the heap. */
typedef struct scratch {
    uint64_t small[512]; /* 4 KiB: regexes of up to ~400 states */
    void *mem;
} scratch;

static bool scratch_open(const mxp_policy_map *m, scratch *s)
{
    size_t bytes = mxp__re_scratch_bytes(m->max_states);
    s->mem = bytes <= sizeof s->small ? s->small : malloc(bytes);
    if (!s->mem) return false;
    mxp__re_scratch_init(s->mem, m->max_states);
    return true;
}

static void scratch_close(scratch *s)
{
    if (s->mem != s->small) free(s->mem);
}

/* The decision for path without the cache: entry index, RES_DEFAULT or RES_AMBIGUOUS. */
static mxp_status resolve(const mxp_policy_map *m, const char *path, size_t h, long *result)
{
    long ex = find_exact_h(m, path, h);
    if (ex >= 0) {
        *result = ex;
        return MXP_OK;
    }
    long found = RES_DEFAULT;
    if (m->nrx > 0) {
        scratch sc;
        if (!scratch_open(m, &sc))
            return mxp__fail(MXP_ENOMEM, "policy map: out of memory matching '%.*s'", QUOTE_MAX, path);
        for (size_t j = 0; j < m->nrx; j++) {
            if (!mxp__re_full_match(m->entries[m->rx[j]]->re, path, sc.mem)) continue;
            if (found != RES_DEFAULT) {
                found = RES_AMBIGUOUS;
                break;
            }
            found = (long)m->rx[j];
        }
        scratch_close(&sc);
    }
    *result = found;
    return MXP_OK;
}

/* Build the MXP_EAMBIGUOUS message listing every key that matches path: each quoted up to
 * KEY_SHOWN bytes (three keys of 600 bytes used to fill the message and cut the third off), and
 * when the list still does not fit, how many keys it leaves out. */
enum { KEY_SHOWN = 64 };
static mxp_status ambiguous(const mxp_policy_map *m, const char *path)
{
    char keys[640];
    size_t n = 0, matched = 0, listed = 0;
    keys[0] = '\0';
    scratch sc;
    if (!scratch_open(m, &sc))
        return mxp__fail(MXP_ENOMEM, "policy map: out of memory matching '%.*s'", QUOTE_MAX, path);
    for (size_t j = 0; j < m->nrx; j++) {
        const entry *e = m->entries[m->rx[j]];
        if (!mxp__re_full_match(e->re, path, sc.mem)) continue;
        matched++;
        char one[KEY_SHOWN + 16];
        const bool cut = strlen(e->key) > KEY_SHOWN;
        const int w = snprintf(one, sizeof one, "%s'%.*s%s'", listed ? ", " : "", (int)KEY_SHOWN, e->key,
                               cut ? "..." : "");
        if (w > 0 && n + (size_t)w < sizeof keys - 32) { /* room left for ", and N more" */
            memcpy(keys + n, one, (size_t)w + 1);
            n += (size_t)w;
            listed++;
        }
    }
    scratch_close(&sc);
    if (listed < matched) snprintf(keys + n, sizeof keys - n, ", and %zu more", matched - listed);
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
    size_t *occ = slots ? malloc(ns / 2 * sizeof *occ) : NULL;
    if (!occ) {
        free(slots);
        return false;
    }
    for (size_t k = 0; k < m->used; k++) {
        const cache_slot *s = &m->slots[m->occupied[k]];
        size_t j = s->hash & (ns - 1);
        while (slots[j].path) j = (j + 1) & (ns - 1);
        slots[j] = *s;
        occ[k] = j;
    }
    free(m->slots);
    free(m->occupied);
    m->slots = slots;
    m->occupied = occ;
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
    m->occupied[m->used++] = i;
}

static mxp_status map_match(const mxp_policy_map *cm, const char *path, mxp_policy *out, const char **key)
{
    if (!cm) return mxp__fail(MXP_EINVAL, "map is NULL");
    if (!path) return mxp__fail(MXP_EINVAL, "path is NULL");
    if (!out) return mxp__fail(MXP_EINVAL, "out is NULL");
    /* The map is logically const; only the cache (guarded by the lock) changes. */
    mxp_policy_map *m = (mxp_policy_map *)(uintptr_t)cm;
    long result = RES_DEFAULT;
    bool hit = false;
    size_t h = hash_str(path);
    if (m->cache_cap > 0) {
        pthread_mutex_lock(&m->lock);
        hit = cache_lookup(m, path, h, &result);
        pthread_mutex_unlock(&m->lock);
    }
    if (!hit) {
        mxp_status s = resolve(m, path, h, &result);
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

mxp_status mxp_policy_map_match(const mxp_policy_map *m, const char *path, mxp_policy *out, const char **key)
{
    return mxp__in("mxp_policy_map_match", map_match(m, path, out, key));
}

mxp_status mxp_policy_map_get(const mxp_policy_map *m, const char *path, mxp_policy *out)
{
    return mxp__in("mxp_policy_map_get", map_match(m, path, out, NULL));
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

static mxp_status map_format(const mxp_policy_map *m, char *buf, size_t cap, size_t *len)
{
    if (!m) return mxp__fail(MXP_EINVAL, "map is NULL");
    if (!buf && cap > 0)
        return mxp__fail(MXP_EINVAL, "buf is NULL with cap = %zu (NULL is allowed only "
                         "with cap 0, to measure)", cap);
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

mxp_status mxp_policy_map_format(const mxp_policy_map *m, char *buf, size_t cap, size_t *len)
{
    return mxp__in("mxp_policy_map_format", map_format(m, buf, cap, len));
}

/* Parse one config line [b, e) into m. `key_buf` has room for e - b + 1 bytes. */
static mxp_status parse_line(mxp_policy_map *m, const char *b, const char *e, size_t line, char *key_buf,
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
                return mxp__fail(MXP_EPARSE, "line %zu: unterminated quoted key '%.*s'", line,
                                 (int)(e - b) < QUOTE_MAX ? (int)(e - b) : QUOTE_MAX, b);
            if (*p == '"') break;
            if (*p == '\\') {
                if (++p == e)
                    return mxp__fail(MXP_EPARSE, "line %zu: unterminated quoted key '%.*s'", line,
                                     (int)(e - b) < QUOTE_MAX ? (int)(e - b) : QUOTE_MAX, b);
                switch (*p) {
                case '"': key_buf[klen++] = '"'; break;
                case '\\': key_buf[klen++] = '\\'; break;
                case 'n': key_buf[klen++] = '\n'; break;
                case 'r': key_buf[klen++] = '\r'; break;
                default:
                    return mxp__fail(MXP_EPARSE, "line %zu: unknown escape '\\%c' in quoted key (use "
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
            return mxp__fail(MXP_EPARSE, "line %zu: expected '=' after quoted key, got '%.*s'", line,
                             (int)(e - p) < QUOTE_MAX ? (int)(e - p) : QUOTE_MAX, p);
    } else {
        while (p < e && *p != '=' && *p != '#') p++;
        if (p == e || *p == '#') {
            const char *t = p;
            while (t > b && isspace((unsigned char)t[-1])) t--;
            return mxp__fail(MXP_EPARSE, "line %zu: expected 'key = policy', got '%.*s' (no '=')", line,
                             (int)(t - b) < QUOTE_MAX ? (int)(t - b) : QUOTE_MAX, b);
        }
        const char *t = p;
        while (t > b && isspace((unsigned char)t[-1])) t--;
        klen = (size_t)(t - b);
        memcpy(key_buf, b, klen);
    }
    key_buf[klen] = '\0';
    if (klen == 0) return mxp__fail(MXP_EPARSE, "line %zu: empty key before '='", line);

    /* The policy: after '=', up to a '#' comment, trimmed. */
    const char *vb = p + 1, *ve = vb;
    while (ve < e && *ve != '#') ve++;
    while (vb < ve && isspace((unsigned char)*vb)) vb++;
    while (ve > vb && isspace((unsigned char)ve[-1])) ve--;
    if (vb == ve)
        return mxp__fail(MXP_EPARSE, "line %zu: missing policy after '=' for key '%.*s'", line, QUOTE_MAX,
                         key_buf);
    char *val = malloc((size_t)(ve - vb) + 1);
    if (!val) return mxp__fail(MXP_ENOMEM, "line %zu: out of memory", line);
    memcpy(val, vb, (size_t)(ve - vb));
    val[ve - vb] = '\0';
    mxp_policy pol;
    mxp_status s = mxp_policy_parse(val, &pol);
    free(val);
    if (s != MXP_OK) {
        char why[768];
        snprintf(why, sizeof why, "%s", mxp__error_body());
        return mxp__fail(s, "line %zu: key '%.*s': %s", line, QUOTE_MAX, key_buf, why);
    }
    if (!quoted && key_buf[0] == '@') {
        if (strcmp(key_buf, "@default") != 0)
            return mxp__fail(MXP_EPARSE, "line %zu: unknown directive '%.*s' (only @default exists; "
                                         "quote a key that starts with '@')",
                             line, QUOTE_MAX, key_buf);
        if (*seen_default) return mxp__fail(MXP_EPARSE, "line %zu: repeated @default", line);
        *seen_default = true;
        m->has_default = true;
        m->def = pol;
        return MXP_OK;
    }
    s = mxp_policy_map_set(m, key_buf, &pol);
    if (s != MXP_OK) {
        char why[768];
        snprintf(why, sizeof why, "%s", mxp__error_body());
        return mxp__fail(s, "line %zu: %s", line, why);
    }
    return MXP_OK;
}

static mxp_status map_parse(const char *text, mxp_policy_map **out)
{
    if (!text) return mxp__fail(MXP_EINVAL, "text is NULL");
    if (!out) return mxp__fail(MXP_EINVAL, "out is NULL");
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
        return mxp__fail(MXP_ENOMEM, "out of memory");
    }
    bool seen_default = false;
    size_t line = 1;
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

mxp_status mxp_policy_map_parse(const char *text, mxp_policy_map **out)
{
    return mxp__in("mxp_policy_map_parse", map_parse(text, out));
}

/* Why open() or fopen() failed, in words (strerror is not thread-safe everywhere). */
static const char *open_error(int err)
{
    switch (err) {
    case ENOENT: return "no such file or directory";
    case EACCES: return "permission denied";
    case ENOTDIR: return "a component of the path is not a directory";
    case ENXIO: return "no such device (a socket or a FIFO without reader?)";
    case EISDIR: return "is a directory";
    case ELOOP: return "too many symbolic links";
    case ENAMETOOLONG: return "name too long";
    case EROFS: return "read-only file system";
    case ENOSPC: return "no space left on device";
    case EMFILE:
    case ENFILE: return "too many open files";
    default: return "cannot open";
    }
}

/*
 * Read the whole file at path into a new NUL-terminated buffer, refusing more than
 * mxp__policy_map_file_max bytes and any NUL byte. A regular file's size is checked before
 * anything is read; FIFOs and devices are read in chunks until end of file or the cap.
 */
static mxp_status read_config(const char *path, char **text)
{
    size_t max = mxp__policy_map_file_max;
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return mxp__fail(MXP_EIO, "cannot open policy map file '%s': %s", path, open_error(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return mxp__fail(MXP_EIO, "cannot stat policy map file '%s'", path);
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return mxp__fail(MXP_EIO, "policy map file '%s' is a directory", path);
    }
    bool regular = S_ISREG(st.st_mode);
    if (regular && st.st_size > 0 && (uintmax_t)st.st_size > max) {
        close(fd);
        return mxp__fail(MXP_EFORMAT,
                         "policy map file '%s' is %ju bytes: more than MXP_POLICY_MAP_FILE_MAX (%zu bytes)", path,
                         (uintmax_t)st.st_size, max);
    }
    size_t cap = regular ? (size_t)st.st_size + 1 : 65536;
    if (cap > max + 1) cap = max + 1;
    if (cap < 4096) cap = 4096;
    char *buf = malloc(cap + 1);
    size_t len = 0;
    mxp_status s = buf ? MXP_OK : mxp__fail(MXP_ENOMEM, "out of memory reading '%s'", path);
    while (s == MXP_OK) {
        if (len == cap) { /* only FIFOs, devices and growing files get here */
            size_t nc = cap * 2 > max + 1 ? max + 1 : cap * 2;
            char *nb = realloc(buf, nc + 1);
            if (!nb) {
                s = mxp__fail(MXP_ENOMEM, "out of memory reading '%s'", path);
                break;
            }
            buf = nb;
            cap = nc;
        }
        ssize_t got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            s = mxp__fail(MXP_EIO, "error reading policy map file '%s'", path);
            break;
        }
        if (got == 0) break;
        const char *nul = memchr(buf + len, '\0', (size_t)got);
        if (nul) {
            s = mxp__fail(MXP_EFORMAT, "policy map file '%s' has a NUL byte at offset %zu: not a text config",
                          path, (size_t)(nul - buf));
            break;
        }
        len += (size_t)got;
        if (len > max)
            s = mxp__fail(MXP_EFORMAT, "policy map file '%s' is more than MXP_POLICY_MAP_FILE_MAX (%zu bytes)%s",
                          path, max, regular ? "" : " (read from a FIFO or device)");
    }
    close(fd);
    if (s != MXP_OK) {
        free(buf);
        return s;
    }
    buf[len] = '\0';
    *text = buf;
    return MXP_OK;
}

static mxp_status map_load(const char *path, mxp_policy_map **out)
{
    if (!path) return mxp__fail(MXP_EINVAL, "path is NULL");
    if (!out) return mxp__fail(MXP_EINVAL, "out is NULL");
    char *text = NULL;
    mxp_status s = read_config(path, &text);
    if (s != MXP_OK) return s;
    s = mxp_policy_map_parse(text, out);
    free(text);
    return s;
}

mxp_status mxp_policy_map_load(const char *path, mxp_policy_map **out)
{
    return mxp__in("mxp_policy_map_load", map_load(path, out));
}

static mxp_status map_save(const mxp_policy_map *m, const char *path)
{
    if (!m) return mxp__fail(MXP_EINVAL, "map is NULL");
    if (!path) return mxp__fail(MXP_EINVAL, "path is NULL");
    size_t len;
    mxp_status s = mxp_policy_map_format(m, NULL, 0, &len);
    if (s != MXP_OK) return s;
    if (len > mxp__policy_map_file_max)
        return mxp__fail(MXP_EFORMAT, "the policy map's text is %zu bytes: more than MXP_POLICY_MAP_FILE_MAX "
                                      "(%zu bytes), which mxp_policy_map_load would refuse; '%s' not written",
                         len, mxp__policy_map_file_max, path);
    char *buf = malloc(len + 1);
    if (!buf) return mxp__fail(MXP_ENOMEM, "out of memory formatting the policy map");
    (void)mxp_policy_map_format(m, buf, len + 1, &len);
    /* Into a new file beside path ("x": never an existing one, so saves from several threads or
     * processes each write their own), renamed over path once whole: a failed write (a full disk)
     * leaves the old file as it was, and removes the new one. */
    static atomic_uint seq;
    const size_t tcap = strlen(path) + 48;
    char *tmp = malloc(tcap);
    FILE *f = NULL;
    for (int tries = 0; tmp && !f && tries < 16; tries++) {
        snprintf(tmp, tcap, "%s.tmp-%ld-%u", path, (long)getpid(), atomic_fetch_add(&seq, 1u));
        f = fopen(tmp, "wbx");
        if (!f && errno != EEXIST) break;
    }
    if (!f) {
        const int err = errno;
        const bool oom = !tmp;
        free(tmp);
        free(buf);
        if (oom) return mxp__fail(MXP_ENOMEM, "out of memory naming the temporary file for '%s'", path);
        return mxp__fail(MXP_EIO, "cannot create a file beside '%s': %s", path, open_error(err));
    }
    bool ok = fwrite(buf, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    ok = ok && rename(tmp, path) == 0;
    if (!ok) remove(tmp);
    free(tmp);
    free(buf);
    return ok ? MXP_OK : mxp__fail(MXP_EIO, "error writing policy map file '%s'", path);
}

mxp_status mxp_policy_map_save(const mxp_policy_map *m, const char *path)
{
    return mxp__in("mxp_policy_map_save", map_save(m, path));
}

/* ---- apply_policy ------------------------------------------------------------------------- */

static bool in_list(const char *op, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(op, list[i]) == 0) return true;
    return false;
}

static mxp_status map_apply(mxp_policy_map *m, const mxp_layer *layers, size_t n, const mxp_policy *p,
                            const mxp_layer_select *sel, size_t *n_applied)
{
    if (!m) return mxp__fail(MXP_EINVAL, "map is NULL");
    if (!p) return mxp__fail(MXP_EINVAL, "policy is NULL");
    if (!layers && n > 0) return mxp__fail(MXP_EINVAL, "layers is NULL with n = %zu", n);
    mxp_status s = mxp__policy_check("mxp_policy_map_apply", p);
    if (s != MXP_OK) return s;
    for (size_t i = 0; i < n; i++) {
        if (!layers[i].path) return mxp__fail(MXP_EINVAL, "layers[%zu].path is NULL", i);
        if (!layers[i].path[0]) return mxp__fail(MXP_EINVAL, "layers[%zu].path is empty", i);
        if (!layers[i].op) return mxp__fail(MXP_EINVAL, "layers[%zu].op is NULL", i);
    }
    static const mxp_layer_select all = {NULL, 0, NULL, 0, NULL, NULL};
    if (!sel) sel = &all;
    for (size_t i = 0; sel->only && i < sel->n_only; i++)
        if (!sel->only[i]) return mxp__fail(MXP_EINVAL, "only[%zu] is NULL", i);
    for (size_t i = 0; sel->except && i < sel->n_except; i++)
        if (!sel->except[i]) return mxp__fail(MXP_EINVAL, "except[%zu] is NULL", i);

    /* action[i]: -1 not applied (unselected or a repeat), -2 new entry (fresh[i]), k >= 0 replace k.
     * seen: the selected paths so far (open addressing, layer index + 1), to spot repeats in
     * O(1) each. */
    size_t nseen = 16;
    while (nseen < 2 * n) nseen *= 2;
    long *action = calloc(n ? n : 1, sizeof *action);
    entry **fresh = calloc(n ? n : 1, sizeof *fresh);
    size_t *hashes = calloc(n ? n : 1, sizeof *hashes);
    size_t *seen = calloc(nseen, sizeof *seen);
    if (!action || !fresh || !hashes || !seen) {
        free(action);
        free(fresh);
        free(hashes);
        free(seen);
        return mxp__fail(MXP_ENOMEM, "out of memory");
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
        size_t h = hashes[i] = hash_str(l->path), j = h & (nseen - 1);
        bool repeat = false;
        for (; seen[j] && !repeat; j = (j + 1) & (nseen - 1), mxp__policy_map_probes++)
            repeat = hashes[seen[j] - 1] == h && strcmp(layers[seen[j] - 1].path, l->path) == 0;
        if (repeat) continue;
        seen[j] = i + 1;
        long k = find_exact_h(m, l->path, h);
        if (k >= 0) {
            action[i] = k;
        } else {
            if ((s = entry_new(l->path, h, p, &fresh[i])) != MXP_OK) break;
            action[i] = -2;
            added++;
        }
    }
    free(hashes);
    free(seen);
    if (s == MXP_OK) s = reserve(m, added);
    if (s != MXP_OK) {
        for (size_t i = 0; i < n; i++) entry_free(fresh[i]);
        free(action);
        free(fresh);
        return s;
    }
    for (size_t i = 0; i < n; i++) {
        if (action[i] >= 0) m->entries[action[i]]->policy = *p;
        else if (action[i] == -2) append(m, fresh[i]);
    }
    free(action);
    free(fresh);
    invalidate(m);
    if (n_applied) *n_applied = selected;
    return MXP_OK;
}

mxp_status mxp_policy_map_apply(mxp_policy_map *m, const mxp_layer *layers, size_t n,
                                const mxp_policy *p, const mxp_layer_select *sel, size_t *n_applied)
{
    return mxp__in("mxp_policy_map_apply", map_apply(m, layers, n, p, sel, n_applied));
}
