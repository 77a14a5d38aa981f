/* The Gaussian-process model of the GP sampler: a Matérn 5/2 kernel with
 * one length scale per dimension (ARD) on unit-cube features, categorical
 * dimensions compared by equality (a Hamming distance, which is the
 * Euclidean distance of one-hot codes, so the kernel stays positive
 * definite), its hyperparameters fitted by maximising the log marginal
 * likelihood (with weak priors) by Nelder-Mead in log space from a few
 * starts, the Cholesky factor by LAPACKE, and the posterior mean and
 * standard deviation at many points at once (one triangular solve with
 * all of them as right-hand sides), or at one with their gradients, and
 * log expected improvement with its partials. */
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hpo/gp.h"

/* Box of the hyperparameters, in log space. */
#define LOG_LS_MIN (-4.0)   /* length scale 0.018 */
#define LOG_LS_MAX (3.0)    /* 20 */
#define LOG_AMP_MIN (-3.0)  /* signal variance 0.05 */
#define LOG_AMP_MAX (3.0)   /* 20 */
#define LOG_NOISE_MIN (-20.7) /* 1e-9: at 1e-6 a deterministic objective's
                                * minimum blurred (Branin's targets, spread
                                * about 50, got a noise of 0.05) */
#define LOG_NOISE_MAX (0.0)
#define SQRT5 2.23606797749979

/* The Matérn 5/2 kernel of amplitude amp at squared scaled distance r2;
 * with c, also *c = (dk / dr) / r, so that dk / dx_j = *c (x_j - y_j) / l_j^2. */
static double matern52(double r2, double amp, double *c) {
    double r = sqrt(r2), e = exp(-SQRT5 * r);
    if (c) *c = -5.0 / 3.0 * amp * (1 + SQRT5 * r) * e;
    return amp * (1 + SQRT5 * r + 5.0 / 3.0 * r2) * e;
}

double lt__gp_kernel(const lt__gp *g, const double *theta, const double *a, const double *b) {
    double r2 = 0;
    for (int j = 0; j < g->d; j++) {
        double inv = exp(-theta[2 + j]);
        double dj = g->cat[j] ? (a[j] != b[j]) : (a[j] - b[j]);
        r2 += dj * dj * inv * inv;
    }
    return matern52(r2, exp(theta[0]), NULL);
}

int lt__gp_init(lt__gp *g, int cap, int d, const bool *cat) {
    memset(g, 0, sizeof *g);
    g->d = d;
    g->cap = cap;
    g->cat = cat;
    g->X = malloc((size_t)cap * d * sizeof *g->X);
    g->y = malloc((size_t)cap * sizeof *g->y);
    g->L = malloc((size_t)cap * cap * sizeof *g->L);
    g->alpha = malloc((size_t)cap * sizeof *g->alpha);
    g->theta = malloc((size_t)(d + 2) * sizeof *g->theta);
    if (!g->X || !g->y || !g->L || !g->alpha || !g->theta) {
        lt__gp_free(g);
        return lt_error(LT_ENOMEM, "hpo: gp: out of memory");
    }
    g->theta[0] = 0;          /* signal variance 1 (targets standardised) */
    g->theta[1] = log(1e-4);  /* noise variance */
    for (int j = 0; j < d; j++) g->theta[2 + j] = log(0.3);
    return LT_OK;
}

void lt__gp_free(lt__gp *g) {
    free(g->X);
    free(g->y);
    free(g->L);
    free(g->alpha);
    free(g->theta);
    memset(g, 0, sizeof *g);
}

/* Factors K + noise I with hyperparameters theta into g->L and solves
 * alpha; returns the log marginal likelihood, -INFINITY if K is not
 * positive definite even with jitter. */
static double factor(lt__gp *g, const double *theta) {
    int n = g->n;
    double noise = exp(theta[1]);
    for (int jitter = 0; jitter < 4; jitter++) {
        double extra = jitter ? 1e-8 * pow(100.0, jitter) : 0;
        for (int j = 0; j < n; j++) {
            for (int i = j; i < n; i++)
                g->L[i + (size_t)j * n] = lt__gp_kernel(g, theta, &g->X[(size_t)i * g->d],
                                                        &g->X[(size_t)j * g->d]);
            g->L[j + (size_t)j * n] += noise + extra;
        }
        if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n, g->L, n) != 0) continue;
        memcpy(g->alpha, g->y, (size_t)n * sizeof *g->alpha);
        if (LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', n, 1, g->L, n, g->alpha, n) != 0) continue;
        double lml = 0;
        for (int i = 0; i < n; i++)
            lml -= 0.5 * g->y[i] * g->alpha[i] + log(g->L[i + (size_t)i * n]);
        return lml - 0.5 * n * log(2 * 3.14159265358979323846);
    }
    return -INFINITY;
}

int lt__gp_factor(lt__gp *g) {
    if (!isfinite(factor(g, g->theta)))
        return lt_error(LT_ERANGE, "hpo: gp: the kernel matrix is not positive definite");
    return LT_OK;
}

/* The negative log posterior of theta (clamped into its box, with a
 * penalty for the distance outside): what Nelder-Mead minimises. */
static double objective(lt__gp *g, const double *theta_in, double *theta) {
    double pen = 0;
    for (int k = 0; k < g->d + 2; k++) {
        double lo = k == 0 ? LOG_AMP_MIN : k == 1 ? LOG_NOISE_MIN : LOG_LS_MIN;
        double hi = k == 0 ? LOG_AMP_MAX : k == 1 ? LOG_NOISE_MAX : LOG_LS_MAX;
        double t = theta_in[k] < lo ? lo : theta_in[k] > hi ? hi : theta_in[k];
        pen += 10 * (t - theta_in[k]) * (t - theta_in[k]);
        theta[k] = t;
    }
    double lml = factor(g, theta);
    if (!isfinite(lml)) return 1e300;
    /* weak priors: length scales around 0.5, small noise, unit amplitude */
    double prior = 0;
    for (int j = 0; j < g->d; j++) {
        double z = (theta[2 + j] - log(0.5)) / 1.5;
        prior -= 0.5 * z * z;
    }
    double zn = (theta[1] - log(1e-6)) / 3.0, za = theta[0] / 2.0;
    prior -= 0.5 * (zn * zn + za * za);
    return -(lml + prior) + pen;
}

/* Nelder-Mead on objective from x (dimension m) with initial step, at most
 * max_evals evaluations; x becomes the best point, its value returned. */
static double nelder_mead(lt__gp *g, double *x, int m, double step, int max_evals) {
    int np = m + 1;
    double *pts = malloc((size_t)np * m * sizeof *pts), *f = malloc((size_t)np * sizeof *f);
    double *c = malloc((size_t)m * sizeof *c), *xr = malloc((size_t)m * sizeof *xr);
    double *xe = malloc((size_t)m * sizeof *xe), *tmp = malloc((size_t)m * sizeof *tmp);
    LT_ASSERT(pts && f && c && xr && xe && tmp);
    for (int i = 0; i < np; i++) {
        memcpy(&pts[(size_t)i * m], x, (size_t)m * sizeof *x);
        if (i > 0) pts[(size_t)i * m + i - 1] += step;
        f[i] = objective(g, &pts[(size_t)i * m], tmp);
    }
    int evals = np;
    while (evals < max_evals) {
        /* order: best first, worst last */
        for (int i = 1; i < np; i++)
            for (int k = i; k > 0 && f[k] < f[k - 1]; k--) {
                double t = f[k];
                f[k] = f[k - 1];
                f[k - 1] = t;
                for (int j = 0; j < m; j++) {
                    t = pts[(size_t)k * m + j];
                    pts[(size_t)k * m + j] = pts[(size_t)(k - 1) * m + j];
                    pts[(size_t)(k - 1) * m + j] = t;
                }
            }
        if (fabs(f[np - 1] - f[0]) < 1e-6 * (1 + fabs(f[0]))) break;
        double *worst = &pts[(size_t)(np - 1) * m];
        for (int j = 0; j < m; j++) {
            c[j] = 0;
            for (int i = 0; i < np - 1; i++) c[j] += pts[(size_t)i * m + j];
            c[j] /= np - 1;
            xr[j] = c[j] + (c[j] - worst[j]);
        }
        double fr = objective(g, xr, tmp);
        evals++;
        if (fr < f[0]) {
            for (int j = 0; j < m; j++) xe[j] = c[j] + 2 * (c[j] - worst[j]);
            double fe = objective(g, xe, tmp);
            evals++;
            memcpy(worst, fe < fr ? xe : xr, (size_t)m * sizeof *xe);
            f[np - 1] = fe < fr ? fe : fr;
        } else if (fr < f[np - 2]) {
            memcpy(worst, xr, (size_t)m * sizeof *xr);
            f[np - 1] = fr;
        } else {
            bool outside = fr < f[np - 1];
            for (int j = 0; j < m; j++)
                xe[j] = outside ? c[j] + 0.5 * (xr[j] - c[j]) : c[j] + 0.5 * (worst[j] - c[j]);
            double fc = objective(g, xe, tmp);
            evals++;
            if (fc < (outside ? fr : f[np - 1])) {
                memcpy(worst, xe, (size_t)m * sizeof *xe);
                f[np - 1] = fc;
            } else { /* shrink towards the best */
                for (int i = 1; i < np; i++) {
                    for (int j = 0; j < m; j++)
                        pts[(size_t)i * m + j] = pts[j] + 0.5 * (pts[(size_t)i * m + j] - pts[j]);
                    f[i] = objective(g, &pts[(size_t)i * m], tmp);
                }
                evals += np - 1;
            }
        }
    }
    int best = 0;
    for (int i = 1; i < np; i++)
        if (f[i] < f[best]) best = i;
    double fb = f[best];
    objective(g, &pts[(size_t)best * m], x); /* x: the clamped best */
    free(pts);
    free(f);
    free(c);
    free(xr);
    free(xe);
    free(tmp);
    return fb;
}

void lt__gp_fit(lt__gp *g, lt_hpo_rng *r, int restarts, int max_evals) {
    int m = g->d + 2;
    double *x = malloc((size_t)m * sizeof *x), *best = malloc((size_t)m * sizeof *best);
    LT_ASSERT(x && best);
    double fbest = INFINITY;
    for (int s = 0; s < restarts; s++) {
        if (s == 0) {
            memcpy(x, g->theta, (size_t)m * sizeof *x); /* from the last fit */
        } else {
            x[0] = -1 + 2 * lt_hpo_rng_uniform(r);
            x[1] = log(1e-6) + lt_hpo_rng_uniform(r) * (log(1e-1) - log(1e-6));
            for (int j = 0; j < g->d; j++)
                x[2 + j] = log(0.05) + lt_hpo_rng_uniform(r) * (log(2.0) - log(0.05));
        }
        double f = nelder_mead(g, x, m, 0.7, max_evals);
        if (f < fbest) {
            fbest = f;
            memcpy(best, x, (size_t)m * sizeof *x);
        }
    }
    if (isfinite(fbest) && fbest < 1e299) memcpy(g->theta, best, (size_t)m * sizeof *best);
    free(x);
    free(best);
}

int lt__gp_predict(const lt__gp *g, int m, const double *Xs, double *mu, double *sd) {
    int n = g->n;
    double *K = malloc((size_t)n * m * sizeof *K);
    if (!K) return lt_error(LT_ENOMEM, "hpo: gp: out of memory");
    double amp = exp(g->theta[0]);
    for (int c = 0; c < m; c++) {
        double *col = &K[(size_t)c * n];
        double s = 0;
        for (int i = 0; i < n; i++) {
            col[i] = lt__gp_kernel(g, g->theta, &g->X[(size_t)i * g->d], &Xs[(size_t)c * g->d]);
            s += col[i] * g->alpha[i];
        }
        mu[c] = s;
    }
    /* V = L^-1 K*: var = k(x, x) - |v|^2 */
    int rc = LAPACKE_dtrtrs(LAPACK_COL_MAJOR, 'L', 'N', 'N', n, m, g->L, n, K, n);
    for (int c = 0; c < m; c++) {
        double v = 0;
        for (int i = 0; i < n && rc == 0; i++) v += K[(size_t)c * n + i] * K[(size_t)c * n + i];
        double var = amp - v;
        sd[c] = sqrt(var > 1e-12 * amp ? var : 1e-12 * amp);
    }
    free(K);
    return rc == 0 ? LT_OK : lt_error(LT_ERANGE, "hpo: gp: triangular solve failed (%d)", rc);
}

void lt__gp_predict_grad(const lt__gp *g, const double *x, double *mu, double *sd, double *dmu,
                         double *dsd, double *work) {
    int n = g->n, d = g->d;
    double amp = exp(g->theta[0]);
    double *k = work, *c = work + n, *v = work + 2 * n, *inv2 = work + 3 * n;
    *mu = 0;
    for (int j = 0; j < d; j++) {
        dmu[j] = dsd[j] = 0;
        inv2[j] = exp(-2 * g->theta[2 + j]);
    }
    /* k_i and c_i, where d k_i / d x_j = c_i (x_j - X_ij) / l_j^2 */
    for (int i = 0; i < n; i++) {
        const double *xi = &g->X[(size_t)i * d];
        double r2 = 0;
        for (int j = 0; j < d; j++) {
            double dj = g->cat[j] ? (x[j] != xi[j]) : (x[j] - xi[j]);
            r2 += dj * dj * inv2[j];
        }
        k[i] = matern52(r2, amp, &c[i]);
        *mu += g->alpha[i] * k[i];
    }
    /* v = L^-1 k, var = amp - |v|^2, then v := L^-T v = (K + noise I)^-1 k */
    memcpy(v, k, (size_t)n * sizeof *v);
    for (int j = 0; j < n; j++) {
        const double *col = &g->L[(size_t)j * n];
        v[j] /= col[j];
        for (int i = j + 1; i < n; i++) v[i] -= col[i] * v[j];
    }
    double var = amp;
    for (int i = 0; i < n; i++) var -= v[i] * v[i];
    for (int i = n - 1; i >= 0; i--) {
        const double *col = &g->L[(size_t)i * n];
        double t = v[i];
        for (int j = i + 1; j < n; j++) t -= col[j] * v[j];
        v[i] = t / col[i];
    }
    bool at_floor = !(var > 1e-12 * amp);
    *sd = sqrt(at_floor ? 1e-12 * amp : var);
    /* dmu = sum alpha_i dk_i, dvar = -2 sum v_i dk_i */
    for (int i = 0; i < n; i++) {
        const double *xi = &g->X[(size_t)i * d];
        for (int j = 0; j < d; j++) {
            if (g->cat[j]) continue;
            double dk = c[i] * (x[j] - xi[j]) * inv2[j];
            dmu[j] += g->alpha[i] * dk;
            if (!at_floor) dsd[j] -= v[i] * dk / *sd; /* d sd = d var / (2 sd) */
        }
    }
}

double lt__gp_log_ei(double mu, double sd, double best, double *d_mu, double *d_sd) {
    double z = (best - mu) / sd, logphi = -0.5 * z * z - 0.9189385332046727;
    double log_h, ratio; /* log(z Phi(z) + phi(z)), and Phi(z) over it */
    if (z > -5) {
        double cdf = 0.5 * erfc(-z / sqrt(2.0)), h = fmax(z * cdf + exp(logphi), 1e-300);
        log_h = log(h);
        ratio = cdf / h;
    } else {
        /* z Phi(z) + phi(z) = phi(z) (1 - x m) with x = -z and m = Phi(z) / phi(z),
         * the Mills ratio, by its continued fraction 1 / (x + 1 / (x + 2 / (x + ...))),
         * which converges fast here, where the sum above cancels */
        double x = -z, t = x;
        for (int k = 60; k >= 1; k--) t = x + k / t;
        double m = 1 / t, rest = 1 - x * m;
        log_h = logphi + log(rest);
        ratio = m / rest;
    }
    if (d_mu) *d_mu = -ratio / sd;
    if (d_sd) *d_sd = (1 - ratio * z) / sd;
    return log(sd) + log_h;
}
