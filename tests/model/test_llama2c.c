/* llama2.c checkpoints: stories260K loads with the right config and tied
 * classifier, and its tensors hold the floats found by reading the file
 * directly at offsets computed here; malformed headers and sizes are
 * rejected with a message naming the problem. */
#include "looptune/model.h"
#include "test.h"

#include <stdint.h>
#include <unistd.h>

static char data_path[512], work_dir[512];

/* Float at index i (after the 28-byte header) read straight from the file. */
static float raw_float(int64_t i) {
    FILE *f = fopen(data_path, "rb");
    float v = NAN;
    if (f && fseek(f, 28 + 4 * i, SEEK_SET) == 0 && fread(&v, 4, 1, f) == 1) {}
    if (f) fclose(f);
    return v;
}

static float tensor_at(const lt_tensor *t, int64_t row, int64_t col) {
    LT_ASSERT(t->dtype == LT_F32);
    return ((const float *)lt_tensor_row(t, row))[col];
}

static void test_stories260k(void) {
    lt_model *m;
    ASSERT_EQ(lt_model_open(&m, data_path, NULL), LT_OK);
    if (!m) return;
    const lt_llama_config *c = &m->cfg;
    ASSERT_EQ(c->dim, 64);
    ASSERT_EQ(c->hidden_dim, 172);
    ASSERT_EQ(c->n_layers, 5);
    ASSERT_EQ(c->n_heads, 8);
    ASSERT_EQ(c->n_kv_heads, 4);
    ASSERT_EQ(c->vocab_size, 512);
    ASSERT_EQ(c->seq_len, 512);
    ASSERT_NEAR(c->rms_eps, 1e-5, 1e-12);
    ASSERT_NEAR(c->rope_base, 10000, 0);
    ASSERT_STREQ(m->format, "llama2c");
    ASSERT_EQ(m->wtype, LT_F32);
    ASSERT_TRUE(m->vocab == NULL);
    ASSERT_TRUE(m->output.data == m->tok_embd.data); /* shared classifier */

    /* offsets in floats, as llama2.c lays the file out */
    const int64_t D = 64, H = 172, L = 5, V = 512, KV = 32;
    const int64_t o_emb = 0, o_rms_att = V * D, o_wq = o_rms_att + L * D;
    const int64_t o_wk = o_wq + L * D * D, o_wv = o_wk + L * KV * D, o_wo = o_wv + L * KV * D;
    const int64_t o_rms_ffn = o_wo + L * D * D, o_w1 = o_rms_ffn + L * D;
    const int64_t o_w2 = o_w1 + L * H * D, o_w3 = o_w2 + L * D * H, o_rms_fin = o_w3 + L * H * D;

    ASSERT_NEAR(tensor_at(&m->tok_embd, 3, 5), raw_float(o_emb + 3 * D + 5), 0);
    ASSERT_NEAR(tensor_at(&m->output, 511, 63), raw_float(o_emb + 511 * D + 63), 0);
    ASSERT_NEAR(tensor_at(&m->layers[2].wq, 7, 11), raw_float(o_wq + 2 * D * D + 7 * D + 11), 0);
    ASSERT_NEAR(tensor_at(&m->layers[4].wk, 31, 63), raw_float(o_wk + 4 * KV * D + 31 * D + 63),
                0);
    ASSERT_NEAR(tensor_at(&m->layers[0].wv, 0, 0), raw_float(o_wv), 0);
    ASSERT_NEAR(tensor_at(&m->layers[3].wo, 10, 20), raw_float(o_wo + 3 * D * D + 10 * D + 20), 0);
    ASSERT_NEAR(tensor_at(&m->layers[1].w_gate, 171, 1),
                raw_float(o_w1 + 1 * H * D + 171 * D + 1), 0);
    ASSERT_NEAR(tensor_at(&m->layers[1].w_down, 63, 171),
                raw_float(o_w2 + 1 * D * H + 63 * H + 171), 0);
    ASSERT_NEAR(tensor_at(&m->layers[4].w_up, 100, 50),
                raw_float(o_w3 + 4 * H * D + 100 * D + 50), 0);
    ASSERT_NEAR(tensor_at(&m->layers[2].attn_norm, 0, 9), raw_float(o_rms_att + 2 * D + 9), 0);
    ASSERT_NEAR(tensor_at(&m->layers[3].ffn_norm, 0, 63), raw_float(o_rms_ffn + 3 * D + 63), 0);
    ASSERT_NEAR(tensor_at(&m->output_norm, 0, 17), raw_float(o_rms_fin + 17), 0);
    /* values of a trained model: norms of order 1, not zeros */
    ASSERT_TRUE(fabsf(tensor_at(&m->output_norm, 0, 17)) > 0.01f);

    /* shapes follow looptune's {in, out} convention */
    const lt_llama_layer *y = &m->layers[4];
    ASSERT_EQ(y->wq.ne[0], 64); ASSERT_EQ(y->wq.ne[1], 64);
    ASSERT_EQ(y->wk.ne[0], 64); ASSERT_EQ(y->wk.ne[1], 32);
    ASSERT_EQ(y->wv.ne[1], 32);
    ASSERT_EQ(y->w_gate.ne[0], 64); ASSERT_EQ(y->w_gate.ne[1], 172);
    ASSERT_EQ(y->w_down.ne[0], 172); ASSERT_EQ(y->w_down.ne[1], 64);
    ASSERT_EQ(m->tok_embd.ne[0], 64); ASSERT_EQ(m->tok_embd.ne[1], 512);
    ASSERT_EQ(m->tok_embd.nb[1], 256);

    /* per token: 5 layers of projections and norms, the classifier, one row */
    size_t want = (size_t)(L * (2 * D * D + 2 * KV * D + 3 * H * D + 2 * D) + D + V * D + D) * 4;
    ASSERT_EQ(lt_model_weight_bytes_per_token(m), want);
    lt_model_close(m);
    lt_model_close(NULL);
}

/* ---- malformed checkpoints ----------------------------------------------------- */

static uint8_t *file_bytes(size_t *n) {
    FILE *f = fopen(data_path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*n + 512 * 64 * 4);
    if (fread(p, 1, *n, f) != *n) abort();
    fclose(f);
    return p;
}

static void expect_fail(const char *name, const void *p, size_t n, int status, const char *want) {
    char path[600];
    snprintf(path, sizeof path, "%s/l2c_%d_%s.bin", work_dir, (int)getpid(), name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) abort();
    fclose(f);
    lt_model *m = (lt_model *)1;
    int st = lt_model_open(&m, path, NULL);
    ASSERT_EQ(st, status);
    ASSERT_TRUE(m == NULL);
    if (!strstr(lt_errmsg(), path) || !strstr(lt_errmsg(), want))
        LT__FAIL("case %s: message \"%s\" lacks \"%s\"", name, lt_errmsg(), want);
    remove(path);
}

static void with_header(const char *name, const uint8_t *orig, size_t n, int field, int32_t v,
                        int status, const char *want) {
    uint8_t *p = malloc(n);
    memcpy(p, orig, n);
    memcpy(p + 4 * field, &v, 4);
    expect_fail(name, p, n, status, want);
    free(p);
}

static void test_bad_checkpoints(void) {
    size_t n;
    uint8_t *p = file_bytes(&n);
    ASSERT_TRUE(p != NULL);
    if (!p) return;
    expect_fail("short", p, 20, LT_EFORMAT, "truncated: 20 bytes");
    expect_fail("header_only", p, 28, LT_EFORMAT, "implies 1056540 bytes, file has 28");
    expect_fail("half", p, n / 2, LT_EFORMAT, "implies 1056540 bytes, file has 528270");
    expect_fail("minus4", p, n - 4, LT_EFORMAT, "truncated");
    with_header("neg_dim", p, n, 0, -64, LT_EFORMAT, "dim = -64 is not positive");
    with_header("zero_layers", p, n, 2, 0, LT_EFORMAT, "n_layers = 0 is not positive");
    with_header("zero_seq", p, n, 6, 0, LT_EFORMAT, "seq_len = 0 is not positive");
    with_header("absurd_dim", p, n, 0, 1 << 30, LT_EFORMAT, "dim = 1073741824 outside");
    with_header("absurd_vocab", p, n, 5, 1 << 30, LT_EFORMAT, "vocab_size = 1073741824 outside");
    with_header("heads7", p, n, 3, 7, LT_EFORMAT, "n_heads 7 does not divide dim 64");
    with_header("kv3", p, n, 4, 3, LT_EFORMAT, "n_kv_heads 3 does not divide n_heads 8");
    with_header("odd_head", p, n, 3, 64, LT_EFORMAT, "head_dim 1 is odd");
    with_header("ak42", p, n, 0, 0x616b3432, LT_EUNSUPPORTED, "export version");
    /* more layers than the file holds */
    with_header("layers6", p, n, 2, 6, LT_EFORMAT, "truncated");

    /* negative vocab_size: a separate classifier follows the weights */
    int32_t neg = -512;
    memcpy(p + 20, &neg, 4);
    for (int i = 0; i < 512 * 64; i++) {
        float v = (float)i * 0.25f;
        memcpy(p + n + 4 * (size_t)i, &v, 4);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/l2c_%d_wcls.bin", work_dir, (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n + 512 * 64 * 4, f) != n + 512 * 64 * 4) abort();
    fclose(f);
    lt_model *m;
    ASSERT_EQ(lt_model_open(&m, path, NULL), LT_OK);
    if (m) {
        ASSERT_EQ(m->cfg.vocab_size, 512);
        ASSERT_TRUE(m->output.data != m->tok_embd.data);
        ASSERT_NEAR(tensor_at(&m->output, 0, 1), 0.25, 0);
        ASSERT_NEAR(tensor_at(&m->output, 511, 63), (511 * 64 + 63) * 0.25, 0);
        ASSERT_NEAR(tensor_at(&m->tok_embd, 3, 5), raw_float(3 * 64 + 5), 0);
        lt_model_close(m);
    }
    /* the same file without its classifier is short */
    expect_fail("no_wcls", p, n, LT_EFORMAT, "truncated");
    remove(path);

    ASSERT_EQ(lt_model_open(&m, "/nonexistent/model.bin", NULL), LT_EIO);
    ASSERT_TRUE(strstr(lt_errmsg(), "/nonexistent/model.bin") != NULL);
    free(p);
}

/* A llama2.c tokenizer whose size differs from the model's vocabulary. */
static void test_tokenizer_mismatch(void) {
    char tok[600];
    const char *dd = getenv("LT_DATA_DIR");
    snprintf(tok, sizeof tok, "%s/llama2-tokenizer.bin", dd ? dd : "tests/data");
    lt_model *m;
    int st = lt_model_open(&m, data_path, tok);
    ASSERT_NE(st, LT_OK);
    ASSERT_TRUE(m == NULL);
    ASSERT_TRUE(strstr(lt_errmsg(), "llama2-tokenizer.bin") != NULL);
}

int main(void) {
    const char *dd = getenv("LT_DATA_DIR"), *wd = getenv("LT_WORK_DIR");
    snprintf(data_path, sizeof data_path, "%s/stories260K.bin", dd ? dd : "tests/data");
    snprintf(work_dir, sizeof work_dir, "%s", wd && *wd ? wd : "/tmp");
    test_stories260k();
    test_bad_checkpoints();
    test_tokenizer_mismatch();
    return lt_test_finish();
}
