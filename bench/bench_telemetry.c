/* Telemetry's cost on the decode hot path, measured in one process so that
 * process start-up and the noise of a shared machine cancel out: the decode
 * program runs in rounds; each round runs every mode over the same block of
 * positions, in a rotated order, and times the block's steps. A block's
 * telemetry (sink, producer, drain thread) is opened before it and closed
 * after it, outside the timing: nothing of one mode is alive during another
 * mode's block, and whatever the drain and the Kafka client do while the
 * block runs is charged to it. Give blocks longer than the drain period
 * (200 ms) so that work is inside them. Modes:
 *   off          no observer
 *   ring         window telemetry into a null sink (observer, rings, drain,
 *                counters: the runtime without any I/O)
 *   window       window records to Kafka
 *   per-call     window and per-call records to Kafka
 * Kafka: --brokers B (a real broker, e.g. scripts/kafka/broker.sh), else the
 * embedded broker. Reports tokens/s min/median/max per mode and the median
 * of the per-round ratios to off.
 *
 *   bench_telemetry MODEL [--threads T] [--rounds R] [--block N] [--brokers B]
 *                         [--executor looped|dispatch] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/model.h"
#include "looptune/program.h"
#include "looptune/telemetry_sinks.h"

enum { M_OFF, M_RING, M_WINDOW, M_PERCALL, M_COUNT };
static const char *const mode_name[M_COUNT] = {"off", "ring", "window", "per-call"};

static void die(const char *what) {
    fprintf(stderr, "bench_telemetry: %s: %s\n", what, lt_errmsg());
    exit(1);
}

typedef struct {
    lt_program *p;
    lt_pool *pool;
    const lt_tel_host *host;
    const char *brokers, *topic, *model;
    lt_executor ex;
} open_ctx;

/* A fresh telemetry for one block of mode k (M_RING.. ); its run start is
 * delivered before it returns, so connecting is not part of the block. */
static lt_tel *open_mode(const open_ctx *c, int k) {
    lt_tel_sink sink;
    char run_id[33];
    lt_tel_run_id(run_id);
    if (k == M_RING) {
        if (lt_tel_sink_null(&sink)) die("sink");
    } else {
        lt_producer_opts po = {.conn = {.brokers = c->brokers}, .topic = c->topic};
        if (lt_tel_sink_kafka_open(&sink, &po, run_id)) die("kafka sink");
    }
    lt_tel_opts o = {.program = c->p, .pool = c->pool, .sink = sink, .host = c->host,
                     .run_id = run_id, .open_flush_ms = 5000,
                     .detail = k == M_PERCALL ? LT_TEL_DETAIL_PER_CALL : LT_TEL_DETAIL_WINDOW,
                     .model = c->model, .executor = lt_executor_name(c->ex)};
    lt_tel *t;
    if (lt_tel_open(&t, &o)) die("telemetry");
    return t;
}

static void add_stats(lt_tel_stats *sum, const lt_tel_stats *s) {
    sum->sink.emitted += s->sink.emitted;
    sum->sink.dropped += s->sink.dropped;
    sum->sink.failed += s->sink.failed;
    sum->ring_dropped += s->ring_dropped;
}

static int32_t argmax(const float *v, int64_t n) {
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = (int32_t)i;
    return best;
}

int main(int argc, char **argv) {
    const char *model = NULL, *brokers = NULL;
    int threads = 2, rounds = 30, block = 16;
    lt_executor ex = LT_EXEC_LOOPED;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--block") && i + 1 < argc) block = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--brokers") && i + 1 < argc) brokers = argv[++i];
        else if (!strcmp(argv[i], "--executor") && i + 1 < argc) {
            if (lt_executor_parse(argv[++i], &ex)) die("--executor");
        } else if (argv[i][0] != '-' && !model) model = argv[i];
        else {
            fprintf(stderr, "usage: bench_telemetry MODEL [--threads T] [--rounds R] [--block N] "
                            "[--brokers B] [--executor looped|dispatch]\n");
            return 2;
        }
    }
    if (!model || threads < 1 || rounds < 1 || block < 1) {
        fprintf(stderr, "bench_telemetry: give a model (and positive numbers)\n");
        return 2;
    }
    lt_model *m;
    lt_pool *pool;
    lt_llama *l;
    if (lt_model_open(&m, model, NULL) || lt_model_make_resident(m)) die(model);
    if (lt_pool_init(&pool, threads)) die("pool");
    lt_llama_opts lo = {.executor = (int)ex};
    if (lt_llama_init(&l, m, pool, &lo)) die("llama");
    lt_program *p;
    if (lt_llama_program(l, 1, &p)) die("program");
    const int64_t ctx = lt_llama_ctx_len(l), V = m->cfg.vocab_size;
    if (block + 1 > ctx) die("block longer than the context");

    lt_devbroker *dev = NULL;
    if (!brokers) {
        if (lt_devbroker_open(&dev, 1, 0)) die("embedded broker");
        brokers = lt_devbroker_bootstrap(dev);
    }
    lt_tel_host host;
    if (lt_tel_host_get(&host, 0)) die("host");
    char topic[64];
    snprintf(topic, sizeof topic, "bench-tel-%ld.telemetry", (long)lt_now_ns() % 1000000000);
    open_ctx oc = {.p = p, .pool = pool, .host = &host, .brokers = brokers, .topic = topic,
                   .model = model, .ex = ex};
    lt_tel_stats st[M_COUNT] = {0};
    double *tps[M_COUNT], *ratio[M_COUNT];
    for (int k = 0; k < M_COUNT; k++) {
        tps[k] = calloc((size_t)rounds, sizeof(double));
        ratio[k] = calloc((size_t)rounds, sizeof(double));
    }
    int32_t tok = 1;
    int64_t p0 = 0;
    /* warm-up: a block of every mode */
    for (int r = -1; r < rounds; r++) {
        if (p0 + block + 1 > ctx) p0 = 0;
        for (int j = 0; j < M_COUNT; j++) {
            int k = (j + (r < 0 ? 0 : r)) % M_COUNT;
            lt_tel *t = k == M_OFF ? NULL : open_mode(&oc, k);
            int32_t tk = tok;
            if (t) lt_tel_begin(t);
            uint64_t t0 = lt_now_ns();
            for (int s = 0; s < block; s++) {
                if (lt_llama_eval(l, &tk, 1, p0 + s)) die("eval");
                tk = argmax(lt_llama_logits(l, NULL), V);
                if (t) lt_tel_step_end(t, &(lt_step){.pos = p0 + s, .n_tokens = 1});
            }
            double s = (double)(lt_now_ns() - t0) * 1e-9;
            if (t) {
                lt_tel_end(t);
                lt_tel_stats ts;
                lt_tel_close(t, &ts);
                if (r >= 0) add_stats(&st[k], &ts);
            }
            if (r >= 0) tps[k][r] = block / s;
        }
        if (r >= 0)
            for (int k = 0; k < M_COUNT; k++) ratio[k][r] = tps[k][r] / tps[M_OFF][r];
        p0 += block;
    }

    printf("%s, %d thread%s, %s executor, %d rounds of %d tokens, kafka at %s%s\n", model,
           threads, threads == 1 ? "" : "s", lt_executor_name(ex), rounds, block, brokers,
           dev ? " (embedded)" : "");
    printf("  %-9s %9s %9s %9s   %9s  %9s %8s %8s\n", "mode", "min", "median", "max", "vs off",
           "records", "dropped", "failed");
    for (int k = 0; k < M_COUNT; k++) {
        lt_summary s = lt_summarize(tps[k], rounds);
        double rel = lt_median(ratio[k], rounds);
        printf("  %-9s %9.1f %9.1f %9.1f   %+8.2f%%", mode_name[k], s.min, s.median, s.max,
               100.0 * (rel - 1));
        if (k != M_OFF)
            printf("  %9lld %8lld %8lld", (long long)st[k].sink.emitted,
                   (long long)(st[k].ring_dropped + st[k].sink.dropped), (long long)st[k].sink.failed);
        printf("\n");
    }
    for (int k = 0; k < M_COUNT; k++) {
        free(tps[k]);
        free(ratio[k]);
    }
    lt_devbroker_close(dev);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return 0;
}
