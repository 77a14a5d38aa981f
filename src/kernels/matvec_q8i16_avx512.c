/* matvec, AVX-512 path for q8_0 W with int16 activations (act_int16 = 1):
 * x quantised once per node and thread (linear.h), then per 32 weights one
 * sign extension to int16 (vpmovsxbw), one pairwise integer dot (vpmaddwd,
 * the exact int32 sums of linear.h), one conversion and one FMA with the
 * broadcast d_b * s_b: half the vector work of dequantising to f32, which
 * keeps one core streaming near the memory's read bandwidth.
 *
 * The arithmetic order is the one linear.h fixes (even blocks in a0, odd in
 * a1, a fixed halving reduction), the same for every unroll, k_block and
 * thread count, and the same as the portable path bit for bit. */
#include "kernels/linear.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdalign.h>

#define LT_INLINE static inline __attribute__((always_inline))

/* x quantised per 32-element block as linear.h defines it; the same bits as
 * lt__xq_quant_portable (IEEE max, division and multiplication, rounding to
 * nearest even, saturation that never triggers). */
static void xq_quant_avx512(const float *x, int64_t n, int16_t *q, float *s) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512 big = _mm512_set1_ps(FLT_MAX);
    for (int64_t b = 0; b < n / LT__XQ_BLOCK; b++) {
        const float *xb = x + b * LT__XQ_BLOCK;
        __m512i *qb = (__m512i *)(q + b * LT__XQ_BLOCK);
        __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        __m512 a0 = _mm512_and_ps(v0, absmask), a1 = _mm512_and_ps(v1, absmask);
        /* not <= FLT_MAX: NaN or infinity */
        __mmask16 bad = _mm512_cmp_ps_mask(a0, big, _CMP_NLE_UQ) |
                        _mm512_cmp_ps_mask(a1, big, _CMP_NLE_UQ);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        const float inv = (float)LT__XQ_MAX / amax;
        if (bad || !(inv <= FLT_MAX)) {
            s[b] = bad ? NAN : 0.0f;
            _mm512_storeu_si512(qb, _mm512_setzero_si512());
            continue;
        }
        s[b] = amax / (float)LT__XQ_MAX;
        const __m512 iv = _mm512_set1_ps(inv);
        __m256i q0 = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v0, iv)));
        __m256i q1 = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v1, iv)));
        _mm512_storeu_si512(qb, _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1));
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

/* Block j of a row (at blk) against xq block xv, into accumulator a. */
LT_INLINE __m512 q8i16_block(const int8_t *qs, __m512i xv, float ds, __m512 a) {
    __m512i wv = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)qs));
    __m512 p = _mm512_cvtepi32_ps(_mm512_madd_epi16(wv, xv)); /* exact: |p| < 2^24 */
    return _mm512_fmadd_ps(p, _mm512_set1_ps(ds), a);
}

/* The halving reduction of linear.h. */
LT_INLINE float reduce_halves(__m512 h) {
    __m256 v8 = _mm256_add_ps(_mm512_castps512_ps256(h), _mm512_extractf32x8_ps(h, 1));
    __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
    __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
    return _mm_cvtss_f32(_mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1)));
}

/* Block b's quants of a pair at p (plain blocks hold theirs after the scale). */
LT_INLINE const int8_t *quants(bool SPLIT, const char *p) {
    return SPLIT ? (const int8_t *)p : ((const lt_block_q8_0 *)p)->qs;
}

/* Rows w, w+ld, ... (U of them, nbrow blocks each, split if SPLIT) over
 * blocks [b0, b1) (b0 even). part holds the rows' accumulators between k
 * blocks ([U][32] floats): read unless first, written unless last. When
 * last, y[u] = (or +=) the row's sum. */
LT_INLINE void q8i16_rows(bool SPLIT, int U, bool PF, const char *w, size_t ld,
                          const int16_t *xq, const float *xs, int64_t nbrow, int64_t b0,
                          int64_t b1, size_t pf, float *part, bool first, bool last, float *y,
                          bool accumulate) {
    const size_t bb = SPLIT ? LT_QK8_0 : sizeof(lt_block_q8_0);
    __m512 a[8][2];
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        a[u][0] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + 32 * u);
        a[u][1] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + 32 * u + 16);
    }
    for (int64_t b = b0, nblk; b < b1; b += nblk) {
        nblk = lt__q8_chunk(SPLIT, b, b1); /* b stays even */
        const __mmask16 m = nblk >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nblk) - 1);
        const __m512 sv = _mm512_maskz_loadu_ps(m, xs + b);
        /* d_b * s_b of 16 blocks per row, broadcast from memory per block */
        alignas(64) float ds[8][16];
#pragma GCC unroll 8
        for (int u = 0; u < U; u++) {
            const char *row = w + (size_t)u * ld;
            __m512 d = SPLIT ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
                                   m, lt_q8s_scales(row, nbrow, b)))
                             : q8_scales(row + (size_t)b * bb, nblk);
            _mm512_store_ps(ds[u], _mm512_mul_ps(d, sv));
        }
        const char *wb = SPLIT ? (const char *)lt_q8s_qs(w, nbrow, b) : w + (size_t)b * bb;
        const int16_t *xb = xq + b * LT__XQ_BLOCK;
        int64_t j = 0;
        for (; j + 2 <= nblk; j += 2) { /* b even: block b + j is even */
            __m512i x0 = _mm512_load_si512(xb + j * LT__XQ_BLOCK);
            __m512i x1 = _mm512_load_si512(xb + (j + 1) * LT__XQ_BLOCK);
#pragma GCC unroll 8
            for (int u = 0; u < U; u++) {
                const char *p = wb + (size_t)u * ld + (size_t)j * bb;
                if (PF) _mm_prefetch(p + pf, _MM_HINT_T0);
                a[u][0] = q8i16_block(quants(SPLIT, p), x0, ds[u][j], a[u][0]);
                a[u][1] = q8i16_block(quants(SPLIT, p + bb), x1, ds[u][j + 1], a[u][1]);
            }
        }
        if (j < nblk) {
            __m512i x0 = _mm512_load_si512(xb + j * LT__XQ_BLOCK);
#pragma GCC unroll 8
            for (int u = 0; u < U; u++) {
                const char *p = wb + (size_t)u * ld + (size_t)j * bb;
                a[u][0] = q8i16_block(quants(SPLIT, p), x0, ds[u][j], a[u][0]);
            }
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


/* One specialisation per (split or plain, rows at once, prefetch on/off);
 * k in elements, whole 32-element blocks. */
#define Q8I16_FN(S, U, PF)                                                                  \
    static void q8i16_##S##_##U##_##PF(const char *w, size_t ld, const lt__mv_x *x,         \
                                       int64_t k0, int64_t k1, size_t pf, float *part,      \
                                       bool first, bool last, float *y, bool accumulate,    \
                                       int64_t groups) {                                    \
        for (int64_t g = 0; g < groups; g++)                                                \
            q8i16_rows(S, U, PF, w + (size_t)(g * U) * ld, ld, x->xq, x->xs, x->row_blocks,  \
                       k0 / LT_QK8_0, k1 / LT_QK8_0, pf, part + 32 * U * g, first, last,    \
                       y + U * g, accumulate);                                              \
    }
#define Q8I16_FNS(S) Q8I16_FN(S, 1, 0) Q8I16_FN(S, 1, 1) Q8I16_FN(S, 2, 0) Q8I16_FN(S, 2, 1) \
    Q8I16_FN(S, 4, 0) Q8I16_FN(S, 4, 1) Q8I16_FN(S, 8, 0) Q8I16_FN(S, 8, 1)
Q8I16_FNS(0)
Q8I16_FNS(1)

/* [split][log2 rows at once][prefetch] */
#define Q8I16_ROW(S)                                                                        \
    {{q8i16_##S##_1_0, q8i16_##S##_1_1}, {q8i16_##S##_2_0, q8i16_##S##_2_1},                \
     {q8i16_##S##_4_0, q8i16_##S##_4_1}, {q8i16_##S##_8_0, q8i16_##S##_8_1}}
static const lt__mv_rows_fn q8i16_table[2][4][2] = {Q8I16_ROW(0), Q8I16_ROW(1)};

bool lt__matvec_q8i16_avx512(const lt_call *call, const lt_step *step, int ith, int nth,
                             const float *xin) {
    const int16_t *xq;
    const float *xs;
    if (!lt__xq_get(call, step, xin, xq_quant_avx512, &xq, &xs)) return false;
    const int64_t cols = call->op[1]->ne[0], kb = call->params.v[LT__MV_K_BLOCK];
    /* k blocks start at even blocks (the row function pairs blocks) */
    LT_ASSERT(kb <= 0 || kb >= cols || kb % (2 * LT_QK8_0) == 0);
    const lt__mv_x x = {.x = xin, .xq = xq, .xs = xs, .row_blocks = cols / LT_QK8_0};
    lt__matvec_drive(call, ith, nth, q8i16_table[call->op[1]->layout == LT_LAYOUT_Q8_SPLIT], &x);
    return true;
}
