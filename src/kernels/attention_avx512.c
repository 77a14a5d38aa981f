/* ATTENTION block primitives with AVX-512F (contract in ops_internal.h). */
#include "kernels/ops_internal.h"

#include <immintrin.h>

/* Four keys at a time so the four dot products run in parallel; head_dim
 * is walked in masked 16-float chunks. */
static void scores_avx512(float *s, const float *q, const float *k, size_t kstride, int64_t nk,
                          int64_t hd) {
    int64_t j = 0;
    for (; j + 4 <= nk; j += 4) {
        const float *k0 = k + (size_t)j * kstride, *k1 = k0 + kstride;
        const float *k2 = k1 + kstride, *k3 = k2 + kstride;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
        for (int64_t i = 0; i < hd; i += 16) {
            __mmask16 m = lt__tail_mask_avx512(hd - i);
            __m512 qv = _mm512_maskz_loadu_ps(m, q + i);
            a0 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k0 + i), a0);
            a1 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k1 + i), a1);
            a2 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k2 + i), a2);
            a3 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k3 + i), a3);
        }
        s[j] = _mm512_reduce_add_ps(a0);
        s[j + 1] = _mm512_reduce_add_ps(a1);
        s[j + 2] = _mm512_reduce_add_ps(a2);
        s[j + 3] = _mm512_reduce_add_ps(a3);
    }
    for (; j < nk; j++) {
        const float *kj = k + (size_t)j * kstride;
        __m512 a = _mm512_setzero_ps();
        for (int64_t i = 0; i < hd; i += 16) {
            __mmask16 m = lt__tail_mask_avx512(hd - i);
            a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), _mm512_maskz_loadu_ps(m, kj + i),
                                a);
        }
        s[j] = _mm512_reduce_add_ps(a);
    }
}

/* acc stays in registers over the block: 64 floats (four vectors) at a time,
 * then single masked vectors for the rest of head_dim. */
static void accum_avx512(float *acc, const float *s, const float *v, size_t vstride, int64_t nk,
                         int64_t hd) {
    int64_t i = 0;
    for (; i + 64 <= hd; i += 64) {
        __m512 a0 = _mm512_loadu_ps(acc + i), a1 = _mm512_loadu_ps(acc + i + 16);
        __m512 a2 = _mm512_loadu_ps(acc + i + 32), a3 = _mm512_loadu_ps(acc + i + 48);
        for (int64_t j = 0; j < nk; j++) {
            const float *vj = v + (size_t)j * vstride + i;
            __m512 w = _mm512_set1_ps(s[j]);
            a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vj), a0);
            a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vj + 16), a1);
            a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vj + 32), a2);
            a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vj + 48), a3);
        }
        _mm512_storeu_ps(acc + i, a0);
        _mm512_storeu_ps(acc + i + 16, a1);
        _mm512_storeu_ps(acc + i + 32, a2);
        _mm512_storeu_ps(acc + i + 48, a3);
    }
    for (; i < hd; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(hd - i);
        __m512 a = _mm512_maskz_loadu_ps(m, acc + i);
        for (int64_t j = 0; j < nk; j++)
            a = _mm512_fmadd_ps(_mm512_set1_ps(s[j]),
                                _mm512_maskz_loadu_ps(m, v + (size_t)j * vstride + i), a);
        _mm512_mask_storeu_ps(acc + i, m, a);
    }
}

const lt__attn_ops lt__attn_avx512 = {scores_avx512, accum_avx512};
