/* AVX2 integer dots of the types of qdot.h but the interleaved ones (q4_0
 * .. q5_1, q4_k, q6_k: qdot_x16_*.c), that is q2_k, q3_k and q5_k, with
 * activations quantised per block: each block's 8 lane sums in a register
 * (exact in int32, so any order gives the portable sums), then qdot.h's
 * float steps on its chain of 8 lanes: the portable bits. vpmaddubsw
 * multiplies unsigned levels (or |level|) by signed x: 2 x 63 x 127 at
 * most, never saturating. qdot_avxvnni.c compiles this file again for
 * CPUs with AVX-VNNI (qdot_x86.h's lt__acc_madd). */
#include "kernels/qdot_x86.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* q4_k and q5_k (qh NULL for q4_k): four 32-byte groups, each the low
 * nibbles of sub-block 2j and the high ones of 2j + 1 (q5_k: bits 2j and
 * 2j + 1 of qh as their fifth bits); every sub-block's pair sums times its
 * scale, the minimums times the sub-blocks' x sums. For nt tokens: the
 * levels and their scales once per group; the one-token dot is nt = 1. */
static inline __attribute__((always_inline)) void
dot_q45_multi(uint16_t dh, uint16_t dminh, const uint8_t scales[12], const uint8_t *qh,
              const uint8_t *qs, const lt__xqk *const *x, const int nt, __m256 *acc) {
    __m128i sc, mn;
    lt__q45_scales(scales, &sc, &mn);
    const __m256i sc2 = _mm256_broadcastsi128_si256(sc);
    const __m256i h = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    __m256i s32[LT__QDOT_MULTI_MAX];
    for (int t = 0; t < nt; t++) s32[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i lo, hi;
        lt__q45_levels(_mm256_loadu_si256((const __m256i *)(qs + 32 * j)), h, qh != NULL, j, &lo, &hi);
        const __m256i sc_lo = lt__bcast16(sc2, 2 * j), sc_hi = lt__bcast16(sc2, 2 * j + 1);
        for (int t = 0; t < nt; t++) {
            /* group j's elements 64j .. 64j + 63 in x's paired order */
            const int8_t *xj = x[t]->qs + 128 * (j / 2) + 32 * (j % 2);
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)xj);
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(xj + 64));
            s32[t] = lt__acc_madd(s32[t], _mm256_maddubs_epi16(lo, x0), sc_lo);
            s32[t] = lt__acc_madd(s32[t], _mm256_maddubs_epi16(hi, x1), sc_hi);
        }
    }
    const float d = lt__half(dh), dmin = lt__half(dminh);
    for (int t = 0; t < nt; t++) {
        acc[t] = lt__lane_fma(acc[t], d * x[t]->d, s32[t]);
        acc[t] = lt__lane_fma(acc[t], -(dmin * x[t]->d), lt__q45_mins(mn, x[t]->bsums));
    }
}

static inline __attribute__((always_inline)) __m256
dot_q45(uint16_t dh, uint16_t dminh, const uint8_t scales[12], const uint8_t *qh,
        const uint8_t *qs, const lt__xqk *x, __m256 acc) {
    dot_q45_multi(dh, dminh, scales, qh, qs, &x, 1, &acc);
    return acc;
}

LT__QDOT_Q45(dot_q45)
LT__QDOT_Q45_MULTI(dot_q45_multi)

/* The scales of a 32-level group on vpmaddubsw's pair lanes: sc_lo on
 * lanes 0..7 (its first 16 elements), sc_hi on 8..15. */
static inline __m256i group_scales(int16_t sc_lo, int16_t sc_hi) {
    return _mm256_set_m128i(_mm_set1_epi16(sc_hi), _mm_set1_epi16(sc_lo));
}

/* s[t] += token t's x at xqs[t] (32 values) dotted with the group's levels
 * lv, times their scales scv, for nt tokens. */
static inline __attribute__((always_inline)) void
group_dots(__m256i *s, __m256i lv, __m256i scv, const lt__xqk *const *x, int e0, const int nt) {
    for (int t = 0; t < nt; t++) {
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(x[t]->qs + lt__xqk_pos(e0)));
        s[t] = lt__acc_madd(s[t], _mm256_maddubs_epi16(lv, xv), scv);
    }
}

/* q2_k: per 16 elements a 4-bit scale and a 4-bit minimum; element 128h +
 * 32g + l has bits 2g of qs[32h + l]. For nt tokens: each group's levels
 * and scales once; the one-token step is nt = 1. */
static inline __attribute__((always_inline)) void
mstep_q2_k(const lt_block_q2_k *w, const lt__xqk *const *x, const int nt, __m256 *acc) {
    const __m256i m2 = _mm256_set1_epi8(3);
    __m256i s32[LT__QDOT_MULTI_MAX];
    for (int t = 0; t < nt; t++) s32[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * h));
        for (int g = 0; g < 4; g++) {
            const int k = 8 * h + 2 * g;
            const __m256i lv = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * g)), m2);
            group_dots(s32, lv, group_scales(w->scales[k] & 0x0f, w->scales[k + 1] & 0x0f), x,
                       128 * h + 32 * g, nt);
        }
    }
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_srli_epi16(
        _mm_and_si128(_mm_loadu_si128((const __m128i *)w->scales), _mm_set1_epi8((char)0xf0)), 4));
    const float d = lt__half(w->d), dmin = lt__half(w->dmin);
    for (int t = 0; t < nt; t++) {
        const __m256i M = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x[t]->bsums), mins);
        acc[t] = lt__lane_fma(acc[t], d * x[t]->d, s32[t]);
        acc[t] = lt__lane_fma(acc[t], -(dmin * x[t]->d), M);
    }
}

static inline __attribute__((always_inline)) __m256
step_q2_k(const lt_block_q2_k *w, const lt__xqk *x, __m256 acc) {
    mstep_q2_k(w, &x, 1, &acc);
    return acc;
}

LT__QDOT_K(qdot_q2_k, lt_block_q2_k, step_q2_k)
LT__QDOT_K_MULTI(qdot_multi_q2_k, lt_block_q2_k, mstep_q2_k)

/* acc[t] = fma(d d_x, S_t - 2^shift (scales . bsums of token t), acc[t]):
 * q3_k's and q6_k's levels were dotted made unsigned by 2^shift (4, 32);
 * this takes the offset back per pair of 16-element groups (qdot.h). */
static inline __attribute__((always_inline)) void
take_back(__m256 *acc, const __m256i *s32, const lt__xqk *const *x, const int nt, __m256i sc16,
          float d, const int shift) {
    for (int t = 0; t < nt; t++) {
        const __m256i back = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x[t]->bsums), sc16);
        acc[t] = lt__lane_fma(acc[t], d * x[t]->d, _mm256_sub_epi32(s32[t], _mm256_slli_epi32(back, shift)));
    }
}

/* q3_k's sixteen 6-bit scales (lt_q3k_scales' values) from their 12 bytes,
 * read as 8 + 4 (never past the field): the low 4 bits of scale j are
 * nibble j % 8 of bytes 0..7 (low nibbles first), the high 2 bits are bits
 * 2 (j / 4) of byte 8 + j % 4; minus 32. */
static inline __m128i q3k_scales(const uint8_t s[12]) {
    const __m128i m4 = _mm_set1_epi8(0x0f), m2 = _mm_set1_epi8(3);
    const __m128i l8 = _mm_loadl_epi64((const __m128i *)s);
    const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(l8, m4),
                                          _mm_and_si128(_mm_srli_epi16(l8, 4), m4));
    uint32_t h4;
    memcpy(&h4, s + 8, 4);
    const __m128i h = _mm_cvtsi32_si128((int)h4);
    /* bytes 0..3 of h shifted by 0, 2, 4, 6: scales 0..3, 4..7, 8..11, 12..15 */
    const __m128i h01 = _mm_unpacklo_epi32(_mm_and_si128(h, m2),
                                           _mm_and_si128(_mm_srli_epi16(h, 2), m2));
    const __m128i h23 = _mm_unpacklo_epi32(_mm_and_si128(_mm_srli_epi16(h, 4), m2),
                                           _mm_and_si128(_mm_srli_epi16(h, 6), m2));
    const __m128i hi = _mm_unpacklo_epi64(h01, h23);
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

/* q3_k: levels low2 + 4 x hbit - 4 in [-4, 3], dotted unsigned (0..7) and
 * 4 x the x sums taken back; the third bit of element 128h + 32g + l is bit
 * 4h + g of hmask[l]. For nt tokens as q2_k. */
static inline __attribute__((always_inline)) void
mstep_q3_k(const lt_block_q3_k *w, const lt__xqk *const *x, const int nt, __m256 *acc) {
    const __m256i m2 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4);
    int8_t sc[16];
    const __m128i scv8 = q3k_scales(w->scales);
    _mm_storeu_si128((__m128i *)sc, scv8);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)w->hmask);
    __m256i s32[LT__QDOT_MULTI_MAX];
    for (int t = 0; t < nt; t++) s32[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * h));
        for (int g = 0; g < 4; g++) {
            const int k = 8 * h + 2 * g;
            const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * g)), m2);
            /* bit 4h + g moved to bit 2 (a right shift within the byte, or left by 1 or 2) */
            const int bit = 4 * h + g;
            const __m256i hb = bit >= 2 ? _mm256_srl_epi16(hm, _mm_cvtsi32_si128(bit - 2))
                                        : _mm256_sll_epi16(hm, _mm_cvtsi32_si128(2 - bit));
            const __m256i lv = _mm256_or_si256(lo, _mm256_and_si256(hb, m4));
            group_dots(s32, lv, group_scales(sc[k], sc[k + 1]), x, 128 * h + 32 * g, nt);
        }
    }
    take_back(acc, s32, x, nt, _mm256_cvtepi8_epi16(scv8), lt__half(w->d), 2);
}

static inline __attribute__((always_inline)) __m256
step_q3_k(const lt_block_q3_k *w, const lt__xqk *x, __m256 acc) {
    mstep_q3_k(w, &x, 1, &acc);
    return acc;
}

LT__QDOT_K(qdot_q3_k, lt_block_q3_k, step_q3_k)
LT__QDOT_K_MULTI(qdot_multi_q3_k, lt_block_q3_k, mstep_q3_k)



lt__qdot_fn LT__AVX2_OF(lt__qdot)(lt_dtype t) {
#if !LT_QDOT_AVXVNNI
    if (lt_cpu()->avxvnni && !lt__qdot_avoid_vnni) return lt__qdot_avxvnni_of(t);
#endif
    switch (t) {
    case LT_Q2_K: return qdot_q2_k;
    case LT_Q3_K: return qdot_q3_k;
    case LT_Q5_K: return qdot_q5_k;
    default: return NULL;
    }
}

lt__qdot_multi_fn LT__AVX2_OF(lt__qdot_multi)(lt_dtype t) {
#if !LT_QDOT_AVXVNNI
    if (lt_cpu()->avxvnni && !lt__qdot_avoid_vnni) return lt__qdot_multi_avxvnni_of(t);
#endif
    switch (t) {
    case LT_Q2_K: return qdot_multi_q2_k;
    case LT_Q3_K: return qdot_multi_q3_k;
    case LT_Q5_K: return qdot_multi_q5_k;
    default: return NULL;
    }
}
