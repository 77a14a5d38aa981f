/* Internal layout of a program, shared by the builder, the passes, the
 * printer and the executors (which read it; the IR knows no executor). */
#ifndef LT_PROGRAM_INTERNAL_H
#define LT_PROGRAM_INTERNAL_H

#include "looptune/program.h"

typedef struct {
    char *name;
    lt_buf_kind kind;
    lt_tensor t;   /* shape, dtype; data resolved at finalize for ACT and VIEW */
    int parent;    /* VIEW: parent buffer id */
    size_t offset; /* VIEW: byte offset into the parent */
} lt__buffer;

typedef struct {
    lt_kernel_id kernel;
    int ops[LT_MAX_OPERANDS];
    int n_ops;
    int64_t ia[4];
    float fa[4];
    lt_params params;
    uint32_t flags;  /* LT_CALL_*, copied into the call */
    char *label;
    lt_call call;    /* resolved at finalize */
    lt_kernel_fn fn; /* chosen at finalize for the active ISA */
} lt__node;

/* A LOOP node: body_len consecutive nodes starting at `first`, repeated
 * n_iter times in the flat node list (iteration it, body node j is
 * nodes[first + it * body_len + j]). Iterations differ only in the
 * WEIGHT/STATE buffers they bind; slots name those operands. */
typedef struct {
    int first, body_len, n_iter;
    int n_slots;
    int (*slot)[2]; /* [n_slots] {body node j, operand i} */
    int *bind;      /* [n_iter][n_slots] buffer ids */
    int64_t *stride; /* [n_slots] byte stride between iterations' data, or 0 if not constant */
} lt__loop;

struct lt_program {
    char name[64];
    lt__buffer *bufs;
    int n_bufs, cap_bufs;
    lt__node *nodes;
    int n_nodes, cap_nodes;
    lt__loop *loops; /* sorted by first node */
    int n_loops;
    void *arena; /* all activations */
    lt_exec_observer obs; /* obs.node_done NULL: no per-node timing */
    /* Identity for whoever caches what it derived from the program (an
     * executor's schedules): id is unique in the process and never reused,
     * so a freed program's successor at the same address is another
     * program; structure_gen counts the changes that alter how nodes divide
     * into tasks (a kernel parameter that changes lt_kernel.units). */
    uint64_t id;
    uint64_t structure_gen;
    bool finalized;
};

/* The buffer b lies in: b itself, or the parent a view (of a view ...) is in. */
int lt__buf_root(const lt_program *p, int b);
/* Whether node n reads (write: writes) buffer r or, unless exact, a view
 * into it (by the kernel's lt_kernel_reads / lt_kernel_writes). */
bool lt__node_accesses(const lt_program *p, const lt__node *n, int r, bool write, bool exact);
static inline bool lt__node_reads(const lt_program *p, const lt__node *n, int r) {
    return lt__node_accesses(p, n, r, false, false);
}
static inline bool lt__node_writes(const lt_program *p, const lt__node *n, int r) {
    return lt__node_accesses(p, n, r, true, false);
}
/* Removes node i (before finalize, outside any loop). */
void lt__node_remove(lt_program *p, int i);
#endif
