/*
 * finite_avx512.c - all_finite / unscale_check for the avx512 table.
 *
 * These passes are memory-bound at the sizes that matter (a gradient buffer streams once
 * through DRAM), where the AVX2 kernels already run at copy speed, so the avx512 table reuses
 * them (an AVX-512 CPU has AVX2 + F16C: dispatch.c requires both for this path). Nothing here
 * needs AVX512_BF16/FP16. Wider kernels would only help buffers that fit in L1/L2; they would
 * also need an AVX-512 machine to be tested on, which this project's CI does not have yet.
 */
#include "kernels.h"

void mxp__finite_register_avx512(mxp__kernels *k) { mxp__finite_register_avx2(k); }
