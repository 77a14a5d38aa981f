/* AVX-512 (F, BW, VL) integer dots of the K-quant q5_k with
 * activations quantised per block (qdot.h): 64 levels per register, folded
 * onto each block's 8 exact lane sums, then qdot.h's float steps on the
 * block's chain of lanes: the portable bits. Each dot in two builds, with
 * and without AVX512_VNNI's vpdpwssd (the scale multiply and the add in
 * one), the former where the CPU has it; one-token and multi-token dots. The other types take the AVX2
 * dots (lt__qdot_of). */
#include "kernels/qdot_x86.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* 16 int32 lanes folded onto qdot.h's 8: lane l + 8 holds the elements of
 * the group after lane l's. */
static inline __m256i fold8(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* s + the pair sums of p times sc, in int32 (exact: no lane comes near
 * overflow), by vpdpwssd where the CPU has AVX512_VNNI: the same sums. */
static inline __m512i acc_madd(const bool vnni, __m512i s, __m512i p, __m512i sc) {
    return vnni ? _mm512_dpwssd_epi32(s, p, sc) : _mm512_add_epi32(s, _mm512_madd_epi16(p, sc));
}

bool lt__qdot_avoid_vnni = false;

/* The 8 six-bit scales (bytes 0..7) and minimums (8..15) of a q4_k / q5_k
 * super-block (the layout of lt_qk_scale_min) from its 12 bytes at s, in
 * vector registers: with s_i byte i,
 *   sc_j = s_j & 63,               mn_j = s_4+j & 63               (j < 4)
 *   sc_j = (s_4+j & 15) | s_j-4 >> 6 << 4, mn_j = s_4+j >> 4 | s_j >> 6 << 4 (j >= 4) */
static inline __m128i q45_scale_bytes(const uint8_t *s) {
    uint64_t lo;
    uint32_t hi;
    memcpy(&lo, s, sizeof lo);
    memcpy(&hi, s + 8, sizeof hi);
    const __m128i v = _mm_insert_epi32(_mm_cvtsi64_si128((long long)lo), (int)hi, 2);
    const __m128i a = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8,
                                                        9, 10, 11));
    const __m128i b = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1,
                                                        -1, 4, 5, 6, 7));
    const __m128i m1 = _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0);
    const __m128i m2 = _mm_setr_epi32(0, 0, 0, 0x0f0f0f0f);
    /* (a & m1) | (a >> 4 & m2) | (b >> 2 & 0x30): the 16-bit shifts' bits
     * from the next byte are masked off */
    const __m128i r = _mm_ternarylogic_epi32(_mm_srli_epi16(a, 4), m2, _mm_and_si128(a, m1), 0xea);
    return _mm_ternarylogic_epi32(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30), r, 0xea);
}

/* q4_k and q5_k (qh NULL for q4_k): groups 2c and 2c + 1 in one 64-byte
 * load; its low nibbles are sub-blocks 4c and 4c + 2, the high ones 4c + 1
 * and 4c + 3, the 128 levels that x's paired order puts at 128c .. 128c +
 * 127 (vpmaddubsw's lanes 0..15 and 16..31 one sub-block each); q5_k's
 * fifth bits are bit e / 32 of qh[e % 32]. For nt tokens the levels and
 * their scales once per pair of groups; the one-token dot is nt = 1. */
static inline __attribute__((always_inline)) void
dot_q45_multi_v(const bool vnni, uint16_t dh, uint16_t dminh, const uint8_t scales[12],
                const uint8_t *qh, const uint8_t *qs, const lt__xqk *const *x, const int nt,
                __m256 *acc) {
    static const uint8_t spread[4][64] = {
#define W(k) (k), 0x80 /* byte k of the scales widened to 16 bits */
#define W8(k) W(k), W(k), W(k), W(k), W(k), W(k), W(k), W(k)
#define S(a, b) {W8(a), W8(a), W8(b), W8(b)}
        S(0, 2), S(1, 3), S(4, 6), S(5, 7),
#undef S
    };
    /* sub-block l's minimum in 16-bit lanes 2l, 2l + 1 (against bsums[2l], [2l + 1]) */
    static const uint8_t mins_ctl[32] = {W(8), W(8), W(9), W(9), W(10), W(10), W(11), W(11),
                                         W(12), W(12), W(13), W(13), W(14), W(14), W(15), W(15)};
#undef W8
#undef W
    const __m512i sc4 = _mm512_broadcast_i32x4(q45_scale_bytes(scales));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m256i mn2 =
        _mm256_shuffle_epi8(_mm512_castsi512_si256(sc4), _mm256_loadu_si256((const __m256i *)mins_ctl));
    const __m512i h = qh ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh))
                         : _mm512_setzero_si512();
    __m512i s32[LT__QDOT_MULTI_MAX];
    for (int t = 0; t < nt; t++) s32[t] = _mm512_setzero_si512();
    for (int c = 0; c < 2; c++) {
        const __m512i q = _mm512_loadu_si512(qs + 64 * c);
        __m512i lv[2] = {_mm512_and_si512(q, m4), _mm512_and_si512(_mm512_srli_epi16(q, 4), m4)};
        if (qh) {
            /* bit 4c + k of qh to bit 4, k = 0, 2 (low nibbles) or 1, 3 (high ones) */
            const __m512i m5 = _mm512_set1_epi8(0x10);
            for (int k = 0; k < 2; k++) {
                const __m512i cnt = _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * c + k)),
                                                       _mm256_set1_epi16((short)(4 * c + k + 2)), 1);
                lv[k] = _mm512_or_si512(
                    lv[k], _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(h, cnt), 4), m5));
            }
        }
        for (int k = 0; k < 2; k++) {
            const __m512i scv = _mm512_shuffle_epi8(sc4, _mm512_loadu_si512(spread[2 * c + k]));
            for (int t = 0; t < nt; t++) {
                const __m512i xv = _mm512_loadu_si512(x[t]->qs + 128 * c + 64 * k);
                s32[t] = acc_madd(vnni, s32[t], _mm512_maddubs_epi16(lv[k], xv), scv);
            }
        }
    }
    const float d = lt__half(dh), dmin = lt__half(dminh);
    for (int t = 0; t < nt; t++) {
        acc[t] = lt__lane_fma(acc[t], d * x[t]->d, fold8(s32[t]));
        const __m256i M = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x[t]->bsums), mn2);
        acc[t] = lt__lane_fma(acc[t], -(dmin * x[t]->d), M);
    }
}

static inline __attribute__((always_inline)) __m256
dot_q45_v(const bool vnni, uint16_t dh, uint16_t dminh, const uint8_t scales[12],
          const uint8_t *qh, const uint8_t *qs, const lt__xqk *x, __m256 acc) {
    dot_q45_multi_v(vnni, dh, dminh, scales, qh, qs, &x, 1, &acc);
    return acc;
}

static inline __m256 dot_q45(uint16_t dh, uint16_t dminh, const uint8_t scales[12],
                             const uint8_t *qh, const uint8_t *qs, const lt__xqk *x, __m256 acc) {
    return dot_q45_v(false, dh, dminh, scales, qh, qs, x, acc);
}
LT__QDOT_Q45(dot_q45)

static inline __m256 step_q5_k_vnni(const lt_block_q5_k *w, const lt__xqk *x, __m256 acc) {
    return dot_q45_v(true, w->d, w->dmin, w->scales, w->qh, w->qs, x, acc);
}
LT__QDOT_K(qdot_q5_k_vnni, lt_block_q5_k, step_q5_k_vnni)

static inline __attribute__((always_inline)) void
dot_q45_multi(uint16_t dh, uint16_t dminh, const uint8_t scales[12], const uint8_t *qh,
              const uint8_t *qs, const lt__xqk *const *x, const int nt, __m256 *acc) {
    dot_q45_multi_v(false, dh, dminh, scales, qh, qs, x, nt, acc);
}
LT__QDOT_Q45_MULTI(dot_q45_multi)

static inline __attribute__((always_inline)) void
mstep_q5_k_vnni(const lt_block_q5_k *w, const lt__xqk *const *x, const int nt, __m256 *acc) {
    dot_q45_multi_v(true, w->d, w->dmin, w->scales, w->qh, w->qs, x, nt, acc);
}
LT__QDOT_K_MULTI(qdot_multi_q5_k_vnni, lt_block_q5_k, mstep_q5_k_vnni)


static bool use_vnni(void) { return lt_cpu()->avx512vnni && !lt__qdot_avoid_vnni; }

lt__qdot_fn lt__qdot_avx512_of(lt_dtype t) {
    const bool v = use_vnni();
    switch (t) {
    case LT_Q5_K: return v ? qdot_q5_k_vnni : qdot_q5_k;
    default: return NULL;
    }
}

lt__qdot_multi_fn lt__qdot_multi_avx512_of(lt_dtype t) {
    const bool v = use_vnni();
    switch (t) {
    case LT_Q5_K: return v ? qdot_multi_q5_k_vnni : qdot_multi_q5_k;
    case LT_Q2_K:
    case LT_Q3_K: return lt__qdot_multi_avx2_of(t); /* AVX2's, as their one-token dots */
    default: return NULL;
    }
}
