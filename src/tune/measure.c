/* Times one node of a program in isolation, split over the pool the way the
 * looped executor splits it (its task count for the parameters being timed,
 * from a shared counter). A
 * node inside a LOOP runs as all of its iterations back to back: each
 * iteration reads another layer's weights, so the working set is the whole
 * model's share of that node and a memory-bound decode kernel is measured
 * streaming from memory, not from a cache warmed by the previous run.
 * A node that reads what it writes (in place, accumulating, or an output
 * aliasing an input) would drift run after run (a swiglu applied to its own
 * output a thousand times ends in infinities and denormals, which are slow):
 * those buffers are saved once and restored after every run, untimed, and
 * so are the cache rows a store (KV_STORE, a matvec's store epilogue) writes
 * at the step's position: timing leaves a generation's state as it found it. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tune/tune_internal.h"

typedef struct {
    _Alignas(LT_CACHE_LINE) atomic_int next;
} task_ctr;

struct lt_node_timer {
    lt_pool *pool;
    const lt_exec *exec; /* splits the node as it would */
    const lt_program *p;
    int node, tiles;
    lt_kernel_id kernel;
    bool cold; /* evict the weights before each run */
    lt_kernel_fn fn;
    lt_call *calls; /* [n_inst] copies of the instances' calls; params set per run */
    int n_inst;
    int n_tasks;
    lt_step step;
    task_ctr *ctr;  /* [n_inst] */
    struct kept {
        void *data;
        void *saved;
        size_t nbytes;
    } *keep; /* [n_keep]: an instance may keep several, every layer its cache row */
    int n_keep, cap_keep;
};

static bool overlaps(const lt_tensor *a, const lt_tensor *b) {
    const char *a0 = a->data, *b0 = b->data;
    return a0 < b0 + lt_tensor_span(b) && b0 < a0 + lt_tensor_span(a);
}

/* Records bytes [data, data + nb) to restore before every run. */
static int keep(lt_node_timer *t, void *data, size_t nb) {
    for (int k = 0; k < t->n_keep; k++)
        if (t->keep[k].data == data) return LT_OK;
    if (t->n_keep == t->cap_keep) {
        int nc = t->cap_keep ? 2 * t->cap_keep : 8;
        struct kept *nk = realloc(t->keep, (size_t)nc * sizeof *nk);
        if (!nk) return lt_error(LT_ENOMEM, "node timer: out of memory");
        t->keep = nk;
        t->cap_keep = nc;
    }
    void *copy = malloc(nb);
    if (!copy) return lt_error(LT_ENOMEM, "node timer: out of memory");
    memcpy(copy, data, nb);
    t->keep[t->n_keep].data = data;
    t->keep[t->n_keep].saved = copy;
    t->keep[t->n_keep++].nbytes = nb;
    return LT_OK;
}

/* The rows of its cache a store writes at the step's position, or NULL. */
static const lt_tensor *stored_cache(lt_kernel_id id, const lt_call *c, int64_t *rows) {
    if (id == LT_K_KV_STORE && c->op[0] && c->op[1]) {
        *rows = c->op[1]->ne[1];
        return c->op[0];
    }
    if (id == LT_K_MATVEC && (c->ia[2] & LT_MV_POST_STORE) && c->op[4]) {
        *rows = 1;
        return c->op[4];
    }
    return NULL;
}

/* Records the buffers instance calls write and also read, and the cache
 * rows they store, to restore them. */
static int keep_state(lt_node_timer *t, lt_kernel_id id) {
    for (int i = 0; i < t->n_inst; i++) {
        const lt_call *c = &t->calls[i];
        for (int o = 0; o < LT_MAX_OPERANDS; o++) {
            if (!c->op[o] || !lt_kernel_writes(id, c, o)) continue;
            bool reread = lt_kernel_reads(id, c, o);
            for (int r = 0; r < LT_MAX_OPERANDS && !reread; r++)
                reread = r != o && c->op[r] && lt_kernel_reads(id, c, r) &&
                         overlaps(c->op[o], c->op[r]);
            if (!reread) continue;
            int rc = keep(t, c->op[o]->data, lt_tensor_span(c->op[o]));
            if (rc) return rc;
        }
        int64_t rows = 0;
        const lt_tensor *cache = stored_cache(id, c, &rows);
        const int64_t pos = t->step.pos;
        if (cache && pos >= 0 && pos + rows <= cache->ne[1]) {
            int rc = keep(t, (char *)cache->data + (size_t)pos * cache->nb[1],
                          (size_t)rows * cache->nb[1]);
            if (rc) return rc;
        }
    }
    return LT_OK;
}

int lt_node_timer_init(lt_node_timer **out, const lt_exec *e, lt_program *p, int node,
                       lt_pool *pool, const lt_step *step, int tasks_per_thread) {
    *out = NULL;
    if (node < 0 || node >= lt_program_n_nodes(p)) return lt_error(LT_EINVAL, "no node %d", node);
    if (tasks_per_thread < 1) return lt_error(LT_EINVAL, "tasks per thread must be >= 1");
    int first = node, stride = 1, count = 1;
    for (int i = 0; i < lt_program_n_loops(p); i++) {
        lt_loop_info L;
        lt_program_loop(p, i, &L);
        if (node >= L.first && node < L.first + L.n_iter * L.body_len) {
            first = L.first + (node - L.first) % L.body_len;
            stride = L.body_len;
            count = L.n_iter;
        }
    }
    lt_node_timer *t = calloc(1, sizeof *t);
    if (!t) return lt_error(LT_ENOMEM, "node timer: out of memory");
    t->calls = malloc((size_t)count * sizeof *t->calls);
    t->ctr = lt_aligned_alloc(LT_CACHE_LINE, (size_t)count * sizeof *t->ctr);
    if (!t->calls || !t->ctr) {
        lt_node_timer_free(t);
        return lt_error(LT_ENOMEM, "node timer: out of memory");
    }
    lt_node_info ni;
    lt_program_node(p, node, &ni);
    for (int it = 0; it < count; it++) t->calls[it] = *lt_program_call(p, first + it * stride);
    t->n_inst = count;
    t->pool = pool;
    t->kernel = ni.kernel;
    t->fn = lt_kernel_fn_for(lt_kernel_get(ni.kernel), lt_isa_active());
    int nth = lt_pool_size(pool);
    t->exec = e;
    t->p = p;
    t->node = node;
    t->tiles = tasks_per_thread;
    t->n_tasks = lt_exec_node_tasks(e, p, node, NULL, nth, tasks_per_thread);
    if (t->n_tasks < 1) {
        lt_node_timer_free(t);
        return lt_error(LT_ESTATE, "node timer: the program is not finalized");
    }
    t->step = *step;
    int rc = keep_state(t, ni.kernel);
    if (rc) {
        lt_node_timer_free(t);
        return rc;
    }
    *out = t;
    return LT_OK;
}

void lt_node_timer_free(lt_node_timer *t) {
    if (!t) return;
    for (int k = 0; k < t->n_keep; k++) free(t->keep[k].saved);
    free(t->keep);
    free(t->calls);
    lt_aligned_free(t->ctr);
    free(t);
}

int lt_node_timer_instances(const lt_node_timer *t) { return t->n_inst; }

void lt_node_timer_set_cold(lt_node_timer *t, bool cold) { t->cold = cold; }

/* The instances' weight matrices out of the caches (an embedding table is
 * left: a step reads one row of it). */
static void evict_weights(const lt_node_timer *t) {
    if (t->kernel != LT_K_MATVEC && t->kernel != LT_K_MATMUL) return;
    for (int i = 0; i < t->n_inst; i++) {
        const lt_tensor *w = t->calls[i].op[1];
        if (w && w->data) lt_cache_evict(w->data, lt_tensor_span(w));
    }
}

static void run_all(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    lt_node_timer *t = arg;
    for (int i = 0; i < t->n_inst; i++) {
        int u;
        while ((u = atomic_fetch_add_explicit(&t->ctr[i].next, 1, memory_order_relaxed)) <
               t->n_tasks)
            t->fn(&t->calls[i], &t->step, u, t->n_tasks);
        /* the next instance writes the same activations: all threads finish first */
        lt_pool_barrier(t->pool);
    }
}

/* Execution numbers of the timer's runs: a space of their own (the top bit
 * set), so a run's per-thread caches (quantised or normalised x, keyed by
 * call and seq) serve its tasks as the executors' do, and never a later run. */
static _Atomic uint64_t timer_seq = 1ull << 63;

static long invol_switches(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_nivcsw : 0;
}

double lt_node_timer_run(lt_node_timer *t, const lt_params *p, bool *contended) {
    /* as many tasks as the executor would cut the node into with p (a
     * matvec's row groups change with rows_per_task) */
    int nt = lt_exec_node_tasks(t->exec, t->p, t->node, p, lt_pool_size(t->pool), t->tiles);
    if (nt >= 1) t->n_tasks = nt;
    for (int i = 0; i < t->n_inst; i++) {
        t->calls[i].params = *p;
        atomic_store_explicit(&t->ctr[i].next, 0, memory_order_relaxed);
    }
    t->step.seq = atomic_fetch_add_explicit(&timer_seq, 1, memory_order_relaxed);
    if (t->cold) evict_weights(t);
    long cs0 = invol_switches();
    uint64_t t0 = lt_now_ns();
    lt_pool_run(t->pool, run_all, t);
    uint64_t t1 = lt_now_ns();
    if (contended) *contended = invol_switches() != cs0;
    /* every run starts from, and leaves, the state the timer found */
    for (int k = 0; k < t->n_keep; k++)
        memcpy(t->keep[k].data, t->keep[k].saved, t->keep[k].nbytes);
    return (double)(t1 - t0);
}
