/* Allocation of the telemetry rings (the push and pop paths are inline in
 * ring.h). */
#include "telemetry/ring.h"

int lt__ring_init(lt__ring *r, uint64_t cap, size_t elem) {
    memset(r, 0, sizeof *r);
    if (elem == 0) return lt_error(LT_EINVAL, "telemetry ring: zero element size");
    if (cap < 2) cap = 2;
    if (cap > ((uint64_t)1 << 40)) return lt_error(LT_EINVAL, "telemetry ring: %llu elements",
                                                     (unsigned long long)cap);
    uint64_t c = 2;
    while (c < cap) c <<= 1;
    r->buf = lt_aligned_alloc(LT_CACHE_LINE, (size_t)c * elem);
    if (!r->buf)
        return lt_error(LT_ENOMEM, "telemetry ring: cannot allocate %llu elements of %zu bytes",
                        (unsigned long long)c, elem);
    /* touch every page now: a page fault in the observer would be a system
     * call on the hot path (several microseconds each in a virtual machine) */
    memset(r->buf, 0, (size_t)c * elem);
    r->mask = c - 1;
    r->elem = elem;
    return LT_OK;
}

void lt__ring_free(lt__ring *r) {
    lt_aligned_free(r->buf);
    r->buf = NULL;
}
