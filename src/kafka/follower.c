/* The follower: every partition of one topic, read without joining a
 * consumer group (assign, not subscribe), from the high watermarks taken at
 * open onwards. A run's control listener uses it: it must see every control
 * sent after it announced itself, and must not join (and rebalance) a group. */
#include "kafka_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct lt_follower {
    lt__kafka_client client; /* first: it is the librdkafka opaque */
    rd_kafka_t *rk;
    char *topic;
    rd_kafka_message_t *held;
    int n_parts;
    int64_t *end;  /* [n_parts] high watermark at open */
    int64_t *next; /* [n_parts] offset after the last record returned */
};

static void follower_free(lt_follower *r) {
    if (r->held) rd_kafka_message_destroy(r->held);
    if (r->rk) {
        rd_kafka_assign(r->rk, NULL);
        rd_kafka_destroy(r->rk);
    }
    lt__kafka_client_destroy(&r->client);
    free(r->end);
    free(r->next);
    free(r->topic);
    free(r);
}

/* Partition count of topic, or LT_ENOTFOUND. */
static int partitions_of(rd_kafka_t *rk, const char *topic, int timeout_ms, int *n) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    if (!rkt) return lt_error(LT_ENOMEM, "kafka follower: out of memory");
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
    rd_kafka_topic_destroy(rkt);
    char what[300];
    snprintf(what, sizeof what, "kafka follower: topic '%s'", topic);
    if (e) return lt__kafka_status(e, what);
    int rc = LT_OK;
    if (md->topic_cnt != 1 || md->topics[0].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
        md->topics[0].partition_cnt == 0)
        rc = lt_error(LT_ENOTFOUND, "%s does not exist", what);
    else if (md->topics[0].err)
        rc = lt__kafka_status(md->topics[0].err, what);
    else
        *n = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
    return rc;
}

int lt_follower_open(lt_follower **out, const lt_kafka_conn *conn, const char *topic,
                     int timeout_ms) {
    *out = NULL;
    const char *const defaults[] = {
        /* assign() needs a group id; the group is never joined, nothing is
         * committed under it */
        "group.id", "looptune.follower",
        /* records of transactions that never committed are never seen */
        "isolation.level", "read_committed",
        "enable.auto.commit", "false",
        "enable.auto.offset.store", "false",
        "enable.partition.eof", "false",
        "socket.connection.setup.timeout.ms", "10000",
        "fetch.wait.max.ms", "50", /* control messages are few: deliver them promptly */
        "socket.nagle.disable", "true",
        NULL};
    rd_kafka_conf_t *conf;
    int rc = lt__kafka_conf_new(&conf, conn, defaults);
    if (rc) return rc;
    lt_follower *r = calloc(1, sizeof *r);
    if (!r) {
        rd_kafka_conf_destroy(conf);
        return lt_error(LT_ENOMEM, "kafka follower: out of memory");
    }
    lt__kafka_client_init(&r->client, "follower");
    lt__kafka_conf_callbacks(conf, &r->client);
    char err[512];
    r->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!r->rk) {
        rd_kafka_conf_destroy(conf);
        rc = lt_error(LT_ECONFIG, "kafka follower: %s", err);
        goto fail;
    }
    rd_kafka_poll_set_consumer(r->rk);
    if (!(r->topic = strdup(topic))) {
        rc = lt_error(LT_ENOMEM, "kafka follower: out of memory");
        goto fail;
    }
    if ((rc = partitions_of(r->rk, topic, timeout_ms, &r->n_parts))) goto fail;
    r->end = calloc((size_t)r->n_parts, sizeof *r->end);
    r->next = calloc((size_t)r->n_parts, sizeof *r->next);
    if (!r->end || !r->next) {
        rc = lt_error(LT_ENOMEM, "kafka follower: out of memory");
        goto fail;
    }
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(r->n_parts);
    for (int p = 0; p < r->n_parts; p++) {
        int64_t lo = 0, hi = 0;
        /* explicit offsets, taken now: a record produced after open returns
         * is never missed, whatever the fetcher's start-up latency */
        rd_kafka_resp_err_t e;
        uint64_t deadline = lt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
        /* a topic just created has no leader for a moment */
        while ((e = rd_kafka_query_watermark_offsets(r->rk, topic, p, &lo, &hi, timeout_ms)) ==
                   RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION ||
               e == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
               e == RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH) {
            if (lt_now_ns() >= deadline) break;
            nanosleep(&(struct timespec){0, 50000000}, NULL);
        }
        if (e) {
            rd_kafka_topic_partition_list_destroy(parts);
            char what[300];
            snprintf(what, sizeof what, "kafka follower: offsets of %s[%d]", topic, p);
            rc = lt__kafka_status(e, what);
            goto fail;
        }
        r->end[p] = hi;
        r->next[p] = hi;
        rd_kafka_topic_partition_list_add(parts, topic, p)->offset = r->next[p];
    }
    rd_kafka_resp_err_t e = rd_kafka_assign(r->rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    if (e) {
        rc = lt__kafka_status(e, "kafka follower: assign");
        goto fail;
    }
    *out = r;
    return LT_OK;
fail:
    follower_free(r);
    return rc;
}

int lt_follower_poll(lt_follower *r, int timeout_ms, lt_record *rec) {
    if (r->held) {
        rd_kafka_message_destroy(r->held);
        r->held = NULL;
    }
    uint64_t deadline = lt_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    for (;;) {
        uint64_t now = lt_now_ns();
        int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ull);
        rd_kafka_message_t *m = rd_kafka_consumer_poll(r->rk, left);
        if (!m) return 0;
        if (!m->err) {
            if (m->partition >= 0 && m->partition < r->n_parts) r->next[m->partition] = m->offset + 1;
            r->held = m;
            lt__kafka_record_of(m, rec);
            return 1;
        }
        lt__kafka_warn(&r->client.warner, "follower", rd_kafka_err2str(m->err));
        rd_kafka_message_destroy(m);
        if (lt_now_ns() >= deadline) return 0;
    }
}

int64_t lt_follower_behind(lt_follower *r, int timeout_ms) {
    /* the consumer's positions step over transaction markers; before a
     * first record they are unset, and where we started holds */
    rd_kafka_topic_partition_list_t *pos = rd_kafka_topic_partition_list_new(r->n_parts);
    for (int p = 0; p < r->n_parts; p++) rd_kafka_topic_partition_list_add(pos, r->topic, p);
    rd_kafka_position(r->rk, pos);
    int64_t behind = 0;
    for (int p = 0; p < r->n_parts; p++) {
        int64_t lo = 0, hi = 0, at = pos->elems[p].offset;
        if (at < r->next[p]) at = r->next[p];
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(r->rk, r->topic, p, &lo, &hi, timeout_ms);
        if (e) {
            rd_kafka_topic_partition_list_destroy(pos);
            char what[300];
            snprintf(what, sizeof what, "kafka follower: offsets of %s[%d]", r->topic, p);
            return lt__kafka_status(e, what);
        }
        if (hi > at) behind += hi - at;
    }
    rd_kafka_topic_partition_list_destroy(pos);
    return behind;
}

void lt_follower_drain(lt_follower *r, int cap_ms, int (*fn)(void *ctx, const lt_record *rec),
                       void *ctx) {
    const uint64_t t0 = lt_now_ns(), cap_ns = (uint64_t)(cap_ms > 0 ? cap_ms : 0) * 1000000ull;
    lt_record rec;
    int quiet = 0; /* 50 ms pauses in a row with nothing read while still behind */
    while (lt_now_ns() - t0 < cap_ns && quiet < 6) {
        if (lt_follower_behind(r, 2000) <= 0) return; /* caught up, or no answer */
        bool got = false;
        while (lt_now_ns() - t0 < cap_ns && lt_follower_poll(r, 50, &rec) == 1) {
            got = true;
            if (fn(ctx, &rec)) return;
        }
        quiet = got ? 0 : quiet + 1;
    }
}

void lt_follower_close(lt_follower *r) {
    if (r) follower_free(r);
}
