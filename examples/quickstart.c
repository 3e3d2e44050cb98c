/*
 * quickstart.c - convert a few float32 values to every floating format mixprec knows and back.
 *
 * Build against an installed mixprec:  cc quickstart.c $(pkg-config --cflags --libs mixprec)
 * Run:  ./quickstart            all formats
 *       ./quickstart e4m3       one format, any spelling mxp_dtype_parse accepts
 *
 * What it shows:
 *  - mxp_dtype_parse turns user spellings ("fp16", "bf16", "e4m3") into dtypes;
 *  - mxp_convert rounds once to nearest-even; the table prints each result converted back to
 *    float32 (exact: widening never rounds) and its bit pattern;
 *  - mxp_convert_ex with .saturate clamps overflow to the largest finite value instead of
 *    inf / NaN, and with MXP_ROUND_STOCHASTIC rounds up or down at random so that the mean
 *    is preserved;
 *  - every call returns an mxp_status; on failure mxp_last_error() says what was wrong.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mixprec.h"

/* Print the failure and return 1 when s is not MXP_OK. The message starts with the name of the
 * function that failed ("mxp_dtype_parse: unknown dtype 'f13' (expected one of: ...)"). */
static int failed(mxp_status s)
{
    if (s == MXP_OK) return 0;
    fprintf(stderr, "quickstart: %s (%s)\n", mxp_last_error(), mxp_status_name(s));
    return 1;
}

/* The bit pattern of element 0 of a buffer of the given dtype, as hex. */
static void hex_bits(const void *p, mxp_dtype d, char *out, size_t cap)
{
    uint64_t v = 0;
    size_t size = mxp_dtype_size(d);
    memcpy(&v, p, size); /* little-endian hosts: the low bytes of v */
    snprintf(out, cap, "%0*llx", (int)(2 * size), (unsigned long long)v);
}

/* Table cell: the value (11 columns), a blank, the hex bits (at least 4 columns). */
static int cell_width(mxp_dtype d)
{
    int hex = 2 * (int)mxp_dtype_size(d);
    return 12 + (hex < 4 ? 4 : hex);
}

int main(int argc, char **argv)
{
    /* The formats to show, as a user might spell them. */
    const char *spellings[] = {"fp16", "bf16", "e4m3", "e5m2", "f64"};
    mxp_dtype formats[5];
    size_t nformats = 0;
    if (argc > 1) {
        if (failed(mxp_dtype_parse(argv[1], &formats[0]))) return 1;
        if (!mxp_dtype_is_floating(formats[0])) {
            fprintf(stderr, "%s is not a floating dtype\n", mxp_dtype_name(formats[0]));
            return 1;
        }
        nformats = 1;
    } else {
        for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++)
            if (failed(mxp_dtype_parse(spellings[i], &formats[nformats++]))) return 1;
    }

    const float values[] = {0.1f, 65504.0f, 70000.0f, 1e-8f, 448.0f, 464.0f, 465.0f, NAN, -0.0f};
    enum { N = sizeof values / sizeof values[0] };

    printf("mixprec %s, kernels: %s\n\n", mxp_version(), mxp_isa());
    printf("%-10s", "float32");
    for (size_t f = 0; f < nformats; f++) printf("  %-*s", cell_width(formats[f]), mxp_dtype_name(formats[f]));
    printf("\n");

    /* One conversion per format for the whole array, then back to float32 to show the value. */
    unsigned char converted[5][N * 8];
    float back[5][N];
    for (size_t f = 0; f < nformats; f++) {
        if (failed(mxp_convert(converted[f], formats[f], values, MXP_FLOAT32, N))) return 1;
        if (failed(mxp_convert(back[f], MXP_FLOAT32, converted[f], formats[f], N))) return 1;
    }
    for (size_t i = 0; i < N; i++) {
        printf("%-10g", (double)values[i]);
        for (size_t f = 0; f < nformats; f++) {
            char bits[20];
            hex_bits(converted[f] + i * mxp_dtype_size(formats[f]), formats[f], bits, sizeof bits);
            printf("  %-11.6g %-*s", (double)back[f][i], cell_width(formats[f]) - 12, bits);
        }
        printf("\n");
    }

    /* Saturation: overflow becomes the largest finite value instead of inf / NaN. */
    const float big[3] = {70000.0f, 465.0f, INFINITY};
    uint16_t h[3];
    uint8_t e4[3];
    float hb[3], e4b[3];
    const mxp_convert_opts sat = {.saturate = true};
    if (failed(mxp_convert_ex(h, MXP_FLOAT16, big, MXP_FLOAT32, 3, &sat)) ||
        failed(mxp_convert(hb, MXP_FLOAT32, h, MXP_FLOAT16, 3)) ||
        failed(mxp_convert_ex(e4, MXP_FLOAT8_E4M3FN, big, MXP_FLOAT32, 3, &sat)) ||
        failed(mxp_convert(e4b, MXP_FLOAT32, e4, MXP_FLOAT8_E4M3FN, 3)))
        return 1;
    printf("\nsaturate:   70000, 465, inf -> float16 %g %g %g;  -> float8_e4m3fn %g %g %g\n",
           (double)hb[0], (double)hb[1], (double)hb[2], (double)e4b[0], (double)e4b[1], (double)e4b[2]);

    /* Stochastic rounding: 0.1 lies between two bfloat16 values; rounding 10000 copies at random
     * keeps their mean at 0.1, where nearest-even would move every copy by the same error. */
    enum { M = 10000 };
    static float tenth[M], tenth_back[M];
    static uint16_t tenth_bf16[M];
    for (size_t i = 0; i < M; i++) tenth[i] = 0.1f;
    const mxp_convert_opts sr = {.rounding = MXP_ROUND_STOCHASTIC, .seed = 42};
    if (failed(mxp_convert_ex(tenth_bf16, MXP_BFLOAT16, tenth, MXP_FLOAT32, M, &sr)) ||
        failed(mxp_convert(tenth_back, MXP_FLOAT32, tenth_bf16, MXP_BFLOAT16, M)))
        return 1;
    double sum = 0;
    for (size_t i = 0; i < M; i++) sum += (double)tenth_back[i];
    uint16_t nearest;
    float nearest_back;
    if (failed(mxp_convert(&nearest, MXP_BFLOAT16, tenth, MXP_FLOAT32, 1)) ||
        failed(mxp_convert(&nearest_back, MXP_FLOAT32, &nearest, MXP_BFLOAT16, 1)))
        return 1;
    printf("stochastic: 0.1 -> bfloat16 x %d: first values %g %g %g %g, mean %.6f "
           "(nearest-even gives %g every time)\n",
           M, (double)tenth_back[0], (double)tenth_back[1], (double)tenth_back[2],
           (double)tenth_back[3], sum / M, (double)nearest_back);
    return 0;
}
