/* The telemetry runtime on real executors and threads: windows closed by K
 * steps and by T ms, counts and totals consistent with the steps run and
 * the decode time, a full ring drops (and counts) instead of waiting, the
 * sink's drops reported, the run's header and end records, and parameter
 * changes with retags between steps (A/B phases of a trial). Threaded:
 * also run under ThreadSanitizer by `make test`. */
#include <time.h>

#include "looptune/telemetry_sinks.h"
#include "tel_test.h"
#include "test.h"
#include "exec_test.h"

typedef struct {
    lt_tel *tel;
    mem_sink ms;
    lt_tel_stats st;
} run_result;

static void sleep_ms(int ms) { nanosleep(&(struct timespec){0, ms * 1000000L}, NULL); }

/* Runs `steps` steps of p on pool under telemetry with opts o (program,
 * pool, sink filled in here); sleep_each > 0 sleeps that long after each. */
static void run(lt_program *p, lt_pool *pool, lt_executor ex, lt_tel_opts o, int steps,
                int sleep_each, run_result *r) {
    memset(r, 0, sizeof *r);
    o.program = p;
    o.pool = pool;
    o.sink = mem_sink_of(&r->ms);
    o.model = "synthetic";
    o.executor = lt_executor_name(ex);
    ASSERT_EQ(lt_tel_open(&r->tel, &o), LT_OK);
    if (!r->tel) return;
    lt_tel_begin(r->tel);
    for (int s = 0; s < steps; s++) {
        lt_step st = {.pos = s, .n_tokens = 1};
        ASSERT_EQ(exec_step(ex, p, pool, &st, NULL), LT_OK);
        if (sleep_each) sleep_ms(sleep_each);
        lt_tel_step_end(r->tel, &st);
    }
    lt_tel_end(r->tel);
    int64_t closed = lt_tel_windows_closed(r->tel); /* the stepping thread's count */
    lt_tel_close(r->tel, &r->st);
    ASSERT_EQ(closed, r->st.windows);
    ASSERT_EQ(r->ms.closed, 1);
}

/* Checks that hold for every run: header records, windows contiguous and
 * covering the decode time, every node counted once per step, run end. */
static void check_consistency(const run_result *r, int n_nodes, int steps, int nth) {
    const mem_sink *s = &r->ms;
    ASSERT_TRUE(s->n >= 2);
    if (s->n < 2) return;
    ASSERT_EQ(s->v[0].kind, LT_TEL_RUN_START);
    ASSERT_EQ(s->v[0].n_nodes, n_nodes);
    ASSERT_EQ(s->v[0].threads, nth);
    ASSERT_EQ(s->v[s->n - 1].kind, LT_TEL_RUN_END);
    const mem_rec *e = &s->v[s->n - 1];
    ASSERT_EQ(e->e.tokens, steps);
    ASSERT_EQ(r->st.steps, steps);
    ASSERT_NEAR(e->e.decode_s, (double)r->st.decode_ns * 1e-9, 1e-12);
    ASSERT_STREQ(e->run_id, s->v[0].run_id);
    int64_t count[64] = {0};
    uint64_t steps_seen = 0, covered = 0, node_time = 0, prev_end = 0;
    int64_t last_window = -1;
    for (size_t i = 0; i < s->n; i++) {
        const mem_rec *w = &s->v[i];
        if (w->kind != LT_TEL_KERNEL_WINDOW) continue;
        ASSERT_TRUE(w->node >= 0 && w->node < n_nodes);
        count[w->node] += (int64_t)w->w.count;
        node_time += w->w.total_ns;
        ASSERT_TRUE(w->w.min_ns <= w->w.median_ns && w->w.median_ns <= w->w.p90_ns &&
                    w->w.p90_ns <= w->w.max_ns);
        ASSERT_TRUE(w->w.wait_share >= 0 && w->w.wait_share <= 1.0);
        if ((int64_t)w->w.window != last_window) {
            /* the first record of a new window: windows follow each other */
            ASSERT_EQ(w->w.window, (uint64_t)(last_window + 1));
            if (last_window >= 0) ASSERT_EQ(w->w.t_start_ns, prev_end);
            last_window = (int64_t)w->w.window;
            steps_seen += w->w.steps;
            covered += w->w.t_end_ns - w->w.t_start_ns;
            prev_end = w->w.t_end_ns;
        }
    }
    ASSERT_EQ(steps_seen, steps);
    ASSERT_EQ(r->st.windows, last_window + 1);
    for (int j = 0; j < n_nodes; j++) ASSERT_EQ(count[j], steps);
    /* windows tile the observed steps exactly */
    ASSERT_EQ(covered, r->st.decode_ns);
    /* Every node interval lies inside its step, and at any instant a thread
     * works on one node at most: the intervals sum to at most nth x the
     * decode time (dispatch, where barriers separate nodes: 1 x). */
    ASSERT_TRUE((double)node_time <= (double)nth * (double)r->st.decode_ns * 1.0001);
    ASSERT_TRUE(node_time > 0);
}

static void test_windows_by_tokens(lt_executor ex, int nth) {
    lt_program *p = syn_program(5);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
    run_result r;
    lt_tel_opts o = {.window_tokens = 10, .window_ms = 600000, .drain_ms = 5};
    run(p, pool, ex, o, 95, 0, &r);
    check_consistency(&r, 8, 95, nth);
    ASSERT_EQ(r.st.windows, 10); /* 9 of 10 steps, then the last 5 */
    ASSERT_EQ(r.st.ring_dropped, 0);
    ASSERT_EQ(mem_count(&r.ms, LT_TEL_KERNEL_WINDOW), 10 * 8);
    for (size_t i = 0; i < r.ms.n; i++) {
        const mem_rec *w = &r.ms.v[i];
        if (w->kind != LT_TEL_KERNEL_WINDOW) continue;
        ASSERT_EQ(w->w.steps, w->w.window < 9 ? 10 : 5);
        ASSERT_EQ(w->w.count, w->w.steps);
        ASSERT_NEAR(w->w.bytes, w->node == 1 ? SYN_MV_BYTES : SYN_ADD_BYTES, 0);
    }
    /* the dispatch executor's barriers keep nodes apart: their intervals
     * cannot add up to more than the decode time */
    if (ex == LT_EXEC_DISPATCH) {
        uint64_t node_time = 0;
        for (size_t i = 0; i < r.ms.n; i++)
            if (r.ms.v[i].kind == LT_TEL_KERNEL_WINDOW) node_time += r.ms.v[i].w.total_ns;
        ASSERT_TRUE(node_time <= r.st.decode_ns);
    }
    /* dispatch: every thread reports every node; looped: a thread that took
     * no task of a node does not */
    if (ex == LT_EXEC_DISPATCH) ASSERT_EQ(r.st.records, 95 * 8 * nth);
    else ASSERT_TRUE(r.st.records >= 95 * 8 && r.st.records <= 95 * 8 * nth);
    mem_free(&r.ms);
    lt_pool_free(pool);
    lt_program_free(p);
}

/* T = 40 ms, steps of >= 15 ms: a window closes once it lasted 40 ms, so it
 * holds 3 steps at most, and every closed window but the last lasted >= T. */
static void test_windows_by_time(void) {
    lt_program *p = syn_program(0);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    run_result r;
    lt_tel_opts o = {.window_tokens = 1000, .window_ms = 40, .drain_ms = 10};
    run(p, pool, LT_EXEC_LOOPED, o, 20, 15, &r);
    check_consistency(&r, 3, 20, 2);
    ASSERT_TRUE(r.st.windows >= 5 && r.st.windows <= 10);
    for (size_t i = 0; i < r.ms.n; i++) {
        const mem_rec *w = &r.ms.v[i];
        if (w->kind != LT_TEL_KERNEL_WINDOW || w->node != 0) continue;
        ASSERT_TRUE(w->w.steps >= 1 && w->w.steps <= 3);
        if ((int64_t)w->w.window < r.st.windows - 1)
            ASSERT_TRUE(w->w.t_end_ns - w->w.t_start_ns >= 40000000u);
    }
    mem_free(&r.ms);
    lt_pool_free(pool);
    lt_program_free(p);
}

/* A ring of 16 records and a drain that does not run before the end: of 3
 * steps x 8 nodes on one thread, the first 16 records fit and the last 8
 * are dropped, counted, and missing from the windows. */
static void test_ring_full_drops(void) {
    lt_program *p = syn_program(5);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 1), LT_OK);
    run_result r;
    lt_tel_opts o = {.window_tokens = 100, .window_ms = 600000, .drain_ms = 600000,
                     .ring_records = 16};
    run(p, pool, LT_EXEC_DISPATCH, o, 3, 0, &r);
    ASSERT_EQ(r.st.records, 24);
    ASSERT_EQ(r.st.ring_dropped, 8);
    ASSERT_EQ(r.ms.v[r.ms.n - 1].e.dropped_records, 8);
    ASSERT_EQ(mem_count(&r.ms, LT_TEL_KERNEL_WINDOW), 8);
    for (size_t i = 0; i < r.ms.n; i++)
        if (r.ms.v[i].kind == LT_TEL_KERNEL_WINDOW) {
            ASSERT_EQ(r.ms.v[i].w.count, 2);
            ASSERT_EQ(r.ms.v[i].w.steps, 3);
        }
    mem_free(&r.ms);
    lt_pool_free(pool);
    lt_program_free(p);
}

/* Records the sink drops are counted and reported in the run end. */
static void test_sink_drops(void) {
    lt_program *p = syn_program(0);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    run_result r;
    memset(&r, 0, sizeof r);
    lt_tel_opts o = {.program = p, .pool = pool, .window_tokens = 1, .drain_ms = 5};
    r.ms.refuse_every = 5;
    o.sink = mem_sink_of(&r.ms);
    ASSERT_EQ(lt_tel_open(&r.tel, &o), LT_OK);
    lt_tel_begin(r.tel);
    for (int s = 0; s < 10; s++) {
        lt_step st = {.pos = s, .n_tokens = 1};
        ASSERT_EQ(exec_step(LT_EXEC_LOOPED, p, pool, &st, NULL), LT_OK);
        lt_tel_step_end(r.tel, &st);
    }
    lt_tel_close(r.tel, &r.st); /* also ends observing */
    /* 1 run start + 30 windows + 1 run end = 32 offered, every 5th dropped */
    ASSERT_EQ(r.st.sink.emitted + r.st.sink.dropped, 32);
    ASSERT_EQ(r.st.sink.dropped, 6);
    ASSERT_EQ((int64_t)r.ms.n, r.st.sink.emitted);
    const mem_rec *e = &r.ms.v[r.ms.n - 1];
    ASSERT_EQ(e->kind, LT_TEL_RUN_END);
    ASSERT_EQ(e->e.dropped_records, 6);
    mem_free(&r.ms);
    lt_pool_free(pool);
    lt_program_free(p);
}

/* Counters: whatever this machine offers, the figures agree with it. */
static void test_counters_consistent(void) {
    lt_program *p = syn_program(5);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    run_result r;
    lt_tel_opts o = {.window_tokens = 8, .counters_every = 4, .drain_ms = 5};
    run(p, pool, LT_EXEC_LOOPED, o, 40, 1, &r);
    check_consistency(&r, 8, 40, 2);
    const uint32_t av = r.st.counters_available;
    printf("counters available: 0x%x\n", av);
    int read_windows = 0;
    for (size_t i = 0; i < r.ms.n; i++) {
        const mem_rec *w = &r.ms.v[i];
        if (w->kind != LT_TEL_KERNEL_WINDOW) continue;
        ASSERT_EQ(w->w.available, av);
        ASSERT_EQ(w->w.counters_read, av != 0); /* 8-step windows, reads every 4 */
        for (int c = 0; c < LT_CTR_COUNT; c++)
            if (!(av & (1u << c))) ASSERT_EQ(w->w.counters[c], 0);
        if (!w->w.counters_read || w->node != 0) continue;
        read_windows++;
        uint64_t wall = (w->w.t_end_ns - w->w.t_start_ns) * 2;
        if (av & (1u << LT_CTR_TASK_CLOCK)) {
            /* both threads were on a CPU for part of the window, never more than all of it */
            ASSERT_TRUE(w->w.counters[LT_CTR_TASK_CLOCK] > 0);
            ASSERT_TRUE((double)w->w.counters[LT_CTR_TASK_CLOCK] <= 1.05 * (double)wall + 2e6);
        }
        if (av & (1u << LT_CTR_CONTEXT_SWITCHES))
            /* the 1 ms sleeps between steps switch the stepping thread out */
            ASSERT_TRUE(w->w.counters[LT_CTR_CONTEXT_SWITCHES] >= 4);
        if (av & (1u << LT_CTR_RUNQUEUE_WAIT)) {
            /* sleeping by choice is no contention; waiting for a CPU is */
            uint64_t rq = w->w.counters[LT_CTR_RUNQUEUE_WAIT];
            ASSERT_TRUE(rq <= wall);
            /* the flag compares with the wall time the reads span, close to
             * the window's: no verdict asked near the 2% threshold */
            if ((double)rq > 0.05 * (double)wall) ASSERT_TRUE(w->w.contention);
            if ((double)rq < 0.005 * (double)wall) ASSERT_TRUE(!w->w.contention);
        } else if (av & (1u << LT_CTR_CONTEXT_SWITCHES)) {
            ASSERT_TRUE(w->w.contention);
        }
        if (av & (1u << LT_CTR_CYCLES)) ASSERT_TRUE(w->w.counters[LT_CTR_CYCLES] > 0);
        if (av & (1u << LT_CTR_INSTRUCTIONS)) ASSERT_TRUE(w->w.counters[LT_CTR_INSTRUCTIONS] > 0);
    }
    if (av) ASSERT_EQ(read_windows, 5);
    mem_free(&r.ms);
    lt_pool_free(pool);
    lt_program_free(p);
}

/* ---- retags: an A/B trial on a running program ---------------------------------------- */

typedef struct {
    int32_t rows;    /* matvec's rows_per_task for the step */
    int phase;       /* bumped at every retag: a window lies in one phase */
    char id[16];
    bool on;
    uint32_t pair;
} phase_conf;

static int mv_rows_index(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    for (int i = 0; i < k->n_params; i++)
        if (!strcmp(k->params[i].name, "rows_per_task")) return i;
    return -1;
}

/* 40 steps, windows of K = 4: a retag before the run (incumbent, pair 0),
 * then candidate and incumbent alternating in phases of 3 and 5 steps
 * (pairs 0..2), one phase of 8 steps (a K close inside it and one right
 * before the retag), a double retag, and the trial's end (untagged). Each
 * window's values and tag equal what was set for every step it covers. */
static void test_retag_phases(lt_executor ex) {
    const int N = 40, nth = 2;
    lt_program *p = syn_program(1);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
    const int ri = mv_rows_index();
    ASSERT_TRUE(ri >= 0);
    lt_node_info info;
    lt_program_node(p, 1, &info);
    const int32_t inc_rows = info.params.v[ri], cand_rows = inc_rows == 8 ? 16 : 8;
    lt_params inc = info.params, cand = info.params;
    cand.v[ri] = cand_rows;

    run_result r;
    memset(&r, 0, sizeof r);
    lt_tel_opts o = {.program = p, .pool = pool, .sink = mem_sink_of(&r.ms), .window_tokens = 4,
                     .window_ms = 600000, .drain_ms = 2, .counters_every = 3};
    ASSERT_EQ(lt_tel_open(&r.tel, &o), LT_OK);
    if (!r.tel) return;
    /* retag after step_end of step (d - 1), i.e. before step d */
    struct {
        int at;
        const char *id;
        bool on;
        uint32_t pair;
        bool cand;
    } plan[] = {{0, "t7", false, 0, false}, {3, "t7", true, 0, true},   {8, "t7", false, 1, false},
                {11, "t7", true, 1, true},  {16, "t7", false, 2, false}, {24, "t7", true, 2, true},
                {24, "t7", false, 2, false}, {27, NULL, false, 0, false}};
    const int n_plan = (int)(sizeof plan / sizeof plan[0]);
    phase_conf conf[64], cur = {0};
    int next = 0, phase = 0;
    for (int s = 0; s <= N; s++) {
        for (; next < n_plan && plan[next].at == s; next++) {
            ASSERT_EQ(lt_program_set_params(p, 1, plan[next].cand ? &cand : &inc), LT_OK);
            lt_tel_tag tag = {plan[next].id, plan[next].on, plan[next].pair};
            ASSERT_EQ(lt_tel_retag(r.tel, &tag), LT_OK);
            cur = (phase_conf){.rows = plan[next].cand ? cand_rows : inc_rows, .phase = ++phase,
                               .on = plan[next].on, .pair = plan[next].id ? plan[next].pair : 0};
            snprintf(cur.id, sizeof cur.id, "%s", plan[next].id ? plan[next].id : "");
        }
        if (s == 0) lt_tel_begin(r.tel);
        if (s == N) break;
        lt_step st = {.pos = s, .n_tokens = 1};
        ASSERT_EQ(exec_step(ex, p, pool, &st, NULL), LT_OK);
        conf[s] = cur;
        lt_tel_step_end(r.tel, &st);
    }
    lt_tel_end(r.tel);
    int64_t closed = lt_tel_windows_closed(r.tel); /* retags close windows too */
    lt_tel_close(r.tel, &r.st);
    ASSERT_EQ(closed, r.st.windows);
    check_consistency(&r, 4, N, nth);
    ASSERT_EQ(r.st.ring_dropped, 0);
    ASSERT_EQ(r.st.steps_lost, 0);

    /* windows in index order cover the steps in order: window i starts where
     * i - 1 ended */
    uint64_t first_of[64] = {0}, steps_of[64] = {0};
    int64_t n_windows = r.st.windows;
    ASSERT_TRUE(n_windows > 0 && n_windows < 64);
    for (size_t i = 0; i < r.ms.n; i++)
        if (r.ms.v[i].kind == LT_TEL_KERNEL_WINDOW && r.ms.v[i].w.window < 64)
            steps_of[r.ms.v[i].w.window] = r.ms.v[i].w.steps;
    for (int64_t w = 1; w < n_windows; w++) first_of[w] = first_of[w - 1] + steps_of[w - 1];
    /* 3 | 4 1 | 3 | 4 1 | 4 4 | 3 | 4 4 4 1: a window per K = 4 steps and per phase */
    ASSERT_EQ(n_windows, 13);
    bool starts[64] = {false};
    for (int64_t w = 0; w < n_windows; w++) starts[first_of[w]] = true;
    for (int i = 0; i < n_plan; i++) ASSERT_TRUE(plan[i].at >= N || starts[plan[i].at]);
    for (size_t i = 0; i < r.ms.n; i++) {
        const mem_rec *w = &r.ms.v[i];
        if (w->kind != LT_TEL_KERNEL_WINDOW || w->w.window >= 64) continue;
        const uint64_t first = first_of[w->w.window];
        ASSERT_TRUE(w->w.steps >= 1 && w->w.steps <= 4);
        for (uint64_t s = first; s < first + w->w.steps && s < (uint64_t)N; s++) {
            ASSERT_EQ(conf[s].phase, conf[first].phase); /* never spans a retag */
            ASSERT_STREQ(w->candidate_id, conf[s].id);
            ASSERT_EQ(w->w.on_candidate, conf[s].on);
            ASSERT_EQ(w->w.pair, conf[s].pair);
            if (w->node == 1) ASSERT_EQ(w->params[ri].value, conf[s].rows);
        }
        /* counters: a retag reads them for the window it closes (e.g. [7, 8),
         * where no periodic read falls: those are after steps 2, 5, 8, ...) */
        bool by_retag = false;
        for (int k = 0; k < n_plan; k++) by_retag |= (uint64_t)plan[k].at == first + w->w.steps;
        if (r.st.counters_available & (1u << LT_CTR_TASK_CLOCK)) {
            if (by_retag) ASSERT_TRUE(w->w.counters_read);
            if (w->w.counters_read) ASSERT_TRUE(w->w.counters[LT_CTR_TASK_CLOCK] > 0);
        }
    }
    mem_free(&r.ms);
    lt_pool_free(pool);
    lt_program_free(p);
}

/* The run start as the wire has it (the kernels list with the whole-step
 * tunables after the nodes), then the records into the memory sink. */
typedef struct {
    mem_sink *ms;
    size_t n_kernels;
    char last_node[64], last_kernel[32], last_shape[96], last_cshape[96];
    int64_t last_value;
    size_t last_n_params;
} wire_sink;

static int wire_emit(void *ctx, const lt_tel_record *r) {
    wire_sink *w = ctx;
    if (r->kind == LT_TEL_RUN_START) {
        lt_tel_pb pb;
        memset(&pb, 0, sizeof pb);
        Looptune__Envelope *env;
        ASSERT_EQ(lt_tel_record_to_envelope(r, &pb, &env), LT_OK);
        const Looptune__RunStart *rs = env->run_start;
        w->n_kernels = rs->n_kernels;
        if (rs->n_kernels) {
            const Looptune__KernelParams *k = rs->kernels[rs->n_kernels - 1];
            snprintf(w->last_node, sizeof w->last_node, "%s", k->node);
            snprintf(w->last_kernel, sizeof w->last_kernel, "%s", k->kernel);
            snprintf(w->last_shape, sizeof w->last_shape, "%s", k->shape);
            snprintf(w->last_cshape, sizeof w->last_cshape, "%s", k->config_shape);
            w->last_n_params = k->n_params;
            w->last_value = k->n_params ? k->params[0]->value : -1;
        }
        lt_tel_pb_free(&pb);
    }
    return mem_emit(w->ms, r);
}

static void wire_close(void *ctx) { mem_close(((wire_sink *)ctx)->ms); }

/* A run that names its whole-step tunables and its decode step key: the run
 * start carries the entries (after the nodes, node "", the key), and every
 * window ends with one "step" record counting its steps. */
static void test_step_entries(void) {
    lt_program *p = syn_program(1);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    const char *key = "llama:d288:h768:l6:q8_0:t2:decode";
    const char *pkey = "llama:d288:h768:l6:q8_0:t2:prefill";
    lt_tel_node_desc e[3] = {
        {.node = -1, .label = "", .kernel = "looped", .shape = key, .n_params = 2,
         .params = {{"tiles_per_thread", 8, 0}, {"prefetch_kb", 256, 1}}},
        {.node = -1, .label = "", .kernel = "threads", .shape = key, .n_params = 1,
         .params = {{"threads", 0, 0}}},
        {.node = -1, .label = "", .kernel = "threads", .shape = pkey, .n_params = 1,
         .params = {{"threads", 1, 0}}},
    };
    run_result r;
    memset(&r, 0, sizeof r);
    wire_sink ws = {.ms = &r.ms};
    lt_tel_opts o = {.program = p, .pool = pool, .model = "synthetic", .window_tokens = 10,
                     .window_ms = 600000, .drain_ms = 5, .step_entries = e, .n_step_entries = 3,
                     .step_shape = key};
    o.sink = (lt_tel_sink){.emit = wire_emit, .flush = mem_flush, .close = wire_close, .ctx = &ws};
    ASSERT_EQ(lt_tel_open(&r.tel, &o), LT_OK);
    if (!r.tel) return;
    lt_tel_begin(r.tel);
    for (int s = 0; s < 25; s++) {
        lt_step st = {.pos = s, .n_tokens = 1};
        ASSERT_EQ(exec_step(LT_EXEC_LOOPED, p, pool, &st, NULL), LT_OK);
        lt_tel_step_end(r.tel, &st);
    }
    lt_tel_close(r.tel, &r.st);
    const mem_sink *s = &r.ms;
    ASSERT_EQ(s->v[0].kind, LT_TEL_RUN_START);
    ASSERT_EQ(s->v[0].n_nodes, 4);
    ASSERT_EQ(s->v[0].n_step_entries, 3);
    ASSERT_STREQ(s->v[0].entry_kernel[0], "looped");
    ASSERT_STREQ(s->v[0].entry_shape[1], key);
    ASSERT_STREQ(s->v[0].entry_kernel[2], "threads");
    ASSERT_STREQ(s->v[0].entry_shape[2], pkey);
    ASSERT_EQ(s->v[0].entry_value0[2], 1);
    /* on the wire: 4 nodes, then the 3 entries; the last is the prefill threads */
    ASSERT_EQ(ws.n_kernels, 7);
    ASSERT_STREQ(ws.last_node, "");
    ASSERT_STREQ(ws.last_kernel, "threads");
    ASSERT_STREQ(ws.last_shape, pkey);
    ASSERT_STREQ(ws.last_cshape, pkey);
    ASSERT_EQ(ws.last_n_params, 1);
    ASSERT_EQ(ws.last_value, 1);
    /* windows of 10, 10 and 5 steps, each closed by its step record */
    ASSERT_EQ(r.st.windows, 3);
    int n_step = 0;
    uint64_t counted = 0;
    for (size_t i = 0; i < s->n; i++) {
        const mem_rec *w = &s->v[i];
        if (w->kind != LT_TEL_KERNEL_WINDOW || w->node >= 0) continue;
        ASSERT_STREQ(w->kernel, LT_TEL_STEP_KERNEL);
        ASSERT_STREQ(w->shape, key);
        ASSERT_EQ(w->w.window, (uint64_t)n_step);
        ASSERT_EQ(w->w.count, w->w.window < 2 ? 10 : 5);
        ASSERT_EQ(w->w.count, w->w.steps);
        ASSERT_TRUE(w->w.min_ns <= w->w.median_ns && w->w.max_ns >= w->w.p90_ns);
        /* the steps tile the window */
        ASSERT_EQ(w->w.total_ns, w->w.t_end_ns - w->w.t_start_ns);
        /* the last record of its window */
        ASSERT_TRUE(i + 1 < s->n && (s->v[i + 1].kind != LT_TEL_KERNEL_WINDOW ||
                                     s->v[i + 1].w.window == w->w.window + 1));
        counted += w->w.count;
        n_step++;
    }
    ASSERT_EQ(n_step, 3);
    ASSERT_EQ(counted, 25);
    mem_free(&r.ms);
    lt_pool_free(pool);
    lt_program_free(p);
}

int main(void) {
    test_step_entries();
    test_windows_by_tokens(LT_EXEC_DISPATCH, 1);
    test_windows_by_tokens(LT_EXEC_DISPATCH, 2);
    test_windows_by_tokens(LT_EXEC_LOOPED, 2);
    test_windows_by_time();
    test_ring_full_drops();
    test_sink_drops();
    test_counters_consistent();
    test_retag_phases(LT_EXEC_LOOPED);
    test_retag_phases(LT_EXEC_DISPATCH);
    exec_test_free();
    return lt_test_finish();
}
