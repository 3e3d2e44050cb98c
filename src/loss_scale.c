/*
 * loss_scale.c - no-op / static / dynamic loss scales (docs/DESIGN.md section 7, jmp semantics),
 * the public all-finite and unscale-and-check entry points (the work is in the kernels),
 * skip-step select, the data-parallel reduction hook, and save/restore as one line of text.
 *
 * Save/restore writes floats as exact C99 hexadecimal with our own formatter and parser, so
 * the text and the round trip never depend on the C locale (printf's %a and strtod would use
 * the locale's decimal point); decimals given to restore reach strtof without a decimal point.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "finite.h"
#include "kernels.h"
#include "mixprec/loss_scale.h"

/* ---- construction, validity, adjust ----------------------------------------------------- */

static mxp_loss_scale make(mxp_loss_scale_kind kind, float scale, float min_scale)
{
    mxp_loss_scale s;
    s.kind = kind;
    s.scale = scale;
    s.counter = 0;
    s.period = MXP_LOSS_SCALE_DEFAULT_PERIOD;
    s.factor = MXP_LOSS_SCALE_DEFAULT_FACTOR;
    s.min_scale = min_scale;
    s.max_scale = INFINITY;
    return s;
}

mxp_loss_scale mxp_loss_scale_noop(void) { return make(MXP_LOSS_SCALE_NOOP, 1.0f, 1.0f); }

mxp_loss_scale mxp_loss_scale_static(float scale) { return make(MXP_LOSS_SCALE_STATIC, scale, 0.0f); }

/* min_scale 1 (jmp's default) unless the initial scale is below 1: then 0, so the state is
 * valid and an overflow still halves the scale (PyTorch's GradScaler has no floor). A floor of 1
 * would make the state invalid (frozen by adjust); a floor at the initial scale would keep it
 * from ever shrinking. loss_scale.h says why. */
mxp_loss_scale mxp_loss_scale_dynamic(float initial_scale)
{
    const unsigned csr = mxp__fenv_enter_ieee(); /* a subnormal initial scale is > 0 under DAZ too */
    MXP__PIN_F(initial_scale); /* kernels.h: the comparisons stay between enter and leave */
    bool below_one = initial_scale > 0.0f && initial_scale < 1.0f;
    MXP__PIN_R(below_one);
    mxp__fenv_leave(csr);
    return make(MXP_LOSS_SCALE_DYNAMIC, initial_scale, below_one ? 0.0f : 1.0f);
}

/* NULL when s is valid, else a static description of the first broken rule. The rules are
 * docs/DESIGN.md's, for every kind (a static or no-op state carries the same fields), plus
 * 0 <= counter < period for a dynamic one (adjust relies on it). */
static const char *invalid_reason_ieee(const mxp_loss_scale *s)
{
    if ((unsigned)s->kind > MXP_LOSS_SCALE_DYNAMIC) return "kind must be noop, static or dynamic";
    if (s->period < 1) return "period must be >= 1";
    if (!(isfinite(s->factor) && s->factor > 1.0f)) return "factor must be finite and > 1";
    if (!(isfinite(s->scale) && s->scale > 0.0f)) return "scale must be finite and > 0";
    if (s->kind == MXP_LOSS_SCALE_NOOP && s->scale != 1.0f) return "scale must be 1 for a noop loss scale";
    if (!(s->min_scale >= 0.0f)) return "min_scale must be >= 0";
    if (!(s->min_scale <= s->scale)) return "min_scale must be <= scale";
    if (!(s->scale <= s->max_scale)) return "max_scale must be >= scale";
    if (s->kind == MXP_LOSS_SCALE_DYNAMIC && (s->counter < 0 || s->counter >= s->period))
        return "counter must be in 0 .. period-1";
    return NULL;
}
/* invalid_reason_ieee in the default IEEE environment (kernels.h, mxp__fenv_enter_ieee): under
 * DAZ a subnormal scale or min_scale compared as 0, so a valid state with a tiny scale was
 * refused and 0x1p-140 "was not > 0" (found by an audit, 2026-11-28) */
static const char *invalid_reason(const mxp_loss_scale *s)
{
    mxp_loss_scale c = *s;
    const unsigned csr = mxp__fenv_enter_ieee();
    MXP__PIN_F(c.scale); /* kernels.h: the comparisons stay between enter and leave */
    MXP__PIN_F(c.factor);
    MXP__PIN_F(c.min_scale);
    MXP__PIN_F(c.max_scale);
    const char *why = invalid_reason_ieee(&c);
    MXP__PIN_R(why);
    mxp__fenv_leave(csr);
    return why;
}

/* a loss scale's four floats as message text (mxp__format_float: exact, any locale and DAZ) */
typedef struct float_texts {
    char scale[32], factor[32], min[32], max[32];
} float_texts;
static float_texts texts4(float scale, float factor, float min_scale, float max_scale)
{
    float_texts t;
    mxp__format_float(scale, t.scale);
    mxp__format_float(factor, t.factor);
    mxp__format_float(min_scale, t.min);
    mxp__format_float(max_scale, t.max);
    return t;
}
static float_texts texts_of(const mxp_loss_scale *s) { return texts4(s->scale, s->factor, s->min_scale, s->max_scale); }

mxp_status mxp_loss_scale_validate(const mxp_loss_scale *s)
{
    if (!s) return mxp__fail(MXP_EINVAL, "mxp_loss_scale_validate: the loss scale s is NULL");
    const char *why = invalid_reason(s);
    if (why) {
        float_texts t = texts_of(s);
        return mxp__fail(MXP_EINVAL,
                         "mxp_loss_scale_validate: invalid loss scale (kind=%d scale=%s counter=%ld "
                         "period=%ld factor=%s min_scale=%s max_scale=%s): %s",
                         (int)s->kind, t.scale, (long)s->counter, (long)s->period, t.factor, t.min, t.max, why);
    }
    return MXP_OK;
}

bool mxp_loss_scale_is_valid(mxp_loss_scale s) { return invalid_reason(&s) == NULL; }

mxp_status mxp_loss_scale_static_ex(float scale, mxp_loss_scale *out)
{
    if (!out) return mxp__fail(MXP_EINVAL, "mxp_loss_scale_static_ex: out is NULL");
    if (!mxp__positive_finite(scale)) {
        char t[32];
        mxp__format_float(scale, t);
        return mxp__fail(MXP_EINVAL, "mxp_loss_scale_static_ex: scale %s must be finite and > 0", t);
    }
    *out = mxp_loss_scale_static(scale);
    return MXP_OK;
}

static mxp_status dynamic_ex_ieee(float initial_scale, int32_t period, float factor, float min_scale,
                                  float max_scale, mxp_loss_scale *out)
{
    static const char fn[] = "mxp_loss_scale_dynamic_ex";
    if (!out) return mxp__fail(MXP_EINVAL, "%s: out is NULL", fn);
    /* each argument on its own first, so the message names the one that is wrong */
    const bool bad_initial = !(isfinite(initial_scale) && initial_scale > 0.0f);
    const bool bad_factor = !(isfinite(factor) && factor > 1.0f);
    const bool bad_min = !(min_scale >= 0.0f && min_scale <= initial_scale);
    const bool bad_max = !(max_scale >= initial_scale);
    if (bad_initial || period < 1 || bad_factor || bad_min || bad_max) {
        const float_texts t = texts4(initial_scale, factor, min_scale, max_scale);
        if (bad_initial) return mxp__fail(MXP_EINVAL, "%s: initial_scale %s must be finite and > 0", fn, t.scale);
        if (period < 1)
            return mxp__fail(MXP_EINVAL, "%s: period %ld must be >= 1 (finite steps before growing)", fn,
                             (long)period);
        if (bad_factor)
            return mxp__fail(MXP_EINVAL,
                             "%s: factor %s must be finite and > 1 (the scale is multiplied by it to "
                             "grow and divided by it to shrink)",
                             fn, t.factor);
        if (bad_min)
            return mxp__fail(MXP_EINVAL, "%s: min_scale %s must be in [0, initial_scale = %s]", fn, t.min, t.scale);
        return mxp__fail(MXP_EINVAL, "%s: max_scale %s must be >= initial_scale = %s (+inf: no cap)", fn, t.max,
                         t.scale);
    }
    mxp_loss_scale s = make(MXP_LOSS_SCALE_DYNAMIC, initial_scale, min_scale);
    s.period = period;
    s.factor = factor;
    s.max_scale = max_scale;
    if (mxp_loss_scale_validate(&s) != MXP_OK) return MXP_EINVAL; /* not reached: same rules */
    *out = s;
    return MXP_OK;
}

mxp_status mxp_loss_scale_dynamic_ex(float initial_scale, int32_t period, float factor,
                                     float min_scale, float max_scale, mxp_loss_scale *out)
{
    const unsigned csr = mxp__fenv_enter_ieee(); /* the checks compare subnormals as they are */
    MXP__PIN_F(initial_scale); /* kernels.h: the comparisons stay between enter and leave */
    MXP__PIN_F(factor);
    MXP__PIN_F(min_scale);
    MXP__PIN_F(max_scale);
    mxp_status st = dynamic_ex_ieee(initial_scale, period, factor, min_scale, max_scale, out);
    MXP__PIN_R(st);
    mxp__fenv_leave(csr);
    return st;
}

static mxp_loss_scale adjust_ieee(mxp_loss_scale s, bool grads_finite)
{
    if (s.kind != MXP_LOSS_SCALE_DYNAMIC || invalid_reason(&s)) return s;
    if (grads_finite) {
        /* counter < period, so counter + 1 cannot overflow */
        s.counter += 1;
        if (s.counter == s.period) {
            float grown = s.scale * s.factor; /* float32, as jmp */
            if (isfinite(grown)) s.scale = grown < s.max_scale ? grown : s.max_scale;
            s.counter = 0;
        }
    } else {
        /* jmp: max(min_scale, scale / factor). With min_scale 0 the quotient underflows to 0
         * after ~150 halvings (sooner under FTZ); a zero scale is invalid and could never grow
         * back, so then the scale stays, as growth stays when scale * factor is not finite.
         * (Found by fuzz_loss_scale: adjust must keep a valid state valid.) */
        float shrunk = s.scale / s.factor;
        float next = shrunk > s.min_scale ? shrunk : s.min_scale;
        if (next > 0.0f) s.scale = next;
        s.counter = 0;
    }
    return s;
}

/* jmp's rule in float32 arithmetic of the default IEEE environment whatever the caller's MXCSR:
 * under FTZ a shrink to a subnormal scale would flush to 0 and leave the scale where it was */
mxp_loss_scale mxp_loss_scale_adjust(mxp_loss_scale s, bool grads_finite)
{
    const unsigned csr = mxp__fenv_enter_ieee();
    MXP__PIN_F(s.scale); /* kernels.h: the arithmetic stays between enter and leave */
    MXP__PIN_F(s.factor);
    MXP__PIN_F(s.min_scale);
    MXP__PIN_F(s.max_scale);
    mxp_loss_scale r = adjust_ieee(s, grads_finite);
    MXP__PIN_F(r.scale);
    mxp__fenv_leave(csr);
    return r;
}

bool mxp_loss_scale_at_min(mxp_loss_scale s)
{
    const unsigned csr = mxp__fenv_enter_ieee();
    MXP__PIN_F(s.scale); /* kernels.h: the arithmetic stays between enter and leave */
    MXP__PIN_F(s.factor);
    MXP__PIN_F(s.min_scale);
    bool r = s.kind == MXP_LOSS_SCALE_DYNAMIC && (s.scale <= s.min_scale || !(s.scale / s.factor > 0.0f));
    MXP__PIN_R(r);
    mxp__fenv_leave(csr);
    return r;
}

float mxp_loss_scale_scale(mxp_loss_scale s, float loss)
{
    if (s.kind == MXP_LOSS_SCALE_NOOP) return loss;
    const unsigned csr = mxp__fenv_enter_ieee();
    MXP__PIN_F(loss); /* kernels.h: the multiply stays between enter and leave */
    MXP__PIN_F(s.scale);
    float r = loss * s.scale;
    MXP__PIN_F(r);
    mxp__fenv_leave(csr);
    return r;
}

/* ---- the array passes (kernels do the work) ---------------------------------------------- */

static const char *const any_dtype_list =
    "float64, float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, or an integer / bool dtype";
static const char *const float_list =
    "float64, float32, float16, bfloat16, float8_e4m3fn or float8_e5m2";

/* "float16" for a valid dtype, else its number in buf. */
static const char *dtype_text(mxp_dtype d, char buf[24])
{
    if (mxp__dtype_valid(d)) return mxp_dtype_name(d);
    snprintf(buf, 24, "%d", (int)d);
    return buf;
}

/* x (n elements of dtype, n > 0) is present and its byte span is representable. */
static mxp_status check_buffer(const char *fn, const char *what, const void *x, mxp_dtype dtype,
                               size_t n, size_t *bytes)
{
    if (!x) return mxp__fail(MXP_EINVAL, "%s: %s is NULL with n = %zu", fn, what, n);
    if (!mxp__span_ok(x, n, mxp_dtype_size(dtype), bytes))
        return mxp__fail(MXP_EINVAL,
                         "%s: n = %zu elements of %s at %s is past any possible buffer (n * %zu "
                         "bytes exceeds PTRDIFF_MAX or wraps the address space)",
                         fn, n, mxp_dtype_name(dtype), what, mxp_dtype_size(dtype));
    return MXP_OK;
}

/* The loss scale a pass divides by must be finite and > 0: 0 and tiny scales would give an
 * infinite inv, +inf a zero inv (every gradient silently 0), NaN NaN, and a negative scale
 * would flip every gradient's sign while reporting success. */
static mxp_status check_scale(const char *fn, float scale)
{
    if (mxp__positive_finite(scale)) return MXP_OK;
    char t[32];
    mxp__format_float(scale, t);
    return mxp__fail(MXP_EINVAL, "%s: scale %s is not a loss scale (expected finite and > 0)", fn, t);
}

mxp_status mxp_all_finite_s(const void *x, mxp_dtype dtype, size_t n, bool *finite)
{
    static const char fn[] = "mxp_all_finite_s";
    char buf[24];
    if (!finite) return mxp__fail(MXP_EINVAL, "%s: finite is NULL (it receives the result)", fn);
    if (!mxp__dtype_valid(dtype))
        return mxp__fail(MXP_EINVAL, "%s: dtype %s is not a valid mxp_dtype (expected %s)", fn,
                         dtype_text(dtype, buf), any_dtype_list);
    if (n == 0) {
        *finite = true;
        return MXP_OK;
    }
    size_t bytes;
    mxp_status st = check_buffer(fn, "x", x, dtype, n, &bytes);
    if (st != MXP_OK) return st;
    if (!mxp_dtype_is_floating(dtype)) { /* integers and bools are always finite */
        *finite = true;
        return MXP_OK;
    }
    const unsigned csr = mxp__fenv_enter(); /* no trap, MXCSR unchanged (kernels.h) */
    const bool r = mxp__kernels_active()->all_finite[dtype](x, n);
    mxp__fenv_leave(csr);
    *finite = r;
    return MXP_OK;
}

bool mxp_all_finite(const void *x, mxp_dtype dtype, size_t n)
{
    bool finite = false;
    return mxp__in("mxp_all_finite", mxp_all_finite_s(x, dtype, n, &finite)) == MXP_OK && finite;
}

mxp_status mxp_unscale_check_s(void *x, mxp_dtype dtype, size_t n, float scale, bool *finite)
{
    static const char fn[] = "mxp_unscale_check_s";
    char buf[24];
    if (!finite) return mxp__fail(MXP_EINVAL, "%s: finite is NULL (it receives the result)", fn);
    if (!mxp_dtype_is_floating(dtype))
        return mxp__fail(MXP_EINVAL, "%s: dtype %s is not a floating dtype (expected %s)", fn,
                         dtype_text(dtype, buf), float_list);
    mxp_status st = check_scale(fn, scale);
    if (st != MXP_OK) return st;
    if (n == 0) {
        *finite = true;
        return MXP_OK;
    }
    size_t bytes;
    if ((st = check_buffer(fn, "x", x, dtype, n, &bytes)) != MXP_OK) return st;
    /* inv = (float)(1.0 / (double)scale), computed so that FTZ/DAZ cannot flush it */
    const unsigned csr = mxp__fenv_enter(); /* no trap, MXCSR unchanged (kernels.h) */
    const bool r = mxp__kernels_active()->unscale_check[dtype](x, n, mxp__unscale_inv(scale));
    mxp__fenv_leave(csr);
    *finite = r;
    return MXP_OK;
}

bool mxp_unscale_check(void *x, mxp_dtype dtype, size_t n, float scale)
{
    bool finite = false;
    return mxp__in("mxp_unscale_check", mxp_unscale_check_s(x, dtype, n, scale, &finite)) == MXP_OK && finite;
}

mxp_status mxp_unscale_check_into_s(void *dst, mxp_dtype dt, const void *src, mxp_dtype st,
                                    size_t n, float scale, bool *finite)
{
    static const char fn[] = "mxp_unscale_check_into_s";
    char buf[24];
    if (!finite) return mxp__fail(MXP_EINVAL, "%s: finite is NULL (it receives the result)", fn);
    if (dt != MXP_FLOAT32)
        return mxp__fail(MXP_EINVAL,
                         "%s: destination dtype %s is not accepted (unscaled gradients go to "
                         "float32 master gradients: dt must be float32)",
                         fn, dtype_text(dt, buf));
    if (!mxp_dtype_is_floating(st) || st == MXP_FLOAT64)
        return mxp__fail(MXP_EINVAL,
                         "%s: source dtype %s is not accepted (expected float32, float16, "
                         "bfloat16, float8_e4m3fn or float8_e5m2 scaled gradients)",
                         fn, dtype_text(st, buf));
    mxp_status s = check_scale(fn, scale);
    if (s != MXP_OK) return s;
    if (n == 0) {
        *finite = true;
        return MXP_OK;
    }
    size_t db = 0, sb = 0;
    if ((s = check_buffer(fn, "dst", dst, dt, n, &db)) != MXP_OK) return s;
    if ((s = check_buffer(fn, "src", src, st, n, &sb)) != MXP_OK) return s;
    const bool in_place = dst == src && st == MXP_FLOAT32;
    if (!in_place && mxp__overlap(dst, db, src, sb))
        return mxp__fail(MXP_EINVAL,
                         "%s: dst and src overlap (%s -> float32, n = %zu); only the very same "
                         "float32 buffer (in place) is allowed",
                         fn, mxp_dtype_name(st), n);
    const mxp__kernels *k = mxp__kernels_active();
    const float inv = mxp__unscale_inv(scale);
    const unsigned csr = mxp__fenv_enter(); /* no trap, MXCSR unchanged (kernels.h) */
    const bool r = in_place ? k->unscale_check[MXP_FLOAT32](dst, n, inv)
                            : k->unscale_into[st](dst, src, n, inv);
    mxp__fenv_leave(csr);
    *finite = r;
    return MXP_OK;
}

bool mxp_unscale_check_into(void *dst, mxp_dtype dt, const void *src, mxp_dtype st, size_t n,
                            float scale)
{
    bool finite = false;
    return mxp__in("mxp_unscale_check_into", mxp_unscale_check_into_s(dst, dt, src, st, n, scale, &finite)) ==
               MXP_OK &&
           finite;
}

mxp_status mxp_select(bool pred, void *out, const void *a, const void *b, mxp_dtype dtype, size_t n)
{
    static const char fn[] = "mxp_select";
    char buf[24];
    if (!mxp__dtype_valid(dtype))
        return mxp__fail(MXP_EINVAL, "%s: dtype %s is not a valid mxp_dtype (expected %s)", fn,
                         dtype_text(dtype, buf), any_dtype_list);
    if (n == 0) return MXP_OK;
    size_t ob = 0, ab = 0, bb = 0;
    mxp_status st;
    if ((st = check_buffer(fn, "out", out, dtype, n, &ob)) != MXP_OK) return st;
    if ((st = check_buffer(fn, "a", a, dtype, n, &ab)) != MXP_OK) return st;
    if ((st = check_buffer(fn, "b", b, dtype, n, &bb)) != MXP_OK) return st;
    /* out may be a or b itself; any other overlap with out is refused, whichever is selected
     * (a and b may overlap each other: they are only read) */
    if ((out != a && mxp__overlap(out, ob, a, ab)) || (out != b && mxp__overlap(out, ob, b, bb)))
        return mxp__fail(MXP_EINVAL,
                         "%s: out overlaps %s without being the same buffer (n = %zu elements of "
                         "%s); out may only be a or b itself or disjoint from both",
                         fn, (out != a && mxp__overlap(out, ob, a, ab)) ? "a" : "b", n,
                         mxp_dtype_name(dtype));
    const void *src = pred ? a : b;
    if (src != out) memcpy(out, src, ob);
    return MXP_OK;
}

mxp_status mxp_loss_scale_adjust_reduce(mxp_loss_scale *s, bool local_finite,
                                        mxp_finite_reduce_fn reduce, void *ctx, bool *grads_finite)
{
    if (!s) return mxp__fail(MXP_EINVAL, "mxp_loss_scale_adjust_reduce: the loss scale s is NULL");
    int flag = local_finite ? 1 : 0;
    if (reduce) { /* called even for an invalid state: collective calls stay matched */
        int rc = reduce(&flag, ctx);
        if (rc != 0)
            return mxp__fail(MXP_EIO,
                             "mxp_loss_scale_adjust_reduce: the reduction callback failed "
                             "(returned %d); loss scale unchanged",
                             rc);
    }
    const char *why = invalid_reason(s);
    if (why) {
        float_texts t = texts_of(s);
        return mxp__fail(MXP_EINVAL,
                         "mxp_loss_scale_adjust_reduce: invalid loss scale (kind=%d scale=%s "
                         "counter=%ld period=%ld factor=%s min_scale=%s max_scale=%s): %s; it "
                         "would never change",
                         (int)s->kind, t.scale, (long)s->counter, (long)s->period, t.factor, t.min, t.max, why);
    }
    *s = mxp_loss_scale_adjust(*s, flag != 0);
    if (grads_finite) *grads_finite = flag != 0;
    return MXP_OK;
}

/* ---- save ------------------------------------------------------------------------------- */

static const char *const kind_names[] = {"noop", "static", "dynamic"};
#define TAG "mxp-loss-scale/1"

/*
 * Exact hexadecimal text of a float, C99 %a style: [-]0x1.<hex>p<+|-><dec>, trailing zero
 * digits dropped, subnormals normalised (0x1p-149); [-]0x0p+0, [-]inf, [-]nan.
 * The 23 fraction bits shifted left by one make 24 bits = 6 hex digits.
 */
static void format_hex_float(float f, char out[32])
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const char *sign = (u >> 31) ? "-" : "";
    uint32_t e = (u >> 23) & 0xFF, m = u & 0x7FFFFF;
    if (e == 0xFF) {
        snprintf(out, 32, "%s%s", sign, m ? "nan" : "inf");
        return;
    }
    if (e == 0 && m == 0) {
        snprintf(out, 32, "%s0x0p+0", sign);
        return;
    }
    int exp = (int)e - 127;
    if (e == 0) { /* subnormal: normalise so the leading 1 is the hidden bit */
        exp = -126;
        while (!(m & 0x800000)) {
            m <<= 1;
            exp--;
        }
        m &= 0x7FFFFF;
    }
    uint32_t frac = m << 1; /* 24 bits */
    int digits = 6;
    while (digits > 0 && (frac & 0xF) == 0) {
        frac >>= 4;
        digits--;
    }
    if (digits)
        snprintf(out, 32, "%s0x1.%0*xp%+d", sign, digits, (unsigned)frac, exp);
    else
        snprintf(out, 32, "%s0x1p%+d", sign, exp);
}

int mxp_loss_scale_save(const mxp_loss_scale *s, char *buf, size_t cap)
{
    if (!s) {
        (void)mxp__fail(MXP_EINVAL, "mxp_loss_scale_save: the loss scale s is NULL");
        return -1;
    }
    if (!buf && cap > 0) {
        (void)mxp__fail(MXP_EINVAL, "mxp_loss_scale_save: buf is NULL with cap = %zu (NULL is "
                        "allowed only with cap 0, to measure the text)", cap);
        return -1;
    }
    char sc[32], fa[32], mi[32], ma[32];
    format_hex_float(s->scale, sc);
    format_hex_float(s->factor, fa);
    format_hex_float(s->min_scale, mi);
    format_hex_float(s->max_scale, ma);
    char kind_buf[16];
    const char *kind = kind_buf;
    if ((unsigned)s->kind < sizeof kind_names / sizeof kind_names[0])
        kind = kind_names[s->kind];
    else
        snprintf(kind_buf, sizeof kind_buf, "%d", (int)s->kind);
    return snprintf(cap ? buf : NULL, cap,
                    TAG " kind=%s scale=%s counter=%ld period=%ld factor=%s min_scale=%s max_scale=%s",
                    kind, sc, (long)s->counter, (long)s->period, fa, mi, ma);
}

/* ---- restore ---------------------------------------------------------------------------- */

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool token_is(const char *p, size_t len, const char *word)
{
    size_t k = strlen(word);
    if (len != k) return false;
    for (size_t i = 0; i < k; i++) {
        char c = p[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != word[i]) return false;
    }
    return true;
}

/* The rest of a number from p[i] on: nothing, or the exponent letter (`letter` or its upper
 * case), an optional sign and at least one digit, up to p[len]; *exp its value (0 when there is
 * none), saturated at +-100000 (beyond 10^100000 or 2^100000 any float32 has overflowed or
 * underflowed long before, whatever the digits). False on anything else. */
static bool parse_exponent(const char *p, size_t len, size_t i, char letter, long *exp)
{
    *exp = 0;
    if (i == len) return true;
    if (p[i] != letter && p[i] != letter - 'a' + 'A') return false;
    i++;
    bool eneg = false;
    if (i < len && (p[i] == '-' || p[i] == '+')) eneg = p[i++] == '-';
    if (i >= len) return false;
    for (; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return false;
        if (*exp < 100000) *exp = *exp * 10 + (p[i] - '0');
    }
    if (eneg) *exp = -*exp;
    return true;
}

/* Parse [-+]0x<hex>[.<hex>][p[+-]<dec>] exactly into a float. */
static bool parse_hex_float(const char *p, size_t len, float *out)
{
    size_t i = 0;
    bool neg = false;
    if (i < len && (p[i] == '-' || p[i] == '+')) neg = p[i++] == '-';
    if (!(i + 2 <= len && p[i] == '0' && (p[i + 1] == 'x' || p[i + 1] == 'X'))) return false;
    i += 2;
    uint64_t m = 0;
    long scale2 = 0; /* value = m * 2^scale2 * 2^exp */
    int ndigits = 0;
    bool seen_point = false;
    for (; i < len; i++) {
        if (p[i] == '.' && !seen_point) {
            seen_point = true;
            continue;
        }
        int d = hex_digit(p[i]);
        if (d < 0) break;
        ndigits++;
        if (m >> 56) { /* more digits than 64 bits hold: only zeros may follow */
            if (d) return false;
            if (!seen_point) scale2 += 4;
            continue;
        }
        m = m * 16 + (uint64_t)d;
        if (seen_point) scale2 -= 4;
    }
    if (ndigits == 0) return false;
    long exp = 0;
    if (!parse_exponent(p, len, i, 'p', &exp)) return false;
    float f;
    if (m == 0) {
        f = 0.0f;
    } else {
        while (!(m & 1)) {
            m >>= 1;
            scale2++;
        }
        if (m >> 24) return false; /* more than 24 significant bits: not a float32 */
        long e = exp + scale2;
        if (e < -149 - 24 || e > 128) return false;
        /* exact: m < 2^24, v within double range; the narrowing in the default IEEE environment
         * (under the caller's FTZ a subnormal float32 flushed to 0 and the text was refused) */
        const unsigned csr = mxp__fenv_enter_ieee();
        double v = ldexp((double)m, (int)e);
        MXP__PIN_F(v); /* kernels.h: the narrowing stays between enter and leave */
        f = (float)v;
        bool exact = (double)f == v; /* else out of float range or below its precision */
        MXP__PIN_R(exact);
        mxp__fenv_leave(csr);
        if (!exact) return false;
    }
    *out = neg ? -f : f;
    return true;
}

static bool parse_float(const char *p, size_t len, float *out)
{
    size_t j = (len && (p[0] == '-' || p[0] == '+')) ? 1 : 0;
    bool neg = j && p[0] == '-';
    if (token_is(p + j, len - j, "inf") || token_is(p + j, len - j, "infinity")) {
        *out = neg ? -INFINITY : INFINITY;
        return true;
    }
    if (token_is(p + j, len - j, "nan")) {
        *out = neg ? -NAN : NAN;
        return true;
    }
    if (len - j >= 2 && p[j] == '0' && (p[j + 1] == 'x' || p[j + 1] == 'X'))
        return parse_hex_float(p, len, out);
    /* Decimal: [sign] digits [. digits] (one digit at least) [e|E [sign] digits], rounded to the
     * nearest float32 by strtof. strtof reads the decimal point of the caller's LC_NUMERIC
     * locale (',' in de_DE), so the text it is given has none: the '.' is dropped and the
     * exponent lowered by the number of fraction digits ("-12.5e-3" -> "-125e-4"), the same
     * number in every locale; the result is strtof's in the "C" locale, bit for bit. */
    if (len == 0 || len >= 64) return false;
    char tmp[96];
    size_t k = 0, i = j, digits = 0, frac = 0;
    if (j) tmp[k++] = p[0];
    for (; i < len && p[i] >= '0' && p[i] <= '9'; i++, digits++) tmp[k++] = p[i];
    if (i < len && p[i] == '.')
        for (i++; i < len && p[i] >= '0' && p[i] <= '9'; i++, digits++, frac++) tmp[k++] = p[i];
    if (digits == 0) return false;
    long exp = 0;
    if (!parse_exponent(p, len, i, 'e', &exp)) return false;
    snprintf(tmp + k, sizeof tmp - k, "e%ld", exp - (long)frac);
    char *end = NULL;
    const float f = strtof(tmp, &end);
    if (*end != '\0') return false; /* cannot happen: the text is well formed */
    *out = f;
    return true;
}

static bool parse_int32(const char *p, size_t len, int32_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (i < len && (p[i] == '-' || p[i] == '+')) neg = p[i++] == '-';
    if (i >= len) return false;
    int64_t v = 0;
    for (; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return false;
        v = v * 10 + (p[i] - '0');
        if (v > (int64_t)INT32_MAX + 1) return false;
    }
    if (neg) v = -v;
    if (v < INT32_MIN || v > INT32_MAX) return false;
    *out = (int32_t)v;
    return true;
}

/* The two helpers above, for the other save/restore functions (internal.h). */
void mxp__format_hex_float(float f, char out[32]) { format_hex_float(f, out); }
bool mxp__parse_float(const char *p, size_t len, float *out) { return parse_float(p, len, out); }

/*
 * The shortest decimal that parse_float reads back as f, for error messages (internal.h). The
 * value goes to printf as a double built from f's bits by ldexp on an integer: every double
 * involved is normal, so the caller's denormals-are-zero cannot turn a subnormal f into 0 (as
 * (double)f would). printf writes the locale's decimal point: whatever bytes it wrote there
 * become one '.'.
 */
void mxp__format_float(float f, char out[32])
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const char *sign = (u >> 31) ? "-" : "";
    const uint32_t e = (u >> 23) & 0xFF, m = u & 0x7FFFFF;
    if (e == 0xFF || (e == 0 && m == 0)) {
        snprintf(out, 32, "%s%s", sign, e == 0xFF ? (m ? "nan" : "inf") : "0");
        return;
    }
    const double mag = e ? ldexp((double)(m | 0x800000u), (int)e - 150) : ldexp((double)m, -149);
    for (int digits = 1; digits <= 9; digits++) { /* 9 significant digits always read back */
        char raw[48];
        snprintf(raw, sizeof raw, "%s%.*g", sign, digits, mag);
        size_t n = 0;
        for (const char *c = raw; *c && n < 31; c++) {
            const bool ours = (*c >= '0' && *c <= '9') || *c == '-' || *c == '+' || *c == 'e';
            if (ours) out[n++] = *c;
            else if (n == 0 || out[n - 1] != '.') out[n++] = '.';
        }
        out[n] = '\0';
        float back;
        uint32_t b;
        if (parse_float(out, n, &back) && (memcpy(&b, &back, sizeof b), b == u)) return;
    }
}

enum { F_KIND, F_SCALE, F_COUNTER, F_PERIOD, F_FACTOR, F_MIN, F_MAX, F_COUNT };
static const char *const field_names[F_COUNT] = {"kind",   "scale",     "counter",  "period",
                                                 "factor", "min_scale", "max_scale"};

static mxp_status restore(const char *text, mxp_loss_scale *out)
{
    if (!text) return mxp__fail(MXP_EINVAL, "text is NULL");
    if (!out) return mxp__fail(MXP_EINVAL, "out is NULL");
    mxp_loss_scale s; /* filled completely before *out is written */
    memset(&s, 0, sizeof s);
    bool seen[F_COUNT] = {false};
    const char *p = text;
    bool tagged = false;
    for (;;) {
        while (*p && is_blank(*p)) p++;
        if (!*p) break;
        const char *tok = p;
        while (*p && !is_blank(*p)) p++;
        size_t len = (size_t)(p - tok);
        if (!tagged) {
            if (len != strlen(TAG) || memcmp(tok, TAG, len) != 0)
                return mxp__fail(MXP_EPARSE,
                                 "loss scale text must start with '" TAG "', got '%.*s' in '%s'",
                                 (int)len, tok, text);
            tagged = true;
            continue;
        }
        const char *eq = memchr(tok, '=', len);
        if (!eq)
            return mxp__fail(MXP_EPARSE, "loss scale field '%.*s' has no '=value' in '%s'",
                             (int)len, tok, text);
        size_t klen = (size_t)(eq - tok);
        const char *val = eq + 1;
        size_t vlen = len - klen - 1;
        int f = -1;
        for (int k = 0; k < F_COUNT; k++)
            if (klen == strlen(field_names[k]) && memcmp(tok, field_names[k], klen) == 0) f = k;
        if (f < 0)
            return mxp__fail(MXP_EPARSE,
                             "unknown loss scale field '%.*s' in '%s' (expected kind, scale, "
                             "counter, period, factor, min_scale, max_scale)",
                             (int)klen, tok, text);
        if (seen[f])
            return mxp__fail(MXP_EPARSE, "loss scale field '%s' repeated in '%s'", field_names[f],
                             text);
        seen[f] = true;
        bool ok = vlen > 0;
        switch (f) {
        case F_KIND:
            ok = false;
            for (int k = 0; k < 3; k++)
                if (token_is(val, vlen, kind_names[k])) {
                    s.kind = (mxp_loss_scale_kind)k;
                    ok = true;
                }
            break;
        case F_SCALE: ok = ok && parse_float(val, vlen, &s.scale); break;
        case F_COUNTER: ok = ok && parse_int32(val, vlen, &s.counter); break;
        case F_PERIOD: ok = ok && parse_int32(val, vlen, &s.period); break;
        case F_FACTOR: ok = ok && parse_float(val, vlen, &s.factor); break;
        case F_MIN: ok = ok && parse_float(val, vlen, &s.min_scale); break;
        default: ok = ok && parse_float(val, vlen, &s.max_scale); break;
        }
        if (!ok)
            return mxp__fail(MXP_EPARSE, "bad value '%.*s' for loss scale field '%s' in '%s' (%s)",
                             (int)vlen, val, field_names[f], text,
                             f == F_KIND ? "expected noop, static or dynamic"
                             : (f == F_COUNTER || f == F_PERIOD)
                                 ? "expected a decimal int32"
                                 : "expected an exact float32: hex such as 0x1p+15, inf, or decimal");
    }
    if (!tagged) return mxp__fail(MXP_EPARSE, "empty loss scale text (expected '" TAG " kind=...')");
    for (int k = 0; k < F_COUNT; k++)
        if (!seen[k])
            return mxp__fail(MXP_EPARSE, "loss scale field '%s' missing in '%s'", field_names[k], text);
    const char *why = invalid_reason(&s);
    if (why) return mxp__fail(MXP_EINVAL, "invalid loss scale state: %s (in '%s')", why, text);
    *out = s;
    return MXP_OK;
}

mxp_status mxp_loss_scale_restore(const char *text, mxp_loss_scale *out)
{
    return mxp__in("mxp_loss_scale_restore", restore(text, out));
}
