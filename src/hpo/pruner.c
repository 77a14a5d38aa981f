/* Pruners of hyperparameter studies, deciding from the intermediate values
 * trials report whether one stops early.
 *
 * ASHA (asynchronous successive halving, Li et al. 2020): rungs at steps
 * min_resource * eta^k. A trial's value at rung k is the one it reported at
 * the first step at or past the rung. When a trial reaches a rung it goes on
 * only if its value there is among the best max(1, floor(m / eta)) of the m
 * trials that have reached the rung so far, itself included: promotion
 * never waits for a rung to fill, so the first trial at a rung always goes
 * on.
 *
 * The median rule (Golovin et al. 2017): from warm-up on, a trial whose best
 * value so far is worse than the median of the values other finished trials
 * reported at the same step stops, once enough of them did. */
#include <stdlib.h>

#include "hpo/hpo_internal.h"

/* The index of trial t's first report at or past step, or -1. */
static int first_at_or_past(const lt__hpo_trial *t, int64_t step) {
    for (int i = 0; i < t->n_steps; i++)
        if (t->steps[i] >= step) return i;
    return -1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Whether trial t goes on at the rung of step r, y being its value there. */
static bool promoted(const lt_hpo_study_opts *o, const lt__hpo_trial *trials, int n, int64_t r,
                     double y) {
    double *vals = malloc((size_t)n * sizeof *vals);
    LT_ASSERT(vals);
    int m = 0;
    for (int i = 0; i < n; i++) {
        int k = first_at_or_past(&trials[i], r);
        if (k >= 0) vals[m++] = trials[i].at[k];
    }
    qsort(vals, (size_t)m, sizeof *vals, cmp_double);
    int keep = m / o->eta;
    if (keep < 1) keep = 1;
    bool ok = m == 0 || y <= vals[keep - 1];
    free(vals);
    return ok;
}

static bool asha(const lt_hpo_study_opts *o, const lt__hpo_trial *trials, int n, int t,
                 int64_t step, double y) {
    const lt__hpo_trial *me = &trials[t];
    int64_t prev = me->n_steps >= 2 ? me->steps[me->n_steps - 2] : INT64_MIN;
    /* every rung this report crosses: prev < rung <= step */
    for (int64_t r = o->min_resource; r <= step; r *= o->eta) {
        if (r > prev && !promoted(o, trials, n, r, y)) return true;
        if (r > INT64_MAX / o->eta) break;
    }
    return false;
}

static bool median(const lt_hpo_study_opts *o, const lt__hpo_trial *trials, int n, int t,
                   int64_t step) {
    if (step < o->median_warmup) return false;
    double *vals = malloc((size_t)n * sizeof *vals);
    LT_ASSERT(vals);
    int m = 0;
    for (int i = 0; i < n; i++) {
        const lt__hpo_trial *q = &trials[i];
        if (i == t || (q->state != LT_HPO_COMPLETE && q->state != LT_HPO_PRUNED)) continue;
        for (int k = 0; k < q->n_steps; k++)
            if (q->steps[k] == step) vals[m++] = q->at[k];
    }
    bool stop = false;
    if (m >= o->median_startup && m > 0) {
        double best = trials[t].at[0];
        for (int k = 1; k < trials[t].n_steps; k++)
            if (trials[t].at[k] < best) best = trials[t].at[k];
        stop = best > lt_median(vals, m);
    }
    free(vals);
    return stop;
}

bool lt__hpo_prune(const lt_hpo_study_opts *o, const lt__hpo_trial *trials, int n, int t,
                   int64_t step, double y) {
    switch (o->pruner) {
    case LT_HPO_PRUNER_ASHA:
        return asha(o, trials, n, t, step, y);
    case LT_HPO_PRUNER_MEDIAN:
        return median(o, trials, n, t, step);
    case LT_HPO_PRUNER_NONE:
        break;
    }
    return false;
}
