/*
 * quant_avx512.c - the quantization kernels of the avx512 table.
 *
 * The passes are memory-bound for the sizes that matter (a weight matrix or an activation
 * streams from DRAM once or twice), where the AVX2 kernels already run near copy speed, so the
 * avx512 table reuses them, as finite_avx512.c does (an AVX-512 CPU has AVX2: dispatch.c
 * requires it for this path). Wider kernels would need an AVX-512 machine to be timed on.
 */
#include "quant_kernels.h"

void mxp__quant_register_avx512(mxp__qkernels *k) { mxp__quant_register_avx2(k); }
