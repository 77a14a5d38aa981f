/* Evicting memory from the CPU's caches, so that a measurement finds data
 * where a step of a model larger than the last-level cache does: in memory
 * (the tuner's node timer, lt_node_timer_set_cold). */
#include <stdint.h>

#include "looptune/core.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

bool lt_cache_evict(const void *p, size_t n) {
    if (!p || !n) return true;
    const char *line = (const char *)((uintptr_t)p & ~(uintptr_t)(LT_CACHE_LINE - 1));
    const char *end = (const char *)p + n;
#if defined(__x86_64__) || defined(__i386__)
    for (; line < end; line += LT_CACHE_LINE) _mm_clflush(line);
    _mm_mfence(); /* every line gone before what the caller times next */
    return true;
#elif defined(__aarch64__)
    /* clean and invalidate to the point of coherence (Linux lets user code
     * do it); a core with longer lines takes some twice, harmlessly */
    for (; line < end; line += LT_CACHE_LINE) __asm__ volatile("dc civac, %0" ::"r"(line) : "memory");
    __asm__ volatile("dsb ish" ::: "memory");
    return true;
#else
    (void)line, (void)end;
    return false;
#endif
}
