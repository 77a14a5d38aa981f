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
 * W comes in q8_0's own 34-byte blocks or split (core.h, resident
 * weights): the same arithmetic, other loads. Plain blocks cost a scale
 * conversion per block and a quants load that straddles a cache line every
 * other block; split rows give 8 blocks' scales in one load and conversion
 * (then a lane permute per block) and aligned quants.
 *
 * With 4 accumulators a row, 4 or 8 rows at once spill registers (16 ymm):
 * correct, slower, and the tuner's to find out.
 *
 * matvec_q8i8_avxvnni.c compiles this file again with LT_Q8I8_AVXVNNI set:
 * AVX-VNNI's vpdpbusd gives the same exact lanes in one instruction instead
 * of two (the row loop is bound by its instructions, not by the loads, at
 * about 3 cycles a block), and this file's entry points hand over to it on
 * CPUs that have it. */
#include "kernels/linear.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdalign.h>

#define LT_INLINE static inline __attribute__((always_inline))

#ifndef LT_Q8I8_AVXVNNI
#define LT_Q8I8_AVXVNNI 0
#endif

/* A second prefetch into L2, as on AVX-512 (matvec_q8i8_avx512.c): only on
 * rows long enough for it to pay. */
#define LT__Q8_FAR 4
#define LT__Q8_FAR_MIN_COLS 512

/* x quantised per 32-element block as linear.h defines it, the same bits as
 * lt__xq8_quant_portable (IEEE max, division and multiplication, rounding
 * to nearest even, a saturation that never triggers). The scalar loop costs
 * about 3.5 ns an element: each thread quantises x once per node, which on
 * a 2048-wide 1B projection at 2 threads is several percent of the node. */
static void xq8_quant_avx2(const float *x, int64_t n, int8_t *q, float *s, int32_t *bias) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 big = _mm256_set1_ps(FLT_MAX);
    /* dwords of _mm256_packs_epi16(packs(i0, i1), packs(i2, i3)) back in
     * element order */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / LT__XQ_BLOCK; b++) {
        const float *xb = x + b * LT__XQ_BLOCK;
        __m256 v[4], a[4];
        int bad = 0;
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(xb + 8 * i);
            a[i] = _mm256_and_ps(v[i], absmask);
            /* not <= FLT_MAX: NaN or infinity */
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(a[i], big, _CMP_NLE_UQ));
        }
        const __m256 m8 = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
        const float inv = (float)LT__XQ8_MAX / amax;
        __m256i qv = _mm256_setzero_si256();
        if (bad || !(inv <= FLT_MAX)) {
            s[b] = bad ? NAN : 0.0f;
        } else {
            s[b] = amax / (float)LT__XQ8_MAX;
            const __m256 iv = _mm256_set1_ps(inv);
            __m256i r[4];
            for (int i = 0; i < 4; i++) r[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], iv));
            const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]),
                                                 _mm256_packs_epi32(r[2], r[3]));
            qv = _mm256_permutevar8x32_epi32(w, order);
        }
        _mm256_storeu_si256((__m256i *)(q + b * LT__XQ_BLOCK), qv);
        /* -128 * (sum of each lane's four q): pair sums (1 * q), then lane
         * sums, times -128 */
        const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), qv);
        const __m256i lane = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
        _mm256_storeu_si256((__m256i *)(bias + b * LT__XQ8_LANES),
                            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(lane, 7)));
    }
}

/* Lane j of the result: the exact sum of the four products of bytes
 * 4j..4j+3 of wa (unsigned) and xs (signed). */
LT_INLINE __m256i q8i8_lanes(__m256i wa, __m256i xs) {
#if LT_Q8I8_AVXVNNI
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), wa, xs);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wa, xs), _mm256_set1_epi16(1));
#endif
}

/* The int32 partial dots (linear.h's P, lane j = elements 4j..4j+3) of one
 * block's 32 quants at q against its int8 x. */
LT_INLINE __m256i q8i8_dot(const int8_t *q, __m256i xv) {
    const __m256i w = _mm256_loadu_si256((const __m256i *)q);
    return q8i8_lanes(_mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
}

LT_INLINE void prefetch(int PF, const char *p, size_t pf) {
    if (PF) _mm_prefetch(p + pf, _MM_HINT_T0);
    if (PF == 2) _mm_prefetch(p + LT__Q8_FAR * pf, _MM_HINT_T1);
}

/* Block b (A = its accumulator pair, H = its half) of U rows into a, its
 * scale converted on its own: plain rows, and a split row's last blocks. */
LT_INLINE void q8i8_block(bool SPLIT, int U, int PF, int A, int H, __m256 a[8][2][2],
                          const char *w, size_t ld, int64_t nbrow, const int8_t *xq,
                          const float *xs, int64_t b, size_t pf) {
    const __m256i xv = _mm256_load_si256((const __m256i *)(xq + b * LT__XQ_BLOCK));
    const __m256 sv = _mm256_broadcast_ss(xs + b);
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        const char *row = w + (size_t)u * ld;
        const lt_block_q8_0 *blk = (const lt_block_q8_0 *)row + b;
        const int8_t *q = SPLIT ? lt_q8s_qs(row, nbrow, b) : blk->qs;
        const uint16_t d16 = SPLIT ? *lt_q8s_scales(row, nbrow, b) : blk->d;
        prefetch(PF, (const char *)q, pf);
        const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)d16));
        const __m256 dot = _mm256_cvtepi32_ps(q8i8_dot(q, xv));
        a[u][A][H] = _mm256_fmadd_ps(dot, _mm256_mul_ps(d, sv), a[u][A][H]);
    }
}

/* Blocks b..b+7 of U split rows (b a multiple of 8, all in one group),
 * their quants and scales at byte offsets qoff and soff of every row: the
 * scales times x's in one load, conversion and multiply per row. */
LT_INLINE void q8i8_split8(int U, int PF, __m256 a[8][2][2], const char *w, size_t ld,
                           const int8_t *xq, const float *xs, int64_t b, size_t qoff,
                           size_t soff, size_t pf) {
    const __m256 sv = _mm256_loadu_ps(xs + b);
    __m256 ds[8];
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        const __m128i d16 = _mm_loadu_si128((const __m128i *)(w + (size_t)u * ld + soff));
        ds[u] = _mm256_mul_ps(_mm256_cvtph_ps(d16), sv);
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        const __m256i xv = _mm256_load_si256((const __m256i *)(xq + (b + j) * LT__XQ_BLOCK));
        const __m256i lane = _mm256_set1_epi32(j);
#pragma GCC unroll 8
        for (int u = 0; u < U; u++) {
            const int8_t *q = (const int8_t *)(w + (size_t)u * ld + qoff) + j * LT_QK8_0;
            if (!(j & 1)) prefetch(PF, (const char *)q, pf); /* once per line */
            const __m256 dot = _mm256_cvtepi32_ps(q8i8_dot(q, xv));
            const __m256 sc = _mm256_permutevar8x32_ps(ds[u], lane);
            a[u][j >> 1 & 1][j & 1] = _mm256_fmadd_ps(dot, sc, a[u][j >> 1 & 1][j & 1]);
        }
    }
}

/* linear.h's halving reduction of rows u and u + 1 side by side, one row
 * per 128-bit lane, the same adds in the same order: [v4 of u | v4 of u+1]
 * with v4 = lo + hi of v8 = (acc0 lo + acc1 lo) + (acc0 hi + acc1 hi). */
LT_INLINE __m256 q8i8_v4_pair(__m256 a[8][2][2], int u) {
    const __m256 p = _mm256_add_ps(_mm256_add_ps(a[u][0][0], a[u][1][0]),
                                   _mm256_add_ps(a[u][0][1], a[u][1][1]));
    const __m256 q = _mm256_add_ps(_mm256_add_ps(a[u + 1][0][0], a[u + 1][1][0]),
                                   _mm256_add_ps(a[u + 1][0][1], a[u + 1][1][1]));
    return _mm256_add_ps(_mm256_permute2f128_ps(p, q, 0x20), _mm256_permute2f128_ps(p, q, 0x31));
}

LT_INLINE void q8i8_store(float *y, int u, float s, bool accumulate) {
    y[u] = accumulate ? y[u] + s : s;
}

/* The accumulators of U rows reduced into y (= or +=) when last, else
 * parked in part: lt__q8acc_finish_avx2's bits, with the tail of two rows'
 * reductions (most of a row's cost when rows are a few blocks long) in one
 * register. */
LT_INLINE void q8i8_finish(int U, __m256 a[8][2][2], float *part, bool last, float *y,
                           bool accumulate) {
    if (!last || U != 2) {
        lt__q8acc_finish_avx2(U, a, part, last, y, accumulate);
        return;
    }
    const __m256 v4 = q8i8_v4_pair(a, 0);
    /* v2 = v4 + v4's high pair, s = v2[0] + v2[1] */
    const __m256 v2 = _mm256_add_ps(v4, _mm256_shuffle_ps(v4, v4, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 s = _mm256_add_ps(v2, _mm256_shuffle_ps(v2, v2, _MM_SHUFFLE(1, 1, 1, 1)));
    q8i8_store(y, 0, _mm256_cvtss_f32(s), accumulate);
    q8i8_store(y, 1, _mm_cvtss_f32(_mm256_extractf128_ps(s, 1)), accumulate);
}

/* Rows w, w+ld, ... (U of them) over blocks [b0, b1) (b0 a multiple of 4).
 * part holds the rows' accumulators between k blocks ([U][32] floats:
 * acc[0] lanes 0..15, acc[1] lanes 0..15): read unless first, written
 * unless last. When last, y[u] = (or +=) the row's sum. */
LT_INLINE void q8i8_rows(bool SPLIT, int U, int PF, const char *w, size_t ld, int64_t nbrow,
                         const int8_t *xq, const float *xs, int64_t b0, int64_t b1, size_t pf,
                         float *part, bool first, bool last, float *y, bool accumulate) {
    __m256 a[8][2][2];
    lt__q8acc_load_avx2(U, a, part, first);
    int64_t b = b0;
    /* split groups hold multiples of 8 blocks but the row's last: whole
     * eights never cross one */
    if (SPLIT && U == 2) {
        /* group by group (core.h's layout): the eights' offsets step on from
         * the group's, no division per eight. Two rows only: with 4 or 8 the
         * registers it takes are the accumulators' (they spill more), and one
         * row at a time ran slower in the decoder (stories110M q8_0) */
        while (b + 8 <= b1) {
            const int64_t g0 = b & ~(int64_t)(LT_Q8_SPLIT_GROUP - 1);
            const int64_t n = nbrow - g0 < LT_Q8_SPLIT_GROUP ? nbrow - g0 : LT_Q8_SPLIT_GROUP;
            const int64_t ge = g0 + n < b1 ? g0 + n : b1;
            const size_t gq = (size_t)g0 * sizeof(lt_block_q8_0), gs = gq + (size_t)n * LT_QK8_0;
            for (; b + 8 <= ge; b += 8)
                q8i8_split8(U, PF, a, w, ld, xq, xs, b, gq + (size_t)(b - g0) * LT_QK8_0,
                            gs + (size_t)(b - g0) * sizeof(uint16_t), pf);
            if (b < g0 + n) break; /* the row's last group ends on a part eight */
        }
    } else if (SPLIT) {
        for (; b + 8 <= b1; b += 8)
            q8i8_split8(U, PF, a, w, ld, xq, xs, b,
                        (size_t)((const char *)lt_q8s_qs(w, nbrow, b) - w),
                        (size_t)((const char *)lt_q8s_scales(w, nbrow, b) - w), pf);
    }
    for (; b + 4 <= b1; b += 4) {
        q8i8_block(SPLIT, U, PF, 0, 0, a, w, ld, nbrow, xq, xs, b, pf);
        q8i8_block(SPLIT, U, PF, 0, 1, a, w, ld, nbrow, xq, xs, b + 1, pf);
        q8i8_block(SPLIT, U, PF, 1, 0, a, w, ld, nbrow, xq, xs, b + 2, pf);
        q8i8_block(SPLIT, U, PF, 1, 1, a, w, ld, nbrow, xq, xs, b + 3, pf);
    }
    /* up to three blocks left, b a multiple of 4 */
    if (b < b1) q8i8_block(SPLIT, U, PF, 0, 0, a, w, ld, nbrow, xq, xs, b, pf);
    if (b + 1 < b1) q8i8_block(SPLIT, U, PF, 0, 1, a, w, ld, nbrow, xq, xs, b + 1, pf);
    if (b + 2 < b1) q8i8_block(SPLIT, U, PF, 1, 0, a, w, ld, nbrow, xq, xs, b + 2, pf);
    q8i8_finish(U, a, part, last, y, accumulate);
}

/* One specialisation per (split layout or plain, rows at once, prefetch: 0
 * none, 1 near, 2 near and far); k in elements, whole 32-element blocks. */
#define Q8I8_FN(S, U, PF)                                                                    \
    static void q8i8_##S##_##U##_##PF(const char *w, size_t ld, const lt__mv_x *x,          \
                                      int64_t k0, int64_t k1, size_t pf, float *part,        \
                                      bool first, bool last, float *y, bool accumulate,      \
                                      int64_t groups) {                                      \
        for (int64_t g = 0; g < groups; g++)                                                 \
            q8i8_rows(S, U, PF, w + (size_t)(g * U) * ld, ld, x->row_blocks, x->xq8, x->xs,  \
                      k0 / LT_QK8_0, k1 / LT_QK8_0, pf, part + 32 * U * g, first, last,      \
                      y + U * g, accumulate);                                                \
    }
#define Q8I8_FNS(S) Q8I8_FN(S, 1, 0) Q8I8_FN(S, 1, 1) Q8I8_FN(S, 1, 2) Q8I8_FN(S, 2, 0)     \
    Q8I8_FN(S, 2, 1) Q8I8_FN(S, 2, 2) Q8I8_FN(S, 4, 0) Q8I8_FN(S, 4, 1) Q8I8_FN(S, 4, 2)     \
    Q8I8_FN(S, 8, 0) Q8I8_FN(S, 8, 1) Q8I8_FN(S, 8, 2)
Q8I8_FNS(0)
Q8I8_FNS(1)

/* [split][far prefetch][log2 rows at once][prefetch on] */
#define Q8I8_ROW(S, P)                                                                       \
    {{q8i8_##S##_1_0, q8i8_##S##_1_##P}, {q8i8_##S##_2_0, q8i8_##S##_2_##P},                \
     {q8i8_##S##_4_0, q8i8_##S##_4_##P}, {q8i8_##S##_8_0, q8i8_##S##_8_##P}}
static const lt__mv_rows_fn q8i8_table[2][2][4][2] = {{Q8I8_ROW(0, 1), Q8I8_ROW(0, 2)},
                                                      {Q8I8_ROW(1, 1), Q8I8_ROW(1, 2)}};

#if LT_Q8I8_AVXVNNI
bool lt__matvec_q8i8_avxvnni(const lt_call *call, const lt_step *step, int ith, int nth,
                             const float *xin) {
#else
bool lt__matvec_q8i8_avx2(const lt_call *call, const lt_step *step, int ith, int nth,
                          const float *xin) {
    if (lt_cpu()->avxvnni && !lt__q8i8_avoid_vnni)
        return lt__matvec_q8i8_avxvnni(call, step, ith, nth, xin);
#endif
    const int8_t *xq;
    const float *xs;
    const int32_t *xb;
    /* the quantisation is once per node and thread */
    if (!lt__xq8_get(call, step, xin, xq8_quant_avx2, &xq, &xs, &xb)) return false;
    const int64_t cols = call->op[1]->ne[0], kb = call->params.v[LT__MV_K_BLOCK];
    LT_ASSERT(kb <= 0 || kb >= cols || kb % (4 * LT_QK8_0) == 0);
    const lt__mv_x x = {.x = xin, .xs = xs, .xq8 = xq, .row_blocks = cols / LT_QK8_0};
    const bool split = call->op[1]->layout == LT_LAYOUT_Q8_SPLIT;
    lt__matvec_drive(call, ith, nth, q8i8_table[split][cols >= LT__Q8_FAR_MIN_COLS], &x);
    return true;
}

/* ---- several tokens at once (a batched decode step) ------------------------- */

/* One token's quantised x: the layout lt__xq8_get gives one token. */
typedef struct {
    const int8_t *xq;
    const float *xs;
} q8i8_tok;

/* One row (nbrow blocks) against T tokens, whole: each block's quants and
 * scale are loaded once for all T, each token's lanes, scale product and
 * FMA into accumulator [(b / 2) % 2][b % 2] are q8i8_block's for one row,
 * and y[t][0] = (or +=) each token's sum, the bits it gets alone. */
LT_INLINE void q8i8_tok_row(bool SPLIT, int T, int PF, const char *row, const q8i8_tok *tk,
                            int64_t nbrow, size_t pf, float *const *y, bool accumulate) {
    __m256 a[2][8][2][2];
#pragma GCC unroll 2
    for (int t = 0; t < T; t++) lt__q8acc_load_avx2(1, a[t], NULL, true);
    for (int64_t b = 0; b < nbrow; b++) {
        const lt_block_q8_0 *blk = (const lt_block_q8_0 *)row + b;
        const int8_t *q = SPLIT ? lt_q8s_qs(row, nbrow, b) : blk->qs;
        const uint16_t d16 = SPLIT ? *lt_q8s_scales(row, nbrow, b) : blk->d;
        if (!SPLIT || !(b & 1)) prefetch(PF, (const char *)q, pf);
        const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)d16));
        const __m256i w = _mm256_loadu_si256((const __m256i *)q);
        const __m256i wa = _mm256_abs_epi8(w);
        const int A = (int)(b >> 1 & 1), H = (int)(b & 1);
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) {
            const __m256i xv = _mm256_load_si256((const __m256i *)(tk[t].xq + b * LT__XQ_BLOCK));
            const __m256 dot = _mm256_cvtepi32_ps(q8i8_lanes(wa, _mm256_sign_epi8(xv, w)));
            const __m256 sc = _mm256_mul_ps(d, _mm256_broadcast_ss(tk[t].xs + b));
            a[t][0][A][H] = _mm256_fmadd_ps(dot, sc, a[t][0][A][H]);
        }
    }
#pragma GCC unroll 2
    for (int t = 0; t < T; t++) lt__q8acc_finish_avx2(1, a[t], NULL, true, y[t], accumulate);
}

typedef void (*q8i8_tok_fn)(const char *row, const q8i8_tok *tk, int64_t nbrow, size_t pf,
                            float *const *y, bool accumulate);
#define Q8I8_TOK_FN(S, T, PF)                                                                \
    static void q8i8_tok_##S##_##T##_##PF(const char *row, const q8i8_tok *tk, int64_t nbrow, \
                                          size_t pf, float *const *y, bool accumulate) {      \
        q8i8_tok_row(S, T, PF, row, tk, nbrow, pf, y, accumulate);                           \
    }
#define Q8I8_TOK_T(S, T) Q8I8_TOK_FN(S, T, 0) Q8I8_TOK_FN(S, T, 1) Q8I8_TOK_FN(S, T, 2)
Q8I8_TOK_T(0, 1)
Q8I8_TOK_T(0, 2)
Q8I8_TOK_T(1, 1)
Q8I8_TOK_T(1, 2)
#define Q8I8_TOK_ROW(S, T) {q8i8_tok_##S##_##T##_0, q8i8_tok_##S##_##T##_1, q8i8_tok_##S##_##T##_2}
/* [split][tokens - 1][prefetch: none, near, near and far] */
static const q8i8_tok_fn q8i8_tok_table[2][2][3] = {{Q8I8_TOK_ROW(0, 1), Q8I8_TOK_ROW(0, 2)},
                                                    {Q8I8_TOK_ROW(1, 1), Q8I8_TOK_ROW(1, 2)}};

#if LT_Q8I8_AVXVNNI
bool lt__matvec_q8i8_tokens_avxvnni(const lt_call *call, const lt_step *step, int ith, int nth) {
#else
bool lt__matvec_q8i8_tokens_avx2(const lt_call *call, const lt_step *step, int ith, int nth) {
    if (lt_cpu()->avxvnni && !lt__q8i8_avoid_vnni)
        return lt__matvec_q8i8_tokens_avxvnni(call, step, ith, nth);
#endif
    const lt_tensor *Y = call->op[0], *W = call->op[1], *X = call->op[2];
    const int64_t n = X->ne[1], cols = W->ne[0], nblk = cols / LT_QK8_0;
    size_t per_tok, qbytes;
    const char *xq =
        lt__xq8_tokens_get(call, step, lt__xq8_quant_portable, &per_tok, &qbytes, NULL);
    if (!xq) return false;
    const size_t pf = (size_t)call->params.v[LT__MV_PREFETCH];
    const int pfm = pf == 0 ? 0 : cols >= LT__Q8_FAR_MIN_COLS ? 2 : 1;
    const bool split = W->layout == LT_LAYOUT_Q8_SPLIT, acc = call->ia[0] != 0;
    int64_t r0, r1;
    lt__linear_split(W->ne[1], lt__mv_task_rows(call), ith, nth, &r0, &r1);
    /* rows in chunks of tok_chunk_kb KiB (whole tasks, at least one): the
     * first group of tokens reads a chunk from memory, the others from L2,
     * and each group's x stays in L1 over the chunk's rows */
    const size_t chunk_bytes = (size_t)call->params.v[LT__MV_TOK_CHUNK_KB] << 10;
    const int64_t per = lt__mv_task_rows(call);
    int64_t chunk = (int64_t)(chunk_bytes / W->nb[1]) / per * per;
    if (chunk < per) chunk = per;
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
        const int64_t c1 = r1 - c0 < chunk ? r1 : c0 + chunk;
        for (int64_t t0 = 0; t0 < n; t0 += 2) {
            const int T = n - t0 < 2 ? (int)(n - t0) : 2;
            q8i8_tok tk[2];
            float *y[2];
            for (int t = 0; t < T; t++) {
                const char *p = xq + (size_t)(t0 + t) * per_tok;
                tk[t] = (q8i8_tok){(const int8_t *)p, (const float *)(p + qbytes)};
                y[t] = (float *)((char *)Y->data + (size_t)(t0 + t) * Y->nb[1]) + c0;
            }
            const q8i8_tok_fn f = q8i8_tok_table[split][T - 1][t0 == 0 ? pfm : 0];
            for (int64_t r = c0; r < c1; r++) {
                f((const char *)W->data + (size_t)r * W->nb[1], tk, nblk, pf, y, acc);
                for (int t = 0; t < T; t++) y[t]++;
            }
        }
    }
    return true;
}
