/* Helpers shared by the tests of the program passes. */
#ifndef LT_TESTS_PASS_TEST_H
#define LT_TESTS_PASS_TEST_H

#include "looptune/program.h"

/* Nodes of kernel k in p. */
static inline int count_kernel(lt_program *p, lt_kernel_id k) {
    int n = 0;
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        n += ni.kernel == k;
    }
    return n;
}

#endif
