/* Human-readable listing of a program (`looptune run --dump-program`). */
#include <inttypes.h>
#include <string.h>

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

/* One node: kernel, label, operands (a loop's bound operands as <slot>),
 * attributes and parameters. */
static void print_node(FILE *f, const lt_program *p, int i, const char *indent, const lt__loop *L) {
    const lt__node *n = &p->nodes[i];
    const lt_kernel *k = lt_kernel_get(n->kernel);
    fprintf(f, "%s#%-4d %-10s %-22s", indent, i, k->name, n->label);
    int j = L ? (i - L->first) % L->body_len : 0;
    for (int o = 0; o < n->n_ops; o++) {
        int slot = -1;
        for (int s = 0; L && s < L->n_slots; s++)
            if (L->slot[s][0] == j && L->slot[s][1] == o) slot = s;
        if (slot >= 0) fprintf(f, " <bind%d>", slot);
        else if (n->ops[o] < 0) fprintf(f, " -");
        else fprintf(f, " %s", p->bufs[n->ops[o]].name);
    }
    int nia = 4;
    while (nia > 0 && n->ia[nia - 1] == 0) nia--;
    for (int a = 0; a < nia; a++) fprintf(f, "%s%" PRId64, a ? "," : " ia=", n->ia[a]);
    int nfa = 4;
    while (nfa > 0 && n->fa[nfa - 1] == 0) nfa--;
    for (int a = 0; a < nfa; a++) fprintf(f, "%s%g", a ? "," : " fa=", (double)n->fa[a]);
    if (n->kernel == LT_K_MATVEC && n->ia[1] != LT_MV_PRE_NONE)
        fprintf(f, " (x = %s)", n->ia[1] == LT_MV_PRE_RMSNORM ? "rmsnorm(x, op3)" : "silu(x) * op3");
    if (n->kernel == LT_K_MATVEC && (n->ia[2] & LT_MV_POST_BIAS))
        fprintf(f, " (then y += op5)");
    if (n->kernel == LT_K_MATVEC && (n->ia[2] & LT_MV_POST_ROPE))
        fprintf(f, " (then rope%s%s)", (n->ia[2] & LT_MV_POST_NEOX) ? " neox" : "",
                n->n_ops > 6 && n->ops[6] >= 0 ? " / op6" : "");
    if (n->kernel == LT_K_MATVEC && (n->ia[2] & LT_MV_POST_STORE))
        fprintf(f, " (then y -> op4[pos])");
    for (int a = 0; a < k->n_params; a++)
        fprintf(f, "%s%s=%d", a ? "," : " {", k->params[a].name, n->params.v[a]);
    if (k->n_params) fputc('}', f);
    fputc('\n', f);
}

void lt_program_print(const lt_program *p, FILE *f) {
    fprintf(f, "program %s: %d buffers, %d nodes, %d loops\n", p->name, p->n_bufs, p->n_nodes,
            p->n_loops);
    for (int i = 0; i < p->n_bufs; i++) {
        const lt__buffer *b = &p->bufs[i];
        fprintf(f, "  %%%d %-6s %-24s ", i, kind_name(b->kind), b->name);
        print_shape(f, &b->t);
        if (b->kind == LT_BUF_VIEW) fprintf(f, " = %%%d + %zu", b->parent, b->offset);
        fputc('\n', f);
    }
    int li = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const lt__loop *L = li < p->n_loops && p->loops[li].first == i ? &p->loops[li] : NULL;
        if (!L) {
            print_node(f, p, i, "  ", NULL);
            continue;
        }
        fprintf(f, "  LOOP x%d  body of %d nodes, %d bindings per iteration\n", L->n_iter,
                L->body_len, L->n_slots);
        for (int j = 0; j < L->body_len; j++) print_node(f, p, i + j, "    | ", L);
        for (int s = 0; s < L->n_slots; s++) {
            const char *b0 = p->bufs[L->bind[s]].name;
            const char *bn = p->bufs[L->bind[(L->n_iter - 1) * L->n_slots + s]].name;
            fprintf(f, "    bind%d = %s .. %s", s, b0, bn);
            if (L->stride[s]) fprintf(f, " (stride %" PRId64 " bytes)", L->stride[s]);
            fputc('\n', f);
        }
        i += L->n_iter * L->body_len - 1;
        li++;
    }
}
