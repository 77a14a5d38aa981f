/* looptune program: a tensor program as buffers plus kernel-call nodes that
 * carry their parameter values, a builder API, printing, and the executors
 * (which own their parameters and schedules; the program knows none).
 * Knows nothing of Llama: the model layer builds programs with it. */
#ifndef LOOPTUNE_PROGRAM_H
#define LOOPTUNE_PROGRAM_H

#include <stdio.h>

#include "looptune/core.h"
#include "looptune/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    LT_BUF_ACT = 0, /* activation: allocated (64-byte aligned) and owned by the program */
    LT_BUF_WEIGHT,  /* read-only data owned by someone else (model weights) */
    LT_BUF_STATE,   /* persistent data owned by someone else (a KV cache) */
    LT_BUF_VIEW,    /* a window into another buffer at a byte offset */
} lt_buf_kind;

typedef struct lt_program lt_program;

/* Creates an empty program. Free with lt_program_free (NULL is a no-op),
 * which frees activations and nodes but never WEIGHT/STATE data. */
int lt_program_init(lt_program **out, const char *name);
void lt_program_free(lt_program *p);

/* Adds a buffer named name (copied) with shape/dtype from t. ACT: t->data
 * must be NULL (allocated at finalize). WEIGHT/STATE: t->data is external.
 * Returns the buffer id (>= 0) or a negative status. */
int lt_program_add_buffer(lt_program *p, const char *name, lt_buf_kind kind, const lt_tensor *t);
/* Adds a view: shape from t (contiguous), data = parent's data + offset.
 * The view must lie inside the parent. Returns the buffer id. */
int lt_program_add_view(lt_program *p, const char *name, int parent, size_t offset,
                        const lt_tensor *t);

/* Adds a node calling kernel id on operand buffers ops[0..n_ops) (-1 = no
 * operand), with attributes (NULL = zeros) and the kernel's default
 * parameters. label is free text for printing (copied). Returns the node id. */
int lt_program_add_node(lt_program *p, lt_kernel_id id, const int *ops, int n_ops,
                        const int64_t ia[4], const float fa[4], const char *label);
/* Sets a node's call flags (LT_CALL_*, kernels.h: what step the call is
 * part of, which its shape key's regime says), before finalize (LT_ESTATE
 * after; LT_EINVAL for an unknown flag). */
int lt_program_set_node_flags(lt_program *p, int node, uint32_t flags);
/* Sets a node's parameters after validating them against the kernel's space
 * and constraints (LT_ECONFIG; nothing changes on error). */
int lt_program_set_params(lt_program *p, int node, const lt_params *params);

/* Allocates activations, resolves views and operands, checks every call
 * (shapes and parameters). After finalize the program is ready to run;
 * buffers and nodes can no longer be added. */
int lt_program_finalize(lt_program *p);

int lt_program_n_nodes(const lt_program *p);
int lt_program_n_buffers(const lt_program *p);
const char *lt_program_name(const lt_program *p);
/* Buffer by id (data valid after finalize) or by name (-1 if absent). */
lt_tensor *lt_program_buffer(lt_program *p, int id);
int lt_program_find_buffer(const lt_program *p, const char *name);
const char *lt_program_buffer_name(const lt_program *p, int id);
lt_buf_kind lt_program_buffer_kind(const lt_program *p, int id);

/* Read-only view of a node for passes, printing and executors. */
typedef struct {
    lt_kernel_id kernel;
    int ops[LT_MAX_OPERANDS]; /* buffer ids, -1 = none */
    int n_ops;
    int64_t ia[4];
    float fa[4];
    lt_params params;
    uint32_t flags; /* LT_CALL_* */
    const char *label;
} lt_node_info;
void lt_program_node(const lt_program *p, int node, lt_node_info *out);
/* The resolved call of a node (valid after finalize). */
const lt_call *lt_program_call(const lt_program *p, int node);

/* Analytic bytes and FLOPs of one step of the whole program. */
void lt_program_cost(const lt_program *p, const lt_step *step, double *bytes, double *flops);

/* Human-readable listing: buffers then nodes with operands and parameters. */
void lt_program_print(const lt_program *p, FILE *f);

/* ---- kernel looping ----------------------------------------------------------- */

/* A LOOP node: body_len nodes repeated n_iter times. In the flat node list,
 * iteration it's copy of body node j is node first + it * body_len + j;
 * iterations differ only in the WEIGHT/STATE buffers bound to n_slots
 * operand slots. */
typedef struct {
    int first, body_len, n_iter, n_slots;
} lt_loop_info;

/* The kernel-looping pass: finds the longest runs of structurally identical
 * blocks (same kernels, shapes, attributes, parameters and activation
 * buffers; weights and state may differ, consistently within a block) and
 * records each run as one LOOP node. Greedy by coverage (body_len x n_iter,
 * ties to the shorter body), then recursively on what lies before and after;
 * one level: repeats inside a body stay flat. Returns the number of loops
 * found (>= 0). Idempotent: a second call finds nothing new. */
int lt_pass_kernel_looping(lt_program *p);

/* The prologue-fusion pass: a one-row RMSNORM or SWIGLU whose output only
 * feeds matvecs (as x) becomes their input prologue (MATVEC ia[1]) and is
 * removed, when nothing rewrites its inputs before its last reader. Run it
 * before the looping pass. The fused program computes the same bits.
 * Returns the number of nodes fused away (>= 0), or an error. */
int lt_pass_fuse_prologues(lt_program *p);
/* The epilogue-fusion pass: a one-row ROPE of matvec outputs becomes the
 * matvecs' rope epilogue, a KV_STORE of a matvec's output its store epilogue
 * (MATVEC ia[2]), when nothing between reads the rotated buffer or touches
 * the cache. Run it before the looping pass. The fused program computes the
 * same bits. Returns the number of nodes fused away (>= 0), or an error. */
int lt_pass_fuse_epilogues(lt_program *p);
int lt_program_n_loops(const lt_program *p);
void lt_program_loop(const lt_program *p, int loop, lt_loop_info *out);
/* Operand slot s of a loop: body node j and operand index i. */
void lt_program_loop_slot(const lt_program *p, int loop, int s, int *body_node, int *operand);
/* Buffer bound to slot s in iteration it. */
int lt_program_loop_binding(const lt_program *p, int loop, int it, int s);

/* ---- executors ------------------------------------------------------------ */

/* Synchronisation counters of one step, summed over threads. */
typedef struct {
    uint64_t sync_points; /* dispatch: barriers passed; looped: dependency waits that blocked */
    uint64_t wait_ns;     /* time threads spent waiting at them */
    uint64_t busy_ns;     /* wall time of the step times threads */
} lt_exec_stats;

/* Per-node timing for telemetry. When a program has an observer, executors
 * call node_done from thread ith after it finished its share of a node:
 * t0/t1 bracket its work on the node (lt_now_ns clock), wait_ns is the time
 * it waited before starting it (dependencies) or after it (a barrier).
 * A thread that took no task of a node does not report it. The callback
 * runs on the compute hot path: it must not block, lock or allocate. */
typedef struct {
    void (*node_done)(void *user, int ith, int node, uint64_t t0_ns, uint64_t t1_ns,
                      uint64_t wait_ns);
    void *user;
} lt_exec_observer;
/* Sets (or with NULL clears) the observer; the struct is copied. */
void lt_program_set_observer(lt_program *p, const lt_exec_observer *obs);

/* The two executors.
 *   dispatch  the baseline (as ggml does it): every node is split across all
 *             the step's threads, then all threads meet at a barrier.
 *   looped    threads enter once per step and walk the whole node list (LOOP
 *             bodies included) themselves. A node's work is cut into tasks
 *             (tiles) that threads take from a shared counter; a thread
 *             starts a node as soon as the nodes it depends on
 *             (read-after-write, write-after-read, write-after-write on its
 *             buffers) have finished every task, not at a global barrier, and
 *             a thread that has to wait prefetches the weights it is about to
 *             read.
 * Both give the same result for every node: kernels compute each output
 * element in one task, in an order that does not depend on the split. */
typedef enum { LT_EXEC_DISPATCH = 0, LT_EXEC_LOOPED } lt_executor;
const char *lt_executor_name(lt_executor e);
int lt_executor_parse(const char *s, lt_executor *out);

/* The looped executor's tunable parameters, like a kernel's:
 *   tiles_per_thread  tasks per node per thread (load balance vs overhead)
 *   prefetch_kb       weight bytes a waiting thread prefetches ahead
 *   sync              0 = dependency counters, 1 = a barrier after every node
 *   min_task_kb       smallest task in KiB of memory traffic (0 = always every tile) */
#define LT_EXEC_MAX_TILES 64
enum { LT_XP_TILES = 0, LT_XP_PREFETCH_KB, LT_XP_SYNC, LT_XP_MIN_TASK_KB, LT_XP_COUNT };
const lt_param_def *lt_exec_looped_params(int *n_params);

/* An executor: its kind, the looped executor's parameters and the schedules
 * it derived from the programs it ran (cached, keyed by program, program
 * structure and thread count; a few, the least recently used replaced). It
 * serves one caller at a time: a step mutates its cache and counters. A
 * dispatch executor keeps parameters too, so a configuration can be set
 * whatever the kind, but nothing reads them. */
typedef struct lt_exec lt_exec;

/* Creates an executor of kind with the looped parameters at their defaults.
 * Free with lt_exec_free (NULL is a no-op), which frees its schedules; the
 * programs it ran are not touched and may be freed before or after it. */
int lt_exec_init(lt_exec **out, lt_executor kind);
void lt_exec_free(lt_exec *e);
lt_executor lt_exec_kind(const lt_exec *e);
/* Validates params against lt_exec_looped_params (LT_ECONFIG naming the
 * parameter and value; nothing changes on error) and sets them. New values
 * bump the generation and drop every cached schedule (task counts change);
 * the values already in force change nothing. */
int lt_exec_set_params(lt_exec *e, const lt_params *params);
void lt_exec_params(const lt_exec *e, lt_params *out);
/* Counts the parameter changes: 0 at init. */
uint64_t lt_exec_generation(const lt_exec *e);

/* Runs one step of finalized p on the first nth threads of pool (0 = all;
 * more than the pool has = all; negative: LT_EINVAL). Kernels run the ISA
 * chosen at finalize. The first step of p at a thread count (after a change
 * of parameters or of p's task units) builds its schedule. stats may be
 * NULL. Results do not depend on nth or on the kind. */
int lt_exec_step(lt_exec *e, lt_program *p, lt_pool *pool, int nth, const lt_step *step,
                 lt_exec_stats *stats);

/* Tasks the looped executor cuts node `node` of finalized p into at nth
 * threads, were its call to carry kernel parameters kp (NULL: its own), with
 * tiles_per_thread = tiles (<= 0: e's) and e's other parameters; -1 for a
 * bad node. A tuner times a node split so. Builds nothing, caches nothing. */
int lt_exec_node_tasks(const lt_exec *e, const lt_program *p, int node, const lt_params *kp,
                       int nth, int tiles);

#ifdef __cplusplus
}
#endif
#endif
