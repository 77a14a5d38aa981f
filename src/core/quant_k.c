/* The K-quants q2_k, q3_k, q4_k, q5_k, q6_k (super-blocks of 256):
 * dequantisation with the bits of ggml's, and quantisation by the method of
 * ggml's reference quantisers (quantize_row_*_ref, no importance matrix):
 * per sub-block a scale (and minimum) found by a small search over candidate
 * scales that minimises the weighted squared (q2_k: absolute) error, then
 * the sub-block scales themselves quantised against the super-block's
 * half-precision d (and dmin), and the levels recomputed with the scales as
 * stored. Built with -ffp-contract=off: ggml's products and sums are
 * rounded one at a time.
 *
 * Where element e (0..255) of a super-block lives:
 * - q2_k / q3_k: 2 low bits in qs[32 (e / 128) + e % 32] at bit 2 ((e % 128) / 32);
 *   q3_k's third bit in hmask[e % 32] at bit e / 32 (set: level q, clear:
 *   q - 4); scale e / 16.
 * - q4_k / q5_k: 4 low bits in qs[32 (e / 64) + e % 32], the low nibble for
 *   e % 64 < 32; q5_k's fifth bit in qh[e % 32] at bit e / 32; scale and
 *   minimum e / 32.
 * - q6_k: 4 low bits in ql[64 (e / 128) + 32 g % 2 + e % 32] with g = (e % 128) / 32,
 *   the high nibble for g >= 2; 2 high bits in qh[32 (e / 128) + e % 32] at
 *   bit 2 g; level less 32; scale e / 16. */
#include "core/quant_internal.h"

#include <math.h>
#include <string.h>

_Static_assert(sizeof(lt_block_q2_k) == 84, "q2_k block must match ggml's 84 bytes");
_Static_assert(sizeof(lt_block_q3_k) == 110, "q3_k block must match ggml's 110 bytes");
_Static_assert(sizeof(lt_block_q4_k) == 144, "q4_k block must match ggml's 144 bytes");
_Static_assert(sizeof(lt_block_q5_k) == 176, "q5_k block must match ggml's 176 bytes");
_Static_assert(sizeof(lt_block_q6_k) == 210, "q6_k block must match ggml's 210 bytes");

/* below this a group counts as all zero, as in ggml */
#define GROUP_EPS 1e-15f

/* ---- scale packing ---------------------------------------------------------- */

/* q4_k / q5_k: the inverse of lt_qk_scale_min (core.h). */
static void pack_scale_min(const uint8_t sc[8], const uint8_t m[8], uint8_t s[12]) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)((m[j] & 63) | (m[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | (m[j + 4] & 0x0f) << 4);
    }
}

/* q3_k: bytes 0-7 hold the low 4 bits of scales 0-7 (low nibble) and 8-15
 * (high nibble); bytes 8-11 the top 2 bits of scale j at bit 2 (j / 4) of
 * byte 8 + j % 4. Stored offset by 32. */
void lt_q3k_scales(const uint8_t s[12], int8_t sc[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
        int hi = s[8 + j % 4] >> (2 * (j / 4)) & 3;
        sc[j] = (int8_t)((lo | hi << 4) - 32);
    }
}

static void pack_q3k_scales(const uint8_t l[16], uint8_t s[12]) {
    memset(s, 0, 12);
    for (int j = 0; j < 16; j++) {
        s[j % 8] |= (uint8_t)((l[j] & 0x0f) << (j < 8 ? 0 : 4));
        s[8 + j % 4] |= (uint8_t)((l[j] >> 4) << (2 * (j / 4)));
    }
}

/* ---- dequantisation ------------------------------------------------------------ */

static inline int low2(const uint8_t *qs, int e) {
    return qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32)) & 3;
}
static inline int low4(const uint8_t *qs, int e) {
    const uint8_t b = qs[32 * (e / 64) + e % 32];
    return e % 64 < 32 ? b & 0x0f : b >> 4;
}
static inline int q6_level(const lt_block_q6_k *x, int e) {
    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
    const uint8_t b = x->ql[64 * h + 32 * (g % 2) + l];
    const int lo = g >= 2 ? b >> 4 : b & 0x0f;
    const int hi = x->qh[32 * h + l] >> (2 * g) & 3;
    return (lo | hi << 4) - 32;
}

static void dequant_q2_k(const lt_block_q2_k *x, float *y) {
    const float d = lt_f16_to_f32(x->d), dmin = lt_f16_to_f32(x->dmin);
    for (int s = 0; s < 16; s++) {
        const float dl = d * (float)(x->scales[s] & 0x0f), ml = dmin * (float)(x->scales[s] >> 4);
        for (int e = 16 * s; e < 16 * s + 16; e++) y[e] = dl * (float)low2(x->qs, e) - ml;
    }
}

static void dequant_q3_k(const lt_block_q3_k *x, float *y) {
    const float d = lt_f16_to_f32(x->d);
    int8_t sc[16];
    lt_q3k_scales(x->scales, sc);
    for (int s = 0; s < 16; s++) {
        const float dl = d * (float)sc[s];
        for (int e = 16 * s; e < 16 * s + 16; e++) {
            const int q = low2(x->qs, e) - (x->hmask[e % 32] >> (e / 32) & 1 ? 0 : 4);
            y[e] = dl * (float)q;
        }
    }
}

/* q4_k (qh NULL) and q5_k share everything but the fifth bit. */
static void dequant_q45_k(uint16_t dh, uint16_t dminh, const uint8_t scales[12], const uint8_t *qh,
                          const uint8_t *qs, float *y) {
    const float d = lt_f16_to_f32(dh), dmin = lt_f16_to_f32(dminh);
    uint8_t sc[8], m[8];
    lt_qk_scale_min(scales, sc, m);
    for (int s = 0; s < 8; s++) {
        const float dl = d * (float)sc[s], ml = dmin * (float)m[s];
        for (int e = 32 * s; e < 32 * s + 32; e++) {
            const int q = low4(qs, e) + (qh && (qh[e % 32] >> (e / 32) & 1) ? 16 : 0);
            y[e] = dl * (float)q - ml;
        }
    }
}

static void dequant_q6_k(const lt_block_q6_k *x, float *y) {
    const float d = lt_f16_to_f32(x->d);
    for (int s = 0; s < 16; s++) {
        const float dl = d * (float)x->scales[s];
        for (int e = 16 * s; e < 16 * s + 16; e++) y[e] = dl * (float)q6_level(x, e);
    }
}

void lt__dequant_k(lt_dtype t, const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / LT_QK_K; b++) {
        float *y = dst + b * LT_QK_K;
        switch (t) {
        case LT_Q2_K: dequant_q2_k((const lt_block_q2_k *)src + b, y); break;
        case LT_Q3_K: dequant_q3_k((const lt_block_q3_k *)src + b, y); break;
        case LT_Q4_K: {
            const lt_block_q4_k *x = (const lt_block_q4_k *)src + b;
            dequant_q45_k(x->d, x->dmin, x->scales, NULL, x->qs, y);
            break;
        }
        case LT_Q5_K: {
            const lt_block_q5_k *x = (const lt_block_q5_k *)src + b;
            dequant_q45_k(x->d, x->dmin, x->scales, x->qh, x->qs, y);
            break;
        }
        case LT_Q6_K: dequant_q6_k((const lt_block_q6_k *)src + b, y); break;
        default: LT_ASSERT(!"not a K-quant type");
        }
    }
}

/* ---- the scale searches ------------------------------------------------------------ */

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Symmetric levels l in [-nmax, nmax) for n values, weights x^2 (q6_k):
 * the absmax scale, then 18 nearby candidate scales -(nmax + 0.1 is) / max
 * (is = -9..9), keeping the one of best weighted least-squares fit. L gets
 * l + nmax; returns the scale (value = scale * l). */
static float symmetric_levels(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = clampi(lt__nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = clampi(lt__nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        /* a better fit: sumlx^2 / suml2 (the explained part) is larger */
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(lt__nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* q3_k's symmetric levels in [-nmax, nmax): the absmax levels, then up to
 * five passes that move single levels to where they fit the least-squares
 * scale of the others better (weights x^2). L gets l + nmax. */
static float q3_levels(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = clampi(lt__nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0.0f) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                const int nl = clampi(lt__nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * (float)nl;
                    sl2 += w * (float)nl * (float)nl;
                    if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric levels l in [0, nmax] with value = scale * l - min_out (min_out
 * >= 0): the [min(x, 0), max] range, then nstep + 1 candidate scales
 * (nmax + rmin + rdelta is) / (max - min), each with the weighted
 * least-squares scale and offset of its levels; the candidate of least
 * weighted error (absolute with mad, else squared) wins. */
static float affine_levels(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *min_out, float rmin, float rdelta, int nstep, bool mad) {
    uint8_t Laux[32];
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *min_out = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min), scale = 1.0f / iscale, best = 0.0f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(lt__nearest_int(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        diff = mad ? fabsf(diff) : diff * diff;
        best += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = clampi(lt__nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.0f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.0f) { /* the offset must not be positive: refit the scale alone */
                this_min = 0.0f;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = mad ? fabsf(diff) : diff * diff;
                err += w[i] * diff;
            }
            if (err < best) {
                memcpy(L, Laux, (size_t)n);
                best = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *min_out = -min;
    return scale;
}

/* ---- the quantisers ----------------------------------------------------------------- */

static void quant_q2_k(const float *x, lt_block_q2_k *y) {
    uint8_t L[LT_QK_K];
    float w[16], scales[16], mins[16], max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 16; s++) {
        for (int i = 0; i < 16; i++) w[i] = fabsf(x[16 * s + i]);
        scales[s] =
            affine_levels(16, 3, x + 16 * s, w, L + 16 * s, &mins[s], -0.5f, 0.1f, 15, true);
        if (scales[s] > max_scale) max_scale = scales[s];
        if (mins[s] > max_min) max_min = mins[s];
    }
    /* the sub-block scales and minimums in 4 bits against d and dmin */
    memset(y->scales, 0, sizeof y->scales);
    y->d = lt_f32_to_f16(0.0f);
    y->dmin = lt_f32_to_f16(0.0f);
    if (max_scale > 0.0f) {
        const float iscale = 15.0f / max_scale;
        for (int s = 0; s < 16; s++) y->scales[s] = (uint8_t)lt__nearest_int(iscale * scales[s]);
        y->d = lt_f32_to_f16(max_scale / 15.0f);
    }
    if (max_min > 0.0f) {
        const float iscale = 15.0f / max_min;
        for (int s = 0; s < 16; s++)
            y->scales[s] |= (uint8_t)(lt__nearest_int(iscale * mins[s]) << 4);
        y->dmin = lt_f32_to_f16(max_min / 15.0f);
    }
    /* the levels again, against the scales as stored */
    for (int s = 0; s < 16; s++) {
        const float d = lt_f16_to_f32(y->d) * (float)(y->scales[s] & 0x0f);
        if (d == 0.0f) continue;
        const float dm = lt_f16_to_f32(y->dmin) * (float)(y->scales[s] >> 4);
        for (int i = 0; i < 16; i++)
            L[16 * s + i] = (uint8_t)clampi(lt__nearest_int((x[16 * s + i] + dm) / d), 0, 3);
    }
    memset(y->qs, 0, sizeof y->qs);
    for (int e = 0; e < LT_QK_K; e++)
        y->qs[32 * (e / 128) + e % 32] |= (uint8_t)(L[e] << (2 * ((e % 128) / 32)));
}

static void quant_q3_k(const float *x, lt_block_q3_k *y) {
    int8_t L[LT_QK_K];
    float scales[16], amax = 0.0f, max_scale = 0.0f;
    for (int s = 0; s < 16; s++) {
        scales[s] = q3_levels(16, 4, x + 16 * s, L + 16 * s);
        if (fabsf(scales[s]) > amax) {
            amax = fabsf(scales[s]);
            max_scale = scales[s];
        }
    }
    /* 6-bit signed sub-block scales; the largest maps to -32 */
    uint8_t ls[16] = {0};
    if (max_scale != 0.0f) {
        const float iscale = -32.0f / max_scale;
        for (int s = 0; s < 16; s++)
            ls[s] = (uint8_t)(clampi((int8_t)lt__nearest_int(iscale * scales[s]), -32, 31) + 32);
        pack_q3k_scales(ls, y->scales);
        y->d = lt_f32_to_f16(1.0f / iscale);
    } else {
        memset(y->scales, 0, sizeof y->scales);
        y->d = lt_f32_to_f16(0.0f);
    }
    int8_t sc[16];
    lt_q3k_scales(y->scales, sc);
    for (int s = 0; s < 16; s++) {
        const float d = lt_f16_to_f32(y->d) * (float)sc[s];
        if (d == 0.0f) continue;
        for (int i = 0; i < 16; i++)
            L[16 * s + i] = (int8_t)(clampi(lt__nearest_int(x[16 * s + i] / d), -4, 3) + 4);
    }
    memset(y->hmask, 0, sizeof y->hmask);
    memset(y->qs, 0, sizeof y->qs);
    for (int e = 0; e < LT_QK_K; e++) {
        int l = L[e];
        if (l > 3) { /* the third bit set: no offset of -4 */
            y->hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            l -= 4;
        }
        y->qs[32 * (e / 128) + e % 32] |= (uint8_t)(l << (2 * ((e % 128) / 32)));
    }
}

/* q4_k (nmax 15) and q5_k (nmax 31): sub-blocks of 32, weights
 * rms(x) + |x|, 6-bit scales and minimums. */
static void quant_q45_k(const float *x, int nmax, uint16_t *dh, uint16_t *dminh, uint8_t scales[12],
                        uint8_t L[LT_QK_K]) {
    float w[32], sc_f[8], mins[8], max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 8; s++) {
        const float *xs = x + 32 * s;
        float sum_x2 = 0.0f;
        for (int i = 0; i < 32; i++) sum_x2 += xs[i] * xs[i];
        const float av_x = sqrtf(sum_x2 / 32.0f);
        for (int i = 0; i < 32; i++) w[i] = av_x + fabsf(xs[i]);
        /* ggml's search ranges: q4_k 21 candidates from -1, q5_k 16 from -0.5 */
        sc_f[s] = nmax == 15
                      ? affine_levels(32, 15, xs, w, L + 32 * s, &mins[s], -1.0f, 0.1f, 20, false)
                      : affine_levels(32, 31, xs, w, L + 32 * s, &mins[s], -0.5f, 0.1f, 15, false);
        if (sc_f[s] > max_scale) max_scale = sc_f[s];
        if (mins[s] > max_min) max_min = mins[s];
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int s = 0; s < 8; s++) {
        const uint8_t a = (uint8_t)lt__nearest_int(inv_scale * sc_f[s]);
        const uint8_t b = (uint8_t)lt__nearest_int(inv_min * mins[s]);
        ls[s] = a < 63 ? a : 63;
        lm[s] = b < 63 ? b : 63;
    }
    pack_scale_min(ls, lm, scales);
    *dh = lt_f32_to_f16(max_scale / 63.0f);
    *dminh = lt_f32_to_f16(max_min / 63.0f);
    uint8_t sc[8], m[8];
    lt_qk_scale_min(scales, sc, m);
    for (int s = 0; s < 8; s++) {
        const float d = lt_f16_to_f32(*dh) * (float)sc[s];
        if (d == 0.0f) continue;
        const float dm = lt_f16_to_f32(*dminh) * (float)m[s];
        for (int i = 0; i < 32; i++)
            L[32 * s + i] = (uint8_t)clampi(lt__nearest_int((x[32 * s + i] + dm) / d), 0, nmax);
    }
}

static void quant_q4_k(const float *x, lt_block_q4_k *y) {
    uint8_t L[LT_QK_K];
    quant_q45_k(x, 15, &y->d, &y->dmin, y->scales, L);
    memset(y->qs, 0, sizeof y->qs);
    for (int e = 0; e < LT_QK_K; e++)
        y->qs[32 * (e / 64) + e % 32] |= (uint8_t)(e % 64 < 32 ? L[e] : L[e] << 4);
}

static void quant_q5_k(const float *x, lt_block_q5_k *y) {
    uint8_t L[LT_QK_K];
    quant_q45_k(x, 31, &y->d, &y->dmin, y->scales, L);
    memset(y->qs, 0, sizeof y->qs);
    memset(y->qh, 0, sizeof y->qh);
    for (int e = 0; e < LT_QK_K; e++) {
        const int l = L[e];
        if (l > 15) y->qh[e % 32] |= (uint8_t)(1u << (e / 32));
        y->qs[32 * (e / 64) + e % 32] |= (uint8_t)(e % 64 < 32 ? (l & 15) : (l & 15) << 4);
    }
}

static void quant_q6_k(const float *x, lt_block_q6_k *y) {
    int8_t L[LT_QK_K];
    float scales[16], amax = 0.0f, max_scale = 0.0f;
    for (int s = 0; s < 16; s++) {
        scales[s] = symmetric_levels(16, 32, x + 16 * s, L + 16 * s);
        if (fabsf(scales[s]) > amax) {
            amax = fabsf(scales[s]);
            max_scale = scales[s];
        }
    }
    memset(y, 0, sizeof *y);
    if (amax < GROUP_EPS) {
        y->d = lt_f32_to_f16(0.0f);
        return;
    }
    /* 8-bit signed sub-block scales; the largest maps to -128 */
    const float iscale = -128.0f / max_scale;
    y->d = lt_f32_to_f16(1.0f / iscale);
    for (int s = 0; s < 16; s++) {
        const int v = lt__nearest_int(iscale * scales[s]);
        y->scales[s] = (int8_t)(v < 127 ? v : 127);
    }
    for (int s = 0; s < 16; s++) {
        const float d = lt_f16_to_f32(y->d) * (float)y->scales[s];
        if (d == 0.0f) continue;
        for (int i = 0; i < 16; i++)
            L[16 * s + i] = (int8_t)(clampi(lt__nearest_int(x[16 * s + i] / d), -32, 31) + 32);
    }
    for (int e = 0; e < LT_QK_K; e++) {
        const int h = e / 128, g = (e % 128) / 32, l = e % 32, q = L[e];
        y->ql[64 * h + 32 * (g % 2) + l] |= (uint8_t)(g >= 2 ? (q & 15) << 4 : q & 15);
        y->qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * g));
    }
}

void lt__quant_k(lt_dtype t, const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / LT_QK_K; b++) {
        const float *x = src + b * LT_QK_K;
        switch (t) {
        case LT_Q2_K: quant_q2_k(x, (lt_block_q2_k *)dst + b); break;
        case LT_Q3_K: quant_q3_k(x, (lt_block_q3_k *)dst + b); break;
        case LT_Q4_K: quant_q4_k(x, (lt_block_q4_k *)dst + b); break;
        case LT_Q5_K: quant_q5_k(x, (lt_block_q5_k *)dst + b); break;
        case LT_Q6_K: quant_q6_k(x, (lt_block_q6_k *)dst + b); break;
        default: LT_ASSERT(!"not a K-quant type");
        }
    }
}
