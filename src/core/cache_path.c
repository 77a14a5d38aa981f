/* Where looptune keeps what it learns about a machine between runs (the
 * host record, the config store): one folder under the XDG cache
 * directory, computed here for every layer. */
#include <stdio.h>
#include <stdlib.h>

#include "looptune/core.h"

int lt_cache_path(char *buf, size_t n, const char *file) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int len;
    if (xdg && *xdg) len = snprintf(buf, n, "%s/looptune/%s", xdg, file);
    else if (home && *home) len = snprintf(buf, n, "%s/.cache/looptune/%s", home, file);
    else return lt_error(LT_ENOTFOUND, "neither XDG_CACHE_HOME nor HOME is set");
    if (len < 0 || (size_t)len >= n) return lt_error(LT_ERANGE, "cache path too long");
    return LT_OK;
}
