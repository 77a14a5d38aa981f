/* The tuning context of a runtime (stories260K): a value set under a key
 * reaches the calls of that key at the next eval and not before; a fused
 * matvec takes its own key's value, else its key without the epilogue,
 * else the plain one; unsetting falls back along the same chain; a pin lies
 * over every value set; refused values change nothing; the looped
 * executor's and a regime's thread count's values reach the step. */
#include <stdlib.h>
#include <string.h>

#include "looptune/model.h"
#include "looptune/program.h"
#include "model_test.h"
#include "test.h"

/* rows_per_task of the decode program's node labelled label, as its call
 * runs it, and that call's key. */
static int32_t rpt_of(lt_llama *l, const char *label, char *key) {
    lt_program *p;
    ASSERT_EQ(lt_llama_program(l, 1, &p), LT_OK);
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        if (!ni.label || strcmp(ni.label, label)) continue;
        if (key) lt_call_key(ni.kernel, lt_program_call(p, i), key, LT_KEY_MAX);
        return lt_program_call(p, i)->params.v[0];
    }
    ASSERT_TRUE(!"no such node");
    return -1;
}

static lt_params with_rpt(lt_tuning *t, const char *key, int32_t rpt) {
    lt_params p;
    ASSERT_EQ(lt_tuning_get(t, "matvec", key, &p), LT_OK);
    p.v[0] = rpt;
    return p;
}

int main(void) {
    lt_model *m = lt_test_stories260k();
    if (!m) return lt_test_finish();
    lt_pool *pool;
    lt_llama *l = lt_test_llama(m, 2, 32, 4, &pool);
    if (!l) return lt_test_finish();
    lt_tuning *t = lt_llama_tuning(l);
    int32_t tok = 1;
    int64_t pos = 0;

    /* blk.0.q: a matvec with a norm prologue and a rope epilogue */
    char key[LT_KEY_MAX];
    const int32_t def = rpt_of(l, "blk.0.q", key);
    ASSERT_TRUE(strstr(key, ":ia=0,1,1") != NULL);
    char pro[LT_KEY_MAX], plain[LT_KEY_MAX];
    size_t base = (size_t)(strstr(key, ":ia=") - key);
    snprintf(pro, sizeof pro, "%.*s:ia=0,1,0", (int)base, key);
    snprintf(plain, sizeof plain, "%.*s", (int)base, key);
    ASSERT_TRUE(lt_tuning_uses(t, "matvec", key) && lt_tuning_uses(t, "matvec", pro) &&
                lt_tuning_uses(t, "matvec", plain));
    lt_param_def defs[LT_MAX_PARAMS];
    int nd;
    ASSERT_EQ(lt_tuning_space("matvec", 0, defs, &nd), LT_OK);
    ASSERT_EQ(strcmp(defs[0].name, "rows_per_task"), 0);
    int32_t v[3]; /* three values other than the default */
    for (int i = 0, j = 0; i < defs[0].n_values && j < 3; i++)
        if (defs[0].values[i] != def) v[j++] = defs[0].values[i];

    /* the plain key's value serves the fused node, at the next eval only */
    uint64_t g0 = lt_tuning_generation(t);
    lt_params pv = with_rpt(t, plain, v[0]);
    ASSERT_EQ(lt_tuning_set(t, "matvec", plain, &pv), LT_OK);
    ASSERT_TRUE(lt_tuning_generation(t) > g0);
    ASSERT_EQ(rpt_of(l, "blk.0.q", NULL), def);
    ASSERT_EQ(lt_llama_eval(l, &tok, 1, pos++), LT_OK);
    ASSERT_EQ(rpt_of(l, "blk.0.q", NULL), v[0]);
    ASSERT_EQ(rpt_of(l, "blk.4.q", NULL), v[0]); /* every layer's */
    /* the prologue's key is more specific, the node's own more still */
    pv = with_rpt(t, pro, v[1]);
    ASSERT_EQ(lt_tuning_set(t, "matvec", pro, &pv), LT_OK);
    ASSERT_EQ(lt_llama_eval(l, &tok, 1, pos++), LT_OK);
    ASSERT_EQ(rpt_of(l, "blk.0.q", NULL), v[1]);
    pv = with_rpt(t, key, v[2]);
    ASSERT_EQ(lt_tuning_set(t, "matvec", key, &pv), LT_OK);
    ASSERT_EQ(lt_llama_eval(l, &tok, 1, pos++), LT_OK);
    ASSERT_EQ(rpt_of(l, "blk.0.q", NULL), v[2]);
    lt_params got;
    ASSERT_EQ(lt_tuning_get(t, "matvec", key, &got), LT_OK);
    ASSERT_EQ(got.v[0], v[2]);
    /* unset walks back along the chain */
    ASSERT_EQ(lt_tuning_unset(t, "matvec", key), LT_OK);
    ASSERT_EQ(lt_llama_eval(l, &tok, 1, pos++), LT_OK);
    ASSERT_EQ(rpt_of(l, "blk.0.q", NULL), v[1]);

    /* refused: a value outside the space, an unknown parameter or kernel,
     * a key the model has not; nothing changes */
    uint64_t g1 = lt_tuning_generation(t);
    lt_params bad = with_rpt(t, key, -5);
    ASSERT_EQ(lt_tuning_set(t, "matvec", key, &bad), LT_ECONFIG);
    ASSERT_EQ(lt_tuning_set(t, "matvec", "f32:1x1:decode", &pv), LT_ENOTFOUND);
    ASSERT_EQ(lt_tuning_set(t, "nosuch", key, &pv), LT_ENOTFOUND);
    ASSERT_EQ(lt_tuning_pin(t, "matvec", NULL, "nosuch", 1), LT_ECONFIG);
    ASSERT_EQ(lt_tuning_pin(t, "matvec", NULL, "rows_per_task", -5), LT_ECONFIG);
    ASSERT_EQ(lt_tuning_generation(t), g1);

    /* a pin lies over every value set, on every key of the kernel */
    ASSERT_EQ(lt_tuning_pin(t, "matvec", NULL, "rows_per_task", v[2]), LT_OK);
    ASSERT_EQ(lt_llama_eval(l, &tok, 1, pos++), LT_OK);
    ASSERT_EQ(rpt_of(l, "blk.0.q", NULL), v[2]);
    ASSERT_EQ(rpt_of(l, "blk.0.ffn_down", NULL), v[2]);
    pv = with_rpt(t, key, v[0]);
    ASSERT_EQ(lt_tuning_set(t, "matvec", key, &pv), LT_OK);
    ASSERT_EQ(lt_llama_eval(l, &tok, 1, pos++), LT_OK);
    ASSERT_EQ(rpt_of(l, "blk.0.q", NULL), v[2]);

    /* the executor's and the thread counts' values reach the step */
    const char *step = lt_tuning_step_key(t, LT_REGIME_DECODE);
    lt_params xp;
    ASSERT_EQ(lt_tuning_get(t, LT_TUNING_LOOPED, step, &xp), LT_OK);
    xp.v[LT_XP_SYNC] = 1;
    ASSERT_EQ(lt_tuning_set(t, LT_TUNING_LOOPED, step, &xp), LT_OK);
    lt_params th = {{1}};
    ASSERT_EQ(lt_tuning_set(t, LT_TUNING_THREADS, step, &th), LT_OK);
    ASSERT_EQ(lt_llama_threads(l, LT_REGIME_DECODE), 1);
    ASSERT_EQ(lt_llama_threads(l, LT_REGIME_PREFILL), 2);
    ASSERT_EQ(lt_llama_eval(l, &tok, 1, pos++), LT_OK);
    lt_params in_force;
    lt_exec_params(lt_llama_exec(l), &in_force);
    ASSERT_EQ(in_force.v[LT_XP_SYNC], 1);
    th.v[0] = 2; /* the whole pool is 0, not its size */
    ASSERT_EQ(lt_tuning_set(t, LT_TUNING_THREADS, step, &th), LT_ECONFIG);

    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return lt_test_finish();
}
