/* RMSNORM: y = x / sqrt(mean(x^2) + eps) * w, row by row (y may equal x).
 *
 * Threads share the n x d elements of y as contiguous runs (a one-token row
 * is split too). A thread that owns part of a row computes that row's full
 * sum of squares itself, so no thread waits for another: the row is small
 * and in cache, and every thread computes the same sum the same way, so the
 * result does not depend on nth. In place (y == x) that would read values
 * another thread has already overwritten, so then whole rows are shared. */
#include "kernels/ops_internal.h"

#include <math.h>

enum { P_MIN_CHUNK };

/* 1 / sqrt(mean(x^2) + eps), as llama2.c computes it. */
static float inv_rms(const lt__norm_ops *ops, const float *x, int64_t d, float eps) {
    return 1.0f / sqrtf(ops->sumsq(x, d) / (float)d + eps);
}

static void rmsnorm_drive(const lt_call *c, int ith, int nth, const lt__norm_ops *ops) {
    const lt_tensor *y = c->op[0], *x = c->op[1];
    const float *w = c->op[2]->data;
    const int64_t d = y->ne[0], n = y->ne[1];
    const float eps = c->fa[0];
    int active = lt__active_threads(n * d, c->params.v[P_MIN_CHUNK], nth);
    if (ith >= active) return;

    if (y->data == x->data) {
        int64_t r0, r1;
        lt__split(n, 1, ith, active, &r0, &r1);
        for (int64_t r = r0; r < r1; r++) {
            float *row = lt__row_f32(y, r);
            ops->scale_mul(row, row, w, inv_rms(ops, row, d, eps), d);
        }
        return;
    }
    int64_t lo, hi;
    lt__split(n * d, LT__SPLIT_UNIT, ith, active, &lo, &hi);
    for (int64_t f = lo; f < hi;) {
        int64_t r = f / d, c0 = f % d, c1 = c0 + (hi - f) < d ? c0 + (hi - f) : d;
        const float *xr = lt__row_f32(x, r);
        ops->scale_mul(lt__row_f32(y, r) + c0, xr + c0, w + c0, inv_rms(ops, xr, d, eps), c1 - c0);
        f += c1 - c0;
    }
}

static void rmsnorm_portable(const lt_call *c, const lt_step *s, int ith, int nth) {
    (void)s;
    rmsnorm_drive(c, ith, nth, &lt__norm_portable);
}
#if LT_HAVE_X86
static void rmsnorm_avx2(const lt_call *c, const lt_step *s, int ith, int nth) {
    (void)s;
    rmsnorm_drive(c, ith, nth, &lt__norm_avx2);
}
static void rmsnorm_avx512(const lt_call *c, const lt_step *s, int ith, int nth) {
    (void)s;
    rmsnorm_drive(c, ith, nth, &lt__norm_avx512);
}
#endif

static void rmsnorm_cost(const lt_call *c, const lt_step *s, double *bytes, double *flops) {
    (void)s;
    double d = (double)c->op[0]->ne[0], n = (double)c->op[0]->ne[1];
    *bytes = 4.0 * (2.0 * n * d + d); /* read x and w, write y */
    *flops = 4.0 * n * d + 3.0 * n;   /* x*x+acc, x*r*w; per row mean, eps, rsqrt */
}

static int rmsnorm_check(const lt_call *c) {
    const lt_tensor *y = c->op[0], *x = c->op[1], *w = c->op[2];
    int rc;
    if ((rc = lt__check_f32_rows(y, "rmsnorm", "y")) != LT_OK) return rc;
    if ((rc = lt__check_f32_rows(x, "rmsnorm", "x")) != LT_OK) return rc;
    if ((rc = lt__check_f32_rows(w, "rmsnorm", "w")) != LT_OK) return rc;
    if (x->ne[0] != y->ne[0] || x->ne[1] != y->ne[1])
        return lt_error(LT_EINVAL, "rmsnorm: x is %lldx%lld but y is %lldx%lld",
                        (long long)x->ne[1], (long long)x->ne[0], (long long)y->ne[1],
                        (long long)y->ne[0]);
    if (w->ne[0] != y->ne[0] || w->ne[1] != 1)
        return lt_error(LT_EINVAL,
                        "rmsnorm: weight has %lldx%lld elements, expected one row of %lld",
                        (long long)w->ne[1], (long long)w->ne[0], (long long)y->ne[0]);
    if (!(c->fa[0] >= 0.0f) || isinf(c->fa[0]))
        return lt_error(LT_EINVAL, "rmsnorm: eps %g must be finite and >= 0", (double)c->fa[0]);
    if (lt__overlap(y, x) && (y->data != x->data || y->nb[1] != x->nb[1]))
        return lt_error(LT_EINVAL, "rmsnorm: y partially overlaps x (only y == x is allowed)");
    return LT_OK;
}

/* ---- portable primitives (the scalar reference) ---------------------------- */

static float sumsq_portable(const float *x, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

static void scale_mul_portable(float *y, const float *x, const float *w, float r, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = w[i] * (r * x[i]);
}

const lt__norm_ops lt__norm_portable = {sumsq_portable, scale_mul_portable};

const lt_kernel lt__k_rmsnorm = {
    .name = "rmsnorm",
    .id = LT_K_RMSNORM,
    .n_params = 1,
    .params = {LT__MIN_CHUNK_PARAM},
    .run = {[LT_ISA_PORTABLE] = rmsnorm_portable,
            [LT_ISA_AVX2] = LT_X86_ONLY(rmsnorm_avx2),
            [LT_ISA_AVX512] = LT_X86_ONLY(rmsnorm_avx512)},
    .cost = rmsnorm_cost,
    .check = rmsnorm_check,
};
