/* looptune worker: a distributed worker in the consumer group of the tasks
 * topic; results go out exactly once (transactions) unless --at-least-once.
 * With the tune kind it (also) takes the tune tasks of its host class from
 * that class's topic, in a group of that class (a second loop, on a thread
 * of its own when it runs other kinds too). */
#define _GNU_SOURCE /* gethostname */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "looptune/dist.h"

static const char *const worker_help =
    "usage: looptune worker --brokers B [options]\n"
    "\n"
    "Joins the workers' consumer group on the tasks topic (cooperative-sticky\n"
    "assignment) and runs the tasks it is given with looptune's kernels. The tasks\n"
    "it has fetched already (a batch, --batch) run one after the other, and their\n"
    "results and the consumed offsets are committed in one Kafka transaction, so a\n"
    "killed worker loses nothing and a coordinator applies every result once. A\n"
    "heartbeat a second on the results topic says the worker is alive. SIGINT or\n"
    "SIGTERM finishes the batch in hand, then leaves the group (a static member,\n"
    "--instance-id, keeps its partitions for the session timeout). Topics that\n"
    "are missing are created.\n"
    "\n"
    "  -b, --brokers B         Kafka bootstrap servers (required)\n";
static const char *const worker_help_end =
    "      --group G           consumer group (default: the prefix + workers,\n"
    "                          looptune.workers)\n"
    "      --instance-id ID    static group membership and a stable transactional id:\n"
    "                          a restarted worker of the same ID takes its partitions\n"
    "                          back at once and aborts what its predecessor left open\n"
    "      --threads T         threads per task (default 1)\n"
    "      --kinds K,...       task kinds to run (default matmul,noop); tune takes the\n"
    "                          tune tasks of this host's class from <prefix>tasks.<class>\n"
    "                          in group <group>.<class> (its results id: ID/tune when\n"
    "                          it runs beside other kinds)\n"
    "      --models-dir DIR    tune: a task's model is DIR/<its file name> (default: at\n"
    "                          the path the task names)\n"
    "      --host-class H      tune, tests: serve host class H instead of this host's\n"
    "      --at-least-once     no transactions: produce, flush, then commit the offsets\n"
    "                          (a crash in between repeats tasks; for comparison)\n"
    "      --batch N           tasks per commit at most (default 1024; 1: a commit per\n"
    "                          task); a batch never waits for tasks not fetched yet\n"
    "      --batch-ms MS       a batch commits once open this long (default 20)\n"
    "      --partitions N      partitions of the topics it creates (default 6)\n"
    "      --session-timeout-ms MS  group session timeout (default 6000)\n"
    "      --task-delay-ms MS  sleep before each task (demonstrations and tests)\n"
    "      --panel-cache-mb MB  bound of the cache of panels (operands later tasks of a\n"
    "                          job reference by id; least recently used out first;\n"
    "                          default 1024; a task whose panel it lacks asks for it)\n"
    "      --test-commit-delay-ms MS  tests: sleep between producing a batch's results\n"
    "                          and committing it (a kill then falls inside the batch)\n"
    "  -h, --help              this help\n";

#define MAX_KINDS 8

typedef struct {
    const lt_worker_opts *o;
    lt_worker_stats st;
    int rc;
    char err[512];
} loop_run;

static void *tune_loop(void *arg) {
    loop_run *r = arg;
    r->rc = lt_worker_run(r->o, &r->st);
    if (r->rc) snprintf(r->err, sizeof r->err, "%s", lt_errmsg());
    atomic_store(&lt_cli_stop, true); /* the other loop leaves too */
    return NULL;
}

static void print_stats(const char *which, const lt_worker_stats *st) {
    fprintf(stderr, "worker%s: %lld tasks done (%lld failed), %lld dropped (partition moved), "
            "%lld expired, %lld records rejected; %lld commits, %lld transactions aborted, %lld "
            "producer restarts; %lld panels asked for again\n", which,
            (long long)st->tasks_done, (long long)st->tasks_failed, (long long)st->tasks_dropped,
            (long long)st->tasks_expired, (long long)st->rejected, (long long)st->stage.committed,
            (long long)st->stage.aborted, (long long)st->stage.producer_restarts,
            (long long)st->panels_missed);
}

int lt_cmd_worker(int argc, char **argv) {
    const char *cmd = "worker";
    enum { O_GROUP = 256, O_INSTANCE, O_THREADS, O_KINDS, O_ALO, O_PARTS, O_SESSION, O_DELAY,
           O_PANELS, O_BATCH, O_BATCH_MS, O_COMMIT_DELAY, O_MODELS, O_CLASS };
    static const struct option opts[] = {
        LT_CLI_KAFKA_OPTIONS,
        {"group", required_argument, 0, O_GROUP},
        {"instance-id", required_argument, 0, O_INSTANCE},
        {"threads", required_argument, 0, O_THREADS},
        {"kinds", required_argument, 0, O_KINDS},
        {"at-least-once", no_argument, 0, O_ALO},
        {"partitions", required_argument, 0, O_PARTS},
        {"session-timeout-ms", required_argument, 0, O_SESSION},
        {"task-delay-ms", required_argument, 0, O_DELAY},
        {"panel-cache-mb", required_argument, 0, O_PANELS},
        {"batch", required_argument, 0, O_BATCH},
        {"batch-ms", required_argument, 0, O_BATCH_MS},
        {"test-commit-delay-ms", required_argument, 0, O_COMMIT_DELAY},
        {"models-dir", required_argument, 0, O_MODELS},
        {"host-class", required_argument, 0, O_CLASS},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lt_cli_kafka kafka;
    int exit_code = 1;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    lt_worker_opts wo = {.threads = 1};
    char kinds_buf[256];
    const char *kinds[MAX_KINDS];
    const char *models_dir = NULL, *host_class = NULL;
    int64_t v;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":b:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int k = lt_cli_kafka_option(cmd, c == 'b' ? LT_CLI_O_BROKERS : c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case O_GROUP:
            if (!*optarg) FAIL("bad --group '': expected a group id");
            wo.group = optarg;
            break;
        case O_INSTANCE:
            if (!*optarg || strlen(optarg) > 100)
                FAIL("bad --instance-id '%s': expected 1..100 characters", optarg);
            wo.instance_id = optarg;
            break;
        case O_THREADS:
            if (!lt_cli_parse_i64(optarg, 1, 256, &v))
                FAIL("bad --threads '%s': expected 1..256", optarg);
            wo.threads = (int)v;
            break;
        case O_KINDS: {
            if (strlen(optarg) >= sizeof kinds_buf) FAIL("bad --kinds: too long");
            snprintf(kinds_buf, sizeof kinds_buf, "%s", optarg);
            wo.n_kinds = 0;
            for (char *save = NULL, *t = strtok_r(kinds_buf, ",", &save); t;
                 t = strtok_r(NULL, ",", &save)) {
                if (!lt_dist_kind_find(t))
                    FAIL("bad --kinds: unknown task kind '%s' (known: matmul, noop, tune, hpo)",
                         t);
                if (wo.n_kinds == MAX_KINDS) FAIL("bad --kinds: at most %d", MAX_KINDS);
                kinds[wo.n_kinds++] = t;
            }
            if (!wo.n_kinds) FAIL("bad --kinds '%s': expected kinds separated by commas", optarg);
            wo.kinds = kinds;
            break;
        }
        case O_ALO: wo.at_least_once = true; break;
        case O_PARTS:
            if (!lt_cli_parse_i64(optarg, 1, 10000, &v))
                FAIL("bad --partitions '%s': expected 1..10000", optarg);
            wo.partitions = (int32_t)v;
            break;
        case O_SESSION:
            if (!lt_cli_parse_i64(optarg, 1000, 3600000, &v))
                FAIL("bad --session-timeout-ms '%s': expected 1000..3600000", optarg);
            wo.session_timeout_ms = (int)v;
            break;
        case O_MODELS:
            if (!*optarg) FAIL("bad --models-dir '': expected a folder");
            models_dir = optarg;
            break;
        case O_CLASS:
            if (!*optarg || strlen(optarg) > 95 || strpbrk(optarg, " \t\n|"))
                FAIL("bad --host-class '%s': expected 1..95 characters without blanks or '|'",
                     optarg);
            host_class = optarg;
            break;
        case O_DELAY:
            if (!lt_cli_parse_i64(optarg, 0, 600000, &v))
                FAIL("bad --task-delay-ms '%s': expected 0..600000", optarg);
            wo.task_delay_ms = (int)v;
            break;
        case O_PANELS:
            if (!lt_cli_parse_i64(optarg, 1, 1 << 24, &v))
                FAIL("bad --panel-cache-mb '%s': expected 1..16777216", optarg);
            wo.panel_cache_bytes = (size_t)v << 20;
            break;
        case O_BATCH:
            if (!lt_cli_parse_i64(optarg, 1, 100000, &v))
                FAIL("bad --batch '%s': expected tasks 1..100000", optarg);
            wo.batch_max = (int)v;
            break;
        case O_BATCH_MS:
            if (!lt_cli_parse_i64(optarg, 1, 600000, &v))
                FAIL("bad --batch-ms '%s': expected 1..600000", optarg);
            wo.batch_ms = (int)v;
            break;
        case O_COMMIT_DELAY:
            if (!lt_cli_parse_i64(optarg, 0, 600000, &v))
                FAIL("bad --test-commit-delay-ms '%s': expected 0..600000", optarg);
            wo.test_commit_delay_ms = (int)v;
            break;
        case 'h':
            lt_cli_kafka_help(worker_help, 26, true, worker_help_end);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc) FAIL("unexpected argument '%s' (see looptune worker --help)", argv[optind]);
    if (lt_cli_kafka_require(cmd, &kafka,
                             "workers and `looptune submit` meet on a Kafka cluster; "
                             "`looptune broker` runs a development one"))
        goto done;
    wo.conn = kafka.conn;
    wo.prefix = kafka.topic_prefix;
    wo.stop = &lt_cli_stop;
    lt_cli_catch_stop_signals();
    /* the kinds of the common tasks topic, and whether tune tasks are taken */
    const char *common[MAX_KINDS];
    size_t n_common = 0;
    bool tune = false;
    if (wo.n_kinds) {
        for (size_t i = 0; i < wo.n_kinds; i++) {
            if (!strcmp(kinds[i], "tune")) tune = true;
            else common[n_common++] = kinds[i];
        }
    } else { /* by default every kind but tune, which is asked for */
        for (size_t i = 0; lt_dist_kind_at(i); i++) {
            const char *name = lt_dist_kind_at(i)->name;
            if (strcmp(name, "tune") && n_common < MAX_KINDS) common[n_common++] = name;
        }
    }
    if ((models_dir || host_class) && !tune)
        FAIL("--models-dir and --host-class are for tune tasks: give --kinds tune");
    wo.kinds = common;
    wo.n_kinds = n_common;
    lt_worker_opts tw = wo;
    static const char *const tune_kinds[] = {"tune"};
    char tune_topic[256], tune_group[320], tune_id[160];
    if (tune) {
        lt_host me;
        lt_host_detect(&me);
        const char *cls = host_class ? host_class : me.host_class;
        char base_group[256];
        snprintf(base_group, sizeof base_group, "%s", wo.group ? wo.group : "");
        if (!base_group[0]) snprintf(base_group, sizeof base_group, "%sworkers",
                                     lt_cli_kafka_prefix(&kafka));
        if (lt_dist_tune_setup(models_dir, host_class) ||
            lt_dist_tune_topic(wo.prefix, cls, tune_topic, sizeof tune_topic) ||
            lt_dist_tune_group(base_group, cls, tune_group, sizeof tune_group))
            FAIL("%s", lt_errmsg());
        /* every topic before either loop starts (both would create the common ones) */
        if (lt_dist_ensure_topics(&wo.conn, wo.prefix, wo.partitions) ||
            lt_dist_ensure_tune_topic(&wo.conn, wo.prefix, cls, wo.partitions))
            FAIL("%s", lt_errmsg());
        tw.kinds = tune_kinds;
        tw.n_kinds = 1;
        tw.tasks_topic = tune_topic;
        tw.group = tune_group;
        if (n_common) { /* beside the common loop: an id and a transactional id of its own */
            char host[64] = "host";
            gethostname(host, sizeof host - 1);
            if (wo.instance_id) snprintf(tune_id, sizeof tune_id, "%s/tune", wo.instance_id);
            else snprintf(tune_id, sizeof tune_id, "%s:%d/tune", host, (int)getpid());
            tw.worker_id = tune_id;
        }
        lt_log(LT_LOG_INFO, "worker: tune tasks of host class %s from %s%s%s", cls, tune_topic,
               models_dir ? ", models in " : "", models_dir ? models_dir : "");
    }
    lt_worker_stats st;
    int rc;
    if (tune && n_common) {
        loop_run tr = {.o = &tw};
        pthread_t th;
        if (pthread_create(&th, NULL, tune_loop, &tr)) FAIL("cannot start the tune loop");
        rc = lt_worker_run(&wo, &st);
        char err[512];
        snprintf(err, sizeof err, "%s", rc ? lt_errmsg() : "");
        atomic_store(&lt_cli_stop, true);
        pthread_join(th, NULL);
        print_stats("", &st);
        print_stats(" (tune)", &tr.st);
        lt_dist_tune_release();
        if (rc) FAIL("%s", err);
        if (tr.rc) FAIL("tune: %s", tr.err);
    } else {
        rc = lt_worker_run(tune ? &tw : &wo, &st);
        print_stats("", &st);
        lt_dist_tune_release();
        if (rc) FAIL("%s", lt_errmsg());
    }
    exit_code = 0;
done:
    lt_cli_kafka_free(&kafka);
    return exit_code;
}
