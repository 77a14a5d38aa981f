/* ROPE rotations (NORM and NEOX pairs) with AVX2 + FMA (contract in ops_internal.h). */
#include "kernels/ops_internal.h"

#include <immintrin.h>

/* x*c + swap_pairs(x)*s, 8 floats (4 pairs) at a time; n is even. */
static void rotate_avx2(float *x, const float *c, const float *s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 sw = _mm256_permute_ps(v, 0xB1); /* lanes 1,0,3,2 per 128 bits */
        _mm256_storeu_ps(x + i, _mm256_fmadd_ps(v, _mm256_loadu_ps(c + i),
                                                _mm256_mul_ps(sw, _mm256_loadu_ps(s + i))));
    }
    if (i < n) {
        __m256i m = lt__tail_mask_avx2(n - i);
        __m256 v = _mm256_maskload_ps(x + i, m);
        __m256 sw = _mm256_permute_ps(v, 0xB1);
        __m256 r = _mm256_fmadd_ps(v, _mm256_maskload_ps(c + i, m),
                                   _mm256_mul_ps(sw, _mm256_maskload_ps(s + i, m)));
        _mm256_maskstore_ps(x + i, m, r);
    }
}

/* The NEOX rotation: the first half of the head against the second, 8
 * pairs at a time; h = n/2 need not be a multiple of 8. */
static void rotate_neox_avx2(float *x, const float *c, const float *s, int64_t n) {
    const int64_t h = n / 2;
    for (int64_t i = 0; i < h; i += 8) {
        __m256i m = lt__tail_mask_avx2(h - i);
        __m256 a = _mm256_maskload_ps(x + i, m), b = _mm256_maskload_ps(x + h + i, m);
        __m256 ra = _mm256_fmadd_ps(a, _mm256_maskload_ps(c + i, m),
                                    _mm256_mul_ps(b, _mm256_maskload_ps(s + i, m)));
        __m256 rb = _mm256_fmadd_ps(b, _mm256_maskload_ps(c + h + i, m),
                                    _mm256_mul_ps(a, _mm256_maskload_ps(s + h + i, m)));
        _mm256_maskstore_ps(x + i, m, ra);
        _mm256_maskstore_ps(x + h + i, m, rb);
    }
}

const lt__rope_ops lt__rope_avx2 = {rotate_avx2, rotate_neox_avx2};
