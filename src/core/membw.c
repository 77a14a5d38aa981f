/* Host memory bandwidth: STREAM triad and a read-only vector scan, split over
 * the pool's threads, best of several repetitions. This is the denominator of
 * decode's figure of merit (achieved bandwidth / machine bandwidth).
 *
 * Traffic is counted as STREAM counts it: triad moves 3 arrays (read b, read
 * c, write a); the write-allocate read of a is not counted. The read scan
 * moves 1 array. Arrays are mmap'ed untouched and first touched by the same
 * (ith, nth) split that later measures them, so on a NUMA host each thread
 * reads pages on its own node. */
#include "looptune/core.h"
#include "core/membw_internal.h"

#include <stdalign.h>
#include <sys/mman.h>

#define LT__MEMBW_DEFAULT_BYTES ((size_t)256 << 20)
#define LT__MEMBW_MIN_BYTES ((size_t)4096)
#define LT__MEMBW_SCALAR 3.0
/* Thread chunks start on page boundaries, so first touch places whole pages
 * with the thread that uses them: huge pages when every thread gets many of
 * them, else 4 KiB pages (small arrays must still split evenly). */
#define LT__MEMBW_PAGE ((size_t)4096)
#define LT__MEMBW_HUGE_PAGE ((size_t)2 << 20)
#define LT__MEMBW_HUGE_PER_THREAD 16

/* ---- portable kernels ----------------------------------------------------- */

void lt__membw_triad_portable(double *a, const double *b, const double *c, double s, size_t n) {
    for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

double lt__membw_read_portable(const double *x, size_t n) {
    double s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += x[i + (size_t)k];
    for (; i < n; i++) s[0] += x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

lt__membw_triad_fn lt__membw_triad_for(lt_isa isa) {
    static const lt__membw_triad_fn fns[] = {
        [LT_ISA_PORTABLE] = lt__membw_triad_portable,
        [LT_ISA_AVX2] = LT_X86_ONLY(lt__membw_triad_avx2),
        [LT_ISA_AVX512] = LT_X86_ONLY(lt__membw_triad_avx512),
    };
    _Static_assert(sizeof fns / sizeof fns[0] == LT_ISA_COUNT, "triad dispatch table");
    LT_ASSERT((unsigned)isa < LT_ISA_COUNT);
    return fns[isa] ? fns[isa] : fns[LT_ISA_PORTABLE]; /* NULL: not compiled for this target */
}

lt__membw_read_fn lt__membw_read_for(lt_isa isa) {
    static const lt__membw_read_fn fns[] = {
        [LT_ISA_PORTABLE] = lt__membw_read_portable,
        [LT_ISA_AVX2] = LT_X86_ONLY(lt__membw_read_avx2),
        [LT_ISA_AVX512] = LT_X86_ONLY(lt__membw_read_avx512),
    };
    _Static_assert(sizeof fns / sizeof fns[0] == LT_ISA_COUNT, "read dispatch table");
    LT_ASSERT((unsigned)isa < LT_ISA_COUNT);
    return fns[isa] ? fns[isa] : fns[LT_ISA_PORTABLE]; /* NULL: not compiled for this target */
}

/* ---- the measurement ------------------------------------------------------ */

typedef enum { MEMBW_INIT, MEMBW_TRIAD, MEMBW_READ } membw_mode;

typedef struct {
    alignas(LT_CACHE_LINE) uint64_t t0, t1; /* ns: this thread's start and end */
    double sum;                             /* read kernel result over its chunk */
} membw_slot;

typedef struct {
    lt_pool *pool; /* NULL: the caller alone */
    double *a, *b, *c; /* [n] each, LT__MEMBW_HUGE_PAGE aligned */
    size_t n;
    size_t granule; /* elements per split unit (a page) */
    membw_mode mode;
    lt__membw_triad_fn triad;
    lt__membw_read_fn read;
    membw_slot *slots; /* [nth] */
} membw_job;

/* Thread ith's elements [lo, hi): whole granules, the last thread takes the
 * remainder. Identical for first touch and for measuring. */
static void membw_split(const membw_job *j, int ith, int nth, size_t *lo, size_t *hi) {
    size_t granules = (j->n + j->granule - 1) / j->granule;
    size_t g0 = granules * (size_t)ith / (size_t)nth;
    size_t g1 = granules * (size_t)(ith + 1) / (size_t)nth;
    *lo = g0 * j->granule < j->n ? g0 * j->granule : j->n;
    *hi = g1 * j->granule < j->n ? g1 * j->granule : j->n;
}

static void membw_thread(void *arg, int ith, int nth) {
    membw_job *j = arg;
    size_t lo, hi;
    membw_split(j, ith, nth, &lo, &hi);
    if (j->mode == MEMBW_INIT) {
        for (size_t i = lo; i < hi; i++) {
            j->a[i] = 0.0;
            j->b[i] = lt__membw_value(i);
            j->c[i] = 2.0;
        }
        return;
    }
    /* Every thread is awake and here before anyone starts the clock: the
     * measured span is first start to last end, without the wake-up. */
    if (j->pool) lt_pool_barrier(j->pool);
    membw_slot *s = &j->slots[ith];
    s->sum = 0.0;
    s->t0 = lt_now_ns();
    if (j->mode == MEMBW_TRIAD)
        j->triad(j->a + lo, j->b + lo, j->c + lo, LT__MEMBW_SCALAR, hi - lo);
    else s->sum = j->read(j->b + lo, hi - lo);
    s->t1 = lt_now_ns();
}

static void membw_run(membw_job *j) {
    if (j->pool) lt_pool_run(j->pool, membw_thread, j);
    else membw_thread(j, 0, 1);
}

/* Span of the last run, first start to last end, in ns (at least 1). */
static uint64_t membw_span(const membw_job *j, int nth) {
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (int i = 0; i < nth; i++) {
        if (j->slots[i].t0 < t0) t0 = j->slots[i].t0;
        if (j->slots[i].t1 > t1) t1 = j->slots[i].t1;
    }
    return t1 > t0 ? t1 - t0 : 1;
}

/* Anonymous pages, not touched here (first touch happens in the threads),
 * over-mapped by one huge page so the array can start on a huge-page
 * boundary. */
typedef struct {
    void *base;
    size_t len;
    double *data;
} membw_array;

static bool membw_map(membw_array *m, size_t bytes) {
    m->len = bytes + LT__MEMBW_HUGE_PAGE;
    m->base = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m->base == MAP_FAILED) {
        m->base = NULL;
        return false;
    }
    uintptr_t start = ((uintptr_t)m->base + LT__MEMBW_HUGE_PAGE - 1) & ~(LT__MEMBW_HUGE_PAGE - 1);
    m->data = (double *)start;
#ifdef MADV_HUGEPAGE
    madvise(m->data, bytes, MADV_HUGEPAGE); /* fewer TLB misses; a hint, failure is harmless */
#endif
    return true;
}

static void membw_unmap(membw_array *m) {
    if (m->base) munmap(m->base, m->len);
}

int lt__membw_measure_sum(lt_pool *pool, size_t bytes_per_array, int reps, lt_membw *out,
                          double *read_sum) {
    if (!out) return lt_error(LT_EINVAL, "memory bandwidth: out is NULL");
    if (reps < 1) return lt_error(LT_EINVAL, "memory bandwidth: reps %d (expected >= 1)", reps);
    size_t bytes = bytes_per_array ? bytes_per_array : LT__MEMBW_DEFAULT_BYTES;
    if (bytes < LT__MEMBW_MIN_BYTES)
        return lt_error(LT_EINVAL, "memory bandwidth: %zu bytes per array (expected >= %zu)",
                        bytes, LT__MEMBW_MIN_BYTES);
    bytes -= bytes % sizeof(double);

    const int nth = pool ? lt_pool_size(pool) : 1;
    const lt_isa isa = lt_isa_active();
    membw_job j = {
        .pool = pool,
        .n = bytes / sizeof(double),
        .triad = lt__membw_triad_for(isa),
        .read = lt__membw_read_for(isa),
    };
    bool huge = bytes / (size_t)nth >= LT__MEMBW_HUGE_PER_THREAD * LT__MEMBW_HUGE_PAGE;
    j.granule = (huge ? LT__MEMBW_HUGE_PAGE : LT__MEMBW_PAGE) / sizeof(double);
    int rc = LT_OK;
    membw_array arr[3] = {{0}};
    j.slots = lt_aligned_alloc(LT_CACHE_LINE, sizeof(membw_slot) * (size_t)nth);
    bool mapped = membw_map(&arr[0], bytes) && membw_map(&arr[1], bytes) &&
                  membw_map(&arr[2], bytes);
    j.a = arr[0].data;
    j.b = arr[1].data;
    j.c = arr[2].data;
    if (!j.slots || !mapped) {
        rc = lt_error(LT_ENOMEM, "memory bandwidth: cannot allocate 3 arrays of %zu bytes", bytes);
        goto done;
    }

    j.mode = MEMBW_INIT;
    membw_run(&j);

    uint64_t best_triad = UINT64_MAX, best_read = UINT64_MAX;
    double sum = 0.0;
    for (int r = 0; r < reps; r++) {
        j.mode = MEMBW_TRIAD;
        membw_run(&j);
        uint64_t t = membw_span(&j, nth);
        if (t < best_triad) best_triad = t;

        j.mode = MEMBW_READ;
        membw_run(&j);
        t = membw_span(&j, nth);
        if (t < best_read) best_read = t;
        sum = 0.0;
        for (int i = 0; i < nth; i++) sum += j.slots[i].sum;
    }
    /* bytes per ns = GB/s (10^9 bytes per second) */
    out->triad_gb_s = 3.0 * (double)bytes / (double)best_triad;
    out->read_gb_s = (double)bytes / (double)best_read;
    if (read_sum) *read_sum = sum;

done:
    for (int i = 0; i < 3; i++) membw_unmap(&arr[i]);
    lt_aligned_free(j.slots);
    return rc;
}

int lt_membw_measure(lt_pool *pool, size_t bytes_per_array, int reps, lt_membw *out) {
    return lt__membw_measure_sum(pool, bytes_per_array, reps, out, NULL);
}
