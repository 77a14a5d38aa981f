/* looptune tail: the records of a topic as JSON lines, one per record, for
 * people and for jq. Records that are not looptune envelopes are reported
 * on stderr with their partition and offset, and skipped. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "looptune/kafka.h"

static const char *const tail_help =
    "usage: looptune tail TOPIC [options]\n"
    "\n"
    "Prints the looptune records of TOPIC as JSON lines on stdout, one per record\n"
    "(proto3 JSON: field names as in proto/looptune.proto, 64-bit integers as strings).\n"
    "A record that is not a looptune envelope is reported on stderr with its partition\n"
    "and offset, and skipped. Runs until --exit-at-end, --max, --timeout-ms, or Ctrl-C.\n"
    "A cluster where no broker answers is an error after 10 s (or --timeout-ms if that\n"
    "is shorter), --max included.\n"
    "\n"
    "      --brokers B          bootstrap servers host:port[,...]\n";
/* ... then the shared Kafka lines (lt_cli_kafka_help), then: */
static const char *const tail_help_end =
    "      --from-beginning     start at the oldest record (default: new records only)\n"
    "      --group G            consume as group G and commit (default: a fresh group, no commit)\n"
    "  -e, --exit-at-end        stop at the end each partition had when it was assigned\n"
    "                           (records produced later are not waited for), as kcat -e\n"
    "      --max N              stop after N records (skipped ones count)\n"
    "      --timeout-ms T       stop after T ms without a new record, counted from when the\n"
    "                           group assigned the partitions (joining takes a few seconds)\n"
    "  -h, --help               this help\n";

/* How long a cluster may take to answer at all. */
enum { CONNECT_TIMEOUT_MS = 10000 };

int lt_cmd_tail(int argc, char **argv) {
    const char *cmd = "tail";
    const char *group = NULL;
    bool from_beginning = false, at_end = false;
    int64_t max = 0, timeout_ms = 0;
    lt_cli_kafka kafka;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    enum { O_BEGIN = 256, O_GROUP, O_MAX, O_TIMEOUT };
    static const struct option opts[] = {
        LT_CLI_KAFKA_CONN_OPTIONS,
        {"from-beginning", no_argument, 0, O_BEGIN},
        {"group", required_argument, 0, O_GROUP},
        {"max", required_argument, 0, O_MAX},
        {"timeout-ms", required_argument, 0, O_TIMEOUT},
        {"exit-at-end", no_argument, 0, 'e'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c, exit_code = 1;
    lt_consumer *consumer = NULL;
    while ((c = getopt_long(argc, argv, ":eh" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int k = lt_cli_kafka_option(cmd, c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case O_BEGIN: from_beginning = true; break;
        case O_GROUP: group = optarg; break;
        case 'e': at_end = true; break;
        case O_MAX:
            if (!lt_cli_parse_i64(optarg, 1, INT64_MAX, &max)) {
                lt_cli_fail(cmd, "bad --max '%s': expected a positive number", optarg);
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
            lt_cli_kafka_help(tail_help, 27, false, tail_help_end);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto done;
        }
    }
    if (optind >= argc) {
        lt_cli_fail(cmd, "no topic: give TOPIC (see looptune tail --help)");
        goto done;
    }
    const char *topic = argv[optind++];
    if (optind < argc) {
        lt_cli_fail(cmd, "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if (lt_cli_kafka_check(cmd, &kafka)) goto done;
    char fresh[96];
    if (!group) {
        snprintf(fresh, sizeof fresh, "looptune-tail-%ld-%llu", (long)getpid(),
                 (unsigned long long)lt_now_ns());
    }
    lt_consumer_opts co = {
        .conn = {.brokers = kafka.conn.brokers, .props = kafka.props,
                 .client_id = "looptune-tail"},
        .group = group ? group : fresh, .topics = &topic, .n_topics = 1,
        .from_beginning = from_beginning, .auto_commit = group != NULL, .until_end = at_end,
        .connect_timeout_ms = timeout_ms && timeout_ms < CONNECT_TIMEOUT_MS ? (int)timeout_ms
                                                                             : CONNECT_TIMEOUT_MS,
        .topics_must_exist = true};
    int rc = lt_consumer_open(&consumer, &co);
    if (rc) {
        lt_cli_fail_status(cmd, rc, "cannot start the consumer");
        goto done;
    }
    lt_cli_catch_stop_signals();

    int64_t n = 0;
    uint64_t idle_since = 0; /* the assignment, then the last record: joining is not idle */
    exit_code = 0;
    while (!atomic_load(&lt_cli_stop) && (!max || n < max) && !(at_end && lt_consumer_at_end(consumer))) {
        lt_record r;
        rc = lt_consumer_poll(consumer, 200, &r);
        uint64_t now = lt_now_ns();
        if (!idle_since && lt_consumer_assigned(consumer)) idle_since = now;
        if (rc < 0) {
            lt_cli_fail(cmd, "%s", lt_errmsg());
            exit_code = 1;
            break;
        }
        if (rc == 0) {
            if (timeout_ms && idle_since && now - idle_since >= (uint64_t)timeout_ms * 1000000ull)
                break;
            continue;
        }
        idle_since = now;
        n++;
        Looptune__Envelope *env;
        char *json = NULL;
        if ((rc = lt_envelope_decode(r.value, r.len, &env)) == LT_OK) {
            rc = lt_envelope_to_json(env, &json);
            lt_envelope_free(env);
        }
        if (rc) {
            fprintf(stderr, "looptune tail: %s partition %d offset %lld: skipped: %s\n", r.topic,
                    r.partition, (long long)r.offset, lt_errmsg());
            continue;
        }
        fputs(json, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(json);
    }
done:
    lt_consumer_close(consumer);
    lt_cli_kafka_free(&kafka);
    return exit_code;
}
