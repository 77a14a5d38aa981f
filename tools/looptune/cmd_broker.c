/* looptune broker: the embedded development Kafka broker, standalone, for
 * other processes: prints its bootstrap address and serves until SIGINT or
 * SIGTERM. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#include "cli.h"
#include "looptune/kafka.h"

static const char *const broker_help =
    "usage: looptune broker [--port P] [--brokers-count N]\n"
    "\n"
    "Runs the embedded development Kafka broker (librdkafka's mock cluster: the real\n"
    "Kafka protocol on 127.0.0.1) until Ctrl-C or SIGTERM. Prints its bootstrap address\n"
    "on stdout, one line, for --brokers of other looptune processes.\n"
    "In memory and not durable; about 5 MiB per partition (older records are dropped);\n"
    "no log compaction, no transactions, topics created on first use. For development;\n"
    "use a real Kafka cluster for anything that must last.\n"
    "\n"
    "      --port P             bootstrap at 127.0.0.1:P (default: the ports the system picks)\n"
    "      --brokers-count N    brokers in the cluster, 1..16 (default 1)\n"
    "  -h, --help               this help\n";

int lt_cmd_broker(int argc, char **argv) {
    const char *cmd = "broker";
    int64_t port = 0, count = 1;
    enum { O_PORT = 256, O_COUNT };
    static const struct option opts[] = {{"port", required_argument, 0, O_PORT},
                                         {"brokers-count", required_argument, 0, O_COUNT},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case O_PORT:
            if (!lt_cli_parse_i64(optarg, 1, 65535, &port))
                return lt_cli_fail(cmd, "bad --port '%s': expected 1..65535", optarg);
            break;
        case O_COUNT:
            if (!lt_cli_parse_i64(optarg, 1, 16, &count))
                return lt_cli_fail(cmd, "bad --brokers-count '%s': expected 1..16", optarg);
            break;
        case 'h': fputs(broker_help, stdout); return 0;
        default: return lt_cli_bad_option(cmd, c, argv[optind - 1]);
        }
    }
    if (optind < argc) return lt_cli_fail(cmd, "unexpected argument '%s'", argv[optind]);

    /* Block the stop signals before any thread starts (threads inherit the
     * mask), then wait for one here. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    lt_devbroker *b;
    int rc = lt_devbroker_open(&b, (int)count, (int)port);
    if (rc) return lt_cli_fail_status(cmd, rc, "cannot start");
    printf("%s\n", lt_devbroker_bootstrap(b));
    fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "looptune broker: %s: stopping; its records are gone\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    lt_devbroker_close(b);
    return 0;
}
