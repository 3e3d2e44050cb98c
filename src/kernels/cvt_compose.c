/*
 * cvt_compose.c - the conversion pairs no ISA file accelerates directly, composed from a SIMD
 * table's own float32 kernels through a float32 buffer that stays in L1.
 *
 * The ISA files accelerate float32 <-> float16 / bfloat16 / float8, on x86 also float64 <->
 * everything and most pairs between narrow formats (listed at the end), all registered after
 * these and replacing them. Every other pair used to run the scalar reference at 2-8 ns per
 * element, twenty to eighty times slower than its float32 neighbours. Each is now two kernel
 * calls per block of BLOCK elements, and the composition is exact, i.e. bit-identical to the
 * reference: narrow -> narrow (e.g. float16 -> bfloat16, e4m3fn -> float16) and narrow ->
 * float64 widen to float32 first, which is exact (every narrow value, NaN payload included, is
 * a float32), so the second step rounds the same value the reference rounds, once. Stochastic
 * rounding too: its decision depends only on the value and on r = mxp__sr_bits(seed, index)
 * (kernels.h), and the block passes each element's own index; not from 16-bit or float8 sources,
 * whose elements share words (mxp__sr_bits_src) in their own way, not the float32 kernels'. The
 * first step never saturates (a
 * +-inf input must reach the second step as infinity, to become that format's max). float64
 * sources are not composed here: x86 has its own kernels for them (cvt_f64_avx2.c, and
 * cvt_simd_impl.h's n64_loop, which rounds to odd first), NEON keeps the scalar ones.
 * Threads: mxp_convert_ex splits calls as for any entry; BLOCK bounds the stack use (8 KB).
 *
 * Large calls (n * (input + output bytes) >= mxp__nt_threshold) into a 16-bit or float64 format
 * stream: every block's second step gets args.stream, so it stores non-temporally although its
 * own n is small, and leaves the fence to this function, which fences once after the last block
 * (a fence per block waited for every block's stores to drain: e5m2 -> bfloat16 at 2^26 got 1.6x
 * slower). Into float8 they do not: the float32 -> float8 kernels' streaming steps are built to
 * hide memory latency and are slower on a source in L1 (session 23), and a byte per element saves
 * little read-for-ownership; float16 -> e5m2 at 2^26 was 1.3-1.8x slower streamed (six
 * processes). AMD Zen 4, avx512, 2^26 elements, a harness timing both builds alternately in one
 * process (medians of 9-25 calls; the composed paths' times also move by up to 1.5x from one
 * process to the next), before / after: e5m2 -> bfloat16 0.243 / 0.165 ns/element, bfloat16 ->
 * float16 0.63x (median of eight processes) (bench/RESULTS.md, session 26). On x86 float8 ->
 * float16 / bfloat16, bfloat16 <-> float16 nearest-even, float16 / bfloat16 -> float8
 * nearest-even, e4m3fn <-> e5m2 nearest-even and stochastic rounding from float16 / bfloat16 no
 * longer come here (mxp__cvt_register_avx2_pairs / _avx512_pairs; session 27), nor, since
 * session 28, narrow -> float64 (cvt_simd_impl.h's w64_loop: the same two steps in registers).
 * On x86 nothing comes here since session 44. The last pairs, stochastic rounding between the
 * two float8s (a direct loop through float32 lanes lost to this path), are byte kernels: on CPUs
 * with AVX512_VBMI by tables (cvt_avx512.c's f8s_loop, session 29: 0.34-0.48x of this path's
 * time), elsewhere AVX2's (cvt_avx2.c's f8s2_loop, on the avx512 table too; Intel Xeon, 2^26,
 * 0.41-0.52x on the avx2 table, 0.56-0.65x on the avx512 one). The wrappers are still registered
 * first, so a pair without a kernel of its own would come here. On NEON: every pair between narrow
 * formats and from them to float64, except stochastic rounding from 16-bit and float8 sources
 * (the scalar reference since session 46, when their elements began to share random words).
 */
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h> /* _mm_sfence */
#endif

#include "kernels.h"

enum { BLOCK = 2048 };

static const mxp__kernels *tabs[MXP__ISA_COUNT];

static const size_t dt_bytes[MXP_FLOAT_DTYPE_COUNT] = {8, 4, 2, 2, 1, 1};

static void via_f32(int isa, int d, int s, int mode, void *dst, const void *src, size_t n,
                    const mxp__cvt_args *a)
{
    const mxp__kernels *k = tabs[isa];
    const unsigned char *sp = (const unsigned char *)src;
    unsigned char *dp = (unsigned char *)dst;
    const size_t ib = dt_bytes[s], ob = dt_bytes[d];
    const mxp__cvt_args exact = {false, a->seed, a->index0, false};
    /* a call large enough to stream streams every block's second step (its own n is small),
     * except into float8 (see above) */
    const bool stream = a->stream || (ob >= 2 && n * (ib + ob) >= mxp__nt_threshold);
    uint32_t tmp[BLOCK];
    for (size_t i = 0; i < n; i += BLOCK) {
        const size_t m = n - i < BLOCK ? n - i : BLOCK;
        k->cvt[MXP_FLOAT32][s][MXP__RNE](tmp, sp + ib * i, m, &exact);
        mxp__cvt_args ai = *a;
        ai.index0 = a->index0 + i;
        ai.stream = stream;
        k->cvt[d][MXP_FLOAT32][mode](dp + ob * i, tmp, m, &ai);
    }
#if defined(__x86_64__) || defined(__i386__)
    if (stream && !a->stream) _mm_sfence(); /* the blocks' streaming stores, fenced once */
#endif
}

/* One wrapper per (ISA, dst, src, mode): a kernel entry carries no dtypes, so they are baked in.
 * ISA ids 1-3 (avx2, avx512, neon); the pairs that are not composed are never registered. */
#define CW(I, D, S, M)                                                                        \
    static void cw_##I##_##D##_##S##_##M(void *dst, const void *src, size_t n, const mxp__cvt_args *a) \
    {                                                                                         \
        via_f32(I, D, S, M, dst, src, n, a);                                                  \
    }
#define CW_S(I, D, S) CW(I, D, S, 0) CW(I, D, S, 1)
#define CW_D(I, D) CW_S(I, D, 0) CW_S(I, D, 1) CW_S(I, D, 2) CW_S(I, D, 3) CW_S(I, D, 4) CW_S(I, D, 5)
#define CW_I(I) CW_D(I, 0) CW_D(I, 1) CW_D(I, 2) CW_D(I, 3) CW_D(I, 4) CW_D(I, 5)
CW_I(1)
CW_I(2)
CW_I(3)

#define CT_S(I, D, S) {cw_##I##_##D##_##S##_0, cw_##I##_##D##_##S##_1}
#define CT_D(I, D) {CT_S(I, D, 0), CT_S(I, D, 1), CT_S(I, D, 2), CT_S(I, D, 3), CT_S(I, D, 4), CT_S(I, D, 5)}
#define CT_I(I) {CT_D(I, 0), CT_D(I, 1), CT_D(I, 2), CT_D(I, 3), CT_D(I, 4), CT_D(I, 5)}
static const mxp__cvt_fn wrappers[3][MXP_FLOAT_DTYPE_COUNT][MXP_FLOAT_DTYPE_COUNT][MXP__NMODES] = {
    CT_I(1), CT_I(2), CT_I(3)};

_Static_assert(MXP__ISA_AVX2 == 1 && MXP__ISA_AVX512 == 2 && MXP__ISA_NEON == 3, "ISA ids of the wrappers");
_Static_assert(MXP_FLOAT64 == 0 && MXP_FLOAT32 == 1 && MXP_FLOAT16 == 2 && MXP_BFLOAT16 == 3 &&
                   MXP_FLOAT8_E4M3FN == 4 && MXP_FLOAT8_E5M2 == 5,
               "dtype ids of dt_bytes and the wrappers");

void mxp__cvt_register_compose(mxp__kernels *k)
{
    const int isa = (int)k->isa;
    if (isa < 1 || isa > 3) return;
    tabs[isa] = k;
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++) {
        for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++) {
            if (d == s || d == MXP_FLOAT32 || s == MXP_FLOAT32 || s == MXP_FLOAT64) continue;
            k->cvt[d][s][MXP__RNE] = wrappers[isa - 1][d][s][MXP__RNE];
            /* from 16-bit and float8 sources neighbouring elements share random words
             * (kernels.h) in their own way, not the second step's: such pairs keep the entry
             * they have (the scalar reference; on x86 srw_loop and the byte kernels replace it) */
            if (mxp__sr_shift((mxp_dtype)s, (mxp_dtype)d) == 0)
                k->cvt[d][s][MXP__SR] = wrappers[isa - 1][d][s][MXP__SR];
        }
    }
}
