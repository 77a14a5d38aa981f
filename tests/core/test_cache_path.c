/* lt_cache_path: XDG_CACHE_HOME first, an empty one falls back to
 * ~/.cache, neither is LT_ENOTFOUND, a short buffer LT_ERANGE. */
#include <stdlib.h>

#include "looptune/core.h"
#include "test.h"

int main(void) {
    char buf[256];
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/home/u", 1);
    ASSERT_EQ(lt_cache_path(buf, sizeof buf, "configs.tsv"), LT_OK);
    ASSERT_STREQ(buf, "/x/cache/looptune/configs.tsv");
    setenv("XDG_CACHE_HOME", "", 1);
    ASSERT_EQ(lt_cache_path(buf, sizeof buf, "host-1.txt"), LT_OK);
    ASSERT_STREQ(buf, "/home/u/.cache/looptune/host-1.txt");
    ASSERT_EQ(lt_cache_path(buf, 10, "host-1.txt"), LT_ERANGE);
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    ASSERT_EQ(lt_cache_path(buf, sizeof buf, "configs.tsv"), LT_ENOTFOUND);
    return lt_test_finish();
}
