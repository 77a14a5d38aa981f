/* The run side of online tuning on a real runtime (stories260K, looped
 * executor): a valid control changes the values in force of every key it
 * names at the next token boundary, and the programs run with them at the
 * next eval; a trial alternates A B, B A phases of the given length and ends
 * on the incumbent; controls of the decode thread count and of the looped
 * executor are values like a kernel's, and a later control puts the old
 * values back; a trial of the prefill thread count has a phase per prefill
 * step (lt_online_prefill) and leaves the decode steps on the incumbents; the logits are the same under every configuration;
 * malformed controls, controls for another run and values outside the space
 * are refused and change nothing. */
#include <stdlib.h>
#include <string.h>

#include "looptune/runtime.h"
#include "model_test.h"
#include "test.h"

/* A control envelope; params "name=value,..." (NULL: none). */
static void control_node(lt_online *o, const char *run, const char *kernel, const char *shape,
                         const char *node, const char *params, uint32_t pairs, uint32_t ptok) {
    Looptune__Envelope env;
    lt_envelope_init(&env);
    Looptune__Control c = LOOPTUNE__CONTROL__INIT;
    Looptune__Param prm[LT_MAX_PARAMS + 2], *pp[LT_MAX_PARAMS + 2];
    char names[LT_MAX_PARAMS + 2][32];
    size_t n = 0;
    if (params) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", params);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(tok, '=');
            *eq = '\0';
            looptune__param__init(&prm[n]);
            snprintf(names[n], sizeof names[n], "%s", tok);
            prm[n].name = names[n];
            prm[n].value = atoll(eq + 1);
            pp[n] = &prm[n];
            n++;
        }
    }
    c.run_id = (char *)run;
    c.kernel = (char *)kernel;
    c.shape = (char *)shape;
    c.node = (char *)node;
    c.n_params = n;
    c.params = n ? pp : NULL;
    c.trial_pairs = pairs;
    c.phase_tokens = ptok;
    c.candidate_id = "cand-1";
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CONTROL;
    env.control = &c;
    uint8_t *buf;
    size_t len;
    ASSERT_EQ(lt_envelope_encode(&env, &buf, &len), LT_OK);
    lt_online_submit(o, buf, len);
    free(buf);
}

static void control(lt_online *o, const char *run, const char *kernel, const char *shape,
                    const char *params, uint32_t pairs, uint32_t ptok) {
    control_node(o, run, kernel, shape, "", params, pairs, ptok);
}

typedef struct {
    lt_llama *l;
    lt_model *m;
    float *ref; /* [vocab] the logits of the first decode step at defaults */
    int64_t pos;
} fixture;

/* One decode step at the fixed position 8 (the cache rows before it were
 * filled by the prompt): the same logits under every configuration. */
static void step(fixture *f) {
    int32_t tok = 5;
    ASSERT_EQ(lt_llama_eval(f->l, &tok, 1, 8), LT_OK);
    const int64_t V = f->m->cfg.vocab_size;
    const float *lg = lt_llama_logits(f->l, NULL);
    if (!f->ref) {
        f->ref = malloc((size_t)V * sizeof(float));
        memcpy(f->ref, lg, (size_t)V * sizeof(float));
        return;
    }
    ASSERT_TRUE(!memcmp(lg, f->ref, (size_t)V * sizeof(float)));
}

static int32_t value(lt_tuning *t, const char *name, const char *key, int i) {
    lt_params p;
    ASSERT_EQ(lt_tuning_get(t, name, key, &p), LT_OK);
    return p.v[i];
}

int main(void) {
    fixture f = {0};
    f.m = lt_test_stories260k();
    if (!f.m) return lt_test_finish();
    lt_pool *pool;
    f.l = lt_test_llama(f.m, 2, 32, 8, &pool);
    if (!f.l) return lt_test_finish();
    int32_t prompt[8] = {1, 403, 407, 261, 300, 301, 302, 303};
    ASSERT_EQ(lt_llama_eval(f.l, prompt, 8, 0), LT_OK);
    step(&f);
    lt_tuning *t = lt_llama_tuning(f.l);
    const char *step_key = lt_tuning_step_key(t, LT_REGIME_DECODE);
    /* the plain matvec of the classifier */
    char mv[LT_KEY_MAX];
    snprintf(mv, sizeof mv, "f32:%lldx%lld:decode", (long long)f.m->cfg.dim,
             (long long)f.m->cfg.vocab_size);
    ASSERT_TRUE(lt_tuning_uses(t, "matvec", mv));

    FILE *devnull = fopen("/dev/null", "w");
    lt_online *o;
    lt_online_opts oo = {.run_id = "run-a", .tuning = t, .log = devnull};
    ASSERT_EQ(lt_online_open(&o, &oo), LT_OK);
    const int32_t def_rpt = value(t, "matvec", mv, 0);

    /* refused: nothing may change */
    const char *good = "rows_per_task=16,unroll=4,k_block=0,prefetch=1024,act_int16=1,act_int8=1";
    control(o, "run-b", "matvec", mv, good, 0, 0);              /* another run: ignored */
    control(o, "run-a", "nosuch", mv, good, 0, 0);              /* unknown kernel */
    control(o, "run-a", "matvec", "f32:1x1:decode", good, 0, 0); /* no such shape */
    control(o, "run-a", "matvec", mv, "rows_per_task=16,unroll=4,k_block=0,prefetch=1024", 0, 0);
    control(o, "run-a", "matvec", mv,
            "rows_per_task=16,unroll=3,k_block=0,prefetch=1024,act_int16=1,act_int8=1", 0, 0);
    control(o, "run-a", "matvec", mv,
            "rows_per_task=16,unroll=4,k_block=0,prefetch=1024,act_int16=1,act_int8=1,bogus=1",
            0, 0);
    control(o, "run-a", "matvec", mv, good, 65, 4);             /* too many pairs */
    control(o, "run-a", "matvec", mv, good, 2, 0);              /* phases of 0 steps */
    control_node(o, "run-a", "matvec", mv, "blk.0.q", good, 0, 0); /* a node, not a key */
    control(o, "run-a", "threads", step_key, "threads=2", 0, 0); /* 2 is the whole pool: 0 */
    control(o, "run-a", "threads", "llama:d1:h1:l1:f32:t2:decode", "threads=1", 0, 0);
    control(o, "run-a", "looped", step_key, "tiles_per_thread=3,prefetch_kb=0,sync=0,min_task_kb=0",
            0, 0);                                               /* 3 tiles: not allowed */
    lt_online_submit(o, "\x08\x01\x12\xff", 4);                  /* garbage */
    {
        Looptune__Envelope env; /* a record of another kind */
        lt_envelope_init(&env);
        Looptune__RunEnd re = LOOPTUNE__RUN_END__INIT;
        re.run_id = "run-a";
        env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END;
        env.run_end = &re;
        uint8_t *buf;
        size_t len;
        ASSERT_EQ(lt_envelope_encode(&env, &buf, &len), LT_OK);
        lt_online_submit(o, buf, len);
        free(buf);
    }
    lt_online_step(o);
    lt_online_stats st;
    lt_online_stats_get(o, &st);
    ASSERT_EQ(st.received, 14);
    ASSERT_EQ(st.ignored, 1);
    ASSERT_EQ(st.rejected, 13);
    ASSERT_EQ(st.applied, 0);
    ASSERT_EQ(value(t, "matvec", mv, 0), def_rpt);
    ASSERT_EQ(lt_llama_threads(f.l, LT_REGIME_DECODE), 2);
    ASSERT_EQ(lt_online_report(o, devnull), 0);

    /* a new incumbent for the matvec key: in force now, on the calls at the next eval */
    control(o, "run-a", "matvec", mv, good, 0, 0);
    ASSERT_EQ(value(t, "matvec", mv, 0), def_rpt); /* not before the boundary */
    lt_online_step(o);
    ASSERT_EQ(value(t, "matvec", mv, 0), 16);
    ASSERT_EQ(value(t, "matvec", mv, 1), 4);
    step(&f);
    lt_program *dec;
    ASSERT_EQ(lt_llama_program(f.l, 1, &dec), LT_OK);
    const lt_call *cls = lt_program_call(dec, lt_program_n_nodes(dec) - 1);
    ASSERT_EQ(cls->params.v[0], 16);

    /* a trial of the decode thread count: 2 pairs of 3 steps: A A A B B B | B B B A A A */
    control(o, "", "threads", step_key, "threads=1", 2, 3);
    lt_online_step(o);
    const int expect_b[12] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0};
    for (int k = 0; k < 12; k++) {
        ASSERT_EQ(lt_online_step_kind(o), expect_b[k] ? 2 : 1);
        ASSERT_EQ(lt_llama_threads(f.l, LT_REGIME_DECODE), expect_b[k] ? 1 : 2);
        step(&f);
        lt_online_step(o);
    }
    ASSERT_EQ(lt_online_step_kind(o), 0);
    ASSERT_EQ(lt_llama_threads(f.l, LT_REGIME_DECODE), 2);
    lt_online_stats_get(o, &st);
    ASSERT_EQ(st.trials, 1);
    ASSERT_EQ(st.trial_tokens, 12);
    ASSERT_EQ(st.candidate_tokens, 6);

    /* a trial of the prefill thread count, 2 pairs of 1 prefill step (A B |
     * B A): its phases are prefill steps, the decode steps between them run
     * the incumbents and count for no trial; the prompt's logits are the
     * same under both */
    const char *prefill_key = lt_tuning_step_key(t, LT_REGIME_PREFILL);
    const int64_t V = f.m->cfg.vocab_size;
    float *pre_ref = malloc((size_t)V * sizeof(float));
    ASSERT_EQ(lt_llama_eval(f.l, prompt, 8, 0), LT_OK);
    memcpy(pre_ref, lt_llama_logits(f.l, NULL), (size_t)V * sizeof(float));
    control(o, "", "threads", prefill_key, "threads=1", 2, 1);
    lt_online_step(o);
    const int expect_pb[4] = {0, 1, 1, 0};
    for (int k = 0; k < 4; k++) {
        for (int d = 0; d < 3; d++) { /* decode steps: no phase ends */
            ASSERT_EQ(lt_llama_threads(f.l, LT_REGIME_PREFILL), expect_pb[k] ? 1 : 2);
            ASSERT_EQ(lt_llama_threads(f.l, LT_REGIME_DECODE), 2);
            ASSERT_EQ(lt_online_step_kind(o), 0);
            step(&f);
            lt_online_step(o);
        }
        ASSERT_EQ(lt_llama_eval(f.l, prompt, 8, 0), LT_OK); /* the prefill step */
        ASSERT_TRUE(!memcmp(lt_llama_logits(f.l, NULL), pre_ref, (size_t)V * sizeof(float)));
        lt_online_prefill(o);
    }
    ASSERT_EQ(lt_llama_threads(f.l, LT_REGIME_PREFILL), 2); /* back on the incumbent */
    lt_online_prefill(o);                      /* outside a trial: nothing */
    ASSERT_EQ(lt_llama_threads(f.l, LT_REGIME_PREFILL), 2);
    free(pre_ref);
    lt_online_stats_get(o, &st);
    ASSERT_EQ(st.trials, 2);
    ASSERT_EQ(st.trial_prefills, 4);
    ASSERT_EQ(st.trial_tokens, 12); /* the decode steps of the first trial only */

    /* the looped executor: a new incumbent, then the old values back */
    lt_params xp0;
    ASSERT_EQ(lt_tuning_get(t, "looped", step_key, &xp0), LT_OK);
    control(o, "run-a", "looped", step_key, "tiles_per_thread=1,prefetch_kb=0,sync=1,min_task_kb=0",
            0, 0);
    lt_online_step(o);
    ASSERT_EQ(value(t, "looped", step_key, LT_XP_SYNC), 1);
    ASSERT_EQ(value(t, "looped", step_key, LT_XP_TILES), 1);
    step(&f);
    lt_params in_force; /* on the executor every eval runs on */
    lt_exec_params(lt_llama_exec(f.l), &in_force);
    ASSERT_EQ(in_force.v[LT_XP_SYNC], 1);
    char back[160];
    snprintf(back, sizeof back, "tiles_per_thread=%d,prefetch_kb=%d,sync=%d,min_task_kb=%d",
             xp0.v[0], xp0.v[1], xp0.v[2], xp0.v[3]);
    control(o, "run-a", "looped", step_key, back, 0, 0);
    lt_online_step(o);
    step(&f);
    lt_exec_params(lt_llama_exec(f.l), &in_force);
    ASSERT_TRUE(!memcmp(in_force.v, xp0.v, LT_XP_COUNT * sizeof xp0.v[0]));

    /* a trial cut short by a new incumbent: the trial's candidate never stays */
    control(o, "run-a", "matvec", mv, "rows_per_task=8,unroll=1,k_block=0,prefetch=0,"
                                      "act_int16=1,act_int8=1",
            4, 2);
    lt_online_step(o);
    lt_online_step(o);
    lt_online_step(o); /* now in a candidate phase */
    ASSERT_EQ(value(t, "matvec", mv, 0), 8);
    control(o, "run-a", "matvec", mv, good, 0, 0);
    lt_online_step(o);
    ASSERT_EQ(lt_online_step_kind(o), 0);
    ASSERT_EQ(value(t, "matvec", mv, 0), 16);
    step(&f);

    /* what changed since open: the classifier's key and the fused one that
     * falls back to it (threads and looped are back); three incumbents (the
     * last matvec control changed nothing: the trial had ended on it) */
    ASSERT_EQ(lt_online_report(o, devnull), 2);
    lt_online_stats_get(o, &st);
    ASSERT_EQ(st.applied, 3);
    lt_online_close(o);
    fclose(devnull);
    free(f.ref);
    lt_llama_free(f.l);
    lt_pool_free(pool);
    lt_model_close(f.m);
    return lt_test_finish();
}
