/* ATTENTION block primitives with AVX2 + FMA (contract in ops_internal.h). */
#include "kernels/ops_internal.h"

#include <immintrin.h>

/* Four keys at a time so the four dot products run in parallel; head_dim is
 * walked in 8-float chunks, the last one masked. */
static void scores_avx2(float *s, const float *q, const float *k, size_t kstride, int64_t nk,
                        int64_t hd) {
    int64_t j = 0;
    for (; j + 4 <= nk; j += 4) {
        const float *k0 = k + (size_t)j * kstride, *k1 = k0 + kstride;
        const float *k2 = k1 + kstride, *k3 = k2 + kstride;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        for (int64_t i = 0; i < hd; i += 8) {
            __m256i m = lt__tail_mask_avx2(hd - i);
            __m256 qv = _mm256_maskload_ps(q + i, m);
            a0 = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k0 + i, m), a0);
            a1 = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k1 + i, m), a1);
            a2 = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k2 + i, m), a2);
            a3 = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k3 + i, m), a3);
        }
        s[j] = lt__hsum_avx2(a0);
        s[j + 1] = lt__hsum_avx2(a1);
        s[j + 2] = lt__hsum_avx2(a2);
        s[j + 3] = lt__hsum_avx2(a3);
    }
    for (; j < nk; j++) {
        const float *kj = k + (size_t)j * kstride;
        __m256 a = _mm256_setzero_ps();
        for (int64_t i = 0; i < hd; i += 8) {
            __m256i m = lt__tail_mask_avx2(hd - i);
            a = _mm256_fmadd_ps(_mm256_maskload_ps(q + i, m), _mm256_maskload_ps(kj + i, m), a);
        }
        s[j] = lt__hsum_avx2(a);
    }
}

/* acc stays in registers over the block: 32 floats (four vectors) at a time,
 * then single vectors (the last masked) for the rest of head_dim. */
static void accum_avx2(float *acc, const float *s, const float *v, size_t vstride, int64_t nk,
                       int64_t hd) {
    int64_t i = 0;
    for (; i + 32 <= hd; i += 32) {
        __m256 a0 = _mm256_loadu_ps(acc + i), a1 = _mm256_loadu_ps(acc + i + 8);
        __m256 a2 = _mm256_loadu_ps(acc + i + 16), a3 = _mm256_loadu_ps(acc + i + 24);
        for (int64_t j = 0; j < nk; j++) {
            const float *vj = v + (size_t)j * vstride + i;
            __m256 w = _mm256_set1_ps(s[j]);
            a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj), a0);
            a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 8), a1);
            a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 16), a2);
            a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 24), a3);
        }
        _mm256_storeu_ps(acc + i, a0);
        _mm256_storeu_ps(acc + i + 8, a1);
        _mm256_storeu_ps(acc + i + 16, a2);
        _mm256_storeu_ps(acc + i + 24, a3);
    }
    for (; i < hd; i += 8) {
        __m256i m = lt__tail_mask_avx2(hd - i);
        __m256 a = _mm256_maskload_ps(acc + i, m);
        for (int64_t j = 0; j < nk; j++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(s[j]),
                                _mm256_maskload_ps(v + (size_t)j * vstride + i, m), a);
        _mm256_maskstore_ps(acc + i, m, a);
    }
}

const lt__attn_ops lt__attn_avx2 = {scores_avx2, accum_avx2};
