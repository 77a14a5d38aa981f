/* matvec, AVX2 path for q8_0 W with int8 activations (act_int8 = 1): x
 * quantised once per node and thread to int8 per 32-block (linear.h), then
 * per block of 32 weights one vpmaddubsw and one vpmaddwd give the exact
 * int32 partial dots, one conversion and one FMA scale them by d_b * s_b.
 * Against the f32 path (per 8 weights a sign extension, conversion,
 * multiply and FMA) that is about a third of the vector instructions per
 * weight, so the loads, not the arithmetic, set the pace.
 *
 * vpmaddubsw multiplies unsigned by signed bytes and saturates its 16-bit
 * pair sums, so the weights' signs move onto x: |w| (-128 becomes 128 as
 * unsigned) times sign(w) x, pairs within +-2 * 128 * 127, never
 * saturating. Each int32 lane is then the exact sum of four products.
 *
 * The arithmetic order is the one linear.h fixes: a ymm holds the 8 lanes
 * of one block, block b goes to accumulator [(b / 2) % 2][b % 2] (pair
 * p = b / 2 into acc[p % 2], its blocks in lanes 0..7 and 8..15), then the
 * fixed halving reduction. So y is the same, bit for bit, as the portable
 * and AVX-512 paths' for every unroll, k_block and thread count.
 *
 * Only q8_0's own 34-byte blocks: split rows are made where AVX-512 runs.
 * With 4 accumulators a row, 4 or 8 rows at once spill registers (16 ymm):
 * correct, slower, and the tuner's to find out. */
#include "kernels/linear.h"

#include <immintrin.h>
#include <stdalign.h>

#define LT_INLINE static inline __attribute__((always_inline))

/* A second prefetch into L2, as on AVX-512 (matvec_q8i8_avx512.c): only on
 * rows long enough for it to pay. */
#define LT__Q8_FAR 4
#define LT__Q8_FAR_MIN_COLS 512

/* The int32 partial dots (linear.h's P, lane j = elements 4j..4j+3) of one
 * block's 32 quants at q against its int8 x. */
LT_INLINE __m256i q8i8_dot(const int8_t *q, __m256i xv) {
    const __m256i w = _mm256_loadu_si256((const __m256i *)q);
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

/* The halving reduction of linear.h over lanes 0..7 (lo) and 8..15 (hi). */
LT_INLINE float reduce_halves(__m256 lo, __m256 hi) {
    __m256 v8 = _mm256_add_ps(lo, hi);
    __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
    __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
    return _mm_cvtss_f32(_mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1)));
}

/* Block b (A = its accumulator pair, H = its half) of U rows into a. */
LT_INLINE void q8i8_block(int U, int PF, int A, int H, __m256 a[8][2][2], const char *w,
                          size_t ld, const int8_t *xq, const float *xs, int64_t b, size_t pf) {
    const __m256i xv = _mm256_load_si256((const __m256i *)(xq + b * LT__XQ_BLOCK));
    const __m256 sv = _mm256_broadcast_ss(xs + b);
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        const lt_block_q8_0 *blk = (const lt_block_q8_0 *)(w + (size_t)u * ld) + b;
        if (PF) _mm_prefetch((const char *)blk + pf, _MM_HINT_T0);
        if (PF == 2) _mm_prefetch((const char *)blk + LT__Q8_FAR * pf, _MM_HINT_T1);
        const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)blk->d));
        const __m256 dot = _mm256_cvtepi32_ps(q8i8_dot(blk->qs, xv));
        a[u][A][H] = _mm256_fmadd_ps(dot, _mm256_mul_ps(d, sv), a[u][A][H]);
    }
}

/* Rows w, w+ld, ... (U of them) over blocks [b0, b1) (b0 a multiple of 4).
 * part holds the rows' accumulators between k blocks ([U][32] floats:
 * acc[0] lanes 0..15, acc[1] lanes 0..15): read unless first, written
 * unless last. When last, y[u] = (or +=) the row's sum. */
LT_INLINE void q8i8_rows(int U, int PF, const char *w, size_t ld, const int8_t *xq,
                         const float *xs, int64_t b0, int64_t b1, size_t pf, float *part,
                         bool first, bool last, float *y, bool accumulate) {
    __m256 a[8][2][2];
#pragma GCC unroll 8
    for (int u = 0; u < U; u++)
        for (int A = 0; A < 2; A++)
            for (int H = 0; H < 2; H++)
                a[u][A][H] = first ? _mm256_setzero_ps()
                                   : _mm256_load_ps(part + 32 * u + 16 * A + 8 * H);
    int64_t b = b0;
    for (; b + 4 <= b1; b += 4) {
        q8i8_block(U, PF, 0, 0, a, w, ld, xq, xs, b, pf);
        q8i8_block(U, PF, 0, 1, a, w, ld, xq, xs, b + 1, pf);
        q8i8_block(U, PF, 1, 0, a, w, ld, xq, xs, b + 2, pf);
        q8i8_block(U, PF, 1, 1, a, w, ld, xq, xs, b + 3, pf);
    }
    /* up to three blocks left, b a multiple of 4 */
    if (b < b1) q8i8_block(U, PF, 0, 0, a, w, ld, xq, xs, b, pf);
    if (b + 1 < b1) q8i8_block(U, PF, 0, 1, a, w, ld, xq, xs, b + 1, pf);
    if (b + 2 < b1) q8i8_block(U, PF, 1, 0, a, w, ld, xq, xs, b + 2, pf);
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        if (last) {
            float s = reduce_halves(_mm256_add_ps(a[u][0][0], a[u][1][0]),
                                    _mm256_add_ps(a[u][0][1], a[u][1][1]));
            y[u] = accumulate ? y[u] + s : s;
        } else {
            for (int A = 0; A < 2; A++)
                for (int H = 0; H < 2; H++)
                    _mm256_store_ps(part + 32 * u + 16 * A + 8 * H, a[u][A][H]);
        }
    }
}

/* One specialisation per (rows at once, prefetch: 0 none, 1 near, 2 near
 * and far); k in elements, whole 32-element blocks. */
#define Q8I8_FN(U, PF)                                                                       \
    static void q8i8_##U##_##PF(const char *w, size_t ld, const lt__mv_x *x, int64_t k0,     \
                                int64_t k1, size_t pf, float *part, bool first, bool last,   \
                                float *y, bool accumulate, int64_t groups) {                 \
        for (int64_t g = 0; g < groups; g++)                                                 \
            q8i8_rows(U, PF, w + (size_t)(g * U) * ld, ld, x->xq8, x->xs, k0 / LT_QK8_0,     \
                      k1 / LT_QK8_0, pf, part + 32 * U * g, first, last, y + U * g,          \
                      accumulate);                                                           \
    }
Q8I8_FN(1, 0) Q8I8_FN(1, 1) Q8I8_FN(1, 2) Q8I8_FN(2, 0) Q8I8_FN(2, 1) Q8I8_FN(2, 2)
Q8I8_FN(4, 0) Q8I8_FN(4, 1) Q8I8_FN(4, 2) Q8I8_FN(8, 0) Q8I8_FN(8, 1) Q8I8_FN(8, 2)

/* [far prefetch][log2 rows at once][prefetch on] */
#define Q8I8_ROW(P)                                                                          \
    {{q8i8_1_0, q8i8_1_##P}, {q8i8_2_0, q8i8_2_##P}, {q8i8_4_0, q8i8_4_##P},                \
     {q8i8_8_0, q8i8_8_##P}}
static const lt__mv_rows_fn q8i8_table[2][4][2] = {Q8I8_ROW(1), Q8I8_ROW(2)};

bool lt__matvec_q8i8_avx2(const lt_call *call, const lt_step *step, int ith, int nth,
                          const float *xin) {
    const int8_t *xq;
    const float *xs;
    const int32_t *xb;
    /* the quantisation is once per node and thread: the portable one gives
     * the bits every path shares at a negligible share of the node */
    if (!lt__xq8_get(call, step, xin, lt__xq8_quant_portable, &xq, &xs, &xb)) return false;
    const int64_t cols = call->op[1]->ne[0], kb = call->params.v[LT__MV_K_BLOCK];
    LT_ASSERT(kb <= 0 || kb >= cols || kb % (4 * LT_QK8_0) == 0);
    const lt__mv_x x = {.x = xin, .xs = xs, .xq8 = xq, .row_blocks = cols / LT_QK8_0};
    lt__matvec_drive(call, ith, nth, q8i8_table[cols >= LT__Q8_FAR_MIN_COLS], &x);
    return true;
}
