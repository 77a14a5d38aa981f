/* The GP sampler's model: the Matérn 5/2 kernel against its closed form
 * at hand-computed distances (ARD scales, categorical dimensions by
 * equality); the posterior interpolating noiseless data with its standard
 * deviation vanishing there and returning to the prior far away; the
 * posterior at one test point against the two-point formula written out
 * by hand; and the marginal-likelihood fit choosing a short length scale
 * for a wiggly function and a long one for a line. */
#include <math.h>

#include "hpo/gp.h"
#include "test.h"

/* (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r) */
static double matern(double r) { return (1 + sqrt(5) * r + 5.0 / 3 * r * r) * exp(-sqrt(5) * r); }

static void test_kernel(void) {
    bool cat[2] = {false, true};
    lt__gp g;
    ASSERT_EQ(lt__gp_init(&g, 8, 2, cat), LT_OK);
    double theta[4] = {log(2.0), log(1e-6), log(0.5), log(0.25)};
    double a[2] = {0.1, 0.5}, b[2] = {0.6, 0.5}, c[2] = {0.1, 0.25};
    ASSERT_NEAR(lt__gp_kernel(&g, theta, a, a), 2.0, 1e-12);
    /* |0.1 - 0.6| / 0.5 = 1 */
    ASSERT_NEAR(lt__gp_kernel(&g, theta, a, b), 2 * 0.52399411, 1e-7);
    ASSERT_NEAR(matern(1.0), 0.52399411, 1e-7);
    /* categorical: unequal counts 1 / 0.25 = 4, whatever the gap */
    ASSERT_NEAR(lt__gp_kernel(&g, theta, a, c), 2 * matern(4.0), 1e-12);
    lt__gp_free(&g);
}

static void test_posterior(void) {
    bool cat[1] = {false};
    lt__gp g;
    ASSERT_EQ(lt__gp_init(&g, 16, 1, cat), LT_OK);
    g.theta[0] = 0;          /* amplitude 1 */
    g.theta[1] = log(1e-10); /* (almost) no noise */
    g.theta[2] = log(0.2);
    double xs[5] = {0.0, 0.2, 0.5, 0.7, 1.0};
    for (int i = 0; i < 5; i++) {
        g.X[i] = xs[i];
        g.y[i] = sin(6 * xs[i]);
    }
    g.n = 5;
    ASSERT_EQ(lt__gp_factor(&g), LT_OK);
    double mu[5], sd[5];
    ASSERT_EQ(lt__gp_predict(&g, 5, xs, mu, sd), LT_OK);
    for (int i = 0; i < 5; i++) {
        ASSERT_NEAR(mu[i], sin(6 * xs[i]), 1e-5);
        ASSERT_TRUE(sd[i] < 1e-3);
    }
    double far[1] = {40.0}, mf, sf;
    ASSERT_EQ(lt__gp_predict(&g, 1, far, &mf, &sf), LT_OK);
    ASSERT_NEAR(mf, 0, 1e-9);
    ASSERT_NEAR(sf, 1, 1e-9);
    /* two points, by hand: K = [[1+s, k], [k, 1+s]], k* = (k1, k2) */
    g.n = 2;
    g.X[0] = 0.2;
    g.X[1] = 0.5;
    g.y[0] = 1.0;
    g.y[1] = -0.5;
    g.theta[1] = log(0.01);
    ASSERT_EQ(lt__gp_factor(&g), LT_OK);
    double x[1] = {0.3};
    ASSERT_EQ(lt__gp_predict(&g, 1, x, &mf, &sf), LT_OK);
    double k = matern(0.3 / 0.2), k1 = matern(0.1 / 0.2), k2 = matern(0.2 / 0.2), s = 0.01;
    double det = (1 + s) * (1 + s) - k * k;
    double i11 = (1 + s) / det, i12 = -k / det; /* the inverse's entries */
    double a1 = i11 * 1.0 + i12 * -0.5, a2 = i12 * 1.0 + i11 * -0.5;
    double want_mu = k1 * a1 + k2 * a2;
    double want_var = 1 - (k1 * (i11 * k1 + i12 * k2) + k2 * (i12 * k1 + i11 * k2));
    ASSERT_NEAR(mf, want_mu, 1e-10);
    ASSERT_NEAR(sf, sqrt(want_var), 1e-10);
    lt__gp_free(&g);
}

/* Fitted length scale of 30 points of f on [0, 1]. */
static double fitted_scale(double (*f)(double)) {
    bool cat[1] = {false};
    lt__gp g;
    if (lt__gp_init(&g, 32, 1, cat)) return NAN;
    double mean = 0, var = 0;
    for (int i = 0; i < 30; i++) mean += f(i / 29.0) / 30;
    for (int i = 0; i < 30; i++) var += (f(i / 29.0) - mean) * (f(i / 29.0) - mean) / 30;
    for (int i = 0; i < 30; i++) {
        g.X[i] = i / 29.0;
        g.y[i] = (f(i / 29.0) - mean) / sqrt(var);
    }
    g.n = 30;
    lt_hpo_rng r;
    lt_hpo_rng_seed(&r, 5);
    lt__gp_fit(&g, &r, 3, 300);
    double ls = exp(g.theta[2]);
    printf("fitted length scale %.4f, noise %.3g, amplitude %.3g\n", ls, exp(g.theta[1]),
           exp(g.theta[0]));
    lt__gp_free(&g);
    return ls;
}

static double wiggly(double x) { return sin(25 * x); }
static double line(double x) { return 2 * x - 1; }

static void test_fit(void) {
    double short_ls = fitted_scale(wiggly), long_ls = fitted_scale(line);
    ASSERT_TRUE(short_ls < 0.25); /* sin(25 x): a period of 0.25 */
    ASSERT_TRUE(long_ls > 0.5);
}

int main(void) {
    test_kernel();
    test_posterior();
    test_fit();
    return lt_test_finish();
}
