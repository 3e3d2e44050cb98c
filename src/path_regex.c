/*
 * path_regex.c - the policy map's matcher: POSIX extended regular expressions, whole-string
 * match, as a Thompson NFA run by set simulation.
 *
 * Why not glibc's regcomp/regexec: regcomp recurses once per nesting level and per alternative
 * (100 000 '(' or a 1 MB "a|a|...|b" overflow the stack), is superlinear on keys such as
 * "a?a?a?..." and ".*.*.*...", and regexec's lazily built DFA keeps every state it ever
 * builds, so neither its time nor its memory can be bounded from the key alone. Here:
 *
 *   parse    recursive descent over the key, at most MXP_POLICY_MAP_DEPTH_MAX groups deep
 *            (so at most ~3 frames per level), one pass, building a small syntax tree whose
 *            nodes record how many NFA instructions they compile to (saturating);
 *   limits   length, nesting depth, operator count, interval bounds and the compiled size are
 *            checked while parsing, each refused with a message naming the limit;
 *   compile  one walk that emits the instructions (intervals copy their operand; subtrees that
 *            can only match the empty string emit nothing and are dropped first, so the walk
 *            costs O(instructions emitted), never O(copies of nothing));
 *   match    the classic lock-step simulation: the set of live instructions is advanced one
 *            byte at a time; an instruction enters a set at most once per byte (a generation
 *            mark), so one byte costs at most 2 * states visits and a match at most
 *            2 * states * (strlen(s) + 1), with no allocation and no recursion.
 *
 * Dialect (glibc's ERE in the C locale, minus what POSIX leaves undefined): ordinary bytes;
 * '.'; bracket expressions with ranges, [:class:], single-character [.c.] and [=c=], a leading
 * ']' or '^', '-' first or last; groups; '|' with empty alternatives allowed; '*' '+' '?'
 * '{m}' '{m,}' '{m,n}' '{,n}' after an atom (one per atom); '^' and '$' anchors anywhere;
 * '\' before a non-alphanumeric byte makes it literal; \w \W \s \S as in glibc. Refused:
 * back-references, other letter or digit escapes, glibc's anchors \< \> \` \', a repetition with nothing to repeat or
 * after another repetition, an unmatched ')' (glibc reads it as a literal), ranges with
 * non-ASCII endpoints. Bytes are bytes: the program's locale plays no part.
 */
#include "path_regex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Thread_local unsigned long long mxp__re_compile_work;
_Thread_local unsigned long long mxp__re_match_work;

#define QUOTE_MAX 200
#define NO_PC 0xFFFFu /* end of a patch chain; above any instruction index */

_Static_assert(MXP_POLICY_MAP_STATES_MAX < NO_PC, "instruction indices are 16 bits");

enum { OP_CHAR, OP_ANY, OP_SET, OP_SPLIT, OP_JMP, OP_BOL, OP_EOL, OP_MATCH };

typedef struct inst {
    uint8_t op;
    uint8_t c;    /* OP_CHAR: the byte */
    uint16_t x;   /* OP_SPLIT/OP_JMP: target; OP_SET: set index */
    uint16_t y;   /* OP_SPLIT: second target */
} inst;

struct mxp__re {
    inst *prog;
    size_t n;
    uint8_t (*sets)[32]; /* 256-bit byte sets */
    size_t nsets;
    size_t prefix_len; /* prog[0..prefix_len) are OP_CHAR: the literal start of every match */
    char *prefix;
};

/* ---- syntax tree --------------------------------------------------------------------------- */

enum { N_EMPTY, N_CHAR, N_ANY, N_SET, N_BOL, N_EOL, N_CAT, N_ALT, N_REP };

typedef struct node {
    uint8_t kind;
    uint8_t c;
    uint16_t set;
    int min, max; /* N_REP; max -1: unbounded */
    int child;    /* N_CAT / N_ALT: first child; N_REP: the operand */
    int next;     /* next sibling */
    uint32_t size; /* instructions it compiles to, saturated at MXP_POLICY_MAP_STATES_MAX + 1 */
} node;

typedef struct parser {
    const char *k;
    size_t len, i;
    node *nodes;
    size_t nn, node_cap;
    uint8_t (*sets)[32];
    size_t ns, set_cap;
    int depth;
    size_t ops;
    char why[320]; /* the error, in the key's terms */
} parser;

static uint32_t sat(uint64_t v) { return v > MXP_POLICY_MAP_STATES_MAX ? MXP_POLICY_MAP_STATES_MAX + 1 : (uint32_t)v; }

static int fail(parser *p, const char *fmt, ...) MXP__PRINTF(2, 3);
static int fail(parser *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
    return -1;
}

static int new_node(parser *p, int kind, uint32_t size)
{
    if (p->nn == p->node_cap) return fail(p, "internal: syntax tree capacity exceeded");
    mxp__re_compile_work++;
    node *n = &p->nodes[p->nn];
    *n = (node){.kind = (uint8_t)kind, .child = -1, .next = -1, .size = size};
    return (int)p->nn++;
}

static int new_set(parser *p, const uint8_t bits[32])
{
    if (p->ns == p->set_cap) return fail(p, "internal: byte-set capacity exceeded");
    memcpy(p->sets[p->ns], bits, 32);
    int n = new_node(p, N_SET, 1);
    if (n >= 0) p->nodes[n].set = (uint16_t)p->ns++;
    return n;
}

static void set_bit(uint8_t bits[32], unsigned c) { bits[c >> 3] |= (uint8_t)(1u << (c & 7)); }

static bool is_alnum(unsigned c) { return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z'); }

/* The twelve POSIX classes in the C locale, written as byte ranges (no <ctype.h>: the
 * program's locale must not change what a key means). */
static const char *const class_names[] = {"alpha", "digit", "alnum", "upper", "lower", "space",
                                          "blank", "punct", "print", "graph", "cntrl", "xdigit"};

static bool class_has(int cls, unsigned c)
{
    bool upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z', digit = c >= '0' && c <= '9';
    bool graph = c >= 0x21 && c <= 0x7e;
    switch (cls) {
    case 0: return upper || lower;
    case 1: return digit;
    case 2: return upper || lower || digit;
    case 3: return upper;
    case 4: return lower;
    case 5: return c == ' ' || (c >= '\t' && c <= '\r');
    case 6: return c == ' ' || c == '\t';
    case 7: return graph && !upper && !lower && !digit;
    case 8: return graph || c == ' ';
    case 9: return graph;
    case 10: return c < 0x20 || c == 0x7f;
    default: return digit || ((c | 32) >= 'a' && (c | 32) <= 'f');
    }
}

static void add_class(uint8_t bits[32], int cls)
{
    for (unsigned c = 1; c < 256; c++)
        if (class_has(cls, c)) set_bit(bits, c);
}

static void complement(uint8_t bits[32])
{
    for (int j = 0; j < 32; j++) bits[j] = (uint8_t)~bits[j];
    bits[0] &= (uint8_t)~1u; /* NUL ends a path: it never matches */
}

/* ---- parser -------------------------------------------------------------------------------- */

static int parse_alt(parser *p);

/* One bracket element at p->i: a byte (*kind 0, *ch), a [:class:] (*kind 1, *ch = class),
 * a [=c=] (*kind 2, *ch). [.c.] is a byte. bracket_at: offset of the '[' opening the
 * expression, for messages. Returns 0, or -1 with p->why set. */
static int bracket_elem(parser *p, size_t bracket_at, bool accept_hyphen, int *kind, unsigned *ch)
{
    const char *k = p->k;
    size_t i = p->i;
    if (k[i] == '[' && i + 1 < p->len && (k[i + 1] == ':' || k[i + 1] == '.' || k[i + 1] == '=')) {
        char delim = k[i + 1];
        size_t j = i + 2;
        for (;; j++) {
            mxp__re_compile_work++;
            if (j + 1 >= p->len)
                return fail(p, "unterminated '[%c' at offset %zu inside the bracket expression at offset "
                               "%zu (expected '%c]')",
                            delim, i, bracket_at, delim);
            if (k[j] == delim && k[j + 1] == ']') break;
        }
        const char *name = k + i + 2;
        size_t nlen = j - (i + 2);
        p->i = j + 2;
        if (delim == ':') {
            for (int c = 0; c < 12; c++)
                if (strlen(class_names[c]) == nlen && memcmp(class_names[c], name, nlen) == 0) {
                    *kind = 1;
                    *ch = (unsigned)c;
                    return 0;
                }
            return fail(p, "unknown character class '[:%.*s:]' at offset %zu (known: alpha digit alnum "
                           "upper lower space blank punct print graph cntrl xdigit)",
                        (int)(nlen < 40 ? nlen : 40), name, i);
        }
        if (nlen != 1)
            return fail(p, "'[%c%.*s%c]' at offset %zu: only single characters are supported here", delim,
                        (int)(nlen < 40 ? nlen : 40), name, delim, i);
        *kind = delim == '=' ? 2 : 0;
        *ch = (unsigned char)name[0];
        return 0;
    }
    if (k[i] == '-' && !accept_hyphen && i + 1 >= p->len)
        return fail(p, "unterminated bracket expression: '[' at offset %zu has no closing ']'", bracket_at);
    if (k[i] == '-' && !accept_hyphen && k[i + 1] != ']')
        return fail(p, "'-' at offset %zu in the bracket expression at offset %zu follows a range "
                       "or is in the middle (a literal '-' goes first or last)",
                    i, bracket_at);
    *kind = 0;
    *ch = (unsigned char)k[i];
    p->i = i + 1;
    mxp__re_compile_work++;
    return 0;
}

static int parse_bracket(parser *p)
{
    const char *k = p->k;
    size_t at = p->i;
    uint8_t bits[32] = {0};
    bool neg = false, first = true;
    p->i++;
    if (p->i < p->len && k[p->i] == '^') {
        neg = true;
        p->i++;
    }
    for (;;) {
        if (p->i >= p->len)
            return fail(p, "unterminated bracket expression: '[' at offset %zu has no closing ']'", at);
        if (k[p->i] == ']' && !first) {
            p->i++;
            break;
        }
        size_t start_at = p->i;
        int kind = 0;
        unsigned lo = 0;
        if (bracket_elem(p, at, first, &kind, &lo) < 0) return -1;
        first = false;
        if (p->i + 1 < p->len && k[p->i] == '-' && k[p->i + 1] != ']') { /* a range */
            p->i++;
            int kind2 = 0;
            unsigned hi = 0;
            if (kind != 0)
                return fail(p, "range at offset %zu starts with a character or equivalence class", start_at);
            if (bracket_elem(p, at, true, &kind2, &hi) < 0) return -1;
            if (kind2 != 0)
                return fail(p, "range at offset %zu ends with a character or equivalence class", start_at);
            if (lo > hi)
                return fail(p, "invalid range '%c-%c' at offset %zu: the end comes before the start", (char)lo,
                            (char)hi, start_at);
            if (hi >= 0x80)
                return fail(p, "range at offset %zu has a non-ASCII endpoint (byte 0x%02X); list such bytes "
                               "one by one",
                            start_at, hi);
            for (unsigned c = lo; c <= hi; c++) set_bit(bits, c);
        } else if (kind == 1) {
            add_class(bits, (int)lo);
        } else {
            set_bit(bits, lo);
        }
    }
    if (neg) complement(bits);
    bits[0] &= (uint8_t)~1u;
    return new_set(p, bits);
}

/* A repetition operator at p->i (known to be one of * + ? {): *min, *max (-1 unbounded). */
static int parse_dup(parser *p, int *min, int *max)
{
    const char *k = p->k;
    size_t at = p->i;
    char c = k[at];
    if (c != '{') {
        *min = c == '+' ? 1 : 0;
        *max = c == '?' ? 1 : -1;
        p->i++;
        return 0;
    }
    size_t j = at + 1;
    unsigned long lo = 0, hi = 0;
    bool has_lo = false, comma = false, has_hi = false;
    for (; j < p->len && k[j] >= '0' && k[j] <= '9'; j++, has_lo = true) lo = lo < 100000 ? lo * 10 + (unsigned long)(k[j] - '0') : lo;
    if (j < p->len && k[j] == ',') {
        comma = true;
        for (j++; j < p->len && k[j] >= '0' && k[j] <= '9'; j++, has_hi = true)
            hi = hi < 100000 ? hi * 10 + (unsigned long)(k[j] - '0') : hi;
    }
    mxp__re_compile_work += j - at;
    if (j >= p->len || k[j] != '}' || (!has_lo && !comma))
        return fail(p, "malformed interval at offset %zu (expected '{m}', '{m,}', '{m,n}' or '{,n}' "
                       "with decimal m, n; a literal '{' is written '\\{')",
                    at);
    if (lo > MXP_POLICY_MAP_REPEAT_MAX || hi > MXP_POLICY_MAP_REPEAT_MAX) {
        /* the interval as written: the bounds stop growing at 10^6 while they are read, so a
         * number would misquote a longer one */
        const size_t len = j + 1 - at;
        return fail(p, "interval '%.*s%s' at offset %zu has a bound above MXP_POLICY_MAP_REPEAT_MAX (%d)",
                    (int)(len > 48 ? 44 : len), k + at, len > 48 ? "...}" : "", at, MXP_POLICY_MAP_REPEAT_MAX);
    }
    if (has_hi && lo > hi)
        return fail(p, "interval '{%lu,%lu}' at offset %zu: the minimum is above the maximum", lo, hi, at);
    *min = (int)lo;
    *max = !comma ? (int)lo : has_hi ? (int)hi : -1;
    p->i = j + 1;
    return 0;
}

static bool is_dup(char c) { return c == '*' || c == '+' || c == '?' || c == '{'; }

static int count_op(parser *p, size_t at)
{
    if (++p->ops <= MXP_POLICY_MAP_OPS_MAX) return 0;
    return fail(p, "more than MXP_POLICY_MAP_OPS_MAX (%d) operators ('|', '*', '+', '?', intervals): "
                   "the one at offset %zu is over the limit",
                MXP_POLICY_MAP_OPS_MAX, at);
}

static int parse_atom(parser *p)
{
    const char *k = p->k;
    size_t at = p->i;
    char c = k[at];
    mxp__re_compile_work++;
    switch (c) {
    case '(': {
        if (p->depth >= MXP_POLICY_MAP_DEPTH_MAX)
            return fail(p, "'(' at offset %zu nests deeper than MXP_POLICY_MAP_DEPTH_MAX (%d)", at,
                        MXP_POLICY_MAP_DEPTH_MAX);
        p->depth++;
        p->i++;
        int sub = parse_alt(p);
        if (sub < 0) return -1;
        if (p->i >= p->len) return fail(p, "unbalanced parenthesis: '(' at offset %zu is never closed", at);
        p->i++; /* ')' */
        p->depth--;
        return sub;
    }
    case '.': p->i++; return new_node(p, N_ANY, 1);
    case '^': p->i++; return new_node(p, N_BOL, 1);
    case '$': p->i++; return new_node(p, N_EOL, 1);
    case '[': return parse_bracket(p);
    case '\\': {
        if (at + 1 >= p->len)
            return fail(p, "trailing backslash at offset %zu (a literal backslash is written '\\\\')", at);
        unsigned d = (unsigned char)k[at + 1];
        p->i += 2;
        if (d >= '1' && d <= '9')
            return fail(p, "back-reference '\\%c' at offset %zu: back-references are not supported", (char)d,
                        at);
        if (d == 'w' || d == 'W' || d == 's' || d == 'S') {
            uint8_t bits[32] = {0};
            if (d == 'w' || d == 'W') {
                add_class(bits, 2);
                set_bit(bits, '_');
            } else {
                add_class(bits, 5);
            }
            if (d == 'W' || d == 'S') complement(bits);
            return new_set(p, bits);
        }
        if (d == '<' || d == '>' || d == '`' || d == '\'')
            return fail(p, "unsupported escape '\\%c' at offset %zu (a GNU word or buffer anchor; a literal "
                           "'%c' needs no backslash)",
                        (char)d, at, (char)d);
        if (is_alnum(d))
            return fail(p, "unsupported escape '\\%c' at offset %zu (only \\w \\W \\s \\S and escaped "
                           "punctuation such as '\\.' are supported; for digits write [0-9])",
                        (char)d, at);
        int n = new_node(p, N_CHAR, 1);
        if (n >= 0) p->nodes[n].c = (uint8_t)d;
        return n;
    }
    default: {
        p->i++;
        int n = new_node(p, N_CHAR, 1);
        if (n >= 0) p->nodes[n].c = (uint8_t)c;
        return n;
    }
    }
}

static int parse_piece(parser *p)
{
    const char *k = p->k;
    size_t at = p->i;
    if (is_dup(k[at])) {
        const char *where = at == 0 ? "starts the key" : k[at - 1] == '(' ? "starts a group"
                                                       : k[at - 1] == '|' ? "starts an alternative"
                                                                          : "follows an anchor";
        return fail(p, "'%c' at offset %zu %s: nothing to repeat (a literal '%c' is written '\\%c')", k[at], at,
                    where, k[at], k[at]);
    }
    int atom = parse_atom(p);
    if (atom < 0) return -1;
    if (p->i >= p->len || !is_dup(k[p->i])) return atom;
    size_t dup_at = p->i;
    int kind = p->nodes[atom].kind;
    if (kind == N_BOL || kind == N_EOL)
        return fail(p, "'%c' at offset %zu follows an anchor: nothing to repeat", k[dup_at], dup_at);
    int min = 0, max = 0;
    if (count_op(p, dup_at) < 0 || parse_dup(p, &min, &max) < 0) return -1;
    if (p->i < p->len && is_dup(k[p->i]))
        return fail(p, "'%c' at offset %zu repeats a repetition (undefined in POSIX EREs; group first: "
                       "'(x*)+')",
                    k[p->i], p->i);
    uint64_t s = p->nodes[atom].size;
    if (s == 0 || max == 0) return new_node(p, N_EMPTY, 0); /* matches only the empty string */
    uint64_t size = max < 0 ? (min == 0 ? s + 2 : (uint64_t)min * s + 1)
                            : (uint64_t)min * s + (uint64_t)(max - min) * (s + 1);
    int r = new_node(p, N_REP, sat(size));
    if (r < 0) return -1;
    p->nodes[r].child = atom;
    p->nodes[r].min = min;
    p->nodes[r].max = max;
    return r;
}

/* A concatenation, up to '|', an enclosing ')' or the end. Children that compile to nothing
 * (they match only the empty string) are dropped. */
static int parse_cat(parser *p)
{
    int first = -1, last = -1, count = 0;
    uint64_t size = 0;
    while (p->i < p->len) {
        char c = p->k[p->i];
        if (c == '|') break;
        if (c == ')') {
            if (p->depth == 0)
                return fail(p, "unbalanced parenthesis: ')' at offset %zu has no matching '(' (a literal "
                               "')' is written '\\)')",
                            p->i);
            break;
        }
        int piece = parse_piece(p);
        if (piece < 0) return -1;
        if (p->nodes[piece].size == 0) continue;
        size += p->nodes[piece].size;
        if (last >= 0) p->nodes[last].next = piece;
        else first = piece;
        last = piece;
        count++;
    }
    if (count == 0) return new_node(p, N_EMPTY, 0);
    if (count == 1) return first;
    int cat = new_node(p, N_CAT, sat(size));
    if (cat >= 0) p->nodes[cat].child = first;
    return cat;
}

static int parse_alt(parser *p)
{
    int first = parse_cat(p);
    if (first < 0) return -1;
    if (p->i >= p->len || p->k[p->i] != '|') return first;
    int last = first;
    bool all_empty = p->nodes[first].size == 0;
    uint64_t size = p->nodes[first].size;
    while (p->i < p->len && p->k[p->i] == '|') {
        if (count_op(p, p->i) < 0) return -1;
        p->i++;
        int b = parse_cat(p);
        if (b < 0) return -1;
        all_empty = all_empty && p->nodes[b].size == 0;
        size += p->nodes[b].size + 2;
        p->nodes[last].next = b;
        last = b;
    }
    if (all_empty) return new_node(p, N_EMPTY, 0);
    int alt = new_node(p, N_ALT, sat(size));
    if (alt >= 0) p->nodes[alt].child = first;
    return alt;
}

/* ---- compiler ------------------------------------------------------------------------------ */

typedef struct emitter {
    const node *nodes;
    inst *prog;
    size_t pc;
} emitter;

static void put(emitter *e, uint8_t op, uint8_t c, uint16_t x, uint16_t y)
{
    mxp__re_compile_work++;
    e->prog[e->pc++] = (inst){op, c, x, y};
}

/* Point every instruction on the chain (linked through field y for SPLIT, x for JMP) at `to`. */
static void patch(emitter *e, uint16_t chain, uint16_t to)
{
    while (chain != NO_PC) {
        inst *in = &e->prog[chain];
        uint16_t *field = in->op == OP_SPLIT ? &in->y : &in->x;
        chain = *field;
        *field = to;
    }
}

static void emit(emitter *e, int ni)
{
    const node *n = &e->nodes[ni];
    mxp__re_compile_work++;
    switch (n->kind) {
    case N_EMPTY: break;
    case N_CHAR: put(e, OP_CHAR, n->c, 0, 0); break;
    case N_ANY: put(e, OP_ANY, 0, 0, 0); break;
    case N_SET: put(e, OP_SET, 0, n->set, 0); break;
    case N_BOL: put(e, OP_BOL, 0, 0, 0); break;
    case N_EOL: put(e, OP_EOL, 0, 0, 0); break;
    case N_CAT:
        for (int c = n->child; c >= 0; c = e->nodes[c].next) emit(e, c);
        break;
    case N_ALT: {
        uint16_t jumps = NO_PC;
        for (int c = n->child; c >= 0; c = e->nodes[c].next) {
            if (e->nodes[c].next < 0) {
                emit(e, c);
                break;
            }
            size_t split = e->pc;
            put(e, OP_SPLIT, 0, (uint16_t)(split + 1), 0);
            emit(e, c);
            size_t jmp = e->pc;
            put(e, OP_JMP, 0, jumps, 0);
            jumps = (uint16_t)jmp;
            e->prog[split].y = (uint16_t)e->pc;
        }
        patch(e, jumps, (uint16_t)e->pc);
        break;
    }
    case N_REP: {
        int c = n->child;
        if (n->max < 0) {
            if (n->min == 0) { /* L: SPLIT body, out; body; JMP L */
                size_t l = e->pc;
                put(e, OP_SPLIT, 0, (uint16_t)(l + 1), 0);
                emit(e, c);
                put(e, OP_JMP, 0, (uint16_t)l, 0);
                e->prog[l].y = (uint16_t)e->pc;
            } else { /* min - 1 copies, then L: body; SPLIT L, out */
                for (int j = 0; j < n->min - 1; j++) emit(e, c);
                size_t l = e->pc;
                emit(e, c);
                put(e, OP_SPLIT, 0, (uint16_t)l, (uint16_t)(e->pc + 1));
            }
        } else { /* min copies, then max - min times: SPLIT body, out; body */
            for (int j = 0; j < n->min; j++) emit(e, c);
            uint16_t outs = NO_PC;
            for (int j = n->min; j < n->max; j++) {
                size_t split = e->pc;
                put(e, OP_SPLIT, 0, (uint16_t)(split + 1), outs);
                outs = (uint16_t)split;
                emit(e, c);
            }
            patch(e, outs, (uint16_t)e->pc);
        }
        break;
    }
    default: break;
    }
}

mxp_status mxp__re_check_length(const char *key, size_t len)
{
    if (len <= MXP_POLICY_MAP_KEY_MAX) return MXP_OK;
    return mxp__fail(MXP_EPARSE, "key '%.*s...' is %zu bytes long: more than MXP_POLICY_MAP_KEY_MAX (%d)", 60,
                     key, len, MXP_POLICY_MAP_KEY_MAX);
}

bool mxp__re_is_literal(const char *key) { return key[strcspn(key, ".[\\()*+?{|^$")] == '\0'; }

mxp_status mxp__re_compile(const char *key, mxp__re **out)
{
    size_t len = strlen(key);
    mxp__re_compile_work += len;
    mxp_status st = mxp__re_check_length(key, len);
    if (st != MXP_OK) return st;
    parser p = {.k = key, .len = len};
    p.node_cap = 2 * len + 8;
    p.set_cap = len / 2 + 1;
    p.nodes = malloc(p.node_cap * sizeof *p.nodes);
    p.sets = malloc(p.set_cap * sizeof *p.sets);
    if (!p.nodes || !p.sets) {
        free(p.nodes);
        free(p.sets);
        return mxp__fail(MXP_ENOMEM, "out of memory compiling key '%.*s'", QUOTE_MAX, key);
    }
    int root = parse_alt(&p);
    if (root >= 0 && p.nodes[root].size + 1 > MXP_POLICY_MAP_STATES_MAX)
        root = fail(&p, "it compiles to more than MXP_POLICY_MAP_STATES_MAX (%d) NFA states (an interval "
                        "'x{m,n}' copies x n times, and nested intervals multiply)",
                    MXP_POLICY_MAP_STATES_MAX);
    if (root < 0) {
        free(p.nodes);
        free(p.sets);
        return mxp__fail(MXP_EPARSE, "invalid regex key '%.*s': %s", QUOTE_MAX, key, p.why);
    }

    size_t n = p.nodes[root].size + 1;
    mxp__re *re = calloc(1, sizeof *re);
    inst *prog = re ? malloc(n * sizeof *prog) : NULL;
    uint8_t(*sets)[32] = prog && p.ns ? malloc(p.ns * sizeof *sets) : NULL;
    /* The literal start: the leading bytes of a top-level concatenation (or a lone byte). */
    size_t plen = 0;
    const node *r = &p.nodes[root];
    if (r->kind == N_CHAR) plen = 1;
    else if (r->kind == N_CAT)
        for (int c = r->child; c >= 0 && p.nodes[c].kind == N_CHAR; c = p.nodes[c].next) plen++;
    char *prefix = prog ? malloc(plen + 1) : NULL;
    if (!re || !prog || (p.ns && !sets) || !prefix) {
        free(prefix);
        free(sets);
        free(prog);
        free(re);
        free(p.nodes);
        free(p.sets);
        return mxp__fail(MXP_ENOMEM, "out of memory compiling key '%.*s'", QUOTE_MAX, key);
    }
    emitter e = {p.nodes, prog, 0};
    emit(&e, root);
    put(&e, OP_MATCH, 0, 0, 0);
    if (p.ns) memcpy(sets, p.sets, p.ns * sizeof *sets);
    for (size_t j = 0; j < plen; j++) prefix[j] = (char)prog[j].c;
    prefix[plen] = '\0';
    free(p.nodes);
    free(p.sets);
    re->prog = prog;
    re->n = e.pc; /* == n */
    re->sets = sets;
    re->nsets = p.ns;
    re->prefix = prefix;
    re->prefix_len = plen;
    *out = re;
    return MXP_OK;
}

void mxp__re_free(mxp__re *re)
{
    if (!re) return;
    free(re->prog);
    free(re->sets);
    free(re->prefix);
    free(re);
}

size_t mxp__re_states(const mxp__re *re) { return re->n; }

size_t mxp__re_prefix_len(const mxp__re *re) { return re->prefix_len; }

/* ---- matcher ------------------------------------------------------------------------------- */

/* Scratch layout: a header, then mark[states] (generation in which each instruction last
 * entered a set), then three uint16 arrays: the current set, the next set, the closure stack. */
typedef struct scratch_hdr {
    uint32_t gen;
    uint32_t states;
} scratch_hdr;

size_t mxp__re_scratch_bytes(size_t states)
{
    return sizeof(scratch_hdr) + states * sizeof(uint32_t) + 3 * states * sizeof(uint16_t);
}

void mxp__re_scratch_init(void *scratch, size_t states)
{
    scratch_hdr *h = scratch;
    h->gen = 0;
    h->states = (uint32_t)states;
    memset(h + 1, 0, states * sizeof(uint32_t));
}

typedef struct sim {
    const inst *prog;
    uint32_t *mark;
    uint32_t gen;
    uint16_t *stack;
    unsigned long long work;
} sim;

/* Add pc and everything reachable from it without consuming a byte to list[0..n); returns the
 * new n. Only consuming instructions and OP_MATCH are listed. at_begin / at_end: the position
 * is the start / the end of the string (for ^ and $). */
static size_t closure(sim *s, uint16_t *list, size_t n, uint16_t pc, bool at_begin, bool at_end)
{
    if (s->mark[pc] == s->gen) return n;
    s->mark[pc] = s->gen;
    size_t sp = 0;
    s->stack[sp++] = pc;
#define PUSH(t)                                                                                    \
    do {                                                                                           \
        uint16_t t_ = (t);                                                                         \
        if (s->mark[t_] != s->gen) {                                                               \
            s->mark[t_] = s->gen;                                                                  \
            s->stack[sp++] = t_;                                                                   \
        }                                                                                          \
    } while (0)
    while (sp > 0) {
        uint16_t at = s->stack[--sp];
        const inst *in = &s->prog[at];
        s->work++;
        switch (in->op) {
        case OP_JMP: PUSH(in->x); break;
        case OP_SPLIT:
            PUSH(in->y);
            PUSH(in->x);
            break;
        case OP_BOL:
            if (at_begin) PUSH((uint16_t)(at + 1));
            break;
        case OP_EOL:
            if (at_end) PUSH((uint16_t)(at + 1));
            break;
        default: list[n++] = at;
        }
    }
#undef PUSH
    return n;
}

static void next_gen(sim *s, size_t states)
{
    if (++s->gen == 0) { /* wrapped after 2^32 bytes: start the marks afresh */
        memset(s->mark, 0, states * sizeof *s->mark);
        s->gen = 1;
    }
}

bool mxp__re_full_match(const mxp__re *re, const char *str, void *scratch)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t plen = re->prefix_len;
    mxp__re_match_work += plen;
    if (plen && strncmp(str, re->prefix, plen) != 0) return false;
    scratch_hdr *h = scratch;
    size_t states = h->states;
    sim sm = {re->prog, (uint32_t *)(h + 1), h->gen, NULL, 0};
    uint16_t *cur = (uint16_t *)(sm.mark + states), *nxt = cur + states;
    sm.stack = nxt + states;

    /* Matching resumes after the literal prefix (prog[0..plen) are its bytes). */
    next_gen(&sm, states);
    size_t ncur = closure(&sm, cur, 0, (uint16_t)plen, plen == 0, s[plen] == '\0');
    bool matched = false;
    for (size_t i = plen;; i++) {
        unsigned c = s[i];
        if (c == '\0') {
            for (size_t j = 0; j < ncur && !matched; j++) matched = re->prog[cur[j]].op == OP_MATCH;
            sm.work += ncur;
            break;
        }
        if (ncur == 0) break;
        next_gen(&sm, states);
        bool end_next = s[i + 1] == '\0';
        size_t nn = 0;
        for (size_t j = 0; j < ncur; j++) {
            const inst *in = &re->prog[cur[j]];
            bool ok;
            sm.work++;
            switch (in->op) {
            case OP_CHAR: ok = in->c == c; break;
            case OP_ANY: ok = true; break;
            case OP_SET: ok = (re->sets[in->x][c >> 3] >> (c & 7)) & 1; break;
            default: ok = false; /* OP_MATCH before the end */
            }
            if (ok) nn = closure(&sm, nxt, nn, (uint16_t)(cur[j] + 1), false, end_next);
        }
        uint16_t *t = cur;
        cur = nxt;
        nxt = t;
        ncur = nn;
    }
    h->gen = sm.gen;
    mxp__re_match_work += sm.work;
    return matched;
}
