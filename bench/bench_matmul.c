/* matmul throughput: GFLOP/s of Y[n][rows] = X[n][cols] W^T for prefill-like
 * shapes, 1 and 2 threads, min/median/max, side by side in the same run with
 * OpenBLAS cblas_sgemm (f32) when built with it (LT_HAVE_OPENBLAS); ours also
 * for q8_0 weights. --sweep also runs every point of a block-size grid per
 * shape and thread count, for choosing the defaults.
 *
 * usage: bench_matmul [--reps N] [--rounds N] [--threads 1,2] [--sweep]
 *                     [--shape NxROWSxCOLS] [--isa NAME] */
#include "looptune/kernels.h"


#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef LT_HAVE_OPENBLAS
#include <cblas.h>
#endif

#define MAX_SAMPLES 256
#define MAX_THREADS 64 /* thread counts above this fall back to 1 */

typedef struct {
    int64_t n, rows, cols;
} shape;

static const shape default_shapes[] = {{128, 768, 768}, {128, 2048, 768}, {128, 768, 2048}};

typedef struct {
    lt_kernel_fn fn;
    lt_call *call;
} job;

static void run_matmul(void *arg, int ith, int nth) {
    job *j = arg;
    lt_step step = {.pos = 0, .n_tokens = j->call->op[0]->ne[1], .tokens = NULL};
    j->fn(j->call, &step, ith, nth);
}

typedef struct {
    double v[MAX_SAMPLES];
    int n;
} samples;

static void report(const char *what, const samples *s) {
    lt_summary st = lt_summarize(s->v, s->n);
    printf("  %-28s %7.1f / %7.1f / %7.1f GFLOP/s\n", what, st.min, st.median, st.max);
}

/* reps timed calls of ours on a pool of nth threads, appended to s. */
static void time_ours(job *j, int nth, int reps, double flops, samples *s) {
    lt_pool *pool;
    if (lt_pool_init(&pool, nth)) {
        fprintf(stderr, "bench_matmul: cannot start threads: %s\n", lt_errmsg());
        exit(1);
    }
    lt_pool_run(pool, run_matmul, j); /* warm-up: packing buffers, caches */
    for (int r = 0; r < reps && s->n < MAX_SAMPLES; r++) {
        uint64_t t0 = lt_now_ns();
        lt_pool_run(pool, run_matmul, j);
        s->v[s->n++] = flops / (double)(lt_now_ns() - t0);
    }
    lt_pool_free(pool);
}

#ifdef LT_HAVE_OPENBLAS
static void time_blas(const float *x, const float *w, float *y, const shape *sh, int nth,
                      int reps, double flops, samples *s) {
    openblas_set_num_threads(nth);
    const int M = (int)sh->n, N = (int)sh->rows, K = (int)sh->cols;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);
    for (int r = 0; r < reps && s->n < MAX_SAMPLES; r++) {
        uint64_t t0 = lt_now_ns();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f,
                    y, N);
        s->v[s->n++] = flops / (double)(lt_now_ns() - t0);
    }
}
#endif

int main(int argc, char **argv) {
#ifdef LT_HAVE_OPENBLAS
    /* OpenBLAS reads OPENBLAS_CORETYPE when loaded and then picks slower
     * kernels; run again without it. */
    if (getenv("OPENBLAS_CORETYPE")) {
        unsetenv("OPENBLAS_CORETYPE");
        execv("/proc/self/exe", argv);
    }
#endif
    int reps = 10, rounds = 3, sweep = 0, nthreads[2] = {1, 2}, nnth = 2;
    shape shapes[8];
    int nshapes = 0;
    lt_isa isa = lt_isa_detect();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nnth = sscanf(argv[++i], "%d,%d", &nthreads[0], &nthreads[1]);
            if (nnth < 1) nnth = 1;
        } else if (!strcmp(argv[i], "--sweep")) {
            sweep = 1;
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc && nshapes < 8) {
            long long n, r, c;
            if (sscanf(argv[++i], "%lldx%lldx%lld", &n, &r, &c) == 3)
                shapes[nshapes++] = (shape){n, r, c};
        } else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            if (lt_isa_parse(argv[++i], &isa) != LT_OK) isa = lt_isa_detect();
        } else {
            fprintf(stderr, "usage: %s [--reps N] [--rounds N] [--threads 1,2] [--sweep] "
                            "[--shape NxROWSxCOLS] [--isa NAME]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (rounds < 1) rounds = 1;
    if (reps * rounds > MAX_SAMPLES) reps = MAX_SAMPLES / rounds;
    if (nshapes == 0) {
        nshapes = (int)(sizeof default_shapes / sizeof default_shapes[0]);
        memcpy(shapes, default_shapes, sizeof default_shapes);
    }
    for (int i = 0; i < nnth; i++)
        if (nthreads[i] < 1 || nthreads[i] > MAX_THREADS) nthreads[i] = 1;

    const lt_kernel *k = lt_kernel_get(LT_K_MATMUL);
    lt_params def;
    lt_params_default(k, &def);
    printf("matmul bench: isa %s, defaults n_block=%d m_block=%d k_block=%d, host %s\n",
           lt_isa_name(isa), def.v[0], def.v[1], def.v[2], lt_cpu()->model);
#ifdef LT_HAVE_OPENBLAS
    printf("OpenBLAS core: %s\n", openblas_get_corename());
#else
    printf("OpenBLAS not found at build time: ours only\n");
#endif

    for (int si = 0; si < nshapes; si++) {
        const shape *sh = &shapes[si];
        const double flops = 2.0 * (double)sh->n * (double)sh->rows * (double)sh->cols;
        float *x = lt_aligned_alloc(64, sizeof(float) * (size_t)(sh->n * sh->cols));
        float *w = lt_aligned_alloc(64, sizeof(float) * (size_t)(sh->rows * sh->cols));
        float *y = lt_aligned_alloc(64, sizeof(float) * (size_t)(sh->n * sh->rows));
        void *wq = lt_aligned_alloc(64, lt_dtype_row_bytes(LT_Q8_0, sh->cols) * (size_t)sh->rows);
        uint32_t s = 777;
        for (int64_t i = 0; i < sh->n * sh->cols; i++) {
            s = s * 1664525u + 1013904223u;
            x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
        }
        for (int64_t i = 0; i < sh->rows * sh->cols; i++) {
            s = s * 1664525u + 1013904223u;
            w[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
        }
        for (int64_t r = 0; r < sh->rows; r++)
            lt_row_from_f32(LT_Q8_0, w + r * sh->cols,
                            (char *)wq + lt_dtype_row_bytes(LT_Q8_0, sh->cols) * (size_t)r,
                            sh->cols);
        lt_tensor tx, tw, twq, ty;
        lt_tensor_init(&tx, LT_F32, sh->cols, sh->n, 1, 1, x);
        lt_tensor_init(&tw, LT_F32, sh->cols, sh->rows, 1, 1, w);
        lt_tensor_init(&twq, LT_Q8_0, sh->cols, sh->rows, 1, 1, wq);
        lt_tensor_init(&ty, LT_F32, sh->rows, sh->n, 1, 1, y);
        lt_call call = {.op = {&ty, &tw, &tx}, .params = def};
        lt_call callq = {.op = {&ty, &twq, &tx}, .params = def};
        LT_ASSERT(k->check(&call) == LT_OK && k->check(&callq) == LT_OK);
        job j = {lt_kernel_fn_for(k, isa), &call}, jq = {lt_kernel_fn_for(k, isa), &callq};

        for (int ti = 0; ti < nnth; ti++) {
            const int nth = nthreads[ti];
            printf("\nn=%lld rows=%lld cols=%lld, %d thread(s) (min / median / max)\n",
                   (long long)sh->n, (long long)sh->rows, (long long)sh->cols, nth);
            samples ours = {.n = 0}, oursq = {.n = 0}, blas = {.n = 0};
            /* rounds alternate ours and OpenBLAS so drift on a shared host hits both */
            for (int r = 0; r < rounds; r++) {
                time_ours(&j, nth, reps, flops, &ours);
                time_ours(&jq, nth, reps, flops, &oursq);
#ifdef LT_HAVE_OPENBLAS
                time_blas(x, w, y, sh, nth, reps, flops, &blas);
#endif
            }
            report("looptune f32", &ours);
            report("looptune q8_0", &oursq);
#ifdef LT_HAVE_OPENBLAS
            report("OpenBLAS sgemm f32", &blas);
            printf("  ratio looptune f32 / OpenBLAS (medians): %.2f\n",
                   lt_median(ours.v, ours.n) / lt_median(blas.v, blas.n));
#endif
            if (!sweep) continue;
            lt_params best = def;
            double best_med = 0;
            for (int a = 0; a < k->params[0].n_values; a++)
                for (int b = 0; b < k->params[1].n_values; b++)
                    for (int c = 0; c < k->params[2].n_values; c++) {
                        call.params.v[0] = k->params[0].values[a];
                        call.params.v[1] = k->params[1].values[b];
                        call.params.v[2] = k->params[2].values[c];
                        samples sp = {.n = 0};
                        time_ours(&j, nth, reps, flops, &sp);
                        lt_summary st = lt_summarize(sp.v, sp.n);
                        printf("    n_block=%3d m_block=%3d k_block=%4d  %6.1f / %6.1f / %6.1f\n",
                               call.params.v[0], call.params.v[1], call.params.v[2], st.min,
                               st.median, st.max);
                        if (st.median > best_med) best_med = st.median, best = call.params;
                    }
            printf("  sweep best: n_block=%d m_block=%d k_block=%d %.1f GFLOP/s\n", best.v[0],
                   best.v[1], best.v[2], best_med);
            call.params = def;
        }
        lt_aligned_free(x);
        lt_aligned_free(w);
        lt_aligned_free(y);
        lt_aligned_free(wq);
    }
    return 0;
}
