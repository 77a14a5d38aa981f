/* Executors give every execution its own lt_step.seq, and kernels that
 * cache per (call, seq) (matvec's int16 and int8 activations) never see
 * stale input: a program whose x changes between executions, and whose x
 * is rewritten between two matvec nodes within one execution, must match
 * uncached direct kernel calls bit for bit, under both executors and 1..3
 * threads, in either activation mode. */
#include "looptune/program.h"
#include "test.h"
#include "exec_test.h"

enum { ROWS = 96, COLS = 256 };

static uint64_t rng = 0x243f6a8885a308d3ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* The quantised activations under test: "act_int16" or "act_int8". */
static const char *act;

/* matvec's default parameters with only `act` of the activation modes on. */
static void act_params(const lt_kernel *k, lt_params *p) {
    lt_params_default(k, p);
    p->v[lt_kernel_param_index(k, "act_int16")] = 0;
    p->v[lt_kernel_param_index(k, "act_int8")] = 0;
    p->v[lt_kernel_param_index(k, act)] = 1;
}

/* y = W x in mode `act`, one thread, seq 0 (nothing cached). */
static void direct(const lt_tensor *W, const float *x, float *y) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    lt_tensor tx, ty;
    lt_tensor_init(&tx, LT_F32, COLS, 1, 1, 1, (void *)x);
    lt_tensor_init(&ty, LT_F32, ROWS, 1, 1, 1, y);
    lt_call c = {.op = {&ty, (lt_tensor *)W, &tx}};
    act_params(k, &c.params);
    lt_step st = {.pos = 0, .n_tokens = 1};
    lt_kernel_fn_for(k, lt_isa_detect())(&c, &st, 0, 1);
}

/* Programs over one q8_0 W: with `rewrite`, y1 = W x; x += c; y2 = W x
 * (two nodes reading the same x buffer in one execution); without, y1 = W x
 * alone (the node a thread ran last is the one it runs next). Each of
 * `iters` executions gets a new x; the uncached wants are computed first, so
 * nothing else runs on the threads between executions. */
static void run_case(bool rewrite) {
    enum { ITERS = 6 };
    const size_t rb = lt_dtype_row_bytes(LT_Q8_0, COLS);
    void *w = lt_aligned_alloc(64, rb * ROWS);
    float tmp[COLS], c[COLS];
    for (int r = 0; r < ROWS; r++) {
        for (int i = 0; i < COLS; i++) tmp[i] = frand();
        lt_row_from_f32(LT_Q8_0, tmp, (char *)w + rb * (size_t)r, COLS);
    }
    for (int i = 0; i < COLS; i++) c[i] = 0.5f * frand();

    lt_program *p;
    ASSERT_EQ(lt_program_init(&p, "seq"), LT_OK);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, COLS, 1, 1, 1, NULL);
    int x = lt_program_add_buffer(p, "x", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, COLS, 1, 1, 1, c);
    int cb = lt_program_add_buffer(p, "c", LT_BUF_WEIGHT, &t);
    lt_tensor_init(&t, LT_F32, ROWS, 1, 1, 1, NULL);
    int y1 = lt_program_add_buffer(p, "y1", LT_BUF_ACT, &t);
    int y2 = lt_program_add_buffer(p, "y2", LT_BUF_ACT, &t);
    lt_tensor tw;
    lt_tensor_init(&tw, LT_Q8_0, COLS, ROWS, 1, 1, w);
    int wb = lt_program_add_buffer(p, "W", LT_BUF_WEIGHT, &tw);
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    lt_params prm;
    act_params(k, &prm);
    int n1 = lt_program_add_node(p, LT_K_MATVEC, (int[]){y1, wb, x}, 3, NULL, NULL, "mv1");
    ASSERT_EQ(lt_program_set_params(p, n1, &prm), LT_OK);
    if (rewrite) {
        lt_program_add_node(p, LT_K_ADD, (int[]){x, x, cb}, 3, NULL, NULL, "add");
        int n2 = lt_program_add_node(p, LT_K_MATVEC, (int[]){y2, wb, x}, 3, NULL, NULL, "mv2");
        ASSERT_EQ(lt_program_set_params(p, n2, &prm), LT_OK);
    }
    ASSERT_EQ(lt_program_finalize(p), LT_OK);

    static float xin[ITERS][COLS], want1[ITERS][ROWS], want2[ITERS][ROWS];
    for (int it = 0; it < ITERS; it++) {
        float x2[COLS];
        for (int i = 0; i < COLS; i++) xin[it][i] = frand() * (float)(1 + it);
        for (int i = 0; i < COLS; i++) x2[i] = xin[it][i] + c[i];
        direct(&tw, xin[it], want1[it]);
        direct(&tw, x2, want2[it]);
    }
    float *xd = lt_program_buffer(p, x)->data;
    const float *y1d = lt_program_buffer(p, y1)->data, *y2d = lt_program_buffer(p, y2)->data;
    lt_step step = {.pos = 0, .n_tokens = 1};
    int bad = 0, runs = 0;
    for (int nth = 1; nth <= 3; nth++) {
        lt_pool *pool;
        ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
        for (int e = 0; e < 2; e++) {
            for (int it = 0; it < ITERS; it++) {
                memcpy(xd, xin[it], sizeof xin[it]);
                ASSERT_EQ(exec_step((lt_executor)e, p, pool, &step, NULL), LT_OK);
                bad += memcmp(y1d, want1[it], sizeof want1[it]) != 0;
                if (rewrite) bad += memcmp(y2d, want2[it], sizeof want2[it]) != 0;
                runs++;
            }
        }
        lt_pool_free(pool);
    }
    ASSERT_EQ(runs, 3 * 2 * ITERS);
    ASSERT_EQ(bad, 0);
    lt_program_free(p);
    lt_aligned_free(w);
}

int main(void) {
    act = "act_int16";
    run_case(false);
    run_case(true);
    act = "act_int8";
    run_case(false);
    run_case(true);
    exec_test_free();
    return lt_test_finish();
}
