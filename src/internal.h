/*
 * internal.h - helpers shared by the portable layer (not installed).
 * Internal functions with external linkage are named mxp__*; they are hidden in the shared
 * library (-fvisibility=hidden) and reachable from tests through the static library.
 */
#ifndef MIXPREC_INTERNAL_H
#define MIXPREC_INTERNAL_H

#include "mixprec.h"

#if defined(__GNUC__) || defined(__clang__)
#define MXP__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MXP__PRINTF(a, b)
#endif

/* Record a printf-style message as this thread's last error and return s.
 * Typical use: return mxp__fail(MXP_EPARSE, "unknown key '%s' in '%s'", key, text); */
mxp_status mxp__fail(mxp_status s, const char *fmt, ...) MXP__PRINTF(2, 3);

/* True when d is a valid mxp_dtype value. */
static inline bool mxp__dtype_valid(mxp_dtype d) { return (unsigned)d < MXP_DTYPE_COUNT; }

/*
 * The floating-point environment around a kernel call. The SIMD kernels (and the scalar
 * unscale's float32 multiply) use the SSE/AVX floating-point unit, which raises exception flags
 * (inexact, overflow, invalid for a signalling NaN) and traps where the caller unmasked an
 * exception (feenableexcept, a common way to catch NaNs while debugging training code). So the
 * array passes (conversion chunks, mxp_all_finite, mxp_unscale_check) run with every exception
 * masked and give MXCSR back exactly as they found it (rounding mode, masks and flags): no
 * SIGFPE, no stray flags for the caller's fetestexcept. Reading MXCSR costs about a cycle;
 * writing it (only when something is unmasked or a flag was raised) some tens.
 *     const unsigned csr = mxp__fenv_enter();  ...kernel...;  mxp__fenv_leave(csr);
 */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && defined(__SSE__)
static inline unsigned mxp__fenv_enter(void)
{
    const unsigned csr = __builtin_ia32_stmxcsr();
    if ((csr & 0x1F80u) != 0x1F80u) __builtin_ia32_ldmxcsr(csr | 0x1F80u);
    return csr;
}
static inline void mxp__fenv_leave(unsigned csr)
{
    if (__builtin_ia32_stmxcsr() != csr) __builtin_ia32_ldmxcsr(csr);
}
#else
static inline unsigned mxp__fenv_enter(void) { return 0; }
static inline void mxp__fenv_leave(unsigned csr) { (void)csr; }
#endif

/* mxp_convert_ex starts a thread only for at least this many elements per thread (src/convert.c
 * says how it was measured). Tests lower it to exercise the threaded path on small arrays;
 * nothing else writes it. */
extern size_t mxp__convert_min_per_thread;

#endif /* MIXPREC_INTERNAL_H */
