/* The telemetry ring: FIFO order and contents, drops counted when full (and
 * only then), reuse across wrap-around, and a producer and a consumer thread
 * running concurrently (run under ThreadSanitizer by `make test`): every
 * element arrives once, in order, intact, and arrived + dropped = pushed. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "telemetry/ring.h"
#include "telemetry/tel_internal.h"
#include "test.h"

static lt__tel_rec rec_of(uint64_t i) {
    /* every field derived from i, so a torn or stale element shows */
    return (lt__tel_rec){.step = (uint32_t)(i / 7), .node = (int32_t)(i % 7), .t0 = i * 3 + 1,
                         .t1 = i * 3 + 2, .wait = ~i};
}

static bool rec_ok(const lt__tel_rec *r, uint64_t i) {
    lt__tel_rec w = rec_of(i);
    return r->step == w.step && r->node == w.node && r->t0 == w.t0 && r->t1 == w.t1 &&
           r->wait == w.wait;
}

static void test_fill_drop_wrap(void) {
    lt__ring r;
    ASSERT_EQ(lt__ring_init(&r, 5, sizeof(lt__tel_rec)), LT_OK);
    ASSERT_EQ(lt__ring_cap(&r), 8); /* rounded up to a power of two */
    uint64_t next_push = 0, next_pop = 0;
    for (int round = 0; round < 5; round++) {
        /* fill: exactly cap pushes succeed, then 3 are dropped */
        int ok = 0;
        for (int i = 0; i < 11; i++) {
            lt__tel_rec e = rec_of(next_push);
            if (lt__ring_push(&r, &e, sizeof e)) {
                ok++;
                next_push++;
            }
        }
        ASSERT_EQ(ok, 8);
        ASSERT_EQ(lt__ring_dropped(&r), 4 * round + 3);
        /* take 5 (leaving 3), in order */
        uint64_t first, last;
        lt__ring_peek(&r, &first, &last);
        ASSERT_EQ(last - first, 8);
        int bad = 0;
        for (uint64_t i = first; i < first + 5; i++)
            bad += !rec_ok(lt__ring_at(&r, i), next_pop++);
        ASSERT_EQ(bad, 0);
        lt__ring_release(&r, first + 5);
        /* room for exactly 5 more */
        ok = 0;
        for (int i = 0; i < 6; i++) {
            lt__tel_rec e = rec_of(next_push);
            if (lt__ring_push(&r, &e, sizeof e)) {
                ok++;
                next_push++;
            }
        }
        ASSERT_EQ(ok, 5);
        ASSERT_EQ(lt__ring_dropped(&r), 4 * round + 4);
        lt__ring_peek(&r, &first, &last);
        ASSERT_EQ(last - first, 8);
        for (uint64_t i = first; i < last; i++) bad += !rec_ok(lt__ring_at(&r, i), next_pop++);
        ASSERT_EQ(bad, 0);
        lt__ring_release(&r, last);
        lt__ring_peek(&r, &first, &last);
        ASSERT_EQ(last - first, 0);
    }
    lt__ring_free(&r);
}


typedef struct {
    lt__ring r;
    _Atomic bool done;
    bool retry;          /* push again until the element gets in (nothing is lost) */
    uint64_t n;          /* elements to push */
    uint64_t pushed_ok;  /* elements that got in */
    uint64_t attempts;   /* pushes tried */
} spsc;

static void *producer(void *arg) {
    spsc *s = arg;
    for (uint64_t i = 0; i < s->n; i++) {
        /* only elements that got in carry the next sequence number */
        lt__tel_rec e = rec_of(s->pushed_ok);
        bool in;
        for (;;) {
            s->attempts++;
            in = lt__ring_push(&s->r, &e, sizeof e);
            if (in || !s->retry) break;
            sched_yield(); /* two CPUs, maybe shared: let the consumer run */
        }
        if (in) s->pushed_ok++;
    }
    atomic_store_explicit(&s->done, true, memory_order_release);
    return NULL;
}

static void test_spsc_threads(uint64_t cap, bool retry, uint64_t n) {
    spsc s = {.retry = retry, .n = n};
    ASSERT_EQ(lt__ring_init(&s.r, cap, sizeof(lt__tel_rec)), LT_OK);
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, producer, &s), 0);
    uint64_t got = 0, bad = 0;
    for (;;) {
        bool done = atomic_load_explicit(&s.done, memory_order_acquire);
        uint64_t first, last;
        lt__ring_peek(&s.r, &first, &last);
        /* in small batches, so the ring keeps filling and emptying */
        if (last - first > 100) last = first + 100;
        for (uint64_t i = first; i < last; i++) bad += !rec_ok(lt__ring_at(&s.r, i), got++);
        lt__ring_release(&s.r, last);
        if (done && first == last) {
            lt__ring_peek(&s.r, &first, &last);
            if (first == last) break;
        }
    }
    pthread_join(th, NULL);
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(got, s.pushed_ok);
    ASSERT_EQ(got + lt__ring_dropped(&s.r), s.attempts);
    if (retry) ASSERT_EQ(got, n);
    else ASSERT_EQ(s.attempts, n);
    printf("spsc cap %llu%s: %llu arrived, %llu dropped\n", (unsigned long long)cap,
           retry ? " (retrying)" : "",
           (unsigned long long)got, (unsigned long long)lt__ring_dropped(&s.r));
    lt__ring_free(&s.r);
}

int main(void) {
    ASSERT_EQ(sizeof(lt__tel_rec), 32);
    test_fill_drop_wrap();
    test_spsc_threads(16, false, 1000000);      /* mostly full: many drops */
    test_spsc_threads(1 << 16, false, 1000000); /* more room */
    test_spsc_threads(64, true, 100000);        /* lossless hand-over through a small ring */
    return lt_test_finish();
}
