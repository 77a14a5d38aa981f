/* The telemetry runtime. Three roles:
 *  - the observer, on every worker thread: one 32-byte record per node into
 *    the thread's own ring (no wait, lock, allocation or system call; a full
 *    ring drops the record and counts it);
 *  - the stepping thread (the one that calls lt_tel_step_end between steps):
 *    stamps step numbers, decides where windows close, reads the counters
 *    every Nth step, and sends one message per step to the drain thread;
 *  - the drain thread: every drain_ms, takes the step messages, then every
 *    record of the steps they announce, aggregates, and emits to the sink.
 * A step's message is sent after the pool has joined the step's threads, so
 * once the drain has read a message for step s, every record of s is already
 * in the rings: windows are complete when they are emitted. A retag (the
 * tuner changed parameters between steps) travels the same way: a message
 * that closes the window and hands the drain an immutable snapshot of the
 * tag and parameter values, applied in step order; the observer never sees
 * it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "telemetry/tel_internal.h"

#define STEP_RING_CAP 4096 /* steps the drain may lag behind before messages are lost */

struct lt_tel {
    lt_tel_opts o;
    int nth;
    char run_id[64];
    lt_tel_host host;
    bool have_host;
    lt__tel_nodes nodes;
    lt__ring *rings; /* [nth], one per pool thread */
    lt__ring msgs;   /* lt__tel_stepmsg, stepping thread -> drain */

    /* The step number the observer stamps. Written by the stepping thread
     * between steps; the pool's hand-off orders it before the next step's
     * records (relaxed is enough, and keeps the hot path to a plain load). */
    _Atomic uint32_t cur_step;

    /* stepping thread only */
    bool observing;
    uint64_t seq, t_step_begin, t_win_begin;
    int64_t win_steps;
    int64_t win_closed; /* windows closed with at least one step */
    uint32_t carry_flags; /* CLOSE/COUNTERS of a message that could not be sent */
    uint64_t carry_ctr[LT_CTR_COUNT], carry_wall;
    lt__tel_counters *ctrs;
    uint32_t available;
    uint64_t ctr_prev[LT_CTR_COUNT], t_ctr_prev;
    int64_t steps_lost;
    uint64_t decode_ns;

    /* drain thread */
    lt__tel_agg *agg;
    pthread_t drain;
    bool drain_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop; /* under mu */
};

const char *lt_tel_run_id_of(const lt_tel *t) { return t->run_id; }

int64_t lt_tel_windows_closed(const lt_tel *t) { return t->win_closed; }

/* ---- the hot path ----------------------------------------------------------------- */

static void on_node_done(void *user, int ith, int node, uint64_t t0, uint64_t t1,
                         uint64_t wait) {
    lt_tel *t = user;
    if ((unsigned)ith >= (unsigned)t->nth) return; /* a bigger pool than the one given */
    lt__tel_rec r = {.step = atomic_load_explicit(&t->cur_step, memory_order_relaxed),
                     .node = node, .t0 = t0, .t1 = t1, .wait = wait};
    lt__ring_push(&t->rings[ith], &r, sizeof r);
}

/* ---- the drain thread ------------------------------------------------------------- */

static void drain_once(lt_tel *t) {
    uint64_t first, last;
    /* messages first: they announce steps whose records are all in */
    lt__ring_peek(&t->msgs, &first, &last);
    for (uint64_t i = first; i < last; i++)
        lt__tel_agg_step(t->agg, (const lt__tel_stepmsg *)lt__ring_at(&t->msgs, i));
    lt__ring_release(&t->msgs, last);
    uint32_t known = (uint32_t)lt__tel_agg_steps_known(t->agg);
    for (int th = 0; th < t->nth; th++) {
        lt__ring *r = &t->rings[th];
        lt__ring_peek(r, &first, &last);
        uint64_t i = first;
        for (; i < last; i++) {
            const lt__tel_rec *rec = lt__ring_at(r, i);
            /* the step in progress stays in the ring until its message */
            uint32_t ahead = known - rec->step;
            if (ahead == 0 || ahead > 0x80000000u) break;
            lt__tel_agg_add(t->agg, th, rec);
        }
        lt__ring_release(r, i);
    }
    lt__tel_agg_flush(t->agg);
}

/* The drain's work can wait (the rings buffer seconds of records) and the
 * compute threads' cannot: on a machine with no spare CPU the drain runs at
 * a lower priority, so it takes the gaps instead of preempting a worker that
 * the others then wait for. (Linux nice values are per thread.) */
#define DRAIN_NICE 10

static void *drain_main(void *arg) {
    lt_tel *t = arg;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), DRAIN_NICE) != 0)
        lt_log(LT_LOG_DEBUG, "telemetry: drain thread keeps its priority: %s", strerror(errno));
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)t->o.drain_ms * 1000000u;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        bool stop = t->stop;
        pthread_mutex_unlock(&t->mu);
        if (!stop) drain_once(t);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    drain_once(t); /* everything up to lt_tel_end's message */
    return NULL;
}

/* ---- opening ---------------------------------------------------------------------- */

typedef struct {
    int tids[64];
} tid_job;

static void get_tid(void *arg, int ith, int nth) {
    (void)nth;
    ((tid_job *)arg)->tids[ith] = (int)syscall(SYS_gettid);
}

static void free_tel(lt_tel *t) {
    lt__tel_agg_free(t->agg);
    lt__tel_counters_close(t->ctrs);
    if (t->rings)
        for (int i = 0; i < t->nth; i++) lt__ring_free(&t->rings[i]);
    lt_aligned_free(t->rings);
    lt__ring_free(&t->msgs);
    lt__tel_nodes_free(&t->nodes);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    lt_aligned_free(t);
}

int lt_tel_open(lt_tel **out, const lt_tel_opts *opts) {
    *out = NULL;
    lt_tel_sink sink = opts->sink;
    int rc = LT_OK;
    lt_tel *t = NULL;
    if (!sink.emit || !sink.close) {
        rc = lt_error(LT_EINVAL, "telemetry: the sink has no emit or close function");
        goto fail_sink;
    }
    if (!opts->program || !opts->pool) {
        rc = lt_error(LT_EINVAL, "telemetry: no program or no pool to observe");
        goto fail_sink;
    }
    if (opts->window_tokens < 0 || opts->window_ms < 0 || opts->drain_ms < 0 ||
        opts->ring_records < 0 || opts->n_step_entries < 0) {
        rc = lt_error(LT_EINVAL, "telemetry: negative window, drain period, ring size or step "
                                 "entry count");
        goto fail_sink;
    }
    if (lt_pool_size(opts->pool) > 64) {
        rc = lt_error(LT_EINVAL, "telemetry: at most 64 threads (pool has %d)",
                      lt_pool_size(opts->pool));
        goto fail_sink;
    }
    t = lt_aligned_alloc(LT_CACHE_LINE, sizeof *t);
    if (!t) {
        rc = lt_error(LT_ENOMEM, "telemetry: out of memory");
        goto fail_sink;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    t->o = *opts;
    if (!t->o.window_tokens) t->o.window_tokens = 32;
    if (!t->o.window_ms) t->o.window_ms = 1000;
    if (!t->o.drain_ms) t->o.drain_ms = 200;
    if (!t->o.counters_every) t->o.counters_every = 8;
    if (!t->o.ring_records) t->o.ring_records = 65536;
    t->nth = lt_pool_size(opts->pool);
    if (opts->run_id) snprintf(t->run_id, sizeof t->run_id, "%s", opts->run_id);
    else lt_tel_run_id(t->run_id);
    t->o.run_id = t->run_id;
    if (opts->host) {
        t->host = *opts->host;
        t->have_host = true;
    }

    if ((rc = lt__tel_nodes_init(&t->nodes, opts->program))) goto fail;
    t->rings = lt_aligned_alloc(LT_CACHE_LINE, (size_t)t->nth * sizeof *t->rings);
    if (!t->rings) {
        rc = lt_error(LT_ENOMEM, "telemetry: out of memory");
        goto fail;
    }
    for (int i = 0; i < t->nth; i++)
        if ((rc = lt__ring_init(&t->rings[i], (uint64_t)t->o.ring_records, sizeof(lt__tel_rec))))
            goto fail;
    if ((rc = lt__ring_init(&t->msgs, STEP_RING_CAP, sizeof(lt__tel_stepmsg)))) goto fail;

    if (t->o.counters_every > 0) {
        tid_job tj;
        lt_pool_run(opts->pool, get_tid, &tj);
        char why[512];
        if ((rc = lt__tel_counters_open(&t->ctrs, tj.tids, t->nth, &t->available, why, sizeof why)))
            goto fail;
        if (why[0]) lt_log(LT_LOG_INFO, "telemetry: counters not measured: %s", why);
    }

    lt__tel_agg_opts ao = {.program = opts->program, .nodes = &t->nodes, .nth = t->nth,
                           .run_id = t->run_id, .detail = opts->detail,
                           .available = t->available, .sink = &t->o.sink,
                           .step_shape = opts->step_shape,
                           .prefill_shape = opts->prefill_shape};
    if ((rc = lt__tel_agg_init(&t->agg, &ao))) goto fail;

    /* the run's header records, before the drain thread exists */
    if (t->have_host) lt__tel_agg_emit(t->agg, &(lt_tel_record){.kind = LT_TEL_HOST,
                                                               .u.host = &t->host});
    lt_tel_record rs = {.kind = LT_TEL_RUN_START};
    rs.u.run_start = (lt_tel_run_start){
        .run_id = t->run_id, .host = t->have_host ? &t->host : NULL,
        .model = opts->model ? opts->model : "", .dtype = opts->dtype ? opts->dtype : "",
        .executor = opts->executor ? opts->executor : "", .threads = t->nth,
        .n_nodes = t->nodes.n, .nodes = t->nodes.nodes, .host_class = opts->host_class,
        .n_step_entries = opts->step_entries ? opts->n_step_entries : 0,
        .step_entries = opts->step_entries};
    lt__tel_agg_emit(t->agg, &rs);
    if (opts->open_flush_ms > 0 && t->o.sink.flush &&
        t->o.sink.flush(t->o.sink.ctx, (int)opts->open_flush_ms) != LT_OK)
        lt_log(LT_LOG_WARN, "telemetry: the run's first records are not delivered yet: %s",
               lt_errmsg());

    if (pthread_create(&t->drain, NULL, drain_main, t)) {
        rc = lt_error(LT_ENOMEM, "telemetry: cannot start the drain thread");
        goto fail;
    }
    t->drain_started = true;
    pthread_setname_np(t->drain, "lt-tel-drain");
    *out = t;
    return LT_OK;
fail:
    free_tel(t);
fail_sink:
    sink.close(sink.ctx);
    return rc;
}

/* ---- stepping ----------------------------------------------------------------------- */

void lt_tel_begin(lt_tel *t) {
    if (t->observing) return;
    uint64_t now = lt_now_ns();
    t->t_step_begin = t->t_win_begin = t->t_ctr_prev = now;
    t->win_steps = 0;
    if (t->ctrs) lt__tel_counters_read(t->ctrs, t->ctr_prev);
    t->observing = true;
    lt_program_set_observer(t->o.program,
                            &(lt_exec_observer){.node_done = on_node_done, .user = t});
}

/* Sends m, or keeps what matters of it (a window close, counter deltas) for
 * the next message: the drain lost this step, not the window boundary. */
static void send(lt_tel *t, lt__tel_stepmsg *m) {
    m->flags |= t->carry_flags;
    if (t->carry_flags & LT__STEP_COUNTERS) {
        for (int c = 0; c < LT_CTR_COUNT; c++) m->ctr[c] += t->carry_ctr[c];
        m->ctr_wall_ns += t->carry_wall;
    }
    if (lt__ring_push(&t->msgs, m, sizeof *m)) {
        t->carry_flags = 0;
        memset(t->carry_ctr, 0, sizeof t->carry_ctr);
        t->carry_wall = 0;
        return;
    }
    t->steps_lost++;
    t->carry_flags = m->flags & (LT__STEP_CLOSE | LT__STEP_COUNTERS);
    if (m->flags & LT__STEP_COUNTERS) {
        memcpy(t->carry_ctr, m->ctr, sizeof t->carry_ctr);
        t->carry_wall = m->ctr_wall_ns;
    }
}

void lt_tel_step_end(lt_tel *t, const lt_step *step) {
    if (!t->observing) return;
    uint64_t now = lt_now_ns();
    lt__tel_stepmsg m = {.seq = t->seq, .pos = step->pos, .n_tokens = step->n_tokens,
                         .t_begin_ns = t->t_step_begin, .t_end_ns = now};
    if (++t->win_steps >= t->o.window_tokens ||
        now - t->t_win_begin >= (uint64_t)t->o.window_ms * 1000000u) {
        m.flags |= LT__STEP_CLOSE;
        t->win_steps = 0;
        t->t_win_begin = now;
        t->win_closed++;
    }
    if (t->ctrs && (t->seq + 1) % (uint64_t)t->o.counters_every == 0) {
        uint64_t v[LT_CTR_COUNT];
        lt__tel_counters_read(t->ctrs, v);
        for (int c = 0; c < LT_CTR_COUNT; c++) {
            m.ctr[c] = v[c] >= t->ctr_prev[c] ? v[c] - t->ctr_prev[c] : 0;
            t->ctr_prev[c] = v[c];
        }
        m.ctr_wall_ns = (now - t->t_ctr_prev) * (uint64_t)t->nth;
        t->t_ctr_prev = now;
        m.flags |= LT__STEP_COUNTERS;
    }
    send(t, &m);
    t->decode_ns += now - t->t_step_begin;
    t->seq++;
    atomic_store_explicit(&t->cur_step, (uint32_t)t->seq, memory_order_relaxed);
    t->t_step_begin = now;
}

void lt_tel_step_begin(lt_tel *t) {
    if (t->observing) t->t_step_begin = lt_now_ns();
}

/* Sends a message that must not be lost (between steps, not the hot path):
 * while the queue is full, wakes the drain and waits, up to 2 s. */
static bool send_wait(lt_tel *t, const lt__tel_stepmsg *m) {
    for (int tries = 0; tries < 2000; tries++) {
        if (lt__ring_push(&t->msgs, m, sizeof *m)) return true;
        pthread_mutex_lock(&t->mu);
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->mu);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return lt__ring_push(&t->msgs, m, sizeof *m);
}

void lt_tel_end(lt_tel *t) {
    if (!t->observing) return;
    lt_program_set_observer(t->o.program, NULL);
    t->observing = false;
    if (t->win_steps > 0) t->win_closed++;
    /* closes the last window */
    lt__tel_stepmsg m = {.seq = t->seq, .flags = LT__STEP_NONE | LT__STEP_CLOSE,
                         .t_begin_ns = t->t_step_begin, .t_end_ns = t->t_step_begin};
    send_wait(t, &m);
    t->carry_flags = 0;
}

void lt_tel_prefill(lt_tel *t, int64_t n_tokens, uint64_t t_begin_ns, uint64_t t_end_ns) {
    if (!t->o.prefill_shape || n_tokens < 1) return;
    /* in step order with the retags: the drain gives it the tag in force */
    lt__tel_stepmsg m = {.seq = t->seq, .flags = LT__STEP_NONE | LT__STEP_PREFILL,
                         .n_tokens = n_tokens, .t_begin_ns = t_begin_ns,
                         .t_end_ns = t_end_ns > t_begin_ns ? t_end_ns : t_begin_ns};
    if (!send_wait(t, &m)) t->steps_lost++;
}

int lt_tel_retag(lt_tel *t, const lt_tel_tag *tag) {
    /* the parameter values the next steps run with: the caller changes them
     * on this thread, between steps, so reading them here races with nothing */
    lt__tel_snap *snap = lt__tel_snap_new(t->o.program, tag);
    if (!snap) return lt_error(LT_ENOMEM, "telemetry: out of memory for a retag");
    uint64_t now = lt_now_ns();
    lt__tel_stepmsg m = {.seq = t->seq, .flags = LT__STEP_NONE | LT__STEP_CLOSE | LT__STEP_RETAG,
                         .t_begin_ns = t->t_step_begin, .t_end_ns = t->t_step_begin,
                         .snap = snap};
    /* a carried close is this close; carried counters belong to the window
     * this closes, like the ones read now */
    uint64_t ctr[LT_CTR_COUNT] = {0}, wall = 0;
    bool have_ctr = false;
    if (t->carry_flags & LT__STEP_COUNTERS) {
        memcpy(ctr, t->carry_ctr, sizeof ctr);
        wall = t->carry_wall;
        have_ctr = true;
    }
    if (t->ctrs && t->observing) {
        uint64_t v[LT_CTR_COUNT];
        lt__tel_counters_read(t->ctrs, v);
        for (int c = 0; c < LT_CTR_COUNT; c++) {
            ctr[c] += v[c] >= t->ctr_prev[c] ? v[c] - t->ctr_prev[c] : 0;
            t->ctr_prev[c] = v[c];
        }
        wall += (now - t->t_ctr_prev) * (uint64_t)t->nth;
        t->t_ctr_prev = now;
        have_ctr = true;
    }
    /* no step in the window: the delta is the closed window's tail, and must
     * not count for the next configuration */
    if (have_ctr && t->win_steps > 0) {
        m.flags |= LT__STEP_COUNTERS;
        memcpy(m.ctr, ctr, sizeof ctr);
        m.ctr_wall_ns = wall;
    }
    if (!send_wait(t, &m)) {
        lt__tel_snap_free(snap);
        /* this close is lost with the message; an earlier one and the
         * counters are kept for the next message */
        t->carry_flags = (t->carry_flags & LT__STEP_CLOSE) | (m.flags & LT__STEP_COUNTERS);
        memcpy(t->carry_ctr, m.ctr, sizeof t->carry_ctr);
        t->carry_wall = m.ctr_wall_ns;
        return lt_error(LT_ETIMEOUT, "telemetry: the drain took no message for 2 s; "
                                     "the retag is not applied");
    }
    t->carry_flags = 0;
    memset(t->carry_ctr, 0, sizeof t->carry_ctr);
    t->carry_wall = 0;
    if (t->win_steps > 0) t->win_closed++;
    t->win_steps = 0;
    t->t_win_begin = now;
    return LT_OK;
}

/* ---- closing ------------------------------------------------------------------------ */

void lt_tel_close(lt_tel *t, lt_tel_stats *stats) {
    if (!t) return;
    lt_tel_end(t);
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (t->drain_started) pthread_join(t->drain, NULL);

    lt_tel_stats st = {.steps = (int64_t)t->seq, .steps_lost = t->steps_lost,
                       .decode_ns = t->decode_ns, .counters_available = t->available};
    for (int i = 0; i < t->nth; i++) {
        uint64_t first, last;
        lt__ring_peek(&t->rings[i], &first, &last);
        uint64_t dropped = lt__ring_dropped(&t->rings[i]);
        st.records += (int64_t)(last + dropped);
        st.ring_dropped += (int64_t)dropped;
    }
    lt_tel_sink *s = &t->o.sink;
    lt__tel_agg_counts as;
    lt__tel_agg_counts_get(t->agg, &as);
    lt_tel_sink_stats ss = {0};
    /* one wait for delivery in all: a sink that cannot deliver (a broker
     * down) costs the run a bounded delay, not one per flush */
    bool flushed = !s->flush || s->flush(s->ctx, 5000) == LT_OK;
    if (s->stats) s->stats(s->ctx, &ss);

    /* a sink that sends records in batches drops them by the batch, after
     * their emit said yes: its own count is then the larger one */
    int64_t sink_dropped = ss.dropped > as.sink_dropped ? ss.dropped : as.sink_dropped;
    lt_tel_record re = {.kind = LT_TEL_RUN_END};
    re.u.run_end = (lt_tel_run_end){
        .run_id = t->run_id, .tokens = t->seq, .decode_s = (double)t->decode_ns * 1e-9,
        .tok_s = t->decode_ns ? (double)t->seq / ((double)t->decode_ns * 1e-9) : 0,
        .dropped_records = (uint64_t)(st.ring_dropped + sink_dropped + as.orphans),
        .delivery_failures = (uint64_t)(as.sink_failed + ss.failed)};
    lt__tel_agg_emit(t->agg, &re);
    if (s->flush) s->flush(s->ctx, flushed ? 5000 : 100);
    if (s->stats) s->stats(s->ctx, &ss);
    lt__tel_agg_counts_get(t->agg, &as);
    st.windows = as.windows;
    st.ring_dropped += as.orphans; /* records that reached no window */
    sink_dropped = ss.dropped > as.sink_dropped ? ss.dropped : as.sink_dropped;
    st.sink.emitted = as.emitted - (sink_dropped - as.sink_dropped);
    st.sink.dropped = sink_dropped;
    /* closing gives up on what is still in flight */
    st.sink.failed = as.sink_failed + ss.failed + ss.pending;
    s->close(s->ctx);
    if (stats) *stats = st;
    free_tel(t);
}
