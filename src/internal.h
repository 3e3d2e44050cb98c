/*
 * internal.h - helpers shared by the portable layer (not installed).
 * Internal functions with external linkage are named mxp__*; they are hidden in the shared
 * library (-fvisibility=hidden) and reachable from tests through the static library.
 */
#ifndef MIXPREC_INTERNAL_H
#define MIXPREC_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "mixprec.h"

#if defined(__GNUC__) || defined(__clang__)
#define MXP__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MXP__PRINTF(a, b)
#endif

/* Record a printf-style message as this thread's last error and return s.
 * Typical use: return mxp__fail(MXP_EPARSE, "unknown key '%s' in '%s'", key, text); */
mxp_status mxp__fail(mxp_status s, const char *fmt, ...) MXP__PRINTF(2, 3);
#ifdef __clang_analyzer__
/* The static analyzer (scripts/analyze.sh) does not step into variadic functions such as
 * mxp__fail (status.c), so it would take a failure for MXP_OK and walk on with *out unset:
 * under the analyzer only, a call is also seen to return its status. */
#define mxp__fail(s, ...) (mxp__fail((s), __VA_ARGS__), (s))
#endif
/* s, after heading the current message with "fn: " when s is a failure (a head naming another
 * function is replaced): a public function's failures name it, also those recorded by a step it
 * shares with other functions. Typical use: return mxp__in("mxp_policy_map_load", s); */
mxp_status mxp__in(const char *fn, mxp_status s);
/* The current message without its head "mxp_...: " (for quoting it inside another message). */
const char *mxp__error_body(void);

/* True when d is a valid mxp_dtype value. */
static inline bool mxp__dtype_valid(mxp_dtype d) { return (unsigned)d < MXP_DTYPE_COUNT; }

/* f is finite and > 0, read from its bits: a comparison would see a subnormal as 0 under the
 * caller's denormals-are-zero (loss scales, quantization and matmul scales may be subnormal) */
static inline bool mxp__positive_finite(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u != 0 && u < 0x7F800000u; /* sign clear, not zero, exponent below inf / NaN */
}

/*
 * The byte span of n elements of `size` bytes at p, for argument checks: false when n * size
 * overflows, exceeds PTRDIFF_MAX (no C object can be that large, and pointer differences over
 * it are undefined), or p + n * size wraps around the address space (*bytes = 0 then). A caller that passes
 * such an n (SIZE_MAX, a negative int converted to size_t) has a bug that would otherwise
 * read or write far past its buffer. On success *bytes = n * size.
 */
static inline bool mxp__span_ok(const void *p, size_t n, size_t size, size_t *bytes)
{
    *bytes = 0;
    if (size != 0 && n > (size_t)PTRDIFF_MAX / size) return false;
    const size_t b = n * size;
    if (p && b > UINTPTR_MAX - (uintptr_t)p) return false;
    *bytes = b;
    return true;
}

/* True when the byte ranges [a, a + na) and [b, b + nb) share a byte (empty ranges never do). */
static inline bool mxp__overlap(const void *a, size_t na, const void *b, size_t nb)
{
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

/* Internal versions of public functions whose messages start with fn, the public function the
 * caller called (so that a wrapper's failure names the wrapper, not the function it calls). */
mxp_status mxp__convert(const char *fn, void *dst, mxp_dtype dst_type, const void *src, mxp_dtype src_type,
                        size_t n, const mxp_convert_opts *opts);
mxp_status mxp__tree_cast(const char *fn, const mxp_tree *src, mxp_dtype dtype, const mxp_convert_opts *opts,
                          mxp_tree **out);
mxp_status mxp__tree_cast_into(const char *fn, mxp_tree *dst, const mxp_tree *src, mxp_dtype dtype,
                               const mxp_convert_opts *opts);
mxp_status mxp__policy_check(const char *fn, const mxp_policy *p);
/* opts->rounding is a rounding mode and opts->threads >= 0 (NULL opts: the defaults, valid). */
mxp_status mxp__check_opts(const char *fn, const mxp_convert_opts *opts);

/* mxp_convert_ex starts a thread only for at least this many elements per thread (src/convert.c
 * says how it was measured). Tests lower it to exercise the threaded path on small arrays;
 * nothing else writes it. */
extern size_t mxp__convert_min_per_thread;

/* mxp_matmul_int8 on a given kernel table, with sums of at most k32_max products in int32
 * before they are added in int64 (0 or above MXP__QMM_K32_MAX: MXP__QMM_K32_MAX). Tests use it
 * to run every ISA's kernels and to reach the int64 path with small k. */
struct mxp__kernels;
mxp_status mxp__matmul_int8_k(const struct mxp__kernels *kt, size_t k32_max, void *y,
                              mxp_dtype yt, const int8_t *a, const float *sa, const int8_t *b,
                              const float *sb, size_t m, size_t k, size_t n);

/* mxp_policy_map_load / _save refuse texts longer than this (MXP_POLICY_MAP_FILE_MAX). Tests
 * lower it to exercise the cap on small files and FIFOs; nothing else writes it. */
extern size_t mxp__policy_map_file_max;

/* Occupied slots visited in the policy map's hash tables (key index, apply's repeat check) by
 * the calling thread: tests count them to show that set / load / apply are O(1) amortised. */
extern _Thread_local unsigned long long mxp__policy_map_probes;

/* Exact float text shared by the save/restore functions (defined in loss_scale.c):
 * mxp__format_hex_float writes C99-style hexadecimal ([-]0x1.8p+3, [-]0x0p+0, [-]inf, [-]nan),
 * independent of the locale; mxp__parse_float reads p[0..len) (hex exactly, inf, nan, or a
 * decimal rounded to float32 as strtof does in the "C" locale, whatever the caller's locale) and
 * returns false for anything else. */
void mxp__format_hex_float(float f, char out[32]);
bool mxp__parse_float(const char *p, size_t len, float *out);
/* The shortest decimal that mxp__parse_float reads back as f (0.1, -1e-40, 16777216, inf, nan), with
 * '.' in any locale and read from f's bits (the caller's denormals-are-zero cannot print a
 * subnormal as 0): floats quoted in error messages. */
void mxp__format_float(float f, char out[32]);

#endif /* MIXPREC_INTERNAL_H */
