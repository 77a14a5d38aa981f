/* Thread pool: every ith runs exactly once per run, many consecutive runs,
 * barrier ordering against a closed form, reuse after the workers slept,
 * repeated init/free, and argument errors. */
#include "looptune/core.h"
#include "test.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* An address-space limit breaks the sanitizers' shadow memory. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

#define MAX_TH 16

/* ---- each ith exactly once -------------------------------------------- */

typedef struct {
    _Atomic int hits[MAX_TH]; /* runs of fn per ith */
    _Atomic int bad_nth;      /* calls that saw the wrong nth or ith */
    int expect_nth;
} once_ctx;

static void once_fn(void *arg, int ith, int nth) {
    once_ctx *c = arg;
    if (nth != c->expect_nth || ith < 0 || ith >= nth) {
        atomic_fetch_add(&c->bad_nth, 1);
        return;
    }
    atomic_fetch_add_explicit(&c->hits[ith], 1, memory_order_relaxed);
}

static void test_each_ith_once(int n, int runs) {
    lt_pool *pool = NULL;
    ASSERT_EQ(lt_pool_init(&pool, n), LT_OK);
    if (!pool) return;
    ASSERT_EQ(lt_pool_size(pool), n);
    once_ctx c = {.expect_nth = n};
    int mismatch = 0;
    for (int r = 0; r < runs; r++) {
        lt_pool_run(pool, once_fn, &c);
        /* after run returns, every thread's increment must be visible */
        for (int i = 0; i < n; i++)
            if (atomic_load_explicit(&c.hits[i], memory_order_relaxed) != r + 1) mismatch++;
    }
    ASSERT_EQ(mismatch, 0);
    ASSERT_EQ(atomic_load(&c.bad_nth), 0);
    for (int i = 0; i < n; i++) ASSERT_EQ(atomic_load(&c.hits[i]), runs);
    lt_pool_free(pool);
}

/* ---- barrier ordering --------------------------------------------------- */

/* Phase k: thread i writes slot[i] = (k+1)*(i+1) with plain stores, then
 * barrier; every thread then sums all slots (plain loads) and must see
 * (k+1) * n(n+1)/2; then a second barrier before the slots are rewritten. */
#define PHASES 200
typedef struct {
    struct {
        _Alignas(64) long long v; /* one line per thread: no false sharing */
    } slot[MAX_TH];
    struct {
        _Alignas(64) int errors;
    } err[MAX_TH];
    int run;
} bar_ctx;

typedef struct {
    bar_ctx c;
    lt_pool *pool;
} bar_job;

static void barrier_job(void *arg, int ith, int nth) {
    bar_job *j = arg;
    bar_ctx *c = &j->c;
    const long long tri = (long long)nth * (nth + 1) / 2;
    for (int k = 0; k < PHASES; k++) {
        long long mult = (long long)j->c.run * PHASES + k + 1;
        c->slot[ith].v = mult * (ith + 1);
        lt_pool_barrier(j->pool);
        long long sum = 0;
        for (int i = 0; i < nth; i++) sum += c->slot[i].v;
        if (sum != mult * tri) c->err[ith].errors++;
        lt_pool_barrier(j->pool);
    }
}

static void test_barrier(int n, int runs) {
    bar_job j = {0};
    ASSERT_EQ(lt_pool_init(&j.pool, n), LT_OK);
    if (!j.pool) return;
    for (int r = 0; r < runs; r++) {
        j.c.run = r;
        lt_pool_run(j.pool, barrier_job, &j);
    }
    int errors = 0;
    for (int i = 0; i < n; i++) errors += j.c.err[i].errors;
    ASSERT_EQ(errors, 0);
    /* the final phase's values are visible to the caller after run */
    long long last = (long long)(runs - 1) * PHASES + PHASES;
    for (int i = 0; i < n; i++) ASSERT_EQ(j.c.slot[i].v, last * (i + 1));
    lt_pool_free(j.pool);
}

/* ---- jobs on part of the pool ------------------------------------------- */

/* Runs of lt_pool_run_n with a thread count that changes from run to run
 * (1, all, in between, out-of-range meaning all): exactly threads 0..k-1 run,
 * each once, seeing nth == k, and the barrier counts only them (the barrier
 * job's closed form holds for k). */
static void test_run_subset(int n, int runs) {
    bar_job j = {0};
    ASSERT_EQ(lt_pool_init(&j.pool, n), LT_OK);
    if (!j.pool) return;
    once_ctx c = {0};
    int expect[MAX_TH] = {0}, bad = 0;
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)n;
    for (int r = 0; r < runs; r++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((x >> 33) % (uint64_t)(n + 2)); /* 0 and n+1 mean all */
        int eff = k < 1 || k > n ? n : k;
        c.expect_nth = eff;
        lt_pool_run_n(j.pool, k, once_fn, &c);
        for (int i = 0; i < eff; i++) expect[i]++;
        for (int i = 0; i < n; i++)
            if (atomic_load_explicit(&c.hits[i], memory_order_relaxed) != expect[i]) bad++;
        if (r % 50 == 0) { /* a barrier job on the same subset */
            j.c.run = r;
            lt_pool_run_n(j.pool, k, barrier_job, &j);
            long long last = (long long)r * PHASES + PHASES;
            for (int i = 0; i < eff; i++) bad += j.c.slot[i].v != last * (i + 1);
        }
    }
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(atomic_load(&c.bad_nth), 0);
    int errors = 0;
    for (int i = 0; i < n; i++) errors += j.c.err[i].errors;
    ASSERT_EQ(errors, 0);
    lt_pool_free(j.pool);
}

/* ---- plain data written by workers is visible after run ---------------- */

typedef struct {
    int *data; /* [n] */
    int n, value;
} fill_ctx;

static void fill_fn(void *arg, int ith, int nth) {
    fill_ctx *c = arg;
    int lo = (int)((long long)c->n * ith / nth), hi = (int)((long long)c->n * (ith + 1) / nth);
    for (int i = lo; i < hi; i++) c->data[i] = c->value + i;
}

static void test_reuse_after_sleep(int n) {
    lt_pool *pool = NULL;
    ASSERT_EQ(lt_pool_init(&pool, n), LT_OK);
    if (!pool) return;
    int data[1000];
    fill_ctx c = {.data = data, .n = 1000};
    for (int r = 0; r < 4; r++) {
        /* 50 ms: far past the spin budget, so workers are asleep in the kernel */
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        c.value = r * 7919;
        lt_pool_run(pool, fill_fn, &c);
        int bad = 0;
        for (int i = 0; i < 1000; i++) bad += data[i] != r * 7919 + i;
        ASSERT_EQ(bad, 0);
    }
    lt_pool_free(pool);
}

static void test_init_free_many(void) {
    int failures = 0;
    for (int r = 0; r < 200; r++) {
        lt_pool *pool = NULL;
        int n = 1 + r % 4;
        if (lt_pool_init(&pool, n) != LT_OK) {
            failures++;
            continue;
        }
        if (r % 2) { /* half the pools run a job, half are freed untouched */
            once_ctx c = {.expect_nth = n};
            lt_pool_run(pool, once_fn, &c);
            for (int i = 0; i < n; i++) failures += atomic_load(&c.hits[i]) != 1;
        }
        lt_pool_free(pool);
    }
    ASSERT_EQ(failures, 0);
}

static void test_errors(void) {
    lt_pool *pool = (lt_pool *)&pool; /* must be reset to NULL on failure */
    ASSERT_EQ(lt_pool_init(&pool, 0), LT_EINVAL);
    ASSERT_TRUE(pool == NULL);
    ASSERT_EQ(lt_pool_init(&pool, -3), LT_EINVAL);
    ASSERT_TRUE(lt_errmsg()[0] != 0);
    lt_pool_free(NULL); /* no-op */
}

/* Threads of this process, from /proc/self/task. */
static int count_threads(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Child: caps the address space a little above current use so that thread
 * stacks run out part way through lt_pool_init; the started workers must be
 * joined and the error returned. Exit code = first failed step. */
static int partial_pool_child(void) {
    if (count_threads() != 1) return 10;
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) return 11;
    fclose(f);
    rlim_t cap = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (rlim_t)(40 << 20);
    struct rlimit rl = {cap, cap};
    if (setrlimit(RLIMIT_AS, &rl) != 0) return 12;
    lt_pool *pool = (lt_pool *)&pool;
    int rc = lt_pool_init(&pool, 256);
    if (rc == LT_OK) return 13;
    if (pool != NULL) return 14;
    int failed_at = 0;
    if (sscanf(lt_errmsg(), "thread pool: creating worker %d", &failed_at) != 1) return 15;
    if (failed_at < 2) return 16; /* no worker was running: cleanup not exercised */
    if (count_threads() != 1) return 17; /* workers leaked */
    return 0;
}

static void test_partial_pool_cleanup(void) {
    if (SANITIZED) return;
    if (lt_test_emulated()) {
        lt_test_skip("partial pool cleanup", "an emulator's own threads and address-space "
                                             "reservation defeat its thread count and RLIMIT_AS cap");
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(partial_pool_child());
    ASSERT_TRUE(pid > 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
}

static void test_single_thread_barrier(void) {
    bar_job j = {0};
    ASSERT_EQ(lt_pool_init(&j.pool, 1), LT_OK);
    if (!j.pool) return;
    lt_pool_run(j.pool, barrier_job, &j); /* barrier is a no-op: must not hang */
    ASSERT_EQ(j.c.err[0].errors, 0);
    ASSERT_EQ(j.c.slot[0].v, PHASES);
    lt_pool_free(j.pool);
}

int main(void) {
    test_errors();
    test_partial_pool_cleanup();
    static const int sizes[] = {1, 2, 3, 4, 8};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        test_each_ith_once(n, 10000);
        test_barrier(n, n > 2 ? 10 : 50);
        test_reuse_after_sleep(n);
        test_run_subset(n, 3000);
    }
    /* The sleeping paths on their own (every wait sleeps at once), and mixed
     * with a 1 us spin so wake-ups race with the spinners giving up. */
    static const char *const spins[] = {"0", "1"};
    for (size_t k = 0; k < 2; k++) {
        setenv("LT_POOL_SPIN_US", spins[k], 1);
        test_each_ith_once(2, 3000);
        test_each_ith_once(3, 1000);
        test_barrier(2, 20);
        test_barrier(4, 5);
        test_run_subset(3, 1000);
    }
    unsetenv("LT_POOL_SPIN_US");
    test_single_thread_barrier();
    test_init_free_many();
    return lt_test_finish();
}
