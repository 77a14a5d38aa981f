/* matmul (prefill projections, Y[n][rows] = X[n][cols] W^T, or Y +=): the
 * descriptor, its shape check and cost, the portable scalar reference, and
 * the per-thread packing buffer the ISA paths (matmul_avx2.c,
 * matmul_avx512.c) share. */
#include "kernels/linear.h"

#include <pthread.h>

/* Computes output columns [r0, r1) of Y for every token: for each W row, 32
 * weights at a time are dequantised and dotted with each token's X in float;
 * the chunk sums are added into Y in increasing k. Needs no scratch, so the
 * ISA paths fall back to it when their packing buffer cannot be allocated. */
void lt__matmul_ref_rows(const lt_call *call, int64_t r0, int64_t r1) {
    const lt_tensor *Y = call->op[0], *W = call->op[1], *X = call->op[2];
    const int64_t cols = W->ne[0], n = Y->ne[1];
    const bool acc = call->ia[0] != 0;
    float w[32];
    for (int64_t j = r0; j < r1; j++) {
        const char *row = lt_tensor_row(W, j);
        for (int64_t k = 0; k < cols; k += 32) {
            int64_t m = cols - k < 32 ? cols - k : 32;
            lt_row_to_f32(W->dtype, row + lt_dtype_row_bytes(W->dtype, k), w, m);
            for (int64_t i = 0; i < n; i++) {
                const float *x = (const float *)lt_tensor_row(X, i) + k;
                float *y = (float *)lt_tensor_row(Y, i) + j;
                float s = 0.0f;
                for (int64_t l = 0; l < m; l++) s += w[l] * x[l];
                *y = (k == 0 && !acc) ? s : *y + s;
            }
        }
    }
}

/* The portable reference: W rows split over threads in tasks of 16. The
 * block parameters do not change what it computes. */
static void matmul_portable(const lt_call *call, const lt_step *step, int ith, int nth) {
    (void)step;
    int64_t r0, r1;
    lt__linear_split(call->op[1]->ne[1], 16, ith, nth, &r0, &r1);
    lt__matmul_ref_rows(call, r0, r1);
}

/* ---- per-thread packing buffer -------------------------------------------- */

static _Thread_local float *tl_buf;
static _Thread_local size_t tl_cap;
static pthread_key_t tl_key; /* its destructor frees a thread's buffer at exit */
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) { lt_aligned_free(p); }
static void scratch_key(void) { LT_ASSERT(pthread_key_create(&tl_key, scratch_free) == 0); }

float *lt__linear_scratch(size_t bytes) {
    if (bytes <= tl_cap) return tl_buf;
    pthread_once(&tl_once, scratch_key);
    size_t cap = (bytes + 4095) & ~(size_t)4095;
    float *p = lt_aligned_alloc(LT_CACHE_LINE, cap);
    if (!p) return NULL;
    lt_aligned_free(tl_buf);
    tl_buf = p;
    tl_cap = cap;
    pthread_setspecific(tl_key, p);
    return p;
}

/* ---- descriptor ------------------------------------------------------------ */

static bool is_f32_rows(const lt_tensor *t, int64_t ne0, int64_t n) {
    return t->dtype == LT_F32 && t->ne[0] == ne0 && t->ne[1] == n && t->ne[2] == 1 &&
           t->ne[3] == 1 && t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0 &&
           t->nb[1] >= (size_t)ne0 * sizeof(float) && t->data != NULL;
}

static int matmul_check(const lt_call *call) {
    const lt_tensor *Y = call->op[0], *W = call->op[1], *X = call->op[2];
    if (!Y || !W || !X) return lt_error(LT_EINVAL, "matmul: operands Y, W, X are required");
    if ((unsigned)W->dtype >= LT_DTYPE_COUNT)
        return lt_error(LT_EINVAL, "matmul: W has unknown dtype %d", (int)W->dtype);
    const int64_t cols = W->ne[0], rows = W->ne[1], n = Y->ne[1];
    if (cols <= 0 || rows <= 0 || W->ne[2] != 1 || W->ne[3] != 1 || W->data == NULL)
        return lt_error(LT_EINVAL, "matmul: W must be a non-empty matrix, got ne = {%lld, %lld, "
                                   "%lld, %lld}",
                        (long long)cols, (long long)rows, (long long)W->ne[2],
                        (long long)W->ne[3]);
    int64_t align = W->dtype == LT_Q8_0 ? LT_QK8_0 : 16;
    if (cols % align != 0)
        return lt_error(LT_EINVAL, "matmul: W (%s) has %lld columns, not a multiple of %lld",
                        lt_dtype_name(W->dtype), (long long)cols, (long long)align);
    if (W->nb[0] != lt_dtype_block_bytes(W->dtype) ||
        W->nb[1] < lt_dtype_row_bytes(W->dtype, cols))
        return lt_error(LT_EINVAL, "matmul: W rows are not contiguous (nb = {%zu, %zu})",
                        W->nb[0], W->nb[1]);
    if (n < 1) return lt_error(LT_EINVAL, "matmul: Y has %lld tokens", (long long)n);
    if (!is_f32_rows(Y, rows, n))
        return lt_error(LT_EINVAL, "matmul: Y must be f32 [%lld][%lld] with contiguous rows",
                        (long long)n, (long long)rows);
    if (!is_f32_rows(X, cols, n))
        return lt_error(LT_EINVAL, "matmul: X must be f32 [%lld][%lld] with contiguous rows",
                        (long long)n, (long long)cols);
    if (call->ia[0] != 0 && call->ia[0] != 1)
        return lt_error(LT_EINVAL, "matmul: ia[0] (accumulate) must be 0 or 1, got %lld",
                        (long long)call->ia[0]);
    return lt_params_validate(&lt__k_matmul, &call->params);
}

static void matmul_cost(const lt_call *call, const lt_step *step, double *bytes, double *flops) {
    (void)step;
    const lt_tensor *W = call->op[1];
    const double rows = (double)W->ne[1], cols = (double)W->ne[0];
    const double n = (double)call->op[0]->ne[1];
    double wbytes = rows * (double)lt_dtype_row_bytes(W->dtype, W->ne[0]);
    *bytes = wbytes + 4.0 * n * cols + 4.0 * n * rows * (call->ia[0] ? 2.0 : 1.0);
    *flops = 2.0 * n * rows * cols;
}

/* Defaults measured with bench/bench_matmul on the reference machine. */
const lt_kernel lt__k_matmul = {
    .name = "matmul",
    .id = LT_K_MATMUL,
    .n_params = LT__MM_NPARAMS,
    .params =
        {
            [LT__MM_N_BLOCK] = {"n_block", 7, {12, 24, 48, 96, 192, 384, 768}, 96},
            [LT__MM_M_BLOCK] = {"m_block", 7, {32, 64, 128, 192, 256, 384, 512}, 128},
            [LT__MM_K_BLOCK] = {"k_block", 8, {64, 128, 192, 256, 384, 512, 768, 1024}, 256},
        },
    .run =
        {
            [LT_ISA_PORTABLE] = matmul_portable,
            [LT_ISA_AVX2] = lt__matmul_avx2,
            [LT_ISA_AVX512] = lt__matmul_avx512,
        },
    .cost = matmul_cost,
    .check = matmul_check,
};
