/* looptune hpo's pieces shared between its files: cmd_hpo.c (the flags,
 * commands as trials, the output) and hpo_inproc.c (built-in objectives in
 * threads). */
#ifndef LT_HPO_CLI_H
#define LT_HPO_CLI_H

#include <stdatomic.h>
#include <stdbool.h>

#include "cli.h"
#include "looptune/hpo.h"

/* One study being run. */
typedef struct {
    const char *cmd, *name;    /* "hpo", and the study's name in progress lines */
    const lt_hpo_space *space;
    lt_hpo_study *st;
    bool quiet;                /* no per-trial lines */
    double t0;                 /* its start, lt_now_s */
    int budget, parallel;      /* for the progress line's ETA */
    double timed_s;            /* the seconds of the trials this run timed (dt > 0) */
    int timed;                 /* and how many */
} lt_cli_hpo_run;

/* The stderr line of finished trial `trial` (dt: its seconds, 0 when it
 * did not run), with an ETA: the mean of the trials timed so far times the
 * trials left, over the parallelism. */
void lt_cli_hpo_progress(lt_cli_hpo_run *r, int trial, double dt);
/* Whether SIGINT or SIGTERM asked the study to stop. */
bool lt_cli_hpo_stopping(void);

/* Runs budget trials of a built-in objective, up to parallel at once, each
 * in a thread of its own: obj (an analytic function), or mlp-digits on d
 * when obj is NULL (its trials' seeds from seed; each epoch's validation
 * accuracy reported, so the pruner applies; *test_acc: the trials' test
 * accuracies, malloc'd, budget entries, caller frees). The study is called
 * under one lock. Returns 0, or 1 after printing an error. */
int lt_cli_hpo_run_inproc(lt_cli_hpo_run *r, const lt_hpo_objective *obj, const lt_hpo_digits *d,
                          int budget, int parallel, uint64_t seed, double **test_acc);

/* Writes the study as SVG to path (hpo_plot.c): best so far against trials,
 * each parameter against the metric. Returns 0, or 1 after printing an
 * error. */
int lt_cli_hpo_plot(const lt_cli_hpo_run *r, const char *path, bool maximize);

/* A study over Kafka (hpo_dist.c): each trial a task of kind hpo for
 * `looptune worker`, the study kept in <prefix>trials (see docs/hpo.md). */
typedef struct {
    const lt_cli_kafka *kafka;
    bool resume;               /* the study must be on the topic already */
    const char *space_text;    /* the space's JSON, as the workers parse it */
    const char *objective;     /* a built-in objective, or NULL: */
    const char *data;          /* mlp-digits: its data set's absolute path, else NULL */
    char **argv;               /* the command */
    int argc;
    double timeout_s;          /* a trial's --trial-timeout (0: none) */
    const char *sampler;
    uint64_t seed;
    bool maximize;
    int budget, parallel;      /* trials in all; in flight at most */
    bool prunes;               /* a pruner: values reported live, decisions sent back */
    bool topics_made;          /* its topics exist already: none created */
    double *test_acc;          /* mlp-digits: [budget] the trials' test accuracies from the
                                  answers (NAN where none), or NULL */
    const _Atomic int *workers_left; /* --embedded: its workers still running (0: the study
                                        stops with an error); NULL: not known */
} lt_cli_hpo_dist;

/* Runs (or resumes) the study r over Kafka. Returns 0, or 1 after printing
 * an error. */
int lt_cli_hpo_run_dist(lt_cli_hpo_run *r, const lt_cli_hpo_dist *d);
/* The same on the embedded broker, opened for the study, with d->parallel
 * workers of kind hpo in threads of this process (at-least-once); d->kafka
 * gives the topic prefix alone. */
int lt_cli_hpo_run_embedded(lt_cli_hpo_run *r, const lt_cli_hpo_dist *d);
/* Follows study on <prefix>trials: a line per finished trial with the best
 * so far, until the study is done (or timeout_s, if > 0, passed). */
int lt_cli_hpo_watch(const char *cmd, const lt_cli_kafka *k, const char *study, double timeout_s);

#endif
