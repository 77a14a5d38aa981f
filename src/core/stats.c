/* Order statistics of repeated measurements: the sort, the median and the
 * min/median/max summary that the tuner's comparisons, `looptune bench` and
 * the benchmarks all report. */
#include <stdlib.h>
#include <string.h>

#include "looptune/core.h"

static int cmp_f64(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void lt_sort_f64(double *x, int n) {
    if (n > 1) qsort(x, (size_t)n, sizeof *x, cmp_f64);
}

/* The median of sorted t[0..n). */
static double sorted_median(const double *t, int n) {
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

lt_summary lt_summarize(const double *x, int n) {
    LT_ASSERT(n >= 1);
    double *t = malloc((size_t)n * sizeof *t);
    LT_ASSERT(t != NULL);
    memcpy(t, x, (size_t)n * sizeof *t);
    lt_sort_f64(t, n);
    lt_summary s = {t[0], sorted_median(t, n), t[n - 1]};
    free(t);
    return s;
}

double lt_median(const double *x, int n) {
    return lt_summarize(x, n).median;
}
