/* Against the real broker: stages with a fixed share of the partitions
 * (lt_stage_opts.fixed_members, what the embedded broker's own workers use)
 * take exactly the partitions p % members == index without a group join,
 * read every record of theirs once and none of the other's, commit their
 * offsets so that a stage opened again in the same group starts after
 * them, and a share that cannot be is refused. */
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "kafka_test.h"
#include "looptune/kafka.h"
#include "test.h"

enum { PARTS = 5, PER = 7 };

static const char *brokers;
static char topic[128], group[128];

/* n records "p<partition>-<i>" into partition p, i from first */
static void produce_to(int32_t p, int first, int n) {
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    ASSERT_EQ(rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, sizeof err),
              RD_KAFKA_CONF_OK);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ASSERT_TRUE(rk != NULL);
    if (!rk) return;
    for (int i = first; i < first + n; i++) {
        char v[32];
        int len = snprintf(v, sizeof v, "p%d-%d", (int)p, i);
        ASSERT_EQ(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(p),
                                    RD_KAFKA_V_VALUE(v, (size_t)len),
                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                  RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    ASSERT_EQ(rd_kafka_flush(rk, 15000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(rk);
}

static lt_stage *open_share(int index, int members) {
    lt_stage *s = NULL;
    lt_stage_opts so = {.conn = {.brokers = brokers}, .group = group, .topic = topic,
                        .fixed_members = members, .fixed_index = index};
    ASSERT_EQ(lt_stage_open(&s, &so), LT_OK);
    return s;
}

/* Polls s until want records came (or 20 s passed): counts seen[p][i],
 * commits each partition's next offset. Returns the records read. */
static int drain(lt_stage *s, int want, int seen[PARTS][2 * PER]) {
    int got = 0;
    int64_t next[PARTS];
    for (int p = 0; p < PARTS; p++) next[p] = -1;
    const uint64_t deadline = lt_now_ns() + 20000000000ull;
    while (got < want && lt_now_ns() < deadline) {
        lt_record r;
        if (lt_stage_poll(s, 200, &r) != 1) continue;
        int p, i;
        char v[32];
        snprintf(v, sizeof v, "%.*s", (int)r.len, (const char *)r.value);
        ASSERT_EQ(sscanf(v, "p%d-%d", &p, &i), 2);
        ASSERT_EQ(p, (int)r.partition);
        if (p >= 0 && p < PARTS && i >= 0 && i < 2 * PER) seen[p][i]++;
        next[r.partition] = r.offset + 1;
        got++;
    }
    lt_stage_offset offs[PARTS];
    size_t n = 0;
    for (int p = 0; p < PARTS; p++)
        if (next[p] >= 0) offs[n++] = (lt_stage_offset){.partition = p, .offset = next[p]};
    if (n) ASSERT_EQ(lt_stage_commit(s, NULL, 0, offs, n), LT_OK);
    return got;
}

static void test_shares(void) {
    lt_stage *a = open_share(0, 2), *b = open_share(1, 2);
    if (!a || !b) return;
    for (int p = 0; p < PARTS; p++) {
        ASSERT_EQ(lt_stage_owns(a, p), p % 2 == 0);
        ASSERT_EQ(lt_stage_owns(b, p), p % 2 == 1);
    }
    for (int p = 0; p < PARTS; p++) produce_to(p, 0, PER);
    static int sa[PARTS][2 * PER], sb[PARTS][2 * PER];
    ASSERT_EQ(drain(a, 3 * PER, sa), 3 * PER); /* partitions 0, 2, 4 */
    ASSERT_EQ(drain(b, 2 * PER, sb), 2 * PER); /* 1, 3 */
    for (int p = 0; p < PARTS; p++)
        for (int i = 0; i < PER; i++) {
            ASSERT_EQ(sa[p][i], p % 2 == 0 ? 1 : 0);
            ASSERT_EQ(sb[p][i], p % 2 == 1 ? 1 : 0);
        }
    /* nothing more for either */
    lt_record r;
    ASSERT_EQ(lt_stage_poll(a, 500, &r), 0);
    ASSERT_EQ(lt_stage_poll(b, 500, &r), 0);
    lt_stage_close(a);
    lt_stage_close(b);

    /* the whole topic to one member now: it starts after the committed
     * offsets, so it reads only the records produced since */
    for (int p = 0; p < PARTS; p++) produce_to(p, PER, 2);
    lt_stage *one = open_share(0, 1);
    if (!one) return;
    for (int p = 0; p < PARTS; p++) ASSERT_TRUE(lt_stage_owns(one, p));
    static int so[PARTS][2 * PER];
    ASSERT_EQ(drain(one, 2 * PARTS, so), 2 * PARTS);
    for (int p = 0; p < PARTS; p++)
        for (int i = 0; i < 2 * PER; i++) ASSERT_EQ(so[p][i], i >= PER && i < PER + 2 ? 1 : 0);
    ASSERT_EQ(lt_stage_poll(one, 500, &r), 0);
    lt_stage_close(one);
}

static void test_bad_share(void) {
    lt_stage *s = NULL;
    lt_stage_opts so = {.conn = {.brokers = brokers}, .group = group, .topic = topic,
                        .fixed_members = 2, .fixed_index = 2};
    ASSERT_EQ(lt_stage_open(&s, &so), LT_EINVAL);
    ASSERT_TRUE(s == NULL);
    ASSERT_TRUE(strstr(lt_errmsg(), "member 2 of 2") != NULL);
    /* a topic that does not exist: a clear error, no hang */
    so.fixed_index = 0;
    so.topic = "lt-no-such-topic-fixed";
    ASSERT_EQ(lt_stage_open(&s, &so), LT_ENOTFOUND);
    ASSERT_TRUE(strstr(lt_errmsg(), "lt-no-such-topic-fixed") != NULL);
}

int main(void) {
    brokers = kt_require_bootstrap();
    kt_unique(topic, sizeof topic, "lt-stage-fixed");
    kt_unique(group, sizeof group, "lt-stage-fixed-g");
    lt_kafka_admin *admin = NULL;
    lt_kafka_conn conn = {.brokers = brokers};
    ASSERT_EQ(lt_kafka_admin_open(&admin, &conn), LT_OK);
    lt_topic_spec spec = {.name = topic, .partitions = PARTS, .replication = 1};
    ASSERT_EQ(lt_kafka_admin_create_topics(admin, &spec, 1, 15000, NULL), LT_OK);
    lt_kafka_admin_close(admin);
    test_shares();
    test_bad_share();
    return lt_test_finish();
}
