/* looptune optimizer: the service side of the closed loop (the run side,
 * lt_online, is the runtime's: looptune/runtime.h).
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

/* Whether the points of kernel's parameter give a sequence different bits
 * (q8_0 matvec's activation modes: integer or float dot products;
 * attention's kv_block: the order of its sums). Every other point of every
 * kernel gives the same bits. A run of batched steps holds these at its
 * values in force, so a served stream never changes under a trial. */
bool lt_optimizer_param_changes_bits(const char *kernel, const char *param);

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
