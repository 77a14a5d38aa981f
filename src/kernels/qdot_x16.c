/* The group dots of the interleaved types (core.h: q8_0, q4_0 .. q5_1, q4_k, q6_k), portably,
 * in qdot.h's order, and the lookup of each ISA's (qdot_x16_avx2.c,
 * qdot_x16_avxvnni.c, qdot_x16_avx512.c). */
#include "kernels/qdot.h"

#include <math.h>

enum { PIECE = 4 * LT_X16_ROWS, BLOCK_QS = 4 * PIECE };

static void group_q8_0(const void *group, int64_t nb, const void *const *xq, int ntok, size_t pf,
                       float *out) {
    (void)pf;
    const int8_t *qs = group;
    const uint16_t *sc = (const uint16_t *)(qs + (size_t)nb * 2 * BLOCK_QS);
    for (int t = 0; t < ntok; t++) {
        for (int i = 0; i < LT_X16_ROWS; i++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const lt__xq32 *x = (const lt__xq32 *)xq[t] + b;
                const int8_t *q = qs + (size_t)b * 2 * BLOCK_QS + 4 * i;
                int32_t s = 0;
                for (int j = 0; j < 8; j++)
                    for (int e = 0; e < 4; e++) s += (int32_t)q[j * PIECE + e] * x->qs[4 * j + e];
                acc = fmaf(lt_f16_to_f32(sc[b * LT_X16_ROWS + i]) * x->d, (float)s, acc);
            }
            out[t * LT_X16_ROWS + i] = acc;
        }
    }
}

static void group_q4_0(const void *group, int64_t nb, const void *const *xq, int ntok, size_t pf,
                       float *out) {
    (void)pf;
    const uint8_t *qs = group;
    const uint16_t *sc = (const uint16_t *)(qs + (size_t)nb * BLOCK_QS);
    for (int t = 0; t < ntok; t++) {
        for (int i = 0; i < LT_X16_ROWS; i++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const lt__xq32 *x = (const lt__xq32 *)xq[t] + b;
                const uint8_t *q = qs + (size_t)b * BLOCK_QS + 4 * i;
                int32_t s = x->off; /* -8 sum q_x: the levels' offset */
                for (int j = 0; j < 4; j++)
                    for (int e = 0; e < 4; e++) {
                        const uint8_t v = q[j * PIECE + e];
                        s += (int32_t)(v & 0x0f) * x->qs[4 * j + e] +
                             (int32_t)(v >> 4) * x->qs[16 + 4 * j + e];
                    }
                acc = fmaf(lt_f16_to_f32(sc[b * LT_X16_ROWS + i]) * x->d, (float)s, acc);
            }
            out[t * LT_X16_ROWS + i] = acc;
        }
    }
}

/* q4_1 .. q6_k: each row's block taken out of the group, then the one-row
 * step */
static void group_blocks(lt_dtype dt, const void *group, int64_t nb, const void *const *xq,
                         int ntok, float *out) {
    for (int t = 0; t < ntok; t++)
        for (int i = 0; i < LT_X16_ROWS; i++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                union {
                    lt_block_q4_1 q41;
                    lt_block_q5_0 q5;
                    lt_block_q5_1 q51;
                    lt_block_q4_k q4;
                    lt_block_q6_k q6;
                } w;
                lt_x16_block(dt, group, nb, i, b, &w);
                const lt__xq32 *x32 = xq[t];
                const lt__xqk *xk = xq[t];
                if (dt == LT_Q4_1) acc = lt__q4_1_step(&w.q41, x32 + b, acc);
                else if (dt == LT_Q5_0) acc = lt__q5_0_step(&w.q5, x32 + b, acc);
                else if (dt == LT_Q5_1) acc = lt__q5_1_step(&w.q51, x32 + b, acc);
                else if (dt == LT_Q4_K) acc = lt__q4k_step(&w.q4, xk + b, acc);
                else acc = lt__q6k_step(&w.q6, xk + b, acc);
            }
            out[t * LT_X16_ROWS + i] = acc;
        }
}

#define GROUP_OF_BLOCKS(name, type)                                                            \
    static void name(const void *group, int64_t nb, const void *const *xq, int ntok,           \
                     size_t pf, float *out) {                                                  \
        (void)pf;                                                                              \
        group_blocks(type, group, nb, xq, ntok, out);                                          \
    }
GROUP_OF_BLOCKS(group_q4_1, LT_Q4_1)
GROUP_OF_BLOCKS(group_q5_0, LT_Q5_0)
GROUP_OF_BLOCKS(group_q5_1, LT_Q5_1)
GROUP_OF_BLOCKS(group_q4_k, LT_Q4_K)
GROUP_OF_BLOCKS(group_q6_k, LT_Q6_K)

lt__x16_fn lt__x16_portable_of(lt_dtype t) {
    switch (t) {
    case LT_Q8_0: return group_q8_0;
    case LT_Q4_0: return group_q4_0;
    case LT_Q4_1: return group_q4_1;
    case LT_Q5_0: return group_q5_0;
    case LT_Q5_1: return group_q5_1;
    case LT_Q4_K: return group_q4_k;
    case LT_Q6_K: return group_q6_k;
    default: return NULL;
    }
}

lt__x16_fn lt__x16_of(lt_dtype t, lt_isa isa) {
    lt__x16_fn f = NULL;
#if LT_HAVE_X86
    if (isa >= LT_ISA_AVX512) f = lt__x16_avx512_of(t);
    if (!f && isa >= LT_ISA_AVX2) f = lt__x16_avx2_of(t);
#else
    (void)isa;
#endif
    return f ? f : lt__x16_portable_of(t);
}

int lt__x16_tokens(lt_dtype t, lt_isa isa) {
    return (t == LT_Q8_0 || t == LT_Q6_K) && isa >= LT_ISA_AVX512 ? LT__X16_TOK_MAX
                                                                  : LT__QDOT_MULTI_MAX;
}
