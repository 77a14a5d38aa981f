/* ROPE against complex multiplication in double: each pair (x[2i], x[2i+1])
 * is z = x[2i] + i x[2i+1], and the kernel must give z * e^{i theta}. Two
 * references: theta from the documented float recipe (tight), and the exact
 * theta = p * base^(-2i/hd) in double (tolerance grows with p, since the
 * documented recipe rounds the angle in float). Every ISA, nth = 1..3. The
 * NEOX mode pairs (x[i], x[i + hd/2]) instead, and frequency factors divide
 * each pair's angle: the same references with those pairs and angles. */
#include "ops_test.h"

#include <complex.h>
#include <math.h>

/* The documented float angle (llama2.c). */
static double float_angle(int64_t p, int64_t i, int64_t hd, float base) {
    float freq = 1.0f / powf(base, (float)(2 * i) / (float)hd);
    return (double)((float)p * freq);
}

typedef struct {
    int64_t heads, kv_heads, hd;
} shape;

static void rope_ref(double *out, const float *x, int64_t n, int64_t dim, int64_t hd, int64_t pos,
                     float base, int exact) {
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < dim; j += 2) {
            int64_t i = (j % hd) / 2, p = pos + t;
            double theta = exact ? (double)p * pow((double)base, -2.0 * (double)i / (double)hd)
                                 : float_angle(p, i, hd, base);
            double complex z = x[t * dim + j] + I * (double)x[t * dim + j + 1];
            z *= cexp(I * theta);
            out[t * dim + j] = creal(z);
            out[t * dim + j + 1] = cimag(z);
        }
}

/* The NEOX pairs (x[i], x[i + hd/2]) with angles divided by factors (NULL:
 * none), exact angles in double. */
static void rope_ref_neox(double *out, const float *x, int64_t n, int64_t dim, int64_t hd,
                          int64_t pos, float base, const float *factors) {
    const int64_t h = hd / 2;
    for (int64_t t = 0; t < n; t++)
        for (int64_t head = 0; head < dim / hd; head++)
            for (int64_t i = 0; i < h; i++) {
                const int64_t a = t * dim + head * hd + i, b = a + h, p = pos + t;
                double theta = (double)p * pow((double)base, -2.0 * (double)i / (double)hd);
                if (factors) theta /= (double)factors[i];
                double complex z = (x[a] + I * (double)x[b]) * cexp(I * theta);
                out[a] = creal(z);
                out[b] = cimag(z);
            }
}

static int64_t count_bad(const float *y, const double *ref, int64_t n, double tol_abs,
                         double tol_per_pos, int64_t dim, int64_t pos) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double tol = tol_abs + tol_per_pos * (double)(pos + i / dim) * 1.5;
        bad += !(fabs(y[i] - ref[i]) <= tol);
    }
    return bad;
}

static void test_against_reference(void) {
    static const shape shapes[] = {{8, 4, 8}, {6, 6, 32}, {32, 8, 64}, {4, 0, 16}};
    static const int64_t ns[] = {1, 5, 16}, positions[] = {0, 1, 17, 1000};
    static const float bases[] = {10000.0f, 500000.0f};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t ni = 0; ni < 3; ni++)
    for (size_t pi = 0; pi < 4; pi++)
    for (size_t bi = 0; bi < 2; bi++) {
        const shape sh = shapes[si];
        const int64_t n = ns[ni], pos = positions[pi] - (pi == 3 ? n : 0);
        const int64_t qd = sh.heads * sh.hd, kd = sh.kv_heads * sh.hd;
        float *q0 = malloc((size_t)(n * qd) * 4), *k0 = malloc((size_t)(n * kd + 1) * 4);
        float *q = malloc((size_t)(n * qd) * 4), *k = malloc((size_t)(n * kd + 1) * 4);
        float *q1 = malloc((size_t)(n * qd) * 4), *k1 = malloc((size_t)(n * kd + 1) * 4);
        double *rq = malloc((size_t)(n * qd) * 8), *rk = malloc((size_t)(n * kd + 1) * 8);
        double *eq = malloc((size_t)(n * qd) * 8), *ek = malloc((size_t)(n * kd + 1) * 8);
        ot_seed((uint64_t)(si * 1000 + ni * 100 + pi * 10 + bi));
        ot_fill(q0, n * qd, -1, 1);
        ot_fill(k0, n * kd, -1, 1);
        rope_ref(rq, q0, n, qd, sh.hd, pos, bases[bi], 0);
        rope_ref(rk, k0, n, kd, sh.hd, pos, bases[bi], 0);
        rope_ref(eq, q0, n, qd, sh.hd, pos, bases[bi], 1);
        rope_ref(ek, k0, n, kd, sh.hd, pos, bases[bi], 1);
        lt_tensor tq, tk;
        lt_tensor_init(&tq, LT_F32, qd, n, 1, 1, q);
        lt_tensor_init(&tk, LT_F32, kd, n, 1, 1, k);
        lt_call c = {.op = {&tq, kd ? &tk : NULL}, .ia = {sh.hd}, .fa = {bases[bi]}};
        lt_step st = {.pos = pos, .n_tokens = n};
        ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_OK);
        for (int isa = 0; isa < ot_isa_count(); isa++)
            for (int nth = 1; nth <= 3; nth++) {
                memcpy(q, q0, (size_t)(n * qd) * 4);
                memcpy(k, k0, (size_t)(n * kd) * 4);
                ot_run(ot_fn(LT_K_ROPE, isa), &c, &st, nth);
                /* float recipe: cosf/sinf vs cos/sin and the rotation's rounding, 1e-6 */
                ASSERT_EQ(count_bad(q, rq, n * qd, 1e-6, 0, qd, pos), 0);
                ASSERT_EQ(count_bad(k, rk, n * kd, 1e-6, 0, kd, pos), 0);
                /* exact angle: the float angle is off by about 2e-7 * p radians */
                ASSERT_EQ(count_bad(q, eq, n * qd, 1e-6, 4e-7, qd, pos), 0);
                ASSERT_EQ(count_bad(k, ek, n * kd, 1e-6, 4e-7, kd, pos), 0);
                /* the split never changes the arithmetic */
                if (nth == 1) {
                    memcpy(q1, q, (size_t)(n * qd) * 4);
                    memcpy(k1, k, (size_t)(n * kd) * 4);
                } else {
                    ASSERT_EQ(memcmp(q1, q, (size_t)(n * qd) * 4), 0);
                    ASSERT_EQ(memcmp(k1, k, (size_t)(n * kd) * 4), 0);
                }
            }
        free(q0); free(k0); free(q); free(k); free(q1); free(k1);
        free(rq); free(rk); free(eq); free(ek);
    }
}

/* NEOX pairs and frequency factors, every ISA and split, against the exact
 * reference: head widths whose halves are and are not whole vectors, the
 * factors Llama 3 uses (1 up to 32) on NORM pairs too. */
static void test_neox_and_factors(void) {
    static const shape shapes[] = {{4, 2, 64}, {6, 2, 24}, {3, 1, 128}, {2, 0, 10}};
    static const int64_t positions[] = {0, 3, 700};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int mode = 0; mode < 2; mode++)
    for (int with_f = 0; with_f < 2; with_f++)
    for (size_t pi = 0; pi < 3; pi++) {
        const shape sh = shapes[si];
        const int64_t n = 3, pos = positions[pi], qd = sh.heads * sh.hd, kd = sh.kv_heads * sh.hd;
        float *q0 = malloc((size_t)(n * qd) * 4), *k0 = malloc((size_t)(n * kd + 1) * 4);
        float *q = malloc((size_t)(n * qd) * 4), *k = malloc((size_t)(n * kd + 1) * 4);
        float *q1 = malloc((size_t)(n * qd) * 4), *k1 = malloc((size_t)(n * kd + 1) * 4);
        double *rq = malloc((size_t)(n * qd) * 8), *rk = malloc((size_t)(n * kd + 1) * 8);
        float factors[64];
        for (int64_t i = 0; i < sh.hd / 2; i++) factors[i] = 1.0f + 31.0f * (float)i / (float)sh.hd;
        const float *f = with_f ? factors : NULL;
        ot_seed((uint64_t)(si * 100 + (size_t)mode * 10 + pi + 5000));
        ot_fill(q0, n * qd, -1, 1);
        ot_fill(k0, n * kd, -1, 1);
        if (mode == LT_ROPE_NEOX) {
            rope_ref_neox(rq, q0, n, qd, sh.hd, pos, 10000.0f, f);
            rope_ref_neox(rk, k0, n, kd, sh.hd, pos, 10000.0f, f);
        } else { /* the NORM pairs: z = x[2i] + i x[2i+1], angles divided likewise */
            for (int64_t t = 0; t < n; t++)
                for (int64_t j = 0; j < qd + kd; j += 2) {
                    const bool isq = j < qd;
                    const float *x = isq ? q0 + t * qd + j : k0 + t * kd + (j - qd);
                    double *o = isq ? rq + t * qd + j : rk + t * kd + (j - qd);
                    const int64_t i = ((isq ? j : j - qd) % sh.hd) / 2;
                    double th = (double)(pos + t) *
                                pow(10000.0, -2.0 * (double)i / (double)sh.hd);
                    if (f) th /= (double)f[i];
                    double complex z = (x[0] + I * (double)x[1]) * cexp(I * th);
                    o[0] = creal(z);
                    o[1] = cimag(z);
                }
        }
        lt_tensor tq, tk, tf;
        lt_tensor_init(&tq, LT_F32, qd, n, 1, 1, q);
        lt_tensor_init(&tk, LT_F32, kd, n, 1, 1, k);
        lt_tensor_init(&tf, LT_F32, sh.hd / 2, 1, 1, 1, factors);
        lt_call c = {.op = {&tq, kd ? &tk : NULL, f ? &tf : NULL}, .ia = {sh.hd, mode},
                     .fa = {10000.0f}};
        lt_step st = {.pos = pos, .n_tokens = n};
        ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_OK);
        for (int isa = 0; isa < ot_isa_count(); isa++)
            for (int nth = 1; nth <= 3; nth++) {
                memcpy(q, q0, (size_t)(n * qd) * 4);
                memcpy(k, k0, (size_t)(n * kd) * 4);
                ot_run(ot_fn(LT_K_ROPE, isa), &c, &st, nth);
                ASSERT_EQ(count_bad(q, rq, n * qd, 1e-6, 4e-7, qd, pos), 0);
                ASSERT_EQ(count_bad(k, rk, n * kd, 1e-6, 4e-7, kd, pos), 0);
                if (isa == 0 && nth == 1) { /* the portable result, which others match closely */
                    memcpy(q1, q, (size_t)(n * qd) * 4);
                    memcpy(k1, k, (size_t)(n * kd) * 4);
                } else if (isa == 0) { /* the split never changes the arithmetic */
                    ASSERT_EQ(memcmp(q1, q, (size_t)(n * qd) * 4), 0);
                    ASSERT_EQ(memcmp(k1, k, (size_t)(n * kd) * 4), 0);
                }
            }
        free(q0); free(k0); free(q); free(k); free(q1); free(k1); free(rq); free(rk);
    }
}

/* At position 0 every angle is 0: q and k come back bit for bit. */
static void test_identity_at_pos0(void) {
    float q[2 * 48], k[2 * 16], q0[2 * 48], k0[2 * 16];
    ot_seed(7);
    ot_fill(q0, 96, -3, 3);
    ot_fill(k0, 32, -3, 3);
    lt_tensor tq, tk;
    lt_tensor_init(&tq, LT_F32, 48, 1, 1, 1, q);
    lt_tensor_init(&tk, LT_F32, 16, 1, 1, 1, k);
    lt_call c = {.op = {&tq, &tk}, .ia = {16}, .fa = {10000.0f}};
    lt_step st = {.pos = 0, .n_tokens = 1};
    for (int isa = 0; isa < ot_isa_count(); isa++) {
        memcpy(q, q0, sizeof q);
        memcpy(k, k0, sizeof k);
        ot_run(ot_fn(LT_K_ROPE, isa), &c, &st, 2);
        ASSERT_EQ(memcmp(q, q0, 48 * 4), 0);
        ASSERT_EQ(memcmp(k, k0, 16 * 4), 0);
        ASSERT_EQ(memcmp(q + 48, q0 + 48, 48 * 4), 0); /* row 1 is not an operand row */
    }
}

/* Known answer: head_dim 2, pair (1, 0) at position p rotates by p radians. */
static void test_known_angle(void) {
    float q[2] = {1.0f, 0.0f};
    lt_tensor tq;
    lt_tensor_init(&tq, LT_F32, 2, 1, 1, 1, q);
    lt_call c = {.op = {&tq}, .ia = {2}, .fa = {10000.0f}};
    lt_step st = {.pos = 3, .n_tokens = 1};
    for (int isa = 0; isa < ot_isa_count(); isa++) {
        q[0] = 1.0f, q[1] = 0.0f;
        ot_run(ot_fn(LT_K_ROPE, isa), &c, &st, 1);
        ASSERT_NEAR(q[0], cos(3.0), 1e-7);
        ASSERT_NEAR(q[1], sin(3.0), 1e-7);
    }
}

static void test_check_rejects(void) {
    float q[64], k[64];
    lt_tensor tq, tk;
    lt_tensor_init(&tq, LT_F32, 32, 2, 1, 1, q);
    lt_tensor_init(&tk, LT_F32, 16, 2, 1, 1, k);
    lt_call c = {.op = {&tq, &tk}, .ia = {8}, .fa = {10000.0f}};
    ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_OK);
    c.ia[0] = 7; /* odd head_dim */
    ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_EINVAL);
    c.ia[0] = 12; /* 32 is not a whole number of heads */
    ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_EINVAL);
    c.ia[0] = 8;
    lt_tensor_init(&tk, LT_F32, 16, 1, 1, 1, k); /* k tokens != q tokens */
    ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_EINVAL);
    lt_tensor_init(&tk, LT_F32, 16, 2, 1, 1, k);
    c.fa[0] = 0.0f;
    ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "base") != NULL);
    c.fa[0] = 10000.0f;
    c.ia[1] = 2; /* no such mode */
    ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "mode") != NULL);
    c.ia[1] = LT_ROPE_NEOX;
    ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_OK);
    float f[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    lt_tensor tf;
    lt_tensor_init(&tf, LT_F32, 8, 1, 1, 1, f); /* head_dim 8 has 4 pairs */
    c.op[2] = &tf;
    ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "rope factors have shape {8, 1}, expected {4}") != NULL);
    lt_tensor_init(&tf, LT_F32, 4, 1, 1, 1, f);
    ASSERT_EQ(lt_call_check(LT_K_ROPE, &c), LT_OK);
}

int main(void) {
    test_against_reference();
    test_neox_and_factors();
    test_identity_at_pos0();
    test_known_angle();
    test_check_rejects();
    return lt_test_finish();
}
