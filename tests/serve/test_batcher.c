/* The batcher against solo generation. On a small random-weight model made
 * here (grouped-query attention, a synthetic vocabulary), sequences with
 * prompts of different lengths (one longer than several prefill chunks),
 * different max_tokens, greedy and seeded sampling of different settings,
 * join at different steps, wait for a slot when all are taken, and leave
 * at different steps. Each one's tokens and text must equal what
 * lt_generate gives for the same request alone (same prompt chunking), on
 * a runtime of its own: an end of generation, a stop text, max_tokens, a
 * full context. A sequence that generates gets a token at every step, also
 * while a prompt is being prefilled (a step is at most one chunk and one
 * token per sequence). A cancelled sequence's tokens are a prefix of its solo
 * ones; bad requests are refused; a slot that is left is taken again. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "looptune/serve.h"
#include "test.h"

enum { SLOTS = 3, CTX = 96, CHUNK = 16, MAX_GEN = 40, N_SEQ = 8 };

typedef struct {
    int32_t prompt[CTX];
    int64_t n_prompt, max_tokens;
    lt_sampler_opts smp;
    bool ignore_eos;
    const char *stop; /* NULL: none */
    int join;         /* the step from which it may take a slot */
    int cancel_after; /* > 0: cancelled once it has this many tokens */
    /* solo */
    int32_t want[MAX_GEN];
    int64_t n_want;
    char want_text[4096];
    /* batched */
    int32_t got[MAX_GEN];
    int64_t n_got;
    char got_text[4096];
    size_t got_len;
    lt_finish why;
    int64_t usage_prompt, usage_gen;
    int64_t id;
    bool admitted, done;
    int joined_at, left_at;
} req;

/* ---- solo: lt_generate on a runtime of one sequence ---- */

typedef struct {
    req *r;
    const lt_vocab *v;
    size_t len;
    bool stopped;
} solo_state;

static int solo_token(void *user, int32_t prev, int32_t tok) {
    solo_state *s = user;
    req *r = s->r;
    if (!r->ignore_eos && lt_vocab_is_eog(s->v, tok)) return 1;
    char buf[256];
    size_t n = lt_detokenize(s->v, prev, tok, buf, sizeof buf);
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(r->want_text + s->len, buf, n);
    s->len += n;
    r->want_text[s->len] = 0;
    r->want[r->n_want++] = tok;
    /* the whole text searched again: plainly right */
    if (r->stop && strstr(r->want_text, r->stop)) return 1;
    return 0;
}

static void solo_run(lt_model *m, lt_pool *pool, req *r) {
    lt_llama *l;
    lt_llama_opts o = {.ctx_len = CTX, .executor = 1};
    ASSERT_EQ(lt_llama_init(&l, m, pool, &o), LT_OK);
    lt_sampler *s;
    ASSERT_EQ(lt_sampler_init_opts(&s, m->cfg.vocab_size, &r->smp), LT_OK);
    solo_state st = {.r = r, .v = m->vocab};
    int64_t n_new = r->max_tokens;
    if (r->n_prompt + n_new - 1 > CTX) n_new = CTX - r->n_prompt + 1; /* what the context holds */
    lt_gen_opts go = {.n_new = n_new, .prefill_batch = CHUNK, .stop_token = -1};
    lt_gen_stats gs;
    r->n_want = 0;
    ASSERT_EQ(lt_generate(l, s, r->prompt, r->n_prompt, &go, solo_token, &st, &gs), LT_OK);
    lt_sampler_free(s);
    lt_llama_free(l);
}

/* ---- batched ---- */

typedef struct {
    req *reqs;
    int step;
} run_state;

static void on_token(void *ctx, void *user, int64_t index, int32_t token, const char *text,
                     size_t len) {
    (void)ctx;
    req *r = user;
    ASSERT_EQ(index, r->n_got);
    if (r->n_got < MAX_GEN) r->got[r->n_got] = token;
    r->n_got++;
    if (r->got_len + len < sizeof r->got_text) {
        memcpy(r->got_text + r->got_len, text, len);
        r->got_len += len;
        r->got_text[r->got_len] = 0;
    }
}

static void on_finish(void *ctx, void *user, lt_finish why, const char *error, int64_t n_prompt,
                      int64_t n_gen) {
    run_state *rs = ctx;
    req *r = user;
    ASSERT_TRUE(!r->done);
    if (error) fprintf(stderr, "sequence error: %s\n", error);
    r->done = true;
    r->why = why;
    r->usage_prompt = n_prompt;
    r->usage_gen = n_gen;
    r->left_at = rs->step;
}

static void fill_prompt(req *r, int64_t n, uint32_t seed, int64_t vocab) {
    r->n_prompt = n;
    r->prompt[0] = 1; /* BOS */
    for (int64_t i = 1; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        r->prompt[i] = (int32_t)(3 + (seed >> 8) % (uint32_t)(vocab - 3));
    }
}

static lt_sampler_opts sampling(float temp, float top_p, int32_t top_k, float min_p, float pen,
                                uint64_t seed) {
    lt_sampler_opts o = lt_sampler_defaults();
    o.temp = temp, o.top_p = top_p, o.top_k = top_k, o.min_p = min_p, o.repeat_penalty = pen;
    o.seed = seed;
    return o;
}

int main(void) {
    const char *dir = getenv("LT_WORK_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/serve-batcher-%d.gguf", dir ? dir : "/tmp", (int)getpid());
    lt_modelgen_opts mo = {
        .cfg = {.dim = 64, .hidden_dim = 160, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                .vocab_size = 512, .seq_len = CTX, .rms_eps = 1e-5f, .rope_base = 10000.0f},
        .dtype = LT_F32, .seed = 11};
    ASSERT_EQ(lt_modelgen_write(&mo, path), LT_OK);
    lt_model *m = NULL;
    ASSERT_EQ(lt_model_open(&m, path, NULL), LT_OK);
    remove(path);
    if (!m) return lt_test_finish();
    ASSERT_TRUE(m->vocab != NULL);
    const int64_t V = m->cfg.vocab_size;
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);

    static req reqs[N_SEQ];
    memset(reqs, 0, sizeof reqs);
    /* greedy, joins first */
    fill_prompt(&reqs[0], 5, 1, V), reqs[0].max_tokens = 20, reqs[0].smp = sampling(0, 1, 0, 0, 1, 0);
    /* a prompt of 70 tokens: 5 chunks, sampled */
    fill_prompt(&reqs[1], 70, 2, V), reqs[1].max_tokens = 12, reqs[1].join = 1;
    reqs[1].smp = sampling(0.9f, 0.9f, 0, 0, 1, 7);
    /* hot, top-k and a repetition penalty */
    fill_prompt(&reqs[2], 3, 3, V), reqs[2].max_tokens = 8, reqs[2].join = 2;
    reqs[2].smp = sampling(1.5f, 1, 20, 0, 1.2f, 3);
    /* min-p; waits for a slot */
    fill_prompt(&reqs[3], 9, 4, V), reqs[3].max_tokens = 25, reqs[3].join = 3;
    reqs[3].smp = sampling(0.7f, 1, 0, 0.05f, 1, 99);
    /* greedy past end-of-generation tokens */
    fill_prompt(&reqs[4], 2, 5, V), reqs[4].max_tokens = 15, reqs[4].join = 4,
        reqs[4].ignore_eos = true, reqs[4].smp = sampling(0, 1, 0, 0, 1, 0);
    /* cancelled after 5 tokens */
    fill_prompt(&reqs[5], 6, 6, V), reqs[5].max_tokens = 30, reqs[5].join = 4,
        reqs[5].cancel_after = 5, reqs[5].smp = sampling(0.8f, 0.95f, 0, 0, 1, 5);
    /* the context fills: 93 + 4 tokens */
    fill_prompt(&reqs[6], CTX - 3, 7, V), reqs[6].max_tokens = 10, reqs[6].join = 6,
        reqs[6].smp = sampling(1.0f, 1, 0, 0, 1, 1234);
    /* a stop text (set below from its own solo text) */
    fill_prompt(&reqs[7], 4, 8, V), reqs[7].max_tokens = 30, reqs[7].join = 7, reqs[7].ignore_eos = true,
        reqs[7].smp = sampling(0.8f, 1, 0, 0, 1, 77);

    /* the stop text: bytes of the solo run's tokens 6 and 7 (so it ends there at the latest) */
    solo_run(m, pool, &reqs[7]);
    ASSERT_TRUE(reqs[7].n_want >= 8);
    static char stop_text[64];
    {
        size_t off = 0, a = 0, b = 0;
        int32_t prev = reqs[7].prompt[reqs[7].n_prompt - 1];
        for (int64_t i = 0; i < 8; i++) {
            char buf[256];
            size_t n = lt_detokenize(m->vocab, prev, reqs[7].want[i], buf, sizeof buf);
            if (i == 6) a = off;
            off += n;
            if (i == 7) b = off;
            prev = reqs[7].want[i];
        }
        size_t len = b - a < sizeof stop_text - 1 ? b - a : sizeof stop_text - 1;
        memcpy(stop_text, reqs[7].want_text + a, len);
        stop_text[len] = 0;
        ASSERT_TRUE(len > 0);
    }
    reqs[7].stop = stop_text;
    for (int i = 0; i < N_SEQ; i++) solo_run(m, pool, &reqs[i]);
    ASSERT_TRUE(reqs[7].n_want <= 8);
    ASSERT_EQ(reqs[6].n_want, 4);

    /* batched */
    lt_llama *l;
    lt_llama_opts lo = {.ctx_len = CTX, .executor = 1, .n_slots = SLOTS};
    ASSERT_EQ(lt_llama_init(&l, m, pool, &lo), LT_OK);
    run_state rs = {.reqs = reqs};
    /* the sampled rows of a step drawn on the pool's two threads */
    lt_batcher_opts bo = {.prefill_chunk = CHUNK, .on_token = on_token, .on_finish = on_finish,
                          .ctx = &rs, .pool = pool};
    lt_batcher *b;
    ASSERT_EQ(lt_batcher_init(&b, l, &bo), LT_OK);
    ASSERT_EQ(lt_batcher_slots(b), SLOTS);
    /* refused: a prompt longer than the context, a token outside the vocabulary */
    {
        static int32_t big[CTX + 1];
        lt_batcher_req bad = {.prompt = big, .n_prompt = CTX + 1, .max_tokens = 1,
                              .sampling = lt_sampler_defaults()};
        int64_t id;
        ASSERT_EQ(lt_batcher_add(b, &bad, &id), LT_ERANGE);
        big[0] = (int32_t)V;
        bad.n_prompt = 1;
        ASSERT_EQ(lt_batcher_add(b, &bad, &id), LT_EINVAL);
        ASSERT_EQ(lt_batcher_active(b), 0);
    }
    int max_active = 0, waited_full = 0;
    for (int step = 0; step < 1000; step++) {
        rs.step = step;
        int all_done = 1;
        for (int i = 0; i < N_SEQ; i++) {
            req *r = &reqs[i];
            if (!r->done) all_done = 0;
            if (r->admitted || r->join > step) continue;
            const char *stops[1] = {r->stop};
            lt_batcher_req br = {.prompt = r->prompt, .n_prompt = r->n_prompt,
                                 .sampling = r->smp, .max_tokens = r->max_tokens,
                                 .ignore_eos = r->ignore_eos, .stop = stops,
                                 .n_stop = r->stop ? 1 : 0, .user = r};
            int rc = lt_batcher_add(b, &br, &r->id);
            if (rc == LT_ESTATE) {
                waited_full++;
                continue;
            }
            ASSERT_EQ(rc, LT_OK);
            r->admitted = true;
            r->joined_at = step;
        }
        if (all_done) break;
        if (lt_batcher_active(b) > max_active) max_active = (int)lt_batcher_active(b);
        int64_t before[N_SEQ];
        for (int i = 0; i < N_SEQ; i++) before[i] = reqs[i].done ? -1 : reqs[i].n_got;
        int64_t n = 0;
        ASSERT_EQ(lt_batcher_step(b, &n), LT_OK);
        ASSERT_TRUE(n <= CHUNK + SLOTS); /* a step: one chunk and one token per sequence */
        /* no stall: a sequence that generates gets its token every step, prompts
         * being prefilled or not (none, when it ends at an end of generation) */
        for (int i = 0; i < N_SEQ; i++) {
            if (before[i] <= 0) continue;
            const int64_t got = reqs[i].n_got - before[i];
            if (!(got == 1 || (got == 0 && reqs[i].done)))
                fprintf(stderr, "step %d: sequence %d got %lld tokens\n", step, i, (long long)got);
            ASSERT_TRUE(got == 1 || (got == 0 && reqs[i].done));
        }
        for (int i = 0; i < N_SEQ; i++) {
            req *r = &reqs[i];
            if (r->admitted && !r->done && r->cancel_after && r->n_got >= r->cancel_after)
                ASSERT_EQ(lt_batcher_cancel(b, r->id, LT_FINISH_CANCELLED), LT_OK);
        }
    }
    ASSERT_EQ(max_active, SLOTS);
    ASSERT_TRUE(waited_full > 0); /* some request waited for a slot to be left */
    ASSERT_EQ(lt_batcher_active(b), 0);
    for (int i = 0; i < N_SEQ; i++) {
        req *r = &reqs[i];
        ASSERT_TRUE(r->done);
        ASSERT_EQ(r->usage_prompt, r->n_prompt);
        ASSERT_EQ(r->usage_gen, r->n_got);
        if (r->cancel_after) {
            ASSERT_EQ(r->why, LT_FINISH_CANCELLED);
            ASSERT_EQ(r->n_got, r->cancel_after);
            ASSERT_TRUE(r->n_want >= r->n_got);
        } else {
            ASSERT_EQ(r->n_got, r->n_want);
            ASSERT_STREQ(r->got_text, r->want_text);
        }
        int64_t n = r->n_got < r->n_want ? r->n_got : r->n_want;
        int same = 1;
        for (int64_t k = 0; k < n && k < MAX_GEN; k++) same &= r->got[k] == r->want[k];
        if (!same) fprintf(stderr, "sequence %d: tokens differ from solo\n", i);
        ASSERT_TRUE(same);
    }
    /* why each ended */
    ASSERT_EQ(reqs[4].why, LT_FINISH_LENGTH);
    ASSERT_EQ(reqs[4].n_got, 15);
    ASSERT_EQ(reqs[6].why, LT_FINISH_LENGTH);
    ASSERT_EQ(reqs[7].why, LT_FINISH_STOP);
    ASSERT_TRUE(strstr(reqs[7].got_text, stop_text) != NULL);
    for (int i = 0; i < N_SEQ; i++)
        if (!reqs[i].cancel_after && reqs[i].why == LT_FINISH_LENGTH && i != 6)
            ASSERT_EQ(reqs[i].n_got, reqs[i].max_tokens);
    ASSERT_EQ(lt_batcher_cancel(b, reqs[0].id, LT_FINISH_CANCELLED), LT_ENOTFOUND);
    ASSERT_STREQ(lt_finish_name(LT_FINISH_DEADLINE), "deadline");
    lt_batcher_free(b);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return lt_test_finish();
}
