/* Sampler: argument checks, greedy argmax, the empirical distribution of
 * temperature sampling against softmax computed in double here, the nucleus
 * bound of top-p, determinism per seed, and a known xorshift64* sequence. */
#include "looptune/model.h"
#include "test.h"

#define DRAWS 100000
/* A frequency over 100k draws has standard deviation sqrt(p(1-p)/1e5) <=
 * 0.0016; 0.01 is over six of them, so a correct sampler never fails it
 * while a wrong temperature or an off-by-one bucket does. */
#define FREQ_TOL 0.01
/* Under an emulator the top-p tests (whose radix selection costs most per
 * draw) draw a fifth as often and widen their bounds by sqrt(5), the same
 * number of standard deviations; the large vocabulary is a fifth as large. */
#define EMU_SHRINK 5

static void test_init_checks(void) {
    lt_sampler *s = (lt_sampler *)&s;
    ASSERT_EQ(lt_sampler_init(&s, 0, 1.0f, 1.0f, 1), LT_EINVAL);
    ASSERT_TRUE(s == NULL);
    ASSERT_EQ(lt_sampler_init(&s, 10, -0.5f, 1.0f, 1), LT_EINVAL);
    ASSERT_EQ(lt_sampler_init(&s, 10, NAN, 1.0f, 1), LT_EINVAL);
    ASSERT_EQ(lt_sampler_init(&s, 10, INFINITY, 1.0f, 1), LT_EINVAL);
    ASSERT_EQ(lt_sampler_init(&s, 10, 1.0f, 0.0f, 1), LT_EINVAL);
    ASSERT_EQ(lt_sampler_init(&s, 10, 1.0f, 1.5f, 1), LT_EINVAL);
    ASSERT_EQ(lt_sampler_init(&s, 10, 1.0f, NAN, 1), LT_EINVAL);
    ASSERT_EQ(lt_sampler_init(&s, 10, 0.0f, 1.0f, 0), LT_OK);
    lt_sampler_free(s);
    lt_sampler_free(NULL);
}

static void test_greedy(void) {
    lt_sampler *s;
    ASSERT_EQ(lt_sampler_init(&s, 6, 0.0f, 0.9f, 7), LT_OK);
    float a[6] = {-3, -1, -2, -0.5f, -7, -0.75f};
    ASSERT_EQ(lt_sampler_sample(s, a), 3);
    float b[6] = {1, 4, 2, 4, 4, 0}; /* ties: lowest id */
    ASSERT_EQ(lt_sampler_sample(s, b), 1);
    float c[6] = {9, 0, 0, 0, 0, 0};
    ASSERT_EQ(lt_sampler_sample(s, c), 0);
    lt_sampler_free(s);
}

/* Greedy over rows longer than the argmax's lanes (16): the lowest id of a
 * tie whichever lanes hold it, the tail after the last full group, NaN
 * skipped, and a row of NaN and -inf (the first -inf, else 0). */
static void test_greedy_long(void) {
    enum { N = 83 };
    lt_sampler *s;
    ASSERT_EQ(lt_sampler_init(&s, N, 0.0f, 1.0f, 1), LT_OK);
    float x[N];
    const int32_t ties[][2] = {{3, 21}, {21, 3}, {40, 56}, {17, 80}, {1, 2}};
    for (size_t t = 0; t < sizeof ties / sizeof ties[0]; t++) {
        for (int i = 0; i < N; i++) x[i] = (float)(i % 7) - 10.0f;
        x[ties[t][0]] = x[ties[t][1]] = 5.0f;
        const int32_t lo = ties[t][0] < ties[t][1] ? ties[t][0] : ties[t][1];
        ASSERT_EQ(lt_sampler_sample(s, x), lo);
    }
    for (int i = 0; i < N; i++) x[i] = -1.0f;
    x[82] = 2.0f; /* in the tail */
    ASSERT_EQ(lt_sampler_sample(s, x), 82);
    for (int i = 0; i < N; i++) x[i] = NAN;
    x[50] = -3.0f;
    ASSERT_EQ(lt_sampler_sample(s, x), 50);
    x[50] = NAN;
    ASSERT_EQ(lt_sampler_sample(s, x), 0);
    for (int i = 0; i < N; i++) x[i] = i < 30 ? NAN : -INFINITY;
    ASSERT_EQ(lt_sampler_sample(s, x), 30);
    for (int i = 0; i < N; i++) x[i] = -INFINITY;
    ASSERT_EQ(lt_sampler_sample(s, x), 0);
    lt_sampler_free(s);
}

static int desc_nan_low(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    if (isnan(x)) x = -INFINITY;
    if (isnan(y)) y = -INFINITY;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* top-k keeps the k largest (of equal ones at the boundary the lowest ids;
 * NaN as -inf), by a heap for small k and by quickselect for large: the
 * kept set against one from a sorted copy, on rows in random, ascending and
 * descending order, with many repeats, NaN and -inf. */
static void test_top_k_sets(void) {
    enum { N = 3000 };
    static float x[N], sorted[N], p[N];
    const int64_t ks[] = {1, 2, 3, 40, 1000, 1024, 1025, 1500, N - 1};
    uint64_t r = 12345;
    for (int kind = 0; kind < 5; kind++) {
        for (int i = 0; i < N; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            const float u = (float)(r >> 40) / 16777216.0f;
            x[i] = kind == 0 ? u * 8 - 4
                   : kind == 1 ? (float)i * 0.01f
                   : kind == 2 ? -(float)i * 0.01f
                   : kind == 3 ? (float)(int)(u * 5) /* five values, repeated */
                               : (i % 11 == 0 ? NAN : i % 7 == 0 ? -INFINITY : u);
        }
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            const int64_t k = ks[t];
            memcpy(sorted, x, sizeof x);
            qsort(sorted, N, sizeof *sorted, desc_nan_low);
            const float kth = isnan(sorted[k - 1]) ? -INFINITY : sorted[k - 1];
            int64_t above = 0;
            for (int i = 0; i < N; i++) above += x[i] > kth;
            lt_sampler_opts o = lt_sampler_defaults();
            o.temp = 1.0f, o.top_p = 1.0f, o.top_k = (int32_t)k, o.repeat_last_n = 0;
            lt_sampler *s;
            ASSERT_EQ(lt_sampler_init_opts(&s, N, &o), LT_OK);
            memcpy(p, x, sizeof x);
            lt_sampler_probs(s, p);
            int64_t equal_left = k - above, kept = 0, wrong = 0;
            for (int i = 0; i < N; i++) {
                bool want = x[i] > kth || (x[i] == kth && equal_left-- > 0);
                /* a kept -inf has probability 0, as every dropped one */
                if (isnan(x[i]) || x[i] == -INFINITY) want = false;
                wrong += want != (p[i] > 0.0f);
                kept += p[i] > 0.0f;
            }
            ASSERT_EQ(wrong, 0);
            ASSERT_TRUE(kept <= k);
            lt_sampler_free(s);
        }
    }
}

static void softmax_ref(const float *logits, int n, double temp, double *p) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    for (int i = 0; i < n; i++) sum += p[i] = exp((logits[i] - mx) / temp);
    for (int i = 0; i < n; i++) p[i] /= sum;
}

static void test_distribution(void) {
    enum { N = 8 };
    const float logits[N] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 2.0f, -4.0f};
    const float temps[] = {0.7f, 1.0f, 2.5f};
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++) {
        lt_sampler *s;
        ASSERT_EQ(lt_sampler_init(&s, N, temps[t], 1.0f, 1234 + t), LT_OK);
        long count[N] = {0};
        for (int d = 0; d < DRAWS; d++) {
            float x[N];
            memcpy(x, logits, sizeof x);
            int32_t id = lt_sampler_sample(s, x);
            ASSERT_TRUE(id >= 0 && id < N);
            if (id >= 0 && id < N) count[id]++;
        }
        double p[N];
        softmax_ref(logits, N, temps[t], p);
        for (int i = 0; i < N; i++) ASSERT_NEAR((double)count[i] / DRAWS, p[i], FREQ_TOL);
        lt_sampler_free(s);
    }
}

static void test_top_p(void) {
    enum { N = 10 };
    const float logits[N] = {0.3f, 2.0f, -1.0f, 1.2f, 0.0f, 2.2f, -0.5f, 0.9f, -2.0f, 1.0f};
    const float top_ps[] = {0.3f, 0.6f, 0.85f};
    double p[N];
    softmax_ref(logits, N, 1.0, p);
    for (size_t t = 0; t < sizeof top_ps / sizeof top_ps[0]; t++) {
        /* the nucleus, by selection: repeatedly take the most probable left */
        bool in[N] = {false};
        double cum = 0;
        while (cum < top_ps[t]) {
            int best = -1;
            for (int i = 0; i < N; i++)
                if (!in[i] && (best < 0 || p[i] > p[best])) best = i;
            in[best] = true;
            cum += p[best];
        }
        lt_sampler *s;
        ASSERT_EQ(lt_sampler_init(&s, N, 1.0f, top_ps[t], 99), LT_OK);
        long count[N] = {0}, outside = 0;
        const int draws = lt_test_emulated() ? DRAWS / EMU_SHRINK : DRAWS;
        const double tol = FREQ_TOL * sqrt((double)DRAWS / draws);
        for (int d = 0; d < draws; d++) {
            float x[N];
            memcpy(x, logits, sizeof x);
            int32_t id = lt_sampler_sample(s, x);
            if (id < 0 || id >= N || !in[id]) outside++;
            else count[id]++;
        }
        ASSERT_EQ(outside, 0);
        for (int i = 0; i < N; i++)
            if (in[i]) ASSERT_NEAR((double)count[i] / draws, p[i] / cum, tol);
        lt_sampler_free(s);
    }
    /* two equal tokens, a nucleus of 0.1: the first (lowest id) alone */
    lt_sampler *s;
    ASSERT_EQ(lt_sampler_init(&s, 2, 1.0f, 0.1f, 5), LT_OK);
    int other = 0;
    for (int d = 0; d < 1000; d++) {
        float x[2] = {0.5f, 0.5f};
        other += lt_sampler_sample(s, x) != 0;
    }
    ASSERT_EQ(other, 0);
    lt_sampler_free(s);
}

/* 16 equal logits make each probability exactly 1/16, so the token drawn is
 * the top 4 bits of each xorshift64* output; the expected values come from
 * an independent implementation of the generator. */
static void test_known_sequence(void) {
    static const int32_t seed42[16] = {5, 12, 12, 15, 12, 13, 3, 7, 4, 10, 6, 5, 14, 3, 1, 9};
    static const int32_t seed0[16] = {0, 5, 10, 7, 9, 9, 13, 6, 8, 13, 0, 11, 2, 14, 1, 5};
    const int32_t *want[2] = {seed42, seed0};
    const uint64_t seeds[2] = {42, 0};
    for (int k = 0; k < 2; k++) {
        lt_sampler *s;
        ASSERT_EQ(lt_sampler_init(&s, 16, 1.0f, 1.0f, seeds[k]), LT_OK);
        for (int i = 0; i < 16; i++) {
            float x[16] = {0};
            ASSERT_EQ(lt_sampler_sample(s, x), want[k][i]);
        }
        lt_sampler_free(s);
    }
}

static void run_seq(uint64_t seed, float top_p, int32_t *out, int n) {
    enum { V = 50 };
    lt_sampler *s;
    ASSERT_EQ(lt_sampler_init(&s, V, 0.9f, top_p, seed), LT_OK);
    for (int i = 0; i < n; i++) {
        float x[V];
        for (int j = 0; j < V; j++) x[j] = (float)((j * 37) % 11) * 0.3f;
        out[i] = lt_sampler_sample(s, x);
    }
    lt_sampler_free(s);
}

/* Non-finite logits: greedy skips NaN (lowest id of the largest of the
 * rest, 0 if none is left); sampling never draws a NaN or -inf token, and a
 * row without a finite largest logit falls back to greedy. */
static void test_non_finite(void) {
    lt_sampler *g, *t;
    ASSERT_EQ(lt_sampler_init(&g, 5, 0.0f, 1.0f, 1), LT_OK);
    ASSERT_EQ(lt_sampler_init(&t, 5, 1.0f, 0.95f, 1), LT_OK);
    float a[5] = {NAN, 1.0f, 3.0f, NAN, 3.0f};
    ASSERT_EQ(lt_sampler_sample(g, a), 2);
    float b[5] = {NAN, NAN, NAN, NAN, NAN};
    ASSERT_EQ(lt_sampler_sample(g, b), 0);
    float c[5] = {-INFINITY, -INFINITY, INFINITY, 0.0f, INFINITY};
    ASSERT_EQ(lt_sampler_sample(t, c), 2);
    for (int d = 0; d < 2000; d++) {
        float x[5] = {NAN, 0.5f, -INFINITY, 0.25f, NAN};
        int32_t id = lt_sampler_sample(t, x);
        ASSERT_TRUE(id == 1 || id == 3);
    }
    lt_sampler_free(g);
    lt_sampler_free(t);
}

/* lt_sampler_probs with top_p = 1 gives softmax(x / temp): checked
 * against exp in double over logits that span the whole range the
 * sampler's own exponential covers, and below it (probability 0). */
static void test_softmax_values(void) {
    enum { N = 4099 }; /* not a multiple of any vector width */
    static float x[N];
    static double p[N];
    const float temps[] = {0.25f, 0.8f, 1.0f, 3.0f};
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++) {
        uint64_t r = 88172645463325252ull;
        for (int i = 0; i < N; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            /* logits in [-40, 10], a few far below the rest */
            x[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 50.0 - 40.0);
            if (i % 97 == 0) x[i] = -1e4f;
        }
        softmax_ref(x, N, temps[t], p);
        float mx = x[0];
        for (int i = 1; i < N; i++) mx = x[i] > mx ? x[i] : mx;
        double arg[N];
        for (int i = 0; i < N; i++) arg[i] = fabs(((double)x[i] - mx) / temps[t]);
        lt_sampler *s;
        ASSERT_EQ(lt_sampler_init(&s, N, temps[t], 1.0f, 3), LT_OK);
        lt_sampler_probs(s, x);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            /* relative where the probability is a normal float (the bound
             * grows with the argument: e^t inherits t's own float rounding,
             * 2^-24 |t| from each of the subtraction and the scaling),
             * absolute below */
            double e = fabs((double)x[i] - p[i]) / (p[i] > 1e-30 ? p[i] : 1.0);
            double bound = p[i] > 1e-30 ? 4e-7 + 1.2e-7 * arg[i] : 1e-30;
            worst = e / bound > worst ? e / bound : worst;
        }
        ASSERT_TRUE(worst <= 1.0);
        lt_sampler_free(s);
    }
}

/* A large vocabulary in a few levels of equal logits, so the nucleus is
 * known exactly: the levels above the boundary whole, then the boundary
 * level's lowest ids, as many as it takes to reach top_p. Every draw must
 * lie in it, and its tokens must come up about as often as p / cum says. */
static void test_top_p_levels(void) {
    enum { NMAX = 20000, DRAWS_LV = 20000, LV = 4 };
    const float level_logit[LV] = {2.0f, 1.0f, 0.0f, -1.0f};
    static float logits[NMAX], x[NMAX];
    static int level[NMAX];
    const int N = lt_test_emulated() ? NMAX / EMU_SHRINK : NMAX;
    const int draws = lt_test_emulated() ? DRAWS_LV / EMU_SHRINK : DRAWS_LV;
    double lsum[LV] = {0}, count_lv[LV] = {0};
    for (int i = 0; i < N; i++) {
        level[i] = (i * 7 + i / 3) % LV;
        logits[i] = level_logit[level[i]];
        count_lv[level[i]] += 1;
    }
    double z = 0;
    for (int l = 0; l < LV; l++) z += count_lv[l] * exp(level_logit[l]);
    for (int l = 0; l < LV; l++) lsum[l] = count_lv[l] * exp(level_logit[l]) / z;
    const float top_ps[] = {0.3f, 0.7f, 0.9f};
    for (size_t t = 0; t < sizeof top_ps / sizeof top_ps[0]; t++) {
        /* the boundary level and how many of its lowest ids it gives */
        double cum = 0;
        int bl = 0;
        while (cum + lsum[bl] < top_ps[t]) cum += lsum[bl++];
        const double pb = exp(level_logit[bl]) / z;
        const int need = (int)ceil((top_ps[t] - cum) / pb);
        int lim = -1, seen = 0;
        for (int i = 0; i < N && seen < need; i++)
            if (level[i] == bl) seen++, lim = i;
        const double nucleus = cum + need * pb;
        lt_sampler *s;
        ASSERT_EQ(lt_sampler_init(&s, N, 1.0f, top_ps[t], 11 + t), LT_OK);
        long outside = 0, in_boundary = 0;
        for (int d = 0; d < draws; d++) {
            memcpy(x, logits, sizeof(float) * (size_t)N);
            int32_t id = lt_sampler_sample(s, x);
            bool in = id >= 0 && id < N && (level[id] < bl || (level[id] == bl && id <= lim));
            outside += !in;
            in_boundary += in && level[id] == bl;
        }
        ASSERT_EQ(outside, 0);
        ASSERT_NEAR((double)in_boundary / draws, need * pb / nucleus,
                    0.02 * sqrt((double)DRAWS_LV / draws));
        lt_sampler_free(s);
    }
}

static void test_determinism(void) {
    int32_t a[1000], b[1000], c[1000];
    const float top_ps[] = {1.0f, 0.8f};
    for (int t = 0; t < 2; t++) {
        run_seq(777, top_ps[t], a, 1000);
        run_seq(777, top_ps[t], b, 1000);
        run_seq(778, top_ps[t], c, 1000);
        ASSERT_TRUE(memcmp(a, b, sizeof a) == 0);
        ASSERT_TRUE(memcmp(a, c, sizeof a) != 0);
    }
}

int main(void) {
    test_init_checks();
    test_greedy();
    test_greedy_long();
    test_top_k_sets();
    test_distribution();
    test_top_p();
    test_known_sequence();
    test_determinism();
    test_non_finite();
    test_softmax_values();
    test_top_p_levels();
    return lt_test_finish();
}
