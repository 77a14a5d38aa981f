/* looptune top: a live per-kernel view of the telemetry topic. Consumes
 * looptune.telemetry and shows, per run and kernel, the share of node time,
 * the achieved GB/s and GFLOP/s, and where that sits on the host's roofline
 * (achieved bandwidth over STREAM triad when the kernel's arithmetic
 * intensity is below the ridge point, achieved FLOP/s over the FMA peak
 * above it). Redraws once per second; --once prints one frame and exits. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "looptune/kafka.h"

static const char *const top_help =
    "usage: looptune top [options]\n"
    "\n"
    "Live per-kernel view of looptune runs from the telemetry topic: per run and\n"
    "kernel, calls, share of node time, achieved GB/s and GFLOP/s, and the fraction\n"
    "of the host's roofline reached (memory-bound kernels: GB/s over the STREAM triad\n"
    "bandwidth; compute-bound: GFLOP/s over the FMA peak; both from the run's host\n"
    "record). Redraws once per second until Ctrl-C. A cluster where no broker answers\n"
    "is an error after 10 s (with --once: or --timeout-ms, if shorter).\n"
    "\n"
    "      --brokers B          bootstrap servers host:port[,...]\n";
/* ... then the shared Kafka lines (lt_cli_kafka_help), then: */
static const char *const top_help_end =
    "      --from-beginning     include records already on the topic (default: new ones)\n"
    "      --run ID             only this run\n"
    "      --runs N             show the N most recent runs (default 4)\n"
    "      --once               read the topic from the beginning up to the end each partition\n"
    "                           had when it was assigned (as tail -e), print one frame, exit\n"
    "      --idle-ms T          with --once: read on, past that end, until no record has come\n"
    "                           for T ms (counted from the assignment: joining the group\n"
    "                           takes a few seconds), to include runs still going\n"
    "      --timeout-ms T       with --once: give up after T ms (default 30000): the frame\n"
    "                           so far, and an error\n"
    "  -h, --help               this help\n";

typedef struct {
    char name[32];
    uint64_t calls;
    double time_ns, bytes, flops; /* sums over windows: node time, bytes and FLOPs moved */
} kernel_stat;

typedef struct {
    char run_id[64], model[256], dtype[16], executor[16];
    uint32_t threads;
    double triad_gb_s, peak_gflops;
    bool started, ended;
    uint64_t tokens, dropped, failures, windows;
    double tok_s;
    uint64_t seen; /* order of the latest record, for "most recent" */
    kernel_stat *k;
    int nk, capk;
} run_stat;

typedef struct {
    run_stat *runs;
    int n, cap;
    uint64_t records, skipped, seq;
    const char *only;
} top_state;

static run_stat *find_run(top_state *s, const char *id) {
    if (s->only && strcmp(s->only, id)) return NULL;
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->runs[i].run_id, id)) return &s->runs[i];
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        run_stat *r = realloc(s->runs, (size_t)cap * sizeof *r);
        if (!r) return NULL;
        s->runs = r;
        s->cap = cap;
    }
    run_stat *r = &s->runs[s->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->run_id, sizeof r->run_id, "%s", id);
    return r;
}

static kernel_stat *find_kernel(run_stat *r, const char *name) {
    for (int i = 0; i < r->nk; i++)
        if (!strcmp(r->k[i].name, name)) return &r->k[i];
    if (r->nk == r->capk) {
        int cap = r->capk ? 2 * r->capk : 16;
        kernel_stat *k = realloc(r->k, (size_t)cap * sizeof *k);
        if (!k) return NULL;
        r->k = k;
        r->capk = cap;
    }
    kernel_stat *k = &r->k[r->nk++];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    return k;
}

/* A window's node time: total_ns. Writers before that field carried only
 * the rates (they leave steps 0 too): gb_s = bytes * count / time, so time =
 * bytes * count / gb_s (1 GB/s = 1 B/ns); failing that the FLOP rate,
 * failing that count x median. */
static double window_time_ns(const Looptune__KernelWindow *w) {
    if (w->steps > 0) return (double)w->total_ns;
    double n = (double)w->count;
    if (w->gb_s > 0 && w->bytes > 0) return w->bytes * n / w->gb_s;
    if (w->gflops > 0 && w->flops > 0) return w->flops * n / w->gflops;
    return n * (double)w->median_ns;
}

static void absorb(top_state *s, const Looptune__Envelope *e) {
    run_stat *r = NULL;
    s->seq++;
    switch (e->payload_case) {
    case LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START: {
        const Looptune__RunStart *m = e->run_start;
        if (!(r = find_run(s, m->run_id))) return;
        r->started = true;
        snprintf(r->model, sizeof r->model, "%s", m->model);
        snprintf(r->dtype, sizeof r->dtype, "%s", m->dtype);
        snprintf(r->executor, sizeof r->executor, "%s", m->executor);
        r->threads = m->threads;
        if (m->host) {
            r->triad_gb_s = m->host->triad_gb_s;
            r->peak_gflops = m->host->peak_gflops;
        }
        break;
    }
    case LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END: {
        const Looptune__RunEnd *m = e->run_end;
        if (!(r = find_run(s, m->run_id))) return;
        r->ended = true;
        r->tokens = m->tokens;
        r->tok_s = m->tok_s;
        r->dropped = m->dropped_records;
        r->failures = m->delivery_failures;
        break;
    }
    case LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW: {
        const Looptune__KernelWindow *w = e->kernel_window;
        if (!(r = find_run(s, w->run_id))) return;
        kernel_stat *k = find_kernel(r, w->kernel);
        if (!k) return;
        k->calls += w->count;
        k->time_ns += window_time_ns(w);
        k->bytes += w->bytes * (double)w->count;
        k->flops += w->flops * (double)w->count;
        if (w->window + 1 > r->windows) r->windows = w->window + 1;
        break;
    }
    default: return; /* hosts, call samples, other kinds: not shown */
    }
    if (r) r->seen = s->seq;
}

static int by_time(const void *a, const void *b) {
    double x = ((const kernel_stat *)a)->time_ns, y = ((const kernel_stat *)b)->time_ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int by_recent(const void *a, const void *b) {
    uint64_t x = (*(run_stat *const *)a)->seen, y = (*(run_stat *const *)b)->seen;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void print_frame(top_state *s, const char *topic, int max_runs, FILE *f) {
    fprintf(f, "looptune top: %s, %llu records, %d run%s\n", topic, (unsigned long long)s->records,
            s->n, s->n == 1 ? "" : "s");
    if (s->skipped) fprintf(f, "  (%llu records that are not looptune envelopes skipped)\n",
                            (unsigned long long)s->skipped);
    run_stat **order = malloc((size_t)(s->n ? s->n : 1) * sizeof *order);
    if (!order) return;
    for (int i = 0; i < s->n; i++) order[i] = &s->runs[i];
    qsort(order, (size_t)s->n, sizeof *order, by_recent);
    for (int i = 0; i < s->n && i < max_runs; i++) {
        run_stat *r = order[i];
        fprintf(f, "\nrun %s", r->run_id);
        if (r->started)
            fprintf(f, "  %s %s, %s executor, %u thread%s", r->model, r->dtype, r->executor,
                    r->threads, r->threads == 1 ? "" : "s");
        fprintf(f, "\n  ");
        if (r->ended)
            fprintf(f, "ended: %llu tokens, %.1f tokens/s, %llu dropped, %llu delivery failures",
                    (unsigned long long)r->tokens, r->tok_s, (unsigned long long)r->dropped,
                    (unsigned long long)r->failures);
        else
            fprintf(f, "running");
        fprintf(f, "; %llu windows", (unsigned long long)r->windows);
        if (r->triad_gb_s > 0)
            fprintf(f, "; roofline: triad %.1f GB/s, peak %.1f GFLOP/s", r->triad_gb_s,
                    r->peak_gflops);
        fprintf(f, "\n  %-10s %10s %7s %9s %9s %9s\n", "kernel", "calls", "time", "GB/s",
                "GFLOP/s", "roofline");
        if (r->nk) qsort(r->k, (size_t)r->nk, sizeof *r->k, by_time); /* none: k is NULL */
        double total = 0;
        for (int j = 0; j < r->nk; j++) total += r->k[j].time_ns;
        for (int j = 0; j < r->nk; j++) {
            const kernel_stat *k = &r->k[j];
            double gb_s = k->time_ns > 0 ? k->bytes / k->time_ns : 0;
            double gflops = k->time_ns > 0 ? k->flops / k->time_ns : 0;
            fprintf(f, "  %-10s %10llu %6.1f%% %9.2f %9.2f ", k->name, (unsigned long long)k->calls,
                    total > 0 ? 100.0 * k->time_ns / total : 0.0, gb_s, gflops);
            if (r->triad_gb_s > 0 && r->peak_gflops > 0 && k->bytes > 0) {
                /* below the ridge point (peak / triad FLOP per byte): memory bound */
                bool mem = k->flops / k->bytes < r->peak_gflops / r->triad_gb_s;
                double frac = mem ? gb_s / r->triad_gb_s : gflops / r->peak_gflops;
                fprintf(f, "%7.1f%% %s\n", 100.0 * frac, mem ? "mem" : "fpu");
            } else {
                fprintf(f, "%9s\n", "-");
            }
        }
    }
    free(order);
    fflush(f);
}

/* How long a cluster may take to answer at all. */
enum { CONNECT_TIMEOUT_MS = 10000 };


int lt_cmd_top(int argc, char **argv) {
    const char *cmd = "top";
    bool once = false, from_beginning = false;
    int64_t idle_ms = 0, timeout_ms = 30000, max_runs = 4;
    top_state st = {0};
    lt_cli_kafka kafka;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    enum { O_BEGIN = 256, O_RUN, O_RUNS, O_ONCE, O_IDLE, O_TIMEOUT };
    static const struct option opts[] = {
        LT_CLI_KAFKA_OPTIONS,
        {"from-beginning", no_argument, 0, O_BEGIN},
        {"run", required_argument, 0, O_RUN},
        {"runs", required_argument, 0, O_RUNS},
        {"once", no_argument, 0, O_ONCE},
        {"idle-ms", required_argument, 0, O_IDLE},
        {"timeout-ms", required_argument, 0, O_TIMEOUT},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c, exit_code = 1;
    lt_consumer *consumer = NULL;
    while ((c = getopt_long(argc, argv, ":h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int k = lt_cli_kafka_option(cmd, c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case O_BEGIN: from_beginning = true; break;
        case O_RUN: st.only = optarg; break;
        case O_RUNS:
            if (!lt_cli_parse_i64(optarg, 1, 1000, &max_runs)) {
                lt_cli_fail(cmd, "bad --runs '%s': expected 1..1000", optarg);
                goto done;
            }
            break;
        case O_ONCE: once = true; break;
        case O_IDLE:
            if (!lt_cli_parse_i64(optarg, 1, 3600000, &idle_ms)) {
                lt_cli_fail(cmd, "bad --idle-ms '%s': expected 1..3600000", optarg);
                goto done;
            }
            break;
        case O_TIMEOUT:
            if (!lt_cli_parse_i64(optarg, 1, 86400000, &timeout_ms)) {
                lt_cli_fail(cmd, "bad --timeout-ms '%s': expected 1..86400000", optarg);
                goto done;
            }
            break;
        case 'h':
            lt_cli_kafka_help(top_help, 27, true, top_help_end);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc) {
        lt_cli_fail(cmd, "unexpected argument '%s' (see looptune top --help)", argv[optind]);
        goto done;
    }
    if (!lt_cli_kafka_has_brokers(&kafka)) {
        lt_cli_fail(cmd, "no brokers: give --brokers host:port (looptune broker prints one)");
        goto done;
    }
    if (lt_cli_kafka_check(cmd, &kafka)) goto done;
    char topic[256], group[128];
    snprintf(topic, sizeof topic, "%s%s", lt_cli_kafka_prefix(&kafka),
             lt_kafka_topic_suffix(LT_TOPIC_TELEMETRY));
    snprintf(group, sizeof group, "looptune-top-%ld-%llu", (long)getpid(),
             (unsigned long long)(lt_now_ns() % 1000000000000ull));
    const char *topics[1] = {topic};
    int connect_ms = CONNECT_TIMEOUT_MS;
    if (once && timeout_ms < connect_ms) connect_ms = (int)timeout_ms;
    /* --once reads up to the end unless told to wait for a quiet topic */
    lt_consumer_opts co = {.conn = kafka.conn, .group = group,
                           .topics = topics, .n_topics = 1,
                           .from_beginning = once || from_beginning,
                           .until_end = once && !idle_ms, .connect_timeout_ms = connect_ms,
                           .topics_must_exist = once};
    int rc = lt_consumer_open(&consumer, &co);
    if (rc) {
        lt_cli_fail_status(cmd, rc, "cannot consume");
        goto done;
    }
    lt_cli_catch_stop_signals();
    uint64_t start = lt_now_ns(), last_frame = 0;
    uint64_t idle_since = 0; /* the assignment, then the last record: joining is not idle */
    bool missing_said = false, timed_out = false;
    exit_code = 0;
    while (!atomic_load(&lt_cli_stop)) {
        if (once && !idle_ms && lt_consumer_at_end(consumer)) break;
        lt_record rec;
        rc = lt_consumer_poll(consumer, 100, &rec);
        uint64_t now = lt_now_ns();
        if (!idle_since && lt_consumer_assigned(consumer)) idle_since = now;
        if (rc == 1) {
            idle_since = now;
            st.records++;
            Looptune__Envelope *e;
            if (lt_envelope_decode(rec.value, rec.len, &e) == LT_OK) {
                absorb(&st, e);
                lt_envelope_free(e);
            } else {
                st.skipped++;
            }
        } else if (rc == LT_ENOTFOUND && !missing_said) {
            fprintf(stderr, "looptune top: topic %s does not exist yet; waiting\n", topic);
            missing_said = true;
        } else if (rc < 0 && rc != LT_ENOTFOUND) {
            fprintf(stderr, "looptune top: %s\n", lt_errmsg());
        }
        if (once) {
            if (idle_ms && idle_since && now - idle_since >= (uint64_t)idle_ms * 1000000u) break;
            if (now - start >= (uint64_t)timeout_ms * 1000000u) {
                timed_out = true;
                break;
            }
            continue;
        }
        if (now - last_frame >= 1000000000u) {
            fputs("\033[H\033[2J", stdout); /* home, clear */
            print_frame(&st, topic, (int)max_runs, stdout);
            last_frame = now;
        }
    }
    print_frame(&st, topic, (int)max_runs, stdout);
    if (timed_out) {
        const char *when = !lt_consumer_assigned(consumer)
                               ? "before the group assigned the partitions"
                           : idle_ms ? "before the topic was quiet for --idle-ms"
                                     : "before the end of the topic";
        lt_cli_fail(cmd, "--timeout-ms %lld reached %s: the frame is partial",
                    (long long)timeout_ms, when);
        exit_code = 1;
    }
done:
    lt_consumer_close(consumer);
    for (int i = 0; i < st.n; i++) free(st.runs[i].k);
    free(st.runs);
    lt_cli_kafka_free(&kafka);
    return exit_code;
}
