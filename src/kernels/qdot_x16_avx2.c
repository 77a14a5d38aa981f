/* The group dots (qdot.h) of q8_0, q4_0 .. q5_1, q4_k and q6_k on AVX2: the group's two halves
 * of 8 rows one after the other, a 256-bit lane of 32 bits a row, so a
 * block's int32 sum per row is vertical and its scales multiply 8 rows at
 * once; each block's quants unpacked once for every token. Without
 * AVX-VNNI the products go through vpmaddubsw: levels <= 15 against |x| <=
 * 127, 16 products a 16-bit lane at most 30480, so the sums stay exact.
 * Compiled again with LT_QDOT_AVXVNNI set by qdot_x16_avxvnni.c (vpdpbusd,
 * vpdpwssd). */
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

/* The exact int32 sums of 8 rows' block against x, offset included, from the
 * block's four pieces v (8 rows' 32 bits each: the low nibbles elements 4j
 * .. 4j + 3, the high ones 16 + 4j ..). With VNNI the high nibbles stay in
 * place, 16 times their level: their sums are multiples of 16, shifted
 * back exactly (one AND a piece instead of a shift and an AND). */
static inline __attribute__((always_inline)) __m256i block_sum(const __m256i v[4],
                                                               const lt__xq32 *x) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
#if LT_QDOT_AVXVNNI
    const __m256i mf0 = _mm256_set1_epi8((char)0xf0);
    __m256i s0 = _mm256_set1_epi32(x->off), s1 = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        s0 = _mm256_dpbusd_avx_epi32(s0, _mm256_and_si256(v[j], m4),
                                     _mm256_set1_epi32(xq4(x->qs, 4 * j)));
        s1 = _mm256_dpbusd_avx_epi32(s1, _mm256_and_si256(v[j], mf0),
                                     _mm256_set1_epi32(xq4(x->qs, 16 + 4 * j)));
    }
    return _mm256_add_epi32(s0, _mm256_srai_epi32(s1, 4));
#else
    __m256i p = _mm256_maddubs_epi16(_mm256_and_si256(v[0], m4), _mm256_set1_epi32(xq4(x->qs, 0)));
    for (int j = 0; j < 4; j++) {
        if (j)
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(v[j], m4),
                                                         _mm256_set1_epi32(xq4(x->qs, 4 * j))));
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(
                                    _mm256_and_si256(_mm256_srli_epi16(v[j], 4), m4),
                                    _mm256_set1_epi32(xq4(x->qs, 16 + 4 * j))));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(p, _mm256_set1_epi16(1)),
                            _mm256_set1_epi32(x->off));
#endif
}

/* One token: both halves of the group in one pass (their x loads and the
 * loop shared). Several: a half at a time, every token's chain in a
 * register, the second half's quants from L1. */
static inline __attribute__((always_inline)) void q4_0_n(const uint8_t *qs, int64_t nb,
                                                         const void *const *xq, const int nt,
                                                         size_t pf, float *out) {
    const uint16_t *sc = (const uint16_t *)(qs + (size_t)nb * BLOCK_QS);
    const int halves = nt == 1 ? 1 : 2, per = 3 - halves; /* passes, halves per pass */
    for (int h0 = 0; h0 < halves; h0++) {
        __m256 acc[2 * LT__QDOT_MULTI_MAX];
        for (int t = 0; t < per * nt; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *q = qs + (size_t)b * BLOCK_QS;
            if (pf && h0 == 0) { /* the first pass streams the group in */
                lt__prefetch_lines(q, pf, BLOCK_QS, 0, BLOCK_QS);
                lt__prefetch_far((const char *)(sc + b * LT_X16_ROWS) + pf);
            }
            for (int k = 0; k < per; k++) {
                const int h = h0 + k;
                __m256i v[4];
                for (int j = 0; j < 4; j++)
                    v[j] = _mm256_loadu_si256((const __m256i *)(q + j * PIECE + 32 * h));
                const __m256 dw = _mm256_cvtph_ps(
                    _mm_loadu_si128((const __m128i *)(sc + b * LT_X16_ROWS + 8 * h)));
                for (int t = 0; t < nt; t++) {
                    const lt__xq32 *x = (const lt__xq32 *)xq[t] + b;
                    const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(x->d));
                    acc[k * nt + t] =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_sum(v, x)), d, acc[k * nt + t]);
                }
            }
        }
        for (int k = 0; k < per; k++)
            for (int t = 0; t < nt; t++)
                _mm256_storeu_ps(out + t * LT_X16_ROWS + 8 * (h0 + k), acc[k * nt + t]);
    }
}

/* ---- q8_0 ---- */

/* The exact int32 sums of 8 rows' block against x from its eight pieces w
 * (8 rows' elements 4j .. 4j + 3 each). With AVX-VNNI w holds the quants
 * plus 128 (unsigned, q8_0_n's xor): the chains start at -128 sum x = 16
 * off. Without it |q| against x with q's sign (pairs within 2 x 128 x 127:
 * exact in vpmaddubsw), each piece's pairs widened before they add. */
static inline __attribute__((always_inline)) __m256i q8_0_sum(const __m256i w[8],
                                                              const lt__xq32 *x) {
#if LT_QDOT_AVXVNNI
    __m256i s0 = _mm256_set1_epi32(16 * x->off), s1 = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        s0 = _mm256_dpbusd_avx_epi32(s0, w[j], _mm256_set1_epi32(xq4(x->qs, 4 * j)));
        s1 = _mm256_dpbusd_avx_epi32(s1, w[j + 4], _mm256_set1_epi32(xq4(x->qs, 16 + 4 * j)));
    }
    return _mm256_add_epi32(s0, s1);
#else
    const __m256i one = _mm256_set1_epi16(1);
    __m256i s = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        const __m256i sx = _mm256_sign_epi8(_mm256_set1_epi32(xq4(x->qs, 4 * j)), w[j]);
        s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w[j]), sx),
                                                  one));
    }
    return s;
#endif
}

/* One token: both halves of each piece in turn (a cache line read whole,
 * each four bytes of x broadcast once for the 16 rows), the same exact sums
 * as q8_0_sum's. */
static inline __attribute__((always_inline)) void q8_0_one(const uint8_t *qs, int64_t nb,
                                                           const lt__xq32 *xq, size_t pf,
                                                           float *out) {
    const uint16_t *sc = (const uint16_t *)(qs + (size_t)nb * Q80_QS);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *q = qs + (size_t)b * Q80_QS;
        const lt__xq32 *x = xq + b;
        if (pf) {
            lt__prefetch_lines(q, pf, Q80_QS, 0, Q80_QS);
            lt__prefetch_far((const char *)(sc + b * LT_X16_ROWS) + pf);
        }
        __m256i s[2];
#if LT_QDOT_AVXVNNI
        s[0] = s[1] = _mm256_set1_epi32(16 * x->off);
#else
        s[0] = s[1] = _mm256_setzero_si256();
        const __m256i one = _mm256_set1_epi16(1);
#endif
        for (int j = 0; j < 8; j++) {
            const __m256i xv = _mm256_set1_epi32(xq4(x->qs, 4 * j));
            for (int h = 0; h < 2; h++) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(q + j * PIECE + 32 * h));
#if LT_QDOT_AVXVNNI
                s[h] = _mm256_dpbusd_avx_epi32(s[h], _mm256_xor_si256(w, _mm256_set1_epi8(-128)),
                                               xv);
#else
                s[h] = _mm256_add_epi32(
                    s[h], _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w),
                                                                 _mm256_sign_epi8(xv, w)),
                                            one));
#endif
            }
        }
        const __m256 dx = _mm256_set1_ps(x->d);
        for (int h = 0; h < 2; h++) {
            const __m256 dw = _mm256_cvtph_ps(
                _mm_loadu_si128((const __m128i *)(sc + b * LT_X16_ROWS + 8 * h)));
            acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[h]), _mm256_mul_ps(dw, dx), acc[h]);
        }
    }
    for (int h = 0; h < 2; h++) _mm256_storeu_ps(out + 8 * h, acc[h]);
}

/* Several tokens a half at a time, each half's pieces loaded (and with
 * AVX-VNNI offset) once for every token. */
static inline __attribute__((always_inline)) void q8_0_n(const uint8_t *qs, int64_t nb,
                                                         const void *const *xq, const int nt,
                                                         size_t pf, float *out) {
    if (nt == 1) {
        q8_0_one(qs, nb, xq[0], pf, out);
        return;
    }
    const uint16_t *sc = (const uint16_t *)(qs + (size_t)nb * Q80_QS);
    for (int h = 0; h < 2; h++) {
        __m256 acc[LT__QDOT_MULTI_MAX];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *q = qs + (size_t)b * Q80_QS;
            if (pf && h == 0) { /* the first pass streams the group in */
                lt__prefetch_lines(q, pf, Q80_QS, 0, Q80_QS);
                lt__prefetch_far((const char *)(sc + b * LT_X16_ROWS) + pf);
            }
            __m256i w[8];
            for (int j = 0; j < 8; j++) {
                w[j] = _mm256_loadu_si256((const __m256i *)(q + j * PIECE + 32 * h));
#if LT_QDOT_AVXVNNI
                w[j] = _mm256_xor_si256(w[j], _mm256_set1_epi8(-128));
#endif
            }
            const __m256 dw =
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + b * LT_X16_ROWS + 8 * h)));
            for (int t = 0; t < nt; t++) {
                const lt__xq32 *x = (const lt__xq32 *)xq[t] + b;
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(x->d));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q8_0_sum(w, x)), d, acc[t]);
            }
        }
        for (int t = 0; t < nt; t++) _mm256_storeu_ps(out + t * LT_X16_ROWS + 8 * h, acc[t]);
    }
}

/* ---- q4_1, q5_0, q5_1 ---- */

/* A block of 16 rows (core.h): four pieces of quants, with fifth bits (q5_0,
 * q5_1) a piece of them, the rows' d, with a minimum (q4_1, q5_1) their m. */
static inline int legacy_block(const bool bits, const bool min) {
    return (bits ? 5 : 4) * PIECE + (min ? 4 : 2) * LT_X16_ROWS;
}

/* Half h of the block (8 rows) as levels: w[j] elements 4j .. 4j + 3,
 * w[4 + j] elements 16 + 4j ..; fifth bits (core.h's order: bit j of byte
 * k for the low nibble's element, bit 4 + j for the high's) put at bit 4
 * by one shift of the lane each. Without them and with AVX-VNNI the high
 * nibbles stay in place, 16 times their level (legacy_sum shifts their
 * sums back). */
static inline __attribute__((always_inline)) void legacy_levels(const uint8_t *blk, int h,
                                                                __m256i w[8], const bool bits) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m10 = _mm256_set1_epi8(0x10);
    const __m256i hb =
        bits ? _mm256_loadu_si256((const __m256i *)(blk + 4 * PIECE + 32 * h)) : m4;
    for (int j = 0; j < 4; j++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + j * PIECE + 32 * h));
        w[j] = _mm256_and_si256(v, m4);
        if (!bits) {
#if LT_QDOT_AVXVNNI
            w[j + 4] = _mm256_and_si256(v, _mm256_set1_epi8((char)0xf0));
#else
            w[j + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#endif
            continue;
        }
        w[j] = _mm256_or_si256(w[j], _mm256_and_si256(_mm256_slli_epi32(hb, 4 - j), m10));
        w[j + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi32(hb, j), m10));
    }
}

/* The exact int32 sums of 8 rows' levels w against x: q5_0's offset of 16
 * (twice x's off) starts both chains. Without VNNI a 16-bit lane takes 8
 * products, 8 x 31 x 127 at most. */
static inline __attribute__((always_inline)) __m256i legacy_sum(const __m256i w[8],
                                                                const lt__xq32 *x,
                                                                const bool bits, const bool min) {
    const __m256i off = min ? _mm256_setzero_si256() : _mm256_set1_epi32(x->off);
#if LT_QDOT_AVXVNNI
    __m256i s0 = off, s1 = off;
    for (int j = 0; j < 4; j++) {
        s0 = _mm256_dpbusd_avx_epi32(s0, w[j], _mm256_set1_epi32(xq4(x->qs, 4 * j)));
        s1 = _mm256_dpbusd_avx_epi32(s1, w[j + 4], _mm256_set1_epi32(xq4(x->qs, 16 + 4 * j)));
    }
    return _mm256_add_epi32(s0, bits ? s1 : _mm256_srai_epi32(s1, 4));
#else
    (void)bits;
    __m256i p0 = _mm256_maddubs_epi16(w[0], _mm256_set1_epi32(xq4(x->qs, 0)));
    __m256i p1 = _mm256_maddubs_epi16(w[4], _mm256_set1_epi32(xq4(x->qs, 16)));
    for (int j = 1; j < 4; j++) {
        p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w[j], _mm256_set1_epi32(xq4(x->qs, 4 * j))));
        p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w[j + 4],
                                                       _mm256_set1_epi32(xq4(x->qs, 16 + 4 * j))));
    }
    const __m256i one = _mm256_set1_epi16(1);
    return _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(p0, one), _mm256_madd_epi16(p1, one)),
                            _mm256_add_epi32(off, off));
#endif
}

/* As q4_0's: one token both halves in one pass, several a half at a time. */
static inline __attribute__((always_inline)) void legacy_n(const uint8_t *g, int64_t nb,
                                                           const void *const *xq, const int nt,
                                                           size_t pf, float *out, const bool bits,
                                                           const bool min) {
    const int bb = legacy_block(bits, min), d_at = (bits ? 5 : 4) * PIECE;
    const int halves = nt == 1 ? 1 : 2, per = 3 - halves; /* passes, halves per pass */
    for (int h0 = 0; h0 < halves; h0++) {
        __m256 acc[2 * LT__QDOT_MULTI_MAX];
        for (int t = 0; t < per * nt; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = g + (size_t)b * bb;
            if (pf && h0 == 0)
                lt__prefetch_lines(blk, pf, bb, 0, bb);
            for (int k = 0; k < per; k++) {
                const int h = h0 + k;
                __m256i w[8];
                legacy_levels(blk, h, w, bits);
                const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + d_at + 16 * h)));
                const __m256 mw =
                    min ? _mm256_cvtph_ps(_mm_loadu_si128(
                              (const __m128i *)(blk + d_at + 2 * LT_X16_ROWS + 16 * h)))
                        : dw;
                for (int t = 0; t < nt; t++) {
                    const lt__xq32 *x = (const lt__xq32 *)xq[t] + b;
                    const __m256 dx = _mm256_set1_ps(x->d);
                    __m256 a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(legacy_sum(w, x, bits, min)),
                                               _mm256_mul_ps(dw, dx), acc[k * nt + t]);
                    if (min) /* the minimum against the x sum, -off / 8 */
                        a = _mm256_fmadd_ps(_mm256_set1_ps((float)(-x->off / 8)),
                                            _mm256_mul_ps(mw, dx), a);
                    acc[k * nt + t] = a;
                }
            }
        }
        for (int k = 0; k < per; k++)
            for (int t = 0; t < nt; t++)
                _mm256_storeu_ps(out + t * LT_X16_ROWS + 8 * (h0 + k), acc[k * nt + t]);
    }
}

#define LEGACY_BODY(name, bits, min)                                                           \
    static inline __attribute__((always_inline)) void name(                                    \
        const uint8_t *g, int64_t nb, const void *const *xq, const int nt, size_t pf,          \
        float *out) {                                                                          \
        legacy_n(g, nb, xq, nt, pf, out, bits, min);                                           \
    }
LEGACY_BODY(q4_1_n, false, true)
LEGACY_BODY(q5_0_n, true, false)
LEGACY_BODY(q5_1_n, true, true)

/* ---- q4_k ---- */

enum { K_HEAD = 4 * LT_X16_ROWS + 3 * PIECE, K_BLOCK = K_HEAD + 32 * PIECE };

/* The 8 rows' eight six-bit scales and eight minimums as bytes, four a
 * lane (byte j % 4 of q[j / 4] is sub-block j's scale, of q[2 + j / 4] its
 * minimum), from the three scale pieces u (lt_qk_scale_min's bit layout,
 * a row a lane): eleven instructions for all sixteen, then one byte
 * shuffle (lane_shuffle) takes out each. */
static inline __attribute__((always_inline)) void scale_bytes(const __m256i u[3], __m256i q[4]) {
    const __m256i m6 = _mm256_set1_epi8(63), m4 = _mm256_set1_epi8(15),
                  m30 = _mm256_set1_epi8(0x30);
    q[0] = _mm256_and_si256(u[0], m6);
    q[2] = _mm256_and_si256(u[1], m6);
    /* sub-blocks 4 .. 7: the low four bits from u[2]'s nibbles, the top two
     * from u[0]'s (scales) or u[1]'s (minimums) top bits; a 16-bit shift
     * moves the next byte's bits only into bits the masks clear */
    q[1] = _mm256_or_si256(_mm256_and_si256(u[2], m4),
                           _mm256_and_si256(_mm256_srli_epi16(u[0], 2), m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(u[2], 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(u[1], 2), m30));
}

/* The vpshufb control that fills byte k of every 32-bit lane from its byte
 * s_k (zero where s_k < 0). */
static inline __attribute__((always_inline)) __m256i lane_shuffle(int s0, int s1, int s2, int s3) {
    const int l0 = lt__shuf_lane(0, s0, s1, s2, s3), l1 = lt__shuf_lane(1, s0, s1, s2, s3),
              l2 = lt__shuf_lane(2, s0, s1, s2, s3), l3 = lt__shuf_lane(3, s0, s1, s2, s3);
    return _mm256_setr_epi32(l0, l1, l2, l3, l0, l1, l2, l3);
}

/* x's 4 bytes at element e of a 256 block (lt__xqk's paired order) */
/* x's 4 bytes at byte o of its qs */
static inline int32_t x4(const lt__xqk *x, int o) {
    int32_t v;
    memcpy(&v, x->qs + o, 4);
    return v;
}

/* One token: both halves of the group in one pass over the blocks (as
 * q6_k_one), so every cache line is read once and each four bytes of x
 * broadcast once for the 16 rows. The sums and float steps of q4_k_n's,
 * so its bits. */
static inline __attribute__((always_inline)) void q4_k_one(const uint8_t *g, int64_t nb,
                                                           const lt__xqk *xq, size_t pf,
                                                           float *out) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), mf0 = _mm256_set1_epi8((char)0xf0);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = g + (size_t)b * K_BLOCK;
        const lt__xqk *x = xq + b;
        __m256i q[2][4], S[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int hh = 0; hh < 2; hh++) {
            __m256i u[3];
            for (int k = 0; k < 3; k++)
                u[k] = _mm256_loadu_si256(
                    (const __m256i *)(blk + 4 * LT_X16_ROWS + k * PIECE + 32 * hh));
            scale_bytes(u, q[hh]);
        }
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
        _Pragma("GCC unroll 2") for (int hi = 0; hi < 2; hi++) { /* sub-block 2c + hi */
            const int j = 2 * c + hi, e0 = 128 * (c >> 1) + 32 * (c & 1) + 64 * hi;
            if (pf) lt__prefetch_step(blk, pf, K_BLOCK, j);
#if LT_QDOT_AVXVNNI /* the sub-block's int32 sums (two chains), times its scale */
            __m256i a[2][2] = {{_mm256_setzero_si256(), _mm256_setzero_si256()},
                               {_mm256_setzero_si256(), _mm256_setzero_si256()}};
            for (int p = 0; p < 8; p++) {
                const __m256i xb = _mm256_set1_epi32(x4(x, e0 + 4 * p));
                for (int hh = 0; hh < 2; hh++) {
                    const __m256i v = _mm256_loadu_si256(
                        (const __m256i *)(blk + K_HEAD + (8 * c + p) * PIECE + 32 * hh));
                    a[hh][p % 2] = _mm256_dpbusd_avx_epi32(
                        a[hh][p % 2], _mm256_and_si256(v, hi ? mf0 : m4), xb);
                }
            }
            for (int hh = 0; hh < 2; hh++) {
                __m256i sum = _mm256_add_epi32(a[hh][0], a[hh][1]);
                if (hi) sum = _mm256_srai_epi32(sum, 4);
                const __m256i s1 =
                    _mm256_shuffle_epi8(q[hh][j / 4], lane_shuffle(j % 4, -1, -1, -1));
                S[hh] = _mm256_add_epi32(S[hh], _mm256_mullo_epi32(sum, s1));
                LT__PIN(S[hh]);
            }
#else /* the pairs' 16-bit sums, then times the scale in both pairs of a lane */
            (void)mf0;
            __m256i p16[2];
            for (int p = 0; p < 8; p++) {
                const __m256i xb = _mm256_set1_epi32(x4(x, e0 + 4 * p));
                for (int hh = 0; hh < 2; hh++) {
                    const __m256i v = _mm256_loadu_si256(
                        (const __m256i *)(blk + K_HEAD + (8 * c + p) * PIECE + 32 * hh));
                    const __m256i m = _mm256_maddubs_epi16(
                        _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, m4), xb);
                    p16[hh] = p ? _mm256_add_epi16(p16[hh], m) : m;
                }
            }
            for (int hh = 0; hh < 2; hh++) {
                const __m256i sc =
                    _mm256_shuffle_epi8(q[hh][j / 4], lane_shuffle(j % 4, -1, j % 4, -1));
                S[hh] = lt__acc_madd(S[hh], p16[hh], sc);
                LT__PIN(S[hh]);
            }
#endif
        }
        const __m256 dx = _mm256_set1_ps(x->d);
        for (int hh = 0; hh < 2; hh++) {
            __m256i M = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) { /* the minimums of sub-blocks 2k, 2k + 1 */
                const __m256i mn = _mm256_shuffle_epi8(
                    q[hh][2 + k / 2], lane_shuffle(2 * k % 4, -1, (2 * k + 1) % 4, -1));
                const int16_t *bs = x->bsums;
                const uint32_t pair = (uint16_t)(bs[4 * k] + bs[4 * k + 1]) |
                                      (uint32_t)(uint16_t)(bs[4 * k + 2] + bs[4 * k + 3]) << 16;
                M = lt__acc_madd(M, mn, _mm256_set1_epi32((int32_t)pair));
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * hh)));
            const __m256 dm = _mm256_cvtph_ps(
                _mm_loadu_si128((const __m128i *)(blk + 2 * LT_X16_ROWS + 16 * hh)));
            acc[hh] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[hh]), _mm256_mul_ps(dw, dx), acc[hh]);
            const __m256 nm = _mm256_xor_ps(_mm256_mul_ps(dm, dx), _mm256_set1_ps(-0.0f));
            acc[hh] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(M), nm, acc[hh]);
        }
    }
    _mm256_storeu_ps(out, acc[0]);
    _mm256_storeu_ps(out + 8, acc[1]);
}

static inline __attribute__((always_inline)) void q4_k_n(const uint8_t *g, int64_t nb,
                                                         const void *const *xq, const int nt,
                                                         size_t pf, float *out) {
    if (nt == 1) {
        q4_k_one(g, nb, xq[0], pf, out);
        return;
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int h = 0; h < 2; h++) {
        __m256 acc[LT__QDOT_MULTI_MAX];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = g + (size_t)b * K_BLOCK;
            if (pf && h == 0)
                lt__prefetch_lines(blk, pf, K_BLOCK, 0, K_BLOCK);
            __m256i u[3], q[4];
            for (int k = 0; k < 3; k++)
                u[k] = _mm256_loadu_si256((const __m256i *)(blk + 4 * LT_X16_ROWS + k * PIECE + 32 * h));
            scale_bytes(u, q);
            __m256i S[LT__QDOT_MULTI_MAX], M[LT__QDOT_MULTI_MAX];
            for (int t = 0; t < nt; t++) S[t] = M[t] = _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
                _Pragma("GCC unroll 2") for (int hi = 0; hi < 2; hi++) { /* sub-block 2c + hi */
                    /* with AVX-VNNI the high nibbles stay in place, 16 times
                     * their level: their sums are multiples of 16, shifted
                     * back exactly */
                    __m256i w[8];
                    for (int p = 0; p < 8; p++) {
                        const __m256i v = _mm256_loadu_si256(
                            (const __m256i *)(blk + K_HEAD + (8 * c + p) * PIECE + 32 * h));
#if LT_QDOT_AVXVNNI
                        w[p] = _mm256_and_si256(v, hi ? _mm256_set1_epi8((char)0xf0) : m4);
#else
                        w[p] = _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, m4);
#endif
                    }
                    const int j = 2 * c + hi;
#if LT_QDOT_AVXVNNI /* the scale alone, or in both pairs of the lane */
                    const __m256i s1 =
                        _mm256_shuffle_epi8(q[j / 4], lane_shuffle(j % 4, -1, -1, -1));
#else
                    const __m256i sc =
                        _mm256_shuffle_epi8(q[j / 4], lane_shuffle(j % 4, -1, j % 4, -1));
#endif
                    _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
                        const lt__xqk *x = (const lt__xqk *)xq[t] + b;
                        /* sub-block 2c + hi in x's paired order (lt__xqk_pos) */
                    const int e0 = 128 * (c >> 1) + 32 * (c & 1) + 64 * hi;
#if LT_QDOT_AVXVNNI /* the sub-block's int32 sums (two chains), times its scale */
                        __m256i a0 = _mm256_setzero_si256(), a1 = a0;
                        for (int p = 0; p < 8; p += 2) {
                            a0 = _mm256_dpbusd_avx_epi32(a0, w[p], _mm256_set1_epi32(x4(x, e0 + 4 * p)));
                            a1 = _mm256_dpbusd_avx_epi32(a1, w[p + 1],
                                                         _mm256_set1_epi32(x4(x, e0 + 4 * p + 4)));
                        }
                        __m256i a = _mm256_add_epi32(a0, a1);
                        if (hi) a = _mm256_srai_epi32(a, 4);
                        S[t] = _mm256_add_epi32(S[t], _mm256_mullo_epi32(a, s1));
#else
                        __m256i p16 = _mm256_maddubs_epi16(w[0], _mm256_set1_epi32(x4(x, e0)));
                        for (int p = 1; p < 8; p++)
                            p16 = _mm256_add_epi16(
                                p16, _mm256_maddubs_epi16(w[p], _mm256_set1_epi32(x4(x, e0 + 4 * p))));
                        S[t] = lt__acc_madd(S[t], p16, sc);
#endif
                        LT__PIN(S[t]);
                    }
                }
            for (int k = 0; k < 4; k++) { /* the minimums of sub-blocks 2k, 2k + 1 against their x sums */
                const __m256i mn = _mm256_shuffle_epi8(
                    q[2 + k / 2], lane_shuffle(2 * k % 4, -1, (2 * k + 1) % 4, -1));
                for (int t = 0; t < nt; t++) {
                    const int16_t *bs = ((const lt__xqk *)xq[t] + b)->bsums;
                    const uint32_t pair = (uint16_t)(bs[4 * k] + bs[4 * k + 1]) |
                                          (uint32_t)(uint16_t)(bs[4 * k + 2] + bs[4 * k + 3]) << 16;
                    M[t] = lt__acc_madd(M[t], mn, _mm256_set1_epi32((int32_t)pair));
                }
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
            const __m256 dm = _mm256_cvtph_ps(
                _mm_loadu_si128((const __m128i *)(blk + 2 * LT_X16_ROWS + 16 * h)));
            for (int t = 0; t < nt; t++) {
                const __m256 dx = _mm256_set1_ps(((const lt__xqk *)xq[t] + b)->d);
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[t]), _mm256_mul_ps(dw, dx), acc[t]);
                const __m256 nm = _mm256_xor_ps(_mm256_mul_ps(dm, dx), _mm256_set1_ps(-0.0f));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(M[t]), nm, acc[t]);
            }
        }
        for (int t = 0; t < nt; t++) _mm256_storeu_ps(out + t * LT_X16_ROWS + 8 * h, acc[t]);
    }
}

/* ---- q6_k ---- */

enum { Q6_QL = 4 * PIECE, Q6_QH = Q6_QL + 32 * PIECE, Q6_D = Q6_QH + 16 * PIECE,
       Q6_BLOCK = Q6_D + 2 * LT_X16_ROWS };

/* Scale i (0 .. 15) of half h's 8 rows, sign-extended, from the scale pieces. */
static inline __attribute__((always_inline)) __m256i q6_scale(const uint8_t *blk, int h, int i) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + (i / 4) * PIECE + 32 * h));
    return _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * (i % 4)), 24);
}

/* Scales 2k and 2k + 1 of half h's 8 rows, sign-extended, as each lane's
 * two 16-bit halves. */
static inline __attribute__((always_inline)) __m256i q6_scale_pair(const uint8_t *blk, int h,
                                                                   int k) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + (k / 2) * PIECE + 32 * h));
    return _mm256_srai_epi16(
        _mm256_shuffle_epi8(v, lane_shuffle(-1, 2 * k % 4, -1, (2 * k + 1) % 4)), 8);
}

/* The levels (0 .. 63) of elements 128h + 32q + 4p .. + 3 of half hh's 8
 * rows: the low four bits from a ql piece, the top two from a qh piece. */
static inline __attribute__((always_inline)) __m256i q6_levels(const uint8_t *blk, int hh, int h,
                                                               int q, int p) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i l4 = _mm256_loadu_si256(
        (const __m256i *)(blk + Q6_QL + (16 * h + 8 * (q % 2) + p) * PIECE + 32 * hh));
    const __m256i h2 =
        _mm256_loadu_si256((const __m256i *)(blk + Q6_QH + (8 * h + p) * PIECE + 32 * hh));
    const __m256i lo = _mm256_and_si256(q >= 2 ? _mm256_srli_epi16(l4, 4) : l4, m4);
    const __m256i hi = q == 0 ? _mm256_slli_epi16(h2, 4)
                     : q == 1 ? _mm256_slli_epi16(h2, 2)
                     : q == 2 ? h2 : _mm256_srli_epi16(h2, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
}

/* One token: both halves of the group in one pass over the blocks, so
 * every cache line is read once and each four bytes of x are broadcast
 * once for the 16 rows, not once a half. The sums and float steps of
 * q6_k_n's, so its bits. */
static inline __attribute__((always_inline)) void q6_k_one(const uint8_t *g, int64_t nb,
                                                           const lt__xqk *xq, size_t pf,
                                                           float *out) {
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = g + (size_t)b * Q6_BLOCK;
        const lt__xqk *x = xq + b;
        __m256i U[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
            if (pf) lt__prefetch_step(blk, pf, Q6_BLOCK, 4 * h + q);
            const int e0 = 128 * h + 32 * (q == 1 ? 2 : q == 2 ? 1 : q);
#if LT_QDOT_AVXVNNI
            __m256i a[2][2] = {{_mm256_setzero_si256(), _mm256_setzero_si256()},
                               {_mm256_setzero_si256(), _mm256_setzero_si256()}};
            for (int p = 0; p < 8; p++) {
                const __m256i xb = _mm256_set1_epi32(x4(x, e0 + 4 * p));
                for (int hh = 0; hh < 2; hh++)
                    a[hh][p / 4] = _mm256_dpbusd_avx_epi32(a[hh][p / 4],
                                                           q6_levels(blk, hh, h, q, p), xb);
            }
            for (int hh = 0; hh < 2; hh++) {
                U[hh] = _mm256_add_epi32(
                    U[hh], _mm256_add_epi32(
                               _mm256_mullo_epi32(a[hh][0], q6_scale(blk, hh, 8 * h + 2 * q)),
                               _mm256_mullo_epi32(a[hh][1], q6_scale(blk, hh, 8 * h + 2 * q + 1))));
                LT__PIN(U[hh]);
            }
#else /* two pieces' pairs at most 2 x 2 x 63 x 127 in 16 bits, times the scale */
            for (int p = 0; p < 8; p += 2) {
                const __m256i x0 = _mm256_set1_epi32(x4(x, e0 + 4 * p)),
                              x1 = _mm256_set1_epi32(x4(x, e0 + 4 * p + 4));
                for (int hh = 0; hh < 2; hh++) {
                    const __m256i s = q6_scale(blk, hh, 8 * h + 2 * q + p / 4);
                    const __m256i sc = _mm256_or_si256(
                        _mm256_and_si256(s, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s, 16));
                    const __m256i p16 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(q6_levels(blk, hh, h, q, p), x0),
                        _mm256_maddubs_epi16(q6_levels(blk, hh, h, q, p + 1), x1));
                    U[hh] = _mm256_add_epi32(U[hh], _mm256_madd_epi16(p16, sc));
                }
            }
            for (int hh = 0; hh < 2; hh++) LT__PIN(U[hh]);
#endif
        }
        for (int hh = 0; hh < 2; hh++) {
            __m256i O = _mm256_setzero_si256();
            for (int k = 0; k < 8; k++) {
                int32_t bs;
                memcpy(&bs, x->bsums + 2 * k, 4);
                O = lt__acc_madd(O, q6_scale_pair(blk, hh, k), _mm256_set1_epi32(bs));
            }
            const __m256i S = _mm256_sub_epi32(U[hh], _mm256_slli_epi32(O, 5));
            const __m256 dw =
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + Q6_D + 16 * hh)));
            const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(x->d));
            acc[hh] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), d, acc[hh]);
        }
    }
    _mm256_storeu_ps(out, acc[0]);
    _mm256_storeu_ps(out + 8, acc[1]);
}

static inline __attribute__((always_inline)) void q6_k_n(const uint8_t *g, int64_t nb,
                                                         const void *const *xq, const int nt,
                                                         size_t pf, float *out) {
    if (nt == 1) {
        q6_k_one(g, nb, xq[0], pf, out);
        return;
    }
    for (int hh = 0; hh < 2; hh++) { /* rows 8hh .. 8hh + 7 */
        __m256 acc[LT__QDOT_MULTI_MAX];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = g + (size_t)b * Q6_BLOCK;
            if (pf && hh == 0)
                lt__prefetch_lines(blk, pf, Q6_BLOCK, 0, Q6_BLOCK);
            __m256i U[LT__QDOT_MULTI_MAX], O[LT__QDOT_MULTI_MAX];
            for (int t = 0; t < nt; t++) U[t] = O[t] = _mm256_setzero_si256();
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
            _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) { /* elements 128h + 32q .. + 31 */
                const __m256i s0 = q6_scale(blk, hh, 8 * h + 2 * q);
                const __m256i s1 = q6_scale(blk, hh, 8 * h + 2 * q + 1);
                /* x's paired order: quarters 1 and 2 of each 128 swapped */
                const int e0 = 128 * h + 32 * (q == 1 ? 2 : q == 2 ? 1 : q);
                __m256i w[8];
                for (int p = 0; p < 8; p++) w[p] = q6_levels(blk, hh, h, q, p);
                _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
                    const lt__xqk *x = (const lt__xqk *)xq[t] + b;
#if LT_QDOT_AVXVNNI
                    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
                    for (int p = 0; p < 4; p++) {
                        a0 = _mm256_dpbusd_avx_epi32(a0, w[p], _mm256_set1_epi32(x4(x, e0 + 4 * p)));
                        a1 = _mm256_dpbusd_avx_epi32(a1, w[p + 4],
                                                     _mm256_set1_epi32(x4(x, e0 + 16 + 4 * p)));
                    }
                    U[t] = _mm256_add_epi32(U[t], _mm256_add_epi32(_mm256_mullo_epi32(a0, s0),
                                                                   _mm256_mullo_epi32(a1, s1)));
#else
                    /* two pieces' pairs at most 2 x 2 x 63 x 127 in 16 bits */
                    const __m256i sc0 = _mm256_or_si256(
                        _mm256_and_si256(s0, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s0, 16));
                    const __m256i sc1 = _mm256_or_si256(
                        _mm256_and_si256(s1, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s1, 16));
                    for (int p = 0; p < 8; p += 2) {
                        const __m256i p16 = _mm256_add_epi16(
                            _mm256_maddubs_epi16(w[p], _mm256_set1_epi32(x4(x, e0 + 4 * p))),
                            _mm256_maddubs_epi16(w[p + 1], _mm256_set1_epi32(x4(x, e0 + 4 * p + 4))));
                        U[t] = _mm256_add_epi32(U[t], _mm256_madd_epi16(p16, p < 4 ? sc0 : sc1));
                    }
#endif
                    LT__PIN(U[t]);
                }
            }
            for (int k = 0; k < 8; k++) { /* the offset of 32: scales 2k, 2k + 1 against their x sums */
                const __m256i pr = q6_scale_pair(blk, hh, k);
                for (int t = 0; t < nt; t++) {
                    int32_t bs;
                    memcpy(&bs, ((const lt__xqk *)xq[t] + b)->bsums + 2 * k, 4);
                    O[t] = lt__acc_madd(O[t], pr, _mm256_set1_epi32(bs));
                }
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + Q6_D + 16 * hh)));
            for (int t = 0; t < nt; t++) {
                const __m256i S = _mm256_sub_epi32(U[t], _mm256_slli_epi32(O[t], 5));
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(((const lt__xqk *)xq[t] + b)->d));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), d, acc[t]);
            }
        }
        for (int t = 0; t < nt; t++) _mm256_storeu_ps(out + t * LT_X16_ROWS + 8 * hh, acc[t]);
    }
}

/* The exported dots: one copy per count of tokens; more than 4 in turns
 * over the group, the later turns reading it from L1. */
#define GROUP_FN(name, body)                                                                   \
    static void name(const void *group, int64_t nb, const void *const *xq, int ntok,           \
                     size_t pf, float *out) {                                                  \
        for (int t0 = 0; t0 < ntok; t0 += 4) {                                                 \
            const size_t p = t0 ? 0 : pf;                                                      \
            float *o = out + t0 * LT_X16_ROWS;                                                 \
            switch (ntok - t0) {                                                               \
            case 1: body(group, nb, xq + t0, 1, p, o); break;                                  \
            case 2: body(group, nb, xq + t0, 2, p, o); break;                                  \
            case 3: body(group, nb, xq + t0, 3, p, o); break;                                  \
            default: body(group, nb, xq + t0, 4, p, o); break;                                 \
            }                                                                                  \
        }                                                                                      \
    }
GROUP_FN(group_q8_0, q8_0_n)
GROUP_FN(group_q4_0, q4_0_n)
GROUP_FN(group_q4_1, q4_1_n)
GROUP_FN(group_q5_0, q5_0_n)
GROUP_FN(group_q5_1, q5_1_n)
GROUP_FN(group_q4_k, q4_k_n)
GROUP_FN(group_q6_k, q6_k_n)

lt__x16_fn LT__AVX2_OF(lt__x16)(lt_dtype t) {
#if !LT_QDOT_AVXVNNI
    if (lt_cpu()->avxvnni && !lt__qdot_avoid_vnni) return lt__x16_avxvnni_of(t);
#endif
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
