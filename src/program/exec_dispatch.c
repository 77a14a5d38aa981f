/* The baseline executor: each node split across all threads, then a global
 * barrier (what ggml does). Threads enter once per step; the barrier is the
 * only synchronisation, so every node sees all writes of the one before. */
#include "program/exec_internal.h"

typedef struct {
    lt_program *p;
    lt_pool *pool;
    const lt_step *step;
    bool timed;
    _Alignas(LT_CACHE_LINE) struct {
        uint64_t wait_ns;
        char pad[LT_CACHE_LINE - sizeof(uint64_t)];
    } per_thread[64];
} dispatch_ctx;

static void dispatch_worker(void *arg, int ith, int nth) {
    dispatch_ctx *c = arg;
    lt_program *p = c->p;
    uint64_t wait = 0;
    const lt_exec_observer *obs = p->obs.node_done ? &p->obs : NULL;
    for (int i = 0; i < p->n_nodes; i++) {
        lt__node *n = &p->nodes[i];
        uint64_t t0 = obs ? lt_now_ns() : 0;
        n->fn(&n->call, c->step, ith, nth);
        uint64_t t1 = obs ? lt_now_ns() : 0, w = 0;
        if (i + 1 < p->n_nodes) { /* the pool's join ends the step */
            if (c->timed || obs) {
                uint64_t b0 = obs ? t1 : lt_now_ns();
                lt_pool_barrier(c->pool);
                w = lt_now_ns() - b0;
                wait += w;
            } else {
                lt_pool_barrier(c->pool);
            }
        }
        if (obs) obs->node_done(obs->user, ith, i, t0, t1, w);
    }
    if (ith < 64) c->per_thread[ith].wait_ns = wait;
}

int lt__exec_dispatch(lt_program *p, lt_pool *pool, int nth, const lt_step *step,
                      lt_exec_stats *stats) {
    LT_ASSERT(nth >= 1 && nth <= lt_pool_size(pool));
    if (p->n_nodes == 0) return LT_OK;
    lt_step st = *step;
    st.seq = lt__exec_next_seq();
    dispatch_ctx c = {.p = p, .pool = pool, .step = &st, .timed = stats != NULL};
    uint64_t t0 = stats ? lt_now_ns() : 0;
    lt_pool_run_n(pool, nth, dispatch_worker, &c);
    if (stats) {
        stats->busy_ns = (lt_now_ns() - t0) * (uint64_t)nth;
        stats->sync_points = (uint64_t)(p->n_nodes - 1) * (uint64_t)nth; /* barriers, summed over threads */
        stats->wait_ns = 0;
        for (int i = 0; i < nth && i < 64; i++) stats->wait_ns += c.per_thread[i].wait_ns;
    }
    return LT_OK;
}
