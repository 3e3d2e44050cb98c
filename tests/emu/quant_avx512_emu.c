/*
 * quant_avx512_emu.c - the avx512 quantization kernels (src/kernels/quant_avx512.c: fused
 * float8 encode and MXFP8) compiled for a CPU without AVX-512 against the portable intrinsics of
 * avx512_emu.h. Test builds only (mixprec_emu512, test_quant_emu512).
 */
#define MXP_AVX512_EMULATED 1
#include "quant_avx512.c"
