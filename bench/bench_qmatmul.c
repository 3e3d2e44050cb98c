/*
 * bench_qmatmul.c - mxp_matmul_int8 throughput, and its ratio to OpenBLAS cblas_sgemm on the
 * same shapes (float32 operands, one thread: mxp_matmul_int8 is single-threaded).
 *
 * Shapes: m = 128, k = n = 1024 (a batch through a Dense layer) and m = 1, k = n = 4096 (one
 * token: matrix-vector, bound by reading b), plus a few more when --all is given.
 * GOP/s counts 2 * m * k * n operations; times are medians (bench_util.h). The sgemm column is
 * present when the program was built with OpenBLAS (bench/CMakeLists.txt: MXP_HAVE_OPENBLAS,
 * Debian libopenblas-dev). mxp_matmul_int8 and sgemm run alternately, so both see the same
 * machine load; "ratio" is sgemm's median time over ours, "min-rt" the same for the fastest
 * runs (on a shared, loaded machine the minima are the steadier numbers). "memcpy" is the ratio
 * to a memcpy of the same bytes (read a, b, scales; write y), which bounds the m = 1 shape.
 * Usage: bench_qmatmul [--all] [--cpu]   (--cpu: medians of thread CPU time, not wall-clock)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "internal.h"
#include "kernels.h"
#include "mixprec.h"

#ifdef MXP_HAVE_OPENBLAS
#include <cblas.h>
void openblas_set_num_threads(int num_threads); /* OpenBLAS extension (not in every cblas.h) */
#endif

typedef struct job {
    const mxp__kernels *kt;
    mxp_dtype yt;
    size_t m, k, n;
    int8_t *a, *b;
    float *sa, *sb;
    void *y;
#ifdef MXP_HAVE_OPENBLAS
    float *fa, *fb, *fc;
#endif
} job;

static void run_q(void *p)
{
    job *j = p;
    if (mxp__matmul_int8_k(j->kt, 0, j->y, j->yt, j->a, j->sa, j->b, j->sb, j->m, j->k, j->n) != MXP_OK)
        abort();
    __asm__ __volatile__("" ::: "memory");
}

#ifdef MXP_HAVE_OPENBLAS
static void run_sgemm(void *p)
{
    job *j = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)j->m, (int)j->n, (int)j->k, 1.0f,
                j->fa, (int)j->k, j->fb, (int)j->n, 0.0f, j->fc, (int)j->n);
    __asm__ __volatile__("" ::: "memory");
}
#endif

/* Median ns of fn(ctx): wall-clock (bench_util.h), or with --cpu the thread's CPU time (on a
 * machine shared with other jobs, time the thread spent descheduled is not the kernel's). */
static int use_cpu_time;
static double thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
/* fn_a and fn_b timed alternately (a, b, a, b, ...) so that both see the same machine load:
 * medians and minima of each (ns). fn_b may be NULL. */
typedef struct timing { double med_a, med_b, min_a, min_b; } timing;
static double clock_ns(void) { return use_cpu_time ? thread_ns() : bu_now_ns(); }
static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}
static timing paired(void (*fn_a)(void *), void *ca, void (*fn_b)(void *), void *cb)
{
    timing t = {0, 0, 0, 0};
    double t0 = clock_ns();
    fn_a(ca);
    if (fn_b) fn_b(cb);
    const int reps = bu_reps_for(clock_ns() - t0, 6e8);
    double *va = malloc((size_t)reps * sizeof *va), *vb = malloc((size_t)reps * sizeof *vb);
    if (!va || !vb) abort();
    for (int i = 0; i < reps; i++) {
        t0 = clock_ns();
        fn_a(ca);
        va[i] = clock_ns() - t0;
        if (fn_b) {
            t0 = clock_ns();
            fn_b(cb);
            vb[i] = clock_ns() - t0;
        }
    }
    t.min_a = min_of(va, reps);
    t.med_a = bu_median(va, reps);
    if (fn_b) {
        t.min_b = min_of(vb, reps);
        t.med_b = bu_median(vb, reps);
    }
    free(va);
    free(vb);
    return t;
}

static void cpu_name(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *c = strchr(line, ':');
            if (c) {
                snprintf(buf, cap, "%s", c + 2);
                buf[strcspn(buf, "\n")] = 0;
            }
            break;
        }
    }
    fclose(f);
}

static void shape(size_t m, size_t k, size_t n)
{
    static uint64_t s = 12345;
    job j;
    memset(&j, 0, sizeof j);
    j.m = m;
    j.k = k;
    j.n = n;
    j.a = malloc(m * k);
    j.b = malloc(k * n);
    j.sa = malloc(m * sizeof(float));
    j.sb = malloc(n * sizeof(float));
    j.y = malloc(m * n * sizeof(float));
    if (!j.a || !j.b || !j.sa || !j.sb || !j.y) abort();
    for (size_t i = 0; i < m * k; i++) j.a[i] = (int8_t)((s = s * 6364136223846793005ull + 1) >> 56);
    for (size_t i = 0; i < k * n; i++) j.b[i] = (int8_t)((s = s * 6364136223846793005ull + 1) >> 56);
    for (size_t i = 0; i < m; i++) j.sa[i] = 127.0f / (1.0f + (float)(i % 7));
    for (size_t i = 0; i < n; i++) j.sb[i] = 127.0f / (0.5f + (float)(i % 5));
    const double ops = 2.0 * (double)m * (double)k * (double)n;
    void (*base)(void *) = NULL;
#ifdef MXP_HAVE_OPENBLAS
    j.fa = malloc(m * k * sizeof(float));
    j.fb = malloc(k * n * sizeof(float));
    j.fc = malloc(m * n * sizeof(float));
    if (!j.fa || !j.fb || !j.fc) abort();
    for (size_t i = 0; i < m * k; i++) j.fa[i] = j.a[i];
    for (size_t i = 0; i < k * n; i++) j.fb[i] = j.b[i];
    base = run_sgemm;
#endif
    const size_t bytes_in = m * k + k * n + (m + n) * sizeof(float);
    for (int isa = 0; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *kt = mxp__kernels_for((mxp__isa_id)isa);
        if (!kt) continue;
        if (isa == MXP__ISA_SCALAR && m * k * n > ((size_t)1 << 26)) continue; /* too slow */
        j.kt = kt;
        for (int t = 0; t < 2; t++) {
            j.yt = t ? MXP_BFLOAT16 : MXP_FLOAT32;
            const timing tm = paired(run_q, &j, base, &j);
            const double ns = tm.med_a;
            const size_t bytes_out = m * n * mxp_dtype_size(j.yt);
            const double mc = bu_memcpy_equiv_ns(bytes_in, bytes_out);
            printf("%5zu %5zu %5zu  %-8s %-11s %-8s %8.3f %8.3f %7.1f %6.2fx", m, k, n, kt->name,
                   kt->qmm.name, mxp_dtype_name(j.yt), ns * 1e-6, tm.min_a * 1e-6, ops / ns,
                   ns > 0 ? mc / ns : 0);
            if (base)
                printf(" %8.3f %8.3f %7.1f %6.2fx %6.2fx", tm.med_b * 1e-6, tm.min_b * 1e-6,
                       ops / tm.med_b, tm.med_b / ns, tm.min_b / tm.min_a);
            printf("\n");
            fflush(stdout);
        }
    }
    free(j.a);
    free(j.b);
    free(j.sa);
    free(j.sb);
    free(j.y);
#ifdef MXP_HAVE_OPENBLAS
    free(j.fa);
    free(j.fb);
    free(j.fc);
#endif
}

int main(int argc, char **argv)
{
    int all = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--all") == 0) all = 1;
        else if (strcmp(argv[i], "--cpu") == 0) use_cpu_time = 1;
    }
    char cpu[128];
    cpu_name(cpu, sizeof cpu);
#ifdef MXP_HAVE_OPENBLAS
    openblas_set_num_threads(1);
    printf("mxp_matmul_int8 vs OpenBLAS cblas_sgemm (1 thread), %s, active ISA %s\n", cpu, mxp_isa());
#else
    printf("mxp_matmul_int8 (built without OpenBLAS: no sgemm column), %s, active ISA %s\n", cpu,
           mxp_isa());
#endif
    printf("timing: median %s\n", use_cpu_time ? "thread CPU time (--cpu)" : "wall-clock");
    printf("%5s %5s %5s  %-8s %-11s %-8s %8s %8s %7s %7s", "m", "k", "n", "table", "kernels", "y",
           "med ms", "min ms", "GOP/s", "memcpy");
    printf(" %8s %8s %7s %7s %7s\n", "sgemm md", "sgemm mn", "GFLOP/s", "ratio", "min-rt");
    shape(128, 1024, 1024);
    shape(1, 4096, 4096);
    if (all) {
        shape(4, 4096, 4096);
        shape(16, 4096, 4096);
        shape(512, 512, 512);
        shape(1024, 1024, 1024);
    }
    return 0;
}
