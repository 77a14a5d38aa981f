/* The Gaussian-process regression model of the GP sampler (gp.c). */
#ifndef LT_HPO_GP_H
#define LT_HPO_GP_H

#include "hpo/hpo_internal.h"

/* Hyperparameters theta[d + 2], in log space: theta[0] the signal variance,
 * theta[1] the noise variance, theta[2 + j] dimension j's length scale. */
typedef struct {
    int n, d, cap;   /* points, dimensions, room for points */
    const bool *cat; /* [d] categorical dimensions (compared by equality), borrowed */
    double *X;       /* [cap][d] the points' features, row-major */
    double *y;       /* [cap] their targets (standardised by the caller) */
    double *theta;   /* [d + 2] */
    double *L;       /* [n][n] column-major lower Cholesky factor of K + noise I */
    double *alpha;   /* [n] (K + noise I)^-1 y */
} lt__gp;

/* Room for cap points of d dimensions; free with lt__gp_free. The caller
 * fills X, y and n (<= cap). */
int lt__gp_init(lt__gp *g, int cap, int d, const bool *cat);
void lt__gp_free(lt__gp *g);
/* The kernel between feature rows a and b under theta. */
double lt__gp_kernel(const lt__gp *g, const double *theta, const double *a, const double *b);
/* Fits theta to the first n points (restarts starts of at most max_evals
 * evaluations each, the first from the current theta); leaves L stale. */
void lt__gp_fit(lt__gp *g, lt_hpo_rng *r, int restarts, int max_evals);
/* Factors the model of the n points under theta: call before predicting. */
int lt__gp_factor(lt__gp *g);
/* Posterior mean mu[m] and standard deviation sd[m] at rows Xs[m][d]. */
int lt__gp_predict(const lt__gp *g, int m, const double *Xs, double *mu, double *sd);
/* The posterior mean and standard deviation at one row x[d] with their
 * gradients dmu[d] and dsd[d] along x (0 along categorical dimensions, and
 * dsd 0 where the variance sits at its floor). work: [3 n + d] scratch. */
void lt__gp_predict_grad(const lt__gp *g, const double *x, double *mu, double *sd, double *dmu,
                         double *dsd, double *work);
/* log E[max(best - Y, 0)] for Y ~ N(mu, sd^2), without underflow far
 * from best, and its partial derivatives along mu and sd (either pointer
 * may be NULL). */
double lt__gp_log_ei(double mu, double sd, double best, double *d_mu, double *d_sd);

#endif
