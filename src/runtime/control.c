/* Checking a control message against the runtime it would change: the run
 * side's guard. Nothing from the network reaches a kernel, the executor or
 * a thread count unless it names a key this runtime has and its values
 * pass the tuning context's one validation (the space, then every call the
 * values would reach), tried on the context and taken back. */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"

void lt_control_cmd_free(lt_control_cmd *c) {
    if (!c) return;
    free(c->keys);
    c->keys = NULL;
    c->n_keys = 0;
}

/* The control's Param list as a point of name's space: every parameter
 * exactly once, or none for one of some regimes only (the values are
 * validated by the context). */
static int params_of(const char *name, const lt_param_def *defs, int nd,
                     const Looptune__Control *c, lt_params *out) {
    bool seen[LT_MAX_PARAMS] = {false};
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < c->n_params; i++) {
        const Looptune__Param *pr = c->params[i];
        int k = -1;
        for (int j = 0; j < nd; j++)
            if (pr && pr->name && !strcmp(pr->name, defs[j].name)) k = j;
        if (k < 0)
            return lt_error(LT_ECONFIG, "%s has no parameter '%s'", name,
                            pr && pr->name ? pr->name : "");
        if (seen[k]) return lt_error(LT_ECONFIG, "parameter '%s' given twice", pr->name);
        if (pr->value < INT32_MIN || pr->value > INT32_MAX)
            return lt_error(LT_ECONFIG, "%s=%lld is out of range", pr->name,
                            (long long)pr->value);
        seen[k] = true;
        out->v[k] = (int32_t)pr->value;
    }
    for (int j = 0; j < nd; j++) {
        if (seen[j]) continue;
        /* a parameter of some regimes only may be left out (as the config
         * store's entries may): its default */
        if (defs[j].regimes) {
            out->v[j] = defs[j].def;
            continue;
        }
        return lt_error(LT_ECONFIG, "parameter '%s' missing", defs[j].name);
    }
    return LT_OK;
}

int lt_control_check(lt_tuning *t, const char *run_id, const Looptune__Control *c,
                     lt_control_cmd *out) {
    memset(out, 0, sizeof *out);
    if (c->run_id && *c->run_id && strcmp(c->run_id, run_id) != 0)
        return lt_error(LT_ENOTFOUND, "addressed to run %s", c->run_id);
    if (!c->kernel || !*c->kernel) return lt_error(LT_ECONFIG, "no kernel named");
    if (strlen(c->kernel) >= sizeof out->name || (c->shape && strlen(c->shape) >= LT_KEY_MAX) ||
        (c->candidate_id && strlen(c->candidate_id) >= sizeof out->candidate_id))
        return lt_error(LT_ECONFIG, "a name is too long");
    if (c->node && *c->node)
        return lt_error(LT_ECONFIG, "a control names a kernel and a shape key, not a node (%s)",
                        c->node);
    if (c->trial_pairs > 64) return lt_error(LT_ECONFIG, "trial of %u pairs: at most 64", c->trial_pairs);
    if (c->trial_pairs && (c->phase_tokens < 1 || c->phase_tokens > 4096))
        return lt_error(LT_ECONFIG, "trial phases of %u steps: expected 1..4096", c->phase_tokens);
    lt_param_def defs[LT_MAX_PARAMS];
    int nd;
    int rc = lt_tuning_space(c->kernel, lt_tuning_pool_threads(t), defs, &nd);
    if (rc || nd == 0) return lt_error(LT_ECONFIG, "unknown kernel '%s'", c->kernel);
    if ((rc = params_of(c->kernel, defs, nd, c, &out->params))) return rc;
    /* the keys it changes: the one named, or every key of that name */
    const int nk = lt_tuning_n_keys(t);
    out->keys = malloc((size_t)(nk ? nk : 1) * sizeof *out->keys);
    if (!out->keys) return lt_error(LT_ENOMEM, "control: out of memory");
    for (int i = 0; i < nk; i++) {
        const char *name, *key;
        lt_tuning_key(t, i, &name, &key);
        if (strcmp(name, c->kernel) || (c->shape && *c->shape && strcmp(key, c->shape))) continue;
        out->keys[out->n_keys++] = i;
    }
    if (!out->n_keys) {
        lt_control_cmd_free(out);
        return lt_error(LT_ECONFIG, "no %s of shape %s in this run", c->kernel,
                        c->shape && *c->shape ? c->shape : "(any)");
    }
    /* one validation: the context's, on every key; then back as it was */
    lt_params *was = malloc((size_t)out->n_keys * sizeof *was);
    bool *had = malloc((size_t)out->n_keys * sizeof *had);
    if (!was || !had) {
        free(was);
        free(had);
        lt_control_cmd_free(out);
        return lt_error(LT_ENOMEM, "control: out of memory");
    }
    int done = 0;
    for (; done < out->n_keys && !rc; done++) {
        const char *name, *key;
        lt_tuning_key(t, out->keys[done], &name, &key);
        LT_ASSERT(lt_tuning_get(t, name, key, &was[done]) == LT_OK);
        had[done] = lt_tuning_has(t, name, key);
        if ((rc = lt_tuning_set(t, name, key, &out->params))) {
            rc = lt_error(LT_ECONFIG, "%s %s: %s", name, key, lt_errmsg());
            break;
        }
    }
    for (int i = 0; i < done; i++) {
        const char *name, *key;
        lt_tuning_key(t, out->keys[i], &name, &key);
        LT_ASSERT((had[i] ? lt_tuning_set(t, name, key, &was[i])
                          : lt_tuning_unset(t, name, key)) == LT_OK);
    }
    free(was);
    free(had);
    if (rc) {
        lt_control_cmd_free(out);
        return rc;
    }
    snprintf(out->name, sizeof out->name, "%s", c->kernel);
    snprintf(out->shape, sizeof out->shape, "%s", c->shape ? c->shape : "");
    snprintf(out->candidate_id, sizeof out->candidate_id, "%s",
             c->candidate_id ? c->candidate_id : "");
    out->trial_pairs = c->trial_pairs;
    out->phase_tokens = c->phase_tokens;
    return LT_OK;
}
