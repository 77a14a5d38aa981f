/* The batch regime's keys (stories260K, 2 slots): every call of a batched
 * decode step's program is keyed ":batch", the runtime's thread count of
 * batched steps is "threads" under the step key ending ":batch", values set
 * under batch keys reach the batch program and nothing else, and the decode
 * and prefill programs keep the keys they had before the regime existed
 * (config stores written then stay valid). */
#include <stdlib.h>
#include <string.h>

#include "looptune/model.h"
#include "looptune/program.h"
#include "model_test.h"
#include "test.h"

/* The distinct "kernel key" lines of p's nodes with parameters, in node
 * order, joined by '\n' into buf. */
static void keys_of(const lt_program *p, char *buf, size_t n) {
    buf[0] = 0;
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        const lt_kernel *k = lt_kernel_get(ni.kernel);
        if (!k->n_params) continue;
        char key[LT_KEY_MAX], line[LT_KEY_MAX + 40];
        lt_call_key(ni.kernel, lt_program_call(p, i), key, sizeof key);
        snprintf(line, sizeof line, "%s %s\n", k->name, key);
        if (!strstr(buf, line)) strncat(buf, line, n - strlen(buf) - 1);
    }
}

/* What the decode and prefill programs of stories260K were keyed by before
 * the batch regime (the prefill program's last norm and classifier run on
 * the last token's row: decode keys). */
static const char decode_keys[] = "embed f32:64x512:decode\n"
                                  "matvec f32:64x64:decode:ia=0,1,1\n"
                                  "matvec f32:64x32:decode:ia=0,1,3\n"
                                  "matvec f32:64x32:decode:ia=0,1,2\n"
                                  "attention f32:64x1:decode:ia=8,4,8\n"
                                  "matvec f32:64x64:decode:ia=1,0,0\n"
                                  "matvec f32:64x172:decode:ia=0,1,0\n"
                                  "matvec f32:172x64:decode:ia=1,2,0\n"
                                  "matvec f32:64x512:decode:ia=0,1,0\n";
static const char prefill_keys[] = "embed f32:64x512:prefill\n"
                                   "rmsnorm f32:64x1:prefill\n"
                                   "matmul f32:64x64:prefill\n"
                                   "matmul f32:64x32:prefill\n"
                                   "kv_store f32:32x1:prefill\n"
                                   "attention f32:64x1:prefill:ia=8,4,8\n"
                                   "matmul f32:64x64:prefill:ia=1,0,0\n"
                                   "matmul f32:64x172:prefill\n"
                                   "swiglu f32:172x1:prefill\n"
                                   "matmul f32:172x64:prefill:ia=1,0,0\n"
                                   "rmsnorm f32:64x1:decode\n"
                                   "matvec f32:64x512:decode\n";
static const char batch_keys[] = "embed f32:64x512:batch\n"
                                 "rmsnorm f32:64x1:batch\n"
                                 "matvec f32:64x64:batch\n"
                                 "matvec f32:64x32:batch\n"
                                 "kv_store f32:32x1:batch\n"
                                 "attention f32:64x1:batch:ia=8,4,8\n"
                                 "matvec f32:64x64:batch:ia=1,0,0\n"
                                 "matvec f32:64x172:batch\n"
                                 "swiglu f32:172x1:batch\n"
                                 "matvec f32:172x64:batch:ia=1,0,0\n"
                                 "matvec f32:64x512:batch\n";

/* rows_per_task of the first node of p labelled label. */
static int32_t rpt_of(const lt_program *p, const char *label) {
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        if (ni.label && !strcmp(ni.label, label)) return lt_program_call(p, i)->params.v[0];
    }
    ASSERT_TRUE(!"no such node");
    return -1;
}

int main(void) {
    /* the one decision of the regime */
    ASSERT_EQ(lt_regime_of(1, false), LT_REGIME_DECODE);
    ASSERT_EQ(lt_regime_of(1, true), LT_REGIME_DECODE);
    ASSERT_EQ(lt_regime_of(5, false), LT_REGIME_PREFILL);
    ASSERT_EQ(lt_regime_of(5, true), LT_REGIME_BATCH);
    lt_regime r;
    ASSERT_EQ(lt_regime_parse("batch", &r), LT_OK);
    ASSERT_EQ(r, LT_REGIME_BATCH);
    ASSERT_EQ(strcmp(lt_regime_name(LT_REGIME_BATCH), "batch"), 0);
    ASSERT_EQ(lt_regime_parse("both", &r), LT_ENOTFOUND);

    lt_model *m = lt_test_stories260k();
    if (!m) return lt_test_finish();
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    lt_llama_opts o = {.executor = 1, .ctx_len = 32, .n_slots = 2};
    lt_llama *l;
    ASSERT_EQ(lt_llama_init(&l, m, pool, &o), LT_OK);
    lt_tuning *t = lt_llama_tuning(l);

    /* decode and prefill keys as they were; every call of a batch step batch */
    static char got[4096];
    lt_program *dec, *pre, *bat;
    ASSERT_EQ(lt_llama_program(l, 1, &dec), LT_OK);
    keys_of(dec, got, sizeof got);
    ASSERT_STREQ(got, decode_keys);
    ASSERT_EQ(lt_llama_program(l, 3, &pre), LT_OK);
    keys_of(pre, got, sizeof got);
    ASSERT_STREQ(got, prefill_keys);
    ASSERT_EQ(lt_llama_program_batch(l, 2, &bat), LT_OK);
    ASSERT_STREQ(lt_program_name(bat), "llama-batch");
    keys_of(bat, got, sizeof got);
    ASSERT_STREQ(got, batch_keys);
    for (int i = 0; i < lt_program_n_nodes(bat); i++) {
        lt_node_info ni;
        lt_program_node(bat, i, &ni);
        ASSERT_EQ(ni.flags, LT_CALL_BATCH);
        ASSERT_EQ(lt_program_call(bat, i)->flags, LT_CALL_BATCH);
    }
    ASSERT_EQ(lt_llama_program_batch(l, 1, &bat), LT_EINVAL);

    /* the step keys: decode and prefill as they were, batch the third */
    ASSERT_STREQ(lt_tuning_step_key(t, LT_REGIME_DECODE), "llama:d64:h172:l5:f32:t2:decode");
    ASSERT_STREQ(lt_tuning_step_key(t, LT_REGIME_PREFILL), "llama:d64:h172:l5:f32:t2:prefill");
    const char *bstep = lt_tuning_step_key(t, LT_REGIME_BATCH);
    ASSERT_STREQ(bstep, "llama:d64:h172:l5:f32:t2:batch");
    /* the context knows the batch keys before any batch step was built
     * (a warm start applies them): every key listed once */
    lt_llama *l2;
    ASSERT_EQ(lt_llama_init(&l2, m, pool, &o), LT_OK);
    lt_tuning *t2 = lt_llama_tuning(l2);
    ASSERT_TRUE(lt_tuning_uses(t2, LT_TUNING_THREADS, bstep));
    ASSERT_TRUE(lt_tuning_uses(t2, "matvec", "f32:64x172:batch"));
    ASSERT_TRUE(lt_tuning_uses(t2, "attention", "f32:64x1:batch:ia=8,4,8"));
    int n_batch = 0;
    for (int i = 0; i < lt_tuning_n_keys(t2); i++) {
        const char *name, *key;
        lt_tuning_key(t2, i, &name, &key);
        n_batch += strstr(key, ":batch") != NULL;
    }
    ASSERT_EQ(n_batch, 12); /* 11 kernel keys and the thread count */
    lt_llama_free(l2);

    /* threads of batched steps: their own value, not decode's or prefill's */
    lt_params one = {{1}};
    ASSERT_EQ(lt_tuning_set(t, LT_TUNING_THREADS, bstep, &one), LT_OK);
    ASSERT_EQ(lt_llama_threads(l, LT_REGIME_BATCH), 1);
    ASSERT_EQ(lt_llama_threads(l, LT_REGIME_DECODE), 2);
    ASSERT_EQ(lt_llama_threads(l, LT_REGIME_PREFILL), 2);
    lt_params th;
    ASSERT_EQ(lt_tuning_get(t, LT_TUNING_THREADS, bstep, &th), LT_OK);
    ASSERT_EQ(th.v[0], 1);
    ASSERT_EQ(lt_tuning_pin(t, LT_TUNING_THREADS, bstep, "threads", 0), LT_OK);
    ASSERT_EQ(lt_llama_threads(l, LT_REGIME_BATCH), 2);

    /* a batch key's value reaches the batch program at its next step, not
     * the decode or prefill nodes of the same weights */
    lt_params mv;
    ASSERT_EQ(lt_tuning_get(t, "matvec", "f32:64x172:batch", &mv), LT_OK);
    const int32_t def = mv.v[0];
    mv.v[0] = def == 8 ? 16 : 8;
    ASSERT_EQ(lt_tuning_set(t, "matvec", "f32:64x172:batch", &mv), LT_OK);
    int32_t tok[2] = {1, 2}, slot[2] = {0, 1};
    int64_t pos[2] = {0, 0};
    ASSERT_EQ(lt_llama_eval_batch(l, tok, pos, slot, 2), LT_OK);
    ASSERT_EQ(lt_llama_program_batch(l, 2, &bat), LT_OK);
    ASSERT_EQ(rpt_of(bat, "blk.0.ffn_gate"), mv.v[0]);
    ASSERT_EQ(lt_llama_eval(l, tok, 1, 1), LT_OK);
    ASSERT_EQ(lt_llama_program(l, 1, &dec), LT_OK);
    ASSERT_EQ(rpt_of(dec, "blk.0.ffn_gate"), def);

    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return lt_test_finish();
}
