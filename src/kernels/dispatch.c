/*
 * dispatch.c - builds one kernel table per ISA and picks the one to use, once.
 *
 * Detection is at run time (cpuid through the compiler builtins), never at compile time:
 * valgrind hides AVX-512 from cpuid, so a memcheck run must take the AVX2 or scalar path.
 * MIXPREC_ISA=scalar|avx2|avx512|neon forces a path; one this CPU lacks falls back to the best
 * available path below it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

static bool cpu_has(mxp__isa_id isa)
{
    switch (isa) {
    case MXP__ISA_SCALAR: return true;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    case MXP__ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    case MXP__ISA_AVX512:
        __builtin_cpu_init();
        return cpu_has(MXP__ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq");
#endif
#if defined(__aarch64__)
    case MXP__ISA_NEON: return true; /* Advanced SIMD and FP16 conversions are baseline AArch64 */
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
    switch (isa) {
#if defined(__x86_64__)
    case MXP__ISA_AVX2:
        mxp__cvt_register_avx2(k);
        mxp__finite_register_avx2(k);
        break;
    case MXP__ISA_AVX512:
        mxp__cvt_register_avx512(k);
        mxp__finite_register_avx512(k);
        break;
#endif
#if defined(__aarch64__)
    case MXP__ISA_NEON:
        mxp__cvt_register_neon(k);
        mxp__finite_register_neon(k);
        break;
#endif
    default: break;
    }
}

static void init(void)
{
    for (int i = 0; i < MXP__ISA_COUNT; i++) {
        available[i] = cpu_has((mxp__isa_id)i);
        if (available[i]) build((mxp__isa_id)i);
    }
    /* Best available path, or the one forced by MIXPREC_ISA (falling back below it). */
    int want = MXP__ISA_COUNT - 1;
    const char *env = getenv("MIXPREC_ISA");
    if (env && *env) {
        for (int i = 0; i < MXP__ISA_COUNT; i++)
            if (strcmp(env, isa_names[i]) == 0) want = i;
    }
    /* NEON sits above the x86 paths in the enum but never coexists with them. */
    for (int i = want; i >= 0; i--) {
        if (available[i]) {
            active = (mxp__isa_id)i;
            break;
        }
    }
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
