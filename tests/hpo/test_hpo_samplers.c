/* The samplers against known optima: on Branin (50 trials) and Hartmann-6
 * (100 trials), over the same 5 seeds, the median simple regret (best value
 * found minus the global minimum) of GP-BO and of TPE lies below a bound
 * that the median of random search (computed here, same seeds and budget)
 * lies above. The objectives themselves are checked at their published
 * minimisers first. Also: parallel proposals (several trials running at
 * once) never repeat a running point, in continuous and small discrete
 * spaces and under a maximising study; and the time of a proposal is
 * measured (printed, never asserted) at 100 and 500 trials. */
#include <math.h>

#include "looptune/hpo.h"
#include "test.h"

#define SEEDS 5

/* The simple regret of one sequential study of budget trials. */
static double run_study(const lt_hpo_objective *obj, lt_hpo_sampler_kind k, uint64_t seed,
                        int budget, double *ask_max_s) {
    lt_hpo_space *s = NULL;
    if (lt_hpo_space_parse(obj->space_json, obj->name, &s)) return NAN;
    lt_hpo_study_opts o;
    lt_hpo_study_opts_default(&o);
    o.sampler = k;
    o.seed = seed;
    lt_hpo_study *st = NULL;
    double v[8], best = NAN;
    if (lt_hpo_study_init(&st, s, &o) == LT_OK) {
        for (int t = 0; t < budget; t++) {
            int id;
            if (lt_hpo_study_ask(st, &id, v)) break;
            lt_hpo_study_tell(st, id, LT_HPO_COMPLETE, obj->eval(s, v), NULL);
        }
        lt_hpo_study_best(st, &best, NULL);
        if (ask_max_s) lt_hpo_study_ask_time(st, NULL, ask_max_s);
    }
    lt_hpo_study_free(st);
    lt_hpo_space_free(s);
    return best - obj->optimum;
}

static void test_objectives(void) {
    const lt_hpo_objective *b = lt_hpo_objective_find("branin");
    const lt_hpo_objective *h = lt_hpo_objective_find("hartmann6");
    ASSERT_TRUE(b && h && !lt_hpo_objective_find("nope"));
    if (!b || !h) return;
    lt_hpo_space *s = NULL;
    ASSERT_EQ(lt_hpo_space_parse(b->space_json, "branin", &s), LT_OK);
    /* the three minimisers, a corner */
    double m[3][2] = {{-3.14159265358979, 12.275}, {3.14159265358979, 2.275}, {9.42477796076938, 2.475}};
    for (int i = 0; i < 3; i++) ASSERT_NEAR(b->eval(s, m[i]), 0.397887, 1e-6);
    double c[2] = {-5, 0};
    ASSERT_NEAR(b->eval(s, c), 308.129096, 1e-5);
    lt_hpo_space_free(s);
    ASSERT_EQ(lt_hpo_space_parse(h->space_json, "hartmann6", &s), LT_OK);
    ASSERT_EQ(lt_hpo_space_size(s), 6);
    double x[6] = {0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573};
    ASSERT_NEAR(h->eval(s, x), -3.32237, 1e-5);
    double z[6] = {0};
    ASSERT_TRUE(h->eval(s, z) > -0.1);
    lt_hpo_space_free(s);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median5(double *r) {
    qsort(r, SEEDS, sizeof *r, cmp);
    return r[SEEDS / 2];
}

/* Median regrets of the three samplers on obj; the bound each model-based
 * sampler must beat where random does not. */
static void compare(const char *name, int budget, double bound_gp, double bound_tpe) {
    const lt_hpo_objective *obj = lt_hpo_objective_find(name);
    if (!obj) return;
    static const lt_hpo_sampler_kind kinds[3] = {LT_HPO_SAMPLER_RANDOM, LT_HPO_SAMPLER_TPE,
                                                 LT_HPO_SAMPLER_GP};
    double med[3];
    for (int k = 0; k < 3; k++) {
        double r[SEEDS], tmax = 0;
        for (int i = 0; i < SEEDS; i++) {
            double t = 0;
            r[i] = run_study(obj, kinds[k], 1000 + (uint64_t)i * 7919, budget, &t);
            tmax = fmax(tmax, t);
        }
        med[k] = median5(r);
        printf("%-9s budget %3d %-6s regret median %.5f (min %.5f max %.5f), longest ask %.3f s\n",
               name, budget, lt_hpo_sampler_name(kinds[k]), med[k], r[0], r[SEEDS - 1], tmax);
    }
    ASSERT_TRUE(med[0] > bound_gp);
    ASSERT_TRUE(med[0] > bound_tpe);
    ASSERT_TRUE(med[2] < bound_gp);
    ASSERT_TRUE(med[1] < bound_tpe);
    if (!(med[2] < bound_gp && med[1] < bound_tpe && med[0] > bound_gp && med[0] > bound_tpe))
        printf("%s: bounds gp %.4f tpe %.4f\n", name, bound_gp, bound_tpe);
}

/* P trials running at all times (ask P, then tell the oldest and ask one
 * more): no proposal equals a running point. */
static void parallel_distinct(const char *json, lt_hpo_sampler_kind k, int P, int budget,
                              bool maximize) {
    lt_hpo_space *s = NULL;
    ASSERT_EQ(lt_hpo_space_parse(json, "par", &s), LT_OK);
    if (!s) return;
    int d = lt_hpo_space_size(s);
    lt_hpo_study_opts o;
    lt_hpo_study_opts_default(&o);
    o.sampler = k;
    o.seed = 3;
    o.maximize = maximize;
    lt_hpo_study *st = NULL;
    ASSERT_EQ(lt_hpo_study_init(&st, s, &o), LT_OK);
    double run[8][8];
    int ids[8], n_run = 0, repeats = 0;
    for (int t = 0; t < budget && st; t++) {
        double v[8];
        int id;
        if (lt_hpo_study_ask(st, &id, v)) break;
        for (int r = 0; r < n_run; r++) repeats += lt_hpo_config_equal(s, run[r], v);
        memcpy(run[n_run], v, sizeof v);
        ids[n_run++] = id;
        if (n_run == P) {
            double y = 0;
            for (int j = 0; j < d; j++) y += isnan(run[0][j]) ? 0 : sin(3 * run[0][j] + j);
            lt_hpo_study_tell(st, ids[0], LT_HPO_COMPLETE, y, NULL);
            memmove(run[0], run[1], sizeof run[0] * (size_t)(n_run - 1));
            memmove(ids, ids + 1, sizeof ids[0] * (size_t)(n_run - 1));
            n_run--;
        }
    }
    lt_hpo_counts c = lt_hpo_study_counts(st);
    ASSERT_EQ(c.total, budget);
    ASSERT_EQ(c.running, P - 1);
    ASSERT_EQ(repeats, 0);
    if (repeats) printf("%s with %d running: %d repeats\n", lt_hpo_sampler_name(k), P, repeats);
    lt_hpo_study_free(st);
    lt_hpo_space_free(s);
}

static void test_parallel(void) {
    const char *cont = "{\"a\": {\"type\": \"float\", \"low\": 0, \"high\": 1},"
                       " \"b\": {\"type\": \"float\", \"low\": 1e-3, \"high\": 1, \"log\": true}}";
    /* 3 x 2 + 3 x 1 = 9 points (c only when o is y), 4 running */
    const char *small = "{\"n\": {\"type\": \"int\", \"low\": 1, \"high\": 3},"
                        " \"o\": {\"type\": \"categorical\", \"choices\": [\"x\", \"y\"]},"
                        " \"c\": {\"type\": \"int\", \"low\": 0, \"high\": 1, \"when\": {\"o\": [\"y\"]}}}";
    static const lt_hpo_sampler_kind kinds[3] = {LT_HPO_SAMPLER_RANDOM, LT_HPO_SAMPLER_TPE,
                                                 LT_HPO_SAMPLER_GP};
    for (int k = 0; k < 3; k++) {
        parallel_distinct(cont, kinds[k], 6, 40, false);
        parallel_distinct(small, kinds[k], 4, 30, k == 1);
    }
}

/* The time of one proposal with n complete trials of Hartmann-6 and one
 * running: the first n trials come from the quasi-random start (n_startup
 * n), so the proposal after them is the first model-based one and fits the
 * hyperparameters too, the most a proposal costs. */
static void measure_ask(lt_hpo_sampler_kind k, int n) {
    const lt_hpo_objective *obj = lt_hpo_objective_find("hartmann6");
    lt_hpo_space *s = NULL;
    if (lt_hpo_space_parse(obj->space_json, "h6", &s)) return;
    lt_hpo_study_opts o;
    lt_hpo_study_opts_default(&o);
    o.sampler = k;
    o.n_startup = n;
    lt_hpo_study *st = NULL;
    ASSERT_EQ(lt_hpo_study_init(&st, s, &o), LT_OK);
    double v[6], t0, t1;
    int id;
    for (int t = 0; t < n && st; t++) {
        lt_hpo_study_ask(st, &id, v);
        lt_hpo_study_tell(st, id, LT_HPO_COMPLETE, obj->eval(s, v), NULL);
    }
    lt_hpo_study_ask(st, &id, v); /* running during the next ask */
    lt_hpo_study_ask_time(st, &t0, NULL);
    lt_hpo_study_ask(st, &id, v);
    lt_hpo_study_ask_time(st, &t1, NULL);
    printf("%s proposal with %d trials (and one running): %.3f s\n", lt_hpo_sampler_name(k), n,
           t1 - t0);
    lt_hpo_study_free(st);
    lt_hpo_space_free(s);
}

int main(void) {
    test_objectives();
    test_parallel();
    compare("branin", 50, 1e-3, 0.1);
    compare("hartmann6", 100, 0.25, 0.3);
    measure_ask(LT_HPO_SAMPLER_GP, 100);
    measure_ask(LT_HPO_SAMPLER_GP, 500);
    measure_ask(LT_HPO_SAMPLER_TPE, 500);
    return lt_test_finish();
}
