/* What online tuning while serving may change: every point of every
 * parameter of every batch key gives the batched decode steps the logits of
 * the defaults, bit for bit, except the parameters
 * lt_optimizer_param_changes_bits names (which a batch run holds at its
 * values, so a served stream never changes under a trial). A random-weight
 * model (q8_0, then f32), three sequences of 48-token prompts prefilled by
 * steps of their own then decoded together, on 2 threads; each parameter of each batch key is
 * set to each value of its space in turn (the others at their defaults). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "looptune/model.h"
#include "looptune/optimizer.h"
#include "test.h"

/* prompts long enough that attention's blocks of the cache split them */
enum { SEQS = 3, PROMPT = 48, STEPS = 3, CTX = 64 };

static int32_t prompt_tok(int s, int i) { return i ? (int32_t)(7 + 31 * s + 13 * i) % 500 + 2 : 1; }

static int32_t fed(int s, int i) { return (int32_t)(3 + 17 * s + 5 * i); }

/* The sequences prefilled, then STEPS batched steps: their logits into out
 * [STEPS][SEQS][V]. */
static void decode(lt_llama *l, int64_t V, float *out) {
    for (int s = 0; s < SEQS; s++) {
        int32_t prompt[PROMPT];
        for (int i = 0; i < PROMPT; i++) prompt[i] = prompt_tok(s, i);
        ASSERT_EQ(lt_llama_eval_slot(l, s, prompt, PROMPT, 0), LT_OK);
    }
    for (int i = 0; i < STEPS; i++) {
        int32_t tok[SEQS], slot[SEQS];
        int64_t pos[SEQS];
        for (int s = 0; s < SEQS; s++) tok[s] = fed(s, i), slot[s] = s, pos[s] = PROMPT + i;
        ASSERT_EQ(lt_llama_eval_batch(l, tok, pos, slot, SEQS), LT_OK);
        memcpy(out + (size_t)i * SEQS * (size_t)V, lt_llama_logits(l, NULL),
               sizeof(float) * SEQS * (size_t)V);
    }
}

static bool batch_key(const char *key) {
    const char *p = strstr(key, ":batch");
    return p && (p[6] == 0 || p[6] == ':');
}

static void check_model(const char *path, const char *dtype) {
    lt_model *m = NULL;
    ASSERT_EQ(lt_model_open(&m, path, NULL), LT_OK);
    if (!m) return;
    ASSERT_EQ(lt_model_make_resident(m), LT_OK);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    lt_llama *l;
    lt_llama_opts o = {.ctx_len = CTX, .executor = 1, .n_slots = SEQS};
    ASSERT_EQ(lt_llama_init(&l, m, pool, &o), LT_OK);
    const int64_t V = m->cfg.vocab_size;
    const size_t n = (size_t)STEPS * SEQS * (size_t)V;
    float *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    decode(l, V, ref);
    lt_tuning *t = lt_llama_tuning(l);
    int points = 0, same = 0, held_diff = 0;
    for (int k = 0; k < lt_tuning_n_keys(t); k++) {
        const char *name, *key;
        lt_tuning_key(t, k, &name, &key);
        if (!batch_key(key)) continue;
        lt_param_def defs[LT_MAX_PARAMS];
        int nd;
        lt_params def;
        if (lt_tuning_space(name, lt_pool_size(pool), defs, &nd) ||
            lt_tuning_get(t, name, key, &def))
            continue;
        for (int j = 0; j < nd; j++)
            for (int v = 0; v < defs[j].n_values; v++) {
                lt_params p = def;
                p.v[j] = defs[j].values[v];
                if (p.v[j] == def.v[j] || lt_tuning_set(t, name, key, &p)) continue; /* no fit */
                decode(l, V, got);
                ASSERT_EQ(lt_tuning_unset(t, name, key), LT_OK);
                const bool differ = memcmp(got, ref, n * sizeof *got) != 0;
                const bool held = lt_optimizer_param_changes_bits(name, defs[j].name);
                points++;
                same += !differ;
                held_diff += held && differ;
                if (differ && !held)
                    fprintf(stderr, "  %s %s %s=%d: other logits than the defaults'\n", dtype,
                            key, defs[j].name, p.v[j]);
                ASSERT_TRUE(!differ || held);
            }
    }
    fprintf(stderr, "%s: %d points of batch keys, %d give the defaults' bits, %d of the "
            "held parameters do not\n", dtype, points, same, held_diff);
    ASSERT_TRUE(points > 20);
    free(ref);
    free(got);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
}

int main(void) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/lt_tune_bits_%d.gguf", (int)getpid());
    static const lt_dtype dtypes[2] = {LT_Q8_0, LT_F32};
    for (int di = 0; di < 2; di++) {
        lt_modelgen_opts go = {.dtype = dtypes[di], .seed = 7};
        go.cfg = (lt_llama_config){.dim = 256, .hidden_dim = 768, .n_layers = 2, .n_heads = 4,
                                   .n_kv_heads = 2, .vocab_size = 512, .seq_len = 64,
                                   .rms_eps = 1e-5f, .rope_base = 10000.0f};
        ASSERT_EQ(lt_modelgen_write(&go, path), LT_OK);
        check_model(path, lt_dtype_name(dtypes[di]));
    }
    unlink(path);
    return lt_test_finish();
}
