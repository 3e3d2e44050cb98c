/*
 * mixprec/status.h - status codes and the per-thread last-error message.
 *
 * Every fallible mixprec function returns an mxp_status. On failure it also records a
 * human-readable message, headed by the name of the function called, that names the offending
 * input and what was expected ("mxp_tree_find: name is NULL": a NULL argument is named alone);
 * read it with mxp_last_error() from the same thread. No mixprec function prints, aborts or
 * exits.
 */
#ifndef MIXPREC_STATUS_H
#define MIXPREC_STATUS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Status codes. The values are pinned: they never change between versions. */
typedef enum mxp_status {
    MXP_OK = 0,        /**< success */
    MXP_EINVAL,        /**< invalid argument: NULL where an object is required, bad enum, bad size */
    MXP_ENOMEM,        /**< allocation failed */
    MXP_EPARSE,        /**< text could not be parsed (policy, dtype, config, state line) */
    MXP_ENOTFOUND,     /**< a named item does not exist */
    MXP_EAMBIGUOUS,    /**< more than one candidate matched (dtype "fp8", overlapping regex keys) */
    MXP_EEXIST,        /**< the item already exists (repeated key) */
    MXP_EIO,           /**< a read or write failed */
    MXP_EFORMAT,       /**< a file or buffer is malformed */
    MXP_EUNSUPPORTED   /**< valid request this build or CPU cannot serve */
} mxp_status;

/** Number of status codes (one past the last). */
#define MXP_STATUS_COUNT 10

/**
 * The enumerator's name as a string: mxp_status_name(MXP_EPARSE) is "MXP_EPARSE".
 * An out-of-range value gives "MXP_E?" (never NULL).
 * Thread-safety: safe. The string is static.
 */
MXP_API const char *mxp_status_name(mxp_status s);

/**
 * Detail of the last failure reported by a mixprec call on the calling thread, e.g.
 * "mxp_policy_parse: unknown dtype 'f13' in policy 'p=f13' (expected one of: ...)". Returns ""
 * when this thread has seen no failure yet. Successful calls do not clear it.
 * Thread-safety: the message is thread-local; one thread's failure never changes another's.
 * The pointer stays valid until the next failing mixprec call on this thread; do not free it.
 */
MXP_API const char *mxp_last_error(void);

/**
 * Forget the calling thread's last-error message: mxp_last_error() returns "" until the next
 * failure on this thread. Use it before a call whose only failure report is a message (the
 * bool passes of loss_scale.h, which answer false both for "not finite" and for a bad call):
 *     mxp_clear_error();
 *     if (!mxp_all_finite(g, dt, n) && *mxp_last_error()) ... a bad call, not an overflow
 * (or call the status-returning variants, e.g. mxp_all_finite_s, which keep the two apart).
 * Thread-safety: safe; touches only the calling thread's message. Never fails.
 */
MXP_API void mxp_clear_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_STATUS_H */
