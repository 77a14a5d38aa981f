/* looptune submit: distributed jobs. `submit matmul` multiplies two .npy
 * matrices (or random ones of a seed) over the workers and writes C.npy. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "looptune/dist.h"

static const char *const submit_help =
    "usage: looptune submit matmul (--a A.npy --b B.npy | --m M --n N --k K [--seed S])\n"
    "                              --out C.npy --brokers B [options]\n"
    "       looptune submit tune -m MODEL --brokers B [options]   (looptune tune over the\n"
    "                              workers of a host class: see looptune submit tune --help)\n"
    "\n"
    "Computes C = A B on the workers of the cluster (looptune worker): each output\n"
    "tile of --block rows x columns is a task carrying A's row panel and B's column\n"
    "panel (chunked below Kafka's record limit, CRC32C per chunk). Results are read\n"
    "read_committed and applied once per task; a failed attempt is sent again, and\n"
    "after --max-attempts the task goes to the tasks.dead topic and the job fails.\n"
    "Panel reuse (the default): a tile row's tasks go to one partition of the tasks\n"
    "topic, its A panel travels with the first and the others reference it by id in\n"
    "the worker's panel cache (a worker without it asks for it again: the task is\n"
    "sent again with it, not counted as a failure); so do B's panels within a\n"
    "partition when B fits the workers' caches. A progress line every 2 s on\n"
    "stderr; the job's figures on stdout, with the bytes over Kafka against the\n"
    "plain tile scheme's (4 K (M tiles_n + N tiles_m): 8 n^2 t for n x n in t x t\n"
    "tiles). Arrays are numpy .npy files of little-endian float32 in C order.\n"
    "\n"
    "  -b, --brokers B         Kafka bootstrap servers (required)\n";
static const char *const submit_help_end =
    "      --a A.npy, --b B.npy  the operands: A is M x K, B is K x N\n"
    "      --m M --n N --k K   random operands instead (uniform in [-1, 1))\n"
    "      --seed S            their seed (default 1)\n"
    "  -o, --out C.npy         where C goes (required)\n"
    "      --block MxN[xK]     output tile of a task (default 128x128); with K, each\n"
    "                          tile is ceil(K_total / K) tasks over ranges of k, whose\n"
    "                          partial tiles are added here in split order (so C is the\n"
    "                          same whatever order they come in)\n"
    "      --dtype T           the operands travel as f32 (default), f16, bf16 (half the\n"
    "                          bytes) or q8_0 (34 bytes per 32 values; K and the split\n"
    "                          multiples of 32); workers compute from them as they came\n"
    "      --no-panel-reuse    the plain tile scheme: every task carries its panels of A\n"
    "                          and B (for comparison; workers before panels need it)\n"
    "      --panel-by rows|cols  panel reuse keyed by tile rows (A's row panel travels\n"
    "                          once a row) or columns (B's once a column); default the\n"
    "                          one that moves fewer bytes\n"
    "      --verify            also compute C on this node and print the largest\n"
    "                          difference (the same conversion, splits and kernel: 0\n"
    "                          expected), and with --dtype or a k-split the difference\n"
    "                          from the f32 product in one k pass\n"
    "      --threads T         threads of --verify's product (default 1)\n"
    "      --worker-timeout S  fail when no worker is heard from for S s (default 30)\n"
    "      --timeout S         fail the job after S s (default 3600)\n"
    "      --max-attempts N    attempts of a task before its dead letter (default 3)\n"
    "      --chunk-kb KB       chunk size (default 512; 1..900)\n"
    "      --partitions N      partitions of the topics it creates (default 6)\n"
    "      --job-id ID         the job's id (default a random one)\n"
    "      --window W          at most W tasks in flight (default all at once)\n"
    "      --resume            take up job --job-id where an earlier submit left it (it\n"
    "                          died): its results so far are read back and applied, the\n"
    "                          other tasks sent again; the same operands, --block and\n"
    "                          --dtype\n"
    "      --test-corrupt T[:N]  tests: corrupt a byte of task T's input in its first N\n"
    "                          sends (default all: a poison task)\n"
    "  -h, --help              this help\n";

/* Uniform in [-1, 1) from splitmix64: the same matrices for a seed everywhere. */
static void random_fill(float *x, int64_t n, uint64_t *state) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        x[i] = (float)((double)(z >> 40) / 16777216.0 * 2.0 - 1.0);
    }
}

/* ROWSxCOLS or ROWSxCOLSxK (*bk 0 without the third) */
static bool parse_block(const char *s, int64_t *bm, int64_t *bn, int64_t *bk) {
    int64_t v[3] = {0, 0, 0};
    int n = 0;
    for (const char *p = s; n < 3; n++) {
        const char *x = strchr(p, 'x');
        char part[32];
        size_t l = x ? (size_t)(x - p) : strlen(p);
        if (!l || l >= sizeof part) return false;
        memcpy(part, p, l);
        part[l] = 0;
        if (!lt_cli_parse_i64(part, 1, 1 << 20, &v[n])) return false;
        if (!x) break;
        p = x + 1;
    }
    if (n < 1 || n > 2) return false; /* two or three numbers */
    *bm = v[0];
    *bn = v[1];
    *bk = v[2];
    return true;
}

/* The options of every job kind (--worker-timeout, --timeout, --max-attempts,
 * --chunk-kb, --partitions, --job-id, --window, --test-corrupt) into so:
 * LT_CLI_OPT_HANDLED, LT_CLI_OPT_ERROR after a one-line error, or
 * LT_CLI_OPT_NOT_MINE. */
enum { O_WT = 0x5300, O_TIMEOUT, O_ATTEMPTS, O_CHUNK, O_PARTS, O_JOB, O_CORRUPT, O_WINDOW };
#define JOB_OPTIONS                                                            \
    {"worker-timeout", required_argument, 0, O_WT},                            \
    {"timeout", required_argument, 0, O_TIMEOUT},                              \
    {"max-attempts", required_argument, 0, O_ATTEMPTS},                        \
    {"chunk-kb", required_argument, 0, O_CHUNK},                               \
    {"partitions", required_argument, 0, O_PARTS},                             \
    {"job-id", required_argument, 0, O_JOB},                                   \
    {"window", required_argument, 0, O_WINDOW},                                \
    {"test-corrupt", required_argument, 0, O_CORRUPT}

static int job_option(const char *cmd, int c, const char *arg, lt_submit_opts *so) {
    int64_t v;
    float f;
    switch (c) {
    case O_WT:
    case O_TIMEOUT:
        if (!lt_cli_parse_f32(arg, 0.1f, 1e7f, &f))
            return lt_cli_fail(cmd, "bad --%s '%s': expected seconds > 0",
                               c == O_WT ? "worker-timeout" : "timeout", arg);
        if (c == O_WT) so->worker_timeout_s = f;
        else so->job_timeout_s = f;
        return LT_CLI_OPT_HANDLED;
    case O_ATTEMPTS:
        if (!lt_cli_parse_i64(arg, 1, 100, &v))
            return lt_cli_fail(cmd, "bad --max-attempts '%s': expected 1..100", arg);
        so->max_attempts = (uint32_t)v;
        return LT_CLI_OPT_HANDLED;
    case O_CHUNK:
        if (!lt_cli_parse_i64(arg, 1, LT_DIST_CHUNK_MAX / 1024, &v))
            return lt_cli_fail(cmd, "bad --chunk-kb '%s': expected 1..%d", arg,
                               LT_DIST_CHUNK_MAX / 1024);
        so->chunk_bytes = (size_t)v * 1024;
        return LT_CLI_OPT_HANDLED;
    case O_PARTS:
        if (!lt_cli_parse_i64(arg, 1, 10000, &v))
            return lt_cli_fail(cmd, "bad --partitions '%s': expected 1..10000", arg);
        so->partitions = (int32_t)v;
        return LT_CLI_OPT_HANDLED;
    case O_JOB:
        if (!*arg || strlen(arg) > 32)
            return lt_cli_fail(cmd, "bad --job-id '%s': expected 1..32 characters", arg);
        so->job_id = arg;
        return LT_CLI_OPT_HANDLED;
    case O_CORRUPT: {
        char t[32];
        const char *colon = strchr(arg, ':');
        size_t l = colon ? (size_t)(colon - arg) : strlen(arg);
        int64_t n_att = 1000;
        if (l >= sizeof t)
            return lt_cli_fail(cmd, "bad --test-corrupt '%s': expected TASK[:SENDS]", arg);
        memcpy(t, arg, l);
        t[l] = 0;
        if (!lt_cli_parse_i64(t, 0, INT64_MAX, &so->corrupt_task) ||
            (colon && !lt_cli_parse_i64(colon + 1, 1, 1000, &n_att)))
            return lt_cli_fail(cmd, "bad --test-corrupt '%s': expected TASK[:SENDS]", arg);
        so->corrupt_attempts = (uint32_t)n_att;
        return LT_CLI_OPT_HANDLED;
    }
    case O_WINDOW:
        if (!lt_cli_parse_i64(arg, 1, INT64_MAX, &v))
            return lt_cli_fail(cmd, "bad --window '%s': expected tasks >= 1", arg);
        so->window = v;
        return LT_CLI_OPT_HANDLED;
    default: return LT_CLI_OPT_NOT_MINE;
    }
}

/* The job's figures on stdout: one line, then the round trip. */
static void print_job(const lt_submit_stats *st) {
    printf("job %s: %lld tasks, %lld applied, %lld duplicates dropped, %lld retries, %lld failed "
           "results, %lld dead, %lld chunks sent, %lld records rejected, %lld workers seen, "
           "%.2f s, %lld resumed\n", st->job_id, (long long)st->tasks, (long long)st->applied,
           (long long)st->duplicates, (long long)st->retries, (long long)st->failed_results,
           (long long)st->dead, (long long)st->chunks_sent, (long long)st->rejected,
           (long long)st->workers_seen, st->seconds, (long long)st->resumed);
    if (st->applied > st->resumed)
        printf("round trip: median %.2f ms, p99 %.2f ms; %.1f tasks/s\n", st->rt_median_ms,
               st->rt_p99_ms, st->seconds > 0 ? (double)(st->applied - st->resumed) / st->seconds
                                                : 0.0);
    if (st->panel_by[0])
        printf("panels: by %s, %lld sent, %lld referenced, %lld NEED_PANEL answers, %lld tasks "
               "sent again with their panels\n", st->panel_by, (long long)st->panels_sent,
               (long long)st->panel_refs, (long long)st->need_panel,
               (long long)st->panel_resends);
    if (st->bytes_plain > 0)
        printf("bytes over Kafka: %.1f MB sent (plain tile scheme %.1f MB: %.2fx), %.1f MB "
               "received (%lld, %lld, %lld bytes)\n", (double)st->bytes_sent * 1e-6,
               (double)st->bytes_plain * 1e-6, (double)st->bytes_sent / (double)st->bytes_plain,
               (double)st->bytes_received * 1e-6, (long long)st->bytes_sent,
               (long long)st->bytes_plain, (long long)st->bytes_received);
    else
        printf("bytes over Kafka: %.1f MB sent, %.1f MB received (%lld, %lld bytes)\n",
               (double)st->bytes_sent * 1e-6, (double)st->bytes_received * 1e-6,
               (long long)st->bytes_sent, (long long)st->bytes_received);
    fflush(stdout);
}

static int submit_matmul(int argc, char **argv) {
    const char *cmd = "submit matmul";
    enum { O_A = 256, O_B, O_M, O_N, O_K, O_SEED, O_BLOCK, O_VERIFY, O_THREADS, O_RESUME,
           O_DTYPE, O_NO_REUSE, O_PANEL_BY };
    static const struct option opts[] = {
        LT_CLI_KAFKA_OPTIONS,
        {"a", required_argument, 0, O_A},
        {"b", required_argument, 0, O_B},
        {"m", required_argument, 0, O_M},
        {"n", required_argument, 0, O_N},
        {"k", required_argument, 0, O_K},
        {"seed", required_argument, 0, O_SEED},
        {"out", required_argument, 0, 'o'},
        {"block", required_argument, 0, O_BLOCK},
        {"verify", no_argument, 0, O_VERIFY},
        {"threads", required_argument, 0, O_THREADS},
        {"resume", no_argument, 0, O_RESUME},
        {"dtype", required_argument, 0, O_DTYPE},
        {"no-panel-reuse", no_argument, 0, O_NO_REUSE},
        {"panel-by", required_argument, 0, O_PANEL_BY},
        JOB_OPTIONS,
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lt_cli_kafka kafka;
    int exit_code = 1;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    lt_submit_opts so = {.corrupt_task = -1};
    const char *pa = NULL, *pb = NULL, *out = NULL;
    int64_t m = 0, n = 0, k = 0, seed = 1, threads = 1, v;
    bool verify = false, own_ab = false; /* own_ab: a and b are random, ours to free */
    lt_npy A = {0}, B = {0};
    float *a = NULL, *b = NULL, *c = NULL, *cref = NULL;
    lt_pool *pool = NULL;
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":b:o:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int r = lt_cli_kafka_option(cmd, ch == 'b' ? LT_CLI_O_BROKERS : ch, optarg, &kafka);
        if (r == LT_CLI_OPT_ERROR) goto done;
        if (r == LT_CLI_OPT_HANDLED) continue;
        if ((r = job_option(cmd, ch, optarg, &so)) == LT_CLI_OPT_ERROR) goto done;
        if (r == LT_CLI_OPT_HANDLED) continue;
        switch (ch) {
        case O_A: pa = optarg; break;
        case O_B: pb = optarg; break;
        case O_M:
        case O_N:
        case O_K:
            if (!lt_cli_parse_i64(optarg, 1, 1 << 20, &v))
                FAIL("bad --%c '%s': expected 1..1048576", ch == O_M ? 'm' : ch == O_N ? 'n' : 'k',
                     optarg);
            *(ch == O_M ? &m : ch == O_N ? &n : &k) = v;
            break;
        case O_SEED:
            if (!lt_cli_parse_i64(optarg, 0, INT64_MAX, &seed)) FAIL("bad --seed '%s'", optarg);
            break;
        case 'o': out = optarg; break;
        case O_BLOCK:
            if (!parse_block(optarg, &so.block_m, &so.block_n, &so.block_k))
                FAIL("bad --block '%s': expected ROWSxCOLS or ROWSxCOLSxK, e.g. 128x128 or "
                     "128x128x512", optarg);
            break;
        case O_DTYPE:
            if (lt_dtype_parse(optarg, &so.dtype) ||
                (so.dtype != LT_F32 && so.dtype != LT_F16 && so.dtype != LT_BF16 &&
                 so.dtype != LT_Q8_0))
                FAIL("bad --dtype '%s': expected f32, f16, bf16 or q8_0", optarg);
            break;
        case O_VERIFY: verify = true; break;
        case O_NO_REUSE: so.no_panel_reuse = true; break;
        case O_PANEL_BY:
            if (!strcmp(optarg, "rows")) so.panel_by = LT_PANEL_BY_ROWS;
            else if (!strcmp(optarg, "cols")) so.panel_by = LT_PANEL_BY_COLS;
            else FAIL("bad --panel-by '%s': expected rows or cols", optarg);
            break;
        case O_RESUME: so.resume = true; break;
        case O_THREADS:
            if (!lt_cli_parse_i64(optarg, 1, 256, &threads))
                FAIL("bad --threads '%s': expected 1..256", optarg);
            break;
        case 'h':
            lt_cli_kafka_help(submit_help, 26, true, submit_help_end);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, ch, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc) FAIL("unexpected argument '%s' (see looptune submit --help)", argv[optind]);
    if (!out) FAIL("no --out C.npy");
    if (so.resume && !so.job_id) FAIL("--resume needs --job-id ID: the job to take up");
    if (so.no_panel_reuse && so.panel_by)
        FAIL("--panel-by and --no-panel-reuse contradict each other: give one");
    bool files = pa || pb, random = m || n || k;
    if (files && random) FAIL("give either --a and --b or --m, --n and --k, not both");
    if (files && (!pa || !pb)) FAIL("--a and --b go together");
    if (random && (!m || !n || !k)) FAIL("--m, --n and --k go together");
    if (!files && !random) FAIL("no operands: give --a A.npy --b B.npy or --m M --n N --k K");
    if (lt_cli_kafka_require(cmd, &kafka, "the workers must reach it too")) goto done;
    if (files) {
        if (lt_npy_read(pa, &A) || lt_npy_read(pb, &B)) FAIL("%s", lt_errmsg());
        if (A.ndim != 2) FAIL("%s: %d-dimensional: a matrix (2-D) expected", pa, A.ndim);
        if (B.ndim != 2) FAIL("%s: %d-dimensional: a matrix (2-D) expected", pb, B.ndim);
        if (A.shape[1] != B.shape[0])
            FAIL("%s is %lldx%lld and %s %lldx%lld: A's columns must equal B's rows", pa,
                 (long long)A.shape[0], (long long)A.shape[1], pb, (long long)B.shape[0],
                 (long long)B.shape[1]);
        m = A.shape[0];
        k = A.shape[1];
        n = B.shape[1];
        if (!m || !n || !k) FAIL("empty matrices");
        a = A.data;
        b = B.data;
    }
    if (so.dtype == LT_Q8_0 && k % 32)
        FAIL("--dtype q8_0 needs K a multiple of 32 (blocks of 32 along k), K is %lld",
             (long long)k);
    if (so.dtype == LT_Q8_0 && so.block_k && so.block_k < k && so.block_k % 32)
        FAIL("--dtype q8_0 needs the k-split of --block a multiple of 32, not %lld",
             (long long)so.block_k);
    if (!files) {
        a = malloc((size_t)(m * k) * sizeof *a);
        b = malloc((size_t)(k * n) * sizeof *b);
        own_ab = true;
        if (!a || !b) FAIL("out of memory for %lldx%lld and %lldx%lld", (long long)m,
                           (long long)k, (long long)k, (long long)n);
        uint64_t s = (uint64_t)seed;
        random_fill(a, m * k, &s);
        random_fill(b, k * n, &s);
    }
    c = malloc((size_t)(m * n) * sizeof *c);
    if (!c) FAIL("out of memory for C");
    so.conn = kafka.conn;
    so.prefix = kafka.topic_prefix;
    lt_submit_stats st;
    int rc = lt_submit_matmul(&so, a, b, m, n, k, c, &st);
    print_job(&st);
    fflush(stdout);
    if (rc) FAIL("%s", lt_errmsg());
    int64_t shape[2] = {m, n};
    if (lt_npy_write(out, c, 2, shape)) FAIL("%s", lt_errmsg());
    if (verify) {
        cref = malloc((size_t)(m * n) * sizeof *cref);
        if (!cref) FAIL("--verify: out of memory");
        /* the job's own arithmetic: its conversion, its k-splits added in order */
        if (lt_pool_init(&pool, (int)threads) ||
            lt_dist_matmul_local(pool, a, b, m, n, k, so.dtype, so.block_k, cref))
            FAIL("--verify: %s", lt_errmsg());
        double worst = 0;
        int64_t differ = 0;
        for (int64_t i = 0; i < m * n; i++) {
            double d = fabs((double)c[i] - (double)cref[i]);
            if (d > worst || isnan(d)) worst = isnan(d) ? INFINITY : d;
            differ += memcmp(&c[i], &cref[i], sizeof(float)) != 0;
        }
        printf("verify: max |C - C_local| = %.9g, %lld of %lld elements differ%s\n", worst,
               (long long)differ, (long long)(m * n), differ ? "" : " (bit-exact)");
        if (so.dtype != LT_F32 || (so.block_k && so.block_k < k)) {
            /* what the conversion and the split order cost against plain f32 */
            if (lt_dist_matmul_local(pool, a, b, m, n, k, LT_F32, 0, cref))
                FAIL("--verify: %s", lt_errmsg());
            double w32 = 0, ref_max = 0;
            for (int64_t i = 0; i < m * n; i++) {
                double d = fabs((double)c[i] - (double)cref[i]);
                if (d > w32 || isnan(d)) w32 = isnan(d) ? INFINITY : d;
                if (fabs((double)cref[i]) > ref_max) ref_max = fabs((double)cref[i]);
            }
            printf("verify: max |C - C_f32| = %.9g (max |C_f32| %.6g; the f32 product in one "
                   "pass over k: what %s%s%s costs)\n", w32, ref_max,
                   so.dtype != LT_F32 ? lt_dtype_name(so.dtype) : "",
                   so.dtype != LT_F32 && so.block_k && so.block_k < k ? " and " : "",
                   so.block_k && so.block_k < k ? "the k-split" : "");
        }
    }
    exit_code = 0;
done:
    if (own_ab) {
        free(a);
        free(b);
    }
    lt_npy_free(&A);
    lt_npy_free(&B);
    free(c);
    free(cref);
    lt_pool_free(pool);
    lt_cli_kafka_free(&kafka);
    return exit_code;
}

static const char *const noop_help =
    "usage: looptune submit noop --tasks N [--bytes B] --brokers B [options]\n"
    "\n"
    "A job of N tasks of the noop kind: each carries B bytes (default 0: one float)\n"
    "that the worker sends back, checked here. It measures the protocol: the job's\n"
    "tasks/s and each task's round trip (its send to its result applied), median\n"
    "and p99; --window 1 sends one task at a time (latency), the default all at\n"
    "once (throughput).\n"
    "\n"
    "  -b, --brokers B         Kafka bootstrap servers (required)\n";
static const char *const noop_help_end =
    "      --tasks N           tasks (required)\n"
    "      --bytes B           payload of a task, each way (default 4)\n"
    "      --window W          at most W tasks in flight (default all)\n"
    "      --worker-timeout S, --timeout S, --max-attempts N, --chunk-kb KB,\n"
    "      --partitions N, --job-id ID   as for submit matmul\n"
    "  -h, --help              this help\n";

static int submit_noop(int argc, char **argv) {
    const char *cmd = "submit noop";
    enum { O_TASKS = 256, O_BYTES };
    static const struct option opts[] = {
        LT_CLI_KAFKA_OPTIONS,
        {"tasks", required_argument, 0, O_TASKS},
        {"bytes", required_argument, 0, O_BYTES},
        JOB_OPTIONS,
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lt_cli_kafka kafka;
    int exit_code = 1;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    lt_submit_opts so = {.corrupt_task = -1};
    int64_t tasks = 0, bytes = 4;
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":b:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int r = lt_cli_kafka_option(cmd, ch == 'b' ? LT_CLI_O_BROKERS : ch, optarg, &kafka);
        if (r == LT_CLI_OPT_ERROR) goto done;
        if (r == LT_CLI_OPT_HANDLED) continue;
        if ((r = job_option(cmd, ch, optarg, &so)) == LT_CLI_OPT_ERROR) goto done;
        if (r == LT_CLI_OPT_HANDLED) continue;
        switch (ch) {
        case O_TASKS:
            if (!lt_cli_parse_i64(optarg, 1, 10000000, &tasks))
                FAIL("bad --tasks '%s': expected 1..10000000", optarg);
            break;
        case O_BYTES:
            if (!lt_cli_parse_i64(optarg, 0, 1 << 28, &bytes))
                FAIL("bad --bytes '%s': expected 0..268435456", optarg);
            break;
        case 'h':
            lt_cli_kafka_help(noop_help, 26, true, noop_help_end);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, ch, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc)
        FAIL("unexpected argument '%s' (see looptune submit noop --help)", argv[optind]);
    if (!tasks) FAIL("no --tasks N");
    if (lt_cli_kafka_require(cmd, &kafka, "the workers must reach it too")) goto done;
    so.conn = kafka.conn;
    so.prefix = kafka.topic_prefix;
    lt_submit_stats st;
    int rc = lt_submit_noop(&so, tasks, (size_t)bytes, &st);
    print_job(&st);
    if (rc) FAIL("%s", lt_errmsg());
    exit_code = 0;
done:
    lt_cli_kafka_free(&kafka);
    return exit_code;
}

int lt_cmd_submit(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        if (argc < 2) {
            fprintf(stderr, "looptune submit: which job? matmul, noop or tune (see looptune "
                            "submit --help)\n");
            return 1;
        }
        lt_cli_kafka_help(submit_help, 26, true, submit_help_end);
        return 0;
    }
    if (!strcmp(argv[1], "matmul")) return submit_matmul(argc - 1, argv + 1);
    if (!strcmp(argv[1], "noop")) return submit_noop(argc - 1, argv + 1);
    if (!strcmp(argv[1], "tune")) return lt_cmd_submit_tune(argc - 1, argv + 1);
    return lt_cli_fail("submit", "unknown job kind '%s' (known: matmul, noop, tune)", argv[1]);
}
