/* looptune bench: decode tokens/s with the machine's memory bandwidth,
 * measured in the same run, as the ceiling. Runs alternate between a decode
 * sample and a bandwidth sample so both see the same machine conditions. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "looptune/model.h"
#include "looptune/program.h"

static const char *const bench_help =
    "usage: looptune bench -m MODEL [options]\n"
    "\n"
    "Decode benchmark: a warm-up, then R runs of N greedy tokens each, alternating with\n"
    "measurements of the machine's memory bandwidth on arrays far larger than the cache:\n"
    "STREAM triad and a read-only vector stream (decode's access pattern, its ceiling).\n"
    "Reports min/median/max of tokens/s, achieved GB/s (weight + KV bytes read per token\n"
    "times tokens/s) and its fraction of the read-only bandwidth.\n"
    "\n"
    "  -m, --model FILE     model (GGUF or llama2.c)\n"
    "  -t, --threads T      threads (default 2 or the CPU count, whichever is smaller)\n"
    "  -n, --tokens N       tokens per run (default 64)\n"
    "  -r, --runs R         measured runs (default 5)\n"
    "  -s, --seqs S         decode S sequences together, one batch of S tokens per step\n"
    "                       (default 1); tokens/s counts every sequence's tokens\n"
    "      --prefill P      measure prefill instead: each run evaluates one P-token prompt\n"
    "                       at position 0 (as llama-bench -p P -n 0); reports tokens/s of\n"
    "                       the prompt (no decode, no bandwidth)\n"
    "      --membw-mib M    bandwidth array size in MiB (default 256)\n"
    "      --isa ISA        force kernels to portable, avx2 or avx512\n"
    "      --executor E     looped (default) or dispatch\n"
    "      --compare-executors  run both executors alternately in one process, with the ratio\n"
    "      --mmap           read weights from the file mapping instead of huge-page memory\n"
    "      --no-fuse-pass   keep norms, gates, rope and cache stores as nodes of their own\n"
    "                       (no matvec prologues or epilogues)\n"
    "      --json           one JSON object on stdout instead of the table\n"
    "      --config-store SPEC  tuned configurations to start from: a file (default: the\n"
    "                       user's cache) or kafka (the topic looptune.configs at --brokers)\n"
    "      --no-warm-start  run with the kernels' default parameters\n"
    "      --param K.NAME=V force kernel K's parameter NAME to V on every node (after the\n"
    "                       warm start; repeatable), e.g. --param matvec.act_int8=0;\n"
    "                       threads.decode=N / threads.prefill=N / threads.batch=N: that\n"
    "                       regime's threads (batch: the steps of --seqs 2 or more)\n"
    "                       looped.NAME=V: a looped executor parameter\n"
    "      --brokers B      Kafka bootstrap servers of --config-store kafka\n";
/* ... then the shared Kafka lines (lt_cli_kafka_help), then: */
static const char *const bench_help_end = "  -h, --help           this help\n";

#define LT_BENCH_MAX_SEQS 256

/* One decode run: token 1 at position 0 of each of seqs sequences, then n
 * greedy tokens each (with seqs > 1, one batch of a token per sequence per
 * step). Only the evaluations are timed (as llama.cpp's own counters do):
 * the argmax that picks the next token is not part of decode speed. Returns
 * the tokens/s of all sequences, each timed step's milliseconds in step_ms[0..n)
 * (NULL: not kept; a step is one token of every sequence, so its time is the
 * latency each sequence sees per token) and the synchronisation counters of
 * the n timed steps. */
static int decode_run(lt_llama *l, int64_t n, int64_t seqs, double *tok_s, double *step_ms,
                      lt_llama_sync *sync) {
    const int64_t vocab = lt_llama_model(l)->cfg.vocab_size;
    int32_t tok[LT_BENCH_MAX_SEQS], slot[LT_BENCH_MAX_SEQS];
    int64_t pos[LT_BENCH_MAX_SEQS];
    for (int64_t s = 0; s < seqs; s++) {
        tok[s] = (int32_t)((1 + s) % vocab); /* other tokens: other sequences */
        slot[s] = (int32_t)s;
        pos[s] = 0;
    }
    int rc = seqs == 1 ? lt_llama_eval(l, tok, 1, 0) : lt_llama_eval_batch(l, tok, pos, slot, seqs);
    if (rc) return rc;
    lt_llama_sync s0, s1;
    lt_llama_sync_stats(l, &s0);
    uint64_t busy = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *lg = lt_llama_logits(l, NULL);
        for (int64_t s = 0; s < seqs; s++) {
            const float *row = lg + s * vocab;
            int32_t best = 0;
            for (int64_t j = 1; j < vocab; j++)
                if (row[j] > row[best]) best = (int32_t)j;
            tok[s] = best;
            pos[s] = i + 1;
        }
        uint64_t t0 = lt_now_ns();
        rc = seqs == 1 ? lt_llama_eval(l, tok, 1, i + 1)
                       : lt_llama_eval_batch(l, tok, pos, slot, seqs);
        if (rc) return rc;
        const uint64_t dt = lt_now_ns() - t0;
        busy += dt;
        if (step_ms) step_ms[i] = (double)dt * 1e-6;
    }
    *tok_s = (double)(n * seqs) / ((double)busy * 1e-9);
    lt_llama_sync_stats(l, &s1);
    sync->steps = s1.steps - s0.steps;
    sync->sync_points = s1.sync_points - s0.sync_points;
    sync->wait_ns = s1.wait_ns - s0.wait_ns;
    sync->busy_ns = s1.busy_ns - s0.busy_ns;
    return LT_OK;
}

/* One prefill run: a prompt of p tokens at position 0, timed as one
 * evaluation. Returns its tokens/s. */
static int prefill_run(lt_llama *l, const int32_t *prompt, int64_t p, double *tok_s) {
    const uint64_t t0 = lt_now_ns();
    const int rc = lt_llama_eval(l, prompt, p, 0);
    if (rc) return rc;
    *tok_s = (double)p / ((double)(lt_now_ns() - t0) * 1e-9);
    return LT_OK;
}

/* s as a JSON string, through the records' JSON writer (a path may hold
 * quotes, backslashes, control characters or bytes that are not UTF-8). */
static void print_json_string(const char *s) {
    char *q = NULL;
    if (lt_json_quote(s, strlen(s), &q) == LT_OK) fputs(q, stdout);
    else fputs("null", stdout); /* out of memory */
    free(q);
}

static void print_stat_json(const char *name, lt_summary s, bool last) {
    printf("\"%s\":{\"min\":%.6g,\"median\":%.6g,\"max\":%.6g}%s", name, s.min, s.median, s.max,
           last ? "" : ",");
}

/* Samples of one executor over the runs. */
typedef struct {
    lt_executor e;
    lt_llama *l;
    double *tps, *gbs, *frac, *share, *points;
    double *step_ms; /* [runs * tokens] every timed step */
} exec_samples;

/* The q-quantile of x[0..n) (nearest rank), x sorted in place; n >= 1. */
static double quantile(double *x, int64_t n, double q) {
    lt_sort_f64(x, (int)n);
    return x[(int64_t)(q * (double)(n - 1) + 0.5)];
}

enum { N_SERIES = 5 };

static void print_table_row(const char *name, int decimals, lt_summary s) {
    printf("%-26s %10.*f %10.*f %10.*f\n", name, decimals, s.min, decimals, s.median, decimals,
           s.max);
}

/* --prefill: a warm-up, then runs prompts of p tokens, their tokens/s in
 * tps[0..runs); the table or the JSON object on stdout. Returns the exit
 * code. */
static int bench_prefill(const char *cmd, lt_llama *l, const char *model_path, const lt_model *m,
                         int64_t threads, int64_t p, int64_t runs, double *tps, bool json) {
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)p);
    if (!prompt) return lt_cli_fail(cmd, "out of memory");
    for (int64_t i = 0; i < p; i++) /* spread over the vocabulary, like a text */
        prompt[i] = (int32_t)((1 + 7919 * i) % m->cfg.vocab_size);
    double warm;
    int rc = prefill_run(l, prompt, p, &warm);
    if (!json && !rc)
        fprintf(stderr, "looptune bench: %s, %s weights, %lld threads, %lld runs of a %lld-token "
                "prompt\n", model_path, lt_dtype_name(m->wtype), (long long)threads,
                (long long)runs, (long long)p);
    for (int64_t r = 0; r < runs && !rc; r++) {
        rc = prefill_run(l, prompt, p, &tps[r]);
        if (!json && !rc)
            fprintf(stderr, "  run %lld/%lld: prefill %.1f tokens/s\n", (long long)r + 1,
                    (long long)runs, tps[r]);
    }
    free(prompt);
    if (rc) return lt_cli_fail_status(cmd, rc, "prefill failed");
    const lt_summary s = lt_summarize(tps, (int)runs);
    if (json) {
        printf("{\"model\":");
        print_json_string(model_path);
        printf(",\"dtype\":");
        print_json_string(lt_dtype_name(m->wtype));
        printf(",\"threads\":%lld,\"prefill_tokens\":%lld,\"runs\":%lld,\"isa\":",
               (long long)threads, (long long)p, (long long)runs);
        print_json_string(lt_isa_name(lt_isa_active()));
        printf(",\"step_threads\":%d,", lt_llama_threads(l, lt_regime_of(p, false)));
        print_stat_json("prefill_tok_s", s, true);
        printf("}\n");
    } else {
        printf("%-26s %10s %10s %10s\n", "", "min", "median", "max");
        print_table_row("prefill tokens/s", 1, s);
    }
    return 0;
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

int lt_cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    const char *model_path = NULL;
    int64_t threads = 0, n_tok = 64, runs = 5, membw_mib = 256, seqs = 1, prefill = 0;
    bool json = false, compare = false, use_mmap = false, no_fuse = false;
    lt_executor executor = LT_EXEC_LOOPED;
    enum { O_MEMBW = 256, O_ISA, O_JSON, O_EXEC, O_CMP, O_MMAP, O_NFP, O_STORE, O_NOWARM,
           O_PARAM, O_PREFILL };
    lt_cli_param params[LT_CLI_MAX_PARAMS];
    int n_params = 0;
    const char *store_path = NULL;
    bool no_warm = false;
    lt_cli_kafka kafka;
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},  {"threads", required_argument, 0, 't'},
        {"tokens", required_argument, 0, 'n'}, {"runs", required_argument, 0, 'r'},
        {"seqs", required_argument, 0, 's'},
        {"membw-mib", required_argument, 0, O_MEMBW}, {"isa", required_argument, 0, O_ISA},
        {"json", no_argument, 0, O_JSON},      {"executor", required_argument, 0, O_EXEC},
        {"compare-executors", no_argument, 0, O_CMP}, {"help", no_argument, 0, 'h'},
        {"mmap", no_argument, 0, O_MMAP},
        {"no-fuse-pass", no_argument, 0, O_NFP},
        {"config-store", required_argument, 0, O_STORE},
        {"no-warm-start", no_argument, 0, O_NOWARM},
        {"param", required_argument, 0, O_PARAM},
        {"prefill", required_argument, 0, O_PREFILL},
        LT_CLI_KAFKA_OPTIONS,
        {0, 0, 0, 0}};
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":m:t:n:r:s:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int k = lt_cli_kafka_option(cmd, c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) BAIL_QUIET();
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case 'm': model_path = optarg; break;
        case 't':
            if (!lt_cli_parse_i64(optarg, 1, 64, &threads))
                BAIL("bad --threads '%s': expected 1..64", optarg);
            break;
        case 'n':
            if (!lt_cli_parse_i64(optarg, 1, 1 << 20, &n_tok))
                BAIL("bad --tokens '%s': expected a positive number", optarg);
            break;
        case 'r':
            if (!lt_cli_parse_i64(optarg, 1, 1000, &runs))
                BAIL("bad --runs '%s': expected 1..1000", optarg);
            break;
        case 's':
            if (!lt_cli_parse_i64(optarg, 1, LT_BENCH_MAX_SEQS, &seqs))
                BAIL("bad --seqs '%s': expected 1..%d", optarg, LT_BENCH_MAX_SEQS);
            break;
        case O_PREFILL:
            if (!lt_cli_parse_i64(optarg, 1, 1 << 20, &prefill))
                BAIL("bad --prefill '%s': expected a positive number", optarg);
            break;
        case O_MEMBW:
            if (!lt_cli_parse_i64(optarg, 1, 1 << 16, &membw_mib))
                BAIL("bad --membw-mib '%s': expected 1..65536", optarg);
            break;
        case O_ISA:
            if (lt_isa_select(optarg)) BAIL("--isa: %s", lt_errmsg());
            break;
        case O_EXEC:
            if (lt_executor_parse(optarg, &executor)) BAIL("%s", lt_errmsg());
            break;
        case O_CMP: compare = true; break;
        case O_MMAP: use_mmap = true; break;
        case O_NFP: no_fuse = true; break;
        case O_STORE: store_path = optarg; break;
        case O_NOWARM: no_warm = true; break;
        case O_PARAM:
            if (n_params == LT_CLI_MAX_PARAMS) BAIL("more than %d --param", LT_CLI_MAX_PARAMS);
            if (lt_cli_param_parse(cmd, optarg, &params[n_params])) BAIL_QUIET();
            n_params++;
            break;
        case O_JSON: json = true; break;
        case 'h':
            lt_cli_kafka_help(bench_help, 23, true, bench_help_end);
            lt_cli_kafka_free(&kafka);
            return 0;
        default:
            lt_cli_kafka_free(&kafka);
            return lt_cli_bad_option(cmd, c, argv[optind - 1]);
        }
    }
    if (optind < argc) BAIL("unexpected argument '%s'", argv[optind]);
    if (!model_path) BAIL("no model: give -m MODEL (see looptune bench --help)");
    if (!lt_cli_store_is_kafka(store_path) &&
        lt_cli_kafka_refuse(cmd, &kafka, "--config-store kafka"))
        BAIL_QUIET();
    if (!threads) threads = lt_cpu()->logical_cpus < 2 ? 1 : 2;
    if (prefill && (compare || seqs > 1))
        BAIL("--prefill measures one prompt: not with --compare-executors or --seqs");

    int rc, exit_code = 1;
    lt_model *m = NULL;
    lt_pool *pool = NULL;
    const int n_exec = compare ? 2 : 1;
    exec_samples ex[2] = {{.e = compare ? LT_EXEC_DISPATCH : executor}, {.e = LT_EXEC_LOOPED}};
    double *v = calloc((size_t)runs * (2 + N_SERIES * 2), sizeof *v);
    if (!v) BAIL("out of memory");
    double *rd = v, *tr = v + runs;
    for (int e = 0; e < 2; e++) {
        double *base = v + runs * (2 + N_SERIES * e);
        ex[e].tps = base;
        ex[e].gbs = base + runs;
        ex[e].frac = base + 2 * runs;
        ex[e].share = base + 3 * runs;
        ex[e].points = base + 4 * runs;
        ex[e].step_ms = calloc((size_t)(runs * n_tok), sizeof(double));
        if (!ex[e].step_ms) {
            free(v), free(ex[0].step_ms);
            BAIL("out of memory");
        }
    }

    lt_cli_load_stats ls;
    if ((rc = lt_cli_load_model(cmd, model_path, NULL, use_mmap, &m, &ls))) goto done;
    if (lt_model_page_note(m))
        fprintf(stderr, "looptune %s: note: %s\n", cmd, lt_model_page_note(m));
    if (prefill > m->cfg.seq_len) {
        lt_cli_fail(cmd, "--prefill %lld exceeds the context length %lld", (long long)prefill,
                    (long long)m->cfg.seq_len);
        goto done;
    }
    if (!prefill && n_tok + 1 > m->cfg.seq_len) {
        lt_cli_fail(cmd, "--tokens %lld exceeds the context length %lld", (long long)n_tok,
                    (long long)m->cfg.seq_len);
        goto done;
    }
    if ((rc = lt_pool_init(&pool, (int)threads))) {
        lt_cli_fail_status(cmd, rc, "cannot start threads");
        goto done;
    }
    for (int e = 0; e < n_exec; e++) {
        lt_llama_opts lo = {.ctx_len = prefill ? prefill : n_tok + 1, .executor = (int)ex[e].e,
                            .no_fuse_pass = no_fuse, .n_slots = seqs,
                            .max_batch = prefill};
        if ((rc = lt_llama_init(&ex[e].l, m, pool, &lo))) {
            lt_cli_fail_status(cmd, rc, "cannot build the program");
            goto done;
        }
        if (lt_cli_warm_start(cmd, ex[e].l, store_path, &kafka, no_warm) ||
            lt_cli_param_apply(cmd, ex[e].l, params, n_params))
            goto done;
        /* wait times are read with two clock reads per synchronisation */
        lt_llama_set_timing(ex[e].l, true);
    }
    if (prefill) {
        exit_code = bench_prefill(cmd, ex[0].l, model_path, m, threads, prefill, runs,
                                  ex[0].tps, json);
        goto done;
    }
    /* bytes read per decoded token: all weights (once per step: shared by
     * the step's seqs tokens), plus the KV cache rows attention reads,
     * averaged over the positions of a run */
    const lt_llama_config *cf = &m->cfg;
    double kv_row = (double)(cf->n_kv_heads * (cf->dim / cf->n_heads)) * sizeof(float);
    double kv_avg = 2.0 * (double)cf->n_layers * kv_row * ((double)n_tok / 2.0 + 1.0);
    double bytes_tok = (double)lt_model_weight_bytes_per_token(m) / (double)seqs + kv_avg;

    for (int e = 0; e < n_exec; e++) { /* warm-up */
        double warm;
        lt_llama_sync sy;
        if ((rc = decode_run(ex[e].l, n_tok, seqs, &warm, NULL, &sy))) {
            lt_cli_fail_status(cmd, rc, "decode failed");
            goto done;
        }
    }
    if (!json)
        fprintf(stderr, "looptune bench: %s, %s weights, %lld threads, %lld runs of %lld tokens"
                "%s%.0lld%s\n", model_path, lt_dtype_name(m->wtype), (long long)threads,
                (long long)runs, (long long)n_tok, seqs > 1 ? " x " : "",
                seqs > 1 ? (long long)seqs : 0ll, seqs > 1 ? " sequences" : "");
    for (int64_t r = 0; r < runs; r++) {
        /* alternate: each executor, then the bandwidth, so all see the same machine */
        for (int e = 0; e < n_exec; e++) {
            lt_llama_sync sy;
            if ((rc = decode_run(ex[e].l, n_tok, seqs, &ex[e].tps[r], ex[e].step_ms + r * n_tok,
                                 &sy))) {
                lt_cli_fail_status(cmd, rc, "decode failed");
                goto done;
            }
            ex[e].gbs[r] = ex[e].tps[r] * bytes_tok / 1e9;
            ex[e].share[r] = sy.busy_ns ? (double)sy.wait_ns / (double)sy.busy_ns : 0;
            const lt_regime rg = lt_regime_of(seqs, true); /* one token a sequence */
            ex[e].points[r] = sy.steps ? (double)sy.sync_points / (double)sy.steps /
                                             (double)lt_llama_threads(ex[e].l, rg)
                                       : 0;
        }
        lt_membw bw;
        if ((rc = lt_membw_measure(pool, (size_t)membw_mib << 20, 1, &bw))) {
            lt_cli_fail_status(cmd, rc, "bandwidth measurement failed");
            goto done;
        }
        rd[r] = bw.read_gb_s;
        tr[r] = bw.triad_gb_s;
        for (int e = 0; e < n_exec; e++) ex[e].frac[r] = ex[e].gbs[r] / bw.read_gb_s;
        if (!json) {
            fprintf(stderr, "  run %lld/%lld:", (long long)r + 1, (long long)runs);
            for (int e = 0; e < n_exec; e++)
                fprintf(stderr, " %s %.1f tokens/s (%.1f GB/s);", lt_executor_name(ex[e].e),
                        ex[e].tps[r], ex[e].gbs[r]);
            fprintf(stderr, " read-only %.1f GB/s\n", rd[r]);
        }
    }
    const int64_t n_steps = runs * n_tok;
    double p50[2], p99[2];
    for (int e = 0; e < n_exec; e++) {
        p50[e] = quantile(ex[e].step_ms, n_steps, 0.5);
        p99[e] = quantile(ex[e].step_ms, n_steps, 0.99);
    }
    double ratio[1000];
    if (compare)
        for (int64_t r = 0; r < runs; r++) ratio[r] = ex[1].tps[r] / ex[0].tps[r];
    lt_summary s_r = lt_summarize(rd, (int)runs), s_tr = lt_summarize(tr, (int)runs);
    lt_summary s_ratio = compare ? lt_summarize(ratio, (int)runs) : (lt_summary){0, 0, 0};
    if (json) {
        printf("{\"model\":");
        print_json_string(model_path);
        printf(",\"dtype\":");
        print_json_string(lt_dtype_name(m->wtype));
        printf(",\"threads\":%lld,\"tokens\":%lld,\"seqs\":%lld,\"runs\":%lld,\"isa\":",
               (long long)threads, (long long)n_tok, (long long)seqs, (long long)runs);
        print_json_string(lt_isa_name(lt_isa_active()));
        /* the threads its steps ran on: the regime's (decode, or batch with --seqs) */
        printf(",\"step_threads\":%d", lt_llama_threads(ex[0].l, lt_regime_of(seqs, true)));
        printf(",\"bytes_per_token\":%.0f,", bytes_tok);
        print_stat_json("read_gb_s", s_r, false);
        print_stat_json("triad_gb_s", s_tr, false);
        if (compare) print_stat_json("speedup_looped_over_dispatch", s_ratio, false);
        for (int e = 0; e < n_exec; e++) {
            /* a single executor's figures sit at the top level; compared ones under their names */
            if (!compare) printf("\"executor\":");
            print_json_string(lt_executor_name(ex[e].e));
            printf(compare ? ":{" : ",");
            print_stat_json("tok_s", lt_summarize(ex[e].tps, (int)runs), false);
            print_stat_json("gb_s", lt_summarize(ex[e].gbs, (int)runs), false);
            print_stat_json("bw_fraction", lt_summarize(ex[e].frac, (int)runs), false);
            print_stat_json("sync_share", lt_summarize(ex[e].share, (int)runs), false);
            print_stat_json("sync_points_per_token", lt_summarize(ex[e].points, (int)runs), false);
            printf("\"step_ms\":{\"p50\":%.6g,\"p99\":%.6g}", p50[e], p99[e]);
            if (compare) printf("}%s", e + 1 < n_exec ? "," : "");
        }
        printf("}\n");
    } else {
        printf("%-26s %10s %10s %10s\n", "", "min", "median", "max");
        for (int e = 0; e < n_exec; e++) {
            char name[64];
            const char *en = lt_executor_name(ex[e].e);
            snprintf(name, sizeof name, "%s tokens/s", en);
            print_table_row(name, 1, lt_summarize(ex[e].tps, (int)runs));
            snprintf(name, sizeof name, "%s GB/s", en);
            print_table_row(name, 2, lt_summarize(ex[e].gbs, (int)runs));
            snprintf(name, sizeof name, "%s of read-only", en);
            print_table_row(name, 3, lt_summarize(ex[e].frac, (int)runs));
            snprintf(name, sizeof name, "%s sync share", en);
            print_table_row(name, 4, lt_summarize(ex[e].share, (int)runs));
            snprintf(name, sizeof name, "%s sync points/tok", en);
            print_table_row(name, 1, lt_summarize(ex[e].points, (int)runs));
            snprintf(name, sizeof name, "%s ms per step", en);
            printf("%-26s p50 %.3f, p99 %.3f (of %lld steps)\n", name, p50[e], p99[e],
                   (long long)n_steps);
        }
        print_table_row("read-only GB/s", 2, s_r);
        print_table_row("STREAM triad GB/s", 2, s_tr);
        if (compare) print_table_row("looped / dispatch", 3, s_ratio);
        printf("(%.2f MB read per token: weights + average KV cache; sync share = time threads\n"
               " wait at barriers or dependencies / (decode time x threads))\n",
               bytes_tok / 1e6);
    }
    exit_code = 0;
done:
    free(v);
    lt_cli_kafka_free(&kafka);
    for (int e = 0; e < 2; e++) lt_llama_free(ex[e].l), free(ex[e].step_ms);
    lt_pool_free(pool);
    lt_model_close(m);
    return exit_code;
}
