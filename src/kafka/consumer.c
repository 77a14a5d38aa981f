/* The consumer: one member of a consumer group, subscribed to some topics,
 * polled by one thread. Transient errors (a lost broker connection) are
 * warned about and retried by librdkafka; errors the caller must see (a
 * missing topic, a fatal error) are returned from poll. It serves the
 * group's rebalances itself, so it knows when its partitions are assigned
 * and, on request, where each of them ended at that moment. */
#include "kafka_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An assigned partition and its end when it was assigned (until_end). */
typedef struct {
    char *topic;
    int32_t partition;
    int64_t end; /* high watermark at assignment; -1 unknown (then the EOF event ends it) */
    bool done;   /* read up to end, or empty */
} part_end;

struct lt_consumer {
    lt__kafka_client client; /* first: it is the librdkafka opaque */
    rd_kafka_t *rk;
    rd_kafka_message_t *held; /* the record handed out by the last poll */
    bool auto_commit;
    bool until_end;
    /* written by the rebalance callback, which runs inside poll (and close),
     * on the polling thread: no lock */
    bool assigned;    /* a first assignment has been served */
    bool holding;     /* an assignment is in force (false between an eager revoke and
                         the next assignment) */
    part_end *parts;  /* [n_parts] assigned now (until_end only) */
    int n_parts, cap_parts;
};

static part_end *find_part(lt_consumer *c, const char *topic, int32_t partition) {
    for (int i = 0; i < c->n_parts; i++)
        if (c->parts[i].partition == partition && !strcmp(c->parts[i].topic, topic))
            return &c->parts[i];
    return NULL;
}

static void drop_part(lt_consumer *c, const char *topic, int32_t partition) {
    part_end *p = find_part(c, topic, partition);
    if (!p) return;
    free(p->topic);
    *p = c->parts[--c->n_parts];
}

/* Takes the end of every newly assigned partition: its high watermark now.
 * A partition whose watermarks cannot be had ends at its EOF event. */
static void track_parts(lt_consumer *c, const rd_kafka_topic_partition_list_t *l) {
    for (int i = 0; i < l->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &l->elems[i];
        if (find_part(c, tp->topic, tp->partition)) continue;
        if (c->n_parts == c->cap_parts) {
            int cap = c->cap_parts ? 2 * c->cap_parts : 8;
            part_end *np = realloc(c->parts, (size_t)cap * sizeof *np);
            if (!np) continue; /* untracked: not waited for */
            c->parts = np;
            c->cap_parts = cap;
        }
        int64_t lo = 0, hi = 0;
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(c->rk, tp->topic, tp->partition, &lo, &hi, 5000);
        part_end p = {.topic = strdup(tp->topic), .partition = tp->partition,
                      .end = e ? -1 : hi, .done = !e && hi <= lo};
        if (!p.topic) continue;
        c->parts[c->n_parts++] = p;
    }
}

/* The group's rebalances: (un)assigns as librdkafka would by itself, eager
 * or cooperative, and keeps the partitions' ends. */
static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque) {
    lt_consumer *c = opaque;
    bool coop = !strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE");
    rd_kafka_error_t *ce = NULL;
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        if (c->until_end) track_parts(c, parts);
        if (coop) ce = rd_kafka_incremental_assign(rk, parts);
        else e = rd_kafka_assign(rk, parts);
        c->assigned = c->holding = true;
    } else {
        for (int i = 0; parts && i < parts->cnt; i++)
            drop_part(c, parts->elems[i].topic, parts->elems[i].partition);
        if (coop && err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
            ce = rd_kafka_incremental_unassign(rk, parts);
        } else {
            e = rd_kafka_assign(rk, NULL);
            c->holding = false;
        }
    }
    if (ce) {
        lt__kafka_warn(&c->client.warner, "consumer", rd_kafka_error_string(ce));
        rd_kafka_error_destroy(ce);
    } else if (e) {
        lt__kafka_warn(&c->client.warner, "consumer", rd_kafka_err2str(e));
    }
}

/* Asks for the cluster's metadata (every topic: asking for one by name could
 * create it on a broker with auto.create.topics.enable) and checks the
 * subscribed topics exist. Quiet while it waits: an unreachable broker is
 * one error, not a warning per attempt. */
static int check_cluster(lt_consumer *c, const lt_consumer_opts *opts, const char *bootstrap) {
    atomic_store(&c->client.quiet, true);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(c->rk, 1, NULL, &md, opts->connect_timeout_ms);
    if (e == RD_KAFKA_RESP_ERR__TIMED_OUT || e == RD_KAFKA_RESP_ERR__TRANSPORT) {
        char last[256];
        lt__kafka_last_error(&c->client, last, sizeof last);
        return lt_error(LT_ETIMEOUT, "kafka consumer: no broker of %s answered within %d ms%s%s",
                        bootstrap, opts->connect_timeout_ms, last[0] ? ": " : "", last);
    }
    if (e) return lt__kafka_status(e, "kafka consumer: metadata");
    int rc = LT_OK;
    for (size_t i = 0; opts->topics_must_exist && i < opts->n_topics && !rc; i++) {
        bool found = false;
        for (int j = 0; j < md->topic_cnt && !found; j++)
            found = !strcmp(md->topics[j].topic, opts->topics[i]) &&
                    md->topics[j].err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
        if (!found)
            rc = lt_error(LT_ENOTFOUND, "kafka consumer: topic '%s' does not exist",
                          opts->topics[i]);
    }
    rd_kafka_metadata_destroy(md);
    if (!rc) atomic_store(&c->client.quiet, false);
    return rc;
}

static void consumer_free(lt_consumer *c) {
    for (int i = 0; i < c->n_parts; i++) free(c->parts[i].topic);
    free(c->parts);
    lt__kafka_client_destroy(&c->client);
    free(c);
}

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
        /* the end of a partition: where until_end stops when its watermark is unknown */
        "enable.partition.eof", opts->until_end ? "true" : "false",
        "socket.connection.setup.timeout.ms", "10000",
        /* telemetry and control want latency more than big fetches */
        "fetch.wait.max.ms", "100",
        NULL};
    rd_kafka_conf_t *conf;
    int rc = lt__kafka_conf_new(&conf, &opts->conn, defaults);
    if (rc) return rc;
    char bootstrap[256];
    size_t blen = sizeof bootstrap;
    if (rd_kafka_conf_get(conf, "bootstrap.servers", bootstrap, &blen) != RD_KAFKA_CONF_OK)
        snprintf(bootstrap, sizeof bootstrap, "the bootstrap servers");
    lt_consumer *c = calloc(1, sizeof *c);
    if (!c) {
        rd_kafka_conf_destroy(conf);
        return lt_error(LT_ENOMEM, "kafka consumer: out of memory");
    }
    lt__kafka_client_init(&c->client, "consumer");
    c->auto_commit = opts->auto_commit;
    c->until_end = opts->until_end;
    lt__kafka_conf_callbacks(conf, &c->client);
    rd_kafka_conf_set_rebalance_cb(conf, on_rebalance);
    char err[512];
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!c->rk) {
        rd_kafka_conf_destroy(conf);
        consumer_free(c);
        return lt_error(LT_ECONFIG, "kafka consumer: %s", err);
    }
    rd_kafka_poll_set_consumer(c->rk);
    /* before subscribing: a handle that never joined is destroyed at once */
    if (opts->connect_timeout_ms > 0 && (rc = check_cluster(c, opts, bootstrap))) {
        rd_kafka_destroy(c->rk);
        consumer_free(c);
        return rc;
    }
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new((int)opts->n_topics);
    for (size_t i = 0; i < opts->n_topics; i++)
        rd_kafka_topic_partition_list_add(subs, opts->topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(c->rk, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (e) {
        rc = lt__kafka_status(e, "kafka consumer: subscribe");
        rd_kafka_destroy(c->rk);
        consumer_free(c);
        return rc;
    }
    *out = c;
    return LT_OK;
}

bool lt_consumer_assigned(const lt_consumer *c) { return c->assigned; }

bool lt_consumer_at_end(const lt_consumer *c) {
    if (!c->until_end || !c->holding) return false;
    for (int i = 0; i < c->n_parts; i++)
        if (!c->parts[i].done) return false;
    return true;
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
        part_end *pe = c->until_end && m->rkt
                           ? find_part(c, rd_kafka_topic_name(m->rkt), m->partition) : NULL;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (pe) pe->done = true;
            rd_kafka_message_destroy(m);
            if (lt_consumer_at_end(c) || lt_now_ns() >= deadline) return 0;
            continue;
        }
        if (!m->err && pe && (pe->done || (pe->end >= 0 && m->offset >= pe->end))) {
            /* produced after the assignment: past the end this read stops at */
            pe->done = true;
            rd_kafka_message_destroy(m);
            if (lt_consumer_at_end(c) || lt_now_ns() >= deadline) return 0;
            continue;
        }
        if (!m->err) {
            if (pe && pe->end >= 0 && m->offset + 1 >= pe->end) pe->done = true;
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
    consumer_free(c);
}
