/* matmul (prefill projections, Y[n][rows] = X[n][cols] W^T, or Y +=): the
 * descriptor, its shape check and cost, the portable scalar reference, and
 * the per-thread packing buffer the ISA paths (matmul_avx2.c,
 * matmul_avx512.c) share. */
#include "kernels/linear.h"
#include "kernels/ops_internal.h"
#include "kernels/qdot.h"

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
            lt__row_chunk_f32(W, row, k, m, w);
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

/* The same products d * q as the plain dequantisation. */
void lt__mm_pack_q8_split(const lt_tensor *W, const char *w, size_t ld, int64_t nrows,
                          int64_t NR, int64_t k0, int64_t k1, float *dst) {
    const int64_t nb = W->ne[0] / LT_QK8_0;
    for (int64_t r = 0; r < NR; r++) {
        for (int64_t k = k0; k < k1; k += LT_QK8_0) {
            float d = 0.0f;
            const int8_t *q = r < nrows ? lt__q8_block(w + (size_t)r * ld, LT_LAYOUT_Q8_SPLIT, nb,
                                                       k / LT_QK8_0, &d)
                                        : NULL;
            for (int64_t l = 0; l < LT_QK8_0 && k + l < k1; l++)
                dst[(k + l - k0) * NR + r] = q ? d * (float)q[l] : 0.0f;
        }
    }
}

/* The portable reference: W rows split over threads in tasks of 16. The
 * block parameters do not change what it computes. */
void lt__matmul_drive(const lt_call *call, int ith, int nth, int64_t panel_rows, int max_tokens,
                      lt__mm_pack_fn pack, const lt__mm_tile_fn *tiles) {
    const int64_t NR = panel_rows, MR = max_tokens;
    const lt_tensor *Y = call->op[0], *W = call->op[1], *X = call->op[2];
    const int64_t rows = W->ne[1], cols = W->ne[0], n = Y->ne[1];
    const int64_t nb = call->params.v[LT__MM_N_BLOCK];
    const int64_t mb = (call->params.v[LT__MM_M_BLOCK] + NR - 1) / NR * NR;
    const int64_t kb = call->params.v[LT__MM_K_BLOCK];
    LT_ASSERT(nb > 0 && mb > 0 && kb > 0 && kb % LT_QK8_0 == 0);

    int64_t r0, r1;
    lt__linear_split(rows, NR, ith, nth, &r0, &r1);
    if (r0 >= r1) return;
    const int64_t kmax = kb < cols ? kb : cols;
    float *buf = lt__linear_scratch((size_t)(mb * kmax) * sizeof(float));
    if (!buf) {
        lt__matmul_ref_rows(call, r0, r1);
        return;
    }
    const size_t ld = W->nb[1], ldx = X->nb[1] / sizeof(float), ldy = Y->nb[1] / sizeof(float);
    const char *wbase = W->data;
    const float *xbase = X->data;
    float *ybase = Y->data;

    for (int64_t k0 = 0; k0 < cols; k0 += kb) {
        const int64_t k1 = k0 + kb < cols ? k0 + kb : cols, kc = k1 - k0;
        const bool add = call->ia[0] != 0 || k0 > 0;
        for (int64_t jb = r0; jb < r1; jb += mb) {
            const int64_t je = jb + mb < r1 ? jb + mb : r1;
            const int64_t npanel = (je - jb + NR - 1) / NR;
            for (int64_t p = 0; p < npanel; p++) {
                int64_t j = jb + p * NR, nr = je - j < NR ? je - j : NR;
                pack(W, wbase + (size_t)j * ld, ld, nr, k0, k1, buf + p * NR * kc);
            }
            for (int64_t ib = 0; ib < n; ib += nb) {
                const int64_t ie = ib + nb < n ? ib + nb : n;
                for (int64_t p = 0; p < npanel; p++) {
                    int64_t j = jb + p * NR, nr = je - j < NR ? je - j : NR;
                    for (int64_t i = ib; i < ie; i += MR) {
                        int m = ie - i < MR ? (int)(ie - i) : (int)MR;
                        tiles[m](xbase + (size_t)i * ldx + k0, ldx, buf + p * NR * kc, kc,
                                 ybase + (size_t)i * ldy + j, ldy, nr, add);
                    }
                }
            }
        }
    }
}

/* q4_0 .. q6_k: integer dots with x quantised per block (matvec_q.c), the
 * f32 sums only if that scratch cannot be allocated. */
static void matmul_portable(const lt_call *call, const lt_step *step, int ith, int nth) {
    if (lt__qtype_of_w(call->op[1]) && lt__matmul_quant(call, step, ith, nth, LT_ISA_PORTABLE))
        return;
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
    int lrc = lt__check_layout(W, "matmul");
    if (lrc != LT_OK) return lrc;
    const int64_t align = lt_dtype_block(W->dtype);
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

/* The vector paths work on whole 16-column groups; the rare widths that are
 * not a multiple of 16 (llama2.c's stories260K has an FFN of 172) take the
 * portable path, which computes the same sums. */
#if LT_HAVE_X86
static void matmul_avx2_any(const lt_call *call, const lt_step *step, int ith, int nth) {
    /* q4_0 .. q6_k have no vector path yet: the portable one's bits */
    if (lt__qtype_of_w(call->op[1]) && lt__matmul_quant(call, step, ith, nth, LT_ISA_AVX2))
        return;
    if (call->op[1]->ne[0] % 16 || lt__qtype_of_w(call->op[1]))
        matmul_portable(call, step, ith, nth);
    else lt__matmul_avx2(call, step, ith, nth);
}

static void matmul_avx512_any(const lt_call *call, const lt_step *step, int ith, int nth) {
    if (lt__qtype_of_w(call->op[1]) && lt__matmul_quant(call, step, ith, nth, LT_ISA_AVX512))
        return;
    if (call->op[1]->ne[0] % 16 || lt__qtype_of_w(call->op[1]))
        matmul_portable(call, step, ith, nth);
    else lt__matmul_avx512(call, step, ith, nth);
}
#endif

/* Defaults from bench/bench_matmul --sweep on the reference machine (1 thread,
 * f32, n = 128; the host was shared and loaded, so medians swung 35-180
 * GFLOP/s and only trends are usable): the best points of each shape reached
 * 137-182 GFLOP/s, OpenBLAS sgemm 126-142 at best in the same runs. n_block
 * >= 128 (one block of all tokens, each packed panel reused by every token
 * tile) had the best geometric mean (91 vs 68-79 for smaller); m_block and
 * k_block 128-1024 were within noise: k_block 256 keeps a 32x256 f32 panel
 * (32 KB) in L1, m_block 128 keeps a packed block (128 KB) in L2. */
const lt_kernel lt__k_matmul = {
    .name = "matmul",
    .id = LT_K_MATMUL,
    .n_params = LT__MM_NPARAMS,
    .params =
        {
            /* blocking of the vector paths; the portable reference has none */
            [LT__MM_N_BLOCK] = {.name = "n_block", .n_values = 7,
                                .values = {12, 24, 48, 96, 192, 384, 768}, .def = 192,
                                .isas = LT_ISAS_VECTOR, .dtypes = LT_DTYPES_BLOCKED},
            [LT__MM_M_BLOCK] = {.name = "m_block", .n_values = 7,
                                .values = {32, 64, 128, 192, 256, 384, 512}, .def = 128,
                                .isas = LT_ISAS_VECTOR, .dtypes = LT_DTYPES_BLOCKED},
            [LT__MM_K_BLOCK] = {.name = "k_block", .n_values = 8,
                                .values = {64, 128, 192, 256, 384, 512, 768, 1024}, .def = 256,
                                .isas = LT_ISAS_VECTOR, .dtypes = LT_DTYPES_BLOCKED},
        },
    .run =
        {
            [LT_ISA_PORTABLE] = matmul_portable,
            [LT_ISA_AVX2] = LT_X86_ONLY(matmul_avx2_any),
            [LT_ISA_AVX512] = LT_X86_ONLY(matmul_avx512_any),
        },
    .cost = matmul_cost,
    .check = matmul_check,
};
