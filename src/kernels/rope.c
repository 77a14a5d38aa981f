/* ROPE: rotary position embedding of q (and k) in place. Pair i of a head
 * of head_dim floats (mode NORM: x[2i], x[2i+1], the llama2.c / GGUF llama
 * convention; mode NEOX: x[i], x[i + head_dim/2], GGUF qwen2's) of token t
 * rotates by the angle p * freq_i with p = lt_step_pos(step, t) and, computed in
 * float exactly as llama2.c does,
 *     freq_i = 1.0f / powf(base, (float)(2*i) / (float)head_dim)
 *     val    = (float)p * freq_i,  then val / factors[i] with factors (op2)
 *     cos = cosf(val), sin = sinf(val)
 *     a <- a * cos - b * sin,  b <- a * sin + b * cos   (the pair (a, b))
 * The factors are llama.cpp's rope_freqs tensor (Llama 3's frequency
 * scaling), which divides each pair's angle. Every ISA builds these angle
 * tables with the same scalar code, so the ISA paths differ only in the
 * rotation's rounding (FMA).
 *
 * Threads share the (token, head) pairs of q then k, as contiguous runs; a
 * thread builds the table of each token it meets. */
#include "kernels/ops_internal.h"

#include <math.h>
#include <string.h>

/* Tables for position p over one head, so a rotation is x*c + partner(x)*s:
 * pair i's cos in c at both its elements, -sin at its first element and
 * +sin at its second (NORM: elements 2i, 2i+1; NEOX: i, i + hd/2). */
static void rope_table(float *c, float *s, int64_t hd, float base, lt_rope_mode mode,
                       const float *factors, int64_t p) {
    const int64_t h = hd / 2;
    for (int64_t i = 0; i < h; i++) {
        float freq = 1.0f / powf(base, (float)(2 * i) / (float)hd);
        float val = (float)p * freq;
        if (factors) val /= factors[i];
        float fc = cosf(val), fs = sinf(val);
        const int64_t a = mode == LT_ROPE_NEOX ? i : 2 * i, b = mode == LT_ROPE_NEOX ? i + h : a + 1;
        c[a] = fc;
        c[b] = fc;
        s[a] = -fs;
        s[b] = fs;
    }
}

/* The last tables a thread built: every rope of a decode step (q and k of
 * each layer, and a projection's epilogue on each of its tasks) is at the
 * same position, and a table costs hd/2 powf, cosf and sinf. The factors
 * are compared by value (a copy), so a caller may reuse their memory. */
static _Thread_local struct {
    int64_t hd, p;
    float base;
    lt_rope_mode mode;
    bool has_factors;
    float factors[LT__MAX_HEAD_DIM / 2];
    float c[LT__MAX_HEAD_DIM], s[LT__MAX_HEAD_DIM];
} tl_table;

void lt__rope_tables(int64_t hd, float base, lt_rope_mode mode, const float *factors, int64_t p,
                     const float **c, const float **s) {
    LT_ASSERT(hd > 0 && hd % 2 == 0 && hd <= LT__MAX_HEAD_DIM);
    const size_t fbytes = (size_t)(hd / 2) * sizeof(float);
    if (tl_table.hd != hd || tl_table.p != p || memcmp(&tl_table.base, &base, sizeof base) ||
        tl_table.mode != mode || tl_table.has_factors != (factors != NULL) ||
        (factors && memcmp(tl_table.factors, factors, fbytes))) {
        tl_table.hd = 0; /* invalid while it is rebuilt */
        rope_table(tl_table.c, tl_table.s, hd, base, mode, factors, p);
        if (factors) memcpy(tl_table.factors, factors, fbytes);
        tl_table.has_factors = factors != NULL;
        tl_table.mode = mode;
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
    const lt_rope_mode mode = (lt_rope_mode)call->ia[1];
    const float *factors = call->op[2] ? call->op[2]->data : NULL;
    void (*rotate)(float *, const float *, const float *, int64_t) =
        mode == LT_ROPE_NEOX ? ops->rotate_neox : ops->rotate;
    const float *c = NULL, *s = NULL;
    int64_t lo, hi, t_table = -1;
    lt__split(n * per, 1, ith, nth, &lo, &hi);
    for (int64_t u = lo; u < hi; u++) {
        int64_t t = u / per, h = u % per;
        if (t != t_table) {
            lt__rope_tables(hd, call->fa[0], mode, factors, lt_step_pos(step, t), &c, &s);
            t_table = t;
        }
        float *x = h < hq ? lt__row_f32(q, t) + h * hd : lt__row_f32(k, t) + (h - hq) * hd;
        rotate(x, c, s, hd);
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
    if (c->ia[1] != LT_ROPE_NORM && c->ia[1] != LT_ROPE_NEOX)
        return lt_error(LT_EINVAL, "rope: ia[1] (mode) must be %d (norm) or %d (neox), got %lld",
                        LT_ROPE_NORM, LT_ROPE_NEOX, (long long)c->ia[1]);
    return lt__rope_check_factors(c->op[2], hd, "rope");
}

/* ---- portable primitive (the scalar reference) ----------------------------- */

static void rotate_portable(float *x, const float *c, const float *s, int64_t n) {
    for (int64_t i = 0; i < n; i += 2) {
        float a = x[i], b = x[i + 1];
        x[i] = a * c[i] + b * s[i];
        x[i + 1] = b * c[i + 1] + a * s[i + 1];
    }
}

static void rotate_neox_portable(float *x, const float *c, const float *s, int64_t n) {
    const int64_t h = n / 2;
    for (int64_t i = 0; i < h; i++) {
        float a = x[i], b = x[i + h];
        x[i] = a * c[i] + b * s[i];
        x[i + h] = b * c[i + h] + a * s[i + h];
    }
}

const lt__rope_ops lt__rope_portable = {rotate_portable, rotate_neox_portable};

int lt__rope_check_factors(const lt_tensor *f, int64_t hd, const char *kernel) {
    if (!f) return LT_OK;
    int rc = lt__check_f32_rows(f, kernel, "rope factors");
    if (rc != LT_OK) return rc;
    if (f->ne[0] != hd / 2 || f->ne[1] != 1)
        return lt_error(LT_EINVAL, "%s: rope factors have shape {%lld, %lld}, expected {%lld} "
                        "(one per pair of a head of %lld)", kernel, (long long)f->ne[0],
                        (long long)f->ne[1], (long long)(hd / 2), (long long)hd);
    return LT_OK;
}

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
