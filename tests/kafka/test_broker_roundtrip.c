/* Against the real broker: envelopes of every kind go through a producer,
 * come back through a consumer group, decode, and equal what was sent field
 * by field. Records with one key share a partition; committed offsets hold
 * (a later member of the group gets nothing already consumed). A follower
 * knows how far behind the partitions' ends it is and drains to them: every
 * record produced after it opened, each once, until its callback stops it. */
#include <stdlib.h>
#include <string.h>

#include "kafka_test.h"
#include "looptune/kafka.h"
#include "samples.h"
#include "test.h"

#define PER_KIND 5
#define TOTAL (PER_KIND * SAMPLE_KINDS)
#define PARTITIONS 3

static const char *brokers;

/* Sample index of a decoded envelope, from its time_ns formula. */
static int sample_index(const Looptune__Envelope *e) {
    return (int)((e->time_ns - 1700000000000000000ull) / 1000003ull);
}

static int kind_index(const Looptune__Envelope *e) {
    for (int k = 0; k < SAMPLE_KINDS; k++)
        if (sample_case(k) == e->payload_case) return k;
    return -1;
}

static lt_consumer *open_consumer(const char *topic, const char *group) {
    lt_consumer *c = NULL;
    lt_consumer_opts co = {.conn = {.brokers = brokers}, .group = group, .topics = &topic,
                           .n_topics = 1, .from_beginning = true};
    ASSERT_EQ(lt_consumer_open(&c, &co), LT_OK);
    return c;
}

/* topic with PARTITIONS partitions on the broker */
static void create_topic(const char *topic) {
    lt_kafka_conn conn = {.brokers = brokers};
    lt_kafka_admin *a;
    ASSERT_EQ(lt_kafka_admin_open(&a, &conn), LT_OK);
    lt_topic_spec spec = {.name = topic, .partitions = PARTITIONS, .replication = 1};
    ASSERT_EQ(lt_kafka_admin_create_topics(a, &spec, 1, 15000, NULL), LT_OK);
    lt_kafka_admin_close(a);
}

static void test_round_trip(void) {
    char topic[128], group[128];
    kt_unique(topic, sizeof topic, "lt-roundtrip");
    kt_unique(group, sizeof group, "lt-group");
    lt_kafka_conn conn = {.brokers = brokers};
    create_topic(topic);

    lt_producer *p;
    lt_producer_opts po = {.conn = conn, .topic = topic};
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);
    for (int i = 0; i < PER_KIND; i++)
        for (int k = 0; k < SAMPLE_KINDS; k++) {
            sample s;
            ASSERT_EQ(lt_producer_send_envelope(p, NULL, sample_build(&s, k, i)), LT_OK);
        }
    ASSERT_EQ(lt_producer_flush(p, 30000), LT_OK);
    lt_producer_stats st;
    lt_producer_stats_get(p, &st);
    ASSERT_EQ(st.sent, TOTAL);
    ASSERT_EQ(st.delivered, TOTAL);
    ASSERT_EQ(st.dropped + st.failed, 0);
    lt_producer_close(p);

    lt_consumer *c = open_consumer(topic, group);
    int seen[SAMPLE_KINDS][PER_KIND] = {{0}};
    int got = 0, bad = 0;
    int32_t key_partition[PER_KIND]; /* partition of the run-000i records */
    for (int i = 0; i < PER_KIND; i++) key_partition[i] = -1;
    uint64_t deadline = lt_now_ns() + 60000000000ull;
    while (got < TOTAL && lt_now_ns() < deadline) {
        lt_record r;
        int rc = lt_consumer_poll(c, 1000, &r);
        ASSERT_TRUE(rc >= 0);
        if (rc <= 0) continue;
        got++;
        ASSERT_STREQ(r.topic, topic);
        Looptune__Envelope *e;
        if (lt_envelope_decode(r.value, r.len, &e) != LT_OK) {
            fprintf(stderr, "record at %d/%lld: %s\n", r.partition, (long long)r.offset,
                    lt_errmsg());
            bad++;
            continue;
        }
        int k = kind_index(e), i = sample_index(e);
        ASSERT_TRUE(k >= 0 && i >= 0 && i < PER_KIND);
        if (k < 0 || i < 0 || i >= PER_KIND) {
            lt_envelope_free(e);
            continue;
        }
        seen[k][i]++;
        sample s;
        char why[512];
        bool same = sample_equal(sample_build(&s, k, i), e, why, sizeof why);
        ASSERT_TRUE(same);
        if (!same) fprintf(stderr, "kind %s sample %d: %s\n", lt_envelope_kind(e), i, why);
        /* the key is the natural one, and one key lives in one partition */
        char key[256];
        size_t kl = lt_envelope_key(e, key, sizeof key);
        ASSERT_TRUE(r.key_len == kl && memcmp(r.key, key, kl) == 0);
        if (!strncmp(key, "run-", 4)) {
            if (key_partition[i] < 0) key_partition[i] = r.partition;
            ASSERT_EQ(key_partition[i], r.partition);
        }
        ASSERT_TRUE(r.timestamp_ms > 0);
        lt_envelope_free(e);
    }
    ASSERT_EQ(got, TOTAL);
    ASSERT_EQ(bad, 0);
    for (int k = 0; k < SAMPLE_KINDS; k++)
        for (int i = 0; i < PER_KIND; i++) ASSERT_EQ(seen[k][i], 1);
    ASSERT_EQ(lt_consumer_commit(c), LT_OK);
    lt_consumer_close(c);

    /* Same group, after the commit: nothing old comes back; a new record does. */
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);
    c = open_consumer(topic, group);
    lt_record r;
    int rc = 0, extra = 0;
    for (int t = 0; t < 4; t++) { /* time to join the group and fetch */
        rc = lt_consumer_poll(c, 1000, &r);
        if (rc > 0) extra++;
    }
    ASSERT_EQ(extra, 0);
    sample s;
    ASSERT_EQ(lt_producer_send_envelope(p, NULL, sample_build(&s, 2, 42)), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    lt_producer_close(p);
    deadline = lt_now_ns() + 30000000000ull;
    while ((rc = lt_consumer_poll(c, 500, &r)) == 0 && lt_now_ns() < deadline) {
    }
    ASSERT_EQ(rc, 1);
    if (rc == 1) {
        Looptune__Envelope *e;
        ASSERT_EQ(lt_envelope_decode(r.value, r.len, &e), LT_OK);
        ASSERT_EQ(sample_index(e), 42);
        lt_envelope_free(e);
    }
    lt_consumer_close(c);
}

static int count_record(void *ctx, const lt_record *rec) {
    int *n = ctx;
    (*n)++;
    return rec->value && rec->len ? 0 : -1;
}

static int stop_at_three(void *ctx, const lt_record *rec) {
    (void)rec;
    return ++*(int *)ctx == 3;
}

static void produce_samples(const char *topic, int n) {
    lt_producer *p;
    lt_producer_opts po = {.conn = {.brokers = brokers}, .topic = topic};
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);
    for (int i = 0; i < n; i++) {
        sample s;
        ASSERT_EQ(lt_producer_send_envelope(p, NULL, sample_build(&s, i % SAMPLE_KINDS, i)), LT_OK);
    }
    ASSERT_EQ(lt_producer_flush(p, 30000), LT_OK);
    lt_producer_close(p);
}

static void test_follower_drain(void) {
    char topic[128];
    kt_unique(topic, sizeof topic, "lt-follow");
    lt_kafka_conn conn = {.brokers = brokers};
    create_topic(topic);
    produce_samples(topic, 4); /* before the follower: never seen */

    lt_follower *f;
    ASSERT_EQ(lt_follower_open(&f, &conn, topic, 15000), LT_OK);
    ASSERT_EQ(lt_follower_behind(f, 5000), 0);
    produce_samples(topic, TOTAL);
    ASSERT_EQ(lt_follower_behind(f, 5000), TOTAL);
    int n = 0;
    lt_follower_drain(f, 20000, count_record, &n);
    ASSERT_EQ(n, TOTAL);
    ASSERT_EQ(lt_follower_behind(f, 5000), 0);

    produce_samples(topic, 10); /* a callback that stops it stops it */
    n = 0;
    lt_follower_drain(f, 20000, stop_at_three, &n);
    ASSERT_EQ(n, 3);
    ASSERT_TRUE(lt_follower_behind(f, 5000) > 0);
    lt_follower_close(f);
}

int main(void) {
    brokers = kt_require_bootstrap();
    test_round_trip();
    test_follower_drain();
    return lt_test_finish();
}
