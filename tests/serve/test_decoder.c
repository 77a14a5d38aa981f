/* The serve worker's decode thread, without Kafka: this thread plays the
 * Kafka thread, admitting more requests than there are slots, cancelling
 * one that waits for a slot and one that runs (by the request, and another
 * by its id alone, as the cancel thread does), and giving one a deadline
 * that has passed, while the decode thread steps. Every request ends once
 * (finish event), with its reason; the tokens of the others, taken from
 * the outbox in order, equal lt_generate's alone. Clean under
 * ThreadSanitizer (the mailboxes are the only shared state). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve/serve_internal.h"
#include "test.h"

enum { SLOTS = 2, CTX = 64, N_REQ = 7, GEN = 12 };

static uint64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct {
    lt__sreq r;
    int32_t prompt[8];
    int32_t want[GEN];
    int64_t n_want;
    int32_t got[GEN];
    int64_t n_got;
    int finishes;
    lt_finish why;
} req;

static int solo_token(void *user, int32_t prev, int32_t tok) {
    (void)prev;
    req *q = user;
    q->want[q->n_want++] = tok;
    return 0;
}

int main(void) {
    const char *dir = getenv("LT_WORK_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/serve-decoder-%d.gguf", dir ? dir : "/tmp", (int)getpid());
    lt_modelgen_opts mo = {
        .cfg = {.dim = 64, .hidden_dim = 128, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                .vocab_size = 512, .seq_len = CTX, .rms_eps = 1e-5f, .rope_base = 10000.0f},
        .dtype = LT_F32, .seed = 4};
    ASSERT_EQ(lt_modelgen_write(&mo, path), LT_OK);
    lt_model *m = NULL;
    ASSERT_EQ(lt_model_open(&m, path, NULL), LT_OK);
    remove(path);
    if (!m) return lt_test_finish();
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 1), LT_OK);

    static req q[N_REQ];
    static char ids[N_REQ][16];
    for (int i = 0; i < N_REQ; i++) {
        snprintf(ids[i], sizeof ids[i], "req-%d", i);
        q[i].r.id = ids[i];
        q[i].prompt[0] = 1;
        for (int k = 1; k < 5; k++) q[i].prompt[k] = 10 + 17 * i + 3 * k;
        q[i].r.prompt = q[i].prompt;
        q[i].r.n_prompt = 5;
        q[i].r.smp = lt_sampler_defaults();
        q[i].r.smp.seed = 100 + (uint64_t)i;
        q[i].r.smp.temp = i % 2 ? 0.9f : 0.0f;
        q[i].r.max_tokens = GEN;
        q[i].r.ignore_eos = true;
        /* alone */
        lt_llama *l;
        lt_llama_opts o = {.ctx_len = CTX, .executor = 1};
        ASSERT_EQ(lt_llama_init(&l, m, pool, &o), LT_OK);
        lt_sampler *s;
        ASSERT_EQ(lt_sampler_init_opts(&s, m->cfg.vocab_size, &q[i].r.smp), LT_OK);
        lt_gen_opts go = {.n_new = GEN, .stop_token = -1};
        lt_gen_stats gs;
        ASSERT_EQ(lt_generate(l, s, q[i].prompt, 5, &go, solo_token, &q[i], &gs), LT_OK);
        lt_sampler_free(s);
        lt_llama_free(l);
    }
    q[2].r.deadline_ns = wall_ns() - 1; /* past already */

    lt_llama *l;
    lt_llama_opts lo = {.ctx_len = CTX, .executor = 1, .n_slots = SLOTS};
    ASSERT_EQ(lt_llama_init(&l, m, pool, &lo), LT_OK);
    lt__decoder d = {0};
    lt__decoder_init(&d);
    lt_batcher *b;
    lt_batcher_opts bo = {.on_token = lt__decoder_on_token, .on_finish = lt__decoder_on_finish,
                          .ctx = &d};
    ASSERT_EQ(lt_batcher_init(&b, l, &bo), LT_OK);
    d.batchers = &b;
    d.n_batchers = 1;
    d.step_delay_ms = 5;
    d.id = "test";
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, lt__decoder_main, &d), 0);
    /* all at once: 2 run, the others wait */
    for (int i = 0; i < N_REQ; i++) lt__decoder_command(&d, LT__CMD_ADMIT, &q[i].r, LT_FINISH_NONE);
    /* the last waits for a slot: cancelled before it runs */
    lt__decoder_command(&d, LT__CMD_CANCEL, &q[N_REQ - 1].r, LT_FINISH_CANCELLED);
    lt__vec evs = {.size = sizeof(lt__event)};
    int ended = 0;
    bool cancelled_running = false, cancelled_by_id = false;
    const uint64_t t0 = wall_ns();
    while (ended < N_REQ && wall_ns() - t0 < 60ull * 1000000000ull) {
        lt__decoder_take(&d, &evs);
        for (size_t k = 0; k < evs.n; k++) {
            lt__event *e = &((lt__event *)evs.v)[k];
            req *r = (req *)e->r; /* r is the first member */
            if (e->kind == LT__EV_TOKEN) {
                ASSERT_EQ(e->index, r->n_got);
                if (r->n_got < GEN) r->got[r->n_got] = e->token;
                r->n_got++;
                /* request 0 runs first: cancelled 4 tokens in */
                if (r == &q[0] && r->n_got == 4 && !cancelled_running) {
                    cancelled_running = true;
                    lt__decoder_command(&d, LT__CMD_CANCEL, &q[0].r, LT_FINISH_CANCELLED);
                }
                /* request 1, the other running first: cancelled by its id alone */
                if (r == &q[1] && r->n_got == 4 && !cancelled_by_id) {
                    cancelled_by_id = true;
                    lt__decoder_cancel_id(&d, "req-1");
                }
            } else {
                r->finishes++;
                r->why = e->why;
                free(e->error);
                ended++;
            }
        }
        evs.n = 0;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    ASSERT_EQ(ended, N_REQ);
    atomic_store(&d.stop, true);
    pthread_mutex_lock(&d.mu);
    pthread_cond_broadcast(&d.inbox_cv);
    pthread_mutex_unlock(&d.mu);
    pthread_join(th, NULL);
    ASSERT_EQ(atomic_load(&d.steps) > 0, 1);
    for (int i = 0; i < N_REQ; i++) {
        ASSERT_EQ(q[i].finishes, 1);
        const int64_t n = q[i].n_got < GEN ? q[i].n_got : GEN;
        for (int64_t k = 0; k < n; k++) ASSERT_EQ(q[i].got[k], q[i].want[k]);
    }
    /* request 0 stopped within a token or two of its cancel (tokens already queued) */
    ASSERT_EQ(q[0].why, LT_FINISH_CANCELLED);
    ASSERT_TRUE(q[0].n_got >= 4 && q[0].n_got < GEN);
    ASSERT_EQ(q[1].why, LT_FINISH_CANCELLED);
    ASSERT_TRUE(q[1].n_got >= 4 && q[1].n_got < GEN);
    ASSERT_EQ(q[2].why, LT_FINISH_DEADLINE);
    ASSERT_EQ(q[2].n_got, 0);
    ASSERT_EQ(q[N_REQ - 1].why, LT_FINISH_CANCELLED);
    ASSERT_EQ(q[N_REQ - 1].n_got, 0);
    for (int i = 3; i < N_REQ - 1; i++) {
        ASSERT_EQ(q[i].why, LT_FINISH_LENGTH);
        ASSERT_EQ(q[i].n_got, GEN);
    }
    free(evs.v);
    lt__decoder_destroy(&d);
    lt_batcher_free(b);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return lt_test_finish();
}
