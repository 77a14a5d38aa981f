/* looptune runtime: the run side of the closed loop. A running model
 * listens on the control topic for messages addressed to it, validates each
 * against its tuning context (the one owner of every value in force:
 * kernels' parameters by shape key, the looped executor's, each regime's
 * thread count) and applies it at a token boundary: either a new incumbent,
 * or a trial that alternates incumbent and candidate phases (A B, B A, ...)
 * by itself, tags its telemetry windows with the phase, and returns to the
 * incumbent on its own (so a lost optimizer never leaves a candidate on). */
#ifndef LOOPTUNE_RUNTIME_H
#define LOOPTUNE_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "looptune/kafka.h"
#include "looptune/model.h"
#include "looptune/telemetry.h"
#include "looptune/tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the run side ------------------------------------------------------------------ */

/* One validated control: the keys of the tuning context it changes and the
 * values. */
typedef struct {
    int n_keys;
    int *keys;           /* [n_keys] indices of lt_tuning_key (malloc'd) */
    lt_params params;
    char candidate_id[64];
    uint32_t trial_pairs, phase_tokens;
    char name[32];           /* a kernel, "looped" or "threads" */
    char shape[LT_KEY_MAX];  /* the key named ("" = every key of name) */
} lt_control_cmd;

/* Checks a control message against a runtime's tuning context and this
 * run's id: addressed to run_id (or to every run: ""), no node label (values
 * go by key), a name the context knows (a kernel with parameters, "looped",
 * "threads"), a key of that name this runtime has (shape "": every key of
 * it), every parameter of the name's space exactly once, values the context
 * takes on every key (its one validation: the space, then every call they
 * would reach; tried and taken back), and a sane trial (pairs <= 64,
 * phase_tokens 1..4096). LT_ENOTFOUND when addressed to another run (not an
 * error to log loudly), LT_ECONFIG naming the problem otherwise. On success
 * out->keys is malloc'd (free with lt_control_cmd_free). On the stepping
 * thread only, between steps. */
int lt_control_check(lt_tuning *t, const char *run_id, const Looptune__Control *c,
                     lt_control_cmd *out);
void lt_control_cmd_free(lt_control_cmd *c);

typedef struct lt_online lt_online;

typedef struct {
    lt_kafka_conn conn;
    const char *topic;    /* the control topic */
    const char *run_id;   /* this run's id (its telemetry's) */
    lt_tuning *tuning;    /* the runtime's values the controls change (lt_llama_tuning) */
    lt_tel *tel;          /* its telemetry, for tagging windows; may be NULL (tests) */
    FILE *log;            /* one line per applied or rejected control; NULL: stderr */
    const char *who;      /* what starts those lines; NULL: "looptune run" */
    /* refuse a control that changes a parameter whose points give different bits
     * (lt_optimizer_param_changes_bits) from its value in force: a serving run's
     * streams stay those of the values it started with */
    bool hold_bits;
} lt_online_opts;

typedef struct {
    int64_t received;  /* control records read */
    int64_t ignored;   /* addressed to other runs */
    int64_t rejected;  /* malformed or invalid: logged, nothing changed */
    int64_t applied;   /* incumbent changes (a control that changes nothing is not one) */
    int64_t trials;    /* trials started */
    int64_t trial_tokens, candidate_tokens; /* decode steps inside trials / on candidates */
    int64_t trial_prefills;                 /* prefill steps inside trials of a prefill key */
} lt_online_stats;

/* Starts listening (from the control topic's end, taken now: call before the
 * run's start record is sent, so nothing addressed to it can be missed). */
int lt_online_open(lt_online **out, const lt_online_opts *o);
/* At a token boundary, on the stepping thread, after lt_tel_step_end: applies
 * what arrived and advances a trial's phases. Cheap when nothing arrived (one
 * atomic load). */
void lt_online_step(lt_online *o);
/* After a prefill step (and its lt_tel_prefill), on the stepping thread: a
 * trial of a prefill step's value (the prefill thread count) has a phase
 * per prefill step, so it advances here, not at token boundaries. */
void lt_online_prefill(lt_online *o);
/* Hands a control in directly (as if read from the topic); for tests. */
void lt_online_submit(lt_online *o, const void *value, size_t len);
void lt_online_stats_get(lt_online *o, lt_online_stats *out);
/* The telemetry to tag (when it is opened after the listener). */
void lt_online_attach_tel(lt_online *o, lt_tel *tel);
/* What the step that just ran was (call before lt_online_step): 0 outside
 * any trial, 1 an incumbent phase of a trial, 2 a candidate phase. */
int lt_online_step_kind(const lt_online *o);
/* Per name and key whose values changed since open: "before -> now".
 * Returns the number of lines written. */
int lt_online_report(lt_online *o, FILE *f);
/* Stops listening and ends a trial in progress on the incumbent; the
 * parameters stay as tuned. Nothing more is applied afterwards. */
void lt_online_stop(lt_online *o);
/* After lt_online_stop, between steps: puts the values in force at open
 * (initial true) or the tuned ones back, to measure one against the other. */
void lt_online_use_initial(lt_online *o, bool initial);
/* Stops (if not yet) and frees. NULL is a no-op. */
void lt_online_close(lt_online *o);

/* ---- a tuned run --------------------------------------------------------------------- */

/* A model's runtime with the closed loop around it: warm start from a
 * config store, the run's telemetry, and online tuning (controls and trials
 * at token boundaries; on the embedded broker an optimizer in this process
 * serves it). What a program that links the library needs for both; the
 * command line only parses flags into these options. */
typedef enum { LT_RUN_TEL_OFF = 0, LT_RUN_TEL_FILE, LT_RUN_TEL_KAFKA } lt_run_telemetry;

typedef struct {
    /* warm start: every entry of store for host_class (NULL: this host's,
     * lt_host_detect) becomes a value in force at open (NULL store: none) */
    const lt_store *store;
    const char *host_class;
    lt_run_telemetry telemetry;
    const char *tel_path;     /* LT_RUN_TEL_FILE: length-delimited Envelopes */
    lt_kafka_conn conn;       /* LT_RUN_TEL_KAFKA: brokers NULL = the embedded broker */
    const char *topic_prefix; /* NULL: "looptune." */
    lt_tel_opts tel;          /* windows, drain, counters, detail; the rest is set here */
    const char *model_name;   /* for the run start */
    /* online tuning (needs LT_RUN_TEL_KAFKA) */
    bool tune_online;
    double explore_share;     /* the in-process optimizer's; 0: its default */
    FILE *log;                /* the run side's lines; NULL: stderr */
    FILE *optimizer_log;      /* the in-process optimizer's decisions; NULL: stderr */
    /* > 0: a run of batched decode steps (serving, lt_run_batch_begin/_end)
     * instead of lt_run_generate's: it observes the batch program of this
     * many rows (2 .. the runtime's max batch), its run start lists the
     * batch regime's thread count, its step windows are of the batch key */
    int64_t batch_rows;
} lt_run_opts;

typedef struct lt_run lt_run;

/* Warm-starts l from o->store, brings l's programs up to date, then opens
 * the telemetry and online tuning o asks for (l and pool must outlive the
 * run; the store need not). Errors name the problem. */
int lt_run_open(lt_run **out, lt_llama *l, lt_pool *pool, const lt_run_opts *o);
/* lt_generate (same arguments) with the run's token boundary: the
 * telemetry's step end, then controls and trials, then cb (may be NULL).
 * Several generations may follow each other; telemetry counts their decode
 * steps. */
int lt_run_generate(lt_run *r, lt_sampler *s, const int32_t *prompt, int64_t n_prompt,
                    const lt_gen_opts *go, lt_token_cb cb, void *user, lt_gen_stats *stats);

/* A run with batch_rows: around every batched decode step of n_rows rows
 * (lt_llama_eval_batch), on the stepping thread. Steps of batch_rows rows
 * are observed (the telemetry's step end, then controls and trials, which
 * advance by these steps alone); the others run with the values in force,
 * unmeasured. Call lt_run_batch_end after every step of the caller's loop
 * (n_rows 0: no batched eval in it): it also keeps the observed program in
 * the runtime's program cache. */
void lt_run_batch_begin(lt_run *r, int64_t n_rows);
void lt_run_batch_end(lt_run *r, int64_t n_rows, int64_t pos);

/* What the run did and holds (pointers live until lt_run_close). */
typedef struct {
    int warm_applied, warm_refused; /* store entries made values in force / refused */
    const char *run_id;             /* the telemetry's */
    const char *telemetry_where;    /* "kafka topic ... at ..." or "file ..."; NULL: off */
    const char *brokers;            /* Kafka: the bootstrap servers (the embedded broker's) */
    const char *control_topic;      /* online tuning: the topic followed */
    bool embedded;                  /* on the embedded broker */
    int last_step_kind;             /* the decode step just ended: 0 outside a trial, 1 an
                                       incumbent phase, 2 a candidate phase */
    lt_tel *tel;                    /* NULL when off */
    lt_online *online;              /* NULL without online tuning */
    struct lt_optimizer *optimizer; /* the in-process one, or NULL */
} lt_run_state;
void lt_run_info(const lt_run *r, lt_run_state *out);
/* Ends the telemetry's last window, stops the in-process optimizer and the
 * control listener (a trial in progress ends on the incumbent). The values
 * stay in force; evals afterwards are not observed. Idempotent. */
void lt_run_end(lt_run *r);
/* Ends (if not yet) and frees; *tel_stats (may be NULL) gets the
 * telemetry's final figures. NULL is a no-op. */
void lt_run_close_stats(lt_run *r, lt_tel_stats *tel_stats);
void lt_run_close(lt_run *r);

#ifdef __cplusplus
}
#endif
#endif
