/*
 * qmatmul_avx512_emu.c - the avx512 int8 matmul kernels (src/kernels/qmatmul_avx512.c, both the
 * AVX-512BW and the VNNI variant) compiled for a CPU without AVX-512 against the portable
 * intrinsics of avx512_emu.h. Test builds only (mixprec_emu512, test_qmatmul_emu512).
 */
#define MXP_AVX512_EMULATED 1
#include "qmatmul_avx512.c"
