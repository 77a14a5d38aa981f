/* `looptune run --telemetry kafka` against the real broker, run as a
 * program on a stories15M-shaped model: a consumer reads the run's records
 * back and decodes them. They are keyed by the run id and come in order
 * (host, run start, windows, run end); every window holds one record per
 * node, each node counted once per decode step; and the figures agree with
 * the run's own summary: records emitted, decode tokens and time, and the
 * weight bytes per token (from the matvec windows' analytic bytes). Then
 * `looptune top --once` shows the run, and a per-call run carries a sample
 * for every node of every step. A run with online tuning and no optimizer
 * on the cluster says why it started no trial. */
#include <stdlib.h>
#include <string.h>

#include "kafka_test.h"
#include "looptune/kafka.h"
#include "test.h"

static const char *brokers, *bin;
static char out_path[512], err_path[512], model[512];

enum { N_NEW = 81, STEPS = N_NEW - 1, WINDOW = 16 };

typedef struct {
    char run_id[64];
    long long windows, emitted, dropped, failures, dec_tokens;
    double dec_ms, weights_mb;
} summary;

/* The run summary's lines (stderr). */
static bool parse_summary(const char *err, summary *s) {
    memset(s, 0, sizeof *s);
    const char *d = strstr(err, "  decode  ");
    const char *w = strstr(err, "  weights ");
    const char *t = strstr(err, "  telemetry run ");
    if (!d || !w || !t) return false;
    if (sscanf(d, "  decode  %lld tokens in %lf ms", &s->dec_tokens, &s->dec_ms) != 2) return false;
    if (sscanf(w, "  weights %lf MB", &s->weights_mb) != 1) return false;
    const char *colon = strstr(t, ": ");
    if (sscanf(t, "  telemetry run %63s", s->run_id) != 1 || !colon) return false;
    return sscanf(colon, ": %lld windows; %lld records emitted, %lld dropped, %lld delivery",
                  &s->windows, &s->emitted, &s->dropped, &s->failures) == 4;
}

static int run_cli(char **argv, double *ms) {
    fflush(stdout); /* the child would write our buffered lines into its output */
    return kt_run(argv, out_path, err_path, 300000, ms);
}

/* Reads up to want records of topic from the beginning (60 s at most). */
/* Records in an envelope: a batch of calls counts its calls. */
static size_t records_in(const Looptune__Envelope *e) {
    return e->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLES ? e->call_samples->n_samples
                                                                        : 1;
}

/* Reads messages until they hold want records (or a minute passed); returns
 * the messages read. */
static size_t consume(const char *topic, size_t want, Looptune__Envelope **envs, char (*keys)[64]) {
    char group[96];
    kt_unique(group, sizeof group, "tel-test");
    const char *topics[1] = {topic};
    lt_consumer_opts co = {.conn = {.brokers = brokers}, .group = group, .topics = topics,
                           .n_topics = 1, .from_beginning = true};
    lt_consumer *c;
    ASSERT_EQ(lt_consumer_open(&c, &co), LT_OK);
    size_t n = 0, got = 0;
    uint64_t end = lt_now_ns() + 60000000000ull;
    while (got < want && lt_now_ns() < end) {
        lt_record r;
        int rc = lt_consumer_poll(c, 500, &r);
        if (rc != 1) continue;
        int d = lt_envelope_decode(r.value, r.len, &envs[n]);
        ASSERT_EQ(d, LT_OK);
        if (d) continue;
        snprintf(keys[n], 64, "%.*s", (int)r.key_len, r.key ? (const char *)r.key : "");
        got += records_in(envs[n]);
        n++;
    }
    lt_consumer_close(c);
    return n;
}

static int find_node(const Looptune__RunStart *rs, const char *label) {
    for (size_t k = 0; k < rs->n_kernels; k++)
        if (*label && !strcmp(rs->kernels[k]->node, label)) return (int)k;
    return -1;
}

/* The run start's nodes (first), then its whole-step tunables (node ""). */
static int count_nodes(const Looptune__RunStart *rs) {
    int n = 0;
    while ((size_t)n < rs->n_kernels && *rs->kernels[n]->node) n++;
    return n;
}

static void test_window_run(void) {
    char prefix[96], topic[128];
    kt_unique(prefix, sizeof prefix, "tel");
    strcat(prefix, ".");
    snprintf(topic, sizeof topic, "%stelemetry", prefix);
    char n_new[16], wt[16];
    snprintf(n_new, sizeof n_new, "%d", N_NEW);
    snprintf(wt, sizeof wt, "%d", WINDOW);
    char *argv[] = {(char *)bin, "run", "-m", model, "--prompt-ids", "1,400,300", "-n", n_new,
                    "--temp", "0", "--print-ids", "--telemetry", "kafka", "--brokers",
                    (char *)brokers, "--topic-prefix", prefix, "--telemetry-window-tokens", wt,
                    "--counters-every", "4", NULL};
    double ms;
    ASSERT_EQ(run_cli(argv, &ms), 0);
    char *err = kt_slurp(err_path);
    summary s;
    ASSERT_TRUE(err && parse_summary(err, &s));
    if (!err || !parse_summary(err, &s)) {
        fprintf(stderr, "run stderr:\n%s\n", err ? err : "(none)");
        free(err);
        return;
    }
    free(err);
    ASSERT_EQ(s.dec_tokens, STEPS);
    ASSERT_EQ(s.windows, (STEPS + WINDOW - 1) / WINDOW);
    ASSERT_EQ(s.dropped, 0);
    ASSERT_EQ(s.failures, 0);

    Looptune__Envelope **envs = calloc((size_t)s.emitted + 1, sizeof *envs);
    char(*keys)[64] = calloc((size_t)s.emitted + 1, sizeof *keys);
    size_t n = consume(topic, (size_t)s.emitted, envs, keys);
    ASSERT_EQ(n, s.emitted);
    if (n < 3) goto out;

    /* order and keys */
    for (size_t i = 0; i < n; i++) ASSERT_STREQ(keys[i], s.run_id);
    ASSERT_EQ(envs[0]->payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_HOST);
    ASSERT_EQ(envs[1]->payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START);
    ASSERT_EQ(envs[n - 1]->payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END);
    if (envs[1]->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START ||
        envs[n - 1]->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END)
        goto out;
    const Looptune__RunStart *rs = envs[1]->run_start;
    const Looptune__RunEnd *re = envs[n - 1]->run_end;
    ASSERT_STREQ(rs->run_id, s.run_id);
    ASSERT_STREQ(rs->model, model);
    ASSERT_STREQ(rs->dtype, "q8_0");
    ASSERT_STREQ(rs->executor, "looped");
    ASSERT_TRUE(rs->host && rs->host->triad_gb_s > 0 && rs->host->peak_gflops > 0);
    const int n_nodes = count_nodes(rs);
    /* stories15M: embed, 6 layers of 8 nodes, classifier (the norms and the
     * gate are the matvecs' prologues, rope and the cache stores their
     * epilogues); then the looped executor and each regime's thread count
     * (decode, prefill, batch) */
    ASSERT_EQ(n_nodes, 1 + 6 * 8 + 1);
    ASSERT_EQ(rs->n_kernels, (size_t)n_nodes + 4);
    ASSERT_STREQ(rs->kernels[n_nodes]->kernel, "looped");
    ASSERT_STREQ(rs->kernels[n_nodes + 1]->kernel, "threads");
    ASSERT_STREQ(rs->kernels[n_nodes + 2]->kernel, "threads");
    ASSERT_TRUE(strstr(rs->kernels[n_nodes + 2]->shape, ":prefill") != NULL);
    ASSERT_STREQ(rs->kernels[n_nodes + 3]->kernel, "threads");
    ASSERT_TRUE(strstr(rs->kernels[n_nodes + 3]->shape, ":batch") != NULL);
    /* a window per node and one over whole steps, and the prompt's prefill step */
    ASSERT_EQ(n, 3 + (size_t)s.windows * (size_t)(n_nodes + 1) + 1);

    /* windows: one record per node per window, each node once per step */
    long long *count = calloc((size_t)n_nodes, sizeof *count);
    long long per_window[16] = {0};
    int prefill_windows = 0;
    double weight_bytes = 0;
    for (size_t i = 2; i + 1 < n; i++) {
        ASSERT_EQ(envs[i]->payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW);
        if (envs[i]->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW) continue;
        const Looptune__KernelWindow *w = envs[i]->kernel_window;
        ASSERT_STREQ(w->run_id, s.run_id);
        if (!strcmp(w->kernel, "step") && strstr(w->shape, ":prefill")) {
            /* the prefill of the 3-token prompt: a window of its own, the
             * prefill thread count's key */
            prefill_windows++;
            ASSERT_STREQ(w->shape, rs->kernels[n_nodes + 2]->shape);
            ASSERT_EQ(w->window, 0);
            ASSERT_EQ(w->count, 1);
            ASSERT_EQ(w->steps, 3);
            ASSERT_TRUE(w->total_ns > 0 && w->total_ns == w->median_ns);
            ASSERT_STREQ(w->candidate_id, "");
            continue;
        }
        ASSERT_TRUE(w->window < 16);
        if (w->window < 16) per_window[w->window]++;
        long long left = STEPS - (long long)w->window * WINDOW;
        ASSERT_EQ(w->count, left < WINDOW ? left : WINDOW);
        ASSERT_EQ(w->steps, w->count); /* every node runs in every step */
        ASSERT_TRUE(w->total_ns >= w->count * w->min_ns && w->total_ns <= w->count * w->max_ns);
        ASSERT_STREQ(w->candidate_id, ""); /* no trial */
        if (!strcmp(w->kernel, "step")) { /* the decode step's key, that of the tunables */
            ASSERT_STREQ(w->shape, rs->kernels[n_nodes]->shape);
            continue;
        }
        int j = find_node(rs, w->node); /* labels are unique: "blk.3.ffn_up" */
        ASSERT_TRUE(j >= 0);
        if (j < 0) continue;
        count[j] += (long long)w->count;
        ASSERT_STREQ(w->kernel, rs->kernels[j]->kernel);
        ASSERT_STREQ(w->shape, rs->kernels[j]->shape);
        ASSERT_TRUE(strstr(w->shape, ":decode") != NULL); /* the key of a decode call */
        /* the task-clock and context switches are counters every host has */
        ASSERT_TRUE(w->n_available_counters >= 1);
        if (!strcmp(w->kernel, "matvec")) {
            long long cols, rows;
            char dt[16];
            ASSERT_EQ(sscanf(w->shape, "%15[^:]:%lldx%lld", dt, &cols, &rows), 3);
            /* a matvec moves its weights plus x in and y out (f32) */
            weight_bytes += (w->bytes - 4.0 * (double)(cols + rows)) * (double)w->count;
        }
    }
    for (int k = 0; k < n_nodes; k++) ASSERT_EQ(count[k], STEPS);
    ASSERT_EQ(prefill_windows, 1);
    /* every node's window and the one over whole steps */
    for (long long wi = 0; wi < s.windows; wi++) ASSERT_EQ(per_window[wi], n_nodes + 1);
    free(count);

    /* agreement with the summary: tokens, decode time (telemetry's starts
     * at the first sampled token, the summary's one sampling earlier), and
     * weight bytes per token (norms and one embedding row are the rest) */
    ASSERT_EQ(re->tokens, STEPS);
    ASSERT_TRUE(re->decode_s * 1e3 <= s.dec_ms + 0.05);
    ASSERT_TRUE(re->decode_s * 1e3 >= 0.9 * s.dec_ms);
    ASSERT_EQ(re->dropped_records, 0);
    double mb_per_token = weight_bytes / STEPS / 1e6;
    printf("weights per token: %.3f MB from the windows, %.1f MB in the summary\n", mb_per_token,
           s.weights_mb);
    ASSERT_NEAR(mb_per_token, s.weights_mb, 0.01 * s.weights_mb + 0.05);

    /* looptune top --once shows the run, its end and its kernels */
    char *targv[] = {(char *)bin, "top", "--once", "--brokers", (char *)brokers, "--topic-prefix",
                     prefix, "--idle-ms", "1500", NULL};
    ASSERT_EQ(run_cli(targv, &ms), 0);
    char *out = kt_slurp(out_path);
    ASSERT_TRUE(out != NULL);
    if (out) {
        char want[128];
        snprintf(want, sizeof want, "run %s", s.run_id);
        ASSERT_TRUE(strstr(out, want) != NULL);
        snprintf(want, sizeof want, "ended: %d tokens", STEPS);
        ASSERT_TRUE(strstr(out, want) != NULL);
        const char *kernels[] = {"matvec", "attention", "embed"};
        for (int k = 0; k < 3; k++) {
            /* each kernel's row: calls = nodes of that kernel x steps */
            const char *row = strstr(out, kernels[k]);
            ASSERT_TRUE(row != NULL);
        }
        long long calls = 0;
        const char *row = strstr(out, "\n  matvec ");
        ASSERT_TRUE(row && sscanf(row, "\n  matvec %lld", &calls) == 1);
        ASSERT_EQ(calls, (6 * 7 + 1) * STEPS); /* 7 projections per layer, the classifier */
        if (lt_test_failures) fprintf(stderr, "top output:\n%s", out);
        free(out);
    }
out:
    for (size_t i = 0; i < n; i++) lt_envelope_free(envs[i]);
    free(envs);
    free(keys);
}

static void test_per_call_run(void) {
    char prefix[96], topic[128];
    kt_unique(prefix, sizeof prefix, "telpc");
    strcat(prefix, ".");
    snprintf(topic, sizeof topic, "%stelemetry", prefix);
    char *argv[] = {(char *)bin, "run", "-m", model, "--prompt-ids", "1,400", "-n", "11",
                    "--temp", "0", "--print-ids", "--telemetry", "kafka", "--brokers",
                    (char *)brokers, "--topic-prefix", prefix, "--telemetry-detail", "per-call",
                    "--threads", "2", NULL};
    double ms;
    ASSERT_EQ(run_cli(argv, &ms), 0);
    char *err = kt_slurp(err_path);
    summary s;
    bool ok = err && parse_summary(err, &s);
    ASSERT_TRUE(ok);
    free(err);
    if (!ok) return;
    Looptune__Envelope **envs = calloc((size_t)s.emitted + 1, sizeof *envs);
    char(*keys)[64] = calloc((size_t)s.emitted + 1, sizeof *keys);
    size_t n = consume(topic, (size_t)s.emitted, envs, keys);
    size_t got = 0, batches = 0;
    for (size_t i = 0; i < n; i++) {
        got += records_in(envs[i]);
        batches += envs[i]->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLES;
        /* the per-call detail travels in batches, never as single records */
        ASSERT_TRUE(envs[i]->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE);
    }
    ASSERT_EQ(got, s.emitted);
    ASSERT_TRUE(batches >= 1 && batches < n);
    const int steps = 10, n_nodes = 50;
    /* every (step, node) has a sample from one thread at least, two at most */
    static unsigned char seen[10][50];
    memset(seen, 0, sizeof seen);
    size_t samples = 0;
    const Looptune__RunStart *rs = NULL;
    for (size_t i = 0; i < n; i++) {
        if (envs[i]->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START) rs = envs[i]->run_start;
        if (envs[i]->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLES || !rs) continue;
        const Looptune__CallSamples *b = envs[i]->call_samples;
        ASSERT_TRUE(b->n_samples >= 1 && b->n_samples <= 256);
        ASSERT_STREQ(b->run_id, rs->run_id); /* the batch's; the calls leave theirs empty */
        for (size_t j = 0; j < b->n_samples; j++) {
            const Looptune__CallSample *c = b->samples[j];
            samples++;
            ASSERT_STREQ(c->run_id, "");
            ASSERT_TRUE(c->token < (uint64_t)steps && c->thread < 2 && c->end_ns >= c->start_ns);
            int k = find_node(rs, c->node);
            ASSERT_TRUE(k >= 0 && k < n_nodes);
            if (k >= 0 && k < n_nodes && c->token < (uint64_t)steps) seen[c->token][k]++;
            if (k >= 0) ASSERT_STREQ(c->kernel, rs->kernels[k]->kernel);
        }
    }
    ASSERT_TRUE(rs != NULL && count_nodes(rs) == n_nodes);
    int missing = 0, extra = 0;
    for (int t = 0; t < steps; t++)
        for (int k = 0; k < n_nodes; k++) {
            missing += seen[t][k] == 0;
            extra += seen[t][k] > 2;
        }
    ASSERT_EQ(missing, 0);
    ASSERT_EQ(extra, 0);
    ASSERT_TRUE(samples >= (size_t)steps * (size_t)n_nodes);
    ASSERT_TRUE(samples <= (size_t)steps * (size_t)n_nodes * 2);
    printf("per-call: %zu samples for %d steps of %d nodes\n", samples, steps, n_nodes);
    for (size_t i = 0; i < n; i++) lt_envelope_free(envs[i]);
    free(envs);
    free(keys);
}

/* run --tune online on the cluster, no optimizer on its topics: the summary
 * names the reason, the control topic and the brokers. */
static void test_online_without_optimizer(void) {
    char prefix[96], want[512];
    kt_unique(prefix, sizeof prefix, "lt-online");
    strcat(prefix, ".");
    /* 40 decode steps: 5 windows of 8, more than the 3 a first trial waits for */
    char *argv[] = {(char *)bin, "run", "-m", model, "--prompt-ids", "1,403,407", "-n", "41",
                    "--temp", "0", "--print-ids", "--tune", "online", "--brokers",
                    (char *)brokers, "--topic-prefix", prefix, "--telemetry-window-tokens", "8",
                    NULL};
    double ms;
    ASSERT_EQ(run_cli(argv, &ms), 0);
    char *err = kt_slurp(err_path);
    ASSERT_TRUE(err && strstr(err, "online tuning: 0 trials (no optimizer reachable), "));
    snprintf(want, sizeof want, "no trial started: no control for this run arrived on %scontrol "
             "at %s", prefix, brokers);
    ASSERT_TRUE(err && strstr(err, want));
    if (err && !strstr(err, want)) fprintf(stderr, "run stderr:\n%s", err);
    free(err);
}

int main(void) {
    brokers = kt_require_bootstrap();
    bin = getenv("LT_BIN");
    if (!bin) {
        fprintf(stderr, "LT_BIN (the looptune binary) is not set; ctest sets it\n");
        return 1;
    }
    snprintf(out_path, sizeof out_path, "%s/tel-%ld.out", kt_work_dir(), (long)getpid());
    snprintf(err_path, sizeof err_path, "%s/tel-%ld.err", kt_work_dir(), (long)getpid());
    snprintf(model, sizeof model, "%s/tel-stories15M-q8_0.gguf", kt_work_dir());
    char *gen[] = {(char *)bin, "model-gen", "--preset", "stories15M", "--dtype", "q8_0", "-o",
                   model, NULL};
    double ms;
    ASSERT_EQ(run_cli(gen, &ms), 0);
    test_window_run();
    test_per_call_run();
    test_online_without_optimizer();
    remove(out_path);
    remove(err_path);
    remove(model);
    return lt_test_finish();
}
