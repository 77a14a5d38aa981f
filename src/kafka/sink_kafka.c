/* The Kafka telemetry sink: records as envelopes through the non-blocking
 * producer, every one keyed by the run id so a run stays in one partition,
 * in order. A full local queue drops the record (counted by the producer);
 * delivery failures come from its delivery reports. */
#include <stdlib.h>
#include <string.h>

#include "looptune/telemetry_sinks.h"

typedef struct {
    lt_producer *p;
    lt_tel_pb pb;
    char run_id[64];
} kafka_sink;

static int kafka_emit(void *ctx, const lt_tel_record *r) {
    kafka_sink *s = ctx;
    Looptune__Envelope *env;
    int rc = lt_tel_record_to_envelope(r, &s->pb, &env);
    if (rc) return rc;
    rc = lt_producer_send_envelope(s->p, s->run_id, env);
    return rc == LT_PRODUCER_DROPPED ? LT_TEL_DROPPED : rc;
}

static int kafka_flush(void *ctx, int timeout_ms) {
    return lt_producer_flush(((kafka_sink *)ctx)->p, timeout_ms);
}

static void kafka_stats(void *ctx, lt_tel_sink_stats *out) {
    lt_producer_stats ps;
    lt_producer_stats_get(((kafka_sink *)ctx)->p, &ps);
    *out = (lt_tel_sink_stats){.emitted = ps.sent, .dropped = ps.dropped, .failed = ps.failed,
                               .pending = ps.in_queue};
}

static void kafka_close(void *ctx) {
    kafka_sink *s = ctx;
    lt_producer_close(s->p);
    lt_tel_pb_free(&s->pb);
    free(s);
}

int lt_tel_sink_kafka_open(lt_tel_sink *out, const lt_producer_opts *opts, const char *run_id) {
    kafka_sink *s = calloc(1, sizeof *s);
    if (!s) return lt_error(LT_ENOMEM, "telemetry kafka sink: out of memory");
    snprintf(s->run_id, sizeof s->run_id, "%s", run_id ? run_id : "");
    int rc = lt_producer_open(&s->p, opts);
    if (rc) {
        free(s);
        return rc;
    }
    *out = (lt_tel_sink){.emit = kafka_emit, .flush = kafka_flush, .stats = kafka_stats,
                         .close = kafka_close, .ctx = s};
    return LT_OK;
}
