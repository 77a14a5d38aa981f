/* `looptune tail` run as a program against the real broker: good records
 * come out as JSON lines in order, bad ones (not protobuf, empty, cut
 * short) are reported on stderr with partition and offset and skipped, and
 * the options that end it (--max, --timeout-ms), --group commits, and a
 * missing topic is a clear error. */
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
    test_errors();
    remove(out_path);
    remove(err_path);
    return lt_test_finish();
}
