/*
 * finite.h - helpers shared by the all_finite / unscale_check kernels (finite_<isa>.c) and
 * their tests. Not installed.
 *
 * Why the unscale kernels care about the floating-point environment: a user (or a library
 * built with -ffast-math, whose crtfastmath.o sets MXCSR at start-up) may run with
 * flush-to-zero (FTZ: tiny results become 0) and denormals-are-zero (DAZ: subnormal inputs
 * read as 0), or with a rounding direction other than nearest. The contract promises IEEE
 * default results whatever the mode, so
 *   - a hardware multiply is used only where neither operand is subnormal and the result is
 *     certainly normal (|x| >= the "tiny threshold" below), and only when the rounding mode
 *     is round-to-nearest (checked once per call);
 *   - everything else goes through exact integer arithmetic (finite_scalar.c), which no mode
 *     can change.
 */
#ifndef MIXPREC_KERNELS_FINITE_H
#define MIXPREC_KERNELS_FINITE_H

#include <stdbool.h>
#include <stdint.h>

/*
 * For inv normal and finite (exponent field 1..254): the smallest float32 bit pattern T >=
 * 0x00800000 such that every float32 x with T <= |x|bits is normal and |x * inv| >= 2^-124
 * (so the product is a normal float32, untouched by FTZ). Returns 0x7F800000 when no finite x
 * qualifies. Lanes with 0 < |x|bits < T take the exact path.
 */
uint32_t mxp__unscale_tiny_threshold(float inv);

/* (float)(1.0 / (double)scale) as docs/DESIGN.md section 7 defines inv, with the bits of the
 * default floating-point environment whatever FTZ/DAZ or the rounding direction say. */
float mxp__unscale_inv(float scale);

/* True when the unscale fast paths may use hardware multiplies: the current rounding mode is
 * round-to-nearest (x86: MXCSR.RC; elsewhere fegetround) and float arithmetic is not evaluated
 * in a wider format (FLT_EVAL_METHOD == 0). */
bool mxp__unscale_hw_ok(void);

/*
 * Test hooks: turn FTZ and DAZ on (true) or off (false) for the calling thread (x86 MXCSR
 * bits 15 and 6; AArch64 FPCR.FZ, which flushes both inputs and results).
 * Returns false (and changes nothing) where mixprec cannot set them (other targets).
 */
bool mxp__fp_set_flush_denormals(bool on);

#endif /* MIXPREC_KERNELS_FINITE_H */
