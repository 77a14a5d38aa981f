/* numpy's .npy format for the arrays `looptune submit` reads and writes:
 * the magic "\x93NUMPY", a version byte pair, a header length (2 bytes in
 * version 1, 4 in versions 2 and 3), a Python dict literal with 'descr',
 * 'fortran_order' and 'shape', padded with spaces to a multiple of 64 and
 * ended by '\n', then the raw data. Only little-endian f32 in C order is
 * taken; everything else gets an error that names it. */
#include "looptune/dist.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
#define NPY_MAX_HEADER (1u << 20) /* far above what numpy writes; a bound on a bad length */

void lt_npy_free(lt_npy *a) {
    if (!a) return;
    free(a->data);
    a->data = NULL;
}

/* The value text after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *h, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p) {
        snprintf(pat, sizeof pat, "\"%s\"", key);
        p = strstr(h, pat);
    }
    if (!p) return NULL;
    p += strlen(pat);
    while (isspace((unsigned char)*p)) p++;
    if (*p != ':') return NULL;
    p++;
    while (isspace((unsigned char)*p)) p++;
    return p;
}

static int parse_header(const char *path, const char *h, lt_npy *out) {
    const char *d = dict_value(h, "descr");
    if (!d || (*d != '\'' && *d != '"'))
        return lt_error(LT_EFORMAT, "%s: .npy header has no 'descr' string", path);
    char descr[32];
    size_t n = 0;
    for (const char *p = d + 1; *p && *p != *d && n + 1 < sizeof descr; p++) descr[n++] = *p;
    descr[n] = 0;
    if (strcmp(descr, "<f4"))
        return lt_error(LT_EFORMAT, "%s: dtype '%s': looptune reads little-endian float32 "
                                    "('<f4') only", path, descr);
    const char *f = dict_value(h, "fortran_order");
    if (!f) return lt_error(LT_EFORMAT, "%s: .npy header has no 'fortran_order'", path);
    if (!strncmp(f, "True", 4))
        return lt_error(LT_EFORMAT, "%s: Fortran order: looptune reads C-order arrays only "
                                    "(numpy.ascontiguousarray)", path);
    if (strncmp(f, "False", 5))
        return lt_error(LT_EFORMAT, "%s: .npy header: bad 'fortran_order'", path);
    const char *s = dict_value(h, "shape");
    if (!s || *s != '(') return lt_error(LT_EFORMAT, "%s: .npy header has no 'shape' tuple", path);
    out->ndim = 0;
    const char *p = s + 1;
    for (;;) {
        while (isspace((unsigned char)*p)) p++;
        if (*p == ')') break;
        if (!isdigit((unsigned char)*p))
            return lt_error(LT_EFORMAT, "%s: .npy header: bad 'shape'", path);
        errno = 0;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (errno || v < 0 || v > (1ll << 40))
            return lt_error(LT_EFORMAT, "%s: .npy header: dimension out of range", path);
        if (out->ndim == 4)
            return lt_error(LT_EFORMAT, "%s: more than 4 dimensions", path);
        out->shape[out->ndim++] = v;
        p = end;
        while (isspace((unsigned char)*p)) p++;
        if (*p == ',') p++;
        else if (*p != ')') return lt_error(LT_EFORMAT, "%s: .npy header: bad 'shape'", path);
    }
    if (out->ndim == 0)
        return lt_error(LT_EFORMAT, "%s: a 0-dimensional array (a scalar)", path);
    return LT_OK;
}

int lt_npy_read(const char *path, lt_npy *out) {
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp) return lt_error(LT_EIO, "%s: cannot open: %s", path, strerror(errno));
    int rc = LT_OK;
    char *header = NULL;
    unsigned char pre[12];
    size_t got = fread(pre, 1, 10, fp);
    if (got < 8 || memcmp(pre, npy_magic, sizeof npy_magic)) {
        rc = lt_error(LT_EFORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", path);
        goto done;
    }
    unsigned major = pre[6], minor = pre[7];
    size_t hlen, start;
    if (major == 1 && got == 10) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
        start = 10;
    } else if ((major == 2 || major == 3) && got == 10 && fread(pre + 10, 1, 2, fp) == 2) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 |
               (size_t)pre[11] << 24;
        start = 12;
    } else if (major < 1 || major > 3) {
        rc = lt_error(LT_EFORMAT, "%s: .npy format version %u.%u: looptune reads 1.0, 2.0 and "
                                  "3.0", path, major, minor);
        goto done;
    } else {
        rc = lt_error(LT_EFORMAT, "%s: truncated .npy header", path);
        goto done;
    }
    if (hlen == 0 || hlen > NPY_MAX_HEADER) {
        rc = lt_error(LT_EFORMAT, "%s: .npy header length %zu out of range", path, hlen);
        goto done;
    }
    header = malloc(hlen + 1);
    if (!header) {
        rc = lt_error(LT_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (fread(header, 1, hlen, fp) != hlen) {
        rc = lt_error(LT_EFORMAT, "%s: truncated .npy header (%zu bytes announced)", path, hlen);
        goto done;
    }
    header[hlen] = 0;
    if (strlen(header) != hlen || header[0] != '{') {
        rc = lt_error(LT_EFORMAT, "%s: .npy header is not a dict literal", path);
        goto done;
    }
    if ((rc = parse_header(path, header, out))) goto done;
    int64_t count = 1;
    for (int i = 0; i < out->ndim; i++) {
        if (out->shape[i] && count > (INT64_MAX / 4) / out->shape[i]) {
            rc = lt_error(LT_EFORMAT, "%s: shape too large", path);
            goto done;
        }
        count *= out->shape[i];
    }
    size_t bytes = (size_t)count * sizeof(float);
    out->data = malloc(bytes ? bytes : 1);
    if (!out->data) {
        rc = lt_error(LT_ENOMEM, "%s: out of memory for %zu bytes", path, bytes);
        goto done;
    }
    size_t have = fread(out->data, 1, bytes, fp);
    if (have != bytes) {
        rc = lt_error(LT_EFORMAT, "%s: truncated: the shape needs %zu data bytes, the file has "
                                  "%zu", path, bytes, have);
        goto done;
    }
    if (fgetc(fp) != EOF) {
        rc = lt_error(LT_EFORMAT, "%s: bytes after the data the shape announces", path);
        goto done;
    }
    (void)start;
done:
    free(header);
    fclose(fp);
    if (rc) lt_npy_free(out);
    return rc;
}

int lt_npy_write(const char *path, const float *data, int ndim, const int64_t *shape) {
    if (ndim < 1 || ndim > 4) return lt_error(LT_EINVAL, "%s: %d dimensions", path, ndim);
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%lld,%s", (long long)shape[i],
                        i + 1 < ndim ? " " : "");
        count *= shape[i];
    }
    /* numpy writes (3,) for one dimension and (3, 4) for two */
    if (ndim > 1) len--;
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    /* magic, version, length, dict, padding and '\n': a multiple of 64 */
    size_t total = 10 + (size_t)len + 1;
    size_t padded = (total + 63) / 64 * 64;
    char head[512];
    memcpy(head, npy_magic, 6);
    head[6] = 1;
    head[7] = 0;
    size_t hlen = padded - 10;
    head[8] = (char)(hlen & 0xff);
    head[9] = (char)(hlen >> 8);
    memcpy(head + 10, dict, (size_t)len);
    memset(head + 10 + len, ' ', padded - 10 - (size_t)len - 1);
    head[padded - 1] = '\n';

    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return lt_error(LT_EINVAL, "%s: path too long", path);
    FILE *fp = fopen(tmp, "wb");
    if (!fp) return lt_error(LT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    bool ok = fwrite(head, 1, padded, fp) == padded &&
              fwrite(data, sizeof(float), (size_t)count, fp) == (size_t)count;
    ok = (fclose(fp) == 0) && ok;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return lt_error(LT_EIO, "%s: cannot write: %s", path, strerror(e));
    }
    return LT_OK;
}
