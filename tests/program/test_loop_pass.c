/* The kernel-looping pass on synthetic programs: runs of different lengths,
 * blocks that differ in a shape, an attribute or a parameter (never merged),
 * runs at the start and at the end, nested repeats, inconsistent bindings. */
#include <stdlib.h>

#include "looptune/program.h"
#include "test.h"

enum { N = 64 };

typedef struct {
    lt_program *p;
    int x, y;       /* activations */
    int w[16];      /* weights of "layer" i, shape N */
    int w_other;    /* a weight of another shape (N/2) */
    float data[17][N];
} fixture;

static void fixture_init(fixture *f) {
    ASSERT_EQ(lt_program_init(&f->p, "synthetic"), LT_OK);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, N, 1, 1, 1, NULL);
    f->x = lt_program_add_buffer(f->p, "x", LT_BUF_ACT, &t);
    f->y = lt_program_add_buffer(f->p, "y", LT_BUF_ACT, &t);
    for (int i = 0; i < 16; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        lt_tensor_init(&t, LT_F32, N, 1, 1, 1, f->data[i]);
        f->w[i] = lt_program_add_buffer(f->p, name, LT_BUF_WEIGHT, &t);
    }
    lt_tensor_init(&t, LT_F32, N / 2, 1, 1, 1, f->data[16]);
    f->w_other = lt_program_add_buffer(f->p, "w_other", LT_BUF_WEIGHT, &t);
}

/* y = x + w ; x = y + w : a two-node "layer" binding weight w */
static void layer(fixture *f, int w) {
    ASSERT_TRUE(lt_program_add_node(f->p, LT_K_ADD, (int[]){f->y, f->x, w}, 3, NULL, NULL, "a") >= 0);
    ASSERT_TRUE(lt_program_add_node(f->p, LT_K_ADD, (int[]){f->x, f->y, w}, 3, NULL, NULL, "b") >= 0);
}

static void other(fixture *f, const char *label) {
    ASSERT_TRUE(lt_program_add_node(f->p, LT_K_SWIGLU, (int[]){f->y, f->x, f->x}, 3, NULL, NULL,
                                    label) >= 0);
}

static void other2(fixture *f, const char *label) {
    ASSERT_TRUE(lt_program_add_node(f->p, LT_K_SWIGLU, (int[]){f->x, f->y, f->y}, 3, NULL, NULL,
                                    label) >= 0);
}

static void expect_loop(fixture *f, int i, int first, int body, int iters, int slots) {
    lt_loop_info L;
    lt_program_loop(f->p, i, &L);
    ASSERT_EQ(L.first, first);
    ASSERT_EQ(L.body_len, body);
    ASSERT_EQ(L.n_iter, iters);
    ASSERT_EQ(L.n_slots, slots);
}

static void test_run_lengths(void) {
    for (int n = 0; n <= 12; n++) {
        fixture f;
        fixture_init(&f);
        other(&f, "pre");
        for (int i = 0; i < n; i++) layer(&f, f.w[i]);
        other2(&f, "post");
        int found = lt_pass_kernel_looping(f.p);
        if (n < 2) {
            ASSERT_EQ(found, 0);
        } else {
            ASSERT_EQ(found, 1);
            /* one slot per bound operand: both nodes read the layer's w */
            expect_loop(&f, 0, 1, 2, n, 2);
            for (int s = 0; s < 2; s++) {
                /* the binding walks the weights in order */
                for (int it = 0; it < n; it++)
                    ASSERT_EQ(lt_program_loop_binding(f.p, 0, it, s), f.w[it]);
                int j, o;
                lt_program_loop_slot(f.p, 0, s, &j, &o);
                ASSERT_EQ(j, s);
                ASSERT_EQ(o, 2);
            }
        }
        ASSERT_EQ(lt_pass_kernel_looping(f.p), 0); /* idempotent */
        ASSERT_EQ(lt_program_finalize(f.p), LT_OK);
        lt_program_free(f.p);
    }
}

static void test_runs_at_edges(void) {
    fixture f;
    fixture_init(&f);
    for (int i = 0; i < 3; i++) layer(&f, f.w[i]); /* at the start */
    other(&f, "middle");
    for (int i = 3; i < 7; i++) layer(&f, f.w[i]); /* at the end */
    ASSERT_EQ(lt_pass_kernel_looping(f.p), 2);
    ASSERT_EQ(lt_program_n_loops(f.p), 2);
    expect_loop(&f, 0, 0, 2, 3, 2);
    expect_loop(&f, 1, 7, 2, 4, 2);
    lt_program_free(f.p);
}

/* blocks that differ in a shape, an attribute or a parameter are not merged */
static void test_no_merge(void) {
    fixture f;
    fixture_init(&f);
    layer(&f, f.w[0]);
    layer(&f, f.w_other); /* different weight shape: its own block */
    ASSERT_EQ(lt_pass_kernel_looping(f.p), 0);
    lt_program_free(f.p);

    fixture_init(&f);
    ASSERT_TRUE(lt_program_add_node(f.p, LT_K_RMSNORM, (int[]){f.y, f.x, f.w[0]}, 3, NULL,
                                    (float[]){1e-5f, 0, 0, 0}, "n0") >= 0);
    ASSERT_TRUE(lt_program_add_node(f.p, LT_K_RMSNORM, (int[]){f.y, f.x, f.w[1]}, 3, NULL,
                                    (float[]){1e-6f, 0, 0, 0}, "n1") >= 0); /* other eps */
    ASSERT_EQ(lt_pass_kernel_looping(f.p), 0);
    lt_program_free(f.p);

    fixture_init(&f);
    layer(&f, f.w[0]);
    layer(&f, f.w[1]);
    layer(&f, f.w[2]);
    /* a different parameter value on the middle layer's first node */
    lt_params prm;
    lt_node_info ni;
    lt_program_node(f.p, 2, &ni);
    prm = ni.params;
    prm.v[0] = prm.v[0] == 1024 ? 256 : 1024; /* add: min_chunk */
    ASSERT_EQ(lt_program_set_params(f.p, 2, &prm), LT_OK);
    ASSERT_EQ(lt_pass_kernel_looping(f.p), 0);
    lt_program_free(f.p);

    /* an activation operand that differs is not a binding */
    fixture_init(&f);
    ASSERT_TRUE(lt_program_add_node(f.p, LT_K_ADD, (int[]){f.y, f.x, f.w[0]}, 3, NULL, NULL, "a") >= 0);
    ASSERT_TRUE(lt_program_add_node(f.p, LT_K_ADD, (int[]){f.x, f.x, f.w[1]}, 3, NULL, NULL, "b") >= 0);
    ASSERT_EQ(lt_pass_kernel_looping(f.p), 0);
    lt_program_free(f.p);
}

/* Two matvecs over q8_0 weights of one shape and strides: a loop of two
 * when both are plain, none when one is split (core.h): the same bytes
 * under another layout are not the same structure. */
static void test_layout_differs(void) {
    for (int split = 0; split < 2; split++) {
        static lt_block_q8_0 wdata[2][4][2];
        static float xd[64], yd[4];
        lt_program *p;
        ASSERT_EQ(lt_program_init(&p, "layouts"), LT_OK);
        lt_tensor t;
        lt_tensor_init(&t, LT_F32, 64, 1, 1, 1, xd);
        const int x = lt_program_add_buffer(p, "x", LT_BUF_ACT, &t);
        lt_tensor_init(&t, LT_F32, 4, 1, 1, 1, yd);
        const int y = lt_program_add_buffer(p, "y", LT_BUF_ACT, &t);
        int w[2];
        for (int i = 0; i < 2; i++) {
            lt_tensor_init(&t, LT_Q8_0, 64, 4, 1, 1, wdata[i]);
            if (split && i == 1) t.layout = LT_LAYOUT_Q8_SPLIT;
            w[i] = lt_program_add_buffer(p, i ? "w1" : "w0", LT_BUF_WEIGHT, &t);
        }
        for (int i = 0; i < 2; i++)
            ASSERT_TRUE(lt_program_add_node(p, LT_K_MATVEC, (int[]){y, w[i], x}, 3, NULL, NULL,
                                            i ? "m1" : "m0") >= 0);
        ASSERT_EQ(lt_pass_kernel_looping(p), split ? 0 : 1);
        lt_program_free(p);
    }
}

/* A B B, A B B, A B B: the outer block wins (coverage 9 against 2). */
static void test_nested(void) {
    fixture f;
    fixture_init(&f);
    for (int i = 0; i < 3; i++) {
        other(&f, "A");
        ASSERT_TRUE(lt_program_add_node(f.p, LT_K_ADD, (int[]){f.y, f.y, f.w[2 * i]}, 3, NULL, NULL, "B") >= 0);
        ASSERT_TRUE(lt_program_add_node(f.p, LT_K_ADD, (int[]){f.y, f.y, f.w[2 * i + 1]}, 3, NULL, NULL, "B") >= 0);
    }
    ASSERT_EQ(lt_pass_kernel_looping(f.p), 1);
    expect_loop(&f, 0, 0, 3, 3, 2);
    lt_program_free(f.p);
}

/* The same weight used twice in a block must be bound consistently: a block
 * binding (w0, w0) and one binding (w1, w2) are different structures. */
static void test_consistent_bindings(void) {
    fixture f;
    fixture_init(&f);
    ASSERT_TRUE(lt_program_add_node(f.p, LT_K_ADD, (int[]){f.y, f.x, f.w[0]}, 3, NULL, NULL, "a") >= 0);
    ASSERT_TRUE(lt_program_add_node(f.p, LT_K_ADD, (int[]){f.x, f.y, f.w[0]}, 3, NULL, NULL, "b") >= 0);
    ASSERT_TRUE(lt_program_add_node(f.p, LT_K_ADD, (int[]){f.y, f.x, f.w[1]}, 3, NULL, NULL, "a") >= 0);
    ASSERT_TRUE(lt_program_add_node(f.p, LT_K_ADD, (int[]){f.x, f.y, f.w[2]}, 3, NULL, NULL, "b") >= 0);
    /* single nodes still loop: a,b,a,b each bind one weight per node, but
     * the two-node block must not be taken as a loop */
    lt_pass_kernel_looping(f.p);
    for (int i = 0; i < lt_program_n_loops(f.p); i++) {
        lt_loop_info L;
        lt_program_loop(f.p, i, &L);
        ASSERT_TRUE(!(L.body_len == 2 && L.n_iter == 2));
    }
    lt_program_free(f.p);
}

/* Parameters set on a node inside a loop apply to every iteration. */
static void test_params_follow_loop(void) {
    fixture f;
    fixture_init(&f);
    for (int i = 0; i < 4; i++) layer(&f, f.w[i]);
    ASSERT_EQ(lt_pass_kernel_looping(f.p), 1);
    lt_node_info ni;
    lt_program_node(f.p, 5, &ni); /* iteration 2, body node 1 */
    lt_params prm = ni.params;
    prm.v[0] = prm.v[0] == 1024 ? 256 : 1024;
    ASSERT_EQ(lt_program_set_params(f.p, 5, &prm), LT_OK);
    for (int it = 0; it < 4; it++) {
        lt_program_node(f.p, 2 * it + 1, &ni);
        ASSERT_EQ(ni.params.v[0], prm.v[0]);
        lt_program_node(f.p, 2 * it, &ni);
        ASSERT_NE(ni.params.v[0], prm.v[0]);
    }
    lt_program_free(f.p);
}

int main(void) {
    test_run_lengths();
    test_runs_at_edges();
    test_no_merge();
    test_layout_differs();
    test_nested();
    test_consistent_bindings();
    test_params_follow_loop();
    return lt_test_finish();
}
