/* GGUF (v2/v3) reader: maps the file read-only and validates every length,
 * count, type, dimension and offset against the file size before anything
 * points into it. Metadata stays in the mapping (scalar arrays are copied
 * so callers get aligned typed arrays); tensors point into the mapping. */
#include "model/model_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF is read in place: little-endian");

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian u32 */
/* Smallest encodings, used to reject absurd counts before allocating:
 * a kv is a key length, >= 1 key byte, a type and >= 1 value byte; a tensor
 * info is a name length, >= 1 name byte, n_dims, >= 1 dim, type, offset. */
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_INFO_BYTES (8 + 1 + 4 + 8 + 4 + 8)
#define MAX_ALIGNMENT (1u << 30)

typedef struct {
    const char *key; /* inside the mapping, not NUL-terminated */
    size_t key_len;
    lt_gguf_type type;
    const uint8_t *val;   /* scalar: the value; STRING: its bytes */
    uint64_t str_len;     /* STRING */
    lt_gguf_type arr_type; /* ARRAY: element type */
    int64_t arr_n;         /* ARRAY: element count */
    void *arr_copy;        /* ARRAY of scalars: owned, aligned copy */
    size_t *arr_str_off;   /* ARRAY of STRING: file offset of each element's length */
} gguf_kv;

struct lt_gguf {
    char *path;
    const uint8_t *map;
    size_t size;
    uint32_t version;
    int64_t n_kv;
    gguf_kv *kv;
    int64_t *kv_order; /* kv indices sorted by key */
    int64_t n_tensors;
    lt_gguf_tensor *tensors;
    int64_t *t_order; /* tensor indices sorted by name */
    size_t alignment;
    size_t data_off; /* start of the data section */
};

/* ---- type tables --------------------------------------------------------- */

size_t lt__gguf_type_size(lt_gguf_type t) {
    static const size_t sizes[] = {
        [LT_GGUF_U8] = 1, [LT_GGUF_I8] = 1,  [LT_GGUF_U16] = 2,   [LT_GGUF_I16] = 2,
        [LT_GGUF_U32] = 4, [LT_GGUF_I32] = 4, [LT_GGUF_F32] = 4,   [LT_GGUF_BOOL] = 1,
        [LT_GGUF_STRING] = 0, [LT_GGUF_ARRAY] = 0, [LT_GGUF_U64] = 8, [LT_GGUF_I64] = 8,
        [LT_GGUF_F64] = 8,
    };
    _Static_assert(sizeof sizes / sizeof sizes[0] == LT_GGUF_TYPE_COUNT, "gguf type sizes");
    return (unsigned)t < LT_GGUF_TYPE_COUNT ? sizes[t] : 0;
}

const char *lt__gguf_type_name(lt_gguf_type t) {
    static const char *const names[] = {
        [LT_GGUF_U8] = "u8",   [LT_GGUF_I8] = "i8",       [LT_GGUF_U16] = "u16",
        [LT_GGUF_I16] = "i16", [LT_GGUF_U32] = "u32",     [LT_GGUF_I32] = "i32",
        [LT_GGUF_F32] = "f32", [LT_GGUF_BOOL] = "bool",   [LT_GGUF_STRING] = "string",
        [LT_GGUF_ARRAY] = "array", [LT_GGUF_U64] = "u64", [LT_GGUF_I64] = "i64",
        [LT_GGUF_F64] = "f64",
    };
    _Static_assert(sizeof names / sizeof names[0] == LT_GGUF_TYPE_COUNT, "gguf type names");
    return (unsigned)t < LT_GGUF_TYPE_COUNT ? names[t] : "?";
}

int lt__dtype_to_ggml(lt_dtype t) {
    static const int ggml[] = {
        [LT_F32] = LT_GGML_F32, [LT_F16] = LT_GGML_F16, [LT_BF16] = LT_GGML_BF16,
        [LT_Q8_0] = LT_GGML_Q8_0,
    };
    _Static_assert(sizeof ggml / sizeof ggml[0] == LT_DTYPE_COUNT, "ggml type table");
    LT_ASSERT((unsigned)t < LT_DTYPE_COUNT);
    return ggml[t];
}

bool lt__ggml_to_dtype(uint32_t ggml_type, lt_dtype *out) {
    for (int t = 0; t < LT_DTYPE_COUNT; t++) {
        if ((uint32_t)lt__dtype_to_ggml((lt_dtype)t) == ggml_type) {
            *out = (lt_dtype)t;
            return true;
        }
    }
    return false;
}

/* Names of ggml types looptune does not read, for error messages. */
static const char *ggml_type_name(uint32_t t) {
    static const char *const names[] = {"f32",  "f16",  "q4_0", "q4_1", "q4_2", "q4_3",
                                        "q5_0", "q5_1", "q8_0", "q8_1", "q2_k", "q3_k",
                                        "q4_k", "q5_k", "q6_k", "q8_k"};
    if (t < sizeof names / sizeof names[0]) return names[t];
    if (t == LT_GGML_BF16) return "bf16";
    return "unknown";
}

/* ---- bounded cursor over the mapping ---------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t size;
    size_t pos;
    const char *path;
} cursor;

static size_t cur_left(const cursor *c) { return c->size - c->pos; }

static int truncated(const cursor *c, const char *item, size_t need) {
    return lt_error(LT_EFORMAT, "%s: truncated: %s needs %zu bytes at offset %zu, file has %zu",
                    c->path, item, need, c->pos, c->size);
}

static int rd_u32(cursor *c, const char *item, uint32_t *v) {
    *v = 0;
    if (cur_left(c) < 4) return truncated(c, item, 4);
    memcpy(v, c->p + c->pos, 4);
    c->pos += 4;
    return LT_OK;
}

static int rd_u64(cursor *c, const char *item, uint64_t *v) {
    *v = 0;
    if (cur_left(c) < 8) return truncated(c, item, 8);
    memcpy(v, c->p + c->pos, 8);
    c->pos += 8;
    return LT_OK;
}

/* A GGUF string: u64 length then bytes (no NUL). */
static int rd_str(cursor *c, const char *item, const char **s, uint64_t *len) {
    *s = NULL;
    int st = rd_u64(c, item, len);
    if (st) return st;
    if (*len > cur_left(c))
        return lt_error(LT_EFORMAT, "%s: %s: string length %llu at offset %zu past end of file",
                        c->path, item, (unsigned long long)*len, c->pos - 8);
    *s = (const char *)c->p + c->pos;
    c->pos += (size_t)*len;
    return LT_OK;
}

/* ---- metadata -------------------------------------------------------------- */

static int parse_array(cursor *c, gguf_kv *kv, const char *item) {
    uint32_t et;
    uint64_t n;
    int st = rd_u32(c, item, &et);
    if (st) return st;
    if (et == LT_GGUF_ARRAY)
        return lt_error(LT_EUNSUPPORTED, "%s: %s: nested arrays are not supported", c->path,
                        item);
    if (et >= LT_GGUF_TYPE_COUNT)
        return lt_error(LT_EFORMAT, "%s: %s: unknown array element type %u", c->path, item, et);
    if ((st = rd_u64(c, item, &n))) return st;
    kv->arr_type = (lt_gguf_type)et;
    if (et == LT_GGUF_STRING) {
        if (n > cur_left(c) / 8)
            return lt_error(LT_EFORMAT, "%s: %s: array count %llu past end of file", c->path,
                            item, (unsigned long long)n);
        kv->arr_n = (int64_t)n;
        kv->arr_str_off = malloc((n ? n : 1) * sizeof(size_t));
        if (!kv->arr_str_off) return lt_error(LT_ENOMEM, "%s: %s: out of memory", c->path, item);
        for (uint64_t i = 0; i < n; i++) {
            const char *s;
            uint64_t len;
            kv->arr_str_off[i] = c->pos;
            if ((st = rd_str(c, item, &s, &len))) return st;
        }
        return LT_OK;
    }
    size_t es = lt__gguf_type_size((lt_gguf_type)et);
    if (n > cur_left(c) / es)
        return lt_error(LT_EFORMAT, "%s: %s: array count %llu past end of file", c->path, item,
                        (unsigned long long)n);
    kv->arr_n = (int64_t)n;
    kv->arr_copy = lt_aligned_alloc(16, (size_t)n * es);
    if (!kv->arr_copy) return lt_error(LT_ENOMEM, "%s: %s: out of memory", c->path, item);
    memcpy(kv->arr_copy, c->p + c->pos, (size_t)n * es);
    c->pos += (size_t)n * es;
    return LT_OK;
}

static int parse_kv(cursor *c, int64_t i, gguf_kv *kv) {
    char item[160];
    uint64_t klen;
    uint32_t type;
    snprintf(item, sizeof item, "kv %lld key", (long long)i);
    int st = rd_str(c, item, &kv->key, &klen);
    if (st) return st;
    if (klen == 0) return lt_error(LT_EFORMAT, "%s: kv %lld: empty key", c->path, (long long)i);
    kv->key_len = (size_t)klen;
    snprintf(item, sizeof item, "kv %lld '%.*s'", (long long)i, (int)(klen > 80 ? 80 : klen),
             kv->key);
    if ((st = rd_u32(c, item, &type))) return st;
    if (type >= LT_GGUF_TYPE_COUNT)
        return lt_error(LT_EFORMAT, "%s: %s: unknown value type %u", c->path, item, type);
    kv->type = (lt_gguf_type)type;
    if (type == LT_GGUF_STRING) {
        const char *s;
        if ((st = rd_str(c, item, &s, &kv->str_len))) return st;
        kv->val = (const uint8_t *)s;
        return LT_OK;
    }
    if (type == LT_GGUF_ARRAY) return parse_array(c, kv, item);
    size_t sz = lt__gguf_type_size(kv->type);
    if (cur_left(c) < sz) return truncated(c, item, sz);
    kv->val = c->p + c->pos;
    c->pos += sz;
    return LT_OK;
}

/* qsort takes no context argument: the file being sorted, per thread. */
static _Thread_local const lt_gguf *sort_ctx;

static int key_cmp(const char *a, size_t alen, const char *b, size_t blen) {
    int r = memcmp(a, b, alen < blen ? alen : blen);
    if (r) return r;
    return alen < blen ? -1 : alen > blen;
}

static int kv_order_cmp(const void *a, const void *b) {
    const gguf_kv *x = &sort_ctx->kv[*(const int64_t *)a], *y = &sort_ctx->kv[*(const int64_t *)b];
    return key_cmp(x->key, x->key_len, y->key, y->key_len);
}

static int t_order_cmp(const void *a, const void *b) {
    return strcmp(sort_ctx->tensors[*(const int64_t *)a].name,
                  sort_ctx->tensors[*(const int64_t *)b].name);
}

/* Sorts 0..n-1 by cmp into a new array (NULL when out of memory). */
static int64_t *sorted_order(const lt_gguf *g, int64_t n, int (*cmp)(const void *, const void *)) {
    int64_t *o = malloc((size_t)(n ? n : 1) * sizeof *o);
    if (!o) return NULL;
    for (int64_t i = 0; i < n; i++) o[i] = i;
    sort_ctx = g;
    qsort(o, (size_t)n, sizeof *o, cmp);
    sort_ctx = NULL;
    return o;
}

static const gguf_kv *find_kv(const lt_gguf *g, const char *key) {
    size_t klen = strlen(key);
    int64_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const gguf_kv *kv = &g->kv[g->kv_order[mid]];
        int r = key_cmp(kv->key, kv->key_len, key, klen);
        if (r == 0) return kv;
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* ---- tensor infos ------------------------------------------------------------ */

static int parse_tensor_info(lt_gguf *g, cursor *c, int64_t i, uint64_t *offset) {
    lt_gguf_tensor *t = &g->tensors[i];
    char item[160];
    const char *name;
    uint64_t nlen;
    uint32_t n_dims, type;
    snprintf(item, sizeof item, "tensor info %lld name", (long long)i);
    int st = rd_str(c, item, &name, &nlen);
    if (st) return st;
    if (nlen == 0)
        return lt_error(LT_EFORMAT, "%s: tensor info %lld: empty name", c->path, (long long)i);
    if (memchr(name, 0, (size_t)nlen))
        return lt_error(LT_EFORMAT, "%s: tensor info %lld: name contains a NUL byte", c->path,
                        (long long)i);
    char *copy = malloc((size_t)nlen + 1);
    if (!copy) return lt_error(LT_ENOMEM, "%s: tensor info %lld: out of memory", c->path,
                               (long long)i);
    memcpy(copy, name, (size_t)nlen);
    copy[nlen] = 0;
    t->name = copy;
    snprintf(item, sizeof item, "tensor '%.80s'", copy);

    if ((st = rd_u32(c, item, &n_dims))) return st;
    if (n_dims < 1 || n_dims > 4)
        return lt_error(LT_EFORMAT, "%s: %s: n_dims %u (expected 1 to 4)", c->path, item, n_dims);
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        if ((st = rd_u64(c, item, &ne))) return st;
        if (ne == 0)
            return lt_error(LT_EFORMAT, "%s: %s: dimension %u is 0", c->path, item, d);
        if (ne > INT64_MAX || __builtin_mul_overflow(nel, (int64_t)ne, &nel))
            return lt_error(LT_EFORMAT, "%s: %s: element count overflows (dimension %u = %llu)",
                            c->path, item, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
    }
    if ((st = rd_u32(c, item, &type))) return st;
    if (!lt__ggml_to_dtype(type, &t->dtype))
        return lt_error(LT_EUNSUPPORTED,
                        "%s: %s: ggml type %u (%s) not supported (looptune reads f32, f16, "
                        "bf16, q8_0)",
                        c->path, item, type, ggml_type_name(type));
    if (t->ne[0] % lt_dtype_block(t->dtype) != 0)
        return lt_error(LT_EFORMAT, "%s: %s: ne[0] = %lld is not a multiple of the %s block (%lld)",
                        c->path, item, (long long)t->ne[0], lt_dtype_name(t->dtype),
                        (long long)lt_dtype_block(t->dtype));
    size_t rows = (size_t)(nel / t->ne[0]);
    if (__builtin_mul_overflow(lt_dtype_row_bytes(t->dtype, t->ne[0]), rows, &t->nbytes))
        return lt_error(LT_EFORMAT, "%s: %s: byte size overflows", c->path, item);
    return rd_u64(c, item, offset);
}

/* Places tensors in the data section: aligned, inside the file. */
static int place_tensor(lt_gguf *g, int64_t i, uint64_t off) {
    lt_gguf_tensor *t = &g->tensors[i];
    size_t data_bytes = g->size - g->data_off;
    if (off % g->alignment != 0)
        return lt_error(LT_EFORMAT, "%s: tensor '%.80s': offset %llu is not a multiple of the "
                        "alignment %zu", g->path, t->name, (unsigned long long)off, g->alignment);
    if (off > data_bytes || t->nbytes > data_bytes - off)
        return lt_error(LT_EFORMAT, "%s: tensor '%.80s': data at offset %llu (+%zu bytes) past "
                        "end of file (data section holds %zu bytes)", g->path, t->name,
                        (unsigned long long)off, t->nbytes, data_bytes);
    /* kernels read f32 as float and f16/bf16/q8_0 as uint16: natural alignment */
    size_t natural = t->dtype == LT_F32 ? 4 : 2;
    if ((g->data_off + off) % natural != 0)
        return lt_error(LT_EFORMAT, "%s: tensor '%.80s': offset %llu misaligned for %s",
                        g->path, t->name, (unsigned long long)off, lt_dtype_name(t->dtype));
    t->data = g->map + g->data_off + off;
    return LT_OK;
}

/* ---- open / close -------------------------------------------------------------- */

static int map_file(lt_gguf *g, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lt_error(LT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return lt_error(LT_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return lt_error(LT_EIO, "%s: not a regular file", path);
    }
    g->size = (size_t)sb.st_size;
    if (g->size < 8) {
        close(fd);
        return lt_error(LT_EFORMAT, "%s: truncated: %zu bytes, too short for a GGUF header",
                        path, g->size);
    }
    void *p = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return lt_error(LT_EIO, "%s: cannot map: %s", path, strerror(e));
    g->map = p;
    return LT_OK;
}

static int parse(lt_gguf *g) {
    cursor c = {.p = g->map, .size = g->size, .pos = 0, .path = g->path};
    uint32_t magic;
    uint64_t n_tensors, n_kv;
    int st = rd_u32(&c, "magic", &magic);
    if (st) return st;
    if (magic != GGUF_MAGIC)
        return lt_error(LT_EFORMAT, "%s: bad magic 0x%08x (not a GGUF file)", g->path, magic);
    if ((st = rd_u32(&c, "version", &g->version))) return st;
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffff) == 0 && g->version != 0)
            return lt_error(LT_EUNSUPPORTED, "%s: GGUF version 0x%08x looks big-endian "
                            "(only little-endian v2 and v3 are supported)", g->path, g->version);
        return lt_error(LT_EUNSUPPORTED, "%s: GGUF version %u not supported (only 2 and 3)",
                        g->path, g->version);
    }
    if ((st = rd_u64(&c, "tensor count", &n_tensors))) return st;
    if ((st = rd_u64(&c, "kv count", &n_kv))) return st;
    if (n_kv > cur_left(&c) / MIN_KV_BYTES)
        return lt_error(LT_EFORMAT, "%s: n_kv %llu is absurd for a file of %zu bytes", g->path,
                        (unsigned long long)n_kv, g->size);
    if (n_tensors > cur_left(&c) / MIN_TENSOR_INFO_BYTES)
        return lt_error(LT_EFORMAT, "%s: n_tensors %llu is absurd for a file of %zu bytes",
                        g->path, (unsigned long long)n_tensors, g->size);

    g->n_kv = (int64_t)n_kv;
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    if (!g->kv) return lt_error(LT_ENOMEM, "%s: out of memory for %llu kvs", g->path,
                                (unsigned long long)n_kv);
    for (int64_t i = 0; i < g->n_kv; i++)
        if ((st = parse_kv(&c, i, &g->kv[i]))) return st;
    if (!(g->kv_order = sorted_order(g, g->n_kv, kv_order_cmp)))
        return lt_error(LT_ENOMEM, "%s: out of memory", g->path);
    for (int64_t i = 1; i < g->n_kv; i++) {
        const gguf_kv *a = &g->kv[g->kv_order[i - 1]], *b = &g->kv[g->kv_order[i]];
        if (key_cmp(a->key, a->key_len, b->key, b->key_len) == 0)
            return lt_error(LT_EFORMAT, "%s: duplicate key '%.*s'", g->path,
                            (int)(b->key_len > 80 ? 80 : b->key_len), b->key);
    }

    g->alignment = LT_GGUF_DEFAULT_ALIGNMENT;
    int64_t align;
    st = lt_gguf_get_i64(g, "general.alignment", &align);
    if (st == LT_OK) {
        if (align <= 0 || align > MAX_ALIGNMENT || (align & (align - 1)) != 0)
            return lt_error(LT_EFORMAT, "%s: general.alignment %lld is not a power of two "
                            "between 1 and 2^30", g->path, (long long)align);
        g->alignment = (size_t)align;
    } else if (st != LT_ENOTFOUND) {
        return st;
    }
    st = LT_OK;

    g->n_tensors = (int64_t)n_tensors;
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    uint64_t *offsets = malloc((n_tensors ? n_tensors : 1) * sizeof *offsets);
    if (!g->tensors || !offsets) {
        free(offsets);
        return lt_error(LT_ENOMEM, "%s: out of memory for %llu tensors", g->path,
                        (unsigned long long)n_tensors);
    }
    for (int64_t i = 0; i < g->n_tensors && st == LT_OK; i++)
        st = parse_tensor_info(g, &c, i, &offsets[i]);
    if (st == LT_OK) {
        g->data_off = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
        if (g->data_off > g->size) g->data_off = g->size; /* only an empty data section */
        for (int64_t i = 0; i < g->n_tensors && st == LT_OK; i++)
            st = place_tensor(g, i, offsets[i]);
    }
    free(offsets);
    if (st) return st;
    if (!(g->t_order = sorted_order(g, g->n_tensors, t_order_cmp)))
        return lt_error(LT_ENOMEM, "%s: out of memory", g->path);
    for (int64_t i = 1; i < g->n_tensors; i++) {
        const char *a = g->tensors[g->t_order[i - 1]].name, *b = g->tensors[g->t_order[i]].name;
        if (strcmp(a, b) == 0)
            return lt_error(LT_EFORMAT, "%s: duplicate tensor '%.80s'", g->path, b);
    }
    return LT_OK;
}

int lt_gguf_open(lt_gguf **out, const char *path) {
    if (!out || !path) return lt_error(LT_EINVAL, "%s: NULL argument", __func__);
    *out = NULL;
    lt_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        free(g);
        return lt_error(LT_ENOMEM, "%s: out of memory", path);
    }
    int st = map_file(g, path);
    if (st == LT_OK) st = parse(g);
    if (st) {
        lt_gguf_close(g);
        return st;
    }
    *out = g;
    return LT_OK;
}

void lt_gguf_close(lt_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; g->kv && i < g->n_kv; i++) {
        lt_aligned_free(g->kv[i].arr_copy);
        free(g->kv[i].arr_str_off);
    }
    for (int64_t i = 0; g->tensors && i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->kv);
    free(g->kv_order);
    free(g->tensors);
    free(g->t_order);
    if (g->map) munmap((void *)g->map, g->size);
    free(g->path);
    free(g);
}

uint32_t lt_gguf_version(const lt_gguf *g) { return g->version; }

const char *lt__gguf_path(const lt_gguf *g) { return g->path; }

/* ---- metadata lookups ------------------------------------------------------------ */

static int lookup(const lt_gguf *g, const char *key, const gguf_kv **kv) {
    *kv = find_kv(g, key);
    if (!*kv) return lt_error(LT_ENOTFOUND, "%s: key '%s' not found", g->path, key);
    return LT_OK;
}

static int wrong_type(const lt_gguf *g, const char *key, const gguf_kv *kv, const char *want) {
    return lt_error(LT_EFORMAT, "%s: key '%s' has type %s, expected %s", g->path, key,
                    lt__gguf_type_name(kv->type), want);
}

int lt_gguf_get_i64(const lt_gguf *g, const char *key, int64_t *out) {
    const gguf_kv *kv;
    int st = lookup(g, key, &kv);
    if (st) return st;
    union {
        uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
        uint64_t u64; int64_t i64;
    } v;
    if (kv->type == LT_GGUF_STRING || kv->type == LT_GGUF_ARRAY || kv->type == LT_GGUF_BOOL ||
        kv->type == LT_GGUF_F32 || kv->type == LT_GGUF_F64)
        return wrong_type(g, key, kv, "an integer");
    memcpy(&v, kv->val, lt__gguf_type_size(kv->type));
    switch (kv->type) {
    case LT_GGUF_U8: *out = v.u8; break;
    case LT_GGUF_I8: *out = v.i8; break;
    case LT_GGUF_U16: *out = v.u16; break;
    case LT_GGUF_I16: *out = v.i16; break;
    case LT_GGUF_U32: *out = v.u32; break;
    case LT_GGUF_I32: *out = v.i32; break;
    case LT_GGUF_I64: *out = v.i64; break;
    case LT_GGUF_U64:
        if (v.u64 > INT64_MAX)
            return lt_error(LT_ERANGE, "%s: key '%s': %llu does not fit in int64", g->path, key,
                            (unsigned long long)v.u64);
        *out = (int64_t)v.u64;
        break;
    default: LT_ASSERT(!"unreachable");
    }
    return LT_OK;
}

int lt_gguf_get_f32(const lt_gguf *g, const char *key, float *out) {
    const gguf_kv *kv;
    int st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type == LT_GGUF_F32) {
        memcpy(out, kv->val, 4);
    } else if (kv->type == LT_GGUF_F64) {
        double d;
        memcpy(&d, kv->val, 8);
        *out = (float)d;
    } else {
        return wrong_type(g, key, kv, "f32");
    }
    return LT_OK;
}

int lt_gguf_get_bool(const lt_gguf *g, const char *key, bool *out) {
    const gguf_kv *kv;
    int st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != LT_GGUF_BOOL) return wrong_type(g, key, kv, "bool");
    uint8_t b;
    memcpy(&b, kv->val, 1);
    if (b > 1)
        return lt_error(LT_EFORMAT, "%s: key '%s': bool value %u is neither 0 nor 1", g->path,
                        key, (unsigned)b);
    *out = b;
    return LT_OK;
}

int lt_gguf_get_str(const lt_gguf *g, const char *key, const char **s, size_t *len) {
    const gguf_kv *kv;
    int st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != LT_GGUF_STRING) return wrong_type(g, key, kv, "string");
    *s = (const char *)kv->val;
    *len = (size_t)kv->str_len;
    return LT_OK;
}

/* Scalar arrays: *data is an aligned copy owned by g. String arrays: *data
 * is NULL; read elements with lt_gguf_arr_str. */
int lt_gguf_get_arr(const lt_gguf *g, const char *key, lt_gguf_type *type, int64_t *n,
                    const void **data) {
    const gguf_kv *kv;
    int st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != LT_GGUF_ARRAY) return wrong_type(g, key, kv, "array");
    *type = kv->arr_type;
    *n = kv->arr_n;
    *data = kv->arr_copy;
    return LT_OK;
}

int lt_gguf_arr_str(const lt_gguf *g, const char *key, int64_t i, const char **s, size_t *len) {
    const gguf_kv *kv;
    int st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != LT_GGUF_ARRAY || kv->arr_type != LT_GGUF_STRING)
        return lt_error(LT_EFORMAT, "%s: key '%s' is not an array of strings", g->path, key);
    if (i < 0 || i >= kv->arr_n)
        return lt_error(LT_ERANGE, "%s: key '%s': index %lld outside 0..%lld", g->path, key,
                        (long long)i, (long long)kv->arr_n - 1);
    uint64_t l;
    memcpy(&l, g->map + kv->arr_str_off[i], 8); /* bounds checked at open */
    *s = (const char *)g->map + kv->arr_str_off[i] + 8;
    *len = (size_t)l;
    return LT_OK;
}

int64_t lt_gguf_n_tensors(const lt_gguf *g) { return g->n_tensors; }

const lt_gguf_tensor *lt_gguf_tensor_at(const lt_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const lt_gguf_tensor *lt_gguf_find_tensor(const lt_gguf *g, const char *name) {
    int64_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const lt_gguf_tensor *t = &g->tensors[g->t_order[mid]];
        int r = strcmp(t->name, name);
        if (r == 0) return t;
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}
