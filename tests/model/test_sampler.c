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
        for (int d = 0; d < DRAWS; d++) {
            float x[N];
            memcpy(x, logits, sizeof x);
            int32_t id = lt_sampler_sample(s, x);
            if (id < 0 || id >= N || !in[id]) outside++;
            else count[id]++;
        }
        ASSERT_EQ(outside, 0);
        for (int i = 0; i < N; i++)
            if (in[i]) ASSERT_NEAR((double)count[i] / DRAWS, p[i] / cum, FREQ_TOL);
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
    test_distribution();
    test_top_p();
    test_known_sequence();
    test_determinism();
    return lt_test_finish();
}
