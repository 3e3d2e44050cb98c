/*
 * status.c - status names, the per-thread last-error message, and the version calls.
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[1024];

const char *mxp_version(void) { return MXP_VERSION_STRING; }

int mxp_version_number(void) { return MXP_VERSION_NUMBER; }

const char *mxp_status_name(mxp_status s)
{
    static const char *const names[MXP_STATUS_COUNT] = {
        [MXP_OK] = "MXP_OK",           [MXP_EINVAL] = "MXP_EINVAL",
        [MXP_ENOMEM] = "MXP_ENOMEM",   [MXP_EPARSE] = "MXP_EPARSE",
        [MXP_ENOTFOUND] = "MXP_ENOTFOUND", [MXP_EAMBIGUOUS] = "MXP_EAMBIGUOUS",
        [MXP_EEXIST] = "MXP_EEXIST",   [MXP_EIO] = "MXP_EIO",
        [MXP_EFORMAT] = "MXP_EFORMAT", [MXP_EUNSUPPORTED] = "MXP_EUNSUPPORTED",
    };
    _Static_assert(sizeof names / sizeof names[0] == MXP_STATUS_COUNT, "one name per status");
    if ((unsigned)s >= MXP_STATUS_COUNT) return "MXP_E?";
    return names[s];
}

const char *mxp_last_error(void) { return last_error; }

void mxp_clear_error(void) { last_error[0] = '\0'; }

mxp_status mxp__fail(mxp_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}
