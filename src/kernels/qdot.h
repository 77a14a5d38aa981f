/* Integer dot products of the quantisation types q4_0 .. q6_k (not q8_0,
 * whose paths are in linear.h) with activations quantised per block as
 * llama.cpp quantises them, the contract the portable paths (qdot_legacy.c,
 * qdot_k.c) and any later vector path share.
 *
 * Activations. The legacy types take x in blocks of 32 (lt__xq32, ggml's
 * q8_0 with an f32 scale): d = max|x_b| / 127, q = rint(x * 127 / max|x_b|).
 * The K-quants
 * take blocks of 256 (lt__xqk, ggml's q8_K): with v the element of largest
 * magnitude (the first of ties), q = nearest(-127 / v * x) capped at 127,
 * d = 1 / (-127 / v), and bsums[j] = the sum of q over elements 16j..16j+15.
 * A block of zeros has d = 0 and q = 0; a block holding a NaN or an
 * infinity has d = NaN and q = 0, so the row's result turns NaN as in f32.
 * qs holds the q in paired order (lt__xqk_pos): in each 128 elements the
 * second and third 32 swap places, so that 64 bytes of x line up with the
 * low nibbles of 64 bytes of q4_k / q5_k quants (and with half of a q6_k
 * half-block's bytes), and the high nibbles with the next 64; bsums are in
 * element order.
 *
 * Exact arithmetic order (every path must give these bits). q2_k, q3_k and
 * q5_k: a block's products are summed exactly in int32 in 8 lanes: lane l
 * takes the elements e with (e % 32) / 4 == l (those of each of its
 * 32-element groups). A row keeps float accumulators acc[(b % 2) * 8 + l]
 * from 0, so a vector path keeps 2 independent chains of 8 lanes and no
 * block needs a horizontal sum. Per block b and lane l, with a =
 * acc[(b % 2) * 8 + l]:
 *   q2_k, q5_k:   a = fmaf(d_w * d_x, (float)S_l, a), S_l = sum sc(e) level(e) q_x(e)
 *                 with the unsigned levels and each element's sub-block scale; then
 *                 a = fmaf(-(dmin_w * d_x), (float)M_l, a),
 *                 M_l = mn_2l bsums[2l] + mn_2l+1 bsums[2l + 1], mn_i the minimum of
 *                 elements 16i .. 16i + 15
 *   q3_k:         a = fmaf(d_w * d_x, (float)S_l, a), S_l = U_l - c (sc_2l bsums[2l] +
 *                 sc_2l+1 bsums[2l + 1]), U_l = sum sc(e) (level(e) + c) q_x(e): the
 *                 levels made unsigned (c = 4, 32) and the offset taken back per pair
 *                 of 16-element groups
 * The result: the lanes added in halves, n = 16: while n > 1, acc[l] +=
 * acc[l + n / 2] for l < n / 2, then n /= 2; acc[0]. The products d_w * d_x,
 * m_w * d_x and dmin_w * d_x are rounded once (halves widened to f32).
 *
 * The legacy types, q4_k and q6_k keep one chain per row instead, so that
 * their vector paths hold rows, not a row's lanes, in their registers
 * (core.h's interleaved layout, 16 rows a group, one int32 lane a row).
 * From a = 0, per block b in order:
 *   q8_0: a = fmaf(d_w * d_x, (float)S_b, a), S_b = sum q_w q_x
 *   q4_0: a = fmaf(d_w * d_x, (float)S_b, a), S_b = sum (q_w - 8) q_x
 *   q5_0: a = fmaf(d_w * d_x, (float)S_b, a), S_b = sum (q_w - 16) q_x
 *   q4_1, q5_1: a = fmaf(d_w * d_x, (float)S_b, a), S_b = sum q_w q_x;
 *         a = fmaf(m_w * d_x, (float)X_b, a), X_b = sum q_x
 *   q4_k: a = fmaf(d_w * d_x, (float)S_b, a), S_b = sum sc(e) level(e) q_x(e);
 *         a = fmaf(-(dmin_w * d_x), (float)M_b, a), M_b = sum over the 8
 *         sub-blocks j of mn_j (bsums[2j] + bsums[2j + 1])
 *   q6_k: a = fmaf(d_w * d_x, (float)S_b, a), S_b = U - 32 sum_i sc_i bsums[i],
 *         U = sum sc(e) level(e) q_x(e) with the unsigned levels (0 .. 63)
 * each sum exact in int32 (its conversion to float rounds to nearest); the
 * result is a. */
#ifndef LT_KERNELS_QDOT_H
#define LT_KERNELS_QDOT_H

#include <string.h>

#include "looptune/core.h"

typedef struct {
    float d;          /* scale */
    int8_t qs[32];
    /* -8 times the sum of the 32 q: q4_0's offset of 8 (q5_0 takes twice
     * it), taken back in the int32 sums as they start, so the vector dots
     * multiply the unsigned levels */
    int32_t off;
} lt__xq32;           /* 40 bytes */

typedef struct {
    float d;
    int8_t qs[LT_QK_K]; /* paired order: element e at lt__xqk_pos(e) */
    int16_t bsums[LT_QK_K / 16];
} lt__xqk;            /* 292 bytes */

/* Where lt__xqk's qs keeps element e (0 .. 255) of its block: 32-element
 * quarters 1 and 2 of each 128 swapped (its own inverse). */
static inline int lt__xqk_pos(int e) {
    const int q = e >> 5 & 3;
    return (e & ~127) | (q == 1 ? 2 : q == 2 ? 1 : q) << 5 | (e & 31);
}

/* x[0..n) quantised for the type family: n / 32 lt__xq32 or n / 256 lt__xqk
 * blocks at xq. */
typedef void (*lt__xquant_fn)(const float *x, int64_t n, void *xq);
/* One weight row of nb blocks dotted with its quantised activations. */
typedef float (*lt__qdot_fn)(const void *row, const void *xq, int64_t nb);

/* One weight row dotted with ntok (1 .. LT__QDOT_MULTI_MAX) tokens'
 * activations xq[0 .. ntok): out[t] the bits lt__qdot_fn gives token t
 * alone (each block unpacked once for all of them). */
#define LT__QDOT_MULTI_MAX 4
typedef void (*lt__qdot_multi_fn)(const void *row, const void *const *xq, int ntok, int64_t nb,
                                  float *out);

typedef struct {
    int64_t block;        /* elements per weight block (= per activation block) */
    size_t xq_bytes;      /* bytes per activation block */
    lt__xquant_fn quant;
    lt__qdot_fn dot;
} lt__qtype;

/* The lanes of qdot.h's order added in halves: acc[0 .. n) (n a power of
 * two), overwritten. */
static inline float lt__lanes_sum(float *acc, int n) {
    for (; n > 1; n /= 2)
        for (int l = 0; l < n / 2; l++) acc[l] += acc[l + n / 2];
    return acc[0];
}

/* x rounded to the nearest integer, ties to even, for |x| < 2^22: adding
 * 1.5 * 2^23 leaves the integer in the low mantissa bits, rounded by the
 * addition itself (as ggml's nearest_int; the bits of lrintf in the default
 * rounding mode, without its call into libm, and a loop of them vectorises). */
static inline int32_t lt__nearest_even(float x) {
    const float v = x + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* Tokens a group dot takes at once (the others in turns over the group). */
#define LT__X16_TOK_MAX 8
/* The group dot of an interleaved type (lt_x16_has: q8_0, q4_0 .. q5_1, q4_k, q6_k): a
 * group of 16 rows of nb blocks with ntok (1 .. LT__X16_TOK_MAX)
 * tokens' activations xq[0 .. ntok) (lt__xq32 or lt__xqk blocks): out[16 t
 * + i] row i's sum for token t, qdot.h's bits. pf: bytes ahead of each
 * block of the group to prefetch (0: none). */
typedef void (*lt__x16_fn)(const void *group, int64_t nb, const void *const *xq, int ntok,
                           size_t pf, float *out);
/* isa's group dot of t (AVX-VNNI's or AVX-512 VNNI's where the CPU has it
 * and lt__qdot_avoid_vnni is not set); NULL where t has no interleaved
 * layout. */
lt__x16_fn lt__x16_of(lt_dtype t, lt_isa isa);
lt__x16_fn lt__x16_portable_of(lt_dtype t);
/* The tokens per call that isa's group dot of t holds in registers (8 for
 * AVX-512's q8_0 and q6_k, else 4): drivers give it that many at a time, so more
 * tokens pass over a chunk of rows from L2 rather than over each group from
 * L1 (which measured 5% slower for q4_k at 8 tokens). */
int lt__x16_tokens(lt_dtype t, lt_isa isa);
#if LT_HAVE_X86
lt__x16_fn lt__x16_avx2_of(lt_dtype t); /* AVX-VNNI's where the CPU has it */
lt__x16_fn lt__x16_avxvnni_of(lt_dtype t);
lt__x16_fn lt__x16_avx512_of(lt_dtype t); /* with VNNI where the CPU has it */
#endif

/* The entry of a type with integer dots here; NULL for f32, f16, bf16. */
const lt__qtype *lt__qtype_of(lt_dtype t);
/* The entry W's rows take: its dtype's, but none for q8_0 rows that are not
 * interleaved (linear.h's paths, with their act_* modes, take those). */
static inline const lt__qtype *lt__qtype_of_w(const lt_tensor *W) {
    return W->dtype == LT_Q8_0 && W->layout != LT_LAYOUT_X16 ? NULL : lt__qtype_of(W->dtype);
}

void lt__xq32_quant(const float *x, int64_t n, void *xq);
void lt__xqk_quant(const float *x, int64_t n, void *xq);
float lt__qdot_q8_0(const void *row, const void *xq, int64_t nb);
float lt__qdot_q4_0(const void *row, const void *xq, int64_t nb);
float lt__qdot_q4_1(const void *row, const void *xq, int64_t nb);
float lt__qdot_q5_0(const void *row, const void *xq, int64_t nb);
/* the legacy types' chain a past one block (qdot.h's order) */
float lt__q5_0_step(const lt_block_q5_0 *w, const lt__xq32 *x, float a);
float lt__q4_1_step(const lt_block_q4_1 *w, const lt__xq32 *x, float a);
float lt__q5_1_step(const lt_block_q5_1 *w, const lt__xq32 *x, float a);
float lt__qdot_q5_1(const void *row, const void *xq, int64_t nb);
float lt__qdot_q2_k(const void *row, const void *xq, int64_t nb);
float lt__qdot_q3_k(const void *row, const void *xq, int64_t nb);
float lt__qdot_q4_k(const void *row, const void *xq, int64_t nb);
/* q4_k's and q6_k's chain a past one super-block (qdot.h's order) */
float lt__q4k_step(const lt_block_q4_k *w, const lt__xqk *x, float a);
float lt__q6k_step(const lt_block_q6_k *w, const lt__xqk *x, float a);
float lt__qdot_q5_k(const void *row, const void *xq, int64_t nb);
float lt__qdot_q6_k(const void *row, const void *xq, int64_t nb);

/* The activation quantiser of t on isa: the type's own (lt__qtype's), or
 * its vector build with the same bytes (xquant_avx2.c, on AVX2 and up). */
lt__xquant_fn lt__xquant_of(lt_dtype t, lt_isa isa);
#if LT_HAVE_X86
void lt__xqk_quant_avx2(const float *x, int64_t n, void *xq);
void lt__xq32_quant_avx2(const float *x, int64_t n, void *xq);
#endif

/* The vector dots of isa (qdot_avx2.c, qdot_avx512.c: q5_k; AVX2's for
 * q2_k and q3_k; the other types' vector paths are the group dots above),
 * the same bits; the portable dot where isa has none for t. */
lt__qdot_fn lt__qdot_of(lt_dtype t, lt_isa isa);
/* isa's multi-token dot of t (q2_k, q3_k, q5_k, on AVX2 and AVX-512;
 * q2_k's and q3_k's are AVX2's on both);
 * NULL where it has none (callers then take lt__qdot_of's per token). */
lt__qdot_multi_fn lt__qdot_multi_of(lt_dtype t, lt_isa isa);
#if LT_HAVE_X86
lt__qdot_fn lt__qdot_avx2_of(lt_dtype t);   /* NULL: none */
lt__qdot_fn lt__qdot_avx512_of(lt_dtype t); /* NULL: none */
lt__qdot_multi_fn lt__qdot_multi_avx2_of(lt_dtype t);   /* NULL: none */
lt__qdot_multi_fn lt__qdot_multi_avx512_of(lt_dtype t); /* NULL: none */
/* The AVX2 dots built for AVX-VNNI (qdot_avxvnni.c): the AVX2 lookups
 * above return these where the CPU has AVX-VNNI. */
lt__qdot_fn lt__qdot_avxvnni_of(lt_dtype t);
lt__qdot_multi_fn lt__qdot_multi_avxvnni_of(lt_dtype t);
/* Tests set it to take the AVX-512 dots without VNNI on a CPU that has it,
 * and AVX2's without AVX-VNNI. */
extern bool lt__qdot_avoid_vnni;
#endif

#endif
