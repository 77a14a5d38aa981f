/* AVX-VNNI build of qdot_x16_avx2.c (this file's flags add -mavxvnni):
 * the block sums through vpdpbusd, the same exact int32, the same bits. */
#define LT_QDOT_AVXVNNI 1
#include "qdot_x16_avx2.c"
