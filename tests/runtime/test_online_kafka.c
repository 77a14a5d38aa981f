/* The run side's control path through Kafka (the embedded broker): a
 * control produced before the run started listening is not applied (it
 * follows the topic from its end); one produced after is applied at the next
 * token boundary to every matvec key of the runtime, exactly once; garbage on the topic is refused. Also run
 * under ThreadSanitizer (listener thread against the stepping thread). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "looptune/runtime.h"
#include "model_test.h"
#include "test.h"

static void send_control(lt_producer *prod, int32_t unroll) {
    Looptune__Envelope env;
    lt_envelope_init(&env);
    Looptune__Control c = LOOPTUNE__CONTROL__INIT;
    const char *names[] = {"rows_per_task", "unroll", "k_block", "prefetch", "act_int16",
                           "act_int8"};
    int32_t vals[] = {16, unroll, 0, 1024, 1, 1};
    Looptune__Param prm[6], *pp[6];
    for (int i = 0; i < 6; i++) {
        looptune__param__init(&prm[i]);
        prm[i].name = (char *)names[i];
        prm[i].value = vals[i];
        pp[i] = &prm[i];
    }
    c.run_id = "run-k";
    c.kernel = "matvec";
    c.params = pp;
    c.n_params = 6;
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CONTROL;
    env.control = &c;
    ASSERT_EQ(lt_producer_send_envelope(prod, NULL, &env), LT_OK);
    ASSERT_EQ(lt_producer_flush(prod, 10000), LT_OK);
}

/* unroll in force on every matvec key of the runtime (-1: they differ). */
static int32_t unroll_of(lt_tuning *t) {
    int32_t u = -2;
    for (int i = 0; i < lt_tuning_n_keys(t); i++) {
        const char *name, *key;
        lt_tuning_key(t, i, &name, &key);
        if (strcmp(name, "matvec")) continue;
        lt_params p;
        ASSERT_EQ(lt_tuning_get(t, name, key, &p), LT_OK);
        u = u == -2 || u == p.v[1] ? p.v[1] : -1;
    }
    return u;
}

int main(void) {
    lt_devbroker *dev;
    ASSERT_EQ(lt_devbroker_open(&dev, 1, 0), LT_OK);
    ASSERT_EQ(lt_devbroker_create_topic(dev, "t.control", 1), LT_OK);
    lt_kafka_conn conn = {.brokers = lt_devbroker_bootstrap(dev)};
    lt_producer *prod;
    lt_producer_opts po = {.conn = conn, .topic = "t.control", .linger_ms = -1};
    ASSERT_EQ(lt_producer_open(&prod, &po), LT_OK);
    send_control(prod, 2); /* before the run listens: never applied */

    lt_model *m = lt_test_stories260k();
    if (!m) return lt_test_finish();
    lt_pool *pool;
    lt_llama *l = lt_test_llama(m, 1, 16, 4, &pool);
    if (!l) return lt_test_finish();
    lt_tuning *t = lt_llama_tuning(l);
    FILE *devnull = fopen("/dev/null", "w");
    lt_online *o;
    lt_online_opts oo = {.conn = conn, .topic = "t.control", .run_id = "run-k", .tuning = t,
                         .log = devnull};
    ASSERT_EQ(lt_online_open(&o, &oo), LT_OK);
    ASSERT_EQ(lt_producer_send(prod, NULL, 0, "\x0a\x05zz", 4), LT_OK); /* garbage */
    send_control(prod, 4);
    lt_online_stats st = {0};
    for (int i = 0; i < 1500 && st.applied + st.rejected < 2; i++) {
        nanosleep(&(struct timespec){0, 10000000}, NULL);
        lt_online_step(o);
        lt_online_stats_get(o, &st);
    }
    /* a few more boundaries: nothing else arrives */
    for (int i = 0; i < 30; i++) {
        nanosleep(&(struct timespec){0, 10000000}, NULL);
        lt_online_step(o);
    }
    lt_online_stats_get(o, &st);
    ASSERT_EQ(st.applied, 1);
    ASSERT_EQ(st.rejected, 1);
    ASSERT_EQ(st.received, 2);
    ASSERT_EQ(unroll_of(t), 4);
    lt_online_close(o);
    lt_producer_close(prod);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    fclose(devnull);
    lt_devbroker_close(dev);
    return lt_test_finish();
}
