/* `looptune run --telemetry ...` as a program, without the real broker:
 * the embedded broker (said on stderr, records delivered), a broker that is
 * not there (the run finishes in bounded time and reports every record as a
 * delivery failure), a file, and option errors named in one line. */
#include <stdlib.h>
#include <string.h>

#include "kafka_test.h"
#include "looptune/telemetry_sinks.h"
#include "test.h"

static const char *bin;
static char out_path[512], err_path[512], model[512];

typedef struct {
    long long windows, emitted, dropped, failures;
} tel_line;

static bool parse(const char *err, tel_line *t) {
    const char *l = err ? strstr(err, "  telemetry run ") : NULL;
    const char *c = l ? strstr(l, ": ") : NULL;
    return c && sscanf(c, ": %lld windows; %lld records emitted, %lld dropped, %lld delivery",
                       &t->windows, &t->emitted, &t->dropped, &t->failures) == 4;
}

static int run(const char *const *extra, double *ms, char **err) {
    char *argv[32] = {(char *)bin, "run", "-m", model, "--prompt-ids", "1,403,407", "-n", "21",
                      "--temp", "0", "--print-ids", "--telemetry-window-tokens", "8"};
    int n = 13;
    for (int i = 0; extra[i]; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    fflush(stdout); /* else the child writes our buffered lines into its output */
    int rc = kt_run(argv, out_path, err_path, 120000, ms);
    *err = kt_slurp(err_path);
    return rc;
}

int main(void) {
    bin = getenv("LT_BIN");
    const char *data = getenv("LT_DATA_DIR");
    if (!bin || !data) {
        fprintf(stderr, "LT_BIN and LT_DATA_DIR must be set; ctest sets them\n");
        return 1;
    }
    snprintf(model, sizeof model, "%s/stories260K.bin", data);
    snprintf(out_path, sizeof out_path, "%s/telcli-%ld.out", kt_work_dir(), (long)getpid());
    snprintf(err_path, sizeof err_path, "%s/telcli-%ld.err", kt_work_dir(), (long)getpid());
    double ms;
    char *err;
    tel_line t;

    /* embedded broker: said so, every record delivered: host, run start,
     * 3 windows (8 + 8 + 4 steps) of 42 nodes (the embedding, 5 layers of 8, the
     * classifier: norms and the gate are matvec prologues, rope and the cache
     * stores their epilogues) and one over whole steps, the prompt's prefill
     * step, run end */
    ASSERT_EQ(run((const char *[]){"--telemetry", "kafka", NULL}, &ms, &err), 0);
    ASSERT_TRUE(err && strstr(err, "embedded in-memory broker"));
    ASSERT_TRUE(parse(err, &t));
    ASSERT_EQ(t.windows, 3);
    ASSERT_EQ(t.emitted, 3 + 3 * (42 + 1) + 1);
    ASSERT_EQ(t.dropped, 0);
    ASSERT_EQ(t.failures, 0);
    free(err);

    /* nobody listens at port 1: a bounded wait, every record a failure */
    ASSERT_EQ(run((const char *[]){"--telemetry", "kafka", "--brokers", "127.0.0.1:1", NULL}, &ms,
                  &err), 0);
    ASSERT_TRUE(parse(err, &t));
    ASSERT_EQ(t.emitted, 3 + 3 * (42 + 1) + 1);
    ASSERT_EQ(t.failures, t.emitted);
    ASSERT_TRUE(ms < 30000);
    printf("unreachable broker: run took %.1f s\n", ms / 1e3);
    free(err);

    /* a file: the records the summary counts are in it */
    char path[600];
    snprintf(path, sizeof path, "%s/telcli-%ld.bin", kt_work_dir(), (long)getpid());
    char arg[620];
    snprintf(arg, sizeof arg, "file:%s", path);
    ASSERT_EQ(run((const char *[]){"--telemetry", arg, "--telemetry-detail", "per-call", NULL}, &ms,
                  &err), 0);
    ASSERT_TRUE(parse(err, &t));
    free(err);
    FILE *f = fopen(path, "rb");
    ASSERT_TRUE(f != NULL);
    long long n = 0, samples = 0;
    Looptune__Envelope *e;
    while (f && lt_tel_file_next(f, &e) == 1) {
        samples += e->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE;
        lt_envelope_free(e);
        n++;
    }
    if (f) fclose(f);
    ASSERT_EQ(n, t.emitted);
    ASSERT_TRUE(samples >= 20 * 42);
    remove(path);

    /* option errors: one line, exit 1 */
    const char *const *bad[] = {
        (const char *[]){"--telemetry", "udp", NULL},
        (const char *[]){"--telemetry", "file:", NULL},
        (const char *[]){"--telemetry", "kafka", "-X", "linger.mss=5", NULL},
        (const char *[]){"--telemetry-detail", "every", NULL},
        (const char *[]){"--brokers", "127.0.0.1:9092", NULL},
        (const char *[]){"--telemetry", "file:/nonexistent-dir/t.bin", NULL},
    };
    const char *want[] = {"bad --telemetry 'udp'", "bad --telemetry 'file:'",
                          "kafka property 'linger.mss'", "telemetry detail 'every'",
                          "need --telemetry kafka", "/nonexistent-dir/t.bin"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ(run(bad[i], &ms, &err), 1);
        ASSERT_TRUE(err && strstr(err, want[i]));
        if (err && !strstr(err, want[i])) fprintf(stderr, "case %zu: %s", i, err);
        free(err);
    }
    remove(out_path);
    remove(err_path);
    return lt_test_finish();
}
