/* The random sampler: the first trials are points of a randomly shifted
 * Halton sequence (even cover of the space however few trials run), the
 * rest independent uniform points of the unit cube. */
#include <stdlib.h>

#include "hpo/hpo_internal.h"

/* Trials drawn from the Halton sequence before uniform draws. */
#define LT__RANDOM_QUASI_TRIALS 32

typedef struct {
    lt__hpo_sampler base;
    const lt_hpo_space *space;
    lt_hpo_rng rng;
    double *shift; /* [size] the sequence's shift per dimension */
    double *u;     /* [size] scratch */
} random_sampler;

static int propose(lt__hpo_sampler *self, const lt__hpo_history *h, double *values) {
    random_sampler *r = (random_sampler *)self;
    if (h->n_asked < LT__RANDOM_QUASI_TRIALS) {
        lt__hpo_quasi_point(r->space, (uint64_t)h->n_asked, r->shift, values);
        return LT_OK;
    }
    int n = lt_hpo_space_size(r->space);
    for (int i = 0; i < n; i++) r->u[i] = lt_hpo_rng_uniform(&r->rng);
    lt_hpo_space_decode(r->space, r->u, values);
    return LT_OK;
}

static void destroy(lt__hpo_sampler *self) {
    random_sampler *r = (random_sampler *)self;
    free(r->shift);
    free(r->u);
    free(r);
}

lt__hpo_sampler *lt__hpo_sampler_random(const lt_hpo_space *s, uint64_t seed) {
    random_sampler *r = calloc(1, sizeof *r);
    int n = lt_hpo_space_size(s);
    if (!r) return NULL;
    r->shift = malloc((size_t)n * sizeof *r->shift);
    r->u = malloc((size_t)n * sizeof *r->u);
    if (!r->shift || !r->u) {
        destroy(&r->base);
        return NULL;
    }
    r->base.propose = propose;
    r->base.free = destroy;
    r->space = s;
    lt_hpo_rng_seed(&r->rng, seed);
    for (int i = 0; i < n; i++) r->shift[i] = lt_hpo_rng_uniform(&r->rng);
    return &r->base;
}

bool lt__hpo_seen(const lt__hpo_history *h, const double *values) {
    for (int i = 0; i < h->n_pending; i++)
        if (lt_hpo_config_equal(h->space, h->pending[i], values)) return true;
    for (int i = 0; i < h->n_done; i++)
        if (lt_hpo_config_equal(h->space, h->x[i], values)) return true;
    return false;
}
