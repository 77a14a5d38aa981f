/* The file telemetry sink, no broker needed: a run's records go both to a
 * memory sink and to a file; the file, read back with lt_tel_file_next and
 * the wire codec, holds the same records in the same order, field by field
 * (both detail levels), including a retag's trial attribution and changed
 * parameter values. A truncated file is reported, not misread. */
#include <unistd.h>

#include "looptune/telemetry_sinks.h"
#include "telemetry/tel_test.h"
#include "test.h"
#include "exec_test.h"

typedef struct {
    lt_tel_sink a, b;
} tee;

static int tee_emit(void *ctx, const lt_tel_record *r) {
    tee *t = ctx;
    t->a.emit(t->a.ctx, r);
    return t->b.emit(t->b.ctx, r);
}
static int tee_flush(void *ctx, int ms) {
    tee *t = ctx;
    return t->b.flush ? t->b.flush(t->b.ctx, ms) : 0;
}
static void tee_stats(void *ctx, lt_tel_sink_stats *out) {
    tee *t = ctx;
    t->b.stats(t->b.ctx, out);
}
static void tee_close(void *ctx) {
    tee *t = ctx;
    t->a.close(t->a.ctx);
    t->b.close(t->b.ctx);
}

static void compare(const mem_rec *m, const Looptune__Envelope *e) {
    ASSERT_EQ(e->version, LT_PROTO_VERSION);
    switch (m->kind) {
    case LT_TEL_HOST:
        ASSERT_EQ(e->payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_HOST);
        if (e->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_HOST) return;
        ASSERT_STREQ(e->host->host_id, m->host.host_id);
        ASSERT_STREQ(e->host->fingerprint, m->host.fingerprint);
        ASSERT_EQ(e->host->n_isa_flags, m->host.n_isa_flags);
        ASSERT_NEAR(e->host->triad_gb_s, m->host.triad_gb_s, 0);
        ASSERT_NEAR(e->host->peak_gflops, m->host.peak_gflops, 0);
        break;
    case LT_TEL_RUN_START:
        ASSERT_EQ(e->payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START);
        if (e->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START) return;
        ASSERT_STREQ(e->run_start->run_id, m->run_id);
        ASSERT_EQ(e->run_start->n_kernels, m->n_nodes);
        ASSERT_EQ(e->run_start->threads, m->threads);
        ASSERT_STREQ(e->run_start->model, m->model);
        ASSERT_STREQ(e->run_start->executor, m->executor);
        ASSERT_TRUE(e->run_start->host != NULL);
        if (e->run_start->n_kernels >= 2) {
            ASSERT_STREQ(e->run_start->kernels[1]->node, "proj");
            ASSERT_STREQ(e->run_start->kernels[1]->kernel, "matvec");
            ASSERT_STREQ(e->run_start->kernels[1]->shape, "f32:64x32:decode");
            ASSERT_STREQ(e->run_start->kernels[1]->config_shape, "f32:64x32:decode");
            /* the parameters that act on this ISA's path in a decode call,
             * at its defaults */
            const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
            const lt_isa isa = lt_isa_active();
            size_t n = 0;
            for (int i = 0; i < k->n_params; i++) {
                if (!lt_param_applies(&k->params[i], isa) ||
                    !lt_param_acts_in(&k->params[i], LT_REGIME_DECODE))
                    continue;
                ASSERT_TRUE(n < e->run_start->kernels[1]->n_params);
                if (n >= e->run_start->kernels[1]->n_params) break;
                ASSERT_STREQ(e->run_start->kernels[1]->params[n]->name, k->params[i].name);
                ASSERT_EQ(e->run_start->kernels[1]->params[n]->value,
                          lt_param_default(&k->params[i], isa));
                n++;
            }
            ASSERT_EQ(e->run_start->kernels[1]->n_params, n);
        }
        break;
    case LT_TEL_RUN_END:
        ASSERT_EQ(e->payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END);
        if (e->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END) return;
        ASSERT_STREQ(e->run_end->run_id, m->run_id);
        ASSERT_EQ(e->run_end->tokens, m->e.tokens);
        ASSERT_NEAR(e->run_end->decode_s, m->e.decode_s, 0);
        ASSERT_NEAR(e->run_end->tok_s, m->e.tok_s, 0);
        ASSERT_EQ(e->run_end->dropped_records, m->e.dropped_records);
        break;
    case LT_TEL_KERNEL_WINDOW: {
        ASSERT_EQ(e->payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW);
        if (e->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW) return;
        const Looptune__KernelWindow *w = e->kernel_window;
        ASSERT_STREQ(w->run_id, m->run_id);
        ASSERT_STREQ(w->node, m->label);
        ASSERT_STREQ(w->kernel, m->kernel);
        ASSERT_STREQ(w->shape, m->shape);
        ASSERT_EQ(w->window, m->w.window);
        ASSERT_EQ(w->t_start_ns, m->w.t_start_ns);
        ASSERT_EQ(w->t_end_ns, m->w.t_end_ns);
        ASSERT_EQ(w->count, m->w.count);
        ASSERT_EQ(w->min_ns, m->w.min_ns);
        ASSERT_EQ(w->median_ns, m->w.median_ns);
        ASSERT_EQ(w->p90_ns, m->w.p90_ns);
        ASSERT_EQ(w->max_ns, m->w.max_ns);
        ASSERT_NEAR(w->bytes, m->w.bytes, 0);
        ASSERT_NEAR(w->flops, m->w.flops, 0);
        ASSERT_NEAR(w->gb_s, m->w.gb_s, 0);
        ASSERT_NEAR(w->gflops, m->w.gflops, 0);
        ASSERT_NEAR(w->wait_share, m->w.wait_share, 0);
        ASSERT_EQ(w->contention, m->w.contention);
        ASSERT_STREQ(w->candidate_id, m->candidate_id);
        ASSERT_EQ(w->on_candidate, m->w.on_candidate);
        ASSERT_EQ(w->pair, m->w.pair);
        ASSERT_EQ(w->steps, m->w.steps);
        ASSERT_EQ(w->total_ns, m->w.total_ns);
        ASSERT_EQ(w->n_params, m->n_params);
        for (size_t k = 0; k < w->n_params && k < LT_MAX_PARAMS; k++) {
            ASSERT_STREQ(w->params[k]->name, m->params[k].name);
            ASSERT_EQ(w->params[k]->value, m->params[k].value);
        }
        /* available counters by name, values only when read */
        size_t na = 0, nc = 0;
        for (int c = 0; c < LT_CTR_COUNT; c++) {
            if (!(m->w.available & (1u << c))) continue;
            const char *name = lt_tel_counter_name((lt_tel_counter)c);
            ASSERT_TRUE(na < w->n_available_counters);
            if (na < w->n_available_counters) ASSERT_STREQ(w->available_counters[na], name);
            na++;
            if (!m->w.counters_read) continue;
            ASSERT_TRUE(nc < w->n_counters);
            if (nc < w->n_counters) {
                ASSERT_STREQ(w->counters[nc]->name, name);
                ASSERT_EQ(w->counters[nc]->value, m->w.counters[c]);
            }
            nc++;
        }
        ASSERT_EQ(w->n_available_counters, na);
        ASSERT_EQ(w->n_counters, nc);
        break;
    }
    case LT_TEL_CALL_SAMPLE:
        ASSERT_EQ(e->payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE);
        if (e->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE) return;
        ASSERT_STREQ(e->call_sample->node, m->label);
        ASSERT_STREQ(e->call_sample->kernel, m->kernel);
        ASSERT_EQ(e->call_sample->token, m->c.token);
        ASSERT_EQ(e->call_sample->thread, m->c.thread);
        ASSERT_EQ(e->call_sample->start_ns, m->c.start_ns);
        ASSERT_EQ(e->call_sample->end_ns, m->c.end_ns);
        ASSERT_EQ(e->call_sample->wait_ns, m->c.wait_ns);
        ASSERT_NEAR(e->call_sample->bytes, m->c.bytes, 0);
        break;
    default: ASSERT_TRUE(!"unexpected record kind");
    }
}

static void round_trip(lt_tel_detail detail, const char *path) {
    lt_program *p = syn_program(2);
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    mem_sink ms = {0};
    tee t = {.a = mem_sink_of(&ms)};
    ASSERT_EQ(lt_tel_sink_file_open(&t.b, path), LT_OK);
    lt_tel_host host;
    lt_tel_host_describe(&host);
    host.triad_gb_s = 12.25;
    host.read_gb_s = 13.5;
    host.peak_gflops = 99.75;
    lt_tel_opts o = {.program = p, .pool = pool, .host = &host, .model = "syn.gguf",
                     .executor = "looped", .window_tokens = 4, .counters_every = 2,
                     .detail = detail, .drain_ms = 5,
                     .sink = {.emit = tee_emit, .flush = tee_flush, .stats = tee_stats,
                              .close = tee_close, .ctx = &t}};
    lt_tel *tel;
    ASSERT_EQ(lt_tel_open(&tel, &o), LT_OK);
    lt_tel_begin(tel);
    /* a trial on the matvec (node 1): candidate for steps 2..6, then none */
    lt_node_info info;
    lt_program_node(p, 1, &info);
    lt_params inc = info.params, cand = info.params;
    cand.v[0] = inc.v[0] == 64 ? 128 : 64; /* rows_per_task */
    for (int s = 0; s < 10; s++) {
        if (s == 2 || s == 7) {
            ASSERT_EQ(lt_program_set_params(p, 1, s == 2 ? &cand : &inc), LT_OK);
            ASSERT_EQ(lt_tel_retag(tel, s == 2 ? &(lt_tel_tag){"cand-\u00e9", true, 2} : NULL),
                      LT_OK);
        }
        lt_step st = {.pos = s, .n_tokens = 1};
        ASSERT_EQ(exec_step(LT_EXEC_LOOPED, p, pool, &st, NULL), LT_OK);
        lt_tel_step_end(tel, &st);
    }
    lt_tel_stats stats;
    lt_tel_close(tel, &stats);
    ASSERT_EQ(stats.sink.failed, 0);
    ASSERT_EQ((int64_t)ms.n, stats.sink.emitted);
    size_t windows = mem_count(&ms, LT_TEL_KERNEL_WINDOW);
    ASSERT_EQ(windows, 4 * 5); /* 2 | 4 1 | 3 steps (K = 4, retags at 2 and 7), 5 nodes */
    int tagged = 0;
    for (size_t i = 0; i < ms.n; i++) {
        const mem_rec *m = &ms.v[i];
        if (m->kind != LT_TEL_KERNEL_WINDOW) continue;
        bool in_trial = m->w.window == 1 || m->w.window == 2;
        ASSERT_STREQ(m->candidate_id, in_trial ? "cand-\u00e9" : "");
        if (m->node == 1) ASSERT_EQ(m->params[0].value, in_trial ? cand.v[0] : inc.v[0]);
        tagged += in_trial;
    }
    ASSERT_EQ(tagged, 2 * 5);
    if (detail == LT_TEL_DETAIL_PER_CALL) ASSERT_TRUE(mem_count(&ms, LT_TEL_CALL_SAMPLE) >= 50);

    FILE *f = fopen(path, "rb");
    ASSERT_TRUE(f != NULL);
    size_t i = 0;
    Looptune__Envelope *e;
    int rc;
    while ((rc = lt_tel_file_next(f, &e)) == 1) {
        ASSERT_TRUE(i < ms.n);
        if (i < ms.n) compare(&ms.v[i], e);
        lt_envelope_free(e);
        i++;
    }
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(i, ms.n);
    /* cut the file in the middle of its last record: reported, not misread */
    long size = ftell(f);
    fclose(f);
    ASSERT_EQ(truncate(path, size - 3), 0);
    f = fopen(path, "rb");
    i = 0;
    while ((rc = lt_tel_file_next(f, &e)) == 1) {
        lt_envelope_free(e);
        i++;
    }
    ASSERT_EQ(rc, LT_EFORMAT);
    ASSERT_EQ(i, ms.n - 1);
    ASSERT_TRUE(strstr(lt_errmsg(), "the file ends first") != NULL);
    fclose(f);
    unlink(path);
    mem_free(&ms);
    lt_pool_free(pool);
    lt_program_free(p);
}

int main(void) {
    const char *work = getenv("LT_WORK_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/tel-file-%ld.bin", work && *work ? work : "/tmp", (long)getpid());
    round_trip(LT_TEL_DETAIL_WINDOW, path);
    round_trip(LT_TEL_DETAIL_PER_CALL, path);
    /* an unwritable path is an error at open, naming it */
    lt_tel_sink s;
    ASSERT_EQ(lt_tel_sink_file_open(&s, "/nonexistent-dir/x.bin"), LT_EIO);
    ASSERT_TRUE(strstr(lt_errmsg(), "/nonexistent-dir/x.bin") != NULL);
    exec_test_free();
    return lt_test_finish();
}
