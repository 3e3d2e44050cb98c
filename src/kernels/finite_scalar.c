/* finite_scalar.c - placeholder until the scalar reference lands. */
#include "kernels.h"

void mxp__finite_register_scalar(mxp__kernels *k) { (void)k; }
