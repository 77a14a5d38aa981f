/* Internal pieces of the telemetry layer shared by its files: the ring
 * record, the per-step message from the stepping thread to the drain
 * thread, the window aggregator, perf counters, and node descriptors. */
#ifndef LT_TELEMETRY_INTERNAL_H
#define LT_TELEMETRY_INTERNAL_H

#include <stdint.h>

#include "looptune/telemetry.h"
#include "telemetry/ring.h"

/* What the observer writes: one thread's share of one node in one step.
 * 32 bytes, two per cache line. */
typedef struct {
    uint32_t step;
    int32_t node;
    uint64_t t0, t1, wait;
} lt__tel_rec;

/* ---- configuration snapshots (snap.c) ------------------------------------------ */

/* What a window ran: the tag and every node's parameter values, as
 * lt_tel_retag found them between steps. Immutable once sent: the stepping
 * thread builds it, a RETAG message hands it to the aggregator, which frees
 * it when a later snapshot replaces it. One allocation (candidate_id
 * points into it). */
typedef struct lt__tel_snap {
    struct lt__tel_snap *next; /* the aggregator's list of pending snapshots */
    uint64_t start;            /* first step it applies to (set by the aggregator) */
    const char *candidate_id;  /* "" when untagged */
    bool on_candidate;
    uint32_t pair;
    int n;                     /* nodes */
    lt_params params[];        /* [n] */
} lt__tel_snap;

/* Reads the values p's nodes hold now; tag may be NULL. NULL on out of memory. */
lt__tel_snap *lt__tel_snap_new(const lt_program *p, const lt_tel_tag *tag);
void lt__tel_snap_free(lt__tel_snap *s);

/* ---- step messages ----------------------------------------------------------------- */

/* Sent by the stepping thread at the end of every step, in step order. */
enum {
    LT__STEP_CLOSE = 1u,    /* the window ends with this step */
    LT__STEP_COUNTERS = 2u, /* ctr/ctr_wall_ns carry counter deltas */
    LT__STEP_NONE = 4u,     /* no step: only closes the window (the end of the run, a retag) */
    LT__STEP_RETAG = 8u,    /* with NONE: snap applies from step seq on */
    LT__STEP_PREFILL = 16u, /* with NONE: a prefill step of n_tokens, t_begin..t_end */
};
typedef struct {
    uint64_t seq;       /* step index from 0 (NONE: the next step) */
    int64_t pos, n_tokens;
    uint64_t t_begin_ns, t_end_ns; /* when the step began and ended (lt_now_ns) */
    uint32_t flags;
    uint64_t ctr_wall_ns; /* wall time the counter deltas cover, times threads */
    uint64_t ctr[LT_CTR_COUNT]; /* deltas summed over threads since the last read; with
                                 * NONE they belong to the last step before seq */
    lt__tel_snap *snap; /* RETAG: owned by the message, then by the aggregator */
} lt__tel_stepmsg;

/* ---- node descriptors (shape.c) ------------------------------------------------- */

typedef struct {
    lt_tel_node_desc *nodes; /* [n] */
    lt_kernel_id *kernels;   /* [n] */
    int n;
    char *strings; /* labels and shape signatures */
} lt__tel_nodes;

int lt__tel_nodes_init(lt__tel_nodes *d, const lt_program *p);
void lt__tel_nodes_free(lt__tel_nodes *d);

/* ---- perf counters (counters.c) ----------------------------------------------------- */

typedef struct lt__tel_counters lt__tel_counters;

/* Opens the counters for each thread id in tids[0..n) (pid = tid, any CPU):
 * a hardware group and a software group per thread. *available gets bit c
 * for every counter open for all threads; why (one line) gets the reason the
 * others are missing, "" if none is. Never fails for missing counters: the
 * result may have none available. */
int lt__tel_counters_open(lt__tel_counters **out, const int *tids, int n, uint32_t *available,
                          char *why, size_t why_len);
/* Reads every group (2 system calls per thread) and writes each counter's
 * value summed over threads (scaled when the kernel multiplexed). */
void lt__tel_counters_read(lt__tel_counters *c, uint64_t out[LT_CTR_COUNT]);
void lt__tel_counters_close(lt__tel_counters *c);

/* ---- window aggregation (agg.c) ---------------------------------------------------- */

/* Turns ring records and step messages into window and call records. Used by
 * the drain thread only, or directly by tests (synchronous, deterministic). */
typedef struct lt__tel_agg lt__tel_agg;

typedef struct {
    const lt_program *program;
    const lt__tel_nodes *nodes;
    int nth;
    const char *run_id;
    lt_tel_detail detail;
    uint32_t available;     /* counters that were opened */
    lt_tel_sink *sink;      /* where records go */
    const char *step_shape; /* the decode step's key: a "step" window per window; NULL: none
                             * (copied by lt__tel_agg_init) */
    const char *prefill_shape; /* the prefill step's key (copied); NULL: prefill steps dropped */
} lt__tel_agg_opts;

typedef struct {
    int64_t windows;
    int64_t emitted, sink_dropped, sink_failed; /* emit results */
    int64_t orphans; /* records of steps the aggregator never got a message for */
} lt__tel_agg_counts;

int lt__tel_agg_init(lt__tel_agg **out, const lt__tel_agg_opts *o);
void lt__tel_agg_free(lt__tel_agg *a);
/* Step messages, in order. A CLOSE finalises and emits the window when all
 * its records are in (the caller adds a step's records before, or after,
 * its message; lt__tel_agg_add fails only for steps already emitted). Takes
 * ownership of a RETAG message's snap. */
void lt__tel_agg_step(lt__tel_agg *a, const lt__tel_stepmsg *m);
/* One ring record of thread ith. Records of a step must be added before the
 * message that closes its window is processed by lt__tel_agg_flush. */
void lt__tel_agg_add(lt__tel_agg *a, int ith, const lt__tel_rec *r);
/* Emits every window whose closing message has been seen. */
void lt__tel_agg_flush(lt__tel_agg *a);
/* Steps with a message (complete steps). */
uint64_t lt__tel_agg_steps_known(const lt__tel_agg *a);
void lt__tel_agg_counts_get(const lt__tel_agg *a, lt__tel_agg_counts *out);
/* Emits one record through the sink, counting the outcome. */
int lt__tel_agg_emit(lt__tel_agg *a, const lt_tel_record *r);

#endif
