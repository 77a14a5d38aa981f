/* The serve worker: a member of the serve group on the requests topic that
 * generates completions with continuous batching and streams them exactly
 * once.
 *
 * Three threads. The decode thread (decode.c) owns the batchers (one per
 * model) and does nothing but steps; it never touches Kafka. It takes
 * commands (admit, cancel, drop) from an inbox and hands what the steps make
 * (tokens, ends) to an outbox; both are vectors under a mutex held only to
 * append or to swap, never across I/O. The calling thread is the Kafka thread: it reads
 * requests and cancels, turns them into commands, drains the outbox into
 * each request's history, and commits like a group commit: every token
 * made since the last commit (one Completion record per request), the final
 * records of the requests that ended, and, per partition, the offset up to
 * the oldest request that has not ended, all in one transaction.
 *
 * Why that is exactly once for a reader of read_committed completions: a
 * request's offset is committed in the transaction of its final record, so a
 * request whose final record is not committed is read again by the
 * partition's next owner and served again from its first token with the same
 * prompt, settings and seed: the same tokens at the same indices. Records of
 * an aborted transaction are never seen; those committed before a crash are
 * repeated, and the reader keeps each (request id, index) once. A failed
 * commit changes no request's committed count, so the next commit sends the
 * same tokens again: no gap. Partitions revoked: the stage aborts the open
 * transaction, their requests are dropped here (the new owner serves them).
 *
 * Bounded admission: with every slot and the waiting queue taken, fetching
 * stops (the stage pauses its partitions, rebalances still served), so no
 * backlog grows; cancels still arrive at once: the cancel thread follows
 * the requests topic from its end and hands them to the decode thread by
 * request id, whatever the Kafka thread is doing. */
#define _GNU_SOURCE /* gethostname */
#include "serve/serve_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SLOTS 4
#define DEFAULT_FLUSH_MS 20
#define DEFAULT_MAX_TOKENS 128
#define MAX_FAILURES 5      /* commits in a row that failed: give up */
#define CANCEL_MEMORY 1024  /* ids of cancels that came before their request */
#define DEFAULT_LAST_N 64

/* ---- requests ------------------------------------------------------------------------ */

typedef lt__sreq sreq;

static void sreq_free(sreq *r) {
    if (!r) return;
    free(r->id);
    free(r->prompt);
    for (size_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->error);
    free(r->toks);
    free(r->text_off);
    free(r->text);
    free(r);
}

static int history_add(sreq *r, int32_t tok, const char *text, size_t len) {
    if (r->n_toks + 1 >= r->cap_toks) {
        size_t cap = r->cap_toks ? 2 * r->cap_toks : 64;
        int32_t *t = realloc(r->toks, cap * sizeof *t);
        if (t) r->toks = t;
        size_t *o = realloc(r->text_off, (cap + 1) * sizeof *o);
        if (o) r->text_off = o;
        if (!t || !o) return LT_ENOMEM;
        if (r->cap_toks == 0) r->text_off[0] = 0;
        r->cap_toks = cap;
    }
    if (r->text_len + len > r->cap_text) {
        size_t cap = r->cap_text ? r->cap_text : 256;
        while (cap < r->text_len + len) cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t) return LT_ENOMEM;
        r->text = t;
        r->cap_text = cap;
    }
    memcpy(r->text + r->text_len, text, len);
    r->text_len += len;
    r->toks[r->n_toks++] = tok;
    r->text_off[r->n_toks] = r->text_len;
    return LT_OK;
}

/* ---- the worker ----------------------------------------------------------------------- */

typedef struct {
    int64_t consumed;  /* offset after the last record read; -1 none */
    int64_t committed; /* last offset committed; -1 none */
} part_pos;

typedef struct {
    const lt_serve_opts *o;
    lt_serve_stats *st;
    char id[128];
    char topic_req[256], topic_comp[256], group[256];
    lt_pool *pool;
    lt_llama **llamas;      /* [n_models] */
    lt_batcher **batchers;  /* [n_models]: the decode thread's once it runs */
    lt_run **runs;          /* [n_models] with opts.tune: each model's batched steps; the
                               decode thread's */
    int64_t slots, queue;
    lt__decoder dec;        /* the decode thread's state and mailboxes (decode.c) */
    pthread_t decode_thread;
    bool decode_started;
    /* Kafka thread */
    lt_stage *stage;
    /* the cancel thread: the follower, and the ids it hands the Kafka thread (cmu) */
    lt_follower *cancels;
    pthread_t cancel_thread;
    bool cancel_started;
    _Atomic bool cancel_stop;
    pthread_mutex_t cmu;
    lt__vec cancel_ids;     /* char*, malloc'd */
    sreq *live;             /* every request read and not yet finished and committed */
    int64_t n_with_decode;
    part_pos *pos;
    int32_t n_pos;
    bool paused;
    int failures;
    char *cancelled[CANCEL_MEMORY]; /* ring of ids cancelled before their request came */
    size_t n_cancelled;
} worker;


/* ---- Kafka thread: positions ---------------------------------------------------------- */

static part_pos *pos_of(worker *w, int32_t p) {
    if (p < 0) return NULL;
    if (p >= w->n_pos) {
        part_pos *v = realloc(w->pos, (size_t)(p + 1) * sizeof *v);
        if (!v) return NULL;
        for (int32_t i = w->n_pos; i <= p; i++) v[i] = (part_pos){-1, -1};
        w->pos = v;
        w->n_pos = p + 1;
    }
    return &w->pos[p];
}

/* The stage lost partition p: its requests are dropped (the decode thread
 * ends those it holds; they are freed when it says so), its positions
 * forgotten. Runs inside poll or commit, on the Kafka thread. */
static void on_revoke(void *arg, int32_t p) {
    worker *w = arg;
    int64_t n = 0;
    for (sreq *r = w->live; r; r = r->next) {
        if (r->partition != p || r->revoked) continue;
        r->revoked = true;
        if (!r->finished) n++;
        if (r->with_decode) lt__decoder_command(&w->dec, LT__CMD_DROP, r, LT_FINISH_CANCELLED);
    }
    w->st->dropped += n;
    if (n) lt_log(LT_LOG_INFO, "serve %s: partition %d revoked: %" PRId64 " requests dropped "
                  "(their new owner serves them)", w->id, (int)p, n);
    part_pos *pp = pos_of(w, p);
    if (pp) *pp = (part_pos){-1, -1};
}

/* Frees the revoked requests the decode thread no longer holds. */
static void sweep(worker *w) {
    for (sreq **pp = &w->live; *pp;) {
        sreq *r = *pp;
        if (r->revoked && !r->with_decode) {
            *pp = r->next;
            sreq_free(r);
        } else {
            pp = &r->next;
        }
    }
}

/* ---- Kafka thread: one record of the requests topic ----------------------------------- */

static bool cancel_remembered(worker *w, const char *id) {
    size_t n = w->n_cancelled < CANCEL_MEMORY ? w->n_cancelled : CANCEL_MEMORY;
    for (size_t i = 0; i < n; i++)
        if (w->cancelled[i] && !strcmp(w->cancelled[i], id)) return true;
    return false;
}

static void handle_cancel(worker *w, const char *id) {
    bool found = false;
    for (sreq *r = w->live; r; r = r->next) {
        if (strcmp(r->id, id) || r->revoked) continue;
        found = true;
        if (r->with_decode && !r->cancel_sent) {
            r->cancel_sent = true;
            lt__decoder_command(&w->dec, LT__CMD_CANCEL, r, LT_FINISH_CANCELLED);
        }
    }
    if (found || cancel_remembered(w, id)) return;
    size_t i = w->n_cancelled++ % CANCEL_MEMORY;
    free(w->cancelled[i]);
    w->cancelled[i] = strdup(id);
}

/* Ends r here, before any decoding. */
static void finish_now(sreq *r, lt_finish why, const char *code, const char *error) {
    r->finished = true;
    r->why = why;
    r->error_code = code;
    if (error) r->error = strdup(error);
}

static int find_model(const worker *w, const char *name) {
    if (!name || !*name) return 0;
    for (size_t i = 0; i < w->o->n_models; i++)
        if (!strcmp(w->o->models[i].name, name)) return (int)i;
    return -1;
}

static const char *special_text(const lt_vocab *v, int32_t id) {
    if (id < 0) return "";
    size_t len;
    const char *p = lt_vocab_piece(v, id, &len);
    return p ? p : "";
}

/* The prompt's tokens (r->prompt), as `looptune run` and `looptune chat`
 * make them. An error message in why on failure. */
static int make_prompt(worker *w, sreq *r, const Looptune__Request *q, char *why, size_t n) {
    const lt_model *m = w->o->models[r->model].model;
    const int given = (q->prompt && *q->prompt) + (q->n_messages > 0) + (q->n_prompt_ids > 0);
    if (given != 1) {
        snprintf(why, n, "a request needs exactly one of prompt, messages and prompt_ids (it "
                 "has %d)", given);
        return LT_EINVAL;
    }
    if (q->n_prompt_ids) {
        if (!(r->prompt = malloc(q->n_prompt_ids * sizeof *r->prompt))) return LT_ENOMEM;
        for (size_t i = 0; i < q->n_prompt_ids; i++) {
            if (q->prompt_ids[i] < 0 || q->prompt_ids[i] >= m->cfg.vocab_size) {
                snprintf(why, n, "prompt_ids: token id %d outside the vocabulary (0..%lld)",
                         (int)q->prompt_ids[i], (long long)m->cfg.vocab_size - 1);
                return LT_EINVAL;
            }
            r->prompt[i] = q->prompt_ids[i];
        }
        r->n_prompt = (int64_t)q->n_prompt_ids;
        return LT_OK;
    }
    if (!m->vocab) {
        snprintf(why, n, "model %s has no tokenizer: give prompt_ids", w->o->models[r->model].name);
        return LT_EINVAL;
    }
    char *text = NULL;
    size_t len;
    const char *t = q->prompt;
    bool chat = q->n_messages > 0;
    if (chat) {
        lt_chat_template tmpl = {.bos = special_text(m->vocab, lt_vocab_bos(m->vocab)),
                                 .eos = special_text(m->vocab, lt_vocab_eos(m->vocab))};
        size_t tlen = 0;
        const char *src = lt_model_chat_template(m, &tlen);
        if (lt_chat_detect(src, tlen, &tmpl.style)) {
            snprintf(why, n, "model %s: %s", w->o->models[r->model].name, lt_errmsg());
            return LT_EUNSUPPORTED;
        }
        lt_chat_msg *msgs = calloc(q->n_messages, sizeof *msgs);
        if (!msgs) return LT_ENOMEM;
        for (size_t i = 0; i < q->n_messages; i++)
            msgs[i] = (lt_chat_msg){.role = q->messages[i]->role, .content = q->messages[i]->content};
        int rc = lt_chat_format(&tmpl, msgs, (int64_t)q->n_messages, true, &text, &len);
        free(msgs);
        if (rc) {
            snprintf(why, n, "messages: %s", lt_errmsg());
            return rc;
        }
        /* as llama.cpp: a template's own BOS gives way to the one the vocabulary adds */
        t = text;
        const size_t blen = strlen(tmpl.bos);
        if (lt_vocab_add_bos(m->vocab) && blen && len >= blen && !memcmp(t, tmpl.bos, blen))
            t += blen, len -= blen;
    } else {
        len = strlen(t);
    }
    const size_t cap = 2 * len + 3;
    lt_tokenize_opts to = {.add_special = true, .parse_special = true};
    int rc = LT_ENOMEM;
    if ((r->prompt = malloc(cap * sizeof *r->prompt)))
        rc = lt_tokenize_text(m->vocab, t, len, &to, r->prompt, (int64_t)cap, &r->n_prompt);
    if (rc) snprintf(why, n, "cannot tokenize the prompt: %s", lt_errmsg());
    free(text);
    return rc;
}

/* Fills r from request q; an error ends it at once with the reason. */
static void setup_request(worker *w, sreq *r, const Looptune__Request *q) {
    char why[512] = "";
    r->model = find_model(w, q->model);
    if (r->model < 0) {
        char names[512] = "";
        size_t at = 0;
        for (size_t i = 0; i < w->o->n_models && at < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "",
                                   w->o->models[i].name);
        snprintf(why, sizeof why, "unknown model '%.128s' (this worker serves %.300s)", q->model,
                 names);
        finish_now(r, LT_FINISH_ERROR, "model_not_found", why);
        return;
    }
    const lt_model *m = w->o->models[r->model].model;
    if (make_prompt(w, r, q, why, sizeof why)) {
        finish_now(r, LT_FINISH_ERROR, why[0] ? "invalid_request" : "internal",
                   why[0] ? why : "out of memory");
        return;
    }
    r->usage_prompt = r->n_prompt;
    const int64_t ctx = lt_llama_ctx_len(w->llamas[r->model]);
    if (r->n_prompt < 1) {
        finish_now(r, LT_FINISH_ERROR, "invalid_request", "empty prompt: at least one token is needed");
        return;
    }
    if (r->n_prompt > ctx) {
        snprintf(why, sizeof why, "prompt of %lld tokens is longer than the context (%lld)",
                 (long long)r->n_prompt, (long long)ctx);
        finish_now(r, LT_FINISH_ERROR, "context_length_exceeded", why);
        return;
    }
    /* sampling: absent = greedy; zeros mean off (see proto/looptune.proto) */
    lt_sampler_opts so = lt_sampler_defaults();
    so.temp = 0, so.top_p = 1, so.top_k = 0, so.min_p = 0, so.repeat_penalty = 1;
    so.repeat_last_n = DEFAULT_LAST_N, so.seed = 0;
    if (q->sampling) {
        const Looptune__Sampling *s = q->sampling;
        so.temp = s->temperature;
        so.top_p = s->top_p == 0 ? 1.0f : s->top_p;
        so.top_k = (int32_t)(s->top_k > INT32_MAX ? INT32_MAX : s->top_k);
        so.min_p = s->min_p;
        so.repeat_penalty = s->repeat_penalty == 0 ? 1.0f : s->repeat_penalty;
        so.repeat_last_n = s->repeat_last_n ? (int32_t)(s->repeat_last_n > INT32_MAX ? INT32_MAX
                                                                                     : s->repeat_last_n)
                                            : DEFAULT_LAST_N;
        so.seed = s->seed;
    }
    lt_sampler *probe;
    if (lt_sampler_init_opts(&probe, m->cfg.vocab_size, &so)) {
        snprintf(why, sizeof why, "sampling: %s", lt_errmsg());
        finish_now(r, LT_FINISH_ERROR, "invalid_request", why);
        return;
    }
    lt_sampler_free(probe);
    r->smp = so;
    r->max_tokens = q->max_tokens ? (int64_t)q->max_tokens : DEFAULT_MAX_TOKENS;
    r->ignore_eos = q->ignore_eos;
    r->deadline_ns = q->deadline_ns;
    if (q->n_stop) {
        if (!(r->stop = calloc(q->n_stop, sizeof *r->stop))) {
            finish_now(r, LT_FINISH_ERROR, "internal", "out of memory");
            return;
        }
        for (size_t i = 0; i < q->n_stop; i++)
            if ((r->stop[r->n_stop] = strdup(q->stop[i]))) r->n_stop++;
    }
    if (cancel_remembered(w, r->id)) {
        finish_now(r, LT_FINISH_CANCELLED, NULL, NULL);
        return;
    }
    if (r->deadline_ns && lt_wall_ns() > r->deadline_ns) {
        finish_now(r, LT_FINISH_DEADLINE, NULL, NULL);
        return;
    }
    r->with_decode = true;
    if (++w->n_with_decode > w->st->held_max) w->st->held_max = w->n_with_decode;
    lt__decoder_command(&w->dec, LT__CMD_ADMIT, r, LT_FINISH_NONE);
}

static int handle_record(worker *w, const lt_record *rec) {
    part_pos *pp = pos_of(w, rec->partition);
    if (pp) pp->consumed = rec->offset + 1;
    Looptune__Envelope *env = NULL;
    if (lt_envelope_decode(rec->value, rec->len, &env)) {
        w->st->rejected++;
        lt_log(LT_LOG_WARN, "serve %s: record %s[%d]@%" PRId64 " rejected: %s", w->id,
               rec->topic, (int)rec->partition, rec->offset, lt_errmsg());
        return LT_OK;
    }
    if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CANCEL) {
        if (env->cancel->request_id[0]) handle_cancel(w, env->cancel->request_id);
    } else if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_REQUEST &&
               env->request->request_id[0]) {
        sreq *r = calloc(1, sizeof *r);
        if (!r || !(r->id = strdup(env->request->request_id))) {
            free(r);
            lt_envelope_free(env);
            return lt_error(LT_ENOMEM, "serve: out of memory");
        }
        r->partition = rec->partition;
        r->offset = rec->offset;
        w->st->requests++;
        setup_request(w, r, env->request);
        if (r->finished)
            lt_log(LT_LOG_INFO, "serve %s: request %s: %s%s%s", w->id, r->id,
                   lt_finish_name(r->why), r->error ? ": " : "", r->error ? r->error : "");
        r->next = w->live;
        w->live = r;
    } else {
        w->st->rejected++;
        lt_log(LT_LOG_WARN, "serve %s: record %s[%d]@%" PRId64 " rejected: a %s, not a request "
               "or cancel", w->id, rec->topic, (int)rec->partition, rec->offset,
               lt_envelope_kind(env));
    }
    lt_envelope_free(env);
    return LT_OK;
}

/* ---- Kafka thread: events and commits --------------------------------------------------- */

static void take_events(worker *w, lt__vec *evs) {
    lt__decoder_take(&w->dec, evs);
    for (size_t i = 0; i < evs->n; i++) {
        lt__event *e = &((lt__event *)evs->v)[i];
        sreq *r = e->r;
        if (e->kind == LT__EV_TOKEN) {
            if (!r->revoked && (size_t)e->index == r->n_toks &&
                history_add(r, e->token, e->text, e->len))
                lt_log(LT_LOG_ERROR, "serve %s: out of memory: request %s", w->id, r->id);
            continue;
        }
        r->with_decode = false;
        w->n_with_decode--;
        if (!r->revoked) {
            r->finished = true;
            r->why = e->why;
            r->error = e->error;
            e->error = NULL;
            r->usage_prompt = e->n_prompt;
        }
        free(e->error);
    }
    evs->n = 0;
}

/* Encodes one Completion record of r into out (malloc'd). */
static int encode_completion(worker *w, const sreq *r, bool final, uint8_t **out, size_t *len) {
    Looptune__Completion c = LOOPTUNE__COMPLETION__INIT;
    c.request_id = r->id;
    c.model = r->model >= 0 ? (char *)w->o->models[r->model].name : ""; /* "": none served it */
    c.worker = w->id;
    ProtobufCBinaryData *pieces = NULL;
    if (final) {
        c.index = (uint32_t)r->n_toks;
        c.finish_reason = (char *)lt_finish_name(r->why);
        c.error = r->error ? r->error : "";
        c.error_code = (char *)(r->error_code ? r->error_code : r->why == LT_FINISH_ERROR ? "internal" : "");
        c.prompt_tokens = (uint32_t)r->usage_prompt;
        c.completion_tokens = (uint32_t)r->n_toks;
    } else {
        const size_t n = r->n_toks - r->committed;
        if (!(pieces = calloc(n, sizeof *pieces))) return LT_ENOMEM;
        for (size_t i = 0; i < n; i++) {
            const size_t k = r->committed + i;
            pieces[i].data = r->text ? (uint8_t *)r->text + r->text_off[k] : NULL; /* all empty */
            pieces[i].len = r->text_off[k + 1] - r->text_off[k];
        }
        c.index = (uint32_t)r->committed;
        c.n_tokens = n;
        c.tokens = r->toks + r->committed;
        c.n_pieces = n;
        c.pieces = pieces;
    }
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_COMPLETION;
    env.completion = &c;
    int rc = lt_envelope_encode(&env, out, len);
    free(pieces);
    return rc;
}

/* Commits what has changed since the last commit. *did: whether anything went. */
static int commit(worker *w, bool *did) {
    *did = false;
    size_t n_live = 0;
    for (sreq *r = w->live; r; r = r->next) n_live++;
    lt_stage_record *recs = calloc(2 * n_live + 1, sizeof *recs);
    uint8_t **bufs = calloc(2 * n_live + 1, sizeof *bufs);
    size_t *upto = calloc(n_live + 1, sizeof *upto); /* n_toks of each live request sent */
    lt_stage_offset *offs = calloc((size_t)w->n_pos + 1, sizeof *offs);
    int rc = LT_OK;
    size_t n = 0, n_offs = 0;
    if (!recs || !bufs || !upto || !offs) {
        rc = lt_error(LT_ENOMEM, "serve: out of memory");
        goto done;
    }
    size_t i = 0;
    for (sreq *r = w->live; r; r = r->next, i++) {
        upto[i] = r->n_toks;
        if (r->revoked) continue;
        for (int final = 0; final < 2; final++) {
            if (final ? !r->finished : r->n_toks == r->committed) continue;
            size_t len;
            if ((rc = encode_completion(w, r, final, &bufs[n], &len))) goto done;
            recs[n] = (lt_stage_record){.topic = w->topic_comp, .key = r->id,
                                        .key_len = strlen(r->id), .value = bufs[n], .len = len};
            n++;
        }
    }
    /* per partition: up to the oldest request that has not ended, else all read */
    for (int32_t p = 0; p < w->n_pos; p++) {
        part_pos *pp = &w->pos[p];
        if (pp->consumed < 0 || !lt_stage_owns(w->stage, p)) continue;
        int64_t safe = pp->consumed;
        for (sreq *r = w->live; r; r = r->next)
            if (r->partition == p && !r->revoked && !r->finished && r->offset < safe)
                safe = r->offset;
        if (safe > pp->committed) offs[n_offs++] = (lt_stage_offset){p, safe};
    }
    if (!n && !n_offs) goto done;
    const uint64_t t0 = lt_now_ns();
    int crc = lt_stage_commit(w->stage, recs, n, offs, n_offs);
    *did = true;
    if (crc == LT_OK) {
        w->st->commit_ms_sum += (double)(lt_now_ns() - t0) * 1e-6;
        w->failures = 0;
        for (size_t k = 0; k < n_offs; k++) {
            part_pos *pp = pos_of(w, offs[k].partition);
            if (pp) pp->committed = offs[k].offset;
        }
        i = 0;
        for (sreq **pr = &w->live; *pr; i++) {
            sreq *r = *pr;
            if (!r->revoked) r->committed = upto[i];
            if (!r->revoked && r->finished) {
                w->st->completed++;
                w->st->by_reason[r->why]++;
                *pr = r->next;
                sreq_free(r);
            } else {
                pr = &r->next;
            }
        }
    } else {
        /* nothing landed: the next commit sends the same tokens again */
        lt_log(LT_LOG_WARN, "serve %s: commit of %zu records failed (%s); trying again", w->id, n,
               lt_errmsg());
        if (crc != LT_ESTATE && ++w->failures >= MAX_FAILURES)
            rc = lt_error(LT_EKAFKA, "%d commits in a row failed: %s", w->failures, lt_errmsg());
    }
done:
    for (size_t k = 0; bufs && k < n; k++) free(bufs[k]);
    free(recs);
    free(bufs);
    free(upto);
    free(offs);
    sweep(w);
    return rc;
}

/* ---- setup and the loop ------------------------------------------------------------------- */

int lt_serve_ensure_topics(const lt_kafka_conn *conn, lt_devbroker *dev, const char *prefix,
                           int32_t partitions) {
    char req[256], comp[256];
    if (!prefix) prefix = LT_KAFKA_TOPIC_PREFIX;
    snprintf(req, sizeof req, "%s%s", prefix, lt_kafka_topic_suffix(LT_TOPIC_REQUESTS));
    snprintf(comp, sizeof comp, "%s%s", prefix, lt_kafka_topic_suffix(LT_TOPIC_COMPLETIONS));
    const int32_t parts = partitions > 0 ? partitions : 6;
    if (dev) {
        int rc = lt_devbroker_create_topic(dev, req, parts);
        return rc ? rc : lt_devbroker_create_topic(dev, comp, parts);
    }
    lt_topic_spec specs[2] = {{.name = req, .partitions = parts, .replication = -1},
                              {.name = comp, .partitions = parts, .replication = -1}};
    lt_kafka_admin *a;
    int rc = lt_kafka_admin_open(&a, conn);
    if (rc) return rc;
    rc = lt_kafka_admin_create_topics(a, specs, 2, 15000, NULL);
    lt_kafka_admin_close(a);
    return rc;
}

static void *cancel_main(void *arg);

static int setup(worker *w) {
    const lt_serve_opts *o = w->o;
    if (!o->n_models) return lt_error(LT_EINVAL, "serve: no model");
    int rc = lt_pool_init(&w->pool, o->threads > 0 ? o->threads : 1);
    if (rc) return rc;
    w->llamas = calloc(o->n_models, sizeof *w->llamas);
    w->batchers = calloc(o->n_models, sizeof *w->batchers);
    w->runs = o->tune ? calloc(o->n_models, sizeof *w->runs) : NULL;
    if (!w->llamas || !w->batchers || (o->tune && !w->runs))
        return lt_error(LT_ENOMEM, "serve: out of memory");
    w->slots = o->max_batch > 0 ? o->max_batch : DEFAULT_SLOTS;
    w->queue = o->queue > 0 ? o->queue : w->slots;
    for (size_t i = 0; i < o->n_models; i++) {
        const lt_model *m = o->models[i].model;
        int64_t ctx = o->ctx > 0 ? o->ctx : lt_llama_default_ctx(&m->cfg);
        if (ctx > m->cfg.seq_len) ctx = m->cfg.seq_len;
        lt_llama_opts lo = {.ctx_len = ctx, .n_slots = w->slots, .executor = 1};
        if ((rc = lt_llama_init(&w->llamas[i], m, w->pool, &lo)))
            return lt_error(rc, "model %s: %s", o->models[i].name, lt_errmsg());
        if (o->tune) {
            if (w->slots < 2)
                return lt_error(LT_EINVAL, "online tuning of serving tunes the batched steps: "
                                           "it needs a max batch of 2 sequences or more");
            lt_run_opts ro = *o->tune;
            ro.batch_rows = w->slots;
            ro.model_name = o->models[i].name;
            if ((rc = lt_run_open(&w->runs[i], w->llamas[i], w->pool, &ro)))
                return lt_error(rc, "model %s: %s", o->models[i].name, lt_errmsg());
            lt_run_state rs;
            lt_run_info(w->runs[i], &rs);
            w->st->warm_applied += rs.warm_applied;
            w->st->warm_refused += rs.warm_refused;
        }
        lt_batcher_opts bo = {.prefill_chunk = o->prefill_chunk,
                              .on_token = lt__decoder_on_token,
                              .on_finish = lt__decoder_on_finish, .ctx = &w->dec,
                              .pool = w->pool, .run = w->runs ? w->runs[i] : NULL};
        if ((rc = lt_batcher_init(&w->batchers[i], w->llamas[i], &bo))) return rc;
    }
    if ((rc = lt_serve_ensure_topics(&o->conn, o->devbroker, o->prefix, o->partitions))) return rc;
    char txn_id[200];
    snprintf(txn_id, sizeof txn_id, "looptune-serve-%s", w->id);
    lt_stage_opts so = {.conn = o->conn, .group = w->group, .topic = w->topic_req,
                        .output_topic = w->topic_comp,
                        .transactional_id = o->at_least_once ? NULL : txn_id,
                        .instance_id = o->instance_id,
                        /* the embedded broker of this process has this one worker */
                        .fixed_members = o->devbroker ? 1 : 0,
                        .session_timeout_ms = o->session_timeout_ms,
                        .transaction_timeout_ms = o->transaction_timeout_ms,
                        .test_commit_delay_ms = o->test_commit_delay_ms,
                        .on_revoke = on_revoke, .arg = w};
    if ((rc = lt_stage_open(&w->stage, &so))) return rc;
    if ((rc = lt_follower_open(&w->cancels, &o->conn, w->topic_req, 15000))) return rc;
    w->dec.batchers = w->batchers;
    w->dec.n_batchers = o->n_models;
    w->dec.step_delay_ms = o->test_step_delay_ms;
    w->dec.id = w->id;
    w->decode_started = !pthread_create(&w->decode_thread, NULL, lt__decoder_main, &w->dec);
    if (!w->decode_started) return lt_error(LT_ENOMEM, "serve: cannot start the decode thread");
    w->cancel_started = !pthread_create(&w->cancel_thread, NULL, cancel_main, w);
    if (!w->cancel_started) return lt_error(LT_ENOMEM, "serve: cannot start the cancel thread");
    return LT_OK;
}

/* The cancel thread: every cancel produced from its start on, whoever's
 * partition, goes to the decode thread at once (by id: it ends the request
 * if it holds it) and to the Kafka thread, which remembers the cancel of a
 * request it has not read yet. It never waits for the Kafka thread, whose
 * commits take tens of milliseconds and which stops fetching when full. */
static void *cancel_main(void *arg) {
    worker *w = arg;
    while (!atomic_load(&w->cancel_stop)) {
        lt_record rec;
        if (lt_follower_poll(w->cancels, 100, &rec) != 1) continue;
        Looptune__Envelope *env = NULL;
        if (lt_envelope_decode(rec.value, rec.len, &env)) continue;
        if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CANCEL && env->cancel->request_id[0]) {
            lt__decoder_cancel_id(&w->dec, env->cancel->request_id);
            char *id = strdup(env->cancel->request_id);
            pthread_mutex_lock(&w->cmu);
            if (id && lt__vec_push(&w->cancel_ids, &id)) free(id);
            pthread_mutex_unlock(&w->cmu);
        }
        lt_envelope_free(env);
    }
    return NULL;
}

/* Kafka thread: the cancels the cancel thread has seen. */
static void take_cancels(worker *w, lt__vec *ids) {
    pthread_mutex_lock(&w->cmu);
    lt__vec_swap(ids, &w->cancel_ids);
    pthread_mutex_unlock(&w->cmu);
    for (size_t i = 0; i < ids->n; i++) {
        char *id = ((char **)ids->v)[i];
        handle_cancel(w, id);
        free(id);
    }
    ids->n = 0;
}

static void add_online(lt_online_stats *to, const lt_online_stats *s) {
    to->received += s->received;
    to->ignored += s->ignored;
    to->rejected += s->rejected;
    to->applied += s->applied;
    to->trials += s->trials;
    to->trial_tokens += s->trial_tokens;
    to->candidate_tokens += s->candidate_tokens;
    to->trial_prefills += s->trial_prefills;
}

static void add_tel(lt_tel_stats *to, const lt_tel_stats *s) {
    to->steps += s->steps;
    to->windows += s->windows;
    to->records += s->records;
    to->ring_dropped += s->ring_dropped;
    to->steps_lost += s->steps_lost;
    to->decode_ns += s->decode_ns;
    to->sink.emitted += s->sink.emitted;
    to->sink.dropped += s->sink.dropped;
    to->sink.failed += s->sink.failed;
    to->sink.pending += s->sink.pending;
    to->counters_available = s->counters_available; /* the same threads for every model */
}

/* The decode thread has ended: model i's tuning figures, what it changed
 * (to the log) and added to the worker's, then its run closes, before the
 * runtime it observes. */
static void close_tuning(worker *w, size_t i) {
    lt_run *run = w->runs[i];
    lt_run_state rs;
    lt_run_end(run);
    lt_run_info(run, &rs);
    FILE *f = w->o->tune->log ? w->o->tune->log : stderr;
    char *changes = NULL;
    size_t len = 0;
    lt_online_stats os = {0};
    const bool online = rs.online != NULL;
    if (online) {
        lt_online_stats_get(rs.online, &os);
        add_online(&w->st->online, &os);
        FILE *m = open_memstream(&changes, &len);
        if (m) {
            if (!lt_online_report(rs.online, m)) fprintf(m, "  no parameter changed\n");
            fclose(m);
        }
    }
    lt_tel_stats ts;
    lt_run_close_stats(run, &ts);
    w->runs[i] = NULL;
    add_tel(&w->st->tel, &ts);
    w->st->observed_steps += ts.steps;
    if (online)
        fprintf(f, "serve %s: model %s: online tuning of the batched steps: %lld trials, %lld "
                   "changes applied, %lld controls rejected; %lld of %lld observed steps in "
                   "trials, %lld ran candidates\n%s",
                w->id, w->o->models[i].name, (long long)os.trials, (long long)os.applied,
                (long long)os.rejected, (long long)os.trial_tokens, (long long)ts.steps,
                (long long)os.candidate_tokens, changes ? changes : "");
    free(changes);
}

int lt_serve_run(const lt_serve_opts *o, lt_serve_stats *st) {
    memset(st, 0, sizeof *st);
    worker w = {.o = o, .st = st};
    lt__decoder_init(&w.dec);
    pthread_mutex_init(&w.cmu, NULL);
    w.cancel_ids.size = sizeof(char *);
    lt__vec ids = {.size = sizeof(char *)};
    const char *prefix = o->prefix ? o->prefix : LT_KAFKA_TOPIC_PREFIX;
    snprintf(w.topic_req, sizeof w.topic_req, "%s%s", prefix,
             lt_kafka_topic_suffix(LT_TOPIC_REQUESTS));
    snprintf(w.topic_comp, sizeof w.topic_comp, "%s%s", prefix,
             lt_kafka_topic_suffix(LT_TOPIC_COMPLETIONS));
    snprintf(w.group, sizeof w.group, "%s", o->group ? o->group : "");
    if (!w.group[0]) snprintf(w.group, sizeof w.group, "%sserve", prefix);
    lt_kafka_member_name(o->worker_id, o->instance_id, w.id, sizeof w.id);
    int rc = setup(&w);
    if (!rc)
        lt_log(LT_LOG_INFO, "serve %s: group %s on %s -> %s, %zu models, %lld slots each, %s",
               w.id, w.group, w.topic_req, w.topic_comp, o->n_models, (long long)w.slots,
               o->at_least_once ? "at-least-once" : "exactly-once (transactions)");
    const int flush_ms = o->flush_ms > 0 ? o->flush_ms : DEFAULT_FLUSH_MS;
    lt__vec evs = {.size = sizeof(lt__event)};
    uint64_t last_commit = lt_now_ns();
    while (!rc && !atomic_load(o->stop)) {
        take_events(&w, &evs);
        if (lt_now_ns() - last_commit >= (uint64_t)flush_ms * 1000000ull) {
            bool did;
            rc = commit(&w, &did);
            last_commit = lt_now_ns();
            if (rc) break;
        }
        /* bounded admission: no more requests than slots and queue */
        const bool full = w.n_with_decode >= w.slots * (int64_t)o->n_models + w.queue;
        if (full != w.paused && lt_stage_pause(w.stage, full) == LT_OK) {
            w.paused = full;
            st->pauses += full;
            lt_log(LT_LOG_DEBUG, "serve %s: fetching %s (%lld requests held)", w.id,
                   full ? "paused" : "resumed", (long long)w.n_with_decode);
        }
        lt_record rec;
        int got = lt_stage_poll(w.stage, w.live ? flush_ms / 2 + 1 : 100, &rec);
        if (got == 1) rc = handle_record(&w, &rec);
        else if (got < 0 && got != LT_ENOTFOUND) rc = got;
        else if (got == LT_ENOTFOUND) lt_log(LT_LOG_WARN, "serve %s: %s", w.id, lt_errmsg());
        take_cancels(&w, &ids);
        sweep(&w);
    }
    char msg[512];
    snprintf(msg, sizeof msg, "%s", rc ? lt_errmsg() : "");
    /* leaving: what has ended commits; the unfinished are served again elsewhere */
    if (w.stage && !rc) {
        take_events(&w, &evs);
        bool did;
        commit(&w, &did);
    }
    if (w.cancel_started) {
        atomic_store(&w.cancel_stop, true);
        pthread_join(w.cancel_thread, NULL);
    }
    if (w.decode_started) {
        atomic_store(&w.dec.stop, true);
        pthread_mutex_lock(&w.dec.mu);
        pthread_cond_broadcast(&w.dec.inbox_cv);
        pthread_cond_broadcast(&w.dec.outbox_cv);
        pthread_mutex_unlock(&w.dec.mu);
        pthread_join(w.decode_thread, NULL);
    }
    st->steps = atomic_load(&w.dec.steps);
    st->step_s = (double)atomic_load(&w.dec.step_ns) * 1e-9;
    st->tokens = atomic_load(&w.dec.tokens);
    if (w.stage) lt_stage_stats_get(w.stage, &st->stage);
    lt_follower_close(w.cancels);
    lt_stage_close(w.stage);
    for (size_t i = 0; w.runs && i < o->n_models; i++)
        if (w.runs[i]) close_tuning(&w, i);
    for (size_t i = 0; w.batchers && i < o->n_models; i++) lt_batcher_free(w.batchers[i]);
    for (size_t i = 0; w.llamas && i < o->n_models; i++) lt_llama_free(w.llamas[i]);
    free(w.batchers);
    free(w.llamas);
    free(w.runs);
    lt_pool_free(w.pool);
    take_events(&w, &evs); /* error strings of ends nobody will commit */
    for (sreq *r = w.live, *nx; r; r = nx) {
        nx = r->next;
        sreq_free(r);
    }
    for (size_t i = 0; i < CANCEL_MEMORY; i++) free(w.cancelled[i]);
    free(evs.v);
    for (size_t i = 0; i < w.cancel_ids.n; i++) free(((char **)w.cancel_ids.v)[i]);
    free(ids.v);
    free(w.cancel_ids.v);
    pthread_mutex_destroy(&w.cmu);
    lt__decoder_destroy(&w.dec);
    free(w.pos);
    return rc ? lt_error(rc, "%s", msg) : LT_OK;
}
