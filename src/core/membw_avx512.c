/* AVX-512 memory-bandwidth kernels: triad and the read-only scan. */
#include "core/membw_internal.h"

#include <immintrin.h>

void lt__membw_triad_avx512(double *a, const double *b, const double *c, double s, size_t n) {
    const __m512d vs = _mm512_set1_pd(s);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) { /* 4 lines per array per iteration */
        __m512d c0 = _mm512_loadu_pd(c + i), c1 = _mm512_loadu_pd(c + i + 8);
        __m512d c2 = _mm512_loadu_pd(c + i + 16), c3 = _mm512_loadu_pd(c + i + 24);
        _mm512_storeu_pd(a + i, _mm512_fmadd_pd(vs, c0, _mm512_loadu_pd(b + i)));
        _mm512_storeu_pd(a + i + 8, _mm512_fmadd_pd(vs, c1, _mm512_loadu_pd(b + i + 8)));
        _mm512_storeu_pd(a + i + 16, _mm512_fmadd_pd(vs, c2, _mm512_loadu_pd(b + i + 16)));
        _mm512_storeu_pd(a + i + 24, _mm512_fmadd_pd(vs, c3, _mm512_loadu_pd(b + i + 24)));
    }
    for (; i + 8 <= n; i += 8)
        _mm512_storeu_pd(a + i, _mm512_fmadd_pd(vs, _mm512_loadu_pd(c + i), _mm512_loadu_pd(b + i)));
    if (i < n) {
        __mmask8 m = (__mmask8)((1u << (n - i)) - 1);
        __m512d r = _mm512_fmadd_pd(vs, _mm512_maskz_loadu_pd(m, c + i), _mm512_maskz_loadu_pd(m, b + i));
        _mm512_mask_storeu_pd(a + i, m, r);
    }
}

double lt__membw_read_avx512(const double *x, size_t n) {
    /* 8 independent accumulators: 8 lines in flight per iteration, and the
     * add latency never limits the loads. */
    __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_add_pd(s0, _mm512_loadu_pd(x + i));
        s1 = _mm512_add_pd(s1, _mm512_loadu_pd(x + i + 8));
        s2 = _mm512_add_pd(s2, _mm512_loadu_pd(x + i + 16));
        s3 = _mm512_add_pd(s3, _mm512_loadu_pd(x + i + 24));
        s4 = _mm512_add_pd(s4, _mm512_loadu_pd(x + i + 32));
        s5 = _mm512_add_pd(s5, _mm512_loadu_pd(x + i + 40));
        s6 = _mm512_add_pd(s6, _mm512_loadu_pd(x + i + 48));
        s7 = _mm512_add_pd(s7, _mm512_loadu_pd(x + i + 56));
    }
    for (; i + 8 <= n; i += 8) s0 = _mm512_add_pd(s0, _mm512_loadu_pd(x + i));
    if (i < n) s1 = _mm512_add_pd(s1, _mm512_maskz_loadu_pd((__mmask8)((1u << (n - i)) - 1), x + i));
    s0 = _mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3));
    s4 = _mm512_add_pd(_mm512_add_pd(s4, s5), _mm512_add_pd(s6, s7));
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s4));
}
