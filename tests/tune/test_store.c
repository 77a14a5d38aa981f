/* Config store: file round trip, atomic rewrite, corrupt lines skipped with
 * a message, entries keyed by host class; warm start applies only configs
 * that pass validation against the real call. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "looptune/tune.h"
#include "store_test.h"
#include "test.h"

static char dir[512];

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static lt_config_entry entry(const char *kernel, const char *shape, const char *host,
                             const char *params, double med) {
    lt_config_entry e = lt_test_entry(kernel, shape, host, params);
    e.median_ns = med;
    e.samples = 40;
    e.speedup = 1.25;
    return e;
}

static const char *MV = "rows_per_task=64,unroll=2,k_block=0,prefetch=4096,act_int16=1,act_int8=1";

static lt_store *open_file(const char *path, int *skipped) {
    lt_store_backend be;
    LT_ASSERT(lt_store_backend_file(&be, path) == LT_OK);
    lt_store *s = NULL;
    int rc = lt_store_open(&s, &be, skipped);
    return rc ? NULL : s;
}

static void test_roundtrip_and_hosts(void) {
    char path[600];
    path_of(path, sizeof path, "sub/dir/configs.tsv"); /* parents are created */
    unlink(path);
    int skipped = -1;
    lt_store *s = open_file(path, &skipped);
    ASSERT_TRUE(s != NULL);
    ASSERT_EQ(skipped, 0);
    ASSERT_EQ(lt_store_count(s), 0);
    lt_config_entry a = entry("matvec", "q8_0:288x288:decode", "cpuA:avx512:2c", MV, 12345.5);
    lt_config_entry b = entry("matvec", "q8_0:288x288:decode", "cpuB:avx2:8c",
                              "rows_per_task=8,unroll=1,k_block=256,prefetch=0,"
                              "act_int16=1,act_int8=1", 999);
    lt_config_entry x = entry("looped", "stories15M:q8_0:decode", "cpuA:avx512:2c",
                              "tiles_per_thread=8,prefetch_kb=64,sync=0,min_task_kb=32", 5e5);
    ASSERT_EQ(lt_store_put(s, &a), LT_OK);
    ASSERT_EQ(lt_store_put(s, &b), LT_OK);
    ASSERT_EQ(lt_store_put(s, &x), LT_OK);
    a.median_ns = 11111; /* same key: replaced */
    ASSERT_EQ(lt_store_put(s, &a), LT_OK);
    ASSERT_EQ(lt_store_count(s), 3);
    ASSERT_EQ(lt_store_save(s), LT_OK);
    lt_store_close(s);

    s = open_file(path, &skipped);
    ASSERT_TRUE(s != NULL);
    ASSERT_EQ(skipped, 0);
    ASSERT_EQ(lt_store_count(s), 3);
    const lt_config_entry *ga = lt_store_get(s, "matvec", "q8_0:288x288:decode", "cpuA:avx512:2c");
    const lt_config_entry *gb = lt_store_get(s, "matvec", "q8_0:288x288:decode", "cpuB:avx2:8c");
    ASSERT_TRUE(ga && gb);
    if (ga && gb) {
        ASSERT_STREQ(ga->params, MV);
        ASSERT_NEAR(ga->median_ns, 11111, 0.1);
        ASSERT_EQ(ga->samples, 40);
        ASSERT_NEAR(ga->speedup, 1.25, 1e-4);
        ASSERT_STREQ(gb->params, "rows_per_task=8,unroll=1,k_block=256,prefetch=0,"
                                 "act_int16=1,act_int8=1");
    }
    ASSERT_TRUE(lt_store_get(s, "matvec", "q8_0:288x288:decode", "cpuC:avx512:2c") == NULL);
    ASSERT_TRUE(lt_store_get(s, "looped", "stories15M:q8_0:decode", "cpuA:avx512:2c") != NULL);
    /* entries outside the space are refused by put */
    lt_config_entry bad =
        entry("matvec", "s", "h", "rows_per_task=3,unroll=1,k_block=0,prefetch=0,"
                                  "act_int16=1,act_int8=1", 1);
    ASSERT_EQ(lt_store_put(s, &bad), LT_ECONFIG);
    bad = entry("nokernel", "s", "h", MV, 1);
    ASSERT_EQ(lt_store_put(s, &bad), LT_ENOTFOUND);
    bad = entry("matvec", "with space", "h", MV, 1);
    ASSERT_EQ(lt_store_put(s, &bad), LT_EINVAL);
    lt_store_close(s);

    /* atomic rewrite: no temporary left behind, the file is replaced whole */
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    ASSERT_TRUE(access(tmp, F_OK) != 0);
}

static void test_corrupt_lines(void) {
    char path[600];
    path_of(path, sizeof path, "corrupt.tsv");
    FILE *f = fopen(path, "w");
    fprintf(f, "# looptune configs v1\n"
               "matvec\tq8_0:288x288:decode\th1\t%s\t100\t10\t1.1\n"       /* good */
               "matvec\tq8_0:288x288:decode\th1\t%s\t100\t10\n"            /* 6 fields */
               "matvec\tq8_0:288x768:decode\th1\t"
               "rows_per_task=5,unroll=1,k_block=0,prefetch=0,act_int16=1,act_int8=1\t1\t1\t1\n"
               "warp\tx\th1\t%s\t100\t10\t1.1\n"                            /* unknown kernel */
               "matvec\tq8_0:768x288:decode\th1\t%s\tfast\t10\t1.1\n"      /* not a number */
               "matvec\tq8_0:768x288:decode\th1\t%s\t-5\t10\t1.1\n"        /* negative */
               "\n# a comment\n"
               "rmsnorm\tf32:288x1:decode\th1\tmin_chunk=",
            MV, MV, MV, MV, MV);
    fclose(f);
    int skipped = -1;
    lt_store *s = open_file(path, &skipped);
    ASSERT_TRUE(s != NULL);
    ASSERT_EQ(skipped, 6);
    ASSERT_EQ(lt_store_count(s), 1);
    lt_store_close(s);

    f = fopen(path, "w");
    fprintf(f, "kernel\tshape\n");
    fclose(f);
    lt_store_backend be;
    lt_store_backend_file(&be, path);
    ASSERT_EQ(lt_store_open(&s, &be, NULL), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "not a looptune config store") != NULL);
}

static void test_default_path(void) {
    char buf[512];
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    ASSERT_TRUE(lt_store_default_path(buf, sizeof buf));
    ASSERT_STREQ(buf, "/x/cache/looptune/configs.tsv");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    ASSERT_TRUE(lt_store_default_path(buf, sizeof buf));
    ASSERT_STREQ(buf, "/home/u/.cache/looptune/configs.tsv");
}

static void test_host_class(void) {
    lt_host a, b;
    lt_host_detect(&a);
    lt_host_detect(&b);
    ASSERT_STREQ(a.host_class, b.host_class);
    ASSERT_TRUE(strlen(a.host_class) > 4);
    ASSERT_TRUE(strpbrk(a.host_class, " \t") == NULL);
    ASSERT_TRUE(strstr(a.host_class, lt_isa_name(lt_isa_active())) != NULL);
}

/* The thread-count space: 0 (the whole pool) first and default, then every
 * count below the pool's size; a store entry validates against the widest. */
static void test_threads_space(void) {
    lt_space s;
    lt_space_threads(&s, 2);
    ASSERT_EQ(s.n_params, 1);
    ASSERT_EQ(lt_space_size(&s), 2);
    ASSERT_EQ(s.params[0].values[0], 0);
    ASSERT_EQ(s.params[0].values[1], 1);
    ASSERT_EQ(s.params[0].def, 0);
    lt_space_threads(&s, 9);
    ASSERT_EQ(lt_space_size(&s), 9); /* 0, 1..8 */
    ASSERT_EQ(s.params[0].values[8], 8);
    lt_space_threads(&s, 1);
    ASSERT_EQ(lt_space_size(&s), 1);
    ASSERT_EQ(lt_space_by_name("threads", &s), LT_OK);
    lt_params p;
    ASSERT_EQ(lt_space_parse(&s, "threads=64", &p), LT_OK);
    ASSERT_EQ(p.v[0], 64);
    ASSERT_EQ(lt_space_parse(&s, "threads=9", &p), LT_ECONFIG);
    ASSERT_EQ(lt_space_parse(&s, "threads=-1", &p), LT_ECONFIG);
}

/* A call's space: attention keeps heads_per_task values up to the heads
 * sharing a kv head (the next value above stands for the group, the rest
 * would run as it); other kernels and parameters keep every value. */
static void test_space_fits_call(void) {
    static const struct { int64_t heads, kv; int n; int32_t last, def; } cases[] = {
        {6, 6, 1, 1, 1},  /* no sharing: one head per task, whatever the value */
        {8, 2, 3, 4, 4},  /* groups of 4 */
        {12, 4, 3, 4, 4}, /* groups of 3: 4 runs as 3, 8 too */
        {32, 4, 4, 8, 4}, /* groups of 8: every value */
        {64, 4, 4, 8, 4}, /* groups of 16 */
    };
    const lt_kernel *k = lt_kernel_get(LT_K_ATTENTION);
    const int hpt = lt_kernel_param_index(k, "heads_per_task");
    const int kvb = lt_kernel_param_index(k, "kv_block");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lt_call c = {.ia = {cases[i].heads, cases[i].kv, 64, 0}};
        lt_space s;
        lt_space_from_kernel(&s, k);
        lt_space_fit_call(&s, LT_K_ATTENTION, &c);
        ASSERT_EQ(s.params[hpt].n_values, cases[i].n);
        ASSERT_EQ(s.params[hpt].values[0], 1);
        ASSERT_EQ(s.params[hpt].values[cases[i].n - 1], cases[i].last);
        ASSERT_EQ(s.params[hpt].def, cases[i].def);
        ASSERT_EQ(s.params[kvb].n_values, k->params[kvb].n_values);
    }
    lt_space s;
    lt_space_from_kernel(&s, lt_kernel_get(LT_K_MATVEC));
    lt_call c = {.ia = {0, 0, 0, 0}};
    lt_space_fit_call(&s, LT_K_MATVEC, &c);
    ASSERT_EQ(lt_space_size(&s), 7 * 4 * 5 * 7 * 2 * 2);
    lt_space_fit_shape(&s, "matvec", "q8_0:288x288:decode:ia=0,1,1");
    ASSERT_EQ(lt_space_size(&s), 7 * 4 * 5 * 7 * 2 * 2);

    /* by shape signature (what the optimizer service knows of a call), and a
     * point of the whole space as the one it runs as */
    lt_space_from_kernel(&s, k);
    lt_space_fit_shape(&s, "attention", "f32:288x1:decode:ia=6,6,48");
    ASSERT_EQ(s.params[hpt].n_values, 1);
    lt_params p = {.v = {64, 4}};
    p.v[kvb] = 64;
    p.v[hpt] = 4;
    lt_space_fit_params(&s, &p);
    ASSERT_EQ(p.v[hpt], 1);
    ASSERT_EQ(p.v[kvb], 64);
    lt_space_from_kernel(&s, k);
    lt_space_fit_shape(&s, "attention", "f32:768x1:decode:ia=12,4,64"); /* groups of 3 */
    ASSERT_EQ(s.params[hpt].n_values, 3);
    p.v[hpt] = 8;
    lt_space_fit_params(&s, &p);
    ASSERT_EQ(p.v[hpt], 4); /* 8 and 4 both run as 3 */
    p.v[hpt] = 2;
    lt_space_fit_params(&s, &p);
    ASSERT_EQ(p.v[hpt], 2);
    lt_space_from_kernel(&s, k);
    lt_space_fit_shape(&s, "attention", "f32:768x1:decode"); /* no attributes: unchanged */
    ASSERT_EQ(s.params[hpt].n_values, k->params[hpt].n_values);
    /* shapes from a message that are not head counts leave the space whole */
    const char *bad[] = {"f32:1x1:decode:ia=", "f32:1x1:decode:ia=x,2",
                         "f32:1x1:decode:ia=-9223372036854775808,-1,64",
                         "f32:1x1:decode:ia=99999999999999999999,1,64",
                         "f32:1x1:decode:ia=6,0,48", "f32:1x1:decode:ia=6,4,48",
                         "f32:1x1:decode:ia=-6,-6,48", "f32:1x1:decode:ia=6"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lt_space_from_kernel(&s, k);
        lt_space_fit_shape(&s, "attention", bad[i]);
        ASSERT_EQ(s.params[hpt].n_values, k->params[hpt].n_values);
    }
}

int main(void) {
    test_threads_space();
    test_space_fits_call();
    const char *w = getenv("LT_WORK_DIR");
    snprintf(dir, sizeof dir, "%s/tune_store", w ? w : "/tmp");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd) != 0) return 1;
    test_roundtrip_and_hosts();
    test_corrupt_lines();
    test_host_class();
    test_default_path();
    return lt_test_finish();
}
