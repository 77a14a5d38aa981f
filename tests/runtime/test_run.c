/* A program that links the library and generates through lt_run, with no
 * command-line code: given a config store in a file and the embedded broker,
 * it gets the warm start (the stored value is in force from the first token)
 * and online tuning (the in-process optimizer's trials run at its token
 * boundaries, and its telemetry reaches the optimizer), the prefill steps'
 * thread count included (a phase per prompt). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "looptune/optimizer.h"
#include "looptune/runtime.h"
#include "model_test.h"
#include "test.h"
#include "tune/store_test.h"

static void count_prefill(void *user, int64_t pos, int64_t n, uint64_t t_begin, uint64_t t_end) {
    ASSERT_TRUE(pos == 0 && n == 2 && t_end >= t_begin);
    (*(int *)user)++;
}

int main(void) {
    lt_model *m = lt_test_stories260k();
    if (!m) return lt_test_finish();
    lt_pool *pool;
    lt_llama *l = lt_test_llama(m, 2, 0, 0, &pool);
    if (!l) return lt_test_finish();
    lt_tuning *t = lt_llama_tuning(l);

    /* a store file holding a value for the classifier's shape on this host */
    char key[LT_KEY_MAX], path[1024];
    snprintf(key, sizeof key, "f32:%lldx%lld:decode", (long long)m->cfg.dim,
             (long long)m->cfg.vocab_size);
    ASSERT_TRUE(lt_tuning_uses(t, "matvec", key));
    lt_params def;
    ASSERT_EQ(lt_tuning_get(t, "matvec", key, &def), LT_OK);
    const int32_t rpt = def.v[0] == 16 ? 8 : 16; /* rows_per_task: not the default */
    char text[160];
    snprintf(text, sizeof text, "rows_per_task=%d,unroll=%d,k_block=%d,prefetch=%d,act_int16=%d,"
             "act_int8=%d", rpt, def.v[1], def.v[2], def.v[3], def.v[4], def.v[5]);
    const char *dir = getenv("LT_WORK_DIR");
    snprintf(path, sizeof path, "%s/run-%ld.tsv", dir ? dir : ".", (long)getpid());
    lt_host host;
    lt_host_detect(&host);
    lt_store_backend be;
    lt_store *s;
    ASSERT_EQ(lt_store_backend_file(&be, path), LT_OK);
    ASSERT_EQ(lt_store_open(&s, &be, NULL), LT_OK);
    lt_config_entry e = lt_test_entry("matvec", key, host.host_class, text);
    ASSERT_EQ(lt_store_put(s, &e), LT_OK);
    ASSERT_EQ(lt_store_save(s), LT_OK);
    lt_store_close(s);
    ASSERT_EQ(lt_store_backend_file(&be, path), LT_OK);
    ASSERT_EQ(lt_store_open(&s, &be, NULL), LT_OK); /* what a new process reads */

    FILE *quiet = fopen("/dev/null", "w");
    lt_run_opts ro = {.store = s, .telemetry = LT_RUN_TEL_KAFKA, .tune_online = true,
                      .explore_share = 0.5, .model_name = "stories260K", .log = quiet,
                      .optimizer_log = quiet};
    ro.tel.window_tokens = 8;
    lt_run *run;
    ASSERT_EQ(lt_run_open(&run, l, pool, &ro), LT_OK);
    lt_store_close(s); /* the run needs it no more */
    if (lt_test_failures) return lt_test_finish();
    lt_run_state rs;
    lt_run_info(run, &rs);
    ASSERT_EQ(rs.warm_applied, 1);
    ASSERT_EQ(rs.warm_refused, 0);
    ASSERT_TRUE(rs.embedded && rs.online && rs.optimizer && rs.tel);
    lt_params now;
    ASSERT_EQ(lt_tuning_get(t, "matvec", key, &now), LT_OK);
    ASSERT_EQ(now.v[0], rpt);
    lt_program *dec;
    ASSERT_EQ(lt_llama_program(l, 1, &dec), LT_OK);
    const lt_call *cls = lt_program_call(dec, lt_program_n_nodes(dec) - 1);
    ASSERT_EQ(cls->params.v[0], rpt); /* on the call before the first token */

    /* generations until the optimizer has run a trial here (bounded) */
    lt_sampler *smp;
    ASSERT_EQ(lt_sampler_init(&smp, m->cfg.vocab_size, 0.0f, 1.0f, 1), LT_OK);
    const int32_t prompt[2] = {1, 403};
    lt_gen_opts go = {.n_new = 200, .stop_token = -1};
    lt_online_stats st = {0};
    const uint64_t t0 = lt_now_ns();
    int gens = 0;
    while (st.trials < 1 && lt_now_ns() - t0 < 60ull * 1000000000ull) {
        lt_gen_stats gs;
        ASSERT_EQ(lt_run_generate(run, smp, prompt, 2, &go, NULL, NULL, &gs), LT_OK);
        ASSERT_EQ(gs.n_generated, 200);
        lt_online_stats_get(rs.online, &st);
        gens++;
    }
    ASSERT_TRUE(st.trials >= 1);
    ASSERT_TRUE(st.received >= 1 && st.rejected == 0);

    /* more generations until a trial of the prefill steps' thread count has
     * run its phases, one per prompt (bounded); the caller's own prefill
     * callback still sees every prefill batch */
    go.n_new = 40;
    go.on_prefill = count_prefill;
    int prefills = 0;
    go.prefill_user = &prefills;
    int more = 0;
    const uint64_t t1 = lt_now_ns();
    while (st.trial_prefills < 2 && lt_now_ns() - t1 < 90ull * 1000000000ull) {
        lt_gen_stats gs;
        ASSERT_EQ(lt_run_generate(run, smp, prompt, 2, &go, NULL, NULL, &gs), LT_OK);
        lt_online_stats_get(rs.online, &st);
        more++;
    }
    ASSERT_EQ(prefills, more);
    ASSERT_TRUE(st.trial_prefills >= 2);
    printf("%d more generations: %lld prefill steps in trials\n", more,
           (long long)st.trial_prefills);
    lt_run_end(run);
    lt_optimizer_run_info ri;
    ASSERT_EQ(lt_optimizer_run_info_get(rs.optimizer, rs.run_id, &ri), LT_OK);
    ASSERT_TRUE(ri.trials >= 1 && ri.windows >= 3);
    printf("%d generations: %lld trials, %lld controls; the optimizer saw %lld windows\n", gens,
           (long long)st.trials, (long long)st.received, (long long)ri.windows);
    lt_tel_stats ts;
    lt_run_close_stats(run, &ts);
    ASSERT_TRUE(ts.sink.emitted > 0 && ts.sink.failed == 0);

    fclose(quiet);
    unlink(path);
    lt_sampler_free(smp);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return lt_test_finish();
}
