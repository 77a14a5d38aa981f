/* `--config-store kafka` end to end on the real broker: `looptune tune`
 * publishes its table to <prefix>configs (one record per row, trials
 * carried), `looptune run` and `looptune bench` warm-start from the topic and
 * apply every one of them ("warm start: N configurations from ... on B");
 * a bad SPEC, kafka without --brokers and Kafka options without kafka are
 * refused with one line and a non-zero exit. */
#include <stdarg.h>
#include <string.h>

#include "kafka/kafka_test.h"
#include "looptune/tune.h"
#include "test.h"

static const char *bin, *bootstrap;
static char out_path[512], err_path[512];

/* Runs `looptune ARGS...` (NULL-terminated); stdout and stderr in *out, *err
 * (malloc'd). Returns the exit status. */
static int cli(char **out, char **err, ...) {
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)bin;
    va_list ap;
    va_start(ap, err);
    for (char *a; n < 39 && (a = va_arg(ap, char *));) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    int rc = kt_run(argv, out_path, err_path, 120000, NULL);
    *out = kt_slurp(out_path);
    *err = kt_slurp(err_path);
    if (!*out) *out = strdup("");
    if (!*err) *err = strdup("");
    return rc;
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* N of "warm start: N configurations from WHERE" (and WHERE), or -1. */
static int warm_count(const char *err, char *where, size_t n) {
    const char *w = strstr(err, "warm start: ");
    int count = -1;
    char buf[300] = "";
    if (!w || sscanf(w, "warm start: %d configurations from %299[^\n]", &count, buf) != 2)
        return -1;
    snprintf(where, n, "%s", buf);
    return count;
}

/* Rows of tune's table: the lines after its header. */
static int table_rows(const char *out) {
    const char *h = strstr(out, "best params\n");
    if (!h) return -1;
    return lines(h + strlen("best params\n"));
}

static void expect_refused(const char *what, int rc, const char *err, const char *needle) {
    ASSERT_TRUE(rc != 0);
    ASSERT_EQ(lines(err), 1);
    ASSERT_TRUE(strstr(err, needle) != NULL);
    if (rc == 0 || lines(err) != 1 || !strstr(err, needle))
        fprintf(stderr, "%s: exit %d, stderr: %s\n", what, rc, err);
}

int main(void) {
    bin = getenv("LT_BIN");
    if (!bin) {
        fprintf(stderr, "LT_BIN (the looptune binary) is not set; ctest sets it\n");
        return 1;
    }
    bootstrap = kt_require_bootstrap();
    char model[512], prefix[128], topic[160], where[300], file_store[512];
    snprintf(model, sizeof model, "%s/storecli-%ld.gguf", kt_work_dir(), (long)getpid());
    snprintf(out_path, sizeof out_path, "%s/storecli-%ld.out", kt_work_dir(), (long)getpid());
    snprintf(err_path, sizeof err_path, "%s/storecli-%ld.err", kt_work_dir(), (long)getpid());
    snprintf(file_store, sizeof file_store, "%s/storecli-%ld.tsv", kt_work_dir(), (long)getpid());
    kt_unique(prefix, sizeof prefix, "lt-cli");
    strcat(prefix, ".");
    snprintf(topic, sizeof topic, "%sconfigs", prefix);
    char *out, *err;
    char want_where[400];
    snprintf(want_where, sizeof want_where, "%s on %s", topic, bootstrap);

    int rc = cli(&out, &err, "model-gen", "--preset", "stories260K", "-o", model, NULL);
    ASSERT_EQ(rc, 0);
    free(out), free(err);

    /* tune publishes its table */
    rc = cli(&out, &err, "tune", "-m", model, "--budget", "2", "--config-store", "kafka",
             "--brokers", bootstrap, "--topic-prefix", prefix, NULL);
    ASSERT_EQ(rc, 0);
    int rows = table_rows(out);
    ASSERT_TRUE(rows >= 5);
    ASSERT_TRUE(strstr(err, want_where) != NULL);
    if (rc) fprintf(stderr, "tune: %s\n", err);
    free(out), free(err);

    /* the topic holds one record per row, as the store reads it */
    lt_kafka_conn conn = {.brokers = bootstrap};
    lt_store_backend be;
    lt_store *s = NULL;
    ASSERT_EQ(lt_store_backend_topic(&be, &conn, topic, 15000), LT_OK);
    ASSERT_EQ(lt_store_open(&s, &be, NULL), LT_OK);
    int stored = s ? lt_store_count(s) : -1;
    ASSERT_EQ(stored, rows);
    lt_host host;
    lt_host_detect(&host);
    for (int i = 0; s && i < stored; i++) {
        const lt_config_entry *e = lt_store_at(s, i);
        ASSERT_STREQ(e->host, host.host_class);
        ASSERT_TRUE(e->trials >= 1 && e->trials <= 2);
    }
    lt_store_close(s);

    /* run warm-starts from it: every entry applies (one prompt token: only
     * the decode program, which is what tune tuned) */
    rc = cli(&out, &err, "run", "-m", model, "--prompt-ids", "1", "-n", "4", "--temp", "0",
             "--config-store", "kafka", "--brokers", bootstrap, "--topic-prefix", prefix, NULL);
    ASSERT_EQ(rc, 0);
    int n = warm_count(err, where, sizeof where);
    ASSERT_TRUE(n > 0);
    ASSERT_EQ(n, stored);
    ASSERT_STREQ(where, want_where);
    if (n != stored) fprintf(stderr, "run: %s\n", err);
    free(out), free(err);

    /* so does bench */
    rc = cli(&out, &err, "bench", "-m", model, "-n", "2", "-r", "1", "--membw-mib", "1",
             "--config-store", "kafka", "--brokers", bootstrap, "--topic-prefix", prefix, NULL);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(warm_count(err, where, sizeof where), stored);
    free(out), free(err);

    /* refusals: one line, exit != 0 */
    rc = cli(&out, &err, "tune", "-m", model, "--config-store", "kafka", NULL);
    expect_refused("tune kafka without brokers", rc, err, "--brokers");
    free(out), free(err);
    rc = cli(&out, &err, "run", "-m", model, "--prompt-ids", "1", "-n", "1", "--config-store",
             "kafka", NULL);
    expect_refused("run kafka without brokers", rc, err, "--brokers");
    free(out), free(err);
    rc = cli(&out, &err, "bench", "-m", model, "-n", "2", "-r", "1", "--config-store", "kafka",
             NULL);
    expect_refused("bench kafka without brokers", rc, err, "--brokers");
    free(out), free(err);
    rc = cli(&out, &err, "tune", "-m", model, "--config-store", "", NULL);
    expect_refused("tune empty SPEC", rc, err, "bad --config-store ''");
    free(out), free(err);
    rc = cli(&out, &err, "run", "-m", model, "--prompt-ids", "1", "-n", "1", "--config-store",
             "kafka:configs", NULL);
    expect_refused("run kafka:configs", rc, err, "bad --config-store 'kafka:configs'");
    free(out), free(err);
    rc = cli(&out, &err, "tune", "-m", model, "--config-store", file_store, "--brokers", bootstrap,
             NULL);
    expect_refused("tune file store with --brokers", rc, err, "need --config-store kafka");
    free(out), free(err);
    rc = cli(&out, &err, "bench", "-m", model, "--topic-prefix", prefix, NULL);
    expect_refused("bench --topic-prefix without kafka", rc, err, "need --config-store kafka");
    free(out), free(err);
    rc = cli(&out, &err, "run", "-m", model, "--prompt-ids", "1", "-n", "1", "--brokers",
             bootstrap, NULL);
    expect_refused("run --brokers alone", rc, err, "--config-store kafka");
    free(out), free(err);
    rc = cli(&out, &err, "tune", "-m", model, "--config-store", "kafka", "--brokers", bootstrap,
             "-X", "linger.mss=5", NULL);
    expect_refused("tune bad -X", rc, err, "linger.mss");
    free(out), free(err);

    remove(model);
    remove(out_path);
    remove(err_path);
    return lt_test_finish();
}
