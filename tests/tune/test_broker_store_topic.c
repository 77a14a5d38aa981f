/* The config store on a real broker's compacted topic: a saved store reads
 * back identical (every field) from one or several partitions; a better
 * configuration published for one key replaces the old one on reload; a
 * tombstone deletes its key; garbage, a Config outside its kernel's space and
 * a Config under another record key are skipped and counted; a missing topic
 * is an empty store and is not created by reading; save creates the topic
 * with cleanup.policy=compact; the reader stops at the watermarks of its
 * start. */
#include <string.h>

#include "kafka/kafka_test.h"
#include "looptune/kafka.h"
#include "looptune/tune.h"
#include "store_test.h"
#include "test.h"

static const char *bootstrap;

static lt_config_entry entry(const char *kernel, const char *shape, const char *host,
                             const char *params, double med, int64_t trials, bool converged) {
    lt_config_entry e = lt_test_entry(kernel, shape, host, params);
    e.median_ns = med;
    e.samples = 16 + trials % 7;
    e.speedup = 1.0 + med / 1e7;
    e.trials = trials;
    e.converged = converged;
    return e;
}

enum { N_ENTRIES = 5 };
static lt_config_entry entries[N_ENTRIES];

static void make_entries(void) {
    /* canonical: every parameter of the kernel's space, in its order, as a
     * record read back gives them (tok_chunk_kb at its default on a decode key) */
    const char *mv = "rows_per_task=64,unroll=2,k_block=0,prefetch=4096,act_int16=1,act_int8=1,"
                     "tok_chunk_kb=256";
    entries[0] = entry("matvec", "q8_0:288x288:decode", "cpuA:avx512:2c", mv, 12345.678, 24, 0);
    entries[1] = entry("matvec", "q8_0:288x288:decode", "cpuB:avx2:8c",
                       "rows_per_task=8,unroll=1,k_block=256,prefetch=0,"
                       "act_int16=1,act_int8=1,tok_chunk_kb=256", 999.25, 3,
                       1);
    entries[2] = entry("matvec", "q8_0:768x288:decode", "cpuA:avx512:2c", mv, 45678.5, 4000000000,
                       1);
    entries[3] = entry("matmul", "f32:288x288:prefill", "cpuA:avx512:2c",
                       "n_block=12,m_block=32,k_block=64", 3.5e6, 0, 0);
    entries[4] = entry("looped", "llama:d288:h768:l6:q8_0:t2:decode", "cpuA:avx512:2c",
                       "tiles_per_thread=8,prefetch_kb=64,sync=0,min_task_kb=32", 7.25e5, 17, 0);
}

static void expect_same(const lt_config_entry *a, const lt_config_entry *b) {
    ASSERT_STREQ(a->kernel, b->kernel);
    ASSERT_STREQ(a->shape, b->shape);
    ASSERT_STREQ(a->host, b->host);
    ASSERT_STREQ(a->params, b->params);
    ASSERT_TRUE(a->median_ns == b->median_ns);
    ASSERT_EQ(a->samples, b->samples);
    ASSERT_TRUE(a->speedup == b->speedup);
    ASSERT_EQ(a->trials, b->trials);
    ASSERT_EQ(a->converged, b->converged);
}

static lt_store *open_topic(const char *topic, int *skipped) {
    lt_kafka_conn conn = {.brokers = bootstrap};
    lt_store_backend be;
    if (lt_store_backend_topic(&be, &conn, topic, 15000)) return NULL;
    lt_store *s = NULL;
    if (lt_store_open(&s, &be, skipped)) {
        fprintf(stderr, "open %s: %s\n", topic, lt_errmsg());
        return NULL;
    }
    return s;
}

/* Every entry of want is in s, identical, and s has nothing else. */
static void expect_store(const lt_store *s, const lt_config_entry *want, int n) {
    ASSERT_EQ(lt_store_count(s), n);
    for (int i = 0; i < n; i++) {
        const lt_config_entry *g = lt_store_get(s, want[i].kernel, want[i].shape, want[i].host);
        ASSERT_TRUE(g != NULL);
        if (g) expect_same(g, &want[i]);
    }
}

static lt_producer *producer(const char *topic) {
    lt_producer *p = NULL;
    lt_producer_opts po = {.conn = {.brokers = bootstrap}, .topic = topic, .linger_ms = -1};
    LT_ASSERT(lt_producer_open(&p, &po) == LT_OK);
    return p;
}

static bool topic_exists(lt_kafka_admin *a, const char *topic, char *policy, size_t n) {
    lt_topic_info info;
    if (lt_kafka_admin_describe_topic(a, topic, 10000, &info) != LT_OK) return false;
    const char *cp = lt_kafka_props_get(info.configs, "cleanup.policy");
    snprintf(policy, n, "%s", cp ? cp : "(none)");
    lt_kafka_props_free(info.configs);
    return true;
}

static void test_store_topic(lt_kafka_admin *admin) {
    char topic[128], policy[64];
    kt_unique(topic, sizeof topic, "lt-store");
    strcat(topic, ".configs");

    /* missing: empty, and reading does not create it */
    int skipped = -1;
    lt_store *s = open_topic(topic, &skipped);
    ASSERT_TRUE(s != NULL);
    if (!s) return;
    ASSERT_EQ(lt_store_count(s), 0);
    ASSERT_EQ(skipped, 0);
    ASSERT_TRUE(strstr(lt_store_name(s), topic) && strstr(lt_store_name(s), bootstrap));
    ASSERT_TRUE(!topic_exists(admin, topic, policy, sizeof policy));

    /* save creates it, compacted */
    for (int i = 0; i < N_ENTRIES; i++) ASSERT_EQ(lt_store_put(s, &entries[i]), LT_OK);
    ASSERT_EQ(lt_store_save(s), LT_OK);
    lt_store_close(s);
    ASSERT_TRUE(topic_exists(admin, topic, policy, sizeof policy));
    ASSERT_STREQ(policy, "compact");

    s = open_topic(topic, &skipped);
    ASSERT_TRUE(s != NULL);
    if (!s) return;
    ASSERT_EQ(skipped, 0);
    expect_store(s, entries, N_ENTRIES);
    lt_store_close(s);

    /* the optimizer's path: a better configuration for one key, published */
    lt_config_entry want[N_ENTRIES];
    memcpy(want, entries, sizeof want);
    snprintf(want[0].params, sizeof want[0].params, "%s",
             "rows_per_task=32,unroll=4,k_block=0,prefetch=8192,act_int16=1,act_int8=1,"
             "tok_chunk_kb=256");
    want[0].median_ns = 10000.125;
    want[0].speedup = 1.5;
    want[0].trials = 64;
    want[0].converged = true;
    lt_producer *p = producer(topic);
    ASSERT_EQ(lt_store_topic_publish(p, &want[0]), LT_OK);
    /* a tombstone for entries[1]'s key */
    char key[256];
    snprintf(key, sizeof key, "%s|%s|%s", entries[1].kernel, entries[1].shape, entries[1].host);
    ASSERT_EQ(lt_producer_send(p, key, strlen(key), NULL, 0), LT_OK);
    /* bad records: garbage; a Config outside the space under entries[2]'s
     * key (entries[2] must stay); a valid Config under another key */
    snprintf(key, sizeof key, "%s|%s|%s", entries[2].kernel, entries[2].shape, entries[2].host);
    ASSERT_EQ(lt_producer_send(p, key, strlen(key), "not a protobuf \xff\xff", 17), LT_OK);
    lt_config_msg m;
    ASSERT_EQ(lt_config_to_envelope(&entries[2], &m), LT_OK);
    m.prm[1].value = 3; /* unroll 3: not an allowed value */
    ASSERT_EQ(lt_producer_send_envelope(p, NULL, &m.env), LT_OK);
    ASSERT_EQ(lt_config_to_envelope(&entries[3], &m), LT_OK);
    ASSERT_EQ(lt_producer_send_envelope(p, "matmul|f32:1x1:prefill|cpuZ:avx2:1c", &m.env), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 15000), LT_OK);
    lt_producer_close(p);

    s = open_topic(topic, &skipped);
    ASSERT_TRUE(s != NULL);
    if (!s) return;
    ASSERT_EQ(skipped, 3);
    lt_config_entry left[N_ENTRIES - 1] = {want[0], want[2], want[3], want[4]};
    expect_store(s, left, N_ENTRIES - 1);
    ASSERT_TRUE(lt_store_get(s, entries[1].kernel, entries[1].shape, entries[1].host) == NULL);
    /* saving again republishes what is left; the deleted key stays deleted */
    ASSERT_EQ(lt_store_save(s), LT_OK);
    lt_store_close(s);
    s = open_topic(topic, &skipped);
    ASSERT_TRUE(s != NULL);
    if (!s) return;
    expect_store(s, left, N_ENTRIES - 1);
    lt_store_close(s);
}

/* A topic of several partitions, made beforehand (compacted): every
 * partition is read; the reader's span counts what was there at its start. */
static void test_partitions(lt_kafka_admin *admin) {
    char topic[128];
    kt_unique(topic, sizeof topic, "lt-store3");
    const char *compact[] = {"cleanup.policy=compact"};
    lt_topic_spec spec = {.name = topic, .partitions = 3, .replication = 1, .configs = compact,
                          .n_configs = 1};
    ASSERT_EQ(lt_kafka_admin_create_topics(admin, &spec, 1, 15000, NULL), LT_OK);
    lt_store *s = open_topic(topic, NULL);
    ASSERT_TRUE(s != NULL);
    if (!s) return;
    ASSERT_EQ(lt_store_count(s), 0);
    for (int i = 0; i < N_ENTRIES; i++) ASSERT_EQ(lt_store_put(s, &entries[i]), LT_OK);
    ASSERT_EQ(lt_store_save(s), LT_OK);
    lt_store_close(s);

    lt_kafka_conn conn = {.brokers = bootstrap};
    lt_kafka_reader *r;
    ASSERT_EQ(lt_kafka_reader_open(&r, &conn, topic, 10000), LT_OK);
    ASSERT_EQ(lt_kafka_reader_span(r), N_ENTRIES);
    /* records produced after the reader started are not part of its read */
    lt_producer *p = producer(topic);
    ASSERT_EQ(lt_store_topic_publish(p, &entries[0]), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 15000), LT_OK);
    lt_producer_close(p);
    int got = 0, rc;
    bool parts[3] = {false};
    lt_record rec;
    while ((rc = lt_kafka_reader_next(r, 10000, &rec)) == 1) {
        got++;
        if (rec.partition >= 0 && rec.partition < 3) parts[rec.partition] = true;
    }
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(got, N_ENTRIES);
    lt_kafka_reader_close(r);
    /* these five keys hash to more than one of the three partitions */
    ASSERT_TRUE(parts[0] + parts[1] + parts[2] >= 2);

    s = open_topic(topic, NULL);
    ASSERT_TRUE(s != NULL);
    if (!s) return;
    expect_store(s, entries, N_ENTRIES);
    lt_store_close(s);
}

int main(void) {
    bootstrap = kt_require_bootstrap();
    make_entries();
    lt_kafka_conn conn = {.brokers = bootstrap};
    lt_kafka_admin *admin;
    ASSERT_EQ(lt_kafka_admin_open(&admin, &conn), LT_OK);
    test_store_topic(admin);
    test_partitions(admin);
    lt_kafka_admin_close(admin);
    return lt_test_finish();
}
