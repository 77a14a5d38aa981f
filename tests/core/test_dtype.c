/* f16/bf16 conversion and q8_0 round trips against known values. */
#include "looptune/core.h"
#include "test.h"

static void test_f16_known(void) {
    ASSERT_EQ(lt_f32_to_f16(1.0f), 0x3c00);
    ASSERT_EQ(lt_f32_to_f16(-2.0f), 0xc000);
    ASSERT_EQ(lt_f32_to_f16(65504.0f), 0x7bff);
    ASSERT_EQ(lt_f32_to_f16(1e6f), 0x7c00);
    ASSERT_EQ(lt_f32_to_f16(5.960464477539063e-08f), 0x0001); /* smallest subnormal */
    ASSERT_EQ(lt_f32_to_f16(0.1f), 0x2e66);
    ASSERT_NEAR(lt_f16_to_f32(0x3555), 0.333251953125, 0);
    ASSERT_NEAR(lt_f16_to_f32(0x0001), 5.960464477539063e-08, 0);
    /* every finite half round-trips exactly */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if (((h >> 10) & 0x1f) == 0x1f) continue;
        if (lt_f32_to_f16(lt_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    ASSERT_EQ(bad, 0);
}

static void test_bf16_known(void) {
    ASSERT_EQ(lt_f32_to_bf16(1.0f), 0x3f80);
    ASSERT_EQ(lt_f32_to_bf16(3.14159265f), 0x4049);
    ASSERT_NEAR(lt_bf16_to_f32(0x4049), 3.140625, 0);
}

static void test_q8_0(void) {
    float x[64], y[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(i - 20) * 0.37f;
    lt_block_q8_0 b[2];
    lt_row_from_f32(LT_Q8_0, x, b, 64);
    lt_row_to_f32(LT_Q8_0, b, y, 64);
    /* error at most half a quantisation step (plus f16 scale rounding) */
    for (int i = 0; i < 64; i++) {
        /* half a step d = amax/127, plus the f16 rounding of d (2^-11 relative) times |q| <= 127 */
        float amax = i < 32 ? 20 * 0.37f : 43 * 0.37f;
        ASSERT_NEAR(y[i], x[i], amax / 127 * 0.5 + amax / 2048.0);
    }
    ASSERT_EQ(lt_dtype_row_bytes(LT_Q8_0, 64), 68);
    ASSERT_EQ(b[0].qs[31] == 127 || b[0].qs[0] == -127, 1);
}

/* The split layout of a row of 75 blocks (two groups of 32 and a tail of
 * 11): the same bytes per row, each block's quants and scale where core.h
 * puts them (counted here from the layout's definition), and every byte of
 * the row written exactly once. */
static void test_q8_0_split(void) {
    enum { NB = 75 };
    lt_block_q8_0 src[NB];
    for (int b = 0; b < NB; b++) {
        src[b].d = (uint16_t)(0x3c00 + b);
        for (int j = 0; j < LT_QK8_0; j++) src[b].qs[j] = (int8_t)(b * 7 + j * 3 - 100);
    }
    unsigned char dst[sizeof src];
    memset(dst, 0xa5, sizeof dst);
    lt_q8_0_split_row(src, dst, NB);
    int wrong = 0, seen[sizeof dst] = {0};
    for (int b = 0; b < NB; b++) {
        const int g = b / 32, n = NB - 32 * g < 32 ? NB - 32 * g : 32;
        const size_t group = (size_t)g * 32 * 34, q = group + (size_t)(b % 32) * 32,
                     d = group + (size_t)n * 32 + (size_t)(b % 32) * 2;
        if ((const unsigned char *)lt_q8s_qs(dst, NB, b) != dst + q) wrong++;
        if ((const unsigned char *)lt_q8s_scales(dst, NB, b) != dst + d) wrong++;
        if (memcmp(dst + q, src[b].qs, 32) || memcmp(dst + d, &src[b].d, 2)) wrong++;
        for (size_t i = 0; i < 32; i++) seen[q + i]++;
        seen[d]++;
        seen[d + 1]++;
    }
    ASSERT_EQ(wrong, 0);
    int once = 0;
    for (size_t i = 0; i < sizeof dst; i++) once += seen[i] == 1;
    ASSERT_EQ(once, (int)sizeof dst);
}

/* The span of a tensor covers the padding between rows; nbytes does not. */
static void test_span(void) {
    lt_tensor t;
    lt_tensor_init(&t, LT_Q8_0, 96, 5, 1, 1, NULL); /* rows of 102 bytes */
    ASSERT_EQ(lt_tensor_span(&t), (size_t)(5 * 102));
    ASSERT_EQ(lt_tensor_nbytes(&t), (size_t)(5 * 102));
    t.nb[1] = 128;
    t.nb[2] = t.nb[3] = 5 * 128;
    ASSERT_EQ(lt_tensor_span(&t), (size_t)(4 * 128 + 102));
    ASSERT_EQ(lt_tensor_nbytes(&t), (size_t)(5 * 102));
    lt_tensor_init(&t, LT_F32, 3, 2, 4, 1, NULL);
    ASSERT_EQ(lt_tensor_span(&t), (size_t)(3 * 2 * 4 * 4));
}

int main(void) {
    test_f16_known();
    test_bf16_known();
    test_q8_0();
    test_q8_0_split();
    test_span();
    return lt_test_finish();
}
