/* AVX-VNNI build of qdot_avx2.c's dots (this file's flags add -mavxvnni):
 * the same code with qdot_x86.h's integer sums through vpdpbusd and
 * vpdpwssd; qdot_avx2.c's lookups hand over to it on CPUs with AVX-VNNI. */
#define LT_QDOT_AVXVNNI 1
#include "qdot_avx2.c"
