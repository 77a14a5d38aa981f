/* A matvec's epilogue (MATVEC ia[2]): the rotary embedding of a projection's
 * rows and their store into the KV cache, done by the thread that has just
 * computed them. As nodes of their own, ROPE needs every row of q and k and
 * KV_STORE every row of k or v before it starts: hand-offs where all threads
 * wait for the projection's last task. The epilogue uses the rope kernel's
 * tables and rotation of the same ISA and copies the same floats, so a fused
 * program computes the same bits as the unfused one. */
#include "kernels/linear.h"
#include "kernels/ops_internal.h"

#include <string.h>

static const lt__rope_ops *const rope_ops[LT_ISA_COUNT] = {
    [LT_ISA_PORTABLE] = &lt__rope_portable, [LT_ISA_AVX2] = LT_X86_ONLY(&lt__rope_avx2),
    [LT_ISA_AVX512] = LT_X86_ONLY(&lt__rope_avx512)};

void lt__mv_epilogue(const lt_call *call, const lt_step *step, int ith, int nth, lt_isa isa) {
    const int64_t per = call->params.v[LT__MV_ROWS_PER_TASK];
    int64_t r0, r1;
    lt__linear_split(call->op[1]->ne[1], per, ith, nth, &r0, &r1);
    if (r0 >= r1) return;
    float *y = call->op[0]->data;
    const int64_t pos = step ? step->pos : 0;
    if (call->ia[2] & LT_MV_POST_ROPE) {
        /* rows_per_task is even, so a thread's rows hold whole pairs */
        LT_ASSERT(per % 2 == 0);
        const int64_t hd = call->ia[3];
        const float *c, *s;
        lt__rope_tables(hd, call->fa[1], pos, &c, &s);
        for (int64_t r = r0; r < r1;) { /* the part of each head in [r0, r1) */
            const int64_t off = r % hd, end = r - off + hd < r1 ? r - off + hd : r1;
            rope_ops[isa]->rotate(y + r, c + off, s + off, end - r);
            r = end;
        }
    }
    if (call->ia[2] & LT_MV_POST_STORE) {
        const lt_tensor *cache = call->op[4];
        LT_ASSERT(pos >= 0 && pos < cache->ne[1]);
        memcpy(lt__row_f32(cache, pos) + r0, y + r0, (size_t)(r1 - r0) * sizeof(float));
    }
}
