/* The host record and its cache: the id is the fingerprint's FNV-1a, a
 * measurement is written in the documented format (checked here with an
 * independent parser and checksum), a valid cache is used as is (planted
 * figures come back exactly), and a corrupt, truncated, foreign or garbage
 * cache is measured again and rewritten. Also the cache path rules and a
 * plausible FMA peak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "looptune/telemetry.h"
#include "test.h"

#define MEMBW_BYTES (4u << 20) /* small arrays: the test checks the cache, not the machine */

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* A cache text with the given figures and fingerprint; checksum right or wrong. */
static void cache_text(char *out, size_t n, const char *fp, double triad, double rd, double peak,
                       bool good_sum) {
    int len = snprintf(out, n,
                       "looptune host cache 1\nfingerprint %s\ntriad_gb_s %.17g\nread_gb_s %.17g\n"
                       "peak_gflops %.17g\n", fp, triad, rd, peak);
    uint64_t sum = fnv(out, (size_t)len) ^ (good_sum ? 0 : 1);
    snprintf(out + len, n - (size_t)len, "check %016llx\n", (unsigned long long)sum);
}

/* The file holds a valid cache of exactly h's figures. */
static void check_valid_file(const char *path, const lt_tel_host *h) {
    char *t = read_file(path);
    ASSERT_TRUE(t != NULL);
    if (!t) return;
    char want[2048];
    cache_text(want, sizeof want, h->fingerprint, h->triad_gb_s, h->read_gb_s, h->peak_gflops, true);
    ASSERT_STREQ(t, want);
}

int main(void) {
    const char *work = getenv("LT_WORK_DIR");
    char dir[512], path[1024];
    snprintf(dir, sizeof dir, "%s/hostcache-%ld", work && *work ? work : "/tmp", (long)getpid());
    setenv("XDG_CACHE_HOME", dir, 1);

    lt_tel_host h;
    lt_tel_host_describe(&h);
    char id[32];
    snprintf(id, sizeof id, "%016llx", (unsigned long long)fnv(h.fingerprint, strlen(h.fingerprint)));
    ASSERT_STREQ(h.host_id, id);
    ASSERT_TRUE(h.cores >= 1);
    ASSERT_TRUE(h.n_isa_flags >= 0 && h.n_isa_flags <= LT_TEL_MAX_ISA_FLAGS);
    ASSERT_EQ(lt_tel_host_cache_path(&h, path, sizeof path), LT_OK);
    char want_path[1024];
    snprintf(want_path, sizeof want_path, "%s/looptune/host-%s.txt", dir, id);
    ASSERT_STREQ(path, want_path);

    /* first call: measured, written */
    ASSERT_EQ(lt_tel_host_get(&h, MEMBW_BYTES), LT_OK);
    ASSERT_TRUE(h.triad_gb_s > 0.1 && h.read_gb_s > 0.1);
    ASSERT_TRUE(h.peak_gflops > 0.5 && h.peak_gflops < 100000);
    printf("measured: triad %.1f GB/s, read %.1f GB/s, peak %.1f GFLOP/s\n", h.triad_gb_s,
           h.read_gb_s, h.peak_gflops);
    check_valid_file(path, &h);

    /* a valid cache is used as it is */
    char text[2048];
    cache_text(text, sizeof text, h.fingerprint, 123.5, 234.25, 345.125, true);
    write_file(path, text);
    lt_tel_host g;
    ASSERT_EQ(lt_tel_host_get(&g, MEMBW_BYTES), LT_OK);
    ASSERT_NEAR(g.triad_gb_s, 123.5, 0);
    ASSERT_NEAR(g.read_gb_s, 234.25, 0);
    ASSERT_NEAR(g.peak_gflops, 345.125, 0);
    ASSERT_STREQ(g.host_id, h.host_id);

    /* anything else is measured again and rewritten valid */
    char foreign[1024];
    snprintf(foreign, sizeof foreign, "%s-other", h.fingerprint);
    const char *bad[6];
    char wrong_sum[2048], other_host[2048], bad_value[2048], truncated[2048];
    cache_text(wrong_sum, sizeof wrong_sum, h.fingerprint, 123.5, 234.25, 345.125, false);
    cache_text(other_host, sizeof other_host, foreign, 123.5, 234.25, 345.125, true);
    cache_text(bad_value, sizeof bad_value, h.fingerprint, -123.5, 234.25, 345.125, true);
    memcpy(truncated, text, strlen(text) / 2);
    truncated[strlen(text) / 2] = 0;
    bad[0] = wrong_sum;
    bad[1] = other_host;
    bad[2] = bad_value;
    bad[3] = truncated;
    bad[4] = "\x01\x02garbage";
    bad[5] = "";
    for (int i = 0; i < 6; i++) {
        write_file(path, bad[i]);
        ASSERT_EQ(lt_tel_host_get(&g, MEMBW_BYTES), LT_OK);
        ASSERT_TRUE(g.triad_gb_s != 123.5 && g.triad_gb_s > 0.1);
        check_valid_file(path, &g);
    }

    /* without XDG_CACHE_HOME: ~/.cache/looptune */
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", dir, 1);
    ASSERT_EQ(lt_tel_host_cache_path(&h, path, sizeof path), LT_OK);
    snprintf(want_path, sizeof want_path, "%s/.cache/looptune/host-%s.txt", dir, id);
    ASSERT_STREQ(path, want_path);
    unsetenv("HOME");
    ASSERT_EQ(lt_tel_host_cache_path(&h, path, sizeof path), LT_ENOTFOUND);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return lt_test_finish();
}
