/* ATTENTION against a straightforward double-precision loop (scores, a
 * separate max-shifted softmax, weighted sum of V) and KV_STORE against a
 * plain copy; every ISA path the CPU has, nth = 1..3, every parameter point,
 * grouped-query and plain shapes, decode and prefill at several positions.
 * Cache rows past the last visible position hold NaN, so any read beyond
 * the causal window shows up in the output. */
#include "ops_test.h"

#include <math.h>

#define SENTINEL 12345.0f

typedef struct {
    int64_t heads, kv_heads, hd;
} shape;

static void attention_ref(double *out, const float *q, const float *kc, const float *vc,
                          shape sh, int64_t n, int64_t pos) {
    const int64_t qd = sh.heads * sh.hd, kvd = sh.kv_heads * sh.hd;
    double *s = malloc((size_t)(pos + n) * sizeof *s);
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < sh.heads; h++) {
            const int64_t kvh = h / (sh.heads / sh.kv_heads), keys = pos + t + 1;
            const float *qh = q + t * qd + h * sh.hd;
            for (int64_t j = 0; j < keys; j++) {
                double d = 0;
                const float *kj = kc + j * kvd + kvh * sh.hd;
                for (int64_t i = 0; i < sh.hd; i++) d += (double)qh[i] * kj[i];
                s[j] = d / sqrt((double)sh.hd);
            }
            double m = s[0], sum = 0;
            for (int64_t j = 1; j < keys; j++) m = fmax(m, s[j]);
            for (int64_t j = 0; j < keys; j++) sum += (s[j] = exp(s[j] - m));
            for (int64_t i = 0; i < sh.hd; i++) {
                double o = 0;
                for (int64_t j = 0; j < keys; j++) o += s[j] / sum * vc[j * kvd + kvh * sh.hd + i];
                out[t * qd + h * sh.hd + i] = o;
            }
        }
    free(s);
}

/* One attention problem: data, reference, and tensors. */
typedef struct {
    shape sh;
    int64_t n, pos, seq_len;
    float *q, *kc, *vc, *out, *scratch;
    double *ref;
    int *counts;
    lt_tensor tout, tq, tk, tv, ts;
    lt_call call;
    lt_step step;
} problem;

static void problem_init(problem *p, shape sh, int64_t n, int64_t pos, int64_t seq_len,
                         uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->sh = sh, p->n = n, p->pos = pos, p->seq_len = seq_len;
    const int64_t qd = sh.heads * sh.hd, kvd = sh.kv_heads * sh.hd;
    p->q = malloc((size_t)(n * qd) * 4);
    p->out = malloc((size_t)(n * qd) * 4);
    p->kc = malloc((size_t)(seq_len * kvd) * 4);
    p->vc = malloc((size_t)(seq_len * kvd) * 4);
    p->scratch = malloc((size_t)(seq_len * 4) * 4); /* 3 threads + a guard row */
    p->ref = malloc((size_t)(n * qd) * 8);
    p->counts = malloc((size_t)(n * qd) * sizeof *p->counts);
    ot_seed(seed);
    ot_fill(p->q, n * qd, -4, 4); /* large enough for peaked softmaxes */
    ot_fill(p->kc, seq_len * kvd, -1, 1);
    ot_fill(p->vc, seq_len * kvd, -1, 1);
    for (int64_t i = (pos + n) * kvd; i < seq_len * kvd; i++) p->kc[i] = p->vc[i] = NAN;
    attention_ref(p->ref, p->q, p->kc, p->vc, sh, n, pos);
    lt_tensor_init(&p->tout, LT_F32, qd, n, 1, 1, p->out);
    lt_tensor_init(&p->tq, LT_F32, qd, n, 1, 1, p->q);
    lt_tensor_init(&p->tk, LT_F32, kvd, seq_len, 1, 1, p->kc);
    lt_tensor_init(&p->tv, LT_F32, kvd, seq_len, 1, 1, p->vc);
    p->call = (lt_call){.op = {&p->tout, &p->tq, &p->tk, &p->tv, &p->ts},
                        .ia = {sh.heads, sh.kv_heads, sh.hd}};
    lt_params_default(lt_kernel_get(LT_K_ATTENTION), &p->call.params);
    p->step = (lt_step){.pos = pos, .n_tokens = n};
}

static void problem_free(problem *p) {
    free(p->q); free(p->out); free(p->kc); free(p->vc); free(p->scratch);
    free(p->ref); free(p->counts);
}

/* Runs one configuration and checks it against the reference. */
static void problem_run(problem *p, int isa, int nth) {
    const int64_t ne = p->n * p->sh.heads * p->sh.hd;
    lt_tensor_init(&p->ts, LT_F32, p->seq_len, nth, 1, 1, p->scratch);
    for (int64_t i = 0; i < p->seq_len * 4; i++) p->scratch[i] = SENTINEL;
    ASSERT_EQ(lt_call_check(LT_K_ATTENTION, &p->call), LT_OK);
    lt_kernel_fn fn = ot_fn(LT_K_ATTENTION, isa);
    ASSERT_EQ(ot_run_disjoint(fn, &p->call, &p->step, nth, ne, p->counts), 0);
    ASSERT_EQ(ot_not_once(p->counts, ne), 0);
    /* outputs are convex combinations of V in [-1, 1]; float dot products of
     * up to 64 terms, exp within a few ulp, online rescaling: 2e-5 absolute */
    int64_t bad = 0;
    for (int64_t i = 0; i < ne; i++) bad += !(fabs(p->out[i] - p->ref[i]) <= 2e-5);
    ASSERT_EQ(bad, 0);
    if (bad)
        fprintf(stderr,
                "  isa %d nth %d kv_block %d hpt %d heads %lld/%lld hd %lld n %lld pos %lld\n",
                isa, nth, p->call.params.v[0], p->call.params.v[1], (long long)p->sh.heads,
                (long long)p->sh.kv_heads, (long long)p->sh.hd, (long long)p->n, (long long)p->pos);
    /* only scratch rows 0..nth-1 are used */
    int64_t touched = 0;
    for (int64_t i = p->seq_len * nth; i < p->seq_len * 4; i++)
        touched += p->scratch[i] != SENTINEL;
    ASSERT_EQ(touched, 0);
}

static void test_against_reference(void) {
    static const shape kv[] = {{8, 4, 0}, {6, 6, 0}, {32, 8, 0}};
    static const int64_t hds[] = {8, 32, 64}, ns[] = {1, 5, 16}, positions[] = {0, 1, 17, -1};
    const int64_t seq_len = 40;
    const lt_kernel *k = lt_kernel_get(LT_K_ATTENTION);
    const int points = ot_param_points(k);
    int case_no = 0;
    for (size_t si = 0; si < 3; si++)
    for (size_t hi = 0; hi < 3; hi++)
    for (size_t ni = 0; ni < 3; ni++)
    for (size_t pi = 0; pi < 4; pi++, case_no++) {
        shape sh = {kv[si].heads, kv[si].kv_heads, hds[hi]};
        const int64_t n = ns[ni], pos = positions[pi] < 0 ? seq_len - n : positions[pi];
        problem p;
        problem_init(&p, sh, n, pos, seq_len, (uint64_t)case_no + 1);
        /* every case: the default point and a rotating quarter of the grid,
         * so across the cases each point meets every shape family */
        for (int isa = 0; isa < ot_isa_count(); isa++)
            for (int nth = 1; nth <= 3; nth++) {
                lt_params_default(k, &p.call.params);
                problem_run(&p, isa, nth);
                for (int j = 0; j < points / 4; j++) {
                    ot_param_point(k, (case_no + 4 * j) % points, &p.call.params);
                    problem_run(&p, isa, nth);
                }
            }
        problem_free(&p);
    }
}

/* The whole parameter grid on a GQA shape, decode and prefill, including a
 * context long enough for many key blocks at every kv_block value. */
static void test_full_grid(void) {
    static const struct {
        shape sh;
        int64_t n, pos, seq_len;
    } cases[] = {
        {{8, 4, 32}, 5, 17, 40},   {{8, 4, 8}, 1, 39, 40},     {{32, 8, 64}, 1, 1000, 1100},
        {{6, 6, 32}, 16, 0, 16},   {{8, 4, 32}, 3, 4500, 4600}, {{4, 2, 24}, 7, 300, 310},
    };
    const lt_kernel *k = lt_kernel_get(LT_K_ATTENTION);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        problem p;
        problem_init(&p, cases[ci].sh, cases[ci].n, cases[ci].pos, cases[ci].seq_len, 1000 + ci);
        for (int point = 0; point < ot_param_points(k); point++)
            for (int isa = 0; isa < ot_isa_count(); isa++)
                for (int nth = 1; nth <= 3; nth++) {
                    ot_param_point(k, point, &p.call.params);
                    problem_run(&p, isa, nth);
                }
        problem_free(&p);
    }
}

/* out may be q itself (each task copies its query heads first). */
static void test_out_is_q(void) {
    problem p;
    problem_init(&p, (shape){8, 2, 16}, 6, 9, 20, 77);
    const int64_t ne = p.n * 8 * 16;
    float *q0 = malloc((size_t)ne * 4);
    memcpy(q0, p.q, (size_t)ne * 4);
    p.call.op[0] = &p.tq;
    lt_tensor_init(&p.ts, LT_F32, p.seq_len, 3, 1, 1, p.scratch);
    ASSERT_EQ(lt_call_check(LT_K_ATTENTION, &p.call), LT_OK);
    for (int isa = 0; isa < ot_isa_count(); isa++)
        for (int hpt = 1; hpt <= 8; hpt *= 2) {
            memcpy(p.q, q0, (size_t)ne * 4);
            p.call.params.v[1] = hpt;
            ot_run(ot_fn(LT_K_ATTENTION, isa), &p.call, &p.step, 3);
            int64_t bad = 0;
            for (int64_t i = 0; i < ne; i++) bad += !(fabs(p.q[i] - p.ref[i]) <= 2e-5);
            ASSERT_EQ(bad, 0);
        }
    free(q0);
    problem_free(&p);
}

/* Known answer: with all keys equal, attention is the mean of the visible V
 * rows, whatever q is. */
static void test_uniform_keys(void) {
    problem p;
    problem_init(&p, (shape){4, 2, 16}, 3, 5, 12, 5);
    for (int64_t i = 0; i < 8 * 32; i++) p.kc[i] = 0.25f;
    lt_tensor_init(&p.ts, LT_F32, p.seq_len, 1, 1, 1, p.scratch);
    for (int isa = 0; isa < ot_isa_count(); isa++) {
        ot_run(ot_fn(LT_K_ATTENTION, isa), &p.call, &p.step, 1);
        for (int64_t t = 0; t < 3; t++)
            for (int64_t h = 0; h < 4; h++)
                for (int64_t i = 0; i < 16; i++) {
                    double mean = 0;
                    for (int64_t j = 0; j <= 5 + t; j++) mean += p.vc[j * 32 + (h / 2) * 16 + i];
                    ASSERT_NEAR(p.out[t * 64 + h * 16 + i], mean / (double)(6 + t), 1e-6);
                }
    }
    problem_free(&p);
}

/* Scores growing to several hundred along the sequence: without rescaling by
 * the running max, exp(s - m_first_block) would overflow to inf. */
static void test_large_scores(void) {
    problem p;
    problem_init(&p, (shape){4, 2, 8}, 4, 296, 300, 11);
    const int64_t kvd = 16;
    for (int64_t j = 0; j < 300; j++)
        for (int64_t i = 0; i < kvd; i++)
            p.kc[j * kvd + i] = (float)j / 300.0f * (i % 2 ? -1.0f : 1.0f);
    for (int64_t i = 0; i < 4 * 32; i++) p.q[i] = (i % 2 ? -80.0f : 80.0f) * (i % 3 ? 1.0f : 0.5f);
    attention_ref(p.ref, p.q, p.kc, p.vc, p.sh, p.n, p.pos);
    const lt_kernel *k = lt_kernel_get(LT_K_ATTENTION);
    for (int point = 0; point < ot_param_points(k); point++)
        for (int isa = 0; isa < ot_isa_count(); isa++) {
            ot_param_point(k, point, &p.call.params);
            problem_run(&p, isa, 2);
        }
    problem_free(&p);
}

static void test_attention_rejects(void) {
    problem p;
    problem_init(&p, (shape){8, 4, 8}, 2, 0, 10, 3);
    lt_tensor_init(&p.ts, LT_F32, 10, 2, 1, 1, p.scratch);
    ASSERT_EQ(lt_call_check(LT_K_ATTENTION, &p.call), LT_OK);
    p.call.ia[1] = 3; /* 8 heads over 3 kv heads */
    ASSERT_EQ(lt_call_check(LT_K_ATTENTION, &p.call), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "kv heads") != NULL);
    p.call.ia[1] = 4;
    p.call.ia[2] = 16; /* q row is not heads*head_dim */
    ASSERT_EQ(lt_call_check(LT_K_ATTENTION, &p.call), LT_EINVAL);
    p.call.ia[2] = 8;
    lt_tensor_init(&p.ts, LT_F32, 9, 2, 1, 1, p.scratch); /* scratch shorter than seq_len */
    ASSERT_EQ(lt_call_check(LT_K_ATTENTION, &p.call), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "scratch") != NULL);
    lt_tensor_init(&p.ts, LT_F32, 10, 2, 1, 1, p.scratch);
    lt_tensor_init(&p.tv, LT_F32, 32, 9, 1, 1, p.vc); /* v cache rows != k cache rows */
    ASSERT_EQ(lt_call_check(LT_K_ATTENTION, &p.call), LT_EINVAL);
    lt_tensor_init(&p.tv, LT_F32, 32, 10, 1, 1, p.vc);
    p.call.params.v[0] = 100; /* kv_block outside its values */
    ASSERT_EQ(lt_call_check(LT_K_ATTENTION, &p.call), LT_ECONFIG);
    problem_free(&p);
}

static void test_attention_cost(void) {
    problem p;
    problem_init(&p, (shape){8, 4, 8}, 2, 3, 10, 3);
    double bytes, flops;
    lt_kernel_get(LT_K_ATTENTION)->cost(&p.call, &p.step, &bytes, &flops);
    /* q + out: 2 * 2 * 64 floats; K and V rows 0..4: 2 * 5 * 32 floats */
    ASSERT_NEAR(bytes, 4.0 * (2 * 2 * 64 + 2 * 5 * 32), 0);
    /* keys seen: 4 + 5 = 9 per head, 8 heads, 4*hd + 5 each */
    ASSERT_NEAR(flops, 8.0 * 9 * (4 * 8 + 5), 0);
    problem_free(&p);
}

/* ---- kv_store ----------------------------------------------------------- */

static void test_kv_store(void) {
    static const int64_t dims[] = {8, 24, 256, 1000}, ns[] = {1, 5, 16};
    static const int64_t positions[] = {0, 1, 17, -1};
    const int64_t seq_len = 40;
    const lt_kernel *k = lt_kernel_get(LT_K_KV_STORE);
    for (size_t di = 0; di < 4; di++)
    for (size_t ni = 0; ni < 3; ni++)
    for (size_t pi = 0; pi < 4; pi++) {
        const int64_t d = dims[di], n = ns[ni];
        const int64_t pos = positions[pi] < 0 ? seq_len - n : positions[pi];
        float *cache = malloc((size_t)(seq_len * d) * 4), *src = malloc((size_t)(n * d) * 4);
        int *counts = malloc((size_t)(seq_len * d) * sizeof *counts);
        ot_seed((uint64_t)(d + n * 1000 + pos * 100000));
        ot_fill(src, n * d, -1, 1);
        lt_tensor tc, ts;
        lt_tensor_init(&tc, LT_F32, d, seq_len, 1, 1, cache);
        lt_tensor_init(&ts, LT_F32, d, n, 1, 1, src);
        lt_call c = {.op = {&tc, &ts}};
        lt_step st = {.pos = pos, .n_tokens = n};
        for (int isa = 0; isa < ot_isa_count(); isa++)
        for (int point = 0; point < ot_param_points(k); point++)
        for (int nth = 1; nth <= 3; nth++) {
            ot_param_point(k, point, &c.params);
            ASSERT_EQ(lt_call_check(LT_K_KV_STORE, &c), LT_OK);
            for (int64_t i = 0; i < seq_len * d; i++) cache[i] = (float)i;
            lt_kernel_fn fn = ot_fn(LT_K_KV_STORE, isa);
            ASSERT_EQ(ot_run_disjoint(fn, &c, &st, nth, seq_len * d, counts), 0);
            int64_t bad = 0;
            for (int64_t r = 0; r < seq_len; r++)
                for (int64_t i = 0; i < d; i++) {
                    int inside = r >= pos && r < pos + n;
                    float want = inside ? src[(r - pos) * d + i] : (float)(r * d + i);
                    bad += cache[r * d + i] != want || counts[r * d + i] != inside;
                }
            ASSERT_EQ(bad, 0);
        }
        free(cache); free(src); free(counts);
    }
}

static void test_kv_store_rejects(void) {
    float cache[80], src[40];
    lt_tensor tc, ts;
    lt_tensor_init(&tc, LT_F32, 8, 10, 1, 1, cache);
    lt_tensor_init(&ts, LT_F32, 8, 5, 1, 1, src);
    lt_call c = {.op = {&tc, &ts}};
    lt_params_default(lt_kernel_get(LT_K_KV_STORE), &c.params);
    ASSERT_EQ(lt_call_check(LT_K_KV_STORE, &c), LT_OK);
    lt_tensor_init(&ts, LT_F32, 5, 8, 1, 1, src); /* rows of 5 into a cache of rows of 8 */
    ASSERT_EQ(lt_call_check(LT_K_KV_STORE, &c), LT_EINVAL);
    lt_tensor_init(&tc, LT_F32, 5, 4, 1, 1, cache); /* 8 rows into a 4-row cache */
    ASSERT_EQ(lt_call_check(LT_K_KV_STORE, &c), LT_EINVAL);
}

int main(void) {
    test_against_reference();
    test_full_grid();
    test_out_is_q();
    test_uniform_keys();
    test_large_scores();
    test_attention_rejects();
    test_attention_cost();
    test_kv_store();
    test_kv_store_rejects();
    return lt_test_finish();
}
