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

int main(void) {
    test_f16_known();
    test_bf16_known();
    test_q8_0();
    return lt_test_finish();
}
