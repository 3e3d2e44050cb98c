/*
 * dispatch_emu512.c - the dispatcher of the test library mixprec_emu512: as src/kernels/
 * dispatch.c, except that the avx512 table (emulated, cvt_avx512_emu.c) is available on every
 * CPU that has the avx2 path. Test builds only.
 */
#define MXP_AVX512_EMULATED 1
#include "dispatch.c"
