/* Random-weight model generator (llama and qwen2): named presets with
 * llama2.c's TinyStories shapes, a 1B and the shapes of SmolLM2, Qwen2 and
 * Llama 3.2, weights drawn from a seeded counter-based generator so any row
 * is reproducible on its own, streamed to a GGUF file that llama.cpp loads
 * (qwen2 with q, k, v biases; untied or tied classifier; Llama 3's
 * rope_freqs.weight from its rope scaling). */
#include "model/model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RMS_EPS 1e-5f
#define ROPE_BASE 10000.0f
#define NORM_STD 0.05f /* norm weights: 1 +- a little */
#define BOS_ID 1
#define EOS_ID 2
#define UNK_ID 0
#define BIAS_STD 0.5f /* q, k, v biases: large enough to move every logit */
#define LT_MODELGEN_MAX_HEAD_DIM 512

typedef struct {
    const char *name;
    int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    lt_arch arch;
    float rope_base, rms_eps;
    bool tied;
    lt_rope_scaling scaling;
} preset;

/* The TinyStories shapes of llama2.c, a 1B, and the published configs
 * (config.json) of SmolLM2-135M, Qwen2.5-0.5B and Llama-3.2-1B: widths,
 * heads, vocabulary, context, rope theta, epsilon, tied embeddings and
 * Llama 3.2's rope_scaling (factor 32, low 1, high 4, original 8192). */
static const preset presets[] = {
    {"stories260K", 64, 172, 5, 8, 4, 512, 512, LT_ARCH_LLAMA, ROPE_BASE, RMS_EPS, false, {0, 0, 0, 0}},
    {"stories15M", 288, 768, 6, 6, 6, 32000, 256, LT_ARCH_LLAMA, ROPE_BASE, RMS_EPS, false, {0, 0, 0, 0}},
    {"stories110M", 768, 2048, 12, 12, 12, 32000, 1024, LT_ARCH_LLAMA, ROPE_BASE, RMS_EPS, false,
     {0, 0, 0, 0}},
    {"1B", 2048, 5632, 16, 32, 8, 32000, 2048, LT_ARCH_LLAMA, ROPE_BASE, RMS_EPS, false, {0, 0, 0, 0}},
    {"smollm2-135M", 576, 1536, 30, 9, 3, 49152, 8192, LT_ARCH_LLAMA, 100000.0f, 1e-5f, true,
     {0, 0, 0, 0}},
    {"qwen2-0.5B", 896, 4864, 24, 14, 2, 151936, 32768, LT_ARCH_QWEN2, 1000000.0f, 1e-6f, true,
     {0, 0, 0, 0}},
    {"llama3.2-1B", 2048, 8192, 16, 32, 8, 128256, 131072, LT_ARCH_LLAMA, 500000.0f, 1e-5f, true,
     {32.0f, 1.0f, 4.0f, 8192}},
};

int lt_modelgen_preset_opts(const char *name, lt_modelgen_opts *o) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const preset *p = &presets[i];
        if (strcmp(name, p->name) != 0) continue;
        o->cfg = (lt_llama_config){.dim = p->dim, .hidden_dim = p->hidden_dim,
                                   .n_layers = p->n_layers, .n_heads = p->n_heads,
                                   .n_kv_heads = p->n_kv_heads, .vocab_size = p->vocab_size,
                                   .seq_len = p->seq_len, .rms_eps = p->rms_eps,
                                   .rope_base = p->rope_base, .arch = p->arch};
        o->tied = p->tied;
        o->rope_scaling = p->scaling;
        return LT_OK;
    }
    return lt_error(LT_EINVAL, "unknown model preset '%s' (expected stories260K, stories15M, "
                    "stories110M, 1B, smollm2-135M, qwen2-0.5B or llama3.2-1B)", name);
}

int lt_modelgen_preset(const char *name, lt_llama_config *cfg) {
    lt_modelgen_opts o = {0};
    int st = lt_modelgen_preset_opts(name, &o);
    if (st == LT_OK) *cfg = o.cfg;
    return st;
}

/* ---- weights ---------------------------------------------------------------- */

#define GOLDEN 0x9e3779b97f4a7c15ull

/* splitmix64: a Weyl sequence through a strong 64-bit finaliser. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += GOLDEN);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The same finaliser as a hash, so row r of tensor t has its own stream. */
static uint64_t mix64(uint64_t z) { return splitmix64(&z); }

/* One tensor's generator: values uniform in [center - half, center + half]. */
typedef struct {
    uint64_t seed;
    float center, half;
    lt_dtype dtype;
    int64_t ne0;
    float *row; /* shared f32 scratch of the longest row */
} gen;

static int gen_fill(void *ctx, int64_t row0, int64_t nrows, void *dst) {
    const gen *g = ctx;
    size_t row_bytes = lt_dtype_row_bytes(g->dtype, g->ne0);
    for (int64_t r = 0; r < nrows; r++) {
        uint64_t state = mix64(g->seed ^ mix64((uint64_t)(row0 + r)));
        for (int64_t i = 0; i < g->ne0; i++) {
            float u = (float)(splitmix64(&state) >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
            g->row[i] = g->center + g->half * (2.0f * u - 1.0f);
        }
        lt_row_from_f32(g->dtype, g->row, (char *)dst + (size_t)r * row_bytes, g->ne0);
    }
    return LT_OK;
}

/* ---- metadata ------------------------------------------------------------------ */


static int write_meta(lt_gguf_writer *w, const lt_modelgen_opts *o, const lt__vocab_arrays *v) {
    const lt_llama_config *c = &o->cfg;
    char name[96];
    const lt_quant_target nt = {.type = o->dtype, .mix = o->mix};
    snprintf(name, sizeof name, "looptune random %s d%lld l%lld %s seed %llu",
             lt_arch_name(c->arch), (long long)c->dim, (long long)c->n_layers,
             lt_quant_target_name(&nt),
             (unsigned long long)o->seed);
    const lt_arch a = c->arch;
    char k[96];
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", lt_arch_name(a), suffix), k)
    int st = LT_OK;
    if (!st) st = lt_gguf_writer_str(w, "general.architecture", lt_arch_name(a));
    if (!st) st = lt_gguf_writer_str(w, "general.name", name);
    const lt_quant_target tg = {.type = o->dtype, .mix = o->mix};
    if (!st) st = lt_gguf_writer_u32(w, "general.file_type", lt_quant_target_file_type(&tg));
    if (!st) st = lt_gguf_writer_u32(w, KEY("vocab_size"), (uint32_t)c->vocab_size);
    if (!st) st = lt_gguf_writer_u32(w, KEY("context_length"), (uint32_t)c->seq_len);
    if (!st) st = lt_gguf_writer_u32(w, KEY("embedding_length"), (uint32_t)c->dim);
    if (!st) st = lt_gguf_writer_u32(w, KEY("block_count"), (uint32_t)c->n_layers);
    if (!st) st = lt_gguf_writer_u32(w, KEY("feed_forward_length"), (uint32_t)c->hidden_dim);
    if (!st)
        st = lt_gguf_writer_u32(w, KEY("rope.dimension_count"), (uint32_t)(c->dim / c->n_heads));
    if (!st) st = lt_gguf_writer_u32(w, KEY("attention.head_count"), (uint32_t)c->n_heads);
    if (!st) st = lt_gguf_writer_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    if (!st) st = lt_gguf_writer_f32(w, KEY("attention.layer_norm_rms_epsilon"), c->rms_eps);
    if (!st) st = lt_gguf_writer_f32(w, KEY("rope.freq_base"), c->rope_base);
#undef KEY
    if (!st) st = lt_gguf_writer_str(w, "tokenizer.ggml.model", "llama");
    if (!st)
        st = lt_gguf_writer_arr_str(w, "tokenizer.ggml.tokens", v->n,
                                    (const char *const *)v->pieces, v->lens);
    if (!st) st = lt_gguf_writer_arr_f32(w, "tokenizer.ggml.scores", v->n, v->scores);
    if (!st) st = lt_gguf_writer_arr_i32(w, "tokenizer.ggml.token_type", v->n, v->types);
    if (!st) st = lt_gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", BOS_ID);
    if (!st) st = lt_gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", EOS_ID);
    if (!st) st = lt_gguf_writer_u32(w, "tokenizer.ggml.unknown_token_id", UNK_ID);
    return st;
}

/* ---- the model ---------------------------------------------------------------------- */

static int check_opts(const lt_modelgen_opts *o) {
    const lt_llama_config *c = &o->cfg;
    int st = lt__llama_config_check(c, "modelgen");
    if (st) return st;
    if ((unsigned)o->dtype >= LT_DTYPE_COUNT || o->mix < 0 || o->mix > LT_QUANT_N_MIXES)
        return lt_error(LT_EINVAL, "modelgen: bad dtype %d or mix %d", (int)o->dtype, o->mix);
    int64_t blk = lt_dtype_block(o->dtype);
    /* a mix falls back per tensor as llama.cpp's does; one type is asked for as it is */
    if (!o->mix && (c->dim % blk != 0 || c->hidden_dim % blk != 0))
        return lt_error(LT_EINVAL, "modelgen: %s needs rows that are multiples of %lld, but "
                        "%s is %lld", lt_dtype_name(o->dtype), (long long)blk,
                        c->dim % blk ? "dim" : "hidden_dim",
                        (long long)(c->dim % blk ? c->dim : c->hidden_dim));
    if (c->vocab_size > INT32_MAX || c->seq_len > UINT32_MAX)
        return lt_error(LT_EINVAL, "modelgen: sizes do not fit GGUF's u32 metadata");
    if (o->rope_scaling.factor != 0.0f && c->arch != LT_ARCH_LLAMA)
        return lt_error(LT_EINVAL, "modelgen: rope scaling writes rope_freqs.weight, which "
                        "llama.cpp reads in llama models only, not %s", lt_arch_name(c->arch));
    if (o->rope_scaling.factor != 0.0f) {
        float f[LT_MODELGEN_MAX_HEAD_DIM / 2];
        if (c->dim / c->n_heads > LT_MODELGEN_MAX_HEAD_DIM)
            return lt_error(LT_EINVAL, "modelgen: head_dim %lld above %d",
                            (long long)(c->dim / c->n_heads), LT_MODELGEN_MAX_HEAD_DIM);
        return lt_rope_scaling_factors(&o->rope_scaling, c->rope_base, c->dim / c->n_heads, f);
    }
    return LT_OK;
}

/* The tensors being declared: one generator each, all sharing a scratch row;
 * a mix's choice of type per weight. */
typedef struct {
    lt_gguf_writer *w;
    gen *gens;
    int64_t k;
    float *row;
    uint64_t seed;
    lt_quant_target mix; /* .mix 0: every weight in the type asked for */
    lt__mix_state ms;
} plan;

/* Declares a tensor of shape {e0, e1} (1-D when nd == 1) with values uniform
 * around center, of the given standard deviation. */
static int declare(plan *p, const char *name, lt_dtype dt, int nd, int64_t e0, int64_t e1,
                   float center, float std) {
    if (p->mix.mix) dt = lt__quant_tensor_type(&p->mix, name, nd, e0, dt, &p->ms);
    gen *g = &p->gens[p->k];
    *g = (gen){.seed = mix64(p->seed ^ mix64((uint64_t)p->k + 1)), .center = center,
               .half = std * sqrtf(3.0f), .dtype = dt, .ne0 = e0, .row = p->row};
    p->k++;
    return lt__gguf_writer_tensor_fill(p->w, name, dt, nd, (const int64_t[]){e0, e1}, gen_fill, g);
}

int lt_modelgen_write(const lt_modelgen_opts *opts, const char *path) {
    int st = check_opts(opts);
    if (st) return st;
    const lt_llama_config *c = &opts->cfg;
    lt__vocab_arrays voc = {0};
    st = opts->vocab_path ? lt__vocab_llama2c(&voc, opts->vocab_path, c->vocab_size)
                          : lt__vocab_synth(&voc, c->vocab_size);
    if (st) return st;

    int64_t dim = c->dim, hid = c->hidden_dim, L = c->n_layers, V = c->vocab_size;
    int64_t kv_dim = dim / c->n_heads * c->n_kv_heads;
    /* a tied classifier is the embedding: llama.cpp then gives token_embd
     * the output's type in a mix */
    plan p = {.seed = opts->seed,
              .mix = {.type = opts->dtype, .mix = opts->mix},
              .ms = {.n_attn_v = L, .n_ffn_down = L, .has_output = !opts->tied}};
    p.gens = calloc((size_t)(3 + 12 * L), sizeof *p.gens);
    p.row = malloc((size_t)(dim > hid ? dim : hid) * sizeof *p.row);
    if (!p.gens || !p.row) st = lt_error(LT_ENOMEM, "%s: out of memory", path);
    if (!st) st = lt_gguf_writer_open(&p.w, path);
    if (!st) st = write_meta(p.w, opts, &voc);

    /* llama.cpp's tensor order. Projections: std 1/sqrt(fan-in) keeps every
     * activation near unit scale; embeddings unit std; norms near 1. */
    lt_dtype dt = opts->dtype;
    float s_dim = 1.0f / sqrtf((float)dim), s_hid = 1.0f / sqrtf((float)hid);
    if (!st) st = declare(&p, "token_embd.weight", dt, 2, dim, V, 0.0f, 1.0f);
    if (!st) st = declare(&p, "output_norm.weight", LT_F32, 1, dim, 1, 1.0f, NORM_STD);
    if (!st && !opts->tied) st = declare(&p, "output.weight", dt, 2, dim, V, 0.0f, s_dim);
    const int64_t hd = dim / c->n_heads;
    float factors[LT_MODELGEN_MAX_HEAD_DIM / 2];
    if (!st && opts->rope_scaling.factor != 0.0f) {
        st = lt_rope_scaling_factors(&opts->rope_scaling, c->rope_base, hd, factors);
        if (!st)
            st = lt_gguf_writer_tensor(p.w, "rope_freqs.weight", LT_F32, 1,
                                       (const int64_t[]){hd / 2, 1}, factors);
    }
    const bool biases = c->arch == LT_ARCH_QWEN2;
    for (int64_t l = 0; l < L && !st; l++) {
        const struct {
            const char *suffix;
            lt_dtype dt;
            int nd;
            int64_t e0, e1;
            float center, std;
        } t[] = {
            {"attn_norm", LT_F32, 1, dim, 1, 1.0f, NORM_STD},
            {"attn_q", dt, 2, dim, dim, 0.0f, s_dim},
            {"attn_k", dt, 2, dim, kv_dim, 0.0f, s_dim},
            {"attn_v", dt, 2, dim, kv_dim, 0.0f, s_dim},
            {"attn_output", dt, 2, dim, dim, 0.0f, s_dim},
            {"ffn_norm", LT_F32, 1, dim, 1, 1.0f, NORM_STD},
            {"ffn_gate", dt, 2, dim, hid, 0.0f, s_dim},
            {"ffn_down", dt, 2, hid, dim, 0.0f, s_hid},
            {"ffn_up", dt, 2, dim, hid, 0.0f, s_dim},
        };
        for (size_t i = 0; i < sizeof t / sizeof t[0] && !st; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, t[i].suffix);
            st = declare(&p, name, t[i].dt, t[i].nd, t[i].e0, t[i].e1, t[i].center, t[i].std);
        }
        for (int i = 1; i <= 3 && biases && !st; i++) { /* attn_q, attn_k, attn_v */
            char name[64];
            snprintf(name, sizeof name, "blk.%lld.%s.bias", (long long)l, t[i].suffix);
            st = declare(&p, name, LT_F32, 1, t[i].e1, 1, 0.0f, BIAS_STD);
        }
    }
    /* close streams every tensor to the file through gen_fill */
    if (p.w) {
        if (st) lt_gguf_writer_abort(p.w);
        else st = lt_gguf_writer_close(p.w);
    }
    free(p.gens);
    free(p.row);
    lt__vocab_arrays_free(&voc);
    return st;
}
