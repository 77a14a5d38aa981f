/* A matvec's input prologue (MATVEC ia[1]): x' = rmsnorm(x, w) or
 * silu(x) * up, computed by each thread for itself before its rows. A
 * norm or gate that feeds only projections then needs no node of its own:
 * every thread has the whole input row anyway, so it normalises it without
 * waiting for another thread, where a separate node is a hand-off between
 * the threads (one runs it while the others wait for its result).
 *
 * The prologue uses the same primitives, in the same order, as the RMSNORM
 * and SWIGLU kernels of the same ISA, so a fused program computes the same
 * bits as the unfused one. The result is cached per thread under (call,
 * step->seq), as the quantised x is: a thread computes it once per node and
 * step however many of the node's tasks it runs. */
#include "kernels/linear.h"
#include "kernels/ops_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdalign.h>

typedef struct {
    const lt_call *call;
    uint64_t seq; /* 0: nothing cached */
    char *buf;
    size_t cap; /* bytes */
} pre_cache;

static _Thread_local pre_cache tl_pre;
static pthread_key_t pre_key; /* frees a thread's buffer at its exit */
static pthread_once_t pre_once = PTHREAD_ONCE_INIT;

static void pre_free(void *p) { lt_aligned_free(p); }
static void pre_make_key(void) { LT_ASSERT(pthread_key_create(&pre_key, pre_free) == 0); }

/* x' into out[cols] by the primitives of one ISA. */
static void prologue(const lt_call *call, const lt__norm_ops *nops, const lt__act_ops *aops,
                     float *out) {
    const float *x = call->op[2]->data, *b = call->op[3]->data;
    const int64_t d = call->op[2]->ne[0];
    if (call->ia[1] == LT_MV_PRE_RMSNORM) {
        const float r = 1.0f / sqrtf(nops->sumsq(x, d) / (float)d + call->fa[0]);
        nops->scale_mul(out, x, b, r, d);
    } else {
        aops->swiglu(out, x, b, d);
    }
}

static const lt__norm_ops *const norm_ops[LT_ISA_COUNT] = {
    [LT_ISA_PORTABLE] = &lt__norm_portable, [LT_ISA_AVX2] = LT_X86_ONLY(&lt__norm_avx2),
    [LT_ISA_AVX512] = LT_X86_ONLY(&lt__norm_avx512)};
static const lt__act_ops *const act_ops[LT_ISA_COUNT] = {
    [LT_ISA_PORTABLE] = &lt__act_portable, [LT_ISA_AVX2] = LT_X86_ONLY(&lt__act_avx2),
    [LT_ISA_AVX512] = LT_X86_ONLY(&lt__act_avx512)};

const float *lt__mv_input(const lt_call *call, const lt_step *step, lt_isa isa) {
    if (call->ia[1] == LT_MV_PRE_NONE) return call->op[2]->data;
    const size_t cols = (size_t)call->op[2]->ne[0];
    const uint64_t seq = step ? step->seq : 0;
    pre_cache *c = &tl_pre;
    if (seq != 0 && c->seq == seq && c->call == call) return (const float *)c->buf;
    if (!lt__tl_reserve(&c->buf, &c->cap, cols * sizeof(float), &pre_once, &pre_key,
                        pre_make_key)) {
        c->seq = 0;
        return NULL;
    }
    float *out = (float *)c->buf;
    prologue(call, norm_ops[isa], act_ops[isa], out);
    c->call = call;
    c->seq = seq;
    return out;
}

void lt__mv_input_oom(const lt_call *call, const lt_step *step, int ith, int nth, lt_isa isa,
                      lt__mv_entry_fn fn) {
    /* matvec_check bounds a fused call's columns to LT_MV_PRE_MAX_COLS */
    alignas(64) float spare[LT_MV_PRE_MAX_COLS];
    prologue(call, norm_ops[isa], act_ops[isa], spare);
    /* no seq: nothing may cache what this stack buffer holds */
    lt_step one = step ? *step : (lt_step){.n_tokens = 1};
    one.seq = 0;
    fn(call, &one, ith, nth, spare);
}
