/* ADD / SWIGLU / softmax primitives and copy with AVX-512F (contract in
 * ops_internal.h). Tails use masked loads and stores, never touching memory
 * past n. */
#include "kernels/ops_internal.h"

#include <immintrin.h>
#include <math.h>

static void add_avx512(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i),
                                                      _mm512_maskz_loadu_ps(m, b + i)));
    }
}

static void swiglu_avx512(float *y, const float *a, const float *b, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(n - i);
        __m512 g = _mm512_maskz_loadu_ps(m, a + i), u = _mm512_maskz_loadu_ps(m, b + i);
        __m512 e = lt__exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
        __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_mul_ps(g, sig), u));
    }
}

static float max_avx512(const float *x, int64_t n) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 mx = ninf;
    for (int64_t i = 0; i < n; i += 16)
        mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(ninf, lt__tail_mask_avx512(n - i), x + i));
    return _mm512_reduce_max_ps(mx);
}

static float exp_sum_avx512(float *x, int64_t n, float mval) {
    const __m512 vm = _mm512_set1_ps(mval);
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 e0 = lt__exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        __m512 e1 = lt__exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vm));
        _mm512_storeu_ps(x + i, e0);
        _mm512_storeu_ps(x + i + 16, e1);
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(n - i);
        __m512 e = lt__exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm));
        _mm512_mask_storeu_ps(x + i, m, e);
        s0 = _mm512_mask_add_ps(s0, m, s0, e); /* lanes past n add nothing */
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static void scale_avx512(float *x, float c, int64_t n) {
    const __m512 vc = _mm512_set1_ps(c);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(n - i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vc));
    }
}

static void copy_avx512(float *y, const float *a, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lt__tail_mask_avx512(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_maskz_loadu_ps(m, a + i));
    }
}

const lt__act_ops lt__act_avx512 = {add_avx512, swiglu_avx512, max_avx512, exp_sum_avx512,
                                    scale_avx512, copy_avx512};
