/* Continuous batching: the sequences of many requests decoded together over
 * one runtime's KV slots. A sequence joins at a token boundary (a free slot),
 * its prompt is prefilled in chunks, one chunk per step, by a step of its own
 * (lt_llama_eval_slot, the runtime's prefill, so its logits are the ones it
 * gets alone with the same chunk size), and every sequence that generates
 * takes one token per step in a single batched step (lt_llama_eval_batch,
 * each row bit for bit the solo decode's). Each sequence draws from its own
 * sampler (settings, seed, repetition window), so its tokens are those it
 * would generate alone, whoever shares the steps with it. It leaves at an
 * end-of-generation token, a stop string, max_tokens, a full context or a
 * cancel, and its slot is free at once. */
#define _GNU_SOURCE /* memmem */
#include "looptune/serve.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_CHUNK 64

typedef struct {
    bool used;
    int64_t id;        /* handle given by lt_batcher_add */
    int64_t order;     /* admission order: the oldest prompt is prefilled first */
    int32_t *prompt;   /* [n_prompt] */
    int64_t n_prompt;
    int64_t n_fed;     /* prompt tokens evaluated so far */
    lt_sampler *smp;
    bool greedy;       /* temperature 0: an argmax, cheaper than handing it to the pool */
    int64_t max_tokens;
    bool ignore_eos;
    char **stop;       /* [n_stop] NUL-terminated copies */
    size_t n_stop, stop_max; /* stop_max: the longest stop text's length */
    char *text;        /* the generated text so far, [text_len] bytes (for stop texts) */
    size_t text_len, text_cap;
    int32_t prev;      /* the last token fed or drawn */
    int64_t n_gen;     /* tokens reported */
    bool pending;      /* prev was drawn and awaits the next decode step */
    void *user;
} seq;

struct lt_batcher {
    lt_llama *l;
    const lt_vocab *vocab; /* NULL: the model has none (no text, no end of generation) */
    int64_t vocab_size, ctx, n_slots, chunk;
    lt_batcher_opts o;
    seq *seqs;         /* [n_slots], index = slot */
    int64_t next_id, next_order;
    /* one decode step's rows, [n_slots] each: fed token, slot, position, token drawn */
    int32_t *tok, *slot, *drawn;
    int64_t *pos;
    int64_t step_rows, step_pos; /* the step in progress: its batched eval's rows, row 0's pos */
};

static const char *const finish_names[LT_FINISH_COUNT] = {
    [LT_FINISH_NONE] = "",          [LT_FINISH_STOP] = "stop",
    [LT_FINISH_LENGTH] = "length",  [LT_FINISH_CANCELLED] = "cancelled",
    [LT_FINISH_DEADLINE] = "deadline", [LT_FINISH_ERROR] = "error",
};
_Static_assert(sizeof finish_names / sizeof finish_names[0] == LT_FINISH_COUNT, "finish names");

const char *lt_finish_name(lt_finish f) {
    return (int)f >= 0 && f < LT_FINISH_COUNT ? finish_names[f] : "";
}

int lt_batcher_init(lt_batcher **out, lt_llama *l, const lt_batcher_opts *o) {
    *out = NULL;
    lt_batcher *b = calloc(1, sizeof *b);
    if (!b) return lt_error(LT_ENOMEM, "batcher: out of memory");
    const lt_model *m = lt_llama_model(l);
    b->l = l;
    b->vocab = m->vocab;
    b->vocab_size = m->cfg.vocab_size;
    b->ctx = lt_llama_ctx_len(l);
    b->n_slots = lt_llama_n_slots(l);
    b->o = *o;
    b->chunk = o->prefill_chunk > 0 ? o->prefill_chunk : DEFAULT_CHUNK;
    if (b->chunk > lt_llama_max_batch(l)) b->chunk = lt_llama_max_batch(l);
    b->seqs = calloc((size_t)b->n_slots, sizeof *b->seqs);
    b->tok = calloc((size_t)b->n_slots, sizeof *b->tok);
    b->slot = calloc((size_t)b->n_slots, sizeof *b->slot);
    b->pos = calloc((size_t)b->n_slots, sizeof *b->pos);
    b->drawn = calloc((size_t)b->n_slots, sizeof *b->drawn);
    if (!b->seqs || !b->tok || !b->slot || !b->pos || !b->drawn) {
        lt_batcher_free(b);
        return lt_error(LT_ENOMEM, "batcher: out of memory");
    }
    *out = b;
    return LT_OK;
}

static void seq_clear(seq *s) {
    free(s->prompt);
    lt_sampler_free(s->smp);
    for (size_t i = 0; i < s->n_stop; i++) free(s->stop[i]);
    free(s->stop);
    free(s->text);
    memset(s, 0, sizeof *s);
}

void lt_batcher_free(lt_batcher *b) {
    if (!b) return;
    for (int64_t i = 0; b->seqs && i < b->n_slots; i++) seq_clear(&b->seqs[i]);
    free(b->seqs);
    free(b->tok);
    free(b->slot);
    free(b->pos);
    free(b->drawn);
    free(b);
}

int64_t lt_batcher_active(const lt_batcher *b) {
    int64_t n = 0;
    for (int64_t i = 0; i < b->n_slots; i++) n += b->seqs[i].used;
    return n;
}

int64_t lt_batcher_slots(const lt_batcher *b) { return b->n_slots; }

int lt_batcher_add(lt_batcher *b, const lt_batcher_req *r, int64_t *id) {
    *id = -1;
    if (r->n_prompt < 1) return lt_error(LT_EINVAL, "empty prompt: at least one token is needed");
    if (r->n_prompt > b->ctx)
        return lt_error(LT_ERANGE, "prompt of %lld tokens is longer than the context (%lld)",
                        (long long)r->n_prompt, (long long)b->ctx);
    if (r->max_tokens < 1) return lt_error(LT_EINVAL, "max_tokens must be at least 1");
    for (int64_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= b->vocab_size)
            return lt_error(LT_EINVAL, "prompt token %d outside the vocabulary (0..%lld)",
                            (int)r->prompt[i], (long long)b->vocab_size - 1);
    seq *s = NULL;
    for (int64_t i = 0; i < b->n_slots && !s; i++)
        if (!b->seqs[i].used) s = &b->seqs[i];
    if (!s) return lt_error(LT_ESTATE, "every one of the %lld slots is taken", (long long)b->n_slots);
    int rc = lt_sampler_init_opts(&s->smp, b->vocab_size, &r->sampling);
    if (rc) return rc;
    s->greedy = r->sampling.temp == 0.0f;
    s->prompt = malloc((size_t)r->n_prompt * sizeof *s->prompt);
    s->stop = r->n_stop ? calloc(r->n_stop, sizeof *s->stop) : NULL;
    if (!s->prompt || (r->n_stop && !s->stop)) goto oom;
    memcpy(s->prompt, r->prompt, (size_t)r->n_prompt * sizeof *s->prompt);
    for (size_t i = 0; i < r->n_stop; i++) {
        if (!r->stop[i][0]) continue; /* an empty stop text would stop everything: ignored */
        if (!(s->stop[s->n_stop] = strdup(r->stop[i]))) goto oom;
        size_t len = strlen(r->stop[i]);
        if (len > s->stop_max) s->stop_max = len;
        s->n_stop++;
    }
    s->used = true;
    s->id = b->next_id++;
    s->order = b->next_order++;
    s->n_prompt = r->n_prompt;
    s->max_tokens = r->max_tokens;
    s->ignore_eos = r->ignore_eos;
    s->prev = r->prompt[r->n_prompt - 1];
    s->user = r->user;
    *id = s->id;
    return LT_OK;
oom:
    seq_clear(s);
    return lt_error(LT_ENOMEM, "batcher: out of memory");
}

/* Ends s: reported, then its slot is free. */
static void finish(lt_batcher *b, seq *s, lt_finish why, const char *error) {
    void *user = s->user;
    int64_t n_prompt = s->n_prompt, n_gen = s->n_gen;
    char msg[512] = "";
    if (error) snprintf(msg, sizeof msg, "%s", error);
    seq_clear(s);
    if (b->o.on_finish) b->o.on_finish(b->o.ctx, user, why, error ? msg : NULL, n_prompt, n_gen);
}

int lt_batcher_cancel(lt_batcher *b, int64_t id, lt_finish why) {
    for (int64_t i = 0; i < b->n_slots; i++)
        if (b->seqs[i].used && b->seqs[i].id == id) {
            finish(b, &b->seqs[i], why, NULL);
            return LT_OK;
        }
    return lt_error(LT_ENOTFOUND, "sequence %lld has ended", (long long)id);
}

/* Appends the token's text to s's text; whether a stop text now ends it. */
static bool text_stops(seq *s, const char *p, size_t n) {
    if (!s->n_stop) return false;
    if (s->text_len + n > s->text_cap) {
        size_t cap = s->text_cap ? s->text_cap : 256;
        while (cap < s->text_len + n) cap *= 2;
        char *t = realloc(s->text, cap);
        if (!t) return false; /* no memory to look: the sequence goes on to its other ends */
        s->text = t;
        s->text_cap = cap;
    }
    memcpy(s->text + s->text_len, p, n);
    s->text_len += n;
    /* a stop text that ends in these bytes starts at most stop_max - 1 before them */
    size_t from = s->text_len - n, back = s->stop_max ? s->stop_max - 1 : 0;
    from = from > back ? from - back : 0;
    for (size_t i = 0; i < s->n_stop; i++)
        if (memmem(s->text + from, s->text_len - from, s->stop[i], strlen(s->stop[i])))
            return true;
    return false;
}

/* Takes tok, drawn by s's sampler, as s's next token, reports it, and ends
 * s where it ends. */
static void take(lt_batcher *b, seq *s, int32_t tok) {
    lt_sampler_accept(s->smp, tok);
    if (!s->ignore_eos && b->vocab && lt_vocab_is_eog(b->vocab, tok)) {
        finish(b, s, LT_FINISH_STOP, NULL); /* an end of generation is not text */
        return;
    }
    char buf[256];
    size_t n = 0;
    if (b->vocab) {
        n = lt_detokenize(b->vocab, s->prev, tok, buf, sizeof buf);
        if (n >= sizeof buf) n = sizeof buf - 1;
    }
    const int64_t index = s->n_gen++;
    if (b->o.on_token) b->o.on_token(b->o.ctx, s->user, index, tok, buf, n);
    s->prev = tok;
    if (text_stops(s, buf, n)) {
        finish(b, s, LT_FINISH_STOP, NULL);
        return;
    }
    /* the token just drawn goes at position n_prompt + n_gen - 1 to draw another */
    if (s->n_gen >= s->max_tokens || s->n_prompt + s->n_gen > b->ctx) {
        finish(b, s, LT_FINISH_LENGTH, NULL);
        return;
    }
    s->pending = true;
}

/* The next chunk of the oldest prompt not prefilled yet; its first token
 * when the prompt is done. Returns the tokens evaluated. */
static int64_t prefill_step(lt_batcher *b) {
    seq *s = NULL;
    for (int64_t i = 0; i < b->n_slots; i++) {
        seq *q = &b->seqs[i];
        if (q->used && q->n_fed < q->n_prompt && (!s || q->order < s->order)) s = q;
    }
    if (!s) return 0;
    int64_t n = s->n_prompt - s->n_fed < b->chunk ? s->n_prompt - s->n_fed : b->chunk;
    int rc = lt_llama_eval_slot(b->l, (int32_t)(s - b->seqs), s->prompt + s->n_fed, n, s->n_fed);
    if (rc) {
        finish(b, s, LT_FINISH_ERROR, lt_errmsg());
        return n;
    }
    s->n_fed += n;
    if (s->n_fed == s->n_prompt) {
        /* as lt_generate: the whole prompt enters the window, then the first draw */
        for (int64_t i = 0; i < s->n_prompt; i++) lt_sampler_accept(s->smp, s->prompt[i]);
        int64_t rows;
        float *logits = (float *)lt_llama_logits(b->l, &rows);
        take(b, s, lt_sampler_sample(s->smp, logits + (size_t)(rows - 1) * (size_t)b->vocab_size));
    }
    return n;
}

/* A decode step's rows drawn on the pool: thread ith takes rows ith, ith + nth, ... (each
 * sampler touches only its own state and its row). */
typedef struct {
    lt_batcher *b;
    float *logits;
    int64_t n;
} sample_job;

static void sample_rows(void *arg, int ith, int nth) {
    const sample_job *j = arg;
    lt_batcher *b = j->b;
    for (int64_t r = ith; r < j->n; r += nth)
        b->drawn[r] = lt_sampler_sample(b->seqs[b->slot[r]].smp,
                                        j->logits + (size_t)r * (size_t)b->vocab_size);
}

/* One token of every sequence that has drawn one and waits to feed it. */
static int64_t decode_step(lt_batcher *b) {
    int64_t n = 0;
    for (int64_t i = 0; i < b->n_slots; i++) {
        seq *s = &b->seqs[i];
        if (!s->used || !s->pending) continue;
        b->tok[n] = s->prev;
        b->pos[n] = s->n_prompt + s->n_gen - 1;
        b->slot[n] = (int32_t)i;
        n++;
    }
    if (!n) return 0;
    if (b->o.run) lt_run_batch_begin(b->o.run, n);
    b->step_rows = n;
    b->step_pos = b->pos[0];
    int rc = lt_llama_eval_batch(b->l, b->tok, b->pos, b->slot, n);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", lt_errmsg());
        for (int64_t r = 0; r < n; r++) finish(b, &b->seqs[b->slot[r]], LT_FINISH_ERROR, msg);
        return n;
    }
    sample_job job = {b, (float *)lt_llama_logits(b->l, NULL), n};
    int64_t sampled = 0;
    for (int64_t r = 0; r < n; r++) sampled += !b->seqs[b->slot[r]].greedy;
    const int nth = b->o.pool ? lt_pool_size(b->o.pool) : 1;
    if (nth > 1 && sampled > 1) lt_pool_run_n(b->o.pool, n < nth ? (int)n : nth, sample_rows, &job);
    else sample_rows(&job, 0, 1);
    /* then in row order, as one after the other: reports, stop texts, ends */
    for (int64_t r = 0; r < n; r++) {
        seq *s = &b->seqs[b->slot[r]];
        s->pending = false;
        take(b, s, b->drawn[r]);
    }
    return n;
}

int lt_batcher_step(lt_batcher *b, int64_t *n_tokens) {
    b->step_rows = 0;
    int64_t n = prefill_step(b);
    n += decode_step(b);
    /* the step's end (after its sampling, as a run's token boundary) */
    if (b->o.run) lt_run_batch_end(b->o.run, b->step_rows, b->step_pos);
    if (n_tokens) *n_tokens = n;
    return LT_OK;
}
