/* The host record: what the machine is (CPU, ISA, caches, fingerprint) and
 * its measured ceilings (STREAM triad and read bandwidth, FMA peak), measured
 * once per host and cached as a small text file keyed by the fingerprint's
 * hash. The cache is validated on read (magic, fingerprint, plausible
 * numbers, checksum); anything else is re-measured with a warning. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "looptune/telemetry.h"

#define CACHE_MAGIC "looptune host cache 1"

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 14695981039346656037ull; /* FNV-1a 64-bit offset basis */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

void lt_tel_host_describe(lt_tel_host *h) {
    memset(h, 0, sizeof *h);
    const lt_cpu_info *c = lt_cpu();
    lt_host_fingerprint(h->fingerprint, sizeof h->fingerprint);
    snprintf(h->host_id, sizeof h->host_id, "%016llx",
             (unsigned long long)fnv1a(h->fingerprint, strlen(h->fingerprint)));
    snprintf(h->cpu_model, sizeof h->cpu_model, "%s", c->model);
    const struct {
        bool on;
        const char *name;
    } flags[] = {{c->avx2, "avx2"},         {c->fma, "fma"},           {c->f16c, "f16c"},
                 {c->avxvnni, "avxvnni"},
                 {c->avx512f, "avx512f"},   {c->avx512bw, "avx512bw"}, {c->avx512vl, "avx512vl"},
                 {c->avx512vnni, "avx512vnni"}, {c->avx512bf16, "avx512bf16"}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].on && h->n_isa_flags < LT_TEL_MAX_ISA_FLAGS)
            h->isa_flags[h->n_isa_flags++] = flags[i].name;
    h->cores = c->logical_cpus;
    h->l1d_bytes = c->l1d_bytes;
    h->l2_bytes = c->l2_bytes;
    h->l3_bytes = c->l3_bytes;
}

int lt_tel_host_measure(lt_tel_host *h, size_t membw_bytes) {
    lt_pool *pool;
    int n = lt_cpu()->logical_cpus > 0 ? lt_cpu()->logical_cpus : 1;
    int rc = lt_pool_init(&pool, n);
    if (rc) return rc;
    lt_membw bw;
    rc = lt_membw_measure(pool, membw_bytes, 3, &bw);
    if (rc == LT_OK) {
        h->triad_gb_s = bw.triad_gb_s;
        h->read_gb_s = bw.read_gb_s;
        h->peak_gflops = lt_tel_peak_gflops(pool, 5);
    }
    lt_pool_free(pool);
    return rc;
}

int lt_tel_host_cache_path(const lt_tel_host *h, char *buf, size_t n) {
    char file[sizeof h->host_id + 16];
    snprintf(file, sizeof file, "host-%s.txt", h->host_id);
    int rc = lt_cache_path(buf, n, file);
    return rc ? lt_error(rc, "host cache: %s", lt_errmsg()) : LT_OK;
}

/* The cache text for h without its checksum line. */
static int cache_body(const lt_tel_host *h, char *buf, size_t n) {
    return snprintf(buf, n, CACHE_MAGIC "\nfingerprint %s\ntriad_gb_s %.17g\nread_gb_s %.17g\n"
                    "peak_gflops %.17g\n", h->fingerprint, h->triad_gb_s, h->read_gb_s,
                    h->peak_gflops);
}

/* Parses "key <number>" with a plausible positive value. */
static bool parse_value(const char *line, const char *key, double *out) {
    size_t kl = strlen(key);
    if (strncmp(line, key, kl) != 0 || line[kl] != ' ') return false;
    char *end;
    errno = 0;
    double v = strtod(line + kl + 1, &end);
    if (errno || end == line + kl + 1 || *end != '\n') return false;
    if (!isfinite(v) || v <= 0 || v > 1e7) return false;
    *out = v;
    return true;
}

/* Reads and validates the cache. LT_ENOTFOUND if absent; LT_EFORMAT with the
 * reason if it is not a valid record for this host. */
static int cache_read(const char *path, lt_tel_host *h) {
    FILE *f = fopen(path, "r");
    if (!f) return lt_error(LT_ENOTFOUND, "%s: %s", path, strerror(errno));
    char text[2048];
    size_t len = fread(text, 1, sizeof text - 1, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    text[len] = 0;
    if (more || strlen(text) != len) return lt_error(LT_EFORMAT, "%s: not a host cache file", path);
    char *lines[6] = {0};
    char *p = text;
    for (int i = 0; i < 6; i++) {
        char *nl = strchr(p, '\n');
        if (!nl) return lt_error(LT_EFORMAT, "%s: truncated at line %d", path, i + 1);
        lines[i] = p;
        p = nl + 1;
    }
    if (*p) return lt_error(LT_EFORMAT, "%s: trailing data after line 6", path);
    if (strncmp(lines[0], CACHE_MAGIC "\n", sizeof CACHE_MAGIC) != 0)
        return lt_error(LT_EFORMAT, "%s: line 1: not '" CACHE_MAGIC "'", path);
    /* checksum of everything before the last line */
    unsigned long long sum;
    char tail;
    if (sscanf(lines[5], "check %16llx%c", &sum, &tail) != 2 || tail != '\n' ||
        sum != fnv1a(text, (size_t)(lines[5] - text)))
        return lt_error(LT_EFORMAT, "%s: line 6: checksum does not match the contents", path);
    size_t fl = strlen(h->fingerprint);
    if (strncmp(lines[1], "fingerprint ", 12) != 0 || strncmp(lines[1] + 12, h->fingerprint, fl) ||
        lines[1][12 + fl] != '\n')
        return lt_error(LT_EFORMAT, "%s: line 2: measured on another host", path);
    lt_tel_host got = *h;
    if (!parse_value(lines[2], "triad_gb_s", &got.triad_gb_s))
        return lt_error(LT_EFORMAT, "%s: line 3: bad triad_gb_s", path);
    if (!parse_value(lines[3], "read_gb_s", &got.read_gb_s))
        return lt_error(LT_EFORMAT, "%s: line 4: bad read_gb_s", path);
    if (!parse_value(lines[4], "peak_gflops", &got.peak_gflops))
        return lt_error(LT_EFORMAT, "%s: line 5: bad peak_gflops", path);
    *h = got;
    return LT_OK;
}

static int mkdirs(const char *path) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(dir, 0755) && errno != EEXIST) return -1;
        *s = '/';
    }
    return 0;
}

/* Writes the cache atomically (temporary file, then rename). */
static int cache_write(const char *path, const lt_tel_host *h) {
    char body[2048], tmp[1100];
    int len = cache_body(h, body, sizeof body);
    if (len < 0 || (size_t)len >= sizeof body - 32)
        return lt_error(LT_ERANGE, "%s: host record too long", path);
    snprintf(body + len, sizeof body - (size_t)len, "check %016llx\n",
             (unsigned long long)fnv1a(body, (size_t)len));
    if (mkdirs(path)) return lt_error(LT_EIO, "%s: cannot create its folder: %s", path, strerror(errno));
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return lt_error(LT_EIO, "%s: %s", tmp, strerror(errno));
    bool ok = fputs(body, f) >= 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return lt_error(LT_EIO, "%s: cannot write: %s", path, strerror(e));
    }
    return LT_OK;
}

int lt_tel_host_get(lt_tel_host *h, size_t membw_bytes) {
    lt_tel_host_describe(h);
    char path[1024];
    bool have_path = lt_tel_host_cache_path(h, path, sizeof path) == LT_OK;
    if (have_path) {
        int rc = cache_read(path, h);
        if (rc == LT_OK) return LT_OK;
        if (rc != LT_ENOTFOUND)
            lt_log(LT_LOG_WARN, "host cache ignored, measuring again: %s", lt_errmsg());
    }
    lt_log(LT_LOG_INFO, "measuring this host's memory bandwidth and FMA peak once%s%s",
           have_path ? "; cached in " : "", have_path ? path : "");
    int rc = lt_tel_host_measure(h, membw_bytes);
    if (rc) return rc;
    if (have_path && cache_write(path, h) != LT_OK)
        lt_log(LT_LOG_WARN, "host cache not written: %s", lt_errmsg());
    return LT_OK;
}
