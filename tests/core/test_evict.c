/* lt_cache_evict leaves the data as they were, whatever the range's
 * alignment and length (lines written just before included: they are
 * written back, not dropped), and says whether this architecture evicts. */
#include <stdlib.h>
#include <string.h>

#include "looptune/core.h"
#include "test.h"

int main(void) {
    enum { N = 1 << 20 };
    unsigned char *buf = malloc(N + 256), *ref = malloc(N + 256);
    ASSERT_TRUE(buf && ref);
    if (!buf || !ref) return lt_test_finish();
    static const size_t offs[] = {0, 1, 63, 64, 65, 4095};
    static const size_t lens[] = {0, 1, 63, 64, 65, 4096, N - 1, N};
    for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            for (size_t i = 0; i < N + 256; i++) buf[i] = (unsigned char)(i * 131 + o * 7 + l);
            memcpy(ref, buf, N + 256); /* buf's lines dirty in the caches */
            const bool evicts = lt_cache_evict(buf + offs[o], lens[l]);
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
            ASSERT_TRUE(evicts);
#else
            ASSERT_TRUE(!evicts || lens[l] == 0);
#endif
            ASSERT_TRUE(!memcmp(buf, ref, N + 256));
        }
    ASSERT_TRUE(lt_cache_evict(NULL, 0));
    free(buf);
    free(ref);
    return lt_test_finish();
}
