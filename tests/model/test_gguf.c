/* GGUF reader and writer: round trips of every metadata type and tensor
 * dtype, the writer's bytes against a file laid out by hand from the spec,
 * and malformed files, each rejected with a message naming the problem. */
#include "looptune/model.h"
#include "model/model_internal.h"
#include "test.h"

#include <stdint.h>
#include <unistd.h>

static char work_dir[512];

static void path_for(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/gguf_%d_%s.gguf", work_dir, (int)getpid(), name);
}

/* ---- a byte builder independent of the writer ------------------------------ */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void b_put(buf *b, const void *src, size_t n) {
    if (b->cap - b->n < n) {
        b->cap = (b->cap + n) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void b_u32(buf *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(buf *b, uint64_t v) { b_put(b, &v, 8); }
static void b_str(buf *b, const char *s) { b_u64(b, strlen(s)); b_put(b, s, strlen(s)); }
static void b_str_len(buf *b, const char *s, uint64_t len) {
    b_u64(b, len); /* the length field as given, the bytes as they are */
    b_put(b, s, strlen(s));
}
static void b_pad(buf *b) {
    while (b->n % 32) b_put(b, "", 1);
}

/* Knobs of a small GGUF: three kvs (a string, the alignment, an array of
 * strings and an f32 array) and two tensors, a (f32) and b (q8_0 {32}),
 * with b's data ending exactly at end of file unless pad_end. Each bad-input
 * case changes one knob. */
typedef struct {
    uint32_t magic, version;
    uint64_t n_kv, n_tensors; /* header counts */
    uint64_t key0_len;        /* length field of the first key */
    uint32_t kv0_type;        /* value type of the first kv */
    uint64_t str_len;         /* length field of the first kv's string value */
    uint32_t arr_elem;        /* element type of the string array */
    uint64_t arr_n;           /* count of the f32 array */
    const char *key3;         /* name of the f32 array's key */
    uint32_t a_n_dims;
    uint64_t a_ne[5];
    uint32_t a_type;
    uint64_t a_off, b_off;
    const char *b_name;
    uint32_t alignment;
    bool pad_end;
} spec;

static spec base_spec(void) {
    spec s = {.magic = 0x46554747u, .version = 3, .n_kv = 4, .n_tensors = 2, .key0_len = 20,
              .kv0_type = LT_GGUF_STRING, .str_len = 5, .arr_elem = LT_GGUF_STRING, .arr_n = 3,
              .key3 = "tokenizer.ggml.scores", .a_n_dims = 2, .a_ne = {4, 2, 1, 1, 1},
              .a_type = LT_GGML_F32, .a_off = 0, .b_off = 32, .b_name = "b", .alignment = 32};
    return s;
}

static float a_data[8] = {0.5f, -1.0f, 2.0f, 3.25f, -4.5f, 5.0f, 6.0f, 7.75f};
static uint8_t b_data[34];
static const char *toks[3] = {"<unk>", "\xe2\x96\x81hi", ""};
static const float scores[3] = {0.0f, -1.5f, 2.5f};

static buf build(const spec *s) {
    buf b = {0};
    b_u32(&b, s->magic);
    b_u32(&b, s->version);
    b_u64(&b, s->n_tensors);
    b_u64(&b, s->n_kv);
    /* kv 0: general.architecture = "llama" (20 key bytes) */
    b_str_len(&b, "general.architecture", s->key0_len);
    b_u32(&b, s->kv0_type);
    b_str_len(&b, "llama", s->str_len);
    /* kv 1: general.alignment u32 */
    b_str(&b, "general.alignment");
    b_u32(&b, LT_GGUF_U32);
    b_u32(&b, s->alignment);
    /* kv 2: tokens, array of 3 strings */
    b_str(&b, "tokenizer.ggml.tokens");
    b_u32(&b, LT_GGUF_ARRAY);
    b_u32(&b, s->arr_elem);
    b_u64(&b, 3);
    for (int i = 0; i < 3; i++) b_str(&b, toks[i]);
    /* kv 3: scores, array of f32 */
    b_str(&b, s->key3);
    b_u32(&b, LT_GGUF_ARRAY);
    b_u32(&b, LT_GGUF_F32);
    b_u64(&b, s->arr_n);
    b_put(&b, scores, sizeof scores);
    /* tensor infos */
    b_str(&b, "a");
    b_u32(&b, s->a_n_dims);
    for (uint32_t d = 0; d < s->a_n_dims && d < 5; d++) b_u64(&b, s->a_ne[d]);
    b_u32(&b, s->a_type);
    b_u64(&b, s->a_off);
    b_str(&b, s->b_name);
    b_u32(&b, 1);
    b_u64(&b, 32);
    b_u32(&b, LT_GGML_Q8_0);
    b_u64(&b, s->b_off);
    b_pad(&b);
    b_put(&b, a_data, sizeof a_data);
    b_pad(&b);
    b_put(&b, b_data, sizeof b_data);
    if (s->pad_end) b_pad(&b);
    return b;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) abort();
    fclose(f);
}

/* Opens a file that must fail with status, and a message naming the file
 * and containing want. */
static void expect_fail_bytes(const char *name, const void *p, size_t n, int status,
                              const char *want) {
    char path[600];
    path_for(path, sizeof path, name);
    write_bytes(path, p, n);
    lt_gguf *g = (lt_gguf *)1;
    int st = lt_gguf_open(&g, path);
    ASSERT_EQ(st, status);
    ASSERT_TRUE(g == NULL);
    if (!strstr(lt_errmsg(), path) || !strstr(lt_errmsg(), want))
        LT__FAIL("case %s: message \"%s\" lacks \"%s\"", name, lt_errmsg(), want);
    if (st == LT_OK) lt_gguf_close(g);
    remove(path);
}

static void expect_fail(const char *name, const spec *s, int status, const char *want) {
    buf b = build(s);
    expect_fail_bytes(name, b.p, b.n, status, want);
    free(b.p);
}

/* ---- the hand-built file reads back ------------------------------------------- */

static void test_read_handbuilt(void) {
    spec s = base_spec();
    buf b = build(&s);
    char path[600];
    path_for(path, sizeof path, "hand");
    write_bytes(path, b.p, b.n);
    lt_gguf *g;
    ASSERT_EQ(lt_gguf_open(&g, path), LT_OK);
    if (!g) return;
    ASSERT_EQ(lt_gguf_version(g), 3);
    const char *str;
    size_t len;
    ASSERT_EQ(lt_gguf_get_str(g, "general.architecture", &str, &len), LT_OK);
    ASSERT_EQ(len, 5);
    ASSERT_TRUE(memcmp(str, "llama", 5) == 0);
    lt_gguf_type type;
    int64_t n;
    const void *data;
    ASSERT_EQ(lt_gguf_get_arr(g, "tokenizer.ggml.scores", &type, &n, &data), LT_OK);
    ASSERT_EQ(type, LT_GGUF_F32);
    ASSERT_EQ(n, 3);
    ASSERT_NEAR(((const float *)data)[2], 2.5, 0);
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(lt_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &str, &len), LT_OK);
        ASSERT_EQ(len, strlen(toks[i]));
        ASSERT_TRUE(memcmp(str, toks[i], len) == 0);
    }
    ASSERT_EQ(lt_gguf_n_tensors(g), 2);
    const lt_gguf_tensor *a = lt_gguf_find_tensor(g, "a"), *tb = lt_gguf_find_tensor(g, "b");
    ASSERT_TRUE(a && tb);
    if (a && tb) {
        ASSERT_EQ(a->dtype, LT_F32);
        ASSERT_EQ(a->n_dims, 2);
        ASSERT_EQ(a->ne[0], 4);
        ASSERT_EQ(a->ne[1], 2);
        ASSERT_EQ(a->ne[2], 1);
        ASSERT_EQ(a->nbytes, 32);
        ASSERT_TRUE(memcmp(a->data, a_data, 32) == 0);
        ASSERT_EQ(tb->dtype, LT_Q8_0);
        ASSERT_EQ(tb->nbytes, 34);
        ASSERT_TRUE(memcmp(tb->data, b_data, 34) == 0);
        ASSERT_EQ((const char *)tb->data - (const char *)a->data, 32);
    }
    ASSERT_TRUE(lt_gguf_find_tensor(g, "c") == NULL);
    ASSERT_TRUE(lt_gguf_tensor_at(g, 2) == NULL);
    ASSERT_TRUE(lt_gguf_tensor_at(g, 0) == a);
    lt_gguf_close(g);
    remove(path);
    free(b.p);
}

/* The writer lays out the same metadata and tensors byte for byte as the
 * hand-built file (kvs in insertion order, data aligned to 32). */
static void test_writer_matches_layout(void) {
    spec s = base_spec();
    s.pad_end = true;
    buf want = build(&s);
    char path[600];
    path_for(path, sizeof path, "layout");
    lt_gguf_writer *w;
    ASSERT_EQ(lt_gguf_writer_open(&w, path), LT_OK);
    ASSERT_EQ(lt_gguf_writer_str(w, "general.architecture", "llama"), LT_OK);
    ASSERT_EQ(lt_gguf_writer_u32(w, "general.alignment", 32), LT_OK);
    ASSERT_EQ(lt_gguf_writer_arr_str(w, "tokenizer.ggml.tokens", 3, toks, NULL), LT_OK);
    ASSERT_EQ(lt_gguf_writer_arr_f32(w, "tokenizer.ggml.scores", 3, scores), LT_OK);
    ASSERT_EQ(lt_gguf_writer_tensor(w, "a", LT_F32, 2, (const int64_t[]){4, 2}, a_data), LT_OK);
    ASSERT_EQ(lt_gguf_writer_tensor(w, "b", LT_Q8_0, 1, (const int64_t[]){32}, b_data), LT_OK);
    ASSERT_EQ(lt_gguf_writer_close(w), LT_OK);
    FILE *f = fopen(path, "rb");
    ASSERT_TRUE(f != NULL);
    if (f) {
        uint8_t *got = malloc(want.n + 16);
        size_t n = fread(got, 1, want.n + 16, f);
        fclose(f);
        ASSERT_EQ(n, want.n);
        ASSERT_TRUE(n == want.n && memcmp(got, want.p, n) == 0);
        free(got);
    }
    remove(path);
    free(want.p);
}

/* ---- every kv type and dtype round-trips through writer and reader ------------ */

static void test_roundtrip_all_types(void) {
    char path[600];
    path_for(path, sizeof path, "all");
    lt_gguf_writer *w;
    ASSERT_EQ(lt_gguf_writer_open(&w, path), LT_OK);
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int32_t i32 = -2000000000;
    bool bl = true;
    uint64_t u64 = 1ull << 40, u64big = (1ull << 63) + 5;
    int64_t i64 = -(1ll << 40);
    double f64 = 3.25;
    ASSERT_EQ(lt__gguf_writer_kv(w, "t.u8", LT_GGUF_U8, &u8), LT_OK);
    ASSERT_EQ(lt__gguf_writer_kv(w, "t.i8", LT_GGUF_I8, &i8), LT_OK);
    ASSERT_EQ(lt__gguf_writer_kv(w, "t.u16", LT_GGUF_U16, &u16), LT_OK);
    ASSERT_EQ(lt__gguf_writer_kv(w, "t.i16", LT_GGUF_I16, &i16), LT_OK);
    ASSERT_EQ(lt_gguf_writer_u32(w, "t.u32", 4000000000u), LT_OK);
    ASSERT_EQ(lt__gguf_writer_kv(w, "t.i32", LT_GGUF_I32, &i32), LT_OK);
    ASSERT_EQ(lt_gguf_writer_f32(w, "t.f32", -1.75f), LT_OK);
    ASSERT_EQ(lt__gguf_writer_kv(w, "t.bool", LT_GGUF_BOOL, &bl), LT_OK);
    ASSERT_EQ(lt_gguf_writer_str(w, "t.str", "h\xc3\xa9llo"), LT_OK);
    ASSERT_EQ(lt__gguf_writer_kv(w, "t.u64", LT_GGUF_U64, &u64), LT_OK);
    ASSERT_EQ(lt__gguf_writer_kv(w, "t.u64big", LT_GGUF_U64, &u64big), LT_OK);
    ASSERT_EQ(lt__gguf_writer_kv(w, "t.i64", LT_GGUF_I64, &i64), LT_OK);
    ASSERT_EQ(lt__gguf_writer_kv(w, "t.f64", LT_GGUF_F64, &f64), LT_OK);
    /* arrays of every scalar type: element k of type t is (k + 1) * (t + 1) */
    uint8_t raw[LT_GGUF_TYPE_COUNT][5 * 8];
    for (int t = 0; t < LT_GGUF_TYPE_COUNT; t++) {
        if (t == LT_GGUF_STRING || t == LT_GGUF_ARRAY) continue;
        size_t es = lt__gguf_type_size((lt_gguf_type)t);
        for (int k = 0; k < 5; k++) {
            double v = (double)((k + 1) * (t + 1));
            uint8_t tmp[8];
            switch (t) {
            case LT_GGUF_F32: { float x = (float)v; memcpy(tmp, &x, 4); break; }
            case LT_GGUF_F64: memcpy(tmp, &v, 8); break;
            case LT_GGUF_BOOL: tmp[0] = (uint8_t)(k & 1); break;
            default: { uint64_t x = (uint64_t)v; memcpy(tmp, &x, es); break; }
            }
            memcpy(raw[t] + k * es, tmp, es);
        }
        char key[32];
        snprintf(key, sizeof key, "arr.%s", lt__gguf_type_name((lt_gguf_type)t));
        ASSERT_EQ(lt__gguf_writer_arr(w, key, (lt_gguf_type)t, 5, raw[t]), LT_OK);
    }
    const char *strs[4] = {"alpha", "", "nul\0inside", "\xe2\x96\x81x"};
    size_t lens[4] = {5, 0, 10, 4};
    ASSERT_EQ(lt_gguf_writer_arr_str(w, "arr.str", 4, strs, lens), LT_OK);
    ASSERT_EQ(lt_gguf_writer_arr_i32(w, "arr.empty", 0, NULL), LT_OK);

    /* tensors: every dtype, 1 to 4 dims, with known bytes */
    const lt_dtype dts[4] = {LT_F32, LT_F16, LT_BF16, LT_Q8_0};
    const int64_t shapes[4][4] = {{5, 3, 1, 1}, {7, 1, 1, 1}, {3, 2, 2, 1}, {64, 2, 1, 2}};
    const int ndims[4] = {2, 1, 3, 4};
    uint8_t *src[4];
    size_t nbytes[4];
    for (int i = 0; i < 4; i++) {
        lt_tensor tt;
        lt_tensor_init(&tt, dts[i], shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], NULL);
        nbytes[i] = lt_tensor_nbytes(&tt);
        src[i] = malloc(nbytes[i]);
        for (size_t k = 0; k < nbytes[i]; k++) src[i][k] = (uint8_t)(k * 37 + (size_t)i * 11);
        if (dts[i] == LT_F32) /* keep f32 values finite and exact */
            for (size_t k = 0; k < nbytes[i] / 4; k++) ((float *)src[i])[k] = (float)k * 0.5f - 3;
        char name[16];
        snprintf(name, sizeof name, "t.%s", lt_dtype_name(dts[i]));
        ASSERT_EQ(lt_gguf_writer_tensor(w, name, dts[i], ndims[i], shapes[i], src[i]), LT_OK);
    }
    ASSERT_EQ(lt_gguf_writer_close(w), LT_OK);

    lt_gguf *g;
    ASSERT_EQ(lt_gguf_open(&g, path), LT_OK);
    if (!g) return;
    int64_t v;
    float f;
    const char *s;
    size_t len;
    ASSERT_EQ(lt_gguf_get_i64(g, "t.u8", &v), LT_OK); ASSERT_EQ(v, 200);
    ASSERT_EQ(lt_gguf_get_i64(g, "t.i8", &v), LT_OK); ASSERT_EQ(v, -100);
    ASSERT_EQ(lt_gguf_get_i64(g, "t.u16", &v), LT_OK); ASSERT_EQ(v, 60000);
    ASSERT_EQ(lt_gguf_get_i64(g, "t.i16", &v), LT_OK); ASSERT_EQ(v, -30000);
    ASSERT_EQ(lt_gguf_get_i64(g, "t.u32", &v), LT_OK); ASSERT_EQ(v, 4000000000ll);
    ASSERT_EQ(lt_gguf_get_i64(g, "t.i32", &v), LT_OK); ASSERT_EQ(v, -2000000000ll);
    ASSERT_EQ(lt_gguf_get_i64(g, "t.u64", &v), LT_OK); ASSERT_EQ(v, 1ll << 40);
    ASSERT_EQ(lt_gguf_get_i64(g, "t.i64", &v), LT_OK); ASSERT_EQ(v, -(1ll << 40));
    ASSERT_EQ(lt_gguf_get_i64(g, "t.u64big", &v), LT_ERANGE);
    ASSERT_TRUE(strstr(lt_errmsg(), "t.u64big") != NULL);
    ASSERT_EQ(lt_gguf_get_f32(g, "t.f32", &f), LT_OK); ASSERT_NEAR(f, -1.75, 0);
    ASSERT_EQ(lt_gguf_get_f32(g, "t.f64", &f), LT_OK); ASSERT_NEAR(f, 3.25, 0);
    ASSERT_EQ(lt_gguf_get_str(g, "t.str", &s, &len), LT_OK);
    ASSERT_EQ(len, 6);
    ASSERT_TRUE(memcmp(s, "h\xc3\xa9llo", 6) == 0);
    /* wrong types and missing keys */
    ASSERT_EQ(lt_gguf_get_i64(g, "t.f32", &v), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "t.f32") && strstr(lt_errmsg(), "f32"));
    ASSERT_EQ(lt_gguf_get_i64(g, "t.bool", &v), LT_EFORMAT);
    ASSERT_EQ(lt_gguf_get_f32(g, "t.u8", &f), LT_EFORMAT);
    ASSERT_EQ(lt_gguf_get_str(g, "t.u8", &s, &len), LT_EFORMAT);
    ASSERT_EQ(lt_gguf_get_i64(g, "t.none", &v), LT_ENOTFOUND);
    ASSERT_TRUE(strstr(lt_errmsg(), "t.none") != NULL);
    lt_gguf_type type;
    int64_t n;
    const void *data;
    ASSERT_EQ(lt_gguf_get_arr(g, "t.u8", &type, &n, &data), LT_EFORMAT);
    for (int t = 0; t < LT_GGUF_TYPE_COUNT; t++) {
        if (t == LT_GGUF_STRING || t == LT_GGUF_ARRAY) continue;
        char key[32];
        snprintf(key, sizeof key, "arr.%s", lt__gguf_type_name((lt_gguf_type)t));
        ASSERT_EQ(lt_gguf_get_arr(g, key, &type, &n, &data), LT_OK);
        ASSERT_EQ(type, t);
        ASSERT_EQ(n, 5);
        ASSERT_TRUE(data && memcmp(data, raw[t], 5 * lt__gguf_type_size((lt_gguf_type)t)) == 0);
    }
    ASSERT_EQ(lt_gguf_get_arr(g, "arr.f32", &type, &n, &data), LT_OK);
    ASSERT_NEAR(((const float *)data)[4], 5.0 * (LT_GGUF_F32 + 1), 0);
    ASSERT_EQ(lt_gguf_get_arr(g, "arr.empty", &type, &n, &data), LT_OK);
    ASSERT_EQ(type, LT_GGUF_I32);
    ASSERT_EQ(n, 0);
    ASSERT_EQ(lt_gguf_get_arr(g, "arr.str", &type, &n, &data), LT_OK);
    ASSERT_EQ(type, LT_GGUF_STRING);
    ASSERT_EQ(n, 4);
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(lt_gguf_arr_str(g, "arr.str", i, &s, &len), LT_OK);
        ASSERT_EQ(len, lens[i]);
        ASSERT_TRUE(memcmp(s, strs[i], lens[i]) == 0);
    }
    ASSERT_EQ(lt_gguf_arr_str(g, "arr.str", 4, &s, &len), LT_ERANGE);
    ASSERT_EQ(lt_gguf_arr_str(g, "arr.str", -1, &s, &len), LT_ERANGE);
    ASSERT_EQ(lt_gguf_arr_str(g, "arr.f32", 0, &s, &len), LT_EFORMAT);

    ASSERT_EQ(lt_gguf_n_tensors(g), 4);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "t.%s", lt_dtype_name(dts[i]));
        const lt_gguf_tensor *t = lt_gguf_find_tensor(g, name);
        ASSERT_TRUE(t != NULL);
        if (!t) continue;
        ASSERT_TRUE(t == lt_gguf_tensor_at(g, i));
        ASSERT_STREQ(t->name, name);
        ASSERT_EQ(t->dtype, dts[i]);
        ASSERT_EQ(t->n_dims, ndims[i]);
        for (int d = 0; d < 4; d++) ASSERT_EQ(t->ne[d], shapes[i][d]);
        ASSERT_EQ(t->nbytes, nbytes[i]);
        ASSERT_EQ((uintptr_t)t->data % 32, 0);
        ASSERT_TRUE(memcmp(t->data, src[i], nbytes[i]) == 0);
        free(src[i]);
    }
    lt_gguf_close(g);
    remove(path);
}

/* The writer refuses bad input, and close then writes nothing. */
static void test_writer_rejects(void) {
    char path[600];
    path_for(path, sizeof path, "wbad");
    lt_gguf_writer *w;
    ASSERT_EQ(lt_gguf_writer_open(&w, path), LT_OK);
    ASSERT_EQ(lt_gguf_writer_u32(w, "k", 1), LT_OK);
    ASSERT_EQ(lt_gguf_writer_u32(w, "k", 2), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "duplicate metadata key 'k'") != NULL);
    ASSERT_EQ(lt_gguf_writer_close(w), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "duplicate metadata key 'k'") != NULL);
    ASSERT_TRUE(access(path, F_OK) != 0);

    float x[64] = {0};
    const struct {
        const char *name;
        lt_dtype dt;
        int nd;
        int64_t ne[4];
        const char *want;
    } bad[] = {
        {"q", LT_Q8_0, 1, {31}, "not a multiple"},
        {"z", LT_F32, 2, {4, 0}, "bad dimension 1"},
        {"d", LT_F32, 5, {1, 1, 1, 1}, "n_dims 5"},
        {"", LT_F32, 1, {4}, "empty or longer"},
        {"a_name_that_is_far_too_long_for_ggml_which_allows_only_63_bytes_x", LT_F32, 1, {4},
         "empty or longer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ(lt_gguf_writer_open(&w, path), LT_OK);
        ASSERT_EQ(lt_gguf_writer_tensor(w, bad[i].name, bad[i].dt, bad[i].nd, bad[i].ne, x),
                  LT_EINVAL);
        if (!strstr(lt_errmsg(), bad[i].want))
            LT__FAIL("writer case %zu: \"%s\" lacks \"%s\"", i, lt_errmsg(), bad[i].want);
        lt_gguf_writer_abort(w);
        ASSERT_TRUE(access(path, F_OK) != 0);
    }
    ASSERT_EQ(lt_gguf_writer_open(&w, path), LT_OK);
    ASSERT_EQ(lt_gguf_writer_tensor(w, "t", LT_F32, 1, (const int64_t[]){4}, x), LT_OK);
    ASSERT_EQ(lt_gguf_writer_tensor(w, "t", LT_F32, 1, (const int64_t[]){4}, x), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "duplicate tensor 't'") != NULL);
    lt_gguf_writer_abort(w);
    ASSERT_EQ(lt_gguf_writer_open(&w, "/nonexistent-dir/x.gguf"), LT_EIO);
    ASSERT_TRUE(strstr(lt_errmsg(), "/nonexistent-dir/x.gguf") != NULL);
}

/* ---- malformed files ----------------------------------------------------------- */

static void test_bad_header(void) {
    spec s = base_spec();
    s.magic = 0x46554746u;
    expect_fail("magic", &s, LT_EFORMAT, "bad magic");
    s = base_spec();
    s.version = 1;
    expect_fail("v1", &s, LT_EUNSUPPORTED, "version 1 not supported");
    s.version = 4;
    expect_fail("v4", &s, LT_EUNSUPPORTED, "version 4 not supported");
    s.version = 0x03000000;
    expect_fail("vbig", &s, LT_EUNSUPPORTED, "big-endian");
    s = base_spec();
    s.version = 2; /* v2 has the same layout as v3 */
    buf b = build(&s);
    char path[600];
    path_for(path, sizeof path, "v2");
    write_bytes(path, b.p, b.n);
    lt_gguf *g;
    ASSERT_EQ(lt_gguf_open(&g, path), LT_OK);
    if (g) ASSERT_EQ(lt_gguf_version(g), 2);
    lt_gguf_close(g);
    remove(path);
    free(b.p);
    s = base_spec();
    s.n_kv = 1ull << 60;
    expect_fail("nkv", &s, LT_EFORMAT, "n_kv 1152921504606846976 is absurd");
    s = base_spec();
    s.n_tensors = 1ull << 58;
    expect_fail("nt", &s, LT_EFORMAT, "n_tensors 288230376151711744 is absurd");
    expect_fail_bytes("empty", "", 0, LT_EFORMAT, "truncated");
    ASSERT_EQ(lt_gguf_open(&g, "/nonexistent/model.gguf"), LT_EIO);
    ASSERT_TRUE(strstr(lt_errmsg(), "/nonexistent/model.gguf") != NULL);
}

static void test_bad_metadata(void) {
    spec s = base_spec();
    s.key0_len = 1ull << 50;
    expect_fail("keylen", &s, LT_EFORMAT, "kv 0 key: string length 1125899906842624");
    s = base_spec();
    s.key0_len = 0;
    expect_fail("key0", &s, LT_EFORMAT, "empty key");
    s = base_spec();
    s.str_len = (1ull << 62) + 3;
    expect_fail("strlen", &s, LT_EFORMAT, "'general.architecture': string length");
    s = base_spec();
    s.arr_n = 1ull << 61;
    expect_fail("arrn", &s, LT_EFORMAT, "array count 2305843009213693952 past end");
    s = base_spec();
    s.kv0_type = 13;
    expect_fail("kvtype", &s, LT_EFORMAT, "unknown value type 13");
    s = base_spec();
    s.arr_elem = LT_GGUF_ARRAY;
    expect_fail("nested", &s, LT_EUNSUPPORTED, "nested arrays");
    s = base_spec();
    s.arr_elem = 77;
    expect_fail("elem", &s, LT_EFORMAT, "unknown array element type 77");
    s = base_spec();
    s.key3 = "general.alignment";
    expect_fail("dupkey", &s, LT_EFORMAT, "duplicate key 'general.alignment'");
    s = base_spec();
    s.alignment = 24;
    expect_fail("align", &s, LT_EFORMAT, "general.alignment 24 is not a power of two");
}

static void test_bad_tensors(void) {
    spec s = base_spec();
    s.a_n_dims = 5;
    expect_fail("ndims5", &s, LT_EFORMAT, "tensor 'a': n_dims 5");
    s.a_n_dims = 0;
    expect_fail("ndims0", &s, LT_EFORMAT, "tensor 'a': n_dims 0");
    s = base_spec();
    s.a_ne[1] = 0;
    expect_fail("ne0", &s, LT_EFORMAT, "tensor 'a': dimension 1 is 0");
    s = base_spec();
    s.a_ne[0] = 1ull << 40;
    s.a_ne[1] = 1ull << 40;
    expect_fail("overflow", &s, LT_EFORMAT, "tensor 'a': element count overflows");
    s = base_spec();
    s.a_ne[1] = 1ull << 63;
    expect_fail("ne63", &s, LT_EFORMAT, "element count overflows");
    s = base_spec();
    s.a_type = 9; /* q8_1: ggml's activation blocks, never a weight type looptune reads */
    expect_fail("q8_1", &s, LT_EUNSUPPORTED, "tensor 'a': ggml type 9 (q8_1) not supported");
    s.a_type = LT_GGML_Q4_K; /* ne[0] = 4 is no q4_k super-block */
    expect_fail("q4kblk", &s, LT_EFORMAT, "ne[0] = 4 is not a multiple of the q4_k block (256)");
    s.a_type = LT_GGML_Q5_0;
    expect_fail("q50blk", &s, LT_EFORMAT, "ne[0] = 4 is not a multiple of the q5_0 block (32)");
    s.a_type = 99;
    expect_fail("t99", &s, LT_EUNSUPPORTED, "tensor 'a': ggml type 99 (unknown) not supported");
    s = base_spec();
    s.a_type = LT_GGML_Q8_0; /* ne[0] = 4 is not a q8_0 block multiple */
    expect_fail("q8blk", &s, LT_EFORMAT, "ne[0] = 4 is not a multiple of the q8_0 block");
    s = base_spec();
    s.b_off = 64;
    expect_fail("offpast", &s, LT_EFORMAT, "tensor 'b': data at offset 64 (+34 bytes) past end");
    s.b_off = 1ull << 62;
    expect_fail("offhuge", &s, LT_EFORMAT, "tensor 'b': data at offset 4611686018427387904");
    s = base_spec();
    s.b_off = 36;
    expect_fail("misalign", &s, LT_EFORMAT, "tensor 'b': offset 36 is not a multiple of the "
                                            "alignment 32");
    s = base_spec();
    s.a_ne[0] = 8; /* 64 bytes of f32 declared where the file holds 32 before b */
    expect_fail("overrun", &s, LT_EFORMAT, "tensor 'a': 64 bytes (f32 8 x 2) at offset 0 run "
                                           "into tensor 'b' at offset 32: its byte size does not "
                                           "match its type and shape");
    s = base_spec();
    s.b_name = "a";
    expect_fail("duptensor", &s, LT_EFORMAT, "duplicate tensor 'a'");
}

/* Every proper prefix of a valid file is rejected with a clear message. */
static void test_truncated_everywhere(void) {
    spec s = base_spec();
    buf b = build(&s);
    char path[600];
    path_for(path, sizeof path, "trunc");
    int bad = 0;
    for (size_t n = 0; n < b.n; n++) {
        write_bytes(path, b.p, n);
        lt_gguf *g = NULL;
        int st = lt_gguf_open(&g, path);
        const char *m = lt_errmsg();
        if (st != LT_EFORMAT || g || !strstr(m, path) ||
            !(strstr(m, "truncated") || strstr(m, "past end") || strstr(m, "absurd"))) {
            if (bad++ < 5) LT__FAIL("prefix %zu: status %d, \"%s\"", n, st, m);
        }
        lt_gguf_close(g);
    }
    ASSERT_EQ(bad, 0);
    remove(path);
    free(b.p);
}

/* Random byte corruption never crashes the reader (the sanitizer build runs
 * this); an accepted file still has every tensor inside the file. */
static void test_corruption_fuzz(void) {
    spec s = base_spec();
    buf b = build(&s);
    char path[600];
    path_for(path, sizeof path, "fuzz");
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int accepted = 0;
    uint8_t *m = malloc(b.n);
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(m, b.p, b.n);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            m[(x >> 8) % b.n] = (uint8_t)(x >> 40);
        }
        write_bytes(path, m, b.n);
        lt_gguf *g = NULL;
        if (lt_gguf_open(&g, path) == LT_OK) {
            accepted++;
            for (int64_t i = 0; i < lt_gguf_n_tensors(g); i++) {
                const lt_gguf_tensor *t = lt_gguf_tensor_at(g, i);
                volatile uint8_t sink = 0;
                for (size_t k = 0; k < t->nbytes; k++) sink ^= ((const uint8_t *)t->data)[k];
                (void)sink;
            }
            lt_gguf_close(g);
        } else {
            ASSERT_TRUE(lt_errmsg()[0] != 0);
        }
    }
    ASSERT_TRUE(accepted > 0); /* flips inside data bytes are harmless */
    free(m);
    remove(path);
    free(b.p);
}

int main(void) {
    const char *wd = getenv("LT_WORK_DIR");
    snprintf(work_dir, sizeof work_dir, "%s", wd && *wd ? wd : "/tmp");
    for (size_t i = 0; i < sizeof b_data; i++) b_data[i] = (uint8_t)(i * 7 + 1);
    test_read_handbuilt();
    test_writer_matches_layout();
    test_roundtrip_all_types();
    test_writer_rejects();
    test_bad_header();
    test_bad_metadata();
    test_bad_tensors();
    test_truncated_everywhere();
    test_corruption_fuzz();
    return lt_test_finish();
}
