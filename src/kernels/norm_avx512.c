/* RMSNORM primitives with AVX-512F (contract in ops_internal.h). */
#include "kernels/ops_internal.h"

#include <immintrin.h>

static float sumsq_avx512(const float *x, int64_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
        __m512 v2 = _mm512_loadu_ps(x + i + 32), v3 = _mm512_loadu_ps(x + i + 48);
        a0 = _mm512_fmadd_ps(v0, v0, a0);
        a1 = _mm512_fmadd_ps(v1, v1, a1);
        a2 = _mm512_fmadd_ps(v2, v2, a2);
        a3 = _mm512_fmadd_ps(v3, v3, a3);
    }
    for (; i < n; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(lt__tail_mask_avx512(n - i), x + i);
        a0 = _mm512_fmadd_ps(v, v, a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

static void scale_mul_avx512(float *y, const float *x, const float *w, float r, int64_t n) {
    const __m512 vr = _mm512_set1_ps(r);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i),
                                 _mm512_mul_ps(vr, _mm512_maskz_loadu_ps(m, x + i)));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

const lt__norm_ops lt__norm_avx512 = {sumsq_avx512, scale_mul_avx512};
