/* matvec, AVX2+FMA+F16C path: U rows at a time stream their weights once,
 * each 8 weights dequantised exactly to f32 in registers and FMA'd with f32 x.
 *
 * Per-row arithmetic (the same for every unroll, k_block and thread count,
 * so y does not depend on nth): two ymm accumulators per row; of each 32
 * elements, 0-7 and 16-23 go to a0, 8-15 and 24-31 to a1 (a 16-element tail,
 * never for q8_0, adds 0-7 to a0 and 8-15 to a1), FMAs in increasing k, then
 * reduce(a0 + a1). With k_block the accumulators are parked in per-task
 * scratch between blocks, which keeps that order.
 *
 * q8_0 takes these f32 sums only with act_int8 = act_int16 = 0: its integer
 * paths are matvec_q8i8_avx2.c and matvec_q8i16_avx2.c. */
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

/* Where element k of a row starts: for q8_0 (k a block start) its block's
 * quants, in either layout (S: split, rows of nb blocks). */
LT_INLINE const char *elem_ptr(lt_dtype dt, bool S, int64_t nb, const char *row, int64_t k) {
    if (dt == LT_Q8_0)
        return S ? (const char *)lt_q8s_qs(row, nb, k / LT_QK8_0)
                 : (const char *)((const lt_block_q8_0 *)row + k / LT_QK8_0)->qs;
    return row + row_offset(dt, k);
}

/* Weights k+8i..k+8i+7 of a row as f32 (i < 4; for q8_0 k is a block start
 * and d its scale). */
LT_INLINE __m256 load8(lt_dtype dt, bool S, int64_t nb, const char *row, int64_t k, int i,
                       __m256 d) {
    const char *p = elem_ptr(dt, S, nb, row, k);
    switch (dt) {
    case LT_F32: return _mm256_loadu_ps((const float *)p + 8 * i);
    case LT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16 * i)));
    case LT_BF16: {
        __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 16 * i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
    default: {
        __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8 * i)));
        return _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)); /* exact: 11-bit d times 8-bit q */
    }
    }
}

LT_INLINE __m256 scale(lt_dtype dt, bool S, int64_t nb, const char *row, int64_t k) {
    if (dt != LT_Q8_0) return _mm256_setzero_ps();
    const uint16_t d = S ? *lt_q8s_scales(row, nb, k / LT_QK8_0)
                         : ((const lt_block_q8_0 *)row + k / LT_QK8_0)->d;
    return _mm256_set1_ps(_cvtsh_ss(d));
}

LT_INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Rows w, w+ld, ... (U of them) over elements [k0, k1). part holds the
 * rows' accumulators between k blocks ([U][32] floats, 16 used): read unless
 * first, written unless last. When last, y[u] = (or +=) the row's sum. */
LT_INLINE void mv_rows(lt_dtype dt, bool S, int U, bool PF, const char *w, size_t ld,
                       int64_t nb, const float *x, int64_t k0, int64_t k1, size_t pf,
                       float *part, bool first, bool last, float *y, bool accumulate) {
    __m256 a[8][2];
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        a[u][0] = first ? _mm256_setzero_ps() : _mm256_load_ps(part + 32 * u);
        a[u][1] = first ? _mm256_setzero_ps() : _mm256_load_ps(part + 32 * u + 8);
    }
    int64_t k = k0;
    for (; k + 32 <= k1; k += 32) {
        __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
        __m256 x2 = _mm256_loadu_ps(x + k + 16), x3 = _mm256_loadu_ps(x + k + 24);
#pragma GCC unroll 8
        for (int u = 0; u < U; u++) {
            const char *row = w + (size_t)u * ld;
            if (PF) {
                const char *q = elem_ptr(dt, S, nb, row, k) + pf;
                _mm_prefetch(q, _MM_HINT_T0);
                if (dt == LT_F32) _mm_prefetch(q + 64, _MM_HINT_T0);
            }
            __m256 d = scale(dt, S, nb, row, k);
            a[u][0] = _mm256_fmadd_ps(load8(dt, S, nb, row, k, 0, d), x0, a[u][0]);
            a[u][1] = _mm256_fmadd_ps(load8(dt, S, nb, row, k, 1, d), x1, a[u][1]);
            a[u][0] = _mm256_fmadd_ps(load8(dt, S, nb, row, k, 2, d), x2, a[u][0]);
            a[u][1] = _mm256_fmadd_ps(load8(dt, S, nb, row, k, 3, d), x3, a[u][1]);
        }
    }
    if (dt != LT_Q8_0 && k < k1) {
        __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
        __m256 d = _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int u = 0; u < U; u++) {
            const char *row = w + (size_t)u * ld;
            a[u][0] = _mm256_fmadd_ps(load8(dt, false, 0, row, k, 0, d), x0, a[u][0]);
            a[u][1] = _mm256_fmadd_ps(load8(dt, false, 0, row, k, 1, d), x1, a[u][1]);
        }
    }
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
        if (last) {
            float s = hsum(_mm256_add_ps(a[u][0], a[u][1]));
            y[u] = accumulate ? y[u] + s : s;
        } else {
            _mm256_store_ps(part + 32 * u, a[u][0]);
            _mm256_store_ps(part + 32 * u + 8, a[u][1]);
        }
    }
}


/* One specialisation per (dtype, split q8_0 rows or not, rows at once,
 * prefetch on/off). */
#define MV_FN(DT, S, U, PF)                                                                \
    static void mv_##DT##_##S##_##U##_##PF(const char *w, size_t ld, const lt__mv_x *x,    \
                                           int64_t k0, int64_t k1, size_t pf, float *part, \
                                           bool first, bool last, float *y,                \
                                           bool accumulate, int64_t groups) {              \
        for (int64_t g = 0; g < groups; g++)                                               \
            mv_rows(LT_##DT, S, U, PF, w + (size_t)(g * U) * ld, ld, x->row_blocks, x->x,  \
                    k0, k1, pf, part + 32 * U * g, first, last, y + U * g, accumulate);    \
    }
#define MV_FNS_U(DT, S, U) MV_FN(DT, S, U, 0) MV_FN(DT, S, U, 1)
#define MV_FNS(DT, S)                                                                      \
    MV_FNS_U(DT, S, 1) MV_FNS_U(DT, S, 2) MV_FNS_U(DT, S, 4) MV_FNS_U(DT, S, 8)
MV_FNS(F32, 0)
MV_FNS(F16, 0)
MV_FNS(BF16, 0)
MV_FNS(Q8_0, 0)
MV_FNS(Q8_0, 1)

#define MV_ROW_U(DT, S, U) {mv_##DT##_##S##_##U##_0, mv_##DT##_##S##_##U##_1}
#define MV_ROW(DT, S)                                                                      \
    {MV_ROW_U(DT, S, 1), MV_ROW_U(DT, S, 2), MV_ROW_U(DT, S, 4), MV_ROW_U(DT, S, 8)}
/* [dtype][log2 rows at once][prefetch] */
static const lt__mv_rows_fn mv_table[LT_DTYPE_COUNT][4][2] = {
    [LT_F32] = MV_ROW(F32, 0),
    [LT_F16] = MV_ROW(F16, 0),
    [LT_BF16] = MV_ROW(BF16, 0),
    [LT_Q8_0] = MV_ROW(Q8_0, 0),
};
/* split q8_0 rows */
static const lt__mv_rows_fn mv_split_table[4][2] = MV_ROW(Q8_0, 1);

void lt__matvec_avx2(const lt_call *call, const lt_step *step, int ith, int nth, const float *xin) {
    const lt_tensor *W = call->op[1];
    if (W->dtype == LT_Q8_0 && call->params.v[LT__MV_ACT_INT8]) {
        if (lt__matvec_q8i8_avx2(call, step, ith, nth, xin)) return;
    } else if (W->dtype == LT_Q8_0 && call->params.v[LT__MV_ACT_INT16] &&
               lt__matvec_q8i16_avx2(call, step, ith, nth, xin)) {
        return;
    }
    const lt__mv_x x = {.x = xin, .row_blocks = W->ne[0] / LT_QK8_0};
    lt__matvec_drive(call, ith, nth,
                     W->layout == LT_LAYOUT_Q8_SPLIT ? mv_split_table : mv_table[W->dtype], &x);
}
