/*
 * finite_avx512.c - avx512 kernels (placeholder: registers nothing yet, so the scalar entries stay).
 */
#include "kernels.h"

void mxp__finite_register_avx512(mxp__kernels *k) { (void)k; }
