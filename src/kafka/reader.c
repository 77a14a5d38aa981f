/* The reader: a whole topic read once, from the oldest record of every
 * partition to the high watermarks taken at open (a snapshot, e.g. of the
 * compacted configs topic). Partitions are assigned, not subscribed: no group
 * is joined, nothing is committed, and the read ends by itself. */
#include "kafka_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct lt_kafka_reader {
    lt__kafka_client client; /* first: it is the librdkafka opaque */
    rd_kafka_t *rk;
    char *topic;
    int32_t n_parts;
    int64_t *end;  /* [n_parts] high watermark at open: the offset after the last record */
    bool *done;    /* [n_parts] reached end (or empty at open) */
    int32_t n_left; /* partitions not done */
    int64_t span;  /* sum of high - low at open */
    rd_kafka_message_t *held; /* the record handed out by the last call */
};

/* Partition count of topic, waiting (up to timeout_ms) while it is listed
 * without leaders (just created). All topics are asked for: a request for
 * one by name could create it on a broker with auto.create.topics.enable. */
static int partition_count(lt_kafka_reader *r, int timeout_ms, int32_t *out) {
    uint64_t deadline = lt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        const struct rd_kafka_metadata *md;
        rd_kafka_resp_err_t e = rd_kafka_metadata(r->rk, 1, NULL, &md, timeout_ms);
        if (e) return lt__kafka_status(e, "kafka reader: metadata");
        int rc = lt_error(LT_ENOTFOUND, "kafka reader: topic '%s' does not exist", r->topic);
        bool retry = false;
        for (int i = 0; i < md->topic_cnt; i++) {
            const rd_kafka_metadata_topic_t *t = &md->topics[i];
            if (strcmp(t->topic, r->topic)) continue;
            if (t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) break;
            retry = t->err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE || t->partition_cnt == 0;
            for (int j = 0; j < t->partition_cnt; j++)
                retry |= t->partitions[j].leader < 0;
            if (t->err && !retry) {
                char what[300];
                snprintf(what, sizeof what, "kafka reader: topic '%s'", r->topic);
                rc = lt__kafka_status(t->err, what);
            } else if (!retry) {
                *out = t->partition_cnt;
                rc = LT_OK;
            }
            break;
        }
        rd_kafka_metadata_destroy(md);
        if (!retry) return rc;
        if (lt_now_ns() >= deadline)
            return lt_error(LT_ETIMEOUT, "kafka reader: topic '%s' has partitions without a "
                                         "leader after %d ms", r->topic, timeout_ms);
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
}

/* Takes the watermarks and assigns every non-empty partition from its start. */
static int start(lt_kafka_reader *r, int timeout_ms) {
    int rc = partition_count(r, timeout_ms, &r->n_parts);
    if (rc) return rc;
    r->end = calloc((size_t)r->n_parts + 1, sizeof *r->end);
    r->done = calloc((size_t)r->n_parts + 1, sizeof *r->done);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(r->n_parts);
    if (!r->end || !r->done || !l) {
        if (l) rd_kafka_topic_partition_list_destroy(l);
        return lt_error(LT_ENOMEM, "kafka reader: out of memory");
    }
    uint64_t deadline = lt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (int32_t p = 0; p < r->n_parts && rc == LT_OK; p++) {
        int64_t lo, hi;
        rd_kafka_resp_err_t e;
        /* a partition whose leader is still being elected (a topic just
         * created) answers "not leader" for a while */
        while ((e = rd_kafka_query_watermark_offsets(r->rk, r->topic, p, &lo, &hi,
                                                     timeout_ms)) != RD_KAFKA_RESP_ERR_NO_ERROR &&
               (e == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION ||
                e == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
                e == RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH) &&
               lt_now_ns() < deadline) {
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, NULL);
        }
        if (e) {
            char what[300];
            snprintf(what, sizeof what, "kafka reader: topic '%s' partition %d: watermarks",
                     r->topic, (int)p);
            rc = lt__kafka_status(e, what);
            break;
        }
        r->end[p] = hi;
        if (hi <= lo) {
            r->done[p] = true;
            continue;
        }
        r->span += hi - lo;
        r->n_left++;
        rd_kafka_topic_partition_list_add(l, r->topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    if (rc == LT_OK && l->cnt) {
        rd_kafka_resp_err_t e = rd_kafka_assign(r->rk, l);
        if (e) rc = lt__kafka_status(e, "kafka reader: assign");
    }
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

int lt_kafka_reader_open(lt_kafka_reader **out, const lt_kafka_conn *conn, const char *topic,
                         int timeout_ms) {
    *out = NULL;
    if (!topic || !*topic) return lt_error(LT_EINVAL, "kafka reader: no topic");
    const char *const defaults[] = {
        /* needed by assign(); never joined, nothing committed under it */
        "group.id", "looptune.reader",
        "enable.auto.commit", "false",
        "enable.auto.offset.store", "false",
        "auto.offset.reset", "earliest",
        /* the end of a partition is reported: a backstop for the watermark */
        "enable.partition.eof", "true",
        "socket.connection.setup.timeout.ms", "10000",
        NULL};
    rd_kafka_conf_t *conf;
    int rc = lt__kafka_conf_new(&conf, conn, defaults);
    if (rc) return rc;
    lt_kafka_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->topic = strdup(topic))) {
        free(r);
        rd_kafka_conf_destroy(conf);
        return lt_error(LT_ENOMEM, "kafka reader: out of memory");
    }
    lt__kafka_client_init(&r->client, "reader");
    lt__kafka_conf_callbacks(conf, &r->client);
    char err[512];
    r->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!r->rk) {
        rd_kafka_conf_destroy(conf);
        lt__kafka_client_destroy(&r->client);
        free(r->topic);
        free(r);
        return lt_error(LT_ECONFIG, "kafka reader: %s", err);
    }
    rd_kafka_poll_set_consumer(r->rk);
    if ((rc = start(r, timeout_ms > 0 ? timeout_ms : 10000))) {
        lt_kafka_reader_close(r);
        return rc;
    }
    *out = r;
    return LT_OK;
}

static void finish_partition(lt_kafka_reader *r, int32_t p) {
    if (p < 0 || p >= r->n_parts || r->done[p]) return;
    r->done[p] = true;
    r->n_left--;
}

int lt_kafka_reader_next(lt_kafka_reader *r, int timeout_ms, lt_record *rec) {
    if (r->held) {
        rd_kafka_message_destroy(r->held);
        r->held = NULL;
    }
    uint64_t deadline = lt_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    while (r->n_left > 0) {
        uint64_t now = lt_now_ns();
        if (now >= deadline) {
            char last[256];
            lt__kafka_last_error(&r->client, last, sizeof last);
            return lt_error(LT_ETIMEOUT, "kafka reader: topic '%s': no record within %d ms, %d "
                            "of %d partitions not read to their end%s%s", r->topic, timeout_ms,
                            (int)r->n_left, (int)r->n_parts, last[0] ? "; last error: " : "",
                            last);
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(r->rk, (int)((deadline - now) / 1000000ull));
        if (!m) continue;
        int32_t p = m->partition;
        bool mine = p >= 0 && p < r->n_parts && !r->done[p];
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            finish_partition(r, p);
            rd_kafka_message_destroy(m);
            continue;
        }
        if (m->err) {
            rd_kafka_resp_err_t err = m->err;
            char what[300];
            snprintf(what, sizeof what, "kafka reader: topic '%s'", r->topic);
            rd_kafka_message_destroy(m);
            if (err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
                return lt_error(LT_ENOTFOUND, "%s does not exist any more", what);
            if (err == RD_KAFKA_RESP_ERR__FATAL ||
                err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
                return lt__kafka_status(err, what);
            /* anything else is transient: librdkafka retries */
            lt__kafka_warn(&r->client.warner, "reader", rd_kafka_err2str(err));
            continue;
        }
        if (!mine || m->offset >= r->end[p]) { /* produced after open, or a finished partition */
            finish_partition(r, p);
            rd_kafka_message_destroy(m);
            continue;
        }
        if (m->offset + 1 >= r->end[p]) finish_partition(r, p);
        r->held = m;
        lt__kafka_record_of(m, rec);
        return 1;
    }
    return 0;
}

int64_t lt_kafka_reader_span(const lt_kafka_reader *r) { return r->span; }

void lt_kafka_reader_close(lt_kafka_reader *r) {
    if (!r) return;
    if (r->held) rd_kafka_message_destroy(r->held);
    /* no group membership to leave: closing only drops the assignment */
    rd_kafka_consumer_close(r->rk);
    rd_kafka_destroy(r->rk);
    lt__kafka_client_destroy(&r->client);
    free(r->end);
    free(r->done);
    free(r->topic);
    free(r);
}
