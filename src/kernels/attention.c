/* ATTENTION (causal, grouped-query, decode and prefill) and KV_STORE (append
 * key/value rows to the f32 cache).
 *
 * ATTENTION: query t (position p = lt_step_pos(step, t)), head h reads kv
 * head h / (heads / kv_heads) and attends to rows 0..p of the caches' plane
 * lt_step_slot(step, t) (its sequence) with scale
 * 1/sqrt(head_dim). Keys are visited in blocks of kv_block with an online
 * (running-max) softmax: per block the scores go to this thread's scratch
 * row, the running max m and sum l are updated, the output accumulated so far
 * is rescaled by exp(m_old - m_new) when the max grows, and the block's
 * exp(s - m) weights accumulate V into out. At the end out /= l. Every
 * exponent is <= 0, so nothing overflows.
 *
 * Work is split into tasks of heads_per_task consecutive heads of one token
 * (at most the heads that share a kv head: more would share no key block and
 * only leave fewer tasks to balance between the threads);
 * each token's tasks are shared out as contiguous runs, and the run a thread
 * takes rotates with t so causal prefill (later tokens see more keys) stays
 * balanced. Inside a task the heads take turns on each key block, so heads
 * sharing a kv head reuse the block from L1. The query heads are copied (and
 * pre-scaled) first, so out may equal q.
 *
 * KV_STORE shares the n x kv_dim elements as contiguous runs. */
#include "kernels/ops_internal.h"

#include <math.h>
#include <string.h>

enum { P_KV_BLOCK, P_HEADS_PER_TASK };

/* Heads per task: the parameter, but at most the heads that share a kv head. */
static int64_t heads_per_task(const lt_call *c) {
    const int64_t hpt = c->params.v[P_HEADS_PER_TASK], group = c->ia[0] / c->ia[1];
    return hpt < group ? hpt : group;
}

/* Every token's head groups: a prefill call splits each token's apart. */
static int64_t attention_units(const lt_call *c) {
    const int64_t hpt = heads_per_task(c);
    return c->op[0]->ne[1] * ((c->ia[0] + hpt - 1) / hpt);
}

/* A decode task reads its heads' rows of q and its kv heads' columns of the
 * caches (prefill tasks take other heads at each token: not said). */
static bool attention_task_cols(const lt_call *c, int op, int task, int n_tasks, int64_t *c0,
                                int64_t *c1) {
    if (c->op[0]->ne[1] != 1 || op < 1 || op > 3) return false;
    const int64_t heads = c->ia[0], group = heads / c->ia[1], hd = c->ia[2];
    const int64_t hpt = heads_per_task(c), ntask = (heads + hpt - 1) / hpt;
    int64_t k0, k1;
    lt__split(ntask, 1, task, n_tasks, &k0, &k1); /* as attention_drive takes them */
    const int64_t h0 = k0 * hpt, h1 = k1 * hpt < heads ? k1 * hpt : heads;
    if (h0 >= h1) {
        *c0 = *c1 = 0;
    } else if (op == 1) {
        *c0 = h0 * hd;
        *c1 = h1 * hd;
    } else {
        *c0 = h0 / group * hd;
        *c1 = ((h1 - 1) / group + 1) * hd;
    }
    return true;
}

static void attention_drive(const lt_call *c, const lt_step *step, int ith, int nth,
                            const lt__attn_ops *aops, const lt__act_ops *xops) {
    const lt_tensor *out = c->op[0], *q = c->op[1], *kc = c->op[2], *vc = c->op[3];
    const lt_tensor *scratch = c->op[4];
    const int64_t heads = c->ia[0], kv_heads = c->ia[1], hd = c->ia[2];
    const int64_t n = out->ne[1], seq_len = kc->ne[1];
    const int64_t group = heads / kv_heads;
    const size_t kstride = kc->nb[1] / sizeof(float), vstride = vc->nb[1] / sizeof(float);
    const float scale = 1.0f / sqrtf((float)hd);
    LT_ASSERT(ith < scratch->ne[1]);
    LT_ASSERT(hd <= LT__MAX_HEAD_DIM);

    int64_t kv_block = c->params.v[P_KV_BLOCK];
    const int64_t hpt = heads_per_task(c);
    LT_ASSERT(kv_block > 0 && hpt > 0 && hpt <= LT__MAX_HEADS_PER_TASK);
    if (kv_block > seq_len) kv_block = seq_len; /* scratch rows hold seq_len scores */
    const int64_t ntask = (heads + hpt - 1) / hpt;
    float *s = lt__row_f32(scratch, ith);
    float qbuf[LT__MAX_HEADS_PER_TASK * LT__MAX_HEAD_DIM];
    float m[LT__MAX_HEADS_PER_TASK], l[LT__MAX_HEADS_PER_TASK];

    for (int64_t t = 0; t < n; t++) {
        int64_t k0, k1;
        lt__split(ntask, 1, (int)((ith + t) % nth), nth, &k0, &k1);
        const int64_t keys = lt_step_pos(step, t) + 1;
        LT_ASSERT(keys >= 1 && keys <= seq_len);
        const float *kplane = lt__kv_row(kc, step, t) - (keys - 1) * (int64_t)kstride;
        const float *vplane = lt__kv_row(vc, step, t) - (keys - 1) * (int64_t)vstride;
        float *orow = lt__row_f32(out, t);
        const float *qrow = lt__row_f32(q, t);
        for (int64_t task = k0; task < k1; task++) {
            const int64_t h0 = task * hpt, h1 = h0 + hpt < heads ? h0 + hpt : heads;
            for (int64_t h = h0; h < h1; h++)
                for (int64_t i = 0; i < hd; i++) qbuf[(h - h0) * hd + i] = qrow[h * hd + i] * scale;
            for (int64_t j0 = 0; j0 < keys; j0 += kv_block) {
                const int64_t nk = keys - j0 < kv_block ? keys - j0 : kv_block;
                for (int64_t h = h0; h < h1; h++) {
                    const int64_t kvh = h / group, e = h - h0;
                    float *acc = orow + h * hd;
                    const float *kb = kplane + j0 * kstride + kvh * hd;
                    const float *vb = vplane + j0 * vstride + kvh * hd;
                    aops->scores(s, qbuf + e * hd, kb, kstride, nk, hd);
                    float bm = xops->max(s, nk);
                    if (j0 == 0) {
                        m[e] = bm;
                        l[e] = 0.0f;
                        memset(acc, 0, (size_t)hd * sizeof *acc);
                    } else if (bm > m[e]) {
                        float corr = expf(m[e] - bm);
                        xops->scale(acc, corr, hd);
                        l[e] *= corr;
                        m[e] = bm;
                    }
                    l[e] += xops->exp_sum(s, nk, m[e]);
                    aops->accum(acc, s, vb, vstride, nk, hd);
                }
            }
            for (int64_t h = h0; h < h1; h++) xops->scale(orow + h * hd, 1.0f / l[h - h0], hd);
        }
    }
}

static void kv_store_drive(const lt_call *c, const lt_step *step, int ith, int nth,
                           const lt__act_ops *xops) {
    const lt_tensor *cache = c->op[0], *src = c->op[1];
    const int64_t d = src->ne[0], n = src->ne[1];
    int active = lt__active_threads(n * d, c->params.v[0], nth);
    if (ith >= active) return;
    int64_t lo, hi;
    lt__split(n * d, LT__SPLIT_UNIT, ith, active, &lo, &hi);
    for (int64_t f = lo; f < hi;) {
        int64_t r = f / d, c0 = f % d, c1 = c0 + (hi - f) < d ? c0 + (hi - f) : d;
        xops->copy(lt__kv_row(cache, step, r) + c0, lt__row_f32(src, r) + c0, c1 - c0);
        f += c1 - c0;
    }
}

#define RUNNERS(isa)                                                           \
    static void attention_##isa(const lt_call *c, const lt_step *s, int ith, int nth) { \
        attention_drive(c, s, ith, nth, &lt__attn_##isa, &lt__act_##isa);     \
    }                                                                          \
    static void kv_store_##isa(const lt_call *c, const lt_step *s, int ith, int nth) { \
        kv_store_drive(c, s, ith, nth, &lt__act_##isa);                        \
    }
RUNNERS(portable)
#if LT_HAVE_X86
RUNNERS(avx2)
RUNNERS(avx512)
#endif
#undef RUNNERS

static void attention_cost(const lt_call *c, const lt_step *s, double *bytes, double *flops) {
    const double heads = (double)c->ia[0], hd = (double)c->ia[2];
    const double n = (double)c->op[0]->ne[1], pos = (double)s->pos;
    const double qdim = (double)c->op[1]->ne[0], kvdim = (double)c->op[2]->ne[0];
    /* q read, out written; K and V rows 0..pos+n-1 read once (heads of a
     * group and later tokens find them in cache) */
    *bytes = 4.0 * (2.0 * n * qdim + 2.0 * (pos + n) * kvdim);
    /* per (token, head, key): q.k and the V update are 2*hd each; the
     * softmax max/exp/sum about 5 (exp counted as 1) */
    const double keys = n * pos + n * (n + 1.0) / 2.0;
    *flops = heads * keys * (4.0 * hd + 5.0);
}

static int attention_check(const lt_call *c) {
    static const char *const names[] = {"out", "q", "kcache", "vcache", "scratch"};
    const lt_tensor *out = c->op[0], *q = c->op[1], *kc = c->op[2], *vc = c->op[3];
    const lt_tensor *scratch = c->op[4];
    const int64_t heads = c->ia[0], kv_heads = c->ia[1], hd = c->ia[2];
    int rc;
    for (int i = 0; i < 5; i++)
        if ((rc = (i == 2 || i == 3 ? lt__check_f32_cache : lt__check_f32_rows)(
                 c->op[i], "attention", names[i])) != LT_OK)
            return rc;
    if (heads < 1 || kv_heads < 1 || heads % kv_heads != 0)
        return lt_error(LT_EINVAL, "attention: %lld heads is not a multiple of %lld kv heads",
                        (long long)heads, (long long)kv_heads);
    if (hd < 1 || hd > LT__MAX_HEAD_DIM)
        return lt_error(LT_EINVAL, "attention: head_dim %lld outside [1, %d]", (long long)hd,
                        LT__MAX_HEAD_DIM);
    if (q->ne[0] != heads * hd || out->ne[0] != heads * hd)
        return lt_error(LT_EINVAL, "attention: q row %lld and out row %lld must be heads*head_dim"
                        " = %lld", (long long)q->ne[0], (long long)out->ne[0],
                        (long long)(heads * hd));
    if (q->ne[1] != out->ne[1])
        return lt_error(LT_EINVAL, "attention: q has %lld tokens but out has %lld",
                        (long long)q->ne[1], (long long)out->ne[1]);
    if (kc->ne[0] != kv_heads * hd || vc->ne[0] != kv_heads * hd)
        return lt_error(LT_EINVAL, "attention: cache rows (k %lld, v %lld) must be "
                        "kv_heads*head_dim = %lld", (long long)kc->ne[0], (long long)vc->ne[0],
                        (long long)(kv_heads * hd));
    if (kc->ne[1] != vc->ne[1] || kc->ne[2] != vc->ne[2])
        return lt_error(LT_EINVAL, "attention: k cache has %lld rows x %lld slots but v cache "
                        "%lld x %lld", (long long)kc->ne[1], (long long)kc->ne[2],
                        (long long)vc->ne[1], (long long)vc->ne[2]);
    if (q->ne[1] > kc->ne[1] * kc->ne[2])
        return lt_error(LT_EINVAL, "attention: %lld tokens exceed the cache's %lld rows",
                        (long long)q->ne[1], (long long)(kc->ne[1] * kc->ne[2]));
    if (scratch->ne[0] < kc->ne[1])
        return lt_error(LT_EINVAL, "attention: scratch rows of %lld are shorter than seq_len %lld",
                        (long long)scratch->ne[0], (long long)kc->ne[1]);
    if (lt__overlap(out, q) && (out->data != q->data || out->nb[1] != q->nb[1]))
        return lt_error(LT_EINVAL,
                        "attention: out partially overlaps q (only out == q is allowed)");
    for (int i = 2; i < 5; i++)
        if (lt__overlap(out, c->op[i]))
            return lt_error(LT_EINVAL, "attention: out overlaps %s", names[i]);
    return LT_OK;
}

static void kv_store_cost(const lt_call *c, const lt_step *s, double *bytes, double *flops) {
    (void)s;
    *bytes = 8.0 * (double)c->op[1]->ne[0] * (double)c->op[1]->ne[1]; /* read src, write cache */
    *flops = 0.0;
}

static int kv_store_check(const lt_call *c) {
    const lt_tensor *cache = c->op[0], *src = c->op[1];
    int rc;
    if ((rc = lt__check_f32_cache(cache, "kv_store", "cache")) != LT_OK) return rc;
    if ((rc = lt__check_f32_rows(src, "kv_store", "src")) != LT_OK) return rc;
    if (src->ne[0] != cache->ne[0])
        return lt_error(LT_EINVAL, "kv_store: src rows of %lld but cache rows of %lld",
                        (long long)src->ne[0], (long long)cache->ne[0]);
    if (src->ne[1] > cache->ne[1] * cache->ne[2])
        return lt_error(LT_EINVAL, "kv_store: %lld rows exceed the cache's %lld",
                        (long long)src->ne[1], (long long)(cache->ne[1] * cache->ne[2]));
    if (lt__overlap(cache, src)) return lt_error(LT_EINVAL, "kv_store: src overlaps the cache");
    return LT_OK;
}

/* ---- portable primitives (the scalar reference) ---------------------------- */

static void scores_p(float *s, const float *q, const float *k, size_t kstride, int64_t nk,
                     int64_t hd) {
    for (int64_t j = 0; j < nk; j++) {
        const float *kj = k + (size_t)j * kstride;
        float d = 0.0f;
        for (int64_t i = 0; i < hd; i++) d += q[i] * kj[i];
        s[j] = d;
    }
}

static void accum_p(float *acc, const float *s, const float *v, size_t vstride, int64_t nk,
                    int64_t hd) {
    for (int64_t j = 0; j < nk; j++) {
        const float *vj = v + (size_t)j * vstride;
        for (int64_t i = 0; i < hd; i++) acc[i] += s[j] * vj[i];
    }
}

const lt__attn_ops lt__attn_portable = {scores_p, accum_p};

/* ---- descriptors -------------------------------------------------------- */

const lt_kernel lt__k_attention = {
    .name = "attention",
    .id = LT_K_ATTENTION,
    .n_params = 2,
    /* Defaults from a single-thread sweep on the reference machine (AVX-512,
     * decode): with 32 heads over 8 kv heads, head_dim 128, position 2000,
     * kv_block 64 / 4 heads per task took 1.8 ms against 3.6 ms for 256 / 1;
     * blocks past 256 keys fall out of L1/L2 before the next head reuses
     * them. Four heads per task still leaves two tasks for 8-head models. */
    .params = {{.name = "kv_block", /* keys per online-softmax block */
                .n_values = 8,
                .values = {16, 32, 64, 128, 256, 512, 1024, 4096},
                .def = 64},
               {.name = "heads_per_task", /* query heads sharing each key block */
                .n_values = 4,
                .values = {1, 2, 4, 8},
                .def = 4}},
    .run = {[LT_ISA_PORTABLE] = attention_portable,
            [LT_ISA_AVX2] = LT_X86_ONLY(attention_avx2),
            [LT_ISA_AVX512] = LT_X86_ONLY(attention_avx512)},
    .cost = attention_cost,
    .check = attention_check,
    .units = attention_units,
    .task_cols = attention_task_cols,
};

const lt_kernel lt__k_kv_store = {
    .name = "kv_store",
    .id = LT_K_KV_STORE,
    .n_params = 1,
    .params = {LT__MIN_CHUNK_PARAM},
    .run = {[LT_ISA_PORTABLE] = kv_store_portable, [LT_ISA_AVX2] = LT_X86_ONLY(kv_store_avx2),
            [LT_ISA_AVX512] = LT_X86_ONLY(kv_store_avx512)},
    .cost = kv_store_cost,
    .check = kv_store_check,
};
