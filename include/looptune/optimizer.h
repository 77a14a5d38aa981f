/* looptune optimizer: the closed loop. Two sides of the control topic:
 *
 *  - the run side (lt_online): a running program listens on the control
 *    topic for messages addressed to it, validates each against its own
 *    program (kernel, shape, parameter space, the kernel's constraints on the
 *    real call) and applies it at a token boundary: either a new incumbent,
 *    or a trial that alternates incumbent and candidate phases (A B, B A, ...)
 *    by itself, tags its telemetry windows with the phase, and returns to the
 *    incumbent on its own (so a lost optimizer never leaves a candidate on);
 *
 *  - the service (lt_optimizer): consumes the telemetry topic in a consumer
 *    group, keeps per-run and per-(kernel, shape) statistics, ranks kernels by
 *    time share times distance to the host's roofline, proposes candidates
 *    through a search strategy, decides from the tagged windows with the
 *    paired comparison whether to keep (a control making it the incumbent,
 *    a Config on the compacted configs topic) or let it roll back, and
 *    bounds exploration so throughput while tuning stays near the incumbent's.
 */
#ifndef LOOPTUNE_OPTIMIZER_H
#define LOOPTUNE_OPTIMIZER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "looptune/kafka.h"
#include "looptune/program.h"
#include "looptune/telemetry.h"
#include "looptune/tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the run side ------------------------------------------------------------------ */

/* One validated control: the nodes it changes and the parameters. */
typedef struct {
    int n_nodes;
    int *nodes;          /* [n_nodes] node indices of the program (malloc'd) */
    lt_params params;
    char candidate_id[64];
    uint32_t trial_pairs, phase_tokens;
    char kernel[32], shape[96];
} lt_control_cmd;

/* Checks a control message against a finalized program and this run's id:
 * addressed to run_id (or to every run: ""), a known kernel, nodes of that
 * kernel with that shape key (lt_call_key, as telemetry and the config store
 * name it: "q8_0:2048x768:decode:ia=1,0,0"; "" = any) and that node label
 * (if given), every parameter of the kernel's space exactly once with an
 * allowed value, the
 * kernel's constraints on every matched call, and a sane trial (pairs <= 64,
 * phase_tokens 1..4096). LT_ENOTFOUND when addressed to another run (not an
 * error to log loudly), LT_ECONFIG naming the problem otherwise. On success
 * out->nodes is malloc'd (free with lt_control_cmd_free). */
int lt_control_check(const lt_program *p, const char *run_id, const Looptune__Control *c,
                     lt_control_cmd *out);
void lt_control_cmd_free(lt_control_cmd *c);

typedef struct lt_online lt_online;

typedef struct {
    lt_kafka_conn conn;
    const char *topic;    /* the control topic */
    const char *run_id;   /* this run's id (its telemetry's) */
    lt_program *program;  /* the decode program the controls change (finalized) */
    lt_tel *tel;          /* its telemetry, for tagging windows; may be NULL (tests) */
    FILE *log;            /* one line per applied or rejected control; NULL: stderr */
} lt_online_opts;

typedef struct {
    int64_t received;  /* control records read */
    int64_t ignored;   /* addressed to other runs */
    int64_t rejected;  /* malformed or invalid: logged, nothing changed */
    int64_t applied;   /* incumbent changes (a control that changes nothing is not one) */
    int64_t trials;    /* trials started */
    int64_t trial_tokens, candidate_tokens; /* decode steps inside trials / on candidates */
} lt_online_stats;

/* Starts listening (from the control topic's end, taken now: call before the
 * run's start record is sent, so nothing addressed to it can be missed). */
int lt_online_open(lt_online **out, const lt_online_opts *o);
/* At a token boundary, on the stepping thread, after lt_tel_step_end: applies
 * what arrived and advances a trial's phases. Cheap when nothing arrived (one
 * atomic load). */
void lt_online_step(lt_online *o);
/* Hands a control in directly (as if read from the topic); for tests. */
void lt_online_submit(lt_online *o, const void *value, size_t len);
void lt_online_stats_get(lt_online *o, lt_online_stats *out);
/* The telemetry to tag (when it is opened after the listener). */
void lt_online_attach_tel(lt_online *o, lt_tel *tel);
/* What the step that just ran was (call before lt_online_step): 0 outside
 * any trial, 1 an incumbent phase of a trial, 2 a candidate phase. */
int lt_online_step_kind(const lt_online *o);
/* Per kernel and shape whose parameters changed since open: "before -> now".
 * Returns the number of lines written. */
int lt_online_report(lt_online *o, FILE *f);
/* Stops listening and ends a trial in progress on the incumbent; the
 * parameters stay as tuned. Nothing more is applied afterwards. */
void lt_online_stop(lt_online *o);
/* After lt_online_stop, between steps: puts the parameters the program had
 * at open (initial true) or the tuned ones back on every node, to measure
 * one against the other. */
void lt_online_use_initial(lt_online *o, bool initial);
/* Stops (if not yet) and frees. NULL is a no-op. */
void lt_online_close(lt_online *o);

/* ---- the service ------------------------------------------------------------------- */

typedef struct {
    lt_kafka_conn conn;
    const char *prefix;       /* topic prefix; NULL: "looptune." */
    const char *group;        /* consumer group; NULL: "looptune-optimizer" */
    lt_strategy_kind strategy;
    uint64_t seed;
    double explore_share;     /* share of decode steps that may run candidates; 0: 0.25 */
    double min_throughput;    /* throughput while tuning >= this x incumbent's; 0: 0.95 */
    double stop_gain;         /* stop a kernel when no candidate is predicted better by more; 0: 0.02 */
    double margin;            /* a candidate is kept when faster by more than this (95% CI); 0: 0.01 */
    int trial_pairs;          /* A/B pairs per trial; 0: 6 */
    int phase_tokens;         /* decode steps per phase; 0: 4, or more so a phase lasts 20 ms */
    int max_trials;           /* trials per (kernel, shape, host class); 0: 40 */
    int patience;             /* trials without a kept candidate before stopping; 0: 12 */
    double drift;             /* resume a stopped kernel when its speed moves by more; 0: 0.15 */
    int64_t stale_ms;         /* a run silent this long gets no trials; 0: 10000 */
    /* Follow the telemetry from its end at open, without a consumer group (no
     * join delay, no offsets, no restart state): for an optimizer inside the
     * run it serves, opened before that run's start record. */
    bool no_group;
    FILE *log;                /* one line per decision; NULL: stderr */
    /* Without Kafka (conn.brokers NULL and no properties): records come in
     * through lt_optimizer_handle and decisions go out through these (tests). */
    void (*on_control)(void *user, const Looptune__Control *c);
    void (*on_config)(void *user, const lt_config_entry *e);
    void (*on_trial)(void *user, const Looptune__Trial *t);
    void *hook_user;
} lt_optimizer_opts;

typedef struct {
    int64_t records, windows, bad_records;
    int64_t runs, runs_live;
    int64_t trials, kept, rolled_back, aborted, timed_out;
    int64_t extended; /* trials measured twice (promising, inconclusive at first) */
    int64_t controls_sent, configs_written;
    int64_t units, units_converged;
} lt_optimizer_stats;

typedef struct lt_optimizer lt_optimizer;

/* Connects, loads the configs topic (what earlier optimizers learned: best
 * configurations, kernels already finished), rescans the telemetry topic for
 * the starts of runs still going, and joins the consumer group. */
int lt_optimizer_open(lt_optimizer **out, const lt_optimizer_opts *o);
/* Processes records for up to timeout_ms (also timers: trial time-outs,
 * offset commits). Returns LT_OK or an error the caller should see. */
int lt_optimizer_poll(lt_optimizer *o, int timeout_ms);
/* Handles one telemetry record directly (the value of a Kafka record); for
 * tests and the in-process optimizer. */
void lt_optimizer_handle(lt_optimizer *o, const void *value, size_t len);
/* One observation from the trials log (study "tune:kernel|shape|host",
 * parameters, cost relative to the defaults): the strategy of that kernel,
 * shape and host class learns it, whichever optimizer measured it. LT_ENOTFOUND
 * for another kind of study; LT_EFORMAT naming the problem for a bad one. */
int lt_optimizer_restore_trial(lt_optimizer *o, const Looptune__Trial *t);
void lt_optimizer_stats_get(lt_optimizer *o, lt_optimizer_stats *out);
/* Why the optimizer started no trial on a run when it last looked. */
typedef enum {
    LT_OPT_WAIT_NONE = 0,   /* it has not looked yet, or a trial was started */
    LT_OPT_WAIT_WINDOWS,    /* fewer telemetry windows than a first trial waits for */
    LT_OPT_WAIT_BUDGET,     /* too few decode steps for a trial within --explore-share */
    LT_OPT_WAIT_THROUGHPUT, /* the trials so far cost what --min-throughput allows */
    LT_OPT_WAIT_STALE,      /* the run's telemetry stopped */
    LT_OPT_WAIT_DONE,       /* nothing left to explore (or no tunable kernel) */
    LT_OPT_WAIT_OTHER,      /* kernels busy on other runs, a strategy error, ... */
} lt_opt_wait;

/* What the optimizer knows of one run, for the run's own summary. */
typedef struct {
    int64_t windows;    /* telemetry windows of the run it has seen (the first may be partial) */
    int64_t steps;      /* decode steps in them */
    int64_t trials;     /* trials it started on the run */
    bool in_trial;      /* one is in flight */
    lt_opt_wait wait;   /* why it started none when it last looked */
    char waiting[256];  /* ... in words, with the figures ("" with LT_OPT_WAIT_NONE) */
} lt_optimizer_run_info;

/* Fills *out for run_id. LT_ENOTFOUND when the run's start never reached
 * the optimizer. Not concurrently with lt_optimizer_poll or _handle. */
int lt_optimizer_run_info_get(lt_optimizer *o, const char *run_id, lt_optimizer_run_info *out);
/* Writes a table of what was learned (per kernel and shape: default and
 * incumbent cost, speed-up, trials, state) to f. */
void lt_optimizer_report(lt_optimizer *o, FILE *f);
/* Commits offsets, leaves the group, frees. NULL is a no-op. */
void lt_optimizer_close(lt_optimizer *o);

/* ---- ranking ------------------------------------------------------------------------ */

/* Where a kernel stands on the host's roofline: achieved / attainable, where
 * attainable = min(peak_gflops, intensity * bw_gb_s). 0 when unknown. Can
 * exceed 1 for cache-resident working sets (the roofline is DRAM's). */
double lt_roofline_fraction(double gb_s, double gflops, double bw_gb_s, double peak_gflops);
/* The tuning priority: time share x distance to the roofline, the distance
 * floored at 0.1 so cache-resident kernels (beyond DRAM's roofline) still get
 * their turn, last. */
double lt_tuning_priority(double time_share, double roofline_fraction);

#ifdef __cplusplus
}
#endif
#endif
