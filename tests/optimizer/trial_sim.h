/* The run side of the control protocol as the optimizer's tests simulate
 * it, the way `looptune run --tune online` follows it: controls apply at the
 * next step boundary, in order, each ending a trial in progress; a trial
 * alternates the incumbent (A) and the candidate (B) in phases of ptok
 * steps, pairs A B, B A, A B, ..., and ends on the incumbent by itself. The
 * test owns the values: cur[unit] what runs, inc[unit] the incumbents. */
#ifndef LT_TEST_TRIAL_SIM_H
#define LT_TEST_TRIAL_SIM_H

#include <stdbool.h>
#include <stdio.h>

#include "looptune/optimizer.h"

/* A control as received: what it changes (the test's unit index) and how. */
typedef struct {
    uint32_t pairs, ptok; /* 0 pairs: a new incumbent */
    lt_params params;
    char cand[64];
    int unit;
    bool prefill; /* of a prefill step's value: phases of prefill steps */
} trial_sim_control;

typedef struct {
    bool trial, prefill;
    int unit, phase, phase_steps, pairs, ptok;
    lt_params cand;
    char cand_id[64];
} trial_sim;

/* Phase k of a trial runs the candidate: A B, B A, A B, ... */
static inline bool trial_sim_on_cand(int k) {
    return (k / 2) % 2 == 0 ? k % 2 == 1 : k % 2 == 0;
}

static inline void trial_sim_set_phase(trial_sim *t, lt_params *cur, const lt_params *inc) {
    cur[t->unit] = trial_sim_on_cand(t->phase) ? t->cand : inc[t->unit];
    t->phase_steps = 0;
}

/* After a decode step of a trial: true when the step ended its phase (the
 * caller closes the window, then calls trial_sim_next_phase). */
static inline bool trial_sim_phase_done(trial_sim *t) { return ++t->phase_steps >= t->ptok; }

static inline void trial_sim_next_phase(trial_sim *t, lt_params *cur, const lt_params *inc) {
    if (++t->phase >= 2 * t->pairs) {
        t->trial = false;
        cur[t->unit] = inc[t->unit];
    } else {
        trial_sim_set_phase(t, cur, inc);
    }
}

/* Applies c at a step boundary (the caller closed the window in progress). */
static inline void trial_sim_apply(trial_sim *t, const trial_sim_control *c, lt_params *cur,
                                   lt_params *inc) {
    if (t->trial) cur[t->unit] = inc[t->unit];
    t->trial = false;
    int u = c->unit;
    if (c->pairs == 0) {
        inc[u] = cur[u] = c->params;
        return;
    }
    t->trial = true;
    t->prefill = c->prefill;
    t->unit = u;
    t->cand = c->params;
    snprintf(t->cand_id, sizeof t->cand_id, "%s", c->cand);
    t->pairs = (int)c->pairs;
    t->ptok = (int)c->ptok;
    t->phase = 0;
    trial_sim_set_phase(t, cur, inc);
}

/* The optimizer decides, and what it sent applies in order. */
static inline void trial_sim_deliver(trial_sim *t, lt_optimizer *o,
                                     void (*close_window)(lt_optimizer *, void *), void *user,
                                     trial_sim_control *pend, int *n_pend, lt_params *cur,
                                     lt_params *inc) {
    lt_optimizer_poll(o, 0);
    for (int k = 0; k < *n_pend; k++) {
        close_window(o, user);
        trial_sim_apply(t, &pend[k], cur, inc);
    }
    *n_pend = 0;
}

/* The end of a decode step that ran win_steps steps of the window in
 * progress: a phase that ended (or, outside trials of decode values, every
 * 8 steps) closes the window; the optimizer then decides; each control it
 * sent (pend, as its on_control hook queued them) applies after closing
 * the window it ends. close_window(user) emits the window. */
static inline void trial_sim_boundary(trial_sim *t, int win_steps, lt_optimizer *o,
                                      void (*close_window)(lt_optimizer *, void *), void *user,
                                      trial_sim_control *pend, int *n_pend, lt_params *cur,
                                      lt_params *inc) {
    if (t->trial && !t->prefill) {
        if (trial_sim_phase_done(t)) {
            close_window(o, user);
            trial_sim_next_phase(t, cur, inc);
        }
    } else if (win_steps >= 8) {
        close_window(o, user);
    }
    trial_sim_deliver(t, o, close_window, user, pend, n_pend, cur, inc);
}

/* A prefill step ran (the caller closed the decode window before it and
 * emitted the prefill's own window): a prefill trial's phase ends with it;
 * then the optimizer's controls apply, as at a decode step's end. */
static inline void trial_sim_prefill(trial_sim *t, lt_optimizer *o,
                                     void (*close_window)(lt_optimizer *, void *), void *user,
                                     trial_sim_control *pend, int *n_pend, lt_params *cur,
                                     lt_params *inc) {
    if (t->trial && t->prefill && trial_sim_phase_done(t)) trial_sim_next_phase(t, cur, inc);
    trial_sim_deliver(t, o, close_window, user, pend, n_pend, cur, inc);
}

#endif
