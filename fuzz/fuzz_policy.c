/*
 * fuzz_policy.c - libFuzzer target for mxp_policy_parse / mxp_policy_format.
 *
 * The input (NUL-terminated copy) is parsed as a policy. Invariants checked (abort on
 * violation, so libFuzzer and the replay test report it):
 *  - parse fails with MXP_EPARSE and a non-empty message, or succeeds with a valid policy;
 *  - on failure the output is untouched;
 *  - on success format gives the canonical text, which parses back to an equal policy and
 *    formats to the same text (format is a fixed point);
 *  - the first bytes read as a raw mxp_policy: format returns -1 exactly when validate fails.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mixprec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    /* The backend decides `half`: let the last byte pick it. */
    mxp_set_backend(size > 0 ? (mxp_backend)(data[size - 1] % 3) : MXP_BACKEND_CPU);

    const mxp_policy sentinel = {MXP_INT8, MXP_INT8, MXP_INT8, (mxp_quant)77, 5};
    mxp_policy p = sentinel;
    mxp_status s = mxp_policy_parse(text, &p);
    if (s != MXP_OK) {
        if (s != MXP_EPARSE || mxp_last_error()[0] == '\0') abort();
        if (memcmp(&p, &sentinel, sizeof p) != 0) abort();
    } else {
        if (mxp_policy_validate(&p) != MXP_OK) abort();
        char buf[128], buf2[128];
        int n = mxp_policy_format(&p, buf, sizeof buf);
        if (n <= 0 || (size_t)n >= sizeof buf || strlen(buf) != (size_t)n) abort();
        mxp_policy q;
        if (mxp_policy_parse(buf, &q) != MXP_OK || !mxp_policy_equal(&p, &q)) abort();
        if (mxp_policy_format(&q, buf2, sizeof buf2) != n || strcmp(buf, buf2) != 0) abort();
        /* Truncated formats are prefixes of the full text. */
        char small[8];
        if (mxp_policy_format(&p, small, sizeof small) != n || strncmp(small, buf, sizeof small - 1) != 0)
            abort();
    }

    if (size >= sizeof(mxp_policy)) {
        mxp_policy raw;
        memcpy(&raw, data, sizeof raw);
        char buf[128];
        int n = mxp_policy_format(&raw, buf, sizeof buf);
        if ((n < 0) != (mxp_policy_validate(&raw) != MXP_OK)) abort();
        if (n >= 0) {
            mxp_policy q;
            if (mxp_policy_parse(buf, &q) != MXP_OK || !mxp_policy_equal(&raw, &q)) abort();
        }
    }
    mxp_set_backend(MXP_BACKEND_CPU);
    free(text);
    return 0;
}
