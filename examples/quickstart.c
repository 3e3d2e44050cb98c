/* placeholder quickstart: replaced by the conversion work */
#include <stdio.h>

#include "mixprec.h"

int main(void)
{
    printf("mixprec %s, kernels: %s\n", mxp_version(), mxp_isa());
    return 0;
}
