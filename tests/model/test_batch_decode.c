/* Batched decode: several sequences in the slots of one runtime, each step
 * one batch of their tokens, give every sequence the logits it gets decoded
 * alone. On the real stories260K model (grouped-query attention), five
 * sequences with prompts of different lengths join at different steps (two
 * prefilled by a step of their own, two with their prompt mixed into a
 * decode batch of the others), leave after different numbers of tokens, and
 * a fifth takes a slot another left. Each is fed the tokens its solo greedy
 * run chose, and every batched logit row must match the solo row: bit for
 * bit where the prompt was prefilled by a step of its own (a batch takes
 * every token through matvec as decode does, each token's products in the
 * order they have alone), within float rounding where the prompt went into
 * a batch (its tokens then take matvec where the solo prefill takes matmul,
 * whose sums run in another order, and so do the keys and values it leaves
 * in the cache). The same batches on 1 or 2 threads and under both
 * executors give the same bits. Bad batches are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/model.h"
#include "model_test.h"
#include "test.h"

enum { SEQS = 5, SLOTS = 4, CTX = 64, MAX_PROMPT = 7, MAX_GEN = 12 };

/* Logits through a prompt of matvec against matmul: f32 sums of at most a
 * few hundred products in another order, through 5 layers. */
#define TOL 2e-4

typedef struct {
    int32_t prompt[MAX_PROMPT];
    int n_prompt, n_gen;
    int join;       /* the batch step it first takes part in */
    bool mixed;     /* its prompt goes into that step's batch (else a step of its own before it) */
    int slot;
    /* solo: tokens fed after the prompt and the logits after each input */
    int32_t gen[MAX_GEN];
    float *solo; /* [n_gen + 1][V]: after the prompt, then after each generated token */
} sequence;

static int64_t argmax(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t j = 1; j < n; j++)
        if (x[j] > x[b]) b = j;
    return b;
}

static void solo_run(lt_model *m, lt_pool *pool, sequence *s) {
    const int64_t V = m->cfg.vocab_size;
    lt_llama *l;
    lt_llama_opts o = {.ctx_len = CTX, .executor = 1};
    ASSERT_EQ(lt_llama_init(&l, m, pool, &o), LT_OK);
    s->solo = malloc(sizeof(float) * (size_t)((s->n_gen + 1) * V));
    ASSERT_EQ(lt_llama_eval(l, s->prompt, s->n_prompt, 0), LT_OK);
    memcpy(s->solo, lt_llama_logits(l, NULL), sizeof(float) * (size_t)V);
    for (int i = 0; i < s->n_gen; i++) {
        s->gen[i] = (int32_t)argmax(s->solo + (size_t)i * (size_t)V, V);
        ASSERT_EQ(lt_llama_eval(l, &s->gen[i], 1, s->n_prompt + i), LT_OK);
        memcpy(s->solo + (size_t)(i + 1) * (size_t)V, lt_llama_logits(l, NULL),
               sizeof(float) * (size_t)V);
    }
    lt_llama_free(l);
}

/* Runs the schedule; out[s] gets sequence s's rows as solo has them. */
static void batched_run(lt_model *m, lt_pool *pool, int executor, sequence *seqs,
                        float **out) {
    const int64_t V = m->cfg.vocab_size;
    lt_llama *l;
    lt_llama_opts o = {.ctx_len = CTX, .executor = executor, .n_slots = SLOTS};
    ASSERT_EQ(lt_llama_init(&l, m, pool, &o), LT_OK);
    ASSERT_EQ(lt_llama_n_slots(l), SLOTS);
    int done[SEQS] = {0}; /* generated tokens fed so far; -1 before the prompt */
    for (int s = 0; s < SEQS; s++) done[s] = -1;
    for (int step = 0; step < 40; step++) {
        /* prompts prefilled by a step of their own first */
        for (int s = 0; s < SEQS; s++) {
            sequence *q = &seqs[s];
            if (q->join != step || q->mixed) continue;
            ASSERT_EQ(lt_llama_eval_slot(l, q->slot, q->prompt, q->n_prompt, 0), LT_OK);
            memcpy(out[s], lt_llama_logits(l, NULL), sizeof(float) * (size_t)V);
            done[s] = 0;
        }
        int32_t tok[64], slot[64];
        int64_t pos[64];
        int who[64], row_of[SEQS];
        int n = 0;
        for (int s = 0; s < SEQS; s++) {
            sequence *q = &seqs[s];
            row_of[s] = -1;
            if (q->join == step && q->mixed) { /* the whole prompt, causal within the step */
                for (int i = 0; i < q->n_prompt; i++) {
                    tok[n] = q->prompt[i], pos[n] = i, slot[n] = q->slot, who[n] = -1;
                    n++;
                }
                row_of[s] = n - 1;
                who[n - 1] = s;
                done[s] = 0;
                continue;
            }
            if (done[s] < 0 || done[s] >= q->n_gen || q->join > step) continue;
            tok[n] = q->gen[done[s]], pos[n] = q->n_prompt + done[s], slot[n] = q->slot;
            who[n] = s;
            row_of[s] = n;
            n++;
        }
        if (n == 0) continue;
        ASSERT_EQ(lt_llama_eval_batch(l, tok, pos, slot, n), LT_OK);
        int64_t rows;
        const float *lg = lt_llama_logits(l, &rows);
        ASSERT_EQ(rows, n);
        for (int s = 0; s < SEQS; s++) {
            if (row_of[s] < 0) continue;
            const bool prompt_row = seqs[s].join == step && seqs[s].mixed;
            const int at = prompt_row ? 0 : done[s] + 1;
            memcpy(out[s] + (size_t)at * (size_t)V, lg + (size_t)row_of[s] * (size_t)V,
                   sizeof(float) * (size_t)V);
            if (!prompt_row) done[s]++;
        }
        (void)who;
    }
    for (int s = 0; s < SEQS; s++) ASSERT_EQ(done[s], seqs[s].n_gen);

    /* refused: a slot past n_slots, a position past the context, a row twice */
    int32_t t2[2] = {1, 2}, sl[2] = {0, SLOTS};
    int64_t p2[2] = {0, 0};
    ASSERT_EQ(lt_llama_eval_batch(l, t2, p2, sl, 2), LT_ERANGE);
    sl[1] = 1, p2[1] = CTX;
    ASSERT_EQ(lt_llama_eval_batch(l, t2, p2, sl, 2), LT_ERANGE);
    sl[1] = 0, p2[1] = 0;
    ASSERT_EQ(lt_llama_eval_batch(l, t2, p2, sl, 2), LT_EINVAL);
    ASSERT_EQ(lt_llama_eval_slot(l, SLOTS, t2, 1, 0), LT_ERANGE);
    lt_llama_free(l);
}

int main(void) {
    lt_model *m = lt_test_stories260k();
    if (!m) return lt_test_finish();
    const int64_t V = m->cfg.vocab_size;
    /* join step, mixed, slot: sequence 4 takes slot 0 after sequence 0 left */
    sequence seqs[SEQS] = {
        {.prompt = {1, 403, 407, 261}, .n_prompt = 4, .n_gen = 6, .join = 0, .slot = 0},
        {.prompt = {1, 67, 89}, .n_prompt = 3, .n_gen = 10, .join = 2, .mixed = true, .slot = 1},
        {.prompt = {1, 300, 301, 302, 303, 304, 305}, .n_prompt = 7, .n_gen = 8, .join = 3,
         .slot = 2},
        {.prompt = {1, 5}, .n_prompt = 2, .n_gen = 12, .join = 5, .mixed = true, .slot = 3},
        {.prompt = {1, 403, 99, 7, 8}, .n_prompt = 5, .n_gen = 9, .join = 8, .mixed = true,
         .slot = 0},
    };
    lt_pool *pool1, *pool2;
    ASSERT_EQ(lt_pool_init(&pool1, 1), LT_OK);
    ASSERT_EQ(lt_pool_init(&pool2, 2), LT_OK);
    for (int s = 0; s < SEQS; s++) solo_run(m, pool2, &seqs[s]);
    /* sequence 0 has left (6 tokens from step 0) before sequence 4 joins */
    ASSERT_TRUE(seqs[0].join + seqs[0].n_gen <= seqs[4].join);

    float *ref[SEQS], *got[SEQS];
    for (int s = 0; s < SEQS; s++) {
        ref[s] = calloc((size_t)((seqs[s].n_gen + 1) * V), sizeof(float));
        got[s] = calloc((size_t)((seqs[s].n_gen + 1) * V), sizeof(float));
    }
    batched_run(m, pool2, 1, seqs, ref);
    for (int s = 0; s < SEQS; s++) {
        double worst = 0.0;
        for (int64_t i = 0; i < (seqs[s].n_gen + 1) * V; i++) {
            ASSERT_TRUE(isfinite(ref[s][i]));
            const double d = fabs((double)ref[s][i] - seqs[s].solo[i]);
            worst = d > worst ? d : worst;
        }
        const double tol = seqs[s].mixed ? TOL : 0.0;
        if (worst > tol) fprintf(stderr, "sequence %d: max |batched - solo| = %g\n", s, worst);
        ASSERT_TRUE(worst <= tol);
        /* the greedy choice is the solo run's at every step */
        for (int i = 0; i < seqs[s].n_gen; i++)
            ASSERT_EQ(argmax(ref[s] + (size_t)i * (size_t)V, V), seqs[s].gen[i]);
    }
    /* threads and executors change no bit */
    const struct {
        lt_pool *pool;
        int executor;
    } variants[] = {{pool1, 1}, {pool2, 0}, {pool1, 0}};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        batched_run(m, variants[v].pool, variants[v].executor, seqs, got);
        for (int s = 0; s < SEQS; s++)
            ASSERT_TRUE(memcmp(got[s], ref[s], sizeof(float) * (size_t)((seqs[s].n_gen + 1) * V)) ==
                        0);
    }
    for (int s = 0; s < SEQS; s++) {
        free(ref[s]);
        free(got[s]);
        free(seqs[s].solo);
    }
    lt_pool_free(pool1);
    lt_pool_free(pool2);
    lt_model_close(m);
    return lt_test_finish();
}
