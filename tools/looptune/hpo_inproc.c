/* looptune hpo's built-in objectives run in this process: every trial in a
 * thread of its own, up to --parallel at once, a new one proposed the
 * moment one ends. The study is not thread-safe: every call to it (ask,
 * report from a training's epochs, tell, the progress line) holds `mu`;
 * a worker signals `cv` when its trial is over. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hpo_cli.h"

typedef struct {
    /* shared, under mu */
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    lt_hpo_study *st;
    bool done;
    /* the trial, set before the thread starts */
    const lt_hpo_space *space;
    const lt_hpo_objective *obj; /* NULL: mlp-digits on digits */
    const lt_hpo_digits *digits;
    int trial;
    uint64_t seed;
    double *values; /* [size] */
    double t0;
    /* its result, read after the join */
    int rc;
    char err[200];
    bool pruned;
    double value, test_acc;
    pthread_t th;
} job;

/* An epoch's validation accuracy: reported under the lock; non-zero stops
 * the training (pruned, or the study stopping). */
static int on_epoch(void *arg, int64_t epoch, double acc) {
    job *j = arg;
    bool prune = false;
    pthread_mutex_lock(j->mu);
    if (lt_hpo_study_report(j->st, j->trial, epoch, acc, &prune) == LT_OK && prune)
        j->pruned = true;
    pthread_mutex_unlock(j->mu);
    return j->pruned || lt_cli_hpo_stopping();
}

static void *work(void *arg) {
    job *j = arg;
    j->value = NAN;
    j->test_acc = NAN;
    if (j->obj) {
        j->value = j->obj->eval(j->space, j->values);
        if (!isfinite(j->value)) {
            j->rc = LT_ERANGE;
            snprintf(j->err, sizeof j->err, "the objective is not finite here");
        }
    } else {
        lt_mlp_config c;
        lt_mlp_config_default(&c);
        c.seed = j->seed * 1000003u + (uint64_t)j->trial;
        j->rc = lt_mlp_config_from(j->space, j->values, &c);
        if (!j->rc) j->rc = lt_mlp_train(j->digits, &c, on_epoch, j, &j->value, &j->test_acc);
        if (j->rc) snprintf(j->err, sizeof j->err, "%s", lt_errmsg()); /* this thread's message */
    }
    pthread_mutex_lock(j->mu);
    j->done = true;
    pthread_cond_signal(j->cv);
    pthread_mutex_unlock(j->mu);
    return NULL;
}

int lt_cli_hpo_run_inproc(lt_cli_hpo_run *r, const lt_hpo_objective *obj, const lt_hpo_digits *d,
                          int budget, int parallel, uint64_t seed, double **test_acc) {
    int size = lt_hpo_space_size(r->space);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    job *jobs = calloc((size_t)parallel, sizeof *jobs);
    bool *busy = calloc((size_t)parallel, sizeof *busy);
    double *tacc = malloc((size_t)budget * sizeof *tacc);
    int rc = 0, asked = 0, running = 0;
    if (!jobs || !busy || !tacc) {
        free(jobs), free(busy), free(tacc);
        return lt_cli_fail(r->cmd, "out of memory");
    }
    for (int i = 0; i < budget; i++) tacc[i] = NAN;
    pthread_mutex_lock(&mu);
    while (asked < budget || running > 0) {
        /* fill the free slots, unless the study is stopping */
        for (int i = 0; i < parallel && asked < budget && !lt_cli_hpo_stopping() && !rc; i++) {
            if (busy[i]) continue;
            job *j = &jobs[i];
            *j = (job){.mu = &mu, .cv = &cv, .st = r->st, .space = r->space, .obj = obj,
                       .digits = d, .seed = seed, .t0 = lt_now_s()};
            j->values = malloc((size_t)size * sizeof *j->values);
            int arc = j->values ? lt_hpo_study_ask(r->st, &j->trial, j->values) : LT_ENOMEM;
            if (arc) {
                free(j->values);
                rc = lt_cli_fail_status(r->cmd, arc, "proposal");
                break;
            }
            asked++;
            if (pthread_create(&j->th, NULL, work, j) != 0) {
                lt_hpo_study_tell(r->st, j->trial, LT_HPO_FAILED, 0, "no thread");
                lt_cli_hpo_progress(r, j->trial, 0);
                free(j->values);
                continue;
            }
            busy[i] = true;
            running++;
        }
        if (running == 0) break; /* nothing left to wait for (stopping, or an error) */
        /* wait for a trial to end, then tell the study of every one that did */
        bool any = false;
        while (!any) {
            for (int i = 0; i < parallel; i++) any |= busy[i] && jobs[i].done;
            if (!any) pthread_cond_wait(&cv, &mu);
        }
        for (int i = 0; i < parallel; i++) {
            job *j = &jobs[i];
            if (!busy[i] || !j->done) continue;
            pthread_mutex_unlock(&mu);
            pthread_join(j->th, NULL);
            pthread_mutex_lock(&mu);
            if (j->rc) lt_hpo_study_tell(r->st, j->trial, LT_HPO_FAILED, 0, j->err);
            else if (j->pruned) lt_hpo_study_tell(r->st, j->trial, LT_HPO_PRUNED, 0, NULL);
            else if (lt_cli_hpo_stopping())
                lt_hpo_study_tell(r->st, j->trial, LT_HPO_FAILED, 0, "interrupted");
            else lt_hpo_study_tell(r->st, j->trial, LT_HPO_COMPLETE, j->value, NULL);
            if (j->trial < budget) tacc[j->trial] = j->test_acc;
            lt_cli_hpo_progress(r, j->trial, lt_now_s() - j->t0);
            free(j->values);
            busy[i] = false;
            running--;
        }
    }
    pthread_mutex_unlock(&mu);
    free(jobs);
    free(busy);
    if (test_acc) *test_acc = tacc;
    else free(tacc);
    return rc;
}
