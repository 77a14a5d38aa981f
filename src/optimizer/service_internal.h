/* The optimizer service's state, shared by its decision logic (decide.c)
 * and its Kafka plumbing (service.c). */
#ifndef LT_OPTIMIZER_SERVICE_INTERNAL_H
#define LT_OPTIMIZER_SERVICE_INTERNAL_H

#include "optimizer/optimizer_internal.h"

#define LT__MAX_PAIRS 64

/* What is learned per (kernel, shape, host class), across runs: the search,
 * the best configuration, whether exploring it is finished. */
typedef struct {
    char kernel[32], shape[96], config_shape[96], host[96];
    lt_space space;
    lt_strategy *strat;
    lt_params defaults;    /* the kernel's defaults on this call */
    lt_params best;        /* the best known: what runs should run */
    bool have_best;
    double speedup;        /* best over defaults (product of kept ratios) */
    double best_cost;      /* ns per decode step of the best, when measured */
    double model_cost;     /* the strategy's cost scale for the incumbent */
    bool seeded;           /* the incumbent is in the strategy */
    int64_t n_observed;    /* observations written to (or read from) the trials log */
    int trials, since_kept;
    bool converged;
    double conv_cost;      /* per-step cost when exploring stopped: drift reference */
    int drift_windows;
    int busy_run;          /* run index with a trial of this record in flight, -1 none */
} lt__rec;

/* One (kernel, shape) of one run: its nodes' aggregate. */
typedef struct {
    int rec;
    int n_nodes;
    lt_params incumbent;
    double ns, steps;        /* untagged windows: sum of total_ns, steps per node */
    double bytes, flops;     /* untagged: sum of bytes x count, flops x count */
    double recent;           /* EWMA of the untagged per-step cost */
    int windows;             /* untagged windows seen (summed over nodes / n_nodes) */
    double win_ns, win_steps; /* the window in progress (one per window index) */
    uint64_t win_index;
} lt__unit;

typedef struct {
    char run_id[64], host_class[96];
    double bw, peak;
    lt__unit *units;
    int n_units;
    char (*labels)[64]; /* [n_nodes] */
    int *node_unit;     /* [n_nodes] */
    int n_nodes;
    uint64_t steps, cand_steps;
    double time_ns, loss_ns;
    int trials_charged;
    int64_t windows_seen; /* window indexes seen for this run (the first may be partial) */ /* trials whose cost is in loss_ns */
    /* the whole step's time outside trials (all nodes), for what a trial costs */
    double step_recent;
    uint64_t win_index;
    double win_ns, win_steps;
    bool win_tagged;
    double trial_ns, trial_steps; /* all nodes, during the trial in flight */
    uint64_t last_ns; /* writer's clock of the latest record (CLOCK_REALTIME ns) */
    bool ended;
    /* why maybe_start started no trial when it last looked, for the run's summary */
    lt_opt_wait wait;
    char waiting[256];
    int64_t started; /* trials started on this run */
    /* the trial in flight */
    bool trial;
    int t_unit;
    char cand[64];
    lt_params cand_params;
    uint64_t t_started; /* lt_now_ns */
    int pairs, phase_tokens;
    bool saw_tagged;
    double a_ns[LT__MAX_PAIRS], a_steps[LT__MAX_PAIRS];
    double b_ns[LT__MAX_PAIRS], b_steps[LT__MAX_PAIRS];
    bool contended[LT__MAX_PAIRS];
    /* A promising but inconclusive trial is measured once more: its pairs
     * wait here and join the second trial's in one comparison. */
    bool extend, extending;  /* a second trial is due / the trial in flight is one */
    int ext_unit;
    lt_params ext_params;
    int64_t ext_incumbent; /* space index of the incumbent the first look ran against */
    int n_prev;
    double prev_a[LT__MAX_PAIRS], prev_b[LT__MAX_PAIRS];
    bool prev_cont[LT__MAX_PAIRS];
} lt__run;

struct lt_optimizer {
    lt_optimizer_opts o;
    FILE *log;
    char prefix[64], group[128];
    char t_telemetry[160], t_control[160], t_configs[160], t_trials[160];
    lt_consumer *consumer;
    lt_follower *follower; /* no_group */
    lt_producer *control, *configs, *trials;
    lt__rec *recs;
    int n_recs, cap_recs;
    lt__run *runs;
    int n_runs, cap_runs;
    uint64_t next_cand;
    uint64_t last_commit_ns;
    bool dirty; /* records handled since the last commit */
    lt_optimizer_stats st;
    bool kafka; /* false: records through lt_optimizer_handle, decisions through the hooks */
};

/* decide.c */
void lt__opt_handle_env(lt_optimizer *o, const Looptune__Envelope *env, bool starts_only);
void lt__opt_timers(lt_optimizer *o);
int lt__opt_rec_from_entry(lt_optimizer *o, const lt_config_entry *e);
void lt__opt_free_state(lt_optimizer *o);

/* service.c */
void lt__opt_send_control(lt_optimizer *o, const Looptune__Control *c);
void lt__opt_send_config(lt_optimizer *o, const lt_config_entry *e);
void lt__opt_send_trial(lt_optimizer *o, const Looptune__Trial *t);

#endif
