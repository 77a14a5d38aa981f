/* looptune optimizer: the online optimizer service. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "looptune/optimizer.h"

static const char *const optimizer_help =
    "usage: looptune optimizer --brokers B [options]\n"
    "\n"
    "Consumes the telemetry topic in a consumer group, places every kernel of the\n"
    "running programs on the host's roofline, and tunes the ones that pay most (time\n"
    "share x distance to the roofline): it asks a run (looptune run --tune online) to\n"
    "alternate a candidate configuration with its incumbent for a few tokens, keeps the\n"
    "candidate when the paired comparison says it is faster (and writes it to the\n"
    "compacted topic looptune.configs), and lets it roll back otherwise. Runs until\n"
    "interrupted (or --duration); a restart resumes from the group's committed offsets\n"
    "and the configs topic. One line per decision on stderr.\n"
    "\n"
    "  -b, --brokers B         Kafka bootstrap servers (required: the embedded broker lives\n"
    "                          inside `looptune run --tune online`)\n";
/* ... then the shared Kafka lines (lt_cli_kafka_help), then: */
static const char *const optimizer_help_end =
    "      --group G           consumer group (default looptune-optimizer)\n"
    "      --strategy S        model (default, XGBoost-guided), random or exhaustive\n"
    "      --explore-share S   share of a run's decode steps that may run candidates\n"
    "                          (default 0.25)\n"
    "      --min-throughput R  keep throughput while tuning >= R x the incumbent's (0.95)\n"
    "      --stop-gain G       stop exploring a kernel when the model predicts no candidate\n"
    "                          better by more than G (default 0.02)\n"
    "      --margin M          keep a candidate only if faster by more than M at 95%\n"
    "                          confidence (default 0.01)\n"
    "      --trial-pairs N     A/B pairs per trial (default 6)\n"
    "      --phase-tokens N    decode steps per phase of a trial (default 4, or more so\n"
    "                          that a phase lasts 20 ms: fewer telemetry windows)\n"
    "      --max-trials N      trials per kernel, shape and host class (default 40)\n"
    "      --seed S            search seed (default 1)\n"
    "      --duration SEC      stop after SEC seconds (default: run until SIGINT/SIGTERM)\n"
    "  -h, --help              this help\n";

int lt_cmd_optimizer(int argc, char **argv) {
    const char *cmd = "optimizer";
    enum { O_GROUP = 256, O_STRAT, O_SHARE, O_TP, O_GAIN, O_MARGIN, O_PAIRS,
           O_PHASE, O_MAXT, O_SEED, O_DUR };
    static const struct option opts[] = {
        LT_CLI_KAFKA_OPTIONS,                     {"group", required_argument, 0, O_GROUP},
        {"strategy", required_argument, 0, O_STRAT}, {"explore-share", required_argument, 0, O_SHARE},
        {"min-throughput", required_argument, 0, O_TP}, {"stop-gain", required_argument, 0, O_GAIN},
        {"margin", required_argument, 0, O_MARGIN}, {"trial-pairs", required_argument, 0, O_PAIRS},
        {"phase-tokens", required_argument, 0, O_PHASE}, {"max-trials", required_argument, 0, O_MAXT},
        {"seed", required_argument, 0, O_SEED},   {"duration", required_argument, 0, O_DUR},
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
    lt_cli_kafka kafka;
    lt_optimizer *o = NULL;
    int exit_code = 1;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    lt_optimizer_opts oo = {.strategy = LT_STRAT_MODEL, .seed = 1};
    int64_t duration = 0, v;
    float f;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":b:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        /* -b is --brokers */
        int k = lt_cli_kafka_option(cmd, c == 'b' ? LT_CLI_O_BROKERS : c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case O_GROUP: oo.group = optarg; break;
        case O_STRAT:
            if (lt_strategy_parse(optarg, &oo.strategy)) FAIL("%s", lt_errmsg());
            break;
        case O_SHARE:
            if (!lt_cli_parse_f32(optarg, 0.01f, 0.5f, &f))
                FAIL("bad --explore-share '%s': expected a share in [0.01, 0.5]", optarg);
            oo.explore_share = f;
            break;
        case O_TP:
            if (!lt_cli_parse_f32(optarg, 0.5f, 0.999f, &f))
                FAIL("bad --min-throughput '%s': expected a ratio in [0.5, 0.999]", optarg);
            oo.min_throughput = f;
            break;
        case O_GAIN:
            if (!lt_cli_parse_f32(optarg, 0.001f, 0.5f, &f))
                FAIL("bad --stop-gain '%s': expected a ratio in [0.001, 0.5]", optarg);
            oo.stop_gain = f;
            break;
        case O_MARGIN:
            if (!lt_cli_parse_f32(optarg, 0.001f, 0.5f, &f))
                FAIL("bad --margin '%s': expected a ratio in [0.001, 0.5]", optarg);
            oo.margin = f;
            break;
        case O_PAIRS:
            if (!lt_cli_parse_i64(optarg, 2, 64, &v)) FAIL("bad --trial-pairs '%s': expected 2..64", optarg);
            oo.trial_pairs = (int)v;
            break;
        case O_PHASE:
            if (!lt_cli_parse_i64(optarg, 1, 4096, &v))
                FAIL("bad --phase-tokens '%s': expected 1..4096", optarg);
            oo.phase_tokens = (int)v;
            break;
        case O_MAXT:
            if (!lt_cli_parse_i64(optarg, 1, 100000, &v))
                FAIL("bad --max-trials '%s': expected 1..100000", optarg);
            oo.max_trials = (int)v;
            break;
        case O_SEED:
            if (!lt_cli_parse_i64(optarg, 0, INT64_MAX, &v)) FAIL("bad --seed '%s'", optarg);
            oo.seed = (uint64_t)v;
            break;
        case O_DUR:
            if (!lt_cli_parse_i64(optarg, 1, 100000000, &duration))
                FAIL("bad --duration '%s': expected seconds >= 1", optarg);
            break;
        case 'h':
            lt_cli_kafka_help(optimizer_help, 26, true, optimizer_help_end);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc) FAIL("unexpected argument '%s' (see looptune optimizer --help)", argv[optind]);
    if (lt_cli_kafka_require(cmd, &kafka,
                             "the embedded broker lives inside "
                             "`looptune run --tune online`"))
        goto done;
    oo.conn = kafka.conn;
    oo.prefix = kafka.topic_prefix;
    lt_cli_catch_stop_signals();
    int rc = lt_optimizer_open(&o, &oo);
    if (rc) FAIL("%s", lt_errmsg());
    uint64_t end = duration ? lt_now_ns() + (uint64_t)duration * 1000000000ull : 0;
    while (!atomic_load(&lt_cli_stop) && (!end || lt_now_ns() < end)) {
        if ((rc = lt_optimizer_poll(o, 200)) < 0) FAIL("%s", lt_errmsg());
    }
    lt_optimizer_stats st;
    lt_optimizer_stats_get(o, &st);
    fprintf(stderr, "optimizer: %lld records (%lld windows, %lld bad), %lld runs; %lld trials: %lld "
                    "kept, %lld rolled back, %lld inconclusive, %lld never ran, %lld measured twice; "
                    "%lld configs written\n",
            (long long)st.records, (long long)st.windows, (long long)st.bad_records,
            (long long)st.runs, (long long)st.trials, (long long)st.kept,
            (long long)st.rolled_back, (long long)st.aborted, (long long)st.timed_out,
            (long long)st.extended, (long long)st.configs_written);
    lt_optimizer_report(o, stdout);
    exit_code = 0;
done:
    lt_optimizer_close(o);
    lt_cli_kafka_free(&kafka);
    return exit_code;
}
