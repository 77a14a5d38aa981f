/* Internal to the host memory-bandwidth measurement: the per-ISA kernels and
 * a variant of lt_membw_measure that also returns the read kernel's checksum,
 * so tests can verify every byte was read. */
#ifndef LT_CORE_MEMBW_INTERNAL_H
#define LT_CORE_MEMBW_INTERNAL_H

#include "looptune/core.h"

/* a[i] = b[i] + s * c[i] for i < n (any n, any alignment; the vector paths
 * fuse the multiply-add). */
typedef void (*lt__membw_triad_fn)(double *a, const double *b, const double *c, double s, size_t n);
/* Sum of x[0..n) with loads in the decode access pattern (several
 * independent vector accumulators). */
typedef double (*lt__membw_read_fn)(const double *x, size_t n);

void lt__membw_triad_portable(double *a, const double *b, const double *c, double s, size_t n);
double lt__membw_read_portable(const double *x, size_t n);
void lt__membw_triad_avx2(double *a, const double *b, const double *c, double s, size_t n);
double lt__membw_read_avx2(const double *x, size_t n);
void lt__membw_triad_avx512(double *a, const double *b, const double *c, double s, size_t n);
double lt__membw_read_avx512(const double *x, size_t n);

/* The kernels for an ISA level (clamped to what is compiled in). */
lt__membw_triad_fn lt__membw_triad_for(lt_isa isa);
lt__membw_read_fn lt__membw_read_for(lt_isa isa);

/* Contents of the scanned array, element i: small integers, so every partial
 * sum is exact and the total has a closed form. */
#define LT__MEMBW_PERIOD 1024
static inline double lt__membw_value(size_t i) { return (double)(i % LT__MEMBW_PERIOD); }

/* lt_membw_measure, plus *read_sum = the read kernel's total over the whole
 * array in the last repetition (summed over threads). pool may be NULL: the
 * caller measures alone. */
int lt__membw_measure_sum(lt_pool *pool, size_t bytes_per_array, int reps, lt_membw *out,
                          double *read_sum);

#endif
