/* AVX-512VL build of the legacy types' multi-token dots
 * (qdot_legacy_multi_x86.h): the same instructions with 32 registers. */
#include "kernels/qdot_legacy_multi_x86.h"

lt__qdot_multi_fn lt__qdot_multi_legacy_avx512_of(lt_dtype t) { return lm_multi_of(t); }
