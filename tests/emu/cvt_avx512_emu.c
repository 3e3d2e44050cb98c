/*
 * cvt_avx512_emu.c - the avx512 conversion kernels compiled for a CPU without AVX-512: the
 * same source (src/kernels/cvt_avx512.c + cvt_simd_impl.h) with its intrinsics taken from
 * avx512_emu.h (SIMDe plus a few written here). Test builds only (mixprec_emu512).
 */
#define MXP_AVX512_EMULATED 1
/* one copy of each loop (saturate / streaming as run-time flags): the emulated intrinsics are
 * inlined for speed, and four copies took gcc minutes to compile */
#define MXP_SIMD_NO_SPECIALISE 1
#include "cvt_avx512.c"
