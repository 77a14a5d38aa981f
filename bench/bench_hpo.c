/* The hyperparameter samplers: simple regret (best value found minus the
 * known minimum) of random search, TPE and GP-BO on Branin (50 trials) and
 * Hartmann-6 (100 trials), min/quartiles/max over seeds (seeds 1000 + 7919 i)
 * and the i of the seeds whose regret stays above 0.05; then the time of one
 * proposal with n complete trials (n = 100, 250, 500) and one running, the
 * n trials from the quasi-random start so that the timed proposal is the
 * first model-based one (a hyperparameter fit included, the most one
 * costs), min/median/max over repeats.
 *
 * usage: bench_hpo [--seeds N] [--repeats R] [--problem NAME] [--sampler S]
 *                  [--no-timing] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/hpo.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted x[n], linear between order statistics. */
static double quantile(const double *x, int n, double q) {
    double pos = q * (n - 1);
    int i = (int)pos;
    return i + 1 < n ? x[i] + (pos - i) * (x[i + 1] - x[i]) : x[n - 1];
}

static const lt_hpo_sampler_kind kinds[3] = {LT_HPO_SAMPLER_RANDOM, LT_HPO_SAMPLER_TPE,
                                             LT_HPO_SAMPLER_GP};

/* One sequential study; its regret. n_startup 0: the sampler's default. */
static double regret(const lt_hpo_objective *obj, const lt_hpo_space *s, lt_hpo_sampler_kind k,
                     uint64_t seed, int budget) {
    lt_hpo_study_opts o;
    lt_hpo_study_opts_default(&o);
    o.sampler = k;
    o.seed = seed;
    lt_hpo_study *st;
    if (lt_hpo_study_init(&st, s, &o)) return NAN;
    double v[8], best = NAN;
    for (int t = 0; t < budget; t++) {
        int id;
        if (lt_hpo_study_ask(st, &id, v)) break;
        lt_hpo_study_tell(st, id, LT_HPO_COMPLETE, obj->eval(s, v), NULL);
    }
    lt_hpo_study_best(st, &best, NULL);
    lt_hpo_study_free(st);
    return best - obj->optimum;
}

/* Seconds of one proposal after n quasi-random complete trials of
 * Hartmann-6, with one trial running. */
static double proposal_s(const lt_hpo_objective *obj, const lt_hpo_space *s, lt_hpo_sampler_kind k,
                         int n, uint64_t seed) {
    lt_hpo_study_opts o;
    lt_hpo_study_opts_default(&o);
    o.sampler = k;
    o.seed = seed;
    o.n_startup = n;
    lt_hpo_study *st;
    if (lt_hpo_study_init(&st, s, &o)) return NAN;
    double v[8], t0, t1;
    int id;
    for (int t = 0; t < n; t++) {
        lt_hpo_study_ask(st, &id, v);
        lt_hpo_study_tell(st, id, LT_HPO_COMPLETE, obj->eval(s, v), NULL);
    }
    lt_hpo_study_ask(st, &id, v);
    lt_hpo_study_ask_time(st, &t0, NULL);
    lt_hpo_study_ask(st, &id, v);
    lt_hpo_study_ask_time(st, &t1, NULL);
    lt_hpo_study_free(st);
    return t1 - t0;
}

int main(int argc, char **argv) {
    int seeds = 11, repeats = 5;
    const char *only_problem = NULL, *only_sampler = NULL;
    bool timing = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc) seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--problem") && i + 1 < argc) only_problem = argv[++i];
        else if (!strcmp(argv[i], "--sampler") && i + 1 < argc) only_sampler = argv[++i];
        else if (!strcmp(argv[i], "--no-timing")) timing = false;
        else {
            fprintf(stderr,
                    "usage: %s [--seeds N] [--repeats R] [--problem NAME] [--sampler S] "
                    "[--no-timing]\n",
                    argv[0]);
            return 2;
        }
    }
    if (seeds < 1 || seeds > 1000 || repeats < 1 || repeats > 100) {
        fprintf(stderr, "bench_hpo: --seeds 1..1000, --repeats 1..100\n");
        return 2;
    }
    char load[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(load, sizeof load, f)) load[0] = 0;
        fclose(f);
    }
    char host[512];
    lt_host_fingerprint(host, sizeof host);
    printf("host %s\nloadavg %s", host, load);
    static const struct {
        const char *name;
        int budget;
    } problems[2] = {{"branin", 50}, {"hartmann6", 100}};
    double *r = malloc((size_t)(seeds > repeats ? seeds : repeats) * sizeof *r);
    if (!r) return 1;
    printf("\nsimple regret over %d seeds (min / q1 / median / q3 / max; seeds above 0.05, "
           "Hartmann-6's local minima)\n", seeds);
    for (int p = 0; p < 2; p++) {
        if (only_problem && strcmp(only_problem, problems[p].name)) continue;
        const lt_hpo_objective *obj = lt_hpo_objective_find(problems[p].name);
        lt_hpo_space *s;
        if (lt_hpo_space_parse(obj->space_json, obj->name, &s)) return 1;
        for (int k = 0; k < 3; k++) {
            if (only_sampler && strcmp(only_sampler, lt_hpo_sampler_name(kinds[k]))) continue;
            int stuck = 0;
            char which[4096] = "";
            size_t wl = 0;
            for (int i = 0; i < seeds; i++) {
                r[i] = regret(obj, s, kinds[k], 1000 + (uint64_t)i * 7919, problems[p].budget);
                if (r[i] > 0.05 && wl + 8 < sizeof which)
                    wl += (size_t)snprintf(which + wl, sizeof which - wl, " %d", i);
                stuck += r[i] > 0.05;
            }
            qsort(r, (size_t)seeds, sizeof *r, cmp_double);
            printf("  %-9s %3d trials  %-6s %.3g / %.3g / %.3g / %.3g / %.3g; %d above 0.05 "
                   "(seeds i:%s)\n",
                   obj->name, problems[p].budget, lt_hpo_sampler_name(kinds[k]), r[0],
                   quantile(r, seeds, 0.25), quantile(r, seeds, 0.5), quantile(r, seeds, 0.75),
                   r[seeds - 1], stuck, which);
            fflush(stdout);
        }
        lt_hpo_space_free(s);
    }
    if (!timing) {
        free(r);
        return 0;
    }
    printf("\none proposal with n complete trials and one running, Hartmann-6, %d repeats "
           "(seconds, min / median / max)\n", repeats);
    const lt_hpo_objective *h6 = lt_hpo_objective_find("hartmann6");
    lt_hpo_space *s;
    if (lt_hpo_space_parse(h6->space_json, h6->name, &s)) return 1;
    static const int ns[3] = {100, 250, 500};
    for (int k = 1; k < 3; k++)
        for (int j = 0; j < 3; j++) {
            if (only_sampler && strcmp(only_sampler, lt_hpo_sampler_name(kinds[k]))) continue;
            for (int i = 0; i < repeats; i++) r[i] = proposal_s(h6, s, kinds[k], ns[j], 1 + i);
            lt_summary m = lt_summarize(r, repeats);
            printf("  %-6s n = %3d  %.3g / %.3g / %.3g\n", lt_hpo_sampler_name(kinds[k]), ns[j],
                   m.min, m.median, m.max);
            fflush(stdout);
        }
    lt_hpo_space_free(s);
    free(r);
    return 0;
}
