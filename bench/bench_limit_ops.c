/*
 * bench_limit_ops.c - how much arithmetic a pass can afford before it falls below the limit.
 *
 * bench_convert's limit (bench_limit.h) is a loop that only moves the bytes. A conversion adds
 * vector operations between its loads and stores; this benchmark adds k of them to that loop
 * and reports the time against k = 0, so the table says how many operations per step a
 * float32 -> float8 pass (read 4 bytes, write 1 per element) can spend and still run at the
 * limit, in cache and out of it, on the CPU it runs on.
 *
 * One step: 4 source vectors x[0..3] (W bytes each: 4 * W / 4 = W float32 elements), k vector
 * operations in four independent chains of k / 4 (chain c starts at x[c] and alternately adds
 * and XORs x[(c + 1) % 4], which the compiler cannot fold; the conversion steps have two to four
 * such chains), the XOR of the four, one W-byte store (non-temporal out of cache, plain in
 * cache, as the library and the limit loop decide). k = 0 is bench_limit.h's loop. W = 64 with AVX-512 (the library's own
 * check), else 32 with AVX2; elsewhere the program says so and exits 0.
 *
 * Output (CSV): width_bytes, n (elements), k (operations per step of W elements), ns/element
 * (median of bench_util.h's timing), and the ratio time(k = 0) / time(k): 1.00 is "at the
 * limit", 0.80 means the pass takes 1.25x the limit's time.
 *
 * With --prefetch BYTES every step but k = 0's also prefetches its source lines BYTES ahead (as
 * the AVX-512 kernels do on some CPUs, cvt_avx512.c); the ratio stays against the plain k = 0
 * loop, so it shows how much of the cost of the arithmetic the prefetch wins back.
 *
 * Usage: bench_limit_ops [--quick] [--prefetch BYTES]   (--quick: fewer k values)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_limit.h"
#include "bench_util.h"
#include "kernels.h"

#ifdef BL_X86
#define LO_STEP(T, W, LOAD, ADD, XOR, STORE, STREAM, K)                                        \
    do {                                                                                       \
        const unsigned char *s = c->src;                                                       \
        unsigned char *d = c->dst;                                                             \
        for (size_t j = 0; j < c->n / (W); j++) {                                              \
            const unsigned char *q = s + 4 * j * (W);                                          \
            for (size_t o = 0; c->pf && o < 4 * (W); o += 64)                                  \
                _mm_prefetch((const char *)q + o + c->pf, _MM_HINT_T0);                        \
            const T x[4] = {LOAD(q), LOAD(q + (W)), LOAD(q + 2 * (W)), LOAD(q + 3 * (W))};     \
            T a[4] = {x[0], x[1], x[2], x[3]};                                                 \
            _Pragma("GCC unroll 64") for (int t = 0; t < (K); t++) a[t % 4] =                  \
                (t / 4) % 2 ? XOR(a[t % 4], x[(t + 1) % 4]) : ADD(a[t % 4], x[(t + 1) % 4]);   \
            const T o = XOR(XOR(a[0], a[1]), XOR(a[2], a[3]));                                 \
            if (c->nt) STREAM(d + j * (W), o);                                                 \
            else STORE(d + j * (W), o);                                                        \
        }                                                                                      \
        if (c->nt) _mm_sfence();                                                               \
    } while (0)

typedef struct lo_ctx {
    const unsigned char *src;
    unsigned char *dst;
    size_t n;  /* destination bytes = elements */
    int nt;
    size_t pf; /* prefetch the source this many bytes ahead (0: no prefetch) */
} lo_ctx;

#define LO_FN256(K)                                                                            \
    __attribute__((target("avx2"))) static void lo256_##K(void *v)                            \
    {                                                                                          \
        const lo_ctx *c = v;                                                                   \
        LO_STEP(__m256i, 32, BL_LD256, _mm256_add_epi32, _mm256_xor_si256, BL_ST256, BL_NT256, \
                K);                                                                            \
        __asm__ __volatile__("" ::: "memory");                                                 \
    }
#define LO_FN512(K)                                                                            \
    __attribute__((target("avx512f"))) static void lo512_##K(void *v)                         \
    {                                                                                          \
        const lo_ctx *c = v;                                                                   \
        LO_STEP(__m512i, 64, BL_LD512, _mm512_add_epi32, _mm512_xor_si512, BL_ST512, BL_NT512, \
                K);                                                                            \
        __asm__ __volatile__("" ::: "memory");                                                 \
    }
#define LO_KS(X) X(0) X(4) X(8) X(12) X(16) X(20) X(24) X(32) X(40) X(48)
LO_KS(LO_FN256)
LO_KS(LO_FN512)
#define LO_ENTRY256(K) {K, lo256_##K},
#define LO_ENTRY512(K) {K, lo512_##K},
typedef struct lo_fn {
    int k;
    void (*fn)(void *);
} lo_fn;
static const lo_fn fns256[] = {LO_KS(LO_ENTRY256)};
static const lo_fn fns512[] = {LO_KS(LO_ENTRY512)};
enum { NK = sizeof fns256 / sizeof fns256[0] };
#endif

int main(int argc, char **argv)
{
    int quick = 0;
    size_t prefetch = 0;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
            continue;
        }
        if (strcmp(argv[i], "--prefetch") == 0 && i + 1 < argc) {
            prefetch = strtoul(argv[++i], &end, 10);
            if (end != argv[i] && *end == '\0' && prefetch <= 1u << 20) continue;
        }
        fprintf(stderr, "usage: %s [--quick] [--prefetch BYTES (at most 1048576)]\n", argv[0]);
        return 2;
    }
    char cpu[256];
    bl_cpu_name(cpu, sizeof cpu);
    printf("# CPU: %s\n", cpu);
#ifndef BL_X86
    (void)quick;
    printf("# bench_limit_ops: x86-64 with AVX2 only; nothing measured on this CPU\n");
    return 0;
#else
    const int w512 = mxp__kernels_for(MXP__ISA_AVX512) != NULL;
    if (!w512 && !mxp__kernels_for(MXP__ISA_AVX2)) {
        printf("# bench_limit_ops: this CPU has neither AVX2 nor AVX-512: nothing measured\n");
        return 0;
    }
    const lo_fn *fns = w512 ? fns512 : fns256;
    const int W = w512 ? 64 : 32;
    const size_t sizes[2] = {(size_t)1 << 16, (size_t)1 << 26};
    printf("width_bytes,n,prefetch_bytes,k_ops_per_step,ns_per_elem,ratio_to_k0\n");
    for (int si = 0; si < 2; si++) {
        const size_t n = sizes[si];
        unsigned char *src = aligned_alloc(64, 4 * n), *dst = aligned_alloc(64, n);
        if (!src || !dst) {
            fprintf(stderr, "bench_limit_ops: out of memory for n = %zu\n", n);
            free(src);
            free(dst);
            return 1;
        }
        for (size_t i = 0; i < 4 * n; i++) src[i] = (unsigned char)(i * 131u + (i >> 9));
        memset(dst, 0, n);
        lo_ctx c = {src, dst, n, 5 * n >= mxp__nt_threshold, 0};
        double base = 0;
        for (int ki = 0; ki < NK; ki++) {
            if (quick && fns[ki].k % 8 != 0 && fns[ki].k != 12) continue;
            c.pf = fns[ki].k == 0 ? 0 : prefetch; /* fns[0] is k = 0: the plain limit loop */
            const double ns = bu_time_median(fns[ki].fn, &c) / (double)n;
            if (fns[ki].k == 0) base = ns;
            printf("%d,%zu,%zu,%d,%.4f,%.3f\n", W, n, c.pf, fns[ki].k, ns, base / ns);
        }
        free(src);
        free(dst);
    }
    return 0;
#endif
}
