/*
 * dispatch.c - builds one kernel table per ISA and picks the one to use, once.
 *
 * Detection is at run time, never at compile time: valgrind hides AVX-512 from cpuid, so a
 * memcheck run must take the AVX2 or scalar path. On x86-64 we read cpuid directly and also
 * ask the OS (XGETBV) whether it saves the vector state: a CPU with AVX-512 under an OS or
 * hypervisor that does not enable ZMM state must not run AVX-512 code.
 *   avx2:   AVX2 + FMA + F16C (cpuid 1 / 7.0), OSXSAVE, XCR0 has SSE+AVX state (bits 1, 2)
 *   avx512: avx2 + AVX512 F, BW, VL, DQ (cpuid 7.0 EBX 16, 30, 31, 17), XCR0 also has the
 *           opmask and ZMM states (bits 5, 6, 7)
 * The avx512 table needs nothing beyond F/BW/VL/DQ, so Skylake-X, Zen 4 and Sapphire Rapids all
 * take it; on a CPU that also has AVX512_BF16 (Zen 4, Cooper Lake, Sapphire Rapids) its float32
 * and float16 -> bfloat16 nearest-even entries are VCVTNEPS2BF16 kernels
 * (mxp__cvt_register_avx512_bf16); on one with AVX512_VBMI (Zen 4, Zen 5, Ice Lake and later)
 * e4m3fn -> float32 / float64 / float16 / bfloat16, e5m2 -> float64 / float16 / bfloat16 and
 * e4m3fn <-> e5m2 (both modes) are byte-table kernels (mxp__cvt_register_avx512_vbmi); without
 * it e4m3fn <-> e5m2 stochastic rounding takes the avx2 table's kernels
 * (mxp__cvt_register_avx2_f8s), which session 44 measured 1.5-1.8x faster than the composed
 * path at 2^26 on the Intel Xeon with VBMI's kernels left out (bench/RESULTS.md).
 * The int8 matmul's avx512 kernels use VPDPBUSD where cpuid reports AVX512_VNNI (x86_detect),
 * AVX-512BW VPMADDWD otherwise (qmatmul_avx512.c). On a CPU with AVX512_FP16 (Sapphire Rapids
 * and later Intel Xeons) float64 -> float16 nearest-even is VCVTPD2PH
 * (mxp__cvt_register_avx512_fp16). A BF16, VNNI, VBMI or FP16 kernel is registered only when
 * x86_detect says the CPU has the extension, never required for the path.
 * AArch64: Advanced SIMD is baseline, so neon is always available there.
 *
 * The default is the best available path: avx512, avx2, scalar on x86-64 (the avx512 table
 * keeps some avx2 kernels, per kind of CPU, see "entry by entry" below), neon on AArch64.
 * MIXPREC_ISA=scalar|avx2|avx512|neon forces a path; one this CPU lacks falls back to the best
 * available path below it (enum order); an empty value means "best", and so does an unknown one.
 * The library never prints: mxp_isa_fallback() tells a caller that a request was not followed
 * and why, mxp_isa_requested() what the request was.
 */
#include <fenv.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define MXP_X86_CPUID 1
#endif

#include "kernels.h"
#include "mixprec/convert.h"

static mxp__kernels tables[MXP__ISA_COUNT]; /* as dispatched (the avx512 one mixed, below) */
static mxp__kernels own[MXP__ISA_COUNT];    /* each ISA's own kernels */
static bool available[MXP__ISA_COUNT];
static mxp__isa_id active = MXP__ISA_SCALAR;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const char *const isa_names[MXP__ISA_COUNT] = {"scalar", "avx2", "avx512", "neon"};

const char *mxp__isa_name(mxp__isa_id isa)
{
    return (unsigned)isa < MXP__ISA_COUNT ? isa_names[isa] : "invalid";
}

#ifdef MXP_X86_CPUID
typedef struct x86_features {
    bool avx2, avx512;  /* what the two paths require, OS support included */
    bool bf16, fp16;    /* AVX512_BF16 (bfloat16 kernels) / AVX512_FP16 (float64 -> float16) */
    bool vnni;          /* AVX512_VNNI (int8 matmul kernels) */
    bool vbmi;          /* AVX512_VBMI (float8 byte-table kernels) */
    bool half_width;    /* AMD family 19h (Zen 4): 512-bit operations on 256-bit units */
    bool amd_1a;        /* AMD family 1Ah or later (Zen 5) */
    bool intel;         /* GenuineIntel */
} x86_features;

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static x86_features x86_detect(void)
{
    x86_features f = {false, false, false, false, false, false, false, false, false};
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
    const bool amd = b == 0x68747541u && d == 0x69746E65u && c == 0x444D4163u; /* "AuthenticAMD" */
    f.intel = b == 0x756E6547u && d == 0x49656E69u && c == 0x6C65746Eu; /* "GenuineIntel" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const unsigned family = ((a >> 8) & 0xFu) == 0xFu ? 0xFu + ((a >> 20) & 0xFFu) : (a >> 8) & 0xFu;
    f.half_width = amd && family == 0x19u;
    f.amd_1a = amd && family >= 0x1Au;
    const bool osxsave = (c >> 27) & 1u, avx = (c >> 28) & 1u, fma = (c >> 12) & 1u,
               f16c = (c >> 29) & 1u;
    if (!osxsave || !avx) return f;
    const uint64_t xcr0 = xgetbv0();
    const bool ymm_os = (xcr0 & 0x6u) == 0x6u, zmm_os = (xcr0 & 0xE6u) == 0xE6u;
    if (__get_cpuid_max(0, NULL) < 7) return f;
    __cpuid_count(7, 0, a, b, c, d);
    const bool avx2 = (b >> 5) & 1u, avx512f = (b >> 16) & 1u, avx512dq = (b >> 17) & 1u,
               avx512bw = (b >> 30) & 1u, avx512vl = (b >> 31) & 1u;
    f.fp16 = (d >> 23) & 1u;
    f.vnni = (c >> 11) & 1u;
    f.vbmi = (c >> 1) & 1u;
    const unsigned max_sub = a;
    if (max_sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        f.bf16 = (a >> 5) & 1u;
    }
    f.avx2 = ymm_os && avx2 && fma && f16c;
    f.avx512 = f.avx2 && zmm_os && avx512f && avx512dq && avx512bw && avx512vl;
    f.bf16 = f.bf16 && f.avx512;
    f.fp16 = f.fp16 && f.avx512;
    f.vnni = f.vnni && f.avx512;
    f.vbmi = f.vbmi && f.avx512;
    return f;
}
#endif

static bool cpu_has(mxp__isa_id isa)
{
    switch (isa) {
    case MXP__ISA_SCALAR: return true;
#ifdef MXP_X86_CPUID
    case MXP__ISA_AVX2: return x86_detect().avx2;
#ifdef MXP_AVX512_EMULATED /* test library: the avx512 table runs on emulated intrinsics */
    case MXP__ISA_AVX512: return x86_detect().avx2;
#else
    case MXP__ISA_AVX512: return x86_detect().avx512;
#endif
#endif
#if defined(__aarch64__)
    case MXP__ISA_NEON: return true; /* Advanced SIMD is baseline AArch64 */
#endif
    default: return false;
    }
}

static void build(mxp__isa_id isa)
{
    mxp__kernels *k = &tables[isa];
    k->name = isa_names[isa];
    k->isa = isa;
    mxp__cvt_register_scalar(k);
    mxp__finite_register_scalar(k);
    mxp__qmm_register_scalar(k);
    switch (isa) {
#if defined(__x86_64__)
    case MXP__ISA_AVX2:
        mxp__cvt_register_avx2(k);
        mxp__cvt_register_f64_avx2(k);
        mxp__finite_register_avx2(k);
        mxp__qmm_register_avx2(k);
        mxp__cvt_register_compose(k);
        mxp__cvt_register_avx2_pairs(k);
        mxp__cvt_register_avx2_f64(k); /* last: reads the float32 -> narrow entries */
        break;
    case MXP__ISA_AVX512:
        mxp__cvt_register_avx512(k);
        mxp__cvt_register_f64_avx2(k);
        mxp__cvt_register_f64_avx512(k); /* its stochastic entries replace the avx2 ones */
        mxp__finite_register_avx512(k);
#if defined(MXP_AVX512_EMULATED)
        mxp__qmm_register_avx512(k, true); /* emulated: both variants run (test_qmatmul) */
#elif defined(MXP_X86_CPUID)
        mxp__qmm_register_avx512(k, x86_detect().vnni);
#endif
        mxp__cvt_register_compose(k);
        mxp__cvt_register_avx512_bf16_f8(k);
        mxp__cvt_register_avx512_pairs(k);
        mxp__cvt_register_avx2_f8s(k); /* e4m3fn <-> e5m2 stochastic: VBMI's tables replace them below */
#if defined(MXP_X86_CPUID) && !defined(MXP_AVX512_EMULATED)
        /* after the composed pairs: its float16 -> bfloat16 entry replaces one of them */
        if (x86_detect().bf16) mxp__cvt_register_avx512_bf16(k);
        mxp__cvt_register_avx512_f64(k, x86_detect().bf16); /* last: reads the float32 -> narrow entries */
        if (x86_detect().fp16) mxp__cvt_register_avx512_fp16(k); /* float64 -> float16 */
        if (x86_detect().vbmi) mxp__cvt_register_avx512_vbmi(k); /* float8 sources by byte tables */
#else
        mxp__cvt_register_avx512_f64(k, false);
#endif
        break;
#endif
#if defined(__aarch64__)
    case MXP__ISA_NEON:
        mxp__cvt_register_neon(k);
        mxp__finite_register_neon(k);
        mxp__cvt_register_compose(k);
        break;
#endif
    default: break;
    }
}

/*
 * The avx512 table, entry by entry. The best available path is the default, so on an AVX-512
 * CPU that is the avx512 table; but an AVX-512 kernel is not faster than its AVX2 twin for every
 * entry, so the dispatched avx512 table (tables[], which MIXPREC_ISA=avx512 and the default use)
 * keeps the avx2 kernel where the measurements below say so. own[] keeps every kernel an ISA
 * file registered (tests check those bit for bit; bench_convert times both).
 *
 * Measured on an AMD EPYC Zen 4 (family 19h; AVX512 F/BW/VL/DQ, VNNI, BF16, no FP16; 2 vCPUs),
 * 2026-11-24, this code (the avx512 kernels without source prefetch, cvt_avx512.c): medians of three
 * `bench_convert --quick --csv` runs, one thread, ns/element, avx2 / avx512 (own kernels) at
 * 2^16 elements (in cache) and 2^26 (streaming stores, out of cache):
 *     conversion        2^16: avx2  avx512 ratio    2^26: avx2  avx512 ratio   avx512 table
 *     f32->f16                0.0568 0.0561 0.99          0.1827 0.1785 0.98   avx512
 *     f32->bf16               0.0749 0.0601 0.80          0.1955 0.1849 0.95   avx512 (+BF16)
 *     f16->f32                0.0581 0.0596 1.03          0.1532 0.1537 1.00   avx2
 *     bf16->f32               0.0695 0.0625 0.90          0.1488 0.1561 1.05   avx512
 *     f32->e4m3fn             0.1161 0.1351 1.16          0.1933 0.1633 0.84   avx2 / avx512
 *     f32->e4m3fn sat         0.1164 0.1369 1.18          0.1989 0.1744 0.88   avx2 / avx512
 *     f32->e5m2               0.0992 0.1172 1.18          0.1906 0.1630 0.86   avx2 / avx512
 *     f32->e5m2 sat           0.0983 0.1169 1.19          0.1975 0.1630 0.83   avx2 / avx512
 *     e4m3fn->f32             0.0915 0.0718 0.78          0.1471 0.1492 1.01   avx512 / avx2
 *     e5m2->f32               0.0529 0.0515 0.97          0.1481 0.1462 0.99   avx2
 *     f32->{bf16,f16,e4m3fn,e5m2} SR  0.86-0.93 (2^16), 0.85-0.93 (2^26)       avx512
 *     f64->f32                0.1187 0.1206 1.02          0.3581 0.3549 0.99   (the same AVX2
 *                                                                               kernel in both)
 * (e4m3fn->f32 after the three-operation float16 form of cvt_avx2.c's hw_e4m3_ld, 2026-11-25,
 * same CPU, three runs: 2^16 avx2 0.073, avx512 0.057; 2^26 0.156-0.161 / 0.151-0.153: the choice
 * stands.)
 * (An earlier build, whose avx512 kernels prefetched their source as the avx2 ones do, measured
 * on the same kind of CPU: the float8 encodes 0.92-1.04 at 2^26, so f32->e5m2 sat stayed avx2;
 * without the prefetch they win by 12-17% there.)
 * Measured on an AMD EPYC Zen 5 (family 1Ah; AVX512 F/BW/VL/DQ, VNNI, BF16, VBMI2, VP2INTERSECT,
 * no FP16; 2 vCPUs), 2026-11-25, commit 08bd4ca, the same way (medians of three runs):
 *     conversion        2^16: avx2  avx512 ratio    2^26: avx2  avx512 ratio   avx512 table
 *     f32->f16                0.0289 0.0295 1.02          0.1397 0.1270 0.91   avx2 / avx512
 *     f32->bf16               0.0556 0.0307 0.55          0.1385 0.1543 1.11   avx512 (see below)
 *     f16->f32                0.0298 0.0300 1.01          0.1284 0.1291 1.01   avx2
 *     bf16->f32               0.0527 0.0303 0.57          0.1293 0.1294 1.00   avx512
 *     f32->e4m3fn             0.0912 0.0578 0.63          0.1385 0.1325 0.96   avx512
 *     f32->e4m3fn sat         0.0908 0.0582 0.64          0.1428 0.1360 0.95   avx512
 *     f32->e5m2               0.0791 0.0503 0.64          0.1376 0.1344 0.98   avx512 (see below)
 *     f32->e5m2 sat           0.0795 0.0500 0.63          0.1335 0.1295 0.97   avx512 (see below)
 *     e4m3fn->f32             0.0582 0.0313 0.54          0.1176 0.1186 1.01   avx512 / avx2
 *     e5m2->f32               0.0310 0.0229 0.74          0.1170 0.1251 1.07   avx512 / avx2
 *     f32->{bf16,f16,e4m3fn,e5m2} SR  0.46-0.54 (2^16), 0.72-0.96 (2^26)       avx512
 * (f32->bf16 at 2^26, three alternating `--only` runs: avx2 0.129-0.142, avx512 0.137-0.156.)
 * (The float8 encodes after their fast steps moved to 16-bit lanes, cvt_avx512.c's
 * narrow8_fast4 and sr8_fast2, same CPU, 2026-11-25 evening, three runs each, avx2 / avx512:
 * f32->e4m3fn 2^16 0.090 / 0.046-0.049, 2^26 0.139 / 0.117-0.125; f32->e5m2 2^16 0.078-0.079 /
 * 0.037, 2^26 0.125-0.128 / 0.116-0.121 (sat 0.128-0.129 / 0.109-0.115): e5m2 now takes the
 * avx512 kernel out of cache too. Zen 4's set was measured before that change,
 * and again in session 21, below.)
 * (Re-measured 2026-11-25 late, commit 6f6433d, on source data without the 4096-value period
 * the benchmark used to have (bench/RESULTS.md session 13), medians of three runs, avx2 / avx512,
 * 2^16 then 2^26: f32->f16 0.0272 / 0.0269, 0.114 / 0.112; f32->bf16 0.052 / 0.025, 0.125 /
 * 0.134; f16->f32 0.027 / 0.024 (two more runs of five: a tie), 0.114 / 0.116; bf16->f32 0.048 /
 * 0.028, 0.115 / 0.115; f32->e4m3fn 0.089 / 0.044, 0.149 / 0.132; f32->e5m2 0.076 / 0.036,
 * 0.131 / 0.114; e4m3fn->f32 0.055 / 0.029, 0.105 / 0.106; e5m2->f32 0.030 / 0.021, 0.105 /
 * 0.107: every choice below stands.)
 * (2026-11-26, the streaming bfloat16 step bf16_hw4 (cvt_avx512.c), f32->bf16 at 2^26, three
 * alternating `--only` runs: avx2 0.129-0.146, avx512 0.128-0.134; in cache 0.056-0.059 /
 * 0.030: the avx512 kernel in both regimes now.)
 * (2026-11-26, session 15: on AMD family 1Ah the AVX-512 streaming float8 and stochastic
 * narrowings now prefetch their source 6144 bytes ahead (mxp__avx512_prefetch, cvt_avx512.c):
 * float8 encodes at 2^26 0.75-0.81x -> 0.86-0.94x of the limit. The avx2 kernels were already
 * slower there, so no choice changed.)
 * (2026-11-26, session 21, Zen 4 again (family 19h model 11h), commit 4817550, after sessions
 * 11-20's float8 work on Zen 5 (16-bit-lane fast steps, the lone-small-lane step): medians of
 * five alternating `bench_convert --quick --csv` runs, avx2 / avx512-own, 2^16 then 2^26:
 * f32->e4m3fn 0.1140 / 0.0784, 0.187 / 0.155; sat 0.1149 / 0.0784, 0.188 / 0.155; f32->e5m2
 * 0.0912 / 0.0755, 0.160 / 0.140; sat 0.0912 / 0.0749, 0.160 / 0.143: the float8 encodes now
 * win in cache on Zen 4 too (by 18-31%; on ReLU and [-0.05, 0.05] data by 35-45%, bench/
 * RESULTS.md session 21) and take the avx512 kernel in both regimes there.
 * f32->f16 in cache, five alternating `--only` runs: avx2 0.0520-0.0521, avx512 0.0536 (every
 * run): the avx2 kernel below the threshold now, as on Zen 5; at 2^26 0.154-0.173 / 0.157-0.167,
 * the avx512 one stays. The other 16-bit rows keep their choices: f32->bf16 0.068 / 0.052 in
 * cache, bf16->f32 0.062 / 0.057, f16->f32 0.0529 / 0.0536, and ties at 2^26.)
 * (2026-11-27, session 29, Zen 4: e4m3fn->f32's avx512 kernel is the AVX512_VBMI byte table on
 * CPUs that have it (cvt_avx512.c): in cache 0.044 ns/element against the avx2 kernel's 0.073;
 * at 2^26 0.157-0.166 against 0.156-0.164 (three alternating runs each), a tie: the choice
 * stands.)
 * (2026-11-29, session 39, Zen 4 again (family 19h model 11h), after sessions 30-38's Intel work
 * and with this session's bf16_hw4 form for Zen 4 (cvt_avx512.c): three alternating runs of
 * avx2 / avx512-own, five or six more for the rows marked *, own/avx2 at 2^16, then 2^26:
 * f32->f16* 0.97-1.03 (a tie), 1.04 (in both sets; by the ratio to the limit measured in the
 * same run 1.00, a tie); f32->bf16 0.75, 0.96; f16->f32* 1.01-1.05, 1.01-1.09 (ties); bf16->f32*
 * 0.98-0.99, 0.99-1.04 (ties); f32->e4m3fn 0.73, 0.87 (sat 0.73, 0.77);
 * f32->e5m2* 0.80, 0.93 (sat 0.80, 0.85); e4m3fn->f32* 0.60, 0.92-0.99 (and 1.00 in eight more runs: a tie);
 * e5m2->f32* 0.98-0.99, 0.98-1.02. Every choice stands but f32->f16 at 2^26, which the rule
 * below gives the avx2 kernel now (session 21 kept the avx512 one on a tie, 0.157-0.167 against
 * 0.154-0.173): Zen 4 takes the avx2 kernel for f32->f16 in both regimes (bench/RESULTS.md
 * session 39).)
 * Measured on an Intel Xeon with AVX512 F/BW/VL/DQ, VNNI, BF16, VBMI, VBMI2, FP16 and AMX (cpuid
 * family 6 model 167 under KVM, 2 vCPUs at 2.6 GHz nominal), 2026-11-27, session 30, after its
 * prefetch change (Intel prefetches into L2, cvt_avx512.c), medians of three alternating
 * `bench_convert --quick --csv` runs (in cache: of six, three before that change), avx2 /
 * avx512-own, ns/element:
 *     conversion        2^16: avx2  avx512 ratio    2^26: avx2  avx512 ratio   avx512 table
 *     f32->f16                0.0473 0.0493 1.04          0.403  0.323  0.80   avx2 / avx512
 *     f32->bf16               0.0802 0.0632 0.79          0.401  0.340  0.85   avx512
 *     f16->f32                0.0716 0.0777 1.09          0.270  0.290  1.07   avx2
 *     bf16->f32               0.0713 0.0731 1.03          0.293  0.295  1.01   avx2 / avx512 (below)
 *     f32->e4m3fn             0.1116 0.0852 0.76          0.383  0.375  0.98   avx512 (see below)
 *     f32->e4m3fn sat         0.1079 0.0873 0.81          0.352  0.381  1.08   avx512 (see below)
 *     f32->e5m2               0.0927 0.0810 0.87          0.379  0.382  1.01   avx512 (see below)
 *     f32->e5m2 sat           0.0991 0.0789 0.80          0.354  0.383  1.08   avx512 (see below)
 *     e4m3fn->f32             0.0776 0.0711 0.92          0.206  0.209  1.01   avx512 / avx2
 *     e5m2->f32               0.0683 0.0736 1.08          0.194  0.206  1.06   avx2
 * The avx2 kernel's float8 encodes at 2^26 ran at two speeds from run to run (f32->e4m3fn 0.336,
 * 0.383, 0.458), so the medians above tie; both kernels in one process, eleven alternating calls
 * each, medians, avx2 / avx512: f32->e4m3fn 0.451 / 0.373 and 0.472 / 0.391, sat 0.471 / 0.393
 * and 0.458 / 0.387, f32->e5m2 0.402 / 0.354 and 0.416 / 0.371, sat 0.432 / 0.388 and 0.434 /
 * 0.383: the avx512 kernel, 10-17% faster. The same harness agreed with the other rows (2^16,
 * then 2^26: f32->f16 0.96, 0.81; f32->bf16 0.80, 0.87; f16->f32 1.03, 1.04; bf16->f32 1.02,
 * 0.98; e4m3fn->f32 0.91, 0.99; e5m2->f32 1.00, 1.01). So Intel differs from Zen 5's set in one
 * row: e5m2->f32 keeps the avx2 kernel in cache too. picks[] has a third set for Intel.
 * On Zen 5 the 512-bit units make the float8 steps about 1.6x faster in cache; the float8
 * encodes now win in both regimes. Zen 4 executes a 512-bit operation as two 256-bit halves
 * (AMD family 19h), so the two CPUs get different choices: picks[] holds one set per kind,
 * Zen 4's for family 19h, Intel's for GenuineIntel, Zen 5's for every other AVX-512 CPU.
 * Rule: per entry, per saturate flag and per regime ("small": below the streaming threshold,
 * mxp__nt_threshold bytes read + written, where the 2^16 column applies; "large": at or above
 * it, the 2^26 column), the avx512 kernel where its time was lower by more than the noise
 * (about 3%: f64->f32 runs the same code in both columns), else the avx2 kernel ("a / b" above:
 * a below the threshold, b above). The float8 encodes lost in cache on Zen 4 when it was
 * measured in sessions 9 and 10 (before their 16-bit-lane steps) and win in both regimes now.
 * f16->f32, e5m2->f32 and e4m3fn->f32 at 2^26 are ties (memory-bound at the limit either way)
 * and keep the avx2 kernel (bf16->f32, a tie on both AMD CPUs at 2^26, kept the avx512 kernel it
 * always had there until session 55 measured it slower on Zen 4, below; on Intel see session
 * 35). Intel's set was measured on one Intel part (above); others may differ. Session 33
 * measured it again on that part after session 31's kernel changes (commit 1c3308b, three
 * alternating runs of avx2 / avx512-own, own/avx2 at 2^16, 2^26: f32->f16 1.03, 0.74; f32->bf16
 * 0.63, 0.68; f16->f32 1.11, 1.00; bf16->f32 1.03, 0.92; float8 encodes 0.62-0.71, 0.67-0.68;
 * e4m3fn->f32 0.92, 0.98; e5m2->f32 1.08, 0.99): every choice stands (bench/RESULTS.md).
 * Session 35, that part again, with session 34's interleaved streams (three alternating runs,
 * avx2 / avx512-own, 2^26 then 2^16, ns/element): float8 encodes 0.272-0.281 / 0.258-0.266 and
 * 0.095-0.111 / 0.065-0.073, f32->f16 0.273 / 0.271 and 0.0479 / 0.0490, f32->bf16 0.284 / 0.275
 * and 0.077 / 0.050, f16->f32 0.218 / 0.215 and 0.068 / 0.076, bf16->f32 0.221 / 0.208 and
 * 0.0696 / 0.0725. bf16->f32 in cache, 1.03-1.04x slower on avx512 in sessions 30, 33 and 35,
 * now takes the avx2 kernel on Intel below the threshold (its own row, the avx512 kernel
 * elsewhere and above it); every other choice stands.
 * Session 55, Zen 4 again (family 19h model 11h), commit b471dad: the pairs without float32 had
 * never been compared with their avx2 kernels. Every bench_convert row, three runs of avx2 /
 * avx512-own, then 7 to 38 more alternating `--only` runs of the rows where avx512 did not win
 * at 2^26, in both orders (the last five rows: 7 or 14 runs of rows added then); pooled medians,
 * one thread, ns/element (n runs at 2^26; in brackets the same ratio taken from each run's ratio
 * to the limit loop, avx2's over avx512's):
 *     conversion        2^16: avx2  avx512 ratio    2^26: avx2  avx512 ratio (limit)  n
 *     e4m3fn->e5m2            0.0325 0.0174 0.54          0.0474 0.0558 1.18 (1.12)   34
 *     e5m2->e4m3fn            0.0234 0.0174 0.74          0.0533 0.0564 1.06 (1.06)   17
 *     bf16->f16               0.0466 0.0347 0.74          0.0966 0.1046 1.08 (1.11)   34
 *     bf16->f16 stochastic    0.0633 0.0432 0.68          0.1026 0.1106 1.08 (1.08)   34
 *     e5m2->f16               0.0372 0.0287 0.77          0.0808 0.0824 1.02 (1.05)   15
 *     f64->f16                0.1479 0.1201 0.81          0.3001 0.3385 1.13 (1.10)   10
 *     f64->bf16               0.2402 0.1371 0.57          0.3109 0.3112 1.00 (1.03)   15
 *     f64->e4m3fn             0.2321 0.1829 0.79          0.3330 0.3304 0.99 (0.96)   10
 *     e4m3fn->f64             0.1603 0.0842 0.53          0.3073 0.3026 0.98 (1.01)   10
 *     f16->f64                0.0925 0.0921 1.00          0.3060 0.3095 1.01 (1.00)   22
 *     bf16->f32               0.0623 0.0614 0.99          0.1581 0.1717 1.09 (1.05)   15
 *     f64->f32 (one kernel)   0.1149 0.1143 1.00          0.3396 0.3532 1.04 (1.04)   41
 *     f32->f64 (one kernel)   0.1149 0.1154 1.00          0.3222 0.3234 1.00 (1.00)   15
 *     bf16->f64               0.1293 0.1328 1.03          0.3065 0.3094 1.01 (0.98)    7
 *     e5m2->f64               0.1187 0.0824 0.69          0.3076 0.3057 0.99 (1.01)    7
 *     f16->e5m2               0.0570 0.0570 1.00          0.0893 0.0863 0.97 (1.01)    7
 *     e5m2->bf16              0.0650 0.0283 0.44          0.0802 0.0797 0.99 (1.00)    7
 *     f64->e5m2               0.2214 0.1741 0.79          0.2918 0.2953 1.01 (0.98)   14
 * f64->f32 and f32->f64 run the same kernel in both columns: pooled medians at 2^26 still differ
 * by up to 4%. Every other row measured won on avx512 in both regimes (at 2^26: f16->bf16 0.90,
 * its stochastic rounding 0.82, the float8 <-> float8 stochastic pairs 0.69-0.84, the float64
 * stochastic narrowings 0.74-0.91, bf16->e4m3fn 0.89, e4m3fn->bf16 0.90, f16->e4m3fn 0.79, the
 * 16-bit -> float8 stochastic rows 0.74-0.86; and, in rows added then, seven runs each:
 * bf16->e5m2 0.78, e4m3fn->f16 0.93, f64->e5m2 stochastic 0.73). By the rule above, Zen 4 takes
 * the avx2 kernel at and above the threshold for the rows listed (the two controls aside) but
 * f16->f64, bf16->f64 and f16->e5m2, which take it in both regimes; bf16->f32 in cache, 1%
 * apart, keeps the avx512 kernel as in sessions 21 and 39. The other CPUs keep the avx512
 * kernels of these pairs (not compared there).
 * Re-measure (bench_convert prints the rows avx2, avx512-own = the own kernels and avx512 = this
 * table) and edit the rows below. The composed pairs (cvt_compose.c; on x86 none since session
 * 44, stochastic rounding between the two float8 formats being the last) would run the table's
 * float32 entries on 2048-element blocks, following the "small" choices; the composed blocks of
 * the float64 ->
 * narrow kernels (cvt_simd_impl.h's n64_loop, steps their fast path cannot take) run the
 * float32 entries registered before these choices are applied, i.e. the ISA's own.
 * Only the avx512 table mixes; the other tables are their ISA's own kernels.
 */
#if defined(__x86_64__)
typedef struct avx512_pick {
    mxp_dtype d, s;
    int mode;
    /* [cpu][saturate][large]: 1 = the avx512 kernel, 0 = the avx2 one; cpu 0 = 256-bit units
     * (AMD family 19h, Zen 4), 1 = 512-bit units (Zen 5 measured; AVX-512 CPUs of other vendors
     * assumed), 2 = Intel (measured in session 30) */
    unsigned char avx512[3][2][2];
} avx512_pick;
/* one CPU's choices: {{nearest-even small, large}, {saturating small, large}} */
#define PK(a, b, c, d) {{a, b}, {c, d}}
static const avx512_pick picks[] = {
    /* A row that is all 1 for the CPU installs the avx512 kernel directly (apply_picks); every
     * row stays listed so that a re-measurement edits a row.
     * d <- s                                     Zen 4             full width        Intel */
    {MXP_FLOAT32, MXP_FLOAT16, MXP__RNE, {PK(0, 0, 0, 0), PK(0, 0, 0, 0), PK(0, 0, 0, 0)}},       /* f16->f32 */
    {MXP_FLOAT8_E4M3FN, MXP_FLOAT32, MXP__RNE, {PK(1, 1, 1, 1), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}}, /* f32->e4m3fn */
    {MXP_FLOAT8_E5M2, MXP_FLOAT32, MXP__RNE, {PK(1, 1, 1, 1), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},   /* f32->e5m2 */
    {MXP_FLOAT32, MXP_FLOAT8_E4M3FN, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 0, 1, 0), PK(1, 0, 1, 0)}}, /* e4m3fn->f32 */
    {MXP_FLOAT32, MXP_FLOAT8_E5M2, MXP__RNE, {PK(0, 0, 0, 0), PK(1, 0, 1, 0), PK(0, 0, 0, 0)}},   /* e5m2->f32 */
    {MXP_FLOAT16, MXP_FLOAT32, MXP__RNE, {PK(0, 0, 0, 0), PK(0, 1, 0, 1), PK(0, 1, 0, 1)}},       /* f32->f16 */
    {MXP_BFLOAT16, MXP_FLOAT32, MXP__RNE, {PK(1, 1, 1, 1), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},      /* f32->bf16 */
    {MXP_FLOAT32, MXP_BFLOAT16, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(0, 1, 0, 1)}},      /* bf16->f32 */
    /* the pairs without float32 (session 55: Zen 4 only; the other CPUs keep the avx512 kernels,
     * not compared there) */
    {MXP_FLOAT8_E5M2, MXP_FLOAT8_E4M3FN, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}}, /* e4m3fn->e5m2 */
    {MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}}, /* e5m2->e4m3fn */
    {MXP_FLOAT16, MXP_BFLOAT16, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},         /* bf16->f16 */
    {MXP_FLOAT16, MXP_BFLOAT16, MXP__SR, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},          /* bf16->f16 SR */
    {MXP_FLOAT16, MXP_FLOAT8_E5M2, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},      /* e5m2->f16 */
    {MXP_FLOAT16, MXP_FLOAT64, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},          /* f64->f16 */
    {MXP_BFLOAT16, MXP_FLOAT64, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},         /* f64->bf16 */
    {MXP_FLOAT8_E4M3FN, MXP_FLOAT64, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},    /* f64->e4m3fn */
    {MXP_FLOAT8_E5M2, MXP_FLOAT64, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},      /* f64->e5m2 */
    {MXP_FLOAT64, MXP_FLOAT8_E4M3FN, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},    /* e4m3fn->f64 */
    {MXP_FLOAT64, MXP_FLOAT16, MXP__RNE, {PK(0, 0, 0, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},          /* f16->f64 */
    {MXP_FLOAT64, MXP_BFLOAT16, MXP__RNE, {PK(0, 0, 0, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},         /* bf16->f64 */
    {MXP_FLOAT64, MXP_FLOAT8_E5M2, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},      /* e5m2->f64 */
    {MXP_FLOAT8_E5M2, MXP_FLOAT16, MXP__RNE, {PK(0, 0, 0, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},      /* f16->e5m2 */
    {MXP_BFLOAT16, MXP_FLOAT8_E5M2, MXP__RNE, {PK(1, 0, 1, 0), PK(1, 1, 1, 1), PK(1, 1, 1, 1)}},     /* e5m2->bf16 */
};
#undef PK
enum { NPICKS = sizeof picks / sizeof picks[0] };
/* the widenings' stochastic entry is their nearest-even kernel: the same choice */
static mxp__cvt_fn pick_fns[NPICKS][2]; /* [0] the avx2 kernel, [1] the avx512 one */
static int pick_cpu;                     /* the first index of avx512_pick.avx512 */

static void pick_call(int i, void *dst, const void *src, size_t n, const mxp__cvt_args *a)
{
    const avx512_pick *p = &picks[i];
    /* a->stream: a step of a large call (convert.c's interleaved streams, cvt_compose.c) */
    const bool large = a->stream || n * (mxp_dtype_size(p->d) + mxp_dtype_size(p->s)) >= mxp__nt_threshold;
    pick_fns[i][p->avx512[pick_cpu][a->saturate][large]](dst, src, n, a);
}
#define PICK_FN(i)                                                                             \
    static void pick_##i(void *dst, const void *src, size_t n, const mxp__cvt_args *a)         \
    {                                                                                          \
        pick_call(i, dst, src, n, a);                                                          \
    }
PICK_FN(0)
PICK_FN(1)
PICK_FN(2)
PICK_FN(3)
PICK_FN(4)
PICK_FN(5)
PICK_FN(6)
PICK_FN(7)
PICK_FN(8)
PICK_FN(9)
PICK_FN(10)
PICK_FN(11)
PICK_FN(12)
PICK_FN(13)
PICK_FN(14)
PICK_FN(15)
PICK_FN(16)
PICK_FN(17)
PICK_FN(18)
PICK_FN(19)
PICK_FN(20)
PICK_FN(21)
PICK_FN(22)
static const mxp__cvt_fn pick_wrappers[] = {pick_0,  pick_1,  pick_2,  pick_3,  pick_4,  pick_5,  pick_6,
                                            pick_7,  pick_8,  pick_9,  pick_10, pick_11, pick_12, pick_13,
                                            pick_14, pick_15, pick_16, pick_17, pick_18, pick_19, pick_20,
                                            pick_21, pick_22};
_Static_assert(sizeof pick_wrappers / sizeof pick_wrappers[0] == NPICKS, "one wrapper per pick");

/* Which set of choices in picks[] this CPU takes: 0 on AMD family 19h (Zen 4), whose AVX-512
 * runs 512-bit operations on 256-bit units, 2 on Intel, 1 on every other AVX-512 CPU. */
static int avx512_cpu(void)
{
#ifdef MXP_X86_CPUID
    const x86_features f = x86_detect();
    return f.half_width ? 0 : f.intel ? 2 : 1;
#else
    return 1;
#endif
}

/* Applies picks to the dispatched avx512 table t (own: its own kernels, avx2: the avx2 table). */
static void apply_picks(mxp__kernels *t, const mxp__kernels *own512, const mxp__kernels *avx2, int cpu)
{
    pick_cpu = cpu;
    for (int i = 0; i < NPICKS; i++) {
        const avx512_pick *p = &picks[i];
        const unsigned char *c = &p->avx512[cpu][0][0];
        const int ones = c[0] + c[1] + c[2] + c[3];
        const mxp__cvt_fn k2 = avx2->cvt[p->d][p->s][p->mode], k5 = own512->cvt[p->d][p->s][p->mode];
        pick_fns[i][0] = k2;
        pick_fns[i][1] = k5;
        const mxp__cvt_fn f = ones == 4 ? k5 : ones == 0 ? k2 : pick_wrappers[i];
        t->cvt[p->d][p->s][p->mode] = f;
        if (mxp_dtype_size(p->d) > mxp_dtype_size(p->s)) t->cvt[p->d][p->s][MXP__SR] = f; /* widening: one kernel */
    }
}
#endif

/* The choice for a MIXPREC_ISA value, from the availability table (filled before any call).
 * note (cap bytes, may be NULL): "" when the request is honoured or there is none, else why not. */
static mxp__isa_id select_from(const char *request, char *note, size_t cap)
{
    if (note && cap) note[0] = '\0';
    int best = MXP__ISA_SCALAR;
    for (int i = MXP__ISA_COUNT - 1; i > 0; i--)
        if (available[i]) {
            best = i;
            break;
        }
    if (!request || !*request) return (mxp__isa_id)best;
    int want = -1;
    for (int i = 0; i < MXP__ISA_COUNT; i++)
        if (strcmp(request, isa_names[i]) == 0) want = i;
    if (want < 0) { /* unknown: the default choice, and say so */
        if (note && cap)
            snprintf(note, cap, "MIXPREC_ISA=\"%.40s%s\" names no kernel path (expected scalar, avx2, "
                     "avx512 or neon): using %s", request, strlen(request) > 40 ? "..." : "",
                     isa_names[best]);
        return (mxp__isa_id)best;
    }
    /* A forced path falls back to the best available one at or below it. NEON sits above the
     * x86 paths in the enum but never coexists with them. */
    int got = MXP__ISA_SCALAR;
    for (int i = want; i >= 0; i--)
        if (available[i]) {
            got = i;
            break;
        }
    if (got != want && note && cap)
        snprintf(note, cap, "MIXPREC_ISA=%s: this CPU, its OS or this build lacks the %s path: using %s",
                 isa_names[want], isa_names[want], isa_names[got]);
    return (mxp__isa_id)got;
}

/* What MIXPREC_ISA said at the choice (a copy) and why it was not followed ("" when it was). */
static char requested[64];
static bool has_request;
static char fallback[192];

static void init_tables(void)
{
    for (int i = 0; i < MXP__ISA_COUNT; i++) {
        available[i] = cpu_has((mxp__isa_id)i);
        if (available[i]) build((mxp__isa_id)i);
        own[i] = tables[i];
    }
#if defined(__x86_64__)
    if (available[MXP__ISA_AVX512] && available[MXP__ISA_AVX2])
        apply_picks(&tables[MXP__ISA_AVX512], &own[MXP__ISA_AVX512], &tables[MXP__ISA_AVX2], avx512_cpu());
#ifdef MXP_X86_CPUID
    /* the AVX-512 streaming loops prefetch on AMD family 1Ah (Zen 5, into L1) and on Intel (into
     * L2, in more loops), where that was measured to help, and nowhere else (Zen 4: it cost
     * 10-20%, and both schemes lost again in session 39; cvt_avx512.c has the numbers); the AVX2
     * kernels take Intel's scheme on Intel, any Intel, AVX2-only ones included (cvt_avx2.c), and
     * keep their own elsewhere */
    const x86_features xf = x86_detect();
    mxp__avx512_prefetch = xf.amd_1a ? MXP__PREFETCH_L1 : xf.intel ? MXP__PREFETCH_L2 : MXP__PREFETCH_OFF;
    /* large float32 -> narrow and 16-bit -> float32 calls as 4 interleaved streams on Intel, where it
     * was measured to gain (convert.c; session 34); one pass on AMD: Zen 4 measured it to lose
     * (session 39), Zen 5 has not measured it */
    mxp__cvt_streams = xf.intel ? 4 : 1;
    mxp__avx512_half_width = xf.half_width; /* Zen 4: cvt_avx512.c's bf16_hw4 */
    /* stochastic rounding from 16-bit sources to float8 tests its streaming steps ahead on Zen 4,
     * where it was measured to gain (cvt_simd_impl.h's srn_run); not measured elsewhere */
    mxp__avx512_ahead = xf.half_width;
#endif
    if (memcmp(own[MXP__ISA_AVX512].cvt, tables[MXP__ISA_AVX512].cvt, sizeof own[0].cvt) != 0)
        own[MXP__ISA_AVX512].name = "avx512-own"; /* tells the two apart in tests and benchmarks */
#endif
    const char *env = getenv("MIXPREC_ISA");
    if (env && *env) {
        has_request = true;
        snprintf(requested, sizeof requested, "%s", env);
    }
    active = select_from(env, fallback, sizeof fallback);
}

/* The one-time setup runs whatever floating-point environment the first caller has: it checks
 * kernels against the reference on values that include NaN (cvt_avx512.c's f8s_fill compares
 * them), so with the caller's exceptions unmasked (feenableexcept(FE_INVALID)) the first call of
 * mxp_isa() or mxp_convert() died of SIGFPE until 2026-11-28. feholdexcept saves the environment
 * (x87 and SSE on x86), clears the flags and masks every exception; fesetenv puts the caller's
 * environment back, flags and traps as they were. tests/test_fenv_first.c calls each entry point
 * first in a fresh process with every exception unmasked. */
static void init(void)
{
    fenv_t env;
    const int held = feholdexcept(&env) == 0;
    init_tables();
    if (held) fesetenv(&env);
}

mxp__isa_id mxp__isa_select(const char *request)
{
    pthread_once(&once, init);
    return select_from(request, NULL, 0);
}

const mxp__kernels *mxp__kernels_active(void)
{
    pthread_once(&once, init);
    return &tables[active];
}

const mxp__kernels *mxp__kernels_for(mxp__isa_id isa)
{
    pthread_once(&once, init);
    if ((unsigned)isa >= MXP__ISA_COUNT || !available[isa]) return NULL;
    return &tables[isa];
}

const mxp__kernels *mxp__kernels_own(mxp__isa_id isa)
{
    pthread_once(&once, init);
    if ((unsigned)isa >= MXP__ISA_COUNT || !available[isa]) return NULL;
    return &own[isa];
}

const mxp__kernels *mxp__scalar_kernels(void)
{
    pthread_once(&once, init);
    return &tables[MXP__ISA_SCALAR];
}

const char *mxp_isa(void) { return mxp__kernels_active()->name; }

const char *mxp_isa_requested(void)
{
    pthread_once(&once, init);
    return has_request ? requested : NULL;
}

const char *mxp_isa_fallback(void)
{
    pthread_once(&once, init);
    return fallback[0] ? fallback : NULL;
}
