/* The kernel registry: one descriptor per kernel family, indexed by id;
 * parameter validation shared by every kernel. */
#include "looptune/kernels.h"

#include <string.h>

extern const lt_kernel lt__k_matvec, lt__k_matmul, lt__k_rmsnorm, lt__k_rope, lt__k_kv_store,
    lt__k_attention, lt__k_softmax, lt__k_swiglu, lt__k_add, lt__k_embed;

static const lt_kernel *const lt__kernels[] = {
    [LT_K_MATVEC] = &lt__k_matvec,   [LT_K_MATMUL] = &lt__k_matmul,
    [LT_K_RMSNORM] = &lt__k_rmsnorm, [LT_K_ROPE] = &lt__k_rope,
    [LT_K_KV_STORE] = &lt__k_kv_store, [LT_K_ATTENTION] = &lt__k_attention,
    [LT_K_SOFTMAX] = &lt__k_softmax, [LT_K_SWIGLU] = &lt__k_swiglu,
    [LT_K_ADD] = &lt__k_add,         [LT_K_EMBED] = &lt__k_embed,
};
_Static_assert(sizeof lt__kernels / sizeof lt__kernels[0] == LT_KERNEL_COUNT, "kernel table");

const lt_kernel *lt_kernel_get(lt_kernel_id id) {
    LT_ASSERT((unsigned)id < LT_KERNEL_COUNT);
    return lt__kernels[id];
}

const lt_kernel *lt_kernel_find(const char *name) {
    for (int i = 0; i < LT_KERNEL_COUNT; i++)
        if (strcmp(lt__kernels[i]->name, name) == 0) return lt__kernels[i];
    return NULL;
}

lt_kernel_fn lt_kernel_fn_for(const lt_kernel *k, lt_isa isa) {
    for (int i = (int)isa; i >= 0; i--)
        if (k->run[i]) return k->run[i];
    LT_ASSERT(!"kernel without portable path");
    return NULL;
}

int lt_kernel_param_index(const lt_kernel *k, const char *name) {
    for (int i = 0; i < k->n_params; i++)
        if (strcmp(k->params[i].name, name) == 0) return i;
    return -1;
}

void lt_params_default(const lt_kernel *k, lt_params *p) {
    memset(p, 0, sizeof *p);
    const lt_isa isa = lt_isa_active();
    for (int i = 0; i < k->n_params; i++) p->v[i] = lt_param_default(&k->params[i], isa);
}

int lt_param_defs_validate(const char *owner, const lt_param_def *defs, int n,
                           const lt_params *p) {
    for (int i = 0; i < n; i++) {
        const lt_param_def *d = &defs[i];
        bool ok = false;
        for (int j = 0; j < d->n_values && !ok; j++) ok = d->values[j] == p->v[i];
        if (!ok)
            return lt_error(LT_ECONFIG, "%s: parameter %s=%d is not an allowed value", owner,
                            d->name, p->v[i]);
    }
    return LT_OK;
}

int lt_params_validate(const lt_kernel *k, const lt_params *p) {
    return lt_param_defs_validate(k->name, k->params, k->n_params, p);
}

int lt_call_check(lt_kernel_id id, const lt_call *call) {
    const lt_kernel *k = lt_kernel_get(id);
    int rc = lt_params_validate(k, &call->params);
    if (rc != LT_OK) return rc;
    return k->check ? k->check(call) : LT_OK;
}

static bool matvec_stores(lt_kernel_id id, const lt_call *call, int op) {
    return id == LT_K_MATVEC && op == 4 && (call->ia[2] & LT_MV_POST_STORE);
}

bool lt_kernel_writes(lt_kernel_id id, const lt_call *call, int op) {
    return op == 0 || (id == LT_K_ROPE && op == 1) || (id == LT_K_ATTENTION && op == 4) ||
           matvec_stores(id, call, op);
}

bool lt_kernel_reads(lt_kernel_id id, const lt_call *call, int op) {
    if (op > 0) return (id != LT_K_ATTENTION || op != 4) && !matvec_stores(id, call, op);
    switch (id) {
    case LT_K_MATVEC:
    case LT_K_MATMUL: return call->ia[0] != 0; /* accumulate */
    case LT_K_ROPE:
    case LT_K_SOFTMAX: return true; /* in place */
    default: return false;
    }
}
