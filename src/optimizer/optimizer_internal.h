/* Internal to the optimizer layer: the run side's node table (what a control
 * may name), and the service's pieces shared between its files. */
#ifndef LT_OPTIMIZER_INTERNAL_H
#define LT_OPTIMIZER_INTERNAL_H

#include <stdio.h>

#include "looptune/optimizer.h"

/* One node of the program as controls name it, captured once. */
typedef struct {
    lt_kernel_id kernel;
    char kernel_name[32];
    char label[64];
    char shape[LT_KEY_MAX]; /* its key (lt_call_key) */
    lt_params params; /* the values in force (kept up to date by the run side) */
} lt__node_entry;

typedef struct {
    lt__node_entry *nodes;
    int n;
} lt__node_table;

int lt__node_table_init(lt__node_table *t, const lt_program *p);
void lt__node_table_free(lt__node_table *t);
int lt__control_check_table(const lt__node_table *t, const lt_program *p, const char *run_id,
                            const Looptune__Control *c, lt_control_cmd *out);

#endif
