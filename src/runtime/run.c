/* A tuned run: a model's runtime with what keeps it fast around it. At open
 * the config store's entries for this host become values in force (warm
 * start); the run's telemetry goes to a file or to Kafka; with online
 * tuning the run listens on the control topic and, on the embedded broker,
 * an optimizer serves it from a thread of this process. lt_run_generate is
 * lt_generate with the token boundary wired: the telemetry's step, then
 * the controls and trials. What the run side and the optimizer must see
 * before the run's start record is sent (the control topic's end, the
 * telemetry's end) is taken before it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/optimizer.h"
#include "looptune/telemetry_sinks.h"
#include "runtime/runtime_internal.h"

struct lt_run {
    lt_run_opts o;
    lt_llama *l;
    int warm_applied, warm_refused;
    lt_devbroker *dev;
    lt_tel *tel;
    lt_online *online;
    lt_optimizer *opt;
    pthread_t opt_thread;
    bool opt_running;
    _Atomic bool stop;
    bool ended;
    int64_t tokens;    /* tokens the generation loops handed out */
    int64_t n_prompt;  /* of the generation in progress */
    int last_kind;     /* the last decode step ran outside a trial (0), A (1), B (2) */
    lt_program *observed; /* the program the telemetry observes */
    bool batch_began;     /* batch_rows: the telemetry observes */
    bool batch_step;      /* batch_rows: the step in progress is observed */
    char run_id[33];
    char prefix[64];
    char brokers[256];
    char control[160];
    char where[512];
};

/* ---- opening ---------------------------------------------------------------------- */

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

/* The whole steps' tunables with their values in force: the looped
 * executor's (when it runs the decode steps), each regime's thread count
 * (when there is a choice). */
static int step_entries(lt_tuning *t, bool looped, bool batch, lt_tel_node_desc *out) {
    enum { N = 1 + LT_REGIME_COUNT }; /* the executor, then each regime's threads */
    static const char *const names[N] = {LT_TUNING_LOOPED, LT_TUNING_THREADS, LT_TUNING_THREADS,
                                         LT_TUNING_THREADS};
    static const lt_regime regimes[N] = {LT_REGIME_DECODE, LT_REGIME_DECODE, LT_REGIME_PREFILL,
                                         LT_REGIME_BATCH};
    _Static_assert(LT_REGIME_COUNT == 3, "a thread count per regime");
    int n = 0;
    for (int k = 0; k < N; k++) {
        /* a run of batched steps: their thread count alone */
        if (batch ? regimes[k] != LT_REGIME_BATCH || k == 0 : k == 0 && !looped) continue;
        if (k > 0 && lt_tuning_pool_threads(t) < 2) continue;
        const char *key = lt_tuning_step_key(t, regimes[k]);
        lt_param_def defs[LT_MAX_PARAMS];
        int nd;
        lt_params v;
        if (lt_tuning_space(names[k], lt_tuning_pool_threads(t), defs, &nd) ||
            lt_tuning_get(t, names[k], key, &v))
            continue;
        lt_tel_node_desc *d = &out[n++];
        *d = (lt_tel_node_desc){.node = -1, .label = "", .kernel = names[k], .shape = key,
                                .n_params = nd};
        for (int j = 0; j < nd; j++)
            d->params[j] = (lt_tel_param){.name = defs[j].name, .value = v.v[j], .index = j};
    }
    return n;
}

static void *optimizer_main(void *arg) {
    lt_run *r = arg;
    while (!atomic_load(&r->stop))
        if (lt_optimizer_poll(r->opt, 100) < 0) {
            lt_log(LT_LOG_WARN, "in-process optimizer: %s", lt_errmsg());
            break;
        }
    return NULL;
}

/* Online tuning, before the run's start record: the topics, the in-process
 * optimizer (the embedded broker only) and the control listener. */
static int open_online(lt_run *r, const lt_kafka_conn *conn) {
    snprintf(r->control, sizeof r->control, "%s%s", r->prefix,
             lt_kafka_topic_suffix(LT_TOPIC_CONTROL));
    int rc;
    if (r->dev) {
        for (int k = 0; k < LT_TOPIC_COUNT; k++) {
            char name[160];
            snprintf(name, sizeof name, "%s%s", r->prefix, lt_kafka_topic_suffix((lt_kafka_topic)k));
            if ((rc = lt_devbroker_create_topic(r->dev, name, 1))) return rc;
        }
        lt_optimizer_opts oo = {.conn = *conn, .prefix = r->prefix, .strategy = LT_STRAT_MODEL,
                                .seed = 42, .explore_share = r->o.explore_share,
                                .log = r->o.optimizer_log, .no_group = true};
        if ((rc = lt_optimizer_open(&r->opt, &oo))) return rc;
        if (pthread_create(&r->opt_thread, NULL, optimizer_main, r) != 0)
            return lt_error(LT_ENOMEM, "cannot start the in-process optimizer");
        r->opt_running = true;
    } else {
        lt_kafka_admin *a;
        if ((rc = lt_kafka_admin_open(&a, conn))) return rc;
        rc = lt_kafka_admin_ensure_topics(a, r->prefix, -1, -1, 10000);
        lt_kafka_admin_close(a);
        if (rc) return rc;
    }
    lt_online_opts on = {.conn = *conn, .topic = r->control, .run_id = r->run_id,
                         .tuning = lt_llama_tuning(r->l), .log = r->o.log,
                         .hold_bits = r->o.batch_rows > 0,
                         .who = r->o.batch_rows > 0 ? "looptune serve" : NULL};
    return lt_online_open(&r->online, &on);
}

/* The sink, then online tuning (Kafka only), then the telemetry itself. */
static int open_telemetry(lt_run *r, lt_pool *pool) {
    const lt_run_opts *o = &r->o;
    int rc;
    if (o->conn.props && (rc = lt_kafka_props_check(o->conn.props))) return rc;
    lt_tel_host host; /* lt_tel_open keeps a copy */
    if ((rc = lt_tel_host_get(&host, 0)))
        return lt_error(rc, "cannot measure the host's ceilings: %s", lt_errmsg());
    lt_tel_sink sink;
    lt_kafka_conn conn = o->conn;
    if (o->telemetry == LT_RUN_TEL_FILE) {
        if (!o->tel_path) return lt_error(LT_EINVAL, "telemetry to a file: no path");
        if ((rc = lt_tel_sink_file_open(&sink, o->tel_path))) return rc;
        snprintf(r->where, sizeof r->where, "file %s", o->tel_path);
    } else {
        if (!conn.brokers) {
            if ((rc = lt_devbroker_open(&r->dev, 1, 0))) return rc;
            conn.brokers = lt_devbroker_bootstrap(r->dev);
            conn.in_process = true;
        }
        snprintf(r->brokers, sizeof r->brokers, "%s", conn.brokers);
        char topic[256];
        snprintf(topic, sizeof topic, "%s%s", r->prefix, lt_kafka_topic_suffix(LT_TOPIC_TELEMETRY));
        if (!r->dev) ensure_topic(&conn, topic);
        /* the run's end already waited for delivery (lt_tel_close): closing
         * the producer need not wait long again */
        lt_producer_opts po = {.conn = conn, .topic = topic, .close_timeout_ms = 1000};
        if ((rc = lt_tel_sink_kafka_open(&sink, &po, r->run_id))) return rc;
        snprintf(r->where, sizeof r->where, "kafka topic %s at %s%s", topic, conn.brokers,
                 r->dev ? " (embedded)" : "");
        if (o->tune_online && (rc = open_online(r, &conn))) {
            sink.close(sink.ctx);
            return rc;
        }
    }
    const bool batch = o->batch_rows > 0;
    lt_program *decode;
    rc = batch ? lt_llama_program_batch(r->l, o->batch_rows, &decode)
               : lt_llama_program(r->l, 1, &decode);
    if (rc) {
        sink.close(sink.ctx);
        return rc;
    }
    r->observed = decode;
    const bool looped = lt_exec_kind(lt_llama_exec(r->l)) == LT_EXEC_LOOPED;
    lt_tel_opts to = o->tel;
    to.program = decode;
    to.pool = pool;
    to.sink = sink;
    to.host = &host;
    to.run_id = r->run_id;
    to.model = o->model_name;
    to.dtype = lt_dtype_name(lt_llama_model(r->l)->wtype);
    to.executor = looped ? "looped" : "dispatch";
    /* the config store's host key, so what an optimizer learns warm-starts runs */
    lt_host hd;
    lt_host_detect(&hd);
    to.host_class = hd.host_class;
    if (o->telemetry == LT_RUN_TEL_KAFKA) to.open_flush_ms = 3000; /* connect before decoding */
    lt_tel_node_desc steps[1 + LT_REGIME_COUNT];
    to.n_step_entries = step_entries(lt_llama_tuning(r->l), looped, batch, steps);
    to.step_entries = steps;
    to.step_shape = lt_tuning_step_key(lt_llama_tuning(r->l),
                                       batch ? LT_REGIME_BATCH : LT_REGIME_DECODE);
    /* a batch run's prefill chunks are no steps it measures */
    to.prefill_shape = batch ? NULL : lt_tuning_step_key(lt_llama_tuning(r->l), LT_REGIME_PREFILL);
    if ((rc = lt_tel_open(&r->tel, &to))) return rc; /* closes the sink on failure */
    if (r->online) lt_online_attach_tel(r->online, r->tel);
    return LT_OK;
}

int lt_run_open(lt_run **out, lt_llama *l, lt_pool *pool, const lt_run_opts *o) {
    *out = NULL;
    if (o->tune_online && o->telemetry != LT_RUN_TEL_KAFKA)
        return lt_error(LT_EINVAL, "online tuning needs telemetry on Kafka (the optimizer learns "
                                   "from it)");
    if (o->batch_rows && (o->batch_rows < 2 || o->batch_rows > lt_llama_max_batch(l)))
        return lt_error(LT_EINVAL, "a run of batched steps of %lld rows: expected 2..%lld",
                        (long long)o->batch_rows, (long long)lt_llama_max_batch(l));
    lt_run *r = calloc(1, sizeof *r);
    if (!r) return lt_error(LT_ENOMEM, "out of memory");
    r->o = *o;
    r->l = l;
    snprintf(r->prefix, sizeof r->prefix, "%s", o->topic_prefix ? o->topic_prefix
                                                                 : LT_KAFKA_TOPIC_PREFIX);
    lt_tel_run_id(r->run_id);
    if (o->store) {
        const char *host = o->host_class;
        lt_host hd;
        if (!host) {
            lt_host_detect(&hd);
            host = hd.host_class;
        }
        r->warm_applied = lt_store_warm_start(o->store, lt_llama_tuning(l), host, &r->warm_refused);
    }
    lt_tuning_sync(lt_llama_tuning(l)); /* the run start records what the nodes hold */
    int rc = o->telemetry == LT_RUN_TEL_OFF ? LT_OK : open_telemetry(r, pool);
    if (rc) {
        lt_run_close(r);
        return rc;
    }
    *out = r;
    return LT_OK;
}

/* ---- running ---------------------------------------------------------------------- */

typedef struct {
    lt_run *r;
    lt_token_cb cb;
    void *user;
    lt_prefill_cb prefill;
    void *prefill_user;
} chain;

/* The token boundary: the step that just ran ends in the telemetry, then
 * controls apply and a trial advances, then the caller's callback. */
static int on_token(void *arg, int32_t prev, int32_t token) {
    chain *c = arg;
    lt_run *r = c->r;
    if (r->tel) {
        if (r->tokens == 0) {
            lt_tel_begin(r->tel); /* the prompt is not a decode step */
        } else {
            /* the step that just ran fed the previous token at this position */
            lt_step st = {.pos = r->n_prompt + r->tokens - 1, .n_tokens = 1};
            lt_tel_step_end(r->tel, &st);
        }
    }
    if (r->online) {
        r->last_kind = lt_online_step_kind(r->online);
        lt_online_step(r->online);
    }
    r->tokens++;
    return c->cb ? c->cb(c->user, prev, token) : 0;
}

/* After a prefill batch: its window, then a prefill trial's phase. */
static void on_prefill(void *arg, int64_t pos, int64_t n, uint64_t t_begin, uint64_t t_end) {
    chain *c = arg;
    if (c->r->tel) lt_tel_prefill(c->r->tel, n, t_begin, t_end);
    if (c->r->online) lt_online_prefill(c->r->online);
    if (c->prefill) c->prefill(c->prefill_user, pos, n, t_begin, t_end);
}

int lt_run_generate(lt_run *r, lt_sampler *s, const int32_t *prompt, int64_t n_prompt,
                    const lt_gen_opts *go, lt_token_cb cb, void *user, lt_gen_stats *stats) {
    if (r->ended) return lt_error(LT_ESTATE, "the run has ended");
    chain c = {r, cb, user, go->on_prefill, go->prefill_user};
    lt_gen_opts o = *go;
    o.on_prefill = on_prefill;
    o.prefill_user = &c;
    r->n_prompt = n_prompt;
    /* telemetry counts decode steps across generations; a new one starts
     * with a prompt, not a decode step */
    if (r->tel && r->tokens > 0) lt_tel_end(r->tel);
    r->tokens = 0;
    return lt_generate(r->l, s, prompt, n_prompt, &o, on_token, &c, stats);
}

void lt_run_batch_begin(lt_run *r, int64_t n_rows) {
    r->batch_step = r->tel && !r->ended && r->o.batch_rows > 0 && n_rows == r->o.batch_rows;
    if (!r->batch_step) return;
    if (!r->batch_began) lt_tel_begin(r->tel);
    else lt_tel_step_begin(r->tel); /* the prefill chunk before it is not this step */
    r->batch_began = true;
}

void lt_run_batch_end(lt_run *r, int64_t n_rows, int64_t pos) {
    if (r->observed && !r->ended) {
        /* the runtime keeps its three most recent prefill and batch programs:
         * used after every step of the caller's loop (at most a prefill and a
         * batch program of their own), the observed one is never evicted */
        lt_program *p;
        LT_ASSERT(lt_llama_program_batch(r->l, r->o.batch_rows, &p) == LT_OK && p == r->observed);
    }
    if (!r->batch_step || n_rows != r->o.batch_rows) return;
    r->batch_step = false;
    lt_step st = {.pos = pos, .n_tokens = n_rows};
    lt_tel_step_end(r->tel, &st);
    if (r->online) {
        r->last_kind = lt_online_step_kind(r->online);
        lt_online_step(r->online);
    }
    r->tokens += n_rows;
}

/* ---- what it did -------------------------------------------------------------------- */

void lt_run_info(const lt_run *r, lt_run_state *out) {
    memset(out, 0, sizeof *out);
    out->warm_applied = r->warm_applied;
    out->warm_refused = r->warm_refused;
    out->run_id = r->run_id;
    out->telemetry_where = r->where[0] ? r->where : NULL;
    out->brokers = r->brokers[0] ? r->brokers : NULL;
    out->control_topic = r->control[0] ? r->control : NULL;
    out->embedded = r->dev != NULL;
    out->last_step_kind = r->last_kind;
    out->tel = r->tel;
    out->online = r->online;
    out->optimizer = r->opt;
}

void lt_run_end(lt_run *r) {
    if (r->ended) return;
    r->ended = true;
    if (r->tel) lt_tel_end(r->tel); /* what follows is no decode step */
    atomic_store(&r->stop, true);
    if (r->opt_running) pthread_join(r->opt_thread, NULL);
    r->opt_running = false;
    if (r->online) lt_online_stop(r->online);
}

void lt_run_close(lt_run *r) {
    lt_run_close_stats(r, NULL);
}

void lt_run_close_stats(lt_run *r, lt_tel_stats *tel_stats) {
    if (!r) return;
    lt_run_end(r);
    lt_online_close(r->online);
    lt_optimizer_close(r->opt);
    lt_tel_stats st = {0};
    if (r->tel) lt_tel_close(r->tel, &st);
    if (tel_stats) *tel_stats = st;
    lt_devbroker_close(r->dev);
    free(r);
}
