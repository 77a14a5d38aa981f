/* The epilogue-fusion pass: a one-row ROPE whose q (and k) are matvec outputs
 * becomes those matvecs' rope epilogue, and a KV_STORE of a matvec's output
 * becomes its store epilogue (MATVEC ia[2]); the ROPE and KV_STORE nodes
 * leave the program. The thread that computes a projection's rows then
 * rotates and stores them at once, so the hand-offs at the rope and at the
 * cache store disappear: attention waits for the projections only.
 *
 * A ROPE fuses when each buffer it rotates was last written, exactly (not
 * through a view), by a matvec without an epilogue whose rows are whole
 * heads, and no node between that matvec and the ROPE reads the buffer (it
 * would see rotated values). A KV_STORE fuses when its source was last
 * written exactly by a matvec without a store, the cache has that matvec's
 * row width, and neither that matvec nor a node between it and the store
 * touches the cache (the cache row is written earlier than it was). Either
 * pass may run first (the prologue pass fuses into matvecs that carry an
 * epilogue); knows nothing of Llama. */
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
            if (m->kernel != LT_K_MATVEC || m->ops[0] != b || (m->ia[2] & taken)) return -1;
            for (int o = 1; o < m->n_ops; o++) /* b as its own W, x or norm weight */
                if (m->ops[o] >= 0 && lt__buf_root(p, m->ops[o]) == r) return -1;
            return j;
        }
        if (alone && lt__node_reads(p, m, r)) return -1;
    }
    return -1;
}

static int64_t rows_of(const lt_program *p, int b) { return p->bufs[b].t.ne[0]; }

static bool fuse_rope(lt_program *p, int i) {
    const lt__node *n = &p->nodes[i];
    const int64_t hd = n->ia[0];
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
    }
    for (int o = 0; o < 2; o++) {
        if (prod[o] < 0) continue;
        lt__node *m = &p->nodes[prod[o]];
        m->ia[2] |= LT_MV_POST_ROPE;
        m->ia[3] = hd;
        m->fa[1] = n->fa[0];
    }
    return true;
}

static bool fuse_store(lt_program *p, int i) {
    const lt__node *n = &p->nodes[i];
    const int cache = n->ops[0], src = n->ops[1];
    if (cache < 0 || src < 0 || n->n_ops != 2) return false;
    const int j = producer(p, i, src, LT_MV_POST_STORE, false);
    if (j < 0 || p->nodes[j].n_ops > 4 || rows_of(p, cache) != rows_of(p, src)) return false;
    const int rc = lt__buf_root(p, cache);
    for (int k = j; k < i; k++) {
        const lt__node *m = &p->nodes[k];
        if (lt__node_reads(p, m, rc) || lt__node_writes(p, m, rc)) return false;
    }
    lt__node *m = &p->nodes[j];
    for (int o = m->n_ops; o < 4; o++) m->ops[o] = -1;
    m->ops[4] = cache;
    m->n_ops = 5;
    m->ia[2] |= LT_MV_POST_STORE;
    return true;
}

int lt_pass_fuse_epilogues(lt_program *p) {
    if (p->finalized) return lt_error(LT_ESTATE, "program %s: fuse before finalize", p->name);
    if (p->n_loops) return lt_error(LT_ESTATE, "program %s: fuse before the looping pass", p->name);
    int fused = 0;
    /* ropes first: a store then copies the rotated rows, as it did after the ROPE */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < p->n_nodes;) {
            const lt__node *n = &p->nodes[i];
            bool ok = pass == 0 ? n->kernel == LT_K_ROPE && fuse_rope(p, i)
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
