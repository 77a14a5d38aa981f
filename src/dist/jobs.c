/* What the topics say about jobs: the tasks, results and tasks.dead topics
 * read once to their ends (no consumer group, read_committed), summed up per
 * job; the workers heard from lately, from their heartbeats. `looptune jobs`
 * prints it. Nothing here is state of its own: the topics are the record. */
#include "looptune/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JOBS_MAX_TASKS (1ll << 24) /* a job's task bitmap is kept up to this many */
#define RUNNING_NS (60ull * 1000000000ull)

typedef struct {
    lt_dist_job_info info;
    uint8_t *sent, *done; /* [info.tasks] */
    /* OK results read before the job's task count was known (a tune job's
     * tasks topic is read after the results): marked once it is */
    uint64_t *early;
    size_t n_early;
} job_acc;

typedef struct {
    job_acc *v;
    size_t n, cap;
    const char *only;
    const char *common_tasks; /* prefix + "tasks" */
    /* tasks topics other than prefix + "tasks" that workers' heartbeats
     * name (a host class's tune tasks), read after the results */
    char (*topics)[256];
    size_t n_topics;
} acc;

static void topic_seen(acc *a, const char *topic, const char *common) {
    if (!topic || !*topic || strlen(topic) >= 256 || !strcmp(topic, common)) return;
    for (size_t i = 0; i < a->n_topics; i++)
        if (!strcmp(a->topics[i], topic)) return;
    char (*v)[256] = realloc(a->topics, (a->n_topics + 1) * sizeof *v);
    if (!v) return;
    a->topics = v;
    snprintf(a->topics[a->n_topics++], 256, "%s", topic);
}

static void mark(uint8_t *bits, int64_t total, uint64_t t, int64_t *count);

static job_acc *job_of(acc *a, const char *id, uint64_t total) {
    if (!id || !*id || (a->only && strcmp(a->only, id))) return NULL;
    for (size_t i = 0; i < a->n; i++)
        if (!strcmp(a->v[i].info.job_id, id)) {
            job_acc *j = &a->v[i];
            if (!j->sent && total > 0 && (int64_t)total <= JOBS_MAX_TASKS) {
                j->info.tasks = (int64_t)total;
                j->sent = calloc(total, 1);
                j->done = calloc(total, 1);
                for (size_t k = 0; k < j->n_early; k++)
                    mark(j->done, j->info.tasks, j->early[k], &j->info.done);
                free(j->early);
                j->early = NULL;
                j->n_early = 0;
            }
            return j;
        }
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        job_acc *v = realloc(a->v, cap * sizeof *v);
        if (!v) return NULL;
        a->v = v;
        a->cap = cap;
    }
    job_acc *j = &a->v[a->n++];
    memset(j, 0, sizeof *j);
    snprintf(j->info.job_id, sizeof j->info.job_id, "%s", id);
    return job_of(a, id, total);
}

static void seen(job_acc *j, uint64_t t_ns) {
    if (!j->info.first_ns || t_ns < j->info.first_ns) j->info.first_ns = t_ns;
    if (t_ns > j->info.last_ns) j->info.last_ns = t_ns;
}

static void mark(uint8_t *bits, int64_t total, uint64_t t, int64_t *count) {
    if (!bits || (int64_t)t >= total) return;
    if (!bits[t]) {
        bits[t] = 1;
        (*count)++;
    }
}

typedef int (*record_fn)(acc *a, lt_dist_jobs *out, const Looptune__Envelope *env,
                         double alive_s);

static int on_task_record(acc *a, lt_dist_jobs *out, const Looptune__Envelope *env,
                          double alive_s) {
    (void)out;
    (void)alive_s;
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_TASK) return LT_OK;
    const Looptune__Task *t = env->task;
    job_acc *j = job_of(a, t->job_id, t->total_tasks);
    if (!j) return LT_OK;
    seen(j, env->time_ns);
    snprintf(j->info.kind, sizeof j->info.kind, "%s", t->kind);
    if (t->attempt > j->info.max_attempt) j->info.max_attempt = t->attempt;
    mark(j->sent, j->info.tasks, t->task_index, &j->info.sent);
    return LT_OK;
}

static void on_heartbeat(lt_dist_jobs *out, const Looptune__Envelope *env, double alive_s) {
    const Looptune__Heartbeat *hb = env->heartbeat;
    if (!hb->worker || !*hb->worker) return;
    lt_dist_worker_info *w = NULL;
    for (size_t i = 0; i < out->n_workers && !w; i++)
        if (!strcmp(out->workers[i].worker, hb->worker)) w = &out->workers[i];
    if (!w) {
        lt_dist_worker_info *v = realloc(out->workers, (out->n_workers + 1) * sizeof *v);
        if (!v) return;
        out->workers = v;
        w = &v[out->n_workers++];
        memset(w, 0, sizeof *w);
        snprintf(w->worker, sizeof w->worker, "%s", hb->worker);
    }
    if (env->time_ns < w->last_ns) return;
    w->last_ns = env->time_ns;
    snprintf(w->state, sizeof w->state, "%s", hb->state);
    snprintf(w->job_id, sizeof w->job_id, "%s", hb->job_id);
    w->task_index = hb->task_index;
    w->tasks_done = hb->tasks_done;
    (void)alive_s;
}

static int on_result_record(acc *a, lt_dist_jobs *out, const Looptune__Envelope *env,
                            double alive_s) {
    if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_HEARTBEAT) {
        on_heartbeat(out, env, alive_s);
        if (a->common_tasks) topic_seen(a, env->heartbeat->tasks_topic, a->common_tasks);
        return LT_OK;
    }
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_RESULT) return LT_OK;
    const Looptune__Result *r = env->result;
    job_acc *j = job_of(a, r->job_id, 0);
    if (!j) return LT_OK;
    seen(j, env->time_ns);
    if (r->status == LOOPTUNE__STATUS__STATUS_OK) {
        j->info.ok_results++;
        if (j->done) {
            mark(j->done, j->info.tasks, r->task_index, &j->info.done);
        } else {
            uint64_t *v = realloc(j->early, (j->n_early + 1) * sizeof *v);
            if (v) {
                j->early = v;
                j->early[j->n_early++] = r->task_index;
            }
        }
    } else if (r->status != LOOPTUNE__STATUS__STATUS_NEED_PANEL) { /* a panel asked for again */
        j->info.failed++;
    }
    return LT_OK;
}

static int on_dead_record(acc *a, lt_dist_jobs *out, const Looptune__Envelope *env,
                          double alive_s) {
    (void)out;
    (void)alive_s;
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_DEAD_LETTER || !env->dead_letter->task)
        return LT_OK;
    job_acc *j = job_of(a, env->dead_letter->task->job_id, env->dead_letter->task->total_tasks);
    if (!j) return LT_OK;
    seen(j, env->time_ns);
    j->info.dead++;
    return LT_OK;
}

/* Reads topic to its end; a topic that does not exist is empty. */
static int scan(const lt_kafka_conn *conn, const char *topic, acc *a, lt_dist_jobs *out,
                double alive_s, record_fn fn) {
    lt_kafka_reader *r;
    int rc = lt_kafka_reader_open(&r, conn, topic, 10000);
    if (rc == LT_ENOTFOUND) return LT_OK;
    if (rc) return rc;
    lt_record rec;
    while ((rc = lt_kafka_reader_next(r, 3000, &rec)) == 1) {
        Looptune__Envelope *env;
        if (!rec.value || lt_envelope_decode(rec.value, rec.len, &env)) {
            out->undecodable++;
            continue;
        }
        rc = fn(a, out, env, alive_s);
        lt_envelope_free(env);
        if (rc) break;
    }
    lt_kafka_reader_close(r);
    /* read_committed stops before an open transaction: what is past it is not known yet */
    if (rc == LT_ETIMEOUT) {
        out->partial = true;
        rc = LT_OK;
    }
    return rc < 0 ? rc : LT_OK;
}

static int by_first(const void *x, const void *y) {
    const lt_dist_job_info *a = x, *b = y;
    return a->first_ns < b->first_ns ? -1 : a->first_ns > b->first_ns;
}

int lt_dist_jobs_scan(const lt_kafka_conn *conn, const char *prefix, const char *job_id,
                      double alive_s, lt_dist_jobs *out) {
    memset(out, 0, sizeof *out);
    if (!prefix) prefix = LT_KAFKA_TOPIC_PREFIX;
    acc a = {.only = job_id && *job_id ? job_id : NULL};
    static const lt_kafka_topic topics[3] = {LT_TOPIC_TASKS, LT_TOPIC_RESULTS, LT_TOPIC_TASKS_DEAD};
    static const record_fn fns[3] = {on_task_record, on_result_record, on_dead_record};
    int rc = LT_OK;
    char common[256];
    snprintf(common, sizeof common, "%s%s", prefix, lt_kafka_topic_suffix(LT_TOPIC_TASKS));
    a.common_tasks = common;
    for (int i = 0; i < 3 && !rc; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s%s", prefix, lt_kafka_topic_suffix(topics[i]));
        rc = scan(conn, name, &a, out, alive_s, fns[i]);
    }
    for (size_t i = 0; i < a.n_topics && !rc; i++)
        rc = scan(conn, a.topics[i], &a, out, alive_s, on_task_record);
    uint64_t now = lt_wall_ns();
    if (!rc && a.n) {
        out->jobs = calloc(a.n, sizeof *out->jobs);
        if (!out->jobs) rc = lt_error(LT_ENOMEM, "jobs: out of memory");
    }
    for (size_t i = 0; !rc && i < a.n; i++) {
        lt_dist_job_info *j = &a.v[i].info;
        j->state = j->dead                              ? "failed"
                   : j->tasks && j->done == j->tasks    ? "done"
                   : now - j->last_ns < RUNNING_NS      ? "running"
                                                        : "stalled";
        out->jobs[out->n_jobs++] = *j;
    }
    if (out->jobs) qsort(out->jobs, out->n_jobs, sizeof *out->jobs, by_first);
    /* only the workers heard from lately */
    size_t k = 0;
    for (size_t i = 0; i < out->n_workers; i++)
        if ((double)(now - out->workers[i].last_ns) * 1e-9 <= alive_s &&
            strcmp(out->workers[i].state, "leaving"))
            out->workers[k++] = out->workers[i];
    out->n_workers = k;
    for (size_t i = 0; i < a.n; i++) {
        free(a.v[i].sent);
        free(a.v[i].done);
        free(a.v[i].early);
    }
    free(a.v);
    free(a.topics);
    if (rc) lt_dist_jobs_free(out);
    return rc;
}

void lt_dist_jobs_free(lt_dist_jobs *j) {
    if (!j) return;
    free(j->jobs);
    free(j->workers);
    memset(j, 0, sizeof *j);
}
