/* The prologue-fusion pass on synthetic programs: a norm or gate feeding
 * only matvecs folds into them (and the program computes the same bits on
 * both executors and 1-3 threads); every condition that forbids it does:
 * another kind of reader, an input rewritten before the last reader, a
 * reader that writes an input, a rmsnorm in place, two rows, a view, no
 * reader. The looping pass still finds the layers of a fused program. */
#include <stdlib.h>
#include <string.h>

#include "looptune/program.h"
#include "pass_test.h"
#include "test.h"
#include "exec_test.h"

enum { D = 64, LAYERS = 4 };

static float W[LAYERS][3][D * D], G[LAYERS][2][D], U[D];

static float UH[D / 2];

typedef struct {
    lt_program *p;
    int x, xb, h, h2, two, view, half, w[LAYERS][3], g[LAYERS][2], u, uh;
} prog;

static void init(prog *g) {
    ASSERT_EQ(lt_program_init(&g->p, "fuse"), LT_OK);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, D, 1, 1, 1, NULL);
    g->x = lt_program_add_buffer(g->p, "x", LT_BUF_ACT, &t);
    g->xb = lt_program_add_buffer(g->p, "xb", LT_BUF_ACT, &t);
    g->h = lt_program_add_buffer(g->p, "h", LT_BUF_ACT, &t);
    g->h2 = lt_program_add_buffer(g->p, "h2", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, D, 2, 1, 1, NULL);
    g->two = lt_program_add_buffer(g->p, "two", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, D, 1, 1, 1, NULL);
    g->view = lt_program_add_view(g->p, "two_row1", g->two, D * sizeof(float), &t);
    for (int l = 0; l < LAYERS; l++) {
        char name[16];
        for (int j = 0; j < 3; j++) {
            snprintf(name, sizeof name, "W%d.%d", l, j);
            lt_tensor_init(&t, LT_F32, D, D, 1, 1, W[l][j]);
            g->w[l][j] = lt_program_add_buffer(g->p, name, LT_BUF_WEIGHT, &t);
        }
        for (int j = 0; j < 2; j++) {
            snprintf(name, sizeof name, "g%d.%d", l, j);
            lt_tensor_init(&t, LT_F32, D, 1, 1, 1, G[l][j]);
            g->g[l][j] = lt_program_add_buffer(g->p, name, LT_BUF_WEIGHT, &t);
        }
    }
    lt_tensor_init(&t, LT_F32, D, 1, 1, 1, U);
    g->u = lt_program_add_buffer(g->p, "u", LT_BUF_WEIGHT, &t);
    lt_tensor_init(&t, LT_F32, D / 2, 1, 1, 1, UH);
    g->uh = lt_program_add_buffer(g->p, "uh", LT_BUF_WEIGHT, &t);
    lt_tensor_init(&t, LT_F32, D / 2, 1, 1, 1, NULL);
    g->half = lt_program_add_view(g->p, "xb_half", g->xb, 0, &t);
    /* x starts from a weight, so every run is the same */
    ASSERT_TRUE(lt_program_add_node(g->p, LT_K_ADD, (int[]){g->x, g->u, g->g[0][0]}, 3, NULL, NULL,
                                    "init") >= 0);
}

static int norm(prog *g, int y, int x, int w) {
    return lt_program_add_node(g->p, LT_K_RMSNORM, (int[]){y, x, w}, 3, NULL,
                               (float[]){1e-5f, 0, 0, 0}, "norm");
}
static int mv(prog *g, int y, int w, int x, bool acc) {
    return lt_program_add_node(g->p, LT_K_MATVEC, (int[]){y, w, x}, 3,
                               (int64_t[]){acc, 0, 0, 0}, NULL, "mv");
}
static int swiglu(prog *g, int y, int a, int b) {
    return lt_program_add_node(g->p, LT_K_SWIGLU, (int[]){y, a, b}, 3, NULL, NULL, "swiglu");
}

/* A layer: xb = norm(x); h = W0 xb; h2 = W1 xb; h = swiglu(h, h2);
 * x += W2 h. Both the norm and the gate fuse. */
static void layer(prog *g, int l) {
    norm(g, g->xb, g->x, g->g[l][0]);
    mv(g, g->h, g->w[l][0], g->xb, false);
    mv(g, g->h2, g->w[l][1], g->xb, false);
    swiglu(g, g->h, g->h, g->h2);
    mv(g, g->x, g->w[l][2], g->h, true);
}

/* x after one step of p on pool by executor e. */
static void run(lt_program *p, int x, lt_pool *pool, lt_executor e, float out[D]) {
    lt_step s = {.pos = 0, .n_tokens = 1};
    ASSERT_EQ(exec_step(e, p, pool, &s, NULL), LT_OK);
    memcpy(out, lt_program_buffer(p, x)->data, sizeof(float) * D);
}

static void test_layers_fuse(void) {
    prog a, b;
    init(&a);
    init(&b);
    for (int l = 0; l < LAYERS; l++) {
        layer(&a, l);
        layer(&b, l);
    }
    const int before = lt_program_n_nodes(b.p);
    ASSERT_EQ(lt_pass_fuse_prologues(b.p), 2 * LAYERS);
    ASSERT_EQ(lt_program_n_nodes(b.p), before - 2 * LAYERS);
    ASSERT_EQ(count_kernel(b.p, LT_K_RMSNORM) + count_kernel(b.p, LT_K_SWIGLU), 0);
    ASSERT_EQ(lt_pass_fuse_prologues(b.p), 0); /* idempotent */
    ASSERT_EQ(lt_pass_kernel_looping(b.p), 1);
    lt_loop_info L;
    lt_program_loop(b.p, 0, &L);
    ASSERT_EQ(L.n_iter, LAYERS);
    ASSERT_EQ(L.body_len, 3);
    ASSERT_EQ(lt_pass_fuse_prologues(b.p), LT_ESTATE); /* after the looping pass */
    ASSERT_EQ(lt_program_finalize(a.p), LT_OK);
    ASSERT_EQ(lt_program_finalize(b.p), LT_OK);
    ASSERT_EQ(lt_pass_fuse_prologues(a.p), LT_ESTATE); /* after finalize */
    /* the matvecs now read x and h with their prologues */
    const lt_call *c = lt_program_call(b.p, 1);
    ASSERT_EQ(c->ia[1], LT_MV_PRE_RMSNORM);
    ASSERT_TRUE(c->op[2]->data == lt_program_buffer(b.p, b.x)->data);
    ASSERT_EQ(lt_program_call(b.p, 3)->ia[1], LT_MV_PRE_SWIGLU);
    for (int nth = 1; nth <= 3; nth++) {
        lt_pool *pool;
        ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
        float ref[D], got[D];
        run(a.p, a.x, pool, LT_EXEC_DISPATCH, ref);
        for (int e = 0; e < 2; e++) {
            run(b.p, b.x, pool, (lt_executor)e, got);
            ASSERT_TRUE(memcmp(ref, got, sizeof ref) == 0);
        }
        lt_pool_free(pool);
    }
    lt_program_free(a.p);
    lt_program_free(b.p);
}

/* Builds a program by f, fuses it and returns how many nodes fused. */
static int fused_in(void (*f)(prog *)) {
    prog g;
    init(&g);
    f(&g);
    int n = lt_pass_fuse_prologues(g.p);
    ASSERT_EQ(lt_program_finalize(g.p), LT_OK); /* still a valid program */
    lt_program_free(g.p);
    return n;
}

static void other_reader(prog *g) { /* an add reads the norm's output */
    norm(g, g->xb, g->x, g->g[0][0]);
    mv(g, g->h, g->w[0][0], g->xb, false);
    lt_program_add_node(g->p, LT_K_ADD, (int[]){g->h2, g->xb, g->h}, 3, NULL, NULL, "add");
}
static void input_rewritten(prog *g) { /* x changes between the readers */
    norm(g, g->xb, g->x, g->g[0][0]);
    mv(g, g->h, g->w[0][0], g->xb, false);
    mv(g, g->x, g->w[0][1], g->h, true);
    mv(g, g->h2, g->w[0][2], g->xb, false);
}
static void reader_writes_input(prog *g) { /* x += W norm(x): would race */
    norm(g, g->xb, g->x, g->g[0][0]);
    mv(g, g->x, g->w[0][0], g->xb, true);
}
static void in_place(prog *g) { /* x = norm(x) */
    norm(g, g->x, g->x, g->g[0][0]);
    mv(g, g->h, g->w[0][0], g->x, false);
}
static void into_view(prog *g) { /* the output is a row of a bigger buffer */
    norm(g, g->view, g->x, g->g[0][0]);
    mv(g, g->h, g->w[0][0], g->view, false);
}
static void no_reader(prog *g) { norm(g, g->xb, g->x, g->g[0][0]); }
static void gate_overwrites_up(prog *g) { /* h2 = swiglu(h, h2): up is gone */
    mv(g, g->h, g->w[0][0], g->x, false);
    mv(g, g->h2, g->w[0][1], g->x, false);
    swiglu(g, g->h2, g->h, g->h2);
    mv(g, g->xb, g->w[0][2], g->h2, false);
}
static void fusable_after_rewrite(prog *g) { /* readers end at the next write */
    norm(g, g->xb, g->x, g->g[0][0]);
    mv(g, g->h, g->w[0][0], g->xb, false);
    lt_program_add_node(g->p, LT_K_ADD, (int[]){g->xb, g->h, g->u}, 3, NULL, NULL, "rewrite");
    lt_program_add_node(g->p, LT_K_ADD, (int[]){g->h2, g->xb, g->u}, 3, NULL, NULL, "reads new xb");
}

static void read_before_write(prog *g) { /* the previous step's xb is read first */
    lt_program_add_node(g->p, LT_K_ADD, (int[]){g->h2, g->xb, g->u}, 3, NULL, NULL, "old xb");
    norm(g, g->xb, g->x, g->g[0][0]);
    mv(g, g->h, g->w[0][0], g->xb, false);
}
static void partial_rewrite(prog *g) { /* half of xb rewritten, then all of it read */
    norm(g, g->xb, g->x, g->g[0][0]);
    mv(g, g->h, g->w[0][0], g->xb, false);
    lt_program_add_node(g->p, LT_K_ADD, (int[]){g->half, g->uh, g->uh}, 3, NULL, NULL, "half");
    mv(g, g->h2, g->w[0][1], g->xb, false);
}

/* A norm of `cols` columns feeding one matvec: fused up to LT_MV_PRE_MAX_COLS. */
static int fused_wide(int64_t cols) {
    float *buf = calloc((size_t)cols * 4, sizeof(float));
    lt_program *p;
    ASSERT_EQ(lt_program_init(&p, "wide"), LT_OK);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, cols, 1, 1, 1, NULL);
    int x = lt_program_add_buffer(p, "x", LT_BUF_ACT, &t);
    int xb = lt_program_add_buffer(p, "xb", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, cols, 1, 1, 1, buf);
    int g = lt_program_add_buffer(p, "g", LT_BUF_WEIGHT, &t);
    lt_tensor_init(&t, LT_F32, cols, 2, 1, 1, buf + cols);
    int w = lt_program_add_buffer(p, "W", LT_BUF_WEIGHT, &t);
    lt_tensor_init(&t, LT_F32, 2, 1, 1, 1, NULL);
    int y = lt_program_add_buffer(p, "y", LT_BUF_ACT, &t);
    lt_program_add_node(p, LT_K_RMSNORM, (int[]){xb, x, g}, 3, NULL, (float[]){1e-5f, 0, 0, 0},
                        "norm");
    lt_program_add_node(p, LT_K_MATVEC, (int[]){y, w, xb}, 3, NULL, NULL, "mv");
    int n = lt_pass_fuse_prologues(p);
    ASSERT_EQ(lt_program_finalize(p), LT_OK);
    lt_program_free(p);
    free(buf);
    return n;
}

static void test_conditions(void) {
    ASSERT_EQ(fused_in(read_before_write), 0);
    ASSERT_EQ(fused_in(partial_rewrite), 0);
    ASSERT_EQ(fused_wide(LT_MV_PRE_MAX_COLS), 1);
    ASSERT_EQ(fused_wide(LT_MV_PRE_MAX_COLS + 32), 0);
    ASSERT_EQ(fused_in(other_reader), 0);
    ASSERT_EQ(fused_in(input_rewritten), 0);
    ASSERT_EQ(fused_in(reader_writes_input), 0);
    ASSERT_EQ(fused_in(in_place), 0);
    ASSERT_EQ(fused_in(into_view), 0);
    ASSERT_EQ(fused_in(no_reader), 0);
    ASSERT_EQ(fused_in(gate_overwrites_up), 0);
    ASSERT_EQ(fused_in(fusable_after_rewrite), 1);
}

/* Two-row activations (a prefill batch) stay as they are. */
static void test_two_rows(void) {
    prog g;
    init(&g);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, D, 2, 1, 1, NULL);
    int y2 = lt_program_add_buffer(g.p, "y2", LT_BUF_ACT, &t);
    int o2 = lt_program_add_buffer(g.p, "o2", LT_BUF_ACT, &t);
    norm(&g, y2, g.two, g.g[0][0]);
    lt_program_add_node(g.p, LT_K_MATMUL, (int[]){o2, g.w[0][0], y2}, 3, NULL, NULL, "mm");
    ASSERT_EQ(lt_pass_fuse_prologues(g.p), 0);
    lt_program_free(g.p);
}

int main(void) {
    uint64_t s = 12345;
    for (int l = 0; l < LAYERS; l++) {
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < D * D; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                W[l][j][i] = (float)((int)(s >> 53) - 512) / 4096.0f;
            }
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < D; i++) G[l][j][i] = 0.5f + (float)((i * 7 + l + j) % 11) / 10.0f;
    }
    for (int i = 0; i < D; i++) U[i] = (float)((i * 5) % 13) / 6.0f - 1.0f;
    for (int i = 0; i < D / 2; i++) UH[i] = (float)(i % 7) / 3.0f;
    test_layers_fuse();
    test_conditions();
    test_two_rows();
    exec_test_free();
    return lt_test_finish();
}
