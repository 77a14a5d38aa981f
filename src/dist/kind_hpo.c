/* The hpo kind: one trial of a study that `looptune hpo --brokers` drives,
 * run on this worker. Its Task.spec is JSON:
 *   {"study": S, "trial": T, "space": "<the space's JSON text>",
 *    "values": [v, ...],              the trial's configuration
 *    "objective": "branin" | "hartmann6"   or   "command": [argv...],
 *    "timeout": seconds (0: none)}
 * or "objective": "mlp-digits" with "data" (the digits file, at that path
 * on the worker) and "seed" (the study's: the trial trains from seed
 * seed * 1000003 + trial, as in one process); its steps are the epochs'
 * validation accuracies, and the answer has its "test" accuracy too.
 * and its answer (Result.data) JSON too:
 *   {"state": "complete" | "failed", "value": V, "steps": [[step, value], ...],
 *    "reason": "..."}
 * A trial that fails (its command exits non-zero, is killed, prints no
 * metric, times out) is an OK result of state failed: the task is not tried
 * again, so a command is never run twice for one answer. The result's
 * FAILED status is kept for tasks that cannot run at all (a spec that does
 * not parse). */
#include "looptune/dist.h"
#include "looptune/hpo.h"

#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* A trial's intermediate values, and with a study that prunes, the steps
 * topic: each value reported there as it comes (key STUDY/T/report), the
 * driver's decision read back (key STUDY/T/prune). */
typedef struct {
    json_t *steps;
    lt_producer *rep;
    lt_follower *ctl;
    char key[300]; /* STUDY/T */
    bool pruned;
} steps_ctx;

/* Whether the driver said to prune the trial (reads what has come). */
static bool prune_asked(steps_ctx *c) {
    if (!c->ctl || c->pruned) return c->pruned;
    char want[320];
    snprintf(want, sizeof want, "%s/prune", c->key);
    lt_record rec;
    while (lt_follower_poll(c->ctl, 0, &rec) == 1)
        if (rec.key && rec.key_len == strlen(want) && !memcmp(rec.key, want, rec.key_len))
            c->pruned = true;
    return c->pruned;
}

static int on_step(void *arg, int64_t step, double value) {
    steps_ctx *c = arg;
    if (!isfinite(value)) return 0;
    json_array_append_new(c->steps, json_pack("[If]", (json_int_t)step, value));
    if (c->rep) {
        char key[320], text[96];
        snprintf(key, sizeof key, "%s/report", c->key);
        snprintf(text, sizeof text, "{\"step\": %lld, \"value\": %.17g}", (long long)step, value);
        lt_producer_send(c->rep, key, strlen(key), text, strlen(text));
        lt_producer_flush(c->rep, 5000);
    }
    return prune_asked(c);
}

/* The last digits file loaded, kept for the next trial. */
static struct {
    pthread_mutex_t mu;
    char path[1024];
    lt_hpo_digits d;
} g_digits = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int on_epoch(void *arg, int64_t epoch, double acc) { return on_step(arg, epoch, acc); }

/* Trains the trial's MLP; fills ok, value (validation accuracy), test and why. */
static void run_mlp(const char *data, uint64_t seed, int trial, const lt_hpo_space *s,
                    const double *values, steps_ctx *ctx, bool *ok, double *value, double *test,
                    char *why, size_t n_why) {
    *ok = false;
    lt_mlp_config c;
    lt_mlp_config_default(&c);
    c.seed = seed * 1000003u + (uint64_t)trial;
    if (lt_mlp_config_from(s, values, &c)) {
        snprintf(why, n_why, "%s", lt_errmsg());
        return;
    }
    pthread_mutex_lock(&g_digits.mu);
    int rc = LT_OK;
    if (strcmp(g_digits.path, data)) {
        lt_hpo_digits_free(&g_digits.d);
        memset(&g_digits.d, 0, sizeof g_digits.d);
        g_digits.path[0] = 0;
        rc = lt_hpo_digits_load(data, &g_digits.d);
        if (!rc) snprintf(g_digits.path, sizeof g_digits.path, "%s", data);
    }
    if (!rc) rc = lt_mlp_train(&g_digits.d, &c, on_epoch, ctx, value, test);
    pthread_mutex_unlock(&g_digits.mu);
    if (rc) snprintf(why, n_why, "%s", lt_errmsg());
    else *ok = !ctx->pruned;
}

/* Runs argv for the trial; fills *state, *value and why. */
static void run_command(char **argv, int argc, const lt_hpo_space *s, const double *values,
                        int trial, double timeout_s, steps_ctx *ctx, bool *ok, double *value,
                        char *why, size_t n_why) {
    lt_hpo_proc p;
    *ok = false;
    if (lt_hpo_proc_start(&p, argv, argc, s, values, trial)) {
        snprintf(why, n_why, "%s", lt_errmsg());
        return;
    }
    double t0 = lt_now_s();
    bool timed_out = false, killed = false;
    for (;;) {
        if (p.fd >= 0 && !killed) {
            struct pollfd pfd = {.fd = p.fd, .events = POLLIN};
            poll(&pfd, 1, 50);
            lt_hpo_proc_read(&p, on_step, ctx);
        } else {
            poll(NULL, 0, 20);
        }
        if (!killed && prune_asked(ctx)) { /* the driver's pruner stops it */
            killed = true;
            lt_hpo_proc_kill(&p);
        }
        if (!timed_out && timeout_s > 0 && lt_now_s() - t0 > timeout_s) {
            timed_out = true;
            lt_hpo_proc_kill(&p);
        }
        if (lt_hpo_proc_reap(&p)) break;
    }
    for (int k = 0; k < 4096 && p.fd >= 0 && !killed; k++) lt_hpo_proc_read(&p, on_step, ctx);
    int ws = p.wstatus;
    if (ctx->pruned) why[0] = 0;
    else if (timed_out) snprintf(why, n_why, "timed out (--trial-timeout)");
    else if (WIFSIGNALED(ws))
        snprintf(why, n_why, "killed by signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
    else if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0)
        snprintf(why, n_why, "exit status %d", WEXITSTATUS(ws));
    else if (!p.has_value) snprintf(why, n_why, "no metric (no 'value=V' line on stdout)");
    else {
        *ok = true;
        *value = p.value;
    }
    lt_hpo_proc_close(&p);
}

int lt_dist_hpo_run(const lt_dist_task_in *in, uint8_t **data, size_t *len) {
    *data = NULL;
    *len = 0;
    const Looptune__Task *t = in->task;
    json_error_t err;
    json_t *spec = json_loadb((const char *)t->spec.data, t->spec.len, 0, &err);
    if (!spec) return lt_error(LT_EFORMAT, "hpo task: its spec is no JSON: %s", err.text);
    const char *space_text = json_string_value(json_object_get(spec, "space"));
    json_t *jv = json_object_get(spec, "values");
    const char *objective = json_string_value(json_object_get(spec, "objective"));
    json_t *cmd = json_object_get(spec, "command");
    double timeout_s = json_number_value(json_object_get(spec, "timeout"));
    int trial = (int)json_integer_value(json_object_get(spec, "trial"));
    lt_hpo_space *s = NULL;
    double *values = NULL;
    char **argv = NULL;
    int rc = LT_OK;
    if (!space_text || !json_is_array(jv) || (!objective && !json_is_array(cmd)))
        rc = lt_error(LT_EFORMAT, "hpo task: space, values and an objective or command expected");
    if (!rc && (rc = lt_hpo_space_parse(space_text, "the task's space", &s)))
        rc = lt_error(rc, "hpo task: %s", lt_errmsg());
    const int size = s ? lt_hpo_space_size(s) : 0;
    if (!rc && (int)json_array_size(jv) != size)
        rc = lt_error(LT_EFORMAT, "hpo task: %zu values for a space of %d parameters",
                      json_array_size(jv), size);
    if (!rc && !(values = malloc((size_t)(size ? size : 1) * sizeof *values)))
        rc = lt_error(LT_ENOMEM, "hpo task: out of memory");
    for (int i = 0; !rc && i < size; i++) values[i] = json_number_value(json_array_get(jv, i));
    if (!rc && !lt_hpo_space_valid(s, values))
        rc = lt_error(LT_EFORMAT, "hpo task: the configuration is not in the space");
    const bool mlp = objective && !strcmp(objective, "mlp-digits");
    const char *digits = json_string_value(json_object_get(spec, "data"));
    const lt_hpo_objective *obj = objective && !mlp ? lt_hpo_objective_find(objective) : NULL;
    if (!rc && mlp && !digits) rc = lt_error(LT_EFORMAT, "hpo task: mlp-digits without its data");
    if (!rc && objective && !mlp && !obj)
        rc = lt_error(LT_EUNSUPPORTED, "hpo task: objective '%s' is not one this worker runs (%s)",
                      objective, lt_hpo_objective_names());
    int argc = cmd ? (int)json_array_size(cmd) : 0;
    if (!rc && !obj && !mlp) {
        argv = calloc((size_t)argc + 1, sizeof *argv);
        if (!argv || argc < 1) rc = lt_error(LT_EFORMAT, "hpo task: an empty command");
        for (int i = 0; !rc && i < argc; i++)
            if (!(argv[i] = (char *)json_string_value(json_array_get(cmd, i))))
                rc = lt_error(LT_EFORMAT, "hpo task: command argument %d is no string", i);
        if (!rc && (rc = lt_hpo_command_check(argv, argc, s)))
            rc = lt_error(rc, "hpo task: %s", lt_errmsg());
    }
    steps_ctx ctx = {.steps = json_array()};
    const char *brokers = json_string_value(json_object_get(spec, "brokers"));
    const char *steps_topic = json_string_value(json_object_get(spec, "steps_topic"));
    snprintf(ctx.key, sizeof ctx.key, "%s/%d", t->job_id ? t->job_id : "", trial);
    if (!rc && brokers && steps_topic) { /* a study that prunes: opened before the run */
        lt_kafka_conn conn = {.brokers = brokers};
        lt_producer_opts po = {.conn = conn, .topic = steps_topic, .linger_ms = -1};
        rc = lt_producer_open(&ctx.rep, &po);
        if (!rc) rc = lt_follower_open(&ctx.ctl, &conn, steps_topic, 15000);
        if (rc) rc = lt_error(rc, "hpo task: the steps topic %s: %s", steps_topic, lt_errmsg());
    }
    if (!rc) {
        json_t *steps = ctx.steps;
        bool ok = false;
        double value = 0, test = NAN;
        char why[256] = "";
        double t0 = lt_now_s();
        if (mlp) {
            run_mlp(digits, (uint64_t)json_integer_value(json_object_get(spec, "seed")), trial, s,
                    values, &ctx, &ok, &value, &test, why, sizeof why);
        } else if (obj) {
            value = obj->eval(s, values);
            ok = isfinite(value);
            if (!ok) snprintf(why, sizeof why, "the objective is not finite");
        } else {
            run_command(argv, argc, s, values, trial, timeout_s, &ctx, &ok, &value, why,
                        sizeof why);
        }
        const char *state = ok ? "complete" : ctx.pruned ? "pruned" : "failed";
        json_incref(steps); /* ctx's, freed below */
        json_t *ans = json_pack("{s:s, s:f, s:o, s:s}", "state", state,
                                "value", ok ? value : 0.0, "steps", steps, "reason", why);
        if (ans && isfinite(test)) json_object_set_new(ans, "test", json_real(test));
        char *text = ans ? json_dumps(ans, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
        json_decref(ans);
        if (!text) {
            rc = lt_error(LT_ENOMEM, "hpo task: out of memory");
        } else {
            *data = (uint8_t *)text;
            *len = strlen(text);
            lt_log(LT_LOG_INFO, "hpo %s/%d: %s %.6g%s%s in %.2f s", t->job_id, trial, state,
                   value, why[0] ? ": " : "", why, lt_now_s() - t0);
        }
    }
    lt_follower_close(ctx.ctl);
    lt_producer_close(ctx.rep);
    json_decref(ctx.steps);
    free(argv);
    free(values);
    lt_hpo_space_free(s);
    json_decref(spec);
    return rc;
}
