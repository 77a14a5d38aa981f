/* Placeholder descriptors until the element-wise/attention kernels land (deleted then). */
#include "looptune/kernels.h"
static void pending(const lt_call *c, const lt_step *s, int ith, int nth) {
    (void)c; (void)s; (void)ith; (void)nth;
    LT_ASSERT(!"kernel not implemented yet");
}
const lt_kernel lt__k_embed = {.name = "embed", .id = LT_K_EMBED, .run = {pending}};
