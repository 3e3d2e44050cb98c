/*
 * policy.c - precision policies: the parser for the four text forms (jmp, Keras presets, jmp
 * key=value lists, Keras quantized names), the canonical formatter, the global default policy,
 * the backend's half dtype, and casting trees by a policy.
 *
 * The parser never writes *out until the whole text is accepted; every rejection names the
 * token that caused it and quotes the policy text.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Messages quote at most this many bytes of a token or of the policy text. */
#define QUOTE_MAX 300

const char *mxp_quant_name(mxp_quant q)
{
    switch (q) {
    case MXP_QUANT_NONE: return "none";
    case MXP_QUANT_INT8: return "int8";
    case MXP_QUANT_INT4: return "int4";
    case MXP_QUANT_FLOAT8: return "float8";
    }
    return "invalid";
}

/* ---- backend ------------------------------------------------------------------------------ */

static atomic_int current_backend = MXP_BACKEND_CPU;

void mxp_set_backend(mxp_backend b)
{
    if ((unsigned)b > MXP_BACKEND_TPU) {
        (void)mxp__fail(MXP_EINVAL, "mxp_set_backend: invalid backend %d ignored", (int)b);
        return;
    }
    atomic_store(&current_backend, (int)b);
}

mxp_backend mxp_get_backend(void) { return (mxp_backend)atomic_load(&current_backend); }

mxp_dtype mxp_half_dtype(mxp_backend b) { return b == MXP_BACKEND_TPU ? MXP_BFLOAT16 : MXP_FLOAT16; }

/* ---- validity, equality, format ----------------------------------------------------------- */

mxp_status mxp__policy_check(const char *fn, const mxp_policy *p)
{
    if (!p) return mxp__fail(MXP_EINVAL, "%s: policy is NULL", fn);
    static const char *const field[3] = {"param", "compute", "output"};
    const mxp_dtype d[3] = {p->param, p->compute, p->output};
    for (int i = 0; i < 3; i++)
        if (!mxp_dtype_is_floating(d[i]))
            return mxp__fail(MXP_EINVAL, "%s: invalid policy: %s dtype %s (%d) is not floating", fn, field[i],
                             mxp_dtype_name(d[i]), (int)d[i]);
    if ((unsigned)p->quant > MXP_QUANT_FLOAT8)
        return mxp__fail(MXP_EINVAL, "%s: invalid policy: unknown quant mode %d", fn, (int)p->quant);
    if (p->quant == MXP_QUANT_FLOAT8 && p->amax_history_len == 0)
        return mxp__fail(MXP_EINVAL, "%s: invalid policy: q=float8 needs amax_history_len > 0", fn);
    if (p->quant != MXP_QUANT_FLOAT8 && p->amax_history_len != 0)
        return mxp__fail(MXP_EINVAL, "%s: invalid policy: amax_history_len %u without q=float8", fn,
                         (unsigned)p->amax_history_len);
    if (p->amax_history_len > MXP_FP8_HISTORY_MAX)
        return mxp__fail(MXP_EINVAL, "%s: invalid policy: amax_history_len %lu is above "
                         "MXP_FP8_HISTORY_MAX (%d)", fn, (unsigned long)p->amax_history_len, MXP_FP8_HISTORY_MAX);
    if (p->quant == MXP_QUANT_INT8 && p->compute == MXP_FLOAT16)
        return mxp__fail(MXP_EINVAL, "%s: invalid policy: q=int8 with compute float16 (int8 matmul "
                                     "outputs overflow float16; use bfloat16 or float32)", fn);
    return MXP_OK;
}

mxp_status mxp_policy_validate(const mxp_policy *p) { return mxp__policy_check("mxp_policy_validate", p); }

bool mxp_policy_equal(const mxp_policy *a, const mxp_policy *b)
{
    if (!a || !b) return false;
    return a->param == b->param && a->compute == b->compute && a->output == b->output &&
           a->quant == b->quant && a->amax_history_len == b->amax_history_len;
}

int mxp_policy_format(const mxp_policy *p, char *buf, size_t cap)
{
    if (mxp__policy_check("mxp_policy_format", p) != MXP_OK) return -1;
    if (!buf && cap > 0) {
        (void)mxp__fail(MXP_EINVAL, "mxp_policy_format: buf is NULL with cap = %zu (NULL is allowed only with "
                        "cap 0, to measure)", cap);
        return -1;
    }
    char tmp[96];
    int n = snprintf(tmp, sizeof tmp, "p=%s,c=%s,o=%s", mxp_dtype_name(p->param),
                     mxp_dtype_name(p->compute), mxp_dtype_name(p->output));
    if (p->quant == MXP_QUANT_FLOAT8)
        n += snprintf(tmp + n, sizeof tmp - (size_t)n, ",q=float8,h=%u", (unsigned)p->amax_history_len);
    else if (p->quant != MXP_QUANT_NONE)
        n += snprintf(tmp + n, sizeof tmp - (size_t)n, ",q=%s", mxp_quant_name(p->quant));
    if (cap > 0) {
        size_t k = (size_t)n < cap - 1 ? (size_t)n : cap - 1;
        memcpy(buf, tmp, k);
        buf[k] = '\0';
    }
    return n;
}

/* ---- parser ------------------------------------------------------------------------------- */

/* A [b, e) slice of the text. */
typedef struct span {
    const char *b, *e;
} span;

static span trim(const char *b, const char *e)
{
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    return (span){b, e};
}

static int span_len(span s) { return (int)(s.e - s.b); }

/* Quoting bound for "%.*s": never more than QUOTE_MAX bytes. */
static int qlen(span s) { return span_len(s) < QUOTE_MAX ? span_len(s) : QUOTE_MAX; }

/* Case-insensitive comparison of a span with a lower-case word. */
static bool span_is(span s, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(s.e - s.b) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s.b[i]) != word[i]) return false;
    return true;
}

static bool span_has_prefix(span s, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(s.e - s.b) < n) return false;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s.b[i]) != word[i]) return false;
    return true;
}

/* The first ',' in [b, e) outside braces (Nx tuples such as "{:f, 16}" contain commas), or NULL. */
static const char *top_level_comma(const char *b, const char *e)
{
    int depth = 0;
    for (const char *p = b; p < e; p++) {
        if (*p == '{') depth++;
        else if (*p == '}' && depth > 0) depth--;
        else if (*p == ',' && depth == 0) return p;
    }
    return NULL;
}

/* Parse state shared by the helpers: the whole text for messages. */
typedef struct pctx {
    span text;
} pctx;

/* One dtype token (or `half`, resolved with the current backend) of a policy; floating only. */
static mxp_status parse_dtype_token(const pctx *c, span tok, mxp_dtype *out)
{
    if (span_is(tok, "half")) {
        *out = mxp_half_dtype(mxp_get_backend());
        return MXP_OK;
    }
    char buf[64];
    mxp_dtype d = MXP_FLOAT32;
    mxp_status s = MXP_EPARSE;
    if ((size_t)span_len(tok) < sizeof buf) {
        memcpy(buf, tok.b, (size_t)span_len(tok));
        buf[span_len(tok)] = '\0';
        s = mxp_dtype_parse(buf, &d);
    }
    if (s == MXP_EAMBIGUOUS)
        return mxp__fail(MXP_EPARSE,
                         "ambiguous dtype '%.*s' in policy '%.*s': say float8_e4m3fn (e4m3) or "
                         "float8_e5m2 (e5m2)",
                         qlen(tok), tok.b, qlen(c->text), c->text.b);
    if (s != MXP_OK)
        return mxp__fail(MXP_EPARSE,
                         "unknown dtype '%.*s' in policy '%.*s' (expected one of: float64 f64, "
                         "float32 f32 full, float16 f16, bfloat16 bf16, float8_e4m3fn e4m3, "
                         "float8_e5m2 e5m2, half, {:f, 32}, or mixed_float16, mixed_bfloat16, "
                         "p=..,c=..,o=..)",
                         qlen(tok), tok.b, qlen(c->text), c->text.b);
    if (!mxp_dtype_is_floating(d))
        return mxp__fail(MXP_EPARSE,
                         "non-floating dtype '%.*s' (%s) in policy '%.*s': policies use floating "
                         "dtypes only",
                         qlen(tok), tok.b, mxp_dtype_name(d), qlen(c->text), c->text.b);
    *out = d;
    return MXP_OK;
}

enum { K_P, K_C, K_O, K_Q, K_H, K_COUNT };
static const char *const key_name[K_COUNT] = {"params", "compute", "output", "quant", "amax_history"};

static int key_of(span k)
{
    if (span_is(k, "p") || span_is(k, "param") || span_is(k, "params")) return K_P;
    if (span_is(k, "c") || span_is(k, "compute")) return K_C;
    if (span_is(k, "o") || span_is(k, "output")) return K_O;
    if (span_is(k, "q") || span_is(k, "quant")) return K_Q;
    if (span_is(k, "h") || span_is(k, "amax_history")) return K_H;
    return -1;
}

static bool parse_quant_mode(span v, mxp_quant *q)
{
    if (span_is(v, "int8")) *q = MXP_QUANT_INT8;
    else if (span_is(v, "int4")) *q = MXP_QUANT_INT4;
    else if (span_is(v, "float8")) *q = MXP_QUANT_FLOAT8;
    else return false;
    return true;
}

/*
 * Forms 1-3 of the grammar on `src` (already trimmed), with quant `q0` implied by a form-4
 * prefix (MXP_QUANT_NONE when there is none).
 */
static mxp_status parse_source(const pctx *c, span src, mxp_quant q0, mxp_policy *out)
{
    mxp_policy p = {MXP_FLOAT32, MXP_FLOAT32, MXP_FLOAT32, q0, 0};
    mxp_status s;
    if (src.b == src.e)
        return mxp__fail(MXP_EPARSE, "empty policy '%.*s' (expected a dtype, mixed_float16, "
                                     "mixed_bfloat16 or p=..,c=..,o=..)",
                         qlen(c->text), c->text.b);

    bool has_eq = memchr(src.b, '=', (size_t)span_len(src)) != NULL;
    bool has_comma = top_level_comma(src.b, src.e) != NULL;

    if (!has_eq && !has_comma) {
        /* Forms 1 and 2: one word. */
        if (span_is(src, "mixed_float16")) {
            p.compute = p.output = MXP_FLOAT16;
        } else if (span_is(src, "mixed_bfloat16")) {
            p.compute = p.output = MXP_BFLOAT16;
        } else {
            mxp_dtype d;
            if ((s = parse_dtype_token(c, src, &d)) != MXP_OK) return s;
            p.param = p.compute = p.output = d;
        }
    } else {
        /* Form 3: key=value parts. */
        bool seen[K_COUNT] = {false};
        span seen_tok[K_COUNT];
        mxp_dtype dt[3] = {MXP_FLOAT32, MXP_FLOAT32, MXP_FLOAT32};
        uint32_t h = 0;
        mxp_quant q = MXP_QUANT_NONE;
        const char *b = src.b;
        for (;;) {
            const char *comma = top_level_comma(b, src.e);
            const char *pe = comma ? comma : src.e;
            span part = trim(b, pe);
            if (part.b == part.e)
                return mxp__fail(MXP_EPARSE, "empty part at offset %d in policy '%.*s' (a stray ',')",
                                 (int)(b - c->text.b), qlen(c->text), c->text.b);
            const char *eq = memchr(part.b, '=', (size_t)span_len(part));
            if (!eq)
                return mxp__fail(MXP_EPARSE,
                                 "expected key=value, got '%.*s' in policy '%.*s' (keys: p/params, "
                                 "c/compute, o/output, q/quant, h/amax_history)",
                                 qlen(part), part.b, qlen(c->text), c->text.b);
            span k = trim(part.b, eq), v = trim(eq + 1, part.e);
            if (k.b == k.e)
                return mxp__fail(MXP_EPARSE, "missing key in part '%.*s' of policy '%.*s'",
                                 qlen(part), part.b, qlen(c->text), c->text.b);
            int key = key_of(k);
            if (key < 0)
                return mxp__fail(MXP_EPARSE,
                                 "unknown key '%.*s' in policy '%.*s' (expected p/params, c/compute, "
                                 "o/output, q/quant, h/amax_history)",
                                 qlen(k), k.b, qlen(c->text), c->text.b);
            if (seen[key])
                return mxp__fail(MXP_EPARSE, "repeated key '%.*s' (%s, already given as '%.*s') in "
                                             "policy '%.*s'",
                                 qlen(k), k.b, key_name[key], qlen(seen_tok[key]), seen_tok[key].b,
                                 qlen(c->text), c->text.b);
            if (v.b == v.e)
                return mxp__fail(MXP_EPARSE, "missing value for key '%.*s' in policy '%.*s'", qlen(k),
                                 k.b, qlen(c->text), c->text.b);
            seen[key] = true;
            seen_tok[key] = k;
            if (key <= K_O) {
                if ((s = parse_dtype_token(c, v, &dt[key])) != MXP_OK) return s;
            } else if (key == K_Q) {
                if (q0 != MXP_QUANT_NONE)
                    return mxp__fail(MXP_EPARSE,
                                     "quantization given twice: '%.*s' and the %s_from_ prefix in "
                                     "policy '%.*s'",
                                     qlen(part), part.b, mxp_quant_name(q0), qlen(c->text), c->text.b);
                if (!parse_quant_mode(v, &q))
                    return mxp__fail(MXP_EPARSE,
                                     "unknown quantization '%.*s' in policy '%.*s' (expected int8, "
                                     "int4 or float8)",
                                     qlen(v), v.b, qlen(c->text), c->text.b);
            } else {
                unsigned long x = 0; /* saturates just above the cap: any longer number is above it */
                bool ok = true;
                for (const char *t = v.b; t < v.e; t++) {
                    if (!isdigit((unsigned char)*t)) {
                        ok = false;
                        break;
                    }
                    if (x <= MXP_FP8_HISTORY_MAX) x = x * 10 + (unsigned)(*t - '0');
                }
                if (!ok || x == 0)
                    return mxp__fail(MXP_EPARSE,
                                     "invalid amax history '%.*s' in policy '%.*s' (expected an "
                                     "integer in 1..%d)",
                                     qlen(v), v.b, qlen(c->text), c->text.b, MXP_FP8_HISTORY_MAX);
                if (x > MXP_FP8_HISTORY_MAX)
                    return mxp__fail(MXP_EPARSE,
                                     "amax history '%.*s' in policy '%.*s' is above the limit "
                                     "MXP_FP8_HISTORY_MAX (%d)",
                                     qlen(v), v.b, qlen(c->text), c->text.b, MXP_FP8_HISTORY_MAX);
                h = (uint32_t)x;
            }
            if (!comma) break;
            b = comma + 1;
        }
        p.param = seen[K_P] ? dt[K_P] : MXP_FLOAT32;
        p.compute = seen[K_C] ? dt[K_C] : p.param;
        p.output = seen[K_O] ? dt[K_O] : p.compute;
        if (seen[K_Q]) p.quant = q;
        if (seen[K_H]) {
            if (p.quant != MXP_QUANT_FLOAT8)
                return mxp__fail(MXP_EPARSE,
                                 "key '%.*s' (amax history) needs q=float8 in policy '%.*s'",
                                 qlen(seen_tok[K_H]), seen_tok[K_H].b, qlen(c->text), c->text.b);
            p.amax_history_len = h;
        }
    }
    if (p.quant == MXP_QUANT_FLOAT8 && p.amax_history_len == 0) p.amax_history_len = 1024;
    if (p.quant == MXP_QUANT_INT8 && p.compute == MXP_FLOAT16)
        return mxp__fail(MXP_EPARSE,
                         "int8 quantization with compute float16 in policy '%.*s': int8 matmul "
                         "outputs overflow float16 (use mixed_bfloat16 or float32 compute)",
                         qlen(c->text), c->text.b);
    *out = p;
    return MXP_OK;
}

static mxp_status policy_parse(const char *text, mxp_policy *out)
{
    if (!text) return mxp__fail(MXP_EINVAL, "mxp_policy_parse: text is NULL");
    if (!out) return mxp__fail(MXP_EINVAL, "mxp_policy_parse: out is NULL");
    pctx c = {trim(text, text + strlen(text))};
    span src = c.text;
    mxp_quant q0 = MXP_QUANT_NONE;
    static const struct {
        const char *prefix;
        mxp_quant q;
    } modes[] = {{"int8_from_", MXP_QUANT_INT8},
                 {"int4_from_", MXP_QUANT_INT4},
                 {"float8_from_", MXP_QUANT_FLOAT8}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (span_has_prefix(src, modes[i].prefix)) {
            q0 = modes[i].q;
            src = trim(src.b + strlen(modes[i].prefix), src.e);
            if (src.b == src.e)
                return mxp__fail(MXP_EPARSE, "missing source policy after '%s' in policy '%.*s'",
                                 modes[i].prefix, qlen(c.text), c.text.b);
            break;
        }
    }
    mxp_policy p;
    mxp_status s = parse_source(&c, src, q0, &p);
    if (s != MXP_OK) return s;
    *out = p;
    return MXP_OK;
}

mxp_status mxp_policy_parse(const char *text, mxp_policy *out)
{
    return mxp__in("mxp_policy_parse", policy_parse(text, out));
}

/* ---- the global default policy ------------------------------------------------------------ */

/* A mutex rather than a seqlock: set/get are rare and cheap, and a mutex makes "never torn"
 * obvious. Policy-map lookups do not read it on their fast path unless the default applies. */
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static mxp_policy default_policy = {MXP_FLOAT32, MXP_FLOAT32, MXP_FLOAT32, MXP_QUANT_NONE, 0};

void mxp_set_default_policy(const mxp_policy *p)
{
    if (mxp__policy_check("mxp_set_default_policy", p) != MXP_OK) return; /* message already recorded */
    mxp_policy copy = *p;
    pthread_mutex_lock(&default_lock);
    default_policy = copy;
    pthread_mutex_unlock(&default_lock);
}

mxp_policy mxp_default_policy(void)
{
    pthread_mutex_lock(&default_lock);
    mxp_policy p = default_policy;
    pthread_mutex_unlock(&default_lock);
    return p;
}

/* ---- casting trees by a policy ------------------------------------------------------------ */

#define POLICY_CAST(field)                                                                       \
    mxp_status mxp_policy_cast_to_##field(const mxp_policy *p, const mxp_tree *src, mxp_tree **out) \
    {                                                                                            \
        static const char fn[] = "mxp_policy_cast_to_" #field;                                   \
        mxp_status s = mxp__policy_check(fn, p);                                                 \
        return s != MXP_OK ? s : mxp__tree_cast(fn, src, p->field, NULL, out);                   \
    }                                                                                            \
    mxp_status mxp_policy_cast_to_##field##_into(const mxp_policy *p, mxp_tree *dst,             \
                                                 const mxp_tree *src)                            \
    {                                                                                            \
        static const char fn[] = "mxp_policy_cast_to_" #field "_into";                           \
        mxp_status s = mxp__policy_check(fn, p);                                                 \
        return s != MXP_OK ? s : mxp__tree_cast_into(fn, dst, src, p->field, NULL);              \
    }

/* Named after jmp: cast_to_param uses p->param, and so on. */
POLICY_CAST(param)
POLICY_CAST(compute)
POLICY_CAST(output)

mxp_status mxp_tree_cast_to_full(const mxp_tree *src, mxp_tree **out)
{
    return mxp__tree_cast("mxp_tree_cast_to_full", src, MXP_FLOAT32, NULL, out);
}

mxp_status mxp_tree_cast_to_half(const mxp_tree *src, mxp_tree **out)
{
    return mxp__tree_cast("mxp_tree_cast_to_half", src, mxp_half_dtype(mxp_get_backend()), NULL, out);
}

mxp_status mxp_tree_cast_to_full_into(mxp_tree *dst, const mxp_tree *src)
{
    return mxp__tree_cast_into("mxp_tree_cast_to_full_into", dst, src, MXP_FLOAT32, NULL);
}

mxp_status mxp_tree_cast_to_half_into(mxp_tree *dst, const mxp_tree *src)
{
    return mxp__tree_cast_into("mxp_tree_cast_to_half_into", dst, src, mxp_half_dtype(mxp_get_backend()),
                               NULL);
}
