/* Against the real broker: the looptune topics are created when missing with
 * the requested partitions and replication, `configs` compacted, and the
 * broker describes back exactly that; creating again changes nothing; bad
 * requests fail with errors that name the topic. */
#include <string.h>

#include "kafka_test.h"
#include "looptune/kafka.h"
#include "test.h"

static lt_kafka_admin *admin;

static void expect_topic(const char *name, int32_t partitions, const char *policy) {
    lt_topic_info info;
    int rc = lt_kafka_admin_describe_topic(admin, name, 10000, &info);
    ASSERT_EQ(rc, LT_OK);
    if (rc) {
        fprintf(stderr, "%s: %s\n", name, lt_errmsg());
        return;
    }
    ASSERT_EQ(info.partitions, partitions);
    ASSERT_EQ(info.replication, 1);
    const char *cp = lt_kafka_props_get(info.configs, "cleanup.policy");
    ASSERT_STREQ(cp ? cp : "(none)", policy);
    lt_kafka_props_free(info.configs);
}

static void test_ensure_topics(void) {
    char prefix[96];
    kt_unique(prefix, sizeof prefix, "lt-topics");
    strcat(prefix, ".");
    ASSERT_EQ(lt_kafka_admin_ensure_topics(admin, prefix, 2, 1, 15000), LT_OK);
    for (int t = 0; t < LT_TOPIC_COUNT; t++) {
        char name[160];
        snprintf(name, sizeof name, "%s%s", prefix, lt_kafka_topic_suffix((lt_kafka_topic)t));
        expect_topic(name, 2, t == LT_TOPIC_CONFIGS ? "compact" : "delete");
    }
    /* a second time: all exist, nothing created, no error */
    ASSERT_EQ(lt_kafka_admin_ensure_topics(admin, prefix, 4, 1, 15000), LT_OK);
    char name[160];
    snprintf(name, sizeof name, "%stelemetry", prefix);
    expect_topic(name, 2, "delete"); /* left as it was, not re-partitioned */
}

static void test_create_with_configs(void) {
    char name[128];
    kt_unique(name, sizeof name, "lt-retention");
    const char *configs[] = {"retention.ms=3600000", "cleanup.policy=compact,delete"};
    lt_topic_spec spec = {.name = name, .partitions = 3, .replication = 1, .configs = configs,
                          .n_configs = 2};
    size_t created = 0;
    ASSERT_EQ(lt_kafka_admin_create_topics(admin, &spec, 1, 15000, &created), LT_OK);
    ASSERT_EQ(created, 1);
    ASSERT_EQ(lt_kafka_admin_create_topics(admin, &spec, 1, 15000, &created), LT_OK);
    ASSERT_EQ(created, 0);
    lt_topic_info info;
    int rc = lt_kafka_admin_describe_topic(admin, name, 10000, &info);
    ASSERT_EQ(rc, LT_OK);
    if (rc) return;
    ASSERT_EQ(info.partitions, 3);
    const char *ret = lt_kafka_props_get(info.configs, "retention.ms");
    const char *cp = lt_kafka_props_get(info.configs, "cleanup.policy");
    ASSERT_STREQ(ret ? ret : "(none)", "3600000");
    ASSERT_STREQ(cp ? cp : "(none)", "compact,delete");
    lt_kafka_props_free(info.configs);
}

static void test_errors(void) {
    char name[128];
    kt_unique(name, sizeof name, "lt-bad");
    /* one broker cannot hold three replicas */
    lt_topic_spec spec = {.name = name, .partitions = 1, .replication = 3};
    ASSERT_EQ(lt_kafka_admin_create_topics(admin, &spec, 1, 15000, NULL), LT_ECONFIG);
    ASSERT_TRUE(strstr(lt_errmsg(), name) != NULL);
    const char *bad_config[] = {"cleanup.policy=sometimes"};
    spec = (lt_topic_spec){.name = name, .partitions = 1, .replication = 1,
                           .configs = bad_config, .n_configs = 1};
    ASSERT_EQ(lt_kafka_admin_create_topics(admin, &spec, 1, 15000, NULL), LT_ECONFIG);
    ASSERT_TRUE(strstr(lt_errmsg(), name) != NULL);
    const char *no_eq[] = {"retention.ms"};
    spec.configs = no_eq;
    ASSERT_EQ(lt_kafka_admin_create_topics(admin, &spec, 1, 15000, NULL), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "expected key=value") != NULL);
    lt_topic_info info;
    ASSERT_EQ(lt_kafka_admin_describe_topic(admin, name, 10000, &info), LT_ENOTFOUND);
    ASSERT_TRUE(strstr(lt_errmsg(), "does not exist") != NULL);
}

int main(void) {
    lt_kafka_conn conn = {.brokers = kt_require_bootstrap()};
    ASSERT_EQ(lt_kafka_admin_open(&admin, &conn), LT_OK);
    test_ensure_topics();
    test_create_with_configs();
    test_errors();
    lt_kafka_admin_close(admin);
    return lt_test_finish();
}
