/* The Llama decoder as a program: a builder that emits one kernel-call node
 * per step of the forward pass, the KV cache, and evaluation of token
 * batches through an executor. Decode (one token) uses matvec; prefill
 * (many tokens) uses matmul over the same weights and cache. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

#define LT_LLAMA_PROGRAM_CACHE 4

struct lt_llama {
    const lt_model *m;
    lt_pool *pool;
    lt_llama_opts opts;
    float *kcache, *vcache; /* [n_layers][n_slots][ctx_len][kv_dim] */
    struct {
        int64_t n;
        bool all_logits;
        bool batch; /* a batched decode step: matvecs of n tokens, not matmuls */
        lt_program *p;
        int logits; /* buffer id of the logits */
        uint64_t last_use;
        uint64_t tuned; /* the tuning generation its nodes carry */
    } progs[LT_LLAMA_PROGRAM_CACHE];
    lt_tuning *tuning; /* every value in force: kernels', the executor's, thread counts */
    lt_exec *exec;     /* runs every program: opts.executor, its parameters and schedules */
    uint64_t exec_tuned; /* the tuning generation exec's parameters come from */
    uint64_t use_clock;
    const float *logits;
    int64_t n_logit_rows;
    bool timing;
    lt_llama_sync sync;
};

static int act(lt_program *p, const char *name, int64_t ne0, int64_t ne1) {
    lt_tensor t;
    lt_tensor_init(&t, LT_F32, ne0, ne1, 1, 1, NULL);
    return lt_program_add_buffer(p, name, LT_BUF_ACT, &t);
}

static int ext(lt_program *p, const char *name, lt_buf_kind kind, const lt_tensor *t) {
    return lt_program_add_buffer(p, name, kind, t);
}

/* y = W x (ia[0] = accumulate: y += W x); matvec for one token (or each
 * token of a batched decode step: its decode bits), matmul for a prefill. */
static int linear(lt_program *p, int64_t n, bool batch, int y, int w, int x, bool acc,
                  const char *label) {
    int ops[3] = {y, w, x};
    int64_t ia[4] = {acc ? 1 : 0, 0, 0, 0};
    return lt_program_add_node(p, n == 1 || batch ? LT_K_MATVEC : LT_K_MATMUL, ops, 3, ia, NULL,
                               label);
}

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        int lt__rc = (expr);                                                                       \
        if (lt__rc < 0) goto fail;                                                                 \
    } while (0)

/* Emits the forward pass for n tokens (batch: of several sequences, by
 * matvecs). Reads top to bottom like the model. */
static int build(lt_llama *l, int64_t n, bool all_logits, bool batch, lt_program **out,
                 int *logits_id) {
    const lt_model *m = l->m;
    const lt_llama_config *c = &m->cfg;
    const int64_t hd = c->dim / c->n_heads, kv_dim = c->n_kv_heads * hd, q_dim = c->n_heads * hd;
    const int64_t ctx = l->opts.ctx_len;
    const int nth = lt_pool_size(l->pool);
    char name[64], label[64];
    lt_program *p = NULL;
    int rc = lt_program_init(&p, n == 1 ? "llama-decode" : batch ? "llama-batch" : "llama-prefill");
    if (rc) return rc;

    /* activations: one row per token */
    int x, xb, q, k, v, att, hb, hb2, scratch, emb, out_norm, cls, logits;
    CHECK(x = act(p, "x", c->dim, n));
    CHECK(xb = act(p, "xb", c->dim, n));
    CHECK(q = act(p, "q", q_dim, n));
    CHECK(k = act(p, "k", kv_dim, n));
    CHECK(v = act(p, "v", kv_dim, n));
    CHECK(att = act(p, "att", q_dim, n));
    CHECK(hb = act(p, "hb", c->hidden_dim, n));
    CHECK(hb2 = act(p, "hb2", c->hidden_dim, n));
    /* one scratch row per task: the looped executor cuts nodes finer than threads */
    CHECK(scratch = act(p, "att_scratch", ctx, (int64_t)nth * LT_EXEC_MAX_TILES));
    CHECK(emb = ext(p, "token_embd", LT_BUF_WEIGHT, &m->tok_embd));
    CHECK(out_norm = ext(p, "output_norm", LT_BUF_WEIGHT, &m->output_norm));
    CHECK(cls = ext(p, "output", LT_BUF_WEIGHT, &m->output));
    int rope_freqs = -1; /* Llama 3's per-pair divisors of the rope angle */
    if (m->rope_freqs.data) CHECK(rope_freqs = ext(p, "rope_freqs", LT_BUF_WEIGHT, &m->rope_freqs));
    const lt_rope_mode rope_mode = lt_arch_rope_mode(c->arch);

    /* x = embedding rows of the step's tokens */
    CHECK(lt_program_add_node(p, LT_K_EMBED, (int[]){x, emb}, 2, NULL, NULL, "embed"));

    for (int64_t L = 0; L < c->n_layers; L++) {
        const lt_llama_layer *w = &m->layers[L];
        int wid[9];
        const lt_tensor *wt[9] = {&w->attn_norm, &w->wq, &w->wk, &w->wv, &w->wo,
                                  &w->ffn_norm, &w->w_gate, &w->w_down, &w->w_up};
        static const char *const wn[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                          "ffn_norm", "ffn_gate", "ffn_down", "ffn_up"};
        for (int i = 0; i < 9; i++) {
            snprintf(name, sizeof name, "blk.%lld.%s", (long long)L, wn[i]);
            CHECK(wid[i] = ext(p, name, LT_BUF_WEIGHT, wt[i]));
        }
        /* the q, k, v biases the file carries (-1: none) */
        int bid[3] = {-1, -1, -1};
        const lt_tensor *bt[3] = {&w->bq, &w->bk, &w->bv};
        static const char *const bn[3] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
        for (int i = 0; i < 3; i++) {
            if (!bt[i]->data) continue;
            snprintf(name, sizeof name, "blk.%lld.%s", (long long)L, bn[i]);
            CHECK(bid[i] = ext(p, name, LT_BUF_WEIGHT, bt[i]));
        }
        lt_tensor kc, vc;
        const int64_t slots = l->opts.n_slots, plane = ctx * kv_dim;
        lt_tensor_init(&kc, LT_F32, kv_dim, ctx, slots, 1, l->kcache + L * slots * plane);
        lt_tensor_init(&vc, LT_F32, kv_dim, ctx, slots, 1, l->vcache + L * slots * plane);
        int kcid, vcid;
        snprintf(name, sizeof name, "blk.%lld.k_cache", (long long)L);
        CHECK(kcid = ext(p, name, LT_BUF_STATE, &kc));
        snprintf(name, sizeof name, "blk.%lld.v_cache", (long long)L);
        CHECK(vcid = ext(p, name, LT_BUF_STATE, &vc));

#define LBL(s) (snprintf(label, sizeof label, "blk.%lld.%s", (long long)L, s), label)
        /* attention block: xb = rmsnorm(x); q, k, v projections (+ biases);
         * rope (the arch's pairs, Llama 3's factors); cache */
        CHECK(lt_program_add_node(p, LT_K_RMSNORM, (int[]){xb, x, wid[0]}, 3, NULL,
                                  (float[]){c->rms_eps, 0, 0, 0}, LBL("attn_norm")));
        CHECK(linear(p, n, batch, q, wid[1], xb, false, LBL("q")));
        CHECK(linear(p, n, batch, k, wid[2], xb, false, LBL("k")));
        CHECK(linear(p, n, batch, v, wid[3], xb, false, LBL("v")));
        const int qkv[3] = {q, k, v};
        static const char *const bl[3] = {"q_bias", "k_bias", "v_bias"};
        for (int i = 0; i < 3; i++)
            if (bid[i] >= 0)
                CHECK(lt_program_add_node(p, LT_K_ADD, (int[]){qkv[i], qkv[i], bid[i]}, 3, NULL,
                                          NULL, LBL(bl[i])));
        CHECK(lt_program_add_node(p, LT_K_ROPE, (int[]){q, k, rope_freqs}, rope_freqs >= 0 ? 3 : 2,
                                  (int64_t[]){hd, rope_mode, 0, 0},
                                  (float[]){c->rope_base, 0, 0, 0}, LBL("rope")));
        CHECK(lt_program_add_node(p, LT_K_KV_STORE, (int[]){kcid, k}, 2, NULL, NULL, LBL("k_store")));
        CHECK(lt_program_add_node(p, LT_K_KV_STORE, (int[]){vcid, v}, 2, NULL, NULL, LBL("v_store")));
        /* att = softmax(q k^T / sqrt(hd)) v over the cache, causal, grouped-query */
        CHECK(lt_program_add_node(p, LT_K_ATTENTION, (int[]){att, q, kcid, vcid, scratch}, 5,
                                  (int64_t[]){c->n_heads, c->n_kv_heads, hd, 0}, NULL,
                                  LBL("attention")));
        /* x += Wo att (residual fused into the projection) */
        CHECK(linear(p, n, batch, x, wid[4], att, true, LBL("attn_output")));
        /* feed-forward block: x += W_down (silu(W_gate xb) * W_up xb) */
        CHECK(lt_program_add_node(p, LT_K_RMSNORM, (int[]){xb, x, wid[5]}, 3, NULL,
                                  (float[]){c->rms_eps, 0, 0, 0}, LBL("ffn_norm")));
        CHECK(linear(p, n, batch, hb, wid[6], xb, false, LBL("ffn_gate")));
        CHECK(linear(p, n, batch, hb2, wid[8], xb, false, LBL("ffn_up")));
        CHECK(lt_program_add_node(p, LT_K_SWIGLU, (int[]){hb, hb, hb2}, 3, NULL, NULL,
                                  LBL("swiglu")));
        CHECK(linear(p, n, batch, x, wid[7], hb, true, LBL("ffn_down")));
#undef LBL
    }

    /* final norm and classifier: every row, or only the last token's */
    int64_t rows = all_logits ? n : 1;
    int xs = x, xbs = xb;
    if (!all_logits && n > 1) {
        lt_tensor row;
        lt_tensor_init(&row, LT_F32, c->dim, 1, 1, 1, NULL);
        size_t off = (size_t)(n - 1) * (size_t)c->dim * sizeof(float);
        CHECK(xs = lt_program_add_view(p, "x_last", x, off, &row));
        CHECK(xbs = lt_program_add_view(p, "xb_last", xb, off, &row));
    }
    CHECK(logits = act(p, "logits", c->vocab_size, rows));
    CHECK(lt_program_add_node(p, LT_K_RMSNORM, (int[]){xbs, xs, out_norm}, 3, NULL,
                              (float[]){c->rms_eps, 0, 0, 0}, "output_norm"));
    CHECK(linear(p, rows, batch, logits, cls, xbs, false, "classifier"));
    /* every call of a batched decode step says so: its keys are the batch
     * regime's (lt_shape_of_call) */
    if (batch)
        for (int i = 0; i < lt_program_n_nodes(p); i++)
            CHECK(lt_program_set_node_flags(p, i, LT_CALL_BATCH));
    if (l->opts.dump_program) lt_program_print(p, l->opts.dump_program);
    if (!l->opts.no_fuse_pass) {
        int fused;
        CHECK(fused = lt_pass_fuse_prologues(p));
        int fused_post;
        CHECK(fused_post = lt_pass_fuse_epilogues(p));
        fused += fused_post;
        if (l->opts.dump_program && fused > 0) {
            fprintf(l->opts.dump_program, "after the fusion passes (prologues, epilogues):\n");
            lt_program_print(p, l->opts.dump_program);
        }
    }
    if (!l->opts.no_loop_pass) {
        CHECK(lt_pass_kernel_looping(p));
        if (l->opts.dump_program) {
            fprintf(l->opts.dump_program, "after the kernel-looping pass:\n");
            lt_program_print(p, l->opts.dump_program);
        }
    }
    CHECK(lt_program_finalize(p));
    *out = p;
    *logits_id = logits;
    return LT_OK;
fail:
    rc = lt_error(LT_EINVAL, "%s", lt_errmsg());
    lt_program_free(p);
    return rc;
}
#undef CHECK

/* Finds or builds the program for n tokens (all: every token's logits;
 * batch: a batched decode step). Slot 0 holds the decode program for good;
 * prefill and batch programs share the other slots, least recently used out. */
static int get_program(lt_llama *l, int64_t n, bool all, bool batch, int *slot_out) {
    all = all && n > 1;
    batch = batch && n > 1;
    for (int i = 0; i < LT_LLAMA_PROGRAM_CACHE; i++) {
        if (l->progs[i].p && l->progs[i].n == n && l->progs[i].all_logits == all &&
            l->progs[i].batch == batch) {
            l->progs[i].last_use = ++l->use_clock;
            *slot_out = i;
            return LT_OK;
        }
    }
    int slot = 0;
    if (l->progs[0].p) {
        slot = 1;
        for (int i = 1; i < LT_LLAMA_PROGRAM_CACHE; i++) {
            if (!l->progs[i].p) { slot = i; break; }
            if (l->progs[i].last_use < l->progs[slot].last_use) slot = i;
        }
    }
    lt_program *p;
    int logits;
    int rc = build(l, n, all, batch, &p, &logits);
    if (rc) return rc;
    if (l->progs[slot].p) lt__tuning_detach(l->tuning, l->progs[slot].p);
    lt_program_free(l->progs[slot].p);
    l->progs[slot].p = NULL;
    if ((rc = lt__tuning_attach(l->tuning, p))) { /* the values in force go on its nodes */
        lt_program_free(p);
        return rc;
    }
    l->progs[slot].tuned = UINT64_MAX; /* its first eval also takes the executor's values */
    l->progs[slot].p = p;
    l->progs[slot].n = n;
    l->progs[slot].all_logits = all;
    l->progs[slot].batch = batch;
    l->progs[slot].logits = logits;
    l->progs[slot].last_use = ++l->use_clock;
    *slot_out = slot;
    return LT_OK;
}

int lt_llama_init(lt_llama **out, const lt_model *m, lt_pool *pool, const lt_llama_opts *opts) {
    const lt_llama_config *c = &m->cfg;
    lt_llama *l = calloc(1, sizeof *l);
    if (!l) return lt_error(LT_ENOMEM, "out of memory");
    l->m = m;
    l->pool = pool;
    if (opts) l->opts = *opts;
    if (l->opts.ctx_len <= 0) l->opts.ctx_len = lt_llama_default_ctx(c);
    if (l->opts.ctx_len > c->seq_len) l->opts.ctx_len = c->seq_len;
    if (l->opts.max_batch <= 0) l->opts.max_batch = 256;
    if (l->opts.n_slots <= 0) l->opts.n_slots = 1;
    const int64_t seq_tokens = l->opts.ctx_len * l->opts.n_slots;
    if (l->opts.max_batch > seq_tokens) l->opts.max_batch = seq_tokens;
    int64_t kv_dim = c->n_kv_heads * (c->dim / c->n_heads);
    size_t cache_bytes =
        (size_t)(c->n_layers * l->opts.n_slots * l->opts.ctx_len * kv_dim) * sizeof(float);
    l->kcache = lt_aligned_alloc(LT_CACHE_LINE, cache_bytes);
    l->vcache = lt_aligned_alloc(LT_CACHE_LINE, cache_bytes);
    if (!l->kcache || !l->vcache) {
        lt_llama_free(l);
        return lt_error(LT_ENOMEM, "cannot allocate a KV cache of 2 x %zu bytes", cache_bytes);
    }
    int slot;
    int rc = lt_exec_init(&l->exec, (lt_executor)l->opts.executor);
    l->exec_tuned = UINT64_MAX; /* the first eval takes the context's values */
    if (!rc) rc = lt__tuning_init(&l->tuning, m, lt_pool_size(pool));
    if (!rc) rc = get_program(l, 1, false, false, &slot); /* the decode program: slot 0 */
    if (!rc && l->opts.max_batch > 1) {
        /* every prefill program has the same keys, and so has every batch
         * program: learn them now, so values for prefill and batch steps can
         * be set before the first one is built */
        for (int b = 0; b < 2 && !rc; b++) {
            lt_program *probe;
            int logits;
            rc = build(l, 2, b ? true : l->opts.all_logits, b == 1, &probe, &logits);
            if (!rc) rc = lt__tuning_learn(l->tuning, probe);
            lt_program_free(probe);
        }
    }
    if (rc) {
        lt_llama_free(l);
        return rc;
    }
    *out = l;
    return LT_OK;
}

void lt_llama_free(lt_llama *l) {
    if (!l) return;
    for (int i = 0; i < LT_LLAMA_PROGRAM_CACHE; i++) lt_program_free(l->progs[i].p);
    lt__tuning_free(l->tuning);
    lt_exec_free(l->exec);
    lt_aligned_free(l->kcache);
    lt_aligned_free(l->vcache);
    free(l);
}

const lt_model *lt_llama_model(const lt_llama *l) { return l->m; }
int64_t lt_llama_ctx_len(const lt_llama *l) { return l->opts.ctx_len; }
int64_t lt_llama_max_batch(const lt_llama *l) { return l->opts.max_batch; }
int64_t lt_llama_n_slots(const lt_llama *l) { return l->opts.n_slots; }

/* The values in force on the program in slot and on the executor, if the
 * context changed since they last took them. */
static void bring_up_to_date(lt_llama *l, int slot) {
    const uint64_t gen = lt_tuning_generation(l->tuning);
    if (l->progs[slot].tuned != gen) {
        lt__tuning_apply(l->tuning, l->progs[slot].p);
        l->progs[slot].tuned = gen;
    }
    if (l->exec_tuned != gen) { /* values already in force change nothing */
        lt_params xp;
        lt__tuning_exec_params(l->tuning, &xp);
        LT_ASSERT(lt_exec_set_params(l->exec, &xp) == LT_OK);
        l->exec_tuned = gen;
    }
}

static int check_tokens(const lt_llama *l, const int32_t *tokens, int64_t n) {
    if (n < 1 || n > l->opts.max_batch)
        return lt_error(LT_EINVAL, "batch of %lld tokens (allowed 1..%lld)", (long long)n,
                        (long long)l->opts.max_batch);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= l->m->cfg.vocab_size)
            return lt_error(LT_ERANGE, "token id %d outside the vocabulary (0..%lld)", tokens[i],
                            (long long)l->m->cfg.vocab_size - 1);
    return LT_OK;
}

static int check_slot(const lt_llama *l, int64_t slot) {
    if (slot < 0 || slot >= l->opts.n_slots)
        return lt_error(LT_ERANGE, "sequence slot %lld outside 0..%lld", (long long)slot,
                        (long long)l->opts.n_slots - 1);
    return LT_OK;
}

/* Runs the program for step (all: every token's logits; batch: a batched
 * decode step). */
static int run_step(lt_llama *l, const lt_step *step, bool all, bool batch) {
    const int64_t n = step->n_tokens;
    int slot;
    int rc = get_program(l, n, all, batch, &slot);
    if (rc) return rc;
    /* a token boundary: what changed in the tuning context since the program
     * last ran reaches it now */
    lt_program *p = l->progs[slot].p;
    bring_up_to_date(l, slot);
    lt_step st_copy = *step;
    lt_exec_stats st;
    const lt_regime regime = lt_regime_of(n, batch);
    rc = lt_exec_step(l->exec, p, l->pool, lt__tuning_threads(l->tuning, regime), &st_copy,
                      l->timing ? &st : NULL);
    if (rc) return rc;
    if (l->timing) {
        l->sync.steps++;
        l->sync.sync_points += st.sync_points;
        l->sync.wait_ns += st.wait_ns;
        l->sync.busy_ns += st.busy_ns;
    }
    const lt_tensor *lg = lt_program_buffer(l->progs[slot].p, l->progs[slot].logits);
    l->logits = lg->data;
    l->n_logit_rows = lg->ne[1];
    return LT_OK;
}

int lt_llama_eval_slot(lt_llama *l, int32_t slot, const int32_t *tokens, int64_t n, int64_t pos) {
    int rc = check_tokens(l, tokens, n);
    if (!rc) rc = check_slot(l, slot);
    if (rc) return rc;
    if (pos < 0 || pos + n > l->opts.ctx_len)
        return lt_error(LT_ERANGE, "positions %lld..%lld exceed the context length %lld",
                        (long long)pos, (long long)(pos + n - 1), (long long)l->opts.ctx_len);
    const lt_step step = {.pos = pos, .n_tokens = n, .tokens = tokens, .slot = slot};
    return run_step(l, &step, l->opts.all_logits, false);
}

int lt_llama_eval(lt_llama *l, const int32_t *tokens, int64_t n, int64_t pos) {
    return lt_llama_eval_slot(l, 0, tokens, n, pos);
}

int lt_llama_eval_batch(lt_llama *l, const int32_t *tokens, const int64_t *pos,
                        const int32_t *slots, int64_t n) {
    int rc = check_tokens(l, tokens, n);
    if (rc) return rc;
    for (int64_t t = 0; t < n; t++) {
        if ((rc = check_slot(l, slots[t]))) return rc;
        if (pos[t] < 0 || pos[t] >= l->opts.ctx_len)
            return lt_error(LT_ERANGE, "position %lld of slot %d exceeds the context length %lld",
                            (long long)pos[t], slots[t], (long long)l->opts.ctx_len);
        /* two tokens on one cache row would race (and make no sense) */
        for (int64_t u = 0; u < t; u++)
            if (slots[u] == slots[t] && pos[u] == pos[t])
                return lt_error(LT_EINVAL, "slot %d position %lld appears twice in one batch",
                                slots[t], (long long)pos[t]);
    }
    const lt_step step = {.pos = pos[0], .n_tokens = n, .tokens = tokens, .slot = slots[0],
                          .token_pos = pos, .token_slot = slots};
    return run_step(l, &step, true, true);
}

const float *lt_llama_logits(const lt_llama *l, int64_t *n_rows) {
    if (n_rows) *n_rows = l->n_logit_rows;
    return l->logits;
}

int lt_llama_program(lt_llama *l, int64_t n, struct lt_program **out) {
    if (n < 1 || n > l->opts.max_batch) return lt_error(LT_EINVAL, "no program for %lld tokens", (long long)n);
    int slot;
    int rc = get_program(l, n, l->opts.all_logits, false, &slot);
    if (rc) return rc;
    *out = l->progs[slot].p;
    return LT_OK;
}

int lt_llama_program_batch(lt_llama *l, int64_t n, struct lt_program **out) {
    if (n < 2 || n > l->opts.max_batch)
        return lt_error(LT_EINVAL, "no batch program for %lld tokens (2..%lld)", (long long)n,
                        (long long)l->opts.max_batch);
    int slot;
    int rc = get_program(l, n, true, true, &slot);
    if (rc) return rc;
    *out = l->progs[slot].p;
    return LT_OK;
}

int lt_llama_pool_size(const lt_llama *l) { return lt_pool_size(l->pool); }

int lt_llama_threads(const lt_llama *l, lt_regime r) {
    int all = lt_pool_size(l->pool);
    int t = lt__tuning_threads(l->tuning, r);
    return t > 0 && t < all ? t : all;
}

void lt_llama_sync_stats(const lt_llama *l, lt_llama_sync *out) { *out = l->sync; }
void lt_llama_set_timing(lt_llama *l, bool on) { l->timing = on; }

lt_tuning *lt_llama_tuning(lt_llama *l) { return l->tuning; }
lt_exec *lt_llama_exec(lt_llama *l) { return l->exec; }
