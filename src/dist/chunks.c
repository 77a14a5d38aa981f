/* Tensors in records: inline when small, else cut into Chunk records of at
 * most chunk_bytes each, every chunk and the whole tensor with its CRC32C.
 * The receiving side keeps chunks by blob id until the record that
 * references them arrives, then reassembles and checks them: a corrupted or
 * missing chunk is an error that names it, never a short tensor. */
#include "looptune/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- outbox ------------------------------------------------------------------------ */

void lt_dist_outbox_free(lt_dist_outbox *o) {
    if (!o) return;
    for (size_t i = 0; i < o->n; i++) {
        free(o->keys[i]);
        free(o->values[i]);
    }
    free(o->keys);
    free(o->values);
    free(o->lens);
    memset(o, 0, sizeof *o);
}

int lt_dist_outbox_add(lt_dist_outbox *o, const char *key, const Looptune__Envelope *env) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 8;
        char **k = realloc(o->keys, cap * sizeof *k);
        if (k) o->keys = k;
        uint8_t **v = k ? realloc(o->values, cap * sizeof *v) : NULL;
        if (v) o->values = v;
        size_t *l = v ? realloc(o->lens, cap * sizeof *l) : NULL;
        if (!l) return lt_error(LT_ENOMEM, "dist: out of memory");
        o->lens = l;
        o->cap = cap;
    }
    uint8_t *buf;
    size_t len;
    int rc = lt_envelope_encode(env, &buf, &len);
    if (rc) return rc;
    char *k = strdup(key);
    if (!k) {
        free(buf);
        return lt_error(LT_ENOMEM, "dist: out of memory");
    }
    o->keys[o->n] = k;
    o->values[o->n] = buf;
    o->lens[o->n] = len;
    o->n++;
    return LT_OK;
}

int lt_dist_outbox_send(const lt_dist_outbox *o, lt_producer *p, int32_t partition,
                        int64_t *bytes_sent) {
    for (size_t i = 0; i < o->n; i++) {
        int tries = 0;
        int rc;
        while ((rc = lt_producer_send_to(p, partition, o->keys[i], strlen(o->keys[i]),
                                         o->values[i], o->lens[i])) == LT_PRODUCER_DROPPED) {
            if (++tries > 3000)
                return lt_error(LT_ETIMEOUT, "submit: the producer's queue stayed full for 30 s");
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
        if (rc) return rc;
        if (bytes_sent) *bytes_sent += (int64_t)o->lens[i];
    }
    return LT_OK;
}

/* ---- sending ----------------------------------------------------------------------- */

static int64_t tensor_elems(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* A random 64-bit id: distinct chunk sets of the same task (two workers
 * running it, two attempts) never mix. */
static uint64_t blob_id_new(void) {
    static _Atomic uint64_t counter;
    uint64_t x = lt_now_ns() ^ ((uint64_t)atomic_fetch_add(&counter, 1) << 40) ^
                 ((uint64_t)(uintptr_t)&counter << 16);
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        uint64_t r;
        if (fread(&r, sizeof r, 1, f) == 1) x ^= r;
        fclose(f);
    }
    /* splitmix64 finaliser: the ids look random even without /dev/urandom */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return (x ^ (x >> 31)) | 1; /* never 0: 0 means inline */
}

static bool dtype_travels(lt_dtype d) {
    return d == LT_F32 || d == LT_F16 || d == LT_BF16 || d == LT_Q8_0;
}

/* Bytes of a tensor of dtype d and this shape; 0 if the last dimension is
 * no multiple of d's block. */
static size_t dtype_bytes(lt_dtype d, int ndim, const int64_t *shape) {
    if (ndim < 1 || shape[ndim - 1] < 1) return 0;
    int64_t last = shape[ndim - 1];
    if (last % lt_dtype_block(d)) return 0;
    return lt_dtype_row_bytes(d, last) * (size_t)(tensor_elems(ndim, shape) / last);
}

size_t lt_dist_tensor_bytes(const lt_dist_tensor *t) {
    return dtype_travels(t->dtype) ? dtype_bytes(t->dtype, t->ndim, t->shape) : 0;
}

int lt_dist_tensor_put(const lt_dist_tensor *t, const lt_dist_route *r, lt_dist_outbox *o,
                       Looptune__Tensor *msg, int64_t *shape_buf) {
    size_t chunk = r->chunk_bytes ? r->chunk_bytes : LT_DIST_CHUNK_BYTES;
    size_t nbytes = lt_dist_tensor_bytes(t);
    if (!nbytes && tensor_elems(t->ndim, t->shape))
        return lt_error(LT_EINVAL, "tensor %s: %s rows of %lld elements", t->name,
                        lt_dtype_name(t->dtype), (long long)t->shape[t->ndim - 1]);
    for (int i = 0; i < t->ndim; i++) shape_buf[i] = t->shape[i];
    msg->name = (char *)t->name;
    msg->dtype = (char *)lt_dtype_name(t->dtype);
    msg->n_shape = (size_t)t->ndim;
    msg->shape = shape_buf;
    msg->nbytes = nbytes;
    msg->crc32c = lt_crc32c(t->data, nbytes);
    if (nbytes <= chunk / 4) {
        msg->data.data = (uint8_t *)t->data;
        msg->data.len = nbytes;
        return LT_OK;
    }
    uint32_t count = (uint32_t)((nbytes + chunk - 1) / chunk);
    msg->blob_id = blob_id_new();
    msg->chunk_count = count;
    for (uint32_t i = 0; i < count; i++) {
        size_t off = (size_t)i * chunk, len = nbytes - off < chunk ? nbytes - off : chunk;
        Looptune__Chunk c = LOOPTUNE__CHUNK__INIT;
        c.job_id = (char *)r->job_id;
        c.task_index = r->task_index;
        c.attempt = r->attempt;
        c.blob_id = msg->blob_id;
        c.index = i;
        c.count = count;
        c.offset = off;
        c.data.data = (uint8_t *)t->data + off;
        c.data.len = len;
        c.crc32c = lt_crc32c(c.data.data, len);
        Looptune__Envelope env;
        lt_envelope_init(&env);
        env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CHUNK;
        env.chunk = &c;
        int rc = lt_dist_outbox_add(o, r->key, &env);
        if (rc) return rc;
    }
    return LT_OK;
}

/* ---- receiving --------------------------------------------------------------------- */

typedef struct {
    uint64_t blob_id;
    uint32_t count;
    uint32_t have;       /* distinct chunks kept */
    uint8_t **data;      /* [count] NULL until that chunk arrived */
    size_t *len;         /* [count] */
    uint64_t *offset;    /* [count] the chunk's offset field */
    char bad[160];       /* "" or why the blob cannot assemble (a CRC mismatch) */
    int32_t partition;
    int64_t min_offset;  /* lowest record offset of its chunks */
    uint64_t first_ns;
    size_t bytes;
} blob;

struct lt_dist_blobs {
    blob *v;
    size_t n, cap;
    size_t bytes, max_bytes;
};

int lt_dist_blobs_init(lt_dist_blobs **out, size_t max_bytes) {
    *out = calloc(1, sizeof **out);
    if (!*out) return lt_error(LT_ENOMEM, "dist: out of memory");
    (*out)->max_bytes = max_bytes ? max_bytes : (size_t)1 << 30;
    return LT_OK;
}

static void blob_clear(blob *x) {
    for (uint32_t i = 0; x->data && i < x->count; i++) free(x->data[i]);
    free(x->data);
    free(x->len);
    free(x->offset);
}

/* Removes blob i (the last one moves into its place). */
static void blob_remove(lt_dist_blobs *b, size_t i) {
    b->bytes -= b->v[i].bytes;
    blob_clear(&b->v[i]);
    b->v[i] = b->v[--b->n];
}

void lt_dist_blobs_free(lt_dist_blobs *b) {
    if (!b) return;
    while (b->n) blob_remove(b, b->n - 1);
    free(b->v);
    free(b);
}

static blob *blob_find(lt_dist_blobs *b, uint64_t id) {
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].blob_id == id) return &b->v[i];
    return NULL;
}

int lt_dist_blobs_add(lt_dist_blobs *b, const Looptune__Chunk *c, int32_t partition,
                      int64_t offset) {
    if (!c->blob_id) return lt_error(LT_EFORMAT, "chunk without a blob id");
    if (!c->count || c->index >= c->count)
        return lt_error(LT_EFORMAT, "chunk index %u of count %u", c->index, c->count);
    if (c->count > 1u << 20) return lt_error(LT_EFORMAT, "chunk count %u too large", c->count);
    blob *x = blob_find(b, c->blob_id);
    if (x && x->count != c->count)
        return lt_error(LT_EFORMAT, "blob %016llx: chunk %u says %u chunks, an earlier one %u",
                        (unsigned long long)c->blob_id, c->index, c->count, x->count);
    if (!x) {
        /* make room: the oldest blobs go first */
        while (b->n && b->bytes + c->data.len > b->max_bytes) {
            size_t old = 0;
            for (size_t i = 1; i < b->n; i++)
                if (b->v[i].first_ns < b->v[old].first_ns) old = i;
            lt_log(LT_LOG_WARN, "dist: chunk store full: dropping blob %016llx",
                   (unsigned long long)b->v[old].blob_id);
            blob_remove(b, old);
        }
        if (b->n == b->cap) {
            size_t cap = b->cap ? 2 * b->cap : 16;
            blob *v = realloc(b->v, cap * sizeof *v);
            if (!v) return lt_error(LT_ENOMEM, "dist: out of memory");
            b->v = v;
            b->cap = cap;
        }
        x = &b->v[b->n];
        memset(x, 0, sizeof *x);
        x->blob_id = c->blob_id;
        x->count = c->count;
        x->partition = partition;
        x->min_offset = offset;
        x->first_ns = lt_now_ns();
        x->data = calloc(c->count, sizeof *x->data);
        x->len = calloc(c->count, sizeof *x->len);
        x->offset = calloc(c->count, sizeof *x->offset);
        if (!x->data || !x->len || !x->offset) {
            blob_clear(x);
            return lt_error(LT_ENOMEM, "dist: out of memory");
        }
        b->n++;
    }
    if (offset >= 0 && (x->min_offset < 0 || offset < x->min_offset)) x->min_offset = offset;
    uint32_t crc = lt_crc32c(c->data.data, c->data.len);
    if (crc != c->crc32c) {
        if (!x->bad[0])
            snprintf(x->bad, sizeof x->bad, "chunk %u of %u: CRC32C mismatch (record says "
                     "%08x, data has %08x)", c->index + 1, c->count, c->crc32c, crc);
        return LT_OK;
    }
    if (x->data[c->index]) {
        /* a replay of the same chunk is harmless; other bytes are not */
        if (x->len[c->index] != c->data.len ||
            (c->data.len && memcmp(x->data[c->index], c->data.data, c->data.len)))
            return lt_error(LT_EFORMAT, "blob %016llx: chunk %u arrived twice with different "
                            "bytes", (unsigned long long)c->blob_id, c->index);
        return LT_OK;
    }
    uint8_t *d = malloc(c->data.len ? c->data.len : 1);
    if (!d) return lt_error(LT_ENOMEM, "dist: out of memory");
    if (c->data.len) memcpy(d, c->data.data, c->data.len); /* an empty chunk's data is NULL */
    x->data[c->index] = d;
    x->len[c->index] = c->data.len;
    x->offset[c->index] = c->offset;
    x->have++;
    x->bytes += c->data.len;
    b->bytes += c->data.len;
    return LT_OK;
}

int lt_dist_tensor_get(lt_dist_blobs *b, const Looptune__Tensor *msg, int64_t max_elems,
                       lt_dist_tensor *t) {
    memset(t, 0, sizeof *t);
    const char *name = msg->name && *msg->name ? msg->name : "?";
    snprintf(t->name, sizeof t->name, "%s", name);
    lt_dtype dt = LT_F32;
    if (!msg->dtype || lt_dtype_parse(msg->dtype, &dt) || !dtype_travels(dt))
        return lt_error(LT_EFORMAT, "tensor %s: dtype '%s', expected f32, f16, bf16 or q8_0",
                        name, msg->dtype ? msg->dtype : "");
    t->dtype = dt;
    if (msg->n_shape < 1 || msg->n_shape > 4)
        return lt_error(LT_EFORMAT, "tensor %s: %zu dimensions", name, msg->n_shape);
    int64_t elems = 1;
    for (size_t i = 0; i < msg->n_shape; i++) {
        if (msg->shape[i] < 1 || msg->shape[i] > max_elems || elems > max_elems / msg->shape[i])
            return lt_error(LT_EFORMAT, "tensor %s: shape out of range (at most %lld elements)",
                            name, (long long)max_elems);
        elems *= msg->shape[i];
        t->shape[i] = msg->shape[i];
    }
    t->ndim = (int)msg->n_shape;
    size_t nbytes = dtype_bytes(dt, t->ndim, t->shape);
    if (!nbytes)
        return lt_error(LT_EFORMAT, "tensor %s: %s rows of %lld elements: a multiple of %lld "
                        "expected", name, lt_dtype_name(dt), (long long)t->shape[t->ndim - 1],
                        (long long)lt_dtype_block(dt));
    if (msg->nbytes != nbytes)
        return lt_error(LT_EFORMAT, "tensor %s: %llu bytes announced, its shape needs %zu", name,
                        (unsigned long long)msg->nbytes, nbytes);
    float *data = malloc(nbytes);
    if (!data) return lt_error(LT_ENOMEM, "tensor %s: out of memory", name);
    if (msg->chunk_count == 0) {
        if (msg->data.len != nbytes) {
            free(data);
            return lt_error(LT_EFORMAT, "tensor %s: %zu inline bytes, its shape needs %zu", name,
                            msg->data.len, nbytes);
        }
        memcpy(data, msg->data.data, nbytes);
    } else {
        blob *x = blob_find(b, msg->blob_id);
        int rc = LT_OK;
        if (!x)
            rc = lt_error(LT_EFORMAT, "tensor %s: none of its %u chunks arrived", name,
                          msg->chunk_count);
        else if (x->bad[0])
            rc = lt_error(LT_EFORMAT, "tensor %s: %s", name, x->bad);
        else if (x->count != msg->chunk_count)
            rc = lt_error(LT_EFORMAT, "tensor %s: %u chunks announced, the chunks say %u", name,
                          msg->chunk_count, x->count);
        else if (x->have != x->count) {
            uint32_t miss = 0;
            while (miss < x->count && x->data[miss]) miss++;
            rc = lt_error(LT_EFORMAT, "tensor %s: chunk %u of %u missing (%u arrived)", name,
                          miss + 1, x->count, x->have);
        }
        size_t at = 0;
        for (uint32_t i = 0; !rc && i < x->count; i++) {
            if (x->offset[i] != at || at + x->len[i] > nbytes)
                rc = lt_error(LT_EFORMAT, "tensor %s: chunk %u of %u does not fit at byte %zu",
                              name, i + 1, x->count, at);
            else memcpy((uint8_t *)data + at, x->data[i], x->len[i]);
            at += x->len[i];
        }
        if (!rc && at != nbytes)
            rc = lt_error(LT_EFORMAT, "tensor %s: chunks hold %zu bytes, its shape needs %zu",
                          name, at, nbytes);
        if (x) blob_remove(b, (size_t)(x - b->v));
        if (rc) {
            free(data);
            return rc;
        }
    }
    uint32_t crc = lt_crc32c(data, nbytes);
    if (crc != msg->crc32c) {
        free(data);
        return lt_error(LT_EFORMAT, "tensor %s: CRC32C mismatch (record says %08x, data has %08x)",
                        name, msg->crc32c, crc);
    }
    t->data = data;
    return LT_OK;
}

void lt_dist_blobs_drop_partition(lt_dist_blobs *b, int32_t partition) {
    for (size_t i = b->n; i-- > 0;)
        if (b->v[i].partition == partition) blob_remove(b, i);
}

size_t lt_dist_blobs_expire(lt_dist_blobs *b, uint64_t age_ns) {
    uint64_t now = lt_now_ns();
    size_t n = 0;
    for (size_t i = b->n; i-- > 0;)
        if (now - b->v[i].first_ns > age_ns) {
            blob_remove(b, i);
            n++;
        }
    return n;
}

int64_t lt_dist_blobs_min_offset(const lt_dist_blobs *b, int32_t partition) {
    int64_t m = -1;
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].partition == partition && b->v[i].min_offset >= 0 &&
            (m < 0 || b->v[i].min_offset < m))
            m = b->v[i].min_offset;
    return m;
}

size_t lt_dist_blobs_count(const lt_dist_blobs *b) { return b->n; }
