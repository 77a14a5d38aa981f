/* looptune tune: offline tuning of a model's kernels, of the looped
 * executor and of the thread count of each regime. Every distinct (kernel,
 * shape) of the decode (and/or prefill, and/or batched decode) program is
 * timed in isolation on the
 * program's own buffers after one real step, every layer's instance back to
 * back; the executor and the thread count on whole steps. Candidates from
 * the chosen strategy are measured interleaved with the incumbent and
 * adopted only when the paired comparison says faster. Results go to the
 * config store. The search of each key is the library's (src/tune/search.c),
 * which a distributed tune task runs too. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "looptune/model.h"
#include "looptune/program.h"
#include "looptune/tune.h"

static const char *const tune_help =
    "usage: looptune tune -m MODEL [options]\n"
    "\n"
    "Searches each kernel's parameters (per distinct shape), the looped executor's and\n"
    "the number of threads of each regime's steps (a step may use fewer than\n"
    "--threads), and writes the best configurations to the config store, which\n"
    "`looptune run` and `looptune bench` warm-start from. Progress goes to stderr: a\n"
    "line redrawn on a terminal, else one line per kernel and shape searched.\n"
    "\n"
    "  -m, --model FILE         GGUF or llama2.c checkpoint\n"
    "      --strategy S         model (XGBoost-guided, default), random or exhaustive\n"
    "      --budget N           configurations tried per kernel and shape (default 24)\n"
    "  -t, --threads T          threads (default 2 or the CPU count, whichever is smaller)\n"
    "      --regime R           decode (default), prefill (a batch of 64 tokens), batch\n"
    "                           (batched decode: one token of each of --seqs sequences),\n"
    "                           both (decode and prefill) or all three\n"
    "      --seqs N             sequences of a batched step of --regime batch|all (default 4)\n"
    "      --config-store SPEC  a file (default $XDG_CACHE_HOME/looptune/configs.tsv or\n"
    "                           ~/.cache/looptune/configs.tsv) or kafka: the compacted topic\n"
    "                           looptune.configs (created if missing) at --brokers\n"
    "      --seed S             strategy seed (default 1)\n"
    "      --membw              measure the memory bandwidth first (a cost-model feature)\n"
    "      --mmap               tune the weights as `run --mmap` reads them, from the file\n"
    "                           mapping (q8_0 rows then keep their own layout and keys)\n"
    "      --brokers B          Kafka bootstrap servers of --config-store kafka (required)\n";
/* ... then the shared Kafka lines (lt_cli_kafka_help), then: */
static const char *const tune_help_end = "  -h, --help               this help\n";

/* The progress line of a search on a terminal, redrawn after each trial and
 * cleared when the trials are over. */
static void on_trial(void *arg, const char *space, const char *shape, int used, int budget,
                     double best) {
    (void)arg;
    if (used > 0) {
        fprintf(stderr, "\r%-10s %-34s trial %3d/%-3d best %.3fx   ", space, shape, used,
                budget, best);
        fflush(stderr);
    } else {
        fprintf(stderr, "\r%*s\r", 80, "");
    }
}

/* Elsewhere (a log, CI): one line per space searched. */
static void report(const lt_tune_result *r, uint64_t t_start) {
    fprintf(stderr, "tune: %s %s: %d trial%s, %.3fx (%s) in %.1f s\n", r->kernel, r->shape,
            r->trials, r->trials == 1 ? "" : "s", r->speedup, r->params,
            (double)(lt_now_ns() - t_start) / 1e9);
    fflush(stderr);
}

/* Room for row n_rows; false when out of memory. */
static bool grow_rows(lt_tune_result **rows, int *cap, int n_rows) {
    if (n_rows < *cap) return true;
    int nc = *cap ? 2 * *cap : 16;
    lt_tune_result *nr = realloc(*rows, (size_t)nc * sizeof *nr);
    if (!nr) return false;
    *rows = nr;
    *cap = nc;
    return true;
}

/* An error while reading the options: say it, free the Kafka properties. */
#define BAIL(...)                                                              \
    do {                                                                       \
        lt_cli_kafka_free(&kafka);                                             \
        return lt_cli_fail(cmd, __VA_ARGS__);                                  \
    } while (0)
/* The same after the error was printed. */
#define BAIL_QUIET()                                                           \
    do {                                                                       \
        lt_cli_kafka_free(&kafka);                                             \
        return 1;                                                              \
    } while (0)

int lt_cmd_tune(int argc, char **argv) {
    const char *cmd = "tune";
    const char *model_path = NULL, *store_path = NULL, *regime = "decode";
    int64_t budget = 24, threads = 0, seed = 1, seqs = LT_TUNE_BATCH_SEQS;
    lt_strategy_kind kind = LT_STRAT_MODEL;
    bool membw = false, use_mmap = false;
    enum { O_STRAT = 256, O_BUDGET, O_REGIME, O_STORE, O_SEED, O_MEMBW, O_SEQS, O_MMAP };
    lt_cli_kafka kafka;
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},         {"strategy", required_argument, 0, O_STRAT},
        {"budget", required_argument, 0, O_BUDGET},   {"threads", required_argument, 0, 't'},
        {"regime", required_argument, 0, O_REGIME},
        {"config-store", required_argument, 0, O_STORE},
        {"seed", required_argument, 0, O_SEED},       {"help", no_argument, 0, 'h'},
        {"membw", no_argument, 0, O_MEMBW},
        {"seqs", required_argument, 0, O_SEQS},
        {"mmap", no_argument, 0, O_MMAP},
        LT_CLI_KAFKA_OPTIONS,
        {0, 0, 0, 0}};
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":m:t:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int k = lt_cli_kafka_option(cmd, c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) BAIL_QUIET();
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case 'm': model_path = optarg; break;
        case O_STRAT:
            if (lt_strategy_parse(optarg, &kind)) BAIL("%s", lt_errmsg());
            break;
        case O_BUDGET:
            if (!lt_cli_parse_i64(optarg, 1, 100000, &budget))
                BAIL("bad --budget '%s': expected a number of trials >= 1", optarg);
            break;
        case 't':
            if (!lt_cli_parse_i64(optarg, 1, 64, &threads))
                BAIL("bad --threads '%s': expected 1..64", optarg);
            break;
        case O_REGIME:
            if (strcmp(optarg, "decode") && strcmp(optarg, "prefill") && strcmp(optarg, "batch") &&
                strcmp(optarg, "both") && strcmp(optarg, "all"))
                BAIL("bad --regime '%s': expected decode, prefill, batch, both or all", optarg);
            regime = optarg;
            break;
        case O_SEQS:
            if (!lt_cli_parse_i64(optarg, 2, 256, &seqs))
                BAIL("bad --seqs '%s': expected 2..256 sequences", optarg);
            break;
        case O_STORE: store_path = optarg; break;
        case O_MEMBW: membw = true; break;
        case O_MMAP: use_mmap = true; break;
        case O_SEED:
            if (!lt_cli_parse_i64(optarg, 0, INT64_MAX, &seed))
                BAIL("bad --seed '%s': expected a number >= 0", optarg);
            break;
        case 'h':
            lt_cli_kafka_help(tune_help, 27, true, tune_help_end);
            lt_cli_kafka_free(&kafka);
            return 0;
        default:
            lt_cli_kafka_free(&kafka);
            return lt_cli_bad_option(cmd, c, argv[optind - 1]);
        }
    }
    if (optind < argc)
        BAIL("unexpected argument '%s' (see looptune tune --help)", argv[optind]);
    if (!model_path) BAIL("no model: give -m MODEL (see looptune tune --help)");
    if (!lt_cli_store_is_kafka(store_path) &&
        lt_cli_kafka_refuse(cmd, &kafka, "--config-store kafka"))
        BAIL_QUIET();
    char defpath[1024];
    if (!store_path) {
        if (!lt_store_default_path(defpath, sizeof defpath))
            BAIL("no config store: set HOME or XDG_CACHE_HOME, or give --config-store FILE");
        store_path = defpath;
    }

    int rc, exit_code = 1, n_rows = 0;
    lt_model *m = NULL;
    lt_pool *pool = NULL;
    lt_llama *l = NULL;
    lt_store *store = NULL;
    lt_tune_result *rows = NULL;
    lt_store_backend be;
    if (lt_cli_store_backend(cmd, store_path, &kafka, &be)) goto done;
    if ((rc = lt_store_open(&store, &be, NULL))) {
        lt_cli_fail_status(cmd, rc, "cannot open the config store");
        goto done;
    }
    lt_cli_load_stats ls;
    if ((rc = lt_cli_load_model(cmd, model_path, NULL, use_mmap, &m, &ls))) goto done;
    if (!threads) threads = lt_cpu()->logical_cpus < 2 ? 1 : 2;
    if ((rc = lt_pool_init(&pool, (int)threads))) {
        lt_cli_fail_status(cmd, rc, "cannot start threads");
        goto done;
    }
    /* which passes: decode, prefill, batched decode */
    const bool all = !strcmp(regime, "all"), both = !strcmp(regime, "both");
    const bool do_regime[3] = {all || both || !strcmp(regime, "decode"),
                               all || both || !strcmp(regime, "prefill"),
                               all || !strcmp(regime, "batch")};
    /* a batched step takes a slot of the KV cache per sequence */
    lt_llama_opts lo = {.executor = LT_EXEC_LOOPED, .n_slots = do_regime[2] ? seqs : 1};
    if ((rc = lt_llama_init(&l, m, pool, &lo))) {
        lt_cli_fail_status(cmd, rc, "cannot build the program");
        goto done;
    }
    lt_host host;
    lt_host_detect(&host);
    if (membw) {
        lt_membw bw;
        if ((rc = lt_membw_measure(pool, 0, 3, &bw))) {
            lt_cli_fail_status(cmd, rc, "cannot measure the memory bandwidth");
            goto done;
        }
        host.bw_gb_s = bw.read_gb_s;
        fprintf(stderr, "tune: read bandwidth %.1f GB/s\n", bw.read_gb_s);
    }
    int64_t pre_n = LT_TUNE_PREFILL_TOKENS;
    if (pre_n > lt_llama_max_batch(l)) pre_n = lt_llama_max_batch(l);
    if (do_regime[1] && pre_n < 2) {
        lt_cli_fail(cmd, "the model's context is too short for a prefill batch");
        goto done;
    }
    if (do_regime[2] &&
        (seqs > lt_llama_max_batch(l) || LT_TUNE_DECODE_POS >= lt_llama_ctx_len(l))) {
        lt_cli_fail(cmd, "the model's context is too short for a batched step of %lld sequences",
                    (long long)seqs);
        goto done;
    }
    int cap_rows = 0;
    const bool tty = isatty(STDERR_FILENO);
    lt_tune_opts to = {.strategy = kind, .budget = (int)budget, .seed = (uint64_t)seed,
                       .host = host, .progress = tty ? on_trial : NULL};
    for (int pass = 0; pass < 3; pass++) {
        if (!do_regime[pass]) continue;
        lt_tune_pass *tp;
        rc = pass == 2 ? lt_tune_pass_open_batch(&tp, l, pool, seqs)
                       : lt_tune_pass_open(&tp, l, pool, pass == 0 ? 1 : pre_n);
        if (rc) {
            lt_cli_fail_status(cmd, rc, "cannot evaluate the model");
            goto done;
        }
        for (int i = 0; i < lt_tune_pass_n_keys(tp); i++) {
            const lt_tune_key *key = lt_tune_pass_key(tp, i);
            bool seen = false;
            for (int r = 0; r < n_rows; r++)
                seen |= !strcmp(rows[r].kernel, key->kernel) && !strcmp(rows[r].shape, key->shape);
            if (seen) continue;
            if (!grow_rows(&rows, &cap_rows, n_rows)) {
                lt_tune_pass_close(tp);
                lt_cli_fail(cmd, "out of memory");
                goto done;
            }
            uint64_t t_start = lt_now_ns();
            if ((rc = lt_tune_pass_search(tp, i, &to, &rows[n_rows]))) {
                lt_tune_pass_close(tp);
                lt_cli_fail_status(cmd, rc, "tuning failed");
                goto done;
            }
            if (!tty) report(&rows[n_rows], t_start);
            n_rows++;
        }
        /* the looped executor's space, on whole decode steps; then the
         * regime's thread count: fewer threads than the pool can win where
         * synchronisation costs more than a thread adds */
        for (int what = 0; what < 2; what++) {
            if ((what == 0 && pass != 0) || (what == 1 && threads <= 1)) continue;
            if (!grow_rows(&rows, &cap_rows, n_rows)) {
                lt_tune_pass_close(tp);
                lt_cli_fail(cmd, "out of memory");
                goto done;
            }
            uint64_t t_start = lt_now_ns();
            rc = what == 0 ? lt_tune_pass_search_looped(tp, &to, &rows[n_rows])
                           : lt_tune_pass_search_threads(tp, &to, &rows[n_rows]);
            if (rc) {
                lt_tune_pass_close(tp);
                lt_cli_fail_status(cmd, rc, what == 0 ? "tuning the executor failed"
                                                      : "tuning the thread count failed");
                goto done;
            }
            if (!tty) report(&rows[n_rows], t_start);
            n_rows++;
        }
        lt_tune_pass_close(tp);
    }

    printf("%-8s %-36s %12s %12s %8s %6s  %s\n", "kernel", "shape", "default us", "tuned us",
           "speedup", "trials", "best params");
    for (int r = 0; r < n_rows; r++) {
        const lt_tune_result *row = &rows[r];
        printf("%-8s %-36s %12.2f %12.2f %7.3fx %6d  %s\n", row->kernel, row->shape,
               row->def_ns / 1e3, row->tuned_ns / 1e3, row->speedup, row->trials, row->params);
        lt_config_entry e;
        lt_tune_result_entry(row, host.host_class, (int)budget, &e);
        if ((rc = lt_store_put(store, &e))) {
            lt_cli_fail_status(cmd, rc, "bad result");
            goto done;
        }
    }
    if ((rc = lt_store_save(store))) {
        lt_cli_fail_status(cmd, rc, "cannot write the config store");
        goto done;
    }
    fprintf(stderr, "tune: %d configurations for host %s written to %s\n", n_rows,
            host.host_class, lt_store_name(store));
    exit_code = 0;
done:
    free(rows);
    lt_cli_kafka_free(&kafka);
    lt_store_close(store);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return exit_code;
}
