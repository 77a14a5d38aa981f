/* AVX-VNNI build of the legacy types' multi-token dots: the AVX2 one with
 * qdot_x86.h's sums through vpdpbusd. */
#define LT_QDOT_AVXVNNI 1
#include "qdot_legacy_multi_avx2.c"
