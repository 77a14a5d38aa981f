/* A parameter that does nothing on an ISA is no dimension of that ISA's
 * space and is not reported by telemetry there:
 * - every kernel's space fitted to every ISA keeps exactly the parameters
 *   that apply (lt_param_applies), the others fixed at their default;
 * - the claim is checked against the kernels: on the portable path, every
 *   value of matvec's and matmul's inapplicable parameters gives the same
 *   bits (q8_0 and f32 weights, 1 and 2 threads), so fixing them loses
 *   nothing; an exhaustive search over the portable space never proposes a
 *   second value of them;
 * - the host class names its ISA, which is what the optimizer fits to;
 * - telemetry's node descriptors under the portable ISA leave those
 *   parameters out and report the others with their kernel index. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/tune.h"
#include "telemetry/tel_internal.h"
#include "telemetry/tel_test.h"
#include "test.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static void test_fit_every_kernel(void) {
    for (int id = 0; id < LT_KERNEL_COUNT; id++) {
        const lt_kernel *k = lt_kernel_get((lt_kernel_id)id);
        if (!k) continue;
        for (int isa = 0; isa < LT_ISA_COUNT; isa++) {
            lt_space s;
            lt_space_from_kernel(&s, k);
            lt_space_fit_isa(&s, (lt_isa)isa);
            ASSERT_EQ(s.n_params, k->n_params);
            for (int j = 0; j < k->n_params; j++) {
                const lt_param_def *d = &k->params[j];
                ASSERT_EQ(s.params[j].def, lt_param_default(d, (lt_isa)isa));
                if (lt_param_applies(d, (lt_isa)isa)) {
                    ASSERT_EQ(s.params[j].n_values, d->n_values);
                } else {
                    ASSERT_EQ(s.params[j].n_values, 1);
                    ASSERT_EQ(s.params[j].values[0], lt_param_default(d, (lt_isa)isa));
                }
            }
        }
    }
    /* the ones that act only on the vector paths, by name */
    static const char *const vector_only[][4] = {{"matvec", "unroll", "k_block", "prefetch"},
                                                 {"matmul", "n_block", "m_block", "k_block"}};
    for (int i = 0; i < 2; i++) {
        const lt_kernel *k = lt_kernel_find(vector_only[i][0]);
        ASSERT_TRUE(k != NULL);
        if (!k) continue;
        for (int j = 1; j < 4; j++) {
            int p = lt_kernel_param_index(k, vector_only[i][j]);
            ASSERT_TRUE(p >= 0);
            if (p < 0) continue;
            ASSERT_TRUE(!lt_param_applies(&k->params[p], LT_ISA_PORTABLE));
            ASSERT_TRUE(lt_param_applies(&k->params[p], LT_ISA_AVX2));
            ASSERT_TRUE(lt_param_applies(&k->params[p], LT_ISA_AVX512));
        }
    }
}

/* y of kernel id on its portable path for params p: W (rows x cols, dtype
 * dt, from the f32 values w), x of n tokens; nth threads called in turn. */
static void run_portable(lt_kernel_id id, lt_dtype dt, const float *w, const float *x,
                         int64_t n, int64_t rows, int64_t cols, const lt_params *p, int nth,
                         float *y) {
    const size_t rb = lt_dtype_row_bytes(dt, cols);
    char *wq = malloc(rb * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) lt_row_from_f32(dt, w + r * cols, wq + rb * (size_t)r, cols);
    lt_tensor tw, tx, ty;
    lt_tensor_init(&tw, dt, cols, rows, 1, 1, wq);
    lt_tensor_init(&tx, LT_F32, cols, n, 1, 1, (void *)x);
    lt_tensor_init(&ty, LT_F32, rows, n, 1, 1, y);
    lt_call c = {.op = {&ty, &tw, &tx}, .params = *p};
    ASSERT_EQ(lt_call_check(id, &c), LT_OK);
    lt_step step = {.pos = 0, .n_tokens = n, .tokens = NULL, .seq = 0};
    lt_kernel_fn fn = lt_kernel_fn_for(lt_kernel_get(id), LT_ISA_PORTABLE);
    for (int ith = 0; ith < nth; ith++) fn(&c, &step, ith, nth);
    free(wq);
}

static void test_portable_ignores_them(void) {
    enum { ROWS = 70, COLS = 2080, N = 5 };
    float *w = malloc(sizeof(float) * ROWS * COLS), *x = malloc(sizeof(float) * N * COLS);
    float *y0 = malloc(sizeof(float) * N * ROWS), *y1 = malloc(sizeof(float) * N * ROWS);
    for (int i = 0; i < ROWS * COLS; i++) w[i] = frand();
    for (int i = 0; i < N * COLS; i++) x[i] = frand();
    const lt_kernel_id ids[2] = {LT_K_MATVEC, LT_K_MATMUL};
    const lt_dtype dts[2] = {LT_F32, LT_Q8_0};
    for (int ki = 0; ki < 2; ki++) {
        const lt_kernel *k = lt_kernel_get(ids[ki]);
        const int64_t n = ids[ki] == LT_K_MATVEC ? 1 : N;
        for (int di = 0; di < 2; di++)
            for (int nth = 1; nth <= 2; nth++)
                for (int j = 0; j < k->n_params; j++) {
                    if (lt_param_applies(&k->params[j], LT_ISA_PORTABLE)) continue;
                    lt_params p;
                    lt_params_default(k, &p);
                    run_portable(ids[ki], dts[di], w, x, n, ROWS, COLS, &p, nth, y0);
                    for (int v = 0; v < k->params[j].n_values; v++) {
                        p.v[j] = k->params[j].values[v];
                        run_portable(ids[ki], dts[di], w, x, n, ROWS, COLS, &p, nth, y1);
                        int same = !memcmp(y0, y1, sizeof(float) * (size_t)(n * ROWS));
                        if (!same)
                            fprintf(stderr, "  %s %s nth %d: %s = %d changes y\n", k->name,
                                    lt_dtype_name(dts[di]), nth, k->params[j].name, p.v[j]);
                        ASSERT_TRUE(same);
                    }
                }
    }
    free(w);
    free(x);
    free(y0);
    free(y1);
}

static void test_search_skips_them(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    lt_space s;
    lt_space_from_kernel(&s, k);
    lt_space_fit_isa(&s, LT_ISA_PORTABLE);
    lt_strategy *st;
    ASSERT_EQ(lt_strategy_init(&st, LT_STRAT_EXHAUSTIVE, &s, NULL, 1), LT_OK);
    int points = 0;
    lt_params p;
    while (lt_strategy_propose(st, &p, 1) == 1) {
        for (int j = 0; j < k->n_params; j++)
            if (!lt_param_applies(&k->params[j], LT_ISA_PORTABLE))
                ASSERT_EQ(p.v[j], lt_param_default(&k->params[j], LT_ISA_PORTABLE));
        const double cost = 1.0 + points;
        lt_strategy_observe(st, &p, &cost, 1);
        points++;
    }
    /* rows_per_task x act_int16 x act_int8 x tok_chunk_kb (no regime fitted) */
    ASSERT_EQ(points, 7 * 2 * 2 * 7);
    lt_strategy_free(st);
}

static void test_host_class_isa(void) {
    lt_isa isa;
    ASSERT_EQ(lt_host_class_isa("AMD-EPYC-7B13:avx2:2c", &isa), LT_OK);
    ASSERT_EQ(isa, LT_ISA_AVX2);
    ASSERT_EQ(lt_host_class_isa("Intel-Xeon:portable:64c", &isa), LT_OK);
    ASSERT_EQ(isa, LT_ISA_PORTABLE);
    ASSERT_TRUE(lt_host_class_isa("Intel-Xeon:avx9:2c", &isa) != LT_OK);
    ASSERT_TRUE(lt_host_class_isa("no-isa-here", &isa) != LT_OK);
    ASSERT_TRUE(lt_host_class_isa(NULL, &isa) != LT_OK);
    lt_host h;
    lt_host_detect(&h);
    ASSERT_EQ(lt_host_class_isa(h.host_class, &isa), LT_OK);
    ASSERT_EQ(isa, lt_isa_active());
}

/* The matvec node of the synthetic program as telemetry describes it. */
static void check_desc(lt_isa isa) {
    lt_isa_force(isa);
    lt_program *p = syn_program(0);
    ASSERT_TRUE(p != NULL);
    if (!p) return;
    lt__tel_nodes d;
    ASSERT_EQ(lt__tel_nodes_init(&d, p), LT_OK);
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    const lt_tel_node_desc *nd = &d.nodes[1];
    int want = 0;
    for (int j = 0; j < k->n_params; j++) /* a decode call: not tok_chunk_kb */
        want += lt_param_applies(&k->params[j], isa) &&
                lt_param_acts_in(&k->params[j], LT_REGIME_DECODE);
    ASSERT_EQ(nd->n_params, want);
    for (int i = 0; i < nd->n_params; i++) {
        const int j = nd->params[i].index;
        ASSERT_TRUE(j >= 0 && j < k->n_params);
        if (j < 0 || j >= k->n_params) continue;
        ASSERT_TRUE(lt_param_applies(&k->params[j], isa));
        ASSERT_EQ(strcmp(nd->params[i].name, k->params[j].name), 0);
        ASSERT_EQ(nd->params[i].value, lt_param_default(&k->params[j], isa));
    }
    lt__tel_nodes_free(&d);
    lt_program_free(p);
    lt_isa_force((lt_isa)(LT_ISA_COUNT - 1));
}

/* A q4_k call's space keeps only what acts on its path (rows_per_task,
 * prefetch where vectors run); an f32 call keeps the blocking but not q8_0's
 * activation modes; q8_0 keeps everything; the same from a shape key. An
 * interleaved q8_0 W takes q4_0's integer dots: q4_0's space, under a key
 * of its own. */
static void test_fit_dtype(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    static const struct {
        lt_dtype t;
        const char *key;
        int64_t size; /* on AVX-512: 7 rows_per_task x 4 unroll x 5 k_block x 7 prefetch x 2 x 2 */
    } cases[] = {{LT_Q4_K, "q4_k:256x512:decode", 7 * 7},
                 {LT_Q4_0, "q4_0:256x512:decode", 7 * 7},
                 {LT_F32, "f32:256x512:decode", 7 * 4 * 5 * 7},
                 {LT_Q8_0, "q8_0:256x512:decode", 7 * 4 * 5 * 7 * 2 * 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lt_tensor w = {.dtype = cases[i].t};
        lt_call c = {.op = {NULL, &w}};
        lt_space a, b;
        lt_space_from_kernel(&a, k);
        lt_space_fit_isa(&a, LT_ISA_AVX512);
        b = a;
        lt_space_fit_call(&a, LT_K_MATVEC, &c);
        lt_space_fit_shape(&b, "matvec", cases[i].key);
        ASSERT_EQ(lt_space_size(&a), cases[i].size);
        ASSERT_EQ(lt_space_size(&b), cases[i].size);
        for (int j = 0; j < k->n_params; j++)
            if (!lt_param_acts_on(&k->params[j], cases[i].t))
                ASSERT_EQ(a.params[j].values[0], lt_param_default(&k->params[j], LT_ISA_AVX512));
    }
    /* interleaved q8_0: its key names the layout, and call and key both
     * give q4_0's space; its plain and split rows keep q8_0's key */
    static const struct {
        lt_layout l;
        const char *key;
        int64_t size;
    } q8[] = {{LT_LAYOUT_X16, "q8_0x16:256x512:decode", 7 * 7},
              {LT_LAYOUT_Q8_SPLIT, "q8_0:256x512:decode", 7 * 4 * 5 * 7 * 2 * 2},
              {LT_LAYOUT_PLAIN, "q8_0:256x512:decode", 7 * 4 * 5 * 7 * 2 * 2}};
    for (size_t i = 0; i < sizeof q8 / sizeof q8[0]; i++) {
        lt_tensor w = {.dtype = LT_Q8_0, .layout = q8[i].l, .ne = {256, 512, 1, 1}};
        lt_tensor y = {.dtype = LT_F32, .ne = {512, 1, 1, 1}};
        lt_call c = {.op = {&y, &w}};
        char key[LT_KEY_MAX];
        lt_call_key(LT_K_MATVEC, &c, key, sizeof key);
        ASSERT_EQ(strcmp(key, q8[i].key), 0);
        lt_dtype t;
        lt_layout l;
        ASSERT_EQ(lt_shape_parse_weight(key, &t, &l), LT_OK);
        ASSERT_EQ(t, LT_Q8_0);
        ASSERT_EQ(l == LT_LAYOUT_X16, q8[i].l == LT_LAYOUT_X16);
        lt_space a, b;
        lt_space_from_kernel(&a, k);
        lt_space_fit_isa(&a, LT_ISA_AVX512);
        b = a;
        lt_space_fit_call(&a, LT_K_MATVEC, &c);
        lt_space_fit_shape(&b, "matvec", key);
        ASSERT_EQ(lt_space_size(&a), q8[i].size);
        ASSERT_EQ(lt_space_size(&b), q8[i].size);
    }
    /* only a layout that takes a path of its own is named; anything else
     * is no weight (and leaves the key's space whole) */
    static const char *const bad[] = {"q4_kx16:256x512:decode", "x16:1x1:decode", ":1x1:decode",
                                      "q8_0x16x16:1x1:decode", "q8_0x1:1x1:decode", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lt_dtype t;
        lt_layout l;
        ASSERT_EQ(lt_shape_parse_weight(bad[i], &t, &l), LT_EINVAL);
    }
    lt_space b;
    lt_space_from_kernel(&b, k);
    lt_space_fit_isa(&b, LT_ISA_AVX512);
    lt_space_fit_shape(&b, "matvec", "q4_kx16:256x512:decode");
    ASSERT_EQ(lt_space_size(&b), 7 * 4 * 5 * 7 * 2 * 2); /* every dimension of decode */
}

/* tok_chunk_kb acts on a call of several tokens of a batched decode step
 * alone: a batch call's space (and a ":batch" key's) has its 7 values, a
 * decode or prefill one's only its default. */
static void test_fit_regime(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    const int tc = lt_kernel_param_index(k, "tok_chunk_kb");
    ASSERT_TRUE(tc >= 0);
    if (tc < 0) return;
    lt_tensor w = {.dtype = LT_Q8_0}, y = {.dtype = LT_F32, .ne = {512, 3, 1, 1}};
    lt_call c = {.op = {&y, &w}};
    lt_space dec, bat, pre, kdec, kbat;
    lt_space_from_kernel(&dec, k);
    lt_space_fit_isa(&dec, LT_ISA_AVX512);
    bat = pre = kdec = kbat = dec;
    lt_space_fit_call(&pre, LT_K_MATVEC, &c); /* 3 tokens, no flag: prefill */
    c.flags = LT_CALL_BATCH;
    lt_space_fit_call(&bat, LT_K_MATVEC, &c);
    y.ne[1] = 1;
    lt_space_fit_call(&dec, LT_K_MATVEC, &c); /* one token: decode, flag or not */
    lt_space_fit_shape(&kdec, "matvec", "q8_0:256x512:decode");
    lt_space_fit_shape(&kbat, "matvec", "q8_0:256x512:batch:ia=1,0,0");
    ASSERT_EQ(bat.params[tc].n_values, 7);
    ASSERT_EQ(kbat.params[tc].n_values, 7);
    ASSERT_EQ(dec.params[tc].n_values, 1);
    ASSERT_EQ(pre.params[tc].n_values, 1);
    ASSERT_EQ(kdec.params[tc].n_values, 1);
    ASSERT_EQ(dec.params[tc].values[0], 256);
    ASSERT_EQ(lt_space_size(&bat), 7 * lt_space_size(&dec));
    ASSERT_EQ(lt_space_size(&kbat), lt_space_size(&bat));
    ASSERT_EQ(lt_space_size(&kdec), lt_space_size(&dec));
    /* a value stored without it (before it existed) reads with its default */
    lt_space full;
    lt_space_from_kernel(&full, k);
    lt_params p;
    ASSERT_EQ(lt_space_parse(&full, "rows_per_task=64,unroll=2,k_block=0,prefetch=512,"
                                    "act_int16=1,act_int8=1", &p), LT_OK);
    ASSERT_EQ(p.v[tc], 256);
    ASSERT_EQ(lt_space_parse(&full, "rows_per_task=64,unroll=2,k_block=0,prefetch=512,"
                                    "act_int16=1,act_int8=1,tok_chunk_kb=48", &p), LT_ECONFIG);
}

int main(void) {
    test_fit_dtype();
    test_fit_regime();
    test_fit_every_kernel();
    test_portable_ignores_them();
    test_search_skips_them();
    test_host_class_isa();
    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) check_desc((lt_isa)isa);
    return lt_test_finish();
}
