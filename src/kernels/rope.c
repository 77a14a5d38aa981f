/* ROPE: rotary position embedding of q (and k) in place, llama2.c / GGUF
 * llama convention: in each head of head_dim floats, the pair (x[2i],
 * x[2i+1]) of token t rotates by the angle p * freq_i with p = step->pos + t
 * and, computed in float exactly as llama2.c does,
 *     freq_i = 1.0f / powf(base, (float)(2*i) / (float)head_dim)
 *     val    = (float)p * freq_i,  cos = cosf(val), sin = sinf(val)
 *     x[2i]   <- x[2i] * cos - x[2i+1] * sin
 *     x[2i+1] <- x[2i] * sin + x[2i+1] * cos
 * Every ISA builds these angle tables with the same scalar code, so the ISA
 * paths differ only in the rotation's rounding (FMA).
 *
 * Threads share the (token, head) pairs of q then k, as contiguous runs; a
 * thread builds the table of each token it meets. */
#include "kernels/ops_internal.h"

#include <math.h>
#include <string.h>

/* Tables for position p over one head: c[2i] = c[2i+1] = cos, s[2i] = -sin,
 * s[2i+1] = +sin, so rotate() is x*c + swap_pairs(x)*s. */
static void rope_table(float *c, float *s, int64_t hd, float base, int64_t p) {
    for (int64_t i = 0; i < hd / 2; i++) {
        float freq = 1.0f / powf(base, (float)(2 * i) / (float)hd);
        float val = (float)p * freq;
        float fc = cosf(val), fs = sinf(val);
        c[2 * i] = fc;
        c[2 * i + 1] = fc;
        s[2 * i] = -fs;
        s[2 * i + 1] = fs;
    }
}

/* The last tables a thread built: every rope of a decode step (q and k of
 * each layer, and a projection's epilogue on each of its tasks) is at the
 * same position, and a table costs hd/2 powf, cosf and sinf. */
static _Thread_local struct {
    int64_t hd, p;
    float base;
    float c[LT__MAX_HEAD_DIM], s[LT__MAX_HEAD_DIM];
} tl_table;

void lt__rope_tables(int64_t hd, float base, int64_t p, const float **c, const float **s) {
    LT_ASSERT(hd > 0 && hd % 2 == 0 && hd <= LT__MAX_HEAD_DIM);
    if (tl_table.hd != hd || tl_table.p != p || memcmp(&tl_table.base, &base, sizeof base)) {
        tl_table.hd = 0; /* invalid while it is rebuilt */
        rope_table(tl_table.c, tl_table.s, hd, base, p);
        tl_table.base = base;
        tl_table.p = p;
        tl_table.hd = hd;
    }
    *c = tl_table.c;
    *s = tl_table.s;
}

static void rope_drive(const lt_call *call, const lt_step *step, int ith, int nth,
                       const lt__rope_ops *ops) {
    const lt_tensor *q = call->op[0], *k = call->op[1];
    const int64_t hd = call->ia[0], n = q->ne[1];
    const int64_t hq = q->ne[0] / hd, hk = k ? k->ne[0] / hd : 0, per = hq + hk;
    const float *c = NULL, *s = NULL;
    int64_t lo, hi, t_table = -1;
    lt__split(n * per, 1, ith, nth, &lo, &hi);
    for (int64_t u = lo; u < hi; u++) {
        int64_t t = u / per, h = u % per;
        if (t != t_table) {
            lt__rope_tables(hd, call->fa[0], step->pos + t, &c, &s);
            t_table = t;
        }
        float *x = h < hq ? lt__row_f32(q, t) + h * hd : lt__row_f32(k, t) + (h - hq) * hd;
        ops->rotate(x, c, s, hd);
    }
}

static void rope_portable(const lt_call *c, const lt_step *s, int ith, int nth) {
    rope_drive(c, s, ith, nth, &lt__rope_portable);
}
#if LT_HAVE_X86
static void rope_avx2(const lt_call *c, const lt_step *s, int ith, int nth) {
    rope_drive(c, s, ith, nth, &lt__rope_avx2);
}
static void rope_avx512(const lt_call *c, const lt_step *s, int ith, int nth) {
    rope_drive(c, s, ith, nth, &lt__rope_avx512);
}
#endif

static void rope_cost(const lt_call *c, const lt_step *s, double *bytes, double *flops) {
    (void)s;
    double n = (double)c->op[0]->ne[1];
    double e = (double)c->op[0]->ne[0] + (c->op[1] ? (double)c->op[1]->ne[0] : 0.0);
    *bytes = 8.0 * n * e;  /* read and write q, k */
    *flops = 3.0 * n * e;  /* 4 mul + 2 add per pair; the angle tables are not counted */
}

static int rope_check(const lt_call *c) {
    const lt_tensor *q = c->op[0], *k = c->op[1];
    const int64_t hd = c->ia[0];
    int rc;
    if ((rc = lt__check_f32_rows(q, "rope", "q")) != LT_OK) return rc;
    if (k && (rc = lt__check_f32_rows(k, "rope", "k")) != LT_OK) return rc;
    if (hd < 2 || hd % 2 != 0 || hd > LT__MAX_HEAD_DIM)
        return lt_error(LT_EINVAL, "rope: head_dim %lld must be even and in [2, %d]", (long long)hd,
                        LT__MAX_HEAD_DIM);
    if (q->ne[0] % hd != 0)
        return lt_error(LT_EINVAL, "rope: q row of %lld is not a whole number of heads of %lld",
                        (long long)q->ne[0], (long long)hd);
    if (k && k->ne[0] % hd != 0)
        return lt_error(LT_EINVAL, "rope: k row of %lld is not a whole number of heads of %lld",
                        (long long)k->ne[0], (long long)hd);
    if (k && k->ne[1] != q->ne[1])
        return lt_error(LT_EINVAL, "rope: q has %lld tokens but k has %lld", (long long)q->ne[1],
                        (long long)k->ne[1]);
    if (k && lt__overlap(q, k)) return lt_error(LT_EINVAL, "rope: q and k overlap");
    if (!(c->fa[0] > 0.0f) || isinf(c->fa[0]))
        return lt_error(LT_EINVAL, "rope: base %g must be finite and > 0", (double)c->fa[0]);
    return LT_OK;
}

/* ---- portable primitive (the scalar reference) ----------------------------- */

static void rotate_portable(float *x, const float *c, const float *s, int64_t n) {
    for (int64_t i = 0; i < n; i += 2) {
        float a = x[i], b = x[i + 1];
        x[i] = a * c[i] + b * s[i];
        x[i + 1] = b * c[i + 1] + a * s[i + 1];
    }
}

const lt__rope_ops lt__rope_portable = {rotate_portable};

const lt_kernel lt__k_rope = {
    .name = "rope",
    .id = LT_K_ROPE,
    .n_params = 0,
    .run = {[LT_ISA_PORTABLE] = rope_portable,
            [LT_ISA_AVX2] = LT_X86_ONLY(rope_avx2),
            [LT_ISA_AVX512] = LT_X86_ONLY(rope_avx512)},
    .cost = rope_cost,
    .check = rope_check,
};
