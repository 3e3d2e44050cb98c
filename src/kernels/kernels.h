/*
 * kernels.h - the kernel table behind mxp_convert, mxp_all_finite and mxp_unscale_check.
 *
 * Kernels never know about policies or trees: they move arrays of one dtype to another.
 * Each ISA file (cvt_<isa>.c, finite_<isa>.c) is compiled with its own flags and exports one
 * register function that overwrites the table entries it accelerates. A table is built as:
 *   scalar entries for everything, then (for a SIMD ISA) that ISA's register functions.
 * So every entry of every table is non-NULL, and SIMD files reach the scalar reference for
 * their tails through mxp__scalar_kernels().
 *
 * Dispatch is chosen once (pthread_once) from the CPU and MIXPREC_ISA, then it is a plain
 * function-pointer call.
 */
#ifndef MIXPREC_KERNELS_H
#define MIXPREC_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixprec/dtype.h"

typedef enum mxp__isa_id {
    MXP__ISA_SCALAR = 0,
    MXP__ISA_AVX2,   /* AVX2 + FMA + F16C */
    MXP__ISA_AVX512, /* AVX-512 F/BW/VL/DQ (+ BF16/FP16 where the CPU has them; see dispatch.c) */
    MXP__ISA_NEON,   /* AArch64 Advanced SIMD with FP16 conversions */
    MXP__ISA_COUNT
} mxp__isa_id;

/* Arguments common to every conversion kernel. */
typedef struct mxp__cvt_args {
    bool saturate;   /* overflow and +-inf -> +-max finite; NaN stays NaN */
    uint64_t seed;   /* stochastic rounding stream */
    uint64_t index0; /* global index of element 0 of this call (stochastic rounding) */
    bool stream;     /* store non-temporally whatever n (cvt_compose.c: the second step of each
                      * block of a call large enough to stream); false elsewhere */
} mxp__cvt_args;

enum { MXP__RNE = 0, MXP__SR = 1, MXP__NMODES = 2 };

/* Convert n elements; src and dst may be unaligned; n may be 0. Never fails. */
typedef void (*mxp__cvt_fn)(void *dst, const void *src, size_t n, const mxp__cvt_args *a);
/* True when all n elements are finite (n == 0: true). */
typedef bool (*mxp__finite_fn)(const void *x, size_t n);
/* x[i] = x[i] * inv (float32 product for <= 32-bit dtypes, rounded nearest-even into the dtype;
 * float64 product for float64); returns false if any input or result is non-finite. */
typedef bool (*mxp__unscale_fn)(void *x, size_t n, float inv);
/* dst[i] = widen(src[i]) * inv: src (the table index dtype) widened exactly to float32 (NaN:
 * quiet, sign and payload kept), one float32 product rounded to nearest-even, stored as float32
 * (dst any alignment); returns false if any input or result is non-finite. dst and src do not
 * overlap (the public call sends dst == src, float32, to unscale_check instead). */
typedef bool (*mxp__unscale_into_fn)(void *dst, const void *src, size_t n, float inv);

/*
 * int8 matmul (mxp_matmul_int8; blocking and the int64 chunking are in src/qmatmul.c). An ISA
 * packs blocks of a and b in a layout only it reads, multiplies them into int32 sums, and
 * descales a row. Sums over at most MXP__QMM_K32_MAX products are exact in int32:
 * |a * b| <= 128 * 128 = 2^14 and 131071 * 2^14 < 2^31, whatever the order of the additions,
 * and also when a kernel adds with wrap-around (VPDPBUSD) as long as the final value fits.
 */
#define MXP__QMM_K32_MAX ((size_t)131071)
typedef struct mxp__qmm_ops {
    const char *name; /* "scalar", "avx2", "avx512bw", "avx512vnni", ... */
    size_t kc, mc, nc; /* block sizes for pack_b / pack_a / block (kc <= MXP__QMM_K32_MAX) */
    size_t rows_max_m; /* rows() is used for m <= this (0: never) */
    size_t rows_kc, rows_nc; /* block sizes for rows() */
    /* Bytes of a packed b block of kc x nc, of a packed a block of mc x kc. */
    size_t (*b_size)(size_t kc, size_t nc);
    size_t (*a_size)(size_t mc, size_t kc);
    /* Pack b[p * ldb + j] (p < kc, j < nc) / a[i * lda + p] (i < mc, p < kc) into dst
     * (64-byte aligned, b_size / a_size bytes). */
    void (*pack_b)(void *dst, const int8_t *b, size_t ldb, size_t kc, size_t nc);
    void (*pack_a)(void *dst, const int8_t *a, size_t lda, size_t mc, size_t kc);
    /* c[i * ldc + j] = (first ? 0 : c[i * ldc + j]) + sum_{p < kc} a[i][p] * b[p][j] for i < mc,
     * j < nc, from blocks packed with the same mc, kc, nc. */
    void (*block)(int32_t *c, size_t ldc, const void *ap, const void *bp, size_t mc, size_t kc,
                  size_t nc, bool first);
    /* The same from unpacked a and b (small m: packing b would cost more than the product). */
    void (*rows)(int32_t *c, size_t ldc, const int8_t *a, size_t lda, const int8_t *b,
                 size_t ldb, size_t mc, size_t kc, size_t nc, bool first);
    /* y[j] = (float)acc[j] / (sa * sb[j]) for j < n, y float32 at any alignment: int32 ->
     * float32 rounded once, float32 product, float32 division (nearest even: the caller sets
     * the mode, mxp__fenv_enter_ieee). */
    void (*descale)(void *y, const int32_t *acc, size_t n, float sa, const float *sb);
} mxp__qmm_ops;

typedef struct mxp__kernels {
    const char *name; /* "scalar", "avx2", "avx512", "neon" */
    mxp__isa_id isa;
    /* cvt[dst][src][mode], mode MXP__RNE or MXP__SR. */
    mxp__cvt_fn cvt[MXP_FLOAT_DTYPE_COUNT][MXP_FLOAT_DTYPE_COUNT][MXP__NMODES];
    mxp__finite_fn all_finite[MXP_FLOAT_DTYPE_COUNT];
    mxp__unscale_fn unscale_check[MXP_FLOAT_DTYPE_COUNT];
    mxp__qmm_ops qmm; /* int8 matmul */
    /* unscale_into[src dtype], float32 destination; the float64 entry is NULL (not accepted:
     * see mxp_unscale_check_into), every other entry is non-NULL */
    mxp__unscale_into_fn unscale_into[MXP_FLOAT_DTYPE_COUNT];
} mxp__kernels;

/* The table in use (MIXPREC_ISA honoured, chosen once). Never NULL. */
const mxp__kernels *mxp__kernels_active(void);
/* The table of one ISA as dispatched (what MIXPREC_ISA=<that ISA> uses; the avx512 one keeps
 * some avx2 kernels, see dispatch.c), or NULL when it is not compiled in or this CPU lacks it. */
const mxp__kernels *mxp__kernels_for(mxp__isa_id isa);
/* The same table with every entry its ISA files registered left as they registered it (the
 * avx512 kernels that the dispatched avx512 table replaces by avx2 ones included), or NULL as
 * above; for tests and benchmarks. The composed entries (cvt_compose.c) call the dispatched
 * table's float32 kernels in both. */
const mxp__kernels *mxp__kernels_own(mxp__isa_id isa);
/* The scalar reference table. Never NULL. */
const mxp__kernels *mxp__scalar_kernels(void);
/* "scalar", "avx2", ... for an ISA id (whether or not it is available). */
const char *mxp__isa_name(mxp__isa_id isa);
/* The path chosen for a MIXPREC_ISA value `request` (NULL, "" or an unknown name: the best
 * available path; a known name: that path, or when this CPU lacks it the best available path
 * below it). Used once by the dispatcher with getenv("MIXPREC_ISA"); tests call it with other
 * values. */
mxp__isa_id mxp__isa_select(const char *request);

/* Bytes read + written by one conversion call at or above which the SIMD kernels stream their
 * output (non-temporal stores) and prefetch their source. MXP__NT_THRESHOLD_DEFAULT unless a
 * test lowers it (tests/test_isa.c, MXP_TEST_NT_BYTES: the streaming path on small buffers,
 * for instruction-set emulators); set it only while no conversion runs. */
#define MXP__NT_THRESHOLD_DEFAULT ((size_t)24 << 20)
extern size_t mxp__nt_threshold;

/* Whether and how the AVX-512 kernels' streaming loops prefetch their source (cvt_avx512.c): set
 * once by the dispatcher from the CPU (dispatch.c: on the CPUs where it was measured to help), read
 * by every streaming call. MXP__PREFETCH_OFF: never (AMD Zen 4, and CPUs not measured);
 * MXP__PREFETCH_L1: PREFETCHT0 in the float8 and stochastic narrowings (AMD Zen 5);
 * MXP__PREFETCH_L2: PREFETCHT2 (and mostly PREFETCHT0 of a nearer line, cvt_avx512.c's pf_line),
 * there and in the nearest-even 16-bit narrowings, the stochastic roundings from 16-bit sources,
 * the float64 narrowings, float16 <-> bfloat16, the float8 <-> float8 stochastic kernel and
 * (since session 50) the float8 sources' nearest-even byte-table loops (Intel), where the
 * in-cache float32 -> bfloat16 loop also converts before it tests (cvt_avx512.c's
 * MXP_SIMD_BF16_HW4_CACHE). Since session 33 the AVX2 kernels read it too
 * (cvt_avx2.c's avx2_pf_line, cvt_f64_avx2.c's sr_f64_run): on MXP__PREFETCH_L2 (Intel, AVX2-only
 * parts included) they take the Intel scheme, elsewhere their own PREFETCHT0 2048 bytes ahead.
 * Only speed depends on it, never a result (tests/test_isa.c's mixed-data pass runs at every
 * level). */
enum { MXP__PREFETCH_OFF = 0, MXP__PREFETCH_L1 = 1, MXP__PREFETCH_L2 = 2 };
extern int mxp__avx512_prefetch;

/* Nonzero on CPUs that run a 512-bit operation as two 256-bit halves (AMD family 19h, Zen 4): set
 * once by the dispatcher (dispatch.c), read by the few AVX-512 steps measured to want another
 * instruction choice there (cvt_avx512.c's bf16_hw4). Only speed depends on it, never a result
 * (tests/test_isa.c's mixed-data pass runs with both values). */
extern int mxp__avx512_half_width;

/* Nonzero on CPUs whose AVX-512 stochastic roundings from 16-bit sources to float8 (not float16 ->
 * e5m2) classify each streaming step's lanes MXP__SR_AHEAD steps before converting it
 * (cvt_simd_impl.h's srn_run): a step with a lane outside the fast step's range (uniform data
 * over [-8, 8]: 6% of the steps to e4m3fn; ReLU data's zeros: nearly all) took a branch that
 * mispredicts where such steps come at random, and out of cache a branch decided by a load that
 * is still on its way costs that load's wait; decided by a load made steps before, it does not.
 * Set once by the dispatcher (dispatch.c: AMD Zen 4, where it was measured); only speed depends
 * on it, never a result (tests/test_isa.c's check_tiny16 runs both values). */
extern int mxp__avx512_ahead;
/* How many steps ahead (of 32 elements: 64 source bytes). Zen 4, float16 -> e4m3fn stochastic at
 * 2^26, a timing driver, three runs, ns/element: 16 / 32 / 48 steps 0.135 / 0.133 / 0.130 (off:
 * 0.150); bfloat16 0.131 / 0.130 / 0.132 (0.141) (bench/RESULTS.md, session 51). */
#define MXP__SR_AHEAD 48

/* Interleaved streams (src/convert.c's mxp__cvt_run): a call at or above mxp__nt_threshold
 * bytes that narrows a float32 source or widens a float16 / bfloat16 one to float32 runs as this many sub-ranges, advanced MXP__CVT_STREAM_STEP elements at a time in turn, each
 * step a kernel call with args.stream set (non-temporal stores whatever its n; one SFENCE at the
 * end). 1: one pass, as before. Set once
 * by the dispatcher from the CPU (Intel: 4, where one core's memory streams were measured faster
 * that way; dispatch.c); a test or a benchmark may change it while no conversion runs. Only
 * speed depends on it: every element gets the same bits (stochastic rounding is indexed by
 * element, never by call). */
#define MXP__CVT_STREAMS_MAX 16
#define MXP__CVT_STREAM_STEP ((size_t)128)
extern int mxp__cvt_streams;
/* n elements from src (dtype st) to dst (dtype dt) with kernel fn and arguments a, as
 * mxp_convert_ex runs one chunk that does not straddle a multiple of 2^32 in the index: one
 * kernel call, or interleaved streams (above) when they apply. src/convert.c; bench_convert
 * times its rows through it, so that they measure what a caller gets. */
void mxp__cvt_run(mxp__cvt_fn fn, mxp_dtype dt, mxp_dtype st, void *dst, const void *src, size_t n,
                  const mxp__cvt_args *a);
/* Whether mxp__cvt_run runs such a call as interleaved streams: mxp__cvt_streams > 1, float32 ->
 * a narrower dtype or float16 / bfloat16 -> float32, at least
 * mxp__cvt_streams * 8 steps and mxp__nt_threshold bytes, and a destination aligned to its
 * element size. */
bool mxp__cvt_streams_apply(mxp_dtype dt, mxp_dtype st, const void *dst, size_t n);
/* Intel's source prefetch (MXP__PREFETCH_L2) for the loads at p: PREFETCHT2 of the line
 * MXP__PF_FAR bytes ahead (into L2) and PREFETCHT0 of the one MXP__PF_NEAR bytes ahead (into L1;
 * in L2 by then). cvt_avx512.c's pf_line has the measurements; the AVX2 kernels share it. */
enum { MXP__PF_FAR = 6144, MXP__PF_NEAR = 3072 };
#if defined(__x86_64__)
#include <xmmintrin.h>
static inline __attribute__((always_inline)) void mxp__pf_intel(const void *p)
{
    _mm_prefetch((const char *)p + MXP__PF_FAR, _MM_HINT_T2);
    _mm_prefetch((const char *)p + MXP__PF_NEAR, _MM_HINT_T0);
}
#endif

/*
 * The floating-point environment around a kernel call. The SIMD kernels (and the scalar
 * unscale's float32 multiply) use the SSE/AVX floating-point unit, which raises exception flags
 * (inexact, overflow, invalid for a signalling NaN) and traps where the caller unmasked an
 * exception (feenableexcept, a common way to catch NaNs while debugging training code). So the
 * array passes (conversion chunks in convert.c, mxp_all_finite and mxp_unscale_check in
 * loss_scale.c) run with every exception
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
/* As mxp__fenv_enter, and also round to nearest even with flush-to-zero and denormals-are-zero
 * off, whatever the caller set: for float32 arithmetic whose result the API defines in IEEE
 * terms (the int8 matmul descale). Undo with mxp__fenv_leave. */
static inline unsigned mxp__fenv_enter_ieee(void)
{
    const unsigned csr = __builtin_ia32_stmxcsr();
    const unsigned want = (csr & 0x3Fu) | 0x1F80u; /* keep the flags; masks on, RNE, no FTZ/DAZ */
    if (csr != want) __builtin_ia32_ldmxcsr(want);
    return csr;
}
#else
static inline unsigned mxp__fenv_enter(void) { return 0; }
static inline unsigned mxp__fenv_enter_ieee(void) { return 0; }
static inline void mxp__fenv_leave(unsigned csr) { (void)csr; }
#endif

/*
 * Pins for float arithmetic written inline between mxp__fenv_enter(_ieee) and mxp__fenv_leave.
 * Compilers do not know that MXCSR changes what an addition, a multiply or a comparison gives:
 * gcc 12 moved `loss * scale` of mxp_loss_scale_scale past the leave (after the caller's FTZ
 * was back). A kernel call between them is safe (a call is opaque); plain arithmetic is not.
 * So pin its inputs after the enter and its results before the leave:
 *     csr = mxp__fenv_enter_ieee(); MXP__PIN_F(a); MXP__PIN_F(b); r = a * b; MXP__PIN_F(r);
 *     mxp__fenv_leave(csr);
 * MXP__PIN_F takes a float or double lvalue (kept in a vector register), MXP__PIN_R an integer,
 * bool or pointer (a general register); each is an empty volatile asm that "changes" the value,
 * so nothing computed from it moves above it and nothing it takes moves below it, and volatile
 * asms stay in order with the MXCSR accesses. Without GNU asm the enter/leave are no-ops.
 */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && defined(__SSE__)
#define MXP__PIN_F(v) __asm__ __volatile__("" : "+x"(v))
#define MXP__PIN_R(v) __asm__ __volatile__("" : "+r"(v))
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define MXP__PIN_F(v) __asm__ __volatile__("" : "+w"(v))
#define MXP__PIN_R(v) __asm__ __volatile__("" : "+r"(v))
#else
#define MXP__PIN_F(v) ((void)0)
#define MXP__PIN_R(v) ((void)0)
#endif

/* Register functions, one per (operation family, ISA) file. The scalar ones fill every entry. */
void mxp__cvt_register_scalar(mxp__kernels *k);
void mxp__finite_register_scalar(mxp__kernels *k);
void mxp__qmm_register_scalar(mxp__kernels *k);
/* cvt_compose.c: the pairs between float16 / bfloat16 / float8, and from them to float64, that
 * k's ISA files left scalar, composed from k's float32 kernels through a float32 block (exact).
 * Call on a SIMD table (a scalar one is left unchanged), before the registrations that replace
 * some of its entries. */
void mxp__cvt_register_compose(mxp__kernels *k);
/*
 * Stochastic rounding between the two float8 formats as byte tables (cvt_avx512.c's VBMI
 * kernels, cvt_avx2.c's): for each magnitude code m (0 .. 127) of the source, tab[0][m] is the
 * target code toward zero (for NaN, infinity and magnitudes beyond the target's range, which
 * never round stochastically, the reference's result) and tab[1][m] is 255 - F, where F / 256 is
 * m's dropped part as a fraction of the step to the next code (255 where nothing is dropped):
 * the reference's rule "up iff F * 2^24 + r >= 2^32" is "up iff r >> 24 > tab[1][m]", and the
 * result is (tab[0][m] + up) with the source's sign. Derived from the reference's values and
 * checked against its stochastic kernel on 4096 elements; false (tab undefined) if some code
 * does not fit the rule. kind: the direction and saturation. Portable C (cvt_scalar.c).
 */
enum { MXP__F8S_E4M3_E5M2, MXP__F8S_E5M2_E4M3, MXP__F8S_E5M2_E4M3_SAT, MXP__F8S_N };
bool mxp__f8s_fill(const mxp__kernels *ref, int kind, unsigned char tab[2][128]);

#if defined(__x86_64__) || defined(_M_X64)
/* cvt_f64_avx2.c (AVX): float64 <-> float32, and stochastic rounding from float64 */
void mxp__cvt_register_f64_avx2(mxp__kernels *k);
void mxp__cvt_register_avx2(mxp__kernels *k);
void mxp__finite_register_avx2(mxp__kernels *k);
void mxp__cvt_register_avx512(mxp__kernels *k);
/* stochastic rounding from float64 on AVX-512 (cvt_avx512.c); after mxp__cvt_register_f64_avx2 */
void mxp__cvt_register_f64_avx512(mxp__kernels *k);
/* avx512 table on a CPU with AVX512_BF16: float32 / float16 -> bfloat16 nearest-even by
 * VCVTNEPS2BF16; after mxp__cvt_register_compose */
void mxp__cvt_register_avx512_bf16(mxp__kernels *k);
/* bfloat16 -> float8 nearest-even without the float32 block (cvt_avx512.c); after
 * mxp__cvt_register_compose, whose entries it replaces */
void mxp__cvt_register_avx512_bf16_f8(mxp__kernels *k);
/* The narrow <-> narrow pairs with kernels of their own (no float32 block): float8 -> float16 /
 * bfloat16 (AVX2 by byte planes, AVX-512 by table), bfloat16 <-> float16 nearest-even
 * (cvt_simd_impl.h's to16_loop), float16 / bfloat16 -> float8 nearest-even on 16-bit lanes,
 * e4m3fn <-> e5m2 nearest-even by bytes (AVX2: stochastic too, by bytes), stochastic rounding
 * from float16 / bfloat16 (cvt_simd_impl.h's srw_loop); after mxp__cvt_register_compose, whose
 * entries they replace */
void mxp__cvt_register_avx2_pairs(mxp__kernels *k);
/* e4m3fn <-> e5m2 by bytes (cvt_avx2.c, shared with cvt_avx512.c): VPSHUFB tables of the
 * reference's codes, [0] e5m2 -> e4m3fn for magnitudes 20 .. 35, [1] e4m3fn -> e5m2 for
 * magnitudes below 8 (16 entries, twice), and e4m3fn -> e5m2's code of +NaN; filled by
 * mxp__f8b_init (idempotent; called at registration) */
extern unsigned char mxp__f8b_sub[2][32];
extern unsigned char mxp__f8b_nan;
void mxp__f8b_init(void);
/* e4m3fn <-> e5m2 stochastic rounding by bytes (cvt_avx2.c's f8s2_loop) into table k: the avx2
 * table's, and the avx512 table's on CPUs without AVX512_VBMI (whose byte tables replace them);
 * a direction is registered only if the reference's tables have the shape the kernel assumes */
void mxp__cvt_register_avx2_f8s(mxp__kernels *k);
void mxp__cvt_register_avx512_pairs(mxp__kernels *k);
/* float64 -> float16 / bfloat16 / float8 nearest-even and float16 / bfloat16 / float8 -> float64
 * without the float32 block (cvt_simd_impl.h's n64_loop / w64_loop); last: its float64 -> narrow
 * kernels keep the float32 -> narrow entries the table has then, for the steps they leave */
void mxp__cvt_register_avx512_f64(mxp__kernels *k, bool bf16);
/* float64 -> float16 nearest-even by VCVTPD2PH: only on CPUs with AVX512_FP16 (dispatch.c) */
void mxp__cvt_register_avx512_fp16(mxp__kernels *k);
/* avx512 table on a CPU with AVX512_VBMI: e4m3fn -> float32 / float64 / float16 / bfloat16,
 * e5m2 -> float64 / float16 / bfloat16 and e4m3fn <-> e5m2 (both modes) by byte tables
 * (VPERMI2B); after every other avx512 registration */
void mxp__cvt_register_avx512_vbmi(mxp__kernels *k);
void mxp__cvt_register_avx2_f64(mxp__kernels *k); /* the same on AVX2 */
void mxp__finite_register_avx512(mxp__kernels *k);
void mxp__qmm_register_avx2(mxp__kernels *k);
/* the AVX2 rows() (qmm.rows of the avx2 table), for the avx512 table's own rows() */
void mxp__qmm_rows_avx2(int32_t *c, size_t ldc, const int8_t *a, size_t lda, const int8_t *b,
                        size_t ldb, size_t mc, size_t kc, size_t nc, bool first);
/* vnni: VPDPBUSD kernels (AVX512_VNNI), otherwise AVX-512BW VPMADDWD kernels */
void mxp__qmm_register_avx512(mxp__kernels *k, bool vnni);
#endif
#if defined(__aarch64__)
void mxp__cvt_register_neon(mxp__kernels *k);
void mxp__finite_register_neon(mxp__kernels *k);
#endif

/*
 * Stochastic rounding, defined once for every ISA (bit-identical results depend on it).
 *
 * Random word: r = mxp__sr_bits(seed, index), index = a->index0 + i, a counter-based hash
 * (no state), so the bits depend only on (seed, element index), never on threads or ISA
 * (from a 16-bit or float8 source, and float32 -> bfloat16 / float16, parts of shared words:
 * mxp__sr_bits_src below).
 * The key for the high 32 bits of the index is constant over 2^32 consecutive indices, so a
 * vector loop computes mxp__sr_key once per call (callers never straddle a 2^32 boundary
 * mid-call: mxp_convert_ex splits there) and then, per lane, a Weyl step (index * golden
 * ratio + key) and two xorshift-multiply rounds with 32-bit multiplies (mxp__sr_bits_k).
 *
 * Use of r: let |x| lie between the target neighbours lo <= |x| < hi (magnitudes; hi may be
 * the "next binade" 2^(emax+1) beyond max finite, which means overflow), f = (|x| - lo) /
 * (hi - lo) in [0, 1), and F = floor(f * 2^32) (the top 32 bits of the dropped part). The
 * magnitude rounds up to hi iff F + r >= 2^32. When the dropped part has D <= 32 bits this is
 * exactly "add r >> (32 - D) to the dropped bits and truncate" (e.g. float32 -> bfloat16:
 * u += r >> 16; u &= 0xFFFF0000), and P(up) = f exactly. Exact values (f = 0) never move.
 * Rounding up to hi = 2^(emax+1) is an overflow: +-inf, or +-max when saturating. For e4m3fn
 * the value above max (448) is the NaN slot, 480 (S.1111.111), not 512: between 448 and 480,
 * hi = 480 and rounding up gives NaN (or 448 when saturating), as nearest-even sends > 464 to NaN.
 */
#define MXP__SR_W 0x9E3779B9u  /* the Weyl increment, 2^32 / golden ratio (odd) */
#define MXP__SR_M1 0x7FEB352Du /* the two multipliers of a low-bias 32-bit integer hash */
#define MXP__SR_M2 0x846CA68Bu

/* splitmix64 of (seed, high half of the index): 64 key bits, split as lo/hi 32-bit keys. */
static inline uint64_t mxp__sr_key(uint64_t seed, uint32_t index_hi)
{
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * ((uint64_t)index_hi + 1u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The random word from a precomputed key and the low 32 bits of the index: the index's Weyl
 * state (index * W + the key's low half; consecutive indices are W apart, so a vector loop
 * advances it with one add), then two xorshift-multiply rounds with the key's high half added
 * between them. Every step is a bijection on 32 bits, so for one key the 2^32 indices of a
 * block get 2^32 distinct words. The statistics (balance, lags, avalanche, independence of
 * neighbouring seeds) are tested by tests/test_sr_bits.c. */
static inline uint32_t mxp__sr_bits_k(uint64_t key, uint32_t index_lo)
{
    uint32_t x = index_lo * MXP__SR_W + (uint32_t)key;
    x ^= x >> 16;
    x *= MXP__SR_M1;
    x ^= x >> 15;
    x += (uint32_t)(key >> 32);
    x *= MXP__SR_M2;
    return x ^ (x >> 21);
}

static inline uint32_t mxp__sr_bits(uint64_t seed, uint64_t index)
{
    return mxp__sr_bits_k(mxp__sr_key(seed, (uint32_t)(index >> 32)), (uint32_t)index);
}

/*
 * Sources whose elements share words (since session 46; before, every element had a word of its
 * own). An e4m3fn source's only lossy target, e5m2, drops at most one bit (a normal value's last
 * significand bit; e4m3fn's subnormals are e5m2 normals), so one random bit is "all the bits the
 * target drops", and one word serves 32 neighbouring elements: element index i takes bit i % 32
 * of the word of index i / 32, as the top bit of its r (the low 31 bits 0; since session 48,
 * before which it took a byte as e5m2 does). An e5m2 source's targets drop at most 7 bits (into
 * e4m3fn, below 2^-6), so 8 random bits are all of them, and one word serves four neighbours:
 * element i takes byte i % 4 of the word of index i / 4, as the top byte of its r (the low 24
 * bits 0). A 16-bit source (float16, bfloat16) takes 32 bits from two words shared by two
 * neighbours: element i's r is half i % 2 of the word of index i / 2 (its top half) and half
 * i % 2 of the word of index 2^31 + i / 2 (its low half). Indices are those within i's block of
 * 2^32, whose key the words keep, so the two sets of words never meet. In memory the bits /
 * bytes / halves of consecutive words are the elements' in order, so a vector of hashed words is
 * a vector of random bits / bytes / halves, and a SIMD step hashes 1/32, a quarter or half as
 * many words as it has elements. The low halves count only where the target drops more than 16
 * bits: never from float16 (at most 15, into e4m3fn below 2^-6; 8 into e5m2, 3 into bfloat16),
 * from bfloat16 only below the targets' normal ranges (for e4m3fn below 2^-18), so the kernels'
 * fast steps hash only the top halves' words. float32 -> bfloat16 (since session 49) takes its
 * r as a 16-bit source does: bfloat16 keeps float32's exponent, so every value drops exactly its
 * low 16 bits, 16 random bits are all of them, and the low half of r never counts (F's low 16
 * bits are 0); the kernels hash only the top halves' words, half as many as elements. float32 ->
 * float16 (since session 53) takes its r as a 16-bit source does, low halves included: a float16
 * result drops 13 bits when normal, 14 to 16 when subnormal down to 2^-17, and more only below
 * 2^-17, so its kernels hash the low halves' words only in a step with a lane down there. Every
 * other float32 pair (float8 targets drop 20 or more bits) and every float64 pair keeps a word
 * per element. mxp__sr_shift: log2 of the elements per word for a conversion from src to dst
 * (from e4m3fn 5, e5m2 2, float16 and bfloat16 1; float32 -> bfloat16 or float16 1; else 0).
 */
static inline unsigned mxp__sr_shift(mxp_dtype src, mxp_dtype dst)
{
    return src == MXP_FLOAT8_E4M3FN ? 5u
           : src == MXP_FLOAT8_E5M2 ? 2u
           : src == MXP_FLOAT16 || src == MXP_BFLOAT16 ? 1u
           : src == MXP_FLOAT32 && (dst == MXP_BFLOAT16 || dst == MXP_FLOAT16) ? 1u
                                                                                 : 0u;
}

/* the index (in the block) of the word that holds the low halves of 16-bit sources' elements
 * 2j and 2j + 1: MXP__SR_LO16 + j */
#define MXP__SR_LO16 0x80000000u

/* element index_lo's r in its block (key) for a source of shift sh (mxp__sr_shift) */
static inline uint32_t mxp__sr_bits_ks(uint64_t key, uint32_t index_lo, unsigned sh)
{
    if (sh == 0) return mxp__sr_bits_k(key, index_lo);
    if (sh == 1) {
        const unsigned p = 16u * (index_lo & 1u);
        const uint32_t hi = mxp__sr_bits_k(key, index_lo >> 1) >> p & 0xFFFFu;
        const uint32_t lo = mxp__sr_bits_k(key, MXP__SR_LO16 | index_lo >> 1) >> p & 0xFFFFu;
        return hi << 16 | lo;
    }
    if (sh == 5) return (mxp__sr_bits_k(key, index_lo >> 5) >> (index_lo & 31u) & 1u) << 31;
    return (mxp__sr_bits_k(key, index_lo >> 2) >> (8u * (index_lo & 3u))) << 24;
}

/* the r of element index of a conversion from src to dst: what every ISA path draws */
static inline uint32_t mxp__sr_bits_src(uint64_t seed, uint64_t index, mxp_dtype src, mxp_dtype dst)
{
    return mxp__sr_bits_ks(mxp__sr_key(seed, (uint32_t)(index >> 32)), (uint32_t)index, mxp__sr_shift(src, dst));
}

#endif /* MIXPREC_KERNELS_H */
