/* The run side of online tuning. A listener thread reads the control topic
 * (from its end at open, no consumer group) and queues the records; the
 * stepping thread, at token boundaries, validates what was queued against
 * the program and applies it: a new incumbent, or a trial that it runs by
 * itself (phases A B, B A, A B, ... of phase_tokens steps, each tagged in the
 * telemetry; of prefill steps when the trial is of a prefill key's value)
 * and ends on the incumbent. Every change is a value of the
 * runtime's tuning context (a kernel's shape key, the looped executor, a
 * regime's thread count), which the runtime brings to its programs at the
 * next eval. Validation and changes run on the stepping thread, between
 * steps, so no value changes while a step is in flight. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/optimizer.h"
#include "runtime/runtime_internal.h"

typedef struct {
    void *value;
    size_t len;
} queued;

struct lt_online {
    lt_online_opts o;
    char run_id[64];
    int n_keys;         /* the context's keys at open */
    lt_params *initial; /* [n_keys] values in force at open */
    lt_params *tuned;   /* [n_keys] values in force at stop */
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
    bool trial_prefill; /* its phases are prefill steps */
    lt_control_cmd trial;
    lt_params *saved;     /* [n_keys] incumbent values of the trial's keys */
    bool *had;            /* [n_keys] ... and whether they were set (else defaults) */
    uint32_t phase;       /* 0 .. 2 * trial_pairs - 1 */
    uint32_t phase_steps; /* steps done in the current phase */
    lt_online_stats st;   /* under mu for received/ignored (listener writes none) */
};

static FILE *logf_of(const lt_online *o) { return o->o.log ? o->o.log : stderr; }
static const char *who_of(const lt_online *o) { return o->o.who ? o->o.who : "looptune run"; }

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

static void key_at(const lt_online *o, int i, const char **name, const char **key) {
    lt_tuning_key(o->o.tuning, i, name, key);
}

/* The trial's (or control's) keys to p, or with p NULL back to the saved
 * incumbent values. Checked before (lt_control_check): cannot fail. */
static void set_keys(lt_online *o, const lt_control_cmd *c, const lt_params *p) {
    for (int i = 0; i < c->n_keys; i++) {
        const char *name, *key;
        const int k = c->keys[i];
        key_at(o, k, &name, &key);
        int rc = p ? lt_tuning_set(o->o.tuning, name, key, p)
             : o->had[k] ? lt_tuning_set(o->o.tuning, name, key, &o->saved[k])
                         : lt_tuning_unset(o->o.tuning, name, key);
        LT_ASSERT(rc == LT_OK);
    }
}

static void retag(lt_online *o, const char *cand, bool on_candidate, uint32_t pair) {
    if (!o->o.tel) return;
    /* the windows from here on report what the nodes hold: the new values */
    lt_tuning_sync(o->o.tuning);
    lt_tel_tag tag = {.candidate_id = cand, .on_candidate = on_candidate, .pair = pair};
    lt_tel_retag(o->o.tel, cand ? &tag : NULL);
}

/* Ends the trial in progress on the incumbent's parameters. */
static void end_trial(lt_online *o) {
    if (!o->in_trial) return;
    set_keys(o, &o->trial, NULL);
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
    set_keys(o, &o->trial, cand ? &o->trial.params : NULL);
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
        fprintf(f, "%s: control rejected: %s\n", who_of(o), lt_errmsg());
        return;
    }
    if (env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_CONTROL) {
        o->st.rejected++;
        fprintf(f, "%s: control rejected: a %s record on the control topic\n", who_of(o),
                lt_envelope_kind(env));
        lt_envelope_free(env);
        return;
    }
    lt_control_cmd cmd;
    rc = lt_control_check(o->o.tuning, o->run_id, env->control, &cmd);
    lt_envelope_free(env);
    if (rc == LT_ENOTFOUND) {
        o->st.ignored++;
        return;
    }
    if (rc) {
        o->st.rejected++;
        fprintf(f, "%s: control rejected: %s\n", who_of(o), lt_errmsg());
        return;
    }
    char pbuf[160];
    lt_space sp;
    lt_space_by_name(cmd.name, &sp);
    for (int i = 0; o->o.hold_bits && i < cmd.n_keys; i++) {
        const char *name, *key;
        lt_params now;
        key_at(o, cmd.keys[i], &name, &key);
        LT_ASSERT(lt_tuning_get(o->o.tuning, name, key, &now) == LT_OK);
        for (int j = 0; j < sp.n_params; j++)
            if (now.v[j] != cmd.params.v[j] &&
                lt_optimizer_param_changes_bits(name, sp.params[j].name)) {
                o->st.rejected++;
                fprintf(f, "%s: control rejected: %s %s: %s %d -> %d would change the bits "
                           "of the sequences decoded\n", who_of(o), name, key, sp.params[j].name,
                        now.v[j], cmd.params.v[j]);
                lt_control_cmd_free(&cmd);
                return;
            }
    }
    lt_space_format(&sp, &cmd.params, pbuf, sizeof pbuf);
    end_trial(o); /* the optimizer's newest word wins */
    if (cmd.trial_pairs == 0) {
        bool same = true; /* e.g. the optimizer cutting a trial short */
        for (int i = 0; i < cmd.n_keys; i++) {
            const char *name, *key;
            lt_params now;
            key_at(o, cmd.keys[i], &name, &key);
            LT_ASSERT(lt_tuning_get(o->o.tuning, name, key, &now) == LT_OK);
            same &= !memcmp(&now, &cmd.params, sizeof now);
        }
        set_keys(o, &cmd, &cmd.params);
        retag(o, NULL, false, 0);
        if (same) {
            lt_control_cmd_free(&cmd);
            return;
        }
        o->st.applied++;
        fprintf(f, "%s: %s %s: %s%s%s\n", who_of(o), cmd.name,
                cmd.shape[0] ? cmd.shape : "(all shapes)", pbuf,
                cmd.candidate_id[0] ? ", candidate " : "", cmd.candidate_id);
        lt_control_cmd_free(&cmd);
        return;
    }
    o->trial = cmd;
    o->trial_prefill = false;
    const char *prefill_key = lt_tuning_step_key(o->o.tuning, LT_REGIME_PREFILL);
    for (int i = 0; i < cmd.n_keys; i++) {
        const char *name, *key;
        const int k = cmd.keys[i];
        key_at(o, k, &name, &key);
        o->trial_prefill |= !strcmp(key, prefill_key);
        LT_ASSERT(lt_tuning_get(o->o.tuning, name, key, &o->saved[k]) == LT_OK);
        o->had[k] = lt_tuning_has(o->o.tuning, name, key);
    }
    o->in_trial = true;
    o->phase = 0;
    o->st.trials++;
    enter_phase(o);
}

/* A step of the trial's regime ended: the phase may be over. */
static void advance(lt_online *o) {
    if (++o->phase_steps >= o->trial.phase_tokens) {
        if (++o->phase >= 2 * o->trial.trial_pairs) end_trial(o);
        else enter_phase(o);
    }
}

void lt_online_prefill(lt_online *o) {
    if (!o->in_trial || !o->trial_prefill) return;
    o->st.trial_prefills++;
    advance(o);
}

void lt_online_step(lt_online *o) {
    if (o->in_trial && !o->trial_prefill) {
        o->st.trial_tokens++;
        if (phase_on_candidate(o->phase)) o->st.candidate_tokens++;
        advance(o);
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
    if (!opts->tuning || !opts->run_id) return lt_error(LT_EINVAL, "online tuning: no runtime");
    lt_online *o = calloc(1, sizeof *o);
    if (!o) return lt_error(LT_ENOMEM, "online tuning: out of memory");
    o->o = *opts;
    snprintf(o->run_id, sizeof o->run_id, "%s", opts->run_id);
    pthread_mutex_init(&o->mu, NULL);
    o->n_keys = lt_tuning_n_keys(opts->tuning);
    const size_t nk = (size_t)(o->n_keys ? o->n_keys : 1);
    int rc = LT_OK;
    if (!(o->saved = calloc(nk, sizeof *o->saved)) || !(o->had = calloc(nk, sizeof *o->had)) ||
        !(o->initial = calloc(nk, sizeof *o->initial)))
        rc = lt_error(LT_ENOMEM, "online tuning: out of memory");
    for (int i = 0; !rc && i < o->n_keys; i++) {
        const char *name, *key;
        key_at(o, i, &name, &key);
        LT_ASSERT(lt_tuning_get(opts->tuning, name, key, &o->initial[i]) == LT_OK);
    }
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
    /* a decode step in a prefill trial ran the incumbents */
    return !o->in_trial || o->trial_prefill ? 0 : phase_on_candidate(o->phase) ? 2 : 1;
}

int lt_online_report(lt_online *o, FILE *f) {
    int lines = 0;
    for (int i = 0; i < o->n_keys; i++) {
        const char *name, *key;
        key_at(o, i, &name, &key);
        lt_params now;
        lt_space sp;
        if (lt_tuning_get(o->o.tuning, name, key, &now) || lt_space_by_name(name, &sp)) continue;
        if (!memcmp(&now, &o->initial[i], sizeof now)) continue;
        fprintf(f, "  %s %s:", name, key);
        for (int j = 0; j < sp.n_params; j++)
            if (o->initial[i].v[j] != now.v[j])
                fprintf(f, " %s %d -> %d", sp.params[j].name, o->initial[i].v[j], now.v[j]);
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
    o->tuned = calloc((size_t)(o->n_keys ? o->n_keys : 1), sizeof *o->tuned);
    for (int i = 0; o->tuned && i < o->n_keys; i++) {
        const char *name, *key;
        key_at(o, i, &name, &key);
        LT_ASSERT(lt_tuning_get(o->o.tuning, name, key, &o->tuned[i]) == LT_OK);
    }
}

void lt_online_use_initial(lt_online *o, bool initial) {
    if (!o->stopped || !o->tuned) return;
    for (int i = 0; i < o->n_keys; i++) {
        const char *name, *key;
        key_at(o, i, &name, &key);
        /* both were in force on this runtime: they fit */
        LT_ASSERT(lt_tuning_set(o->o.tuning, name, key, initial ? &o->initial[i] : &o->tuned[i]) ==
                  LT_OK);
    }
}

void lt_online_close(lt_online *o) {
    if (!o) return;
    lt_online_stop(o);
    for (int i = 0; i < o->nq; i++) free(o->q[i].value);
    free(o->q);
    free(o->saved);
    free(o->had);
    free(o->initial);
    free(o->tuned);
    pthread_mutex_destroy(&o->mu);
    free(o);
}
