/* The search of a model's configurations, one config store key at a time:
 * what `looptune tune` runs for every key and a tune task of the
 * distributed layer for one. A pass is one regime's program after one real
 * step on its own buffers; each distinct (kernel, shape) of it is timed in
 * isolation, every layer's instance back to back (lt_node_timer), the
 * looped executor's parameters and a regime's thread count on whole steps.
 * Candidates from the strategy are measured interleaved with the incumbent
 * and adopted only when the paired comparison says faster; a final, longer
 * comparison of the default against the winner is the verdict. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/tune.h"

enum { PAIRS = 8, FINAL_PAIRS = 16 };
/* A comparison goes on past its pairs, up to EXTEND times as many, until it
 * has MIN_CLEAN pairs measured without preemption (a busy machine). */
enum { EXTEND = 3, MIN_CLEAN = 5, MAX_PAIRS = FINAL_PAIRS * EXTEND };
static const double MARGIN = 0.01;          /* "faster" means by more than 1% */
static const double CONTENDED_WEIGHT = 0.1; /* weight of a pair measured while preempted */
static const double MIN_SAMPLE_NS = 200e3;  /* a sample repeats the node to last this long */

/* What one measurement runs: a node's instances, or a whole step under the
 * executor's parameters or on a number of threads. */
typedef struct {
    lt_node_timer *timer;
    int reps;
    /* whole steps under the values of (name, key) in l's tuning context: the
     * executor's parameters or a regime's thread count */
    lt_llama *l;
    const char *name, *key;
    const int32_t *toks;
    int64_t n_tokens, pos;
    const int64_t *token_pos;  /* a batched step: each token's position ... */
    const int32_t *token_slot; /* ... and slot (else NULL) */
    int rc; /* the first error of a whole step; later measurements are skipped */
} target;

static double measure(target *t, const lt_params *p, bool *busy) {
    double ns = 0;
    bool any = false;
    for (int r = 0; r < t->reps && !t->rc; r++) {
        bool b = false;
        if (t->timer) {
            ns += lt_node_timer_run(t->timer, p, &b);
        } else {
            int rc = lt_tuning_set(lt_llama_tuning(t->l), t->name, t->key, p);
            uint64_t t0 = lt_now_ns();
            if (!rc)
                rc = t->token_pos ? lt_llama_eval_batch(t->l, t->toks, t->token_pos,
                                                        t->token_slot, t->n_tokens)
                                  : lt_llama_eval(t->l, t->toks, t->n_tokens, t->pos);
            ns += (double)(lt_now_ns() - t0);
            if (rc) t->rc = rc;
        }
        any |= b;
    }
    if (busy) *busy = any;
    return ns / t->reps;
}

/* Interleaved pairs: incumbent then candidate, at least n of them (more on
 * a busy machine, see EXTEND). *n_out gets the pairs measured. */
static int compare(target *t, const lt_params *inc, const lt_params *cand, int n, uint64_t seed,
                   double *a, double *b, bool *busy, int *n_out, lt_compare_result *res) {
    int i = 0, clean = 0;
    while (i < n || (clean < MIN_CLEAN && i < n * EXTEND)) {
        bool ba, bb;
        a[i] = measure(t, inc, &ba);
        b[i] = measure(t, cand, &bb);
        busy[i] = ba || bb;
        clean += !busy[i];
        i++;
    }
    *n_out = i;
    if (t->rc) return t->rc;
    return lt_compare_paired(a, b, busy, i, MARGIN, CONTENDED_WEIGHT, seed, res);
}

/* Searches one space; check validates a candidate on the real call (NULL:
 * the space is the whole constraint). Fills r (its kernel and shape set by
 * the caller). */
static int search(target *t, const lt_space *sp, const lt_tune_context *ctx,
                  const lt_tune_opts *o, lt_kernel_id kid, const lt_call *call,
                  lt_tune_result *r) {
    const int budget = o->budget;
    const uint64_t seed = o->seed;
    lt_params def, inc;
    lt_space_default(sp, &def);
    inc = def;
    /* calibrate repetitions so one sample lasts MIN_SAMPLE_NS */
    t->reps = 1;
    measure(t, &def, NULL); /* warm-up */
    double one = measure(t, &def, NULL);
    t->reps = one >= MIN_SAMPLE_NS ? 1 : (int)(MIN_SAMPLE_NS / (one > 1 ? one : 1)) + 1;
    if (t->reps > 10000) t->reps = 10000;
    double ds[PAIRS];
    for (int i = 0; i < PAIRS; i++) ds[i] = measure(t, &def, NULL);
    if (t->rc) return t->rc;
    double inc_cost = lt_median(ds, PAIRS);

    lt_strategy *st;
    int rc = lt_strategy_init(&st, o->strategy, sp, ctx, seed);
    if (rc) return rc;
    lt_strategy_observe(st, &def, ds, PAIRS);
    int used = 0;
    double a[MAX_PAIRS], b[MAX_PAIRS], costs[MAX_PAIRS];
    bool busy[MAX_PAIRS];
    int np;
    while (used < budget) {
        lt_params cand;
        int k = lt_strategy_propose(st, &cand, 1);
        if (k < 0) {
            rc = k;
            break;
        }
        if (k == 0) break; /* space exhausted */
        used++;
        if (call && lt_config_check(kid, call, &cand) != LT_OK) {
            lt_log(LT_LOG_DEBUG, "%s: candidate refused: %s", r->kernel, lt_errmsg());
            lt_strategy_observe(st, &cand, NULL, 0);
            continue;
        }
        lt_compare_result res;
        if ((rc = compare(t, &inc, &cand, PAIRS, seed + (uint64_t)used, a, b, busy, &np, &res)))
            break;
        /* costs relative to the incumbent's, so slow drifts cancel; clean
         * pairs only, unless there are none */
        int nc = 0;
        for (int i = 0; i < np; i++)
            if (!busy[i] || res.n_clean == 0) costs[nc++] = inc_cost * b[i] / a[i];
        lt_strategy_observe(st, &cand, costs, nc);
        if (res.faster) {
            inc = cand;
            inc_cost *= res.ratio;
        }
        if (o->progress)
            o->progress(o->arg, sp->name, r->shape, used, budget, lt_median(ds, PAIRS) / inc_cost);
    }
    lt_strategy_free(st);
    if (o->progress) o->progress(o->arg, sp->name, r->shape, 0, budget, 0);
    if (rc) return rc;
    /* the verdict: default against the incumbent, more pairs */
    lt_compare_result fin;
    if ((rc = compare(t, &def, &inc, FINAL_PAIRS, seed ^ 0xf1a1, a, b, busy, &np, &fin)))
        return rc;
    if (!fin.faster) inc = def, fin.b_median = fin.a_median, fin.ratio = 1.0;
    /* a node's sample runs each of its loop's instances: per call, as
     * telemetry counts (a step's sample is one step) */
    const double calls = t->timer ? lt_node_timer_instances(t->timer) : 1;
    r->def_ns = fin.a_median / calls;
    r->tuned_ns = fin.b_median / calls;
    r->speedup = 1.0 / fin.ratio;
    r->trials = used;
    r->samples = np;
    r->best = inc;
    lt_space_format(sp, &inc, r->params, sizeof r->params);
    return LT_OK;
}

/* ---- a pass: one regime's program and its keys ------------------------------------ */

/* Whether l's steps stream their weights from memory: more of them than the
 * last-level cache holds (the L2 where the L3 is unknown). Its nodes are
 * then timed cold. */
static bool weights_stream(const lt_llama *l) {
    const lt_cpu_info *c = lt_cpu();
    const size_t llc = c->l3_bytes ? c->l3_bytes : c->l2_bytes;
    return llc && lt_model_weight_bytes_per_token(lt_llama_model(l)) > llc;
}

struct lt_tune_pass {
    lt_llama *l;
    lt_pool *pool;
    lt_program *p;
    int32_t *toks;
    lt_regime regime;
    int64_t *token_pos; /* the batch regime: token t at LT_TUNE_DECODE_POS of slot t */
    int32_t *token_slot;
    lt_step step;
    lt_params xp; /* the executor's parameters when the pass was opened */
    lt_tune_key *keys;
    int n_keys, cap_keys;
};

static int pass_open(lt_tune_pass **out, lt_llama *l, lt_pool *pool, int64_t n_tokens,
                     bool batch) {
    *out = NULL;
    const lt_model *m = lt_llama_model(l);
    if (n_tokens < 1 || n_tokens > lt_llama_max_batch(l))
        return lt_error(LT_EINVAL, "tune: a step of %lld tokens: the runtime takes 1..%lld",
                        (long long)n_tokens, (long long)lt_llama_max_batch(l));
    if (batch && (n_tokens < 2 || n_tokens > lt_llama_n_slots(l)))
        return lt_error(LT_EINVAL, "tune: a batched step of %lld sequences: the runtime has "
                        "%lld slots (2 or more needed)", (long long)n_tokens,
                        (long long)lt_llama_n_slots(l));
    if (batch && LT_TUNE_DECODE_POS >= lt_llama_ctx_len(l))
        return lt_error(LT_EINVAL, "tune: the context (%lld) is too short for a batched step at "
                        "position %d", (long long)lt_llama_ctx_len(l), LT_TUNE_DECODE_POS);
    lt_tune_pass *p = calloc(1, sizeof *p);
    if (p) {
        p->toks = calloc((size_t)n_tokens, sizeof *p->toks);
        p->token_pos = calloc((size_t)n_tokens, sizeof *p->token_pos);
        p->token_slot = calloc((size_t)n_tokens, sizeof *p->token_slot);
    }
    if (!p || !p->toks || !p->token_pos || !p->token_slot) {
        lt_tune_pass_close(p);
        return lt_error(LT_ENOMEM, "tune: out of memory");
    }
    p->l = l;
    p->pool = pool;
    p->regime = lt_regime_of(n_tokens, batch);
    for (int64_t i = 0; i < n_tokens; i++) {
        p->toks[i] = (int32_t)(1 + i % (m->cfg.vocab_size - 1));
        p->token_pos[i] = LT_TUNE_DECODE_POS;
        p->token_slot[i] = (int32_t)i;
    }
    /* one real step fills the program's buffers with realistic values */
    int rc;
    if (batch) {
        rc = lt_llama_eval_batch(l, p->toks, p->token_pos, p->token_slot, n_tokens);
        if (!rc) rc = lt_llama_program_batch(l, n_tokens, &p->p);
    } else {
        rc = lt_llama_eval(l, p->toks, n_tokens, 0);
        if (!rc) rc = lt_llama_program(l, n_tokens, &p->p);
    }
    if (rc) {
        lt_tune_pass_close(p);
        return rc;
    }
    if (batch)
        p->step = (lt_step){.pos = LT_TUNE_DECODE_POS, .n_tokens = n_tokens, .tokens = p->toks,
                            .token_pos = p->token_pos, .token_slot = p->token_slot};
    else
        p->step = (lt_step){.pos = n_tokens == 1 ? LT_TUNE_DECODE_POS : 0, .n_tokens = n_tokens,
                            .tokens = p->toks};
    lt_exec_params(lt_llama_exec(l), &p->xp);
    int nn = lt_program_n_nodes(p->p);
    for (int i = 0; i < nn; i++) {
        lt_node_info ni;
        lt_program_node(p->p, i, &ni);
        const lt_kernel *k = lt_kernel_get(ni.kernel);
        if (k->n_params == 0) continue;
        lt_shape shape;
        lt_shape_of_call(ni.kernel, lt_program_call(p->p, i), &shape);
        char sig[96];
        lt_shape_format(&shape, sig, sizeof sig);
        if (lt_tune_pass_find(p, k->name, sig) >= 0) continue;
        if (p->n_keys == p->cap_keys) {
            int cap = p->cap_keys ? 2 * p->cap_keys : 16;
            lt_tune_key *v = realloc(p->keys, (size_t)cap * sizeof *v);
            if (!v) {
                lt_tune_pass_close(p);
                return lt_error(LT_ENOMEM, "tune: out of memory");
            }
            p->keys = v;
            p->cap_keys = cap;
        }
        lt_tune_key *key = &p->keys[p->n_keys++];
        key->kernel = k->name;
        snprintf(key->shape, sizeof key->shape, "%s", sig);
        key->node = i;
    }
    *out = p;
    return LT_OK;
}

int lt_tune_pass_open(lt_tune_pass **out, lt_llama *l, lt_pool *pool, int64_t n_tokens) {
    return pass_open(out, l, pool, n_tokens, false);
}

int lt_tune_pass_open_batch(lt_tune_pass **out, lt_llama *l, lt_pool *pool, int64_t n_seqs) {
    return pass_open(out, l, pool, n_seqs, true);
}

void lt_tune_pass_close(lt_tune_pass *p) {
    if (!p) return;
    free(p->keys);
    free(p->toks);
    free(p->token_pos);
    free(p->token_slot);
    free(p);
}

lt_regime lt_tune_pass_regime(const lt_tune_pass *p) { return p->regime; }

int64_t lt_tune_pass_tokens(const lt_tune_pass *p) { return p->step.n_tokens; }
int lt_tune_pass_n_keys(const lt_tune_pass *p) { return p->n_keys; }

const lt_tune_key *lt_tune_pass_key(const lt_tune_pass *p, int i) {
    return i >= 0 && i < p->n_keys ? &p->keys[i] : NULL;
}

int lt_tune_pass_find(const lt_tune_pass *p, const char *kernel, const char *shape) {
    for (int i = 0; i < p->n_keys; i++)
        if (!strcmp(p->keys[i].kernel, kernel) && !strcmp(p->keys[i].shape, shape)) return i;
    return -1;
}

static void result_init(lt_tune_result *r, const char *kernel, const char *shape) {
    memset(r, 0, sizeof *r);
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
}

int lt_tune_pass_search(lt_tune_pass *p, int i, const lt_tune_opts *o, lt_tune_result *out) {
    const lt_tune_key *key = lt_tune_pass_key(p, i);
    if (!key) return lt_error(LT_EINVAL, "tune: no key %d in the pass", i);
    result_init(out, key->kernel, key->shape);
    lt_node_info ni;
    lt_program_node(p->p, key->node, &ni);
    const lt_kernel *k = lt_kernel_get(ni.kernel);
    const lt_call *call = lt_program_call(p->p, key->node);
    lt_tune_context ctx = {.host = o->host};
    lt_shape_of_call(ni.kernel, call, &ctx.shape);
    target t = {0};
    int rc = lt_node_timer_init(&t.timer, lt_llama_exec(p->l), p->p, key->node, p->pool, &p->step,
                                p->xp.v[LT_XP_TILES]);
    if (rc) return rc;
    lt_node_timer_set_cold(t.timer, weights_stream(p->l));
    lt_space sp;
    lt_space_from_kernel(&sp, k);
    lt_space_fit_isa(&sp, lt_isa_active());
    lt_space_fit_call(&sp, ni.kernel, call);
    rc = search(&t, &sp, &ctx, o, ni.kernel, call, out);
    lt_node_timer_free(t.timer);
    /* the tuned configuration stays in force for what follows, on every node
     * of this kernel and shape (as a warm start would) */
    if (!rc) rc = lt_tuning_set(lt_llama_tuning(p->l), k->name, key->shape, &out->best);
    return rc;
}

/* A space measured on whole steps under (name, key); the winner stays in force. */
static int search_steps(lt_tune_pass *p, const char *name, const char *key, const lt_space *sp,
                        const lt_tune_opts *o, lt_tune_result *out) {
    result_init(out, name, key);
    target t = {.l = p->l, .name = name, .key = key, .toks = p->toks,
                .n_tokens = p->step.n_tokens, .pos = p->step.pos,
                .token_pos = p->step.token_pos, .token_slot = p->step.token_slot};
    lt_tune_context ctx = {.host = o->host};
    int rc = search(&t, sp, &ctx, o, 0, NULL, out);
    if (!rc) rc = lt_tuning_set(lt_llama_tuning(p->l), name, key, &out->best);
    return rc;
}

int lt_tune_pass_search_looped(lt_tune_pass *p, const lt_tune_opts *o, lt_tune_result *out) {
    if (p->regime != LT_REGIME_DECODE)
        return lt_error(LT_EINVAL, "tune: the looped executor is searched on decode steps");
    char shape[128];
    lt_exec_shape_format(lt_llama_model(p->l), lt_pool_size(p->pool), shape, sizeof shape);
    lt_space sp;
    lt_space_from_exec(&sp);
    return search_steps(p, LT_TUNING_LOOPED, shape, &sp, o, out);
}

int lt_tune_pass_search_threads(lt_tune_pass *p, const lt_tune_opts *o, lt_tune_result *out) {
    const int threads = lt_pool_size(p->pool);
    if (threads < 2)
        return lt_error(LT_EINVAL, "tune: a thread count is searched on a pool of 2 or more");
    char shape[128];
    lt_step_shape_format(lt_llama_model(p->l), threads, p->regime, shape, sizeof shape);
    lt_space sp;
    lt_space_threads(&sp, threads);
    return search_steps(p, LT_TUNING_THREADS, shape, &sp, o, out);
}

void lt_tune_result_entry(const lt_tune_result *r, const char *host_class, int budget,
                          lt_config_entry *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->kernel, sizeof out->kernel, "%s", r->kernel);
    snprintf(out->shape, sizeof out->shape, "%s", r->shape);
    snprintf(out->host, sizeof out->host, "%s", host_class);
    snprintf(out->params, sizeof out->params, "%s", r->params);
    out->median_ns = r->tuned_ns;
    out->samples = r->samples;
    out->speedup = r->speedup;
    out->trials = r->trials;
    out->converged = r->trials < budget; /* the strategy ran out of points first */
}
