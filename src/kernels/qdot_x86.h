/* What the x86 vector dots of qdot.h (qdot_avx2.c, qdot_avx512.c) share:
 * 256-bit pieces both files' flags allow (AVX2, F16C). Internal to those
 * files and to their AVX-VNNI build (qdot_avxvnni.c compiles the AVX2 file
 * again with LT_QDOT_AVXVNNI set: the integer sums below through vpdpwssd,
 * one instruction where AVX2 takes two; the same exact sums, so the same
 * bits). */
#ifndef LT_KERNELS_QDOT_X86_H
#define LT_KERNELS_QDOT_X86_H

#include <immintrin.h>
#include <string.h>

#include "kernels/qdot.h"

/* qdot.h's lanes of a 16-lane row (chains a0, a1) added in halves. */
static inline float lt__lanes_sum16(__m256 a0, __m256 a1) {
    const __m256 s8 = _mm256_add_ps(a0, a1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* Makes vector v's value exist at this point: in a block unrolled whole,
 * GCC otherwise defers each token's scale multiplies to the block's end
 * and spills to the stack what they wait on (q6_k's four-token group dot
 * ran 1.5x slower so, q4_k's 1.2x). */
#define LT__PIN(v) __asm__("" : "+v"(v))

/* The group dots prefetch at two distances: matvec.prefetch (pf) ahead
 * into L2 (T1, lt__prefetch_far), and the next block from L2 into L1 (T0).
 * A T0 prefetch far ahead holds one of the core's few line-fill buffers
 * until memory answers, and decode spent most of its time on the
 * prefetches waiting for one; from L2 a buffer is held a few cycles, and
 * the dot finds its block in L1. On a Xeon (Emerald Rapids) the far T1
 * alone gave 1B-shaped Q4_K_M and Q6_K decode 10% more tokens/s than a far
 * T0, the near T0 another 3-10%. Lines a group reads over several blocks
 * (q4_0's and q8_0's scales) take the far one alone. */
static inline __attribute__((always_inline)) void lt__prefetch_far(const void *p) {
    _mm_prefetch((const char *)p, _MM_HINT_T1);
}

/* Both distances for bytes [from, to) of the block at blk. */
static inline __attribute__((always_inline)) void lt__prefetch_lines(const uint8_t *blk, size_t pf,
                                                                     int block_bytes, int from,
                                                                     int to) {
    for (int o = from; o < to && o < block_bytes; o += 64) {
        lt__prefetch_far(blk + pf + o);
        _mm_prefetch((const char *)blk + block_bytes + o, _MM_HINT_T0);
    }
}

/* Step i of a block's 8 steps (sub-blocks or quarters) prefetches its share
 * of the block's lines: all of them at the block's start, a burst, would
 * leave the dots waiting behind the prefetches. */
static inline __attribute__((always_inline)) void lt__prefetch_step(const uint8_t *blk, size_t pf,
                                                                    int block_bytes, int i) {
    const int lines = (block_bytes / 64 + 7) / 8;
    lt__prefetch_lines(blk, pf, block_bytes, i * lines * 64, (i + 1) * lines * 64);
}

#ifndef LT_QDOT_AVXVNNI
#define LT_QDOT_AVXVNNI 0
#endif
/* The name of an AVX2 file's function in this build: name_avx2_of, or
 * name_avxvnni_of in the AVX-VNNI one. */
#if LT_QDOT_AVXVNNI
#define LT__AVX2_OF(name) name##_avxvnni_of
#else
#define LT__AVX2_OF(name) name##_avx2_of
#endif

/* s + the products p sc of each int32 lane's two 16-bit pairs (exact). */
static inline __attribute__((always_inline)) __m256i lt__acc_madd(__m256i s, __m256i p, __m256i sc) {
#if LT_QDOT_AVXVNNI
    return _mm256_dpwssd_avx_epi32(s, p, sc);
#else
    return _mm256_add_epi32(s, _mm256_madd_epi16(p, sc));
#endif
}

/* a + d s, s the 8 exact int32 lane sums of a block */
static inline __m256 lt__lane_fma(__m256 a, float d, __m256i s) {
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(s), a);
}

static inline float lt__half(uint16_t h) { return _cvtsh_ss(h); }

/* 32-bit lane i (0 .. 3) of a 128-bit vpshufb control that fills byte k of
 * each 32-bit lane from byte s_k of the same lane, with zero where s_k < 0
 * (the vector dots pick a row's scales out of its four bytes with it). */
static inline int lt__shuf_lane(int i, int s0, int s1, int s2, int s3) {
    const int s[4] = {s0, s1, s2, s3};
    unsigned v = 0;
    for (int k = 0; k < 4; k++) v |= (unsigned)(s[k] < 0 ? 0x80 : 4 * i + s[k]) << 8 * k;
    return (int)v;
}

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

/* The 8 six-bit scales and minimums of a q4_k / q5_k super-block (the
 * layout of lt_qk_scale_min) as 16-bit lanes, four bytes at a time. */
static inline void lt__q45_scales(const uint8_t s[12], __m128i *sc, __m128i *mn) {
    uint32_t u[3];
    memcpy(u, s, sizeof u);
    const uint32_t lo6 = 0x3f3f3f3f, lo4 = 0x0f0f0f0f, lo2 = 0x03030303;
    const uint32_t sc_hi = (u[2] & lo4) | (u[0] >> 6 & lo2) << 4;
    const uint32_t mn_hi = (u[2] >> 4 & lo4) | (u[1] >> 6 & lo2) << 4;
    *sc = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)sc_hi, (int)(u[0] & lo6)));
    *mn = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)mn_hi, (int)(u[1] & lo6)));
}

/* vpshufb controls: 16-bit lane k of a 128-bit lane in every 16-bit lane */
static const uint8_t lt__bcast_w[8][16] = {
#define W(k) 2 * (k), 2 * (k) + 1
#define W8(k) W(k), W(k), W(k), W(k), W(k), W(k), W(k), W(k)
    {W8(0)}, {W8(1)}, {W8(2)}, {W8(3)}, {W8(4)}, {W8(5)}, {W8(6)}, {W8(7)},
#undef W8
#undef W
};

/* 16-bit lane k of v (8 lanes) in all 16 lanes */
static inline __m256i lt__bcast16(__m256i v2, int k) {
    return _mm256_shuffle_epi8(v2, _mm256_broadcastsi128_si256(
                                       _mm_loadu_si128((const __m128i *)lt__bcast_w[k])));
}

/* M_l of q4_k / q5_k: sub-block l's minimum (mn: 8 lanes) times its two x sums. */
static inline __m256i lt__q45_mins(__m128i mn, const int16_t bsums[16]) {
    const __m256i m2 = _mm256_set_m128i(_mm_unpackhi_epi16(mn, mn), _mm_unpacklo_epi16(mn, mn));
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), m2);
}

/* The loop of a K-quant dot over a file's step(w, x, acc) -> acc, one
 * block into its chain of 8 lanes (R = 2 chains). */
#define LT__QDOT_K(name, block_t, step)                                                        \
    static float name(const void *row, const void *xq, int64_t nb) {                          \
        const block_t *w = row;                                                                \
        const lt__xqk *x = xq;                                                                 \
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                             \
        int64_t b = 0;                                                                         \
        for (; b + 1 < nb; b += 2) {                                                           \
            a0 = step(&w[b], &x[b], a0);                                                       \
            a1 = step(&w[b + 1], &x[b + 1], a1);                                               \
        }                                                                                      \
        if (b < nb) a0 = step(&w[b], &x[b], a0);                                               \
        return lt__lanes_sum16(a0, a1);                                                        \
    }

/* the step function of q5_k over a file's dot_q45(d, dmin, scales, qh, qs, x, acc) (q4_k's
 * vector paths are the group dots of qdot_x16_*.c) */
#define LT__QDOT_Q45(dot_q45)                                                                  \
    static inline __m256 step_q5_k(const lt_block_q5_k *w, const lt__xqk *x, __m256 acc) {     \
        return dot_q45(w->d, w->dmin, w->scales, w->qh, w->qs, x, acc);                        \
    }                                                                                          \
    LT__QDOT_K(qdot_q5_k, lt_block_q5_k, step_q5_k)

/* The loop of a multi-token K-quant dot (lt__qdot_multi_fn) over a file's
 * mstep(w, x, nt, acc): block w against token t's block x[t] into acc[t],
 * nt a constant where the body is inlined (one copy per count of tokens).
 * Each token's chains, blocks and steps are those of LT__QDOT_K. */
#define LT__QDOT_K_MULTI(name, block_t, mstep)                                                 \
    static inline __attribute__((always_inline)) void name##_n(                                \
        const block_t *w, const void *const *xq, const int nt, int64_t nb, float *out) {      \
        __m256 a0[LT__QDOT_MULTI_MAX], a1[LT__QDOT_MULTI_MAX];                                 \
        const lt__xqk *x[LT__QDOT_MULTI_MAX];                                                  \
        for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm256_setzero_ps();                      \
        int64_t b = 0;                                                                         \
        for (; b + 1 < nb; b += 2) {                                                           \
            for (int t = 0; t < nt; t++) x[t] = (const lt__xqk *)xq[t] + b;                    \
            mstep(&w[b], x, nt, a0);                                                           \
            for (int t = 0; t < nt; t++) x[t] = (const lt__xqk *)xq[t] + b + 1;                \
            mstep(&w[b + 1], x, nt, a1);                                                       \
        }                                                                                      \
        if (b < nb) {                                                                          \
            for (int t = 0; t < nt; t++) x[t] = (const lt__xqk *)xq[t] + b;                    \
            mstep(&w[b], x, nt, a0);                                                           \
        }                                                                                      \
        for (int t = 0; t < nt; t++) out[t] = lt__lanes_sum16(a0[t], a1[t]);                   \
    }                                                                                          \
    static void name(const void *row, const void *const *xq, int nt, int64_t nb, float *out) { \
        switch (nt) {                                                                          \
        case 1: name##_n(row, xq, 1, nb, out); break;                                          \
        case 2: name##_n(row, xq, 2, nb, out); break;                                          \
        case 3: name##_n(row, xq, 3, nb, out); break;                                          \
        default: name##_n(row, xq, 4, nb, out); break;                                         \
        }                                                                                      \
    }

/* the multi-token step of q5_k over a file's
 * dot_q45_multi(d, dmin, scales, qh, qs, x, nt, acc) */
#define LT__QDOT_Q45_MULTI(dot_q45_multi)                                                      \
    static inline __attribute__((always_inline)) void mstep_q5_k(                              \
        const lt_block_q5_k *w, const lt__xqk *const *x, int nt, __m256 *acc) {                \
        dot_q45_multi(w->d, w->dmin, w->scales, w->qh, w->qs, x, nt, acc);                     \
    }                                                                                          \
    LT__QDOT_K_MULTI(qdot_multi_q5_k, lt_block_q5_k, mstep_q5_k)

#endif
