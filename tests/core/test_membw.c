/* Memory bandwidth: each ISA's triad and read kernels against scalar
 * references (every length and alignment of the tail), the measurement's read
 * checksum against the closed form of the array contents (so every byte was
 * read, whatever the thread split), sane figures, and the cache effect. */
#include "looptune/core.h"
#include "core/membw_internal.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Sanitizers instrument every load and store: the kernels still run (and are
 * checked) but their speed says nothing, so speed assertions are skipped. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

/* sum_{i<n} (i mod P), P = LT__MEMBW_PERIOD */
static double closed_form_sum(size_t n) {
    const size_t p = LT__MEMBW_PERIOD;
    size_t q = n / p, r = n % p;
    return (double)q * (double)(p * (p - 1) / 2) + (double)(r * (r ? r - 1 : 0) / 2);
}

static void test_closed_form_itself(void) {
    double s = 0;
    for (size_t i = 0; i < 5000; i++) s += lt__membw_value(i);
    ASSERT_NEAR(closed_form_sum(5000), s, 0);
    ASSERT_NEAR(closed_form_sum(0), 0, 0);
    ASSERT_NEAR(closed_form_sum(1), 0, 0);
    ASSERT_NEAR(closed_form_sum(3), 3, 0);
}

static void test_kernels(lt_isa isa) {
    static const size_t lens[] = {0, 1, 3, 7, 8, 9, 15, 31, 33, 63, 64, 65, 127, 1000, 4099};
    const size_t cap = 4099 + 2;
    double *x = malloc(cap * sizeof *x), *b = malloc(cap * sizeof *b);
    double *c = malloc(cap * sizeof *c), *a = malloc(cap * sizeof *a);
    if (!x || !a || !b || !c) {
        ASSERT_TRUE(!"out of memory");
        goto out;
    }
    lt__membw_read_fn read = lt__membw_read_for(isa);
    lt__membw_triad_fn triad = lt__membw_triad_for(isa);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        for (size_t off = 0; off < 2; off++) { /* aligned and misaligned by 8 bytes */
            size_t n = lens[li];
            /* read, integer contents: exact */
            for (size_t i = 0; i < n; i++) x[off + i] = lt__membw_value(i);
            ASSERT_NEAR(read(x + off, n), closed_form_sum(n), 0);
            /* read, fractional contents: against a long double reference */
            long double ref = 0;
            for (size_t i = 0; i < n; i++) {
                x[off + i] = sin((double)i * 0.37) * 3.5;
                ref += x[off + i];
            }
            ASSERT_NEAR(read(x + off, n), (double)ref, 1e-12 * (double)(n + 1));
            /* triad, integer contents: exact; the element past n is untouched */
            for (size_t i = 0; i < n + 1; i++) {
                b[off + i] = (double)(i % 97);
                c[off + i] = (double)(i % 13) - 6.0;
                a[off + i] = -12345.0;
            }
            triad(a + off, b + off, c + off, 3.0, n);
            int bad = 0;
            for (size_t i = 0; i < n; i++) bad += a[off + i] != b[off + i] + 3.0 * c[off + i];
            ASSERT_EQ(bad, 0);
            ASSERT_NEAR(a[off + n], -12345.0, 0);
        }
    }
out:
    free(x);
    free(a);
    free(b);
    free(c);
}

static void test_errors(void) {
    lt_membw bw;
    ASSERT_EQ(lt_membw_measure(NULL, 1 << 20, 0, &bw), LT_EINVAL);
    ASSERT_EQ(lt_membw_measure(NULL, 1 << 20, 1, NULL), LT_EINVAL);
    ASSERT_EQ(lt_membw_measure(NULL, 100, 1, &bw), LT_EINVAL);
    ASSERT_TRUE(lt_errmsg()[0] != 0);
}

/* Measures and checks figures are sane and the read scan summed every element. */
static lt_membw measure_checked(lt_pool *pool, size_t bytes, int reps) {
    lt_membw bw = {0};
    double sum = -1;
    ASSERT_EQ(lt__membw_measure_sum(pool, bytes, reps, &bw, &sum), LT_OK);
    ASSERT_TRUE(isfinite(bw.triad_gb_s) && bw.triad_gb_s > 0);
    ASSERT_TRUE(isfinite(bw.read_gb_s) && bw.read_gb_s > 0);
    size_t used = bytes ? bytes : (size_t)256 << 20; /* 0 = the default size */
    ASSERT_NEAR(sum, closed_form_sum(used / sizeof(double)), 0);
    return bw;
}

static void test_small_splits(void) {
    /* odd sizes: the last chunk is partial, the vector tail is masked */
    static const size_t sizes[] = {4096, 4096 + 8, (1 << 20) + 24, 3 * 4096 + 8 * 13};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        measure_checked(NULL, sizes[s], 2);
        for (int n = 1; n <= 3; n++) {
            lt_pool *pool = NULL;
            ASSERT_EQ(lt_pool_init(&pool, n), LT_OK);
            if (!pool) continue;
            measure_checked(pool, sizes[s], 2);
            lt_pool_free(pool);
        }
    }
    /* large enough for huge-page chunks per thread, with a partial last one */
    lt_pool *pool = NULL;
    ASSERT_EQ(lt_pool_init(&pool, 2), LT_OK);
    if (pool) {
        measure_checked(pool, ((size_t)64 << 20) + 24, 1);
        lt_pool_free(pool);
    }
    /* the portable path through the whole measurement */
    lt_isa_force(LT_ISA_PORTABLE);
    measure_checked(NULL, (1 << 20) + 8, 2);
    lt_isa_force((lt_isa)(LT_ISA_COUNT - 1)); /* clamped back to what the CPU has */
    ASSERT_EQ(lt_isa_active(), lt_isa_detect());
}

static void test_large(int nth) {
    lt_pool *pool = NULL;
    ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
    if (!pool) return;
    const bool slowed = SANITIZED || lt_test_emulated(); /* not the machine's own speed */
    lt_membw small = measure_checked(pool, 1 << 20, slowed ? 5 : 200);
    lt_membw big = measure_checked(pool, 0, slowed ? 1 : 3); /* default 256 MiB per array */
    printf("membw %d thread(s): 256 MiB triad %.1f GB/s, read %.1f GB/s; "
           "1 MiB triad %.1f GB/s, read %.1f GB/s\n",
           nth, big.triad_gb_s, big.read_gb_s, small.triad_gb_s, small.read_gb_s);
    if (lt_test_emulated() && nth == 1)
        lt_test_skip("bandwidth bounds", "under an emulator the figures are not the machine's");
    if (!slowed) {
        ASSERT_TRUE(big.read_gb_s >= 1.0);
        ASSERT_TRUE(big.triad_gb_s >= 1.0);
        /* Arrays that fit in cache stream faster than DRAM-sized ones.
         * Checked with one thread only: on a loaded 2-CPU host the two
         * threads of a ~10 us run are rarely scheduled together, so the
         * 2-thread cached figure is at the mercy of other processes. */
        if (nth == 1) ASSERT_TRUE(small.triad_gb_s > big.triad_gb_s);
    }
    lt_pool_free(pool);
}

int main(void) {
    test_closed_form_itself();
    for (int isa = 0; isa <= (int)lt_isa_detect(); isa++) test_kernels((lt_isa)isa);
    test_errors();
    test_small_splits();
    test_large(1);
    test_large(2);
    return lt_test_finish();
}
