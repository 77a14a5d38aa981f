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

#ifdef __cplusplus
}
#endif
#endif
