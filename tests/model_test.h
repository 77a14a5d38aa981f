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

#endif
