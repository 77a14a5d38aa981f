/* The executor front: an lt_exec owns an executor's kind, the looped
 * executor's parameters and the schedules it derived from the programs it
 * ran, and runs steps with them. The programs hold no executor state: a
 * schedule is keyed by the program's process-unique id, its structure
 * generation (bumped when a node's task units change) and the thread count,
 * and every schedule is dropped when the parameters change. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "program/exec_internal.h"

/* Schedules kept per executor: decode and a prefill batch, each at a couple
 * of thread counts while those are tuned. */
#define LT__PLANS 8

typedef struct {
    uint64_t prog, structure_gen; /* lt_program.id, .structure_gen */
    int nth;
    lt__plan *plan; /* NULL: a free slot */
} plan_slot;

struct lt_exec {
    lt_executor kind;
    lt_params params;   /* the looped executor's, validated */
    uint64_t generation; /* parameter changes so far */
    bool flat;          /* schedules ignore LOOP records (tests) */
    plan_slot plans[LT__PLANS]; /* most recently used first */
};

static const lt_param_def *looped_defs(void) {
    int n;
    return lt_exec_looped_params(&n);
}

int lt_exec_init(lt_exec **out, lt_executor kind) {
    *out = NULL;
    if (kind != LT_EXEC_DISPATCH && kind != LT_EXEC_LOOPED)
        return lt_error(LT_EINVAL, "unknown executor kind %d", (int)kind);
    lt_exec *e = calloc(1, sizeof *e);
    if (!e) return lt_error(LT_ENOMEM, "out of memory creating an executor");
    e->kind = kind;
    const lt_param_def *d = looped_defs();
    for (int i = 0; i < LT_XP_COUNT; i++) e->params.v[i] = d[i].def;
    *out = e;
    return LT_OK;
}

static void plans_drop(lt_exec *e) {
    for (int i = 0; i < LT__PLANS; i++) {
        lt__plan_free(e->plans[i].plan);
        memset(&e->plans[i], 0, sizeof e->plans[i]);
    }
}

void lt_exec_free(lt_exec *e) {
    if (!e) return;
    plans_drop(e);
    free(e);
}

lt_executor lt_exec_kind(const lt_exec *e) { return e->kind; }

int lt_exec_set_params(lt_exec *e, const lt_params *v) {
    int rc = lt_param_defs_validate("looped executor", looped_defs(), LT_XP_COUNT, v);
    if (rc) return rc;
    bool same = true;
    for (int i = 0; i < LT_XP_COUNT; i++) same &= e->params.v[i] == v->v[i];
    if (same) return LT_OK;
    memcpy(e->params.v, v->v, LT_XP_COUNT * sizeof v->v[0]);
    e->generation++;
    plans_drop(e); /* task counts and dependencies change */
    return LT_OK;
}

void lt_exec_params(const lt_exec *e, lt_params *out) { *out = e->params; }

uint64_t lt_exec_generation(const lt_exec *e) { return e->generation; }

/* The schedule of p at nth threads: cached, else built in place of the
 * least recently used one. */
static int plan_for(lt_exec *e, const lt_program *p, int nth, lt__plan **out) {
    int i = 0;
    while (i < LT__PLANS && e->plans[i].plan &&
           (e->plans[i].prog != p->id || e->plans[i].structure_gen != p->structure_gen ||
            e->plans[i].nth != nth))
        i++;
    if (i == LT__PLANS || !e->plans[i].plan) {
        if (i == LT__PLANS) i = LT__PLANS - 1;
        lt__plan_free(e->plans[i].plan);
        memset(&e->plans[i], 0, sizeof e->plans[i]);
        lt__plan *pl;
        int rc = lt__plan_build(p, &e->params, nth, !e->flat, &pl);
        if (rc) return rc;
        e->plans[i] = (plan_slot){.prog = p->id, .structure_gen = p->structure_gen, .nth = nth,
                                  .plan = pl};
    }
    plan_slot s = e->plans[i];
    memmove(&e->plans[1], &e->plans[0], (size_t)i * sizeof e->plans[0]);
    e->plans[0] = s;
    *out = s.plan;
    return LT_OK;
}

int lt_exec_step(lt_exec *e, lt_program *p, lt_pool *pool, int nth, const lt_step *step,
                 lt_exec_stats *stats) {
    if (!p->finalized) return lt_error(LT_ESTATE, "program %s is not finalized", p->name);
    if (nth < 0)
        return lt_error(LT_EINVAL, "program %s: %d threads (0 = the whole pool)", p->name, nth);
    const int all = lt_pool_size(pool);
    if (nth == 0 || nth > all) nth = all;
    if (e->kind == LT_EXEC_DISPATCH) return lt__exec_dispatch(p, pool, nth, step, stats);
    if (nth > 64) return lt_error(LT_EINVAL, "looped executor: at most 64 threads");
    lt__plan *pl;
    int rc = plan_for(e, p, nth, &pl);
    if (rc) return rc;
    return lt__exec_looped(p, pl, &e->params, pool, nth, step, stats);
}

int lt_exec_node_tasks(const lt_exec *e, const lt_program *p, int node, const lt_params *kp,
                       int nth, int tiles) {
    return lt__looped_node_tasks(p, &e->params, node, kp, nth, tiles);
}

/* Execution numbers: relaxed suffices, only uniqueness matters (the pool's
 * hand-off publishes the step to the workers). */
static _Atomic uint64_t exec_seq;

uint64_t lt__exec_next_seq(void) {
    return atomic_fetch_add_explicit(&exec_seq, 1, memory_order_relaxed) + 1;
}

const char *lt_executor_name(lt_executor e) { return e == LT_EXEC_LOOPED ? "looped" : "dispatch"; }

int lt_executor_parse(const char *s, lt_executor *out) {
    if (!strcmp(s, "looped")) *out = LT_EXEC_LOOPED;
    else if (!strcmp(s, "dispatch")) *out = LT_EXEC_DISPATCH;
    else return lt_error(LT_EINVAL, "unknown executor '%s' (expected looped or dispatch)", s);
    return LT_OK;
}

/* ---- for tests ---- */

const lt__plan *lt__exec_plan(lt_exec *e, lt_program *p, int nth) {
    lt__plan *pl;
    if (!p->finalized || nth < 1 || plan_for(e, p, nth, &pl)) return NULL;
    return pl;
}

void lt__exec_set_flat(lt_exec *e, bool flat) {
    e->flat = flat;
    plans_drop(e);
}

int lt__looped_tasks(lt_exec *e, lt_program *p, int nth, int node) {
    const lt__plan *pl = lt__exec_plan(e, p, nth);
    if (!pl || node < 0 || node >= p->n_nodes) return -1;
    lt__sched_node sn;
    lt__plan_node(pl, node, &sn);
    return sn.n_tasks;
}

int lt__looped_deps(lt_exec *e, lt_program *p, int nth, int node, int *fine) {
    const lt__plan *pl = lt__exec_plan(e, p, nth);
    if (!pl || node < 0 || node >= p->n_nodes) return -1;
    lt__sched_node sn;
    lt__plan_node(pl, node, &sn);
    *fine = sn.n_fine;
    return sn.n_deps;
}
