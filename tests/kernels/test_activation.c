/* ADD (also of a one-row bias), SWIGLU and SOFTMAX against double-precision references, on every ISA
 * path the CPU has, nth = 1..3 and every min_chunk value; shares must write
 * disjoint, covering parts of the output; in-place forms too. */
#include "ops_test.h"

#include "kernels/ops_internal.h"

#include <math.h>

static const int64_t dims[] = {1, 7, 64, 172, 1000, 4096};
static const int64_t rows[] = {1, 3, 16};

static void set_binary(lt_call *c, lt_tensor t[3], float *y, float *a, float *b, int64_t n,
                       int64_t d, lt_kernel_id id) {
    memset(c, 0, sizeof *c);
    lt_tensor_init(&t[0], LT_F32, d, n, 1, 1, y);
    lt_tensor_init(&t[1], LT_F32, d, n, 1, 1, a);
    lt_tensor_init(&t[2], LT_F32, d, n, 1, 1, b);
    for (int i = 0; i < 3; i++) c->op[i] = &t[i];
    lt_params_default(lt_kernel_get(id), &c->params);
}

/* ref(a, b) in double; tol(ref) the allowed error. */
typedef double (*ref_fn)(double a, double b);
static double ref_add(double a, double b) { return (double)(float)(a + b); }
static double ref_swiglu(double g, double u) { return g / (1.0 + exp(-g)) * u; }

static void test_binary(lt_kernel_id id, ref_fn ref, double rel_tol) {
    const lt_kernel *k = lt_kernel_get(id);
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
        const int64_t d = dims[di], n = rows[ri], ne = n * d;
        float *y = malloc((size_t)ne * 4), *a = malloc((size_t)ne * 4), *b = malloc((size_t)ne * 4);
        float *ya = malloc((size_t)ne * 4);
        double *r = malloc((size_t)ne * 8);
        int *counts = malloc((size_t)ne * sizeof *counts);
        ot_seed((uint64_t)(id * 7919 + d * 31 + n));
        ot_fill(a, ne, -10, 10);
        ot_fill(b, ne, -3, 3);
        /* saturating gates: sigmoid's tails and exp's clamp range */
        static const float extremes[] = {-100.0f, 100.0f, -88.5f, 88.5f, -87.0f, 0.0f, -1e-30f};
        for (int64_t i = 0; i < 7 && i < ne; i++) a[i * 3 % ne] = extremes[i];
        for (int64_t i = 0; i < ne; i++) r[i] = ref(a[i], b[i]);
        lt_call c;
        lt_tensor t[3];
        set_binary(&c, t, y, a, b, n, d, id);
        ASSERT_EQ(lt_call_check(id, &c), LT_OK);
        for (int isa = 0; isa < ot_isa_count(); isa++)
        for (int point = 0; point < ot_param_points(k); point++)
        for (int nth = 1; nth <= 3; nth++) {
            lt_kernel_fn fn = ot_fn(id, isa);
            ot_param_point(k, point, &c.params);
            c.op[0] = &t[0];
            ASSERT_EQ(ot_run_disjoint(fn, &c, NULL, nth, ne, counts), 0);
            ASSERT_EQ(ot_not_once(counts, ne), 0);
            int64_t bad = 0;
            for (int64_t i = 0; i < ne; i++)
                bad += !(fabs(y[i] - r[i]) <= rel_tol * fmax(1.0, fabs(r[i])));
            ASSERT_EQ(bad, 0);
            /* in place over a, then over b: same bits as out of place */
            for (int which = 1; which <= 2; which++) {
                memcpy(ya, which == 1 ? a : b, (size_t)ne * 4);
                lt_tensor tin;
                lt_tensor_init(&tin, LT_F32, d, n, 1, 1, ya);
                lt_call ci = c;
                ci.op[0] = &tin;
                ci.op[which] = &tin;
                ASSERT_EQ(lt_call_check(id, &ci), LT_OK);
                ot_run(fn, &ci, NULL, nth);
                ASSERT_EQ(memcmp(ya, y, (size_t)ne * 4), 0);
            }
        }
        free(y); free(a); free(b); free(ya); free(r); free(counts);
    }
}

/* ADD of a one-row b (a bias) to every row: exact against the float sum of
 * each element, every ISA, split and min_chunk, in place over a too. */
static void test_add_broadcast(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_ADD);
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
        const int64_t d = dims[di], n = rows[ri], ne = n * d;
        float *y = malloc((size_t)ne * 4), *a = malloc((size_t)ne * 4), *b = malloc((size_t)d * 4);
        float *ya = malloc((size_t)ne * 4);
        int *counts = malloc((size_t)ne * sizeof *counts);
        ot_seed((uint64_t)(d * 17 + n + 99));
        ot_fill(a, ne, -10, 10);
        ot_fill(b, d, -3, 3);
        lt_tensor t[3];
        lt_tensor_init(&t[0], LT_F32, d, n, 1, 1, y);
        lt_tensor_init(&t[1], LT_F32, d, n, 1, 1, a);
        lt_tensor_init(&t[2], LT_F32, d, 1, 1, 1, b);
        lt_call c = {.op = {&t[0], &t[1], &t[2]}};
        lt_params_default(k, &c.params);
        ASSERT_EQ(lt_call_check(LT_K_ADD, &c), LT_OK);
        for (int isa = 0; isa < ot_isa_count(); isa++)
        for (int point = 0; point < ot_param_points(k); point++)
        for (int nth = 1; nth <= 3; nth++) {
            ot_param_point(k, point, &c.params);
            c.op[0] = &t[0];
            ASSERT_EQ(ot_run_disjoint(ot_fn(LT_K_ADD, isa), &c, NULL, nth, ne, counts), 0);
            ASSERT_EQ(ot_not_once(counts, ne), 0);
            int64_t bad = 0;
            for (int64_t i = 0; i < ne; i++) bad += y[i] != (float)((double)a[i] + b[i % d]);
            ASSERT_EQ(bad, 0);
            memcpy(ya, a, (size_t)ne * 4);
            lt_tensor tin;
            lt_tensor_init(&tin, LT_F32, d, n, 1, 1, ya);
            lt_call ci = c;
            ci.op[0] = ci.op[1] = &tin;
            ASSERT_EQ(lt_call_check(LT_K_ADD, &ci), LT_OK);
            ot_run(ot_fn(LT_K_ADD, isa), &ci, NULL, nth);
            ASSERT_EQ(memcmp(ya, y, (size_t)ne * 4), 0);
        }
        free(y); free(a); free(b); free(ya); free(counts);
    }
}

static void softmax_ref(double *r, const float *x, int64_t n, int64_t len) {
    for (int64_t t = 0; t < n; t++) {
        const float *xr = x + t * len;
        /* the max in float, which holds it exactly (a double fmax reduction
         * here crashes GCC 12's aarch64 vectoriser) */
        float mf = xr[0];
        for (int64_t i = 1; i < len; i++) mf = fmaxf(mf, xr[i]);
        const double m = mf;
        double s = 0;
        for (int64_t i = 0; i < len; i++) s += exp(xr[i] - m);
        for (int64_t i = 0; i < len; i++) r[t * len + i] = exp(xr[i] - m) / s;
    }
}

static void test_softmax(void) {
    static const int64_t lens[] = {1, 5, 16, 17, 100, 1000};
    static const int64_t ns[] = {1, 3, 7};
    const lt_kernel *k = lt_kernel_get(LT_K_SOFTMAX);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int64_t len = lens[li], n = ns[ni], ne = n * len;
        float *x0 = malloc((size_t)ne * 4), *x = malloc((size_t)ne * 4);
        float *x1 = malloc((size_t)ne * 4);
        double *r = malloc((size_t)ne * 8);
        ot_seed((uint64_t)(len * 10 + n));
        ot_fill(x0, ne, -20, 20);
        /* the last row needs the max shift: exp(1000) overflows */
        for (int64_t i = 0; i < len; i++) x0[(n - 1) * len + i] += 1000.0f;
        softmax_ref(r, x0, n, len);
        lt_tensor tx;
        lt_tensor_init(&tx, LT_F32, len, n, 1, 1, x);
        lt_call c = {.op = {&tx}};
        for (int isa = 0; isa < ot_isa_count(); isa++)
        for (int point = 0; point < ot_param_points(k); point++)
        for (int nth = 1; nth <= 3; nth++) {
            ot_param_point(k, point, &c.params);
            ASSERT_EQ(lt_call_check(LT_K_SOFTMAX, &c), LT_OK);
            memcpy(x, x0, (size_t)ne * 4);
            ot_run(ot_fn(LT_K_SOFTMAX, isa), &c, NULL, nth);
            /* exp within a few ulp, float sum of up to 1000 terms: 1e-7 + 5e-6 relative */
            int64_t bad = 0;
            for (int64_t i = 0; i < ne; i++) bad += !(fabs(x[i] - r[i]) <= 1e-7 + 5e-6 * r[i]);
            ASSERT_EQ(bad, 0);
            if (nth == 1 && point == 0) memcpy(x1, x, (size_t)ne * 4);
            else ASSERT_EQ(memcmp(x1, x, (size_t)ne * 4), 0);
        }
        free(x0); free(x); free(x1); free(r);
    }
}

/* Known answer: equal inputs (even huge ones) give the uniform distribution. */
static void test_softmax_uniform(void) {
    static const float values[] = {0.0f, -3.5f, 1e4f, -1e4f};
    float x[2 * 37];
    lt_tensor tx;
    lt_tensor_init(&tx, LT_F32, 37, 2, 1, 1, x);
    lt_call c = {.op = {&tx}};
    lt_params_default(lt_kernel_get(LT_K_SOFTMAX), &c.params);
    for (int isa = 0; isa < ot_isa_count(); isa++)
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            for (int i = 0; i < 74; i++) x[i] = values[v];
            ot_run(ot_fn(LT_K_SOFTMAX, isa), &c, NULL, 2);
            for (int i = 0; i < 74; i++) ASSERT_NEAR(x[i], 1.0 / 37.0, 1e-8);
        }
}

/* The exp behind softmax, swiglu and attention, through each ISA's
 * exp_sum primitive (x[i] = exp(x[i] - 0)): within 1.5 * 2^-23 relative of
 * exp() over [-87, 88] (measured worst of the vector paths: 0.66 * 2^-23),
 * 0 below, NaN kept, on every ISA path the CPU runs. */
static void test_vector_exp(void) {
    static const lt__act_ops *const ops[LT_ISA_COUNT] = {
        &lt__act_portable, LT_X86_ONLY(&lt__act_avx2), LT_X86_ONLY(&lt__act_avx512)};
    for (int isa = 0; isa < ot_isa_count(); isa++) {
        double worst = 0;
        int64_t bad = 0;
        float xs[37];
        for (int64_t step = 0; step < 2000000; step += 37) {
            for (int i = 0; i < 37; i++) xs[i] = -87.0f + 175.0f * (float)(step + i) / 2000000.0f;
            float ys[37];
            memcpy(ys, xs, sizeof ys);
            ops[isa]->exp_sum(ys, 37, 0.0f);
            for (int i = 0; i < 37 && step + i < 2000000; i++) {
                double rel = fabs(ys[i] - exp((double)xs[i])) / exp((double)xs[i]);
                worst = fmax(worst, rel);
                bad += !(rel <= 1.5 / 8388608.0);
            }
        }
        ASSERT_EQ(bad, 0);
        if (bad) fprintf(stderr, "  %s: worst relative error %g\n", lt_isa_name(isa), worst);
        float special[5] = {-88.0f, -1000.0f, NAN, 0.0f, 1.0f};
        ops[isa]->exp_sum(special, 5, 0.0f);
        if (isa == LT_ISA_PORTABLE) ASSERT_TRUE(special[0] < 1.2e-38f); /* expf: subnormal */
        else ASSERT_EQ(special[0], 0);
        ASSERT_EQ(special[1], 0);
        ASSERT_TRUE(isnan(special[2]));
        ASSERT_EQ(special[3], 1);
        ASSERT_NEAR(special[4], exp(1.0), 3e-7);
    }
}

static void test_check_rejects(void) {
    float a[64], b[64], y[64];
    lt_call c;
    lt_tensor t[3];
    set_binary(&c, t, y, a, b, 4, 16, LT_K_ADD);
    ASSERT_EQ(lt_call_check(LT_K_ADD, &c), LT_OK);
    lt_tensor_init(&t[2], LT_F32, 16, 3, 1, 1, b); /* b has fewer rows */
    ASSERT_EQ(lt_call_check(LT_K_ADD, &c), LT_EINVAL);
    lt_tensor_init(&t[2], LT_F32, 16, 1, 1, 1, b); /* one row: a bias for every row */
    ASSERT_EQ(lt_call_check(LT_K_ADD, &c), LT_OK);
    lt_tensor_init(&t[1], LT_F32, 16, 1, 1, 1, a); /* but a must have y's rows */
    ASSERT_EQ(lt_call_check(LT_K_ADD, &c), LT_EINVAL);
    lt_tensor_init(&t[1], LT_F32, 16, 4, 1, 1, a);
    set_binary(&c, t, y, a, b, 4, 16, LT_K_SWIGLU);
    lt_tensor_init(&t[2], LT_F32, 16, 1, 1, 1, b); /* SWIGLU does not broadcast */
    ASSERT_EQ(lt_call_check(LT_K_SWIGLU, &c), LT_EINVAL);
    set_binary(&c, t, y, a, b, 4, 16, LT_K_SWIGLU);
    ASSERT_EQ(lt_call_check(LT_K_SWIGLU, &c), LT_OK);
    lt_tensor_init(&t[1], LT_BF16, 16, 4, 1, 1, a); /* gate not f32 */
    ASSERT_EQ(lt_call_check(LT_K_SWIGLU, &c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "gate") != NULL);
    lt_tensor_init(&t[1], LT_F32, 16, 4, 1, 1, y + 3); /* gate partially overlaps out */
    ASSERT_EQ(lt_call_check(LT_K_SWIGLU, &c), LT_EINVAL);
    lt_tensor tx;
    lt_tensor_init(&tx, LT_F32, 16, 4, 2, 1, y); /* 3-d */
    lt_call cs = {.op = {&tx}};
    lt_params_default(lt_kernel_get(LT_K_SOFTMAX), &cs.params);
    ASSERT_EQ(lt_call_check(LT_K_SOFTMAX, &cs), LT_EINVAL);
}

int main(void) {
    test_binary(LT_K_ADD, ref_add, 0.0);       /* one float rounding: exact */
    test_binary(LT_K_SWIGLU, ref_swiglu, 1e-6); /* exp within a few ulp: 1e-6 relative */
    test_add_broadcast();
    test_softmax();
    test_softmax_uniform();
    test_vector_exp();
    test_check_rejects();
    return lt_test_finish();
}
