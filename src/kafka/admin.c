/* Topic administration: create the topics that are missing (partitions,
 * replication and topic configs given), the looptune topic set with its
 * compacted `configs` topic, and describe a topic back (partition count,
 * replication, configs) to check what the broker actually holds. */
#include "kafka_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct lt_kafka_admin {
    lt__kafka_client client; /* first: it is the librdkafka opaque */
    rd_kafka_t *rk;
    rd_kafka_queue_t *q; /* results of admin requests */
};

static const char *const topic_suffix[LT_TOPIC_COUNT] = {
    [LT_TOPIC_TELEMETRY] = "telemetry", [LT_TOPIC_CONTROL] = "control",
    [LT_TOPIC_CONFIGS] = "configs",     [LT_TOPIC_TASKS] = "tasks",
    [LT_TOPIC_RESULTS] = "results",     [LT_TOPIC_TRIALS] = "trials",
    [LT_TOPIC_TASKS_DEAD] = "tasks.dead",
    [LT_TOPIC_REQUESTS] = "requests",   [LT_TOPIC_COMPLETIONS] = "completions",
};
_Static_assert(sizeof topic_suffix / sizeof topic_suffix[0] == LT_TOPIC_COUNT, "topic names");

const char *lt_kafka_topic_suffix(lt_kafka_topic t) {
    LT_ASSERT((int)t >= 0 && t < LT_TOPIC_COUNT);
    return topic_suffix[t];
}

int lt_kafka_admin_open(lt_kafka_admin **out, const lt_kafka_conn *conn) {
    *out = NULL;
    const char *const defaults[] = {"socket.connection.setup.timeout.ms", "10000", NULL};
    rd_kafka_conf_t *conf;
    int rc = lt__kafka_conf_new(&conf, conn, defaults);
    if (rc) return rc;
    lt_kafka_admin *a = calloc(1, sizeof *a);
    if (!a) {
        rd_kafka_conf_destroy(conf);
        return lt_error(LT_ENOMEM, "kafka admin: out of memory");
    }
    lt__kafka_client_init(&a->client, "admin");
    lt__kafka_conf_callbacks(conf, &a->client);
    char err[512];
    a->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!a->rk) {
        rd_kafka_conf_destroy(conf);
        lt__kafka_client_destroy(&a->client);
        free(a);
        return lt_error(LT_ECONFIG, "kafka admin: %s", err);
    }
    a->q = rd_kafka_queue_new(a->rk);
    *out = a;
    return LT_OK;
}

void lt_kafka_admin_close(lt_kafka_admin *a) {
    if (!a) return;
    rd_kafka_queue_destroy(a->q);
    rd_kafka_destroy(a->rk);
    lt__kafka_client_destroy(&a->client);
    free(a);
}

/* Waits for the result event of the request just made. */
static int wait_event(lt_kafka_admin *a, int timeout_ms, const char *what, rd_kafka_event_t **ev) {
    /* The handle's own events (errors, logs) are served here as well: an
     * admin client has no other poller. */
    uint64_t deadline = lt_now_ns() + (uint64_t)(timeout_ms + 1000) * 1000000ull;
    *ev = NULL;
    while (!*ev && lt_now_ns() < deadline) {
        rd_kafka_poll(a->rk, 0);
        *ev = rd_kafka_queue_poll(a->q, 100);
    }
    if (!*ev) {
        char last[256];
        lt__kafka_last_error(&a->client, last, sizeof last);
        return lt_error(LT_ETIMEOUT, "kafka admin: %s: no answer within %d ms%s%s", what,
                        timeout_ms, last[0] ? "; last error: " : "", last);
    }
    rd_kafka_resp_err_t err = rd_kafka_event_error(*ev);
    if (err) {
        char last[256];
        lt__kafka_last_error(&a->client, last, sizeof last);
        int rc = lt_error(err == RD_KAFKA_RESP_ERR__TIMED_OUT ? LT_ETIMEOUT : LT_EKAFKA,
                          "kafka admin: %s: %s%s%s", what, rd_kafka_event_error_string(*ev),
                          last[0] ? "; last error: " : "", last);
        rd_kafka_event_destroy(*ev);
        *ev = NULL;
        return rc;
    }
    return LT_OK;
}

static rd_kafka_AdminOptions_t *admin_options(lt_kafka_admin *a, rd_kafka_admin_op_t op,
                                              int timeout_ms) {
    rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(a->rk, op);
    char err[256];
    rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, err, sizeof err);
    if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS)
        rd_kafka_AdminOptions_set_operation_timeout(o, timeout_ms, err, sizeof err);
    return o;
}

/* Partition count and replication of topic from cluster metadata. */
static int describe_partitions(lt_kafka_admin *a, const char *topic, int timeout_ms,
                               lt_topic_info *out) {
    const struct rd_kafka_metadata *md;
    /* all topics: asking for one by handle could create it on the broker */
    rd_kafka_resp_err_t e = rd_kafka_metadata(a->rk, 1, NULL, &md, timeout_ms);
    if (e) return lt__kafka_status(e, "kafka admin: metadata");
    int rc = lt_error(LT_ENOTFOUND, "kafka admin: topic '%s' does not exist", topic);
    for (int i = 0; i < md->topic_cnt; i++) {
        const rd_kafka_metadata_topic_t *t = &md->topics[i];
        if (strcmp(t->topic, topic)) continue;
        if (t->err) {
            rc = lt__kafka_status(t->err, "kafka admin: topic metadata");
            break;
        }
        out->partitions = t->partition_cnt;
        out->replication = t->partition_cnt ? t->partitions[0].replica_cnt : 0;
        rc = LT_OK;
        break;
    }
    rd_kafka_metadata_destroy(md);
    return rc;
}

/* Waits until every topic in names is in the cluster metadata with leaders
 * for all its partitions: a created topic is then usable at once. */
static int wait_visible(lt_kafka_admin *a, const char *const *names, size_t n, int timeout_ms) {
    uint64_t deadline = lt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        size_t ready = 0;
        const struct rd_kafka_metadata *md;
        if (rd_kafka_metadata(a->rk, 1, NULL, &md, timeout_ms) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            for (size_t k = 0; k < n; k++)
                for (int i = 0; i < md->topic_cnt; i++) {
                    const rd_kafka_metadata_topic_t *t = &md->topics[i];
                    if (strcmp(t->topic, names[k]) || t->err || !t->partition_cnt) continue;
                    bool led = true;
                    for (int j = 0; j < t->partition_cnt; j++)
                        if (t->partitions[j].leader < 0) led = false;
                    ready += led;
                    break;
                }
            rd_kafka_metadata_destroy(md);
        }
        if (ready == n) return LT_OK;
        if (lt_now_ns() >= deadline)
            return lt_error(LT_ETIMEOUT, "kafka admin: %zu of %zu new topics not visible in the "
                                         "cluster metadata after %d ms", n - ready, n, timeout_ms);
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
}

int lt_kafka_admin_create_topics(lt_kafka_admin *a, const lt_topic_spec *specs, size_t n,
                                 int timeout_ms, size_t *created) {
    if (created) *created = 0;
    if (!n) return LT_OK;
    rd_kafka_NewTopic_t **nt = calloc(n, sizeof *nt);
    if (!nt) return lt_error(LT_ENOMEM, "kafka admin: out of memory");
    int rc = LT_OK;
    char err[512];
    for (size_t i = 0; i < n && rc == LT_OK; i++) {
        const lt_topic_spec *s = &specs[i];
        nt[i] = rd_kafka_NewTopic_new(s->name, s->partitions, s->replication, err, sizeof err);
        if (!nt[i]) {
            rc = lt_error(LT_EINVAL, "kafka admin: topic '%s': %s", s->name, err);
            break;
        }
        for (size_t k = 0; k < s->n_configs && rc == LT_OK; k++) {
            const char *kv = s->configs[k], *eq = strchr(kv, '=');
            char key[128];
            if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key) {
                rc = lt_error(LT_EINVAL, "kafka admin: topic '%s': config '%s': expected key=value",
                              s->name, kv);
                break;
            }
            memcpy(key, kv, (size_t)(eq - kv));
            key[eq - kv] = 0;
            rd_kafka_resp_err_t e = rd_kafka_NewTopic_set_config(nt[i], key, eq + 1);
            if (e) rc = lt__kafka_status(e, "kafka admin: topic config");
        }
    }
    if (rc == LT_OK) {
        rd_kafka_AdminOptions_t *o = admin_options(a, RD_KAFKA_ADMIN_OP_CREATETOPICS, timeout_ms);
        rd_kafka_CreateTopics(a->rk, nt, n, o, a->q);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_event_t *ev;
        if ((rc = wait_event(a, timeout_ms, "create topics", &ev)) == LT_OK) {
            size_t cnt;
            const rd_kafka_topic_result_t **res =
                rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
            const char **made = calloc(cnt ? cnt : 1, sizeof *made);
            size_t n_made = 0;
            for (size_t i = 0; i < cnt; i++) {
                rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
                if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
                    if (made) made[n_made++] = rd_kafka_topic_result_name(res[i]);
                } else if (e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS && rc == LT_OK) {
                    const char *msg = rd_kafka_topic_result_error_string(res[i]);
                    rc = lt_error(lt__kafka_status(e, "create topic"),
                                  "kafka admin: create topic '%s': %s",
                                  rd_kafka_topic_result_name(res[i]),
                                  msg && *msg ? msg : rd_kafka_err2str(e));
                }
            }
            if (!made && rc == LT_OK) rc = lt_error(LT_ENOMEM, "kafka admin: out of memory");
            if (rc == LT_OK && n_made) rc = wait_visible(a, made, n_made, timeout_ms);
            if (created) *created = n_made;
            free(made);
            rd_kafka_event_destroy(ev);
        }
    }
    for (size_t i = 0; i < n; i++)
        if (nt[i]) rd_kafka_NewTopic_destroy(nt[i]);
    free(nt);
    return rc;
}

int lt_kafka_admin_ensure_topics(lt_kafka_admin *a, const char *prefix, int32_t partitions,
                                 int16_t replication, int timeout_ms) {
    if (!prefix) prefix = LT_KAFKA_TOPIC_PREFIX;
    char names[LT_TOPIC_COUNT][256];
    lt_topic_spec specs[LT_TOPIC_COUNT];
    static const char *const compact[] = {"cleanup.policy=compact"};
    for (int t = 0; t < LT_TOPIC_COUNT; t++) {
        int len = snprintf(names[t], sizeof names[t], "%s%s", prefix, topic_suffix[t]);
        if (len < 0 || (size_t)len >= sizeof names[t])
            return lt_error(LT_EINVAL, "kafka admin: topic prefix '%.64s...' too long", prefix);
        specs[t] = (lt_topic_spec){.name = names[t], .partitions = partitions,
                                   .replication = replication};
        if (t == LT_TOPIC_CONFIGS) {
            specs[t].configs = compact;
            specs[t].n_configs = 1;
        }
    }
    size_t created;
    int rc = lt_kafka_admin_create_topics(a, specs, LT_TOPIC_COUNT, timeout_ms, &created);
    if (rc == LT_OK && created)
        lt_log(LT_LOG_INFO, "kafka: created %zu of the %d looptune topics (prefix '%s')", created,
               LT_TOPIC_COUNT, prefix);
    return rc;
}

int lt_kafka_admin_describe_topic(lt_kafka_admin *a, const char *topic, int timeout_ms,
                                  lt_topic_info *out) {
    memset(out, 0, sizeof *out);
    int rc = describe_partitions(a, topic, timeout_ms, out);
    if (rc) return rc;
    if ((rc = lt_kafka_props_init(&out->configs))) return rc;

    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_AdminOptions_t *o = admin_options(a, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, timeout_ms);
    rd_kafka_DescribeConfigs(a->rk, &res, 1, o, a->q);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_ConfigResource_destroy(res);
    rd_kafka_event_t *ev;
    if ((rc = wait_event(a, timeout_ms, "describe configs", &ev)) == LT_OK) {
        size_t cnt;
        const rd_kafka_ConfigResource_t **rs = rd_kafka_DescribeConfigs_result_resources(
            rd_kafka_event_DescribeConfigs_result(ev), &cnt);
        if (cnt != 1) {
            rc = lt_error(LT_EKAFKA, "kafka admin: describe configs of '%s': %zu answers", topic,
                          cnt);
        } else if (rd_kafka_ConfigResource_error(rs[0])) {
            rc = lt_error(LT_EKAFKA, "kafka admin: describe configs of '%s': %s", topic,
                          rd_kafka_ConfigResource_error_string(rs[0]));
        } else {
            size_t ne;
            const rd_kafka_ConfigEntry_t **ents = rd_kafka_ConfigResource_configs(rs[0], &ne);
            for (size_t i = 0; i < ne && rc == LT_OK; i++) {
                const char *v = rd_kafka_ConfigEntry_value(ents[i]);
                rc = lt_kafka_props_set(out->configs, rd_kafka_ConfigEntry_name(ents[i]),
                                        v ? v : "");
            }
        }
        rd_kafka_event_destroy(ev);
    }
    if (rc) {
        lt_kafka_props_free(out->configs);
        out->configs = NULL;
    }
    return rc;
}
