/*
 * nt_store.h - streaming (non-temporal) vector stores for the x86 kernels. Not installed.
 *
 * The kernels choose per call between streaming and ordinary stores (`if (nt) stream; else
 * storeu;`, nt for calls too large for the caches). clang (14 checked) sinks such a pair of
 * stores, and the same store at the ends of two paths of a loop, into one ordinary store: the
 * non-temporal hint is metadata on the store, and merging keeps only what both stores share.
 * The merged store then reads each destination line before writing it (read-for-ownership),
 * a third more memory traffic for a float32 -> 16-bit conversion. In clang's build of
 * cvt_bf16_f32_hw__avx512 (f32 -> bf16, 2^26 elements) four of the loops' streaming stores had
 * become VMOVDQA64. AMD EPYC Zen 5, avx512, 2^26, three alternating runs, clang before / after
 * / gcc: f32 -> bf16 0.143 / 0.124 / 0.122-0.127 ns/element, f32 -> e5m2 stochastic 0.132 /
 * 0.107 / 0.106.
 *
 * So under clang the streaming stores are inline assembly, which no pass merges or rewrites;
 * gcc, which keeps them apart, gets the intrinsics. The emulated AVX-512 build of the tests
 * (MXP_AVX512_EMULATED, tests/emu/) keeps the intrinsics too: it maps them to emulations.
 * Every MXP__STREAM* needs p aligned to the vector's size, as the intrinsics do.
 */
#ifndef MIXPREC_NT_STORE_H
#define MIXPREC_NT_STORE_H

#include <immintrin.h>

#if defined(__clang__) && !defined(MXP_AVX512_EMULATED)
/* "v": any vector register the target has (xmm/ymm/zmm 0-31 with AVX-512); the operand's
 * type names the width, so VMOVNTDQ gets the register of that size */
#define MXP__STREAM_ASM(T, p, x)                                                               \
    __asm__ __volatile__("vmovntdq %1, %0" : "=m"(*(T *)(void *)(p)) : "v"((T)(x)))
#define MXP__STREAM128(p, x) MXP__STREAM_ASM(__m128i, p, x)
#define MXP__STREAM256(p, x) MXP__STREAM_ASM(__m256i, p, x)
#define MXP__STREAM512(p, x) MXP__STREAM_ASM(__m512i, p, x)
#else
#define MXP__STREAM128(p, x) _mm_stream_si128((__m128i *)(void *)(p), (x))
#define MXP__STREAM256(p, x) _mm256_stream_si256((__m256i *)(void *)(p), (x))
#define MXP__STREAM512(p, x) _mm512_stream_si512((void *)(p), (x))
#endif

#endif /* MIXPREC_NT_STORE_H */
