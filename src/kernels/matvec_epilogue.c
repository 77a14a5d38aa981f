/* A matvec's epilogue (MATVEC ia[2]): a projection's bias, the rotary
 * embedding of its rows and their store into the KV cache, done by the
 * thread that has just computed them. As nodes of their own, ADD, ROPE and
 * KV_STORE need every row of their input before they start: hand-offs where
 * all threads wait for the projection's last task. The epilogue adds in
 * float as ADD does (one rounding, the same on every ISA), uses the rope
 * kernel's tables and rotation of the same ISA and copies the same floats,
 * so a fused program computes the same bits as the unfused one. */
#include "kernels/linear.h"
#include "kernels/ops_internal.h"

#include <string.h>

static const lt__rope_ops *const rope_ops[LT_ISA_COUNT] = {
    [LT_ISA_PORTABLE] = &lt__rope_portable, [LT_ISA_AVX2] = LT_X86_ONLY(&lt__rope_avx2),
    [LT_ISA_AVX512] = LT_X86_ONLY(&lt__rope_avx512)};

void lt__mv_epilogue(const lt_call *call, const lt_step *step, int ith, int nth, lt_isa isa) {
    const int64_t per = lt__mv_task_rows(call);
    int64_t r0, r1;
    lt__linear_split(call->op[1]->ne[1], per, ith, nth, &r0, &r1);
    if (r0 >= r1) return;
    float *y = call->op[0]->data;
    const lt_step none = {0};
    if (!step) step = &none;
    const int64_t pos = lt_step_pos(step, 0);
    if (call->ia[2] & LT_MV_POST_BIAS) {
        const float *b = call->op[5]->data;
        for (int64_t r = r0; r < r1; r++) y[r] = y[r] + b[r];
    }
    if (call->ia[2] & LT_MV_POST_ROPE) {
        /* rows_per_task is even, so a thread's rows hold whole NORM pairs;
         * with NEOX, whole heads (lt__mv_task_rows) */
        LT_ASSERT(per % 2 == 0);
        const int64_t hd = call->ia[3];
        const bool neox = (call->ia[2] & LT_MV_POST_NEOX) != 0;
        const float *c, *s;
        lt__rope_tables(hd, call->fa[1], neox ? LT_ROPE_NEOX : LT_ROPE_NORM,
                        call->op[6] ? call->op[6]->data : NULL, pos, &c, &s);
        if (neox) {
            LT_ASSERT(r0 % hd == 0 && (r1 % hd == 0 || r1 == call->op[1]->ne[1]));
            for (int64_t r = r0; r < r1; r += hd) rope_ops[isa]->rotate_neox(y + r, c, s, hd);
        } else {
            for (int64_t r = r0; r < r1;) { /* the part of each head in [r0, r1) */
                const int64_t off = r % hd, end = r - off + hd < r1 ? r - off + hd : r1;
                rope_ops[isa]->rotate(y + r, c + off, s + off, end - r);
                r = end;
            }
        }
    }
    if (call->ia[2] & LT_MV_POST_STORE) {
        memcpy(lt__kv_row(call->op[4], step, 0) + r0, y + r0, (size_t)(r1 - r0) * sizeof(float));
    }
}
