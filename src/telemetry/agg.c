/* Window aggregation: ring records and step messages in, kernel-window and
 * call-sample records out. A table keeps one row per step of the open
 * windows, and per row one cell per node: the earliest start, latest end and
 * summed wait over the threads that reported the node in that step. When a
 * window's closing message has been seen (and, by the drain's protocol, all
 * records of its steps are in) its rows become one record per node, each
 * with the tag and parameter values of the configuration snapshot in force
 * from the window's first step (a retag closes the window, so one
 * snapshot covers all of it), and, when the run names its decode step key,
 * one more over the whole steps' wall times (kernel "step"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry/tel_internal.h"

typedef struct {
    uint64_t min_t0, max_t1, wait;
    uint64_t longest; /* the longest of the threads' own durations */
    uint32_t n;       /* threads that reported the node in this step */
} cell;

typedef struct {
    bool known, lost;
    int64_t pos, n_tokens;
    uint64_t t_begin, t_end;
    uint32_t flags;
    uint64_t ctr_wall;
    uint64_t ctr[LT_CTR_COUNT];
} row;

struct lt__tel_agg {
    lt__tel_agg_opts o;
    int n_nodes;
    uint64_t base;  /* first step not yet emitted */
    uint64_t next;  /* the step the next message should be for */
    uint64_t cap;   /* rows (a power of two): steps [base, base + cap) */
    row *rows;      /* [cap], step s at s & (cap - 1) */
    cell *cells;    /* [cap][n_nodes] */
    uint64_t *closes; /* pending window ends (exclusive), ascending */
    size_t n_closes, cap_closes;
    uint64_t window;
    /* configuration snapshots: cur is in force at base (NULL: no retag yet,
     * the values at open, untagged); later ones wait in start order */
    lt__tel_snap *cur, *pend, *pend_tail;
    lt_tel_node_desc desc; /* scratch: a node with the values of a snapshot */
    uint64_t *dur;  /* scratch: durations of one node (or of the steps) over a window */
    uint64_t cap_dur;
    lt_tel_node_desc step_desc; /* the "step" window's: node -1, label "", shape step_key */
    char step_key[128];
    lt_tel_node_desc prefill_desc; /* the same for prefill steps, shape prefill_key */
    char prefill_key[128];
    uint64_t prefill_window;       /* prefill steps emitted */
    bool warned;
    lt__tel_agg_counts st;
};

static void reset_row(lt__tel_agg *a, uint64_t step) {
    uint64_t i = step & (a->cap - 1);
    memset(&a->rows[i], 0, sizeof a->rows[i]);
    cell *c = &a->cells[i * (uint64_t)a->n_nodes];
    for (int j = 0; j < a->n_nodes; j++) c[j] = (cell){.min_t0 = UINT64_MAX};
}

/* Makes room for step (>= base); false if out of memory. */
static bool ensure(lt__tel_agg *a, uint64_t step) {
    if (step - a->base < a->cap) return true;
    uint64_t cap = a->cap;
    while (step - a->base >= cap) cap *= 2;
    row *rows = malloc(cap * sizeof *rows);
    cell *cells = malloc(cap * (uint64_t)a->n_nodes * sizeof *cells);
    if (!rows || !cells) {
        free(rows);
        free(cells);
        return false;
    }
    uint64_t old = a->cap;
    for (uint64_t s = a->base; s < a->base + old; s++) {
        rows[s & (cap - 1)] = a->rows[s & (old - 1)];
        memcpy(&cells[(s & (cap - 1)) * (uint64_t)a->n_nodes],
               &a->cells[(s & (old - 1)) * (uint64_t)a->n_nodes], (size_t)a->n_nodes * sizeof *cells);
    }
    free(a->rows);
    free(a->cells);
    a->rows = rows;
    a->cells = cells;
    a->cap = cap;
    for (uint64_t s = a->base + old; s < a->base + cap; s++) reset_row(a, s);
    return true;
}

int lt__tel_agg_init(lt__tel_agg **out, const lt__tel_agg_opts *o) {
    *out = NULL;
    lt__tel_agg *a = calloc(1, sizeof *a);
    if (!a) return lt_error(LT_ENOMEM, "telemetry: out of memory");
    a->o = *o;
    a->n_nodes = o->nodes->n;
    if (o->step_shape) {
        snprintf(a->step_key, sizeof a->step_key, "%s", o->step_shape);
        a->step_desc = (lt_tel_node_desc){.node = -1, .label = "", .kernel = LT_TEL_STEP_KERNEL,
                                          .shape = a->step_key};
        a->o.step_shape = a->step_key;
    }
    if (o->prefill_shape) {
        snprintf(a->prefill_key, sizeof a->prefill_key, "%s", o->prefill_shape);
        a->prefill_desc = (lt_tel_node_desc){.node = -1, .label = "",
                                             .kernel = LT_TEL_STEP_KERNEL,
                                             .shape = a->prefill_key};
        a->o.prefill_shape = a->prefill_key;
    }
    a->cap = 64;
    a->rows = malloc(a->cap * sizeof *a->rows);
    a->cells = malloc(a->cap * (uint64_t)(a->n_nodes ? a->n_nodes : 1) * sizeof *a->cells);
    if (!a->rows || !a->cells) {
        lt__tel_agg_free(a);
        return lt_error(LT_ENOMEM, "telemetry: out of memory");
    }
    for (uint64_t s = 0; s < a->cap; s++) reset_row(a, s);
    *out = a;
    return LT_OK;
}

void lt__tel_agg_free(lt__tel_agg *a) {
    if (!a) return;
    free(a->rows);
    free(a->cells);
    free(a->closes);
    free(a->dur);
    lt__tel_snap_free(a->cur);
    while (a->pend) {
        lt__tel_snap *next = a->pend->next;
        lt__tel_snap_free(a->pend);
        a->pend = next;
    }
    free(a);
}

int lt__tel_agg_emit(lt__tel_agg *a, const lt_tel_record *r) {
    int rc = a->o.sink->emit(a->o.sink->ctx, r);
    if (rc == LT_OK) {
        a->st.emitted++;
    } else if (rc == LT_TEL_DROPPED) {
        a->st.sink_dropped++;
    } else {
        a->st.sink_failed++;
        if (!a->warned) {
            a->warned = true;
            lt_log(LT_LOG_WARN, "telemetry: the sink refused a record: %s (further failures are only counted)",
                   lt_errmsg()[0] ? lt_errmsg() : lt_strerror(rc));
        }
    }
    return rc;
}

static void push_close(lt__tel_agg *a, uint64_t end) {
    uint64_t last = a->n_closes ? a->closes[a->n_closes - 1] : a->base;
    if (end <= last) return; /* an empty window */
    if (a->n_closes == a->cap_closes) {
        size_t cap = a->cap_closes ? 2 * a->cap_closes : 16;
        uint64_t *c = realloc(a->closes, cap * sizeof *c);
        if (!c) return; /* the window merges into the next one */
        a->closes = c;
        a->cap_closes = cap;
    }
    a->closes[a->n_closes++] = end;
}

/* Counter deltas read between steps (a retag) belong to the last step
 * before seq, if it still is in the window that is open: its first step is
 * where the last pending close put it (or base). */
static void attach_counters(lt__tel_agg *a, const lt__tel_stepmsg *m) {
    uint64_t first = a->n_closes ? a->closes[a->n_closes - 1] : a->base;
    for (uint64_t s = m->seq; s > first && s > a->base;) {
        s--;
        if (s - a->base >= a->cap) continue; /* never given a row */
        row *r = &a->rows[s & (a->cap - 1)];
        if (!r->known) continue; /* lost: try the step before */
        r->flags |= LT__STEP_COUNTERS;
        r->ctr_wall += m->ctr_wall_ns;
        for (int c = 0; c < LT_CTR_COUNT; c++) r->ctr[c] += m->ctr[c];
        return;
    }
}

static void queue_snap(lt__tel_agg *a, lt__tel_snap *snap, uint64_t start) {
    LT_ASSERT(snap->n == a->n_nodes);
    snap->start = start;
    snap->next = NULL;
    if (a->pend_tail) a->pend_tail->next = snap;
    else a->pend = snap;
    a->pend_tail = snap;
}

static const lt__tel_snap *snap_at(const lt__tel_agg *a, uint64_t step);

/* A prefill step: its own window, tagged as the decode step that would
 * come next (a retag before it has queued its snapshot at that step). */
static void prefill_window(lt__tel_agg *a, const lt__tel_stepmsg *m) {
    if (!a->o.prefill_shape) return;
    const lt__tel_snap *s = snap_at(a, m->seq);
    uint64_t d = m->t_end_ns - m->t_begin_ns;
    lt_tel_record rec = {.kind = LT_TEL_KERNEL_WINDOW};
    lt_tel_kernel_window *w = &rec.u.window;
    *w = (lt_tel_kernel_window){
        .run_id = a->o.run_id, .window = a->prefill_window++, .t_start_ns = m->t_begin_ns,
        .t_end_ns = m->t_end_ns, .steps = (uint64_t)m->n_tokens, .node = &a->prefill_desc,
        .candidate_id = s ? s->candidate_id : "", .on_candidate = s && s->on_candidate,
        .pair = s ? s->pair : 0, .available = a->o.available};
    w->count = 1;
    w->min_ns = w->median_ns = w->p90_ns = w->max_ns = w->total_ns = w->critical_ns = d;
    lt__tel_agg_emit(a, &rec);
}

void lt__tel_agg_step(lt__tel_agg *a, const lt__tel_stepmsg *m) {
    LT_ASSERT(m->seq >= a->next);
    LT_ASSERT(!(m->flags & LT__STEP_RETAG) || (m->flags & LT__STEP_NONE));
    /* steps whose messages never came: their records are orphans */
    for (uint64_t s = a->next; s < m->seq; s++)
        if (ensure(a, s)) a->rows[s & (a->cap - 1)].lost = true;
    if (m->flags & LT__STEP_NONE) {
        a->next = m->seq;
        if (m->flags & LT__STEP_COUNTERS) attach_counters(a, m);
        if (m->flags & LT__STEP_CLOSE) push_close(a, m->seq);
        if ((m->flags & LT__STEP_RETAG) && m->snap) queue_snap(a, m->snap, m->seq);
        if (m->flags & LT__STEP_PREFILL) prefill_window(a, m);
        return;
    }
    a->next = m->seq + 1;
    if (!ensure(a, m->seq)) {
        if (m->flags & LT__STEP_CLOSE) push_close(a, m->seq + 1);
        return;
    }
    row *r = &a->rows[m->seq & (a->cap - 1)];
    r->known = true;
    r->pos = m->pos;
    r->n_tokens = m->n_tokens;
    r->t_begin = m->t_begin_ns;
    r->t_end = m->t_end_ns;
    r->flags = m->flags;
    r->ctr_wall = m->ctr_wall_ns;
    memcpy(r->ctr, m->ctr, sizeof r->ctr);
    if (m->flags & LT__STEP_CLOSE) push_close(a, m->seq + 1);
}

uint64_t lt__tel_agg_steps_known(const lt__tel_agg *a) { return a->next; }

/* The snapshot in force at step (NULL: the values at open), without
 * retiring any: records may be added for steps ahead of base. */
static const lt__tel_snap *snap_at(const lt__tel_agg *a, uint64_t step) {
    const lt__tel_snap *s = a->cur;
    for (const lt__tel_snap *p = a->pend; p && p->start <= step; p = p->next) s = p;
    return s;
}

/* Makes the snapshot in force at base current, freeing those it replaces. */
static void retire_snaps(lt__tel_agg *a) {
    while (a->pend && a->pend->start <= a->base) {
        lt__tel_snap_free(a->cur);
        a->cur = a->pend;
        a->pend = a->pend->next;
    }
    if (!a->pend) a->pend_tail = NULL;
}

/* Node j as records name it under snapshot s (a->desc is the scratch). */
static const lt_tel_node_desc *node_desc(lt__tel_agg *a, int j, const lt__tel_snap *s) {
    const lt_tel_node_desc *d = &a->o.nodes->nodes[j];
    if (!s) return d;
    a->desc = *d;
    for (int k = 0; k < d->n_params; k++)
        a->desc.params[k].value = s->params[j].v[d->params[k].index];
    return &a->desc;
}

static void node_cost(const lt__tel_agg *a, int node, const row *r, double *bytes, double *flops) {
    lt_step step = {.pos = r->pos, .n_tokens = r->n_tokens > 0 ? r->n_tokens : 1};
    const lt_kernel *k = lt_kernel_get(a->o.nodes->kernels[node]);
    *bytes = *flops = 0;
    if (k->cost) k->cost(lt_program_call(a->o.program, node), &step, bytes, flops);
}

void lt__tel_agg_add(lt__tel_agg *a, int ith, const lt__tel_rec *r) {
    /* records carry the step's low 32 bits: widen relative to base */
    uint64_t step = a->base + (uint32_t)(r->step - (uint32_t)a->base);
    if ((uint32_t)(r->step - (uint32_t)a->base) > 0x80000000u || r->node < 0 ||
        r->node >= a->n_nodes || !ensure(a, step)) {
        a->st.orphans++;
        return;
    }
    uint64_t i = step & (a->cap - 1);
    row *rw = &a->rows[i];
    if (rw->lost) {
        a->st.orphans++;
        return;
    }
    cell *c = &a->cells[i * (uint64_t)a->n_nodes + (uint64_t)r->node];
    if (r->t0 < c->min_t0) c->min_t0 = r->t0;
    if (r->t1 > c->max_t1) c->max_t1 = r->t1;
    if (r->t1 > r->t0 && r->t1 - r->t0 > c->longest) c->longest = r->t1 - r->t0;
    c->wait += r->wait;
    c->n++;
    if (a->o.detail == LT_TEL_DETAIL_PER_CALL) {
        lt_tel_record rec = {.kind = LT_TEL_CALL_SAMPLE};
        lt_tel_call_sample *s = &rec.u.call;
        s->run_id = a->o.run_id;
        s->token = step;
        s->thread = (uint32_t)ith;
        s->node = node_desc(a, r->node, snap_at(a, step));
        s->start_ns = r->t0;
        s->end_ns = r->t1;
        s->wait_ns = r->wait;
        if (rw->known) node_cost(a, r->node, rw, &s->bytes, &s->flops);
        lt__tel_agg_emit(a, &rec);
    }
}

static int cmp_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* A window holds a few dozen durations: insertion sort beats qsort's
 * indirect comparisons there. */
static void sort_u64(uint64_t *v, uint64_t n) {
    if (n > 64) {
        qsort(v, n, sizeof *v, cmp_u64);
        return;
    }
    for (uint64_t i = 1; i < n; i++) {
        uint64_t x = v[i], k = i;
        for (; k > 0 && v[k - 1] > x; k--) v[k] = v[k - 1];
        v[k] = x;
    }
}

/* Nearest rank: element ceil(num/den * n) - 1 of n sorted values. */
static uint64_t quantile(const uint64_t *v, uint64_t n, uint64_t num, uint64_t den) {
    uint64_t k = (num * n + den - 1) / den;
    return v[k ? k - 1 : 0];
}

/* Sorts dur[0..n) (n > 0) and sets the window's count, quantiles and total. */
static void set_durations(lt_tel_kernel_window *w, uint64_t *dur, uint64_t n, uint64_t total) {
    sort_u64(dur, n);
    w->count = n;
    w->min_ns = dur[0];
    w->median_ns = quantile(dur, n, 1, 2);
    w->p90_ns = quantile(dur, n, 9, 10);
    w->max_ns = dur[n - 1];
    w->total_ns = total;
}

/* Emits the window of steps [a->base, end), which lie under one snapshot
 * (a->cur), and forgets its rows. */
static void finish_window(lt__tel_agg *a, uint64_t end) {
    /* rows exist up to base + cap (fewer only if growing ran out of memory) */
    if (end - a->base > a->cap) end = a->base + a->cap;
    uint64_t steps = 0, t_start = 0, t_end = 0, ctr_wall = 0;
    uint64_t ctr[LT_CTR_COUNT] = {0};
    bool read = false;
    for (uint64_t s = a->base; s < end; s++) {
        const row *r = &a->rows[s & (a->cap - 1)];
        if (!r->known) continue;
        if (!steps) t_start = r->t_begin;
        t_end = r->t_end;
        steps++;
        if (r->flags & LT__STEP_COUNTERS) {
            read = true;
            ctr_wall += r->ctr_wall;
            for (int c = 0; c < LT_CTR_COUNT; c++) ctr[c] += r->ctr[c];
        }
    }
    if (steps > a->cap_dur) {
        uint64_t *d = realloc(a->dur, steps * sizeof *d);
        if (!d) steps = 0; /* cannot aggregate: the window is skipped */
        else {
            a->dur = d;
            a->cap_dur = steps;
        }
    }
    if (steps) {
        const uint32_t av = a->o.available;
        bool contention = false;
        if (read && av & (1u << LT_CTR_RUNQUEUE_WAIT)) {
            /* waiting for a CPU, not sleeping by choice: a worker that parks
             * on its futex switches voluntarily and is no sign of a rival */
            contention = ctr_wall && (double)ctr[LT_CTR_RUNQUEUE_WAIT] > 0.02 * (double)ctr_wall;
        } else if (read) {
            if (av & (1u << LT_CTR_CONTEXT_SWITCHES) && ctr[LT_CTR_CONTEXT_SWITCHES] > 0)
                contention = true;
            if (av & (1u << LT_CTR_TASK_CLOCK) && ctr_wall &&
                (double)ctr[LT_CTR_TASK_CLOCK] < 0.9 * (double)ctr_wall)
                contention = true;
        }
        /* A node's cost depends on the step's token count and, for nodes
         * that read the KV cache, grows with the position. When every step
         * has the same token count and the cost at the window's first and
         * last position agree, it is the same for every step in between:
         * computed twice instead of once per step (the drain's main cost). */
        const row *r_first = NULL, *r_last = NULL;
        bool same_tokens = true; /* ... and positions that never go back */
        for (uint64_t s = a->base; s < end; s++) {
            const row *r = &a->rows[s & (a->cap - 1)];
            if (!r->known) continue;
            if (!r_first) r_first = r;
            else same_tokens &= r->n_tokens == r_first->n_tokens && r->pos >= r_last->pos;
            r_last = r;
        }
        /* what every record of the window shares */
        lt_tel_kernel_window base = {
            .run_id = a->o.run_id, .window = a->window, .t_start_ns = t_start, .t_end_ns = t_end,
            .steps = steps, .candidate_id = a->cur ? a->cur->candidate_id : "",
            .on_candidate = a->cur && a->cur->on_candidate, .pair = a->cur ? a->cur->pair : 0,
            .available = av, .counters_read = read, .contention = contention};
        memcpy(base.counters, ctr, sizeof ctr);
        for (int j = 0; j < a->n_nodes; j++) {
            uint64_t n = 0, total = 0, wait = 0, critical = 0;
            double bytes = 0, flops = 0, b0 = 0, f0 = 0, b1 = 0, f1 = 0;
            bool constant = false;
            if (same_tokens) {
                node_cost(a, j, r_first, &b0, &f0);
                node_cost(a, j, r_last, &b1, &f1);
                constant = b0 == b1 && f0 == f1;
            }
            for (uint64_t s = a->base; s < end; s++) {
                uint64_t i = s & (a->cap - 1);
                const row *r = &a->rows[i];
                const cell *c = &a->cells[i * (uint64_t)a->n_nodes + (uint64_t)j];
                if (!r->known || !c->n) continue;
                uint64_t d = c->max_t1 > c->min_t0 ? c->max_t1 - c->min_t0 : 0;
                a->dur[n++] = d;
                total += d;
                critical += c->longest < d ? c->longest : d;
                wait += c->wait;
                if (constant) continue;
                double b, f;
                node_cost(a, j, r, &b, &f);
                bytes += b;
                flops += f;
            }
            if (!n) continue;
            if (constant) {
                bytes = b0 * (double)n;
                flops = f0 * (double)n;
            }
            lt_tel_record rec = {.kind = LT_TEL_KERNEL_WINDOW, .u.window = base};
            lt_tel_kernel_window *w = &rec.u.window;
            w->node = node_desc(a, j, a->cur);
            set_durations(w, a->dur, n, total);
            w->critical_ns = critical;
            w->bytes = bytes / (double)n;
            w->flops = flops / (double)n;
            w->gb_s = total ? bytes / (double)total : 0; /* B/ns = GB/s */
            w->gflops = total ? flops / (double)total : 0;
            /* waiting as a share of the thread time the node accounts for: its
             * interval on every thread plus the waits reported with it (a
             * wait lies outside the interval: before it in the looped
             * executor, at the barrier after it in dispatch) */
            w->wait_share = wait ? (double)wait / ((double)total * a->o.nth + (double)wait) : 0;
            lt__tel_agg_emit(a, &rec);
        }
        /* the whole steps: each from the end of the step before (the
         * caller's work between steps included) to its own end */
        if (a->o.step_shape) {
            uint64_t n = 0, total = 0;
            for (uint64_t s = a->base; s < end; s++) {
                const row *r = &a->rows[s & (a->cap - 1)];
                if (!r->known) continue;
                a->dur[n] = r->t_end > r->t_begin ? r->t_end - r->t_begin : 0;
                total += a->dur[n++];
            }
            lt_tel_record rec = {.kind = LT_TEL_KERNEL_WINDOW, .u.window = base};
            rec.u.window.node = &a->step_desc;
            set_durations(&rec.u.window, a->dur, n, total);
            rec.u.window.critical_ns = total;
            lt__tel_agg_emit(a, &rec);
        }
        a->window++;
        a->st.windows++;
    }
    for (uint64_t s = a->base; s < end; s++) reset_row(a, s);
    a->base = end;
}

/* Emits the windows of steps [a->base, end). A retag always closes the
 * window, so the cut at a snapshot's start only matters when a close was
 * lost (out of memory): even then no window mixes two configurations. */
static void finish_until(lt__tel_agg *a, uint64_t end) {
    while (a->base < end) {
        retire_snaps(a);
        uint64_t e = end;
        if (a->pend && a->pend->start < e) e = a->pend->start; /* > base after retiring */
        finish_window(a, e);
    }
}

void lt__tel_agg_flush(lt__tel_agg *a) {
    for (size_t i = 0; i < a->n_closes; i++) finish_until(a, a->closes[i]);
    a->n_closes = 0;
    retire_snaps(a);
}

void lt__tel_agg_counts_get(const lt__tel_agg *a, lt__tel_agg_counts *out) { *out = a->st; }
