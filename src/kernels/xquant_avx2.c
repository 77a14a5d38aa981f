/* The activation quantisers of qdot.h on AVX2: the K-quants' (lt__xqk
 * blocks, lt__xqk_quant's bytes) and the legacy types' and interleaved
 * q8_0's (lt__xq32, lt__xq32_quant's bytes), 8 elements a step. The largest magnitude is an
 * exact max, its first element a compare; the levels are vcvtps2dq of
 * iscale x, which rounds to nearest even as lrintf does in the default
 * rounding mode (|iscale x| <= 127: the clamp never changes a level, kept
 * for the definition's sake); each 32 elements (a quarter, contiguous in
 * qs's paired order) go out as one 32-byte store, their two 16-element sums
 * as bsums. On a prefill of Q4_K_M the portable quantiser took 7 % of the
 * time; the fleet's binary compiles it for the baseline ISA. */
#include "kernels/qdot.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

/* the sum of the 8 int32 lanes of v */
static inline int32_t hsum8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* the largest of the 8 lanes of m (exact) */
static inline float hmax8(__m256 m) {
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
}

/* 32 levels (r[0] elements 0 .. 7, ...) as int8 in element order */
static inline __m256i pack32(const __m256i r[4]) {
    /* dwords of _mm256_packs_epi16(packs(r0, r1), packs(r2, r3)) back in element order */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    return _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3])), order);
}

void lt__xqk_quant_avx2(const float *x, int64_t n, void *out) {
    lt__xqk *y = out;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 big = _mm256_set1_ps(FLT_MAX);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    for (int64_t b = 0; b < n / LT_QK_K; b++) {
        const float *xb = x + LT_QK_K * b;
        __m256 m = _mm256_setzero_ps();
        int bad = 0;
        for (int j = 0; j < LT_QK_K; j += 8) {
            const __m256 a = _mm256_and_ps(_mm256_loadu_ps(xb + j), absmask);
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_NLE_UQ)); /* NaN, infinity */
            m = _mm256_max_ps(m, a);
        }
        const float amax = hmax8(m);
        int first = 0;
        for (int j = 0; !bad && j < LT_QK_K; j += 8) {
            const __m256 a = _mm256_and_ps(_mm256_loadu_ps(xb + j), absmask);
            const int eq = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (eq) {
                first = j + __builtin_ctz((unsigned)eq);
                break;
            }
        }
        const float iscale = -127.0f / (bad ? 0.0f : xb[first]);
        if (bad || !(fabsf(iscale) <= FLT_MAX)) {
            y[b].d = bad ? NAN : 0.0f;
            memset(y[b].qs, 0, sizeof y[b].qs);
            memset(y[b].bsums, 0, sizeof y[b].bsums);
            continue;
        }
        const __m256 iv = _mm256_set1_ps(iscale);
        for (int q = 0; q < LT_QK_K / 32; q++) {
            __m256i r[4];
            for (int i = 0; i < 4; i++) {
                const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xb + 32 * q + 8 * i), iv);
                r[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(v), lo), hi);
            }
            _mm256_storeu_si256((__m256i *)(y[b].qs + lt__xqk_pos(32 * q)), pack32(r));
            y[b].bsums[2 * q] = (int16_t)hsum8(_mm256_add_epi32(r[0], r[1]));
            y[b].bsums[2 * q + 1] = (int16_t)hsum8(_mm256_add_epi32(r[2], r[3]));
        }
        y[b].d = 1.0f / iscale;
    }
}

void lt__xq32_quant_avx2(const float *x, int64_t n, void *out) {
    lt__xq32 *y = out;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 big = _mm256_set1_ps(FLT_MAX);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b;
        __m256 v[4], m = _mm256_setzero_ps();
        int bad = 0;
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(xb + 8 * i);
            const __m256 a = _mm256_and_ps(v[i], absmask);
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_NLE_UQ)); /* NaN, infinity */
            m = _mm256_max_ps(m, a);
        }
        const float amax = hmax8(m);
        const float inv = 127.0f / amax;
        if (bad || !(inv <= FLT_MAX)) { /* NaN / infinity, or zero (or nearly) */
            y[b].d = bad ? NAN : 0.0f;
            memset(y[b].qs, 0, sizeof y[b].qs);
            y[b].off = 0;
            continue;
        }
        y[b].d = amax / 127.0f;
        const __m256 iv = _mm256_set1_ps(inv);
        __m256i r[4];
        for (int i = 0; i < 4; i++)
            r[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[i], iv)),
                                                     lo), hi);
        _mm256_storeu_si256((__m256i *)y[b].qs, pack32(r));
        y[b].off = -8 * hsum8(_mm256_add_epi32(_mm256_add_epi32(r[0], r[1]),
                                               _mm256_add_epi32(r[2], r[3])));
    }
}
