/* Thread-pool costs, each beside its baseline: ns per lt_pool_barrier vs
 * pthread_barrier_wait, ns per empty lt_pool_run vs pthread_create+join,
 * wake-up latency after idle gaps with the default spin vs sleeping at once,
 * CPU burnt by an idle pool, and the cost of one pause instruction (which
 * sets the spin budget). min/median/max over repeated batches. Then host
 * memory bandwidth (lt_membw_measure, 256 MiB arrays) per thread count.
 *
 * usage: bench_pool [max_threads [membw_samples]]   (defaults 2, 5; 0 samples skips) */
#include "looptune/core.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BATCHES 15

/* One line of min/median/max of v[0..n) in unit. */
static void report(const char *what, int nth, const double *v, int n, const char *unit) {
    lt_summary s = lt_summarize(v, n);
    printf("%-40s threads=%d  min %10.1f  median %10.1f  max %10.1f %s\n", what, nth, s.min,
           s.median, s.max, unit);
}

static void sleep_ns(long ns) {
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

static double cpu_time_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- pause ------------------------------------------------------------------ */

static void bench_pause(void) {
    double v[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        uint64_t t0 = lt_now_ns();
        for (int i = 0; i < 100000; i++) __builtin_ia32_pause();
        v[b] = (double)(lt_now_ns() - t0) / 100000.0;
    }
    report("pause instruction", 1, v, BATCHES, "ns");
}

/* ---- barriers ------------------------------------------------------------------ */

#define BARRIERS_PER_BATCH 20000

typedef struct {
    lt_pool *pool;
    pthread_barrier_t pbar;
    int use_pthread;
    uint64_t ns; /* written by ith 0 */
} barrier_job;

static void barrier_fn(void *arg, int ith, int nth) {
    barrier_job *j = arg;
    (void)nth;
    /* one warm-up barrier so every thread is in the loop before timing */
    if (j->use_pthread) pthread_barrier_wait(&j->pbar);
    else lt_pool_barrier(j->pool);
    uint64_t t0 = lt_now_ns();
    if (j->use_pthread)
        for (int i = 0; i < BARRIERS_PER_BATCH; i++) pthread_barrier_wait(&j->pbar);
    else
        for (int i = 0; i < BARRIERS_PER_BATCH; i++) lt_pool_barrier(j->pool);
    if (ith == 0) j->ns = lt_now_ns() - t0;
}

static void bench_barrier(lt_pool *pool, int use_pthread) {
    int nth = lt_pool_size(pool);
    barrier_job j = {.pool = pool, .use_pthread = use_pthread};
    if (use_pthread) pthread_barrier_init(&j.pbar, NULL, (unsigned)nth);
    double v[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        lt_pool_run(pool, barrier_fn, &j);
        v[b] = (double)j.ns / BARRIERS_PER_BATCH;
    }
    if (use_pthread) pthread_barrier_destroy(&j.pbar);
    report(use_pthread ? "barrier: pthread_barrier_wait (baseline)" : "barrier: lt_pool_barrier",
           nth, v, BATCHES, "ns");
}

/* ---- dispatch --------------------------------------------------------------------- */

static void empty_fn(void *arg, int ith, int nth) {
    (void)arg;
    (void)ith;
    (void)nth;
}

static void bench_run_hot(lt_pool *pool) {
    enum { RUNS = 5000 };
    double v[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        uint64_t t0 = lt_now_ns();
        for (int r = 0; r < RUNS; r++) lt_pool_run(pool, empty_fn, NULL);
        v[b] = (double)(lt_now_ns() - t0) / RUNS;
    }
    report("lt_pool_run, back to back", lt_pool_size(pool), v, BATCHES, "ns");
}

static void *empty_thread(void *arg) {
    (void)arg;
    return NULL;
}

/* The baseline: a fresh thread per job for the nth-1 helpers. */
static void bench_create_join(int nth) {
    enum { RUNS = 200 };
    double v[BATCHES];
    pthread_t t[64];
    for (int b = 0; b < BATCHES; b++) {
        uint64_t t0 = lt_now_ns();
        for (int r = 0; r < RUNS; r++) {
            for (int i = 0; i < nth - 1; i++) pthread_create(&t[i], NULL, empty_thread, NULL);
            for (int i = 0; i < nth - 1; i++) pthread_join(t[i], NULL);
        }
        v[b] = (double)(lt_now_ns() - t0) / RUNS;
    }
    report("pthread_create+join per job (baseline)", nth, v, BATCHES, "ns");
}

/* Latency of one empty run after an idle gap: within the spin budget the
 * workers are still spinning; past it they sleep and need a futex wake. */
static void bench_run_after_gap(int nth, long gap_ns, const char *spin_us) {
    if (spin_us) setenv("LT_POOL_SPIN_US", spin_us, 1);
    else unsetenv("LT_POOL_SPIN_US");
    lt_pool *pool = NULL;
    if (lt_pool_init(&pool, nth) != LT_OK) return;
    enum { N = 41 };
    double v[N];
    lt_pool_run(pool, empty_fn, NULL);
    for (int b = 0; b < N; b++) {
        sleep_ns(gap_ns);
        uint64_t t0 = lt_now_ns();
        lt_pool_run(pool, empty_fn, NULL);
        v[b] = (double)(lt_now_ns() - t0);
    }
    lt_pool_free(pool);
    unsetenv("LT_POOL_SPIN_US");
    char what[96];
    snprintf(what, sizeof what, "run after %ld us idle, spin %s", gap_ns / 1000,
             spin_us ? "0 (sleep)" : "default");
    report(what, nth, v, N, "ns");
}

/* CPU seconds the whole process burns per wall second while the pool idles
 * (after one run): the spin budget once, then ~0. */
static void bench_idle_cpu(int nth) {
    lt_pool *pool = NULL;
    if (lt_pool_init(&pool, nth) != LT_OK) return;
    lt_pool_run(pool, empty_fn, NULL);
    double c0 = cpu_time_s(), w0 = lt_now_s();
    sleep_ns(200 * 1000 * 1000L);
    double c1 = cpu_time_s(), w1 = lt_now_s();
    lt_pool_free(pool);
    printf("%-40s threads=%d  %.2f ms CPU over %.0f ms idle\n", "idle pool after one run", nth,
           (c1 - c0) * 1e3, (w1 - w0) * 1e3);
}

/* Each sample is lt_membw_measure's best of 3; samples show the spread. */
static void bench_membw(int nth, int samples) {
    lt_pool *pool = NULL;
    if (lt_pool_init(&pool, nth) != LT_OK) return;
    double triad[32], read[32];
    int n = 0;
    for (; n < samples && n < 32; n++) {
        lt_membw bw;
        int rc = lt_membw_measure(pool, 0, 3, &bw);
        if (rc != LT_OK) {
            fprintf(stderr, "bench_pool: %s: %s\n", lt_strerror(rc), lt_errmsg());
            break;
        }
        triad[n] = bw.triad_gb_s;
        read[n] = bw.read_gb_s;
    }
    lt_pool_free(pool);
    if (n == 0) return;
    report("membw triad 256 MiB (3 arrays counted)", nth, triad, n, "GB/s");
    report("membw read 256 MiB", nth, read, n, "GB/s");
}

int main(int argc, char **argv) {
    int max_threads = argc > 1 ? atoi(argv[1]) : 2;
    int membw_samples = argc > 2 ? atoi(argv[2]) : 5;
    if (max_threads < 1 || max_threads > 64 || membw_samples < 0 || membw_samples > 32) {
        fprintf(stderr, "usage: bench_pool [max_threads 1..64 [membw_samples 0..32]]\n");
        return 2;
    }
    /* the host is shared: say how busy it was */
    char load[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(load, sizeof load, f)) load[0] = 0;
        fclose(f);
    }
    char host[512];
    lt_host_fingerprint(host, sizeof host);
    printf("host %s\nloadavg %s", host, load);
    bench_pause();
    for (int nth = 1; nth <= max_threads; nth++) {
        lt_pool *pool = NULL;
        int rc = lt_pool_init(&pool, nth);
        if (rc != LT_OK) {
            fprintf(stderr, "bench_pool: %s: %s\n", lt_strerror(rc), lt_errmsg());
            return 1;
        }
        bench_barrier(pool, 0);
        bench_barrier(pool, 1);
        bench_run_hot(pool);
        lt_pool_free(pool);
        bench_create_join(nth);
        if (nth > 1) {
            static const long gaps_ns[] = {10000, 100000, 5000000};
            for (size_t g = 0; g < sizeof gaps_ns / sizeof gaps_ns[0]; g++) {
                bench_run_after_gap(nth, gaps_ns[g], NULL);
                bench_run_after_gap(nth, gaps_ns[g], "0");
            }
            bench_idle_cpu(nth);
        }
    }
    if (membw_samples > 0)
        for (int nth = 1; nth <= max_threads; nth++) bench_membw(nth, membw_samples);
    return 0;
}
