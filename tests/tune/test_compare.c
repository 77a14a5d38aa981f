/* The interleaved comparison on synthetic samples: B 10% faster with noise
 * and contended outliers is declared faster; B equal or slower is not;
 * pairs flagged as contended are discounted. */
#include "looptune/tune.h"
#include "test.h"
#include "tune/tune_internal.h"

enum { N = 24 };

/* a[i], b[i] = base * drift * noise; b scaled by ratio. Every 6th pair is a
 * contended outlier on one side (flagged), which side given by outlier_on_a. */
static void gen(uint64_t seed, double ratio, bool outlier_on_a, double *a, double *b, bool *busy) {
    uint64_t rng = seed;
    for (int i = 0; i < N; i++) {
        double drift = 1 + 0.2 * (double)(i % 5) / 5; /* slow drift hits both sides */
        a[i] = 1000 * drift * (1 + 0.04 * (lt__rng_uniform(&rng) - 0.5));
        b[i] = 1000 * ratio * drift * (1 + 0.04 * (lt__rng_uniform(&rng) - 0.5));
        busy[i] = i % 6 == 3;
        if (busy[i]) {
            if (outlier_on_a) a[i] *= 2.5;
            else b[i] *= 2.5;
        }
    }
}

static void test_faster(void) {
    for (uint64_t seed = 1; seed <= 10; seed++) {
        double a[N], b[N];
        bool busy[N];
        gen(seed, 0.9, false, a, b, busy);
        lt_compare_result r;
        ASSERT_EQ(lt_compare_paired(a, b, busy, N, 0.01, 0.1, seed, &r), LT_OK);
        ASSERT_TRUE(r.faster);
        ASSERT_TRUE(!r.slower);
        ASSERT_NEAR(r.ratio, 0.9, 0.02);
        ASSERT_TRUE(r.ci_lo <= r.ratio && r.ratio <= r.ci_hi);
        ASSERT_EQ(r.n_clean, N - 4);
    }
}

static void test_equal_or_slower(void) {
    for (uint64_t seed = 1; seed <= 10; seed++) {
        double a[N], b[N];
        bool busy[N];
        lt_compare_result r;
        gen(seed, 1.0, true, a, b, busy);
        ASSERT_EQ(lt_compare_paired(a, b, busy, N, 0.01, 0.1, seed, &r), LT_OK);
        ASSERT_TRUE(!r.faster);
        gen(seed, 1.08, true, a, b, busy);
        ASSERT_EQ(lt_compare_paired(a, b, busy, N, 0.01, 0.1, seed, &r), LT_OK);
        ASSERT_TRUE(!r.faster);
        ASSERT_TRUE(r.slower);
    }
}

/* Equal speed, but three pairs in four saw A slowed down by contention:
 * unflagged, those pairs make B look faster; flagged, they are discounted. */
static void test_contended_discounted(void) {
    double a[N], b[N];
    bool busy[N];
    uint64_t rng = 5;
    for (int i = 0; i < N; i++) {
        a[i] = 1000 * (1 + 0.01 * (lt__rng_uniform(&rng) - 0.5));
        b[i] = 1000 * (1 + 0.01 * (lt__rng_uniform(&rng) - 0.5));
        busy[i] = i % 4 != 0; /* 18 of 24 */
        if (busy[i]) a[i] *= 1.5;
    }
    lt_compare_result r;
    ASSERT_EQ(lt_compare_paired(a, b, NULL, N, 0.01, 0.1, 1, &r), LT_OK);
    ASSERT_TRUE(r.faster); /* fooled without the flags */
    ASSERT_EQ(lt_compare_paired(a, b, busy, N, 0.01, 0.1, 1, &r), LT_OK);
    ASSERT_TRUE(!r.faster);
    ASSERT_NEAR(r.ratio, 1.0, 0.01);
    ASSERT_NEAR(r.a_median, 1000, 10);
    /* too few clean pairs for a verdict */
    for (int i = 0; i < N; i++) busy[i] = i >= 3;
    for (int i = 0; i < N; i++) b[i] = 0.5 * a[i];
    ASSERT_EQ(lt_compare_paired(a, b, busy, N, 0.01, 0.1, 1, &r), LT_OK);
    ASSERT_TRUE(!r.faster);
}

static void test_median_and_errors(void) {
    double x[] = {5, 1, 3, 2, 4};
    ASSERT_NEAR(lt_median(x, 5), 3, 0);
    ASSERT_NEAR(lt_median(x, 4), 2.5, 0);
    ASSERT_NEAR(x[0], 5, 0); /* not modified */
    double a[] = {1, 2}, b[] = {1, -1};
    lt_compare_result r;
    ASSERT_EQ(lt_compare_paired(a, b, NULL, 2, 0.01, 0.1, 1, &r), LT_EINVAL);
    ASSERT_EQ(lt_compare_paired(a, b, NULL, 0, 0.01, 0.1, 1, &r), LT_EINVAL);
}

int main(void) {
    test_faster();
    test_equal_or_slower();
    test_contended_discounted();
    test_median_and_errors();
    return lt_test_finish();
}
