/* A minimal persistent thread team for the benchmarks (the library's thread
 * pool is used once it is available): nth-1 spinning workers plus the caller,
 * team_run(fn, arg) runs fn(arg, ith, nth) on all of them, team_barrier()
 * meets all of them inside fn. Header-only so each bench stays one file. */
#ifndef LT_BENCH_TEAM_H
#define LT_BENCH_TEAM_H

#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>

#define TEAM_MAX 8

typedef void (*team_fn)(void *arg, int ith, int nth);

typedef struct {
    int nth;
    pthread_t th[TEAM_MAX];
    team_fn fn;
    void *arg;
    _Alignas(64) atomic_int gen;     /* bumped (release) to start a run */
    _Alignas(64) atomic_int done;    /* workers finished with this run */
    _Alignas(64) atomic_int arrived; /* barrier count */
    _Alignas(64) atomic_int sense;   /* barrier generation */
    atomic_bool quit;
} team;

typedef struct {
    team *t;
    int ith;
} team_slot;

static team_slot team_slots[TEAM_MAX];

static inline void *team_worker(void *p) {
    team_slot *s = p;
    team *t = s->t;
    int seen = 0;
    for (;;) {
        int g;
        while ((g = atomic_load_explicit(&t->gen, memory_order_acquire)) == seen) _mm_pause();
        seen = g;
        if (atomic_load(&t->quit)) return NULL;
        t->fn(t->arg, s->ith, t->nth);
        atomic_fetch_add_explicit(&t->done, 1, memory_order_release);
    }
}

static inline void team_init(team *t, int nth) {
    t->nth = nth;
    atomic_init(&t->gen, 0);
    atomic_init(&t->done, 0);
    atomic_init(&t->arrived, 0);
    atomic_init(&t->sense, 0);
    atomic_init(&t->quit, false);
    for (int i = 1; i < nth; i++) {
        team_slots[i] = (team_slot){t, i};
        pthread_create(&t->th[i], NULL, team_worker, &team_slots[i]);
    }
}

static inline void team_run(team *t, team_fn fn, void *arg) {
    t->fn = fn;
    t->arg = arg;
    atomic_store_explicit(&t->done, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->gen, 1, memory_order_release);
    fn(arg, 0, t->nth);
    while (atomic_load_explicit(&t->done, memory_order_acquire) != t->nth - 1) _mm_pause();
}

/* Sense-reversing spin barrier; call from every thread of the run. */
static inline void team_barrier(team *t) {
    if (t->nth == 1) return;
    int s = atomic_load_explicit(&t->sense, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&t->arrived, 1, memory_order_acq_rel) == t->nth - 1) {
        atomic_store_explicit(&t->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&t->sense, s + 1, memory_order_release);
    } else {
        while (atomic_load_explicit(&t->sense, memory_order_acquire) == s) _mm_pause();
    }
}

static inline void team_free(team *t) {
    atomic_store(&t->quit, true);
    atomic_fetch_add_explicit(&t->gen, 1, memory_order_release);
    for (int i = 1; i < t->nth; i++) pthread_join(t->th[i], NULL);
}

#endif
