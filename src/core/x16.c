/* The interleaved layout of core.h: 16 rows a group, four bytes of each
 * row side by side. */
#include <string.h>

#include "looptune/core.h"

enum {
    ROWS = LT_X16_ROWS,
    PIECE = 4 * ROWS,                     /* four bytes of each row */
    Q40_QS = 4 * PIECE,                   /* a q4_0 block's quants */
    Q80_QS = 8 * PIECE,                   /* a q8_0 block's quants */
    Q41_BLOCK = 4 * PIECE + 4 * ROWS,     /* = 16 x 20 */
    Q50_BLOCK = 5 * PIECE + 2 * ROWS,     /* = 16 x 22 */
    Q51_BLOCK = 5 * PIECE + 4 * ROWS,     /* = 16 x 24 */
    Q4K_HEAD = 2 * ROWS * 2 + 3 * PIECE,  /* d, dmin, scales */
    Q4K_BLOCK = Q4K_HEAD + 32 * PIECE,    /* = 16 x 144 */
    Q6K_QL = 4 * PIECE, Q6K_QH = Q6K_QL + 32 * PIECE, Q6K_D = Q6K_QH + 16 * PIECE,
    Q6K_BLOCK = Q6K_D + 2 * ROWS,         /* = 16 x 210 */
};
_Static_assert(Q41_BLOCK == ROWS * sizeof(lt_block_q4_1), "q4_1 group block size");
_Static_assert(Q50_BLOCK == ROWS * sizeof(lt_block_q5_0), "q5_0 group block size");
_Static_assert(Q51_BLOCK == ROWS * sizeof(lt_block_q5_1), "q5_1 group block size");
_Static_assert(Q4K_BLOCK == ROWS * sizeof(lt_block_q4_k), "q4_k group block size");
_Static_assert(Q6K_BLOCK == ROWS * sizeof(lt_block_q6_k), "q6_k group block size");

/* the 4-byte pieces of n bytes of one row (from) into lane i of pieces at to */
static void spread(const uint8_t *from, int n, int i, uint8_t *to) {
    for (int j = 0; j < n / 4; j++) memcpy(to + j * PIECE + 4 * i, from + 4 * j, 4);
}
static void gather(const uint8_t *from, int n, int i, uint8_t *to) {
    for (int j = 0; j < n / 4; j++) memcpy(to + 4 * j, from + j * PIECE + 4 * i, 4);
}

/* q5_0's fifth bits of a row (bit e: element e's) as the group holds them:
 * byte k has element 4j + k's at bit j and element 16 + 4j + k's at bit
 * 4 + j (j, k < 4), so the elements of a quant piece's low nibbles and
 * those of its high nibbles each find theirs by one shift of the lane. */
static uint32_t q5_bits_spread(uint32_t h) {
    uint32_t o = 0;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 4; j++)
            o |= (h >> (4 * j + k) & 1u) << (8 * k + j) | (h >> (16 + 4 * j + k) & 1u) << (8 * k + 4 + j);
    return o;
}
static uint32_t q5_bits_gather(uint32_t o) {
    uint32_t h = 0;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 4; j++)
            h |= (o >> (8 * k + j) & 1u) << (4 * j + k) | (o >> (8 * k + 4 + j) & 1u) << (16 + 4 * j + k);
    return h;
}

/* Row i's legacy block (q4_1, q5_0, q5_1: qs, the fifth bits qh or NULL, d,
 * the minimum m or NULL) into a group block: four pieces of quants, a
 * piece of fifth bits, the rows' d, their m. */
static void legacy_put(const uint8_t *qs, const uint8_t *qh, const uint16_t *d,
                       const uint16_t *m, int i, uint8_t *blk) {
    spread(qs, 16, i, blk);
    blk += 4 * PIECE;
    if (qh) {
        uint32_t h;
        memcpy(&h, qh, 4);
        h = q5_bits_spread(h);
        memcpy(blk + 4 * i, &h, 4);
        blk += PIECE;
    }
    memcpy(blk + 2 * i, d, 2);
    if (m) memcpy(blk + 2 * ROWS + 2 * i, m, 2);
}
static void legacy_get(const uint8_t *blk, int i, uint8_t *qs, uint8_t *qh, uint16_t *d,
                       uint16_t *m) {
    gather(blk, 16, i, qs);
    blk += 4 * PIECE;
    if (qh) {
        uint32_t h;
        memcpy(&h, blk + 4 * i, 4);
        h = q5_bits_gather(h);
        memcpy(qh, &h, 4);
        blk += PIECE;
    }
    memcpy(d, blk + 2 * i, 2);
    if (m) memcpy(m, blk + 2 * ROWS + 2 * i, 2);
}

void lt_x16_pack(lt_dtype t, const void *src, size_t stride, int nrows, int64_t nb, void *group) {
    uint8_t *g = group;
    memset(group, 0, (size_t)nb * ROWS * lt_dtype_block_bytes(t));
    for (int i = 0; i < nrows; i++) {
        const char *row = (const char *)src + (size_t)i * stride;
        for (int64_t b = 0; b < nb; b++) {
            if (t == LT_Q8_0) {
                const lt_block_q8_0 *w = (const lt_block_q8_0 *)row + b;
                uint16_t *sc = (uint16_t *)(g + (size_t)nb * Q80_QS);
                sc[b * ROWS + i] = w->d;
                spread((const uint8_t *)w->qs, 32, i, g + (size_t)b * Q80_QS);
            } else if (t == LT_Q4_0) {
                const lt_block_q4_0 *w = (const lt_block_q4_0 *)row + b;
                uint16_t *sc = (uint16_t *)(g + (size_t)nb * Q40_QS);
                sc[b * ROWS + i] = w->d;
                spread(w->qs, 16, i, g + (size_t)b * Q40_QS);
            } else if (t == LT_Q4_1) {
                const lt_block_q4_1 *w = (const lt_block_q4_1 *)row + b;
                legacy_put(w->qs, NULL, &w->d, &w->m, i, g + (size_t)b * Q41_BLOCK);
            } else if (t == LT_Q5_0) {
                const lt_block_q5_0 *w = (const lt_block_q5_0 *)row + b;
                legacy_put(w->qs, w->qh, &w->d, NULL, i, g + (size_t)b * Q50_BLOCK);
            } else if (t == LT_Q5_1) {
                const lt_block_q5_1 *w = (const lt_block_q5_1 *)row + b;
                legacy_put(w->qs, w->qh, &w->d, &w->m, i, g + (size_t)b * Q51_BLOCK);
            } else if (t == LT_Q6_K) {
                const lt_block_q6_k *w = (const lt_block_q6_k *)row + b;
                uint8_t *blk = g + (size_t)b * Q6K_BLOCK;
                spread((const uint8_t *)w->scales, 16, i, blk);
                spread(w->ql, 128, i, blk + Q6K_QL);
                spread(w->qh, 64, i, blk + Q6K_QH);
                memcpy(blk + Q6K_D + 2 * i, &w->d, 2);
            } else {
                const lt_block_q4_k *w = (const lt_block_q4_k *)row + b;
                uint8_t *blk = g + (size_t)b * Q4K_BLOCK;
                memcpy(blk + 2 * i, &w->d, 2);
                memcpy(blk + 2 * ROWS + 2 * i, &w->dmin, 2);
                spread(w->scales, 12, i, blk + 4 * ROWS);
                spread(w->qs, 128, i, blk + Q4K_HEAD);
            }
        }
    }
}

void lt_x16_block(lt_dtype t, const void *group, int64_t nb, int i, int64_t b, void *out) {
    const uint8_t *g = group;
    if (t == LT_Q8_0) {
        lt_block_q8_0 *w = out;
        memcpy(&w->d, g + (size_t)nb * Q80_QS + 2 * (b * ROWS + i), 2);
        gather(g + (size_t)b * Q80_QS, 32, i, (uint8_t *)w->qs);
    } else if (t == LT_Q4_0) {
        lt_block_q4_0 *w = out;
        memcpy(&w->d, g + (size_t)nb * Q40_QS + 2 * (b * ROWS + i), 2);
        gather(g + (size_t)b * Q40_QS, 16, i, w->qs);
    } else if (t == LT_Q4_1) {
        lt_block_q4_1 *w = out;
        legacy_get(g + (size_t)b * Q41_BLOCK, i, w->qs, NULL, &w->d, &w->m);
    } else if (t == LT_Q5_0) {
        lt_block_q5_0 *w = out;
        legacy_get(g + (size_t)b * Q50_BLOCK, i, w->qs, w->qh, &w->d, NULL);
    } else if (t == LT_Q5_1) {
        lt_block_q5_1 *w = out;
        legacy_get(g + (size_t)b * Q51_BLOCK, i, w->qs, w->qh, &w->d, &w->m);
    } else if (t == LT_Q6_K) {
        lt_block_q6_k *w = out;
        const uint8_t *blk = g + (size_t)b * Q6K_BLOCK;
        gather(blk, 16, i, (uint8_t *)w->scales);
        gather(blk + Q6K_QL, 128, i, w->ql);
        gather(blk + Q6K_QH, 64, i, w->qh);
        memcpy(&w->d, blk + Q6K_D + 2 * i, 2);
    } else {
        lt_block_q4_k *w = out;
        const uint8_t *blk = g + (size_t)b * Q4K_BLOCK;
        memcpy(&w->d, blk + 2 * i, 2);
        memcpy(&w->dmin, blk + 2 * ROWS + 2 * i, 2);
        gather(blk + 4 * ROWS, 12, i, w->scales);
        gather(blk + Q4K_HEAD, 128, i, w->qs);
    }
}
