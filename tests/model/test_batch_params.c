/* Every point of the batch regime's own parameter space gives batched
 * decode the logits of solo decode, bit for bit, on every ISA this CPU
 * runs: a random-weight model wide enough that W spans many chunks (q8_0 in
 * the resident layout of the ISA, f32, and the integer-dot types q4_0, q4_k,
 * q5_k, q6_k with their multi-token path), three sequences prefilled by
 * steps of their own, then decoded together, with matvec's tok_chunk_kb
 * pinned at each of its values (and on 1 and 2 threads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "looptune/model.h"
#include "looptune/program.h"
#include "test.h"

enum { SEQS = 3, PROMPT = 2, STEPS = 3, CTX = 16 };

static lt_model *open_model(const char *path, lt_isa isa) {
    lt_isa_force(isa);
    lt_model *m = NULL;
    ASSERT_EQ(lt_model_open(&m, path, NULL), LT_OK);
    if (m) ASSERT_EQ(lt_model_make_resident(m), LT_OK);
    return m;
}

static const int32_t prompts[SEQS][PROMPT] = {{1, 40}, {1, 77}, {1, 200}};

/* The tokens each sequence is fed after its prompt (not sampled: fixed) */
static int32_t fed(int s, int i) { return (int32_t)(3 + 17 * s + 5 * i); }

/* solo[s][i]: sequence s's logits after its i-th decode step alone */
static void solo(lt_model *m, lt_pool *pool, float *out) {
    const int64_t V = m->cfg.vocab_size;
    for (int s = 0; s < SEQS; s++) {
        lt_llama *l;
        lt_llama_opts o = {.ctx_len = CTX, .executor = 1};
        ASSERT_EQ(lt_llama_init(&l, m, pool, &o), LT_OK);
        ASSERT_EQ(lt_llama_eval(l, prompts[s], PROMPT, 0), LT_OK);
        for (int i = 0; i < STEPS; i++) {
            const int32_t t = fed(s, i);
            ASSERT_EQ(lt_llama_eval(l, &t, 1, PROMPT + i), LT_OK);
            memcpy(out + ((size_t)s * STEPS + (size_t)i) * (size_t)V, lt_llama_logits(l, NULL),
                   sizeof(float) * (size_t)V);
        }
        lt_llama_free(l);
    }
}

/* The same sequences decoded together with tok_chunk_kb = kb: how many
 * logit rows differ from solo's. */
static int batched(lt_model *m, lt_pool *pool, int32_t kb, const float *ref) {
    const int64_t V = m->cfg.vocab_size;
    lt_llama *l;
    lt_llama_opts o = {.ctx_len = CTX, .executor = 1, .n_slots = SEQS};
    ASSERT_EQ(lt_llama_init(&l, m, pool, &o), LT_OK);
    ASSERT_EQ(lt_tuning_pin(lt_llama_tuning(l), "matvec", NULL, "tok_chunk_kb", kb), LT_OK);
    for (int s = 0; s < SEQS; s++)
        ASSERT_EQ(lt_llama_eval_slot(l, s, prompts[s], PROMPT, 0), LT_OK);
    int diff = 0;
    for (int i = 0; i < STEPS; i++) {
        int32_t tok[SEQS], slot[SEQS];
        int64_t pos[SEQS];
        for (int s = 0; s < SEQS; s++) tok[s] = fed(s, i), slot[s] = s, pos[s] = PROMPT + i;
        ASSERT_EQ(lt_llama_eval_batch(l, tok, pos, slot, SEQS), LT_OK);
        int64_t rows;
        const float *lg = lt_llama_logits(l, &rows);
        ASSERT_EQ(rows, SEQS);
        for (int s = 0; s < SEQS; s++)
            diff += memcmp(lg + (size_t)s * (size_t)V,
                           ref + ((size_t)s * STEPS + (size_t)i) * (size_t)V,
                           sizeof(float) * (size_t)V) != 0;
    }
    /* the pin reached the batch program's matvecs */
    lt_program *bp;
    ASSERT_EQ(lt_llama_program_batch(l, SEQS, &bp), LT_OK);
    const int tc = lt_kernel_param_index(lt_kernel_get(LT_K_MATVEC), "tok_chunk_kb");
    for (int i = 0; i < lt_program_n_nodes(bp); i++) {
        lt_node_info ni;
        lt_program_node(bp, i, &ni);
        if (ni.kernel == LT_K_MATVEC) ASSERT_EQ(lt_program_call(bp, i)->params.v[tc], kb);
    }
    lt_llama_free(l);
    return diff;
}

int main(void) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/lt_batch_params_%d.gguf", (int)getpid());
    const lt_kernel *mv = lt_kernel_get(LT_K_MATVEC);
    const int tc = lt_kernel_param_index(mv, "tok_chunk_kb");
    ASSERT_TRUE(tc >= 0);
    if (tc < 0) return lt_test_finish();
    const lt_param_def *d = &mv->params[tc];
    static const lt_dtype dtypes[] = {LT_Q8_0, LT_F32, LT_Q4_0, LT_Q4_K, LT_Q5_K, LT_Q6_K};
    for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++) {
        /* 768 rows of W_gate of 256 columns: 8.5 KiB a q8_0 row group of 32,
         * so 32 KiB chunks cut it in many, 2 MiB ones not at all */
        lt_modelgen_opts go = {.dtype = dtypes[di], .seed = 7};
        go.cfg = (lt_llama_config){.dim = 256, .hidden_dim = 768, .n_layers = 2, .n_heads = 4,
                                   .n_kv_heads = 2, .vocab_size = 512, .seq_len = 64,
                                   .rms_eps = 1e-5f, .rope_base = 10000.0f};
        ASSERT_EQ(lt_modelgen_write(&go, path), LT_OK);
        for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) {
            lt_model *m = open_model(path, (lt_isa)isa);
            if (!m) continue;
            const int64_t V = m->cfg.vocab_size;
            float *ref = malloc(sizeof(float) * (size_t)(SEQS * STEPS * V));
            for (int nth = 1; nth <= 2; nth++) {
                lt_pool *pool;
                ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
                solo(m, pool, ref);
                for (int v = 0; v < d->n_values; v++) {
                    const int diff = batched(m, pool, d->values[v], ref);
                    if (diff)
                        fprintf(stderr, "  %s %s nth=%d tok_chunk_kb=%d: %d rows differ\n",
                                lt_dtype_name(dtypes[di]), lt_isa_name((lt_isa)isa), nth,
                                d->values[v], diff);
                    ASSERT_EQ(diff, 0);
                }
                lt_pool_free(pool);
            }
            free(ref);
            lt_model_close(m);
        }
    }
    lt_isa_force(lt_isa_detect());
    unlink(path);
    return lt_test_finish();
}
