/* looptune hpo: a hyperparameter search of a user's command (every trial a
 * process, up to --parallel at once, a new one proposed the moment a slot
 * frees) or of a built-in objective (an analytic function, or an MLP
 * trained on the digits: hpo_inproc.c runs them in threads). Progress on stderr, one line per
 * finished trial; the best trial as JSON on stdout and in --best-out. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "hpo_cli.h"
#include "looptune/hpo.h"

static const char *const hpo_help =
    "usage: looptune hpo --space SPACE.json [options] -- CMD ARGS...\n"
    "       looptune hpo --objective NAME [--space SPACE.json] [options]\n"
    "\n"
    "Searches the hyperparameters of SPACE.json (docs/hpo.md) for the best value of an\n"
    "objective. CMD runs once per trial with every {NAME} in its arguments replaced by\n"
    "the trial's value of parameter NAME; it prints 'step=N value=V' lines for\n"
    "intermediate values (which the pruner reads) and a line 'value=V' with its metric.\n"
    "A non-zero exit, a signal, a timeout or no metric fails the trial; the study goes\n"
    "on. A progress line per finished trial goes to stderr, the best trial as JSON\n"
    "{\"value\": V, \"params\": {...}} to stdout.\n"
    "\n"
    "  --space FILE           the search space (JSON)\n"
    "  --objective NAME       a built-in objective instead of a command: branin,\n"
    "                         hartmann6 or mlp-digits (an MLP trained on the 8x8 digits,\n"
    "                         validation accuracy maximised); the space is implied when\n"
    "                         --space is omitted\n"
    "  --data FILE            mlp-digits' data set (default: the source tree's\n"
    "                         tests/data/digits.csv.gz)\n"
    "  --sampler S            gp (default), tpe or random\n"
    "  --budget N             trials in all (default 50)\n"
    "  --parallel P           trials running at once (default 1): workers on the embedded\n"
    "                         broker, or with --no-broker processes of the command or\n"
    "                         threads of a built-in objective\n"
    "  --pruner P             none (default), asha or median\n"
    "  --min-resource N       ASHA's first rung, in steps (default 1; rungs N * eta^k)\n"
    "  --eta N                ASHA's reduction factor (default 3)\n"
    "  --direction D          minimize (default; mlp-digits: maximize) or maximize\n"
    "  --study NAME           the study's name in messages (default: the space file's)\n"
    "  --seed S               the sampler's seed (default 1)\n"
    "  --trial-timeout SEC    kill a trial's processes after SEC seconds (default: none)\n"
    "  --best-out FILE        also write the best trial's JSON to FILE\n"
    "  --plot FILE.svg        write the study as SVG: the best so far against trials and\n"
    "                         the metric against each parameter\n"
    "  --brokers B            run the trials on `looptune worker`s over Kafka (tasks of\n"
    "                         kind hpo), at most --parallel in flight, the study kept in\n"
    "                         the compacted topic <prefix>trials under --study: running\n"
    "                         the same --study again continues it\n"
    "  --topic-prefix P       the topics' prefix (default looptune.)\n"
    "  --embedded             the default without --brokers: the trials as with --brokers,\n"
    "                         on an embedded broker with --parallel workers in this process\n"
    "  --no-broker            no broker at all: the trials straight in this process\n"
    "                         (threads of a built-in objective, processes of a command);\n"
    "                         the same trials, without the broker's seconds of start-up\n"
    "  --resume               with --brokers: continue --study, which must be on the topic\n"
    "  --watch STUDY          with --brokers: follow STUDY, a line per finished trial\n"
    "  --watch-timeout SEC    stop watching after SEC seconds (default: when it is done)\n"
    "  -q, --quiet            no per-trial lines, the summary alone\n"
    "  -h, --help             this help\n";

/* Set by SIGINT/SIGTERM: the study stops, its processes are killed. */
static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }
bool lt_cli_hpo_stopping(void) { return stop_signal != 0; }

typedef struct {
    lt_hpo_proc proc;
    int trial;
    double start_s;
    bool pruned, timed_out;
} slot;

typedef struct {
    lt_hpo_study *st;
    int trial;
    const char *cmd;
    bool pruned; /* the pruner stopped the trial */
} step_ctx;

/* An intermediate value of a running trial: the pruner's verdict. */
static int on_step(void *arg, int64_t step, double value) {
    step_ctx *c = arg;
    bool prune = false;
    if (lt_hpo_study_report(c->st, c->trial, step, value, &prune) != LT_OK) {
        /* a step that does not increase, a value not finite: ignored, said */
        fprintf(stderr, "looptune %s: trial %d: %s (line ignored)\n", c->cmd, c->trial,
                lt_errmsg());
        return 0;
    }
    c->pruned |= prune;
    return prune;
}

void lt_cli_hpo_progress(lt_cli_hpo_run *r, int trial, double dt) {
    if (dt > 0) {
        r->timed_s += dt;
        r->timed++;
    }
    if (r->quiet) return;
    lt_hpo_state state;
    double value, best;
    const char *why;
    lt_hpo_study_trial(r->st, trial, &state, &value, NULL, &why);
    lt_hpo_counts c = lt_hpo_study_counts(r->st);
    char what[256];
    if (state == LT_HPO_COMPLETE) snprintf(what, sizeof what, "value %.6g", value);
    else if (state == LT_HPO_PRUNED && !isnan(value))
        snprintf(what, sizeof what, "pruned at %.6g", value);
    else if (state == LT_HPO_PRUNED) snprintf(what, sizeof what, "pruned");
    else snprintf(what, sizeof what, "failed: %s", why);
    int b = lt_hpo_study_best(r->st, &best, NULL);
    char bs[64] = "none yet";
    if (b >= 0) snprintf(bs, sizeof bs, "%.6g (trial %d)", best, b);
    /* the trials not finished yet, the running ones counted whole */
    int left = r->budget - c.complete - c.pruned - c.failed;
    if (left < 0) left = 0;
    char eta[48] = "unknown";
    if (r->timed > 0 && r->parallel > 0)
        snprintf(eta, sizeof eta, "%.1f s", r->timed_s / r->timed * left / r->parallel);
    fprintf(stderr,
            "%s: trial %d %s in %.2f s | %d done, %d running, %d pruned, %d failed | best %s"
            " | eta %s\n",
            r->name, trial, what, dt, c.complete, c.running, c.pruned, c.failed, bs, eta);
}

/* Tells the study how a finished process ended. */
static void finish(lt_cli_hpo_run *r, slot *s) {
    int ws = s->proc.wstatus;
    char why[160];
    lt_hpo_state state = LT_HPO_FAILED;
    double value = 0;
    if (s->pruned) {
        state = LT_HPO_PRUNED;
        why[0] = 0;
    } else if (s->timed_out) {
        snprintf(why, sizeof why, "timed out (--trial-timeout)");
    } else if (WIFSIGNALED(ws)) {
        snprintf(why, sizeof why, "killed by signal %d (%s)", WTERMSIG(ws),
                 strsignal(WTERMSIG(ws)));
    } else if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0) {
        snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(ws));
    } else if (!s->proc.has_value) {
        snprintf(why, sizeof why, "no metric (no 'value=V' line on stdout)");
    } else {
        state = LT_HPO_COMPLETE;
        value = s->proc.value;
        why[0] = 0;
    }
    lt_hpo_study_tell(r->st, s->trial, state, value, why);
    lt_hpo_proc_close(&s->proc);
    lt_cli_hpo_progress(r, s->trial, lt_now_s() - s->start_s);
}

/* The study of a command: up to parallel processes at once. Returns 0, or
 * 1 after printing an error. */
static int run_command(lt_cli_hpo_run *r, char **argv, int argc, int budget, int parallel,
                       double timeout_s) {
    int size = lt_hpo_space_size(r->space);
    slot *slots = calloc((size_t)parallel, sizeof *slots);
    bool *busy = calloc((size_t)parallel, sizeof *busy);
    double *values = malloc((size_t)size * sizeof *values);
    struct pollfd *pfd = malloc((size_t)parallel * sizeof *pfd);
    int rc = 0, asked = 0, running = 0;
    if (!slots || !busy || !values || !pfd) {
        rc = lt_cli_fail(r->cmd, "out of memory");
        goto out;
    }
    while ((asked < budget || running > 0) && !stop_signal) {
        /* fill the free slots */
        for (int i = 0; i < parallel && asked < budget && !stop_signal; i++) {
            if (busy[i]) continue;
            int trial;
            int arc = lt_hpo_study_ask(r->st, &trial, values);
            if (arc) {
                rc = lt_cli_fail_status(r->cmd, arc, "proposal");
                goto out;
            }
            asked++;
            slots[i] = (slot){.trial = trial, .start_s = lt_now_s()};
            if (lt_hpo_proc_start(&slots[i].proc, argv, argc, r->space, values, trial)) {
                lt_hpo_study_tell(r->st, trial, LT_HPO_FAILED, 0, lt_errmsg());
                lt_cli_hpo_progress(r, trial, 0);
                continue;
            }
            busy[i] = true;
            running++;
        }
        /* wait for output, an exit or a deadline (at most 50 ms) */
        int n = 0;
        for (int i = 0; i < parallel; i++)
            if (busy[i] && slots[i].proc.fd >= 0) {
                pfd[n] = (struct pollfd){.fd = slots[i].proc.fd, .events = POLLIN};
                n++;
            }
        poll(pfd, (nfds_t)n, 50);
        double now = lt_now_s();
        for (int i = 0; i < parallel; i++) {
            if (!busy[i]) continue;
            slot *s = &slots[i];
            step_ctx ctx = {r->st, s->trial, r->cmd, false};
            if (!s->pruned && !s->timed_out && s->proc.fd >= 0) {
                lt_hpo_proc_read(&s->proc, on_step, &ctx);
                if (ctx.pruned) { /* the pruner stops it: kill, tell when reaped */
                    s->pruned = true;
                    lt_hpo_proc_kill(&s->proc);
                }
            }
            if (!s->pruned && !s->timed_out && timeout_s > 0 && now - s->start_s > timeout_s) {
                s->timed_out = true;
                lt_hpo_proc_kill(&s->proc);
            }
            if (lt_hpo_proc_reap(&s->proc)) {
                /* what it wrote before it exited (its metric line, often) */
                for (int k = 0; k < 4096 && !s->pruned && !s->timed_out && s->proc.fd >= 0; k++)
                    lt_hpo_proc_read(&s->proc, on_step, &ctx);
                finish(r, s);
                busy[i] = false;
                running--;
            }
        }
    }
out:
    for (int i = 0; slots && busy && i < parallel; i++)
        if (busy[i]) {
            lt_hpo_proc_kill(&slots[i].proc);
            while (!lt_hpo_proc_reap(&slots[i].proc)) poll(NULL, 0, 5);
            lt_hpo_study_tell(r->st, slots[i].trial, LT_HPO_FAILED, 0, "interrupted");
            lt_hpo_proc_close(&slots[i].proc);
        }
    free(slots);
    free(busy);
    free(values);
    free(pfd);
    return rc;
}

/* The best trial's JSON: {"value": V, "params": {...}} (malloc'd). */
static char *best_json(const lt_cli_hpo_run *r, int best, double value) {
    const double *values;
    lt_hpo_study_trial(r->st, best, NULL, NULL, &values, NULL);
    char *params = lt_hpo_config_json(r->space, values);
    if (!params) return NULL;
    char num[40];
    for (int prec = 15; prec <= 17; prec++) { /* the shortest that reads back */
        snprintf(num, sizeof num, "%.*g", prec, value);
        if (strtod(num, NULL) == value) break;
    }
    size_t n = strlen(params) + strlen(num) + 32;
    char *out = malloc(n);
    if (out) snprintf(out, n, "{\"value\": %s, \"params\": %s}", num, params);
    free(params);
    return out;
}

/* A study's name from its space file: the base name without ".json". */
static void name_of(const char *path, char *buf, size_t n) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(buf, n, "%s", b);
    size_t len = strlen(buf);
    if (len > 5 && !strcmp(buf + len - 5, ".json")) buf[len - 5] = 0;
}

int lt_cmd_hpo(int argc, char **argv) {
    const char *cmd = "hpo";
    const char *space_path = NULL, *objective = NULL, *study = NULL, *best_out = NULL;
#ifdef LT_DEFAULT_DIGITS
    const char *data_path = LT_DEFAULT_DIGITS;
#else
    const char *data_path = "tests/data/digits.csv.gz";
#endif
    bool direction_given = false;
    int64_t budget = 50, parallel = 1, seed = 1, min_resource = 1, eta = 3;
    float timeout = 0;
    bool quiet = false;
    lt_hpo_study_opts o;
    lt_hpo_study_opts_default(&o);
    o.sampler = LT_HPO_SAMPLER_GP;
    enum { O_SPACE = 256, O_OBJ, O_SAMPLER, O_BUDGET, O_PAR, O_PRUNER, O_STUDY, O_DIR, O_SEED,
           O_BEST, O_TIMEOUT, O_MINRES, O_ETA, O_DATA, O_RESUME, O_WATCH, O_WATCH_TIMEOUT, O_PLOT,
           O_EMBEDDED, O_NO_BROKER };
    static const struct option opts[] = {
        {"space", required_argument, 0, O_SPACE},     {"objective", required_argument, 0, O_OBJ},
        {"sampler", required_argument, 0, O_SAMPLER}, {"budget", required_argument, 0, O_BUDGET},
        {"parallel", required_argument, 0, O_PAR},    {"pruner", required_argument, 0, O_PRUNER},
        {"study", required_argument, 0, O_STUDY},     {"direction", required_argument, 0, O_DIR},
        {"seed", required_argument, 0, O_SEED},       {"best-out", required_argument, 0, O_BEST},
        {"trial-timeout", required_argument, 0, O_TIMEOUT},
        {"min-resource", required_argument, 0, O_MINRES},
        {"eta", required_argument, 0, O_ETA},         {"quiet", no_argument, 0, 'q'},
        {"data", required_argument, 0, O_DATA},
        {"plot", required_argument, 0, O_PLOT},
        {"embedded", no_argument, 0, O_EMBEDDED},
        {"no-broker", no_argument, 0, O_NO_BROKER},
        {"resume", no_argument, 0, O_RESUME},         {"watch", required_argument, 0, O_WATCH},
        {"watch-timeout", required_argument, 0, O_WATCH_TIMEOUT},
        LT_CLI_KAFKA_OPTIONS,
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
    lt_cli_kafka kafka;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    bool resume = false, embedded = false, no_broker = false;
    const char *watch = NULL, *plot = NULL;
    float watch_timeout = 0;
    opterr = 0;
    optind = 1;
    int c;
    /* '+': options stop at the first non-option, so CMD's own flags stay CMD's */
    while ((c = getopt_long(argc, argv, "+:qh" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int kr = lt_cli_kafka_option(cmd, c, optarg, &kafka);
        if (kr == LT_CLI_OPT_ERROR) {
            lt_cli_kafka_free(&kafka);
            return 1;
        }
        if (kr == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case O_RESUME: resume = true; break;
        case O_EMBEDDED: embedded = true; break;
        case O_NO_BROKER: no_broker = true; break;
        case O_PLOT: plot = optarg; break;
        case O_WATCH: watch = optarg; break;
        case O_WATCH_TIMEOUT:
            if (!lt_cli_parse_f32(optarg, 1e-3f, 1e7f, &watch_timeout))
                return lt_cli_fail(cmd, "bad --watch-timeout '%s': expected seconds > 0", optarg);
            break;
        case O_SPACE: space_path = optarg; break;
        case O_OBJ: objective = optarg; break;
        case O_SAMPLER:
            if (lt_hpo_sampler_parse(optarg, &o.sampler))
                return lt_cli_fail(cmd, "bad --sampler: %s", lt_errmsg());
            break;
        case O_PRUNER:
            if (lt_hpo_pruner_parse(optarg, &o.pruner))
                return lt_cli_fail(cmd, "bad --pruner: %s", lt_errmsg());
            break;
        case O_BUDGET:
            if (!lt_cli_parse_i64(optarg, 1, 1000000, &budget))
                return lt_cli_fail(cmd, "bad --budget '%s': expected a number of trials >= 1",
                                   optarg);
            break;
        case O_PAR:
            if (!lt_cli_parse_i64(optarg, 1, 256, &parallel))
                return lt_cli_fail(cmd, "bad --parallel '%s': expected 1..256", optarg);
            break;
        case O_STUDY: study = optarg; break;
        case O_DATA: data_path = optarg; break;
        case O_DIR:
            direction_given = true;
            if (!strcmp(optarg, "minimize")) o.maximize = false;
            else if (!strcmp(optarg, "maximize")) o.maximize = true;
            else
                return lt_cli_fail(cmd, "bad --direction '%s': expected minimize or maximize",
                                   optarg);
            break;
        case O_SEED:
            if (!lt_cli_parse_i64(optarg, 0, INT64_MAX, &seed))
                return lt_cli_fail(cmd, "bad --seed '%s': expected a number >= 0", optarg);
            break;
        case O_BEST: best_out = optarg; break;
        case O_TIMEOUT:
            if (!lt_cli_parse_f32(optarg, 1e-3f, 1e7f, &timeout))
                return lt_cli_fail(cmd, "bad --trial-timeout '%s': expected seconds > 0", optarg);
            break;
        case O_MINRES:
            if (!lt_cli_parse_i64(optarg, 1, INT64_MAX / 4, &min_resource))
                return lt_cli_fail(cmd, "bad --min-resource '%s': expected a step >= 1", optarg);
            break;
        case O_ETA:
            if (!lt_cli_parse_i64(optarg, 2, 1000, &eta))
                return lt_cli_fail(cmd, "bad --eta '%s': expected 2..1000", optarg);
            break;
        case 'q': quiet = true; break;
        case 'h': fputs(hpo_help, stdout); return 0;
        default: return lt_cli_bad_option(cmd, c, argv[optind - 1]);
        }
    }
    char **child = argv + optind;
    int n_child = argc - optind;
    if (embedded && lt_cli_kafka_given(&kafka))
        return lt_cli_fail(cmd, "--embedded is instead of --brokers: give one of them");
    if (no_broker && (embedded || lt_cli_kafka_given(&kafka)))
        return lt_cli_fail(cmd, "--no-broker is instead of --brokers and --embedded: give one "
                                "of them");
    if (embedded && (resume || watch))
        return lt_cli_fail(cmd, "--embedded: its broker lives as long as the study; no --resume "
                                "or --watch");
    /* without --brokers the study runs on an embedded broker unless told not to;
     * --resume and --watch need a broker that outlives the study, said below */
    if (!no_broker && !lt_cli_kafka_given(&kafka) && !resume && !watch) embedded = true;
    const bool dist = lt_cli_kafka_given(&kafka) || embedded;
    if ((resume || watch) && !lt_cli_kafka_has_brokers(&kafka))
        return lt_cli_fail(cmd, "--resume and --watch need --brokers");
    if (dist && lt_cli_kafka_check(cmd, &kafka)) return 1;
    if (watch) {
        if (space_path || objective || n_child > 0 || resume)
            return lt_cli_fail(cmd, "--watch STUDY takes no study of its own to run");
        int wrc = lt_cli_hpo_watch(cmd, &kafka, watch, watch_timeout);
        lt_cli_kafka_free(&kafka);
        return wrc;
    }
    if (resume && !study) return lt_cli_fail(cmd, "--resume needs --study NAME");
    if (optind > 0 && optind <= argc && strcmp(argv[optind - 1], "--") != 0 && n_child > 0)
        return lt_cli_fail(cmd,
                           "unexpected argument '%s': put the command after -- (see looptune "
                           "hpo --help)",
                           child[0]);
    const lt_hpo_objective *obj = NULL;
    bool mlp = objective && !strcmp(objective, "mlp-digits");
    if (objective && n_child > 0)
        return lt_cli_fail(cmd, "give --objective or a command after --, not both");
    if (!objective && n_child == 0)
        return lt_cli_fail(cmd, "no objective: give a command after -- or --objective NAME (see "
                                "looptune hpo --help)");
    if (objective && !mlp && !(obj = lt_hpo_objective_find(objective)))
        return lt_cli_fail(cmd, "unknown --objective '%s' (%s, mlp-digits)", objective,
                           lt_hpo_objective_names());
    if (!space_path && !obj && !mlp) return lt_cli_fail(cmd, "no search space: give --space FILE");
    if (mlp && !direction_given) o.maximize = true;
    if (obj && o.pruner != LT_HPO_PRUNER_NONE)
        return lt_cli_fail(cmd, "--pruner needs intermediate values, which %s does not report",
                           obj->name);
    if (dist && !embedded && o.pruner != LT_HPO_PRUNER_NONE && !kafka.conn.brokers)
        return lt_cli_fail(cmd, "--pruner over Kafka needs --brokers (the workers' address)");
    if (dist && !embedded && !lt_cli_kafka_has_brokers(&kafka))
        return lt_cli_fail(cmd, "no --brokers");
    o.seed = (uint64_t)seed;
    o.min_resource = min_resource;
    o.eta = (int)eta;

    lt_hpo_space *space = NULL;
    int st_rc = space_path ? lt_hpo_space_load(space_path, &space)
                : mlp      ? lt_hpo_space_parse(lt_hpo_mlp_digits_space, "mlp-digits", &space)
                           : lt_hpo_space_parse(obj->space_json, obj->name, &space);
    if (st_rc) return lt_cli_fail(cmd, "%s", lt_errmsg());
    int rc = 0;
    lt_hpo_study *st = NULL;
    lt_hpo_digits digits = {0};
    double *test_acc = NULL;
    if (mlp) { /* the data set, and a space whose parameters the MLP takes */
        if (lt_hpo_digits_load(data_path, &digits)) {
            rc = lt_cli_fail(cmd, "--data: %s", lt_errmsg());
        } else {
            double *v = malloc((size_t)lt_hpo_space_size(space) * sizeof *v);
            double *u = malloc((size_t)lt_hpo_space_size(space) * sizeof *u);
            LT_ASSERT(v && u);
            lt_hpo_rng g;
            lt_hpo_rng_seed(&g, 1);
            lt_mlp_config mc;
            for (int k = 0; k < 64 && !rc; k++) { /* every choice of every categorical, likely */
                for (int i = 0; i < lt_hpo_space_size(space); i++) u[i] = lt_hpo_rng_uniform(&g);
                lt_hpo_space_decode(space, u, v);
                lt_mlp_config_default(&mc);
                if (lt_mlp_config_from(space, v, &mc))
                    rc = lt_cli_fail(cmd, "%s: %s", space_path ? space_path : "mlp-digits",
                                     lt_errmsg());
            }
            free(v);
            free(u);
        }
    } else if (obj) { /* the space must hold the objective's parameters */
        lt_hpo_space *implied = NULL;
        LT_ASSERT(lt_hpo_space_parse(obj->space_json, obj->name, &implied) == LT_OK);
        for (int i = 0; i < lt_hpo_space_size(implied) && !rc; i++) {
            const char *pn = lt_hpo_space_param(implied, i)->name;
            int j = lt_hpo_space_find(space, pn);
            if (j < 0 || lt_hpo_space_param(space, j)->kind == LT_HPO_CATEGORICAL ||
                lt_hpo_space_param(space, j)->n_when)
                rc = lt_cli_fail(cmd,
                                 "%s: objective %s needs parameter '%s' (a float or int, "
                                 "always active)",
                                 space_path, obj->name, pn);
        }
        lt_hpo_space_free(implied);
    } else if (lt_hpo_command_check(child, n_child, space)) {
        rc = lt_cli_fail(cmd, "%s", lt_errmsg());
    }
    if (!rc && lt_hpo_study_init(&st, space, &o)) rc = lt_cli_fail(cmd, "%s", lt_errmsg());
    if (rc) {
        lt_hpo_digits_free(&digits);
        lt_hpo_space_free(space);
        return rc;
    }
    char name[128];
    if (study) snprintf(name, sizeof name, "%s", study);
    else if (space_path) name_of(space_path, name, sizeof name);
    else snprintf(name, sizeof name, "%s", mlp ? "mlp-digits" : obj->name);
    lt_cli_hpo_run r = {.cmd = cmd, .name = name, .space = space, .st = st, .quiet = quiet,
                   .t0 = lt_now_s(), .budget = (int)budget, .parallel = (int)parallel};
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    if (!quiet)
        fprintf(stderr, "%s: %s sampler, %s pruner, %s, budget %lld, %lld in parallel\n", name,
                lt_hpo_sampler_name(o.sampler), lt_hpo_pruner_name(o.pruner),
                o.maximize ? "maximize" : "minimize", (long long)budget,
                (long long)parallel);
    char *space_text = NULL, data_abs[4096] = "";
    if (dist && mlp && !realpath(data_path, data_abs))
        rc = lt_cli_fail(cmd, "--data %s: %s", data_path, strerror(errno));
    if (dist && space_path) {
        FILE *f = fopen(space_path, "rb");
        long n = -1;
        if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
        if (f && n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (space_text = malloc((size_t)n + 1))) {
            if (fread(space_text, 1, (size_t)n, f) != (size_t)n) {
                free(space_text);
                space_text = NULL;
            } else {
                space_text[n] = 0;
            }
        }
        if (f) fclose(f);
        if (!space_text) rc = lt_cli_fail(cmd, "cannot read %s: %s", space_path, strerror(errno));
    }
    if (rc) {
        /* the space or the data set could not be read: nothing runs */
    } else if (dist) {
        if (mlp && (test_acc = malloc((size_t)budget * sizeof *test_acc)))
            for (int64_t i = 0; i < budget; i++) test_acc[i] = NAN;
        lt_cli_hpo_dist d = {.test_acc = test_acc, .kafka = &kafka, .resume = resume,
                             .space_text = space_text ? space_text
                                           : mlp      ? lt_hpo_mlp_digits_space
                                                      : obj->space_json,
                             .objective = obj ? obj->name : mlp ? "mlp-digits" : NULL,
                             .data = mlp ? data_abs : NULL, .argv = child, .argc = n_child,
                             .timeout_s = timeout, .sampler = lt_hpo_sampler_name(o.sampler),
                             .seed = o.seed, .maximize = o.maximize, .budget = (int)budget,
                             .parallel = (int)parallel,
                             .prunes = o.pruner != LT_HPO_PRUNER_NONE};
        rc = embedded ? lt_cli_hpo_run_embedded(&r, &d) : lt_cli_hpo_run_dist(&r, &d);
    } else if (mlp || obj)
        rc = lt_cli_hpo_run_inproc(&r, obj, &digits, (int)budget, (int)parallel, (uint64_t)seed,
                                   mlp ? &test_acc : NULL);
    else rc = run_command(&r, child, n_child, (int)budget, (int)parallel, timeout);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);

    lt_hpo_counts n = lt_hpo_study_counts(st);
    double best_value, ask_total, ask_max;
    int best = lt_hpo_study_best(st, &best_value, NULL);
    lt_hpo_study_ask_time(st, &ask_total, &ask_max);
    fprintf(stderr,
            "%s: %d trials (%d complete, %d pruned, %d failed) in %.1f s; proposals %.3f s "
            "(longest %.3f s)\n",
            name, n.total, n.complete, n.pruned, n.failed, lt_now_s() - r.t0, ask_total, ask_max);
    if (plot && n.total > 0 && lt_cli_hpo_plot(&r, plot, o.maximize)) rc = 1;
    if (!rc && stop_signal) rc = lt_cli_fail(cmd, "interrupted by signal %d", (int)stop_signal);
    if (!rc && best < 0) rc = lt_cli_fail(cmd, "no trial completed (see the failures above)");
    if (!rc) {
        char *j = best_json(&r, best, best_value);
        if (!j) rc = lt_cli_fail(cmd, "out of memory");
        if (j) {
            if (test_acc && best < budget && isfinite(test_acc[best]))
                fprintf(stderr, "%s: best value %.9g at trial %d (its test accuracy %.4f)\n", name,
                        best_value, best, test_acc[best]);
            else
                fprintf(stderr, "%s: best value %.9g at trial %d\n", name, best_value, best);
            printf("%s\n", j);
            fflush(stdout);
            if (best_out) {
                FILE *f = fopen(best_out, "w");
                bool ok = f && fprintf(f, "%s\n", j) >= 0;
                if (f && fclose(f) != 0) ok = false;
                if (!ok)
                    rc = lt_cli_fail(cmd, "cannot write --best-out %s: %s", best_out,
                                     strerror(errno));
            }
            free(j);
        }
    }
    free(test_acc);
    free(space_text);
    lt_cli_kafka_free(&kafka);
    lt_hpo_digits_free(&digits);
    lt_hpo_study_free(st);
    lt_hpo_space_free(space);
    return rc;
}
