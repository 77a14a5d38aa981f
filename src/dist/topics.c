/* The topics of distributed jobs: tasks, results and tasks.dead under the
 * prefix, created when missing with the partitions asked for. The tasks
 * topic's partition count bounds how many workers share a job. */
#include "looptune/dist.h"

#include <stdio.h>

int lt_dist_topic_partitions(const lt_kafka_conn *conn, const char *topic, int32_t *out) {
    *out = 0;
    lt_kafka_admin *a;
    int rc = lt_kafka_admin_open(&a, conn);
    if (rc) return rc;
    lt_topic_info info;
    rc = lt_kafka_admin_describe_topic(a, topic, 15000, &info);
    lt_kafka_admin_close(a);
    if (rc) return rc;
    *out = info.partitions;
    lt_kafka_props_free(info.configs);
    return *out > 0 ? LT_OK : lt_error(LT_EKAFKA, "topic %s: no partitions", topic);
}

int lt_dist_ensure_topics(const lt_kafka_conn *conn, const char *prefix, int32_t partitions) {
    if (!prefix) prefix = LT_KAFKA_TOPIC_PREFIX;
    if (partitions <= 0) partitions = 6;
    static const lt_kafka_topic which[] = {LT_TOPIC_TASKS, LT_TOPIC_RESULTS, LT_TOPIC_TASKS_DEAD};
    char names[3][256];
    lt_topic_spec specs[3];
    for (int i = 0; i < 3; i++) {
        if (snprintf(names[i], sizeof names[i], "%s%s", prefix,
                     lt_kafka_topic_suffix(which[i])) >= (int)sizeof names[i])
            return lt_error(LT_EINVAL, "topic prefix '%.64s...' too long", prefix);
        specs[i] = (lt_topic_spec){.name = names[i], .partitions = partitions, .replication = -1};
    }
    lt_kafka_admin *a;
    int rc = lt_kafka_admin_open(&a, conn);
    if (rc) return rc;
    size_t created = 0;
    rc = lt_kafka_admin_create_topics(a, specs, 3, 15000, &created);
    lt_kafka_admin_close(a);
    if (!rc && created)
        lt_log(LT_LOG_INFO,
               "dist: created %zu topics (%s{tasks,results,tasks.dead}, %d partitions)",
               created, prefix, (int)partitions);
    return rc;
}
