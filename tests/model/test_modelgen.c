/* Model generator: presets (and those of published llama and qwen2 models),
 * qwen2 files with biases, tied classifiers and rope scaling, determinism per seed, every dtype and preset
 * shape through lt_model_open, weight statistics, a scalar forward pass
 * that stays finite, and the embedded vocabularies (synthetic: any byte
 * tokenizes and round-trips; llama2.c: Llama 2 ids). */
#include "looptune/model.h"
#include "test.h"

#include <unistd.h>

static char work_dir[512], data_dir[512];

static void out_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/mg_%d_%s.gguf", work_dir, (int)getpid(), name);
}

static lt_modelgen_opts opts_for(const char *preset, lt_dtype dt, uint64_t seed) {
    lt_modelgen_opts o = {.dtype = dt, .seed = seed};
    if (lt_modelgen_preset(preset, &o.cfg) != LT_OK) LT__FAIL("preset %s", preset);
    return o;
}

static void test_presets(void) {
    const struct {
        const char *name;
        int64_t v[7];
    } want[] = {
        {"stories260K", {64, 172, 5, 8, 4, 512, 512}},
        {"stories15M", {288, 768, 6, 6, 6, 32000, 256}},
        {"stories110M", {768, 2048, 12, 12, 12, 32000, 1024}},
        {"1B", {2048, 5632, 16, 32, 8, 32000, 2048}},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        lt_llama_config c;
        ASSERT_EQ(lt_modelgen_preset(want[i].name, &c), LT_OK);
        const int64_t got[7] = {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                                c.vocab_size, c.seq_len};
        for (int k = 0; k < 7; k++) ASSERT_EQ(got[k], want[i].v[k]);
        ASSERT_NEAR(c.rms_eps, 1e-5, 1e-12);
        ASSERT_NEAR(c.rope_base, 10000, 0);
    }
    lt_llama_config c;
    ASSERT_EQ(lt_modelgen_preset("stories42M", &c), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "'stories42M'") != NULL);
}

/* The presets of published models, from their config.json: widths, heads,
 * vocabulary, context, rope theta, epsilon, tied embeddings, Llama 3.2's
 * rope_scaling; Qwen2 is the qwen2 architecture. */
static void test_arch_presets(void) {
    const struct {
        const char *name;
        int64_t v[7];
        lt_arch arch;
        float base, eps;
        bool tied;
        float factor;
    } want[] = {
        {"smollm2-135M", {576, 1536, 30, 9, 3, 49152, 8192}, LT_ARCH_LLAMA, 100000, 1e-5f, true, 0},
        {"qwen2-0.5B", {896, 4864, 24, 14, 2, 151936, 32768}, LT_ARCH_QWEN2, 1e6f, 1e-6f, true, 0},
        {"llama3.2-1B", {2048, 8192, 16, 32, 8, 128256, 131072}, LT_ARCH_LLAMA, 500000, 1e-5f, true,
         32},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        lt_modelgen_opts o = {0};
        ASSERT_EQ(lt_modelgen_preset_opts(want[i].name, &o), LT_OK);
        const lt_llama_config *c = &o.cfg;
        const int64_t got[7] = {c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
                                c->vocab_size, c->seq_len};
        for (int k = 0; k < 7; k++) ASSERT_EQ(got[k], want[i].v[k]);
        ASSERT_EQ(c->arch, want[i].arch);
        ASSERT_NEAR(c->rope_base, want[i].base, 0);
        ASSERT_NEAR(c->rms_eps, want[i].eps, 1e-12);
        ASSERT_EQ(o.tied, want[i].tied);
        ASSERT_NEAR(o.rope_scaling.factor, want[i].factor, 0);
    }
    lt_modelgen_opts o = {0};
    ASSERT_EQ(lt_modelgen_preset_opts("llama3.2-1B", &o), LT_OK);
    ASSERT_NEAR(o.rope_scaling.low_freq_factor, 1, 0);
    ASSERT_NEAR(o.rope_scaling.high_freq_factor, 4, 0);
    ASSERT_EQ(o.rope_scaling.original_context, 8192);
    /* Llama 3.2's factors (head_dim 64, theta 500000): the fastest pairs keep
     * their frequency, the slowest are 32x slower, and they never decrease */
    float f[32];
    ASSERT_EQ(lt_rope_scaling_factors(&o.rope_scaling, 500000.0f, 64, f), LT_OK);
    ASSERT_NEAR(f[0], 1.0, 0);
    ASSERT_NEAR(f[31], 32.0, 0);
    for (int i = 1; i < 32; i++) ASSERT_TRUE(f[i] >= f[i - 1]);
    lt_rope_scaling bad = {32.0f, 4.0f, 1.0f, 8192}; /* high below low */
    ASSERT_EQ(lt_rope_scaling_factors(&bad, 500000.0f, 64, f), LT_EINVAL);
    bad = (lt_rope_scaling){0.5f, 1.0f, 4.0f, 8192}; /* a factor below 1 */
    ASSERT_EQ(lt_rope_scaling_factors(&bad, 500000.0f, 64, f), LT_EINVAL);
    bad = (lt_rope_scaling){8.0f, 1.0f, 4.0f, 0};
    ASSERT_EQ(lt_rope_scaling_factors(&bad, 500000.0f, 64, f), LT_EINVAL);
}

/* A small tied qwen2 file opens with its biases and no classifier of its
 * own; an untied llama file with rope scaling carries the factors of its
 * scaling and no biases; rope scaling in a qwen2 file (llama.cpp would not
 * read it) and a bad scaling are refused. */
static void test_arch_files(void) {
    char p[600];
    out_path(p, sizeof p, "qwen2");
    lt_modelgen_opts o = {.dtype = LT_F16, .seed = 4, .tied = true};
    o.cfg = (lt_llama_config){.dim = 64, .hidden_dim = 96, .n_layers = 2, .n_heads = 4,
                              .n_kv_heads = 2, .vocab_size = 400, .seq_len = 32,
                              .rms_eps = 1e-6f, .rope_base = 1e6f, .arch = LT_ARCH_QWEN2};
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_OK);
    lt_model *m;
    ASSERT_EQ(lt_model_open(&m, p, NULL), LT_OK);
    if (m) {
        ASSERT_EQ(m->cfg.arch, LT_ARCH_QWEN2);
        ASSERT_TRUE(m->output.data == m->tok_embd.data);
        for (int64_t l = 0; l < 2; l++) {
            ASSERT_TRUE(m->layers[l].bq.data && m->layers[l].bk.data && m->layers[l].bv.data);
            ASSERT_EQ(m->layers[l].bk.ne[0], 32);
        }
        ASSERT_TRUE(!m->rope_freqs.data);
        lt_model_close(m);
    }
    o.rope_scaling = (lt_rope_scaling){8.0f, 1.0f, 4.0f, 64};
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "llama models only") != NULL);
    o.cfg.arch = LT_ARCH_LLAMA;
    o.tied = false;
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_OK);
    ASSERT_EQ(lt_model_open(&m, p, NULL), LT_OK);
    if (m) {
        ASSERT_EQ(m->cfg.arch, LT_ARCH_LLAMA);
        ASSERT_TRUE(m->output.data != m->tok_embd.data);
        ASSERT_TRUE(!m->layers[0].bq.data);
        float f[8];
        ASSERT_EQ(lt_rope_scaling_factors(&o.rope_scaling, 1e6f, 16, f), LT_OK);
        ASSERT_TRUE(m->rope_freqs.data && memcmp(m->rope_freqs.data, f, sizeof f) == 0);
        lt_model_close(m);
    }
    o.rope_scaling = (lt_rope_scaling){8.0f, 4.0f, 4.0f, 64}; /* low == high */
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_EINVAL);
    remove(p);
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*n);
    if (fread(p, 1, *n, f) != *n) abort();
    fclose(f);
    return p;
}

static void test_deterministic(void) {
    char a[600], b[600];
    out_path(a, sizeof a, "seed7a");
    out_path(b, sizeof b, "seed7b");
    lt_modelgen_opts o = opts_for("stories260K", LT_F16, 7);
    ASSERT_EQ(lt_modelgen_write(&o, a), LT_OK);
    ASSERT_EQ(lt_modelgen_write(&o, b), LT_OK);
    size_t na = 0, nb = 0;
    uint8_t *pa = slurp(a, &na), *pb = slurp(b, &nb);
    ASSERT_TRUE(pa && pb && na == nb && na > 500000 && memcmp(pa, pb, na) == 0);
    free(pb);
    o.seed = 8;
    ASSERT_EQ(lt_modelgen_write(&o, b), LT_OK);
    pb = slurp(b, &nb);
    ASSERT_TRUE(pb && na == nb); /* same layout, */
    size_t differ = 0;
    for (size_t i = 0; pb && i < na && i < nb; i++) differ += pa[i] != pb[i];
    ASSERT_TRUE(differ > na / 2); /* different weights (and the name in the metadata) */
    free(pa);
    free(pb);
    remove(a);
    remove(b);
}

static void test_rejects(void) {
    char p[600];
    out_path(p, sizeof p, "bad");
    lt_modelgen_opts o = opts_for("stories260K", LT_Q8_0, 1);
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "q8_0") && strstr(lt_errmsg(), "hidden_dim is 172"));
    ASSERT_TRUE(access(p, F_OK) != 0);
    o = opts_for("stories260K", LT_F32, 1);
    o.cfg.vocab_size = 300;
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "vocab_size 300 must be at least 354") != NULL);
    o = opts_for("stories260K", LT_F32, 1);
    o.cfg.n_heads = 6;
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "n_heads 6 does not divide dim 64") != NULL);
    o = opts_for("stories260K", LT_F32, 1);
    ASSERT_EQ(lt_modelgen_write(&o, "/nonexistent-dir/m.gguf"), LT_EIO);
    o.vocab_path = "/nonexistent/tokenizer.bin";
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_EIO);
    ASSERT_TRUE(access(p, F_OK) != 0);
}

/* ---- a scalar Llama forward pass, any weight dtype -------------------------- */

static void matvec(const lt_tensor *w, const float *x, float *y) {
    float *row = malloc((size_t)w->ne[0] * sizeof *row);
    for (int64_t r = 0; r < w->ne[1]; r++) {
        lt_row_to_f32(w->dtype, lt_tensor_row(w, r), row, w->ne[0]);
        double s = 0;
        for (int64_t i = 0; i < w->ne[0]; i++) s += (double)row[i] * x[i];
        y[r] = (float)s;
    }
    free(row);
}

static void rmsnorm(float *y, const float *x, const lt_tensor *w, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float s = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s * ((const float *)w->data)[i];
}

static void rope(float *v, int64_t n, int64_t hd, int64_t pos, float base) {
    for (int64_t i = 0; i < n; i += 2) {
        float ang = (float)pos * powf(base, -(float)(i % hd) / (float)hd);
        float c = cosf(ang), s = sinf(ang), a = v[i], b = v[i + 1];
        v[i] = a * c - b * s;
        v[i + 1] = a * s + b * c;
    }
}

/* Runs n_tok tokens; returns the number of non-finite logits seen and the
 * std of the last logits in *std. */
static int forward(const lt_model *m, int n_tok, double *std) {
    const lt_llama_config *c = &m->cfg;
    int64_t D = c->dim, H = c->hidden_dim, hd = D / c->n_heads, kvd = hd * c->n_kv_heads;
    int64_t V = c->vocab_size, L = c->n_layers;
    float *x = calloc((size_t)D, 4), *xb = calloc((size_t)D, 4), *q = calloc((size_t)D, 4);
    float *att = calloc((size_t)D, 4), *h1 = calloc((size_t)H, 4), *h3 = calloc((size_t)H, 4);
    float *kc = calloc((size_t)(L * n_tok * kvd), 4), *vc = calloc((size_t)(L * n_tok * kvd), 4);
    float *logits = calloc((size_t)V, 4), *sc = calloc((size_t)n_tok, 4);
    int bad = 0;
    for (int pos = 0; pos < n_tok; pos++) {
        int32_t tok = (int32_t)((pos * 7919 + 1) % V);
        lt_row_to_f32(m->tok_embd.dtype, lt_tensor_row(&m->tok_embd, tok), x, D);
        for (int64_t l = 0; l < L; l++) {
            const lt_llama_layer *y = &m->layers[l];
            float *k = kc + (l * n_tok + pos) * kvd, *v = vc + (l * n_tok + pos) * kvd;
            rmsnorm(xb, x, &y->attn_norm, D, c->rms_eps);
            matvec(&y->wq, xb, q);
            matvec(&y->wk, xb, k);
            matvec(&y->wv, xb, v);
            rope(q, D, hd, pos, c->rope_base);
            rope(k, kvd, hd, pos, c->rope_base);
            for (int64_t h = 0; h < c->n_heads; h++) {
                int64_t kh = h / (c->n_heads / c->n_kv_heads);
                float mx = -INFINITY, sum = 0;
                for (int t = 0; t <= pos; t++) {
                    const float *kt = kc + (l * n_tok + t) * kvd + kh * hd;
                    float s = 0;
                    for (int64_t i = 0; i < hd; i++) s += q[h * hd + i] * kt[i];
                    sc[t] = s / sqrtf((float)hd);
                    mx = fmaxf(mx, sc[t]);
                }
                for (int t = 0; t <= pos; t++) sum += (sc[t] = expf(sc[t] - mx));
                for (int64_t i = 0; i < hd; i++) {
                    float a = 0;
                    for (int t = 0; t <= pos; t++)
                        a += sc[t] / sum * vc[(l * n_tok + t) * kvd + kh * hd + i];
                    att[h * hd + i] = a;
                }
            }
            matvec(&y->wo, att, xb);
            for (int64_t i = 0; i < D; i++) x[i] += xb[i];
            rmsnorm(xb, x, &y->ffn_norm, D, c->rms_eps);
            matvec(&y->w_gate, xb, h1);
            matvec(&y->w_up, xb, h3);
            for (int64_t i = 0; i < H; i++) h1[i] = h1[i] / (1.0f + expf(-h1[i])) * h3[i];
            matvec(&y->w_down, h1, xb);
            for (int64_t i = 0; i < D; i++) x[i] += xb[i];
        }
        rmsnorm(xb, x, &m->output_norm, D, c->rms_eps);
        matvec(&m->output, xb, logits);
        double s = 0, ss = 0;
        for (int64_t i = 0; i < V; i++) {
            bad += !isfinite(logits[i]);
            s += logits[i];
            ss += (double)logits[i] * logits[i];
        }
        *std = sqrt(ss / (double)V - (s / (double)V) * (s / (double)V));
    }
    free(x); free(xb); free(q); free(att); free(h1); free(h3);
    free(kc); free(vc); free(logits); free(sc);
    return bad;
}

/* Standard deviation of a tensor's values and whether all are finite. */
static double tensor_std(const lt_tensor *t, bool *finite) {
    float *row = malloc((size_t)t->ne[0] * sizeof *row);
    double s = 0, ss = 0;
    int64_t n = 0;
    for (int64_t r = 0; r < t->ne[1]; r++) {
        lt_row_to_f32(t->dtype, lt_tensor_row(t, r), row, t->ne[0]);
        for (int64_t i = 0; i < t->ne[0]; i++, n++) {
            *finite = *finite && isfinite(row[i]);
            s += row[i];
            ss += (double)row[i] * row[i];
        }
    }
    free(row);
    return sqrt(ss / (double)n - (s / (double)n) * (s / (double)n));
}

/* Writes a preset (optionally trimmed), opens it, checks config, dtypes,
 * shapes, statistics and a forward pass. */
static void roundtrip(const char *preset, lt_dtype dt, int64_t layers, int64_t vocab,
                      int n_tok) {
    char p[600];
    out_path(p, sizeof p, preset);
    lt_modelgen_opts o = opts_for(preset, dt, 42);
    if (layers) o.cfg.n_layers = layers;
    if (vocab) o.cfg.vocab_size = vocab;
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_OK);
    lt_model *m;
    ASSERT_EQ(lt_model_open(&m, p, NULL), LT_OK);
    if (!m) return;
    ASSERT_TRUE(memcmp(&m->cfg, &o.cfg, sizeof o.cfg) == 0);
    ASSERT_EQ(m->wtype, dt);
    ASSERT_EQ(m->tok_embd.dtype, dt);
    ASSERT_EQ(m->output.dtype, dt);
    ASSERT_TRUE(m->output.data != m->tok_embd.data); /* written explicitly */
    const lt_llama_config *c = &o.cfg;
    int64_t kvd = c->dim / c->n_heads * c->n_kv_heads;
    const lt_llama_layer *y = &m->layers[c->n_layers - 1];
    ASSERT_EQ(y->wq.ne[0], c->dim); ASSERT_EQ(y->wq.ne[1], c->dim);
    ASSERT_EQ(y->wk.ne[0], c->dim); ASSERT_EQ(y->wk.ne[1], kvd);
    ASSERT_EQ(y->wv.ne[1], kvd);
    ASSERT_EQ(y->wo.ne[0], c->dim); ASSERT_EQ(y->wo.ne[1], c->dim);
    ASSERT_EQ(y->w_gate.ne[0], c->dim); ASSERT_EQ(y->w_gate.ne[1], c->hidden_dim);
    ASSERT_EQ(y->w_up.ne[1], c->hidden_dim);
    ASSERT_EQ(y->w_down.ne[0], c->hidden_dim); ASSERT_EQ(y->w_down.ne[1], c->dim);
    ASSERT_EQ(m->tok_embd.ne[1], c->vocab_size);
    /* statistics: uniform with std 1/sqrt(fan-in), unit embeddings, norms near 1 */
    bool finite = true;
    /* the 2- and 3-bit types' noise widens the spread (relative RMSE 0.30 and 0.15) */
    double tol = dt == LT_F32 ? 0.03 : dt == LT_Q2_K ? 0.12 : dt == LT_Q3_K ? 0.07 : 0.05;
    ASSERT_NEAR(tensor_std(&y->wk, &finite) * sqrt((double)c->dim), 1.0, tol);
    ASSERT_NEAR(tensor_std(&y->w_down, &finite) * sqrt((double)c->hidden_dim), 1.0, tol);
    ASSERT_NEAR(tensor_std(&m->tok_embd, &finite), 1.0, tol);
    ASSERT_TRUE(finite);
    float nmin = INFINITY, nmax = -INFINITY;
    for (int64_t i = 0; i < c->dim; i++) {
        float v = ((const float *)y->ffn_norm.data)[i];
        nmin = fminf(nmin, v);
        nmax = fmaxf(nmax, v);
    }
    ASSERT_TRUE(nmin > 0.85f && nmax < 1.15f && nmax - nmin > 0.01f);
    if (n_tok) {
        double std = 0;
        ASSERT_EQ(forward(m, n_tok, &std), 0);
        ASSERT_TRUE(std > 0.1 && std < 10.0);
    }
    lt_model_close(m);
    remove(p);
}

/* ---- vocabularies ------------------------------------------------------------- */

/* Tokenizes text with BOS and decodes it back piece by piece. */
static void check_roundtrip_text(const lt_vocab *v, const char *text, int64_t *n_ids) {
    size_t n = strlen(text);
    int32_t *ids = malloc((n + 3) * sizeof *ids);
    char *back = calloc(4 * n + 64, 1);
    ASSERT_EQ(lt_tokenize(v, text, true, ids, (int64_t)n + 3, n_ids), LT_OK);
    size_t pos = 0;
    for (int64_t i = 1; i < *n_ids; i++) {
        ASSERT_TRUE(ids[i] >= 0 && ids[i] < lt_vocab_size(v) && ids[i] != 0);
        pos += lt_detokenize(v, ids[i - 1], ids[i], back + pos, 4 * n + 64 - pos);
    }
    ASSERT_EQ(pos, n);
    ASSERT_TRUE(memcmp(back, text, n) == 0);
    free(ids);
    free(back);
}

static void test_synthetic_vocab(void) {
    char p[600];
    out_path(p, sizeof p, "vocab");
    lt_modelgen_opts o = opts_for("stories260K", LT_F32, 3);
    o.cfg.vocab_size = 4096;
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_OK);
    lt_model *m;
    ASSERT_EQ(lt_model_open(&m, p, NULL), LT_OK);
    if (!m || !m->vocab) return;
    const lt_vocab *v = m->vocab;
    ASSERT_EQ(lt_vocab_size(v), 4096);
    ASSERT_EQ(lt_vocab_bos(v), 1);
    ASSERT_EQ(lt_vocab_eos(v), 2);
    /* every byte value, alone between letters, and all of them at once */
    char all[256];
    for (int b = 1; b < 256; b++) {
        char text[4] = {'a', (char)b, 'z', 0};
        int64_t n;
        check_roundtrip_text(v, text, &n);
        all[b - 1] = (char)b;
    }
    all[255] = 0;
    int64_t n;
    check_roundtrip_text(v, all, &n);
    /* words merge: fewer tokens than characters, "▁the" is one piece */
    const char *story = "Once upon a time, there was a little girl named Lily. She liked to "
                        "play in the park with her friends.";
    check_roundtrip_text(v, story, &n);
    ASSERT_TRUE(n < (int64_t)strlen(story) / 3);
    int32_t ids[8];
    ASSERT_EQ(lt_tokenize(v, "the", false, ids, 8, &n), LT_OK);
    ASSERT_EQ(n, 1);
    size_t len;
    if (n == 1) ASSERT_STREQ(lt_vocab_piece(v, ids[0], &len), " the");
    lt_model_close(m);

    /* token types as llama.cpp reads them */
    lt_gguf *g;
    ASSERT_EQ(lt_gguf_open(&g, p), LT_OK);
    if (g) {
        lt_gguf_type t;
        const void *d;
        ASSERT_EQ(lt_gguf_get_arr(g, "tokenizer.ggml.token_type", &t, &n, &d), LT_OK);
        ASSERT_EQ(t, LT_GGUF_I32);
        ASSERT_EQ(n, 4096);
        const int32_t *tt = d;
        ASSERT_EQ(tt[0], 2);
        ASSERT_EQ(tt[1], 3);
        ASSERT_EQ(tt[2], 3);
        int bytes = 0, normal = 0;
        for (int i = 3; i < 4096; i++) {
            bytes += tt[i] == 6;
            normal += tt[i] == 1;
        }
        ASSERT_EQ(bytes, 256);
        ASSERT_EQ(normal, 4096 - 259);
        const char *s;
        ASSERT_EQ(lt_gguf_arr_str(g, "tokenizer.ggml.tokens", 3 + 0x41, &s, &len), LT_OK);
        ASSERT_TRUE(len == 6 && memcmp(s, "<0x41>", 6) == 0);
        ASSERT_EQ(lt_gguf_arr_str(g, "tokenizer.ggml.tokens", 259, &s, &len), LT_OK);
        ASSERT_TRUE(len == 3 && memcmp(s, "\xe2\x96\x81", 3) == 0);
        int64_t id;
        ASSERT_EQ(lt_gguf_get_i64(g, "tokenizer.ggml.unknown_token_id", &id), LT_OK);
        ASSERT_EQ(id, 0);
        ASSERT_EQ(lt_gguf_get_i64(g, "general.file_type", &id), LT_OK);
        ASSERT_EQ(id, 0);
        ASSERT_EQ(lt_gguf_get_i64(g, "llama.rope.dimension_count", &id), LT_OK);
        ASSERT_EQ(id, 8);
        lt_gguf_close(g);
    }
    remove(p);
}

static void test_llama2c_vocab(void) {
    char p[600], tok[600];
    out_path(p, sizeof p, "l2vocab");
    snprintf(tok, sizeof tok, "%s/llama2-tokenizer.bin", data_dir);
    lt_modelgen_opts o = opts_for("stories260K", LT_BF16, 5);
    o.cfg.vocab_size = 32000;
    o.vocab_path = tok;
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_OK);
    lt_model *m;
    ASSERT_EQ(lt_model_open(&m, p, NULL), LT_OK);
    if (m && m->vocab) {
        int32_t ids[32];
        int64_t n = 0;
        ASSERT_EQ(lt_tokenize(m->vocab, "Once upon a time", true, ids, 32, &n), LT_OK);
        const int32_t want[5] = {1, 9038, 2501, 263, 931};
        ASSERT_EQ(n, 5);
        for (int i = 0; i < 5 && i < n; i++) ASSERT_EQ(ids[i], want[i]);
        size_t len;
        ASSERT_STREQ(lt_vocab_piece(m->vocab, 1, &len), "<s>");
    }
    lt_model_close(m);
    lt_gguf *g;
    ASSERT_EQ(lt_gguf_open(&g, p), LT_OK);
    if (g) {
        const char *s;
        size_t len;
        ASSERT_EQ(lt_gguf_arr_str(g, "tokenizer.ggml.tokens", 9038, &s, &len), LT_OK);
        ASSERT_TRUE(len == 7 && memcmp(s, "\xe2\x96\x81Once", 7) == 0);
        lt_gguf_type t;
        int64_t n;
        const void *d;
        ASSERT_EQ(lt_gguf_get_arr(g, "tokenizer.ggml.token_type", &t, &n, &d), LT_OK);
        const int32_t *tt = d;
        ASSERT_EQ(tt[0], 2);
        ASSERT_EQ(tt[2], 3);
        ASSERT_EQ(tt[3 + 10], 6); /* <0x0A> */
        ASSERT_EQ(tt[9038], 1);
        lt_gguf_close(g);
    }
    remove(p);
    /* a tokenizer of another size than the config's vocabulary */
    o.cfg.vocab_size = 512;
    ASSERT_NE(lt_modelgen_write(&o, p), LT_OK);
    ASSERT_TRUE(strstr(lt_errmsg(), "llama2-tokenizer.bin") != NULL);
    ASSERT_TRUE(access(p, F_OK) != 0);
}

/* A file llama.cpp wrote (its quantizer applied to this generator's f32
 * output, see tests/data/README.md) reads back, and holds exactly the bytes
 * this generator writes for the same config, seed and q8_0. */
static void test_matches_llamacpp(void) {
    char ref[600], p[600];
    snprintf(ref, sizeof ref, "%s/tiny-llamacpp-q8_0.gguf", data_dir);
    out_path(p, sizeof p, "tiny");
    lt_modelgen_opts o = {.cfg = {.dim = 64, .hidden_dim = 128, .n_layers = 1, .n_heads = 4,
                                  .n_kv_heads = 2, .vocab_size = 354, .seq_len = 64,
                                  .rms_eps = 1e-5f, .rope_base = 10000.0f},
                          .dtype = LT_Q8_0, .seed = 2024};
    ASSERT_EQ(lt_modelgen_write(&o, p), LT_OK);
    lt_model *a, *b;
    ASSERT_EQ(lt_model_open(&a, ref, NULL), LT_OK);
    ASSERT_EQ(lt_model_open(&b, p, NULL), LT_OK);
    if (a && b) {
        ASSERT_TRUE(memcmp(&a->cfg, &b->cfg, sizeof a->cfg) == 0);
        ASSERT_EQ(a->wtype, LT_Q8_0);
        const lt_llama_layer *x = &a->layers[0], *y = &b->layers[0];
        const lt_tensor *ta[12] = {&a->tok_embd, &a->output, &a->output_norm, &x->attn_norm,
                                   &x->wq, &x->wk, &x->wv, &x->wo, &x->ffn_norm, &x->w_gate,
                                   &x->w_down, &x->w_up};
        const lt_tensor *tb[12] = {&b->tok_embd, &b->output, &b->output_norm, &y->attn_norm,
                                   &y->wq, &y->wk, &y->wv, &y->wo, &y->ffn_norm, &y->w_gate,
                                   &y->w_down, &y->w_up};
        for (int i = 0; i < 12; i++) {
            ASSERT_EQ(ta[i]->dtype, tb[i]->dtype);
            ASSERT_EQ(lt_tensor_nbytes(ta[i]), lt_tensor_nbytes(tb[i]));
            if (memcmp(ta[i]->data, tb[i]->data, lt_tensor_nbytes(ta[i])) != 0)
                LT__FAIL("tensor %d differs from llama.cpp's", i);
        }
        ASSERT_EQ(lt_vocab_size(a->vocab), 354);
        size_t la, lb;
        for (int32_t id = 0; id < 354; id++) {
            const char *pa = lt_vocab_piece(a->vocab, id, &la);
            const char *pb = lt_vocab_piece(b->vocab, id, &lb);
            if (la != lb || memcmp(pa, pb, la) != 0) LT__FAIL("piece %d differs", id);
        }
    }
    lt_model_close(a);
    lt_model_close(b);
    remove(p);
}

int main(void) {
    const char *wd = getenv("LT_WORK_DIR"), *dd = getenv("LT_DATA_DIR");
    snprintf(work_dir, sizeof work_dir, "%s", wd && *wd ? wd : "/tmp");
    snprintf(data_dir, sizeof data_dir, "%s", dd && *dd ? dd : "tests/data");
    test_presets();
    test_arch_presets();
    test_arch_files();
    test_deterministic();
    test_rejects();
    roundtrip("stories260K", LT_F32, 0, 0, 8);
    roundtrip("stories260K", LT_F16, 0, 0, 4);
    roundtrip("stories260K", LT_BF16, 0, 0, 4);
    roundtrip("stories15M", LT_Q8_0, 0, 0, 2);
    roundtrip("stories110M", LT_Q8_0, 1, 512, 1); /* full layer shapes, trimmed depth */
    roundtrip("1B", LT_Q8_0, 1, 512, 1);
    /* every other quantisation type on widths 256 divides (768, 2048), run forward */
    static const lt_dtype qt[] = {LT_Q4_0, LT_Q4_1, LT_Q5_0, LT_Q5_1, LT_Q2_K,
                                  LT_Q3_K, LT_Q4_K, LT_Q5_K, LT_Q6_K};
    for (size_t i = 0; i < sizeof qt / sizeof qt[0]; i++)
        roundtrip("stories110M", qt[i], 1, 512, lt_test_emulated() ? 0 : 1);
    test_synthetic_vocab();
    test_llama2c_vocab();
    test_matches_llamacpp();
    return lt_test_finish();
}
