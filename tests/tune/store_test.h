/* A config store entry for the store tests: key and parameters as given, a
 * valid median, sample count and speed-up the caller may change. */
#ifndef LT_STORE_TEST_H
#define LT_STORE_TEST_H

#include <stdio.h>
#include <string.h>

#include "looptune/tune.h"

static inline lt_config_entry lt_test_entry(const char *kernel, const char *shape,
                                            const char *host, const char *params) {
    lt_config_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.kernel, sizeof e.kernel, "%s", kernel);
    snprintf(e.shape, sizeof e.shape, "%s", shape);
    snprintf(e.host, sizeof e.host, "%s", host);
    snprintf(e.params, sizeof e.params, "%s", params);
    e.median_ns = 1000;
    e.samples = 10;
    e.speedup = 1.1;
    return e;
}

#endif
