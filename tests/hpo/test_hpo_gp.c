/* The GP sampler's model: the Matérn 5/2 kernel against its closed form
 * at hand-computed distances (ARD scales, categorical dimensions by
 * equality); the posterior interpolating noiseless data with its standard
 * deviation vanishing there and returning to the prior far away; the
 * posterior at one test point against the two-point formula written out
 * by hand; the gradients of the posterior and of log expected improvement
 * against central differences; and the marginal-likelihood fit choosing a
 * short length scale for a wiggly function and a long one for a line. */
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

/* The posterior's gradients at a few points of a 3-dimensional model (the
 * third dimension categorical) against central differences of the
 * posterior itself; one point sits on a data point (r = 0). */
static void test_posterior_gradient(void) {
    bool cat[3] = {false, false, true};
    lt__gp g;
    ASSERT_EQ(lt__gp_init(&g, 16, 3, cat), LT_OK);
    g.theta[0] = log(1.7);
    g.theta[1] = log(1e-4);
    g.theta[2] = log(0.3);
    g.theta[3] = log(0.8);
    g.theta[4] = log(0.5);
    lt_hpo_rng r;
    lt_hpo_rng_seed(&r, 11);
    g.n = 9;
    for (int i = 0; i < g.n; i++) {
        g.X[i * 3] = lt_hpo_rng_uniform(&r);
        g.X[i * 3 + 1] = lt_hpo_rng_uniform(&r);
        g.X[i * 3 + 2] = i % 3; /* a choice */
        g.y[i] = sin(4 * g.X[i * 3]) + g.X[i * 3 + 1] * g.X[i * 3 + 2];
    }
    ASSERT_EQ(lt__gp_factor(&g), LT_OK);
    double pts[4][3] = {{0.5, 0.5, 0}, {0.1, 0.9, 2}, {0.93, 0.02, 1}, {0}};
    for (int j = 0; j < 3; j++) pts[3][j] = g.X[4 * 3 + j];
    pts[3][0] += 1e-3; /* next to a data point, where sd is small */
    double work[3 * 9 + 3];
    for (int p = 0; p < 4; p++) {
        double mu, sd, dmu[3], dsd[3], mu1, sd1;
        lt__gp_predict_grad(&g, pts[p], &mu, &sd, dmu, dsd, work);
        ASSERT_EQ(lt__gp_predict(&g, 1, pts[p], &mu1, &sd1), LT_OK);
        ASSERT_NEAR(mu, mu1, 1e-12);
        ASSERT_NEAR(sd, sd1, 1e-10);
        for (int j = 0; j < 2; j++) {
            double x[3] = {pts[p][0], pts[p][1], pts[p][2]}, h = 1e-6, mp, sp, mm, sm;
            x[j] += h;
            ASSERT_EQ(lt__gp_predict(&g, 1, x, &mp, &sp), LT_OK);
            x[j] -= 2 * h;
            ASSERT_EQ(lt__gp_predict(&g, 1, x, &mm, &sm), LT_OK);
            ASSERT_NEAR(dmu[j], (mp - mm) / (2 * h), 1e-5 * (1 + fabs(dmu[j])));
            ASSERT_NEAR(dsd[j], (sp - sm) / (2 * h), 1e-5 * (1 + fabs(dsd[j])));
        }
        ASSERT_EQ(dmu[2], 0.0);
        ASSERT_EQ(dsd[2], 0.0);
    }
    double on[3] = {g.X[0], g.X[1], g.X[2]}, mu, sd, dmu[3], dsd[3];
    lt__gp_predict_grad(&g, on, &mu, &sd, dmu, dsd, work);
    ASSERT_TRUE(isfinite(mu) && isfinite(sd) && isfinite(dmu[0]) && isfinite(dsd[0]));
    lt__gp_free(&g);
}

/* log EI against its definition (numerically integrated) where that is
 * representable, continuous across the switch to its tail series, and its
 * partials against central differences everywhere. */
static void test_log_ei(void) {
    double best = 0.3, sd = 0.7;
    double zs[] = {3, 0.5, 0, -1, -4.99, -5.01, -8, -30};
    for (size_t k = 0; k < sizeof zs / sizeof *zs; k++) {
        double mu = best - zs[k] * sd, d_mu, d_sd;
        double v = lt__gp_log_ei(mu, sd, best, &d_mu, &d_sd);
        if (zs[k] > -9) { /* E[max(best - Y, 0)] by the midpoint rule */
            double ei = 0, step = 1e-4;
            for (double t = -12 + step / 2; t < 12; t += step) {
                double y = mu + sd * t, gain = best - y;
                if (gain > 0) ei += gain * exp(-0.5 * t * t) / sqrt(2 * M_PI) * step;
            }
            ASSERT_NEAR(v, log(ei), 1e-4);
        }
        double h = 1e-6 * sd;
        double gm = (lt__gp_log_ei(mu + h, sd, best, NULL, NULL) -
                     lt__gp_log_ei(mu - h, sd, best, NULL, NULL)) / (2 * h);
        double gs = (lt__gp_log_ei(mu, sd + h, best, NULL, NULL) -
                     lt__gp_log_ei(mu, sd - h, best, NULL, NULL)) / (2 * h);
        ASSERT_NEAR(d_mu, gm, 1e-4 * (1 + fabs(gm)));
        ASSERT_NEAR(d_sd, gs, 1e-4 * (1 + fabs(gs)));
    }
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
    test_posterior_gradient();
    test_log_ei();
    test_fit();
    return lt_test_finish();
}
