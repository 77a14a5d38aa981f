/* looptune tune: offline tuning of a model's kernels, of the looped
 * executor and of the thread count of each regime. Every distinct (kernel,
 * shape) of the decode (and/or prefill) program is timed in isolation on the
 * program's own buffers after one real step, every layer's instance back to
 * back; the executor and the thread count on whole steps. Candidates from
 * the chosen strategy are measured interleaved with the incumbent and
 * adopted only when the paired comparison says faster. Results go to the
 * config store. */
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
    "the number of threads of decode and of prefill steps (a step may use fewer than\n"
    "--threads), and writes the best configurations to the config store, which\n"
    "`looptune run` and `looptune bench` warm-start from. Progress goes to stderr: a\n"
    "line redrawn on a terminal, else one line per kernel and shape searched.\n"
    "\n"
    "  -m, --model FILE         GGUF or llama2.c checkpoint\n"
    "      --strategy S         model (XGBoost-guided, default), random or exhaustive\n"
    "      --budget N           configurations tried per kernel and shape (default 24)\n"
    "  -t, --threads T          threads (default 2 or the CPU count, whichever is smaller)\n"
    "      --regime R           decode (default), prefill (a batch of 64 tokens) or both\n"
    "      --config-store SPEC  a file (default $XDG_CACHE_HOME/looptune/configs.tsv or\n"
    "                           ~/.cache/looptune/configs.tsv) or kafka: the compacted topic\n"
    "                           looptune.configs (created if missing) at --brokers\n"
    "      --seed S             strategy seed (default 1)\n"
    "      --membw              measure the memory bandwidth first (a cost-model feature)\n"
    "      --brokers B          Kafka bootstrap servers of --config-store kafka (required)\n";
/* ... then the shared Kafka lines (lt_cli_kafka_help), then: */
static const char *const tune_help_end = "  -h, --help               this help\n";

enum { PAIRS = 8, FINAL_PAIRS = 16, PREFILL_TOKENS = 64, DECODE_POS = 16 };
/* A comparison goes on past its pairs, up to EXTEND times as many, until it
 * has MIN_CLEAN pairs measured without preemption (a busy machine). */
enum { EXTEND = 3, MIN_CLEAN = 5, MAX_PAIRS = FINAL_PAIRS * EXTEND };
static const double MARGIN = 0.01;          /* "faster" means by more than 1% */
static const double CONTENDED_WEIGHT = 0.1; /* weight of a pair measured while preempted */
static const double MIN_SAMPLE_NS = 200e3;  /* a sample repeats the node to last this long */

/* What one measurement runs: a node's instances, or a whole step under the
 * executor's parameters or on a number of threads. */
typedef struct {
    lt_node_timer *timer;
    int reps;
    /* whole steps under the values of (name, key) in l's tuning context: the
     * executor's parameters or a regime's thread count */
    lt_llama *l;
    const char *name, *key;
    const int32_t *toks;
    int64_t n_tokens, pos;
} target;

static double measure(target *t, const lt_params *p, bool *busy) {
    double ns = 0;
    bool any = false;
    for (int r = 0; r < t->reps; r++) {
        bool b = false;
        if (t->timer) {
            ns += lt_node_timer_run(t->timer, p, &b);
        } else {
            LT_ASSERT(lt_tuning_set(lt_llama_tuning(t->l), t->name, t->key, p) == LT_OK);
            uint64_t t0 = lt_now_ns();
            LT_ASSERT(lt_llama_eval(t->l, t->toks, t->n_tokens, t->pos) == LT_OK);
            ns += (double)(lt_now_ns() - t0);
        }
        any |= b;
    }
    if (busy) *busy = any;
    return ns / t->reps;
}

/* Interleaved pairs: incumbent then candidate, at least n of them (more on
 * a busy machine, see EXTEND). *n_out gets the pairs measured. */
static int compare(target *t, const lt_params *inc, const lt_params *cand, int n, uint64_t seed,
                   double *a, double *b, bool *busy, int *n_out, lt_compare_result *res) {
    int i = 0, clean = 0;
    while (i < n || (clean < MIN_CLEAN && i < n * EXTEND)) {
        bool ba, bb;
        a[i] = measure(t, inc, &ba);
        b[i] = measure(t, cand, &bb);
        busy[i] = ba || bb;
        clean += !busy[i];
        i++;
    }
    *n_out = i;
    return lt_compare_paired(a, b, busy, i, MARGIN, CONTENDED_WEIGHT, seed, res);
}

typedef struct {
    const char *kernel;
    char shape[96];
    double def_ns, tuned_ns, speedup;
    int trials;
    int samples; /* pairs behind the final verdict */
    char params[160];
} result_row;

/* Searches one space; check validates a candidate on the real call (NULL:
 * the space is the whole constraint). Fills row; returns the best point.
 * Progress goes to stderr: one line redrawn per trial on a terminal, else
 * (a log, CI) one line per space searched. */
static int search(const char *what, target *t, const lt_space *sp, const lt_tune_context *ctx,
                  lt_strategy_kind kind, int budget, uint64_t seed, lt_kernel_id kid,
                  const lt_call *call, result_row *row, lt_params *best) {
    uint64_t t_start = lt_now_ns();
    bool tty = isatty(STDERR_FILENO);
    lt_params def, inc;
    lt_space_default(sp, &def);
    inc = def;
    /* calibrate repetitions so one sample lasts MIN_SAMPLE_NS */
    t->reps = 1;
    measure(t, &def, NULL); /* warm-up */
    double one = measure(t, &def, NULL);
    t->reps = one >= MIN_SAMPLE_NS ? 1 : (int)(MIN_SAMPLE_NS / (one > 1 ? one : 1)) + 1;
    if (t->reps > 10000) t->reps = 10000;
    double ds[PAIRS];
    for (int i = 0; i < PAIRS; i++) ds[i] = measure(t, &def, NULL);
    double inc_cost = lt_median(ds, PAIRS);

    lt_strategy *st;
    int rc = lt_strategy_init(&st, kind, sp, ctx, seed);
    if (rc) return rc;
    lt_strategy_observe(st, &def, ds, PAIRS);
    int used = 0;
    double a[MAX_PAIRS], b[MAX_PAIRS], costs[MAX_PAIRS];
    bool busy[MAX_PAIRS];
    int np;
    while (used < budget) {
        lt_params cand;
        int k = lt_strategy_propose(st, &cand, 1);
        if (k < 0) {
            rc = k;
            break;
        }
        if (k == 0) break; /* space exhausted */
        used++;
        if (call && lt_config_check(kid, call, &cand) != LT_OK) {
            lt_log(LT_LOG_DEBUG, "%s: candidate refused: %s", what, lt_errmsg());
            lt_strategy_observe(st, &cand, NULL, 0);
            continue;
        }
        lt_compare_result res;
        if ((rc = compare(t, &inc, &cand, PAIRS, seed + (uint64_t)used, a, b, busy, &np, &res)))
            break;
        /* costs relative to the incumbent's, so slow drifts cancel; clean
         * pairs only, unless there are none */
        int nc = 0;
        for (int i = 0; i < np; i++)
            if (!busy[i] || res.n_clean == 0) costs[nc++] = inc_cost * b[i] / a[i];
        lt_strategy_observe(st, &cand, costs, nc);
        if (res.faster) {
            inc = cand;
            inc_cost *= res.ratio;
        }
        if (tty) { /* one line, redrawn */
            fprintf(stderr, "\r%-10s %-34s trial %3d/%-3d best %.3fx   ", sp->name, row->shape,
                    used, budget, lt_median(ds, PAIRS) / inc_cost);
            fflush(stderr);
        }
    }
    lt_strategy_free(st);
    if (tty) fprintf(stderr, "\r%*s\r", 80, "");
    if (rc) return rc;
    /* the verdict: default against the incumbent, more pairs */
    lt_compare_result fin;
    if ((rc = compare(t, &def, &inc, FINAL_PAIRS, seed ^ 0xf1a1, a, b, busy, &np, &fin)))
        return rc;
    if (!fin.faster) inc = def, fin.b_median = fin.a_median, fin.ratio = 1.0;
    row->def_ns = fin.a_median;
    row->tuned_ns = fin.b_median;
    row->speedup = 1.0 / fin.ratio;
    row->trials = used;
    row->samples = np;
    lt_space_format(sp, &inc, row->params, sizeof row->params);
    *best = inc;
    if (!tty) {
        fprintf(stderr, "tune: %s %s: %d trial%s, %.3fx (%s) in %.1f s\n", what, row->shape,
                used, used == 1 ? "" : "s", row->speedup, row->params,
                (double)(lt_now_ns() - t_start) / 1e9);
        fflush(stderr);
    }
    return LT_OK;
}

/* Room for row n_rows; false when out of memory. */
static bool grow_rows(result_row **rows, int *cap, int n_rows) {
    if (n_rows < *cap) return true;
    int nc = *cap ? 2 * *cap : 16;
    result_row *nr = realloc(*rows, (size_t)nc * sizeof *nr);
    if (!nr) return false;
    *rows = nr;
    *cap = nc;
    return true;
}

/* Searches a space measured on whole steps (the executor's, a thread
 * count) into a new row named kernel and shape; *best gets the winner. */
static int search_steps(result_row **rows, int *cap, int *n_rows, const char *kernel,
                        const char *shape, target *t, const lt_space *sp, const lt_host *host,
                        lt_strategy_kind kind, int budget, uint64_t seed, lt_params *best) {
    if (!grow_rows(rows, cap, *n_rows)) return lt_error(LT_ENOMEM, "out of memory");
    result_row *row = &(*rows)[*n_rows];
    memset(row, 0, sizeof *row);
    row->kernel = kernel;
    snprintf(row->shape, sizeof row->shape, "%s", shape);
    lt_tune_context ctx = {.host = *host};
    int rc = search(kernel, t, sp, &ctx, kind, budget, seed, 0, NULL, row, best);
    if (!rc) (*n_rows)++;
    return rc;
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
    int64_t budget = 24, threads = 0, seed = 1;
    lt_strategy_kind kind = LT_STRAT_MODEL;
    bool membw = false;
    enum { O_STRAT = 256, O_BUDGET, O_REGIME, O_STORE, O_SEED, O_MEMBW };
    lt_cli_kafka kafka;
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},         {"strategy", required_argument, 0, O_STRAT},
        {"budget", required_argument, 0, O_BUDGET},   {"threads", required_argument, 0, 't'},
        {"regime", required_argument, 0, O_REGIME},
        {"config-store", required_argument, 0, O_STORE},
        {"seed", required_argument, 0, O_SEED},       {"help", no_argument, 0, 'h'},
        {"membw", no_argument, 0, O_MEMBW},
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
            if (strcmp(optarg, "decode") && strcmp(optarg, "prefill") && strcmp(optarg, "both"))
                BAIL("bad --regime '%s': expected decode, prefill or both", optarg);
            regime = optarg;
            break;
        case O_STORE: store_path = optarg; break;
        case O_MEMBW: membw = true; break;
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
    result_row *rows = NULL;
    lt_store_backend be;
    if (lt_cli_store_backend(cmd, store_path, &kafka, &be)) goto done;
    if ((rc = lt_store_open(&store, &be, NULL))) {
        lt_cli_fail_status(cmd, rc, "cannot open the config store");
        goto done;
    }
    lt_cli_load_stats ls;
    if ((rc = lt_cli_load_model(cmd, model_path, NULL, false, &m, &ls))) goto done;
    if (!threads) threads = lt_cpu()->logical_cpus < 2 ? 1 : 2;
    if ((rc = lt_pool_init(&pool, (int)threads))) {
        lt_cli_fail_status(cmd, rc, "cannot start threads");
        goto done;
    }
    lt_llama_opts lo = {.executor = LT_EXEC_LOOPED};
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
    bool do_decode = strcmp(regime, "prefill") != 0, do_prefill = strcmp(regime, "decode") != 0;
    int64_t pre_n = PREFILL_TOKENS;
    if (pre_n > lt_llama_max_batch(l)) pre_n = lt_llama_max_batch(l);
    if (do_prefill && pre_n < 2) {
        lt_cli_fail(cmd, "the model's context is too short for a prefill batch");
        goto done;
    }
    int cap_rows = 0;
    for (int pass = 0; pass < 2; pass++) {
        if ((pass == 0 && !do_decode) || (pass == 1 && !do_prefill)) continue;
        int64_t n = pass == 0 ? 1 : pre_n;
        int32_t *toks = calloc((size_t)n, sizeof *toks);
        if (!toks) {
            lt_cli_fail(cmd, "out of memory");
            goto done;
        }
        for (int64_t i = 0; i < n; i++) toks[i] = (int32_t)(1 + i % (m->cfg.vocab_size - 1));
        lt_program *p;
        /* one real step fills the program's buffers with realistic values */
        if ((rc = lt_llama_eval(l, toks, n, 0)) || (rc = lt_llama_program(l, n, &p))) {
            free(toks);
            lt_cli_fail_status(cmd, rc, "cannot evaluate the model");
            goto done;
        }
        lt_step step = {.pos = n == 1 ? DECODE_POS : 0, .n_tokens = n, .tokens = toks};
        lt_params xp;
        lt_exec_params(lt_llama_exec(l), &xp);
        int nn = lt_program_n_nodes(p);
        for (int i = 0; i < nn; i++) {
            lt_node_info ni;
            lt_program_node(p, i, &ni);
            const lt_kernel *k = lt_kernel_get(ni.kernel);
            if (k->n_params == 0) continue;
            const lt_call *call = lt_program_call(p, i);
            lt_tune_context ctx = {.host = host};
            lt_shape_of_call(ni.kernel, call, &ctx.shape);
            char sig[96];
            lt_shape_format(&ctx.shape, sig, sizeof sig);
            bool seen = false;
            for (int r = 0; r < n_rows; r++)
                seen |= !strcmp(rows[r].kernel, k->name) && !strcmp(rows[r].shape, sig);
            if (seen) continue;
            if (!grow_rows(&rows, &cap_rows, n_rows)) {
                free(toks);
                lt_cli_fail(cmd, "out of memory");
                goto done;
            }
            result_row *row = &rows[n_rows];
            memset(row, 0, sizeof *row);
            row->kernel = k->name;
            snprintf(row->shape, sizeof row->shape, "%s", sig);
            target t = {0};
            if ((rc = lt_node_timer_init(&t.timer, lt_llama_exec(l), p, i, pool, &step,
                                         xp.v[LT_XP_TILES]))) {
                free(toks);
                lt_cli_fail_status(cmd, rc, "cannot time a node");
                goto done;
            }
            lt_space sp;
            lt_space_from_kernel(&sp, k);
            lt_space_fit_isa(&sp, lt_isa_active());
            lt_space_fit_call(&sp, ni.kernel, call);
            lt_params best;
            rc = search(k->name, &t, &sp, &ctx, kind, (int)budget, (uint64_t)seed, ni.kernel, call,
                        row, &best);
            lt_node_timer_free(t.timer);
            /* the tuned configuration stays in force for what follows, on
             * every node of this kernel and shape (as a warm start would) */
            if (!rc) rc = lt_tuning_set(lt_llama_tuning(l), k->name, sig, &best);
            if (rc) {
                free(toks);
                lt_cli_fail_status(cmd, rc, "tuning failed");
                goto done;
            }
            n_rows++;
        }
        /* the looped executor's space, on whole decode steps */
        if (pass == 0) {
            char shape[128];
            lt_exec_shape_format(m, (int)threads, shape, sizeof shape);
            target t = {.l = l, .name = LT_TUNING_LOOPED, .key = shape, .toks = toks,
                        .n_tokens = 1, .pos = DECODE_POS};
            lt_space sp;
            lt_space_from_exec(&sp);
            lt_params best;
            rc = search_steps(&rows, &cap_rows, &n_rows, "looped", shape, &t, &sp, &host, kind,
                              (int)budget, (uint64_t)seed, &best);
            if (!rc) rc = lt_tuning_set(lt_llama_tuning(l), LT_TUNING_LOOPED, shape, &best);
            if (rc) {
                free(toks);
                lt_cli_fail_status(cmd, rc, "tuning the executor failed");
                goto done;
            }
        }
        /* the regime's thread count, on whole steps: fewer threads than the
         * pool can win where synchronisation costs more than a thread adds */
        if (threads > 1) {
            char shape[128];
            lt_regime rg = pass == 0 ? LT_REGIME_DECODE : LT_REGIME_PREFILL;
            lt_step_shape_format(m, (int)threads, rg, shape, sizeof shape);
            target t = {.l = l, .name = LT_TUNING_THREADS, .key = shape, .toks = toks,
                        .n_tokens = n, .pos = n == 1 ? DECODE_POS : 0};
            lt_space sp;
            lt_space_threads(&sp, (int)threads);
            lt_params best;
            rc = search_steps(&rows, &cap_rows, &n_rows, "threads", shape, &t, &sp, &host, kind,
                              (int)budget, (uint64_t)seed, &best);
            if (!rc) rc = lt_tuning_set(lt_llama_tuning(l), LT_TUNING_THREADS, shape, &best);
            if (rc) {
                free(toks);
                lt_cli_fail_status(cmd, rc, "tuning the thread count failed");
                goto done;
            }
        }
        free(toks);
    }

    printf("%-8s %-36s %12s %12s %8s %6s  %s\n", "kernel", "shape", "default us", "tuned us",
           "speedup", "trials", "best params");
    for (int r = 0; r < n_rows; r++) {
        const result_row *row = &rows[r];
        printf("%-8s %-36s %12.2f %12.2f %7.3fx %6d  %s\n", row->kernel, row->shape,
               row->def_ns / 1e3, row->tuned_ns / 1e3, row->speedup, row->trials, row->params);
        lt_config_entry e;
        memset(&e, 0, sizeof e);
        snprintf(e.kernel, sizeof e.kernel, "%s", row->kernel);
        snprintf(e.shape, sizeof e.shape, "%s", row->shape);
        snprintf(e.host, sizeof e.host, "%s", host.host_class);
        snprintf(e.params, sizeof e.params, "%s", row->params);
        e.median_ns = row->tuned_ns;
        e.samples = row->samples;
        e.speedup = row->speedup;
        e.trials = row->trials;
        e.converged = row->trials < budget; /* the strategy ran out of points first */
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
