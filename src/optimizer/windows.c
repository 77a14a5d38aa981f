/* Windows: each telemetry KernelWindow of a run, folded into the run's step
 * time, its units' untagged statistics (the incumbent's cost, bytes, FLOPs,
 * a finished record's drift) or, tagged, into the pairs of the trial in
 * flight. A node's window feeds its kernel's unit; the "step" window (the
 * whole decode steps, or one prefill step) feeds the run's whole-step units
 * of its key ("looped", "threads") and is no part of the run's node time.
 * What the pairs decide is in trials.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "optimizer/service_internal.h"

/* A tagged window of the trial's unit: own ns over per steps, on its side of
 * pair w->pair; then the pairs may be complete. */
static void add_pair(lt_optimizer *o, int ri, const Looptune__KernelWindow *w, double own,
                     double per) {
    lt__run *r = &o->runs[ri];
    if (w->on_candidate) {
        r->b_ns[w->pair] += own;
        r->b_steps[w->pair] += per;
    } else {
        r->a_ns[w->pair] += own;
        r->a_steps[w->pair] += per;
    }
    if (w->contention) r->contended[w->pair] = true;
    lt__opt_pair_measured(o, ri);
}

/* An untagged window of unit u (the incumbent): total ns over steps of the
 * unit (per node), for its cost, and one sample per window index (every
 * node of the unit reported it) for its recent cost and its drift. */
static void fold_untagged(lt_optimizer *o, lt__unit *u, uint64_t window, double total,
                          double steps) {
    u->ns += total;
    u->steps += steps;
    u->windows++;
    if (u->win_index != window) {
        if (u->win_index != UINT64_MAX && u->win_steps > 0) {
            double c = u->win_ns / u->win_steps;
            u->recent = u->recent > 0 ? 0.7 * u->recent + 0.3 * c : c;
            lt__rec *R = &o->recs[u->rec];
            /* a finished kernel whose speed moved: the workload or the
             * machine changed, explore again */
            if (R->converged && R->conv_cost > 0 && fabs(c / R->conv_cost - 1) > o->o.drift) {
                if (++R->drift_windows >= 3) {
                    R->converged = false;
                    R->since_kept = 0;
                    R->trials = R->trials > o->o.max_trials / 2 ? o->o.max_trials / 2 : R->trials;
                    o->st.units_converged--;
                    fprintf(o->log, "optimizer: %s %s: speed drifted %.0f%%, exploring again\n",
                            R->kernel, R->config_shape, 100 * (c / R->conv_cost - 1));
                }
            } else {
                R->drift_windows = 0;
            }
        }
        u->win_index = window;
        u->win_ns = u->win_steps = 0;
    }
    u->win_ns += total;
    u->win_steps += steps;
}

static bool is_prefill_key(const char *key) {
    size_t n = strlen(key), m = sizeof ":prefill" - 1;
    return n >= m && !strcmp(key + n - m, ":prefill");
}

/* Whether run r's trial in flight is of a prefill step's tunable: the
 * decode steps during it ran the incumbents, whatever their tag says. */
static bool prefill_trial(const lt__run *r) { return r->trial && r->units[r->t_unit].prefill; }

/* The "step" window of run ri: count steps (of a prefill window: its prompt
 * tokens), total_ns their wall time, for the whole-step units keyed by its
 * shape. */
static void step_window(lt_optimizer *o, int ri, const Looptune__KernelWindow *w) {
    lt__run *r = &o->runs[ri];
    double total = w->total_ns ? (double)w->total_ns : (double)w->median_ns * (double)w->count;
    double steps = w->steps ? (double)w->steps : (double)w->count;
    const char *key = w->shape ? w->shape : "";
    const bool prefill = is_prefill_key(key);
    if (prefill) r->prefills++;
    if (w->candidate_id && *w->candidate_id && (prefill || !prefill_trial(r))) {
        if (!r->trial || strcmp(w->candidate_id, r->cand)) return;
        r->saw_tagged = true;
        if (prefill && w->on_candidate) r->cand_prefills++;
        const lt__unit *t = &r->units[r->t_unit];
        if (t->step && !strcmp(o->recs[t->rec].config_shape, key) &&
            w->pair < (uint32_t)r->pairs && steps > 0)
            add_pair(o, ri, w, total, steps);
        return;
    }
    /* the run is back untagged (in the trial's regime) */
    if (r->trial && r->saw_tagged && prefill == prefill_trial(r))
        lt__opt_decide(o, ri, "ended early");
    if (!(steps > 0)) return;
    for (int k = 0; k < r->n_units; k++)
        if (r->units[k].step && !strcmp(o->recs[r->units[k].rec].config_shape, key))
            fold_untagged(o, &r->units[k], w->window, total, steps);
}

void lt__opt_window(lt_optimizer *o, const Looptune__KernelWindow *w, uint64_t t_ns) {
    o->st.windows++;
    if (!w->run_id || !w->node) return;
    int ri = lt__opt_find_run(o, w->run_id);
    if (ri < 0) return; /* its start was never seen */
    lt__run *r = &o->runs[ri];
    if (t_ns > r->last_ns) r->last_ns = t_ns;
    if (w->kernel && !strcmp(w->kernel, LT_TEL_STEP_KERNEL)) {
        step_window(o, ri, w);
        return;
    }
    int node = -1;
    for (int i = 0; i < r->n_nodes; i++)
        if (!strcmp(r->labels[i], w->node)) {
            node = i;
            break;
        }
    if (node < 0) return;
    double total = w->total_ns ? (double)w->total_ns : (double)w->median_ns * (double)w->count;
    double steps = w->steps ? (double)w->steps : (double)w->count;
    r->time_ns += total;
    if (node == 0) {
        r->steps += (uint64_t)steps;
        if (w->on_candidate) r->cand_steps += (uint64_t)steps;
    }
    int ui = r->node_unit[node];
    bool tagged = w->candidate_id && *w->candidate_id && !prefill_trial(r);
    /* the run's whole step time, one sample per untagged window */
    if (w->window != r->win_index) {
        if (!r->win_tagged && r->win_steps > 0) {
            double c = r->win_ns / r->win_steps;
            r->step_recent = r->step_recent > 0 ? 0.7 * r->step_recent + 0.3 * c : c;
        }
        r->win_index = w->window;
        r->windows_seen++;
        r->win_ns = r->win_steps = 0;
        r->win_tagged = tagged;
    }
    r->win_ns += total;
    if (node == 0) r->win_steps += steps;
    if (tagged && r->trial && !strcmp(w->candidate_id, r->cand)) {
        r->trial_ns += total;
        if (node == 0) r->trial_steps += steps;
    }
    if (tagged) {
        if (r->trial && !strcmp(w->candidate_id, r->cand)) {
            r->saw_tagged = true;
            if (ui == r->t_unit && w->pair < (uint32_t)r->pairs) {
                double per = steps / r->units[ui].n_nodes;
                /* the node's own time, without the skew between the threads'
                 * starts (noise from the nodes before it) where the writer
                 * measures it; it never exceeds the span, so a record that says
                 * otherwise is not believed */
                double crit = (double)w->critical_ns;
                add_pair(o, ri, w, crit > 0 && crit <= total ? crit : total, per);
            }
        }
        return;
    }
    /* the run is back untagged */
    if (r->trial && r->saw_tagged && !prefill_trial(r)) lt__opt_decide(o, ri, "ended early");
    if (ui >= 0) {
        lt__unit *u = &r->units[ui];
        u->bytes += w->bytes * (double)w->count;
        u->flops += w->flops * (double)w->count;
        fold_untagged(o, u, w->window, total, steps / u->n_nodes);
    }
    /* once per window (the first node's record opens it), also when the
     * first node has nothing to tune */
    if (node == 0) lt__opt_maybe_start(o, ri);
}
