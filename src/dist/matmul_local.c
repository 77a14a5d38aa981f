/* The single-node product of a matmul job: the same conversion of the
 * operands, the same k-splits with the same kernel, and the same order of
 * adding the partial products as the workers and the coordinator, so a
 * distributed C can be checked against it bit for bit (--verify). */
#include "looptune/dist.h"

#include <stdlib.h>
#include <string.h>

/* rows x kn of src (rows of k f32) from column k0, converted to dt (or
 * copied as f32), into dst. */
static void slice(const float *src, int64_t rows, int64_t k, int64_t k0, int64_t kn, lt_dtype dt,
                  uint8_t *dst) {
    const size_t rb = lt_dtype_row_bytes(dt, kn);
    for (int64_t i = 0; i < rows; i++) {
        if (dt == LT_F32) memcpy(dst + (size_t)i * rb, src + i * k + k0, rb);
        else lt_row_from_f32(dt, src + i * k + k0, dst + (size_t)i * rb, kn);
    }
}

int lt_dist_matmul_local(lt_pool *pool, const float *a, const float *b, int64_t m, int64_t n,
                         int64_t k, lt_dtype dtype, int64_t block_k, float *c) {
    if (m < 1 || n < 1 || k < 1) return lt_error(LT_EINVAL, "matmul: empty matrices");
    const int64_t bk = block_k > 0 && block_k < k ? block_k : k;
    const int64_t blk = lt_dtype_block(dtype);
    if (k % blk || bk % blk)
        return lt_error(LT_EINVAL, "matmul: %s operands need K (%lld) and the k-split (%lld) "
                        "multiples of %lld", lt_dtype_name(dtype), (long long)k, (long long)bk,
                        (long long)blk);
    float *bt = malloc((size_t)(n * k) * sizeof *bt);
    const size_t rb = lt_dtype_row_bytes(dtype, bk);
    uint8_t *qa = malloc(rb * (size_t)m), *qb = malloc(rb * (size_t)n);
    float *wa = malloc((size_t)(m * bk) * sizeof *wa);
    float *part = bk < k ? malloc((size_t)(m * n) * sizeof *part) : NULL;
    int rc = LT_OK;
    if (!bt || !qa || !qb || !wa || (bk < k && !part))
        rc = lt_error(LT_ENOMEM, "matmul: out of memory");
    for (int64_t r = 0; !rc && r < k; r++)
        for (int64_t col = 0; col < n; col++) bt[col * k + r] = b[r * n + col];
    for (int64_t k0 = 0; !rc && k0 < k; k0 += bk) {
        const int64_t kn = k - k0 < bk ? k - k0 : bk;
        const size_t rbn = lt_dtype_row_bytes(dtype, kn);
        slice(a, m, k, k0, kn, dtype, qa);
        slice(bt, n, k, k0, kn, dtype, qb);
        for (int64_t i = 0; i < m; i++) lt_row_to_f32(dtype, qa + (size_t)i * rbn, wa + i * kn, kn);
        rc = lt_dist_matmul_dt(pool, wa, qb, dtype, m, n, kn, k0 ? part : c);
        if (!rc && k0)
            for (int64_t i = 0; i < m * n; i++) c[i] += part[i];
    }
    free(bt);
    free(qa);
    free(qb);
    free(wa);
    free(part);
    return rc;
}
