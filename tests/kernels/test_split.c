/* lt__split, the share of [0, n) a kernel's task ith of nth takes: shares
 * cover [0, n) once, in ascending order, with boundaries on the unit, and
 * near-equal (floor or ceil of the units per share). With fewer units than
 * shares the non-empty ones are spread: the looped executor hands a thread a
 * run of consecutive tasks (a quarter of a node's tasks at first), and that
 * run must not hold all the work, or the other threads idle through the node
 * (it did: a 12-head attention of 3 units in 64 tasks ran on one thread). */
#include "kernels/ops_internal.h"
#include "test.h"

static void test_shares(void) {
    static const int64_t ns[] = {0, 1, 2, 3, 5, 12, 31, 64, 100, 1000, 4096};
    static const int64_t units[] = {1, 4, 16};
    static const int nths[] = {1, 2, 3, 7, 8, 64, 128};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof units / sizeof units[0]; b++)
            for (size_t c = 0; c < sizeof nths / sizeof nths[0]; c++) {
                const int64_t n = ns[a], unit = units[b];
                const int nth = nths[c];
                const int64_t total = (n + unit - 1) / unit;
                int64_t expect_lo = 0, lo, hi;
                int uneven = 0, off_unit = 0;
                for (int ith = 0; ith < nth; ith++) {
                    lt__split(n, unit, ith, nth, &lo, &hi);
                    ASSERT_EQ(lo, expect_lo); /* contiguous, ascending, from 0 */
                    ASSERT_TRUE(hi >= lo);
                    off_unit += lo % unit != 0 && lo != n;
                    int64_t u = (hi - lo + unit - 1) / unit;
                    uneven += u < total / nth || u > (total + nth - 1) / nth;
                    expect_lo = hi;
                }
                ASSERT_EQ(expect_lo, n); /* covers [0, n) */
                ASSERT_EQ(off_unit, 0);
                ASSERT_EQ(uneven, 0);
            }
}

/* Any run of k consecutive shares holds at most ceil(units * k / nth) units. */
static void test_spread(void) {
    static const int64_t ns[] = {2, 3, 6, 8, 12, 24, 32};
    static const int nths[] = {16, 32, 64, 128};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t c = 0; c < sizeof nths / sizeof nths[0]; c++) {
            const int64_t n = ns[a];
            const int nth = nths[c];
            int worst = 0;
            for (int k = 1; k <= nth; k++)
                for (int start = 0; start + k <= nth; start++) {
                    int64_t lo, hi, lo2, hi2;
                    lt__split(n, 1, start, nth, &lo, &hi);
                    lt__split(n, 1, start + k - 1, nth, &lo2, &hi2);
                    int64_t held = hi2 - lo, bound = (n * k + nth - 1) / nth;
                    worst += held > bound;
                }
            ASSERT_EQ(worst, 0);
        }
    /* the case that served one thread: 3 units, 64 tasks, a first run of 16 */
    int64_t lo, hi, lo2, hi2;
    lt__split(3, 1, 0, 64, &lo, &hi);
    lt__split(3, 1, 15, 64, &lo2, &hi2);
    ASSERT_TRUE(hi2 - lo <= 1);
}

int main(void) {
    test_shares();
    test_spread();
    return lt_test_finish();
}
