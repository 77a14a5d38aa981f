/* The optimizer service's plumbing: the telemetry consumer group, the
 * producers of controls and configs, and the restart path. State that must
 * survive a restart lives in Kafka: consumed positions in the group's
 * committed offsets, what was learned in the compacted configs topic, and
 * the runs still going in their start records on the telemetry topic (read
 * again from the beginning at open). The decisions (runs.c, windows.c,
 * trials.c) reach Kafka, or the user's hooks without it, only through the
 * emitters installed here. */
#include <stdlib.h>
#include <string.h>

#include "optimizer/service_internal.h"

#define COMMIT_EVERY_NS 2000000000ull

/* The Kafka emitters (user: the optimizer). A record that cannot be queued
 * is logged and dropped: the run goes on with what it has. */
static void kafka_control(void *user, const Looptune__Control *c) {
    lt_optimizer *o = user;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CONTROL;
    env.control = (Looptune__Control *)c;
    if (lt_producer_send_envelope(o->control, c->run_id, &env) != LT_OK)
        fprintf(o->log, "optimizer: control for run %.8s not queued: %s\n", c->run_id,
                lt_errmsg());
    lt_producer_flush(o->control, 0); /* hand it to the broker now, without waiting */
}

static void kafka_config(void *user, const lt_config_entry *e) {
    lt_optimizer *o = user;
    if (lt_store_topic_publish(o->configs, e) != LT_OK)
        fprintf(o->log, "optimizer: config %s|%s not queued: %s\n", e->kernel, e->shape,
                lt_errmsg());
}

static void kafka_trial(void *user, const Looptune__Trial *t) {
    lt_optimizer *o = user;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_TRIAL;
    env.trial = (Looptune__Trial *)t;
    if (lt_producer_send_envelope(o->trials, NULL, &env) != LT_OK)
        fprintf(o->log, "optimizer: observation for %s not queued: %s\n", t->study_id,
                lt_errmsg());
}

/* What every optimizer measured so far: the trials log, read to its end. */
static int load_trials(lt_optimizer *o) {
    lt_kafka_reader *rd;
    int rc = lt_kafka_reader_open(&rd, &o->o.conn, o->t_trials, 10000);
    if (rc == LT_ENOTFOUND) return LT_OK;
    if (rc) return rc;
    int n = 0, bad = 0;
    lt_record rec;
    while ((rc = lt_kafka_reader_next(rd, 10000, &rec)) == 1) {
        Looptune__Envelope *env = NULL;
        if (!rec.value || lt_envelope_decode(rec.value, rec.len, &env)) {
            bad++;
            continue;
        }
        if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_TRIAL) {
            int r = lt_optimizer_restore_trial(o, env->trial);
            if (r == LT_OK) n++;
            else if (r != LT_ENOTFOUND) {
                bad++;
                fprintf(o->log, "optimizer: %s[%d]@%lld skipped: %s\n", o->t_trials,
                        (int)rec.partition, (long long)rec.offset, lt_errmsg());
            }
        }
        lt_envelope_free(env);
    }
    lt_kafka_reader_close(rd);
    fprintf(o->log, "optimizer: %d observations from %s%s\n", n, o->t_trials,
            bad ? " (some records skipped)" : "");
    return rc < 0 ? rc : LT_OK;
}

void lt_optimizer_handle(lt_optimizer *o, const void *value, size_t len) {
    o->st.records++;
    Looptune__Envelope *env = NULL;
    if (lt_envelope_decode(value, len, &env)) {
        o->st.bad_records++;
        fprintf(o->log, "optimizer: skipped a record that is not a looptune envelope: %s\n",
                lt_errmsg());
        return;
    }
    lt__opt_handle_env(o, env, false);
    lt_envelope_free(env);
}

/* What earlier optimizers learned: the configs topic, read to its end. */
static int load_configs(lt_optimizer *o) {
    lt_store_backend be;
    int rc = lt_store_backend_topic(&be, &o->o.conn, o->t_configs, 10000);
    lt_store *s = NULL;
    int skipped = 0;
    if (!rc) rc = lt_store_open(&s, &be, &skipped);
    if (rc) return rc;
    int n = 0;
    for (int i = 0; i < lt_store_count(s); i++)
        if (lt__opt_rec_from_entry(o, lt_store_at(s, i)) >= 0) n++;
    lt_store_close(s);
    fprintf(o->log, "optimizer: %d configurations from %s (%lld finished)%s\n", n, o->t_configs,
            (long long)o->st.units_converged, skipped ? " (some records skipped)" : "");
    return LT_OK;
}

/* The starts (and ends) of runs, from the oldest telemetry on: a restarted
 * optimizer resumes from its committed offsets, after the starts of runs
 * that are still going. */
static int rescan_runs(lt_optimizer *o) {
    lt_kafka_reader *rd;
    int rc = lt_kafka_reader_open(&rd, &o->o.conn, o->t_telemetry, 10000);
    if (rc == LT_ENOTFOUND) return LT_OK; /* no telemetry yet */
    if (rc) return rc;
    lt_record rec;
    while ((rc = lt_kafka_reader_next(rd, 10000, &rec)) == 1) {
        Looptune__Envelope *env = NULL;
        if (!rec.value || lt_envelope_decode(rec.value, rec.len, &env)) continue;
        lt__opt_handle_env(o, env, true);
        lt_envelope_free(env);
    }
    lt_kafka_reader_close(rd);
    return rc < 0 ? rc : LT_OK;
}

int lt_optimizer_open(lt_optimizer **out, const lt_optimizer_opts *opts) {
    *out = NULL;
    lt_optimizer *o = calloc(1, sizeof *o);
    if (!o) return lt_error(LT_ENOMEM, "optimizer: out of memory");
    o->o = *opts;
    lt_optimizer_opts *d = &o->o;
    if (!(d->explore_share > 0)) d->explore_share = 0.25;
    if (!(d->min_throughput > 0)) d->min_throughput = 0.95;
    if (!(d->stop_gain > 0)) d->stop_gain = 0.02;
    if (!(d->margin > 0)) d->margin = 0.01;
    if (d->trial_pairs <= 0) d->trial_pairs = 6;
    if (d->trial_pairs > LT__MAX_PAIRS) d->trial_pairs = LT__MAX_PAIRS;
    if (d->phase_tokens < 0) d->phase_tokens = 0; /* 0: from the run's step time */
    if (d->max_trials <= 0) d->max_trials = 40;
    if (d->patience <= 0) d->patience = 12;
    if (!(d->drift > 0)) d->drift = 0.15;
    if (d->stale_ms <= 0) d->stale_ms = 10000;
    o->log = d->log ? d->log : stderr;
    snprintf(o->prefix, sizeof o->prefix, "%s", d->prefix ? d->prefix : LT_KAFKA_TOPIC_PREFIX);
    snprintf(o->group, sizeof o->group, "%s", d->group ? d->group : "looptune-optimizer");
    snprintf(o->t_telemetry, sizeof o->t_telemetry, "%s%s", o->prefix,
             lt_kafka_topic_suffix(LT_TOPIC_TELEMETRY));
    snprintf(o->t_control, sizeof o->t_control, "%s%s", o->prefix,
             lt_kafka_topic_suffix(LT_TOPIC_CONTROL));
    snprintf(o->t_configs, sizeof o->t_configs, "%s%s", o->prefix,
             lt_kafka_topic_suffix(LT_TOPIC_CONFIGS));
    snprintf(o->t_trials, sizeof o->t_trials, "%s%s", o->prefix,
             lt_kafka_topic_suffix(LT_TOPIC_TRIALS));
    /* without Kafka, records come in through lt_optimizer_handle and the
     * decisions go out through the user's hooks */
    bool kafka = d->conn.brokers || lt_kafka_props_count(d->conn.props);
    if (kafka)
        o->emit = (lt__opt_emit){kafka_control, kafka_config, kafka_trial, o};
    else
        o->emit = (lt__opt_emit){d->on_control, d->on_config, d->on_trial, d->hook_user};
    d->conn.client_id = d->conn.client_id ? d->conn.client_id : "looptune-optimizer";
    int rc = LT_OK;
    if (kafka) {
        lt_producer_opts po = {.conn = d->conn, .topic = o->t_control, .linger_ms = -1};
        lt_producer_opts pc = {.conn = d->conn, .topic = o->t_configs, .linger_ms = -1};
        lt_producer_opts pt = {.conn = d->conn, .topic = o->t_trials};
        const char *topics[] = {o->t_telemetry};
        lt_consumer_opts co = {.conn = d->conn, .group = o->group, .topics = topics,
                               .n_topics = 1, .from_beginning = true, .auto_commit = false};
        if ((rc = load_configs(o)) || (rc = load_trials(o)) ||
            (!d->no_group && (rc = rescan_runs(o))) ||
            (rc = lt_producer_open(&o->trials, &pt)) ||
            (rc = lt_producer_open(&o->control, &po)) ||
            (rc = lt_producer_open(&o->configs, &pc)) ||
            (rc = d->no_group ? lt_follower_open(&o->follower, &d->conn, o->t_telemetry, 10000)
                              : lt_consumer_open(&o->consumer, &co))) {
            rc = lt_error(rc, "optimizer: %s", lt_errmsg());
            lt_optimizer_close(o);
            return rc;
        }
        if (d->no_group)
            fprintf(o->log, "optimizer: following %s\n", o->t_telemetry);
        else
            fprintf(o->log, "optimizer: group %s on %s; %d runs seen before\n", o->group,
                    o->t_telemetry, o->n_runs);
    }
    o->last_commit_ns = lt_now_ns();
    *out = o;
    return LT_OK;
}

int lt_optimizer_poll(lt_optimizer *o, int timeout_ms) {
    int rc = LT_OK;
    if (o->consumer || o->follower) {
        uint64_t deadline = lt_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
        for (;;) {
            uint64_t now = lt_now_ns();
            int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ull);
            lt_record rec;
            int wait = left > 50 ? 50 : left;
            int got = o->consumer ? lt_consumer_poll(o->consumer, wait, &rec)
                                  : lt_follower_poll(o->follower, wait, &rec);
            if (got == LT_ENOTFOUND) { /* no telemetry topic yet: wait for one */
                got = 0;
            } else if (got < 0) {
                rc = got;
                break;
            }
            if (got == 1) {
                lt_optimizer_handle(o, rec.value, rec.len);
                o->dirty = true;
            }
            lt__opt_timers(o);
            if (!got && lt_now_ns() >= deadline) break;
        }
        if (o->consumer && o->dirty && lt_now_ns() - o->last_commit_ns > COMMIT_EVERY_NS) {
            if (lt_consumer_commit(o->consumer) == LT_OK) o->dirty = false;
            o->last_commit_ns = lt_now_ns();
        }
    } else {
        lt__opt_timers(o);
    }
    return rc;
}

void lt_optimizer_stats_get(lt_optimizer *o, lt_optimizer_stats *out) { *out = o->st; }

void lt_optimizer_close(lt_optimizer *o) {
    if (!o) return;
    if (o->consumer && o->dirty) lt_consumer_commit(o->consumer);
    lt_consumer_close(o->consumer);
    lt_follower_close(o->follower);
    lt_producer_close(o->control);
    lt_producer_close(o->configs);
    lt_producer_close(o->trials);
    lt__opt_free_state(o);
    free(o);
}
