/* Warm start into a runtime's tuning context on the real stories260K model:
 * the store's entries for this host reach the decode program, every prefill
 * program whatever its batch size (a final partial batch, one rebuilt after
 * the program cache evicted it), the looped executor and a regime's thread
 * count; entries of another host or of shapes the model lacks are not
 * applied, one that does not fit is refused and changes nothing; the batch
 * regime's keys and thread count reach the batch program and its steps (and
 * the tuner's batch pass lists them). The values are asserted on the calls
 * the kernels run with. */
#include <stdlib.h>
#include <string.h>

#include "looptune/model.h"
#include "looptune/tune.h"
#include "model_test.h"
#include "store_test.h"
#include "test.h"

/* A point of name's space that is not the defaults and that every call of
 * key takes (tried on the runtime, then taken back), as store text. */
static void other_point(lt_llama *l, const char *name, const char *key, lt_params *out,
                        char *text, size_t n) {
    lt_tuning *t = lt_llama_tuning(l);
    lt_space sp;
    ASSERT_EQ(lt_space_by_name(name, &sp), LT_OK);
    lt_params def;
    ASSERT_EQ(lt_tuning_get(t, name, key, &def), LT_OK);
    bool found = false;
    for (int64_t i = lt_space_size(&sp) - 1; i >= 0 && !found; i--) {
        lt_space_point(&sp, i, out);
        if (memcmp(out, &def, sizeof def) && lt_tuning_set(t, name, key, out) == LT_OK) found = true;
    }
    ASSERT_TRUE(found);
    ASSERT_EQ(lt_tuning_unset(t, name, key), LT_OK);
    lt_space_format(&sp, out, text, n);
}

/* Every node of kernel id in l's program for n tokens runs with want (the
 * resolved call the kernel is given). Returns how many nodes it checked. */
static int check_program(lt_llama *l, int64_t n, lt_kernel_id id, const char *key,
                         const lt_params *want) {
    lt_program *p;
    ASSERT_EQ(lt_llama_program(l, n, &p), LT_OK);
    int seen = 0;
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        char k[LT_KEY_MAX];
        lt_call_key(ni.kernel, lt_program_call(p, i), k, sizeof k);
        if (ni.kernel != id || strcmp(k, key)) continue;
        ASSERT_TRUE(!memcmp(&lt_program_call(p, i)->params, want, sizeof *want));
        seen++;
    }
    return seen;
}

int main(void) {
    lt_model *m = lt_test_stories260k();
    if (!m) return lt_test_finish();
    lt_pool *pool;
    lt_llama *l = lt_test_llama(m, 2, 64, 8, &pool);
    if (!l) return lt_test_finish();
    lt_tuning *t = lt_llama_tuning(l);

    /* the keys: one matvec and one matmul shape, the executor, prefill's threads */
    const char *mv_key = NULL, *mm_key = NULL;
    for (int i = 0; i < lt_tuning_n_keys(t); i++) {
        const char *name, *key;
        lt_tuning_key(t, i, &name, &key);
        if (!mv_key && !strcmp(name, "matvec")) mv_key = key;
        if (!mm_key && !strcmp(name, "matmul")) mm_key = key;
    }
    ASSERT_TRUE(mv_key && mm_key);
    if (!mv_key || !mm_key) return lt_test_finish();
    ASSERT_TRUE(strstr(mm_key, ":prefill") != NULL); /* known before any prefill ran */
    const char *step = lt_tuning_step_key(t, LT_REGIME_DECODE);
    const char *pre_step = lt_tuning_step_key(t, LT_REGIME_PREFILL);

    lt_params mv, mm, xp;
    char mv_text[160], mm_text[160], xp_text[160];
    other_point(l, "matvec", mv_key, &mv, mv_text, sizeof mv_text);
    other_point(l, "matmul", mm_key, &mm, mm_text, sizeof mm_text);
    other_point(l, LT_TUNING_LOOPED, step, &xp, xp_text, sizeof xp_text);

    lt_store_backend be = {.name = "memory"}; /* no load, no save */
    lt_store *s;
    ASSERT_EQ(lt_store_open(&s, &be, NULL), LT_OK);
    lt_config_entry es[] = {
        lt_test_entry("matvec", mv_key, "hostA", mv_text),
        lt_test_entry("matmul", mm_key, "hostA", mm_text),
        lt_test_entry(LT_TUNING_LOOPED, step, "hostA", xp_text),
        lt_test_entry(LT_TUNING_THREADS, pre_step, "hostA", "threads=1"),
        lt_test_entry("matvec", mv_key, "hostB", mv_text),               /* another host */
        lt_test_entry("matvec", "f32:9999x7:decode", "hostA", mv_text),  /* a shape the model lacks */
        lt_test_entry(LT_TUNING_THREADS, "llama:d1:h1:l1:f32:t2:decode", "hostA", "threads=1"),
    };
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) ASSERT_EQ(lt_store_put(s, &es[i]), LT_OK);
    int refused = -1;
    ASSERT_EQ(lt_store_warm_start(s, t, "hostA", &refused), 4);
    ASSERT_EQ(refused, 0);

    /* values reach programs at their next eval (decode: built before) */
    int32_t toks[8] = {1, 403, 407, 261, 300, 301, 302, 303};
    ASSERT_EQ(lt_llama_eval(l, toks, 1, 0), LT_OK);
    ASSERT_TRUE(check_program(l, 1, LT_K_MATVEC, mv_key, &mv) > 0);
    /* every prefill batch size, built after the warm start: 8, a final
     * partial batch of 3, then enough others to evict 8, and 8 again */
    const int64_t batches[] = {8, 3, 2, 4, 5, 6, 8};
    int64_t pos = 1;
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        ASSERT_EQ(lt_llama_eval(l, toks, batches[i], pos), LT_OK);
        pos += batches[i];
        ASSERT_TRUE(check_program(l, batches[i], LT_K_MATMUL, mm_key, &mm) > 0);
        ASSERT_EQ(lt_llama_threads(l, LT_REGIME_PREFILL), 1);
        ASSERT_EQ(lt_llama_threads(l, LT_REGIME_DECODE), 2);
    }
    lt_params got; /* the executor that ran them */
    lt_exec_params(lt_llama_exec(l), &got);
    ASSERT_TRUE(!memcmp(got.v, xp.v, LT_XP_COUNT * sizeof xp.v[0]));

    /* a value outside the space is refused and nothing changes; so is a
     * stored one that no longer parses (here: a parameter missing) */
    lt_params bad = mv;
    bad.v[0] = -7; /* no parameter of matvec allows it */
    ASSERT_EQ(lt_tuning_set(t, "matvec", mv_key, &bad), LT_ECONFIG);
    lt_params now;
    ASSERT_EQ(lt_tuning_get(t, "matvec", mv_key, &now), LT_OK);
    ASSERT_TRUE(!memcmp(&now, &mv, sizeof mv));
    ASSERT_EQ(lt_tuning_set(t, "matvec", "f32:9999x7:decode", &mv), LT_ENOTFOUND);
    ASSERT_EQ(lt_tuning_set(t, "conv3d", mv_key, &mv), LT_ENOTFOUND);

    /* another runtime of the same model and the same store: the same values,
     * its programs built in another order (prefill first) */
    lt_llama *l2;
    lt_llama_opts o = {.executor = 1, .ctx_len = 64, .max_batch = 8};
    ASSERT_EQ(lt_llama_init(&l2, m, pool, &o), LT_OK);
    ASSERT_EQ(lt_store_warm_start(s, lt_llama_tuning(l2), "hostA", NULL), 4);
    ASSERT_EQ(lt_llama_eval(l2, toks, 5, 0), LT_OK);
    ASSERT_TRUE(check_program(l2, 5, LT_K_MATMUL, mm_key, &mm) > 0);
    lt_llama_free(l2);

    /* the batch regime: a runtime with 2 slots takes the batch keys' values
     * before its first batched step (tok_chunk_kb among them, a batch-only
     * parameter), on the batch program alone, and the batch thread count;
     * a decode entry written before tok_chunk_kb existed still applies */
    lt_llama *l3;
    lt_llama_opts o3 = {.executor = 1, .ctx_len = 64, .max_batch = 8, .n_slots = 2};
    ASSERT_EQ(lt_llama_init(&l3, m, pool, &o3), LT_OK);
    lt_tuning *t3 = lt_llama_tuning(l3);
    const char *bmv_key = "f32:64x172:batch";
    ASSERT_TRUE(lt_tuning_uses(t3, "matvec", bmv_key));
    lt_params bmv;
    char bmv_text[160];
    other_point(l3, "matvec", bmv_key, &bmv, bmv_text, sizeof bmv_text);
    const int tc = lt_kernel_param_index(lt_kernel_get(LT_K_MATVEC), "tok_chunk_kb");
    ASSERT_TRUE(tc >= 0 && bmv.v[tc] != 256);
    lt_store *s3;
    ASSERT_EQ(lt_store_open(&s3, &be, NULL), LT_OK);
    lt_config_entry bs[] = {
        lt_test_entry("matvec", bmv_key, "hostA", bmv_text),
        lt_test_entry(LT_TUNING_THREADS, lt_tuning_step_key(t3, LT_REGIME_BATCH), "hostA",
                      "threads=1"),
        lt_test_entry("matvec", "f32:64x172:decode", "hostA",
                      "rows_per_task=8,unroll=1,k_block=0,prefetch=2048,act_int16=1,act_int8=1"),
    };
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
        ASSERT_EQ(lt_store_put(s3, &bs[i]), LT_OK);
    ASSERT_EQ(lt_store_warm_start(s3, t3, "hostA", &refused), 3);
    ASSERT_EQ(refused, 0);
    ASSERT_EQ(lt_llama_threads(l3, LT_REGIME_BATCH), 1);
    ASSERT_EQ(lt_llama_threads(l3, LT_REGIME_DECODE), 2);
    ASSERT_EQ(lt_llama_threads(l3, LT_REGIME_PREFILL), 2);
    lt_params old;
    ASSERT_EQ(lt_tuning_get(t3, "matvec", "f32:64x172:decode", &old), LT_OK);
    ASSERT_EQ(old.v[0], 8);
    ASSERT_EQ(old.v[tc], 256);
    int32_t bt[2] = {1, 2}, bsl[2] = {0, 1};
    int64_t bp[2] = {0, 0};
    ASSERT_EQ(lt_llama_eval_batch(l3, bt, bp, bsl, 2), LT_OK);
    lt_program *bprog;
    ASSERT_EQ(lt_llama_program_batch(l3, 2, &bprog), LT_OK);
    int nb = 0;
    for (int i = 0; i < lt_program_n_nodes(bprog); i++) {
        lt_node_info ni;
        lt_program_node(bprog, i, &ni);
        char k[LT_KEY_MAX];
        lt_call_key(ni.kernel, lt_program_call(bprog, i), k, sizeof k);
        if (ni.kernel != LT_K_MATVEC || strcmp(k, bmv_key)) continue;
        ASSERT_TRUE(!memcmp(&lt_program_call(bprog, i)->params, &bmv, sizeof bmv));
        nb++;
    }
    ASSERT_EQ(nb, 10); /* ffn_gate and ffn_up of 5 layers */

    /* the batch pass of the tuner: batch keys alone, on a runtime with the slots */
    lt_tune_pass *tp;
    ASSERT_EQ(lt_tune_pass_open_batch(&tp, l, pool, 2), LT_EINVAL); /* 1 slot */
    ASSERT_EQ(lt_tune_pass_open_batch(&tp, l3, pool, 3), LT_EINVAL); /* 2 slots */
    ASSERT_EQ(lt_tune_pass_open_batch(&tp, l3, pool, 2), LT_OK);
    ASSERT_EQ(lt_tune_pass_regime(tp), LT_REGIME_BATCH);
    ASSERT_EQ(lt_tune_pass_n_keys(tp), 11);
    for (int i = 0; i < lt_tune_pass_n_keys(tp); i++)
        ASSERT_TRUE(strstr(lt_tune_pass_key(tp, i)->shape, ":batch") != NULL);
    lt_tune_pass_close(tp);
    lt_store_close(s3);
    lt_llama_free(l3);

    lt_store_close(s);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return lt_test_finish();
}
