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
static const char *const gateway_help_http =
    "      --http HOST:PORT    where to listen (default 127.0.0.1:8080; port 0: any\n"
    "                          free one, printed); loopback unless you say otherwise\n"
    "      --model NAME        a model name the workers serve, repeatable: listed on\n"
    "                          /v1/models, and any other name is refused here with\n"
    "                          404 (default: every name goes to the workers)\n";
static const char *const gateway_help_end =
    "      --partitions N      partitions of the topics it creates (default 6)\n"
    "  -h, --help              this help\n";

#define MAX_MODELS 64

int lt_cmd_gateway(int argc, char **argv) {
    const char *cmd = "gateway";
    enum { O_MODEL = 256, O_PARTS };
    static const struct option opts[] = {
        LT_CLI_KAFKA_OPTIONS,
        LT_CLI_HTTP_OPTIONS,
        {"model", required_argument, 0, O_MODEL},
        {"partitions", required_argument, 0, O_PARTS},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lt_cli_kafka kafka;
    int exit_code = 1;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    lt_cli_http http;
    lt_cli_http_init(&http, "127.0.0.1:8080");
    lt_gateway_opts *go = &http.go;
    const char *models[MAX_MODELS];
    lt_gateway *g = NULL;
    int64_t v;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":b:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int k = lt_cli_kafka_option(cmd, c == 'b' ? LT_CLI_O_BROKERS : c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        k = lt_cli_http_option(cmd, c, optarg, &http);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case O_MODEL:
            if (!*optarg) FAIL("bad --model '': expected a model name");
            if (go->n_models == MAX_MODELS) FAIL("bad --model: at most %d", MAX_MODELS);
            models[go->n_models++] = optarg;
            break;
        case O_PARTS:
            if (!lt_cli_parse_i64(optarg, 1, 10000, &v))
                FAIL("bad --partitions '%s': expected 1..10000", optarg);
            go->partitions = (int32_t)v;
            break;
        case 'h':
            fputs(gateway_help, stdout);
            lt_cli_kafka_help("", 26, true, gateway_help_http);
            fputs(lt_cli_http_help, stdout);
            fputs(gateway_help_end, stdout);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc) FAIL("unexpected argument '%s' (see looptune gateway --help)", argv[optind]);
    if (lt_cli_kafka_require(cmd, &kafka,
                             "the gateway and the workers of `looptune serve` meet on a "
                             "Kafka cluster; `looptune serve --http` alone runs all of it "
                             "in one process"))
        goto done;
    go->models = models;
    lt_cli_catch_stop_signals();
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is the write's error */
    if (lt_cli_http_start(cmd, &http, &kafka.conn, kafka.topic_prefix, &g)) goto done;
    while (!atomic_load(&lt_cli_stop)) usleep(100 * 1000);
    fprintf(stderr, "gateway: stopping\n");
    exit_code = 0;
done:
    lt_gateway_close(g);
    lt_cli_http_free(&http);
    lt_cli_kafka_free(&kafka);
    return exit_code;
}
