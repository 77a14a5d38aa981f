/* AVX-512 builds of the legacy types' multi-token dots: q4_1's and q5_1's
 * shared 256-bit code (qdot_legacy_multi_x86.h) with AVX-512VL's 32
 * registers, so the 4 chains of 4 tokens stay in registers. */
#include "kernels/qdot_legacy_multi_x86.h"


lt__qdot_multi_fn lt__qdot_multi_legacy_avx512_of(lt_dtype t) { return lm_multi_of(t); }
