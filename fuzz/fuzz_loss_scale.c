/*
 * fuzz_loss_scale.c - libFuzzer target for mxp_loss_scale_restore (checkpoint lines come from
 * files, so they are untrusted input).
 *
 * Invariants checked on every input:
 *  - restore never crashes, and on failure leaves *out untouched and sets a message;
 *  - a restored state is valid, saves to a line that restores to the same bits;
 *  - adjust keeps a valid state valid, whatever the finite flag.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mixprec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond) abort(); /* a broken invariant: the fuzzer (or the replay test) reports the input */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[512];
    if (size >= sizeof text) size = sizeof text - 1;
    memcpy(text, data, size);
    text[size] = '\0';

    mxp_loss_scale sentinel;
    memset(&sentinel, 0xA5, sizeof sentinel);
    mxp_loss_scale s = sentinel;
    mxp_status st = mxp_loss_scale_restore(text, &s);
    if (st != MXP_OK) {
        check(memcmp(&s, &sentinel, sizeof s) == 0);
        check(mxp_last_error()[0] != '\0');
        return 0;
    }
    check(mxp_loss_scale_is_valid(s));

    char line[MXP_LOSS_SCALE_TEXT_MAX];
    int len = mxp_loss_scale_save(&s, line, sizeof line);
    check(len > 0 && (size_t)len < sizeof line);
    mxp_loss_scale back;
    check(mxp_loss_scale_restore(line, &back) == MXP_OK);
    check(memcmp(&back, &s, sizeof s) == 0);

    mxp_loss_scale a = s;
    for (int i = 0; i < 8; i++) {
        a = mxp_loss_scale_adjust(a, (i % 3) != 0);
        check(mxp_loss_scale_is_valid(a));
    }
    return 0;
}
