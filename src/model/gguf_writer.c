/* GGUF v3 writer (alignment 32, the layout llama.cpp's loader expects):
 * metadata is serialised as it is added, tensors are either copied or
 * produced by a fill callback at close time, so large models stream to disk
 * a chunk of rows at a time. */
#include "model/model_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF is written in host order");

#define GGUF_MAGIC 0x46554747u
#define GGUF_VERSION 3u
#define FILL_CHUNK_BYTES ((size_t)4 << 20) /* rows produced per fill call, at most */

typedef struct {
    char *name;
    lt_dtype dtype;
    int n_dims;
    int64_t ne[4];
    size_t nbytes;
    void *data;             /* owned copy, or NULL with fill */
    lt__gguf_fill_fn fill;
    void *ctx;
} wtensor;

typedef struct {
    uint8_t *p;
    size_t n, cap;
} bytes;

struct lt_gguf_writer {
    char *path;
    FILE *f;
    bytes meta;    /* serialised kvs */
    char **keys;   /* for duplicate detection */
    int64_t n_kv;
    wtensor *t;
    int64_t n_t, cap_t;
    int status;    /* first failure of an add call; close refuses to write after one */
    char errmsg[256];
};

/* ---- helpers ---------------------------------------------------------------- */

static int fail(lt_gguf_writer *w, int status) {
    if (w->status == LT_OK) {
        w->status = status;
        snprintf(w->errmsg, sizeof w->errmsg, "%s", lt_errmsg());
    }
    return status;
}

static int put(lt_gguf_writer *w, bytes *b, const void *src, size_t n) {
    if (n == 0) return LT_OK;
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->n < n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) return fail(w, lt_error(LT_ENOMEM, "%s: out of memory for metadata", w->path));
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return LT_OK;
}

static int put_u32(lt_gguf_writer *w, uint32_t v) { return put(w, &w->meta, &v, 4); }
static int put_u64(lt_gguf_writer *w, uint64_t v) { return put(w, &w->meta, &v, 8); }

static int put_str(lt_gguf_writer *w, const char *s, size_t len) {
    int st = put_u64(w, len);
    return st ? st : put(w, &w->meta, s, len);
}

/* Starts a kv: checks the key, remembers it, writes key and type. */
static int begin_kv(lt_gguf_writer *w, const char *key, lt_gguf_type type) {
    if (w->status) return w->status;
    if (!key || !*key) return fail(w, lt_error(LT_EINVAL, "%s: empty metadata key", w->path));
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return fail(w, lt_error(LT_EINVAL, "%s: duplicate metadata key '%s'", w->path, key));
    char **keys = realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof *keys);
    if (!keys) return fail(w, lt_error(LT_ENOMEM, "%s: out of memory", w->path));
    w->keys = keys;
    if (!(keys[w->n_kv] = strdup(key))) return fail(w, lt_error(LT_ENOMEM, "%s: out of memory",
                                                                w->path));
    w->n_kv++;
    int st = put_str(w, key, strlen(key));
    return st ? st : put_u32(w, (uint32_t)type);
}

/* ---- open / abort ------------------------------------------------------------ */

static void writer_free(lt_gguf_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    for (int64_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        lt_aligned_free(w->t[i].data);
    }
    free(w->t);
    free(w->meta.p);
    free(w->path);
    free(w);
}

int lt_gguf_writer_open(lt_gguf_writer **out, const char *path) {
    if (!out || !path) return lt_error(LT_EINVAL, "%s: NULL argument", __func__);
    *out = NULL;
    lt_gguf_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return lt_error(LT_ENOMEM, "%s: out of memory", path);
    }
    w->f = fopen(path, "wb");
    if (!w->f) {
        int e = errno;
        writer_free(w);
        return lt_error(LT_EIO, "%s: cannot create: %s", path, strerror(e));
    }
    *out = w;
    return LT_OK;
}

void lt_gguf_writer_abort(lt_gguf_writer *w) {
    if (!w) return;
    if (w->f) {
        fclose(w->f);
        remove(w->path);
    }
    writer_free(w);
}

/* ---- metadata ------------------------------------------------------------------ */

int lt__gguf_writer_kv(lt_gguf_writer *w, const char *key, lt_gguf_type type, const void *val) {
    if (type == LT_GGUF_ARRAY || (unsigned)type >= LT_GGUF_TYPE_COUNT)
        return fail(w, lt_error(LT_EINVAL, "%s: key '%s': %s is not a scalar type", w->path, key,
                                lt__gguf_type_name(type)));
    int st = begin_kv(w, key, type);
    if (st) return st;
    if (type == LT_GGUF_STRING) return put_str(w, val, strlen(val));
    return put(w, &w->meta, val, lt__gguf_type_size(type));
}

int lt__gguf_writer_arr(lt_gguf_writer *w, const char *key, lt_gguf_type elem_type, int64_t n,
                        const void *data) {
    if (elem_type == LT_GGUF_ARRAY || elem_type == LT_GGUF_STRING ||
        (unsigned)elem_type >= LT_GGUF_TYPE_COUNT)
        return fail(w, lt_error(LT_EINVAL, "%s: key '%s': arrays of %s need their own writer",
                                w->path, key, lt__gguf_type_name(elem_type)));
    if (n < 0) return fail(w, lt_error(LT_EINVAL, "%s: key '%s': negative count", w->path, key));
    int st = begin_kv(w, key, LT_GGUF_ARRAY);
    if (!st) st = put_u32(w, (uint32_t)elem_type);
    if (!st) st = put_u64(w, (uint64_t)n);
    return st ? st : put(w, &w->meta, data, (size_t)n * lt__gguf_type_size(elem_type));
}

int lt_gguf_writer_u32(lt_gguf_writer *w, const char *key, uint32_t v) {
    return lt__gguf_writer_kv(w, key, LT_GGUF_U32, &v);
}

int lt_gguf_writer_f32(lt_gguf_writer *w, const char *key, float v) {
    return lt__gguf_writer_kv(w, key, LT_GGUF_F32, &v);
}

int lt_gguf_writer_str(lt_gguf_writer *w, const char *key, const char *v) {
    return lt__gguf_writer_kv(w, key, LT_GGUF_STRING, v);
}

/* lens may be NULL: then every string is NUL-terminated. */
int lt_gguf_writer_arr_str(lt_gguf_writer *w, const char *key, int64_t n,
                           const char *const *v, const size_t *lens) {
    if (n < 0) return fail(w, lt_error(LT_EINVAL, "%s: key '%s': negative count", w->path, key));
    int st = begin_kv(w, key, LT_GGUF_ARRAY);
    if (!st) st = put_u32(w, LT_GGUF_STRING);
    if (!st) st = put_u64(w, (uint64_t)n);
    for (int64_t i = 0; i < n && !st; i++) st = put_str(w, v[i], lens ? lens[i] : strlen(v[i]));
    return st;
}

int lt_gguf_writer_raw(lt_gguf_writer *w, const lt_gguf_kv_raw *kv) {
    if (w->status) return w->status;
    if ((unsigned)kv->type >= LT_GGUF_TYPE_COUNT || kv->key_len == 0 ||
        memchr(kv->key, 0, kv->key_len))
        return fail(w, lt_error(LT_EINVAL, "%s: a copied metadata pair has a bad key or type",
                                w->path));
    char *key = strndup(kv->key, kv->key_len);
    if (!key) return fail(w, lt_error(LT_ENOMEM, "%s: out of memory", w->path));
    int st = begin_kv(w, key, kv->type);
    free(key);
    return st ? st : put(w, &w->meta, kv->raw, kv->raw_len);
}

int lt_gguf_writer_arr_f32(lt_gguf_writer *w, const char *key, int64_t n, const float *v) {
    return lt__gguf_writer_arr(w, key, LT_GGUF_F32, n, v);
}

int lt_gguf_writer_arr_i32(lt_gguf_writer *w, const char *key, int64_t n, const int32_t *v) {
    return lt__gguf_writer_arr(w, key, LT_GGUF_I32, n, v);
}

/* ---- tensors -------------------------------------------------------------------- */

/* Validates and appends a tensor entry (without data). */
static int add_tensor(lt_gguf_writer *w, const char *name, lt_dtype dtype, int n_dims,
                      const int64_t *ne, wtensor **out) {
    if (w->status) return w->status;
    if (!name || !*name || strlen(name) > LT_GGUF_MAX_NAME)
        return fail(w, lt_error(LT_EINVAL, "%s: tensor name '%s' empty or longer than %d bytes",
                                w->path, name ? name : "", LT_GGUF_MAX_NAME));
    if ((unsigned)dtype >= LT_DTYPE_COUNT)
        return fail(w, lt_error(LT_EINVAL, "%s: tensor '%s': bad dtype %d", w->path, name,
                                (int)dtype));
    if (n_dims < 1 || n_dims > 4)
        return fail(w, lt_error(LT_EINVAL, "%s: tensor '%s': n_dims %d (expected 1 to 4)",
                                w->path, name, n_dims));
    int64_t nel = 1;
    for (int d = 0; d < n_dims; d++)
        if (ne[d] <= 0 || __builtin_mul_overflow(nel, ne[d], &nel))
            return fail(w, lt_error(LT_EINVAL, "%s: tensor '%s': bad dimension %d = %lld",
                                    w->path, name, d, (long long)ne[d]));
    if (ne[0] % lt_dtype_block(dtype) != 0)
        return fail(w, lt_error(LT_EINVAL, "%s: tensor '%s': ne[0] = %lld is not a multiple of "
                                "the %s block (%lld)", w->path, name, (long long)ne[0],
                                lt_dtype_name(dtype), (long long)lt_dtype_block(dtype)));
    for (int64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return fail(w, lt_error(LT_EINVAL, "%s: duplicate tensor '%s'", w->path, name));
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return fail(w, lt_error(LT_ENOMEM, "%s: out of memory", w->path));
        w->t = t;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return fail(w, lt_error(LT_ENOMEM, "%s: out of memory",
                                                           w->path));
    w->n_t++;
    t->dtype = dtype;
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = lt_dtype_row_bytes(dtype, ne[0]) * (size_t)(nel / ne[0]);
    *out = t;
    return LT_OK;
}

int lt_gguf_writer_tensor(lt_gguf_writer *w, const char *name, lt_dtype dtype, int n_dims,
                          const int64_t *ne, const void *data) {
    wtensor *t;
    int st = add_tensor(w, name, dtype, n_dims, ne, &t);
    if (st) return st;
    if (!(t->data = lt_aligned_alloc(64, t->nbytes)))
        return fail(w, lt_error(LT_ENOMEM, "%s: tensor '%s': out of memory for %zu bytes",
                                w->path, name, t->nbytes));
    memcpy(t->data, data, t->nbytes);
    return LT_OK;
}

int lt__gguf_writer_tensor_fill(lt_gguf_writer *w, const char *name, lt_dtype dtype, int n_dims,
                                const int64_t *ne, lt__gguf_fill_fn fill, void *ctx) {
    wtensor *t;
    int st = add_tensor(w, name, dtype, n_dims, ne, &t);
    if (st) return st;
    t->fill = fill;
    t->ctx = ctx;
    return LT_OK;
}

/* ---- close: header, kvs, tensor infos, aligned data ------------------------------- */

static size_t align_up(size_t x) {
    return (x + LT_GGUF_DEFAULT_ALIGNMENT - 1) / LT_GGUF_DEFAULT_ALIGNMENT *
           LT_GGUF_DEFAULT_ALIGNMENT;
}

static int wr(lt_gguf_writer *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->f) != n)
        return lt_error(LT_EIO, "%s: write failed: %s", w->path, strerror(errno));
    return LT_OK;
}

static int pad(lt_gguf_writer *w, size_t *pos) {
    static const uint8_t zeros[LT_GGUF_DEFAULT_ALIGNMENT];
    size_t n = align_up(*pos) - *pos;
    *pos += n;
    return wr(w, zeros, n);
}

static int write_tensor_data(lt_gguf_writer *w, const wtensor *t, void *buf, size_t *pos) {
    int st = LT_OK;
    if (t->data) {
        st = wr(w, t->data, t->nbytes);
    } else {
        size_t row_bytes = lt_dtype_row_bytes(t->dtype, t->ne[0]);
        int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        int64_t chunk = (int64_t)(FILL_CHUNK_BYTES / row_bytes);
        if (chunk < 1) chunk = 1;
        for (int64_t r = 0; r < rows && !st; r += chunk) {
            int64_t n = rows - r < chunk ? rows - r : chunk;
            st = t->fill(t->ctx, r, n, buf);
            if (!st) st = wr(w, buf, (size_t)n * row_bytes);
        }
    }
    *pos += t->nbytes;
    return st ? st : pad(w, pos);
}

static int write_all(lt_gguf_writer *w) {
    uint32_t head32[2] = {GGUF_MAGIC, GGUF_VERSION};
    uint64_t counts[2] = {(uint64_t)w->n_t, (uint64_t)w->n_kv};
    int st = wr(w, head32, sizeof head32);
    if (!st) st = wr(w, counts, sizeof counts);
    if (!st) st = wr(w, w->meta.p, w->meta.n);
    size_t pos = sizeof head32 + sizeof counts + w->meta.n;
    size_t off = 0, max_fill = 0;
    for (int64_t i = 0; i < w->n_t && !st; i++) {
        const wtensor *t = &w->t[i];
        uint64_t len = strlen(t->name), ne[4];
        uint32_t nd = (uint32_t)t->n_dims, type = (uint32_t)lt__dtype_to_ggml(t->dtype);
        for (int d = 0; d < 4; d++) ne[d] = (uint64_t)t->ne[d];
        uint64_t o = off;
        st = wr(w, &len, 8);
        if (!st) st = wr(w, t->name, len);
        if (!st) st = wr(w, &nd, 4);
        if (!st) st = wr(w, ne, 8 * nd);
        if (!st) st = wr(w, &type, 4);
        if (!st) st = wr(w, &o, 8);
        pos += 8 + len + 4 + 8 * nd + 4 + 8;
        off = align_up(off + t->nbytes);
        if (!t->data) {
            size_t rb = lt_dtype_row_bytes(t->dtype, t->ne[0]);
            size_t want = rb > FILL_CHUNK_BYTES ? rb : FILL_CHUNK_BYTES / rb * rb;
            if (want > t->nbytes) want = t->nbytes;
            if (want > max_fill) max_fill = want;
        }
    }
    if (!st) st = pad(w, &pos);
    void *buf = NULL;
    if (!st && max_fill && !(buf = lt_aligned_alloc(64, max_fill)))
        st = lt_error(LT_ENOMEM, "%s: out of memory for a %zu-byte fill buffer", w->path,
                      max_fill);
    for (int64_t i = 0; i < w->n_t && !st; i++) st = write_tensor_data(w, &w->t[i], buf, &pos);
    lt_aligned_free(buf);
    return st;
}

int lt_gguf_writer_close(lt_gguf_writer *w) {
    int st;
    if (!w) return lt_error(LT_EINVAL, "gguf writer: close of a NULL writer");
    if (w->status) {
        st = lt_error(w->status, "%s", w->errmsg);
    } else {
        st = write_all(w);
    }
    int e = 0;
    if (fclose(w->f) != 0) e = errno;
    if (!st && e) st = lt_error(LT_EIO, "%s: close failed: %s", w->path, strerror(e));
    if (st) remove(w->path);
    writer_free(w);
    return st;
}
