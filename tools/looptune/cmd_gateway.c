/* looptune gateway: the OpenAI-compatible HTTP front of the inference
 * service. Requests go to the requests topic, the workers' completions come
 * back from the completions topic; gateways and workers scale apart. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "looptune/http.h"

static const char *const gateway_help =
    "usage: looptune gateway --brokers B [--http HOST:PORT] [options]\n"
    "\n"
    "Serves OpenAI's HTTP API over the workers of `looptune serve`: POST\n"
    "/v1/completions and /v1/chat/completions (\"stream\": true for server-sent\n"
    "events), GET /v1/models, /health, and Prometheus metrics on /metrics. Each\n"
    "request goes to the requests topic; its tokens come back from the completions\n"
    "topic, each once, also when a worker died and another served it again. A\n"
    "client that disconnects cancels its request. Runs until SIGINT or SIGTERM.\n"
    "\n"
    "  -b, --brokers B         Kafka bootstrap servers (required)\n";
static const char *const gateway_help_end =
    "      --http HOST:PORT    where to listen (default 127.0.0.1:8080; port 0: any\n"
    "                          free one, printed); loopback unless you say otherwise\n"
    "      --api-key KEY       clients must send 'Authorization: Bearer KEY'\n"
    "      --api-key-file F    the key is F's first line (keeps it out of `ps`)\n"
    "      --model NAME        a model name the workers serve, repeatable: listed on\n"
    "                          /v1/models, and any other name is refused here with\n"
    "                          404 (default: every name goes to the workers)\n"
    "      --max-inflight N    requests queued or generating before 429 (default 256)\n"
    "      --max-connections N HTTP connections at once (default 512)\n"
    "      --max-tokens N      tokens of a request that names none (default 256)\n"
    "      --timeout S         a request's deadline in seconds (default 300)\n"
    "      --partitions N      partitions of the topics it creates (default 6)\n"
    "  -h, --help              this help\n";

static _Atomic bool stop_requested;
static void on_signal(int sig) {
    (void)sig;
    atomic_store(&stop_requested, true);
}

#define FAIL(...)                                                              \
    do {                                                                       \
        lt_cli_fail(cmd, __VA_ARGS__);                                         \
        goto done;                                                             \
    } while (0)

#define MAX_MODELS 64

/* The key in file path: its first line, without the newline. */
static int read_key(const char *cmd, const char *path, char **out) {
    char *text = NULL;
    if (lt_cli_read_text(cmd, path, &text)) return 1;
    text[strcspn(text, "\r\n")] = 0;
    if (!text[0]) {
        free(text);
        return lt_cli_fail(cmd, "--api-key-file %s: the first line is empty", path);
    }
    *out = text;
    return 0;
}

int lt_cmd_gateway(int argc, char **argv) {
    const char *cmd = "gateway";
    enum { O_HTTP = 256, O_KEY, O_KEY_FILE, O_MODEL, O_INFLIGHT, O_CONNS, O_MAX_TOKENS,
           O_TIMEOUT, O_PARTS };
    static const struct option opts[] = {
        LT_CLI_KAFKA_OPTIONS,
        {"http", required_argument, 0, O_HTTP},
        {"api-key", required_argument, 0, O_KEY},
        {"api-key-file", required_argument, 0, O_KEY_FILE},
        {"model", required_argument, 0, O_MODEL},
        {"max-inflight", required_argument, 0, O_INFLIGHT},
        {"max-connections", required_argument, 0, O_CONNS},
        {"max-tokens", required_argument, 0, O_MAX_TOKENS},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"partitions", required_argument, 0, O_PARTS},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lt_cli_kafka kafka;
    int exit_code = 1;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    lt_gateway_opts go = {.http_addr = "127.0.0.1:8080"};
    const char *models[MAX_MODELS];
    char *key_from_file = NULL;
    lt_gateway *g = NULL;
    int64_t v;
    float f;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":b:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int k = lt_cli_kafka_option(cmd, c == 'b' ? LT_CLI_O_BROKERS : c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case O_HTTP: go.http_addr = optarg; break;
        case O_KEY:
            if (!*optarg) FAIL("bad --api-key '': expected a key");
            go.api_key = optarg;
            break;
        case O_KEY_FILE:
            free(key_from_file);
            key_from_file = NULL;
            if (read_key(cmd, optarg, &key_from_file)) goto done;
            go.api_key = key_from_file;
            break;
        case O_MODEL:
            if (!*optarg) FAIL("bad --model '': expected a model name");
            if (go.n_models == MAX_MODELS) FAIL("bad --model: at most %d", MAX_MODELS);
            models[go.n_models++] = optarg;
            break;
        case O_INFLIGHT:
            if (!lt_cli_parse_i64(optarg, 1, 1000000, &v))
                FAIL("bad --max-inflight '%s': expected 1..1000000", optarg);
            go.max_inflight = v;
            break;
        case O_CONNS:
            if (!lt_cli_parse_i64(optarg, 1, 100000, &v))
                FAIL("bad --max-connections '%s': expected 1..100000", optarg);
            go.max_connections = (int)v;
            break;
        case O_MAX_TOKENS:
            if (!lt_cli_parse_i64(optarg, 1, 1 << 20, &v))
                FAIL("bad --max-tokens '%s': expected 1..1048576", optarg);
            go.default_max_tokens = v;
            break;
        case O_TIMEOUT:
            if (!lt_cli_parse_f32(optarg, 0.1f, 86400.0f, &f))
                FAIL("bad --timeout '%s': expected seconds 0.1..86400", optarg);
            go.timeout_s = f;
            break;
        case O_PARTS:
            if (!lt_cli_parse_i64(optarg, 1, 10000, &v))
                FAIL("bad --partitions '%s': expected 1..10000", optarg);
            go.partitions = (int32_t)v;
            break;
        case 'h':
            lt_cli_kafka_help(gateway_help, 26, true, gateway_help_end);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc) FAIL("unexpected argument '%s' (see looptune gateway --help)", argv[optind]);
    if (!lt_cli_kafka_has_brokers(&kafka))
        FAIL("no broker: give --brokers HOST:PORT (the gateway and the workers of `looptune "
             "serve` meet on a Kafka cluster; `looptune serve --http` alone runs all of it in "
             "one process)");
    if (lt_cli_kafka_check(cmd, &kafka)) goto done;
    go.conn = kafka.conn;
    go.topic_prefix = kafka.topic_prefix;
    go.models = models;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is the write's error */
    int rc = lt_gateway_open(&g, &go);
    if (rc) {
        lt_cli_fail_status(cmd, rc, "cannot start");
        goto done;
    }
    char host[128];
    snprintf(host, sizeof host, "%.*s", (int)(strrchr(go.http_addr, ':') - go.http_addr), go.http_addr);
    fprintf(stderr, "gateway: listening on http://%s:%d (requests on %srequests, completions from %scompletions)\n",
            host, lt_gateway_port(g), lt_cli_kafka_prefix(&kafka), lt_cli_kafka_prefix(&kafka));
    while (!atomic_load(&stop_requested)) usleep(100 * 1000);
    fprintf(stderr, "gateway: stopping\n");
    exit_code = 0;
done:
    lt_gateway_close(g);
    free(key_from_file);
    lt_cli_kafka_free(&kafka);
    return exit_code;
}
