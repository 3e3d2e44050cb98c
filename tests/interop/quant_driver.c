/*
 * quant_driver.c - a tiny command-line front end to mixprec/quant.h for the Keras interop test
 * (quant_keras.py). Not installed.
 *   quant_driver int8|int4 ROWS COLS AXIS IN Q_OUT S_OUT
 *       IN: ROWS*COLS float32 (little endian); AXIS 0 tensor, 1 row, 2 column; writes q (int8,
 *       or packed int4 rows) and the float32 scales
 *   quant_driver pack ROWS COLS IN OUT     IN: ROWS*COLS int8 in -8..7; writes the packed bytes
 * Exit 0 on success, 1 with the library's message otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixprec.h"

static void *slurp(const char *path, size_t want)
{
    FILE *f = fopen(path, "rb");
    void *p = malloc(want ? want : 1);
    if (!f || !p || fread(p, 1, want, f) != want) {
        fprintf(stderr, "quant_driver: cannot read %zu bytes from %s\n", want, path);
        exit(1);
    }
    fclose(f);
    return p;
}

static void spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "quant_driver: cannot write %s\n", path);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: quant_driver int8|int4 ROWS COLS AXIS IN Q_OUT S_OUT | pack ROWS COLS IN OUT\n");
        return 2;
    }
    const size_t rows = strtoul(argv[2], NULL, 10), cols = strtoul(argv[3], NULL, 10);
    const size_t pb = (cols + 1) / 2;
    if (strcmp(argv[1], "pack") == 0) {
        int8_t *q = slurp(argv[4], rows * cols);
        uint8_t *p = malloc(rows * pb + 1);
        if (!p || mxp_int4_pack(p, q, rows, cols) != MXP_OK) {
            fprintf(stderr, "quant_driver: %s\n", mxp_last_error());
            return 1;
        }
        spit(argv[5], p, rows * pb);
        return 0;
    }
    if (argc != 8) return 2;
    const mxp_qlayout l = {rows, cols, (mxp_qaxis)atoi(argv[4]), 0};
    float *x = slurp(argv[5], rows * cols * 4);
    const size_t ns = mxp_qlayout_nscales(&l);
    unsigned char *q = malloc(rows * cols + 1);
    float *s = malloc(ns * 4 + 4);
    if (!q || !s) return 1;
    const int int8 = strcmp(argv[1], "int8") == 0;
    const mxp_status st = int8 ? mxp_quantize_int8((int8_t *)q, s, x, MXP_FLOAT32, &l)
                               : mxp_quantize_int4(q, s, x, MXP_FLOAT32, &l);
    if (st != MXP_OK) {
        fprintf(stderr, "quant_driver: %s\n", mxp_last_error());
        return 1;
    }
    spit(argv[6], q, int8 ? rows * cols : rows * pb);
    spit(argv[7], s, ns * 4);
    return 0;
}
