/* The looped executor's schedule built through the LOOP records against the
 * one derived node by node: for the tests of programs with loops. */
#ifndef LT_TESTS_SCHED_TEST_H
#define LT_TESTS_SCHED_TEST_H

#include <string.h>

#include "program/exec_internal.h"
#include "test.h"

/* Compares, node by node, the schedules of finalized p at nth threads under
 * looped parameters xp (NULL: the defaults) with and without the LOOP
 * records: task counts, whole-node dependencies (in order), task-level ones
 * (producer and every task's range) and done flags. Returns the nodes that
 * differ; *copied gets the nodes the first schedule replicated. */
static inline int sched_differences(lt_program *p, int nth, const lt_params *xp, int *copied) {
    lt_exec *e[2];
    ASSERT_EQ(lt_exec_init(&e[0], LT_EXEC_LOOPED), LT_OK);
    ASSERT_EQ(lt_exec_init(&e[1], LT_EXEC_LOOPED), LT_OK);
    lt__exec_set_flat(e[1], true);
    const lt__plan *pl[2];
    for (int k = 0; k < 2; k++) {
        if (xp) ASSERT_EQ(lt_exec_set_params(e[k], xp), LT_OK);
        pl[k] = lt__exec_plan(e[k], p, nth);
        ASSERT_TRUE(pl[k] != NULL);
    }
    int bad = 0;
    *copied = -1;
    if (pl[0] && pl[1]) {
        *copied = lt__plan_copied(pl[0]);
        ASSERT_EQ(lt__plan_copied(pl[1]), 0);
        for (int i = 0; i < lt_program_n_nodes(p); i++) {
            lt__sched_node a, b;
            lt__plan_node(pl[0], i, &a);
            lt__plan_node(pl[1], i, &b);
            const size_t dep_bytes = (size_t)a.n_deps * sizeof *a.deps;
            bool same = a.n_tasks == b.n_tasks && a.n_deps == b.n_deps && a.n_fine == b.n_fine &&
                        a.flag_base == b.flag_base &&
                        (a.n_deps == 0 || !memcmp(a.deps, b.deps, dep_bytes));
            for (int f = 0; same && f < a.n_fine; f++) {
                int da, db;
                const int *ra, *rb;
                lt__plan_fine(pl[0], i, f, &da, &ra);
                lt__plan_fine(pl[1], i, f, &db, &rb);
                same = da == db && !memcmp(ra, rb, 2 * (size_t)a.n_tasks * sizeof *ra);
            }
            if (!same && bad++ < 3)
                fprintf(stderr, "  schedule of node %d at %d threads: through the loops %d tasks, "
                                "%d deps, %d fine; flat %d, %d, %d\n",
                        i, nth, a.n_tasks, a.n_deps, a.n_fine, b.n_tasks, b.n_deps, b.n_fine);
        }
    }
    lt_exec_free(e[0]);
    lt_exec_free(e[1]);
    return bad;
}

#endif
