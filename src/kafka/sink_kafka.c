/* The Kafka telemetry sink: records as envelopes through the non-blocking
 * producer, every one keyed by the run id so a run stays in one partition,
 * in order. A full local queue drops the record (counted by the producer);
 * delivery failures come from its delivery reports.
 *
 * Per-call samples travel in batches (CallSamples, up to CALL_BATCH calls):
 * one Kafka record per call would cost the drain, the producer and the
 * broker more per call than a small model's kernels take. A batch goes out
 * when it is full and before any other record, so the order of the log is
 * the order of emission (the drain emits a window record after the calls of
 * every window, and the run end last). */
#include <stdlib.h>
#include <string.h>

#include "looptune/telemetry_sinks.h"

#define CALL_BATCH 256

typedef struct {
    char node[64], kernel[32];
} call_strings;

typedef struct {
    lt_producer *p;
    lt_tel_pb pb;
    char run_id[64];
    /* the batch of calls waiting to go: the records and their strings; the
     * run id is the batch's (a sink serves one run) */
    int n_calls;
    Looptune__CallSample calls[CALL_BATCH], *call_ptrs[CALL_BATCH];
    call_strings strs[CALL_BATCH];
} kafka_sink;

static void send_calls(kafka_sink *s) {
    if (!s->n_calls) return;
    Looptune__CallSamples batch = LOOPTUNE__CALL_SAMPLES__INIT;
    batch.n_samples = (size_t)s->n_calls;
    batch.samples = s->call_ptrs;
    batch.run_id = s->run_id;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLES;
    env.call_samples = &batch;
    lt_producer_send_envelope_n(s->p, s->run_id, &env, s->n_calls); /* counts its drops */
    s->n_calls = 0;
}

/* Bounded copy of a string that must outlive the record (a label longer than
 * the field is cut: labels are short by construction). */
static void copy_str(char *dst, size_t cap, const char *src) {
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Copies a call into the batch (the record's strings live only during emit). */
static void add_call(kafka_sink *s, const Looptune__CallSample *m) {
    int i = s->n_calls++;
    call_strings *st = &s->strs[i];
    copy_str(st->node, sizeof st->node, m->node);
    copy_str(st->kernel, sizeof st->kernel, m->kernel);
    s->calls[i] = *m;
    s->calls[i].run_id = "";
    s->calls[i].node = st->node;
    s->calls[i].kernel = st->kernel;
    s->call_ptrs[i] = &s->calls[i];
}

static int kafka_emit(void *ctx, const lt_tel_record *r) {
    kafka_sink *s = ctx;
    Looptune__Envelope *env;
    int rc = lt_tel_record_to_envelope(r, &s->pb, &env);
    if (rc) return rc;
    if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE &&
        !strcmp(env->call_sample->run_id, s->run_id)) {
        add_call(s, env->call_sample);
        if (s->n_calls == CALL_BATCH) send_calls(s); /* a drop is counted by its calls */
        return LT_OK;
    }
    /* the calls before this record go first; a batch the producer drops is
     * counted there (by its calls), the return value is this record's */
    send_calls(s);
    rc = lt_producer_send_envelope(s->p, s->run_id, env);
    return rc == LT_PRODUCER_DROPPED ? LT_TEL_DROPPED : rc;
}

static int kafka_flush(void *ctx, int timeout_ms) {
    kafka_sink *s = ctx;
    send_calls(s); /* what it drops is counted by the producer */
    return lt_producer_flush(s->p, timeout_ms);
}

static void kafka_stats(void *ctx, lt_tel_sink_stats *out) {
    lt_producer_stats ps;
    lt_producer_stats_get(((kafka_sink *)ctx)->p, &ps);
    *out = (lt_tel_sink_stats){.emitted = ps.sent, .dropped = ps.dropped, .failed = ps.failed,
                               .pending = ps.in_queue};
}

static void kafka_close(void *ctx) {
    kafka_sink *s = ctx;
    send_calls(s);
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
