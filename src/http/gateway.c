/* The gateway's Kafka half: an HTTP request becomes a Request record on
 * <prefix>requests (key: a new request id), and the Completion records the
 * workers stream on <prefix>completions come back to the request's stream.
 * The gateway follows every partition of completions from the moment it
 * opens (read_committed, no consumer group) and keeps the records of the
 * requests it has in flight: each token index once (a request served again
 * after its worker died streams the same tokens from 0), and the first final
 * record. Nothing here is on a compute path; the HTTP threads block on
 * their stream's condition variable, the follower thread never blocks on
 * them. */
#include "gateway_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "looptune/kafka.h"
#include "looptune/serve.h"

#define N_BUCKETS 1024

struct lt_gateway {
    lt_gateway_opts opts;
    char topic_req[256], topic_comp[256];
    lt_producer *producer;
    lt_follower *follower;
    lt_metrics *metrics;
    lt__gw_server *server;
    int port;
    pthread_t thread;
    bool thread_started;
    _Atomic bool stop;
    pthread_mutex_t mu; /* guards the table and inflight */
    lt__gw_stream *table[N_BUCKETS];
    int64_t inflight;
    /* records the follower could not use: not an envelope, not a completion */
    _Atomic int64_t rejected;
};

static uint64_t hash_id(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static lt__gw_stream *find_locked(lt_gateway *g, const char *id) {
    for (lt__gw_stream *s = g->table[hash_id(id) % N_BUCKETS]; s; s = s->next)
        if (!strcmp(s->id, id)) return s;
    return NULL;
}

static void stream_free(lt__gw_stream *s) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->text);
    free(s);
}

/* Drops one reference (g->mu held); true when it was the last. */
static bool unref_locked(lt__gw_stream *s) { return --s->refs == 0; }

/* The follower's reference, taken while it applies a record. */
static void unref(lt_gateway *g, lt__gw_stream *s) {
    pthread_mutex_lock(&g->mu);
    bool last = unref_locked(s);
    pthread_mutex_unlock(&g->mu);
    if (last) stream_free(s);
}

/* The handler's: the stream leaves the table (later records of its request
 * are skipped) and its references go. */
void lt__gw_release(lt_gateway *g, lt__gw_stream *s) {
    if (!s) return;
    pthread_mutex_lock(&g->mu);
    lt__gw_stream **p = &g->table[hash_id(s->id) % N_BUCKETS];
    while (*p && *p != s) p = &(*p)->next;
    LT_ASSERT(*p == s);
    *p = s->next;
    g->inflight--;
    unref_locked(s); /* the table's */
    bool last = unref_locked(s);
    pthread_mutex_unlock(&g->mu);
    lt_metrics_inflight(g->metrics, -1);
    if (last) stream_free(s);
}

/* Appends a Completion's tokens the stream has not seen yet. */
static void apply(lt__gw_stream *s, const Looptune__Completion *c) {
    pthread_mutex_lock(&s->mu);
    if (s->done) goto out; /* the first final record wins */
    if (c->finish_reason && c->finish_reason[0]) {
        if (c->index < s->tokens) goto out; /* a final of an earlier, shorter serving cannot be */
        if (c->index > s->tokens) goto out; /* tokens missing before it: wait for a replay */
        s->done = true;
        snprintf(s->finish_reason, sizeof s->finish_reason, "%s", c->finish_reason);
        snprintf(s->error, sizeof s->error, "%s", c->error ? c->error : "");
        snprintf(s->error_code, sizeof s->error_code, "%s", c->error_code ? c->error_code : "");
        s->prompt_tokens = c->prompt_tokens;
        s->completion_tokens = c->completion_tokens;
        pthread_cond_broadcast(&s->cv);
        goto out;
    }
    if (c->index > s->tokens) goto out; /* a gap: this serving is ahead of what we have */
    bool grew = false;
    for (size_t i = (size_t)(s->tokens - c->index); i < c->n_tokens; i++) {
        size_t n = i < c->n_pieces ? c->pieces[i].len : 0;
        if (s->text_len + n + 1 > s->text_cap) {
            size_t cap = s->text_cap ? s->text_cap * 2 : 256;
            while (cap < s->text_len + n + 1) cap *= 2;
            uint8_t *t = realloc(s->text, cap);
            if (!t) break; /* the stream ends short; its final record still comes */
            s->text = t;
            s->text_cap = cap;
        }
        if (n) memcpy(s->text + s->text_len, c->pieces[i].data, n);
        s->text_len += n;
        s->tokens++;
        grew = true;
    }
    if (grew) {
        if (!s->t_first) s->t_first = lt_now_s();
        pthread_cond_broadcast(&s->cv);
    }
out:
    pthread_mutex_unlock(&s->mu);
}

static void *follow(void *arg) {
    lt_gateway *g = arg;
    while (!g->stop) {
        lt_record rec;
        int rc = lt_follower_poll(g->follower, 100, &rec);
        if (rc < 0) {
            lt_log(LT_LOG_WARN, "gateway: %s: %s", g->topic_comp, lt_errmsg());
            continue;
        }
        if (rc == 0 || !rec.value) continue;
        Looptune__Envelope *env = NULL;
        if (lt_envelope_decode(rec.value, rec.len, &env) ||
            env->payload_case != LOOPTUNE__ENVELOPE__PAYLOAD_COMPLETION || !env->completion->request_id) {
            if (!g->rejected++)
                lt_log(LT_LOG_WARN, "gateway: %s[%d]@%lld: not a completion record, skipped (and any later ones, counted)",
                       rec.topic, (int)rec.partition, (long long)rec.offset);
            lt_envelope_free(env);
            continue;
        }
        pthread_mutex_lock(&g->mu);
        lt__gw_stream *s = find_locked(g, env->completion->request_id);
        if (s) s->refs++;
        pthread_mutex_unlock(&g->mu);
        if (s) {
            apply(s, env->completion);
            unref(g, s);
        }
        lt_envelope_free(env);
    }
    return NULL;
}

static void new_id(const char *prefix, char *out, size_t n) {
    uint8_t r[12];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        uint64_t t = lt_now_ns() ^ (uint64_t)(uintptr_t)out;
        memcpy(r, &t, 8);
        memcpy(r + 8, &t, 4);
    }
    int k = snprintf(out, n, "%s", prefix);
    for (size_t i = 0; i < sizeof r && (size_t)k + 2 < n; i++) k += snprintf(out + k, n - (size_t)k, "%02x", r[i]);
}

static uint64_t random_seed(void) {
    uint64_t s;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) s = lt_now_ns();
    return s;
}

int lt__gw_submit(lt_gateway *g, const lt_oai_request *r, lt__gw_stream **out, lt_oai_error *err) {
    pthread_mutex_lock(&g->mu);
    bool full = g->inflight >= g->opts.max_inflight;
    if (!full) g->inflight++;
    pthread_mutex_unlock(&g->mu);
    if (full)
        return lt_oai_fail(err, 429, "rate_limit_error", "", "too_many_requests",
                           "%lld requests are in flight, the gateway's limit: retry later",
                           (long long)g->opts.max_inflight);
    lt__gw_stream *s = calloc(1, sizeof *s);
    if (!s) {
        pthread_mutex_lock(&g->mu);
        g->inflight--;
        pthread_mutex_unlock(&g->mu);
        return lt_oai_fail(err, 500, "server_error", "", "", "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    new_id(r->kind == LT_OAI_CHAT ? "chatcmpl-" : "cmpl-", s->id, sizeof s->id);
    s->refs = 2; /* the table's and the caller's */
    lt_metrics_inflight(g->metrics, +1);
    pthread_mutex_lock(&g->mu);
    lt__gw_stream **b = &g->table[hash_id(s->id) % N_BUCKETS];
    s->next = *b;
    *b = s;
    pthread_mutex_unlock(&g->mu);

    /* the record: everything the worker needs to serve it, the seed included,
     * so a second serving streams the same tokens */
    Looptune__Request q = LOOPTUNE__REQUEST__INIT;
    Looptune__Sampling sp = LOOPTUNE__SAMPLING__INIT;
    Looptune__ChatMessage *msgs = NULL, **pmsgs = NULL;
    q.request_id = s->id;
    q.model = r->model;
    if (r->kind == LT_OAI_CHAT) {
        msgs = calloc((size_t)r->n_messages, sizeof *msgs);
        pmsgs = calloc((size_t)r->n_messages, sizeof *pmsgs);
        if (!msgs || !pmsgs) {
            free(msgs);
            free(pmsgs);
            lt__gw_release(g, s);
            return lt_oai_fail(err, 500, "server_error", "", "", "out of memory");
        }
        for (int64_t i = 0; i < r->n_messages; i++) {
            looptune__chat_message__init(&msgs[i]);
            msgs[i].role = r->messages[i].role;
            msgs[i].content = r->messages[i].content;
            pmsgs[i] = &msgs[i];
        }
        q.n_messages = (size_t)r->n_messages;
        q.messages = pmsgs;
    } else {
        q.prompt = r->prompt;
    }
    sp.temperature = r->temperature;
    sp.top_p = r->top_p;
    sp.top_k = (uint32_t)r->top_k;
    sp.min_p = r->min_p;
    sp.repeat_penalty = r->repeat_penalty;
    sp.seed = r->has_seed ? r->seed : random_seed();
    q.sampling = &sp;
    q.max_tokens = (uint32_t)(r->max_tokens ? r->max_tokens : g->opts.default_max_tokens);
    q.deadline_ns = lt_wall_ns() + (uint64_t)(g->opts.timeout_s * 1e9);
    q.ignore_eos = r->ignore_eos;
    q.n_stop = (size_t)r->n_stop;
    q.stop = (char **)r->stop;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_REQUEST;
    env.request = &q;
    int rc = lt_producer_send_envelope(g->producer, s->id, &env);
    free(msgs);
    free(pmsgs);
    if (rc) {
        lt__gw_release(g, s);
        if (rc == LT_PRODUCER_DROPPED)
            return lt_oai_fail(err, 503, "server_error", "", "queue_full",
                               "the requests topic's producer queue is full (the brokers are slow or away): retry later");
        return lt_oai_fail(err, 500, "server_error", "", "", "the request could not be encoded: %s",
                           lt_errmsg());
    }
    *out = s;
    return 0;
}

void lt__gw_cancel(lt_gateway *g, lt__gw_stream *s) {
    Looptune__Cancel c = LOOPTUNE__CANCEL__INIT;
    c.request_id = s->id;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CANCEL;
    env.cancel = &c;
    (void)lt_producer_send_envelope(g->producer, s->id, &env); /* dropped: the deadline ends it */
}

size_t lt__gw_models(lt_gateway *g, const char ***names) {
    *names = (const char **)g->opts.models;
    return g->opts.n_models;
}

bool lt__gw_knows_model(lt_gateway *g, const char *name) {
    if (!g->opts.n_models) return true; /* no list: the workers decide */
    for (size_t i = 0; i < g->opts.n_models; i++)
        if (!strcmp(g->opts.models[i], name)) return true;
    return false;
}

lt_metrics *lt__gw_metrics(lt_gateway *g) { return g->metrics; }
const char *lt__gw_api_key(lt_gateway *g) {
    return g->opts.api_key && g->opts.api_key[0] ? g->opts.api_key : NULL;
}
double lt__gw_timeout_s(lt_gateway *g) { return g->opts.timeout_s; }

int lt_gateway_open(lt_gateway **out, const lt_gateway_opts *o) {
    if (!o->http_addr) return lt_error(LT_EINVAL, "gateway: no HTTP address");
    lt_gateway *g = calloc(1, sizeof *g);
    if (!g) return lt_error(LT_ENOMEM, "gateway");
    g->opts = *o;
    if (g->opts.max_inflight <= 0) g->opts.max_inflight = 256;
    if (g->opts.default_max_tokens <= 0) g->opts.default_max_tokens = 256;
    if (g->opts.timeout_s <= 0) g->opts.timeout_s = 300;
    pthread_mutex_init(&g->mu, NULL);
    const char *prefix = o->topic_prefix ? o->topic_prefix : LT_KAFKA_TOPIC_PREFIX;
    snprintf(g->topic_req, sizeof g->topic_req, "%s%s", prefix, lt_kafka_topic_suffix(LT_TOPIC_REQUESTS));
    snprintf(g->topic_comp, sizeof g->topic_comp, "%s%s", prefix,
             lt_kafka_topic_suffix(LT_TOPIC_COMPLETIONS));
    int rc;
    if ((rc = lt_serve_ensure_topics(&o->conn, o->devbroker, prefix, o->partitions))) goto fail;
    if ((rc = lt_metrics_init(&g->metrics))) goto fail;
    lt_producer_opts po = {.conn = o->conn, .topic = g->topic_req, .linger_ms = -1};
    if ((rc = lt_producer_open(&g->producer, &po))) goto fail;
    if ((rc = lt_follower_open(&g->follower, &o->conn, g->topic_comp, 15000))) goto fail;
    if (pthread_create(&g->thread, NULL, follow, g)) {
        rc = lt_error(LT_ENOMEM, "gateway: cannot start the completions thread");
        goto fail;
    }
    g->thread_started = true;
    if ((rc = lt__gw_server_start(&g->server, g, o->http_addr, o->max_connections, &g->port)))
        goto fail;
    *out = g;
    return 0;
fail:
    lt_gateway_close(g);
    return rc;
}

int lt_gateway_port(const lt_gateway *g) { return g->port; }

int64_t lt_gateway_rejected(const lt_gateway *g) { return g->rejected; }

void lt_gateway_close(lt_gateway *g) {
    if (!g) return;
    lt__gw_server_stop(g->server); /* no handler runs after this */
    g->stop = true;
    if (g->thread_started) pthread_join(g->thread, NULL);
    lt_follower_close(g->follower);
    lt_producer_close(g->producer);
    for (size_t i = 0; i < N_BUCKETS; i++)
        for (lt__gw_stream *s = g->table[i], *next; s; s = next) {
            next = s->next;
            stream_free(s);
        }
    lt_metrics_free(g->metrics);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
