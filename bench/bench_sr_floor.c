/*
 * bench_sr_floor.c - how close stochastic rounding can get to nearest-even in cache with the
 * library's random words, on the CPU it runs on.
 *
 * Stochastic rounding (convert.h) draws one 32-bit word per element from a counter hash
 * (kernels.h's mxp__sr_bits_k: a Weyl step and two xorshift-multiply rounds; the SIMD fast paths
 * compute it as cvt_simd_impl.h's sr_words_hi, 7 vector operations per vector of words after
 * the Weyl add). In cache a pass is bound by how many vector operations it issues, so the words
 * cost about as much time as their operations whatever else the pass does. This program times,
 * on 2^16 float32 elements (in cache), one thread, the active ISA path (MIXPREC_ISA may force one):
 *   - ne, sr:  mxp_convert_ex, nearest-even and stochastic, float32 -> each narrow format;
 *   - words:   the random words alone, the fast paths' way (Weyl add, sr_words_hi), four
 *              vectors XOR-folded into one store (a float8 pass's store traffic);
 *   - floor16: a bfloat16-like stochastic loop with no range, NaN or overflow test at all:
 *              load, words, t = u + (r >> 16), the high halves stored. Every stochastic
 *              rounding to a 16-bit format does at least this (float16's rounding is the same
 *              add at another bit), so its time bounds theirs from below;
 *   - half16:  floor16 with one full word per two elements (its low half for one vector of
 *              elements, its high half for the next): a bfloat16 stream needs only the 16 bits
 *              it drops, so this is the floor of the cheapest 16-bit draw from the same hash
 *              (the library does not draw so: every element has its own word).
 * and prints sr / ne, words / ne, floor16 / ne and half16 / ne. A pass that adds the words to a
 * nearest-even amount of work takes about 1 + words / ne; issue 17's goal, sr <= 1.5x ne, needs
 * the words to cost at most half of ne (the "budget" column). The kernels' own range and NaN
 * tests add about 0.2x ne to the floor (bfloat16: sr - floor16).
 *
 * Usage: bench_sr_floor [--csv]   (x86-64 with AVX2 or AVX-512; elsewhere it says so, exit 0)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_limit.h"
#include "bench_util.h"
#include "kernels.h"
#include "mixprec.h"

enum { N = 1 << 16 };

typedef struct conv_ctx {
    void *dst;
    const float *src;
    mxp_dtype dt;
    mxp_convert_opts opts;
} conv_ctx;

static void conv_fn(void *p)
{
    const conv_ctx *c = p;
    if (mxp_convert_ex(c->dst, c->dt, c->src, MXP_FLOAT32, N, &c->opts) != MXP_OK) abort();
}

#ifdef BL_X86
typedef struct words_ctx {
    const float *src;
    void *dst;
    uint32_t key_lo, key_hi;
} words_ctx;

/* the fast paths' words (cvt_simd_impl.h's sr_words_hi), from the Weyl states x */
__attribute__((target("avx512f"))) static inline __m512i words_v16(__m512i x, __m512i khi,
                                                                   __m512i m1, __m512i m2)
{
    x = _mm512_mullo_epi32(_mm512_xor_si512(x, _mm512_srli_epi32(x, 16)), m1);
    x = _mm512_add_epi32(_mm512_xor_si512(x, _mm512_srli_epi32(x, 15)), khi);
    return _mm512_mullo_epi32(x, m2);
}
__attribute__((target("avx2"))) static inline __m256i words_v8(__m256i x, __m256i khi, __m256i m1,
                                                               __m256i m2)
{
    x = _mm256_mullo_epi32(_mm256_xor_si256(x, _mm256_srli_epi32(x, 16)), m1);
    x = _mm256_add_epi32(_mm256_xor_si256(x, _mm256_srli_epi32(x, 15)), khi);
    return _mm256_mullo_epi32(x, m2);
}
#define WORDS_LOOP(T, L, SET1, SETR_IOTA, XOR, MUL, ADD, STORE, WORDS)                             \
    do {                                                                                           \
        const T m1 = SET1((int)MXP__SR_M1), m2 = SET1((int)MXP__SR_M2),                            \
                khi = SET1((int)c->key_hi);                                                        \
        const T step = SET1((int)((uint32_t)(L)*MXP__SR_W));                                       \
        T x = ADD(SET1((int)c->key_lo), MUL(SETR_IOTA, SET1((int)MXP__SR_W)));                     \
        unsigned char *d = c->dst;                                                                 \
        for (size_t i = 0; i < N; i += 4 * (L)) {                                                  \
            const T x1 = ADD(x, step), x2 = ADD(x1, step), x3 = ADD(x2, step);                     \
            const T r0 = WORDS(x, khi, m1, m2), r1 = WORDS(x1, khi, m1, m2);                       \
            const T r2 = WORDS(x2, khi, m1, m2), r3 = WORDS(x3, khi, m1, m2);                      \
            STORE(d + i, XOR(XOR(r0, r1), XOR(r2, r3)));                                           \
            x = ADD(x3, step);                                                                     \
        }                                                                                          \
        __asm__ __volatile__("" : : "r"(d) : "memory"); /* d escapes: the stores stay */           \
    } while (0)

#define S512_SET1     _mm512_set1_epi32
#define S512_IOTA     _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define S512_ST(p, x) _mm512_store_si512((void *)(p), (x))
#define S256_SET1     _mm256_set1_epi32
#define S256_IOTA     _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
#define S256_ST(p, x) _mm256_store_si256((__m256i *)(void *)(p), (x))

__attribute__((target("avx512f"))) static void words512(void *p)
{
    const words_ctx *c = p;
    WORDS_LOOP(__m512i, 16, S512_SET1, S512_IOTA, _mm512_xor_si512, _mm512_mullo_epi32,
               _mm512_add_epi32, S512_ST, words_v16);
}
__attribute__((target("avx2"))) static void words256(void *p)
{
    const words_ctx *c = p;
    WORDS_LOOP(__m256i, 8, S256_SET1, S256_IOTA, _mm256_xor_si256, _mm256_mullo_epi32,
               _mm256_add_epi32, S256_ST, words_v8);
}

/* The words timed are the library's: one vector of them against kernels.h's scalar hash
 * (sr_words_hi stops before its last step, x ^= x >> 21). 1 = equal. */
static int words_match(const uint32_t *w, int lanes, const words_ctx *c)
{
    const uint64_t key = (uint64_t)c->key_hi << 32 | c->key_lo;
    for (int i = 0; i < lanes; i++)
        if ((w[i] ^ (w[i] >> 21)) != mxp__sr_bits_k(key, (uint32_t)i)) return 0;
    return 1;
}
__attribute__((target("avx512f"))) static int words_ok512(const words_ctx *c)
{
    uint32_t w[16];
    const __m512i x =
        _mm512_add_epi32(_mm512_set1_epi32((int)c->key_lo),
                         _mm512_mullo_epi32(S512_IOTA, _mm512_set1_epi32((int)MXP__SR_W)));
    _mm512_storeu_si512(w, words_v16(x, _mm512_set1_epi32((int)c->key_hi),
                                     _mm512_set1_epi32((int)MXP__SR_M1),
                                     _mm512_set1_epi32((int)MXP__SR_M2)));
    return words_match(w, 16, c);
}
__attribute__((target("avx2"))) static int words_ok256(const words_ctx *c)
{
    uint32_t w[8];
    const __m256i x =
        _mm256_add_epi32(_mm256_set1_epi32((int)c->key_lo),
                         _mm256_mullo_epi32(S256_IOTA, _mm256_set1_epi32((int)MXP__SR_W)));
    _mm256_storeu_si256((__m256i *)(void *)w, words_v8(x, _mm256_set1_epi32((int)c->key_hi),
                                                       _mm256_set1_epi32((int)MXP__SR_M1),
                                                       _mm256_set1_epi32((int)MXP__SR_M2)));
    return words_match(w, 8, c);
}

/* floor16 (half = 0): 2 vectors of float32 per step, t = u + (r >> 16) with a word vector each,
 * the high halves stored in order. half16 (half = 1): one word vector per step, completed
 * (sr_finish's last step, as the low half needs it), its low halves added to the first vector
 * and its high halves to the second. */
#define SR512 __attribute__((target("avx512f,avx512bw")))
SR512 static inline __attribute__((always_inline)) void pass512(const words_ctx *c, int half)
{
    const __m512i m1 = _mm512_set1_epi32((int)MXP__SR_M1), m2 = _mm512_set1_epi32((int)MXP__SR_M2),
                  khi = _mm512_set1_epi32((int)c->key_hi),
                  step = _mm512_set1_epi32((int)(16u * MXP__SR_W)), lo16 = _mm512_set1_epi32(0xFFFF);
    __m512i x = _mm512_add_epi32(_mm512_set1_epi32((int)c->key_lo),
                                 _mm512_mullo_epi32(S512_IOTA, _mm512_set1_epi32((int)MXP__SR_W)));
    /* output word j = word 2j + 1 of (t0, t1) (VPERMT2W numbers t1's words 32-63): the high halves
     * in order; dword i holds the indices 4i + 1 and 4i + 3 */
    const __m512i hi = _mm512_add_epi32(
        _mm512_or_si512(_mm512_slli_epi32(S512_IOTA, 2), _mm512_slli_epi32(S512_IOTA, 18)),
        _mm512_set1_epi32(0x00030001));
    for (size_t i = 0; i < N; i += 32) {
        __m512i a0, a1; /* the 16 random bits of each lane */
        if (half) {
            __m512i w = words_v16(x, khi, m1, m2);
            w = _mm512_xor_si512(w, _mm512_srli_epi32(w, 21));
            a0 = _mm512_and_si512(w, lo16);
            a1 = _mm512_srli_epi32(w, 16);
            x = _mm512_add_epi32(x, step);
        } else {
            const __m512i x1 = _mm512_add_epi32(x, step);
            a0 = _mm512_srli_epi32(words_v16(x, khi, m1, m2), 16);
            a1 = _mm512_srli_epi32(words_v16(x1, khi, m1, m2), 16);
            x = _mm512_add_epi32(x1, step);
        }
        const __m512i t0 = _mm512_add_epi32(_mm512_loadu_si512(c->src + i), a0);
        const __m512i t1 = _mm512_add_epi32(_mm512_loadu_si512(c->src + i + 16), a1);
        _mm512_storeu_si512((unsigned char *)c->dst + 2 * i, _mm512_permutex2var_epi16(t0, hi, t1));
    }
    __asm__ __volatile__("" : : "r"(c->dst) : "memory");
}
SR512 static void floor512(void *p) { pass512(p, 0); }
SR512 static void half512(void *p) { pass512(p, 1); }

#define SR256 __attribute__((target("avx2")))
SR256 static inline __attribute__((always_inline)) void pass256(const words_ctx *c, int half)
{
    const __m256i m1 = _mm256_set1_epi32((int)MXP__SR_M1), m2 = _mm256_set1_epi32((int)MXP__SR_M2),
                  khi = _mm256_set1_epi32((int)c->key_hi),
                  step = _mm256_set1_epi32((int)(8u * MXP__SR_W)), lo16 = _mm256_set1_epi32(0xFFFF);
    __m256i x = _mm256_add_epi32(_mm256_set1_epi32((int)c->key_lo),
                                 _mm256_mullo_epi32(S256_IOTA, _mm256_set1_epi32((int)MXP__SR_W)));
    for (size_t i = 0; i < N; i += 16) {
        __m256i a0, a1;
        if (half) {
            __m256i w = words_v8(x, khi, m1, m2);
            w = _mm256_xor_si256(w, _mm256_srli_epi32(w, 21));
            a0 = _mm256_and_si256(w, lo16);
            a1 = _mm256_srli_epi32(w, 16);
            x = _mm256_add_epi32(x, step);
        } else {
            const __m256i x1 = _mm256_add_epi32(x, step);
            a0 = _mm256_srli_epi32(words_v8(x, khi, m1, m2), 16);
            a1 = _mm256_srli_epi32(words_v8(x1, khi, m1, m2), 16);
            x = _mm256_add_epi32(x1, step);
        }
        const __m256i t0 = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(c->src + i)), a0);
        const __m256i t1 = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(c->src + i + 8)), a1);
        /* packus after the shift (values < 2^16) puts the halves in lane order 0-3 8-11 4-7 12-15
         */
        const __m256i h = _mm256_packus_epi32(_mm256_srli_epi32(t0, 16), _mm256_srli_epi32(t1, 16));
        _mm256_storeu_si256((__m256i *)(void *)((unsigned char *)c->dst + 2 * i),
                            _mm256_permute4x64_epi64(h, 0xD8));
    }
    __asm__ __volatile__("" : : "r"(c->dst) : "memory");
}
SR256 static void floor256(void *p) { pass256(p, 0); }
SR256 static void half256(void *p) { pass256(p, 1); }
#endif

int main(int argc, char **argv)
{
    int csv = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--csv") == 0) {
            csv = 1;
            continue;
        }
        fprintf(stderr, "usage: %s [--csv]\n", argv[0]);
        return 2;
    }
    char cpu[256];
    bl_cpu_name(cpu, sizeof cpu);
    printf("# CPU: %s\n# active path: %s; n = 2^16 float32 elements (in cache), one thread\n", cpu,
           mxp_isa());
#ifndef BL_X86
    (void)csv;
    (void)conv_fn;
    printf("# bench_sr_floor: x86-64 only; nothing measured on this CPU\n");
    return 0;
#else
    const int w512 = strcmp(mxp_isa(), "avx512") == 0, w256 = strcmp(mxp_isa(), "avx2") == 0;
    if (!w512 && !w256) {
        printf("# bench_sr_floor: the active path is neither avx2 nor avx512: nothing measured\n");
        return 0;
    }
    float *src = aligned_alloc(64, 4 * (size_t)N);
    unsigned char *dst = aligned_alloc(64, 4 * (size_t)N);
    if (!src || !dst) {
        fprintf(stderr, "bench_sr_floor: out of memory\n");
        free(src);
        free(dst);
        return 1;
    }
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < N; i++) { /* uniform over [-8, 8], as bench_convert's default */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        src[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 16.0 - 8.0);
    }
    memset(dst, 0, 4 * (size_t)N);
    words_ctx wc = {src, dst, 0x12345678u, 0x9ABCDEF0u};
    if (!(w512 ? words_ok512(&wc) : words_ok256(&wc))) {
        fprintf(stderr, "bench_sr_floor: the words differ from kernels.h's mxp__sr_bits_k\n");
        free(src);
        free(dst);
        return 1;
    }
    const double words = bu_time_median(w512 ? words512 : words256, &wc) / N;
    const double floor16 = bu_time_median(w512 ? floor512 : floor256, &wc) / N;
    const double half16 = bu_time_median(w512 ? half512 : half256, &wc) / N;
    const struct {
        const char *name;
        mxp_dtype dt;
    } t[] = {{"f32->bf16", MXP_BFLOAT16},
             {"f32->f16", MXP_FLOAT16},
             {"f32->e4m3fn", MXP_FLOAT8_E4M3FN},
             {"f32->e5m2", MXP_FLOAT8_E5M2}};
    if (csv)
        printf(
            "conversion,ne_ns,sr_ns,sr_over_ne,words_ns,words_over_ne,floor16_over_ne,half16_over_ne,"
            "budget_ns\n");
    else
        printf("%-12s %8s %8s %7s %8s %9s %9s %9s %10s\n", "conversion", "ne ns", "sr ns", "sr/ne",
               "words ns", "words/ne", "floor16/ne", "half16/ne", "budget ns");
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        conv_ctx c = {dst, src, t[k].dt, {0}};
        c.opts.rounding = MXP_ROUND_NEAREST_EVEN;
        const double ne = bu_time_median(conv_fn, &c) / N;
        c.opts.rounding = MXP_ROUND_STOCHASTIC;
        c.opts.seed = 42;
        const double sr = bu_time_median(conv_fn, &c) / N;
        const int b16 = mxp_dtype_size(t[k].dt) == 2;
        if (csv) {
            char f16s[32] = "", h16s[32] = "";
            if (b16) {
                snprintf(f16s, sizeof f16s, "%.2f", floor16 / ne);
                snprintf(h16s, sizeof h16s, "%.2f", half16 / ne);
            }
            printf("%s,%.4f,%.4f,%.2f,%.4f,%.2f,%s,%s,%.4f\n", t[k].name, ne, sr, sr / ne, words,
                   words / ne, f16s, h16s, 0.5 * ne);
        } else if (b16)
            printf("%-12s %8.4f %8.4f %6.2fx %8.4f %8.2fx %8.2fx %8.2fx %10.4f\n", t[k].name, ne,
                   sr, sr / ne, words, words / ne, floor16 / ne, half16 / ne, 0.5 * ne);
        else
            printf("%-12s %8.4f %8.4f %6.2fx %8.4f %8.2fx %9s %9s %10.4f\n", t[k].name, ne, sr,
                   sr / ne, words, words / ne, "-", "-", 0.5 * ne);
    }
    printf("# words = ns/element of the random words alone; floor16 = %.4f ns/element (a 16-bit\n"
           "# stochastic pass without range or NaN tests); half16 = %.4f (the same with one word per\n"
           "# two elements); budget = the words' most for sr <= 1.5x ne\n",
           floor16, half16);
    free(src);
    free(dst);
    return 0;
#endif
}
