/* RMSNORM against a double-precision reference, on every ISA path the CPU
 * has, nth = 1..3 and every min_chunk value; out of place (each thread's
 * share written exactly once) and in place (y == x). */
#include "ops_test.h"

#include <math.h>

static void ref_rmsnorm(double *y, const float *x, const float *w, int64_t n, int64_t d,
                        double eps) {
    for (int64_t r = 0; r < n; r++) {
        double ss = 0;
        for (int64_t i = 0; i < d; i++) ss += (double)x[r * d + i] * x[r * d + i];
        double inv = 1.0 / sqrt(ss / (double)d + eps);
        for (int64_t i = 0; i < d; i++) y[r * d + i] = (double)x[r * d + i] * inv * w[i];
    }
}

static void setup(lt_call *c, lt_tensor t[3], float *y, float *x, float *w, int64_t n, int64_t d) {
    memset(c, 0, sizeof *c);
    lt_tensor_init(&t[0], LT_F32, d, n, 1, 1, y);
    lt_tensor_init(&t[1], LT_F32, d, n, 1, 1, x);
    lt_tensor_init(&t[2], LT_F32, d, 1, 1, 1, w);
    for (int i = 0; i < 3; i++) c->op[i] = &t[i];
    c->fa[0] = 1e-5f;
    lt_params_default(lt_kernel_get(LT_K_RMSNORM), &c->params);
}

static void test_against_reference(void) {
    static const int64_t dims[] = {1, 7, 16, 33, 288, 1000, 4096};
    static const int64_t rows[] = {1, 3, 16};
    const lt_kernel *k = lt_kernel_get(LT_K_RMSNORM);
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
            const int64_t d = dims[di], n = rows[ri], ne = n * d;
            float *x = malloc((size_t)ne * 4), *y = malloc((size_t)ne * 4);
            float *y1 = malloc((size_t)ne * 4), *w = malloc((size_t)d * 4);
            double *ref = malloc((size_t)ne * 8);
            int *counts = malloc((size_t)ne * sizeof *counts);
            ot_seed((uint64_t)(d * 100 + n));
            ot_fill(x, ne, -2, 2);
            ot_fill(w, d, 0.5, 1.5);
            ref_rmsnorm(ref, x, w, n, d, 1e-5);
            lt_call c;
            lt_tensor t[3];
            setup(&c, t, y, x, w, n, d);
            ASSERT_EQ(lt_call_check(LT_K_RMSNORM, &c), LT_OK);
            for (int isa = 0; isa < ot_isa_count(); isa++) {
                lt_kernel_fn fn = ot_fn(LT_K_RMSNORM, isa);
                for (int point = 0; point < ot_param_points(k); point++) {
                    ot_param_point(k, point, &c.params);
                    for (int nth = 1; nth <= 3; nth++) {
                        /* out of place: shares disjoint and covering */
                        c.op[0] = &t[0];
                        ASSERT_EQ(ot_run_disjoint(fn, &c, NULL, nth, ne, counts), 0);
                        ASSERT_EQ(ot_not_once(counts, ne), 0);
                        /* tolerance: float sum of squares and scaling, 2e-5 relative */
                        int bad = 0;
                        for (int64_t i = 0; i < ne; i++)
                            bad += !(fabs(y[i] - ref[i]) <= 2e-5 * fmax(1.0, fabs(ref[i])));
                        ASSERT_EQ(bad, 0);
                        /* every thread computes the same row sums: nth does not change bits */
                        if (nth == 1) memcpy(y1, y, (size_t)ne * 4);
                        else ASSERT_EQ(memcmp(y1, y, (size_t)ne * 4), 0);
                        /* in place: y == x */
                        memcpy(y, x, (size_t)ne * 4);
                        c.op[1] = &t[0];
                        ot_run(fn, &c, NULL, nth);
                        c.op[1] = &t[1];
                        ASSERT_EQ(memcmp(y1, y, (size_t)ne * 4), 0);
                    }
                }
            }
            free(x); free(y); free(y1); free(w); free(ref); free(counts);
        }
    }
}

/* Known answer: a constant row c with unit weights normalises to 1 (eps 0). */
static void test_known_answer(void) {
    float x[40], y[40], w[40];
    for (int i = 0; i < 40; i++) x[i] = 3.0f, w[i] = 1.0f;
    w[5] = -2.0f;
    lt_call c;
    lt_tensor t[3];
    setup(&c, t, y, x, w, 1, 40);
    c.fa[0] = 0.0f;
    for (int isa = 0; isa < ot_isa_count(); isa++) {
        ot_run(ot_fn(LT_K_RMSNORM, isa), &c, NULL, 2);
        for (int i = 0; i < 40; i++) ASSERT_NEAR(y[i], i == 5 ? -2.0 : 1.0, 1e-6);
    }
}

static void test_check_rejects(void) {
    float buf[64] = {0}, w[8] = {0};
    lt_call c;
    lt_tensor t[3];
    setup(&c, t, buf, buf + 32, w, 4, 8);
    ASSERT_EQ(lt_call_check(LT_K_RMSNORM, &c), LT_OK);
    lt_tensor_init(&t[2], LT_F32, 7, 1, 1, 1, w); /* weight length != d */
    ASSERT_EQ(lt_call_check(LT_K_RMSNORM, &c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "weight") != NULL);
    lt_tensor_init(&t[2], LT_F32, 8, 1, 1, 1, w);
    lt_tensor_init(&t[1], LT_F32, 8, 3, 1, 1, buf + 32); /* x rows != y rows */
    ASSERT_EQ(lt_call_check(LT_K_RMSNORM, &c), LT_EINVAL);
    lt_tensor_init(&t[1], LT_F16, 8, 4, 1, 1, buf + 32); /* not f32 */
    ASSERT_EQ(lt_call_check(LT_K_RMSNORM, &c), LT_EINVAL);
    lt_tensor_init(&t[1], LT_F32, 8, 4, 1, 1, buf + 4); /* partial overlap with y */
    ASSERT_EQ(lt_call_check(LT_K_RMSNORM, &c), LT_EINVAL);
    lt_tensor_init(&t[1], LT_F32, 8, 4, 1, 1, buf); /* exact alias is allowed */
    ASSERT_EQ(lt_call_check(LT_K_RMSNORM, &c), LT_OK);
    c.fa[0] = -1.0f;
    ASSERT_EQ(lt_call_check(LT_K_RMSNORM, &c), LT_EINVAL);
    c.fa[0] = 1e-5f;
    c.params.v[0] = 3; /* not an allowed min_chunk */
    ASSERT_EQ(lt_call_check(LT_K_RMSNORM, &c), LT_ECONFIG);
}

static void test_cost(void) {
    float buf[1];
    lt_call c;
    lt_tensor t[3];
    setup(&c, t, buf, buf, buf, 4, 100);
    double bytes, flops;
    lt_kernel_get(LT_K_RMSNORM)->cost(&c, NULL, &bytes, &flops);
    ASSERT_NEAR(bytes, 4.0 * (2 * 400 + 100), 0); /* x read, y written, w read */
    ASSERT_TRUE(flops >= 4.0 * 400);
}

int main(void) {
    test_against_reference();
    test_known_answer();
    test_check_rejects();
    test_cost();
    return lt_test_finish();
}
