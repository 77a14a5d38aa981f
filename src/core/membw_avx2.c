/* AVX2 memory-bandwidth kernels: triad and the read-only scan. */
#include "core/membw_internal.h"

#include <immintrin.h>

void lt__membw_triad_avx2(double *a, const double *b, const double *c, double s, size_t n) {
    const __m256d vs = _mm256_set1_pd(s);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) { /* 2 lines per array per iteration */
        __m256d c0 = _mm256_loadu_pd(c + i), c1 = _mm256_loadu_pd(c + i + 4);
        __m256d c2 = _mm256_loadu_pd(c + i + 8), c3 = _mm256_loadu_pd(c + i + 12);
        _mm256_storeu_pd(a + i, _mm256_fmadd_pd(vs, c0, _mm256_loadu_pd(b + i)));
        _mm256_storeu_pd(a + i + 4, _mm256_fmadd_pd(vs, c1, _mm256_loadu_pd(b + i + 4)));
        _mm256_storeu_pd(a + i + 8, _mm256_fmadd_pd(vs, c2, _mm256_loadu_pd(b + i + 8)));
        _mm256_storeu_pd(a + i + 12, _mm256_fmadd_pd(vs, c3, _mm256_loadu_pd(b + i + 12)));
    }
    for (; i < n; i++) a[i] = b[i] + s * c[i];
}

double lt__membw_read_avx2(const double *x, size_t n) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_add_pd(s0, _mm256_loadu_pd(x + i));
        s1 = _mm256_add_pd(s1, _mm256_loadu_pd(x + i + 4));
        s2 = _mm256_add_pd(s2, _mm256_loadu_pd(x + i + 8));
        s3 = _mm256_add_pd(s3, _mm256_loadu_pd(x + i + 12));
        s4 = _mm256_add_pd(s4, _mm256_loadu_pd(x + i + 16));
        s5 = _mm256_add_pd(s5, _mm256_loadu_pd(x + i + 20));
        s6 = _mm256_add_pd(s6, _mm256_loadu_pd(x + i + 24));
        s7 = _mm256_add_pd(s7, _mm256_loadu_pd(x + i + 28));
    }
    for (; i + 4 <= n; i += 4) s0 = _mm256_add_pd(s0, _mm256_loadu_pd(x + i));
    double tail = 0.0;
    for (; i < n; i++) tail += x[i];
    s0 = _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3));
    s4 = _mm256_add_pd(_mm256_add_pd(s4, s5), _mm256_add_pd(s6, s7));
    s0 = _mm256_add_pd(s0, s4);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s0), _mm256_extractf128_pd(s0, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h))) + tail;
}
