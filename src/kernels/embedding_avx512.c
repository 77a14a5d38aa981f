/* EMBED row conversion with AVX-512F/BW (contract in ops_internal.h). */
#include "kernels/ops_internal.h"

#include <immintrin.h>

static void f16_avx512(float *y, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(n - i);
        __m256i h = _mm256_maskz_loadu_epi16(m, x + i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(h));
    }
}

static void bf16_avx512(float *y, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(n - i);
        __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i));
        _mm512_mask_storeu_ps(y + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
}

static void q8_0_avx512(float *y, const lt_block_q8_0 *x, int64_t n) {
    for (int64_t b = 0; b < n / LT_QK8_0; b++) {
        const __m512 d = _mm512_set1_ps(lt_f16_to_f32(x[b].d));
        __m128i q0 = _mm_loadu_si128((const __m128i *)x[b].qs);
        __m128i q1 = _mm_loadu_si128((const __m128i *)(x[b].qs + 16));
        __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0));
        __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1));
        _mm512_storeu_ps(y + b * LT_QK8_0, _mm512_mul_ps(d, lo));
        _mm512_storeu_ps(y + b * LT_QK8_0 + 16, _mm512_mul_ps(d, hi));
    }
}

const lt__embed_ops lt__embed_avx512 = {f16_avx512, bf16_avx512, q8_0_avx512};
