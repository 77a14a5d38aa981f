/* AVX-512 builds of the legacy types' multi-token dots. q4_1 and q5_1 take
 * the shared 256-bit code (qdot_legacy_multi_x86.h) with AVX-512VL's 32
 * registers. q5_0 takes two consecutive blocks b, b + 1 in one
 * 512-bit register: their 8 lane sums each in one half (vpdpbusd on
 * AVX512_VNNI, vpmaddubsw + vpmaddwd without), then one fma on chains
 * b % 4 and b % 4 + 1 side by side; a lone last block updates only the low
 * half (a masked fma). Every lane gets the one-token dot's operations in its
 * order: the same bits. */
#include "kernels/qdot_legacy_multi_x86.h"


static inline __m512i join(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

static inline __attribute__((always_inline)) __m256i levels_q5_0(const lt_block_q5_0 *w) {
    return _mm256_sub_epi8(_mm256_or_si256(lt__nibbles32(w->qs), lt__fifth_bits(w->qh)),
                           _mm256_set1_epi8(16));
}

/* The lane sums of l x over each 4 bytes, l = |l| with x negated where l < 0. */
static inline __attribute__((always_inline)) __m512i pair_dot(const bool vnni, __m512i mag,
                                                              __mmask64 neg, __m512i xv) {
    const __m512i sx = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
    if (vnni) return _mm512_dpbusd_epi32(_mm512_setzero_si512(), mag, sx);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(mag, sx), _mm512_set1_epi16(1));
}

/* Blocks w[0] and (two) w[1] against each token's x[t][0] and x[t][1] into
 * acc[t] (chains c, c + 1 in its halves); with two false, only block 0 and
 * the low half. */
#define PAIR_STEP(vnni, block_t, levels, w, x, nt, acc, two)                                     \
    do {                                                                                          \
        const __m256i l0_ = levels(&(w)[0]);                                                     \
        const __m512i lv_ = join(l0_, (two) ? levels(&(w)[1]) : _mm256_setzero_si256());         \
        const __m512i mag_ = _mm512_abs_epi8(lv_);                                               \
        const __mmask64 neg_ = _mm512_movepi8_mask(lv_);                                         \
        const float d0_ = lt__half((w)[0].d), d1_ = (two) ? lt__half((w)[1].d) : 0.0f;           \
        for (int t_ = 0; t_ < (nt); t_++) {                                                      \
            const lt__xq32 *xb_ = (x)[t_];                                                       \
            const __m256i x0_ = _mm256_loadu_si256((const __m256i *)xb_[0].qs);                  \
            const __m256i x1_ =                                                                  \
                (two) ? _mm256_loadu_si256((const __m256i *)xb_[1].qs) : _mm256_setzero_si256(); \
            const __m512 s_ = _mm512_cvtepi32_ps(pair_dot(vnni, mag_, neg_, join(x0_, x1_)));   \
            const __m512 sc_ = _mm512_insertf32x8(_mm512_set1_ps(d0_ * xb_[0].d),              \
                                                  _mm256_set1_ps((two) ? d1_ * xb_[1].d : 0.0f), \
                                                  1);                                             \
            (acc)[t_] = (two) ? _mm512_fmadd_ps(sc_, s_, (acc)[t_])                              \
                              : _mm512_mask3_fmadd_ps(sc_, s_, (acc)[t_], 0x00ff);              \
        }                                                                                         \
    } while (0)

/* The loop over a row: blocks b .. b + 3 as pairs (chains 0, 1) and (2, 3). */
#define PAIR_QDOT_MULTI(name, vnni, block_t, levels)                                            \
    static inline __attribute__((always_inline)) void name##_n(                                  \
        const block_t *w, const void *const *xq, const int nt, int64_t nb, float *out) {        \
        __m512 p0[LT__QDOT_MULTI_MAX], p1[LT__QDOT_MULTI_MAX];                                   \
        const lt__xq32 *x[LT__QDOT_MULTI_MAX];                                                   \
        for (int t = 0; t < nt; t++) p0[t] = p1[t] = _mm512_setzero_ps();                        \
        int64_t b = 0;                                                                           \
        for (; b + 3 < nb; b += 4) {                                                             \
            for (int t = 0; t < nt; t++) x[t] = (const lt__xq32 *)xq[t] + b;                     \
            PAIR_STEP(vnni, block_t, levels, w + b, x, nt, p0, true);                            \
            for (int t = 0; t < nt; t++) x[t] += 2;                                              \
            PAIR_STEP(vnni, block_t, levels, w + b + 2, x, nt, p1, true);                        \
        }                                                                                        \
        for (int t = 0; t < nt; t++) x[t] = (const lt__xq32 *)xq[t] + b;                         \
        if (nb - b >= 2) {                                                                       \
            PAIR_STEP(vnni, block_t, levels, w + b, x, nt, p0, true);                            \
            for (int t = 0; t < nt; t++) x[t] += 2;                                              \
            if (nb - b == 3) PAIR_STEP(vnni, block_t, levels, w + b + 2, x, nt, p1, false);      \
        } else if (nb - b == 1) {                                                                \
            PAIR_STEP(vnni, block_t, levels, w + b, x, nt, p0, false);                           \
        }                                                                                        \
        for (int t = 0; t < nt; t++)                                                             \
            out[t] = lt__lanes_sum32(                                                            \
                _mm512_castps512_ps256(p0[t]), _mm512_extractf32x8_ps(p0[t], 1),                 \
                _mm512_castps512_ps256(p1[t]), _mm512_extractf32x8_ps(p1[t], 1));                \
    }                                                                                            \
    static void name(const void *row, const void *const *xq, int nt, int64_t nb, float *out) {   \
        switch (nt) {                                                                            \
        case 1: name##_n(row, xq, 1, nb, out); break;                                            \
        case 2: name##_n(row, xq, 2, nb, out); break;                                            \
        case 3: name##_n(row, xq, 3, nb, out); break;                                            \
        default: name##_n(row, xq, 4, nb, out); break;                                           \
        }                                                                                        \
    }

PAIR_QDOT_MULTI(pair_multi_q5_0, false, lt_block_q5_0, levels_q5_0)
PAIR_QDOT_MULTI(pair_multi_q5_0_vnni, true, lt_block_q5_0, levels_q5_0)

lt__qdot_multi_fn lt__qdot_multi_legacy_avx512_of(lt_dtype t) {
    const bool v = lt_cpu()->avx512vnni && !lt__qdot_avoid_vnni;
    switch (t) {
    case LT_Q5_0: return v ? pair_multi_q5_0_vnni : pair_multi_q5_0;
    default: return lm_multi_of(t);
    }
}
