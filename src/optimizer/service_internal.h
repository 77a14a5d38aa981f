/* The optimizer service's state, shared by its decisions (runs.c: records
 * and runs; windows.c: telemetry windows; trials.c: trials and verdicts) and
 * its plumbing (service.c: the consumer group, the producers, the restart
 * path). service.c calls into the decision files, never the other way: the
 * decisions leave through the emitters it installs (lt__opt_emit). */
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

/* One (kernel, shape) of one run: its nodes' aggregate; or one whole-step
 * tunable of the run (step: the looped executor's parameters or a regime's
 * thread count, no node), measured by the "step" windows of its key. A
 * prefill step's tunable (prefill) has a phase per prefill step and costs
 * per prompt token; the decode windows during its trials ran the
 * incumbents and count as such. */
typedef struct {
    int rec;
    bool step, prefill;
    int n_nodes;             /* 0 for a whole-step unit */
    lt_params incumbent;
    double ns, steps;        /* untagged windows: sum of total_ns, steps per node (step: of the steps) */
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
    uint64_t prefills, cand_prefills; /* prefill steps, and those on a candidate */
    double time_ns, loss_ns;
    int trials_charged;   /* trials whose cost is in loss_ns */
    int64_t windows_seen; /* window indexes seen for this run (the first may be partial) */
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

/* Where the decisions go: the Kafka producers when the optimizer has Kafka,
 * else the user's hooks (lt_optimizer_opts.on_*). A NULL member drops what
 * it would carry. The pointed-to records are the caller's: an emitter copies
 * what it keeps. */
typedef struct {
    void (*control)(void *user, const Looptune__Control *c); /* to the run it names */
    void (*config)(void *user, const lt_config_entry *e);    /* a learned configuration */
    void (*trial)(void *user, const Looptune__Trial *t);     /* an observation for the log */
    void *user;
} lt__opt_emit;

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
    lt__opt_emit emit;
};

/* runs.c */
/* One decoded envelope: a run's start or end, or (unless starts_only: the
 * restart's rescan) a window. */
void lt__opt_handle_env(lt_optimizer *o, const Looptune__Envelope *env, bool starts_only);
/* A stored configuration as a record's best known; the record's index, or -1
 * for an entry of no tunable kernel. */
int lt__opt_rec_from_entry(lt_optimizer *o, const lt_config_entry *e);
/* The record of (kernel, config shape, host class): its index, or -1. */
int lt__opt_find_rec(lt_optimizer *o, const char *kernel, const char *config_shape,
                     const char *host);
/* Adds that record (its space fitted to the host's ISA and the call; the
 * thread count's to pool_threads, or with 0 to the pool its key names); -1
 * when the kernel has nothing to tune, or out of memory. Invalidates
 * pointers into o->recs. */
int lt__opt_add_rec(lt_optimizer *o, const char *kernel, const char *config_shape,
                    const char *host, int pool_threads);
/* "looped" and "threads": tuned on whole steps, not per node. */
bool lt__opt_step_kernel(const char *kernel);
/* The run's index in o->runs, or -1 when its start was never seen. */
int lt__opt_find_run(lt_optimizer *o, const char *run_id);
/* Frees every run and record (not o itself). */
void lt__opt_free_state(lt_optimizer *o);

/* windows.c */
/* Folds one KernelWindow into its run (t_ns: the envelope's writer clock). */
void lt__opt_window(lt_optimizer *o, const Looptune__KernelWindow *w, uint64_t t_ns);

/* trials.c */
/* Starts the next trial of run ri if its budget allows; else notes why not. */
void lt__opt_maybe_start(lt_optimizer *o, int ri);
/* A tagged window of the trial's unit came in: decide when its pairs are
 * complete, or stop it when it is clearly slower. */
void lt__opt_pair_measured(lt_optimizer *o, int ri);
/* The verdict on run ri's trial in flight (how: why now, for the log). */
void lt__opt_decide(lt_optimizer *o, int ri, const char *how);
/* Frees the trial's record for other runs (no verdict). */
void lt__opt_end_trial(lt_optimizer *o, lt__run *r);
/* Trial time-outs and the count of live runs. */
void lt__opt_timers(lt_optimizer *o);

#endif
