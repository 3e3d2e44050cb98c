/*
 * status.c - status names, the per-thread last-error message, and the version calls.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

mxp_status(mxp__fail)(mxp_status s, const char *fmt, ...) /* (): not internal.h's analyzer macro */
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

const char *mxp__error_body(void)
{
    size_t k = 0;
    if (strncmp(last_error, "mxp_", 4) == 0) {
        k = 4;
        while (last_error[k] == '_' || (last_error[k] >= 'a' && last_error[k] <= 'z') ||
               (last_error[k] >= '0' && last_error[k] <= '9'))
            k++;
        k = last_error[k] == ':' && last_error[k + 1] == ' ' ? k + 2 : 0;
    }
    return last_error + k;
}

mxp_status mxp__in(const char *fn, mxp_status s)
{
    if (s == MXP_OK) return s;
    const size_t n = strlen(fn);
    if (strncmp(last_error, fn, n) == 0 && last_error[n] == ':') return s;
    /* another function's head ("mxp_policy_map_parse: " inside mxp_policy_map_load) is replaced */
    const size_t skip = (size_t)(mxp__error_body() - last_error);
    /* the message moves right by the new head (its end is cut at the buffer's size) */
    const size_t len = strlen(last_error + skip), head = n + 2 < sizeof last_error ? n + 2 : sizeof last_error - 1;
    const size_t keep = len < sizeof last_error - 1 - head ? len : sizeof last_error - 1 - head;
    memmove(last_error + head, last_error + skip, keep);
    last_error[head + keep] = '\0';
    memcpy(last_error, fn, head - 2);
    last_error[head - 2] = ':';
    last_error[head - 1] = ' ';
    return s;
}
