/*
 * test_fenv_first.c - the library's first call in a process, made with every floating-point
 * exception unmasked (feenableexcept(FE_ALL_EXCEPT)), never traps.
 *
 * The kernel tables are built once, on the first call that needs them (src/kernels/dispatch.c),
 * and that setup checks some kernels against the reference on values that include NaN. Until
 * 2026-11-28 it ran in the caller's floating-point environment, so a program that unmasked
 * FE_INVALID (a common debugging setting) died of SIGFPE in its first mxp_isa() or
 * mxp_convert() on AVX-512 CPUs with VBMI. Each case here runs in a fresh child process (the
 * setup runs once per process), optionally with MIXPREC_ISA set, unmasks every exception, makes
 * one call and a second one of another kind, and reports through its exit status: 0 when the
 * calls returned the right answers and left the exception masks as the child set them. The
 * parent fails the test on any signal or other status and names the case.
 *
 * glibc only (feenableexcept is a GNU extension); elsewhere the test says so and skips.
 */
#define _GNU_SOURCE
#include <fenv.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mixprec.h"

#if defined(__GLIBC__) && defined(FE_ALL_EXCEPT) && !defined(MXP_NO_FORK)
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#define HAVE_TRAPS 1
#endif

#ifdef HAVE_TRAPS
/* exit statuses of a child that returned (a trap ends it by a signal instead) */
enum { CHILD_OK = 0, CHILD_WRONG = 3, CHILD_MASKS = 4, CHILD_SETUP = 5 };

typedef int (*first_call)(void);

/* The calls. Each returns 1 when its answer is right; the expected values are worked out here
 * by hand (small exact cases), not read from the library. */
static int call_isa(void)
{
    const char *n = mxp_isa();
    return n != NULL && n[0] != '\0';
}
static int call_convert_f16(void)
{
    /* 1, 2, 0.5 and -3 are exact in float16: 0x3C00, 0x4000, 0x3800, 0xC200; NaN stays NaN */
    float x[40];
    uint16_t h[40];
    const uint16_t want[4] = {0x3C00, 0x4000, 0x3800, 0xC200};
    for (int i = 0; i < 40; i++) x[i] = i % 4 == 0 ? 1.0f : i % 4 == 1 ? 2.0f : i % 4 == 2 ? 0.5f : -3.0f;
    x[39] = __builtin_nanf("");
    if (mxp_convert(h, MXP_FLOAT16, x, MXP_FLOAT32, 40) != MXP_OK) return 0;
    for (int i = 0; i < 39; i++)
        if (h[i] != want[i % 4]) return 0;
    return (h[39] & 0x7C00u) == 0x7C00u && (h[39] & 0x03FFu) != 0;
}
static int call_convert_e4m3_sr(void)
{
    /* stochastic rounding of exact values keeps them: 1.0 is 0x38 in e4m3fn, -448 is 0xFE */
    float x[100];
    uint8_t q[100];
    for (int i = 0; i < 100; i++) x[i] = i % 2 ? 1.0f : -448.0f;
    const mxp_convert_opts o = {MXP_ROUND_STOCHASTIC, true, 7, 1};
    if (mxp_convert_ex(q, MXP_FLOAT8_E4M3FN, x, MXP_FLOAT32, 100, &o) != MXP_OK) return 0;
    for (int i = 0; i < 100; i++)
        if (q[i] != (i % 2 ? 0x38 : 0xFE)) return 0;
    return 1;
}
static int call_all_finite(void)
{
    float x[64] = {0};
    if (!mxp_all_finite(x, MXP_FLOAT32, 64)) return 0;
    x[50] = __builtin_inff();
    return !mxp_all_finite(x, MXP_FLOAT32, 64);
}
static int call_unscale(void)
{
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = 8.0f;
    if (!mxp_unscale_check(x, MXP_FLOAT32, 64, 4.0f)) return 0;
    for (int i = 0; i < 64; i++)
        if (x[i] != 2.0f) return 0;
    return 1;
}
static int call_quant_int8(void)
{
    /* amax 127 - 1e-7 rounds to 127 in float32, so s = 127 / 127 = 1 and q = x */
    const float x[4] = {127.0f, -64.0f, 3.0f, 0.0f};
    int8_t q[4];
    float s;
    const mxp_qlayout l = {1, 4, MXP_QAXIS_TENSOR, 0};
    if (mxp_quantize_int8(q, &s, x, MXP_FLOAT32, &l) != MXP_OK) return 0;
    return s == 1.0f && q[0] == 127 && q[1] == -64 && q[2] == 3 && q[3] == 0;
}
static int call_policy(void)
{
    mxp_policy p;
    return mxp_policy_parse("p=f32,c=bf16,o=f32", &p) == MXP_OK && p.compute == MXP_BFLOAT16 &&
           mxp_policy_parse("p=f13", &p) == MXP_EPARSE;
}
static int call_loss_scale(void)
{
    /* jmp's rule: a non-finite step halves the scale */
    mxp_loss_scale s = mxp_loss_scale_dynamic(65536.0f);
    s = mxp_loss_scale_adjust(s, false);
    return s.scale == 32768.0f && mxp_loss_scale_scale(s, 3.0f) == 98304.0f;
}

static const struct {
    const char *name;
    first_call fn;
} calls[] = {
    {"mxp_isa", call_isa},
    {"mxp_convert f32->f16", call_convert_f16},
    {"mxp_convert_ex f32->e4m3fn stochastic", call_convert_e4m3_sr},
    {"mxp_all_finite", call_all_finite},
    {"mxp_unscale_check", call_unscale},
    {"mxp_quantize_int8", call_quant_int8},
    {"mxp_policy_parse", call_policy},
    {"mxp_loss_scale_adjust", call_loss_scale},
};
#define NCALLS (sizeof calls / sizeof calls[0])

/* one child: MIXPREC_ISA = isa (NULL: unset), every exception unmasked, calls[first] then
 * calls[(first + 1) % NCALLS] */
static int child(const char *isa, size_t first)
{
    /* cmocka's handlers, inherited from the parent, would turn a trap into an exit */
    signal(SIGFPE, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
    signal(SIGILL, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    if (isa) setenv("MIXPREC_ISA", isa, 1);
    else unsetenv("MIXPREC_ISA");
    feclearexcept(FE_ALL_EXCEPT);
    if (feenableexcept(FE_ALL_EXCEPT) == -1) return CHILD_SETUP;
    if (!calls[first].fn()) return CHILD_WRONG;
    if (!calls[(first + 1) % NCALLS].fn()) return CHILD_WRONG;
    /* the caller's traps are still on: the library put the environment back */
    if (fegetexcept() != FE_ALL_EXCEPT) return CHILD_MASKS;
    return CHILD_OK;
}

static void test_first_call_traps_unmasked(void **state)
{
    (void)state;
    static const char *isas[] = {NULL, "scalar", "avx2", "avx512", "neon"};
    int failures = 0;
    for (size_t ii = 0; ii < sizeof isas / sizeof isas[0]; ii++) {
        for (size_t c = 0; c < NCALLS; c++) {
            fflush(NULL);
            const pid_t pid = fork();
            assert_true(pid >= 0);
            if (pid == 0) _exit(child(isas[ii], c));
            int st = 0;
            assert_int_equal(waitpid(pid, &st, 0), pid);
            if (WIFSIGNALED(st)) {
                print_error("MIXPREC_ISA=%s, first call %s: killed by signal %d%s\n", isas[ii] ? isas[ii] : "(unset)",
                            calls[c].name, WTERMSIG(st), WTERMSIG(st) == SIGFPE ? " (SIGFPE: a trap)" : "");
                failures++;
            } else if (!WIFEXITED(st) || WEXITSTATUS(st) != CHILD_OK) {
                const int e = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
                print_error("MIXPREC_ISA=%s, first call %s: %s (%d)\n", isas[ii] ? isas[ii] : "(unset)", calls[c].name,
                            e == CHILD_WRONG   ? "a wrong answer"
                            : e == CHILD_MASKS ? "the exception masks changed"
                            : e == CHILD_SETUP ? "feenableexcept failed"
                                               : "an unexpected exit status",
                            e);
                failures++;
            }
        }
    }
    assert_int_equal(failures, 0);
}
#else
static void test_first_call_traps_unmasked(void **state)
{
    (void)state;
    print_message("skipped: needs glibc's feenableexcept and fork\n");
    skip();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_call_traps_unmasked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
