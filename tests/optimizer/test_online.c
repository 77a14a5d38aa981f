/* The run side of online tuning on a real program: a valid control changes
 * every node it names (every LOOP iteration) at the next token boundary; a
 * trial alternates A B, B A phases of the given length and ends on the
 * incumbent; the program computes the same result under every configuration;
 * malformed controls, controls for another run and configurations outside
 * the space are refused and change nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/optimizer.h"
#include "test.h"

enum { ROWS = 64, COLS = 128, LAYERS = 3 };
static float W[LAYERS][ROWS * COLS], X[COLS];

static lt_program *build(int *node0) {
    lt_program *p;
    LT_ASSERT(lt_program_init(&p, "mv3") == LT_OK);
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, ROWS, 1, 1, 1, NULL);
    int iy = lt_program_add_buffer(p, "y", LT_BUF_ACT, &t);
    lt_tensor_init(&t, LT_F32, COLS, 1, 1, 1, X);
    int ix = lt_program_add_buffer(p, "x", LT_BUF_WEIGHT, &t);
    for (int l = 0; l < LAYERS; l++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", l);
        lt_tensor_init(&t, LT_F32, COLS, ROWS, 1, 1, W[l]);
        int iw = lt_program_add_buffer(p, name, LT_BUF_WEIGHT, &t);
        int n = lt_program_add_node(p, LT_K_MATVEC, (int[]){iy, iw, ix}, 3, NULL, NULL, "mv");
        if (l == 0) *node0 = n;
    }
    LT_ASSERT(lt_pass_kernel_looping(p) == 1);
    LT_ASSERT(lt_program_finalize(p) == LT_OK);
    return p;
}

/* A control envelope; params "name=value,..." (NULL: none). */
static void control(lt_online *o, const char *run, const char *kernel, const char *shape,
                    const char *params, uint32_t pairs, uint32_t ptok) {
    Looptune__Envelope env;
    lt_envelope_init(&env);
    Looptune__Control c = LOOPTUNE__CONTROL__INIT;
    Looptune__Param prm[LT_MAX_PARAMS + 2], *pp[LT_MAX_PARAMS + 2];
    char names[LT_MAX_PARAMS + 2][32];
    size_t n = 0;
    if (params) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", params);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(tok, '=');
            *eq = '\0';
            looptune__param__init(&prm[n]);
            snprintf(names[n], sizeof names[n], "%s", tok);
            prm[n].name = names[n];
            prm[n].value = atoll(eq + 1);
            pp[n] = &prm[n];
            n++;
        }
    }
    c.run_id = (char *)run;
    c.kernel = (char *)kernel;
    c.shape = (char *)shape;
    c.params = pp;
    c.n_params = n;
    c.candidate_id = "c1";
    c.trial_pairs = pairs;
    c.phase_tokens = ptok;
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CONTROL;
    env.control = &c;
    uint8_t *buf;
    size_t len;
    ASSERT_EQ(lt_envelope_encode(&env, &buf, &len), LT_OK);
    lt_online_submit(o, buf, len);
    free(buf);
}

static int32_t param(const lt_program *p, int node, int k) {
    lt_node_info ni;
    lt_program_node(p, node, &ni);
    return ni.params.v[k];
}

/* Runs one step and checks y against a scalar reference of the last layer
 * (every layer writes y from the same x; the last one wins). */
static void run_and_check(lt_program *p, lt_pool *pool) {
    lt_step st = {.pos = 0, .n_tokens = 1};
    ASSERT_EQ(lt_exec_looped(p, pool, &st, NULL), LT_OK);
    const float *y = lt_program_buffer(p, lt_program_find_buffer(p, "y"))->data;
    double worst = 0;
    for (int r = 0; r < ROWS; r++) {
        double acc = 0;
        for (int k = 0; k < COLS; k++) acc += (double)W[LAYERS - 1][r * COLS + k] * X[k];
        worst = fmax(worst, fabs(acc - y[r]));
    }
    ASSERT_TRUE(worst < 1e-3);
}

int main(void) {
    uint64_t s = 7;
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < ROWS * COLS; i++) {
            s = s * 6364136223846793005ull + 1;
            W[l][i] = (float)((double)(s >> 40) / (1 << 24) - 0.5);
        }
    for (int k = 0; k < COLS; k++) X[k] = (float)sin(k);
    int node0 = 0;
    lt_program *p = build(&node0);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    char shape[96];
    lt_call_key(LT_K_MATVEC, lt_program_call(p, node0), shape, sizeof shape);
    FILE *devnull = fopen("/dev/null", "w");
    lt_online *o;
    lt_online_opts oo = {.run_id = "run-a", .program = p, .log = devnull};
    ASSERT_EQ(lt_online_open(&o, &oo), LT_OK);
    int n_nodes = lt_program_n_nodes(p);
    lt_space sp;
    lt_space_by_name("matvec", &sp);
    lt_params def; /* what the nodes start with: the active path's defaults */
    lt_params_default(lt_kernel_get(LT_K_MATVEC), &def);

    /* refused: nothing may change */
    const char *good = "rows_per_task=16,unroll=4,k_block=0,prefetch=1024,act_int16=1,act_int8=1";
    control(o, "run-b", "matvec", shape, good, 0, 0);          /* another run: ignored */
    control(o, "run-a", "nosuch", shape, good, 0, 0);          /* unknown kernel */
    control(o, "run-a", "matvec", "f32:1x1:decode", good, 0, 0); /* no such shape */
    control(o, "run-a", "matvec", shape, "rows_per_task=16,unroll=4,k_block=0,prefetch=1024", 0, 0);
    control(o, "run-a", "matvec", shape,
            "rows_per_task=16,unroll=3,k_block=0,prefetch=1024,"
            "act_int16=1,act_int8=1", 0, 0); /* 3: not allowed */
    control(o, "run-a", "matvec", shape,
            "rows_per_task=16,unroll=4,k_block=0,prefetch=1024,"
            "act_int16=1,act_int8=1,bogus=1", 0, 0);
    control(o, "run-a", "matvec", shape, good, 65, 4);         /* too many pairs */
    control(o, "run-a", "matvec", shape, good, 2, 0);          /* phases of 0 steps */
    control(o, "run-a", "looped", "", "tiles_per_thread=8", 0, 0); /* not a node kernel */
    lt_online_submit(o, "\x08\x01\x12\xff", 4);                 /* garbage */
    {
        Looptune__Envelope env; /* a record of another kind */
        lt_envelope_init(&env);
        Looptune__RunEnd re = LOOPTUNE__RUN_END__INIT;
        re.run_id = "run-a";
        env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END;
        env.run_end = &re;
        uint8_t *buf;
        size_t len;
        ASSERT_EQ(lt_envelope_encode(&env, &buf, &len), LT_OK);
        lt_online_submit(o, buf, len);
        free(buf);
    }
    lt_online_step(o);
    lt_online_stats st;
    lt_online_stats_get(o, &st);
    ASSERT_EQ(st.received, 11);
    ASSERT_EQ(st.ignored, 1);
    ASSERT_EQ(st.rejected, 10);
    ASSERT_EQ(st.applied, 0);
    for (int n = 0; n < n_nodes; n++)
        for (int k = 0; k < sp.n_params; k++) ASSERT_EQ(param(p, n, k), def.v[k]);

    /* a new incumbent: every iteration of the looped node */
    control(o, "run-a", "matvec", shape, good, 0, 0);
    ASSERT_EQ(param(p, node0, 1), def.v[1]); /* not before the boundary */
    lt_online_step(o);
    for (int n = 0; n < n_nodes; n++) {
        ASSERT_EQ(param(p, n, 0), 16);
        ASSERT_EQ(param(p, n, 1), 4);
        ASSERT_EQ(param(p, n, 3), 1024);
    }
    run_and_check(p, pool);

    /* a trial: 2 pairs of 3 steps: A A A B B B | B B B A A A, then the incumbent */
    control(o, "", "matvec", shape, "rows_per_task=64,unroll=2,k_block=256,prefetch=0,"
                                    "act_int16=1,act_int8=1",
            2, 3);
    lt_online_step(o);
    const int expect_b[12] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0};
    for (int t = 0; t < 12; t++) {
        ASSERT_EQ(lt_online_step_kind(o), expect_b[t] ? 2 : 1);
        int32_t rpt = param(p, node0, 0);
        ASSERT_EQ(rpt, expect_b[t] ? 64 : 16);
        ASSERT_EQ(param(p, n_nodes - 1, 0), rpt); /* all iterations together */
        run_and_check(p, pool);
        lt_online_step(o);
    }
    ASSERT_EQ(lt_online_step_kind(o), 0);
    ASSERT_EQ(param(p, node0, 0), 16);
    ASSERT_EQ(param(p, node0, 2), 0);
    lt_online_stats_get(o, &st);
    ASSERT_EQ(st.trials, 1);
    ASSERT_EQ(st.trial_tokens, 12);
    ASSERT_EQ(st.candidate_tokens, 6);

    /* a trial cut short by a new incumbent: the trial's candidate never stays */
    control(o, "run-a", "matvec", shape, "rows_per_task=8,unroll=1,k_block=0,prefetch=0,"
                                         "act_int16=1,act_int8=1",
            4, 2);
    lt_online_step(o);
    lt_online_step(o);
    lt_online_step(o); /* now in a candidate phase */
    ASSERT_EQ(param(p, node0, 0), 8);
    control(o, "run-a", "matvec", shape, good, 0, 0);
    lt_online_step(o);
    ASSERT_EQ(lt_online_step_kind(o), 0);
    ASSERT_EQ(param(p, node0, 0), 16);
    ASSERT_EQ(param(p, n_nodes - 1, 0), 16);

    ASSERT_TRUE(lt_online_report(o, devnull) == 1);
    lt_online_close(o);
    fclose(devnull);
    lt_pool_free(pool);
    lt_program_free(p);
    return lt_test_finish();
}
