/*
 * mixprec/convert.h - exact, fast conversion between the six floating dtypes.
 *
 * Rules (docs/DESIGN.md section 4):
 *  - all 36 pairs of floating dtypes; widening is exact;
 *  - narrowing rounds the exact source value once, to nearest, ties to even (float64 ->
 *    float16 never double-rounds through float32);
 *  - subnormals in and out are exact whatever the CPU's MXCSR says; signed zeros are kept;
 *    NaN becomes NaN of the same sign (payload not promised);
 *  - overflow without saturate: a finite value that rounds past the max finite becomes +-inf
 *    (NaN of the input's sign for float8_e4m3fn: 0x7F / 0xFF); +-inf stays +-inf (NaN for e4m3fn);
 *  - saturate: the output is never +-inf: finite overflow and +-inf become +-max finite of the
 *    target, for every pair; NaN stays NaN;
 *  - stochastic rounding: one of the two neighbours, the upper with probability
 *    (x - lo) / (hi - lo) (using the top 32 bits of the dropped part); deterministic per
 *    (seed, element index) whatever the thread count or ISA path; exact values stay exact.
 *    An e5m2 source's target drops at most 7 bits, so each element draws 8 random bits: four
 *    neighbouring elements share one hashed word (a byte each); from e4m3fn (into e5m2) at
 *    most one bit is dropped, so 32 neighbours share a word, a bit each; an element of a
 *    float16 / bfloat16 source draws its 32 bits from two words shared with its neighbour;
 *    float32 -> bfloat16 drops exactly 16 bits, so an element draws 16, two neighbours
 *    sharing a word (a half each).
 *    Above the max finite value the upper neighbour is an overflow: +-inf (2^(emax+1)), or
 *    for float8_e4m3fn the NaN slot 0x7F, whose would-be value is 480 (so 456 becomes NaN
 *    with probability 1/4, or 448 when saturating);
 *  - NaN payloads: a NaN result is the target's quiet NaN with the input's sign, carrying the
 *    top payload bits of the source (e4m3fn: always 0x7F / 0xFF); identity pairs copy bits.
 * Every ISA path gives bit-identical results. MIXPREC_ISA=scalar|avx2|avx512|neon forces a path.
 * Every pair is vectorised on x86 (AVX2, AVX-512): float32 <-> narrow, float64 <-> every format
 * and most pairs between narrow formats by dedicated kernels, the rest composed exactly through
 * float32. On NEON: float32 <-> narrow, the narrow pairs composed, float64 scalar.
 * Floating-point environment: a conversion never traps, even with exceptions unmasked
 * (feenableexcept), and leaves the caller's MXCSR (x86) exactly as it found it: rounding mode,
 * flush-to-zero bits, masks and exception flags.
 *
 * Example:
 *     float x[3] = {0.1f, 70000.0f, -0.0f};
 *     uint16_t h[3];
 *     mxp_status s = mxp_convert(h, MXP_FLOAT16, x, MXP_FLOAT32, 3);  // 0x2E66 0x7C00 0x8000
 *     if (s != MXP_OK) fprintf(stderr, "%s\n", mxp_last_error());
 */
#ifndef MIXPREC_CONVERT_H
#define MIXPREC_CONVERT_H

#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Rounding modes for narrowing conversions. */
typedef enum mxp_rounding {
    MXP_ROUND_NEAREST_EVEN = 0, /**< round to nearest, ties to even (default) */
    MXP_ROUND_STOCHASTIC        /**< unbiased stochastic rounding, reproducible per (seed, index) */
} mxp_rounding;

/** Options for mxp_convert_ex. Zero-initialise for the defaults: {0} is nearest-even, no
 *  saturation, one thread. */
typedef struct mxp_convert_opts {
    mxp_rounding rounding; /**< default MXP_ROUND_NEAREST_EVEN */
    bool saturate;         /**< never produce +-inf: overflow and +-inf become +-max finite; NaN stays NaN */
    uint64_t seed;         /**< stochastic rounding stream */
    int threads;           /**< 0 or 1: the calling thread only; n > 1: up to n threads */
} mxp_convert_opts;

/**
 * Convert n elements from src (src_type) to dst (dst_type), rounding once to nearest-even,
 * without saturation, on the calling thread. Elements are in the host's byte order.
 * Any alignment is accepted; dst and src must not overlap unless they are the same buffer
 * and the two dtypes have the same size (in-place float16 <-> bfloat16, for example).
 * @retval MXP_OK          all n elements written (n == 0 does nothing, NULL buffers allowed)
 * @retval MXP_EINVAL      a non-floating or unknown dtype (even with n == 0), a NULL buffer
 *                         with n > 0, or overlapping buffers other than the in-place case;
 *                         the message names the argument; dst is untouched
 * Ownership: reads src, writes dst; keeps no pointer after returning.
 * Thread-safety: safe (concurrent calls on disjoint dst buffers). Allocates nothing.
 */
MXP_API mxp_status mxp_convert(void *dst, mxp_dtype dst_type, const void *src, mxp_dtype src_type,
                               size_t n);

/**
 * mxp_convert with options (opts may be NULL: the defaults). opts->threads > 1 splits large
 * arrays (2^22 = 4 194 304 elements per thread at least) into contiguous chunks over up
 * to that many threads, the calling thread included; small arrays stay on the calling thread.
 * The output bits never depend on the thread count: stochastic rounding draws its random bits
 * from (opts->seed, element index i in [0, n)).
 * @retval MXP_OK          all n elements written
 * @retval MXP_EINVAL      as mxp_convert, or an unknown rounding mode or a negative thread
 *                         count; the message names the option; dst is untouched
 * Threads: the chunks run on the calling thread and on worker threads that the library starts
 * at the first call that needs them (at most threads - 1 per call and 63 in all) and keeps,
 * asleep, for later calls, so a threaded call costs a wake-up, not a thread start. Workers block
 * every signal, and are stopped and joined when the process exits or the library is unloaded;
 * a child process after fork() starts its own. A worker that cannot be started is not an
 * error: the calling thread runs the chunks left to it.
 * Ownership: reads src and *opts, writes dst; keeps no pointer after returning.
 * Thread-safety: safe; concurrent threaded calls share the workers. Allocates nothing on one
 * thread; the workers' stacks (1 MiB each) at the first threaded call that needs them.
 */
MXP_API mxp_status mxp_convert_ex(void *dst, mxp_dtype dst_type, const void *src,
                                  mxp_dtype src_type, size_t n, const mxp_convert_opts *opts);

/**
 * Name of the kernel path conversions use on this CPU: "scalar", "avx2", "avx512" or "neon".
 * Chosen once, at the first call, from the CPU and MIXPREC_ISA: by default the best path this
 * CPU has (x86-64: "avx512" on CPUs with AVX-512 F/BW/VL/DQ, else "avx2" with AVX2 + FMA + F16C,
 * else "scalar"; AArch64: "neon"). The "avx512" path uses, entry by entry, the AVX-512 or the
 * AVX2 kernel, whichever measured faster (src/kernels/dispatch.c lists the numbers); every path
 * gives the same bits. MIXPREC_ISA=scalar|avx2|avx512|neon forces a path; one this CPU lacks
 * falls back to the best available one below it, and an unknown value means the default:
 * mxp_isa_fallback() reports either case.
 * Thread-safety: safe. The string is static.
 */
MXP_API const char *mxp_isa(void);

/**
 * The MIXPREC_ISA value the kernel path was chosen from (a copy of at most 63 bytes, read once,
 * at the first conversion or ISA query), or NULL when the variable was unset or empty.
 * Thread-safety: safe. The string is static.
 */
MXP_API const char *mxp_isa_requested(void);

/**
 * NULL when conversions use the path MIXPREC_ISA asked for, or when it asked for nothing;
 * otherwise a sentence saying why the request was not followed and which path is used instead,
 * e.g. "MIXPREC_ISA=\"bogus\" names no kernel path (expected scalar, avx2, avx512 or neon): using
 * avx2" or "MIXPREC_ISA=avx512: this CPU, its OS or this build lacks the avx512 path: using
 * avx2". The library never prints it; a program that cares shows it.
 * Thread-safety: safe. The string is static.
 */
MXP_API const char *mxp_isa_fallback(void);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_CONVERT_H */
