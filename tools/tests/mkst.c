/*
 * mkst.c - makes safetensors files for the command-line tests (tools/tests/cli_test.sh) and
 * prints tensors as numbers, independently of the tool under test.
 *
 *   mkst write OUT SPEC...       SPEC = name=DTYPE[d0,d1,...]:gen
 *       gen: ramp (i * 0.37 - n/5), rand (deterministic, normal-ish, scale 0.05), big (values
 *       up to 1e6: overflow float16), tiny (1e-9: flushed by float16), ones, nan (a NaN at 0).
 *       Floating values are computed in double and rounded to the dtype with mxp_convert from
 *       float64 (one rounding); integer dtypes get i % 100.
 *   mkst dump FILE NAME          the tensor's elements as "%.17g" lines (floating dtypes,
 *                                widened exactly to float64 by plain bit manipulation below)
 *   mkst big OUT BYTES           one F32 tensor "w" of BYTES/4 elements (ramp), written in pieces
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixprec.h"
#include "safetensors.h"

static double gen(const char *g, uint64_t i, uint64_t n)
{
    if (!strcmp(g, "ramp")) return (double)i * 0.37 - (double)n / 5.0;
    if (!strcmp(g, "ones")) return 1.0;
    if (!strcmp(g, "big")) return (double)(i % 7) * 1.5e5 - 3e5;
    if (!strcmp(g, "tiny")) return (i % 2 ? -1e-9 : 1e-9) * (double)(1 + i % 3);
    if (!strcmp(g, "nan")) return i == 0 ? (double)NAN : 1.0;
    /* rand: a fixed LCG, sum of 4 uniforms */
    uint64_t x = i * 6364136223846793005ull + 1442695040888963407ull;
    double s = 0;
    for (int k = 0; k < 4; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        s += (double)(x >> 11) / 9007199254740992.0 - 0.5;
    }
    return s * 0.05 * 1.7;
}

static int write_cmd(int argc, char **argv)
{
    int n = argc - 3;
    mxst_spec *specs = calloc((size_t)n, sizeof *specs);
    uint64_t(*shapes)[8] = calloc((size_t)n, sizeof *shapes);
    char **gens = calloc((size_t)n, sizeof *gens);
    for (int i = 0; i < n; i++) {
        char *s = strdup(argv[3 + i]);
        char *eq = strchr(s, '='), *br = strchr(s, '['), *col = strrchr(s, ':');
        if (!eq || !br || !col) {
            fprintf(stderr, "bad spec %s\n", argv[3 + i]);
            return 2;
        }
        *eq = *br = *col = '\0';
        specs[i].name = s;
        if (!mxst_dtype_parse(eq + 1, &specs[i].dtype)) {
            fprintf(stderr, "bad dtype %s\n", eq + 1);
            return 2;
        }
        char *p = br + 1;
        while (*p && *p != ']') {
            shapes[i][specs[i].ndim++] = strtoull(p, &p, 10);
            if (*p == ',') p++;
        }
        specs[i].shape = shapes[i];
        gens[i] = col + 1;
    }
    const char *meta[] = {"source", "mkst"};
    mxst_writer *w;
    if (mxst_writer_begin(argv[2], specs, (size_t)n, meta, 1, MXST_OVERWRITE | MXST_NO_FSYNC, &w)) {
        fprintf(stderr, "%s\n", mxst_last_error());
        return 1;
    }
    for (size_t k = 0; k < (size_t)n; k++) {
        size_t i = mxst_writer_order(w, k);
        uint64_t numel = 1;
        for (size_t d = 0; d < specs[i].ndim; d++) numel *= specs[i].shape[d];
        uint64_t nb = mxst_writer_nbytes(w, i);
        unsigned char *buf = malloc(nb + 1);
        mxp_dtype md;
        if (mxst_dtype_to_mxp(specs[i].dtype, &md) && mxp_dtype_is_floating(md)) {
            double *v = malloc((numel + 1) * sizeof *v);
            for (uint64_t e = 0; e < numel; e++) v[e] = gen(gens[i], e, numel);
            mxp_convert(buf, md, v, MXP_FLOAT64, numel);
            free(v);
        } else {
            size_t es = (size_t)(numel ? nb / numel : 1);
            memset(buf, 0, nb);
            for (uint64_t e = 0; e < numel; e++) buf[e * es] = (unsigned char)(e % 100);
        }
        if (mxst_writer_write(w, buf, nb)) {
            fprintf(stderr, "%s\n", mxst_last_error());
            return 1;
        }
        free(buf);
    }
    int rc = 0;
    if (mxst_writer_commit(w)) {
        fprintf(stderr, "%s\n", mxst_last_error());
        rc = 1;
    }
    for (int i = 0; i < n; i++) free((char *)specs[i].name); /* the strdup'd spec */
    free(specs);
    free(shapes);
    free(gens);
    return rc;
}

/* Exact widening by bit manipulation (not through the library under test). */
static double widen(const unsigned char *p, mxst_dtype d)
{
    uint64_t u = 0;
    unsigned bytes = mxst_dtype_bits(d) / 8;
    for (unsigned k = 0; k < bytes; k++) u |= (uint64_t)p[k] << (8 * k);
    int ebits, mbits, bias;
    switch (d) {
    case MXST_F64: {
        double v;
        memcpy(&v, &u, 8);
        return v;
    }
    case MXST_F32:
        ebits = 8;
        mbits = 23;
        bias = 127;
        break;
    case MXST_F16:
        ebits = 5;
        mbits = 10;
        bias = 15;
        break;
    case MXST_BF16:
        ebits = 8;
        mbits = 7;
        bias = 127;
        break;
    case MXST_F8_E4M3:
        ebits = 4;
        mbits = 3;
        bias = 7;
        break;
    case MXST_F8_E5M2:
        ebits = 5;
        mbits = 2;
        bias = 15;
        break;
    default:
        return (double)NAN;
    }
    int sign = (int)(u >> (ebits + mbits)) & 1;
    int e = (int)(u >> mbits) & ((1 << ebits) - 1);
    uint64_t m = u & ((1ull << mbits) - 1);
    double v;
    if (d == MXST_F8_E4M3 && e == 15 && m == 7)
        v = (double)NAN;
    else if (d != MXST_F8_E4M3 && e == (1 << ebits) - 1)
        v = m ? (double)NAN : (double)INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - mbits);
    else
        v = ldexp((double)(m | (1ull << mbits)), e - bias - mbits);
    return sign ? -v : v;
}

static int dump_cmd(const char *path, const char *name)
{
    mxst_file *f;
    if (mxst_open(path, false, &f)) {
        fprintf(stderr, "%s\n", mxst_last_error());
        return 1;
    }
    const mxst_tensor *t = mxst_find(f, name);
    if (!t) {
        fprintf(stderr, "no tensor %s\n", name);
        return 1;
    }
    unsigned char *b = malloc(t->nbytes + 1);
    mxst_read(f, t, 0, b, (size_t)t->nbytes);
    unsigned es = mxst_dtype_bits(t->dtype) / 8;
    for (uint64_t i = 0; i < t->numel; i++) {
        if (t->dtype == MXST_I8)
            printf("%d\n", (int)(signed char)b[i]);
        else if (t->dtype == MXST_U8)
            printf("%u\n", b[i]);
        else if (t->dtype == MXST_I64) {
            int64_t v;
            memcpy(&v, b + 8 * i, 8);
            printf("%lld\n", (long long)v);
        } else
            printf("%.17g\n", widen(b + i * es, t->dtype));
    }
    free(b);
    mxst_close(f);
    return 0;
}

static int big_cmd(const char *path, unsigned long long bytes)
{
    uint64_t n = bytes / 4;
    mxst_spec s = {"w", MXST_F32, 1, &n};
    mxst_writer *w;
    if (mxst_writer_begin(path, &s, 1, NULL, 0, MXST_OVERWRITE | MXST_NO_FSYNC, &w)) {
        fprintf(stderr, "%s\n", mxst_last_error());
        return 1;
    }
    size_t chunk = 1 << 20;
    float *buf = malloc(chunk * 4);
    for (uint64_t e = 0; e < n; e += chunk) {
        size_t k = n - e < chunk ? (size_t)(n - e) : chunk;
        for (size_t i = 0; i < k; i++) buf[i] = (float)((double)((e + i) % 1000003) * 1e-3);
        if (mxst_writer_write(w, buf, k * 4)) {
            fprintf(stderr, "%s\n", mxst_last_error());
            return 1;
        }
    }
    free(buf);
    return mxst_writer_commit(w) ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "write")) return write_cmd(argc, argv);
    if (argc == 4 && !strcmp(argv[1], "dump")) return dump_cmd(argv[2], argv[3]);
    if (argc == 4 && !strcmp(argv[1], "big")) return big_cmd(argv[2], strtoull(argv[3], NULL, 10));
    fprintf(stderr, "usage: mkst write OUT SPEC... | dump FILE NAME | big OUT BYTES\n");
    return 2;
}
