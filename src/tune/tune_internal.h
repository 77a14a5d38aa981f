/* Internal to the tune layer: the strategy object shared by the simple
 * strategies (strategy.c) and the model-guided one (strategy_model.c), a
 * small deterministic RNG, and what the store's backends share with it. */
#ifndef LT_TUNE_INTERNAL_H
#define LT_TUNE_INTERNAL_H

#include "looptune/tune.h"

/* splitmix64: a full-period 64-bit generator, fine for sampling. */
static inline uint64_t lt__rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double lt__rng_uniform(uint64_t *state) { /* [0, 1) */
    return (double)(lt__rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}
static inline int64_t lt__rng_below(uint64_t *state, int64_t n) { /* [0, n) */
    return (int64_t)(lt__rng_next(state) % (uint64_t)n);
}

typedef struct {
    int64_t index; /* point in the space */
    double cost;   /* median of the samples; < 0 when the point failed validation */
} lt__obs;

struct lt__cost_model; /* strategy_model.c: the learned cost of a point, not an LLM (lt_model) */

struct lt_strategy {
    lt_strategy_kind kind;
    lt_space space;
    lt_tune_context ctx;
    bool has_ctx;
    uint64_t rng;
    int64_t size;
    uint8_t *proposed;  /* [size] 1 once proposed */
    int64_t n_proposed;
    int64_t next;       /* exhaustive: next index; random: position in perm */
    int32_t *perm;      /* draws: a progressively shuffled permutation of [0, size) */
    lt__obs *obs;
    int n_obs, cap_obs;
    struct lt__cost_model *cost_model; /* LT_STRAT_MODEL: the XGBoost cost model */
};

/* Largest space a strategy accepts (the visited map is one byte a point). */
#define LT__MAX_SPACE (INT64_C(1) << 22)

/* An unproposed point drawn uniformly (random without replacement), or -1
 * when none is left. Marks nothing. */
int64_t lt__strategy_draw(lt_strategy *s);
void lt__strategy_mark(lt_strategy *s, int64_t index);

int lt__cost_model_init(lt_strategy *s);
void lt__cost_model_free(lt_strategy *s);
int lt__cost_model_propose(lt_strategy *s, lt_params *out, int n);
void lt__cost_model_observed(lt_strategy *s);
int lt__cost_model_expected_gain(lt_strategy *s, double *gain);

/* The checks of lt_store_put: fields present without blanks, kernel known,
 * params in its space (*sp and *p get both), numbers in range. */
int lt__config_entry_check(const lt_config_entry *e, lt_space *sp, lt_params *p);
/* Removes the entry whose "kernel|shape|host" is key[0, len); false if none. */
bool lt__store_remove_key(lt_store *s, const void *key, size_t len);

#endif
