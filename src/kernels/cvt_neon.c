/*
 * cvt_neon.c - neon kernels (placeholder: registers nothing yet, so the scalar entries stay).
 */
#include "kernels.h"

void mxp__cvt_register_neon(mxp__kernels *k) { (void)k; }
