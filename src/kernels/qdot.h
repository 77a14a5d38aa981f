/* Integer dot products of the quantisation types q4_0 .. q6_k (not q8_0,
 * whose paths are in linear.h) with activations quantised per block as
 * llama.cpp quantises them, the contract the portable paths (qdot_legacy.c,
 * qdot_k.c) and any later vector path share.
 *
 * Activations. The legacy types take x in blocks of 32 (lt__xq32, ggml's
 * q8_1 with f32 fields): d = max|x_b| / 127, q = rint(x * 127 / max|x_b|),
 * s = d * sum(q) (the term q4_1 / q5_1's minimum multiplies). The K-quants
 * take blocks of 256 (lt__xqk, ggml's q8_K): with v the element of largest
 * magnitude (the first of ties), q = nearest(-127 / v * x) capped at 127,
 * d = 1 / (-127 / v), and bsums[j] = the sum of q over elements 16j..16j+15.
 * A block of zeros has d = 0 and q = 0; a block holding a NaN or an
 * infinity has d = NaN and q = 0, so the row's result turns NaN as in f32.
 *
 * Exact arithmetic order (every path must give these bits): a row's blocks
 * b in increasing order, one float accumulator acc from 0; per block the
 * integer sums are exact in int32, then
 *   q4_0, q5_0:   acc = fmaf(d_w * d_x, (float)S, acc),  S = sum (q_w - 8 or 16) q_x
 *   q4_1, q5_1:   acc = fmaf(d_w * d_x, (float)S, acc), S = sum q_w q_x;
 *                 acc = fmaf(m_w, s_x, acc)
 *   q3_k, q6_k:   acc = fmaf(d_w * d_x, (float)S, acc), S = sum over sub-blocks j of
 *                 sc_j * sum (signed level) q_x
 *   q2_k, q4_k, q5_k: the same S with the unsigned levels, then
 *                 acc = fmaf(-(dmin_w * d_x), (float)M, acc), M = sum over sub-blocks
 *                 of m_j * (the bsums of its elements)
 * where d_w * d_x and dmin_w * d_x are rounded once (halves widened to
 * f32). The result is acc. */
#ifndef LT_KERNELS_QDOT_H
#define LT_KERNELS_QDOT_H

#include "looptune/core.h"

typedef struct {
    float d, s;       /* scale, and d * sum(qs) */
    int8_t qs[32];
} lt__xq32;           /* 40 bytes */

typedef struct {
    float d;
    int8_t qs[LT_QK_K];
    int16_t bsums[LT_QK_K / 16];
} lt__xqk;            /* 292 bytes */

/* x[0..n) quantised for the type family: n / 32 lt__xq32 or n / 256 lt__xqk
 * blocks at xq. */
typedef void (*lt__xquant_fn)(const float *x, int64_t n, void *xq);
/* One weight row of nb blocks dotted with its quantised activations. */
typedef float (*lt__qdot_fn)(const void *row, const void *xq, int64_t nb);

typedef struct {
    int64_t block;        /* elements per weight block (= per activation block) */
    size_t xq_bytes;      /* bytes per activation block */
    lt__xquant_fn quant;
    lt__qdot_fn dot;
} lt__qtype;

/* The entry of a type with integer dots here; NULL for f32, f16, bf16, q8_0. */
const lt__qtype *lt__qtype_of(lt_dtype t);

void lt__xq32_quant(const float *x, int64_t n, void *xq);
void lt__xqk_quant(const float *x, int64_t n, void *xq);
float lt__qdot_q4_0(const void *row, const void *xq, int64_t nb);
float lt__qdot_q4_1(const void *row, const void *xq, int64_t nb);
float lt__qdot_q5_0(const void *row, const void *xq, int64_t nb);
float lt__qdot_q5_1(const void *row, const void *xq, int64_t nb);
float lt__qdot_q2_k(const void *row, const void *xq, int64_t nb);
float lt__qdot_q3_k(const void *row, const void *xq, int64_t nb);
float lt__qdot_q4_k(const void *row, const void *xq, int64_t nb);
float lt__qdot_q5_k(const void *row, const void *xq, int64_t nb);
float lt__qdot_q6_k(const void *row, const void *xq, int64_t nb);

/* The vector dots of isa (qdot_avx2.c, qdot_avx512.c: the K-quants q4_k,
 * q5_k, q6_k; AVX2's for the others), the same bits; the portable dot
 * where isa has none for t. */
lt__qdot_fn lt__qdot_of(lt_dtype t, lt_isa isa);
#if LT_HAVE_X86
lt__qdot_fn lt__qdot_avx2_of(lt_dtype t);   /* NULL: none */
lt__qdot_fn lt__qdot_avx512_of(lt_dtype t); /* NULL: none */
#endif

#endif
