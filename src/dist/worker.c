/* The worker: a member of the workers' consumer group on the tasks topic.
 * Chunks are kept until the task that references them arrives; the task
 * runs with its kind's function on the worker's thread pool. Tasks run in
 * batches: every task the consumer has fetched already (up to a bound in
 * count and in time) runs, then all their results (outputs chunked as
 * needed) and the consumed offsets go out in one transaction through the
 * kafka layer's stage, so a commit's cost is shared by the batch, and a
 * task alone is committed at once (nothing is waited for). A task that
 * cannot run (corrupted or missing input, unknown kind, a kind's refusal) is
 * answered with a FAILED result, so the coordinator retries or dead-letters
 * it; a record that is no task or chunk is logged and skipped, never a crash.
 *
 * Offsets: per partition, the worker commits up to the lowest chunk it
 * still keeps (the task that needs it has not run yet) or else past the
 * last record it read, so a worker killed at any point leaves the
 * partition's next owner every record it needs. A heartbeat thread says on
 * the results topic that the worker is alive, with its state.
 *
 * Panels (operands several tasks share) are kept in a bounded cache after
 * the task that carried them, and later tasks reference them by id. They
 * never hold an offset back: a task whose panel the cache does not hold
 * (the partition came from another member, the cache evicted it) is
 * answered NEED_PANEL like any result, and the coordinator sends it again
 * with the panel's bytes. */
#define _GNU_SOURCE /* gethostname */
#include "looptune/dist.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TASK_MAX_ELEMS (1ll << 28)          /* per input tensor: 1 GiB of f32 */
#define MAX_FAILURES 5 /* commits in a row that failed (not a moved partition): give up */
#define BLOB_MAX_AGE_NS (600ull * 1000000000ull) /* chunks whose task never came */
#define BATCH_MAX_BYTES (64u << 20) /* results held for one commit */

typedef struct {
    int64_t consumed; /* offset after the last record read; -1 none */
    int64_t committed; /* last offset committed; -1 none */
    bool batched;      /* a task of the open batch was read here */
} part_pos;

/* Tasks run and not committed yet: their results' records, in order. */
typedef struct {
    lt_dist_outbox ob;
    size_t bytes;
    int64_t n_tasks, n_failed, n_need_panel; /* FAILED results; NEED_PANEL answers */
    uint64_t t0;  /* its first task's start */
    char first[192]; /* its first task's key, for the logs */
    bool revoked; /* a partition it read a task from was revoked: it must not commit */
} batch;

typedef struct {
    const lt_worker_opts *o;
    char id[128];
    char topic_tasks[256], topic_results[256];
    char group[256];
    lt_stage *stage;
    lt_dist_blobs *blobs;
    lt_dist_panels *panels;
    lt_pool *pool;
    part_pos *pos;
    int32_t n_pos;
    lt_worker_stats *st;
    uint64_t t0;
    /* heartbeat state, shared with the heartbeat thread */
    pthread_mutex_t mu;
    char state[16];
    char job[64];
    uint64_t task;
    lt_producer *hb;
    _Atomic bool hb_stop;
    pthread_t hb_thread;
    bool hb_started;
    int failures; /* commits in a row the stage could not make */
    batch batch;
} worker;

static void set_state(worker *w, const char *state, const char *job, uint64_t task);

static double uptime_s(const worker *w) { return (double)(lt_now_ns() - w->t0) * 1e-9; }

/* ---- heartbeats -------------------------------------------------------------------- */

static void send_heartbeat(worker *w) {
    Looptune__Heartbeat hb = LOOPTUNE__HEARTBEAT__INIT;
    char state[16], job[64];
    pthread_mutex_lock(&w->mu);
    memcpy(state, w->state, sizeof state);
    memcpy(job, w->job, sizeof job);
    hb.task_index = w->task;
    hb.tasks_done = (uint64_t)w->st->tasks_done;
    hb.tasks_failed = (uint64_t)w->st->tasks_failed;
    hb.aborted = (uint64_t)w->st->stage.aborted;
    pthread_mutex_unlock(&w->mu);
    hb.worker = w->id;
    hb.group = w->group;
    char *kinds[8];
    size_t nk = 0;
    if (w->o->n_kinds)
        for (size_t i = 0; i < w->o->n_kinds && nk < 8; i++) kinds[nk++] = (char *)w->o->kinds[i];
    else
        for (const lt_dist_kind *k; (k = lt_dist_kind_at(nk)) && nk < 8;)
            kinds[nk++] = (char *)k->name;
    hb.n_kinds = nk;
    hb.kinds = kinds;
    hb.state = state;
    hb.job_id = job;
    hb.uptime_s = uptime_s(w);
    hb.exactly_once = !w->o->at_least_once;
    hb.panel_cache_bytes =
        w->o->panel_cache_bytes ? w->o->panel_cache_bytes : LT_DIST_PANEL_CACHE_BYTES;
    hb.tasks_topic = w->topic_tasks;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_HEARTBEAT;
    env.heartbeat = &hb;
    lt_producer_send_envelope(w->hb, w->id, &env);
}

static void *heartbeat_main(void *arg) {
    worker *w = arg;
    int every = w->o->heartbeat_ms > 0 ? w->o->heartbeat_ms : 1000;
    while (!atomic_load(&w->hb_stop)) {
        send_heartbeat(w);
        for (int slept = 0; slept < every && !atomic_load(&w->hb_stop); slept += 50) {
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static void set_state(worker *w, const char *state, const char *job, uint64_t task) {
    pthread_mutex_lock(&w->mu);
    snprintf(w->state, sizeof w->state, "%s", state);
    snprintf(w->job, sizeof w->job, "%s", job ? job : "");
    w->task = task;
    pthread_mutex_unlock(&w->mu);
}

/* ---- positions ------------------------------------------------------------------- */

static part_pos *pos_of(worker *w, int32_t p) {
    if (p < 0) return NULL;
    if (p >= w->n_pos) {
        int32_t n = p + 1;
        part_pos *v = realloc(w->pos, (size_t)n * sizeof *v);
        if (!v) return NULL;
        for (int32_t i = w->n_pos; i < n; i++) v[i] = (part_pos){-1, -1, false};
        w->pos = v;
        w->n_pos = n;
    }
    return &w->pos[p];
}

/* The partitions whose committable offset moved: *offs [n_pos], returns the count. */
static size_t committable(worker *w, lt_stage_offset *offs) {
    size_t n = 0;
    for (int32_t p = 0; p < w->n_pos; p++) {
        part_pos *pp = &w->pos[p];
        if (pp->consumed < 0 || !lt_stage_owns(w->stage, p)) continue;
        int64_t pending = lt_dist_blobs_min_offset(w->blobs, p);
        int64_t safe = pending >= 0 && pending < pp->consumed ? pending : pp->consumed;
        if (safe > pp->committed) offs[n++] = (lt_stage_offset){p, safe};
    }
    return n;
}

static void committed(worker *w, const lt_stage_offset *offs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        part_pos *pp = pos_of(w, offs[i].partition);
        if (pp) pp->committed = offs[i].offset;
    }
}

/* A revoked partition: its kept chunks go (the next owner reads them again),
 * and what this member knew of its positions. */
static void forget_partition(void *arg, int32_t p) {
    worker *w = arg;
    lt_dist_blobs_drop_partition(w->blobs, p);
    part_pos *pp = pos_of(w, p);
    if (pp) *pp = (part_pos){-1, -1, false};
}

/* Revoked: the open batch may not commit if it read from p, and the
 * partition's panels go too (its next owner gets the tasks that reference
 * them; kept panels survive a rewind, which rereads only). */
static void on_revoke(void *arg, int32_t p) {
    worker *w = arg;
    if (p >= 0 && p < w->n_pos && w->pos[p].batched) w->batch.revoked = true;
    forget_partition(w, p);
    lt_dist_panels_drop_partition(w->panels, p);
}

/* Reads partition p again from its committed offset, if it is still ours. */
static void rewind_partition(worker *w, int32_t p) {
    if (!lt_stage_owns(w->stage, p)) return;
    forget_partition(w, p);
    if (lt_stage_rewind(w->stage, p))
        lt_log(LT_LOG_WARN, "worker %s: %s", w->id, lt_errmsg());
}

/* ---- one task ---------------------------------------------------------------------- */

static bool kind_served(const worker *w, const char *kind) {
    if (!w->o->n_kinds) return lt_dist_kind_find(kind) != NULL;
    for (size_t i = 0; i < w->o->n_kinds; i++)
        if (!strcmp(w->o->kinds[i], kind)) return lt_dist_kind_find(kind) != NULL;
    return false;
}

/* Runs task t (read at partition p), or says why not (*why): LT_OK with outs
 * (or, from a kind that answers with bytes, *data) filled, or an error;
 * *need_panel when a panel it references is not kept. */
static int run_task(worker *w, const Looptune__Task *t, int32_t p, lt_dist_tensor *outs,
                    size_t *n_outs, uint8_t **data, size_t *len, char *why, size_t n_why,
                    bool *need_panel) {
    *n_outs = 0;
    lt_dist_tensor in[8];
    size_t n_in = 0;
    int rc = LT_OK;
    /* every input is claimed first, so no chunk of this task is left behind
     * (kept chunks hold the partition's committed offset back) */
    for (size_t i = 0; i < t->n_inputs; i++) {
        lt_dist_tensor x;
        int r = lt_dist_input_get(w->blobs, w->panels, t->inputs[i], p, TASK_MAX_ELEMS, &x);
        if (r == LT_ENOTFOUND) *need_panel = true;
        if (r == LT_OK && n_in < 8) {
            in[n_in++] = x;
            continue;
        }
        if (r == LT_OK) free(x.data);
        if (rc == LT_OK) {
            rc = r ? r : LT_EFORMAT;
            if (r) snprintf(why, n_why, "input %s", lt_errmsg());
            else snprintf(why, n_why, "%zu inputs: at most 8", t->n_inputs);
        }
    }
    if (rc == LT_OK && !kind_served(w, t->kind)) {
        snprintf(why, n_why, "task kind '%s' is not run by worker %s", t->kind, w->id);
        rc = LT_EUNSUPPORTED;
    }
    if (rc == LT_OK) {
        if (w->o->task_delay_ms > 0) {
            struct timespec ts = {w->o->task_delay_ms / 1000,
                                  (long)(w->o->task_delay_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        lt_dist_task_in ti = {.task = t, .inputs = in, .n_inputs = n_in, .pool = w->pool};
        const lt_dist_kind *k = lt_dist_kind_find(t->kind);
        rc = k->answer ? k->answer(&ti, data, len) : k->run(&ti, outs, n_outs);
        if (rc) snprintf(why, n_why, "%s", lt_errmsg()[0] ? lt_errmsg() : lt_strerror(rc));
    }
    for (size_t i = 0; i < n_in; i++) free(in[i].data);
    return rc;
}

/* Drops the records of o from the n-th on (a result that will not go). */
static void outbox_cut(lt_dist_outbox *o, size_t n) {
    while (o->n > n) {
        o->n--;
        free(o->keys[o->n]);
        free(o->values[o->n]);
    }
}

/* Runs task t (read at partition p) and adds its result (outputs chunked
 * as needed) to the open batch; the batch commits later, all of it at once.
 * An error only when the result cannot be encoded. */
static int handle_task(worker *w, const Looptune__Task *t, int32_t p) {
    char key[192];
    snprintf(key, sizeof key, "%s/%" PRIu64, t->job_id, t->task_index);
    set_state(w, "busy", t->job_id, t->task_index);
    uint64_t t0 = lt_now_ns();
    if (!w->batch.n_tasks) {
        w->batch.t0 = t0;
        snprintf(w->batch.first, sizeof w->batch.first, "%s", key);
    }
    lt_dist_tensor outs[LT_DIST_MAX_OUTPUTS];
    size_t n_outs = 0;
    char why[512] = "";
    bool need_panel = false;
    uint8_t *data = NULL;
    size_t data_len = 0;
    int rc = run_task(w, t, p, outs, &n_outs, &data, &data_len, why, sizeof why, &need_panel);
    double secs = (double)(lt_now_ns() - t0) * 1e-9;

    lt_dist_outbox *ob = &w->batch.ob;
    size_t first = ob->n; /* this result's records start here */
    Looptune__Tensor msgs[LT_DIST_MAX_OUTPUTS], *ptrs[LT_DIST_MAX_OUTPUTS];
    int64_t shapes[LT_DIST_MAX_OUTPUTS][4];
    Looptune__Result res = LOOPTUNE__RESULT__INIT;
    res.job_id = t->job_id;
    res.task_index = t->task_index;
    res.worker = w->id;
    res.attempt = t->attempt;
    res.seconds = secs;
    res.exactly_once = lt_stage_exactly_once(w->stage);
    res.panel_resend = t->panel_resend;
    lt_dist_route route = {.job_id = t->job_id, .task_index = t->task_index,
                           .attempt = t->attempt, .key = key};
    int prc = LT_OK;
    for (size_t i = 0; rc == LT_OK && prc == LT_OK && i < n_outs; i++) {
        looptune__tensor__init(&msgs[i]);
        prc = lt_dist_tensor_put(&outs[i], &route, ob, &msgs[i], shapes[i]);
        ptrs[i] = &msgs[i];
    }
    if (rc == LT_OK && prc == LT_OK) {
        res.status = LOOPTUNE__STATUS__STATUS_OK;
        res.n_outputs = n_outs;
        res.outputs = ptrs;
        res.data = (ProtobufCBinaryData){.len = data_len, .data = data};
    } else {
        if (prc) snprintf(why, sizeof why, "result: %s", lt_errmsg());
        outbox_cut(ob, first); /* chunks of outputs that will not be sent */
        res.status = need_panel && !prc ? LOOPTUNE__STATUS__STATUS_NEED_PANEL
                                        : LOOPTUNE__STATUS__STATUS_FAILED;
        res.error = why;
        if (res.status == LOOPTUNE__STATUS__STATUS_NEED_PANEL)
            lt_log(LT_LOG_INFO, "worker %s: task %s: %s: asking for it", w->id, key, why);
        else
            lt_log(LT_LOG_WARN, "worker %s: task %s attempt %u failed: %s", w->id, key,
                   t->attempt, why);
    }
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_RESULT;
    env.result = &res;
    int erc = lt_dist_outbox_add(ob, key, &env);
    for (size_t i = 0; i < n_outs; i++) free(outs[i].data);
    free(data);
    if (erc) {
        outbox_cut(ob, first);
        return erc;
    }
    for (size_t i = first; i < ob->n; i++) w->batch.bytes += ob->lens[i];
    w->batch.n_tasks++;
    w->batch.n_failed += res.status == LOOPTUNE__STATUS__STATUS_FAILED;
    w->batch.n_need_panel += res.status == LOOPTUNE__STATUS__STATUS_NEED_PANEL;
    part_pos *pp = pos_of(w, p);
    if (pp) pp->batched = true;
    return LT_OK;
}

/* The open batch has reached a bound: its task count, its bytes, its age. */
static bool batch_full(const worker *w) {
    const batch *b = &w->batch;
    int max = w->o->batch_max > 0 ? w->o->batch_max : LT_WORKER_BATCH;
    int ms = w->o->batch_ms > 0 ? w->o->batch_ms : LT_WORKER_BATCH_MS;
    return b->n_tasks >= max || b->bytes >= BATCH_MAX_BYTES ||
           lt_now_ns() - b->t0 >= (uint64_t)ms * 1000000ull;
}

/* Forgets the open batch; the partitions it read tasks from are read again
 * from their committed offsets (here, or by their new owner) when rewind. */
static void batch_end(worker *w, bool rewind) {
    for (int32_t p = 0; p < w->n_pos; p++) {
        if (!w->pos[p].batched) continue;
        w->pos[p].batched = false;
        if (rewind) rewind_partition(w, p);
    }
    lt_dist_outbox_free(&w->batch.ob);
    w->batch = (batch){0};
    set_state(w, "idle", NULL, 0);
}

/* Commits the open batch: every result's records and the offsets in one go
 * (one transaction). LT_OK also when it was dropped (a partition of it
 * moved away); an error only when the stage gave up. */
static int commit_batch(worker *w) {
    batch *b = &w->batch;
    int64_t n_tasks = b->n_tasks;
    if (b->revoked) {
        /* a partition it read was revoked: its task runs on the new owner,
         * so no result of the batch may commit */
        lt_log(LT_LOG_WARN, "worker %s: task %s: result dropped: a partition its batch of "
               "%" PRId64 " read was revoked; the batch's tasks run again", w->id, b->first,
               n_tasks);
        pthread_mutex_lock(&w->mu);
        w->st->tasks_dropped += n_tasks;
        pthread_mutex_unlock(&w->mu);
        batch_end(w, true);
        return LT_OK;
    }
    lt_dist_outbox *ob = &b->ob;
    lt_stage_record *recs = calloc(ob->n ? ob->n : 1, sizeof *recs);
    lt_stage_offset *offs = calloc((size_t)w->n_pos + 1, sizeof *offs);
    if (!recs || !offs) {
        free(recs);
        free(offs);
        batch_end(w, true);
        return lt_error(LT_ENOMEM, "worker: out of memory");
    }
    for (size_t i = 0; i < ob->n; i++)
        recs[i] = (lt_stage_record){.topic = w->topic_results, .key = ob->keys[i],
                                    .key_len = strlen(ob->keys[i]), .value = ob->values[i],
                                    .len = ob->lens[i]};
    size_t n_offs = committable(w, offs);
    int crc = lt_stage_commit(w->stage, recs, ob->n, offs, n_offs);
    char why[512] = "";
    if (crc) snprintf(why, sizeof why, "%s", lt_errmsg());
    pthread_mutex_lock(&w->mu);
    lt_stage_stats_get(w->stage, &w->st->stage);
    if (crc == LT_OK) {
        w->st->tasks_done += n_tasks;
        w->st->tasks_failed += b->n_failed;
        w->st->panels_missed += b->n_need_panel;
    } else if (crc == LT_ESTATE) {
        w->st->tasks_dropped += n_tasks;
    }
    pthread_mutex_unlock(&w->mu);
    if (crc == LT_OK) {
        committed(w, offs, n_offs);
        w->failures = 0;
        batch_end(w, false);
    } else {
        /* Not committed: the batch's partitions are read again from their
         * committed offsets here, or by their new owners. */
        if (n_tasks == 1)
            lt_log(LT_LOG_WARN, "worker %s: task %s: result not committed (%s); the task runs "
                   "again", w->id, b->first, why);
        else
            lt_log(LT_LOG_WARN, "worker %s: task %s: result not committed (%s); it and the "
                   "%" PRId64 " other tasks of its batch run again", w->id, b->first, why,
                   n_tasks - 1);
        for (size_t i = 0; i < n_offs; i++) {
            part_pos *pp = pos_of(w, offs[i].partition);
            if (pp) pp->batched = true;
        }
        batch_end(w, true);
        if (crc != LT_ESTATE) w->failures++;
    }
    free(recs);
    free(offs);
    if (w->failures >= MAX_FAILURES)
        return lt_error(LT_EKAFKA, "%d commits in a row failed: %s", w->failures, why);
    return LT_OK;
}

/* Commits offsets that moved without a task (skipped records, expired tasks). */
static int commit_idle(worker *w) {
    lt_stage_offset *offs = calloc((size_t)w->n_pos + 1, sizeof *offs);
    if (!offs) return LT_OK;
    size_t n = committable(w, offs);
    int rc = n ? lt_stage_commit(w->stage, NULL, 0, offs, n) : LT_OK;
    if (rc == LT_OK) committed(w, offs, n);
    free(offs);
    return rc == LT_ESTATE ? LT_OK : rc;
}

/* One record of the tasks topic. */
static int handle_record(worker *w, const lt_record *rec) {
    part_pos *pp = pos_of(w, rec->partition);
    if (pp) pp->consumed = rec->offset + 1;
    Looptune__Envelope *env = NULL;
    int rc = lt_envelope_decode(rec->value, rec->len, &env);
    if (rc) {
        w->st->rejected++;
        lt_log(LT_LOG_WARN, "worker %s: record %s[%d]@%" PRId64 " rejected: %s", w->id,
               rec->topic, (int)rec->partition, rec->offset, lt_errmsg());
        return LT_OK;
    }
    rc = LT_OK;
    if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CHUNK) {
        if (lt_dist_blobs_add(w->blobs, env->chunk, rec->partition, rec->offset)) {
            w->st->rejected++;
            lt_log(LT_LOG_WARN, "worker %s: chunk %s[%d]@%" PRId64 " rejected: %s", w->id,
                   rec->topic, (int)rec->partition, rec->offset, lt_errmsg());
        }
    } else if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_TASK) {
        const Looptune__Task *t = env->task;
        if (!t->job_id[0] || !t->kind[0] || t->attempt < 1) {
            w->st->rejected++;
            lt_log(LT_LOG_WARN, "worker %s: task %s[%d]@%" PRId64 " rejected: no job id, kind "
                   "or attempt", w->id, rec->topic, (int)rec->partition, rec->offset);
            /* its inputs' chunks are dropped with it */
            for (size_t i = 0; i < t->n_inputs; i++) {
                lt_dist_tensor x;
                if (lt_dist_tensor_get(w->blobs, t->inputs[i], TASK_MAX_ELEMS, &x) == LT_OK)
                    free(x.data);
            }
        } else if (t->deadline_ns && lt_wall_ns() > t->deadline_ns) {
            w->st->tasks_expired++;
            lt_log(LT_LOG_INFO, "worker %s: task %s/%" PRIu64 " is past its deadline: skipped",
                   w->id, t->job_id, t->task_index);
            for (size_t i = 0; i < t->n_inputs; i++) {
                lt_dist_tensor x;
                if (lt_dist_tensor_get(w->blobs, t->inputs[i], TASK_MAX_ELEMS, &x) == LT_OK)
                    free(x.data);
            }
        } else {
            rc = handle_task(w, t, rec->partition);
        }
    } else {
        w->st->rejected++;
        lt_log(LT_LOG_WARN, "worker %s: record %s[%d]@%" PRId64 " rejected: a %s, not a task "
               "or chunk", w->id, rec->topic, (int)rec->partition, rec->offset,
               lt_envelope_kind(env));
    }
    lt_envelope_free(env);
    return rc;
}

/* ---- the loop ------------------------------------------------------------------------ */

int lt_worker_run(const lt_worker_opts *o, lt_worker_stats *st) {
    memset(st, 0, sizeof *st);
    worker w = {.o = o, .st = st, .t0 = lt_now_ns()};
    pthread_mutex_init(&w.mu, NULL);
    snprintf(w.state, sizeof w.state, "idle");
    const char *prefix = o->prefix ? o->prefix : LT_KAFKA_TOPIC_PREFIX;
    snprintf(w.topic_tasks, sizeof w.topic_tasks, "%s%s", prefix,
             lt_kafka_topic_suffix(LT_TOPIC_TASKS));
    if (o->tasks_topic && *o->tasks_topic)
        snprintf(w.topic_tasks, sizeof w.topic_tasks, "%s", o->tasks_topic);
    snprintf(w.topic_results, sizeof w.topic_results, "%s%s", prefix,
             lt_kafka_topic_suffix(LT_TOPIC_RESULTS));
    /* one workers' group per topic prefix by default */
    snprintf(w.group, sizeof w.group, "%s", o->group ? o->group : "");
    if (!w.group[0]) snprintf(w.group, sizeof w.group, "%sworkers", prefix);
    lt_kafka_member_name(o->worker_id, o->instance_id, w.id, sizeof w.id);
    /* A stable transactional id (from the instance id) lets a restarted
     * worker fence its predecessor and abort what it left open at once; a
     * dynamic one's open transaction ends at transaction.timeout.ms. */
    char txn_id[200];
    snprintf(txn_id, sizeof txn_id, "looptune-worker-%s", w.id);

    int rc = o->topics_made ? LT_OK : lt_dist_ensure_topics(&o->conn, prefix, o->partitions);
    if (!rc) rc = lt_dist_blobs_init(&w.blobs, 0);
    if (!rc) rc = lt_dist_panels_init(&w.panels, o->panel_cache_bytes);
    if (!rc) rc = lt_pool_init(&w.pool, o->threads > 0 ? o->threads : 1);
    lt_producer_opts po = {.conn = o->conn, .topic = w.topic_results, .linger_ms = -1};
    if (!rc) rc = lt_producer_open(&w.hb, &po);
    if (!rc) {
        lt_stage_opts so = {.conn = o->conn, .group = w.group,
                            .topic = w.topic_tasks, .output_topic = w.topic_results,
                            .transactional_id = o->at_least_once ? NULL : txn_id,
                            .instance_id = o->instance_id,
                            .session_timeout_ms = o->session_timeout_ms,
                            .test_commit_delay_ms = o->test_commit_delay_ms,
                            .fixed_members = o->fixed_members,
                            .fixed_index = o->fixed_index,
                            .on_revoke = on_revoke, .arg = &w};
        rc = lt_stage_open(&w.stage, &so);
    }
    if (!rc) {
        w.hb_started = !pthread_create(&w.hb_thread, NULL, heartbeat_main, &w);
        lt_log(LT_LOG_INFO, "worker %s: group %s on %s, %d threads, %s, batches of up to %d "
               "tasks or %d ms", w.id, w.group, w.topic_tasks,
               o->threads > 0 ? o->threads : 1,
               o->at_least_once ? "at-least-once" : "exactly-once (transactions)",
               o->batch_max > 0 ? o->batch_max : LT_WORKER_BATCH,
               o->batch_ms > 0 ? o->batch_ms : LT_WORKER_BATCH_MS);
    }
    uint64_t last_idle = lt_now_ns();
    while (!rc && !atomic_load(o->stop)) {
        lt_record rec;
        /* a batch takes what the consumer has fetched already, never waits */
        int got = lt_stage_poll(w.stage, w.batch.n_tasks ? 0 : 200, &rec);
        if (got < 0) {
            if (got == LT_ENOTFOUND) {
                lt_log(LT_LOG_WARN, "worker %s: %s", w.id, lt_errmsg());
                continue;
            }
            rc = got;
            break;
        }
        if (got == 1) {
            rc = handle_record(&w, &rec);
            if (!rc && (w.batch.revoked || (w.batch.n_tasks && batch_full(&w))))
                rc = commit_batch(&w);
            continue;
        }
        if (w.batch.n_tasks || w.batch.revoked) {
            rc = commit_batch(&w);
            continue;
        }
        /* idle: commit what was skipped, forget chunks whose task never came */
        if (lt_now_ns() - last_idle > 1000000000ull) {
            last_idle = lt_now_ns();
            size_t gone = lt_dist_blobs_expire(w.blobs, BLOB_MAX_AGE_NS);
            if (gone) lt_log(LT_LOG_WARN, "worker %s: %zu chunk sets whose task never came "
                             "were dropped", w.id, gone);
            rc = commit_idle(&w);
        }
    }
    /* stopping: the batch in hand commits, then what was skipped */
    if (w.stage && !rc && (w.batch.n_tasks || w.batch.revoked)) rc = commit_batch(&w);
    if (w.stage && !rc) rc = commit_idle(&w);
    int err = rc;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", err ? lt_errmsg() : "");
    set_state(&w, "leaving", NULL, 0);
    if (w.hb_started) {
        atomic_store(&w.hb_stop, true);
        pthread_join(w.hb_thread, NULL);
        send_heartbeat(&w);
    }
    if (w.stage) lt_stage_stats_get(w.stage, &st->stage);
    lt_stage_close(w.stage); /* leaves the group: its partitions go to the others at once */
    lt_producer_close(w.hb);
    lt_pool_free(w.pool);
    lt_dist_outbox_free(&w.batch.ob);
    lt_dist_blobs_free(w.blobs);
    lt_dist_panels_free(w.panels);
    free(w.pos);
    pthread_mutex_destroy(&w.mu);
    return err ? lt_error(err, "%s", msg) : LT_OK;
}
