/* The program IR: buffers and kernel-call nodes, built incrementally, then
 * finalised (activations allocated, operands resolved, every call checked). */
#include "looptune/program.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "program/program_internal.h"

/* Program ids: relaxed suffices, only uniqueness matters. */
static _Atomic uint64_t program_ids;

int lt_program_init(lt_program **out, const char *name) {
    lt_program *p = calloc(1, sizeof *p);
    if (!p) return lt_error(LT_ENOMEM, "out of memory creating program");
    snprintf(p->name, sizeof p->name, "%s", name ? name : "program");
    p->id = atomic_fetch_add_explicit(&program_ids, 1, memory_order_relaxed) + 1;
    *out = p;
    return LT_OK;
}

void lt_program_free(lt_program *p) {
    if (!p) return;
    for (int i = 0; i < p->n_bufs; i++) free(p->bufs[i].name);
    for (int i = 0; i < p->n_nodes; i++) free(p->nodes[i].label);
    for (int i = 0; i < p->n_loops; i++) {
        free(p->loops[i].slot);
        free(p->loops[i].bind);
        free(p->loops[i].stride);
    }
    free(p->loops);
    lt_aligned_free(p->arena);
    free(p->bufs);
    free(p->nodes);
    free(p);
}

static int grow(void **arr, int *cap, int n, size_t elem) {
    if (n < *cap) return LT_OK;
    int ncap = *cap ? *cap * 2 : 32;
    void *na = realloc(*arr, (size_t)ncap * elem);
    if (!na) return lt_error(LT_ENOMEM, "out of memory growing program");
    memset((char *)na + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *arr = na;
    *cap = ncap;
    return LT_OK;
}

static int add_buffer(lt_program *p, const char *name, lt_buf_kind kind, const lt_tensor *t,
                      int parent, size_t offset) {
    if (p->finalized) return lt_error(LT_ESTATE, "program %s: add after finalize", p->name);
    if (lt_program_find_buffer(p, name) >= 0)
        return lt_error(LT_EINVAL, "program %s: duplicate buffer name %s", p->name, name);
    int rc = grow((void **)&p->bufs, &p->cap_bufs, p->n_bufs, sizeof *p->bufs);
    if (rc) return rc;
    lt__buffer *b = &p->bufs[p->n_bufs];
    b->name = strdup(name);
    if (!b->name) return lt_error(LT_ENOMEM, "out of memory");
    b->kind = kind;
    b->t = *t;
    b->parent = parent;
    b->offset = offset;
    return p->n_bufs++;
}

int lt_program_add_buffer(lt_program *p, const char *name, lt_buf_kind kind, const lt_tensor *t) {
    if (kind == LT_BUF_VIEW) return lt_error(LT_EINVAL, "use lt_program_add_view for views");
    if (kind == LT_BUF_ACT && t->data)
        return lt_error(LT_EINVAL, "buffer %s: activations are allocated by the program", name);
    if (kind != LT_BUF_ACT && !t->data)
        return lt_error(LT_EINVAL, "buffer %s: external buffer without data", name);
    return add_buffer(p, name, kind, t, -1, 0);
}

int lt_program_add_view(lt_program *p, const char *name, int parent, size_t offset,
                        const lt_tensor *t) {
    if (parent < 0 || parent >= p->n_bufs)
        return lt_error(LT_EINVAL, "view %s: no parent buffer %d", name, parent);
    const lt_tensor *pt = &p->bufs[parent].t;
    if (offset + lt_tensor_nbytes(t) > lt_tensor_nbytes(pt) || t->dtype != pt->dtype)
        return lt_error(LT_EINVAL, "view %s does not fit inside %s", name, p->bufs[parent].name);
    lt_tensor v = *t;
    v.data = NULL;
    return add_buffer(p, name, LT_BUF_VIEW, &v, parent, offset);
}

int lt_program_add_node(lt_program *p, lt_kernel_id id, const int *ops, int n_ops,
                        const int64_t ia[4], const float fa[4], const char *label) {
    if (p->finalized) return lt_error(LT_ESTATE, "program %s: add after finalize", p->name);
    if ((unsigned)id >= LT_KERNEL_COUNT) return lt_error(LT_EINVAL, "unknown kernel id %d", id);
    if (n_ops < 1 || n_ops > LT_MAX_OPERANDS)
        return lt_error(LT_EINVAL, "node %s: %d operands", label ? label : "?", n_ops);
    int rc = grow((void **)&p->nodes, &p->cap_nodes, p->n_nodes, sizeof *p->nodes);
    if (rc) return rc;
    lt__node *n = &p->nodes[p->n_nodes];
    n->kernel = id;
    for (int i = 0; i < LT_MAX_OPERANDS; i++) n->ops[i] = i < n_ops ? ops[i] : -1;
    for (int i = 0; i < n_ops; i++)
        if (ops[i] < -1 || ops[i] >= p->n_bufs)
            return lt_error(LT_EINVAL, "node %s: operand %d is not a buffer", label, i);
    n->n_ops = n_ops;
    if (ia) memcpy(n->ia, ia, sizeof n->ia);
    if (fa) memcpy(n->fa, fa, sizeof n->fa);
    lt_params_default(lt_kernel_get(id), &n->params);
    n->label = strdup(label ? label : lt_kernel_get(id)->name);
    if (!n->label) return lt_error(LT_ENOMEM, "out of memory");
    return p->n_nodes++;
}

int lt__buf_root(const lt_program *p, int b) {
    while (b >= 0 && p->bufs[b].kind == LT_BUF_VIEW) b = p->bufs[b].parent;
    return b;
}

bool lt__node_accesses(const lt_program *p, const lt__node *n, int r, bool write, bool exact) {
    lt_call c = {0}; /* what a kernel reads or writes depends only on its attributes */
    memcpy(c.ia, n->ia, sizeof c.ia);
    for (int o = 0; o < n->n_ops; o++)
        if (n->ops[o] >= 0 && (exact ? n->ops[o] : lt__buf_root(p, n->ops[o])) == r &&
            (write ? lt_kernel_writes(n->kernel, &c, o) : lt_kernel_reads(n->kernel, &c, o)))
            return true;
    return false;
}

void lt__node_remove(lt_program *p, int i) {
    free(p->nodes[i].label);
    memmove(&p->nodes[i], &p->nodes[i + 1], (size_t)(p->n_nodes - i - 1) * sizeof *p->nodes);
    p->n_nodes--;
}

int lt_program_set_params(lt_program *p, int node, const lt_params *params) {
    if (node < 0 || node >= p->n_nodes) return lt_error(LT_EINVAL, "no node %d", node);
    lt__node *n = &p->nodes[node];
    lt_call trial = n->call;
    trial.params = *params;
    int rc = p->finalized ? lt_call_check(n->kernel, &trial)
                          : lt_params_validate(lt_kernel_get(n->kernel), params);
    if (rc) return rc;
    /* a node inside a LOOP shares its parameters with the same body node of
     * every iteration: the iterations stay structurally identical */
    int first = node, step = 1, count = 1;
    for (int i = 0; i < p->n_loops; i++) {
        const lt__loop *L = &p->loops[i];
        if (node >= L->first && node < L->first + L->n_iter * L->body_len) {
            first = L->first + (node - L->first) % L->body_len;
            step = L->body_len;
            count = L->n_iter;
        }
    }
    /* how the node divides into tasks follows the kernel's pieces: what an
     * executor derived from the old ones is out of date */
    const lt_kernel *k = lt_kernel_get(n->kernel);
    if (p->finalized && k->units && k->units(&n->call) != k->units(&trial)) p->structure_gen++;
    for (int it = 0; it < count; it++) {
        lt__node *m = &p->nodes[first + it * step];
        m->params = *params;
        m->call.params = *params;
    }
    return LT_OK;
}

int lt_program_set_node_flags(lt_program *p, int node, uint32_t flags) {
    if (p->finalized) return lt_error(LT_ESTATE, "program %s is finalized", p->name);
    if (node < 0 || node >= p->n_nodes) return lt_error(LT_EINVAL, "no node %d", node);
    if (flags & ~LT_CALL_BATCH)
        return lt_error(LT_EINVAL, "node %d: unknown call flags 0x%x", node, (unsigned)flags);
    p->nodes[node].flags = flags;
    return LT_OK;
}

static void resolve_call(lt_program *p, lt__node *n) {
    memset(&n->call, 0, sizeof n->call);
    for (int i = 0; i < n->n_ops; i++) n->call.op[i] = n->ops[i] >= 0 ? &p->bufs[n->ops[i]].t : NULL;
    memcpy(n->call.ia, n->ia, sizeof n->ia);
    memcpy(n->call.fa, n->fa, sizeof n->fa);
    n->call.params = n->params;
    n->call.flags = n->flags;
}

int lt_program_finalize(lt_program *p) {
    if (p->finalized) return LT_OK;
    /* one arena for all activations, each 64-byte aligned */
    size_t total = 0;
    for (int i = 0; i < p->n_bufs; i++)
        if (p->bufs[i].kind == LT_BUF_ACT)
            total += (lt_tensor_nbytes(&p->bufs[i].t) + LT_CACHE_LINE - 1) & ~(size_t)(LT_CACHE_LINE - 1);
    p->arena = lt_aligned_alloc(LT_CACHE_LINE, total ? total : LT_CACHE_LINE);
    if (!p->arena) return lt_error(LT_ENOMEM, "program %s: cannot allocate %zu bytes", p->name, total);
    size_t off = 0;
    for (int i = 0; i < p->n_bufs; i++) {
        lt__buffer *b = &p->bufs[i];
        if (b->kind == LT_BUF_ACT) {
            b->t.data = (char *)p->arena + off;
            off += (lt_tensor_nbytes(&b->t) + LT_CACHE_LINE - 1) & ~(size_t)(LT_CACHE_LINE - 1);
        } else if (b->kind == LT_BUF_VIEW) {
            /* parents precede views, so the parent is already resolved */
            b->t.data = (char *)p->bufs[b->parent].t.data + b->offset;
        }
    }
    lt_isa isa = lt_isa_active();
    for (int i = 0; i < p->n_nodes; i++) {
        lt__node *n = &p->nodes[i];
        resolve_call(p, n);
        int rc = lt_call_check(n->kernel, &n->call);
        if (rc) return lt_error(rc, "program %s: node %d (%s): %s", p->name, i, n->label, lt_errmsg());
        n->fn = lt_kernel_fn_for(lt_kernel_get(n->kernel), isa);
    }
    p->finalized = true;
    return LT_OK;
}

int lt_program_n_nodes(const lt_program *p) { return p->n_nodes; }
int lt_program_n_buffers(const lt_program *p) { return p->n_bufs; }
const char *lt_program_name(const lt_program *p) { return p->name; }

lt_tensor *lt_program_buffer(lt_program *p, int id) {
    LT_ASSERT(id >= 0 && id < p->n_bufs);
    return &p->bufs[id].t;
}

int lt_program_find_buffer(const lt_program *p, const char *name) {
    for (int i = 0; i < p->n_bufs; i++)
        if (strcmp(p->bufs[i].name, name) == 0) return i;
    return -1;
}

const char *lt_program_buffer_name(const lt_program *p, int id) {
    LT_ASSERT(id >= 0 && id < p->n_bufs);
    return p->bufs[id].name;
}

lt_buf_kind lt_program_buffer_kind(const lt_program *p, int id) {
    LT_ASSERT(id >= 0 && id < p->n_bufs);
    return p->bufs[id].kind;
}

void lt_program_node(const lt_program *p, int node, lt_node_info *out) {
    LT_ASSERT(node >= 0 && node < p->n_nodes);
    const lt__node *n = &p->nodes[node];
    out->kernel = n->kernel;
    memcpy(out->ops, n->ops, sizeof out->ops);
    out->n_ops = n->n_ops;
    memcpy(out->ia, n->ia, sizeof out->ia);
    memcpy(out->fa, n->fa, sizeof out->fa);
    out->params = n->params;
    out->flags = n->flags;
    out->label = n->label;
}

const lt_call *lt_program_call(const lt_program *p, int node) {
    LT_ASSERT(p->finalized && node >= 0 && node < p->n_nodes);
    return &p->nodes[node].call;
}

void lt_program_cost(const lt_program *p, const lt_step *step, double *bytes, double *flops) {
    *bytes = *flops = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const lt_kernel *k = lt_kernel_get(p->nodes[i].kernel);
        double b = 0, f = 0;
        if (k->cost && p->finalized) k->cost(&p->nodes[i].call, step, &b, &f);
        *bytes += b;
        *flops += f;
    }
}

void lt_program_set_observer(lt_program *p, const lt_exec_observer *obs) {
    if (obs) p->obs = *obs;
    else memset(&p->obs, 0, sizeof p->obs);
}
