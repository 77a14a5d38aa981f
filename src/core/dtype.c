/* Dtypes, q8_0 blocks, row conversion and tensor descriptors. The other
 * quantisation types' blocks live in quant_legacy.c and quant_k.c. */
#include "core/quant_internal.h"

#include <math.h>
#include <string.h>
#include <strings.h>

_Static_assert(sizeof(lt_block_q8_0) == 34, "q8_0 block must match llama.cpp's 34 bytes");

static const struct {
    const char *name;
    int64_t block;
    size_t block_bytes;
} lt__dtypes[] = {
    [LT_F32] = {"f32", 1, 4},
    [LT_F16] = {"f16", 1, 2},
    [LT_BF16] = {"bf16", 1, 2},
    [LT_Q8_0] = {"q8_0", LT_QK8_0, sizeof(lt_block_q8_0)},
    [LT_Q4_0] = {"q4_0", LT_QK4, sizeof(lt_block_q4_0)},
    [LT_Q4_1] = {"q4_1", LT_QK4, sizeof(lt_block_q4_1)},
    [LT_Q5_0] = {"q5_0", LT_QK4, sizeof(lt_block_q5_0)},
    [LT_Q5_1] = {"q5_1", LT_QK4, sizeof(lt_block_q5_1)},
    [LT_Q2_K] = {"q2_k", LT_QK_K, sizeof(lt_block_q2_k)},
    [LT_Q3_K] = {"q3_k", LT_QK_K, sizeof(lt_block_q3_k)},
    [LT_Q4_K] = {"q4_k", LT_QK_K, sizeof(lt_block_q4_k)},
    [LT_Q5_K] = {"q5_k", LT_QK_K, sizeof(lt_block_q5_k)},
    [LT_Q6_K] = {"q6_k", LT_QK_K, sizeof(lt_block_q6_k)},
};
_Static_assert(sizeof lt__dtypes / sizeof lt__dtypes[0] == LT_DTYPE_COUNT, "dtype table");

const char *lt_dtype_name(lt_dtype t) {
    return (unsigned)t < LT_DTYPE_COUNT ? lt__dtypes[t].name : "?";
}

int lt_dtype_parse(const char *s, lt_dtype *out) {
    for (int i = 0; i < LT_DTYPE_COUNT; i++) {
        if (strcasecmp(s, lt__dtypes[i].name) == 0) {
            *out = (lt_dtype)i;
            return LT_OK;
        }
    }
    return lt_error(LT_EINVAL, "unknown dtype '%s' (expected f32, f16, bf16, q8_0, q4_0, q4_1, "
                               "q5_0, q5_1, q2_k, q3_k, q4_k, q5_k or q6_k)", s);
}

int64_t lt_dtype_block(lt_dtype t) { return lt__dtypes[t].block; }
size_t lt_dtype_block_bytes(lt_dtype t) { return lt__dtypes[t].block_bytes; }

size_t lt_dtype_row_bytes(lt_dtype t, int64_t n) {
    return (size_t)(n / lt__dtypes[t].block) * lt__dtypes[t].block_bytes;
}

void lt_row_to_f32(lt_dtype t, const void *src, float *dst, int64_t n) {
    switch (t) {
    case LT_F32: memcpy(dst, src, (size_t)n * 4); break;
    case LT_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = lt_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    case LT_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = lt_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    case LT_Q8_0: {
        const lt_block_q8_0 *b = src;
        for (int64_t i = 0; i < n / LT_QK8_0; i++) {
            float d = lt_f16_to_f32(b[i].d);
            for (int j = 0; j < LT_QK8_0; j++) dst[i * LT_QK8_0 + j] = d * (float)b[i].qs[j];
        }
        break;
    }
    case LT_Q4_0:
    case LT_Q4_1:
    case LT_Q5_0:
    case LT_Q5_1: lt__dequant_legacy(t, src, dst, n); break;
    case LT_Q2_K:
    case LT_Q3_K:
    case LT_Q4_K:
    case LT_Q5_K:
    case LT_Q6_K: lt__dequant_k(t, src, dst, n); break;
    default: LT_ASSERT(!"bad dtype");
    }
}

/* q8_0 quantisation as llama.cpp does it: d = max|x| / 127, q = round(x / d). */
static void quantize_row_q8_0(const float *x, lt_block_q8_0 *y, int64_t n) {
    for (int64_t i = 0; i < n / LT_QK8_0; i++) {
        float amax = 0.0f;
        for (int j = 0; j < LT_QK8_0; j++) {
            float a = fabsf(x[i * LT_QK8_0 + j]);
            if (a > amax) amax = a;
        }
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = lt_f32_to_f16(d);
        for (int j = 0; j < LT_QK8_0; j++) y[i].qs[j] = (int8_t)roundf(x[i * LT_QK8_0 + j] * id);
    }
}

void lt_row_from_f32(lt_dtype t, const float *src, void *dst, int64_t n) {
    switch (t) {
    case LT_F32: memcpy(dst, src, (size_t)n * 4); break;
    case LT_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = lt_f32_to_f16(src[i]);
        break;
    case LT_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = lt_f32_to_bf16(src[i]);
        break;
    case LT_Q8_0: quantize_row_q8_0(src, dst, n); break;
    case LT_Q4_0:
    case LT_Q4_1:
    case LT_Q5_0:
    case LT_Q5_1: lt__quant_legacy(t, src, dst, n); break;
    case LT_Q2_K:
    case LT_Q3_K:
    case LT_Q4_K:
    case LT_Q5_K:
    case LT_Q6_K: lt__quant_k(t, src, dst, n); break;
    default: LT_ASSERT(!"bad dtype");
    }
}

void lt_q8_0_split_row(const lt_block_q8_0 *src, void *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++) {
        memcpy((void *)lt_q8s_qs(dst, nb, b), src[b].qs, LT_QK8_0);
        memcpy((void *)lt_q8s_scales(dst, nb, b), &src[b].d, sizeof src[b].d);
    }
}

void lt_tensor_init(lt_tensor *t, lt_dtype dtype, int64_t ne0, int64_t ne1, int64_t ne2,
                    int64_t ne3, void *data) {
    t->dtype = dtype;
    t->ne[0] = ne0; t->ne[1] = ne1; t->ne[2] = ne2; t->ne[3] = ne3;
    t->nb[0] = lt_dtype_block_bytes(dtype);
    t->nb[1] = lt_dtype_row_bytes(dtype, ne0);
    t->nb[2] = t->nb[1] * (size_t)ne1;
    t->nb[3] = t->nb[2] * (size_t)ne2;
    t->data = data;
    t->layout = LT_LAYOUT_PLAIN;
}

int64_t lt_tensor_nelements(const lt_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

size_t lt_tensor_span(const lt_tensor *t) {
    size_t span = lt_dtype_row_bytes(t->dtype, t->ne[0]);
    for (int d = 1; d < 4; d++)
        if (t->ne[d] > 1) span += (size_t)(t->ne[d] - 1) * t->nb[d];
    return span;
}

size_t lt_tensor_nbytes(const lt_tensor *t) {
    return lt_dtype_row_bytes(t->dtype, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}
