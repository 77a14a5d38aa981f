/* The K-quants' integer dots (q2_k .. q6_k with activations in lt__xqk
 * blocks) and that activation quantiser, portably; the arithmetic order is
 * qdot.h's. Where each level lives is written out in src/core/quant_k.c. */
#include "kernels/qdot.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Loops over a block's 256 elements without branches, so that they
 * vectorise: the largest magnitude, then (the first of ties) its element,
 * then the levels and sums of each 16 elements (which lie together in qs's
 * paired order). */
void lt__xqk_quant(const float *x, int64_t n, void *out) {
    lt__xqk *y = out;
    for (int64_t b = 0; b < n / LT_QK_K; b++) {
        const float *xb = x + LT_QK_K * b;
        float amax = 0.0f;
        int bad = 0;
        for (int j = 0; j < LT_QK_K; j++) {
            const float a = fabsf(xb[j]);
            bad |= !(a <= FLT_MAX); /* NaN or infinity */
            amax = a > amax ? a : amax;
        }
        int first = 0;
        while (first < LT_QK_K - 1 && fabsf(xb[first]) != amax) first++;
        const float max = bad ? 0.0f : xb[first];
        const float iscale = -127.0f / max;
        if (bad || !(fabsf(iscale) <= FLT_MAX)) { /* (all zeros: max 0, iscale infinite) */
            y[b].d = bad ? NAN : 0.0f;
            memset(y[b].qs, 0, sizeof y[b].qs);
            memset(y[b].bsums, 0, sizeof y[b].bsums);
            continue;
        }
        for (int g = 0; g < LT_QK_K / 16; g++) {
            int8_t *q = y[b].qs + lt__xqk_pos(16 * g);
            const float *xg = xb + 16 * g;
            int sum = 0;
            for (int i = 0; i < 16; i++) {
                const int32_t v = lt__nearest_even(iscale * xg[i]);
                q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
                sum += q[i];
            }
            y[b].bsums[g] = (int16_t)sum;
        }
        y[b].d = 1.0f / iscale;
    }
}

/* qdot.h's lane sums of a super-block: S[l] = sum over the elements e with
 * (e % 32) / 4 == l of sc16[e / 16] lv[e] q_x[e], q_x in paired order (32
 * elements at a time: a quarter stays contiguous). The sums are exact, so
 * any order gives them: 32 running sums, one per position in the group of
 * 32, folded in fours at the end. |sc lv x| <= 128 * 63 * 127: no int32
 * overflows. Out of line so that GCC vectorises it alone: inlined into the
 * unpacking of q2_k, q3_k and q6_k it came out scalar, 4x slower. */
static __attribute__((noinline)) void lane_sums(const int8_t lv[LT_QK_K], const int8_t *qx,
                                                const int sc16[16], int32_t S[8]) {
    int32_t T[32] = {0};
    for (int e0 = 0; e0 < LT_QK_K; e0 += 32) {
        const int8_t *xq = qx + lt__xqk_pos(e0), *l = lv + e0;
        const int32_t s0 = sc16[e0 / 16], s1 = sc16[e0 / 16 + 1];
        for (int i = 0; i < 16; i++) T[i] += s0 * (l[i] * xq[i]);
        for (int i = 16; i < 32; i++) T[i] += s1 * (l[i] * xq[i]);
    }
    for (int k = 0; k < 8; k++) S[k] = (T[4 * k] + T[4 * k + 1]) + (T[4 * k + 2] + T[4 * k + 3]);
}

/* P[l] = mul16[2l] bsums[2l] + mul16[2l + 1] bsums[2l + 1]: a minimum's or an
 * offset's term per lane. */
static inline void pair_sums(const int mul16[16], const int16_t bsums[16], int32_t P[8]) {
    for (int l = 0; l < 8; l++) P[l] = mul16[2 * l] * bsums[2 * l] + mul16[2 * l + 1] * bsums[2 * l + 1];
}

/* Block b into its lanes of acc (R = 2 chains of 8): d S, then (M non-NULL)
 * dm M. */
static inline void block_lanes(float acc[16], int64_t b, const int32_t S[8], float d,
                               const int32_t *M, float dm) {
    float *a = acc + (b % 2) * 8;
    for (int l = 0; l < 8; l++) {
        a[l] = fmaf(d, (float)S[l], a[l]);
        if (M) a[l] = fmaf(dm, (float)M[l], a[l]);
    }
}

/* The 256 levels of a super-block unpacked in element order (the layout in
 * src/core/quant_k.c), by loops over contiguous bytes the compiler can
 * vectorise. 2-bit: element 128h + 32g + l in bits 2g of qs[32h + l]. */
static inline void unpack2(const uint8_t *qs, int8_t lv[LT_QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                lv[128 * h + 32 * g + l] = (int8_t)(qs[32 * h + l] >> (2 * g) & 3);
}

/* 4-bit: element 64c + l in the low nibble of qs[32c + l], 64c + 32 + l in
 * its high nibble; with qh, the fifth bit of element e in bit e / 32 of
 * qh[e % 32]. */
static inline void unpack4(const uint8_t *qs, const uint8_t *qh, int8_t lv[LT_QK_K]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            lv[64 * c + l] = (int8_t)(qs[32 * c + l] & 0x0f);
            lv[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
        }
    if (qh)
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++)
                lv[32 * j + l] = (int8_t)(lv[32 * j + l] + (qh[l] >> j & 1) * 16);
}

float lt__qdot_q2_k(const void *row, const void *xq, int64_t nb) {
    const lt_block_q2_k *w = row;
    const lt__xqk *x = xq;
    float acc[16] = {0};
    int8_t lv[LT_QK_K];
    for (int64_t b = 0; b < nb; b++) {
        unpack2(w[b].qs, lv);
        int sc[16], mn[16];
        for (int j = 0; j < 16; j++) {
            sc[j] = w[b].scales[j] & 0x0f;
            mn[j] = w[b].scales[j] >> 4;
        }
        int32_t S[8], M[8];
        lane_sums(lv, x[b].qs, sc, S);
        pair_sums(mn, x[b].bsums, M);
        block_lanes(acc, b, S, lt_f16_to_f32(w[b].d) * x[b].d, M,
                    -(lt_f16_to_f32(w[b].dmin) * x[b].d));
    }
    return lt__lanes_sum(acc, 16);
}

/* S less c times the offsets' pair sums (q3_k, q6_k: unsigned levels). */
static inline void take_back(int32_t S[8], const int sc[16], const int16_t bsums[16], int c) {
    int32_t P[8];
    pair_sums(sc, bsums, P);
    for (int l = 0; l < 8; l++) S[l] -= c * P[l];
}

float lt__qdot_q3_k(const void *row, const void *xq, int64_t nb) {
    const lt_block_q3_k *w = row;
    const lt__xqk *x = xq;
    float acc[16] = {0};
    int8_t lv[LT_QK_K], sc8[16];
    for (int64_t b = 0; b < nb; b++) {
        unpack2(w[b].qs, lv);
        /* the third bit of element e in bit e / 32 of hmask[e % 32]: the
         * unsigned level low2 + 4 hbit, 4 above the signed one */
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++)
                lv[32 * j + l] = (int8_t)(lv[32 * j + l] + (w[b].hmask[l] >> j & 1) * 4);
        lt_q3k_scales(w[b].scales, sc8);
        int sc[16];
        for (int j = 0; j < 16; j++) sc[j] = sc8[j];
        int32_t S[8];
        lane_sums(lv, x[b].qs, sc, S);
        take_back(S, sc, x[b].bsums, 4);
        block_lanes(acc, b, S, lt_f16_to_f32(w[b].d) * x[b].d, NULL, 0.0f);
    }
    return lt__lanes_sum(acc, 16);
}

/* q4_k (qh NULL) and q5_k */
static void dot_q45(float acc[16], int64_t b, uint16_t dh, uint16_t dminh,
                    const uint8_t scales[12], const uint8_t *qh, const uint8_t *qs,
                    const lt__xqk *x) {
    int8_t lv[LT_QK_K];
    uint8_t sc8[8], m8[8];
    unpack4(qs, qh, lv);
    lt_qk_scale_min(scales, sc8, m8);
    int sc[16], mn[16];
    for (int j = 0; j < 16; j++) {
        sc[j] = sc8[j / 2];
        mn[j] = m8[j / 2];
    }
    int32_t S[8], M[8];
    lane_sums(lv, x->qs, sc, S);
    pair_sums(mn, x->bsums, M);
    block_lanes(acc, b, S, lt_f16_to_f32(dh) * x->d, M, -(lt_f16_to_f32(dminh) * x->d));
}

/* q4_k: one chain, a super-block's exact sums a term each (qdot.h) */
float lt__q4k_step(const lt_block_q4_k *w, const lt__xqk *x, float acc) {
    int8_t lv[LT_QK_K];
    uint8_t sc8[8], m8[8];
    unpack4(w->qs, NULL, lv);
    lt_qk_scale_min(w->scales, sc8, m8);
    int32_t S = 0, M = 0;
    for (int e = 0; e < LT_QK_K; e++) S += sc8[e / 32] * (lv[e] * x->qs[lt__xqk_pos(e)]);
    for (int j = 0; j < 8; j++) M += m8[j] * (x->bsums[2 * j] + x->bsums[2 * j + 1]);
    acc = fmaf(lt_f16_to_f32(w->d) * x->d, (float)S, acc);
    return fmaf(-(lt_f16_to_f32(w->dmin) * x->d), (float)M, acc);
}

float lt__qdot_q4_k(const void *row, const void *xq, int64_t nb) {
    const lt_block_q4_k *w = row;
    const lt__xqk *x = xq;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) acc = lt__q4k_step(&w[b], &x[b], acc);
    return acc;
}

float lt__qdot_q5_k(const void *row, const void *xq, int64_t nb) {
    const lt_block_q5_k *w = row;
    const lt__xqk *x = xq;
    float acc[16] = {0};
    for (int64_t b = 0; b < nb; b++)
        dot_q45(acc, b, w[b].d, w[b].dmin, w[b].scales, w[b].qh, w[b].qs, &x[b]);
    return lt__lanes_sum(acc, 16);
}

/* q6_k: one chain, a super-block's exact sum a term (qdot.h) */
float lt__q6k_step(const lt_block_q6_k *w, const lt__xqk *x, float acc) {
    int32_t U = 0, O = 0;
    /* element 128h + 32g + l: 4 low bits in ql[64h + 32(g % 2) + l] (high
     * nibble for g >= 2), 2 high bits at bit 2g of qh[32h + l]; unsigned,
     * 32 above the signed level */
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 4; g++) {
            const uint8_t *ql = w->ql + 64 * h + 32 * (g % 2), *qh = w->qh + 32 * h;
            const int8_t *xs = x->qs + lt__xqk_pos(128 * h + 32 * g);
            const int lo_shift = g >= 2 ? 4 : 0, sc0 = w->scales[8 * h + 2 * g],
                      sc1 = w->scales[8 * h + 2 * g + 1];
            int32_t u0 = 0, u1 = 0;
            for (int l = 0; l < 16; l++)
                u0 += ((ql[l] >> lo_shift & 0x0f) | (qh[l] >> (2 * g) & 3) << 4) * xs[l];
            for (int l = 16; l < 32; l++)
                u1 += ((ql[l] >> lo_shift & 0x0f) | (qh[l] >> (2 * g) & 3) << 4) * xs[l];
            U += sc0 * u0 + sc1 * u1;
        }
    for (int i = 0; i < 16; i++) O += w->scales[i] * x->bsums[i];
    return fmaf(lt_f16_to_f32(w->d) * x->d, (float)(U - 32 * O), acc);
}

float lt__qdot_q6_k(const void *row, const void *xq, int64_t nb) {
    const lt_block_q6_k *w = row;
    const lt__xqk *x = xq;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) acc = lt__q6k_step(&w[b], &x[b], acc);
    return acc;
}
