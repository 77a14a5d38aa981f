/* Model-guided search: an ensemble of XGBoost regressors (different seeds
 * and row subsamples) learns log(cost) from the observations, retrained on
 * every new observation before the next proposal. Candidates (every unvisited
 * point of a small space; otherwise random samples plus mutations of the best
 * few) are scored by mean - kappa * spread of the ensemble (optimism where
 * the boosters disagree), and an epsilon share of proposals is uniform random
 * to keep exploring. Deterministic for a seed: boosters run single-threaded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xgboost/c_api.h>

#include "tune/tune_internal.h"

enum {
    N_BOOSTERS = 4,   /* ensemble size */
    N_ROUNDS = 30,    /* boosting rounds per booster */
    N_INIT = 8,       /* random points before the model is trusted */
    ALL_BELOW = 4096, /* spaces this small are scored exhaustively */
    N_SAMPLED = 1024, /* random candidates per proposal in larger spaces */
    N_ELITE = 5,      /* best points whose mutations are candidates */
    N_CTX_FEATURES = 10,
};
static const double EPSILON = 0.1; /* share of uniform random proposals */
static const double KAPPA = 1.0;   /* weight of ensemble disagreement */

struct lt__cost_model {
    BoosterHandle boosters[N_BOOSTERS];
    int n_trained;    /* observations behind the current boosters */
    int n_features;
    float *cand_x;    /* [cap][n_features] */
    int64_t *cand;    /* [cap] candidate indices */
    double *score;    /* [cap] */
    int cap;
};

static bool all_pow2(const lt_param_def *d) {
    for (int j = 0; j < d->n_values; j++) {
        int32_t v = d->values[j];
        if (v < 0 || (v & (v - 1)) != 0) return false;
    }
    return true;
}

static double log2_or(double v) { return v > 0 ? log2(v) : -1.0; }

/* Parameter values (log2 for power-of-two parameters, 0 mapped to -1), then
 * the shape and host: constant within one search, but they let one model
 * learn across shapes and hosts. */
static void features(const lt_strategy *s, int64_t index, float *f) {
    lt_params p;
    lt_space_point(&s->space, index, &p);
    int k = 0;
    for (int i = 0; i < s->space.n_params; i++)
        f[k++] = (float)(all_pow2(&s->space.params[i]) ? log2_or(p.v[i]) : p.v[i]);
    const lt_shape *sh = &s->ctx.shape;
    const lt_host *h = &s->ctx.host;
    const double ctx[N_CTX_FEATURES] = {
        log2_or((double)sh->rows), log2_or((double)sh->cols), (double)sh->dtype,
        log2_or((double)sh->n_tokens), (double)sh->regime, (double)h->isa, (double)h->cores,
        log2_or(h->l2_kib), log2_or(h->l3_kib), h->bw_gb_s};
    for (int i = 0; i < N_CTX_FEATURES; i++) f[k++] = s->has_ctx ? (float)ctx[i] : 0.0f;
}

static int xgb_fail(const char *what) {
    return lt_error(LT_EIO, "xgboost: %s: %s", what, XGBGetLastError());
}

int lt__cost_model_init(lt_strategy *s) {
    s->cost_model = calloc(1, sizeof *s->cost_model);
    if (!s->cost_model) return lt_error(LT_ENOMEM, "model strategy: out of memory");
    s->cost_model->n_features = s->space.n_params + N_CTX_FEATURES;
    XGBSetGlobalConfig("{\"verbosity\":0}");
    return LT_OK;
}

static void free_boosters(struct lt__cost_model *m) {
    for (int e = 0; e < N_BOOSTERS; e++) {
        if (m->boosters[e]) XGBoosterFree(m->boosters[e]);
        m->boosters[e] = NULL;
    }
}

void lt__cost_model_free(lt_strategy *s) {
    struct lt__cost_model *m = s->cost_model;
    free_boosters(m);
    free(m->cand_x);
    free(m->cand);
    free(m->score);
    free(m);
    s->cost_model = NULL;
}

void lt__cost_model_observed(lt_strategy *s) { (void)s; /* training is lazy: see train() */ }

static int n_valid(const lt_strategy *s) {
    int n = 0;
    for (int i = 0; i < s->n_obs; i++) n += s->obs[i].cost > 0;
    return n;
}

/* Retrains the ensemble from scratch on every valid observation. */
static int train(lt_strategy *s) {
    struct lt__cost_model *m = s->cost_model;
    int n = n_valid(s);
    if (n == m->n_trained) return LT_OK;
    const int nf = m->n_features;
    float *x = malloc((size_t)n * (size_t)nf * sizeof *x);
    float *y = malloc((size_t)n * sizeof *y);
    DMatrixHandle dm = NULL;
    int rc = LT_OK;
    if (!x || !y) {
        rc = lt_error(LT_ENOMEM, "model strategy: out of memory");
        goto done;
    }
    for (int i = 0, k = 0; i < s->n_obs; i++) {
        if (s->obs[i].cost <= 0) continue;
        features(s, s->obs[i].index, x + (size_t)k * nf);
        y[k++] = (float)log(s->obs[i].cost);
    }
    if (XGDMatrixCreateFromMat(x, (bst_ulong)n, (bst_ulong)nf, NAN, &dm) ||
        XGDMatrixSetFloatInfo(dm, "label", y, (bst_ulong)n)) {
        rc = xgb_fail("training data");
        goto done;
    }
    free_boosters(m);
    for (int e = 0; e < N_BOOSTERS && rc == LT_OK; e++) {
        BoosterHandle b;
        if (XGBoosterCreate(&dm, 1, &b)) {
            rc = xgb_fail("create booster");
            break;
        }
        m->boosters[e] = b;
        char seed[32];
        unsigned long long sd = ((s->rng >> 8) + (uint64_t)e) % 1000003;
        snprintf(seed, sizeof seed, "%llu", sd);
        const char *kv[][2] = {
            {"objective", "reg:squarederror"}, {"tree_method", "exact"}, {"nthread", "1"},
            {"max_depth", "4"}, {"eta", "0.3"}, {"min_child_weight", "1"}, {"lambda", "1"},
            /* the first booster sees every row; the others a different 70% each */
            {"subsample", e == 0 ? "1" : "0.7"}, {"seed", seed}, {"verbosity", "0"}};
        for (size_t i = 0; i < sizeof kv / sizeof kv[0] && rc == LT_OK; i++)
            if (XGBoosterSetParam(b, kv[i][0], kv[i][1])) rc = xgb_fail(kv[i][0]);
        for (int it = 0; it < N_ROUNDS && rc == LT_OK; it++)
            if (XGBoosterUpdateOneIter(b, it, dm)) rc = xgb_fail("boosting round");
    }
    if (rc == LT_OK) m->n_trained = n;
done:
    if (dm) XGDMatrixFree(dm);
    free(x);
    free(y);
    return rc;
}

/* Appends idx unless proposed already or (when dedup) already a candidate. */
static int add_candidate(lt_strategy *s, int64_t idx, int *n, bool dedup) {
    struct lt__cost_model *m = s->cost_model;
    if (idx < 0 || s->proposed[idx]) return LT_OK;
    for (int i = 0; dedup && i < *n; i++)
        if (m->cand[i] == idx) return LT_OK; /* about a thousand: linear is fine */
    if (*n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 256;
        float *cx = realloc(m->cand_x, (size_t)cap * (size_t)m->n_features * sizeof *cx);
        if (cx) m->cand_x = cx;
        int64_t *c = realloc(m->cand, (size_t)cap * sizeof *c);
        if (c) m->cand = c;
        double *sc = realloc(m->score, (size_t)cap * sizeof *sc);
        if (sc) m->score = sc;
        if (!cx || !c || !sc) return lt_error(LT_ENOMEM, "model strategy: out of memory");
        m->cap = cap;
    }
    m->cand[*n] = idx;
    features(s, idx, m->cand_x + (size_t)*n * m->n_features);
    (*n)++;
    return LT_OK;
}

/* Neighbours of a point: each parameter moved one or two allowed values. */
static int add_mutations(lt_strategy *s, int64_t idx, int *n) {
    const lt_space *sp = &s->space;
    int digit[LT_MAX_PARAMS];
    int64_t r = idx;
    for (int i = sp->n_params - 1; i >= 0; i--) {
        digit[i] = (int)(r % sp->params[i].n_values);
        r /= sp->params[i].n_values;
    }
    for (int i = 0; i < sp->n_params; i++)
        for (int d = -2; d <= 2; d++) {
            int v = digit[i] + d;
            if (d == 0 || v < 0 || v >= sp->params[i].n_values) continue;
            int64_t j = 0;
            for (int q = 0; q < sp->n_params; q++)
                j = j * sp->params[q].n_values + (q == i ? v : digit[q]);
            int rc = add_candidate(s, j, n, true);
            if (rc) return rc;
        }
    return LT_OK;
}

static int cmp_cost(const void *a, const void *b) {
    double x = ((const lt__obs *)a)->cost, y = ((const lt__obs *)b)->cost;
    return (x > y) - (x < y);
}

/* Candidates scored by the ensemble: score = mean - KAPPA * stddev. */
static int score_candidates(lt_strategy *s, int *n_out) {
    struct lt__cost_model *m = s->cost_model;
    int n = 0, rc = LT_OK;
    if (s->size - s->n_proposed <= ALL_BELOW) {
        for (int64_t i = 0; i < s->size && rc == LT_OK; i++) rc = add_candidate(s, i, &n, false);
    } else {
        for (int i = 0; i < N_SAMPLED && rc == LT_OK; i++) {
            /* uniform samples with replacement: cheaper than consuming draws */
            int64_t idx = lt__rng_below(&s->rng, s->size);
            rc = add_candidate(s, idx, &n, true);
        }
        lt__obs *sorted = malloc((size_t)s->n_obs * sizeof *sorted);
        if (!sorted) return lt_error(LT_ENOMEM, "model strategy: out of memory");
        memcpy(sorted, s->obs, (size_t)s->n_obs * sizeof *sorted);
        qsort(sorted, (size_t)s->n_obs, sizeof *sorted, cmp_cost);
        for (int i = 0, e = 0; i < s->n_obs && e < N_ELITE && rc == LT_OK; i++) {
            if (sorted[i].cost <= 0) continue;
            rc = add_mutations(s, sorted[i].index, &n);
            e++;
        }
        free(sorted);
    }
    if (rc) return rc;
    *n_out = n;
    if (n == 0) return LT_OK;
    DMatrixHandle dm;
    if (XGDMatrixCreateFromMat(m->cand_x, (bst_ulong)n, (bst_ulong)m->n_features, NAN, &dm))
        return xgb_fail("candidates");
    double *sum = calloc((size_t)n, sizeof *sum), *sum2 = calloc((size_t)n, sizeof *sum2);
    if (!sum || !sum2) rc = lt_error(LT_ENOMEM, "model strategy: out of memory");
    for (int e = 0; e < N_BOOSTERS && rc == LT_OK; e++) {
        bst_ulong len;
        const float *pred;
        if (XGBoosterPredict(m->boosters[e], dm, 0, 0, 0, &len, &pred) || len != (bst_ulong)n) {
            rc = xgb_fail("predict");
            break;
        }
        for (int i = 0; i < n; i++) {
            sum[i] += pred[i];
            sum2[i] += (double)pred[i] * pred[i];
        }
    }
    for (int i = 0; i < n && rc == LT_OK; i++) {
        double mean = sum[i] / N_BOOSTERS;
        double var = sum2[i] / N_BOOSTERS - mean * mean;
        m->score[i] = mean - KAPPA * sqrt(var > 0 ? var : 0);
    }
    free(sum);
    free(sum2);
    XGDMatrixFree(dm);
    return rc;
}

int lt__cost_model_propose(lt_strategy *s, lt_params *out, int n) {
    struct lt__cost_model *m = s->cost_model;
    int k = 0;
    bool use_model = n_valid(s) >= N_INIT;
    int n_cand = 0;
    if (use_model) {
        int rc = train(s);
        if (!rc) rc = score_candidates(s, &n_cand);
        if (rc) return rc;
    }
    while (k < n) {
        int64_t idx = -1;
        if (use_model && lt__rng_uniform(&s->rng) >= EPSILON) {
            int best = -1;
            for (int i = 0; i < n_cand; i++)
                if (!s->proposed[m->cand[i]] && (best < 0 || m->score[i] < m->score[best]))
                    best = i;
            if (best >= 0) idx = m->cand[best];
        }
        if (idx < 0) idx = lt__strategy_draw(s);
        if (idx < 0) break;
        lt__strategy_mark(s, idx);
        lt_space_point(&s->space, idx, &out[k++]);
    }
    return k;
}

int lt__cost_model_expected_gain(lt_strategy *s, double *gain) {
    struct lt__cost_model *m = s->cost_model;
    double best;
    if (n_valid(s) < N_INIT || !lt_strategy_best(s, NULL, &best)) return LT_ENOTFOUND;
    int n_cand = 0;
    int rc = train(s);
    if (!rc) rc = score_candidates(s, &n_cand);
    if (rc) return rc;
    double lo = 0;
    bool any = false;
    for (int i = 0; i < n_cand; i++)
        if (!s->proposed[m->cand[i]] && (!any || m->score[i] < lo)) {
            lo = m->score[i];
            any = true;
        }
    /* the optimistic score (mean - KAPPA * disagreement, of the log cost) of
     * the most promising point not tried yet; no such point: nothing to gain */
    *gain = any ? 1.0 - exp(lo) / best : 0.0;
    return LT_OK;
}
