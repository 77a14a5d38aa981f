/* What every kafka client shares: its librdkafka configuration (defaults,
 * then the user's properties), its log and error callbacks, and the mapping
 * from librdkafka errors to looptune status codes, and the name a group
 * member goes by. */
#include "kafka_internal.h"

#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

int lt__kafka_conf_new(rd_kafka_conf_t **out, const lt_kafka_conn *conn,
                       const char *const *defaults) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (!conf) return lt_error(LT_ENOMEM, "kafka: out of memory");
    char err[512];
    const char *bad = NULL;
    /* looptune's defaults: wrong values here are programming errors */
    for (size_t i = 0; defaults && defaults[i]; i += 2) {
        const char *v = defaults[i + 1];
        if (conn && conn->in_process && !strcmp(defaults[i], "fetch.wait.max.ms"))
            v = LT_KAFKA_IN_PROCESS_FETCH_WAIT_MS;
        if (rd_kafka_conf_set(conf, defaults[i], v, err, sizeof err) != RD_KAFKA_CONF_OK) {
            bad = defaults[i];
            goto fail;
        }
    }
    if (conn && conn->brokers &&
        rd_kafka_conf_set(conf, "bootstrap.servers", conn->brokers, err, sizeof err) !=
            RD_KAFKA_CONF_OK) {
        bad = "bootstrap.servers";
        goto fail;
    }
    const char *id = conn && conn->client_id ? conn->client_id : "looptune";
    if (rd_kafka_conf_set(conf, "client.id", id, err, sizeof err) != RD_KAFKA_CONF_OK) {
        bad = "client.id";
        goto fail;
    }
    const lt_kafka_props *props = conn ? conn->props : NULL;
    for (size_t i = 0; i < lt_kafka_props_count(props); i++) {
        const char *k, *v;
        lt_kafka_props_at(props, i, &k, &v);
        if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
            bad = k;
            goto fail;
        }
    }
    /* Without a bootstrap list librdkafka would wait for one forever. */
    size_t n = 0;
    if (rd_kafka_conf_get(conf, "bootstrap.servers", NULL, &n) != RD_KAFKA_CONF_OK || n <= 1) {
        rd_kafka_conf_destroy(conf);
        return lt_error(LT_ECONFIG, "kafka: no broker address: give --brokers HOST:PORT or "
                                    "-X bootstrap.servers=HOST:PORT");
    }
    *out = conf;
    return LT_OK;
fail:
    rd_kafka_conf_destroy(conf);
    return lt_error(LT_ECONFIG, "kafka property '%s': %s", bad, err);
}

/* ---- warnings ---------------------------------------------------------------- */

#define LT__WARN_INTERVAL_NS 10000000000ull

void lt__kafka_warner_init(lt__kafka_warner *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
}

void lt__kafka_warner_destroy(lt__kafka_warner *w) { pthread_mutex_destroy(&w->mu); }

void lt__kafka_warn(lt__kafka_warner *w, const char *who, const char *text) {
    uint64_t now = lt_now_ns();
    int64_t suppressed = 0;
    pthread_mutex_lock(&w->mu);
    bool same = !strncmp(w->last, text, sizeof w->last - 1) && w->last_ns &&
                now - w->last_ns < LT__WARN_INTERVAL_NS;
    if (same) {
        w->suppressed++;
    } else {
        snprintf(w->last, sizeof w->last, "%s", text);
        w->last_ns = now;
        suppressed = w->suppressed;
        w->suppressed = 0;
    }
    pthread_mutex_unlock(&w->mu);
    if (same) return;
    if (suppressed)
        lt_log(LT_LOG_WARN, "kafka %s: %s (%lld similar messages before)", who, text,
               (long long)suppressed);
    else
        lt_log(LT_LOG_WARN, "kafka %s: %s", who, text);
}

/* ---- client callbacks ------------------------------------------------------------ */

void lt__kafka_client_init(lt__kafka_client *c, const char *who) {
    memset(c, 0, sizeof *c);
    c->who = who;
    lt__kafka_warner_init(&c->warner);
    pthread_mutex_init(&c->err_mu, NULL);
}

void lt__kafka_client_destroy(lt__kafka_client *c) {
    lt__kafka_warner_destroy(&c->warner);
    pthread_mutex_destroy(&c->err_mu);
}

void lt__kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    lt__kafka_client *c = rd_kafka_opaque(rk);
    /* broker failures ("FAIL") also reach error_cb, which says them once; it
     * runs only when the application polls, so the why is kept here too */
    if (level <= LOG_WARNING && c && !strcmp(fac, "FAIL")) {
        const char *why = buf, *end = strncmp(buf, "[thrd:", 6) ? NULL : strstr(buf, "]: ");
        if (end) why = end + 3; /* the thread's name: not news to a user */
        pthread_mutex_lock(&c->err_mu);
        snprintf(c->last_error, sizeof c->last_error, "%s", why);
        pthread_mutex_unlock(&c->err_mu);
    }
    if (level <= LOG_WARNING && c && strcmp(fac, "FAIL") && !atomic_load(&c->quiet)) {
        char text[512];
        snprintf(text, sizeof text, "%s: %s", fac, buf);
        lt__kafka_warn(&c->warner, c->who, text);
    } else {
        lt_log(LT_LOG_DEBUG, "kafka: %s: %s", fac, buf);
    }
}

void lt__kafka_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    lt__kafka_client *c = opaque;
    if (!c) return;
    atomic_fetch_add(&c->errors, 1);
    pthread_mutex_lock(&c->err_mu);
    /* "1/1 brokers are down" follows the error that says why: keep the why */
    if (err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || !c->last_error[0])
        snprintf(c->last_error, sizeof c->last_error, "%s", reason);
    pthread_mutex_unlock(&c->err_mu);
    char fatal[256] = "";
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        rd_kafka_fatal_error(rk, fatal, sizeof fatal);
        lt_log(LT_LOG_ERROR, "kafka %s: fatal error: %s", c->who, fatal);
        return;
    }
    if (!atomic_load(&c->quiet)) lt__kafka_warn(&c->warner, c->who, reason);
}

void lt__kafka_last_error(lt__kafka_client *c, char *buf, size_t n) {
    pthread_mutex_lock(&c->err_mu);
    snprintf(buf, n, "%s", c->last_error);
    pthread_mutex_unlock(&c->err_mu);
}

void lt__kafka_conf_callbacks(rd_kafka_conf_t *conf, lt__kafka_client *c) {
    rd_kafka_conf_set_opaque(conf, c);
    rd_kafka_conf_set_log_cb(conf, lt__kafka_log_cb);
    rd_kafka_conf_set_error_cb(conf, lt__kafka_error_cb);
}

int lt__kafka_status(rd_kafka_resp_err_t err, const char *what) {
    int status;
    switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR: return LT_OK;
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT: status = LT_ETIMEOUT; break;
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART: status = LT_ENOTFOUND; break;
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR_INVALID_CONFIG:
    case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
    case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR:
    case RD_KAFKA_RESP_ERR_POLICY_VIOLATION: status = LT_ECONFIG; break;
    case RD_KAFKA_RESP_ERR__NOENT: status = LT_ENOTFOUND; break;
    default: status = LT_EKAFKA; break;
    }
    return lt_error(status, "%s: %s", what, rd_kafka_err2str(err));
}

void lt__kafka_record_of(const rd_kafka_message_t *m, lt_record *rec) {
    memset(rec, 0, sizeof *rec);
    rec->topic = rd_kafka_topic_name(m->rkt);
    rec->partition = m->partition;
    rec->offset = m->offset;
    rd_kafka_timestamp_type_t tt;
    rec->timestamp_ms = rd_kafka_message_timestamp(m, &tt);
    rec->key = m->key;
    rec->key_len = m->key_len;
    rec->value = m->payload;
    rec->len = m->len;
}

void lt_kafka_member_name(const char *explicit_id, const char *instance_id, char *out, size_t n) {
    if (explicit_id && *explicit_id) {
        snprintf(out, n, "%s", explicit_id);
    } else if (instance_id && *instance_id) {
        snprintf(out, n, "%s", instance_id);
    } else {
        char host[64] = "host";
        gethostname(host, sizeof host - 1);
        snprintf(out, n, "%s:%d", host, (int)getpid());
    }
}
