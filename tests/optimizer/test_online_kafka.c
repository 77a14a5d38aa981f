/* The run side's control path through Kafka (the embedded broker): a
 * control produced before the run started listening is not applied (it
 * follows the topic from its end); one produced after is applied at the next
 * token boundary, exactly once; garbage on the topic is refused. Also run
 * under ThreadSanitizer (listener thread against the stepping thread). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "looptune/optimizer.h"
#include "test.h"

enum { ROWS = 64, COLS = 128 };
static float W[ROWS * COLS], X[COLS];

static lt_program *build(void) {
    lt_program *p;
    LT_ASSERT(lt_program_init(&p, "mv") == LT_OK);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, ROWS, 1, 1, 1, NULL);
    int iy = lt_program_add_buffer(p, "y", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, COLS, 1, 1, 1, X);
    int ix = lt_program_add_buffer(p, "x", LT_BUF_WEIGHT, &t);
    lt_tensor_init(&t, LT_F32, COLS, ROWS, 1, 1, W);
    int iw = lt_program_add_buffer(p, "w", LT_BUF_WEIGHT, &t);
    lt_program_add_node(p, LT_K_MATVEC, (int[]){iy, iw, ix}, 3, NULL, NULL, "mv");
    LT_ASSERT(lt_program_finalize(p) == LT_OK);
    return p;
}

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

static int32_t unroll_of(const lt_program *p) {
    lt_node_info ni;
    lt_program_node(p, 0, &ni);
    return ni.params.v[1];
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

    lt_program *p = build();
    FILE *devnull = fopen("/dev/null", "w");
    lt_online *o;
    lt_online_opts oo = {.conn = conn, .topic = "t.control", .run_id = "run-k", .program = p,
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
    ASSERT_EQ(unroll_of(p), 4);
    lt_online_close(o);
    lt_producer_close(prod);
    lt_program_free(p);
    fclose(devnull);
    lt_devbroker_close(dev);
    return lt_test_finish();
}
