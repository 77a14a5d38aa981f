/* The looped executor against the dispatch executor on random programs full
 * of read-after-write, write-after-read and write-after-write hazards, for
 * 1-4 threads and every point of the executor's parameter space: every
 * activation must come out bit-identical. The executor front: parameters,
 * generations, thread counts, schedules cached per program and invalidated.
 * Random programs with LOOPs: the schedule built through the LOOP records is
 * the one derived node by node. */
#include <stdlib.h>
#include <string.h>

#include "looptune/program.h"
#include "program/exec_internal.h" /* lt__looped_tasks */
#include "exec_test.h"
#include "sched_test.h"
#include "test.h"

enum { D = 96, NACT = 4, NW = 3 };

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static float mats[NW][D * D], vecs[NW][D];

typedef struct {
    lt_program *p;
    int act[NACT], mat[NW], vec[NW];
} prog;

static void build(prog *g, int n_nodes, uint64_t seed) {
    rng_state = seed;
    ASSERT_EQ(lt_program_init(&g->p, "random"), LT_OK);
    lt_tensor t;
    for (int i = 0; i < NACT; i++) {
        char name[8];
        snprintf(name, sizeof name, "a%d", i);
        lt_tensor_init(&t, LT_F32, D, 1, 1, 1, NULL);
        g->act[i] = lt_program_add_buffer(g->p, name, LT_BUF_ACT, &t);
    }
    for (int i = 0; i < NW; i++) {
        char name[8];
        snprintf(name, sizeof name, "W%d", i);
        lt_tensor_init(&t, LT_F32, D, D, 1, 1, mats[i]);
        g->mat[i] = lt_program_add_buffer(g->p, name, LT_BUF_WEIGHT, &t);
        snprintf(name, sizeof name, "v%d", i);
        lt_tensor_init(&t, LT_F32, D, 1, 1, 1, vecs[i]);
        g->vec[i] = lt_program_add_buffer(g->p, name, LT_BUF_WEIGHT, &t);
    }
    /* every activation starts from the weights, so each step is the same */
    for (int i = 0; i < NACT; i++)
        lt_program_add_node(g->p, LT_K_ADD, (int[]){g->act[i], g->vec[i % NW], g->vec[(i + 1) % NW]},
                            3, NULL, NULL, "init");
    for (int k = 0; k < n_nodes; k++) {
        int y = g->act[rnd(NACT)], a = g->act[rnd(NACT)], b = g->act[rnd(NACT)];
        switch (rnd(4)) {
        case 0:
            lt_program_add_node(g->p, LT_K_ADD, (int[]){y, a, b}, 3, NULL, NULL, "add");
            break;
        case 1: {
            while (a == y) a = g->act[rnd(NACT)];
            int64_t ia[4] = {rnd(2), 0, 0, 0};
            lt_program_add_node(g->p, LT_K_MATVEC, (int[]){y, g->mat[rnd(NW)], a}, 3, ia, NULL, "mv");
            break;
        }
        case 2:
            while (a == y) a = g->act[rnd(NACT)];
            lt_program_add_node(g->p, LT_K_RMSNORM, (int[]){y, a, g->vec[rnd(NW)]}, 3, NULL,
                                (float[]){1e-5f, 0, 0, 0}, "norm");
            break;
        default:
            lt_program_add_node(g->p, LT_K_SWIGLU, (int[]){y, a, b}, 3, NULL, NULL, "swiglu");
            break;
        }
    }
    /* small min_chunk so the element-wise kernels really split */
    for (int i = 0; i < lt_program_n_nodes(g->p); i++) {
        lt_node_info ni;
        lt_program_node(g->p, i, &ni);
        if (ni.kernel != LT_K_MATVEC) {
            ni.params.v[0] = 1;
            ASSERT_EQ(lt_program_set_params(g->p, i, &ni.params), LT_OK);
        } else {
            ni.params.v[0] = 4; /* rows_per_task: many tasks */
            ASSERT_EQ(lt_program_set_params(g->p, i, &ni.params), LT_OK);
        }
    }
    ASSERT_EQ(lt_program_finalize(g->p), LT_OK);
}

static void snapshot(prog *g, float out[NACT][D]) {
    for (int i = 0; i < NACT; i++) memcpy(out[i], lt_program_buffer(g->p, g->act[i])->data, sizeof out[i]);
}

/* Observer: counts reports per node and checks each interval. */
typedef struct {
    _Atomic int count[512];
    _Atomic int bad;
} observed;

static void on_node(void *user, int ith, int node, uint64_t t0, uint64_t t1, uint64_t wait) {
    observed *o = user;
    (void)wait;
    if (node < 0 || node >= 512 || ith < 0 || t1 < t0 || t0 == 0) atomic_fetch_add(&o->bad, 1);
    else atomic_fetch_add(&o->count[node], 1);
}

/* Every node is reported once per thread under dispatch, by 1..nth threads
 * under the looped executor, and observing changes no result. */
/* Task counts follow the kernel's pieces: a matvec's row groups, attention's
 * head groups (at most the heads of one kv head), each task the same number
 * of pieces; and they follow a parameter change. */
static void test_tasks_follow_pieces(void) {
    static float w[1024 * 288];
    lt_program *p;
    ASSERT_EQ(lt_program_init(&p, "pieces"), LT_OK);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, 1024, 1, 1, 1, NULL);
    int x = lt_program_add_buffer(p, "x", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, 1024, 288, 1, 1, w);
    int W = lt_program_add_buffer(p, "W", LT_BUF_WEIGHT, &t);
    lt_tensor_init(&t, LT_F32, 288, 1, 1, 1, NULL);
    int y = lt_program_add_buffer(p, "y", LT_BUF_ACT, &t);
    enum { HEADS = 8, KV = 2, HD = 16, SEQ = 32 };
    lt_tensor_init(&t, LT_F32, HEADS * HD, 1, 1, 1, NULL);
    int q = lt_program_add_buffer(p, "q", LT_BUF_ACT, &t);
    int o = lt_program_add_buffer(p, "o", LT_BUF_ACT, &t);
    static float kv[2][KV * HD * SEQ];
    lt_tensor_init(&t, LT_F32, KV * HD, SEQ, 1, 1, kv[0]);
    int kc = lt_program_add_buffer(p, "kc", LT_BUF_STATE, &t);
    lt_tensor_init(&t, LT_F32, KV * HD, SEQ, 1, 1, kv[1]);
    int vc = lt_program_add_buffer(p, "vc", LT_BUF_STATE, &t);
    lt_tensor_init(&t, LT_F32, SEQ, 128, 1, 1, NULL); /* a row per task */
    int sc = lt_program_add_buffer(p, "scratch", LT_BUF_ACT, &t);
    int mv = lt_program_add_node(p, LT_K_MATVEC, (int[]){y, W, x}, 3, NULL, NULL, "mv");
    int at = lt_program_add_node(p, LT_K_ATTENTION, (int[]){o, q, kc, vc, sc}, 5,
                                 (int64_t[4]){HEADS, KV, HD, 0}, NULL, "attn");
    /* a prefill attention of 3 tokens: each token's head groups are pieces */
    lt_tensor_init(&t, LT_F32, HEADS * HD, 3, 1, 1, NULL);
    int q3 = lt_program_add_buffer(p, "q3", LT_BUF_ACT, &t);
    int o3 = lt_program_add_buffer(p, "o3", LT_BUF_ACT, &t);
    int at3 = lt_program_add_node(p, LT_K_ATTENTION, (int[]){o3, q3, kc, vc, sc}, 5,
                                  (int64_t[4]){HEADS, KV, HD, 0}, NULL, "attn3");
    ASSERT_TRUE(mv >= 0 && at >= 0);
    ASSERT_EQ(lt_program_finalize(p), LT_OK);
    lt_exec *e;
    ASSERT_EQ(lt_exec_init(&e, LT_EXEC_LOOPED), LT_OK);
    /* 288 rows of 32: 9 pieces of 128 KiB, one per task */
    ASSERT_EQ(lt__looped_tasks(e, p, 2, mv), 9);
    /* 8 heads, 4 per task (the default, and the size of a kv head's group) */
    ASSERT_EQ(lt__looped_tasks(e, p, 2, at), 2);
    ASSERT_EQ(lt__looped_tasks(e, p, 1, at), 1);
    ASSERT_EQ(lt__looped_tasks(e, p, 2, at3), 6);
    lt_node_info ni;
    lt_program_node(p, at, &ni);
    const lt_kernel *ka = lt_kernel_get(LT_K_ATTENTION);
    ni.params.v[lt_kernel_param_index(ka, "heads_per_task")] = 8; /* more than a group */
    ASSERT_EQ(lt_program_set_params(p, at, &ni.params), LT_OK);
    ASSERT_EQ(lt__looped_tasks(e, p, 2, at), 2);
    ni.params.v[lt_kernel_param_index(ka, "heads_per_task")] = 1;
    ASSERT_EQ(lt_program_set_params(p, at, &ni.params), LT_OK);
    ASSERT_EQ(lt__looped_tasks(e, p, 2, at), 8);
    lt_program_node(p, mv, &ni);
    ni.params.v[lt_kernel_param_index(lt_kernel_get(LT_K_MATVEC), "rows_per_task")] = 8;
    ASSERT_EQ(lt_program_set_params(p, mv, &ni.params), LT_OK);
    /* 36 pieces of 32 KiB: the default 32 tiles per thread and 32 KiB per task allow 36 */
    ASSERT_EQ(lt__looped_tasks(e, p, 2, mv), 36);
    /* at most 1 tile per thread: 2 tasks of 18 pieces */
    lt_params xp;
    lt_exec_params(e, &xp);
    xp.v[LT_XP_TILES] = 1;
    ASSERT_EQ(lt_exec_set_params(e, &xp), LT_OK);
    ASSERT_EQ(lt__looped_tasks(e, p, 2, mv), 2);
    xp.v[LT_XP_TILES] = 8; /* at most 16 tasks: 36 pieces go 3 per task */
    ASSERT_EQ(lt_exec_set_params(e, &xp), LT_OK);
    ASSERT_EQ(lt__looped_tasks(e, p, 2, mv), 12);
    /* what a tuner's node timer asks: the count for other kernel parameters
     * (rows of 32: 9 pieces, one per task) or other tiles, the node unchanged */
    ASSERT_EQ(lt_exec_node_tasks(e, p, mv, NULL, 2, 0), 12);
    lt_params kp = ni.params;
    kp.v[lt_kernel_param_index(lt_kernel_get(LT_K_MATVEC), "rows_per_task")] = 32;
    ASSERT_EQ(lt_exec_node_tasks(e, p, mv, &kp, 2, 0), 9);
    ASSERT_EQ(lt_exec_node_tasks(e, p, mv, &kp, 2, 1), 2);
    ASSERT_EQ(lt_exec_node_tasks(e, p, mv, &kp, 1, 0), 1);
    ASSERT_EQ(lt_exec_node_tasks(e, p, -1, NULL, 2, 0), -1);
    ASSERT_EQ(lt__looped_tasks(e, p, 2, mv), 12);
    /* 3 tokens x 8 heads: 2 per task within 16 tasks, 1 per task within 64
     * (never more tasks than threads x tiles: a task owns a scratch row) */
    lt_program_node(p, at3, &ni);
    ni.params.v[lt_kernel_param_index(ka, "heads_per_task")] = 1;
    ASSERT_EQ(lt_program_set_params(p, at3, &ni.params), LT_OK);
    ASSERT_EQ(lt__looped_tasks(e, p, 2, at3), 12);
    xp.v[LT_XP_TILES] = 32;
    ASSERT_EQ(lt_exec_set_params(e, &xp), LT_OK);
    ASSERT_EQ(lt__looped_tasks(e, p, 2, at3), 24);
    lt_exec_free(e);
    lt_program_free(p);
}

static void test_observer(void) {
    lt_step step = {.pos = 0, .n_tokens = 1};
    for (int nth = 1; nth <= 3; nth++) {
        lt_pool *pool;
        ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
        prog g;
        build(&g, 40, 99);
        static float ref[NACT][D], got[NACT][D];
        ASSERT_EQ(exec_step(LT_EXEC_DISPATCH, g.p, pool, &step, NULL), LT_OK);
        snapshot(&g, ref);
        static observed o;
        lt_exec_observer obs = {.node_done = on_node, .user = &o};
        lt_program_set_observer(g.p, &obs);
        for (int e = 0; e < 2; e++) {
            memset(&o, 0, sizeof o);
            ASSERT_EQ(exec_step((lt_executor)e, g.p, pool, &step, NULL), LT_OK);
            snapshot(&g, got);
            ASSERT_EQ(memcmp(got, ref, sizeof got), 0);
            ASSERT_EQ(atomic_load(&o.bad), 0);
            for (int i = 0; i < lt_program_n_nodes(g.p); i++) {
                int c = atomic_load(&o.count[i]);
                if (e == 0) ASSERT_EQ(c, nth);
                else ASSERT_TRUE(c >= 1 && c <= nth);
            }
        }
        lt_program_set_observer(g.p, NULL);
        lt_program_free(g.p);
        lt_pool_free(pool);
    }
}

/* The front: kinds, parameters and their generation, thread counts. */
static void test_front(void) {
    lt_exec_free(NULL);
    lt_exec *e;
    ASSERT_EQ(lt_exec_init(&e, (lt_executor)7), LT_EINVAL);
    ASSERT_EQ(lt_exec_init(&e, LT_EXEC_LOOPED), LT_OK);
    ASSERT_EQ(lt_exec_kind(e), LT_EXEC_LOOPED);
    ASSERT_EQ(lt_exec_generation(e), 0);
    int np;
    const lt_param_def *d = lt_exec_looped_params(&np);
    lt_params v, after;
    lt_exec_params(e, &v);
    for (int i = 0; i < np; i++) ASSERT_EQ(v.v[i], d[i].def);
    /* the values in force: nothing changes */
    ASSERT_EQ(lt_exec_set_params(e, &v), LT_OK);
    ASSERT_EQ(lt_exec_generation(e), 0);
    /* outside the space: refused, naming parameter and value; nothing changes */
    lt_params bad = v;
    bad.v[LT_XP_TILES] = 5;
    ASSERT_EQ(lt_exec_set_params(e, &bad), LT_ECONFIG);
    ASSERT_TRUE(strstr(lt_errmsg(), "tiles_per_thread=5") != NULL);
    lt_exec_params(e, &after);
    ASSERT_EQ(memcmp(&v, &after, sizeof v), 0);
    ASSERT_EQ(lt_exec_generation(e), 0);
    v.v[LT_XP_TILES] = 4;
    ASSERT_EQ(lt_exec_set_params(e, &v), LT_OK);
    ASSERT_EQ(lt_exec_generation(e), 1);
    lt_exec_params(e, &after);
    ASSERT_EQ(after.v[LT_XP_TILES], 4);

    /* threads: 0 and more than the pool are the whole pool; each node is
     * reported once per thread under dispatch */
    lt_exec *dx;
    ASSERT_EQ(lt_exec_init(&dx, LT_EXEC_DISPATCH), LT_OK);
    ASSERT_EQ(lt_exec_kind(dx), LT_EXEC_DISPATCH);
    ASSERT_EQ(lt_exec_set_params(dx, &v), LT_OK); /* kept, whatever the kind */
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 3), LT_OK);
    prog g;
    build(&g, 20, 5);
    lt_step step = {.pos = 0, .n_tokens = 1};
    static float ref[NACT][D], got[NACT][D];
    ASSERT_EQ(lt_exec_step(dx, g.p, pool, 1, &step, NULL), LT_OK);
    snapshot(&g, ref);
    static observed o;
    lt_exec_observer obs = {.node_done = on_node, .user = &o};
    lt_program_set_observer(g.p, &obs);
    const int asked[] = {0, 1, 2, 3, 4, 100}, used[] = {3, 1, 2, 3, 3, 3};
    for (int k = 0; k < 6; k++) {
        for (int x = 0; x < 2; x++) {
            memset(&o, 0, sizeof o);
            memset(lt_program_buffer(g.p, g.act[0])->data, 0, sizeof got[0]);
            ASSERT_EQ(lt_exec_step(x ? e : dx, g.p, pool, asked[k], &step, NULL), LT_OK);
            snapshot(&g, got);
            ASSERT_EQ(memcmp(got, ref, sizeof got), 0);
            for (int i = 0; i < lt_program_n_nodes(g.p); i++) {
                int c = atomic_load(&o.count[i]);
                if (x) ASSERT_TRUE(c >= 1 && c <= used[k]);
                else ASSERT_EQ(c, used[k]);
            }
        }
    }
    lt_program_set_observer(g.p, NULL);
    ASSERT_EQ(lt_exec_step(e, g.p, pool, -1, &step, NULL), LT_EINVAL);
    ASSERT_EQ(lt_exec_step(dx, g.p, pool, -1, &step, NULL), LT_EINVAL);
    lt_program_free(g.p);
    lt_program *empty;
    ASSERT_EQ(lt_program_init(&empty, "unfinalized"), LT_OK);
    ASSERT_EQ(lt_exec_step(e, empty, pool, 0, &step, NULL), LT_ESTATE);
    ASSERT_EQ(lt_exec_step(dx, empty, pool, 0, &step, NULL), LT_ESTATE);
    lt_program_free(empty);
    lt_pool_free(pool);
    lt_exec_free(dx);
    lt_exec_free(e);
}

/* One matvec of 288 rows by 1024, rows_per_task rows per piece. */
static lt_program *one_matvec(int rows_per_task) {
    static float w[1024 * 288];
    lt_program *p;
    ASSERT_EQ(lt_program_init(&p, "one matvec"), LT_OK);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, 1024, 1, 1, 1, NULL);
    int x = lt_program_add_buffer(p, "x", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, 1024, 288, 1, 1, w);
    int W = lt_program_add_buffer(p, "W", LT_BUF_WEIGHT, &t);
    lt_tensor_init(&t, LT_F32, 288, 1, 1, 1, NULL);
    int y = lt_program_add_buffer(p, "y", LT_BUF_ACT, &t);
    int mv = lt_program_add_node(p, LT_K_MATVEC, (int[]){y, W, x}, 3, NULL, NULL, "mv");
    lt_node_info ni;
    lt_program_node(p, mv, &ni);
    ni.params.v[lt_kernel_param_index(lt_kernel_get(LT_K_MATVEC), "rows_per_task")] =
        rows_per_task;
    ASSERT_EQ(lt_program_set_params(p, mv, &ni.params), LT_OK);
    ASSERT_EQ(lt_program_finalize(p), LT_OK);
    return p;
}

/* A schedule is one program's: another program built after the first is
 * freed (at its address, as like as not) gets its own, and so does a
 * program whose node changed its task units. */
static void test_program_identity(void) {
    lt_exec *e;
    ASSERT_EQ(lt_exec_init(&e, LT_EXEC_LOOPED), LT_OK);
    for (int round = 0; round < 4; round++) {
        int rows = round % 2 ? 8 : 32; /* 36 pieces of 8 rows, 9 of 32 */
        lt_program *p = one_matvec(rows);
        ASSERT_EQ(lt__looped_tasks(e, p, 2, 0), rows == 8 ? 36 : 9);
        lt_node_info ni;
        lt_program_node(p, 0, &ni);
        ni.params.v[lt_kernel_param_index(lt_kernel_get(LT_K_MATVEC), "rows_per_task")] =
            rows == 8 ? 32 : 8;
        ASSERT_EQ(lt_program_set_params(p, 0, &ni.params), LT_OK);
        ASSERT_EQ(lt__looped_tasks(e, p, 2, 0), rows == 8 ? 9 : 36);
        lt_program_free(p);
    }
    lt_exec_free(e);
}

/* ---- programs with loops ---- */

enum { ITERS = 5 };
static float lmats[ITERS][NW][D * D], lvecs[ITERS][NW][D];

/* A random block of nodes over the activations and iteration it's weights
 * and state (with alternate, iteration it % 2's: iterations then share
 * buffers), repeated ITERS times between a random prefix and suffix; then
 * the looping pass. The block writes the state before it reads it, so every
 * step computes the same. */
static void build_looped(prog *g, int n_body, uint64_t seed, bool alternate) {
    rng_state = seed;
    ASSERT_EQ(lt_program_init(&g->p, "random looped"), LT_OK);
    lt_tensor t;
    for (int i = 0; i < NACT; i++) {
        char name[8];
        snprintf(name, sizeof name, "a%d", i);
        lt_tensor_init(&t, LT_F32, D, 1, 1, 1, NULL);
        g->act[i] = lt_program_add_buffer(g->p, name, LT_BUF_ACT, &t);
    }
    int W[ITERS][NW], V[ITERS][NW], S[ITERS];
    static float state[ITERS][D];
    for (int it = 0; it < ITERS; it++) {
        for (int i = 0; i < NW; i++) {
            char name[16];
            snprintf(name, sizeof name, "W%d.%d", it, i);
            lt_tensor_init(&t, LT_F32, D, D, 1, 1, lmats[it][i]);
            W[it][i] = lt_program_add_buffer(g->p, name, LT_BUF_WEIGHT, &t);
            snprintf(name, sizeof name, "v%d.%d", it, i);
            lt_tensor_init(&t, LT_F32, D, 1, 1, 1, lvecs[it][i]);
            V[it][i] = lt_program_add_buffer(g->p, name, LT_BUF_WEIGHT, &t);
        }
        char name[16];
        snprintf(name, sizeof name, "s%d", it);
        lt_tensor_init(&t, LT_F32, D, 1, 1, 1, state[it]);
        S[it] = lt_program_add_buffer(g->p, name, LT_BUF_STATE, &t);
    }
    for (int i = 0; i < NACT; i++)
        lt_program_add_node(g->p, LT_K_ADD, (int[]){g->act[i], V[0][i % NW], V[0][(i + 1) % NW]},
                            3, NULL, NULL, "init");
    /* the block: kind, output, inputs, weight index, accumulate */
    typedef struct {
        int kind, y, a, b, w, acc;
    } block_node;
    block_node body[64];
    const int first_store = (int)rnd((uint32_t)n_body);
    for (int k = 0; k < n_body; k++) {
        int y = g->act[rnd(NACT)], a = g->act[rnd(NACT)], b = g->act[rnd(NACT)];
        int kind = k < first_store ? (int)rnd(4) : k == first_store ? 4 : (int)rnd(6);
        if (kind == 1 || kind == 2)
            while (a == y) a = g->act[rnd(NACT)];
        body[k] = (block_node){kind, y, a, b, (int)rnd(NW), (int)rnd(2)};
    }
    for (int it = 0; it < ITERS; it++) {
        const int bi = alternate ? it % 2 : it;
        for (int k = 0; k < n_body; k++) {
            const int y = body[k].y, a = body[k].a, b = body[k].b, w = body[k].w;
            switch (body[k].kind) {
            case 0:
                lt_program_add_node(g->p, LT_K_ADD, (int[]){y, a, b}, 3, NULL, NULL, "add");
                break;
            case 1:
                lt_program_add_node(g->p, LT_K_MATVEC, (int[]){y, W[bi][w], a}, 3,
                                    (int64_t[4]){body[k].acc, 0, 0, 0}, NULL, "mv");
                break;
            case 2:
                lt_program_add_node(g->p, LT_K_RMSNORM, (int[]){y, a, V[bi][w]}, 3, NULL,
                                    (float[]){1e-5f, 0, 0, 0}, "norm");
                break;
            case 3:
                lt_program_add_node(g->p, LT_K_SWIGLU, (int[]){y, a, b}, 3, NULL, NULL, "swiglu");
                break;
            case 4: /* the state, from activations */
                lt_program_add_node(g->p, LT_K_ADD, (int[]){S[bi], a, b}, 3, NULL, NULL, "store");
                break;
            default: /* an activation, from the state */
                lt_program_add_node(g->p, LT_K_ADD, (int[]){y, S[bi], b}, 3, NULL, NULL, "load");
                break;
            }
        }
    }
    for (int k = 0; k < 4; k++) {
        int y = g->act[rnd(NACT)], a = g->act[rnd(NACT)];
        while (a == y) a = g->act[rnd(NACT)];
        lt_program_add_node(g->p, LT_K_MATVEC, (int[]){y, W[0][rnd(NW)], a}, 3, NULL, NULL, "mv");
    }
    for (int i = 0; i < lt_program_n_nodes(g->p); i++) {
        lt_node_info ni;
        lt_program_node(g->p, i, &ni);
        ni.params.v[0] = ni.kernel == LT_K_MATVEC ? 4 : 1; /* many tasks */
        ASSERT_EQ(lt_program_set_params(g->p, i, &ni.params), LT_OK);
    }
    ASSERT_TRUE(lt_pass_kernel_looping(g->p) >= 1);
    ASSERT_EQ(lt_program_finalize(g->p), LT_OK);
}

/* The schedule through the LOOP records is the flat one, node by node, at
 * every thread count and over the executor's space; where iterations share
 * buffers nothing is replicated; and the looped executor still computes the
 * dispatch executor's bits. */
static void test_loop_schedules(void) {
    for (int it = 0; it < ITERS; it++)
        for (int i = 0; i < NW; i++) {
            for (int j = 0; j < D * D; j++)
                lmats[it][i][j] = (float)((int)rnd(2001) - 1000) / 8000.0f;
            for (int j = 0; j < D; j++)
                lvecs[it][i][j] = (float)((int)rnd(2001) - 1000) / 1000.0f;
        }
    int np;
    const lt_param_def *d = lt_exec_looped_params(&np);
    lt_step step = {.pos = 0, .n_tokens = 1};
    int copied_total = 0;
    for (uint64_t seed = 1; seed <= (lt_test_emulated() ? 3u : 12u); seed++) {
        const bool alternate = seed % 4 == 0;
        prog g;
        build_looped(&g, 3 + (int)(seed % 7), seed * 104729, alternate);
        for (int nth = 1; nth <= 4; nth++)
            for (int t = 0; t < d[LT_XP_TILES].n_values; t += 3)
                for (int s = 0; s < 2; s++)
                    for (int m = 0; m < 2; m++) {
                        lt_params v;
                        for (int i = 0; i < np; i++) v.v[i] = d[i].def;
                        v.v[LT_XP_TILES] = d[LT_XP_TILES].values[t];
                        v.v[LT_XP_SYNC] = s;
                        v.v[LT_XP_MIN_TASK_KB] = m ? 16 : 0;
                        int copied;
                        ASSERT_EQ(sched_differences(g.p, nth, &v, &copied), 0);
                        if (alternate) ASSERT_EQ(copied, 0);
                        copied_total += copied;
                    }
        static float ref[NACT][D], got[NACT][D];
        for (int nth = 1; nth <= 3; nth++) {
            lt_pool *pool;
            ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
            ASSERT_EQ(exec_step(LT_EXEC_DISPATCH, g.p, pool, &step, NULL), LT_OK);
            snapshot(&g, ref);
            memset(got, 0, sizeof got);
            ASSERT_EQ(exec_step(LT_EXEC_LOOPED, g.p, pool, &step, NULL), LT_OK);
            snapshot(&g, got);
            ASSERT_EQ(memcmp(got, ref, sizeof got), 0);
            lt_pool_free(pool);
        }
        lt_program_free(g.p);
    }
    ASSERT_TRUE(copied_total > 0);
}

int main(void) {
    test_tasks_follow_pieces();
    test_observer();
    for (int i = 0; i < NW; i++) {
        for (int j = 0; j < D * D; j++) mats[i][j] = (float)((int)rnd(2001) - 1000) / 8000.0f;
        for (int j = 0; j < D; j++) vecs[i][j] = (float)((int)rnd(2001) - 1000) / 1000.0f;
    }
    int np;
    const lt_param_def *xp = lt_exec_looped_params(&np);
    ASSERT_EQ(np, LT_XP_COUNT);
    lt_step step = {.pos = 0, .n_tokens = 1};
    for (int nth = 1; nth <= 4; nth++) {
        lt_pool *pool;
        ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
        /* under an emulator, 2 of the 6 random programs */
        for (uint64_t seed = 1; seed <= (lt_test_emulated() ? 2u : 6u); seed++) {
            prog g;
            build(&g, 60, seed * 7919);
            static float ref[NACT][D], got[NACT][D];
            ASSERT_EQ(exec_step(LT_EXEC_DISPATCH, g.p, pool, &step, NULL), LT_OK);
            snapshot(&g, ref);
            /* every point of the executor's space */
            for (int t = 0; t < xp[LT_XP_TILES].n_values; t++)
                for (int f = 0; f < xp[LT_XP_PREFETCH_KB].n_values; f += 2)
                    for (int s = 0; s < xp[LT_XP_SYNC].n_values * xp[LT_XP_MIN_TASK_KB].n_values; s++) {
                        lt_params v = {{0}};
                        v.v[LT_XP_MIN_TASK_KB] = xp[LT_XP_MIN_TASK_KB].values[s / 2];
                        v.v[LT_XP_TILES] = xp[LT_XP_TILES].values[t];
                        v.v[LT_XP_PREFETCH_KB] = xp[LT_XP_PREFETCH_KB].values[f];
                        v.v[LT_XP_SYNC] = xp[LT_XP_SYNC].values[s % 2];
                        ASSERT_EQ(lt_exec_set_params(exec_of(LT_EXEC_LOOPED), &v), LT_OK);
                        for (int rep = 0; rep < 3; rep++) {
                            memset(got, 0, sizeof got);
                            lt_exec_stats st;
                            ASSERT_EQ(exec_step(LT_EXEC_LOOPED, g.p, pool, &step, &st), LT_OK);
                            snapshot(&g, got);
                            ASSERT_EQ(memcmp(got, ref, sizeof got), 0);
                            ASSERT_TRUE(st.wait_ns <= st.busy_ns);
                        }
                    }
            lt_program_free(g.p);
        }
        lt_pool_free(pool);
    }
    test_front();
    test_program_identity();
    test_loop_schedules();
    return lt_test_finish();
}
