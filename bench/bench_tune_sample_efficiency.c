/* Sample efficiency of the search strategies: for every (kernel, shape) of a
 * stories110M-shaped decode program, the whole parameter space is measured
 * once (node timer, every layer's instance back to back, median of several
 * passes over the space in shuffled order), then the strategies replay that
 * table: trials until the best point found is within 5% of the exhaustive
 * optimum, model-guided against random, min/median/max over seeds. Replaying
 * recorded costs makes the comparison cheap and the same for both.
 *
 * usage: bench_tune_sample_efficiency [-m MODEL] [--seeds N] [--passes P] [--threads T]
 *                                     [--within F] [--kernel NAME]
 *   without -m, a random-weight stories110M q8_0 model is written to
 *   $TMPDIR/looptune-bench-stories110M-q8_0.gguf (once). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "looptune/model.h"
#include "looptune/program.h"
#include "looptune/tune.h"

/* Trials a strategy needs until its best observed point (by the table's
 * costs) is within `within` of the table's optimum. */
static int trials_to_reach(lt_strategy_kind kind, const lt_space *sp, const lt_tune_context *ctx,
                           const double *table, uint64_t seed, double target) {
    lt_strategy *st;
    if (lt_strategy_init(&st, kind, sp, ctx, seed)) return -1;
    int64_t size = lt_space_size(sp);
    double best = 1e300;
    int n = 0;
    while (best > target && n < size) {
        lt_params p;
        if (lt_strategy_propose(st, &p, 1) != 1) break;
        double c = table[lt_space_index(sp, &p)];
        lt_strategy_observe(st, &p, &c, 1);
        n++;
        if (c < best) best = c;
    }
    lt_strategy_free(st);
    return best <= target ? n : -1;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *only = NULL;
    int seeds = 10, passes = 3, threads = 2;
    double within = 0.05;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model_path = argv[++i];
        else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc) passes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--within") && i + 1 < argc) within = atof(argv[++i]);
        else if (!strcmp(argv[i], "--kernel") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [-m MODEL] [--seeds N] [--passes P] [--threads T] "
                            "[--within F] [--kernel NAME]\n", argv[0]);
            return 2;
        }
    }
    if (seeds < 1 || seeds > 1000 || passes < 1 || passes > 100 || threads < 1 || threads > 64) {
        fprintf(stderr, "bench: seeds 1..1000, passes 1..100, threads 1..64\n");
        return 2;
    }
    char gen_path[512];
    if (!model_path) {
        const char *tmp = getenv("TMPDIR");
        snprintf(gen_path, sizeof gen_path, "%s/looptune-bench-stories110M-q8_0.gguf",
                 tmp && *tmp ? tmp : "/tmp");
        model_path = gen_path;
        if (access(gen_path, R_OK) != 0) {
            lt_modelgen_opts go = {.dtype = LT_Q8_0, .seed = 1};
            if (lt_modelgen_preset("stories110M", &go.cfg) || lt_modelgen_write(&go, gen_path)) {
                fprintf(stderr, "bench: cannot write %s: %s\n", gen_path, lt_errmsg());
                return 1;
            }
        }
    }
    lt_model *m;
    lt_pool *pool;
    lt_llama *l;
    lt_llama_opts lo = {.executor = LT_EXEC_LOOPED};
    if (lt_model_open(&m, model_path, NULL) || lt_model_make_resident(m) ||
        lt_pool_init(&pool, threads) || lt_llama_init(&l, m, pool, &lo)) {
        fprintf(stderr, "bench: %s: %s\n", model_path, lt_errmsg());
        return 1;
    }
    int32_t tok = 1;
    lt_program *p;
    if (lt_llama_eval(l, &tok, 1, 0) || lt_llama_program(l, 1, &p)) {
        fprintf(stderr, "bench: %s\n", lt_errmsg());
        return 1;
    }
    lt_host host;
    lt_host_detect(&host);
    lt_params xp;
    lt_exec_params(lt_llama_exec(l), &xp);
    lt_step step = {.pos = 16, .n_tokens = 1, .tokens = &tok};
    printf("host %s, %d threads, %s, %d seeds, target: within %.0f%% of the exhaustive optimum\n",
           host.host_class, threads, model_path, seeds, within * 100);
    printf("%-9s %-32s %6s %10s %10s %7s | %-17s | %-17s\n", "kernel", "shape", "points",
           "best us", "default us", "spread", "model min/med/max", "random min/med/max");
    char seen[64][128];
    int n_seen = 0;
    for (int i = 0; i < lt_program_n_nodes(p) && n_seen < 64; i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        const lt_kernel *k = lt_kernel_get(ni.kernel);
        if (k->n_params == 0 || (only && strcmp(only, k->name))) continue;
        lt_tune_context ctx = {.host = host};
        lt_shape_of_call(ni.kernel, lt_program_call(p, i), &ctx.shape);
        char key[128], sig[96];
        lt_shape_format(&ctx.shape, sig, sizeof sig);
        snprintf(key, sizeof key, "%s %s", k->name, sig);
        bool dup = false;
        for (int s = 0; s < n_seen; s++) dup |= !strcmp(seen[s], key);
        if (dup) continue;
        snprintf(seen[n_seen++], sizeof seen[0], "%s", key);

        lt_space sp;
        lt_space_from_kernel(&sp, k);
        int64_t size = lt_space_size(&sp);
        lt_node_timer *t;
        if (lt_node_timer_init(&t, lt_llama_exec(l), p, i, pool, &step, xp.v[LT_XP_TILES])) {
            fprintf(stderr, "bench: %s\n", lt_errmsg());
            return 1;
        }
        /* the exhaustive table: passes over the space in shuffled order */
        double *samples = malloc((size_t)(size * passes) * sizeof *samples);
        double *table = malloc((size_t)size * sizeof *table);
        int64_t *order = malloc((size_t)size * sizeof *order);
        LT_ASSERT(samples && table && order);
        uint64_t rng = 12345;
        lt_params def;
        lt_space_default(&sp, &def);
        lt_node_timer_run(t, &def, NULL); /* warm-up */
        for (int ps = 0; ps < passes; ps++) {
            for (int64_t j = 0; j < size; j++) order[j] = j;
            for (int64_t j = size - 1; j > 0; j--) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                int64_t r = (int64_t)((rng >> 33) % (uint64_t)(j + 1));
                int64_t tmp = order[j];
                order[j] = order[r];
                order[r] = tmp;
            }
            for (int64_t j = 0; j < size; j++) {
                lt_params pt;
                lt_space_point(&sp, order[j], &pt);
                if (lt_config_check(ni.kernel, lt_program_call(p, i), &pt)) {
                    samples[order[j] * passes + ps] = 1e30; /* never best */
                    continue;
                }
                /* short kernels: repeat so a sample is not only clock resolution */
                double ns = 0;
                int reps = 0;
                do {
                    ns += lt_node_timer_run(t, &pt, NULL);
                    reps++;
                } while (ns < 50e3 && reps < 1000);
                samples[order[j] * passes + ps] = ns / reps;
            }
        }
        double best = 1e300;
        for (int64_t j = 0; j < size; j++) {
            table[j] = lt_median(samples + j * passes, passes);
            if (table[j] < best) best = table[j];
        }
        double worst = 0;
        for (int64_t j = 0; j < size; j++)
            if (table[j] < 1e29 && table[j] > worst) worst = table[j];
        double target = best * (1 + within);
        double *tm = malloc((size_t)seeds * sizeof *tm), *tr = malloc((size_t)seeds * sizeof *tr);
        LT_ASSERT(tm && tr);
        for (int s = 0; s < seeds; s++) {
            tm[s] = trials_to_reach(LT_STRAT_MODEL, &sp, &ctx, table, (uint64_t)s + 1, target);
            tr[s] = trials_to_reach(LT_STRAT_RANDOM, &sp, &ctx, table, (uint64_t)s + 1, target);
        }
        lt_summary sm = lt_summarize(tm, seeds), sr = lt_summarize(tr, seeds);
        printf("%-9s %-32s %6lld %10.2f %10.2f %6.2fx | %5.0f %5.1f %5.0f | %5.0f %5.1f %5.0f\n",
               k->name, sig, (long long)size, best / 1e3, table[lt_space_index(&sp, &def)] / 1e3,
               worst / best, sm.min, sm.median, sm.max, sr.min, sr.median, sr.max);
        fflush(stdout);
        free(tm), free(tr), free(samples), free(table), free(order);
        lt_node_timer_free(t);
    }
    printf("(trials: configurations measured until one within %.0f%% of the best; spread: "
           "slowest / fastest point)\n", within * 100);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return 0;
}
