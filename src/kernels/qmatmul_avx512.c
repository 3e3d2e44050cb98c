/* qmatmul_avx512.c - placeholder (filled in below) */
#include "kernels.h"
void mxp__qmm_register_avx512(mxp__kernels *k, bool vnni)
{
    (void)k;
    (void)vnni;
}
