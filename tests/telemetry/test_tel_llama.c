/* Telemetry on the real decoder (stories260K, two threads, both executors),
 * driven as `looptune run` drives it: observing starts at the first sampled
 * token, every decode step ends at the next one. The windows agree with the
 * run: every node counted once per decode step, analytic bytes and FLOPs
 * summed over the windows equal the program's cost summed over the decode
 * positions (computed here independently with lt_program_cost), and node
 * time fits in the decode time. */
#include <stdlib.h>

#include "looptune/model.h"
#include "tel_test.h"
#include "model_test.h"
#include "test.h"

typedef struct {
    lt_tel *tel;
    int64_t n_prompt, calls;
} drive;

static int on_token(void *user, int32_t prev, int32_t tok) {
    (void)prev;
    (void)tok;
    drive *d = user;
    if (d->calls == 0) {
        lt_tel_begin(d->tel);
    } else {
        /* the eval before this token fed the previous one at this position */
        lt_step st = {.pos = d->n_prompt + d->calls - 1, .n_tokens = 1};
        lt_tel_step_end(d->tel, &st);
    }
    d->calls++;
    return 0;
}

static void run(lt_model *m, lt_pool *pool, lt_executor ex) {
    lt_llama *l;
    lt_llama_opts lo = {.executor = (int)ex, .ctx_len = 128};
    ASSERT_EQ(lt_llama_init(&l, m, pool, &lo), LT_OK);
    lt_program *p;
    ASSERT_EQ(lt_llama_program(l, 1, &p), LT_OK);
    const int n_nodes = lt_program_n_nodes(p);
    lt_sampler *s;
    ASSERT_EQ(lt_sampler_init(&s, m->cfg.vocab_size, 0.0f, 1.0f, 1), LT_OK);

    mem_sink ms = {0};
    lt_tel_opts o = {.program = p, .pool = pool, .sink = mem_sink_of(&ms), .window_tokens = 16,
                     .drain_ms = 20, .model = "stories260K", .dtype = "f32",
                     .executor = lt_executor_name(ex)};
    drive d = {.n_prompt = 3};
    ASSERT_EQ(lt_tel_open(&d.tel, &o), LT_OK);
    int32_t prompt[3] = {1, 403, 407};
    lt_gen_opts go = {.n_new = 60, .stop_token = -1};
    lt_gen_stats gs;
    ASSERT_EQ(lt_generate(l, s, prompt, 3, &go, on_token, &d, &gs), LT_OK);
    lt_tel_end(d.tel);
    lt_tel_stats st;
    lt_tel_close(d.tel, &st);

    const int64_t steps = 59; /* 60 tokens sampled, 59 fed back */
    ASSERT_EQ(st.steps, steps);
    ASSERT_EQ(st.windows, 4); /* 16 + 16 + 16 + 11 */
    ASSERT_EQ(st.ring_dropped, 0);
    ASSERT_EQ(mem_count(&ms, LT_TEL_KERNEL_WINDOW), 4 * (size_t)n_nodes);
    ASSERT_EQ(ms.v[0].kind, LT_TEL_RUN_START);
    ASSERT_EQ(ms.v[0].n_nodes, n_nodes);

    /* independent reference: the program's cost at every decode position */
    double ref_bytes = 0, ref_flops = 0;
    for (int64_t i = 0; i < steps; i++) {
        lt_step step = {.pos = 3 + i, .n_tokens = 1};
        double b, f;
        lt_program_cost(p, &step, &b, &f);
        ref_bytes += b;
        ref_flops += f;
    }
    double bytes = 0, flops = 0;
    uint64_t node_ns = 0;
    int64_t *count = calloc((size_t)n_nodes, sizeof *count);
    for (size_t i = 0; i < ms.n; i++) {
        const mem_rec *w = &ms.v[i];
        if (w->kind != LT_TEL_KERNEL_WINDOW) continue;
        bytes += w->w.bytes * (double)w->w.count;
        flops += w->w.flops * (double)w->w.count;
        node_ns += w->w.total_ns;
        count[w->node] += (int64_t)w->w.count;
        lt_node_info info;
        lt_program_node(p, w->node, &info);
        ASSERT_STREQ(w->label, info.label);
        ASSERT_STREQ(w->kernel, lt_kernel_get(info.kernel)->name);
    }
    for (int j = 0; j < n_nodes; j++) ASSERT_EQ(count[j], steps);
    free(count);
    ASSERT_NEAR(bytes, ref_bytes, 1e-9 * ref_bytes);
    ASSERT_NEAR(flops, ref_flops, 1e-9 * ref_flops);
    /* Decode time: telemetry's runs from the first sampled token to the
     * last, the generation loop's from the end of the prefill (one sampling
     * more): never longer, and most of it. Node time: nodes of one step lie
     * inside it, at most nth at a time (exactly 1 under dispatch); under
     * dispatch most of a step is in its nodes, while the looped executor's
     * threads also wait for each other, the more so on a loaded machine. */
    double tel_s = (double)st.decode_ns * 1e-9;
    printf("%s: decode %.2f ms (loop: %.2f ms), node time %.2f ms\n", lt_executor_name(ex),
           tel_s * 1e3, gs.decode_s * 1e3, (double)node_ns * 1e-6);
    ASSERT_TRUE(tel_s <= gs.decode_s);
    ASSERT_TRUE(tel_s >= 0.8 * gs.decode_s);
    double nth = ex == LT_EXEC_DISPATCH ? 1.0 : (double)lt_pool_size(pool);
    ASSERT_TRUE((double)node_ns <= nth * (double)st.decode_ns);
    ASSERT_TRUE((double)node_ns >= (ex == LT_EXEC_DISPATCH ? 0.3 : 0.05) * (double)st.decode_ns);
    const mem_rec *e = &ms.v[ms.n - 1];
    ASSERT_EQ(e->kind, LT_TEL_RUN_END);
    ASSERT_EQ(e->e.tokens, steps);

    mem_free(&ms);
    lt_sampler_free(s);
    lt_llama_free(l);
}

int main(void) {
    lt_model *m = lt_test_stories260k();
    if (!m) return lt_test_finish();
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    run(m, pool, LT_EXEC_DISPATCH);
    run(m, pool, LT_EXEC_LOOPED);
    lt_pool_free(pool);
    lt_model_close(m);
    return lt_test_finish();
}
