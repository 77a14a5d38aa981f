/* The config store: the best known configuration per (kernel, shape
 * signature, host class), in memory, behind a backend that loads and saves
 * it (a local file, store_file.c, or a compacted Kafka topic, store_topic.c).
 * Also the warm start: the store's entries for this host as a runtime's
 * values in force. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/model.h"
#include "tune/tune_internal.h"

struct lt_store {
    lt_store_backend be;
    lt_config_entry *e;
    int n, cap;
};

int lt_store_open(lt_store **out, const lt_store_backend *backend, int *skipped) {
    *out = NULL;
    lt_store *s = calloc(1, sizeof *s);
    if (!s) {
        if (backend->free) backend->free(backend->ctx);
        return lt_error(LT_ENOMEM, "config store: out of memory");
    }
    s->be = *backend;
    int rc = s->be.load ? s->be.load(s->be.ctx, s) : LT_OK;
    if (rc < 0) {
        lt_store_close(s);
        return rc;
    }
    if (skipped) *skipped = rc;
    *out = s;
    return LT_OK;
}

void lt_store_close(lt_store *s) {
    if (!s) return;
    if (s->be.free) s->be.free(s->be.ctx);
    free(s->e);
    free(s);
}

int lt_store_save(lt_store *s) { return s->be.save ? s->be.save(s->be.ctx, s) : LT_OK; }
const char *lt_store_name(const lt_store *s) { return s->be.name ? s->be.name : "(store)"; }
int lt_store_count(const lt_store *s) { return s->n; }
const lt_config_entry *lt_store_at(const lt_store *s, int i) {
    return i >= 0 && i < s->n ? &s->e[i] : NULL;
}

static bool field_ok(const char *f, size_t cap) {
    size_t n = strnlen(f, cap);
    if (n == 0 || n == cap) return false;
    for (size_t i = 0; i < n; i++)
        if (f[i] == '\t' || f[i] == '\n' || f[i] == '\r' || f[i] == ' ') return false;
    return true;
}

int lt__config_entry_check(const lt_config_entry *e, lt_space *sp, lt_params *p) {
    if (!field_ok(e->kernel, sizeof e->kernel) || !field_ok(e->shape, sizeof e->shape) ||
        !field_ok(e->host, sizeof e->host) || !field_ok(e->params, sizeof e->params))
        return lt_error(LT_EINVAL, "config entry: empty field or one with blanks");
    int rc = lt_space_by_name(e->kernel, sp);
    if (!rc) rc = lt_space_parse(sp, e->params, p);
    if (rc) return rc;
    if (!(e->median_ns > 0) || !isfinite(e->median_ns) || e->samples < 1 ||
        !(e->speedup > 0) || !isfinite(e->speedup))
        return lt_error(LT_EINVAL, "config entry %s %s: median, samples and speed-up must be "
                                   "positive", e->kernel, e->shape);
    if (e->trials < 0 || e->trials > (int64_t)UINT32_MAX)
        return lt_error(LT_EINVAL, "config entry %s %s: trials %lld outside 0..%lu", e->kernel,
                        e->shape, (long long)e->trials, (unsigned long)UINT32_MAX);
    return LT_OK;
}

int lt_store_put(lt_store *s, const lt_config_entry *e) {
    lt_space sp;
    lt_params p;
    int rc = lt__config_entry_check(e, &sp, &p);
    if (rc) return rc;
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->e[i].kernel, e->kernel) && !strcmp(s->e[i].shape, e->shape) &&
            !strcmp(s->e[i].host, e->host)) {
            s->e[i] = *e;
            return LT_OK;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        lt_config_entry *ne = realloc(s->e, (size_t)cap * sizeof *ne);
        if (!ne) return lt_error(LT_ENOMEM, "config store: out of memory");
        s->e = ne;
        s->cap = cap;
    }
    s->e[s->n++] = *e;
    return LT_OK;
}

bool lt__store_remove_key(lt_store *s, const void *key, size_t len) {
    for (int i = 0; i < s->n; i++) {
        const lt_config_entry *e = &s->e[i];
        char k[sizeof e->kernel + sizeof e->shape + sizeof e->host + 2];
        size_t kl = (size_t)snprintf(k, sizeof k, "%s|%s|%s", e->kernel, e->shape, e->host);
        if (kl != len || memcmp(k, key, len)) continue;
        /* keys are unique: at most one entry goes; the order of the rest is kept */
        memmove(&s->e[i], &s->e[i + 1], (size_t)(s->n - i - 1) * sizeof *s->e);
        s->n--;
        return true;
    }
    return false;
}

const lt_config_entry *lt_store_get(const lt_store *s, const char *kernel, const char *shape,
                                    const char *host) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->e[i].kernel, kernel) && !strcmp(s->e[i].shape, shape) &&
            !strcmp(s->e[i].host, host))
            return &s->e[i];
    return NULL;
}

int lt_store_warm_start(const lt_store *s, lt_tuning *t, const char *host, int *refused) {
    int applied = 0, bad = 0;
    for (int i = 0; i < s->n; i++) {
        const lt_config_entry *e = &s->e[i];
        /* another host's, or another model's shapes */
        if (strcmp(e->host, host) || !lt_tuning_uses(t, e->kernel, e->shape)) continue;
        lt_space sp;
        lt_params prm;
        int rc = lt_space_by_name(e->kernel, &sp);
        if (!rc) rc = lt_space_parse(&sp, e->params, &prm);
        if (!rc) rc = lt_tuning_set(t, e->kernel, e->shape, &prm);
        if (rc) {
            lt_log(LT_LOG_WARN, "warm start: %s %s: config %s skipped: %s", e->kernel, e->shape,
                   e->params, lt_errmsg());
            bad++;
            continue;
        }
        applied++;
    }
    if (refused) *refused = bad;
    return applied;
}
