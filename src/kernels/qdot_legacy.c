/* The legacy types' integer dots (q8_0, q4_0, q4_1, q5_0, q5_1 with activations
 * in lt__xq32 blocks) and that activation quantiser, portably; the
 * arithmetic order is qdot.h's. */
#include "kernels/qdot.h"

#include <float.h>
#include <math.h>
#include <string.h>

void lt__xq32_quant(const float *x, int64_t n, void *out) {
    lt__xq32 *y = out;
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b;
        float amax = 0.0f;
        bool finite = true;
        for (int j = 0; j < 32; j++) {
            const float a = fabsf(xb[j]);
            finite &= a <= FLT_MAX; /* false for NaN and infinity */
            amax = a > amax ? a : amax;
        }
        const float inv = 127.0f / amax;
        if (!finite || !(inv <= FLT_MAX)) { /* NaN / infinity, or zero (or nearly) */
            y[b].d = finite ? 0.0f : NAN;
            memset(y[b].qs, 0, sizeof y[b].qs);
            y[b].off = 0;
            continue;
        }
        y[b].d = amax / 127.0f;
        for (int j = 0; j < 32; j++) {
            /* |v| <= 127: |xb[j] * inv| <= 127 (1 + 2^-24) */
            const int32_t v = lt__nearest_even(xb[j] * inv);
            y[b].qs[j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) sum += y[b].qs[j];
        y[b].off = -8 * sum;
    }
}

/* The 32 levels of a block, element j from the low nibble of qs[j] (j < 16)
 * or the high nibble of qs[j - 16], the fifth bit (if qh) from bit j of qh. */
static inline void levels(const uint8_t qs[16], const uint8_t *qh, int off, int8_t q[32]) {
    uint32_t h = 0;
    if (qh) memcpy(&h, qh, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)((qs[j] & 0x0f) + (int)(h >> j & 1u) * 16 - off);
        q[j + 16] = (int8_t)((qs[j] >> 4) + (int)(h >> (j + 16) & 1u) * 16 - off);
    }
}

/* q4_0: one chain, a whole block's exact sum a term (qdot.h) */
float lt__qdot_q4_0(const void *row, const void *xq, int64_t nb) {
    const lt_block_q4_0 *w = row;
    const lt__xq32 *x = xq;
    float acc = 0.0f;
    int8_t q[32];
    for (int64_t b = 0; b < nb; b++) {
        levels(w[b].qs, NULL, 8, q);
        int32_t s = 0;
        for (int e = 0; e < 32; e++) s += (int32_t)q[e] * x[b].qs[e];
        acc = fmaf(lt_f16_to_f32(w[b].d) * x[b].d, (float)s, acc);
    }
    return acc;
}

/* q8_0 (interleaved rows only: plain and split ones take linear.h's
 * paths): one chain, a whole block's exact sum a term (qdot.h) */
float lt__qdot_q8_0(const void *row, const void *xq, int64_t nb) {
    const lt_block_q8_0 *w = row;
    const lt__xq32 *x = xq;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t s = 0;
        for (int e = 0; e < 32; e++) s += (int32_t)w[b].qs[e] * x[b].qs[e];
        acc = fmaf(lt_f16_to_f32(w[b].d) * x[b].d, (float)s, acc);
    }
    return acc;
}

/* q5_0: one chain, a whole block's exact sum a term (qdot.h) */
float lt__q5_0_step(const lt_block_q5_0 *w, const lt__xq32 *x, float a) {
    int8_t q[32];
    levels(w->qs, w->qh, 16, q);
    int32_t s = 0;
    for (int e = 0; e < 32; e++) s += (int32_t)q[e] * x->qs[e];
    return fmaf(lt_f16_to_f32(w->d) * x->d, (float)s, a);
}

float lt__qdot_q5_0(const void *row, const void *xq, int64_t nb) {
    const lt_block_q5_0 *w = row;
    const lt__xq32 *x = xq;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) acc = lt__q5_0_step(&w[b], &x[b], acc);
    return acc;
}

/* q4_1, q5_1: one chain, a block's exact sums a term each, the levels'
 * then the minimum's against the x sum (qdot.h) */
static inline float min_step(const uint8_t qs[16], const uint8_t *qh, uint16_t d, uint16_t m,
                             const lt__xq32 *x, float a) {
    int8_t q[32];
    levels(qs, qh, 0, q);
    int32_t s = 0, xs = 0;
    for (int e = 0; e < 32; e++) {
        s += (int32_t)q[e] * x->qs[e];
        xs += x->qs[e];
    }
    a = fmaf(lt_f16_to_f32(d) * x->d, (float)s, a);
    return fmaf(lt_f16_to_f32(m) * x->d, (float)xs, a);
}

float lt__q4_1_step(const lt_block_q4_1 *w, const lt__xq32 *x, float a) {
    return min_step(w->qs, NULL, w->d, w->m, x, a);
}

float lt__q5_1_step(const lt_block_q5_1 *w, const lt__xq32 *x, float a) {
    return min_step(w->qs, w->qh, w->d, w->m, x, a);
}

float lt__qdot_q4_1(const void *row, const void *xq, int64_t nb) {
    const lt_block_q4_1 *w = row;
    const lt__xq32 *x = xq;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) acc = lt__q4_1_step(&w[b], &x[b], acc);
    return acc;
}

float lt__qdot_q5_1(const void *row, const void *xq, int64_t nb) {
    const lt_block_q5_1 *w = row;
    const lt__xq32 *x = xq;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) acc = lt__q5_1_step(&w[b], &x[b], acc);
    return acc;
}
