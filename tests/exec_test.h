/* Executors for the tests that step programs: one of each kind per test
 * binary, created on first use and freed by exec_test_free. Every program a
 * test builds runs on them, so their schedule caches see programs come and
 * go (a schedule is never taken for another program's). */
#ifndef LT_TESTS_EXEC_TEST_H
#define LT_TESTS_EXEC_TEST_H

#include "looptune/program.h"
#include "test.h"

static lt_exec *exec_test_execs[2];

static inline lt_exec *exec_of(lt_executor kind) {
    if (!exec_test_execs[kind]) ASSERT_EQ(lt_exec_init(&exec_test_execs[kind], kind), LT_OK);
    return exec_test_execs[kind];
}

/* One step of p on every thread of pool by the executor of that kind. */
static inline int exec_step(lt_executor kind, lt_program *p, lt_pool *pool, const lt_step *st,
                            lt_exec_stats *stats) {
    return lt_exec_step(exec_of(kind), p, pool, 0, st, stats);
}

static inline void exec_test_free(void) {
    for (int k = 0; k < 2; k++) {
        lt_exec_free(exec_test_execs[k]);
        exec_test_execs[k] = NULL;
    }
}

#endif
