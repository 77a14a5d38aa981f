/* f16/bf16 conversion and q8_0 round trips against known values. */
#include "looptune/core.h"
#include "test.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

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

/* ggml's names and block sizes of the quantisation types (ggml-common.h). */
static void test_quant_tables(void) {
    static const struct {
        lt_dtype t;
        const char *name;
        int64_t block;
        size_t bytes;
    } want[] = {{LT_Q8_0, "q8_0", 32, 34}, {LT_Q4_0, "q4_0", 32, 18}, {LT_Q4_1, "q4_1", 32, 20},
                {LT_Q5_0, "q5_0", 32, 22}, {LT_Q5_1, "q5_1", 32, 24}, {LT_Q2_K, "q2_k", 256, 84},
                {LT_Q3_K, "q3_k", 256, 110}, {LT_Q4_K, "q4_k", 256, 144},
                {LT_Q5_K, "q5_k", 256, 176}, {LT_Q6_K, "q6_k", 256, 210}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ASSERT_STREQ(lt_dtype_name(want[i].t), want[i].name);
        ASSERT_EQ(lt_dtype_block(want[i].t), want[i].block);
        ASSERT_EQ(lt_dtype_block_bytes(want[i].t), want[i].bytes);
        ASSERT_TRUE(lt_dtype_is_quant(want[i].t));
        char upper[8];
        for (size_t j = 0; j <= strlen(want[i].name); j++)
            upper[j] = (char)toupper((unsigned char)want[i].name[j]);
        lt_dtype got = LT_F32;
        ASSERT_EQ(lt_dtype_parse(upper, &got), LT_OK);
        ASSERT_EQ(got, want[i].t);
    }
    lt_dtype t;
    ASSERT_EQ(lt_dtype_parse("q4_k_m", &t), LT_EINVAL); /* a mix, not a type */
    ASSERT_TRUE(strstr(lt_errmsg(), "q6_k") != NULL);
}

/* A hand-made q4_0 block (d = 0.5, nibbles j and 15 - j): value j of the
 * block is d (q - 8), elements 0..15 from the low nibbles, 16..31 from the
 * high ones, as ggml lays it out. */
static void test_q4_0_layout(void) {
    lt_block_q4_0 b = {.d = 0x3800}; /* 0.5 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    lt_row_to_f32(LT_Q4_0, &b, y, 32);
    for (int j = 0; j < 16; j++) {
        ASSERT_NEAR(y[j], 0.5 * (j - 8), 0);
        ASSERT_NEAR(y[j + 16], 0.5 * (15 - j - 8), 0);
    }
}

/* Round trips of Gaussian rows: the RMSE relative to the rows' RMS within
 * the bounds tests/reference/test_quant_formats.py states (measured there
 * against ggml's quantisers, which give the same blocks), and the absmax
 * types' error per element within half a step plus the f16 rounding of d. */
static void test_quant_roundtrip(void) {
    enum { N = 8192 };
    static float x[N], y[N];
    static uint8_t q[N * 2];
    uint64_t s = 12345;
    for (int i = 0; i < N; i += 2) { /* Box-Muller from a 64-bit LCG */
        double u1, u2;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        u1 = ((double)(s >> 11) + 1.0) / 9007199254740993.0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        u2 = (double)(s >> 11) / 9007199254740992.0;
        x[i] = (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
        x[i + 1] = (float)(sqrt(-2 * log(u1)) * sin(2 * M_PI * u2));
    }
    static const struct {
        lt_dtype t;
        double bound;
    } types[] = {{LT_Q4_0, 0.0986}, {LT_Q4_1, 0.0895}, {LT_Q5_0, 0.0490}, {LT_Q5_1, 0.0435},
                 {LT_Q2_K, 0.342},  {LT_Q3_K, 0.174},  {LT_Q4_K, 0.0820}, {LT_Q5_K, 0.0415},
                 {LT_Q6_K, 0.0202}};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const lt_dtype t = types[k].t;
        lt_row_from_f32(t, x, q, N);
        lt_row_to_f32(t, q, y, N);
        double se = 0, sx = 0;
        for (int i = 0; i < N; i++) {
            se += (double)(y[i] - x[i]) * (y[i] - x[i]);
            sx += (double)x[i] * x[i];
        }
        const double rel = sqrt(se / sx);
        if (!(rel <= types[k].bound))
            LT__FAIL("%s: RMSE %.4g x RMS above %.4g", lt_dtype_name(t), rel, types[k].bound);
        if (t == LT_Q4_0 || t == LT_Q5_0) {
            const int half = t == LT_Q4_0 ? 8 : 16;
            for (int b = 0; b < N / 32; b++) {
                float amax = 0;
                for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
                const double step = amax / half;
                /* the largest magnitude is level -half; its opposite side ends at
                 * half - 1, so values beyond that are clamped by up to a step */
                for (int j = 0; j < 32; j++) {
                    const double a = fabs(x[32 * b + j]);
                    ASSERT_NEAR(y[32 * b + j], x[32 * b + j],
                                (a <= (half - 0.5) * step ? step * 0.5 : step) + amax / 1024.0);
                }
            }
        }
    }
}

int main(void) {
    test_quant_tables();
    test_q4_0_layout();
    test_quant_roundtrip();
    test_f16_known();
    test_bf16_known();
    test_q8_0();
    test_q8_0_split();
    test_span();
    return lt_test_finish();
}
