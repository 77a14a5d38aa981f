/* Records and runs: what the optimizer knows of each (kernel, shape, host
 * class) across runs (the records, their spaces fitted to the host and the
 * call), and of each run (its nodes, the units they make, its start and end),
 * decoded from the telemetry's envelopes. Windows go to windows.c, trials to
 * trials.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/service_internal.h"

/* ---- records ----------------------------------------------------------------------- */

int lt__opt_find_rec(lt_optimizer *o, const char *kernel, const char *config_shape,
                     const char *host) {
    for (int i = 0; i < o->n_recs; i++)
        if (!strcmp(o->recs[i].kernel, kernel) && !strcmp(o->recs[i].config_shape, config_shape) &&
            !strcmp(o->recs[i].host, host))
            return i;
    return -1;
}

bool lt_optimizer_param_changes_bits(const char *kernel, const char *param) {
    static const char *const held[][2] = {
        {"matvec", "act_int16"}, {"matvec", "act_int8"}, {"attention", "kv_block"}};
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++)
        if (!strcmp(kernel, held[i][0]) && !strcmp(param, held[i][1])) return true;
    return false;
}

/* A batch run's key: the parameters that change a sequence's bits stay at
 * the values the run holds (a single value each), so no trial goes to them. */
static void hold_bits(lt__rec *R, const lt_params *p) {
    for (int j = 0; j < R->space.n_params; j++) {
        lt_param_def *d = &R->space.params[j];
        if (!lt_optimizer_param_changes_bits(R->kernel, d->name)) continue;
        d->n_values = 1;
        d->values[0] = d->def = p->v[j];
    }
}

bool lt__opt_step_kernel(const char *kernel) {
    return !strcmp(kernel, "looped") || !strcmp(kernel, "threads");
}

/* The pool a whole step's key was made for: its ":t<N>:"
 * (lt_step_shape_format); 0 when it names none. */
static int key_pool(const char *key) {
    for (const char *p = strstr(key, ":t"); p; p = strstr(p + 1, ":t")) {
        char *end;
        long v = strtol(p + 2, &end, 10);
        if (end > p + 2 && *end == ':' && v > 0 && v <= INT32_MAX) return (int)v;
    }
    return 0;
}

int lt__opt_add_rec(lt_optimizer *o, const char *kernel, const char *config_shape,
                    const char *host, int pool_threads) {
    lt_space sp;
    if (lt_space_by_name(kernel, &sp)) return -1; /* not tunable */
    /* a step's thread count: 0 (the whole pool) or fewer threads than it has */
    if (!strcmp(kernel, "threads"))
        lt_space_threads(&sp, pool_threads > 0 ? pool_threads : key_pool(config_shape));
    if (sp.n_params == 0) return -1;
    lt_isa isa;
    /* no trial on a parameter that does nothing on the run's ISA (a host
     * class without one is from an older run: its whole space) */
    if (lt_host_class_isa(host, &isa) == LT_OK) lt_space_fit_isa(&sp, isa);
    lt_space_fit_shape(&sp, kernel, config_shape); /* no trial on a duplicate point */
    if (o->n_recs == o->cap_recs) {
        int cap = o->cap_recs ? 2 * o->cap_recs : 16;
        lt__rec *r = realloc(o->recs, (size_t)cap * sizeof *r);
        if (!r) return -1;
        o->recs = r;
        o->cap_recs = cap;
    }
    lt__rec *r = &o->recs[o->n_recs];
    memset(r, 0, sizeof *r);
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    snprintf(r->config_shape, sizeof r->config_shape, "%s", config_shape);
    snprintf(r->host, sizeof r->host, "%s", host);
    r->space = sp;
    lt_space_default(&sp, &r->defaults);
    r->speedup = 1.0;
    r->busy_run = -1;
    o->st.units = ++o->n_recs;
    return o->n_recs - 1;
}

int lt__opt_rec_from_entry(lt_optimizer *o, const lt_config_entry *e) {
    int i = lt__opt_find_rec(o, e->kernel, e->shape, e->host);
    if (i < 0) i = lt__opt_add_rec(o, e->kernel, e->shape, e->host, 0);
    if (i < 0) return -1;
    lt__rec *r = &o->recs[i];
    lt_space full; /* a stored point of the whole space, as the point it runs as */
    if (lt_space_by_name(r->kernel, &full) || lt_space_parse(&full, e->params, &r->best))
        return -1;
    lt_space_fit_params(&r->space, &r->best);
    r->have_best = true;
    r->speedup = e->speedup > 0 ? e->speedup : 1.0;
    r->best_cost = e->median_ns;
    r->trials = (int)e->trials;
    r->converged = e->converged;
    if (r->converged) o->st.units_converged++;
    return i;
}

/* ---- runs -------------------------------------------------------------------------- */

int lt__opt_find_run(lt_optimizer *o, const char *run_id) {
    for (int i = o->n_runs - 1; i >= 0; i--)
        if (!strcmp(o->runs[i].run_id, run_id)) return i;
    return -1;
}

static void free_run(lt__run *r) {
    free(r->units);
    free(r->labels);
    free(r->node_unit);
}

void lt__opt_free_state(lt_optimizer *o) {
    for (int i = 0; i < o->n_runs; i++) free_run(&o->runs[i]);
    free(o->runs);
    for (int i = 0; i < o->n_recs; i++) lt_strategy_free(o->recs[i].strat);
    free(o->recs);
}

/* A point of the kernel's whole space from the network, as the point of the
 * record's (fitted) space it runs as. Telemetry leaves out the parameters
 * that do nothing on the run's ISA: those take their one value. */
static bool params_from(const lt__rec *R, Looptune__Param **pp, size_t n, lt_params *out) {
    const lt_space *s = &R->space;
    memset(out, 0, sizeof *out);
    if ((int)n > s->n_params) return false;
    for (int j = 0; j < s->n_params; j++) {
        bool found = s->params[j].n_values == 1;
        out->v[j] = s->params[j].values[0];
        for (size_t i = 0; i < n; i++)
            if (pp[i] && pp[i]->name && !strcmp(pp[i]->name, s->params[j].name)) {
                /* from the network: out of int32 range is not a value of any space */
                if (pp[i]->value < INT32_MIN || pp[i]->value > INT32_MAX) return false;
                out->v[j] = (int32_t)pp[i]->value;
                found = true;
            }
        if (!found) return false;
    }
    lt_space full;
    if (lt_space_by_name(R->kernel, &full) || lt_space_validate(&full, out) != LT_OK) return false;
    lt_space_fit_params(s, out);
    return true;
}

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

static void run_start(lt_optimizer *o, const Looptune__RunStart *rs, uint64_t t_ns) {
    if (!rs->run_id || !*rs->run_id || lt__opt_find_run(o, rs->run_id) >= 0) return;
    if (o->n_runs == o->cap_runs) {
        int cap = o->cap_runs ? 2 * o->cap_runs : 8;
        lt__run *r = realloc(o->runs, (size_t)cap * sizeof *r);
        if (!r) return;
        o->runs = r;
        o->cap_runs = cap;
    }
    lt__run *r = &o->runs[o->n_runs];
    memset(r, 0, sizeof *r);
    snprintf(r->run_id, sizeof r->run_id, "%s", rs->run_id);
    const char *hc = rs->host_class && *rs->host_class ? rs->host_class
                     : rs->host && rs->host->host_id ? rs->host->host_id : "unknown-host";
    snprintf(r->host_class, sizeof r->host_class, "%s", hc);
    if (rs->host) {
        r->bw = rs->host->read_gb_s > 0 ? rs->host->read_gb_s : rs->host->triad_gb_s;
        r->peak = rs->host->peak_gflops;
    }
    r->last_ns = t_ns;
    r->win_index = UINT64_MAX;
    size_t n = rs->n_kernels;
    /* a run of batched decode steps (serving) observes a batch program: its
     * nodes' keys are of the batch regime, and so is its step window */
    bool batch_run = false;
    for (size_t i = 0; i < n; i++) {
        const Looptune__KernelParams *kp = rs->kernels[i];
        const char *cs = kp->config_shape && *kp->config_shape ? kp->config_shape : kp->shape;
        if (kp->kernel && !lt__opt_step_kernel(kp->kernel) && cs &&
            (ends_with(cs, ":batch") || strstr(cs, ":batch:")))
            batch_run = true;
    }
    r->labels = calloc(n ? n : 1, sizeof *r->labels);
    r->node_unit = calloc(n ? n : 1, sizeof *r->node_unit);
    r->units = calloc(n ? n : 1, sizeof *r->units);
    if (!r->labels || !r->node_unit || !r->units) {
        free_run(r);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const Looptune__KernelParams *kp = rs->kernels[i];
        /* a node, or a whole-step tunable (no node: measured by the "step"
         * windows of its key, decode or prefill) */
        const bool step = kp->kernel && lt__opt_step_kernel(kp->kernel);
        int node = -1;
        if (!step) {
            node = r->n_nodes++;
            snprintf(r->labels[node], sizeof r->labels[0], "%s", kp->node ? kp->node : "");
            r->node_unit[node] = -1;
        }
        const char *cs = kp->config_shape && *kp->config_shape ? kp->config_shape : kp->shape;
        if (!kp->kernel || !cs || !*cs) continue;
        const bool prefill = step && ends_with(cs, ":prefill");
        /* no regime the run measures: a decode run has no batch step windows */
        if (step && !prefill && !ends_with(cs, batch_run ? ":batch" : ":decode")) continue;
        int rec = lt__opt_find_rec(o, kp->kernel, cs, r->host_class);
        if (rec < 0) rec = lt__opt_add_rec(o, kp->kernel, cs, r->host_class, (int)rs->threads);
        if (rec < 0) continue; /* not a tunable kernel */
        lt__rec *R = &o->recs[rec];
        lt_params p;
        if (!params_from(R, kp->params, kp->n_params, &p)) continue;
        if (!R->shape[0]) {
            snprintf(R->shape, sizeof R->shape, "%s", kp->shape ? kp->shape : "");
            R->defaults = p; /* what the first run of this call started with */
            if (batch_run) hold_bits(R, &p);
        }
        int u = -1;
        for (int k = 0; k < r->n_units; k++)
            if (r->units[k].rec == rec) u = k;
        if (u < 0) {
            u = r->n_units++;
            r->units[u].rec = rec;
            r->units[u].step = step;
            r->units[u].prefill = prefill;
            r->units[u].incumbent = p;
            r->units[u].win_index = UINT64_MAX;
        }
        if (step) continue;
        r->units[u].n_nodes++;
        r->node_unit[node] = u;
    }
    o->n_runs++;
    o->st.runs++;
    int n_step = 0;
    for (int k = 0; k < r->n_units; k++) n_step += r->units[k].step;
    if (n_step)
        fprintf(o->log, "optimizer: run %.8s on %s: %d tunable kernel shapes, %d whole-step "
                        "tunables\n", r->run_id, r->host_class, r->n_units - n_step, n_step);
    else
        fprintf(o->log, "optimizer: run %.8s on %s: %d tunable kernel shapes\n", r->run_id,
                r->host_class, r->n_units);
}

void lt__opt_handle_env(lt_optimizer *o, const Looptune__Envelope *env, bool starts_only) {
    switch (env->payload_case) {
    case LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START:
        run_start(o, env->run_start, env->time_ns);
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END: {
        int ri = env->run_end->run_id ? lt__opt_find_run(o, env->run_end->run_id) : -1;
        if (ri >= 0 && !o->runs[ri].ended) {
            lt__opt_end_trial(o, &o->runs[ri]);
            o->runs[ri].ended = true;
        }
        break;
    }
    case LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW:
        if (!starts_only) lt__opt_window(o, env->kernel_window, env->time_ns);
        break;
    default: break;
    }
}

int lt_optimizer_run_info_get(lt_optimizer *o, const char *run_id, lt_optimizer_run_info *out) {
    memset(out, 0, sizeof *out);
    int ri = lt__opt_find_run(o, run_id);
    if (ri < 0) return lt_error(LT_ENOTFOUND, "optimizer: run %s was never seen", run_id);
    const lt__run *r = &o->runs[ri];
    out->windows = r->windows_seen;
    out->steps = (int64_t)r->steps;
    out->trials = r->started;
    out->in_trial = r->trial;
    out->wait = r->wait;
    snprintf(out->waiting, sizeof out->waiting, "%s", r->waiting);
    return LT_OK;
}

void lt_optimizer_report(lt_optimizer *o, FILE *f) {
    int w = 34; /* the shape column fits the longest key (a model's step key is long) */
    for (int i = 0; i < o->n_recs; i++) {
        int len = (int)strlen(o->recs[i].config_shape);
        if (len > w) w = len;
    }
    fprintf(f, "%-9s %-*s %-10s %8s %6s  %s\n", "kernel", w, "shape", "state", "speedup", "trials",
            "best parameters");
    for (int i = 0; i < o->n_recs; i++) {
        lt__rec *R = &o->recs[i];
        char pb[160];
        lt_space_format(&R->space, R->have_best ? &R->best : &R->defaults, pb, sizeof pb);
        fprintf(f, "%-9s %-*s %-10s %7.3fx %6d  %s\n", R->kernel, w, R->config_shape,
                R->converged ? "done" : R->trials ? "exploring" : "waiting", R->speedup, R->trials,
                pb);
    }
}
