/* looptune hpo --brokers: the study driven over Kafka, each trial a task of
 * kind hpo for `looptune worker` (src/dist/kind_hpo.c), and the study kept in
 * the compacted topic <prefix>trials; and --watch, which follows a study
 * there.
 *
 * The study's records (JSON values):
 *   key S      {"study": S, "space": "<JSON text>", "sampler", "seed", "maximize",
 *               "objective" or "command", "timeout", "budget", "done": bool}
 *   key S/T    {"study": S, "trial": T, "values": [...], "params": {...},
 *               "state": "running" | "complete" | "failed", "value": V,
 *               "steps": [[step, value], ...], "reason": "...", "worker": W}
 * A trial is proposed, its running record written and flushed, and only then
 * its task sent (key S/T on <prefix>tasks): a driver that dies in between
 * leaves a running trial without a task, which the next driver finds
 * missing on the tasks topic and sends. Results (key S/T on <prefix>results)
 * are applied once per trial: a trial that is no longer running takes no
 * other. The resumed driver reads the study back (every trial's
 * configuration, state and values, in trial order), the tasks already sent
 * and the results already answered, then goes on. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "hpo_cli.h"
#include "looptune/dist.h"
#include "looptune/hpo.h"
#include "looptune/kafka.h"

#define MAX_RUNS 3 /* the runs of a trial told apart: the third is one too many */

typedef struct {
    char worker[96];
    double start_s; /* the worker process's start, wall clock: its heartbeat's time - uptime */
} run_seen;

typedef struct {
    int n_runs;      /* the worker runs that said (heartbeat: busy) they ran it */
    run_seen runs[MAX_RUNS];
    bool prune_sent; /* the pruner's decision sent to its worker */
    bool seen;      /* a record of it on the topic (resume) */
    bool final;     /* complete or failed: applied */
    bool sent;      /* its task is on the tasks topic */
    json_t *record; /* its latest record */
} dtrial;

typedef struct {
    lt_cli_hpo_run *r;
    const lt_cli_hpo_dist *d;
    char topic_tasks[256], topic_results[256], topic_trials[256], topic_steps[300];
    lt_producer *tasks, *trials, *steps; /* steps: with a pruner */
    lt_follower *results, *steps_in;
    dtrial *t;
    int cap;
    int inflight;
    json_t *study_rec;
    int applied, duplicates;
    bool replaying; /* reading the results an earlier driver saw: no duplicates counted */
} driver;

static int topic_names(const char *prefix, char *tasks, char *results, char *trials) {
    if (snprintf(tasks, 256, "%s%s", prefix, lt_kafka_topic_suffix(LT_TOPIC_TASKS)) >= 256 ||
        snprintf(results, 256, "%s%s", prefix, lt_kafka_topic_suffix(LT_TOPIC_RESULTS)) >= 256 ||
        snprintf(trials, 256, "%s%s", prefix, lt_kafka_topic_suffix(LT_TOPIC_TRIALS)) >= 256)
        return lt_error(LT_EINVAL, "topic prefix '%.60s...' is too long", prefix);
    return LT_OK;
}

static dtrial *trial_at(driver *dr, int t) {
    if (t < 0 || t > 10000000) return NULL;
    if (t >= dr->cap) {
        int nc = dr->cap ? dr->cap : 64;
        while (nc <= t) nc *= 2;
        dtrial *v = realloc(dr->t, (size_t)nc * sizeof *v);
        if (!v) return NULL;
        memset(v + dr->cap, 0, (size_t)(nc - dr->cap) * sizeof *v);
        dr->t = v;
        dr->cap = nc;
    }
    return &dr->t[t];
}

/* Sends one record and waits for the broker's acknowledgement. */
static int send_sync(lt_producer *p, const char *key, const void *value, size_t len) {
    int tries = 0, rc;
    while ((rc = lt_producer_send(p, key, strlen(key), value, len)) == LT_PRODUCER_DROPPED) {
        if (++tries > 3000) return lt_error(LT_ETIMEOUT, "the producer's queue stayed full");
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (rc) return rc;
    return lt_producer_flush(p, 30000);
}

static int send_json(lt_producer *p, const char *key, const json_t *j) {
    char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (!text) return lt_error(LT_ENOMEM, "out of memory");
    int rc = send_sync(p, key, text, strlen(text));
    free(text);
    return rc;
}

/* Trial t's record as it stands in the study. */
static json_t *trial_record(driver *dr, int t, const json_t *steps, const char *worker) {
    lt_hpo_state state;
    double value;
    const double *values;
    const char *why;
    lt_hpo_study_trial(dr->r->st, t, &state, &value, &values, &why);
    const int size = lt_hpo_space_size(dr->r->space);
    json_t *jv = json_array();
    for (int i = 0; i < size; i++) json_array_append_new(jv, json_real(values[i]));
    char *params = lt_hpo_config_json(dr->r->space, values);
    json_t *jp = params ? json_loads(params, 0, NULL) : NULL;
    free(params);
    json_t *rec = json_pack("{s:s, s:i, s:o, s:o, s:s, s:s}", "study", dr->r->name, "trial", t,
                            "values", jv, "params", jp ? jp : json_object(), "state",
                            lt_hpo_state_name(state), "reason", why ? why : "");
    if (rec && state == LT_HPO_COMPLETE) json_object_set_new(rec, "value", json_real(value));
    if (rec) json_object_set_new(rec, "steps", steps ? json_deep_copy(steps) : json_array());
    if (rec && worker) json_object_set_new(rec, "worker", json_string(worker));
    return rec;
}

static int write_trial(driver *dr, int t, const json_t *steps, const char *worker) {
    json_t *rec = trial_record(dr, t, steps, worker);
    if (!rec) return lt_error(LT_ENOMEM, "out of memory");
    char key[300];
    snprintf(key, sizeof key, "%s/%d", dr->r->name, t);
    int rc = send_json(dr->trials, key, rec);
    dtrial *dt = trial_at(dr, t);
    if (dt) {
        json_decref(dt->record);
        dt->record = rec;
    } else {
        json_decref(rec);
    }
    return rc;
}

static int send_task(driver *dr, int t) {
    const double *values;
    lt_hpo_study_trial(dr->r->st, t, NULL, NULL, &values, NULL);
    const int size = lt_hpo_space_size(dr->r->space);
    json_t *jv = json_array();
    for (int i = 0; i < size; i++) json_array_append_new(jv, json_real(values[i]));
    json_t *spec = json_pack("{s:s, s:i, s:s, s:o, s:f}", "study", dr->r->name, "trial", t,
                             "space", dr->d->space_text, "values", jv, "timeout",
                             dr->d->timeout_s);
    if (!spec) return lt_error(LT_ENOMEM, "out of memory");
    if (dr->steps) { /* the worker reports each value there and reads the decision */
        json_object_set_new(spec, "brokers", json_string(dr->d->kafka->conn.brokers));
        json_object_set_new(spec, "steps_topic", json_string(dr->topic_steps));
    }
    if (dr->d->objective) {
        json_object_set_new(spec, "objective", json_string(dr->d->objective));
        if (dr->d->data) {
            json_object_set_new(spec, "data", json_string(dr->d->data));
            json_object_set_new(spec, "seed", json_integer((json_int_t)dr->d->seed));
        }
    } else {
        json_t *cmd = json_array();
        for (int i = 0; i < dr->d->argc; i++)
            json_array_append_new(cmd, json_string(dr->d->argv[i]));
        json_object_set_new(spec, "command", cmd);
    }
    char *text = json_dumps(spec, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(spec);
    if (!text) return lt_error(LT_ENOMEM, "out of memory");
    Looptune__Task task;
    looptune__task__init(&task);
    task.job_id = (char *)dr->r->name;
    task.task_index = (uint64_t)t;
    task.kind = "hpo";
    task.attempt = 1;
    task.max_attempts = 1;
    task.spec = (ProtobufCBinaryData){.len = strlen(text), .data = (uint8_t *)text};
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_TASK;
    env.task = &task;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = lt_envelope_encode(&env, &buf, &len);
    char key[300];
    snprintf(key, sizeof key, "%s/%d", dr->r->name, t);
    if (!rc) rc = send_sync(dr->tasks, key, buf, len);
    free(buf);
    free(text);
    dtrial *dt = trial_at(dr, t);
    if (!rc && dt) dt->sent = true;
    return rc;
}

/* A result of the study: applied if its trial is running. */
static int on_result(driver *dr, const Looptune__Result *res) {
    const int t = (int)res->task_index;
    dtrial *dt = trial_at(dr, t);
    if (!dt || t >= lt_hpo_study_counts(dr->r->st).total) return LT_OK;
    lt_hpo_state state;
    lt_hpo_study_trial(dr->r->st, t, &state, NULL, NULL, NULL);
    if (state != LT_HPO_RUNNING) {
        if (!dr->replaying) dr->duplicates++;
        return LT_OK;
    }
    json_t *ans = NULL;
    const char *why = NULL;
    char buf[512];
    if (res->status != LOOPTUNE__STATUS__STATUS_OK) {
        snprintf(buf, sizeof buf, "%s: %s", res->worker && *res->worker ? res->worker : "a worker",
                 res->error && *res->error ? res->error : "FAILED without a reason");
        why = buf;
    } else if (!(ans = json_loadb((const char *)res->data.data, res->data.len, 0, NULL))) {
        why = "its answer is no JSON";
    }
    const char *st = ans ? json_string_value(json_object_get(ans, "state")) : NULL;
    json_t *steps = ans ? json_object_get(ans, "steps") : NULL;
    if (ans && st && (!strcmp(st, "complete") || !strcmp(st, "pruned"))) {
        double v = json_number_value(json_object_get(ans, "value"));
        json_t *test = json_object_get(ans, "test");
        if (dr->d->test_acc && t < dr->d->budget && json_is_number(test))
            dr->d->test_acc[t] = json_number_value(test);
        /* the steps not reported live (those that were are refused, not increasing) */
        for (size_t i = 0; json_is_array(steps) && i < json_array_size(steps); i++) {
            json_t *s = json_array_get(steps, i);
            bool prune;
            (void)lt_hpo_study_report(dr->r->st, t,
                                      (int64_t)json_integer_value(json_array_get(s, 0)),
                                      json_number_value(json_array_get(s, 1)), &prune);
        }
        lt_hpo_study_tell(dr->r->st, t, !strcmp(st, "pruned") ? LT_HPO_PRUNED : LT_HPO_COMPLETE, v,
                          NULL);
    } else {
        if (ans && !why) why = json_string_value(json_object_get(ans, "reason"));
        lt_hpo_study_tell(dr->r->st, t, LT_HPO_FAILED, 0, why ? why : "failed");
    }
    int rc = write_trial(dr, t, json_is_array(steps) ? steps : NULL, res->worker);
    json_decref(ans);
    dt->final = true;
    dr->inflight--;
    dr->applied++;
    lt_cli_hpo_progress(dr->r, t, res->seconds);
    return rc;
}

/* A running trial's intermediate value (key STUDY/T/report): the pruner's
 * verdict, sent back once (key STUDY/T/prune). */
static int on_step_record(driver *dr, const lt_record *rec) {
    const size_t n = strlen(dr->r->name);
    const char *k = rec->key;
    if (!k || !rec->value || rec->key_len < n + 9 || memcmp(k, dr->r->name, n) || k[n] != '/' ||
        memcmp(k + rec->key_len - 7, "/report", 7))
        return LT_OK;
    char num[16];
    size_t nl = rec->key_len - n - 8;
    if (nl == 0 || nl >= sizeof num) return LT_OK;
    memcpy(num, k + n + 1, nl);
    num[nl] = 0;
    const int t = atoi(num);
    if (t < 0 || t >= lt_hpo_study_counts(dr->r->st).total) return LT_OK;
    lt_hpo_state state;
    lt_hpo_study_trial(dr->r->st, t, &state, NULL, NULL, NULL);
    dtrial *dt = trial_at(dr, t);
    if (state != LT_HPO_RUNNING || !dt || dt->prune_sent) return LT_OK;
    json_t *j = json_loadb(rec->value, rec->len, 0, NULL);
    if (!j) return LT_OK;
    bool prune = false;
    /* a step that does not increase is refused, and ignored */
    (void)lt_hpo_study_report(dr->r->st, t, (int64_t)json_integer_value(json_object_get(j, "step")),
                              json_number_value(json_object_get(j, "value")), &prune);
    json_decref(j);
    if (!prune) return LT_OK;
    char key[320];
    snprintf(key, sizeof key, "%s/%d/prune", dr->r->name, t);
    dt->prune_sent = true;
    return send_sync(dr->steps, key, "{}", 2);
}

/* A worker busy with one of the study's trials: a new run of it when the
 * worker (or its process: another start) is not one seen running it. A
 * trial whose worker died is delivered again to another (or the restarted
 * one); at the third run the trial is failed with the workers' names, and
 * whatever that run answers is dropped. */
static int on_busy(driver *dr, const Looptune__Heartbeat *hb, uint64_t time_ns) {
    const int t = (int)hb->task_index;
    if (t >= lt_hpo_study_counts(dr->r->st).total || !hb->worker) return LT_OK;
    dtrial *dt = trial_at(dr, t);
    lt_hpo_state state;
    lt_hpo_study_trial(dr->r->st, t, &state, NULL, NULL, NULL);
    if (!dt || state != LT_HPO_RUNNING) return LT_OK;
    const double start = (double)time_ns * 1e-9 - hb->uptime_s;
    for (int i = 0; i < dt->n_runs; i++)
        if (!strcmp(dt->runs[i].worker, hb->worker) && fabs(dt->runs[i].start_s - start) < 0.25)
            return LT_OK;
    run_seen *r = &dt->runs[dt->n_runs < MAX_RUNS ? dt->n_runs : MAX_RUNS - 1];
    snprintf(r->worker, sizeof r->worker, "%s", hb->worker);
    r->start_s = start;
    if (dt->n_runs < MAX_RUNS) dt->n_runs++;
    if (dt->n_runs < MAX_RUNS) {
        if (dt->n_runs > 1)
            fprintf(stderr, "%s: trial %d runs again, on %s (its worker died)\n", dr->r->name, t,
                    hb->worker);
        return LT_OK;
    }
    char why[400];
    snprintf(why, sizeof why,
             "its worker died twice (%.96s, then %.96s): failed at its third delivery",
             dt->runs[0].worker, dt->runs[1].worker);
    lt_hpo_study_tell(dr->r->st, t, LT_HPO_FAILED, 0, why);
    int rc = write_trial(dr, t, NULL, NULL);
    dt->final = true;
    dr->inflight--;
    dr->applied++;
    lt_cli_hpo_progress(dr->r, t, 0);
    return rc;
}

static int on_result_record(driver *dr, const lt_record *rec) {
    Looptune__Envelope *env;
    if (!rec->value || lt_envelope_decode(rec->value, rec->len, &env)) return LT_OK;
    int rc = LT_OK;
    if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_RESULT && env->result->job_id &&
        !strcmp(env->result->job_id, dr->r->name))
        rc = on_result(dr, env->result);
    else if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_HEARTBEAT && env->heartbeat->state &&
             !strcmp(env->heartbeat->state, "busy") && env->heartbeat->job_id &&
             !strcmp(env->heartbeat->job_id, dr->r->name))
        rc = on_busy(dr, env->heartbeat, env->time_ns);
    lt_envelope_free(env);
    return rc;
}

/* ---- resume ----------------------------------------------------------------------------- */

/* Every record of topic to its end now, to fn. */
static int replay(driver *dr, const char *topic, int (*fn)(driver *, const lt_record *)) {
    lt_kafka_reader *rd;
    int rc = lt_kafka_reader_open(&rd, &dr->d->kafka->conn, topic, 15000);
    if (rc == LT_ENOTFOUND) return LT_OK;
    if (rc) return rc;
    lt_record rec;
    while ((rc = lt_kafka_reader_next(rd, 3000, &rec)) == 1)
        if ((rc = fn(dr, &rec))) break;
    lt_kafka_reader_close(rd);
    return rc == LT_ETIMEOUT || rc == 0 ? LT_OK : rc;
}

static bool key_is(const lt_record *rec, const char *name, int *trial) {
    size_t n = strlen(name);
    if (!rec->key || rec->key_len < n || memcmp(rec->key, name, n)) return false;
    if (rec->key_len == n) {
        *trial = -1;
        return true;
    }
    if (((const char *)rec->key)[n] != '/' || rec->key_len - n > 12) return false;
    char num[16];
    memcpy(num, (const char *)rec->key + n + 1, rec->key_len - n - 1);
    num[rec->key_len - n - 1] = 0;
    char *end;
    long v = strtol(num, &end, 10);
    if (*end || v < 0) return false;
    *trial = (int)v;
    return true;
}

static int read_trial_record(driver *dr, const lt_record *rec) {
    int t;
    if (!key_is(rec, dr->r->name, &t) || !rec->value) return LT_OK;
    json_t *j = json_loadb(rec->value, rec->len, 0, NULL);
    if (!j) return LT_OK;
    if (t < 0) {
        json_decref(dr->study_rec);
        dr->study_rec = j;
        return LT_OK;
    }
    dtrial *dt = trial_at(dr, t);
    if (!dt) {
        json_decref(j);
        return lt_error(LT_ENOMEM, "out of memory");
    }
    json_decref(dt->record);
    dt->record = j;
    dt->seen = true;
    return LT_OK;
}

static int read_task_record(driver *dr, const lt_record *rec) {
    int t;
    if (!key_is(rec, dr->r->name, &t) || t < 0) return LT_OK;
    dtrial *dt = trial_at(dr, t);
    if (dt) dt->sent = true;
    return LT_OK;
}

/* The study's trials back from their records, in trial order. */
static int rebuild(driver *dr) {
    const char *space = json_string_value(json_object_get(dr->study_rec, "space"));
    if (!space || strcmp(space, dr->d->space_text))
        return lt_error(LT_EINVAL, "study %s on %s has another search space", dr->r->name,
                        dr->topic_trials);
    const int size = lt_hpo_space_size(dr->r->space);
    double *v = malloc((size_t)size * sizeof *v);
    if (!v) return lt_error(LT_ENOMEM, "out of memory");
    int rc = LT_OK, n = 0;
    for (int t = 0; t < dr->cap && dr->t[t].seen && !rc; t++) {
        json_t *rec = dr->t[t].record, *jv = json_object_get(rec, "values");
        for (int i = 0; i < size; i++) v[i] = json_number_value(json_array_get(jv, (size_t)i));
        int id;
        if ((int)json_array_size(jv) != size || (rc = lt_hpo_study_add(dr->r->st, v, &id))) {
            rc = lt_error(LT_EINVAL, "study %s: trial %d's record does not fit the space",
                          dr->r->name, t);
            break;
        }
        const char *st = json_string_value(json_object_get(rec, "state"));
        json_t *steps = json_object_get(rec, "steps");
        if (st && (!strcmp(st, "complete") || !strcmp(st, "pruned"))) {
            for (size_t i = 0; json_is_array(steps) && i < json_array_size(steps); i++) {
                json_t *s = json_array_get(steps, i);
                bool prune;
                lt_hpo_study_report(dr->r->st, t, (int64_t)json_integer_value(json_array_get(s, 0)),
                                    json_number_value(json_array_get(s, 1)), &prune);
            }
            lt_hpo_study_tell(dr->r->st, t, !strcmp(st, "pruned") ? LT_HPO_PRUNED : LT_HPO_COMPLETE,
                              json_number_value(json_object_get(rec, "value")), NULL);
            dr->t[t].final = true;
        } else if (st && strcmp(st, "running")) {
            lt_hpo_study_tell(dr->r->st, t, LT_HPO_FAILED, 0,
                              json_string_value(json_object_get(rec, "reason")));
            dr->t[t].final = true;
        } else {
            dr->inflight++;
        }
        n++;
    }
    for (int t = n; t < dr->cap && !rc; t++)
        if (dr->t[t].seen)
            rc = lt_error(LT_EINVAL, "study %s: trial %d's record is missing, trial %d's is there",
                          dr->r->name, n, t);
    free(v);
    if (!rc)
        fprintf(stderr, "%s: resumed from %s: %d trials, %d running\n", dr->r->name,
                dr->topic_trials, n, dr->inflight);
    return rc;
}

static int ensure_trials_topic(const lt_kafka_conn *conn, const char *name) {
    static const char *const compact[] = {"cleanup.policy=compact"};
    lt_topic_spec spec = {.name = name, .partitions = 1, .replication = -1, .configs = compact,
                          .n_configs = 1};
    lt_kafka_admin *a;
    int rc = lt_kafka_admin_open(&a, conn);
    if (rc) return rc;
    size_t created = 0;
    rc = lt_kafka_admin_create_topics(a, &spec, 1, 15000, &created);
    lt_kafka_admin_close(a);
    return rc;
}

static int write_study(driver *dr, bool done) {
    json_t *s = json_pack("{s:s, s:s, s:s, s:I, s:b, s:f, s:i, s:b}", "study", dr->r->name,
                          "space", dr->d->space_text, "sampler", dr->d->sampler, "seed",
                          (json_int_t)dr->d->seed, "maximize", dr->d->maximize,
                          "timeout", dr->d->timeout_s, "budget", dr->d->budget, "done", done);
    if (!s) return lt_error(LT_ENOMEM, "out of memory");
    if (dr->d->objective) {
        json_object_set_new(s, "objective", json_string(dr->d->objective));
    } else {
        json_t *cmd = json_array();
        for (int i = 0; i < dr->d->argc; i++)
            json_array_append_new(cmd, json_string(dr->d->argv[i]));
        json_object_set_new(s, "command", cmd);
    }
    int rc = send_json(dr->trials, dr->r->name, s);
    json_decref(s);
    return rc;
}

int lt_cli_hpo_run_dist(lt_cli_hpo_run *r, const lt_cli_hpo_dist *d) {
    const char *cmd = r->cmd;
    driver dr = {.r = r, .d = d};
    const lt_kafka_conn *conn = &d->kafka->conn;
    const char *prefix = lt_cli_kafka_prefix(d->kafka);
    int rc = topic_names(prefix, dr.topic_tasks, dr.topic_results, dr.topic_trials);
    if (!rc && !d->topics_made) rc = lt_dist_ensure_topics(conn, prefix, 0);
    if (!rc && !d->topics_made) rc = ensure_trials_topic(conn, dr.topic_trials);
    lt_producer_opts po = {.conn = *conn, .topic = dr.topic_tasks, .linger_ms = -1};
    if (!rc) rc = lt_producer_open(&dr.tasks, &po);
    po.topic = dr.topic_trials;
    if (!rc) rc = lt_producer_open(&dr.trials, &po);
    if (!rc && d->prunes) {
        snprintf(dr.topic_steps, sizeof dr.topic_steps, "%s.steps", dr.topic_trials);
        lt_topic_spec spec = {.name = dr.topic_steps, .partitions = 1, .replication = -1};
        lt_kafka_admin *a;
        size_t created;
        if (d->topics_made) {
            /* made with the others */
        } else if (!(rc = lt_kafka_admin_open(&a, conn))) {
            rc = lt_kafka_admin_create_topics(a, &spec, 1, 15000, &created);
            lt_kafka_admin_close(a);
        }
        po.topic = dr.topic_steps;
        if (!rc) rc = lt_producer_open(&dr.steps, &po);
        if (!rc) rc = lt_follower_open(&dr.steps_in, conn, dr.topic_steps, 15000);
    }
    /* results from now on first, then what came before: none is missed */
    if (!rc) rc = lt_follower_open(&dr.results, conn, dr.topic_results, 15000);
    if (!rc) rc = replay(&dr, dr.topic_trials, read_trial_record);
    if (!rc && d->resume && !dr.study_rec)
        rc = lt_error(LT_ENOTFOUND, "--resume: no study %s on %s", r->name, dr.topic_trials);
    if (!rc && dr.study_rec) rc = rebuild(&dr);
    if (!rc && dr.study_rec) rc = replay(&dr, dr.topic_tasks, read_task_record);
    if (!rc && !dr.study_rec) rc = write_study(&dr, false);
    /* running trials whose task never went: sent now */
    for (int t = 0; !rc && t < lt_hpo_study_counts(r->st).total; t++)
        if (!dr.t[t].final && !dr.t[t].sent) rc = send_task(&dr, t);
    dr.replaying = true;
    if (!rc && dr.study_rec) rc = replay(&dr, dr.topic_results, on_result_record);
    dr.replaying = false;
    while (!rc && !lt_cli_hpo_stopping()) {
        int total = lt_hpo_study_counts(r->st).total;
        if (total >= d->budget && dr.inflight <= 0) break;
        if (d->workers_left && atomic_load(d->workers_left) <= 0) {
            rc = lt_error(LT_EINVAL, "no worker is left to run the trials");
            break;
        }
        while (!rc && dr.inflight < d->parallel && total < d->budget) {
            int t;
            double *values = malloc((size_t)lt_hpo_space_size(r->space) * sizeof *values);
            if (!values) {
                rc = lt_error(LT_ENOMEM, "out of memory");
                break;
            }
            rc = lt_hpo_study_ask(r->st, &t, values);
            free(values);
            if (rc) break;
            if (!trial_at(&dr, t)) rc = lt_error(LT_ENOMEM, "out of memory");
            if (!rc) rc = write_trial(&dr, t, NULL, NULL);
            if (!rc) rc = send_task(&dr, t);
            dr.inflight++;
            total++;
        }
        lt_record rec;
        int pr = rc ? 0 : lt_follower_poll(dr.results, dr.steps_in ? 50 : 200, &rec);
        if (pr == 1) rc = on_result_record(&dr, &rec);
        else if (pr < 0) rc = pr;
        while (!rc && dr.steps_in && (pr = lt_follower_poll(dr.steps_in, 0, &rec)) == 1)
            rc = on_step_record(&dr, &rec);
        if (!rc && pr < 0) rc = pr;
    }
    if (!rc && !lt_cli_hpo_stopping()) rc = write_study(&dr, true);
    if (rc) lt_cli_fail(cmd, "%s", lt_errmsg());
    else
        fprintf(stderr, "%s: over %s: %d results applied, %d duplicates dropped\n", r->name,
                prefix, dr.applied, dr.duplicates);
    lt_follower_close(dr.results);
    lt_follower_close(dr.steps_in);
    lt_producer_close(dr.steps);
    lt_producer_close(dr.tasks);
    lt_producer_close(dr.trials);
    for (int t = 0; t < dr.cap; t++) json_decref(dr.t[t].record);
    free(dr.t);
    json_decref(dr.study_rec);
    return rc ? 1 : 0;
}

/* ---- --watch ----------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    bool maximize, done, have_best;
    int budget, finals, best_trial;
    double best;
    unsigned char *printed; /* [cap] a trial's final line printed */
    int cap;
} watcher;

static void watch_record(watcher *w, const lt_record *rec) {
    int t;
    if (!key_is(rec, w->name, &t) || !rec->value) return;
    json_t *j = json_loadb(rec->value, rec->len, 0, NULL);
    if (!j) return;
    if (t < 0) {
        w->maximize = json_is_true(json_object_get(j, "maximize"));
        w->budget = (int)json_integer_value(json_object_get(j, "budget"));
        w->done = json_is_true(json_object_get(j, "done"));
        json_decref(j);
        return;
    }
    const char *st = json_string_value(json_object_get(j, "state"));
    if (!st || !strcmp(st, "running")) {
        json_decref(j);
        return;
    }
    if (t >= w->cap) {
        int nc = w->cap ? w->cap : 64;
        while (nc <= t) nc *= 2;
        unsigned char *v = realloc(w->printed, (size_t)nc);
        if (!v) {
            json_decref(j);
            return;
        }
        memset(v + w->cap, 0, (size_t)(nc - w->cap));
        w->printed = v;
        w->cap = nc;
    }
    if (w->printed[t]) {
        json_decref(j);
        return;
    }
    w->printed[t] = 1;
    w->finals++;
    char *params = json_dumps(json_object_get(j, "params"), JSON_COMPACT);
    if (!strcmp(st, "complete")) {
        double v = json_number_value(json_object_get(j, "value"));
        if (!w->have_best || (w->maximize ? v > w->best : v < w->best)) {
            w->best = v;
            w->best_trial = t;
            w->have_best = true;
        }
        printf("trial %d complete value %.9g %s | best %.9g (trial %d)\n", t, v,
               params ? params : "{}", w->best, w->best_trial);
    } else {
        const char *why = json_string_value(json_object_get(j, "reason"));
        printf("trial %d %s: %s %s | best ", t, st, why ? why : "", params ? params : "{}");
        if (w->have_best) printf("%.9g (trial %d)\n", w->best, w->best_trial);
        else printf("none yet\n");
    }
    fflush(stdout);
    free(params);
    json_decref(j);
}

int lt_cli_hpo_watch(const char *cmd, const lt_cli_kafka *k, const char *study, double timeout_s) {
    char tasks[256], results[256], trials[256];
    const char *prefix = lt_cli_kafka_prefix(k);
    int rc = topic_names(prefix, tasks, results, trials);
    lt_follower *f = NULL;
    lt_kafka_reader *rd = NULL;
    watcher w = {.name = study};
    if (!rc) rc = lt_follower_open(&f, &k->conn, trials, 15000);
    if (!rc) rc = lt_kafka_reader_open(&rd, &k->conn, trials, 15000);
    lt_record rec;
    while (!rc && (rc = lt_kafka_reader_next(rd, 3000, &rec)) == 1) {
        watch_record(&w, &rec);
        rc = 0;
    }
    if (rc == LT_ETIMEOUT) rc = 0;
    lt_kafka_reader_close(rd);
    double t0 = lt_now_s();
    while (!rc && !(w.done && w.finals >= w.budget) && !lt_cli_hpo_stopping()) {
        if (timeout_s > 0 && lt_now_s() - t0 > timeout_s) break;
        int pr = lt_follower_poll(f, 200, &rec);
        if (pr == 1) watch_record(&w, &rec);
        else if (pr < 0) rc = pr;
    }
    lt_follower_close(f);
    free(w.printed);
    if (rc) return lt_cli_fail(cmd, "--watch %s: %s", study, lt_errmsg());
    if (w.done) printf("study %s done: %d trials, best %.9g (trial %d)\n", study, w.finals,
                       w.best, w.best_trial);
    return 0;
}

/* ---- --embedded: the same study on the embedded broker ------------------------------ */

typedef struct {
    lt_worker_opts o;
    lt_worker_stats st;
    int rc;
    char err[256];
    _Atomic int *left; /* the workers still running, this one among them */
} embedded_worker;

static void *embedded_worker_main(void *arg) {
    embedded_worker *w = arg;
    w->rc = lt_worker_run(&w->o, &w->st);
    if (w->rc) snprintf(w->err, sizeof w->err, "%s", lt_errmsg());
    atomic_fetch_sub(w->left, 1);
    return NULL;
}

int lt_cli_hpo_run_embedded(lt_cli_hpo_run *r, const lt_cli_hpo_dist *d) {
    lt_devbroker *dev = NULL;
    if (lt_devbroker_open(&dev, 1, 0)) {
        fprintf(stderr, "looptune %s: the embedded broker: %s\n", r->cmd, lt_errmsg());
        return 1;
    }
    lt_cli_kafka k = *d->kafka;
    k.conn.brokers = lt_devbroker_bootstrap(dev);
    k.conn.in_process = true;
    lt_cli_hpo_dist dd = *d;
    dd.kafka = &k;
    const char *prefix = lt_cli_kafka_prefix(&k);
    dd.topics_made = true;
    int rc = 0;
    /* the topics before any worker subscribes, by the embedded broker itself
     * (no log compaction there: the trials topic keeps every record) */
    char names[5][320];
    static const lt_kafka_topic kt[] = {LT_TOPIC_TASKS, LT_TOPIC_RESULTS, LT_TOPIC_TRIALS,
                                        LT_TOPIC_TASKS_DEAD};
    for (int i = 0; i < 4; i++)
        snprintf(names[i], 300, "%s%s", prefix, lt_kafka_topic_suffix(kt[i]));
    snprintf(names[4], sizeof names[4], "%.300s.steps", names[2]);
    for (int i = 0; i < 5 && !rc; i++)
        rc = lt_devbroker_create_topic(dev, names[i], i == 2 || i == 4 ? 1 : 6);
    if (rc) {
        fprintf(stderr, "looptune %s: the embedded broker's topics: %s\n", r->cmd, lt_errmsg());
        lt_devbroker_close(dev);
        return 1;
    }
    static const char *const kinds[] = {"hpo"};
    _Atomic bool stop = false;
    int n = d->parallel;
    _Atomic int left = 0;
    dd.workers_left = &left;
    embedded_worker *w = calloc((size_t)n, sizeof *w);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    bool *started = calloc((size_t)n, sizeof *started);
    char (*ids)[64] = calloc((size_t)n, sizeof *ids);
    if (!w || !th || !started || !ids) rc = 1;
    for (int i = 0; !rc && i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "embedded-%d", i);
        /* at-least-once: the embedded broker's transactions are not relied
         * on; the driver applies one result per trial anyway */
        w[i].o = (lt_worker_opts){.conn = k.conn, .prefix = prefix, .threads = 1,
                                  .kinds = kinds, .n_kinds = 1, .at_least_once = true,
                                  .stop = &stop, .worker_id = ids[i], .batch_max = 1,
                                  .topics_made = true,
                                  /* this process's workers are the group: each takes
                                   * its share of the partitions, none waits on a join */
                                  .fixed_members = n, .fixed_index = i};
        w[i].left = &left;
        atomic_fetch_add(&left, 1);
        if (pthread_create(&th[i], NULL, embedded_worker_main, &w[i])) {
            atomic_fetch_sub(&left, 1);
            fprintf(stderr, "looptune %s: cannot start an embedded worker\n", r->cmd);
            rc = 1;
        } else started[i] = true;
    }
    if (!rc) rc = lt_cli_hpo_run_dist(r, &dd);
    atomic_store(&stop, true);
    for (int i = 0; w && th && started && i < n; i++) {
        if (!started[i]) continue;
        pthread_join(th[i], NULL);
        if (w[i].rc) {
            fprintf(stderr, "looptune %s: embedded worker %d: %s\n", r->cmd, i, w[i].err);
            rc = 1;
        }
    }
    free(w);
    free(th);
    free(started);
    free(ids);
    lt_devbroker_close(dev);
    return rc;
}
