/* matmul, AVX-512 path: a packed, blocked GEMM, Y[n][rows] = X[n][cols] W^T.
 *
 * Blocking (per thread, over its own W rows): for each k block of k_block
 * elements, for each block of m_block W rows, the block is dequantised to f32
 * and packed into panels of NR = 32 rows laid out [k][32] (rows past the end
 * are zero), so one micro-kernel serves every dtype. Then for each block of
 * n_block tokens, each panel (kc*128 bytes, L1-resident) meets every group
 * of MR = 12 tokens in the micro-kernel.
 *
 * Micro-kernel contract: C tile of M <= 12 tokens x 32 outputs (the last
 * panel's outputs past the end masked off), 24 zmm accumulators; for each k,
 * two aligned loads of the packed panel, M broadcasts of X[i][k], 2M FMAs.
 * The tile is stored (first k block, not accumulating) or added to C.
 * Each output's sum is a chain of FMAs in increasing k within a k block, the
 * block sums added to Y in increasing k: independent of n_block, m_block and
 * the number of threads. */
#include "kernels/linear.h"

#include <immintrin.h>

#define LT_INLINE static inline __attribute__((always_inline))
#define MR 12
#define NR 32

/* Weights k..k+15 of a row (of nb blocks, split if SPLIT) as f32 (k a
 * multiple of 16). */
LT_INLINE __m512 load16(lt_dtype dt, bool SPLIT, int64_t nb, const char *row, int64_t k) {
    if (SPLIT) {
        __m512 d = _mm512_set1_ps(_cvtsh_ss(*lt_q8s_scales(row, nb, k / LT_QK8_0)));
        __m128i q = _mm_loadu_si128(
            (const __m128i *)(lt_q8s_qs(row, nb, k / LT_QK8_0) + k % LT_QK8_0));
        return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))); /* exact */
    }
    switch (dt) {
    case LT_F32: return _mm512_loadu_ps(row + 4 * k);
    case LT_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * k)));
    case LT_BF16: {
        __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(row + 2 * k)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    }
    default: {
        const lt_block_q8_0 *b = (const lt_block_q8_0 *)row + k / LT_QK8_0;
        __m512 d = _mm512_set1_ps(_cvtsh_ss(b->d));
        __m128i q = _mm_loadu_si128((const __m128i *)(b->qs + k % LT_QK8_0));
        return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))); /* exact */
    }
    }
}

/* In-register transpose: on return r[j] lane i = old r[i] lane j. */
LT_INLINE void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4g + j]: rows 4g..4g+3, elements j, j+4, j+8, j+12 in its 128-bit lanes */
    for (int g = 0; g < 4; g++) {
        __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
        __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
        u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    for (int j = 0; j < 4; j++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
        __m512 v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
        __m512 v2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
        __m512 v3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
        r[j] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[j + 4] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(v0, v2, 0xdd);
        r[j + 12] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
    }
}

/* Packs nrows (<= 32) W rows starting at w (stride ld bytes), elements
 * [k0, k1), into dst[(k - k0) * 32 + r]; rows nrows..31 are zero. */
LT_INLINE void pack_panel(lt_dtype dt, bool SPLIT, int64_t nb, const char *w, size_t ld,
                          int64_t nrows, int64_t k0, int64_t k1, float *dst) {
    for (int64_t h = 0; h < NR; h += 16) {
        for (int64_t k = k0; k < k1; k += 16) {
            __m512 r[16];
            for (int64_t i = 0; i < 16; i++)
                r[i] = h + i < nrows ? load16(dt, SPLIT, nb, w + (size_t)(h + i) * ld, k)
                                     : _mm512_setzero_ps();
            transpose16(r);
            float *d = dst + (k - k0) * NR + h;
            for (int j = 0; j < 16; j++) _mm512_store_ps(d + j * NR, r[j]);
        }
    }
}

static void pack(const lt_tensor *W, const char *w, size_t ld, int64_t nrows, int64_t k0,
                 int64_t k1, float *dst) {
    switch (W->dtype) { /* one specialisation per dtype and layout */
    case LT_F32: pack_panel(LT_F32, false, 0, w, ld, nrows, k0, k1, dst); break;
    case LT_F16: pack_panel(LT_F16, false, 0, w, ld, nrows, k0, k1, dst); break;
    case LT_BF16: pack_panel(LT_BF16, false, 0, w, ld, nrows, k0, k1, dst); break;
    default:
        if (W->layout == LT_LAYOUT_Q8_SPLIT)
            pack_panel(LT_Q8_0, true, W->ne[0] / LT_QK8_0, w, ld, nrows, k0, k1, dst);
        else
            pack_panel(LT_Q8_0, false, 0, w, ld, nrows, k0, k1, dst);
        break;
    }
}

/* The micro-kernel (contract above): tokens x[0..M) (stride ldx floats) at
 * their k block, panel p [kc][32], C tile c (stride ldc floats). */
LT_INLINE void tile(int M, const float *x, size_t ldx, const float *p, int64_t kc, float *c,
                    size_t ldc, __mmask16 m0, __mmask16 m1, bool add) {
    __m512 a[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < M; i++) a[i][0] = a[i][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; k++) {
        __m512 w0 = _mm512_load_ps(p + k * NR), w1 = _mm512_load_ps(p + k * NR + 16);
#pragma GCC unroll 12
        for (int i = 0; i < M; i++) {
            __m512 b = _mm512_set1_ps(x[(size_t)i * ldx + (size_t)k]);
            a[i][0] = _mm512_fmadd_ps(w0, b, a[i][0]);
            a[i][1] = _mm512_fmadd_ps(w1, b, a[i][1]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < M; i++) {
        float *ci = c + (size_t)i * ldc;
        if (add) {
            a[i][0] = _mm512_add_ps(a[i][0], _mm512_maskz_loadu_ps(m0, ci));
            a[i][1] = _mm512_add_ps(a[i][1], _mm512_maskz_loadu_ps(m1, ci + 16));
        }
        _mm512_mask_storeu_ps(ci, m0, a[i][0]);
        _mm512_mask_storeu_ps(ci + 16, m1, a[i][1]);
    }
}

/* The masks of a panel of nr (<= 32) outputs: lanes 0..15 and 16..31. */
#define TILE_FN(M)                                                                           \
    static void tile_##M(const float *x, size_t ldx, const float *p, int64_t kc, float *c,   \
                         size_t ldc, int64_t nr, bool add) {                                 \
        __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);                      \
        __mmask16 m1 = nr >= NR ? 0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;  \
        tile(M, x, ldx, p, kc, c, ldc, m0, m1, add);                                         \
    }
TILE_FN(1) TILE_FN(2) TILE_FN(3) TILE_FN(4) TILE_FN(5) TILE_FN(6)
TILE_FN(7) TILE_FN(8) TILE_FN(9) TILE_FN(10) TILE_FN(11) TILE_FN(12)
static const lt__mm_tile_fn tiles[MR + 1] = {NULL,     tile_1, tile_2, tile_3,  tile_4,  tile_5, tile_6,
                                      tile_7,   tile_8, tile_9, tile_10, tile_11, tile_12};

void lt__matmul_avx512(const lt_call *call, const lt_step *step, int ith, int nth) {
    (void)step;
    lt__matmul_drive(call, ith, nth, NR, MR, pack, tiles);
}
