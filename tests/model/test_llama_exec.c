/* The decoder under both executors: the kernel-looping pass turns the
 * layers into one LOOP node, and the looped executor reproduces the
 * dispatch executor's logits bit for bit, at every position, for decode and
 * batched prefill, on the real stories260K model (grouped-query attention).
 * The prologue-fusion pass folds the decode program's norms and gate into
 * the matvecs after them, and changes no bit either. The looped schedule
 * built through the LOOP records is the one derived node by node. */
#include <stdlib.h>
#include <string.h>

#include "looptune/model.h"
#include "looptune/program.h"
#include "sched_test.h"
#include "model_test.h"
#include "test.h"

enum { STEPS = 24 };

static bool no_fuse; /* run without the prologue-fusion pass */

/* A regime's thread count, a value of the tuning context. */
static int set_threads(lt_llama *l, lt_regime r, int nth) {
    lt_tuning *t = lt_llama_tuning(l);
    lt_params p = {{nth}};
    return lt_tuning_set(t, LT_TUNING_THREADS, lt_tuning_step_key(t, r), &p);
}

/* Decode and prefill on their own thread counts (0 = the whole pool). */
static void run_on(lt_model *m, lt_pool *pool, lt_executor e, int decode_th, int prefill_th,
                   float *logits /* [STEPS+3][vocab] */) {
    lt_llama *l;
    lt_llama_opts o = {.executor = (int)e, .ctx_len = 64, .all_logits = true,
                       .no_fuse_pass = no_fuse};
    ASSERT_EQ(lt_llama_init(&l, m, pool, &o), LT_OK);
    /* the whole pool is 0 in the space */
    const int all = lt_llama_pool_size(l);
    ASSERT_EQ(set_threads(l, LT_REGIME_DECODE, decode_th == all ? 0 : decode_th), LT_OK);
    ASSERT_EQ(set_threads(l, LT_REGIME_PREFILL, prefill_th == all ? 0 : prefill_th), LT_OK);
    const int64_t V = m->cfg.vocab_size;
    /* a 4-token prompt in one batch, then greedy decode */
    int32_t prompt[4] = {1, 403, 407, 261};
    ASSERT_EQ(lt_llama_eval(l, prompt, 4, 0), LT_OK);
    int64_t rows;
    const float *lg = lt_llama_logits(l, &rows);
    ASSERT_EQ(rows, 4);
    memcpy(logits, lg, (size_t)(4 * V) * sizeof(float));
    int32_t tok = 0;
    for (int i = 0; i < STEPS - 1; i++) {
        const float *last = logits + (size_t)(3 + i) * (size_t)V;
        tok = 0;
        for (int64_t j = 1; j < V; j++)
            if (last[j] > last[tok]) tok = (int32_t)j;
        ASSERT_EQ(lt_llama_eval(l, &tok, 1, 4 + i), LT_OK);
        memcpy(logits + (size_t)(4 + i) * (size_t)V, lt_llama_logits(l, NULL), (size_t)V * sizeof(float));
    }
    lt_llama_free(l);
}

static void run(lt_model *m, lt_pool *pool, lt_executor e, float *logits) {
    run_on(m, pool, e, 0, 0, logits);
}

int main(void) {
    lt_model *m = lt_test_stories260k();
    if (!m) return lt_test_finish();
    const size_t n = (size_t)(STEPS + 3) * (size_t)m->cfg.vocab_size;
    float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float));

    /* the pass finds one loop over the layers */
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    lt_llama *l;
    ASSERT_EQ(lt_llama_init(&l, m, pool, NULL), LT_OK);
    lt_program *p;
    ASSERT_EQ(lt_llama_program(l, 1, &p), LT_OK);
    ASSERT_EQ(lt_program_n_loops(p), 1);
    lt_loop_info L;
    lt_program_loop(p, 0, &L);
    ASSERT_EQ(L.n_iter, m->cfg.n_layers);
    ASSERT_EQ(L.first, 1); /* after the embedding */
    ASSERT_EQ(L.first + L.n_iter * L.body_len + 1, lt_program_n_nodes(p)); /* the classifier */
    /* no norm or gate node is left in the decode program: they are the
     * matvecs' prologues (2 norms and the gate per layer, the output norm) */
    int pre = 0, standalone = 0;
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        standalone += ni.kernel == LT_K_RMSNORM || ni.kernel == LT_K_SWIGLU;
        pre += ni.kernel == LT_K_MATVEC && lt_program_call(p, i)->ia[1] != LT_MV_PRE_NONE;
    }
    ASSERT_EQ(standalone, 0);
    ASSERT_EQ(pre, (int)m->cfg.n_layers * 6 + 1);
    /* the looped schedules of decode and of a prefill batch, built through
     * the LOOP records (layers past the second replicated), are the ones
     * derived node by node, at 1..4 threads */
    for (int64_t batch = 1; batch <= 4; batch += 3) {
        lt_program *q;
        ASSERT_EQ(lt_llama_program(l, batch, &q), LT_OK);
        ASSERT_EQ(lt_program_n_loops(q), 1);
        lt_loop_info Lq;
        lt_program_loop(q, 0, &Lq);
        for (int nth = 1; nth <= 4; nth++) {
            int copied = 0;
            ASSERT_EQ(sched_differences(q, nth, NULL, &copied), 0);
            ASSERT_EQ(copied, (Lq.n_iter - 2) * Lq.body_len);
        }
    }
    lt_llama_free(l);

    /* fused and unfused: the same logits, both executors, 1..3 threads */
    for (int nth = 1; nth <= 3; nth++) {
        lt_pool *pl;
        ASSERT_EQ(lt_pool_init(&pl, nth), LT_OK);
        for (int e = 0; e < 2; e++) {
            no_fuse = true;
            run(m, pl, (lt_executor)e, a);
            no_fuse = false;
            run(m, pl, (lt_executor)e, b);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += memcmp(&a[i], &b[i], sizeof(float)) != 0;
            ASSERT_EQ(bad, 0);
        }
        lt_pool_free(pl);
    }

    for (int nth = 1; nth <= 3; nth++) {
        lt_pool *pl;
        ASSERT_EQ(lt_pool_init(&pl, nth), LT_OK);
        run(m, pl, LT_EXEC_DISPATCH, a);
        run(m, pl, LT_EXEC_LOOPED, b);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += memcmp(&a[i], &b[i], sizeof(float)) != 0;
        ASSERT_EQ(bad, 0);
        lt_pool_free(pl);
    }
    lt_pool_free(pool);

    /* part of the pool: every split of decode and prefill over 1..3 threads
     * of a 3-thread pool gives the 1-thread pool's logits, bit for bit */
    lt_pool *one, *three;
    ASSERT_EQ(lt_pool_init(&one, 1), LT_OK);
    ASSERT_EQ(lt_pool_init(&three, 3), LT_OK);
    run(m, one, LT_EXEC_DISPATCH, a);
    for (int e = 0; e < 2; e++)
        for (int dt = 1; dt <= 3; dt++)
            for (int pt = 1; pt <= 3; pt += 2) {
                memset(b, 0, n * sizeof(float));
                run_on(m, three, (lt_executor)e, dt, pt, b);
                size_t bad = 0;
                for (size_t i = 0; i < n; i++) bad += memcmp(&a[i], &b[i], sizeof(float)) != 0;
                ASSERT_EQ(bad, 0);
            }
    /* out of range: refused, nothing changes */
    lt_llama *l3;
    ASSERT_EQ(lt_llama_init(&l3, m, three, NULL), LT_OK);
    ASSERT_EQ(set_threads(l3, LT_REGIME_DECODE, 2), LT_OK);
    /* the space: 0 (the whole pool) or fewer threads than the pool has */
    ASSERT_EQ(set_threads(l3, LT_REGIME_DECODE, 3), LT_ECONFIG);
    ASSERT_EQ(set_threads(l3, LT_REGIME_DECODE, 4), LT_ECONFIG);
    ASSERT_EQ(set_threads(l3, LT_REGIME_PREFILL, -1), LT_ECONFIG);
    ASSERT_EQ(lt_llama_threads(l3, LT_REGIME_DECODE), 2);
    ASSERT_EQ(lt_llama_threads(l3, LT_REGIME_PREFILL), 3);
    lt_llama_free(l3);
    lt_pool_free(one);
    lt_pool_free(three);
    free(a);
    free(b);
    lt_model_close(m);
    return lt_test_finish();
}
