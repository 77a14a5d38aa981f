/* matvec, AVX2 path for q8_0 W with int8 activations on CPUs with AVX-VNNI:
 * matvec_q8i8_avx2.c compiled again (this file's flags add -mavxvnni), its
 * partial dots through vpdpbusd. The lanes are the same exact integers, so
 * y is the same, bit for bit. */
#define LT_Q8I8_AVXVNNI 1
#include "matvec_q8i8_avx2.c"
