/* The epilogue-fusion pass: a one-row ADD of a bias to a matvec's output
 * becomes that matvec's bias epilogue, a one-row ROPE whose q (and k) are
 * matvec outputs becomes those matvecs' rope epilogue, and a KV_STORE of a
 * matvec's output becomes its store epilogue (MATVEC ia[2]); the ADD, ROPE
 * and KV_STORE nodes leave the program. The thread that computes a
 * projection's rows then adds, rotates and stores them at once, so the
 * hand-offs at the bias, the rope and the cache store disappear: attention
 * waits for the projections only.
 *
 * An ADD y = y + b of a weight b (a bias) fuses when y (exactly, not
 * through a view) was last written by a matvec without an epilogue, no node
 * between reads y, and nothing between them writes b. A ROPE fuses when each buffer
 * it rotates was last written, exactly, by a matvec without a rope or store
 * (a bias comes first in the epilogue, as in the program) whose rows are
 * whole heads, and no node between that matvec and the ROPE reads the buffer
 * (it would see rotated values); its mode and factors go along. A KV_STORE
 * fuses when its source was last written exactly by a matvec without a
 * store, the cache has that matvec's row width, and neither that matvec nor
 * a node between it and the store touches the cache (the cache row is
 * written earlier than it was). The passes may run in either order (the
 * prologue pass fuses into matvecs that carry an epilogue); knows nothing
 * of Llama. */
#include <string.h>

#include "program/program_internal.h"

/* The matvec that last wrote buffer b (exactly b) before node i, with none
 * of the epilogue bits `taken` and, if alone, no reader of b in between, or
 * -1. */
static int producer(const lt_program *p, int i, int b, int64_t taken, bool alone) {
    const int r = lt__buf_root(p, b);
    for (int j = i - 1; j >= 0; j--) {
        const lt__node *m = &p->nodes[j];
        if (lt__node_writes(p, m, r)) {
            /* (a matvec of several tokens takes no epilogue) */
            if (m->kernel != LT_K_MATVEC || m->ops[0] != b || (m->ia[2] & taken) ||
                p->bufs[b].t.ne[1] != 1)
                return -1;
            for (int o = 1; o < m->n_ops; o++) /* b as its own W, x or norm weight */
                if (m->ops[o] >= 0 && lt__buf_root(p, m->ops[o]) == r) return -1;
            return j;
        }
        if (alone && lt__node_reads(p, m, r)) return -1;
    }
    return -1;
}

static int64_t rows_of(const lt_program *p, int b) { return p->bufs[b].t.ne[0]; }

/* Operand o of matvec m set to buffer b, the unused ones before it -1. */
static void set_op(lt__node *m, int o, int b) {
    for (int k = m->n_ops; k < o; k++) m->ops[k] = -1;
    m->ops[o] = b;
    if (m->n_ops <= o) m->n_ops = o + 1;
}

static bool fuse_bias(lt_program *p, int i) {
    const lt__node *n = &p->nodes[i];
    const int y = n->ops[0], b = n->ops[2];
    if (n->n_ops != 3 || y < 0 || n->ops[1] != y || b < 0) return false;
    if (p->bufs[y].t.ne[1] != 1 || p->bufs[b].t.ne[1] != 1) return false;
    const int64_t all = LT_MV_POST_BIAS | LT_MV_POST_ROPE | LT_MV_POST_STORE | LT_MV_POST_NEOX;
    const int j = producer(p, i, y, all, true);
    if (j < 0 || rows_of(p, b) != rows_of(p, y)) return false;
    const int rb = lt__buf_root(p, b);
    if (rb == lt__buf_root(p, y) || p->bufs[rb].kind != LT_BUF_WEIGHT) return false;
    for (int k = j; k < i; k++)
        if (lt__node_writes(p, &p->nodes[k], rb)) return false;
    lt__node *m = &p->nodes[j];
    set_op(m, 5, b);
    m->ia[2] |= LT_MV_POST_BIAS;
    return true;
}

static bool fuse_rope(lt_program *p, int i) {
    const lt__node *n = &p->nodes[i];
    const int64_t hd = n->ia[0];
    /* the factors (a weight) are read when the matvec runs, earlier than the
     * ROPE read them: nothing between may write them */
    const int factors = n->n_ops > 2 ? n->ops[2] : -1;
    /* q and k in one buffer: ROPE refuses it at finalize, so it stays */
    if (n->ops[1] >= 0 && lt__buf_root(p, n->ops[0]) == lt__buf_root(p, n->ops[1])) return false;
    int prod[2] = {-1, -1};
    for (int o = 0; o < 2; o++) {
        const int b = n->ops[o];
        if (b < 0) {
            if (o == 0) return false;
            continue;
        }
        if (hd < 2 || hd % 2 || rows_of(p, b) % hd) return false;
        /* a store before a rotation would have stored the rows unrotated */
        if ((prod[o] = producer(p, i, b, LT_MV_POST_ROPE | LT_MV_POST_STORE, true)) < 0)
            return false;
        if (factors >= 0) {
            const int rf = lt__buf_root(p, factors);
            if (rf == lt__buf_root(p, b)) return false;
            for (int k = prod[o]; k < i; k++)
                if (lt__node_writes(p, &p->nodes[k], rf)) return false;
        }
    }
    for (int o = 0; o < 2; o++) {
        if (prod[o] < 0) continue;
        lt__node *m = &p->nodes[prod[o]];
        m->ia[2] |= LT_MV_POST_ROPE | (n->ia[1] == LT_ROPE_NEOX ? LT_MV_POST_NEOX : 0);
        m->ia[3] = hd;
        m->fa[1] = n->fa[0];
        if (factors >= 0) set_op(m, 6, factors);
    }
    return true;
}

static bool fuse_store(lt_program *p, int i) {
    const lt__node *n = &p->nodes[i];
    const int cache = n->ops[0], src = n->ops[1];
    if (cache < 0 || src < 0 || n->n_ops != 2) return false;
    const int j = producer(p, i, src, LT_MV_POST_STORE, false);
    if (j < 0 || (p->nodes[j].n_ops > 4 && p->nodes[j].ops[4] >= 0) ||
        rows_of(p, cache) != rows_of(p, src))
        return false;
    const int rc = lt__buf_root(p, cache);
    for (int k = j; k < i; k++) {
        const lt__node *m = &p->nodes[k];
        if (lt__node_reads(p, m, rc) || lt__node_writes(p, m, rc)) return false;
    }
    lt__node *m = &p->nodes[j];
    set_op(m, 4, cache);
    m->ia[2] |= LT_MV_POST_STORE;
    return true;
}

int lt_pass_fuse_epilogues(lt_program *p) {
    if (p->finalized) return lt_error(LT_ESTATE, "program %s: fuse before finalize", p->name);
    if (p->n_loops) return lt_error(LT_ESTATE, "program %s: fuse before the looping pass", p->name);
    int fused = 0;
    /* biases, then ropes: the epilogue's order is the program's; a store then
     * copies the rotated rows, as it did after the ROPE */
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < p->n_nodes;) {
            const lt__node *n = &p->nodes[i];
            bool ok = pass == 0   ? n->kernel == LT_K_ADD && fuse_bias(p, i)
                      : pass == 1 ? n->kernel == LT_K_ROPE && fuse_rope(p, i)
                                  : n->kernel == LT_K_KV_STORE && fuse_store(p, i);
            if (!ok) {
                i++;
                continue;
            }
            lt__node_remove(p, i);
            fused++;
        }
    return fused;
}
