/* Checking a control message against the program it would change: the run
 * side's guard. Nothing from the network reaches a kernel unless it names
 * nodes this program has and lies in the kernel's declared space. */
#include <stdlib.h>
#include <string.h>

#include "optimizer/optimizer_internal.h"

int lt__node_table_init(lt__node_table *t, const lt_program *p) {
    memset(t, 0, sizeof *t);
    t->n = lt_program_n_nodes(p);
    t->nodes = calloc((size_t)(t->n ? t->n : 1), sizeof *t->nodes);
    if (!t->nodes) return lt_error(LT_ENOMEM, "control: out of memory");
    for (int i = 0; i < t->n; i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        lt__node_entry *e = &t->nodes[i];
        e->kernel = ni.kernel;
        snprintf(e->kernel_name, sizeof e->kernel_name, "%s", lt_kernel_get(ni.kernel)->name);
        snprintf(e->label, sizeof e->label, "%s", ni.label ? ni.label : "");
        lt_call_key(ni.kernel, lt_program_call(p, i), e->shape, sizeof e->shape);
        e->params = ni.params;
    }
    return LT_OK;
}

void lt__node_table_free(lt__node_table *t) {
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

void lt_control_cmd_free(lt_control_cmd *c) {
    if (!c) return;
    free(c->nodes);
    c->nodes = NULL;
    c->n_nodes = 0;
}

/* The control's Param list as a point of space: every parameter exactly once. */
static int params_of(const lt_space *s, const Looptune__Control *c, lt_params *out) {
    bool seen[LT_MAX_PARAMS] = {false};
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < c->n_params; i++) {
        const Looptune__Param *pr = c->params[i];
        int k = -1;
        for (int j = 0; j < s->n_params; j++)
            if (pr && pr->name && !strcmp(pr->name, s->params[j].name)) k = j;
        if (k < 0)
            return lt_error(LT_ECONFIG, "%s has no parameter '%s'", s->name,
                            pr && pr->name ? pr->name : "");
        if (seen[k]) return lt_error(LT_ECONFIG, "parameter '%s' given twice", pr->name);
        if (pr->value < INT32_MIN || pr->value > INT32_MAX)
            return lt_error(LT_ECONFIG, "%s=%lld is out of range", pr->name,
                            (long long)pr->value);
        seen[k] = true;
        out->v[k] = (int32_t)pr->value;
    }
    for (int j = 0; j < s->n_params; j++)
        if (!seen[j]) return lt_error(LT_ECONFIG, "parameter '%s' missing", s->params[j].name);
    return lt_space_validate(s, out);
}

int lt__control_check_table(const lt__node_table *t, const lt_program *p, const char *run_id,
                            const Looptune__Control *c, lt_control_cmd *out) {
    memset(out, 0, sizeof *out);
    if (c->run_id && *c->run_id && strcmp(c->run_id, run_id) != 0)
        return lt_error(LT_ENOTFOUND, "addressed to run %s", c->run_id);
    if (!c->kernel || !*c->kernel) return lt_error(LT_ECONFIG, "no kernel named");
    if (strlen(c->kernel) >= sizeof out->kernel || (c->shape && strlen(c->shape) >= sizeof out->shape) ||
        (c->candidate_id && strlen(c->candidate_id) >= sizeof out->candidate_id))
        return lt_error(LT_ECONFIG, "a name is too long");
    if (c->trial_pairs > 64) return lt_error(LT_ECONFIG, "trial of %u pairs: at most 64", c->trial_pairs);
    if (c->trial_pairs && (c->phase_tokens < 1 || c->phase_tokens > 4096))
        return lt_error(LT_ECONFIG, "trial phases of %u steps: expected 1..4096", c->phase_tokens);
    lt_space space;
    if (lt_space_by_name(c->kernel, &space) || !strcmp(c->kernel, "looped") ||
        !strcmp(c->kernel, "threads"))
        return lt_error(LT_ECONFIG, "unknown kernel '%s'", c->kernel);
    int rc = params_of(&space, c, &out->params);
    if (rc) return lt_error(LT_ECONFIG, "%s", lt_errmsg());
    out->nodes = malloc((size_t)(t->n ? t->n : 1) * sizeof *out->nodes);
    if (!out->nodes) return lt_error(LT_ENOMEM, "control: out of memory");
    for (int i = 0; i < t->n; i++) {
        const lt__node_entry *e = &t->nodes[i];
        if (strcmp(e->kernel_name, c->kernel) != 0) continue;
        if (c->shape && *c->shape && strcmp(e->shape, c->shape) != 0) continue;
        if (c->node && *c->node && strcmp(e->label, c->node) != 0) continue;
        if ((rc = lt_config_check(e->kernel, lt_program_call(p, i), &out->params))) {
            rc = lt_error(LT_ECONFIG, "node %s: %s", e->label, lt_errmsg());
            lt_control_cmd_free(out);
            return rc;
        }
        out->nodes[out->n_nodes++] = i;
    }
    if (!out->n_nodes) {
        lt_control_cmd_free(out);
        return lt_error(LT_ECONFIG, "no %s node%s%s%s%s in this program", c->kernel,
                        c->shape && *c->shape ? " of shape " : "", c->shape ? c->shape : "",
                        c->node && *c->node ? " labelled " : "", c->node ? c->node : "");
    }
    snprintf(out->kernel, sizeof out->kernel, "%s", c->kernel);
    snprintf(out->shape, sizeof out->shape, "%s", c->shape ? c->shape : "");
    snprintf(out->candidate_id, sizeof out->candidate_id, "%s",
             c->candidate_id ? c->candidate_id : "");
    out->trial_pairs = c->trial_pairs;
    out->phase_tokens = c->phase_tokens;
    return LT_OK;
}

int lt_control_check(const lt_program *p, const char *run_id, const Looptune__Control *c,
                     lt_control_cmd *out) {
    lt__node_table t;
    int rc = lt__node_table_init(&t, p);
    if (rc) return rc;
    rc = lt__control_check_table(&t, p, run_id, c, out);
    lt__node_table_free(&t);
    return rc;
}
