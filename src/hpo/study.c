/* A hyperparameter study: trials asked for and told about asynchronously
 * (any number running at once), the sampler given the complete and pruned
 * trials and the running ones' points, intermediate values handed to the pruner, and
 * the best trial kept. Values are stored as minimised (negated when the
 * study maximises) and given back as the objective reported them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpo/hpo_internal.h"

/* Asks of the sampler before a repeat of a running point is given up on;
 * then uniform points are tried: one neither running nor done is taken, else
 * the first not running, else (a space with fewer points than running
 * trials) the repeat is accepted. */
#define LT__ASK_RETRIES 8
#define LT__UNIFORM_RETRIES 200

struct lt_hpo_study {
    const lt_hpo_space *space;
    lt_hpo_study_opts o;
    lt__hpo_sampler *sampler;
    lt_hpo_rng rng; /* the uniform fall-back */
    int n, cap;
    lt__hpo_trial *t; /* [n] */
    /* the sampler's view, rebuilt at each ask */
    const double **x, **pending;
    double *y;
    double ask_total_s, ask_max_s;
};

void lt_hpo_study_opts_default(lt_hpo_study_opts *o) {
    memset(o, 0, sizeof *o);
    o->sampler = LT_HPO_SAMPLER_RANDOM;
    o->pruner = LT_HPO_PRUNER_NONE;
    o->seed = 1;
    o->min_resource = 1;
    o->eta = 3;
    o->median_startup = 5;
    o->median_warmup = 0;
}

int lt_hpo_study_init(lt_hpo_study **out, const lt_hpo_space *s, const lt_hpo_study_opts *o) {
    *out = NULL;
    if (o->min_resource < 1)
        return lt_error(LT_EINVAL, "hpo: the ASHA minimum resource must be >= 1");
    if (o->eta < 2) return lt_error(LT_EINVAL, "hpo: the ASHA reduction factor must be >= 2");
    if (o->n_startup < 0) return lt_error(LT_EINVAL, "hpo: negative startup trials");
    lt_hpo_study *st = calloc(1, sizeof *st);
    if (!st) return lt_error(LT_ENOMEM, "hpo: out of memory");
    st->space = s;
    st->o = *o;
    lt_hpo_rng_seed(&st->rng, o->seed ^ 0x5bd1e995u);
    switch (o->sampler) {
    case LT_HPO_SAMPLER_RANDOM:
        st->sampler = lt__hpo_sampler_random(s, o->seed);
        break;
    case LT_HPO_SAMPLER_TPE:
        st->sampler = lt__hpo_sampler_tpe(s, o->seed, o->n_startup);
        break;
    case LT_HPO_SAMPLER_GP:
        st->sampler = lt__hpo_sampler_gp(s, o->seed, o->n_startup);
        break;
    }
    if (!st->sampler) {
        free(st);
        return lt_error(LT_ENOMEM, "hpo: out of memory");
    }
    *out = st;
    return LT_OK;
}

void lt_hpo_study_free(lt_hpo_study *st) {
    if (!st) return;
    st->sampler->free(st->sampler);
    for (int i = 0; i < st->n; i++) {
        free(st->t[i].values);
        free(st->t[i].steps);
        free(st->t[i].at);
    }
    free(st->t);
    free(st->x);
    free(st->pending);
    free(st->y);
    free(st);
}

/* The sampler's view of the trials so far. */
static lt__hpo_history history(lt_hpo_study *st) {
    lt__hpo_history h = {.space = st->space, .x = st->x, .y = st->y, .pending = st->pending,
                         .n_asked = st->n};
    for (int i = 0; i < st->n; i++) {
        const lt__hpo_trial *t = &st->t[i];
        /* a pruned trial teaches the sampler with its last intermediate
         * value: most trials of an ASHA study end pruned */
        if (t->state == LT_HPO_COMPLETE || (t->state == LT_HPO_PRUNED && !isnan(t->value))) {
            st->x[h.n_done] = t->values;
            st->y[h.n_done++] = t->value;
        } else if (t->state == LT_HPO_RUNNING) {
            st->pending[h.n_pending++] = t->values;
        }
    }
    return h;
}

/* Room for one more trial (st->t[st->n], zeroed, its values allocated). */
static int grow(lt_hpo_study *st) {
    if (st->n == st->cap) {
        int nc = st->cap ? 2 * st->cap : 64;
        lt__hpo_trial *nt = realloc(st->t, (size_t)nc * sizeof *nt);
        if (!nt) return lt_error(LT_ENOMEM, "hpo: out of memory");
        st->t = nt;
        const double **nx = realloc(st->x, (size_t)nc * sizeof *nx);
        if (nx) st->x = nx;
        const double **np = realloc(st->pending, (size_t)nc * sizeof *np);
        if (np) st->pending = np;
        double *ny = realloc(st->y, (size_t)nc * sizeof *ny);
        if (ny) st->y = ny;
        if (!nx || !np || !ny) return lt_error(LT_ENOMEM, "hpo: out of memory");
        st->cap = nc;
    }
    lt__hpo_trial *t = &st->t[st->n];
    memset(t, 0, sizeof *t);
    t->values = malloc((size_t)lt_hpo_space_size(st->space) * sizeof *t->values);
    return t->values ? LT_OK : lt_error(LT_ENOMEM, "hpo: out of memory");
}

int lt_hpo_study_add(lt_hpo_study *st, const double *values, int *trial) {
    if (!lt_hpo_space_valid(st->space, values))
        return lt_error(LT_EINVAL, "hpo: trial %d's configuration is not in the space", st->n);
    int rc = grow(st);
    if (rc) return rc;
    lt__hpo_trial *t = &st->t[st->n];
    memcpy(t->values, values, (size_t)lt_hpo_space_size(st->space) * sizeof *t->values);
    t->state = LT_HPO_RUNNING;
    t->value = NAN;
    *trial = st->n++;
    return LT_OK;
}

int lt_hpo_study_ask(lt_hpo_study *st, int *trial, double *values) {
    double t0 = lt_now_s();
    int rc = grow(st);
    if (rc) return rc;
    int size = lt_hpo_space_size(st->space);
    lt__hpo_trial *t = &st->t[st->n];
    double *u = malloc((size_t)size * sizeof *u);
    if (!u) {
        free(t->values);
        return lt_error(LT_ENOMEM, "hpo: out of memory");
    }
    lt__hpo_history h = history(st);
    bool fresh = false;
    for (int k = 0; k < LT__ASK_RETRIES && !fresh; k++) {
        if ((rc = st->sampler->propose(st->sampler, &h, t->values))) break;
        fresh = true;
        for (int i = 0; i < h.n_pending && fresh; i++)
            fresh = !lt_hpo_config_equal(st->space, h.pending[i], t->values);
    }
    /* uniform points: the first one not running kept, one never seen taken */
    double *keep = fresh || rc ? NULL : malloc((size_t)size * sizeof *keep);
    bool kept = false;
    for (int k = 0; k < LT__UNIFORM_RETRIES && keep; k++) {
        for (int i = 0; i < size; i++) u[i] = lt_hpo_rng_uniform(&st->rng);
        lt_hpo_space_decode(st->space, u, t->values);
        bool not_running = true;
        for (int i = 0; i < h.n_pending && not_running; i++)
            not_running = !lt_hpo_config_equal(st->space, h.pending[i], t->values);
        if (not_running && !lt__hpo_seen(&h, t->values)) {
            kept = false;
            break;
        }
        if (not_running && !kept) {
            memcpy(keep, t->values, (size_t)size * sizeof *keep);
            kept = true;
        }
    }
    if (kept) memcpy(t->values, keep, (size_t)size * sizeof *keep);
    free(keep);
    free(u);
    if (rc) {
        free(t->values);
        return rc;
    }
    LT_ASSERT(lt_hpo_space_valid(st->space, t->values));
    t->state = LT_HPO_RUNNING;
    t->value = NAN;
    memcpy(values, t->values, (size_t)size * sizeof *values);
    *trial = st->n++;
    double dt = lt_now_s() - t0;
    st->ask_total_s += dt;
    if (dt > st->ask_max_s) st->ask_max_s = dt;
    return LT_OK;
}

static double minimised(const lt_hpo_study *st, double v) { return st->o.maximize ? -v : v; }

static int running(const lt_hpo_study *st, int trial) {
    if (trial < 0 || trial >= st->n) return lt_error(LT_EINVAL, "hpo: no trial %d", trial);
    if (st->t[trial].state != LT_HPO_RUNNING)
        return lt_error(LT_ESTATE, "hpo: trial %d is %s, not running", trial,
                        lt_hpo_state_name(st->t[trial].state));
    return LT_OK;
}

int lt_hpo_study_report(lt_hpo_study *st, int trial, int64_t step, double value, bool *prune) {
    *prune = false;
    int rc = running(st, trial);
    if (rc) return rc;
    lt__hpo_trial *t = &st->t[trial];
    if (!isfinite(value))
        return lt_error(LT_ERANGE, "hpo: trial %d: step %lld: value not finite", trial,
                        (long long)step);
    if (t->n_steps && step <= t->steps[t->n_steps - 1])
        return lt_error(LT_EINVAL, "hpo: trial %d: step %lld after step %lld", trial,
                        (long long)step, (long long)t->steps[t->n_steps - 1]);
    if (t->n_steps == t->cap_steps) {
        int nc = t->cap_steps ? 2 * t->cap_steps : 16;
        int64_t *ns = realloc(t->steps, (size_t)nc * sizeof *ns);
        if (ns) t->steps = ns;
        double *na = realloc(t->at, (size_t)nc * sizeof *na);
        if (na) t->at = na;
        if (!ns || !na) return lt_error(LT_ENOMEM, "hpo: out of memory");
        t->cap_steps = nc;
    }
    double y = minimised(st, value);
    t->steps[t->n_steps] = step;
    t->at[t->n_steps++] = y;
    *prune = lt__hpo_prune(&st->o, st->t, st->n, trial, step, y);
    return LT_OK;
}

int lt_hpo_study_tell(lt_hpo_study *st, int trial, lt_hpo_state state, double value,
                      const char *reason) {
    int rc = running(st, trial);
    if (rc) return rc;
    lt__hpo_trial *t = &st->t[trial];
    switch (state) {
    case LT_HPO_COMPLETE:
        if (!isfinite(value)) return lt_error(LT_ERANGE, "hpo: trial %d: value not finite", trial);
        t->value = minimised(st, value);
        break;
    case LT_HPO_PRUNED:
        t->value = t->n_steps ? t->at[t->n_steps - 1] : NAN;
        break;
    case LT_HPO_FAILED:
        t->value = NAN;
        break;
    case LT_HPO_RUNNING:
        return lt_error(LT_EINVAL, "hpo: trial %d: a trial cannot be told it runs", trial);
    }
    t->state = state;
    snprintf(t->reason, sizeof t->reason, "%s", reason ? reason : "");
    return LT_OK;
}

lt_hpo_counts lt_hpo_study_counts(const lt_hpo_study *st) {
    lt_hpo_counts c = {.total = st->n};
    for (int i = 0; i < st->n; i++) {
        switch (st->t[i].state) {
        case LT_HPO_RUNNING: c.running++; break;
        case LT_HPO_COMPLETE: c.complete++; break;
        case LT_HPO_PRUNED: c.pruned++; break;
        case LT_HPO_FAILED: c.failed++; break;
        }
    }
    return c;
}

int lt_hpo_study_best(const lt_hpo_study *st, double *value, double *values) {
    int best = -1;
    for (int i = 0; i < st->n; i++)
        if (st->t[i].state == LT_HPO_COMPLETE && (best < 0 || st->t[i].value < st->t[best].value))
            best = i;
    if (best >= 0) {
        if (value) *value = minimised(st, st->t[best].value);
        if (values)
            memcpy(values, st->t[best].values,
                   (size_t)lt_hpo_space_size(st->space) * sizeof *values);
    }
    return best;
}

int lt_hpo_study_trial(const lt_hpo_study *st, int t, lt_hpo_state *state, double *value,
                       const double **values, const char **reason) {
    if (t < 0 || t >= st->n) return lt_error(LT_EINVAL, "hpo: no trial %d", t);
    const lt__hpo_trial *q = &st->t[t];
    if (state) *state = q->state;
    if (value) *value = isnan(q->value) ? NAN : minimised(st, q->value);
    if (values) *values = q->values;
    if (reason) *reason = q->reason;
    return LT_OK;
}

void lt_hpo_study_ask_time(const lt_hpo_study *st, double *total_s, double *max_s) {
    if (total_s) *total_s = st->ask_total_s;
    if (max_s) *max_s = st->ask_max_s;
}

/* ---- names ---------------------------------------------------------------------- */

static const char *const sampler_names[] = {"random", "tpe", "gp"};
static const char *const pruner_names[] = {"none", "median", "asha"};
static const char *const state_names[] = {"running", "complete", "pruned", "failed"};

int lt_hpo_sampler_parse(const char *s, lt_hpo_sampler_kind *out) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, sampler_names[i])) {
            *out = (lt_hpo_sampler_kind)i;
            return LT_OK;
        }
    return lt_error(LT_EINVAL, "unknown sampler '%s' (gp, tpe or random)", s);
}

int lt_hpo_pruner_parse(const char *s, lt_hpo_pruner_kind *out) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, pruner_names[i])) {
            *out = (lt_hpo_pruner_kind)i;
            return LT_OK;
        }
    return lt_error(LT_EINVAL, "unknown pruner '%s' (asha, median or none)", s);
}

const char *lt_hpo_sampler_name(lt_hpo_sampler_kind k) {
    return (unsigned)k < 3 ? sampler_names[k] : "?";
}
const char *lt_hpo_pruner_name(lt_hpo_pruner_kind k) {
    return (unsigned)k < 3 ? pruner_names[k] : "?";
}
const char *lt_hpo_state_name(lt_hpo_state s) { return (unsigned)s < 4 ? state_names[s] : "?"; }
