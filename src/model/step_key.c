/* Keys of a model's whole steps: what the looped executor's parameters and
 * each regime's thread count are tuned and stored under. The architecture
 * leads ("llama:...", "qwen2:..."): a qwen2 step does more work than a
 * llama step of the same widths. */
#include <stdio.h>

#include "looptune/model.h"

size_t lt_step_shape_format(const lt_model *m, int nth, lt_regime r, char *buf, size_t n) {
    return (size_t)snprintf(buf, n, "%s:d%lld:h%lld:l%lld:%s:t%d:%s",
                            lt_arch_name(m->cfg.arch), (long long)m->cfg.dim, (long long)m->cfg.hidden_dim,
                            (long long)m->cfg.n_layers, lt_dtype_name(m->wtype), nth,
                            lt_regime_name(r));
}

size_t lt_exec_shape_format(const lt_model *m, int nth, char *buf, size_t n) {
    return lt_step_shape_format(m, nth, LT_REGIME_DECODE, buf, n);
}
