/* Minimal assertion macros for looptune's C tests: print both sides and
 * the location, count failures, never compiled out. A test binary calls its
 * cases from main and returns lt_test_finish(). */
#ifndef LT_TEST_H
#define LT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int lt_test_failures;
static int lt_test_checks;

#define LT__FAIL(...)                                                          \
    do {                                                                       \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                        \
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
        lt_test_failures++;                                                    \
    } while (0)

#define ASSERT_TRUE(c)                                                         \
    do {                                                                       \
        lt_test_checks++;                                                      \
        if (!(c)) LT__FAIL("expected true: %s", #c);                           \
    } while (0)

#define ASSERT_EQ(a, b)                                                        \
    do {                                                                       \
        long long lt__a = (long long)(a), lt__b = (long long)(b);              \
        lt_test_checks++;                                                      \
        if (lt__a != lt__b) LT__FAIL("%s == %s: %lld != %lld", #a, #b, lt__a, lt__b); \
    } while (0)

#define ASSERT_NE(a, b)                                                        \
    do {                                                                       \
        long long lt__a = (long long)(a), lt__b = (long long)(b);              \
        lt_test_checks++;                                                      \
        if (lt__a == lt__b) LT__FAIL("%s != %s: both %lld", #a, #b, lt__a);    \
    } while (0)

#define ASSERT_STREQ(a, b)                                                     \
    do {                                                                       \
        const char *lt__a = (a), *lt__b = (b);                                 \
        lt_test_checks++;                                                      \
        if (strcmp(lt__a, lt__b) != 0) LT__FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, lt__a, lt__b); \
    } while (0)

/* |a - b| <= tol */
#define ASSERT_NEAR(a, b, tol)                                                 \
    do {                                                                       \
        double lt__a = (double)(a), lt__b = (double)(b);                       \
        lt_test_checks++;                                                      \
        if (!(fabs(lt__a - lt__b) <= (tol)))                                   \
            LT__FAIL("%s ~ %s: %.9g vs %.9g (tol %g)", #a, #b, lt__a, lt__b, (double)(tol)); \
    } while (0)

/* Whether the test runs under an emulator: ctest sets LT_EMULATED=1 where
 * the build runs its tests through one (CMAKE_CROSSCOMPILING_EMULATOR: the
 * aarch64 cross build under qemu-user). The slowest tests then take smaller
 * problem sizes, said where they do, still checking every result they
 * compute; a check that needs the real machine skips with lt_test_skip. */
static inline int lt_test_emulated(void) {
    const char *e = getenv("LT_EMULATED");
    return e && e[0] && strcmp(e, "0") != 0;
}

/* Says on stdout (ctest shows it) that part of a test does not run, and why. */
static inline void lt_test_skip(const char *what, const char *why) {
    printf("skipped: %s: %s\n", what, why);
}

static inline int lt_test_finish(void) {
    if (lt_test_failures) {
        fprintf(stderr, "%d of %d checks failed\n", lt_test_failures, lt_test_checks);
        return 1;
    }
    printf("%d checks passed\n", lt_test_checks);
    return 0;
}

#endif
