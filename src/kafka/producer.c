/* The producer: asynchronous and batched (linger, lz4, idempotent), with a
 * bounded local queue. Sending never blocks the caller: a full queue (the
 * broker is slow or down) drops the record and counts it. A background
 * thread polls librdkafka, which runs the delivery-report callback that
 * counts acknowledged and failed records. */
#include "kafka_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct lt_producer {
    lt__kafka_client client; /* first: it is the librdkafka opaque */
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    pthread_t poller;
    bool poller_started;
    _Atomic bool stop;
    int close_timeout_ms;
    /* counters; relaxed: they are statistics, read as a snapshot */
    _Atomic int64_t sent, delivered, dropped, failed;
};

/* Delivery report: runs on the poll thread (or in flush) once per record.
 * opaque is the handle's: the lt__kafka_client at the start of lt_producer. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    lt_producer *p = opaque;
    /* a message may carry several records (lt_producer_send_n): its weight
     * travels as the message's opaque, NULL meaning one */
    int64_t n = m->_private ? (int64_t)(intptr_t)m->_private : 1;
    if (m->err)
        atomic_fetch_add_explicit(&p->failed, n, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&p->delivered, n, memory_order_relaxed);
}

static void *poll_main(void *arg) {
    lt_producer *p = arg;
    while (!atomic_load_explicit(&p->stop, memory_order_acquire)) rd_kafka_poll(p->rk, 100);
    return NULL;
}

int lt_producer_open(lt_producer **out, const lt_producer_opts *opts) {
    *out = NULL;
    if (!opts->topic || !*opts->topic) return lt_error(LT_EINVAL, "kafka producer: no topic");
    char q_records[32], q_kbytes[32], linger[32];
    snprintf(q_records, sizeof q_records, "%" PRId64,
             opts->queue_records > 0 ? opts->queue_records : 100000);
    snprintf(q_kbytes, sizeof q_kbytes, "%" PRId64,
             opts->queue_kbytes > 0 ? opts->queue_kbytes : 65536);
    snprintf(linger, sizeof linger, "%d",
             opts->linger_ms > 0 ? opts->linger_ms : opts->linger_ms < 0 ? 0 : 20);
    const char *const defaults[] = {
        "linger.ms", linger,
        "compression.codec", "lz4",
        "enable.idempotence", "true",
        "queue.buffering.max.messages", q_records,
        "queue.buffering.max.kbytes", q_kbytes,
        /* a dead broker surfaces as warnings and failures, not a frozen client */
        "message.timeout.ms", "30000",
        "socket.connection.setup.timeout.ms", "10000",
        /* a batch is one write: Nagle would only hold a lone record back */
        "socket.nagle.disable", "true",
        NULL};
    rd_kafka_conf_t *conf;
    int rc = lt__kafka_conf_new(&conf, &opts->conn, defaults);
    if (rc) return rc;

    lt_producer *p = calloc(1, sizeof *p);
    if (!p) {
        rd_kafka_conf_destroy(conf);
        return lt_error(LT_ENOMEM, "kafka producer: out of memory");
    }
    lt__kafka_client_init(&p->client, "producer");
    p->close_timeout_ms = opts->close_timeout_ms > 0 ? opts->close_timeout_ms : 5000;
    lt__kafka_conf_callbacks(conf, &p->client);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);

    char err[512];
    p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!p->rk) {
        rd_kafka_conf_destroy(conf);
        lt__kafka_client_destroy(&p->client);
        free(p);
        return lt_error(LT_ECONFIG, "kafka producer: %s", err);
    }
    p->rkt = rd_kafka_topic_new(p->rk, opts->topic, NULL);
    if (!p->rkt) {
        rc = lt__kafka_status(rd_kafka_last_error(), "kafka producer: topic");
        goto fail;
    }
    if (pthread_create(&p->poller, NULL, poll_main, p)) {
        rc = lt_error(LT_ENOMEM, "kafka producer: cannot start the poll thread");
        goto fail;
    }
    p->poller_started = true;
    *out = p;
    return LT_OK;
fail:
    if (p->rkt) rd_kafka_topic_destroy(p->rkt);
    rd_kafka_destroy(p->rk);
    lt__kafka_client_destroy(&p->client);
    free(p);
    return rc;
}

static int send_to(lt_producer *p, int32_t partition, const void *key, size_t key_len,
                   const void *value, size_t len, int64_t n_records) {
    if (n_records < 1) n_records = 1;
    /* No RD_KAFKA_MSG_F_BLOCK: a full queue returns at once with QUEUE_FULL. */
    if (rd_kafka_produce(p->rkt, partition < 0 ? RD_KAFKA_PARTITION_UA : partition,
                         RD_KAFKA_MSG_F_COPY, (void *)value, len,
                         key, key_len, n_records > 1 ? (void *)(intptr_t)n_records : NULL) == -1) {
        atomic_fetch_add_explicit(&p->dropped, n_records, memory_order_relaxed);
        return LT_PRODUCER_DROPPED;
    }
    atomic_fetch_add_explicit(&p->sent, n_records, memory_order_relaxed);
    return LT_OK;
}

int lt_producer_send_n(lt_producer *p, const void *key, size_t key_len, const void *value,
                       size_t len, int64_t n_records) {
    return send_to(p, -1, key, key_len, value, len, n_records);
}

int lt_producer_send_to(lt_producer *p, int32_t partition, const void *key, size_t key_len,
                        const void *value, size_t len) {
    return send_to(p, partition, key, key_len, value, len, 1);
}

int lt_producer_send(lt_producer *p, const void *key, size_t key_len, const void *value,
                     size_t len) {
    return lt_producer_send_n(p, key, key_len, value, len, 1);
}

int lt_producer_send_envelope_n(lt_producer *p, const char *key, const Looptune__Envelope *env,
                                int64_t n_records) {
    if (n_records < 1) n_records = 1;
    uint8_t stack[2048];
    size_t need = lt_envelope_packed_size(env), len;
    uint8_t *buf = need <= sizeof stack ? stack : malloc(need);
    if (!buf) {
        atomic_fetch_add_explicit(&p->dropped, n_records, memory_order_relaxed);
        return LT_PRODUCER_DROPPED;
    }
    int rc = lt_envelope_pack_sized(env, buf, need, &len);
    if (rc == LT_OK) {
        char natural[256];
        if (!key) {
            lt_envelope_key(env, natural, sizeof natural);
            key = natural;
        }
        rc = lt_producer_send_n(p, key, strlen(key), buf, len, n_records);
    }
    if (buf != stack) free(buf);
    return rc;
}

int lt_producer_send_envelope(lt_producer *p, const char *key, const Looptune__Envelope *env) {
    return lt_producer_send_envelope_n(p, key, env, 1);
}

int lt_producer_flush(lt_producer *p, int timeout_ms) {
    rd_kafka_resp_err_t err = rd_kafka_flush(p->rk, timeout_ms);
    if (err == RD_KAFKA_RESP_ERR__TIMED_OUT)
        return lt_error(LT_ETIMEOUT, "kafka producer: %d records not delivered within %d ms",
                        rd_kafka_outq_len(p->rk), timeout_ms);
    return lt__kafka_status(err, "kafka producer: flush");
}

void lt_producer_stats_get(lt_producer *p, lt_producer_stats *out) {
    memset(out, 0, sizeof *out);
    out->sent = atomic_load_explicit(&p->sent, memory_order_relaxed);
    out->delivered = atomic_load_explicit(&p->delivered, memory_order_relaxed);
    out->dropped = atomic_load_explicit(&p->dropped, memory_order_relaxed);
    out->failed = atomic_load_explicit(&p->failed, memory_order_relaxed);
    out->errors = atomic_load(&p->client.errors);
    out->in_queue = out->sent - out->delivered - out->failed;
    lt__kafka_last_error(&p->client, out->last_error, sizeof out->last_error);
}

void lt_producer_close(lt_producer *p) {
    if (!p) return;
    if (rd_kafka_flush(p->rk, p->close_timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        /* Give up on what is left: purged records report as failed. */
        rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(p->rk, 1000);
    }
    if (p->poller_started) {
        atomic_store_explicit(&p->stop, true, memory_order_release);
        pthread_join(p->poller, NULL);
    }
    rd_kafka_poll(p->rk, 0); /* reports that arrived after the poll thread stopped */
    int64_t lost = atomic_load(&p->failed);
    if (lost) {
        char last[256];
        lt__kafka_last_error(&p->client, last, sizeof last);
        lt_log(LT_LOG_WARN,
               "kafka producer: %lld records were never acknowledged by the broker%s%s",
               (long long)lost, last[0] ? "; last error: " : "", last);
    }
    rd_kafka_topic_destroy(p->rkt);
    rd_kafka_destroy(p->rk);
    lt__kafka_client_destroy(&p->client);
    free(p);
}
