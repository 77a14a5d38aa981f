/* looptune serve: stream inference. The batcher (continuous batching of
 * many sequences over one runtime's KV slots: sequences join and leave at
 * token boundaries, prompts prefilled in chunks between decode steps, a
 * sampler per sequence) and the Kafka worker that feeds it from the
 * requests topic and streams completions exactly once. */
#ifndef LOOPTUNE_SERVE_H
#define LOOPTUNE_SERVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "looptune/kafka.h"
#include "looptune/model.h"
#include "looptune/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the batcher ------------------------------------------------------------------ */

/* Why a sequence ended. The names are the Completion.finish_reason strings. */
typedef enum {
    LT_FINISH_NONE = 0,  /* still running */
    LT_FINISH_STOP,      /* an end-of-generation token or a stop string */
    LT_FINISH_LENGTH,    /* max_tokens generated, or the context is full */
    LT_FINISH_CANCELLED, /* lt_batcher_cancel with this reason */
    LT_FINISH_DEADLINE,  /* lt_batcher_cancel with this reason */
    LT_FINISH_ERROR,     /* an evaluation failed */
    LT_FINISH_COUNT
} lt_finish;
const char *lt_finish_name(lt_finish f); /* "stop", "length", ...; "" for NONE */

/* Called for each token a sequence generates: its index in the completion
 * (from 0), the id and its text (lt_detokenize after the previous token;
 * may end inside a UTF-8 character), valid during the call. */
typedef void (*lt_batcher_token_fn)(void *ctx, void *seq_user, int64_t index, int32_t token,
                                    const char *text, size_t len);
/* Called once when a sequence ends, after its last token; its slot is free
 * again when this returns. n_prompt / n_generated: usage. */
typedef void (*lt_batcher_finish_fn)(void *ctx, void *seq_user, lt_finish why,
                                     const char *error, int64_t n_prompt, int64_t n_generated);

typedef struct {
    int64_t prefill_chunk; /* prompt tokens evaluated per step at most; 0: 64. A step is
                              one prefill chunk (of the oldest sequence still in its
                              prompt), then one decode step of every generating sequence:
                              a joining prompt delays the others by one chunk per token */
    lt_batcher_token_fn on_token;
    lt_batcher_finish_fn on_finish;
    void *ctx;
    /* NULL: a decode step's rows are sampled one after the other on the calling thread;
     * else, when two or more of them draw at a temperature above 0, spread over this pool
     * (each row by its own sampler, so the tokens are the same). */
    lt_pool *pool;
    /* NULL, or a run of batched steps over the same runtime (lt_run_opts.batch_rows): every
     * decode step goes through lt_run_batch_begin/_end (its telemetry, controls, trials) */
    lt_run *run;
} lt_batcher_opts;

/* One request, as the batcher takes it (everything is copied). */
typedef struct {
    const int32_t *prompt; /* [n_prompt], ids < vocab, 1 <= n_prompt <= the context */
    int64_t n_prompt;
    lt_sampler_opts sampling;
    int64_t max_tokens;    /* >= 1; fewer when the context fills first (finish length) */
    bool ignore_eos;       /* else an end-of-generation token ends it (not reported) */
    const char *const *stop; /* [n_stop] texts ending the generation once it holds one */
    size_t n_stop;
    void *user;            /* passed back to the callbacks */
} lt_batcher_req;

typedef struct lt_batcher lt_batcher;
/* A batcher over l (which must outlive it): lt_llama_n_slots(l) sequences at
 * once, each in a slot of the context's length. One thread at a time. */
int lt_batcher_init(lt_batcher **out, lt_llama *l, const lt_batcher_opts *o);
void lt_batcher_free(lt_batcher *b); /* NULL is a no-op; running sequences end unreported */
/* Admits r into a free slot (*id gets its handle, for lt_batcher_cancel):
 * LT_ESTATE when every slot is taken, LT_ERANGE (with the reason) for a
 * prompt the context cannot hold, LT_EINVAL for bad ids or settings.
 * Its prompt is prefilled by the following steps. */
int lt_batcher_add(lt_batcher *b, const lt_batcher_req *r, int64_t *id);
/* Ends sequence id with why (LT_FINISH_CANCELLED or _DEADLINE) before the
 * next step: on_finish is called now. LT_ENOTFOUND if it has ended. */
int lt_batcher_cancel(lt_batcher *b, int64_t id, lt_finish why);
/* One step: a prefill chunk, then a decode step (see prefill_chunk); the
 * tokens and ends it makes are reported through the callbacks before it
 * returns. *n_tokens (may be NULL) gets the tokens evaluated. LT_OK also
 * when there was nothing to do. */
int lt_batcher_step(lt_batcher *b, int64_t *n_tokens);
int64_t lt_batcher_active(const lt_batcher *b); /* sequences in slots */
int64_t lt_batcher_slots(const lt_batcher *b);

/* ---- the worker: requests in, completions out, exactly once ------------------------- */

/* A model the worker serves, under the name requests give (Request.model). */
typedef struct {
    const char *name;
    lt_model *model; /* opened (weights resident or mapped) by the caller; outlives the run */
} lt_serve_model;

typedef struct {
    lt_kafka_conn conn;
    const char *prefix;        /* topic prefix; NULL: "looptune." */
    const char *group;         /* NULL: prefix + "serve" */
    const char *instance_id;   /* static membership and a stable transactional id; NULL: none */
    const char *worker_id;     /* in completions; NULL: instance_id, else host:pid */
    const lt_serve_model *models; /* [n_models] >= 1; "" in a request: the first */
    size_t n_models;
    int64_t max_batch;         /* sequences decoded at once per model (KV slots); 0: 4 */
    int64_t ctx;               /* context per sequence; 0: each model's default; more than a
                                  model's own context is cut to it */
    int threads;               /* the decode pool; 0: 1 */
    int64_t prefill_chunk;     /* lt_batcher_opts.prefill_chunk */
    int64_t queue;             /* requests admitted beyond the slots, waiting for one; 0: max_batch.
                                  With slots and queue full the worker stops fetching requests */
    int flush_ms;              /* least time between two commits (tokens stream in groups); 0: 20 */
    int32_t partitions;        /* of the topics created when missing; <= 0: 6 */
    int session_timeout_ms;    /* 0: 6000 */
    int transaction_timeout_ms; /* 0: 15000: how long a dead worker's open transaction holds
                                  back read_committed readers */
    bool at_least_once;        /* no transactions (the embedded broker): produce, flush, commit */
    lt_devbroker *devbroker;   /* the embedded broker, which has no CreateTopics: topics made
                                  there; NULL: created on conn's cluster */
    int test_step_delay_ms;    /* tests: sleep this long after every decode step */
    int test_commit_delay_ms;  /* tests: lt_stage_opts.test_commit_delay_ms (a kill then
                                  lands inside a transaction whose records are produced) */
    _Atomic bool *stop;        /* set (a signal handler may) to leave after the next commit */
    /* NULL, or the telemetry and online tuning of every model's batched decode steps:
     * lt_run_open over each model's runtime with these options, its name as model_name
     * and batch_rows = max_batch (needs max_batch >= 2); what online tuning changed is
     * written to its log at the end, a line per model; the stats are summed */
    const lt_run_opts *tune;
} lt_serve_opts;

typedef struct {
    int64_t requests;     /* requests read */
    int64_t completed;    /* final records committed, by reason below */
    int64_t by_reason[LT_FINISH_COUNT];
    int64_t tokens;       /* tokens generated (committed or not) */
    int64_t steps;        /* batcher steps */
    double step_s;        /* the decode thread's time inside them */
    int64_t dropped;      /* requests dropped unfinished: their partitions were revoked */
    int64_t rejected;     /* records of the requests topic that were no request or cancel */
    int64_t pauses;       /* times fetching stopped with slots and queue full */
    int64_t held_max;     /* most requests held at once (in slots or waiting for one) */
    double commit_ms_sum; /* wall time of the commits that landed, summed */
    /* with opts.tune: the steps of max_batch rows (those observed) and the online tuning */
    int64_t observed_steps;
    int warm_applied, warm_refused; /* config store entries made values in force / refused */
    lt_online_stats online;
    lt_tel_stats tel;
    lt_stage_stats stage;
} lt_serve_stats;

/* Creates <prefix>requests and <prefix>completions where they are missing
 * (partitions each; 0: 6), through dev when it is the embedded broker (which
 * has no CreateTopics), else the cluster's admin API. */
int lt_serve_ensure_topics(const lt_kafka_conn *conn, lt_devbroker *dev, const char *prefix,
                           int32_t partitions);

/* Serves until *o->stop: a consumer group on <prefix>requests; a decode
 * thread runs the batchers (one per model), a cancel thread hands it the
 * cancels at once, the calling thread does the rest of the Kafka work and
 * commits, in one transaction, every token produced since
 * the last commit (a Completion record per request) with the final records
 * and the offsets of the requests that finished (a partition's offset never
 * passes an unfinished request). Creates the topics when missing. */
int lt_serve_run(const lt_serve_opts *o, lt_serve_stats *st);

#ifdef __cplusplus
}
#endif
#endif
