/* The FMA throughput loops behind lt_tel_peak_gflops, one per ISA. Each runs
 * iters iterations of PEAK_CHAINS independent FMAs of its vector width and
 * returns a sum of the results (so the work cannot be optimised away). */
#ifndef LT_TELEMETRY_PEAK_H
#define LT_TELEMETRY_PEAK_H

#include <stdint.h>

#define LT__PEAK_CHAINS 10
float lt__peak_fma_avx512(uint64_t iters); /* 16 lanes */
float lt__peak_fma_avx2(uint64_t iters);   /* 8 lanes */
float lt__peak_fma_portable(uint64_t iters); /* 1 lane per chain */

#endif
