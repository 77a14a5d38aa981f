/* looptune tune: parameter spaces and configuration validation, search
 * strategies (exhaustive, random, XGBoost model-guided), the paired A/B
 * comparison that holds on a noisy machine, node timing in isolation, and
 * the config store (best configuration per kernel, shape and host class) in
 * a file or on a log-compacted Kafka topic. */
#ifndef LOOPTUNE_TUNE_H
#define LOOPTUNE_TUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "looptune/core.h"
#include "looptune/kafka.h"
#include "looptune/kernels.h"
#include "looptune/model.h"
#include "looptune/program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- parameter spaces ---------------------------------------------------------- */

/* A space: the cross product of each parameter's allowed values. A point is
 * an lt_params holding values (not indices). */
typedef struct {
    char name[32]; /* kernel name, or "looped" for the looped executor */
    int n_params;
    lt_param_def params[LT_MAX_PARAMS];
} lt_space;

void lt_space_from_kernel(lt_space *s, const lt_kernel *k);
/* Takes isa's defaults (lt_param_default) and fixes every parameter that
 * does nothing on isa (lt_param_applies) at its default, a single value: a
 * search over the space spends no trial on it. */
void lt_space_fit_isa(lt_space *s, lt_isa isa);
/* The ISA level named in a host class ("model:avx2:2c", lt_host_detect). */
int lt_host_class_isa(const char *host_class, lt_isa *out);
/* Drops the values of a kernel's space that run as another value for this
 * call (attention's heads_per_task above the heads sharing a kv head; a
 * parameter that does nothing on the call's weight dtype, lt_param_acts_on,
 * or in its regime, lt_param_acts_in, stays at its default), so a search
 * spends no trial on a duplicate point. */
void lt_space_fit_call(lt_space *s, lt_kernel_id id, const lt_call *call);
/* The same for a call known by its kernel name and shape signature (its
 * dtype, regime and `:ia=` attributes); what the key does not name stays as
 * it is. */
void lt_space_fit_shape(lt_space *s, const char *kernel, const char *shape);
/* p, a point of the kernel's whole space, as the point of the fitted space s
 * that runs the same: a dropped value becomes the largest kept one below it
 * (heads_per_task 8 with groups of 4 runs as 4). */
void lt_space_fit_params(const lt_space *s, lt_params *p);
void lt_space_from_exec(lt_space *s); /* the looped executor's space */
/* The thread count of a model's steps, one per regime (store name
 * "threads"): parameter "threads", 0 (the whole pool, the default) or a
 * count below pool_threads (pool_threads <= 0: every count the space knows). */
void lt_space_threads(lt_space *s, int pool_threads);
/* Any space built by hand: copies defs (n <= LT_MAX_PARAMS). */
void lt_space_init(lt_space *s, const char *name, const lt_param_def *defs, int n);
int64_t lt_space_size(const lt_space *s);
/* Mixed-radix index (last parameter fastest) <-> point. */
void lt_space_point(const lt_space *s, int64_t index, lt_params *out);
/* Index of p, or -1 if some value is not an allowed value. */
int64_t lt_space_index(const lt_space *s, const lt_params *p);
void lt_space_default(const lt_space *s, lt_params *out);
/* LT_OK if p lies in the space, else LT_ECONFIG naming parameter and value. */
int lt_space_validate(const lt_space *s, const lt_params *p);
/* "name=value,name=value"; returns the length it wanted (snprintf-like). */
size_t lt_space_format(const lt_space *s, const lt_params *p, char *buf, size_t n);
/* Parses the format above: every parameter exactly once, values in the
 * space. LT_ECONFIG with detail otherwise. */
int lt_space_parse(const lt_space *s, const char *text, lt_params *out);

/* A kernel call's configuration, checked before it is ever applied: in the
 * space, then the kernel's shape and parameter constraints on the real call. */
int lt_config_check(lt_kernel_id id, const lt_call *call, const lt_params *p);

/* ---- shapes and hosts ------------------------------------------------------------ */

typedef struct {
    char host_class[96]; /* CPU model, ISA level and cores: "Intel-Xeon-8481C:avx512:2c" */
    int isa;             /* lt_isa */
    int cores;
    double l2_kib, l3_kib;
    double bw_gb_s;      /* measured read bandwidth, 0 if not measured */
} lt_host;

/* The running host (bandwidth left 0: set it if measured). */
void lt_host_detect(lt_host *out);

/* ---- search strategies --------------------------------------------------------------- */

typedef enum { LT_STRAT_EXHAUSTIVE = 0, LT_STRAT_RANDOM, LT_STRAT_MODEL } lt_strategy_kind;
const char *lt_strategy_name(lt_strategy_kind k);
int lt_strategy_parse(const char *s, lt_strategy_kind *out); /* "exhaustive"|"random"|"model" */

/* Context features the cost model sees besides the parameter values. */
typedef struct {
    lt_shape shape;
    lt_host host;
} lt_tune_context;

typedef struct lt_strategy lt_strategy;

/* Creates a strategy over space (copied); ctx may be NULL (no context
 * features). Deterministic for a seed. Free with lt_strategy_free. */
int lt_strategy_init(lt_strategy **out, lt_strategy_kind kind, const lt_space *space,
                     const lt_tune_context *ctx, uint64_t seed);
void lt_strategy_free(lt_strategy *s); /* NULL is a no-op */
/* Writes up to n points never proposed before into out; returns how many
 * (0 once the space is exhausted) or a negative status. */
int lt_strategy_propose(lt_strategy *s, lt_params *out, int n);
/* Reports the cost samples (lower is better, any positive unit) measured
 * for a proposed point. n_samples 0 reports a point that failed validation:
 * it is never proposed again and never trains the model. */
int lt_strategy_observe(lt_strategy *s, const lt_params *p, const double *costs, int n_samples);
/* The best point observed so far (median cost); false if none. */
bool lt_strategy_best(const lt_strategy *s, lt_params *out, double *cost);

/* The model-guided strategy's forecast: the relative improvement over the
 * best observed cost that the most promising untried point could bring,
 * judged optimistically (predicted mean minus the ensemble's disagreement).
 * A forecast below a threshold is the signal to stop exploring. LT_ENOTFOUND
 * for the other strategies and before the model has enough observations. */
int lt_strategy_expected_gain(lt_strategy *s, double *gain);

/* ---- paired comparison -------------------------------------------------------------- */

/* Pairs (a[i], b[i]) measured back to back (A, B, A, B, ...): a is the
 * incumbent, b the candidate. contended[i] (may be NULL) marks a pair during
 * which the machine was known busy: such pairs weigh `contended_weight`
 * (e.g. 0.1) instead of 1. */
typedef struct {
    double ratio;        /* weighted median of b[i]/a[i] */
    double ci_lo, ci_hi; /* 95% bootstrap interval of that median */
    double a_median, b_median; /* medians of the uncontended samples (all if none) */
    int n_clean;         /* uncontended pairs */
    bool faster;         /* b faster: ci_hi < 1 - margin */
    bool slower;         /* b slower: ci_lo > 1 + margin */
} lt_compare_result;

int lt_compare_paired(const double *a, const double *b, const bool *contended, int n,
                      double margin, double contended_weight, uint64_t seed,
                      lt_compare_result *out);

/* ---- node timing in isolation ---------------------------------------------------------- */

/* Times one node of a finalized program through the pool, the way the
 * looped executor e splits it (tasks_per_thread: its tiles_per_thread; each
 * run cut into as many tasks as e's schedule gives the node with the
 * parameters being timed, under e's other parameters): when the node lies in
 * a LOOP, every iteration's instance runs back to back (so the weights
 * streamed are all layers' and decode stays memory-bound as in a real step).
 * e and p must outlive the timer. Free with lt_node_timer_free. */
typedef struct lt_node_timer lt_node_timer;
int lt_node_timer_init(lt_node_timer **out, const lt_exec *e, lt_program *p, int node,
                       lt_pool *pool, const lt_step *step, int tasks_per_thread);
void lt_node_timer_free(lt_node_timer *t);
int lt_node_timer_instances(const lt_node_timer *t);
/* Cold: every run first evicts the instances' weight matrices (a matvec's or
 * matmul's W) from the caches (lt_cache_evict, outside the time), as a step
 * of a model larger than the last-level cache finds them. Warm (the
 * default), a run after the first reads them from the caches where they
 * fit, which favours other parameters (no prefetch, smaller tasks) than a
 * stream from memory does. */
void lt_node_timer_set_cold(lt_node_timer *t, bool cold);
/* Runs every instance once with parameters p (not validated here: check
 * first) and returns the wall time in ns; *contended (may be NULL) is set
 * when the process was preempted meanwhile (involuntary context switches). */
double lt_node_timer_run(lt_node_timer *t, const lt_params *p, bool *contended);

/* ---- config store ------------------------------------------------------------------- */

typedef struct {
    char kernel[32];     /* kernel name or "looped" */
    char shape[96];      /* lt_shape_format, or a model signature for "looped" */
    char host[96];       /* lt_host.host_class */
    char params[160];    /* lt_space_format */
    double median_ns;    /* tuned median time */
    int64_t samples;     /* measurements behind it */
    double speedup;      /* default time / tuned time */
    int64_t trials;      /* configurations tried behind it, 0..UINT32_MAX (0: unknown) */
    bool converged;      /* the search stopped exploring this kernel/shape on this host */
} lt_config_entry;

typedef struct lt_store lt_store;

/* Where a store lives. load appends entries with lt_store_put; save writes
 * them all (atomically: readers see the old or the new set, never a mix). */
typedef struct {
    const char *name; /* for messages: a path, a topic */
    int (*load)(void *ctx, lt_store *s);
    int (*save)(void *ctx, const lt_store *s);
    void (*free)(void *ctx);
    void *ctx;
} lt_store_backend;

/* The file backend. Line format (UTF-8 text, '\t'-separated, one entry a line):
 *   # looptune configs v1                      first line: magic and version
 *   kernel  shape  host  params  median_ns  samples  speedup
 * Lines starting with '#' are comments. A bad line (wrong field count, an
 * unknown kernel, params outside the kernel's space, numbers that do not
 * parse) is reported with its line number and skipped. A missing file is an
 * empty store. Saving writes PATH.tmp.PID then renames it over PATH. The
 * entry's trials and converged are not in the file (v1 keeps its 7 columns):
 * they load as 0 and false, and a save drops them. */
int lt_store_backend_file(lt_store_backend *out, const char *path);
/* configs.tsv in looptune's cache folder (lt_cache_path: $XDG_CACHE_HOME/
 * looptune/configs.tsv or ~/.cache/looptune/configs.tsv), written into buf;
 * false when neither variable is set or the path does not fit. */
bool lt_store_default_path(char *buf, size_t n);

/* Opens a store on a backend (taken over: freed with the store) and loads
 * it. *skipped (may be NULL) gets the number of bad entries skipped. */
int lt_store_open(lt_store **out, const lt_store_backend *backend, int *skipped);
void lt_store_close(lt_store *s); /* NULL is a no-op; does not save */
int lt_store_save(lt_store *s);
const char *lt_store_name(const lt_store *s);
/* Validates e (kernel known, params in its space, median, samples and
 * speed-up positive, trials in 0..UINT32_MAX), then inserts or replaces the
 * entry with the same (kernel, shape, host). */
int lt_store_put(lt_store *s, const lt_config_entry *e);
const lt_config_entry *lt_store_get(const lt_store *s, const char *kernel, const char *shape,
                                    const char *host);
int lt_store_count(const lt_store *s);
const lt_config_entry *lt_store_at(const lt_store *s, int i);

/* Space of a store entry's kernel name (a kernel, "looped" or "threads"). */
int lt_space_by_name(const char *kernel, lt_space *out);

/* ---- the config store on a log-compacted Kafka topic ----------------------------------- */

/* Config envelope <-> entry. lt_config_to_envelope fills caller-provided
 * storage (no allocation): env, cfg, stats and params[LT_MAX_PARAMS] live in
 * *buf and point into e. lt_config_from_envelope validates like lt_store_put. */
typedef struct {
    Looptune__Envelope env;
    Looptune__Config cfg;
    Looptune__ConfigStats stats;
    Looptune__Param prm[LT_MAX_PARAMS];
    Looptune__Param *pp[LT_MAX_PARAMS];
    char names[LT_MAX_PARAMS][32];
} lt_config_msg;
/* Validates e as lt_store_put does (LT_EINVAL/LT_ECONFIG/LT_ENOTFOUND with
 * detail), then fills *buf: a Config envelope (time_ns now) whose strings
 * point into e (keep e alive and unchanged while the envelope is used), its
 * params one Param per parameter of the kernel's space, in the space's
 * order; stats.gb_s and gflops are 0 (the entry does not hold them). */
int lt_config_to_envelope(const lt_config_entry *e, lt_config_msg *buf);
/* A Config envelope (a decoded record) into *out: LT_EFORMAT for another
 * payload or a missing part (stats), a string too long for the entry or a
 * parameter name with '=' or ','; then the checks of lt_store_put (every
 * parameter of the kernel's space exactly once, values allowed). out->params
 * is in the space's order whatever the message's order. */
int lt_config_from_envelope(const Looptune__Envelope *env, lt_config_entry *out);
/* Publishes e on an open producer, keyed kernel|shape|host (lt_envelope_key).
 * Never blocks. LT_OK when queued, LT_PRODUCER_DROPPED when the producer's
 * local queue is full (counted in its stats), a negative status for an entry
 * that does not validate. Delivery is the producer's: lt_producer_flush. */
int lt_store_topic_publish(lt_producer *p, const lt_config_entry *e);
/* The topic backend: load reads every partition of `topic` from the oldest
 * record to the high watermark taken at load time (assign, no consumer group,
 * so it never disturbs a group and ends by itself), the latest record per key
 * wins, a null value (tombstone) deletes the key, a record that does not
 * decode or validate is logged with partition/offset and skipped (counted).
 * A record whose key is not its Config's kernel|shape|host counts as one
 * that does not validate. A missing topic is an empty store (and is not
 * created by loading). save creates the topic if missing
 * (cleanup.policy=compact; partitions and replication: the broker's
 * defaults; an existing topic that is not compacted is a warning) and
 * publishes every entry, then flushes (error if not all delivered within
 * timeout). Unlike the file's, a save is not atomic across entries: a
 * reader meanwhile sees each key old or new, and keys not in the store are
 * left on the topic. The conn is copied (strings too). timeout_ms (<= 0:
 * 10000) bounds each wait: metadata, the next record while reading, topic
 * creation, delivery. The backend's name is "TOPIC on BOOTSTRAP-SERVERS". */
int lt_store_backend_topic(lt_store_backend *out, const lt_kafka_conn *conn, const char *topic,
                           int timeout_ms);

/* Warm start: every entry of s for host whose name and key the runtime of t
 * uses (lt_tuning_uses) becomes a value in force (lt_tuning_set). An entry
 * that does not parse or fit is skipped with a warning and counted in
 * *refused (may be NULL). Returns the number applied. */
int lt_store_warm_start(const lt_store *s, lt_tuning *t, const char *host, int *refused);

/* ---- searching a model's configurations, one key at a time ------------------------------ */

/* What `looptune tune` runs for every config store key of a model and a
 * distributed tune task for one (src/tune/search.c). Candidates from the
 * strategy are measured interleaved with the incumbent (paired samples,
 * each lasting at least 200 us) and adopted only when the paired
 * comparison says faster by more than 1%; a longer comparison of the
 * default against the winner is the verdict. */

#define LT_TUNE_DECODE_POS 16     /* the position decode steps are timed at */
#define LT_TUNE_PREFILL_TOKENS 64 /* a prefill step's batch (at most lt_llama_max_batch) */
#define LT_TUNE_BATCH_SEQS 4      /* sequences of a batched decode step (tune --seqs) */

/* One search's outcome. */
typedef struct {
    char kernel[32];  /* kernel name, "looped" or "threads" */
    char shape[96];   /* the config store's shape key */
    double def_ns;    /* the default's median in the verdict (a kernel's: per call) */
    double tuned_ns;  /* the winner's (def_ns when it was not faster) */
    double speedup;   /* def_ns / tuned_ns */
    int trials;       /* candidates proposed, refused ones included */
    int samples;      /* pairs behind the verdict */
    lt_params best;   /* the winner, or the default */
    char params[160]; /* best, lt_space_format */
} lt_tune_result;

/* Called after each measured trial (used 1..budget, best: the speed-up of
 * the incumbent so far) and once with used 0 when the trials are over,
 * before the verdict's measurements. */
typedef void (*lt_tune_progress_fn)(void *arg, const char *space, const char *shape, int used,
                                    int budget, double best);

typedef struct {
    lt_strategy_kind strategy;
    int budget;                   /* configurations tried per key, >= 1 */
    uint64_t seed;                /* the strategy's and the comparisons' */
    lt_host host;                 /* the cost model's context */
    lt_tune_progress_fn progress; /* NULL: none */
    void *arg;
} lt_tune_opts;

/* One regime's program of a runtime after one real step of n_tokens
 * tokens (1: decode at LT_TUNE_DECODE_POS, more: a prefill batch at 0) on
 * its own buffers, and its tunable keys: each distinct (kernel, shape) of a
 * kernel with parameters, in program order. The runtime and pool (the
 * runtime's) must outlive the pass. */
typedef struct lt_tune_pass lt_tune_pass;

typedef struct {
    const char *kernel; /* kernel name (static storage) */
    char shape[96];     /* lt_shape_format of its calls */
    int node;           /* the first node of that kernel and shape */
} lt_tune_key;

int lt_tune_pass_open(lt_tune_pass **out, lt_llama *l, lt_pool *pool, int64_t n_tokens);
/* The batch regime's pass: the program of a batched decode step of n_seqs
 * sequences (2 <= n_seqs <= the runtime's slots and max batch), one token
 * of each in slots 0..n_seqs-1, timed at LT_TUNE_DECODE_POS; its keys are
 * the batch keys, whole steps are lt_llama_eval_batch. */
int lt_tune_pass_open_batch(lt_tune_pass **out, lt_llama *l, lt_pool *pool, int64_t n_seqs);
void lt_tune_pass_close(lt_tune_pass *p); /* NULL is a no-op */
lt_regime lt_tune_pass_regime(const lt_tune_pass *p);
int64_t lt_tune_pass_tokens(const lt_tune_pass *p);
int lt_tune_pass_n_keys(const lt_tune_pass *p);
const lt_tune_key *lt_tune_pass_key(const lt_tune_pass *p, int i); /* NULL out of range */
/* The index of the key (kernel, shape), or -1. */
int lt_tune_pass_find(const lt_tune_pass *p, const char *kernel, const char *shape);
/* Searches key i's space (the kernel's, fitted to the ISA and the call),
 * timing its node's instances in isolation under the executor's
 * parameters of the moment the pass was opened. The winner stays in force
 * in the runtime's tuning context (as a warm start would put it). */
int lt_tune_pass_search(lt_tune_pass *p, int i, const lt_tune_opts *o, lt_tune_result *out);
/* The looped executor's parameters on whole decode steps (a pass of one
 * token), key lt_exec_shape_format for the pool's size; the winner stays in
 * force. */
int lt_tune_pass_search_looped(lt_tune_pass *p, const lt_tune_opts *o, lt_tune_result *out);
/* The pass regime's thread count on whole steps (a pool of 2 threads or
 * more), key lt_step_shape_format; the winner stays in force. */
int lt_tune_pass_search_threads(lt_tune_pass *p, const lt_tune_opts *o, lt_tune_result *out);
/* The config store entry of r for host_class (converged: fewer trials than
 * budget, the strategy ran out of points). */
void lt_tune_result_entry(const lt_tune_result *r, const char *host_class, int budget,
                          lt_config_entry *out);

#ifdef __cplusplus
}
#endif
#endif
