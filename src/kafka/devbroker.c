/* The embedded development broker: librdkafka's mock cluster (the real Kafka
 * protocol on loopback, in this process, in memory), optionally reachable at
 * a fixed bootstrap port through a relay. Says on stderr what it is not. */
#include "kafka_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka_mock.h>

#include "relay.h"

struct lt_devbroker {
    lt__kafka_client client; /* first: it is the librdkafka opaque */
    rd_kafka_t *rk;          /* the handle the mock cluster lives in */
    rd_kafka_mock_cluster_t *mc;
    lt__relay *relay;
    char *bootstrap;
};

int lt_devbroker_open(lt_devbroker **out, int n_brokers, int port) {
    *out = NULL;
    if (n_brokers < 1 || n_brokers > 64)
        return lt_error(LT_EINVAL, "embedded broker: %d brokers: expected 1..64", n_brokers);
    if (port < 0 || port > 65535)
        return lt_error(LT_EINVAL, "embedded broker: port %d: expected 1..65535", port);
    lt_devbroker *b = calloc(1, sizeof *b);
    if (!b) return lt_error(LT_ENOMEM, "embedded broker: out of memory");
    lt__kafka_client_init(&b->client, "embedded broker");
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    lt__kafka_conf_callbacks(conf, &b->client);
    char err[512];
    int rc;
    /* This handle never connects anywhere; it only hosts the cluster. */
    b->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!b->rk) {
        rd_kafka_conf_destroy(conf);
        rc = lt_error(LT_EKAFKA, "embedded broker: %s", err);
        goto fail;
    }
    b->mc = rd_kafka_mock_cluster_new(b->rk, n_brokers);
    if (!b->mc) {
        rc = lt_error(LT_EKAFKA, "embedded broker: librdkafka could not start the mock cluster");
        goto fail;
    }
    const char *own = rd_kafka_mock_cluster_bootstraps(b->mc);
    if (port > 0) {
        char first[64];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(own, ","), own);
        if ((rc = lt__relay_open(&b->relay, port, first))) {
            rc = lt_error(rc, "embedded broker: %s", lt_errmsg());
            goto fail;
        }
        char buf[32];
        snprintf(buf, sizeof buf, "127.0.0.1:%d", port);
        b->bootstrap = strdup(buf);
    } else {
        b->bootstrap = strdup(own);
    }
    if (!b->bootstrap) {
        rc = lt_error(LT_ENOMEM, "embedded broker: out of memory");
        goto fail;
    }
    lt_log(LT_LOG_WARN,
           "embedded development Kafka broker at %s (%d broker%s): in memory, not durable, "
           "about 5 MiB per partition (older records dropped), no log compaction, no "
           "transactions; give --brokers for a real cluster",
           b->bootstrap, n_brokers, n_brokers == 1 ? "" : "s");
    *out = b;
    return LT_OK;
fail:
    lt_devbroker_close(b);
    return rc;
}

const char *lt_devbroker_bootstrap(const lt_devbroker *b) { return b->bootstrap; }

struct rd_kafka_mock_cluster_s *lt_devbroker_cluster(lt_devbroker *b) { return b->mc; }

int lt_devbroker_create_topic(lt_devbroker *b, const char *topic, int partitions) {
    rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(b->mc, topic, partitions, 1);
    if (e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) return LT_OK;
    char what[300];
    snprintf(what, sizeof what, "embedded broker: topic %s", topic);
    return e ? lt__kafka_status(e, what) : LT_OK;
}

void lt_devbroker_close(lt_devbroker *b) {
    if (!b) return;
    lt__relay_close(b->relay);
    if (b->mc) rd_kafka_mock_cluster_destroy(b->mc);
    if (b->rk) rd_kafka_destroy(b->rk);
    lt__kafka_client_destroy(&b->client);
    free(b->bootstrap);
    free(b);
}
