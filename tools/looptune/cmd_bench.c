/* looptune bench: decode tokens/s with the machine's memory bandwidth,
 * measured in the same run, as the ceiling. Runs alternate between a decode
 * sample and a bandwidth sample so both see the same machine conditions. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "looptune/model.h"

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
    "      --membw-mib M    bandwidth array size in MiB (default 256)\n"
    "      --isa ISA        force kernels to portable, avx2 or avx512\n"
    "      --json           one JSON object on stdout instead of the table\n"
    "  -h, --help           this help\n";

typedef struct {
    double min, median, max;
} stat3;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static stat3 stats_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    stat3 s = {v[0], n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[n - 1]};
    return s;
}

/* One decode run: token 1 at position 0, then n greedy tokens; returns tokens/s. */
static int decode_run(lt_llama *l, int64_t n, double *tok_s) {
    const int64_t vocab = lt_llama_model(l)->cfg.vocab_size;
    int32_t tok = 1 % (int32_t)vocab;
    int rc = lt_llama_eval(l, &tok, 1, 0);
    if (rc) return rc;
    double t0 = lt_now_s();
    for (int64_t i = 0; i < n; i++) {
        const float *lg = lt_llama_logits(l, NULL);
        int32_t best = 0;
        for (int64_t j = 1; j < vocab; j++)
            if (lg[j] > lg[best]) best = (int32_t)j;
        tok = best;
        if ((rc = lt_llama_eval(l, &tok, 1, i + 1))) return rc;
    }
    *tok_s = (double)n / (lt_now_s() - t0);
    return LT_OK;
}

static void print_stat_json(const char *name, stat3 s, bool last) {
    printf("\"%s\":{\"min\":%.6g,\"median\":%.6g,\"max\":%.6g}%s", name, s.min, s.median, s.max,
           last ? "" : ",");
}

int lt_cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    const char *model_path = NULL;
    int64_t threads = 0, n_tok = 64, runs = 5, membw_mib = 256;
    bool json = false;
    enum { O_MEMBW = 256, O_ISA, O_JSON };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},  {"threads", required_argument, 0, 't'},
        {"tokens", required_argument, 0, 'n'}, {"runs", required_argument, 0, 'r'},
        {"membw-mib", required_argument, 0, O_MEMBW}, {"isa", required_argument, 0, O_ISA},
        {"json", no_argument, 0, O_JSON},      {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":m:t:n:r:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 't':
            if (!lt_cli_parse_i64(optarg, 1, 64, &threads))
                return lt_cli_fail(cmd, "bad --threads '%s': expected 1..64", optarg);
            break;
        case 'n':
            if (!lt_cli_parse_i64(optarg, 1, 1 << 20, &n_tok))
                return lt_cli_fail(cmd, "bad --tokens '%s': expected a positive number", optarg);
            break;
        case 'r':
            if (!lt_cli_parse_i64(optarg, 1, 1000, &runs))
                return lt_cli_fail(cmd, "bad --runs '%s': expected 1..1000", optarg);
            break;
        case O_MEMBW:
            if (!lt_cli_parse_i64(optarg, 1, 1 << 16, &membw_mib))
                return lt_cli_fail(cmd, "bad --membw-mib '%s': expected 1..65536", optarg);
            break;
        case O_ISA: {
            lt_isa isa;
            if (lt_isa_parse(optarg, &isa)) return lt_cli_fail(cmd, "%s", lt_errmsg());
            lt_isa_force(isa);
            break;
        }
        case O_JSON: json = true; break;
        case 'h': fputs(bench_help, stdout); return 0;
        default: return lt_cli_bad_option(cmd, c, argv[optind - 1]);
        }
    }
    if (optind < argc) return lt_cli_fail(cmd, "unexpected argument '%s'", argv[optind]);
    if (!model_path) return lt_cli_fail(cmd, "no model: give -m MODEL (see looptune bench --help)");
    if (!threads) threads = lt_cpu()->logical_cpus < 2 ? 1 : 2;

    int rc, exit_code = 1;
    lt_model *m = NULL;
    lt_pool *pool = NULL;
    lt_llama *l = NULL;
    double *v = calloc((size_t)runs * 5, sizeof *v);
    if (!v) return lt_cli_fail(cmd, "out of memory");
    double *tps = v, *gbs = v + runs, *rd = v + 2 * runs, *tr = v + 3 * runs, *frac = v + 4 * runs;

    if ((rc = lt_model_open(&m, model_path, NULL))) {
        lt_cli_fail_status(cmd, rc, "cannot load model");
        goto done;
    }
    if (n_tok + 1 > m->cfg.seq_len) {
        lt_cli_fail(cmd, "--tokens %lld exceeds the context length %lld", (long long)n_tok,
                    (long long)m->cfg.seq_len);
        goto done;
    }
    if ((rc = lt_pool_init(&pool, (int)threads))) {
        lt_cli_fail_status(cmd, rc, "cannot start threads");
        goto done;
    }
    lt_llama_opts lo = {.ctx_len = n_tok + 1};
    if ((rc = lt_llama_init(&l, m, pool, &lo))) {
        lt_cli_fail_status(cmd, rc, "cannot build the program");
        goto done;
    }
    /* bytes read per decoded token: all weights, plus the KV cache rows
     * attention reads, averaged over the positions of a run */
    const lt_llama_config *cf = &m->cfg;
    double kv_row = (double)(cf->n_kv_heads * (cf->dim / cf->n_heads)) * sizeof(float);
    double kv_avg = 2.0 * (double)cf->n_layers * kv_row * ((double)n_tok / 2.0 + 1.0);
    double bytes_tok = (double)lt_model_weight_bytes_per_token(m) + kv_avg;

    double warm;
    if ((rc = decode_run(l, n_tok, &warm))) {
        lt_cli_fail_status(cmd, rc, "decode failed");
        goto done;
    }
    if (!json)
        fprintf(stderr, "looptune bench: %s, %s weights, %lld threads, %lld runs of %lld tokens\n",
                model_path, lt_dtype_name(m->wtype), (long long)threads, (long long)runs,
                (long long)n_tok);
    for (int64_t r = 0; r < runs; r++) {
        lt_membw bw;
        if ((rc = decode_run(l, n_tok, &tps[r])) ||
            (rc = lt_membw_measure(pool, (size_t)membw_mib << 20, 1, &bw))) {
            lt_cli_fail_status(cmd, rc, "benchmark failed");
            goto done;
        }
        gbs[r] = tps[r] * bytes_tok / 1e9;
        rd[r] = bw.read_gb_s;
        tr[r] = bw.triad_gb_s;
        frac[r] = gbs[r] / bw.read_gb_s;
        if (!json)
            fprintf(stderr, "  run %lld/%lld: %.1f tokens/s, %.1f GB/s, read-only %.1f GB/s\n",
                    (long long)r + 1, (long long)runs, tps[r], gbs[r], rd[r]);
    }
    stat3 s_t = stats_of(tps, (int)runs), s_g = stats_of(gbs, (int)runs), s_r = stats_of(rd, (int)runs),
          s_tr = stats_of(tr, (int)runs), s_f = stats_of(frac, (int)runs);
    if (json) {
        printf("{\"model\":\"%s\",\"dtype\":\"%s\",\"threads\":%lld,\"tokens\":%lld,\"runs\":%lld,"
               "\"isa\":\"%s\",\"bytes_per_token\":%.0f,",
               model_path, lt_dtype_name(m->wtype), (long long)threads, (long long)n_tok,
               (long long)runs, lt_isa_name(lt_isa_active()), bytes_tok);
        print_stat_json("tok_s", s_t, false);
        print_stat_json("gb_s", s_g, false);
        print_stat_json("read_gb_s", s_r, false);
        print_stat_json("triad_gb_s", s_tr, false);
        print_stat_json("bw_fraction", s_f, true);
        printf("}\n");
    } else {
        printf("%-22s %10s %10s %10s\n", "", "min", "median", "max");
        printf("%-22s %10.1f %10.1f %10.1f\n", "decode tokens/s", s_t.min, s_t.median, s_t.max);
        printf("%-22s %10.2f %10.2f %10.2f\n", "achieved GB/s", s_g.min, s_g.median, s_g.max);
        printf("%-22s %10.2f %10.2f %10.2f\n", "read-only GB/s", s_r.min, s_r.median, s_r.max);
        printf("%-22s %10.2f %10.2f %10.2f\n", "STREAM triad GB/s", s_tr.min, s_tr.median, s_tr.max);
        printf("%-22s %10.3f %10.3f %10.3f\n", "fraction of read-only", s_f.min, s_f.median, s_f.max);
        printf("(%.2f MB read per token: weights + average KV cache)\n", bytes_tok / 1e6);
    }
    exit_code = 0;
done:
    free(v);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return exit_code;
}
