/*
 * qmatmul_avx2.c - int8 matmul kernels for AVX2 (kernels.h, mxp__qmm_ops).
 *
 * The exact product: VPMADDWD. Both operands are widened to int16 (sign extension, exact), and
 * VPMADDWD multiplies int16 pairs and adds each pair into an int32 lane:
 *     lane t = a[2p] * b[2p][j] + a[2p + 1] * b[2p + 1][j]      (|lane| <= 2 * 2^14 = 2^15)
 * with a = (a[2p], a[2p + 1]) broadcast to every 32-bit lane and b holding, for 8 columns j,
 * the pair (b[2p][j], b[2p + 1][j]). VPADDD accumulates in int32: qmatmul.c never asks for more
 * than MXP__QMM_K32_MAX products per sum, so no lane can wrap. (VPMADDUBSW would do twice the
 * work per instruction but saturates at int16: 2 * 255 * 128 > 32767, not exact.)
 *
 * Packed b (a kc x nc block): panels of 16 columns, zero-padded; in a panel, for each pair of k
 * rows p (kc rounded up to even, the padding row zero) 16 int32 words (b[2p][j], b[2p+1][j]):
 *     panel q, pair p:  | c0 c0' c1 c1' ... c7 c7' | c8 c8' ... c15 c15' |   (x' = row 2p+1)
 *                       '------- ymm 0 -----------' '------ ymm 1 -------'
 * Packed a (an mc x kc block): rows sign-extended to int16, each 2 * P values long (P pairs,
 * zero-padded), rows padded to a multiple of 6 with zeros; the micro-kernel broadcasts one
 * 32-bit pair per row.
 *
 * Micro-kernel: 6 rows x 16 columns = 12 ymm accumulators + 2 b vectors + 1 broadcast; per pair
 * 12 VPMADDWD + 12 VPADDD for 192 multiply-adds. On Zen 3 VPMADDWD issues on two pipes and
 * VPADDD on the other two, so the loop can sustain 32 int8 multiply-adds per cycle, twice the
 * 16 of float32 FMA (the sgemm it is compared with in bench/bench_qmatmul.c).
 *
 * rows() (small m: nothing packed): for each pair of b rows, 16 bytes of each are interleaved
 * (VPUNPCKLBW / VPUNPCKHBW) and sign-extended (VPMOVSXBW) into the same pair layout, then used
 * for up to 4 rows of a whose pairs were widened into a small stack buffer.
 * The descale is 8 lanes of the scalar formula: VCVTDQ2PS (one rounding), VMULPS, VDIVPS.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

#define MR 6
#define NR 16
#define PRIM static inline __attribute__((always_inline))

static size_t pairs(size_t kc) { return (kc + 1) / 2; }
static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static size_t b_size(size_t kc, size_t nc) { return (nc + NR - 1) / NR * pairs(kc) * NR * 4; }
static size_t a_size(size_t mc, size_t kc) { return round_up(mc, MR) * pairs(kc) * 4; }

static void pack_b(void *dst, const int8_t *b, size_t ldb, size_t kc, size_t nc)
{
    const size_t P = pairs(kc), panel = P * NR * 4;
    unsigned char *d = dst;
    size_t j0 = 0;
    /* Four panels per pass over the rows: each pair of rows is read as 64-byte lines (one
     * panel at a time read 16 bytes of every line and came back for the rest after the rows
     * had left L1) and written to four panels. */
    for (; j0 + 4 * NR <= nc; j0 += 4 * NR, d += 4 * panel) {
        for (size_t p = 0; p < P; p++) {
            const int8_t *r0 = b + 2 * p * ldb + j0;
            const bool two = 2 * p + 1 < kc;
            for (int t = 0; t < 4; t++) {
                const __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(r0 + t * NR));
                const __m128i x1 = two ? _mm_loadu_si128((const __m128i *)(const void *)(r0 + ldb + t * NR))
                                       : _mm_setzero_si128();
                unsigned char *o = d + t * panel + p * NR * 4;
                _mm256_store_si256((__m256i *)(void *)o, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x0, x1)));
                _mm256_store_si256((__m256i *)(void *)(o + 32), _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x0, x1)));
            }
        }
    }
    for (; j0 + NR <= nc; j0 += NR) {
        for (size_t p = 0; p < P; p++) {
            const int8_t *r0 = b + 2 * p * ldb + j0;
            const __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)r0);
            const __m128i x1 = 2 * p + 1 < kc
                                   ? _mm_loadu_si128((const __m128i *)(const void *)(r0 + ldb))
                                   : _mm_setzero_si128();
            _mm256_store_si256((__m256i *)(void *)d, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x0, x1)));
            _mm256_store_si256((__m256i *)(void *)(d + 32),
                               _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x0, x1)));
            d += NR * 4;
        }
    }
    if (j0 < nc) { /* last panel: fewer columns, zero-padded */
        const size_t w = nc - j0;
        int16_t *e = (int16_t *)(void *)d;
        for (size_t p = 0; p < P; p++, e += 2 * NR)
            for (size_t j = 0; j < NR; j++) {
                e[2 * j] = j < w ? b[2 * p * ldb + j0 + j] : 0;
                e[2 * j + 1] = j < w && 2 * p + 1 < kc ? b[(2 * p + 1) * ldb + j0 + j] : 0;
            }
    }
}

static void pack_a(void *dst, const int8_t *a, size_t lda, size_t mc, size_t kc)
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

PRIM int32_t ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* c[r][0..16) (+)= the 6 x 16 tile; mr x nr of it is stored. */
PRIM void store_tile(int32_t *c, size_t ldc, __m256i acc[MR][2], size_t mr, size_t nr, bool first)
{
    if (mr == MR && nr == NR) {
        for (int r = 0; r < MR; r++) {
            __m256i *p0 = (__m256i *)(void *)(c + r * ldc), *p1 = (__m256i *)(void *)(c + r * ldc + 8);
            if (first) {
                _mm256_storeu_si256(p0, acc[r][0]);
                _mm256_storeu_si256(p1, acc[r][1]);
            } else {
                _mm256_storeu_si256(p0, _mm256_add_epi32(_mm256_loadu_si256(p0), acc[r][0]));
                _mm256_storeu_si256(p1, _mm256_add_epi32(_mm256_loadu_si256(p1), acc[r][1]));
            }
        }
        return;
    }
    int32_t t[MR][NR];
    for (int r = 0; r < MR; r++) {
        _mm256_storeu_si256((__m256i *)(void *)t[r], acc[r][0]);
        _mm256_storeu_si256((__m256i *)(void *)(t[r] + 8), acc[r][1]);
    }
    for (size_t r = 0; r < mr; r++)
        for (size_t j = 0; j < nr; j++) c[r * ldc + j] = (first ? 0 : c[r * ldc + j]) + t[r][j];
}

/* 6 x 16 tile over P pairs: a rows at ap + r * astride bytes, b panel at bp (aligned). The
 * 12 accumulators are named variables (an array passed on made gcc keep them in memory); two
 * pairs per iteration, their two products summed before the accumulator (measured on Zen 3:
 * 55-63 multiply-adds per ns in L1, against 44 for one pair per iteration). */
static void ukernel(int32_t *c, size_t ldc, const unsigned char *ap, size_t astride,
                    const unsigned char *bp, size_t P, size_t mr, size_t nr, bool first)
{
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const unsigned char *a0 = ap, *a3 = ap + 3 * astride;
    const size_t s1 = astride, s2 = 2 * astride;
    size_t p = 0;
    for (; p + 2 <= P; p += 2, a0 += 8, a3 += 8, bp += 128) {
        const __m256i b0 = _mm256_load_si256((const __m256i *)(const void *)bp);
        const __m256i b1 = _mm256_load_si256((const __m256i *)(const void *)(bp + 32));
        const __m256i b2 = _mm256_load_si256((const __m256i *)(const void *)(bp + 64));
        const __m256i b3 = _mm256_load_si256((const __m256i *)(const void *)(bp + 96));
        __m256i x, y;
#define QMM_ROW2(ca, cb, ar)                                                                   \
        x = _mm256_set1_epi32(ld32(ar));                                                       \
        y = _mm256_set1_epi32(ld32(ar + 4));                                                   \
        ca = _mm256_add_epi32(ca, _mm256_add_epi32(_mm256_madd_epi16(x, b0), _mm256_madd_epi16(y, b2))); \
        cb = _mm256_add_epi32(cb, _mm256_add_epi32(_mm256_madd_epi16(x, b1), _mm256_madd_epi16(y, b3)))
        QMM_ROW2(c00, c01, a0);
        QMM_ROW2(c10, c11, a0 + s1);
        QMM_ROW2(c20, c21, a0 + s2);
        QMM_ROW2(c30, c31, a3);
        QMM_ROW2(c40, c41, a3 + s1);
        QMM_ROW2(c50, c51, a3 + s2);
#undef QMM_ROW2
    }
    if (p < P) { /* odd number of pairs: the last one */
        const __m256i b0 = _mm256_load_si256((const __m256i *)(const void *)bp);
        const __m256i b1 = _mm256_load_si256((const __m256i *)(const void *)(bp + 32));
        __m256i x;
#define QMM_ROW(ca, cb, ar)                                                     \
        x = _mm256_set1_epi32(ld32(ar));                                        \
        ca = _mm256_add_epi32(ca, _mm256_madd_epi16(x, b0));                    \
        cb = _mm256_add_epi32(cb, _mm256_madd_epi16(x, b1))
        QMM_ROW(c00, c01, a0);
        QMM_ROW(c10, c11, a0 + s1);
        QMM_ROW(c20, c21, a0 + s2);
        QMM_ROW(c30, c31, a3);
        QMM_ROW(c40, c41, a3 + s1);
        QMM_ROW(c50, c51, a3 + s2);
#undef QMM_ROW
    }
    __m256i acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    store_tile(c, ldc, acc, mr, nr, first);
}

static void block(int32_t *c, size_t ldc, const void *ap, const void *bp, size_t mc, size_t kc,
                  size_t nc, bool first)
{
    const size_t P = pairs(kc), astride = 4 * P, panel = P * NR * 4;
    for (size_t j0 = 0, q = 0; j0 < nc; j0 += NR, q++) {
        const size_t nr = nc - j0 < NR ? nc - j0 : NR;
        const unsigned char *bq = (const unsigned char *)bp + q * panel;
        for (size_t i0 = 0; i0 < mc; i0 += MR) {
            const size_t mr = mc - i0 < MR ? mc - i0 : MR;
            ukernel(c + i0 * ldc + j0, ldc, (const unsigned char *)ap + i0 * astride, astride, bq,
                    P, mr, nr, first);
        }
    }
}

/* ---- rows(): small m, a and b read in place ----------------------------------------------- */

#define RK 512 /* k values per pass of rows_group (its stack buffer of a pairs) */
#define RR 4   /* rows per group */
/* Pairs of b rows per pass over the columns: 4, i.e. 8 rows. Rows of a power-of-two length
 * (4096 bytes: a 4096-column int8 matrix) map to one L1 set, which holds 8 lines on Zen 3 and
 * Zen 4; with 16 rows in flight (RP 8, the value until 2026-11-24) each line was evicted before
 * its four 16-column tiles had used it. Zen 4, bench_qmatmul --all, k = n = 4096, float32 out:
 * m = 1 1.66-1.70 ms with RP 8, 1.39-1.41 with 2, 1.14-1.15 with 3, 1.08-1.14 with 4, 1.21-1.22
 * with 5, 1.26-1.30 with 6; m = 4 2.61-2.72 / 1.87-1.94 (RP 4) / 1.87-1.89 (RP 5). Not
 * re-measured on Zen 3. */
#ifndef RP
#define RP 4
#endif

/* c[r][0..16) (+)= sum over pairs [p, p + np) for rows r < R; b at column 0 of the tile. */
PRIM void rows_tile(int32_t *c, size_t ldc, int32_t (*ap)[RK / 2], const int8_t *b, size_t ldb,
                    int R, size_t p, size_t np, size_t kc, bool zero)
{
    __m256i c0a, c0b, c1a = _mm256_setzero_si256(), c1b = c1a, c2a = c1a, c2b = c1a, c3a = c1a,
                      c3b = c1a;
#define QMM_LD(r, ca, cb)                                                                   \
    if (R > r) {                                                                            \
        ca = zero ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *)(const void *)(c + r * ldc)); \
        cb = zero ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *)(const void *)(c + r * ldc + 8)); \
    }
    c0a = c0b = _mm256_setzero_si256();
    QMM_LD(0, c0a, c0b)
    QMM_LD(1, c1a, c1b)
    QMM_LD(2, c2a, c2b)
    QMM_LD(3, c3a, c3b)
#undef QMM_LD
    for (size_t q = p; q < p + np; q++) {
        const int8_t *r0 = b + 2 * q * ldb;
        const __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)r0);
        const __m128i x1 = 2 * q + 1 < kc ? _mm_loadu_si128((const __m128i *)(const void *)(r0 + ldb))
                                          : _mm_setzero_si128();
        const __m256i lo = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x0, x1));
        const __m256i hi = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x0, x1));
        __m256i x;
#define QMM_ROW(r, ca, cb)                                              \
        if (R > r) {                                                    \
            x = _mm256_set1_epi32(ap[r][q]);                            \
            ca = _mm256_add_epi32(ca, _mm256_madd_epi16(x, lo));        \
            cb = _mm256_add_epi32(cb, _mm256_madd_epi16(x, hi));        \
        }
        QMM_ROW(0, c0a, c0b)
        QMM_ROW(1, c1a, c1b)
        QMM_ROW(2, c2a, c2b)
        QMM_ROW(3, c3a, c3b)
#undef QMM_ROW
    }
#define QMM_ST(r, ca, cb)                                                       \
    if (R > r) {                                                                \
        _mm256_storeu_si256((__m256i *)(void *)(c + r * ldc), ca);              \
        _mm256_storeu_si256((__m256i *)(void *)(c + r * ldc + 8), cb);          \
    }
    QMM_ST(0, c0a, c0b)
    QMM_ST(1, c1a, c1b)
    QMM_ST(2, c2a, c2b)
    QMM_ST(3, c3a, c3b)
#undef QMM_ST
}

/*
 * R rows (R <= RR) of c, columns [0, nc), k < kc <= RK; pairs of a in ap[r][p]. b is walked in
 * strips of 64 columns (one cache line of each row) and, within a strip, 4 pairs (8 rows) at a
 * time for each of its 16-column tiles: each line of b is loaded once and used up while in L1
 * (walking a 16-column tile down all kc rows would revisit every line four times, and rows
 * 4 KiB apart share an L1 set, so the lines would be gone).
 */
PRIM void rows_group(int32_t *c, size_t ldc, int32_t (*ap)[RK / 2], const int8_t *b, size_t ldb,
                     int R, size_t kc, size_t nc, bool first)
{
    const size_t P = pairs(kc), Pfull = kc / 2, n16 = nc / 16 * 16;
    for (size_t p = 0; p < P; p += RP) {
        const size_t np = P - p < RP ? P - p : RP;
        for (size_t j = 0; j < n16; j += 16)
            rows_tile(c + j, ldc, ap, b + j, ldb, R, p, np, kc, first && p == 0);
    }
    for (size_t j0 = n16; j0 < nc; j0++) /* last columns: exact int32 sums, pair by pair */
        for (int r = 0; r < R; r++) {
            int32_t s = first ? 0 : c[r * ldc + j0];
            for (size_t p = 0; p < P; p++) {
                const int32_t w = ap[r][p];
                const int32_t lo16 = (int16_t)(uint16_t)((uint32_t)w & 0xFFFFu);
                const int32_t hi16 = (int16_t)(uint16_t)((uint32_t)w >> 16);
                s += lo16 * b[2 * p * ldb + j0] + (p < Pfull ? hi16 * b[(2 * p + 1) * ldb + j0] : 0);
            }
            c[r * ldc + j0] = s;
        }
}

void mxp__qmm_rows_avx2(int32_t *c, size_t ldc, const int8_t *a, size_t lda, const int8_t *b,
                        size_t ldb, size_t mc, size_t kc, size_t nc, bool first)
{
    int32_t ap[RR][RK / 2];
    for (size_t k0 = 0; k0 < kc; k0 += RK, first = false) {
        const size_t kl = kc - k0 < RK ? kc - k0 : RK;
        for (size_t i0 = 0; i0 < mc; i0 += RR) {
            const int R = mc - i0 < RR ? (int)(mc - i0) : RR;
            for (int r = 0; r < R; r++) {
                const int8_t *ar = a + (i0 + (size_t)r) * lda + k0;
                for (size_t p = 0; 2 * p < kl; p++) {
                    const uint32_t lo = (uint16_t)(int16_t)ar[2 * p];
                    const uint32_t hi = 2 * p + 1 < kl ? (uint16_t)(int16_t)ar[2 * p + 1] : 0u;
                    const uint32_t w = lo | hi << 16;
                    memcpy(&ap[r][p], &w, sizeof w);
                }
            }
            int32_t *ci = c + i0 * ldc;
            const int8_t *bk = b + k0 * ldb;
            switch (R) {
            case 4: rows_group(ci, ldc, ap, bk, ldb, 4, kl, nc, first); break;
            case 3: rows_group(ci, ldc, ap, bk, ldb, 3, kl, nc, first); break;
            case 2: rows_group(ci, ldc, ap, bk, ldb, 2, kl, nc, first); break;
            default: rows_group(ci, ldc, ap, bk, ldb, 1, kl, nc, first); break;
            }
        }
    }
}

static void descale(void *y, const int32_t *acc, size_t n, float sa, const float *sb)
{
    const __m256 va = _mm256_set1_ps(sa);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 f = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(const void *)(acc + j)));
        const __m256 d = _mm256_mul_ps(va, _mm256_loadu_ps(sb + j));
        _mm256_storeu_ps((float *)(void *)((char *)y + 4 * j), _mm256_div_ps(f, d));
    }
    if (j < n) mxp__scalar_kernels()->qmm.descale((char *)y + 4 * j, acc + j, n - j, sa, sb + j);
}

void mxp__qmm_register_avx2(mxp__kernels *k)
{
    mxp__qmm_ops *o = &k->qmm;
    o->name = "avx2";
    o->kc = 512; /* bench_qmatmul on Zen 3: 256..768 and nc 256..1024 within noise */
    o->mc = 96;
    o->nc = 512;
    o->rows_max_m = 8; /* m x 4096 x 4096 on Zen 3: m = 8 6.6 ms in place, 10.1 ms packed; m = 16 packed */
    o->rows_kc = 256;
    o->rows_nc = 4096;
    o->b_size = b_size;
    o->a_size = a_size;
    o->pack_b = pack_b;
    o->pack_a = pack_a;
    o->block = block;
    o->rows = mxp__qmm_rows_avx2;
    o->descale = descale;
}
