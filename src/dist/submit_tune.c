/* The coordinator of a tune job: a model's config store keys, enumerated
 * here the way `looptune tune` finds them (lt_tune_pass_*), one task each on
 * the tasks topic of the job's host class (only workers of that class
 * consume it). Keys go out in the local tuner's stages: the decode
 * program's kernels first (independent of each other: all at once, or
 * --window at a time), then the looped executor with their configurations in
 * force, the decode thread count with those and the executor's, then the
 * prefill program's kernels and its thread count. Each task carries the
 * configurations of the stages before its own. Results are read
 * read_committed from before the first send and applied once per (job,
 * task); tasks are dealt round the topic's partitions (task t to partition
 * t mod partitions); a FAILED attempt is sent again as attempt + 1, and after
 * max_attempts the task goes to the dead-letter topic and the job fails.
 * Workers are counted alive by their heartbeats that name the class's topic.
 * The configurations found are the caller's to store (lt_tune_job). */
#include "dist/coordinator.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct {
    uint32_t attempt; /* the latest attempt sent (by us or, resumed, an earlier coordinator) */
    bool out;         /* sent by this coordinator */
    bool done;
    lt__attempt_errors errors;
    uint64_t sent_ns;
} task_state;

typedef struct {
    const lt_submit_tune_opts *o;
    const lt_submit_opts *jo;
    lt_submit_stats *st;
    lt_tune_job *job;
    task_state *ts;
    char topic_tasks[256], topic_results[256], topic_dead[256];
    lt_producer *tasks, *dead;
    lt_follower *results;
    lt__workers workers;
    uint64_t deadline_wall_ns;
    uint64_t model_bytes;
    uint32_t model_crc;
    const char *strategy;
    int32_t parts; /* partitions of the class's topic: task t goes to t mod parts */
    double *rt_ms; /* [tasks] send-to-applied times */
    int n_rt;
    bool resume_found; /* resume: a task of the job was on the topic */
} tjob;

void lt_tune_job_free(lt_tune_job *j) {
    if (!j) return;
    free(j->keys);
    memset(j, 0, sizeof *j);
}

/* ---- the keys of the model ------------------------------------------------------------ */

static int add_key(lt_tune_job *jb, size_t *cap, const char *kernel, const char *shape,
                   int64_t tokens, int stage) {
    for (size_t i = 0; i < jb->n_keys; i++)
        if (!strcmp(jb->keys[i].kernel, kernel) && !strcmp(jb->keys[i].shape, shape))
            return LT_OK; /* searched already (a prefill program's decode-shaped tail) */
    if (jb->n_keys == *cap) {
        size_t nc = *cap ? 2 * *cap : 32;
        lt_tune_job_key *v = realloc(jb->keys, nc * sizeof *v);
        if (!v) return lt_error(LT_ENOMEM, "submit tune: out of memory");
        jb->keys = v;
        *cap = nc;
    }
    lt_tune_job_key *k = &jb->keys[jb->n_keys++];
    memset(k, 0, sizeof *k);
    snprintf(k->kernel, sizeof k->kernel, "%s", kernel);
    snprintf(k->shape, sizeof k->shape, "%s", shape);
    k->tokens = (uint32_t)tokens;
    k->stage = stage;
    return LT_OK;
}

/* The keys the local tuner would search, in its order, with their stages. */
static int enumerate(const lt_submit_tune_opts *o, lt_tune_job *jb) {
    lt_model *m = NULL;
    lt_pool *pool = NULL;
    lt_llama *l = NULL;
    lt_tune_pass *tp = NULL;
    size_t cap = 0;
    int stage = 0;
    int rc = lt_model_open(&m, o->model, NULL);
    if (rc) rc = lt_error(rc, "cannot load model: %s", lt_errmsg());
    if (!rc) rc = lt_pool_init(&pool, o->threads);
    lt_llama_opts lo = {.executor = LT_EXEC_LOOPED};
    if (!rc && (rc = lt_llama_init(&l, m, pool, &lo)))
        rc = lt_error(rc, "cannot build the program: %s", lt_errmsg());
    const bool decode = o->decode || !o->prefill;
    int64_t pre_n = LT_TUNE_PREFILL_TOKENS;
    if (!rc && pre_n > lt_llama_max_batch(l)) pre_n = lt_llama_max_batch(l);
    if (!rc && o->prefill && pre_n < 2)
        rc = lt_error(LT_EINVAL, "the model's context is too short for a prefill batch");
    for (int pass = 0; pass < 2 && !rc; pass++) {
        if ((pass == 0 && !decode) || (pass == 1 && !o->prefill)) continue;
        int64_t n = pass == 0 ? 1 : pre_n;
        if ((rc = lt_tune_pass_open(&tp, l, pool, n))) {
            rc = lt_error(rc, "cannot evaluate the model: %s", lt_errmsg());
            break;
        }
        size_t before = jb->n_keys;
        for (int i = 0; i < lt_tune_pass_n_keys(tp) && !rc; i++) {
            const lt_tune_key *k = lt_tune_pass_key(tp, i);
            rc = add_key(jb, &cap, k->kernel, k->shape, n, stage);
        }
        if (jb->n_keys > before) stage++;
        char shape[128];
        if (!rc && pass == 0) {
            lt_exec_shape_format(m, o->threads, shape, sizeof shape);
            rc = add_key(jb, &cap, LT_TUNING_LOOPED, shape, 1, stage++);
        }
        if (!rc && o->threads > 1) {
            lt_step_shape_format(m, o->threads, pass == 0 ? LT_REGIME_DECODE : LT_REGIME_PREFILL,
                                 shape, sizeof shape);
            rc = add_key(jb, &cap, LT_TUNING_THREADS, shape, n, stage++);
        }
        lt_tune_pass_close(tp);
        tp = NULL;
    }
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return rc;
}

/* ---- tasks ------------------------------------------------------------------------------ */

/* Task t's record: its TuneSpec packed into *spec (malloc'd: free it), with
 * the configurations of the earlier stages in force. */
static int build_task(tjob *j, size_t t, uint32_t attempt, Looptune__Task *task, uint8_t **spec) {
    const lt_tune_job_key *key = &j->job->keys[t];
    *spec = NULL;
    size_t n_force = 0;
    for (size_t i = 0; i < j->job->n_keys; i++)
        n_force += j->job->keys[i].stage < key->stage && j->job->keys[i].done;
    lt_config_msg *msgs = n_force ? calloc(n_force, sizeof *msgs) : NULL;
    Looptune__Config **cfgs = n_force ? calloc(n_force, sizeof *cfgs) : NULL;
    if (n_force && (!msgs || !cfgs)) {
        free(msgs);
        free(cfgs);
        return lt_error(LT_ENOMEM, "submit tune: out of memory");
    }
    int rc = LT_OK;
    size_t k = 0;
    for (size_t i = 0; i < j->job->n_keys && !rc; i++) {
        const lt_tune_job_key *p = &j->job->keys[i];
        if (p->stage >= key->stage || !p->done) continue;
        rc = lt_config_to_envelope(&p->entry, &msgs[k]);
        cfgs[k] = &msgs[k].cfg;
        k++;
    }
    Looptune__TuneSpec s = LOOPTUNE__TUNE_SPEC__INIT;
    s.model = j->job->remote_model;
    s.model_bytes = j->model_bytes;
    s.model_crc32c = j->model_crc;
    s.host_class = j->job->host_class;
    s.kernel = (char *)key->kernel;
    s.shape = (char *)key->shape;
    s.tokens = key->tokens;
    s.strategy = (char *)j->strategy;
    s.budget = (uint32_t)j->o->budget;
    s.seed = j->o->seed;
    s.threads = (uint32_t)j->o->threads;
    s.n_in_force = n_force;
    s.in_force = cfgs;
    size_t len = looptune__tune_spec__get_packed_size(&s);
    if (!rc && !(*spec = malloc(len ? len : 1))) rc = lt_error(LT_ENOMEM, "out of memory");
    if (!rc) looptune__tune_spec__pack(&s, *spec);
    free(msgs);
    free(cfgs);
    if (rc) {
        free(*spec);
        *spec = NULL;
        return rc;
    }
    looptune__task__init(task);
    task->job_id = j->st->job_id;
    task->task_index = (uint64_t)t;
    task->kind = "tune";
    task->attempt = attempt;
    task->max_attempts = j->jo->max_attempts ? j->jo->max_attempts : 3;
    task->deadline_ns = j->deadline_wall_ns;
    task->total_tasks = (uint64_t)j->job->n_keys;
    task->spec = (ProtobufCBinaryData){.len = len, .data = *spec};
    return LT_OK;
}

static int send_task(tjob *j, size_t t, uint32_t attempt) {
    char key[192];
    snprintf(key, sizeof key, "%s/%zu", j->st->job_id, t);
    Looptune__Task task;
    uint8_t *spec;
    int rc = build_task(j, t, attempt, &task, &spec);
    if (rc) return rc;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_TASK;
    env.task = &task;
    lt_dist_outbox o = {0};
    rc = lt_dist_outbox_add(&o, key, &env);
    /* the keys dealt round the partitions, so the workers that share them
     * share a stage's keys evenly (a key's hash would not) */
    if (!rc)
        rc = lt_dist_outbox_send(&o, j->tasks, j->parts > 0 ? (int32_t)(t % (size_t)j->parts) : -1,
                                 &j->st->bytes_sent);
    if (!rc) {
        j->ts[t].attempt = attempt;
        j->ts[t].out = true;
        j->ts[t].sent_ns = lt_now_ns();
    }
    lt_dist_outbox_free(&o);
    free(spec);
    return rc;
}

/* Task t failed for good: its dead letter, and the job's reason. */
static int dead_letter(tjob *j, size_t t, const char *reason) {
    task_state *s = &j->ts[t];
    Looptune__Task task;
    uint8_t *spec;
    int rc = build_task(j, t, s->attempt, &task, &spec);
    if (rc) return rc;
    char key[192];
    snprintf(key, sizeof key, "%s/%zu", j->st->job_id, t);
    rc = lt__dead_letter_send(j->dead, key, &task, reason, &s->errors, &j->st->bytes_sent);
    free(spec);
    j->st->dead++;
    const lt_tune_job_key *k = &j->job->keys[t];
    if (!j->st->dead_reason[0])
        snprintf(j->st->dead_reason, sizeof j->st->dead_reason,
                 "task %zu (%.60s, %s %.96s): %.300s", t, key, k->kernel, k->shape, reason);
    return rc;
}

/* A failed attempt of task t: send it again, or give it up. */
static int attempt_failed(tjob *j, size_t t, uint32_t attempt, const char *why) {
    task_state *s = &j->ts[t];
    if (s->done || attempt < s->attempt) return LT_OK; /* stale: a later attempt is out */
    j->st->failed_results++;
    lt__attempt_errors_add(&s->errors, attempt, why);
    uint32_t max = j->jo->max_attempts ? j->jo->max_attempts : 3;
    lt_log(LT_LOG_WARN, "submit: job %s task %zu (%s %s) attempt %u of %u failed: %s",
           j->st->job_id, t, j->job->keys[t].kernel, j->job->keys[t].shape, attempt, max, why);
    if (attempt >= max) {
        char reason[600];
        snprintf(reason, sizeof reason, "failed %u attempts; last: %s", attempt, why);
        int rc = dead_letter(j, t, reason);
        return rc ? rc : LT_EFORMAT;
    }
    j->st->retries++;
    return send_task(j, t, attempt + 1);
}

/* ---- workers and results ------------------------------------------------------------ */

static void heard_from(tjob *j, const char *id, bool leaving) {
    lt__workers_heard(&j->workers, id, leaving);
    j->st->workers_seen = j->workers.n;
}

static int workers_alive(const tjob *j) { return lt__workers_alive(&j->workers); }

/* An OK result's answer: the Config of task t's key for the job's class. */
static int answer_of(tjob *j, size_t t, const Looptune__Result *r, lt_config_entry *e) {
    const lt_tune_job_key *k = &j->job->keys[t];
    if (!r->data.len) return lt_error(LT_EFORMAT, "an OK result without its configuration");
    Looptune__Envelope *env;
    int rc = lt_envelope_decode(r->data.data, r->data.len, &env);
    if (rc) return lt_error(rc, "its configuration does not decode: %s", lt_errmsg());
    rc = lt_config_from_envelope(env, e);
    lt_envelope_free(env);
    if (rc) return lt_error(rc, "its configuration is not valid: %s", lt_errmsg());
    if (strcmp(e->kernel, k->kernel) || strcmp(e->shape, k->shape))
        return lt_error(LT_EFORMAT, "a configuration of %s %s for a task of %s %s", e->kernel,
                        e->shape, k->kernel, k->shape);
    if (strcmp(e->host, j->job->host_class))
        return lt_error(LT_EFORMAT, "a configuration for host class %s in a job for %s",
                        e->host, j->job->host_class);
    return LT_OK;
}

static int on_result(tjob *j, const Looptune__Result *r) {
    if (r->task_index >= (uint64_t)j->job->n_keys || r->attempt < 1) {
        j->st->rejected++;
        return LT_OK;
    }
    const size_t t = (size_t)r->task_index;
    heard_from(j, r->worker, false);
    if (r->status != LOOPTUNE__STATUS__STATUS_OK) {
        char why[600];
        snprintf(why, sizeof why, "%s: %s", r->worker && *r->worker ? r->worker : "a worker",
                 r->error && *r->error ? r->error : "FAILED without a reason");
        return attempt_failed(j, t, r->attempt, why);
    }
    if (j->ts[t].done) {
        j->st->duplicates++;
        return LT_OK;
    }
    lt_config_entry e;
    if (answer_of(j, t, r, &e)) {
        char why[600];
        snprintf(why, sizeof why, "%s: %s", r->worker && *r->worker ? r->worker : "a worker",
                 lt_errmsg());
        return attempt_failed(j, t, r->attempt, why);
    }
    lt_tune_job_key *k = &j->job->keys[t];
    k->done = true;
    k->entry = e;
    k->seconds = r->seconds;
    snprintf(k->worker, sizeof k->worker, "%s", r->worker ? r->worker : "");
    j->ts[t].done = true;
    j->st->applied++;
    if (j->ts[t].out && j->ts[t].sent_ns)
        j->rt_ms[j->n_rt++] = (double)(lt_now_ns() - j->ts[t].sent_ns) * 1e-6;
    return LT_OK;
}

/* A record of the results topic. */
static int on_record(tjob *j, const lt_record *rec) {
    Looptune__Envelope *env;
    if (!rec->value || lt_envelope_decode(rec->value, rec->len, &env)) {
        j->st->rejected++;
        return LT_OK;
    }
    int rc = LT_OK;
    if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_HEARTBEAT) {
        const Looptune__Heartbeat *hb = env->heartbeat;
        /* only the workers of this class's topic */
        if (hb->tasks_topic && !strcmp(hb->tasks_topic, j->topic_tasks))
            heard_from(j, hb->worker, hb->state && !strcmp(hb->state, "leaving"));
    } else if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_RESULT &&
               env->result->job_id && !strcmp(env->result->job_id, j->st->job_id)) {
        rc = on_result(j, env->result);
    }
    lt_envelope_free(env);
    return rc;
}

/* ---- resume: an earlier coordinator's job ---------------------------------------- */

/* Calls fn on every envelope of topic (to its end now). */
static int replay(tjob *j, const char *topic, int (*fn)(tjob *, const Looptune__Envelope *)) {
    lt_kafka_reader *r;
    int rc = lt_kafka_reader_open(&r, &j->jo->conn, topic, 15000);
    if (rc == LT_ENOTFOUND) return LT_OK;
    if (rc) return rc;
    lt_record rec;
    while ((rc = lt_kafka_reader_next(r, 3000, &rec)) == 1) {
        Looptune__Envelope *env;
        if (!rec.value || lt_envelope_decode(rec.value, rec.len, &env)) continue;
        rc = fn(j, env);
        lt_envelope_free(env);
        if (rc) break;
    }
    lt_kafka_reader_close(r);
    /* an open transaction holds the rest back: the follower sees it when it commits */
    return rc == LT_ETIMEOUT || rc == 0 ? LT_OK : rc;
}

/* A task of the job as an earlier coordinator sent it: the same key of the
 * same model for the same class, and the attempts sent. */
static int resume_task(tjob *j, const Looptune__Envelope *env) {
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_TASK) return LT_OK;
    const Looptune__Task *t = env->task;
    if (!t->job_id || strcmp(t->job_id, j->st->job_id)) return LT_OK;
    const size_t n = j->job->n_keys;
    if (t->task_index >= n || t->total_tasks != n)
        return lt_error(LT_EINVAL, "resume: job %s has %llu tasks, this model makes %zu keys "
                        "(another model, --regime or --threads?)", j->st->job_id,
                        (unsigned long long)t->total_tasks, n);
    Looptune__TuneSpec *s = looptune__tune_spec__unpack(NULL, t->spec.len, t->spec.data);
    if (!s) return lt_error(LT_EINVAL, "resume: job %s's task %llu is no tune task", j->st->job_id,
                            (unsigned long long)t->task_index);
    const lt_tune_job_key *k = &j->job->keys[t->task_index];
    int rc = LT_OK;
    if (strcmp(s->kernel, k->kernel) || strcmp(s->shape, k->shape) || s->tokens != k->tokens)
        rc = lt_error(LT_EINVAL, "resume: job %s's task %llu is %s %s, this model's %s %s",
                      j->st->job_id, (unsigned long long)t->task_index, s->kernel, s->shape,
                      k->kernel, k->shape);
    else if (s->model_bytes != j->model_bytes || s->model_crc32c != j->model_crc)
        rc = lt_error(LT_EINVAL, "resume: job %s tunes another model (%llu bytes, CRC32C "
                      "%08x; this one: %llu bytes, %08x)", j->st->job_id,
                      (unsigned long long)s->model_bytes, s->model_crc32c,
                      (unsigned long long)j->model_bytes, j->model_crc);
    looptune__tune_spec__free_unpacked(s, NULL);
    if (rc) return rc;
    j->resume_found = true;
    if (t->attempt > j->ts[t->task_index].attempt) j->ts[t->task_index].attempt = t->attempt;
    return LT_OK;
}

static int resume_dead(tjob *j, const Looptune__Envelope *env) {
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_DEAD_LETTER || !env->dead_letter->task ||
        !env->dead_letter->task->job_id || strcmp(env->dead_letter->task->job_id, j->st->job_id))
        return LT_OK;
    return lt_error(LT_ESTATE, "resume: job %s's task %llu was dead-lettered (%s): submit the "
                    "job anew", j->st->job_id,
                    (unsigned long long)env->dead_letter->task->task_index,
                    env->dead_letter->reason);
}

static int resume_result(tjob *j, const Looptune__Envelope *env) {
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_RESULT || !env->result->job_id ||
        strcmp(env->result->job_id, j->st->job_id) ||
        env->result->status != LOOPTUNE__STATUS__STATUS_OK)
        return LT_OK; /* failed attempts before: the task is sent again */
    return on_result(j, env->result);
}

static int resume_job(tjob *j) {
    int rc = replay(j, j->topic_tasks, resume_task);
    if (!rc && !j->resume_found)
        rc = lt_error(LT_ENOTFOUND, "resume: no task of job %s on %s", j->st->job_id,
                      j->topic_tasks);
    if (!rc) rc = replay(j, j->topic_dead, resume_dead);
    if (!rc) rc = replay(j, j->topic_results, resume_result);
    if (!rc) {
        j->st->resumed = j->st->applied;
        fprintf(stderr, "submit: job %s resumed: %lld of %zu keys done on %s\n", j->st->job_id,
                (long long)j->st->applied, j->job->n_keys, j->topic_results);
    }
    return rc;
}

/* ---- the job ------------------------------------------------------------------------- */

/* The class topic's partition count, which a topic created a moment ago may
 * not show yet; unknown, the tasks go by their key's hash. */
static void partitions_of(tjob *j) {
    for (int tries = 0; tries < 25; tries++) {
        int rc = lt_dist_topic_partitions(&j->jo->conn, j->topic_tasks, &j->parts);
        if (rc == LT_OK) return;
        if (rc != LT_ENOTFOUND) break;
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
    }
    lt_log(LT_LOG_WARN, "submit: %s: %s; tasks go by their key", j->topic_tasks, lt_errmsg());
    j->parts = 0;
}

static bool stage_ready(const tjob *j, int stage) {
    for (size_t i = 0; i < j->job->n_keys; i++)
        if (j->job->keys[i].stage < stage && !j->job->keys[i].done) return false;
    return true;
}

/* Sends the tasks whose stage may start, at most window in flight. */
static int pump(tjob *j) {
    int64_t window = j->jo->window > 0 ? j->jo->window : INT64_MAX, in_flight = 0;
    for (size_t t = 0; t < j->job->n_keys; t++) in_flight += j->ts[t].out && !j->ts[t].done;
    for (size_t t = 0; t < j->job->n_keys && in_flight < window; t++) {
        if (j->ts[t].done || j->ts[t].out || !stage_ready(j, j->job->keys[t].stage)) continue;
        int rc = send_task(j, t, j->ts[t].attempt + 1); /* 1, or the next after a resumed job's */
        if (rc) return rc;
        in_flight++;
    }
    return LT_OK;
}

static void progress(const tjob *j) {
    fprintf(stderr, "submit: job %s: %lld/%zu keys done, %d workers of %s alive (%d seen), "
            "%lld retries, %lld duplicates dropped\n", j->st->job_id, (long long)j->st->applied,
            j->job->n_keys, workers_alive(j), j->job->host_class, j->workers.n,
            (long long)j->st->retries, (long long)j->st->duplicates);
}

static int wait_for_worker(tjob *j) {
    const double wt = j->jo->worker_timeout_s > 0 ? j->jo->worker_timeout_s : 30;
    uint64_t t0 = lt_now_ns();
    while (workers_alive(j) == 0) {
        if ((double)(lt_now_ns() - t0) * 1e-9 > wt)
            return lt_error(LT_ETIMEOUT, "no worker of host class %s alive: none heard from on "
                            "%s within %.0f s (start one on a host of that class: looptune "
                            "worker --kinds tune --brokers ...)", j->job->host_class,
                            j->topic_results, wt);
        lt_record rec;
        if (lt_follower_poll(j->results, 200, &rec) == 1) {
            int rc = on_record(j, &rec);
            if (rc) return rc;
        }
    }
    return LT_OK;
}

static int drained_record(void *j, const lt_record *rec) { return on_record(j, rec); }

static int collect(tjob *j, uint64_t t0) {
    const double wt = j->jo->worker_timeout_s > 0 ? j->jo->worker_timeout_s : 30;
    const double jt = j->jo->job_timeout_s > 0 ? j->jo->job_timeout_s : 3600;
    const double every = j->jo->progress_s == 0 ? 2 : j->jo->progress_s;
    uint64_t last_alive = lt_now_ns(), last_progress = lt_now_ns();
    const int64_t n = (int64_t)j->job->n_keys;
    while (j->st->applied < n) {
        int rc = pump(j);
        if (rc) return rc;
        lt_record rec;
        int got = lt_follower_poll(j->results, 200, &rec);
        if (got < 0) lt_log(LT_LOG_WARN, "submit: %s", lt_errmsg());
        if (got == 1 && (rc = on_record(j, &rec))) return rc;
        uint64_t now = lt_now_ns();
        if (workers_alive(j) > 0) last_alive = now;
        if ((double)(now - last_alive) * 1e-9 > wt)
            return lt_error(LT_ETIMEOUT, "no worker of host class %s alive: none heard from on "
                            "%s for %.0f s, %lld of %lld keys left (start one on a host of that "
                            "class: looptune worker --kinds tune --brokers ...)",
                            j->job->host_class, j->topic_results, wt,
                            (long long)(n - j->st->applied), (long long)n);
        if ((double)(now - t0) * 1e-9 > jt)
            return lt_error(LT_ETIMEOUT, "job timed out after %.0f s with %lld of %lld keys left",
                            jt, (long long)(n - j->st->applied), (long long)n);
        if (every > 0 && (double)(now - last_progress) * 1e-9 >= every) {
            last_progress = now;
            progress(j);
        }
    }
    return LT_OK;
}

int lt_submit_tune(const lt_submit_tune_opts *o, lt_tune_job *job, lt_submit_stats *st) {
    memset(st, 0, sizeof *st);
    memset(job, 0, sizeof *job);
    const lt_submit_opts *jo = &o->job;
    if (o->budget < 1 || o->threads < 1)
        return lt_error(LT_EINVAL, "submit tune: budget and threads must be >= 1");
    if (!o->model || !*o->model) return lt_error(LT_EINVAL, "submit tune: no model");
    uint64_t t0 = lt_now_ns();
    tjob j = {.o = o, .jo = jo, .st = st, .job = job, .strategy = lt_strategy_name(o->strategy)};
    /* the model: here, and as the workers open it */
    int rc = lt_dist_model_id(o->model, &j.model_bytes, &j.model_crc);
    if (rc == LT_ENOTFOUND) return lt_error(rc, "model %s not found", o->model);
    if (rc) return rc;
    if (o->remote_model && *o->remote_model) {
        if (snprintf(job->remote_model, sizeof job->remote_model, "%s", o->remote_model) >=
            (int)sizeof job->remote_model)
            return lt_error(LT_EINVAL, "submit tune: --remote-model too long");
    } else {
        char abs[PATH_MAX];
        if (!realpath(o->model, abs)) return lt_error(LT_EIO, "%s: cannot resolve", o->model);
        if (snprintf(job->remote_model, sizeof job->remote_model, "%s", abs) >=
            (int)sizeof job->remote_model)
            return lt_error(LT_EINVAL, "submit tune: the model's path is too long");
    }
    if (o->host_class && *o->host_class) {
        if (strlen(o->host_class) >= sizeof job->host_class)
            return lt_error(LT_EINVAL, "submit tune: host class too long");
        snprintf(job->host_class, sizeof job->host_class, "%s", o->host_class);
    } else {
        lt_host h;
        lt_host_detect(&h);
        snprintf(job->host_class, sizeof job->host_class, "%s", h.host_class);
    }
    if ((rc = enumerate(o, job))) {
        lt_tune_job_free(job);
        return rc;
    }
    st->tasks = (int64_t)job->n_keys;
    if (jo->job_id && *jo->job_id) snprintf(st->job_id, sizeof st->job_id, "%s", jo->job_id);
    else lt__job_id(st->job_id, sizeof st->job_id, "tune");
    const char *prefix = jo->prefix ? jo->prefix : LT_KAFKA_TOPIC_PREFIX;
    rc = lt_dist_tune_topic(prefix, job->host_class, j.topic_tasks, sizeof j.topic_tasks);
    if (rc) return rc;
    snprintf(j.topic_results, sizeof j.topic_results, "%s%s", prefix,
             lt_kafka_topic_suffix(LT_TOPIC_RESULTS));
    snprintf(j.topic_dead, sizeof j.topic_dead, "%s%s", prefix,
             lt_kafka_topic_suffix(LT_TOPIC_TASKS_DEAD));
    double jt = jo->job_timeout_s > 0 ? jo->job_timeout_s : 3600;
    j.deadline_wall_ns = lt_wall_ns() + (uint64_t)(jt * 1e9);
    j.ts = calloc(job->n_keys, sizeof *j.ts);
    j.rt_ms = calloc(job->n_keys, sizeof *j.rt_ms);
    if (!j.ts || !j.rt_ms) rc = lt_error(LT_ENOMEM, "submit tune: out of memory");

    if (!rc) rc = lt_dist_ensure_topics(&jo->conn, prefix, jo->partitions);
    if (!rc) rc = lt_dist_ensure_tune_topic(&jo->conn, prefix, job->host_class, jo->partitions);
    /* results are followed from before the first task goes out */
    if (!rc) rc = lt_follower_open(&j.results, &jo->conn, j.topic_results, 15000);
    lt_producer_opts po = {.conn = jo->conn, .topic = j.topic_tasks, .linger_ms = 5,
                           .close_timeout_ms = 30000};
    if (!rc) rc = lt_producer_open(&j.tasks, &po);
    po.topic = j.topic_dead;
    if (!rc) rc = lt_producer_open(&j.dead, &po);
    if (!rc && jo->resume) {
        if (!jo->job_id || !*jo->job_id) rc = lt_error(LT_EINVAL, "resume: which job? give its id");
        else rc = resume_job(&j);
    }
    if (!rc && st->applied < st->tasks) rc = wait_for_worker(&j);
    if (!rc) partitions_of(&j);
    if (!rc)
        fprintf(stderr, "submit: job %s: tune %s (%zu keys, %s, budget %d, %d threads) on host "
                "class %s via %s, %d workers alive\n", st->job_id, job->remote_model,
                job->n_keys, j.strategy, o->budget, o->threads, job->host_class, j.topic_tasks,
                workers_alive(&j));
    if (!rc) rc = collect(&j, t0);
    int err = rc;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", err ? lt_errmsg() : "");
    st->seconds = (double)(lt_now_ns() - t0) * 1e-9;
    /* replays still on their way are counted as the duplicates they are */
    if (!err) lt_follower_drain(j.results, 3000, drained_record, &j);
    if (j.n_rt > 0) {
        lt_sort_f64(j.rt_ms, j.n_rt);
        st->rt_median_ms = lt_median(j.rt_ms, j.n_rt);
        st->rt_p99_ms = j.rt_ms[(int)((double)(j.n_rt - 1) * 0.99)];
    }
    if (jo->progress_s >= 0 && !err) progress(&j);
    lt_producer_close(j.dead);
    lt_producer_close(j.tasks);
    lt_follower_close(j.results);
    for (size_t t = 0; j.ts && t < job->n_keys; t++)
        lt__attempt_errors_free(&j.ts[t].errors);
    free(j.ts);
    free(j.rt_ms);
    if (err == LT_EFORMAT && st->dead)
        return lt_error(err, "task dead-lettered to %s: %s", j.topic_dead, st->dead_reason);
    return err ? lt_error(err, "%s", msg) : LT_OK;
}
