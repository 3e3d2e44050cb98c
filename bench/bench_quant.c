/*
 * bench_quant.c - quantization throughput (mixprec/quant.h) against memcpy moving the same
 * traffic, measured in the same run (bench_util.h: memcpy of (bytes_in + bytes_out) / 2).
 *
 * Rows (1 thread, medians):
 *   - int8 per row, 4096 x 4096 float32 (64 MiB in, 16 MiB + 16 KiB scales out);
 *   - MXFP8 (e4m3fn, RCEIL), 4096 x 4096 float32 (64 MiB in, 16 MiB + 512 KiB E8M0 out);
 *   - float8 per row (current scaling), the same matrix;
 *   - delayed-scaling float8 quantize, n = 2^26 float32 (256 MiB in, 64 MiB out), one pass;
 * each on the default path and on the scalar reference (mxp__quant_isa_override), and the
 * static quantizers also on a cache-resident 256 x 1024 matrix.
 * ratio = memcpy-equivalent time / quantization time (> 1: faster than memcpy), from wall-clock
 * medians (bench_util.h) and, after the bar, from thread CPU-time medians (see cpu_median).
 * The static quantizers read their input twice when it has more than one scale (an all_finite
 * pre-pass, so that a NaN anywhere leaves every output untouched, then amax + cast per row while
 * the row is in cache); "pre-pass" shows what that first read costs alone.
 * Not a test: numbers on a shared machine are noisy; read medians and ratios.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "kernels.h"
#include "mixprec.h"
#include "quant_kernels.h"

typedef struct job {
    int what; /* 0 int8 row, 1 mx, 2 fp8 row, 3 delayed, 4 all_finite pre-pass alone;
                 5, 6, 7: 0, 1, 2 with MXP_QUANT_ONE_PASS; 8 int4 row */
    const float *x;
    void *q;
    void *scales;
    size_t rows, cols;
    mxp_fp8_scaler *s;
} job;

static void run(void *p)
{
    job *j = p;
    const mxp_qlayout l = {j->rows, j->cols, MXP_QAXIS_ROW, 0};
    mxp_status st = MXP_OK;
    switch (j->what) {
    case 0: st = mxp_quantize_int8(j->q, j->scales, j->x, MXP_FLOAT32, &l); break;
    case 1: st = mxp_quantize_mx(j->q, MXP_FLOAT8_E4M3FN, j->scales, j->x, MXP_FLOAT32, j->rows, j->cols, MXP_MX_RCEIL); break;
    case 2: st = mxp_quantize_fp8(j->q, MXP_FLOAT8_E4M3FN, j->scales, j->x, MXP_FLOAT32, &l); break;
    case 5: st = mxp_quantize_int8_ex(j->q, j->scales, j->x, MXP_FLOAT32, &l, MXP_QUANT_ONE_PASS); break;
    case 6:
        st = mxp_quantize_mx_ex(j->q, MXP_FLOAT8_E4M3FN, j->scales, j->x, MXP_FLOAT32, j->rows, j->cols, MXP_MX_RCEIL,
                                MXP_QUANT_ONE_PASS);
        break;
    case 7: st = mxp_quantize_fp8_ex(j->q, MXP_FLOAT8_E4M3FN, j->scales, j->x, MXP_FLOAT32, &l, MXP_QUANT_ONE_PASS); break;
    case 8: st = mxp_quantize_int4(j->q, j->scales, j->x, MXP_FLOAT32, &l); break;
    case 3: st = mxp_fp8_quantize_delayed(j->q, j->x, MXP_FLOAT32, j->rows * j->cols, j->s); break;
    default: st = mxp_all_finite(j->x, MXP_FLOAT32, j->rows * j->cols) ? MXP_OK : MXP_EINVAL; break;
    }
    if (st != MXP_OK) {
        fprintf(stderr, "bench_quant: %s\n", mxp_last_error());
        exit(1);
    }
    __asm__ __volatile__("" ::: "memory");
}

static void cpu_name(char *out, size_t cap)
{
    snprintf(out, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            const char *c = strchr(line, ':');
            if (c) {
                snprintf(out, cap, "%s", c + 2);
                out[strcspn(out, "\n")] = '\0';
            }
            break;
        }
    fclose(f);
}

/* Median thread CPU time of fn(ctx) (CLOCK_THREAD_CPUTIME_ID): on a machine shared by many
 * processes a long call is descheduled for most of its wall time, which says nothing about the
 * code; CPU time does not count those gaps (memory contention from the others remains). */
static double cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double cpu_median(void (*fn)(void *), void *ctx)
{
    fn(ctx);
    double v[15];
    for (int i = 0; i < 15; i++) {
        const double a = cpu_now_ns();
        fn(ctx);
        v[i] = cpu_now_ns() - a;
    }
    return bu_median(v, 15);
}

static double memcpy_cpu_ns(size_t in, size_t out)
{
    const size_t bytes = (in + out) / 2;
    struct bu_copy c = {malloc(bytes), malloc(bytes), bytes};
    if (!c.dst || !c.src) return 0;
    memset(c.dst, 1, bytes);
    memset((void *)c.src, 2, bytes);
    const double ns = cpu_median(bu_copy_fn, &c);
    free(c.dst);
    free((void *)c.src);
    return ns;
}

static void row(const char *name, job *j, size_t in, size_t out, int isa)
{
    const char *only = getenv("MXP_BENCH_ONLY"); /* a substring of the row names to run */
    if (only && !strstr(name, only)) return;
    mxp__quant_isa_override = isa;
    const double ns = bu_time_median(run, j), cns = cpu_median(run, j);
    mxp__quant_isa_override = -1;
    const double base = bu_memcpy_equiv_ns(in, out), cbase = memcpy_cpu_ns(in, out);
    printf("%-34s %-7s %9.3f ms %7.2f GB/s  memcpy-eq %7.2f GB/s  ratio %5.2f | cpu %9.3f ms %7.2f GB/s  memcpy-eq %7.2f GB/s  ratio %5.2f\n",
           name, isa < 0 ? mxp_isa() : mxp__isa_name((mxp__isa_id)isa), ns / 1e6, bu_gbps(in + out, ns),
           bu_gbps(in + out, base), ns > 0 ? base / ns : 0, cns / 1e6, bu_gbps(in + out, cns),
           bu_gbps(in + out, cbase), cns > 0 ? cbase / cns : 0);
}

int main(void)
{
    char cpu[200];
    cpu_name(cpu, sizeof cpu);
    if (getenv("MXP_BENCH_NO_NT")) mxp__nt_threshold = SIZE_MAX; /* plain stores, for comparison */
    printf("bench_quant: %s, 1 thread, default ISA %s; ratio = memcpy-equivalent time / time\n\n", cpu, mxp_isa());
    const size_t R = 4096, C = 4096, N = (size_t)1 << 26;
    /* 64-byte aligned, as the limit's and memcpy's effective alignment (glibc's memcpy aligns its
     * stores and, with src and dst at one offset, its loads too); MXP_BENCH_OFFSET=k moves the
     * input k bytes (a multiple of 4) off a line boundary. A large malloc is 16 bytes past a page
     * boundary, so before 2026-11-25 every 64-byte load here split two cache lines. */
    const char *off_env = getenv("MXP_BENCH_OFFSET");
    const size_t off = off_env ? (size_t)strtoul(off_env, NULL, 10) / 4 * 4 % 64 : 0;
    unsigned char *xbuf = aligned_alloc(64, N * sizeof(float) + 64);
    unsigned char *q = aligned_alloc(64, N), *sc = aligned_alloc(64, R * C / 32 * 4);
    if (!xbuf || !q || !sc) return 1;
    float *x = (float *)(void *)(xbuf + off);
    uint64_t st = 12345;
    for (size_t i = 0; i < N; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(int32_t)(st >> 32) * 0x1p-31 * 8.0);
    }
    memset(q, 0, N);
    memset(sc, 0, R * C / 32 * 4);
    const mxp_fp8_recipe rc = mxp_fp8_recipe_default(MXP_FLOAT8_E4M3FN);
    mxp_fp8_scaler *s = NULL;
    if (mxp_fp8_scaler_new(&rc, &s) != MXP_OK) return 1;
    const size_t in = R * C * 4, out8 = R * C;
    const int isas[2] = {-1, MXP__ISA_SCALAR};
    for (int k = 0; k < 2; k++) {
        job j = {0, x, q, sc, R, C, s};
        j.what = 0;
        row("int8 per row 4096x4096", &j, in, out8 + R * 4, isas[k]);
        j.what = 1;
        row("MXFP8 e4m3 RCEIL 4096x4096", &j, in, out8 + R * C / 32, isas[k]);
        j.what = 2;
        row("float8 e4m3 per row 4096x4096", &j, in, out8 + R * 4, isas[k]);
        j.what = 8;
        row("int4 per row 4096x4096", &j, in, out8 / 2 + R * 4, isas[k]);
        j.what = 4;
        if (k == 0) row("  (pre-pass all_finite alone)", &j, in, 0, isas[k]);
        j.what = 5;
        row("int8 per row, one pass", &j, in, out8 + R * 4, isas[k]);
        j.what = 6;
        row("MXFP8 e4m3 RCEIL, one pass", &j, in, out8 + R * C / 32, isas[k]);
        j.what = 7;
        row("float8 e4m3 per row, one pass", &j, in, out8 + R * 4, isas[k]);
        job d = {3, x, q, NULL, 1, N, s};
        row("delayed float8 e4m3 n=2^26", &d, N * 4, N, isas[k]);
        job dc = {3, x, q, NULL, 1, (size_t)1 << 16, s};
        row("delayed float8 n=2^16 (in cache)", &dc, (size_t)4 << 16, (size_t)1 << 16, isas[k]);
        job c = {0, x, q, sc, 256, 1024, s};
        row("int8 per row 256x1024 (in cache)", &c, 256 * 1024 * 4, 256 * 1024 + 1024, isas[k]);
        c.what = 1;
        row("MXFP8 256x1024 (in cache)", &c, 256 * 1024 * 4, 256 * 1024 + 8192, isas[k]);
        printf("\n");
    }
    mxp_fp8_scaler_free(s);
    free(xbuf);
    free(q);
    free(sc);
    return 0;
}
