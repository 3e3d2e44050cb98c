/*
 * tools/safetensors.c - the safetensors reader (validating, pread-based) and the atomic
 * streaming writer declared in safetensors.h. The rules are listed there and in
 * docs/cli.md; every check names the rule it enforces in its message ("rule: gap").
 *
 * jansson parses the JSON header. Its allocations go through a counting allocator so that a
 * hostile header cannot make the reader allocate more than max(file size, 1 MiB) for the parsed
 * tree (a 100 MB header of "[0,0,0,..." would otherwise expand about 16-fold).
 */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- errors ---------------------------------------------------------------------------- */

static _Thread_local char t_err[2048];

const char *mxst_last_error(void) { return t_err; }

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static mxp_status(fail)(mxp_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_err, sizeof t_err, fmt, ap);
    va_end(ap);
    return s;
}
#ifdef __clang_analyzer__
/* The static analyzer (scripts/analyze.sh) does not step into variadic functions, so it would
 * take a failure for MXP_OK: under the analyzer only, a call is also seen to return s. */
#define fail(s, ...) (fail((s), __VA_ARGS__), (s))
#endif

/* utf8_len: the length of the valid UTF-8 sequence at p (1 to 4 bytes), or 0 when the byte at
 * p does not start one (stray continuation byte, overlong form, surrogate, beyond U+10FFFF, cut
 * short). Headers are UTF-8 checked by the reader, but paths from the command line are not. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k < n; k++)
        if (p[k] < 0x80 || p[k] > 0xBF) return 0; /* also stops at the terminating NUL */
    return n;
}

/* true when the NUL-terminated s is valid UTF-8 (what jansson's strings require) */
static bool utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t n; *p; p += n)
        if ((n = utf8_len(p)) == 0) return false;
    return true;
}

size_t mxst_char_at(const char *str, bool *control)
{
    const unsigned char *p = (const unsigned char *)str;
    const size_t len = utf8_len(p);
    /* C0, DEL, or C1 (U+0080..U+009F, UTF-8 C2 80..C2 9F), which some terminals obey too */
    *control = (len == 1 && (p[0] < 0x20 || p[0] == 0x7f)) || (len == 2 && p[0] == 0xC2 && p[1] < 0xA0);
    return len;
}

const char *mxst_show(char *buf, size_t cap, const char *str, size_t max)
{
    size_t i = 0, j = 0;
    if (max + 4 > cap) max = cap > 4 ? cap - 4 : 0;
    while (str[i]) {
        bool control;
        const size_t len = mxst_char_at(str + i, &control), step = len ? len : 1;
        if (i + step > max) break;
        if (!len || control) {
            buf[j++] = '?';
        } else {
            memcpy(buf + j, str + i, len);
            j += len;
        }
        i += step;
    }
    if (str[i]) {
        memcpy(buf + j, "...", 3);
        j += 3;
    }
    buf[j] = '\0';
    return buf;
}
#define SHOW(s) mxst_show((char[154]){0}, 154, (s), 150)

/* ---- dtypes ------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    unsigned bits;
    int mxp; /* mxp_dtype or -1 */
} DT[MXST_DTYPE_COUNT] = {
    [MXST_BOOL] = {"BOOL", 8, MXP_BOOL},
    [MXST_F4] = {"F4", 4, -1},
    [MXST_F6_E2M3] = {"F6_E2M3", 6, -1},
    [MXST_F6_E3M2] = {"F6_E3M2", 6, -1},
    [MXST_U8] = {"U8", 8, MXP_UINT8},
    [MXST_I8] = {"I8", 8, MXP_INT8},
    [MXST_F8_E5M2] = {"F8_E5M2", 8, MXP_FLOAT8_E5M2},
    [MXST_F8_E4M3] = {"F8_E4M3", 8, MXP_FLOAT8_E4M3FN},
    [MXST_F8_E8M0] = {"F8_E8M0", 8, -1},
    [MXST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8, -1},
    [MXST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8, -1},
    [MXST_I16] = {"I16", 16, MXP_INT16},
    [MXST_U16] = {"U16", 16, -1},
    [MXST_F16] = {"F16", 16, MXP_FLOAT16},
    [MXST_BF16] = {"BF16", 16, MXP_BFLOAT16},
    [MXST_I32] = {"I32", 32, MXP_INT32},
    [MXST_U32] = {"U32", 32, -1},
    [MXST_F32] = {"F32", 32, MXP_FLOAT32},
    [MXST_C64] = {"C64", 64, -1},
    [MXST_F64] = {"F64", 64, MXP_FLOAT64},
    [MXST_I64] = {"I64", 64, MXP_INT64},
    [MXST_U64] = {"U64", 64, -1},
};

const char *mxst_dtype_name(mxst_dtype d)
{
    return (unsigned)d < MXST_DTYPE_COUNT ? DT[d].name : "?";
}

bool mxst_dtype_parse(const char *name, mxst_dtype *out)
{
    if (!name) return false;
    for (int i = 0; i < MXST_DTYPE_COUNT; i++) {
        if (strcmp(name, DT[i].name) == 0) {
            if (out) *out = (mxst_dtype)i;
            return true;
        }
    }
    return false;
}

unsigned mxst_dtype_bits(mxst_dtype d) { return (unsigned)d < MXST_DTYPE_COUNT ? DT[d].bits : 0; }

bool mxst_dtype_to_mxp(mxst_dtype d, mxp_dtype *out)
{
    if ((unsigned)d >= MXST_DTYPE_COUNT || DT[d].mxp < 0) return false;
    if (out) *out = (mxp_dtype)DT[d].mxp;
    return true;
}

bool mxst_dtype_from_mxp(mxp_dtype d, mxst_dtype *out)
{
    for (int i = 0; i < MXST_DTYPE_COUNT; i++) {
        if (DT[i].mxp == (int)d) {
            if (out) *out = (mxst_dtype)i;
            return true;
        }
    }
    return false;
}

static const char *dtype_list(void)
{
    return "BOOL F4 F6_E2M3 F6_E3M2 U8 I8 F8_E5M2 F8_E4M3 F8_E8M0 F8_E4M3FNUZ F8_E5M2FNUZ I16 U16 "
           "F16 BF16 I32 U32 F32 C64 F64 I64 U64";
}

/* ---- jansson with a memory budget ---------------------------------------------------------- */

/*
 * jansson allocates through budget_malloc while a header is parsed (armed). The budget counts
 * what the allocations cost, not only what they ask for: each also pays our head and glibc's
 * chunk header (ALLOC_OVERHEAD), so 13 million empty strings in a 39 MB header are refused
 * instead of taking 156 MB (an audit, 2026-11-28).
 *
 * Running over the budget must not return NULL to jansson's lexer: jansson 2.14 ignores a
 * failed append to its string buffer (lex_save), loses the closing quote and copies past the
 * buffer's end, so a valid header with one 1.1 MB string crashed every subcommand with heap
 * corruption. Instead the parse is abandoned: budget_malloc longjmps back to parse_json, which
 * frees every allocation made since it began (each is on the thread's list) and reports the
 * budget rule. jansson keeps no state of its own across calls that this could break (its
 * hashtable seed is set once, without allocating), and nothing else runs between the setjmp
 * and the longjmp. A genuine out-of-memory inside the parse takes the same way out.
 */
typedef struct alloc_meta {
    size_t size;
    struct alloc_meta *prev, *next; /* the thread's list of allocations since arm() */
    int tracked;
} alloc_meta;
typedef union {
    alloc_meta m;
    max_align_t align;
} alloc_head;
#define ALLOC_OVERHEAD (sizeof(alloc_head) + 16)

static _Thread_local int t_armed;
static _Thread_local size_t t_used, t_budget;
static _Thread_local int t_over, t_oom;
static _Thread_local alloc_meta *t_list;
static _Thread_local int t_jump_ok; /* inside parse_json's json_loadb */
static _Thread_local jmp_buf t_jump;

static void *budget_malloc(size_t n)
{
    if (n > SIZE_MAX - ALLOC_OVERHEAD) return NULL;
    const size_t cost = n + ALLOC_OVERHEAD;
    if (t_armed) {
        if (cost > t_budget - t_used) {
            t_over = 1;
            if (t_jump_ok) longjmp(t_jump, 1);
            return NULL;
        }
        t_used += cost;
    }
    alloc_head *h = malloc(sizeof(alloc_head) + n);
    if (!h) {
        if (t_armed) {
            t_used -= cost;
            t_oom = 1;
            if (t_jump_ok) longjmp(t_jump, 1);
        }
        return NULL;
    }
    h->m.size = n;
    h->m.tracked = t_armed;
    h->m.prev = NULL;
    h->m.next = NULL;
    if (t_armed) {
        h->m.next = t_list;
        if (t_list) t_list->prev = &h->m;
        t_list = &h->m;
    }
    return h + 1;
}

static void budget_free(void *p)
{
    if (!p) return;
    alloc_head *h = (alloc_head *)p - 1;
    if (h->m.tracked) { /* allocated and freed by this thread while armed */
        if (h->m.prev) h->m.prev->next = h->m.next;
        else t_list = h->m.next;
        if (h->m.next) h->m.next->prev = h->m.prev;
        const size_t cost = h->m.size + ALLOC_OVERHEAD;
        t_used = t_used >= cost ? t_used - cost : 0;
    }
    free(h);
}

/* json_dumps without its failure mode: jansson 2.14 ignores a failure to append an object's key
 * while dumping, so out of memory at that moment gave a header with a key missing ("emb":
 * {"dtype":"BF16",":[8,12],...) and no error (tools/tests/cli_oom_test.sh found it). The text
 * is built by our own callback instead, which remembers its failure whatever jansson does with
 * it. Returns malloc memory holding the text followed by `tail` (NULL: out of memory). */
typedef struct dump_buf {
    char *p;
    size_t len, cap;
    bool failed;
} dump_buf;

static int dump_append(const char *buf, size_t size, void *data)
{
    dump_buf *d = data;
    if (d->failed) return -1;
    if (size >= SIZE_MAX / 2 - d->len) {
        d->failed = true;
        return -1;
    }
    if (d->len + size + 2 > d->cap) {
        size_t nc = d->cap ? d->cap : 1024;
        while (nc < d->len + size + 2) nc *= 2;
        char *np = realloc(d->p, nc);
        if (!np) {
            d->failed = true;
            return -1;
        }
        d->p = np;
        d->cap = nc;
    }
    memcpy(d->p + d->len, buf, size);
    d->len += size;
    return 0;
}

static char *json_text(const json_t *root, size_t flags, const char *tail)
{
    dump_buf d = {NULL, 0, 0, false};
    const int r = json_dump_callback(root, dump_append, &d, flags);
    if (r == 0 && !d.failed && tail[0]) (void)dump_append(tail, strlen(tail), &d);
    if (r != 0 || d.failed || !d.p) {
        free(d.p);
        return NULL;
    }
    d.p[d.len] = '\0'; /* dump_append keeps room for it */
    return d.p;
}

static pthread_once_t json_once = PTHREAD_ONCE_INIT;
static void json_init(void) { json_set_alloc_funcs(budget_malloc, budget_free); }

static void arm(size_t budget)
{
    pthread_once(&json_once, json_init);
    t_armed = 1;
    t_used = 0;
    t_over = 0;
    t_oom = 0;
    t_list = NULL;
    t_budget = budget;
}

/* Stop counting: what is still allocated becomes ordinary memory (any thread may free it). */
static void disarm(void)
{
    for (alloc_meta *m = t_list; m;) {
        alloc_meta *next = m->next;
        m->tracked = 0;
        m->prev = m->next = NULL;
        m = next;
    }
    t_list = NULL;
    t_armed = 0;
}

/* json_loadb under the armed budget. NULL with *over set when the budget ran out (or memory did:
 * *oom), everything the parse had allocated freed; NULL with neither set for invalid JSON. */
static json_t *parse_json(const char *text, size_t n, json_error_t *err, int *over, int *oom)
{
    *over = *oom = 0;
    t_jump_ok = 1;
    if (setjmp(t_jump) != 0) {
        t_jump_ok = 0;
        for (alloc_meta *m = t_list; m;) {
            alloc_meta *next = m->next;
            free((alloc_head *)m);
            m = next;
        }
        t_list = NULL;
        t_used = 0;
        *over = t_over;
        *oom = t_oom;
        return NULL;
    }
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, err);
    t_jump_ok = 0;
    *over = t_over;
    *oom = t_oom;
    return root;
}

/* ---- the open file --------------------------------------------------------------------------- */

typedef struct shard {
    char *path;  /* as opened */
    char *label; /* for messages: the path */
    int fd;      /* -1 for memory */
    const unsigned char *mem;
    uint64_t size, hlen;
    uint64_t dev, ino;
} shard;

struct mxst_file {
    char *path;
    bool sharded;
    shard *shards;
    size_t nshards;
    mxst_tensor *t;
    size_t n;
    char **meta; /* 2 * nmeta strings */
    size_t nmeta;
    size_t *hash; /* open addressing: index + 1, 0 = empty */
    size_t hcap;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static mxp_status build_hash(mxst_file *f)
{
    size_t cap = 16;
    while (cap < 2 * f->n + 2) cap *= 2;
    f->hash = calloc(cap, sizeof *f->hash);
    if (!f->hash) return fail(MXP_ENOMEM, "out of memory");
    f->hcap = cap;
    for (size_t i = 0; i < f->n; i++) {
        size_t j = (size_t)hash_str(f->t[i].name) & (cap - 1);
        while (f->hash[j]) j = (j + 1) & (cap - 1);
        f->hash[j] = i + 1;
    }
    return MXP_OK;
}

const mxst_tensor *mxst_find(const mxst_file *f, const char *name)
{
    if (!f || !name || !f->hash) return NULL;
    size_t j = (size_t)hash_str(name) & (f->hcap - 1);
    while (f->hash[j]) {
        const mxst_tensor *t = &f->t[f->hash[j] - 1];
        if (strcmp(t->name, name) == 0) return t;
        j = (j + 1) & (f->hcap - 1);
    }
    return NULL;
}

static void free_tensors(mxst_tensor *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((void *)t[i].name);
        free((void *)t[i].shape);
    }
    free(t);
}

static void free_meta(char **m, size_t n)
{
    for (size_t i = 0; i < 2 * n; i++) free(m[i]);
    free(m);
}

void mxst_close(mxst_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->nshards; i++) {
        if (f->shards[i].fd >= 0) close(f->shards[i].fd);
        free(f->shards[i].path);
    }
    free(f->shards);
    free_tensors(f->t, f->n);
    free_meta(f->meta, f->nmeta);
    free(f->hash);
    free(f->path);
    free(f);
}

static mxp_status read_at(const shard *s, uint64_t off, void *buf, size_t len)
{
    if (s->mem) {
        if (off > s->size || len > s->size - off)
            return fail(MXP_EIO, "%s: read past the end of the data", SHOW(s->path));
        if (len) memcpy(buf, s->mem + off, len); /* buf may be NULL when len is 0 */
        return MXP_OK;
    }
    unsigned char *p = buf;
    while (len > 0) {
        size_t chunk = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
        if (off > (uint64_t)INT64_MAX) return fail(MXP_EIO, "%s: offset too large", SHOW(s->path));
        ssize_t r = pread(s->fd, p, chunk, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return fail(MXP_EIO, "%s: read failed at byte %llu: %s", SHOW(s->path),
                        (unsigned long long)off, strerror(errno));
        }
        if (r == 0)
            return fail(MXP_EIO, "%s: unexpected end of file at byte %llu (did it shrink?)",
                        SHOW(s->path), (unsigned long long)off);
        p += r;
        off += (uint64_t)r;
        len -= (size_t)r;
    }
    return MXP_OK;
}

/* A JSON integer >= 0 into *out; false for reals, negatives, other types. */
static bool json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v)) return false;
    json_int_t i = json_integer_value(v);
    if (i < 0) return false;
    *out = (uint64_t)i;
    return true;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return json_integer_value(v) < 0 ? "a negative integer" : "an integer";
    case JSON_REAL:
        return "a non-integer number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

typedef struct order_item {
    uint64_t begin, end;
    size_t idx;
} order_item;

static int cmp_order(const void *a, const void *b)
{
    const order_item *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

/* Parse one tensor entry into *t (name already set). */
static mxp_status parse_entry(const char *file, const char *name, json_t *v, mxst_tensor *t)
{
    if (!json_is_object(v))
        return fail(MXP_EFORMAT,
                    "%s: tensor '%s': entry is %s, expected an object with dtype, "
                    "shape, data_offsets (rule: entry)",
                    file, SHOW(name), json_kind(v));
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val)
    {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return fail(MXP_EFORMAT,
                        "%s: tensor '%s': unexpected key '%s' (an entry has exactly "
                        "dtype, shape, data_offsets) (rule: entry)",
                        file, SHOW(name), SHOW(key));
    }
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!dt || !sh || !off)
        return fail(MXP_EFORMAT, "%s: tensor '%s': missing '%s' (rule: entry)", file, SHOW(name),
                    !dt   ? "dtype"
                    : !sh ? "shape"
                          : "data_offsets");
    if (!json_is_string(dt))
        return fail(MXP_EFORMAT, "%s: tensor '%s': dtype is %s, expected a string (rule: dtype)",
                    file, SHOW(name), json_kind(dt));
    if (!mxst_dtype_parse(json_string_value(dt), &t->dtype))
        return fail(MXP_EFORMAT,
                    "%s: tensor '%s': unknown dtype '%s' (expected one of: %s) "
                    "(rule: dtype)",
                    file, SHOW(name), SHOW(json_string_value(dt)), dtype_list());
    if (!json_is_array(sh))
        return fail(MXP_EFORMAT,
                    "%s: tensor '%s': shape is %s, expected an array of "
                    "non-negative integers (rule: shape)",
                    file, SHOW(name), json_kind(sh));
    size_t nd = json_array_size(sh);
    uint64_t *shape = NULL;
    if (nd > 0) {
        shape = malloc(nd * sizeof *shape);
        if (!shape) return fail(MXP_ENOMEM, "out of memory");
    }
    uint64_t numel = 1;
    bool overflow = false;
    for (size_t d = 0; d < nd; d++) {
        json_t *e = json_array_get(sh, d);
        if (!json_u64(e, &shape[d])) {
            free(shape);
            return fail(MXP_EFORMAT,
                        "%s: tensor '%s': shape[%zu] is %s, expected a "
                        "non-negative integer (rule: shape)",
                        file, SHOW(name), d, json_kind(e));
        }
        if (!overflow && shape[d] != 0 && numel > UINT64_MAX / shape[d])
            overflow = true;
        else
            numel *= shape[d];
    }
    t->ndim = nd;
    t->shape = shape;
    /* A zero dimension makes the product 0 even if other dimensions overflowed: still refuse
     * (the reference's checked fold fails there too). */
    if (overflow)
        return fail(MXP_EFORMAT,
                    "%s: tensor '%s': the product of the shape overflows 64 bits "
                    "(rule: overflow)",
                    file, SHOW(name));
    t->numel = numel;
    if (!json_is_array(off) || json_array_size(off) != 2)
        return fail(MXP_EFORMAT,
                    "%s: tensor '%s': data_offsets is %s, expected [begin, end] "
                    "(rule: offsets)",
                    file, SHOW(name),
                    json_is_array(off) ? "an array of the wrong length" : json_kind(off));
    for (int k = 0; k < 2; k++) {
        json_t *e = json_array_get(off, (size_t)k);
        if (!json_u64(e, k ? &t->end : &t->begin))
            return fail(MXP_EFORMAT,
                        "%s: tensor '%s': data_offsets[%d] is %s, expected a "
                        "non-negative integer (rule: offsets)",
                        file, SHOW(name), k, json_kind(e));
    }
    unsigned bits = mxst_dtype_bits(t->dtype);
    if (bits == 0) /* t->dtype came from mxst_dtype_parse: every dtype it accepts has a size */
        return fail(MXP_EFORMAT, "%s: tensor '%s': dtype %s has no size (rule: dtype)", file, SHOW(name),
                    mxst_dtype_name(t->dtype));
    if (numel > UINT64_MAX / bits)
        return fail(MXP_EFORMAT,
                    "%s: tensor '%s': %s with %llu elements overflows 64 bits "
                    "(rule: overflow)",
                    file, SHOW(name), mxst_dtype_name(t->dtype), (unsigned long long)numel);
    uint64_t nbits = numel * bits;
    if (nbits % 8)
        return fail(MXP_EFORMAT,
                    "%s: tensor '%s': %llu element%s of %s %s not a whole number of "
                    "bytes (rule: whole-bytes)",
                    file, SHOW(name), (unsigned long long)numel, MXST_PLURAL(numel),
                    mxst_dtype_name(t->dtype), numel == 1 ? "is" : "are");
    t->nbytes = nbits / 8;
    return MXP_OK;
}

static void shape_text(char *buf, size_t cap, const mxst_tensor *t)
{
    size_t j = 0;
    j += (size_t)snprintf(buf + j, cap - j, "[");
    for (size_t d = 0; d < t->ndim && j < cap; d++)
        j += (size_t)snprintf(buf + j, cap - j, "%s%llu", d ? ", " : "",
                              (unsigned long long)t->shape[d]);
    if (j < cap) snprintf(buf + j, cap - j, "]");
}

/* Parse and validate the header of one shard; tensors get shard index `si`. */
static mxp_status parse_shard(shard *s, size_t si, bool strict, mxst_tensor **tout, size_t *nout,
                              char ***mout, size_t *nmout)
{
    const char *file = SHOW(s->path);
    char filebuf[160];
    snprintf(filebuf, sizeof filebuf, "%s", file);
    file = filebuf;
    if (s->size < 8)
        return fail(MXP_EFORMAT,
                    "%s: file is %llu byte%s, too short for the 8-byte header length "
                    "(rule: header-length)",
                    file, (unsigned long long)s->size, MXST_PLURAL(s->size));
    unsigned char lenb[8];
    mxp_status st = read_at(s, 0, lenb, 8);
    if (st) return st;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | lenb[i];
    if (n > MXST_MAX_HEADER)
        return fail(MXP_EFORMAT,
                    "%s: header length %llu is over the limit of %u bytes "
                    "(rule: header-limit)",
                    file, (unsigned long long)n, MXST_MAX_HEADER);
    if (n > s->size - 8)
        return fail(MXP_EFORMAT,
                    "%s: header length %llu runs past the end of the file (%llu "
                    "byte%s after the length) (rule: header-length)",
                    file, (unsigned long long)n, (unsigned long long)(s->size - 8),
                    MXST_PLURAL(s->size - 8));
    s->hlen = n;
    char *text = malloc((size_t)n + 1);
    if (!text)
        return fail(MXP_ENOMEM, "%s: out of memory for a %llu-byte header", file,
                    (unsigned long long)n);
    st = read_at(s, 8, text, (size_t)n);
    if (st) {
        free(text);
        return st;
    }
    text[n] = '\0';
    json_error_t jerr;
    memset(&jerr, 0, sizeof jerr); /* filled by jansson on a failure; never read uninitialised */
    /* the file's size (at least 1 MiB), less the copy of the header text just made */
    const size_t budget = s->size > (1u << 20) ? (size_t)s->size : (1u << 20);
    const size_t text_cost = (size_t)n + 1 + ALLOC_OVERHEAD;
    arm(budget > text_cost ? budget - text_cost : 0);
    int over, oom;
    json_t *root = parse_json(text, (size_t)n, &jerr, &over, &oom);
    free(text);
    mxst_tensor *t = NULL;
    char **meta = NULL;
    size_t nt = 0, nm = 0;
    if (!root) {
        disarm();
        if (oom) return fail(MXP_ENOMEM, "%s: out of memory parsing a %llu-byte header", file, (unsigned long long)n);
        if (over)
            return fail(MXP_EFORMAT,
                        "%s: the JSON header needs more than %zu bytes of memory to "
                        "parse (rule: header-memory)",
                        file, budget);
        const char *rule =
            json_error_code(&jerr) == json_error_duplicate_key ? "duplicate-key" : "json";
        return fail(MXP_EFORMAT, "%s: header is not valid JSON: %s at byte %d (rule: %s)", file,
                    jerr.text, jerr.position, rule);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        disarm();
        return fail(MXP_EFORMAT,
                    "%s: header is a JSON array, expected an object "
                    "(rule: json-object)",
                    file);
    }
    size_t nkeys = json_object_size(root);
    t = calloc(nkeys ? nkeys : 1, sizeof *t);
    if (!t) {
        st = fail(MXP_ENOMEM, "out of memory");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(v)) {
                st = fail(MXP_EFORMAT,
                          "%s: __metadata__ is %s, expected an object of strings "
                          "(rule: metadata)",
                          file, json_kind(v));
                goto out;
            }
            size_t mcount = json_object_size(v);
            meta = calloc(2 * mcount + 2, sizeof *meta);
            if (!meta) {
                st = fail(MXP_ENOMEM, "out of memory");
                goto out;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv)
            {
                if (!json_is_string(mv)) {
                    st = fail(MXP_EFORMAT,
                              "%s: __metadata__ '%s' is %s, expected a string "
                              "(rule: metadata)",
                              file, SHOW(mk), json_kind(mv));
                    goto out;
                }
                meta[2 * nm] = strdup(mk);
                meta[2 * nm + 1] = strdup(json_string_value(mv));
                nm++;
                if (!meta[2 * nm - 2] || !meta[2 * nm - 1]) {
                    st = fail(MXP_ENOMEM, "out of memory");
                    goto out;
                }
            }
            continue;
        }
        mxst_tensor *cur = &t[nt];
        cur->name = strdup(key);
        cur->shard = si;
        nt++;
        if (!cur->name) {
            st = fail(MXP_ENOMEM, "out of memory");
            goto out;
        }
        st = parse_entry(file, key, v, cur);
        if (st) goto out;
    }

    /* Coverage: sorted by offsets, each tensor starts where the previous one ended. */
    {
        uint64_t datalen = s->size - 8 - n;
        order_item *ord = malloc((nt ? nt : 1) * sizeof *ord);
        if (!ord) {
            st = fail(MXP_ENOMEM, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < nt; i++) ord[i] = (order_item){t[i].begin, t[i].end, i};
        qsort(ord, nt, sizeof *ord, cmp_order);
        uint64_t expect = 0;
        const char *prev = NULL;
        for (size_t k = 0; k < nt && st == MXP_OK; k++) {
            const mxst_tensor *c = &t[ord[k].idx];
            char shp[96];
            if (c->end < c->begin) {
                st = fail(MXP_EFORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu) end before "
                          "they begin (rule: offsets)",
                          file, SHOW(c->name), (unsigned long long)c->begin,
                          (unsigned long long)c->end);
            } else if (c->begin < expect) {
                st = fail(MXP_EFORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu) overlap tensor "
                          "'%s', which ends at %llu (rule: overlap)",
                          file, SHOW(c->name), (unsigned long long)c->begin,
                          (unsigned long long)c->end, prev ? SHOW(prev) : "?",
                          (unsigned long long)expect);
            } else if (c->begin > expect) {
                if (prev)
                    st = fail(MXP_EFORMAT,
                              "%s: tensor '%s': data_offsets begin at %llu, leaving "
                              "a gap of %llu byte%s after tensor '%s' (rule: gap)",
                              file, SHOW(c->name), (unsigned long long)c->begin,
                              (unsigned long long)(c->begin - expect),
                              MXST_PLURAL(c->begin - expect), SHOW(prev));
                else
                    st = fail(MXP_EFORMAT,
                              "%s: tensor '%s': data_offsets begin at %llu, but the "
                              "first tensor must begin at 0 (rule: gap)",
                              file, SHOW(c->name), (unsigned long long)c->begin);
            } else if (c->end - c->begin != c->nbytes) {
                shape_text(shp, sizeof shp, c);
                st = fail(MXP_EFORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu) hold %llu "
                          "byte%s but %s %s needs %llu (rule: size)",
                          file, SHOW(c->name), (unsigned long long)c->begin,
                          (unsigned long long)c->end, (unsigned long long)(c->end - c->begin),
                          MXST_PLURAL(c->end - c->begin), mxst_dtype_name(c->dtype), shp,
                          (unsigned long long)c->nbytes);
            } else if (c->end > datalen) {
                st = fail(MXP_EFORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu) run past the "
                          "end of the data buffer (%llu byte%s): truncated file or offsets out of "
                          "range (rule: truncated)",
                          file, SHOW(c->name), (unsigned long long)c->begin,
                          (unsigned long long)c->end, (unsigned long long)datalen,
                          MXST_PLURAL(datalen));
            } else if (strict && mxst_dtype_bits(c->dtype) >= 8 &&
                       c->begin % (mxst_dtype_bits(c->dtype) / 8) != 0) {
                st = fail(MXP_EFORMAT,
                          "%s: tensor '%s': data begins at %llu, not a multiple of "
                          "its %u-byte element (rule: strict-alignment)",
                          file, SHOW(c->name), (unsigned long long)c->begin,
                          mxst_dtype_bits(c->dtype) / 8);
            }
            expect = c->end;
            prev = c->name;
        }
        if (st == MXP_OK && expect != datalen)
            st = fail(MXP_EFORMAT,
                      "%s: %llu trailing byte%s: the tensors end at byte %llu of the "
                      "data buffer, which holds %llu byte%s (rule: trailing)",
                      file, (unsigned long long)(datalen - expect), MXST_PLURAL(datalen - expect),
                      (unsigned long long)expect, (unsigned long long)datalen,
                      MXST_PLURAL(datalen));
        if (st == MXP_OK && strict && (8 + n) % 8 != 0)
            st = fail(MXP_EFORMAT,
                      "%s: the data buffer starts at byte %llu, not a multiple of 8 "
                      "(header not padded) (rule: strict-alignment)",
                      file, (unsigned long long)(8 + n));
        if (st == MXP_OK) {
            /* keep the tensors in offset order */
            mxst_tensor *sorted = malloc((nt ? nt : 1) * sizeof *sorted);
            if (!sorted) {
                st = fail(MXP_ENOMEM, "out of memory");
            } else {
                for (size_t k = 0; k < nt; k++) sorted[k] = t[ord[k].idx];
                free(t);
                t = sorted;
            }
        }
        free(ord);
    }
out:
    json_decref(root);
    disarm();
    if (st) {
        free_tensors(t, nt);
        if (meta) free_meta(meta, nm);
        return st;
    }
    *tout = t;
    *nout = nt;
    *mout = meta;
    *nmout = nm;
    return MXP_OK;
}

static mxp_status open_shard_fd(shard *s, const char *path)
{
    s->fd = -1;
    s->path = strdup(path);
    if (!s->path) return fail(MXP_ENOMEM, "out of memory");
    /* O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer (forever); the check
     * below refuses it, and a regular file's reads never block, so the flag then goes */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return fail(MXP_EIO, "%s: cannot open: %s", SHOW(path), strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return fail(MXP_EIO, "%s: cannot stat: %s", SHOW(path), strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(MXP_EIO, "%s: not a regular file", SHOW(path));
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl != -1) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    s->fd = fd;
    s->size = (uint64_t)sb.st_size;
    s->dev = (uint64_t)sb.st_dev;
    s->ino = (uint64_t)sb.st_ino;
    return MXP_OK;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static mxp_status finish_single(mxst_file *f, bool strict)
{
    mxp_status st = parse_shard(&f->shards[0], 0, strict, &f->t, &f->n, &f->meta, &f->nmeta);
    if (st) return st;
    return build_hash(f);
}

static mxp_status open_index(mxst_file *f, const char *path, bool strict);

mxp_status mxst_open(const char *path, bool strict, mxst_file **out)
{
    if (!path || !out) return fail(MXP_EINVAL, "mxst_open: %s is NULL", !path ? "path" : "out");
    mxst_file *f = calloc(1, sizeof *f);
    if (!f) return fail(MXP_ENOMEM, "out of memory");
    f->path = strdup(path);
    if (!f->path) {
        free(f);
        return fail(MXP_ENOMEM, "out of memory");
    }
    mxp_status st;
    if (ends_with(path, ".json")) {
        st = open_index(f, path, strict);
    } else {
        f->shards = calloc(1, sizeof *f->shards);
        if (!f->shards) {
            mxst_close(f);
            return fail(MXP_ENOMEM, "out of memory");
        }
        f->nshards = 1;
        st = open_shard_fd(&f->shards[0], path);
        if (st == MXP_OK) st = finish_single(f, strict);
    }
    if (st) {
        mxst_close(f);
        return st;
    }
    *out = f;
    return MXP_OK;
}

mxp_status mxst_open_mem(const void *data, size_t size, const char *name, bool strict,
                         mxst_file **out)
{
    if ((!data && size) || !name || !out)
        return fail(MXP_EINVAL, "mxst_open_mem: %s is NULL", !name ? "name" : !out ? "out" : "data (with size > 0)");
    mxst_file *f = calloc(1, sizeof *f);
    if (!f) return fail(MXP_ENOMEM, "out of memory");
    f->path = strdup(name);
    f->shards = calloc(1, sizeof *f->shards);
    if (!f->path || !f->shards) {
        mxst_close(f);
        return fail(MXP_ENOMEM, "out of memory");
    }
    f->nshards = 1;
    shard *s = &f->shards[0];
    s->fd = -1;
    s->path = strdup(name);
    s->mem = data ? data : (const unsigned char *)"";
    s->size = size;
    mxp_status st = s->path ? finish_single(f, strict) : fail(MXP_ENOMEM, "out of memory");
    if (st) {
        mxst_close(f);
        return st;
    }
    *out = f;
    return MXP_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static mxp_status open_index(mxst_file *f, const char *path, bool strict)
{
    const char *file = SHOW(path);
    char filebuf[160];
    snprintf(filebuf, sizeof filebuf, "%s", file);
    file = filebuf;
    f->sharded = true;
    shard idx;
    memset(&idx, 0, sizeof idx);
    mxp_status st = open_shard_fd(&idx, path);
    if (st) {
        if (idx.fd >= 0) close(idx.fd);
        free(idx.path);
        return st;
    }
    if (idx.size > MXST_MAX_HEADER) {
        close(idx.fd);
        free(idx.path);
        return fail(MXP_EFORMAT,
                    "%s: index of %llu bytes is over the limit of %u (rule: "
                    "index-limit)",
                    file, (unsigned long long)idx.size, MXST_MAX_HEADER);
    }
    char *text = malloc((size_t)idx.size + 1);
    if (!text) {
        close(idx.fd);
        free(idx.path);
        return fail(MXP_ENOMEM, "out of memory");
    }
    st = read_at(&idx, 0, text, (size_t)idx.size);
    close(idx.fd);
    free(idx.path);
    if (st) {
        free(text);
        return st;
    }
    size_t budget = idx.size * 16 > (1u << 20) ? (size_t)idx.size * 16 : (1u << 20);
    json_error_t jerr;
    memset(&jerr, 0, sizeof jerr); /* filled by jansson on a failure; never read uninitialised */
    arm(budget);
    int over, oom;
    json_t *root = parse_json(text, (size_t)idx.size, &jerr, &over, &oom);
    free(text);
    char **names = NULL; /* distinct shard names, sorted */
    size_t nnames = 0;
    if (!root) {
        disarm();
        if (oom) return fail(MXP_ENOMEM, "%s: out of memory parsing the index", file);
        if (over)
            return fail(MXP_EFORMAT,
                        "%s: the index's JSON needs more than %zu bytes of memory to parse (rule: "
                        "index-limit)",
                        file, budget);
        return fail(MXP_EFORMAT, "%s: index is not valid JSON: %s at byte %d (rule: %s)", file,
                    jerr.text, jerr.position,
                    json_error_code(&jerr) == json_error_duplicate_key ? "duplicate-key" : "json");
    }
    json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    json_t *md = json_is_object(root) ? json_object_get(root, "metadata") : NULL;
    uint64_t total = 0;
    bool have_total = false;
    if (!json_is_object(root)) {
        st = fail(MXP_EFORMAT, "%s: index is not a JSON object (rule: index)", file);
        goto out;
    }
    if (!wm || !json_is_object(wm)) {
        st = fail(MXP_EFORMAT, "%s: index has no \"weight_map\" object (rule: index)", file);
        goto out;
    }
    if (md) {
        if (!json_is_object(md)) {
            st = fail(MXP_EFORMAT,
                      "%s: index \"metadata\" is %s, expected an object (rule: "
                      "index)",
                      file, json_kind(md));
            goto out;
        }
        json_t *ts = json_object_get(md, "total_size");
        if (ts) {
            if (json_is_real(ts) && json_real_value(ts) >= 0 &&
                json_real_value(ts) == (double)(uint64_t)json_real_value(ts) &&
                json_real_value(ts) < 1.8e19) {
                total = (uint64_t)json_real_value(ts); /* some writers emit 1234.0 */
            } else if (!json_u64(ts, &total)) {
                st = fail(MXP_EFORMAT,
                          "%s: metadata.total_size is %s, expected a non-negative "
                          "integer (rule: index)",
                          file, json_kind(ts));
                goto out;
            }
            have_total = true;
        }
    }
    size_t nmap = json_object_size(wm);
    names = calloc(nmap ? nmap : 1, sizeof *names);
    if (!names) {
        st = fail(MXP_ENOMEM, "out of memory");
        goto out;
    }
    {
        const char *k;
        json_t *v;
        json_object_foreach(wm, k, v)
        {
            if (!json_is_string(v)) {
                st = fail(MXP_EFORMAT,
                          "%s: weight_map['%s'] is %s, expected a shard file name "
                          "(rule: index)",
                          file, SHOW(k), json_kind(v));
                goto out;
            }
            const char *sn = json_string_value(v);
            if (!*sn || strchr(sn, '/') || !strcmp(sn, ".") || !strcmp(sn, "..")) {
                st = fail(MXP_EFORMAT,
                          "%s: weight_map['%s'] = '%s' is not a plain file name in "
                          "the index's directory (rule: index-shard-name)",
                          file, SHOW(k), SHOW(sn));
                goto out;
            }
            names[nnames++] = (char *)sn; /* borrowed from root for now */
        }
    }
    qsort(names, nnames, sizeof *names, cmp_str);
    {
        size_t u = 0;
        for (size_t i = 0; i < nnames; i++)
            if (u == 0 || strcmp(names[u - 1], names[i]) != 0) names[u++] = names[i];
        nnames = u;
    }
    disarm();
    /* the directory of the index */
    size_t dirlen = 0;
    const char *slash = strrchr(path, '/');
    if (slash) dirlen = (size_t)(slash - path) + 1;
    f->shards = calloc(nnames ? nnames : 1, sizeof *f->shards);
    if (!f->shards) {
        st = fail(MXP_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nnames; i++) f->shards[i].fd = -1;
    f->nshards = nnames;
    {
        mxst_tensor **per = calloc(nnames ? nnames : 1, sizeof *per);
        size_t *pern = calloc(nnames ? nnames : 1, sizeof *pern);
        if (!per || !pern) {
            free(per);
            free(pern);
            st = fail(MXP_ENOMEM, "out of memory");
            goto out;
        }
        size_t sum = 0;
        for (size_t i = 0; i < nnames && st == MXP_OK; i++) {
            size_t plen = dirlen + strlen(names[i]) + 1;
            char *sp = malloc(plen);
            if (!sp) {
                st = fail(MXP_ENOMEM, "out of memory");
                break;
            }
            memcpy(sp, path, dirlen);
            strcpy(sp + dirlen, names[i]);
            st = open_shard_fd(&f->shards[i], sp);
            free(sp);
            if (st) break;
            char **meta = NULL;
            size_t nm = 0;
            st = parse_shard(&f->shards[i], i, strict, &per[i], &pern[i], &meta, &nm);
            if (st) break;
            if (i == 0) {
                f->meta = meta;
                f->nmeta = nm;
            } else {
                free_meta(meta, nm);
            }
            sum += pern[i];
        }
        if (st == MXP_OK) {
            f->t = calloc(sum ? sum : 1, sizeof *f->t);
            if (!f->t) st = fail(MXP_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < nnames; i++) {
            if (st == MXP_OK) {
                memcpy(f->t + f->n, per[i], pern[i] * sizeof *f->t);
                f->n += pern[i];
                free(per[i]);
            } else {
                free_tensors(per[i], pern[i]);
            }
        }
        free(per);
        free(pern);
    }
    if (st) goto out;
    st = build_hash(f);
    if (st) goto out;
    /* cross-file rules */
    {
        uint64_t bytes = 0;
        for (size_t i = 0; i < f->n; i++) {
            /* the same name in an earlier shard? (the hash finds the first) */
            const mxst_tensor *t = &f->t[i], *first = mxst_find(f, t->name);
            if (first != t) {
                st = fail(MXP_EFORMAT,
                          "%s: tensor '%s' is in two shards, %s and %s (rule: "
                          "index-duplicate)",
                          file, SHOW(t->name), SHOW(names[first->shard]), SHOW(names[t->shard]));
                goto out;
            }
        }
        for (size_t i = 0; i < f->n; i++) {
            const mxst_tensor *t = &f->t[i];
            const char *shard_name = names[t->shard];
            json_t *m = json_object_get(wm, t->name);
            if (!m) {
                st = fail(MXP_EFORMAT,
                          "%s: tensor '%s' of shard %s is not in weight_map (rule: "
                          "index-unmapped)",
                          file, SHOW(t->name), SHOW(shard_name));
                goto out;
            }
            if (strcmp(json_string_value(m), shard_name) != 0) {
                st = fail(MXP_EFORMAT,
                          "%s: tensor '%s' is in shard %s but weight_map says %s "
                          "(rule: index-shard)",
                          file, SHOW(t->name), SHOW(shard_name), SHOW(json_string_value(m)));
                goto out;
            }
            bytes += t->nbytes;
        }
        const char *k;
        json_t *v;
        json_object_foreach(wm, k, v)
        {
            if (!mxst_find(f, k)) {
                st = fail(MXP_EFORMAT,
                          "%s: weight_map maps tensor '%s' to %s, which does not "
                          "hold it (rule: index-missing)",
                          file, SHOW(k), SHOW(json_string_value(v)));
                goto out;
            }
        }
        if (strict && have_total && total != bytes) {
            st = fail(MXP_EFORMAT,
                      "%s: metadata.total_size is %llu but the tensors hold %llu "
                      "byte%s (rule: strict-total-size)",
                      file, (unsigned long long)total, (unsigned long long)bytes,
                      MXST_PLURAL(bytes));
            goto out;
        }
    }
out:
    disarm();
    free(names);
    json_decref(root);
    return st;
}

size_t mxst_count(const mxst_file *f) { return f ? f->n : 0; }
const mxst_tensor *mxst_tensor_at(const mxst_file *f, size_t i)
{
    return f && i < f->n ? &f->t[i] : NULL;
}
size_t mxst_metadata_count(const mxst_file *f) { return f ? f->nmeta : 0; }
bool mxst_metadata_at(const mxst_file *f, size_t i, const char **key, const char **value)
{
    if (!f || i >= f->nmeta) return false;
    if (key) *key = f->meta[2 * i];
    if (value) *value = f->meta[2 * i + 1];
    return true;
}
const char *mxst_metadata_get(const mxst_file *f, const char *key)
{
    if (!f || !key) return NULL;
    for (size_t i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}
size_t mxst_shard_count(const mxst_file *f) { return f ? f->nshards : 0; }
const char *mxst_shard_path(const mxst_file *f, size_t i)
{
    return f && i < f->nshards ? f->shards[i].path : NULL;
}
uint64_t mxst_shard_header_len(const mxst_file *f, size_t i)
{
    return f && i < f->nshards ? f->shards[i].hlen : 0;
}
uint64_t mxst_shard_size(const mxst_file *f, size_t i)
{
    return f && i < f->nshards ? f->shards[i].size : 0;
}
bool mxst_is_sharded(const mxst_file *f) { return f && f->sharded; }
const char *mxst_path(const mxst_file *f) { return f ? f->path : NULL; }
bool mxst_shard_identity(const mxst_file *f, size_t i, uint64_t *dev, uint64_t *ino)
{
    if (!f || i >= f->nshards || f->shards[i].fd < 0) return false;
    *dev = f->shards[i].dev;
    *ino = f->shards[i].ino;
    return true;
}

mxp_status mxst_read(const mxst_file *f, const mxst_tensor *t, uint64_t offset, void *buf,
                     size_t len)
{
    if (!f || !t || (!buf && len))
        return fail(MXP_EINVAL, "mxst_read: %s is NULL", !f ? "f" : !t ? "t" : "buf (with len > 0)");
    if (t->shard >= f->nshards || offset > t->nbytes || len > t->nbytes - offset)
        return fail(MXP_EINVAL,
                    "mxst_read: tensor '%s': bytes [%llu, +%zu) outside its %llu "
                    "byte%s",
                    SHOW(t->name), (unsigned long long)offset, len, (unsigned long long)t->nbytes,
                    MXST_PLURAL(t->nbytes));
    const shard *s = &f->shards[t->shard];
    return read_at(s, 8 + s->hlen + t->begin + offset, buf, len);
}

/* ---- temporary files and signals ------------------------------------------------------------ */

#define MAX_TEMPS 1024
static char *volatile g_temps[MAX_TEMPS];
static pthread_mutex_t g_temps_lock = PTHREAD_MUTEX_INITIALIZER;

static int temp_register(char *path)
{
    pthread_mutex_lock(&g_temps_lock);
    for (int i = 0; i < MAX_TEMPS; i++) {
        if (!g_temps[i]) {
            g_temps[i] = path;
            pthread_mutex_unlock(&g_temps_lock);
            return i;
        }
    }
    pthread_mutex_unlock(&g_temps_lock);
    return -1;
}

static void temp_unregister(int slot)
{
    if (slot < 0) return;
    /* Block signals while the slot empties so a handler never sees a half-freed path. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_mutex_lock(&g_temps_lock);
    g_temps[slot] = NULL;
    pthread_mutex_unlock(&g_temps_lock);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void mxst_cleanup_temps(void)
{
    for (int i = 0; i < MAX_TEMPS; i++) {
        char *p = g_temps[i];
        if (p) unlink(p);
    }
}

/* Create "<dir>/.<base>.tmp-XXXXXX" for path; *tmp gets the malloc'd name. */
static mxp_status make_temp(const char *path, char **tmp, int *fd)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dirlen;
    size_t blen = strlen(base);
    if (blen == 0) return fail(MXP_EINVAL, "%s: output path names a directory", SHOW(path));
    if (blen > 200) blen = 200;
    char *t = malloc(dirlen + blen + 16);
    if (!t) return fail(MXP_ENOMEM, "out of memory");
    memcpy(t, path, dirlen);
    t[dirlen] = '.';
    memcpy(t + dirlen + 1, base, blen);
    strcpy(t + dirlen + 1 + blen, ".tmp-XXXXXX");
    int d = mkstemp(t);
    if (d < 0) {
        mxp_status s = fail(MXP_EIO, "%s: cannot create a temporary file in its directory: %s",
                            SHOW(path), strerror(errno));
        free(t);
        return s;
    }
    /* mkstemp makes 0600; give the file the mode an ordinary create would (0666 & ~umask). */
    mode_t mask = umask(022);
    umask(mask);
    (void)fchmod(d, (mode_t)(0666 & ~mask));
    *tmp = t;
    *fd = d;
    return MXP_OK;
}

/* The directory's name is copied to the stack, not malloc'd: this runs after the rename, where
 * a failed allocation could only skip the fsync and still report success (commit and
 * write_small_file did, found by tools/tests/test_safetensors_oom.c). A name that does not fit
 * in PATH_MAX could not have been renamed into (ENAMETOOLONG), so the limit loses nothing. */
static void fsync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (slash) {
        size_t n = (size_t)(slash - path);
        if (n + 2 > sizeof dir) return;
        memcpy(dir, path, n ? n : 1);
        dir[n ? n : 1] = '\0';
    } else {
        strcpy(dir, ".");
    }
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Move tmp to path: rename with overwrite, else a no-clobber link + unlink. */
static mxp_status publish(const char *tmp, const char *path, unsigned flags)
{
    if (flags & MXST_OVERWRITE) {
        if (rename(tmp, path) != 0)
            return fail(MXP_EIO, "%s: cannot rename the temporary file into place: %s", SHOW(path),
                        strerror(errno));
    } else if (link(tmp, path) == 0) {
        unlink(tmp);
    } else if (errno == EEXIST) {
        return fail(MXP_EEXIST, "%s: already exists (use --force to overwrite)", SHOW(path));
    } else {
        /* file systems without hard links: check, then rename (a small race remains) */
        struct stat sb;
        if (lstat(path, &sb) == 0)
            return fail(MXP_EEXIST, "%s: already exists (use --force to overwrite)", SHOW(path));
        if (rename(tmp, path) != 0)
            return fail(MXP_EIO, "%s: cannot rename the temporary file into place: %s", SHOW(path),
                        strerror(errno));
    }
    fsync_dir(path);
    return MXP_OK;
}

static mxp_status write_all(int fd, const char *label, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    while (len > 0) {
        size_t chunk = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
        ssize_t w = write(fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return fail(MXP_EIO, "%s: write failed: %s", SHOW(label), strerror(errno));
        }
        if (w == 0) return fail(MXP_EIO, "%s: write wrote nothing", SHOW(label));
        p += w;
        len -= (size_t)w;
    }
    return MXP_OK;
}

mxp_status mxst_write_small_file(const char *path, const void *data, size_t len, unsigned flags)
{
    if (!path || (!data && len))
        return fail(MXP_EINVAL, "mxst_write_small_file: %s is NULL", !path ? "path" : "data (with len > 0)");
    char *tmp;
    int fd;
    mxp_status st = make_temp(path, &tmp, &fd);
    if (st) return st;
    int slot = temp_register(tmp);
    st = write_all(fd, path, data, len);
    if (st == MXP_OK && !(flags & MXST_NO_FSYNC) && fsync(fd) != 0)
        st = fail(MXP_EIO, "%s: fsync failed: %s", SHOW(path), strerror(errno));
    if (close(fd) != 0 && st == MXP_OK)
        st = fail(MXP_EIO, "%s: close failed: %s", SHOW(path), strerror(errno));
    if (st == MXP_OK) st = publish(tmp, path, flags);
    if (st) unlink(tmp);
    temp_unregister(slot);
    free(tmp);
    return st;
}

/* ---- the writer ------------------------------------------------------------------------------ */

typedef struct wtensor {
    char *name;
    mxst_dtype dtype;
    size_t ndim;
    uint64_t *shape;
    uint64_t nbytes, begin;
} wtensor;

struct mxst_writer {
    char *path, *tmp;
    int fd, slot;
    unsigned flags;
    bool finished, failed;
    wtensor *t;
    size_t n;
    size_t *order;   /* file position -> input index */
    size_t pos;      /* file position of the current tensor */
    uint64_t in_cur; /* bytes written into the current tensor */
    uint64_t written, data_size, header_len;
};

static const wtensor *g_sort_base;
static int cmp_writer(const void *a, const void *b)
{
    const wtensor *x = &g_sort_base[*(const size_t *)a], *y = &g_sort_base[*(const size_t *)b];
    if (x->dtype != y->dtype) return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void writer_free(mxst_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].shape);
    }
    free(w->t);
    free(w->order);
    free(w->path);
    free(w->tmp);
    free(w);
}

static pthread_mutex_t g_sort_lock = PTHREAD_MUTEX_INITIALIZER;

mxp_status mxst_writer_begin(const char *path, const mxst_spec *tensors, size_t n,
                             const char *const *meta_kv, size_t npairs, unsigned flags,
                             mxst_writer **out)
{
    if (!path || (!tensors && n) || (!meta_kv && npairs) || !out)
        return fail(MXP_EINVAL, "mxst_writer_begin: %s is NULL",
                    !path ? "path" : !out ? "out" : !meta_kv && npairs ? "meta_kv (with npairs > 0)"
                                                                        : "tensors (with n > 0)");
    pthread_once(&json_once, json_init);
    mxst_writer *w = calloc(1, sizeof *w);
    if (!w) return fail(MXP_ENOMEM, "out of memory");
    w->fd = -1;
    w->slot = -1;
    w->flags = flags;
    w->path = strdup(path);
    w->t = calloc(n ? n : 1, sizeof *w->t);
    w->order = calloc(n ? n : 1, sizeof *w->order);
    if (!w->path || !w->t || !w->order) {
        writer_free(w);
        return fail(MXP_ENOMEM, "out of memory");
    }
    w->n = n;
    mxp_status st = MXP_OK;
    for (size_t i = 0; i < n && st == MXP_OK; i++) {
        const mxst_spec *s = &tensors[i];
        wtensor *t = &w->t[i];
        w->order[i] = i;
        if (!s->name || (s->ndim && !s->shape)) {
            st = fail(MXP_EINVAL, "%s: tensor %zu: NULL name or shape", SHOW(path), i);
            break;
        }
        if (strcmp(s->name, "__metadata__") == 0) {
            st = fail(MXP_EINVAL, "%s: a tensor cannot be named '__metadata__' (rule: name)",
                      SHOW(path));
            break;
        }
        if ((unsigned)s->dtype >= MXST_DTYPE_COUNT) {
            st = fail(MXP_EINVAL, "%s: tensor '%s': invalid dtype %d", SHOW(path), SHOW(s->name),
                      (int)s->dtype);
            break;
        }
        t->name = strdup(s->name);
        t->dtype = s->dtype;
        t->ndim = s->ndim;
        t->shape = malloc((s->ndim ? s->ndim : 1) * sizeof *t->shape);
        if (!t->name || !t->shape) {
            st = fail(MXP_ENOMEM, "out of memory");
            break;
        }
        uint64_t numel = 1;
        bool ovf = false;
        for (size_t d = 0; d < s->ndim; d++) {
            t->shape[d] = s->shape[d];
            if (s->shape[d] > (uint64_t)INT64_MAX) ovf = true;
            if (s->shape[d] && numel > UINT64_MAX / s->shape[d])
                ovf = true;
            else
                numel *= s->shape[d];
        }
        unsigned bits = mxst_dtype_bits(s->dtype);
        if (ovf || numel > UINT64_MAX / bits || (numel * bits) % 8)
            st = fail(MXP_EINVAL,
                      "%s: tensor '%s': size overflows or is not a whole number of "
                      "bytes (rule: size)",
                      SHOW(path), SHOW(s->name));
        t->nbytes = numel * bits / 8;
    }
    for (size_t i = 0; i < n && st == MXP_OK; i++)
        if (!utf8_ok(w->t[i].name))
            st = fail(MXP_EINVAL, "%s: tensor name '%s' is not valid UTF-8", SHOW(path), SHOW(w->t[i].name));
    for (size_t i = 0; i < npairs && st == MXP_OK; i++) {
        if (!meta_kv[2 * i] || !meta_kv[2 * i + 1])
            st = fail(MXP_EINVAL, "%s: metadata pair %zu: its %s is NULL", SHOW(path), i,
                      !meta_kv[2 * i] ? "key" : "value");
        for (int kv = 0; kv < 2 && st == MXP_OK; kv++)
            if (!utf8_ok(meta_kv[2 * i + kv]))
                st = fail(MXP_EINVAL, "%s: metadata %s '%s' is not valid UTF-8", SHOW(path), kv ? "value" : "key",
                          SHOW(meta_kv[2 * i + kv]));
        for (size_t j = 0; j < i && st == MXP_OK; j++)
            if (strcmp(meta_kv[2 * i], meta_kv[2 * j]) == 0)
                st = fail(MXP_EINVAL, "%s: metadata key '%s' given twice", SHOW(path),
                          SHOW(meta_kv[2 * i]));
    }
    if (st) {
        writer_free(w);
        return st;
    }
    pthread_mutex_lock(&g_sort_lock);
    g_sort_base = w->t;
    qsort(w->order, n, sizeof *w->order, cmp_writer);
    pthread_mutex_unlock(&g_sort_lock);
    for (size_t k = 1; k < n; k++) {
        const wtensor *a = &w->t[w->order[k - 1]], *b = &w->t[w->order[k]];
        if (a->name && b->name && strcmp(a->name, b->name) == 0) { /* names are set: the analyzer
                                                                       loses them through qsort */
            st = fail(MXP_EINVAL, "%s: tensor '%s' given twice (rule: unique-names)", SHOW(path),
                      SHOW(a->name));
        }
    }
    if (st == MXP_OK) {
        /* duplicates of different dtypes are not adjacent: check by sorting names */
        const char **nm = malloc((n ? n : 1) * sizeof *nm);
        if (!nm) {
            st = fail(MXP_ENOMEM, "out of memory");
        } else {
            for (size_t i = 0; i < n; i++) nm[i] = w->t[i].name;
            qsort(nm, n, sizeof *nm, cmp_str);
            for (size_t k = 1; k < n && st == MXP_OK; k++)
                if (strcmp(nm[k - 1], nm[k]) == 0)
                    st = fail(MXP_EINVAL, "%s: tensor '%s' given twice (rule: unique-names)",
                              SHOW(path), SHOW(nm[k]));
            free(nm);
        }
    }
    if (st) {
        writer_free(w);
        return st;
    }
    /* header */
    json_t *root = json_object(), *meta = json_object();
    bool have_format = false;
    int jfail = !root || !meta;
    for (size_t i = 0; i < npairs && !jfail; i++) {
        if (strcmp(meta_kv[2 * i], "format") == 0) have_format = true;
        jfail |= json_object_set_new(meta, meta_kv[2 * i], json_string(meta_kv[2 * i + 1]));
    }
    if (!have_format && !jfail) jfail |= json_object_set_new(meta, "format", json_string("pt"));
    if (!jfail)
        jfail |= json_object_set_new(root, "__metadata__", meta);
    else
        json_decref(meta);
    uint64_t off = 0;
    for (size_t k = 0; k < n && !jfail; k++) {
        wtensor *t = &w->t[w->order[k]];
        json_t *e = json_object(), *shp = json_array(), *offs = json_array();
        jfail |= !e || !shp || !offs;
        for (size_t d = 0; d < t->ndim && !jfail; d++)
            jfail |= json_array_append_new(shp, json_integer((json_int_t)t->shape[d]));
        t->begin = off;
        if (off > (uint64_t)INT64_MAX - t->nbytes) jfail = 2;
        off += t->nbytes;
        if (!jfail) {
            jfail |= json_array_append_new(offs, json_integer((json_int_t)t->begin));
            jfail |= json_array_append_new(offs, json_integer((json_int_t)off));
            jfail |= json_object_set_new(e, "dtype", json_string(mxst_dtype_name(t->dtype)));
            jfail |= json_object_set_new(e, "shape", shp);
            shp = NULL;
            jfail |= json_object_set_new(e, "data_offsets", offs);
            offs = NULL;
            jfail |= json_object_set_new(root, t->name, e);
            e = NULL;
        }
        json_decref(e);
        json_decref(shp);
        json_decref(offs);
    }
    char *text = jfail ? NULL : json_text(root, JSON_COMPACT, "");
    json_decref(root);
    if (!text) {
        writer_free(w);
        return jfail == 2
                   ? fail(MXP_EINVAL, "%s: the data buffer would exceed 2^63 bytes", SHOW(path))
                   : fail(MXP_ENOMEM, "%s: out of memory building the header", SHOW(path));
    }
    w->data_size = off;
    size_t tl = strlen(text), padded = (tl + 7) / 8 * 8;
    w->header_len = padded;
    unsigned char *hdr = malloc(8 + padded);
    if (!hdr) {
        free(text);
        writer_free(w);
        return fail(MXP_ENOMEM, "out of memory");
    }
    for (int i = 0; i < 8; i++) hdr[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(hdr + 8, text, tl);
    memset(hdr + 8 + tl, ' ', padded - tl);
    free(text);
    if (padded > MXST_MAX_HEADER) {
        free(hdr);
        writer_free(w);
        return fail(MXP_EINVAL, "%s: the header would be %zu bytes, over the limit of %u",
                    SHOW(path), padded, MXST_MAX_HEADER);
    }
    if (!(flags & MXST_OVERWRITE)) {
        struct stat sb;
        if (lstat(path, &sb) == 0) {
            free(hdr);
            writer_free(w);
            return fail(MXP_EEXIST, "%s: already exists (use --force to overwrite)", SHOW(path));
        }
    }
    st = make_temp(path, &w->tmp, &w->fd);
    if (st == MXP_OK) {
        w->slot = temp_register(w->tmp);
        if (w->slot < 0) st = fail(MXP_EIO, "%s: too many open outputs", SHOW(path));
    }
    if (st == MXP_OK) st = write_all(w->fd, w->tmp, hdr, 8 + padded);
    free(hdr);
    if (st) {
        mxst_writer_abort(w);
        return st;
    }
    *out = w;
    return MXP_OK;
}

size_t mxst_writer_count(const mxst_writer *w) { return w ? w->n : 0; }
size_t mxst_writer_order(const mxst_writer *w, size_t i)
{
    return w && i < w->n ? w->order[i] : (size_t)-1;
}
size_t mxst_writer_current(const mxst_writer *w)
{
    if (!w) return 0;
    size_t p = w->pos;
    uint64_t in = w->in_cur;
    while (p < w->n && in == w->t[w->order[p]].nbytes) {
        p++;
        in = 0;
    }
    return p < w->n ? w->order[p] : w->n;
}
uint64_t mxst_writer_nbytes(const mxst_writer *w, size_t i)
{
    return w && i < w->n ? w->t[i].nbytes : 0;
}
uint64_t mxst_writer_data_size(const mxst_writer *w) { return w ? w->data_size : 0; }
uint64_t mxst_writer_file_size(const mxst_writer *w)
{
    return w ? 8 + w->header_len + w->data_size : 0;
}

mxp_status mxst_writer_write(mxst_writer *w, const void *buf, size_t len)
{
    if (!w || (!buf && len))
        return fail(MXP_EINVAL, "mxst_writer_write: %s is NULL", !w ? "w" : "buf (with len > 0)");
    if (w->failed || w->finished)
        return fail(MXP_EINVAL, "%s: write after a failure or after finish", SHOW(w->path));
    if (len > w->data_size - w->written) {
        w->failed = true;
        return fail(MXP_EINVAL,
                    "%s: %zu more byte%s than the tensors hold (%llu of %llu "
                    "written)",
                    SHOW(w->path), len, MXST_PLURAL(len), (unsigned long long)w->written,
                    (unsigned long long)w->data_size);
    }
    mxp_status st = write_all(w->fd, w->path, buf, len);
    if (st) {
        w->failed = true;
        return st;
    }
    w->written += len;
    uint64_t left = len;
    while (left > 0 && w->pos < w->n) {
        uint64_t room = w->t[w->order[w->pos]].nbytes - w->in_cur;
        if (left < room) {
            w->in_cur += left;
            left = 0;
        } else {
            left -= room;
            w->pos++;
            w->in_cur = 0;
        }
    }
    return MXP_OK;
}

mxp_status mxst_writer_finish(mxst_writer *w)
{
    if (!w) return fail(MXP_EINVAL, "mxst_writer_finish: w is NULL");
    if (w->finished) return MXP_OK;
    if (w->failed) return fail(MXP_EINVAL, "%s: finish after a failed write", SHOW(w->path));
    if (w->written != w->data_size) {
        size_t cur = mxst_writer_current(w);
        return fail(MXP_EINVAL,
                    "%s: only %llu of %llu data byte%s written (tensor '%s' "
                    "incomplete)",
                    SHOW(w->path), (unsigned long long)w->written, (unsigned long long)w->data_size,
                    MXST_PLURAL(w->data_size), cur < w->n ? SHOW(w->t[cur].name) : "?");
    }
    if (!(w->flags & MXST_NO_FSYNC) && fsync(w->fd) != 0) {
        w->failed = true;
        return fail(MXP_EIO, "%s: fsync failed: %s", SHOW(w->path), strerror(errno));
    }
    int r = close(w->fd);
    w->fd = -1;
    if (r != 0) {
        w->failed = true;
        return fail(MXP_EIO, "%s: close failed: %s", SHOW(w->path), strerror(errno));
    }
    w->finished = true;
    return MXP_OK;
}

mxp_status mxst_writer_commit(mxst_writer *w)
{
    if (!w) return fail(MXP_EINVAL, "mxst_writer_commit: w is NULL");
    mxp_status st = mxst_writer_finish(w);
    if (st == MXP_OK) st = publish(w->tmp, w->path, w->flags);
    if (st) {
        mxst_writer_abort(w);
        return st;
    }
    temp_unregister(w->slot);
    writer_free(w);
    return MXP_OK;
}

void mxst_writer_abort(mxst_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp) unlink(w->tmp);
    temp_unregister(w->slot);
    writer_free(w);
}

/* ---- index and sizes ---------------------------------------------------------------------- */

typedef struct name_pair {
    const char *name, *shard;
} name_pair;

static int cmp_pair(const void *a, const void *b)
{
    return strcmp(((const name_pair *)a)->name, ((const name_pair *)b)->name);
}

char *mxst_index_json(const char *const *names, const char *const *shards, size_t n,
                      uint64_t total_size)
{
    pthread_once(&json_once, json_init);
    name_pair *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) p[i] = (name_pair){names[i], shards[i]};
    qsort(p, n, sizeof *p, cmp_pair);
    json_t *root = json_object(), *md = json_object(), *wm = json_object();
    int bad = !root || !md || !wm;
    if (!bad) bad |= json_object_set_new(md, "total_size", json_integer((json_int_t)total_size));
    for (size_t i = 0; i < n && !bad; i++)
        bad |= json_object_set_new(wm, p[i].name, json_string(p[i].shard));
    free(p);
    char *text = NULL;
    if (!bad) {
        bad |= json_object_set_new(root, "metadata", md);
        md = NULL;
        bad |= json_object_set_new(root, "weight_map", wm);
        wm = NULL;
        if (!bad) text = json_text(root, JSON_INDENT(2), "\n");
    }
    json_decref(md);
    json_decref(wm);
    json_decref(root);
    return text;
}

bool mxst_parse_size(const char *text, uint64_t *out)
{
    if (!text || !out) return false;
    const char *p = text;
    while (*p == ' ') p++;
    if (*p < '0' || *p > '9') return false;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10) return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    while (*p == ' ') p++;
    static const struct {
        const char *unit;
        uint64_t mul;
    } U[] = {{"b", 1},
             {"kb", 1000ull},
             {"mb", 1000000ull},
             {"gb", 1000000000ull},
             {"tb", 1000000000000ull},
             {"kib", 1ull << 10},
             {"mib", 1ull << 20},
             {"gib", 1ull << 30},
             {"tib", 1ull << 40}};
    char unit[8];
    size_t k = 0;
    for (; *p && *p != ' ' && k < sizeof unit - 1; p++) {
        char c = *p;
        unit[k++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    unit[k] = '\0';
    while (*p == ' ') p++;
    if (*p || k == 0) return false;
    for (size_t i = 0; i < sizeof U / sizeof U[0]; i++) {
        if (strcmp(unit, U[i].unit) == 0) {
            if (v > UINT64_MAX / U[i].mul) return false;
            *out = v * U[i].mul;
            return true;
        }
    }
    return false;
}
