/* RMSNORM primitives with AVX2 + FMA (contract in ops_internal.h). */
#include "kernels/ops_internal.h"

#include <immintrin.h>

static float sumsq_avx2(const float *x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
        a2 = _mm256_fmadd_ps(v2, v2, a2);
        a3 = _mm256_fmadd_ps(v3, v3, a3);
    }
    for (; i < n; i += 8) {
        __m256 v = _mm256_maskload_ps(x + i, lt__tail_mask_avx2(n - i));
        a0 = _mm256_fmadd_ps(v, v, a0);
    }
    return lt__hsum_avx2(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

static void scale_mul_avx2(float *y, const float *x, const float *w, float r, int64_t n) {
    const __m256 vr = _mm256_set1_ps(r);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(w + i),
                                              _mm256_mul_ps(vr, _mm256_loadu_ps(x + i))));
    if (i < n) {
        __m256i m = lt__tail_mask_avx2(n - i);
        __m256 v = _mm256_mul_ps(_mm256_maskload_ps(w + i, m),
                                 _mm256_mul_ps(vr, _mm256_maskload_ps(x + i, m)));
        _mm256_maskstore_ps(y + i, m, v);
    }
}

const lt__norm_ops lt__norm_avx2 = {sumsq_avx2, scale_mul_avx2};
