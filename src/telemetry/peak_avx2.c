/* The f32 FMA throughput loop with AVX2: ten independent chains of 8-lane
 * FMAs. */
#include <immintrin.h>

#include "telemetry/peak.h"

float lt__peak_fma_avx2(uint64_t iters) {
    const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
    __m256 a[10];
    for (int k = 0; k < 10; k++) a[k] = _mm256_set1_ps(1.0f + 0.1f * (float)k);
    for (uint64_t i = 0; i < iters; i++) {
        a[0] = _mm256_fmadd_ps(a[0], m, c);
        a[1] = _mm256_fmadd_ps(a[1], m, c);
        a[2] = _mm256_fmadd_ps(a[2], m, c);
        a[3] = _mm256_fmadd_ps(a[3], m, c);
        a[4] = _mm256_fmadd_ps(a[4], m, c);
        a[5] = _mm256_fmadd_ps(a[5], m, c);
        a[6] = _mm256_fmadd_ps(a[6], m, c);
        a[7] = _mm256_fmadd_ps(a[7], m, c);
        a[8] = _mm256_fmadd_ps(a[8], m, c);
        a[9] = _mm256_fmadd_ps(a[9], m, c);
    }
    __m256 s = a[0];
    for (int k = 1; k < 10; k++) s = _mm256_add_ps(s, a[k]);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}
