/*
 * finite_neon.c - all_finite / unscale_check for the neon table: nothing registered yet, so the
 * scalar reference (finite_scalar.c) serves AArch64. Its all_finite loops are plain integer
 * code that compilers vectorise with Advanced SIMD at -O2/-O3; unscale_check stays exact
 * whatever FPCR.FZ says because the scalar reference only uses the hardware multiply where FZ
 * cannot matter (finite.h).
 */
#include "kernels.h"

void mxp__finite_register_neon(mxp__kernels *k) { (void)k; }
