/* AVX2 build of the legacy types' multi-token dots (qdot_legacy_multi_x86.h);
 * qdot_legacy_multi_avxvnni.c builds it again for AVX-VNNI. */
#include "kernels/qdot_legacy_multi_x86.h"

lt__qdot_multi_fn LT__AVX2_OF(lt__qdot_multi_legacy)(lt_dtype t) { return lm_multi_of(t); }
