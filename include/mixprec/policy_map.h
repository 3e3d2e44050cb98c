/*
 * mixprec/policy_map.h - per-layer policies (Keras DTypePolicyMap) and applying a policy to a
 * model's layers (Axon's MixedPrecision.apply_policy with only: / except:).
 *
 * A policy map holds keys, each with a policy, in insertion order, and a default policy.
 * mxp_policy_map_get(path):
 *   1. a key equal to the path wins;
 *   2. otherwise every key is a POSIX extended regular expression that must match the WHOLE
 *      path (Keras' re.fullmatch: the key "attention/query" does not catch
 *      "attention/query_norm"); exactly one matching key gives its policy; more than one is
 *      MXP_EAMBIGUOUS, with every matching key in the message;
 *   3. no key matches: the map's default (the global mxp_default_policy() at lookup time when
 *      the map was created with NULL).
 * Keys (docs/DESIGN.md §6): POSIX extended regular expressions matched against the whole path,
 * byte by byte as in the C locale (whatever the program's locale), by the library's own matcher
 * (a Thompson NFA, not the C library's regcomp):
 *   ordinary bytes, '.', bracket expressions ([a-z_], [^0-9], [[:digit:]], [].-], single-
 *   character [.c.] and [=c=]), groups, '|' (empty alternatives allowed), '*' '+' '?' '{m}'
 *   '{m,}' '{m,n}' '{,n}' after an atom, '^' and '$' anchors, '\' before punctuation for a
 *   literal ("\." "\(" "\\"), and \w \W \s \S as in glibc.
 * Refused with MXP_EPARSE, the message quoting the key and saying what is wrong where (offset
 * in bytes): back-references (\1..\9) and other letter or digit escapes ("\d": write [0-9]),
 * a repetition with nothing before it ("*a", "(+a)", "^*") or right after another ("a**",
 * "a+{2}": undefined in POSIX), an unmatched '(' or ')', an unterminated '[', a reversed or
 * non-ASCII range, a trailing backslash, and keys beyond these limits:
 *   MXP_POLICY_MAP_KEY_MAX     bytes in a key (every key, literal or not);
 *   MXP_POLICY_MAP_DEPTH_MAX   parentheses nested inside each other;
 *   MXP_POLICY_MAP_OPS_MAX     operators: each '|', '*', '+', '?' and interval counts one;
 *   MXP_POLICY_MAP_REPEAT_MAX  largest m or n in an interval {m,n};
 *   MXP_POLICY_MAP_STATES_MAX  NFA states the key compiles to (intervals copy their operand:
 *                              "(ab){3}" is three copies, and nested intervals multiply).
 * Costs: a key compiles in O(length + states) (microseconds at the limits); a lookup that misses
 * the cache visits at most 2 * states * (strlen(path) + 1) NFA states per regex key: linear in
 * the path. A key without any of the characters .[\()*+?{|^$ matches only itself: it is stored
 * for exact lookup only and costs nothing on other lookups. set, load and parse are O(1)
 * amortised per key (hash index; no scan for duplicates); remove is O(number of keys).
 * Lookups are cached (path -> which key matched), so repeated paths cost a hash probe; the cache
 * is emptied on set/remove and never goes stale when the global default changes (it stores
 * which key matched, not the policy).
 *
 * Text config (mxp_policy_map_format / mxp_policy_map_parse), one entry per line:
 *     # comment (a `#` outside quotes starts a comment, to the end of the line)
 *     @default = p=float32,c=float32,o=float32     (optional: the map's own default)
 *     dense_0 = p=float32,c=float16,o=float32
 *     block_[0-9]+/attention/.* = mixed_bfloat16
 *     "key with = or # or \"quotes\"" = bf16        (quoted key: \" and \\ escapes)
 * Blank lines are ignored; blanks around keys and policies are trimmed. An unquoted key starting
 * with `@` is a directive (only @default exists); format quotes keys that would otherwise be
 * misread. The policy is anything mxp_policy_parse accepts; format writes canonical policies.
 *
 * Thread-safety: get/match/count/entry/default/format/equal/save may run concurrently with each
 * other on one map (the lookup cache is guarded by a mutex inside the map). set/remove/apply/
 * set_cache_capacity/free need exclusive access: no other call on the same map at the same time.
 * Distinct maps are independent; new/parse/load create a map no other thread can see yet.
 */
#ifndef MIXPREC_POLICY_MAP_H
#define MIXPREC_POLICY_MAP_H

#include "policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Longest key, in bytes (longer keys: MXP_EPARSE). */
#define MXP_POLICY_MAP_KEY_MAX 1024
/** Deepest nesting of parentheses in a key. */
#define MXP_POLICY_MAP_DEPTH_MAX 32
/** Most operators in a key: each '|', '*', '+', '?' and {m,n} interval counts one. */
#define MXP_POLICY_MAP_OPS_MAX 256
/** Largest bound in an interval {m,n} (POSIX's minimum RE_DUP_MAX). */
#define MXP_POLICY_MAP_REPEAT_MAX 255
/** Most NFA states a key may compile to (bounds the cost of matching it: see above). */
#define MXP_POLICY_MAP_STATES_MAX 4096
/** Largest config mxp_policy_map_load reads and mxp_policy_map_save writes, in bytes (256 MiB). */
#define MXP_POLICY_MAP_FILE_MAX ((size_t)256 << 20)

/** Opaque map from layer paths / path regexes to policies. */
typedef struct mxp_policy_map mxp_policy_map;

/**
 * A new, empty map. default_policy is copied; NULL means "the global default policy at lookup
 * time" (mxp_default_policy()). Free it with mxp_policy_map_free.
 * Returns NULL when out of memory or when default_policy is not a valid policy (mxp_last_error
 * says which).
 * Thread-safety: safe (the new map is the caller's; default_policy is only read).
 */
MXP_API mxp_policy_map *mxp_policy_map_new(const mxp_policy *default_policy);

/** Free the map and everything in it (key pointers from match/entry become invalid). NULL is
 *  accepted. Thread-safety: needs exclusive access to m (no other call on m running). */
MXP_API void mxp_policy_map_free(mxp_policy_map *m);

/**
 * Add key -> *p (both copied). The key is compared literally as an exact path and, when it has
 * an ERE special character, compiled now, once, as a whole-path POSIX extended regex (dialect
 * and limits above). O(1) amortised (plus the key's length).
 * @retval MXP_OK      added at the end of the insertion order
 * @retval MXP_EINVAL  NULL map, key or p; empty key; p not a valid policy
 * @retval MXP_EEXIST  the key is already in the map (the message quotes it); use
 *                     mxp_policy_map_remove first to replace it
 * @retval MXP_EPARSE  the key is not a valid ERE, is outside the dialect above, or exceeds a
 *                     limit; the message quotes the key and names the problem and its byte
 *                     offset ("trailing backslash at offset 1", "unbalanced parenthesis: '('
 *                     at offset 0 is never closed") or the limit (MXP_POLICY_MAP_OPS_MAX ...)
 * @retval MXP_ENOMEM  allocation failed
 * On failure the map is unchanged. Thread-safety: needs exclusive access to m.
 */
MXP_API mxp_status mxp_policy_map_set(mxp_policy_map *m, const char *key, const mxp_policy *p);

/**
 * The policy for `path` (lookup rules above) into *out.
 * @retval MXP_OK          *out set (a key's policy or the default)
 * @retval MXP_EINVAL      NULL map, path or out
 * @retval MXP_EAMBIGUOUS  no exact key, and more than one key matches the whole path; the
 *                         message quotes the path and every matching key in insertion order
 * @retval MXP_ENOMEM      out of memory for the matcher's scratch (keys over ~400 states)
 * Cost: see above (a cache hit is a hash probe; a miss is linear in the path).
 * *out is untouched on failure. Thread-safety: safe concurrently with other readers of m.
 */
MXP_API mxp_status mxp_policy_map_get(const mxp_policy_map *m, const char *path, mxp_policy *out);

/**
 * mxp_policy_map_get that also says which key decided: *key (if key is non-NULL) is set to the
 * map's copy of the matching key, or to NULL when the default applied. The key pointer stays
 * valid until that entry is removed or the map is freed.
 * Errors as mxp_policy_map_get (then *out and *key are untouched).
 * Thread-safety: safe concurrently with other readers of m.
 */
MXP_API mxp_status mxp_policy_map_match(const mxp_policy_map *m, const char *path, mxp_policy *out,
                                        const char **key);

/**
 * Remove the entry whose key is exactly `key` (the order of the others is kept). O(number of
 * keys).
 * @retval MXP_OK        removed
 * @retval MXP_EINVAL    NULL map or key
 * @retval MXP_ENOTFOUND no such key (the message quotes it)
 * Thread-safety: needs exclusive access to m.
 */
MXP_API mxp_status mxp_policy_map_remove(mxp_policy_map *m, const char *key);

/** Number of entries (0 for NULL). Thread-safety: safe with other readers. */
MXP_API size_t mxp_policy_map_count(const mxp_policy_map *m);

/**
 * The i-th entry in insertion order: *key (the map's copy, valid until that entry is removed or
 * the map freed) and *p; either output pointer may be NULL.
 * @retval MXP_OK        set
 * @retval MXP_EINVAL    NULL map
 * @retval MXP_ENOTFOUND i >= count; outputs untouched
 * Thread-safety: safe with other readers.
 */
MXP_API mxp_status mxp_policy_map_entry(const mxp_policy_map *m, size_t i, const char **key,
                                        mxp_policy *p);

/**
 * The map's own default. Returns true and sets *out (if non-NULL) when the map was created with
 * a policy (or parsed from a config with a default directive line); returns false and leaves *out alone
 * when it follows the global default (or m is NULL). Thread-safety: safe with other readers.
 */
MXP_API bool mxp_policy_map_default(const mxp_policy_map *m, mxp_policy *out);

/**
 * True when a and b would answer every lookup the same way: the same defaults (both global, or
 * equal policies) and the same set of keys with equal policies (insertion order ignored).
 * False when either is NULL. Thread-safety: safe with other readers.
 */
MXP_API bool mxp_policy_map_equal(const mxp_policy_map *a, const mxp_policy_map *b);

/**
 * Cache size: at most `capacity` distinct paths are remembered (default 4096, at most 2^20:
 * larger values are clamped; when full, the cache is emptied and refilled). 0 disables caching (every get matches every regex; useful to
 * measure or to save memory). Existing cache contents are dropped.
 * @retval MXP_OK / MXP_EINVAL (NULL map)
 * Thread-safety: needs exclusive access to m.
 */
MXP_API mxp_status mxp_policy_map_set_cache_capacity(mxp_policy_map *m, size_t capacity);

/**
 * Write the map as a text config (format above): the default directive line when the map has its own
 * default, then one `key = <canonical policy>` line per entry in insertion order, each ending in
 * a newline. snprintf semantics: at most cap bytes including the NUL (buf may be NULL when cap is 0);
 * *len (if non-NULL) receives the full length excluding the NUL, so *len >= cap means truncated.
 * mxp_policy_map_parse of the full text gives an equal map (same entries, same order).
 * @retval MXP_OK      written (possibly truncated, see above)
 * @retval MXP_EINVAL  NULL map, or NULL buf with cap > 0; buf untouched
 * Thread-safety: safe with other readers.
 */
MXP_API mxp_status mxp_policy_map_format(const mxp_policy_map *m, char *buf, size_t cap, size_t *len);

/**
 * Parse a text config (format above) into a new map.
 * @retval MXP_OK      *out is a new map (free with mxp_policy_map_free)
 * @retval MXP_EINVAL  NULL text or out
 * @retval MXP_EPARSE  a malformed line; the message starts with "mxp_policy_map_parse: line N: "
 *                     and names the token: no '=', empty key, bad quoting, unknown directive, a
 *                     repeated default directive, a policy mxp_policy_parse rejects (its message
 *                     follows, without its "mxp_policy_parse: " head), a key mxp_policy_map_set
 *                     refuses (likewise)
 * @retval MXP_EEXIST  "mxp_policy_map_parse: line N: " a key given twice
 * @retval MXP_ENOMEM  allocation failed
 * O(1) amortised per line (plus its length): a million-line config parses in seconds.
 * *out is untouched on failure. Thread-safety: safe (reads the backend for `half`).
 */
MXP_API mxp_status mxp_policy_map_parse(const char *text, mxp_policy_map **out);

/**
 * Read a text config from a file (mxp_policy_map_parse of its contents). At most
 * MXP_POLICY_MAP_FILE_MAX bytes are read: a regular file's size is checked before reading;
 * FIFOs, pipes and character devices are read until end of file or the limit (opening a FIFO
 * waits for a writer, as any reader of a FIFO does). The text must not contain a NUL byte.
 * @retval MXP_OK      *out is a new map (free with mxp_policy_map_free)
 * @retval MXP_EINVAL  NULL path or out
 * @retval MXP_EIO     the file cannot be opened or read, or is a directory (the message names
 *                     it and why)
 * @retval MXP_EFORMAT more than MXP_POLICY_MAP_FILE_MAX bytes, or a NUL byte (/dev/zero): the
 *                     message names the file and the limit or the offset
 * Other errors as mxp_policy_map_parse, with "mxp_policy_map_load: line N: " at the start of the
 * message. *out is untouched on failure.
 * Thread-safety: safe (the new map is the caller's).
 */
MXP_API mxp_status mxp_policy_map_load(const char *path, mxp_policy_map **out);

/**
 * Write mxp_policy_map_format's text to a file (created or replaced): into a new file beside
 * it ("PATH.tmp-PID-N"), renamed over PATH once complete, so on any error PATH is left as it was
 * and no temporary file remains (a symlink at PATH is replaced, not written through).
 * @retval MXP_OK / MXP_EINVAL (NULL arguments) / MXP_ENOMEM / MXP_EIO (cannot write; the
 *         message names the file) / MXP_EFORMAT (the text would exceed MXP_POLICY_MAP_FILE_MAX,
 *         which mxp_policy_map_load refuses; nothing is written)
 * Thread-safety: safe concurrently with other readers of m (writing one file from two threads
 * at once is the caller's race).
 */
MXP_API mxp_status mxp_policy_map_save(const mxp_policy_map *m, const char *path);

/* ---- applying a policy to a model (Axon's apply_policy) ------------------------------------ */

/** A layer of a model: its path (the map key it gets, e.g. "dense_0") and its op name
 *  (e.g. "dense", "batch_norm", "dropout"). */
typedef struct mxp_layer {
    const char *path;
    const char *op;
} mxp_layer;

/** Predicate choosing layers: return true to apply the policy to (path, op). */
typedef bool (*mxp_layer_pred)(const char *path, const char *op, void *user);

/**
 * Which layers to apply a policy to. Zero-initialise for "every layer". Each filter that is set
 * must accept the layer (they combine with AND):
 *  - only   != NULL: the layer's op is one of only[0..n_only)   (n_only == 0 selects nothing);
 *  - except != NULL: the layer's op is none of except[0..n_except);
 *  - pred   != NULL: pred(path, op, user) returns true.
 * Op names compare exactly (case-sensitive).
 */
typedef struct mxp_layer_select {
    const char *const *only;
    size_t n_only;
    const char *const *except;
    size_t n_except;
    mxp_layer_pred pred;
    void *user;
} mxp_layer_select;

/**
 * Axon's apply_policy: for every selected layer, make *p the policy of its exact path in m. An
 * existing entry whose key equals the path is replaced in place (keeping its position); other
 * layers get new entries appended in layer order. Unselected layers are not touched (they keep
 * whatever the map says, e.g. the default). sel may be NULL (every layer).
 * Layer paths become keys, so they must also be valid keys (ordinary paths such as
 * "dense_0" or "block/0/attention" are; a path with an unbalanced '(' or '[', or longer than
 * MXP_POLICY_MAP_KEY_MAX, is not). Like every key, such a key is also a regex for the other
 * paths looked up later: its own path always finds it (an exact key wins), but a path with '.'
 * ("block.0") also catches "blockX0", and is then ambiguous with any other key that matches.
 * Paths made of letters, digits, '_', '-' and '/' (Keras' and Axon's) are plain text either way.
 * O(1) amortised per layer.
 * Everything is validated (and every new key compiled) before the map changes.
 * @retval MXP_OK      applied; *n_applied (if non-NULL) = number of selected layers
 * @retval MXP_EINVAL  NULL map or p, layers NULL with n > 0, a layer with NULL or empty path or
 *                     NULL op, an only/except list NULL entry, or p invalid
 * @retval MXP_EPARSE  a selected path is not a valid key (the message quotes it)
 * @retval MXP_ENOMEM  allocation failed
 * On failure the map is unchanged. Thread-safety: needs exclusive access to m; pred is called
 * on the calling thread, in layer order, before the map changes, at most once per layer (not for
 * layers the only/except lists already rejected).
 */
MXP_API mxp_status mxp_policy_map_apply(mxp_policy_map *m, const mxp_layer *layers, size_t n,
                                        const mxp_policy *p, const mxp_layer_select *sel,
                                        size_t *n_applied);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_POLICY_MAP_H */
