/* The real tiny model the runtime tests run on: stories260K (llama2.c
 * format, grouped-query attention) from $LT_DATA_DIR (ctest sets it). */
#ifndef LT_MODEL_TEST_H
#define LT_MODEL_TEST_H

#include <stdlib.h>

#include "looptune/model.h"
#include "test.h"

/* Opens it; NULL after a failed check (the caller then finishes). */
static inline lt_model *lt_test_stories260k(void) {
    const char *dir = getenv("LT_DATA_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/stories260K.bin", dir ? dir : "tests/data");
    lt_model *m = NULL;
    ASSERT_EQ(lt_model_open(&m, path, NULL), LT_OK);
    return m;
}

/* A runtime of m with the looped executor on a new pool of nth threads
 * (*pool; free both), ctx_len and max_batch as lt_llama_opts has them (0:
 * the defaults); NULL after a failed check. */
static inline lt_llama *lt_test_llama(lt_model *m, int nth, int64_t ctx_len, int64_t max_batch,
                                      lt_pool **pool) {
    lt_llama *l = NULL;
    ASSERT_EQ(lt_pool_init(pool, nth), LT_OK);
    lt_llama_opts o = {.executor = 1, .ctx_len = ctx_len, .max_batch = max_batch};
    ASSERT_EQ(lt_llama_init(&l, m, *pool, &o), LT_OK);
    return l;
}

#endif
