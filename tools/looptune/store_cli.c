/* --config-store SPEC for tune, run and bench: a file path, or the word
 * `kafka` for the fleet-wide store, the compacted topic <prefix>configs on
 * the cluster the command's Kafka options name. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Bounds every wait of the topic backend (metadata, next record, delivery). */
#define STORE_KAFKA_TIMEOUT_MS 10000

bool lt_cli_store_is_kafka(const char *spec) { return spec && !strcmp(spec, "kafka"); }

int lt_cli_store_backend(const char *cmd, const char *spec, const lt_cli_kafka *k,
                         lt_store_backend *out) {
    if (!*spec || !strncmp(spec, "kafka:", 6))
        return lt_cli_fail(cmd, "bad --config-store '%s': expected a file path or kafka", spec);
    int rc;
    if (!lt_cli_store_is_kafka(spec)) {
        if ((rc = lt_store_backend_file(out, spec)))
            return lt_cli_fail_status(cmd, rc, "cannot open the config store");
        return 0;
    }
    if (!lt_cli_kafka_has_brokers(k))
        return lt_cli_fail(cmd, "--config-store kafka needs --brokers HOST:PORT: the "
                                "configurations must outlive this process, and the embedded "
                                "broker does not");
    char topic[256];
    int n = snprintf(topic, sizeof topic, "%s%s",
                     lt_cli_kafka_prefix(k),
                     lt_kafka_topic_suffix(LT_TOPIC_CONFIGS));
    if (n < 0 || (size_t)n >= sizeof topic)
        return lt_cli_fail(cmd, "--topic-prefix is too long");
    if ((rc = lt_store_backend_topic(out, &k->conn, topic, STORE_KAFKA_TIMEOUT_MS)))
        return lt_cli_fail_status(cmd, rc, "cannot open the config store");
    return 0;
}
