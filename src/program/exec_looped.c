/* The looped executor. Threads enter once per step and walk the node list
 * (every LOOP's iterations in order) on their own: no per-node dispatch and
 * no global barrier. Each node's work is cut into tasks that threads take
 * from the node's `next` counter; finishing a task bumps `done`. A thread
 * starts node i once every node i depends on has done == n_tasks, except
 * where both kernels say which columns each task writes and reads
 * (lt_kernel.task_cols): then each task waits only for the producer tasks
 * that write what it reads, on their own done flags.
 *
 * Ordering: `done` is incremented with release after the task's writes and
 * read with acquire by waiters, so a node's outputs are visible to every
 * thread that passed its dependency check. Dependencies are derived from
 * buffers (views resolved to their parent): read-after-write on what a
 * node reads, write-after-write and write-after-read on what it writes.
 *
 * Where true all-to-all dependencies remain (each is a real data flow, not
 * an artefact of the executor): a norm needs the whole residual row, every
 * projection needs the whole normalised row, the output projections need
 * every head's attention output. (Attention's heads need only their own q
 * rows and kv head's cache columns: task level.) Waiting there is only for
 * the producing node, and a thread that waits prefetches the weights of the
 * node it waits to enter, so the memory pipeline keeps streaming across
 * layer boundaries.
 *
 * The schedule of a LOOP's third and later iterations is copied from the
 * iteration before rather than derived again (the LOOP records say which
 * nodes are the same calls on other weights and state): see below. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "program/exec_internal.h"

/* Defaults measured side by side (looptune bench, 2 threads): with the rope
 * and the cache stores folded into the projections, 16 KiB tasks cut the
 * sync share of stories15M q8_0 from 3.2-4.0% (32 KiB) to 1.7-2.0% at the
 * same tokens/s; the larger models did not move beyond noise. */
static const lt_param_def looped_params[LT_XP_COUNT] = {
    [LT_XP_TILES] = {"tiles_per_thread", 7, {1, 2, 4, 8, 16, 32, 64}, 32},
    [LT_XP_PREFETCH_KB] = {"prefetch_kb", 6, {0, 16, 64, 256, 1024, 4096}, 256},
    [LT_XP_SYNC] = {"sync", 2, {0, 1}, 0},
    [LT_XP_MIN_TASK_KB] = {"min_task_kb", 5, {0, 16, 32, 64, 128}, 16},
};
_Static_assert(LT_EXEC_MAX_TILES == 64, "largest tiles_per_thread value");

const lt_param_def *lt_exec_looped_params(int *n_params) {
    *n_params = LT_XP_COUNT;
    return looped_params;
}

/* How long a waiting thread spins before it starts yielding its CPU. A
 * dependency normally resolves within a task's duration (microseconds). */
#define LT__SPIN_BEFORE_YIELD_NS 50000u

/* Per node: its schedule and its two counters on a cache line of their own. */
typedef struct {
    _Alignas(LT_CACHE_LINE) atomic_int next; /* tasks handed out */
    atomic_int done;                         /* tasks finished */
} lt__counters;

/* A dependency at task level: task u of the consumer needs tasks
 * [range[2u], range[2u+1]) of node d. */
typedef struct {
    int d;
    int *range;
} lt__fine;

typedef struct {
    int n_tasks;
    int dep_begin, dep_end;   /* range in plan->deps: whole-node dependencies */
    int fine_begin, fine_end; /* range in plan->fine */
    int flag_base;            /* its tasks' done flags in plan->flags, or -1 */
    const char *pf_base;      /* weights this node streams (prefetch target) */
    size_t pf_bytes;
} lt__inst;

struct lt__plan {
    int nth;
    int sync;     /* the sync parameter it was built under */
    int n_copied; /* nodes whose schedule was replicated from a LOOP body */
    lt__inst *inst;   /* [n_nodes] */
    int *deps;        /* node ids */
    lt__fine *fine;
    int n_fine;
    atomic_uchar *flags; /* [n_flags]: done flags of the tasks of producers in fine */
    int n_flags;
    lt__counters *ctr; /* [n_nodes] */
};

void lt__plan_free(struct lt__plan *plan) {
    if (!plan) return;
    free(plan->inst);
    free(plan->deps);
    for (int f = 0; f < plan->n_fine; f++) free(plan->fine[f].range);
    free(plan->fine);
    free(plan->flags);
    lt_aligned_free(plan->ctr);
    free(plan);
}


/* Appends d to the dependency list. */
static int push_dep(int **deps, int *n, int *cap, int d) {
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 256;
        int *nd = realloc(*deps, (size_t)nc * sizeof *nd);
        if (!nd) return lt_error(LT_ENOMEM, "out of memory planning the looped executor");
        *deps = nd;
        *cap = nc;
    }
    (*deps)[(*n)++] = d;
    return LT_OK;
}

/* Appends d to the list of the node whose dependencies start at begin,
 * unless it is there already. */
static int add_dep(int **deps, int *n, int *cap, int begin, int d) {
    for (int i = begin; i < *n; i++)
        if ((*deps)[i] == d) return LT_OK;
    return push_dep(deps, n, cap, d);
}

/* t tasks fitted to a kernel's pieces: every task gets the same whole
 * number of pieces (the last one fewer), about units / t, and there are never
 * more than cap tasks (a task may own a row of per-task scratch). Tasks holding
 * pieces unevenly (2 of 9 pieces in one task, 1 in another) would leave one
 * thread working while the next node's threads wait for it. */
static int fit_units(int t, int64_t units, int cap) {
    if (units <= 0) return t;
    int64_t per = (units + t / 2) / t;
    if (per < 1) per = 1;
    if ((units + per - 1) / per > cap) per = (units + cap - 1) / cap; /* never above cap */
    return (int)((units + per - 1) / per);
}

/* Tasks for a node: up to `tasks`, but no smaller than min_task bytes of
 * memory traffic each, so a tiny node (a norm, rope, a small projection of a
 * small model) is not cut into pieces whose hand-off between cores costs more
 * than the work. Nodes that read state (the KV cache: attention) grow with
 * the position, so they always get every task their kernel can use. */
static int node_tasks(const lt_program *p, const lt__node *n, const lt_call *call, int tasks,
                      double min_task) {
    const lt_kernel *k = lt_kernel_get(n->kernel);
    bool reads_state = false;
    for (int o = 0; o < n->n_ops; o++)
        reads_state |= n->ops[o] >= 0 && p->bufs[n->ops[o]].kind == LT_BUF_STATE &&
                       lt_kernel_reads(n->kernel, call, o);
    int t = tasks;
    if (min_task > 0 && !reads_state && k->cost) {
        lt_step one = {.pos = 0, .n_tokens = call->op[0] ? call->op[0]->ne[1] : 1};
        double bytes = 0, flops = 0;
        k->cost(call, &one, &bytes, &flops);
        double want = bytes / min_task;
        t = want >= tasks ? tasks : want < 1 ? 1 : (int)want;
    }
    return fit_units(t, k->units ? k->units(call) : 0, tasks);
}

int lt__looped_node_tasks(const lt_program *p, const lt_params *xp, int node, const lt_params *kp,
                          int nth, int tiles) {
    if (!p->finalized || node < 0 || node >= p->n_nodes || nth < 1) return -1;
    if (nth == 1) return 1;
    const lt__node *n = &p->nodes[node];
    lt_call call = n->call;
    if (kp) call.params = *kp;
    if (tiles <= 0) tiles = xp->v[LT_XP_TILES];
    return node_tasks(p, n, &call, nth * tiles, (double)xp->v[LT_XP_MIN_TASK_KB] * 1024.0);
}

/* Whether node i depends on node d (before it) only by reading what d wrote,
 * through buffers both kernels describe column by column (each exactly the
 * buffer d writes). Then range[2u], range[2u + 1] = the tasks of d that task
 * u of i needs. last_writer and readers: the state before node i. */
static bool fine_dep(const lt_program *p, const struct lt__plan *pl, int i, int d,
                     const int *last_writer, int *const *readers, const int *n_readers,
                     int *range) {
    const lt__node *n = &p->nodes[i], *m = &p->nodes[d];
    const lt_kernel *kn = lt_kernel_get(n->kernel), *km = lt_kernel_get(m->kernel);
    if (!kn->task_cols || !km->task_cols) return false;
    const int nt = pl->inst[i].n_tasks, mt = pl->inst[d].n_tasks;
    for (int u = 0; u < nt; u++) {
        range[2 * u] = mt;
        range[2 * u + 1] = 0;
    }
    bool any = false;
    for (int o = 0; o < n->n_ops; o++) {
        const int b = n->ops[o], r = lt__buf_root(p, b);
        if (b < 0) continue;
        if (lt_kernel_writes(n->kernel, &n->call, o)) { /* after d's write or read of it */
            if (last_writer[r] == d) return false;
            for (int k = 0; k < n_readers[r]; k++)
                if (readers[r][k] == d) return false;
        }
        if (!lt_kernel_reads(n->kernel, &n->call, o) || last_writer[r] != d) continue;
        int od = -1;
        for (int q = 0; q < m->n_ops; q++) {
            if (m->ops[q] < 0 || lt__buf_root(p, m->ops[q]) != r ||
                !lt_kernel_writes(m->kernel, &m->call, q))
                continue;
            if (m->ops[q] != b || od >= 0) return false; /* a view, or written twice */
            od = q;
        }
        if (od < 0) return false;
        for (int u = 0; u < nt; u++) {
            int64_t c0, c1;
            if (!kn->task_cols(&n->call, o, u, nt, &c0, &c1)) return false;
            for (int t = 0; t < mt && c0 < c1; t++) {
                int64_t w0, w1;
                if (!km->task_cols(&m->call, od, t, mt, &w0, &w1)) return false;
                if (w0 < c1 && c0 < w1) {
                    if (t < range[2 * u]) range[2 * u] = t;
                    if (t + 1 > range[2 * u + 1]) range[2 * u + 1] = t + 1;
                }
            }
        }
        any = true;
    }
    for (int u = 0; u < nt; u++)
        if (range[2 * u] >= range[2 * u + 1]) range[2 * u] = range[2 * u + 1] = 0;
    return any;
}

/* Gives node d's tasks done flags, if they have none yet. */
static void give_flags(struct lt__plan *pl, int d) {
    if (pl->inst[d].flag_base < 0) {
        pl->inst[d].flag_base = pl->n_flags;
        pl->n_flags += pl->inst[d].n_tasks;
    }
}

/* Moves node i's dependencies that hold at task level from the whole-node
 * list to plan->fine. */
static int split_fine(const lt_program *p, struct lt__plan *pl, int i, const int *last_writer,
                      int *const *readers, const int *n_readers, int *n_deps) {
    lt__inst *in = &pl->inst[i];
    in->fine_begin = in->fine_end = pl->n_fine;
    if (pl->sync != 0 || pl->nth == 1) return LT_OK;
    int keep = in->dep_begin;
    for (int k = in->dep_begin; k < in->dep_end; k++) {
        const int d = pl->deps[k];
        int *range = malloc(2 * (size_t)in->n_tasks * sizeof *range);
        if (!range) return lt_error(LT_ENOMEM, "out of memory planning the looped executor");
        if (fine_dep(p, pl, i, d, last_writer, readers, n_readers, range)) {
            lt__fine *nf = realloc(pl->fine, (size_t)(pl->n_fine + 1) * sizeof *nf);
            if (!nf) {
                free(range);
                return lt_error(LT_ENOMEM, "out of memory planning the looped executor");
            }
            pl->fine = nf;
            pl->fine[pl->n_fine++] = (lt__fine){.d = d, .range = range};
            give_flags(pl, d);
        } else {
            free(range);
            pl->deps[keep++] = d;
        }
    }
    in->dep_end = keep;
    *n_deps = keep;
    in->fine_end = pl->n_fine;
    return LT_OK;
}

/* ---- LOOP records: one body's dependencies, replicated ------------------------
 *
 * In a LOOP the iterations are the same nodes on other WEIGHT/STATE buffers
 * (the slots). Take a loop whose slots bind, in every iteration past the
 * first, buffers that no other iteration binds, that no operand bound in
 * every iteration shares, and that nothing before the loop touched. Then
 * what a node of iteration it >= 1 depends on is, through each buffer:
 *   - a buffer of its own iteration's slots: nodes of the same iteration;
 *   - a buffer bound in every iteration that the body writes: the nodes of
 *     iterations it-1 and it since the body's last write to it (iteration
 *     it-1 wrote it, so nothing earlier counts);
 *   - a buffer bound in every iteration that the body never writes: its
 *     writer before the loop, the same node for every iteration.
 * So iteration it >= 2 depends on exactly what iteration it-1 depends on,
 * each node inside the loop moved one body on and each node before it kept,
 * and so do its task-level dependencies (the same kernels on the same
 * shapes: the same task ranges) and its task counts. plan_build derives the
 * first two iterations node by node and copies the rest; a loop that does
 * not qualify is derived node by node throughout. Both give the same
 * schedule (tests/program/test_exec_looped.c compares them node by node). */

static bool same_tensor_shape(const lt_tensor *a, const lt_tensor *b) {
    return a->dtype == b->dtype && a->layout == b->layout && !memcmp(a->ne, b->ne, sizeof a->ne) &&
           !memcmp(a->nb, b->nb, sizeof a->nb);
}

/* Whether L qualifies for replication (see above), given the accesses
 * before it (last_writer, n_readers). owner: [n_bufs] scratch, all -1 on
 * entry and on return. */
static bool loop_regular(const lt_program *p, const lt__loop *L, const int *last_writer,
                         const int *n_readers, int *owner) {
    const int B = L->body_len, S = L->n_slots;
    if (L->n_iter < 3) return false;
    /* slot_of[j][o]: the slot operand o of body node j is, or -1 */
    int(*slot_of)[LT_MAX_OPERANDS] = malloc((size_t)B * sizeof *slot_of);
    if (!slot_of) return false; /* derived node by node: the same schedule */
    for (int j = 0; j < B; j++)
        for (int o = 0; o < LT_MAX_OPERANDS; o++) slot_of[j][o] = -1;
    for (int s = 0; s < S; s++) slot_of[L->slot[s][0]][L->slot[s][1]] = s;
    bool ok = true;
    for (int it = 0; it < L->n_iter && ok; it++) {
        for (int s = 0; s < S && ok; s++) {
            const int b = lt__buf_root(p, L->bind[it * S + s]);
            if (b < 0 || (owner[b] >= 0 && owner[b] != it)) ok = false; /* two iterations' */
            else if (it >= 1 && (last_writer[b] >= 0 || n_readers[b] > 0)) ok = false;
            else owner[b] = it;
            /* slots that share a buffer share it in every iteration */
            for (int s2 = 0; s2 < s && ok; s2++)
                ok = (L->bind[it * S + s] == L->bind[it * S + s2]) == (L->bind[s] == L->bind[s2]);
        }
    }
    for (int j = 0; j < B && ok; j++) {
        const lt__node *a = &p->nodes[L->first + j];
        for (int it = 1; it < L->n_iter && ok; it++) {
            const lt__node *n = &p->nodes[L->first + it * B + j];
            ok = n->kernel == a->kernel && n->n_ops == a->n_ops && n->flags == a->flags &&
                 !memcmp(n->ia, a->ia, sizeof a->ia) && !memcmp(n->fa, a->fa, sizeof a->fa) &&
                 !memcmp(&n->call.params, &a->call.params, sizeof a->call.params);
            for (int o = 0; o < a->n_ops && ok; o++) {
                const int s = slot_of[j][o];
                if (s >= 0) {
                    ok = n->ops[o] == L->bind[it * S + s] && a->ops[o] >= 0 && n->ops[o] >= 0 &&
                         p->bufs[n->ops[o]].kind == p->bufs[a->ops[o]].kind &&
                         same_tensor_shape(&p->bufs[n->ops[o]].t, &p->bufs[a->ops[o]].t);
                } else {
                    const int r = lt__buf_root(p, a->ops[o]);
                    ok = n->ops[o] == a->ops[o] && (r < 0 || owner[r] < 0);
                }
            }
        }
    }
    for (int k = 0; k < L->n_iter * S; k++) {
        const int b = lt__buf_root(p, L->bind[k]);
        if (b >= 0) owner[b] = -1;
    }
    free(slot_of);
    return ok;
}

/* Node i's schedule as node i - B's, every dependency on a node at or past
 * `first` (the loop's) moved B on. */
static int replicate(struct lt__plan *pl, int i, int B, int first, int *n_deps, int *cap_deps) {
    const lt__inst src = pl->inst[i - B];
    lt__inst *in = &pl->inst[i];
    in->n_tasks = src.n_tasks;
    in->flag_base = -1;
    in->dep_begin = *n_deps;
    for (int k = src.dep_begin; k < src.dep_end; k++) {
        const int d = pl->deps[k];
        int rc = push_dep(&pl->deps, n_deps, cap_deps, d >= first ? d + B : d);
        if (rc) return rc;
    }
    in->dep_end = *n_deps;
    in->fine_begin = pl->n_fine;
    for (int f = src.fine_begin; f < src.fine_end; f++) {
        const int d = pl->fine[f].d >= first ? pl->fine[f].d + B : pl->fine[f].d;
        int *range = malloc(2 * (size_t)in->n_tasks * sizeof *range);
        lt__fine *nf = range ? realloc(pl->fine, (size_t)(pl->n_fine + 1) * sizeof *nf) : NULL;
        if (!nf) {
            free(range);
            return lt_error(LT_ENOMEM, "out of memory planning the looped executor");
        }
        pl->fine = nf;
        memcpy(range, pl->fine[f].range, 2 * (size_t)in->n_tasks * sizeof *range);
        pl->fine[pl->n_fine++] = (lt__fine){.d = d, .range = range};
        give_flags(pl, d);
    }
    in->fine_end = pl->n_fine;
    return LT_OK;
}

/* ---- the schedule ---------------------------------------------------------------- */

/* Builds the schedule: task counts and dependency lists. */
int lt__plan_build(const lt_program *p, const lt_params *xp, int nth, bool use_loops,
                   struct lt__plan **out) {
    struct lt__plan *pl = calloc(1, sizeof *pl);
    int *last_writer = malloc((size_t)(p->n_bufs + 1) * sizeof *last_writer);
    int *owner = malloc((size_t)(p->n_bufs + 1) * sizeof *owner);
    /* readers since the last write, per buffer: a small list each */
    int **readers = calloc((size_t)p->n_bufs + 1, sizeof *readers);
    int *n_readers = calloc((size_t)p->n_bufs + 1, sizeof *n_readers);
    int rc = LT_OK;
    if (!pl || !last_writer || !owner || !readers || !n_readers) goto oom;
    pl->nth = nth;
    pl->sync = xp->v[LT_XP_SYNC];
    pl->inst = calloc((size_t)p->n_nodes + 1, sizeof *pl->inst);
    pl->ctr = lt_aligned_alloc(LT_CACHE_LINE, (size_t)(p->n_nodes + 1) * sizeof *pl->ctr);
    if (!pl->inst || !pl->ctr) goto oom;
    for (int b = 0; b < p->n_bufs; b++) last_writer[b] = owner[b] = -1;
    int n_deps = 0, cap_deps = 0;
    const int tasks = nth * xp->v[LT_XP_TILES];
    const double min_task = (double)xp->v[LT_XP_MIN_TASK_KB] * 1024.0;
    int li = 0;           /* the loop at or after node i */
    bool regular = false; /* whether loop li's iterations past the second are copies */
    for (int i = 0; i < p->n_nodes; i++) {
        const lt__node *n = &p->nodes[i];
        lt__inst *in = &pl->inst[i];
        while (li < p->n_loops &&
               i >= p->loops[li].first + p->loops[li].n_iter * p->loops[li].body_len)
            li++;
        const lt__loop *L = li < p->n_loops ? &p->loops[li] : NULL;
        if (L && i == L->first)
            regular = use_loops && loop_regular(p, L, last_writer, n_readers, owner);
        if (L && regular && i >= L->first + 2 * L->body_len) {
            if ((rc = replicate(pl, i, L->body_len, L->first, &n_deps, &cap_deps))) goto fail;
            pl->n_copied++;
        } else {
            in->n_tasks = nth == 1 ? 1 : node_tasks(p, n, &n->call, tasks, min_task);
            in->flag_base = -1;
            in->dep_begin = n_deps;
            for (int o = 0; o < n->n_ops && rc == LT_OK; o++) {
                int b = lt__buf_root(p, n->ops[o]);
                if (b < 0) continue;
                if (lt_kernel_reads(n->kernel, &n->call, o) && last_writer[b] >= 0)
                    rc = add_dep(&pl->deps, &n_deps, &cap_deps, in->dep_begin, last_writer[b]);
                if (lt_kernel_writes(n->kernel, &n->call, o)) {
                    if (last_writer[b] >= 0 && rc == LT_OK)
                        rc = add_dep(&pl->deps, &n_deps, &cap_deps, in->dep_begin, last_writer[b]);
                    for (int r = 0; r < n_readers[b] && rc == LT_OK; r++)
                        if (readers[b][r] != i)
                            rc = add_dep(&pl->deps, &n_deps, &cap_deps, in->dep_begin,
                                         readers[b][r]);
                }
            }
            if (rc) goto fail;
            in->dep_end = n_deps;
            if ((rc = split_fine(p, pl, i, last_writer, readers, n_readers, &n_deps))) goto fail;
        }
        /* record this node's accesses for the nodes after it */
        for (int o = 0; o < n->n_ops; o++) {
            int b = lt__buf_root(p, n->ops[o]);
            if (b < 0) continue;
            if (lt_kernel_writes(n->kernel, &n->call, o)) {
                last_writer[b] = i;
                n_readers[b] = 0;
            }
        }
        for (int o = 0; o < n->n_ops; o++) {
            int b = lt__buf_root(p, n->ops[o]);
            if (b < 0 || !lt_kernel_reads(n->kernel, &n->call, o)) continue;
            int *nr = realloc(readers[b], (size_t)(n_readers[b] + 1) * sizeof *nr);
            if (!nr) goto oom;
            readers[b] = nr;
            readers[b][n_readers[b]++] = i;
        }
        /* the node's weights: what a waiting thread prefetches */
        for (int o = 1; o < n->n_ops; o++) {
            int b = n->ops[o];
            if (b >= 0 && p->bufs[b].kind == LT_BUF_WEIGHT) {
                size_t sz = lt_tensor_span(&p->bufs[b].t);
                if (sz > in->pf_bytes) {
                    in->pf_base = p->bufs[b].t.data;
                    in->pf_bytes = sz;
                }
            }
        }
    }
    pl->flags = calloc((size_t)pl->n_flags + 1, sizeof *pl->flags);
    if (!pl->flags) goto oom;
    goto done;
oom:
    rc = lt_error(LT_ENOMEM, "out of memory planning the looped executor");
fail:
    lt__plan_free(pl);
    pl = NULL;
done:
    for (int b = 0; readers && b < p->n_bufs; b++) free(readers[b]);
    free(readers);
    free(n_readers);
    free(last_writer);
    free(owner);
    *out = pl;
    return rc;
}

void lt__plan_node(const struct lt__plan *pl, int node, lt__sched_node *out) {
    const lt__inst *in = &pl->inst[node];
    out->n_tasks = in->n_tasks;
    out->deps = pl->deps ? pl->deps + in->dep_begin : NULL;
    out->n_deps = in->dep_end - in->dep_begin;
    out->n_fine = in->fine_end - in->fine_begin;
    out->flag_base = in->flag_base;
}

int lt__plan_copied(const struct lt__plan *pl) { return pl->n_copied; }

void lt__plan_fine(const struct lt__plan *pl, int node, int f, int *producer, const int **range) {
    const lt__inst *in = &pl->inst[node];
    LT_ASSERT(f >= 0 && f < in->fine_end - in->fine_begin);
    *producer = pl->fine[in->fine_begin + f].d;
    *range = pl->fine[in->fine_begin + f].range;
}

typedef struct {
    lt_program *p;
    struct lt__plan *pl;
    const lt_params *xp;
    lt_pool *pool;
    const lt_step *step;
    bool timed;
    _Alignas(LT_CACHE_LINE) struct {
        uint64_t wait_ns, waits;
        char pad[LT_CACHE_LINE - 2 * sizeof(uint64_t)];
    } per_thread[64];
} looped_ctx;

/* Spins until node d has finished every task, prefetching up to `budget`
 * bytes of the weights of node `next` meanwhile. Returns the nanoseconds it
 * waited (0 if node d was already done: the clock is read only when a wait
 * really starts). */
static uint64_t wait_done(const struct lt__plan *pl, int d, const lt__inst *next, size_t *pf_off,
                          size_t budget) {
    const atomic_int *done = &pl->ctr[d].done;
    const int want = pl->inst[d].n_tasks;
    if (atomic_load_explicit(done, memory_order_acquire) >= want) return 0;
    /* spin (prefetching) while the producer is running; past a bound, the
     * producer is likely descheduled on a shared machine: yield the CPU
     * instead of burning the time slice it may need */
    const uint64_t t0 = lt_now_ns();
    uint64_t spins = 0;
    while (atomic_load_explicit(done, memory_order_acquire) < want) {
        if ((++spins & 255) == 0 && lt_now_ns() - t0 > LT__SPIN_BEFORE_YIELD_NS) sched_yield();
        if (*pf_off < budget && *pf_off < next->pf_bytes) {
            /* two cache lines per spin: the waiting core's L2 gets the rows
             * the first tasks of the next node will stream */
            __builtin_prefetch(next->pf_base + *pf_off, 0, 2); /* read, into L2 */
            __builtin_prefetch(next->pf_base + *pf_off + LT_CACHE_LINE, 0, 2);
            *pf_off += 2 * LT_CACHE_LINE;
        } else {
            lt__cpu_relax();
        }
    }
    uint64_t w = lt_now_ns() - t0;
    return w ? w : 1;
}

/* Spins until the producer tasks task u of node `in` needs are done (its
 * task-level dependencies). Returns the nanoseconds it waited, 0 if none. */
static uint64_t wait_tasks(const struct lt__plan *pl, const lt__inst *in, int u) {
    uint64_t t0 = 0, spins = 0;
    for (int f = in->fine_begin; f < in->fine_end; f++) {
        const lt__fine *fd = &pl->fine[f];
        const atomic_uchar *flag = &pl->flags[pl->inst[fd->d].flag_base];
        for (int t = fd->range[2 * u]; t < fd->range[2 * u + 1]; t++) {
            if (atomic_load_explicit(&flag[t], memory_order_acquire)) continue;
            if (!t0) t0 = lt_now_ns();
            while (!atomic_load_explicit(&flag[t], memory_order_acquire)) {
                if ((++spins & 255) == 0 && lt_now_ns() - t0 > LT__SPIN_BEFORE_YIELD_NS)
                    sched_yield();
                lt__cpu_relax();
            }
        }
    }
    if (!t0) return 0;
    uint64_t w = lt_now_ns() - t0;
    return w ? w : 1;
}

static void looped_worker(void *arg, int ith, int nth) {
    looped_ctx *c = arg;
    lt_program *p = c->p;
    const struct lt__plan *pl = c->pl;
    const size_t budget = (size_t)c->xp->v[LT_XP_PREFETCH_KB] << 10;
    const bool barrier = c->xp->v[LT_XP_SYNC] == 1;
    uint64_t wait_ns = 0, waits = 0;
    const lt_exec_observer *obs = p->obs.node_done ? &p->obs : NULL;
    const bool timed = c->timed || obs;
    uint64_t t_prev = 0; /* when this thread finished its last node (observer only) */
    for (int i = 0; i < p->n_nodes; i++) {
        uint64_t node_wait = 0;
        const lt__node *n = &p->nodes[i];
        const lt__inst *in = &pl->inst[i];
        if (barrier && i > 0) {
            uint64_t t0 = timed ? lt_now_ns() : 0;
            lt_pool_barrier(c->pool);
            if (timed) node_wait += lt_now_ns() - t0;
            waits++;
        } else {
            size_t pf_off = 0;
            for (int k = in->dep_begin; k < in->dep_end; k++) {
                uint64_t w = wait_done(pl, pl->deps[k], in, &pf_off, budget);
                if (w) {
                    waits++;
                    node_wait += w;
                }
            }
        }
        wait_ns += node_wait;
        uint64_t t_first = 0, t_last = 0, task_wait = 0;
        /* guided self-scheduling: a thread takes 1/nth of the tasks left
         * (one sequential stream, few atomics), single tasks at the end
         * (threads finish a node together, so the next wait is short).
         * Every run starts a new stream whose first lines nothing has
         * prefetched: 1/nth rather than 1/(2 nth) halves the runs, and
         * measured at 2 threads (A/B, alternating processes) 1B q8_0 went
         * from 34.6-35.4 to 35.4-36.3 tokens/s in 7 of 7 rounds, stories110M
         * q8_0 +1-7%, f32 +1-3%. The price is a longer tail: 1B f32's sync
         * share went from 0.7-0.8% to 0.9-1.05% in the same A/B. */
        atomic_int *next = &pl->ctr[i].next, *done = &pl->ctr[i].done;
        const int nt = in->n_tasks;
        for (;;) {
            int left = nt - atomic_load_explicit(next, memory_order_relaxed);
            int k = left / nth;
            if (k < 1) k = 1;
            int t = atomic_fetch_add_explicit(next, k, memory_order_relaxed);
            if (t >= nt) break;
            int e = t + k < nt ? t + k : nt;
            /* a node that starts right after this thread's previous one
             * (no wait) starts when that one ended: one clock read per node */
            if (obs && !t_first) t_first = t_prev && !node_wait ? t_prev : lt_now_ns();
            for (int u = t; u < e; u++) {
                if (in->fine_begin < in->fine_end) {
                    uint64_t w = wait_tasks(pl, in, u);
                    if (w) {
                        waits++;
                        wait_ns += w;
                        task_wait += w;
                    }
                }
                n->fn(&n->call, c->step, u, nt);
                if (in->flag_base >= 0)
                    atomic_store_explicit(&pl->flags[in->flag_base + u], 1, memory_order_release);
            }
            atomic_fetch_add_explicit(done, e - t, memory_order_release);
        }
        if (obs && t_first) {
            t_last = lt_now_ns();
            obs->node_done(obs->user, ith, i, t_first, t_last, node_wait + task_wait);
            t_prev = t_last;
        }
    }
    if (ith < 64) {
        c->per_thread[ith].wait_ns = wait_ns;
        c->per_thread[ith].waits = waits;
    }
}

int lt__exec_looped(lt_program *p, struct lt__plan *pl, const lt_params *xp, lt_pool *pool,
                    int nth, const lt_step *step, lt_exec_stats *stats) {
    LT_ASSERT(pl->nth == nth && nth <= 64 && nth <= lt_pool_size(pool));
    /* counters restart every step; the pool's hand-off publishes the zeros */
    memset(pl->ctr, 0, (size_t)p->n_nodes * sizeof *pl->ctr);
    memset(pl->flags, 0, (size_t)pl->n_flags * sizeof *pl->flags);
    lt_step st = *step;
    st.seq = lt__exec_next_seq();
    looped_ctx c = {.p = p, .pl = pl, .xp = xp, .pool = pool, .step = &st, .timed = stats != NULL};
    uint64_t t0 = stats ? lt_now_ns() : 0;
    lt_pool_run_n(pool, nth, looped_worker, &c);
    if (stats) {
        stats->busy_ns = (lt_now_ns() - t0) * (uint64_t)nth;
        stats->wait_ns = stats->sync_points = 0;
        for (int i = 0; i < nth; i++) {
            stats->wait_ns += c.per_thread[i].wait_ns;
            stats->sync_points += c.per_thread[i].waits;
        }
    }
    return LT_OK;
}
