/* The legacy quantisation types q4_0, q4_1, q5_0, q5_1 (blocks of 32):
 * dequantisation with the bits of ggml's, and quantisation by the method of
 * ggml's reference quantisers: q4_0 / q5_0 take the element of largest
 * magnitude as -8 / -16 steps (so the scale carries its sign), q4_1 / q5_1
 * spread [min, max] over 15 / 31 steps. Built with -ffp-contract=off:
 * d * q + m is two roundings, as in ggml. */
#include "core/quant_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

_Static_assert(sizeof(lt_block_q4_0) == 18, "q4_0 block must match ggml's 18 bytes");
_Static_assert(sizeof(lt_block_q4_1) == 20, "q4_1 block must match ggml's 20 bytes");
_Static_assert(sizeof(lt_block_q5_0) == 22, "q5_0 block must match ggml's 22 bytes");
_Static_assert(sizeof(lt_block_q5_1) == 24, "q5_1 block must match ggml's 24 bytes");

/* Element j (0..31) of a block: its 4 low bits from qs, the fifth from qh. */
static inline int nibble(const uint8_t qs[16], int j) {
    return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}
static inline int fifth_bit(const uint8_t qh[4], int j) {
    uint32_t h;
    memcpy(&h, qh, 4);
    return (int)(h >> j & 1u);
}

void lt__dequant_legacy(lt_dtype t, const void *src, float *dst, int64_t n) {
    const int64_t nb = n / LT_QK4;
    for (int64_t b = 0; b < nb; b++) {
        float *y = dst + b * LT_QK4;
        switch (t) {
        case LT_Q4_0: {
            const lt_block_q4_0 *x = (const lt_block_q4_0 *)src + b;
            const float d = lt_f16_to_f32(x->d);
            for (int j = 0; j < LT_QK4; j++) y[j] = (float)(nibble(x->qs, j) - 8) * d;
            break;
        }
        case LT_Q4_1: {
            const lt_block_q4_1 *x = (const lt_block_q4_1 *)src + b;
            const float d = lt_f16_to_f32(x->d), m = lt_f16_to_f32(x->m);
            for (int j = 0; j < LT_QK4; j++) y[j] = (float)nibble(x->qs, j) * d + m;
            break;
        }
        case LT_Q5_0: {
            const lt_block_q5_0 *x = (const lt_block_q5_0 *)src + b;
            const float d = lt_f16_to_f32(x->d);
            for (int j = 0; j < LT_QK4; j++)
                y[j] = (float)((nibble(x->qs, j) | fifth_bit(x->qh, j) << 4) - 16) * d;
            break;
        }
        case LT_Q5_1: {
            const lt_block_q5_1 *x = (const lt_block_q5_1 *)src + b;
            const float d = lt_f16_to_f32(x->d), m = lt_f16_to_f32(x->m);
            for (int j = 0; j < LT_QK4; j++)
                y[j] = (float)(nibble(x->qs, j) | fifth_bit(x->qh, j) << 4) * d + m;
            break;
        }
        default: LT_ASSERT(!"not a legacy quantisation type");
        }
    }
}

/* The element of largest magnitude, with its sign (the first of ties). */
static float signed_absmax(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < LT_QK4; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, float *mn, float *mx) {
    *mn = FLT_MAX;
    *mx = -FLT_MAX;
    for (int j = 0; j < LT_QK4; j++) {
        if (x[j] < *mn) *mn = x[j];
        if (x[j] > *mx) *mx = x[j];
    }
}

/* q = trunc(v + bias) clamped to [0, top]: round half up within the range
 * (v + bias is >= 0 there; the clamp catches the one step past the top
 * that the absmax element's rounding can give). */
static inline uint8_t level(float v, float bias, int top) {
    int q = (int)(v + bias);
    return (uint8_t)(q < 0 ? 0 : q > top ? top : q);
}

/* Packs 32 levels of up to 5 bits into qs (and the fifth bits into qh). */
static void pack(const uint8_t q[LT_QK4], uint8_t qs[16], uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
        h |= (uint32_t)(q[j] >> 4 & 1) << j | (uint32_t)(q[j + 16] >> 4 & 1) << (j + 16);
    }
    if (qh) memcpy(qh, &h, 4);
}

void lt__quant_legacy(lt_dtype t, const float *src, void *dst, int64_t n) {
    const int64_t nb = n / LT_QK4;
    uint8_t q[LT_QK4];
    for (int64_t b = 0; b < nb; b++) {
        const float *x = src + b * LT_QK4;
        switch (t) {
        case LT_Q4_0:
        case LT_Q5_0: {
            /* the largest magnitude maps to the lowest level, -8 or -16 */
            const int half = t == LT_Q4_0 ? 8 : 16;
            const float d = signed_absmax(x) / (float)-half, id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int j = 0; j < LT_QK4; j++)
                q[j] = level(x[j] * id, (float)half + 0.5f, 2 * half - 1);
            if (t == LT_Q4_0) {
                lt_block_q4_0 *y = (lt_block_q4_0 *)dst + b;
                y->d = lt_f32_to_f16(d);
                pack(q, y->qs, NULL);
            } else {
                lt_block_q5_0 *y = (lt_block_q5_0 *)dst + b;
                y->d = lt_f32_to_f16(d);
                pack(q, y->qs, y->qh);
            }
            break;
        }
        case LT_Q4_1:
        case LT_Q5_1: {
            const int top = t == LT_Q4_1 ? 15 : 31;
            float mn, mx;
            min_max(x, &mn, &mx);
            const float d = (mx - mn) / (float)top, id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int j = 0; j < LT_QK4; j++) q[j] = level((x[j] - mn) * id, 0.5f, top);
            if (t == LT_Q4_1) {
                lt_block_q4_1 *y = (lt_block_q4_1 *)dst + b;
                y->d = lt_f32_to_f16(d);
                y->m = lt_f32_to_f16(mn);
                pack(q, y->qs, NULL);
            } else {
                lt_block_q5_1 *y = (lt_block_q5_1 *)dst + b;
                y->d = lt_f32_to_f16(d);
                y->m = lt_f32_to_f16(mn);
                pack(q, y->qs, y->qh);
            }
            break;
        }
        default: LT_ASSERT(!"not a legacy quantisation type");
        }
    }
}
