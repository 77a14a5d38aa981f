/* Human-readable listing of a program (`looptune run --dump-program`). */
#include <inttypes.h>

#include "program/program_internal.h"

static const char *kind_name(lt_buf_kind k) {
    static const char *const names[] = {[LT_BUF_ACT] = "act", [LT_BUF_WEIGHT] = "weight",
                                        [LT_BUF_STATE] = "state", [LT_BUF_VIEW] = "view"};
    return names[k];
}

static void print_shape(FILE *f, const lt_tensor *t) {
    fprintf(f, "%s[%" PRId64, lt_dtype_name(t->dtype), t->ne[0]);
    for (int d = 1; d < 4 && (t->ne[d] > 1 || (d == 1 && t->ne[2] > 1)); d++)
        fprintf(f, "x%" PRId64, t->ne[d]);
    fputc(']', f);
}

void lt_program_print(const lt_program *p, FILE *f) {
    fprintf(f, "program %s: %d buffers, %d nodes\n", p->name, p->n_bufs, p->n_nodes);
    for (int i = 0; i < p->n_bufs; i++) {
        const lt__buffer *b = &p->bufs[i];
        fprintf(f, "  %%%d %-6s %-24s ", i, kind_name(b->kind), b->name);
        print_shape(f, &b->t);
        if (b->kind == LT_BUF_VIEW) fprintf(f, " = %%%d + %zu", b->parent, b->offset);
        fputc('\n', f);
    }
    for (int i = 0; i < p->n_nodes; i++) {
        const lt__node *n = &p->nodes[i];
        const lt_kernel *k = lt_kernel_get(n->kernel);
        fprintf(f, "  #%-4d %-10s %-22s", i, k->name, n->label);
        for (int j = 0; j < n->n_ops; j++) {
            if (n->ops[j] < 0) fprintf(f, " -");
            else fprintf(f, " %s", p->bufs[n->ops[j]].name);
        }
        int nia = 4;
        while (nia > 0 && n->ia[nia - 1] == 0) nia--;
        for (int j = 0; j < nia; j++) fprintf(f, "%s%" PRId64, j ? "," : " ia=", n->ia[j]);
        int nfa = 4;
        while (nfa > 0 && n->fa[nfa - 1] == 0) nfa--;
        for (int j = 0; j < nfa; j++) fprintf(f, "%s%g", j ? "," : " fa=", (double)n->fa[j]);
        for (int j = 0; j < k->n_params; j++)
            fprintf(f, "%s%s=%d", j ? "," : " {", k->params[j].name, n->params.v[j]);
        if (k->n_params) fputc('}', f);
        fputc('\n', f);
    }
}
