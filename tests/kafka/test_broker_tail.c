/* `looptune tail` run as a program against the real broker: good records
 * come out as JSON lines in order, bad ones (not protobuf, empty, cut
 * short) are reported on stderr with partition and offset and skipped, and
 * the options that end it (--max, --timeout-ms, --exit-at-end), --group
 * commits, and a missing topic is a clear error. A group join slower than
 * --timeout-ms still reads everything (tail and top --once), and a broker
 * that does not answer is a one-line error within a bound (tail --max
 * included, and top). */
#include <stdlib.h>
#include <string.h>

#include "kafka_test.h"
#include "looptune/kafka.h"
#include "samples.h"
#include "test.h"

static const char *brokers, *bin;
static char out_path[512], err_path[512];

/* Runs looptune tail with extra arguments; returns the exit status. */
static int run_tail(const char *topic, const char *a1, const char *a2, const char *a3,
                    const char *a4, const char *a5, const char *a6, double *ms) {
    char *argv[16] = {(char *)bin, "tail", (char *)topic, "--brokers", (char *)brokers};
    int n = 5;
    const char *extra[] = {a1, a2, a3, a4, a5, a6};
    for (int i = 0; i < 6 && extra[i]; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return kt_run(argv, out_path, err_path, 60000, ms);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void test_tail(void) {
    char topic[128];
    kt_unique(topic, sizeof topic, "lt-tail");
    lt_kafka_conn conn = {.brokers = brokers};
    lt_kafka_admin *a;
    ASSERT_EQ(lt_kafka_admin_open(&a, &conn), LT_OK);
    lt_topic_spec spec = {.name = topic, .partitions = 1, .replication = 1};
    ASSERT_EQ(lt_kafka_admin_create_topics(a, &spec, 1, 15000, NULL), LT_OK);
    lt_kafka_admin_close(a);

    /* offsets 0-2 good, 3 not protobuf, 4 empty, 5 cut short, 6-7 good */
    lt_producer *p;
    lt_producer_opts po = {.conn = conn, .topic = topic, .linger_ms = -1};
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);
    sample s;
    const int kinds[5] = {0, 3, 6, 8, 9};
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(lt_producer_send_envelope(p, NULL, sample_build(&s, kinds[i], i)), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK); /* keep the order */
    const char *text = "this is not protobuf";
    ASSERT_EQ(lt_producer_send(p, NULL, 0, text, strlen(text)), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    ASSERT_EQ(lt_producer_send(p, NULL, 0, NULL, 0), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    uint8_t buf[1024];
    size_t len;
    ASSERT_EQ(lt_envelope_pack(sample_build(&s, 3, 9), buf, sizeof buf, &len), LT_OK);
    ASSERT_EQ(lt_producer_send(p, NULL, 0, buf, len - 7), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    for (int i = 3; i < 5; i++) {
        ASSERT_EQ(lt_producer_send_envelope(p, NULL, sample_build(&s, kinds[i], i)), LT_OK);
        ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    }
    lt_producer_close(p);

    double ms;
    ASSERT_EQ(run_tail(topic, "--from-beginning", "--max", "8", NULL, NULL, NULL, &ms), 0);
    char *out = kt_slurp(out_path), *err = kt_slurp(err_path);
    ASSERT_TRUE(out && err);
    if (!out || !err) return;
    ASSERT_EQ(count_lines(out), 5);
    /* each good record, in order, exactly as looptune's JSON of it */
    char *line = out;
    for (int i = 0; i < 5 && line; i++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char *want;
        ASSERT_EQ(lt_envelope_to_json(sample_build(&s, kinds[i], i), &want), LT_OK);
        ASSERT_STREQ(line, want);
        free(want);
        line = nl ? nl + 1 : NULL;
    }
    ASSERT_EQ(count_lines(err), 3);
    char want[256];
    snprintf(want, sizeof want, "looptune tail: %s partition 0 offset 3: skipped: ", topic);
    ASSERT_TRUE(strstr(err, want) != NULL);
    snprintf(want, sizeof want, "%s partition 0 offset 4: skipped: empty record", topic);
    ASSERT_TRUE(strstr(err, want) != NULL);
    snprintf(want, sizeof want, "%s partition 0 offset 5: skipped: envelope: field 11: length",
             topic);
    ASSERT_TRUE(strstr(err, want) != NULL);
    if (count_lines(err) != 3) fprintf(stderr, "tail stderr:\n%s", err);
    free(out);
    free(err);

    /* --timeout-ms ends a tail that has read everything */
    ASSERT_EQ(run_tail(topic, "--from-beginning", "--timeout-ms", "1500", NULL, NULL, NULL, &ms),
              0);
    out = kt_slurp(out_path);
    ASSERT_EQ(count_lines(out ? out : ""), 5);
    ASSERT_TRUE(ms >= 1500 && ms < 30000);
    free(out);

    /* --group commits: the same group a second time gets nothing old */
    char group[96];
    kt_unique(group, sizeof group, "tail-group");
    ASSERT_EQ(run_tail(topic, "--from-beginning", "--group", group, "--max", "8", NULL, &ms), 0);
    out = kt_slurp(out_path);
    ASSERT_EQ(count_lines(out ? out : ""), 5);
    free(out);
    ASSERT_EQ(run_tail(topic, "--from-beginning", "--group", group, "--timeout-ms", "3000", NULL,
                       &ms), 0);
    out = kt_slurp(out_path);
    ASSERT_EQ(count_lines(out ? out : ""), 0);
    free(out);
}

/* Creates topic with one partition and n sample records on it. */
static void make_topic(const char *topic, int n) {
    lt_kafka_conn conn = {.brokers = brokers};
    lt_kafka_admin *a;
    ASSERT_EQ(lt_kafka_admin_open(&a, &conn), LT_OK);
    lt_topic_spec spec = {.name = topic, .partitions = 1, .replication = 1};
    ASSERT_EQ(lt_kafka_admin_create_topics(a, &spec, 1, 15000, NULL), LT_OK);
    lt_kafka_admin_close(a);
    lt_producer *p;
    lt_producer_opts po = {.conn = conn, .topic = topic};
    ASSERT_EQ(lt_producer_open(&p, &po), LT_OK);
    sample s;
    for (int i = 0; i < n; i++)
        ASSERT_EQ(lt_producer_send_envelope(p, NULL, sample_build(&s, i % SAMPLE_KINDS, i)), LT_OK);
    ASSERT_EQ(lt_producer_flush(p, 10000), LT_OK);
    lt_producer_close(p);
}

/* A member of group that takes the topic's partition, then stops polling:
 * the next member's join waits until this one is evicted, after its
 * max.poll.interval.ms (6 s, the broker's least session timeout), as joins
 * wait on a broker with the default group.initial.rebalance.delay.ms (3 s)
 * or on a busy group. */
static lt_consumer *hold_group(const char *topic, const char *group, lt_kafka_props **props) {
    ASSERT_EQ(lt_kafka_props_init(props), LT_OK);
    ASSERT_EQ(lt_kafka_props_parse(*props, "session.timeout.ms=6000"), LT_OK);
    ASSERT_EQ(lt_kafka_props_parse(*props, "max.poll.interval.ms=6000"), LT_OK);
    lt_consumer *c = NULL;
    const char *topics[1] = {topic};
    lt_consumer_opts co = {.conn = {.brokers = brokers, .props = *props}, .group = group,
                           .topics = topics, .n_topics = 1, .from_beginning = true};
    ASSERT_EQ(lt_consumer_open(&c, &co), LT_OK);
    if (!c) return NULL;
    uint64_t t0 = lt_now_ns();
    lt_record r;
    while (!lt_consumer_assigned(c) && lt_now_ns() - t0 < 30000000000ull)
        lt_consumer_poll(c, 100, &r);
    ASSERT_TRUE(lt_consumer_assigned(c));
    return c;
}

/* "looptune top: TOPIC, N records": N, or -1. */
static long long top_records(const char *out) {
    const char *c = out ? strstr(out, ", ") : NULL;
    long long n;
    return c && sscanf(c, ", %lld records", &n) == 1 ? n : -1;
}

/* Nobody listens on port 1. */
#define UNREACHABLE "127.0.0.1:1"

static void test_slow_join(void) {
    enum { N = 103 };
    char prefix[96], topic[128], g_tail[96], g_top[96];
    kt_unique(prefix, sizeof prefix, "lt-join");
    strcat(prefix, ".");
    snprintf(topic, sizeof topic, "%stelemetry", prefix);
    make_topic(topic, N);
    double ms;

    /* --exit-at-end: everything there at the start, then stop by itself */
    ASSERT_EQ(run_tail(topic, "--from-beginning", "--exit-at-end", NULL, NULL, NULL, NULL, &ms), 0);
    char *out = kt_slurp(out_path);
    ASSERT_EQ(count_lines(out ? out : ""), N);
    ASSERT_TRUE(ms < 30000);
    free(out);
    /* ... and from the end (the default start): nothing to wait for */
    ASSERT_EQ(run_tail(topic, "-e", NULL, NULL, NULL, NULL, NULL, &ms), 0);
    out = kt_slurp(out_path);
    ASSERT_EQ(count_lines(out ? out : ""), 0);
    ASSERT_TRUE(ms < 30000);
    free(out);

    /* The slow cases run side by side. A join that outlasts --timeout-ms
     * (tail) or the old idle time (top --once) still reads every record: the
     * time until the partitions are assigned is not idle time. A broker that
     * does not answer is one line naming it and exit 1, in bounded time. */
    kt_unique(g_tail, sizeof g_tail, "tail-held");
    kt_unique(g_top, sizeof g_top, "top-held");
    lt_kafka_props *p_tail, *p_top;
    lt_consumer *h_tail = hold_group(topic, g_tail, &p_tail);
    lt_consumer *h_top = hold_group(topic, g_top, &p_top);
    char xgroup[128];
    snprintf(xgroup, sizeof xgroup, "group.id=%s", g_top);
    struct {
        const char *what;
        char *argv[12];
        int want_rc;
        double max_ms;
        char out[600], err[600];
        kt_proc proc;
    } jobs[] = {
        {"tail behind a slow join",
         {(char *)bin, "tail", topic, "--brokers", (char *)brokers, "--from-beginning", "--group",
          g_tail, "--timeout-ms", "2000", NULL},
         0, 60000, "", "", {0}},
        {"top --once behind a slow join",
         {(char *)bin, "top", "--once", "--brokers", (char *)brokers, "--topic-prefix", prefix,
          "-X", xgroup, NULL},
         0, 60000, "", "", {0}},
        {"unreachable, tail --timeout-ms",
         {(char *)bin, "tail", topic, "--brokers", UNREACHABLE, "--timeout-ms", "1500", NULL}, 1,
         1500 + 3000, "", "", {0}},
        {"unreachable, tail --max (the connection timeout)",
         {(char *)bin, "tail", topic, "--brokers", UNREACHABLE, "--max", "1", NULL}, 1,
         10000 + 5000, "", "", {0}},
        {"unreachable, top --once --timeout-ms",
         {(char *)bin, "top", "--once", "--brokers", UNREACHABLE, "--timeout-ms", "1500", NULL}, 1,
         1500 + 3000, "", "", {0}},
    };
    enum { NJ = sizeof jobs / sizeof jobs[0] };
    for (int i = 0; i < NJ; i++) {
        snprintf(jobs[i].out, sizeof jobs[i].out, "%s.%d", out_path, i);
        snprintf(jobs[i].err, sizeof jobs[i].err, "%s.%d", err_path, i);
        jobs[i].proc = kt_start(jobs[i].argv, jobs[i].out, jobs[i].err);
    }
    for (bool all = false; !all;) { /* each one's own duration */
        all = true;
        for (int i = 0; i < NJ; i++) all &= kt_check(&jobs[i].proc, 60000);
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    for (int i = 0; i < NJ; i++) {
        int rc = jobs[i].proc.rc;
        ms = jobs[i].proc.ms;
        out = kt_slurp(jobs[i].out);
        char *err = kt_slurp(jobs[i].err);
        ASSERT_EQ(rc, jobs[i].want_rc);
        ASSERT_TRUE(ms < jobs[i].max_ms);
        if (i == 0) ASSERT_EQ(count_lines(out ? out : ""), N);
        if (i == 1) ASSERT_EQ(top_records(out), N);
        if (jobs[i].want_rc) {
            ASSERT_EQ(count_lines(err ? err : ""), 1);
            ASSERT_TRUE(err && strstr(err, "no broker of " UNREACHABLE " answered"));
        }
        printf("%s: exit %d after %.1f s%s%s", jobs[i].what, rc, ms / 1e3,
               jobs[i].want_rc ? ": " : "\n", jobs[i].want_rc ? (err ? err : "\n") : "");
        free(out);
        free(err);
        remove(jobs[i].out);
        remove(jobs[i].err);
    }
    /* the holders were expelled (max.poll.interval): let each serve what
     * that left for it (the revoke, the error) before it leaves */
    for (int i = 0; i < 5; i++) {
        lt_record r;
        lt_consumer_poll(h_tail, 100, &r);
        lt_consumer_poll(h_top, 100, &r);
    }
    lt_consumer_close(h_tail);
    lt_consumer_close(h_top);
    lt_kafka_props_free(p_tail);
    lt_kafka_props_free(p_top);
}

static void test_errors(void) {
    char topic[128];
    kt_unique(topic, sizeof topic, "lt-missing");
    double ms;
    ASSERT_EQ(run_tail(topic, "--timeout-ms", "20000", NULL, NULL, NULL, NULL, &ms), 1);
    char *err = kt_slurp(err_path);
    char want[256];
    snprintf(want, sizeof want, "topic '%s' does not exist", topic);
    ASSERT_TRUE(err && strstr(err, want));
    ASSERT_TRUE(ms < 15000);
    free(err);
    ASSERT_EQ(run_tail(topic, "-X", "no.such.property=1", NULL, NULL, NULL, NULL, &ms), 1);
    err = kt_slurp(err_path);
    ASSERT_TRUE(err && strstr(err, "kafka property 'no.such.property'"));
    free(err);
}

int main(void) {
    brokers = kt_require_bootstrap();
    bin = getenv("LT_BIN");
    if (!bin) {
        fprintf(stderr, "LT_BIN (the looptune binary) is not set; ctest sets it\n");
        return 1;
    }
    snprintf(out_path, sizeof out_path, "%s/tail-%ld.out", kt_work_dir(), (long)getpid());
    snprintf(err_path, sizeof err_path, "%s/tail-%ld.err", kt_work_dir(), (long)getpid());
    test_tail();
    test_slow_join();
    test_errors();
    remove(out_path);
    remove(err_path);
    return lt_test_finish();
}
