/* The study's bookkeeping and its pruners: counts, the best trial (also
 * when maximising), misuse refused with a status; ASHA promoting the best
 * 1/eta of a rung as trials arrive (the first always) and checking every
 * rung a report crosses; the median rule against hand-computed medians. */
#include <math.h>

#include "looptune/hpo.h"
#include "test.h"

static const char *const space1 = "{\"x\": {\"type\": \"float\", \"low\": 0, \"high\": 1}}";

static lt_hpo_study *open_study(lt_hpo_space **s, lt_hpo_pruner_kind pruner, bool maximize) {
    lt_hpo_study_opts o;
    lt_hpo_study_opts_default(&o);
    o.pruner = pruner;
    o.maximize = maximize;
    o.median_startup = 3;
    lt_hpo_study *st = NULL;
    if (lt_hpo_space_parse(space1, "s", s) || lt_hpo_study_init(&st, *s, &o)) return NULL;
    return st;
}

static int ask(lt_hpo_study *st) {
    int id = -1;
    double v[1];
    ASSERT_EQ(lt_hpo_study_ask(st, &id, v), LT_OK);
    return id;
}

static void test_bookkeeping(void) {
    lt_hpo_space *s = NULL;
    lt_hpo_study *st = open_study(&s, LT_HPO_PRUNER_NONE, true);
    ASSERT_TRUE(st != NULL);
    if (!st) return;
    double best;
    ASSERT_EQ(lt_hpo_study_best(st, &best, NULL), -1);
    int a = ask(st), b = ask(st), c = ask(st), d = ask(st);
    ASSERT_EQ(a, 0);
    ASSERT_EQ(d, 3);
    ASSERT_EQ(lt_hpo_study_tell(st, a, LT_HPO_COMPLETE, 2.0, NULL), LT_OK);
    ASSERT_EQ(lt_hpo_study_tell(st, b, LT_HPO_COMPLETE, 5.0, NULL), LT_OK);
    ASSERT_EQ(lt_hpo_study_tell(st, c, LT_HPO_FAILED, 0, "exit status 3"), LT_OK);
    ASSERT_EQ(lt_hpo_study_tell(st, a, LT_HPO_COMPLETE, 1.0, NULL), LT_ESTATE);
    ASSERT_EQ(lt_hpo_study_tell(st, 99, LT_HPO_COMPLETE, 1.0, NULL), LT_EINVAL);
    ASSERT_EQ(lt_hpo_study_tell(st, d, LT_HPO_COMPLETE, NAN, NULL), LT_ERANGE);
    ASSERT_EQ(lt_hpo_study_tell(st, d, LT_HPO_RUNNING, 1, NULL), LT_EINVAL);
    bool prune;
    ASSERT_EQ(lt_hpo_study_report(st, d, 2, 1.0, &prune), LT_OK);
    ASSERT_EQ(lt_hpo_study_report(st, d, 2, 1.0, &prune), LT_EINVAL); /* steps increase */
    ASSERT_EQ(lt_hpo_study_report(st, a, 3, 1.0, &prune), LT_ESTATE);
    ASSERT_EQ(lt_hpo_study_report(st, d, 3, 7.5, &prune), LT_OK);
    ASSERT_TRUE(!prune); /* no pruner */
    ASSERT_EQ(lt_hpo_study_tell(st, d, LT_HPO_PRUNED, 0, NULL), LT_OK);
    lt_hpo_counts n = lt_hpo_study_counts(st);
    ASSERT_EQ(n.total, 4);
    ASSERT_EQ(n.complete, 2);
    ASSERT_EQ(n.failed, 1);
    ASSERT_EQ(n.pruned, 1);
    ASSERT_EQ(n.running, 0);
    ASSERT_EQ(lt_hpo_study_best(st, &best, NULL), b); /* maximising: 5 > 2 */
    ASSERT_NEAR(best, 5.0, 0);
    lt_hpo_state state;
    double value;
    const char *why;
    ASSERT_EQ(lt_hpo_study_trial(st, c, &state, &value, NULL, &why), LT_OK);
    ASSERT_EQ(state, LT_HPO_FAILED);
    ASSERT_STREQ(why, "exit status 3");
    ASSERT_EQ(lt_hpo_study_trial(st, d, &state, &value, NULL, NULL), LT_OK);
    ASSERT_EQ(state, LT_HPO_PRUNED);
    ASSERT_NEAR(value, 7.5, 0); /* the last intermediate value, as reported */
    ASSERT_EQ(lt_hpo_study_trial(st, 4, NULL, NULL, NULL, NULL), LT_EINVAL);
    lt_hpo_study_free(st);
    lt_hpo_space_free(s);
    lt_hpo_study_free(NULL);
}

/* One report; returns whether the pruner stops the trial. */
static bool rep(lt_hpo_study *st, int t, int64_t step, double v) {
    bool prune = false;
    ASSERT_EQ(lt_hpo_study_report(st, t, step, v, &prune), LT_OK);
    return prune;
}

static void test_asha(void) {
    lt_hpo_space *s = NULL;
    lt_hpo_study *st = open_study(&s, LT_HPO_PRUNER_ASHA, false); /* min 1, eta 3 */
    ASSERT_TRUE(st != NULL);
    if (!st) return;
    int t[8];
    for (int i = 0; i < 8; i++) t[i] = ask(st);
    /* rung 0 (step 1): values 5, 10, 1, 7, 3, 2 arrive in turn */
    ASSERT_TRUE(!rep(st, t[0], 1, 5));  /* alone: goes on */
    ASSERT_TRUE(rep(st, t[1], 1, 10));  /* {5,10}: keep 1 -> 5 */
    ASSERT_TRUE(!rep(st, t[2], 1, 1));  /* {1,5,10}: keep 1 -> 1 */
    ASSERT_TRUE(rep(st, t[3], 1, 7));   /* 4 values, keep 1 */
    ASSERT_TRUE(rep(st, t[4], 1, 3));   /* 5 values, keep 1: 1 */
    ASSERT_TRUE(!rep(st, t[5], 1, 2));  /* 6 values, keep 2: {1, 2} */
    /* step 2 is no rung; step 3 is rung 1 */
    ASSERT_TRUE(!rep(st, t[0], 2, 100));
    ASSERT_TRUE(!rep(st, t[0], 3, 4));  /* first at rung 1 */
    ASSERT_TRUE(rep(st, t[2], 3, 6));   /* {4, 6}: keep 1 */
    /* a report jumping from step 1 to 9 crosses rungs 3 and 9 */
    ASSERT_TRUE(!rep(st, t[5], 9, 0.5));
    ASSERT_TRUE(rep(st, t[6], 1, 50)); /* rung 0 has 7 values: keep 2 = {1, 2} */
    /* t[7] jumps straight to step 3: rung 0 (8 values, keep 2) and rung 1 */
    ASSERT_TRUE(!rep(st, t[7], 3, 0.1));
    lt_hpo_study_free(st);
    lt_hpo_space_free(s);
}

static void test_asha_maximize(void) {
    lt_hpo_space *s = NULL;
    lt_hpo_study *st = open_study(&s, LT_HPO_PRUNER_ASHA, true);
    if (!st) return;
    int a = ask(st), b = ask(st), c = ask(st);
    ASSERT_TRUE(!rep(st, a, 1, 0.5));
    ASSERT_TRUE(!rep(st, b, 1, 0.9)); /* larger is better */
    ASSERT_TRUE(rep(st, c, 1, 0.7));
    lt_hpo_study_free(st);
    lt_hpo_space_free(s);
}

static void test_median(void) {
    lt_hpo_space *s = NULL;
    lt_hpo_study *st = open_study(&s, LT_HPO_PRUNER_MEDIAN, false); /* 3 trials first */
    ASSERT_TRUE(st != NULL);
    if (!st) return;
    /* finished trials with values 1, 4, 9 at step 1 and 1, 3, 5 at step 2 */
    double at1[3] = {1, 4, 9}, at2[3] = {1, 3, 5};
    for (int i = 0; i < 2; i++) {
        int t = ask(st);
        ASSERT_TRUE(!rep(st, t, 1, at1[i])); /* fewer than 3 finished */
        ASSERT_TRUE(!rep(st, t, 2, at2[i]));
        lt_hpo_study_tell(st, t, LT_HPO_COMPLETE, at2[i], NULL);
    }
    int t = ask(st);
    ASSERT_TRUE(!rep(st, t, 1, 9)); /* 2 finished yet */
    ASSERT_TRUE(!rep(st, t, 2, 5));
    ASSERT_EQ(lt_hpo_study_tell(st, t, LT_HPO_PRUNED, 0, NULL), LT_OK); /* pruned trials count too */
    int u = ask(st), v = ask(st);
    ASSERT_TRUE(rep(st, u, 1, 4.5));  /* median of {1, 4, 9} is 4 */
    ASSERT_TRUE(!rep(st, v, 1, 4.0)); /* not worse than the median */
    ASSERT_TRUE(rep(st, v, 2, 3.5));  /* its best so far (3.5) vs median 3 of {1, 3, 5} */
    lt_hpo_study_free(st);
    lt_hpo_space_free(s);
}

static void test_names(void) {
    lt_hpo_sampler_kind k;
    lt_hpo_pruner_kind p;
    ASSERT_EQ(lt_hpo_sampler_parse("gp", &k), LT_OK);
    ASSERT_EQ(k, LT_HPO_SAMPLER_GP);
    ASSERT_EQ(lt_hpo_sampler_parse("bayes", &k), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "unknown sampler 'bayes'") != NULL);
    ASSERT_EQ(lt_hpo_pruner_parse("asha", &p), LT_OK);
    ASSERT_EQ(p, LT_HPO_PRUNER_ASHA);
    ASSERT_EQ(lt_hpo_pruner_parse("hyperband", &p), LT_EINVAL);
    ASSERT_STREQ(lt_hpo_state_name(LT_HPO_PRUNED), "pruned");
    lt_hpo_study_opts o;
    lt_hpo_study_opts_default(&o);
    o.eta = 1;
    lt_hpo_space *s = NULL;
    lt_hpo_study *st = NULL;
    ASSERT_EQ(lt_hpo_space_parse(space1, "s", &s), LT_OK);
    ASSERT_EQ(lt_hpo_study_init(&st, s, &o), LT_EINVAL);
    lt_hpo_space_free(s);
}

int main(void) {
    test_bookkeeping();
    test_asha();
    test_asha_maximize();
    test_median();
    test_names();
    return lt_test_finish();
}
