/* The per-family halves of lt_row_to_f32 / lt_row_from_f32: the legacy
 * quantisation types (quant_legacy.c) and the K-quants (quant_k.c). */
#ifndef LT_CORE_QUANT_INTERNAL_H
#define LT_CORE_QUANT_INTERNAL_H

#include "looptune/core.h"

/* n a multiple of the type's block; t one of the family's types. */
void lt__dequant_legacy(lt_dtype t, const void *src, float *dst, int64_t n);
void lt__quant_legacy(lt_dtype t, const float *src, void *dst, int64_t n);
void lt__dequant_k(lt_dtype t, const void *src, float *dst, int64_t n);
void lt__quant_k(lt_dtype t, const float *src, void *dst, int64_t n);

/* round(x) for |x| < 2^22 as ggml's nearest_int computes it (ties to even,
 * through the float adder). */
static inline int lt__nearest_int(float x) {
    float v = x + 12582912.0f; /* 1.5 * 2^23: the integer lands in the low mantissa bits */
    int32_t i;
    __builtin_memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

#endif
