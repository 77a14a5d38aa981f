/* lt_model_open/close: detects the file format, maps a GGUF model of the
 * llama or qwen2 architecture (its keys under the arch's prefix; names,
 * shapes and dtypes checked against the config; every tensor accounted
 * for), attaches the vocabulary, and counts the weight bytes one decoded
 * token reads. */
#include "model/model_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Bounds far above any Llama-family model, low enough that every size
 * product below fits int64_t. */
#define MAX_DIM (1 << 16)
#define MAX_HIDDEN (1 << 18)
#define MAX_LAYERS 1024
#define MAX_HEADS 1024
#define MAX_VOCAB (1 << 22)
#define MAX_SEQ_LEN (1 << 24)

#define GGUF_DEFAULT_RMS_EPS 1e-5f
#define GGUF_DEFAULT_ROPE_BASE 10000.0f

int lt__llama_config_check(const lt_llama_config *c, const char *what) {
    const struct {
        const char *name;
        int64_t v, max;
    } f[] = {
        {"dim", c->dim, MAX_DIM},           {"hidden_dim", c->hidden_dim, MAX_HIDDEN},
        {"n_layers", c->n_layers, MAX_LAYERS}, {"n_heads", c->n_heads, MAX_HEADS},
        {"n_kv_heads", c->n_kv_heads, MAX_HEADS}, {"vocab_size", c->vocab_size, MAX_VOCAB},
        {"seq_len", c->seq_len, MAX_SEQ_LEN},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v <= 0 || f[i].v > f[i].max)
            return lt_error(LT_EFORMAT, "%s: %s = %lld outside 1..%lld", what, f[i].name,
                            (long long)f[i].v, (long long)f[i].max);
    }
    if (c->dim % c->n_heads != 0)
        return lt_error(LT_EFORMAT, "%s: n_heads %lld does not divide dim %lld", what,
                        (long long)c->n_heads, (long long)c->dim);
    if (c->n_heads % c->n_kv_heads != 0)
        return lt_error(LT_EFORMAT, "%s: n_kv_heads %lld does not divide n_heads %lld", what,
                        (long long)c->n_kv_heads, (long long)c->n_heads);
    if ((c->dim / c->n_heads) % 2 != 0)
        return lt_error(LT_EFORMAT, "%s: head_dim %lld is odd (rope rotates pairs)", what,
                        (long long)(c->dim / c->n_heads));
    if ((unsigned)c->arch >= LT_ARCH_COUNT)
        return lt_error(LT_EFORMAT, "%s: architecture %d unknown", what, (int)c->arch);
    if (!(c->rms_eps > 0.0f) || !isfinite(c->rms_eps))
        return lt_error(LT_EFORMAT, "%s: rms_eps %g is not a positive number", what,
                        (double)c->rms_eps);
    if (!(c->rope_base > 1.0f) || !isfinite(c->rope_base))
        return lt_error(LT_EFORMAT, "%s: rope_base %g is not a number above 1", what,
                        (double)c->rope_base);
    return LT_OK;
}

float *lt__norm_copy(float *dst, const void *src, lt_dtype dtype, int64_t n) {
    lt_row_to_f32(dtype, src, dst, n);
    return dst;
}

void lt__model_priv_free(lt__model_priv *p) {
    if (!p) return;
    lt_gguf_close(p->gguf);
    if (p->map) munmap(p->map, p->map_bytes);
    free(p->norms);
    if (p->resident) munmap(p->resident, p->resident_bytes);
    free(p);
}

/* ---- GGUF Llama ------------------------------------------------------------ */

static int meta_i64(const lt_gguf *g, const char *key, int64_t def, bool required, int64_t *out) {
    int st = lt_gguf_get_i64(g, key, out);
    if (st == LT_ENOTFOUND && !required) {
        *out = def;
        return LT_OK;
    }
    if (st == LT_ENOTFOUND)
        return lt_error(LT_EFORMAT, "%s: missing metadata key '%s'", lt__gguf_path(g), key);
    return st;
}

static int meta_f32(const lt_gguf *g, const char *key, float def, float *out) {
    int st = lt_gguf_get_f32(g, key, out);
    if (st == LT_ENOTFOUND) {
        *out = def;
        return LT_OK;
    }
    return st;
}

/* The tensor `name` with ne = {ne0, ne1}: a 1-D tensor when ne1 == 0. */
static int bind(const lt_gguf *g, const char *name, int64_t ne0, int64_t ne1,
                const lt_gguf_tensor **out) {
    const char *path = lt__gguf_path(g);
    const lt_gguf_tensor *t = lt_gguf_find_tensor(g, name);
    *out = t;
    if (!t) return lt_error(LT_EFORMAT, "%s: missing tensor '%s'", path, name);
    bool ok = t->ne[0] == ne0 && t->ne[1] == (ne1 ? ne1 : 1) && t->ne[2] == 1 && t->ne[3] == 1;
    if (!ok)
        return lt_error(LT_EFORMAT, "%s: tensor '%s' has shape {%lld, %lld, %lld, %lld}, "
                        "expected {%lld, %lld}", path, name, (long long)t->ne[0],
                        (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                        (long long)ne0, (long long)(ne1 ? ne1 : 1));
    return LT_OK;
}

static void as_tensor(const lt_gguf_tensor *t, lt_tensor *out) {
    lt_tensor_init(out, t->dtype, t->ne[0], t->ne[1], 1, 1, (void *)t->data);
}

/* A projection: shape checked; its own dtype (a mix such as q4_k_m holds
 * several, each kernel call takes its weight's). */
static int bind_proj(lt_model *m, const char *name, int64_t ne0, int64_t ne1, lt_tensor *out) {
    const lt_gguf *g = ((lt__model_priv *)m->priv)->gguf;
    const lt_gguf_tensor *t;
    int st = bind(g, name, ne0, ne1, &t);
    if (st) return st;
    as_tensor(t, out);
    return LT_OK;
}

static int bind_norm(lt_model *m, const char *name, float **next, lt_tensor *out) {
    lt__model_priv *p = m->priv;
    const lt_gguf_tensor *t;
    int st = bind(p->gguf, name, m->cfg.dim, 0, &t);
    if (st) return st;
    lt_tensor_init(out, LT_F32, m->cfg.dim, 1, 1, 1, lt__norm_copy(*next, t->data, t->dtype,
                                                                   m->cfg.dim));
    *next += m->cfg.dim;
    return LT_OK;
}

/* "<arch>.<suffix>": the arch's metadata key. */
static const char *akey(char *buf, size_t n, lt_arch a, const char *suffix) {
    snprintf(buf, n, "%s.%s", lt_arch_name(a), suffix);
    return buf;
}

/* A key that must equal head_dim when present (llama.cpp's llama and qwen2
 * graphs assert it). */
static int meta_head_dim(const lt_gguf *g, lt_arch a, const char *suffix, int64_t hd,
                         const char *why) {
    char key[96];
    int64_t v;
    int st = meta_i64(g, akey(key, sizeof key, a, suffix), hd, false, &v);
    if (st) return st;
    if (v != hd)
        return lt_error(LT_EUNSUPPORTED, "%s: %s is %lld but head_dim (embedding_length / "
                        "head_count) is %lld: %s", lt__gguf_path(g), key, (long long)v,
                        (long long)hd, why);
    return LT_OK;
}

static int gguf_config(const lt_gguf *g, lt_llama_config *c) {
    const char *path = lt__gguf_path(g);
    const char *arch;
    size_t len;
    int st = lt_gguf_get_str(g, "general.architecture", &arch, &len);
    if (st == LT_ENOTFOUND)
        return lt_error(LT_EFORMAT, "%s: missing metadata key 'general.architecture'", path);
    if (st) return st;
    if (lt_arch_parse(arch, len, &c->arch))
        return lt_error(LT_EUNSUPPORTED, "%s: general.architecture is '%.*s' (looptune runs "
                        "llama and qwen2)", path, (int)(len > 64 ? 64 : len), arch);
    const lt_arch a = c->arch;
    char k[8][96];
    if ((st = meta_i64(g, akey(k[0], 96, a, "embedding_length"), 0, true, &c->dim)) ||
        (st = meta_i64(g, akey(k[1], 96, a, "feed_forward_length"), 0, true, &c->hidden_dim)) ||
        (st = meta_i64(g, akey(k[2], 96, a, "block_count"), 0, true, &c->n_layers)) ||
        (st = meta_i64(g, akey(k[3], 96, a, "attention.head_count"), 0, true, &c->n_heads)) ||
        (st = meta_i64(g, akey(k[4], 96, a, "attention.head_count_kv"), c->n_heads, false,
                       &c->n_kv_heads)) ||
        (st = meta_i64(g, akey(k[5], 96, a, "context_length"), 0, true, &c->seq_len)) ||
        (st = meta_f32(g, akey(k[6], 96, a, "attention.layer_norm_rms_epsilon"),
                       GGUF_DEFAULT_RMS_EPS, &c->rms_eps)) ||
        (st = meta_f32(g, akey(k[7], 96, a, "rope.freq_base"), GGUF_DEFAULT_ROPE_BASE,
                       &c->rope_base)))
        return st;
    /* vocab_size comes from token_embd; a provisional value passes the check */
    const lt_gguf_tensor *emb = lt_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return lt_error(LT_EFORMAT, "%s: missing tensor 'token_embd.weight'", path);
    c->vocab_size = emb->ne[1];
    if ((st = lt__llama_config_check(c, path))) return st;
    const int64_t hd = c->dim / c->n_heads;
    if ((st = meta_head_dim(g, a, "rope.dimension_count", hd,
                            "partial rotary embeddings are not supported (llama.cpp's llama and "
                            "qwen2 graphs rotate whole heads)")) ||
        (st = meta_head_dim(g, a, "attention.key_length", hd,
                            "heads of another width are not supported")) ||
        (st = meta_head_dim(g, a, "attention.value_length", hd,
                            "heads of another width are not supported")))
        return st;
    int64_t nv;
    if ((st = meta_i64(g, akey(k[0], 96, a, "vocab_size"), c->vocab_size, false, &nv))) return st;
    if (nv != c->vocab_size)
        return lt_error(LT_EFORMAT, "%s: %s %lld disagrees with token_embd.weight (%lld rows)",
                        path, k[0], (long long)nv, (long long)c->vocab_size);
    return LT_OK;
}

/* An optional 1-D f32 copy of tensor `name` with n elements (any float
 * dtype in the file) at *next: out's data stays NULL when the file has none. */
static int bind_vec(lt_model *m, const char *name, int64_t n, float **next, lt_tensor *out) {
    lt__model_priv *p = m->priv;
    const lt_gguf_tensor *t = lt_gguf_find_tensor(p->gguf, name);
    lt_tensor_init(out, LT_F32, n, 1, 1, 1, NULL);
    if (!t) return LT_OK;
    int st = bind(p->gguf, name, n, 0, &t);
    if (st) return st;
    if (lt_dtype_block(t->dtype) != 1)
        return lt_error(LT_EUNSUPPORTED, "%s: tensor '%s' is %s; a vector must be f32, f16 or "
                        "bf16", lt__gguf_path(p->gguf), name, lt_dtype_name(t->dtype));
    out->data = lt__norm_copy(*next, t->data, t->dtype, n);
    *next += n;
    return LT_OK;
}

/* rope_freqs.weight divides each pair's angle: every factor must be a
 * positive finite number. */
static int check_rope_freqs(const lt_model *m) {
    const float *f = m->rope_freqs.data;
    if (!f) return LT_OK;
    for (int64_t i = 0; i < m->rope_freqs.ne[0]; i++)
        if (!(f[i] > 0.0f) || !isfinite(f[i]))
            return lt_error(LT_EFORMAT, "%s: tensor 'rope_freqs.weight' element %lld is %g "
                            "(factors divide rope frequencies: positive and finite)",
                            lt__gguf_path(((lt__model_priv *)m->priv)->gguf), (long long)i,
                            (double)f[i]);
    return LT_OK;
}

/* Every tensor of the file must be one the model uses: llama.cpp refuses a
 * file with others too, and a tensor left out (a bias, a fused qkv) would
 * change what the model computes. `used` counts those bound. */
static int check_no_other_tensors(const lt_gguf *g, lt_arch a, const bool *used) {
    for (int64_t i = 0; i < lt_gguf_n_tensors(g); i++)
        if (!used[i])
            return lt_error(LT_EUNSUPPORTED, "%s: tensor '%s' is not one a %s model uses",
                            lt__gguf_path(g), lt_gguf_tensor_at(g, i)->name, lt_arch_name(a));
    return LT_OK;
}

static void mark_used(const lt_gguf *g, const char *name, bool *used) {
    const lt_gguf_tensor *t = lt_gguf_find_tensor(g, name);
    if (t) used[t - lt_gguf_tensor_at(g, 0)] = true;
}

int lt__gguf_model_load(lt_model *m, const char *path) {
    lt__model_priv *p = m->priv;
    int st = lt_gguf_open(&p->gguf, path);
    if (st) return st;
    const lt_gguf *g = p->gguf;
    lt_llama_config *c = &m->cfg;
    if ((st = gguf_config(g, c))) return st;
    int64_t dim = c->dim, hid = c->hidden_dim, L = c->n_layers;
    int64_t q_dim = dim, kv_dim = dim / c->n_heads * c->n_kv_heads, hd = dim / c->n_heads;

    const lt_gguf_tensor *t;
    if ((st = bind(g, "token_embd.weight", dim, c->vocab_size, &t))) return st;
    as_tensor(t, &m->tok_embd);
    if (lt_gguf_find_tensor(g, "output.weight")) {
        if ((st = bind(g, "output.weight", dim, c->vocab_size, &t))) return st;
        as_tensor(t, &m->output);
    } else {
        m->output = m->tok_embd; /* tied classifier */
    }

    m->layers = calloc((size_t)L, sizeof *m->layers);
    /* f32 copies: norms, biases and the rope factors */
    const size_t n_f32 = (size_t)((2 * L + 1) * dim + L * (q_dim + 2 * kv_dim) + hd / 2);
    p->norms = malloc(n_f32 * sizeof(float));
    bool *used = calloc((size_t)lt_gguf_n_tensors(g) + 1, sizeof *used);
    if (!m->layers || !p->norms || !used) {
        free(used);
        return lt_error(LT_ENOMEM, "%s: out of memory", path);
    }
    float *next = p->norms;
    st = bind_norm(m, "output_norm.weight", &next, &m->output_norm);
    /* llama.cpp reads rope_freqs.weight in llama files only: in a qwen2 file
     * it is a tensor the model does not use (refused below) */
    const bool has_rope_freqs = c->arch == LT_ARCH_LLAMA;
    if (!st && has_rope_freqs) st = bind_vec(m, "rope_freqs.weight", hd / 2, &next, &m->rope_freqs);
    else lt_tensor_init(&m->rope_freqs, LT_F32, hd / 2, 1, 1, 1, NULL);
    if (!st) st = check_rope_freqs(m);
    char name[64];
    snprintf(name, sizeof name, "blk.0.attn_q.weight");
    if (!st && !(t = lt_gguf_find_tensor(g, name)))
        st = lt_error(LT_EFORMAT, "%s: missing tensor '%s'", path, name);
    if (!st) m->wtype = t->dtype;
    const char *const top[] = {"token_embd.weight", "output.weight", "output_norm.weight",
                               has_rope_freqs ? "rope_freqs.weight" : NULL};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (top[i]) mark_used(g, top[i], used);
    for (int64_t l = 0; l < L && !st; l++) {
        lt_llama_layer *y = &m->layers[l];
        const struct {
            const char *suffix;
            int64_t ne0, ne1;
            lt_tensor *out;
        } proj[] = {
            {"attn_q", dim, q_dim, &y->wq},        {"attn_k", dim, kv_dim, &y->wk},
            {"attn_v", dim, kv_dim, &y->wv},       {"attn_output", q_dim, dim, &y->wo},
            {"ffn_gate", dim, hid, &y->w_gate},    {"ffn_down", hid, dim, &y->w_down},
            {"ffn_up", dim, hid, &y->w_up},
        };
        const struct {
            const char *suffix;
            int64_t n;
            lt_tensor *out;
        } bias[] = {{"attn_q", q_dim, &y->bq}, {"attn_k", kv_dim, &y->bk},
                    {"attn_v", kv_dim, &y->bv}};
        snprintf(name, sizeof name, "blk.%lld.attn_norm.weight", (long long)l);
        mark_used(g, name, used);
        if ((st = bind_norm(m, name, &next, &y->attn_norm))) break;
        snprintf(name, sizeof name, "blk.%lld.ffn_norm.weight", (long long)l);
        mark_used(g, name, used);
        if ((st = bind_norm(m, name, &next, &y->ffn_norm))) break;
        for (size_t k = 0; k < sizeof proj / sizeof proj[0] && !st; k++) {
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, proj[k].suffix);
            mark_used(g, name, used);
            st = bind_proj(m, name, proj[k].ne0, proj[k].ne1, proj[k].out);
        }
        for (size_t k = 0; k < sizeof bias / sizeof bias[0] && !st; k++) {
            snprintf(name, sizeof name, "blk.%lld.%s.bias", (long long)l, bias[k].suffix);
            mark_used(g, name, used);
            st = bind_vec(m, name, bias[k].n, &next, bias[k].out);
        }
    }
    if (!st) st = check_no_other_tensors(g, c->arch, used);
    free(used);
    if (st) return st;
    snprintf(m->format, sizeof m->format, "gguf");
    return LT_OK;
}

/* ---- open / close ------------------------------------------------------------ */

static int read_magic(const char *path, char magic[4]) {
    FILE *f = fopen(path, "rb");
    if (!f) return lt_error(LT_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t n = fread(magic, 1, 4, f);
    fclose(f);
    if (n < 4) memset(magic + n, 0, 4 - n);
    return LT_OK;
}

/* The vocabulary: a llama2.c tokenizer.bin when given, else the GGUF's own
 * when it has one, else none. Its size must match the model's. */
static int attach_vocab(lt_model *m, const char *path, const char *tokenizer_path) {
    lt__model_priv *p = m->priv;
    int st;
    if (tokenizer_path) {
        st = lt_vocab_load_llama2c(&m->vocab, tokenizer_path, m->cfg.vocab_size);
    } else if (p->gguf) {
        lt_gguf_type type;
        int64_t n;
        const void *data;
        st = lt_gguf_get_arr(p->gguf, "tokenizer.ggml.tokens", &type, &n, &data);
        if (st == LT_ENOTFOUND) return LT_OK;
        if (st == LT_OK) st = lt_vocab_load_gguf(&m->vocab, p->gguf);
    } else {
        return LT_OK;
    }
    if (st) return st;
    if (lt_vocab_size(m->vocab) != m->cfg.vocab_size)
        return lt_error(LT_EFORMAT, "%s: tokenizer has %lld tokens but the model's vocabulary "
                        "is %lld", tokenizer_path ? tokenizer_path : path,
                        (long long)lt_vocab_size(m->vocab), (long long)m->cfg.vocab_size);
    return LT_OK;
}

int lt_model_open(lt_model **out, const char *path, const char *tokenizer_path) {
    if (!out || !path) return lt_error(LT_EINVAL, "lt_model_open: NULL argument");
    *out = NULL;
    lt_model *m = calloc(1, sizeof *m);
    lt__model_priv *p = calloc(1, sizeof *p);
    if (!m || !p) {
        free(m);
        free(p);
        return lt_error(LT_ENOMEM, "%s: out of memory", path);
    }
    m->priv = p;
    char magic[4];
    int st = read_magic(path, magic);
    if (st == LT_OK) {
        if (memcmp(magic, "GGUF", 4) == 0) st = lt__gguf_model_load(m, path);
        else st = lt__llama2c_load(m, path);
    }
    if (st == LT_OK) st = attach_vocab(m, path, tokenizer_path);
    if (st) {
        lt_model_close(m);
        return st;
    }
    *out = m;
    return LT_OK;
}

void lt_model_close(lt_model *m) {
    if (!m) return;
    lt_vocab_free(m->vocab);
    free(m->layers);
    lt__model_priv_free(m->priv);
    free(m);
}

size_t lt_model_weight_bytes_per_token(const lt_model *m) {
    size_t b = 0;
    for (int64_t l = 0; l < m->cfg.n_layers; l++) {
        const lt_llama_layer *y = &m->layers[l];
        const lt_tensor *t[] = {&y->attn_norm, &y->wq, &y->wk,     &y->wv,    &y->wo,
                                &y->ffn_norm,  &y->w_gate, &y->w_down, &y->w_up};
        for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) b += lt_tensor_nbytes(t[k]);
        const lt_tensor *bias[] = {&y->bq, &y->bk, &y->bv};
        for (size_t k = 0; k < 3; k++) b += bias[k]->data ? lt_tensor_nbytes(bias[k]) : 0;
    }
    b += m->rope_freqs.data ? lt_tensor_nbytes(&m->rope_freqs) : 0;
    b += lt_tensor_nbytes(&m->output_norm) + lt_tensor_nbytes(&m->output);
    b += lt_dtype_row_bytes(m->tok_embd.dtype, m->cfg.dim); /* one embedding row */
    return b;
}

const char *lt_model_chat_template(const lt_model *m, size_t *len) {
    const lt__model_priv *p = m->priv;
    const char *s;
    if (!p || !p->gguf || lt_gguf_get_str(p->gguf, "tokenizer.chat_template", &s, len)) return NULL;
    return s;
}
