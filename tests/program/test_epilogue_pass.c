/* The epilogue-fusion pass on synthetic attention layers: a rope of two
 * projections and the cache stores of their outputs fold into the matvecs,
 * and the program computes the same bits (x and both caches, over several
 * positions) on both executors and 1-3 threads as the unfused one; every
 * condition that forbids a fusion does, and a program fused where it should
 * not be would compute different bits: each case is run against its
 * unfused twin too. The looping pass still finds the layers. */
#include <stdlib.h>
#include <string.h>

#include "looptune/program.h"
#include "program/exec_internal.h" /* lt__looped_deps */
#include "pass_test.h"
#include "test.h"
#include "exec_test.h"

enum { D = 64, KD = 32, HD = 16, SEQ = 6, LAYERS = 3, STEPS = 4, SCRATCH_ROWS = 128 };

static float WQ[LAYERS][D * D], WK[LAYERS][KD * D], WV[LAYERS][KD * D], WO[LAYERS][D * D];
static float U[D], Z[D];
static float BQ[LAYERS][D], BK[LAYERS][KD], BV[LAYERS][KD], FACTORS[HD / 2];

typedef struct {
    lt_program *p;
    int x, q, k, v, att, q_half, scratch, u, kc[LAYERS], vc[LAYERS];
    int wq[LAYERS], wk[LAYERS], wv[LAYERS], wo[LAYERS];
    float kcache[LAYERS][SEQ * KD], vcache[LAYERS][SEQ * KD];
} prog;

static int act(prog *g, const char *name, int64_t n, int64_t rows) {
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, n, rows, 1, 1, NULL);
    return lt_program_add_buffer(g->p, name, LT_BUF_ACT, &t);
}

static int buffer(prog *g, const char *name, lt_buf_kind kind, int64_t n, int64_t rows, float *d) {
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, n, rows, 1, 1, d);
    return lt_program_add_buffer(g->p, name, kind, &t);
}

static void init(prog *g) {
    memset(g, 0, sizeof *g);
    ASSERT_EQ(lt_program_init(&g->p, "epilogue"), LT_OK);
    g->x = act(g, "x", D, 1);
    g->q = act(g, "q", D, 1);
    g->k = act(g, "k", KD, 1);
    g->v = act(g, "v", KD, 1);
    g->att = act(g, "att", D, 1);
    g->scratch = act(g, "scratch", SEQ, SCRATCH_ROWS);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, KD, 1, 1, 1, NULL);
    g->q_half = lt_program_add_view(g->p, "q_half", g->q, 0, &t);
    for (int l = 0; l < LAYERS; l++) {
        char name[16];
        snprintf(name, sizeof name, "wq%d", l);
        g->wq[l] = buffer(g, name, LT_BUF_WEIGHT, D, D, WQ[l]);
        snprintf(name, sizeof name, "wk%d", l);
        g->wk[l] = buffer(g, name, LT_BUF_WEIGHT, D, KD, WK[l]);
        snprintf(name, sizeof name, "wv%d", l);
        g->wv[l] = buffer(g, name, LT_BUF_WEIGHT, D, KD, WV[l]);
        snprintf(name, sizeof name, "wo%d", l);
        g->wo[l] = buffer(g, name, LT_BUF_WEIGHT, D, D, WO[l]);
        snprintf(name, sizeof name, "kc%d", l);
        g->kc[l] = buffer(g, name, LT_BUF_STATE, KD, SEQ, g->kcache[l]);
        snprintf(name, sizeof name, "vc%d", l);
        g->vc[l] = buffer(g, name, LT_BUF_STATE, KD, SEQ, g->vcache[l]);
    }
    g->u = buffer(g, "u", LT_BUF_WEIGHT, D, 1, U);
    int z = buffer(g, "z", LT_BUF_WEIGHT, D, 1, Z);
    /* x starts from a weight, so every step starts the same */
    ASSERT_TRUE(lt_program_add_node(g->p, LT_K_ADD, (int[]){g->x, g->u, z}, 3, NULL, NULL,
                                    "init") >= 0);
}

static void mv(prog *g, int y, int w, int x, bool acc) {
    ASSERT_TRUE(lt_program_add_node(g->p, LT_K_MATVEC, (int[]){y, w, x}, 3,
                                    (int64_t[]){acc, 0, 0, 0}, NULL, "mv") >= 0);
}
static void rope(prog *g, int q, int k) {
    ASSERT_TRUE(lt_program_add_node(g->p, LT_K_ROPE, (int[]){q, k}, 2, (int64_t[]){HD, 0, 0, 0},
                                    (float[]){10000.0f, 0, 0, 0}, "rope") >= 0);
}
static void store(prog *g, int cache, int src) {
    ASSERT_TRUE(lt_program_add_node(g->p, LT_K_KV_STORE, (int[]){cache, src}, 2, NULL, NULL,
                                    "store") >= 0);
}
static void attention(prog *g, int l) {
    ASSERT_TRUE(lt_program_add_node(g->p, LT_K_ATTENTION,
                                    (int[]){g->att, g->q, g->kc[l], g->vc[l], g->scratch}, 5,
                                    (int64_t[]){D / HD, KD / HD, HD, 0}, NULL, "attention") >= 0);
}
static void add(prog *g, int y, int a, int b) {
    ASSERT_TRUE(lt_program_add_node(g->p, LT_K_ADD, (int[]){y, a, b}, 3, NULL, NULL, "add") >= 0);
}

/* q = Wq x; k = Wk x; v = Wv x; rope(q, k); kc[pos] = k; vc[pos] = v;
 * att = attention(q, kc, vc); x += Wo att. The rope and both stores fuse. */
static void layer(prog *g, int l) {
    mv(g, g->q, g->wq[l], g->x, false);
    mv(g, g->k, g->wk[l], g->x, false);
    mv(g, g->v, g->wv[l], g->x, false);
    rope(g, g->q, g->k);
    store(g, g->kc[l], g->k);
    store(g, g->vc[l], g->v);
    attention(g, l);
    mv(g, g->x, g->wo[l], g->att, true);
}

/* STEPS decode steps of p (positions 0..) on pool by executor e; the final
 * x and every cache into out. */
static void run(prog *g, lt_pool *pool, lt_executor e, float *out) {
    memset(g->kcache, 0, sizeof g->kcache);
    memset(g->vcache, 0, sizeof g->vcache);
    for (int s = 0; s < STEPS; s++) {
        lt_step st = {.pos = s, .n_tokens = 1};
        ASSERT_EQ(exec_step(e, g->p, pool, &st, NULL), LT_OK);
    }
    memcpy(out, lt_program_buffer(g->p, g->x)->data, sizeof(float) * D);
    memcpy(out + D, g->kcache, sizeof g->kcache);
    memcpy(out + D + sizeof g->kcache / sizeof(float), g->vcache, sizeof g->vcache);
}

#define OUT_FLOATS (D + 2 * LAYERS * SEQ * KD)

static void test_layers_fuse(void) {
    prog *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    init(a);
    init(b);
    for (int l = 0; l < LAYERS; l++) {
        layer(a, l);
        layer(b, l);
    }
    const int before = lt_program_n_nodes(b->p);
    ASSERT_EQ(lt_pass_fuse_epilogues(b->p), 3 * LAYERS);
    ASSERT_EQ(lt_program_n_nodes(b->p), before - 3 * LAYERS);
    ASSERT_EQ(count_kernel(b->p, LT_K_ROPE) + count_kernel(b->p, LT_K_KV_STORE), 0);
    ASSERT_EQ(lt_pass_fuse_epilogues(b->p), 0); /* idempotent */
    ASSERT_EQ(lt_pass_kernel_looping(b->p), 1);
    lt_loop_info L;
    lt_program_loop(b->p, 0, &L);
    ASSERT_EQ(L.n_iter, LAYERS);
    ASSERT_EQ(L.body_len, 5);
    ASSERT_EQ(lt_pass_fuse_epilogues(b->p), LT_ESTATE); /* after the looping pass */
    ASSERT_EQ(lt_program_finalize(a->p), LT_OK);
    ASSERT_EQ(lt_program_finalize(b->p), LT_OK);
    ASSERT_EQ(lt_pass_fuse_epilogues(a->p), LT_ESTATE); /* after finalize */
    /* q rotates, k rotates and stores, v stores */
    ASSERT_EQ(lt_program_call(b->p, 1)->ia[2], LT_MV_POST_ROPE);
    ASSERT_EQ(lt_program_call(b->p, 2)->ia[2], LT_MV_POST_ROPE | LT_MV_POST_STORE);
    ASSERT_EQ(lt_program_call(b->p, 3)->ia[2], LT_MV_POST_STORE);
    ASSERT_TRUE(lt_program_call(b->p, 2)->op[4]->data == b->kcache[0]);
    /* fused, the second layer's attention (node 9) waits at task level for
     * the projections' rows of its heads (q, k and v), for the rest (its
     * output att, read by the first layer's output projection, and the
     * scratch, both written by the first attention) for whole nodes; unfused
     * (node 15), for whole ROPE and KV_STORE nodes too, which do not say */
    int fine = -1;
    lt_exec *ex = exec_of(LT_EXEC_LOOPED);
    ASSERT_EQ(lt__looped_deps(ex, b->p, 2, 9, &fine), 2);
    ASSERT_EQ(fine, 3);
    ASSERT_EQ(lt__looped_deps(ex, b->p, 1, 9, &fine), 5); /* one thread: whole nodes */
    ASSERT_EQ(fine, 0);
    ASSERT_EQ(lt__looped_deps(ex, a->p, 2, 15, &fine), 5);
    ASSERT_EQ(fine, 0);
    static float ref[OUT_FLOATS], got[OUT_FLOATS];
    for (int nth = 1; nth <= 3; nth++) {
        lt_pool *pool;
        ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
        run(a, pool, LT_EXEC_DISPATCH, ref);
        for (int e = 0; e < 2; e++) {
            memset(got, 0, sizeof got);
            run(b, pool, (lt_executor)e, got);
            ASSERT_TRUE(memcmp(ref, got, sizeof ref) == 0);
        }
        lt_pool_free(pool);
    }
    /* the caches hold what the steps stored: the test compares real data */
    float zero[KD] = {0};
    ASSERT_TRUE(memcmp(ref + D + (STEPS - 1) * KD, zero, sizeof zero) != 0);
    lt_program_free(a->p);
    lt_program_free(b->p);
    free(a);
    free(b);
}

/* A qwen2-like layer: q, k, v biases (ADD of a one-row weight), a NEOX rope
 * with frequency factors, the stores. The biases fold into the matvecs
 * before the rope, the rope carries its mode and factors, and the program
 * computes the same bits on both executors and 1-3 threads. */
static void bias_layer(prog *g, int l, int bq, int bk, int bv, int factors) {
    mv(g, g->q, g->wq[l], g->x, false);
    mv(g, g->k, g->wk[l], g->x, false);
    mv(g, g->v, g->wv[l], g->x, false);
    add(g, g->q, g->q, bq);
    add(g, g->k, g->k, bk);
    add(g, g->v, g->v, bv);
    ASSERT_TRUE(lt_program_add_node(g->p, LT_K_ROPE, (int[]){g->q, g->k, factors}, 3,
                                    (int64_t[]){HD, LT_ROPE_NEOX, 0, 0},
                                    (float[]){10000.0f, 0, 0, 0}, "rope") >= 0);
    store(g, g->kc[l], g->k);
    store(g, g->vc[l], g->v);
    attention(g, l);
    mv(g, g->x, g->wo[l], g->att, true);
}

static void bias_layers(prog *g) {
    int f = buffer(g, "factors", LT_BUF_WEIGHT, HD / 2, 1, FACTORS);
    for (int l = 0; l < LAYERS; l++) {
        char name[16];
        snprintf(name, sizeof name, "bq%d", l);
        int bq = buffer(g, name, LT_BUF_WEIGHT, D, 1, BQ[l]);
        snprintf(name, sizeof name, "bk%d", l);
        int bk = buffer(g, name, LT_BUF_WEIGHT, KD, 1, BK[l]);
        snprintf(name, sizeof name, "bv%d", l);
        int bv = buffer(g, name, LT_BUF_WEIGHT, KD, 1, BV[l]);
        bias_layer(g, l, bq, bk, bv, f);
    }
}

static void test_biases_and_neox_fuse(void) {
    prog *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    init(a);
    init(b);
    bias_layers(a);
    bias_layers(b);
    ASSERT_EQ(lt_pass_fuse_epilogues(b->p), 6 * LAYERS);
    ASSERT_EQ(count_kernel(b->p, LT_K_ADD), 1); /* the init node's: u + z, z not a bias of mv */
    ASSERT_EQ(lt_pass_kernel_looping(b->p), 1);
    lt_loop_info L;
    lt_program_loop(b->p, 0, &L);
    ASSERT_EQ(L.n_iter, LAYERS);
    ASSERT_EQ(lt_program_finalize(a->p), LT_OK);
    ASSERT_EQ(lt_program_finalize(b->p), LT_OK);
    const lt_call *q = lt_program_call(b->p, 1), *k = lt_program_call(b->p, 2);
    ASSERT_EQ(q->ia[2], LT_MV_POST_BIAS | LT_MV_POST_ROPE | LT_MV_POST_NEOX);
    ASSERT_EQ(k->ia[2], LT_MV_POST_BIAS | LT_MV_POST_ROPE | LT_MV_POST_NEOX | LT_MV_POST_STORE);
    ASSERT_EQ(lt_program_call(b->p, 3)->ia[2], LT_MV_POST_BIAS | LT_MV_POST_STORE);
    ASSERT_TRUE(q->op[5]->data == BQ[0] && q->op[6]->data == FACTORS);
    ASSERT_TRUE(k->op[4]->data == b->kcache[0] && k->op[5]->data == BK[0]);
    static float ref[OUT_FLOATS], got[OUT_FLOATS];
    /* emulated (qemu), spinning threads beyond the cores cost minutes: 1 and 2 */
    for (int nth = 1; nth <= (lt_test_emulated() ? 2 : 3); nth++) {
        lt_pool *pool;
        ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
        run(a, pool, LT_EXEC_DISPATCH, ref);
        for (int e = 0; e < 2; e++) {
            memset(got, 0, sizeof got);
            run(b, pool, (lt_executor)e, got);
            ASSERT_TRUE(memcmp(ref, got, sizeof ref) == 0);
        }
        lt_pool_free(pool);
    }
    lt_program_free(a->p);
    lt_program_free(b->p);
    free(a);
    free(b);
}

/* A bias ADD stays a node when something reads y before it, or when it
 * adds to a view of y. */
static void q_read_before_bias(prog *g) {
    int bq = buffer(g, "bq", LT_BUF_WEIGHT, D, 1, BQ[0]);
    mv(g, g->q, g->wq[0], g->x, false);
    mv(g, g->att, g->wo[0], g->q, false); /* reads q unbiased */
    add(g, g->q, g->q, bq);
    mv(g, g->x, g->wo[0], g->att, true);
    mv(g, g->x, g->wo[0], g->q, true);
}
static void bias_of_a_view(prog *g) {
    int bh = buffer(g, "bh", LT_BUF_WEIGHT, KD, 1, BQ[0]);
    mv(g, g->q, g->wq[0], g->x, false);
    add(g, g->q_half, g->q_half, bh);
    mv(g, g->x, g->wo[0], g->q, true);
}

/* Builds a program by f twice, fuses one, checks both compute the same bits
 * on one thread and returns how many nodes fused. */
static int fused_in(void (*f)(prog *)) {
    prog *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    init(a);
    init(b);
    f(a);
    f(b);
    int n = lt_pass_fuse_epilogues(b->p);
    ASSERT_EQ(lt_program_finalize(a->p), LT_OK);
    ASSERT_EQ(lt_program_finalize(b->p), LT_OK);
    static float ref[OUT_FLOATS], got[OUT_FLOATS];
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    run(a, pool, LT_EXEC_DISPATCH, ref);
    run(b, pool, LT_EXEC_LOOPED, got);
    ASSERT_TRUE(memcmp(ref, got, sizeof ref) == 0);
    lt_pool_free(pool);
    lt_program_free(a->p);
    lt_program_free(b->p);
    free(a);
    free(b);
    return n;
}

static void k_not_from_matvec(prog *g) { /* k = Wk x + v: the rope and k's store stay; v's
                                          * store fuses though the add reads v */
    mv(g, g->q, g->wq[0], g->x, false);
    mv(g, g->v, g->wv[0], g->x, false);
    mv(g, g->k, g->wk[0], g->x, false);
    add(g, g->k, g->k, g->v);
    rope(g, g->q, g->k);
    store(g, g->kc[0], g->k);
    store(g, g->vc[0], g->v);
    attention(g, 0);
    mv(g, g->x, g->wo[0], g->att, true);
}
static void q_read_before_rope(prog *g) { /* att reads q unrotated before the rope */
    mv(g, g->q, g->wq[0], g->x, false);
    mv(g, g->k, g->wk[0], g->x, false);
    mv(g, g->v, g->wv[0], g->x, false);
    add(g, g->att, g->q, g->q);
    mv(g, g->x, g->wo[0], g->att, true);
    rope(g, g->q, g->k);
    store(g, g->kc[0], g->k);
    store(g, g->vc[0], g->v);
    attention(g, 0);
    mv(g, g->x, g->wo[0], g->att, true);
}
static void store_before_rope(prog *g) { /* the cache holds k unrotated: only the store fuses */
    mv(g, g->q, g->wq[0], g->x, false);
    mv(g, g->k, g->wk[0], g->x, false);
    mv(g, g->v, g->wv[0], g->x, false);
    store(g, g->kc[0], g->k);
    rope(g, g->q, g->k);
    store(g, g->vc[0], g->v);
    attention(g, 0);
    mv(g, g->x, g->wo[0], g->att, true);
}
static void rope_of_a_view(prog *g) { /* the rope turns half of q: it stays */
    mv(g, g->q, g->wq[0], g->x, false);
    mv(g, g->k, g->wk[0], g->x, false);
    mv(g, g->v, g->wv[0], g->x, false);
    rope(g, g->q_half, g->k);
    store(g, g->kc[0], g->k);
    store(g, g->vc[0], g->v);
    attention(g, 0);
    mv(g, g->x, g->wo[0], g->att, true);
}
static void cache_read_between(prog *g) { /* attention reads vc between v and its store */
    mv(g, g->q, g->wq[0], g->x, false);
    mv(g, g->k, g->wk[0], g->x, false);
    mv(g, g->v, g->wv[0], g->x, false);
    rope(g, g->q, g->k);
    store(g, g->kc[0], g->k);
    attention(g, 0);
    store(g, g->vc[0], g->v);
    attention(g, 0);
    mv(g, g->x, g->wo[0], g->att, true);
}
static void cache_written_between(prog *g) { /* k goes to vc, then v: only the first fuses */
    mv(g, g->q, g->wq[0], g->x, false);
    mv(g, g->v, g->wv[0], g->x, false);
    mv(g, g->k, g->wk[0], g->x, false);
    store(g, g->vc[0], g->k);
    store(g, g->vc[0], g->v);
    store(g, g->kc[0], g->k);
    attention(g, 0);
    mv(g, g->x, g->wo[0], g->att, true);
}
static void q_only(prog *g) { /* a rope of q alone (no k) fuses */
    mv(g, g->q, g->wq[0], g->x, false);
    ASSERT_TRUE(lt_program_add_node(g->p, LT_K_ROPE, (int[]){g->q}, 1, (int64_t[]){HD, 0, 0, 0},
                                    (float[]){500.0f, 0, 0, 0}, "rope_q") >= 0);
    mv(g, g->k, g->wk[0], g->x, false);
    mv(g, g->v, g->wv[0], g->x, false);
    store(g, g->kc[0], g->k);
    store(g, g->vc[0], g->v);
    attention(g, 0);
    mv(g, g->x, g->wo[0], g->att, true);
}

static void q_and_view_of_q(prog *g) { /* ROPE refuses q and k in one buffer: it stays */
    mv(g, g->q, g->wq[0], g->x, false);
    rope(g, g->q, g->q_half);
}

/* Layers with a norm before the projections: fusing epilogues then prologues
 * gives the program the other order gives, and the unfused program's bits. */
static void normed_layer(prog *g, int l) {
    ASSERT_TRUE(lt_program_add_node(g->p, LT_K_RMSNORM, (int[]){g->att, g->x, g->u}, 3, NULL,
                                    (float[]){1e-5f, 0, 0, 0}, "norm") >= 0);
    mv(g, g->q, g->wq[l], g->att, false);
    mv(g, g->k, g->wk[l], g->att, false);
    mv(g, g->v, g->wv[l], g->att, false);
    rope(g, g->q, g->k);
    store(g, g->kc[l], g->k);
    store(g, g->vc[l], g->v);
    attention(g, l);
    mv(g, g->x, g->wo[l], g->att, true);
}

static void test_pass_order(void) {
    prog *g[3];
    for (int i = 0; i < 3; i++) {
        g[i] = calloc(1, sizeof *g[i]);
        init(g[i]);
        for (int l = 0; l < LAYERS; l++) normed_layer(g[i], l);
    }
    ASSERT_EQ(lt_pass_fuse_epilogues(g[1]->p), 3 * LAYERS);
    ASSERT_EQ(lt_pass_fuse_prologues(g[1]->p), LAYERS);
    ASSERT_EQ(lt_pass_fuse_prologues(g[2]->p), LAYERS);
    ASSERT_EQ(lt_pass_fuse_epilogues(g[2]->p), 3 * LAYERS);
    ASSERT_EQ(lt_program_n_nodes(g[1]->p), lt_program_n_nodes(g[2]->p));
    static float out[3][OUT_FLOATS];
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(lt_program_finalize(g[i]->p), LT_OK);
        run(g[i], pool, i ? LT_EXEC_LOOPED : LT_EXEC_DISPATCH, out[i]);
    }
    ASSERT_TRUE(memcmp(out[0], out[1], sizeof out[0]) == 0);
    ASSERT_TRUE(memcmp(out[0], out[2], sizeof out[0]) == 0);
    /* the fused projections keep their caches next to the norm's weight */
    const lt_call *c = lt_program_call(g[1]->p, 2);
    ASSERT_EQ(c->ia[1], LT_MV_PRE_RMSNORM);
    ASSERT_EQ(c->ia[2], LT_MV_POST_ROPE | LT_MV_POST_STORE);
    ASSERT_TRUE(c->op[4] && c->op[4]->data == g[1]->kcache[0]);
    lt_pool_free(pool);
    for (int i = 0; i < 3; i++) {
        lt_program_free(g[i]->p);
        free(g[i]);
    }
}

static void test_conditions(void) {
    prog *g = calloc(1, sizeof *g);
    init(g);
    q_and_view_of_q(g);
    ASSERT_EQ(lt_pass_fuse_epilogues(g->p), 0);
    lt_program_free(g->p);
    free(g);
    ASSERT_EQ(fused_in(k_not_from_matvec), 1);  /* v's store */
    ASSERT_EQ(fused_in(q_read_before_rope), 1); /* v's store; k's follows the rope */
    ASSERT_EQ(fused_in(store_before_rope), 2);  /* both stores, not the rope */
    ASSERT_EQ(fused_in(rope_of_a_view), 1);     /* v's store; k's store follows the rope */
    ASSERT_EQ(fused_in(cache_read_between), 2); /* the rope and k's store */
    ASSERT_EQ(fused_in(cache_written_between), 1); /* k's first store */
    ASSERT_EQ(fused_in(q_only), 3);
    ASSERT_EQ(fused_in(q_read_before_bias), 0);
    ASSERT_EQ(fused_in(bias_of_a_view), 0);
}

/* A two-token rope and store (a prefill step) stay: their producers are not
 * matvecs. */
static void test_two_rows(void) {
    prog *g = calloc(1, sizeof *g);
    init(g);
    int q2 = act(g, "q2", D, 2), k2 = act(g, "k2", KD, 2);
    rope(g, q2, k2);
    store(g, g->kc[0], k2);
    ASSERT_EQ(lt_pass_fuse_epilogues(g->p), 0);
    lt_program_free(g->p);
    free(g);
}

int main(void) {
    uint64_t s = 777;
    for (int l = 0; l < LAYERS; l++) {
        float *ws[] = {WQ[l], WK[l], WV[l], WO[l]};
        int64_t ns[] = {D * D, KD * D, KD * D, D * D};
        for (int w = 0; w < 4; w++)
            for (int64_t i = 0; i < ns[w]; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                ws[w][i] = (float)((int)(s >> 53) - 512) / 2048.0f;
            }
    }
    for (int i = 0; i < D; i++) U[i] = (float)((i * 5) % 13) / 6.0f - 1.0f;
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < D; i++) {
            BQ[l][i] = (float)((i * 7 + l) % 11) / 5.0f - 1.0f;
            if (i < KD) BK[l][i] = (float)((i * 3 + l) % 7) / 3.0f - 1.0f;
            if (i < KD) BV[l][i] = (float)((i + 2 * l) % 5) / 2.0f - 1.0f;
        }
    for (int i = 0; i < HD / 2; i++) FACTORS[i] = 1.0f + 4.0f * (float)i;
    test_layers_fuse();
    test_biases_and_neox_fuse();
    test_conditions();
    test_pass_order();
    test_two_rows();
    exec_test_free();
    return lt_test_finish();
}
