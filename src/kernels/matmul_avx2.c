/* matmul, AVX2+FMA+F16C path: the same packed, blocked GEMM as the AVX-512
 * path (see matmul_avx512.c) with NR = 16 rows per panel and MR = 6 tokens
 * per micro-kernel tile (12 ymm accumulators). Panels are packed by
 * dequantising 8 weights at a time in registers and scattering them into the
 * [k][16] layout. Partial panels (outputs past the end) go through a local
 * tile. Each output's sum is a chain of FMAs in increasing k within a k
 * block, the block sums added to Y in increasing k. */
#include "kernels/linear.h"

#include <immintrin.h>
#include <stdalign.h>

#define LT_INLINE static inline __attribute__((always_inline))
#define MR 6
#define NR 16

/* Weights k..k+7 of a row as f32 (k a multiple of 8). */
LT_INLINE __m256 load8(lt_dtype dt, const char *row, int64_t k) {
    switch (dt) {
    case LT_F32: return _mm256_loadu_ps((const float *)row + k);
    case LT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * k)));
    case LT_BF16: {
        __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * k)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
    default: {
        const lt_block_q8_0 *b = (const lt_block_q8_0 *)row + k / LT_QK8_0;
        __m256 d = _mm256_set1_ps(_cvtsh_ss(b->d));
        __m128i q = _mm_loadl_epi64((const __m128i *)(b->qs + k % LT_QK8_0));
        return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))); /* exact */
    }
    }
}

/* Packs nrows (<= 16) W rows starting at w (stride ld bytes), elements
 * [k0, k1), into dst[(k - k0) * 16 + r]; rows nrows..15 are zero. */
LT_INLINE void pack_panel(lt_dtype dt, const char *w, size_t ld, int64_t nrows, int64_t k0,
                          int64_t k1, float *dst) {
    const int64_t kc = k1 - k0;
    for (int64_t r = 0; r < NR; r++) {
        if (r >= nrows) {
            for (int64_t k = 0; k < kc; k++) dst[k * NR + r] = 0.0f;
            continue;
        }
        const char *row = w + (size_t)r * ld;
        for (int64_t k = k0; k < k1; k += 8) {
            alignas(32) float v[8];
            _mm256_store_ps(v, load8(dt, row, k));
            float *d = dst + (k - k0) * NR + r;
            for (int j = 0; j < 8; j++) d[j * NR] = v[j];
        }
    }
}

static void pack(const lt_tensor *W, const char *w, size_t ld, int64_t nrows, int64_t k0,
                 int64_t k1, float *dst) {
    if (W->layout == LT_LAYOUT_Q8_SPLIT) { /* only made where AVX-512 runs */
        lt__mm_pack_q8_split(W, w, ld, nrows, NR, k0, k1, dst);
        return;
    }
    switch (W->dtype) { /* one specialisation per dtype */
    case LT_F32: pack_panel(LT_F32, w, ld, nrows, k0, k1, dst); break;
    case LT_F16: pack_panel(LT_F16, w, ld, nrows, k0, k1, dst); break;
    case LT_BF16: pack_panel(LT_BF16, w, ld, nrows, k0, k1, dst); break;
    default: pack_panel(LT_Q8_0, w, ld, nrows, k0, k1, dst); break;
    }
}

/* The micro-kernel: tokens x[0..M) (stride ldx floats) at their k block,
 * panel p [kc][16]; the first nr outputs of each token's tile go to c
 * (stride ldc floats), stored or (add) added. */
LT_INLINE void tile(int M, const float *x, size_t ldx, const float *p, int64_t kc, float *c,
                    size_t ldc, int64_t nr, bool add) {
    __m256 a[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < M; i++) a[i][0] = a[i][1] = _mm256_setzero_ps();
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; k++) {
        __m256 w0 = _mm256_load_ps(p + k * NR), w1 = _mm256_load_ps(p + k * NR + 8);
#pragma GCC unroll 6
        for (int i = 0; i < M; i++) {
            __m256 b = _mm256_broadcast_ss(x + (size_t)i * ldx + (size_t)k);
            a[i][0] = _mm256_fmadd_ps(w0, b, a[i][0]);
            a[i][1] = _mm256_fmadd_ps(w1, b, a[i][1]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < M; i++) {
        float *ci = c + (size_t)i * ldc;
        if (nr == NR) {
            if (add) {
                a[i][0] = _mm256_add_ps(a[i][0], _mm256_loadu_ps(ci));
                a[i][1] = _mm256_add_ps(a[i][1], _mm256_loadu_ps(ci + 8));
            }
            _mm256_storeu_ps(ci, a[i][0]);
            _mm256_storeu_ps(ci + 8, a[i][1]);
        } else {
            alignas(32) float t[NR];
            _mm256_store_ps(t, a[i][0]);
            _mm256_store_ps(t + 8, a[i][1]);
            for (int64_t j = 0; j < nr; j++) ci[j] = add ? ci[j] + t[j] : t[j];
        }
    }
}

#define TILE_FN(M)                                                                           \
    static void tile_##M(const float *x, size_t ldx, const float *p, int64_t kc, float *c,   \
                         size_t ldc, int64_t nr, bool add) {                                 \
        tile(M, x, ldx, p, kc, c, ldc, nr, add);                                             \
    }
TILE_FN(1) TILE_FN(2) TILE_FN(3) TILE_FN(4) TILE_FN(5) TILE_FN(6)
static const lt__mm_tile_fn tiles[MR + 1] = {NULL, tile_1, tile_2, tile_3, tile_4, tile_5, tile_6};

void lt__matmul_avx2(const lt_call *call, const lt_step *step, int ith, int nth) {
    (void)step;
    lt__matmul_drive(call, ith, nth, NR, MR, pack, tiles);
}
