/* The config store's file backend: one tab-separated line per entry after a
 * magic/version line, validated on read (a bad line is reported with its
 * number and skipped), written atomically (a temporary file in the same
 * directory, flushed and renamed over the old one). Format in tune.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tune/tune_internal.h"

#define STORE_MAGIC "# looptune configs v1"

typedef struct {
    char *path;
} file_ctx;

/* Returns the number of skipped lines (>= 0) or a negative status. */
static int file_load(void *vctx, lt_store *s) {
    file_ctx *c = vctx;
    FILE *f = fopen(c->path, "r");
    if (!f) {
        if (errno == ENOENT) return 0;
        return lt_error(LT_EIO, "%s: cannot open: %s", c->path, strerror(errno));
    }
    char line[1024];
    int64_t no = 0;
    int skipped = 0;
    while (fgets(line, sizeof line, f)) {
        no++;
        size_t len = strlen(line);
        bool whole = len && line[len - 1] == '\n';
        if (!whole && !feof(f)) { /* overlong: skip the rest of it */
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n') {}
            lt_log(LT_LOG_WARN, "%s:%lld: line too long, skipped", c->path, (long long)no);
            skipped++;
            continue;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (no == 1) {
            if (strcmp(line, STORE_MAGIC) != 0) {
                fclose(f);
                return lt_error(LT_EFORMAT, "%s: not a looptune config store (first line is not "
                                            "'%s')", c->path, STORE_MAGIC);
            }
            continue;
        }
        if (len == 0 || line[0] == '#') continue;
        char *field[8];
        int nf = 0;
        char *save = NULL;
        for (char *t = strtok_r(line, "\t", &save); t && nf < 8; t = strtok_r(NULL, "\t", &save))
            field[nf++] = t;
        lt_config_entry e;
        memset(&e, 0, sizeof e);
        char *end1, *end2, *end3;
        int rc = LT_EFORMAT;
        if (nf != 7) {
            lt_error(LT_EFORMAT, "expected 7 tab-separated fields, got %d", nf);
        } else if (strlen(field[0]) >= sizeof e.kernel || strlen(field[1]) >= sizeof e.shape ||
                   strlen(field[2]) >= sizeof e.host || strlen(field[3]) >= sizeof e.params) {
            lt_error(LT_EFORMAT, "a field is too long");
        } else {
            strcpy(e.kernel, field[0]);
            strcpy(e.shape, field[1]);
            strcpy(e.host, field[2]);
            strcpy(e.params, field[3]);
            e.median_ns = strtod(field[4], &end1);
            e.samples = strtoll(field[5], &end2, 10);
            e.speedup = strtod(field[6], &end3);
            if (*end1 || *end2 || *end3 || end1 == field[4] || end2 == field[5] || end3 == field[6])
                lt_error(LT_EFORMAT, "median, samples or speed-up is not a number");
            else
                rc = lt_store_put(s, &e);
        }
        if (rc) {
            if (rc == LT_ENOMEM) {
                fclose(f);
                return rc;
            }
            lt_log(LT_LOG_WARN, "%s:%lld: bad config line skipped: %s", c->path, (long long)no,
                   lt_errmsg());
            skipped++;
        }
    }
    bool err = ferror(f);
    fclose(f);
    if (err) return lt_error(LT_EIO, "%s: read error", c->path);
    return skipped;
}

/* mkdir -p of the directory part of path. */
static void make_parent(const char *path) {
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(d, 0755);
        *p = '/';
    }
}

static int file_save(void *vctx, const lt_store *s) {
    file_ctx *c = vctx;
    make_parent(c->path);
    size_t n = strlen(c->path) + 32;
    char *tmp = malloc(n);
    if (!tmp) return lt_error(LT_ENOMEM, "config store: out of memory");
    snprintf(tmp, n, "%s.tmp.%ld", c->path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        int rc = lt_error(LT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    fprintf(f, "%s\n# kernel\tshape\thost\tparams\tmedian_ns\tsamples\tspeedup\n", STORE_MAGIC);
    for (int i = 0; i < lt_store_count(s); i++) {
        const lt_config_entry *e = lt_store_at(s, i);
        fprintf(f, "%s\t%s\t%s\t%s\t%.1f\t%lld\t%.4f\n", e->kernel, e->shape, e->host, e->params,
                e->median_ns, (long long)e->samples, e->speedup);
    }
    bool bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, c->path) != 0) {
        int rc = lt_error(LT_EIO, "%s: cannot write: %s", c->path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return rc;
    }
    free(tmp);
    return LT_OK;
}

static void file_free(void *vctx) {
    file_ctx *c = vctx;
    if (c) free(c->path);
    free(c);
}

int lt_store_backend_file(lt_store_backend *out, const char *path) {
    memset(out, 0, sizeof *out);
    file_ctx *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        return lt_error(LT_ENOMEM, "config store: out of memory");
    }
    out->name = c->path;
    out->load = file_load;
    out->save = file_save;
    out->free = file_free;
    out->ctx = c;
    return LT_OK;
}

bool lt_store_default_path(char *buf, size_t n) {
    return lt_cache_path(buf, n, "configs.tsv") == LT_OK;
}
