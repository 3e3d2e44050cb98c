/*
 * bench_limit.h - the physical limit of a pass that reads `in` bytes and writes `out` bytes, and
 * the name of the CPU the benchmark runs on (header-only, bench/ only).
 *
 * bench_util.h's memcpy-equivalent baseline is glibc's memcpy of (in + out) / 2 bytes: a fair
 * "as fast as a copy" yardstick, but not the hardware's limit (glibc's memcpy below its
 * non-temporal threshold reads every destination line before writing it, and it moves
 * in : out = 1 : 1, not 4 : 2). The limit here moves exactly the conversion's bytes:
 *   - out of cache (the pass reads + writes at least the library's streaming threshold,
 *     mxp__nt_threshold, as the conversion kernels decide): a loop that loads the `in` bytes
 *     and writes the `out` bytes with non-temporal stores (no read-for-ownership);
 *   - in cache: the same loop with plain stores.
 * Reading k source vectors per destination vector (in = k * out) XORs them together; writing
 * k destination vectors per source vector (out = k * in) stores it k times; so nothing is
 * skipped and no arithmetic worth the name is added. The loop is written with AVX2 intrinsics
 * and, on a CPU with AVX-512 (the library's own check, mxp__kernels_for), with AVX-512 ones
 * too; the limit is the faster of the two. Elsewhere: plain 64-bit words (no streaming).
 */
#ifndef MIXPREC_BENCH_LIMIT_H
#define MIXPREC_BENCH_LIMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define BL_X86 1

/* One pass with vectors of type T (W bytes): k = in/out or out/in, a power of two <= 8. */
#define BL_BODY(T, W, LOAD, XOR, STORE, STREAM)                                                   \
    do {                                                                                          \
        const unsigned char *s = src;                                                             \
        unsigned char *d = dst;                                                                   \
        if (in >= out) {                                                                          \
            const size_t nv = out / (W);                                                          \
            for (size_t j = 0; j < nv; j++) {                                                     \
                const unsigned char *p = s + j * K * (W);                                         \
                T acc = LOAD(p);                                                                  \
                for (size_t t = 1; t < K; t++) acc = XOR(acc, LOAD(p + t * (W)));                 \
                if (nt) STREAM(d + j * (W), acc);                                                 \
                else STORE(d + j * (W), acc);                                                     \
            }                                                                                     \
        } else {                                                                                  \
            const size_t nv = in / (W);                                                           \
            for (size_t j = 0; j < nv; j++) {                                                     \
                const T x = LOAD(s + j * (W));                                                    \
                for (size_t t = 0; t < K; t++) {                                                  \
                    if (nt) STREAM(d + (j * K + t) * (W), x);                                     \
                    else STORE(d + (j * K + t) * (W), x);                                         \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        if (nt == 1) _mm_sfence(); /* 2: streaming, the caller fences (bl_streams) */             \
    } while (0)

#define BL_LD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define BL_ST256(p, x) _mm256_store_si256((__m256i *)(void *)(p), (x))
#define BL_NT256(p, x) _mm256_stream_si256((__m256i *)(void *)(p), (x))
#define BL_FN256(K_)                                                                              \
    __attribute__((target("avx2"))) static void bl_pass256_##K_(void *dst, const void *src,      \
                                                                 size_t in, size_t out, int nt)  \
    {                                                                                             \
        enum { K = K_ };                                                                          \
        BL_BODY(__m256i, 32, BL_LD256, _mm256_xor_si256, BL_ST256, BL_NT256);                     \
    }
BL_FN256(1)
BL_FN256(2)
BL_FN256(4)
BL_FN256(8)

#define BL_LD512(p) _mm512_loadu_si512((const void *)(p))
#define BL_ST512(p, x) _mm512_store_si512((void *)(p), (x))
#define BL_NT512(p, x) _mm512_stream_si512((void *)(p), (x))
#define BL_FN512(K_)                                                                              \
    __attribute__((target("avx512f"))) static void bl_pass512_##K_(void *dst, const void *src,   \
                                                                   size_t in, size_t out, int nt) \
    {                                                                                             \
        enum { K = K_ };                                                                          \
        BL_BODY(__m512i, 64, BL_LD512, _mm512_xor_si512, BL_ST512, BL_NT512);                     \
    }
BL_FN512(1)
BL_FN512(2)
BL_FN512(4)
BL_FN512(8)
#endif

/* Portable: 64-bit words, plain stores. */
static void bl_pass_words(void *dst, const void *src, size_t in, size_t out, int nt)
{
    (void)nt;
    const uint64_t *s = src;
    uint64_t *d = dst;
    if (in >= out) {
        const size_t k = in / out, nw = out / 8;
        for (size_t j = 0; j < nw; j++) {
            uint64_t acc = s[j * k];
            for (size_t t = 1; t < k; t++) acc ^= s[j * k + t];
            d[j] = acc;
        }
    } else {
        const size_t k = out / in, nw = in / 8;
        for (size_t j = 0; j < nw; j++)
            for (size_t t = 0; t < k; t++) d[j * k + t] = s[j];
    }
}

typedef void (*bl_pass_fn)(void *dst, const void *src, size_t in, size_t out, int nt);

struct bl_ctx {
    bl_pass_fn fn;
    void *dst;
    const void *src;
    size_t in, out;
    int nt;
    int S; /* > 1: as S interleaved streams (bl_streams, below; streaming stores) */
};
static inline void bl_streams(const struct bl_ctx *c);
static inline void bl_run(void *p)
{
    struct bl_ctx *c = p;
    if (c->S > 1) bl_streams(c);
    else c->fn(c->dst, c->src, c->in, c->out, c->nt);
    __asm__ __volatile__("" ::: "memory");
}

/* The pass for ratio k (1, 2, 4, 8) and vector width (32 or 64 bytes; 8: portable). */
static bl_pass_fn bl_pick(size_t k, int width)
{
#ifdef BL_X86
    if (width == 32) return k == 1 ? bl_pass256_1 : k == 2 ? bl_pass256_2 : k == 4 ? bl_pass256_4 : bl_pass256_8;
    if (width == 64) return k == 1 ? bl_pass512_1 : k == 2 ? bl_pass512_2 : k == 4 ? bl_pass512_4 : bl_pass512_8;
#endif
    (void)k;
    (void)width;
    return bl_pass_words;
}

/* The vector widths (bytes) the limit loops run with on this CPU: 32 (AVX2) and 64 (AVX-512)
 * where the library has those paths, else 8 (portable words); returns how many. */
static inline int bl_widths(int w[2])
{
    int nw = 0;
#ifdef BL_X86
    if (mxp__kernels_for(MXP__ISA_AVX2)) w[nw++] = 32;
    if (mxp__kernels_for(MXP__ISA_AVX512)) w[nw++] = 64;
#endif
    if (nw == 0) w[nw++] = 8;
    return nw;
}

/* The pass as S interleaved streams, the way src/convert.c's mxp__cvt_run runs a large
 * conversion (kernels.h, mxp__cvt_streams): the bytes cut into S parts, and pieces of each taken in
 * turn, a piece being 512 bytes on the wider side (a step of MXP__CVT_STREAM_STEP = 128 float32);
 * one SFENCE at the end. */
static inline void bl_streams(const struct bl_ctx *c)
{
    const size_t big = c->in >= c->out ? c->in : c->out, k = c->in >= c->out ? c->in / c->out : c->out / c->in;
    const size_t pin = c->in >= c->out ? 512 : 512 / k, pout = c->in >= c->out ? 512 / k : 512;
    const size_t npieces = big / 512, S = (size_t)c->S, per = (npieces + S - 1) / S;
    for (size_t j = 0; j < per; j++)
        for (size_t t = 0; t < S; t++) {
            const size_t q = t * per + j;
            if (q >= npieces) break;
            c->fn((unsigned char *)c->dst + q * pout, (const unsigned char *)c->src + q * pin, pin, pout, 2);
        }
#ifdef BL_X86
    _mm_sfence();
#endif
}

/* Median ns of the limit loop for a pass reading `in` bytes at src and writing `out` bytes at
 * dst (dst 64-byte aligned; src any address: the loads are unaligned ones, as the conversion
 * kernels' are; in / out a power of two from 1/8 to 8; both multiples of 8 * 64 bytes here).
 * Streaming iff in + out >= mxp__nt_threshold, as the conversion kernels decide. Run on the
 * conversion's own buffers, the limit sees the same pages, alignment and cache state.
 * _streams: as S > 1 interleaved streams (bl_streams: streaming stores whatever the size, for
 * passes out of cache; in and out multiples of 512 bytes); S = 1 is bl_limit_ns_on. */
static inline double bl_limit_ns_on_streams(void *dst, const void *src, size_t in, size_t out, int S)
{
    const size_t k = in >= out ? in / out : out / in;
    const int nt = in + out >= mxp__nt_threshold;
    double best = 0;
    int widths[2];
    const int nw = bl_widths(widths);
    for (int w = 0; w < nw; w++) {
        struct bl_ctx c = {bl_pick(k, widths[w]), dst, src, in, out, nt, S};
        const double ns = bu_time_median(bl_run, &c);
        if (best == 0 || ns < best) best = ns;
    }
    return best;
}
static inline double bl_limit_ns_on(void *dst, const void *src, size_t in, size_t out)
{
    return bl_limit_ns_on_streams(dst, src, in, out, 1);
}

/* The same on freshly allocated, 64-byte aligned buffers. 0 on allocation failure. */
static inline double bl_limit_ns(size_t in, size_t out)
{
    void *src = aligned_alloc(64, (in + 63) / 64 * 64), *dst = aligned_alloc(64, (out + 63) / 64 * 64);
    if (!src || !dst) {
        free(src);
        free(dst);
        return 0;
    }
    memset(src, 1, in);
    memset(dst, 2, out);
    const double best = bl_limit_ns_on(dst, src, in, out);
    free(src);
    free(dst);
    return best;
}

/* "model name (N logical CPUs; avx2 fma f16c, no AVX-512; L3 ...)" from /proc/cpuinfo, or
 * "unknown CPU" where there is none. */
static inline void bl_cpu_name(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192], model[128] = "", flags[8192] = "", cache[64] = "";
    int cpus = 0;
    while (fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (!colon) continue;
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        if (strncmp(line, "processor", 9) == 0) cpus++;
        else if (!model[0] && strncmp(line, "model name", 10) == 0) snprintf(model, sizeof model, "%s", v);
        else if (!flags[0] && (strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0))
            snprintf(flags, sizeof flags, " %s", v);
        else if (!cache[0] && strncmp(line, "cache size", 10) == 0) snprintf(cache, sizeof cache, "%s", v);
    }
    fclose(f);
    model[strcspn(model, "\n")] = 0;
    flags[strcspn(flags, "\n")] = 0;
    cache[strcspn(cache, "\n")] = 0;
    strcat(flags, " ");
    static const char *const want[] = {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
                                       "avx512_bf16", "avx512_fp16", "asimd", "fphp", "asimdhp"};
    char have[256] = "";
    bool any512 = false;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char pat[32];
        snprintf(pat, sizeof pat, " %s ", want[i]);
        if (strstr(flags, pat)) {
            if (strlen(have) + strlen(want[i]) + 2 < sizeof have) {
                if (have[0]) strcat(have, " ");
                strcat(have, want[i]);
            }
            if (strncmp(want[i], "avx512", 6) == 0) any512 = true;
        }
    }
    const bool x86 = strstr(flags, " sse2 ") != NULL;
    snprintf(buf, cap, "%s (%d logical CPU%s; %s%s%s%s)", model[0] ? model : "unknown model", cpus,
             cpus == 1 ? "" : "s", have[0] ? have : "no SIMD flags of interest",
             x86 && !any512 ? ", no AVX-512" : "", cache[0] ? "; cache size " : "", cache);
}

#endif /* MIXPREC_BENCH_LIMIT_H */
