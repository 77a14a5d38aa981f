/* The prologue-fusion pass: a one-row RMSNORM or SWIGLU whose result only
 * feeds matvecs (as their x) becomes those matvecs' input prologue
 * (MATVEC ia[1]) and leaves the program. Each thread of a matvec then
 * computes the normalised or gated row for itself from the producer's
 * inputs, so the hand-off at that node disappears: the consumers wait for
 * what the producer waited for, no longer for the producer.
 *
 * A producer fuses when, in the nodes after it up to the next write of its
 * output (or the end):
 *   - every reader of the output is a matvec reading it as x, exactly that
 *     buffer, with no prologue yet;
 *   - nothing writes the producer's inputs before its last reader (the
 *     readers recompute from them);
 * and when its output is a whole one-row activation (not a view, not state)
 * of at most LT_MV_PRE_MAX_COLS elements that it does not also read as the
 * second input, that no node reads before the program first writes it (a
 * value carried over from the previous step), and that is rewritten whole,
 * not through a view, where the readers end. Activations are the program's
 * scratch: the host reads only outputs that no norm or gate produces (a
 * model's logits). Knows nothing of Llama. */
#include <stdlib.h>
#include <string.h>

#include "program/program_internal.h"

/* Whether node i can fuse; its readers are marked in is_reader. */
static bool fusable(const lt_program *p, int i, bool *is_reader) {
    const lt__node *n = &p->nodes[i];
    if ((n->kernel != LT_K_RMSNORM && n->kernel != LT_K_SWIGLU) || n->n_ops != 3) return false;
    const int y = n->ops[0], a = n->ops[1], b = n->ops[2];
    if (y < 0 || a < 0 || b < 0 || p->bufs[y].kind != LT_BUF_ACT) return false;
    const lt_tensor *t = &p->bufs[y].t;
    if (t->dtype != LT_F32 || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1 ||
        t->ne[0] > LT_MV_PRE_MAX_COLS)
        return false;
    /* rmsnorm in place would need x after it was overwritten; swiglu may
     * overwrite its gate (the readers get the gate from the same buffer,
     * unchanged now), not its up input */
    if (lt__buf_root(p, b) == y || (n->kernel == LT_K_RMSNORM && lt__buf_root(p, a) == y))
        return false;
    const int ra = lt__buf_root(p, a), rb = lt__buf_root(p, b);
    /* y read before its first write: the previous step's value, which the
     * producer must go on leaving there */
    for (int j = 0; j < i; j++) {
        if (lt__node_reads(p, &p->nodes[j], y)) return false;
        if (lt__node_writes(p, &p->nodes[j], y)) break;
    }
    memset(is_reader, 0, (size_t)p->n_nodes * sizeof *is_reader);
    int readers = 0, last = i;
    for (int j = i + 1; j < p->n_nodes; j++) {
        const lt__node *m = &p->nodes[j];
        if (lt__node_reads(p, m, y)) {
            /* a matvec without a prologue (op3 unused), maybe with an epilogue */
            if (m->kernel != LT_K_MATVEC || m->n_ops < 3 || (m->n_ops > 3 && m->ops[3] >= 0) ||
                m->ops[2] != y || m->ia[1] != 0 || p->bufs[m->ops[0]].t.ne[1] != 1)
                return false; /* (a matvec of several tokens takes no prologue) */
            for (int o = 0; o < m->n_ops; o++) /* y as W, the output or a cache */
                if (o != 2 && m->ops[o] >= 0 && lt__buf_root(p, m->ops[o]) == y) return false;
            is_reader[j] = true;
            readers++;
            last = j;
        }
        if (lt__node_writes(p, m, y)) {
            /* only a whole rewrite ends the readers: after a partial one the
             * rest of y would still be the producer's */
            if (!lt__node_accesses(p, m, y, true, true)) return false;
            break;
        }
    }
    if (readers == 0) return false;
    /* the last reader too: one that writes x while it reads it would race */
    for (int j = i + 1; j <= last; j++)
        if (lt__node_writes(p, &p->nodes[j], ra) || lt__node_writes(p, &p->nodes[j], rb))
            return false;
    return true;
}

int lt_pass_fuse_prologues(lt_program *p) {
    if (p->finalized) return lt_error(LT_ESTATE, "program %s: fuse before finalize", p->name);
    if (p->n_loops) return lt_error(LT_ESTATE, "program %s: fuse before the looping pass", p->name);
    bool *is_reader = calloc((size_t)p->n_nodes + 1, sizeof *is_reader);
    if (!is_reader) return lt_error(LT_ENOMEM, "out of memory fusing prologues");
    int fused = 0;
    for (int i = 0; i < p->n_nodes;) {
        if (!fusable(p, i, is_reader)) {
            i++;
            continue;
        }
        const lt__node *n = &p->nodes[i];
        const int64_t pre = n->kernel == LT_K_RMSNORM ? LT_MV_PRE_RMSNORM : LT_MV_PRE_SWIGLU;
        for (int j = i + 1; j < p->n_nodes; j++) {
            if (!is_reader[j]) continue;
            lt__node *m = &p->nodes[j];
            m->ops[2] = n->ops[1];
            m->ops[3] = n->ops[2];
            if (m->n_ops < 4) m->n_ops = 4; /* an epilogue's cache stays op4 */
            m->ia[1] = pre;
            m->fa[0] = n->kernel == LT_K_RMSNORM ? n->fa[0] : 0.0f;
        }
        lt__node_remove(p, i);
        fused++;
    }
    free(is_reader);
    return fused;
}
