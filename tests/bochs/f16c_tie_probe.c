/*
 * f16c_tie_probe.c - does this (emulated) CPU's VCVTPS2PH round ties to even?
 * Exit 0: yes, as the SDM says; 3: it rounds them away from zero (Bochs 2.7, see f16c_ties.h);
 * 4: something else (the tests will report it). Used by scripts/bochs_avx512.sh inside the
 * emulated machine; built with -mf16c.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    /* 1 + 2^-11 (halfway between 0x3C00 and 0x3C01), 1 + 3*2^-11 (0x3C01 / 0x3C02), 2^-25 (0 / 1),
     * -(1 + 2^-11), then non-ties. */
    const uint32_t in[8] = {0x3F801000u, 0x3F803000u, 0x33000000u, 0xBF801000u,
                            0x3F800000u, 0x3F801001u, 0x33000001u, 0x387FE000u};
    const uint16_t even[8] = {0x3C00, 0x3C02, 0x0000, 0xBC00, 0x3C00, 0x3C01, 0x0001, 0x0400};
    const uint16_t away[8] = {0x3C01, 0x3C02, 0x0001, 0xBC01, 0x3C00, 0x3C01, 0x0001, 0x0400};
    __m256 v;
    memcpy(&v, in, sizeof in);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    uint16_t out[8];
    memcpy(out, &h, sizeof out);
    const int is_even = memcmp(out, even, sizeof out) == 0, is_away = memcmp(out, away, sizeof out) == 0;
    printf("f16c_tie_probe: VCVTPS2PH ties %s\n", is_even ? "to even" : is_away ? "away from zero" : "???");
    return is_even ? 0 : is_away ? 3 : 4;
}
