/* The serve worker's decode thread: it owns the batchers (one per model)
 * and does nothing but steps. Between steps it takes the Kafka thread's
 * commands (admit, cancel, drop) from its inbox, ends the requests whose
 * deadline has passed, and moves waiting requests into free slots; what
 * the steps make (a token, an end) goes to its outbox. It never touches
 * Kafka, and the mutex it shares with the Kafka thread is held only to
 * append to or swap a vector. */
#include "serve/serve_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int lt__vec_push(lt__vec *x, const void *item) {
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 64;
        void *v = realloc(x->v, cap * x->size);
        if (!v) return LT_ENOMEM;
        x->v = v;
        x->cap = cap;
    }
    memcpy((char *)x->v + x->n * x->size, item, x->size);
    x->n++;
    return LT_OK;
}

void lt__vec_swap(lt__vec *a, lt__vec *b) {
    lt__vec t = *a;
    *a = *b;
    *b = t;
}

bool lt__vec_remove_ptr(lt__vec *x, const void *r) {
    void **v = x->v;
    for (size_t i = 0; i < x->n; i++)
        if (v[i] == r) {
            memmove(v + i, v + i + 1, (x->n - i - 1) * sizeof *v);
            x->n--;
            return true;
        }
    return false;
}

void lt__decoder_init(lt__decoder *d) {
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->inbox_cv, NULL);
    pthread_cond_init(&d->outbox_cv, NULL);
    d->inbox.size = sizeof(lt__command);
    d->outbox.size = sizeof(lt__event);
    d->waiting.size = d->active.size = sizeof(lt__sreq *);
}

void lt__decoder_destroy(lt__decoder *d) {
    for (size_t i = 0; i < d->outbox.n; i++) free(((lt__event *)d->outbox.v)[i].error);
    for (size_t i = 0; i < d->inbox.n; i++) free(((lt__command *)d->inbox.v)[i].id);
    free(d->inbox.v);
    free(d->outbox.v);
    free(d->waiting.v);
    free(d->active.v);
    pthread_cond_destroy(&d->inbox_cv);
    pthread_cond_destroy(&d->outbox_cv);
    pthread_mutex_destroy(&d->mu);
}

void lt__decoder_command(lt__decoder *d, int kind, lt__sreq *r, lt_finish why) {
    lt__command c = {.kind = kind, .r = r, .why = why};
    pthread_mutex_lock(&d->mu);
    int rc = lt__vec_push(&d->inbox, &c);
    pthread_cond_signal(&d->inbox_cv);
    pthread_mutex_unlock(&d->mu);
    if (rc) lt_log(LT_LOG_ERROR, "serve %s: out of memory: command lost", d->id);
}

void lt__decoder_cancel_id(lt__decoder *d, const char *id) {
    lt__command c = {.kind = LT__CMD_CANCEL_ID, .why = LT_FINISH_CANCELLED, .id = strdup(id)};
    if (!c.id) return;
    pthread_mutex_lock(&d->mu);
    int rc = lt__vec_push(&d->inbox, &c);
    pthread_cond_signal(&d->inbox_cv);
    pthread_mutex_unlock(&d->mu);
    if (rc) free(c.id);
}

void lt__decoder_take(lt__decoder *d, lt__vec *evs) {
    pthread_mutex_lock(&d->mu);
    lt__vec_swap(evs, &d->outbox);
    pthread_cond_broadcast(&d->outbox_cv);
    pthread_mutex_unlock(&d->mu);
}

/* Queues an event for the Kafka thread; waits only when LT__OUTBOX_MAX are queued. */
static void emit(lt__decoder *d, const lt__event *e) {
    pthread_mutex_lock(&d->mu);
    while (d->outbox.n >= LT__OUTBOX_MAX && !atomic_load(&d->stop))
        pthread_cond_wait(&d->outbox_cv, &d->mu);
    if (lt__vec_push(&d->outbox, e)) lt_log(LT_LOG_ERROR, "serve %s: out of memory: event lost", d->id);
    pthread_mutex_unlock(&d->mu);
}

static void emit_finish(lt__decoder *d, lt__sreq *r, lt_finish why, const char *error,
                        int64_t n_prompt) {
    lt__event e = {.kind = LT__EV_FINISH, .r = r, .why = why, .n_prompt = n_prompt};
    if (error) e.error = strdup(error);
    emit(d, &e);
}

void lt__decoder_on_token(void *ctx, void *user, int64_t index, int32_t token, const char *text,
                          size_t len) {
    lt__decoder *d = ctx;
    lt__event e = {.kind = LT__EV_TOKEN, .r = user, .index = index, .token = token};
    if (len > sizeof e.text) len = sizeof e.text;
    memcpy(e.text, text, len);
    e.len = (uint16_t)len;
    atomic_fetch_add(&d->tokens, 1);
    emit(d, &e);
}

void lt__decoder_on_finish(void *ctx, void *user, lt_finish why, const char *error,
                           int64_t n_prompt, int64_t n_generated) {
    (void)n_generated; /* the Kafka thread counts the tokens it received */
    lt__decoder *d = ctx;
    lt__vec_remove_ptr(&d->active, user);
    emit_finish(d, user, why, error, n_prompt);
}

/* Ends r wherever the decode thread holds it. Looked up by pointer before
 * any use: a command about a request that has ended already finds nothing
 * (commands are taken in order, so a request allocated later at the same
 * address is admitted after this command). */
static void end_request(lt__decoder *d, lt__sreq *r, lt_finish why) {
    lt__sreq **v = d->active.v;
    for (size_t i = 0; i < d->active.n; i++)
        if (v[i] == r) {
            /* on_finish reports it and takes it off the active list */
            if (lt_batcher_cancel(d->batchers[r->model], r->bid, why)) {
                lt__vec_remove_ptr(&d->active, r);
                emit_finish(d, r, why, NULL, r->n_prompt);
            }
            return;
        }
    if (lt__vec_remove_ptr(&d->waiting, r)) emit_finish(d, r, why, NULL, r->n_prompt);
}

/* Ends every request of this id held here (its id is fixed before it is admitted). */
static void end_by_id(lt__decoder *d, const char *id, lt_finish why) {
    for (lt__vec *x = &d->active;; x = &d->waiting) {
        for (size_t i = 0; i < x->n;) {
            lt__sreq *r = ((lt__sreq **)x->v)[i];
            if (r->id && !strcmp(r->id, id)) end_request(d, r, why); /* it leaves x: i stays */
            else i++;
        }
        if (x == &d->waiting) break;
    }
}

static void end_past_deadline(lt__decoder *d, lt__vec *x, uint64_t now) {
    for (size_t i = 0; i < x->n;) {
        lt__sreq *r = ((lt__sreq **)x->v)[i];
        if (r->deadline_ns && now > r->deadline_ns) end_request(d, r, LT_FINISH_DEADLINE);
        else i++; /* an ended request left the vector: i stays */
    }
}

/* Waiting requests into free slots, oldest first (per model). */
static void admit(lt__decoder *d) {
    for (size_t i = 0; i < d->waiting.n;) {
        lt__sreq *r = ((lt__sreq **)d->waiting.v)[i];
        lt_batcher *b = d->batchers[r->model];
        if (lt_batcher_active(b) >= lt_batcher_slots(b)) {
            i++;
            continue;
        }
        lt_batcher_req br = {.prompt = r->prompt, .n_prompt = r->n_prompt, .sampling = r->smp,
                             .max_tokens = r->max_tokens, .ignore_eos = r->ignore_eos,
                             .stop = (const char *const *)r->stop, .n_stop = r->n_stop,
                             .user = r};
        lt__vec_remove_ptr(&d->waiting, r);
        int rc = lt_batcher_add(b, &br, &r->bid);
        if (rc) emit_finish(d, r, LT_FINISH_ERROR, lt_errmsg(), r->n_prompt);
        else if (lt__vec_push(&d->active, &r)) lt_batcher_cancel(b, r->bid, LT_FINISH_ERROR);
    }
}

void *lt__decoder_main(void *arg) {
    lt__decoder *d = arg;
    lt__vec cmds = {.size = sizeof(lt__command)};
    while (!atomic_load(&d->stop)) {
        pthread_mutex_lock(&d->mu);
        if (!d->inbox.n && !d->active.n) {
            /* idle: wait for a command, waking now and then for deadlines */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 20000000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&d->inbox_cv, &d->mu, &ts);
        }
        lt__vec_swap(&cmds, &d->inbox);
        pthread_mutex_unlock(&d->mu);
        for (size_t i = 0; i < cmds.n; i++) {
            lt__command *c = &((lt__command *)cmds.v)[i];
            if (c->kind == LT__CMD_ADMIT) {
                if (lt__vec_push(&d->waiting, &c->r))
                    emit_finish(d, c->r, LT_FINISH_ERROR, "out of memory", c->r->n_prompt);
            } else if (c->kind == LT__CMD_CANCEL_ID) {
                end_by_id(d, c->id, c->why);
                free(c->id);
            } else {
                end_request(d, c->r, c->kind == LT__CMD_DROP ? LT_FINISH_CANCELLED : c->why);
            }
        }
        cmds.n = 0;
        const uint64_t now = lt_wall_ns();
        end_past_deadline(d, &d->active, now);
        end_past_deadline(d, &d->waiting, now);
        admit(d);
        if (!d->active.n) continue;
        for (size_t m = 0; m < d->n_batchers; m++) {
            if (!lt_batcher_active(d->batchers[m])) continue;
            const uint64_t t0 = lt_now_ns();
            lt_batcher_step(d->batchers[m], NULL);
            atomic_fetch_add(&d->step_ns, (int64_t)(lt_now_ns() - t0));
            atomic_fetch_add(&d->steps, 1);
        }
        if (d->step_delay_ms > 0) {
            struct timespec ts = {d->step_delay_ms / 1000, (long)(d->step_delay_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    /* leaving: what is still held ends unreported (nothing more of it is committed) */
    free(cmds.v);
    return NULL;
}
