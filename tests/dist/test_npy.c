/* The .npy reader and writer: files laid out byte by byte as numpy's format
 * description says (versions 1 and 2), a round trip, and one clear error for
 * each kind of file looptune does not take. numpy itself reads and writes
 * these files in tests/dist/test_broker_dist.py. */
#include "looptune/dist.h"

#include <stdlib.h>
#include <unistd.h>

#include "test.h"

static char dir[512];

static const char *path_of(const char *name) {
    static char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* Writes magic, version, the header (padded to 64 with spaces and '\n'), then
 * nbytes of data (a ramp of floats). */
static const char *write_npy(const char *name, int major, const char *dict, size_t nbytes) {
    const char *p = path_of(name);
    FILE *f = fopen(p, "wb");
    size_t pre = major == 1 ? 10 : 12, len = strlen(dict);
    size_t total = (pre + len + 1 + 63) / 64 * 64, hlen = total - pre;
    fwrite("\x93NUMPY", 1, 6, f);
    fputc(major, f);
    fputc(0, f);
    for (size_t i = 0; i < pre - 8; i++) fputc((int)((hlen >> (8 * i)) & 0xff), f);
    fwrite(dict, 1, len, f);
    for (size_t i = pre + len; i < total - 1; i++) fputc(' ', f);
    fputc('\n', f);
    for (size_t i = 0; i < nbytes / 4; i++) {
        float v = (float)i * 0.5f;
        fwrite(&v, 4, 1, f);
    }
    for (size_t i = 0; i < nbytes % 4; i++) fputc(0, f);
    fclose(f);
    return p;
}

static void expect_error(const char *p, const char *what) {
    lt_npy a;
    int rc = lt_npy_read(p, &a);
    ASSERT_TRUE(rc == LT_EFORMAT || rc == LT_EIO);
    if (!strstr(lt_errmsg(), what)) fprintf(stderr, "error was: %s\n", lt_errmsg());
    ASSERT_TRUE(strstr(lt_errmsg(), what) != NULL);
    ASSERT_TRUE(a.data == NULL);
}

static void test_good(void) {
    lt_npy a;
    const char *p = write_npy("v1.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 48);
    ASSERT_EQ(lt_npy_read(p, &a), LT_OK);
    ASSERT_EQ(a.ndim, 2);
    ASSERT_EQ(a.shape[0], 3);
    ASSERT_EQ(a.shape[1], 4);
    ASSERT_NEAR(a.data[11], 5.5, 0);
    lt_npy_free(&a);
    p = write_npy("v2.npy", 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 20);
    ASSERT_EQ(lt_npy_read(p, &a), LT_OK);
    ASSERT_EQ(a.ndim, 1);
    ASSERT_EQ(a.shape[0], 5);
    ASSERT_NEAR(a.data[4], 2.0, 0);
    lt_npy_free(&a);

    /* round trip, and the header numpy would write */
    float x[6] = {1, -2, 3.5f, 4, 5, 6e-8f};
    int64_t shape[2] = {2, 3};
    p = path_of("out.npy");
    ASSERT_EQ(lt_npy_write(p, x, 2, shape), LT_OK);
    ASSERT_EQ(lt_npy_read(p, &a), LT_OK);
    ASSERT_EQ(a.shape[0], 2);
    ASSERT_EQ(a.shape[1], 3);
    ASSERT_TRUE(!memcmp(a.data, x, sizeof x));
    lt_npy_free(&a);
    FILE *f = fopen(p, "rb");
    char head[129] = {0};
    ASSERT_EQ(fread(head, 1, 128, f), 128);
    fclose(f);
    {
        static const char want[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        ASSERT_TRUE(!memcmp(head + 10, want, sizeof want - 1));
    }
    ASSERT_EQ(head[127], '\n');
}

static void test_bad(void) {
    expect_error(path_of("absent.npy"), "cannot open");
    const char *p = path_of("text.npy");
    FILE *f = fopen(p, "wb");
    fputs("hello, not numpy", f);
    fclose(f);
    expect_error(p, "not a .npy file");
    p = write_npy("v9.npy", 9, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
    expect_error(p, "format version 9.0");
    p = write_npy("f8.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16);
    expect_error(p, "dtype '<f8'");
    p = write_npy("be.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8);
    expect_error(p, "dtype '>f4'");
    p = write_npy("fo.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16);
    expect_error(p, "Fortran order");
    p = write_npy("short.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", 60);
    expect_error(p, "truncated: the shape needs 64 data bytes, the file has 60");
    p = write_npy("long.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 12);
    expect_error(p, "bytes after the data");
    p = write_npy("scalar.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4);
    expect_error(p, "0-dimensional");
    p = write_npy("noshape.npy", 1, "{'descr': '<f4', 'fortran_order': False, }", 4);
    expect_error(p, "no 'shape'");
    p = write_npy("badshape.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 8);
    expect_error(p, "bad 'shape'");
    /* a header cut short */
    p = path_of("cut.npy");
    f = fopen(p, "wb");
    fwrite("\x93NUMPY\x01\x00\x76\x00{'descr'", 1, 18, f);
    fclose(f);
    expect_error(p, "truncated .npy header");
}

int main(void) {
    const char *w = getenv("LT_WORK_DIR");
    snprintf(dir, sizeof dir, "%s/npy-%d", w && *w ? w : "/tmp", (int)getpid());
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0) return 1;
    test_good();
    test_bad();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
    return lt_test_finish();
}
