/* Aligned, zeroed allocation and the monotonic clock. */
#include "looptune/core.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void *lt_aligned_alloc(size_t align, size_t size) {
    void *p = NULL;
    if (size == 0) size = align;
    if (posix_memalign(&p, align, size) != 0) return NULL;
    memset(p, 0, size);
    return p;
}

void lt_aligned_free(void *p) { free(p); }

uint64_t lt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double lt_now_s(void) { return (double)lt_now_ns() * 1e-9; }

uint64_t lt_wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
