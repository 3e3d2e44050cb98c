/*
 * fuzz_fp8_scaler.c - libFuzzer target for mxp_fp8_scaler_restore (float8 delayed-scaling states
 * come back from checkpoint files, so their text is untrusted input).
 *
 * Invariants checked on every input:
 *  - restore never crashes and never allocates more than the text can describe (a history
 *    entry takes at least two characters); on failure *out is untouched and a message is set;
 *  - a restored state saves to a text that restores to a state saving to the same text;
 *  - the state stays valid through quantize / set_amax / update steps: 2^-127 <= scale <=
 *    FLT_MAX (update's range), scale_inv = 1 / scale and finite, history entries finite and >= 0.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mixprec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond) abort(); /* a broken invariant: the fuzzer (or the replay test) reports the input */
}

static void check_valid(const mxp_fp8_scaler *s)
{
    const float sc = mxp_fp8_scaler_scale(s), inv = mxp_fp8_scaler_scale_inv(s);
    check(sc >= 0x1p-127f && sc <= FLT_MAX);
    check(inv == 1.0f / sc && isfinite(inv));
    const size_t len = mxp_fp8_scaler_history(s, NULL, 0);
    float *h = malloc(len * sizeof *h);
    check(h != NULL);
    check(mxp_fp8_scaler_history(s, h, len) == len);
    for (size_t i = 0; i < len; i++) check(h[i] >= 0.0f && h[i] <= FLT_MAX);
    free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { MAX = 8192 };
    static char text[MAX + 1];
    if (size > MAX) size = MAX;
    memcpy(text, data, size);
    text[size] = '\0';

    mxp_fp8_scaler *const sentinel = (mxp_fp8_scaler *)(uintptr_t)0x5EED;
    mxp_fp8_scaler *s = sentinel;
    if (mxp_fp8_scaler_restore(text, &s) != MXP_OK) {
        check(s == sentinel);
        check(mxp_last_error()[0] != '\0');
        return 0;
    }
    check(s != sentinel && s != NULL);
    check(mxp_fp8_scaler_history(s, NULL, 0) <= size / 2 + 1);
    check_valid(s);

    const int len = mxp_fp8_scaler_save(s, NULL, 0);
    check(len > 0);
    char *a = malloc((size_t)len + 1), *b = malloc((size_t)len + 1);
    check(a && b);
    check(mxp_fp8_scaler_save(s, a, (size_t)len + 1) == len);
    mxp_fp8_scaler *back = NULL;
    check(mxp_fp8_scaler_restore(a, &back) == MXP_OK);
    check(mxp_fp8_scaler_save(back, b, (size_t)len + 1) == len);
    check(memcmp(a, b, (size_t)len) == 0);
    free(a);
    free(b);

    /* a few training steps, driven by the input's bytes */
    float x[16];
    uint8_t q[16];
    for (size_t i = 0; i < 16; i++) x[i] = (float)(int)(i < size ? data[i] : i) - 100.0f;
    for (int step = 0; step < 4; step++) {
        const uint8_t c = size ? data[(size_t)step % size] : 0;
        if (c % 3 == 0) check(mxp_fp8_quantize_delayed(q, x, MXP_FLOAT32, 16, s) == MXP_OK);
        if (c % 5 == 0) check(mxp_fp8_scaler_set_amax(s, c % 2 ? INFINITY : (float)c) == MXP_OK);
        check(mxp_fp8_scaler_update(s) == MXP_OK);
        check_valid(s);
        check(mxp_fp8_scaler_amax(s) == 0.0f);
    }
    mxp_fp8_scaler_free(back);
    mxp_fp8_scaler_free(s);
    return 0;
}
