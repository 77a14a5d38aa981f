/* The persistent thread pool: nthreads-1 workers plus the caller (ith 0), a
 * generation counter to publish jobs, spin-then-futex waiting with a
 * per-thread adaptive spin budget, and the counter+generation barrier the
 * executors call between dependent steps. A job may run on the first n
 * threads only (a program whose best thread count is below the pool's).
 *
 * Everything shared is a C11 atomic or is published through one (fn, arg,
 * stop), so ThreadSanitizer sees every hand-off; the futex calls only put
 * threads to sleep and wake them, they carry no ordering of their own. */
#define _GNU_SOURCE /* syscall, sched_getaffinity, pthread_setname_np */
#include "looptune/core.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A waiter pause-spins, then sleeps on a futex (job waits, completion waits
 * and barriers alike). The spin budget is capped by the pool's maximum: long
 * enough to bridge the gap between two lt_pool_run calls inside one token
 * (sampling, bookkeeping) and a barrier's load imbalance, short enough that an
 * idle pool costs no CPU. A pause is ~11 ns on this class of machine, so the
 * default cap is ~9k pause iterations. LT_POOL_SPIN_US overrides it (0 = sleep
 * at once); a pool with more threads than CPUs never spins. */
#define LT__POOL_SPIN_NS_DEFAULT 100000u
/* Below the cap each thread adapts its budget per kind of wait: back to the
 * cap after a wait that spinning satisfied, halved after one that had to
 * sleep, down to no spinning at all. On a loaded host the kernel may put two
 * pool threads on one CPU, and a spinner then only delays the peer it waits
 * for; even on separate CPUs, spinning spends the threads' fair share, so the
 * scheduler preempts them more. Measured with 2 threads at load ~14 on 2
 * CPUs: a futex barrier cost 4 us, a barrier spinning 5 us first 13 us. */
#define LT__SPIN_LEVELS 8 /* budget = cap >> level; level LEVELS-1: no spin */
/* With spinning off, every this-many-th wait spins the full cap again, so a
 * thread finds out when spinning pays again (after an idle spell, or once the
 * load is gone). */
#define LT__SPIN_PROBE_EVERY 256u
/* The clock is read once per this many pauses (~0.7 us) while spinning. */
#define LT__SPIN_CHECK 64

#define LT__POOL_MAX_THREADS 1024
#define LT__GEN_NTH_BITS 11 /* holds 1..LT__POOL_MAX_THREADS */
#define LT__GEN_NTH_MASK ((1u << LT__GEN_NTH_BITS) - 1)

typedef struct {
    lt_pool *pool;
    int ith;
} lt__worker;

struct lt_pool {
    int nth;
    int nstarted;        /* workers successfully created (threads[0..nstarted)) */
    uint64_t spin_ns;    /* spin budget before sleeping */
    pthread_t *threads;  /* [nth-1] */
    lt__worker *workers; /* [nth-1] */

    /* The job, written by the caller only while no active worker reads it:
     * before the release store of gen, after the job's workers reported done.
     * Only the job's active threads read them. */
    lt_pool_fn fn;
    void *arg;
    bool stop;
    int run_nth; /* threads of the current job (the barrier counts these) */

    /* Job publication: a sequence number in the high bits and the job's
     * thread count in the low LT__GEN_NTH_BITS, so a worker learns from one
     * load whether the job is its own. Invariant: gen changes only while
     * every worker of the previous job is waiting for it (pending == 0), so
     * an active worker sees every job it belongs to; a worker left out of a
     * job may sleep through it, it reads nothing else. The release store
     * publishes fn/arg/stop/run_nth; workers load it acquire. It is also the
     * futex word workers sleep on. */
    alignas(LT_CACHE_LINE) _Atomic uint32_t gen;
    _Atomic int sleepers; /* workers in (or entering) futex wait on gen */

    /* Completion: workers decrement with release once fn returned; the caller
     * reads 0 with acquire, so all of fn's writes are visible after run.
     * Futex word the caller sleeps on. */
    alignas(LT_CACHE_LINE) _Atomic uint32_t pending;
    _Atomic int caller_sleeping;

    /* Barrier: arrivals counted in bar_count; the last arriver resets it and
     * bumps bar_gen, which everybody else spins (then sleeps) on. Separate
     * lines so the spinners' reads of bar_gen do not fight the arrivals'
     * writes. */
    alignas(LT_CACHE_LINE) _Atomic uint32_t bar_count;
    alignas(LT_CACHE_LINE) _Atomic uint32_t bar_gen; /* futex word of barrier sleepers */
    _Atomic int bar_sleepers;

    alignas(LT_CACHE_LINE) _Atomic int running; /* guards against reentrant runs */
};

/* ---- spinning and sleeping -------------------------------------------------- */

typedef enum { WAIT_JOB, WAIT_DONE, WAIT_BARRIER, WAIT_KINDS } lt__wait_kind;

/* This thread's spin level per kind of wait (0, the zero-initialised
 * start, = the cap), and waits since it last probed with the full cap. */
static _Thread_local struct {
    unsigned char level;
    unsigned short since_probe;
} lt__spin_state[WAIT_KINDS];

typedef struct {
    uint64_t start;     /* ns; 0 until the first clock read */
    uint64_t budget_ns; /* give up spinning after this long */
    unsigned level;     /* the level budget_ns came from */
    lt__wait_kind kind;
    unsigned n;
} lt__spinner;

static lt__spinner spinner_start(const lt_pool *p, lt__wait_kind kind) {
    lt__spinner s = {.kind = kind, .level = lt__spin_state[kind].level};
    if (s.level == LT__SPIN_LEVELS - 1 &&
        ++lt__spin_state[kind].since_probe >= LT__SPIN_PROBE_EVERY) {
        lt__spin_state[kind].since_probe = 0;
        s.level = 0;
    }
    s.budget_ns = s.level == LT__SPIN_LEVELS - 1 ? 0 : p->spin_ns >> s.level;
    return s;
}

/* One pause of waiting; false once the budget is spent. */
static bool spinner_next(lt__spinner *s) {
    if (s->budget_ns == 0) return false;
    if (++s->n % LT__SPIN_CHECK == 0) {
        uint64_t now = lt_now_ns();
        if (s->start == 0) s->start = now;
        else if (now - s->start >= s->budget_ns) return false;
    }
    lt__cpu_relax();
    return true;
}

/* Records how the wait ended: spinning was enough, or it had to sleep. */
static void spinner_end(const lt__spinner *s, bool slept) {
    unsigned level = slept ? s->level + 1 : 0;
    if (level > LT__SPIN_LEVELS - 1) level = LT__SPIN_LEVELS - 1;
    lt__spin_state[s->kind].level = (unsigned char)level;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t expected) {
    /* Returns at once (EAGAIN) if *addr != expected: the kernel checks and
     * sleeps atomically, so a wake between our check and the call is not lost. */
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* A worker waits for the generation after `seen`. Sleeping protocol (with
 * publish() on the caller's side), both sides seq_cst:
 *   worker: sleepers++ ; read gen      ; if unchanged futex_wait(gen, seen)
 *   caller: gen++      ; read sleepers ; if > 0 futex_wake(gen)
 * In any interleaving either the worker reads the new gen or the caller reads
 * sleepers > 0 (and the futex's own check covers the gap before the wait). */
static uint32_t worker_wait(lt_pool *p, uint32_t seen, bool spin) {
    lt__spinner sp = spinner_start(p, WAIT_JOB);
    if (!spin) sp.budget_ns = 0; /* left out of the last job: likely of the next too */
    uint32_t g;
    while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && spinner_next(&sp)) {
    }
    spinner_end(&sp, g == seen);
    while (g == seen) {
        atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&p->gen, memory_order_seq_cst) == seen) futex_wait(&p->gen, seen);
        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
        g = atomic_load_explicit(&p->gen, memory_order_acquire);
    }
    return g;
}

/* The last worker to finish wakes the caller if it went to sleep; the same
 * Dekker pattern as above, on pending / caller_sleeping. */
static void worker_done(lt_pool *p) {
    if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_seq_cst) == 1 &&
        atomic_load_explicit(&p->caller_sleeping, memory_order_seq_cst))
        futex_wake_all(&p->pending);
}

static void caller_wait_done(lt_pool *p) {
    lt__spinner sp = spinner_start(p, WAIT_DONE);
    uint32_t left;
    while ((left = atomic_load_explicit(&p->pending, memory_order_acquire)) != 0 &&
           spinner_next(&sp)) {
    }
    spinner_end(&sp, left != 0);
    while (left != 0) {
        atomic_store_explicit(&p->caller_sleeping, 1, memory_order_seq_cst);
        left = atomic_load_explicit(&p->pending, memory_order_seq_cst);
        if (left != 0) futex_wait(&p->pending, left);
        atomic_store_explicit(&p->caller_sleeping, 0, memory_order_relaxed);
        left = atomic_load_explicit(&p->pending, memory_order_acquire);
    }
}

/* ---- workers ------------------------------------------------------------------ */

static void *worker_main(void *arg) {
    lt__worker *w = arg;
    lt_pool *p = w->pool;
    char name[16];
    snprintf(name, sizeof name, "lt-pool-%d", w->ith);
    pthread_setname_np(pthread_self(), name);

    uint32_t seen = 0; /* gen is 0 until the first job */
    bool left_out = false;
    for (;;) {
        uint32_t g = worker_wait(p, seen, !left_out);
        seen = g;
        int nth = (int)(g & LT__GEN_NTH_MASK);
        left_out = w->ith >= nth;
        if (left_out) continue; /* not this job's: touch nothing else */
        if (p->stop) break;
        p->fn(p->arg, w->ith, nth);
        worker_done(p);
    }
    return NULL;
}

/* Publishes the current fn/arg/stop as a new generation for threads
 * 0..nth-1 (workers 1..nth-1 and the caller). Only the caller writes gen. */
static void publish(lt_pool *p, int nth) {
    atomic_store_explicit(&p->pending, (uint32_t)(nth - 1), memory_order_relaxed);
    uint32_t g = atomic_load_explicit(&p->gen, memory_order_relaxed);
    uint32_t next = (((g >> LT__GEN_NTH_BITS) + 1) << LT__GEN_NTH_BITS) | (uint32_t)nth;
    atomic_store_explicit(&p->gen, next, memory_order_seq_cst); /* release: the job */
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) > 0) futex_wake_all(&p->gen);
}

static void stop_and_join(lt_pool *p) {
    if (p->nstarted > 0) {
        p->stop = true;
        publish(p, p->nstarted + 1);
        for (int i = 0; i < p->nstarted; i++) pthread_join(p->threads[i], NULL);
    }
    free(p->threads);
    free(p->workers);
    lt_aligned_free(p);
}

/* CPUs this process may run on (its affinity mask), else online CPUs. */
static int usable_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return lt_cpu()->logical_cpus;
}

/* With more threads than CPUs a spinning thread only delays the peer it waits
 * for (which needs its CPU), so such a pool sleeps at once. */
static uint64_t spin_budget_ns(bool oversubscribed) {
    const char *s = getenv("LT_POOL_SPIN_US");
    if (s && *s) {
        char *end;
        unsigned long long us = strtoull(s, &end, 10);
        if (*end == 0 && us <= 10000000ull) return (uint64_t)us * 1000u;
        lt_log(LT_LOG_WARN, "LT_POOL_SPIN_US=%s ignored (expected microseconds, <= 1e7)", s);
    }
    return oversubscribed ? 0 : LT__POOL_SPIN_NS_DEFAULT;
}

/* ---- public API ---------------------------------------------------------------- */

/* Creates the pool; *out owns nthreads-1 running workers, freed with
 * lt_pool_free. On failure nothing is left running and *out is NULL. */
int lt_pool_init(lt_pool **out, int nthreads) {
    if (!out) return lt_error(LT_EINVAL, "lt_pool_init: out is NULL");
    *out = NULL;
    if (nthreads < 1 || nthreads > LT__POOL_MAX_THREADS)
        return lt_error(LT_EINVAL, "thread pool: %d threads requested (expected 1..%d)", nthreads,
                        LT__POOL_MAX_THREADS);
    lt_pool *p = lt_aligned_alloc(LT_CACHE_LINE, sizeof *p);
    if (!p) return lt_error(LT_ENOMEM, "thread pool: out of memory");
    p->nth = nthreads;
    p->spin_ns = spin_budget_ns(nthreads > usable_cpus());
    if (nthreads > 1) {
        p->threads = calloc((size_t)nthreads - 1, sizeof *p->threads);
        p->workers = calloc((size_t)nthreads - 1, sizeof *p->workers);
        if (!p->threads || !p->workers) {
            stop_and_join(p);
            return lt_error(LT_ENOMEM, "thread pool: out of memory");
        }
    }
    for (int i = 0; i < nthreads - 1; i++) {
        p->workers[i] = (lt__worker){.pool = p, .ith = i + 1};
        int rc = pthread_create(&p->threads[i], NULL, worker_main, &p->workers[i]);
        if (rc != 0) {
            stop_and_join(p); /* joins the nstarted workers already running */
            return lt_error(rc == EAGAIN ? LT_ENOMEM : LT_EIO,
                            "thread pool: creating worker %d of %d: %s", i + 1, nthreads - 1,
                            strerror(rc));
        }
        p->nstarted = i + 1;
    }
    *out = p;
    return LT_OK;
}

/* Stops and joins the workers, then frees the pool. Not from inside a run. */
void lt_pool_free(lt_pool *pool) {
    if (!pool) return;
    LT_ASSERT(!atomic_load_explicit(&pool->running, memory_order_relaxed));
    stop_and_join(pool);
}

int lt_pool_size(const lt_pool *pool) { return pool->nth; }

void lt_pool_run(lt_pool *pool, lt_pool_fn fn, void *arg) { lt_pool_run_n(pool, 0, fn, arg); }

void lt_pool_run_n(lt_pool *pool, int nth, lt_pool_fn fn, void *arg) {
    LT_ASSERT(pool && fn);
    if (nth <= 0 || nth > pool->nth) nth = pool->nth;
    /* Not reentrant: a nested run from inside fn would deadlock. */
    LT_ASSERT(!atomic_exchange_explicit(&pool->running, 1, memory_order_relaxed));
    /* Safe to write: every worker of the previous job is past its reads
     * (pending was 0, read with acquire, when that run returned). */
    pool->run_nth = nth;
    if (nth > 1) {
        pool->fn = fn;
        pool->arg = arg;
        publish(pool, nth);
    }
    fn(arg, 0, nth);
    if (nth > 1) caller_wait_done(pool);
    atomic_store_explicit(&pool->running, 0, memory_order_relaxed);
}

/* Counter + generation barrier.
 * Ordering invariants:
 *  - g is read before the arrival (the acq_rel RMW keeps the earlier load
 *    before it), and bar_gen cannot move past g until this thread arrives,
 *    so g is exactly the current generation.
 *  - The arrivals form one release sequence on bar_count: the last arriver's
 *    acq_rel RMW acquires every other thread's pre-barrier writes; its
 *    (seq_cst, so also release) store of g+1 hands them and its own to the
 *    waiters' acquire loads of bar_gen.
 *  - bar_count is reset (relaxed) before that store, and a thread arrives at
 *    the next barrier only after acquiring g+1, so it counts from 0.
 *  - Sleeping: the same Dekker pattern as the job wait, seq_cst on both sides:
 *    waiter bar_sleepers++ then reads bar_gen; last arriver stores bar_gen
 *    then reads bar_sleepers; one of them sees the other. */
void lt_pool_barrier(lt_pool *pool) {
    const uint32_t nth = (uint32_t)pool->run_nth;
    if (nth == 1) return;
    uint32_t g = atomic_load_explicit(&pool->bar_gen, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&pool->bar_count, 1, memory_order_acq_rel) == nth - 1) {
        atomic_store_explicit(&pool->bar_count, 0, memory_order_relaxed);
        atomic_store_explicit(&pool->bar_gen, g + 1, memory_order_seq_cst);
        if (atomic_load_explicit(&pool->bar_sleepers, memory_order_seq_cst) > 0)
            futex_wake_all(&pool->bar_gen);
        return;
    }
    lt__spinner sp = spinner_start(pool, WAIT_BARRIER);
    while (atomic_load_explicit(&pool->bar_gen, memory_order_acquire) == g && spinner_next(&sp)) {
    }
    bool slept = false;
    while (atomic_load_explicit(&pool->bar_gen, memory_order_acquire) == g) {
        slept = true;
        atomic_fetch_add_explicit(&pool->bar_sleepers, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&pool->bar_gen, memory_order_seq_cst) == g)
            futex_wait(&pool->bar_gen, g);
        atomic_fetch_sub_explicit(&pool->bar_sleepers, 1, memory_order_relaxed);
    }
    spinner_end(&sp, slept);
}
