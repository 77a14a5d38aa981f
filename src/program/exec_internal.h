/* Internals of the executors, shared by the executor front (exec.c), the two
 * executors (exec_dispatch.c, exec_looped.c) and the tests. The program IR
 * (program.c) includes none of it. */
#ifndef LT_EXEC_INTERNAL_H
#define LT_EXEC_INTERNAL_H

#include "program/program_internal.h"

/* The looped executor's schedule of one program at one thread count: task
 * counts, dependency lists, per-step counters (exec_looped.c). */
typedef struct lt__plan lt__plan;

/* Builds the schedule of finalized p at nth threads under the looped
 * parameters xp. With use_loops, each regular LOOP's dependencies are
 * derived for its first two iterations and replicated, shifted, for the
 * others (the same schedule as flat: see exec_looped.c); without, every node
 * is derived on its own. The caller frees *out with lt__plan_free. */
int lt__plan_build(const lt_program *p, const lt_params *xp, int nth, bool use_loops,
                   lt__plan **out);
void lt__plan_free(lt__plan *pl);

/* One step of p on nth threads of pool (nth <= pool size) with schedule pl,
 * built for p at nth under xp. */
int lt__exec_looped(lt_program *p, lt__plan *pl, const lt_params *xp, lt_pool *pool, int nth,
                    const lt_step *step, lt_exec_stats *stats);
int lt__exec_dispatch(lt_program *p, lt_pool *pool, int nth, const lt_step *step,
                      lt_exec_stats *stats);

/* lt_exec_node_tasks under parameters xp. */
int lt__looped_node_tasks(const lt_program *p, const lt_params *xp, int node, const lt_params *kp,
                          int nth, int tiles);

/* The next execution number for lt_step.seq: unique in the process, never 0. */
uint64_t lt__exec_next_seq(void);

/* ---- for tests ---- */

/* Node `node` in a schedule: its task count, its whole-node dependencies
 * (deps[0..n_deps), in order) and its task-level ones (fine_dep[f], the
 * producer, and fine_range(f) = [2 * n_tasks] task ranges, f < n_fine). */
typedef struct {
    int n_tasks;
    const int *deps;
    int n_deps;
    int n_fine;
    int flag_base; /* its tasks' done flags, or -1 when no task waits on them */
} lt__sched_node;
void lt__plan_node(const lt__plan *pl, int node, lt__sched_node *out);
void lt__plan_fine(const lt__plan *pl, int node, int f, int *producer, const int **range);
/* Nodes whose schedule was replicated from the iteration before (LOOP records). */
int lt__plan_copied(const lt__plan *pl);

/* The schedule e runs p with at nth threads (built if it is not cached), or
 * NULL on error. */
const lt__plan *lt__exec_plan(lt_exec *e, lt_program *p, int nth);
/* With flat, e's schedules ignore LOOP records (new ones; e's cache is dropped). */
void lt__exec_set_flat(lt_exec *e, bool flat);
/* Tasks node is cut into at nth threads in e's schedule of p; negative on error. */
int lt__looped_tasks(lt_exec *e, lt_program *p, int nth, int node);
/* Node's whole-node dependencies (returned) and task-level ones (*fine) in
 * e's schedule of p at nth threads; negative on error. */
int lt__looped_deps(lt_exec *e, lt_program *p, int nth, int node, int *fine);

#endif
