/* Telemetry for `looptune run`: builds the sink the command line asks for,
 * starts the run's telemetry on the decode program, drives it from the
 * token callback, and prints what it did. */
#include "tel_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/model.h"
#include "looptune/telemetry_sinks.h"
#include "looptune/tune.h"

struct lt_cli_tel {
    lt_tel *tel;
    lt_devbroker *dev;
    const char *where; /* for the summary: "file x", "kafka topic t at b" */
    char where_buf[512];
    int64_t tokens;
};

int lt_cli_tel_parse(const char *s, lt_cli_tel_opts *o) {
    if (!strcmp(s, "off")) o->mode = LT_CLI_TEL_OFF;
    else if (!strcmp(s, "kafka")) o->mode = LT_CLI_TEL_KAFKA;
    else if (!strncmp(s, "file:", 5) && s[5]) {
        o->mode = LT_CLI_TEL_FILE;
        o->path = s + 5;
    } else {
        return lt_error(LT_EINVAL, "bad --telemetry '%s': expected off, file:PATH or kafka", s);
    }
    return LT_OK;
}

/* Creates the telemetry topic on a real cluster when it is missing; a
 * cluster that does not answer is a warning: the producer then drops or
 * fails records, counted, and the run goes on. */
static void ensure_topic(const lt_kafka_conn *conn, const char *topic) {
    lt_kafka_admin *a;
    if (lt_kafka_admin_open(&a, conn)) {
        lt_log(LT_LOG_WARN, "telemetry: cannot check topic %s: %s", topic, lt_errmsg());
        return;
    }
    lt_topic_spec spec = {.name = topic, .partitions = -1, .replication = -1};
    if (lt_kafka_admin_create_topics(a, &spec, 1, 5000, NULL))
        lt_log(LT_LOG_WARN, "telemetry: topic %s: %s", topic, lt_errmsg());
    lt_kafka_admin_close(a);
}

/* The decode steps' tunables with their values in force: the looped
 * executor's (when it runs), the thread count (when there is a choice). */
static int step_entries(lt_tuning *t, const char *executor, lt_tel_node_desc *out) {
    static const char *const names[2] = {LT_TUNING_LOOPED, LT_TUNING_THREADS};
    int n = 0;
    for (int k = 0; k < 2; k++) {
        if (k == 0 && strcmp(executor ? executor : "", "looped")) continue;
        if (k == 1 && lt_tuning_pool_threads(t) < 2) continue;
        const char *key = lt_tuning_step_key(t, LT_REGIME_DECODE);
        lt_param_def defs[LT_MAX_PARAMS];
        int nd;
        lt_params v;
        if (lt_tuning_space(names[k], lt_tuning_pool_threads(t), defs, &nd) ||
            lt_tuning_get(t, names[k], key, &v))
            continue;
        lt_tel_node_desc *d = &out[n++];
        memset(d, 0, sizeof *d);
        *d = (lt_tel_node_desc){.node = -1, .label = "", .kernel = names[k], .shape = key,
                                .n_params = nd};
        for (int j = 0; j < nd; j++)
            d->params[j] = (lt_tel_param){.name = defs[j].name, .value = v.v[j], .index = j};
    }
    return n;
}

int lt_cli_tel_start(lt_cli_tel **out, const lt_cli_tel_opts *o, lt_program *decode, lt_pool *pool,
                     const char *model, const char *dtype, const char *executor) {
    *out = NULL;
    if (o->mode == LT_CLI_TEL_OFF) return LT_OK;
    lt_cli_tel *t = calloc(1, sizeof *t);
    if (!t) return lt_error(LT_ENOMEM, "out of memory");
    int rc;
    const lt_kafka_props *props = o->kafka ? o->kafka->props : NULL;
    if (props && (rc = lt_kafka_props_check(props))) goto fail;
    lt_tel_host host; /* lt_tel_open keeps a copy */
    if ((rc = lt_tel_host_get(&host, 0))) {
        rc = lt_error(rc, "cannot measure the host's ceilings: %s", lt_errmsg());
        goto fail;
    }
    char run_id[33];
    lt_tel_run_id(run_id);
    lt_tel_sink sink;
    if (o->mode == LT_CLI_TEL_FILE) {
        if ((rc = lt_tel_sink_file_open(&sink, o->path))) goto fail;
        snprintf(t->where_buf, sizeof t->where_buf, "file %s", o->path);
    } else {
        const char *brokers = o->kafka ? o->kafka->conn.brokers : NULL;
        if (!brokers) {
            if ((rc = lt_devbroker_open(&t->dev, 1, 0))) goto fail;
            brokers = lt_devbroker_bootstrap(t->dev);
            fprintf(stderr, "looptune run: --telemetry kafka without --brokers: records go to the "
                            "embedded in-memory broker at %s, gone when this run ends\n", brokers);
        }
        char topic[256];
        snprintf(topic, sizeof topic, "%s%s",
                 o->kafka ? lt_cli_kafka_prefix(o->kafka) : LT_KAFKA_TOPIC_PREFIX,
                 lt_kafka_topic_suffix(LT_TOPIC_TELEMETRY));
        lt_kafka_conn conn = {.brokers = brokers, .props = props};
        if (!t->dev) ensure_topic(&conn, topic);
        /* the run's end already waited for delivery (lt_tel_close): closing
         * the producer need not wait long again */
        lt_producer_opts po = {.conn = conn, .topic = topic, .close_timeout_ms = 1000};
        if ((rc = lt_tel_sink_kafka_open(&sink, &po, run_id))) goto fail;
        snprintf(t->where_buf, sizeof t->where_buf, "kafka topic %s at %s%s", topic, brokers,
                 t->dev ? " (embedded)" : "");
        if (o->before_open && (rc = o->before_open(o->user, brokers, t->dev, run_id))) {
            sink.close(sink.ctx);
            goto fail;
        }
    }
    t->where = t->where_buf;
    lt_tel_opts to = o->tel;
    to.program = decode;
    to.pool = pool;
    to.sink = sink;
    to.host = &host;
    to.run_id = run_id;
    to.model = model;
    to.dtype = dtype;
    to.executor = executor;
    /* the config store's host key, so what an optimizer learns warm-starts runs */
    lt_host hd;
    lt_host_detect(&hd);
    to.host_class = hd.host_class;
    if (o->mode == LT_CLI_TEL_KAFKA) to.open_flush_ms = 3000; /* connect before decoding */
    lt_tel_node_desc steps[2];
    if (o->tuning) {
        to.n_step_entries = step_entries(o->tuning, executor, steps);
        to.step_entries = steps;
        to.step_shape = lt_tuning_step_key(o->tuning, LT_REGIME_DECODE);
    }
    rc = lt_tel_open(&t->tel, &to); /* closes the sink on failure */
    if (rc) goto fail;
    *out = t;
    return LT_OK;
fail:
    lt_devbroker_close(t->dev);
    free(t);
    return rc;
}

lt_tel *lt_cli_tel_handle(lt_cli_tel *t) { return t ? t->tel : NULL; }

void lt_cli_tel_token(lt_cli_tel *t, int64_t n_prompt) {
    if (!t) return;
    if (t->tokens == 0) {
        lt_tel_begin(t->tel);
    } else {
        /* the step that just ran fed the previous token at this position */
        lt_step st = {.pos = n_prompt + t->tokens - 1, .n_tokens = 1};
        lt_tel_step_end(t->tel, &st);
    }
    t->tokens++;
}

void lt_cli_tel_finish(lt_cli_tel *t, FILE *f) {
    if (!t) return;
    char run_id[64];
    snprintf(run_id, sizeof run_id, "%s", lt_tel_run_id_of(t->tel));
    lt_tel_stats st;
    lt_tel_close(t->tel, &st);
    lt_devbroker_close(t->dev);
    if (f)
        fprintf(f,
                "  telemetry run %s to %s: %lld windows; %lld records emitted, %lld dropped, "
                "%lld delivery failures\n",
                run_id, t->where, (long long)st.windows, (long long)st.sink.emitted,
                (long long)(st.ring_dropped + st.sink.dropped), (long long)st.sink.failed);
    free(t);
}
