/* Placeholder descriptors until matvec.c / matmul.c land (deleted then). */
#include "looptune/kernels.h"
static void pending(const lt_call *c, const lt_step *s, int ith, int nth) {
    (void)c; (void)s; (void)ith; (void)nth;
    LT_ASSERT(!"kernel not implemented yet");
}
const lt_kernel lt__k_matvec = {.name = "matvec", .id = LT_K_MATVEC, .run = {pending}};
const lt_kernel lt__k_matmul = {.name = "matmul", .id = LT_K_MATMUL, .run = {pending}};
