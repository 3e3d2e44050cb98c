/*
 * test_f16c_ties.c - the emulator-erratum tolerance of the ISA tests (tests/bochs/f16c_ties.h)
 * accepts exactly what it promises and nothing else.
 *
 * The ties are built constructively, not with the helper's own midpoint test: for every finite
 * non-negative value v of float16 / e4m3fn / e5m2 below the largest, with v's bit pattern
 * even, the float32 m = (v + next(v)) / 2 (exact: at most 12 significant bits) is a tie that
 * nearest-even rounds to v and Bochs's VCVTPS2PH to next(v). Accepted: (m, want v, got next(v))
 * in nearest-even mode with MXP_TEST_F16C_TIES_AWAY=1, either sign. Rejected: the same with the
 * variable unset, empty or "0", in stochastic mode, for bfloat16, with got two steps away or with the
 * other sign, and for the float32 neighbours of m (not ties).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels.h"
#include "mixprec.h"
#include "bochs/f16c_ties.h"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static int ties_of(int d)
{
    const uint32_t sign = d == MXP_FLOAT16 ? 0x8000u : 0x80u;
    int n = 0;
    for (uint32_t v = 0; v < sign; v += 2) { /* even patterns */
        const double lo = ref_decode((mxp_dtype)d, v), hi = ref_decode((mxp_dtype)d, v + 1);
        if (isnan(lo) || isnan(hi) || isinf(lo) || isinf(hi)) continue;
        const float m = (float)((lo + hi) / 2);
        assert_true((double)m == (lo + hi) / 2); /* exact in float32 */
        for (int neg = 0; neg < 2; neg++) {
            const uint32_t s = neg ? sign : 0u;
            const uint32_t x = f32_bits(neg ? -m : m);
            assert_true(tie_away_tolerated(d, MXP__RNE, x, v | s, (v + 1) | s));
            assert_false(tie_away_tolerated(d, MXP__SR, x, v | s, (v + 1) | s));
            assert_false(tie_away_tolerated(d, MXP__RNE, x, v | s, (v + 2) | s));
            assert_false(tie_away_tolerated(d, MXP__RNE, x, v | s, (v + 1) | (s ^ sign)));
            assert_false(tie_away_tolerated(d, MXP__RNE, x ^ 0x80000000u, v | s, (v + 1) | s));
            assert_false(tie_away_tolerated(d, MXP__RNE, x + 1u, v | s, (v + 1) | s));
            if ((x & 0x7FFFFFFFu) != 0) assert_false(tie_away_tolerated(d, MXP__RNE, x - 1u, v | s, (v + 1) | s));
            n++;
        }
    }
    return n;
}

static void test_enabled(void **state)
{
    (void)state;
    assert_int_equal(setenv("MXP_TEST_F16C_TIES_AWAY", "1", 1), 0);
    assert_true(tie_away_enabled());
    /* every even pattern below the largest finite value, both signs: 0x7BFF / 2 + 1 even
     * float16 patterns below infinity (0x7BFE is the last even one before 0x7BFF). */
    assert_int_equal(ties_of(MXP_FLOAT16), 2 * (0x7BFF / 2 + 1));
    assert_int_equal(ties_of(MXP_FLOAT8_E5M2), 2 * (0x7B / 2 + 1));
    assert_int_equal(ties_of(MXP_FLOAT8_E4M3FN), 2 * (0x7E / 2)); /* 0x7E is the largest */
    /* bfloat16 never: the integer kernel does not use VCVTPS2PH */
    assert_false(tie_away_tolerated(MXP_BFLOAT16, MXP__RNE, 0x3F808000u, 0x3F80u, 0x3F81u));
    /* the classic one: 1 + 2^-11 */
    assert_true(tie_away_tolerated(MXP_FLOAT16, MXP__RNE, 0x3F801000u, 0x3C00u, 0x3C01u));
    /* tie_away_first_diff skips the accepted difference (element 1) and stops at the next one
     * (element 3: not a tie), counting one; without float32 inputs it accepts nothing. */
    const uint32_t in[4] = {0x3F800000u, 0x3F801000u, 0x40000000u, 0x3F801001u};
    const uint16_t want[4] = {0x3C00, 0x3C00, 0x4000, 0x3C01}, got[4] = {0x3C00, 0x3C01, 0x4000, 0x3C02};
    size_t tol = 0;
    assert_int_equal(tie_away_first_diff((const unsigned char *)want, (const unsigned char *)got,
                                         (const unsigned char *)in + 0, MXP_FLOAT32, 4, 2, MXP_FLOAT16, MXP__RNE, &tol), 3);
    assert_int_equal(tol, 1);
    assert_int_equal(tie_away_first_diff((const unsigned char *)want, (const unsigned char *)got, NULL, MXP_FLOAT32, 4, 2,
                                         MXP_FLOAT16, MXP__RNE, &tol), 1);
    assert_int_equal(tol, 1);
    assert_int_equal(tie_away_first_diff((const unsigned char *)want, (const unsigned char *)want, in, MXP_FLOAT32, 4, 2,
                                         MXP_FLOAT16, MXP__RNE, &tol), 4);
    /* other sources (the composed paths): a tie when the value is exactly that float32 */
    assert_true(tie_away_tolerated_src(MXP_FLOAT16, MXP__RNE, MXP_FLOAT64, 0x3FF0020000000000ull, 0x3C00u, 0x3C01u));
    assert_false(tie_away_tolerated_src(MXP_FLOAT16, MXP__RNE, MXP_FLOAT64, 0x3FF0020000000001ull, 0x3C00u, 0x3C01u));
    assert_false(tie_away_tolerated_src(MXP_FLOAT16, MXP__RNE, MXP_FLOAT64, 0x3FF001FFFFFFFFFFull, 0x3C00u, 0x3C01u));
    /* bfloat16 1 + 2^-4 is an e4m3fn tie (1 and 1.125), float16 2^-25 a float16 one */
    assert_true(tie_away_tolerated_src(MXP_FLOAT8_E4M3FN, MXP__RNE, MXP_BFLOAT16, 0x3F88u, 0x38u, 0x39u));
    assert_false(tie_away_tolerated_src(MXP_FLOAT8_E4M3FN, MXP__RNE, MXP_BFLOAT16, 0x3F89u, 0x38u, 0x39u));
    assert_true(tie_away_tolerated_src(MXP_FLOAT16, MXP__RNE, MXP_BFLOAT16, 0x3300u, 0x0000u, 0x0001u));
    assert_false(tie_away_tolerated_src(MXP_FLOAT16, MXP__RNE, MXP_BFLOAT16, 0x3300u, 0x0000u, 0x0002u));
    assert_false(tie_away_tolerated_src(MXP_FLOAT16, MXP__RNE, MXP_INT8, 0x01u, 0x0000u, 0x0001u));
    const uint64_t in64[2] = {0x3FF0020000000000ull, 0x3FF0020000000001ull};
    const uint16_t w64[2] = {0x3C00, 0x3C01}, g64[2] = {0x3C01, 0x3C02};
    tol = 0;
    assert_int_equal(tie_away_first_diff((const unsigned char *)w64, (const unsigned char *)g64, in64, MXP_FLOAT64, 2, 2,
                                         MXP_FLOAT16, MXP__RNE, &tol), 1);
    assert_int_equal(tol, 1);
}

static void test_disabled(void **state)
{
    (void)state;
    for (int k = 0; k < 3; k++) {
        if (k == 0) assert_int_equal(unsetenv("MXP_TEST_F16C_TIES_AWAY"), 0);
        else assert_int_equal(setenv("MXP_TEST_F16C_TIES_AWAY", k == 1 ? "0" : "", 1), 0);
        assert_false(tie_away_enabled());
        assert_false(tie_away_tolerated(MXP_FLOAT16, MXP__RNE, 0x3F801000u, 0x3C00u, 0x3C01u));
        assert_false(tie_away_tolerated(MXP_FLOAT16, MXP__RNE, 0x33000000u, 0x0000u, 0x0001u));
        assert_false(tie_away_tolerated(MXP_FLOAT8_E4M3FN, MXP__RNE, 0x3A800000u, 0x00u, 0x01u));
        assert_false(tie_away_tolerated_src(MXP_FLOAT16, MXP__RNE, MXP_FLOAT64, 0x3FF0020000000000ull, 0x3C00u, 0x3C01u));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disabled),
        cmocka_unit_test(test_enabled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
