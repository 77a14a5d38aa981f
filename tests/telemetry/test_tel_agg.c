/* Window aggregation on synthetic records with answers computed by hand:
 * per-step node durations (max end - min start over threads), nearest-rank
 * quantiles, analytic bytes and FLOPs, achieved rates, wait share, counters
 * and the contention flag; windows closed by messages; per-call samples;
 * records of lost steps and of emitted windows counted as orphans; retags
 * that cut windows and give them the tag and parameter values in force. */
#include "telemetry/tel_internal.h"
#include "tel_test.h"
#include "test.h"

typedef struct {
    lt_program *p;
    lt__tel_nodes nodes;
    lt__tel_agg *agg;
    mem_sink ms;
    lt_tel_sink sink;
} fixture;

/* step_shape: the decode step key, for a "step" window per window (NULL: none);
 * prefill_shape: the prefill step key, for a window per prefill step */
static void setup_keys(fixture *f, lt_tel_detail detail, uint32_t available,
                       const char *step_shape, const char *prefill_shape) {
    memset(f, 0, sizeof *f);
    f->p = syn_program(0);
    ASSERT_TRUE(f->p != NULL);
    ASSERT_EQ(lt__tel_nodes_init(&f->nodes, f->p), LT_OK);
    f->sink = mem_sink_of(&f->ms);
    lt__tel_agg_opts o = {.program = f->p, .nodes = &f->nodes, .nth = 2, .run_id = "run-x",
                          .detail = detail, .available = available, .sink = &f->sink,
                          .step_shape = step_shape, .prefill_shape = prefill_shape};
    ASSERT_EQ(lt__tel_agg_init(&f->agg, &o), LT_OK);
}

static void setup_keyed(fixture *f, lt_tel_detail detail, uint32_t available,
                        const char *step_shape) {
    setup_keys(f, detail, available, step_shape, NULL);
}

static void setup(fixture *f, lt_tel_detail detail, uint32_t available) {
    setup_keyed(f, detail, available, NULL);
}

static void teardown(fixture *f) {
    lt__tel_agg_free(f->agg);
    lt__tel_nodes_free(&f->nodes);
    lt_program_free(f->p);
    mem_free(&f->ms);
}

static void rec(fixture *f, int th, uint32_t step, int node, uint64_t t0, uint64_t t1,
                uint64_t wait) {
    lt__tel_agg_add(f->agg, th, &(lt__tel_rec){step, node, t0, t1, wait});
}

static void step(fixture *f, uint64_t seq, uint64_t tb, uint64_t te, uint32_t flags,
                 uint64_t task_clock, uint64_t cs, uint64_t wall) {
    lt__tel_stepmsg m = {.seq = seq, .pos = (int64_t)seq, .n_tokens = 1, .t_begin_ns = tb,
                         .t_end_ns = te, .flags = flags, .ctr_wall_ns = wall};
    m.ctr[LT_CTR_TASK_CLOCK] = task_clock;
    m.ctr[LT_CTR_CONTEXT_SWITCHES] = cs;
    m.ctr[LT_CTR_CYCLES] = 777; /* not available: must not show */
    lt__tel_agg_step(f->agg, &m);
}

static const mem_rec *find_window(const mem_sink *s, uint64_t window, int node) {
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].kind == LT_TEL_KERNEL_WINDOW && s->v[i].w.window == window &&
            s->v[i].node == node)
            return &s->v[i];
    return NULL;
}

static void test_hand_computed(void) {
    fixture f;
    const uint32_t av = 1u << LT_CTR_TASK_CLOCK | 1u << LT_CTR_CONTEXT_SWITCHES;
    setup(&f, LT_TEL_DETAIL_WINDOW, av);
    /* window 0 = steps 0..2, window 1 = step 3 */
    step(&f, 0, 0, 900, 0, 0, 0, 0);
    step(&f, 1, 900, 1900, LT__STEP_COUNTERS, 1000, 0, 2000);
    step(&f, 2, 1900, 2900, LT__STEP_CLOSE | LT__STEP_COUNTERS, 3000, 3, 2000);
    /* node 0: step durations 150, 300, 50; node 1: 100, 100, 300 */
    rec(&f, 0, 0, 0, 100, 200, 10);
    rec(&f, 1, 0, 0, 110, 250, 5);
    rec(&f, 0, 0, 1, 300, 400, 0);
    rec(&f, 0, 1, 0, 1000, 1100, 0);
    rec(&f, 1, 1, 0, 1000, 1300, 20);
    rec(&f, 0, 1, 1, 1400, 1450, 0);
    rec(&f, 1, 1, 1, 1400, 1500, 0);
    rec(&f, 0, 2, 0, 2000, 2050, 0);
    rec(&f, 1, 2, 1, 2100, 2400, 30);
    /* node 2 ran in step 1 only */
    rec(&f, 1, 1, 2, 1600, 1607, 1);
    lt__tel_agg_flush(f.agg);
    ASSERT_EQ(mem_count(&f.ms, LT_TEL_KERNEL_WINDOW), 3);

    const mem_rec *w = find_window(&f.ms, 0, 0);
    ASSERT_TRUE(w != NULL);
    if (w) {
        ASSERT_STREQ(w->label, "first");
        ASSERT_STREQ(w->kernel, "add");
        ASSERT_STREQ(w->shape, "f32:4096x1:decode");
        ASSERT_STREQ(w->run_id, "run-x");
        ASSERT_EQ(w->w.t_start_ns, 0);
        ASSERT_EQ(w->w.t_end_ns, 2900);
        ASSERT_EQ(w->w.steps, 3);
        ASSERT_EQ(w->w.count, 3);
        ASSERT_EQ(w->w.min_ns, 50);
        ASSERT_EQ(w->w.median_ns, 150); /* rank ceil(1.5) = 2 of {50,150,300} */
        ASSERT_EQ(w->w.p90_ns, 300);    /* rank ceil(2.7) = 3 */
        ASSERT_EQ(w->w.max_ns, 300);
        ASSERT_EQ(w->w.total_ns, 500);
        /* the longest thread per step: 140 (not the span 150), 300, 50 */
        ASSERT_EQ(w->w.critical_ns, 490);
        ASSERT_NEAR(w->w.bytes, SYN_ADD_BYTES, 0);
        ASSERT_NEAR(w->w.flops, SYN_ADD_FLOPS, 0);
        ASSERT_NEAR(w->w.gb_s, 3 * SYN_ADD_BYTES / 500.0, 1e-9); /* bytes/ns = GB/s */
        ASSERT_NEAR(w->w.gflops, 3 * SYN_ADD_FLOPS / 500.0, 1e-9);
        ASSERT_NEAR(w->w.wait_share, 35.0 / (500.0 * 2 + 35.0), 1e-12);
        ASSERT_TRUE(w->w.counters_read);
        ASSERT_EQ(w->w.counters[LT_CTR_TASK_CLOCK], 4000);
        ASSERT_EQ(w->w.counters[LT_CTR_CONTEXT_SWITCHES], 3);
        ASSERT_EQ(w->w.available, av);
        ASSERT_TRUE(w->w.contention); /* 3 context switches */
    }
    w = find_window(&f.ms, 0, 1);
    ASSERT_TRUE(w != NULL);
    if (w) {
        ASSERT_STREQ(w->shape, "f32:64x32:decode");
        ASSERT_EQ(w->w.count, 3);
        ASSERT_EQ(w->w.min_ns, 100);
        ASSERT_EQ(w->w.median_ns, 100);
        ASSERT_EQ(w->w.p90_ns, 300);
        ASSERT_EQ(w->w.max_ns, 300);
        ASSERT_NEAR(w->w.bytes, SYN_MV_BYTES, 0);
        ASSERT_NEAR(w->w.gb_s, 3 * SYN_MV_BYTES / 500.0, 1e-9);
        ASSERT_NEAR(w->w.gflops, 3 * SYN_MV_FLOPS / 500.0, 1e-9);
        ASSERT_NEAR(w->w.wait_share, 30.0 / 1030.0, 1e-12);
    }
    w = find_window(&f.ms, 0, 2);
    ASSERT_TRUE(w != NULL);
    if (w) {
        ASSERT_EQ(w->w.count, 1);
        ASSERT_EQ(w->w.min_ns, 7);
        ASSERT_EQ(w->w.median_ns, 7);
        ASSERT_EQ(w->w.max_ns, 7);
    }

    /* window 1: step 3, closed by the end-of-run message; a late record of
     * step 0 is an orphan */
    step(&f, 3, 2900, 6000, 0, 0, 0, 0);
    rec(&f, 0, 3, 0, 5000, 5400, 0);
    rec(&f, 1, 0, 0, 5, 6, 0);
    lt__tel_agg_step(f.agg, &(lt__tel_stepmsg){.seq = 4, .flags = LT__STEP_NONE | LT__STEP_CLOSE});
    lt__tel_agg_flush(f.agg);
    ASSERT_EQ(mem_count(&f.ms, LT_TEL_KERNEL_WINDOW), 4); /* nodes 1 and 2 did not run */
    w = find_window(&f.ms, 1, 0);
    ASSERT_TRUE(w != NULL);
    if (w) {
        ASSERT_EQ(w->w.t_start_ns, 2900);
        ASSERT_EQ(w->w.t_end_ns, 6000);
        ASSERT_EQ(w->w.count, 1);
        ASSERT_EQ(w->w.median_ns, 400);
        ASSERT_TRUE(!w->w.counters_read);
        ASSERT_TRUE(!w->w.contention);
    }
    lt__tel_agg_counts c;
    lt__tel_agg_counts_get(f.agg, &c);
    ASSERT_EQ(c.windows, 2);
    ASSERT_EQ(c.orphans, 1);
    ASSERT_EQ(c.emitted, 4);
    teardown(&f);
}

/* Contention from task-clock alone: 0.85 of the wall is < 0.9, 0.95 is not. */
static void test_contention_task_clock(void) {
    for (int k = 0; k < 2; k++) {
        fixture f;
        setup(&f, LT_TEL_DETAIL_WINDOW, 1u << LT_CTR_TASK_CLOCK);
        step(&f, 0, 0, 1000, LT__STEP_CLOSE | LT__STEP_COUNTERS, k ? 950 : 850, 5, 1000);
        rec(&f, 0, 0, 0, 10, 20, 0);
        lt__tel_agg_flush(f.agg);
        const mem_rec *w = find_window(&f.ms, 0, 0);
        ASSERT_TRUE(w != NULL);
        /* context switches are not available: their 5 must not count */
        if (w) ASSERT_EQ(w->w.contention, k == 0);
        teardown(&f);
    }
}

/* A window of an even count: the median is the lower middle (nearest rank). */
static void test_quantiles(void) {
    fixture f;
    setup(&f, LT_TEL_DETAIL_WINDOW, 0);
    const uint64_t d[10] = {70, 10, 100, 40, 20, 90, 30, 60, 50, 80};
    for (uint64_t s = 0; s < 10; s++) {
        step(&f, s, s * 1000, s * 1000 + 1000, s == 9 ? LT__STEP_CLOSE : 0, 0, 0, 0);
        rec(&f, 0, (uint32_t)s, 1, s * 1000, s * 1000 + d[s], 0);
    }
    lt__tel_agg_flush(f.agg);
    const mem_rec *w = find_window(&f.ms, 0, 1);
    ASSERT_TRUE(w != NULL);
    if (w) {
        ASSERT_EQ(w->w.count, 10);
        ASSERT_EQ(w->w.median_ns, 50); /* rank 5 of 10 */
        ASSERT_EQ(w->w.p90_ns, 90);    /* rank 9 */
        ASSERT_EQ(w->w.total_ns, 550);
    }
    teardown(&f);
}

/* A step whose message never came: its records are orphans, the window
 * still closes where the (carried) close says. Per-call samples carry the
 * call's bytes for the step's position. */
static void test_lost_step_and_per_call(void) {
    fixture f;
    setup(&f, LT_TEL_DETAIL_PER_CALL, 0);
    step(&f, 0, 0, 100, 0, 0, 0, 0);
    step(&f, 2, 200, 300, LT__STEP_CLOSE, 0, 0, 0); /* step 1 lost */
    rec(&f, 0, 0, 1, 10, 20, 1);
    rec(&f, 1, 0, 1, 12, 25, 2);
    rec(&f, 0, 1, 1, 110, 120, 0);
    rec(&f, 0, 2, 1, 210, 290, 0);
    lt__tel_agg_flush(f.agg);
    ASSERT_EQ(mem_count(&f.ms, LT_TEL_CALL_SAMPLE), 3);
    const mem_rec *w = find_window(&f.ms, 0, 1);
    ASSERT_TRUE(w != NULL);
    if (w) {
        ASSERT_EQ(w->w.steps, 2);
        ASSERT_EQ(w->w.count, 2);
        ASSERT_EQ(w->w.min_ns, 15);
        ASSERT_EQ(w->w.max_ns, 80);
    }
    const mem_rec *c = NULL;
    for (size_t i = 0; i < f.ms.n; i++)
        if (f.ms.v[i].kind == LT_TEL_CALL_SAMPLE) {
            c = &f.ms.v[i];
            break;
        }
    ASSERT_TRUE(c != NULL);
    if (c) {
        ASSERT_EQ(c->c.token, 0);
        ASSERT_EQ(c->c.thread, 0);
        ASSERT_EQ(c->c.start_ns, 10);
        ASSERT_EQ(c->c.end_ns, 20);
        ASSERT_EQ(c->c.wait_ns, 1);
        ASSERT_NEAR(c->c.bytes, SYN_MV_BYTES, 0);
        ASSERT_STREQ(c->label, "proj");
    }
    lt__tel_agg_counts n;
    lt__tel_agg_counts_get(f.agg, &n);
    ASSERT_EQ(n.orphans, 1);
    teardown(&f);
}

/* Many steps in flight before any close: the step table grows and keeps
 * every row. */
static void test_growth(void) {
    fixture f;
    setup(&f, LT_TEL_DETAIL_WINDOW, 0);
    const uint64_t n = 1000;
    for (uint64_t s = 0; s < n; s++) {
        step(&f, s, s * 10, s * 10 + 10, s == n - 1 ? LT__STEP_CLOSE : 0, 0, 0, 0);
        rec(&f, (int)(s % 2), (uint32_t)s, 0, s * 10, s * 10 + 1 + s % 5, 0);
    }
    lt__tel_agg_flush(f.agg);
    const mem_rec *w = find_window(&f.ms, 0, 0);
    ASSERT_TRUE(w != NULL);
    if (w) {
        ASSERT_EQ(w->w.count, n);
        ASSERT_EQ(w->w.total_ns, n * 3); /* 1..5 evenly: mean 3 */
        ASSERT_EQ(w->w.min_ns, 1);
        ASSERT_EQ(w->w.max_ns, 5);
        ASSERT_EQ(w->w.median_ns, 3);
    }
    teardown(&f);
}

/* ---- retags ------------------------------------------------------------------------ */

/* What the test set for one step, logged as it goes: the reference the
 * windows are checked against. */
typedef struct {
    int32_t rows, unroll; /* matvec's rows_per_task and unroll */
    char id[16];
    bool on;
    uint32_t pair;
} step_conf;

static int mv_param(const char *name) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    for (int i = 0; i < k->n_params; i++)
        if (!strcmp(k->params[i].name, name)) return i;
    ASSERT_TRUE(!"matvec has no such parameter");
    return 0;
}

/* The value record r reports for the named parameter, or -1 when it does
 * not report it (a parameter that does nothing on the active ISA). */
static int64_t rec_param(const mem_rec *r, const char *name) {
    for (int i = 0; i < r->n_params; i++)
        if (!strcmp(r->params[i].name, name)) return r->params[i].value;
    return -1;
}

/* Sets node 1's (matvec) rows_per_task and unroll, the way the tuner would. */
static void set_mv(lt_program *p, int32_t rows, int32_t unroll) {
    lt_node_info info;
    lt_program_node(p, 1, &info);
    info.params.v[mv_param("rows_per_task")] = rows;
    info.params.v[mv_param("unroll")] = unroll;
    ASSERT_EQ(lt_program_set_params(p, 1, &info.params), LT_OK);
}

/* The message lt_tel_retag sends: no step, closes, a snapshot from now on. */
static void retag(fixture *f, uint64_t seq, const lt_tel_tag *tag, uint64_t task_clock,
                  step_conf *cur, int32_t rows, int32_t unroll) {
    set_mv(f->p, rows, unroll);
    lt__tel_stepmsg m = {.seq = seq, .flags = LT__STEP_NONE | LT__STEP_CLOSE | LT__STEP_RETAG,
                         .snap = lt__tel_snap_new(f->p, tag)};
    ASSERT_TRUE(m.snap != NULL);
    if (task_clock) {
        m.flags |= LT__STEP_COUNTERS;
        m.ctr[LT_CTR_TASK_CLOCK] = task_clock;
        m.ctr_wall_ns = 10 * task_clock;
    }
    lt__tel_agg_step(f->agg, &m);
    memset(cur, 0, sizeof *cur);
    cur->rows = rows;
    cur->unroll = unroll;
    if (tag && tag->candidate_id) {
        snprintf(cur->id, sizeof cur->id, "%s", tag->candidate_id);
        cur->on = tag->on_candidate;
        cur->pair = tag->pair;
    }
}

/* Step s: 1000 ns from 1000 s, all three nodes on thread 0. */
static void full_step(fixture *f, uint64_t s, uint32_t flags, step_conf *log,
                      const step_conf *cur) {
    step(f, s, s * 1000, s * 1000 + 1000, flags, 0, 0, 0);
    for (int j = 0; j < 3; j++) {
        uint64_t t0 = s * 1000 + 100 * (uint64_t)j;
        rec(f, 0, (uint32_t)s, j, t0, t0 + 50 + s, 0);
    }
    log[s] = *cur;
}

static void test_retag(void) {
    fixture f;
    setup(&f, LT_TEL_DETAIL_WINDOW, 1u << LT_CTR_TASK_CLOCK);
    const lt_kernel *mv = lt_kernel_get(LT_K_MATVEC);
    const lt_isa isa = lt_isa_active();
    const int32_t def_rows = lt_param_default(&mv->params[mv_param("rows_per_task")], isa);
    const int32_t def_unroll = lt_param_default(&mv->params[mv_param("unroll")], isa);
    const bool unroll_acts = lt_param_applies(&mv->params[mv_param("unroll")], isa);
    int reported = 0; /* the parameters that act on this ISA's path, in a decode call */
    for (int j = 0; j < mv->n_params; j++)
        reported += lt_param_applies(&mv->params[j], isa) &&
                    lt_param_acts_in(&mv->params[j], LT_REGIME_DECODE);
    ASSERT_TRUE(def_rows != 8 && def_unroll != 4); /* the candidate differs */
    step_conf log[12], cur;
    /* before the first step: the incumbent of trial c1, pair 0 */
    retag(&f, 0, &(lt_tel_tag){"c1", false, 0}, 0, &cur, def_rows, def_unroll);
    full_step(&f, 0, 0, log, &cur);
    full_step(&f, 1, LT__STEP_CLOSE, log, &cur); /* a window of K = 2 steps */
    full_step(&f, 2, 0, log, &cur);
    lt__tel_agg_flush(f.agg);
    /* the candidate; the counters read at the retag go to step 2's window */
    retag(&f, 3, &(lt_tel_tag){"c1", true, 0}, 500, &cur, 8, 4);
    full_step(&f, 3, 0, log, &cur);
    full_step(&f, 4, 0, log, &cur);
    full_step(&f, 5, LT__STEP_CLOSE, log, &cur);
    /* right after a close: nothing to cut, and counters with no step in the
     * window go nowhere; twice in a row: the second one counts */
    retag(&f, 6, &(lt_tel_tag){"c1", true, 1}, 999, &cur, 8, 4);
    retag(&f, 6, &(lt_tel_tag){"c1", false, 1}, 0, &cur, def_rows, def_unroll);
    full_step(&f, 6, 0, log, &cur);
    full_step(&f, 7, 0, log, &cur);
    lt__tel_agg_flush(f.agg); /* the open window stays open */
    full_step(&f, 8, 0, log, &cur);
    /* the trial is over: no tag ("" on the wire, not on, pair 0) even if the
     * caller left the others set */
    retag(&f, 9, &(lt_tel_tag){NULL, true, 7}, 0, &cur, 16, 2);
    full_step(&f, 9, 0, log, &cur);
    full_step(&f, 10, 0, log, &cur);
    full_step(&f, 11, 0, log, &cur);
    lt__tel_agg_step(f.agg, &(lt__tel_stepmsg){.seq = 12, .flags = LT__STEP_NONE | LT__STEP_CLOSE});
    lt__tel_agg_flush(f.agg);

    /* windows: [0,2) [2,3) [3,6) [6,9) [9,12), three node records each */
    const uint64_t bounds[6] = {0, 2, 3, 6, 9, 12};
    ASSERT_EQ(mem_count(&f.ms, LT_TEL_KERNEL_WINDOW), 5 * 3);
    uint64_t steps = 0;
    for (size_t i = 0; i < f.ms.n; i++) {
        const mem_rec *r = &f.ms.v[i];
        if (r->kind != LT_TEL_KERNEL_WINDOW) continue;
        ASSERT_TRUE(r->w.window < 5);
        if (r->w.window >= 5) continue;
        uint64_t first = bounds[r->w.window], end = bounds[r->w.window + 1];
        ASSERT_EQ(r->w.t_start_ns, first * 1000);
        ASSERT_EQ(r->w.t_end_ns, end * 1000);
        ASSERT_EQ(r->w.steps, end - first);
        ASSERT_EQ(r->w.count, end - first);
        if (r->node == 0) steps += r->w.steps;
        /* every step of the window ran what the window reports */
        for (uint64_t s = first; s < end; s++) {
            ASSERT_STREQ(r->candidate_id, log[s].id);
            ASSERT_EQ(r->w.on_candidate, log[s].on);
            ASSERT_EQ(r->w.pair, log[s].pair);
            if (r->node == 1) {
                ASSERT_EQ(r->n_params, reported);
                ASSERT_EQ(rec_param(r, "rows_per_task"), log[s].rows);
                /* unroll where it acts, else not reported at all */
                ASSERT_EQ(rec_param(r, "unroll"), unroll_acts ? log[s].unroll : -1);
            } else {
                /* the adds kept their values */
                ASSERT_EQ(r->n_params, lt_kernel_get(LT_K_ADD)->n_params);
                ASSERT_EQ(r->params[0].value, lt_kernel_get(LT_K_ADD)->params[0].def);
            }
        }
        /* counters: only the retag's read at step 3 fell in a window */
        ASSERT_EQ(r->w.counters_read, r->w.window == 1);
        ASSERT_EQ(r->w.counters[LT_CTR_TASK_CLOCK], r->w.window == 1 ? 500u : 0u);
    }
    ASSERT_EQ(steps, 12);
    /* the tag values themselves, spelled out once */
    const mem_rec *w = find_window(&f.ms, 2, 1);
    ASSERT_TRUE(w != NULL);
    if (w) {
        ASSERT_STREQ(w->candidate_id, "c1");
        ASSERT_TRUE(w->w.on_candidate);
        ASSERT_EQ(w->w.pair, 0);
        ASSERT_EQ(rec_param(w, "rows_per_task"), 8);
        ASSERT_EQ(rec_param(w, "unroll"), unroll_acts ? 4 : -1);
    }
    w = find_window(&f.ms, 4, 1);
    ASSERT_TRUE(w != NULL);
    if (w) {
        ASSERT_STREQ(w->candidate_id, "");
        ASSERT_TRUE(!w->w.on_candidate);
        ASSERT_EQ(w->w.pair, 0);
        ASSERT_EQ(rec_param(w, "rows_per_task"), 16);
    }
    teardown(&f); /* frees the last snapshot: ASan would see a leak */
}

/* Per-call samples name the values of their own step, also when the
 * window they fall in has not been emitted; a snapshot queued but never
 * reached is freed with the aggregator. */
static void test_retag_per_call(void) {
    fixture f;
    setup(&f, LT_TEL_DETAIL_PER_CALL, 0);
    step_conf cur;
    step(&f, 0, 0, 1000, 0, 0, 0, 0);
    retag(&f, 1, &(lt_tel_tag){"c9", true, 3}, 0, &cur, 64, 1);
    step(&f, 1, 1000, 2000, 0, 0, 0, 0);
    rec(&f, 0, 0, 1, 10, 20, 0);
    rec(&f, 0, 1, 1, 1010, 1020, 0);
    retag(&f, 2, NULL, 0, &cur, 32, 1); /* never reached by a flush */
    ASSERT_EQ(mem_count(&f.ms, LT_TEL_CALL_SAMPLE), 2);
    const lt_kernel *mv = lt_kernel_get(LT_K_MATVEC);
    size_t k = 0;
    for (size_t i = 0; i < f.ms.n; i++) {
        const mem_rec *r = &f.ms.v[i];
        if (r->kind != LT_TEL_CALL_SAMPLE) continue;
        ASSERT_EQ(r->c.token, k);
        ASSERT_EQ(rec_param(r, "rows_per_task"),
                  k ? 64 : lt_param_default(&mv->params[mv_param("rows_per_task")], lt_isa_active()));
        k++;
    }
    teardown(&f);
}

/* With a step key, every window closes with one more record over the whole
 * steps (each from the step before's end): kernel "step", node -1, label
 * "", the key, count = steps, their wall times' quantiles and sum, no bytes,
 * the window's tag. */
static void test_step_window(void) {
    fixture f;
    char key[64] = "llama:d288:h768:l6:q8_0:t2:decode";
    setup_keyed(&f, LT_TEL_DETAIL_WINDOW, 0, key);
    key[0] = 'X'; /* the aggregator keeps its own copy */
    /* window 0: steps of 900, 1000, 1100 ns */
    step(&f, 0, 0, 900, 0, 0, 0, 0);
    step(&f, 1, 900, 1900, 0, 0, 0, 0);
    step(&f, 2, 1900, 3000, LT__STEP_CLOSE, 0, 0, 0);
    for (uint32_t s = 0; s < 3; s++) rec(&f, 0, s, 0, 1000 * s + 10, 1000 * s + 60, 0);
    lt__tel_agg_flush(f.agg);
    ASSERT_EQ(mem_count(&f.ms, LT_TEL_KERNEL_WINDOW), 2); /* node 0, then the step */
    const mem_rec *w = find_window(&f.ms, 0, -1);
    ASSERT_TRUE(w != NULL && w == &f.ms.v[f.ms.n - 1]);
    if (w) {
        ASSERT_STREQ(w->kernel, LT_TEL_STEP_KERNEL);
        ASSERT_STREQ(w->label, "");
        ASSERT_STREQ(w->shape, "llama:d288:h768:l6:q8_0:t2:decode");
        ASSERT_EQ(w->n_params, 0);
        ASSERT_EQ(w->w.count, 3);
        ASSERT_EQ(w->w.steps, 3);
        ASSERT_EQ(w->w.min_ns, 900);
        ASSERT_EQ(w->w.median_ns, 1000);
        ASSERT_EQ(w->w.p90_ns, 1100);
        ASSERT_EQ(w->w.max_ns, 1100);
        ASSERT_EQ(w->w.total_ns, 3000);
        ASSERT_EQ(w->w.critical_ns, 3000);
        ASSERT_NEAR(w->w.bytes, 0, 0);
        ASSERT_STREQ(w->candidate_id, "");
        ASSERT_TRUE(!w->w.on_candidate);
    }
    /* a retag: window 1 (steps of 500 and 700 ns) is the candidate's, pair 2 */
    lt_tel_tag tag = {.candidate_id = "c7", .on_candidate = true, .pair = 2};
    lt__tel_stepmsg m = {.seq = 3, .flags = LT__STEP_NONE | LT__STEP_CLOSE | LT__STEP_RETAG,
                         .snap = lt__tel_snap_new(f.p, &tag)};
    ASSERT_TRUE(m.snap != NULL);
    lt__tel_agg_step(f.agg, &m);
    step(&f, 3, 3000, 3500, 0, 0, 0, 0);
    step(&f, 4, 3500, 4200, LT__STEP_CLOSE, 0, 0, 0);
    rec(&f, 0, 3, 1, 3100, 3200, 0);
    rec(&f, 0, 4, 1, 3600, 3700, 0);
    lt__tel_agg_flush(f.agg);
    w = find_window(&f.ms, 1, -1);
    ASSERT_TRUE(w != NULL);
    if (w) {
        ASSERT_EQ(w->w.count, 2);
        ASSERT_EQ(w->w.min_ns, 500);
        ASSERT_EQ(w->w.median_ns, 500); /* nearest rank: element ceil(0.5 x 2) - 1 */
        ASSERT_EQ(w->w.p90_ns, 700);
        ASSERT_EQ(w->w.total_ns, 1200);
        ASSERT_STREQ(w->candidate_id, "c7");
        ASSERT_TRUE(w->w.on_candidate);
        ASSERT_EQ(w->w.pair, 2);
    }
    ASSERT_EQ(mem_count(&f.ms, LT_TEL_KERNEL_WINDOW), 4);
    teardown(&f);
}

/* A prefill step is a window of its own, in its own count: kernel "step",
 * the prefill key, count 1, steps = its tokens, its wall time, the tag in
 * force when it ran (a retag before it counts, one after it does not); the
 * decode windows around it are untouched. Without a prefill key: nothing. */
static void prefill_msg(fixture *f, uint64_t seq, int64_t tokens, uint64_t tb, uint64_t te) {
    lt__tel_stepmsg m = {.seq = seq, .flags = LT__STEP_NONE | LT__STEP_PREFILL,
                         .n_tokens = tokens, .t_begin_ns = tb, .t_end_ns = te};
    lt__tel_agg_step(f->agg, &m);
}

static const mem_rec *find_prefill(const mem_sink *s, uint64_t window) {
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].kind == LT_TEL_KERNEL_WINDOW && s->v[i].w.window == window &&
            !strcmp(s->v[i].shape, "llama:d288:h768:l6:q8_0:t2:prefill"))
            return &s->v[i];
    return NULL;
}

static void test_prefill_window(void) {
    fixture f;
    char pkey[64] = "llama:d288:h768:l6:q8_0:t2:prefill";
    setup_keys(&f, LT_TEL_DETAIL_WINDOW, 0, "llama:d288:h768:l6:q8_0:t2:decode", pkey);
    pkey[0] = 'X'; /* copied */
    prefill_msg(&f, 0, 37, 100, 5100); /* before any decode step, untagged */
    step(&f, 0, 5100, 6000, LT__STEP_CLOSE, 0, 0, 0);
    rec(&f, 0, 0, 0, 5200, 5300, 0);
    lt_tel_tag tag = {.candidate_id = "c9", .on_candidate = true, .pair = 1};
    lt__tel_stepmsg m = {.seq = 1, .flags = LT__STEP_NONE | LT__STEP_CLOSE | LT__STEP_RETAG,
                         .snap = lt__tel_snap_new(f.p, &tag)};
    ASSERT_TRUE(m.snap != NULL);
    lt__tel_agg_step(f.agg, &m);
    prefill_msg(&f, 1, 8, 7000, 7800); /* after the retag: the candidate's */
    lt__tel_agg_flush(f.agg);
    const mem_rec *p0 = find_prefill(&f.ms, 0), *p1 = find_prefill(&f.ms, 1);
    ASSERT_TRUE(p0 != NULL && p1 != NULL);
    if (p0 && p1) {
        ASSERT_STREQ(p0->kernel, LT_TEL_STEP_KERNEL);
        ASSERT_EQ(p0->node, -1);
        ASSERT_EQ(p0->w.count, 1);
        ASSERT_EQ(p0->w.steps, 37);
        ASSERT_EQ(p0->w.total_ns, 5000);
        ASSERT_EQ(p0->w.median_ns, 5000);
        ASSERT_EQ(p0->w.t_start_ns, 100);
        ASSERT_STREQ(p0->candidate_id, "");
        ASSERT_EQ(p1->w.steps, 8);
        ASSERT_EQ(p1->w.total_ns, 800);
        ASSERT_STREQ(p1->candidate_id, "c9");
        ASSERT_TRUE(p1->w.on_candidate);
        ASSERT_EQ(p1->w.pair, 1);
    }
    /* one decode window (node 0 and its step record), as without prefills */
    int decode_steps = 0;
    for (size_t i = 0; i < f.ms.n; i++)
        decode_steps += f.ms.v[i].kind == LT_TEL_KERNEL_WINDOW &&
                        !strcmp(f.ms.v[i].shape, "llama:d288:h768:l6:q8_0:t2:decode");
    ASSERT_EQ(decode_steps, 1);
    ASSERT_EQ(mem_count(&f.ms, LT_TEL_KERNEL_WINDOW), 4); /* 2 prefill, node 0, step */
    teardown(&f);

    setup_keyed(&f, LT_TEL_DETAIL_WINDOW, 0, "llama:d288:h768:l6:q8_0:t2:decode");
    prefill_msg(&f, 0, 37, 100, 5100);
    lt__tel_agg_flush(f.agg);
    ASSERT_EQ(mem_count(&f.ms, LT_TEL_KERNEL_WINDOW), 0);
    teardown(&f);
}

int main(void) {
    test_step_window();
    test_prefill_window();
    test_hand_computed();
    test_contention_task_clock();
    test_quantiles();
    test_lost_step_and_per_call();
    test_growth();
    test_retag();
    test_retag_per_call();
    return lt_test_finish();
}
