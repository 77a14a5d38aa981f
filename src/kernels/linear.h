/* Internal contract of the linear kernels (matvec for decode, matmul for
 * prefill): parameter indices, the deterministic split of rows over threads,
 * and the per-ISA entry points the descriptors in matvec.c / matmul.c point to. */
#ifndef LT_KERNELS_LINEAR_H
#define LT_KERNELS_LINEAR_H

#include "looptune/kernels.h"

/* matvec parameters, indexed like lt__k_matvec.params. */
enum {
    LT__MV_ROWS_PER_TASK = 0, /* rows in one unit of work */
    LT__MV_UNROLL,            /* rows computed simultaneously */
    LT__MV_K_BLOCK,           /* k block in elements, 0 = whole row */
    LT__MV_PREFETCH,          /* software prefetch distance in bytes, 0 = none */
    LT__MV_NPARAMS
};

/* matmul parameters, indexed like lt__k_matmul.params. */
enum {
    LT__MM_N_BLOCK = 0, /* tokens per block (X rows kept hot while a W block is reused) */
    LT__MM_M_BLOCK,     /* W rows packed together (outputs per packed block) */
    LT__MM_K_BLOCK,     /* k elements per packed block */
    LT__MM_NPARAMS
};

/* Largest rows_per_task value: ISA paths size per-task scratch from it. */
#define LT__MV_MAX_ROWS_PER_TASK 256

/* Rows [*r0, *r1) of thread ith. Rows are cut into tasks of `per` rows at
 * fixed offsets (multiples of per, independent of nth) and thread ith takes
 * the contiguous range of tasks [ntask*ith/nth, ntask*(ith+1)/nth): threads
 * never share a task, so no row is split and y is written by one thread per
 * task. An empty range has *r0 >= *r1. */
static inline void lt__linear_split(int64_t rows, int64_t per, int ith, int nth, int64_t *r0,
                                    int64_t *r1) {
    int64_t ntask = (rows + per - 1) / per;
    int64_t t0 = ntask * ith / nth, t1 = ntask * (ith + 1) / nth;
    *r0 = t0 * per;
    *r1 = t1 * per < rows ? t1 * per : rows;
}

/* Per-thread scratch of at least `bytes`, 64-byte aligned, grown on demand
 * and owned by the calling thread (freed when it exits). The pointer stays
 * valid until the next call on the same thread. NULL if out of memory. */
float *lt__linear_scratch(size_t bytes);

/* Output columns [r0, r1) of a matmul (W rows r0..r1-1, every token) by the
 * portable reference; the ISA paths fall back to it for their own rows when
 * their packing buffer cannot be allocated. */
void lt__matmul_ref_rows(const lt_call *call, int64_t r0, int64_t r1);

/* The descriptors (matvec.c, matmul.c); check() validates params against them. */
extern const lt_kernel lt__k_matvec, lt__k_matmul;

/* ISA paths (same contract as lt_kernel_fn). */
void lt__matvec_avx2(const lt_call *call, const lt_step *step, int ith, int nth);
void lt__matvec_avx512(const lt_call *call, const lt_step *step, int ith, int nth);
void lt__matmul_avx2(const lt_call *call, const lt_step *step, int ith, int nth);
void lt__matmul_avx512(const lt_call *call, const lt_step *step, int ith, int nth);

#endif
