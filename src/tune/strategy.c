/* Search strategies behind one interface: exhaustive (every point once, in
 * index order), random (uniform without replacement) and model-guided
 * (strategy_model.c). The object records what was proposed and observed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune_internal.h"

static const char *const strat_names[] = {
    [LT_STRAT_EXHAUSTIVE] = "exhaustive", [LT_STRAT_RANDOM] = "random", [LT_STRAT_MODEL] = "model"};

const char *lt_strategy_name(lt_strategy_kind k) {
    return (unsigned)k <= LT_STRAT_MODEL ? strat_names[k] : "unknown";
}

int lt_strategy_parse(const char *s, lt_strategy_kind *out) {
    for (int k = 0; k <= LT_STRAT_MODEL; k++)
        if (!strcmp(s, strat_names[k])) {
            *out = (lt_strategy_kind)k;
            return LT_OK;
        }
    return lt_error(LT_EINVAL, "unknown strategy '%s' (expected model, random or exhaustive)", s);
}

int lt_strategy_init(lt_strategy **out, lt_strategy_kind kind, const lt_space *space,
                     const lt_tune_context *ctx, uint64_t seed) {
    *out = NULL;
    if ((unsigned)kind > LT_STRAT_MODEL)
        return lt_error(LT_EINVAL, "unknown strategy %d", (int)kind);
    int64_t size = lt_space_size(space);
    if (size > LT__MAX_SPACE)
        return lt_error(LT_ERANGE, "%s: space of %lld points is too large to search", space->name,
                        (long long)size);
    lt_strategy *s = calloc(1, sizeof *s);
    if (!s) return lt_error(LT_ENOMEM, "strategy: out of memory");
    s->kind = kind;
    s->space = *space;
    if (ctx) {
        s->ctx = *ctx;
        s->has_ctx = true;
    }
    s->rng = seed ^ 0x6c6f6f7074756e65ull;
    s->size = size;
    s->proposed = calloc((size_t)size, 1);
    s->perm = malloc((size_t)size * sizeof *s->perm);
    if (!s->proposed || !s->perm) {
        lt_strategy_free(s);
        return lt_error(LT_ENOMEM, "strategy: out of memory for %lld points", (long long)size);
    }
    for (int64_t i = 0; i < size; i++) s->perm[i] = (int32_t)i;
    if (kind == LT_STRAT_MODEL) {
        int rc = lt__cost_model_init(s);
        if (rc) {
            lt_strategy_free(s);
            return rc;
        }
    }
    *out = s;
    return LT_OK;
}

void lt_strategy_free(lt_strategy *s) {
    if (!s) return;
    if (s->cost_model) lt__cost_model_free(s);
    free(s->proposed);
    free(s->perm);
    free(s->obs);
    free(s);
}

void lt__strategy_mark(lt_strategy *s, int64_t index) {
    if (!s->proposed[index]) {
        s->proposed[index] = 1;
        s->n_proposed++;
    }
}

/* One step of a Fisher-Yates shuffle per draw, skipping points that other
 * means (the model) proposed already. */
int64_t lt__strategy_draw(lt_strategy *s) {
    while (s->next < s->size) {
        int64_t j = s->next + lt__rng_below(&s->rng, s->size - s->next);
        int32_t t = s->perm[j];
        s->perm[j] = s->perm[s->next];
        s->perm[s->next] = t;
        s->next++;
        if (!s->proposed[t]) return t;
    }
    return -1;
}

int lt_strategy_propose(lt_strategy *s, lt_params *out, int n) {
    if (n < 0) return lt_error(LT_EINVAL, "propose: negative count");
    if (s->kind == LT_STRAT_MODEL) return lt__cost_model_propose(s, out, n);
    int k = 0;
    while (k < n) {
        int64_t idx = -1;
        if (s->kind == LT_STRAT_EXHAUSTIVE) {
            while (s->next < s->size && s->proposed[s->next]) s->next++;
            if (s->next < s->size) idx = s->next++;
        } else {
            idx = lt__strategy_draw(s);
        }
        if (idx < 0) break;
        lt__strategy_mark(s, idx);
        lt_space_point(&s->space, idx, &out[k++]);
    }
    return k;
}

int lt_strategy_observe(lt_strategy *s, const lt_params *p, const double *costs, int n_samples) {
    int64_t idx = lt_space_index(&s->space, p);
    if (idx < 0) return lt_space_validate(&s->space, p);
    if (n_samples < 0) return lt_error(LT_EINVAL, "observe: negative sample count");
    double cost = -1.0;
    if (n_samples > 0) {
        cost = lt_median(costs, n_samples);
        if (!(cost > 0) || !isfinite(cost))
            return lt_error(LT_EINVAL, "observe: cost %g is not a positive number", cost);
    }
    if (s->n_obs == s->cap_obs) {
        int cap = s->cap_obs ? 2 * s->cap_obs : 64;
        lt__obs *o = realloc(s->obs, (size_t)cap * sizeof *o);
        if (!o) return lt_error(LT_ENOMEM, "strategy: out of memory");
        s->obs = o;
        s->cap_obs = cap;
    }
    lt__strategy_mark(s, idx);
    s->obs[s->n_obs++] = (lt__obs){.index = idx, .cost = cost};
    if (s->kind == LT_STRAT_MODEL && n_samples > 0) lt__cost_model_observed(s);
    return LT_OK;
}

bool lt_strategy_best(const lt_strategy *s, lt_params *out, double *cost) {
    int best = -1;
    for (int i = 0; i < s->n_obs; i++)
        if (s->obs[i].cost > 0 && (best < 0 || s->obs[i].cost < s->obs[best].cost)) best = i;
    if (best < 0) return false;
    if (out) lt_space_point(&s->space, s->obs[best].index, out);
    if (cost) *cost = s->obs[best].cost;
    return true;
}

int lt_strategy_expected_gain(lt_strategy *s, double *gain) {
    if (s->kind != LT_STRAT_MODEL) return LT_ENOTFOUND;
    return lt__cost_model_expected_gain(s, gain);
}
