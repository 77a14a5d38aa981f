/* ADD / SWIGLU / softmax primitives and copy with AVX2 + FMA (contract in
 * ops_internal.h). Tails use masked loads and stores, never touching memory
 * past n. */
#include "kernels/ops_internal.h"

#include <immintrin.h>
#include <math.h>

static void add_avx2(float *y, const float *a, const float *b, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    if (i < n) {
        __m256i m = lt__tail_mask_avx2(n - i);
        __m256 v = _mm256_add_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m));
        _mm256_maskstore_ps(y + i, m, v);
    }
}

static inline __m256 swiglu8(__m256 g, __m256 u) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = lt__exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
    __m256 sig = _mm256_div_ps(one, _mm256_add_ps(one, e));
    return _mm256_mul_ps(_mm256_mul_ps(g, sig), u);
}

static void swiglu_avx2(float *y, const float *a, const float *b, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, swiglu8(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    if (i < n) {
        __m256i m = lt__tail_mask_avx2(n - i);
        __m256 v = swiglu8(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m));
        _mm256_maskstore_ps(y + i, m, v);
    }
}

static float max_avx2(const float *x, int64_t n) {
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + i));
    if (i < n) {
        __m256i m = lt__tail_mask_avx2(n - i);
        __m256 v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(x + i, m),
                                    _mm256_castsi256_ps(m));
        mx = _mm256_max_ps(mx, v);
    }
    return lt__hmax_avx2(mx);
}

static float exp_sum_avx2(float *x, int64_t n, float mval) {
    const __m256 vm = _mm256_set1_ps(mval);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 e0 = lt__exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        __m256 e1 = lt__exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
        _mm256_storeu_ps(x + i, e0);
        _mm256_storeu_ps(x + i + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    for (; i < n; i += 8) {
        __m256i m = lt__tail_mask_avx2(n - i);
        __m256 e = lt__exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m)); /* lanes past n add nothing */
        _mm256_maskstore_ps(x + i, m, e);
        s0 = _mm256_add_ps(s0, e);
    }
    return lt__hsum_avx2(_mm256_add_ps(s0, s1));
}

static void scale_avx2(float *x, float c, int64_t n) {
    const __m256 vc = _mm256_set1_ps(c);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vc));
    if (i < n) {
        __m256i m = lt__tail_mask_avx2(n - i);
        _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), vc));
    }
}

static void copy_avx2(float *y, const float *a, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_loadu_ps(a + i));
    if (i < n) {
        __m256i m = lt__tail_mask_avx2(n - i);
        _mm256_maskstore_ps(y + i, m, _mm256_maskload_ps(a + i, m));
    }
}

const lt__act_ops lt__act_avx2 = {add_avx2, swiglu_avx2, max_avx2, exp_sum_avx2, scale_avx2,
                                  copy_avx2};
