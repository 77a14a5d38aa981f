/* The integer dots of q4_0 .. q6_k and interleaved q8_0 (kernels/qdot.h) alone: nanoseconds per
 * weight block of one row dotted with one token (lt__qdot_fn) and, where
 * the path has one, through the multi-token dot (lt__qdot_multi_fn) with one
 * token and with four at once (per block and token), for every path this CPU runs: portable, AVX2 (with and
 * without AVX-VNNI where the CPU has it), AVX-512 (with and without VNNI).
 * For the interleaved types (q8_0, q4_0 .. q5_1, q4_k, q6_k) the group dot
 * (lt__x16_fn) over the same rows held interleaved, with 1, 4 and 8 tokens,
 * with and without its prefetch. The rows fill --kib KiB (default 256: in L2, so
 * the dot's own cost; far larger, memory's), each sample one pass over all
 * of them; the paths take turns
 * within every round, so a busy machine slows them alike. min / median /
 * max over --rounds rounds.
 *
 * usage: bench_qdot [--type q4_k] [--kib 256] [--cols 2048] [--rounds 15] */
#include "kernels/linear.h" /* lt__q8i8_avoid_vnni */
#include "kernels/qdot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUNDS 101
#define MAX_PATHS 5

typedef struct {
    const char *name;
    lt_isa isa;
    bool avoid_vnni;
} path;

static volatile float sink;

/* One pass over the rows: one token (multi 0), one token through the
 * multi-token dot (multi 1), or four at once (multi 4: per block and token). */
static double pass_ns(lt_dtype t, lt_isa isa, int multi, const char *w, size_t rb,
                      int64_t rows, int64_t nb, const void *const *xq) {
    const lt__qdot_fn dot = lt__qdot_of(t, isa);
    const lt__qdot_multi_fn mdot = lt__qdot_multi_of(t, isa);
    float out[LT__QDOT_MULTI_MAX], s = 0;
    const uint64_t t0 = lt_now_ns();
    for (int64_t r = 0; r < rows; r++) {
        if (multi) {
            mdot(w + (size_t)r * rb, xq, multi, nb, out);
            s += out[0];
        } else {
            s += dot(w + (size_t)r * rb, xq[0], nb);
        }
    }
    const double ns = (double)(lt_now_ns() - t0);
    sink = s;
    return ns / (double)(rows * nb * (multi ? multi : 1));
}

/* One pass of the group dot over the interleaved rows (whole groups). */
static double group_pass_ns(lt_dtype t, lt_isa isa, int ntok, size_t pf, const char *g, size_t rb,
                            int64_t rows, int64_t nb, const void *const *xq) {
    const lt__x16_fn dot = lt__x16_of(t, isa);
    float out[LT__X16_TOK_MAX * LT_X16_ROWS], s = 0;
    const int64_t groups = rows / LT_X16_ROWS;
    const uint64_t t0 = lt_now_ns();
    for (int64_t i = 0; i < groups; i++) {
        dot(g + (size_t)i * LT_X16_ROWS * rb, nb, xq, ntok, pf, out);
        s += out[0];
    }
    const double ns = (double)(lt_now_ns() - t0);
    sink = s;
    return ns / (double)(groups * LT_X16_ROWS * nb * ntok);
}

int main(int argc, char **argv) {
    const char *type = "q4_k";
    int64_t kib = 256, cols = 2048;
    int rounds = 15;
    size_t pf = 2048;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--type") && i + 1 < argc) type = argv[++i];
        else if (!strcmp(argv[i], "--kib") && i + 1 < argc) kib = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prefetch") && i + 1 < argc) pf = (size_t)atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--type q8_0, q4_0..q6_k] [--kib 256] [--cols 2048] "
                            "[--rounds 15] [--prefetch 2048]\n", argv[0]);
            return 2;
        }
    }
    lt_dtype t;
    const lt__qtype *qt = NULL;
    if (lt_dtype_parse(type, &t) == LT_OK) qt = lt__qtype_of(t);
    if (!qt || cols <= 0 || cols % qt->block || kib <= 0 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_qdot: --type is one of q8_0, q4_0 .. q6_k, --cols a multiple of its "
                        "block, --kib > 0, --rounds 1..%d\n", MAX_ROUNDS);
        return 2;
    }
    const size_t rb = lt_dtype_row_bytes(t, cols);
    const int64_t nb = cols / qt->block;
    int64_t rows = (kib << 10) / (int64_t)rb;
    if (rows < 1) rows = 1;
    char *w = lt_aligned_alloc(64, rb * (size_t)rows);
    float *row = malloc(sizeof(float) * (size_t)cols);
    void *xq[LT__X16_TOK_MAX];
    uint32_t s = 12345;
    for (int64_t r = 0; r < rows + LT__X16_TOK_MAX; r++) {
        for (int64_t j = 0; j < cols; j++) {
            s = s * 1664525u + 1013904223u;
            row[j] = (float)(s >> 8) / 16777216.0f - 0.5f;
        }
        if (r < rows) {
            lt_row_from_f32(t, row, w + (size_t)r * rb, cols);
        } else {
            xq[r - rows] = lt_aligned_alloc(64, qt->xq_bytes * (size_t)nb);
            qt->quant(row, cols, xq[r - rows]);
        }
    }
    free(row);

    path paths[MAX_PATHS];
    int np = 0;
    paths[np++] = (path){"portable", LT_ISA_PORTABLE, false};
    if (lt_isa_detect() >= LT_ISA_AVX2) {
        if (lt_cpu()->avxvnni) paths[np++] = (path){"avx2+avxvnni", LT_ISA_AVX2, false};
        paths[np++] = (path){"avx2", LT_ISA_AVX2, true};
    }
    if (lt_isa_detect() >= LT_ISA_AVX512) {
        if (lt_cpu()->avx512vnni) paths[np++] = (path){"avx512+vnni", LT_ISA_AVX512, false};
        paths[np++] = (path){"avx512", LT_ISA_AVX512, true};
    }
    printf("qdot bench: %s, %lld x %lld (%lld KiB), %d rounds, host %s\n", type, (long long)rows,
           (long long)cols, (long long)((size_t)rows * rb >> 10), rounds, lt_cpu()->model);
    printf("ns per block (and token): min / median / max\n");
    /* per-row modes: 1 token, 1 through the multi-token dot, 4 at once; the
     * interleaved types' group modes: 1 token, 1 with prefetch, 4 at once */
    const bool grouped = lt_x16_has(t);
    char *g = NULL;
    if (grouped) {
        rows = rows / LT_X16_ROWS * LT_X16_ROWS;
        if (rows < LT_X16_ROWS) {
            fprintf(stderr, "bench_qdot: --kib holds less than one group of 16 rows\n");
            return 2;
        }
        g = lt_aligned_alloc(64, rb * (size_t)rows);
        for (int64_t r = 0; r < rows; r += LT_X16_ROWS)
            lt_x16_pack(t, w + (size_t)r * rb, rb, LT_X16_ROWS, nb, g + (size_t)r * rb);
    }
    static const int modes[] = {0, 1, LT__QDOT_MULTI_MAX, LT__X16_TOK_MAX};
    static const char *const row_names[] = {"1 tok", "1 tok multi", "4 tok"};
    static const char *const group_names[] = {"group 1 tok", "group 1 pf", "group 4 tok",
                                              "group 8 tok"};
    for (int mi = 0; mi < (grouped ? 4 : 3); mi++) {
        const int multi = modes[mi];
        double ns[MAX_PATHS][MAX_ROUNDS];
        bool has[MAX_PATHS];
        for (int p = 0; p < np; p++) {
            lt__qdot_avoid_vnni = paths[p].avoid_vnni;
            has[p] = grouped || !multi || lt__qdot_multi_of(t, paths[p].isa) != NULL;
        }
        for (int rd = -1; rd < rounds; rd++) /* round -1 warms every path up */
            for (int i = 0; i < np; i++) {
                const int p = (i + (rd < 0 ? 0 : rd)) % np; /* rotating order */
                if (!has[p]) continue;
                lt__qdot_avoid_vnni = paths[p].avoid_vnni;
                const double v =
                    grouped ? group_pass_ns(t, paths[p].isa, multi ? multi : 1,
                                            multi == 1 ? pf : 0, g, rb, rows, nb,
                                            (const void *const *)xq)
                            : pass_ns(t, paths[p].isa, multi, w, rb, rows, nb,
                                      (const void *const *)xq);
                if (rd >= 0) ns[p][rd] = v;
            }
        lt__qdot_avoid_vnni = false;
        for (int p = 0; p < np; p++) {
            if (!has[p]) continue;
            const lt_summary sm = lt_summarize(ns[p], rounds);
            printf("  %-12s %-13s %7.2f / %7.2f / %7.2f\n",
                   grouped ? group_names[mi] : row_names[mi], paths[p].name, sm.min, sm.median,
                   sm.max);
        }
    }
    lt_aligned_free(g);
    for (int i = 0; i < LT__X16_TOK_MAX; i++) lt_aligned_free(xq[i]);
    lt_aligned_free(w);
    return 0;
}
