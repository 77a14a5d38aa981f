/* matvec, matmul and embed for q4_0, q4_1, q5_0, q5_1 and q2_k .. q6_k, on
 * every ISA path this CPU has (they run the portable integer dots for now:
 * the checks that they agree bit for bit are the ones a vector path must
 * then pass):
 * - against a double reference over the lt_row_to_f32-dequantised weights
 *   and the exact x, within the bound of x's per-block quantisation
 *   (qdot.h: steps max|x_b| / 127 over blocks of 32 or 256);
 * - against the quantised-activation math computed here from qdot.h's
 *   recipe (x quantised per block, then sum w * d_x * q_x in double), within
 *   float rounding only: a wrong scale, minimum, bsum or level shows there;
 * - bit for bit across ISAs, every point of matvec's and matmul's parameter
 *   spaces (on a small shape; defaults on the larger ones), nth = 1, 2, 3 and
 *   between matmul's tokens and matvec (the multi-token dots, several row
 *   blocks, groups of tokens and a part group), overwrite and accumulate;
 * - the same for the AVX-512 dots without VNNI where the CPU has it;
 * - embed rows equal to lt_row_to_f32's, every ISA, nth, min_chunk;
 * - check(): widths that are not whole blocks, the split layout;
 * - the group dots (core.h's interleaved layout) of every ISA against the
 *   portable one-row dot, and interleaved W against plain; q8_0's too, whose
 *   plain rows take linear.h's sums instead (test_matvec.c): its interleaved
 *   W against the portable path over the same W. */
#include "kernels/linear.h"
#include "kernels/qdot.h" /* lt__qdot_avoid_vnni */
#include "looptune/kernels.h"
#include "ops_test.h"
#include "test.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const lt_dtype TYPES[] = {LT_Q4_0, LT_Q4_1, LT_Q5_0, LT_Q5_1, LT_Q2_K,
                                 LT_Q3_K, LT_Q4_K, LT_Q5_K, LT_Q6_K};
#define NTYPES ((int)(sizeof TYPES / sizeof TYPES[0]))

/* Float rounding of the kernel's sums relative to sum |terms|: a few
 * roundings per block over at most ~50 blocks stay below 1e-6; one wrong
 * block of 50 is 2e-2. */
#define ROUND_TOL 1e-5

typedef struct {
    lt_dtype t;
    int64_t rows, cols;
    void *w;      /* quantised rows */
    float *wf;    /* [rows][cols] dequantised */
    float *x;     /* [cols] */
    lt_tensor tw, tx, ty;
    float *y;
} fixture;

static void fixture_init(fixture *f, lt_dtype t, int64_t rows, int64_t cols, uint64_t seed) {
    memset(f, 0, sizeof *f);
    f->t = t;
    f->rows = rows;
    f->cols = cols;
    const size_t rb = lt_dtype_row_bytes(t, cols);
    f->w = lt_aligned_alloc(64, rb * (size_t)rows);
    f->wf = malloc(sizeof(float) * (size_t)(rows * cols));
    f->x = lt_aligned_alloc(64, sizeof(float) * (size_t)cols);
    f->y = lt_aligned_alloc(64, sizeof(float) * (size_t)rows);
    ot_seed(seed);
    float *tmp = malloc(sizeof(float) * (size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        ot_fill(tmp, cols, -1.0, 1.0);
        if (r % 7 == 3) tmp[r % cols] = 9.0f; /* an outlier in some rows */
        lt_row_from_f32(t, tmp, (char *)f->w + rb * (size_t)r, cols);
        lt_row_to_f32(t, (char *)f->w + rb * (size_t)r, f->wf + r * cols, cols);
    }
    free(tmp);
    ot_fill(f->x, cols, -2.0, 2.0);
    for (int64_t k = 0; k < cols && k < 32; k++) f->x[k] = 0.0f; /* a zero block (legacy) */
    if (cols > 300) f->x[300] = 25.0f; /* one large activation */
    lt_tensor_init(&f->tw, t, cols, rows, 1, 1, f->w);
    lt_tensor_init(&f->tx, LT_F32, cols, 1, 1, 1, f->x);
    lt_tensor_init(&f->ty, LT_F32, rows, 1, 1, 1, f->y);
}

static void fixture_free(fixture *f) {
    lt_aligned_free(f->w);
    free(f->wf);
    lt_aligned_free(f->x);
    lt_aligned_free(f->y);
}

/* x quantised by qdot.h's recipe, independently of the kernels: x_hat =
 * d_b * q, for blocks of 32 (legacy) or 256 (K-quants). */
static void quantise_x(lt_dtype t, const float *x, int64_t n, double *xh, double *step) {
    const int64_t blk = lt_dtype_block(t);
    for (int64_t b = 0; b < n / blk; b++) {
        const float *xb = x + b * blk;
        float amax = 0.0f, v = 0.0f;
        for (int64_t j = 0; j < blk; j++)
            if (fabsf(xb[j]) > amax) {
                amax = fabsf(xb[j]);
                v = xb[j];
            }
        step[b] = amax / 127.0;
        for (int64_t j = 0; j < blk; j++) {
            if (amax == 0.0f) {
                xh[b * blk + j] = 0.0;
            } else if (blk == 32) {
                float d = amax / 127.0f, q = rintf(xb[j] * (127.0f / amax));
                xh[b * blk + j] = (double)d * q;
            } else {
                float is = -127.0f / v, q = rintf(is * xb[j]);
                if (q > 127) q = 127;
                xh[b * blk + j] = (double)(1.0f / is) * q;
            }
        }
    }
}

static lt_call matvec_call(fixture *f, bool acc) {
    lt_call c = {0};
    c.op[0] = &f->ty;
    c.op[1] = &f->tw;
    c.op[2] = &f->tx;
    c.ia[0] = acc;
    lt_params_default(lt_kernel_get(LT_K_MATVEC), &c.params);
    return c;
}

/* y against both references (y0: what y held before an accumulating call). */
static void check_refs(const fixture *f, const float *y, const float *y0, const char *what) {
    const int64_t blk = lt_dtype_block(f->t), nblk = f->cols / blk;
    double *xh = malloc(sizeof(double) * (size_t)f->cols);
    double *step = malloc(sizeof(double) * (size_t)nblk);
    quantise_x(f->t, f->x, f->cols, xh, step);
    int bad = 0;
    for (int64_t r = 0; r < f->rows; r++) {
        const float *w = f->wf + r * f->cols;
        double ref = y0 ? y0[r] : 0.0, ref2 = ref, mag = fabs(ref), mag2 = fabs(ref), qb = 0.0;
        for (int64_t b = 0; b < nblk; b++) {
            double sw = 0.0;
            for (int64_t j = b * blk; j < (b + 1) * blk; j++) {
                ref += (double)w[j] * f->x[j];
                ref2 += (double)w[j] * xh[j];
                mag += fabs((double)w[j] * f->x[j]);
                mag2 += fabs((double)w[j] * xh[j]);
                sw += fabs((double)w[j]);
            }
            /* half a step per element, plus rounding */
            qb += step[b] * 0.5 * (1.0 + 1.0 / 64) * sw;
        }
        const double e1 = fabs(y[r] - ref), e2 = fabs(y[r] - ref2);
        if (!(e1 <= qb + ROUND_TOL * mag) || !(e2 <= ROUND_TOL * mag2 + 1e-30)) {
            if (bad++ < 3)
                LT__FAIL("%s %s row %lld: y %.9g, exact-x ref %.9g (bound %.3g), quantised-x ref "
                         "%.9g (bound %.3g)", what, lt_dtype_name(f->t), (long long)r, y[r], ref,
                         qb + ROUND_TOL * mag, ref2, ROUND_TOL * mag2);
        }
    }
    ASSERT_EQ(bad, 0);
    free(xh);
    free(step);
}

/* matvec: every ISA and thread count at the defaults, every point of the
 * space when `sweep`; every result the portable 1-thread bits. */
static void test_matvec(lt_dtype t, int64_t rows, int64_t cols, bool sweep) {
    fixture f;
    fixture_init(&f, t, rows, cols, (uint64_t)(t * 1000 + rows + cols));
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    float *want = malloc(sizeof(float) * (size_t)rows), *y0 = malloc(sizeof(float) * (size_t)rows);
    for (int acc = 0; acc < 2; acc++) {
        ot_fill(y0, rows, -1.0, 1.0);
        lt_call c = matvec_call(&f, acc);
        ASSERT_EQ(k->check(&c), LT_OK);
        memcpy(f.y, y0, sizeof(float) * (size_t)rows);
        ot_run(ot_fn(LT_K_MATVEC, LT_ISA_PORTABLE), &c, &(lt_step){.n_tokens = 1}, 1);
        memcpy(want, f.y, sizeof(float) * (size_t)rows);
        check_refs(&f, want, acc ? y0 : NULL, acc ? "matvec (accumulate)" : "matvec");
        const int points = sweep ? ot_param_points(k) : 1;
        int differ = 0;
        for (int isa = 0; isa < ot_isa_count(); isa++) {
            for (int p = 0; p < points; p++) {
                if (sweep) ot_param_point(k, p, &c.params);
                ASSERT_EQ(k->check(&c), LT_OK);
                for (int nth = 1; nth <= 3; nth++) {
                    memcpy(f.y, y0, sizeof(float) * (size_t)rows);
                    ot_run(ot_fn(LT_K_MATVEC, isa), &c, &(lt_step){.n_tokens = 1, .seq = 0}, nth);
                    if (memcmp(f.y, want, sizeof(float) * (size_t)rows) && differ++ < 3)
                        LT__FAIL("matvec %s %lldx%lld: %s, point %d, nth %d: other bits",
                                 lt_dtype_name(t), (long long)rows, (long long)cols,
                                 lt_isa_name((lt_isa)isa), p, nth);
                }
            }
        }
        ASSERT_EQ(differ, 0);
    }
    free(want);
    free(y0);
    fixture_free(&f);
}

/* matmul: each token's outputs are matvec's bits for that token's x, on
 * every ISA, nth and (sweep) point of matmul's space. */
static void test_matmul(lt_dtype t, int64_t rows, int64_t cols, int64_t n, bool sweep) {
    fixture f;
    fixture_init(&f, t, rows, cols, (uint64_t)(t * 7 + rows));
    float *X = lt_aligned_alloc(64, sizeof(float) * (size_t)(n * cols));
    float *Y = lt_aligned_alloc(64, sizeof(float) * (size_t)(n * rows));
    float *want = malloc(sizeof(float) * (size_t)(n * rows));
    ot_fill(X, n * cols, -1.5, 1.5);
    lt_call mv = matvec_call(&f, false);
    for (int64_t i = 0; i < n; i++) { /* the matvec bits of each token */
        memcpy(f.x, X + i * cols, sizeof(float) * (size_t)cols);
        ot_run(ot_fn(LT_K_MATVEC, LT_ISA_PORTABLE), &mv, &(lt_step){.n_tokens = 1}, 1);
        check_refs(&f, f.y, NULL, "matvec for matmul");
        for (int64_t j = 0; j < rows; j++) want[i * rows + j] = f.y[j];
    }
    lt_tensor tX, tY;
    lt_tensor_init(&tX, LT_F32, cols, n, 1, 1, X);
    lt_tensor_init(&tY, LT_F32, rows, n, 1, 1, Y);
    lt_call c = {0};
    c.op[0] = &tY;
    c.op[1] = &f.tw;
    c.op[2] = &tX;
    const lt_kernel *k = lt_kernel_get(LT_K_MATMUL);
    lt_params_default(k, &c.params);
    const int points = sweep ? ot_param_points(k) : 1;
    int differ = 0;
    for (int isa = 0; isa < ot_isa_count(); isa++) {
        for (int p = 0; p < points; p++) {
            if (sweep) ot_param_point(k, p, &c.params);
            ASSERT_EQ(k->check(&c), LT_OK);
            for (int nth = 1; nth <= 3; nth++) {
                memset(Y, 0xff, sizeof(float) * (size_t)(n * rows));
                ot_run(ot_fn(LT_K_MATMUL, isa), &c, &(lt_step){.n_tokens = n}, nth);
                if (memcmp(Y, want, sizeof(float) * (size_t)(n * rows)) && differ++ < 3)
                    LT__FAIL("matmul %s %lldx%lld n %lld: %s, point %d, nth %d: not matvec's bits",
                             lt_dtype_name(t), (long long)rows, (long long)cols, (long long)n,
                             lt_isa_name((lt_isa)isa), p, nth);
            }
        }
    }
    ASSERT_EQ(differ, 0);
    /* accumulate adds the same products */
    c.ia[0] = 1;
    lt_params_default(k, &c.params);
    for (int64_t i = 0; i < n * rows; i++) Y[i] = 1.0f;
    ot_run(ot_fn(LT_K_MATMUL, LT_ISA_PORTABLE), &c, &(lt_step){.n_tokens = n}, 2);
    int bad = 0;
    for (int64_t i = 0; i < n * rows; i++) bad += Y[i] != 1.0f + want[i];
    ASSERT_EQ(bad, 0);
    lt_aligned_free(X);
    lt_aligned_free(Y);
    free(want);
    fixture_free(&f);
}

/* embed: rows equal lt_row_to_f32's, every ISA, nth and min_chunk. */
static void test_embed(lt_dtype t) {
    const int64_t dim = 512, vocab = 9, n = 5;
    fixture f;
    fixture_init(&f, t, vocab, dim, 99);
    float *out = lt_aligned_alloc(64, sizeof(float) * (size_t)(n * dim));
    lt_tensor to;
    lt_tensor_init(&to, LT_F32, dim, n, 1, 1, out);
    const int32_t tokens[5] = {3, 0, 8, 3, 5};
    lt_call c = {0};
    c.op[0] = &to;
    c.op[1] = &f.tw;
    const lt_kernel *k = lt_kernel_get(LT_K_EMBED);
    int differ = 0;
    for (int isa = 0; isa < ot_isa_count(); isa++) {
        for (int p = 0; p < ot_param_points(k); p++) {
            ot_param_point(k, p, &c.params);
            ASSERT_EQ(k->check(&c), LT_OK);
            for (int nth = 1; nth <= 3; nth++) {
                memset(out, 0xff, sizeof(float) * (size_t)(n * dim));
                ot_run(ot_fn(LT_K_EMBED, isa), &c,
                       &(lt_step){.n_tokens = n, .tokens = tokens}, nth);
                for (int64_t i = 0; i < n; i++)
                    if (memcmp(out + i * dim, f.wf + tokens[i] * dim,
                               sizeof(float) * (size_t)dim) && differ++ < 3)
                        LT__FAIL("embed %s: %s, point %d, nth %d, token %lld", lt_dtype_name(t),
                                 lt_isa_name((lt_isa)isa), p, nth, (long long)i);
            }
        }
    }
    ASSERT_EQ(differ, 0);
    lt_aligned_free(out);
    fixture_free(&f);
}

/* NaN in x turns y NaN, as the f32 sums would; an all-zero x gives zeros. */
static void test_special_x(lt_dtype t) {
    const int64_t cols = lt_dtype_block(t) * 2;
    fixture f;
    fixture_init(&f, t, 4, cols, 5);
    lt_call c = matvec_call(&f, false);
    memset(f.x, 0, sizeof(float) * (size_t)cols);
    ot_run(ot_fn(LT_K_MATVEC, LT_ISA_PORTABLE), &c, &(lt_step){.n_tokens = 1}, 1);
    for (int r = 0; r < 4; r++) ASSERT_TRUE(f.y[r] == 0.0f);
    f.x[cols - 1] = NAN;
    ot_run(ot_fn(LT_K_MATVEC, LT_ISA_PORTABLE), &c, &(lt_step){.n_tokens = 1}, 1);
    for (int r = 0; r < 4; r++) ASSERT_TRUE(isnan(f.y[r]));
    fixture_free(&f);
}

/* The activation quantisers (the portable ones, and the vector ones of every
 * ISA this CPU runs) against their definition in qdot.h, written out here
 * the plain way (lrintf in the default rounding mode): the same bytes for
 * random blocks, blocks whose largest magnitude appears twice
 * with both signs (the first one sets the sign of the scale), values that
 * land on halves (ties go to even), zeros, a NaN and an infinity. */
static void ref_xqk(const float *xb, lt__xqk *y) {
    float amax = 0.0f, max = 0.0f;
    bool finite = true;
    for (int j = 0; j < LT_QK_K; j++) {
        finite &= fabsf(xb[j]) <= FLT_MAX;
        if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]), max = xb[j];
    }
    memset(y, 0, sizeof *y);
    const float iscale = -127.0f / max;
    if (!finite || !(fabsf(iscale) <= FLT_MAX)) {
        y->d = finite ? 0.0f : NAN;
        return;
    }
    for (int j = 0; j < LT_QK_K; j++) {
        const long v = lrintf(iscale * xb[j]);
        const int8_t q = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        y->qs[lt__xqk_pos(j)] = q;
        y->bsums[j / 16] = (int16_t)(y->bsums[j / 16] + q);
    }
    y->d = 1.0f / iscale;
}

static void ref_xq32(const float *xb, lt__xq32 *y) {
    float amax = 0.0f;
    bool finite = true;
    for (int j = 0; j < 32; j++) {
        finite &= fabsf(xb[j]) <= FLT_MAX;
        amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
    }
    memset(y, 0, sizeof *y);
    const float inv = 127.0f / amax;
    if (!finite || !(inv <= FLT_MAX)) {
        y->d = finite ? 0.0f : NAN;
        return;
    }
    for (int j = 0; j < 32; j++) y->qs[j] = (int8_t)lrintf(xb[j] * inv);
    for (int j = 0; j < 32; j++) y->off -= 8 * y->qs[j];
    y->d = amax / 127.0f;
}

static bool same_float(float a, float b) { return (isnan(a) && isnan(b)) || a == b; }

static void test_xquant(void) {
    enum { CASES = 7 };
    float x[LT_QK_K];
    int differ = 0;
    uint32_t s = 99;
    for (int c = 0; c < CASES * 40; c++) {
        const int kind = c % CASES;
        for (int j = 0; j < LT_QK_K; j++) {
            s = s * 1664525u + 1013904223u;
            x[j] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (kind == 1 ? 1e-30f : 3.0f);
        }
        if (kind == 2) x[17] = 5.0f, x[200] = -5.0f;        /* the first of ties sets the sign */
        if (kind == 3) x[40] = -5.0f, x[41] = 5.0f;
        if (kind == 4) /* a largest magnitude of 127 in every 32: the scale 1, every x on a half */
            for (int j = 0; j < LT_QK_K; j++)
                x[j] = j % 32 ? (float)((int)((s >> (j % 24)) % 253) - 126) + 0.5f : 127.0f;
        if (kind == 5) memset(x, 0, sizeof x);
        if (kind == 6) x[c % LT_QK_K] = (c / CASES) % 2 ? NAN : INFINITY;
        lt__xqk want;
        ref_xqk(x, &want);
        /* the portable quantiser and each ISA's (lt__xquant_of) */
        for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) {
            lt__xqk got;
            lt__xquant_of(LT_Q4_K, (lt_isa)isa)(x, LT_QK_K, &got);
            const bool d = !same_float(got.d, want.d) || memcmp(got.qs, want.qs, sizeof got.qs) ||
                           memcmp(got.bsums, want.bsums, sizeof got.bsums);
            if (d && !differ)
                fprintf(stderr, "  xqk quantiser, %s, case kind %d: not the definition's bytes\n",
                        lt_isa_name((lt_isa)isa), kind);
            differ += d;
        }
        for (int b = 0; b < LT_QK_K / 32; b++) {
            lt__xq32 w32;
            ref_xq32(x + 32 * b, &w32);
            for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) {
                lt__xq32 g32;
                lt__xquant_of(LT_Q4_0, (lt_isa)isa)(x + 32 * b, 32, &g32);
                const bool d = !same_float(g32.d, w32.d) ||
                               memcmp(g32.qs, w32.qs, sizeof g32.qs) || g32.off != w32.off;
                if (d && !differ)
                    fprintf(stderr, "  xq32 quantiser, %s, case kind %d: not the definition's "
                            "bytes\n", lt_isa_name((lt_isa)isa), kind);
                differ += d;
            }
        }
    }
    ASSERT_EQ(differ, 0);
}

/* q4_0 and q4_k in groups of 16 (core.h's interleaved layout, qdot.h's one
 * chain a row). */

/* f's weights interleaved into a new buffer: the tensor a resident model's
 * projection is (rows a multiple of 16). */
static void *interleave(const fixture *f, lt_tensor *t) {
    const int64_t nb = f->cols / lt_dtype_block(f->t);
    const size_t rb = lt_dtype_row_bytes(f->t, f->cols);
    char *g = lt_aligned_alloc(64, rb * (size_t)f->rows);
    for (int64_t r = 0; r < f->rows; r += LT_X16_ROWS)
        lt_x16_pack(f->t, (const char *)f->w + rb * (size_t)r, rb, LT_X16_ROWS, nb,
                    g + rb * (size_t)r);
    *t = f->tw;
    t->data = g;
    t->layout = LT_LAYOUT_X16;
    return g;
}

/* The layout's round trip, and every ISA's group dot (with VNNI and
 * without) bit for bit the portable one-row dot's, for 1 .. 8 tokens and 1
 * .. NB blocks: blocks of extreme levels (0 and 15 or 63; q4_k's largest
 * scales and minimums, q6_k's -128 and 127) against x of +-127, a zero block of x, and a block of x
 * holding an infinity (its d NaN): that token's rows turn NaN. */
static void test_x16_dots(lt_dtype t) {
    enum { NB = 5, MAXT = LT__X16_TOK_MAX };
    const int64_t blk = lt_dtype_block(t), cols = NB * blk, bb = (int64_t)lt_dtype_block_bytes(t);
    const size_t rb = lt_dtype_row_bytes(t, cols);
    fixture f;
    fixture_init(&f, t, LT_X16_ROWS, cols, 77 + t);
    uint8_t *w = f.w;
    for (int i = 0; i < 3; i++) { /* rows 0..2, block 1: levels 0 / 15, large scales */
        uint8_t *b1 = w + rb * (size_t)i + bb;
        if (t == LT_Q4_0) memset(((lt_block_q4_0 *)b1)->qs, i ? 0x0f : 0xf0, 16);
        else if (t == LT_Q8_0) /* -128 (never written by llama.cpp, but a valid byte) and 127 */
            memset(((lt_block_q8_0 *)b1)->qs, i == 1 ? 0x80 : 0x7f, 32);
        else if (t == LT_Q5_0) { /* levels 31 / 15 and 16 / 0, fifth bits all or none */
            memset(((lt_block_q5_0 *)b1)->qs, i ? 0x0f : 0xf0, 16);
            memset(((lt_block_q5_0 *)b1)->qh, i == 1 ? 0xff : i == 2 ? 0x5a : 0x00, 4);
        } else if (t == LT_Q4_1) { /* levels 15, minimums of either sign */
            memset(((lt_block_q4_1 *)b1)->qs, i ? 0x0f : 0xf0, 16);
            ((lt_block_q4_1 *)b1)->m = lt_f32_to_f16(i == 1 ? -3.0f : 2.5f);
        } else if (t == LT_Q5_1) {
            memset(((lt_block_q5_1 *)b1)->qs, i ? 0x0f : 0xf0, 16);
            memset(((lt_block_q5_1 *)b1)->qh, i == 1 ? 0xff : i == 2 ? 0xa5 : 0x00, 4);
            ((lt_block_q5_1 *)b1)->m = lt_f32_to_f16(i == 1 ? -3.0f : 2.5f);
        } else if (t == LT_Q6_K) { /* levels 63 or 0, scales -128 or 127 */
            memset(((lt_block_q6_k *)b1)->ql, i ? 0xff : 0x00, 128);
            memset(((lt_block_q6_k *)b1)->qh, i ? 0xff : 0x00, 64);
            memset(((lt_block_q6_k *)b1)->scales, i == 1 ? 0x80 : 0x7f, 16);
        } else {
            memset(((lt_block_q4_k *)b1)->qs, i ? 0x0f : 0xf0, 128);
            memset(((lt_block_q4_k *)b1)->scales, 0xff, 12);
        }
    }
    char *group = lt_aligned_alloc(64, rb * LT_X16_ROWS);
    lt_x16_pack(t, f.w, rb, LT_X16_ROWS, NB, group);
    int bad = 0;
    for (int i = 0; i < LT_X16_ROWS; i++)
        for (int b = 0; b < NB; b++) {
            char back[sizeof(lt_block_q6_k)]; /* the largest interleaved block */
            _Static_assert(sizeof(lt_block_q6_k) >= sizeof(lt_block_q5_0), "read-back size");
            lt_x16_block(t, group, NB, i, b, back);
            bad += memcmp(back, w + rb * (size_t)i + bb * b, (size_t)bb) != 0;
        }
    ASSERT_EQ(bad, 0);
    const lt__qtype *qt = lt__qtype_of(t);
    float *x = malloc(sizeof(float) * (size_t)cols);
    char *xq[MAXT];
    const void *xs[MAXT];
    for (int k = 0; k < MAXT; k++) {
        ot_fill(x, cols, -3.0, 3.0);
        for (int64_t j = blk; j < 2 * blk; j++) x[j] = j % 2 ? 127.0f : -127.0f;
        if (k == 1) memset(x + 2 * blk, 0, sizeof(float) * (size_t)blk);
        if (k == 2) x[2 * blk + 6] = INFINITY; /* block 2 */
        xq[k] = malloc(qt->xq_bytes * NB);
        qt->quant(x, cols, xq[k]);
        xs[k] = xq[k];
    }
    for (int novnni = 0; novnni < 2; novnni++) {
#if LT_HAVE_X86
        lt__qdot_avoid_vnni = novnni;
#endif
        for (int isa = 0; isa < ot_isa_count(); isa++)
            for (int nt = 1; nt <= MAXT; nt++)
                for (int64_t nb = 1; nb <= NB; nb += 2) {
                    float out[MAXT * LT_X16_ROWS];
                    lt_x16_pack(t, f.w, rb, LT_X16_ROWS, nb, group); /* a group of nb blocks */
                    lt__x16_of(t, (lt_isa)isa)(group, nb, xs, nt, nb == 3 ? 256 : 0, out);
                    for (int k = 0; k < nt; k++)
                        for (int i = 0; i < LT_X16_ROWS; i++) {
                            const float want = qt->dot(w + rb * (size_t)i, xq[k], nb);
                            if (!same_float(out[k * LT_X16_ROWS + i], want) && bad++ < 3)
                                LT__FAIL("%s group dot, %s%s, %d tokens, %lld blocks: row %d "
                                         "token %d: %.9g, the one-row dot %.9g",
                                         lt_dtype_name(t), lt_isa_name((lt_isa)isa),
                                         novnni ? " without VNNI" : "", nt, (long long)nb, i, k,
                                         out[k * LT_X16_ROWS + i], want);
                        }
                    if (nb >= 3 && nt >= 3) ASSERT_TRUE(isnan(out[2 * LT_X16_ROWS + 7]));
                }
    }
#if LT_HAVE_X86
    lt__qdot_avoid_vnni = false;
#endif
    ASSERT_EQ(bad, 0);
    for (int k = 0; k < MAXT; k++) free(xq[k]);
    free(x);
    lt_aligned_free(group);
    fixture_free(&f);
}

/* matvec of one token (every point of its space when sweep), of n tokens
 * (the batched regime) and matmul over interleaved W: the plain layout's
 * bits (q8_0: the interleaved layout's on the portable path), every ISA and
 * nth. */
static void test_x16_layout(lt_dtype t, int64_t rows, int64_t cols, int64_t n, bool sweep) {
    fixture f;
    fixture_init(&f, t, rows, cols, (uint64_t)(rows + cols));
    lt_tensor tx16;
    void *g = interleave(&f, &tx16);
    const int plain_same = t != LT_Q8_0; /* plain q8_0 takes linear.h's sums */
    float *X = lt_aligned_alloc(64, sizeof(float) * (size_t)(n * cols));
    float *Y = lt_aligned_alloc(64, sizeof(float) * (size_t)(n * rows));
    float *want = malloc(sizeof(float) * (size_t)(n * rows));
    ot_fill(X, n * cols, -1.5, 1.5);
    lt_call mv = matvec_call(&f, false);
    if (!plain_same) mv.op[1] = &tx16;
    for (int64_t i = 0; i < n; i++) { /* plain, portable, one token at a time */
        memcpy(f.x, X + i * cols, sizeof(float) * (size_t)cols);
        ot_run(ot_fn(LT_K_MATVEC, LT_ISA_PORTABLE), &mv, &(lt_step){.n_tokens = 1}, 1);
        check_refs(&f, f.y, NULL, "interleaved matvec");
        memcpy(want + i * rows, f.y, sizeof(float) * (size_t)rows);
    }
    lt_tensor tX, tY;
    lt_tensor_init(&tX, LT_F32, cols, n, 1, 1, X);
    lt_tensor_init(&tY, LT_F32, rows, n, 1, 1, Y);
    const lt_kernel *kmv = lt_kernel_get(LT_K_MATVEC), *kmm = lt_kernel_get(LT_K_MATMUL);
    int differ = 0;
    for (int isa = 0; isa < ot_isa_count(); isa++) {
        /* one token */
        memcpy(f.x, X, sizeof(float) * (size_t)cols);
        mv.op[1] = &tx16;
        const int points = sweep ? ot_param_points(kmv) : 1;
        for (int p = 0; p < points; p++) {
            if (sweep) ot_param_point(kmv, p, &mv.params);
            ASSERT_EQ(kmv->check(&mv), LT_OK);
            for (int nth = 1; nth <= 3; nth++) {
                memset(f.y, 0xff, sizeof(float) * (size_t)rows);
                ot_run(ot_fn(LT_K_MATVEC, isa), &mv, &(lt_step){.n_tokens = 1}, nth);
                if (memcmp(f.y, want, sizeof(float) * (size_t)rows) && differ++ < 3)
                    LT__FAIL("%s interleaved matvec %lldx%lld: %s, point %d, nth %d: other bits",
                             lt_dtype_name(t), (long long)rows, (long long)cols,
                             lt_isa_name((lt_isa)isa), p, nth);
            }
        }
        /* n tokens through matvec and matmul, both layouts */
        for (int lay = !plain_same; lay < 2; lay++)
            for (int kind = 0; kind < 2; kind++) {
                lt_call c = {0};
                c.op[0] = &tY, c.op[1] = lay ? &tx16 : &f.tw, c.op[2] = &tX;
                lt_params_default(kind ? kmm : kmv, &c.params);
                if (!kind) c.params.v[LT__MV_TOK_CHUNK_KB] = 32; /* several chunks at 2048 columns */
                const int rc = (kind ? kmm : kmv)->check(&c);
                if (rc != LT_OK) LT__FAIL("check: %s", lt_errmsg());
                for (int nth = 1; nth <= 3; nth += 2) {
                    memset(Y, 0xff, sizeof(float) * (size_t)(n * rows));
                    ot_run(ot_fn(kind ? LT_K_MATMUL : LT_K_MATVEC, isa), &c,
                           &(lt_step){.n_tokens = kind ? n : 1}, nth);
                    if (memcmp(Y, want, sizeof(float) * (size_t)(n * rows)) && differ++ < 3)
                        LT__FAIL("%s %s of %lld tokens, %s layout, %s, nth %d: not matvec's bits",
                                 lt_dtype_name(t), kind ? "matmul" : "matvec", (long long)n,
                                 lay ? "interleaved" : "plain", lt_isa_name((lt_isa)isa), nth);
                }
            }
        mv.op[1] = plain_same ? &f.tw : &tx16;
    }
    ASSERT_EQ(differ, 0);
    /* the check: whole groups of plain-sized rows, a type with the layout */
    lt_tensor odd = tx16;
    odd.ne[1] = rows - 8;
    mv.op[1] = &odd;
    lt_tensor y2 = f.ty;
    y2.ne[0] = rows - 8;
    mv.op[0] = &y2;
    ASSERT_EQ(kmv->check(&mv), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "groups of 16") != NULL);
    odd = tx16;
    odd.dtype = LT_Q3_K; /* a type without the layout */
    mv.op[1] = &odd;
    mv.op[0] = &f.ty;
    ASSERT_EQ(kmv->check(&mv), LT_EINVAL);
    lt_aligned_free(g);
    lt_aligned_free(X);
    lt_aligned_free(Y);
    free(want);
    fixture_free(&f);
}

/* The constraints: whole blocks, the plain layout. */
static void test_check(lt_dtype t) {
    const int64_t blk = lt_dtype_block(t);
    fixture f;
    fixture_init(&f, t, 3, blk * 2, 1);
    lt_call c = matvec_call(&f, false);
    lt_tensor bad;
    lt_tensor_init(&bad, t, blk * 2 - 16, 3, 1, 1, f.w); /* not whole blocks */
    lt_tensor x2;
    lt_tensor_init(&x2, LT_F32, blk * 2 - 16, 1, 1, 1, f.x);
    c.op[1] = &bad;
    c.op[2] = &x2;
    ASSERT_EQ(lt_kernel_get(LT_K_MATVEC)->check(&c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "not a multiple") != NULL);
    c.op[1] = &f.tw;
    c.op[2] = &f.tx;
    f.tw.layout = LT_LAYOUT_Q8_SPLIT;
    ASSERT_EQ(lt_kernel_get(LT_K_MATVEC)->check(&c), LT_EINVAL);
    ASSERT_EQ(lt_kernel_get(LT_K_MATMUL)->check(&c), LT_EINVAL);
    f.tw.layout = LT_LAYOUT_PLAIN;
    ASSERT_EQ(lt_kernel_get(LT_K_MATVEC)->check(&c), LT_OK);
    fixture_free(&f);
}

int main(void) {
    const bool emu = lt_test_emulated();
    test_xquant();
    for (int i = 0; i < NTYPES; i++) {
        const lt_dtype t = TYPES[i];
        const int64_t blk = lt_dtype_block(t);
        test_matvec(t, 5, blk * 2, true);               /* the whole space */
        test_matvec(t, 37, blk == 32 ? 96 : 512, false); /* odd rows, a few blocks */
        if (!emu) test_matvec(t, 300, blk == 32 ? 2048 : 2816, false);
        test_matmul(t, 5, blk * 2, 3, true);
        test_matmul(t, 33, blk == 32 ? 160 : 768, 7, false);
        /* more rows than one row block of a thread, tokens past whole groups */
        if (!emu) test_matmul(t, 301, 4096, 10, false);
        if (lt_x16_has(t)) {
            test_x16_dots(t);
            test_x16_layout(t, 32, blk * 3, 6, true);
            test_x16_layout(t, 48, blk * 5, 7, false);
            if (!emu) test_x16_layout(t, 320, blk == 32 ? 2048 : 2816, 10, false);
        }
        test_embed(t);
        test_special_x(t);
        test_check(t);
    }
    test_x16_dots(LT_Q8_0);
    test_x16_layout(LT_Q8_0, 32, 96, 6, true);
    test_x16_layout(LT_Q8_0, 48, 160, 7, false);
    if (!emu) test_x16_layout(LT_Q8_0, 320, 2048, 10, false);
#if LT_HAVE_X86
    /* the AVX-512 dots without VNNI, and AVX2's without AVX-VNNI, on a CPU
     * that has them (the runs above took them): the same bits */
    if (lt_cpu()->avx512vnni || lt_cpu()->avxvnni) {
        lt__qdot_avoid_vnni = true;
        for (int i = 0; i < NTYPES; i++) {
            const lt_dtype t = TYPES[i];
            const int64_t blk = lt_dtype_block(t);
            test_matvec(t, 37, blk == 32 ? 96 : 512, false);
            test_matmul(t, 33, blk == 32 ? 160 : 768, 7, false);
        }
        test_x16_dots(LT_Q8_0);
        test_x16_layout(LT_Q8_0, 48, 160, 7, false);
        test_x16_layout(LT_Q4_0, 48, 160, 7, false);
        test_x16_layout(LT_Q4_1, 48, 160, 7, false);
        test_x16_layout(LT_Q5_0, 48, 160, 7, false);
        test_x16_layout(LT_Q5_1, 48, 160, 7, false);
        test_x16_layout(LT_Q4_K, 48, 1280, 7, false);
        test_x16_layout(LT_Q6_K, 48, 1280, 7, false);
        lt__qdot_avoid_vnni = false;
    }
#endif
    return lt_test_finish();
}
