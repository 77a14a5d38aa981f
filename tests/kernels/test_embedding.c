/* EMBED against independently known rows: tables are built from values that
 * f16 / bf16 hold exactly (so the expected row is the original value), and
 * q8_0 blocks are written by hand with the expected value scale * q decoded
 * here from the half's bits. Every dtype and ISA, nth = 1..3, every
 * min_chunk value; shares must write disjoint, covering parts of the output.
 * Conversion is exact, so results must match bit for bit. */
#include "ops_test.h"

#include <math.h>

/* IEEE half to double, written out from the format's definition. */
static double half_value(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
    return sign ? -v : v;
}

/* A vocab x dim table of the given dtype and the f32 rows it must give. */
static void *make_table(lt_dtype dt, int64_t vocab, int64_t dim, float *expect) {
    void *table = malloc(lt_dtype_row_bytes(dt, dim) * (size_t)vocab);
    for (int64_t r = 0; r < vocab; r++) {
        float *e = expect + r * dim;
        void *row = (char *)table + lt_dtype_row_bytes(dt, dim) * (size_t)r;
        switch (dt) {
        case LT_F32:
            ot_fill(e, dim, -5, 5);
            memcpy(row, e, (size_t)dim * 4);
            break;
        case LT_F16: /* multiples of 1/256 in [-2, 2): 11 significant bits at most */
            for (int64_t i = 0; i < dim; i++)
                e[i] = (float)(floor(ot_uniform(0, 1024)) - 512) / 256.0f;
            lt_row_from_f32(dt, e, row, dim);
            break;
        case LT_BF16: /* multiples of 1/32 in [-2, 2): 8 significant bits at most */
            for (int64_t i = 0; i < dim; i++)
                e[i] = (float)(floor(ot_uniform(0, 128)) - 64) / 32.0f;
            lt_row_from_f32(dt, e, row, dim);
            break;
        case LT_Q8_0: {
            lt_block_q8_0 *b = row;
            for (int64_t k = 0; k < dim / LT_QK8_0; k++) {
                /* scales from 2^-7 to just under 2^-3 */
                b[k].d = (uint16_t)(0x2000 + (uint16_t)floor(ot_uniform(0, 0x1000)));
                for (int i = 0; i < LT_QK8_0; i++) {
                    b[k].qs[i] = (int8_t)(floor(ot_uniform(0, 255)) - 127);
                    e[k * LT_QK8_0 + i] = (float)(half_value(b[k].d) * b[k].qs[i]); /* exact */
                }
            }
            break;
        }
        default: break;
        }
    }
    return table;
}

static void test_dtypes(void) {
    static const int64_t dims[] = {7, 32, 40, 288, 4096}, ns[] = {1, 5, 16};
    const int64_t vocab = 50;
    const lt_kernel *k = lt_kernel_get(LT_K_EMBED);
    for (int dt = 0; dt <= LT_Q8_0; dt++) /* q4_0 .. q6_k: test_qdot.c */
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
    for (size_t ni = 0; ni < 3; ni++) {
        const int64_t dim = dims[di], n = ns[ni];
        if (dim % lt_dtype_block((lt_dtype)dt)) continue;
        float *expect = malloc((size_t)(vocab * dim) * 4), *out = malloc((size_t)(n * dim) * 4);
        int *counts = malloc((size_t)(n * dim) * sizeof *counts);
        int32_t tokens[16];
        ot_seed((uint64_t)(dt * 1000 + dim + n));
        void *table = make_table((lt_dtype)dt, vocab, dim, expect);
        for (int64_t t = 0; t < n; t++) tokens[t] = (int32_t)floor(ot_uniform(0, (double)vocab));
        tokens[0] = (int32_t)(vocab - 1);
        if (n > 1) tokens[1] = 0;
        lt_tensor to, tt;
        lt_tensor_init(&to, LT_F32, dim, n, 1, 1, out);
        lt_tensor_init(&tt, (lt_dtype)dt, dim, vocab, 1, 1, table);
        lt_call c = {.op = {&to, &tt}};
        lt_step st = {.pos = 3, .n_tokens = n, .tokens = tokens};
        for (int isa = 0; isa < ot_isa_count(); isa++)
        for (int point = 0; point < ot_param_points(k); point++)
        for (int nth = 1; nth <= 3; nth++) {
            ot_param_point(k, point, &c.params);
            ASSERT_EQ(lt_call_check(LT_K_EMBED, &c), LT_OK);
            ASSERT_EQ(ot_run_disjoint(ot_fn(LT_K_EMBED, isa), &c, &st, nth, n * dim, counts), 0);
            ASSERT_EQ(ot_not_once(counts, n * dim), 0);
            int64_t bad = 0;
            for (int64_t t = 0; t < n; t++)
                bad += memcmp(out + t * dim, expect + tokens[t] * dim, (size_t)dim * 4) != 0;
            ASSERT_EQ(bad, 0);
        }
        free(expect); free(out); free(counts); free(table);
    }
}

static void test_check_rejects(void) {
    float out[64];
    lt_block_q8_0 table[4];
    lt_tensor to, tt;
    lt_tensor_init(&to, LT_F32, 32, 2, 1, 1, out);
    lt_tensor_init(&tt, LT_Q8_0, 32, 4, 1, 1, table);
    lt_call c = {.op = {&to, &tt}};
    lt_params_default(lt_kernel_get(LT_K_EMBED), &c.params);
    ASSERT_EQ(lt_call_check(LT_K_EMBED, &c), LT_OK);
    tt.layout = LT_LAYOUT_Q8_SPLIT; /* the lookup reads plain blocks only */
    ASSERT_EQ(lt_call_check(LT_K_EMBED, &c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "layout") != NULL);
    lt_tensor_init(&tt, LT_Q8_0, 16, 8, 1, 1, table); /* q8_0 row of 16: not whole blocks */
    lt_tensor_init(&to, LT_F32, 16, 2, 1, 1, out);
    ASSERT_EQ(lt_call_check(LT_K_EMBED, &c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "blocks") != NULL);
    lt_tensor_init(&tt, LT_F16, 32, 4, 1, 1, table); /* table dim != out dim */
    ASSERT_EQ(lt_call_check(LT_K_EMBED, &c), LT_EINVAL);
    lt_tensor_init(&tt, LT_F16, 16, 4, 1, 1, table);
    lt_tensor_init(&to, LT_BF16, 16, 2, 1, 1, out); /* output must be f32 */
    ASSERT_EQ(lt_call_check(LT_K_EMBED, &c), LT_EINVAL);
}

static void test_cost(void) {
    lt_tensor to, tt;
    lt_tensor_init(&to, LT_F32, 64, 3, 1, 1, NULL);
    lt_tensor_init(&tt, LT_Q8_0, 64, 10, 1, 1, NULL);
    lt_call c = {.op = {&to, &tt}};
    double bytes, flops;
    lt_kernel_get(LT_K_EMBED)->cost(&c, NULL, &bytes, &flops);
    ASSERT_NEAR(bytes, 3 * 68 + 3 * 64 * 4, 0); /* three q8_0 rows read, f32 rows written */
    ASSERT_NEAR(flops, 3 * 64, 0);
}

int main(void) {
    test_dtypes();
    test_check_rejects();
    test_cost();
    return lt_test_finish();
}
