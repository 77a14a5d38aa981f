/* The group dots (qdot.h) of q8_0, q4_0 .. q5_1, q4_k and q6_k on AVX-512: a 512-bit lane of
 * 32 bits a row, the group's 16 rows in one register, so a block's int32
 * sum per row is vertical and one conversion, product and FMA take 16
 * rows' block; each block's quants unpacked once for every token. VNNI's
 * vpdpbusd sums four products a lane at once (vpdpwssd the scaled pairs);
 * without it vpmaddubsw and vpmaddwd do (levels <= 15 against |x| <= 127:
 * 16 products a 16-bit lane at most 30480, exact). */
#include "kernels/qdot.h"
#include "kernels/qdot_x86.h"

#include <immintrin.h>
#include <string.h>

enum { PIECE = 4 * LT_X16_ROWS, BLOCK_QS = 4 * PIECE, Q80_QS = 8 * PIECE };

/* x's 4 bytes at byte o of its qs */
static inline int32_t xq4(const int8_t *qs, int o) {
    int32_t v;
    memcpy(&v, qs + o, 4);
    return v;
}

/* The exact int32 sums of 16 rows' block against x, offset included, from
 * the block's four pieces v (the low nibbles elements 4j .. 4j + 3, the high
 * ones 16 + 4j ..). With VNNI the high nibbles stay in place, 16 times their
 * level: their sums are multiples of 16, shifted back exactly. */
static inline __attribute__((always_inline)) __m512i block_sum(const __m512i v[4],
                                                               const lt__xq32 *x,
                                                               const bool vnni) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    if (vnni) {
        const __m512i mf0 = _mm512_set1_epi8((char)0xf0);
        __m512i s0 = _mm512_set1_epi32(x->off), s1 = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            s0 = _mm512_dpbusd_epi32(s0, _mm512_and_si512(v[j], m4),
                                     _mm512_set1_epi32(xq4(x->qs, 4 * j)));
            s1 = _mm512_dpbusd_epi32(s1, _mm512_and_si512(v[j], mf0),
                                     _mm512_set1_epi32(xq4(x->qs, 16 + 4 * j)));
        }
        return _mm512_add_epi32(s0, _mm512_srai_epi32(s1, 4));
    }
    __m512i p = _mm512_maddubs_epi16(_mm512_and_si512(v[0], m4), _mm512_set1_epi32(xq4(x->qs, 0)));
    for (int j = 0; j < 4; j++) {
        if (j)
            p = _mm512_add_epi16(p, _mm512_maddubs_epi16(_mm512_and_si512(v[j], m4),
                                                         _mm512_set1_epi32(xq4(x->qs, 4 * j))));
        p = _mm512_add_epi16(p, _mm512_maddubs_epi16(
                                    _mm512_and_si512(_mm512_srli_epi16(v[j], 4), m4),
                                    _mm512_set1_epi32(xq4(x->qs, 16 + 4 * j))));
    }
    return _mm512_add_epi32(_mm512_madd_epi16(p, _mm512_set1_epi16(1)),
                            _mm512_set1_epi32(x->off));
}

static inline __attribute__((always_inline)) void q4_0_n(const uint8_t *qs, int64_t nb,
                                                         const void *const *xq, const int nt,
                                                         size_t pf, float *out, const bool vnni) {
    const uint16_t *sc = (const uint16_t *)(qs + (size_t)nb * BLOCK_QS);
    __m512 acc[LT__QDOT_MULTI_MAX];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *q = qs + (size_t)b * BLOCK_QS;
        if (pf) {
            lt__prefetch_lines(q, pf, BLOCK_QS, 0, BLOCK_QS);
            lt__prefetch_far((const char *)(sc + b * LT_X16_ROWS) + pf);
        }
        __m512i v[4];
        for (int j = 0; j < 4; j++) v[j] = _mm512_loadu_si512(q + j * PIECE);
        const __m512 dw =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + b * LT_X16_ROWS)));
        for (int t = 0; t < nt; t++) {
            const lt__xq32 *x = (const lt__xq32 *)xq[t] + b;
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(x->d));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sum(v, x, vnni)), d, acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(out + t * LT_X16_ROWS, acc[t]);
}

/* ---- q8_0 ---- */

/* The exact int32 sums of 16 rows' block against x from its eight pieces w
 * (elements 4j .. 4j + 3 of each row). With VNNI w holds the quants plus 128
 * (unsigned, q8_0_n's xor): sum (q + 128) x = sum q x + 128 sum x, so the
 * chains start at -128 sum x = 16 off. Without it |q| against x with q's
 * sign (pairs within 2 x 128 x 127: exact in vpmaddubsw), each piece's pairs
 * widened before they add. */
static inline __attribute__((always_inline)) __m512i q8_0_sum(const __m512i w[8],
                                                              const lt__xq32 *x,
                                                              const bool vnni) {
    if (vnni) {
        __m512i s0 = _mm512_set1_epi32(16 * x->off), s1 = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            s0 = _mm512_dpbusd_epi32(s0, w[j], _mm512_set1_epi32(xq4(x->qs, 4 * j)));
            s1 = _mm512_dpbusd_epi32(s1, w[j + 4], _mm512_set1_epi32(xq4(x->qs, 16 + 4 * j)));
        }
        return _mm512_add_epi32(s0, s1);
    }
    const __m512i one = _mm512_set1_epi16(1);
    __m512i s = _mm512_setzero_si512();
    for (int j = 0; j < 8; j++) {
        const __m512i xv = _mm512_set1_epi32(xq4(x->qs, 4 * j));
        const __m512i sx =
            _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(w[j]), _mm512_setzero_si512(), xv);
        s = _mm512_add_epi32(s, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w[j]), sx),
                                                  one));
    }
    return s;
}

/* Each block's pieces loaded (and with VNNI offset) once for every token. */
static inline __attribute__((always_inline)) void q8_0_n(const uint8_t *qs, int64_t nb,
                                                         const void *const *xq, const int nt,
                                                         size_t pf, float *out, const bool vnni) {
    const uint16_t *sc = (const uint16_t *)(qs + (size_t)nb * Q80_QS);
    __m512 acc[LT__X16_TOK_MAX];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *q = qs + (size_t)b * Q80_QS;
        if (pf) {
            lt__prefetch_lines(q, pf, Q80_QS, 0, Q80_QS);
            lt__prefetch_far((const char *)(sc + b * LT_X16_ROWS) + pf);
        }
        __m512i w[8];
        for (int j = 0; j < 8; j++) {
            w[j] = _mm512_loadu_si512(q + j * PIECE);
            if (vnni) w[j] = _mm512_xor_si512(w[j], _mm512_set1_epi8(-128));
        }
        const __m512 dw =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + b * LT_X16_ROWS)));
        for (int t = 0; t < nt; t++) {
            const lt__xq32 *x = (const lt__xq32 *)xq[t] + b;
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(x->d));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q8_0_sum(w, x, vnni)), d, acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(out + t * LT_X16_ROWS, acc[t]);
}

/* ---- q4_1, q5_0, q5_1 ---- */

/* A block of 16 rows (core.h): four pieces of quants, with fifth bits (q5_0,
 * q5_1) a piece of them, the rows' d, with a minimum (q4_1, q5_1) their m. */
static inline int legacy_block(const bool bits, const bool min) {
    return (bits ? 5 : 4) * PIECE + (min ? 4 : 2) * LT_X16_ROWS;
}

/* The block's levels: w[j] elements 4j .. 4j + 3, w[4 + j] elements 16 + 4j
 * ..; fifth bits (core.h's order: bit j of byte k for the low nibble's
 * element, bit 4 + j for the high's) put at bit 4 by one shift of the lane
 * each (A | (B & C): 0xf8). Without them and with VNNI the high nibbles stay
 * in place, 16 times their level (legacy_sum shifts their sums back). */
static inline __attribute__((always_inline)) void legacy_levels(const uint8_t *blk, __m512i w[8],
                                                                const bool bits,
                                                                const bool vnni) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10);
    const __m512i h = bits ? _mm512_loadu_si512(blk + 4 * PIECE) : m4;
    for (int j = 0; j < 4; j++) {
        const __m512i v = _mm512_loadu_si512(blk + j * PIECE);
        w[j] = _mm512_and_si512(v, m4);
        if (!bits) {
            w[j + 4] = vnni ? _mm512_and_si512(v, _mm512_set1_epi8((char)0xf0))
                            : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            continue;
        }
        w[j] = _mm512_ternarylogic_epi32(w[j], _mm512_slli_epi32(h, 4 - j), m10, 0xf8);
        w[j + 4] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                             _mm512_srli_epi32(h, j), m10, 0xf8);
    }
}

/* The exact int32 sums of the levels w against x: q5_0's offset of 16
 * (twice x's off) starts both chains. Without VNNI a 16-bit lane takes 8
 * products, 8 x 31 x 127 at most. */
static inline __attribute__((always_inline)) __m512i legacy_sum(const __m512i w[8],
                                                                const lt__xq32 *x,
                                                                const bool bits, const bool min,
                                                                const bool vnni) {
    const __m512i off = min ? _mm512_setzero_si512() : _mm512_set1_epi32(x->off);
    if (vnni) {
        __m512i s0 = off, s1 = off;
        for (int j = 0; j < 4; j++) {
            s0 = _mm512_dpbusd_epi32(s0, w[j], _mm512_set1_epi32(xq4(x->qs, 4 * j)));
            s1 = _mm512_dpbusd_epi32(s1, w[j + 4], _mm512_set1_epi32(xq4(x->qs, 16 + 4 * j)));
        }
        return _mm512_add_epi32(s0, bits ? s1 : _mm512_srai_epi32(s1, 4));
    }
    __m512i p0 = _mm512_maddubs_epi16(w[0], _mm512_set1_epi32(xq4(x->qs, 0)));
    __m512i p1 = _mm512_maddubs_epi16(w[4], _mm512_set1_epi32(xq4(x->qs, 16)));
    for (int j = 1; j < 4; j++) {
        p0 = _mm512_add_epi16(p0, _mm512_maddubs_epi16(w[j], _mm512_set1_epi32(xq4(x->qs, 4 * j))));
        p1 = _mm512_add_epi16(p1, _mm512_maddubs_epi16(w[j + 4],
                                                       _mm512_set1_epi32(xq4(x->qs, 16 + 4 * j))));
    }
    const __m512i one = _mm512_set1_epi16(1);
    return _mm512_add_epi32(_mm512_add_epi32(_mm512_madd_epi16(p0, one), _mm512_madd_epi16(p1, one)),
                            _mm512_add_epi32(off, off));
}

static inline __attribute__((always_inline)) void legacy_n(const uint8_t *g, int64_t nb,
                                                           const void *const *xq, const int nt,
                                                           size_t pf, float *out, const bool vnni,
                                                           const bool bits, const bool min) {
    const int bb = legacy_block(bits, min), d_at = (bits ? 5 : 4) * PIECE;
    __m512 acc[LT__QDOT_MULTI_MAX];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = g + (size_t)b * bb;
        if (pf)
            lt__prefetch_lines(blk, pf, bb, 0, bb);
        __m512i w[8];
        legacy_levels(blk, w, bits, vnni);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + d_at)));
        const __m512 mw = min ? _mm512_cvtph_ps(_mm256_loadu_si256(
                                    (const __m256i *)(blk + d_at + 2 * LT_X16_ROWS)))
                              : dw;
        for (int t = 0; t < nt; t++) {
            const lt__xq32 *x = (const lt__xq32 *)xq[t] + b;
            const __m512 dx = _mm512_set1_ps(x->d);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(legacy_sum(w, x, bits, min, vnni)),
                                     _mm512_mul_ps(dw, dx), acc[t]);
            if (min) /* the minimum against the x sum, -off / 8 */
                acc[t] = _mm512_fmadd_ps(_mm512_set1_ps((float)(-x->off / 8)), _mm512_mul_ps(mw, dx),
                                         acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(out + t * LT_X16_ROWS, acc[t]);
}

#define LEGACY_BODY(name, bits, min)                                                           \
    static inline __attribute__((always_inline)) void name(                                    \
        const uint8_t *g, int64_t nb, const void *const *xq, const int nt, size_t pf,          \
        float *out, const bool vnni) {                                                         \
        legacy_n(g, nb, xq, nt, pf, out, vnni, bits, min);                                     \
    }
LEGACY_BODY(q4_1_n, false, true)
LEGACY_BODY(q5_0_n, true, false)
LEGACY_BODY(q5_1_n, true, true)

/* ---- q4_k ---- */

enum { K_HEAD = 4 * LT_X16_ROWS + 3 * PIECE, K_BLOCK = K_HEAD + 32 * PIECE };

/* The 16 rows' eight six-bit scales and eight minimums as bytes, four a
 * lane (byte j % 4 of q[j / 4] is sub-block j's scale, of q[2 + j / 4] its
 * minimum), from the three scale pieces u (lt_qk_scale_min's bit layout,
 * a row a lane): eleven instructions for all sixteen, then one byte
 * shuffle (lane_shuffle) takes out each. */
static inline __attribute__((always_inline)) void scale_bytes(const __m512i u[3], __m512i q[4]) {
    const __m512i m6 = _mm512_set1_epi8(63), m4 = _mm512_set1_epi8(15),
                  m30 = _mm512_set1_epi8(0x30);
    q[0] = _mm512_and_si512(u[0], m6);
    q[2] = _mm512_and_si512(u[1], m6);
    /* sub-blocks 4 .. 7: the low four bits from u[2]'s nibbles, the top two
     * from u[0]'s (scales) or u[1]'s (minimums) top bits; a 16-bit shift
     * moves the next byte's bits only into bits the masks clear */
    q[1] = _mm512_or_si512(_mm512_and_si512(u[2], m4),
                           _mm512_and_si512(_mm512_srli_epi16(u[0], 2), m30));
    q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(u[2], 4), m4),
                           _mm512_and_si512(_mm512_srli_epi16(u[1], 2), m30));
}

/* The vpshufb control that fills byte k of every 32-bit lane from its byte
 * s_k (zero where s_k < 0). */
static inline __attribute__((always_inline)) __m512i lane_shuffle(int s0, int s1, int s2, int s3) {
    return _mm512_set4_epi32(lt__shuf_lane(3, s0, s1, s2, s3), lt__shuf_lane(2, s0, s1, s2, s3),
                             lt__shuf_lane(1, s0, s1, s2, s3), lt__shuf_lane(0, s0, s1, s2, s3));
}

/* x's 4 bytes at byte o of its qs */
static inline int32_t x4(const lt__xqk *x, int o) {
    int32_t v;
    memcpy(&v, x->qs + o, 4);
    return v;
}

/* s + the products of each lane's two 16-bit pairs (exact) */
static inline __attribute__((always_inline)) __m512i acc_madd(__m512i s, __m512i p, __m512i q,
                                                              const bool vnni) {
    if (vnni) return _mm512_dpwssd_epi32(s, p, q);
    return _mm512_add_epi32(s, _mm512_madd_epi16(p, q));
}

static inline __attribute__((always_inline)) void q4_k_n(const uint8_t *g, int64_t nb,
                                                         const void *const *xq, const int nt,
                                                         size_t pf, float *out, const bool vnni) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[LT__QDOT_MULTI_MAX];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = g + (size_t)b * K_BLOCK;
        __m512i u[3], q[4];
        for (int k = 0; k < 3; k++) u[k] = _mm512_loadu_si512(blk + 4 * LT_X16_ROWS + k * PIECE);
        scale_bytes(u, q);
        __m512i S[LT__QDOT_MULTI_MAX], M[LT__QDOT_MULTI_MAX];
        for (int t = 0; t < nt; t++) S[t] = M[t] = _mm512_setzero_si512();
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            _Pragma("GCC unroll 2") for (int hi = 0; hi < 2; hi++) { /* sub-block 2c + hi */
                if (pf) lt__prefetch_step(blk, pf, K_BLOCK, 2 * c + hi);
                __m512i w[8];
                for (int p = 0; p < 8; p++) {
                    const __m512i v = _mm512_loadu_si512(blk + K_HEAD + (8 * c + p) * PIECE);
                    w[p] = _mm512_and_si512(hi ? _mm512_srli_epi16(v, 4) : v, m4);
                }
                const int j = 2 * c + hi; /* the scale in both pairs of the lane */
                const __m512i sc =
                    _mm512_shuffle_epi8(q[j / 4], lane_shuffle(j % 4, -1, j % 4, -1));
                _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
                    const lt__xqk *x = (const lt__xqk *)xq[t] + b;
                    /* sub-block 2c + hi in x's paired order (lt__xqk_pos) */
                    const int e0 = 128 * (c >> 1) + 32 * (c & 1) + 64 * hi;
                    if (vnni) {
                        /* the sub-block's halves summed apart by vpdpbusd, each
                         * within 16 bits (16 x 15 x 127), side by side in a lane
                         * (a1's low bytes over a0's high ones by one masked
                         * vpshufb) and times the scale by one vpdpwssd: a
                         * vpmulld costs four vpdpbusd's slots, and a shift would
                         * take the port the dots need */
                        __m512i a0 = _mm512_setzero_si512(), a1 = a0;
                        for (int p = 0; p < 8; p += 2) {
                            a0 = _mm512_dpbusd_epi32(a0, w[p], _mm512_set1_epi32(x4(x, e0 + 4 * p)));
                            a1 = _mm512_dpbusd_epi32(a1, w[p + 1],
                                                     _mm512_set1_epi32(x4(x, e0 + 4 * p + 4)));
                        }
                        const __m512i a = _mm512_mask_shuffle_epi8(a0, 0xccccccccccccccccull, a1,
                                                                   lane_shuffle(-1, -1, 0, 1));
                        S[t] = _mm512_dpwssd_epi32(S[t], a, sc);
                        LT__PIN(S[t]);
                        continue;
                    }
                    __m512i p16 = _mm512_maddubs_epi16(w[0], _mm512_set1_epi32(x4(x, e0)));
                    for (int p = 1; p < 8; p++)
                        p16 = _mm512_add_epi16(
                            p16, _mm512_maddubs_epi16(w[p], _mm512_set1_epi32(x4(x, e0 + 4 * p))));
                    S[t] = acc_madd(S[t], p16, sc, vnni);
                    LT__PIN(S[t]);
                }
            }
        for (int k = 0; k < 4; k++) { /* the minimums of sub-blocks 2k, 2k + 1 against their x sums */
            const __m512i mn = _mm512_shuffle_epi8(
                q[2 + k / 2], lane_shuffle(2 * k % 4, -1, (2 * k + 1) % 4, -1));
            for (int t = 0; t < nt; t++) {
                const int16_t *bs = ((const lt__xqk *)xq[t] + b)->bsums;
                const uint32_t pair = (uint16_t)(bs[4 * k] + bs[4 * k + 1]) |
                                      (uint32_t)(uint16_t)(bs[4 * k + 2] + bs[4 * k + 3]) << 16;
                M[t] = acc_madd(M[t], mn, _mm512_set1_epi32((int32_t)pair), vnni);
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 2 * LT_X16_ROWS)));
        for (int t = 0; t < nt; t++) {
            const __m512 dx = _mm512_set1_ps(((const lt__xqk *)xq[t] + b)->d);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[t]), _mm512_mul_ps(dw, dx), acc[t]);
            const __m512 nm = _mm512_castsi512_ps(_mm512_xor_si512(
                _mm512_castps_si512(_mm512_mul_ps(dm, dx)), _mm512_set1_epi32((int)0x80000000u)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M[t]), nm, acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(out + t * LT_X16_ROWS, acc[t]);
}

/* ---- q6_k ---- */

enum { Q6_QL = 4 * PIECE, Q6_QH = Q6_QL + 32 * PIECE, Q6_D = Q6_QH + 16 * PIECE,
       Q6_BLOCK = Q6_D + 2 * LT_X16_ROWS };

/* Scale i (0 .. 15) of 16 rows, sign-extended, from the four scale pieces. */
static inline __attribute__((always_inline)) __m512i q6_scale(const uint8_t *blk, int i) {
    const __m512i v = _mm512_loadu_si512(blk + (i / 4) * PIECE);
    return _mm512_srai_epi32(_mm512_shuffle_epi8(v, lane_shuffle(-1, -1, -1, i % 4)), 24);
}

/* Scales 2k and 2k + 1 of 16 rows, sign-extended, as each lane's two 16-bit
 * halves. */
static inline __attribute__((always_inline)) __m512i q6_scale_pair(const uint8_t *blk, int k) {
    const __m512i v = _mm512_loadu_si512(blk + (k / 2) * PIECE);
    return _mm512_srai_epi16(
        _mm512_shuffle_epi8(v, lane_shuffle(-1, 2 * k % 4, -1, (2 * k + 1) % 4)), 8);
}

/* One token's U of elements 128h + 32q .. + 31 with VNNI: the low four bits
 * and the top two bits of each level dotted apart, both masked in place
 * (levels times 1 or 16, top bits times 1, 4, 16 or 64), their exact sums
 * shifted to (low + 16 top) after: two AND a piece instead of five
 * instructions that join the bits, for a second vpdpbusd. Where one token
 * takes the block, that is fewer instructions. */
static inline __attribute__((always_inline)) __m512i q6_split_u(const uint8_t *blk, int h, int q,
                                                                const lt__xqk *x, int e0,
                                                                __m512i s0, __m512i s1) {
    const __m512i ml = _mm512_set1_epi8(q >= 2 ? (char)0xf0 : 0x0f),
                  mh = _mm512_set1_epi8((char)(3 << 2 * q));
    __m512i l[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}, t[2] = {l[0], l[1]};
    for (int p = 0; p < 8; p++) {
        const __m512i l4 = _mm512_loadu_si512(blk + Q6_QL + (16 * h + 8 * (q % 2) + p) * PIECE);
        const __m512i h2 = _mm512_loadu_si512(blk + Q6_QH + (8 * h + p) * PIECE);
        const __m512i xb = _mm512_set1_epi32(x4(x, e0 + 4 * p));
        l[p / 4] = _mm512_dpbusd_epi32(l[p / 4], _mm512_and_si512(l4, ml), xb);
        t[p / 4] = _mm512_dpbusd_epi32(t[p / 4], _mm512_and_si512(h2, mh), xb);
    }
    __m512i a[2];
    for (int i = 0; i < 2; i++) {
        const __m512i lo = q >= 2 ? _mm512_srai_epi32(l[i], 4) : l[i];
        const __m512i top = q == 0 ? _mm512_slli_epi32(t[i], 4)
                          : q == 1 ? _mm512_slli_epi32(t[i], 2)
                          : q == 2 ? t[i] : _mm512_srai_epi32(t[i], 2);
        a[i] = _mm512_add_epi32(lo, top);
    }
    return _mm512_add_epi32(_mm512_mullo_epi32(a[0], s0), _mm512_mullo_epi32(a[1], s1));
}

static inline __attribute__((always_inline)) void q6_k_n(const uint8_t *g, int64_t nb,
                                                         const void *const *xq, const int nt,
                                                         size_t pf, float *out, const bool vnni) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    __m512 acc[LT__X16_TOK_MAX];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = g + (size_t)b * Q6_BLOCK;
        __m512i U[LT__X16_TOK_MAX], O[LT__X16_TOK_MAX];
        for (int t = 0; t < nt; t++) U[t] = O[t] = _mm512_setzero_si512();
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) { /* elements 128h + 32q .. + 31 */
            if (pf) lt__prefetch_step(blk, pf, Q6_BLOCK, 4 * h + q);
            const __m512i s0 = q6_scale(blk, 8 * h + 2 * q), s1 = q6_scale(blk, 8 * h + 2 * q + 1);
            /* x's paired order: quarters 1 and 2 of each 128 swapped */
            const int e0 = 128 * h + 32 * (q == 1 ? 2 : q == 2 ? 1 : q);
            if (vnni && nt == 1) {
                U[0] = _mm512_add_epi32(U[0], q6_split_u(blk, h, q, (const lt__xqk *)xq[0] + b,
                                                         e0, s0, s1));
                LT__PIN(U[0]);
                continue;
            }
            __m512i w[8];
            for (int p = 0; p < 8; p++) {
                const __m512i l4 = _mm512_loadu_si512(blk + Q6_QL + (16 * h + 8 * (q % 2) + p) * PIECE);
                const __m512i h2 = _mm512_loadu_si512(blk + Q6_QH + (8 * h + p) * PIECE);
                const __m512i lo = _mm512_and_si512(q >= 2 ? _mm512_srli_epi16(l4, 4) : l4, m4);
                const __m512i hi = q == 0 ? _mm512_slli_epi16(h2, 4)
                                 : q == 1 ? _mm512_slli_epi16(h2, 2)
                                 : q == 2 ? h2 : _mm512_srli_epi16(h2, 2);
                w[p] = _mm512_or_si512(lo, _mm512_and_si512(hi, m30));
            }
            _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++) {
                const lt__xqk *x = (const lt__xqk *)xq[t] + b;
                if (vnni) {
                    __m512i a0 = _mm512_setzero_si512(), a1 = a0;
                    for (int p = 0; p < 4; p++) {
                        a0 = _mm512_dpbusd_epi32(a0, w[p], _mm512_set1_epi32(x4(x, e0 + 4 * p)));
                        a1 = _mm512_dpbusd_epi32(a1, w[p + 4], _mm512_set1_epi32(x4(x, e0 + 16 + 4 * p)));
                    }
                    U[t] = _mm512_add_epi32(U[t], _mm512_add_epi32(_mm512_mullo_epi32(a0, s0),
                                                                   _mm512_mullo_epi32(a1, s1)));
                    LT__PIN(U[t]);
                    continue;
                }
                /* two pieces' pairs at most 2 x 2 x 63 x 127 in 16 bits */
                const __m512i sc0 = _mm512_or_si512(_mm512_and_si512(s0, _mm512_set1_epi32(0xffff)),
                                                    _mm512_slli_epi32(s0, 16));
                const __m512i sc1 = _mm512_or_si512(_mm512_and_si512(s1, _mm512_set1_epi32(0xffff)),
                                                    _mm512_slli_epi32(s1, 16));
                for (int p = 0; p < 8; p += 2) {
                    const __m512i p16 = _mm512_add_epi16(
                        _mm512_maddubs_epi16(w[p], _mm512_set1_epi32(x4(x, e0 + 4 * p))),
                        _mm512_maddubs_epi16(w[p + 1], _mm512_set1_epi32(x4(x, e0 + 4 * p + 4))));
                    U[t] = _mm512_add_epi32(U[t], _mm512_madd_epi16(p16, p < 4 ? sc0 : sc1));
                }
                LT__PIN(U[t]);
            }
        }
        for (int k = 0; k < 8; k++) { /* the offset of 32: scales 2k, 2k + 1 against their x sums */
            const __m512i pr = q6_scale_pair(blk, k);
            for (int t = 0; t < nt; t++) {
                int32_t bs;
                memcpy(&bs, ((const lt__xqk *)xq[t] + b)->bsums + 2 * k, 4);
                O[t] = acc_madd(O[t], pr, _mm512_set1_epi32(bs), vnni);
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + Q6_D)));
        for (int t = 0; t < nt; t++) {
            const __m512i S = _mm512_sub_epi32(U[t], _mm512_slli_epi32(O[t], 5));
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(((const lt__xqk *)xq[t] + b)->d));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), d, acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(out + t * LT_X16_ROWS, acc[t]);
}

/* The exported dots: one copy per count of tokens, with and without VNNI;
 * more tokens than the body holds (most: 4, q8_0's and q6_k's 8) in turns over the
 * group, the later turns reading it from L1. */
#define GROUP_CASE(b, v, n) \
    case n: b(group, nb, xq + t0, n, t0 ? 0 : pf, out + t0 * LT_X16_ROWS, v); break;
#define GROUP_CASES4(b, v) GROUP_CASE(b, v, 1) GROUP_CASE(b, v, 2) GROUP_CASE(b, v, 3) \
    default: GROUP_CASE(b, v, 4)
#define GROUP_CASES8(b, v)                                                                     \
    GROUP_CASE(b, v, 1) GROUP_CASE(b, v, 2) GROUP_CASE(b, v, 3) GROUP_CASE(b, v, 4)            \
    GROUP_CASE(b, v, 5) GROUP_CASE(b, v, 6) GROUP_CASE(b, v, 7) default: GROUP_CASE(b, v, 8)
#define GROUP_FN_MOST(name, body, vnni, most)                                                  \
    static void name(const void *group, int64_t nb, const void *const *xq, int ntok,           \
                     size_t pf, float *out) {                                                  \
        for (int t0 = 0; t0 < ntok; t0 += most)                                                \
            switch (ntok - t0) { GROUP_CASES##most(body, vnni) }                               \
    }
#define GROUP_FN(name, body, vnni) GROUP_FN_MOST(name, body, vnni, 4)
GROUP_FN_MOST(group_q8_0, q8_0_n, false, 8)
GROUP_FN_MOST(group_q8_0_vnni, q8_0_n, true, 8)
GROUP_FN(group_q4_0, q4_0_n, false)
GROUP_FN(group_q4_0_vnni, q4_0_n, true)
GROUP_FN(group_q4_1, q4_1_n, false)
GROUP_FN(group_q4_1_vnni, q4_1_n, true)
GROUP_FN(group_q5_0, q5_0_n, false)
GROUP_FN(group_q5_0_vnni, q5_0_n, true)
GROUP_FN(group_q5_1, q5_1_n, false)
GROUP_FN(group_q5_1_vnni, q5_1_n, true)
GROUP_FN(group_q4_k, q4_k_n, false)
GROUP_FN(group_q4_k_vnni, q4_k_n, true)
GROUP_FN_MOST(group_q6_k, q6_k_n, false, 8)
GROUP_FN_MOST(group_q6_k_vnni, q6_k_n, true, 8)

lt__x16_fn lt__x16_avx512_of(lt_dtype t) {
    const bool v = lt_cpu()->avx512vnni && !lt__qdot_avoid_vnni;
    if (t == LT_Q8_0) return v ? group_q8_0_vnni : group_q8_0;
    if (t == LT_Q4_0) return v ? group_q4_0_vnni : group_q4_0;
    if (t == LT_Q4_1) return v ? group_q4_1_vnni : group_q4_1;
    if (t == LT_Q5_0) return v ? group_q5_0_vnni : group_q5_0;
    if (t == LT_Q5_1) return v ? group_q5_1_vnni : group_q5_1;
    if (t == LT_Q4_K) return v ? group_q4_k_vnni : group_q4_k;
    if (t == LT_Q6_K) return v ? group_q6_k_vnni : group_q6_k;
    return NULL;
}
