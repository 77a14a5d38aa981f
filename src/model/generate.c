/* The generation loop: batched prompt prefill (after what the KV cache
 * already holds), then one token at a time, sampling each next token from
 * the last logits; every token fed or drawn enters the sampler's
 * repetition window. */
#include <string.h>

#include "looptune/model.h"

/* Appends the last eval's logits rows to the dump file, if any. */
static int dump_logits(lt_llama *l, FILE *f) {
    if (!f) return LT_OK;
    int64_t rows;
    const float *logits = lt_llama_logits(l, &rows);
    size_t n = (size_t)(rows * lt_llama_model(l)->cfg.vocab_size);
    if (fwrite(logits, sizeof(float), n, f) != n) return lt_error(LT_EIO, "cannot write the logits dump");
    return LT_OK;
}

int lt_generate(lt_llama *l, lt_sampler *s, const int32_t *prompt, int64_t n_prompt,
                const lt_gen_opts *o, lt_token_cb cb, void *user, lt_gen_stats *st) {
    memset(st, 0, sizeof *st);
    const int64_t ctx = lt_llama_ctx_len(l);
    const int64_t vocab = lt_llama_model(l)->cfg.vocab_size;
    if (n_prompt < 1) return lt_error(LT_EINVAL, "empty prompt: at least one token is needed");
    if (o->n_new < 0) return lt_error(LT_EINVAL, "negative number of tokens to generate");
    if (o->n_past < 0 || o->n_past > ctx)
        return lt_error(LT_EINVAL, "%lld tokens in the cache: outside the context length %lld",
                        (long long)o->n_past, (long long)ctx);
    /* the last generated token is never fed back, so it needs no position */
    const int64_t room = ctx - o->n_past;
    if (n_prompt > room || n_prompt + o->n_new - 1 > room)
        return lt_error(LT_ERANGE,
                        "prompt (%lld tokens) + %lld new tokens exceeds the context length %lld%s",
                        (long long)n_prompt, (long long)o->n_new, (long long)ctx,
                        o->n_past ? " with the tokens already in the cache" : "");
    int64_t batch = o->prefill_batch > 0 ? o->prefill_batch : lt_llama_max_batch(l);
    if (batch > lt_llama_max_batch(l)) batch = lt_llama_max_batch(l);
    st->n_prompt = n_prompt;

    /* prefill: the prompt in batches; the last prompt token's logits remain */
    double t0 = lt_now_s();
    for (int64_t i = 0; i < n_prompt; i += batch) {
        int64_t n = n_prompt - i < batch ? n_prompt - i : batch;
        const uint64_t tb = lt_now_ns();
        int rc = lt_llama_eval(l, prompt + i, n, o->n_past + i);
        const uint64_t te = lt_now_ns();
        if (!rc) rc = dump_logits(l, o->dump_logits);
        if (rc) return rc;
        if (o->on_prefill) o->on_prefill(o->prefill_user, o->n_past + i, n, tb, te);
    }
    for (int64_t i = 0; i < n_prompt; i++) lt_sampler_accept(s, prompt[i]);
    double t1 = lt_now_s();
    st->prefill_s = t1 - t0;

    /* decode: sample, report, feed back */
    int32_t prev = prompt[n_prompt - 1];
    for (int64_t i = 0; i < o->n_new; i++) {
        int64_t rows;
        const float *last = lt_llama_logits(l, &rows) + (rows - 1) * vocab;
        /* the sampler may modify its input: give it a copy? no: logits are rewritten by the next eval */
        int32_t tok = lt_sampler_sample(s, (float *)last);
        lt_sampler_accept(s, tok);
        st->n_generated++;
        bool stop = cb && cb(user, prev, tok) != 0;
        if (stop || tok == o->stop_token || i + 1 == o->n_new) break;
        const double te = lt_now_s();
        int rc = lt_llama_eval(l, &tok, 1, o->n_past + n_prompt + i);
        st->eval_s += lt_now_s() - te;
        if (!rc) rc = dump_logits(l, o->dump_logits);
        if (rc) return rc;
        prev = tok;
    }
    st->decode_s = lt_now_s() - t1;
    return LT_OK;
}
