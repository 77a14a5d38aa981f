/* matvec, AVX-512 VNNI path for q8_0 W with int8 activations (act_int8 = 1):
 * x quantised once per node and thread to int8 per 32-block (linear.h), then
 * per 64 weights (two blocks) one vpdpbusd computes the exact int32 partial
 * dots of both blocks, one conversion and one FMA scale them by d_b * s_b.
 * Against the int16 path (per 32 weights a sign extension, vpmaddwd,
 * conversion and FMA) that is about a third fewer vector instructions and
 * half the activation bytes read per weight.
 *
 * vpdpbusd multiplies unsigned by signed bytes. The weights are made the
 * unsigned side by an offset: w + 128 = w ^ 0x80 (one xor per 64 weights,
 * exact for every int8 including -128), and sum (w + 128) x = sum w x +
 * 128 sum x. The correction -128 sum x depends on x alone, so it is computed
 * once per x with the quantisation (one int32 per 4-element lane, linear.h)
 * and loaded as the dot's starting value: nothing per row or per block.
 * The alternatives cost more per weight: offsetting x needs 128 sum w for
 * every row and block (a second vpdpbusd), and moving x's sign onto the
 * weights (abs + sign flip) needs two extra instructions that depend on the
 * row. Every lane stays exact: |4 * 255 * 127 + 4 * 128 * 127| < 2^31.
 *
 * AVX-512 CPUs without VNNI run the same lanes through vpmaddubsw +
 * vpmaddwd (AVX-512BW). vpmaddubsw saturates its 16-bit pair sums, which
 * the +128 offset would overflow, so that path moves the weights' signs onto
 * x instead (|w| * (sign(w) x), pairs within +-2 * 128 * 127) and needs no
 * correction; its int32 lanes are the same exact sums.
 *
 * The arithmetic order is the one linear.h fixes (pair p into accumulator
 * p % 2, lane l of a pair from block 2p + l / 8, a fixed halving reduction),
 * the same for every unroll, k_block and thread count, and the same as the
 * portable path bit for bit.
 *
 * W comes in q8_0's own 34-byte blocks or split (core.h, resident weights):
 * the same arithmetic, other loads. A split pair is one 64-byte load of one
 * cache line and 16 scales one masked load, where plain blocks take two
 * loads and an insert per pair, and a gather for the scales. */
#include "kernels/linear.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdalign.h>

#define LT_INLINE static inline __attribute__((always_inline))

bool lt__q8i8_avoid_vnni = false;

/* A second software prefetch, into L2 only, LT__Q8_FAR times the prefetch
 * distance ahead, on rows of at least LT__Q8_FAR_MIN_COLS columns. It keeps
 * more lines in flight than the near prefetch into L1 can, and it is what
 * lets one core stream weights that sit in the last-level cache (measured
 * A/B, alternating processes, looptune bench, three runs: stories110M q8_0
 * at 1 thread 125-131 -> 145-190 tokens/s, at 2 threads 235-251 -> 322-351;
 * 1B q8_0, streamed from memory, within noise at 1 and 2 threads). On short
 * rows (stories15M's 288 columns: nine blocks) the extra instruction cost
 * 5-8% and bought nothing, so they go without it. A prefetch of an address
 * past the weights never faults. */
#define LT__Q8_FAR 4
#define LT__Q8_FAR_MIN_COLS 512

/* x quantised per 32-element block as linear.h defines it; the same bits as
 * lt__xq8_quant_portable (IEEE max, division and multiplication, rounding to
 * nearest even, saturation that never triggers). No VNNI instruction: both
 * paths use it. */
static void xq8_quant_avx512(const float *x, int64_t n, int8_t *q, float *s, int32_t *bias) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512 big = _mm512_set1_ps(FLT_MAX);
    for (int64_t b = 0; b < n / LT__XQ_BLOCK; b++) {
        const float *xb = x + b * LT__XQ_BLOCK;
        __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        __m512 a0 = _mm512_and_ps(v0, absmask), a1 = _mm512_and_ps(v1, absmask);
        /* not <= FLT_MAX: NaN or infinity */
        __mmask16 bad = _mm512_cmp_ps_mask(a0, big, _CMP_NLE_UQ) |
                        _mm512_cmp_ps_mask(a1, big, _CMP_NLE_UQ);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        const float inv = (float)LT__XQ8_MAX / amax;
        __m256i qv = _mm256_setzero_si256();
        if (bad || !(inv <= FLT_MAX)) {
            s[b] = bad ? NAN : 0.0f;
        } else {
            s[b] = amax / (float)LT__XQ8_MAX;
            const __m512 iv = _mm512_set1_ps(inv);
            __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, iv)));
            __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, iv)));
            qv = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
        }
        _mm256_storeu_si256((__m256i *)(q + b * LT__XQ_BLOCK), qv);
        /* -128 * (sum of each lane's four q): pair sums (1 * q), then lane
         * sums, times -128 */
        __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), qv);
        __m256i lane = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
        _mm256_storeu_si256((__m256i *)(bias + b * LT__XQ8_LANES),
                            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(lane, 7)));
    }
}

/* f16 scales of up to 16 consecutive q8_0 blocks starting at p as f32 (zero
 * past block n-1): one masked gather of the dwords at each block start. */
LT_INLINE __m512 q8_scales(const char *p, int64_t n) {
    const __m512i idx = _mm512_setr_epi32(0, 34, 68, 102, 136, 170, 204, 238, 272, 306, 340,
                                          374, 408, 442, 476, 510);
    __mmask16 m = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
    __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, p, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
}

/* The 64 quants of the block pair at p (one block if !two: lanes 8..15 then
 * hold no block's sum and are never used): plain blocks are 34 bytes apart,
 * their quants after the scale; split quants are adjacent. */
LT_INLINE __m512i q8_pair_quants(bool SPLIT, const char *p, bool two) {
    if (SPLIT && two) return _mm512_loadu_si512(p);
    const char *q = SPLIT ? p : (const char *)((const lt_block_q8_0 *)p)->qs;
    __m512i w = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)q));
    const size_t next = SPLIT ? LT_QK8_0 : sizeof(lt_block_q8_0);
    if (two) w = _mm512_inserti64x4(w, _mm256_loadu_si256((const __m256i *)(q + next)), 1);
    return w;
}

/* The int32 partial dots (linear.h's P) of a block pair's quants w against
 * the int8 x pair xv with its lane corrections bv. */
LT_INLINE __m512i q8i8_pair(bool VNNI, __m512i w, __m512i xv, __m512i bv) {
    if (VNNI) {
        w = _mm512_xor_si512(w, _mm512_set1_epi8(-128)); /* w + 128 as unsigned bytes */
        return _mm512_dpbusd_epi32(bv, w, xv);
    }
    /* |w| (-128 becomes 128 as unsigned) times x with w's sign */
    __m512i sx = _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(w), _mm512_setzero_si512(), xv);
    __m512i pairs = _mm512_maddubs_epi16(_mm512_abs_epi8(w), sx);
    return _mm512_madd_epi16(pairs, _mm512_set1_epi16(1));
}

/* The halving reduction of linear.h. */
LT_INLINE float reduce_halves(__m512 h) {
    __m256 v8 = _mm256_add_ps(_mm512_castps512_ps256(h), _mm512_extractf32x8_ps(h, 1));
    __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
    __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
    return _mm_cvtss_f32(_mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1)));
}

/* Pair j / 2 (blocks j, j + 1; only j if !two) of a group of up to 16
 * blocks whose first block's quants are at wb in row 0 (xq at xqb,
 * corrections at xbb, the group's scales ds per row) into accumulator A of
 * each of the U rows. A is a constant, so the accumulators stay in
 * registers. */
LT_INLINE void q8i8_step(bool VNNI, bool SPLIT, int U, int PF, int A, bool two, __m512 a[8][2],
                         const char *wb, size_t ld, const int8_t *xqb, const int32_t *xbb,
                         const __m512 *ds, int64_t j, size_t pf) {
    const size_t bb = SPLIT ? LT_QK8_0 : sizeof(lt_block_q8_0);
    /* lanes 0..7 take the scale of block j, 8..15 that of block j + 1 */
    const __m512i idx = _mm512_add_epi32(
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        _mm512_set1_epi32((int)j));
    const __m512i xv = _mm512_load_si512(xqb + j * LT__XQ_BLOCK);
    const __m512i bv = _mm512_load_si512(xbb + j * LT__XQ8_LANES);
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        const char *p = wb + (size_t)u * ld + (size_t)j * bb;
        if (PF) _mm_prefetch(p + pf, _MM_HINT_T0);
        if (PF == 2) _mm_prefetch(p + LT__Q8_FAR * pf, _MM_HINT_T1);
        __m512 dot = _mm512_cvtepi32_ps(q8i8_pair(VNNI, q8_pair_quants(SPLIT, p, two), xv, bv));
        __m512 sc = _mm512_permutexvar_ps(idx, ds[u]);
        a[u][A] = two ? _mm512_fmadd_ps(dot, sc, a[u][A])
                      : _mm512_mask3_fmadd_ps(dot, sc, a[u][A], 0x00ff);
    }
}

/* Rows w, w+ld, ... (U of them, nbrow blocks each) over blocks [b0, b1)
 * (b0 a multiple of 4). part holds the rows' accumulators between k blocks
 * ([U][32] floats: acc[0], acc[1]): read unless first, written unless last.
 * When last, y[u] = (or +=) the row's sum. */
LT_INLINE void q8i8_rows(bool VNNI, bool SPLIT, int U, int PF, const char *w, size_t ld,
                         const int8_t *xq, const float *xs, const int32_t *xb, int64_t nbrow,
                         int64_t b0, int64_t b1, size_t pf, float *part, bool first, bool last,
                         float *y, bool accumulate) {
    __m512 a[8][2];
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        a[u][0] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + 32 * u);
        a[u][1] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + 32 * u + 16);
    }
    /* groups of up to 16 blocks, within one split group of 32; pair j / 2
     * of a group at b is the row's pair (b + j) / 2, and b stays a multiple
     * of 4, so its accumulator is (j / 2) % 2 */
    for (int64_t b = b0, nblk; b < b1; b += nblk) {
        nblk = lt__q8_chunk(SPLIT, b, b1);
        const __mmask16 m = nblk >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nblk) - 1);
        const __m512 sv = _mm512_maskz_loadu_ps(m, xs + b);
        /* d_b * s_b of the group's blocks, per row */
        __m512 ds[8];
#pragma GCC unroll 8
        for (int u = 0; u < U; u++) {
            const char *row = w + (size_t)u * ld;
            __m512 d = SPLIT ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
                                   m, lt_q8s_scales(row, nbrow, b)))
                             : q8_scales(row + (size_t)b * sizeof(lt_block_q8_0), nblk);
            ds[u] = _mm512_mul_ps(d, sv);
        }
        const char *wb = SPLIT ? (const char *)lt_q8s_qs(w, nbrow, b)
                               : w + (size_t)b * sizeof(lt_block_q8_0);
        const int8_t *xqb = xq + b * LT__XQ_BLOCK;
        const int32_t *xbb = xb + b * LT__XQ8_LANES;
        int64_t j = 0;
        for (; j + 4 <= nblk; j += 4) {
            q8i8_step(VNNI, SPLIT, U, PF, 0, true, a, wb, ld, xqb, xbb, ds, j, pf);
            q8i8_step(VNNI, SPLIT, U, PF, 1, true, a, wb, ld, xqb, xbb, ds, j + 2, pf);
        }
        /* the row's end: up to three blocks left (j a multiple of 4) */
        if (j + 2 <= nblk) {
            q8i8_step(VNNI, SPLIT, U, PF, 0, true, a, wb, ld, xqb, xbb, ds, j, pf);
            if (j + 3 == nblk)
                q8i8_step(VNNI, SPLIT, U, PF, 1, false, a, wb, ld, xqb, xbb, ds, j + 2, pf);
        } else if (j + 1 == nblk) {
            q8i8_step(VNNI, SPLIT, U, PF, 0, false, a, wb, ld, xqb, xbb, ds, j, pf);
        }
    }
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        if (last) {
            float s = reduce_halves(_mm512_add_ps(a[u][0], a[u][1]));
            y[u] = accumulate ? y[u] + s : s;
        } else {
            _mm512_store_ps(part + 32 * u, a[u][0]);
            _mm512_store_ps(part + 32 * u + 16, a[u][1]);
        }
    }
}

/* One specialisation per (split layout or plain, VNNI or not, rows at
 * once, prefetch: 0 none, 1 near, 2 near and far); k in elements, whole
 * 32-element blocks. */
#define Q8I8_FN(S, V, U, PF)                                                                 \
    static void q8i8_##S##V##_##U##_##PF(const char *w, size_t ld, const lt__mv_x *x,       \
                                         int64_t k0, int64_t k1, size_t pf, float *part,     \
                                         bool first, bool last, float *y, bool accumulate,   \
                                         int64_t groups) {                                   \
        for (int64_t g = 0; g < groups; g++)                                                 \
            q8i8_rows(V, S, U, PF, w + (size_t)(g * U) * ld, ld, x->xq8, x->xs, x->xb,       \
                      x->row_blocks, k0 / LT_QK8_0, k1 / LT_QK8_0, pf, part + 32 * U * g,    \
                      first, last, y + U * g, accumulate);                                   \
    }
#define Q8I8_FNS(S, V) Q8I8_FN(S, V, 1, 0) Q8I8_FN(S, V, 1, 1) Q8I8_FN(S, V, 1, 2)           \
    Q8I8_FN(S, V, 2, 0) Q8I8_FN(S, V, 2, 1) Q8I8_FN(S, V, 2, 2) Q8I8_FN(S, V, 4, 0)          \
    Q8I8_FN(S, V, 4, 1) Q8I8_FN(S, V, 4, 2) Q8I8_FN(S, V, 8, 0) Q8I8_FN(S, V, 8, 1)          \
    Q8I8_FN(S, V, 8, 2)
Q8I8_FNS(0, 1)
Q8I8_FNS(0, 0)
Q8I8_FNS(1, 1)
Q8I8_FNS(1, 0)

/* [split][far prefetch][VNNI][log2 rows at once][prefetch on] */
#define Q8I8_ROW(S, V, P)                                                                    \
    {{q8i8_##S##V##_1_0, q8i8_##S##V##_1_##P}, {q8i8_##S##V##_2_0, q8i8_##S##V##_2_##P},     \
     {q8i8_##S##V##_4_0, q8i8_##S##V##_4_##P}, {q8i8_##S##V##_8_0, q8i8_##S##V##_8_##P}}
static const lt__mv_rows_fn q8i8_table[2][2][2][4][2] = {
    {{Q8I8_ROW(0, 0, 1), Q8I8_ROW(0, 1, 1)}, {Q8I8_ROW(0, 0, 2), Q8I8_ROW(0, 1, 2)}},
    {{Q8I8_ROW(1, 0, 1), Q8I8_ROW(1, 1, 1)}, {Q8I8_ROW(1, 0, 2), Q8I8_ROW(1, 1, 2)}}};

bool lt__matvec_q8i8_avx512(const lt_call *call, const lt_step *step, int ith, int nth,
                            const float *xin) {
    const bool vnni = lt_cpu()->avx512vnni && !lt__q8i8_avoid_vnni;
    const int8_t *xq;
    const float *xs;
    const int32_t *xb;
    if (!lt__xq8_get(call, step, xin, xq8_quant_avx512, &xq, &xs, &xb)) return false;
    const int64_t cols = call->op[1]->ne[0], kb = call->params.v[LT__MV_K_BLOCK];
    /* k blocks start at multiples of 4 blocks: the row function pairs
     * blocks and takes a pair's parity from its offset in the k block */
    LT_ASSERT(kb <= 0 || kb >= cols || kb % (4 * LT_QK8_0) == 0);
    const lt__mv_x x = {.x = xin, .xs = xs, .xq8 = xq, .xb = xb, .row_blocks = cols / LT_QK8_0};
    const bool split = call->op[1]->layout == LT_LAYOUT_Q8_SPLIT;
    lt__matvec_drive(call, ith, nth, q8i8_table[split][cols >= LT__Q8_FAR_MIN_COLS][vnni], &x);
    return true;
}

/* ---- several tokens at once (a batched decode step) ------------------------- */

/* One token's quantised x: the layout lt__xq8_get gives one token. */
typedef struct {
    const int8_t *xq;
    const float *xs;
    const int32_t *xb;
} q8i8_tok;

/* Pair j / 2 of a group of blocks starting at row block b (quants at wb in
 * the first of U rows ld bytes apart) into accumulator A of each of T
 * tokens of each row: a row's quants are loaded (and offset) once for all
 * T, a token's x once for all U, and each row and token's lanes, scale and
 * FMA are those of q8i8_step for one row. */
LT_INLINE void q8i8_tok_step(bool VNNI, bool SPLIT, int U, int T, int PF, int A, bool two,
                             __m512 a[2][4][2], const char *wb, size_t ld, const q8i8_tok *tk,
                             int64_t b, __m512 ds[2][4], int64_t j, size_t pf) {
    const size_t bb = SPLIT ? LT_QK8_0 : sizeof(lt_block_q8_0);
    const __m512i idx = _mm512_add_epi32(
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        _mm512_set1_epi32((int)j));
    __m512i w[2], wu[2];
#pragma GCC unroll 2
    for (int u = 0; u < U; u++) {
        const char *p = wb + (size_t)u * ld + (size_t)j * bb;
        if (PF) _mm_prefetch(p + pf, _MM_HINT_T0);
        if (PF == 2) _mm_prefetch(p + LT__Q8_FAR * pf, _MM_HINT_T1);
        w[u] = q8_pair_quants(SPLIT, p, two);
        wu[u] = _mm512_xor_si512(w[u], _mm512_set1_epi8(-128));
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        const __m512i xv = _mm512_load_si512(tk[t].xq + (b + j) * LT__XQ_BLOCK);
        const __m512i bv = _mm512_load_si512(tk[t].xb + (b + j) * LT__XQ8_LANES);
#pragma GCC unroll 2
        for (int u = 0; u < U; u++) {
            const __m512i s32 =
                VNNI ? _mm512_dpbusd_epi32(bv, wu[u], xv) : q8i8_pair(false, w[u], xv, bv);
            __m512 dot = _mm512_cvtepi32_ps(s32);
            __m512 sc = _mm512_permutexvar_ps(idx, ds[u][t]);
            a[u][t][A] = two ? _mm512_fmadd_ps(dot, sc, a[u][t][A])
                             : _mm512_mask3_fmadd_ps(dot, sc, a[u][t][A], 0x00ff);
        }
    }
}

/* U rows (ld bytes apart, nbrow blocks each) against T tokens, whole:
 * y[t][u] = (or +=) each row and token's sum, in q8i8_rows' order for that
 * row and token alone. */
LT_INLINE void q8i8_tok_rows(bool VNNI, bool SPLIT, int U, int T, int PF, const char *row,
                             size_t ld, const q8i8_tok *tk, int64_t nbrow, size_t pf,
                             float *const *y, bool accumulate) {
    __m512 a[2][4][2];
#pragma GCC unroll 2
    for (int u = 0; u < U; u++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) a[u][t][0] = a[u][t][1] = _mm512_setzero_ps();
    for (int64_t b = 0, nblk; b < nbrow; b += nblk) {
        nblk = lt__q8_chunk(SPLIT, b, nbrow);
        const __mmask16 m = nblk >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nblk) - 1);
        __m512 ds[2][4];
#pragma GCC unroll 2
        for (int u = 0; u < U; u++) {
            const char *r = row + (size_t)u * ld;
            const __m512 d = SPLIT ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
                                         m, lt_q8s_scales(r, nbrow, b)))
                                   : q8_scales(r + (size_t)b * sizeof(lt_block_q8_0), nblk);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                ds[u][t] = _mm512_mul_ps(d, _mm512_maskz_loadu_ps(m, tk[t].xs + b));
        }
        const char *wb = SPLIT ? (const char *)lt_q8s_qs(row, nbrow, b)
                               : row + (size_t)b * sizeof(lt_block_q8_0);
        int64_t j = 0;
        for (; j + 4 <= nblk; j += 4) {
            q8i8_tok_step(VNNI, SPLIT, U, T, PF, 0, true, a, wb, ld, tk, b, ds, j, pf);
            q8i8_tok_step(VNNI, SPLIT, U, T, PF, 1, true, a, wb, ld, tk, b, ds, j + 2, pf);
        }
        if (j + 2 <= nblk) {
            q8i8_tok_step(VNNI, SPLIT, U, T, PF, 0, true, a, wb, ld, tk, b, ds, j, pf);
            if (j + 3 == nblk)
                q8i8_tok_step(VNNI, SPLIT, U, T, PF, 1, false, a, wb, ld, tk, b, ds, j + 2, pf);
        } else if (j + 1 == nblk) {
            q8i8_tok_step(VNNI, SPLIT, U, T, PF, 0, false, a, wb, ld, tk, b, ds, j, pf);
        }
    }
#pragma GCC unroll 2
    for (int u = 0; u < U; u++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            float s = reduce_halves(_mm512_add_ps(a[u][t][0], a[u][t][1]));
            y[t][u] = accumulate ? y[t][u] + s : s;
        }
}

typedef void (*q8i8_tok_fn)(const char *row, size_t ld, const q8i8_tok *tk, int64_t nbrow,
                            size_t pf, float *const *y, bool accumulate);
#define Q8I8_TOK_FN(S, V, U, T, PF)                                                          \
    static void q8i8_tok_##S##V##_##U##_##T##_##PF(const char *row, size_t ld,               \
                                                   const q8i8_tok *tk, int64_t nbrow,        \
                                                   size_t pf, float *const *y,               \
                                                   bool accumulate) {                        \
        q8i8_tok_rows(V, S, U, T, PF, row, ld, tk, nbrow, pf, y, accumulate);                \
    }
#define Q8I8_TOK_T(S, V, U, T)                                                               \
    Q8I8_TOK_FN(S, V, U, T, 0) Q8I8_TOK_FN(S, V, U, T, 1) Q8I8_TOK_FN(S, V, U, T, 2)
#define Q8I8_TOK_U(S, V, U) Q8I8_TOK_T(S, V, U, 1) Q8I8_TOK_T(S, V, U, 2) Q8I8_TOK_T(S, V, U, 3) \
    Q8I8_TOK_T(S, V, U, 4)
#define Q8I8_TOK_SV(S, V) Q8I8_TOK_U(S, V, 1) Q8I8_TOK_U(S, V, 2)
Q8I8_TOK_SV(0, 0)
Q8I8_TOK_SV(0, 1)
Q8I8_TOK_SV(1, 0)
Q8I8_TOK_SV(1, 1)
#define Q8I8_TOK_ROW(S, V, U, T)                                                             \
    {q8i8_tok_##S##V##_##U##_##T##_0, q8i8_tok_##S##V##_##U##_##T##_1,                       \
     q8i8_tok_##S##V##_##U##_##T##_2}
#define Q8I8_TOK_TS(S, V, U)                                                                 \
    {Q8I8_TOK_ROW(S, V, U, 1), Q8I8_TOK_ROW(S, V, U, 2), Q8I8_TOK_ROW(S, V, U, 3),           \
     Q8I8_TOK_ROW(S, V, U, 4)}
#define Q8I8_TOK_US(S, V) {Q8I8_TOK_TS(S, V, 1), Q8I8_TOK_TS(S, V, 2)}
/* [split][VNNI][rows - 1][tokens - 1][prefetch: none, near, near and far] */
static const q8i8_tok_fn q8i8_tok_table[2][2][2][4][3] = {
    {Q8I8_TOK_US(0, 0), Q8I8_TOK_US(0, 1)}, {Q8I8_TOK_US(1, 0), Q8I8_TOK_US(1, 1)}};

bool lt__matvec_q8i8_tokens_avx512(const lt_call *call, const lt_step *step, int ith, int nth) {
    const lt_tensor *Y = call->op[0], *W = call->op[1], *X = call->op[2];
    const bool vnni = lt_cpu()->avx512vnni && !lt__q8i8_avoid_vnni;
    const int64_t n = X->ne[1], cols = W->ne[0], nblk = cols / LT_QK8_0;
    /* each token's x as lt__xq8_get lays it out, padding zeroed */
    size_t per_tok, qbytes, bias_off;
    const char *xq =
        lt__xq8_tokens_get(call, step, xq8_quant_avx512, &per_tok, &qbytes, &bias_off);
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
        for (int64_t t0 = 0; t0 < n; t0 += 4) {
            const int T = n - t0 < 4 ? (int)(n - t0) : 4;
            q8i8_tok tk[4];
            float *y[4];
            for (int t = 0; t < T; t++) {
                const char *p = xq + (size_t)(t0 + t) * per_tok;
                tk[t] = (q8i8_tok){(const int8_t *)p, (const float *)(p + qbytes),
                                   (const int32_t *)(p + bias_off)};
                y[t] = (float *)((char *)Y->data + (size_t)(t0 + t) * Y->nb[1]) + c0;
            }
            /* rows in pairs: a token's x loaded once for both */
            const int p = t0 == 0 ? pfm : 0;
            for (int64_t r = c0; r < c1; r += 2) {
                const int U = c1 - r >= 2 ? 2 : 1;
                q8i8_tok_table[split][vnni][U - 1][T - 1][p](
                    (const char *)W->data + (size_t)r * W->nb[1], W->nb[1], tk, nblk, pf, y, acc);
                for (int t = 0; t < T; t++) y[t] += U;
            }
        }
    }
    return true;
}
