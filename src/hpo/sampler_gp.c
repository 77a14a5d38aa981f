/* The Gaussian-process Bayesian-optimisation sampler.
 *
 * After a quasi-random start, each proposal models the complete trials with
 * a GP (gp.c) on the unit cube (log parameters in log space, ints and
 * categoricals snapped to their values through decode/encode, a parameter
 * not active a feature of FILL, apart from every active value), the
 * targets standardised. The running trials join the model with the best
 * value seen as their target (a constant liar, "CL-min"): the posterior
 * variance at and near them collapses, so parallel proposals spread and
 * none repeats a running point. The proposal maximises the logarithm of
 * expected improvement (computed without underflow far from the incumbent)
 * over uniform candidates, perturbations of the best trials and a few
 * rounds of shrinking local search from the best candidates, then climbs
 * from the best of them by the gradient (gp.c gives the posterior's).
 *
 * Cost stays bounded as trials accumulate: the hyperparameters are fitted
 * on at most LT__GP_FIT_POINTS trials (the best half and a spread of the
 * rest), every proposal while trials are few and then every
 * n / LT__GP_REFIT_DIVISOR trials; the candidates are a fixed number; one
 * Cholesky factorisation and one blocked triangular solve per batch of
 * candidates make a proposal O(n^3 + candidates n^2). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hpo/gp.h"

#define LT__GP_STARTUP_MIN 6     /* quasi-random trials first: max(this, d); more
                                  * left Hartmann-6 in its second minimum more often */
#define LT__GP_FIT_POINTS 150    /* trials the hyperparameters are fitted on, at most */
#define LT__GP_REFIT_ALWAYS 40   /* up to this many trials, refit at every proposal */
#define LT__GP_REFIT_DIVISOR 10  /* then every n / this trials */
#define LT__GP_RESTARTS 3        /* Nelder-Mead starts per fit */
#define LT__GP_FIT_EVALS 200     /* evaluations per start */
#define LT__GP_RANDOM 512        /* uniform candidates */
#define LT__GP_TOP 5             /* best trials perturbed, and local-search chains */
#define LT__GP_PERTURB 40        /* perturbations of each best trial */
#define LT__GP_ROUNDS 4          /* local-search rounds */
#define LT__GP_ROUND_SIZE 20     /* candidates per chain per round */
#define LT__GP_ASCENT_STEPS 50  /* gradient steps from each of the best candidates */
#define FILL (-0.5)              /* the feature of a parameter not active */

typedef struct {
    lt__hpo_sampler base;
    const lt_hpo_space *space;
    int d, n_startup;
    lt_hpo_rng rng;
    double *shift; /* [d] the quasi-random start's shift */
    bool *cat;     /* [d] categorical dimensions */
    lt__gp gp;
    int last_fit; /* complete trials at the last fit, -1: none yet */
    /* candidate scratch, [batch][d] */
    int batch;
    double *cu, *cv, *cf, *mu, *sd, *score;
} gp_sampler;

/* Features of a configuration: the unit-cube point, FILL where inactive. */
static void features(const gp_sampler *s, const double *values, double *f) {
    lt_hpo_space_encode(s->space, values, f);
    for (int j = 0; j < s->d; j++)
        if (isnan(f[j])) f[j] = FILL;
}

static int ensure_capacity(gp_sampler *s, int n) {
    if (n <= s->gp.cap) return LT_OK;
    int cap = s->gp.cap ? s->gp.cap : 64;
    while (cap < n) cap *= 2;
    lt__gp ng;
    int rc = lt__gp_init(&ng, cap, s->d, s->cat);
    if (rc) return rc;
    if (s->gp.theta) memcpy(ng.theta, s->gp.theta, (size_t)(s->d + 2) * sizeof *ng.theta);
    lt__gp_free(&s->gp);
    s->gp = ng;
    return LT_OK;
}

typedef struct {
    int i;
    double y;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    double x = ((const ranked *)a)->y, y = ((const ranked *)b)->y;
    return (x > y) - (x < y);
}

/* Scores the first m rows of s->cu: decoded into s->cv, featured into
 * s->cf, log EI into s->score. */
static int score_batch(gp_sampler *s, int m, double best) {
    int d = s->d;
    for (int c = 0; c < m; c++) {
        lt_hpo_space_decode(s->space, &s->cu[(size_t)c * d], &s->cv[(size_t)c * d]);
        features(s, &s->cv[(size_t)c * d], &s->cf[(size_t)c * d]);
    }
    int rc = lt__gp_predict(&s->gp, m, s->cf, s->mu, s->sd);
    if (rc) return rc;
    for (int c = 0; c < m; c++) s->score[c] = lt__gp_log_ei(s->mu[c], s->sd[c], best, NULL, NULL);
    return LT_OK;
}

/* A perturbation of unit point base (NAN: a uniform coordinate) into out. */
static void perturb(gp_sampler *s, const double *base, double sigma, double *out) {
    double flip = s->d > 5 ? 1.0 / s->d : 0.2;
    for (int j = 0; j < s->d; j++) {
        double b = isnan(base[j]) ? lt_hpo_rng_uniform(&s->rng) : base[j];
        if (s->cat[j]) {
            out[j] = lt_hpo_rng_uniform(&s->rng) < flip ? lt_hpo_rng_uniform(&s->rng) : b;
        } else {
            double v = b + sigma * lt_hpo_rng_normal(&s->rng);
            out[j] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
    }
}

/* The best candidates so far: top[k] rows of unit points and their scores. */
typedef struct {
    int n;
    double score[LT__GP_TOP];
    double *u; /* [LT__GP_TOP][d] */
} top_list;

static void top_offer(top_list *t, int d, const double *u, double score) {
    if (t->n == LT__GP_TOP && score <= t->score[t->n - 1]) return;
    int k = t->n < LT__GP_TOP ? t->n++ : t->n - 1;
    for (; k > 0 && t->score[k - 1] < score; k--) {
        t->score[k] = t->score[k - 1];
        memcpy(&t->u[(size_t)k * d], &t->u[(size_t)(k - 1) * d], (size_t)d * sizeof *u);
    }
    t->score[k] = score;
    memcpy(&t->u[(size_t)k * d], u, (size_t)d * sizeof *u);
}

/* Takes the m scored candidates: the proposal (values) if better and not
 * seen, the top list otherwise too. */
static void take(gp_sampler *s, const lt__hpo_history *h, int m, top_list *top, double *best_score,
                 double *values) {
    int d = s->d;
    for (int c = 0; c < m; c++) {
        double sc = s->score[c];
        if (!isfinite(sc)) continue;
        top_offer(top, d, &s->cu[(size_t)c * d], sc);
        if (sc > *best_score && !lt__hpo_seen(h, &s->cv[(size_t)c * d])) {
            *best_score = sc;
            memcpy(values, &s->cv[(size_t)c * d], (size_t)d * sizeof *values);
        }
    }
}

/* Scratch of ascend, for a model of n points, and the model's squared
 * length scales ls2[d] (the steps' scales), taken once per proposal. */
typedef struct {
    double *values, *f, *ftry, *grad, *gtry, *dmu, *dsd, *ls2, *work;
    bool *free;
} ascent_scratch;

/* log EI at features f and its gradient along f's free dimensions. */
static double score_grad(gp_sampler *s, ascent_scratch *a, const double *f, double best,
                         double *grad) {
    double mu, sd, d_mu, d_sd;
    lt__gp_predict_grad(&s->gp, f, &mu, &sd, a->dmu, a->dsd, a->work);
    double score = lt__gp_log_ei(mu, sd, best, &d_mu, &d_sd);
    for (int j = 0; j < s->d; j++)
        grad[j] = a->free[j] ? d_mu * a->dmu[j] + d_sd * a->dsd[j] : 0;
    return score;
}

/* Gradient ascent of log EI from unit point u along its active float
 * parameters (ints and categoricals stay in their cells), projected on
 * the cube, each step scaled by the squared length scales (the kernel's
 * own metric) and its length found by backtracking; u becomes the point
 * reached. The random and local candidates find the basin, this its top. */
static void ascend(gp_sampler *s, ascent_scratch *a, double *u, double best) {
    int d = s->d;
    lt_hpo_space_decode(s->space, u, a->values);
    features(s, a->values, a->f);
    bool any = false;
    for (int j = 0; j < d; j++) {
        a->free[j] = lt_hpo_space_param(s->space, j)->kind == LT_HPO_FLOAT && !isnan(a->values[j]);
        any |= a->free[j];
    }
    if (!any) return;
    double score = score_grad(s, a, a->f, best, a->grad), t = 1;
    for (int it = 0; it < LT__GP_ASCENT_STEPS; it++) {
        double before = score;
        bool accepted = false;
        for (int tries = 0; tries < 40 && !accepted; tries++, t *= 0.5) {
            double gain = 0, step = 0;
            for (int j = 0; j < d; j++) {
                double v = a->f[j];
                if (a->free[j]) {
                    v += t * a->ls2[j] * a->grad[j];
                    v = v < 0 ? 0 : v > 1 ? 1 : v;
                }
                a->ftry[j] = v;
                gain += a->grad[j] * (v - a->f[j]);
                step = fmax(step, fabs(v - a->f[j]));
            }
            if (step < 1e-9) break; /* stuck against the cube's faces */
            double sc = score_grad(s, a, a->ftry, best, a->gtry);
            if (sc > score + 1e-4 * gain) { /* Armijo's sufficient increase */
                accepted = true;
                score = sc;
                memcpy(a->f, a->ftry, (size_t)d * sizeof *a->f);
                memcpy(a->grad, a->gtry, (size_t)d * sizeof *a->grad);
                t *= 4; /* the loop's halving leaves a longer step next time */
            }
        }
        if (!accepted || score - before < 1e-10) break;
    }
    for (int j = 0; j < d; j++)
        if (a->free[j]) u[j] = a->f[j];
}

/* Fills the model's rows: the complete trials (targets standardised), then
 * the running ones at the liar's target. Returns the standardised best. */
static double fill_model(gp_sampler *s, const lt__hpo_history *h) {
    int n = h->n_done;
    double mean = 0, var = 0, ymin = INFINITY;
    for (int i = 0; i < n; i++) mean += h->y[i];
    mean /= n;
    for (int i = 0; i < n; i++) {
        var += (h->y[i] - mean) * (h->y[i] - mean);
        ymin = fmin(ymin, h->y[i]);
    }
    double sdev = sqrt(var / n);
    if (!(sdev > 1e-12)) sdev = 1;
    for (int i = 0; i < n; i++) {
        features(s, h->x[i], &s->gp.X[(size_t)i * s->d]);
        s->gp.y[i] = (h->y[i] - mean) / sdev;
    }
    double best = (ymin - mean) / sdev;
    for (int i = 0; i < h->n_pending; i++) {
        features(s, h->pending[i], &s->gp.X[(size_t)(n + i) * s->d]);
        s->gp.y[n + i] = best;
    }
    s->gp.n = n + h->n_pending;
    return best;
}

/* Refits the hyperparameters on at most LT__GP_FIT_POINTS complete trials:
 * all of them, or the best half of the cap and a spread of the rest. */
static void refit(gp_sampler *s, const lt__hpo_history *h, ranked *order) {
    int n = h->n_done;
    fill_model(s, h);
    if (n > LT__GP_FIT_POINTS) {
        /* rows in rank order: the best half, then every k-th of the rest */
        int half = LT__GP_FIT_POINTS / 2, rest = n - half, keep = LT__GP_FIT_POINTS - half;
        double *X = malloc((size_t)LT__GP_FIT_POINTS * s->d * sizeof *X);
        double *y = malloc((size_t)LT__GP_FIT_POINTS * sizeof *y);
        LT_ASSERT(X && y);
        for (int k = 0; k < LT__GP_FIT_POINTS; k++) {
            int r = k < half ? k : half + (int)((int64_t)(k - half) * rest / keep);
            int i = order[r].i;
            memcpy(&X[(size_t)k * s->d], &s->gp.X[(size_t)i * s->d], (size_t)s->d * sizeof *X);
            y[k] = s->gp.y[i];
        }
        memcpy(s->gp.X, X, (size_t)LT__GP_FIT_POINTS * s->d * sizeof *X);
        memcpy(s->gp.y, y, (size_t)LT__GP_FIT_POINTS * sizeof *y);
        free(X);
        free(y);
        s->gp.n = LT__GP_FIT_POINTS;
    } else {
        s->gp.n = n;
    }
    lt__gp_fit(&s->gp, &s->rng, LT__GP_RESTARTS, LT__GP_FIT_EVALS);
    s->last_fit = n;
}

static int propose(lt__hpo_sampler *self, const lt__hpo_history *h, double *values) {
    gp_sampler *s = (gp_sampler *)self;
    int d = s->d, n = h->n_done;
    if (h->n_asked < s->n_startup || n < 2) {
        lt__hpo_quasi_point(s->space, (uint64_t)h->n_asked, s->shift, values);
        return LT_OK;
    }
    int rc = ensure_capacity(s, n + h->n_pending);
    if (rc) return rc;
    ranked *order = malloc((size_t)n * sizeof *order);
    if (!order) return lt_error(LT_ENOMEM, "hpo: gp: out of memory");
    for (int i = 0; i < n; i++) order[i] = (ranked){i, h->y[i]};
    qsort(order, (size_t)n, sizeof *order, cmp_ranked);
    if (s->last_fit < 0 || n <= LT__GP_REFIT_ALWAYS ||
        n - s->last_fit >= n / LT__GP_REFIT_DIVISOR)
        refit(s, h, order);
    double best = fill_model(s, h);
    if ((rc = lt__gp_factor(&s->gp))) {
        free(order);
        return rc;
    }
    top_list top = {.u = malloc((size_t)LT__GP_TOP * d * sizeof(double))};
    LT_ASSERT(top.u);
    double best_score = -INFINITY;
    bool found = false;
    /* uniform candidates; the best of them start ascents too, apart from
     * the incumbent's basin */
    top_list wide = {.u = malloc((size_t)LT__GP_TOP * d * sizeof(double))};
    LT_ASSERT(wide.u);
    for (int done = 0; done < LT__GP_RANDOM && !rc; done += s->batch) {
        int m = LT__GP_RANDOM - done < s->batch ? LT__GP_RANDOM - done : s->batch;
        for (int k = 0; k < m * d; k++) s->cu[k] = lt_hpo_rng_uniform(&s->rng);
        if (!(rc = score_batch(s, m, best))) take(s, h, m, &top, &best_score, values);
        for (int c = 0; c < m && !rc; c++)
            if (isfinite(s->score[c])) top_offer(&wide, d, &s->cu[(size_t)c * d], s->score[c]);
    }
    /* perturbations of the best trials, at three widths */
    double *base = malloc((size_t)d * sizeof *base);
    LT_ASSERT(base);
    for (int t = 0; t < LT__GP_TOP && t < n && !rc; t++) {
        lt_hpo_space_encode(s->space, h->x[order[t].i], base);
        int m = LT__GP_PERTURB < s->batch ? LT__GP_PERTURB : s->batch;
        for (int c = 0; c < m; c++) {
            static const double widths[3] = {0.2, 0.05, 0.01};
            perturb(s, base, widths[c % 3], &s->cu[(size_t)c * d]);
        }
        if (!(rc = score_batch(s, m, best))) take(s, h, m, &top, &best_score, values);
    }
    /* local search from the best candidates, shrinking */
    double sigma = 0.05;
    for (int round = 0; round < LT__GP_ROUNDS && !rc; round++, sigma *= 0.4) {
        top_list starts = top;
        double *su = malloc((size_t)LT__GP_TOP * d * sizeof *su);
        LT_ASSERT(su);
        memcpy(su, top.u, (size_t)top.n * d * sizeof *su);
        int m = 0;
        for (int t = 0; t < starts.n; t++)
            for (int c = 0; c < LT__GP_ROUND_SIZE && m < s->batch; c++, m++)
                perturb(s, &su[(size_t)t * d], sigma, &s->cu[(size_t)m * d]);
        free(su);
        if (!(rc = score_batch(s, m, best))) take(s, h, m, &top, &best_score, values);
    }
    /* gradient ascents from the best candidates near and far */
    if (!rc) {
        int nm = s->gp.n, m = 0;
        ascent_scratch a = {
            .values = malloc((size_t)8 * d * sizeof(double)),
            .work = malloc((size_t)(3 * nm + d) * sizeof(double)),
            .free = malloc((size_t)d * sizeof(bool)),
        };
        LT_ASSERT(a.values && a.work && a.free);
        a.f = a.values + d, a.ftry = a.f + d, a.grad = a.ftry + d, a.gtry = a.grad + d;
        a.dmu = a.gtry + d, a.dsd = a.dmu + d, a.ls2 = a.dsd + d;
        for (int j = 0; j < d; j++) a.ls2[j] = exp(2 * s->gp.theta[2 + j]);
        const top_list *lists[2] = {&top, &wide};
        for (int l = 0; l < 2; l++)
            for (int t = 0; t < lists[l]->n && m < s->batch; t++, m++) {
                memcpy(&s->cu[(size_t)m * d], &lists[l]->u[(size_t)t * d], (size_t)d * sizeof(double));
                ascend(s, &a, &s->cu[(size_t)m * d], best);
            }
        free(a.values);
        free(a.work);
        free(a.free);
        if (!(rc = score_batch(s, m, best))) take(s, h, m, &top, &best_score, values);
    }
    free(wide.u);
    found = best_score > -INFINITY;
    if (!found && !rc) { /* every candidate seen before: a uniform point */
        for (int j = 0; j < d; j++) base[j] = lt_hpo_rng_uniform(&s->rng);
        lt_hpo_space_decode(s->space, base, values);
    }
    free(base);
    free(top.u);
    free(order);
    return rc;
}

static void destroy(lt__hpo_sampler *self) {
    gp_sampler *s = (gp_sampler *)self;
    lt__gp_free(&s->gp);
    free(s->shift);
    free(s->cat);
    free(s->cu);
    free(s->cv);
    free(s->cf);
    free(s->mu);
    free(s->sd);
    free(s->score);
    free(s);
}

lt__hpo_sampler *lt__hpo_sampler_gp(const lt_hpo_space *sp, uint64_t seed, int n_startup) {
    gp_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    int d = lt_hpo_space_size(sp);
    s->base.propose = propose;
    s->base.free = destroy;
    s->space = sp;
    s->d = d;
    s->n_startup = n_startup > 0                 ? n_startup
                   : d > LT__GP_STARTUP_MIN     ? d
                                                : LT__GP_STARTUP_MIN;
    s->last_fit = -1;
    s->batch = 256;
    s->shift = malloc((size_t)d * sizeof *s->shift);
    s->cat = malloc((size_t)d * sizeof *s->cat);
    s->cu = malloc((size_t)s->batch * d * sizeof *s->cu);
    s->cv = malloc((size_t)s->batch * d * sizeof *s->cv);
    s->cf = malloc((size_t)s->batch * d * sizeof *s->cf);
    s->mu = malloc((size_t)s->batch * sizeof *s->mu);
    s->sd = malloc((size_t)s->batch * sizeof *s->sd);
    s->score = malloc((size_t)s->batch * sizeof *s->score);
    if (!s->shift || !s->cat || !s->cu || !s->cv || !s->cf || !s->mu || !s->sd || !s->score) {
        destroy(&s->base);
        return NULL;
    }
    lt_hpo_rng_seed(&s->rng, seed);
    for (int j = 0; j < d; j++) {
        s->shift[j] = lt_hpo_rng_uniform(&s->rng);
        s->cat[j] = lt_hpo_space_param(sp, j)->kind == LT_HPO_CATEGORICAL;
    }
    return &s->base;
}
