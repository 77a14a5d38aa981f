/* ROPE rotations (NORM and NEOX pairs) with AVX-512F (contract in ops_internal.h). */
#include "kernels/ops_internal.h"

#include <immintrin.h>

/* x*c + swap_pairs(x)*s, 16 floats (8 pairs) at a time; n is even, so a
 * masked tail never splits a pair. */
static void rotate_avx512(float *x, const float *c, const float *s, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 sw = _mm512_permute_ps(v, 0xB1); /* lanes 1,0,3,2 per 128 bits */
        __m512 r = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(m, c + i),
                                   _mm512_mul_ps(sw, _mm512_maskz_loadu_ps(m, s + i)));
        _mm512_mask_storeu_ps(x + i, m, r);
    }
}

/* The NEOX rotation: the first half of the head against the second, 16
 * pairs at a time (masked when h = n/2 is not a multiple of 16). */
static void rotate_neox_avx512(float *x, const float *c, const float *s, int64_t n) {
    const int64_t h = n / 2;
    for (int64_t i = 0; i < h; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(h - i);
        __m512 a = _mm512_maskz_loadu_ps(m, x + i), b = _mm512_maskz_loadu_ps(m, x + h + i);
        __m512 ra = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m, c + i),
                                    _mm512_mul_ps(b, _mm512_maskz_loadu_ps(m, s + i)));
        __m512 rb = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m, c + h + i),
                                    _mm512_mul_ps(a, _mm512_maskz_loadu_ps(m, s + h + i)));
        _mm512_mask_storeu_ps(x + i, m, ra);
        _mm512_mask_storeu_ps(x + h + i, m, rb);
    }
}

const lt__rope_ops lt__rope_avx512 = {rotate_avx512, rotate_neox_avx512};
