/* looptune telemetry: measures a running program without slowing it. The
 * executors' observer writes one small record per thread and node into a
 * per-thread ring (never waits, locks, allocates or makes a system call); a
 * drain thread aggregates the rings into per-node windows (durations, bytes,
 * FLOPs, achieved bandwidth, wait share, perf counters) and hands plain C
 * records to a sink. Sinks that write protobuf to files or Kafka live in the
 * kafka layer (looptune/telemetry_sinks.h); this layer only knows the
 * interface. */
#ifndef LOOPTUNE_TELEMETRY_H
#define LOOPTUNE_TELEMETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "looptune/core.h"
#include "looptune/kernels.h"
#include "looptune/program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- counters ------------------------------------------------------------------ */

/* perf_event counters, named as `perf stat` names them. Hardware ones need a
 * PMU (virtual machines often have none); software ones come from the kernel. */
typedef enum {
    LT_CTR_CYCLES = 0,
    LT_CTR_INSTRUCTIONS,
    LT_CTR_CACHE_REFERENCES,
    LT_CTR_CACHE_MISSES,
    LT_CTR_LLC_MISSES, /* last-level cache read misses */
    LT_CTR_TASK_CLOCK, /* ns on a CPU */
    LT_CTR_CONTEXT_SWITCHES,
    LT_CTR_PAGE_FAULTS,
    LT_CTR_CPU_MIGRATIONS,
    /* ns the threads were runnable but waiting for a CPU (the run queue), from
     * /proc/self/task/TID/schedstat: the direct measure of contention */
    LT_CTR_RUNQUEUE_WAIT,
    LT_CTR_COUNT
} lt_tel_counter;
#define LT_CTR_FIRST_SOFTWARE LT_CTR_TASK_CLOCK

/* "cycles", "instructions", "cache-references", "cache-misses",
 * "LLC-load-misses", "task-clock", "context-switches", "page-faults",
 * "cpu-migrations", "runqueue-wait". */
const char *lt_tel_counter_name(lt_tel_counter c);

/* ---- records --------------------------------------------------------------------- */

typedef enum {
    LT_TEL_HOST = 0,
    LT_TEL_RUN_START,
    LT_TEL_RUN_END,
    LT_TEL_KERNEL_WINDOW,
    LT_TEL_CALL_SAMPLE,
    LT_TEL_KIND_COUNT
} lt_tel_kind;

#define LT_TEL_MAX_ISA_FLAGS 16

/* The machine and its measured ceilings (the roofline). */
typedef struct {
    char host_id[24];      /* 16 hex digits: FNV-1a of the fingerprint */
    char fingerprint[512]; /* lt_host_fingerprint */
    char cpu_model[128];
    const char *isa_flags[LT_TEL_MAX_ISA_FLAGS]; /* static strings: "avx2", "fma", ... */
    int n_isa_flags;
    int cores;               /* online logical CPUs */
    uint64_t l1d_bytes, l2_bytes, l3_bytes;
    double triad_gb_s;       /* STREAM triad over all cores, 1e9 B/s */
    double read_gb_s;        /* read-only vector stream over all cores */
    double peak_gflops;      /* f32 FMA throughput over all cores, 1e9 FLOP/s */
} lt_tel_host;

typedef struct {
    const char *name;
    int64_t value;
    int index; /* in the kernel's parameters (lt_kernel.params) */
} lt_tel_param;

/* One node of the observed program as records name it. */
typedef struct {
    int node;           /* index in the program's flat node list */
    const char *label;  /* "blk3.attn_q" */
    const char *kernel; /* "matvec" */
    const char *shape;  /* its key, "q8_0:2048x768:decode" (lt_call_key) */
    int n_params;
    lt_tel_param params[LT_MAX_PARAMS]; /* the values in force */
} lt_tel_node_desc;

/* The kernel name of the window over whole steps (lt_tel_opts.step_shape). */
#define LT_TEL_STEP_KERNEL "step"

typedef struct {
    const char *run_id;
    const lt_tel_host *host; /* NULL if the run measured none */
    const char *model, *dtype, *executor;
    int threads;
    int n_nodes;
    const lt_tel_node_desc *nodes; /* [n_nodes] */
    const char *host_class;            /* the config store's host key; may be NULL */
    /* the run's whole-step tunables (lt_tel_opts.step_entries): not nodes */
    int n_step_entries;
    const lt_tel_node_desc *step_entries; /* [n_step_entries] */
} lt_tel_run_start;

typedef struct {
    const char *run_id;
    uint64_t tokens;            /* steps observed */
    double decode_s;            /* wall time of those steps */
    double tok_s;
    uint64_t dropped_records;   /* ring drops + sink drops so far */
    uint64_t delivery_failures; /* sink delivery failures so far */
} lt_tel_run_end;

/* One node over one window. A node's duration in a step is max t1 - min t0
 * over the threads that reported it; count is the number of steps it ran in.
 * With lt_tel_opts.step_shape, every window closes with one more record over
 * the whole steps: node -1 (label ""), kernel LT_TEL_STEP_KERNEL, shape the
 * step key; count = steps, durations the steps' wall times (each from the
 * end of the step before, or lt_tel_begin, to its lt_tel_step_end), total_ns =
 * critical_ns their sum, no bytes or FLOPs, the window's tag and counters.
 * Quantiles are nearest-rank: q-th of n sorted values is element
 * ceil(q n) - 1 (median: q = 0.5). A window never spans an lt_tel_retag: it
 * ran one configuration, the one node->params and the tag describe.
 * A prefill step (lt_tel_prefill, with lt_tel_opts.prefill_shape) is a
 * window of its own, in a count of its own (window): kernel
 * LT_TEL_STEP_KERNEL, shape the prefill key, count 1, steps = the prompt
 * tokens it evaluated, its wall time, the tag in force; no counters. */
typedef struct {
    const char *run_id;
    uint64_t window;              /* index from 0 */
    uint64_t t_start_ns, t_end_ns; /* window bounds, lt_now_ns clock */
    uint64_t steps;               /* steps in the window */
    const lt_tel_node_desc *node; /* node->params: the values in force during the window */
    /* the tag in force (lt_tel_retag): candidate_id "" (never NULL) when
     * untagged, and then on_candidate = false, pair = 0 */
    const char *candidate_id;
    bool on_candidate;
    uint32_t pair;
    uint64_t count;
    uint64_t min_ns, median_ns, p90_ns, max_ns;
    uint64_t total_ns;            /* sum of the count durations */
    uint64_t critical_ns;         /* sum of, per call, the longest thread's own duration */
    double bytes, flops;          /* analytic, per call (mean over the window's steps) */
    double gb_s, gflops;          /* bytes * count / total_ns, flops * count / total_ns */
    double wait_share;            /* sum of wait / (sum of wait + total_ns * threads): 0..1 */
    /* Counters of the window, summed over threads (read every counters_every
     * steps: a read's delta goes to the window its read falls in; also read
     * by lt_tel_retag, so no window's counters mix two configurations). Only
     * the available ones are meaningful: bit c of available = counter c. */
    uint64_t counters[LT_CTR_COUNT];
    uint32_t available;
    bool counters_read;           /* at least one read fell in this window */
    /* another process competed for the cores: the threads waited on the run
     * queue for more than 2% of their time (without schedstat: any context
     * switch, or task-clock / wall < 0.9) */
    bool contention;
} lt_tel_kernel_window;

/* One thread's share of one node in one step (--telemetry-detail per-call).
 * bytes and flops are the whole call's. */
typedef struct {
    const char *run_id;
    uint64_t token; /* step index from 0 */
    uint32_t thread;
    const lt_tel_node_desc *node;
    uint64_t start_ns, end_ns, wait_ns;
    double bytes, flops;
} lt_tel_call_sample;

/* A record handed to a sink. Every pointer inside is valid only during the
 * emit call: a sink copies or encodes what it keeps. */
typedef struct {
    lt_tel_kind kind;
    union {
        const lt_tel_host *host;
        lt_tel_run_start run_start;
        lt_tel_run_end run_end;
        lt_tel_kernel_window window;
        lt_tel_call_sample call;
    } u;
} lt_tel_record;

/* ---- sinks ------------------------------------------------------------------------- */

/* What a sink did with the records so far. */
typedef struct {
    int64_t emitted; /* accepted */
    int64_t dropped; /* refused locally (a full queue): never sent */
    int64_t failed;  /* accepted but not delivered (write errors, broker never acknowledged) */
    int64_t pending; /* accepted, neither delivered nor failed yet (in flight) */
} lt_tel_sink_stats;

/* Returned by emit when the sink dropped the record (not an error). */
#define LT_TEL_DROPPED 1

/* Where records go. emit must not block for long (it runs on the drain
 * thread); it returns LT_OK, LT_TEL_DROPPED, or a negative status. The
 * telemetry runtime calls a sink from one thread at a time. flush and stats
 * may be NULL; close frees ctx (after it, the sink is gone). */
typedef struct {
    int (*emit)(void *ctx, const lt_tel_record *r);
    int (*flush)(void *ctx, int timeout_ms);
    void (*stats)(void *ctx, lt_tel_sink_stats *out);
    void (*close)(void *ctx);
    void *ctx;
} lt_tel_sink;

/* A sink that accepts and discards everything (counts what it got). */
int lt_tel_sink_null(lt_tel_sink *out);

/* ---- host -------------------------------------------------------------------------- */

/* Fills everything but the measured ceilings from lt_cpu() and
 * lt_host_fingerprint. */
void lt_tel_host_describe(lt_tel_host *h);
/* Measures the ceilings over a pool of every logical CPU: STREAM triad and
 * read bandwidth (lt_membw_measure on arrays of membw_bytes, 0 = 256 MiB)
 * and the f32 FMA peak. Takes a few seconds. */
int lt_tel_host_measure(lt_tel_host *h, size_t membw_bytes);
/* The cache file for this host, host-<id>.txt in looptune's cache folder
 * (lt_cache_path: $XDG_CACHE_HOME/looptune/ or ~/.cache/looptune/).
 * LT_ENOTFOUND if neither variable is set. */
int lt_tel_host_cache_path(const lt_tel_host *h, char *buf, size_t n);
/* The host record, from the cache when it holds a valid record for this
 * fingerprint, else measured (saying so on stderr) and cached. A corrupt or
 * foreign cache file is re-measured with a warning; a cache that cannot be
 * written is a warning, not an error. */
int lt_tel_host_get(lt_tel_host *h, size_t membw_bytes);
/* The f32 FMA peak in GFLOP/s over pool's threads (best of reps). */
double lt_tel_peak_gflops(lt_pool *pool, int reps);

/* ---- describing a program ---------------------------------------------------------- */

/* 32 lowercase hex digits of 128 random bits, NUL-terminated. */
int lt_tel_run_id(char buf[33]);

/* ---- the runtime ------------------------------------------------------------------- */

typedef enum { LT_TEL_DETAIL_WINDOW = 0, LT_TEL_DETAIL_PER_CALL } lt_tel_detail;
int lt_tel_detail_parse(const char *s, lt_tel_detail *out); /* "window" | "per-call" */

typedef struct {
    lt_program *program;    /* the program observed (finalized) */
    lt_pool *pool;          /* the pool it runs on: one ring per thread */
    lt_tel_sink sink;       /* owned from a successful lt_tel_open on; closed by lt_tel_close */
    const lt_tel_host *host; /* emitted first and in the run start; may be NULL */
    const char *run_id;     /* NULL: lt_tel_run_id */
    const char *model, *dtype, *executor; /* for the run start; may be NULL */
    /* for the run start, so an optimizer can key what it learns as the config
     * store does (only read during lt_tel_open; may be NULL) */
    const char *host_class;
    /* The run's whole-step tunables for the run start, with the values in
     * force (only read during lt_tel_open; may be NULL): the looped
     * executor's parameters (kernel "looped", shape lt_exec_shape_format) and
     * each regime's thread count ("threads", shape lt_step_shape_format), the
     * config store's keys. node -1 and label "" (they are no node). */
    const lt_tel_node_desc *step_entries;
    int n_step_entries;
    /* The key of the run's decode steps, lt_step_shape_format(model, the
     * pool's threads, decode) (copied; NULL: no step window): every window
     * closes with a record over the whole steps (see lt_tel_kernel_window). */
    const char *step_shape;
    /* The key of its prefill steps, lt_step_shape_format(..., prefill)
     * (copied; NULL: lt_tel_prefill emits nothing). */
    const char *prefill_shape;
    int64_t window_tokens;  /* a window closes after this many steps; 0: 32 */
    int64_t window_ms;      /* ... or once it lasted this long; 0: 1000 */
    int64_t drain_ms;       /* the drain thread's period; 0: 200 */
    int64_t counters_every; /* read counters every this many steps; 0: 8; < 0: no counters */
    int64_t ring_records;   /* ring capacity per thread (rounded up to a power of two); 0: 65536 */
    lt_tel_detail detail;
    /* > 0: lt_tel_open waits up to this long for the header records to be
     * delivered (sink flush), so connecting to a broker happens before the
     * run, not during its first steps */
    int64_t open_flush_ms;
} lt_tel_opts;

typedef struct {
    int64_t steps, windows;
    int64_t records;        /* ring records written by the observer */
    int64_t ring_dropped;   /* ... and dropped because a ring was full */
    int64_t steps_lost;     /* steps whose bookkeeping the drain never saw (a full queue) */
    uint64_t decode_ns;     /* wall time of the observed steps */
    lt_tel_sink_stats sink; /* emitted, dropped, failed */
    uint32_t counters_available; /* bit c: counter c could be opened for every thread */
} lt_tel_stats;

typedef struct lt_tel lt_tel;

/* Opens counters for every pool thread, starts the drain thread and emits
 * the host record (if any) and the run start. Takes ownership of opts->sink
 * (closed on failure too). Says once on stderr which counters are missing
 * and why. The program must outlive the telemetry. */
int lt_tel_open(lt_tel **out, const lt_tel_opts *opts);
const char *lt_tel_run_id_of(const lt_tel *t);
/* Starts observing: installs the program's observer; step 0 begins now.
 * Call between steps (no lt_pool_run in flight). */
void lt_tel_begin(lt_tel *t);
/* The step just executed was `step` (pos, n_tokens); the next one begins.
 * Call between steps, after every observed step: may close a window, and
 * reads the counters every counters_every steps (the only system calls). */
void lt_tel_step_end(lt_tel *t, const lt_step *step);
/* Observing, between steps: the next step begins now, and what ran since
 * the last step end (the caller's work, steps of other programs) is no part
 * of it. */
void lt_tel_step_begin(lt_tel *t);
/* Stops observing (removes the observer) and closes the last window. */
void lt_tel_end(lt_tel *t);
/* A prefill step evaluated n_tokens prompt tokens from t_begin_ns to
 * t_end_ns (lt_now_ns): one "step" window of the prefill key, with the tag
 * in force now (the last lt_tel_retag's). On the stepping thread, between
 * steps, observing or not. Nothing without lt_tel_opts.prefill_shape. */
void lt_tel_prefill(lt_tel *t, int64_t n_tokens, uint64_t t_begin_ns, uint64_t t_end_ns);
/* Windows closed so far, each with at least one step (by their step count
 * or duration, a retag, lt_tel_end). On the stepping thread. */
int64_t lt_tel_windows_closed(const lt_tel *t);

/* A window's attribution to an online-tuning trial. */
typedef struct {
    const char *candidate_id; /* NULL or "": no trial (the incumbent outside any trial) */
    bool on_candidate;        /* the window ran the candidate's parameters */
    uint32_t pair;            /* index of the A/B pair within the trial, from 0 */
} lt_tel_tag;
/* Between steps, on the stepping thread, after lt_tel_step_end (and the
 * caller has just changed node parameters with lt_program_set_params):
 * the window in progress closes with the step that just ended (no empty
 * window is emitted when it has no step), and every later window carries
 * `tag` (copied; NULL = no tag) and the parameter values the program's nodes
 * hold NOW (re-read here, between steps, so no race with the drain). Never
 * blocks for long: if the drain's queue is full it waits for room (rare).
 * Before lt_tel_begin it sets the tag and parameters of the first window.
 * Untagged (no candidate_id), on_candidate and pair are reported as false
 * and 0. The counters are read here too: their delta goes to the window
 * this call closes, or is discarded if that window has no step (its steps
 * were closed by lt_tel_step_end already, and the delta must not go to the
 * next configuration's window). candidate_id should be UTF-8 (it goes into
 * a protobuf string). Returns LT_ENOMEM, or LT_ETIMEOUT if the drain took
 * no message for 2 s; on failure later windows keep the previous tag and
 * parameter values (restore the program's parameters to match). */
int lt_tel_retag(lt_tel *t, const lt_tel_tag *tag);
/* Stops the drain thread after a last drain, emits the run end, flushes and
 * closes the sink (waiting up to 5 s for delivery; what is still in flight
 * then counts as a delivery failure), frees t. stats (may be NULL) gets the
 * final figures. NULL is a no-op. */
void lt_tel_close(lt_tel *t, lt_tel_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
