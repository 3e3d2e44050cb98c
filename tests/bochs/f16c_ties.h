/*
 * f16c_ties.h - the one emulator erratum the ISA tests may be told to accept (tests only).
 *
 * Bochs 2.7 (Debian's bochs package, which scripts/bochs_avx512.sh uses to run the native
 * AVX-512 code on CPUs without AVX-512) implements VCVTPS2PH with imm8 = round-to-nearest-even
 * as round-half-away-from-zero: 1 + 2^-11 becomes 0x3C01 instead of 0x3C00, 2^-25 becomes
 * 0x0001 instead of 0x0000 (Intel's SDM and every real F16C CPU round ties to even). The
 * kernels that use the instruction (float32 -> float16, and float32 -> float8 subnormals on
 * the float16 subnormal grid) then differ from the reference on exact ties only.
 *
 * tests/bochs/f16c_tie_probe.c detects the erratum inside the emulated machine; only then does
 * the script set MXP_TEST_F16C_TIES_AWAY=1, and only then does tie_away_tolerated() accept a
 * difference, and only this one: nearest-even mode, target float16 / e4m3fn / e5m2, a finite
 * float32 input lying exactly halfway between the reference result and the next value away
 * from zero, and that next value as the result. Everything else still fails. On real hardware
 * and in `make test` the variable is unset and nothing is tolerated.
 */
#ifndef MIXPREC_TEST_F16C_TIES_H
#define MIXPREC_TEST_F16C_TIES_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ref_convert.h"
#include "test_util.h"

/* Read on every call (only differences get here, so it is rare): tests/test_f16c_ties.c turns
 * it on and off within one process. */
static inline bool tie_away_enabled(void)
{
    const char *e = getenv("MXP_TEST_F16C_TIES_AWAY");
    return e && *e && strcmp(e, "0") != 0;
}

static inline bool tie_away_tolerated(int dst, int mode, uint32_t in32, uint64_t want, uint64_t got)
{
    if (!tie_away_enabled() || mode != MXP__RNE) return false;
    if (dst != MXP_FLOAT16 && dst != MXP_FLOAT8_E4M3FN && dst != MXP_FLOAT8_E5M2) return false;
    float x;
    memcpy(&x, &in32, 4);
    if (!isfinite(x)) return false;
    const uint64_t sign = dst == MXP_FLOAT16 ? 0x8000u : 0x80u;
    if ((want & sign) != (got & sign) || (got & ~sign) != (want & ~sign) + 1u) return false;
    const double w = ref_decode((mxp_dtype)dst, want), g = ref_decode((mxp_dtype)dst, got);
    if (isnan(w) || isnan(g) || isinf(g) || (signbit(x) != 0) != ((want & sign) != 0)) return false;
    return fabs((double)x) == (fabs(w) + fabs(g)) / 2; /* exact: both have <= 11 significant bits */
}

/* The composed paths (src/kernels/cvt_compose.c: float16 -> e4m3fn, float64 -> float16, ...)
 * reach VCVTPS2PH through float32 too. The tie a source element puts before the instruction is
 * its value as a float32, when it is exactly one: every narrow value, a float64 only then (the
 * float64 path rounds to odd first, and an inexact odd float32 is never a tie). in32 gets those
 * bits; false when the value is not exactly a finite float32 (or src is not a floating dtype). */
static inline bool tie_away_in32(int src, uint64_t bits, uint32_t *in32)
{
    if (src == MXP_FLOAT32) {
        *in32 = (uint32_t)bits;
        return true;
    }
    if (src < 0 || src >= MXP_FLOAT_DTYPE_COUNT) return false;
    const double x = ref_decode((mxp_dtype)src, bits);
    if (!isfinite(x) || (double)(float)x != x) return false;
    const float f = (float)x;
    memcpy(in32, &f, 4);
    return true;
}

/* tie_away_tolerated for a source element of any floating dtype. */
static inline bool tie_away_tolerated_src(int dst, int mode, int src, uint64_t in, uint64_t want, uint64_t got)
{
    uint32_t x;
    return tie_away_enabled() && tie_away_in32(src, in, &x) && tie_away_tolerated(dst, mode, x, want, got);
}

/* The first of n outputs (`ob` bytes each) where got differs from want in a way
 * tie_away_tolerated_src does not accept, or n; the accepted differences are added to
 * *tolerated. in: the inputs, of dtype src (any alignment), or NULL (then nothing is
 * accepted). */
static inline size_t tie_away_first_diff(const unsigned char *want, const unsigned char *got,
                                         const void *in, int src, size_t n, size_t ob, int dst, int mode,
                                         size_t *tolerated)
{
    const size_t ib = src >= 0 && src < MXP_FLOAT_DTYPE_COUNT ? mxp_dtype_size((mxp_dtype)src) : 0;
    size_t i = tu_first_diff(want, got, n, ob);
    while (i < n && in && ib &&
           tie_away_tolerated_src(dst, mode, src, tu_elem(in, i, ib), tu_elem(want, i, ob), tu_elem(got, i, ob))) {
        ++*tolerated;
        i++;
        i += tu_first_diff(want + i * ob, got + i * ob, n - i, ob);
    }
    return i;
}

#endif /* MIXPREC_TEST_F16C_TIES_H */
