/* How telemetry names a node: its key ("q8_0:2048x768:decode", the one the
 * config store and controls use) and a descriptor with label, kernel and the
 * parameter values in force, built once per run so records point at stable
 * strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry/tel_internal.h"

/* A node's key (lt_call_key), the config store's and the controls'. */
static size_t node_key(const lt_program *p, int node, char *buf, size_t n) {
    lt_node_info info;
    lt_program_node(p, node, &info);
    return lt_call_key(info.kernel, lt_program_call(p, node), buf, n);
}

int lt__tel_nodes_init(lt__tel_nodes *d, const lt_program *p) {
    memset(d, 0, sizeof *d);
    int n = lt_program_n_nodes(p);
    /* sizes first, then one block for every string */
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        lt_node_info info;
        lt_program_node(p, i, &info);
        total += strlen(info.label ? info.label : "") + 1 + node_key(p, i, NULL, 0) + 1;
    }
    d->nodes = calloc(n ? (size_t)n : 1, sizeof *d->nodes);
    d->kernels = calloc(n ? (size_t)n : 1, sizeof *d->kernels);
    d->strings = malloc(total ? total : 1);
    if (!d->nodes || !d->kernels || !d->strings) {
        lt__tel_nodes_free(d);
        return lt_error(LT_ENOMEM, "telemetry: out of memory describing %d nodes", n);
    }
    char *s = d->strings;
    for (int i = 0; i < n; i++) {
        lt_node_info info;
        lt_program_node(p, i, &info);
        const lt_kernel *k = lt_kernel_get(info.kernel);
        lt_tel_node_desc *nd = &d->nodes[i];
        nd->node = i;
        size_t ll = strlen(info.label ? info.label : "");
        memcpy(s, info.label ? info.label : "", ll + 1);
        nd->label = s;
        s += ll + 1;
        size_t sl = node_key(p, i, s, (size_t)(d->strings + total - s));
        nd->shape = s;
        s += sl + 1;
        nd->kernel = k->name;
        /* a parameter that does nothing on this ISA or in this call's
         * regime is not reported */
        lt_shape sh;
        lt_shape_of_call(info.kernel, lt_program_call(p, i), &sh);
        nd->n_params = 0;
        for (int j = 0; j < k->n_params; j++) {
            if (!lt_param_applies(&k->params[j], lt_isa_active()) ||
                !lt_param_acts_in(&k->params[j], sh.regime))
                continue;
            lt_tel_param *tp = &nd->params[nd->n_params++];
            tp->name = k->params[j].name;
            tp->value = info.params.v[j];
            tp->index = j;
        }
        d->kernels[i] = info.kernel;
    }
    d->n = n;
    return LT_OK;
}

void lt__tel_nodes_free(lt__tel_nodes *d) {
    free(d->nodes);
    free(d->kernels);
    free(d->strings);
    memset(d, 0, sizeof *d);
}
