/* Trials: between trials a run gets the next one when its exploration
 * budget allows: the record with the highest priority (time share x distance
 * to the roofline) that is not finished, a candidate from its strategy, a
 * control asking the run to alternate it with the incumbent. When the
 * trial's pairs are in, the paired comparison decides: faster by more than
 * the margin is kept (a control making it the incumbent, a Config), anything
 * else is left to roll back (the run is already back on the incumbent).
 * Every observation goes to the trials log. Decisions leave through the
 * optimizer's emitters (o->emit), never through a transport. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optimizer/service_internal.h"

static void send_params(lt_optimizer *o, lt__run *r, lt__rec *R, const lt_params *p,
                        const char *cand, int pairs, int phase_tokens) {
    Looptune__Control c = LOOPTUNE__CONTROL__INIT;
    Looptune__Param prm[LT_MAX_PARAMS], *pp[LT_MAX_PARAMS];
    for (int j = 0; j < R->space.n_params; j++) {
        looptune__param__init(&prm[j]);
        prm[j].name = (char *)R->space.params[j].name;
        prm[j].value = p->v[j];
        pp[j] = &prm[j];
    }
    c.run_id = r->run_id;
    c.kernel = R->kernel;
    c.shape = R->config_shape;
    c.params = pp;
    c.n_params = (size_t)R->space.n_params;
    c.candidate_id = (char *)cand;
    c.trial_pairs = (uint32_t)pairs;
    c.phase_tokens = (uint32_t)phase_tokens;
    o->st.controls_sent++;
    if (o->emit.control) o->emit.control(o->emit.user, &c);
}

static void publish(lt_optimizer *o, lt__rec *R) {
    lt_config_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.kernel, sizeof e.kernel, "%s", R->kernel);
    snprintf(e.shape, sizeof e.shape, "%s", R->config_shape);
    snprintf(e.host, sizeof e.host, "%s", R->host);
    lt_space_format(&R->space, R->have_best ? &R->best : &R->defaults, e.params, sizeof e.params);
    e.median_ns = R->best_cost > 0 ? R->best_cost : 1.0;
    e.samples = (int64_t)R->trials * o->o.trial_pairs;
    if (e.samples < 1) e.samples = 1;
    e.speedup = R->speedup;
    e.trials = R->trials;
    e.converged = R->converged;
    o->st.configs_written++;
    if (o->emit.config) o->emit.config(o->emit.user, &e);
}

static void set_converged(lt_optimizer *o, lt__rec *R, double cost, const char *why) {
    if (R->converged) return;
    R->converged = true;
    R->conv_cost = cost;
    R->drift_windows = 0;
    o->st.units_converged++;
    fprintf(o->log, "optimizer: %s %s on %s: done exploring after %d trials (%s), %.3fx over "
                    "defaults\n", R->kernel, R->config_shape, R->host, R->trials, why, R->speedup);
    publish(o, R);
}

static int strategy_of(lt_optimizer *o, lt__rec *R) {
    if (R->strat) return LT_OK;
    return lt_strategy_init(&R->strat, o->o.strategy, &R->space, NULL,
                            o->o.seed ^ (uint64_t)(R - o->recs) * 0x9e3779b97f4a7c15ull);
}

/* Feeds the strategy and writes the observation to the trials log, so other
 * optimizers and this one after a restart learn from it too. Costs are
 * relative to the kernel's defaults on this host class (1 = as fast). */
static void observe(lt_optimizer *o, lt__rec *R, const lt_params *p, const double *costs, int n) {
    if (lt_strategy_observe(R->strat, p, costs, n) != LT_OK) return;
    Looptune__Trial t = LOOPTUNE__TRIAL__INIT;
    Looptune__HParam hp[LT_MAX_PARAMS], *hpp[LT_MAX_PARAMS];
    char study[300];
    snprintf(study, sizeof study, "tune:%s|%s|%s", R->kernel, R->config_shape, R->host);
    for (int j = 0; j < R->space.n_params; j++) {
        looptune__hparam__init(&hp[j]);
        hp[j].name = (char *)R->space.params[j].name;
        hp[j].value = p->v[j];
        hpp[j] = &hp[j];
    }
    t.study_id = study;
    t.trial_id = (uint64_t)R->n_observed++;
    t.params = hpp;
    t.n_params = (size_t)R->space.n_params;
    t.objective = n ? lt_median(costs, n) : 0;
    t.status = n ? LOOPTUNE__STATUS__STATUS_OK : LOOPTUNE__STATUS__STATUS_FAILED;
    if (o->emit.trial) o->emit.trial(o->emit.user, &t);
}

int lt_optimizer_restore_trial(lt_optimizer *o, const Looptune__Trial *t) {
    if (!t->study_id || strncmp(t->study_id, "tune:", 5) != 0) return LT_ENOTFOUND;
    char buf[300], *save = NULL;
    snprintf(buf, sizeof buf, "%s", t->study_id + 5);
    char *kernel = strtok_r(buf, "|", &save), *shape = strtok_r(NULL, "|", &save);
    char *host = strtok_r(NULL, "|", &save);
    if (!kernel || !shape || !host)
        return lt_error(LT_EFORMAT, "trial study '%s': not kernel|shape|host", t->study_id);
    int i = lt__opt_find_rec(o, kernel, shape, host);
    if (i < 0) i = lt__opt_add_rec(o, kernel, shape, host, 0);
    if (i < 0) return lt_error(LT_EFORMAT, "trial study '%s': not a tunable kernel", t->study_id);
    lt__rec *R = &o->recs[i];
    lt_params p;
    memset(&p, 0, sizeof p);
    if ((int)t->n_params != R->space.n_params)
        return lt_error(LT_EFORMAT, "trial study '%s': %zu parameters, %s has %d", t->study_id,
                        t->n_params, kernel, R->space.n_params);
    for (int j = 0; j < R->space.n_params; j++) {
        bool found = false;
        for (size_t k = 0; k < t->n_params; k++)
            if (t->params[k] && t->params[k]->name &&
                !strcmp(t->params[k]->name, R->space.params[j].name)) {
                /* a double from the log: only a whole number in int32 range can be
                 * a value of the space (and converting anything else is undefined) */
                double v = t->params[k]->value;
                if (!(v >= INT32_MIN && v <= INT32_MAX) || v != floor(v))
                    return lt_error(LT_EFORMAT, "trial study '%s': %s = %g is not a value of "
                                    "the space", t->study_id, R->space.params[j].name, v);
                p.v[j] = (int32_t)v;
                found = true;
            }
        if (!found) return lt_error(LT_EFORMAT, "trial study '%s': no %s", t->study_id,
                                    R->space.params[j].name);
    }
    bool ok = t->status == LOOPTUNE__STATUS__STATUS_OK;
    lt_space full;
    if (lt_space_by_name(R->kernel, &full) || lt_space_validate(&full, &p) ||
        (ok && !(t->objective > 0)))
        return lt_error(LT_EFORMAT, "trial study '%s': a point outside the space", t->study_id);
    lt_space_fit_params(&R->space, &p);
    int rc = strategy_of(o, R);
    if (!rc) rc = lt_strategy_observe(R->strat, &p, ok ? &t->objective : NULL, ok ? 1 : 0);
    if (rc) return rc;
    R->n_observed++;
    R->seeded = true;
    /* the log is complete on its own: its best point is the best known one
     * unless the configs topic knew better */
    if (ok && 1.0 / t->objective > R->speedup) {
        R->best = p;
        R->have_best = true;
        R->speedup = 1.0 / t->objective;
    }
    R->model_cost = 1.0 / R->speedup;
    return LT_OK;
}

void lt__opt_end_trial(lt_optimizer *o, lt__run *r) {
    if (!r->trial) return;
    lt__rec *R = &o->recs[r->units[r->t_unit].rec];
    R->busy_run = -1;
    r->trial = false;
}

/* The trial's windows are in (or it ended early): decide. */
void lt__opt_decide(lt_optimizer *o, int ri, const char *how) {
    lt__run *r = &o->runs[ri];
    lt__unit *u = &r->units[r->t_unit];
    lt__rec *R = &o->recs[u->rec];
    double a[LT__MAX_PAIRS], b[LT__MAX_PAIRS];
    bool cont[LT__MAX_PAIRS];
    int n = 0;
    for (int i = 0; i < r->pairs; i++) {
        if (!(r->a_steps[i] > 0) || !(r->b_steps[i] > 0) || !(r->a_ns[i] > 0) || !(r->b_ns[i] > 0))
            continue;
        a[n] = r->a_ns[i] / r->a_steps[i];
        b[n] = r->b_ns[i] / r->b_steps[i];
        cont[n] = r->contended[i];
        n++;
    }
    /* the first half of an extended trial */
    for (int i = 0; i < r->n_prev && n < LT__MAX_PAIRS; i++, n++) {
        a[n] = r->prev_a[i];
        b[n] = r->prev_b[i];
        cont[n] = r->prev_cont[i];
    }
    r->n_prev = 0;
    const bool was_extension = r->extending;
    r->extending = false;
    /* what the trial cost the run: its steps (every node, both sides) against
     * the steps outside trials just before; this also counts what the
     * trial's own machinery costs on a busy machine */
    if (r->step_recent > 0 && r->trial_steps > 0) {
        if (r->trial_ns > r->trial_steps * r->step_recent)
            r->loss_ns += r->trial_ns - r->trial_steps * r->step_recent;
        r->trials_charged++;
    }
    char pb[160];
    lt_space_format(&R->space, &r->cand_params, pb, sizeof pb);
    o->st.trials++;
    R->trials++;
    if (!r->saw_tagged) {
        /* the run never ran it: it refused the control (its log says why) or is gone */
        o->st.timed_out++;
        observe(o, R, &r->cand_params, NULL, 0);
        fprintf(o->log, "optimizer: run %.8s %s %s: candidate %s (%s) never ran (%s)\n", r->run_id,
                R->kernel, R->config_shape, r->cand, pb, how);
        lt__opt_end_trial(o, r);
        return;
    }
    if (n < 2 || (n < 5 && strstr(how, "slower"))) {
        if (n >= 1) { /* what was measured still teaches the model */
            double costs[LT__MAX_PAIRS];
            for (int i = 0; i < n; i++) costs[i] = R->model_cost * b[i] / a[i];
            observe(o, R, &r->cand_params, costs, n);
        }
        o->st.aborted++;
        fprintf(o->log, "optimizer: run %.8s %s %s: rolled back %s: %d pairs, %s\n", r->run_id,
                R->kernel, R->config_shape, pb, n, n < 2 ? "too few to judge" : how);
        R->since_kept++;
        lt__opt_end_trial(o, r);
        return;
    }
    /* contended pairs are discounted only while enough clean ones remain: on
     * a machine where every window is flagged the flag tells nothing */
    int n_cont = 0;
    for (int i = 0; i < n; i++) n_cont += cont[i];
    lt_compare_result cr;
    if (lt_compare_paired(a, b, n - n_cont >= 5 ? cont : NULL, n, o->o.margin, 0.1,
                          o->o.seed + (uint64_t)R->trials, &cr)) {
        lt__opt_end_trial(o, r);
        return;
    }
    /* faster by the median (by twice the margin) but not surely: measure it once more rather
     * than lose a real gain to a noisy machine (once: a second look that
     * still cannot tell is a rollback) */
    if (!cr.faster && !cr.slower && cr.ratio < 1.0 - 2 * o->o.margin && !was_extension &&
        2 * n <= LT__MAX_PAIRS) {
        memcpy(r->prev_a, a, (size_t)n * sizeof *a);
        memcpy(r->prev_b, b, (size_t)n * sizeof *b);
        memcpy(r->prev_cont, cont, (size_t)n * sizeof *cont);
        r->n_prev = n;
        r->extend = true;
        r->ext_unit = r->t_unit;
        r->ext_params = r->cand_params;
        r->ext_incumbent = lt_space_index(&R->space, &u->incumbent);
        o->st.trials--; /* the two halves are one trial */
        o->st.extended++;
        R->trials--;
        fprintf(o->log, "optimizer: run %.8s %s %s: %s looks %.3fx faster (95%% CI %.3f..%.3f, "
                        "%d pairs): measuring it again\n", r->run_id, R->kernel, R->config_shape,
                pb, 1.0 / cr.ratio, 1.0 / cr.ci_hi, 1.0 / cr.ci_lo, n);
        lt__opt_end_trial(o, r);
        return;
    }
    double costs[LT__MAX_PAIRS];
    for (int i = 0; i < n; i++) costs[i] = R->model_cost * b[i] / a[i];
    observe(o, R, &r->cand_params, costs, n);
    if (cr.faster) {
        o->st.kept++;
        send_params(o, r, R, &r->cand_params, r->cand, 0, 0);
        u->incumbent = r->cand_params;
        R->best = r->cand_params;
        R->have_best = true;
        R->speedup /= cr.ratio;
        R->model_cost *= cr.ratio;
        R->best_cost = cr.b_median;
        R->since_kept = 0;
        fprintf(o->log, "optimizer: run %.8s %s %s: kept %s: %.3fx faster (95%% CI %.3f..%.3f, %d "
                        "pairs), %.3fx over defaults\n", r->run_id, R->kernel, R->config_shape, pb,
                1.0 / cr.ratio, 1.0 / cr.ci_hi, 1.0 / cr.ci_lo, n, R->speedup);
        publish(o, R);
        /* every other live run of this host class gets it too */
        for (int k = 0; k < o->n_runs; k++) {
            lt__run *q = &o->runs[k];
            if (k == ri || q->ended || strcmp(q->host_class, r->host_class)) continue;
            for (int v = 0; v < q->n_units; v++)
                if (q->units[v].rec == u->rec) {
                    send_params(o, q, R, &R->best, "best-known", 0, 0);
                    q->units[v].incumbent = R->best;
                }
        }
    } else {
        o->st.rolled_back++;
        R->since_kept++;
        fprintf(o->log, "optimizer: run %.8s %s %s: rolled back %s: %.3fx (95%% CI %.3f..%.3f, "
                        "%d pairs)%s\n", r->run_id, R->kernel, R->config_shape, pb, 1.0 / cr.ratio,
                1.0 / cr.ci_hi, 1.0 / cr.ci_lo, n, cr.slower ? ", slower" : "");
    }
    lt__opt_end_trial(o, r);
    double gain;
    if (R->trials >= o->o.max_trials) set_converged(o, R, u->recent, "trial budget spent");
    else if (R->since_kept >= o->o.patience) set_converged(o, R, u->recent, "no better candidate");
    /* the model's word counts once it has seen enough (a model trained on a
     * handful of points is confidently wrong) and the search has stalled */
    else if (R->trials >= 16 && R->since_kept >= 3 &&
             lt_strategy_expected_gain(R->strat, &gain) == LT_OK && gain < o->o.stop_gain) {
        char why[96];
        snprintf(why, sizeof why, "model predicts at most %.1f%% better", 100 * gain);
        set_converged(o, R, u->recent, why);
    }
}

static double unit_cost(const lt__unit *u) { return u->steps > 0 ? u->ns / u->steps : 0; }

/* The fleet's knowledge first: a live run that does not run the best known
 * configuration of one of its calls gets it (learned from another run, or by
 * an optimizer before a restart). */
static void push_best_known(lt_optimizer *o, lt__run *r) {
    for (int u = 0; u < r->n_units; u++) {
        lt__rec *R = &o->recs[r->units[u].rec];
        if (r->extend && u == r->ext_unit) continue; /* its second look runs first */
        if (!R->have_best || R->speedup <= 1.0 || R->busy_run >= 0 ||
            lt_space_index(&R->space, &R->best) ==
                lt_space_index(&R->space, &r->units[u].incumbent))
            continue;
        send_params(o, r, R, &R->best, "best-known", 0, 0);
        r->units[u].incumbent = R->best;
        char pb[160];
        lt_space_format(&R->space, &R->best, pb, sizeof pb);
        fprintf(o->log, "optimizer: run %.8s %s %s: best known %s (%.3fx over defaults)\n",
                r->run_id, R->kernel, R->config_shape, pb, R->speedup);
    }
}

/* Steps per phase when none is set: at least 4, and enough that a phase
 * lasts LT__PHASE_MIN_NS on this run. Every phase is a telemetry window of
 * its own, so phases of a few steps of a small model would multiply the
 * records the run, the broker and the optimizer handle, and what they cost
 * the run while it is measured. */
#define LT__PHASE_MIN_NS 20e6
#define LT__PHASE_MAX_STEPS 64
static int phase_steps(const lt_optimizer *o, const lt__run *r) {
    if (o->o.phase_tokens > 0) return o->o.phase_tokens;
    int w = 4;
    if (r->step_recent > 0) {
        double need = ceil(LT__PHASE_MIN_NS / r->step_recent);
        w = need > LT__PHASE_MAX_STEPS ? LT__PHASE_MAX_STEPS : need < 4 ? 4 : (int)need;
    }
    return w;
}


/* Notes why run r gets no trial now (for lt_optimizer_run_info_get). */
static void wait_on(lt__run *r, lt_opt_wait why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void wait_on(lt__run *r, lt_opt_wait why, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->waiting, sizeof r->waiting, fmt, ap);
    va_end(ap);
    r->wait = why;
}

/* Sends the trial of candidate p on unit k of run ri: P pairs of W-step phases. */
static void start_trial(lt_optimizer *o, int ri, int k, const lt_params *p, int P, int W) {
    lt__run *r = &o->runs[ri];
    lt__rec *R = &o->recs[r->units[k].rec];
    r->trial = true;
    r->started++;
    wait_on(r, LT_OPT_WAIT_NONE, "%s", "");
    r->t_unit = k;
    r->cand_params = *p;
    snprintf(r->cand, sizeof r->cand, "c%llu", (unsigned long long)++o->next_cand);
    r->t_started = lt_now_ns();
    r->pairs = P;
    r->phase_tokens = W;
    r->saw_tagged = false;
    r->trial_ns = r->trial_steps = 0;
    memset(r->a_ns, 0, sizeof r->a_ns);
    memset(r->a_steps, 0, sizeof r->a_steps);
    memset(r->b_ns, 0, sizeof r->b_ns);
    memset(r->b_steps, 0, sizeof r->b_steps);
    memset(r->contended, 0, sizeof r->contended);
    R->busy_run = ri;
    send_params(o, r, R, p, r->cand, P, W);
}

/* A whole-step unit's priority before its first trial (then divided by 1 +
 * its trials, as a kernel's): that of a kernel with a tenth of the time,
 * halfway to its roofline (lt_tuning_priority(0.1, 0.5)). A step's thread
 * count or the looped executor's parameters change the whole step, but the
 * run's bottleneck kernels keep their first turns. */
#define LT__STEP_PRIORITY 0.05

/* No decode trial fits the budget: from when one does, cand <= share x
 * (steps + 2PW). */
static void wait_budget(const lt_optimizer *o, lt__run *r, int P, int W, double cand) {
    wait_on(r, LT_OPT_WAIT_BUDGET, "a trial of %d pairs of %d-step phases fits the "
            "exploration budget (%.0f%% of the decode steps) from %.0f decode steps on; it "
            "had seen %llu", P, W, 100.0 * o->o.explore_share,
            ceil(cand / o->o.explore_share - 2.0 * P * W), (unsigned long long)r->steps);
}

/* Starts the next trial of run ri if its budget allows; else notes why not. */
void lt__opt_maybe_start(lt_optimizer *o, int ri) {
    lt__run *r = &o->runs[ri];
    if (r->trial || r->ended) return;
    if (!r->n_units) {
        wait_on(r, LT_OPT_WAIT_DONE, "the run has no kernel it tunes");
        return;
    }
    /* a window's records arrive node by node: wait until two whole windows
     * of every node are in, or the first nodes' kernels would be the only
     * ones with enough windows when the first trial is chosen */
    if (r->windows_seen < 3) {
        wait_on(r, LT_OPT_WAIT_WINDOWS, "it had %lld of the 3 telemetry windows a first trial "
                "waits for", (long long)r->windows_seen);
        return;
    }
    if (lt_wall_ns() > r->last_ns + (uint64_t)o->o.stale_ms * 1000000ull) {
        wait_on(r, LT_OPT_WAIT_STALE, "the run's telemetry stopped for more than %lld ms",
                (long long)o->o.stale_ms);
        return;
    }
    push_best_known(o, r);
    int P = o->o.trial_pairs, W = phase_steps(o, r);
    double cand = (double)r->cand_steps + (double)P * W;
    double total = (double)r->steps + 2.0 * P * W;
    /* a prefill step's tunable has a budget of the prefill steps: a phase
     * is one of them */
    const bool decode_ok = cand <= o->o.explore_share * total;
    const bool prefill_ok = (double)r->cand_prefills + P <=
                            o->o.explore_share * ((double)r->prefills + 2.0 * P);
    bool prefill_left = false;
    for (int k = 0; k < r->n_units; k++)
        prefill_left |= r->units[k].prefill && !o->recs[r->units[k].rec].converged;
    if (!decode_ok && !(prefill_ok && prefill_left)) {
        wait_budget(o, r, P, W, cand);
        return;
    }
    /* the next trial must fit too: expect it to cost what the run's trials
     * cost on average, so the bound holds after it, not only before */
    double expect = r->trials_charged ? r->loss_ns / r->trials_charged : 0;
    if (r->loss_ns + expect > (1.0 - o->o.min_throughput) * r->time_ns) {
        wait_on(r, LT_OPT_WAIT_THROUGHPUT, "its trials cost %.1f%% of its decode time, another "
                "would pass the %.0f%% the throughput bound allows", 100.0 * r->loss_ns /
                r->time_ns, 100.0 * (1.0 - o->o.min_throughput));
        return;
    }
    /* the kernels' time shares are of their sum; a whole-step unit has the
     * whole step, which no share of the kernels' compares with */
    double sum = 0;
    bool step_measured = false;
    for (int k = 0; k < r->n_units; k++) {
        if (r->units[k].step) step_measured |= unit_cost(&r->units[k]) > 0;
        else sum += unit_cost(&r->units[k]);
    }
    if (!(sum > 0) && !step_measured) {
        wait_on(r, LT_OPT_WAIT_WINDOWS, "no kernel time measured yet");
        return;
    }
    if (r->extend) { /* the second look at a promising candidate comes first */
        lt__unit *xu = &r->units[r->ext_unit];
        lt__rec *R = &o->recs[xu->rec];
        if (!(xu->prefill ? prefill_ok : decode_ok)) {
            wait_on(r, LT_OPT_WAIT_BUDGET, "the candidate it measures again waits for the "
                    "exploration budget of the %s steps", xu->prefill ? "prefill" : "decode");
            return;
        }
        if (R->busy_run >= 0) {
            wait_on(r, LT_OPT_WAIT_OTHER, "the candidate it measures again is in a trial on "
                    "another run");
            return;
        }
        r->extend = false;
        if (R->converged || lt_space_index(&R->space, &xu->incumbent) != r->ext_incumbent) {
            /* the first look's pairs were against another incumbent: they
             * cannot be pooled with new ones; the first look stands alone */
            r->n_prev = 0;
            o->st.rolled_back++;
            o->st.trials++;
            R->trials++;
            R->since_kept++;
        } else {
            r->extending = true;
            start_trial(o, ri, r->ext_unit, &r->ext_params, P, xu->prefill ? 1 : W);
            return;
        }
    }
    int best = -1, n_done = 0, n_busy = 0;
    double best_pri = -1;
    for (int k = 0; k < r->n_units; k++) {
        lt__unit *u = &r->units[k];
        lt__rec *R = &o->recs[u->rec];
        n_done += R->converged;
        n_busy += !R->converged && R->busy_run >= 0;
        if (R->converged || R->busy_run >= 0 || u->windows < 2 * (u->step ? 1 : u->n_nodes) ||
            !(u->prefill ? prefill_ok : decode_ok))
            continue;
        double pri;
        if (u->step) {
            pri = LT__STEP_PRIORITY / (1.0 + R->trials);
        } else {
            double gb_s = u->bytes / u->ns, gflops = u->flops / u->ns;
            /* diminishing returns: a record's priority shrinks with the trials
             * it had, so the budget spreads over the bottlenecks in proportion */
            pri = lt_tuning_priority(unit_cost(u) / sum,
                                     lt_roofline_fraction(gb_s, gflops, r->bw, r->peak)) /
                  (1.0 + R->trials);
        }
        if (pri > best_pri) {
            best_pri = pri;
            best = k;
        }
    }
    if (best < 0) {
        if (!decode_ok) wait_budget(o, r, P, W, cand); /* the prefill tunables wait too */
        else if (n_done == r->n_units)
            wait_on(r, LT_OPT_WAIT_DONE, "every kernel of the run has finished exploring");
        else if (n_done + n_busy == r->n_units)
            wait_on(r, LT_OPT_WAIT_OTHER, "its kernels left to explore are in trials on other "
                    "runs");
        else
            wait_on(r, LT_OPT_WAIT_WINDOWS, "no kernel left to explore has two whole windows "
                    "of every node yet");
        return;
    }
    lt__unit *u = &r->units[best];
    lt__rec *R = &o->recs[u->rec];
    if (strategy_of(o, R)) {
        wait_on(r, LT_OPT_WAIT_OTHER, "%s %s: no strategy: %s", R->kernel, R->config_shape,
                lt_errmsg());
        return;
    }
    if (!R->seeded) {
        /* the incumbent anchors the strategy's cost scale: costs are relative
         * to the defaults, and the incumbent is the best known */
        R->model_cost = 1.0 / R->speedup;
        observe(o, R, &u->incumbent, &R->model_cost, 1);
        R->seeded = true;
    }
    lt_params p;
    int got = lt_strategy_propose(R->strat, &p, 1);
    if (got <= 0) {
        set_converged(o, R, u->recent, "space exhausted");
        wait_on(r, LT_OPT_WAIT_OTHER, "%s %s: space exhausted", R->kernel, R->config_shape);
        return;
    }
    start_trial(o, ri, best, &p, P, u->prefill ? 1 : W);
}

/* How long a prefill trial's phase may wait for its prefill step: the
 * run's next prompt. */
#define LT__PREFILL_PHASE_NS 10000000000ull

static bool trial_complete(const lt__run *r) {
    for (int i = 0; i < r->pairs; i++)
        if (r->a_steps[i] < r->phase_tokens - 0.01 || r->b_steps[i] < r->phase_tokens - 0.01)
            return false;
    return true;
}

/* Two complete pairs that both say the candidate is much slower: stop the
 * trial now (the run goes back to the incumbent), it has cost enough. */
#define ABORT_RATIO 1.25
static bool clearly_slower(const lt__run *r) {
    int done = 0, slow = 0;
    for (int i = 0; i < r->pairs; i++) {
        if (r->a_steps[i] < r->phase_tokens - 0.01 || r->b_steps[i] < r->phase_tokens - 0.01)
            continue;
        done++;
        if (r->b_ns[i] / r->b_steps[i] > ABORT_RATIO * (r->a_ns[i] / r->a_steps[i])) slow++;
    }
    return done >= 2 && slow == done;
}

static void abort_trial(lt_optimizer *o, int ri) {
    lt__run *r = &o->runs[ri];
    lt__unit *u = &r->units[r->t_unit];
    lt__rec *R = &o->recs[u->rec];
    send_params(o, r, R, &u->incumbent, "abort", 0, 0); /* ends the trial on the run */
    lt__opt_decide(o, ri, "stopped early: much slower");
}

void lt__opt_pair_measured(lt_optimizer *o, int ri) {
    lt__run *r = &o->runs[ri];
    if (trial_complete(r)) lt__opt_decide(o, ri, "complete");
    else if (clearly_slower(r)) abort_trial(o, ri);
}

void lt__opt_timers(lt_optimizer *o) {
    uint64_t now = lt_now_ns();
    int live = 0;
    for (int i = 0; i < o->n_runs; i++) {
        lt__run *r = &o->runs[i];
        if (!r->ended && lt_wall_ns() <= r->last_ns + (uint64_t)o->o.stale_ms * 1000000ull) live++;
        if (!r->trial) continue;
        /* a trial takes 2 x pairs x phase steps; allow for slow steps and the
         * pipeline, and a prefill phase for the run's next prompt */
        const uint64_t per_step = r->units[r->t_unit].prefill ? LT__PREFILL_PHASE_NS
                                                              : 200000000ull;
        uint64_t limit = 10000000000ull + (uint64_t)r->pairs * (uint64_t)r->phase_tokens *
                                              per_step;
        if (now - r->t_started > limit) lt__opt_decide(o, i, "timed out");
    }
    o->st.runs_live = live;
}
