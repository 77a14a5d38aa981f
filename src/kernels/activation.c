/* Element-wise and row-wise activations: ADD (y = a + b), SWIGLU
 * (out = silu(gate) * up, silu(g) = g * sigmoid(g)) and SOFTMAX (row-wise,
 * in place, numerically stable: exp(x - max) / sum).
 *
 * ADD and SWIGLU share the n x d elements as contiguous runs, so even one
 * token's row is split (ADD's b may be one row, added to every row: a bias); each element is read and written by one thread, so
 * y may equal an input. SOFTMAX works in place and needs a whole row's max
 * and sum before it writes, so it shares whole rows. The portable primitives
 * here are the scalar reference; the same primitive table serves ATTENTION's
 * softmax and KV_STORE's copy (attention.c). */
#include "kernels/ops_internal.h"

#include <math.h>
#include <string.h>

enum { P_MIN_CHUNK };

typedef void (*binary_fn)(float *y, const float *a, const float *b, int64_t n);

static void binary_drive(const lt_call *c, int ith, int nth, binary_fn fn) {
    const lt_tensor *y = c->op[0], *a = c->op[1], *b = c->op[2];
    const int64_t d = y->ne[0], n = y->ne[1];
    int active = lt__active_threads(n * d, c->params.v[P_MIN_CHUNK], nth);
    if (ith >= active) return;
    int64_t lo, hi;
    lt__split(n * d, LT__SPLIT_UNIT, ith, active, &lo, &hi);
    for (int64_t f = lo; f < hi;) {
        int64_t r = f / d, c0 = f % d, c1 = c0 + (hi - f) < d ? c0 + (hi - f) : d;
        const int64_t rb = b->ne[1] == 1 ? 0 : r; /* one row of b: added to every row */
        fn(lt__row_f32(y, r) + c0, lt__row_f32(a, r) + c0, lt__row_f32(b, rb) + c0, c1 - c0);
        f += c1 - c0;
    }
}

static void softmax_drive(const lt_call *c, int ith, int nth, const lt__act_ops *ops) {
    const lt_tensor *x = c->op[0];
    const int64_t len = x->ne[0], n = x->ne[1];
    int active = lt__active_threads(n * len, c->params.v[P_MIN_CHUNK], nth);
    if (ith >= active) return;
    int64_t r0, r1;
    lt__split(n, 1, ith, active, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float *row = lt__row_f32(x, r);
        float sum = ops->exp_sum(row, len, ops->max(row, len));
        ops->scale(row, 1.0f / sum, len);
    }
}

#define RUNNERS(isa)                                                           \
    static void add_##isa(const lt_call *c, const lt_step *s, int ith, int nth) { \
        (void)s;                                                               \
        binary_drive(c, ith, nth, lt__act_##isa.add);                          \
    }                                                                          \
    static void swiglu_##isa(const lt_call *c, const lt_step *s, int ith, int nth) { \
        (void)s;                                                               \
        binary_drive(c, ith, nth, lt__act_##isa.swiglu);                       \
    }                                                                          \
    static void softmax_##isa(const lt_call *c, const lt_step *s, int ith, int nth) { \
        (void)s;                                                               \
        softmax_drive(c, ith, nth, &lt__act_##isa);                            \
    }
RUNNERS(portable)
#if LT_HAVE_X86
RUNNERS(avx2)
RUNNERS(avx512)
#endif
#undef RUNNERS

static void add_cost(const lt_call *c, const lt_step *s, double *bytes, double *flops) {
    (void)s;
    double e = (double)c->op[0]->ne[0] * (double)c->op[0]->ne[1];
    *bytes = 12.0 * e; /* read a, b; write y */
    *flops = e;
}

static void swiglu_cost(const lt_call *c, const lt_step *s, double *bytes, double *flops) {
    (void)s;
    double e = (double)c->op[0]->ne[0] * (double)c->op[0]->ne[1];
    *bytes = 12.0 * e; /* read gate, up; write out */
    *flops = 6.0 * e;  /* negate, exp (counted as 1), add, divide, 2 multiplies */
}

static void softmax_cost(const lt_call *c, const lt_step *s, double *bytes, double *flops) {
    (void)s;
    double e = (double)c->op[0]->ne[0] * (double)c->op[0]->ne[1];
    *bytes = 8.0 * e; /* read and write x; the row is re-read from cache */
    *flops = 5.0 * e; /* max, subtract, exp (counted as 1), sum, scale */
}

/* y, a, b: same shape (b of one row too, when broadcast); y may be a or b
 * exactly but must not partially overlap. */
static int binary_check(const lt_call *c, const char *kernel, const char *na, const char *nb,
                        bool broadcast) {
    const lt_tensor *y = c->op[0];
    int rc;
    if ((rc = lt__check_f32_rows(y, kernel, "out")) != LT_OK) return rc;
    for (int i = 1; i <= 2; i++) {
        const lt_tensor *t = c->op[i];
        const char *name = i == 1 ? na : nb;
        if ((rc = lt__check_f32_rows(t, kernel, name)) != LT_OK) return rc;
        const bool one_row = broadcast && i == 2 && t->ne[1] == 1;
        if (t->ne[0] != y->ne[0] || (t->ne[1] != y->ne[1] && !one_row))
            return lt_error(LT_EINVAL, "%s: %s is %lldx%lld but out is %lldx%lld", kernel, name,
                            (long long)t->ne[1], (long long)t->ne[0], (long long)y->ne[1],
                            (long long)y->ne[0]);
        if (lt__overlap(y, t) && (y->data != t->data || y->nb[1] != t->nb[1] ||
                                  t->ne[1] != y->ne[1]))
            return lt_error(LT_EINVAL, "%s: out partially overlaps %s (only equality is allowed)",
                            kernel, name);
    }
    return LT_OK;
}

static int add_check(const lt_call *c) { return binary_check(c, "add", "a", "b", true); }
static int swiglu_check(const lt_call *c) { return binary_check(c, "swiglu", "gate", "up", false); }
static int softmax_check(const lt_call *c) { return lt__check_f32_rows(c->op[0], "softmax", "x"); }

/* ---- portable primitives (the scalar reference) ---------------------------- */

static void add_p(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

/* as llama2.c: g * (1 / (1 + exp(-g))) * u */
static void swiglu_p(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * (1.0f / (1.0f + expf(-a[i]))) * b[i];
}

static float max_p(const float *x, int64_t n) {
    float m = x[0];
    for (int64_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static float exp_sum_p(float *x, int64_t n, float m) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        s += x[i];
    }
    return s;
}

static void scale_p(float *x, float c, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= c;
}

static void copy_p(float *y, const float *a, int64_t n) { memcpy(y, a, (size_t)n * sizeof *y); }

const lt__act_ops lt__act_portable = {add_p, swiglu_p, max_p, exp_sum_p, scale_p, copy_p};

/* ---- descriptors -------------------------------------------------------- */

const lt_kernel lt__k_add = {
    .name = "add",
    .id = LT_K_ADD,
    .n_params = 1,
    .params = {LT__MIN_CHUNK_PARAM},
    .run = {[LT_ISA_PORTABLE] = add_portable, [LT_ISA_AVX2] = LT_X86_ONLY(add_avx2),
            [LT_ISA_AVX512] = LT_X86_ONLY(add_avx512)},
    .cost = add_cost,
    .check = add_check,
};

const lt_kernel lt__k_swiglu = {
    .name = "swiglu",
    .id = LT_K_SWIGLU,
    .n_params = 1,
    .params = {LT__MIN_CHUNK_PARAM},
    .run = {[LT_ISA_PORTABLE] = swiglu_portable, [LT_ISA_AVX2] = LT_X86_ONLY(swiglu_avx2),
            [LT_ISA_AVX512] = LT_X86_ONLY(swiglu_avx512)},
    .cost = swiglu_cost,
    .check = swiglu_check,
};

const lt_kernel lt__k_softmax = {
    .name = "softmax",
    .id = LT_K_SOFTMAX,
    .n_params = 1,
    .params = {LT__MIN_CHUNK_PARAM},
    .run = {[LT_ISA_PORTABLE] = softmax_portable, [LT_ISA_AVX2] = LT_X86_ONLY(softmax_avx2),
            [LT_ISA_AVX512] = LT_X86_ONLY(softmax_avx512)},
    .cost = softmax_cost,
    .check = softmax_check,
};
