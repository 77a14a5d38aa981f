/* The sampler's chain (repetition penalty, top-k, top-p, min-p, temperature)
 * against a reference written here from llama.cpp's definitions: sort the
 * penalised logits, cut to k, take the prefix of the temperature-1
 * distribution that reaches top_p, keep p >= min_p * p_max, then softmax at
 * the temperature, all in double. Checked: the distribution of
 * lt_sampler_probs (the same candidate set, the same probabilities) on
 * random logits over a grid of settings, hand-derived sets on small
 * vocabularies, the draws' frequencies, the penalty window, the argument
 * checks, and that a seed repeats its draws. */
#include <stdlib.h>

#include "looptune/model.h"
#include "test.h"

enum { NMAX = 5000, HMAX = 256 };

/* qsort's order for ref_probs: descending logit, ties by lowest id */
static const double *sort_keys;
static int by_logit_desc(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    if (sort_keys[i] != sort_keys[j]) return sort_keys[i] > sort_keys[j] ? -1 : 1;
    return i - j;
}
static int by_value_desc(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y;
}

/* p[n] = the reference distribution for logits x after accepting hist[0..nh). */
static void ref_probs(const float *x, int n, const lt_sampler_opts *o, const int32_t *hist,
                      int nh, double *p) {
    static double l[NMAX];
    static int order[NMAX];
    static bool keep[NMAX];
    for (int i = 0; i < n; i++) l[i] = x[i];
    /* the window: the last repeat_last_n accepted, each distinct id once */
    int from = nh > o->repeat_last_n ? nh - o->repeat_last_n : 0;
    static bool hit[NMAX];
    memset(hit, 0, sizeof hit);
    for (int j = from; j < nh; j++) hit[hist[j]] = true;
    for (int i = 0; i < n; i++)
        if (hit[i]) l[i] = l[i] <= 0 ? l[i] * o->repeat_penalty : l[i] / o->repeat_penalty;
    for (int i = 0; i < n; i++) order[i] = i;
    sort_keys = l;
    qsort(order, (size_t)n, sizeof *order, by_logit_desc);
    memset(p, 0, sizeof(double) * (size_t)n);
    if (o->temp == 0) {
        p[order[0]] = 1;
        return;
    }
    int m = o->top_k > 0 && o->top_k < n ? o->top_k : n;
    const double mx = l[order[0]];
    double z = 0;
    for (int r = 0; r < m; r++) z += exp(l[order[r]] - mx);
    if (o->top_p < 1) {
        double cum = 0;
        int r = 0;
        while (r < m) {
            cum += exp(l[order[r]] - mx) / z;
            r++;
            if (cum >= o->top_p) break;
        }
        m = r;
    }
    for (int r = 0; r < n; r++) keep[order[r]] = r < m;
    for (int i = 0; i < n; i++)
        if (o->min_p > 0 && exp(l[i] - mx) < o->min_p) keep[i] = false;
    double zt = 0;
    for (int i = 0; i < n; i++)
        if (keep[i]) zt += p[i] = exp((l[i] - mx) / o->temp);
    for (int i = 0; i < n; i++) p[i] /= zt;
}

/* Whether a top-p boundary of these logits lies so close to top_p that
 * float and double arithmetic may pick different sets. */
static bool top_p_boundary_close(const float *x, int n, const lt_sampler_opts *o) {
    if (o->top_p >= 1) return false;
    static double q[NMAX];
    lt_sampler_opts o1 = *o;
    o1.top_p = 1, o1.min_p = 0, o1.temp = 1;
    ref_probs(x, n, &o1, NULL, 0, q);
    qsort(q, (size_t)n, sizeof *q, by_value_desc);
    /* the sums just below and at the boundary */
    double cum = 0, below = 0;
    for (int i = 0; i < n && cum < o->top_p; i++) below = cum, cum += q[i];
    return fabs(cum - o->top_p) < 1e-5 || fabs(below - o->top_p) < 1e-5;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double unif(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* lt_sampler_probs against the reference over random logits and settings. */
static void test_grid(void) {
    static float x[NMAX], y[NMAX];
    static double p[NMAX];
    const int sizes[] = {7, 50, NMAX};
    const float temps[] = {0.0f, 0.5f, 1.0f, 1.7f};
    const int ks[] = {0, 1, 5, 40};
    const float tps[] = {1.0f, 0.5f, 0.9f};
    const float mps[] = {0.0f, 0.05f, 0.3f};
    const float reps[] = {1.0f, 1.3f, 0.8f};
    int32_t hist[HMAX];
    int cases = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 4; c++)
                for (size_t d = 0; d < 3; d++)
                    for (size_t e = 0; e < 3; e++)
                        for (size_t f = 0; f < 3; f++) {
                            const int n = sizes[a];
                            lt_sampler_opts o = {.temp = temps[b], .top_k = ks[c], .top_p = tps[d],
                                                 .min_p = mps[e], .repeat_penalty = reps[f],
                                                 .repeat_last_n = 16, .seed = 1};
                            do {
                                /* logits spread wide enough to give every filter work */
                                for (int i = 0; i < n; i++) x[i] = (float)(unif() * 8.0 - 5.0);
                            } while (top_p_boundary_close(x, n, &o));
                            const int nh = 24; /* more than the window: the oldest fall out */
                            for (int j = 0; j < nh; j++) hist[j] = (int32_t)(unif() * n);
                            lt_sampler *s;
                            ASSERT_EQ(lt_sampler_init_opts(&s, n, &o), LT_OK);
                            for (int j = 0; j < nh; j++) lt_sampler_accept(s, hist[j]);
                            memcpy(y, x, sizeof(float) * (size_t)n);
                            lt_sampler_probs(s, y);
                            ref_probs(x, n, &o, hist, nh, p);
                            int bad_set = 0;
                            double worst = 0;
                            for (int i = 0; i < n; i++) {
                                bad_set += (p[i] > 0) != (y[i] > 0);
                                double err = fabs(y[i] - p[i]) / (p[i] > 1e-30 ? p[i] : 1.0);
                                worst = err > worst ? err : worst;
                            }
                            if (bad_set || worst > 2e-5)
                                fprintf(stderr, "n %d temp %g k %d top_p %g min_p %g rep %g\n", n,
                                        (double)o.temp, o.top_k, (double)o.top_p, (double)o.min_p,
                                        (double)o.repeat_penalty);
                            ASSERT_EQ(bad_set, 0);
                            ASSERT_TRUE(worst <= 2e-5);
                            lt_sampler_free(s);
                            cases++;
                        }
    ASSERT_EQ(cases, 3 * 4 * 4 * 3 * 3 * 3);
}

/* The support of lt_sampler_probs for x under o, as a bit mask of ids. */
static unsigned support(const float *x, int n, const lt_sampler_opts *o, const int32_t *hist,
                        int nh) {
    float y[32];
    memcpy(y, x, sizeof(float) * (size_t)n);
    lt_sampler *s;
    ASSERT_EQ(lt_sampler_init_opts(&s, n, o), LT_OK);
    for (int j = 0; j < nh; j++) lt_sampler_accept(s, hist[j]);
    lt_sampler_probs(s, y);
    lt_sampler_free(s);
    unsigned m = 0;
    for (int i = 0; i < n; i++) m |= (y[i] > 0) << i;
    return m;
}

#define BIT(i) (1u << (i))

/* Sets worked out by hand from the definitions. */
static void test_hand_sets(void) {
    /* ids:              0     1     2     3     4     5 */
    const float x[6] = {3.0f, 1.0f, 2.0f, 0.0f, -1.0f, 2.0f};
    lt_sampler_opts o = lt_sampler_defaults();
    o.temp = 1, o.top_p = 1;
    /* top-k 2: 3 and the first of the two 2s (id 2) */
    o.top_k = 2;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0) | BIT(2));
    o.top_k = 3;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0) | BIT(2) | BIT(5));
    o.top_k = 0;
    /* min-p 0.3: keep x >= 3 + ln 0.3 = 1.796: ids 0, 2, 5; 0.4 (3 - 0.916 = 2.084): id 0 */
    o.min_p = 0.3f;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0) | BIT(2) | BIT(5));
    o.min_p = 0.4f;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0));
    o.min_p = 0;
    /* top-p: p = e^x / Z, Z = e^3 + 2e^2 + e + 1 + e^-1 = 38.26; p0 = 0.525,
     * p2 = p5 = 0.193, p1 = 0.071: 0.5 -> {0}; 0.6 -> {0, 2}; 0.8 -> {0, 2, 5};
     * 0.95 -> {0, 2, 5, 1} (0.982) */
    o.top_p = 0.5f;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0));
    o.top_p = 0.6f;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0) | BIT(2));
    o.top_p = 0.8f;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0) | BIT(2) | BIT(5));
    o.top_p = 0.95f;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0) | BIT(1) | BIT(2) | BIT(5));
    /* top-p computes its set before the temperature: at temp 0.25 the
     * distribution is far sharper (p0 = 0.96), still 0.95 gives four ids */
    o.temp = 0.25f;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0) | BIT(1) | BIT(2) | BIT(5));
    /* top-k 2 then top-p 0.8 on the renormalised pair: p0 = e/(e+1) = 0.73: both */
    o.temp = 1, o.top_k = 2, o.top_p = 0.8f;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0) | BIT(2));
    o.top_p = 0.7f;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0));
    /* min-p after top-p: 0.95 gives {0,1,2,5}; min-p 0.2 (x >= 1.39) drops 1 */
    o.top_k = 0, o.top_p = 0.95f, o.min_p = 0.2f;
    ASSERT_EQ(support(x, 6, &o, NULL, 0), BIT(0) | BIT(2) | BIT(5));
    /* repetition penalty 2 on ids 0 and 4 (0 seen twice: once all the same):
     * x0 = 1.5, x4 = -2; greedy now takes id 2 */
    lt_sampler_opts g = lt_sampler_defaults();
    g.temp = 0, g.repeat_penalty = 2.0f, g.repeat_last_n = 4;
    const int32_t h[3] = {0, 4, 0};
    float y[6];
    memcpy(y, x, sizeof y);
    lt_sampler *s;
    ASSERT_EQ(lt_sampler_init_opts(&s, 6, &g), LT_OK);
    for (int j = 0; j < 3; j++) lt_sampler_accept(s, h[j]);
    ASSERT_EQ(lt_sampler_sample(s, y), 2);
    ASSERT_NEAR(y[0], 1.5, 0);
    ASSERT_NEAR(y[4], -2.0, 0);
    /* the window holds 4: after 4 more tokens 0 has left it */
    for (int j = 0; j < 4; j++) lt_sampler_accept(s, 3);
    memcpy(y, x, sizeof y);
    ASSERT_EQ(lt_sampler_sample(s, y), 0);
    ASSERT_NEAR(y[3], 0.0, 0); /* 0 * 2 */
    /* after reset nothing is penalised */
    lt_sampler_reset(s);
    memcpy(y, x, sizeof y);
    lt_sampler_sample(s, y);
    ASSERT_NEAR(y[0], 3.0, 0);
    lt_sampler_free(s);
    /* repeat_last_n 0: the penalty looks at nothing */
    g.repeat_last_n = 0;
    ASSERT_EQ(lt_sampler_init_opts(&s, 6, &g), LT_OK);
    lt_sampler_accept(s, 0);
    memcpy(y, x, sizeof y);
    ASSERT_EQ(lt_sampler_sample(s, y), 0);
    lt_sampler_free(s);
}

/* The draws follow the distribution lt_sampler_probs reports (reference-checked above). */
static void test_draw_frequencies(void) {
    enum { N = 12, DRAWS = 100000 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(unif() * 4.0 - 2.0);
    lt_sampler_opts o = {.temp = 0.7f, .top_k = 8, .top_p = 0.9f, .min_p = 0.05f,
                         .repeat_penalty = 1.5f, .repeat_last_n = 8, .seed = 9};
    const int32_t hist[3] = {1, 5, 9};
    double p[N];
    ref_probs(x, N, &o, hist, 3, p);
    lt_sampler *s;
    ASSERT_EQ(lt_sampler_init_opts(&s, N, &o), LT_OK);
    for (int j = 0; j < 3; j++) lt_sampler_accept(s, hist[j]);
    long count[N] = {0}, outside = 0;
    const int draws = lt_test_emulated() ? DRAWS / 5 : DRAWS;
    for (int d = 0; d < draws; d++) {
        float y[N];
        memcpy(y, x, sizeof y);
        int32_t id = lt_sampler_sample(s, y);
        if (id < 0 || id >= N || p[id] == 0) outside++;
        else count[id]++;
    }
    ASSERT_EQ(outside, 0);
    /* 0.01 is over six standard deviations of a frequency over 100k draws */
    for (int i = 0; i < N; i++)
        ASSERT_NEAR((double)count[i] / draws, p[i], 0.01 * sqrt((double)DRAWS / draws));
    lt_sampler_free(s);
}

static void draws_of(uint64_t seed, int32_t *out, int n) {
    enum { V = 300 };
    lt_sampler_opts o = {.temp = 0.9f, .top_k = 50, .top_p = 0.95f, .min_p = 0.01f,
                         .repeat_penalty = 1.1f, .repeat_last_n = 32, .seed = seed};
    lt_sampler *s;
    ASSERT_EQ(lt_sampler_init_opts(&s, V, &o), LT_OK);
    for (int i = 0; i < n; i++) {
        float x[V];
        for (int j = 0; j < V; j++) x[j] = (float)((j * 37) % 23) * 0.2f;
        out[i] = lt_sampler_sample(s, x);
        lt_sampler_accept(s, out[i]);
    }
    lt_sampler_free(s);
}

static void test_seeds(void) {
    int32_t a[500], b[500], c[500];
    draws_of(31, a, 500);
    draws_of(31, b, 500);
    draws_of(32, c, 500);
    ASSERT_TRUE(memcmp(a, b, sizeof a) == 0);
    ASSERT_TRUE(memcmp(a, c, sizeof a) != 0);
}

static void test_checks(void) {
    lt_sampler *s = (lt_sampler *)&s;
    lt_sampler_opts o = lt_sampler_defaults();
    o.top_k = -1;
    ASSERT_EQ(lt_sampler_init_opts(&s, 10, &o), LT_EINVAL);
    ASSERT_TRUE(s == NULL);
    o = lt_sampler_defaults(), o.min_p = -0.1f;
    ASSERT_EQ(lt_sampler_init_opts(&s, 10, &o), LT_EINVAL);
    o.min_p = 1.5f;
    ASSERT_EQ(lt_sampler_init_opts(&s, 10, &o), LT_EINVAL);
    o.min_p = NAN;
    ASSERT_EQ(lt_sampler_init_opts(&s, 10, &o), LT_EINVAL);
    o = lt_sampler_defaults(), o.repeat_penalty = 0;
    ASSERT_EQ(lt_sampler_init_opts(&s, 10, &o), LT_EINVAL);
    o.repeat_penalty = INFINITY;
    ASSERT_EQ(lt_sampler_init_opts(&s, 10, &o), LT_EINVAL);
    o = lt_sampler_defaults(), o.repeat_last_n = -1;
    ASSERT_EQ(lt_sampler_init_opts(&s, 10, &o), LT_EINVAL);
    ASSERT_EQ(lt_sampler_init_opts(&s, 10, NULL), LT_EINVAL);
    /* top_k above the vocabulary keeps everything */
    o = lt_sampler_defaults(), o.top_k = 1000, o.top_p = 1, o.temp = 1;
    const float x[3] = {0, 1, 2};
    ASSERT_EQ(support(x, 3, &o, NULL, 0), 7u);
}

int main(void) {
    test_checks();
    test_hand_sets();
    test_grid();
    test_draw_frequencies();
    test_seeds();
    return lt_test_finish();
}
