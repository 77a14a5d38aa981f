/* The consumer: one member of a consumer group, subscribed to some topics,
 * polled by one thread. Transient errors (a lost broker connection) are
 * warned about and retried by librdkafka; errors the caller must see (a
 * missing topic, a fatal error) are returned from poll. */
#include "kafka_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lt_consumer {
    lt__kafka_client client; /* first: it is the librdkafka opaque */
    rd_kafka_t *rk;
    rd_kafka_message_t *held; /* the record handed out by the last poll */
    bool auto_commit;
};

int lt_consumer_open(lt_consumer **out, const lt_consumer_opts *opts) {
    *out = NULL;
    if (!opts->group || !*opts->group) return lt_error(LT_EINVAL, "kafka consumer: no group id");
    if (!opts->n_topics) return lt_error(LT_EINVAL, "kafka consumer: no topic to subscribe to");
    const char *const defaults[] = {
        "group.id", opts->group,
        "auto.offset.reset", opts->from_beginning ? "earliest" : "latest",
        "enable.auto.commit", opts->auto_commit ? "true" : "false",
        /* offsets of returned records only: what the caller has seen */
        "enable.auto.offset.store", "false",
        "enable.partition.eof", "false",
        "socket.connection.setup.timeout.ms", "10000",
        /* telemetry and control want latency more than big fetches */
        "fetch.wait.max.ms", "100",
        NULL};
    rd_kafka_conf_t *conf;
    int rc = lt__kafka_conf_new(&conf, &opts->conn, defaults);
    if (rc) return rc;
    lt_consumer *c = calloc(1, sizeof *c);
    if (!c) {
        rd_kafka_conf_destroy(conf);
        return lt_error(LT_ENOMEM, "kafka consumer: out of memory");
    }
    lt__kafka_client_init(&c->client, "consumer");
    c->auto_commit = opts->auto_commit;
    lt__kafka_conf_callbacks(conf, &c->client);
    char err[512];
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!c->rk) {
        rd_kafka_conf_destroy(conf);
        lt__kafka_client_destroy(&c->client);
        free(c);
        return lt_error(LT_ECONFIG, "kafka consumer: %s", err);
    }
    rd_kafka_poll_set_consumer(c->rk);
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new((int)opts->n_topics);
    for (size_t i = 0; i < opts->n_topics; i++)
        rd_kafka_topic_partition_list_add(subs, opts->topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(c->rk, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (e) {
        rc = lt__kafka_status(e, "kafka consumer: subscribe");
        rd_kafka_destroy(c->rk);
        lt__kafka_client_destroy(&c->client);
        free(c);
        return rc;
    }
    *out = c;
    return LT_OK;
}

int lt_consumer_poll(lt_consumer *c, int timeout_ms, lt_record *rec) {
    if (c->held) {
        rd_kafka_message_destroy(c->held);
        c->held = NULL;
    }
    uint64_t deadline = lt_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    for (;;) {
        uint64_t now = lt_now_ns();
        int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ull);
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, left);
        if (!m) return 0;
        if (!m->err) {
            /* the position after this record becomes committable */
            rd_kafka_offset_store(m->rkt, m->partition, m->offset);
            c->held = m;
            lt__kafka_record_of(m, rec);
            return 1;
        }
        rd_kafka_resp_err_t err = m->err;
        char what[512];
        if (m->rkt)
            snprintf(what, sizeof what, "kafka consumer: topic '%s'", rd_kafka_topic_name(m->rkt));
        else
            snprintf(what, sizeof what, "kafka consumer: poll");
        rd_kafka_message_destroy(m);
        if (err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
            err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
            return lt_error(LT_ENOTFOUND, "%s does not exist", what);
        if (err == RD_KAFKA_RESP_ERR__FATAL ||
            err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
            err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED)
            return lt__kafka_status(err, what);
        /* Anything else is transient: librdkafka retries; say so and go on. */
        lt__kafka_warn(&c->client.warner, "consumer", rd_kafka_err2str(err));
        if (lt_now_ns() >= deadline) return 0;
    }
}

int lt_consumer_commit(lt_consumer *c) {
    rd_kafka_resp_err_t err = rd_kafka_commit(c->rk, NULL, 0);
    if (err == RD_KAFKA_RESP_ERR__NO_OFFSET) return LT_OK; /* nothing new */
    return lt__kafka_status(err, "kafka consumer: commit");
}

void lt_consumer_close(lt_consumer *c) {
    if (!c) return;
    if (c->held) rd_kafka_message_destroy(c->held);
    rd_kafka_resp_err_t err = rd_kafka_consumer_close(c->rk);
    if (err) lt_log(LT_LOG_WARN, "kafka consumer: leaving the group: %s", rd_kafka_err2str(err));
    rd_kafka_destroy(c->rk);
    lt__kafka_client_destroy(&c->client);
    free(c);
}
