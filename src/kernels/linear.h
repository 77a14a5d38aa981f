/* Internal contract of the linear kernels (matvec for decode, matmul for
 * prefill): parameter indices, the deterministic split of rows over threads,
 * and the per-ISA entry points the descriptors in matvec.c / matmul.c point to. */
#ifndef LT_KERNELS_LINEAR_H
#define LT_KERNELS_LINEAR_H

#include "looptune/kernels.h"

#include <pthread.h>

/* matvec parameters, indexed like lt__k_matvec.params. */
enum {
    LT__MV_ROWS_PER_TASK = 0, /* rows in one unit of work */
    LT__MV_UNROLL,            /* rows computed simultaneously */
    LT__MV_K_BLOCK,           /* k block in elements, 0 = whole row */
    LT__MV_PREFETCH,          /* software prefetch distance in bytes, 0 = none */
    LT__MV_ACT_INT16,         /* q8_0 W: 1 = x quantised to int16 per block, integer dots */
    LT__MV_ACT_INT8,          /* q8_0 W: 1 = x quantised to int8 per block (wins over int16) */
    LT__MV_TOK_CHUNK_KB,      /* several tokens (the batch regime): KiB of W rows every token
                                 passes over before the next rows */
    LT__MV_NPARAMS
};

/* matmul parameters, indexed like lt__k_matmul.params. */
enum {
    LT__MM_N_BLOCK = 0, /* tokens per block (X rows kept hot while a W block is reused) */
    LT__MM_M_BLOCK,     /* W rows packed together (outputs per packed block) */
    LT__MM_K_BLOCK,     /* k elements per packed block */
    LT__MM_NPARAMS
};

/* Largest rows_per_task value: ISA paths size per-task scratch from it. */
#define LT__MV_MAX_ROWS_PER_TASK 256

/* Rows [*r0, *r1) of thread ith. Rows are cut into tasks of `per` rows at
 * fixed offsets (multiples of per, independent of nth) and thread ith takes
 * the contiguous range of tasks [ntask*ith/nth, ntask*(ith+1)/nth): threads
 * never share a task, so no row is split and y is written by one thread per
 * task. An empty range has *r0 >= *r1. */
static inline void lt__linear_split(int64_t rows, int64_t per, int ith, int nth, int64_t *r0,
                                    int64_t *r1) {
    int64_t ntask = (rows + per - 1) / per;
    int64_t t0 = ntask * ith / nth, t1 = ntask * (ith + 1) / nth;
    *r0 = t0 * per;
    *r1 = t1 * per < rows ? t1 * per : rows;
}

/* Rows of one task of a matvec (the split unit of lt__linear_split):
 * rows_per_task, rounded up to a multiple of 16 for interleaved W (a
 * group is one task's), and of head_dim when the epilogue has a NEOX rope,
 * so every pair (x[i], x[i + hd/2]) of a head lies in one task and the
 * thread that computed both rows rotates them. */
static inline int64_t lt__lcm(int64_t a, int64_t b) {
    int64_t x = a, y = b;
    while (y) {
        const int64_t t = x % y;
        x = y;
        y = t;
    }
    return a / x * b;
}
static inline int64_t lt__mv_task_rows(const lt_call *call) {
    int64_t per = call->params.v[LT__MV_ROWS_PER_TASK];
    const int64_t neox = LT_MV_POST_ROPE | LT_MV_POST_NEOX, hd = call->ia[3];
    if (per <= 0) return per;
    /* interleaved W: whole groups of 16 rows */
    if (call->op[1] && call->op[1]->layout == LT_LAYOUT_X16) per = lt__lcm(per, LT_X16_ROWS);
    if ((call->ia[2] & neox) != neox || hd <= 0) return per;
    return lt__lcm(per, hd);
}

/* Per-thread scratch of at least `bytes`, 64-byte aligned, grown on demand
 * and owned by the calling thread (freed when it exits). The pointer stays
 * valid until the next call on the same thread. NULL if out of memory. */
float *lt__linear_scratch(size_t bytes);

/* Output columns [r0, r1) of a matmul (W rows r0..r1-1, every token) by the
 * portable reference; the ISA paths fall back to it for their own rows when
 * their packing buffer cannot be allocated. */
void lt__matmul_ref_rows(const lt_call *call, int64_t r0, int64_t r1);

/* Block b of a q8_0 row of nb blocks in either layout: its quants, and its
 * scale in *d. For the portable paths; the vector paths address blocks
 * themselves. */
static inline const int8_t *lt__q8_block(const void *row, lt_layout layout, int64_t nb,
                                         int64_t b, float *d) {
    if (layout == LT_LAYOUT_Q8_SPLIT) {
        *d = lt_f16_to_f32(*lt_q8s_scales(row, nb, b));
        return lt_q8s_qs(row, nb, b);
    }
    const lt_block_q8_0 *blk = (const lt_block_q8_0 *)row + b;
    *d = lt_f16_to_f32(blk->d);
    return blk->qs;
}

/* Blocks of the q8_0 chunk the vector paths take at block b of [b, b1): up
 * to 16 (one 16-lane register of scales), and for split rows none past the
 * end of b's group, whose scales lie apart from the next group's. */
static inline int64_t lt__q8_chunk(bool split, int64_t b, int64_t b1) {
    int64_t n = b1 - b < 16 ? b1 - b : 16;
    const int64_t group_end = b - b % LT_Q8_SPLIT_GROUP + LT_Q8_SPLIT_GROUP;
    if (split && group_end - b < n) n = group_end - b;
    return n;
}

/* Elements [k, k + n) of W's row at row (k a multiple of 32, n <= 32, within
 * one block for q8_0) as f32, in any layout: the portable references'
 * dequantisation (a K-quant's whole super-block is dequantised for it). */
static inline void lt__row_chunk_f32(const lt_tensor *W, const char *row, int64_t k, int64_t n,
                                     float *w) {
    const int64_t blk = lt_dtype_block(W->dtype);
    if (W->layout == LT_LAYOUT_X16) { /* row: W's data + r nb[1], as if plain */
        const int64_t r = ((const char *)row - (const char *)W->data) / (int64_t)W->nb[1];
        const char *group = (const char *)W->data + (size_t)(r / LT_X16_ROWS) * LT_X16_ROWS * W->nb[1];
        char plain[sizeof(lt_block_q6_k)]; /* the largest interleaved block */
        float sb[LT_QK_K];
        LT_ASSERT(lt_dtype_block_bytes(W->dtype) <= sizeof plain && blk <= LT_QK_K);
        lt_x16_block(W->dtype, group, W->ne[0] / blk, (int)(r % LT_X16_ROWS), k / blk, plain);
        lt_row_to_f32(W->dtype, plain, sb, blk);
        for (int64_t j = 0; j < n; j++) w[j] = sb[k % blk + j];
    } else if (blk > 32) {
        float sb[LT_QK_K];
        LT_ASSERT(blk <= LT_QK_K);
        lt_row_to_f32(W->dtype, row + lt_dtype_row_bytes(W->dtype, k / blk * blk), sb, blk);
        for (int64_t j = 0; j < n; j++) w[j] = sb[k % blk + j];
    } else if (W->layout == LT_LAYOUT_Q8_SPLIT) {
        float d;
        const int8_t *q = lt__q8_block(row, W->layout, W->ne[0] / LT_QK8_0, k / LT_QK8_0, &d);
        for (int64_t j = 0; j < n; j++) w[j] = d * (float)q[j];
    } else {
        lt_row_to_f32(W->dtype, row + lt_dtype_row_bytes(W->dtype, k), w, n);
    }
}

/* ---- q8_0 with int16 activations (act_int16 = 1) ---------------------------
 * x is cut into 32-element blocks; block b has scale s[b] = max|x_b| / 32767
 * and xq[k] = rint(x[k] * i) with i = 32767 / max|x_b| (|xq| <= 32767). A
 * block whose i is not finite (max|x_b| = 0 or below ~1e-34) has s = 0 and
 * xq = 0; a block with a NaN or infinity has s = NaN and xq = 0, so y turns
 * NaN as it would in f32. A row's dot is then sum over blocks of
 * (d_b * s[b]) * sum_k q_k xq_k with exact integer inner sums.
 *
 * Exact arithmetic order, shared by the portable, AVX2 and AVX-512 paths (so
 * they give bit-identical y): lane l (0..15) of block b holds the exact int32
 * p = q[2l] xq[2l] + q[2l+1] xq[2l+1]; with ds = (float)d_b * s[b] (rounded
 * once), acc[b % 2][l] = fmaf((float)p, ds, acc[b % 2][l]) in increasing b
 * (b counted from the row's start); then h[l] = acc[0][l] + acc[1][l] and
 * h is summed by halves: h[l] += h[l + 8] (l < 8), += h[l + 4] (l < 4),
 * += h[l + 2] (l < 2), sum = h[0] + h[1]. */
#define LT__XQ_BLOCK 32
#define LT__XQ_MAX 32767

/* Quantises n (a multiple of 32) floats of x into q[n] and s[n / 32]. */
typedef void (*lt__xq_quant_fn)(const float *x, int64_t n, int16_t *q, float *s);
void lt__xq_quant_portable(const float *x, int64_t n, int16_t *q, float *s);

/* x of call (op[2]) quantised by quant, cached per thread under (call, x,
 * step->seq) when seq != 0, so a thread quantises x once per node and step
 * however many tasks it runs. *q ([cols], 64-byte aligned) and *s ([cols / 32]
 * followed by zeros up to a multiple of 16) stay valid until this thread's
 * next call. Returns false if out of memory (the caller takes the f32 path). */
bool lt__xq_get(const lt_call *call, const lt_step *step, const float *x, lt__xq_quant_fn quant,
                const int16_t **q, const float **s);

/* ---- q8_0 with int8 activations (act_int8 = 1) -----------------------------
 * As llama.cpp's q8_0 activations, with an f32 scale: block b has scale
 * s[b] = max|x_b| / 127 and xq[k] = rint(x[k] * i), i = 127 / max|x_b|
 * (|xq| <= 127); zero, tiny, NaN and infinite blocks as for int16 above.
 * A row's dot is sum over blocks of (d_b * s[b]) * sum_k q_k xq_k, the inner
 * sums exact in int32.
 *
 * Exact arithmetic order, shared by the portable, AVX2 and AVX-512 paths (so
 * they give bit-identical y): blocks go in pairs (2p, 2p + 1), p counted from the
 * row's start; lane l (0..15) of pair p holds the exact int32
 * P = sum_(m < 4) q[4j + m] xq[4j + m] of block 2p + l / 8, j = l % 8 (a
 * missing block 2p + 1 at the row's end: lanes 8..15 are skipped). With
 * ds = (float)d_b * s[b] (rounded once), acc[p % 2][l] = fmaf((float)P, ds,
 * acc[p % 2][l]) in increasing p; then h[l] = acc[0][l] + acc[1][l], summed
 * by halves as for int16. */
#define LT__XQ8_MAX 127
/* int32 lanes (4 elements each) per 32-element block */
#define LT__XQ8_LANES 8

/* Quantises n (a multiple of 32) floats of x into q[n], s[n / 32] and
 * bias[n / 4]: bias[j] = -128 * (q[4j] + q[4j+1] + q[4j+2] + q[4j+3]), the
 * correction the AVX-512 dot needs for weights offset by +128. */
typedef void (*lt__xq8_quant_fn)(const float *x, int64_t n, int8_t *q, float *s, int32_t *bias);
void lt__xq8_quant_portable(const float *x, int64_t n, int8_t *q, float *s, int32_t *bias);

/* As lt__xq_get, for int8: *q ([cols] then zeros up to a multiple of 64
 * bytes), *s ([cols / 32] then zeros up to a multiple of 16) and *bias
 * ([cols / 4] then zeros up to a multiple of 16), all 64-byte aligned. */
bool lt__xq8_get(const lt_call *call, const lt_step *step, const float *x, lt__xq8_quant_fn quant,
                 const int8_t **q, const float **s, const int32_t **bias);
/* ... and every token's x of a matvec of several tokens (X's rows), each
 * in that layout, one after the other (*per_tok bytes apart; a token's
 * scales *s_off and its biases *b_off (b_off may be NULL) bytes into it):
 * this thread's copy for (call, X, step->seq), so the tasks a thread takes
 * of one node quantise x once. NULL if out of memory. */
const char *lt__xq8_tokens_get(const lt_call *call, const lt_step *step, lt__xq8_quant_fn quant,
                               size_t *per_tok, size_t *s_off, size_t *b_off);

#if defined(__AVX2__)
#include <immintrin.h>

/* The q8_0 integer paths' accumulators on AVX2, a[row][acc][half]: acc as
 * linear.h's order names it (int16: b % 2; int8: pair p % 2), half the
 * ymm of lanes 0..7 or 8..15. Between k blocks they wait in part ([row][32]
 * floats). Loaded (zero when first) for U rows: */
static inline __attribute__((always_inline)) void
lt__q8acc_load_avx2(int U, __m256 a[8][2][2], const float *part, bool first) {
#pragma GCC unroll 8
    for (int u = 0; u < U; u++)
        for (int A = 0; A < 2; A++)
            for (int H = 0; H < 2; H++)
                a[u][A][H] = first ? _mm256_setzero_ps()
                                   : _mm256_load_ps(part + 32 * u + 16 * A + 8 * H);
}

/* ... and, when last, reduced by the fixed halving order (h = acc[0] +
 * acc[1], then halves) into y[u] (= or +=); else parked in part. */
static inline __attribute__((always_inline)) void
lt__q8acc_finish_avx2(int U, __m256 a[8][2][2], float *part, bool last, float *y,
                      bool accumulate) {
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        if (last) {
            __m256 v8 = _mm256_add_ps(_mm256_add_ps(a[u][0][0], a[u][1][0]),
                                      _mm256_add_ps(a[u][0][1], a[u][1][1]));
            __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
            __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
            const float s = _mm_cvtss_f32(_mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1)));
            y[u] = accumulate ? y[u] + s : s;
        } else {
            for (int A = 0; A < 2; A++)
                for (int H = 0; H < 2; H++)
                    _mm256_store_ps(part + 32 * u + 16 * A + 8 * H, a[u][A][H]);
        }
    }
}
#endif

/* A thread's growable buffer (*buf, *cap bytes, 64-byte aligned) made at
 * least `bytes` long; the buffer is registered under *key (made once by
 * make_key, whose destructor frees it at the thread's exit). False if out
 * of memory (the buffer is unchanged). */
bool lt__tl_reserve(char **buf, size_t *cap, size_t bytes, pthread_once_t *once,
                    pthread_key_t *key, void (*make_key)(void));

/* ---- the input prologue (matvec_input.c) ----------------------------------- */

/* A matvec path given its input x (after the prologue). */
typedef void (*lt__mv_entry_fn)(const lt_call *call, const lt_step *step, int ith, int nth,
                                const float *x);

/* The call's x after its prologue (ia[1]) by isa's primitives: op[2]'s data
 * without one, else this thread's cached copy. NULL if out of memory. */
const float *lt__mv_input(const lt_call *call, const lt_step *step, lt_isa isa);
/* Runs fn with the prologue's x computed into a stack buffer, when
 * lt__mv_input could not allocate. */
void lt__mv_input_oom(const lt_call *call, const lt_step *step, int ith, int nth, lt_isa isa,
                      lt__mv_entry_fn fn);

/* The call's epilogue (ia[2]: rope, then the cache store) on thread ith's
 * rows of y, by isa's primitives (matvec_epilogue.c). */
void lt__mv_epilogue(const lt_call *call, const lt_step *step, int ith, int nth, lt_isa isa);

/* ---- the matvec driver shared by every ISA path ------------------------------ */

/* The activations a row function reads: x in f32, or (act_int16 / act_int8)
 * quantised. */
typedef struct {
    const float *x;      /* [cols] */
    const int16_t *xq;   /* [cols], act_int16 paths only */
    const float *xs;     /* [cols / 32] block scales, act_int16 and act_int8 paths */
    const int8_t *xq8;   /* [cols], act_int8 paths only */
    const int32_t *xb;   /* [cols / 4] lane corrections, act_int8 paths only */
    int64_t row_blocks;  /* q8_0 blocks per row, act_int8 paths only */
} lt__mv_x;

/* `groups` groups of 1 << lg rows each, one after the other, from w (row
 * stride ld) over elements [k0, k1): part holds the rows' accumulators
 * between k blocks ([rows][32] floats; read unless first, written unless
 * last); when last, y[u] = (or +=) row u's sum. One call runs a task's rows
 * (a call per row group cost a tenth of a small model's decode). */
typedef void (*lt__mv_rows_fn)(const char *w, size_t ld, const lt__mv_x *x, int64_t k0,
                               int64_t k1, size_t pf, float *part, bool first, bool last,
                               float *y, bool accumulate, int64_t groups);

/* Thread ith's rows of a matvec: the row split, the k blocks and the
 * largest power-of-two row groups up to `unroll`, each through
 * table[log2 rows][prefetch on]. Every ISA path calls this, so all split
 * and order work alike. */
void lt__matvec_drive(const lt_call *call, int ith, int nth, const lt__mv_rows_fn table[4][2],
                      const lt__mv_x *x);

/* ---- the matmul driver shared by the vector paths ------------------------------ */

/* Packs rows [0, nrows) of W's rows from w (row stride ld) over elements
 * [k0, k1) to f32, panel-major as the ISA's micro-kernel reads it. */
typedef void (*lt__mm_pack_fn)(const lt_tensor *W, const char *w, size_t ld, int64_t nrows,
                               int64_t k0, int64_t k1, float *dst);
/* The same for split q8_0 rows (core.h) in panels of NR rows
 * (dst[(k - k0) * NR + r], rows nrows..NR-1 zero), portably: for ISA paths
 * without their own. */
void lt__mm_pack_q8_split(const lt_tensor *W, const char *w, size_t ld, int64_t nrows,
                          int64_t NR, int64_t k0, int64_t k1, float *dst);
/* m tokens (the table index) x nr outputs of one packed panel p over kc:
 * c = (or +=, when add) x p. */
typedef void (*lt__mm_tile_fn)(const float *x, size_t ldx, const float *p, int64_t kc, float *c,
                               size_t ldc, int64_t nr, bool add);

/* Thread ith's output rows of a matmul: k blocks, m blocks packed into the
 * thread's scratch, n blocks, panels of panel_rows outputs, tiles of up to
 * max_tokens tokens through tiles[m]. Falls back to the portable rows when
 * the scratch cannot be allocated. */
void lt__matmul_drive(const lt_call *call, int ith, int nth, int64_t panel_rows, int max_tokens,
                      lt__mm_pack_fn pack, const lt__mm_tile_fn *tiles);

/* The descriptors (matvec.c, matmul.c); check() validates params against them. */
extern const lt_kernel lt__k_matvec, lt__k_matmul;

/* ISA paths (lt_kernel_fn's contract; the matvec paths take the input x
 * after the call's prologue, lt__mv_input). */
void lt__matvec_avx2(const lt_call *call, const lt_step *step, int ith, int nth, const float *x);
void lt__matvec_avx512(const lt_call *call, const lt_step *step, int ith, int nth, const float *x);
/* q8_0 W with act_int16 = 1 (matvec_q8i16_avx512.c): false, nothing
 * written, if the quantised x cannot be allocated. */
bool lt__matvec_q8i16_avx512(const lt_call *call, const lt_step *step, int ith, int nth,
                             const float *x);
/* q8_0 W with act_int8 = 1 (matvec_q8i8_avx512.c; AVX-512 VNNI, or
 * AVX-512BW where the CPU has no VNNI: the same bits): false, nothing
 * written, if the quantised x cannot be allocated. */
bool lt__matvec_q8i8_avx512(const lt_call *call, const lt_step *step, int ith, int nth,
                            const float *x);
/* The same two on AVX2 (matvec_q8i16_avx2.c, matvec_q8i8_avx2.c: plain
 * layout only), same contract and bits. */
bool lt__matvec_q8i16_avx2(const lt_call *call, const lt_step *step, int ith, int nth,
                           const float *x);
bool lt__matvec_q8i8_avx2(const lt_call *call, const lt_step *step, int ith, int nth,
                          const float *x);
/* A matvec of several tokens (x and y rows, no prologue or epilogue) with
 * q8_0 W and act_int8 = 1 on AVX-512: each token's x quantised once, the
 * thread's rows in chunks of tok_chunk_kb KiB (read from memory once, then
 * from L2), each row applied to up to four tokens at a time, and each
 * token's sum the bits lt__matvec_q8i8_avx512 gives it alone. False, nothing
 * written, if the quantised x cannot be allocated. */
bool lt__matvec_q8i8_tokens_avx512(const lt_call *call, const lt_step *step, int ith, int nth);
/* The same on AVX2, two tokens at a time. */
bool lt__matvec_q8i8_tokens_avx2(const lt_call *call, const lt_step *step, int ith, int nth);
/* The two AVX2 ones with AVX-VNNI's vpdpbusd (matvec_q8i8_avxvnni.c), the
 * same bits; the AVX2 entry points call them where the CPU has AVX-VNNI. */
bool lt__matvec_q8i8_avxvnni(const lt_call *call, const lt_step *step, int ith, int nth,
                             const float *x);
bool lt__matvec_q8i8_tokens_avxvnni(const lt_call *call, const lt_step *step, int ith, int nth);
/* Tests set it to run the AVX-512BW lanes on a CPU with VNNI, and AVX2's
 * maddubs lanes on a CPU with AVX-VNNI. */
extern bool lt__q8i8_avoid_vnni;
/* q4_0 .. q6_k W (matvec_q.c, every ISA's driver for them, with isa's
 * dots: lt__qdot_of): matvec rows of thread ith, and matmul output columns
 * of thread ith (tasks of 16 W rows);
 * false, nothing written, if the quantised x cannot be allocated. */
bool lt__matvec_quant(const lt_call *call, const lt_step *step, int ith, int nth,
                      const float *x, lt_isa isa);
bool lt__matmul_quant(const lt_call *call, const lt_step *step, int ith, int nth, lt_isa isa);
/* ... and a matvec of several tokens (x and y rows, matvec_tokens' shapes):
 * rows of thread ith for every token, each token's bits those of
 * lt__matvec_quant alone; same false. */
bool lt__matvec_quant_tokens(const lt_call *call, const lt_step *step, int ith, int nth,
                             lt_isa isa);
/* The portable act_int8 = 1 path (matvec.c), same contract. */
bool lt__matvec_q8i8_ref(const lt_call *call, const lt_step *step, int ith, int nth,
                         const float *x);
void lt__matmul_avx2(const lt_call *call, const lt_step *step, int ith, int nth);
void lt__matmul_avx512(const lt_call *call, const lt_step *step, int ith, int nth);

#endif
