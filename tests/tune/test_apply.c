/* Configurations meet programs: the warm start applies a store's entries
 * to every matching node (every LOOP iteration) and the executor, only for
 * the running host class; a configuration outside the space is never
 * applied; the node timer runs every layer's instance of a looped node and
 * computes what the kernel computes. */
#include <stdlib.h>
#include <string.h>

#include "looptune/tune.h"
#include "test.h"

enum { ROWS = 32, COLS = 64, LAYERS = 3 };
static float W[LAYERS][ROWS * COLS];

static lt_program *build(int *node0, int *iy, int *ix) {
    lt_program *p;
    LT_ASSERT(lt_program_init(&p, "mv3") == LT_OK);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, ROWS, 1, 1, 1, NULL);
    *iy = lt_program_add_buffer(p, "y", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, COLS, 1, 1, 1, NULL);
    *ix = lt_program_add_buffer(p, "x", LT_BUF_ACT, &t);
    for (int l = 0; l < LAYERS; l++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", l);
        lt_tensor_init(&t, LT_F32, COLS, ROWS, 1, 1, W[l]);
        int iw = lt_program_add_buffer(p, name, LT_BUF_WEIGHT, &t);
        int n = lt_program_add_node(p, LT_K_MATVEC, (int[]){*iy, iw, *ix}, 3, NULL, NULL, "mv");
        if (l == 0) *node0 = n;
    }
    LT_ASSERT(lt_pass_kernel_looping(p) == 1);
    LT_ASSERT(lt_program_finalize(p) == LT_OK);
    return p;
}

static lt_config_entry entry(const char *kernel, const char *shape, const char *host,
                             const char *params) {
    lt_config_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.kernel, sizeof e.kernel, "%s", kernel);
    snprintf(e.shape, sizeof e.shape, "%s", shape);
    snprintf(e.host, sizeof e.host, "%s", host);
    snprintf(e.params, sizeof e.params, "%s", params);
    e.median_ns = 1000;
    e.samples = 10;
    e.speedup = 1.1;
    return e;
}

static void test_apply(void) {
    int node0, iy, ix;
    lt_program *p = build(&node0, &iy, &ix);
    lt_shape sh;
    char sig[96];
    lt_shape_of_call(LT_K_MATVEC, lt_program_call(p, node0), &sh);
    lt_shape_format(&sh, sig, sizeof sig);
    ASSERT_STREQ(sig, "f32:64x32:decode");
    ASSERT_EQ(sh.regime, LT_REGIME_DECODE);

    lt_store_backend be = {.name = "memory"}; /* no load, no save */
    lt_store *s;
    ASSERT_EQ(lt_store_open(&s, &be, NULL), LT_OK);
    lt_config_entry mine =
        entry("matvec", sig, "hostA", "rows_per_task=8,unroll=4,k_block=0,prefetch=512,"
                                      "act_int16=1,act_int8=1");
    lt_config_entry other =
        entry("matvec", sig, "hostB", "rows_per_task=4,unroll=1,k_block=0,prefetch=0,"
                                      "act_int16=1,act_int8=1");
    lt_config_entry ex =
        entry("looped", "mv3:decode", "hostA", "tiles_per_thread=2,prefetch_kb=0,sync=1,min_task_kb=0");
    ASSERT_EQ(lt_store_put(s, &mine), LT_OK);
    ASSERT_EQ(lt_store_put(s, &other), LT_OK);
    ASSERT_EQ(lt_store_put(s, &ex), LT_OK);

    int skipped = -1;
    bool used[3] = {false, false, false};
    ASSERT_EQ(lt_store_apply(s, p, "hostA", "mv3:decode", used, &skipped), 2);
    ASSERT_EQ(skipped, 0);
    ASSERT_TRUE(used[0] && !used[1] && used[2]);
    for (int l = 0; l < LAYERS; l++) {
        lt_node_info ni;
        lt_program_node(p, node0 + l, &ni);
        ASSERT_EQ(ni.params.v[0], 8);
        ASSERT_EQ(ni.params.v[1], 4);
        ASSERT_EQ(ni.params.v[3], 512);
    }
    lt_params xp;
    lt_program_exec_params(p, &xp);
    ASSERT_EQ(xp.v[LT_XP_TILES], 2);
    ASSERT_EQ(xp.v[LT_XP_SYNC], 1);
    /* no entry for that host */
    ASSERT_EQ(lt_store_apply(s, p, "hostC", "mv3:decode", NULL, NULL), 0);

    /* outside the space: refused by the check and by the store; nothing changes */
    lt_params bad;
    lt_node_info before;
    lt_program_node(p, node0, &before);
    bad = before.params;
    bad.v[0] = 5;
    ASSERT_EQ(lt_config_check(LT_K_MATVEC, lt_program_call(p, node0), &bad), LT_ECONFIG);
    ASSERT_EQ(lt_program_set_params(p, node0, &bad), LT_ECONFIG);
    lt_config_entry outside =
        entry("matvec", sig, "hostA", "rows_per_task=5,unroll=4,k_block=0,prefetch=512,"
                                      "act_int16=1,act_int8=1");
    ASSERT_EQ(lt_store_put(s, &outside), LT_ECONFIG);
    lt_node_info after;
    lt_program_node(p, node0, &after);
    ASSERT_EQ(after.params.v[0], 8);
    lt_store_close(s);
    lt_program_free(p);
}

/* y = W[0] rmsnorm(x, g) as one matvec node (*node), with epilogue bits
 * `post` (head_dim 16, a cache of 4 rows when it stores). */
static lt_program *norm_matvec(float *g, float *cache, int64_t post, int *node, int *iy,
                               int *ix) {
    lt_program *p;
    ASSERT_EQ(lt_program_init(&p, "fused"), LT_OK);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, ROWS, 1, 1, 1, NULL);
    *iy = lt_program_add_buffer(p, "y", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, COLS, 1, 1, 1, NULL);
    *ix = lt_program_add_buffer(p, "x", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, COLS, 1, 1, 1, g);
    int ig = lt_program_add_buffer(p, "g", LT_BUF_WEIGHT, &t);
    lt_tensor_init(&t, LT_F32, COLS, ROWS, 1, 1, W[0]);
    int iw = lt_program_add_buffer(p, "w", LT_BUF_WEIGHT, &t);
    int ic = -1;
    if (cache) {
        lt_tensor_init(&t, LT_F32, ROWS, 4, 1, 1, cache);
        ic = lt_program_add_buffer(p, "cache", LT_BUF_STATE, &t);
    }
    *node = lt_program_add_node(p, LT_K_MATVEC, (int[]){*iy, iw, *ix, ig, ic}, cache ? 5 : 4,
                                (int64_t[]){0, LT_MV_PRE_RMSNORM, post, post ? 16 : 0},
                                (float[]){1e-5f, post ? 10000.0f : 0, 0, 0}, "mv_norm");
    ASSERT_TRUE(*node >= 0);
    ASSERT_EQ(lt_program_finalize(p), LT_OK);
    return p;
}

/* A fused matvec (here with a norm prologue) takes its own shape's entry,
 * else the plain matvec's of the same weights. */
static void test_apply_fused(void) {
    static float g[COLS];
    int n, iy, ix;
    lt_program *p = norm_matvec(g, NULL, 0, &n, &iy, &ix);
    lt_store_backend be = {.name = "memory"};
    lt_store *s;
    ASSERT_EQ(lt_store_open(&s, &be, NULL), LT_OK);
    lt_config_entry plain = entry("matvec", "f32:64x32:decode", "hostA",
                                  "rows_per_task=16,unroll=2,k_block=0,prefetch=0,"
                                  "act_int16=1,act_int8=1");
    ASSERT_EQ(lt_store_put(s, &plain), LT_OK);
    ASSERT_EQ(lt_store_apply(s, p, "hostA", NULL, NULL, NULL), 1);
    lt_node_info ni;
    lt_program_node(p, n, &ni);
    ASSERT_EQ(ni.params.v[0], 16);
    ASSERT_EQ(ni.params.v[1], 2);
    lt_config_entry own = entry("matvec", "f32:64x32:decode:ia=0,1,0", "hostA",
                                "rows_per_task=64,unroll=4,k_block=0,prefetch=0,"
                                "act_int16=1,act_int8=1");
    ASSERT_EQ(lt_store_put(s, &own), LT_OK);
    ASSERT_EQ(lt_store_apply(s, p, "hostA", NULL, NULL, NULL), 1);
    lt_program_node(p, n, &ni);
    ASSERT_EQ(ni.params.v[0], 64);
    ASSERT_EQ(ni.params.v[1], 4);
    lt_store_close(s);
    lt_program_free(p);
}

/* A matvec with a prologue and epilogues (rope, cache store): its own entry,
 * else the one with its prologue only (a store from before the epilogue
 * pass), else the plain one. The node timer leaves the cache row it stores
 * as it found it. */
static void test_apply_epilogue(void) {
    static float g[COLS], cache[4 * ROWS];
    int n, iy, ix;
    lt_program *p = norm_matvec(g, cache, LT_MV_POST_ROPE | LT_MV_POST_STORE, &n, &iy, &ix);
    lt_store_backend be = {.name = "memory"};
    lt_store *s;
    ASSERT_EQ(lt_store_open(&s, &be, NULL), LT_OK);
    const char *prm = "unroll=1,k_block=0,prefetch=0,act_int16=1,act_int8=1";
    const char *shapes[] = {"f32:64x32:decode", "f32:64x32:decode:ia=0,1,0",
                            "f32:64x32:decode:ia=0,1,3"};
    const int32_t rpt[] = {8, 16, 64};
    for (int i = 0; i < 3; i++) {
        char text[160];
        snprintf(text, sizeof text, "rows_per_task=%d,%s", rpt[i], prm);
        lt_config_entry e = entry("matvec", shapes[i], "hostA", text);
        ASSERT_EQ(lt_store_put(s, &e), LT_OK);
        ASSERT_EQ(lt_store_apply(s, p, "hostA", NULL, NULL, NULL), 1);
        lt_node_info ni;
        lt_program_node(p, n, &ni);
        ASSERT_EQ(ni.params.v[0], rpt[i]);
    }
    lt_store_close(s);

    for (int i = 0; i < 4 * ROWS; i++) cache[i] = (float)i;
    for (int i = 0; i < COLS; i++) {
        g[i] = 1.0f;
        ((float *)lt_program_buffer(p, ix)->data)[i] = (float)(i % 3);
    }
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    lt_step step = {.pos = 2, .n_tokens = 1};
    /* a step stores y (rotated) in row 2 */
    ASSERT_EQ(lt_exec_run(LT_EXEC_DISPATCH, p, pool, &step, NULL), LT_OK);
    ASSERT_TRUE(!memcmp(lt_program_buffer(p, iy)->data, cache + 2 * ROWS, ROWS * sizeof(float)));
    for (int i = 0; i < 4 * ROWS; i++) cache[i] = (float)i;
    lt_node_timer *tm;
    ASSERT_EQ(lt_node_timer_init(&tm, p, n, pool, &step, 4), LT_OK);
    lt_node_info ni;
    lt_program_node(p, n, &ni);
    ASSERT_TRUE(lt_node_timer_run(tm, &ni.params, NULL) > 0);
    ASSERT_TRUE(lt_node_timer_run(tm, &ni.params, NULL) > 0);
    int changed = 0;
    for (int i = 0; i < 4 * ROWS; i++) changed += cache[i] != (float)i;
    ASSERT_EQ(changed, 0);
    lt_node_timer_free(tm);
    lt_pool_free(pool);
    lt_program_free(p);
}

static void test_timer(int nth) {
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < ROWS * COLS; i++) W[l][i] = (float)((i * 7 + l * 3) % 11) - 5.0f;
    int node0, iy, ix;
    lt_program *p = build(&node0, &iy, &ix);
    float *x = lt_program_buffer(p, ix)->data;
    for (int i = 0; i < COLS; i++) x[i] = (float)(i % 5) * 0.5f;
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
    lt_step step = {.pos = 0, .n_tokens = 1};
    lt_node_timer *t;
    ASSERT_EQ(lt_node_timer_init(&t, p, node0 + 1, pool, &step, 4), LT_OK);
    ASSERT_EQ(lt_node_timer_instances(t), LAYERS);
    lt_space sp;
    lt_space_from_kernel(&sp, lt_kernel_get(LT_K_MATVEC));
    for (int64_t k = 0; k < lt_space_size(&sp); k += 97) {
        lt_params prm;
        lt_space_point(&sp, k, &prm);
        memset(lt_program_buffer(p, iy)->data, 0, ROWS * sizeof(float));
        bool busy;
        double ns = lt_node_timer_run(t, &prm, &busy);
        ASSERT_TRUE(ns > 0);
        /* the last instance wrote y = W[2] x */
        const float *y = lt_program_buffer(p, iy)->data;
        int bad = 0;
        for (int r = 0; r < ROWS; r++) {
            double ref = 0;
            for (int c = 0; c < COLS; c++) ref += (double)W[LAYERS - 1][r * COLS + c] * x[c];
            bad += fabs(y[r] - ref) > 1e-3;
        }
        ASSERT_EQ(bad, 0);
    }
    lt_node_timer_free(t);
    lt_pool_free(pool);
    lt_program_free(p);
}

int main(void) {
    test_apply();
    test_apply_fused();
    test_apply_epilogue();
    test_timer(1);
    test_timer(2);
    return lt_test_finish();
}
