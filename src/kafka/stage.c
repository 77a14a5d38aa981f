/* The stage: consume, process, produce. A consumer-group member on one input
 * topic and a producer; lt_stage_commit puts outputs and input offsets into
 * one Kafka transaction (or, at-least-once, produces, flushes, then commits
 * the offsets). Everything librdkafka's transactional API can answer is
 * handled here, so the caller sees three outcomes: committed, dropped (the
 * partitions moved to another member, which repeats the work), failed. */
#include "kafka_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STAGE_TXN_TIMEOUT_MS 30000 /* one call of the transactional API */
#define STAGE_TRIES 6             /* transactions tried per commit */

struct lt_stage {
    lt__kafka_client client; /* first: it is the librdkafka opaque of both handles */
    rd_kafka_t *consumer;
    rd_kafka_message_t *held; /* the record handed out by the last poll */
    rd_kafka_t *producer;
    rd_kafka_conf_t *producer_conf; /* a copy kept to recreate the producer */
    char *topic;
    char *out_topic;            /* lt_stage_opts.output_topic, or NULL */
    rd_kafka_topic_t *out_rkt;  /* its handle on the producer, holding its metadata */
    bool eos;
    int test_commit_delay_ms;
    bool txn_open;      /* begin_transaction called, neither commit nor abort yet */
    bool paused;        /* lt_stage_pause: partitions assigned now are paused too */
    bool *owned;        /* [n_owned] partition p of the input topic is assigned */
    int32_t n_owned;
    void (*on_revoke)(void *arg, int32_t partition);
    void *arg;
    /* delivery failures of the current at-least-once batch (delivery reports
     * are served inside flush, on the calling thread) */
    int64_t batch_failed;
    char batch_error[256];
    lt_stage_stats stats;
};

static void set_owned(lt_stage *s, int32_t p, bool v) {
    if (p < 0) return;
    if (p >= s->n_owned) {
        if (!v) return;
        int32_t n = p + 1 > 2 * s->n_owned ? p + 1 : 2 * s->n_owned;
        bool *o = realloc(s->owned, (size_t)n * sizeof *o);
        if (!o) return; /* then lt_stage_owns says no: commits are dropped, never wrong */
        memset(o + s->n_owned, 0, (size_t)(n - s->n_owned) * sizeof *o);
        s->owned = o;
        s->n_owned = n;
    }
    s->owned[p] = v;
}

bool lt_stage_owns(const lt_stage *s, int32_t partition) {
    return partition >= 0 && partition < s->n_owned && s->owned[partition];
}

bool lt_stage_exactly_once(const lt_stage *s) { return s->eos; }

/* Aborts the open transaction; a failed abort leaves the producer unusable
 * (INVALID_TXN_STATE at the next begin): recreated by the caller then. */
static bool abort_txn(lt_stage *s) {
    if (!s->txn_open) return true;
    s->txn_open = false;
    s->stats.aborted++;
    rd_kafka_error_t *e = rd_kafka_abort_transaction(s->producer, STAGE_TXN_TIMEOUT_MS);
    if (!e) return true;
    lt__kafka_warn(&s->client.warner, "stage", rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    return false;
}

/* Revoked or lost partitions: whatever is in flight for them must not
 * commit, and the caller drops what it buffered. */
static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque) {
    lt_stage *s = opaque;
    bool coop = !strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE");
    rd_kafka_error_t *ce = NULL;
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        for (int i = 0; i < parts->cnt; i++)
            if (!strcmp(parts->elems[i].topic, s->topic))
                set_owned(s, parts->elems[i].partition, true);
        if (coop) ce = rd_kafka_incremental_assign(rk, parts);
        else e = rd_kafka_assign(rk, parts);
        if (s->paused && !ce && !e) rd_kafka_pause_partitions(rk, parts);
    } else {
        if (s->txn_open) abort_txn(s);
        for (int i = 0; parts && i < parts->cnt; i++) {
            if (strcmp(parts->elems[i].topic, s->topic)) continue;
            set_owned(s, parts->elems[i].partition, false);
            if (s->on_revoke) s->on_revoke(s->arg, parts->elems[i].partition);
        }
        if (coop) ce = rd_kafka_incremental_unassign(rk, parts);
        else e = rd_kafka_assign(rk, NULL);
    }
    int held = 0;
    for (int32_t p = 0; p < s->n_owned; p++) held += s->owned[p];
    lt_log(LT_LOG_INFO, "kafka stage: %s %d partitions of %s (%d held now)",
           err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS ? "assigned" : "revoked",
           parts ? parts->cnt : 0, s->topic, held);
    if (ce) {
        lt__kafka_warn(&s->client.warner, "stage", rd_kafka_error_string(ce));
        rd_kafka_error_destroy(ce);
    } else if (e) {
        lt__kafka_warn(&s->client.warner, "stage", rd_kafka_err2str(e));
    }
}

/* At-least-once offset commits, served in poll: only a failure is news. */
static void on_commit(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *offsets, void *opaque) {
    (void)rk;
    (void)offsets;
    lt_stage *s = opaque;
    if (!err || err == RD_KAFKA_RESP_ERR__NO_OFFSET) return;
    s->stats.commit_failed++;
    lt__kafka_warn(&s->client.warner, "stage", rd_kafka_err2str(err));
}

/* At-least-once delivery reports: count the batch's failures. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    lt_stage *s = opaque;
    if (!m->err) return;
    s->batch_failed++;
    snprintf(s->batch_error, sizeof s->batch_error, "%s", rd_kafka_err2str(m->err));
}

/* The output topic's metadata, fetched now: a producer learns an unknown
 * topic's partitions from librdkafka's periodic topic scan (every second),
 * so the first commit would wait up to a second for it. A failure only
 * leaves that wait. */
static void producer_warm(lt_stage *s) {
    if (!s->out_topic || !(s->out_rkt = rd_kafka_topic_new(s->producer, s->out_topic, NULL)))
        return;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(s->producer, 0, s->out_rkt, &md, 5000);
    if (e) lt_log(LT_LOG_DEBUG, "kafka stage: metadata of %s: %s", s->out_topic,
                  rd_kafka_err2str(e));
    else rd_kafka_metadata_destroy(md);
}

static void producer_destroy(lt_stage *s) {
    if (s->out_rkt) rd_kafka_topic_destroy(s->out_rkt);
    s->out_rkt = NULL;
    rd_kafka_destroy(s->producer);
    s->producer = NULL;
}

/* A producer from the kept configuration; with transactions, initialised
 * (which aborts what an earlier producer of the same transactional id left
 * open, and fences it). */
static int producer_start(lt_stage *s) {
    rd_kafka_conf_t *conf = rd_kafka_conf_dup(s->producer_conf);
    if (!conf) return lt_error(LT_ENOMEM, "kafka stage: out of memory");
    char err[512];
    s->producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!s->producer) {
        rd_kafka_conf_destroy(conf);
        return lt_error(LT_ECONFIG, "kafka stage: producer: %s", err);
    }
    rd_kafka_error_t *e = s->eos ? rd_kafka_init_transactions(s->producer, STAGE_TXN_TIMEOUT_MS)
                                 : NULL;
    if (!e) {
        producer_warm(s);
        return LT_OK;
    }
    int rc = lt_error(LT_EKAFKA, "kafka stage: init transactions: %s", rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    producer_destroy(s);
    return rc;
}

static int producer_restart(lt_stage *s) {
    s->txn_open = false;
    if (s->producer) {
        rd_kafka_purge(s->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        producer_destroy(s);
    }
    s->stats.producer_restarts++;
    lt_log(LT_LOG_WARN, "kafka stage: recreating the producer after a fatal error");
    return producer_start(s);
}

static int subscribe(lt_stage *s) {
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(subs, s->topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(s->consumer, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    return e ? lt__kafka_status(e, "kafka stage: subscribe") : LT_OK;
}

/* The partitions p of the input topic with p % of == index, from their
 * committed offsets (or auto.offset.reset), without a group join. */
static int take_share(lt_stage *s, int index, int of) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(s->consumer, s->topic, NULL);
    if (!rkt) return lt_error(LT_ENOMEM, "kafka stage: out of memory");
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e;
    /* a topic created a moment ago may have no leader yet: asked again */
    for (int tries = 0;; tries++) {
        e = rd_kafka_metadata(s->consumer, 0, rkt, &md, 10000);
        if (e || tries == 100 || md->topic_cnt != 1 ||
            md->topics[0].err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE)
            break;
        rd_kafka_metadata_destroy(md);
        md = NULL;
        nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
    }
    rd_kafka_topic_destroy(rkt);
    if (e) return lt__kafka_status(e, "kafka stage: metadata");
    int rc = LT_OK;
    if (md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt < 1)
        rc = lt_error(LT_ENOTFOUND, "kafka stage: topic '%s' does not exist", s->topic);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
    for (int i = 0; !rc && i < md->topics[0].partition_cnt; i++) {
        const int32_t p = md->topics[0].partitions[i].id;
        if (p % of != index) continue;
        rd_kafka_topic_partition_list_add(parts, s->topic, p);
        set_owned(s, p, true);
    }
    rd_kafka_metadata_destroy(md);
    if (!rc && (e = rd_kafka_assign(s->consumer, parts)))
        rc = lt__kafka_status(e, "kafka stage: assign");
    if (!rc)
        lt_log(LT_LOG_INFO, "kafka stage: took %d partitions of %s (member %d of %d, fixed)",
               parts->cnt, s->topic, index + 1, of);
    rd_kafka_topic_partition_list_destroy(parts);
    return rc;
}

int lt_stage_open(lt_stage **out, const lt_stage_opts *opts) {
    *out = NULL;
    if (!opts->group || !*opts->group) return lt_error(LT_EINVAL, "kafka stage: no group id");
    if (!opts->topic || !*opts->topic) return lt_error(LT_EINVAL, "kafka stage: no topic");
    if (opts->fixed_members > 0 &&
        (opts->fixed_index < 0 || opts->fixed_index >= opts->fixed_members))
        return lt_error(LT_EINVAL, "kafka stage: member %d of %d fixed members",
                        opts->fixed_index, opts->fixed_members);
    char session[32], heartbeat[32], txn_timeout[32];
    int st = opts->session_timeout_ms > 0 ? opts->session_timeout_ms : 6000;
    snprintf(session, sizeof session, "%d", st);
    /* members learn of a rebalance from a heartbeat's answer, and a
     * cooperative one takes two rounds: beat often */
    snprintf(heartbeat, sizeof heartbeat, "%d", st / 12 > 100 ? st / 12 : 100);
    snprintf(txn_timeout, sizeof txn_timeout, "%d",
             opts->transaction_timeout_ms > 0 ? opts->transaction_timeout_ms : 15000);
    const char *const cdefaults[] = {
        "group.id", opts->group,
        "partition.assignment.strategy", "cooperative-sticky",
        "session.timeout.ms", session,
        "heartbeat.interval.ms", heartbeat,
        /* outputs of a transaction that never committed are never input */
        "isolation.level", "read_committed",
        "enable.auto.commit", "false",
        "enable.auto.offset.store", "false",
        "auto.offset.reset", "earliest",
        "socket.connection.setup.timeout.ms", "10000",
        "fetch.wait.max.ms", "100",
        /* small requests go out at once: a task's round trip is a chain of them */
        "socket.nagle.disable", "true",
        NULL};
    const char *const pdefaults[] = {
        "enable.idempotence", "true",
        "linger.ms", "1",
        "compression.codec", "lz4",
        "transaction.timeout.ms", txn_timeout,
        /* librdkafka wants it <= transaction.timeout.ms */
        "message.timeout.ms", txn_timeout,
        "socket.connection.setup.timeout.ms", "10000",
        "socket.nagle.disable", "true",
        /* a transaction begun while the broker still writes the last one's
         * markers is refused (CONCURRENT_TRANSACTIONS) and retried after
         * this: 100 ms by default, which back-to-back commits hit often */
        "retry.backoff.ms", "20",
        NULL};
    lt_stage *s = calloc(1, sizeof *s);
    if (!s) return lt_error(LT_ENOMEM, "kafka stage: out of memory");
    lt__kafka_client_init(&s->client, "stage");
    s->eos = opts->transactional_id && *opts->transactional_id;
    s->test_commit_delay_ms = opts->test_commit_delay_ms;
    s->on_revoke = opts->on_revoke;
    s->arg = opts->arg;
    s->topic = strdup(opts->topic);
    if (opts->output_topic && *opts->output_topic) s->out_topic = strdup(opts->output_topic);
    rd_kafka_conf_t *cconf = NULL;
    int rc = s->topic && (s->out_topic || !opts->output_topic || !*opts->output_topic)
                 ? LT_OK
                 : lt_error(LT_ENOMEM, "kafka stage: out of memory");
    if (!rc) rc = lt__kafka_conf_new(&cconf, &opts->conn, cdefaults);
    if (!rc) rc = lt__kafka_conf_new(&s->producer_conf, &opts->conn, pdefaults);
    char err[512];
    if (!rc && opts->instance_id && *opts->instance_id &&
        rd_kafka_conf_set(cconf, "group.instance.id", opts->instance_id, err, sizeof err))
        rc = lt_error(LT_ECONFIG, "kafka stage: group.instance.id: %s", err);
    if (!rc && s->eos &&
        rd_kafka_conf_set(s->producer_conf, "transactional.id", opts->transactional_id, err,
                          sizeof err))
        rc = lt_error(LT_ECONFIG, "kafka stage: transactional.id: %s", err);
    if (rc) goto fail;
    /* the consumer's events (rebalances) and the producer's delivery reports
     * both reach the stage */
    lt__kafka_conf_callbacks(cconf, &s->client);
    rd_kafka_conf_set_opaque(cconf, s);
    rd_kafka_conf_set_rebalance_cb(cconf, on_rebalance);
    rd_kafka_conf_set_offset_commit_cb(cconf, on_commit);
    lt__kafka_conf_callbacks(s->producer_conf, &s->client);
    rd_kafka_conf_set_opaque(s->producer_conf, s);
    rd_kafka_conf_set_dr_msg_cb(s->producer_conf, on_delivery);
    s->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cconf, err, sizeof err);
    if (!s->consumer) {
        rc = lt_error(LT_ECONFIG, "kafka stage: consumer: %s", err);
        goto fail;
    }
    cconf = NULL;
    rd_kafka_poll_set_consumer(s->consumer);
    if ((rc = producer_start(s))) goto fail;
    if ((rc = opts->fixed_members > 0
                  ? take_share(s, opts->fixed_index, opts->fixed_members)
                  : subscribe(s)))
        goto fail;
    *out = s;
    return LT_OK;
fail:
    if (cconf) rd_kafka_conf_destroy(cconf);
    lt_stage_close(s);
    return rc;
}

int lt_stage_poll(lt_stage *s, int timeout_ms, lt_record *rec) {
    if (s->held) {
        rd_kafka_message_destroy(s->held);
        s->held = NULL;
    }
    uint64_t deadline = lt_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    for (;;) {
        uint64_t now = lt_now_ns();
        int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ull);
        rd_kafka_message_t *m = rd_kafka_consumer_poll(s->consumer, left);
        if (!m) return 0;
        if (!m->err) {
            s->held = m;
            lt__kafka_record_of(m, rec);
            return 1;
        }
        rd_kafka_resp_err_t err = m->err;
        rd_kafka_message_destroy(m);
        if (err == RD_KAFKA_RESP_ERR__FATAL) {
            char why[256];
            rd_kafka_fatal_error(s->consumer, why, sizeof why);
            return lt_error(LT_EKAFKA, "kafka stage: consumer: fatal error: %s", why);
        }
        if (err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
            err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
            return lt_error(LT_ENOTFOUND, "kafka stage: topic '%s' does not exist", s->topic);
        if (err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
            err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED)
            return lt__kafka_status(err, "kafka stage: consumer");
        if (err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            lt__kafka_warn(&s->client.warner, "stage", rd_kafka_err2str(err));
        if (lt_now_ns() >= deadline) return 0;
    }
}

static bool offsets_owned(const lt_stage *s, const lt_stage_offset *offs, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!lt_stage_owns(s, offs[i].partition)) return false;
    return true;
}

static rd_kafka_topic_partition_list_t *offset_list(const lt_stage *s, const lt_stage_offset *offs,
                                                    size_t n) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(l, s->topic, offs[i].partition)->offset = offs[i].offset;
    return l;
}

/* Queues one record; a full local queue is waited out (the records of a
 * commit must all go, or the commit fails). */
static rd_kafka_resp_err_t produce(lt_stage *s, const lt_stage_record *r) {
    for (int tries = 0;; tries++) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            s->producer, RD_KAFKA_V_TOPIC(r->topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(r->key, r->key_len), RD_KAFKA_V_VALUE((void *)r->value, r->len),
            RD_KAFKA_V_END);
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL || tries >= 300) return e;
        rd_kafka_poll(s->producer, 100);
    }
}

/* Tests: the records of a commit are on the broker, the commit not made. */
static void test_delay(lt_stage *s, size_t n) {
    if (s->test_commit_delay_ms <= 0 || !n) return;
    rd_kafka_flush(s->producer, STAGE_TXN_TIMEOUT_MS);
    lt_log(LT_LOG_INFO, "kafka stage: %zu records produced, committing in %d ms (test delay)", n,
           s->test_commit_delay_ms);
    struct timespec ts = {s->test_commit_delay_ms / 1000,
                          (long)(s->test_commit_delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* At-least-once: produce, wait for every acknowledgement, then commit. */
static int commit_plain(lt_stage *s, const lt_stage_record *recs, size_t n,
                        const lt_stage_offset *offs, size_t n_offs) {
    s->batch_failed = 0;
    s->batch_error[0] = 0;
    const uint64_t t0 = lt_now_ns();
    for (size_t i = 0; i < n; i++) {
        rd_kafka_resp_err_t e = produce(s, &recs[i]);
        if (e) return lt__kafka_status(e, "kafka stage: produce");
    }
    const uint64_t t1 = lt_now_ns();
    rd_kafka_resp_err_t e = rd_kafka_flush(s->producer, STAGE_TXN_TIMEOUT_MS);
    const uint64_t t2 = lt_now_ns();
    if (e) return lt__kafka_status(e, "kafka stage: flush");
    if (s->batch_failed)
        return lt_error(LT_EKAFKA, "kafka stage: %lld records not delivered: %s",
                        (long long)s->batch_failed, s->batch_error);
    s->stats.ms_produce += (double)(t1 - t0) * 1e-6;
    s->stats.ms_end += (double)(t2 - t1) * 1e-6;
    if (!n_offs) return LT_OK;
    test_delay(s, n);
    if (!offsets_owned(s, offs, n_offs)) {
        s->stats.dropped++;
        return lt_error(LT_ESTATE, "kafka stage: partitions moved to another member");
    }
    rd_kafka_topic_partition_list_t *l = offset_list(s, offs, n_offs);
    /* Asynchronous: the group coordinator holds offset commits back to
     * batch them (group.coordinator.append.linger.ms, 5 ms), which the next
     * task need not wait for. One that fails repeats tasks, as at least
     * once allows; closing the consumer waits for those in flight. */
    const uint64_t t3 = lt_now_ns();
    e = rd_kafka_commit(s->consumer, l, 1);
    rd_kafka_topic_partition_list_destroy(l);
    if (e) return lt__kafka_status(e, "kafka stage: commit offsets");
    s->stats.ms_offsets += (double)(lt_now_ns() - t3) * 1e-6;
    s->stats.committed++;
    return LT_OK;
}

/* What to do after a transactional call returned e (not NULL; destroyed
 * here): 1 retry the call, 2 abort and start over, 3 recreate the producer
 * and start over (fatal: fenced, or an invalid state after a timed-out
 * abort), 4 abort and give up: the group has a new generation without this
 * member's offsets. *why gets the text. */
static int classify(rd_kafka_error_t *e, char *why, size_t n) {
    snprintf(why, n, "%s", rd_kafka_error_string(e));
    /* the group moved on without this member: its offsets will not commit */
    switch (rd_kafka_error_code(e)) {
    case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
    case RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID:
    case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
        rd_kafka_error_destroy(e);
        return 4;
    default: break;
    }
    int what = rd_kafka_error_is_fatal(e)             ? 3
               : rd_kafka_error_txn_requires_abort(e) ? 2
               : rd_kafka_error_is_retriable(e)       ? 1
                                                      : 2;
    if (rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__STATE ||
        rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_INVALID_TXN_STATE)
        what = 3;
    rd_kafka_error_destroy(e);
    return what;
}

static int commit_txn(lt_stage *s, const lt_stage_record *recs, size_t n,
                      const lt_stage_offset *offs, size_t n_offs) {
    char why[512] = "";
    for (int attempt = 0; attempt < STAGE_TRIES; attempt++) {
        if (!offsets_owned(s, offs, n_offs)) {
            s->stats.dropped++;
            return lt_error(LT_ESTATE, "kafka stage: partitions moved to another member");
        }
        if (!s->producer && producer_start(s)) {
            snprintf(why, sizeof why, "%s", lt_errmsg());
            continue;
        }
        /* each call's time, for the stats of a transaction that lands */
        uint64_t t[5];
        t[0] = lt_now_ns();
        rd_kafka_error_t *e = rd_kafka_begin_transaction(s->producer);
        t[1] = t[2] = t[3] = lt_now_ns();
        int what = 0;
        if (e) {
            what = classify(e, why, sizeof why);
        } else {
            s->txn_open = true;
            for (size_t i = 0; i < n && !what; i++) {
                rd_kafka_resp_err_t pe = produce(s, &recs[i]);
                if (pe) {
                    snprintf(why, sizeof why, "produce: %s", rd_kafka_err2str(pe));
                    what = pe == RD_KAFKA_RESP_ERR__FATAL ? 3 : 2;
                }
            }
            t[2] = t[3] = lt_now_ns();
            if (!what) test_delay(s, n);
            if (!what && n_offs) {
                rd_kafka_topic_partition_list_t *l = offset_list(s, offs, n_offs);
                rd_kafka_consumer_group_metadata_t *gm =
                    rd_kafka_consumer_group_metadata(s->consumer);
                e = rd_kafka_send_offsets_to_transaction(s->producer, l, gm,
                                                         STAGE_TXN_TIMEOUT_MS);
                rd_kafka_consumer_group_metadata_destroy(gm);
                rd_kafka_topic_partition_list_destroy(l);
                if (e) what = classify(e, why, sizeof why);
                t[3] = lt_now_ns();
            }
            for (int r = 0; !what && r < 3; r++) {
                /* a revoke inside send_offsets' wait aborted it already */
                if (!s->txn_open) {
                    snprintf(why, sizeof why, "partitions revoked during the transaction");
                    what = 2;
                    break;
                }
                e = rd_kafka_commit_transaction(s->producer, STAGE_TXN_TIMEOUT_MS);
                if (!e) {
                    t[4] = lt_now_ns();
                    s->txn_open = false;
                    s->stats.committed++;
                    s->stats.ms_begin += (double)(t[1] - t[0]) * 1e-6;
                    s->stats.ms_produce += (double)(t[2] - t[1]) * 1e-6;
                    s->stats.ms_offsets += (double)(t[3] - t[2]) * 1e-6;
                    s->stats.ms_end += (double)(t[4] - t[3]) * 1e-6;
                    return LT_OK;
                }
                what = classify(e, why, sizeof why);
                if (what == 1) {
                    s->stats.retried++;
                    what = 0; /* commit_transaction may be called again */
                }
            }
        }
        if (what == 4) {
            if (!abort_txn(s) && producer_restart(s))
                lt_log(LT_LOG_WARN, "kafka stage: %s", lt_errmsg());
            s->stats.dropped++;
            return lt_error(LT_ESTATE, "kafka stage: the group moved on (%s)", why);
        }
        /* a retriable error inside an open transaction: start it over */
        if (what == 1 && s->txn_open) what = 2;
        if (what == 1) s->stats.retried++;
        if (what == 2 && !abort_txn(s)) what = 3;
        if (what == 3 && producer_restart(s)) snprintf(why, sizeof why, "%s", lt_errmsg());
        lt_log(LT_LOG_WARN, "kafka stage: transaction %s (%s); %s",
               what == 3 ? "failed" : what == 2 ? "aborted" : "not begun", why,
               attempt + 1 < STAGE_TRIES ? "trying again" : "giving up");
    }
    return lt_error(LT_EKAFKA, "kafka stage: no transaction committed in %d tries: %s",
                    STAGE_TRIES, why);
}

int lt_stage_commit(lt_stage *s, const lt_stage_record *recs, size_t n,
                    const lt_stage_offset *offs, size_t n_offs) {
    return s->eos ? commit_txn(s, recs, n, offs, n_offs) : commit_plain(s, recs, n, offs, n_offs);
}

int lt_stage_rewind(lt_stage *s, int32_t partition) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, s->topic, partition);
    rd_kafka_resp_err_t e = rd_kafka_committed(s->consumer, l, 10000);
    int rc = LT_OK;
    if (e) {
        rc = lt__kafka_status(e, "kafka stage: committed offsets");
    } else {
        /* nothing committed yet: from the oldest record, as auto.offset.reset */
        if (l->elems[0].offset < 0) l->elems[0].offset = RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_error_t *se = rd_kafka_seek_partitions(s->consumer, l, 10000);
        if (se) {
            rc = lt_error(LT_EKAFKA, "kafka stage: seek: %s", rd_kafka_error_string(se));
            rd_kafka_error_destroy(se);
        } else if (l->elems[0].err) {
            rc = lt__kafka_status(l->elems[0].err, "kafka stage: seek");
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

int lt_stage_pause(lt_stage *s, bool paused) {
    if (s->paused == paused) return LT_OK;
    rd_kafka_topic_partition_list_t *l = NULL;
    rd_kafka_resp_err_t e = rd_kafka_assignment(s->consumer, &l);
    if (!e && l->cnt)
        e = paused ? rd_kafka_pause_partitions(s->consumer, l)
                   : rd_kafka_resume_partitions(s->consumer, l);
    if (l) rd_kafka_topic_partition_list_destroy(l);
    if (e) return lt__kafka_status(e, paused ? "kafka stage: pause" : "kafka stage: resume");
    s->paused = paused;
    return LT_OK;
}

void lt_stage_stats_get(const lt_stage *s, lt_stage_stats *out) { *out = s->stats; }

void lt_stage_close(lt_stage *s) {
    if (!s) return;
    if (s->held) rd_kafka_message_destroy(s->held);
    if (s->consumer) {
        /* leaves the group: the revoke callback aborts an open transaction */
        rd_kafka_resp_err_t err = rd_kafka_consumer_close(s->consumer);
        if (err) lt_log(LT_LOG_WARN, "kafka stage: leaving the group: %s", rd_kafka_err2str(err));
        rd_kafka_destroy(s->consumer);
    }
    if (s->producer) {
        if (s->txn_open) abort_txn(s);
        rd_kafka_flush(s->producer, 5000);
        producer_destroy(s);
    }
    if (s->producer_conf) rd_kafka_conf_destroy(s->producer_conf);
    lt__kafka_client_destroy(&s->client);
    free(s->owned);
    free(s->topic);
    free(s->out_topic);
    free(s);
}
