/*
 * test_path_regex.c - the policy map's own regex matcher (src/path_regex.c).
 *
 *  - against glibc's regcomp/regexec as an independent reference: thousands of random keys
 *    (built from ERE tokens, and from raw bytes that stress the parser's corners), each matched
 *    against every short path over a small alphabet and random longer ones. When ours accepts
 *    a key, glibc must accept it too and agree on every path (whole-path match = glibc's
 *    leftmost-longest match spans the path); when ours refuses a key glibc accepts, the
 *    message must name one of the documented refusals. One deliberate difference is skipped:
 *    glibc lets '^' match after and '$' before a newline inside the string even without
 *    REG_NEWLINE ("a$\s" matches "a\n"); POSIX (and we) anchor only at the ends
 *    (test_anchors_only_at_the_ends);
 *  - errors in the key's terms ("trailing backslash at offset 1", not "Unmatched ( or \(");
 *  - the cost bound, by counting instead of timing: the issue's adversarial keys (100 000 '(',
 *    "(a|a|...|b)*", "a|a|...", "a?" x N, ".*" x N, nested intervals) are refused naming the
 *    limit, and the largest keys the limits allow compile in O(length + states) work and match
 *    adversarial paths in at most 2 * states * (length + 1) instruction visits, growing
 *    linearly with the path.
 */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mixprec.h"
#include "path_regex.h"
#include "test_util.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) { return (uint32_t)(tu_rand64(&rng) % n); }

/* glibc: 1 match, 0 no match (whole path), -1 key refused. */
static int glibc_full(const regex_t *re, const char *path)
{
    regmatch_t mt[1];
    if (regexec(re, path, 1, mt, 0) != 0) return 0;
    return mt[0].rm_so == 0 && (size_t)mt[0].rm_eo == strlen(path);
}

static const char *const token_atoms[] = {
    "a", "b", "_", ".", "[ab]", "[^a]", "[a-c]", "[[:alpha:]]", "[]a]", "[a-]", "\\.", "\\w", "\\W",
    "\\s", "[[.a.]]", "[[=b=]]", "(", "(", ")", ")", "|", "|", "^", "$", "\\(", "[^[:punct:]]", "[.-]",
    "\xe9", "[\xe9]", "-", "}", "]",
};
static const char *const token_dups[] = {"*", "+", "?", "{0,1}", "{2}", "{1,}", "{,2}", "{0}", "{,}", "{1,3}"};
static const char byte_alphabet[] = "ab.[]^$()|*+?{}\\-:,02=_w";

static void random_key(char *k, size_t cap)
{
    size_t n = 0;
    k[0] = '\0';
    if (rnd(2)) { /* tokens */
        int ntok = 1 + (int)rnd(8);
        for (int t = 0; t < ntok; t++) {
            const char *tok = rnd(4) == 0 ? token_dups[rnd(sizeof token_dups / sizeof *token_dups)]
                                          : token_atoms[rnd(sizeof token_atoms / sizeof *token_atoms)];
            size_t l = strlen(tok);
            if (n + l + 1 > cap) break;
            memcpy(k + n, tok, l + 1);
            n += l;
        }
    } else { /* raw bytes */
        int nb = 1 + (int)rnd(9);
        for (int t = 0; t < nb && n + 1 < cap; t++) k[n++] = byte_alphabet[rnd(sizeof byte_alphabet - 1)];
        k[n] = '\0';
    }
    if (n == 0) memcpy(k, "a", 2);
}

/* Every path over {a, b, _} up to length 4, then random paths over a wider alphabet. */
#define NPATHS (121 + 60)
static char paths[NPATHS][12];

static void make_paths(void)
{
    size_t p = 0;
    const char abc[] = "ab_";
    for (int len = 0; len <= 4; len++) {
        int total = 1;
        for (int i = 0; i < len; i++) total *= 3;
        for (int v = 0; v < total; v++, p++) {
            int x = v;
            for (int i = 0; i < len; i++, x /= 3) paths[p][i] = abc[x % 3];
            paths[p][len] = '\0';
        }
    }
    const char wide[] = "abc_.-( \n\xe9" "A9";
    for (; p < NPATHS; p++) {
        int len = (int)rnd(9);
        for (int i = 0; i < len; i++) paths[p][i] = wide[rnd(sizeof wide - 1)];
        paths[p][len] = '\0';
    }
}

/* The refusals path_regex.c documents for keys glibc would take. */
static bool documented_refusal(const char *msg)
{
    static const char *const why[] = {"repeats a repetition", "has no matching '('", "unsupported escape",
                                      "back-reference", "non-ASCII", "follows an anchor"};
    for (size_t i = 0; i < sizeof why / sizeof *why; i++)
        if (strstr(msg, why[i])) return true;
    return false;
}

static void test_against_glibc(void **state)
{
    (void)state;
    make_paths();
    size_t agreed = 0, both_refused = 0, ours_refused = 0, matches = 0;
    void *scratch = malloc(mxp__re_scratch_bytes(MXP_POLICY_MAP_STATES_MAX));
    assert_non_null(scratch);
    mxp__re_scratch_init(scratch, MXP_POLICY_MAP_STATES_MAX);
    for (int t = 0; t < 3000; t++) {
        char key[64];
        random_key(key, sizeof key);
        regex_t gre;
        int grc = regcomp(&gre, key, REG_EXTENDED);
        mxp__re *re = NULL;
        mxp_status s = mxp__re_compile(key, &re);
        if (s != MXP_OK) {
            assert_int_equal(s, MXP_EPARSE);
            if (grc == 0) {
                ours_refused++;
                if (!documented_refusal(mxp_last_error()))
                    fail_msg("key \"%s\": glibc accepts it, we refuse it for an undocumented reason: %s", key,
                             mxp_last_error());
                regfree(&gre);
            } else {
                both_refused++;
            }
            continue;
        }
        if (grc != 0) fail_msg("key \"%s\": we accept it, glibc refuses it (error %d)", key, grc);
        bool anchors = strpbrk(key, "^$") != NULL;
        for (size_t p = 0; p < NPATHS; p++) {
            if (anchors && strchr(paths[p], '\n')) continue; /* glibc's newline anchors, see above */
            int want = glibc_full(&gre, paths[p]);
            bool got = mxp__re_full_match(re, paths[p], scratch);
            if (got != (want == 1))
                fail_msg("key \"%s\" path \"%s\": glibc says %s, we say %s", key, paths[p],
                         want ? "match" : "no match", got ? "match" : "no match");
            matches += got;
        }
        agreed++;
        regfree(&gre);
        mxp__re_free(re);
    }
    free(scratch);
    printf("keys: %zu agreed on every path (%zu matches), %zu refused by both, %zu refused only by us "
           "(documented)\n",
           agreed, matches, both_refused, ours_refused);
    /* The generator must exercise all three outcomes, and matches must not be rare. */
    assert_true(agreed > 800 && both_refused > 400 && ours_refused > 100 && matches > 2000);
}

/* Hand-picked keys: the dialect's corners, each checked against glibc on chosen paths. */
static void test_corners_against_glibc(void **state)
{
    (void)state;
    static const char *const keys[] = {
        "[]a]*", "[^]a]+", "[a-]", "[-a]", "[--/]+", "[[.-.]-z]", "[[:digit:][:upper:]]+", "[[=a=]b]",
        "a{0}", "a{0,0}b", "(){3}", "(a|)*", "(|a)+", "(a*)*b", "(^a|b$)", "a^", "$a", "^$", "x|^",
        "\\w+\\s\\W\\S", "[\\]+", "a{,3}", "a{2,}", "a{1,1}", "(ab){2,3}", "((a|b){2}){2}", "a.c",
        "[[:alpha:]_][[:alnum:]_]*", "[^\n]", ".", "a|b|c|", "(a|b)(c|d)?", "[.]", "\\^\\$\\|",
        "[a\xe9-]", "}", "]", "a}", "((((a))))", "(a(b(c)))", "[[:space:][:punct:]]",
    };
    static const char *const probes[] = {"", "a", "b", "aa", "ab", "ba", "abab", "ababab", "c", "abc", "-",
                                         "/", "--", "A1", "aA", "\n", " ", "a \n_", "\\", "]", "]a", "}",
                                         "a}", "x", "_a9", "\xe9", "a^", "^", "$", "acc", "ac", "a.c"};
    void *scratch = malloc(mxp__re_scratch_bytes(MXP_POLICY_MAP_STATES_MAX));
    mxp__re_scratch_init(scratch, MXP_POLICY_MAP_STATES_MAX);
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        regex_t gre;
        assert_int_equal(regcomp(&gre, keys[k], REG_EXTENDED), 0);
        mxp__re *re = NULL;
        if (mxp__re_compile(keys[k], &re) != MXP_OK) fail_msg("\"%s\": %s", keys[k], mxp_last_error());
        for (size_t p = 0; p < sizeof probes / sizeof *probes; p++) {
            bool want = glibc_full(&gre, probes[p]) == 1, got = mxp__re_full_match(re, probes[p], scratch);
            if (want != got) fail_msg("key \"%s\" path \"%s\": glibc %d, ours %d", keys[k], probes[p], want, got);
        }
        regfree(&gre);
        mxp__re_free(re);
    }
    free(scratch);
}

/* Every character class, plain and negated, on every one-byte path (1..255) against glibc in the
 * C locale (this program never calls setlocale): the quick tests reached only five classes. */
static void test_classes_against_glibc(void **state)
{
    (void)state;
    static const char *const classes[] = {"alpha", "digit", "alnum", "upper", "lower", "space",
                                          "blank", "punct", "print", "graph", "cntrl", "xdigit"};
    void *scratch = malloc(mxp__re_scratch_bytes(MXP_POLICY_MAP_STATES_MAX));
    assert_non_null(scratch);
    mxp__re_scratch_init(scratch, MXP_POLICY_MAP_STATES_MAX);
    size_t members = 0;
    for (size_t c = 0; c < sizeof classes / sizeof *classes; c++) {
        for (int neg = 0; neg < 2; neg++) {
            char key[32];
            snprintf(key, sizeof key, "[%s[:%s:]]", neg ? "^" : "", classes[c]);
            regex_t gre;
            assert_int_equal(regcomp(&gre, key, REG_EXTENDED), 0);
            mxp__re *re = NULL;
            if (mxp__re_compile(key, &re) != MXP_OK) fail_msg("\"%s\": %s", key, mxp_last_error());
            for (unsigned b = 1; b < 256; b++) {
                const char path[2] = {(char)b, '\0'};
                const bool want = glibc_full(&gre, path) == 1, got = mxp__re_full_match(re, path, scratch);
                if (want != got) fail_msg("key \"%s\" byte 0x%02x: glibc %d, ours %d", key, b, want, got);
                members += got && !neg;
            }
            regfree(&gre);
            mxp__re_free(re);
        }
    }
    /* the classes' sizes in the C locale over bytes 1..255 (cntrl without NUL: 32), summed:
     * 52 + 10 + 62 + 26 + 26 + 6 + 2 + 32 + 95 + 94 + 32 + 22 */
    assert_int_equal(members, 459);
    free(scratch);
}

/* POSIX without REG_NEWLINE: '^' matches only at the start of the path and '$' only at its end,
 * a newline being an ordinary byte (glibc's regexec also anchors at embedded newlines). */
static void test_anchors_only_at_the_ends(void **state)
{
    (void)state;
    static const struct {
        const char *key, *path;
        bool match;
    } cases[] = {
        {"a$\\s", "a\n", false}, {"\\s^b", "\nb", false}, {"$.", "\n", false}, {"a\n^b", "a\nb", false},
        {"^a\nb$", "a\nb", true}, {"(^|x)a", "a", true}, {"(^|x)a", "xa", true}, {"a(b|$)", "a", true},
        {"a(b|$)", "ab", true}, {"a$|b", "b", true}, {"a^b", "ab", false}, {".*\n.*", "a\nb", true},
    };
    void *scratch = malloc(mxp__re_scratch_bytes(64));
    mxp__re_scratch_init(scratch, 64);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mxp__re *re = NULL;
        assert_int_equal(mxp__re_compile(cases[i].key, &re), MXP_OK);
        assert_true(mxp__re_states(re) <= 64);
        if (mxp__re_full_match(re, cases[i].path, scratch) != cases[i].match)
            fail_msg("key \"%s\": want %s", cases[i].key, cases[i].match ? "match" : "no match");
        mxp__re_free(re);
    }
    free(scratch);
}

/* ---- errors in the key's terms ------------------------------------------------------------- */

static void expect_refusal(const char *key, const char *frag)
{
    mxp__re *re = (mxp__re *)&rng; /* sentinel: untouched on failure */
    mxp_status s = mxp__re_compile(key, &re);
    if (s != MXP_EPARSE) fail_msg("\"%s\": %s, want MXP_EPARSE", key, mxp_status_name(s));
    assert_ptr_equal(re, (mxp__re *)&rng);
    const char *msg = mxp_last_error();
    if (!strstr(msg, frag)) fail_msg("\"%s\": message \"%s\" lacks \"%s\"", key, msg, frag);
    char quoted[96];
    snprintf(quoted, sizeof quoted, "'%.60s", key);
    if (!strstr(msg, quoted)) fail_msg("\"%s\": message \"%s\" does not quote the key", key, msg);
}

static void test_error_messages(void **state)
{
    (void)state;
    expect_refusal("a\\", "trailing backslash at offset 1");
    expect_refusal("dense_(", "unbalanced parenthesis: '(' at offset 6 is never closed");
    expect_refusal("(a(b)", "'(' at offset 0 is never closed");
    expect_refusal("a)b", "')' at offset 1 has no matching '('");
    expect_refusal("(a))", "')' at offset 3 has no matching '('");
    expect_refusal("x[ab", "'[' at offset 1 has no closing ']'");
    expect_refusal("[]", "'[' at offset 0 has no closing ']'");
    expect_refusal("[[:alpha:]", "'[' at offset 0 has no closing ']'");
    expect_refusal("[[:alpha]]", "unterminated '[:' at offset 1");
    expect_refusal("[z-a]", "invalid range 'z-a' at offset 1");
    expect_refusal("[a-c-e]", "'-' at offset 4");
    expect_refusal("[[:alfa:]]", "unknown character class '[:alfa:]' at offset 1");
    expect_refusal("[[:digit:]-z]", "range at offset 1 starts with a character");
    expect_refusal("[a-[:digit:]]", "range at offset 1 ends with a character");
    expect_refusal("[a-[=b=]]", "range at offset 1 ends with a character or equivalence class");
    expect_refusal("[[.ab.]]", "only single characters");
    expect_refusal("*a", "'*' at offset 0 starts the key: nothing to repeat");
    expect_refusal("a|+b", "'+' at offset 2 starts an alternative");
    expect_refusal("(?a)", "'?' at offset 1 starts a group");
    expect_refusal("^*a", "'*' at offset 1 follows an anchor");
    expect_refusal("a$+", "'+' at offset 2 follows an anchor");
    expect_refusal("a**", "'*' at offset 2 repeats a repetition");
    expect_refusal("a+{2}", "'{' at offset 2 repeats a repetition");
    expect_refusal("T+++", "repeats a repetition");
    expect_refusal("a{2,1}", "interval '{2,1}' at offset 1: the minimum is above the maximum");
    expect_refusal("a{x}", "malformed interval at offset 1");
    expect_refusal("a{", "malformed interval at offset 1");
    expect_refusal("a{}", "malformed interval at offset 1");
    expect_refusal("a{1", "malformed interval at offset 1");
    expect_refusal("x{256}", "interval '{256}' at offset 1 has a bound above MXP_POLICY_MAP_REPEAT_MAX (255)");
    /* the bounds are read up to 10^6: a longer number is quoted as written, not as read */
    expect_refusal("a{99999999999999999999}", "interval '{99999999999999999999}' at offset 1");
    expect_refusal("a{1,99999999999999999999999999999999999999999999999999999999}",
                   "interval '{1,99999999999999999999999999999999999999999...}' at offset 1");
    expect_refusal("a{0,300}", "MXP_POLICY_MAP_REPEAT_MAX");
    expect_refusal("(a)\\1", "back-reference '\\1' at offset 3");
    expect_refusal("\\d+", "unsupported escape '\\d' at offset 0");
    expect_refusal("a\\n", "unsupported escape '\\n'");
    /* glibc reads these as anchors (found by fuzz_policy_map: "\\`.*" matched "x" as "^.*"). */
    expect_refusal("\\`.*", "unsupported escape '\\`' at offset 0");
    expect_refusal("a\\'", "unsupported escape '\\''");
    expect_refusal("\\<a\\>", "unsupported escape '\\<'");
    expect_refusal("[\xe9-\xff]", "non-ASCII endpoint");
    expect_refusal("((a{1,100}){1,100}){1,10}", "MXP_POLICY_MAP_STATES_MAX (4096)");
}

/* ---- the cost bound, counted ------------------------------------------------------------- */

static char *repeat_str(const char *unit, size_t times, const char *head, const char *tail)
{
    size_t ul = strlen(unit), hl = strlen(head), tl = strlen(tail);
    char *s = malloc(hl + ul * times + tl + 1);
    assert_non_null(s);
    memcpy(s, head, hl);
    for (size_t i = 0; i < times; i++) memcpy(s + hl + i * ul, unit, ul);
    memcpy(s + hl + ul * times, tail, tl + 1);
    return s;
}

/* The key must be refused with MXP_EPARSE naming `limit`. Counting: refusing costs O(length). */
static void expect_limit(char *key, const char *limit)
{
    size_t len = strlen(key);
    unsigned long long w0 = mxp__re_compile_work;
    mxp__re *re = NULL;
    mxp_status s = mxp__re_compile(key, &re);
    unsigned long long work = mxp__re_compile_work - w0;
    if (s != MXP_EPARSE) fail_msg("%zu-byte key \"%.40s...\": %s, want MXP_EPARSE", len, key, mxp_status_name(s));
    if (!strstr(mxp_last_error(), limit)) fail_msg("\"%s\" lacks \"%s\"", mxp_last_error(), limit);
    if (work > 8 * (unsigned long long)len + 64) fail_msg("refusing a %zu-byte key took %llu steps", len, work);
    free(key);
}

/* The key must be accepted; compile work O(length + states); matching each adversarial path
 * visits at most 2 * states * (length + 1) instructions, and doubling the path at most doubles
 * the work (plus one position). */
static void expect_bounded(char *key)
{
    size_t len = strlen(key);
    unsigned long long w0 = mxp__re_compile_work;
    mxp__re *re = NULL;
    if (mxp__re_compile(key, &re) != MXP_OK) fail_msg("\"%.60s...\": %s", key, mxp_last_error());
    unsigned long long cwork = mxp__re_compile_work - w0;
    size_t states = mxp__re_states(re);
    assert_true(states <= MXP_POLICY_MAP_STATES_MAX);
    if (cwork > 6 * ((unsigned long long)len + states) + 64)
        fail_msg("compiling \"%.40s...\" (%zu bytes, %zu states) took %llu steps", key, len, states, cwork);
    void *scratch = malloc(mxp__re_scratch_bytes(states));
    mxp__re_scratch_init(scratch, states);
    static const char *const units[] = {"a", "ab", "("};
    for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
        unsigned long long prev = 0;
        for (size_t n = 200; n <= 800; n *= 2) {
            for (int tail = 0; tail < 2; tail++) {
                char *path = repeat_str(units[u], n, "", tail ? "b!" : "");
                size_t plen = strlen(path);
                unsigned long long m0 = mxp__re_match_work;
                (void)mxp__re_full_match(re, path, scratch);
                unsigned long long work = mxp__re_match_work - m0;
                if (work > 2ull * states * (plen + 1))
                    fail_msg("\"%.40s...\" (%zu states) on a %zu-byte path: %llu visits > 2 * states * (len + 1)",
                             key, states, plen, work);
                if (tail == 0 && prev > 0 && work > 2 * prev + 2ull * states * (strlen(units[u]) + 1))
                    fail_msg("\"%.40s...\": work %llu on %zu bytes after %llu on half as many", key, work, plen, prev);
                if (tail == 0) prev = work;
                free(path);
            }
        }
    }
    free(scratch);
    mxp__re_free(re);
    free(key);
}

static void test_adversarial_keys_counted(void **state)
{
    (void)state;
    /* The issue's keys, at their size: refused before any work proportional to more than their
     * length. */
    expect_limit(repeat_str("(", 100000, "", ""), "MXP_POLICY_MAP_KEY_MAX (1024)");
    expect_limit(repeat_str("a|", 100000, "(", "b)*"), "MXP_POLICY_MAP_KEY_MAX");
    expect_limit(repeat_str("a|", 500000, "", "a"), "MXP_POLICY_MAP_KEY_MAX");
    expect_limit(repeat_str("a?", 500000, "", ""), "MXP_POLICY_MAP_KEY_MAX");
    expect_limit(repeat_str(".*", 10000, "", ""), "MXP_POLICY_MAP_KEY_MAX");
    /* The same shapes within the length limit: refused by the limit they hit first... */
    expect_limit(repeat_str("(", 1000, "", ""), "MXP_POLICY_MAP_DEPTH_MAX (32)");
    expect_limit(repeat_str("(", 33, "", "a"), "MXP_POLICY_MAP_DEPTH_MAX");
    expect_limit(repeat_str("a|", 300, "(", "b)*"), "MXP_POLICY_MAP_OPS_MAX (256)");
    expect_limit(repeat_str("a|", 400, "", "a"), "MXP_POLICY_MAP_OPS_MAX");
    expect_limit(repeat_str("a?", 257, "", ""), "MXP_POLICY_MAP_OPS_MAX");
    expect_limit(repeat_str(".*", 257, "", ""), "MXP_POLICY_MAP_OPS_MAX");
    expect_limit(repeat_str("(a{255})", 2, "(", "){255}"), "MXP_POLICY_MAP_STATES_MAX");
    expect_limit(repeat_str("(.*){255}", 20, "", ""), "MXP_POLICY_MAP_STATES_MAX");
    expect_limit(repeat_str("()?", 257, "", ""), "MXP_POLICY_MAP_OPS_MAX");
    /* ...and the largest of each shape that the limits allow: accepted, counted bounds hold. */
    char *open32 = repeat_str("(", 32, "", "a");
    expect_bounded(repeat_str(")", 32, open32, ""));              /* 32 levels: the deepest allowed */
    free(open32);
    expect_bounded(repeat_str("a|", 254, "(", "b)*"));          /* 255 alternatives + '*' = 256 ops */
    expect_bounded(repeat_str("a|", 256, "", "a"));              /* "a|a|...|a" */
    expect_bounded(repeat_str("a?", 256, "", ""));               /* a?a?...a? */
    expect_bounded(repeat_str(".*", 256, "", ""));               /* .*.*...* */
    expect_bounded(repeat_str("(a|ab)*", 100, "", "b"));         /* overlapping alternatives */
    expect_bounded(repeat_str("((.*){15}){85}", 1, "", ""));     /* intervals: 3826 states */
    expect_bounded(repeat_str("(a|b)?", 120, "", "x{255}"));
    expect_bounded(repeat_str("((a*)*)*", 40, "", ""));          /* nested stars, empty loops */
    expect_bounded(repeat_str("(){255}", 40, "", "a"));          /* repeats of nothing: emit nothing */
    expect_bounded(repeat_str("[[:alnum:]_]", 85, "", ""));     /* long bracket runs (1 KiB-ish) */
    expect_bounded(repeat_str("x", 1024, "", ""));               /* the longest key */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_glibc),
        cmocka_unit_test(test_corners_against_glibc),
        cmocka_unit_test(test_classes_against_glibc),
        cmocka_unit_test(test_anchors_only_at_the_ends),
        cmocka_unit_test(test_error_messages),
        cmocka_unit_test(test_adversarial_keys_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
