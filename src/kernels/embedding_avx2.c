/* EMBED row conversion with AVX2 + F16C (contract in ops_internal.h). */
#include "kernels/ops_internal.h"

#include <immintrin.h>

static void f16_avx2(float *y, const uint16_t *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = lt_f16_to_f32(x[i]);
}

static void bf16_avx2(float *y, const uint16_t *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) y[i] = lt_bf16_to_f32(x[i]);
}

static void q8_0_avx2(float *y, const lt_block_q8_0 *x, int64_t n) {
    for (int64_t b = 0; b < n / LT_QK8_0; b++) {
        const __m256 d = _mm256_set1_ps(lt_f16_to_f32(x[b].d));
        for (int k = 0; k < LT_QK8_0; k += 8) {
            __m128i q = _mm_loadl_epi64((const __m128i *)(x[b].qs + k));
            __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
            _mm256_storeu_ps(y + b * LT_QK8_0 + k, _mm256_mul_ps(d, v));
        }
    }
}

const lt__embed_ops lt__embed_avx2 = {f16_avx2, bf16_avx2, q8_0_avx2};
