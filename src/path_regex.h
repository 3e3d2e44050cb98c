/*
 * path_regex.h - the policy map's regex matcher (internal, not installed).
 *
 * POSIX extended regular expressions, whole-string match only (Keras' re.fullmatch), byte-wise
 * as in the C locale whatever the program's locale. A key is parsed within the limits of
 * policy_map.h (MXP_POLICY_MAP_KEY_MAX, _DEPTH_MAX, _OPS_MAX, _REPEAT_MAX, _STATES_MAX) and
 * compiled to a Thompson NFA of at most MXP_POLICY_MAP_STATES_MAX states; matching advances every
 * live state in lock step, so one match visits at most 2 * states * (strlen(s) + 1) instructions
 * and allocates nothing (the caller lends the scratch memory). See path_regex.c.
 */
#ifndef MIXPREC_PATH_REGEX_H
#define MIXPREC_PATH_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef struct mxp__re mxp__re;

/*
 * Compile key (NUL-terminated) into *out. On failure *out is untouched and the status is
 * MXP_EPARSE (the message is "invalid regex key '<key>': <what, in the key's terms, at offset N>"
 * or names the limit exceeded) or MXP_ENOMEM.
 */
mxp_status mxp__re_compile(const char *key, mxp__re **out);

void mxp__re_free(mxp__re *re);

/* MXP_OK when a key of len bytes is within MXP_POLICY_MAP_KEY_MAX, else MXP_EPARSE naming it. */
mxp_status mxp__re_check_length(const char *key, size_t len);

/* True when key has none of the ERE special characters .[\()*+?{|^$: as a regex it matches
 * exactly itself, so the map need not compile it (an exact-key lookup finds it first). */
bool mxp__re_is_literal(const char *key);

/* Number of NFA states (instructions, the final match state included). */
size_t mxp__re_states(const mxp__re *re);

/* Length of the literal text every match starts with (a cheap pre-check before matching). */
size_t mxp__re_prefix_len(const mxp__re *re);

/* Scratch memory for matching any regex of at most `states` states, and how to start using it:
 * scratch is any suitably aligned block of mxp__re_scratch_bytes(states) bytes, set up once
 * with mxp__re_scratch_init, then passed to any number of matches (not concurrently). */
size_t mxp__re_scratch_bytes(size_t states);
void mxp__re_scratch_init(void *scratch, size_t states);

/* True when re matches the whole of s. */
bool mxp__re_full_match(const mxp__re *re, const char *s, void *scratch);

/*
 * Work counters of the calling thread, for tests that bound the cost by counting instead of
 * timing: mxp__re_compile_work grows by one per key byte examined, AST node built and
 * instruction emitted; mxp__re_match_work by one per NFA instruction visited (each state popped
 * from the closure stack, each live state tested against a byte).
 */
extern _Thread_local unsigned long long mxp__re_compile_work;
extern _Thread_local unsigned long long mxp__re_match_work;

#endif /* MIXPREC_PATH_REGEX_H */
