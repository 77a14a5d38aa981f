/* lt_model_open on GGUF Llama files: config from metadata (with defaults),
 * tensors bound by name and shape for every dtype, tied classifier, norms
 * converted to f32, the GGUF vocabulary; stories260K converted to GGUF
 * reads back identical; and each malformed model is rejected by name. */
#include "looptune/model.h"
#include "test.h"

#include <unistd.h>

static char work_dir[512], data_dir[512];

/* Knobs of a small GGUF Llama model. Each error case changes one. */
typedef struct {
    const char *arch;
    int64_t dim, hidden, layers, heads, kv_heads, vocab;
    bool write_kv_heads, write_eps_rope;
    uint32_t head_count_meta; /* 0: heads */
    lt_dtype wtype, norm_dtype;
    bool tied;
    const char *skip_tensor, *bad_shape_tensor, *odd_dtype_tensor, *skip_key;
    int64_t n_tokens; /* 0: no tokenizer */
    const char *tok_model;
    uint32_t rope_dims; /* 0: not written */
    uint32_t vocab_meta; /* 0: not written */
} mspec;

static mspec base(void) {
    return (mspec){.arch = "llama", .dim = 64, .hidden = 96, .layers = 2, .heads = 4,
                   .kv_heads = 2, .vocab = 300, .write_kv_heads = true, .write_eps_rope = true,
                   .wtype = LT_F32, .norm_dtype = LT_F32, .n_tokens = 300, .tok_model = "llama"};
}

/* Deterministic value of element i of the k-th tensor. */
static float val(int k, int64_t i) { return sinf((float)(k * 1000 + i) * 0.37f) * 0.5f; }

/* Writes tensor k as dtype with shape {ne0, ne1}. */
static void put_tensor(lt_gguf_writer *w, const mspec *s, const char *name, int k, lt_dtype dt,
                       int nd, int64_t ne0, int64_t ne1) {
    if (s->skip_tensor && strcmp(name, s->skip_tensor) == 0) return;
    if (s->bad_shape_tensor && strcmp(name, s->bad_shape_tensor) == 0) ne1 /= 2;
    if (s->odd_dtype_tensor && strcmp(name, s->odd_dtype_tensor) == 0) dt = LT_F16;
    float *f = malloc((size_t)(ne0 * ne1) * sizeof *f);
    void *q = malloc(lt_dtype_row_bytes(dt, ne0) * (size_t)ne1);
    for (int64_t i = 0; i < ne0 * ne1; i++) f[i] = val(k, i) + (nd == 1 ? 1.0f : 0.0f);
    for (int64_t r = 0; r < ne1; r++)
        lt_row_from_f32(dt, f + r * ne0, (char *)q + (size_t)r * lt_dtype_row_bytes(dt, ne0), ne0);
    ASSERT_EQ(lt_gguf_writer_tensor(w, name, dt, nd, (const int64_t[]){ne0, ne1}, q), LT_OK);
    free(f);
    free(q);
}

static void u32_unless_skipped(lt_gguf_writer *w, const mspec *s, const char *key, uint32_t v) {
    if (!s->skip_key || strcmp(key, s->skip_key) != 0) ASSERT_EQ(lt_gguf_writer_u32(w, key, v), 0);
}

static void write_model(const mspec *s, const char *path) {
    lt_gguf_writer *w;
    ASSERT_EQ(lt_gguf_writer_open(&w, path), LT_OK);
    lt_gguf_writer_str(w, "general.architecture", s->arch);
    u32_unless_skipped(w, s, "llama.embedding_length", (uint32_t)s->dim);
    u32_unless_skipped(w, s, "llama.feed_forward_length", (uint32_t)s->hidden);
    u32_unless_skipped(w, s, "llama.block_count", (uint32_t)s->layers);
    u32_unless_skipped(w, s, "llama.attention.head_count",
                       s->head_count_meta ? s->head_count_meta : (uint32_t)s->heads);
    u32_unless_skipped(w, s, "llama.context_length", 128);
    if (s->write_kv_heads) lt_gguf_writer_u32(w, "llama.attention.head_count_kv",
                                              (uint32_t)s->kv_heads);
    if (s->write_eps_rope) {
        lt_gguf_writer_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-6f);
        lt_gguf_writer_f32(w, "llama.rope.freq_base", 500000.0f);
    }
    if (s->rope_dims) lt_gguf_writer_u32(w, "llama.rope.dimension_count", s->rope_dims);
    if (s->vocab_meta) lt_gguf_writer_u32(w, "llama.vocab_size", s->vocab_meta);
    if (s->n_tokens) {
        /* <unk> <s> </s>, byte tokens, then "▁" + letters */
        char **p = malloc((size_t)s->n_tokens * sizeof *p);
        float *sc = malloc((size_t)s->n_tokens * sizeof *sc);
        for (int64_t i = 0; i < s->n_tokens; i++) {
            p[i] = malloc(16);
            if (i < 3) snprintf(p[i], 16, "%s", (const char *[]){"<unk>", "<s>", "</s>"}[i]);
            else if (i < 259) snprintf(p[i], 16, "<0x%02X>", (unsigned)(i - 3));
            else snprintf(p[i], 16, "\xe2\x96\x81%c%c", 'a' + (int)((i - 259) % 26),
                          'a' + (int)((i - 259) / 26));
            sc[i] = -(float)i;
        }
        lt_gguf_writer_str(w, "tokenizer.ggml.model", s->tok_model);
        lt_gguf_writer_arr_str(w, "tokenizer.ggml.tokens", s->n_tokens, (const char *const *)p,
                               NULL);
        lt_gguf_writer_arr_f32(w, "tokenizer.ggml.scores", s->n_tokens, sc);
        lt_gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", 1);
        lt_gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", 7);
        for (int64_t i = 0; i < s->n_tokens; i++) free(p[i]);
        free(p);
        free(sc);
    }
    int64_t D = s->dim, H = s->hidden, KV = s->dim / s->heads * s->kv_heads;
    put_tensor(w, s, "token_embd.weight", 0, s->wtype, 2, D, s->vocab);
    put_tensor(w, s, "output_norm.weight", 1, s->norm_dtype, 1, D, 1);
    if (!s->tied) put_tensor(w, s, "output.weight", 2, s->wtype, 2, D, s->vocab);
    for (int l = 0; l < s->layers; l++) {
        const struct {
            const char *n;
            int nd;
            int64_t e0, e1;
        } t[] = {{"attn_norm", 1, D, 1},  {"attn_q", 2, D, D},      {"attn_k", 2, D, KV},
                 {"attn_v", 2, D, KV},    {"attn_output", 2, D, D}, {"ffn_norm", 1, D, 1},
                 {"ffn_gate", 2, D, H},   {"ffn_down", 2, H, D},    {"ffn_up", 2, D, H}};
        for (int i = 0; i < 9; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, t[i].n);
            put_tensor(w, s, name, 3 + l * 9 + i, t[i].nd == 1 ? s->norm_dtype : s->wtype,
                       t[i].nd, t[i].e0, t[i].e1);
        }
    }
    ASSERT_EQ(lt_gguf_writer_close(w), LT_OK);
}

static void model_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/mo_%d_%s.gguf", work_dir, (int)getpid(), name);
}

/* Element (row, col) of t as f32, any dtype. */
static float elem(const lt_tensor *t, int64_t row, int64_t col) {
    float tmp[4096];
    LT_ASSERT(t->ne[0] <= 4096);
    lt_row_to_f32(t->dtype, lt_tensor_row(t, row), tmp, t->ne[0]);
    return tmp[col];
}

/* What val(k, i) becomes after a trip through dtype dt (row of n). */
static float expect(lt_dtype dt, int k, int64_t row, int64_t col, int64_t n, float add) {
    float f[4096], back[4096];
    uint8_t q[4096 * 4];
    for (int64_t i = 0; i < n; i++) f[i] = val(k, row * n + i) + add;
    lt_row_from_f32(dt, f, q, n);
    lt_row_to_f32(dt, q, back, n);
    return back[col];
}

static void test_valid(lt_dtype wt) {
    mspec s = base();
    s.wtype = wt;
    s.norm_dtype = wt == LT_Q8_0 ? LT_F16 : wt; /* any norm dtype is converted to f32 */
    char path[600];
    model_path(path, sizeof path, lt_dtype_name(wt));
    write_model(&s, path);
    lt_model *m;
    ASSERT_EQ(lt_model_open(&m, path, NULL), LT_OK);
    if (!m) return;
    ASSERT_EQ(m->cfg.dim, 64);
    ASSERT_EQ(m->cfg.hidden_dim, 96);
    ASSERT_EQ(m->cfg.n_layers, 2);
    ASSERT_EQ(m->cfg.n_heads, 4);
    ASSERT_EQ(m->cfg.n_kv_heads, 2);
    ASSERT_EQ(m->cfg.vocab_size, 300);
    ASSERT_EQ(m->cfg.seq_len, 128);
    ASSERT_NEAR(m->cfg.rms_eps, 1e-6, 1e-12);
    ASSERT_NEAR(m->cfg.rope_base, 500000, 0);
    ASSERT_STREQ(m->format, "gguf");
    ASSERT_EQ(m->wtype, wt);
    ASSERT_EQ(m->tok_embd.dtype, wt);
    ASSERT_TRUE(m->output.data != m->tok_embd.data);
    /* tensors hold what was written, bound to the right names */
    ASSERT_NEAR(elem(&m->tok_embd, 299, 5), expect(wt, 0, 299, 5, 64, 0), 0);
    ASSERT_NEAR(elem(&m->output, 17, 63), expect(wt, 2, 17, 63, 64, 0), 0);
    ASSERT_NEAR(elem(&m->layers[1].wq, 40, 3), expect(wt, 3 + 9 + 1, 40, 3, 64, 0), 0);
    ASSERT_NEAR(elem(&m->layers[0].wk, 31, 33), expect(wt, 3 + 2, 31, 33, 64, 0), 0);
    ASSERT_NEAR(elem(&m->layers[0].wv, 0, 0), expect(wt, 3 + 3, 0, 0, 64, 0), 0);
    ASSERT_NEAR(elem(&m->layers[1].wo, 63, 63), expect(wt, 3 + 9 + 4, 63, 63, 64, 0), 0);
    ASSERT_NEAR(elem(&m->layers[1].w_gate, 95, 1), expect(wt, 3 + 9 + 6, 95, 1, 64, 0), 0);
    ASSERT_NEAR(elem(&m->layers[0].w_down, 10, 95), expect(wt, 3 + 7, 10, 95, 96, 0), 0);
    ASSERT_NEAR(elem(&m->layers[1].w_up, 2, 2), expect(wt, 3 + 9 + 8, 2, 2, 64, 0), 0);
    ASSERT_EQ(m->layers[0].wk.ne[1], 32);
    ASSERT_EQ(m->layers[0].w_down.ne[0], 96);
    /* norms: f32 copies of whatever the file holds */
    ASSERT_EQ(m->layers[1].ffn_norm.dtype, LT_F32);
    ASSERT_EQ(m->output_norm.dtype, LT_F32);
    ASSERT_NEAR(((float *)m->output_norm.data)[9], expect(s.norm_dtype, 1, 0, 9, 64, 1.0f), 0);
    ASSERT_NEAR(((float *)m->layers[1].ffn_norm.data)[63],
                expect(s.norm_dtype, 3 + 9 + 5, 0, 63, 64, 1.0f), 0);
    /* vocabulary: U+2581 back to ' ', ids from metadata */
    ASSERT_TRUE(m->vocab != NULL);
    if (m->vocab) {
        ASSERT_EQ(lt_vocab_size(m->vocab), 300);
        ASSERT_EQ(lt_vocab_bos(m->vocab), 1);
        ASSERT_EQ(lt_vocab_eos(m->vocab), 7);
        size_t len;
        ASSERT_STREQ(lt_vocab_piece(m->vocab, 260, &len), " ba");
        ASSERT_EQ(len, 3);
        ASSERT_NEAR(lt_vocab_score(m->vocab, 260), -260, 0);
    }
    /* bytes per token, counted here from the shapes */
    size_t proj = lt_dtype_row_bytes(wt, 64) * (64 + 32 + 32 + 96 * 2) +
                  lt_dtype_row_bytes(wt, 64) * 64 + lt_dtype_row_bytes(wt, 96) * 64;
    size_t want = 2 * (proj + 2 * 64 * 4) + 64 * 4 + lt_dtype_row_bytes(wt, 64) * 301;
    ASSERT_EQ(lt_model_weight_bytes_per_token(m), want);
    lt_model_close(m);
    remove(path);
}

static void test_defaults_and_tied(void) {
    mspec s = base();
    s.write_kv_heads = false;
    s.write_eps_rope = false;
    s.tied = true;
    s.kv_heads = s.heads; /* the shapes the default implies */
    s.n_tokens = 0;
    s.rope_dims = 16;
    s.vocab_meta = 300;
    char path[600];
    model_path(path, sizeof path, "defaults");
    write_model(&s, path);
    lt_model *m;
    ASSERT_EQ(lt_model_open(&m, path, NULL), LT_OK);
    if (!m) return;
    ASSERT_EQ(m->cfg.n_kv_heads, 4);
    ASSERT_NEAR(m->cfg.rms_eps, 1e-5, 1e-12);
    ASSERT_NEAR(m->cfg.rope_base, 10000, 0);
    ASSERT_TRUE(m->output.data == m->tok_embd.data);
    ASSERT_EQ(m->output.ne[1], 300);
    ASSERT_TRUE(m->vocab == NULL);
    lt_model_close(m);
    remove(path);
}

static void expect_fail(const char *name, const mspec *s, int status, const char *want) {
    char path[600];
    model_path(path, sizeof path, name);
    write_model(s, path);
    lt_model *m = (lt_model *)1;
    int st = lt_model_open(&m, path, NULL);
    ASSERT_EQ(st, status);
    ASSERT_TRUE(m == NULL);
    if (!strstr(lt_errmsg(), path) || !strstr(lt_errmsg(), want))
        LT__FAIL("case %s: message \"%s\" lacks \"%s\"", name, lt_errmsg(), want);
    remove(path);
}

static void test_bad_models(void) {
    mspec s = base();
    s.skip_tensor = "blk.1.ffn_up.weight";
    expect_fail("missing", &s, LT_EFORMAT, "missing tensor 'blk.1.ffn_up.weight'");
    s = base();
    s.skip_tensor = "token_embd.weight";
    expect_fail("noembd", &s, LT_EFORMAT, "missing tensor 'token_embd.weight'");
    s = base();
    s.skip_tensor = "blk.0.attn_norm.weight";
    expect_fail("nonorm", &s, LT_EFORMAT, "missing tensor 'blk.0.attn_norm.weight'");
    s = base();
    s.bad_shape_tensor = "blk.0.attn_q.weight";
    expect_fail("shape_q", &s, LT_EFORMAT,
                "tensor 'blk.0.attn_q.weight' has shape {64, 32, 1, 1}, expected {64, 64}");
    s = base();
    s.bad_shape_tensor = "output.weight";
    expect_fail("shape_out", &s, LT_EFORMAT, "tensor 'output.weight' has shape {64, 150");
    s = base();
    s.arch = "gpt2";
    expect_fail("arch", &s, LT_EUNSUPPORTED, "general.architecture is 'gpt2', expected 'llama'");
    s = base();
    s.skip_key = "llama.block_count";
    expect_fail("nokey", &s, LT_EFORMAT, "missing metadata key 'llama.block_count'");
    s = base();
    s.odd_dtype_tensor = "blk.1.attn_v.weight";
    expect_fail("mixed", &s, LT_EUNSUPPORTED,
                "tensor 'blk.1.attn_v.weight' is f16 but the other projections are f32");
    s = base();
    s.n_tokens = 299;
    expect_fail("ntok", &s, LT_EFORMAT, "tokenizer has 299 tokens but the model's vocabulary is "
                                        "300");
    s = base();
    s.tok_model = "gpt2"; /* a byte-level BPE vocabulary needs merges */
    expect_fail("tokmerges", &s, LT_EFORMAT, "a gpt2 vocabulary without tokenizer.ggml.merges");
    s = base();
    s.tok_model = "bert";
    expect_fail("tokmodel", &s, LT_EUNSUPPORTED, "tokenizer.ggml.model 'bert' is not supported");
    s = base();
    s.rope_dims = 8;
    expect_fail("ropedims", &s, LT_EUNSUPPORTED, "llama.rope.dimension_count 8 differs from "
                                                 "head_dim 16");
    s = base();
    s.vocab_meta = 301;
    expect_fail("vocabmeta", &s, LT_EFORMAT, "llama.vocab_size 301 disagrees");
    s = base();
    s.head_count_meta = 5;
    expect_fail("heads5", &s, LT_EFORMAT, "n_heads 5 does not divide dim 64");
    s = base();
    s.write_kv_heads = true;
    s.kv_heads = 3; /* kv_dim 48: shapes follow, the check rejects the config */
    expect_fail("kv3", &s, LT_EFORMAT, "n_kv_heads 3 does not divide n_heads 4");
    s = base();
    s.skip_key = "llama.embedding_length";
    expect_fail("nodim", &s, LT_EFORMAT, "missing metadata key 'llama.embedding_length'");
}

/* stories260K (llama2.c) written as GGUF reads back with identical tensors. */
static void test_llama2c_to_gguf(void) {
    char src[600], path[600];
    snprintf(src, sizeof src, "%s/stories260K.bin", data_dir);
    model_path(path, sizeof path, "conv");
    lt_model *a, *b;
    ASSERT_EQ(lt_model_open(&a, src, NULL), LT_OK);
    if (!a) return;
    const lt_llama_config *c = &a->cfg;
    lt_gguf_writer *w;
    ASSERT_EQ(lt_gguf_writer_open(&w, path), LT_OK);
    lt_gguf_writer_str(w, "general.architecture", "llama");
    lt_gguf_writer_u32(w, "llama.embedding_length", (uint32_t)c->dim);
    lt_gguf_writer_u32(w, "llama.feed_forward_length", (uint32_t)c->hidden_dim);
    lt_gguf_writer_u32(w, "llama.block_count", (uint32_t)c->n_layers);
    lt_gguf_writer_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads);
    lt_gguf_writer_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
    lt_gguf_writer_u32(w, "llama.context_length", (uint32_t)c->seq_len);
#define PUT(nm, t) lt_gguf_writer_tensor(w, nm, (t).dtype, (t).ne[1] == 1 ? 1 : 2, (t).ne, (t).data)
    PUT("token_embd.weight", a->tok_embd);
    PUT("output_norm.weight", a->output_norm);
    for (int64_t l = 0; l < c->n_layers; l++) {
        const lt_llama_layer *y = &a->layers[l];
        const lt_tensor *t[9] = {&y->attn_norm, &y->wq,  &y->wk,     &y->wv,   &y->wo,
                                 &y->ffn_norm,  &y->w_gate, &y->w_down, &y->w_up};
        const char *n[9] = {"attn_norm", "attn_q",   "attn_k",   "attn_v", "attn_output",
                            "ffn_norm",  "ffn_gate", "ffn_down", "ffn_up"};
        for (int i = 0; i < 9; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, n[i]);
            ASSERT_EQ(PUT(name, *t[i]), LT_OK);
        }
    }
#undef PUT
    ASSERT_EQ(lt_gguf_writer_close(w), LT_OK);
    ASSERT_EQ(lt_model_open(&b, path, NULL), LT_OK);
    if (b) {
        ASSERT_TRUE(memcmp(&a->cfg, &b->cfg, sizeof a->cfg) == 0);
        ASSERT_TRUE(b->output.data == b->tok_embd.data);
        ASSERT_EQ(lt_model_weight_bytes_per_token(a), lt_model_weight_bytes_per_token(b));
        int diff = 0;
        for (int64_t l = 0; l < c->n_layers; l++) {
            const lt_llama_layer *x = &a->layers[l], *y = &b->layers[l];
            const lt_tensor *ta[9] = {&x->attn_norm, &x->wq,     &x->wk,     &x->wv,  &x->wo,
                                      &x->ffn_norm,  &x->w_gate, &x->w_down, &x->w_up};
            const lt_tensor *tb[9] = {&y->attn_norm, &y->wq,     &y->wk,     &y->wv,  &y->wo,
                                      &y->ffn_norm,  &y->w_gate, &y->w_down, &y->w_up};
            for (int i = 0; i < 9; i++)
                diff += memcmp(ta[i]->data, tb[i]->data, lt_tensor_nbytes(ta[i])) != 0 ||
                        memcmp(ta[i]->ne, tb[i]->ne, sizeof ta[i]->ne) != 0 ||
                        ta[i]->dtype != tb[i]->dtype;
        }
        diff += memcmp(a->tok_embd.data, b->tok_embd.data, lt_tensor_nbytes(&a->tok_embd)) != 0;
        diff += memcmp(a->output_norm.data, b->output_norm.data, 64 * 4) != 0;
        ASSERT_EQ(diff, 0);
        lt_model_close(b);
    }
    lt_model_close(a);
    remove(path);
}

/* A llama2.c tokenizer.bin passed to lt_model_open replaces the GGUF's own. */
static void test_tokenizer_override(void) {
    mspec s = base();
    s.vocab = 32000;
    s.wtype = LT_F16;
    s.layers = 1;
    s.n_tokens = 32000;
    char path[600], tok[600];
    model_path(path, sizeof path, "override");
    snprintf(tok, sizeof tok, "%s/llama2-tokenizer.bin", data_dir);
    write_model(&s, path);
    lt_model *m;
    ASSERT_EQ(lt_model_open(&m, path, tok), LT_OK);
    if (m && m->vocab) {
        int32_t ids[32];
        int64_t n = 0;
        ASSERT_EQ(lt_tokenize(m->vocab, "Once upon a time", true, ids, 32, &n), LT_OK);
        const int32_t want[5] = {1, 9038, 2501, 263, 931};
        ASSERT_EQ(n, 5);
        for (int i = 0; i < 5 && i < n; i++) ASSERT_EQ(ids[i], want[i]);
        ASSERT_EQ(lt_vocab_eos(m->vocab), 2); /* llama2.c's, not the file's 7 */
    }
    lt_model_close(m);
    remove(path);
}

/* The resident copy says why it has no huge pages: with the kernel's THP
 * switch at never (a stand-in file), missing, or as this machine has it. */
static void page_note_with(const char *sysfs, const char *want) {
    char model[600];
    snprintf(model, sizeof model, "%s/stories260K.bin", data_dir);
    if (sysfs) setenv("LT_THP_SYSFS", sysfs, 1);
    else unsetenv("LT_THP_SYSFS");
    lt_model *m = NULL;
    ASSERT_EQ(lt_model_open(&m, model, NULL), LT_OK);
    if (!m) return;
    ASSERT_TRUE(lt_model_page_note(m) == NULL); /* not resident yet */
    ASSERT_EQ(lt_model_make_resident(m), LT_OK);
    const char *note = lt_model_page_note(m);
    if (want) {
        ASSERT_TRUE(note && strstr(note, want) && strstr(note, "4 KiB pages"));
        if (note && !strstr(note, want)) fprintf(stderr, "  note: %s\n", note);
    } else {
        ASSERT_TRUE(note == NULL);
    }
    lt_model_close(m);
    unsetenv("LT_THP_SYSFS");
}

static void test_page_note(void) {
    char never[600];
    snprintf(never, sizeof never, "%s/mo_%d_thp_never", work_dir, (int)getpid());
    FILE *f = fopen(never, "w");
    ASSERT_TRUE(f != NULL);
    if (!f) return;
    fputs("always madvise [never]\n", f);
    fclose(f);
    page_note_with(never, "are off");
    page_note_with("/nonexistent/transparent_hugepage/enabled", "no transparent huge pages");
    remove(never);
    /* the machine itself: a note exactly when its switch is at never or absent */
    FILE *sys = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    if (sys) {
        if (!fgets(mode, sizeof mode, sys)) mode[0] = 0;
        fclose(sys);
    }
    page_note_with(NULL, !sys ? "no transparent huge pages" : strstr(mode, "[never]") ? "are off"
                                                                                       : NULL);
}

int main(void) {
    const char *wd = getenv("LT_WORK_DIR"), *dd = getenv("LT_DATA_DIR");
    snprintf(work_dir, sizeof work_dir, "%s", wd && *wd ? wd : "/tmp");
    snprintf(data_dir, sizeof data_dir, "%s", dd && *dd ? dd : "tests/data");
    test_valid(LT_F32);
    test_valid(LT_F16);
    test_valid(LT_BF16);
    test_valid(LT_Q8_0);
    test_defaults_and_tied();
    test_bad_models();
    test_llama2c_to_gguf();
    test_tokenizer_override();
    test_page_note();
    return lt_test_finish();
}
