/* A single-producer single-consumer ring of fixed-size elements, the
 * telemetry hot path's only shared structure. The producer (one worker
 * thread) never waits: when the ring is full the element is dropped and
 * counted. The consumer (the drain thread) takes elements in order.
 *
 * Ordering: the producer writes an element, then publishes it with a release
 * store of head; the consumer loads head with acquire before reading
 * elements, and releases the slots with a release store of tail, which the
 * producer loads with acquire before it reuses them. head and tail live on
 * separate cache lines; the producer keeps a private copy of tail and reloads
 * it only when the ring looks full, so a push touches only its own line. */
#ifndef LT_TELEMETRY_RING_H
#define LT_TELEMETRY_RING_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "looptune/core.h"

typedef struct {
    /* producer's line: head, its view of tail, its drop counter, and the
     * read-only layout */
    alignas(LT_CACHE_LINE) _Atomic uint64_t head;
    uint64_t tail_seen;
    _Atomic uint64_t dropped; /* written by the producer only (load + store, no RMW) */
    unsigned char *buf;       /* [cap * elem] */
    uint64_t mask;            /* cap - 1 */
    size_t elem;
    /* consumer's line */
    alignas(LT_CACHE_LINE) _Atomic uint64_t tail;
    char pad[LT_CACHE_LINE - sizeof(uint64_t)];
} lt__ring;

/* cap is rounded up to a power of two (>= 2). LT_ENOMEM on failure. */
int lt__ring_init(lt__ring *r, uint64_t cap, size_t elem);
void lt__ring_free(lt__ring *r);
static inline uint64_t lt__ring_cap(const lt__ring *r) { return r->mask + 1; }

/* Producer: copies elem bytes from e into the ring, or drops it (false). */
static inline bool lt__ring_push(lt__ring *r, const void *e, size_t elem) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (h - r->tail_seen > r->mask) {
        r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h - r->tail_seen > r->mask) {
            atomic_store_explicit(&r->dropped,
                                  atomic_load_explicit(&r->dropped, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
            return false;
        }
    }
    memcpy(r->buf + (h & r->mask) * elem, e, elem);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    return true;
}

/* Consumer: the elements published so far are [*first, *last) (positions;
 * element i is at lt__ring_at(r, i)). They stay valid until lt__ring_release. */
static inline void lt__ring_peek(lt__ring *r, uint64_t *first, uint64_t *last) {
    *first = atomic_load_explicit(&r->tail, memory_order_relaxed);
    *last = atomic_load_explicit(&r->head, memory_order_acquire);
}
static inline const void *lt__ring_at(const lt__ring *r, uint64_t i) {
    return r->buf + (i & r->mask) * r->elem;
}
/* Consumer: frees every element before position upto. */
static inline void lt__ring_release(lt__ring *r, uint64_t upto) {
    atomic_store_explicit(&r->tail, upto, memory_order_release);
}
static inline uint64_t lt__ring_dropped(lt__ring *r) {
    return atomic_load_explicit(&r->dropped, memory_order_relaxed);
}

#endif
