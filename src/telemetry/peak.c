/* The machine's f32 FMA peak: every pool thread runs the widest FMA loop
 * its CPU has; FLOPs over wall time, best of a few repetitions. The roofline
 * of telemetry's windows is this figure and the STREAM triad bandwidth. */
#include <math.h>

#include "looptune/telemetry.h"
#include "telemetry/peak.h"

float lt__peak_fma_portable(uint64_t iters) {
    float a[LT__PEAK_CHAINS];
    for (int k = 0; k < LT__PEAK_CHAINS; k++) a[k] = 1.0f + 0.1f * (float)k;
    for (uint64_t i = 0; i < iters; i++)
        for (int k = 0; k < LT__PEAK_CHAINS; k++) a[k] = fmaf(a[k], 0.9999999f, 1e-7f);
    float s = 0;
    for (int k = 0; k < LT__PEAK_CHAINS; k++) s += a[k];
    return s;
}

typedef struct {
    uint64_t iters;
    lt_isa isa;
    _Atomic float sink; /* keeps the results alive */
} peak_job;

static void peak_worker(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    peak_job *j = arg;
    float r = j->isa == LT_ISA_AVX512 ? lt__peak_fma_avx512(j->iters)
              : j->isa == LT_ISA_AVX2 ? lt__peak_fma_avx2(j->iters)
                                      : lt__peak_fma_portable(j->iters);
    atomic_store_explicit(&j->sink, r, memory_order_relaxed);
}

double lt_tel_peak_gflops(lt_pool *pool, int reps) {
    lt_isa isa = lt_isa_detect();
    int lanes = isa == LT_ISA_AVX512 ? 16 : isa == LT_ISA_AVX2 ? 8 : 1;
    /* ~1 GFLOP per thread and repetition: long enough to reach turbo and
     * dwarf the wake-up, short enough to keep the whole measurement < 1 s */
    peak_job j = {.iters = (uint64_t)1 << (isa == LT_ISA_PORTABLE ? 22 : 21), .isa = isa};
    double per_thread = 2.0 * (double)lanes * LT__PEAK_CHAINS * (double)j.iters;
    double best = 0;
    lt_pool_run(pool, peak_worker, &j); /* warm-up: wakes threads, raises clocks */
    for (int r = 0; r < (reps > 0 ? reps : 1); r++) {
        uint64_t t0 = lt_now_ns();
        lt_pool_run(pool, peak_worker, &j);
        double s = (double)(lt_now_ns() - t0) * 1e-9;
        double g = per_thread * lt_pool_size(pool) / s * 1e-9;
        if (g > best) best = g;
    }
    return best;
}
