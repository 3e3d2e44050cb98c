/*
 * cvt_simd_impl.h - the vector conversion algorithms shared by cvt_avx2.c, cvt_avx512.c and
 * cvt_neon.c (included by them only; never compiled on its own).
 *
 * Why one algorithm for every ISA: bit-identity with the scalar reference (cvt_scalar.c) is the
 * contract, and a CPU that lacks an ISA cannot test that ISA's code. So the algorithm is written
 * once over a dozen one-line primitives (add, shift, compare, select, load/store), each ISA
 * file maps those primitives to its intrinsics, and testing one ISA (AVX2 natively, NEON under
 * qemu) tests the algorithm every ISA runs. The primitive layer is small enough to check by eye.
 *
 * Only integer operations touch values, plus one int32 -> float32 conversion of small integers
 * (exact, normal results), so MXCSR/FPCR (FTZ, DAZ, rounding mode) cannot change a result.
 * The one hardware conversion used is x86's VCVTPS2PH / VCVTPH2PS for float32 <-> float16
 * nearest-even (MXP_SIMD_HW_F16 below), whose results equal the reference's for every input
 * whatever MXCSR says (checked on all 2^32 inputs with FTZ+DAZ set). AVX512_BF16's
 * VCVTNEPS2BF16 flushes float32 subnormal inputs, so cvt_avx512.c uses it only for steps
 * without one (MXP_SIMD_BF16_HW); AVX512_FP16 is not needed here (cvt_avx512.c has one kernel
 * of its own with it, float64 -> float16 by VCVTPD2PH, outside this file's loops).
 *
 * Shape of a narrowing kernel: two vectors per step; an inner loop runs the short fast path
 * while a cheap per-step check passes (bfloat16 without NaN; float16/float8 with every lane in
 * the target's normal range); a step that fails it goes to a second check (float16/float8:
 * lanes that are normal or round to +-0) or to the general path (narrow1: every case), both
 * outside the inner loop; streaming stores above a size threshold; the scalar reference for the
 * head (alignment), the tail and, for stochastic rounding, the few elements whose index
 * straddles a multiple of 2^32.
 *
 * The including file defines before #include:
 *   MXP_SIMD_ISA            the name suffix of its kernels (avx2, avx512, neon)
 *   VL                      lanes per vector (uint32 lanes)
 *   V, M                    a vector of VL uint32 lanes; a lane mask (result of a compare)
 *   v_set1(x)               broadcast
 *   v_and v_or v_xor v_add v_sub v_mullo (V, V)
 *   v_srli(x, imm) v_slli(x, imm)   shifts by a constant
 *   v_srlv(x, c)            logical right shift by a per-lane count; a count >= 32 gives 0
 *   v_shls(x, c)            per-lane signed count: c >= 0 shifts left, c < 0 shifts right;
 *                           |c| >= 32 gives 0 (|c| < 128 in every use)
 *   m_gt(a, b)              signed a > b;  m_gtu(a, b): unsigned a > b;  m_eq(a, b)
 *   v_sel(m, t, f)          m ? t : f per lane
 *   v_inc(x, m)             x + (m ? 1 : 0)
 *   v_i2f_bits(x)           bits of (float)(int32)x, for 0 <= x < 2^24 (exact)
 *   v_iota()                {0, 1, ..., VL-1}
 *   ld32(p) ld16(p) ld8(p)  VL elements at p (any alignment), zero-extended to 32 bits
 *   st32(p, x)              VL uint32 at p
 *   st16x2(p, x, y)         low 16 bits of 2*VL lanes (x then y) at p
 *   st8x2(p, x, y)          low 8 bits of 2*VL lanes (x then y) at p
 *   m_or(m1, m2) m_and(m1, m2)   lane masks combined;  m_any(m): true when any lane is set
 *   v_keep(m, x)            m ? x : 0 per lane
 *   sr_h16_ext(h, hi)       16-bit halves 0 .. VL - 1 (hi = 0) or VL .. 2 VL - 1 of h (in memory
 *                           order) zero-extended to 32-bit lanes
 * and may define MXP_SIMD_HW_F16 with
 *   hw_f16_st2(p, x, y, sat, nt)  2*VL float32 (bits x, y) -> float16 nearest-even at p by the
 *                             hardware (F16C VCVTPS2PH: FTZ ignored, DAZ only zeroes float32
 *                             subnormals, which round to +-0 anyway, NaN -> S 11111 1 payload,
 *                             exactly the reference's pattern); sat: +-inf results -> +-max;
 *                             nt: a streaming store (p aligned to 4*VL bytes)
 *   hw_f16_ld(p)              VL float16 at p -> float32 bits (VCVTPH2PS: exact, DAZ ignored,
 *                             NaN quieted with the payload zero-filled = the reference)
 *   hw_f16_st2_rz(p, x, y, nt)  as hw_f16_st2, truncating (imm round toward zero), no saturation:
 *                             for the stochastic fast paths (srh_run, srn_run), whose lanes
 *                             are float16 normal up to max finite
 * and, with it, may define MXP_SIMD_HW_E5M2 with
 *   hw_e5m2_ld(p)             VL e5m2 bytes at p -> float32 bits through the float16 hardware
 *                             conversion (e5m2 b is the float16 b << 8)
 *   and MXP_SIMD_HW_E4M3 with hw_e4m3_ld(p): VL e4m3fn bytes at p -> float32 bits, the same way
 *                             with a rebias (see cvt_avx2.c); hw_e4m3_ld_nonan(p), the same for
 *                             bytes known not to be NaN; hw_e4m3_nan4(p): a NaN among 4*VL bytes
 * and may define ISA-specific fast steps (cvt_avx2.c does), each replacing a generic one:
 *   MXP_SIMD_ANY_NAN4 with any_nan4(x, y, z, w): true when a lane of the arguments is a
 *                             float32 NaN
 *   MXP_SIMD_BF16_RNE2 with bf16_rne2(p, x, y, k, sat, nt): 2*VL float32 without NaN -> bfloat16
 *                             nearest-even at p (k = 0x7FFF in every lane; saturating when sat,
 *                             streaming when nt)
 *   MXP_SIMD_BF16_HW with bf16_hw2(p, x, y, k, sat, nt): the same by a hardware instruction
 *                             that the CPU may lack, NaN lanes included (the instruction's NaN
 *                             rule must be the reference's); false with nothing stored when it
 *                             cannot take the lanes; used only by kernels instantiated with a
 *                             format whose hw field is 1 (cvt_avx512.c registers those only on
 *                             CPUs that have the instruction)
 *   MXP_SIMD_BF16_HW4 with bf16_hw4(p, x, y, z, w, k, sat, nt): bf16_hw2 for 4*VL lanes, used by
 *                             streaming calls (nt = 1), and by every call when
 *                             MXP_SIMD_BF16_HW4_CACHE (a run-time condition) is nonzero
 *   MXP_SIMD_ST16_HI2 with st16_hi2(p, x, y, nt): the high words of x's and y's lanes to p in
 *                             element order (the stochastic bfloat16 fast step stores its sums so)
 *   MXP_SIMD_NARROW8_FAST with narrow8_fast4(p, x, y, z, w, D, add, minq, maxq, nt): 4*VL
 *                             float32 -> float8 nearest-even at p when every result is normal
 *                             (see there), else false with nothing stored; or, with
 *                             MXP_SIMD_NARROW8_PATCH, instead of narrow8_fast4, the step in parts
 *                             for narrow8_fast4p below: n8p r = narrow8_codes4(x, y, z, w, D, add,
 *                             minq, maxq) (the codes and the lanes outside the normal range),
 *                             narrow8_bad(&r) (those lanes as a 64-bit mask, element order),
 *                             narrow8_store(p, &r, nt), narrow8_store_lone(p, &r, one, code, nt)
 *                             (narrow8_store with the elements of mask one set to code); with
 *                             MXP_SIMD_NARROW8_OK, narrow8_ok(&r) (no lane outside, tested
 *                             before narrow8_bad); with MXP_SIMD_NARROW8_PATCH_WHEN(t, nt) (an
 *                             expression), narrow8_fast4p only where it is true, narrow8_fast4
 *                             elsewhere
 *   MXP_SIMD_NARROW8_FASTZ with narrow8_fast4z(p, x, y, z, w, D, add, minq, maxq, nt): as
 *                             narrow8_fast4, +-0 lanes accepted too; 0 = not stored, 1 = stored
 *                             with a zero lane, 2 = stored without one
 *   MXP_SIMD_NARROW8_DEFER with narrow8_fast4d(p, x, y, z, w, D, add, minq, maxq): narrow8_fast4
 *                             that always stores (plainly) and returns nonzero when a lane was
 *                             outside the normal range, and narrow8_fix4(p, s, D, lo, hi): the
 *                             bytes of such a step's lanes below the normal range rewritten from
 *                             the 4*VL float32 at s, false when a lane overflows or is NaN (with
 *                             MXP_SIMD_NARROW8_FAST_TINY and MXP_SIMD_NARROW8_SUB: the in-cache
 *                             float8 loop narrow8_defer_run, below)
 *   MXP_SIMD_NARROW8_FAST_TINY with narrow8_fast4t(p, s, D, add, minq, maxq, nt): the 4*VL
 *                             float32 at s -> float8 nearest-even at p when no lane overflows or
 *                             is NaN (subnormal and +-0 results too; 1: a lane was below the
 *                             normal range, 2: none was), else 0 with nothing stored; taken out
 *                             of line (narrow8_fast4t_lone, narrow8_tiny_run below) when
 *                             narrow8_fast4 fails: in a run while it returns 1, and, with
 *                             MXP_SIMD_NARROW8_FAST_TINY_LONE, for a lone failing step inside
 *                             the fast loop (AVX-512 under gcc only: a call there cost AVX2,
 *                             with 16 registers, and clang their fast loop's constants)
 *   MXP_SIMD_NARROW8_TINY_CARRY (no function): a streaming run of narrow8_fast4t steps goes on
 *                             through steps that return 2, to its 32 steps (AVX-512 only)
 *   MXP_SIMD_NARROW8_TINY_Z with narrow8_fast4tz(p, s, D, add, minq, maxq, nt, zm):
 *                             narrow8_fast4t with its zero-aware store (a step whose lanes
 *                             outside the normal range are all +-0) only when zm, returning 3
 *                             for a step that store took with a +-0 lane; narrow8_tiny_run calls
 *                             it instead of narrow8_fast4t (which only the other callers above
 *                             need then), and a streaming run picks zm once, from its first step
 *   MXP_SIMD_NARROW8_TINY_STOP (no function; with MXP_SIMD_NARROW8_TINY_Z, whose general store
 *                             then returns 2, when nt, for a step without a small or zero lane):
 *                             a streaming run stops by the count in narrow8_tiny_run (AVX2 only)
 *   MXP_SIMD_SR8_FAST with sr8_fast2(p, u0, u1, r0, r1, D, lo, hi, rebias, nt): 2*VL float32
 *                             -> float8 stochastically rounded with the words r0, r1 (their top
 *                             32 - D bits are exact, as sr_words_hi's) at p when every lane is
 *                             in [lo, hi) (sr_consts), else false with nothing stored; or, with
 *                             MXP_SIMD_SR8_PATCH, instead of sr8_fast2: b = sr8_codes2(u0, u1,
 *                             r0, r1, D, lo, hi, rebias, &out) (the codes, and the lanes outside
 *                             [lo, hi) as a bit mask), sr8_patch(b, one, code) (the lanes of mask
 *                             one replaced by code) and sr8w_store(p, b, nt)
 *   MXP_SIMD_SR8_W16 with sr8w16_codes(p, rw, Dw, lw, hw, rebw, &out) and
 *                             sr8w_store(p, b, nt): the codes of the 2*VL float16 / bfloat16 at
 *                             p as loaded (no widening) for srn_run's steps to float8, with the
 *                             random addends rw = sr8w16_rwh(h, Dw) from the vector h of the
 *                             elements' random top halves (kernels.h's mxp__sr_bits_src;
 *                             with sr_h16_ext, above, and with MXP_SIMD_SR8_ZC
 *                             sr_h16_pair(l, h, hi): those of h above those of l, for srn_run's
 *                             other steps), Dw dropped
 *                             bits, rebias rebw, taken where lw <= |x| < hw (all in the source's
 *                             words; out: nonzero when a lane is outside), and the 2*VL codes
 *                             stored; sr8w16_zeros(p, &b, out, lw, hw): when out's lanes are all
 *                             +-0, their codes put in b, and 1 (else 0); with
 *                             MXP_SIMD_SR8W16_PATCH, sr8w16_lanes(out) (out as a lane mask) and
 *                             sr8_patch (as above), srn_run takes a step whose lone lane outside
 *                             is below the normal range in place
 *   MXP_SIMD_M_BITS with m_bits(m): mask m as bits (bit k: lane k); sr_run then takes a step
 *                             whose lone irregular lane is below the normal range after its
 *                             fast loop stops (where MXP_SIMD_SR8_PATCH does not)
 *   MXP_SIMD_SR8_FASTZ with sr8_fast2z(same arguments): as sr8_fast2, lanes below the normal
 *                             range (+-0 and subnormal results) accepted too; 0 = not stored,
 *                             1 = stored with such a lane, 2 = without one; tried in a run
 *                             after sr_run's fast loop failed; or, with MXP_SIMD_SR8_ZC,
 *                             instead of it: zc = sr8z_consts(D) once per run and
 *                             sr8_fast2zc(p, u0, u1, r0, r1, &zc, nt, zm) (zm: the zero mode;
 *                             without it the tiny mode of sr8_zrun's streaming runs; the
 *                             return values in cvt_avx512.c)
 *   MXP_SIMD_NARROW8_SUB with narrow8_sub2(p, x, y, D, add, lo, hi, scale, nt): 2*VL float32 ->
 *                             float8 nearest-even at p when no lane overflows or is NaN (normal
 *                             and subnormal results alike), else false with nothing stored
 *   MXP_SIMD_H16_UNPK with sr_h16_unpk(h, hi): halfwords 0 .. 3 (hi = 0) or 4 .. 7 of each
 *                             128-bit lane of h zero-extended to 32-bit lanes, and
 *                             sr_h16_unpk3(h, hi): the same shifted right by 3; srb_run and
 *                             srh_run then hash their words in srh_order (the lanes these take
 *                             each element's half from) instead of in element order
 * and may define MXP_SIMD_NO_SPECIALISE (one copy of each loop with saturate / streaming as
 * run-time flags instead of four constant-folded copies: the emulated-AVX-512 test build, whose
 * compile time grows with code size), MXP_SIMD_F16_F8 (it defines f16_f8_run after including
 * this header, for float16 and, where its step takes it, bfloat16 sources: f16_f8_loop and
 * SIMD_F16_F8 below), MXP_SIMD_F64 with f64_odd_ld, f64_st and MXP_SIMD_F64_CSR (float64 <->
 * narrow: n64_loop / w64_loop at the end, which say what they do; optionally MXP_SIMD_F64_F16
 * with f64_st_f16), MXP_SIMD_PIN(v) (an empty asm that makes the vector v opaque, so that the
 * compiler keeps a hoisted constant in a register instead of rebuilding it in a loop),
 * MXP_SIMD_NT_STORE32(p, x) (a streaming store, p aligned to the vector size),
 * st16x2_nt / st8x2_nt (as st16x2 / st8x2, p aligned to 4*VL / 2*VL bytes), with
 * MXP_SIMD_NT_THRESHOLD (bytes read + written by one call above which it streams its output:
 * once source and destination no longer fit in the last-level cache, streaming saves the
 * read-for-ownership of every destination line; a call with args.stream set streams whatever
 * its size and leaves the fence to its caller, cvt_compose.c) and MXP_SIMD_NT_FENCE(), and may
 * define MXP_SIMD_PREFETCH(p) with MXP_SIMD_PREFETCH_DIST (bytes): streaming loops then prefetch their
 * source that far ahead (a prefetch never faults, so running past the end is harmless), except
 * the hardware float16 narrowing, which it slowed down (AVX2, AMD Zen 3), unless
 * MXP_SIMD_PREFETCH_HW_F16 (an expression, default 0) says otherwise; the stochastic roundings from
 * float16 / bfloat16 (srn_run) and the float64 narrowings' fast steps (n64_run) prefetch only where
 * MXP_SIMD_PREFETCH_SRN / MXP_SIMD_PREFETCH_N64 (expressions, default 0) say so. Three optional switches narrow
 * that: MXP_SIMD_PREFETCH_ON (an expression read at the start of each call: a run-time choice per
 * CPU, default 1), MXP_SIMD_PREFETCH_BF16 and MXP_SIMD_PREFETCH_WIDEN (0: never in the nearest-even
 * bfloat16 narrowing / in the widenings; default 1). The float8 runs of tiny-aware steps that
 * follow a failed fast step follow MXP_SIMD_PREFETCH_ON too (until session 25 they prefetched
 * whatever it said; cvt_avx512.c has the numbers).
 */
#ifndef MIXPREC_CVT_SIMD_IMPL_H
#define MIXPREC_CVT_SIMD_IMPL_H

#include <stdint.h>
#include <string.h>

#include "kernels.h"

#ifndef MXP_SIMD_PREFETCH_ON
#define MXP_SIMD_PREFETCH_ON 1
#endif
#ifndef MXP_SIMD_PREFETCH_BF16
#define MXP_SIMD_PREFETCH_BF16 1
#endif
#ifndef MXP_SIMD_PREFETCH_WIDEN
#define MXP_SIMD_PREFETCH_WIDEN 1
#endif
#ifndef MXP_SIMD_PREFETCH_HW_F16
#define MXP_SIMD_PREFETCH_HW_F16 0
#endif
#ifndef MXP_SIMD_PREFETCH_SRN
#define MXP_SIMD_PREFETCH_SRN 0
#endif
#ifndef MXP_SIMD_PREFETCH_N64
#define MXP_SIMD_PREFETCH_N64 0
#endif
#ifdef MXP_SIMD_PREFETCH
/* The source prefetch of a step's vector loads, MXP_SIMD_PREFETCH_DIST ahead: PF_LINES(p, lo,
 * hi) prefetches the lines at byte offsets o of p, o a multiple of 64 with lo <= o < hi, and a
 * loop issues it after the load of bytes [lo, hi), so each line's prefetch follows a load (a
 * vector of 32 bytes at an odd multiple of 32 prefetches nothing: its line went with the vector
 * before). With every prefetch at the top of the step, before the loads, where the compilers
 * kept them when the source had them there (clang in the stochastic loop, gcc in the
 * nearest-even one), the streaming passes ran slower. AMD EPYC Zen 5, avx512, 2^26 elements,
 * alternating runs, ns/element: clang's f32 -> bf16 stochastic 0.142 -> 0.116 (gcc's 0.122
 * either way; three runs); gcc's f32 -> e5m2 0.111 -> 0.103, f32 -> e4m3fn 0.115 -> 0.113 (six
 * runs; bench/RESULTS.md session 18). AVX2 (one line per 2*VL elements) unchanged. */
#define PF_LINES(p, lo, hi)                                                                    \
    do {                                                                                       \
        for (size_t o_ = ((size_t)(lo) + 63) / 64 * 64; o_ < (size_t)(hi); o_ += 64)          \
            MXP_SIMD_PREFETCH((p) + o_ + MXP_SIMD_PREFETCH_DIST);                              \
    } while (0)
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SIMD_INLINE inline __attribute__((always_inline))
#else
#define SIMD_INLINE inline
#endif

/* A narrow format, the same description as cvt_scalar.c's (magnitude bit patterns). */
typedef struct sfmt {
    int bits;        /* 16 or 8 (32: SF_F32, a source) */
    int m;           /* mantissa bits */
    int bias;        /* exponent bias */
    uint32_t maxfin; /* largest finite magnitude pattern */
    uint32_t inf;    /* infinity pattern (0 for e4m3fn) */
    int fn;          /* 1: no infinities, the only NaN is all ones (e4m3fn) */
    mxp_dtype dt;
    int hw;          /* bfloat16 only: 1 = nearest-even steps by bf16_hw2 (MXP_SIMD_BF16_HW) */
} sfmt;

#define SF_F16 ((sfmt){16, 10, 15, 0x7BFFu, 0x7C00u, 0, MXP_FLOAT16, 0})
#define SF_BF16 ((sfmt){16, 7, 127, 0x7F7Fu, 0x7F80u, 0, MXP_BFLOAT16, 0})
#define SF_E4M3 ((sfmt){8, 3, 7, 0x7Eu, 0u, 1, MXP_FLOAT8_E4M3FN, 0})
#define SF_E5M2 ((sfmt){8, 2, 15, 0x7Bu, 0x7Cu, 0, MXP_FLOAT8_E5M2, 0})
/* float32 as srw_loop's source (float32 -> bfloat16 stochastic); no kernel narrows into it */
#define SF_F32 ((sfmt){32, 23, 127, 0x7F7FFFFFu, 0x7F800000u, 0, MXP_FLOAT32, 0})

/* The stochastic-rounding words (kernels.h's mxp__sr_bits_k) from the Weyl states x of VL
 * consecutive indices (index * MXP__SR_W + the key's low half) and the key's high half khi.
 * The multipliers come in as vectors (m1 = MXP__SR_M1, m2 = MXP__SR_M2) so that a loop can
 * hold them in registers (MXP_SIMD_PIN). sr_words_hi stops before the last step,
 * x ^= x >> 21, which leaves the top 21 bits as they are: enough for a fast path that uses
 * r >> 11 or fewer top bits (float16 r >> 19, bfloat16 r >> 16, float8 r >> 12 / r >> 11),
 * or the top 5 or fewer bits of each half (srn_run's bfloat16 -> float8 steps); sr_finish
 * completes the word. */
static SIMD_INLINE V sr_finish(V x) { return v_xor(x, v_srli(x, 21)); }

static SIMD_INLINE V sr_words_hi(V x, V khi, V m1, V m2)
{
    x = v_mullo(v_xor(x, v_srli(x, 16)), m1);
    x = v_add(v_xor(x, v_srli(x, 15)), khi);
    return v_mullo(x, m2);
}

/*
 * float32 magnitude a (sign cleared) -> target magnitude pattern, rounded once (nearest-even,
 * or stochastically with the words r), before overflow and NaN handling.
 *
 * Normal target range: subtracting (127 - B) << 23 rebiases the exponent field in place, so
 *     base = te << 23 | M23,   base >> (23 - m) = te << m | top m bits of M23
 * is the target pattern up to the rounding of the D = 23 - m dropped bits.
 * Subnormal target range (float32 exponent field E < 128 - B): the value is
 *     (1.M23 as an integer) * 2^(E - 150),  target step 2^(1 - B - m),
 * so the pattern is base = 1.M23 shifted right by sh = 23 - m + 128 - B - E. (A float32
 * subnormal, E = 0, gets a wrong implicit bit here, but sh >= 125 then and it rounds to 0
 * either way, like the reference.) bfloat16 has float32's exponent range: normal path only.
 *
 * Rounding from the kept part q = base >> sh and F = the top 32 bits of the dropped part
 * (exact when sh <= 32; when sh > 32, q = 0 and F = base >> (sh - 32), as in kernels.h):
 *     nearest-even: up iff F > 2^31, or F == 2^31 and q is odd  <=>  F >u 2^31 - (q & 1)
 *     stochastic:   up iff F + r >= 2^32                          <=>  r >u ~F
 * (for sh > 32 nearest-even never rounds up: F < 2^24 < 2^31, like the reference's 0).
 */
static SIMD_INLINE V round_mag(V a, V r, const sfmt t, int sr)
{
    const int D = 23 - t.m;
    V q, F;
    if (t.bias == 127) {
        q = v_srli(a, D);
        F = v_slli(a, 32 - D);
    } else {
        const M nrm = m_gt(a, v_set1(((uint32_t)(128 - t.bias) << 23) - 1u));
        const V sub = v_or(v_and(a, v_set1(0x7FFFFFu)), v_set1(0x800000u));
        const V base = v_sel(nrm, v_sub(a, v_set1((uint32_t)(127 - t.bias) << 23)), sub);
        const V sh = v_sel(nrm, v_set1((uint32_t)D),
                           v_sub(v_set1((uint32_t)(23 - t.m + 128 - t.bias)), v_srli(a, 23)));
        q = v_srlv(base, sh);
        F = v_shls(base, v_sub(v_set1(32u), sh));
    }
    const M up = sr ? m_gtu(r, v_xor(F, v_set1(0xFFFFFFFFu)))
                    : m_gtu(F, v_sub(v_set1(0x80000000u), v_and(q, v_set1(1u))));
    return v_inc(q, up);
}

/*
 * float32 bits u -> target bits (in the low t.bits of each lane). over = the pattern of an
 * overflow (max finite when saturating, else infinity, e4m3fn: the NaN 0x7F).
 *   - anything that rounds past max finite (infinity included) -> over;
 *   - NaN -> S 11..1 1 (payload top bits), e4m3fn: S.1111.111;
 *   - the sign is copied to the top bit.
 */
static SIMD_INLINE V narrow1(V u, V r, const sfmt t, int sr, V over)
{
    const V a = v_and(u, v_set1(0x7FFFFFFFu));
    V mag = round_mag(a, r, t, sr);
    mag = v_sel(m_gtu(mag, v_set1(t.maxfin)), over, mag);
    const V nanv = t.fn ? v_set1(0x7Fu)
                        : v_or(v_set1(t.inf | (1u << (t.m - 1))),
                               v_srli(v_and(a, v_set1(0x7FFFFFu)), 23 - t.m));
    mag = v_sel(m_gt(a, v_set1(0x7F800000u)), nanv, mag);
    const V sign = v_and(v_srli(u, 32 - t.bits), v_set1(1u << (t.bits - 1)));
    return v_or(mag, sign);
}

/*
 * Target bits h (zero-extended) -> float32 bits, exact.
 *   normal:     (a << (23 - m)) + ((127 - B) << 23)        rebias in place
 *   subnormal:  a * 2^(1 - B - m) = (float)a with its exponent lowered by B - 1 + m
 *               (an int -> float conversion of a < 2^m is exact; zero stays zero)
 *   infinity:   +-inf, or +-FLT_MAX when saturating (infout)
 *   NaN:        S 11111111 1 (payload top bits); e4m3fn's S.1111.111 -> S 0x7FC00000
 */
static SIMD_INLINE V widen1(V h, const sfmt t, V infout)
{
    const V a = v_and(h, v_set1((1u << (t.bits - 1)) - 1u));
    const V sign = v_slli(v_srli(h, t.bits - 1), 31);
    const V nrm = v_add(v_slli(a, 23 - t.m), v_set1((uint32_t)(127 - t.bias) << 23));
    V sub = v_sub(v_i2f_bits(a), v_set1((uint32_t)(t.bias - 1 + t.m) << 23));
    sub = v_sel(m_eq(a, v_set1(0u)), v_set1(0u), sub);
    V res = v_sel(m_gt(a, v_set1((1u << t.m) - 1u)), nrm, sub);
    if (t.fn) {
        res = v_sel(m_eq(a, v_set1(0x7Fu)), v_set1(0x7FC00000u), res);
    } else {
        res = v_sel(m_gt(a, v_set1(t.inf - 1u)), v_or(v_slli(a, 23 - t.m), v_set1(0x7FC00000u)), res);
        res = v_sel(m_eq(a, v_set1(t.inf)), infout, res);
    }
    return v_or(res, sign);
}

/* ---- fast paths --------------------------------------------------------------------------
 * Checked per pair of vectors: when no lane needs the general path (NaN, the target's
 * subnormal range, overflow), a shorter sequence gives the same bits; otherwise narrow1.
 */

/* float32 -> bfloat16 without NaN lanes:
 *   nearest-even:  t = u + 0x7FFF + (bit 16 of u);  stochastic: t = u + (r >> 16);  t >> 16
 * (the reference's carry trick; the sign bit never receives a carry). Saturation: a result
 * 0x7F80 / 0xFF80 (infinity) becomes 0x7F7F / 0xFF7F, i.e. t - 0x10000. */
static SIMD_INLINE M bf16_bad(V u) { return m_gt(v_and(u, v_set1(0x7FFFFFFFu)), v_set1(0x7F800000u)); }

static SIMD_INLINE V bf16_sat_t(V t, int sat)
{
    if (sat) {
        const M inf = m_eq(v_and(t, v_set1(0x7FFF0000u)), v_set1(0x7F800000u));
        t = v_sel(inf, v_sub(t, v_set1(0x10000u)), t);
    }
    return t;
}
static SIMD_INLINE V bf16_fast_t(V u, V r, int sr, int sat)
{
    return bf16_sat_t(sr ? v_add(u, v_srli(r, 16)) : v_add(v_add(u, v_set1(0x7FFFu)), v_and(v_srli(u, 16), v_set1(1u))),
                      sat);
}
static SIMD_INLINE V bf16_fast(V u, V r, int sr, int sat) { return v_srli(bf16_fast_t(u, r, sr, sat), 16); }

/* float32 -> float16 / e4m3fn / e5m2 nearest-even when every lane is either tiny (rounds to
 * +-0: |x| <= half the smallest subnormal, the tie going to the even 0) or in the normal range
 * without overflow (lo <= |x| <= hi, hi the largest magnitude that rounds to max finite):
 *   q = ((a - rebias) + (half - 1) + lsb) >> D,  zeroed for tiny lanes, sign or-ed in. */
typedef struct fastc {
    uint32_t tiny, lo, hi, add;
} fastc;

static SIMD_INLINE fastc fast_consts(const sfmt t)
{
    const int D = 23 - t.m;
    const uint32_t rebias = (uint32_t)(127 - t.bias) << 23;
    const uint32_t tie = (t.maxfin << D) + rebias + (1u << (D - 1)); /* max finite + half ulp */
    fastc c;
    c.tiny = (uint32_t)(127 - t.bias - t.m) << 23;
    c.lo = (uint32_t)(128 - t.bias) << 23;
    c.hi = (t.maxfin & 1u) ? tie - 1u : tie;
    c.add = (1u << (D - 1)) - 1u - rebias;
    return c;
}

static SIMD_INLINE M norm_out(V u, const fastc c);

static SIMD_INLINE M norm_bad(V u, const fastc c)
{
    const V a = v_and(u, v_set1(0x7FFFFFFFu));
    return m_and(norm_out(u, c), m_gt(a, v_set1(c.tiny)));
}

/* One signed compare per vector tells "lane outside the normal range [lo, hi]": with
 *   x = a + (INT_MAX - hi)   (wrapping; a = |u| < 2^31),
 * a in [lo, hi] maps to [INT_MAX - (hi - lo), INT_MAX], a > hi wraps to negative values and
 * a < lo stays below INT_MAX - (hi - lo), so  out  <=>  INT_MAX - (hi - lo) >s x.
 * (Written with the constant on the left: gcc turned x >s C into min + equal, one instruction
 * more.) Tiny lanes count as out here: steps with them take the tiny-aware check (norm_bad)
 * outside the fast loop. */
static SIMD_INLINE M norm_out(V u, const fastc c)
{
    const V a = v_and(u, v_set1(0x7FFFFFFFu));
    return m_gt(v_set1(0x7FFFFFFFu - (c.hi - c.lo)), v_add(a, v_set1(0x7FFFFFFFu - c.hi)));
}

/* norm_fast for lanes known to be in the normal range (no tiny lanes to zero). */
static SIMD_INLINE V norm_fast_n(V u, const sfmt t, const fastc c)
{
    const int D = 23 - t.m;
    const V a = v_and(u, v_set1(0x7FFFFFFFu));
    const V q = v_srli(v_add(v_add(a, v_set1(c.add)), v_and(v_srli(a, D), v_set1(1u))), D);
    const V sign = v_and(v_srli(u, 32 - t.bits), v_set1(1u << (t.bits - 1)));
    return v_or(q, sign);
}

static SIMD_INLINE V norm_fast(V u, const sfmt t, const fastc c)
{
    const int D = 23 - t.m;
    const V a = v_and(u, v_set1(0x7FFFFFFFu));
    const V q = v_srli(v_add(v_add(a, v_set1(c.add)), v_and(v_srli(a, D), v_set1(1u))), D);
    const V sign = v_and(v_srli(u, 32 - t.bits), v_set1(1u << (t.bits - 1)));
    return v_or(v_keep(m_gt(a, v_set1(c.tiny)), q), sign);
}

/* Stochastic rounding to float16 / e4m3fn / e5m2 for lanes in the normal range without any
 * chance of overflow, lo <= |x| <= hi with hi = max finite exactly (a larger |x| could round up
 * past it). There the dropped part is the low D bits of a, and
 *     F + r >= 2^32  <=>  (a mod 2^D) + (r >> (32 - D)) >= 2^D
 * (F = (a mod 2^D) << (32 - D) is a multiple of 2^(32 - D), so r's low 32 - D bits cannot carry
 * into bit 32 on their own), hence q = (a - rebias + (r >> (32 - D))) >> D, never past max.
 * A zero lane (+-0) never rounds up (F = 0) and stays +-0: sr_fast_z keeps it. */
typedef struct srconst {
    uint32_t lo, hi, rebias;
} srconst;

static SIMD_INLINE srconst sr_consts(const sfmt t)
{
    const uint32_t rebias = (uint32_t)(127 - t.bias) << 23;
    srconst c;
    c.lo = (uint32_t)(128 - t.bias) << 23;
    c.hi = (t.maxfin << (23 - t.m)) + rebias;
    c.rebias = rebias;
    return c;
}

/* lane outside [lo, hi] (zero included), one signed compare as in norm_out */
static SIMD_INLINE M sr_out(V u, const srconst c)
{
    const V a = v_and(u, v_set1(0x7FFFFFFFu));
    return m_gt(v_set1(0x7FFFFFFFu - (c.hi - c.lo)), v_add(a, v_set1(0x7FFFFFFFu - c.hi)));
}

/* lane neither in [lo, hi] nor +-0 */
static SIMD_INLINE M sr_bad_z(V u, const srconst c)
{
    return m_and(sr_out(u, c), m_gt(v_and(u, v_set1(0x7FFFFFFFu)), v_set1(0u)));
}

static SIMD_INLINE V sr_fast(V u, V r, const sfmt t, const srconst c, int zeros)
{
    const int D = 23 - t.m;
    const V a = v_and(u, v_set1(0x7FFFFFFFu));
    V q = v_srli(v_add(v_sub(a, v_set1(c.rebias)), v_srli(r, 32 - D)), D);
    if (zeros) q = v_keep(m_gt(a, v_set1(0u)), q);
    return v_or(q, v_and(v_srli(u, 32 - t.bits), v_set1(1u << (t.bits - 1))));
}

#ifdef MXP_SIMD_HW_F16
/* The hardware's float32 bits; saturate: +-inf -> +-FLT_MAX (0x7F800000 - 1 = 0x7F7FFFFF). */
static SIMD_INLINE V widen_hw_f16(V u, V infout)
{
    const V a = v_and(u, v_set1(0x7FFFFFFFu));
    return v_sel(m_eq(a, v_set1(0x7F800000u)), v_or(infout, v_xor(u, a)), u);
}
#endif

/* ---- loops ------------------------------------------------------------------------------ */

#ifdef MXP_SIMD_HW_F16
#define MXP_SIMD_HW_F16_ON 1
#else
#define MXP_SIMD_HW_F16_ON 0
#endif

static SIMD_INLINE void scalar_tail(mxp_dtype d, mxp_dtype s, int mode, void *dst, const void *src,
                                    size_t n, const mxp__cvt_args *a, uint64_t index0)
{
    if (!n) return;
    mxp__cvt_args b = *a;
    b.index0 = index0;
    mxp__scalar_kernels()->cvt[d][s][mode](dst, src, n, &b);
}

/* Stochastic loops run in blocks of indices that share their high half (one key, mxp__sr_key).
 * From element i of a call whose first index is index0: the end of the block's whole W-element
 * steps before n, with the block's key and element i's low index half; or i itself when fewer
 * than W indices remain before the low half wraps (the caller gives that straddling step to the
 * reference, which re-keys it). */
static SIMD_INLINE size_t sr_block(size_t i, size_t n, uint64_t index0, uint64_t seed, size_t W, uint32_t *lo,
                                   uint64_t *key)
{
    const uint64_t idx = index0 + i;
    const uint64_t room = 0x100000000ull - (uint32_t)idx; /* indices before the low half wraps */
    if (room < W) return i;
    size_t cnt = n - i;
    if ((uint64_t)cnt > room) cnt = (size_t)room;
    *lo = (uint32_t)idx;
    *key = mxp__sr_key(seed, (uint32_t)(idx >> 32));
    return i + cnt / W * W;
}

/* Where a stochastic loop over sources whose elements share random words starts (kernels.h's
 * mxp__sr_bits_src): its steps begin at indices that are multiples of k = per (a word's first
 * byte or half), so the elements before the first such index go to the reference; when the call
 * streams (stream: large, or args.stream), the steps must also start at an `align`-byte boundary
 * of the destination (ob bytes per element), and a call whose two alignments disagree (a
 * destination offset from the first index by other than a multiple of k elements) does not
 * stream. Returns the first element of the vector loop (<= n), *nt whether it streams. */
static SIMD_INLINE size_t sr_start(uint64_t index0, const unsigned char *d, size_t n, size_t ob, size_t align,
                                   unsigned per, int stream, int *nt)
{
    size_t i = (size_t)((per - index0 % per) % per);
    *nt = 0;
    if (stream && (uintptr_t)d % ob == 0) {
        const size_t iv = (align - (uintptr_t)d % align) % align / ob;
        if ((index0 + iv) % per == 0) {
            i = iv;
            *nt = 1;
        }
    }
    return i < n ? i : n;
}

/*
 * A stochastic run whose steps may need no random bits (e5m2 -> e4m3fn: a step none of whose
 * lanes drops bits is nearest-even's; the words are counters, so skipping some changes no other
 * element's result). Elements i .. end, `step` (a power of two) per step, a multiple of it apart,
 * go in chunks of 64 steps: ne(ctx, i, ce) takes the steps up to the first that needs random bits
 * (returns it, or ce), stop(ctx, i, ce) the steps from there up to the next that needs none
 * (the first whatever its lanes, so that the two can never hand one step back and forth). A chunk
 * with more than maxruns such runs (two mispredicted branches each) or more than half its steps
 * hashed sends the next 8 chunks to all(ctx, i, ce), which hashes every step without
 * looking; then the split is tried again. Measured: the comments above cvt_avx512.c's f8s_tab and
 * cvt_avx2.c's f8s2_lut (the AVX2 kernel's until session 52, which replaced it there by one loop
 * that calls out for each step that needs random bits, f8s2_chunks).
 */
/* a float8 run's state for the callbacks: destination, source, the run's first element i0 and
 * its low index half lo (a multiple of 4), the key of its 2^32 indices, the ISA's tables (or
 * NULL) */
typedef struct {
    unsigned char *d;
    const unsigned char *s;
    size_t i0;
    uint32_t lo;
    uint64_t key;
    const unsigned char *tab;
} sr_split_ctx;
/* the index of the random word whose first byte is element i's (kernels.h's mxp__sr_bits_src:
 * four float8 elements per word; i - i0 a multiple of 4) */
static SIMD_INLINE uint32_t sr_split_word(const sr_split_ctx *c, size_t i)
{
    return (uint32_t)((c->lo + (i - c->i0)) >> 2);
}
typedef size_t (*sr_split_ne_fn)(const void *ctx, size_t i, size_t end);
typedef size_t (*sr_split_hashed_fn)(const void *ctx, size_t i, size_t end);
static SIMD_INLINE void sr_split_run(const void *ctx, size_t i, size_t end, size_t step, size_t maxruns,
                                     sr_split_ne_fn ne, sr_split_hashed_fn stop, sr_split_hashed_fn all)
{
    unsigned dense = 0;
    while (i < end) {
        const size_t ce = end - i > 64 * step ? i + 64 * step : end;
        if (dense) {
            i = all(ctx, i, ce);
            dense--;
            continue;
        }
        size_t runs = 0, nhashed = 0;
        while (i < ce) {
            i = ne(ctx, i, ce);
            if (i == ce) break;
            runs++;
            const size_t from = i;
            i = stop(ctx, i, ce);
            nhashed += (i - from) / step;
        }
        if (runs > maxruns || nhashed > 32) dense = 8;
    }
}

/*
 * float32 -> narrow, 2*VL elements per step. Stochastic rounding computes the key of the high
 * half of the index once per run of indices that share it; a direct caller that straddles a
 * multiple of 2^32 is split there (the few elements of a straddling block go to the scalar
 * kernel, which re-keys per element).
 */
/* Store 2*VL narrow results (low `bits` of each lane), streaming when nt. */
static SIMD_INLINE void st_narrow2(unsigned char *p, V x, V y, int bits, int nt)
{
#ifdef MXP_SIMD_NT_STORE32
    if (nt) {
        if (bits == 16) st16x2_nt(p, x, y);
        else st8x2_nt(p, x, y);
        return;
    }
#else
    (void)nt;
#endif
    if (bits == 16) st16x2(p, x, y);
    else st8x2(p, x, y);
}

/* The general nearest-even path for one step (2*VL elements). */
static SIMD_INLINE void narrow_slow2(V out[2], const unsigned char *s, int sat, const sfmt t)
{
    const V over = v_set1(sat ? t.maxfin : t.fn ? 0x7Fu : t.inf), z = v_set1(0u);
    out[0] = narrow1(ld32(s), z, t, 0, over);
    out[1] = narrow1(ld32(s + 4 * VL), z, t, 0, over);
}

/* float32 bits of 2^(B - 1 + m - 24): scales a float8 subnormal result onto float16's subnormal
 * step (MXP_SIMD_NARROW8_SUB) */
static SIMD_INLINE uint32_t sub_scale(const sfmt t) { return (uint32_t)(127 + t.bias - 1 + t.m - 24) << 23; }

/* Steps with tiny lanes (+-0 and the like, which round to +-0) take the tiny-aware fast path,
 * up to 32 steps of 2*VL from i before the caller tries the fast loop again: data with many
 * zeros (ReLU outputs) would otherwise leave the fast loop at almost every step. A step without
 * tiny lanes ends the run early (after the first when !any), so rare tiny lanes cost one step;
 * a step that needs the general path ends it too. Returns where it stopped. */
static SIMD_INLINE size_t tiny_run(unsigned char *d, const unsigned char *s, size_t i, size_t n,
                                   const sfmt t, const fastc c, int nt, int any)
{
    const size_t ob = (size_t)t.bits / 8;
    const size_t end = (n - i) / (2 * VL) > 32 ? i + 32 * 2 * VL : n;
    const size_t i0 = i;
#ifdef MXP_SIMD_PREFETCH
    const int pf = nt && MXP_SIMD_PREFETCH_ON;
#endif
    for (; i + 2 * VL <= end; i += 2 * VL) {
#ifdef MXP_SIMD_PREFETCH
        if (pf) MXP_SIMD_PREFETCH(s + 4 * i + MXP_SIMD_PREFETCH_DIST);
#endif
        const V x = ld32(s + 4 * i), y = ld32(s + 4 * i + 4 * VL);
        if ((any || i != i0) && !m_any(m_or(norm_out(x, c), norm_out(y, c)))) break;
        if (m_any(m_or(norm_bad(x, c), norm_bad(y, c)))) {
#ifdef MXP_SIMD_NARROW8_SUB
            /* float8 subnormal results (or overflow / NaN, which end the run) */
            if (t.bits == 8 && narrow8_sub2(d + i, x, y, 23 - t.m, c.add, c.lo, c.hi, sub_scale(t), nt))
                continue;
#endif
            break;
        }
        st_narrow2(d + ob * i, norm_fast(x, t, c), norm_fast(y, t, c), t.bits, nt);
    }
    return i;
}

#if defined(MXP_SIMD_SR8_PATCH) || defined(MXP_SIMD_SR8W16_PATCH) || defined(MXP_SIMD_NARROW8_PATCH) ||           \
    defined(MXP_SIMD_M_BITS)
/* One float32 (bits xb) below a float8 target's normal range as mant / 2^sh in units of the
 * subnormal quantum Q = 2^(1 - bias - m): a / Q = mant / 2^sh. a < 2^(1 - bias) gives
 * sh >= 24 - m >= 21; a float32 subnormal (e = 0) has sh >= 140 - m. */
static SIMD_INLINE uint32_t tiny8_mant(uint32_t xb)
{
    const uint32_t e = xb >> 23 & 0xFFu;
    return (xb & 0x7FFFFFu) | (e != 0 ? 0x800000u : 0u);
}
static SIMD_INLINE uint32_t tiny8_sh(uint32_t xb, const sfmt t)
{
    const uint32_t e = xb >> 23 & 0xFFu;
    return (uint32_t)(151 - t.bias - t.m) - (e != 0 ? e : 1u);
}
#endif
#ifdef MXP_SIMD_NARROW8_PATCH
/* The float8 code of one float32 (bits xb) below the target's normal range, nearest-even, in
 * integer arithmetic (whatever MXCSR says): q = (mant + 2^(sh-1) - 1 + lsb) >> sh, sh clamped to
 * 25 (mant < 2^24 rounds to 0 there as at any larger sh); q <= 2^m, the smallest normal's code.
 * The streaming step calls it on a lane in the normal range too (and drops the code), where sh
 * can be 0 (e5m2, |x| in [2^7, 2^8)): clamped to 25 as well, so no shift is by 32. */
static SIMD_INLINE uint32_t rne8_tiny_code(uint32_t xb, const sfmt t)
{
    const uint32_t mant = tiny8_mant(xb);
    uint32_t sh = tiny8_sh(xb, t);
    if (sh - 1u > 24u) sh = 25;
    return (mant + (1u << (sh - 1)) - 1u + (mant >> sh & 1u)) >> sh | (xb >> 31) << 7;
}
/*
 * narrow8_fast4 that also takes a step whose only lane outside the normal range is below it
 * (e4m3fn on data over [-8, 8]: 12% of steps; each used to leave the fast loop, a mispredicted
 * branch, for an out-of-line tiny-aware step): that lane's code from rne8_tiny_code, in scalar
 * code, replaces its byte. False with nothing stored when two or more lanes are outside the
 * normal range or the one lane overflows or is NaN. rne_run's fast loop on AVX-512, streaming
 * or in cache (there e5m2 keeps the deferred loop, narrow8_defer_run). AMD Zen 5, one thread,
 * f32 -> e4m3fn, alternating runs: at 2^26 0.112 -> 0.109 ns/element, in cache 0.045 -> 0.041;
 * e5m2 unchanged (bench/RESULTS.md, session 20). AVX2 takes it for e4m3fn in cache only
 * (MXP_SIMD_NARROW8_PATCH_WHEN, MXP_SIMD_NARROW8_OK; cvt_avx2.c says why).
 */
static SIMD_INLINE bool narrow8_fast4p(unsigned char *p, const unsigned char *q, V x0, V x1, V x2, V x3, const sfmt t,
                                       const fastc c, int nt)
{
    const n8p r = narrow8_codes4(x0, x1, x2, x3, 23 - t.m, c.add, 1u << t.m, t.maxfin);
#ifdef MXP_SIMD_NARROW8_OK
    /* the ISA's whole-step test first (AVX2), streaming or not; past it some lane is outside */
    if (__builtin_expect(narrow8_ok(&r), 1)) {
        narrow8_store(p, &r, nt);
        return true;
    }
    const uint64_t bad = narrow8_bad(&r);
#else
    const uint64_t bad = narrow8_bad(&r);
    /* In cache: a branch on "any lane outside the normal range" first. Streaming: no branch on
     * a lone small lane. The lowest outside lane's code is computed whether or not there is one
     * (the step's last lane's, masked off, when there is none) and put by a masked byte
     * broadcast; the branch left is the rare one (two or more such lanes, or an overflow or
     * NaN). AMD Zen 4, f32 ->
     * e4m3fn at 2^26 (12% of steps with a small lane, each a mispredicted branch), alternating
     * runs: 0.168 -> 0.155 ns/element, the time of the same data with no small value (0.156).
     * In cache the branch-free step was 60% slower (0.078 -> 0.128: its chain through the mask,
     * the scalar load and the code is too long for the loop to overlap), so calls in cache keep
     * the branch (bench/RESULTS.md, session 23). */
    if (!nt && __builtin_expect(bad == 0, 1)) {
        narrow8_store(p, &r, nt);
        return true;
    }
#endif
    const uint64_t lone = bad & (0u - bad);
    uint32_t xb;
    memcpy(&xb, q + 4 * (size_t)__builtin_ctzll(bad | (uint64_t)1 << (4 * VL - 1)), 4);
    const uint64_t big = (xb & 0x7FFFFFFFu) >= c.lo ? lone : 0u;
    if (__builtin_expect(((bad & (bad - 1u)) | big) != 0, 0)) return false;
    narrow8_store_lone(p, &r, lone, rne8_tiny_code(xb, t), nt);
    return true;
}
#endif

/* out-of-line helpers (the float8 runs below): kept out of the loops that call them */
#if defined(__GNUC__) || defined(__clang__)
#define MXP_SIMD_NOINLINE __attribute__((noinline))
#else
#define MXP_SIMD_NOINLINE
#endif

/* The 4*VL float32 of a widest step at p as x0 .. x3 (declared here), each line's prefetch after
 * its load when pf (PF_LINES; without MXP_SIMD_PREFETCH pf is never read) */
#ifdef MXP_SIMD_PREFETCH
#define LD4_PF(p, pf)                                                                              \
    const V x0 = ld32(p);                                                                          \
    if (pf) PF_LINES(p, 0, 4 * VL);                                                                \
    const V x1 = ld32((p) + 4 * VL);                                                               \
    if (pf) PF_LINES(p, 4 * VL, 8 * VL);                                                           \
    const V x2 = ld32((p) + 8 * VL);                                                               \
    if (pf) PF_LINES(p, 8 * VL, 12 * VL);                                                          \
    const V x3 = ld32((p) + 12 * VL);                                                              \
    if (pf) PF_LINES(p, 12 * VL, 16 * VL)
#else
#define LD4_PF(p, pf)                                                                              \
    const V x0 = ld32(p), x1 = ld32((p) + 4 * VL), x2 = ld32((p) + 8 * VL), x3 = ld32((p) + 12 * VL)
#endif

#if defined(MXP_SIMD_NARROW8_PATCH) && !defined(MXP_SIMD_NARROW8_PATCH_WHEN) && defined(__clang__)
#define MXP_SIMD_N8_LOOP 1
/* rne_run's fast float8 loop in a function of its own per format and streaming mode, under clang
 * only: inside rne_run, clang 14 held the constants of every other path in zmm10-28 across this
 * loop and reloaded three of its own from the stack in every step (bench/RESULTS.md, session 23) */
static SIMD_INLINE size_t n8_loop(unsigned char *d, const unsigned char *s, size_t i, size_t n, const sfmt t, int nt)
{
    const fastc c = fast_consts(t);
#ifdef MXP_SIMD_PREFETCH
    const int pf = nt && MXP_SIMD_PREFETCH_ON;
#endif
    for (; i + 4 * VL <= n; i += 4 * VL) {
        const unsigned char *p = s + 4 * i;
        LD4_PF(p, pf);
        if (!narrow8_fast4p(d + i, p, x0, x1, x2, x3, t, c, nt)) break;
    }
    return i;
}
MXP_SIMD_NOINLINE static size_t n8_loop_e4m3(unsigned char *d, const unsigned char *s, size_t i, size_t n)
{
    return n8_loop(d, s, i, n, SF_E4M3, 0);
}
MXP_SIMD_NOINLINE static size_t n8_loop_e4m3_nt(unsigned char *d, const unsigned char *s, size_t i, size_t n)
{
    return n8_loop(d, s, i, n, SF_E4M3, 1);
}
MXP_SIMD_NOINLINE static size_t n8_loop_e5m2(unsigned char *d, const unsigned char *s, size_t i, size_t n)
{
    return n8_loop(d, s, i, n, SF_E5M2, 0);
}
MXP_SIMD_NOINLINE static size_t n8_loop_e5m2_nt(unsigned char *d, const unsigned char *s, size_t i, size_t n)
{
    return n8_loop(d, s, i, n, SF_E5M2, 1);
}
#endif

#ifdef MXP_SIMD_NARROW8_SUB
/* 4*VL float32 at q -> float8 nearest-even at p, per half: narrow8_sub2 (subnormal results too),
 * or the general path (overflow, NaN) */
static SIMD_INLINE void narrow8_halves(unsigned char *p, const unsigned char *q, const sfmt t, const fastc c, int sat,
                                      int nt)
{
    for (size_t h = 0; h < 2; h++, p += 2 * VL, q += 8 * VL) {
        if (narrow8_sub2(p, ld32(q), ld32(q + 4 * VL), 23 - t.m, c.add, c.lo, c.hi, sub_scale(t), nt)) continue;
        V out[2];
        narrow_slow2(out, q, sat, t);
        st_narrow2(p, out[0], out[1], 8, nt);
    }
}
#endif

#ifdef MXP_SIMD_NARROW8_FAST_TINY
/*
 * The tiny-aware float8 steps out of line: inlined into rne_run, their constants took the
 * registers of the fast loop's, which gcc then rebuilt in every step (AVX-512 on AMD Zen 5,
 * f32 -> e5m2 in cache, which never leaves the fast loop on data over [-8, 8]: 0.037 -> 0.042
 * ns/element). narrow8_fast4t_lone takes the lone failing step inside the fast loop,
 * narrow8_tiny_run a run of tiny-aware steps (at most 32; in cache while each has a lane below
 * the normal range, streaming whatever the steps hold) and returns where it stopped. D (20:
 * e4m3fn, 21: e5m2) picks an inlined copy with the shift counts as constants. The run prefetches
 * whatever MXP_SIMD_PREFETCH_ON says (ReLU data leaves and re-enters the fast loop every 32
 * steps). MXP_SIMD_NARROW8_TINY_CARRY (AVX-512): a streaming run goes on through steps without
 * a small lane. AMD Zen 4, f32 -> e4m3fn at 2^26, medians of two sets of three alternating
 * runs: over [-0.5, 0.5] (3% of values below 2^-6, in most steps) 0.287 / 0.284 -> 0.246 /
 * 0.254 ns/element, ReLU 0.174 / 0.187 -> 0.156 / 0.160, uniform over [-8, 8] 0.162 / 0.169 ->
 * 0.158 / 0.154, over [-0.05, 0.05] 0.189 / 0.172 -> 0.171 / 0.176. In cache over [-0.5, 0.5]
 * it went 0.135 -> 0.142, so calls in cache stop at the first such step; the AVX2 tiny-aware
 * step costs more, and AVX2's streaming uniform e4m3fn went 0.185 -> 0.227 (session 22).
 * MXP_SIMD_NARROW8_TINY_Z (narrow8_fast4tz): a streaming run's first step picks its mode. In
 * zero mode (that step's lanes outside the normal range were all +-0: ReLU data) a step whose
 * such lanes are all +-0 takes the cheaper zero-aware store, as before; otherwise every step
 * takes the general tiny-aware store. On data with small values the choice between the two
 * stores was a branch per step as random as the data (a step with no small value took the
 * zero-aware store). AMD Zen 4, AVX-512, f32 -> e4m3fn at 2^26, a harness of three alternating
 * runs, ns/element: N(0, 1) data 0.272 -> 0.226, over [-0.5, 0.5] 0.259 -> 0.249; over [-8, 8],
 * N(0, 4) and ReLU data unchanged. Calls in cache keep the zero-aware store everywhere (nt is a
 * constant in each copy, so the mode folds away there: with it a variable, ReLU data in cache
 * went 0.105 -> 0.109).
 * MXP_SIMD_NARROW8_TINY_STOP (AVX2): a streaming run stops once it has had as many steps in a
 * row without a small or zero lane as steps with one, so it stays on data where most steps have
 * one and leaves soon where few do. The count makes no branch on the step's outcome (random on
 * such data: a branch on it cost more than the rule saved). AMD Zen 4 running the AVX2 kernels,
 * f32 -> e4m3fn at 2^26, the same harness, both changes: over [-0.5, 0.5] 0.515 -> 0.294, N(0, 1)
 * 0.410 -> 0.358, N(0, 4) 0.220 -> 0.227; over [-8, 8], e5m2 and ReLU data unchanged within the
 * noise (bench/RESULTS.md, session 24).
 */
#ifdef MXP_SIMD_NARROW8_FAST_TINY_LONE
MXP_SIMD_NOINLINE
static int narrow8_fast4t_lone(void *p, const unsigned char *s, int D, uint32_t add, uint32_t minq, uint32_t maxq,
                               int nt)
{
    return D == 20 ? narrow8_fast4t(p, s, 20, add, minq, maxq, nt) : narrow8_fast4t(p, s, 21, add, minq, maxq, nt);
}
#endif
static SIMD_INLINE size_t tiny_run8(unsigned char *d, const unsigned char *s, size_t i, size_t n, int D, uint32_t add,
                                    uint32_t minq, uint32_t maxq, int nt)
{
    const size_t zend = (n - i) / (4 * VL) > 32 ? i + 32 * 4 * VL : n;
#ifdef MXP_SIMD_NARROW8_TINY_Z
    int zm = 1; /* the zero mode: 1 undecided, 2 on, 0 off */
#endif
#ifdef MXP_SIMD_NARROW8_TINY_STOP
    int clean = 0, small = 0; /* steps in a row without a small or zero lane; steps with one */
#endif
    for (; i + 4 * VL <= zend; i += 4 * VL) {
        const unsigned char *q = s + 4 * i;
#ifdef MXP_SIMD_PREFETCH
        if (nt && MXP_SIMD_PREFETCH_ON) {
            for (size_t o = 0; o < 16 * VL; o += 64) MXP_SIMD_PREFETCH(q + o + MXP_SIMD_PREFETCH_DIST);
        }
#endif
#ifdef MXP_SIMD_NARROW8_TINY_Z
        const int r = narrow8_fast4tz(d + i, q, D, add, minq, maxq, nt, zm);
#else
        const int r = narrow8_fast4t(d + i, q, D, add, minq, maxq, nt);
#endif
        if (r == 0) break;
#ifdef MXP_SIMD_NARROW8_TINY_Z
        if (nt && zm == 1) zm = r == 3 ? 2 : 0;
#endif
#ifdef MXP_SIMD_NARROW8_TINY_STOP
        if (nt) {
            int r2 = r == 2; /* 0 or 1 */
#if defined(__GNUC__) || defined(__clang__)
            __asm__("" : "+r"(r2)); /* opaque, so that no branch is made on it (see above) */
#endif
            small += 1 - r2;
            clean = (clean + 1) & -r2;
            if (clean < small) continue;
            i += 4 * VL;
            break;
        }
#endif
        if (r != 2) continue; /* 1, or 3 (narrow8_fast4tz) */
        /* r == 2, a step with no small or zero lane, stored: with MXP_SIMD_NARROW8_TINY_CARRY
         * a call that streams goes on through it (see above), else the run stops after it */
#ifdef MXP_SIMD_NARROW8_TINY_CARRY
        if (nt) continue;
#endif
        i += 4 * VL;
        break;
    }
    return i;
}
MXP_SIMD_NOINLINE
static size_t narrow8_tiny_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, int D, uint32_t add,
                               uint32_t minq, uint32_t maxq, int nt)
{
    /* nt as a constant too: the zero mode (MXP_SIMD_NARROW8_TINY_Z) then folds away in cache */
    if (nt)
        return D == 20 ? tiny_run8(d, s, i, n, 20, add, minq, maxq, 1) : tiny_run8(d, s, i, n, 21, add, minq, maxq, 1);
    return D == 20 ? tiny_run8(d, s, i, n, 20, add, minq, maxq, 0) : tiny_run8(d, s, i, n, 21, add, minq, maxq, 0);
}
#endif

#if defined(MXP_SIMD_NARROW8_DEFER) && defined(MXP_SIMD_NARROW8_FAST_TINY) && defined(MXP_SIMD_NARROW8_SUB)
#define MXP_SIMD_N8_DEFER_RUN 1 /* narrow8_defer_run below, for rne_run */
/* The 4*VL elements at q (a step whose fast bytes were wrong) to p, by the tiny-aware step, or
 * per half by narrow8_sub2 or the general path (overflow, NaN). */
MXP_SIMD_NOINLINE
static void narrow8_redo(unsigned char *p, const unsigned char *q, const sfmt t, const fastc c, int sat)
{
    const int r = t.m == 3 ? narrow8_fast4t(p, q, 20, c.add, 1u << t.m, t.maxfin, 0)
                           : narrow8_fast4t(p, q, 21, c.add, 1u << t.m, t.maxfin, 0);
    if (r == 0) narrow8_halves(p, q, t, c, sat, 0);
}
/*
 * float32 -> float8 nearest-even for calls that do not stream (in cache), every whole step of
 * 4*VL elements from i, without a branch on the data in the fast loop: each step stores the fast
 * path's bytes, and a step with a lane outside the normal range (e4m3fn on data over [-8, 8]:
 * 12% of steps, each a mispredicted branch where the loop left for another path) is noted in a
 * bit mask and fixed after its block of up to 32 steps: the bytes of the lanes below the normal
 * range rewritten by masked stores (narrow8_fix4), or, with an overflow or NaN lane, the step
 * redone whole (narrow8_redo). When half a block or more needed fixing (ReLU data, small
 * values), the next steps go through the run of tiny-aware steps instead, for as long as every
 * step has such a lane. AMD Zen 5, f32 -> e4m3fn, 2^16 elements, three alternating runs,
 * ns/element, before / after: data over [-8, 8] 0.0448 / 0.0434 (a best-of harness: 0.045 /
 * 0.044), over [-0.5, 0.5] 0.081 / 0.069, over [-0.05, 0.05] 0.078 / 0.076; ReLU data and
 * e5m2 unchanged within the noise. Streaming calls keep rne_run's loop: there the fixes, whether
 * into the streamed lines (the step redone) or into a buffer in L1 streamed out after each
 * block, cost as much as the branch (2^26, six alternating runs: 0.110 -> 0.114 ns/element;
 * with the buffer e5m2 0.103 -> 0.110). bench/RESULTS.md, session 19.
 * Since session 20 rne_run's fast loop takes a step with a lone small lane itself
 * (narrow8_fast4p), in cache too, and calls this loop only where it stops (two or more such
 * lanes in a step, or an overflow) with n at most 8 blocks of 32 steps on, and *runp keeps the
 * mode (run of tiny-aware steps or not) from one call to the next: data over [-8, 8] 0.044 -> 0.041
 * ns/element, over [-0.5, 0.5] and [-0.05, 0.05] 1-2% slower, ReLU data unchanged.
 */
static SIMD_INLINE size_t narrow8_defer_run(unsigned char *d, const unsigned char *s, size_t i, size_t n,
                                            const sfmt t, const fastc c, int sat, int *runp)
{
    int run = *runp;
    while (i + 4 * VL <= n) {
        if (run) {
            const size_t i0 = i;
            i = narrow8_tiny_run(d, s, i, n, 23 - t.m, c.add, 1u << t.m, t.maxfin, 0);
            run = i - i0 == 32 * 4 * VL;
            if (i == i0) {
                narrow8_redo(d + i, s + 4 * i, t, c, sat);
                i += 4 * VL;
            }
            continue;
        }
        const size_t steps = (n - i) / (4 * VL) > 32 ? 32 : (n - i) / (4 * VL);
        const size_t i0 = i, end = i + steps * 4 * VL;
        uint32_t fix = 0, bit = 1;
        for (; i < end; i += 4 * VL, bit <<= 1) {
            const unsigned char *p = s + 4 * i;
            if (narrow8_fast4d(d + i, ld32(p), ld32(p + 4 * VL), ld32(p + 8 * VL), ld32(p + 12 * VL), 23 - t.m, c.add,
                               1u << t.m, t.maxfin))
                fix |= bit;
        }
        size_t k = 0;
        for (; fix != 0; fix &= fix - 1, k++) {
            const size_t j = i0 + (size_t)__builtin_ctz(fix) * 4 * VL;
            if (!narrow8_fix4(d + j, s + 4 * j, 23 - t.m, c.lo, c.hi)) narrow8_redo(d + j, s + 4 * j, t, c, sat);
        }
        run = 2 * k >= steps && steps == 32;
    }
    *runp = run;
    return i;
}
#endif

/* The nearest-even steps from element i while 2*VL elements remain; returns where it stopped. */
static SIMD_INLINE size_t rne_run(unsigned char *d, const unsigned char *s, size_t i, size_t n,
                                  const sfmt t, int sat, int nt)
{
    const size_t ob = (size_t)t.bits / 8;
    const fastc c = fast_consts(t);
    /* bfloat16's rounding constant, made once: gcc otherwise re-broadcast it in every step of
     * the loop (mov + vmovd + vpbroadcastd, 12% of the in-cache time); MXP_SIMD_PIN hides its
     * value from the compiler so that it stays in a register */
    V bk = v_set1(0x7FFFu);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(bk);
#endif
    (void)bk;
#ifdef MXP_SIMD_NARROW8_FAST_TINY_LONE
    int tiny_prev = 0; /* the last step took narrow8_fast4t_lone inside the fast loop */
#endif
#ifdef MXP_SIMD_PREFETCH
    const int pf = nt && MXP_SIMD_PREFETCH_ON &&
                   (MXP_SIMD_PREFETCH_HW_F16 || !(MXP_SIMD_HW_F16_ON && t.dt == MXP_FLOAT16)) &&
                   (MXP_SIMD_PREFETCH_BF16 || t.bias != 127);
#endif
#ifdef MXP_SIMD_N8_DEFER_RUN
    int drun = 0; /* narrow8_defer_run's mode, kept from one of its calls to the next */
    /* e5m2 in cache: the deferred loop for the whole call (its normal range reaches down to
     * 2^-14, so lone small lanes are rare, and the fast loop's branch cost 1-3%) */
    if (t.bits == 8 && t.m == 2 && !nt) i = narrow8_defer_run(d, s, i, n, t, c, sat, &drun);
#endif
    while (i + 2 * VL <= n) {
        /* Fast steps until one needs another path. Those paths sit outside this inner loop, so
         * it holds only the fast path's constants, in vector registers (with an out-of-line
         * general path called inside the loop, gcc rebuilt every constant in every step).
         * The widest loop takes 4*VL elements per step with one check for all of them (loop
         * and check overhead was a fifth of the in-cache time); the block it stops at is
         * handled right after it, and a last step of 2*VL (fewer than 4*VL left) at the end. */
#ifdef MXP_SIMD_N8_LOOP
        if (t.bits == 8)
            i = t.m == 3 ? (nt ? n8_loop_e4m3_nt(d, s, i, n) : n8_loop_e4m3(d, s, i, n))
                         : (nt ? n8_loop_e5m2_nt(d, s, i, n) : n8_loop_e5m2(d, s, i, n));
        else
#endif
        for (; i + 4 * VL <= n; i += 4 * VL) {
            const unsigned char *p = s + 4 * i;
            LD4_PF(p, pf);
#ifdef MXP_SIMD_HW_F16
            if (t.dt == MXP_FLOAT16) {
                hw_f16_st2(d + 2 * i, x0, x1, sat, nt);
                hw_f16_st2(d + 2 * i + 4 * VL, x2, x3, sat, nt);
                continue;
            }
#endif
            if (t.bias == 127) {
#ifdef MXP_SIMD_BF16_HW
                if (t.hw) {
#ifdef MXP_SIMD_BF16_HW4
                    if (nt || MXP_SIMD_BF16_HW4_CACHE) {
                        if (!bf16_hw4(d + 2 * i, x0, x1, x2, x3, bk, sat, nt)) break;
                        continue;
                    }
#endif
                    /* no NaN test first: the instruction's NaN rule is the reference's (a
                     * half with a NaN and a subnormal lane returns false: general path) */
                    if (!bf16_hw2(d + 2 * i, x0, x1, bk, sat, nt) || !bf16_hw2(d + 2 * i + 4 * VL, x2, x3, bk, sat, nt))
                        break;
                    continue;
                }
#endif
#ifdef MXP_SIMD_ANY_NAN4
                if (any_nan4(x0, x1, x2, x3)) break;
#else
                if (m_any(m_or(m_or(bf16_bad(x0), bf16_bad(x1)), m_or(bf16_bad(x2), bf16_bad(x3))))) break;
#endif
#ifdef MXP_SIMD_BF16_RNE2
                bf16_rne2(d + 2 * i, x0, x1, bk, sat, nt);
                bf16_rne2(d + 2 * i + 4 * VL, x2, x3, bk, sat, nt);
#else
                const V z = v_set1(0u);
                st_narrow2(d + 2 * i, bf16_fast(x0, z, 0, sat), bf16_fast(x1, z, 0, sat), 16, nt);
                st_narrow2(d + 2 * i + 4 * VL, bf16_fast(x2, z, 0, sat), bf16_fast(x3, z, 0, sat), 16, nt);
#endif
                continue;
            }
#ifdef MXP_SIMD_NARROW8_FAST
            if (t.bits == 8) {
#if defined(MXP_SIMD_NARROW8_PATCH_WHEN)
                if (MXP_SIMD_NARROW8_PATCH_WHEN(t, nt)
                        ? !narrow8_fast4p(d + i, p, x0, x1, x2, x3, t, c, nt)
                        : !narrow8_fast4(d + i, x0, x1, x2, x3, 23 - t.m, c.add, 1u << t.m, t.maxfin, nt)) {
#elif defined(MXP_SIMD_NARROW8_PATCH)
                if (!narrow8_fast4p(d + i, p, x0, x1, x2, x3, t, c, nt)) {
#else
                if (!narrow8_fast4(d + i, x0, x1, x2, x3, 23 - t.m, c.add, 1u << t.m, t.maxfin, nt)) {
#endif
#ifdef MXP_SIMD_NARROW8_FAST_TINY_LONE
                    /* a lone step with a subnormal or zero result (e4m3fn on data over
                     * [-8, 8]: 12% of steps) is taken here without leaving the loop; a second
                     * failing step in a row (ReLU data) leaves for the run of tiny-aware steps */
                    if (!tiny_prev && narrow8_fast4t_lone(d + i, p, 23 - t.m, c.add, 1u << t.m, t.maxfin, nt) != 0) {
                        tiny_prev = 1;
                        continue;
                    }
                    tiny_prev = 0; /* the loop is entered afresh after the other paths */
#endif
                    break;
                }
#ifdef MXP_SIMD_NARROW8_FAST_TINY_LONE
                tiny_prev = 0;
#endif
                continue;
            }
#endif
            if (m_any(m_or(m_or(norm_out(x0, c), norm_out(x1, c)), m_or(norm_out(x2, c), norm_out(x3, c)))))
                break;
            st_narrow2(d + ob * i, norm_fast_n(x0, t, c), norm_fast_n(x1, t, c), t.bits, nt);
            st_narrow2(d + ob * i + ob * 2 * VL, norm_fast_n(x2, t, c), norm_fast_n(x3, t, c), t.bits, nt);
        }
        if (i + 4 * VL <= n) {
            /* The widest step at i failed: its 4*VL elements are handled here at once rather
             * than retried 2*VL at a time (every retry is one more mispredicted branch: with
             * e4m3fn and 0.2% of values in its subnormal range that cost a third of the time).
             * float8 on AVX2: the zero-aware wide step (and a run of it) when the block has
             * +-0 lanes, else narrow8_sub2 per half (subnormal results too) or the general path.
             * Otherwise: every lane normal or tiny: the tiny-aware fast path, then a run of it
             * (ReLU data has zeros in most steps); else the general path. Then the widest loop
             * again. */
#ifdef MXP_SIMD_N8_DEFER_RUN
            if (t.bits == 8 && !nt) {
                /* in cache: the deferred loop for up to 8 blocks of 32 steps, then the fast loop
                 * again (narrow8_defer_run) */
                const size_t lim = (n - i) / (4 * VL) > 8 * 32 ? i + 8 * 32 * 4 * VL : n;
                i = narrow8_defer_run(d, s, i, lim, t, c, sat, &drun);
                continue;
            }
#endif
#ifdef MXP_SIMD_NARROW8_FAST_TINY
            if (t.bits == 8) {
                /* subnormal / zero results: a run of such steps while each has one (ReLU data:
                 * nearly all), at most 32, then the widest loop again */
                const size_t i0 = i;
                i = narrow8_tiny_run(d, s, i, n, 23 - t.m, c.add, 1u << t.m, t.maxfin, nt);
                if (i != i0) continue;
            }
#endif
#ifdef MXP_SIMD_NARROW8_SUB
            if (t.bits == 8) {
#ifdef MXP_SIMD_NARROW8_FASTZ
                /* zeros (ReLU outputs): the zero-aware wide step, for up to 32 steps while
                 * every step has a zero lane and nothing else irregular */
                const unsigned char *q0 = s + 4 * i;
                const V ab = v_set1(0x7FFFFFFFu), z = v_set1(0u);
                if (m_any(m_or(m_or(m_eq(v_and(ld32(q0), ab), z), m_eq(v_and(ld32(q0 + 4 * VL), ab), z)),
                               m_or(m_eq(v_and(ld32(q0 + 8 * VL), ab), z), m_eq(v_and(ld32(q0 + 12 * VL), ab), z))))) {
                    const size_t i0 = i, zend = (n - i) / (4 * VL) > 32 ? i + 32 * 4 * VL : n;
                    for (; i + 4 * VL <= zend; i += 4 * VL) {
                        const unsigned char *q = s + 4 * i;
#ifdef MXP_SIMD_PREFETCH
                        if (nt) {
                            for (size_t o = 0; o < 16 * VL; o += 64)
                                MXP_SIMD_PREFETCH(q + o + MXP_SIMD_PREFETCH_DIST);
                        }
#endif
                        const int r = narrow8_fast4z(d + i, ld32(q), ld32(q + 4 * VL), ld32(q + 8 * VL),
                                                     ld32(q + 12 * VL), 23 - t.m, c.add, 1u << t.m, t.maxfin, nt);
                        if (r == 1) continue;
                        if (r == 2) i += 4 * VL;
                        break;
                    }
                    if (i != i0) continue;
                }
#endif
                narrow8_halves(d + i, s + 4 * i, t, c, sat, nt);
                i = tiny_run(d, s, i + 4 * VL, n, t, c, nt, 1);
                continue;
            }
#endif
            if (t.bias != 127) {
                const unsigned char *p = s + 4 * i;
                const V x0 = ld32(p), x1 = ld32(p + 4 * VL), x2 = ld32(p + 8 * VL), x3 = ld32(p + 12 * VL);
                if (!m_any(m_or(m_or(norm_bad(x0, c), norm_bad(x1, c)), m_or(norm_bad(x2, c), norm_bad(x3, c))))) {
                    st_narrow2(d + ob * i, norm_fast(x0, t, c), norm_fast(x1, t, c), t.bits, nt);
                    st_narrow2(d + ob * i + ob * 2 * VL, norm_fast(x2, t, c), norm_fast(x3, t, c), t.bits, nt);
                    i = tiny_run(d, s, i + 4 * VL, n, t, c, nt, 1);
                    continue;
                }
            }
            V out[2];
            narrow_slow2(out, s + 4 * i, sat, t);
            st_narrow2(d + ob * i, out[0], out[1], t.bits, nt);
            narrow_slow2(out, s + 4 * i + 8 * VL, sat, t);
            st_narrow2(d + ob * i + ob * 2 * VL, out[0], out[1], t.bits, nt);
            i += 4 * VL;
            continue;
        }
        /* fewer than 4*VL elements left: at most one step of 2*VL (tiny-aware or general) */
        if (i + 2 * VL > n) break;
        if (t.bias != 127) {
            const size_t i0 = i;
            i = tiny_run(d, s, i, n, t, c, nt, 0);
            if (i != i0) continue;
        }
        /* the general path returns its results, so that they are stored like the fast path's
         * (a plain store into a line being streamed costs more than the math) */
        V out[2];
        narrow_slow2(out, s + 4 * i, sat, t);
        st_narrow2(d + ob * i, out[0], out[1], t.bits, nt);
        i += 2 * VL;
    }
    return i;
}

#if defined(MXP_SIMD_SR8_PATCH) || defined(MXP_SIMD_SR8W16_PATCH) || defined(MXP_SIMD_M_BITS)
/* The float8 code of one float32 (bits xb) below the target's normal range, rounded
 * stochastically with its full random word r by kernels.h's rule, in integer arithmetic (so
 * whatever MXCSR says): a / Q = mant / 2^sh with Q = 2^(1 - bias - m) the subnormal quantum, so
 * (mant << 32) >> sh holds q = floor(a / Q) above F, the top 32 bits of the dropped part, and the
 * lane rounds up iff F + r >= 2^32. a < 2^(1 - bias) gives sh >= 24 - m >= 21, so q <= 2^m (2^m
 * is the smallest normal's code); a float32 subnormal (e = 0, sh >= 140 - m, clamped to 63) gets
 * q = F = 0, as in the reference. */
static SIMD_INLINE uint32_t sr8_tiny_code(uint32_t xb, const sfmt t, uint32_t r)
{
    const uint32_t mant = tiny8_mant(xb);
    uint32_t sh = tiny8_sh(xb, t);
    if (sh > 63) sh = 63;
    const uint64_t w = ((uint64_t)mant << 32) >> sh; /* q << 32 | F */
    const uint32_t up = (uint32_t)(((w & 0xFFFFFFFFu) + r) >> 32);
    return ((uint32_t)(w >> 32) + up) | (xb >> 31) << 7;
}
/* For a stochastic float8 step of 2*VL float32 at q whose lanes outside [lo, hi) are the bits of
 * out (nonzero): the lane j when it is the only one and below the normal range (lo), with its
 * code in *code (index0: the low 32 bits of the index of q's first element); else -1. */
static SIMD_INLINE int sr8_lone_code(uint32_t out, const unsigned char *q, const sfmt t, uint32_t lo, uint64_t key,
                                     uint32_t index0, uint32_t *code)
{
    if ((out & (out - 1u)) != 0) return -1;
    const unsigned j = (unsigned)__builtin_ctz(out);
    uint32_t xb;
    memcpy(&xb, q + 4 * j, 4);
    if ((xb & 0x7FFFFFFFu) >= lo) return -1;
    *code = sr8_tiny_code(xb, t, mxp__sr_bits_k(key, index0 + j));
    return (int)j;
}
#ifdef MXP_SIMD_SR8W16_PATCH /* srn_run's lone lane needs the lane mask that the ISA's step gives */
/* sr8_lone_code for a step of 2*VL 16-bit elements at q (format f; lanes outside the word
 * range [lw, hw) in out): the lone lane's float32 bits are its bfloat16 word moved up, or its
 * float16 value when that is normal (a float16 subnormal, sign aside below 2^-14, takes the
 * general step); a lane at or above hw (overflow, infinity, NaN) or +-0 returns -1 too. */
static SIMD_INLINE int sr8w16_lone_code(uint32_t out, const unsigned char *q, const sfmt f, const sfmt t,
                                        uint32_t lw, uint64_t key, uint32_t index0, uint32_t *code)
{
    if ((out & (out - 1u)) != 0) return -1;
    const unsigned j = (unsigned)__builtin_ctz(out);
    uint16_t x;
    memcpy(&x, q + 2 * j, 2);
    const uint32_t a = x & 0x7FFFu;
    if (a >= lw || a < (f.dt == MXP_BFLOAT16 ? 1u : 0x0400u)) return -1;
    const uint32_t xb = f.dt == MXP_BFLOAT16 ? (uint32_t)x << 16
                                              : ((uint32_t)(x & 0x8000u) << 16) | ((a + ((127u - 15u) << 10)) << 13);
    *code = sr8_tiny_code(xb, t, mxp__sr_bits_ks(key, index0 + j, mxp__sr_shift(f.dt, t.dt)));
    return (int)j;
}
#endif
#endif

/* A stochastic step's inputs: the 2*VL float32 at q and their words (sr_words_hi) from the Weyl
 * states x and x + step, in this order: the first half's words, its load, its lines' prefetch
 * when pf (PF_LINES), then the second half's. The order was measured: with both loads and
 * prefetches together after all the words, gcc's f32 -> e5m2 stochastic at 2^26 went 0.115 ->
 * 0.130 ns/element (AMD Zen 5, six alternating runs); with the prefetches at the top of the step,
 * clang's f32 -> bf16 stochastic (this loop's until session 49) took 0.142 instead of 0.116
 * (bench/RESULTS.md session 18). */
typedef struct sr_in {
    V r0, r1, u0, u1;
} sr_in;
/* the VL float32 at q + 4 * k * VL (k = 0 or 1), and their lines' prefetch when pf */
static SIMD_INLINE V ld32_pf(const unsigned char *q, int k, int pf)
{
    const V u = ld32(q + 4 * VL * k);
#ifdef MXP_SIMD_PREFETCH
    if (pf) PF_LINES(q, 4 * VL * k, 4 * VL * (k + 1));
#else
    (void)pf;
#endif
    return u;
}
static SIMD_INLINE sr_in sr_load(const unsigned char *q, V x, V step, V khi, V m1, V m2, int pf)
{
    sr_in in;
    in.r0 = sr_words_hi(x, khi, m1, m2);
    in.u0 = ld32_pf(q, 0, pf);
    in.r1 = sr_words_hi(v_add(x, step), khi, m1, m2);
    in.u1 = ld32_pf(q, 1, pf);
    return in;
}

#ifdef MXP_SIMD_SR8_FASTZ
/* A run of sr8_fast2z steps from element i (il: the Weyl states of its indices) while each has
 * a lane below the normal range, at most 32; returns where it stopped. ntd: bit 0 nt (streaming),
 * bit 1 "dense" (sr_run's last run ended fewer than SR8_DENSE steps before this one: data with
 * many small values; MXP_SIMD_SR8_ZC's tiny mode below).
 * Out of line, one copy per float8 format: inlined into sr_run, its constants and those of
 * sr8_fast2z's subnormal lanes took the registers of the loops around it, which gcc then
 * rebuilt in every step (AMD Zen 5, f32 -> e5m2 stochastic on ReLU data in cache: 0.092 ->
 * 0.105 ns/element). */
#define SR8_DENSE 4
static SIMD_INLINE size_t sr8_zrun(unsigned char *d, const unsigned char *s, size_t i, size_t end, V il, V khi,
                                   const sfmt t, int ntd)
{
    const int nt = ntd & 1, dense = ntd >> 1, zpf = nt && MXP_SIMD_PREFETCH_ON;
    (void)dense; /* read by MXP_SIMD_SR8_ZC's code only */
#ifndef MXP_SIMD_SR8_ZC
    const srconst sc = sr_consts(t);
#endif
    V m1 = v_set1(MXP__SR_M1), m2 = v_set1(MXP__SR_M2), step = v_set1((uint32_t)VL * MXP__SR_W);
    V step2 = v_set1(2u * (uint32_t)VL * MXP__SR_W);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(m1);
    MXP_SIMD_PIN(m2);
    MXP_SIMD_PIN(step);
    MXP_SIMD_PIN(step2);
    MXP_SIMD_PIN(khi);
#endif
    V x = il;
    const size_t zend = (end - i) / (2 * VL) > 32 ? i + 32 * 2 * VL : end;
#ifdef MXP_SIMD_SR8_ZC
    const sr8zc zc = sr8z_consts(23 - t.m);
    if (nt && i < zend) {
        /* Streaming, the tiny mode: when the run's first step has small values but no +-0 and
         * the last run ended fewer than SR8_DENSE steps before (data with many small values),
         * the steps after it take every lane below the normal range by sr8z_tiny without a
         * branch on which lanes (the zero mode's branch on "only +-0?" is as random as such
         * data), and the run stops once it has had as many steps in a row without a small lane
         * as steps with one (narrow8_tiny_run's rule; stopping at the first such step kept half
         * the gain). Otherwise, and in cache, the zero mode below. AMD Zen 4, f32 -> e4m3fn
         * stochastic at 2^26, both builds in one process on the same buffers, eleven
         * alternating calls, medians: over [-0.5, 0.5] 0.549 -> 0.452 ns/element, N(0, 0.3^2)
         * 0.565 -> 0.447; N(0, 1), N(0, 4), uniform and ReLU data unchanged (0.98-1.01x).
         * Without the "dense" condition, every run with small values took it: N(0, 1) went
         * 0.369 -> 0.384 (bench/RESULTS.md, session 25). */
        const sr_in in = sr_load(s + 4 * i, x, step, khi, m1, m2, zpf);
        int r = sr8_fast2zc(d + i, in.u0, in.u1, in.r0, in.r1, &zc, 1, 1);
        if (r == 0) return i;
        x = v_add(x, step2);
        i += 2 * VL;
        if (r == 2) return i;
        if (r == 1 && dense) {
            int clean = 0, small = 1;
            while (i < zend) {
                const sr_in tin = sr_load(s + 4 * i, x, step, khi, m1, m2, zpf);
                r = sr8_fast2zc(d + i, tin.u0, tin.u1, tin.r0, tin.r1, &zc, 1, 0);
                if (r == 0) break;
                x = v_add(x, step2);
                i += 2 * VL;
                int r2 = r == 2; /* 0 or 1 */
#if defined(__GNUC__) || defined(__clang__)
                __asm__("" : "+r"(r2)); /* opaque, so that no branch is made on it */
#endif
                small += 1 - r2;
                clean = (clean + 1) & -r2;
                if (clean >= small) break;
            }
            return i;
        }
    }
#endif
    while (i < zend) {
        const sr_in in = sr_load(s + 4 * i, x, step, khi, m1, m2, zpf);
#ifdef MXP_SIMD_SR8_ZC
        const int r = sr8_fast2zc(d + i, in.u0, in.u1, in.r0, in.r1, &zc, nt, 1);
#else
        const int r = sr8_fast2z(d + i, in.u0, in.u1, in.r0, in.r1, 23 - t.m, sc.lo, sc.hi, sc.rebias, nt);
#endif
        if (r == 0) break;
        x = v_add(x, step2);
        i += 2 * VL;
        if (r == 2) break;
    }
    return i;
}
MXP_SIMD_NOINLINE
static size_t sr8_zrun_e4m3(unsigned char *d, const unsigned char *s, size_t i, size_t end, V il, V khi, int nt)
{
    return sr8_zrun(d, s, i, end, il, khi, SF_E4M3, nt);
}
MXP_SIMD_NOINLINE
static size_t sr8_zrun_e5m2(unsigned char *d, const unsigned char *s, size_t i, size_t end, V il, V khi, int nt)
{
    return sr8_zrun(d, s, i, end, il, khi, SF_E5M2, nt);
}
#endif

/* The constants of a stochastic loop with sr_out's range test (sr_run, srn_run, srh_run), declared
 * as the locals m1, m2 (the hash's multipliers), khi (the key's high half), step (the Weyl step of
 * VL indices), olim and oadd (the test's), and pinned in registers where the ISA can: with the
 * general path inside the loop gcc rebuilt them, broadcast by broadcast, in every step, and
 * spilled (sr_run). */
#ifdef MXP_SIMD_PIN
#define SR_RUN_PIN()                                                                               \
    do {                                                                                           \
        MXP_SIMD_PIN(m1);                                                                          \
        MXP_SIMD_PIN(m2);                                                                          \
        MXP_SIMD_PIN(khi);                                                                         \
        MXP_SIMD_PIN(step);                                                                        \
        MXP_SIMD_PIN(olim);                                                                        \
        MXP_SIMD_PIN(oadd);                                                                        \
    } while (0)
#else
#define SR_RUN_PIN() ((void)0)
#endif
#define SR_RUN_CONSTS(key, sc)                                                                     \
    V m1 = v_set1(MXP__SR_M1), m2 = v_set1(MXP__SR_M2);                                            \
    V khi = v_set1((uint32_t)((key) >> 32)), step = v_set1((uint32_t)VL * MXP__SR_W);              \
    V olim = v_set1(0x7FFFFFFFu - ((sc).hi - (sc).lo)), oadd = v_set1(0x7FFFFFFFu - (sc).hi);      \
    SR_RUN_PIN()

/*
 * The stochastic steps from element i to end (a multiple of 2*VL elements later), all in one
 * block of 2^32 indices: lo = the low half of element i's index, key = the block's key.
 * As in rne_run, the inner loop holds only the fast path (float8 with every lane in the normal
 * range without overflow, sr_fast; bfloat16 and float16 have srb_run and srh_run, below; float16
 * had this loop until session 53) with its constants in registers: the hash's multipliers, keys
 * and index step are pinned (with the general path inside the loop gcc rebuilt them, broadcast
 * by broadcast, in every step, and spilled). A step that fails the check leaves the loop, is done
 * by the zero-aware fast path or the general one, and the loop resumes. The fast paths use
 * r >> (32 - D) only (D = 23 - m dropped bits), so they skip the hash's last step (sr_words_hi:
 * at most 21 top bits are used); the other paths complete the word.
 */
static SIMD_INLINE size_t sr_run(unsigned char *d, const unsigned char *s, size_t i, size_t end,
                                 uint32_t lo, uint64_t key, const sfmt t, int sat, int nt)
{
    const size_t ob = (size_t)t.bits / 8;
    const srconst sc = sr_consts(t);
#if defined(MXP_SIMD_SR8_PATCH) || defined(MXP_SIMD_M_BITS)
    const size_t i_first = i; /* its index is lo */
#endif
    SR_RUN_CONSTS(key, sc);
    /* the Weyl states of the indices lo, lo + 1, ...: W apart, so step = VL * W per vector */
    V il = v_add(v_set1(lo * MXP__SR_W + (uint32_t)key), v_mullo(v_iota(), v_set1(MXP__SR_W)));
    const int pf = nt && MXP_SIMD_PREFETCH_ON;
    size_t zexit = (size_t)-1; /* where the last sr8_zrun stopped (none yet) */
    (void)zexit;
    while (i < end) {
        for (; i < end; i += 2 * VL) {
            const sr_in in = sr_load(s + 4 * i, il, step, khi, m1, m2, pf);
            const V r0 = in.r0, r1 = in.r1, u0 = in.u0, u1 = in.u1;
#ifdef MXP_SIMD_SR8_FAST
            if (t.bits == 8) {
#ifdef MXP_SIMD_SR8_PATCH
                /* a lone lane below the normal range (e4m3fn on data over [-8, 8]: 6% of steps)
                 * taken here in scalar code; two or more such lanes, or one that overflows or
                 * is NaN, leave the loop */
                uint32_t out, code;
                V b = sr8_codes2(u0, u1, r0, r1, 23 - t.m, sc.lo, sc.hi, sc.rebias, &out);
                if (out != 0) {
                    if (sr8_lone_code(out, s + 4 * i, t, sc.lo, key, lo + (uint32_t)(i - i_first), &code) < 0) break;
                    b = sr8_patch(b, out, code);
                }
                sr8w_store(d + i, b, nt);
#else
                if (!sr8_fast2(d + i, u0, u1, r0, r1, 23 - t.m, sc.lo, sc.hi, sc.rebias, nt)) break;
#endif
            } else
#endif
            {
                /* lane outside [lo, hi]: one signed compare, as sr_out */
                const V a0 = v_and(u0, v_set1(0x7FFFFFFFu)), a1 = v_and(u1, v_set1(0x7FFFFFFFu));
                if (m_any(m_or(m_gt(olim, v_add(a0, oadd)), m_gt(olim, v_add(a1, oadd))))) break;
                st_narrow2(d + ob * i, sr_fast(u0, r0, t, sc, 0), sr_fast(u1, r1, t, sc, 0), t.bits, nt);
            }
            il = v_add(il, v_add(step, step));
        }
        if (i >= end) break;
#if defined(MXP_SIMD_M_BITS) && !defined(MXP_SIMD_SR8_PATCH)
        if (t.bits == 8) {
            /* a lone lane below the normal range (e4m3fn on data over [-8, 8]: 3% of 16-element
             * steps), in scalar code (sr8_tiny_code), the rest as in the fast loop; not inside
             * that loop, where its code cost AVX2 registers */
            const V u0 = ld32(s + 4 * i), u1 = ld32(s + 4 * i + 4 * VL);
            const uint32_t out = m_bits(sr_out(u0, sc)) | m_bits(sr_out(u1, sc)) << VL;
            const uint32_t index0 = lo + (uint32_t)(i - i_first);
            uint32_t c8;
            const int j = out != 0 ? sr8_lone_code(out, s + 4 * i, t, sc.lo, key, index0, &c8) : -1;
            if (j >= 0) {
                const V at = v_set1((uint32_t)j), code = v_set1(c8);
                const V w0 = sr_words_hi(il, khi, m1, m2), w1 = sr_words_hi(v_add(il, step), khi, m1, m2);
                const V at1 = v_add(v_iota(), v_set1((uint32_t)VL));
                st_narrow2(d + i, v_sel(m_eq(v_iota(), at), code, sr_fast(u0, w0, t, sc, 0)),
                           v_sel(m_eq(at1, at), code, sr_fast(u1, w1, t, sc, 0)), 8, nt);
                il = v_add(il, v_add(step, step));
                i += 2 * VL;
                continue;
            }
        }
#endif
#ifdef MXP_SIMD_SR8_FASTZ
        if (t.bits == 8) {
            /* float8 with lanes below the normal range (ReLU data: +-0 in nearly every step): a
             * run of such steps, then the fast loop again */
            const size_t i0 = i;
            const int ntd = nt | (nt && zexit != (size_t)-1 && i - zexit < SR8_DENSE * 2 * VL) << 1;
            i = t.m == 3 ? sr8_zrun_e4m3(d, s, i, end, il, khi, ntd) : sr8_zrun_e5m2(d, s, i, end, il, khi, ntd);
            zexit = i;
            if (i != i0) {
                /* the Weyl states of the indices i0 + k are k * W further on */
                il = v_add(il, v_set1((uint32_t)(i - i0) * MXP__SR_W));
                continue;
            }
        }
#endif
        /* the step at i needs the zero-aware or the general path */
        const V r0 = sr_finish(sr_words_hi(il, khi, m1, m2));
        const V r1 = sr_finish(sr_words_hi(v_add(il, step), khi, m1, m2));
        const V u0 = ld32(s + 4 * i), u1 = ld32(s + 4 * i + 4 * VL);
        if (!m_any(m_or(sr_bad_z(u0, sc), sr_bad_z(u1, sc)))) {
            st_narrow2(d + ob * i, sr_fast(u0, r0, t, sc, 1), sr_fast(u1, r1, t, sc, 1), t.bits, nt);
        } else {
            const V over = v_set1(sat ? t.maxfin : t.fn ? 0x7Fu : t.inf);
            st_narrow2(d + ob * i, narrow1(u0, r0, t, 1, over), narrow1(u1, r1, t, 1, over), t.bits, nt);
        }
        il = v_add(il, v_add(step, step));
        i += 2 * VL;
    }
    return i;
}

#ifdef MXP_SIMD_H16_UNPK
/* With the ISA's unpacks (sr_h16_unpk: halfwords 0 .. 3 or 4 .. 7 of each 128-bit lane), srb_run
 * and srh_run hash a step's VL words in the order that puts each element's half where the unpack
 * takes it (the words are the same, computed in other lanes):
 * lane p = 4 L + q (128-bit lane L, dword q) holds word 2 L + (q & 1) + (VL / 2) (q >> 1) of the
 * step, so the low unpack gives elements 0 .. VL - 1 in order and the high one the next VL. */
static SIMD_INLINE V srh_order(void)
{
    const V p = v_iota(), q = v_and(p, v_set1(3u));
    return v_add(v_add(v_slli(v_srli(p, 2), 1), v_and(q, v_set1(1u))), v_mullo(v_srli(q, 1), v_set1(VL / 2)));
}
#define SRH_HALVES(h, hi) sr_h16_unpk(h, hi)
#define SRH_R19(h, hi) sr_h16_unpk3(h, hi)
#else
static SIMD_INLINE V srh_order(void) { return v_iota(); }
#define SRH_HALVES(h, hi) sr_h16_ext(h, hi)
#define SRH_R19(h, hi) v_srli(sr_h16_ext(h, hi), 3)
#endif

/* A step's inputs in srb_run, srh_run and srh_zrun: its halves h (the VL words from the Weyl
 * states x, in srh_order, finished: a 16-bit half takes bits the hash's last step changes) and
 * the 2*VL float32 at q, each load followed by its lines' prefetch when pf (as sr_load). */
typedef struct srh_in {
    V h, u0, u1;
} srh_in;
static SIMD_INLINE srh_in srh_load(const unsigned char *q, V x, V khi, V m1, V m2, int pf)
{
    srh_in in;
    in.h = sr_finish(sr_words_hi(x, khi, m1, m2));
    in.u0 = ld32_pf(q, 0, pf);
    in.u1 = ld32_pf(q, 1, pf);
    return in;
}
/* the Weyl states of the words lo / 2, lo / 2 + 1, ... (element lo's and its neighbours'): VL
 * words per step, in srh_order */
static SIMD_INLINE V srh_states(uint32_t lo, uint64_t key)
{
    return v_add(v_set1((lo >> 1) * MXP__SR_W + (uint32_t)key), v_mullo(srh_order(), v_set1(MXP__SR_W)));
}

/*
 * float32 -> bfloat16 stochastic steps, elements i to end (a multiple of 2*VL later, i's index
 * even), in one block of 2^32 indices (lo = i's low index half, key the block's key). Every
 * value drops exactly 16 bits, so since session 49 two neighbours share a word (kernels.h's
 * mxp__sr_bits_src): a step of 2*VL elements hashes the VL words lo / 2, ..., whose halves in
 * order are the elements' r >> 16 (sr_h16_ext), where before it hashed 2*VL words. The fast
 * step is t = u + (r >> 16), t >> 16 (bf16_fast_t's carry rule); a step with a NaN lane takes
 * narrow1 with r = the half << 16 (its low half, which cannot count, 0). Intel Xeon (CPU 4 of
 * bench/RESULTS.md, session 49), medians of five alternating runs, ns/element in cache / at
 * 2^26: avx512 0.141 / 0.316 -> 0.113 / 0.306, --isa avx2 0.200 / 0.349 -> 0.169 / 0.328
 * (nearest-even in cache 0.054 / 0.083; with the hash removed altogether, the old loop took
 * 0.061 / 0.083: the hash is most of the cost).
 */
static SIMD_INLINE size_t srb_run(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t lo,
                                  uint64_t key, int sat, int nt)
{
    const sfmt t = SF_BF16;
    V m1 = v_set1(MXP__SR_M1), m2 = v_set1(MXP__SR_M2);
    V khi = v_set1((uint32_t)(key >> 32)), step = v_set1((uint32_t)VL * MXP__SR_W);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(m1);
    MXP_SIMD_PIN(m2);
    MXP_SIMD_PIN(khi);
    MXP_SIMD_PIN(step);
#endif
    const int pf = nt && MXP_SIMD_PREFETCH_ON;
    V il = srh_states(lo, key);
    while (i < end) {
        for (; i < end; i += 2 * VL) {
            const srh_in in = srh_load(s + 4 * i, il, khi, m1, m2, pf);
            const V h = in.h, u0 = in.u0, u1 = in.u1;
#ifdef MXP_SIMD_ANY_NAN4
            if (any_nan4(u0, u1, u0, u1)) break;
#else
            if (m_any(m_or(bf16_bad(u0), bf16_bad(u1)))) break;
#endif
            il = v_add(il, step);
            /* bf16_fast_t's stochastic step with r >> 16 given */
            const V t0 = bf16_sat_t(v_add(u0, SRH_HALVES(h, 0)), sat);
            const V t1 = bf16_sat_t(v_add(u1, SRH_HALVES(h, 1)), sat);
#ifdef MXP_SIMD_ST16_HI2
            st16_hi2(d + 2 * i, t0, t1, nt);
#else
            st_narrow2(d + 2 * i, v_srli(t0, 16), v_srli(t1, 16), 16, nt);
#endif
        }
        if (i >= end) break;
        /* a step with a NaN lane */
        const V h = sr_finish(sr_words_hi(il, khi, m1, m2));
        const V u0 = ld32(s + 4 * i), u1 = ld32(s + 4 * i + 4 * VL);
        const V over = v_set1(sat ? t.maxfin : t.inf);
        st_narrow2(d + 2 * i, narrow1(u0, v_slli(SRH_HALVES(h, 0), 16), t, 1, over),
                   narrow1(u1, v_slli(SRH_HALVES(h, 1), 16), t, 1, over), 16, nt);
        il = v_add(il, step);
        i += 2 * VL;
    }
    return i;
}

/* srh_run's fast step at element i from the step's halves h, when every lane is in float16's
 * normal range without overflow (z = 0; z = 1: or +-0): with the hardware conversion, the random
 * bits added at the top of the 13 dropped ones (r >> 19 = the half >> 3), then a truncating
 * conversion: a carry out of the dropped bits is the round up (into the exponent when the
 * mantissa was all ones), the sign stays; in range, no lane can pass max finite (max finite
 * itself drops only zeros), and a +-0 lane becomes a float32 below 2^-136, which truncates to
 * +-0. */
static SIMD_INLINE void srh_store(unsigned char *d, size_t i, V u0, V u1, V h, int z, int nt)
{
#ifdef MXP_SIMD_HW_F16
    (void)z;
    hw_f16_st2_rz(d + 2 * i, v_add(u0, SRH_R19(h, 0)), v_add(u1, SRH_R19(h, 1)), nt);
#else
    const srconst sc = sr_consts(SF_F16);
    st_narrow2(d + 2 * i, sr_fast(u0, v_slli(SRH_HALVES(h, 0), 16), SF_F16, sc, z),
               sr_fast(u1, v_slli(SRH_HALVES(h, 1), 16), SF_F16, sc, z), 16, nt);
#endif
}

/* Steps of srh_run from element i (il: the Weyl states of its words) that take +-0 lanes too
 * (ReLU data): at most SRH_ZRUN, until one has a lane neither in the fast range nor +-0; returns
 * where it stopped. A run follows a step with +-0 lanes, and then the plain fast loop resumes,
 * whose test costs an operation less per vector. Out of line: inlined, it slowed the plain loop.
 * AMD Zen 4 (bench/RESULTS.md, session 53), ReLU data (half the values +-0), ns/element in
 * cache / at 2^26, avx512: 0.257 / 0.352 -> 0.165 / 0.186 (with the shared words). */
#define SRH_ZRUN 32
MXP_SIMD_NOINLINE
static size_t srh_zrun(unsigned char *d, const unsigned char *s, size_t i, size_t end, V il, V khi, int nt)
{
    const srconst sc = sr_consts(SF_F16);
    const V m1 = v_set1(MXP__SR_M1), m2 = v_set1(MXP__SR_M2), step = v_set1((uint32_t)VL * MXP__SR_W);
    const V olim = v_set1(0x7FFFFFFFu - (sc.hi - sc.lo)), oadd = v_set1(0x7FFFFFFFu - sc.hi);
    const int pf = nt && MXP_SIMD_PREFETCH_ON;
    for (int k = 0; k < SRH_ZRUN && i < end; k++, i += 2 * VL, il = v_add(il, step)) {
        const srh_in in = srh_load(s + 4 * i, il, khi, m1, m2, pf);
        const V h = in.h, u0 = in.u0, u1 = in.u1;
        const V a0 = v_and(u0, v_set1(0x7FFFFFFFu)), a1 = v_and(u1, v_set1(0x7FFFFFFFu));
        const M out0 = m_and(m_gt(olim, v_add(a0, oadd)), m_gt(a0, v_set1(0u)));
        const M out1 = m_and(m_gt(olim, v_add(a1, oadd)), m_gt(a1, v_set1(0u)));
        if (m_any(m_or(out0, out1))) break;
        srh_store(d, i, u0, u1, h, 1, nt);
    }
    return i;
}

/*
 * float32 -> float16 stochastic steps, elements i to end (a multiple of 2*VL later, i's index
 * even), in one block of 2^32 indices (lo = i's low index half, key the block's key). A float16
 * result drops 13 bits when normal, 14 to 16 when subnormal down to 2^-17, so since session 53
 * two neighbours share their words as a 16-bit source's do (kernels.h's mxp__sr_bits_src): a step
 * of 2*VL elements hashes VL words, whose halves are the elements' r >> 16 (SRH_HALVES, in
 * srh_order), where before it hashed 2*VL words; the words of the low halves (MXP__SR_LO16) only
 * in a step with a lane below 2^-17 other than +-0, where they can count (F + r >= 2^32 with F's
 * low 16 bits 0 elsewhere). The inner loop holds the fast step (srh_store, sr_run's until then),
 * with its constants pinned as in sr_run; a step that fails it takes the zero-aware fast path or
 * the general one, then srh_zrun's steps when it had +-0 lanes. AMD Zen 4, ns/element in cache /
 * at 2^26, uniform data: avx512 0.170 / 0.189 -> 0.144 / 0.170, --isa avx2 0.170 / 0.213 ->
 * 0.154 / 0.203 (bench/RESULTS.md, session 53).
 */
static SIMD_INLINE size_t srh_run(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t lo,
                                  uint64_t key, int sat, int nt)
{
    const sfmt t = SF_F16;
    const srconst sc = sr_consts(t);
    SR_RUN_CONSTS(key, sc);
    const int pf = nt && MXP_SIMD_PREFETCH_ON;
    V il = srh_states(lo, key);
    while (i < end) {
        for (; i < end; i += 2 * VL) {
            const srh_in in = srh_load(s + 4 * i, il, khi, m1, m2, pf);
            const V h = in.h, u0 = in.u0, u1 = in.u1;
            /* lane outside [lo, hi]: one signed compare, as sr_out. (Checking the hardware's
             * results instead, 0x0401 <= |h| <= 0x7BFE, was measured in session 37 of
             * bench/RESULTS.md: 6% faster in cache on dense data, 22% slower on ReLU data, whose
             * zeros it sends to the other paths after the conversion; in session 53, with the
             * shared words and srh_zrun for the zeros, 3% slower in cache on avx512 and 12% on
             * AVX2: the test waits for the conversion.) */
            const V a0 = v_and(u0, v_set1(0x7FFFFFFFu)), a1 = v_and(u1, v_set1(0x7FFFFFFFu));
            if (m_any(m_or(m_gt(olim, v_add(a0, oadd)), m_gt(olim, v_add(a1, oadd))))) break;
            il = v_add(il, step);
            srh_store(d, i, u0, u1, h, 0, nt);
        }
        if (i >= end) break;
        /* a step with a lane outside the fast range: +-0, below float16's normal range, overflow,
         * infinity or NaN */
        const V h = sr_finish(sr_words_hi(il, khi, m1, m2));
        const V u0 = ld32(s + 4 * i), u1 = ld32(s + 4 * i + 4 * VL);
        V w0 = v_slli(SRH_HALVES(h, 0), 16), w1 = v_slli(SRH_HALVES(h, 1), 16);
        if (!m_any(m_or(sr_bad_z(u0, sc), sr_bad_z(u1, sc)))) {
            /* every lane in the fast range or +-0 (the top halves suffice), and maybe more such
             * steps next */
            st_narrow2(d + 2 * i, sr_fast(u0, w0, t, sc, 1), sr_fast(u1, w1, t, sc, 1), 16, nt);
            il = v_add(il, step);
            i += 2 * VL;
            const size_t i0 = i;
            i = srh_zrun(d, s, i, end, il, khi, nt);
            il = v_add(il, v_set1((uint32_t)((i - i0) / 2) * MXP__SR_W)); /* (i - i0) / 2 words on */
            continue;
        }
        /* a lane with 0 < |x| < 2^-17 (bits 0x37000000): more than 16 bits dropped */
        const V deep = v_set1(0x37000000u - 1u), one = v_set1(1u);
        const V b0 = v_sub(v_and(u0, v_set1(0x7FFFFFFFu)), one), b1 = v_sub(v_and(u1, v_set1(0x7FFFFFFFu)), one);
        if (m_any(m_or(m_gtu(deep, b0), m_gtu(deep, b1)))) {
            const V hl = sr_finish(sr_words_hi(v_xor(il, v_set1(MXP__SR_LO16)), khi, m1, m2));
            w0 = v_or(w0, SRH_HALVES(hl, 0));
            w1 = v_or(w1, SRH_HALVES(hl, 1));
        }
        const V over = v_set1(sat ? t.maxfin : t.inf);
        st_narrow2(d + 2 * i, narrow1(u0, w0, t, 1, over), narrow1(u1, w1, t, 1, over), 16, nt);
        il = v_add(il, step);
        i += 2 * VL;
    }
    return i;
}

static SIMD_INLINE void narrow_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a,
                                    const sfmt t, int sr)
{
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *d = (unsigned char *)dst;
    const size_t ob = (size_t)t.bits / 8;
    const int mode = sr ? MXP__SR : MXP__RNE;
    size_t i = 0;
    int nt = 0;
#ifdef MXP_SIMD_NT_STORE32
    /* n >= 2*VL: the head below (< 2*VL elements) must fit (a test or a caller like the fused
     * quantizers' tails can lower the threshold to a few bytes) */
    if (n >= 2 * VL && (n * (4 + ob) >= MXP_SIMD_NT_THRESHOLD || a->stream) && (uintptr_t)d % ob == 0) {
        /* streaming stores need an aligned destination: the reference up to the boundary */
        const size_t align = 2 * VL * ob;
        i = (align - (uintptr_t)d % align) % align / ob; /* < 2*VL <= n */
        scalar_tail(t.dt, MXP_FLOAT32, mode, d, s, i, a, a->index0);
        nt = 1;
    }
#endif
    if (!sr) {
        /* specialised on saturate and streaming, so that the loop carries no flag tests */
#ifdef MXP_SIMD_NO_SPECIALISE
        i = rne_run(d, s, i, n, t, a->saturate, nt);
#else
        if (a->saturate) i = nt ? rne_run(d, s, i, n, t, 1, 1) : rne_run(d, s, i, n, t, 1, 0);
        else i = nt ? rne_run(d, s, i, n, t, 0, 1) : rne_run(d, s, i, n, t, 0, 0);
#endif
    } else {
        while (i + 2 * VL <= n) {
            const uint64_t idx = a->index0 + i;
            const uint32_t lo = (uint32_t)idx;
            const uint64_t room = 0x100000000ull - lo; /* indices before the low half wraps */
            if (room < 2 * VL) {
                /* the reference takes the straddling elements (and, when streaming, a few more
                 * so that the destination stays aligned for the streaming stores) */
                size_t cnt = (size_t)room;
                while (nt && ((uintptr_t)(d + ob * (i + cnt)) % (2 * VL * ob)) != 0) cnt++;
                if (cnt > n - i) cnt = n - i;
                scalar_tail(t.dt, MXP_FLOAT32, mode, d + ob * i, s + 4 * i, cnt, a, idx);
                i += cnt;
                continue;
            }
            size_t cnt = n - i;
            if ((uint64_t)cnt > room) cnt = (size_t)room;
            const size_t end = i + cnt / (2 * VL) * (2 * VL);
            const uint64_t key = mxp__sr_key(a->seed, (uint32_t)(idx >> 32));
#ifdef MXP_SIMD_NO_SPECIALISE
            i = sr_run(d, s, i, end, lo, key, t, a->saturate, nt);
#else
            if (a->saturate) i = nt ? sr_run(d, s, i, end, lo, key, t, 1, 1) : sr_run(d, s, i, end, lo, key, t, 1, 0);
            else i = nt ? sr_run(d, s, i, end, lo, key, t, 0, 1) : sr_run(d, s, i, end, lo, key, t, 0, 0);
#endif
        }
    }
#ifdef MXP_SIMD_NT_STORE32
    if (nt && !a->stream) MXP_SIMD_NT_FENCE(); /* a->stream: the caller fences */
#endif
    scalar_tail(t.dt, MXP_FLOAT32, mode, d + ob * i, s + 4 * i, n - i, a, a->index0 + i);
}

/* VL narrow elements at s -> float32 bits (bf = 1: bfloat16). sat is a constant in every
 * caller: without saturation the infinity fix-ups vanish (hardware float16 widening is then
 * one instruction per vector). */
static SIMD_INLINE V widen_one(const unsigned char *s, const sfmt t, int bf, int sat)
{
    const V infout = v_set1(sat ? 0x7F7FFFFFu : 0x7F800000u);
    if (bf) {
        const V u = v_slli(ld16(s), 16);
        const V a = v_and(u, v_set1(0x7FFFFFFFu));
        /* NaN gets the quiet bit */
        V res = v_or(u, v_keep(m_gt(a, v_set1(0x7F800000u)), v_set1(0x00400000u)));
        if (sat) res = v_sel(m_eq(a, v_set1(0x7F800000u)), v_or(infout, v_xor(u, a)), res);
        return res;
    }
#ifdef MXP_SIMD_HW_F16
    if (t.dt == MXP_FLOAT16) return sat ? widen_hw_f16(hw_f16_ld(s), infout) : hw_f16_ld(s);
#ifdef MXP_SIMD_HW_E5M2
    if (t.dt == MXP_FLOAT8_E5M2) return sat ? widen_hw_f16(hw_e5m2_ld(s), infout) : hw_e5m2_ld(s);
#endif
#endif
#ifdef MXP_SIMD_HW_E4M3
    if (t.dt == MXP_FLOAT8_E4M3FN) return hw_e4m3_ld(s);
#endif
    return widen1(t.bits == 16 ? ld16(s) : ld8(s), t, infout);
}

/* The widening steps from element i while 2*VL elements remain (4*VL per step, then one of
 * 2*VL); stores stream when nt (destination aligned to the vector size by the caller). */
static SIMD_INLINE size_t widen_run(unsigned char *d, const unsigned char *s, size_t i, size_t n,
                                    const sfmt t, int bf, int sat, int nt)
{
    const size_t ib = (size_t)t.bits / 8;
    (void)nt;
#ifdef MXP_SIMD_NT_STORE32
#define WIDEN_ST(p, x) do { if (nt) MXP_SIMD_NT_STORE32((p), (x)); else st32((p), (x)); } while (0)
#else
#define WIDEN_ST(p, x) st32((p), (x))
#endif
#ifdef MXP_SIMD_PREFETCH
    const int pf = MXP_SIMD_PREFETCH_WIDEN && nt && MXP_SIMD_PREFETCH_ON;
#endif
    for (; i + 4 * VL <= n; i += 4 * VL) {
#ifdef MXP_SIMD_PREFETCH
        if (pf) {
            for (size_t o = 0; o < 4 * VL * ib; o += 64) MXP_SIMD_PREFETCH(s + ib * i + o + MXP_SIMD_PREFETCH_DIST);
        }
#endif
#ifdef MXP_SIMD_HW_E4M3
        if (t.dt == MXP_FLOAT8_E4M3FN && !hw_e4m3_nan4(s + i)) { /* the common case: no NaN */
            WIDEN_ST(d + 4 * i, hw_e4m3_ld_nonan(s + i));
            WIDEN_ST(d + 4 * i + 4 * VL, hw_e4m3_ld_nonan(s + i + VL));
            WIDEN_ST(d + 4 * i + 8 * VL, hw_e4m3_ld_nonan(s + i + 2 * VL));
            WIDEN_ST(d + 4 * i + 12 * VL, hw_e4m3_ld_nonan(s + i + 3 * VL));
            continue;
        }
#endif
        const V w0 = widen_one(s + ib * i, t, bf, sat), w1 = widen_one(s + ib * (i + VL), t, bf, sat);
        const V w2 = widen_one(s + ib * (i + 2 * VL), t, bf, sat), w3 = widen_one(s + ib * (i + 3 * VL), t, bf, sat);
        WIDEN_ST(d + 4 * i, w0);
        WIDEN_ST(d + 4 * i + 4 * VL, w1);
        WIDEN_ST(d + 4 * i + 8 * VL, w2);
        WIDEN_ST(d + 4 * i + 12 * VL, w3);
    }
    if (i + 2 * VL <= n) {
        WIDEN_ST(d + 4 * i, widen_one(s + ib * i, t, bf, sat));
        WIDEN_ST(d + 4 * i + 4 * VL, widen_one(s + ib * (i + VL), t, bf, sat));
        i += 2 * VL;
    }
#undef WIDEN_ST
    return i;
}

/* narrow -> float32 (bf = 1: bfloat16's shift). */
static SIMD_INLINE void widen_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a,
                                   const sfmt t, int bf)
{
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *d = (unsigned char *)dst;
    const size_t ib = (size_t)t.bits / 8;
    const int sat = a->saturate;
    size_t i = 0;
    int nt = 0;
#ifdef MXP_SIMD_NT_STORE32
    /* Streaming stores need an aligned destination: the reference up to the boundary (a
     * destination that is not even 4-byte aligned never lines up: plain stores). */
    if (n >= VL && (n * (4 + ib) >= MXP_SIMD_NT_THRESHOLD || a->stream) && (uintptr_t)d % 4 == 0) {
        const size_t align = 4 * VL;
        i = (align - (uintptr_t)d % align) % align / 4; /* < VL <= n */
        scalar_tail(MXP_FLOAT32, t.dt, MXP__RNE, d, s, i, a, a->index0);
        nt = 1;
    }
#endif
    /* specialised on saturate and streaming, so that the loop carries no flag tests */
#ifdef MXP_SIMD_NO_SPECIALISE
    i = widen_run(d, s, i, n, t, bf, sat, nt);
#else
    if (sat) i = nt ? widen_run(d, s, i, n, t, bf, 1, 1) : widen_run(d, s, i, n, t, bf, 1, 0);
    else i = nt ? widen_run(d, s, i, n, t, bf, 0, 1) : widen_run(d, s, i, n, t, bf, 0, 0);
#endif
#ifdef MXP_SIMD_NT_STORE32
    if (nt && !a->stream) MXP_SIMD_NT_FENCE(); /* a->stream: the caller fences */
#endif
    scalar_tail(MXP_FLOAT32, t.dt, MXP__RNE, d + 4 * i, s + ib * i, n - i, a, a->index0 + i);
}

#ifdef MXP_SIMD_HW_F16
/*
 * float16 -> bfloat16 nearest-even without the float32 block of the composed path
 * (cvt_compose.c: widen to float32, then round): the hardware widening (exact, NaN quiet with its
 * payload, as the reference widens), then the float32 -> bfloat16 step (bf16_rne2 / bf16_fast,
 * narrow1 for a step with a NaN). 2*VL elements per step, the reference for the tail (and,
 * streaming, for the head up to the 4*VL-byte boundary). (Until session 27 the float8 ->
 * float16 / bfloat16 pairs and bfloat16 -> float16 came here too; each ISA file has its own
 * kernels for those now. AVX512_BF16 replaces this one too, cvt_avx512.c.)
 */
PRIM void to16_st2(unsigned char *p, V x, V y, int sat, int nt) /* x, y: float32 bits */
{
    V bx, by;
    if (!m_any(m_or(bf16_bad(x), bf16_bad(y)))) {
#ifdef MXP_SIMD_BF16_RNE2
        bf16_rne2(p, x, y, v_set1(0x7FFFu), sat, nt);
        return;
#else
        bx = bf16_fast(x, v_set1(0u), 0, sat);
        by = bf16_fast(y, v_set1(0u), 0, sat);
#endif
    } else {
        const V over = v_set1(sat ? 0x7F7Fu : 0x7F80u);
        bx = narrow1(x, v_set1(0u), SF_BF16, 0, over);
        by = narrow1(y, v_set1(0u), SF_BF16, 0, over);
    }
#ifdef MXP_SIMD_NT_STORE32
    if (nt) st16x2_nt(p, bx, by);
    else st16x2(p, bx, by);
#else
    st16x2(p, bx, by);
#endif
}
static SIMD_INLINE size_t to16_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, int sat, int nt)
{
    for (; i + 2 * VL <= n; i += 2 * VL) {
#ifdef MXP_SIMD_PF_FAR
        if (nt) MXP_SIMD_PF_FAR(s + 2 * i);
#endif
#if defined(MXP_SIMD_BF16_RNE2) && defined(MXP_SIMD_ANY_NAN4)
        /* 4*VL elements without a NaN by bf16_rne2, as narrow_loop does */
        if (i + 4 * VL <= n) {
            const V x0 = hw_f16_ld(s + 2 * i), x1 = hw_f16_ld(s + 2 * (i + VL));
            const V x2 = hw_f16_ld(s + 2 * (i + 2 * VL)), x3 = hw_f16_ld(s + 2 * (i + 3 * VL));
            if (!any_nan4(x0, x1, x2, x3)) {
                const V k = v_set1(0x7FFFu);
                bf16_rne2(d + 2 * i, x0, x1, k, sat, nt);
                bf16_rne2(d + 2 * i + 4 * VL, x2, x3, k, sat, nt);
                i += 2 * VL;
                continue;
            }
        }
#endif
        to16_st2(d + 2 * i, hw_f16_ld(s + 2 * i), hw_f16_ld(s + 2 * (i + VL)), sat, nt);
    }
    return i;
}
static SIMD_INLINE void to16_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *d = (unsigned char *)dst;
    const int sat = a->saturate;
    size_t i = 0;
    int nt = 0;
#ifdef MXP_SIMD_NT_STORE32
    if (n >= 2 * VL && (n * 4 >= MXP_SIMD_NT_THRESHOLD || a->stream) && (uintptr_t)d % 2 == 0) {
        const size_t align = 4 * VL;
        i = (align - (uintptr_t)d % align) % align / 2; /* < 2*VL <= n */
        scalar_tail(MXP_BFLOAT16, MXP_FLOAT16, MXP__RNE, d, s, i, a, a->index0);
        nt = 1;
    }
#endif
#ifdef MXP_SIMD_NO_SPECIALISE
    i = to16_run(d, s, i, n, sat, nt);
#else
    if (sat) i = nt ? to16_run(d, s, i, n, 1, 1) : to16_run(d, s, i, n, 1, 0);
    else i = nt ? to16_run(d, s, i, n, 0, 1) : to16_run(d, s, i, n, 0, 0);
#endif
#ifdef MXP_SIMD_NT_STORE32
    if (nt && !a->stream) MXP_SIMD_NT_FENCE(); /* a->stream: the caller fences */
#endif
    scalar_tail(MXP_BFLOAT16, MXP_FLOAT16, MXP__RNE, d + 2 * i, s + 2 * i, n - i, a, a->index0 + i);
}

#if defined(MXP_SIMD_SR8_W16) && defined(MXP_SIMD_SR8_ZC)
/* srn_run's step after its word step failed (a lane outside the normal range, not +-0 only nor
 * one lane): the 2*VL 16-bit elements at q (format f) widened to float32 in registers (exact) and
 * sr_run's tiny-aware step sr8_fast2zc on them with the same words: 1 when it stored them, 0 when
 * a lane overflows or is NaN (nothing stored: the general step). Out of line, one copy per pair,
 * as sr8_zrun (the tiny lanes' constants). Until session 42 such a step took the general step
 * (narrow1 on every lane). AMD Zen 4, avx512, three alternating runs, medians, ns/element, in
 * cache / at 2^26: N(0, 10^-4) data (every lane below the normal range of either format)
 * bf16 -> e4m3fn 0.660 -> 0.385 / 0.669 -> 0.407, bf16 -> e5m2 0.651 -> 0.384 / 0.685 -> 0.403,
 * f16 -> e4m3fn 0.635 -> 0.384 / 0.683 -> 0.425; N(0, 1) to e4m3fn 0.192 -> 0.172 / 0.35 either
 * way; uniform data unchanged. AVX2 (sr8_fast2z, whose small lanes take a branch and variable
 * shifts) gained nothing on N(0, 10^-4) data and lost at 2^26 on N(0, 1) (bf16 -> e4m3fn 0.434 ->
 * 0.483), so it keeps the general step (bench/RESULTS.md, session 42). */
static SIMD_INLINE int srn_tiny8_t(unsigned char *d, const unsigned char *q, V w0, V w1, const sfmt f, const sfmt t,
                                   int nt)
{
    const int bf = f.dt == MXP_BFLOAT16;
    const V u0 = bf ? v_slli(ld16(q), 16) : widen_one(q, f, 0, 0);
    const V u1 = bf ? v_slli(ld16(q + 2 * VL), 16) : widen_one(q + 2 * VL, f, 0, 0);
    const sr8zc zc = sr8z_consts(23 - t.m);
    return sr8_fast2zc(d, u0, u1, w0, w1, &zc, nt, 0) != 0;
}
MXP_SIMD_NOINLINE
static int srn_tiny8(unsigned char *d, const unsigned char *q, V w0, V w1, const sfmt f, const sfmt t, int nt)
{
    const int bf = f.dt == MXP_BFLOAT16, e4 = t.dt == MXP_FLOAT8_E4M3FN;
    if (bf) return e4 ? srn_tiny8_t(d, q, w0, w1, SF_BF16, SF_E4M3, nt) : srn_tiny8_t(d, q, w0, w1, SF_BF16, SF_E5M2, nt);
    return e4 ? srn_tiny8_t(d, q, w0, w1, SF_F16, SF_E4M3, nt) : srn_tiny8_t(d, q, w0, w1, SF_F16, SF_E5M2, nt);
}
#endif

/*
 * Stochastic rounding from a narrow format f (float16 or bfloat16; the loop takes any width) to
 * another one (t) without the composed path's float32 block: each step widens 2*VL
 * elements in registers (exact; a bfloat16 just moves up, its NaN quieted by narrow1 later) and
 * takes sr_run's fast step for t (bfloat16's high words, float8's 16-bit-lane codes where the
 * ISA has them, the truncating float16 conversion, or sr_fast), else the zero-aware sr_fast,
 * else narrow1 with the complete words. The result is the reference's: the decision depends
 * only on the exact value and on the element's word (kernels.h). sr_run's runs for small values
 * (sr8_zrun, the lone-lane patch) read float32 from memory and are not used here. AMD Zen 4,
 * --isa avx512, bfloat16 -> e4m3fn: 0.226 -> 0.205 ns/element in cache, 0.289 -> 0.239 at 2^26
 * (bench/RESULTS.md, session 27; with only the sr_fast / narrow1 steps it was slower than the
 * composed path in cache). Between the two float8 formats it lost to the composed path, whose
 * widening is the tuned float8 -> float32 kernel (e4m3fn -> e5m2 1.16x slower in cache on
 * avx512, 1.47x on avx2), so those stayed composed until byte kernels took them (AVX512_VBMI
 * tables, session 29; AVX2, session 44). Since session 40 (AVX-512, bfloat16) and 41
 * (AVX2, and float16 sources), a 16-bit source -> float8 takes its fast step on the loaded words
 * (MXP_SIMD_SR8_W16; the ISA files have the arithmetic and the numbers) and widens only for a
 * step that step cannot take (on AVX-512 first for srn_tiny8's tiny-aware float32 step, above,
 * then for the general one). Its constants in the source's words, for a source of m_s mantissa
 * bits and bias B_s (bfloat16: 7, 127; float16: 10, 15): Dw = m_s - m dropped bits, rebias
 * rebw = (B_s - B) << m_s, range [lw, hw) with lw = rebw + 2^m_s (the smallest normal; 0 when the
 * two biases agree, float16 -> e5m2, whose subnormals are the float16 ones with the low 8 bits
 * dropped) and hw = (max finite << Dw) + rebw.
 * Since session 46 two neighbours share their random words (kernels.h's mxp__sr_bits_src), so a
 * step hashes one vector of words, not two, and the words of the low halves only in the steps
 * that can need them (srn_full). Intel Xeon (CPU 4), medians of three alternating runs of the
 * whole table, ns/element in cache / at 2^26, avx512: bf16 -> e4m3fn 0.175 / 0.296 -> 0.127 /
 * 0.262, f16 -> e4m3fn 0.177 / 0.297 -> 0.127 / 0.263 (1.26-1.28x nearest-even at 2^26, 1.42x
 * before); --isa avx2: 0.272 / 0.419 -> 0.200 / 0.349 and 0.280 / 0.421 -> 0.200 / 0.336
 * (1.33-1.40x, 1.64-1.68x before). On data whose every lane is below e4m3fn's normal range
 * (N(0, 10^-4)), whose steps hash both sets, bfloat16 -> e4m3fn costs 10-20% more on avx512
 * (0.457 / 0.59 -> 0.556 / 0.67), 3-4% on AVX2; on N(0, 1) data it gained (0.215 / 0.370 ->
 * 0.192 / 0.346).
 * Between the two 16-bit formats (session 54) the ISA's 16-bit-lane steps come first, and the
 * loop's own step only for what they cannot take (infinity, NaN, overflow, the tiniest values):
 * bfloat16 -> float16 skips the hash where every lane is exact in float16 (bfh_exact), and rounds
 * the lanes below its normal range in runs (w16_run with bfh_tiny); float16 -> bfloat16 rounds
 * normal lanes on 16-bit lanes (hbf_words) and widens the steps with subnormal ones (w16_run
 * with hbf_wide). AMD Zen 4, avx512, in cache / at 2^26: bfloat16 -> float16 0.187 / 0.206 ->
 * 0.054 / 0.113 ns/element, float16 -> bfloat16 0.142 / 0.157 -> 0.100 / 0.119.
 */
/* A bfloat16 source's words completed with their low halves (kernels.h's MXP__SR_LO16 words,
 * from the step's Weyl states ils), once per step (*full): the steps that round lanes below the
 * target's normal range call it, where more than 16 bits can be dropped (bfloat16 -> e4m3fn below
 * 2^-18, e5m2 below 2^-25, float16 below 2^-33); every other step, a float16 source's included
 * (at most 15 dropped), uses the top halves alone, the low halves being unable to carry into
 * them (F + r >= 2^32 with F's low 16 bits 0). */
static SIMD_INLINE V srn_lo_halves(V ils, V khi, V m1, V m2)
{
    return sr_finish(sr_words_hi(v_xor(ils, v_set1(MXP__SR_LO16)), khi, m1, m2));
}
static SIMD_INLINE void srn_full(V ils, V khi, V m1, V m2, V *w0, V *w1, int *full)
{
    if (*full) return;
    *full = 1;
    const V hl = srn_lo_halves(ils, khi, m1, m2);
    *w0 = v_or(*w0, sr_h16_ext(hl, 0));
    *w1 = v_or(*w1, sr_h16_ext(hl, 1));
}
#ifdef MXP_SIMD_SR8_W16
#define MXP_SIMD_SR8_W16_ON 1
#else
#define MXP_SIMD_SR8_W16_ON 0
#endif
#if defined(MXP_SIMD_BFH_TINY) != defined(MXP_SIMD_HBF)
#error "an ISA with srn_run's 16-bit steps has both bfh_tiny and hbf_wide"
#endif
#ifdef MXP_SIMD_HBF
/* srn_run's steps between the 16-bit formats from element i (il: the Weyl states of its words)
 * after one its fast loop could not take: up to W16_RUN of them by the ISA's bfh_tiny (bf = 1,
 * bfloat16 -> float16: lanes down to 2^-31; finished words) or hbf_wide (float16 -> bfloat16:
 * widened; only the halves' top 3 bits count, so unfinished), until one has a lane the step
 * cannot take; returns where it stopped. Out of line, as srh_zrun. */
#define W16_RUN 32
MXP_SIMD_NOINLINE
static size_t w16_run(unsigned char *d, const unsigned char *s, size_t i, size_t end, V il, V khi, int bf, int nt)
{
    const V m1 = v_set1(MXP__SR_M1), m2 = v_set1(MXP__SR_M2), step = v_set1((uint32_t)VL * MXP__SR_W);
    for (int k = 0; k < W16_RUN && i < end; k++, i += 2 * VL, il = v_add(il, step)) {
        const V w = sr_words_hi(il, khi, m1, m2);
        if (!(bf ? bfh_tiny(d + 2 * i, s + 2 * i, sr_finish(w), nt) : hbf_wide(d + 2 * i, s + 2 * i, w, nt))) break;
    }
    return i;
}
#endif
static SIMD_INLINE size_t srn_run(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t lo,
                                  uint64_t key, const sfmt f, const sfmt t, int sat, int nt)
{
    const size_t ob = (size_t)t.bits / 8, ib = (size_t)f.bits / 8;
    const int bf = f.dt == MXP_BFLOAT16;
    const srconst sc = sr_consts(t);
    SR_RUN_CONSTS(key, sc);
    /* the elements' random words (kernels.h's mxp__sr_bits_src): their top halves are the halves
     * of words lo / 2, ... (one vector of VL words per step), their low halves those of words
     * 2^31 + lo / 2, ..., whose Weyl states are the first ones' + 2^31 (MXP__SR_W is odd), hashed
     * only where a bfloat16 source's step may need them (srn_full; see there) */
    V il = v_add(v_set1((lo >> 1) * MXP__SR_W + (uint32_t)key), v_mullo(v_iota(), v_set1(MXP__SR_W)));
    const size_t i_first = i; /* its index is lo */
    (void)i_first;
#ifdef MXP_SIMD_SR8_W16
    /* the word terms of the steps to float8 (the ISA file's sr8w16_codes; w8: such a call) */
    const int w8 = ib == 2 && t.bits == 8;
    const uint32_t rebw = w8 ? (uint32_t)(f.bias - t.bias) << f.m : 0u;
    const uint32_t lw = !w8 || f.bias == t.bias ? 0u : rebw + (1u << f.m);
    const uint32_t hw = w8 ? (t.maxfin << (f.m - t.m)) + rebw : 1u;
    const int Dw = w8 ? f.m - t.m : 8;
#endif
#ifdef MXP_SIMD_SR8_AHEAD
    /* Streaming to float8 on the CPUs set to (kernels.h's mxp__avx512_ahead): each step's class
     * (sr8w16_class: in range, +-0 the only lanes outside, or other) tested MXP__SR_AHEAD steps
     * before its codes and kept in a ring of bytes, so that the branch on it waits for no load (a
     * register would have chained it to the latest test's load). A step of the first two classes
     * takes its codes without a test; the others take the step below, which tests again. Not
     * float16 -> e5m2, whose range starts at 0 (lw = 0): its only lanes outside are overflows and
     * NaNs, and its branch mispredicts no more than that. AMD Zen 4, 2^26 elements, ns/element,
     * bench_convert --ahead off -> on, medians of three alternating runs (two for ReLU and N(0, 1)
     * data): float16 -> e4m3fn over [-8, 8] 0.160 -> 0.135, ReLU 0.173 -> 0.142, N(0, 1) 0.360 ->
     * 0.266; bfloat16 -> e4m3fn 0.167 -> 0.135, 0.174 -> 0.155, 0.360 -> 0.275; bfloat16 -> e5m2
     * 0.129 -> 0.123; in cache (no streaming) unchanged (bench/RESULTS.md, session 51). */
    enum { RING = 64 };
    _Static_assert(MXP__SR_AHEAD < RING, "the ring holds the steps tested ahead and the one converted");
    unsigned char ring[RING];
    size_t ahead_k = 0;
    const int ahead = nt && mxp__avx512_ahead && w8 && f.bias != t.bias;
    sr8a_c ac = sr8a_consts(lw, hw, rebw, Dw);
    for (size_t j = 0; ahead && j < MXP__SR_AHEAD; j++) {
        const size_t ij = i + j * 2 * VL;
        ring[j] = ij + 2 * VL <= end ? sr8w16_class(s + 2 * ij, &ac) : 2;
    }
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(ac.mag);
    MXP_SIMD_PIN(ac.l);
    MXP_SIMD_PIN(ac.span);
    MXP_SIMD_PIN(ac.rebw);
    MXP_SIMD_PIN(ac.mad);
#endif
#endif
#ifdef MXP_SIMD_BFH
    const int bfh = bf && t.dt == MXP_FLOAT16;
#endif
#ifdef MXP_SIMD_HBF
    const int hbf = f.dt == MXP_FLOAT16 && t.dt == MXP_BFLOAT16;
#endif
    for (; i < end; i += 2 * VL) {
#ifdef MXP_SIMD_BFH
        if (bfh) {
            /* bfloat16 -> float16: a step whose every lane is exact in float16 (its normal range,
             * where 7 mantissa bits fit in 10, or +-0) needs no random bits (bfh_exact, the
             * ISA's); runs of such steps, then the step below for one that is not. AMD Zen 4,
             * avx512, ns/element in cache / at 2^26, uniform data: 0.187 / 0.206 -> 0.054 / 0.113
             * (nearest-even 0.035 / 0.11); ReLU 0.328 / 0.350 -> 0.043 / 0.110 (session 54) */
            const size_t i0 = i;
            for (; i < end; i += 2 * VL) {
#ifdef MXP_SIMD_PF_FAR
                if (nt) MXP_SIMD_PF_FAR(s + 2 * i);
#endif
                if (!bfh_exact(d + 2 * i, s + 2 * i, nt)) break;
            }
            il = v_add(il, v_set1((uint32_t)((i - i0) / 2) * MXP__SR_W)); /* VL words per step */
            if (i >= end) break;
#ifdef MXP_SIMD_BFH_TINY
            /* steps with lanes below float16's normal range: a run of them (w16_run), then the
             * loop above again; a step with a lane it cannot take, the step below */
            const size_t i1 = i;
            i = w16_run(d, s, i, end, il, khi, 1, nt);
            if (i != i1) {
                il = v_add(il, v_set1((uint32_t)((i - i1) / 2) * MXP__SR_W));
                i -= 2 * VL; /* the loop's increment follows */
                continue;
            }
#endif
        }
#endif
#ifdef MXP_SIMD_HBF
        if (hbf) {
            /* float16 -> bfloat16: steps whose every lane is normal or +-0 (hbf_words, the ISA's,
             * on 16-bit lanes); a float16 drops at most 3 bits, so an element uses only its
             * half's top 3 bits, which sr_finish leaves as they are: the words unfinished. AMD
             * Zen 4, avx512, in cache / at 2^26: 0.142 / 0.157 -> 0.100 / 0.119 ns/element, the
             * widened steps (general loop) before (bench/RESULTS.md, session 54) */
            for (; i < end; i += 2 * VL) {
#ifdef MXP_SIMD_PF_FAR
                if (nt) MXP_SIMD_PF_FAR(s + 2 * i);
#endif
                if (!hbf_words(d + 2 * i, s + 2 * i, sr_words_hi(il, khi, m1, m2), nt)) break;
                il = v_add(il, step);
            }
            if (i >= end) break;
            /* steps with subnormal lanes: a run of them widened (w16_run), then the loop above
             * again; a step with an infinity or NaN takes the step below */
            const size_t i0 = i;
            i = w16_run(d, s, i, end, il, khi, 0, nt);
            if (i != i0) {
                il = v_add(il, v_set1((uint32_t)((i - i0) / 2) * MXP__SR_W)); /* VL words per step */
                i -= 2 * VL; /* the loop's increment follows */
                continue;
            }
        }
#endif
        const V ils = il;
        const V hu = sr_words_hi(il, khi, m1, m2); /* the words before the hash's last step */
        const V h = sr_finish(hu);                 /* the 2*VL top halves, in order */
        il = v_add(il, step);
#ifdef MXP_SIMD_SR8_W16
        if (w8) {
            /* 16-bit source -> float8 on the loaded words (the ISA file's sr8w16_codes). An
             * in-range lane drops Dw bits and adds its half's top Dw bits (sr8w16_rwh); the hash's
             * last step (sr_finish) changes only bits 0 to 10 of a word, so for Dw <= 5 (bfloat16
             * sources) the bits taken (16 - Dw to 15 and 32 - Dw to 31) are the same unfinished,
             * and the step skips it; float16's Dw = 7 or 8 take bits it changes. AMD Zen 4, in
             * cache, medians of 7 / 5 alternating runs, ns/element: bf16 -> e5m2 avx512 0.1045 ->
             * 0.0958, --isa avx2 0.1177 -> 0.1039; bf16 -> e4m3fn 0.1080 -> 0.0989 and 0.1329 ->
             * 0.1210 (session 56) */
            const V rwh = sr8w16_rwh(Dw <= 5 ? hu : h, Dw);
#ifdef MXP_SIMD_SR8_AHEAD
            if (ahead) {
                const size_t ia = i + MXP__SR_AHEAD * 2 * VL; /* the step tested now */
                ring[(ahead_k + MXP__SR_AHEAD) % RING] = ia + 2 * VL <= end ? sr8w16_class(s + 2 * ia, &ac) : 2;
                const unsigned char c = ring[ahead_k++ % RING];
                if (c < 2) {
                    sr8w_store(d + i, sr8w16_codes_in(s + 2 * i, rwh, Dw, &ac, c), nt);
                    continue;
                }
            }
#endif
            uint32_t out;
            V b = sr8w16_codes(s + 2 * i, rwh, Dw, lw, hw, rebw, &out);
#ifdef MXP_SIMD_PREFETCH
            if (nt && MXP_SIMD_PREFETCH_SRN) PF_LINES(s + ib * i, 0, 2 * VL * ib);
#endif
            if (out == 0 || sr8w16_zeros(s + 2 * i, &b, out, lw, hw)) {
                sr8w_store(d + i, b, nt);
                continue;
            }
#ifdef MXP_SIMD_SR8W16_PATCH
            if (lw != 0) {
                /* one lane below the range (N(0, 1) data: about a quarter of the steps to e4m3fn),
                 * its code in scalar code, as sr_run's lone lane. AMD Zen 4, avx512-own, three
                 * alternating runs, bf16 -> e4m3fn in cache: N(0, 1) 0.306 -> 0.191 ns/element,
                 * over [-8, 8] (6% of steps) 0.172 -> 0.149; at 2^26 0.435 -> 0.349 and 0.200 ->
                 * 0.179 (session 41). AVX2 since session 52 (until then such a step widened):
                 * same CPU, --isa avx2, over [-8, 8], in cache 0.144 -> 0.131, at 2^26 0.204 ->
                 * 0.171; N(0, 1) 0.270 -> 0.213 and 0.433 -> 0.372 */
                uint32_t code;
                const uint32_t lanes = sr8w16_lanes(out);
                if (sr8w16_lone_code(lanes, s + 2 * i, f, t, lw, key, lo + (uint32_t)(i - i_first), &code) >= 0) {
                    sr8w_store(d + i, sr8_patch(b, lanes, code), nt);
                    continue;
                }
            }
#endif
#ifdef MXP_SIMD_SR8_ZC
            {
                /* the complete words (a float16 source's low halves cannot count: 0); and since
                 * sr8_fast2zc finishes the words it gets (sr_words_hi's, elsewhere), finished
                 * once more: sr_finish is its own inverse (x ^ x >> 21 twice: x ^ x >> 42 = x) */
                const V hl = bf ? srn_lo_halves(ils, khi, m1, m2) : v_set1(0);
                if (srn_tiny8(d + i, s + 2 * i, sr_finish(sr_h16_pair(hl, h, 0)), sr_finish(sr_h16_pair(hl, h, 1)),
                              f, t, nt))
                    continue;
            }
#endif
        }
#endif
        V w0 = v_slli(sr_h16_ext(h, 0), 16), w1 = v_slli(sr_h16_ext(h, 1), 16); /* the top halves */
        int full = !bf; /* a float16 source's low halves never count */
        /* bfloat16: the bits moved up, a NaN left as it is (narrow1 quiets it) */
        const V u0 = bf ? v_slli(ld16(s + 2 * i), 16) : widen_one(s + ib * i, f, 0, 0);
        const V u1 = bf ? v_slli(ld16(s + 2 * i + 2 * VL), 16) : widen_one(s + ib * (i + VL), f, 0, 0);
#ifdef MXP_SIMD_PREFETCH
        if (nt && MXP_SIMD_PREFETCH_SRN && !(ib == 2 && t.bits == 8 && MXP_SIMD_SR8_W16_ON)) /* else done above */
            PF_LINES(s + ib * i, 0, 2 * VL * ib);
#endif
        const V a0 = v_and(u0, v_set1(0x7FFFFFFFu)), a1 = v_and(u1, v_set1(0x7FFFFFFFu));
        /* the fast steps of sr_run */
        if (t.bias == 127) {
#ifdef MXP_SIMD_ANY_NAN4
            if (!any_nan4(u0, u1, u0, u1)) {
#else
            if (!m_any(m_or(bf16_bad(u0), bf16_bad(u1)))) {
#endif
#ifdef MXP_SIMD_ST16_HI2
                st16_hi2(d + 2 * i, bf16_fast_t(u0, w0, 1, sat), bf16_fast_t(u1, w1, 1, sat), nt);
#else
                st_narrow2(d + 2 * i, bf16_fast(u0, w0, 1, sat), bf16_fast(u1, w1, 1, sat), 16, nt);
#endif
                continue;
            }
        }
#ifdef MXP_SIMD_SR8_PATCH
        else if (t.bits == 8 && !(ib == 2 && MXP_SIMD_SR8_W16_ON)) { /* else its step above failed */
            uint32_t out;
            const V b = sr8_codes2(u0, u1, w0, w1, 23 - t.m, sc.lo, sc.hi, sc.rebias, &out);
            if (out == 0) {
                sr8w_store(d + i, b, nt);
                continue;
            }
        }
#endif
        else if (!m_any(m_or(m_gt(olim, v_add(a0, oadd)), m_gt(olim, v_add(a1, oadd))))) {
#ifdef MXP_SIMD_HW_F16
            if (t.dt == MXP_FLOAT16) /* as in srh_run */
                hw_f16_st2_rz(d + 2 * i, v_add(u0, v_srli(w0, 19)), v_add(u1, v_srli(w1, 19)), nt);
            else
#endif
                st_narrow2(d + ob * i, sr_fast(u0, w0, t, sc, 0), sr_fast(u1, w1, t, sc, 0), t.bits, nt);
            continue;
        }
        srn_full(ils, khi, m1, m2, &w0, &w1, &full); /* lanes below the normal range, or NaN */
        if (t.bias != 127 && !m_any(m_or(sr_bad_z(u0, sc), sr_bad_z(u1, sc)))) {
            st_narrow2(d + ob * i, sr_fast(u0, w0, t, sc, 1), sr_fast(u1, w1, t, sc, 1), t.bits, nt);
        } else {
            const V over = v_set1(sat ? t.maxfin : t.fn ? 0x7Fu : t.inf);
            st_narrow2(d + ob * i, narrow1(u0, w0, t, 1, over), narrow1(u1, w1, t, 1, over), t.bits, nt);
        }
    }
    return i;
}
#endif

/* One run of srw_loop: srb_run for a float32 source into bfloat16, srh_run into float16, srn_run
 * for a 16-bit source. */
static SIMD_INLINE size_t srw_run(unsigned char *d, const unsigned char *s, size_t i, size_t end, uint32_t lo,
                                  uint64_t key, const sfmt f, const sfmt t, int sat, int nt)
{
#ifdef MXP_SIMD_HW_F16
    if (f.bits == 16) return srn_run(d, s, i, end, lo, key, f, t, sat, nt);
#endif
    if (t.dt == MXP_FLOAT16) return srh_run(d, s, i, end, lo, key, sat, nt);
    (void)f;
    return srb_run(d, s, i, end, lo, key, sat, nt);
}
/* The frame of the stochastic kernels whose neighbouring elements share random words in pairs
 * (kernels.h's mxp__sr_bits_src: 16-bit sources, float32 -> bfloat16 / float16): srw_run's steps
 * from even indices, between multiples of 2^32 indices, as narrow_loop's stochastic part; the
 * reference for the head, the tail and a step that straddles 2^32. */
static SIMD_INLINE void srw_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, const sfmt f,
                                 const sfmt t)
{
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *d = (unsigned char *)dst;
    const size_t ob = (size_t)t.bits / 8, ib = (size_t)f.bits / 8;
    int nt = 0;
#ifdef MXP_SIMD_NT_STORE32
    const int stream = n >= 2 * VL && (n * (ib + ob) >= MXP_SIMD_NT_THRESHOLD || a->stream);
#else
    const int stream = 0;
#endif
    /* steps start at even indices (a word's first half) */
    size_t i = sr_start(a->index0, d, n, ob, 2 * VL * ob, 2, stream, &nt);
    scalar_tail(t.dt, f.dt, MXP__SR, d, s, i, a, a->index0);
    while (i + 2 * VL <= n) {
        const uint64_t idx = a->index0 + i;
        const uint32_t lo = (uint32_t)idx;
        const uint64_t room = 0x100000000ull - lo; /* indices before the low half wraps */
        if (room < 2 * VL) { /* the reference takes the straddling elements, as in narrow_loop */
            size_t cnt = (size_t)room;
            while (nt && ((uintptr_t)(d + ob * (i + cnt)) % (2 * VL * ob)) != 0) cnt++;
            if (cnt > n - i) cnt = n - i;
            scalar_tail(t.dt, f.dt, MXP__SR, d + ob * i, s + ib * i, cnt, a, idx);
            i += cnt;
            continue;
        }
        size_t cnt = n - i;
        if ((uint64_t)cnt > room) cnt = (size_t)room;
        const size_t end = i + cnt / (2 * VL) * (2 * VL);
        const uint64_t key = mxp__sr_key(a->seed, (uint32_t)(idx >> 32));
#ifdef MXP_SIMD_NO_SPECIALISE
        i = srw_run(d, s, i, end, lo, key, f, t, a->saturate, nt);
#else
        if (a->saturate)
            i = nt ? srw_run(d, s, i, end, lo, key, f, t, 1, 1) : srw_run(d, s, i, end, lo, key, f, t, 1, 0);
        else
            i = nt ? srw_run(d, s, i, end, lo, key, f, t, 0, 1) : srw_run(d, s, i, end, lo, key, f, t, 0, 0);
#endif
    }
#ifdef MXP_SIMD_NT_STORE32
    if (nt && !a->stream) MXP_SIMD_NT_FENCE(); /* a->stream: the caller fences */
#endif
    scalar_tail(t.dt, f.dt, MXP__SR, d + ob * i, s + ib * i, n - i, a, a->index0 + i);
}

#ifdef MXP_SIMD_F16_F8
/*
 * The frame of the narrow -> narrow nearest-even kernels with steps of their own (here and in the
 * x86 ISA files), around their run(d, s, i, n, ..., nt) loops: pair_head decides whether the call
 * streams (large, or args.stream, with an element-aligned destination), converts the elements
 * before the first `align`-byte boundary of the destination by the reference when it does, and
 * returns where the run starts; pair_done fences (unless the caller does, args.stream) and
 * converts the tail by the reference.
 */
static SIMD_INLINE size_t pair_head(unsigned char *d, const unsigned char *s, size_t n, const mxp__cvt_args *a,
                                    mxp_dtype to, mxp_dtype from, size_t ib, size_t ob, size_t align, int *nt)
{
    *nt = n >= 64 && (n * (ib + ob) >= MXP_SIMD_NT_THRESHOLD || a->stream) && (uintptr_t)d % ob == 0;
    if (!*nt) return 0;
    const size_t i = (align - (uintptr_t)d % align) % align / ob; /* < 64 <= n */
    scalar_tail(to, from, MXP__RNE, d, s, i, a, a->index0);
    return i;
}
static SIMD_INLINE void pair_done(unsigned char *d, const unsigned char *s, size_t i, size_t n,
                                  const mxp__cvt_args *a, mxp_dtype to, mxp_dtype from, size_t ib, size_t ob, int nt)
{
    if (nt && !a->stream) MXP_SIMD_NT_FENCE(); /* a->stream: the caller fences */
    scalar_tail(to, from, MXP__RNE, d + ob * i, s + ib * i, n - i, a, a->index0 + i);
}
/* The streaming loops of the 16-bit -> float8 nearest-even steps that take lanes below the
 * target's normal range in two forms (the ISA files' f16_f8_run and bf16_f8_run): STEP(bl) is one
 * step of W elements at i, returning 1 when it had such a lane; bl = 0 takes them in a branch,
 * only in a step that has one, bl = 1 in every step without a branch. Runs of at most RUN steps
 * from i while W elements remain before n, each with bl = 1 when at least BL steps of the run
 * before had such a lane. On data where they come in a random part of the steps the
 * branch mispredicts, and out of cache each mispredict waits for the load that decides it; in
 * cache the branch costs less (the ISA files have the numbers). */
#define TINY_RUNS(i, n, W, RUN, BL, STEP)                                                          \
    do {                                                                                           \
        int bl_ = 0;                                                                               \
        while ((i) + (W) <= (n)) {                                                                 \
            const size_t steps_ = ((n) - (i)) / (W) < (RUN) ? ((n) - (i)) / (W) : (RUN);           \
            int tiny_ = 0;                                                                         \
            if (bl_)                                                                               \
                for (size_t j_ = 0; j_ < steps_; j_++, (i) += (W)) tiny_ += STEP(1);               \
            else                                                                                   \
                for (size_t j_ = 0; j_ < steps_; j_++, (i) += (W)) tiny_ += STEP(0);               \
            bl_ = tiny_ >= (BL);                                                                   \
        }                                                                                          \
    } while (0)

/*
 * float16 (or, where the ISA file's step takes it, bfloat16: bf = 1) -> float8 nearest-even
 * around the ISA file's f16_f8_run (defined after this header: steps on 16-bit lanes, the rules
 * in cvt_avx512.c and cvt_avx2.c), which returns the first element it left: streaming from the
 * first 4 * VL-byte boundary of the destination (the reference before it) when the call is large or
 * args.stream says so, the reference for the tail.
 */
static SIMD_INLINE size_t f16_f8_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, int e4, int bf,
                                     int sat, int nt);
static SIMD_INLINE void f16_f8_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, mxp_dtype to,
                                    mxp_dtype from, int sat)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    const int e4 = to == MXP_FLOAT8_E4M3FN, bf = from == MXP_BFLOAT16;
    int nt;
    /* the streaming stores: 4 * VL bytes, as aligned (32 on AVX2, 64 on AVX-512) */
    size_t i = pair_head(d, s, n, a, to, from, 2, 1, 4 * VL, &nt);
    i = nt ? f16_f8_run(d, s, i, n, e4, bf, sat, 1) : f16_f8_run(d, s, i, n, e4, bf, sat, 0);
    pair_done(d, s, i, n, a, to, from, 2, 1, nt);
}
#define SIMD_F16_F8(name, to, from)                                                            \
    static void name(void *dst, const void *src, size_t n, const mxp__cvt_args *a)             \
    {                                                                                          \
        if (a->saturate) f16_f8_loop(dst, src, n, a, to, from, 1);                             \
        else f16_f8_loop(dst, src, n, a, to, from, 0);                                         \
    }
#endif

/* ---- the kernels and their registration ------------------------------------------------- */

/* Kernel names: operation + ISA, e.g. cvt_bf16_f32_sr__avx512 (MXP_SIMD_ISA from the ISA file). */
#define SIMD_CAT2(a, b) a##__##b
#define SIMD_CAT(a, b) SIMD_CAT2(a, b)
#define SIMD_FN(base) SIMD_CAT(base, MXP_SIMD_ISA)

#define SIMD_NARROW(base, F)                                                                   \
    static void SIMD_FN(base)(void *dst, const void *src, size_t n, const mxp__cvt_args *a)    \
    {                                                                                          \
        narrow_loop(dst, src, n, a, F, 0);                               \
    }                                                                                          \
    static void SIMD_FN(base##_sr)(void *dst, const void *src, size_t n, const mxp__cvt_args *a) \
    {                                                                                          \
        if (F.dt == MXP_BFLOAT16 || F.dt == MXP_FLOAT16) srw_loop(dst, src, n, a, SF_F32, F);  \
        else narrow_loop(dst, src, n, a, F, 1);                                                \
    }
#define SIMD_WIDEN(base, F, bf)                                                                \
    static void SIMD_FN(base)(void *dst, const void *src, size_t n, const mxp__cvt_args *a)    \
    {                                                                                          \
        widen_loop(dst, src, n, a, F, bf);                                                     \
    }

SIMD_NARROW(cvt_f16_f32, SF_F16)
SIMD_NARROW(cvt_bf16_f32, SF_BF16)
SIMD_NARROW(cvt_e4m3_f32, SF_E4M3)
SIMD_NARROW(cvt_e5m2_f32, SF_E5M2)
SIMD_WIDEN(cvt_f32_f16, SF_F16, 0)
SIMD_WIDEN(cvt_f32_bf16, SF_BF16, 1)
SIMD_WIDEN(cvt_f32_e4m3, SF_E4M3, 0)
SIMD_WIDEN(cvt_f32_e5m2, SF_E5M2, 0)
#ifdef MXP_SIMD_HW_F16
static void SIMD_FN(cvt_bf16_f16)(void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    to16_loop(dst, src, n, a);
}
#define SIMD_SRN(base, F, T)                                                                  \
    static void SIMD_FN(base)(void *dst, const void *src, size_t n, const mxp__cvt_args *a)    \
    {                                                                                          \
        srw_loop(dst, src, n, a, F, T);                                                       \
    }
SIMD_SRN(cvt_f16_bf16_sr, SF_BF16, SF_F16)
SIMD_SRN(cvt_e4m3_bf16_sr, SF_BF16, SF_E4M3)
SIMD_SRN(cvt_e5m2_bf16_sr, SF_BF16, SF_E5M2)
SIMD_SRN(cvt_bf16_f16_sr, SF_F16, SF_BF16)
SIMD_SRN(cvt_e4m3_f16_sr, SF_F16, SF_E4M3)
SIMD_SRN(cvt_e5m2_f16_sr, SF_F16, SF_E5M2)
#endif

/* Fill the 16 float32 <-> narrow entries (widening: the same exact kernel for both modes). */
static void simd_register(mxp__kernels *k)
{
#define SIMD_SET(D, S, rne, sr)                                                                \
    do {                                                                                       \
        k->cvt[D][S][MXP__RNE] = rne;                                                          \
        k->cvt[D][S][MXP__SR] = sr;                                                            \
    } while (0)
    SIMD_SET(MXP_FLOAT16, MXP_FLOAT32, SIMD_FN(cvt_f16_f32), SIMD_FN(cvt_f16_f32_sr));
    SIMD_SET(MXP_BFLOAT16, MXP_FLOAT32, SIMD_FN(cvt_bf16_f32), SIMD_FN(cvt_bf16_f32_sr));
    SIMD_SET(MXP_FLOAT8_E4M3FN, MXP_FLOAT32, SIMD_FN(cvt_e4m3_f32), SIMD_FN(cvt_e4m3_f32_sr));
    SIMD_SET(MXP_FLOAT8_E5M2, MXP_FLOAT32, SIMD_FN(cvt_e5m2_f32), SIMD_FN(cvt_e5m2_f32_sr));
    SIMD_SET(MXP_FLOAT32, MXP_FLOAT16, SIMD_FN(cvt_f32_f16), SIMD_FN(cvt_f32_f16));
    SIMD_SET(MXP_FLOAT32, MXP_BFLOAT16, SIMD_FN(cvt_f32_bf16), SIMD_FN(cvt_f32_bf16));
    SIMD_SET(MXP_FLOAT32, MXP_FLOAT8_E4M3FN, SIMD_FN(cvt_f32_e4m3), SIMD_FN(cvt_f32_e4m3));
    SIMD_SET(MXP_FLOAT32, MXP_FLOAT8_E5M2, SIMD_FN(cvt_f32_e5m2), SIMD_FN(cvt_f32_e5m2));
#undef SIMD_SET
}

#ifdef MXP_SIMD_HW_F16
/* float16 -> bfloat16 nearest-even (float8 -> float16 / bfloat16 and bfloat16 -> float16 have
 * their own kernels in each ISA file) and stochastic rounding from float16 / bfloat16 (srw_loop;
 * from float8 into float16 / bfloat16 every value is exact: the ISA files' kernels). Registered after cvt_compose.c's, which they replace (dispatch.c). */
static void simd_register_to16(mxp__kernels *k)
{
    k->cvt[MXP_BFLOAT16][MXP_FLOAT16][MXP__RNE] = SIMD_FN(cvt_bf16_f16); /* AVX512_BF16: replaced */
    /* and stochastic rounding from float16 / bfloat16 to every other narrow format */
    k->cvt[MXP_FLOAT16][MXP_BFLOAT16][MXP__SR] = SIMD_FN(cvt_f16_bf16_sr);
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_BFLOAT16][MXP__SR] = SIMD_FN(cvt_e4m3_bf16_sr);
    k->cvt[MXP_FLOAT8_E5M2][MXP_BFLOAT16][MXP__SR] = SIMD_FN(cvt_e5m2_bf16_sr);
    k->cvt[MXP_BFLOAT16][MXP_FLOAT16][MXP__SR] = SIMD_FN(cvt_bf16_f16_sr);
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT16][MXP__SR] = SIMD_FN(cvt_e4m3_f16_sr);
    k->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT16][MXP__SR] = SIMD_FN(cvt_e5m2_f16_sr);
}
#endif

#if defined(MXP_SIMD_F64) && defined(MXP_SIMD_F16_F8)
/*
 * float64 <-> float16 / bfloat16 / float8 without cvt_compose.c's float32 block, on x86. The ISA
 * file gives f64_odd_ld(p, full) (VL float64 -> VL float32 bits rounded to odd; full = 0: the odd
 * bit from the 29 dropped mantissa bits, exact wherever the float32 is normal; full = 1: from
 * reading the float32 back, exact everywhere), f64_st (VL float32 bits -> VL float64 at p, exact;
 * sat: +-inf -> +-DBL_MAX), and MXP_SIMD_F64_CSR, the MXCSR value they need (every exception
 * masked, FTZ and DAZ off; AVX2's odd step also toward zero), set for the call and given back
 * whole (flags included) at its end.
 *  - narrow -> float64 (w64_loop): widen_one, then f64_st: the composed path's two exact steps in
 *    registers.
 *  - float64 -> narrow nearest-even (n64_loop): round to odd, then the float32 step in registers
 *    (cvt_compose.c and cvt_f64_avx2.c say why one rounding to odd and then one to nearest-even
 *    give the reference's single rounding): float16 by the hardware step, bfloat16 by the
 *    integer step (bf16_rne2) unless a NaN is among the 4*VL lanes, float8 by narrow8_codes4 with
 *    a lone lane below the normal range patched as narrow8_fast4p does. A step it cannot take
 *    (NaN, overflow, two small float8 lanes, ...) leaves for the composed path for the next
 *    F64_CH elements: the float32 block, then the float32 kernel the table had at registration
 *    (n64_fb; MXCSR given back to the caller's around it), so that data full of such steps (ReLU
 *    zeros into float8) costs what the composed path costs.
 * Calls large enough to stream (or args.stream) store non-temporally from the first 4*VL-byte
 * boundary of the destination; the composed blocks then pass args.stream on.
 */
enum { F64_CH = 1024 };
static mxp__cvt_fn n64_fb[MXP_FLOAT_DTYPE_COUNT];

/* lanes holding a float32 subnormal (1 <= |x| <= 0x007FFFFF as bits: |x| - 1 below 0x007FFFFF) */
static SIMD_INLINE M f32_sub(V x)
{
    return m_gtu(v_set1(0x007FFFFFu), v_sub(v_and(x, v_set1(0x7FFFFFFFu)), v_set1(1u)));
}

/* 4*VL float32 (rounded to odd from float64) -> t at p, nearest-even; false: nothing stored */
static SIMD_INLINE bool n64_step(unsigned char *p, V x0, V x1, V x2, V x3, const sfmt t, const fastc c, V bk,
                                 int sat, int nt)
{
    if (t.dt == MXP_FLOAT16) {
        hw_f16_st2(p, x0, x1, sat, nt);
        hw_f16_st2(p + 4 * VL, x2, x3, sat, nt);
        return true;
    }
    if (t.bias == 127) {
        /* f64_odd_ld's odd bit is exact from 2^-126 up; below, a result in bfloat16's
         * subnormal range (a float32 subnormal) takes the composed path (+-0 is right) */
        if (m_any(m_or(m_or(f32_sub(x0), f32_sub(x1)), m_or(f32_sub(x2), f32_sub(x3))))) return false;
#ifdef MXP_SIMD_BF16_HW
        if (t.hw) { /* VCVTNEPS2BF16: its NaN rule is the reference's */
            st16_vec(p, CVTNE2BF16(x0, x1), 0x7F80, sat, nt);
            st16_vec(p + 4 * VL, CVTNE2BF16(x2, x3), 0x7F80, sat, nt);
            return true;
        }
#endif
        if (any_nan4(x0, x1, x2, x3)) return false;
        bf16_rne2(p, x0, x1, bk, sat, nt);
        bf16_rne2(p + 4 * VL, x2, x3, bk, sat, nt);
        return true;
    }
    const n8p r = narrow8_codes4(x0, x1, x2, x3, 23 - t.m, c.add, 1u << t.m, t.maxfin);
#ifdef MXP_SIMD_NARROW8_OK
    if (__builtin_expect(narrow8_ok(&r), 1)) {
        narrow8_store(p, &r, nt);
        return true;
    }
    const uint64_t bad = narrow8_bad(&r);
#else
    const uint64_t bad = narrow8_bad(&r);
    if (__builtin_expect(bad == 0, 1)) {
        narrow8_store(p, &r, nt);
        return true;
    }
#endif
    if (bad & (bad - 1u)) return false;
    const unsigned j = (unsigned)__builtin_ctzll(bad);
    uint32_t lane[VL];
    st32(lane, j < VL ? x0 : j < 2 * VL ? x1 : j < 3 * VL ? x2 : x3);
    const uint32_t xb = lane[j % VL];
    if ((xb & 0x7FFFFFFFu) >= c.lo) return false; /* overflow or NaN */
    narrow8_store_lone(p, &r, bad, rne8_tiny_code(xb, t), nt);
    return true;
}

/* elements i .. i + m of a float64 -> t call by the composed path (m a multiple of VL, at most
 * F64_CH), under the caller's MXCSR (old) for the float32 kernel */
MXP_SIMD_NOINLINE static void n64_block(unsigned char *d, const unsigned char *s, size_t i, size_t m,
                                        const sfmt t, const mxp__cvt_args *a, unsigned old, int nt)
{
    uint32_t tmp[F64_CH];
    for (size_t j = 0; j < m; j += VL) st32(tmp + j, f64_odd_ld(s + 8 * (i + j), t.bias == 127));
    mxp__cvt_args b = *a;
    b.index0 = a->index0 + i;
    b.stream = nt;
    _mm_setcsr(old);
    n64_fb[t.dt](d + (size_t)t.bits / 8 * i, tmp, m, &b);
    _mm_setcsr(MXP_SIMD_F64_CSR);
}

static SIMD_INLINE size_t n64_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, const sfmt t,
                                  const mxp__cvt_args *a, unsigned old, int sat, int nt)
{
    const size_t ob = (size_t)t.bits / 8;
    const fastc c = fast_consts(t);
    V bk = v_set1(0x7FFFu);
#ifdef MXP_SIMD_PIN
    MXP_SIMD_PIN(bk);
#endif
    size_t ch = 4 * VL; /* the next composed block's length */
    while (i + 4 * VL <= n) {
        const size_t i0 = i;
        for (; i + 4 * VL <= n; i += 4 * VL) {
            const unsigned char *p = s + 8 * i;
            const V x0 = f64_odd_ld(p, 0), x1 = f64_odd_ld(p + 8 * VL, 0);
            const V x2 = f64_odd_ld(p + 16 * VL, 0), x3 = f64_odd_ld(p + 24 * VL, 0);
#ifdef MXP_SIMD_PREFETCH
            if (nt && MXP_SIMD_PREFETCH_N64) PF_LINES(p, 0, 32 * VL);
#endif
            if (!n64_step(d + ob * i, x0, x1, x2, x3, t, c, bk, sat, nt)) break;
        }
        if (i + 4 * VL > n) break;
        /* one step after fast ones; twice as many after each composed block in a row */
        ch = i != i0 ? 4 * VL : ch < F64_CH ? 2 * ch : F64_CH;
        const size_t m = (n - i) / (4 * VL) * (4 * VL) < ch ? (n - i) / (4 * VL) * (4 * VL) : ch;
        n64_block(d, s, i, m, t, a, old, nt);
        i += m;
    }
    if (n - i >= VL) { /* the last whole vectors */
        const size_t m = (n - i) / VL * VL;
        n64_block(d, s, i, m, t, a, old, nt);
        i += m;
    }
    return i;
}

static SIMD_INLINE void n64_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, const sfmt t)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    const size_t ob = (size_t)t.bits / 8;
    int nt;
    size_t i = pair_head(d, s, n, a, t.dt, MXP_FLOAT64, 8, ob, 4 * VL, &nt);
    const unsigned old = _mm_getcsr();
    _mm_setcsr(MXP_SIMD_F64_CSR);
    if (a->saturate) i = nt ? n64_run(d, s, i, n, t, a, old, 1, 1) : n64_run(d, s, i, n, t, a, old, 1, 0);
    else i = nt ? n64_run(d, s, i, n, t, a, old, 0, 1) : n64_run(d, s, i, n, t, a, old, 0, 0);
    _mm_setcsr(old);
    pair_done(d, s, i, n, a, t.dt, MXP_FLOAT64, 8, ob, nt);
}

static SIMD_INLINE size_t w64_run(unsigned char *d, const unsigned char *s, size_t i, size_t n, const sfmt t,
                                  int bf, int sat, int nt)
{
    const size_t ib = (size_t)t.bits / 8;
    for (; i + 2 * VL <= n; i += 2 * VL) {
#ifdef MXP_SIMD_HW_E4M3
        /* widen_loop's step for 4*VL e4m3fn bytes without a NaN */
        if (t.dt == MXP_FLOAT8_E4M3FN && i + 4 * VL <= n && !hw_e4m3_nan4(s + i)) {
            f64_st(d + 8 * i, hw_e4m3_ld_nonan(s + i), sat, nt);
            f64_st(d + 8 * i + 8 * VL, hw_e4m3_ld_nonan(s + i + VL), sat, nt);
            f64_st(d + 8 * i + 16 * VL, hw_e4m3_ld_nonan(s + i + 2 * VL), sat, nt);
            f64_st(d + 8 * i + 24 * VL, hw_e4m3_ld_nonan(s + i + 3 * VL), sat, nt);
            i += 2 * VL; /* and 2*VL more by the loop */
            continue;
        }
#endif
#ifdef MXP_SIMD_F64_F16
        if (t.dt == MXP_FLOAT16) {
            f64_st_f16(d + 8 * i, s + 2 * i, sat, nt);
            f64_st_f16(d + 8 * i + 8 * VL, s + 2 * i + 2 * VL, sat, nt);
            continue;
        }
#endif
        const V w0 = widen_one(s + ib * i, t, bf, 0), w1 = widen_one(s + ib * (i + VL), t, bf, 0);
        f64_st(d + 8 * i, w0, sat, nt);
        f64_st(d + 8 * i + 8 * VL, w1, sat, nt);
    }
    return i;
}

static SIMD_INLINE void w64_loop(void *dst, const void *src, size_t n, const mxp__cvt_args *a, const sfmt t, int bf)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    const size_t ib = (size_t)t.bits / 8;
    int nt;
    size_t i = pair_head(d, s, n, a, MXP_FLOAT64, t.dt, ib, 8, 4 * VL, &nt);
    const unsigned old = _mm_getcsr();
    _mm_setcsr(MXP_SIMD_F64_CSR);
    if (a->saturate) i = nt ? w64_run(d, s, i, n, t, bf, 1, 1) : w64_run(d, s, i, n, t, bf, 1, 0);
    else i = nt ? w64_run(d, s, i, n, t, bf, 0, 1) : w64_run(d, s, i, n, t, bf, 0, 0);
    _mm_setcsr(old);
    pair_done(d, s, i, n, a, MXP_FLOAT64, t.dt, ib, 8, nt);
}

#define SIMD_F64N(base, F)                                                                     \
    static void SIMD_FN(base)(void *dst, const void *src, size_t n, const mxp__cvt_args *a)    \
    {                                                                                          \
        n64_loop(dst, src, n, a, F);                                                           \
    }
#define SIMD_F64W(base, F, bf)                                                                 \
    static void SIMD_FN(base)(void *dst, const void *src, size_t n, const mxp__cvt_args *a)    \
    {                                                                                          \
        w64_loop(dst, src, n, a, F, bf);                                                       \
    }
SIMD_F64N(cvt_f16_f64, SF_F16)
SIMD_F64N(cvt_bf16_f64, SF_BF16)
SIMD_F64N(cvt_e4m3_f64, SF_E4M3)
SIMD_F64N(cvt_e5m2_f64, SF_E5M2)
SIMD_F64W(cvt_f64_f16, SF_F16, 0)
SIMD_F64W(cvt_f64_bf16, SF_BF16, 1)
SIMD_F64W(cvt_f64_e4m3, SF_E4M3, 0)
SIMD_F64W(cvt_f64_e5m2, SF_E5M2, 0)

/* float64 -> narrow nearest-even and narrow -> float64 (both modes: exact); last, after every
 * float32 -> narrow entry (the composed blocks' kernels, read here) */
static void simd_register_f64(mxp__kernels *k)
{
    static const mxp_dtype nar[4] = {MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    for (int j = 0; j < 4; j++) n64_fb[nar[j]] = k->cvt[nar[j]][MXP_FLOAT32][MXP__RNE];
    k->cvt[MXP_FLOAT16][MXP_FLOAT64][MXP__RNE] = SIMD_FN(cvt_f16_f64);
    k->cvt[MXP_BFLOAT16][MXP_FLOAT64][MXP__RNE] = SIMD_FN(cvt_bf16_f64);
    k->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT64][MXP__RNE] = SIMD_FN(cvt_e4m3_f64);
    k->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT64][MXP__RNE] = SIMD_FN(cvt_e5m2_f64);
    for (int mode = 0; mode < MXP__NMODES; mode++) {
        k->cvt[MXP_FLOAT64][MXP_FLOAT16][mode] = SIMD_FN(cvt_f64_f16);
        k->cvt[MXP_FLOAT64][MXP_BFLOAT16][mode] = SIMD_FN(cvt_f64_bf16);
        k->cvt[MXP_FLOAT64][MXP_FLOAT8_E4M3FN][mode] = SIMD_FN(cvt_f64_e4m3);
        k->cvt[MXP_FLOAT64][MXP_FLOAT8_E5M2][mode] = SIMD_FN(cvt_f64_e5m2);
    }
}
#endif

#endif /* MIXPREC_CVT_SIMD_IMPL_H */
