/* The coordinator of a matmul job: C = A B cut into output tiles, one task
 * per tile with A's row panel and B's column panel (transposed) as inputs,
 * chunked as needed. With a k-split a tile is several tasks, each the
 * product of a range of k, and the coordinator adds their partial tiles in
 * split order (0 first) once all have come, so C does not depend on the
 * order results arrive in. Operands may travel converted (f16, bf16, q8_0),
 * converted here once. It follows the results topic (read_committed, from
 * the moment before the first task is sent) and applies each (job, task)
 * once: a result for a tile already applied is counted as a duplicate and
 * dropped. A FAILED attempt is sent again as attempt + 1, and after
 * max_attempts the task goes to the dead-letter topic and the job fails.
 * Workers' heartbeats on the same topic say how many are alive. */
#include "dist/coordinator.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    uint32_t attempt; /* the latest attempt sent */
    uint32_t resends; /* sends of that attempt after NEED_PANEL answers */
    uint32_t ref_gen[2]; /* the carrying send of each panel the latest send referenced (0: carried) */
    bool done;
    lt__attempt_errors errors;
} task_state;

typedef struct {
    const lt_submit_opts *o;
    lt_submit_stats *st;
    int64_t m, n, k, bm, bn, tiles_m, tiles_n;
    int64_t bk, splits; /* k range of a task, and tasks per tile (1: no k-split) */
    const float *a;
    float *bt; /* [n][k] B transposed: a column panel of B is a run of its rows */
    float *c;
    lt_dtype dtype;         /* the operands as they travel */
    const uint8_t *aq, *btq; /* A [m] and B^T [n] rows of k in dtype (a, bt for f32) */
    uint8_t *aq_own, *btq_own;
    size_t arb;             /* bytes of a row of k in dtype */
    float **partial;        /* [tasks] k-split partial tiles until their tile is whole */
    int64_t *tile_have;     /* [tiles] partial tiles arrived */
    /* panel reuse */
    int by;                 /* LT_PANEL_BY_ROWS or _COLS; 0: the plain tile scheme */
    bool reuse[2];          /* A's, B's panels are carried once a partition, then referenced */
    int32_t parts;          /* partitions of the tasks topic */
    uint32_t *pgen;         /* [panel * parts + partition] the send that carried it there (0 none) */
    uint32_t *pcrc;         /* [panel] its CRC32C, once carried */
    uint32_t gen;           /* sends that carried a panel, so far */
    int64_t *order;         /* [tasks] the order of the first sends (NULL: by index) */
    task_state *ts;
    char topic_tasks[256], topic_results[256], topic_dead[256];
    lt_producer *tasks, *dead;
    lt_follower *results;
    lt_dist_blobs *blobs;
    lt__workers workers;
    uint64_t deadline_wall_ns;
    bool resume_checked; /* resume: a task of the job was compared with these operands */
    /* a noop job (noop_elems > 0): every task carries x and must get it back */
    const float *noop_x;
    int64_t noop_elems;
    uint64_t *sent_ns; /* [tasks] when each task's latest attempt went out */
    double *rt_ms;     /* [applied] send-to-applied times */
} job;

/* Task t is split t % splits of tile t / splits. */
static void tile_of(const job *j, int64_t t, int64_t *i0, int64_t *mt, int64_t *j0, int64_t *nt) {
    t /= j->splits;
    *i0 = t / j->tiles_n * j->bm;
    *j0 = t % j->tiles_n * j->bn;
    *mt = j->m - *i0 < j->bm ? j->m - *i0 : j->bm;
    *nt = j->n - *j0 < j->bn ? j->n - *j0 : j->bn;
}

/* The k range of task t: [*k0, *k0 + *kn). */
static void split_of(const job *j, int64_t t, int64_t *k0, int64_t *kn) {
    *k0 = t % j->splits * j->bk;
    *kn = j->k - *k0 < j->bk ? j->k - *k0 : j->bk;
}

/* Rows [r0, r0 + rows) of src (rows of k in dtype), columns [k0, k0 + kn):
 * a pointer into src when that is all of k, else a copy in *own (free it). */
static const uint8_t *panel_rows(const job *j, const uint8_t *src, int64_t r0, int64_t rows,
                                 int64_t k0, int64_t kn, uint8_t **own) {
    *own = NULL;
    if (kn == j->k) return src + (size_t)r0 * j->arb;
    const size_t off = lt_dtype_row_bytes(j->dtype, k0), rb = lt_dtype_row_bytes(j->dtype, kn);
    if (!(*own = malloc(rb * (size_t)rows))) return NULL;
    for (int64_t i = 0; i < rows; i++)
        memcpy(*own + (size_t)i * rb, src + (size_t)(r0 + i) * j->arb + off, rb);
    return *own;
}

/* Flips a byte of the first input as it travels (tests): in its first chunk
 * record, or in the inline copy. */
static int corrupt_first(lt_dist_outbox *o, float *inline_copy, bool chunked) {
    if (!chunked) {
        ((uint8_t *)inline_copy)[5] ^= 0x20;
        return LT_OK;
    }
    Looptune__Envelope *env;
    int rc = lt_envelope_decode(o->values[0], o->lens[0], &env);
    if (rc) return rc;
    env->chunk->data.data[5] ^= 0x20;
    free(o->values[0]);
    rc = lt_envelope_encode(env, &o->values[0], &o->lens[0]);
    lt_envelope_free(env);
    return rc;
}

/* The task record of tile t (its tensors described in msgs, their chunks in o). */
static void fill_task(const job *j, int64_t t, uint32_t attempt, Looptune__Task *task,
                      Looptune__Param *params, Looptune__Param **pp) {
    int64_t i0, mt, j0, nt;
    tile_of(j, t, &i0, &mt, &j0, &nt);
    looptune__task__init(task);
    task->job_id = (char *)j->st->job_id;
    task->task_index = (uint64_t)t;
    task->kind = j->noop_elems ? "noop" : "matmul";
    task->attempt = attempt;
    task->max_attempts = j->o->max_attempts ? j->o->max_attempts : 3;
    task->deadline_ns = j->deadline_wall_ns;
    task->total_tasks = (uint64_t)j->st->tasks;
    int64_t k0, kn;
    split_of(j, t, &k0, &kn);
    static const char *const names[9] = {"row0", "col0", "rows", "cols", "k",
                                         "split", "splits", "k0", "k_len"};
    const int64_t vals[9] = {i0, j0, mt, nt, j->k, t % j->splits, j->splits, k0, kn};
    const int n_params = j->splits > 1 ? 9 : 5;
    for (int i = 0; i < n_params; i++) {
        looptune__param__init(&params[i]);
        params[i].name = (char *)names[i];
        params[i].value = vals[i];
        pp[i] = &params[i];
    }
    task->n_params = j->noop_elems ? 0 : (size_t)n_params;
    task->params = pp;
}

/* Panel reuse: panel `which` (0 A's row panel, 1 B's column panel) of task
 * t, numbered over both operands and the k-splits. */
static int64_t panel_index(const job *j, int64_t t, int which) {
    const int64_t tile = t / j->splits, q = t % j->splits;
    return which == 0 ? tile / j->tiles_n * j->splits + q
                      : (j->tiles_m + tile % j->tiles_n) * j->splits + q;
}

/* The partition task t goes to: its tile row's (or column's), rows dealt
 * round the partitions; -1 (the partitioner's, by key) without reuse. */
static int32_t partition_of(const job *j, int64_t t) {
    if (!j->by) return -1;
    const int64_t tile = t / j->splits;
    const int64_t line = j->by == LT_PANEL_BY_ROWS ? tile / j->tiles_n : tile % j->tiles_n;
    return (int32_t)(line % j->parts);
}

/* The id of panel pi: the same for the job's every send of it (FNV-1a). */
static uint64_t panel_id(const job *j, int64_t pi) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = j->st->job_id; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    for (int b = 0; b < 8; b++) h = (h ^ (uint8_t)((uint64_t)pi >> (8 * b))) * 0x100000001b3ull;
    return h ? h : 1;
}

/* Sends task t as attempt. With panel reuse a panel already carried to the
 * task's partition is referenced by id (the worker keeps it), unless
 * carry_all: then every panel travels with its bytes again. */
static int send_task(job *j, int64_t t, uint32_t attempt, bool carry_all) {
    int64_t i0, mt, j0, nt, k0, kn;
    tile_of(j, t, &i0, &mt, &j0, &nt);
    split_of(j, t, &k0, &kn);
    char key[192];
    snprintf(key, sizeof key, "%s/%" PRId64, j->st->job_id, t);
    lt_dist_route r = {.job_id = j->st->job_id, .task_index = (uint64_t)t, .attempt = attempt,
                       .chunk_bytes = j->o->chunk_bytes, .key = key};
    uint8_t *own[2] = {NULL, NULL};
    lt_dist_tensor in[2] = {
        {.name = "a", .ndim = 2, .shape = {mt, kn}, .dtype = j->dtype},
        {.name = "b_t", .ndim = 2, .shape = {nt, kn}, .dtype = j->dtype},
    };
    int n_in = 2;
    if (j->noop_elems) {
        in[0] = (lt_dist_tensor){.name = "x", .ndim = 1, .shape = {j->noop_elems},
                                 .data = (float *)j->noop_x};
        n_in = 1;
    }
    bool corrupt = t == j->o->corrupt_task && attempt <= j->o->corrupt_attempts;
    const int32_t part = partition_of(j, t);
    task_state *ts = &j->ts[t];
    float *copy = NULL;
    lt_dist_outbox o = {0};
    Looptune__Tensor msgs[2], *ptrs[2];
    int64_t shapes[2][4];
    int rc = LT_OK;
    for (int i = 0; i < n_in && !rc; i++) {
        looptune__tensor__init(&msgs[i]);
        ptrs[i] = &msgs[i];
        /* a corrupted panel is not kept: it travels without an id */
        const bool panel = !j->noop_elems && j->by && j->reuse[i] && !(corrupt && i == 0);
        const int64_t pi = panel ? panel_index(j, t, i) : -1;
        uint32_t *gen = panel ? &j->pgen[pi * j->parts + part] : NULL;
        ts->ref_gen[i] = 0;
        if (panel && *gen && !carry_all && !corrupt) {
            /* carried to this partition before: its worker keeps it */
            for (int d = 0; d < in[i].ndim; d++) shapes[i][d] = in[i].shape[d];
            msgs[i].name = in[i].name;
            msgs[i].dtype = (char *)lt_dtype_name(in[i].dtype);
            msgs[i].n_shape = (size_t)in[i].ndim;
            msgs[i].shape = shapes[i];
            msgs[i].nbytes = lt_dist_tensor_bytes(&in[i]);
            msgs[i].crc32c = j->pcrc[pi];
            msgs[i].panel_id = panel_id(j, pi);
            msgs[i].panel_ref = true;
            ts->ref_gen[i] = *gen;
            j->st->panel_refs++;
            continue;
        }
        if (!j->noop_elems &&
            !(in[i].data = (float *)panel_rows(j, i ? j->btq : j->aq, i ? j0 : i0, i ? nt : mt,
                                               k0, kn, &own[i]))) {
            rc = lt_error(LT_ENOMEM, "submit: out of memory");
            break;
        }
        if (corrupt && i == 0) {
            size_t bytes = lt_dist_tensor_bytes(&in[0]);
            if (!(copy = malloc(bytes ? bytes : 1))) {
                rc = lt_error(LT_ENOMEM, "submit: out of memory");
                break;
            }
            memcpy(copy, in[0].data, bytes);
            in[0].data = copy;
        }
        rc = lt_dist_tensor_put(&in[i], &r, &o, &msgs[i], shapes[i]);
        if (!rc && panel) {
            msgs[i].panel_id = panel_id(j, pi);
            j->pcrc[pi] = msgs[i].crc32c;
            *gen = ++j->gen; /* later tasks of this partition reference this send */
            j->st->panels_sent++;
        }
    }
    size_t n_chunks = o.n;
    if (!rc && corrupt) rc = corrupt_first(&o, copy, msgs[0].chunk_count > 0);
    Looptune__Task task;
    Looptune__Param params[9], *pp[9];
    fill_task(j, t, attempt, &task, params, pp);
    task.n_inputs = (size_t)n_in;
    task.inputs = ptrs;
    task.panel_resend = ts->resends;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_TASK;
    env.task = &task;
    if (!rc) rc = lt_dist_outbox_add(&o, key, &env);
    if (!rc) rc = lt_dist_outbox_send(&o, j->tasks, part, &j->st->bytes_sent);
    if (!rc) {
        j->st->chunks_sent += (int64_t)n_chunks;
        ts->attempt = attempt;
        j->sent_ns[t] = lt_now_ns();
    }
    lt_dist_outbox_free(&o);
    free(copy);
    free(own[0]);
    free(own[1]);
    return rc;
}

/* Task t failed for good: its dead letter, and the job's reason. */
static int dead_letter(job *j, int64_t t, const char *reason) {
    task_state *s = &j->ts[t];
    Looptune__Task task;
    Looptune__Param params[9], *pp[9];
    fill_task(j, t, s->attempt, &task, params, pp);
    char key[192];
    snprintf(key, sizeof key, "%s/%" PRId64, j->st->job_id, t);
    int rc = lt__dead_letter_send(j->dead, key, &task, reason, &s->errors, &j->st->bytes_sent);
    j->st->dead++;
    if (!j->st->dead_reason[0])
        snprintf(j->st->dead_reason, sizeof j->st->dead_reason, "task %" PRId64 " (%.100s): %.380s",
                 t,
                 key, reason);
    return rc;
}

/* A failed attempt of task t: send it again, or give it up. */
static int attempt_failed(job *j, int64_t t, uint32_t attempt, const char *why) {
    task_state *s = &j->ts[t];
    if (s->done || attempt < s->attempt) return LT_OK; /* stale: a later attempt is out */
    j->st->failed_results++;
    lt__attempt_errors_add(&s->errors, attempt, why);
    uint32_t max = j->o->max_attempts ? j->o->max_attempts : 3;
    lt_log(LT_LOG_WARN, "submit: job %s task %" PRId64 " attempt %u of %u failed: %s",
           j->st->job_id, t, attempt, max, why);
    if (attempt >= max) {
        char reason[600];
        snprintf(reason, sizeof reason, "failed %u attempts; last: %s", attempt, why);
        int rc = dead_letter(j, t, reason);
        return rc ? rc : LT_EFORMAT;
    }
    j->st->retries++;
    s->resends = 0;
    return send_task(j, t, attempt + 1, true); /* every panel carried again */
}

static void heard_from(job *j, const Looptune__Heartbeat *hb) {
    /* a worker of another tasks topic (a host class's tune workers) takes none of ours */
    if (hb->tasks_topic && *hb->tasks_topic && strcmp(hb->tasks_topic, j->topic_tasks)) return;
    lt__worker_seen *w =
        lt__workers_heard(&j->workers, hb->worker, hb->state && !strcmp(hb->state, "leaving"));
    if (w) w->cache_bytes = hb->panel_cache_bytes;
    j->st->workers_seen = j->workers.n;
}

static int workers_alive(const job *j) { return lt__workers_alive(&j->workers); }

/* A result of our job. Returns LT_OK, or the job's end (a dead letter, an
 * error sending). */
static int on_result(job *j, const Looptune__Result *r, const lt_record *rec) {
    if (r->task_index >= (uint64_t)j->st->tasks || r->attempt < 1) {
        j->st->rejected++;
        lt_log(LT_LOG_WARN, "submit: result %s[%d]@%" PRId64 " rejected: task %" PRIu64
               " attempt %u is not one of the job's", rec->topic, (int)rec->partition,
               rec->offset, r->task_index, r->attempt);
        return LT_OK;
    }
    int64_t t = (int64_t)r->task_index;
    task_state *s = &j->ts[t];
    if (r->status == LOOPTUNE__STATUS__STATUS_NEED_PANEL) {
        j->st->need_panel++;
        if (s->done || !j->sent_ns[t] || r->attempt != s->attempt ||
            r->panel_resend != s->resends)
            return LT_OK; /* an answer to an earlier send (or coordinator): a later one is out */
        if (!j->by || (!s->ref_gen[0] && !s->ref_gen[1])) {
            char why[560];
            snprintf(why, sizeof why, "%s: asked for a panel its task carried (%s)",
                     r->worker && *r->worker ? r->worker : "a worker", r->error ? r->error : "");
            return attempt_failed(j, t, r->attempt, why);
        }
        /* the panels it referenced are not on that partition's worker (it
         * came from another member, its cache evicted them): the next send
         * carries them, unless one carried them again meanwhile */
        const int32_t part = partition_of(j, t);
        for (int i = 0; i < 2; i++) {
            uint32_t *gen = &j->pgen[panel_index(j, t, i) * j->parts + part];
            if (s->ref_gen[i] && *gen == s->ref_gen[i]) *gen = 0;
        }
        s->resends++;
        j->st->panel_resends++;
        lt_log(LT_LOG_INFO, "submit: job %s task %" PRId64 ": %s: sent again with its panels",
               j->st->job_id, t, r->error && *r->error ? r->error : "a panel is missing");
        return send_task(j, t, s->attempt, s->resends > 2); /* third time: every panel */
    }
    if (r->status != LOOPTUNE__STATUS__STATUS_OK) {
        char why[520];
        snprintf(why, sizeof why, "%s%s%s", r->worker && *r->worker ? r->worker : "a worker",
                 ": ", r->error && *r->error ? r->error : "failed without a reason");
        return attempt_failed(j, t, r->attempt, why);
    }
    /* claim the outputs' chunks first, whatever happens to the result */
    int64_t i0, mt, j0, nt;
    tile_of(j, t, &i0, &mt, &j0, &nt);
    lt_dist_tensor out[LT_DIST_MAX_OUTPUTS];
    size_t n_out = 0;
    char why[512] = "";
    const int64_t max_elems = j->noop_elems ? j->noop_elems : j->bm * j->bn;
    for (size_t i = 0; i < r->n_outputs && i < LT_DIST_MAX_OUTPUTS; i++) {
        if (lt_dist_tensor_get(j->blobs, r->outputs[i], max_elems, &out[n_out]) == LT_OK)
            n_out++;
        else if (!why[0])
            snprintf(why, sizeof why, "output %s", lt_errmsg());
    }
    if (j->noop_elems) {
        if (!why[0] && (n_out != 1 || strcmp(out[0].name, "x") || out[0].ndim != 1 ||
                        out[0].dtype != LT_F32 ||
                        out[0].shape[0] != j->noop_elems ||
                        memcmp(out[0].data, j->noop_x, (size_t)j->noop_elems * sizeof(float))))
            snprintf(why, sizeof why, "output: x sent back unchanged expected");
    } else if (!why[0] && (n_out != 1 || strcmp(out[0].name, "c") || out[0].ndim != 2 ||
                           out[0].dtype != LT_F32 || out[0].shape[0] != mt ||
                           out[0].shape[1] != nt))
        snprintf(why, sizeof why, "output: one %" PRId64 "x%" PRId64 " f32 tensor 'c' expected",
                 mt, nt);
    int rc = LT_OK;
    if (why[0] && s->done) {
        j->st->rejected++; /* a broken answer for a tile already applied */
        lt_log(LT_LOG_WARN, "submit: result %s[%d]@%" PRId64 " rejected: %s", rec->topic,
               (int)rec->partition, rec->offset, why);
    } else if (s->done) {
        j->st->duplicates++; /* applied already: a replay, dropped */
    } else if (why[0]) {
        char w2[600];
        snprintf(w2, sizeof w2, "%s: %s", r->worker && *r->worker ? r->worker : "a worker", why);
        rc = attempt_failed(j, t, r->attempt, w2);
    } else {
        if (j->splits == 1) {
            for (int64_t i = 0; j->c && i < mt; i++)
                memcpy(j->c + (i0 + i) * j->n + j0, out[0].data + i * nt,
                       (size_t)nt * sizeof(float));
        } else {
            /* a partial tile waits for the tile's others; then they are
             * added in split order, whatever order they came in */
            j->partial[t] = out[0].data;
            out[0].data = NULL;
            const int64_t tile = t / j->splits, first = tile * j->splits;
            if (++j->tile_have[tile] == j->splits) {
                for (int64_t i = 0; i < mt; i++)
                    for (int64_t jj = 0; jj < nt; jj++) {
                        float acc = j->partial[first][i * nt + jj];
                        for (int64_t q = 1; q < j->splits; q++)
                            acc += j->partial[first + q][i * nt + jj];
                        j->c[(i0 + i) * j->n + j0 + jj] = acc;
                    }
                for (int64_t q = 0; q < j->splits; q++) {
                    free(j->partial[first + q]);
                    j->partial[first + q] = NULL;
                }
            }
        }
        s->done = true;
        if (j->sent_ns[t]) j->rt_ms[j->st->applied] = (double)(lt_now_ns() - j->sent_ns[t]) * 1e-6;
        j->st->applied++;
    }
    for (size_t i = 0; i < n_out; i++) free(out[i].data);
    return rc;
}

/* One record of the results topic. */
static int on_record(job *j, const lt_record *rec) {
    Looptune__Envelope *env;
    if (lt_envelope_decode(rec->value, rec->len, &env)) {
        j->st->rejected++;
        lt_log(LT_LOG_WARN, "submit: record %s[%d]@%" PRId64 " rejected: %s", rec->topic,
               (int)rec->partition, rec->offset, lt_errmsg());
        return LT_OK;
    }
    int rc = LT_OK;
    switch (env->payload_case) {
    case LOOPTUNE__ENVELOPE__PAYLOAD_HEARTBEAT: heard_from(j, env->heartbeat); break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_CHUNK:
        if (!strcmp(env->chunk->job_id, j->st->job_id)) j->st->bytes_received += (int64_t)rec->len;
        if (!strcmp(env->chunk->job_id, j->st->job_id) &&
            lt_dist_blobs_add(j->blobs, env->chunk, rec->partition, rec->offset)) {
            j->st->rejected++;
            lt_log(LT_LOG_WARN, "submit: chunk %s[%d]@%" PRId64 " rejected: %s", rec->topic,
                   (int)rec->partition, rec->offset, lt_errmsg());
        }
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_RESULT:
        if (!strcmp(env->result->job_id, j->st->job_id)) {
            j->st->bytes_received += (int64_t)rec->len;
            rc = on_result(j, env->result, rec);
        }
        break;
    default:
        j->st->rejected++;
        lt_log(LT_LOG_WARN, "submit: record %s[%d]@%" PRId64 " rejected: a %s on the results "
               "topic", rec->topic, (int)rec->partition, rec->offset, lt_envelope_kind(env));
        break;
    }
    lt_envelope_free(env);
    return rc;
}

static void progress(const job *j, double elapsed) {
    fprintf(stderr, "submit: job %s: %" PRId64 "/%" PRId64 " tasks, %.1f tasks/s, %d workers "
            "alive, %" PRId64 " retries, %" PRId64 " duplicates dropped\n", j->st->job_id,
            j->st->applied, j->st->tasks, elapsed > 0 ? (double)j->st->applied / elapsed : 0.0,
            workers_alive(j), j->st->retries, j->st->duplicates);
}

/* Waits for results until every task is applied, a task is dead, no worker
 * is alive for worker_timeout_s, or the job times out. */
static int collect(job *j, uint64_t t0) {
    const double wt = j->o->worker_timeout_s > 0 ? j->o->worker_timeout_s : 30;
    const double jt = j->o->job_timeout_s > 0 ? j->o->job_timeout_s : 3600;
    const double every = j->o->progress_s == 0 ? 2 : j->o->progress_s;
    uint64_t last_alive = lt_now_ns(), last_progress = lt_now_ns();
    while (j->st->applied < j->st->tasks) {
        lt_record rec;
        int got = lt_follower_poll(j->results, 200, &rec);
        if (got < 0) lt_log(LT_LOG_WARN, "submit: %s", lt_errmsg());
        if (got == 1) {
            int rc = on_record(j, &rec);
            if (rc) return rc;
        }
        uint64_t now = lt_now_ns();
        double elapsed = (double)(now - t0) * 1e-9;
        if (workers_alive(j) > 0) last_alive = now;
        if ((double)(now - last_alive) * 1e-9 > wt)
            return lt_error(LT_ETIMEOUT, "no worker alive: none heard from on %s for %.0f s, "
                            "%" PRId64 " of %" PRId64 " tasks left (start one: looptune worker "
                            "--brokers ...)", j->topic_results, wt,
                            j->st->tasks - j->st->applied, j->st->tasks);
        if (elapsed > jt)
            return lt_error(LT_ETIMEOUT, "job timed out after %.0f s with %" PRId64 " of %" PRId64
                            " tasks left", jt, j->st->tasks - j->st->applied, j->st->tasks);
        if (every > 0 && (double)(now - last_progress) * 1e-9 >= every) {
            last_progress = now;
            progress(j, elapsed);
        }
    }
    return LT_OK;
}

static int drained_record(void *j, const lt_record *rec) { return on_record(j, rec); }

/* Until a first worker says it is alive (so no task is left for nobody). */
static int wait_for_worker(job *j) {
    const double wt = j->o->worker_timeout_s > 0 ? j->o->worker_timeout_s : 30;
    uint64_t t0 = lt_now_ns();
    while (workers_alive(j) == 0) {
        if ((double)(lt_now_ns() - t0) * 1e-9 > wt)
            return lt_error(LT_ETIMEOUT, "no worker alive: none heard from on %s within %.0f s "
                            "(start one: looptune worker --brokers ...)", j->topic_results, wt);
        lt_record rec;
        int got = lt_follower_poll(j->results, 200, &rec);
        if (got == 1) {
            int rc = on_record(j, &rec);
            if (rc) return rc;
        }
    }
    return LT_OK;
}

/* ---- resume: an earlier coordinator's job ---------------------------------------- */

static int64_t param_of(const Looptune__Task *t, const char *name) {
    for (size_t i = 0; i < t->n_params; i++)
        if (t->params[i]->name && !strcmp(t->params[i]->name, name)) return t->params[i]->value;
    return -1;
}

/* Calls fn on every envelope of topic (to its end now) whose job is ours. */
static int replay(job *j, const char *topic, int (*fn)(job *, const Looptune__Envelope *,
                                                         const lt_record *)) {
    lt_kafka_reader *r;
    int rc = lt_kafka_reader_open(&r, &j->o->conn, topic, 15000);
    if (rc == LT_ENOTFOUND) return LT_OK;
    if (rc) return rc;
    lt_record rec;
    while ((rc = lt_kafka_reader_next(r, 3000, &rec)) == 1) {
        Looptune__Envelope *env;
        if (!rec.value || lt_envelope_decode(rec.value, rec.len, &env)) continue;
        rc = fn(j, env, &rec);
        lt_envelope_free(env);
        if (rc) break;
    }
    lt_kafka_reader_close(r);
    /* an open transaction holds the rest back: the follower sees it when it commits */
    return rc == LT_ETIMEOUT || rc == 0 ? LT_OK : rc;
}

/* A task of the job as an earlier coordinator sent it: the same tiling, the
 * same operands (the first one's CRC32C), and the attempts sent. */
static int resume_task(job *j, const Looptune__Envelope *env, const lt_record *rec) {
    (void)rec;
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_TASK) return LT_OK;
    const Looptune__Task *t = env->task;
    if (strcmp(t->job_id, j->st->job_id)) return LT_OK;
    int64_t i0, mt, j0, nt, ti = (int64_t)t->task_index;
    if (ti >= j->st->tasks || (int64_t)t->total_tasks != j->st->tasks)
        return lt_error(LT_EINVAL, "resume: job %s has %llu tasks, these operands in these "
                        "tiles make %lld", j->st->job_id, (unsigned long long)t->total_tasks,
                        (long long)j->st->tasks);
    tile_of(j, ti, &i0, &mt, &j0, &nt);
    int64_t k0, kn;
    split_of(j, ti, &k0, &kn);
    int64_t splits = param_of(t, "splits");
    if (param_of(t, "row0") != i0 || param_of(t, "col0") != j0 || param_of(t, "rows") != mt ||
        param_of(t, "cols") != nt || param_of(t, "k") != j->k ||
        (splits < 0 ? 1 : splits) != j->splits ||
        (j->splits > 1 && (param_of(t, "k0") != k0 || param_of(t, "k_len") != kn)))
        return lt_error(LT_EINVAL, "resume: job %s's task %lld is another tile (another "
                        "shape or --block)", j->st->job_id, (long long)ti);
    if (!j->resume_checked) {
        for (size_t i = 0; i < t->n_inputs && i < 2; i++)
            if (!t->inputs[i]->dtype || strcmp(t->inputs[i]->dtype, lt_dtype_name(j->dtype)))
                return lt_error(LT_EINVAL, "resume: job %s's operands travel as %s, not %s "
                                "(--dtype)", j->st->job_id, t->inputs[i]->dtype,
                                lt_dtype_name(j->dtype));
        uint8_t *own[2];
        const uint8_t *mine[2] = {panel_rows(j, j->aq, i0, mt, k0, kn, &own[0]),
                                  panel_rows(j, j->btq, j0, nt, k0, kn, &own[1])};
        const int64_t rows[2] = {mt, nt};
        for (size_t i = 0; i < t->n_inputs && i < 2; i++) {
            uint32_t crc = mine[i] ? lt_crc32c(mine[i], lt_dtype_row_bytes(j->dtype, kn) *
                                                            (size_t)rows[i])
                                   : 0;
            if (crc != t->inputs[i]->crc32c) {
                free(own[0]);
                free(own[1]);
                return lt_error(LT_EINVAL, "resume: the operands differ from job %s's (task "
                                "%lld's %s has CRC32C %08x, yours %08x)", j->st->job_id,
                                (long long)ti, t->inputs[i]->name, t->inputs[i]->crc32c, crc);
            }
        }
        free(own[0]);
        free(own[1]);
        j->resume_checked = true;
    }
    if (t->attempt > j->ts[ti].attempt) j->ts[ti].attempt = t->attempt;
    return LT_OK;
}

static int resume_result(job *j, const Looptune__Envelope *env, const lt_record *rec) {
    if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CHUNK &&
        !strcmp(env->chunk->job_id, j->st->job_id))
        lt_dist_blobs_add(j->blobs, env->chunk, rec->partition, rec->offset);
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_RESULT ||
        strcmp(env->result->job_id, j->st->job_id) ||
        env->result->status != LOOPTUNE__STATUS__STATUS_OK)
        return LT_OK; /* failed attempts before: the task is sent again below */
    return on_result(j, env->result, rec);
}

static int resume_dead(job *j, const Looptune__Envelope *env, const lt_record *rec) {
    (void)rec;
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_DEAD_LETTER || !env->dead_letter->task ||
        strcmp(env->dead_letter->task->job_id, j->st->job_id))
        return LT_OK;
    return lt_error(LT_ESTATE, "resume: job %s's task %llu was dead-lettered (%s): submit the "
                    "job anew", j->st->job_id,
                    (unsigned long long)env->dead_letter->task->task_index,
                    env->dead_letter->reason);
}

/* Reads what the job left on the topics: its tasks (checked against these
 * operands), its dead letters (a dead job stays dead), its results (applied). */
static int resume_job(job *j) {
    int rc = replay(j, j->topic_tasks, resume_task);
    if (!rc && !j->resume_checked)
        rc = lt_error(LT_ENOTFOUND, "resume: no task of job %s on %s", j->st->job_id,
                      j->topic_tasks);
    if (!rc) rc = replay(j, j->topic_dead, resume_dead);
    if (!rc) rc = replay(j, j->topic_results, resume_result);
    if (!rc) {
        j->st->resumed = j->st->applied;
        fprintf(stderr, "submit: job %s resumed: %lld of %lld tasks applied from %s\n",
                j->st->job_id, (long long)j->st->applied, (long long)j->st->tasks,
                j->topic_results);
    }
    return rc;
}

/* Names, ids, deadline and the chunk size of a job: its setup common to kinds. */
static int job_init(job *j, const lt_submit_opts *o, lt_submit_stats *st, const char *id_prefix) {
    size_t chunk = o->chunk_bytes ? o->chunk_bytes : LT_DIST_CHUNK_BYTES;
    if (chunk < LT_DIST_CHUNK_MIN || chunk > LT_DIST_CHUNK_MAX)
        return lt_error(LT_EINVAL, "submit: chunk size %zu outside [%d, %d] bytes", chunk,
                        LT_DIST_CHUNK_MIN, LT_DIST_CHUNK_MAX);
    j->o = o;
    j->st = st;
    if (o->job_id && *o->job_id) snprintf(st->job_id, sizeof st->job_id, "%s", o->job_id);
    else lt__job_id(st->job_id, sizeof st->job_id, id_prefix);
    const char *prefix = o->prefix ? o->prefix : LT_KAFKA_TOPIC_PREFIX;
    snprintf(j->topic_tasks, sizeof j->topic_tasks, "%s%s", prefix,
             lt_kafka_topic_suffix(LT_TOPIC_TASKS));
    snprintf(j->topic_results, sizeof j->topic_results, "%s%s", prefix,
             lt_kafka_topic_suffix(LT_TOPIC_RESULTS));
    snprintf(j->topic_dead, sizeof j->topic_dead, "%s%s", prefix,
             lt_kafka_topic_suffix(LT_TOPIC_TASKS_DEAD));
    double jt = o->job_timeout_s > 0 ? o->job_timeout_s : 3600;
    j->deadline_wall_ns = lt_wall_ns() + (uint64_t)(jt * 1e9);
    j->ts = calloc((size_t)st->tasks, sizeof *j->ts);
    j->sent_ns = calloc((size_t)st->tasks, sizeof *j->sent_ns);
    j->rt_ms = calloc((size_t)st->tasks, sizeof *j->rt_ms);
    if (!j->ts || !j->sent_ns || !j->rt_ms) return lt_error(LT_ENOMEM, "submit: out of memory");
    return LT_OK;
}

/* Panel reuse, once the workers are heard from: the tasks topic's
 * partitions, and which operands' panels are referenced. The keyed
 * operand's always (a tile row's tasks are consecutive on its partition);
 * the other's when all of it fits in half the smallest panel cache a live
 * worker announces (else least-recently-used eviction would miss on every
 * row). A live worker that announces no cache predates panels: then the
 * plain tile scheme. */
static int panels_plan(job *j) {
    uint64_t least = UINT64_MAX, now = lt_now_ns();
    for (int i = 0; i < j->workers.n; i++) {
        const lt__worker_seen *w = &j->workers.w[i];
        if (!w->leaving && now - w->last_ns < LT__ALIVE_NS && w->cache_bytes < least)
            least = w->cache_bytes;
    }
    if (least == 0) {
        lt_log(LT_LOG_WARN, "submit: job %s: a worker without a panel cache is alive: every "
               "task carries its panels", j->st->job_id);
        j->by = 0;
        j->st->panel_by[0] = 0;
        return LT_OK;
    }
    const int keyed = j->by == LT_PANEL_BY_ROWS ? 0 : 1;
    const uint64_t other = (uint64_t)(keyed ? j->m : j->n) * j->arb;
    j->reuse[keyed] = true;
    j->reuse[!keyed] = other <= least / 2;
    int rc = lt_dist_topic_partitions(&j->o->conn, j->topic_tasks, &j->parts);
    if (rc) return rc;
    const int64_t n_panels = (j->tiles_m + j->tiles_n) * j->splits;
    j->pgen = calloc((size_t)(n_panels * j->parts), sizeof *j->pgen);
    j->pcrc = calloc((size_t)n_panels, sizeof *j->pcrc);
    if (!j->pgen || !j->pcrc) return lt_error(LT_ENOMEM, "submit: out of memory");
    return LT_OK;
}

/* Sends the job's tasks (at most opts.window in flight) and collects their
 * results; then the round-trip figures, and everything closed. */
static int job_run(job *j, uint64_t t0, const char *what) {
    const lt_submit_opts *o = j->o;
    lt_submit_stats *st = j->st;
    const char *prefix = o->prefix ? o->prefix : LT_KAFKA_TOPIC_PREFIX;
    int rc = lt_dist_ensure_topics(&o->conn, prefix, o->partitions);
    if (!rc) rc = lt_dist_blobs_init(&j->blobs, 0);
    /* results are followed from before the first task goes out */
    if (!rc) rc = lt_follower_open(&j->results, &o->conn, j->topic_results, 15000);
    /* no linger: a lone task goes at once (the round trip), and a flood
     * still batches behind the requests in flight */
    lt_producer_opts po = {.conn = o->conn, .topic = j->topic_tasks, .linger_ms = -1,
                           .close_timeout_ms = 30000};
    if (!rc) rc = lt_producer_open(&j->tasks, &po);
    po.topic = j->topic_dead;
    if (!rc) rc = lt_producer_open(&j->dead, &po);
    if (!rc && o->resume) {
        if (!o->job_id || !*o->job_id) rc = lt_error(LT_EINVAL, "resume: which job? give its id");
        else rc = resume_job(j);
    }
    if (!rc && st->applied < st->tasks) rc = wait_for_worker(j);
    if (!rc && j->by) rc = panels_plan(j);
    char panels[160] = "";
    if (!rc && j->by)
        snprintf(panels, sizeof panels, "; panels by %s: %s once a %s%s",
                 st->panel_by, j->by == LT_PANEL_BY_ROWS ? "A's row panel" : "B's column panel",
                 j->by == LT_PANEL_BY_ROWS ? "row" : "column",
                 !(j->reuse[0] && j->reuse[1]) ? ""
                 : j->by == LT_PANEL_BY_ROWS   ? ", B's column panels once a partition"
                                               : ", A's row panels once a partition");
    if (!rc)
        fprintf(stderr, "submit: job %s: %s, %" PRId64 " tasks, %d workers alive%s\n", st->job_id,
                what, st->tasks, workers_alive(j), panels);
    int64_t window = o->window > 0 ? o->window : INT64_MAX, sent = 0;
    uint64_t first_send = 0;
    for (int64_t i = 0; !rc && i < st->tasks; i++) {
        const int64_t t = j->order ? j->order[i] : i;
        if (j->ts[t].done) continue;
        /* at most window tasks in flight: results are taken as they come */
        lt_record rec;
        uint64_t last_alive = lt_now_ns();
        const double wt = o->worker_timeout_s > 0 ? o->worker_timeout_s : 30;
        while (!rc && sent - (st->applied - st->resumed) >= window) {
            int got = lt_follower_poll(j->results, 100, &rec);
            if (got == 1) rc = on_record(j, &rec);
            if (workers_alive(j) > 0) last_alive = lt_now_ns();
            if (!rc && (double)(lt_now_ns() - last_alive) * 1e-9 > wt)
                rc = lt_error(LT_ETIMEOUT, "no worker alive: none heard from on %s for %.0f s",
                              j->topic_results, wt);
        }
        if (rc) break;
        if (!first_send) first_send = lt_now_ns();
        rc = send_task(j, t, j->ts[t].attempt + 1, false); /* 1, or the next after a resumed job's */
        sent++;
        while (!rc && lt_follower_poll(j->results, 0, &rec) == 1) rc = on_record(j, &rec);
    }
    if (!rc) rc = collect(j, t0);
    if (!rc) {
        lt_producer_stats ps;
        lt_producer_stats_get(j->tasks, &ps);
        if (ps.failed)
            lt_log(LT_LOG_WARN, "submit: %lld task records were not acknowledged",
                   (long long)ps.failed);
    }
    int err = rc;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", err ? lt_errmsg() : "");
    st->seconds = (double)(lt_now_ns() - t0) * 1e-9;
    if (first_send) st->busy_seconds = (double)(lt_now_ns() - first_send) * 1e-9;
    /* replays still on their way are counted as the duplicates they are */
    if (!err) lt_follower_drain(j->results, 3000, drained_record, j);
    int n_rt = (int)(st->applied - st->resumed);
    if (n_rt > 0) {
        lt_sort_f64(j->rt_ms, n_rt);
        st->rt_median_ms = lt_median(j->rt_ms, n_rt);
        st->rt_p99_ms = j->rt_ms[(int)((double)(n_rt - 1) * 0.99)];
    }
    if (o->progress_s >= 0 && !err) progress(j, st->seconds);
    lt_producer_close(j->dead);
    lt_producer_close(j->tasks);
    lt_follower_close(j->results);
    lt_dist_blobs_free(j->blobs);
    for (int64_t t = 0; j->ts && t < st->tasks; t++)
        lt__attempt_errors_free(&j->ts[t].errors);
    for (int64_t t = 0; j->partial && t < st->tasks; t++) free(j->partial[t]);
    if (err == LT_EFORMAT && st->dead)
        return lt_error(err, "task dead-lettered to %s: %s", j->topic_dead, st->dead_reason);
    return err ? lt_error(err, "%s", msg) : LT_OK;
}

static void job_free(job *j) {
    free(j->ts);
    free(j->sent_ns);
    free(j->rt_ms);
    free(j->bt);
    free(j->aq_own);
    free(j->btq_own);
    free(j->partial);
    free(j->tile_have);
    free(j->pgen);
    free(j->pcrc);
    free(j->order);
}

/* rows x k of f32 in dtype: a copy in *out (malloc'd). */
static int convert_rows(lt_dtype dt, const float *src, int64_t rows, int64_t k, uint8_t **out) {
    const size_t rb = lt_dtype_row_bytes(dt, k);
    if (!(*out = malloc(rb * (size_t)rows))) return lt_error(LT_ENOMEM, "submit: out of memory");
    for (int64_t i = 0; i < rows; i++) lt_row_from_f32(dt, src + i * k, *out + (size_t)i * rb, k);
    return LT_OK;
}

int lt_submit_matmul(const lt_submit_opts *o, const float *a, const float *b, int64_t m,
                     int64_t n, int64_t k, float *c, lt_submit_stats *st) {
    memset(st, 0, sizeof *st);
    if (m < 1 || n < 1 || k < 1) return lt_error(LT_EINVAL, "submit: empty matrices");
    job j = {.m = m, .n = n, .k = k, .a = a, .c = c, .dtype = o->dtype};
    if (o->dtype != LT_F32 && o->dtype != LT_F16 && o->dtype != LT_BF16 && o->dtype != LT_Q8_0)
        return lt_error(LT_EINVAL, "submit: operands travel as f32, f16, bf16 or q8_0, not %s",
                        lt_dtype_name(o->dtype));
    j.bm = o->block_m > 0 ? o->block_m : 128;
    j.bn = o->block_n > 0 ? o->block_n : 128;
    j.bk = o->block_k > 0 && o->block_k < k ? o->block_k : k;
    if (j.bm > m) j.bm = m;
    if (j.bn > n) j.bn = n;
    const int64_t blk = lt_dtype_block(j.dtype);
    if (k % blk || j.bk % blk)
        return lt_error(LT_EINVAL, "submit: %s operands need K (%" PRId64 ") and the k-split "
                        "(%" PRId64 ") multiples of %" PRId64, lt_dtype_name(j.dtype), k, j.bk,
                        blk);
    j.splits = (k + j.bk - 1) / j.bk;
    j.tiles_n = (n + j.bn - 1) / j.bn;
    const int64_t tiles_m = (m + j.bm - 1) / j.bm, tiles = tiles_m * j.tiles_n;
    j.tiles_m = tiles_m;
    st->tasks = tiles * j.splits;
    /* every tile's task(s) with its f32 row panel of A and column panel of B:
     * sum over tiles of 4 k (rows + cols), 8 n^2 t for n x n in t x t tiles */
    st->bytes_plain = 4 * k * (m * j.tiles_n + n * tiles_m);
    j.arb = lt_dtype_row_bytes(j.dtype, k);
    uint64_t t0 = lt_now_ns();
    int rc = job_init(&j, o, st, "mm");
    if (!rc && !(j.bt = malloc((size_t)(n * k) * sizeof(float))))
        rc = lt_error(LT_ENOMEM, "submit: out of memory");
    for (int64_t r = 0; !rc && r < k; r++)
        for (int64_t col = 0; col < n; col++) j.bt[col * k + r] = b[r * n + col];
    j.aq = (const uint8_t *)a;
    j.btq = (const uint8_t *)j.bt;
    if (!rc && j.dtype != LT_F32) {
        rc = convert_rows(j.dtype, a, m, k, &j.aq_own);
        if (!rc) rc = convert_rows(j.dtype, j.bt, n, k, &j.btq_own);
        j.aq = j.aq_own;
        j.btq = j.btq_own;
    }
    if (!rc && j.splits > 1 &&
        (!(j.partial = calloc((size_t)st->tasks, sizeof *j.partial)) ||
         !(j.tile_have = calloc((size_t)tiles, sizeof *j.tile_have))))
        rc = lt_error(LT_ENOMEM, "submit: out of memory");
    if (!rc && !o->no_panel_reuse) {
        /* keyed by rows: A once a row, B every task; by columns the converse */
        const double by_rows = (double)m + (double)tiles_m * (double)n;
        const double by_cols = (double)j.tiles_n * (double)m + (double)n;
        j.by = o->panel_by ? (int)o->panel_by
                           : by_rows <= by_cols ? LT_PANEL_BY_ROWS : LT_PANEL_BY_COLS;
        snprintf(st->panel_by, sizeof st->panel_by, "%s",
                 j.by == LT_PANEL_BY_ROWS ? "rows" : "cols");
        if (j.by == LT_PANEL_BY_COLS) { /* a column's tasks one after the other */
            if (!(j.order = malloc((size_t)st->tasks * sizeof *j.order)))
                rc = lt_error(LT_ENOMEM, "submit: out of memory");
            int64_t at = 0;
            for (int64_t cc = 0; !rc && cc < j.tiles_n; cc++)
                for (int64_t rr = 0; rr < tiles_m; rr++)
                    for (int64_t q = 0; q < j.splits; q++)
                        j.order[at++] = (rr * j.tiles_n + cc) * j.splits + q;
        }
    }
    char what[256];
    int w = snprintf(what, sizeof what, "%" PRId64 "x%" PRId64 " = %" PRId64 "x%" PRId64
                     " times %" PRId64 "x%" PRId64 " in tiles of %" PRId64 "x%" PRId64, m, n, m,
                     k, k, n, j.bm, j.bn);
    if (j.splits > 1)
        w += snprintf(what + w, sizeof what - (size_t)w, ", k in %" PRId64 " splits of %" PRId64,
                      j.splits, j.bk);
    if (j.dtype != LT_F32)
        snprintf(what + w, sizeof what - (size_t)w, ", operands as %s", lt_dtype_name(j.dtype));
    if (!rc) rc = job_run(&j, t0, what);
    job_free(&j);
    return rc;
}

int lt_submit_noop(const lt_submit_opts *o, int64_t tasks, size_t bytes, lt_submit_stats *st) {
    memset(st, 0, sizeof *st);
    if (tasks < 1) return lt_error(LT_EINVAL, "submit: no tasks");
    if (o->resume) return lt_error(LT_EUNSUPPORTED, "submit noop: no --resume");
    job j = {0};
    st->tasks = tasks;
    j.bm = j.bn = 1;
    j.tiles_n = 1;
    j.splits = 1;
    j.noop_elems = (int64_t)((bytes + sizeof(float) - 1) / sizeof(float));
    if (j.noop_elems < 1) j.noop_elems = 1;
    float *x = malloc((size_t)j.noop_elems * sizeof *x);
    if (!x) return lt_error(LT_ENOMEM, "submit: out of memory");
    for (int64_t i = 0; i < j.noop_elems; i++) x[i] = (float)(i % 1000) * 0.5f;
    j.noop_x = x;
    uint64_t t0 = lt_now_ns();
    int rc = job_init(&j, o, st, "noop");
    char what[96];
    snprintf(what, sizeof what, "noop tasks of %zu bytes each way", (size_t)j.noop_elems * 4);
    if (!rc) rc = job_run(&j, t0, what);
    job_free(&j);
    free(x);
    return rc;
}
