/* AVX2 build of the legacy types' multi-token dots (qdot_legacy_multi_x86.h). */
#include "kernels/qdot_legacy_multi_x86.h"

lt__qdot_multi_fn lt__qdot_multi_legacy_avx2_of(lt_dtype t) { return lm_multi_of(t); }
