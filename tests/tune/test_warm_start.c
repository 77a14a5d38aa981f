/* Warm start into a runtime's tuning context on the real stories260K model:
 * the store's entries for this host reach the decode program, every prefill
 * program whatever its batch size (a final partial batch, one rebuilt after
 * the program cache evicted it), the looped executor and a regime's thread
 * count; entries of another host or of shapes the model lacks are not
 * applied, one that does not fit is refused and changes nothing. The
 * values are asserted on the calls the kernels run with. */
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

    lt_store_close(s);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return lt_test_finish();
}
