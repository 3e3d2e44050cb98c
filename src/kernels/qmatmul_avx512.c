/*
 * qmatmul_avx512.c - int8 matmul kernels for AVX-512 (kernels.h, mxp__qmm_ops): the packed
 * product on 512-bit vectors, in two variants; the small-m path (rows) and the descale are the
 * AVX2 ones (qmatmul_avx2.c: memory-bound / a small part of the time).
 *
 * avx512bw (AVX-512 F/BW): the AVX2 scheme on 16 lanes. VPMADDWD multiplies sign-extended int16
 * pairs into int32 lanes (|lane| <= 2^15), VPADDD accumulates; b panels are 32 columns wide,
 * per pair of k rows [16 columns' pairs][16 columns' pairs] (64 bytes each, the AVX2 layout of
 * two 16-column panels side by side); a rows are int16, padded to 8 rows. 8 x 32 tile: 16
 * accumulators.
 *
 * avx512vnni (AVX512_VNNI): VPDPBUSD multiplies 4 unsigned bytes by 4 signed bytes and adds the
 * four products to an int32 lane, one instruction per 64 multiply-adds. Our a is signed, so
 * it is packed biased, au = a + 128 = a ^ 0x80 (0..255), and
 *     sum_p a[p] * b[p][j] = sum_p au[p] * b[p][j] - 128 * sum_p b[p][j]
 * with the column sums of each packed b block computed when it is packed (by VPDPBUSD with
 * au = 1) and subtracted by starting each accumulator at -128 * colsum[j]. VPDPBUSD adds with
 * wrap-around (no saturation: that is VPDPBUSDS), and so does everything else here, so the
 * result is exact modulo 2^32; the true sum fits in int32 (kernels.h: at most
 * MXP__QMM_K32_MAX products per sum), hence it is exact. (The four products of one step,
 * 255 * -128 * 4 at worst, never overflow the instruction's intermediate.)
 * b panels: 32 columns, per group of 4 k rows (k padded with zero rows) 16 columns x 4 bytes
 * twice (128 bytes); the block starts with its column sums (int32, padded to 32 columns).
 * VNNI code is compiled for that extension per function (target attribute), so the AVX-512BW
 * variant can never contain a VNNI instruction.
 *
 * Testing: tests/test_qmatmul.c checks both variants against the reference and the scalar
 * table bit for bit; on a CPU without AVX-512 (the development and CI machines) through the
 * emulated build (tests/emu/qmatmul_avx512_emu.c, test_qmatmul_emu512), which runs this file
 * on portable intrinsics (SIMDe; VPDPBUSD written from Intel's description in avx512_emu.h).
 */
#ifdef MXP_AVX512_EMULATED /* test builds: portable AVX-512 (tests/emu/avx512_emu.h) */
#include "avx512_emu.h"
#define VNNI_FN static
#else
#include <immintrin.h>
#define VNNI_FN static __attribute__((target("avx512vnni")))
#endif
#include <string.h>

#include "kernels.h"

#define MR 8
#define NR 32
#define PRIM static inline __attribute__((always_inline))

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

PRIM int32_t ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* c[r][0..32) (+)= the tile; mr x nr of it is stored */
PRIM void store_tile(int32_t *c, size_t ldc, __m512i acc[MR][2], size_t mr, size_t nr, bool first)
{
    if (mr == MR && nr == NR) {
        for (int r = 0; r < MR; r++) {
            int32_t *p0 = c + r * ldc, *p1 = c + r * ldc + 16;
            if (first) {
                _mm512_storeu_si512(p0, acc[r][0]);
                _mm512_storeu_si512(p1, acc[r][1]);
            } else {
                _mm512_storeu_si512(p0, _mm512_add_epi32(_mm512_loadu_si512(p0), acc[r][0]));
                _mm512_storeu_si512(p1, _mm512_add_epi32(_mm512_loadu_si512(p1), acc[r][1]));
            }
        }
        return;
    }
    int32_t t[MR][NR];
    for (int r = 0; r < MR; r++) {
        _mm512_storeu_si512(t[r], acc[r][0]);
        _mm512_storeu_si512(t[r] + 16, acc[r][1]);
    }
    for (size_t r = 0; r < mr; r++)
        for (size_t j = 0; j < nr; j++)
            c[r * ldc + j] = (int32_t)((first ? 0u : (uint32_t)c[r * ldc + j]) + (uint32_t)t[r][j]);
}

/* ---- avx512bw: VPMADDWD ------------------------------------------------------------------- */

static size_t pairs(size_t kc) { return (kc + 1) / 2; }
static size_t bw_b_size(size_t kc, size_t nc) { return round_up(nc, NR) / NR * pairs(kc) * NR * 4; }
static size_t bw_a_size(size_t mc, size_t kc) { return round_up(mc, MR) * pairs(kc) * 4; }

/* 16 columns of rows 2p, 2p + 1 (x1 zero past kc) as 16 int32 pairs: 64 bytes at d */
PRIM void pair16(unsigned char *d, __m128i x0, __m128i x1)
{
    _mm256_store_si256((__m256i *)(void *)d, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x0, x1)));
    _mm256_store_si256((__m256i *)(void *)(d + 32), _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x0, x1)));
}

static void bw_pack_b(void *dst, const int8_t *b, size_t ldb, size_t kc, size_t nc)
{
    const size_t P = pairs(kc);
    unsigned char *d = dst;
    size_t j0 = 0;
    for (; j0 + NR <= nc; j0 += NR)
        for (size_t p = 0; p < P; p++, d += NR * 4) {
            const int8_t *r0 = b + 2 * p * ldb + j0;
            const bool two = 2 * p + 1 < kc;
            for (int h = 0; h < 2; h++) {
                const __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(r0 + 16 * h));
                const __m128i x1 = two ? _mm_loadu_si128((const __m128i *)(const void *)(r0 + ldb + 16 * h))
                                       : _mm_setzero_si128();
                pair16(d + 64 * h, x0, x1);
            }
        }
    if (j0 < nc) {
        const size_t w = nc - j0;
        int16_t *e = (int16_t *)(void *)d;
        for (size_t p = 0; p < P; p++, e += 2 * NR)
            for (size_t j = 0; j < NR; j++) {
                e[2 * j] = j < w ? b[2 * p * ldb + j0 + j] : 0;
                e[2 * j + 1] = j < w && 2 * p + 1 < kc ? b[(2 * p + 1) * ldb + j0 + j] : 0;
            }
    }
}

static void bw_pack_a(void *dst, const int8_t *a, size_t lda, size_t mc, size_t kc)
{
    const size_t len = 2 * pairs(kc), rows = round_up(mc, MR);
    int16_t *d = dst;
    for (size_t i = 0; i < rows; i++, d += len) {
        size_t p = 0;
        if (i < mc) {
            const int8_t *r = a + i * lda;
            for (; p + 16 <= kc; p += 16)
                _mm256_storeu_si256((__m256i *)(void *)(d + p),
                                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(r + p))));
            for (; p < kc; p++) d[p] = r[p];
        }
        for (; p < len; p++) d[p] = 0;
    }
}

/* 8 x 32 tile over P pairs, two pairs per iteration (as qmatmul_avx2.c) */
static void bw_ukernel(int32_t *c, size_t ldc, const unsigned char *ap, size_t astride,
                       const unsigned char *bp, size_t P, size_t mr, size_t nr, bool first)
{
    __m512i acc[MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    size_t p = 0;
    for (; p + 2 <= P; p += 2, ap += 8, bp += 256) {
        const __m512i b0 = _mm512_load_si512(bp), b1 = _mm512_load_si512(bp + 64);
        const __m512i b2 = _mm512_load_si512(bp + 128), b3 = _mm512_load_si512(bp + 192);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            const __m512i x = _mm512_set1_epi32(ld32(ap + r * astride));
            const __m512i y = _mm512_set1_epi32(ld32(ap + r * astride + 4));
            acc[r][0] = _mm512_add_epi32(acc[r][0], _mm512_add_epi32(_mm512_madd_epi16(x, b0), _mm512_madd_epi16(y, b2)));
            acc[r][1] = _mm512_add_epi32(acc[r][1], _mm512_add_epi32(_mm512_madd_epi16(x, b1), _mm512_madd_epi16(y, b3)));
        }
    }
    if (p < P) {
        const __m512i b0 = _mm512_load_si512(bp), b1 = _mm512_load_si512(bp + 64);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            const __m512i x = _mm512_set1_epi32(ld32(ap + r * astride));
            acc[r][0] = _mm512_add_epi32(acc[r][0], _mm512_madd_epi16(x, b0));
            acc[r][1] = _mm512_add_epi32(acc[r][1], _mm512_madd_epi16(x, b1));
        }
    }
    store_tile(c, ldc, acc, mr, nr, first);
}

static void bw_block(int32_t *c, size_t ldc, const void *ap, const void *bp, size_t mc, size_t kc,
                     size_t nc, bool first)
{
    const size_t P = pairs(kc), astride = 4 * P, panel = P * NR * 4;
    for (size_t j0 = 0, q = 0; j0 < nc; j0 += NR, q++) {
        const size_t nr = nc - j0 < NR ? nc - j0 : NR;
        const unsigned char *bq = (const unsigned char *)bp + q * panel;
        for (size_t i0 = 0; i0 < mc; i0 += MR) {
            const size_t mr = mc - i0 < MR ? mc - i0 : MR;
            bw_ukernel(c + i0 * ldc + j0, ldc, (const unsigned char *)ap + i0 * astride, astride,
                       bq, P, mr, nr, first);
        }
    }
}

/* ---- avx512vnni: VPDPBUSD with the +128 bias ---------------------------------------------- */

static size_t quads(size_t kc) { return (kc + 3) / 4; }
static size_t vnni_b_size(size_t kc, size_t nc)
{
    const size_t ncp = round_up(nc, NR);
    return ncp * 4 + ncp / NR * quads(kc) * NR * 4;
}
static size_t vnni_a_size(size_t mc, size_t kc) { return round_up(mc, MR) * quads(kc) * 4; }

/* 16 columns of 4 rows (zero rows past kc) as 16 groups of 4 bytes: 64 bytes at d */
PRIM void quad16(unsigned char *d, __m128i x0, __m128i x1, __m128i x2, __m128i x3)
{
    const __m128i lo01 = _mm_unpacklo_epi8(x0, x1), hi01 = _mm_unpackhi_epi8(x0, x1);
    const __m128i lo23 = _mm_unpacklo_epi8(x2, x3), hi23 = _mm_unpackhi_epi8(x2, x3);
    _mm_store_si128((__m128i *)(void *)d, _mm_unpacklo_epi16(lo01, lo23));        /* columns 0-3 */
    _mm_store_si128((__m128i *)(void *)(d + 16), _mm_unpackhi_epi16(lo01, lo23)); /* 4-7 */
    _mm_store_si128((__m128i *)(void *)(d + 32), _mm_unpacklo_epi16(hi01, hi23)); /* 8-11 */
    _mm_store_si128((__m128i *)(void *)(d + 48), _mm_unpackhi_epi16(hi01, hi23)); /* 12-15 */
}

VNNI_FN void vnni_pack_b(void *dst, const int8_t *b, size_t ldb, size_t kc, size_t nc)
{
    const size_t Q = quads(kc), ncp = round_up(nc, NR);
    int32_t *colsum = dst;
    unsigned char *panels = (unsigned char *)dst + ncp * 4;
    unsigned char *d = panels;
    size_t j0 = 0;
    for (; j0 + NR <= nc; j0 += NR)
        for (size_t q = 0; q < Q; q++, d += NR * 4)
            for (int h = 0; h < 2; h++) {
                __m128i x[4];
                for (size_t i = 0; i < 4; i++)
                    x[i] = 4 * q + i < kc
                               ? _mm_loadu_si128((const __m128i *)(const void *)(b + (4 * q + i) * ldb + j0 + 16 * h))
                               : _mm_setzero_si128();
                quad16(d + 64 * h, x[0], x[1], x[2], x[3]);
            }
    if (j0 < nc) { /* last panel: fewer columns, zero-padded */
        const size_t w = nc - j0;
        for (size_t q = 0; q < Q; q++, d += NR * 4)
            for (size_t j = 0; j < NR; j++) /* byte 4 * (j % 16) + i of half j / 16 */
                for (size_t i = 0; i < 4; i++)
                    d[64 * (j / 16) + 4 * (j % 16) + i] =
                        (unsigned char)(j < w && 4 * q + i < kc ? b[(4 * q + i) * ldb + j0 + j] : 0);
    }
    /* column sums, exact: VPDPBUSD of all-ones bytes with each group of 4 signed bytes */
    const __m512i ones = _mm512_set1_epi8(1);
    for (size_t p = 0; p < ncp / NR; p++) {
        const unsigned char *e = panels + p * Q * NR * 4;
        __m512i s0 = _mm512_setzero_si512(), s1 = s0;
        for (size_t q = 0; q < Q; q++, e += NR * 4) {
            s0 = _mm512_dpbusd_epi32(s0, ones, _mm512_load_si512(e));
            s1 = _mm512_dpbusd_epi32(s1, ones, _mm512_load_si512(e + 64));
        }
        _mm512_store_si512(colsum + p * NR, s0);
        _mm512_store_si512(colsum + p * NR + 16, s1);
    }
}

static void vnni_pack_a(void *dst, const int8_t *a, size_t lda, size_t mc, size_t kc)
{
    const size_t len = 4 * quads(kc), rows = round_up(mc, MR);
    unsigned char *d = dst;
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    for (size_t i = 0; i < rows; i++, d += len) {
        size_t p = 0;
        if (i < mc) {
            const int8_t *r = a + i * lda;
            for (; p + 32 <= kc; p += 32)
                _mm256_storeu_si256((__m256i *)(void *)(d + p),
                                    _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(r + p)), bias));
            for (; p < kc; p++) d[p] = (unsigned char)((unsigned char)r[p] ^ 0x80u);
        }
        for (; p < len; p++) d[p] = 0x80; /* a = 0 (b is zero there anyway) */
    }
}

VNNI_FN void vnni_ukernel(int32_t *c, size_t ldc, const unsigned char *ap, size_t astride,
                          const unsigned char *bp, const int32_t *colsum, size_t Q, size_t mr,
                          size_t nr, bool first)
{
    /* -128 * colsum: the accumulators' start (wrap-around arithmetic throughout) */
    const __m512i z = _mm512_setzero_si512();
    const __m512i k0 = _mm512_sub_epi32(z, _mm512_slli_epi32(_mm512_load_si512(colsum), 7));
    const __m512i k1 = _mm512_sub_epi32(z, _mm512_slli_epi32(_mm512_load_si512(colsum + 16), 7));
    __m512i acc[MR][2];
    for (int r = 0; r < MR; r++) {
        acc[r][0] = k0;
        acc[r][1] = k1;
    }
    for (size_t q = 0; q < Q; q++, ap += 4, bp += 128) {
        const __m512i b0 = _mm512_load_si512(bp), b1 = _mm512_load_si512(bp + 64);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            const __m512i x = _mm512_set1_epi32(ld32(ap + r * astride));
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], x, b0);
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], x, b1);
        }
    }
    store_tile(c, ldc, acc, mr, nr, first);
}

static void vnni_block(int32_t *c, size_t ldc, const void *ap, const void *bp, size_t mc,
                       size_t kc, size_t nc, bool first)
{
    const size_t Q = quads(kc), astride = 4 * Q, panel = Q * NR * 4, ncp = round_up(nc, NR);
    const int32_t *colsum = bp;
    const unsigned char *panels = (const unsigned char *)bp + ncp * 4;
    for (size_t j0 = 0, q = 0; j0 < nc; j0 += NR, q++) {
        const size_t nr = nc - j0 < NR ? nc - j0 : NR;
        for (size_t i0 = 0; i0 < mc; i0 += MR) {
            const size_t mr = mc - i0 < MR ? mc - i0 : MR;
            vnni_ukernel(c + i0 * ldc + j0, ldc, (const unsigned char *)ap + i0 * astride, astride,
                         panels + q * panel, colsum + j0, Q, mr, nr, first);
        }
    }
}

/* ---- rows() with VNNI: small m, a and b read in place ---------------------------------------
 *
 * For one row of a, as qmatmul_avx2.c's rows() (b walked in passes of a few rows over all
 * columns), with VPDPBUSD: per pass, for each 64-column strip, 4 rows of b (one
 * quad of k) are loaded as 64 bytes each, biased to unsigned (b ^ 0x80 = b + 128) and
 * interleaved (VPUNPCK*BW, then *WD) into 4 vectors whose dword lanes hold the quad of one
 * column; a's quad is broadcast (signed bytes), so
 *     sum_p a[p] * (b[p][j] + 128) = sum_p a[p] * b[p][j] + 128 * sum_p a[p]
 * and each accumulator starts at -128 * sum_p a[p] (the k values of the block). Wrap-around
 * arithmetic, exact because the true sum fits (kernels.h). Accumulator lane order: vector i,
 * 128-bit lane L, dword d = column 16L + 4i + d of the strip; a 4 x 4 transpose of 128-bit
 * blocks (t4x4) gives column order. Between passes the strip's sums stay in c in accumulator
 * order (only the call's first pass reads c in column order, only its last writes it).
 * Padding: k rows past kc load as zero (then 0x80), against a's zero bytes.
 */
#define VRK 512 /* k values per block of a's quads */
/* Quads per pass: 2 (8 rows of b): the pass is bound by reading b and 8 streams suit the hardware
 * prefetchers. Zen 4, k = n = 4096, m = 1, ms: 0.93-0.99 (2 quads), 1.10-1.59 (4), 2.2 (64).
 * (Each b line is loaded once per strip, as 64 bytes, so the 4 KiB L1 aliasing of the AVX2
 * rows() does not apply.) One row of a only: for 2..4 rows (all quads of the call per pass, so
 * that the accumulators are not reloaded per pass) the time of one process was 1.26-1.6 ms at
 * m = 4 but 3.8-4.0 ms in about one process of five, against a steady 1.81-1.94 for the AVX2
 * rows(); m >= 2 keeps the AVX2 rows(). */
#define VRQ 2

PRIM void t4x4(__m512i x[4])
{
    const __m512i a = _mm512_shuffle_i32x4(x[0], x[1], 0x44), b = _mm512_shuffle_i32x4(x[2], x[3], 0x44),
                  c = _mm512_shuffle_i32x4(x[0], x[1], 0xEE), d = _mm512_shuffle_i32x4(x[2], x[3], 0xEE);
    x[0] = _mm512_shuffle_i32x4(a, b, 0x88);
    x[1] = _mm512_shuffle_i32x4(a, b, 0xDD);
    x[2] = _mm512_shuffle_i32x4(c, d, 0x88);
    x[3] = _mm512_shuffle_i32x4(c, d, 0xDD);
}

/* c[0..64) over quads [q0, q0 + nq); in: 0 = start from corr (first call), 1 = c in column
 * order plus corr, 2 = c in accumulator order; out_natural: store in column order. */
VNNI_FN void vrows_tile(int32_t *c, const int32_t *aq, int32_t corr, const int8_t *b, size_t ldb,
                        size_t q0, size_t nq, size_t kc, int in, bool out_natural)
{
    __m512i acc[4];
    for (int i = 0; i < 4; i++)
        acc[i] = in == 0 ? _mm512_setzero_si512() : _mm512_loadu_si512((const void *)(c + 16 * i));
    if (in == 1) t4x4(acc);
    if (in != 2)
        for (int i = 0; i < 4; i++) acc[i] = _mm512_add_epi32(acc[i], _mm512_set1_epi32(corr));
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (size_t q = q0; q < q0 + nq; q++) {
        __m512i x[4];
        for (size_t t = 0; t < 4; t++) {
            const size_t p = 4 * q + t;
            x[t] = _mm512_xor_si512(p < kc ? _mm512_loadu_si512((const void *)(b + p * ldb)) : _mm512_setzero_si512(), bias);
        }
        const __m512i t0 = _mm512_unpacklo_epi8(x[0], x[1]), t1 = _mm512_unpackhi_epi8(x[0], x[1]);
        const __m512i t2 = _mm512_unpacklo_epi8(x[2], x[3]), t3 = _mm512_unpackhi_epi8(x[2], x[3]);
        const __m512i u0 = _mm512_unpacklo_epi16(t0, t2), u1 = _mm512_unpackhi_epi16(t0, t2);
        const __m512i u2 = _mm512_unpacklo_epi16(t1, t3), u3 = _mm512_unpackhi_epi16(t1, t3);
        const __m512i av = _mm512_set1_epi32(aq[q]);
        acc[0] = _mm512_dpbusd_epi32(acc[0], u0, av);
        acc[1] = _mm512_dpbusd_epi32(acc[1], u1, av);
        acc[2] = _mm512_dpbusd_epi32(acc[2], u2, av);
        acc[3] = _mm512_dpbusd_epi32(acc[3], u3, av);
    }
    if (out_natural) t4x4(acc);
    for (int i = 0; i < 4; i++) _mm512_storeu_si512((void *)(c + 16 * i), acc[i]);
}

static void vnni_rows(int32_t *c, size_t ldc, const int8_t *a, size_t lda, const int8_t *b, size_t ldb,
                      size_t mc, size_t kc, size_t nc, bool first)
{
    if (mc != 1) { /* see VRQ */
        mxp__qmm_rows_avx2(c, ldc, a, lda, b, ldb, mc, kc, nc, first);
        return;
    }
    int32_t aq[VRK / 4];
    for (size_t k0 = 0; k0 < kc; k0 += VRK, first = false) {
        const size_t kl = kc - k0 < VRK ? kc - k0 : VRK;
        const int8_t *ar = a + k0;
        int32_t sum = 0;
        for (size_t q = 0; 4 * q < kl; q++) {
            uint32_t w = 0;
            for (size_t t = 0; t < 4; t++)
                if (4 * q + t < kl) w |= (uint32_t)(uint8_t)ar[4 * q + t] << (8 * t);
            memcpy(&aq[q], &w, sizeof w);
        }
        for (size_t p = 0; p < kl; p++) sum += ar[p];
        const int32_t corr = (int32_t)(0u - 128u * (uint32_t)sum); /* -128 * sum, wrapping */
        const int8_t *bk = b + k0 * ldb;
        const size_t Q = quads(kl), n64 = nc / 64 * 64;
        for (size_t q = 0; q < Q; q += VRQ) {
            const size_t nq = Q - q < VRQ ? Q - q : VRQ;
            const int in = q > 0 ? 2 : first ? 0 : 1;
            for (size_t j = 0; j < n64; j += 64) vrows_tile(c + j, aq, corr, bk + j, ldb, q, nq, kl, in, q + nq == Q);
        }
        for (size_t j0 = n64; j0 < nc; j0++) { /* last columns: exact int32 sums */
            int32_t s = first ? 0 : c[j0];
            for (size_t p = 0; p < kl; p++) s += (int32_t)ar[p] * bk[p * ldb + j0];
            c[j0] = s;
        }
    }
    (void)ldc;
}

void mxp__qmm_register_avx512(mxp__kernels *k, bool vnni)
{
    mxp__qmm_register_avx2(k); /* rows() and the descale; block sizes as AVX2's */
    mxp__qmm_ops *o = &k->qmm;
    o->mc = 128;
    if (vnni) {
        o->name = "avx512vnni";
        o->b_size = vnni_b_size;
        o->a_size = vnni_a_size;
        o->pack_b = vnni_pack_b;
        o->pack_a = vnni_pack_a;
        o->block = vnni_block;
        o->rows = vnni_rows;
    } else {
        o->name = "avx512bw";
        o->b_size = bw_b_size;
        o->a_size = bw_a_size;
        o->pack_b = bw_pack_b;
        o->pack_a = bw_pack_a;
        o->block = bw_block;
    }
}
