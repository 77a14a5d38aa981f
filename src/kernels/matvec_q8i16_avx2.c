/* matvec, AVX2 path for q8_0 W with int16 activations (act_int16 = 1): x
 * quantised once per node and thread (linear.h), then per 16 weights one
 * sign extension to int16 (vpmovsxbw), one pairwise integer dot (vpmaddwd,
 * the exact int32 sums of linear.h), one conversion and one FMA with the
 * broadcast d_b * s_b.
 *
 * The arithmetic order is the one linear.h fixes: block b into acc[b % 2],
 * elements 0..15 in lanes 0..7 (one ymm), 16..31 in lanes 8..15 (another),
 * then the fixed halving reduction; the same as the portable and AVX-512
 * paths bit for bit, for every unroll, k_block and thread count. W comes in
 * q8_0's own 34-byte blocks or split (core.h): the same arithmetic. */
#include "kernels/linear.h"

#include <immintrin.h>
#include <stdalign.h>

#define LT_INLINE static inline __attribute__((always_inline))

/* Block b (A = b % 2) of U rows into a. */
LT_INLINE void q8i16_block(bool SPLIT, int U, bool PF, int A, __m256 a[8][2][2], const char *w,
                           size_t ld, int64_t nbrow, const int16_t *xq, const float *xs,
                           int64_t b, size_t pf) {
    const __m256i x0 = _mm256_load_si256((const __m256i *)(xq + b * LT__XQ_BLOCK));
    const __m256i x1 = _mm256_load_si256((const __m256i *)(xq + b * LT__XQ_BLOCK + 16));
    const __m256 sv = _mm256_broadcast_ss(xs + b);
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        const char *row = w + (size_t)u * ld;
        const lt_block_q8_0 *blk = (const lt_block_q8_0 *)row + b;
        const int8_t *q = SPLIT ? lt_q8s_qs(row, nbrow, b) : blk->qs;
        const uint16_t d16 = SPLIT ? *lt_q8s_scales(row, nbrow, b) : blk->d;
        if (PF) _mm_prefetch((const char *)q + pf, _MM_HINT_T0);
        const __m256 ds = _mm256_mul_ps(_mm256_cvtph_ps(_mm_set1_epi16((short)d16)), sv);
        const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)q));
        const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q + 16)));
        const __m256 p0 = _mm256_cvtepi32_ps(_mm256_madd_epi16(w0, x0));
        const __m256 p1 = _mm256_cvtepi32_ps(_mm256_madd_epi16(w1, x1));
        a[u][A][0] = _mm256_fmadd_ps(p0, ds, a[u][A][0]);
        a[u][A][1] = _mm256_fmadd_ps(p1, ds, a[u][A][1]);
    }
}

/* Rows w, w+ld, ... (U of them) over blocks [b0, b1) (b0 even). part holds
 * the rows' accumulators between k blocks ([U][32] floats): read unless
 * first, written unless last. When last, y[u] = (or +=) the row's sum. */
LT_INLINE void q8i16_rows(bool SPLIT, int U, bool PF, const char *w, size_t ld, int64_t nbrow,
                          const int16_t *xq, const float *xs, int64_t b0, int64_t b1, size_t pf,
                          float *part, bool first, bool last, float *y, bool accumulate) {
    __m256 a[8][2][2];
    lt__q8acc_load_avx2(U, a, part, first);
    int64_t b = b0;
    for (; b + 2 <= b1; b += 2) {
        q8i16_block(SPLIT, U, PF, 0, a, w, ld, nbrow, xq, xs, b, pf);
        q8i16_block(SPLIT, U, PF, 1, a, w, ld, nbrow, xq, xs, b + 1, pf);
    }
    if (b < b1) q8i16_block(SPLIT, U, PF, 0, a, w, ld, nbrow, xq, xs, b, pf);
    lt__q8acc_finish_avx2(U, a, part, last, y, accumulate);
}

#define Q8I16_FN(S, U, PF)                                                                   \
    static void q8i16_##S##_##U##_##PF(const char *w, size_t ld, const lt__mv_x *x,         \
                                       int64_t k0, int64_t k1, size_t pf, float *part,       \
                                       bool first, bool last, float *y, bool accumulate,     \
                                       int64_t groups) {                                     \
        for (int64_t g = 0; g < groups; g++)                                                 \
            q8i16_rows(S, U, PF, w + (size_t)(g * U) * ld, ld, x->row_blocks, x->xq, x->xs,  \
                       k0 / LT_QK8_0, k1 / LT_QK8_0, pf, part + 32 * U * g, first, last,     \
                       y + U * g, accumulate);                                               \
    }
#define Q8I16_FNS(S) Q8I16_FN(S, 1, 0) Q8I16_FN(S, 1, 1) Q8I16_FN(S, 2, 0) Q8I16_FN(S, 2, 1) \
    Q8I16_FN(S, 4, 0) Q8I16_FN(S, 4, 1) Q8I16_FN(S, 8, 0) Q8I16_FN(S, 8, 1)
Q8I16_FNS(0)
Q8I16_FNS(1)

/* [split][log2 rows at once][prefetch] */
#define Q8I16_ROW(S)                                                                         \
    {{q8i16_##S##_1_0, q8i16_##S##_1_1}, {q8i16_##S##_2_0, q8i16_##S##_2_1},                \
     {q8i16_##S##_4_0, q8i16_##S##_4_1}, {q8i16_##S##_8_0, q8i16_##S##_8_1}}
static const lt__mv_rows_fn q8i16_table[2][4][2] = {Q8I16_ROW(0), Q8I16_ROW(1)};

bool lt__matvec_q8i16_avx2(const lt_call *call, const lt_step *step, int ith, int nth,
                           const float *xin) {
    const int16_t *xq;
    const float *xs;
    /* once per node and thread: the portable quantisation's bits */
    if (!lt__xq_get(call, step, xin, lt__xq_quant_portable, &xq, &xs)) return false;
    const int64_t cols = call->op[1]->ne[0], kb = call->params.v[LT__MV_K_BLOCK];
    LT_ASSERT(kb <= 0 || kb >= cols || kb % (2 * LT_QK8_0) == 0);
    const lt__mv_x x = {.x = xin, .xq = xq, .xs = xs, .row_blocks = cols / LT_QK8_0};
    lt__matvec_drive(call, ith, nth, q8i16_table[call->op[1]->layout == LT_LAYOUT_Q8_SPLIT], &x);
    return true;
}
