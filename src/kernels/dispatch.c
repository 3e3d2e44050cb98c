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
 * -> bfloat16 nearest-even entry is the VCVTNEPS2BF16 kernel (mxp__cvt_register_avx512_bf16).
 * No kernel uses AVX512_FP16. A BF16/FP16 kernel is registered only when x86_detect says the
 * CPU has the extension, never required for the path.
 * AArch64: Advanced SIMD is baseline, so neon is always available there.
 *
 * MIXPREC_ISA=scalar|avx2|avx512|neon forces a path; one this CPU lacks falls back to the best
 * available path below it (enum order); an empty or unknown value means "best".
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define MXP_X86_CPUID 1
#endif

#include "kernels.h"
#include "mixprec/convert.h"

static mxp__kernels tables[MXP__ISA_COUNT];
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
    bool bf16, fp16;    /* AVX512_BF16 (one extra kernel) / AVX512_FP16 (informational) */
    bool vnni;          /* AVX512_VNNI (int8 matmul kernels) */
} x86_features;

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static x86_features x86_detect(void)
{
    x86_features f = {false, false, false, false, false};
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
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
        mxp__cvt_register_compose(k, mxp__f64_to_f32_odd_avx2);
        break;
    case MXP__ISA_AVX512:
        mxp__cvt_register_avx512(k);
#if defined(MXP_X86_CPUID) && !defined(MXP_AVX512_EMULATED)
        if (x86_detect().bf16) mxp__cvt_register_avx512_bf16(k);
#endif
        mxp__cvt_register_f64_avx2(k);
        mxp__finite_register_avx512(k);
#if defined(MXP_AVX512_EMULATED)
        mxp__qmm_register_avx512(k, true); /* emulated: both variants run (test_qmatmul) */
#elif defined(MXP_X86_CPUID)
        mxp__qmm_register_avx512(k, x86_detect().vnni);
#endif
        mxp__cvt_register_compose(k, mxp__f64_to_f32_odd_avx2);
        break;
#endif
#if defined(__aarch64__)
    case MXP__ISA_NEON:
        mxp__cvt_register_neon(k);
        mxp__finite_register_neon(k);
        mxp__cvt_register_compose(k, NULL);
        break;
#endif
    default: break;
    }
}

/*
 * Paths the default choice (MIXPREC_ISA unset or unknown) may take. The avx512 table is checked
 * bit for bit on emulated intrinsics (test_isa_emu512, test_isa_exhaustive_emu512: all 2^32
 * inputs per target and mode), and its machine code, as built for AVX-512 hardware, has run in
 * the Bochs emulator (scripts/bochs_avx512.sh: test_isa, sampled sweeps, test_convert) and
 * matched. It is still not the default: nobody has timed it on AVX-512 hardware (the
 * development and CI machines have none), the conversions are memory-bound at the sizes that
 * matter, where AVX2 already runs at copy speed, 512-bit code can lower the clock on some Intel
 * parts, and the AVX512_BF16 kernel has run only on emulated intrinsics. MIXPREC_ISA=avx512
 * opts in; on an AVX-512 machine, test_isa and test_isa_exhaustive check the native table.
 */
bool mxp__isa_in_default(mxp__isa_id isa) { return isa != MXP__ISA_AVX512; }

/* The choice, from the availability table (filled before any call). */
static mxp__isa_id select_from(const char *request)
{
    int want = -1;
    if (request && *request) {
        for (int i = 0; i < MXP__ISA_COUNT; i++)
            if (strcmp(request, isa_names[i]) == 0) want = i;
    }
    if (want < 0) { /* default: the best available path that may be chosen by default */
        for (int i = MXP__ISA_COUNT - 1; i >= 0; i--)
            if (available[i] && mxp__isa_in_default((mxp__isa_id)i)) return (mxp__isa_id)i;
        return MXP__ISA_SCALAR;
    }
    /* A forced path falls back to the best available one at or below it. NEON sits above the
     * x86 paths in the enum but never coexists with them. */
    for (int i = want; i >= 0; i--)
        if (available[i]) return (mxp__isa_id)i;
    return MXP__ISA_SCALAR;
}

static void init(void)
{
    for (int i = 0; i < MXP__ISA_COUNT; i++) {
        available[i] = cpu_has((mxp__isa_id)i);
        if (available[i]) build((mxp__isa_id)i);
    }
    active = select_from(getenv("MIXPREC_ISA"));
}

mxp__isa_id mxp__isa_select(const char *request)
{
    pthread_once(&once, init);
    return select_from(request);
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

const mxp__kernels *mxp__scalar_kernels(void)
{
    pthread_once(&once, init);
    return &tables[MXP__ISA_SCALAR];
}

const char *mxp_isa(void) { return mxp__kernels_active()->name; }
