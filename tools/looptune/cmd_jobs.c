/* looptune jobs: the distributed jobs and the live workers, as the tasks,
 * results and tasks.dead topics tell them. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "looptune/dist.h"

static const char *const jobs_help =
    "usage: looptune jobs --brokers B [options]\n"
    "\n"
    "Reads the tasks, results and tasks.dead topics once (no consumer group) and\n"
    "prints one line per job: its kind, state (done, failed: a task was dead-\n"
    "lettered, running: a record in the last minute, stalled), tasks, tasks done,\n"
    "OK results beyond one per task, FAILED results, dead letters, the highest\n"
    "attempt sent and the time of its last record; then the workers heard from.\n"
    "\n"
    "  -b, --brokers B         Kafka bootstrap servers (required)\n";
static const char *const jobs_help_end =
    "      --job ID            this job only\n"
    "      --alive-s S         workers heard from within S s are listed (default 5)\n"
    "  -h, --help              this help\n";

int lt_cmd_jobs(int argc, char **argv) {
    const char *cmd = "jobs";
    enum { O_JOB = 256, O_ALIVE };
    static const struct option opts[] = {
        LT_CLI_KAFKA_OPTIONS,
        {"job", required_argument, 0, O_JOB},
        {"alive-s", required_argument, 0, O_ALIVE},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lt_cli_kafka kafka;
    int exit_code = 1;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    const char *job = NULL;
    float alive = 5;
    lt_dist_jobs js = {0};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":b:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int k = lt_cli_kafka_option(cmd, c == 'b' ? LT_CLI_O_BROKERS : c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case O_JOB: job = optarg; break;
        case O_ALIVE:
            if (!lt_cli_parse_f32(optarg, 0.1f, 1e6f, &alive))
                FAIL("bad --alive-s '%s': expected seconds > 0", optarg);
            break;
        case 'h':
            lt_cli_kafka_help(jobs_help, 26, true, jobs_help_end);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc) FAIL("unexpected argument '%s' (see looptune jobs --help)", argv[optind]);
    if (lt_cli_kafka_require(cmd, &kafka, NULL)) goto done;
    if (lt_dist_jobs_scan(&kafka.conn, kafka.topic_prefix, job, alive, &js))
        FAIL("%s", lt_errmsg());
    if (job && !js.n_jobs) FAIL("no job '%s' on the topics", job);
    printf("%-24s %-7s %-8s %7s %7s %6s %7s %5s %8s  %s\n", "JOB", "KIND", "STATE", "TASKS",
           "DONE", "EXTRA", "FAILED", "DEAD", "ATTEMPTS", "LAST (UTC)");
    for (size_t i = 0; i < js.n_jobs; i++) {
        const lt_dist_job_info *j = &js.jobs[i];
        char when[32] = "-";
        time_t t = (time_t)(j->last_ns / 1000000000ull);
        struct tm tm;
        if (j->last_ns && gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        printf("%-24s %-7s %-8s %7lld %7lld %6lld %7lld %5lld %8u  %s\n", j->job_id,
               j->kind[0] ? j->kind : "?", j->state, (long long)j->tasks, (long long)j->done,
               (long long)(j->ok_results - j->done), (long long)j->failed, (long long)j->dead,
               j->max_attempt, when);
    }
    printf("workers alive: %zu\n", js.n_workers);
    for (size_t i = 0; i < js.n_workers; i++) {
        const lt_dist_worker_info *w = &js.workers[i];
        printf("  %-32s %-6s %6llu tasks done", w->worker, w->state,
               (unsigned long long)w->tasks_done);
        if (w->job_id[0]) printf("  on %s/%llu", w->job_id, (unsigned long long)w->task_index);
        printf("\n");
    }
    if (js.partial)
        fprintf(stderr, "looptune jobs: some records are held back by open transactions "
                        "(their writers died or are busy): counts may lag\n");
    exit_code = 0;
done:
    lt_dist_jobs_free(&js);
    lt_cli_kafka_free(&kafka);
    return exit_code;
}
