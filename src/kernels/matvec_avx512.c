/* matvec, AVX-512 path: U rows at a time stream their weights once, each 32
 * weights dequantised exactly to f32 in registers and FMA'd with f32 x.
 *
 * Per-row arithmetic (the same for every unroll, k_block and thread count,
 * so y does not depend on nth): two zmm accumulators per row, a0 for
 * elements 32j..32j+15 and a1 for 32j+16..32j+31 (a 16-element tail, never
 * for q8_0, goes to a0), FMAs in increasing k, then reduce(a0 + a1). With
 * k_block the accumulators are parked in per-task scratch between blocks,
 * which keeps that order. */
#include "kernels/linear.h"

#include <immintrin.h>
#include <stdalign.h>

#define LT_INLINE static inline __attribute__((always_inline))

/* Byte offset of element k in a row (k a multiple of 32 for q8_0). */
LT_INLINE size_t row_offset(lt_dtype dt, int64_t k) {
    switch (dt) {
    case LT_F32: return (size_t)k * 4;
    case LT_F16:
    case LT_BF16: return (size_t)k * 2;
    default: return (size_t)(k / LT_QK8_0) * sizeof(lt_block_q8_0);
    }
}

LT_INLINE __m512 bf16x16(const void *p) {
    __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

LT_INLINE __m512 q8x16(const int8_t *q, __m512 d) {
    __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)q));
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(v)); /* exact: 11-bit d times 8-bit q */
}

/* Weights k..k+31 of a row as f32. */
LT_INLINE void load32(lt_dtype dt, const char *row, int64_t k, __m512 *lo, __m512 *hi) {
    const char *p = row + row_offset(dt, k);
    switch (dt) {
    case LT_F32:
        *lo = _mm512_loadu_ps(p);
        *hi = _mm512_loadu_ps(p + 64);
        break;
    case LT_F16:
        *lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
        *hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 32)));
        break;
    case LT_BF16:
        *lo = bf16x16(p);
        *hi = bf16x16(p + 32);
        break;
    default: {
        const lt_block_q8_0 *b = (const lt_block_q8_0 *)p;
        __m512 d = _mm512_set1_ps(_cvtsh_ss(b->d));
        *lo = q8x16(b->qs, d);
        *hi = q8x16(b->qs + 16, d);
        break;
    }
    }
}

/* Weights k..k+15 of a row as f32 (the tail of a non-q8_0 row). */
LT_INLINE __m512 load16(lt_dtype dt, const char *row, int64_t k) {
    const char *p = row + row_offset(dt, k);
    switch (dt) {
    case LT_F32: return _mm512_loadu_ps(p);
    case LT_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    default: return bf16x16(p);
    }
}

/* Scales of up to 16 consecutive q8_0 blocks starting at p, as f32 in d[0..n):
 * one masked gather of the dwords at each block start (low half = the f16
 * scale), narrowed and converted. Reads nothing past block n-1. */
LT_INLINE void q8_scales(const char *p, int64_t n, float *d) {
    const __m512i idx = _mm512_setr_epi32(0, 34, 68, 102, 136, 170, 204, 238, 272, 306, 340,
                                          374, 408, 442, 476, 510);
    __mmask16 m = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
    __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, p, 1);
    _mm512_store_ps(d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
}

/* Rows w, w+ld, ... (U of them; q8_0 rows of nbrow blocks split if SPLIT)
 * over elements [k0, k1). part holds the rows' accumulators between k
 * blocks ([U][32] floats): read unless first, written unless last. When
 * last, y[u] = (or +=) the row's sum. */
LT_INLINE void mv_rows(lt_dtype dt, bool SPLIT, int64_t nbrow, int U, bool PF, const char *w,
                       size_t ld, const float *x, int64_t k0, int64_t k1, size_t pf,
                       float *part, bool first, bool last, float *y, bool accumulate) {
    __m512 a[8][2];
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        a[u][0] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + 32 * u);
        a[u][1] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + 32 * u + 16);
    }
    if (dt == LT_Q8_0) {
        /* q8_0: the scales of 16 blocks per row are converted up front, so
         * each block's dequantisation multiplies by a broadcast from memory
         * instead of converting and broadcasting one f16 per block */
        const size_t bb = SPLIT ? LT_QK8_0 : sizeof(lt_block_q8_0);
        for (int64_t k = k0, nblk; k < k1; k += nblk * LT_QK8_0) {
            const int64_t b0 = k / LT_QK8_0;
            nblk = lt__q8_chunk(SPLIT, b0, k1 / LT_QK8_0);
            const size_t off = SPLIT ? (size_t)(lt_q8s_qs(w, nbrow, b0) - (const int8_t *)w)
                                     : (size_t)b0 * bb;
            alignas(64) float d[8][16];
#pragma GCC unroll 8
            for (int u = 0; u < U; u++) {
                if (SPLIT)
                    _mm512_store_ps(d[u], _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
                                              (__mmask16)((1u << nblk) - 1),
                                              lt_q8s_scales(w + (size_t)u * ld, nbrow, b0))));
                else
                    q8_scales(w + (size_t)u * ld + off, nblk, d[u]);
            }
            for (int64_t b = 0; b < nblk; b++) {
                const float *xb = x + k + b * LT_QK8_0;
                __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
#pragma GCC unroll 8
                for (int u = 0; u < U; u++) {
                    const char *p = w + (size_t)u * ld + off + (size_t)b * bb;
                    const int8_t *q = SPLIT ? (const int8_t *)p : ((const lt_block_q8_0 *)p)->qs;
                    if (PF) _mm_prefetch(p + pf, _MM_HINT_T0);
                    __m512 ds = _mm512_set1_ps(d[u][b]);
                    a[u][0] = _mm512_fmadd_ps(q8x16(q, ds), x0, a[u][0]);
                    a[u][1] = _mm512_fmadd_ps(q8x16(q + 16, ds), x1, a[u][1]);
                }
            }
        }
    } else {
        int64_t k = k0;
        for (; k + 32 <= k1; k += 32) {
            __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
#pragma GCC unroll 8
            for (int u = 0; u < U; u++) {
                const char *row = w + (size_t)u * ld;
                if (PF) {
                    const char *q = row + row_offset(dt, k) + pf;
                    _mm_prefetch(q, _MM_HINT_T0);
                    if (dt == LT_F32) _mm_prefetch(q + 64, _MM_HINT_T0);
                }
                __m512 lo, hi;
                load32(dt, row, k, &lo, &hi);
                a[u][0] = _mm512_fmadd_ps(lo, x0, a[u][0]);
                a[u][1] = _mm512_fmadd_ps(hi, x1, a[u][1]);
            }
        }
        if (k < k1) { /* a 16-element tail */
            __m512 x0 = _mm512_loadu_ps(x + k);
#pragma GCC unroll 8
            for (int u = 0; u < U; u++)
                a[u][0] = _mm512_fmadd_ps(load16(dt, w + (size_t)u * ld, k), x0, a[u][0]);
        }
    }
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        if (last) {
            float s = _mm512_reduce_add_ps(_mm512_add_ps(a[u][0], a[u][1]));
            y[u] = accumulate ? y[u] + s : s;
        } else {
            _mm512_store_ps(part + 32 * u, a[u][0]);
            _mm512_store_ps(part + 32 * u + 16, a[u][1]);
        }
    }
}


/* One specialisation per (dtype, split q8_0 or not, rows at once, prefetch
 * on/off). */
#define MV_FN(DT, S, U, PF)                                                                \
    static void mv_##DT##S##_##U##_##PF(const char *w, size_t ld, const lt__mv_x *x,      \
                                     int64_t k0,                                           \
                                     int64_t k1, size_t pf, float *part, bool first,       \
                                     bool last, float *y, bool accumulate,                 \
                                     int64_t groups) {                                     \
        for (int64_t g = 0; g < groups; g++)                                               \
            mv_rows(LT_##DT, S, x->row_blocks, U, PF, w + (size_t)(g * U) * ld, ld, x->x,  \
                    k0, k1, pf, part + 32 * U * g, first, last, y + U * g, accumulate);    \
    }
#define MV_FNS_U(DT, S, U) MV_FN(DT, S, U, 0) MV_FN(DT, S, U, 1)
#define MV_FNS(DT, S) MV_FNS_U(DT, S, 1) MV_FNS_U(DT, S, 2) MV_FNS_U(DT, S, 4) MV_FNS_U(DT, S, 8)
MV_FNS(F32, 0)
MV_FNS(F16, 0)
MV_FNS(BF16, 0)
MV_FNS(Q8_0, 0)
MV_FNS(Q8_0, 1)

#define MV_ROW_U(DT, S, U) {mv_##DT##S##_##U##_0, mv_##DT##S##_##U##_1}
#define MV_ROW(DT, S) {MV_ROW_U(DT, S, 1), MV_ROW_U(DT, S, 2), MV_ROW_U(DT, S, 4), MV_ROW_U(DT, S, 8)}
/* [dtype][log2 rows at once][prefetch] */
static const lt__mv_rows_fn mv_table[LT_DTYPE_COUNT][4][2] = {
    [LT_F32] = MV_ROW(F32, 0),
    [LT_F16] = MV_ROW(F16, 0),
    [LT_BF16] = MV_ROW(BF16, 0),
    [LT_Q8_0] = MV_ROW(Q8_0, 0),
};
/* split q8_0 rows */
static const lt__mv_rows_fn mv_split_table[4][2] = MV_ROW(Q8_0, 1);

void lt__matvec_avx512(const lt_call *call, const lt_step *step, int ith, int nth,
                       const float *xin) {
    const lt_tensor *W = call->op[1];
    if (W->dtype == LT_Q8_0 && call->params.v[LT__MV_ACT_INT8]) {
        if (lt__matvec_q8i8_avx512(call, step, ith, nth, xin)) return;
    } else if (W->dtype == LT_Q8_0 && call->params.v[LT__MV_ACT_INT16] &&
               lt__matvec_q8i16_avx512(call, step, ith, nth, xin)) {
        return;
    }
    const lt__mv_x x = {.x = xin, .row_blocks = W->ne[0] / LT_QK8_0};
    lt__matvec_drive(call, ith, nth,
                     W->layout == LT_LAYOUT_Q8_SPLIT ? mv_split_table : mv_table[W->dtype], &x);
}
