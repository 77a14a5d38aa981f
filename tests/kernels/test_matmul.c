/* matmul against a double-precision reference computed here from the
 * lt_row_to_f32-dequantised weights: every dtype, shapes with odd token and
 * row counts (partial tiles and panels), rows < nth, cols = 32 and a few
 * thousand, every ISA this CPU has; each parameter swept over all its values
 * with the others at default, plus random points; nth = 1, 2, 3 (threads
 * simulated by calling each ith in turn); overwrite and accumulate; plus
 * check() and cost(). */
#include "looptune/kernels.h"
#include "ops_test.h"
#include "test.h"

#include <stdint.h>

/* Tolerance: |Y - ref| <= TOL * (sum_k |w_k x_k| + |Y0|). Float FMA chains
 * of up to a thousand terms stay far below it; one wrong or missing weight
 * (about 1/cols of the sum) is far above it. */
#define TOL 1e-5
#define N_RANDOM_POINTS 16

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static float frand(void) { return (float)((rnd() >> 40) * (1.0 / 8388608.0)) - 1.0f; }

typedef struct {
    int64_t n, rows, cols;
} shape;

typedef struct {
    lt_dtype dt;
    int64_t n, rows, cols;
    void *w;     /* [rows] rows of the dtype */
    float *x;    /* [n][cols] */
    float *y0;   /* [n][rows] initial Y for accumulate */
    double *ref; /* [n][rows] */
    double *mag; /* [n][rows] sum_k |w x| */
    lt_tensor tw, tx, ty;
} fixture;

static void fixture_init(fixture *f, lt_dtype dt, int64_t n, int64_t rows, int64_t cols) {
    f->dt = dt;
    f->n = n;
    f->rows = rows;
    f->cols = cols;
    size_t rb = lt_dtype_row_bytes(dt, cols);
    f->w = lt_aligned_alloc(64, rb * (size_t)rows);
    f->x = lt_aligned_alloc(64, sizeof(float) * (size_t)(n * cols));
    f->y0 = lt_aligned_alloc(64, sizeof(float) * (size_t)(n * rows));
    f->ref = lt_aligned_alloc(64, sizeof(double) * (size_t)(n * rows));
    f->mag = lt_aligned_alloc(64, sizeof(double) * (size_t)(n * rows));
    float *wd = malloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < n * cols; i++) f->x[i] = frand();
    for (int64_t r = 0; r < rows; r++) {
        float s = 0.25f + (float)(r % 5); /* rows of different scales */
        float *dst = wd + r * cols;
        for (int64_t k = 0; k < cols; k++) dst[k] = s * frand();
        char *row = (char *)f->w + rb * (size_t)r;
        lt_row_from_f32(dt, dst, row, cols);
        lt_row_to_f32(dt, row, dst, cols); /* the exact weights the kernel sees */
    }
    for (int64_t i = 0; i < n; i++) {
        for (int64_t r = 0; r < rows; r++) {
            double acc = 0, mag = 0;
            for (int64_t k = 0; k < cols; k++) {
                double t = (double)wd[r * cols + k] * (double)f->x[i * cols + k];
                acc += t;
                mag += fabs(t);
            }
            f->ref[i * rows + r] = acc;
            f->mag[i * rows + r] = mag;
            f->y0[i * rows + r] = 3.0f * frand();
        }
    }
    free(wd);
    lt_tensor_init(&f->tw, dt, cols, rows, 1, 1, f->w);
    lt_tensor_init(&f->tx, LT_F32, cols, n, 1, 1, f->x);
}

static void fixture_free(fixture *f) {
    lt_aligned_free(f->w);
    lt_aligned_free(f->x);
    lt_aligned_free(f->y0);
    lt_aligned_free(f->ref);
    lt_aligned_free(f->mag);
}

static void make_call(lt_call *c, fixture *f, float *y, int accumulate, const lt_params *p) {
    memset(c, 0, sizeof *c);
    lt_tensor_init(&f->ty, LT_F32, f->rows, f->n, 1, 1, y);
    c->op[0] = &f->ty;
    c->op[1] = &f->tw;
    c->op[2] = &f->tx;
    c->ia[0] = accumulate;
    c->params = *p;
}

/* Runs every ith of nth into its own NaN-filled copy of Y, checks each
 * element was written by exactly one thread, merges them into y. Returns
 * the number of ownership violations. */
static int64_t run_threads(lt_kernel_fn fn, fixture *f, float *y, float *part, int nth,
                           const lt_params *p) {
    const int64_t total = f->n * f->rows;
    int64_t bad = 0;
    for (int64_t e = 0; e < total; e++) y[e] = NAN;
    for (int ith = 0; ith < nth; ith++) {
        for (int64_t e = 0; e < total; e++) part[e] = NAN;
        lt_call c;
        make_call(&c, f, part, 0, p);
        lt_step step = {.pos = 0, .n_tokens = f->n, .tokens = NULL};
        fn(&c, &step, ith, nth);
        for (int64_t e = 0; e < total; e++) {
            if (isnan(part[e])) continue;
            if (!isnan(y[e])) bad++;
            y[e] = part[e];
        }
    }
    return bad;
}

static int64_t count_wrong(const fixture *f, const float *y, bool accumulate, int64_t *first) {
    int64_t bad = 0;
    for (int64_t e = 0; e < f->n * f->rows; e++) {
        double y0 = accumulate ? (double)f->y0[e] : 0.0;
        double tol = TOL * (f->mag[e] + fabs(y0)) + 1e-30;
        if (!(fabs((double)y[e] - (f->ref[e] + y0)) <= tol)) {
            if (bad == 0) *first = e;
            bad++;
        }
    }
    return bad;
}

/* Checks one point of the space: nth = 1, 2, 3 and accumulate. */
static void check_point(lt_kernel_fn fn, lt_isa isa, fixture *f, const lt_params *p,
                        float *bufs[3]) {
    float *y1 = bufs[0], *yn = bufs[1], *part = bufs[2];
    const size_t bytes = sizeof(float) * (size_t)(f->n * f->rows);
    int64_t wrong = 0, owners = 0, nth_diff = 0, first = -1;
    for (int nth = 1; nth <= 3; nth++) {
        float *y = nth == 1 ? y1 : yn;
        owners += run_threads(fn, f, y, part, nth, p);
        int64_t bad = count_wrong(f, y, false, &first);
        if (bad && wrong == 0)
            fprintf(stderr, "  %s %s n=%lld rows=%lld cols=%lld nb=%d mb=%d kb=%d nth=%d: "
                            "Y[%lld][%lld] = %.9g, want %.9g\n",
                    lt_isa_name(isa), lt_dtype_name(f->dt), (long long)f->n,
                    (long long)f->rows, (long long)f->cols, p->v[0], p->v[1], p->v[2], nth,
                    (long long)(first / f->rows), (long long)(first % f->rows),
                    (double)y[first], f->ref[first]);
        wrong += bad;
        if (nth > 1 && memcmp(y1, yn, bytes) != 0) nth_diff++;
    }
    memcpy(yn, f->y0, bytes);
    lt_call c;
    make_call(&c, f, yn, 1, p);
    lt_step step = {.pos = 0, .n_tokens = f->n, .tokens = NULL};
    fn(&c, &step, 1, 2);
    fn(&c, &step, 0, 2);
    int64_t bad = count_wrong(f, yn, true, &first);
    if (bad)
        fprintf(stderr, "  accumulate %s %s nb=%d mb=%d kb=%d: element %lld wrong\n",
                lt_isa_name(isa), lt_dtype_name(f->dt), p->v[0], p->v[1], p->v[2],
                (long long)first);
    wrong += bad;
    ASSERT_EQ(wrong, 0);
    ASSERT_EQ(owners, 0);
    ASSERT_EQ(nth_diff, 0);
}

static void sweep(const lt_kernel *k, lt_isa isa, fixture *f) {
    lt_kernel_fn fn = lt_kernel_fn_for(k, isa);
    const size_t bytes = sizeof(float) * (size_t)(f->n * f->rows);
    float *bufs[3] = {malloc(bytes), malloc(bytes), malloc(bytes)};
    lt_params def, p;
    lt_params_default(k, &def);
    for (int i = 0; i < k->n_params; i++) { /* each parameter over all its values */
        for (int j = 0; j < k->params[i].n_values; j++) {
            p = def;
            p.v[i] = k->params[i].values[j];
            check_point(fn, isa, f, &p, bufs);
        }
    }
    for (int r = 0; r < N_RANDOM_POINTS; r++) {
        for (int i = 0; i < k->n_params; i++)
            p.v[i] = k->params[i].values[rnd() % (uint64_t)k->params[i].n_values];
        check_point(fn, isa, f, &p, bufs);
    }
    for (int i = 0; i < 3; i++) free(bufs[i]);
}

/* Y of the default point on every ISA path, into out[isa] */
static void ys_by_isa(const lt_kernel *k, fixture *f, float *out[3]) {
    float *part = malloc(sizeof(float) * (size_t)(f->n * f->rows));
    lt_params p;
    lt_params_default(k, &p);
    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++)
        run_threads(lt_kernel_fn_for(k, (lt_isa)isa), f, out[isa], part, 2, &p);
    free(part);
}

/* The fixture's q8_0 rows rewritten in the split layout (core.h), padded
 * to a cache line as the resident weights are: every path then gives Y bit
 * for bit as on the plain rows (the same products d * q are packed), and
 * the sweep holds. */
static void test_split(const lt_kernel *k, fixture *f) {
    const size_t bytes = sizeof(float) * (size_t)(f->n * f->rows);
    float *plain[3], *split[3];
    for (int i = 0; i < 3; i++) {
        plain[i] = calloc(1, bytes);
        split[i] = calloc(1, bytes);
    }
    ys_by_isa(k, f, plain);
    const size_t rb = lt_dtype_row_bytes(LT_Q8_0, f->cols), ld = (rb + 63) / 64 * 64;
    char *w = lt_aligned_alloc(64, ld * (size_t)f->rows);
    for (int64_t r = 0; r < f->rows; r++)
        lt_q8_0_split_row((const lt_block_q8_0 *)((char *)f->w + rb * (size_t)r),
                          w + ld * (size_t)r, f->cols / LT_QK8_0);
    lt_aligned_free(f->w);
    f->w = f->tw.data = w;
    f->tw.nb[1] = ld;
    f->tw.nb[2] = f->tw.nb[3] = ld * (size_t)f->rows;
    f->tw.layout = LT_LAYOUT_Q8_SPLIT;
    ys_by_isa(k, f, split);
    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++)
        ASSERT_EQ(memcmp(plain[isa], split[isa], bytes), 0);
    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) sweep(k, (lt_isa)isa, f);
    for (int i = 0; i < 3; i++) {
        free(plain[i]);
        free(split[i]);
    }
}

static void test_sweep(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATMUL);
    /* cols with a 16-element tail for the 16-aligned dtypes (rounded up to
     * 32 for q8_0); rows not multiples of a panel; n not multiples of a tile */
    static const shape shapes[] = {{1, 1, 32},   {2, 2, 48},    {13, 37, 528},
                                   {7, 70, 2080}, {130, 33, 64}, {3, 530, 96},
                                   {5, 9, 172},   {2, 3, 7}};
    for (int dt = 0; dt <= LT_Q8_0; dt++) /* q4_0 .. q6_k: test_qdot.c */ {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t cols = shapes[s].cols;
            if (dt == LT_Q8_0) cols = (cols + 31) / 32 * 32;
            fixture f;
            fixture_init(&f, (lt_dtype)dt, shapes[s].n, shapes[s].rows, cols);
            for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) sweep(k, (lt_isa)isa, &f);
            if (dt == LT_Q8_0) test_split(k, &f);
            fixture_free(&f);
        }
    }
}

/* Rows of X and Y with padding (nb[1] larger than the row) are honoured. */
static void test_strided(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATMUL);
    fixture f;
    fixture_init(&f, LT_F16, 5, 40, 64);
    const int64_t ldx = 80, ldy = 48;
    float *x = calloc((size_t)(5 * ldx), sizeof(float));
    float *y = calloc((size_t)(5 * ldy), sizeof(float));
    for (int64_t i = 0; i < 5; i++) memcpy(x + i * ldx, f.x + i * 64, 64 * sizeof(float));
    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) {
        for (int64_t e = 0; e < 5 * ldy; e++) y[e] = -7.0f;
        lt_call c;
        lt_params p;
        lt_params_default(k, &p);
        make_call(&c, &f, y, 0, &p);
        lt_tensor tx, ty;
        lt_tensor_init(&tx, LT_F32, 64, 5, 1, 1, x);
        tx.nb[1] = (size_t)ldx * sizeof(float);
        lt_tensor_init(&ty, LT_F32, 40, 5, 1, 1, y);
        ty.nb[1] = (size_t)ldy * sizeof(float);
        c.op[0] = &ty;
        c.op[2] = &tx;
        ASSERT_EQ(k->check(&c), LT_OK);
        lt_step step = {.pos = 0, .n_tokens = 5, .tokens = NULL};
        lt_kernel_fn fn = lt_kernel_fn_for(k, (lt_isa)isa);
        fn(&c, &step, 0, 2);
        fn(&c, &step, 1, 2);
        int64_t bad = 0;
        for (int64_t i = 0; i < 5; i++) {
            for (int64_t r = 0; r < 40; r++) {
                double want = f.ref[i * 40 + r];
                if (!(fabs(y[i * ldy + r] - want) <= TOL * f.mag[i * 40 + r])) bad++;
            }
            for (int64_t r = 40; r < ldy; r++) bad += y[i * ldy + r] != -7.0f; /* padding kept */
        }
        ASSERT_EQ(bad, 0);
    }
    free(x);
    free(y);
    fixture_free(&f);
}

static void test_descriptor(void) {
    const lt_kernel *k = lt_kernel_find("matmul");
    ASSERT_TRUE(k == lt_kernel_get(LT_K_MATMUL));
    ASSERT_TRUE(k->n_params >= 2);
    ot_check_param_defs(k);
    int kb = lt_kernel_param_index(k, "k_block");
    ASSERT_TRUE(kb >= 0);
    for (int j = 0; j < k->params[kb].n_values; j++) ASSERT_EQ(k->params[kb].values[j] % 32, 0);
}

static void test_check_and_cost(void) {
    const lt_kernel *k = lt_kernel_get(LT_K_MATMUL);
    fixture f;
    fixture_init(&f, LT_BF16, 3, 5, 48);
    float y[15];
    lt_params p;
    lt_params_default(k, &p);
    lt_call c;
    make_call(&c, &f, y, 0, &p);
    ASSERT_EQ(k->check(&c), LT_OK);
    double bytes = 0, flops = 0;
    lt_step step = {.pos = 0, .n_tokens = 3, .tokens = NULL};
    k->cost(&c, &step, &bytes, &flops);
    ASSERT_NEAR(bytes, 5 * 48 * 2 + 3 * 48 * 4 + 3 * 5 * 4, 0);
    ASSERT_NEAR(flops, 2 * 3 * 5 * 48, 0);
    c.ia[0] = 1;
    k->cost(&c, &step, &bytes, &flops);
    ASSERT_NEAR(bytes, 5 * 48 * 2 + 3 * 48 * 4 + 2 * 3 * 5 * 4, 0);
    c.ia[0] = 0;
    /* the split layout is q8_0's alone */
    f.tw.layout = LT_LAYOUT_Q8_SPLIT;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "layout") != NULL);
    f.tw.layout = LT_LAYOUT_PLAIN;
    ASSERT_EQ(k->check(&c), LT_OK);

    lt_tensor bad;
    /* Y with the wrong token count, wrong width, wrong dtype */
    lt_tensor_init(&bad, LT_F32, 5, 2, 1, 1, y);
    c.op[0] = &bad;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    ASSERT_TRUE(strlen(lt_errmsg()) > 0);
    lt_tensor_init(&bad, LT_F32, 4, 3, 1, 1, y);
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    lt_tensor_init(&bad, LT_BF16, 5, 3, 1, 1, y);
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    c.op[0] = &f.ty;
    /* X of the wrong width; a missing operand */
    lt_tensor_init(&bad, LT_F32, 32, 3, 1, 1, f.x);
    c.op[2] = &bad;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    c.op[2] = NULL;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    c.op[2] = &f.tx;
    /* q8_0 needs cols % 32 == 0; other dtypes take any width */
    lt_tensor_init(&bad, LT_Q8_0, 48, 5, 1, 1, f.w);
    bad.nb[1] = 2 * 34;
    c.op[1] = &bad;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    float w[5 * 40] = {0}, x[3 * 40] = {0};
    lt_tensor tx;
    lt_tensor_init(&bad, LT_F32, 40, 5, 1, 1, w);
    lt_tensor_init(&tx, LT_F32, 40, 3, 1, 1, x);
    c.op[2] = &tx;
    ASSERT_EQ(k->check(&c), LT_OK); /* any width for non-block dtypes */
    lt_tensor_init(&bad, LT_F32, 32, 5, 1, 1, w);
    lt_tensor_init(&tx, LT_F32, 32, 3, 1, 1, x);
    ASSERT_EQ(k->check(&c), LT_OK);
    /* X rows overlapping (nb[1] below the row size) */
    tx.nb[1] = 16;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    lt_tensor_init(&tx, LT_F32, 32, 3, 1, 1, x);
    bad.dtype = LT_DTYPE_COUNT; /* no dtype */
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    lt_tensor_init(&bad, LT_F32, 32, 5, 1, 1, w);
    c.ia[0] = -1;
    ASSERT_EQ(k->check(&c), LT_EINVAL);
    c.ia[0] = 0;
    c.params.v[0] = 5;
    ASSERT_EQ(k->check(&c), LT_ECONFIG);
    ASSERT_EQ(lt_call_check(LT_K_MATMUL, &c), LT_ECONFIG);
    fixture_free(&f);
}

int main(void) {
    test_descriptor();
    test_check_and_cost();
    test_strided();
    test_sweep();
    return lt_test_finish();
}
