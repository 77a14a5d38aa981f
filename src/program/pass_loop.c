/* The kernel-looping pass: N consecutive calls of the same block become one
 * LOOP node with per-iteration bindings of the weights (and state) that
 * differ. Knows nothing of Llama: it compares nodes structurally. */
#include <stdlib.h>
#include <string.h>

#include "program/program_internal.h"

static bool bindable(const lt_program *p, int b) {
    return p->bufs[b].kind == LT_BUF_WEIGHT || p->bufs[b].kind == LT_BUF_STATE;
}

static bool same_shape(const lt_tensor *a, const lt_tensor *b) {
    return a->dtype == b->dtype && a->layout == b->layout && !memcmp(a->ne, b->ne, sizeof a->ne) &&
           !memcmp(a->nb, b->nb, sizeof a->nb);
}

/* Same call up to bindable operands. */
static bool node_equal(const lt_program *p, const lt__node *a, const lt__node *b) {
    if (a->kernel != b->kernel || a->n_ops != b->n_ops || a->flags != b->flags ||
        memcmp(a->ia, b->ia, sizeof a->ia) ||
        memcmp(a->fa, b->fa, sizeof a->fa) || memcmp(&a->params, &b->params, sizeof a->params))
        return false;
    for (int i = 0; i < a->n_ops; i++) {
        int x = a->ops[i], y = b->ops[i];
        if (x == y) continue;
        if (x < 0 || y < 0 || !bindable(p, x) || !bindable(p, y) || p->bufs[x].kind != p->bufs[y].kind ||
            !same_shape(&p->bufs[x].t, &p->bufs[y].t))
            return false;
    }
    return true;
}

/* Block [s, s+B) equals block [t, t+B): node by node, and the bindable
 * buffers map consistently (one buffer of the first block always maps to
 * the same buffer of the second, and distinct ones to distinct ones). */
static bool block_equal(const lt_program *p, int s, int t, int B, int *map) {
    for (int j = 0; j < B; j++)
        if (!node_equal(p, &p->nodes[s + j], &p->nodes[t + j])) return false;
    for (int i = 0; i < p->n_bufs; i++) map[i] = -1;
    for (int j = 0; j < B; j++) {
        const lt__node *a = &p->nodes[s + j], *b = &p->nodes[t + j];
        for (int i = 0; i < a->n_ops; i++) {
            int x = a->ops[i], y = b->ops[i];
            if (x < 0 || !bindable(p, x)) continue;
            if (map[x] == -1) {
                for (int k = 0; k < p->n_bufs; k++)
                    if (map[k] == y) return false; /* two buffers onto one */
                map[x] = y;
            } else if (map[x] != y) {
                return false;
            }
        }
    }
    return true;
}

static bool in_loop(const lt_program *p, int node) {
    for (int i = 0; i < p->n_loops; i++) {
        const lt__loop *L = &p->loops[i];
        if (node >= L->first && node < L->first + L->n_iter * L->body_len) return true;
    }
    return false;
}

static int cmp_loop(const void *a, const void *b) {
    return ((const lt__loop *)a)->first - ((const lt__loop *)b)->first;
}

/* Operand i of body node j binds different buffers across the r iterations. */
static bool varies(const lt_program *p, int s, int B, int r, int j, int i) {
    for (int it = 1; it < r; it++)
        if (p->nodes[s + it * B + j].ops[i] != p->nodes[s + j].ops[i]) return true;
    return false;
}

/* Records the loop [s, s + B*r) with its bindings. */
static int add_loop(lt_program *p, int s, int B, int r) {
    lt__loop *nl = realloc(p->loops, (size_t)(p->n_loops + 1) * sizeof *nl);
    if (!nl) return lt_error(LT_ENOMEM, "out of memory in the kernel-looping pass");
    p->loops = nl;
    lt__loop *L = &p->loops[p->n_loops];
    memset(L, 0, sizeof *L);
    L->first = s;
    L->body_len = B;
    L->n_iter = r;
    /* slots: operands whose buffer differs in some iteration */
    int n = 0;
    for (int j = 0; j < B; j++)
        for (int i = 0; i < p->nodes[s + j].n_ops; i++) n += varies(p, s, B, r, j, i);
    L->slot = malloc((size_t)(n ? n : 1) * sizeof *L->slot);
    L->bind = malloc((size_t)(n ? n : 1) * (size_t)r * sizeof *L->bind);
    L->stride = calloc((size_t)(n ? n : 1), sizeof *L->stride);
    if (!L->slot || !L->bind || !L->stride) {
        free(L->slot);
        free(L->bind);
        free(L->stride);
        return lt_error(LT_ENOMEM, "out of memory in the kernel-looping pass");
    }
    n = 0;
    for (int j = 0; j < B; j++) {
        for (int i = 0; i < p->nodes[s + j].n_ops; i++) {
            if (!varies(p, s, B, r, j, i)) continue;
            L->slot[n][0] = j;
            L->slot[n][1] = i;
            bool constant = true;
            const char *d0 = p->bufs[p->nodes[s + j].ops[i]].t.data;
            const char *d1 = p->bufs[p->nodes[s + B + j].ops[i]].t.data;
            for (int it = 0; it < r; it++) {
                int b = p->nodes[s + it * B + j].ops[i];
                const char *d = p->bufs[b].t.data;
                if (!d0 || !d || d - d0 != (ptrdiff_t)it * (d1 - d0)) constant = false;
            }
            L->stride[n] = constant ? (int64_t)(d1 - d0) : 0;
            n++;
        }
    }
    L->n_slots = n;
    for (int it = 0; it < r; it++)
        for (int k = 0; k < n; k++)
            L->bind[it * n + k] = p->nodes[s + it * B + L->slot[k][0]].ops[L->slot[k][1]];
    p->n_loops++;
    return LT_OK;
}

/* Finds the best run in [a, b) (nodes outside loops), records it, recurses. */
static int find_runs(lt_program *p, int a, int b, int *map) {
    int best_s = -1, best_B = 0, best_r = 0;
    for (int B = 1; 2 * B <= b - a; B++) {
        for (int s = a; s + 2 * B <= b; s++) {
            int r = 1;
            while (s + (r + 1) * B <= b && block_equal(p, s, s + r * B, B, map)) r++;
            if (r < 2) continue;
            if (B * r > best_B * best_r || (B * r == best_B * best_r && B < best_B)) {
                best_s = s;
                best_B = B;
                best_r = r;
            }
        }
    }
    if (best_s < 0) return LT_OK;
    int rc = add_loop(p, best_s, best_B, best_r);
    if (rc) return rc;
    if ((rc = find_runs(p, a, best_s, map))) return rc;
    return find_runs(p, best_s + best_B * best_r, b, map);
}

int lt_pass_kernel_looping(lt_program *p) {
    int before = p->n_loops;
    int *map = malloc((size_t)(p->n_bufs ? p->n_bufs : 1) * sizeof *map);
    if (!map) return lt_error(LT_ENOMEM, "out of memory in the kernel-looping pass");
    /* each maximal stretch of nodes not yet in a loop */
    int rc = LT_OK;
    for (int a = 0; a < p->n_nodes && rc == LT_OK;) {
        if (in_loop(p, a)) {
            a++;
            continue;
        }
        int b = a;
        while (b < p->n_nodes && !in_loop(p, b)) b++;
        rc = find_runs(p, a, b, map);
        a = b;
    }
    free(map);
    if (rc) return rc;
    if (p->n_loops > 1) qsort(p->loops, (size_t)p->n_loops, sizeof *p->loops, cmp_loop);
    return p->n_loops - before;
}

int lt_program_n_loops(const lt_program *p) { return p->n_loops; }

void lt_program_loop(const lt_program *p, int loop, lt_loop_info *out) {
    LT_ASSERT(loop >= 0 && loop < p->n_loops);
    const lt__loop *L = &p->loops[loop];
    out->first = L->first;
    out->body_len = L->body_len;
    out->n_iter = L->n_iter;
    out->n_slots = L->n_slots;
}

void lt_program_loop_slot(const lt_program *p, int loop, int s, int *body_node, int *operand) {
    LT_ASSERT(loop >= 0 && loop < p->n_loops && s >= 0 && s < p->loops[loop].n_slots);
    *body_node = p->loops[loop].slot[s][0];
    *operand = p->loops[loop].slot[s][1];
}

int lt_program_loop_binding(const lt_program *p, int loop, int it, int s) {
    const lt__loop *L = &p->loops[loop];
    LT_ASSERT(it >= 0 && it < L->n_iter && s >= 0 && s < L->n_slots);
    return L->bind[it * L->n_slots + s];
}
