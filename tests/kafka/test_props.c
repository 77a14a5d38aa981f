/* Client properties without a broker: -X parsing, properties files and their
 * line-numbered errors, the check against librdkafka, the errors a client
 * reports for bad properties or a missing broker address, and the short
 * fetch wait of the embedded broker's own clients. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/kafka_internal.h"
#include "kafka_test.h"
#include "looptune/kafka.h"
#include "test.h"

#define ASSERT_MSG(needle)                                                     \
    do {                                                                       \
        bool lt__found = strstr(lt_errmsg(), needle) != NULL;                  \
        ASSERT_TRUE(lt__found);                                                \
        if (!lt__found) fprintf(stderr, "  message was '%s'\n", lt_errmsg());  \
    } while (0)

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    LT_ASSERT(f);
    fputs(text, f);
    fclose(f);
}

static void test_parse(void) {
    lt_kafka_props *p;
    ASSERT_EQ(lt_kafka_props_init(&p), LT_OK);
    ASSERT_EQ(lt_kafka_props_parse(p, "linger.ms=5"), LT_OK);
    ASSERT_EQ(lt_kafka_props_parse(p, " sasl.jaas = a=b c=d "), LT_OK); /* split at first '=' */
    ASSERT_EQ(lt_kafka_props_parse(p, "client.rack="), LT_OK);         /* empty value */
    ASSERT_EQ(lt_kafka_props_parse(p, "linger.ms=7"), LT_OK);          /* replaces, keeps place */
    ASSERT_EQ(lt_kafka_props_count(p), 3);
    ASSERT_STREQ(lt_kafka_props_get(p, "linger.ms"), "7");
    ASSERT_STREQ(lt_kafka_props_get(p, "sasl.jaas"), "a=b c=d");
    ASSERT_STREQ(lt_kafka_props_get(p, "client.rack"), "");
    ASSERT_TRUE(lt_kafka_props_get(p, "acks") == NULL);
    const char *k, *v;
    lt_kafka_props_at(p, 0, &k, &v);
    ASSERT_STREQ(k, "linger.ms");
    lt_kafka_props_at(p, 2, &k, &v);
    ASSERT_STREQ(k, "client.rack");

    ASSERT_EQ(lt_kafka_props_parse(p, "linger.ms"), LT_EINVAL);
    ASSERT_MSG("kafka property 'linger.ms': expected key=value");
    ASSERT_EQ(lt_kafka_props_parse(p, "=5"), LT_EINVAL);
    ASSERT_EQ(lt_kafka_props_parse(p, "bad key=5"), LT_EINVAL);
    ASSERT_MSG("kafka property key 'bad key'");
    ASSERT_EQ(lt_kafka_props_count(p), 3); /* failures add nothing */
    lt_kafka_props_free(p);
    lt_kafka_props_free(NULL);
}

static void test_file(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/kafka-%ld.conf", kt_work_dir(), (long)getpid());
    lt_kafka_props *p;
    ASSERT_EQ(lt_kafka_props_init(&p), LT_OK);
    write_file(path, "# the cluster\n"
                     "\n"
                     "   bootstrap.servers = b1:9092,b2:9092  \n"
                     "  # indented comment\n"
                     "security.protocol=SASL_SSL\r\n"
                     "sasl.password=p#ss=word\n");
    ASSERT_EQ(lt_kafka_props_load(p, path), LT_OK);
    ASSERT_EQ(lt_kafka_props_count(p), 3);
    ASSERT_STREQ(lt_kafka_props_get(p, "bootstrap.servers"), "b1:9092,b2:9092");
    ASSERT_STREQ(lt_kafka_props_get(p, "security.protocol"), "SASL_SSL");
    ASSERT_STREQ(lt_kafka_props_get(p, "sasl.password"), "p#ss=word"); /* '#' inside a value */

    /* errors name the file and the line; nothing from a bad file is kept */
    write_file(path, "linger.ms=1\n# fine\nthis line has no equals sign\nacks=all\n");
    ASSERT_EQ(lt_kafka_props_load(p, path), LT_EFORMAT);
    char want[600];
    snprintf(want, sizeof want, "%s:3: expected key=value, got 'this line has no equals sign'",
             path);
    ASSERT_STREQ(lt_errmsg(), want);
    ASSERT_TRUE(lt_kafka_props_get(p, "linger.ms") == NULL);
    write_file(path, "acks=all\nmy key=1\n");
    ASSERT_EQ(lt_kafka_props_load(p, path), LT_EFORMAT);
    snprintf(want, sizeof want, "%s:2: bad key 'my key'", path);
    ASSERT_MSG(want);
    write_file(path, "=1\n");
    ASSERT_EQ(lt_kafka_props_load(p, path), LT_EFORMAT);
    snprintf(want, sizeof want, "%s:1: expected key=value", path);
    ASSERT_MSG(want);
    ASSERT_EQ(lt_kafka_props_count(p), 3);
    remove(path);
    ASSERT_EQ(lt_kafka_props_load(p, path), LT_EIO);
    ASSERT_MSG("cannot open: No such file or directory");
    lt_kafka_props_free(p);
}

static void test_check_and_clients(void) {
    lt_kafka_props *p;
    ASSERT_EQ(lt_kafka_props_init(&p), LT_OK);
    ASSERT_EQ(lt_kafka_props_parse(p, "linger.ms=5"), LT_OK);
    ASSERT_EQ(lt_kafka_props_parse(p, "compression.codec=zstd"), LT_OK);
    ASSERT_EQ(lt_kafka_props_check(p), LT_OK);
    ASSERT_EQ(lt_kafka_props_parse(p, "linger.mss=5"), LT_OK);
    ASSERT_EQ(lt_kafka_props_check(p), LT_ECONFIG);
    ASSERT_MSG("kafka property 'linger.mss': No such configuration property");

    /* a client reports the same, before it starts anything */
    lt_producer *prod = (lt_producer *)1;
    lt_producer_opts po = {.conn = {.brokers = "127.0.0.1:9", .props = p}, .topic = "t"};
    ASSERT_EQ(lt_producer_open(&prod, &po), LT_ECONFIG);
    ASSERT_MSG("'linger.mss'");
    ASSERT_TRUE(prod == NULL);
    lt_kafka_props_free(p);
    ASSERT_EQ(lt_kafka_props_init(&p), LT_OK);
    ASSERT_EQ(lt_kafka_props_parse(p, "linger.ms=-3"), LT_OK);
    po.conn.props = p;
    ASSERT_EQ(lt_producer_open(&prod, &po), LT_ECONFIG);
    ASSERT_MSG("kafka property 'linger.ms'");

    /* no address anywhere */
    po.conn.brokers = NULL;
    po.conn.props = NULL;
    ASSERT_EQ(lt_producer_open(&prod, &po), LT_ECONFIG);
    ASSERT_MSG("no broker address");
    const char *topic = "t";
    lt_consumer *c;
    lt_consumer_opts co = {.group = "g", .topics = &topic, .n_topics = 1};
    ASSERT_EQ(lt_consumer_open(&c, &co), LT_ECONFIG);
    ASSERT_MSG("no broker address");
    co.group = NULL;
    ASSERT_EQ(lt_consumer_open(&c, &co), LT_EINVAL);
    ASSERT_MSG("no group id");
    lt_kafka_props_free(p);
}

/* A client of the embedded broker in this process fetches with a short
 * wait instead of its default; the user's own -X still decides last. */
static void test_in_process_fetch_wait(void) {
    const char *const defaults[] = {"fetch.wait.max.ms", "100", NULL};
    lt_kafka_props *p;
    ASSERT_EQ(lt_kafka_props_init(&p), LT_OK);
    for (int k = 0; k < 3; k++) {
        if (k == 2) ASSERT_EQ(lt_kafka_props_parse(p, "fetch.wait.max.ms=77"), LT_OK);
        lt_kafka_conn conn = {.brokers = "127.0.0.1:9", .props = p, .in_process = k > 0};
        rd_kafka_conf_t *conf;
        ASSERT_EQ(lt__kafka_conf_new(&conf, &conn, defaults), LT_OK);
        char v[32];
        size_t n = sizeof v;
        ASSERT_EQ(rd_kafka_conf_get(conf, "fetch.wait.max.ms", v, &n), RD_KAFKA_CONF_OK);
        ASSERT_STREQ(v, k == 0 ? "100" : k == 1 ? LT_KAFKA_IN_PROCESS_FETCH_WAIT_MS : "77");
        rd_kafka_conf_destroy(conf);
    }
    lt_kafka_props_free(p);
}

int main(void) {
    test_in_process_fetch_wait();
    test_parse();
    test_file();
    test_check_and_clients();
    return lt_test_finish();
}
