/* matvec (decode projections, y = W x or y += W x for one token): the
 * descriptor, its shape check and cost, and the portable scalar reference.
 * The AVX2 / AVX-512 paths live in matvec_avx2.c / matvec_avx512.c. */
#include "kernels/linear.h"
#include "kernels/ops_internal.h"
#include "kernels/qdot.h"

#include <stdalign.h>

#include <math.h>

static bool matvec_portable_i16(const lt_call *call, const lt_step *step, int ith, int nth,
                                const float *x);

/* Portable reference: each row dequantised one 32-element chunk at a time
 * and summed in float, rows split over threads exactly as the ISA paths do.
 * unroll, k_block and prefetch do not change what it computes. For q8_0 W
 * with act_int8 = 1 (or else act_int16 = 1) it computes the integer-dot sums
 * of linear.h instead, and for q4_0 .. q6_k those of qdot.h (matvec_q.c;
 * the f32 sums only if the quantised x cannot be allocated). */
static void matvec_portable_x(const lt_call *call, const lt_step *step, int ith, int nth,
                              const float *x) {
    const lt_tensor *W = call->op[1];
    if (lt__qtype_of_w(W)) {
        if (lt__matvec_quant(call, step, ith, nth, x, LT_ISA_PORTABLE)) return;
    } else if (W->dtype == LT_Q8_0 && call->params.v[LT__MV_ACT_INT8]) {
        if (lt__matvec_q8i8_ref(call, step, ith, nth, x)) return;
    } else if (W->dtype == LT_Q8_0 && call->params.v[LT__MV_ACT_INT16] &&
               matvec_portable_i16(call, step, ith, nth, x)) {
        return;
    }
    float *y = call->op[0]->data;
    const int64_t rows = W->ne[1], cols = W->ne[0];
    const bool acc = call->ia[0] != 0;
    int64_t r0, r1;
    lt__linear_split(rows, lt__mv_task_rows(call), ith, nth, &r0, &r1);
    const int64_t chunk = 32; /* a multiple of every dtype's block */
    float w[32];
    for (int64_t r = r0; r < r1; r++) {
        const char *row = lt_tensor_row(W, r);
        float s = 0.0f;
        for (int64_t k = 0; k < cols; k += chunk) {
            int64_t n = cols - k < chunk ? cols - k : chunk;
            lt__row_chunk_f32(W, row, k, n, w);
            for (int64_t j = 0; j < n; j++) s += w[j] * x[k + j];
        }
        y[r] = acc ? y[r] + s : s;
    }
}

/* One q8_0 row's dot with int16 activations, in the exact order linear.h
 * fixes (the AVX-512 path computes the same bits). */
static float q8_dot_i16(const void *row, lt_layout layout, const int16_t *xq, const float *xs,
                        int64_t nblk) {
    float acc[2][16] = {{0}};
    for (int64_t b = 0; b < nblk; b++) {
        float d;
        const int8_t *q = lt__q8_block(row, layout, nblk, b, &d);
        const float ds = d * xs[b];
        const int16_t *v = xq + b * LT__XQ_BLOCK;
        for (int l = 0; l < 16; l++) {
            int32_t p = (int32_t)q[2 * l] * v[2 * l] + (int32_t)q[2 * l + 1] * v[2 * l + 1];
            acc[b & 1][l] = fmaf((float)p, ds, acc[b & 1][l]);
        }
    }
    float h[16];
    for (int l = 0; l < 16; l++) h[l] = acc[0][l] + acc[1][l];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) h[l] += h[l + w];
    return h[0];
}

/* Portable act_int16 = 1 path for q8_0 W. Returns false (nothing written)
 * if the quantised x cannot be allocated. */
static bool matvec_portable_i16(const lt_call *call, const lt_step *step, int ith, int nth,
                                const float *x) {
    const int16_t *xq;
    const float *xs;
    if (!lt__xq_get(call, step, x, lt__xq_quant_portable, &xq, &xs)) return false;
    const lt_tensor *W = call->op[1];
    float *y = call->op[0]->data;
    const bool acc = call->ia[0] != 0;
    int64_t r0, r1;
    lt__linear_split(W->ne[1], lt__mv_task_rows(call), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float s = q8_dot_i16(lt_tensor_row(W, r), W->layout, xq, xs, W->ne[0] / LT_QK8_0);
        y[r] = acc ? y[r] + s : s;
    }
    return true;
}

/* One q8_0 row's dot with int8 activations, in the exact order linear.h
 * fixes (the AVX-512 VNNI path computes the same bits). */
static float q8_dot_i8(const void *row, lt_layout layout, const int8_t *xq, const float *xs,
                       int64_t nblk) {
    float acc[2][16] = {{0}};
    for (int64_t p = 0; 2 * p < nblk; p++) {
        for (int h = 0; h < 2; h++) { /* lanes 8h..8h+7 hold block 2p + h */
            const int64_t b = 2 * p + h;
            if (b >= nblk) break; /* the row ends on an unpaired block */
            float d;
            const int8_t *qb = lt__q8_block(row, layout, nblk, b, &d);
            const float ds = d * xs[b];
            for (int j = 0; j < 8; j++) {
                const int8_t *q = qb + 4 * j, *v = xq + b * LT__XQ_BLOCK + 4 * j;
                int32_t s = 0;
                for (int m = 0; m < 4; m++) s += (int32_t)q[m] * v[m];
                acc[p & 1][8 * h + j] = fmaf((float)s, ds, acc[p & 1][8 * h + j]);
            }
        }
    }
    float h[16];
    for (int l = 0; l < 16; l++) h[l] = acc[0][l] + acc[1][l];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) h[l] += h[l + w];
    return h[0];
}

bool lt__matvec_q8i8_ref(const lt_call *call, const lt_step *step, int ith, int nth,
                         const float *x) {
    const int8_t *xq;
    const float *xs;
    const int32_t *xb;
    if (!lt__xq8_get(call, step, x, lt__xq8_quant_portable, &xq, &xs, &xb)) return false;
    const lt_tensor *W = call->op[1];
    float *y = call->op[0]->data;
    const bool acc = call->ia[0] != 0;
    int64_t r0, r1;
    lt__linear_split(W->ne[1], lt__mv_task_rows(call), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float s = q8_dot_i8(lt_tensor_row(W, r), W->layout, xq, xs, W->ne[0] / LT_QK8_0);
        y[r] = acc ? y[r] + s : s;
    }
    return true;
}

static bool is_f32_vector(const lt_tensor *t, int64_t n) {
    return t->dtype == LT_F32 && t->ne[0] == n && t->ne[1] == 1 && t->ne[2] == 1 &&
           t->ne[3] == 1 && t->nb[0] == sizeof(float) && t->data != NULL;
}

static int check_epilogue(const lt_call *call) {
    const int64_t post = call->ia[2], rows = call->op[1]->ne[1];
    if (post & ~(int64_t)(LT_MV_POST_ROPE | LT_MV_POST_STORE | LT_MV_POST_BIAS |
                          LT_MV_POST_NEOX))
        return lt_error(LT_EINVAL, "matvec: ia[2] (epilogue) must be a combination of %d (rope), "
                                   "%d (store), %d (bias) and %d (neox), got %lld",
                        LT_MV_POST_ROPE, LT_MV_POST_STORE, LT_MV_POST_BIAS, LT_MV_POST_NEOX,
                        (long long)post);
    if ((post & LT_MV_POST_NEOX) && !(post & LT_MV_POST_ROPE))
        return lt_error(LT_EINVAL, "matvec: the neox bit of ia[2] needs the rope epilogue");
    if (post & LT_MV_POST_BIAS) {
        const lt_tensor *b = call->op[5];
        if (!b || !is_f32_vector(b, rows))
            return lt_error(LT_EINVAL, "matvec: the bias epilogue needs op5, a contiguous f32 "
                                       "vector of %lld rows", (long long)rows);
        if (lt__overlap(b, call->op[0])) return lt_error(LT_EINVAL, "matvec: the bias overlaps y");
    } else if (call->op[5]) {
        return lt_error(LT_EINVAL, "matvec: a bias (op5) without the bias epilogue");
    }
    if (post & LT_MV_POST_ROPE) {
        const int64_t hd = call->ia[3];
        if (hd < 2 || hd % 2 != 0 || hd > LT__MAX_HEAD_DIM || rows % hd != 0)
            return lt_error(LT_EINVAL, "matvec: the rope epilogue's head_dim %lld must be even, "
                                       "in [2, %d] and divide the %lld rows",
                            (long long)hd, LT__MAX_HEAD_DIM, (long long)rows);
        if (!(call->fa[1] > 0.0f) || isinf(call->fa[1]))
            return lt_error(LT_EINVAL, "matvec: the rope epilogue's base %g must be finite and > 0",
                            (double)call->fa[1]);
        int rc = lt__rope_check_factors(call->op[6], hd, "matvec");
        if (rc != LT_OK) return rc;
    } else if (call->op[6]) {
        return lt_error(LT_EINVAL, "matvec: rope factors (op6) without the rope epilogue");
    }
    if (post & LT_MV_POST_STORE) {
        const lt_tensor *cache = call->op[4];
        if (!cache) return lt_error(LT_EINVAL, "matvec: the store epilogue needs a cache (op4)");
        int rc = lt__check_f32_cache(cache, "matvec", "cache");
        if (rc != LT_OK) return rc;
        if (cache->ne[0] != rows || cache->ne[1] < 1)
            return lt_error(LT_EINVAL, "matvec: the cache has rows of %lld but y has %lld",
                            (long long)cache->ne[0], (long long)rows);
        /* byte extents: W's rows are of its own dtype, not f32 */
        const char *c0 = cache->data;
        const char *c1 = c0 + lt_tensor_span(cache);
        for (int o = 0; o < LT_MAX_OPERANDS; o++) {
            const lt_tensor *t = call->op[o];
            if (o == 4 || !t || !t->data) continue;
            const char *t0 = t->data, *t1 = t0 + lt_tensor_span(t);
            if (c0 < t1 && t0 < c1)
                return lt_error(LT_EINVAL, "matvec: the cache overlaps operand %d", o);
        }
    }
    return LT_OK;
}

/* n contiguous f32 rows of ne0 */
static bool is_f32_rows(const lt_tensor *t, int64_t ne0, int64_t n) {
    return t->dtype == LT_F32 && t->ne[0] == ne0 && t->ne[1] == n && t->ne[2] == 1 &&
           t->ne[3] == 1 && t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0 &&
           t->nb[1] >= (size_t)ne0 * sizeof(float) && t->data != NULL;
}

static int matvec_check(const lt_call *call) {
    const lt_tensor *y = call->op[0], *W = call->op[1], *x = call->op[2];
    if (!y || !W || !x) return lt_error(LT_EINVAL, "matvec: operands y, W, x are required");
    if ((unsigned)W->dtype >= LT_DTYPE_COUNT)
        return lt_error(LT_EINVAL, "matvec: W has unknown dtype %d", (int)W->dtype);
    const int64_t cols = W->ne[0], rows = W->ne[1];
    if (cols <= 0 || rows <= 0 || W->ne[2] != 1 || W->ne[3] != 1 || W->data == NULL)
        return lt_error(LT_EINVAL, "matvec: W must be a non-empty matrix, got ne = {%lld, %lld, "
                                   "%lld, %lld}",
                        (long long)cols, (long long)rows, (long long)W->ne[2],
                        (long long)W->ne[3]);
    int lrc = lt__check_layout(W, "matvec");
    if (lrc != LT_OK) return lrc;
    const int64_t align = lt_dtype_block(W->dtype); /* whole blocks: 32, or 256 for K-quants */
    if (cols % align != 0)
        return lt_error(LT_EINVAL, "matvec: W (%s) has %lld columns, not a multiple of %lld",
                        lt_dtype_name(W->dtype), (long long)cols, (long long)align);
    if (W->nb[0] != lt_dtype_block_bytes(W->dtype) ||
        W->nb[1] < lt_dtype_row_bytes(W->dtype, cols))
        return lt_error(LT_EINVAL, "matvec: W rows are not contiguous (nb = {%zu, %zu})",
                        W->nb[0], W->nb[1]);
    const int64_t n = x->ne[1];
    if (n > 1) { /* several tokens: y and x as rows, no prologue or epilogue */
        if (!is_f32_rows(y, rows, n) || !is_f32_rows(x, cols, n))
            return lt_error(LT_EINVAL, "matvec: y and x must be %lld f32 rows of %lld and %lld",
                            (long long)n, (long long)rows, (long long)cols);
        if (call->ia[1] != LT_MV_PRE_NONE || call->ia[2] != 0)
            return lt_error(LT_EINVAL, "matvec: a matvec of %lld tokens takes no prologue or "
                            "epilogue", (long long)n);
    }
    if (n <= 1 && !is_f32_vector(y, rows))
        return lt_error(LT_EINVAL, "matvec: y must be a contiguous f32 vector of %lld rows",
                        (long long)rows);
    if (n <= 1 && !is_f32_vector(x, cols))
        return lt_error(LT_EINVAL, "matvec: x must be a contiguous f32 vector of %lld columns",
                        (long long)cols);
    if (call->ia[0] != 0 && call->ia[0] != 1)
        return lt_error(LT_EINVAL, "matvec: ia[0] (accumulate) must be 0 or 1, got %lld",
                        (long long)call->ia[0]);
    if (call->ia[1] != LT_MV_PRE_NONE) {
        if (call->ia[1] != LT_MV_PRE_RMSNORM && call->ia[1] != LT_MV_PRE_SWIGLU)
            return lt_error(LT_EINVAL, "matvec: ia[1] (prologue) must be 0, 1 or 2, got %lld",
                            (long long)call->ia[1]);
        if (!call->op[3] || !is_f32_vector(call->op[3], cols))
            return lt_error(LT_EINVAL, "matvec: the prologue's operand must be a contiguous f32 "
                                       "vector of %lld columns", (long long)cols);
        if (cols > LT_MV_PRE_MAX_COLS)
            return lt_error(LT_EINVAL, "matvec: a prologue needs at most %d columns, got %lld",
                            LT_MV_PRE_MAX_COLS, (long long)cols);
        if (call->ia[1] == LT_MV_PRE_RMSNORM && !(call->fa[0] >= 0.0f))
            return lt_error(LT_EINVAL, "matvec: the norm's eps must be >= 0");
    }
    int rc = check_epilogue(call);
    if (rc != LT_OK) return rc;
    return lt_params_validate(&lt__k_matvec, &call->params);
}

static void matvec_cost(const lt_call *call, const lt_step *step, double *bytes, double *flops) {
    (void)step;
    const lt_tensor *W = call->op[1];
    const double rows = (double)W->ne[1], cols = (double)W->ne[0];
    const double n = (double)call->op[2]->ne[1]; /* tokens: W is read once for all */
    double wbytes = rows * (double)lt_dtype_row_bytes(W->dtype, W->ne[0]);
    if (n > 1) {
        *bytes = wbytes + 4.0 * n * (cols + rows * (call->ia[0] ? 2.0 : 1.0));
        *flops = 2.0 * n * rows * cols;
        return;
    }
    *bytes = wbytes + 4.0 * cols * (call->ia[1] ? 2.0 : 1.0) +
             4.0 * rows * (call->ia[0] ? 2.0 : 1.0) +
             4.0 * rows * ((call->ia[2] & LT_MV_POST_STORE) ? 1.0 : 0.0) +
             4.0 * rows * ((call->ia[2] & LT_MV_POST_BIAS) ? 1.0 : 0.0);
    *flops = 2.0 * rows * cols + 3.0 * rows * ((call->ia[2] & LT_MV_POST_ROPE) ? 1.0 : 0.0) +
             rows * ((call->ia[2] & LT_MV_POST_BIAS) ? 1.0 : 0.0);
}

void lt__matvec_drive(const lt_call *call, int ith, int nth, const lt__mv_rows_fn table[4][2],
                      const lt__mv_x *x) {
    const lt_tensor *W = call->op[1];
    float *y = call->op[0]->data;
    const int64_t rows = W->ne[1], cols = W->ne[0];
    const int64_t per = call->params.v[LT__MV_ROWS_PER_TASK];
    const int unroll = call->params.v[LT__MV_UNROLL];
    int64_t kb = call->params.v[LT__MV_K_BLOCK];
    const size_t pf = (size_t)call->params.v[LT__MV_PREFETCH];
    const bool accumulate = call->ia[0] != 0;
    LT_ASSERT(per > 0 && per <= LT__MV_MAX_ROWS_PER_TASK && unroll >= 1 && unroll <= 8);
    if (kb <= 0 || kb >= cols) kb = cols;

    int64_t r0, r1; /* whole tasks: multiples of per */
    lt__linear_split(rows, lt__mv_task_rows(call), ith, nth, &r0, &r1);
    const size_t ld = W->nb[1];
    const char *base = W->data;
    alignas(64) float part[LT__MV_MAX_ROWS_PER_TASK * 32];

    for (int64_t t = r0; t < r1; t += per) {
        const int64_t te = t + per < r1 ? t + per : r1;
        for (int64_t k0 = 0; k0 < cols; k0 += kb) {
            const int64_t k1 = k0 + kb < cols ? k0 + kb : cols;
            const bool first = k0 == 0, last = k1 == cols;
            for (int64_t r = t; r < te;) {
                /* groups of the largest power of two <= min(unroll, rows
                 * left), as many as fit, then the rest in smaller ones */
                int64_t left = te - r;
                int lg = 0;
                while ((1 << (lg + 1)) <= unroll && (1 << (lg + 1)) <= left) lg++;
                const int64_t groups = left >> lg;
                table[lg][pf != 0](base + (size_t)r * ld, ld, x, k0, k1, pf, part + 32 * (r - t),
                                   first, last, y + r, accumulate, groups);
                r += groups << lg;
            }
        }
    }
}

/* The vector paths work on whole 16-column groups; the rare widths that are
 * not a multiple of 16 (llama2.c's stories260K has an FFN of 172) take the
 * portable path, which computes the same sums. */
#if LT_HAVE_X86
static void matvec_avx2_x(const lt_call *call, const lt_step *step, int ith, int nth,
                          const float *x) {
    /* q4_0 .. q6_k: the quantised driver with this ISA's dots */
    if (lt__qtype_of_w(call->op[1]) &&
        lt__matvec_quant(call, step, ith, nth, x, LT_ISA_AVX2))
        return;
    if (call->op[1]->ne[0] % 16 || lt__qtype_of_w(call->op[1]))
        matvec_portable_x(call, step, ith, nth, x);
    else lt__matvec_avx2(call, step, ith, nth, x);
}

static void matvec_avx512_x(const lt_call *call, const lt_step *step, int ith, int nth,
                            const float *x) {
    if (lt__qtype_of_w(call->op[1]) &&
        lt__matvec_quant(call, step, ith, nth, x, LT_ISA_AVX512))
        return;
    if (call->op[1]->ne[0] % 16 || lt__qtype_of_w(call->op[1]))
        matvec_portable_x(call, step, ith, nth, x);
    else lt__matvec_avx512(call, step, ith, nth, x);
}
#endif

/* A matvec of several tokens (a batched decode step: one token of each of
 * several sequences) as one matvec per token, each the bits it gives alone,
 * over chunks of the thread's rows of W of tok_chunk_kb KiB (whole tasks of
 * rows, at least one), small enough to stay in L2 while every token passes:
 * W is read from memory once per step. Every chunk size gives the same
 * bits: a row's sum does not depend on the rows computed with it. */
static void matvec_tokens(const lt_call *call, int ith, int nth, lt_kernel_fn one_token) {
    const lt_tensor *Y = call->op[0], *W = call->op[1], *X = call->op[2];
    const int64_t n = X->ne[1], per = lt__mv_task_rows(call);
    const size_t chunk_bytes = (size_t)call->params.v[LT__MV_TOK_CHUNK_KB] << 10;
    int64_t r0, r1;
    lt__linear_split(W->ne[1], per, ith, nth, &r0, &r1);
    int64_t chunk = (int64_t)(chunk_bytes / W->nb[1]) / per * per;
    if (chunk < per) chunk = per;
    const lt_step one = {.n_tokens = 1}; /* seq 0: each sub-call quantises its own x */
    for (int64_t c = r0; c < r1; c += chunk) {
        lt_tensor w1 = *W, y1 = *Y, x1 = *X;
        w1.data = (char *)W->data + (size_t)c * W->nb[1];
        w1.ne[1] = y1.ne[0] = r1 - c < chunk ? r1 - c : chunk;
        y1.ne[1] = x1.ne[1] = 1;
        lt_call sub = *call;
        sub.op[0] = &y1, sub.op[1] = &w1, sub.op[2] = &x1;
        for (int64_t i = 0; i < n; i++) {
            y1.data = (char *)Y->data + (size_t)i * Y->nb[1] + (size_t)c * sizeof(float);
            x1.data = (char *)X->data + (size_t)i * X->nb[1];
            one_token(&sub, &one, 0, 1);
        }
    }
}

/* A matvec of several tokens by the ISA's own multi-token path, where it
 * has one for W's dtype and mode: false if it has none (or no memory). */
static bool matvec_tokens_isa(const lt_call *call, const lt_step *step, int ith, int nth,
                              lt_isa isa) {
    const lt_tensor *W = call->op[1];
    /* q4_0 .. q6_k: every token's x quantised once per thread, each row read once for all */
    if (lt__qtype_of_w(W)) return lt__matvec_quant_tokens(call, step, ith, nth, isa);
#if LT_HAVE_X86
    if (isa == LT_ISA_AVX512 && W->dtype == LT_Q8_0 && call->params.v[LT__MV_ACT_INT8] &&
        W->ne[0] % 16 == 0)
        return lt__matvec_q8i8_tokens_avx512(call, step, ith, nth);
    if (isa == LT_ISA_AVX2 && W->dtype == LT_Q8_0 && call->params.v[LT__MV_ACT_INT8] &&
        W->ne[0] % 16 == 0)
        return lt__matvec_q8i8_tokens_avx2(call, step, ith, nth);
#endif
    (void)ith, (void)nth, (void)isa;
    return false;
}

/* The entries: the input after the prologue by the ISA's own primitives
 * (those of the norm or gate kernel the prologue stands for), the path, then
 * the epilogue on the rows the thread computed. */
#define ENTRY(isa, ISA)                                                                     \
    static void matvec_##isa(const lt_call *call, const lt_step *step, int ith, int nth) { \
        if (call->op[2]->ne[1] > 1) {                                                      \
            if (!matvec_tokens_isa(call, step, ith, nth, ISA))                             \
                matvec_tokens(call, ith, nth, matvec_##isa);                               \
            return;                                                                        \
        }                                                                                  \
        const float *x = lt__mv_input(call, step, ISA);                                    \
        if (x) matvec_##isa##_x(call, step, ith, nth, x);                                 \
        else lt__mv_input_oom(call, step, ith, nth, ISA, matvec_##isa##_x);               \
        if (call->ia[2]) lt__mv_epilogue(call, step, ith, nth, ISA);                      \
    }
ENTRY(portable, LT_ISA_PORTABLE)
#if LT_HAVE_X86
ENTRY(avx2, LT_ISA_AVX2)
ENTRY(avx512, LT_ISA_AVX512)
#endif
#undef ENTRY

/* Defaults measured in the decoder (looptune bench, stories110M shape, 1
 * thread, weights resident in huge pages, 2 vCPU AVX-512 Xeon; fraction of
 * the read-only stream measured in the same run, medians of 3):
 * - unroll 1, prefetch 8192: q8_0 0.81, f32 0.97 (the best point);
 *   unroll 1/2 with prefetch 4096: q8_0 0.78/0.77, f32 0.91/0.90;
 *   unroll 8 with prefetch 1024 (cache-resident best): q8_0 0.35, f32 0.65.
 *   One row at a time is one sequential stream for the hardware prefetcher;
 *   software prefetch ahead covers the stream's start and page changes.
 * - prefetch 2048 (was 8192) goes with act_int8 1 below: int8 activations
 *   only pay off with the nearer prefetch (bench/decode_params.py, 1B-shaped
 *   q8_0, 4 rounds alternating, ratio of median tokens/s per round to the
 *   old defaults act_int8 0 / prefetch 8192, min/median/max): 1 thread int8
 *   at 8192 0.94/0.97/1.00, int16 at 2048 1.07/1.08/1.11, int8 at 2048
 *   1.10/1.12/1.14 (fraction of read-only 0.81 -> 0.89); 2 threads
 *   0.89/0.95/1.02, 0.92/1.03/1.04, 1.05/1.12/1.15. stories110M q8_0, 6
 *   rounds: 1 thread int8 at 2048 1.01/1.06/1.13; 2 threads 0.89/0.96/0.99
 *   (the one loss: there 8192 suits both modes better, int8 at 8192
 *   0.93/1.13/1.32). Other dtypes, 2048 against 8192, stories110M: f32 1
 *   thread 1.01/1.02/1.05, 2 threads 0.99/1.02/1.05; f16 1 thread
 *   0.99/1.05/1.10. bench_matvec (huge pages), 2048x2048 q8_0, 1 thread,
 *   unroll 1: int8 0.82/0.86/0.89/0.94/0.86 of the stream at prefetch
 *   0/512/1024/2048/8192, int16 0.76/0.77/0.82/0.89/0.83.
 * - prefetch on AVX2 depends on the core (mv_prefetch_default): 512 where
 *   L1d is below 48 KB (its far prefetch into L2 then runs 2048 ahead):
 *   bench/decode_params.py, 512 against 2048, the AVX2 path of the
 *   -DLT_NATIVE=OFF build on a 2 vCPU AMD EPYC (Zen 4, 32 KB L1d), 4
 *   rounds, ratio of median tokens/s per round min/median/max: q8_0
 *   1B-shaped 1 thread 1.23/1.30/1.35, 2 threads 0.96/0.97/1.19;
 *   stories110M q8_0 1 thread 1.24/1.27/1.35, 2 threads 1.07/1.10/1.27;
 *   stories15M q8_0 1 thread 0.92/1.03/1.05; stories110M f32 1 thread
 *   1.08/1.10/1.15, 2 threads 0.88/1.25/1.66. bench_matvec (split
 *   5632x2048 q8_0, int8, 1 thread): 0.89 of the stream at 512, 0.69 at
 *   2048. On a Zen 5 (48 KB L1d, AVX-VNNI; --isa avx2) it is the other
 *   way round, 2048 against 512, 3-4 rounds: stories110M q8_0 1 thread
 *   1.28/1.34/1.39, 2 threads 1.11/1.14/1.20, 1B-shaped q8_0 1 thread
 *   1.25/1.26/1.27, stories110M f32 1 thread 1.10/1.15/1.20 (8192: q8_0
 *   1.50 at 1 thread, 1.10 at 2, f32 1.16), so cores with 48 KB or more
 *   take AVX-512's 2048. Two machines are what this rests on; the tuner
 *   finds each host's own (the host class names its L1d).
 * - The interleaved types (lt_x16_has: q4_0 .. q5_1, q4_k, q6_k; matvec_q.c) read prefetch as
 *   row bytes too: a group's 16 rows go side by side, so their group dots
 *   run 8 times as many group bytes ahead (16 KB at 2048). On a Xeon
 *   (Emerald Rapids, 48 KB L1d, 13 GB/s a core), looptune bench, 1B shape,
 *   2 threads, 2 rounds, tokens/s at 8, 16 and 32 KB of the group ahead:
 *   q4_0 46.6-49.6, 47.4-48.4, 37.8-41.9; Q4_K_M 40.0-40.2, 39.9-41.3,
 *   37.2-37.3; q6_k 29.7-30.1, 28.9-29.0, 27.5-27.6. bench_qdot, 256 MiB of
 *   interleaved 2048-column q4_0 rows, one token, ns per row's block
 *   (Zen 5): AVX2 + AVX-VNNI 0.94 with 2048 group bytes ahead, 0.87 at
 *   4096, 0.82 at 8192, 0.69 at 16384 and 32768; AVX-512 0.72, 0.63, 0.65,
 *   0.61, 0.60. q4_k and q6_k: 15 % less time at 16384 than at 2048.
 * - rows_per_task 32: a task's y rows fill whole cache lines; 8-128 were
 *   within noise.
 * - k_block 0: x (at most 22 KB for 5632 columns) stays in L1 without it.
 * - act_int16 1 (q8_0 only; every path): looptune bench, same
 *   model, builds with default 0 and 1 alternating in one run on a busy
 *   shared host (load 2-9 on 2 vCPUs), 24 invocations each (median of 3
 *   runs in each), fraction of read-only min/median/max: 1 thread
 *   0.47/0.75/0.94 -> 0.57/0.89/1.24; 2 threads 0.26/0.64/1.01 ->
 *   0.46/0.77/1.01 (on the quietest 6 rounds: 0.77 -> 0.89 and 0.62 -> 0.82
 *   medians). Cache-resident (bench_matvec --footprint 1,
 *   768x768) one core computes 23.3 GB/s of q8_0 instead of 15.5. Logits move
 *   by about 1e-5 relative per matvec (the reference tests still pass, at up
 *   to 0.99 of their 1e-4 bound in one run-to-run comparison).
 * - act_int8 1 (q8_0 only; every path; wins over act_int16):
 *   with prefetch 2048 as above. Cache-resident (bench_matvec --act
 *   --footprint 1, 512x2048) one core computes 35 GB/s of q8_0 with int8
 *   activations against 25 with int16. Logits are as close to an exact
 *   reference as llama.cpp's own q8_0 path (worst row 0.021 x max|logit|
 *   on the test models, bench/peers/q8_0_logits_error.py); the reference
 *   tests bound them at 0.04 (tests/reference/lt_harness.py). */
static int64_t matvec_units(const lt_call *call) {
    const int64_t per = lt__mv_task_rows(call);
    return (call->op[1]->ne[1] + per - 1) / per;
}

/* A task writes its rows of y and, storing, the same columns of the cache row. */
static bool matvec_task_cols(const lt_call *call, int op, int task, int n_tasks, int64_t *c0,
                             int64_t *c1) {
    if (call->op[0]->ne[1] > 1) return false; /* several tokens: not said */
    if (op != 0 && !(op == 4 && (call->ia[2] & LT_MV_POST_STORE))) return false;
    lt__linear_split(call->op[1]->ne[1], lt__mv_task_rows(call), task, n_tasks, c0, c1);
    return true;
}

/* prefetch's default (see above): AVX2 on a core with less than 48 KB of
 * L1d runs best nearer, 512 bytes ahead; 2048 everywhere else. */
static int32_t mv_prefetch_default(lt_isa isa) {
    const size_t l1d = lt_cpu()->l1d_bytes;
    return isa == LT_ISA_AVX2 && l1d && l1d < 48 * 1024 ? 512 : 2048;
}

const lt_kernel lt__k_matvec = {
    .name = "matvec",
    .id = LT_K_MATVEC,
    .n_params = LT__MV_NPARAMS,
    .params =
        {
            [LT__MV_ROWS_PER_TASK] = {"rows_per_task", 7, {4, 8, 16, 32, 64, 128, 256}, 32},
            /* the portable reference ignores these three (q4_0 .. q6_k read
             * prefetch on every path, matvec_q.c) */
            [LT__MV_UNROLL] = {.name = "unroll",
                               .n_values = 4,
                               .values = {1, 2, 4, 8},
                               .def = 1,
                               .isas = LT_ISAS_VECTOR,
                               .dtypes = LT_DTYPES_BLOCKED},
            [LT__MV_K_BLOCK] = {.name = "k_block",
                                .n_values = 5,
                                .values = {0, 256, 512, 1024, 2048},
                                .def = 0,
                                .isas = LT_ISAS_VECTOR,
                                .dtypes = LT_DTYPES_BLOCKED},
            [LT__MV_PREFETCH] = {.name = "prefetch",
                                 .n_values = 7,
                                 .values = {0, 256, 512, 1024, 2048, 4096, 8192},
                                 .def = 2048,
                                 .isas = LT_ISAS_VECTOR,
                                 .host_def = mv_prefetch_default},
            /* q8_0's activation modes */
            [LT__MV_ACT_INT16] = {.name = "act_int16", .n_values = 2, .values = {0, 1}, .def = 1,
                                  .dtypes = 1u << LT_Q8_0},
            [LT__MV_ACT_INT8] = {.name = "act_int8", .n_values = 2, .values = {0, 1}, .def = 1,
                                 .dtypes = 1u << LT_Q8_0},
            /* only a matvec of several tokens reads it: the batch regime's */
            [LT__MV_TOK_CHUNK_KB] = {.name = "tok_chunk_kb",
                                     .n_values = 7,
                                     .values = {32, 64, 128, 256, 512, 1024, 2048},
                                     .def = 256,
                                     .regimes = 1u << LT_REGIME_BATCH},
        },
    .run =
        {
            [LT_ISA_PORTABLE] = matvec_portable,
            [LT_ISA_AVX2] = LT_X86_ONLY(matvec_avx2),
            [LT_ISA_AVX512] = LT_X86_ONLY(matvec_avx512),
        },
    .cost = matvec_cost,
    .check = matvec_check,
    .units = matvec_units,
    .task_cols = matvec_task_cols,
};
