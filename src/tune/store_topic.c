/* The config store's Kafka backend: the fleet-wide store is a log-compacted
 * topic keyed "kernel|shape|host class", one looptune.Envelope holding a
 * Config per record. Loading reads the whole topic once (latest record per
 * key, tombstones delete, bad records are skipped and counted); saving
 * publishes every entry. Also the Config <-> entry conversion the online
 * optimizer uses to publish a new best. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune_internal.h"

/* ---- Config envelope <-> entry -------------------------------------------------------- */

int lt_config_to_envelope(const lt_config_entry *e, lt_config_msg *buf) {
    lt_space sp;
    lt_params p;
    int rc = lt__config_entry_check(e, &sp, &p);
    if (rc) return rc;
    memset(buf, 0, sizeof *buf);
    lt_envelope_init(&buf->env);
    looptune__config__init(&buf->cfg);
    looptune__config_stats__init(&buf->stats);
    for (int i = 0; i < sp.n_params; i++) {
        looptune__param__init(&buf->prm[i]);
        snprintf(buf->names[i], sizeof buf->names[i], "%s", sp.params[i].name);
        buf->prm[i].name = buf->names[i];
        buf->prm[i].value = p.v[i];
        buf->pp[i] = &buf->prm[i];
    }
    /* protobuf-c's strings are not const; packing only reads them */
    buf->cfg.kernel = (char *)e->kernel;
    buf->cfg.shape = (char *)e->shape;
    buf->cfg.host_class = (char *)e->host;
    buf->cfg.n_params = (size_t)sp.n_params;
    buf->cfg.params = buf->pp;
    buf->stats.samples = (uint64_t)e->samples;
    buf->stats.median_ns = e->median_ns;
    buf->stats.speedup = e->speedup;
    buf->stats.trials = (uint32_t)e->trials;
    buf->stats.converged = e->converged;
    buf->cfg.stats = &buf->stats;
    buf->env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CONFIG;
    buf->env.config = &buf->cfg;
    return LT_OK;
}

/* Copies a message string into an entry field; false if it does not fit. */
static bool copy_field(char *dst, size_t cap, const char *src) {
    if (!src) src = "";
    size_t n = strlen(src);
    if (n >= cap) return false;
    memcpy(dst, src, n + 1);
    return true;
}

int lt_config_from_envelope(const Looptune__Envelope *env, lt_config_entry *out) {
    memset(out, 0, sizeof *out);
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_CONFIG || !env->config)
        return lt_error(LT_EFORMAT, "a %s record where a config was expected",
                        lt_envelope_kind(env));
    const Looptune__Config *c = env->config;
    if (!copy_field(out->kernel, sizeof out->kernel, c->kernel) ||
        !copy_field(out->shape, sizeof out->shape, c->shape) ||
        !copy_field(out->host, sizeof out->host, c->host_class))
        return lt_error(LT_EFORMAT, "config: kernel, shape or host class longer than %zu, %zu, "
                                    "%zu bytes", sizeof out->kernel - 1, sizeof out->shape - 1,
                        sizeof out->host - 1);
    if (!c->stats) return lt_error(LT_EFORMAT, "config %s %s: no stats", out->kernel, out->shape);
    /* the params as "name=value,..." text: lt_space_parse then checks every
     * parameter once, known, in range and allowed */
    char text[512];
    size_t len = 0;
    text[0] = 0;
    for (size_t i = 0; i < c->n_params; i++) {
        const char *name = c->params[i] && c->params[i]->name ? c->params[i]->name : "";
        if (!*name || strpbrk(name, "=,"))
            return lt_error(LT_EFORMAT, "config %s %s: bad parameter name '%.40s'", out->kernel,
                            out->shape, name);
        int w = snprintf(text + len, sizeof text - len, "%s%s=%" PRId64, i ? "," : "", name,
                         c->params[i]->value);
        if (w < 0 || (size_t)w >= sizeof text - len)
            return lt_error(LT_EFORMAT, "config %s %s: parameters too long", out->kernel,
                            out->shape);
        len += (size_t)w;
    }
    lt_space sp;
    lt_params p;
    int rc = lt_space_by_name(out->kernel, &sp);
    if (!rc) rc = lt_space_parse(&sp, text, &p);
    if (rc) return rc;
    /* canonical order: the space's */
    if (lt_space_format(&sp, &p, out->params, sizeof out->params) >= sizeof out->params)
        return lt_error(LT_EFORMAT, "config %s %s: parameters too long", out->kernel, out->shape);
    const Looptune__ConfigStats *st = c->stats;
    if (st->samples > (uint64_t)INT64_MAX)
        return lt_error(LT_EFORMAT, "config %s %s: samples out of range", out->kernel,
                        out->shape);
    out->samples = (int64_t)st->samples;
    out->median_ns = st->median_ns;
    out->speedup = st->speedup;
    out->trials = st->trials;
    out->converged = st->converged;
    return lt__config_entry_check(out, &sp, &p);
}

int lt_store_topic_publish(lt_producer *p, const lt_config_entry *e) {
    lt_config_msg m;
    int rc = lt_config_to_envelope(e, &m);
    if (rc) return rc;
    return lt_producer_send_envelope(p, NULL, &m.env);
}

/* ---- the backend ------------------------------------------------------------------ */

typedef struct {
    char *topic, *brokers, *client_id, *name;
    lt_kafka_props *props; /* NULL when the conn had none */
    lt_kafka_conn conn;    /* points at the copies above */
    int timeout_ms;
} topic_ctx;

/* One record into the store: 0 when applied, 1 when skipped (logged), or a
 * negative status the load must stop for. */
static int load_record(topic_ctx *c, lt_store *s, const lt_record *r) {
    lt_config_entry e;
    char key[sizeof e.kernel + sizeof e.shape + sizeof e.host];
    int rc;
    if (!r->value) { /* a tombstone: the key's configuration is withdrawn */
        if (r->key) {
            lt__store_remove_key(s, r->key, r->key_len);
            return 0;
        }
        rc = lt_error(LT_EFORMAT, "a tombstone without a key");
    } else {
        Looptune__Envelope *env;
        rc = lt_envelope_decode(r->value, r->len, &env);
        if (!rc) {
            rc = lt_config_from_envelope(env, &e);
            lt_envelope_free(env);
        }
        if (!rc) {
            /* compaction keeps the latest record per record key: a key that
             * is not the config's own would keep the wrong one */
            size_t kl = (size_t)snprintf(key, sizeof key, "%s|%s|%s", e.kernel, e.shape, e.host);
            int shown = r->key_len < 200 ? (int)r->key_len : 200;
            if (!r->key)
                rc = lt_error(LT_EFORMAT, "config %s without a record key", key);
            else if (r->key_len != kl || memcmp(r->key, key, kl))
                rc = lt_error(LT_EFORMAT, "record key '%.*s' is not its config's key '%s'", shown,
                              (const char *)r->key, key);
        }
        if (!rc) rc = lt_store_put(s, &e);
        if (rc == LT_ENOMEM) return rc;
    }
    if (!rc) return 0;
    lt_log(LT_LOG_WARN, "%s: partition %d offset %lld: record skipped: %s", c->topic,
           (int)r->partition, (long long)r->offset, lt_errmsg());
    return 1;
}

static int topic_load(void *vctx, lt_store *s) {
    topic_ctx *c = vctx;
    lt_kafka_reader *r;
    int rc = lt_kafka_reader_open(&r, &c->conn, c->topic, c->timeout_ms);
    if (rc == LT_ENOTFOUND) return 0; /* no store yet */
    if (rc) return rc;
    int skipped = 0;
    lt_record rec;
    while ((rc = lt_kafka_reader_next(r, c->timeout_ms, &rec)) == 1) {
        int k = load_record(c, s, &rec);
        if (k < 0) {
            rc = k;
            break;
        }
        skipped += k;
    }
    lt_kafka_reader_close(r);
    return rc < 0 ? rc : skipped;
}

/* Creates the topic, compacted, when it is missing; warns when an existing
 * one is not compacted (old configurations would then expire or pile up). */
static int ensure_topic(topic_ctx *c) {
    lt_kafka_admin *a;
    int rc = lt_kafka_admin_open(&a, &c->conn);
    if (rc) return rc;
    static const char *const compact[] = {"cleanup.policy=compact"};
    lt_topic_spec spec = {.name = c->topic, .partitions = -1, .replication = -1,
                          .configs = compact, .n_configs = 1};
    size_t created = 0;
    rc = lt_kafka_admin_create_topics(a, &spec, 1, c->timeout_ms, &created);
    if (!rc && !created) {
        lt_topic_info info;
        if (lt_kafka_admin_describe_topic(a, c->topic, c->timeout_ms, &info) == LT_OK) {
            const char *cp = lt_kafka_props_get(info.configs, "cleanup.policy");
            if (!cp || !strstr(cp, "compact"))
                lt_log(LT_LOG_WARN, "config store: topic %s has cleanup.policy=%s, not compact",
                       c->topic, cp ? cp : "(unknown)");
            lt_kafka_props_free(info.configs);
        }
    }
    lt_kafka_admin_close(a);
    return rc;
}

static int topic_save(void *vctx, const lt_store *s) {
    topic_ctx *c = vctx;
    int rc = ensure_topic(c);
    if (rc) return rc;
    lt_producer *p;
    lt_producer_opts po = {.conn = c->conn, .topic = c->topic, .close_timeout_ms = c->timeout_ms};
    if ((rc = lt_producer_open(&p, &po))) return rc;
    int n = lt_store_count(s);
    for (int i = 0; i < n && rc >= 0; i++) {
        const lt_config_entry *e = lt_store_at(s, i);
        rc = lt_store_topic_publish(p, e);
        if (rc == LT_PRODUCER_DROPPED) { /* local queue full: let it drain, once */
            lt_producer_flush(p, c->timeout_ms);
            rc = lt_store_topic_publish(p, e);
            if (rc == LT_PRODUCER_DROPPED)
                rc = lt_error(LT_ETIMEOUT, "%s: the producer's queue stays full", c->name);
        }
    }
    if (rc >= 0) {
        rc = lt_producer_flush(p, c->timeout_ms);
        if (rc) rc = lt_error(rc, "%s: %s", c->name, lt_errmsg());
    }
    if (rc == LT_OK) { /* flushed: every record is acknowledged or failed */
        lt_producer_stats st;
        lt_producer_stats_get(p, &st);
        if (st.delivered != n)
            rc = lt_error(LT_EKAFKA, "%s: %lld of %d configurations not delivered%s%s", c->name,
                          (long long)(n - st.delivered), n, st.last_error[0] ? ": " : "",
                          st.last_error);
    }
    lt_producer_close(p);
    return rc < 0 ? rc : LT_OK;
}

static void topic_free(void *vctx) {
    topic_ctx *c = vctx;
    if (!c) return;
    free(c->topic);
    free(c->brokers);
    free(c->client_id);
    free(c->name);
    lt_kafka_props_free(c->props);
    free(c);
}

static char *dup_or_null(const char *s, bool *failed) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *failed = true;
    return d;
}

int lt_store_backend_topic(lt_store_backend *out, const lt_kafka_conn *conn, const char *topic,
                           int timeout_ms) {
    memset(out, 0, sizeof *out);
    if (!topic || !*topic) return lt_error(LT_EINVAL, "config store: no topic");
    topic_ctx *c = calloc(1, sizeof *c);
    if (!c) return lt_error(LT_ENOMEM, "config store: out of memory");
    bool failed = false;
    c->topic = dup_or_null(topic, &failed);
    c->brokers = dup_or_null(conn->brokers, &failed);
    c->client_id = dup_or_null(conn->client_id, &failed);
    int rc = LT_OK;
    if (!failed && conn->props) {
        rc = lt_kafka_props_init(&c->props);
        for (size_t i = 0; !rc && i < lt_kafka_props_count(conn->props); i++) {
            const char *k, *v;
            lt_kafka_props_at(conn->props, i, &k, &v);
            rc = lt_kafka_props_set(c->props, k, v);
        }
    }
    /* for messages: where the store is */
    const char *where = c->brokers ? c->brokers : lt_kafka_props_get(c->props, "bootstrap.servers");
    size_t n = strlen(topic) + (where ? strlen(where) : 0) + 8;
    if (!failed && !rc && (c->name = malloc(n)))
        snprintf(c->name, n, where ? "%s on %s" : "%s", topic, where);
    if (failed || rc || !c->name) {
        topic_free(c);
        return rc && rc != LT_ENOMEM ? rc : lt_error(LT_ENOMEM, "config store: out of memory");
    }
    c->conn = (lt_kafka_conn){.brokers = c->brokers, .props = c->props, .client_id = c->client_id};
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
    out->name = c->name;
    out->load = topic_load;
    out->save = topic_save;
    out->free = topic_free;
    out->ctx = c;
    return LT_OK;
}
