/* The node timer runs every layer's instance of a looped node and computes
 * what the kernel computes, and leaves a cache it stores into as it was. */
#include <stdlib.h>
#include <string.h>

#include "exec_test.h"
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

/* The node timer on a matvec with a prologue and epilogues (rope, cache
 * store) leaves the cache row it stores as it found it. */
static void test_timer_epilogue(void) {
    static float g[COLS], cache[4 * ROWS];
    int n, iy, ix;
    lt_program *p = norm_matvec(g, cache, LT_MV_POST_ROPE | LT_MV_POST_STORE, &n, &iy, &ix);
    for (int i = 0; i < 4 * ROWS; i++) cache[i] = (float)i;
    for (int i = 0; i < COLS; i++) {
        g[i] = 1.0f;
        ((float *)lt_program_buffer(p, ix)->data)[i] = (float)(i % 3);
    }
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    lt_step step = {.pos = 2, .n_tokens = 1};
    /* a step stores y (rotated) in row 2 */
    ASSERT_EQ(exec_step(LT_EXEC_DISPATCH, p, pool, &step, NULL), LT_OK);
    ASSERT_TRUE(!memcmp(lt_program_buffer(p, iy)->data, cache + 2 * ROWS, ROWS * sizeof(float)));
    for (int i = 0; i < 4 * ROWS; i++) cache[i] = (float)i;
    lt_node_timer *tm;
    lt_exec *xe = exec_of(LT_EXEC_LOOPED);
    ASSERT_EQ(lt_node_timer_init(&tm, xe, p, n, pool, &step, 4), LT_OK);
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

/* Warm or cold (the weights evicted before each run, as the tuner times a
 * model larger than the last-level cache): the same results, the weights
 * untouched. */
static void test_timer(int nth, bool cold) {
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
    lt_exec *xe = exec_of(LT_EXEC_LOOPED);
    ASSERT_EQ(lt_node_timer_init(&t, xe, p, node0 + 1, pool, &step, 4), LT_OK);
    ASSERT_EQ(lt_node_timer_instances(t), LAYERS);
    lt_node_timer_set_cold(t, cold);
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
    int moved = 0;
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < ROWS * COLS; i++) moved += W[l][i] != (float)((i * 7 + l * 3) % 11) - 5.0f;
    ASSERT_EQ(moved, 0);
    lt_node_timer_free(t);
    lt_pool_free(pool);
    lt_program_free(p);
}

int main(void) {
    test_timer_epilogue();
    test_timer(1, false);
    test_timer(2, false);
    test_timer(1, true);
    test_timer(2, true);
    exec_test_free();
    return lt_test_finish();
}
