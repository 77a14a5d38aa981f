/* matvec against a double-precision reference computed here from the
 * lt_row_to_f32-dequantised weights: every dtype, shapes with odd row counts,
 * rows < nth, cols = 32 and a few thousand, every ISA this CPU has, every
 * point of the parameter space (for dtypes other than q8_0, which ignore
 * act_int16 / act_int8, those two are swept together), nth = 1, 2, 3
 * (threads simulated by calling each ith in turn), overwrite and accumulate;
 * plus check() and cost(). act_int16 = 1 and act_int8 = 1 (q8_0 with int16
 * or int8 activations; int8 wins when both are set): within their
 * quantisation bounds, bit-identical between the portable, AVX2 and
 * AVX-512 paths (int8 also on the AVX-512BW lanes used without VNNI), a
 * no-op for other dtypes; the per-thread cache of x keyed by (call, step seq); NaN and
 * zero x. */
#include "kernels/linear.h" /* lt__q8i8_avoid_vnni */
#include "kernels/qdot.h"   /* lt__qdot_avoid_vnni */
#include "looptune/kernels.h"
#include "ops_test.h"
#include "test.h"

#include <stdint.h>

/* matvec's parameter indices of act_int16 and act_int8 (its descriptor
 * order, checked by test_descriptor) */
#define LT_PARAM_ACT_INT16 4
#define LT_PARAM_ACT_INT8 5
#define NPARAMS 7
/* the parameters a one-token call reads (tok_chunk_kb, the last, is read by
 * a call of several tokens only: tests/model/test_batch_params.c) */
#define SWEPT 6

/* Tolerance: |y - ref| <= TOL * (sum_k |w_k x_k| + |y0|). Float sums of a
 * few thousand terms in any order stay far below it (~1e-7 typical); one
 * wrong or missing weight (about 1/cols of the sum) is far above it. */
#define TOL 1e-5

/* act_int16 = 1 adds the error of x's quantisation: per 32-block b with
 * s_b = max|x_b| / 32767, |x_k - s_b xq_k| <= s_b (0.5 + 2^-9) (the rounding
 * of x_k * 32767 / max|x_b| to nearest, plus that product's own float
 * rounding, < 32768 * 2^-24 = 2^-9), so |error| <= XQ_TOL * sum_b s_b
 * sum_(k in b) |w_k|. act_int8 = 1: the same with s_b = max|x_b| / 127
 * (the product's rounding is then below 2^-16, inside the same margin). */
#define XQ_TOL (0.5 + 1.0 / 512)

/* Which sums y holds: f32 dots, or integer dots with x quantised to int16 /
 * int8 (the step of x's quantisation is max|x_b| / QMAX). */
typedef enum { MODE_F32 = 0, MODE_I16 = 32767, MODE_I8 = 127 } mode;

/* The mode a point runs: int8 wins over int16, both apply to q8_0 only, on
 * every path (split rows on AVX2 through the portable one). */
static mode mode_of(const lt_tensor *w, const lt_params *p) {
    if (w->dtype != LT_Q8_0) return MODE_F32;
    return p->v[LT_PARAM_ACT_INT8] ? MODE_I8 : p->v[LT_PARAM_ACT_INT16] ? MODE_I16 : MODE_F32;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

typedef struct {
    int64_t rows, cols;
} shape;

typedef struct {
    lt_dtype dt;
    int64_t rows, cols;
    void *w;        /* [rows] rows of the dtype */
    float *x;       /* [cols] */
    float *y0;      /* [rows] initial y for accumulate */
    double *ref;    /* [rows] sum_k w_k x_k in double */
    double *mag;    /* [rows] sum_k |w_k x_k| */
    double *qerr;   /* [rows] sum_b max|x_b| sum_(k in b) |w_k| (times the step / max|x_b|) */
    lt_tensor tw, tx, ty;
} fixture;

static void fixture_init(fixture *f, lt_dtype dt, int64_t rows, int64_t cols) {
    f->dt = dt;
    f->rows = rows;
    f->cols = cols;
    size_t rb = lt_dtype_row_bytes(dt, cols);
    f->w = lt_aligned_alloc(64, rb * (size_t)rows);
    f->x = lt_aligned_alloc(64, sizeof(float) * (size_t)cols);
    f->y0 = lt_aligned_alloc(64, sizeof(float) * (size_t)rows);
    f->ref = lt_aligned_alloc(64, sizeof(double) * (size_t)rows);
    f->mag = lt_aligned_alloc(64, sizeof(double) * (size_t)rows);
    f->qerr = lt_aligned_alloc(64, sizeof(double) * (size_t)rows);
    float *tmp = malloc(sizeof(float) * (size_t)cols);
    for (int64_t k = 0; k < cols; k++) f->x[k] = frand();
    for (int64_t r = 0; r < rows; r++) {
        /* rows of different scales so the per-row tolerance matters */
        float s = 0.25f + (float)(r % 5);
        for (int64_t k = 0; k < cols; k++) tmp[k] = s * frand();
        char *row = (char *)f->w + rb * (size_t)r;
        lt_row_from_f32(dt, tmp, row, cols);
        lt_row_to_f32(dt, row, tmp, cols); /* the exact weights the kernel sees */
        double acc = 0, mag = 0, qerr = 0;
        for (int64_t k = 0; k < cols; k++) {
            acc += (double)tmp[k] * (double)f->x[k];
            mag += fabs((double)tmp[k] * (double)f->x[k]);
        }
        for (int64_t k0 = 0; k0 + 32 <= cols; k0 += 32) {
            double amax = 0, wsum = 0;
            for (int64_t k = k0; k < k0 + 32; k++) {
                amax = fmax(amax, fabs((double)f->x[k]));
                wsum += fabs((double)tmp[k]);
            }
            qerr += amax * wsum;
        }
        f->ref[r] = acc;
        f->mag[r] = mag;
        f->qerr[r] = qerr;
        f->y0[r] = 3.0f * frand();
    }
    free(tmp);
    lt_tensor_init(&f->tw, dt, cols, rows, 1, 1, f->w);
    lt_tensor_init(&f->tx, LT_F32, cols, 1, 1, 1, f->x);
}

static void fixture_free(fixture *f) {
    lt_aligned_free(f->w);
    lt_aligned_free(f->x);
    lt_aligned_free(f->y0);
    lt_aligned_free(f->ref);
    lt_aligned_free(f->mag);
    lt_aligned_free(f->qerr);
}

static void make_call(lt_call *c, fixture *f, float *y, int accumulate, const lt_params *p) {
    memset(c, 0, sizeof *c);
    lt_tensor_init(&f->ty, LT_F32, f->rows, 1, 1, 1, y);
    c->op[0] = &f->ty;
    c->op[1] = &f->tw;
    c->op[2] = &f->tx;
    c->ia[0] = accumulate;
    c->params = *p;
}

/* Runs every ith of nth into its own NaN-filled copy of y, checks each row
 * was written by exactly one thread, and merges the rows into y. Returns the
 * number of ownership violations. */
static int run_threads(lt_kernel_fn fn, fixture *f, float *y, float *part, int nth,
                       const lt_params *p) {
    int bad = 0;
    for (int64_t r = 0; r < f->rows; r++) y[r] = NAN;
    for (int ith = 0; ith < nth; ith++) {
        for (int64_t r = 0; r < f->rows; r++) part[r] = NAN;
        lt_call c;
        make_call(&c, f, part, 0, p);
        lt_step step = {.pos = 0, .n_tokens = 1, .tokens = NULL};
        fn(&c, &step, ith, nth);
        for (int64_t r = 0; r < f->rows; r++) {
            if (isnan(part[r])) continue;
            if (!isnan(y[r])) bad++; /* two threads wrote row r */
            y[r] = part[r];
        }
    }
    return bad;
}

/* Rows of y outside the tolerance (NaN, i.e. never written, counts); xq:
 * the mode of the sums. */
static int64_t count_wrong(const fixture *f, const float *y, bool accumulate, mode xq,
                           int64_t *first) {
    int64_t bad = 0;
    for (int64_t r = 0; r < f->rows; r++) {
        double want = f->ref[r] + (accumulate ? (double)f->y0[r] : 0.0);
        double tol = TOL * (f->mag[r] + (accumulate ? fabs((double)f->y0[r]) : 0.0)) + 1e-30;
        if (xq != MODE_F32) tol += XQ_TOL * f->qerr[r] / (double)xq;
        if (!(fabs((double)y[r] - want) <= tol)) {
            if (bad == 0) *first = r;
            bad++;
        }
    }
    return bad;
}

static void sweep(const lt_kernel *k, lt_isa isa, fixture *f) {
    lt_kernel_fn fn = lt_kernel_fn_for(k, isa);
    float *y1 = malloc(sizeof(float) * (size_t)f->rows);
    float *yn = malloc(sizeof(float) * (size_t)f->rows);
    float *ye = malloc(sizeof(float) * (size_t)f->rows);
    float *part = malloc(sizeof(float) * (size_t)f->rows);
    const lt_param_def *d = k->params;
    int64_t points = 0, wrong = 0, owners = 0, nth_diff = 0, xq_diff = 0;
    lt_params p;
    lt_params_default(k, &p);
    int idx[NPARAMS] = {0};
    /* act_int16 and act_int8 only change q8_0's sums: for other dtypes they
     * are swept together ((0, 0) and (1, 1)), which keeps the sweep short */
    const bool q8 = f->dt == LT_Q8_0;
    /* under an emulator the larger shapes take every 13th point of the space
     * (13 is prime to every parameter's count of values, so each value of
     * each parameter still comes up) */
    const int every = lt_test_emulated() && f->rows * f->cols > 4096 ? 13 : 1;
    for (;;) {
        for (int i = 0; i < SWEPT; i++) p.v[i] = d[i].values[idx[i]];
        if (!q8) p.v[LT_PARAM_ACT_INT8] = p.v[LT_PARAM_ACT_INT16];
        const mode xq = mode_of(&f->tw, &p);
        points++;
        for (int nth = 1; nth <= 3; nth++) {
            float *y = nth == 1 ? y1 : yn;
            owners += run_threads(fn, f, y, part, nth, &p);
            int64_t first = -1, bad = count_wrong(f, y, false, xq, &first);
            if (bad && wrong == 0)
                fprintf(stderr, "  %s %s %lldx%lld rpt=%d unroll=%d kb=%d pf=%d i16=%d i8=%d "
                                "nth=%d: row %lld = %.9g, want %.9g\n",
                        lt_isa_name(isa), lt_dtype_name(f->dt), (long long)f->rows,
                        (long long)f->cols, p.v[0], p.v[1], p.v[2], p.v[3], p.v[4], p.v[5], nth,
                        (long long)first, (double)y[first], f->ref[first]);
            wrong += bad;
            /* rows are computed whole by one thread: nth must not change y */
            if (nth > 1 && memcmp(y1, yn, sizeof(float) * (size_t)f->rows) != 0) nth_diff++;
        }
        if (p.v[LT_PARAM_ACT_INT16] || p.v[LT_PARAM_ACT_INT8]) {
            /* an integer mode gives the portable integer path's bits on every
             * ISA (with both flags, those of act_int8 alone); where the flags
             * do not apply, the same bits as with both 0 */
            lt_params e = p;
            if (xq == MODE_I8) e.v[LT_PARAM_ACT_INT16] = 0;
            if (xq == MODE_F32) e.v[LT_PARAM_ACT_INT16] = e.v[LT_PARAM_ACT_INT8] = 0;
            owners += run_threads(xq != MODE_F32 ? lt_kernel_fn_for(k, LT_ISA_PORTABLE) : fn, f,
                                  ye, part, 1, &e);
            if (memcmp(y1, ye, sizeof(float) * (size_t)f->rows) != 0) {
                if (xq_diff == 0)
                    fprintf(stderr, "  %s %s %lldx%lld rpt=%d unroll=%d kb=%d pf=%d i16=%d i8=%d: "
                                    "differs from its reference\n",
                            lt_isa_name(isa), lt_dtype_name(f->dt), (long long)f->rows,
                            (long long)f->cols, p.v[0], p.v[1], p.v[2], p.v[3], p.v[4], p.v[5]);
                xq_diff++;
            }
        }
        /* accumulate mode, two threads */
        memcpy(yn, f->y0, sizeof(float) * (size_t)f->rows);
        lt_call c;
        make_call(&c, f, yn, 1, &p);
        lt_step step = {.pos = 0, .n_tokens = 1, .tokens = NULL};
        fn(&c, &step, 1, 2);
        fn(&c, &step, 0, 2);
        int64_t first = -1, bad = count_wrong(f, yn, true, xq, &first);
        if (bad && wrong == 0)
            fprintf(stderr, "  accumulate %s %s row %lld wrong\n", lt_isa_name(isa),
                    lt_dtype_name(f->dt), (long long)first);
        wrong += bad;

        int i = 0; /* next point of the space */
        const int nswept = q8 ? SWEPT : SWEPT - 1;
        for (int n = 0; n < every && i < nswept; n++)
            for (i = 0; i < nswept && ++idx[i] == d[i].n_values;) idx[i++] = 0;
        if (i == nswept) break;
    }
    ASSERT_EQ(points, (7 * 4 * 5 * 7 * 2 * (q8 ? 2 : 1) + every - 1) / every);
    ASSERT_EQ(wrong, 0);
    ASSERT_EQ(owners, 0);
    ASSERT_EQ(nth_diff, 0);
    ASSERT_EQ(xq_diff, 0);
    free(y1);
    free(yn);
    free(ye);
    free(part);
}

/* Rewrites the fixture's q8_0 rows in the split layout (core.h), rows
 * padded to a cache line when pad, as the resident weights are. */
static void split_fixture(fixture *f, bool pad) {
    const size_t rb = lt_dtype_row_bytes(LT_Q8_0, f->cols), ld = pad ? (rb + 63) / 64 * 64 : rb;
    char *w = lt_aligned_alloc(64, ld * (size_t)f->rows);
    for (int64_t r = 0; r < f->rows; r++)
        lt_q8_0_split_row((const lt_block_q8_0 *)((char *)f->w + rb * (size_t)r),
                          w + ld * (size_t)r, f->cols / LT_QK8_0);
    lt_aligned_free(f->w);
    f->w = w;
    f->tw.data = w;
    f->tw.nb[1] = ld;
    f->tw.nb[2] = f->tw.nb[3] = ld * (size_t)f->rows;
    f->tw.layout = LT_LAYOUT_Q8_SPLIT;
}

/* y of every ISA path at three parameter points (f32, int16 and int8
 * sums), into out[isa][point] */
static void ys_by_isa(fixture *f, float *out[3][3]) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    float *part = malloc(sizeof(float) * (size_t)f->rows);
    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) {
        for (int pt = 0; pt < 3; pt++) {
            lt_params p;
            lt_params_default(k, &p);
            p.v[LT_PARAM_ACT_INT16] = pt == 1;
            p.v[LT_PARAM_ACT_INT8] = pt == 2;
            run_threads(lt_kernel_fn_for(k, (lt_isa)isa), f, out[isa][pt], part, 2, &p);
        }
    }
    free(part);
}

/* Split q8_0 rows give y bit for bit as plain ones: every path keeps its
 * arithmetic order on either layout. Shapes with a
 * group of 32 blocks and a tail, odd block counts and a k block inside a
 * group; rows padded to a line and not. */
static void test_split_same_bits(void) {
    static const shape shapes[] = {{7, 32}, {37, 1024}, {45, 2080}, {33, 288}, {9, 5632}, {3, 96}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int pad = 0; pad < 2; pad++) {
            fixture f;
            fixture_init(&f, LT_Q8_0, shapes[s].rows, shapes[s].cols);
            float *plain[3][3], *split[3][3];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    plain[i][j] = calloc((size_t)f.rows, sizeof(float));
                    split[i][j] = calloc((size_t)f.rows, sizeof(float));
                }
            ys_by_isa(&f, plain);
            split_fixture(&f, pad);
            ys_by_isa(&f, split);
            for (int isa = 0; isa <= (int)lt_isa_detect(); isa++)
                for (int pt = 0; pt < 3; pt++) {
                    const float *want = plain[isa][pt];
                    if (memcmp(want, split[isa][pt], sizeof(float) * (size_t)f.rows))
                        fprintf(stderr, "  split %lldx%lld pad %d %s point %d: not plain's y\n",
                                (long long)f.rows, (long long)f.cols, pad,
                                lt_isa_name((lt_isa)isa), pt);
                    ASSERT_EQ(memcmp(want, split[isa][pt], sizeof(float) * (size_t)f.rows), 0);
                }
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    free(plain[i][j]);
                    free(split[i][j]);
                }
            fixture_free(&f);
        }
    }
}

/* A matvec of several tokens (a batched decode step) gives each token the
 * bits of its own one-token matvec, whatever tok_chunk_kb and rows_per_task
 * cut W into, on nth = 1..3 threads, overwriting or accumulating: every
 * dtype (every integer-dot type, whose path quantises each token once and
 * takes up to four tokens per pass of a row), every ISA, q8_0 plain and
 * split (rows of an odd number of blocks; on AVX-512 the lanes without VNNI
 * too, for q8_0 and the integer-dot types). Six tokens (a whole group and a partial one of the multi-token q8_0
 * paths); the integer-dot types with 2, 3, 4, 5 and 8 tokens too. */
static void test_tokens(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    const lt_param_def *tcd = &k->params[SWEPT];
    enum { NT_MAX = 8 };
    static const lt_dtype dts[] = {LT_F32,  LT_F16,  LT_BF16, LT_Q8_0, LT_Q4_0,
                                   LT_Q4_1, LT_Q5_0, LT_Q5_1, LT_Q2_K, LT_Q3_K,
                                   LT_Q4_K, LT_Q5_K, LT_Q6_K};
    static const int nts_q[] = {2, 3, 4, 5, 6, 8}, nts_other[] = {6};
    static const int32_t rpts[] = {4, 32, 256};
    int64_t checked = 0, wrong = 0;
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        for (int split = 0; split < (dts[di] == LT_Q8_0 ? 2 : 1); split++) {
            /* 150 rows of 512: 64 KiB of f32 W, so 32 KiB chunks cut it */
            fixture f;
            fixture_init(&f, dts[di], 150, dts[di] == LT_Q8_0 ? 544 : 512);
            if (split) split_fixture(&f, true);
            const int64_t R = f.rows, C = f.cols;
            float *X = malloc(sizeof(float) * (size_t)(NT_MAX * C));
            float *Y = malloc(sizeof(float) * (size_t)(NT_MAX * R));
            float *Y0 = malloc(sizeof(float) * (size_t)(NT_MAX * R));
            float *want = malloc(sizeof(float) * (size_t)(NT_MAX * R));
            for (int64_t i = 0; i < NT_MAX * C; i++) X[i] = frand();
            for (int64_t i = 0; i < NT_MAX * R; i++) Y0[i] = frand();
            const bool q = dts[di] != LT_F32 && dts[di] != LT_F16 && dts[di] != LT_BF16 &&
                           dts[di] != LT_Q8_0;
            const int *nts = q ? nts_q : nts_other;
            const int n_nts = q ? (int)(sizeof nts_q / sizeof nts_q[0]) : 1;
            for (int ni = 0; ni < n_nts; ni++) {
                const int nt = nts[ni];
                for (int run = 0; run <= (int)lt_isa_detect() + 2; run++) {
                    /* after every ISA's own run, the lanes of CPUs without VNNI: AVX-512
                     * (extra 1: q8_0 and the K-quants), AVX2 without AVX-VNNI (extra 2: q8_0) */
                    const int extra = run - (int)lt_isa_detect();
                    const int isa = extra <= 0 ? run
                                    : extra == 1 ? (int)LT_ISA_AVX512 : (int)LT_ISA_AVX2;
                    if (extra == 1 &&
                        ((dts[di] != LT_Q8_0 && !q) || lt_isa_detect() != LT_ISA_AVX512))
                        continue;
                    if (extra == 2 && (dts[di] != LT_Q8_0 || lt_isa_detect() < LT_ISA_AVX2 ||
                                       !lt_cpu()->avxvnni))
                        continue;
#if LT_HAVE_X86
                    lt__q8i8_avoid_vnni = lt__qdot_avoid_vnni = extra > 0;
#endif
                    const lt_kernel_fn fn = lt_kernel_fn_for(k, (lt_isa)isa);
                    for (size_t ri = 0; ri < sizeof rpts / sizeof rpts[0]; ri++)
                        for (int acc = 0; acc < 2; acc++) {
                            lt_params p;
                            lt_params_default(k, &p);
                            p.v[0] = rpts[ri];
                            /* each token alone, one thread */
                            for (int t = 0; t < nt; t++) {
                                lt_tensor ty, tx;
                                lt_tensor_init(&ty, LT_F32, R, 1, 1, 1, want + t * R);
                                lt_tensor_init(&tx, LT_F32, C, 1, 1, 1, X + t * C);
                                memcpy(want + t * R, Y0 + t * R, sizeof(float) * (size_t)R);
                                lt_call c = {.op = {&ty, &f.tw, &tx}, .ia = {acc}, .params = p};
                                lt_step st = {.n_tokens = 1};
                                fn(&c, &st, 0, 1);
                            }
                            for (int v = 0; v < tcd->n_values; v++)
                                for (int nth = 1; nth <= 3; nth++) {
                                    p.v[SWEPT] = tcd->values[v];
                                    memcpy(Y, Y0, sizeof(float) * (size_t)(nt * R));
                                    lt_tensor ty, tx;
                                    lt_tensor_init(&ty, LT_F32, R, nt, 1, 1, Y);
                                    lt_tensor_init(&tx, LT_F32, C, nt, 1, 1, X);
                                    lt_call c = {.op = {&ty, &f.tw, &tx}, .ia = {acc}, .params = p,
                                                 .flags = LT_CALL_BATCH};
                                    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
                                    lt_step st = {.n_tokens = nt};
                                    for (int ith = 0; ith < nth; ith++) fn(&c, &st, ith, nth);
                                    checked++;
                                    if (memcmp(Y, want, sizeof(float) * (size_t)(nt * R))) {
                                        if (!wrong)
                                            fprintf(stderr, "  tokens %s%s %s n=%d rpt=%d acc=%d "
                                                            "tok_chunk_kb=%d nth=%d: not the "
                                                            "one-token bits\n",
                                                    lt_dtype_name(dts[di]), split ? " split" : "",
                                                    lt_isa_name((lt_isa)isa), nt, rpts[ri], acc,
                                                    tcd->values[v], nth);
                                        wrong++;
                                    }
                                }
                        }
                }
            }
#if LT_HAVE_X86
            lt__q8i8_avoid_vnni = lt__qdot_avoid_vnni = false;
#endif
            free(X);
            free(Y);
            free(Y0);
            free(want);
            fixture_free(&f);
        }
    }
    ASSERT_TRUE(checked > 0);
    ASSERT_EQ(wrong, 0);
}

static void test_sweep(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    /* cols with a 16-element tail, and odd widths (172 as in stories260K's
     * FFN, 7) for the non-block dtypes (rounded up to 32 for q8_0); 2080 = 2048 + 32 exercises every k_block with a tail */
    static const shape shapes[] = {{1, 32}, {2, 48}, {7, 96}, {37, 528}, {45, 2080}, {259, 80}, {5, 172}, {3, 7}};
    for (int dt = 0; dt <= LT_Q8_0; dt++) /* q4_0 .. q6_k: test_qdot.c */ {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t cols = shapes[s].cols;
            if (dt == LT_Q8_0) cols = (cols + 31) / 32 * 32;
            fixture f;
            fixture_init(&f, (lt_dtype)dt, shapes[s].rows, cols);
            for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) sweep(k, (lt_isa)isa, &f);
            for (int split = 0; split < (dt == LT_Q8_0 ? 2 : 1); split++) {
                /* then the same weights split, as resident weights are */
                if (split) {
                    split_fixture(&f, true);
                    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++)
                        sweep(k, (lt_isa)isa, &f);
                }
#if LT_HAVE_X86
                if (dt == LT_Q8_0 && lt_isa_detect() >= LT_ISA_AVX2 &&
                    (lt_isa_detect() == LT_ISA_AVX512 || lt_cpu()->avxvnni)) {
                    /* the lanes CPUs without VNNI run: AVX-512's, and AVX2's where
                     * this CPU has AVX-VNNI (its AVX2 runs above took vpdpbusd) */
                    lt__q8i8_avoid_vnni = true;
                    if (lt_isa_detect() == LT_ISA_AVX512) sweep(k, LT_ISA_AVX512, &f);
                    if (lt_cpu()->avxvnni) sweep(k, LT_ISA_AVX2, &f);
                    lt__q8i8_avoid_vnni = false;
                }
#endif
            }
            fixture_free(&f);
        }
    }
}

static void test_descriptor(void) {
    const lt_kernel *k = lt_kernel_find("matvec");
    ASSERT_TRUE(k == lt_kernel_get(LT_K_MATVEC));
    ASSERT_EQ(k->n_params, NPARAMS);
    ASSERT_EQ(lt_kernel_param_index(k, "rows_per_task"), 0);
    ASSERT_EQ(lt_kernel_param_index(k, "unroll"), 1);
    ASSERT_EQ(lt_kernel_param_index(k, "k_block"), 2);
    ASSERT_EQ(lt_kernel_param_index(k, "prefetch"), 3);
    ASSERT_EQ(lt_kernel_param_index(k, "act_int16"), LT_PARAM_ACT_INT16);
    ASSERT_EQ(lt_kernel_param_index(k, "act_int8"), LT_PARAM_ACT_INT8);
    ASSERT_EQ(lt_kernel_param_index(k, "tok_chunk_kb"), SWEPT);
    ASSERT_EQ(k->params[SWEPT].regimes, 1u << LT_REGIME_BATCH);
    ot_check_param_defs(k);
    /* k blocks of whole block quadruples (the int8 path pairs blocks) */
    for (int j = 0; j < k->params[2].n_values; j++) ASSERT_EQ(k->params[2].values[j] % 128, 0);
}

static void test_check_and_cost(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    fixture f;
    fixture_init(&f, LT_Q8_0, 5, 64);
    float y[5];
    lt_params p;
    lt_params_default(k, &p);
    lt_call c;
    make_call(&c, &f, y, 0, &p);
    ASSERT_EQ(k->check(&c), LT_OK);
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);

    double bytes = 0, flops = 0;
    lt_step step = {.pos = 0, .n_tokens = 1, .tokens = NULL};
    k->cost(&c, &step, &bytes, &flops);
    ASSERT_NEAR(bytes, 5 * 2 * 34 + 64 * 4 + 5 * 4, 0);
    ASSERT_NEAR(flops, 2 * 5 * 64, 0);
    c.ia[0] = 1;
    k->cost(&c, &step, &bytes, &flops);
    ASSERT_NEAR(bytes, 5 * 2 * 34 + 64 * 4 + 5 * 4 * 2, 0);

    /* the split layout is q8_0's alone */
    f.tw.layout = LT_LAYOUT_Q8_SPLIT;
    ASSERT_EQ(k->check(&c), LT_OK);
    lt_tensor wf;
    lt_tensor_init(&wf, LT_F32, 64, 5, 1, 1, f.w);
    wf.layout = LT_LAYOUT_Q8_SPLIT;
    c.op[1] = &wf;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "layout") != NULL);
    wf.layout = (lt_layout)7;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    c.op[1] = &f.tw;
    f.tw.layout = LT_LAYOUT_PLAIN;

    lt_tensor bad;
    /* y of the wrong dtype */
    lt_tensor_init(&bad, LT_F16, 5, 1, 1, 1, y);
    c.op[0] = &bad;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    ASSERT_TRUE(strlen(lt_errmsg()) > 0);
    /* y of the wrong length */
    lt_tensor_init(&bad, LT_F32, 4, 1, 1, 1, y);
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    c.op[0] = &f.ty;
    /* x of the wrong length */
    lt_tensor_init(&bad, LT_F32, 32, 1, 1, 1, f.x);
    c.op[2] = &bad;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    /* x a matrix */
    lt_tensor_init(&bad, LT_F32, 64, 2, 1, 1, f.x);
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    c.op[2] = NULL;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    c.op[2] = &f.tx;
    /* q8_0 needs cols % 32 == 0 */
    lt_tensor_init(&bad, LT_Q8_0, 48, 5, 1, 1, f.w);
    bad.nb[1] = 2 * 34;
    c.op[1] = &bad;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    /* other dtypes take any width (odd widths run the portable sums) */
    float w[5 * 40] = {0}, x[40] = {0};
    lt_tensor tx;
    lt_tensor_init(&bad, LT_F32, 40, 5, 1, 1, w);
    lt_tensor_init(&tx, LT_F32, 40, 1, 1, 1, x);
    c.op[2] = &tx;
    ASSERT_EQ(k->check(&c), LT_OK);
    lt_tensor_init(&bad, LT_F32, 32, 5, 1, 1, w);
    lt_tensor_init(&tx, LT_F32, 32, 1, 1, 1, x);
    ASSERT_EQ(k->check(&c), LT_OK);
    /* a bad dtype, a 3-d W, a bad accumulate flag, a bad parameter value */
    bad.dtype = (lt_dtype)17;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    lt_tensor_init(&bad, LT_F32, 32, 5, 2, 1, w);
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    lt_tensor_init(&bad, LT_F32, 32, 5, 1, 1, w);
    c.ia[0] = 2;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    c.ia[0] = 0;
    c.params.v[1] = 3;
    ASSERT_EQ(k->check(&c), LT_ECONFIG);
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_ECONFIG);
    fixture_free(&f);
}

/* y of every thread of nth (each ith in turn) for one call and step. */
static void run_all(lt_kernel_fn fn, const lt_call *c, uint64_t seq, int nth) {
    lt_step step = {.pos = 0, .n_tokens = 1, .tokens = NULL, .seq = seq};
    for (int ith = 0; ith < nth; ith++) fn(c, &step, ith, nth);
}

static bool same(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

/* The per-thread cache of quantised x: reused within (call, seq), never
 * across steps or across nodes that share x (a normalised row rewritten
 * between layers within one step). */
static void test_xq_cache(lt_isa isa, mode m) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    lt_kernel_fn fn = lt_kernel_fn_for(k, isa);
    enum { R = 70, C = 256 };
    fixture f;
    fixture_init(&f, LT_Q8_0, R, C);
    float y0[R], y1[R], y2[R];
    lt_params p;
    lt_params_default(k, &p);
    p.v[LT_PARAM_ACT_INT16] = m == MODE_I16;
    p.v[LT_PARAM_ACT_INT8] = m == MODE_I8;
    lt_call c, c2;
    make_call(&c, &f, y0, 0, &p);
    run_all(fn, &c, 0, 1); /* no seq: no cache */
    int64_t first = -1;
    ASSERT_EQ(count_wrong(&f, y0, false, m, &first), 0);
    make_call(&c, &f, y1, 0, &p);
    run_all(fn, &c, 41, 4); /* four tasks on this thread, one quantisation */
    ASSERT_TRUE(same(y0, y1, R));

    /* x changes under the same (call, seq): the cached quantisation is
     * reused (what makes a node's tasks cheap), so y is unchanged */
    float xsave[C];
    memcpy(xsave, f.x, sizeof xsave);
    for (int64_t i = 0; i < C; i++) f.x[i] = -2.0f * f.x[i] + 0.125f;
    run_all(fn, &c, 41, 4);
    ASSERT_TRUE(same(y0, y1, R));
    /* a new seq sees the new x: the same bits as an uncached call */
    run_all(fn, &c, 42, 4);
    make_call(&c2, &f, y2, 0, &p);
    run_all(fn, &c2, 0, 1);
    ASSERT_TRUE(same(y1, y2, R));
    ASSERT_TRUE(!same(y0, y1, R));
    /* another node reading the same x buffer in the same step, after x was
     * rewritten: its own quantisation */
    memcpy(f.x, xsave, sizeof xsave);
    run_all(fn, &c2, 42, 3);
    ASSERT_TRUE(same(y0, y2, R));
    fixture_free(&f);
}

/* x's int8 quantisation rounds halves to even on every path: blocks whose
 * max is 127 (scale 1, so x * 127 / max is x itself) hold k + 0.5 for
 * k = -16 .. 14, then blocks of other scales, one of them with a zero
 * block; every ISA's y equals the portable one bit for bit (the ISA paths
 * have their own quantisers). */
static void test_xq8_ties(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    enum { R = 13, C = 160 };
    fixture f;
    fixture_init(&f, LT_Q8_0, R, C);
    for (int b = 0; b < 2; b++) {
        for (int j = 0; j < 31; j++) f.x[32 * b + j] = (float)(j - 16) + 0.5f;
        f.x[32 * b + 31] = b ? -127.0f : 127.0f;
    }
    for (int j = 64; j < 96; j++) f.x[j] = 0.0f;
    for (int j = 96; j < C; j++) f.x[j] = 0.25f * (float)(j % 9) - 1.0f;
    float want[R], y[R];
    lt_params p;
    lt_params_default(k, &p);
    p.v[LT_PARAM_ACT_INT16] = 0;
    p.v[LT_PARAM_ACT_INT8] = 1;
    lt_call c;
    make_call(&c, &f, want, 0, &p);
    run_all(lt_kernel_fn_for(k, LT_ISA_PORTABLE), &c, 0, 1);
    for (int isa = 1; isa <= (int)lt_isa_detect(); isa++) {
        make_call(&c, &f, y, 0, &p);
        run_all(lt_kernel_fn_for(k, (lt_isa)isa), &c, 0, 2);
        if (!same(want, y, R)) fprintf(stderr, "  %s: ties not the portable y\n", lt_isa_name((lt_isa)isa));
        ASSERT_TRUE(same(want, y, R));
    }
    fixture_free(&f);
}

/* x with a NaN turns every row NaN (as f32 sums would); zero x gives 0; a
 * block of tiny values (quantised as zero) stays within the bound. */
static void test_xq_special(lt_isa isa, mode m) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    lt_kernel_fn fn = lt_kernel_fn_for(k, isa);
    enum { R = 9, C = 128 };
    fixture f;
    fixture_init(&f, LT_Q8_0, R, C);
    float y[R];
    lt_params p;
    lt_params_default(k, &p);
    p.v[LT_PARAM_ACT_INT16] = m == MODE_I16;
    p.v[LT_PARAM_ACT_INT8] = m == MODE_I8;
    lt_call c;
    make_call(&c, &f, y, 0, &p);
    float x2 = f.x[70];
    f.x[70] = NAN;
    run_all(fn, &c, 0, 2);
    for (int r = 0; r < R; r++) ASSERT_TRUE(isnan(y[r]));
    f.x[70] = INFINITY;
    run_all(fn, &c, 0, 2);
    for (int r = 0; r < R; r++) ASSERT_TRUE(isnan(y[r]));
    f.x[70] = x2;
    float xsave[C];
    memcpy(xsave, f.x, sizeof xsave);
    memset(f.x, 0, sizeof xsave);
    run_all(fn, &c, 0, 2);
    for (int r = 0; r < R; r++) ASSERT_TRUE(y[r] == 0.0f);
    memcpy(f.x, xsave, sizeof xsave);
    for (int i = 32; i < 64; i++) f.x[i] = 1e-36f * (float)(i - 40); /* below the scale range */
    fixture g; /* the reference for this x: rebuild with the same weights */
    fixture_init(&g, LT_Q8_0, R, C);
    memcpy(g.w, f.w, lt_dtype_row_bytes(LT_Q8_0, C) * R);
    memcpy(g.x, f.x, sizeof xsave);
    float wrow[C];
    for (int r = 0; r < R; r++) {
        lt_row_to_f32(LT_Q8_0, (const char *)g.w + lt_dtype_row_bytes(LT_Q8_0, C) * r, wrow, C);
        double acc = 0, mag = 0, qerr = 0;
        for (int i = 0; i < C; i++) {
            acc += (double)wrow[i] * g.x[i];
            mag += fabs((double)wrow[i] * g.x[i]);
        }
        for (int b = 0; b < C; b += 32) {
            double amax = 0, wsum = 0;
            for (int i = b; i < b + 32; i++) {
                amax = fmax(amax, fabs((double)g.x[i]));
                wsum += fabs((double)wrow[i]);
            }
            /* the tiny block is dropped whole: its error is up to max * sum|w| */
            qerr += b == 32 ? amax * wsum * (double)m / XQ_TOL : amax * wsum;
        }
        g.ref[r] = acc;
        g.mag[r] = mag;
        g.qerr[r] = qerr;
    }
    make_call(&c, &g, y, 0, &p);
    run_all(fn, &c, 0, 2);
    int64_t first = -1;
    ASSERT_EQ(count_wrong(&g, y, false, m, &first), 0);
    fixture_free(&g);
    fixture_free(&f);
}

/* The input prologue: W rmsnorm(x, g) and W (silu(x) * up) are, bit for bit,
 * the RMSNORM or SWIGLU kernel of the same ISA into a buffer followed by the
 * plain matvec, for every dtype, activation mode, thread split and ISA (the
 * widths not a multiple of 16 take the portable rows with the ISA's
 * prologue); the result is cached per (call, seq) and recomputed for a new
 * seq; bad prologues are refused. */
static void test_prologue(lt_isa isa) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    static const lt_dtype dts[] = {LT_F32, LT_F16, LT_BF16, LT_Q8_0};
    static const int64_t widths[] = {40, 64, 96, 288};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (int act = 0; act < 3; act++) {
                if (act && dts[d] != LT_Q8_0) break;
                enum { R = 37 };
                const int64_t C = widths[wi];
                if (dts[d] == LT_Q8_0 && C % 32) break;
                fixture f;
                fixture_init(&f, dts[d], R, C);
                lt_params p;
                lt_params_default(k, &p);
                p.v[LT_PARAM_ACT_INT16] = act == 1;
                p.v[LT_PARAM_ACT_INT8] = act == 2;
                float *g = malloc(sizeof(float) * (size_t)C), *xb = malloc(sizeof(float) * (size_t)C);
                for (int64_t i = 0; i < C; i++) g[i] = 0.5f + frand();
                lt_tensor tg, txb;
                lt_tensor_init(&tg, LT_F32, C, 1, 1, 1, g);
                lt_tensor_init(&txb, LT_F32, C, 1, 1, 1, xb);
                for (int pre = LT_MV_PRE_RMSNORM; pre <= LT_MV_PRE_SWIGLU; pre++) {
                    /* the two-kernel reference */
                    lt_kernel_id kid = pre == LT_MV_PRE_RMSNORM ? LT_K_RMSNORM : LT_K_SWIGLU;
                    lt_call nc = {0};
                    nc.op[0] = &txb;
                    nc.op[1] = &f.tx;
                    nc.op[2] = &tg;
                    nc.fa[0] = 1e-5f;
                    lt_params_default(lt_kernel_get(kid), &nc.params);
                    ASSERT_EQ(lt_call_check(kid, &nc), LT_OK);
                    lt_kernel_fn_for(lt_kernel_get(kid), isa)(&nc, NULL, 0, 1);
                    float yref[R], y[R];
                    lt_call c;
                    make_call(&c, &f, yref, 0, &p);
                    c.op[2] = &txb;
                    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
                    run_all(lt_kernel_fn_for(k, isa), &c, 0, 1);
                    for (int nth = 1; nth <= 3; nth++) {
                        make_call(&c, &f, y, 0, &p);
                        c.op[3] = &tg;
                        c.ia[1] = pre;
                        c.fa[0] = 1e-5f;
                        ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
                        memset(y, 0xff, sizeof y);
                        run_all(lt_kernel_fn_for(k, isa), &c, 100 + (uint64_t)nth, nth);
                        ASSERT_TRUE(same(y, yref, R));
                    }
                    /* cached per (call, seq): a changed x is seen at the next seq */
                    float x0 = f.x[0];
                    f.x[0] = 7.5f;
                    run_all(lt_kernel_fn_for(k, isa), &c, 103, 3);
                    ASSERT_TRUE(same(y, yref, R));
                    run_all(lt_kernel_fn_for(k, isa), &c, 104, 3);
                    ASSERT_TRUE(!same(y, yref, R));
                    f.x[0] = x0;
                }
                free(g);
                free(xb);
                fixture_free(&f);
            }
    /* refused: an unknown prologue, a missing or short operand, a negative eps */
    fixture f;
    fixture_init(&f, LT_F32, 4, 64);
    float y[4], g[64] = {0}, g2[32] = {0};
    lt_tensor tg, tg2;
    lt_tensor_init(&tg, LT_F32, 64, 1, 1, 1, g);
    lt_tensor_init(&tg2, LT_F32, 32, 1, 1, 1, g2);
    lt_params p;
    lt_params_default(k, &p);
    lt_call c;
    make_call(&c, &f, y, 0, &p);
    c.ia[1] = 3;
    c.op[3] = &tg;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.ia[1] = LT_MV_PRE_RMSNORM;
    c.op[3] = NULL;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.op[3] = &tg2;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.op[3] = &tg;
    c.fa[0] = -1.0f;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.fa[0] = 1e-5f;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
    fixture_free(&f);
}

/* The epilogue: a matvec that adds a bias, rotates (NORM or NEOX pairs, with
 * or without frequency factors) and stores its rows computes, bit for bit,
 * the plain matvec followed by the ADD, ROPE and KV_STORE kernels of the
 * same ISA, for every activation mode, thread split and row grouping (tasks
 * that end inside a head; NEOX rounds them up to whole heads), at position
 * 0 and later ones; cache rows other than the position's stay untouched;
 * bad epilogues are refused. */
static void test_epilogue(lt_isa isa) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    static const lt_dtype dts[] = {LT_F32, LT_Q8_0};
    static const struct { int64_t rows, hd; } shapes[] = {{96, 48}, {40, 8}, {128, 64}};
    static const int32_t groups[] = {4, 32, 256};
    enum { C = 64, SEQ = 5, RMAX = 128 };
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int act = 0; act < 3; act++) {
                if (act && dts[d] != LT_Q8_0) break;
                const int64_t R = shapes[si].rows, hd = shapes[si].hd;
                fixture f;
                fixture_init(&f, dts[d], R, C);
                float yref[RMAX], y[RMAX], cref[SEQ * RMAX], cache[SEQ * RMAX];
                lt_tensor tyref, tcref, tcache;
                lt_tensor_init(&tyref, LT_F32, R, 1, 1, 1, yref);
                lt_tensor_init(&tcref, LT_F32, R, SEQ, 1, 1, cref);
                lt_tensor_init(&tcache, LT_F32, R, SEQ, 1, 1, cache);
                float bias[RMAX], factors[RMAX / 2];
                ot_seed((uint64_t)(R * 7 + hd));
                ot_fill(bias, R, -2, 2);
                for (int64_t i = 0; i < hd / 2; i++) factors[i] = 1.0f + (float)(i % 5) * 3.5f;
                lt_tensor tbias, tfac;
                lt_tensor_init(&tbias, LT_F32, R, 1, 1, 1, bias);
                lt_tensor_init(&tfac, LT_F32, hd / 2, 1, 1, 1, factors);
                /* rope, store, both; each with a bias; NEOX pairs; factors on the last ones */
                static const int posts[] = {1, 2, 3, 4, 5, 6, 7, 9, 11, 13, 15, 15, 11};
                const int np = (int)(sizeof posts / sizeof posts[0]);
                for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
                    for (int64_t pos = 0; pos < SEQ; pos += 3)
                        for (int pi = 0; pi < np; pi++) {
                            const int post = posts[pi];
                            const bool with_f = pi >= np - 3 && (post & LT_MV_POST_ROPE);
                            lt_params p;
                            lt_params_default(k, &p);
                            p.v[LT_PARAM_ACT_INT16] = act == 1;
                            p.v[LT_PARAM_ACT_INT8] = act == 2;
                            p.v[0] = groups[gi]; /* rows_per_task */
                            lt_step st = {.pos = pos, .n_tokens = 1};
                            /* the reference: matvec, ROPE, KV_STORE */
                            for (int i = 0; i < SEQ * RMAX; i++) cref[i] = cache[i] = -3.0f;
                            lt_call c;
                            make_call(&c, &f, yref, 0, &p);
                            c.op[0] = &tyref;
                            lt_kernel_fn_for(k, isa)(&c, &st, 0, 1);
                            if (post & LT_MV_POST_BIAS) {
                                lt_call ac = {.op = {&tyref, &tyref, &tbias}};
                                lt_params_default(lt_kernel_get(LT_K_ADD), &ac.params);
                                ASSERT_EQ(lt_call_check(LT_K_ADD, &ac), LT_OK);
                                lt_kernel_fn_for(lt_kernel_get(LT_K_ADD), isa)(&ac, &st, 0, 1);
                            }
                            if (post & LT_MV_POST_ROPE) {
                                lt_call rc = {.op = {&tyref, NULL, with_f ? &tfac : NULL},
                                              .ia = {hd, (post & LT_MV_POST_NEOX) ? LT_ROPE_NEOX
                                                                                  : LT_ROPE_NORM},
                                              .fa = {10000.0f}};
                                ASSERT_EQ(lt_call_check(LT_K_ROPE, &rc), LT_OK);
                                lt_kernel_fn_for(lt_kernel_get(LT_K_ROPE), isa)(&rc, &st, 0, 1);
                            }
                            if (post & LT_MV_POST_STORE) {
                                lt_call sc = {.op = {&tcref, &tyref}};
                                lt_params_default(lt_kernel_get(LT_K_KV_STORE), &sc.params);
                                ASSERT_EQ(lt_call_check(LT_K_KV_STORE, &sc), LT_OK);
                                lt_kernel_fn_for(lt_kernel_get(LT_K_KV_STORE), isa)(&sc, &st, 0, 1);
                            }
                            for (int nth = 1; nth <= 3; nth++) {
                                make_call(&c, &f, y, 0, &p);
                                c.op[4] = &tcache;
                                c.op[5] = (post & LT_MV_POST_BIAS) ? &tbias : NULL;
                                c.op[6] = with_f ? &tfac : NULL;
                                c.ia[2] = post;
                                c.ia[3] = hd;
                                c.fa[1] = 10000.0f;
                                ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
                                memset(y, 0xff, sizeof y);
                                for (int ith = 0; ith < nth; ith++)
                                    lt_kernel_fn_for(k, isa)(&c, &st, ith, nth);
                                ASSERT_TRUE(same(y, yref, R));
                                ASSERT_TRUE(same(cache, cref, SEQ * R));
                            }
                        }
                fixture_free(&f);
            }
    /* refused: unknown bits, a bad head_dim or base, a missing, narrow or
     * overlapping cache */
    fixture f;
    fixture_init(&f, LT_F32, 16, 64);
    float ybuf[48], cache[16 * 2], narrow[8 * 2], *y = ybuf + 8;
    lt_tensor tc, tn, ty_in_cache;
    lt_tensor_init(&tc, LT_F32, 16, 2, 1, 1, cache);
    lt_tensor_init(&tn, LT_F32, 8, 2, 1, 1, narrow);
    lt_tensor_init(&ty_in_cache, LT_F32, 16, 2, 1, 1, ybuf); /* holds y */
    lt_params p;
    lt_params_default(k, &p);
    lt_call c;
    make_call(&c, &f, y, 0, &p);
    c.ia[2] = 16; /* no such bit */
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.ia[2] = LT_MV_POST_ROPE;
    c.fa[1] = 10000.0f;
    c.ia[3] = 6; /* does not divide 16 rows */
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.ia[3] = 3;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.ia[3] = 8;
    c.fa[1] = 0.0f;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.fa[1] = INFINITY;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.fa[1] = 10000.0f;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
    c.ia[2] = LT_MV_POST_STORE;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.op[4] = &tn;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.op[4] = &ty_in_cache;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    lt_tensor tnull;
    lt_tensor_init(&tnull, LT_F32, 16, 2, 1, 1, NULL);
    c.op[4] = &tnull; /* no data: refused, never run */
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.op[4] = &tc;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
    /* a bias needs its vector (op5, one per row) and op5 the bit; NEOX and
     * factors need the rope, and factors one per pair */
    float bias[16], fac[8];
    lt_tensor tb, tb_short, tf, tf_long;
    lt_tensor_init(&tb, LT_F32, 16, 1, 1, 1, bias);
    lt_tensor_init(&tb_short, LT_F32, 8, 1, 1, 1, bias);
    lt_tensor_init(&tf, LT_F32, 4, 1, 1, 1, fac);
    lt_tensor_init(&tf_long, LT_F32, 8, 1, 1, 1, fac);
    c.ia[2] = LT_MV_POST_BIAS;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.op[5] = &tb_short;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.op[5] = &tb;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
    c.ia[2] = 0;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL); /* op5 without the bit */
    c.op[5] = NULL;
    c.ia[2] = LT_MV_POST_NEOX;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.ia[2] = LT_MV_POST_NEOX | LT_MV_POST_ROPE; /* head_dim 8 */
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
    c.op[6] = &tf_long;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL);
    c.op[6] = &tf;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
    c.ia[2] = LT_MV_POST_STORE;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_EINVAL); /* factors without the rope */
    c.op[6] = NULL;
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &c), LT_OK);
    /* the store writes op4 and does not read it (dependencies derive from this) */
    ASSERT_TRUE(lt_kernel_writes(LT_K_MATVEC, &c, 4));
    ASSERT_TRUE(!lt_kernel_reads(LT_K_MATVEC, &c, 4));
    c.ia[2] = LT_MV_POST_ROPE;
    ASSERT_TRUE(!lt_kernel_writes(LT_K_MATVEC, &c, 4));
    fixture_free(&f);

    /* a cache right after a q8_0 W (whose rows are 34 bytes a block, not f32)
     * does not overlap it; one starting on W's last block does */
    enum { QR = 8, QC = 64 };
    const size_t wbytes = lt_dtype_row_bytes(LT_Q8_0, QC) * QR;
    char *mem = lt_aligned_alloc(64, wbytes + 4 * QR * 2 + 64);
    memset(mem, 0, wbytes + 4 * QR * 2 + 64);
    float xq[QC] = {0}, yq[QR];
    lt_tensor tw, tx, ty, tcache;
    lt_tensor_init(&tw, LT_Q8_0, QC, QR, 1, 1, mem);
    lt_tensor_init(&tx, LT_F32, QC, 1, 1, 1, xq);
    lt_tensor_init(&ty, LT_F32, QR, 1, 1, 1, yq);
    lt_tensor_init(&tcache, LT_F32, QR, 2, 1, 1, mem + wbytes);
    lt_call q = {.op = {&ty, &tw, &tx, NULL, &tcache}, .ia = {0, 0, LT_MV_POST_STORE, 0}};
    lt_params_default(k, &q.params);
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &q), LT_OK);
    lt_tensor_init(&tcache, LT_F32, QR, 2, 1, 1, mem + wbytes - 4);
    ASSERT_EQ(lt_call_check(LT_K_MATVEC, &q), LT_EINVAL);
    lt_aligned_free(mem);
}

int main(void) {
    test_descriptor();
    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) test_prologue((lt_isa)isa);
    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) test_epilogue((lt_isa)isa);
    test_check_and_cost();
    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) {
        test_xq_cache((lt_isa)isa, MODE_I16);
        test_xq_cache((lt_isa)isa, MODE_I8);
        test_xq_special((lt_isa)isa, MODE_I16);
        test_xq_special((lt_isa)isa, MODE_I8);
#if LT_HAVE_X86
        if (isa == LT_ISA_AVX512 || (isa == LT_ISA_AVX2 && lt_cpu()->avxvnni)) {
            lt__q8i8_avoid_vnni = true;
            test_xq_special((lt_isa)isa, MODE_I8);
            lt__q8i8_avoid_vnni = false;
        }
#endif
    }
#if !LT_HAVE_X86
    lt_test_skip("AVX2 and AVX-512 paths", "this build has the portable kernels alone");
#endif
    test_xq8_ties();
    test_split_same_bits();
    test_tokens();
    test_sweep();
    return lt_test_finish();
}
