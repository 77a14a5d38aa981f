/* The digits data set of the mlp-digits objective: scikit-learn's
 * digits.csv.gz (64 pixel counts 0..16 then the digit, one image a line)
 * read through zlib, checked line by line, and split into train,
 * validation and test sets by one fixed shuffle (seeded, so the split is
 * the same on every machine and in every run). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "hpo/hpo_internal.h"

#define LT__DIGITS_MAX 100000    /* lines read at most */
#define LT__DIGITS_SPLIT_SEED 20 /* the shuffle's seed: never change it (the split would) */

static int set_alloc(lt_hpo_digits_set *s, int n) {
    s->n = n;
    s->x = malloc((size_t)n * LT_HPO_DIGITS_PIXELS * sizeof *s->x);
    s->y = malloc((size_t)n * sizeof *s->y);
    return s->x && s->y ? LT_OK : lt_error(LT_ENOMEM, "digits: out of memory");
}

void lt_hpo_digits_free(lt_hpo_digits *d) {
    lt_hpo_digits_set *sets[3] = {&d->train, &d->val, &d->test};
    for (int i = 0; i < 3; i++) {
        free(sets[i]->x);
        free(sets[i]->y);
    }
    memset(d, 0, sizeof *d);
}

/* One line "p0,...,p63,label" into px[64] and *label. */
static bool parse_line(char *line, float *px, uint8_t *label) {
    char *c = line;
    for (int i = 0; i <= LT_HPO_DIGITS_PIXELS; i++) {
        char *end;
        long v = strtol(c, &end, 10);
        if (end == c) return false;
        if (i < LT_HPO_DIGITS_PIXELS) {
            if (v < 0 || v > 16 || *end != ',') return false;
            px[i] = (float)v / 16.0f;
        } else {
            while (*end == '\r' || *end == '\n' || *end == ' ') end++;
            if (v < 0 || v >= LT_HPO_DIGITS_CLASSES || *end) return false;
            *label = (uint8_t)v;
        }
        c = end + 1;
    }
    return true;
}

int lt_hpo_digits_load(const char *path, lt_hpo_digits *d) {
    memset(d, 0, sizeof *d);
    gzFile f = gzopen(path, "rb"); /* reads plain files as they are too */
    if (!f) return lt_error(LT_EIO, "%s: cannot open", path);
    int n = 0, cap = 0, rc = LT_OK;
    float *x = NULL;
    uint8_t *y = NULL;
    char line[1024];
    while (gzgets(f, line, sizeof line)) {
        if (line[0] == '\n' || line[0] == 0) continue;
        if (n == LT__DIGITS_MAX) {
            rc = lt_error(LT_EFORMAT, "%s: more than %d images", path, LT__DIGITS_MAX);
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 2048;
            float *nx = realloc(x, (size_t)cap * LT_HPO_DIGITS_PIXELS * sizeof *nx);
            if (nx) x = nx;
            uint8_t *ny = realloc(y, (size_t)cap);
            if (ny) y = ny;
            if (!nx || !ny) {
                rc = lt_error(LT_ENOMEM, "digits: out of memory");
                break;
            }
        }
        if (!parse_line(line, &x[(size_t)n * LT_HPO_DIGITS_PIXELS], &y[n])) {
            rc = lt_error(LT_EFORMAT,
                          "%s:%d: expected 64 pixel counts 0..16 and a digit, comma-separated",
                          path, n + 1);
            break;
        }
        n++;
    }
    int err;
    const char *msg = gzerror(f, &err);
    if (!rc && err != Z_OK && err != Z_STREAM_END) rc = lt_error(LT_EIO, "%s: %s", path, msg);
    gzclose(f);
    if (!rc && n < 10) rc = lt_error(LT_EFORMAT, "%s: only %d images", path, n);
    /* the fixed shuffle, then 60 / 20 / 20 % */
    int *perm = rc ? NULL : malloc((size_t)n * sizeof *perm);
    if (!rc && !perm) rc = lt_error(LT_ENOMEM, "digits: out of memory");
    if (!rc) {
        lt_hpo_rng r;
        lt_hpo_rng_seed(&r, LT__DIGITS_SPLIT_SEED);
        for (int i = 0; i < n; i++) perm[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(lt_hpo_rng_next(&r) % (uint64_t)(i + 1));
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        int n_train = n * 60 / 100, n_val = n * 20 / 100, n_test = n - n_train - n_val;
        lt_hpo_digits_set *sets[3] = {&d->train, &d->val, &d->test};
        int sizes[3] = {n_train, n_val, n_test}, k = 0;
        for (int s = 0; s < 3 && !rc; s++) {
            if ((rc = set_alloc(sets[s], sizes[s]))) break;
            for (int i = 0; i < sizes[s]; i++, k++) {
                memcpy(&sets[s]->x[(size_t)i * LT_HPO_DIGITS_PIXELS],
                       &x[(size_t)perm[k] * LT_HPO_DIGITS_PIXELS],
                       LT_HPO_DIGITS_PIXELS * sizeof *x);
                sets[s]->y[i] = y[perm[k]];
            }
        }
    }
    free(perm);
    free(x);
    free(y);
    if (rc) lt_hpo_digits_free(d);
    return rc;
}
