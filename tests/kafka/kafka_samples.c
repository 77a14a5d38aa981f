/* kafka_samples BOOTSTRAP TOPIC N: creates TOPIC (one partition) if needed,
 * produces samples 0..N-1 of every message kind (tests/kafka/samples.h) in
 * order, waits for delivery, and prints each envelope as looptune's JSON,
 * one line per record, in production order. Exit 0 only if every record
 * was acknowledged. The Python test reads the same records back with the
 * .proto alone and compares. */
#include <stdio.h>
#include <stdlib.h>

#include "looptune/kafka.h"
#include "samples.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: kafka_samples BOOTSTRAP TOPIC N\n");
        return 2;
    }
    int n = atoi(argv[3]);
    lt_kafka_conn conn = {.brokers = argv[1]};
    lt_kafka_admin *a;
    lt_topic_spec spec = {.name = argv[2], .partitions = 1, .replication = 1};
    if (lt_kafka_admin_open(&a, &conn) ||
        lt_kafka_admin_create_topics(a, &spec, 1, 15000, NULL)) {
        fprintf(stderr, "kafka_samples: %s\n", lt_errmsg());
        lt_kafka_admin_close(a);
        return 1;
    }
    lt_kafka_admin_close(a);
    lt_producer *p;
    lt_producer_opts po = {.conn = conn, .topic = argv[2]};
    if (lt_producer_open(&p, &po)) {
        fprintf(stderr, "kafka_samples: %s\n", lt_errmsg());
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        for (int k = 0; k < SAMPLE_KINDS && !rc; k++) {
            sample s;
            Looptune__Envelope *env = sample_build(&s, k, i);
            char *json;
            if (lt_producer_send_envelope(p, NULL, env) != LT_OK ||
                lt_envelope_to_json(env, &json) != LT_OK) {
                fprintf(stderr, "kafka_samples: kind %d sample %d not queued\n", k, i);
                rc = 1;
                break;
            }
            puts(json);
            free(json);
        }
    }
    if (!rc && lt_producer_flush(p, 30000)) {
        fprintf(stderr, "kafka_samples: %s\n", lt_errmsg());
        rc = 1;
    }
    lt_producer_stats st;
    lt_producer_stats_get(p, &st);
    if (st.delivered != (int64_t)n * SAMPLE_KINDS) {
        fprintf(stderr, "kafka_samples: %lld of %d records acknowledged (last error: %s)\n",
                (long long)st.delivered, n * SAMPLE_KINDS, st.last_error);
        rc = 1;
    }
    lt_producer_close(p);
    return rc;
}
