/* consumer.c - links against an installed mixprec and checks a few results; exit 0 on success. */
#include <stdio.h>
#include <string.h>

#include <mixprec.h>

int main(void)
{
    if (strcmp(mxp_version(), MXP_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s but library %s\n", MXP_VERSION_STRING, mxp_version());
        return 1;
    }
    mxp_dtype d;
    if (mxp_dtype_parse("bf16", &d) != MXP_OK || d != MXP_BFLOAT16) {
        fprintf(stderr, "dtype parse failed: %s\n", mxp_last_error());
        return 1;
    }
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7 in bfloat16: ties to even gives 1.0 (0x3F80). */
    const float in[3] = {1.0f + 1.0f / 256.0f, -2.0f, 65504.0f};
    unsigned short out[3];
    if (mxp_convert(out, d, in, MXP_FLOAT32, 3) != MXP_OK) {
        fprintf(stderr, "convert failed: %s\n", mxp_last_error());
        return 1;
    }
    if (out[0] != 0x3F80 || out[1] != 0xC000 || out[2] != 0x4780) {
        fprintf(stderr, "unexpected bits %04x %04x %04x\n", out[0], out[1], out[2]);
        return 1;
    }
    printf("consumer ok: mixprec %s, kernels %s\n", mxp_version(), mxp_isa());
    return 0;
}
