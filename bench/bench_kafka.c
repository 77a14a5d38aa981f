/* Kafka throughput and latency of looptune's producer and consumer, on the
 * local real broker (scripts/kafka/broker.sh) beside the embedded broker
 * (librdkafka's mock cluster, in process) as the baseline, in one run:
 *   - records/s from one producer: N KernelWindow envelopes, queued as fast
 *     as possible, timed from the first send until all are acknowledged;
 *   - end-to-end latency produce -> consume: records sent 2 ms apart, each
 *     carrying its send time, timed when the consumer returns them, with
 *     linger.ms 0 and the producer's default (20).
 * Reports min/median/max over the runs.
 *
 *   bench_kafka [--brokers HOST:PORT] [--records N] [--latency-records M] [--runs R]
 * The broker: --brokers, else $LT_KAFKA_BOOTSTRAP. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "looptune/kafka.h"

static void die(const char *what) {
    fprintf(stderr, "bench_kafka: %s: %s\n", what, lt_errmsg());
    exit(1);
}

/* A realistic telemetry record: one kernel window (about 200 bytes). */
static void make_window(Looptune__Envelope *env, Looptune__KernelWindow *w, uint64_t i) {
    lt_envelope_init(env);
    looptune__kernel_window__init(w);
    w->run_id = "bench-run";
    w->window = i;
    w->t_start_ns = i * 1000000000ull;
    w->t_end_ns = w->t_start_ns + 1000000000ull;
    w->kernel = "matvec";
    w->node = "blk7.ffn_down";
    w->shape = "q8_0:2048x768";
    w->count = 1200;
    w->min_ns = 41000;
    w->median_ns = 43000 + i % 1000;
    w->p90_ns = 47000;
    w->max_ns = 90000;
    w->bytes = 1671168;
    w->flops = 3145728;
    w->gb_s = 38.9;
    w->gflops = 73.2;
    w->wait_share = 0.04;
    env->payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW;
    env->kernel_window = w;
}

static void unique_topic(char *buf, size_t n, const char *what) {
    snprintf(buf, n, "bench-%s-%ld-%llu", what, (long)getpid(),
             (unsigned long long)(lt_now_ns() % 1000000000000ull));
}

/* Creates a one-partition topic (a real broker) or lets the embedded broker
 * create it on first use. */
static void make_topic(const char *brokers, const char *topic, bool real) {
    if (!real) return;
    lt_kafka_conn conn = {.brokers = brokers};
    lt_kafka_admin *a;
    lt_topic_spec spec = {.name = topic, .partitions = 1, .replication = 1};
    if (lt_kafka_admin_open(&a, &conn) || lt_kafka_admin_create_topics(a, &spec, 1, 15000, NULL))
        die("create topic");
    lt_kafka_admin_close(a);
}

/* records/s of one producer sending n records. */
static double throughput(const char *brokers, bool real, int64_t n, double *bytes_per_rec) {
    char topic[128];
    unique_topic(topic, sizeof topic, "tput");
    make_topic(brokers, topic, real);
    lt_producer *p;
    lt_producer_opts po = {.conn = {.brokers = brokers}, .topic = topic, .queue_records = n + 1,
                           .queue_kbytes = 1 << 20};
    if (lt_producer_open(&p, &po)) die("producer");
    Looptune__Envelope env;
    Looptune__KernelWindow w;
    make_window(&env, &w, 0);
    *bytes_per_rec = (double)lt_envelope_packed_size(&env);
    uint64_t t0 = lt_now_ns();
    for (int64_t i = 0; i < n; i++) {
        w.window = (uint64_t)i;
        if (lt_producer_send_envelope(p, NULL, &env) != LT_OK) die("send (queue too small?)");
    }
    if (lt_producer_flush(p, 120000)) die("flush");
    double s = (double)(lt_now_ns() - t0) / 1e9;
    lt_producer_stats st;
    lt_producer_stats_get(p, &st);
    if (st.delivered != n) {
        fprintf(stderr, "bench_kafka: %lld of %lld delivered\n", (long long)st.delivered,
                (long long)n);
        exit(1);
    }
    lt_producer_close(p);
    return (double)n / s;
}

typedef struct {
    lt_producer *p;
    int64_t n;
} pacer;

/* Sends n CallSample records 2 ms apart, each stamped with its send time. */
static void *pace_main(void *arg) {
    pacer *pc = arg;
    for (int64_t i = 0; i < pc->n; i++) {
        Looptune__Envelope env;
        Looptune__CallSample cs;
        lt_envelope_init(&env);
        looptune__call_sample__init(&cs);
        cs.run_id = "bench-latency";
        cs.token = (uint64_t)i;
        env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE;
        env.call_sample = &cs;
        cs.start_ns = lt_now_ns();
        lt_producer_send_envelope(pc->p, NULL, &env);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Median and p99 produce->consume latency (ms) over m records. */
static void latency(const char *brokers, bool real, int32_t linger, int64_t m, double *med,
                    double *p99) {
    char topic[128], group[128];
    unique_topic(topic, sizeof topic, "lat");
    unique_topic(group, sizeof group, "lat-group");
    make_topic(brokers, topic, real);
    lt_producer *p;
    lt_producer_opts po = {.conn = {.brokers = brokers}, .topic = topic, .linger_ms = linger};
    if (lt_producer_open(&p, &po)) die("producer");
    const char *t = topic;
    lt_consumer *c;
    lt_consumer_opts co = {.conn = {.brokers = brokers}, .group = group, .topics = &t,
                           .n_topics = 1, .from_beginning = true};
    if (lt_consumer_open(&c, &co)) die("consumer");
    /* warm up: the group is joined once a first record comes back */
    lt_record r;
    uint64_t deadline = lt_now_ns() + 60000000000ull;
    int got = 0;
    while (!got && lt_now_ns() < deadline) {
        lt_producer_send(p, NULL, 0, "warm-up", 7);
        for (int k = 0; k < 10 && !got; k++) got = lt_consumer_poll(c, 100, &r) == 1;
    }
    while (lt_consumer_poll(c, 300, &r) == 1) {
    } /* drain the other warm-up records */
    if (!got) die("latency warm-up: no record came back within 60 s");

    double *lat = calloc((size_t)m, sizeof *lat);
    pacer pc = {p, m};
    pthread_t th;
    pthread_create(&th, NULL, pace_main, &pc);
    int64_t n = 0;
    deadline = lt_now_ns() + 60000000000ull + (uint64_t)m * 2000000ull;
    while (n < m && lt_now_ns() < deadline) {
        if (lt_consumer_poll(c, 200, &r) != 1) continue;
        uint64_t now = lt_now_ns();
        Looptune__Envelope *e;
        if (lt_envelope_decode(r.value, r.len, &e)) continue; /* a late warm-up record */
        if (e->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE)
            lat[n++] = (double)(now - e->call_sample->start_ns) / 1e6;
        lt_envelope_free(e);
    }
    pthread_join(th, NULL);
    if (n < m) die("latency: records missing");
    lt_sort_f64(lat, (int)n);
    *med = lt_median(lat, (int)n);
    *p99 = lat[(n * 99) / 100];
    free(lat);
    lt_consumer_close(c);
    lt_producer_close(p);
}

int main(int argc, char **argv) {
    const char *brokers = getenv("LT_KAFKA_BOOTSTRAP");
    int64_t n = 200000, m = 500;
    int runs = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--brokers") && i + 1 < argc) brokers = argv[++i];
        else if (!strcmp(argv[i], "--records") && i + 1 < argc) n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--latency-records") && i + 1 < argc) m = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_kafka [--brokers B] [--records N] "
                            "[--latency-records M] [--runs R]\n");
            return 2;
        }
    }
    if (!brokers) {
        fprintf(stderr, "bench_kafka: no broker: give --brokers or start one with "
                        "`scripts/kafka/broker.sh start` and set LT_KAFKA_BOOTSTRAP\n");
        return 2;
    }
    if (n < 1 || m < 10 || runs < 1 || runs > 50) {
        fprintf(stderr, "bench_kafka: bad sizes\n");
        return 2;
    }
    lt_log_set_level(LT_LOG_ERROR); /* the embedded broker's notice */
    lt_devbroker *dev;
    if (lt_devbroker_open(&dev, 1, 0)) die("embedded broker");

    enum { TPUT, LAT0_MED, LAT0_P99, LAT20_MED, LAT20_P99, NMETRIC };
    static const char *const names[NMETRIC] = {"producer records/s", "latency linger 0: median ms",
                                               "latency linger 0: p99 ms",
                                               "latency linger 20: median ms",
                                               "latency linger 20: p99 ms"};
    double *v[2][NMETRIC];
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < NMETRIC; k++) v[b][k] = calloc((size_t)runs, sizeof(double));
    double rec_bytes = 0;
    fprintf(stderr, "bench_kafka: real broker %s vs embedded broker; %lld records, %lld latency "
                    "samples, %d runs\n", brokers, (long long)n, (long long)m, runs);
    for (int r = 0; r < runs; r++) {
        for (int b = 0; b < 2; b++) { /* alternate so both see the same machine */
            const char *br = b == 0 ? brokers : lt_devbroker_bootstrap(dev);
            v[b][TPUT][r] = throughput(br, b == 0, n, &rec_bytes);
            latency(br, b == 0, -1, m, &v[b][LAT0_MED][r], &v[b][LAT0_P99][r]);
            latency(br, b == 0, 20, m, &v[b][LAT20_MED][r], &v[b][LAT20_P99][r]);
            fprintf(stderr, "  run %d %s: %.0f records/s, latency median %.2f / %.2f ms\n", r + 1,
                    b ? "embedded" : "real", v[b][TPUT][r], v[b][LAT0_MED][r], v[b][LAT20_MED][r]);
        }
    }
    printf("%-30s %12s %12s %12s   %12s %12s %12s\n", "", "real min", "median", "max",
           "embedded min", "median", "max");
    for (int k = 0; k < NMETRIC; k++) {
        lt_summary a = lt_summarize(v[0][k], runs), e = lt_summarize(v[1][k], runs);
        int prec = k == TPUT ? 0 : 2;
        printf("%-30s %12.*f %12.*f %12.*f   %12.*f %12.*f %12.*f\n", names[k], prec, a.min, prec,
               a.median, prec, a.max, prec, e.min, prec, e.median, prec, e.max);
    }
    printf("(records of %.0f bytes, lz4, idempotent, linger 20 ms for throughput)\n", rec_bytes);
    lt_devbroker_close(dev);
    return 0;
}
