/* The run side of online tuning. A listener thread reads the control topic
 * (from its end at open, no consumer group) and queues the records; the
 * stepping thread, at token boundaries, validates what was queued against
 * the program and applies it: a new incumbent, or a trial that it runs by
 * itself (phases A B, B A, A B, ... of phase_tokens steps, each tagged in the
 * telemetry) and ends on the incumbent. Validation runs on the stepping
 * thread because the program's parameters are only ever touched there, never
 * while a step is in flight. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/optimizer_internal.h"

typedef struct {
    void *value;
    size_t len;
} queued;

struct lt_online {
    lt_online_opts o;
    char run_id[64];
    lt__node_table table;
    lt_params *initial; /* [table.n] parameters at open */
    lt_params *tuned;   /* [table.n] parameters at stop */
    bool stopped;

    /* listener -> stepping thread */
    lt_follower *reader;
    pthread_t listener;
    bool listening;
    _Atomic bool stop;
    _Atomic bool pending;
    pthread_mutex_t mu;
    queued *q;
    int nq, capq;

    /* stepping thread */
    bool in_trial;
    lt_control_cmd trial;
    lt_params *saved;     /* [table.n] incumbent params of the trial's nodes */
    uint32_t phase;       /* 0 .. 2 * trial_pairs - 1 */
    uint32_t phase_steps; /* steps done in the current phase */
    lt_online_stats st;   /* under mu for received/ignored (listener writes none) */
};

static FILE *logf_of(const lt_online *o) { return o->o.log ? o->o.log : stderr; }

/* ---- listener ------------------------------------------------------------------- */

static void enqueue(lt_online *o, const void *value, size_t len) {
    void *copy = malloc(len ? len : 1);
    if (!copy) return;
    if (len) memcpy(copy, value, len);
    pthread_mutex_lock(&o->mu);
    if (o->nq == o->capq) {
        int cap = o->capq ? 2 * o->capq : 16;
        queued *q = realloc(o->q, (size_t)cap * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&o->mu);
            free(copy);
            return;
        }
        o->q = q;
        o->capq = cap;
    }
    o->q[o->nq++] = (queued){copy, len};
    atomic_store_explicit(&o->pending, true, memory_order_release);
    pthread_mutex_unlock(&o->mu);
}

void lt_online_submit(lt_online *o, const void *value, size_t len) { enqueue(o, value, len); }

static void *listen_main(void *arg) {
    lt_online *o = arg;
    while (!atomic_load(&o->stop)) {
        lt_record rec;
        int got = lt_follower_poll(o->reader, 100, &rec);
        if (got == 1) enqueue(o, rec.value, rec.len);
    }
    return NULL;
}

/* ---- applying -------------------------------------------------------------------- */

static void set_nodes(lt_online *o, const lt_control_cmd *c, const lt_params *p,
                      const lt_params *per_node) {
    for (int i = 0; i < c->n_nodes; i++) {
        int n = c->nodes[i];
        const lt_params *v = per_node ? &per_node[n] : p;
        /* checked before (lt_config_check on this very call): cannot fail */
        int rc = lt_program_set_params(o->o.program, n, v);
        LT_ASSERT(rc == LT_OK);
        o->table.nodes[n].params = *v;
    }
}

static void retag(lt_online *o, const char *cand, bool on_candidate, uint32_t pair) {
    if (!o->o.tel) return;
    lt_tel_tag tag = {.candidate_id = cand, .on_candidate = on_candidate, .pair = pair};
    lt_tel_retag(o->o.tel, cand ? &tag : NULL);
}

/* Ends the trial in progress on the incumbent's parameters. */
static void end_trial(lt_online *o) {
    if (!o->in_trial) return;
    set_nodes(o, &o->trial, NULL, o->saved);
    retag(o, NULL, false, 0);
    o->in_trial = false;
    lt_control_cmd_free(&o->trial);
}

/* Whether phase k of a trial runs the candidate: pairs alternate their order
 * (A B, B A, ...) so a drift within a pair cancels over two pairs. */
static bool phase_on_candidate(uint32_t k) {
    uint32_t pair = k / 2, pos = k % 2;
    return (pair % 2 == 0) ? pos == 1 : pos == 0;
}

static void enter_phase(lt_online *o) {
    bool cand = phase_on_candidate(o->phase);
    if (cand) set_nodes(o, &o->trial, &o->trial.params, NULL);
    else set_nodes(o, &o->trial, NULL, o->saved);
    retag(o, o->trial.candidate_id, cand, o->phase / 2);
    o->phase_steps = 0;
}

static void apply_one(lt_online *o, const void *value, size_t len) {
    FILE *f = logf_of(o);
    o->st.received++;
    Looptune__Envelope *env = NULL;
    int rc = lt_envelope_decode(value, len, &env);
    if (rc) {
        o->st.rejected++;
        fprintf(f, "looptune run: control rejected: %s\n", lt_errmsg());
        return;
    }
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_CONTROL) {
        o->st.rejected++;
        fprintf(f, "looptune run: control rejected: a %s record on the control topic\n",
                lt_envelope_kind(env));
        lt_envelope_free(env);
        return;
    }
    lt_control_cmd cmd;
    rc = lt__control_check_table(&o->table, o->o.program, o->run_id, env->control, &cmd);
    lt_envelope_free(env);
    if (rc == LT_ENOTFOUND) {
        o->st.ignored++;
        return;
    }
    if (rc) {
        o->st.rejected++;
        fprintf(f, "looptune run: control rejected: %s\n", lt_errmsg());
        return;
    }
    char pbuf[160];
    lt_space sp;
    lt_space_by_name(cmd.kernel, &sp);
    lt_space_format(&sp, &cmd.params, pbuf, sizeof pbuf);
    end_trial(o); /* the optimizer's newest word wins */
    if (cmd.trial_pairs == 0) {
        bool same = true; /* e.g. the optimizer cutting a trial short */
        for (int i = 0; i < cmd.n_nodes; i++)
            same &= !memcmp(&o->table.nodes[cmd.nodes[i]].params, &cmd.params, sizeof cmd.params);
        set_nodes(o, &cmd, &cmd.params, NULL);
        retag(o, NULL, false, 0);
        if (same) {
            lt_control_cmd_free(&cmd);
            return;
        }
        o->st.applied++;
        fprintf(f, "looptune run: %s %s on %d node%s: %s%s%s\n", cmd.kernel,
                cmd.shape[0] ? cmd.shape : "(all shapes)", cmd.n_nodes, cmd.n_nodes == 1 ? "" : "s",
                pbuf, cmd.candidate_id[0] ? ", candidate " : "", cmd.candidate_id);
        lt_control_cmd_free(&cmd);
        return;
    }
    o->trial = cmd;
    for (int i = 0; i < cmd.n_nodes; i++)
        o->saved[cmd.nodes[i]] = o->table.nodes[cmd.nodes[i]].params;
    o->in_trial = true;
    o->phase = 0;
    o->st.trials++;
    enter_phase(o);
}

void lt_online_step(lt_online *o) {
    if (o->in_trial) {
        o->st.trial_tokens++;
        if (phase_on_candidate(o->phase)) o->st.candidate_tokens++;
        if (++o->phase_steps >= o->trial.phase_tokens) {
            if (++o->phase >= 2 * o->trial.trial_pairs) end_trial(o);
            else enter_phase(o);
        }
    }
    if (!atomic_load_explicit(&o->pending, memory_order_acquire)) return;
    pthread_mutex_lock(&o->mu);
    queued *q = o->q;
    int n = o->nq;
    o->q = NULL;
    o->nq = o->capq = 0;
    atomic_store_explicit(&o->pending, false, memory_order_relaxed);
    pthread_mutex_unlock(&o->mu);
    for (int i = 0; i < n; i++) {
        apply_one(o, q[i].value, q[i].len);
        free(q[i].value);
    }
    free(q);
}

/* ---- life -------------------------------------------------------------------------- */

int lt_online_open(lt_online **out, const lt_online_opts *opts) {
    *out = NULL;
    if (!opts->program || !opts->run_id) return lt_error(LT_EINVAL, "online tuning: no program");
    lt_online *o = calloc(1, sizeof *o);
    if (!o) return lt_error(LT_ENOMEM, "online tuning: out of memory");
    o->o = *opts;
    snprintf(o->run_id, sizeof o->run_id, "%s", opts->run_id);
    pthread_mutex_init(&o->mu, NULL);
    int rc = lt__node_table_init(&o->table, opts->program);
    if (!rc && (!(o->saved = calloc((size_t)(o->table.n ? o->table.n : 1), sizeof *o->saved)) ||
                !(o->initial = calloc((size_t)(o->table.n ? o->table.n : 1), sizeof *o->initial))))
        rc = lt_error(LT_ENOMEM, "online tuning: out of memory");
    for (int i = 0; !rc && i < o->table.n; i++) o->initial[i] = o->table.nodes[i].params;
    if (!rc && opts->topic) {
        rc = lt_follower_open(&o->reader, &opts->conn, opts->topic, 10000);
        if (rc) rc = lt_error(rc, "online tuning: %s", lt_errmsg());
        else if (pthread_create(&o->listener, NULL, listen_main, o) != 0)
            rc = lt_error(LT_ENOMEM, "online tuning: cannot start the control listener");
        else o->listening = true;
    }
    if (rc) {
        lt_online_close(o);
        return rc;
    }
    *out = o;
    return LT_OK;
}

void lt_online_stats_get(lt_online *o, lt_online_stats *out) { *out = o->st; }

void lt_online_attach_tel(lt_online *o, lt_tel *tel) { o->o.tel = tel; }

int lt_online_step_kind(const lt_online *o) {
    return !o->in_trial ? 0 : phase_on_candidate(o->phase) ? 2 : 1;
}

int lt_online_report(lt_online *o, FILE *f) {
    int lines = 0;
    for (int i = 0; i < o->table.n; i++) {
        const lt__node_entry *e = &o->table.nodes[i];
        bool first = true, changed = false;
        for (int j = 0; j < i; j++) /* one line per kernel and shape */
            if (!strcmp(o->table.nodes[j].kernel_name, e->kernel_name) &&
                !strcmp(o->table.nodes[j].shape, e->shape))
                first = false;
        for (int j = 0; j < LT_MAX_PARAMS; j++) changed |= o->initial[i].v[j] != e->params.v[j];
        if (!first || !changed) continue;
        lt_space sp;
        if (lt_space_by_name(e->kernel_name, &sp)) continue;
        fprintf(f, "  %s %s:", e->kernel_name, e->shape);
        for (int j = 0; j < sp.n_params; j++)
            if (o->initial[i].v[j] != e->params.v[j])
                fprintf(f, " %s %d -> %d", sp.params[j].name, o->initial[i].v[j], e->params.v[j]);
        fputc('\n', f);
        lines++;
    }
    return lines;
}

void lt_online_stop(lt_online *o) {
    if (o->stopped) return;
    o->stopped = true;
    atomic_store(&o->stop, true);
    if (o->listening) pthread_join(o->listener, NULL);
    o->listening = false;
    lt_follower_close(o->reader);
    o->reader = NULL;
    end_trial(o);
    o->tuned = calloc((size_t)(o->table.n ? o->table.n : 1), sizeof *o->tuned);
    for (int i = 0; o->tuned && i < o->table.n; i++) o->tuned[i] = o->table.nodes[i].params;
}

void lt_online_use_initial(lt_online *o, bool initial) {
    if (!o->stopped || !o->tuned) return;
    for (int i = 0; i < o->table.n; i++) {
        const lt_params *v = initial ? &o->initial[i] : &o->tuned[i];
        if (lt_program_set_params(o->o.program, i, v) == LT_OK) o->table.nodes[i].params = *v;
    }
    for (int i = 0; initial && i < o->table.n; i++) o->table.nodes[i].params = o->tuned[i];
}

void lt_online_close(lt_online *o) {
    if (!o) return;
    lt_online_stop(o);
    for (int i = 0; i < o->nq; i++) free(o->q[i].value);
    free(o->q);
    free(o->saved);
    free(o->initial);
    free(o->tuned);
    lt__node_table_free(&o->table);
    pthread_mutex_destroy(&o->mu);
    free(o);
}
