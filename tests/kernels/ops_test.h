/* Helpers for the kernel tests: a seeded generator, running one
 * call as nth sequential thread shares, and checking that the shares write
 * disjoint parts of the output. */
#ifndef LT_OPS_TEST_H
#define LT_OPS_TEST_H

#include "looptune/kernels.h"
#include "test.h"

#include <stdint.h>

/* xorshift64*: deterministic, independent of libc's rand. */
static uint64_t ot_state = 0x9e3779b97f4a7c15ull;
static inline void ot_seed(uint64_t s) { ot_state = s * 2654435761ull + 0x9e3779b97f4a7c15ull; }
static inline double ot_uniform(double lo, double hi) {
    ot_state ^= ot_state >> 12;
    ot_state ^= ot_state << 25;
    ot_state ^= ot_state >> 27;
    uint64_t r = ot_state * 0x2545f4914f6cdd1dull;
    return lo + (hi - lo) * (double)(r >> 11) * (1.0 / 9007199254740992.0);
}
static inline void ot_fill(float *x, int64_t n, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)ot_uniform(lo, hi);
}

/* Number of ISA paths the CPU can run: portable .. lt_isa_detect(). */
static inline int ot_isa_count(void) { return (int)lt_isa_detect() + 1; }

/* Every thread share of the call, one after another (ith = 0 .. nth-1). */
static inline void ot_run(lt_kernel_fn fn, const lt_call *c, const lt_step *s, int nth) {
    for (int ith = 0; ith < nth; ith++) fn(c, s, ith, nth);
}

/* Runs each share separately on an output pre-filled with NaN and merges
 * what it wrote into op[0] (whose first n floats are the whole output):
 * counts[i] = how many shares wrote float i. Returns the number of floats
 * written by more than one share. Outputs must not be NaN themselves, and
 * op[0] must not be an input. */
static inline int ot_run_disjoint(lt_kernel_fn fn, const lt_call *c, const lt_step *s, int nth,
                                  int64_t n, int *counts) {
    float *out = c->op[0]->data;
    float *merged = malloc((size_t)n * sizeof *merged);
    int overlaps = 0;
    memcpy(merged, out, (size_t)n * sizeof *merged);
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (int ith = 0; ith < nth; ith++) {
        for (int64_t i = 0; i < n; i++) out[i] = NAN;
        fn(c, s, ith, nth);
        for (int64_t i = 0; i < n; i++) {
            if (isnan(out[i])) continue;
            if (counts[i]++) overlaps++;
            merged[i] = out[i];
        }
    }
    memcpy(out, merged, (size_t)n * sizeof *merged);
    free(merged);
    return overlaps;
}

/* Counts of elements written other than exactly once, over [0, n). */
static inline int64_t ot_not_once(const int *counts, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += counts[i] != 1;
    return bad;
}

/* The run function for isa (clamped to what the kernel provides). */
static inline lt_kernel_fn ot_fn(lt_kernel_id id, int isa) {
    return lt_kernel_fn_for(lt_kernel_get(id), (lt_isa)isa);
}

/* Number of points of a kernel's parameter grid, and point k of it. */
static inline int ot_param_points(const lt_kernel *k) {
    int n = 1;
    for (int i = 0; i < k->n_params; i++) n *= k->params[i].n_values;
    return n;
}
static inline void ot_param_point(const lt_kernel *k, int point, lt_params *p) {
    lt_params_default(k, p);
    for (int i = 0; i < k->n_params; i++) {
        p->v[i] = k->params[i].values[point % k->params[i].n_values];
        point /= k->params[i].n_values;
    }
}

/* A kernel's declared space is well formed: each parameter's values
 * ascend, and every ISA path's default is one of them. */
static inline void ot_check_param_defs(const lt_kernel *k) {
    for (int i = 0; i < k->n_params; i++) {
        const lt_param_def *d = &k->params[i];
        for (int j = 1; j < d->n_values; j++) ASSERT_TRUE(d->values[j] > d->values[j - 1]);
        for (int isa = 0; isa < LT_ISA_COUNT; isa++) {
            bool has_def = false;
            for (int j = 0; j < d->n_values; j++)
                has_def |= d->values[j] == lt_param_default(d, (lt_isa)isa);
            ASSERT_TRUE(has_def);
        }
    }
}

#endif
