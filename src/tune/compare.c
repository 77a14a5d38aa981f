/* The paired comparison of a candidate against the incumbent measured
 * interleaved (A, B, A, B, ...): slow drifts of a shared machine hit both
 * sides of a pair alike, so the per-pair ratio b/a is what is compared. The
 * estimate is the weighted median of the ratios (pairs measured while the
 * machine was known busy weigh little), with a 95% bootstrap interval; B is
 * declared faster only when the whole interval lies below 1 - margin. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune_internal.h"

typedef struct {
    double r, w;
} wpair;

static int cmp_wpair(const void *a, const void *b) {
    double x = ((const wpair *)a)->r, y = ((const wpair *)b)->r;
    return (x > y) - (x < y);
}

/* Weighted median: the smallest value whose cumulative weight reaches half,
 * averaged with the next one on an exact tie (so equal weights give the
 * ordinary median). Sorts v. */
static double weighted_median(wpair *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_wpair);
    double total = 0;
    for (int i = 0; i < n; i++) total += v[i].w;
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += v[i].w;
        if (acc > 0.5 * total * (1 + 1e-12)) return v[i].r;
        if (acc >= 0.5 * total * (1 - 1e-12))
            return i + 1 < n ? 0.5 * (v[i].r + v[i + 1].r) : v[i].r;
    }
    return v[n - 1].r;
}

int lt_compare_paired(const double *a, const double *b, const bool *contended, int n,
                      double margin, double contended_weight, uint64_t seed,
                      lt_compare_result *out) {
    memset(out, 0, sizeof *out);
    if (n < 1) return lt_error(LT_EINVAL, "compare: no samples");
    for (int i = 0; i < n; i++)
        if (!(a[i] > 0) || !(b[i] > 0) || !isfinite(a[i]) || !isfinite(b[i]))
            return lt_error(LT_EINVAL, "compare: sample %d is not a positive time", i);
    wpair *v = malloc((size_t)n * sizeof *v), *bs = malloc((size_t)n * sizeof *bs);
    double *ca = malloc((size_t)n * sizeof *ca), *cb = malloc((size_t)n * sizeof *cb);
    enum { N_BOOT = 1000 };
    double *boot = malloc(N_BOOT * sizeof *boot);
    if (!v || !bs || !ca || !cb || !boot) {
        free(v), free(bs), free(ca), free(cb), free(boot);
        return lt_error(LT_ENOMEM, "compare: out of memory");
    }
    int nc = 0;
    for (int i = 0; i < n; i++) {
        bool busy = contended && contended[i];
        v[i] = (wpair){b[i] / a[i], busy ? contended_weight : 1.0};
        if (!busy) {
            ca[nc] = a[i];
            cb[nc++] = b[i];
        }
    }
    out->n_clean = nc;
    out->a_median = nc ? lt_median(ca, nc) : lt_median(a, n);
    out->b_median = nc ? lt_median(cb, nc) : lt_median(b, n);
    uint64_t rng = seed ^ 0x636f6d7061726521ull;
    for (int k = 0; k < N_BOOT; k++) {
        for (int i = 0; i < n; i++) bs[i] = v[lt__rng_below(&rng, n)];
        boot[k] = weighted_median(bs, n);
    }
    out->ratio = weighted_median(v, n);
    lt_sort_f64(boot, N_BOOT);
    out->ci_lo = boot[(int)(0.025 * N_BOOT)];
    out->ci_hi = boot[(int)(0.975 * N_BOOT) - 1];
    /* too few trustworthy pairs: no verdict either way */
    bool enough = nc >= 5;
    out->faster = enough && out->ci_hi < 1.0 - margin;
    out->slower = enough && out->ci_lo > 1.0 + margin;
    free(v), free(bs), free(ca), free(cb), free(boot);
    return LT_OK;
}
