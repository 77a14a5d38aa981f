/* What the x86 vector dots of qdot.h (qdot_avx2.c, qdot_avx512.c) share:
 * 256-bit pieces both files' flags allow (AVX2, F16C). Internal to those
 * two files. */
#ifndef LT_KERNELS_QDOT_X86_H
#define LT_KERNELS_QDOT_X86_H

#include <immintrin.h>

#include "kernels/qdot.h"

static inline int32_t lt__hsum8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static inline float lt__half(uint16_t h) { return _cvtsh_ss(h); }

/* q4_k / q5_k group j (of 4): its 32 quant bytes q give sub-block 2j (low
 * nibbles) and 2j + 1 (high nibbles); q5_k's fifth bits are bits 2j and
 * 2j + 1 of the 32 bytes of qh (h; with_h false for q4_k), moved to bit 4
 * (what crosses a byte in the 16-bit shifts is masked off). */
static inline void lt__q45_levels(__m256i q, __m256i h, bool with_h, int j, __m256i *lo,
                                  __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m5 = _mm256_set1_epi8(0x10);
    *lo = _mm256_and_si256(q, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (!with_h) return;
    const __m128i s0 = _mm_cvtsi32_si128(2 * j), s1 = _mm_cvtsi32_si128(2 * j + 1);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(h, s0), 4), m5));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(h, s1), 4), m5));
}

/* M of q4_k / q5_k: each sub-block's minimum times its two x sums. */
static inline int32_t lt__q45_mins(const uint8_t m[8], const int16_t bsums[16]) {
    const __m128i mv = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)m));
    const __m256i m2 = _mm256_set_m128i(_mm_unpackhi_epi16(mv, mv), _mm_unpacklo_epi16(mv, mv));
    return lt__hsum8(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), m2));
}

/* qdot_q4_k and qdot_q5_k over a file's dot_q45(d, dmin, scales, qh, qs, x, acc). */
#define LT__QDOT_Q45(dot_q45)                                                                  \
    static float qdot_q4_k(const void *row, const void *xq, int64_t nb) {                     \
        const lt_block_q4_k *w = row;                                                          \
        const lt__xqk *x = xq;                                                                 \
        float acc = 0.0f;                                                                      \
        for (int64_t b = 0; b < nb; b++)                                                       \
            acc = dot_q45(w[b].d, w[b].dmin, w[b].scales, NULL, w[b].qs, &x[b], acc);          \
        return acc;                                                                            \
    }                                                                                          \
    static float qdot_q5_k(const void *row, const void *xq, int64_t nb) {                     \
        const lt_block_q5_k *w = row;                                                          \
        const lt__xqk *x = xq;                                                                 \
        float acc = 0.0f;                                                                      \
        for (int64_t b = 0; b < nb; b++)                                                       \
            acc = dot_q45(w[b].d, w[b].dmin, w[b].scales, w[b].qh, w[b].qs, &x[b], acc);       \
        return acc;                                                                            \
    }

#endif
