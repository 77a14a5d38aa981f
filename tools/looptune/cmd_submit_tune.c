/* looptune submit tune: `looptune tune` over the workers of a host class.
 * Every config store key of the model is a task; the configurations found
 * go to the config store (a file or the compacted topic), as tune's do. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "looptune/dist.h"

static const char *const tune_help =
    "usage: looptune submit tune -m MODEL --brokers B [options]\n"
    "\n"
    "Searches every kernel's parameters (per distinct shape) of MODEL, the looped\n"
    "executor's and the thread counts, as `looptune tune` does, with each key a task\n"
    "for the workers of one host class (`looptune worker --kinds tune` on hosts of\n"
    "that class: they take the tasks of their class's topic, <prefix>tasks.<class>,\n"
    "and no other worker does). The kernels' keys are searched in parallel, the\n"
    "executor's and the thread counts after them with the kernels' winners in force.\n"
    "Each result is applied once; a failed attempt is sent again, and after\n"
    "--max-attempts the task goes to the tasks.dead topic and the job fails (the\n"
    "configurations found so far are still written). The model must be the same\n"
    "file on the workers (its size and the CRC32C of its first MiB are checked), at\n"
    "the path the task names (--remote-model) or under a worker's --models-dir.\n"
    "Progress on stderr every 2 s; the table and the job's figures on stdout.\n"
    "\n"
    "  -b, --brokers B         Kafka bootstrap servers (required; also of\n"
    "                          --config-store kafka)\n";
static const char *const tune_help_end =
    "  -m, --model FILE        GGUF or llama2.c checkpoint, read here for its keys\n"
    "      --remote-model P    the model as the workers open it (default: MODEL's\n"
    "                          absolute path; a worker with --models-dir looks up P's\n"
    "                          file name there)\n"
    "      --host-class H      the host class to tune for (default this host's,\n"
    "                          as `looptune tune` keys it)\n"
    "      --strategy S        model (XGBoost-guided, default), random or exhaustive\n"
    "      --budget N          configurations tried per kernel and shape (default 24)\n"
    "  -t, --threads T         threads of every search (default 2 or the CPU count,\n"
    "                          whichever is smaller)\n"
    "      --regime R          decode (default), prefill or both\n"
    "      --seed S            strategy seed (default 1)\n"
    "      --config-store SPEC a file (default $XDG_CACHE_HOME/looptune/configs.tsv or\n"
    "                          ~/.cache/looptune/configs.tsv) or kafka: the compacted\n"
    "                          topic <prefix>configs at --brokers\n"
    "      --worker-timeout S  fail when no worker of the class is heard from for S s\n"
    "                          (default 30)\n"
    "      --timeout S         fail the job after S s (default 3600)\n"
    "      --max-attempts N    attempts of a task before its dead letter (default 3)\n"
    "      --partitions N      partitions of the topics it creates (default 6)\n"
    "      --job-id ID         the job's id (default a random one)\n"
    "      --window W          at most W tasks in flight (default all of a stage)\n"
    "      --resume            take up job --job-id where an earlier submit left it: its\n"
    "                          results so far are read back, the other keys sent again;\n"
    "                          the same model, --host-class, --regime and --threads\n"
    "  -h, --help              this help\n";

int lt_cmd_submit_tune(int argc, char **argv) {
    const char *cmd = "submit tune";
    enum { O_REMOTE = 256, O_CLASS, O_STRAT, O_BUDGET, O_REGIME, O_SEED, O_STORE, O_WT,
           O_TIMEOUT, O_ATTEMPTS, O_PARTS, O_JOB, O_WINDOW, O_RESUME };
    static const struct option opts[] = {
        LT_CLI_KAFKA_OPTIONS,
        {"model", required_argument, 0, 'm'},
        {"remote-model", required_argument, 0, O_REMOTE},
        {"host-class", required_argument, 0, O_CLASS},
        {"strategy", required_argument, 0, O_STRAT},
        {"budget", required_argument, 0, O_BUDGET},
        {"threads", required_argument, 0, 't'},
        {"regime", required_argument, 0, O_REGIME},
        {"seed", required_argument, 0, O_SEED},
        {"config-store", required_argument, 0, O_STORE},
        {"worker-timeout", required_argument, 0, O_WT},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"max-attempts", required_argument, 0, O_ATTEMPTS},
        {"partitions", required_argument, 0, O_PARTS},
        {"job-id", required_argument, 0, O_JOB},
        {"window", required_argument, 0, O_WINDOW},
        {"resume", no_argument, 0, O_RESUME},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lt_cli_kafka kafka;
    int exit_code = 1;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    lt_submit_tune_opts to = {.strategy = LT_STRAT_MODEL, .budget = 24, .seed = 1,
                              .job = {.corrupt_task = -1}};
    const char *regime = "decode", *store_spec = NULL;
    int64_t v;
    float f;
    lt_store *store = NULL;
    lt_tune_job job = {0};
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":b:m:t:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int r = lt_cli_kafka_option(cmd, ch == 'b' ? LT_CLI_O_BROKERS : ch, optarg, &kafka);
        if (r == LT_CLI_OPT_ERROR) goto done;
        if (r == LT_CLI_OPT_HANDLED) continue;
        switch (ch) {
        case 'm': to.model = optarg; break;
        case O_REMOTE:
            if (!*optarg) FAIL("bad --remote-model '': expected a path");
            to.remote_model = optarg;
            break;
        case O_CLASS:
            if (!*optarg || strlen(optarg) > 95 || strpbrk(optarg, " \t\n|"))
                FAIL("bad --host-class '%s': expected 1..95 characters without blanks or '|'",
                     optarg);
            to.host_class = optarg;
            break;
        case O_STRAT:
            if (lt_strategy_parse(optarg, &to.strategy)) FAIL("%s", lt_errmsg());
            break;
        case O_BUDGET:
            if (!lt_cli_parse_i64(optarg, 1, 100000, &v))
                FAIL("bad --budget '%s': expected a number of trials >= 1", optarg);
            to.budget = (int)v;
            break;
        case 't':
            if (!lt_cli_parse_i64(optarg, 1, 64, &v))
                FAIL("bad --threads '%s': expected 1..64", optarg);
            to.threads = (int)v;
            break;
        case O_REGIME:
            if (strcmp(optarg, "decode") && strcmp(optarg, "prefill") && strcmp(optarg, "both"))
                FAIL("bad --regime '%s': expected decode, prefill or both", optarg);
            regime = optarg;
            break;
        case O_SEED:
            if (!lt_cli_parse_i64(optarg, 0, INT64_MAX, &v))
                FAIL("bad --seed '%s': expected a number >= 0", optarg);
            to.seed = (uint64_t)v;
            break;
        case O_STORE: store_spec = optarg; break;
        case O_WT:
        case O_TIMEOUT:
            if (!lt_cli_parse_f32(optarg, 0.1f, 1e7f, &f))
                FAIL("bad --%s '%s': expected seconds > 0",
                     ch == O_WT ? "worker-timeout" : "timeout", optarg);
            if (ch == O_WT) to.job.worker_timeout_s = f;
            else to.job.job_timeout_s = f;
            break;
        case O_ATTEMPTS:
            if (!lt_cli_parse_i64(optarg, 1, 100, &v))
                FAIL("bad --max-attempts '%s': expected 1..100", optarg);
            to.job.max_attempts = (uint32_t)v;
            break;
        case O_PARTS:
            if (!lt_cli_parse_i64(optarg, 1, 10000, &v))
                FAIL("bad --partitions '%s': expected 1..10000", optarg);
            to.job.partitions = (int32_t)v;
            break;
        case O_JOB:
            if (!*optarg || strlen(optarg) > 32)
                FAIL("bad --job-id '%s': expected 1..32 characters", optarg);
            to.job.job_id = optarg;
            break;
        case O_WINDOW:
            if (!lt_cli_parse_i64(optarg, 1, INT64_MAX, &v))
                FAIL("bad --window '%s': expected tasks >= 1", optarg);
            to.job.window = v;
            break;
        case O_RESUME: to.job.resume = true; break;
        case 'h':
            lt_cli_kafka_help(tune_help, 26, true, tune_help_end);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, ch, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc)
        FAIL("unexpected argument '%s' (see looptune submit tune --help)", argv[optind]);
    if (!to.model) FAIL("no model: give -m MODEL (see looptune submit tune --help)");
    if (to.job.resume && !to.job.job_id) FAIL("--resume needs --job-id ID: the job to take up");
    if (lt_cli_kafka_require(cmd, &kafka, "the workers must reach it too")) goto done;
    to.decode = strcmp(regime, "prefill") != 0;
    to.prefill = strcmp(regime, "decode") != 0;
    if (!to.threads) to.threads = lt_cpu()->logical_cpus < 2 ? 1 : 2;
    uint64_t model_bytes;
    uint32_t model_crc;
    if (lt_dist_model_id(to.model, &model_bytes, &model_crc)) FAIL("%s", lt_errmsg());
    /* the store first: a bad --config-store fails before the job runs */
    char defpath[1024];
    if (!store_spec) {
        if (!lt_store_default_path(defpath, sizeof defpath))
            FAIL("no config store: set HOME or XDG_CACHE_HOME, or give --config-store FILE");
        store_spec = defpath;
    }
    lt_store_backend be;
    if (lt_cli_store_backend(cmd, store_spec, &kafka, &be)) goto done;
    int rc = lt_store_open(&store, &be, NULL);
    if (rc) {
        lt_cli_fail_status(cmd, rc, "cannot open the config store");
        goto done;
    }
    to.job.conn = kafka.conn;
    to.job.prefix = kafka.topic_prefix;
    lt_submit_stats st;
    rc = lt_submit_tune(&to, &job, &st);
    char err[1024];
    snprintf(err, sizeof err, "%s", rc ? lt_errmsg() : "");

    int n_done = 0;
    for (size_t i = 0; i < job.n_keys; i++) n_done += job.keys[i].done;
    if (n_done) {
        printf("%-8s %-36s %12s %12s %8s %6s  %-16s %s\n", "kernel", "shape", "default us",
               "tuned us", "speedup", "trials", "worker", "best params");
        for (size_t i = 0; i < job.n_keys; i++) {
            const lt_tune_job_key *k = &job.keys[i];
            if (!k->done) continue;
            const lt_config_entry *e = &k->entry;
            printf("%-8s %-36s %12.2f %12.2f %7.3fx %6lld  %-16s %s\n", e->kernel, e->shape,
                   e->median_ns * e->speedup / 1e3, e->median_ns / 1e3, e->speedup,
                   (long long)e->trials, k->worker, e->params);
        }
    }
    if (job.n_keys)
        printf("job %s: %lld keys, %lld configurations, %lld duplicates dropped, %lld retries, "
               "%lld failed results, %lld dead, %lld records rejected, %lld workers seen, "
               "%.2f s, %lld resumed\n", st.job_id, (long long)st.tasks, (long long)st.applied,
               (long long)st.duplicates, (long long)st.retries, (long long)st.failed_results,
               (long long)st.dead, (long long)st.rejected, (long long)st.workers_seen,
               st.seconds, (long long)st.resumed);
    fflush(stdout);
    for (size_t i = 0; i < job.n_keys; i++) {
        if (!job.keys[i].done) continue;
        int prc = lt_store_put(store, &job.keys[i].entry);
        if (prc) {
            lt_cli_fail_status(cmd, prc, "bad result");
            goto done;
        }
    }
    if (n_done) {
        int src = lt_store_save(store);
        if (src) {
            lt_cli_fail_status(cmd, src, "cannot write the config store");
            goto done;
        }
        fprintf(stderr, "tune: %d configurations for host %s written to %s%s\n", n_done,
                job.host_class, lt_store_name(store), rc ? " (the job failed)" : "");
    }
    if (rc) FAIL("%s", err);
    exit_code = 0;
done:
    lt_tune_job_free(&job);
    lt_store_close(store);
    lt_cli_kafka_free(&kafka);
    return exit_code;
}
