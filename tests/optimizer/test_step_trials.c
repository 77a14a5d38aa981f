/* Online trials of the whole-step tunables: a run start that lists the
 * looped executor's parameters and each regime's thread count (node "",
 * kernel "looped"/"threads", shape the step key) plus "step" windows over
 * the whole steps lead to trials of them, keyed by the step key; a thread
 * count whose tagged step windows are faster is kept (a control and a
 * Config of kernel "threads"), a slower one is rolled back; and the run's
 * bottleneck kernel still gets the first trial. The prefill steps' thread
 * count is tried with a phase per prefill step, measured by the prefill
 * steps' own windows (per prompt token), apart from the decode steps'. The simulated run follows
 * the control protocol (A B / B A phases, tagged windows, back on the
 * incumbent after the trial), through lt_optimizer_handle and the hooks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/optimizer.h"
#include "test.h"
#include "trial_sim.h"

#define KEY "llama:d288:h768:l6:q8_0:t2:decode"
#define PREFILL_KEY "llama:d288:h768:l6:q8_0:t2:prefill"
#define HOST "test-host:avx512:2c"

/* What a control can change: a kernel's parameters on a shape. */
enum { K_THREADS = 0, K_LOOPED, K_MATVEC, K_PREFILL, N_KNOBS };
static const char *const KNOB_KERNEL[N_KNOBS] = {"threads", "looped", "matvec", "threads"};
static const char *const KNOB_SHAPE[N_KNOBS] = {KEY, KEY, "q8_0:2048x768:decode", PREFILL_KEY};
#define PROMPT_TOKENS 32

typedef struct {
    lt_space space[N_KNOBS];
    bool with_matvec;  /* the run has a matvec node (the bottleneck) */
    double one_thread; /* step time with threads = 1, relative to the whole pool */
    int prefill_every;  /* a prefill step after every this many decode steps; 0: none */
    double prefill_one_thread; /* the same for a prefill step */
    uint64_t prefill_window;
    /* controls received, applied at the next step boundary */
    trial_sim_control pend[16]; /* unit: the knob */
    int n_pend;
    /* run state */
    lt_params cur[N_KNOBS], inc[N_KNOBS];
    trial_sim ts;
    double win_norm, win_mv, win_step, step_min, step_max;
    int win_steps;
    uint64_t window;
    /* what the optimizer sent */
    int trials_of[N_KNOBS], keeps_of[N_KNOBS];
    int first_trial_knob;
    bool bad_trial; /* a trial control with a wrong key or parameter list */
    int threads_configs, prefill_configs;
    char last_threads_config[160], last_prefill_config[160];
} sim;

static int knob_of(const Looptune__Control *c) {
    for (int k = 0; k < N_KNOBS; k++)
        if (!strcmp(c->kernel, KNOB_KERNEL[k]) && !strcmp(c->shape, KNOB_SHAPE[k])) return k;
    return -1;
}

static void on_control(void *user, const Looptune__Control *c) {
    sim *s = user;
    int k = knob_of(c);
    ASSERT_TRUE(k >= 0);
    if (k < 0) return;
    /* every parameter of the space, each once */
    const lt_space *sp = &s->space[k];
    lt_params p;
    memset(&p, 0, sizeof p);
    if ((int)c->n_params != sp->n_params) s->bad_trial = true;
    for (int j = 0; j < sp->n_params; j++) {
        int found = 0;
        for (size_t i = 0; i < c->n_params; i++)
            if (!strcmp(c->params[i]->name, sp->params[j].name)) {
                p.v[j] = (int32_t)c->params[i]->value;
                found++;
            }
        if (found != 1) s->bad_trial = true;
    }
    ASSERT_EQ(lt_space_validate(sp, &p), LT_OK);
    if (c->trial_pairs) {
        if (s->first_trial_knob < 0) s->first_trial_knob = k;
        s->trials_of[k]++;
        /* a prefill trial's phase is one prefill step */
        if (k == K_PREFILL) ASSERT_EQ(c->phase_tokens, 1);
    } else if (strcmp(c->candidate_id, "abort")) {
        s->keeps_of[k]++;
    }
    ASSERT_TRUE(s->n_pend < 16);
    if (s->n_pend == 16) return;
    s->pend[s->n_pend].unit = k;
    s->pend[s->n_pend].params = p;
    s->pend[s->n_pend].pairs = c->trial_pairs;
    s->pend[s->n_pend].ptok = c->phase_tokens;
    s->pend[s->n_pend].prefill = k == K_PREFILL;
    snprintf(s->pend[s->n_pend].cand, sizeof s->pend[0].cand, "%s", c->candidate_id);
    s->n_pend++;
}

static void on_config(void *user, const lt_config_entry *e) {
    sim *s = user;
    ASSERT_STREQ(e->host, HOST);
    if (strcmp(e->kernel, "threads")) return;
    const bool prefill = !strcmp(e->shape, PREFILL_KEY);
    if (!prefill) ASSERT_STREQ(e->shape, KEY);
    if (prefill) s->prefill_configs++;
    else s->threads_configs++;
    char *last = prefill ? s->last_prefill_config : s->last_threads_config;
    snprintf(last, sizeof s->last_threads_config, "%s", e->params);
}

static void feed(lt_optimizer *o, const Looptune__Envelope *env) {
    uint8_t *buf;
    size_t len;
    ASSERT_EQ(lt_envelope_encode(env, &buf, &len), LT_OK);
    lt_optimizer_handle(o, buf, len);
    free(buf);
}

/* One KernelParams of the run start: the knob's or an untunable node's. */
static void entry(Looptune__KernelParams *kp, Looptune__Param *prm, Looptune__Param **pp,
                  const char *node, const char *kernel, const char *shape, const char *cshape,
                  const lt_space *sp, const lt_params *v) {
    looptune__kernel_params__init(kp);
    kp->node = (char *)node;
    kp->kernel = (char *)kernel;
    kp->shape = (char *)shape;
    kp->config_shape = (char *)cshape;
    for (int j = 0; sp && j < sp->n_params; j++) {
        looptune__param__init(&prm[j]);
        prm[j].name = (char *)sp->params[j].name;
        prm[j].value = v->v[j];
        pp[j] = &prm[j];
    }
    kp->params = pp;
    kp->n_params = sp ? (size_t)sp->n_params : 0;
}

static void send_start(lt_optimizer *o, sim *s) {
    Looptune__RunStart rs = LOOPTUNE__RUN_START__INIT;
    Looptune__Host host = LOOPTUNE__HOST__INIT;
    host.read_gb_s = 20;
    host.peak_gflops = 200;
    rs.run_id = "run-1";
    rs.host = &host;
    rs.host_class = HOST;
    rs.threads = 2;
    Looptune__KernelParams kp[5], *kpp[5];
    Looptune__Param prm[5][LT_MAX_PARAMS], *pp[5][LT_MAX_PARAMS];
    int n = 0;
    entry(&kp[n], prm[n], pp[n], "blk.norm", "nope", "nope:f32:288", "", NULL, NULL);
    n++;
    if (s->with_matvec) {
        entry(&kp[n], prm[n], pp[n], "blk.ffn_up", "matvec", "matvec:q8_0:768x2048",
              KNOB_SHAPE[K_MATVEC], &s->space[K_MATVEC], &s->inc[K_MATVEC]);
        n++;
    }
    /* the whole-step tunables, after the nodes, as telemetry lists them */
    entry(&kp[n], prm[n], pp[n], "", "threads", KEY, KEY, &s->space[K_THREADS],
          &s->inc[K_THREADS]);
    n++;
    entry(&kp[n], prm[n], pp[n], "", "looped", KEY, KEY, &s->space[K_LOOPED], &s->inc[K_LOOPED]);
    n++;
    entry(&kp[n], prm[n], pp[n], "", "threads", PREFILL_KEY, PREFILL_KEY, &s->space[K_PREFILL],
          &s->inc[K_PREFILL]);
    n++;
    for (int i = 0; i < n; i++) kpp[i] = &kp[i];
    rs.kernels = kpp;
    rs.n_kernels = (size_t)n;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START;
    env.run_start = &rs;
    feed(o, &env);
}

static void window_record(lt_optimizer *o, sim *s, const char *kernel, const char *node,
                          const char *shape, double total, double min, double max) {
    Looptune__KernelWindow w = LOOPTUNE__KERNEL_WINDOW__INIT;
    w.run_id = "run-1";
    w.window = s->window;
    w.kernel = (char *)kernel;
    w.node = (char *)node;
    w.shape = (char *)shape;
    w.count = w.steps = (uint64_t)s->win_steps;
    w.total_ns = w.critical_ns = (uint64_t)total;
    w.median_ns = (uint64_t)(total / s->win_steps);
    w.min_ns = (uint64_t)min;
    w.max_ns = w.p90_ns = (uint64_t)max;
    w.bytes = strcmp(kernel, "step") ? 1e6 : 0;
    w.flops = strcmp(kernel, "step") ? 2e6 : 0;
    if (s->ts.trial) {
        w.candidate_id = s->ts.cand_id;
        w.on_candidate = trial_sim_on_cand(s->ts.phase);
        w.pair = (uint32_t)(s->ts.phase / 2);
    }
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW;
    env.kernel_window = &w;
    feed(o, &env);
}

/* The window in progress: one record per node, then the "step" one. */
static void close_window(lt_optimizer *o, sim *s) {
    if (!s->win_steps) return;
    double per = s->win_norm / s->win_steps;
    window_record(o, s, "nope", "blk.norm", "nope:f32:288", s->win_norm, per, per);
    if (s->with_matvec) {
        per = s->win_mv / s->win_steps;
        window_record(o, s, "matvec", "blk.ffn_up", "matvec:q8_0:768x2048", s->win_mv, per, per);
    }
    window_record(o, s, "step", "", KEY, s->win_step, s->step_min, s->step_max);
    s->win_norm = s->win_mv = s->win_step = s->step_max = 0;
    s->step_min = INFINITY;
    s->win_steps = 0;
    s->window++;
}

/* One decode step: the nodes' time scales with the thread count's factor;
 * the step is its nodes plus a fixed 500 ns outside them. */
static void close_any(lt_optimizer *o, void *s) { close_window(o, s); }

/* A prefill step between generations: the decode window in progress
 * closes (the run's telemetry ends its decode steps), the prefill's own
 * window follows with the tag in force, then its phase ends. */
static void prefill(lt_optimizer *o, sim *s) {
    close_window(o, s);
    const double f = s->cur[K_PREFILL].v[0] == 1 ? s->prefill_one_thread : 1.0;
    const double total = PROMPT_TOKENS * 10000.0 * f;
    Looptune__KernelWindow w = LOOPTUNE__KERNEL_WINDOW__INIT;
    w.run_id = "run-1";
    w.window = s->prefill_window++;
    w.kernel = "step";
    w.node = "";
    w.shape = PREFILL_KEY;
    w.count = 1;
    w.steps = PROMPT_TOKENS;
    w.total_ns = w.critical_ns = w.median_ns = w.min_ns = w.max_ns = w.p90_ns = (uint64_t)total;
    if (s->ts.trial) {
        w.candidate_id = s->ts.cand_id;
        w.on_candidate = trial_sim_on_cand(s->ts.phase);
        w.pair = (uint32_t)(s->ts.phase / 2);
    }
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW;
    env.kernel_window = &w;
    feed(o, &env);
    trial_sim_prefill(&s->ts, o, close_any, s, s->pend, &s->n_pend, s->cur, s->inc);
}

static void step(lt_optimizer *o, sim *s) {
    double f = s->cur[K_THREADS].v[0] == 1 ? s->one_thread : 1.0;
    double norm = 2000 * f, mv = s->with_matvec ? 30000 * f : 0;
    double st = norm + mv + 500;
    s->win_norm += norm;
    s->win_mv += mv;
    s->win_step += st;
    if (st < s->step_min) s->step_min = st;
    if (st > s->step_max) s->step_max = st;
    s->win_steps++;
    trial_sim_boundary(&s->ts, s->win_steps, o, close_any, s, s->pend, &s->n_pend, s->cur,
                       s->inc);
}

static void run_case(bool with_matvec, double one_thread, int prefill_every,
                     double prefill_one_thread, int steps, sim *s, lt_optimizer_stats *st) {
    memset(s, 0, sizeof *s);
    s->with_matvec = with_matvec;
    s->one_thread = one_thread;
    s->prefill_every = prefill_every;
    s->prefill_one_thread = prefill_one_thread;
    s->first_trial_knob = -1;
    s->step_min = INFINITY;
    lt_space_threads(&s->space[K_THREADS], 2);
    lt_space_threads(&s->space[K_PREFILL], 2);
    ASSERT_EQ(lt_space_by_name("looped", &s->space[K_LOOPED]), LT_OK);
    ASSERT_EQ(lt_space_by_name("matvec", &s->space[K_MATVEC]), LT_OK);
    lt_space_fit_isa(&s->space[K_MATVEC], LT_ISA_AVX512);
    for (int k = 0; k < N_KNOBS; k++) {
        lt_space_default(&s->space[k], &s->inc[k]);
        s->cur[k] = s->inc[k];
    }
    FILE *log = getenv("LT_TEST_LOG") ? stderr : fopen("/dev/null", "w");
    lt_optimizer_opts oo = {.strategy = LT_STRAT_MODEL, .seed = 11, .phase_tokens = 4,
                            .stale_ms = 1000000, .log = log, .on_control = on_control,
                            .on_config = on_config, .hook_user = s};
    lt_optimizer *o;
    ASSERT_EQ(lt_optimizer_open(&o, &oo), LT_OK);
    send_start(o, s);
    for (int t = 0; t < steps; t++) {
        if (prefill_every && t % prefill_every == 0) prefill(o, s);
        step(o, s);
    }
    lt_optimizer_stats_get(o, st);
    /* the run's tunables: threads and looped on the decode key, threads on
     * the prefill key, and matvec when it has it */
    ASSERT_EQ(st->units, with_matvec ? 4 : 3);
    lt_optimizer_close(o);
    if (log != stderr) fclose(log);
    ASSERT_TRUE(!s->bad_trial);
}

int main(void) {
    sim s;
    lt_optimizer_stats st;

    /* one thread is 20% faster: its trial is the first (the run's only
     * other tunable, looped, comes after it), kept, and published */
    run_case(false, 0.8, 0, 1.0, 4000, &s, &st);
    printf("faster: %lld trials, %lld kept, %lld rolled back; threads %d, config '%s'\n",
           (long long)st.trials, (long long)st.kept, (long long)st.rolled_back,
           s.inc[K_THREADS].v[0], s.last_threads_config);
    ASSERT_EQ(s.first_trial_knob, K_THREADS);
    ASSERT_TRUE(s.trials_of[K_LOOPED] >= 1); /* the looped executor gets its trials too */
    ASSERT_EQ(s.keeps_of[K_THREADS], 1);
    ASSERT_EQ(s.inc[K_THREADS].v[0], 1);
    ASSERT_TRUE(s.threads_configs >= 1);
    ASSERT_STREQ(s.last_threads_config, "threads=1");
    ASSERT_EQ(s.keeps_of[K_LOOPED], 0); /* the looped parameters change nothing here */

    /* one thread is 20% slower: tried, rolled back, the whole pool stays */
    run_case(false, 1.2, 0, 1.0, 4000, &s, &st);
    printf("slower: %lld trials, %lld kept, %lld rolled back, %lld stopped early\n",
           (long long)st.trials, (long long)st.kept, (long long)st.rolled_back,
           (long long)st.aborted);
    ASSERT_EQ(s.first_trial_knob, K_THREADS);
    ASSERT_TRUE(s.trials_of[K_THREADS] >= 1);
    ASSERT_EQ(s.keeps_of[K_THREADS], 0);
    ASSERT_EQ(s.inc[K_THREADS].v[0], 0);
    ASSERT_TRUE(st.rolled_back + st.aborted >= 1);
    /* finished (its space has one other point): published as the whole pool */
    ASSERT_EQ(s.threads_configs, 1);
    ASSERT_STREQ(s.last_threads_config, "threads=0");

    /* with a bottleneck kernel, the kernel has the first trial and the
     * thread count still gets one */
    run_case(true, 0.8, 0, 1.0, 8000, &s, &st);
    printf("with a kernel: %lld trials (matvec %d, threads %d, looped %d)\n",
           (long long)st.trials, s.trials_of[K_MATVEC], s.trials_of[K_THREADS],
           s.trials_of[K_LOOPED]);
    ASSERT_EQ(s.first_trial_knob, K_MATVEC);
    ASSERT_TRUE(s.trials_of[K_THREADS] >= 1);
    ASSERT_EQ(s.inc[K_THREADS].v[0], 1);
    ASSERT_EQ(s.trials_of[K_PREFILL], 0); /* no prefill step measured: never tried */

    /* prefill steps between generations, where one thread is 20% faster
     * while the decode steps are 20% slower with it: each regime keeps its
     * own (one thread for prefill, the whole pool for decode) */
    run_case(false, 1.2, 16, 0.8, 6000, &s, &st);
    printf("prefill faster: %lld trials (threads decode %d, prefill %d), prefill config '%s'\n",
           (long long)st.trials, s.trials_of[K_THREADS], s.trials_of[K_PREFILL],
           s.last_prefill_config);
    ASSERT_TRUE(s.trials_of[K_PREFILL] >= 1);
    ASSERT_EQ(s.keeps_of[K_PREFILL], 1);
    ASSERT_EQ(s.inc[K_PREFILL].v[0], 1);
    ASSERT_STREQ(s.last_prefill_config, "threads=1");
    ASSERT_EQ(s.keeps_of[K_THREADS], 0);
    ASSERT_EQ(s.inc[K_THREADS].v[0], 0);

    /* and a slower prefill thread count is rolled back */
    run_case(false, 1.0, 16, 1.2, 6000, &s, &st);
    printf("prefill slower: %d prefill trials, kept %d, config '%s'\n", s.trials_of[K_PREFILL],
           s.keeps_of[K_PREFILL], s.last_prefill_config);
    ASSERT_TRUE(s.trials_of[K_PREFILL] >= 1);
    ASSERT_EQ(s.keeps_of[K_PREFILL], 0);
    ASSERT_EQ(s.inc[K_PREFILL].v[0], 0);
    return lt_test_finish();
}
