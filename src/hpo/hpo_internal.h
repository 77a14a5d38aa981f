/* Internals of the hpo layer shared between its files: one parameter's
 * unit-cube mapping, the samplers' interface and the view of a study's
 * trials that a sampler proposes from. */
#ifndef LT_HPO_INTERNAL_H
#define LT_HPO_INTERNAL_H

#include "looptune/hpo.h"

/* One parameter's value <-> unit interval (space.c), as decode/encode. */
double lt__hpo_decode1(const lt_hpo_param *p, double u);
double lt__hpo_encode1(const lt_hpo_param *p, double v);

/* What a sampler sees of a study: the trials it may learn from and the
 * points still running. y is the objective as minimised (negated when the
 * study maximises). */
typedef struct {
    const lt_hpo_space *space;
    int n_done;            /* complete trials, and pruned ones that reported a value */
    const double *const *x; /* [n_done] their configurations ([size] each) */
    const double *y;       /* [n_done] their values (a pruned trial's last one), to minimise */
    int n_pending;         /* running trials */
    const double *const *pending; /* [n_pending] their configurations */
    int n_asked;           /* trials asked so far (the index of this one) */
} lt__hpo_history;

/* A sampler: proposes values[size] from h. Returns a status. */
typedef struct lt__hpo_sampler lt__hpo_sampler;
struct lt__hpo_sampler {
    int (*propose)(lt__hpo_sampler *self, const lt__hpo_history *h, double *values);
    void (*free)(lt__hpo_sampler *self);
};

/* Constructors (sampler_random.c, sampler_tpe.c, sampler_gp.c); NULL when
 * out of memory. n_startup 0: the sampler's default. */
lt__hpo_sampler *lt__hpo_sampler_random(const lt_hpo_space *s, uint64_t seed);
lt__hpo_sampler *lt__hpo_sampler_tpe(const lt_hpo_space *s, uint64_t seed, int n_startup);
lt__hpo_sampler *lt__hpo_sampler_gp(const lt_hpo_space *s, uint64_t seed, int n_startup);

/* The quasi-random point of index i (Halton's sequence, a random shift
 * per dimension from shift[size], modulo 1) decoded into values. */
void lt__hpo_quasi_point(const lt_hpo_space *s, uint64_t i, const double *shift, double *values);

/* Whether values equals one of the h's pending or done points. */
bool lt__hpo_seen(const lt__hpo_history *h, const double *values);

/* One trial of a study (study.c), as the pruners read it. */
typedef struct {
    lt_hpo_state state;
    double value;     /* complete: its value; pruned: the last intermediate one */
    double *values;   /* [size] its configuration */
    char reason[160]; /* failed: why */
    int n_steps, cap_steps;
    int64_t *steps;   /* [n_steps] the steps it reported, increasing */
    double *at;       /* [n_steps] the values it reported there, as minimised */
} lt__hpo_trial;

/* Pruning (pruner.c): whether trial t, which just reported y (as
 * minimised) at step (already in its history), stops. trials[0..n) are
 * the study's trials; both pruners read their histories alone. */
bool lt__hpo_prune(const lt_hpo_study_opts *o, const lt__hpo_trial *trials, int n, int t,
                   int64_t step, double y);

/* For tests (mlp.c): the largest relative difference between
 * backpropagation's gradient of the cross-entropy of images [0, m) of s and
 * central finite differences, over every 7th weight and bias of a network
 * of config c, initialised from its seed (dropout off). */
double lt__mlp_grad_check(const lt_hpo_digits_set *s, int m, const lt_mlp_config *c);

#endif
