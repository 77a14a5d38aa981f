/* The serve worker's two threads and what they share: a request as both
 * see it, the growable vectors of the mailboxes, and the decoder (the
 * decode thread's state and its inbox and outbox). */
#ifndef LT_SERVE_INTERNAL_H
#define LT_SERVE_INTERNAL_H

#include <pthread.h>

#include "looptune/serve.h"

/* A request read from the requests topic. */
typedef struct lt__sreq lt__sreq;
struct lt__sreq {
    /* set by the Kafka thread before the decode thread sees it, read-only after */
    char *id;
    int32_t partition;
    int64_t offset;
    int model;       /* index in the options' models; -1: none of them (an error) */
    int32_t *prompt; /* [n_prompt] */
    int64_t n_prompt;
    lt_sampler_opts smp;
    int64_t max_tokens;
    bool ignore_eos;
    char **stop;     /* [n_stop] */
    size_t n_stop;
    uint64_t deadline_ns; /* CLOCK_REALTIME; 0 none */
    /* the decode thread's */
    int64_t bid;     /* batcher handle */
    /* the Kafka thread's */
    bool with_decode;  /* admitted, and its end not received yet */
    bool cancel_sent;
    bool revoked;      /* its partition went: nothing of it is committed */
    bool finished;     /* its end received (or decided here) */
    lt_finish why;
    char *error;
    const char *error_code; /* with an error: Completion.error_code (static) */
    int64_t usage_prompt;
    int32_t *toks;     /* [n_toks] history */
    size_t *text_off;  /* [n_toks + 1] offsets into text */
    char *text;
    size_t n_toks, cap_toks, text_len, cap_text;
    size_t committed;  /* tokens whose records are committed */
    lt__sreq *next;
};

/* A vector of items of `size` bytes. */
typedef struct {
    void *v;
    size_t n, cap, size;
} lt__vec;
int lt__vec_push(lt__vec *x, const void *item); /* LT_ENOMEM */
void lt__vec_swap(lt__vec *a, lt__vec *b);
/* Removes pointer r from a vector of pointers; whether it was there. */
bool lt__vec_remove_ptr(lt__vec *x, const void *r);

/* Kafka thread -> decode thread. */
enum { LT__CMD_ADMIT, LT__CMD_CANCEL, LT__CMD_DROP, LT__CMD_CANCEL_ID };
typedef struct {
    int kind;
    lt__sreq *r;
    lt_finish why; /* CANCEL: the reason it ends with */
    char *id;      /* CANCEL_ID: the request id (malloc'd; the decode thread frees it) */
} lt__command;

/* Decode thread -> Kafka thread. */
enum { LT__EV_TOKEN, LT__EV_FINISH };
typedef struct {
    int kind;
    lt__sreq *r;
    int64_t index;
    int32_t token;
    lt_finish why;
    int64_t n_prompt;
    char *error;    /* FINISH with an error: malloc'd, the taker frees */
    uint16_t len;
    char text[256];
} lt__event;

/* Events held for the Kafka thread; the decode thread waits beyond (Kafka
 * stalled for seconds). */
#define LT__OUTBOX_MAX 65536

/* The decode thread's state. mu guards inbox and outbox alone and is held
 * only to append or swap, never across I/O or a step. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t inbox_cv, outbox_cv;
    lt__vec inbox;  /* lt__command */
    lt__vec outbox; /* lt__event */
    _Atomic bool stop;
    _Atomic int64_t steps, tokens;
    _Atomic int64_t step_ns; /* wall time inside lt_batcher_step, summed */
    lt_batcher **batchers; /* [n_batchers], one per model; the decode thread's */
    size_t n_batchers;
    int step_delay_ms;     /* tests: a sleep after every step */
    const char *id;        /* for the logs */
    lt__vec waiting;       /* lt__sreq*: admitted, no slot yet (the decode thread's) */
    lt__vec active;        /* lt__sreq*: in a batcher (the decode thread's) */
} lt__decoder;

/* Sets up d's mailboxes (batchers and the rest are the caller's to fill). */
void lt__decoder_init(lt__decoder *d);
void lt__decoder_destroy(lt__decoder *d); /* the thread must have ended */
/* The decode thread: steps until d->stop; arg is the decoder. Its batchers'
 * callbacks must have the decoder as ctx (lt__decoder_on_token/_finish). */
void *lt__decoder_main(void *arg);
void lt__decoder_on_token(void *ctx, void *user, int64_t index, int32_t token, const char *text,
                          size_t len);
void lt__decoder_on_finish(void *ctx, void *user, lt_finish why, const char *error,
                           int64_t n_prompt, int64_t n_generated);
/* Kafka thread: queues a command and wakes the decode thread. */
void lt__decoder_command(lt__decoder *d, int kind, lt__sreq *r, lt_finish why);
/* Any thread: cancels the requests of this id the decode thread holds (by
 * the id alone: the caller need not know the request). */
void lt__decoder_cancel_id(lt__decoder *d, const char *id);
/* Kafka thread: swaps the outbox for *evs (which must be empty). */
void lt__decoder_take(lt__decoder *d, lt__vec *evs);

#endif
