/* lt_sort_f64, lt_median and lt_summarize on odd and even counts, one
 * sample, ties and negative values; the input is left as it was. */
#include <string.h>

#include "looptune/core.h"
#include "test.h"

static void test_summarize(void) {
    double x[5] = {3, -1, 4, 1, 5}, keep[5];
    memcpy(keep, x, sizeof x);
    lt_summary s = lt_summarize(x, 5);
    ASSERT_NEAR(s.min, -1, 0);
    ASSERT_NEAR(s.median, 3, 0);
    ASSERT_NEAR(s.max, 5, 0);
    ASSERT_TRUE(!memcmp(x, keep, sizeof x));
    s = lt_summarize(x, 4); /* 3 -1 4 1: the mean of the middle two */
    ASSERT_NEAR(s.min, -1, 0);
    ASSERT_NEAR(s.median, 2, 0);
    ASSERT_NEAR(s.max, 4, 0);
    s = lt_summarize(x + 2, 1);
    ASSERT_NEAR(s.min, 4, 0);
    ASSERT_NEAR(s.median, 4, 0);
    ASSERT_NEAR(s.max, 4, 0);
    double t[4] = {2, 2, 7, 2};
    s = lt_summarize(t, 4);
    ASSERT_NEAR(s.median, 2, 0);
    ASSERT_NEAR(lt_median(t, 4), 2, 0);
    ASSERT_NEAR(lt_median(x, 5), 3, 0);
}

static void test_sort(void) {
    double x[6] = {0.5, -2, 9, 0.5, 1e9, -1e9};
    lt_sort_f64(x, 6);
    for (int i = 1; i < 6; i++) ASSERT_TRUE(x[i - 1] <= x[i]);
    ASSERT_NEAR(x[0], -1e9, 0);
    ASSERT_NEAR(x[5], 1e9, 0);
    lt_sort_f64(x, 0); /* nothing to sort */
}

int main(void) {
    test_summarize();
    test_sort();
    return lt_test_finish();
}
