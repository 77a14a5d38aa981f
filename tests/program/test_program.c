/* The program IR and the dispatch executor on synthetic programs: results
 * against direct computation, views, printing, and builder errors. */
#include <stdlib.h>

#include "looptune/program.h"
#include "test.h"
#include "exec_test.h"

enum { N = 1000 };

static int add_act(lt_program *p, const char *name, int64_t n) {
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, n, 1, 1, 1, NULL);
    return lt_program_add_buffer(p, name, LT_BUF_ACT, &t);
}

/* y = ((a + b) + b) + ... a chain of `depth` adds, each depending on the last:
 * a missing barrier or a wrong split shows up as a wrong sum. */
static void test_chain(int nth, int depth) {
    static float a[N], b[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)i;
        b[i] = 0.5f * (float)(i % 7);
    }
    lt_program *p;
    ASSERT_EQ(lt_program_init(&p, "chain"), LT_OK);
    lt_tensor ta, tb;
    lt_tensor_init(&ta, LT_F32, N, 1, 1, 1, a);
    lt_tensor_init(&tb, LT_F32, N, 1, 1, 1, b);
    int ia = lt_program_add_buffer(p, "a", LT_BUF_WEIGHT, &ta);
    int ib = lt_program_add_buffer(p, "b", LT_BUF_WEIGHT, &tb);
    int iy = add_act(p, "y", N);
    ASSERT_TRUE(ia >= 0 && ib >= 0 && iy >= 0);
    ASSERT_TRUE(lt_program_add_node(p, LT_K_ADD, (int[]){iy, ia, ib}, 3, NULL, NULL, "first") >= 0);
    for (int d = 1; d < depth; d++)
        ASSERT_TRUE(lt_program_add_node(p, LT_K_ADD, (int[]){iy, iy, ib}, 3, NULL, NULL, "next") >= 0);
    ASSERT_EQ(lt_program_finalize(p), LT_OK);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
    lt_step step = {.pos = 0, .n_tokens = 1};
    lt_exec_stats st;
    for (int rep = 0; rep < 3; rep++) {
        ASSERT_EQ(exec_step(LT_EXEC_DISPATCH, p, pool, &step, &st), LT_OK);
        const float *y = lt_program_buffer(p, iy)->data;
        int bad = 0;
        for (int i = 0; i < N; i++)
            if (y[i] != a[i] + (float)depth * b[i]) bad++;
        ASSERT_EQ(bad, 0);
        ASSERT_EQ(st.sync_points, (uint64_t)(depth - 1) * (uint64_t)nth);
    }
    lt_pool_free(pool);
    lt_program_free(p);
}

static void test_views_and_print(void) {
    lt_program *p;
    ASSERT_EQ(lt_program_init(&p, "views"), LT_OK);
    lt_tensor big, row;
    lt_tensor_init(&big, LT_F32, 8, 4, 1, 1, NULL);
    lt_tensor_init(&row, LT_F32, 8, 1, 1, 1, NULL);
    int ib = lt_program_add_buffer(p, "big", LT_BUF_ACT, &big);
    int iv = lt_program_add_view(p, "row3", ib, 3 * 8 * sizeof(float), &row);
    ASSERT_TRUE(iv >= 0);
    /* a view past the end of its parent is refused */
    ASSERT_EQ(lt_program_add_view(p, "bad", ib, 4 * 8 * sizeof(float), &row), LT_EINVAL);
    /* duplicate names are refused */
    ASSERT_EQ(lt_program_add_buffer(p, "big", LT_BUF_ACT, &big), LT_EINVAL);
    /* activations must not come with data */
    lt_tensor withdata = row;
    withdata.data = &withdata;
    ASSERT_EQ(lt_program_add_buffer(p, "x", LT_BUF_ACT, &withdata), LT_EINVAL);
    /* operands must be buffers */
    ASSERT_EQ(lt_program_add_node(p, LT_K_ADD, (int[]){iv, 99, iv}, 3, NULL, NULL, "bad"), LT_EINVAL);
    ASSERT_TRUE(lt_program_add_node(p, LT_K_ADD, (int[]){iv, iv, iv}, 3, NULL, NULL, "double") >= 0);
    ASSERT_EQ(lt_program_finalize(p), LT_OK);
    ASSERT_TRUE((char *)lt_program_buffer(p, iv)->data ==
                (char *)lt_program_buffer(p, ib)->data + 3 * 8 * sizeof(float));
    ASSERT_EQ(lt_program_add_buffer(p, "late", LT_BUF_ACT, &row), LT_ESTATE);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    lt_program_print(p, f);
    fclose(f);
    ASSERT_TRUE(strstr(text, "program views: 2 buffers, 1 nodes") != NULL);
    ASSERT_TRUE(strstr(text, "row3") != NULL && strstr(text, "double") != NULL);
    free(text);
    lt_program_free(p);
    lt_program_free(NULL);
}

/* A shape mismatch is caught at finalize with the node named. */
static void test_check_at_finalize(void) {
    lt_program *p;
    ASSERT_EQ(lt_program_init(&p, "bad"), LT_OK);
    int a = add_act(p, "a", 16), b = add_act(p, "b", 8);
    ASSERT_TRUE(lt_program_add_node(p, LT_K_ADD, (int[]){a, a, b}, 3, NULL, NULL, "mismatch") >= 0);
    ASSERT_NE(lt_program_finalize(p), LT_OK);
    ASSERT_TRUE(strstr(lt_errmsg(), "mismatch") != NULL);
    lt_program_free(p);
}

int main(void) {
    for (int nth = 1; nth <= 3; nth++) test_chain(nth, 50);
    test_views_and_print();
    test_check_at_finalize();
    exec_test_free();
    return lt_test_finish();
}
