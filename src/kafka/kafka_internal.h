/* Internal pieces shared by the kafka layer's clients: building a librdkafka
 * configuration from looptune's defaults and the user's properties, routing
 * librdkafka's logs and errors to looptune's log without flooding it. */
#ifndef LT_KAFKA_INTERNAL_H
#define LT_KAFKA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "looptune/kafka.h"

/* Builds a configuration: defaults (NULL-terminated key, value pairs, may be
 * NULL), then bootstrap.servers and client.id from conn, then conn->props.
 * Errors name the property. The caller owns *out (rd_kafka_conf_destroy, or
 * hand it to rd_kafka_new, which takes it). */
int lt__kafka_conf_new(rd_kafka_conf_t **out, const lt_kafka_conn *conn,
                       const char *const *defaults);

/* Per-client warning limiter: the same text is said at most once per
 * interval, so a broker that stays down is one line every few seconds, not
 * one per reconnect attempt. */
typedef struct {
    pthread_mutex_t mu;
    char last[256];
    uint64_t last_ns;
    int64_t suppressed;
} lt__kafka_warner;

void lt__kafka_warner_init(lt__kafka_warner *w);
void lt__kafka_warner_destroy(lt__kafka_warner *w);
/* Logs "kafka WHO: TEXT" as a warning unless the same text was said less
 * than 10 s ago. */
void lt__kafka_warn(lt__kafka_warner *w, const char *who, const char *text);

/* librdkafka log callback: levels warning and worse go to lt_log (through the
 * warner in the handle's opaque, which must be an lt__kafka_client); the rest
 * only at debug. */
void lt__kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

/* State every client handle carries as its librdkafka opaque. */
typedef struct {
    const char *who; /* "producer", "consumer", "admin", "broker" */
    lt__kafka_warner warner;
    _Atomic int64_t errors; /* client-level errors reported by error_cb */
    pthread_mutex_t err_mu;
    char last_error[256];
    /* While set, errors and warnings are only recorded (last_error), not
     * logged: the caller reports them itself, in one line. */
    _Atomic bool quiet;
} lt__kafka_client;

void lt__kafka_client_init(lt__kafka_client *c, const char *who);
void lt__kafka_client_destroy(lt__kafka_client *c);
/* error_cb for handles whose opaque is an lt__kafka_client: counts, keeps
 * the last text, warns (limited) unless the client is quiet. */
void lt__kafka_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque);
/* Copies the client's last error text into buf (NUL-terminated). */
void lt__kafka_last_error(lt__kafka_client *c, char *buf, size_t n);

/* Registers the log and error callbacks and the opaque on conf. */
void lt__kafka_conf_callbacks(rd_kafka_conf_t *conf, lt__kafka_client *c);

/* Fills rec from a consumed message (pointers into m: valid while m is). */
void lt__kafka_record_of(const rd_kafka_message_t *m, lt_record *rec);

/* Maps a librdkafka error to a looptune status and records detail
 * "WHAT: librdkafka's message". */
int lt__kafka_status(rd_kafka_resp_err_t err, const char *what);

#endif
