/* Internal layout of a program, shared by the builder, printer and executors. */
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
    char *label;
    lt_call call;    /* resolved at finalize */
    lt_kernel_fn fn; /* chosen at finalize for the active ISA */
} lt__node;

struct lt_program {
    char name[64];
    lt__buffer *bufs;
    int n_bufs, cap_bufs;
    lt__node *nodes;
    int n_nodes, cap_nodes;
    void *arena; /* all activations */
    bool finalized;
};

#endif
