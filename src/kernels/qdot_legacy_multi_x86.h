/* The multi-token dots (lt__qdot_multi_fn) of the legacy types q4_1 and
 * q5_1 for x86 (q4_0's and q5_0's are their group dots, qdot_x16_*.c),
 * written once and compiled three times: by
 * qdot_legacy_multi_avx2.c (16 vector registers) and by
 * qdot_legacy_multi_avx512.c (AVX-512VL: the same 256-bit code with 32, so
 * the 4 chains of 4 tokens stay in registers), and by
 * qdot_legacy_multi_avxvnni.c (qdot_x86.h's AVX-VNNI sums). Each weight block's levels
 * are unpacked once for all the tokens; each token's block sums, chains and
 * float steps are those of qdot_avx2.c's one-token dots, so the same bits.
 * Internal to those two files. */
#ifndef LT_KERNELS_QDOT_LEGACY_MULTI_X86_H
#define LT_KERNELS_QDOT_LEGACY_MULTI_X86_H

#include "kernels/qdot_x86.h"

/* sum u x over each lane's 4 bytes, u unsigned */
static inline __attribute__((always_inline)) __m256i lm_dot_unsigned(__m256i u, __m256i xv) {
    return lt__dot4(u, xv);
}

static inline __attribute__((always_inline)) __m256i lm_xv(const lt__xq32 *x) {
    return _mm256_loadu_si256((const __m256i *)x->qs);
}

/* mstep(w, x, nt, acc): block w against token t's block x[t] into acc[t]. */
/* q4_1 / q5_1: the levels' term, then the minimum times each lane's x sum */
static inline __attribute__((always_inline)) void
lm_mstep_min(__m256i lv, uint16_t dh, uint16_t mh, const lt__xq32 *const *x, const int nt,
             __m256 *acc) {
    const float d = lt__half(dh), m = lt__half(mh);
    for (int t = 0; t < nt; t++) {
        const __m256i xv = lm_xv(x[t]);
        acc[t] = lt__lane_fma(acc[t], d * x[t]->d, lm_dot_unsigned(lv, xv));
        acc[t] = lt__lane_fma(acc[t], m * x[t]->d, lm_dot_unsigned(_mm256_set1_epi8(1), xv));
    }
}

static inline __attribute__((always_inline)) void
lm_mstep_q4_1(const lt_block_q4_1 *w, const lt__xq32 *const *x, const int nt, __m256 *acc) {
    lm_mstep_min(lt__nibbles32(w->qs), w->d, w->m, x, nt, acc);
}

static inline __attribute__((always_inline)) void
lm_mstep_q5_1(const lt_block_q5_1 *w, const lt__xq32 *const *x, const int nt, __m256 *acc) {
    lm_mstep_min(_mm256_or_si256(lt__nibbles32(w->qs), lt__fifth_bits(w->qh)), w->d, w->m, x, nt,
                 acc);
}

/* The loop of a legacy multi-token dot over mstep: qdot.h's R = 4 chains
 * per token (block b into chain b % 4), nt a constant where the body is
 * inlined (one copy per count of tokens). */
#define LM_QDOT_MULTI(name, block_t, mstep)                                                    \
    static inline __attribute__((always_inline)) void name##_n(                                \
        const block_t *w, const void *const *xq, const int nt, int64_t nb, float *out) {      \
        __m256 a[4][LT__QDOT_MULTI_MAX];                                                       \
        const lt__xq32 *x[LT__QDOT_MULTI_MAX];                                                 \
        for (int c = 0; c < 4; c++)                                                            \
            for (int t = 0; t < nt; t++) a[c][t] = _mm256_setzero_ps();                        \
        int64_t b = 0;                                                                         \
        for (; b + 3 < nb; b += 4)                                                             \
            for (int c = 0; c < 4; c++) {                                                      \
                for (int t = 0; t < nt; t++) x[t] = (const lt__xq32 *)xq[t] + b + c;           \
                mstep(&w[b + c], x, nt, a[c]);                                                 \
            }                                                                                  \
        for (int c = 0; b + c < nb; c++) {                                                     \
            for (int t = 0; t < nt; t++) x[t] = (const lt__xq32 *)xq[t] + b + c;               \
            mstep(&w[b + c], x, nt, a[c]);                                                     \
        }                                                                                      \
        for (int t = 0; t < nt; t++) out[t] = lt__lanes_sum32(a[0][t], a[1][t], a[2][t], a[3][t]); \
    }                                                                                          \
    static void name(const void *row, const void *const *xq, int nt, int64_t nb, float *out) { \
        switch (nt) {                                                                          \
        case 1: name##_n(row, xq, 1, nb, out); break;                                          \
        case 2: name##_n(row, xq, 2, nb, out); break;                                          \
        case 3: name##_n(row, xq, 3, nb, out); break;                                          \
        default: name##_n(row, xq, 4, nb, out); break;                                         \
        }                                                                                      \
    }

LM_QDOT_MULTI(lm_qdot_multi_q4_1, lt_block_q4_1, lm_mstep_q4_1)
LM_QDOT_MULTI(lm_qdot_multi_q5_1, lt_block_q5_1, lm_mstep_q5_1)

/* The multi-token dot of a legacy type t; NULL for the others. */
static inline lt__qdot_multi_fn lm_multi_of(lt_dtype t) {
    switch (t) {
    case LT_Q4_1: return lm_qdot_multi_q4_1;
    case LT_Q5_1: return lm_qdot_multi_q5_1;
    default: return NULL;
    }
}

#endif
