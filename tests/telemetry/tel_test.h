/* Helpers for the telemetry tests: a sink that keeps copies of every record
 * in memory (records' pointers die with the emit call), and a small
 * synthetic program whose costs are known by hand. */
#ifndef LT_TEST_TEL_H
#define LT_TEST_TEL_H

#include <stdlib.h>
#include <string.h>

#include "looptune/program.h"
#include "looptune/telemetry.h"

typedef struct {
    lt_tel_kind kind;
    int node;            /* window and call records: the node index */
    char label[64], kernel[32], shape[96], run_id[64];
    int n_params;                       /* window and call records: the node's values */
    lt_tel_param params[LT_MAX_PARAMS]; /* (names are static strings) */
    char candidate_id[64];              /* window records */
    lt_tel_kernel_window w; /* w.node, w.run_id, w.candidate_id are NULL: see above */
    lt_tel_call_sample c;
    lt_tel_run_end e;
    int n_nodes, threads;   /* run start */
    char model[64], executor[16];
    int n_step_entries;     /* run start: its whole-step tunables (the first 4) */
    char entry_kernel[4][32], entry_shape[4][96];
    int64_t entry_value0[4]; /* the first parameter's value */
    lt_tel_host host;
} mem_rec;

typedef struct {
    mem_rec *v;
    size_t n, cap, seen;
    int closed, flushed;
    int refuse_every; /* > 0: every k-th record is dropped (LT_TEL_DROPPED) */
} mem_sink;

static inline void mem_copy_node(mem_rec *m, const lt_tel_node_desc *d) {
    m->node = d->node;
    snprintf(m->label, sizeof m->label, "%s", d->label);
    snprintf(m->kernel, sizeof m->kernel, "%s", d->kernel);
    snprintf(m->shape, sizeof m->shape, "%s", d->shape);
    m->n_params = d->n_params;
    memcpy(m->params, d->params, sizeof m->params);
}

static inline int mem_emit(void *ctx, const lt_tel_record *r) {
    mem_sink *s = ctx;
    if (s->refuse_every > 0 && ++s->seen % (size_t)s->refuse_every == 0) return LT_TEL_DROPPED;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (!s->v) abort();
    }
    mem_rec *m = &s->v[s->n++];
    memset(m, 0, sizeof *m);
    m->kind = r->kind;
    m->node = -1;
    switch (r->kind) {
    case LT_TEL_HOST: m->host = *r->u.host; break;
    case LT_TEL_RUN_START:
        snprintf(m->run_id, sizeof m->run_id, "%s", r->u.run_start.run_id);
        snprintf(m->model, sizeof m->model, "%s", r->u.run_start.model);
        snprintf(m->executor, sizeof m->executor, "%s", r->u.run_start.executor);
        m->n_nodes = r->u.run_start.n_nodes;
        m->threads = r->u.run_start.threads;
        m->n_step_entries = r->u.run_start.n_step_entries;
        for (int i = 0; i < m->n_step_entries && i < 4; i++) {
            const lt_tel_node_desc *d = &r->u.run_start.step_entries[i];
            snprintf(m->entry_kernel[i], sizeof m->entry_kernel[i], "%s", d->kernel);
            snprintf(m->entry_shape[i], sizeof m->entry_shape[i], "%s", d->shape);
            m->entry_value0[i] = d->n_params ? d->params[0].value : 0;
        }
        break;
    case LT_TEL_RUN_END:
        m->e = r->u.run_end;
        snprintf(m->run_id, sizeof m->run_id, "%s", r->u.run_end.run_id);
        m->e.run_id = NULL;
        break;
    case LT_TEL_KERNEL_WINDOW:
        m->w = r->u.window;
        snprintf(m->run_id, sizeof m->run_id, "%s", r->u.window.run_id);
        mem_copy_node(m, r->u.window.node);
        snprintf(m->candidate_id, sizeof m->candidate_id, "%s", r->u.window.candidate_id);
        m->w.node = NULL;
        m->w.run_id = NULL;
        m->w.candidate_id = NULL;
        break;
    case LT_TEL_CALL_SAMPLE:
        m->c = r->u.call;
        snprintf(m->run_id, sizeof m->run_id, "%s", r->u.call.run_id);
        mem_copy_node(m, r->u.call.node);
        m->c.node = NULL;
        m->c.run_id = NULL;
        break;
    default: break;
    }
    return LT_OK;
}

static inline int mem_flush(void *ctx, int timeout_ms) {
    (void)timeout_ms;
    ((mem_sink *)ctx)->flushed++;
    return 0;
}

static inline void mem_close(void *ctx) { ((mem_sink *)ctx)->closed++; }

static inline lt_tel_sink mem_sink_of(mem_sink *s) {
    return (lt_tel_sink){.emit = mem_emit, .flush = mem_flush, .close = mem_close, .ctx = s};
}

static inline size_t mem_count(const mem_sink *s, lt_tel_kind k) {
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) n += s->v[i].kind == k;
    return n;
}

static inline void mem_free(mem_sink *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Weights of the synthetic program: static so programs can point at them. */
enum { SYN_N = 4096, SYN_COLS = 64, SYN_ROWS = 32 };

/* node 0: y = a + b (SYN_N floats: 12 * N bytes, N FLOPs)
 * node 1: z = W y[0..COLS) (f32 W of ROWS x COLS: 4*ROWS*COLS + 4*COLS + 4*ROWS bytes,
 *         2*ROWS*COLS FLOPs)
 * node 2: y = y + b (again 12 * N bytes, N FLOPs)
 * then `extra` more adds like node 2. */
static inline lt_program *syn_program(int extra) {
    static float a[SYN_N], b[SYN_N], w[SYN_ROWS * SYN_COLS];
    for (int i = 0; i < SYN_N; i++) {
        a[i] = (float)(i % 13);
        b[i] = 0.25f * (float)(i % 5);
    }
    for (int i = 0; i < SYN_ROWS * SYN_COLS; i++) w[i] = 0.001f * (float)(i % 17);
    lt_program *p;
    if (lt_program_init(&p, "synthetic")) return NULL;
    lt_tensor ta, tb, tw, ty, tz, tyv;
    lt_tensor_init(&ta, LT_F32, SYN_N, 1, 1, 1, a);
    lt_tensor_init(&tb, LT_F32, SYN_N, 1, 1, 1, b);
    lt_tensor_init(&tw, LT_F32, SYN_COLS, SYN_ROWS, 1, 1, w);
    lt_tensor_init(&ty, LT_F32, SYN_N, 1, 1, 1, NULL);
    lt_tensor_init(&tz, LT_F32, SYN_ROWS, 1, 1, 1, NULL);
    lt_tensor_init(&tyv, LT_F32, SYN_COLS, 1, 1, 1, NULL);
    int ia = lt_program_add_buffer(p, "a", LT_BUF_WEIGHT, &ta);
    int ib = lt_program_add_buffer(p, "b", LT_BUF_WEIGHT, &tb);
    int iw = lt_program_add_buffer(p, "w", LT_BUF_WEIGHT, &tw);
    int iy = lt_program_add_buffer(p, "y", LT_BUF_ACT, &ty);
    int iz = lt_program_add_buffer(p, "z", LT_BUF_ACT, &tz);
    int iv = lt_program_add_view(p, "y_head", iy, 0, &tyv);
    int ok = ia >= 0 && ib >= 0 && iw >= 0 && iy >= 0 && iz >= 0 && iv >= 0;
    ok = ok && lt_program_add_node(p, LT_K_ADD, (int[]){iy, ia, ib}, 3, NULL, NULL, "first") >= 0;
    ok = ok && lt_program_add_node(p, LT_K_MATVEC, (int[]){iz, iw, iv}, 3, NULL, NULL, "proj") >= 0;
    ok = ok && lt_program_add_node(p, LT_K_ADD, (int[]){iy, iy, ib}, 3, NULL, NULL, "again") >= 0;
    for (int i = 0; i < extra && ok; i++)
        ok = lt_program_add_node(p, LT_K_ADD, (int[]){iy, iy, ib}, 3, NULL, NULL, "more") >= 0;
    if (!ok || lt_program_finalize(p)) {
        lt_program_free(p);
        return NULL;
    }
    return p;
}

#define SYN_ADD_BYTES (12.0 * SYN_N)
#define SYN_ADD_FLOPS ((double)SYN_N)
#define SYN_MV_BYTES (4.0 * SYN_ROWS * SYN_COLS + 4.0 * SYN_COLS + 4.0 * SYN_ROWS)
#define SYN_MV_FLOPS (2.0 * SYN_ROWS * SYN_COLS)

#endif
