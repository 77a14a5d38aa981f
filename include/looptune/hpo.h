/* looptune hpo: hyperparameter search. Search spaces read from JSON (float,
 * int and categorical parameters, conditionals), their mapping to the unit
 * cube, samplers (random with a quasi-random start, TPE, Gaussian-process
 * Bayesian optimisation), pruners (ASHA, median rule), the study that asks
 * for and is told about trials asynchronously, and the built-in analytic
 * objectives (Branin, Hartmann-6). */
#ifndef LOOPTUNE_HPO_H
#define LOOPTUNE_HPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "looptune/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- search spaces (src/hpo/space.c) ------------------------------------------ */

typedef enum { LT_HPO_FLOAT, LT_HPO_INT, LT_HPO_CATEGORICAL } lt_hpo_kind;

#define LT_HPO_NAME_MAX 64 /* bytes of a parameter's name, NUL included */
#define LT_HPO_MAX_WHEN 4  /* conditions of one parameter's "when" */

/* One condition of "when": the parameter is active only if parameter
 * `parent` (an index into the space, an int or categorical parameter) is
 * active and takes one of the values listed. */
typedef struct {
    int parent;      /* index of the parent parameter */
    int n_values;    /* entries of values */
    double *values;  /* [n_values] int values, or choice indices of a categorical */
} lt_hpo_cond;

/* One parameter, a plain descriptor. Values of every kind are doubles: a
 * float's value, an int's value (integral), a categorical's choice index. */
typedef struct {
    char name[LT_HPO_NAME_MAX];
    lt_hpo_kind kind;
    double low, high; /* float and int: the closed range, low < high */
    bool log;         /* float and int: uniform in log space (low > 0) */
    int64_t step;     /* int: values low, low+step, ... <= high (1 by default) */
    int n_choices;    /* categorical: entries of choices, >= 1 */
    char **choices;   /* categorical: [n_choices] the choices, as text */
    bool *numeric;    /* categorical: [n_choices] whether the choice was a JSON number */
    int n_when;       /* conditions, all of which must hold, 0: always active */
    lt_hpo_cond when[LT_HPO_MAX_WHEN];
} lt_hpo_param;

typedef struct lt_hpo_space lt_hpo_space;

/* Parses a search space from JSON text: an object of parameters, each an
 * object with "type" ("float", "int" or "categorical"), "low"/"high" and
 * optionally "log" (float, int) and "step" (int), "choices" (categorical),
 * and optionally "when": {"PARENT": [VALUES...]}. origin names the text in
 * messages ("space.json"). On failure returns LT_EFORMAT with the message
 * "ORIGIN:ENTRY: what is wrong" (lt_errmsg). *out is freed with
 * lt_hpo_space_free. Parameters are kept in an order where every parent
 * comes before the parameters that depend on it. */
int lt_hpo_space_parse(const char *text, const char *origin, lt_hpo_space **out);
/* The same, from the file at path (LT_EIO if it cannot be read). */
int lt_hpo_space_load(const char *path, lt_hpo_space **out);
void lt_hpo_space_free(lt_hpo_space *s); /* NULL is a no-op */

int lt_hpo_space_size(const lt_hpo_space *s);
/* Parameter i (0 <= i < size); valid until the space is freed. */
const lt_hpo_param *lt_hpo_space_param(const lt_hpo_space *s, int i);
/* The index of the parameter called name, or -1. */
int lt_hpo_space_find(const lt_hpo_space *s, const char *name);

/* A configuration is double values[size]: each parameter's value (see
 * lt_hpo_param), NAN for a parameter that is not active. */

/* u[size] in the unit cube -> values: floats and ints uniform on their
 * range (in log space when log), ints snapped to their step, a categorical
 * choice floor(u * n_choices). Parameters whose conditions fail are NAN.
 * u entries outside [0, 1] are clamped. */
void lt_hpo_space_decode(const lt_hpo_space *s, const double *u, double *values);
/* The inverse: values -> u (a point inside an int's or categorical's cell);
 * an inactive parameter gives NAN. decode(encode(v)) == v for every valid
 * configuration v (floats to rounding, the rest exactly). */
void lt_hpo_space_encode(const lt_hpo_space *s, const double *values, double *u);
/* Whether values is a configuration of s: every active parameter in its
 * range (ints on their step, choices in range), every inactive one NAN. */
bool lt_hpo_space_valid(const lt_hpo_space *s, const double *values);
/* Whether two configurations are the same point (NANs equal). */
bool lt_hpo_config_equal(const lt_hpo_space *s, const double *a, const double *b);
/* Parameter i's value as text into buf: %.17g for a float, an integer for
 * an int, the choice for a categorical ("" when NAN). Returns the length
 * it needs (as snprintf). */
int lt_hpo_value_format(const lt_hpo_space *s, int i, double value, char *buf, size_t n);
/* The active parameters of values as a JSON object, e.g.
 * {"lr": 0.01, "layers": 3, "opt": "adam"}; malloc'd, caller frees; NULL
 * when out of memory. */
char *lt_hpo_config_json(const lt_hpo_space *s, const double *values);

/* ---- random numbers ------------------------------------------------------------ */

/* A small, seeded generator (xoshiro256**), one per sampler. */
typedef struct {
    uint64_t s[4];
} lt_hpo_rng;
void lt_hpo_rng_seed(lt_hpo_rng *r, uint64_t seed);
uint64_t lt_hpo_rng_next(lt_hpo_rng *r);
double lt_hpo_rng_uniform(lt_hpo_rng *r); /* [0, 1) */
double lt_hpo_rng_normal(lt_hpo_rng *r);  /* standard normal */

/* The radical inverse of index in base (Halton's sequence, base prime). */
double lt_hpo_halton(uint64_t index, int base);

/* ---- samplers and the study (src/hpo/sampler_*.c, study.c) --------------------- */

typedef enum { LT_HPO_SAMPLER_RANDOM, LT_HPO_SAMPLER_TPE, LT_HPO_SAMPLER_GP } lt_hpo_sampler_kind;
typedef enum { LT_HPO_PRUNER_NONE, LT_HPO_PRUNER_MEDIAN, LT_HPO_PRUNER_ASHA } lt_hpo_pruner_kind;
typedef enum {
    LT_HPO_RUNNING,  /* asked, not yet told */
    LT_HPO_COMPLETE, /* told a value */
    LT_HPO_PRUNED,   /* stopped by the pruner (its last intermediate value kept) */
    LT_HPO_FAILED,   /* crashed, timed out, reported no value */
} lt_hpo_state;

int lt_hpo_sampler_parse(const char *s, lt_hpo_sampler_kind *out); /* "random"|"tpe"|"gp" */
int lt_hpo_pruner_parse(const char *s, lt_hpo_pruner_kind *out);   /* "none"|"median"|"asha" */
const char *lt_hpo_sampler_name(lt_hpo_sampler_kind k);
const char *lt_hpo_pruner_name(lt_hpo_pruner_kind k);
const char *lt_hpo_state_name(lt_hpo_state s);

typedef struct {
    lt_hpo_sampler_kind sampler;
    lt_hpo_pruner_kind pruner;
    bool maximize;       /* false: minimise the objective */
    uint64_t seed;
    int n_startup;       /* quasi-random trials before TPE/GP model (0: the sampler's default) */
    /* pruners */
    int64_t min_resource;     /* ASHA: the first rung's step (default 1) */
    int eta;                  /* ASHA: the reduction factor (default 3) */
    int median_startup;       /* median rule: trials that must have reported a step first (5) */
    int64_t median_warmup;    /* median rule: steps before pruning starts (0) */
} lt_hpo_study_opts;

/* Defaults: random sampler, no pruner, minimise, seed 1, the pruners'
 * defaults above. */
void lt_hpo_study_opts_default(lt_hpo_study_opts *o);

typedef struct lt_hpo_study lt_hpo_study;

/* A study over space s (borrowed: it must outlive the study). Free with
 * lt_hpo_study_free (NULL is a no-op). */
int lt_hpo_study_init(lt_hpo_study **out, const lt_hpo_space *s, const lt_hpo_study_opts *o);
void lt_hpo_study_free(lt_hpo_study *st);

/* A new trial: its id (0, 1, ...) and configuration (values[size], written).
 * The trial is running until told. Proposals never repeat a running
 * trial's point while the space has others. */
int lt_hpo_study_ask(lt_hpo_study *st, int *trial, double *values);
/* A running trial of the given configuration (values[size], in the space),
 * proposed elsewhere: a study rebuilt from its record (a resumed study). */
int lt_hpo_study_add(lt_hpo_study *st, const double *values, int *trial);
/* An intermediate value of a running trial at step (steps increase).
 * *prune says whether the pruner stops it; the caller then tells
 * LT_HPO_PRUNED. */
int lt_hpo_study_report(lt_hpo_study *st, int trial, int64_t step, double value, bool *prune);
/* The end of a running trial: LT_HPO_COMPLETE with its value, or
 * LT_HPO_PRUNED (value ignored: the last intermediate one is kept) or
 * LT_HPO_FAILED (value ignored), with reason (copied; may be NULL). */
int lt_hpo_study_tell(lt_hpo_study *st, int trial, lt_hpo_state state, double value,
                      const char *reason);

typedef struct {
    int total, running, complete, pruned, failed;
} lt_hpo_counts;
lt_hpo_counts lt_hpo_study_counts(const lt_hpo_study *st);
/* The best complete trial (-1 if none yet); *value and values (size
 * entries, may be NULL) of it. */
int lt_hpo_study_best(const lt_hpo_study *st, double *value, double *values);
/* Trial t's state, value (the last intermediate one of a pruned trial,
 * NAN if none), configuration (borrowed, valid until the next ask) and
 * failure reason ("" if none). */
int lt_hpo_study_trial(const lt_hpo_study *st, int t, lt_hpo_state *state, double *value,
                       const double **values, const char **reason);
/* Seconds spent in ask so far, and the longest single ask. */
void lt_hpo_study_ask_time(const lt_hpo_study *st, double *total_s, double *max_s);

/* ---- external-command objectives (src/hpo/command.c) --------------------------- */

/* A trial's command: argv with every {NAME} replaced by parameter NAME's
 * value (lt_hpo_value_format; "" when the parameter is not active), "{{"
 * and "}}" by a literal "{" and "}" (a '{' with no '}' after it stands for
 * itself), run in a process group of its own with stdout read by the study
 * and stderr inherited, and LT_HPO_TRIAL (the trial id) and LT_HPO_PARAMS (the
 * configuration as JSON) in its environment. Its stdout speaks in lines:
 * "step=N value=V" an intermediate value, "value=V" the metric (the last
 * such line counts); other lines are ignored. */
typedef struct {
    int pid;          /* the process (and its group) */
    int fd;           /* its stdout, non-blocking; -1 once closed */
    char line[1024];  /* the line being read */
    size_t len;
    bool overlong;    /* the current line exceeded line[] (ignored) */
    bool has_value;   /* a "value=V" line was read */
    double value;     /* the last one's V */
    bool exited;      /* reaped */
    int wstatus;      /* its wait status, once exited */
} lt_hpo_proc;

/* Checks argv[0..argc) for placeholders: each {NAME} a parameter of s.
 * LT_EINVAL with a message naming the argument otherwise. */
int lt_hpo_command_check(char *const *argv, int argc, const lt_hpo_space *s);
/* Starts a trial's command (values: its configuration). On failure (no
 * fork, no pipe) returns a status and *p holds nothing. A program that
 * cannot be executed exits with status 127 after saying why on stderr. */
int lt_hpo_proc_start(lt_hpo_proc *p, char *const *argv, int argc, const lt_hpo_space *s,
                      const double *values, int trial);
/* Reads what the process wrote, calling on_step for each intermediate
 * value (a non-zero return stops the reading: the caller prunes). Returns
 * 1 once stdout reached its end (fd closed), 0 otherwise. */
int lt_hpo_proc_read(lt_hpo_proc *p, int (*on_step)(void *ctx, int64_t step, double value),
                     void *ctx);
/* SIGKILL to the process group. */
void lt_hpo_proc_kill(lt_hpo_proc *p);
/* Whether the process has exited (without blocking); also kills what is
 * left of its group then. */
bool lt_hpo_proc_reap(lt_hpo_proc *p);
/* Closes stdout if still open; the process must have been reaped. */
void lt_hpo_proc_close(lt_hpo_proc *p);

/* ---- the mlp-digits objective (src/hpo/digits.c, src/hpo/mlp.c) ----------------- */

/* The 8x8 digits (scikit-learn's digits.csv.gz: 64 pixel counts 0..16 and
 * the label, per line), split once and for all into train, validation and
 * test sets (60/20/20 % of a fixed shuffle). */
#define LT_HPO_DIGITS_PIXELS 64
#define LT_HPO_DIGITS_CLASSES 10
typedef struct {
    int n;
    float *x;   /* [n][64] pixels scaled to [0, 1] */
    uint8_t *y; /* [n] digits */
} lt_hpo_digits_set;
typedef struct {
    lt_hpo_digits_set train, val, test;
} lt_hpo_digits;

/* Reads path (gzip or plain CSV). LT_EIO / LT_EFORMAT with the file and
 * line at fault. Free with lt_hpo_digits_free (a zeroed d is a no-op). */
int lt_hpo_digits_load(const char *path, lt_hpo_digits *d);
void lt_hpo_digits_free(lt_hpo_digits *d);

typedef enum { LT_MLP_SGD, LT_MLP_MOMENTUM, LT_MLP_ADAM } lt_mlp_opt;
typedef enum { LT_MLP_RELU, LT_MLP_TANH } lt_mlp_act;

/* A multilayer perceptron's training: layers hidden layers of hidden
 * units, softmax cross-entropy, minibatches of batch, inverted dropout on
 * hidden units, momentum 0.9, Adam's betas 0.9 and 0.999. */
typedef struct {
    int layers, hidden; /* 1..8, 1..4096 */
    double lr, dropout; /* > 0; [0, 1) */
    lt_mlp_opt opt;
    lt_mlp_act act;
    int epochs, batch;  /* >= 1 */
    uint64_t seed;      /* initial weights, shuffles, dropout */
} lt_mlp_config;

/* The config of a space's values: parameters lr, hidden, layers, dropout,
 * opt (sgd, momentum, adam) and activation (relu, tanh) when the space has
 * them, epochs and batch too; the rest keep the defaults (1 layer of 64
 * relu units, lr 1e-3, no dropout, adam, 20 epochs of batches of 32). */
void lt_mlp_config_default(lt_mlp_config *c);
int lt_mlp_config_from(const lt_hpo_space *s, const double *values, lt_mlp_config *c);
/* The search space of the mlp-digits objective (JSON). */
extern const char *const lt_hpo_mlp_digits_space;

/* Trains on d's train set; after each epoch on_epoch(ctx, epoch, validation
 * accuracy) (may be NULL; a non-zero return stops the training there).
 * *val_acc and *test_acc: the accuracies of the last epoch trained. */
int lt_mlp_train(const lt_hpo_digits *d, const lt_mlp_config *c,
                 int (*on_epoch)(void *ctx, int64_t epoch, double val_acc), void *ctx,
                 double *val_acc, double *test_acc);

/* ---- built-in objectives (src/hpo/objectives.c) -------------------------------- */

typedef struct {
    const char *name;       /* "branin", "hartmann6" */
    const char *space_json; /* its search space */
    double optimum;         /* the known global minimum */
    double (*eval)(const lt_hpo_space *s, const double *values);
} lt_hpo_objective;

/* The built-in objective called name, or NULL. */
const lt_hpo_objective *lt_hpo_objective_find(const char *name);
/* The names, comma-separated, for messages. */
const char *lt_hpo_objective_names(void);

#ifdef __cplusplus
}
#endif

#endif
