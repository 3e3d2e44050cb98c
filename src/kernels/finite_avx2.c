/*
 * finite_avx2.c - avx2 kernels (placeholder: registers nothing yet, so the scalar entries stay).
 */
#include "kernels.h"

void mxp__finite_register_avx2(mxp__kernels *k) { (void)k; }
