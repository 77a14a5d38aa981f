/* The worker's panel cache: operands that several tasks of a job use (a row
 * panel of A for every tile of its row), kept by panel id after the task
 * that carried them, so the later tasks carry a reference instead of the
 * bytes. Bounded by bytes: beyond the bound the least recently used panels
 * go first. Each panel remembers the partitions it came from and goes when
 * the last of them is revoked (the coordinator references a panel only on
 * the partition it sent it to). A reference the cache cannot serve is
 * LT_ENOTFOUND: the worker answers NEED_PANEL and the coordinator sends the
 * task again with the bytes; nothing is lost by evicting. */
#include "looptune/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t id;
    lt_dist_tensor t; /* its own copy of the data */
    size_t bytes;
    uint32_t crc32c;
    uint64_t used; /* the cache's clock at the last put or get */
    int32_t *parts;
    size_t n_parts;
} panel;

struct lt_dist_panels {
    panel *v;
    size_t n, cap;
    size_t bytes, max_bytes;
    uint64_t clock;
};

int lt_dist_panels_init(lt_dist_panels **out, size_t max_bytes) {
    *out = calloc(1, sizeof **out);
    if (!*out) return lt_error(LT_ENOMEM, "dist: out of memory");
    (*out)->max_bytes = max_bytes ? max_bytes : LT_DIST_PANEL_CACHE_BYTES;
    return LT_OK;
}

static void panel_remove(lt_dist_panels *c, size_t i) {
    c->bytes -= c->v[i].bytes;
    free(c->v[i].t.data);
    free(c->v[i].parts);
    c->v[i] = c->v[--c->n];
}

void lt_dist_panels_free(lt_dist_panels *c) {
    if (!c) return;
    while (c->n) panel_remove(c, c->n - 1);
    free(c->v);
    free(c);
}

static panel *panel_find(lt_dist_panels *c, uint64_t id) {
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].id == id) return &c->v[i];
    return NULL;
}

static int add_partition(panel *x, int32_t partition) {
    for (size_t i = 0; i < x->n_parts; i++)
        if (x->parts[i] == partition) return LT_OK;
    int32_t *p = realloc(x->parts, (x->n_parts + 1) * sizeof *p);
    if (!p) return lt_error(LT_ENOMEM, "dist: out of memory");
    x->parts = p;
    x->parts[x->n_parts++] = partition;
    return LT_OK;
}

int lt_dist_panels_put(lt_dist_panels *c, uint64_t id, int32_t partition, const lt_dist_tensor *t,
                       uint32_t crc32c) {
    if (!id) return lt_error(LT_EINVAL, "dist: panel id 0");
    size_t bytes = lt_dist_tensor_bytes(t);
    panel *x = panel_find(c, id);
    if (x && x->crc32c == crc32c && x->bytes == bytes) { /* kept already: one more partition */
        x->used = ++c->clock;
        return add_partition(x, partition);
    }
    if (x) panel_remove(c, (size_t)(x - c->v)); /* the id with other bytes: the newer wins */
    if (bytes > c->max_bytes) return LT_OK;     /* never fits: not kept, references miss */
    while (c->n && c->bytes + bytes > c->max_bytes) {
        size_t old = 0;
        for (size_t i = 1; i < c->n; i++)
            if (c->v[i].used < c->v[old].used) old = i;
        panel_remove(c, old);
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        panel *v = realloc(c->v, cap * sizeof *v);
        if (!v) return lt_error(LT_ENOMEM, "dist: out of memory");
        c->v = v;
        c->cap = cap;
    }
    panel p = {.id = id, .t = *t, .bytes = bytes, .crc32c = crc32c, .used = ++c->clock};
    if (!(p.t.data = malloc(bytes ? bytes : 1))) return lt_error(LT_ENOMEM, "dist: out of memory");
    memcpy(p.t.data, t->data, bytes);
    if (add_partition(&p, partition)) {
        free(p.t.data);
        return LT_ENOMEM;
    }
    c->v[c->n++] = p;
    c->bytes += bytes;
    return LT_OK;
}

int lt_dist_panels_get(lt_dist_panels *c, const Looptune__Tensor *msg, lt_dist_tensor *t) {
    memset(t, 0, sizeof *t);
    const char *name = msg->name && *msg->name ? msg->name : "?";
    snprintf(t->name, sizeof t->name, "%s", name);
    panel *x = c ? panel_find(c, msg->panel_id) : NULL;
    if (!x)
        return lt_error(LT_ENOTFOUND, "tensor %s: panel %016llx is not in this worker's cache",
                        name, (unsigned long long)msg->panel_id);
    bool same = x->crc32c == msg->crc32c && x->bytes == msg->nbytes && msg->dtype &&
                !strcmp(msg->dtype, lt_dtype_name(x->t.dtype)) &&
                msg->n_shape == (size_t)x->t.ndim;
    for (size_t i = 0; same && i < msg->n_shape; i++) same = msg->shape[i] == x->t.shape[i];
    if (!same)
        return lt_error(LT_ENOTFOUND, "tensor %s: panel %016llx in this worker's cache is "
                        "another tensor (CRC32C %08x, the reference says %08x)", name,
                        (unsigned long long)msg->panel_id, x->crc32c, msg->crc32c);
    float *data = malloc(x->bytes ? x->bytes : 1);
    if (!data) return lt_error(LT_ENOMEM, "tensor %s: out of memory", name);
    memcpy(data, x->t.data, x->bytes);
    *t = x->t;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->data = data;
    x->used = ++c->clock;
    return LT_OK;
}

void lt_dist_panels_drop_partition(lt_dist_panels *c, int32_t partition) {
    if (!c) return;
    for (size_t i = c->n; i-- > 0;) {
        panel *x = &c->v[i];
        for (size_t k = 0; k < x->n_parts; k++)
            if (x->parts[k] == partition) {
                x->parts[k] = x->parts[--x->n_parts];
                break;
            }
        if (!x->n_parts) panel_remove(c, i);
    }
}

size_t lt_dist_panels_count(const lt_dist_panels *c) { return c ? c->n : 0; }
size_t lt_dist_panels_bytes(const lt_dist_panels *c) { return c ? c->bytes : 0; }

int lt_dist_input_get(lt_dist_blobs *b, lt_dist_panels *c, const Looptune__Tensor *msg,
                      int32_t partition, int64_t max_elems, lt_dist_tensor *t) {
    if (msg->panel_ref) return lt_dist_panels_get(c, msg, t);
    int rc = lt_dist_tensor_get(b, msg, max_elems, t);
    if (rc || !msg->panel_id || !c) return rc;
    if (lt_dist_panels_put(c, msg->panel_id, partition, t, msg->crc32c))
        lt_log(LT_LOG_WARN, "dist: panel %016llx not kept: %s", (unsigned long long)msg->panel_id,
               lt_errmsg());
    return LT_OK;
}
