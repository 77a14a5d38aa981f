/* Fault injection on the embedded broker (librdkafka's mock cluster): the
 * broker goes down mid-production (sending never blocks, drops are counted,
 * production resumes when it is back, nothing is lost or duplicated that
 * was accepted), injected request errors are retried or counted, and a
 * wrong bootstrap address gives warnings and bounded waits, not a hang. */
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "kafka_test.h"
#include "looptune/kafka.h"
#include "test.h"

enum { API_PRODUCE = 0 }; /* Kafka protocol ApiKey of ProduceRequest */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int send_seq(lt_producer *p, uint32_t seq) {
    char v[32];
    int n = snprintf(v, sizeof v, "rec-%08u", seq);
    return lt_producer_send(p, "k", 1, v, (size_t)n);
}

/* Reads every record of topic from the beginning; fills seen[seq] counts. */
static int64_t consume_all(const char *brokers, const char *topic, int64_t want, uint8_t *seen,
                           uint32_t max_seq) {
    char group[96];
    kt_unique(group, sizeof group, "faults");
    lt_consumer *c;
    lt_consumer_opts co = {.conn = {.brokers = brokers}, .group = group, .topics = &topic,
                           .n_topics = 1, .from_beginning = true};
    if (lt_consumer_open(&c, &co)) return -1;
    int64_t got = 0;
    uint64_t deadline = lt_now_ns() + 30000000000ull;
    while (got < want && lt_now_ns() < deadline) {
        lt_record r;
        if (lt_consumer_poll(c, 500, &r) != 1) continue;
        unsigned seq;
        char v[32];
        snprintf(v, sizeof v, "%.*s", (int)r.len, (const char *)r.value);
        if (sscanf(v, "rec-%u", &seq) == 1 && seq < max_seq && seen[seq] < 255) seen[seq]++;
        got++;
    }
    lt_consumer_close(c);
    return got;
}

static void test_broker_down(void) {
    lt_devbroker *b;
    ASSERT_EQ(lt_devbroker_open(&b, 1, 0), LT_OK);
    const char *brokers = lt_devbroker_bootstrap(b);
    rd_kafka_mock_cluster_t *mc = lt_devbroker_cluster(b);
    lt_kafka_props *props;
    lt_kafka_props_init(&props);
    /* come back quickly once the broker is up again */
    lt_kafka_props_parse(props, "reconnect.backoff.max.ms=200");
    lt_kafka_props_parse(props, "message.timeout.ms=60000");
    lt_producer *p;
    lt_producer_opts po = {.conn = {.brokers = brokers, .props = props}, .topic = "faults",
                           .queue_records = 1000, .linger_ms = 5};
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);

    enum { WARM = 200, DOWN = 5000, AFTER = 300, MAX_SEQ = WARM + DOWN + AFTER };
    uint32_t seq = 0;
    for (int i = 0; i < WARM; i++) ASSERT_EQ(send_seq(p, seq++), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);

    ASSERT_EQ(rd_kafka_mock_broker_set_down(mc, -1), RD_KAFKA_RESP_ERR_NO_ERROR);
    uint64_t *dt = malloc(DOWN * sizeof *dt);
    int accepted = 0, dropped = 0;
    for (int i = 0; i < DOWN; i++) {
        uint64_t t0 = lt_now_ns();
        int rc = send_seq(p, seq);
        dt[i] = lt_now_ns() - t0;
        if (rc == LT_OK) accepted++, seq++;
        else if (rc == LT_PRODUCER_DROPPED) dropped++, seq++;
    }
    qsort(dt, DOWN, sizeof *dt, cmp_u64);
    double med_us = (double)dt[DOWN / 2] / 1e3, p999_us = (double)dt[DOWN * 999 / 1000] / 1e3,
           max_us = (double)dt[DOWN - 1] / 1e3;
    printf("broker down: %d sends, %d queued, %d dropped; per call: median %.2f us, p99.9 "
           "%.2f us, max %.1f us\n", DOWN, accepted, dropped, med_us, p999_us, max_us);
    /* never waits for the broker: far below 1 ms; the max allows for the
     * scheduler on a shared 2-CPU machine, not for waiting on I/O */
    ASSERT_TRUE(p999_us < 1000.0);
    ASSERT_TRUE(max_us < 50000.0);
    ASSERT_EQ(accepted + dropped, DOWN);
    ASSERT_TRUE(dropped >= DOWN - 1000); /* the local queue holds 1000 */
    lt_producer_stats st;
    lt_producer_stats_get(p, &st);
    ASSERT_EQ(st.dropped, dropped);
    ASSERT_EQ(st.delivered, WARM);
    free(dt);

    /* back up: what was queued is delivered, new records flow again */
    ASSERT_EQ(rd_kafka_mock_broker_set_up(mc, -1), RD_KAFKA_RESP_ERR_NO_ERROR);
    ASSERT_EQ(lt_producer_flush(p, 30000), LT_OK);
    for (int i = 0; i < AFTER; i++) ASSERT_EQ(send_seq(p, seq++), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    lt_producer_stats_get(p, &st);
    ASSERT_EQ(st.delivered, WARM + accepted + AFTER);
    ASSERT_EQ(st.failed, 0);
    ASSERT_EQ(st.in_queue, 0);
    ASSERT_TRUE(st.errors > 0); /* the outage was reported */
    printf("after recovery: %lld delivered, %lld dropped, %lld failed, %lld client errors (last: "
           "%s)\n", (long long)st.delivered, (long long)st.dropped, (long long)st.failed,
           (long long)st.errors, st.last_error);
    lt_producer_close(p);

    /* the broker holds exactly the accepted records, each once */
    uint8_t *seen = calloc(MAX_SEQ, 1);
    int64_t total = WARM + accepted + AFTER;
    ASSERT_EQ(consume_all(brokers, "faults", total, seen, MAX_SEQ), total);
    int dup = 0, present = 0;
    for (int s = 0; s < MAX_SEQ; s++) {
        present += seen[s] > 0;
        dup += seen[s] > 1;
    }
    ASSERT_EQ(present, total);
    ASSERT_EQ(dup, 0);
    for (int s = 0; s < WARM; s++) ASSERT_EQ(seen[s], 1);
    free(seen);
    lt_kafka_props_free(props);
    lt_devbroker_close(b);
}

static void test_request_errors(void) {
    lt_devbroker *b;
    ASSERT_EQ(lt_devbroker_open(&b, 1, 0), LT_OK);
    rd_kafka_mock_cluster_t *mc = lt_devbroker_cluster(b);
    lt_producer *p;
    lt_producer_opts po = {.conn = {.brokers = lt_devbroker_bootstrap(b)}, .topic = "errs"};
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);
    ASSERT_EQ(send_seq(p, 0), LT_OK); /* learn the topic before the errors */
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);

    /* retriable errors on the next three produce requests: retried, all delivered */
    rd_kafka_mock_broker_push_request_error_rtts(
        mc, 1, API_PRODUCE, 3, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, 0,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, 0, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, 0);
    for (uint32_t i = 1; i <= 50; i++) ASSERT_EQ(send_seq(p, i), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 20000), LT_OK);
    size_t left = 99;
    rd_kafka_mock_broker_error_stack_cnt(mc, 1, API_PRODUCE, &left);
    ASSERT_EQ(left, 0); /* every injected error was met */
    lt_producer_stats st;
    lt_producer_stats_get(p, &st);
    ASSERT_EQ(st.delivered, 51);
    ASSERT_EQ(st.failed, 0);
    lt_producer_close(p);

    /* a permanent error: the record fails and is counted; the next one goes */
    lt_kafka_props *props;
    lt_kafka_props_init(&props);
    lt_kafka_props_parse(props, "enable.idempotence=false");
    po.conn.props = props;
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);
    ASSERT_EQ(send_seq(p, 100), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    rd_kafka_mock_broker_push_request_error_rtts(mc, 1, API_PRODUCE, 1,
                                                 RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, 0);
    ASSERT_EQ(send_seq(p, 101), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    ASSERT_EQ(send_seq(p, 102), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    lt_producer_stats_get(p, &st);
    ASSERT_EQ(st.failed, 1);
    ASSERT_EQ(st.delivered, 2);
    lt_producer_close(p);
    lt_kafka_props_free(props);
    lt_devbroker_close(b);
}

static void test_wrong_bootstrap(void) {
    const char *nowhere = "127.0.0.1:1"; /* nothing listens on port 1 */
    uint64_t t0 = lt_now_ns();
    lt_producer *p;
    lt_producer_opts po = {.conn = {.brokers = nowhere}, .topic = "t", .close_timeout_ms = 1000};
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);
    uint64_t worst = 0;
    for (uint32_t i = 0; i < 10; i++) {
        uint64_t s = lt_now_ns();
        ASSERT_EQ(send_seq(p, i), LT_OK);
        if (lt_now_ns() - s > worst) worst = lt_now_ns() - s;
    }
    /* no call waits for the unreachable broker (that would take seconds); the
     * bound allows for a scheduler preemption on a shared 2-CPU machine */
    ASSERT_TRUE(worst < 50000000);
    lt_producer_stats st;
    for (int i = 0; i < 100; i++) { /* the client says so within seconds */
        lt_producer_stats_get(p, &st);
        if (st.errors > 0) break;
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    ASSERT_TRUE(st.errors > 0);
    ASSERT_TRUE(strstr(st.last_error, "127.0.0.1:1") != NULL);
    printf("wrong bootstrap: producer error: %s\n", st.last_error);
    ASSERT_EQ(lt_producer_flush(p, 300), LT_ETIMEOUT);
    ASSERT_TRUE(strstr(lt_errmsg(), "10 records not delivered") != NULL);
    lt_producer_close(p);
    double producer_s = (double)(lt_now_ns() - t0) / 1e9;

    t0 = lt_now_ns();
    const char *topic = "t";
    lt_consumer *c;
    lt_consumer_opts co = {.conn = {.brokers = nowhere}, .group = "g", .topics = &topic,
                           .n_topics = 1};
    ASSERT_EQ(lt_consumer_open(&c, &co), LT_OK);
    lt_record r;
    ASSERT_EQ(lt_consumer_poll(c, 1500, &r), 0);
    lt_consumer_close(c);
    double consumer_s = (double)(lt_now_ns() - t0) / 1e9;

    t0 = lt_now_ns();
    lt_kafka_admin *a;
    lt_kafka_conn conn = {.brokers = nowhere};
    ASSERT_EQ(lt_kafka_admin_open(&a, &conn), LT_OK);
    lt_topic_spec spec = {.name = "t", .partitions = 1, .replication = 1};
    int rc = lt_kafka_admin_create_topics(a, &spec, 1, 1500, NULL);
    ASSERT_TRUE(rc == LT_ETIMEOUT || rc == LT_EKAFKA);
    printf("wrong bootstrap: admin: %s\n", lt_errmsg());
    ASSERT_TRUE(strstr(lt_errmsg(), "127.0.0.1:1") != NULL);
    lt_kafka_admin_close(a);
    double admin_s = (double)(lt_now_ns() - t0) / 1e9;
    printf("wrong bootstrap: producer %.2f s, consumer %.2f s, admin %.2f s\n", producer_s,
           consumer_s, admin_s);
    ASSERT_TRUE(producer_s < 10 && consumer_s < 10 && admin_s < 10);
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;
    bind(fd, (struct sockaddr *)&sin, sizeof sin);
    getsockname(fd, (struct sockaddr *)&sin, &len);
    close(fd);
    return ntohs(sin.sin_port);
}

static void test_devbroker_port(void) {
    int port = free_port();
    lt_devbroker *b;
    ASSERT_EQ(lt_devbroker_open(&b, 3, port), LT_OK);
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    ASSERT_STREQ(lt_devbroker_bootstrap(b), want);
    lt_producer *p;
    lt_producer_opts po = {.conn = {.brokers = want}, .topic = "relayed"};
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);
    for (uint32_t i = 0; i < 40; i++) ASSERT_EQ(send_seq(p, i), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    lt_producer_close(p);
    uint8_t seen[40] = {0};
    ASSERT_EQ(consume_all(want, "relayed", 40, seen, 40), 40);
    for (int i = 0; i < 40; i++) ASSERT_EQ(seen[i], 1);

    /* the port is taken now: a second broker on it says which port */
    lt_devbroker *b2 = NULL;
    ASSERT_EQ(lt_devbroker_open(&b2, 1, port), LT_EIO);
    ASSERT_TRUE(strstr(lt_errmsg(), want) != NULL);
    ASSERT_TRUE(b2 == NULL);
    ASSERT_EQ(lt_devbroker_open(&b2, 0, 0), LT_EINVAL);
    lt_devbroker_close(b);
}

int main(void) {
    test_broker_down();
    test_request_errors();
    test_wrong_bootstrap();
    test_devbroker_port();
    return lt_test_finish();
}
