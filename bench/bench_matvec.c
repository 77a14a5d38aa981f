/* matvec bandwidth sweep: for decode-like shapes (stories110M and 1B-like),
 * f32 and q8_0, 1 and 2 threads, runs the kernel over enough copies of W to
 * stream `footprint` bytes from memory per sample (as decode streams every
 * layer's weights once per token), with a barrier between calls, and reports
 * achieved GB/s min/median/max per parameter point next to a plain read-only
 * vector stream over the same bytes on the same threads, measured
 * in the same run. Ends with the point of best geometric-mean ratio.
 *
 * usage: bench_matvec [--footprint MiB] [--reps N] [--threads 1,2]
 *                     [--full | --defaults | --act | --layouts] [--shape ROWSxCOLS]
 *                     [--dtype f32|q8_0|f16|bf16] [--isa NAME] [--offset B] [--split]
 *                     [--cycles]
 *   --full sweeps the whole parameter space (slow); otherwise a grid of
 *   unroll x prefetch x rows_per_task at k_block 0, then each k_block, each
 *   point with its activation mode flipped (act_int8 = 1 <-> act_int16 = 1,
 *   act_int8 = 0: q8_0's int8 or int16 activations);
 *   --defaults measures only the default point and its flipped twin;
 *   --act compares q8_0's activation modes at the default point (f32,
 *   int16, int8) interleaved: each of --reps rounds measures the read
 *   stream and every mode once, in rotating order, and each sample's ratio
 *   to its round's stream is reported (min/median/max); on a CPU with VNNI
 *   for the --isa path (AVX-512 VNNI, or AVX-VNNI under AVX2) int8 runs
 *   twice, with vpdpbusd and with the lanes of CPUs without it.
 *   --offset B places every W B bytes (< 64) past a cache line, as a tensor
 *   of a GGUF file (32-byte alignment) may lie.
 *   --split lays q8_0 W out as resident weights are where AVX-512 runs:
 *   split (core.h), each row starting on a cache line.
 *   --layouts compares q8_0's plain and split layouts at the default point,
 *   interleaved like --act, on copies of the same W.
 *   Every point starts from the --isa path's own defaults (lt_param_default).
 *   --cycles adds each point's core cycles per 32-element block and thread
 *   at its fastest sample (the clock from a chain of dependent adds): with
 *   --footprint 0 (W in L2) the kernel's own cost, next to what the stream
 *   would allow. */
#include "looptune/kernels.h"

#include "core/membw_internal.h"
#include "kernels/linear.h" /* lt__q8i8_avoid_vnni */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_POINTS 2048
#define MAX_REPS 32
#define MAX_THREADS 64 /* --threads above this fall back to 1 */

typedef struct {
    int64_t rows, cols;
} shape;

static const shape default_shapes[] = {
    {768, 768}, {2048, 768}, {768, 2048}, {32000, 768}, /* stories110M-like */
    {2048, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}, /* 1B-like */
};

typedef struct {
    const lt_kernel *k;
    lt_kernel_fn fn;
    lt_call *calls;     /* one per copy of W */
    int ncopies;
    lt_pool *pool;
    const char *const *bufs; /* for the read stream: ncopies buffers of nbytes */
    size_t nbytes;
    double sink[MAX_THREADS * 8];
} job;

static void run_matvec(void *arg, int ith, int nth) {
    job *j = arg;
    lt_step step = {.pos = 0, .n_tokens = 1, .tokens = NULL};
    for (int c = 0; c < j->ncopies; c++) {
        j->fn(&j->calls[c], &step, ith, nth);
        lt_pool_barrier(j->pool);
    }
}

/* The baseline: thread ith sums its share of every buffer with the read
 * kernel `looptune bench` measures the machine with (the best the CPU runs
 * of its ISA paths: independent vector accumulators), a barrier after each
 * buffer. */
static void run_stream(void *arg, int ith, int nth) {
    job *j = arg;
    const lt__membw_read_fn read = lt__membw_read_for(lt_isa_active());
    size_t lines = j->nbytes / 256;
    size_t lo = lines * (size_t)ith / (size_t)nth * 256, hi = lines * (size_t)(ith + 1) / (size_t)nth * 256;
    double sum = 0;
    for (int c = 0; c < j->ncopies; c++) {
        sum += read((const double *)(j->bufs[c] + lo), (hi - lo) / sizeof(double));
        lt_pool_barrier(j->pool);
    }
    j->sink[ith * 8] = sum;
}

static lt_summary measure(lt_pool *pool, lt_pool_fn fn, job *j, double bytes, int reps) {
    double g[MAX_REPS];
    lt_pool_run(pool, fn, j); /* warm-up */
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = lt_now_ns();
        lt_pool_run(pool, fn, j);
        g[r] = bytes / (double)(lt_now_ns() - t0); /* bytes per ns = GB/s */
    }
    return lt_summarize(g, reps);
}

/* The ISA the bench runs (--isa), whose defaults every point starts from:
 * AVX2's prefetch distance is not AVX-512's. */
static lt_isa bench_isa;

static void defaults(const lt_kernel *k, lt_params *p) {
    lt_params_default(k, p);
    for (int i = 0; i < k->n_params; i++) p->v[i] = lt_param_default(&k->params[i], bench_isa);
}

/* matvec's parameter indices (its descriptor order) */
enum { P_RPT, P_UNROLL, P_KB, P_PF, P_I16, P_I8 };

/* int8 activations <-> int16 activations (or, from f32, int8). */
static void flip_act(lt_params *p) {
    const bool i8 = p->v[P_I8] != 0;
    p->v[P_I8] = !i8;
    p->v[P_I16] = i8;
}

/* "f32" / "i16" / "i8": the activations a q8_0 point uses. */
static const char *act_name(const lt_params *p) {
    return p->v[P_I8] ? "i8" : p->v[P_I16] ? "i16" : "f32";
}

/* The core clock in GHz: a chain of dependent adds (one per cycle), the
 * fastest of many short runs so preemption falls out. */
static double core_ghz(void) {
    double best = 1e30;
    for (int r = 0; r < 200; r++) {
        uint64_t a = 0;
        const uint64_t t0 = lt_now_ns();
        for (int i = 0; i < 25000; i++)
            __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(a));
        const double dt = (double)(lt_now_ns() - t0);
        if (dt < best && a == 100000) best = dt;
    }
    return 100000.0 / best;
}

static double once(lt_pool *pool, lt_pool_fn fn, job *j, double bytes) {
    uint64_t t0 = lt_now_ns();
    lt_pool_run(pool, fn, j);
    return bytes / (double)(lt_now_ns() - t0);
}

/* --act: the read stream and q8_0's three activation modes at the default
 * point, interleaved over `reps` rounds (the order rotates each round so
 * none always runs after the stream or first); GB/s, and each sample over
 * its own round's stream, as min/median/max; and the per-round ratio of
 * int8 to int16. */
static void compare_act(const lt_kernel *k, lt_pool *pool, job *j, double bytes_w, int reps) {
    enum { NM_ALL = 4 };
    static const char *const names[NM_ALL] = {"f32", "i16", "i8", "i8nv"};
    /* int8 without VNNI (mode 3, "i8nv") only where the path has VNNI to avoid */
    const bool vnni = bench_isa == LT_ISA_AVX512 ? lt_cpu()->avx512vnni
                      : bench_isa == LT_ISA_AVX2 ? lt_cpu()->avxvnni : false;
    const int NM = vnni ? 4 : 3;
    lt_params prm[NM_ALL];
    double b = 0, f = 0, bytes = 0;
    lt_step step = {.pos = 0, .n_tokens = 1, .tokens = NULL};
    for (int m = 0; m < NM; m++) {
        defaults(k, &prm[m]);
        prm[m].v[P_I16] = m == 1;
        prm[m].v[P_I8] = m >= 2;
    }
    j->calls[0].params = prm[0];
    k->cost(&j->calls[0], &step, &b, &f);
    bytes = b * j->ncopies;
    double g[NM_ALL + 1][MAX_REPS], r[NM_ALL + 1][MAX_REPS], i8_i16[MAX_REPS], i8_nv[MAX_REPS];
    /* warm-up: every item once */
    once(pool, run_stream, j, bytes_w);
    for (int m = 0; m < NM; m++) {
        for (int c = 0; c < j->ncopies; c++) j->calls[c].params = prm[m];
        lt__q8i8_avoid_vnni = m == 3;
        once(pool, run_matvec, j, bytes);
    }
    for (int rep = 0; rep < reps; rep++) {
        for (int i = 0; i <= NM; i++) {
            int item = (i + rep) % (NM + 1); /* 0 = stream, 1.. = modes */
            if (item == 0) {
                g[0][rep] = once(pool, run_stream, j, bytes_w);
            } else {
                for (int c = 0; c < j->ncopies; c++) j->calls[c].params = prm[item - 1];
                lt__q8i8_avoid_vnni = item == 4;
                g[item][rep] = once(pool, run_matvec, j, bytes);
            }
        }
        for (int m = 0; m <= NM; m++) r[m][rep] = g[m][rep] / g[0][rep];
        i8_i16[rep] = g[3][rep] / g[2][rep];
        if (vnni) i8_nv[rep] = g[3][rep] / g[4][rep];
    }
    lt__q8i8_avoid_vnni = false;
    lt_summary st = lt_summarize(g[0], reps);
    printf("  stream  %6.1f / %6.1f / %6.1f GB/s\n", st.min, st.median, st.max);
    for (int m = 0; m < NM; m++) {
        lt_summary gs = lt_summarize(g[m + 1], reps), rs = lt_summarize(r[m + 1], reps);
        printf("  act=%-3s %6.1f / %6.1f / %6.1f GB/s   of stream %.2f / %.2f / %.2f\n", names[m],
               gs.min, gs.median, gs.max, rs.min, rs.median, rs.max);
    }
    lt_summary q = lt_summarize(i8_i16, reps);
    printf("  i8 / i16 per round %.2f / %.2f / %.2f\n", q.min, q.median, q.max);
    if (vnni) {
        q = lt_summarize(i8_nv, reps);
        printf("  i8 / i8nv (VNNI / without) per round %.2f / %.2f / %.2f\n", q.min, q.median,
               q.max);
    }
}

/* ncopies copies of one random W (rows x cols of dt; q8_0 split if split,
 * rows then on cache lines) one after another in one huge-page region, as
 * the runtime keeps a model's weights (lt_model_make_resident): the region
 * is advised before it is first touched, or the kernel backs it with 4 KiB
 * pages and every stream pays TLB misses. Streaming cost does not depend on
 * the values, so one W is copied. Every W starts off bytes past a line.
 * Fills bufs[c] (the copies' starts) and tw[c]; returns the mapping (its
 * length in *map_len), NULL if out of memory. */
static char *make_copies(lt_dtype dt, int64_t rows, int64_t cols, bool split, size_t off,
                         int ncopies, char **bufs, lt_tensor *tw, size_t *map_len) {
    const size_t rb = lt_dtype_row_bytes(dt, cols);
    const size_t ld = split ? (rb + 63) & ~(size_t)63 : rb, wspan = ld * (size_t)rows;
    const size_t stride = (wspan + off + 63) & ~(size_t)63, huge = (size_t)2 << 20;
    const size_t region = (stride * (size_t)ncopies + 2 * huge - 1) & ~(huge - 1);
    char *raw = mmap(NULL, region + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (raw == MAP_FAILED) return NULL;
    *map_len = region + huge;
    char *wbase = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(wbase, region, MADV_HUGEPAGE);
    for (int c = 0; c < ncopies; c++) bufs[c] = wbase + stride * (size_t)c;
    float *row = malloc(sizeof(float) * (size_t)cols);
    lt_block_q8_0 *plain = split ? malloc(rb) : NULL;
    uint32_t s = 12345;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < cols; j++) {
            s = s * 1664525u + 1013904223u;
            row[j] = (float)(s >> 8) / 16777216.0f - 0.5f;
        }
        char *dst = bufs[0] + off + ld * (size_t)r;
        lt_row_from_f32(dt, row, split ? (void *)plain : dst, cols);
        if (split) lt_q8_0_split_row(plain, dst, cols / LT_QK8_0);
    }
    free(plain);
    free(row);
    for (int c = 1; c < ncopies; c++) memcpy(bufs[c], bufs[0], wspan + off);
    for (int c = 0; c < ncopies; c++) {
        lt_tensor_init(&tw[c], dt, cols, rows, 1, 1, bufs[c] + off);
        if (split) {
            tw[c].nb[1] = ld;
            tw[c].nb[2] = tw[c].nb[3] = wspan;
            tw[c].layout = LT_LAYOUT_Q8_SPLIT;
        }
    }
    return raw;
}

/* --layouts: the read stream, and the default point on plain and on split
 * q8_0 copies of the same W, interleaved over `reps` rounds (the order
 * rotates each round); GB/s and each sample over its round's stream, and
 * the per-round ratio split / plain. The stream reads the plain copies. */
static void compare_layouts(const lt_kernel *k, lt_pool *pool, job *plain, job *split, double bytes_w,
                            int reps) {
    double b = 0, f = 0;
    lt_step step = {.pos = 0, .n_tokens = 1, .tokens = NULL};
    k->cost(&plain->calls[0], &step, &b, &f);
    const double bytes = b * plain->ncopies;
    double g[3][MAX_REPS], r[3][MAX_REPS], q[MAX_REPS];
    once(pool, run_stream, plain, bytes_w); /* warm-up: every item once */
    once(pool, run_matvec, plain, bytes);
    once(pool, run_matvec, split, bytes);
    for (int rep = 0; rep < reps; rep++) {
        for (int i = 0; i < 3; i++) {
            int item = (i + rep) % 3; /* 0 = stream, 1 = plain, 2 = split */
            g[item][rep] = item == 0   ? once(pool, run_stream, plain, bytes_w)
                           : item == 1 ? once(pool, run_matvec, plain, bytes)
                                       : once(pool, run_matvec, split, bytes);
        }
        for (int m = 0; m < 3; m++) r[m][rep] = g[m][rep] / g[0][rep];
        q[rep] = g[2][rep] / g[1][rep];
    }
    static const char *const names[3] = {"stream", "plain", "split"};
    for (int m = 0; m < 3; m++) {
        lt_summary gs = lt_summarize(g[m], reps), rs = lt_summarize(r[m], reps);
        printf("  %-6s %6.1f / %6.1f / %6.1f GB/s   of stream %.2f / %.2f / %.2f\n", names[m],
               gs.min, gs.median, gs.max, rs.min, rs.median, rs.max);
    }
    lt_summary qs = lt_summarize(q, reps);
    printf("  split / plain per round %.2f / %.2f / %.2f\n", qs.min, qs.median, qs.max);
}

/* The point set: the whole space, or the grid described in the usage. */
static int make_points(const lt_kernel *k, int full, lt_params *pts) {
    int n = 0;
    const lt_param_def *d = k->params;
    if (full == 2) {
        defaults(k, &pts[0]);
        pts[1] = pts[0];
        flip_act(&pts[1]);
        return 2;
    }
    if (full) {
        int idx[LT_MAX_PARAMS] = {0};
        for (;;) {
            for (int i = 0; i < k->n_params; i++) pts[n].v[i] = d[i].values[idx[i]];
            n++;
            int i = 0;
            while (i < k->n_params && ++idx[i] == d[i].n_values) idx[i++] = 0;
            if (i == k->n_params) return n;
        }
    }
    static const int rpt[] = {8, 32, 128}, pf[] = {0, 512, 1024, 2048};
    for (int a = 0; a < 3; a++)
        for (int u = 0; u < d[1].n_values; u++)
            for (int b = 0; b < 4; b++) {
                defaults(k, &pts[n]);
                pts[n].v[0] = rpt[a];
                pts[n].v[1] = d[1].values[u];
                pts[n].v[2] = 0;
                pts[n].v[3] = pf[b];
                n++;
            }
    for (int kb = 1; kb < d[2].n_values; kb++) {
        defaults(k, &pts[n]);
        pts[n].v[2] = d[2].values[kb];
        n++;
    }
    defaults(k, &pts[n++]);
    /* every point again with the other activation mode */
    for (int i = 0, m = n; i < m; i++) {
        pts[n] = pts[i];
        flip_act(&pts[n++]);
    }
    return n;
}

int main(int argc, char **argv) {
    size_t footprint = (size_t)512 << 20;
    int reps = 5, full = 0, nthreads[2] = {1, 2}, nnth = 2;
    bool cycles = false;
    size_t woff = 0; /* W's start past a 2 MiB boundary, in bytes (< 64) */
    bool split = false;
    shape shapes[8];
    int nshapes = 0;
    lt_dtype dtypes[4] = {LT_F32, LT_Q8_0};
    int ndtypes = 2;
    lt_isa isa = lt_isa_detect();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--footprint") && i + 1 < argc) {
            footprint = (size_t)atol(argv[++i]) << 20;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1 || reps > MAX_REPS) reps = 5;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nnth = sscanf(argv[++i], "%d,%d", &nthreads[0], &nthreads[1]);
            if (nnth < 1) nnth = 1;
        } else if (!strcmp(argv[i], "--cycles")) {
            cycles = true;
        } else if (!strcmp(argv[i], "--full")) {
            full = 1;
        } else if (!strcmp(argv[i], "--defaults")) {
            full = 2;
        } else if (!strcmp(argv[i], "--act")) {
            full = 3;
        } else if (!strcmp(argv[i], "--layouts")) {
            full = 4;
        } else if (!strcmp(argv[i], "--split")) {
            split = true;
        } else if (!strcmp(argv[i], "--offset") && i + 1 < argc) {
            woff = (size_t)atol(argv[++i]) & 63;
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc && nshapes < 8) {
            long long r, c;
            if (sscanf(argv[++i], "%lldx%lld", &r, &c) == 2) shapes[nshapes++] = (shape){r, c};
        } else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            if (ndtypes == 2 && dtypes[0] == LT_F32 && dtypes[1] == LT_Q8_0) ndtypes = 0;
            if (lt_dtype_parse(argv[++i], &dtypes[ndtypes]) == LT_OK) ndtypes++;
        } else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            if (lt_isa_parse(argv[++i], &isa) != LT_OK) isa = lt_isa_detect();
        } else {
            fprintf(stderr, "usage: %s [--footprint MiB] [--reps N] [--threads 1,2] "
                            "[--full | --defaults | --act | --layouts] [--offset B] [--split] [--cycles] "
                            "[--shape RxC] [--dtype T] [--isa NAME]\n", argv[0]);
            return 2;
        }
    }
    if (nshapes == 0) {
        nshapes = (int)(sizeof default_shapes / sizeof default_shapes[0]);
        memcpy(shapes, default_shapes, sizeof default_shapes);
    }
    for (int i = 0; i < nnth; i++)
        if (nthreads[i] < 1 || nthreads[i] > MAX_THREADS) nthreads[i] = 1;

    bench_isa = isa;
    const double ghz = cycles ? core_ghz() : 0;
    const lt_kernel *k = lt_kernel_get(LT_K_MATVEC);
    static lt_params pts[MAX_POINTS];
    int npts = full >= 3 ? 0 : make_points(k, full, pts);
    if (full >= 3) { /* the activation modes and the layouts are q8_0's */
        dtypes[0] = LT_Q8_0;
        ndtypes = 1;
    }
    static double logratio[MAX_POINTS];
    int ngroups = 0;
    printf("matvec bench: isa %s, %d points, footprint %zu MiB, %d reps, host %s\n",
           lt_isa_name(isa), npts, footprint >> 20, reps, lt_cpu()->model);
    if (cycles) printf("core clock %.2f GHz (dependent adds)\n", ghz);

    for (int di = 0; di < ndtypes; di++) {
        for (int si = 0; si < nshapes; si++) {
            const int64_t rows = shapes[si].rows, cols = shapes[si].cols;
            const lt_dtype dt = dtypes[di];
            const bool sp = split && dt == LT_Q8_0;
            const size_t off = sp ? 0 : woff; /* split rows start on a line */
            const size_t wbytes = lt_dtype_row_bytes(dt, cols) * (size_t)rows;
            int ncopies = (int)((footprint + wbytes - 1) / wbytes);
            if (ncopies < 1) ncopies = 1;
            char **bufs = calloc((size_t)ncopies, sizeof *bufs);
            lt_tensor *tw = calloc((size_t)ncopies, sizeof *tw), tx,
                      *ty = calloc((size_t)ncopies, sizeof *ty);
            size_t map_len = 0;
            char *raw = make_copies(dt, rows, cols, sp, off, ncopies, bufs, tw, &map_len);
            if (!raw) { fprintf(stderr, "out of memory\n"); return 1; }
            float *x = lt_aligned_alloc(64, sizeof(float) * (size_t)cols);
            for (int64_t j = 0; j < cols; j++) x[j] = (float)((j * 7919) % 1000) / 1000.0f - 0.5f;
            float *y = lt_aligned_alloc(64, sizeof(float) * (size_t)rows * (size_t)ncopies);
            lt_call *calls = calloc((size_t)ncopies, sizeof *calls);
            lt_tensor_init(&tx, LT_F32, cols, 1, 1, 1, x);
            for (int c = 0; c < ncopies; c++) {
                lt_tensor_init(&ty[c], LT_F32, rows, 1, 1, 1, y + rows * c);
                calls[c].op[0] = &ty[c];
                calls[c].op[1] = &tw[c];
                calls[c].op[2] = &tx;
            }
            /* --layouts: split copies of the same W beside the plain ones */
            const bool lay = full == 4 && dt == LT_Q8_0;
            char **sbufs = NULL, *sraw = NULL;
            lt_tensor *stw = NULL;
            lt_call *scalls = NULL;
            size_t smap_len = 0;
            if (lay) {
                sbufs = calloc((size_t)ncopies, sizeof *sbufs);
                stw = calloc((size_t)ncopies, sizeof *stw);
                scalls = calloc((size_t)ncopies, sizeof *scalls);
                sraw = make_copies(dt, rows, cols, true, 0, ncopies, sbufs, stw, &smap_len);
                if (!sraw) { fprintf(stderr, "out of memory\n"); return 1; }
                for (int c = 0; c < ncopies; c++) {
                    scalls[c] = calls[c];
                    scalls[c].op[1] = &stw[c];
                    defaults(k, &scalls[c].params);
                    defaults(k, &calls[c].params);
                }
            }
            const double bytes_w = (double)wbytes * ncopies;
            lt_step step = {.pos = 0, .n_tokens = 1, .tokens = NULL};

            for (int ti = 0; ti < nnth; ti++) {
                lt_pool *pool;
                if (lt_pool_init(&pool, nthreads[ti])) {
                    fprintf(stderr, "bench_matvec: cannot start threads: %s\n", lt_errmsg());
                    return 1;
                }
                job j = {.k = k, .fn = lt_kernel_fn_for(k, isa), .calls = calls,
                         .ncopies = ncopies, .pool = pool, .bufs = (const char *const *)bufs,
                         .nbytes = wbytes};
                if (lay) {
                    job js = j;
                    js.calls = scalls;
                    printf("\n%s %lldx%lld, %d thread(s), %d copies x %.1f MB each layout, %d "
                           "rounds (min / median / max)\n",
                           lt_dtype_name(dt), (long long)rows, (long long)cols, nthreads[ti],
                           ncopies, (double)wbytes / 1e6, reps);
                    compare_layouts(k, pool, &j, &js, bytes_w, reps);
                    lt_pool_free(pool);
                    continue;
                }
                if (full == 3) {
                    printf("\n%s%s %lldx%lld, %d thread(s), %d copies x %.1f MB, %d rounds "
                           "(min / median / max)\n",
                           lt_dtype_name(dt), sp ? " split" : "", (long long)rows, (long long)cols, nthreads[ti],
                           ncopies, (double)wbytes / 1e6, reps);
                    compare_act(k, pool, &j, bytes_w, reps);
                    lt_pool_free(pool);
                    continue;
                }
                lt_summary base = measure(pool, run_stream, &j, bytes_w, reps);
                printf("\n%s%s %lldx%lld, %d thread(s), %d copies x %.1f MB: read stream "
                       "%.1f / %.1f / %.1f GB/s (min/median/max)\n",
                       lt_dtype_name(dt), sp ? " split" : "", (long long)rows, (long long)cols, nthreads[ti],
                       ncopies, (double)wbytes / 1e6, base.min, base.median, base.max);
                int best = 0;
                double best_med = 0;
                for (int p = 0; p < npts; p++) {
                    double b = 0, f = 0;
                    for (int c = 0; c < ncopies; c++) calls[c].params = pts[p];
                    LT_ASSERT(k->check(&calls[0]) == LT_OK);
                    k->cost(&calls[0], &step, &b, &f);
                    lt_summary st = measure(pool, run_matvec, &j, b * ncopies, reps);
                    logratio[p] += log(st.median / base.median);
                    if (st.median > best_med) best_med = st.median, best = p;
                    printf("  rpt=%3d unroll=%d k_block=%4d prefetch=%4d act=%-3s  %6.1f / %6.1f / "
                           "%6.1f GB/s  %5.1f%% of stream",
                           pts[p].v[0], pts[p].v[1], pts[p].v[2], pts[p].v[3], act_name(&pts[p]),
                           st.min, st.median, st.max, 100.0 * st.median / base.median);
                    /* fastest sample: ns per call over each thread's blocks */
                    if (cycles)
                        printf("  %5.2f cycles/block", ghz * (b * ncopies / st.max) * nthreads[ti] /
                                                           ((double)rows * (double)cols / 32.0 * ncopies));
                    printf("\n");
                }
                lt_summary again = measure(pool, run_stream, &j, bytes_w, reps);
                printf("  best: rpt=%d unroll=%d k_block=%d prefetch=%d act=%s %.1f GB/s = %.1f%% "
                       "of stream (stream again: %.1f GB/s median)\n",
                       pts[best].v[0], pts[best].v[1], pts[best].v[2], pts[best].v[3],
                       act_name(&pts[best]), best_med,
                       100.0 * best_med / base.median, again.median);
                ngroups++;
                lt_pool_free(pool);
            }
            munmap(raw, map_len);
            if (sraw) munmap(sraw, smap_len);
            free(sbufs);
            free(stw);
            free(scalls);
            free(bufs);
            free(tw);
            free(ty);
            free(calls);
            lt_aligned_free(x);
            lt_aligned_free(y);
        }
    }
    if (full >= 3) return 0;
    int best = 0;
    for (int p = 1; p < npts; p++)
        if (logratio[p] > logratio[best]) best = p;
    printf("\nbest overall (geometric mean of median / stream over %d groups): rpt=%d unroll=%d "
           "k_block=%d prefetch=%d act=%s: %.1f%%\n",
           ngroups, pts[best].v[0], pts[best].v[1], pts[best].v[2], pts[best].v[3],
           act_name(&pts[best]), 100.0 * exp(logratio[best] / ngroups));
    lt_params def;
    defaults(k, &def);
    for (int p = 0; p < npts; p++)
        if (!memcmp(&pts[p], &def, sizeof def))
            printf("defaults: rpt=%d unroll=%d k_block=%d prefetch=%d act=%s: %.1f%%\n",
                   def.v[0], def.v[1], def.v[2], def.v[3], act_name(&def),
                   100.0 * exp(logratio[p] / ngroups));
    return 0;
}
