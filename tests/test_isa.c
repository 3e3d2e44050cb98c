/*
 * test_isa.c - every SIMD kernel table (AVX2, AVX-512, NEON: whichever this CPU has) against the
 * scalar reference, bit for bit (quick; the exhaustive sweep is test_isa_exhaustive.c).
 *
 * For every conversion pair an ISA accelerates (its entry differs from the scalar one), both
 * rounding modes and both overflow modes: sizes 0..1000 at unaligned source and destination
 * addresses (byte offsets 1..3, so 2- and 4-byte elements are misaligned too), inputs dense with
 * special values (NaN, inf, zeros, subnormals, halfway cases, max-finite neighbours) so that
 * every tail position meets them, stochastic-rounding index0 values near and across 2^32, guard
 * bytes after the output, and FTZ/DAZ set in MXCSR. An ISA this CPU lacks is reported as
 * skipped. Dispatch: MIXPREC_ISA is honoured with fallback (checked in forked children).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#if defined(__x86_64__) && !defined(MXP_EMU512)
#include <cpuid.h>
#endif

#include "internal.h"
#include "kernels.h"
#include "mixprec.h"
#include "test_util.h"
#include "bochs/f16c_ties.h"

#define MAXN 1000
#define OFFS 3 /* byte offsets tried: 1, 2, 3 */
#define GUARD 64

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint32_t rnd32(void) { return (uint32_t)tu_rand64(&rng_state); }

/* Float32 bit patterns worth planting: boundaries of every target format. */
static const uint32_t specials32[] = {
    0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u,
    0xFF800001u, 0x7FBFFFFFu, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F802000u, 0x7F801FFFu, 0x00000001u,
    0x80000001u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu,
    0x7F7F0000u, 0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0xC77FF000u, 0x47800000u,
    0x387FFFFFu, 0x38800000u, 0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x33800000u, 0x33C00000u,
    0x43E00000u, 0x43E80000u, 0x43E7FFFFu, 0x43E80001u, 0x43F00000u, 0xC3E80000u, 0x43F80000u,
    0x3A800000u, 0x3B000000u, 0x3B100000u, 0x3A000000u, 0x3A000001u, 0x477FFFFFu, 0x47600000u,
    0x47700000u, 0x476FFFFFu, 0x47700001u, 0x37800000u, 0x37000000u, 0x37000001u, 0x36FFFFFFu,
    0x3F800000u, 0xBF800000u, 0x3F808000u, 0x3F818000u, 0x3F801000u, 0x3F803000u, 0x3F880000u,
    0x3F900000u, 0x3F840000u, 0x3F8C0000u, 0x00008000u, 0x00018000u, 0x0000FFFFu, 0x80010000u,
};
#define NSPECIALS (sizeof specials32 / sizeof specials32[0])

/* float64 patterns where rounding is hard, made with integer operations only (the tests run
 * them under every MXCSR setting, exceptions unmasked included). */
static const uint64_t specials64[] = {
    0x0000000000000000ull, 0x8000000000000000ull, 0x7FF0000000000000ull, 0xFFF0000000000000ull,
    0x7FF8000000000000ull, 0xFFF8000000000001ull, 0x7FF0000000000001ull, 0xFFF0000000000001ull,
    0x7FF0000020000000ull, 0x7FF000001FFFFFFFull, 0x7FFFFFFFFFFFFFFFull, 0x7FEFFFFFFFFFFFFFull,
    0xFFEFFFFFFFFFFFFFull, 0x0010000000000000ull, 0x000FFFFFFFFFFFFFull, 0x0000000000000001ull,
    0x8000000000000001ull, 0x47EFFFFFF0000000ull, 0x47EFFFFFEFFFFFFFull, 0x47EFFFFFF0000001ull,
    0xC7EFFFFFF0000000ull, 0x47F0000000000000ull, 0x3690000000000000ull, 0x368FFFFFFFFFFFFFull,
    0x3690000000000001ull, 0x36A0000000000000ull, 0x36A8000000000000ull, 0x3680000000000000ull,
    0x380FFFFFE0000000ull, 0x380FFFFFF0000000ull, 0x380FFFFFEFFFFFFFull, 0x3810000000000000ull,
};
#define NSPECIALS64 (sizeof specials64 / sizeof specials64[0])

/* One float64 pattern: a float32 special or random value widened exactly and moved by 0-2 ulps
 * (the ties of the narrow formats are float32 values, so float64 -> narrow meets ties and
 * near-ties), a float32 midpoint (the ties of float64 -> float32) and its neighbours, random
 * values in and around float32's range, any pattern, or a float64 special. */
static uint32_t fill32_one(void);
static uint64_t fill64(void)
{
    const uint32_t k = rnd32() % 8;
    if (k < 5) {
        const uint32_t v = fill32_one();
        uint64_t w;
        const mxp__cvt_args a = {false, 0, 0, false};
        mxp__scalar_kernels()->cvt[MXP_FLOAT64][MXP_FLOAT32][MXP__RNE](&w, &v, 1, &a);
        const uint64_t a64 = w & 0x7FFFFFFFFFFFFFFFull;
        if (a64 >= 0x7FF0000000000000ull) return w; /* inf / NaN: as they are */
        if (k >= 3) w += 1ull << 28; /* half a float32 ulp above (for normal float32 values) */
        return w + (uint64_t)((int64_t)(rnd32() % 5) - 2);
    }
    if (k == 5) return (tu_rand64(&rng_state) & 0x800FFFFFFFFFFFFFull) | ((uint64_t)(1023 - 160 + rnd32() % 300) << 52);
    if (k == 6) return tu_rand64(&rng_state);
    return specials64[rnd32() % NSPECIALS64];
}

/* Fill n elements of `bytes` each: about 1 in 3 a special, the rest random bit patterns
 * (float32: random sign/exponent near the interesting range, random mantissa). */
static void fill(unsigned char *p, size_t n, size_t bytes)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t v = rnd32();
        if (bytes == 4) {
            v = fill32_one();
            memcpy(p + 4 * i, &v, 4);
        } else if (bytes == 8) {
            const uint64_t u = fill64();
            memcpy(p + 8 * i, &u, 8);
        } else {
            memcpy(p + bytes * i, &v, bytes);
        }
    }
}

/* One float32 pattern: a special (1 in 3), random near the narrow formats' range, or any. */
static uint32_t fill32_one(void)
{
    const uint32_t v = rnd32(), k = rnd32() % 6;
    if (k < 2) return specials32[rnd32() % NSPECIALS];
    if (k < 5) return (v & 0x807FFFFFu) | ((uint32_t)(90 + rnd32() % 70) << 23);
    return v;
}

static void fill_mix(unsigned char *p, size_t n, uint32_t rate, bool relu)
{
    tu_fill_mix(p, n, rate, relu, &rng_state, specials32, NSPECIALS);
}

static const char *dt_name(int d) { return mxp_dtype_name((mxp_dtype)d); }

/* Differences accepted under MXP_TEST_F16C_TIES_AWAY (bochs/f16c_ties.h; always 0 otherwise). */
static size_t tolerated;

/* Compare `n` output elements of conversion (d <- s, mode); print the first difference with
 * its input. */
static void expect_same(const unsigned char *want, const unsigned char *got, const unsigned char *in,
                        size_t n, int d, int s, int mode, const char *what)
{
    const size_t ob = mxp_dtype_size((mxp_dtype)d), ib = mxp_dtype_size((mxp_dtype)s);
    const size_t i = tie_away_first_diff(want, got, in, s, n, ob, d, mode, &tolerated);
    if (i < n)
        fail_msg("%s: element %zu of %zu: input 0x%llx, want 0x%llx, got 0x%llx", what, i, n,
                 (unsigned long long)tu_elem(in, i, ib), (unsigned long long)tu_elem(want, i, ob),
                 (unsigned long long)tu_elem(got, i, ob));
}

static size_t dsize(int d) { return mxp_dtype_size((mxp_dtype)d); }

/* malloc that fails the test instead of returning NULL */
static unsigned char *alloc(size_t bytes)
{
    unsigned char *p = malloc(bytes);
    assert_non_null(p);
    return p;
}

/* Entry cvt[d][s][mode] of k against the scalar reference on n elements at src: the reference
 * writes want, k writes dst; any difference fails with `what`. */
static void run_compare(const mxp__kernels *k, int d, int s, int mode, const mxp__cvt_args *a,
                        const unsigned char *src, size_t n, unsigned char *want, unsigned char *dst,
                        const char *what)
{
    mxp__scalar_kernels()->cvt[d][s][mode](want, src, n, a);
    k->cvt[d][s][mode](dst, src, n, a);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (a->stream) __builtin_ia32_sfence(); /* args.stream: the caller fences */
#endif
    expect_same(want, dst, src, n, d, s, mode, what);
}

/* A test that found no SIMD entry to check (no SIMD path on this CPU/build) is a skip. */
static void skip_if_none(int checked)
{
    if (!checked) {
        print_message("no SIMD path on this CPU/build: skipped\n");
        skip();
    }
}

/* The end of a test that compared tables on src / want / got with the streaming threshold
 * possibly lowered: the threshold back to its default, the buffers freed, a skip if nothing was
 * checked */
static void end_compare(unsigned char *src, unsigned char *want, unsigned char *got, int checked)
{
    mxp__nt_threshold = MXP__NT_THRESHOLD_DEFAULT;
    free(src);
    free(want);
    free(got);
    skip_if_none(checked);
}

/* One kernel table against the scalar table; returns the number of (pair, mode) entries it
 * checked. */
static int check_table(const mxp__kernels *k)
{
    const mxp__kernels *ref = mxp__scalar_kernels();
    unsigned char *src = malloc(8 * (MAXN + 8)), *want = malloc(8 * MAXN + GUARD),
                  *got = malloc(8 * MAXN + 8 + GUARD);
    assert_non_null(src);
    assert_non_null(want);
    assert_non_null(got);
    static const uint64_t index0s[] = {0, 1, 12345, 0xFFFFFFFFull - 300, 0xFFFFFFFFull - 7,
                                       0x100000000ull, 0x2FFFFFFF0ull, UINT64_MAX - 1500};
    int checked = 0;
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++) {
        for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++) {
            for (int mode = 0; mode < MXP__NMODES; mode++) {
                if (k->cvt[d][s][mode] == ref->cvt[d][s][mode]) continue; /* not accelerated */
                checked++;
                const size_t ib = dsize(s), ob = dsize(d);
                for (size_t n = 0; n <= MAXN; n++) {
                    const size_t so = 1 + n % OFFS, dof = 1 + (n / OFFS) % OFFS;
                    fill(src + so, n, ib);
                    for (int sat = 0; sat < 2; sat++) {
                        const int nidx = mode == MXP__SR ? (int)(sizeof index0s / sizeof index0s[0]) : 1;
                        for (int j = 0; j < nidx; j++) {
                            /* fewer index0 values at most sizes keeps the test quick */
                            if (j > 1 && n % 7 != 0 && n < 990) continue;
                            mxp__cvt_args a = {sat != 0, 0x9E3779B97F4A7C15ull ^ (uint64_t)n,
                                               index0s[j], false};
                            memset(want, 0xA5, ob * n + GUARD);
                            memset(got, 0xA5, ob * n + dof + GUARD);
                            char what[160];
                            snprintf(what, sizeof what, "%s %s -> %s %s sat=%d n=%zu index0=0x%llx",
                                     k->name, dt_name(s), dt_name(d), mode ? "SR" : "RNE", sat, n,
                                     (unsigned long long)a.index0);
                            run_compare(k, d, s, mode, &a, src + so, n, want, got + dof, what);
                            for (size_t g = 0; g < GUARD; g++)
                                if (got[dof + ob * n + g] != 0xA5) fail_msg("%s: wrote past the end", what);
                            for (size_t g = 0; g < dof; g++)
                                if (got[g] != 0xA5) fail_msg("%s: wrote before the start", what);
                        }
                    }
                }
            }
        }
    }
    free(src);
    free(want);
    free(got);
    return checked;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_MXCSR 1
static unsigned get_csr(void) { return __builtin_ia32_stmxcsr(); }
static void set_csr(unsigned v) { __builtin_ia32_ldmxcsr(v); }
#endif

/* The table of isa as dispatched, restricted to the entries that differ from the ISA's own
 * kernels (the others are the scalar reference's, i.e. "not accelerated", so every check
 * skips them), built in *t; false when nothing differs. */
static bool dispatched_diff(mxp__isa_id isa, mxp__kernels *t)
{
    const mxp__kernels *own = mxp__kernels_own(isa), *disp = mxp__kernels_for(isa), *ref = mxp__scalar_kernels();
    if (!own || !disp) return false;
    *t = *disp;
    int n = 0;
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
        for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++)
            for (int mode = 0; mode < MXP__NMODES; mode++) {
                if (disp->cvt[d][s][mode] == own->cvt[d][s][mode]) t->cvt[d][s][mode] = ref->cvt[d][s][mode];
                else n++;
            }
    return n > 0;
}

/* check_table on k, again with flush-to-zero (bit 15) and denormals-are-zero (bit 6) set */
static int check_table_csr(const mxp__kernels *k)
{
    const int checked = check_table(k);
#ifdef HAVE_MXCSR
    const unsigned old = get_csr();
    set_csr(old | 0x8040u);
    const int again = check_table(k);
    set_csr(old);
    assert_int_equal(again, checked);
#endif
    return checked;
}

static void run_isa(mxp__isa_id isa)
{
    if (!tu_isa_checked(isa)) {
        print_message("%s: skipped (%s)\n", mxp__isa_name(isa), tu_isa_unchecked(isa));
        skip();
    }
    if (!mxp__kernels_for(isa)) {
        char msg[80];
        snprintf(msg, sizeof msg, "ISA %s not available on this CPU/build: skipped", mxp__isa_name(isa));
        print_message("%s\n", msg);
        skip();
    }
    /* the ISA's own kernels */
    const mxp__kernels *k = mxp__kernels_own(isa), *ref = mxp__scalar_kernels();
    const int checked = check_table_csr(k);
    /* Every SIMD table accelerates at least the 16 float32 <-> narrow entries. */
    assert_true(checked >= 16);
    assert_ptr_not_equal(k->cvt[MXP_FLOAT16][MXP_FLOAT32][MXP__RNE], ref->cvt[MXP_FLOAT16][MXP_FLOAT32][MXP__RNE]);
    assert_ptr_not_equal(k->cvt[MXP_BFLOAT16][MXP_FLOAT32][MXP__SR], ref->cvt[MXP_BFLOAT16][MXP_FLOAT32][MXP__SR]);
    assert_ptr_not_equal(k->cvt[MXP_FLOAT32][MXP_BFLOAT16][MXP__RNE], ref->cvt[MXP_FLOAT32][MXP_BFLOAT16][MXP__RNE]);
    /* and the table as dispatched where it differs (avx512: some entries are the avx2 kernels
     * or choose by size and saturate; dispatch.c) */
    mxp__kernels diff;
    if (dispatched_diff(isa, &diff)) {
        const int mixed = check_table_csr(&diff);
        print_message("%s as dispatched: %d entries differ from its own kernels, checked\n", diff.name, mixed);
        assert_true(mixed > 0);
    }
}

/* The SIMD tables the data tests below check: every available ISA's that this program checks
 * (its own kernels, and the entries of the table as dispatched that differ from them: built in
 * scratch[isa]), plus (emulated programs) the avx512 table with its AVX512_BF16 and AVX512_VBMI
 * kernels, built in scratch[0]. */
static int tables_to_check(const mxp__kernels *out[2 * MXP__ISA_COUNT + 1],
                           mxp__kernels scratch[MXP__ISA_COUNT + 1])
{
    int n = 0;
    for (int isa = 1; isa < MXP__ISA_COUNT; isa++) {
        const mxp__kernels *k = mxp__kernels_own((mxp__isa_id)isa);
        if (!k || !tu_isa_checked((mxp__isa_id)isa)) continue;
        out[n++] = k;
        if (dispatched_diff((mxp__isa_id)isa, &scratch[isa])) out[n++] = &scratch[isa];
    }
#ifdef MXP_EMU512
    if (tu_avx512_ext_table(&scratch[0])) out[n++] = &scratch[0];
#endif
    return n;
}

/* Mostly-regular data (fill_mix) at several irregularity rates, ReLU-like or not, sizes and
 * destination offsets (mod 32 bytes: a streaming or 32-byte store must not assume more
 * alignment than it has), every SIMD float32 -> narrow entry; returns the calls checked. */
static int mixed_pass(unsigned char *src, unsigned char *want, unsigned char *got)
{
    static const uint32_t rates[] = {2, 16, 256, 4096};
    static const size_t sizes[] = {100, 1000, 4099};
    static const size_t dofs[] = {0, 1, 2, 16, 18};
    const size_t nrates = sizeof rates / sizeof rates[0];
    const mxp__kernels *ref = mxp__scalar_kernels();
    int checked = 0;
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    for (int ti = 0; ti < ntabs; ti++) {
        const mxp__kernels *k = tabs[ti];
        for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
            for (int mode = 0; mode < MXP__NMODES; mode++) {
                /* float32 -> narrow only (float64 output: test_f64) */
                if (d == MXP_FLOAT64 || k->cvt[d][MXP_FLOAT32][mode] == ref->cvt[d][MXP_FLOAT32][mode]) continue;
                for (size_t ri = 0; ri < 2 * nrates; ri++)
                    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                        const size_t n = sizes[si];
                        const bool relu = ri >= nrates;
                        fill_mix(src, n, rates[ri % nrates], relu);
                        for (size_t oi = 0; oi < sizeof dofs / sizeof dofs[0]; oi++)
                            for (int sat = 0; sat <= 1; sat++) {
                                const mxp__cvt_args a = {sat, 11 + ri, 0xFFFFF000ull * (si & 1), false};
                                char what[160];
                                snprintf(what, sizeof what,
                                         "%s float32 -> %s %s sat=%d n=%zu rate=1/%u%s dst+%zu", k->name,
                                         dt_name(d), mode ? "SR" : "RNE", sat, n, (unsigned)rates[ri % nrates],
                                         relu ? " relu" : "", dofs[oi]);
                                run_compare(k, d, MXP_FLOAT32, mode, &a, src, n, want, got + dofs[oi], what);
                                checked++;
                            }
                    }
            }
    }
    return checked;
}

/* mixed_pass, on x86 under four MXCSR settings (default, FTZ + DAZ, round up, round toward
 * zero): the float8 fast step multiplies in float32, and no setting may change a result. */
/* test_mixed_data's teardown: the dispatch settings it changes back to the dispatcher's, also
 * when a failed pass left the test early (else the tests after it would run other settings) */
#ifdef HAVE_MXCSR
static bool knobs_saved;
static unsigned saved_csr;
static int saved_pf, saved_hw;
static int restore_knobs(void **state)
{
    (void)state;
    if (knobs_saved) {
        set_csr(saved_csr);
        mxp__avx512_prefetch = saved_pf;
        mxp__avx512_half_width = saved_hw;
    }
    return 0;
}
#else
static int restore_knobs(void **state)
{
    (void)state;
    return 0;
}
#endif

static void test_mixed_data(void **state)
{
    (void)state;
    enum { MIXN = 4099 };
    unsigned char *src = malloc(4 * MIXN), *want = malloc(4 * MIXN),
                  *got = aligned_alloc(64, (4 * MIXN + 64 + 63) / 64 * 64);
    assert_non_null(src);
    assert_non_null(want);
    assert_non_null(got);
    int checked = 0;
#ifdef HAVE_MXCSR
    static const unsigned csrs[] = {0, 0x8040u, 0x4000u, 0x6000u};
    const unsigned old_csr = get_csr();
    saved_csr = old_csr;
    saved_pf = mxp__avx512_prefetch;
    saved_hw = mxp__avx512_half_width;
    knobs_saved = true;
    for (size_t ci = 0; ci < sizeof csrs / sizeof csrs[0]; ci++) {
        set_csr((old_csr & ~0xE040u) | csrs[ci]);
        checked += mixed_pass(src, want, got);
    }
    set_csr(old_csr);
    /* the AVX-512 kernels' other prefetch levels (kernels.h: one of them is this CPU's), which
     * also choose some loops (float32 -> bfloat16 in cache on Intel) */
    const int old_pf = mxp__avx512_prefetch;
    for (int lv = MXP__PREFETCH_OFF; lv <= MXP__PREFETCH_L2; lv++) {
        if (lv == old_pf) continue;
        mxp__avx512_prefetch = lv;
        checked += mixed_pass(src, want, got);
    }
    mxp__avx512_prefetch = old_pf;
    /* the other instruction choice of the CPUs with 256-bit AVX-512 units (kernels.h), at the
     * level that also runs the streaming float32 -> bfloat16 step in cache (bf16_hw4) */
    const int old_hw = mxp__avx512_half_width;
    mxp__avx512_half_width = !old_hw;
    mxp__avx512_prefetch = MXP__PREFETCH_L2;
    checked += mixed_pass(src, want, got);
    mxp__avx512_prefetch = old_pf;
    mxp__avx512_half_width = old_hw;
#else
    checked = mixed_pass(src, want, got);
#endif
    free(src);
    free(want);
    free(got);
    skip_if_none(checked);
}

/* Large calls take the streaming-store path (one call reading + writing >= 24 MB, see
 * cvt_simd_impl.h): every accelerated entry at n = 5M + 77, destination misaligned by 1 and 3
 * bytes; float32 sources also with mostly-regular data (fill_mix, so that the fast paths and
 * their streaming stores run) and destinations 0, 2, 16 and 18 bytes past a 64-byte boundary. */
/* The streaming threshold the test runs at: the library's own, or MXP_TEST_NT_BYTES (4096 ..
 * the default; scripts/bochs_avx512.sh sets 262144, because an instruction-set emulator takes
 * minutes per 24 MB conversion). A malformed value fails the test. */
static size_t test_nt_threshold(void)
{
    const char *e = getenv("MXP_TEST_NT_BYTES");
    if (!e || !*e) return MXP__NT_THRESHOLD_DEFAULT;
    char *end;
    const unsigned long long v = strtoull(e, &end, 10);
    if (*end || v < 4096 || v > MXP__NT_THRESHOLD_DEFAULT)
        fail_msg("MXP_TEST_NT_BYTES='%s': want 4096 .. %zu", e, (size_t)MXP__NT_THRESHOLD_DEFAULT);
    return (size_t)v;
}

static void test_streaming(void **state)
{
    (void)state;
    const size_t threshold = test_nt_threshold();
    /* n * (4 + output bytes) reaches the threshold for every narrowing (output >= 1 byte) */
    const size_t n = threshold / 5 + 77;
    mxp__nt_threshold = threshold;
    if (threshold != MXP__NT_THRESHOLD_DEFAULT)
        print_message("streaming threshold lowered to %zu bytes (MXP_TEST_NT_BYTES)\n", threshold);
    const mxp__kernels *ref = mxp__scalar_kernels();
    unsigned char *src = malloc(4 * n + 8), *want = malloc(4 * n + 8),
                  *got = aligned_alloc(64, (4 * n + 64 + 63) / 64 * 64);
    assert_non_null(src);
    assert_non_null(want);
    assert_non_null(got);
    int checked = 0;
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    for (int ti = 0; ti < ntabs; ti++) {
        const mxp__kernels *k = tabs[ti];
        for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
            for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++)
                for (int mode = 0; mode < MXP__NMODES; mode++) {
                    if (k->cvt[d][s][mode] == ref->cvt[d][s][mode]) continue;
                    const size_t ib = dsize(s), ob = dsize(d);
                    /* float32 <-> narrow: the kernels with streaming paths (float64: test_f64;
                     * the composed narrow <-> narrow entries: test_compose_streaming) */
                    if (ib == 8 || ob == 8 || (ib != 4 && ob != 4)) continue;
                    for (int data = 0; data < (ib == 4 ? 2 : 1); data++) {
                        if (data == 0) fill(src + 2, n, ib);
                        else fill_mix(src + 2, n, 64, ob == 1);
                        /* destination offsets: 4-byte aligned ones stream a widening (it needs
                         * dst % 4 == 0) and a 16-bit narrowing, odd ones take the plain stores;
                         * saturate alternates with oi */
                        static const size_t dofs[2][4] = {{0, 1, 3, 4}, {0, 2, 16, 18}};
                        for (int oi = 0; oi < 4; oi++) {
                            const size_t dof = dofs[data][oi];
                            const mxp__cvt_args a = {oi & 1, 7, 0xFFFF0000ull, false};
                            char what[128];
                            snprintf(what, sizeof what, "%s %s -> %s %s n=%zu dst+%zu%s (streaming)",
                                     k->name, dt_name(s), dt_name(d), mode ? "SR" : "RNE", n, dof,
                                     data ? " mostly regular" : "");
                            run_compare(k, d, s, mode, &a, src + 2, n, want, got + dof, what);
                            checked++;
                        }
                    }
                }
    }
    end_compare(src, want, got, checked);
}

/* Every accelerated entry called with args.stream set on small n, as src/convert.c's interleaved
 * streams and cvt_compose.c call them (non-temporal stores whatever n, the fence left to the
 * caller): the reference's bits for every pair and mode, n from below one vector step to a few
 * thousand, destinations 0, 2, 34 bytes past a 64-byte boundary and 5 (misaligned for every
 * element size but 1), saturate alternating, index0 near 2^32. */
static void test_args_stream(void **state)
{
    (void)state;
    enum { N = 4099 };
    unsigned char *src = malloc(8 * N + 8), *want = malloc(8 * N);
    unsigned char *got = aligned_alloc(64, (8 * N + 64 + 63) / 64 * 64);
    assert_non_null(src);
    assert_non_null(want);
    assert_non_null(got);
    const mxp__kernels *ref = mxp__scalar_kernels();
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    static const size_t ns[] = {31, 64, 128, 1000, N};
    static const size_t dofs[] = {0, 2, 34, 5};
    int checked = 0;
    for (int ti = 0; ti < ntabs; ti++)
        for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
            for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++)
                for (int mode = 0; mode < MXP__NMODES; mode++) {
                    if (tabs[ti]->cvt[d][s][mode] == ref->cvt[d][s][mode]) continue;
                    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                        const size_t n = ns[k], dof = dofs[(k + (size_t)d + (size_t)s) % 4];
                        if (s == MXP_FLOAT32 && k % 2) fill_mix(src + 2, n, 64, dsize(d) == 1);
                        else fill(src + 2, n, dsize(s));
                        const mxp__cvt_args a = {(k + (size_t)mode) % 2 == 1, 99, 0xFFFFF000ull, true};
                        char what[128];
                        snprintf(what, sizeof what, "%s %s -> %s %s n=%zu dst+%zu (args.stream)", tabs[ti]->name,
                                 dt_name(s), dt_name(d), mode ? "SR" : "RNE", n, dof);
                        run_compare(tabs[ti], d, s, mode, &a, src + 2, n, want, got + dof, what);
                        checked++;
                    }
                }
    free(src);
    free(want);
    free(got);
    skip_if_none(checked);
}

/* The narrow -> narrow entries on a call large enough to stream: the composed ones
 * (cvt_compose.c; into 16-bit formats each 2048-element block's second step stores
 * non-temporally whatever its own n, and the call fences once at its end) and the direct ones.
 * Threshold lowered to 4096 bytes; n = 3 blocks + 123 elements (a partial last block and the
 * reference's tail); destinations 0, 2, 34 bytes past a 64-byte boundary (aligned
 * heads of different lengths) and 5 (a 16-bit destination that never lines up: plain stores);
 * random patterns and mostly-regular values (fill_mix through the reference, so that the
 * float32 kernels' fast loops and their streaming stores run); both modes, saturate alternating,
 * index0 straddling 2^32 (each block passes its own index). */
static void test_compose_streaming(void **state)
{
    (void)state;
    enum { N = 3 * 2048 + 123 };
    const mxp__kernels *ref = mxp__scalar_kernels();
    unsigned char *f32 = alloc(4 * N), *src = alloc(2 * N + 8), *want = alloc(2 * N);
    unsigned char *got = aligned_alloc(64, (2 * N + 64 + 63) / 64 * 64);
    assert_non_null(got);
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    int checked = 0;
    mxp__nt_threshold = 4096;
    for (int ti = 0; ti < ntabs; ti++)
        for (int d = MXP_FLOAT16; d < MXP_FLOAT_DTYPE_COUNT; d++)
            for (int s = MXP_FLOAT16; s < MXP_FLOAT_DTYPE_COUNT; s++)
                for (int mode = 0; mode < MXP__NMODES; mode++) {
                    if (d == s || tabs[ti]->cvt[d][s][mode] == ref->cvt[d][s][mode]) continue;
                    static const size_t dofs[] = {0, 2, 34, 5};
                    for (int oi = 0; oi < 4; oi++) {
                        const int data = oi & 1;
                        if (data) {
                            const mxp__cvt_args plain = {false, 0, 0, false};
                            fill_mix(f32, N, 64, d >= MXP_FLOAT8_E4M3FN);
                            ref->cvt[s][MXP_FLOAT32][MXP__RNE](src + 1, f32, N, &plain);
                        } else {
                            fill(src + 1, N, dsize(s));
                        }
                        const mxp__cvt_args a = {oi >= 2, 3, oi % 3 ? 0xFFFFFFFFull - 2500 : 0, false};
                        char what[128];
                        snprintf(what, sizeof what, "%s %s -> %s %s dst+%zu%s (composed, streaming)",
                                 tabs[ti]->name, dt_name(s), dt_name(d), mode ? "SR" : "RNE", dofs[oi],
                                 data ? " mostly regular" : "");
                        run_compare(tabs[ti], d, s, mode, &a, src + 1, N, want, got + dofs[oi], what);
                        checked++;
                    }
                }
    mxp__nt_threshold = MXP__NT_THRESHOLD_DEFAULT;
    free(f32);
    free(src);
    free(want);
    free(got);
    skip_if_none(checked);
}

/* A float32 below float8's normal range, of kind k (0 .. 7): exact ties of the subnormal quanta
 * ((2j + 1) * 2^-10 .. 2^-17: halfway cases for e4m3fn and e5m2), values just under 2^-6 and
 * 2^-14 (which round up to the smallest normal), +-0 (a float32 subnormal when !zeros), a float32
 * subnormal, random ones down to 2^-30. */
static uint32_t small8_value(uint32_t sign, uint32_t k, bool zeros)
{
    switch (k) {
    case 0: /* (8 + j) * 2^(e - 3), e = -7 .. -17: the ties of e4m3fn's quantum 2^-9 (e = -7 ..
             * -10) and e5m2's 2^-16 (e = -15 .. -17) among them */
        return sign | (uint32_t)(127 - 7 - rnd32() % 11) << 23 | (rnd32() % 8) << 20;
    case 1: return sign | (0x3C800000u - 1u - rnd32() % 4096u); /* just under 2^-6 */
    case 2: return sign | (0x38800000u - 1u - rnd32() % 4096u); /* just under 2^-14 */
    case 3:
        if (zeros) return sign; /* +-0 */
        /* fall through */
    case 4: return sign | (rnd32() & 0x7FFFFFu); /* float32 subnormal */
    default: return sign | (uint32_t)(127 - 30 + rnd32() % 24) << 23 | (rnd32() & 0x7FFFFFu);
    }
}
/* an overflow (448 exactly is e4m3fn's max finite and takes the general path too), an infinity
 * or a NaN */
static uint32_t big8_value(uint32_t sign)
{
    static const uint32_t big[] = {0x43E00000u, 0x47800000u, 0x7F800000u, 0x7FC00001u, 0x43E80000u};
    return sign | big[rnd32() % 5];
}

/* Float32 data in float8's normal range (|x| in [2^-6, 2^8), both formats; e5m2's top binade
 * there is where the streaming step's scalar code for a lane it then drops shifted by 32 before
 * session 23's clamp, which UBSan builds catch) with, at random places about once per 64
 * elements, a value below it (small8_value), and, about once per 4096, an overflow, an infinity
 * or a NaN. The float8 loops take a step with a single small lane in place (its code computed on
 * its own, in scalar code when streaming): each such step has both neighbours in the same call. */
static void fill_lone_tiny(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const uint32_t sign = rnd32() & 0x80000000u;
        uint32_t v = sign | (uint32_t)(127 - 6 + rnd32() % 14) << 23 | (rnd32() & 0x7FFFFFu);
        const uint32_t roll = rnd32() % 4096;
        if (roll < 64) v = small8_value(sign, roll % 8, true);
        else if (roll == 64) v = big8_value(sign);
        memcpy(p + 4 * i, &v, 4);
    }
}

/* Float32 data whose density of values below float8's normal range changes every 256 elements
 * (none, about 1 in 64, 1 in 8, 1 in 2, or all: small8_value; the others in [2^-6, 4)), +-0
 * only in some stretches, and about once per 8192 an overflow, an infinity or a NaN: the
 * stochastic float8 runs switch between their modes here (cvt_simd_impl.h's sr8_zrun: the tiny
 * mode on dense stretches, the zero mode where +-0 comes first) and stop by their counts at the
 * stretches' edges. */
static void fill_dense_tiny(unsigned char *p, size_t n)
{
    static const uint32_t dens[] = {0, 64, 512, 2048, 4096}; /* small values per 4096 */
    uint32_t den = 0;
    bool zeros = false;
    for (size_t i = 0; i < n; i++) {
        if (i % 256 == 0) {
            den = dens[rnd32() % 5];
            zeros = rnd32() % 4 == 0;
        }
        const uint32_t sign = rnd32() & 0x80000000u, roll = rnd32() % 4096;
        uint32_t v = sign | (uint32_t)(127 - 6 + rnd32() % 8) << 23 | (rnd32() & 0x7FFFFFu);
        if (roll < den) v = small8_value(sign, rnd32() % 8, zeros);
        else if (roll == den && rnd32() % 2 == 0) v = big8_value(sign);
        memcpy(p + 4 * i, &v, 4);
    }
}

/* One float32 -> float8 call to check: its source, length, saturation, destination offset,
 * index0 and what its data is */
typedef struct f8_case {
    const unsigned char *src;
    size_t n;
    bool sat;
    size_t dof;
    uint64_t index0;
    const char *data;
} f8_case;

/* Every case through every SIMD table's float32 -> e4m3fn / e5m2 kernels, both rounding modes
 * (seed 5 + sat), against the scalar table; the streaming threshold at test_nt_threshold(). */
static void check_f8_cases(const f8_case *cs, int ncs, size_t maxn)
{
    const mxp__kernels *ref = mxp__scalar_kernels();
    unsigned char *want = malloc(maxn), *got = aligned_alloc(64, (maxn + 64 + 63) / 64 * 64);
    assert_non_null(want);
    assert_non_null(got);
    mxp__nt_threshold = test_nt_threshold();
    int checked = 0;
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    static const int fmts[] = {MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    for (int ti = 0; ti < ntabs; ti++)
        for (size_t fi = 0; fi < 2; fi++)
            for (int mode = 0; mode < MXP__NMODES; mode++) {
                const int d = fmts[fi];
                if (tabs[ti]->cvt[d][MXP_FLOAT32][mode] == ref->cvt[d][MXP_FLOAT32][mode]) continue;
                for (int ci = 0; ci < ncs; ci++) {
                    const f8_case *c = &cs[ci];
                    const mxp__cvt_args a = {c->sat, 5 + (uint64_t)c->sat, c->index0, false};
                    char what[160];
                    snprintf(what, sizeof what, "%s float32 -> %s %s sat=%d n=%zu dst+%zu (%s)", tabs[ti]->name,
                             dt_name(d), mode ? "SR" : "RNE", c->sat, c->n, c->dof, c->data);
                    run_compare(tabs[ti], d, MXP_FLOAT32, mode, &a, c->src, c->n, want, got + c->dof, what);
                    checked++;
                }
            }
    mxp__nt_threshold = MXP__NT_THRESHOLD_DEFAULT;
    free(want);
    free(got);
    skip_if_none(checked);
}

/* float32 -> float8 on fill_lone_tiny's data, both rounding modes, in cache (4099 elements, and
 * 40000: longer than the 8 blocks of 32 steps that the in-cache loop defers at a time) and
 * streaming, and on ReLU-like data (a run of tiny-aware steps whose mode carries over from one
 * deferred stretch to the next) of 40000, every SIMD table against the scalar one. */
static void test_lone_tiny(void **state)
{
    (void)state;
    const size_t big = test_nt_threshold() / 5 + 77;
    enum { MID = 40000 };
    /* the MID cases read src too: big is smaller than MID under a lowered MXP_TEST_NT_BYTES */
    const size_t nsrc = big > MID ? big : MID;
    unsigned char *src = malloc(4 * nsrc), *relu = malloc(4 * MID);
    assert_non_null(src);
    assert_non_null(relu);
    fill_lone_tiny(src, nsrc);
    fill_mix(relu, MID, 64, true);
    f8_case cs[8];
    int ncs = 0;
    for (int size = 0; size < 4; size++)
        for (int sat = 0; sat <= 1; sat++) {
            static const size_t ns[] = {4099, MID, 0, MID};
            const f8_case c = {size == 3 ? relu : src, size == 2 ? big : ns[size], sat != 0, sat ? 16u : 0u,
                               0xFFFF0000ull * (uint64_t)(size & 1), size == 3 ? "ReLU-like" : "lone small values"};
            cs[ncs++] = c;
        }
    check_f8_cases(cs, ncs, nsrc);
    free(relu);
    free(src);
}

/* float16 / bfloat16 -> float8 on fill_f32's float32 values (data names them), rounded to the 16-bit
 * format by the reference; in cache and streaming (threshold 2048 bytes), both modes, saturate
 * off and on, every SIMD table against the scalar one. Streaming runs twice, with the stochastic
 * steps' range tests ahead (kernels.h's mxp__avx512_ahead) as the dispatcher set them and the
 * other way, on n = N and on two shorter calls: 999 elements (fewer steps than are tested ahead)
 * and 1543 (the tests ahead reach past the end). */
static void check_tiny16(void (*fill_f32)(unsigned char *, size_t), const char *data)
{
    enum { N = 20011 };
    const mxp__kernels *ref = mxp__scalar_kernels();
    unsigned char *f32 = alloc(4 * N), *src = alloc(2 * N), *want = alloc(N);
    unsigned char *got = aligned_alloc(64, (N + 128 + 63) / 64 * 64); /* a multiple of the alignment */
    assert_non_null(got);
    fill_f32(f32, N);
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    static const int srcs[] = {MXP_FLOAT16, MXP_BFLOAT16}, dsts[] = {MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    int checked = 0;
    const int old_ahead = mxp__avx512_ahead;
    for (int si = 0; si < 2; si++) {
        const int s = srcs[si];
        const mxp__cvt_args a0 = {false, 0, 0, false};
        ref->cvt[s][MXP_FLOAT32][MXP__RNE](src, f32, N, &a0);
        for (int ti = 0; ti < ntabs; ti++)
            for (int di = 0; di < 2; di++)
                for (int mode = 0; mode < MXP__NMODES; mode++) {
                    const int d = dsts[di];
                    if (tabs[ti]->cvt[d][s][mode] == ref->cvt[d][s][mode]) continue;
                    /* bit 0: saturate; v >= 2: streaming; v >= 4: the other ahead setting */
                    for (int v = 0; v < 6; v++) {
                        const mxp__cvt_args a = {(v & 1) != 0, 11, 0xFFFF0000ull, false};
                        mxp__nt_threshold = v >= 2 ? 2048 : MXP__NT_THRESHOLD_DEFAULT; /* 999 * 3 bytes stream */
                        mxp__avx512_ahead = v >= 4 ? !old_ahead : old_ahead;
                        static const size_t ns[] = {N, 999, 1543};
                        for (size_t ni = 0; ni < (v >= 2 ? 3u : 1u); ni++) {
                            const char *how = v < 2 ? "" : mxp__avx512_ahead ? " streaming, ahead" : " streaming";
                            char what[160];
                            snprintf(what, sizeof what, "%s %s -> %s %s sat=%d n=%zu%s (%s)", tabs[ti]->name,
                                     dt_name(s), dt_name(d), mode ? "SR" : "RNE", v & 1, ns[ni], how, data);
                            run_compare(tabs[ti], d, s, mode, &a, src, ns[ni], want, got + (v >= 2 ? 0 : 1), what);
                            checked++;
                        }
                    }
                    mxp__avx512_ahead = old_ahead;
                }
    }
    mxp__nt_threshold = MXP__NT_THRESHOLD_DEFAULT;
    free(f32);
    free(src);
    free(want);
    free(got);
    skip_if_none(checked);
}
/* check_tiny16 on fill_lone_tiny's data: steps with a single small lane and, about once per 4096,
 * an overflow, an infinity or a NaN (the stochastic steps patch a lone small lane in place) */
static void test_lone_tiny16(void **state)
{
    (void)state;
    check_tiny16(fill_lone_tiny, "lone small values");
}
/* Float32 data for the 16-bit sources' +-0 steps (ReLU data): stretches of 256 elements with +-0
 * in none, half or all of the lanes, or at the element positions (i mod 16) of a random mask, so
 * that the two halves of a 32-element step have their zeros in the same lanes; among them, values
 * below float8's normal range (small8_value, +-0 excluded) in none, about 1 in 256 or 1 in 16
 * lanes, the rest in [2^-6, 4): steps whose only small lanes are +-0, and steps with one other
 * small lane, in a lane whose twin in the other half is +-0. */
static void fill_zero_tiny(unsigned char *p, size_t n)
{
    static const uint32_t zdens[] = {0, 2048, 4096, 0}, tdens[] = {0, 16, 256}; /* per 4096 */
    uint32_t zden = 0, tden = 0, zmask = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 256 == 0) {
            const uint32_t z = rnd32() % 4;
            zden = zdens[z];
            zmask = z == 3 ? rnd32() & 0xFFFFu : 0;
            tden = tdens[rnd32() % 3];
        }
        const uint32_t sign = rnd32() & 0x80000000u;
        uint32_t v = sign | (uint32_t)(127 - 6 + rnd32() % 8) << 23 | (rnd32() & 0x7FFFFFu);
        if (rnd32() % 4096 < tden) v = small8_value(sign, rnd32() % 8, false);
        else if (rnd32() % 4096 < zden || (zmask >> (i % 16) & 1)) v = sign;
        memcpy(p + 4 * i, &v, 4);
    }
}
/* float16 / bfloat16 -> float8 on fill_zero_tiny's data, as test_lone_tiny16 */
static void test_zero_tiny16(void **state)
{
    (void)state;
    check_tiny16(fill_zero_tiny, "+-0 with small values");
}

/* float32 -> float8 on fill_dense_tiny's data, both rounding modes, streaming (n as in
 * test_lone_tiny) and in cache (40000), every SIMD table against the scalar one. */
static void test_dense_tiny(void **state)
{
    (void)state;
    const size_t big = test_nt_threshold() / 5 + 77, nsrc = big > 40000 ? big : 40000; /* as test_lone_tiny */
    unsigned char *src = malloc(4 * nsrc);
    assert_non_null(src);
    fill_dense_tiny(src, nsrc);
    const f8_case cs[] = {{src, 40000, false, 16, 0, "dense small values"},
                          {src, big, true, 0, 0xFFFF0000ull, "dense small values"}};
    check_f8_cases(cs, 2, nsrc);
    free(src);
}

/* Short calls on the streaming path: with the threshold at 1 byte every call streams, so the
 * aligned head (up to 2*VL elements before the first streaming store) can exceed n. Every
 * accelerated float32 <-> narrow entry, n = 0 .. 80, the destination at every offset 0 .. 63
 * from a 64-byte boundary, source and destination allocated to the exact size (AddressSanitizer
 * sees a read or write past n; the guard bytes after the destination are checked here too).
 * Found on an AVX-512 CPU: the fused float8 quantizer passes a 29-element tail to the
 * conversion kernel, which, streaming, converted an aligned head of 30 and read past its input. */
static void test_streaming_short(void **state)
{
    (void)state;
    mxp__nt_threshold = 1;
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    const mxp__kernels *ref = mxp__scalar_kernels();
    int checked = 0;
    enum { NMAX = 80, GB = 16 };
    for (int ti = 0; ti < ntabs; ti++) {
        const mxp__kernels *k = tabs[ti];
        for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
            for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++)
                for (int mode = 0; mode < MXP__NMODES; mode++) {
                    if (k->cvt[d][s][mode] == ref->cvt[d][s][mode]) continue;
                    const size_t ib = dsize(s), ob = dsize(d);
                    if (ib == 8 || ob == 8 || (ib != 4 && ob != 4)) continue;
                    for (size_t n = 0; n <= NMAX; n++) {
                        unsigned char *src = malloc(n * ib + 1), *want = malloc(n * ob + 1);
                        unsigned char *buf = aligned_alloc(64, 64 + 64 + NMAX * 4 + 64);
                        assert_non_null(src);
                        assert_non_null(want);
                        assert_non_null(buf);
                        fill(src, n, ib);
                        for (size_t dof = 0; dof < 64; dof++) {
                            const mxp__cvt_args a = {dof & 1, 7, 0xFFFF0000ull, false};
                            memset(buf, 0xA5, 64 + 64 + NMAX * 4 + 64);
                            char what[128];
                            snprintf(what, sizeof what, "%s %s -> %s %s n=%zu dst+%zu (streaming, short)",
                                     k->name, dt_name(s), dt_name(d), mode ? "SR" : "RNE", n, dof);
                            run_compare(k, d, s, mode, &a, src, n, want, buf + 64 + dof, what);
                            for (size_t g = 0; g < 64 + dof; g++)
                                if (buf[g] != 0xA5) fail_msg("%s: wrote byte %zu before dst", what, 64 + dof - g);
                            for (size_t g = 64 + dof + n * ob; g < 64 + dof + n * ob + GB; g++)
                                if (buf[g] != 0xA5) fail_msg("%s: wrote past dst[n-1]", what);
                        }
                        free(src);
                        free(want);
                        free(buf);
                        checked++;
                    }
                }
    }
    mxp__nt_threshold = MXP__NT_THRESHOLD_DEFAULT;
    skip_if_none(checked);
}

static void test_avx2(void **state)
{
    (void)state;
    run_isa(MXP__ISA_AVX2);
}
static void test_avx512(void **state)
{
    (void)state;
#if defined(__x86_64__) && !defined(MXP_EMU512)
    /* the FP16 kernel (float64 -> float16 by VCVTPD2PH) is in the table only on CPUs with
     * AVX512_FP16 (dispatch.c), and is emulated nowhere: say whether this run checks it */
    unsigned a, b, c, d;
    if (mxp__kernels_for(MXP__ISA_AVX512) != NULL) {
        const bool fp16 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 23) & 1u);
        print_message("%s\n", fp16 ? "AVX512_FP16: the float64 -> float16 VCVTPD2PH kernel is checked"
                                   : "no AVX512_FP16 on this CPU: its float64 -> float16 kernel is not checked");
    }
#endif
#ifdef MXP_EMU512
    /* without AVX512_VBMI (the emulated table never registers it) the avx512 table takes the
     * avx2 table's byte kernels for stochastic rounding between the float8 formats, not the
     * composed path; run_isa checks them there too */
    const mxp__kernels *k512 = mxp__kernels_own(MXP__ISA_AVX512), *k2 = mxp__kernels_own(MXP__ISA_AVX2);
    if (k512 && k2) {
        assert_ptr_equal(k512->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT8_E4M3FN][MXP__SR],
                         k2->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT8_E4M3FN][MXP__SR]);
        assert_ptr_equal(k512->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT8_E5M2][MXP__SR],
                         k2->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT8_E5M2][MXP__SR]);
    }
#endif
    run_isa(MXP__ISA_AVX512);
}
static void test_neon(void **state)
{
    (void)state;
    run_isa(MXP__ISA_NEON);
}

/* The avx512 table with the kernels of its optional instruction sets, which dispatch.c registers
 * only on CPUs that have them: AVX512_BF16 (float32 -> bfloat16 nearest-even by VCVTNEPS2BF16
 * plus the subnormal fix-up) and AVX512_VBMI (the float8 byte-table kernels: all eleven of them
 * must be there). The emulated programs always check it (the instructions are emulated from the
 * SDM's description, the subnormal flush included); the native program on a CPU with the
 * instruction sets checks them through test_avx512 already (the table in use has them). */
static void test_avx512_bf16(void **state)
{
    (void)state;
#ifdef MXP_EMU512
    mxp__kernels t;
    assert_true(tu_avx512_ext_table(&t));
    const mxp__kernels *own = mxp__kernels_own(MXP__ISA_AVX512);
    static const int vbmi[9][2] = {{MXP_FLOAT32, MXP_FLOAT8_E4M3FN}, {MXP_FLOAT64, MXP_FLOAT8_E4M3FN},
                                   {MXP_FLOAT16, MXP_FLOAT8_E4M3FN}, {MXP_BFLOAT16, MXP_FLOAT8_E4M3FN},
                                   {MXP_BFLOAT16, MXP_FLOAT8_E5M2},  {MXP_FLOAT16, MXP_FLOAT8_E5M2},
                                   {MXP_FLOAT64, MXP_FLOAT8_E5M2},   {MXP_FLOAT8_E5M2, MXP_FLOAT8_E4M3FN},
                                   {MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2}};
    for (int e = 0; e < 9; e++)
        assert_ptr_not_equal(t.cvt[vbmi[e][0]][vbmi[e][1]][MXP__RNE], own->cvt[vbmi[e][0]][vbmi[e][1]][MXP__RNE]);
    /* and stochastic rounding between the two float8 formats */
    assert_ptr_not_equal(t.cvt[MXP_FLOAT8_E5M2][MXP_FLOAT8_E4M3FN][MXP__SR],
                         own->cvt[MXP_FLOAT8_E5M2][MXP_FLOAT8_E4M3FN][MXP__SR]);
    assert_ptr_not_equal(t.cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT8_E5M2][MXP__SR],
                         own->cvt[MXP_FLOAT8_E4M3FN][MXP_FLOAT8_E5M2][MXP__SR]);
    assert_true(check_table(&t) >= 16);
#ifdef HAVE_MXCSR
    const unsigned old = get_csr();
    set_csr(old | 0x8040u);
    assert_true(check_table(&t) >= 16);
    set_csr(old);
#endif
#else
    print_message("checked by test_isa_emu512 (and by test_avx512 on a CPU with AVX512_BF16)\n");
    skip();
#endif
}

static const char *self_path; /* argv[0]: children re-execute this program */

/* The exit status of a fresh process of this program under MIXPREC_ISA=value (NULL: unset):
 * the mxp__isa_id it picked. A fresh process, because the choice is made once per process. */
static int child_isa(const char *value)
{
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        if (value) setenv("MIXPREC_ISA", value, 1);
        else unsetenv("MIXPREC_ISA");
        execl(self_path, self_path, "--print-isa", (char *)NULL);
        _exit(101);
    }
    assert_true(pid > 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Child modes: --print-isa exits with the mxp__isa_id in use; --print-fallback exits 0 when
 * mxp_isa_fallback() is NULL, 1 when it is a message naming the path in use and
 * mxp_isa_requested() is the MIXPREC_ISA value, 100 when something is inconsistent. */
static int child_main(const char *mode)
{
    const char *name = mxp_isa();
    if (strcmp(mode, "--print-fallback") == 0) {
        const char *env = getenv("MIXPREC_ISA"), *req = mxp_isa_requested(), *fb = mxp_isa_fallback();
        if ((env && *env) ? !req || strcmp(req, env) != 0 : req != NULL) return 100;
        if (!fb) return 0;
        return strstr(fb, name) && strstr(fb, "MIXPREC_ISA") ? 1 : 100;
    }
    for (int i = 0; i < MXP__ISA_COUNT; i++)
        if (strcmp(name, mxp__isa_name((mxp__isa_id)i)) == 0) return i;
    return 100;
}

/* child_isa with --print-fallback: 0 when the request was followed, 1 when not (and said so) */
static int child_fallback(const char *value)
{
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        if (value) setenv("MIXPREC_ISA", value, 1);
        else unsetenv("MIXPREC_ISA");
        execl(self_path, self_path, "--print-fallback", (char *)NULL);
        _exit(101);
    }
    assert_true(pid > 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void test_dispatch(void **state)
{
    (void)state;
    /* the default is the best path this CPU has (the avx512 table included) */
    int best = MXP__ISA_SCALAR;
    for (int i = 0; i < MXP__ISA_COUNT; i++)
        if (mxp__kernels_for((mxp__isa_id)i)) best = i;
    assert_non_null(mxp__kernels_for(MXP__ISA_SCALAR));
    assert_int_equal(child_isa(NULL), best);
    assert_int_equal(child_isa(""), best);
    assert_int_equal(child_isa("bogus"), best);
    assert_int_equal(child_isa("scalar"), MXP__ISA_SCALAR);
    /* an unknown name is not followed and says so; no request, or an available path, is */
    assert_int_equal(child_fallback(NULL), 0);
    assert_int_equal(child_fallback(""), 0);
    assert_int_equal(child_fallback("bogus"), 1);
    assert_int_equal(child_fallback("AVX2"), 1);
    assert_int_equal(child_fallback("scalar"), 0);
    for (int i = 1; i < MXP__ISA_COUNT; i++) {
        /* a forced path falls back to the best available one at or below it */
        int want = MXP__ISA_SCALAR;
        for (int j = i; j >= 0; j--)
            if (mxp__kernels_for((mxp__isa_id)j)) {
                want = j;
                break;
            }
        assert_int_equal(child_isa(mxp__isa_name((mxp__isa_id)i)), want);
        assert_int_equal(mxp__isa_select(mxp__isa_name((mxp__isa_id)i)), want);
        assert_int_equal(child_fallback(mxp__isa_name((mxp__isa_id)i)), want == i ? 0 : 1);
    }
    assert_int_equal(mxp__isa_select(NULL), best);
    assert_int_equal(mxp__isa_select("bogus"), best);
    assert_int_equal(mxp__isa_select("scalar"), MXP__ISA_SCALAR);
    /* the in-process choice is one of the tables, and its name is mxp_isa() */
    assert_string_equal(mxp_isa(), mxp__kernels_active()->name);
    print_message("mxp_isa() = %s%s%s\n", mxp_isa(), mxp_isa_fallback() ? "; " : "",
                  mxp_isa_fallback() ? mxp_isa_fallback() : "");
}

/* Every narrow source pattern (all 2^16 float16 / bfloat16, all 2^8 float8) through every
 * accelerated entry from it, both modes and both overflow modes, index0 also straddling 2^32:
 * the composed narrow -> narrow / float64 entries (cvt_compose.c) and the widenings. */
/*
 * Stochastic rounding at its exact boundary, against the rule itself rather than the reference
 * code: a value below the target's normal range with a dropped part of F / 2^32 quanta rounds
 * up iff F + r >= 2^32, r = the element's word with all 32 bits (ref_convert.h's ref_sr_r: for
 * float8 targets mxp__sr_bits(seed, index); float16's is two halves of two words shared with a
 * neighbour, here the low half deciding, as it does below 2^-17). A value with F < 2^24
 * (float32 exponent such that the quantum is 2^32 ulps) makes the low bits of r decide: for the
 * indices whose r lies in (2^32 - 2^24, 2^32 - 2^23], x = (2^32 - r) * Q / 2^32 must give the
 * smallest subnormal code and x minus one ulp must give 0 (either sign). The other elements are
 * 1.0 (so that the step around a boundary element leaves the fast path) or Q / 4 (every lane
 * below the normal range). Every table, the scalar reference included, for float32 -> e4m3fn,
 * e5m2 and float16; fails a kernel that drops the hash's last step (r's low bits).
 */
static void test_sr_boundary(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    static const struct {
        int dt, q_exp; /* target, log2 of its subnormal quantum */
    } tg[] = {{MXP_FLOAT8_E4M3FN, -9}, {MXP_FLOAT8_E5M2, -16}, {MXP_FLOAT16, -24}};
    const uint64_t seed = 0x5EED5EEDull;
    float *src = malloc(N * sizeof *src);
    unsigned char *dst = malloc(2 * N);
    assert_non_null(src);
    assert_non_null(dst);
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 2];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    int ntabs = tables_to_check(tabs, scratch);
    tabs[ntabs++] = mxp__scalar_kernels();
    int hits = 0, checked = 0;
    for (int ti = 0; ti < ntabs; ti++)
        for (size_t g = 0; g < sizeof tg / sizeof tg[0]; g++)
            for (int v = 0; v < 8; v++) { /* bit 0: one ulp below; bit 1: negative; bit 2: fill Q/4 */
                const int dt = tg[g].dt, ob = dt == MXP_FLOAT16 ? 2 : 1;
                const float fillv = (v & 4) ? ldexpf(1.0f, tg[g].q_exp - 2) : 1.0f;
                for (size_t i = 0; i < N; i++) {
                    const uint32_t r = ref_sr_r(seed, i, MXP_FLOAT32, (mxp_dtype)dt);
                    float x = fillv;
                    if (r > 0xFF000000u && r <= 0xFF800000u) /* F = 2^32 - r in [2^23, 2^24) */
                        x = ldexpf((float)(0x100000000ull - r - (uint64_t)(v & 1)), tg[g].q_exp - 32);
                    src[i] = (v & 2) ? -x : x;
                }
                const mxp__cvt_args a = {false, seed, 0, false};
                tabs[ti]->cvt[dt][MXP_FLOAT32][MXP__SR](dst, src, N, &a);
                checked++;
                for (size_t i = 0; i < N; i++) {
                    const uint32_t r = ref_sr_r(seed, i, MXP_FLOAT32, (mxp_dtype)dt);
                    if (!(r > 0xFF000000u && r <= 0xFF800000u)) continue;
                    hits++;
                    const unsigned got = ob == 2 ? (unsigned)(dst[2 * i] | dst[2 * i + 1] << 8) : dst[i];
                    const unsigned want = ((v & 2) ? 1u << (8 * ob - 1) : 0u) | ((v & 1) ? 0u : 1u);
                    if (got != want)
                        fail_msg("%s float32 -> %s SR: index %zu (r = 0x%08X) x = %a: got 0x%X, want 0x%X "
                                 "(fill %a)", tabs[ti]->name, dt_name(dt), i, (unsigned)r, (double)src[i], got, want,
                                 (double)fillv);
                }
            }
    assert_true(hits > 100 * checked); /* about 128 boundary elements per call */
    free(src);
    free(dst);
}

/*
 * The same boundary from a bfloat16 source (the stochastic kernels from 16-bit sources,
 * cvt_simd_impl.h's srn_loop). A bfloat16 has 8 significant bits, so a dropped part F (in 2^-32
 * quanta) small enough for r's low 11 bits to decide (F <= 2^11) needs an index whose r is
 * within 2^11 of 2^32: found by scanning indices, then each is the element 37 or 61 of a call of
 * 80 elements (index0 = that index - 37 or 61: the first or second half of a step, on either
 * table; the others 1.0, so that its step leaves the fast path). With T = 2^32 - r,
 * x = F * Q / 2^32 rounds up (smallest subnormal code) for F = the smallest 8-significant-bit
 * number >= T and down (0) for the largest one below T, either sign, alone or with a second small
 * lane beside it (exact: twice the quantum), which takes a step with several such lanes (AVX-512:
 * srn_tiny8); targets e4m3fn, e5m2, float16. A float16 source never gets here: its dropped parts
 * are multiples of 2^17 quanta or more, so r's top 21 bits decide. r is the element's word from
 * a bfloat16 source (ref_convert.h's ref_sr_r: its low half decides here, from the second set of
 * shared words). Fails a kernel that drops the hash's last step on this path, or those low
 * halves.
 */
static void test_sr_boundary16(void **state)
{
    (void)state;
    enum { N = 80, WANT = 6 };
    static const struct {
        int dt, q_exp;
    } tg[] = {{MXP_FLOAT8_E4M3FN, -9}, {MXP_FLOAT8_E5M2, -16}, {MXP_FLOAT16, -24}};
    const uint64_t seed = 0xB0B0ull;
    uint64_t found[WANT];
    int nf = 0;
    /* a bfloat16 source's r is the same for every target (here named float16) */
    for (uint64_t i = 61; nf < WANT && i < (1ull << 30); i++)
        if (ref_sr_r(seed, i, MXP_BFLOAT16, MXP_FLOAT16) >= 0xFFFFF800u) found[nf++] = i;
    assert_int_equal(nf, WANT);
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 2];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    int ntabs = tables_to_check(tabs, scratch);
    tabs[ntabs++] = mxp__scalar_kernels();
    uint16_t src[N];
    unsigned char dst[2 * N];
    int checked = 0;
    for (int ti = 0; ti < ntabs; ti++)
        for (size_t g = 0; g < sizeof tg / sizeof tg[0]; g++)
            for (int f = 0; f < nf; f++)
                for (int v = 0; v < 16; v++) { /* bit 0: the F below T (round down); bit 1: negative;
                                                 * bit 2: a second lane below the normal range; bit 3:
                                                 * element 61, in a step's second half, not 37 */
                    const int AT = (v & 8) ? 61 : 37;
                    const uint32_t r = ref_sr_r(seed, found[f], MXP_BFLOAT16, MXP_FLOAT16);
                    const uint32_t T = (uint32_t)(0x100000000ull - r); /* 1 .. 2^11 */
                    uint32_t F = T;
                    int sh = 0;
                    while ((F >> sh) >= 256) sh++;
                    /* F rounded to 8 significant bits: up (>= T), or the one below T */
                    F = (v & 1) ? ((T - 1) >> sh) << sh : ((T + (1u << sh) - 1) >> sh) << sh;
                    if (F == 0) continue;
                    const float x = ldexpf((float)F, tg[g].q_exp - 32);
                    uint32_t xb;
                    memcpy(&xb, &x, 4);
                    for (int i = 0; i < N; i++) src[i] = 0x3F80; /* 1.0 */
                    src[AT] = (uint16_t)((xb >> 16) | ((v & 2) ? 0x8000u : 0u));
                    if (v & 4) { /* twice the quantum (exact), so that the step has two such lanes */
                        const float x2 = ldexpf(1.0f, tg[g].q_exp + 1);
                        uint32_t x2b;
                        memcpy(&x2b, &x2, 4);
                        src[AT + 1] = (uint16_t)(x2b >> 16);
                    }
                    const mxp__cvt_args a = {false, seed, found[f] - AT, false};
                    tabs[ti]->cvt[tg[g].dt][MXP_BFLOAT16][MXP__SR](dst, src, N, &a);
                    checked++;
                    const int ob = tg[g].dt == MXP_FLOAT16 ? 2 : 1;
                    const unsigned got = ob == 2 ? (unsigned)(dst[2 * AT] | dst[2 * AT + 1] << 8) : dst[AT];
                    const unsigned want = ((v & 2) ? 1u << (8 * ob - 1) : 0u) | ((v & 1) ? 0u : 1u);
                    if (got != want)
                        fail_msg("%s bfloat16 -> %s SR: index %llu (r = 0x%08X) x = %a: got 0x%X, want 0x%X",
                                 tabs[ti]->name, dt_name(tg[g].dt), (unsigned long long)found[f], (unsigned)r,
                                 (double)x, got, want);
                }
    assert_true(checked > ntabs * 3 * WANT * 2);
}

/*
 * Stochastic rounding at the edges of each target's range, with many random words per input.
 * The fast steps take a lane by a range test on its magnitude (the normal range below max
 * finite) and round it by a formula that is wrong outside that range; a test that admits one
 * pattern too many (the largest one below the smallest normal, say) gives a wrong result for
 * only a fraction of random words (1/32 there for bfloat16 -> e4m3fn), which one or two words
 * per input (test_narrow_sources) would likely miss. Here, for every accelerated stochastic entry
 * from a wider or equal source (float64 to float8, and float16 <-> bfloat16), the source patterns
 * within 3 of the nearest one to each edge of the target (half its smallest subnormal, that
 * subnormal, the smallest normal, max finite, max finite plus half and plus one of its last
 * step), either sign, each 256 times: first in runs of 64 equal elements (whole SIMD steps of one
 * value, so that the fast steps see them alone), then shuffled; saturation off and on; the
 * indices across 2^32 in one of the two calls; with the streaming threshold lowered too. Each
 * result against the scalar reference.
 */
static void test_sr_edges(void **state)
{
    (void)state;
    enum { EDGES = 6, NEAR = 3, PER = 256, RUN = 64, MAXP = EDGES * (2 * NEAR + 1) * 2, N = MAXP * PER };
    static const struct {
        int dt, bias, m;
        double maxfin;
    } fmt[] = {{MXP_FLOAT32, 127, 23, 0x1.fffffep127}, {MXP_FLOAT16, 15, 10, 65504.0},
               {MXP_BFLOAT16, 127, 7, 0x1.fep127},      {MXP_FLOAT8_E4M3FN, 7, 3, 448.0},
               {MXP_FLOAT8_E5M2, 15, 2, 57344.0}};
    static const int srcs[] = {MXP_FLOAT64, MXP_FLOAT32, MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN,
                               MXP_FLOAT8_E5M2};
    const mxp__kernels *ref = mxp__scalar_kernels();
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    unsigned char *src = alloc(8 * N), *want = alloc(4 * N), *got = alloc(4 * N + 3);
    int checked = 0;
    for (size_t fi = 0; fi < sizeof fmt / sizeof fmt[0]; fi++)
        for (size_t si = 0; si < sizeof srcs / sizeof srcs[0]; si++) {
            const int d = fmt[fi].dt, s = srcs[si];
            const size_t ib = dsize(s);
            if (ib < dsize(d) || s == d) continue;
            const double qmin = ldexp(1.0, 1 - fmt[fi].bias - fmt[fi].m);
            const double last = ldexp(1.0, ilogb(fmt[fi].maxfin) - fmt[fi].m); /* max finite's step */
            const double edge[EDGES] = {qmin / 2, qmin, ldexp(1.0, 1 - fmt[fi].bias), fmt[fi].maxfin,
                                        fmt[fi].maxfin + last / 2, fmt[fi].maxfin + last};
            /* the patterns: the source's nearest to each edge (the reference's float64 -> s), +-NEAR */
            uint64_t pat[MAXP];
            int np = 0;
            const uint64_t signbit = 1ull << (8 * ib - 1);
            for (int e = 0; e < EDGES; e++) {
                uint64_t p0 = 0;
                const mxp__cvt_args a0 = {false, 0, 0, false};
                if (s == MXP_FLOAT64) memcpy(&p0, &edge[e], 8);
                else ref->cvt[s][MXP_FLOAT64][MXP__RNE](&p0, &edge[e], 1, &a0); /* little-endian */
                for (int k = -NEAR; k <= NEAR; k++) {
                    const uint64_t p = p0 + (uint64_t)(int64_t)k;
                    if ((int64_t)p0 + k < 0 || p >= signbit) continue;
                    pat[np++] = p;
                    pat[np++] = p | signbit;
                }
            }
            const size_t n = (size_t)np * PER;
            for (int layout = 0; layout < 2; layout++) {
                for (size_t i = 0; i < n; i++) {
                    const uint64_t v = pat[layout == 0 ? i / RUN % (size_t)np : rnd32() % (uint32_t)np];
                    memcpy(src + ib * i, &v, ib);
                }
                for (int streaming = 0; streaming < 2; streaming++)
                    for (int ti = 0; ti < ntabs; ti++) {
                        if (tabs[ti]->cvt[d][s][MXP__SR] == ref->cvt[d][s][MXP__SR]) continue;
                        mxp__nt_threshold = streaming ? 4096 : MXP__NT_THRESHOLD_DEFAULT;
                        for (int v = 0; v < 2; v++) { /* saturate off / on; index0 small / across 2^32 */
                            const mxp__cvt_args a = {v == 1, 0xED6E5ull + (uint64_t)layout,
                                                     v == 0 ? 5 : 0x100000000ull - n / 2 - 3, false};
                            char what[160];
                            snprintf(what, sizeof what, "%s %s -> %s SR sat=%d edges of %s, %s%s", tabs[ti]->name,
                                     dt_name(s), dt_name(d), v, dt_name(d), layout ? "shuffled" : "runs of 64",
                                     streaming ? " streaming" : "");
                            run_compare(tabs[ti], d, s, MXP__SR, &a, src, n, want, got + (streaming ? 2 : 3), what);
                            checked++;
                        }
                    }
            }
        }
    end_compare(src, want, got, checked);
}

static void test_narrow_sources(void **state)
{
    (void)state;
    const mxp__kernels *ref = mxp__scalar_kernels();
    enum { N = 65536 };
    unsigned char *src = alloc(2 * N + 1), *want = alloc(8 * N), *got = alloc(8 * N + 3);
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    int checked = 0;
    static const int narrow[] = {MXP_FLOAT16, MXP_BFLOAT16, MXP_FLOAT8_E4M3FN, MXP_FLOAT8_E5M2};
    /* pass 0: every pattern in order (steps of like values); pass 1: the patterns shuffled (an
     * odd multiplier permutes them), 16-bit ones with the exponent's top bit cleared in 63 of 64
     * elements unless they are infinite or NaN (|x| < 2: zeros, subnormal and normal results
     * mixed in every step, some overflow, every infinity and NaN); pass 2: ReLU-like, every
     * third element +-0 and the others of magnitude near 1 (for bfloat16 in [0.5, 2)); passes 1
     * and 2 also with the streaming threshold lowered and an even destination offset (16-bit
     * outputs stream only from an even address), so that the large-call paths run */
    for (int pass = 0; pass < 3; pass++)
    for (int streaming = 0; streaming <= (pass > 0); streaming++)
    for (int ti = 0; ti < ntabs; ti++)
        for (size_t si = 0; si < 4; si++) {
            const int s = narrow[si];
            const size_t ib = dsize(s), n = ib == 2 ? N : 256;
            mxp__nt_threshold = streaming ? 4096 : MXP__NT_THRESHOLD_DEFAULT;
            for (size_t i = 0; i < n; i++) {
                uint16_t v = (uint16_t)(pass ? i * (ib == 2 ? 40503u : 167u) : i);
                const uint16_t expo = s == MXP_FLOAT16 ? 0x7C00u : 0x7F80u; /* 16-bit: inf / NaN */
                if (pass == 1 && ib == 2 && i % 64 != 0 && (v & expo) != expo) v &= 0xBFFFu;
                if (pass == 2) v = i % 3 == 0 ? (uint16_t)(v & (ib == 2 ? 0x8000u : 0x80u))
                                              : (uint16_t)(ib == 2 ? (v & 0x80FFu) | 0x3F00u : v);
                memcpy(src + 1 + ib * i, &v, ib); /* little-endian: the low byte for float8 */
            }
            for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
                for (int mode = 0; mode < MXP__NMODES; mode++) {
                    if (tabs[ti]->cvt[d][s][mode] == ref->cvt[d][s][mode]) continue;
                    for (int v = 0; v < 4; v += 3) { /* saturate off / on, index0 3 / across 2^32 */
                        const mxp__cvt_args a = {v & 1, 0x5EED + (uint64_t)v, v < 2 ? 3 : 0xFFFFFFFFull - 999, false};
                        char what[128];
                        snprintf(what, sizeof what, "%s %s -> %s %s sat=%d all %zu inputs%s%s", tabs[ti]->name,
                                 dt_name(s), dt_name(d), mode ? "SR" : "RNE", v & 1, n,
                                 pass == 1 ? " (shuffled, |x| < 2 mostly)"
                                 : pass == 2 ? " (shuffled, a third +-0)" : "",
                                 streaming ? " streaming" : "");
                        run_compare(tabs[ti], d, s, mode, &a, src + 1, n, want, got + (streaming ? 2 : 3), what);
                        checked++;
                    }
                }
        }
    end_compare(src, want, got, checked);
}

/* One float8 byte for test_f8_runs: with probability 1 / rare (0: never) a magnitude that
 * e5m2 -> e4m3fn rounds (1 .. 31), else one it keeps exactly or overflows (0, 32 .. 127, NaN
 * included); a random sign either way */
static unsigned char f8_run_byte(uint32_t rare)
{
    const uint32_t v = rnd32();
    const unsigned char sign = (unsigned char)(v >> 31 << 7);
    if (rare && (v >> 8) % rare == 0) return (unsigned char)(sign | (1 + v % 31));
    const uint32_t k = v % 97;
    return (unsigned char)(sign | (k == 0 ? 0 : 32 + k % 96));
}

/* e4m3fn <-> e5m2 stochastic rounding on float8 data in regions of random length (1 to 6000
 * elements), each with its own rate of elements that round (none, 1 in 5000, 1 in 300, 1 in
 * 40, 1 in 4, all): the AVX2 e5m2 -> e4m3fn kernel takes runs of exact steps by nearest-even
 * without random bytes, and switches between that split and hashing every step by how many runs
 * a chunk of 64 steps has; each of its paths and the switches between them must give the
 * reference's bytes. Also with the streaming threshold lowered, into an aligned destination
 * from an index that lets the kernels stream (until session 48 the index was not a multiple of
 * 4, so those calls did not stream). */
static void test_f8_runs(void **state)
{
    (void)state;
    enum { N = 200003 };
    static const uint32_t rares[] = {0, 5000, 300, 40, 4, 1};
    unsigned char *src = alloc(N + 1), *want = alloc(N);
    /* 64-byte aligned, so that with an index0 that is a multiple of 32 (the steps start at a
     * word's first bit from e4m3fn) the streaming calls stream from their first element */
    unsigned char *got = aligned_alloc(64, (N + 3 + 63) / 64 * 64);
    assert_non_null(got);
    const mxp__kernels *ref = mxp__scalar_kernels();
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    int checked = 0;
    for (int rep = 0; rep < 3; rep++) {
        for (size_t i = 0; i < N;) {
            const size_t len = 1 + rnd32() % 6000;
            const uint32_t rare = rares[rnd32() % 6];
            for (size_t j = 0; j < len && i < N; j++, i++) src[1 + i] = f8_run_byte(rare);
        }
        for (int streaming = 0; streaming <= 1; streaming++)
            for (int ti = 0; ti < ntabs; ti++)
                for (int dir = 0; dir < 2; dir++) {
                    const int d = dir ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN;
                    const int sf = dir ? MXP_FLOAT8_E4M3FN : MXP_FLOAT8_E5M2;
                    if (tabs[ti]->cvt[d][sf][MXP__SR] == ref->cvt[d][sf][MXP__SR]) continue;
                    mxp__nt_threshold = streaming ? 4096 : MXP__NT_THRESHOLD_DEFAULT;
                    for (int sat = 0; sat <= 1; sat++) {
                        /* index0: pass 2 across 2^32; streaming: aligned, else not */
                        const uint64_t i0 = streaming ? (rep == 2 ? 0x100000000ull - 70016 : 64u * (uint64_t)rep)
                                                      : (rep == 2 ? 0xFFFFFFFFull - 70001 : 5u);
                        const mxp__cvt_args a = {sat, 77 + (uint64_t)rep, i0, false};
                        char what[128];
                        snprintf(what, sizeof what, "%s %s -> %s SR sat=%d runs of float8 data%s (pass %d)",
                                 tabs[ti]->name, dt_name(sf), dt_name(d), sat, streaming ? " streaming" : "", rep);
                        run_compare(tabs[ti], d, sf, MXP__SR, &a, src + 1, N, want, got + (streaming ? 0 : 3),
                                    what);
                        checked++;
                    }
                }
    }
    end_compare(src, want, got, checked);
}

/* Every accelerated entry from or to float64 on hard float64 / float32 data (fill64: ties and
 * near-ties of every format, overflow and underflow boundaries, NaN payloads) under five MXCSR
 * settings: default, FTZ + DAZ, round up, round down, toward zero (the float64 kernels use
 * MXCSR-dependent instructions; they must set their own mode and give the caller's rounding
 * mode, masks, FTZ and DAZ back, which is checked too; flags are mxp_convert's business, see
 * test_fenv). */
static void test_f64(void **state)
{
    (void)state;
    enum { N = 6007 };
    const mxp__kernels *ref = mxp__scalar_kernels();
    unsigned char *src = alloc(8 * N + 5), *want = alloc(8 * N), *got = alloc(8 * N + 40);
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    int checked = 0;
#ifdef HAVE_MXCSR
    static const unsigned csrs[] = {0x1F80u, 0x9FC0u, 0x5F80u, 0x3F80u, 0x7F80u};
    const unsigned old_csr = get_csr();
#else
    static const unsigned csrs[] = {0};
#endif
    /* pass 1: the streaming threshold lowered, so that the large-call paths (streaming stores
     * from a 32-byte-aligned point on) run too: destinations 0, 16 and 32 bytes past a 16-byte
     * aligned block without saturation, 3 with it */
    for (int pass = 0; pass < 2; pass++)
    for (int ti = 0; ti < ntabs; ti++)
        for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
            for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++)
                for (int mode = 0; mode < MXP__NMODES; mode++) {
                    if (s != MXP_FLOAT64 && d != MXP_FLOAT64) continue;
                    if (tabs[ti]->cvt[d][s][mode] == ref->cvt[d][s][mode]) continue;
                    for (size_t ci = 0; ci < sizeof csrs / sizeof csrs[0]; ci++) {
                        const size_t so = 1 + ci % 5, dof = ci % 2 ? 3 : 8 * ci, n = N - ci * 1000; /* >= 2007 */
                        mxp__nt_threshold = pass ? 4096 : MXP__NT_THRESHOLD_DEFAULT;
                        fill(src + so, n, dsize(s));
                        /* index0: also straddling 2^32 (the stochastic kernels re-key there) */
                        const mxp__cvt_args a = {ci & 1, 99, ci % 3 == 1 ? 0xFFFFFFFFull - 777 : 0x12345, false};
                        char what[128];
                        snprintf(what, sizeof what, "%s %s -> %s %s sat=%d mxcsr=0x%04x dst+%zu%s", tabs[ti]->name,
                                 dt_name(s), dt_name(d), mode ? "SR" : "RNE", (int)(ci & 1), csrs[ci], dof,
                                 pass ? " (streaming threshold 4096)" : "");
                        ref->cvt[d][s][mode](want, src + so, n, &a);
#ifdef HAVE_MXCSR
                        set_csr(csrs[ci]);
#endif
                        tabs[ti]->cvt[d][s][mode](got + dof, src + so, n, &a);
#ifdef HAVE_MXCSR
                        const unsigned after = get_csr();
                        set_csr(old_csr);
                        if ((after & ~0x3Fu) != csrs[ci]) fail_msg("%s: MXCSR 0x%04x after the call", what, after);
#endif
                        mxp__nt_threshold = MXP__NT_THRESHOLD_DEFAULT;
                        expect_same(want, got + dof, src + so, n, d, s, mode, what);
                        checked++;
                    }
                }
    free(src);
    free(want);
    free(got);
    skip_if_none(checked);
}

/* float64 -> float32 and narrow, both modes, on mostly regular data: doubles over [-8, 8] with
 * fill64's hard values (ties and near-ties of every format, overflow, underflow, NaN, float32
 * subnormals) at several rates, with or without ReLU zeros, so that the direct kernels' fast
 * steps (n64_loop in cvt_simd_impl.h; the stochastic sr_f64_run / sr_f64z_run) run long and
 * leave at every kind of lane (a lone small float8 lane is patched in the step, anything else
 * takes composed blocks of growing length, or the general stochastic step); under three MXCSR
 * settings, sizes with every tail, odd offsets, stochastic calls across 2^32 indices, and with
 * the streaming threshold lowered. */
static void test_f64_mixed(void **state)
{
    (void)state;
    enum { N = 4133 };
    const mxp__kernels *ref = mxp__scalar_kernels();
    unsigned char *src = alloc(8 * N + 8), *want = alloc(8 * N), *got = alloc(8 * N + 80);
    const mxp__kernels *tabs[2 * MXP__ISA_COUNT + 1];
    mxp__kernels scratch[MXP__ISA_COUNT + 1];
    const int ntabs = tables_to_check(tabs, scratch);
    static const uint32_t rates[] = {2, 9, 70, 600, 1u << 30};
#ifdef HAVE_MXCSR
    static const unsigned csrs[] = {0x1F80u, 0x9FC0u, 0x7F80u};
    const unsigned old_csr = get_csr();
#endif
    int checked = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int ti = 0; ti < ntabs; ti++)
            for (size_t ri = 0; ri < sizeof rates / sizeof rates[0]; ri++)
                for (int relu = 0; relu < 2; relu++) {
                    const size_t so = 1 + ri % 3, n = N - 13 * ri - 7 * (size_t)relu - (size_t)pass;
                    for (size_t i = 0; i < n; i++) {
                        uint64_t u;
                        if (relu && rnd32() % 2) {
                            u = rnd32() % 8 ? 0 : 0x8000000000000000ull;
                        } else if (rnd32() % rates[ri] == 0) {
                            u = fill64();
                        } else {
                            const double x = (double)(tu_rand64(&rng_state) >> 11) * 0x1p-53 * 16.0 - 8.0;
                            memcpy(&u, &x, 8);
                        }
                        memcpy(src + so + 8 * i, &u, 8);
                    }
                    for (int mode = 0; mode < MXP__NMODES; mode++)
                    for (int d = MXP_FLOAT32; d < MXP_FLOAT_DTYPE_COUNT; d++) {
                        if (tabs[ti]->cvt[d][MXP_FLOAT64][mode] == ref->cvt[d][MXP_FLOAT64][mode]) continue;
                        const int sat = (int)(ri + (size_t)relu) % 2;
                        const size_t dof = 2 * ri + (size_t)relu + (size_t)d + 4 * (size_t)mode;
                        /* stochastic: some calls straddle 2^32 indices (the kernels re-key there) */
                        const uint64_t index0 = mode == MXP__SR && ri % 2 ? 0xFFFFFFFFull - 1234 - ri : 5 + ri;
                        const mxp__cvt_args a = {sat != 0, 7 + ri, index0, false};
                        char what[160];
                        snprintf(what, sizeof what, "%s f64 -> %s %s sat=%d, 1 in %u hard%s, n=%zu dst+%zu%s",
                                 tabs[ti]->name, dt_name(d), mode ? "SR" : "RNE", sat, (unsigned)rates[ri],
                                 relu ? ", ReLU zeros" : "", n, dof, pass ? " (streaming threshold 4096)" : "");
                        ref->cvt[d][MXP_FLOAT64][mode](want, src + so, n, &a);
                        mxp__nt_threshold = pass ? 4096 : MXP__NT_THRESHOLD_DEFAULT;
#ifdef HAVE_MXCSR
                        const unsigned csr = csrs[(ri + (size_t)d) % 3];
                        set_csr(csr);
#endif
                        tabs[ti]->cvt[d][MXP_FLOAT64][mode](got + dof, src + so, n, &a);
#ifdef HAVE_MXCSR
                        const unsigned after = get_csr();
                        set_csr(old_csr);
                        if ((after & ~0x3Fu) != csr) fail_msg("%s: MXCSR 0x%04x after the call", what, after);
#endif
                        mxp__nt_threshold = MXP__NT_THRESHOLD_DEFAULT;
                        expect_same(want, got + dof, src + so, n, d, MXP_FLOAT64, mode, what);
                        checked++;
                    }
                }
    free(src);
    free(want);
    free(got);
    skip_if_none(checked);
}

/* mxp_convert_ex for every floating pair, both modes, on hard data, with every floating-point
 * exception unmasked and no flag set (also over two threads, which inherit nothing: each chunk
 * sets its own state): no trap, the reference's bits, and MXCSR exactly as before the call. */
static void test_fenv(void **state)
{
    (void)state;
#ifdef MXP_EMU512
    /* the emulated program's default path is the emulated avx512 table, whose intrinsics are
     * C code: the FP environment is the native programs' business (and the emulated kernels
     * at 3001 elements x 288 calls cost minutes under the sanitizers) */
    print_message("checked by the native program: skipped\n");
    skip();
#endif
#ifdef HAVE_MXCSR
    enum { N = 3001 };
    const mxp__kernels *ref = mxp__scalar_kernels();
    unsigned char *src = alloc(8 * N), *want = alloc(8 * N), *got = alloc(8 * N);
    const size_t saved_min = mxp__convert_min_per_thread;
    const unsigned old_csr = get_csr();
    int checked = 0;
    for (int d = 0; d < MXP_FLOAT_DTYPE_COUNT; d++)
        for (int s = 0; s < MXP_FLOAT_DTYPE_COUNT; s++)
            for (int mode = 0; mode < MXP__NMODES; mode++)
                for (int v = 0; v < 4; v++) {
                    fill(src, N, dsize(s));
                    const mxp_convert_opts o = {mode ? MXP_ROUND_STOCHASTIC : MXP_ROUND_NEAREST_EVEN, v & 1,
                                                77, v < 2 ? 1 : 2};
                    const mxp__cvt_args a = {v & 1, 77, 0, false};
                    ref->cvt[d][s][mode](want, src, N, &a);
                    mxp__convert_min_per_thread = 512;
                    static const unsigned csrs[] = {0x0000u, 0x6000u};
                    const unsigned csr = csrs[v & 1];
                    set_csr(csr);
                    const mxp_status st = mxp_convert_ex(got, (mxp_dtype)d, src, (mxp_dtype)s, N, &o);
                    const unsigned after = get_csr();
                    set_csr(old_csr);
                    mxp__convert_min_per_thread = saved_min;
                    char what[128];
                    snprintf(what, sizeof what, "mxp_convert_ex %s -> %s %s sat=%d threads=%d, MXCSR 0x%04x",
                             dt_name(s), dt_name(d), mode ? "SR" : "RNE", v & 1, o.threads, csr);
                    if (st != MXP_OK) fail_msg("%s: status %d", what, (int)st);
                    if (after != csr) fail_msg("%s: MXCSR 0x%04x after the call", what, after);
                    expect_same(want, got, src, N, d, s, mode, what);
                    checked++;
                }
    assert_int_equal(checked, MXP_FLOAT_DTYPE_COUNT * MXP_FLOAT_DTYPE_COUNT * MXP__NMODES * 4);
    free(src);
    free(want);
    free(got);
#else
    print_message("no MXCSR on this target: skipped\n");
    skip();
#endif
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc > 1 && (strcmp(argv[1], "--print-isa") == 0 || strcmp(argv[1], "--print-fallback") == 0))
        return child_main(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_avx2),
        cmocka_unit_test(test_avx512),
        cmocka_unit_test(test_avx512_bf16),
        cmocka_unit_test(test_neon),
        cmocka_unit_test_teardown(test_mixed_data, restore_knobs),
        cmocka_unit_test(test_narrow_sources),
        cmocka_unit_test(test_f8_runs),
        cmocka_unit_test(test_sr_boundary),
        cmocka_unit_test(test_sr_boundary16),
        cmocka_unit_test(test_sr_edges),
        cmocka_unit_test(test_f64),
        cmocka_unit_test(test_f64_mixed),
        cmocka_unit_test(test_fenv),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_streaming_short),
        cmocka_unit_test(test_compose_streaming),
        cmocka_unit_test(test_args_stream),
        cmocka_unit_test(test_lone_tiny),
        cmocka_unit_test(test_lone_tiny16),
        cmocka_unit_test(test_zero_tiny16),
        cmocka_unit_test(test_dense_tiny),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (tolerated)
        printf("MXP_TEST_F16C_TIES_AWAY: accepted %zu ties rounded away from zero (emulator erratum)\n",
               tolerated);
    return failed;
}
