/* matvec and matmul for the quantisation types with integer dots (q4_0 ..
 * q6_k, and q8_0 held interleaved; qdot.h, lt__qtype_of_w): x quantised per block once per thread and node step (the
 * cache below), then each row's dot in qdot.h's order, by the ISA's dot
 * where it has one (lt__qdot_of): every ISA gives the same bits. Parameters: rows_per_task (the task split, as for
 * every matvec) and prefetch (bytes of the row ahead, touched per block);
 * a matvec of several tokens reads tok_chunk_kb too; unroll, k_block and
 * the act_* modes do not change it. */
#include "kernels/linear.h"
#include "kernels/qdot.h"

#include <pthread.h>
#include <string.h>

static const lt__qtype qtypes[LT_DTYPE_COUNT] = {
    [LT_Q8_0] = {32, sizeof(lt__xq32), lt__xq32_quant, lt__qdot_q8_0},
    [LT_Q4_0] = {32, sizeof(lt__xq32), lt__xq32_quant, lt__qdot_q4_0},
    [LT_Q4_1] = {32, sizeof(lt__xq32), lt__xq32_quant, lt__qdot_q4_1},
    [LT_Q5_0] = {32, sizeof(lt__xq32), lt__xq32_quant, lt__qdot_q5_0},
    [LT_Q5_1] = {32, sizeof(lt__xq32), lt__xq32_quant, lt__qdot_q5_1},
    [LT_Q2_K] = {LT_QK_K, sizeof(lt__xqk), lt__xqk_quant, lt__qdot_q2_k},
    [LT_Q3_K] = {LT_QK_K, sizeof(lt__xqk), lt__xqk_quant, lt__qdot_q3_k},
    [LT_Q4_K] = {LT_QK_K, sizeof(lt__xqk), lt__xqk_quant, lt__qdot_q4_k},
    [LT_Q5_K] = {LT_QK_K, sizeof(lt__xqk), lt__xqk_quant, lt__qdot_q5_k},
    [LT_Q6_K] = {LT_QK_K, sizeof(lt__xqk), lt__xqk_quant, lt__qdot_q6_k},
};

const lt__qtype *lt__qtype_of(lt_dtype t) {
    return (unsigned)t < LT_DTYPE_COUNT && qtypes[t].dot ? &qtypes[t] : NULL;
}

lt__qdot_fn lt__qdot_of(lt_dtype t, lt_isa isa) {
    lt__qdot_fn f = NULL;
#if LT_HAVE_X86
    if (isa >= LT_ISA_AVX512) f = lt__qdot_avx512_of(t);
    if (!f && isa >= LT_ISA_AVX2) f = lt__qdot_avx2_of(t);
#else
    (void)isa;
#endif
    return f ? f : qtypes[t].dot;
}

lt__xquant_fn lt__xquant_of(lt_dtype t, lt_isa isa) {
#if LT_HAVE_X86
    if (isa >= LT_ISA_AVX2 && qtypes[t].quant == lt__xqk_quant) return lt__xqk_quant_avx2;
    if (isa >= LT_ISA_AVX2 && qtypes[t].quant == lt__xq32_quant) return lt__xq32_quant_avx2;
#else
    (void)isa;
#endif
    return qtypes[t].quant;
}

lt__qdot_multi_fn lt__qdot_multi_of(lt_dtype t, lt_isa isa) {
#if LT_HAVE_X86
    if (isa >= LT_ISA_AVX512) return lt__qdot_multi_avx512_of(t);
    if (isa >= LT_ISA_AVX2) return lt__qdot_multi_avx2_of(t);
#endif
    (void)t, (void)isa;
    return NULL;
}

/* ---- the per-thread cache of quantised x ------------------------------------- */

typedef struct {
    const lt_call *call; /* key: the node, its x, the execution (0: nothing) and the quantiser */
    const float *x;
    int64_t n;           /* rows of x (tokens) */
    uint64_t seq;
    lt__xquant_fn quant;
    char *buf;
    size_t cap;
} xq_cache;

static _Thread_local xq_cache tl_c;
static pthread_key_t c_key; /* its destructor frees a thread's buffer at exit */
static pthread_once_t c_once = PTHREAD_ONCE_INIT;
static void c_free(void *p) { lt_aligned_free(p); }
static void c_make_key(void) { LT_ASSERT(pthread_key_create(&c_key, c_free) == 0); }

/* n rows of x (cols floats each, stride bytes apart) quantised for qt, one
 * after the other: this thread's copy for (call, x, n, step->seq), so the
 * tasks a thread takes of one node in one execution quantise x once; valid
 * until this thread's next call. NULL if out of memory. */
static const void *xq_get(const lt_call *call, const lt_step *step, const float *x, int64_t n,
                          size_t stride, int64_t cols, const lt__qtype *qt, lt_isa isa) {
    xq_cache *c = &tl_c;
    const uint64_t seq = step ? step->seq : 0;
    const lt__xquant_fn quant = lt__xquant_of(call->op[1]->dtype, isa);
    if (seq != 0 && c->seq == seq && c->call == call && c->x == x && c->n == n &&
        c->quant == quant)
        return c->buf;
    const size_t xb = (size_t)(cols / qt->block) * qt->xq_bytes;
    if (!lt__tl_reserve(&c->buf, &c->cap, xb * (size_t)n, &c_once, &c_key, c_make_key)) {
        c->seq = 0;
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        quant((const float *)((const char *)x + (size_t)i * stride), cols, c->buf + (size_t)i * xb);
    *c = (xq_cache){call, x, n, seq, quant, c->buf, c->cap};
    return c->buf;
}

/* ---- the interleaved types (lt_x16_has): groups of 16 rows -------------------- */

/* This thread's buffer for one group of plain rows interleaved on the fly
 * (tails of rows, tensors not repacked at load). */
static _Thread_local char *tl_pack;
static _Thread_local size_t tl_pack_cap;
static pthread_key_t pack_key;
static pthread_once_t pack_once = PTHREAD_ONCE_INIT;
static void pack_make_key(void) { LT_ASSERT(pthread_key_create(&pack_key, c_free) == 0); }

/* Plain rows interleaved on the fly: at most this many bytes of them at a
 * time (one thread's buffer). */
#define X16_PACK_BYTES ((size_t)256 << 10)

/* y rows [r0, r1) of W (an interleaved type) for the n tokens of xq (xb bytes
 * each), by isa's group dot over W's groups as they are in the interleaved
 * layout, or over plain rows interleaved into this thread's buffer (up to
 * X16_PACK_BYTES at a time). In chunks of `chunk` rows (a multiple of 16):
 * per group of up to lt__x16_tokens tokens (their x in L1), every 16
 * rows of the chunk (the chunk in L2 after the first group, which streams
 * it in with pf). y row of token t: (char *)y + t * ystride. Every layout,
 * chunk and ISA gives qdot.h's bits. False if the buffer cannot be
 * allocated. */
static bool x16_rows(const lt_tensor *W, const char *xq, size_t xb, int64_t n, int64_t r0,
                     int64_t r1, int64_t chunk, size_t pf, float *y, size_t ystride, bool acc,
                     lt_isa isa) {
    const lt__x16_fn dot = lt__x16_of(W->dtype, isa);
    const int per_call = lt__x16_tokens(W->dtype, isa);
    const int64_t nb = W->ne[0] / lt_dtype_block(W->dtype), G = LT_X16_ROWS;
    const bool packed = W->layout == LT_LAYOUT_X16;
    const size_t rb = W->nb[1];
    /* pf counts bytes of a row ahead; a group's byte is a sixteenth of a
     * row's, so the same distance in rows would be 16 pf of the group. Half
     * that: the default 2048 puts 16 KB of the group ahead, as near the best
     * of both machines measured (matvec.c) and clear of a 48 KB L1d's
     * thrashing, where 32 KB of prefetch evicted the block being read */
    const size_t gpf = pf * LT_X16_ROWS / 2;
    if (!packed) {
        const int64_t most = (int64_t)(X16_PACK_BYTES / (rb * G)) * G;
        if (chunk > most) chunk = most > G ? most : G;
        if (!lt__tl_reserve(&tl_pack, &tl_pack_cap, (size_t)((chunk + G - 1) / G * G) * rb,
                            &pack_once, &pack_key, pack_make_key))
            return false;
    }
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
        const int64_t c1 = r1 - c0 < chunk ? r1 : c0 + chunk;
        const char *base = (const char *)W->data + (size_t)c0 * rb;
        if (!packed) { /* a part group takes a whole group's bytes */
            for (int64_t g0 = c0; g0 < c1; g0 += G)
                lt_x16_pack(W->dtype, base + (size_t)(g0 - c0) * rb, rb,
                            c1 - g0 < G ? (int)(c1 - g0) : (int)G, nb,
                            tl_pack + (size_t)(g0 - c0) * rb);
            base = tl_pack;
        }
        for (int64_t i = 0; i < n; i += per_call) {
            const int k = n - i < per_call ? (int)(n - i) : per_call;
            const void *xs[LT__X16_TOK_MAX];
            for (int t = 0; t < k; t++) xs[t] = xq + (size_t)(i + t) * xb;
            for (int64_t g0 = c0; g0 < c1; g0 += G) {
                const int nr = c1 - g0 < G ? (int)(c1 - g0) : (int)G;
                float out[LT__X16_TOK_MAX * LT_X16_ROWS];
                dot(base + (size_t)(g0 - c0) * rb, nb, xs, k, packed && i == 0 ? gpf : 0, out);
                for (int t = 0; t < k; t++) {
                    float *yt = (float *)((char *)y + (size_t)(i + t) * ystride) + g0;
                    for (int r = 0; r < nr; r++)
                        yt[r] = acc ? yt[r] + out[t * G + r] : out[t * G + r];
                }
            }
        }
    }
    return true;
}

/* ---- matvec ------------------------------------------------------------------- */

/* The dot of one row, with the row's bytes `pf` ahead touched first. */
static inline float row_dot(lt__qdot_fn dot, const char *row, size_t row_bytes, const void *xq,
                            int64_t nb, size_t pf) {
    if (pf)
        for (size_t o = 0; o < row_bytes; o += LT_CACHE_LINE) __builtin_prefetch(row + o + pf);
    return dot(row, xq, nb);
}

bool lt__matvec_quant(const lt_call *call, const lt_step *step, int ith, int nth, const float *x,
                      lt_isa isa) {
    const lt_tensor *W = call->op[1];
    const lt__qtype *qt = lt__qtype_of_w(W);
    LT_ASSERT(qt);
    const lt__qdot_fn dot = lt__qdot_of(W->dtype, isa);
    const int64_t rows = W->ne[1], cols = W->ne[0], nb = cols / qt->block;
    const void *xq = xq_get(call, step, x, 1, 0, cols, qt, isa);
    if (!xq) return false;
    float *y = call->op[0]->data;
    const bool acc = call->ia[0] != 0;
    const size_t pf = (size_t)call->params.v[LT__MV_PREFETCH];
    const size_t rb = lt_dtype_row_bytes(W->dtype, cols);
    int64_t r0, r1;
    lt__linear_split(rows, lt__mv_task_rows(call), ith, nth, &r0, &r1);
    if (lt_x16_has(W->dtype)) return x16_rows(W, xq, 0, 1, r0, r1, rows, pf, y, 0, acc, isa);
    for (int64_t r = r0; r < r1; r++) {
        const float s = row_dot(dot, lt_tensor_row(W, r), rb, xq, nb, pf);
        y[r] = acc ? y[r] + s : s;
    }
    return true;
}

/* A matvec of several tokens: every token's x quantised once into this
 * thread's scratch, then the thread's rows in chunks of tok_chunk_kb KiB
 * (whole tasks, at least one) and per group of up to LT__QDOT_MULTI_MAX
 * tokens each row of the chunk dotted with the group's tokens, by isa's
 * multi-token dot where it has one: the chunk is read from memory once
 * (then from L2), the group's x stays in L1. Each sum the bits of the
 * one-token path, whatever the chunk. */
bool lt__matvec_quant_tokens(const lt_call *call, const lt_step *step, int ith, int nth,
                             lt_isa isa) {
    const lt_tensor *Y = call->op[0], *W = call->op[1], *X = call->op[2];
    const lt__qtype *qt = lt__qtype_of_w(W);
    LT_ASSERT(qt);
    const lt__qdot_fn dot = lt__qdot_of(W->dtype, isa);
    const lt__qdot_multi_fn multi = lt__qdot_multi_of(W->dtype, isa);
    const int64_t rows = W->ne[1], cols = W->ne[0], n = X->ne[1], nb = cols / qt->block;
    const int64_t per = lt__mv_task_rows(call);
    int64_t r0, r1;
    lt__linear_split(rows, per, ith, nth, &r0, &r1);
    if (r0 >= r1) return true;
    const size_t xb = (size_t)nb * qt->xq_bytes;
    const char *xq = xq_get(call, step, X->data, n, X->nb[1], cols, qt, isa);
    if (!xq) return false;
    const bool acc = call->ia[0] != 0;
    const size_t pf = (size_t)call->params.v[LT__MV_PREFETCH];
    const size_t rb = lt_dtype_row_bytes(W->dtype, cols);
    const size_t chunk_bytes = (size_t)call->params.v[LT__MV_TOK_CHUNK_KB] << 10;
    int64_t chunk = (int64_t)(chunk_bytes / W->nb[1]) / per * per;
    if (chunk < per) chunk = per;
    if (lt_x16_has(W->dtype))
        return x16_rows(W, xq, xb, n, r0, r1, chunk, pf, Y->data, Y->nb[1], acc, isa);
    const int gmax = multi ? LT__QDOT_MULTI_MAX : 1;
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
        const int64_t c1 = r1 - c0 < chunk ? r1 : c0 + chunk;
        for (int64_t i = 0; i < n; i += gmax) {
            const int k = n - i < gmax ? (int)(n - i) : gmax;
            const void *xs[LT__QDOT_MULTI_MAX];
            for (int t = 0; t < k; t++) xs[t] = xq + (size_t)(i + t) * xb;
            for (int64_t r = c0; r < c1; r++) {
                const char *row = lt_tensor_row(W, r);
                if (pf && i == 0) /* the chunk's first pass streams it from memory */
                    for (size_t o = 0; o < rb; o += LT_CACHE_LINE) __builtin_prefetch(row + o + pf);
                float s[LT__QDOT_MULTI_MAX];
                if (multi) multi(row, xs, k, nb, s);
                else s[0] = dot(row, xs[0], nb);
                for (int t = 0; t < k; t++) {
                    float *y = (float *)lt_tensor_row(Y, i + t) + r;
                    *y = acc ? *y + s[t] : s[t];
                }
            }
        }
    }
    return true;
}

/* ---- matmul --------------------------------------------------------------------- */

/* Prefill's blocking: a thread's W rows in blocks of about this many bytes,
 * which stay in L2 while every group of tokens passes over them. */
#define MQ_ROW_BLOCK_BYTES ((size_t)256 << 10)

/* Every token's x quantised once per thread and execution (the cache
 * above: the looped executor hands a thread many tasks of one node), then the
 * thread's rows in blocks of MQ_ROW_BLOCK_BYTES (at least one row), and per
 * group of up to LT__QDOT_MULTI_MAX tokens (their x in L1) each row of the
 * block dotted with the group by isa's multi-token dot where it has one:
 * each weight block is unpacked once per group, the block is read from
 * memory once. Each sum the bits of the one-token dot, whatever the
 * blocking. False if the scratch cannot be allocated. */
bool lt__matmul_quant(const lt_call *call, const lt_step *step, int ith, int nth, lt_isa isa) {
    const lt_tensor *Y = call->op[0], *W = call->op[1], *X = call->op[2];
    const lt__qtype *qt = lt__qtype_of_w(W);
    LT_ASSERT(qt);
    const lt__qdot_fn dot = lt__qdot_of(W->dtype, isa);
    const lt__qdot_multi_fn multi = lt__qdot_multi_of(W->dtype, isa);
    const int64_t rows = W->ne[1], cols = W->ne[0], n = Y->ne[1], nb = cols / qt->block;
    int64_t r0, r1;
    lt__linear_split(rows, 16, ith, nth, &r0, &r1);
    if (r0 >= r1) return true;
    const size_t xb = (size_t)nb * qt->xq_bytes;
    const char *xq = xq_get(call, step, X->data, n, X->nb[1], cols, qt, isa);
    if (!xq) return false;
    const bool acc = call->ia[0] != 0;
    const size_t rb = lt_dtype_row_bytes(W->dtype, cols);
    const int64_t blk = rb < MQ_ROW_BLOCK_BYTES ? (int64_t)(MQ_ROW_BLOCK_BYTES / rb) : 1;
    if (lt_x16_has(W->dtype)) {
        const int64_t G = LT_X16_ROWS, groups = (blk + G - 1) / G;
        return x16_rows(W, xq, xb, n, r0, r1, groups * G, 0, Y->data, Y->nb[1], acc, isa);
    }
    const int gmax = multi ? LT__QDOT_MULTI_MAX : 1;
    for (int64_t c0 = r0; c0 < r1; c0 += blk) {
        const int64_t c1 = r1 - c0 < blk ? r1 : c0 + blk;
        for (int64_t i = 0; i < n; i += gmax) {
            const int k = n - i < gmax ? (int)(n - i) : gmax;
            const void *xs[LT__QDOT_MULTI_MAX];
            float *ys[LT__QDOT_MULTI_MAX];
            for (int t = 0; t < k; t++) {
                xs[t] = xq + (size_t)(i + t) * xb;
                ys[t] = (float *)lt_tensor_row(Y, i + t);
            }
            for (int64_t r = c0; r < c1; r++) {
                const char *row = lt_tensor_row(W, r);
                float s[LT__QDOT_MULTI_MAX];
                if (multi) multi(row, xs, k, nb, s);
                else s[0] = dot(row, xs[0], nb);
                for (int t = 0; t < k; t++) ys[t][r] = acc ? ys[t][r] + s[t] : s[t];
            }
        }
    }
    return true;
}
