/* Quantising a GGUF model file (looptune quantize): every weight matrix
 * rewritten in a type, or in one of llama.cpp's mixes (q4_k_m, q5_k_m,
 * q3_k_m) with llama.cpp's choice of type per tensor; norms and other 1-d
 * tensors copied; the metadata copied, with general.file_type set as
 * llama.cpp sets it. Rows stream from the input's mapping to the output a
 * chunk at a time, so a model never sits in memory twice. */
#include "model/model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---- targets: a type alone, or a mix ------------------------------------------ */

static const struct {
    const char *name;
    lt_dtype base;      /* the type of the tensors the mix does not single out */
    uint32_t file_type; /* llama.cpp's LLAMA_FTYPE_MOSTLY_* */
} mixes[] = {
    {"q3_k_m", LT_Q3_K, 12},
    {"q4_k_m", LT_Q4_K, 15},
    {"q5_k_m", LT_Q5_K, 17},
};
#define N_MIXES ((int)(sizeof mixes / sizeof mixes[0]))
_Static_assert(N_MIXES == LT_QUANT_N_MIXES, "mix table");

uint32_t lt_file_type(lt_dtype t) {
    /* LLAMA_FTYPE: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_BF16, MOSTLY_Q4_0 ...;
     * a K-quant alone is the mix that uses it most (_S) */
    static const uint32_t ft[] = {[LT_F32] = 0,   [LT_F16] = 1,   [LT_BF16] = 32, [LT_Q8_0] = 7,
                                  [LT_Q4_0] = 2,  [LT_Q4_1] = 3,  [LT_Q5_0] = 8,  [LT_Q5_1] = 9,
                                  [LT_Q2_K] = 10, [LT_Q3_K] = 11, [LT_Q4_K] = 14, [LT_Q5_K] = 16,
                                  [LT_Q6_K] = 18};
    _Static_assert(sizeof ft / sizeof ft[0] == LT_DTYPE_COUNT, "file types");
    LT_ASSERT((unsigned)t < LT_DTYPE_COUNT);
    return ft[t];
}

int lt_quant_target_parse(const char *s, lt_quant_target *out) {
    for (int i = 0; i < N_MIXES; i++) {
        if (strcasecmp(s, mixes[i].name) == 0) {
            *out = (lt_quant_target){.type = mixes[i].base, .mix = i + 1};
            return LT_OK;
        }
    }
    lt_dtype t;
    if (lt_dtype_parse(s, &t) != LT_OK)
        return lt_error(LT_EINVAL, "unknown type '%s' (expected f32, f16, bf16, q8_0, q4_0, q4_1, "
                                   "q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, or a mix: q3_k_m, "
                                   "q4_k_m, q5_k_m)", s);
    *out = (lt_quant_target){.type = t, .mix = 0};
    return LT_OK;
}

const char *lt_quant_target_name(const lt_quant_target *t) {
    return t->mix ? mixes[t->mix - 1].name : lt_dtype_name(t->type);
}

uint32_t lt_quant_target_file_type(const lt_quant_target *t) {
    return t->mix ? mixes[t->mix - 1].file_type : lt_file_type(t->type);
}

/* ---- which tensor gets which type ---------------------------------------------- */

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* A weight matrix llama.cpp quantises: 2-d or more, named *weight, no norm. */
static bool quantisable(const char *name, int n_dims) {
    return n_dims >= 2 && ends_with(name, "weight") && !strstr(name, "_norm.weight");
}

/* llama.cpp's layers that get more bits: the first and last eighth and
 * every third one between. */
static bool more_bits(int64_t i, int64_t n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The type llama.cpp's llama_tensor_get_type gives a Llama tensor under the
 * mix (LLAMA_FTYPE_MOSTLY_Q3_K_M / Q4_K_M / Q5_K_M, one expert, no
 * importance matrix). */
static lt_dtype mix_type(int mix, const char *name, int64_t ne0, lt__mix_state *s) {
    const lt_dtype base = mixes[mix - 1].base;
    const bool output = strcmp(name, "output.weight") == 0 ||
                        (!s->has_output && strcmp(name, "token_embd.weight") == 0);
    if (output) return ne0 % LT_QK_K ? LT_Q8_0 : LT_Q6_K;
    if (strstr(name, "attn_v.weight")) {
        const int64_t i = s->i_attn_v++;
        if (base == LT_Q3_K) return i < 2 ? LT_Q5_K : LT_Q4_K;
        return more_bits(i, s->n_attn_v) ? LT_Q6_K : base;
    }
    if (strstr(name, "ffn_down")) {
        const int64_t i = s->i_ffn_down++;
        if (base == LT_Q3_K) return i < s->n_ffn_down / 16 ? LT_Q5_K : LT_Q4_K;
        return more_bits(i, s->n_ffn_down) ? LT_Q6_K : base;
    }
    if (strstr(name, "attn_output.weight") && base == LT_Q3_K) return LT_Q4_K;
    return base;
}

/* llama.cpp's type for a width the chosen type's block does not divide:
 * a type of blocks of 32 close in size (q4_0 stands in for llama.cpp's
 * iq4_nl), else f16. */
static lt_dtype fallback(lt_dtype want, int64_t ne0) {
    if (ne0 % lt_dtype_block(want) == 0) return want;
    lt_dtype alt = LT_F16;
    switch (want) {
    case LT_Q2_K:
    case LT_Q3_K: alt = LT_Q4_0; break;
    case LT_Q4_K: alt = LT_Q5_0; break;
    case LT_Q5_K: alt = LT_Q5_1; break;
    case LT_Q6_K: alt = LT_Q8_0; break;
    default: break;
    }
    return ne0 % lt_dtype_block(alt) == 0 ? alt : LT_F16;
}

lt_dtype lt__quant_tensor_type(const lt_quant_target *tg, const char *name, int n_dims,
                               int64_t ne0, lt_dtype from, lt__mix_state *s) {
    if (!quantisable(name, n_dims)) return from;
    return fallback(tg->mix ? mix_type(tg->mix, name, ne0, s) : tg->type, ne0);
}

/* ---- streaming a tensor's rows ------------------------------------------------------ */

typedef struct {
    const lt_gguf_tensor *src;
    lt_dtype to;
    lt_pool *pool;
    float *f32; /* one row per pool thread */
    const char *path; /* the input, for messages */
    const lt_quantize_opts *opts;
    int64_t index, count; /* the tensor's place in the file, for progress */
} convert_ctx;

#define MAX_THREADS 256

/* One chunk of rows, converted by every pool thread on its share. */
typedef struct {
    const convert_ctx *c;
    int64_t row0, nrows;
    void *dst;
    /* per thread: the first row with a value that is not finite (-1: none),
     * its column and whether it is NaN; the caller reports the first one */
    int64_t bad_row[MAX_THREADS], bad_col[MAX_THREADS];
    bool bad_nan[MAX_THREADS];
} convert_job;

static void convert_share(void *arg, int ith, int nth) {
    convert_job *j = arg;
    const convert_ctx *c = j->c;
    const int64_t ne0 = c->src->ne[0];
    const size_t in_rb = lt_dtype_row_bytes(c->src->dtype, ne0);
    const size_t out_rb = lt_dtype_row_bytes(c->to, ne0);
    const char *in = (const char *)c->src->data + (size_t)j->row0 * in_rb;
    float *row = c->f32 + (size_t)ith * (size_t)ne0;
    j->bad_row[ith] = -1;
    for (int64_t r = j->nrows * ith / nth; r < j->nrows * (ith + 1) / nth; r++) {
        lt_row_to_f32(c->src->dtype, in + (size_t)r * in_rb, row, ne0);
        /* the quantisers' scales and levels are defined for finite values only */
        for (int64_t i = 0; i < ne0 && lt_dtype_is_quant(c->to); i++) {
            if (!isfinite(row[i])) {
                j->bad_row[ith] = j->row0 + r;
                j->bad_col[ith] = i;
                j->bad_nan[ith] = isnan(row[i]);
                return;
            }
        }
        lt_row_from_f32(c->to, row, (char *)j->dst + (size_t)r * out_rb, ne0);
    }
}

static int convert_rows(void *vctx, int64_t row0, int64_t nrows, void *dst) {
    convert_ctx *c = vctx;
    if (c->to == c->src->dtype) {
        const size_t rb = lt_dtype_row_bytes(c->src->dtype, c->src->ne[0]);
        memcpy(dst, (const char *)c->src->data + (size_t)row0 * rb, (size_t)nrows * rb);
    } else {
        static _Thread_local convert_job job; /* large; one conversion at a time per caller */
        job.c = c;
        job.row0 = row0;
        job.nrows = nrows;
        job.dst = dst;
        lt_pool_run(c->pool, convert_share, &job);
        int first = -1;
        for (int t = 0; t < lt_pool_size(c->pool); t++)
            if (job.bad_row[t] >= 0 && (first < 0 || job.bad_row[t] < job.bad_row[first]))
                first = t;
        if (first >= 0)
            return lt_error(LT_EFORMAT, "%s: tensor '%s': row %lld holds %s at column %lld",
                            c->path, c->src->name, (long long)job.bad_row[first],
                            job.bad_nan[first] ? "NaN" : "an infinity",
                            (long long)job.bad_col[first]);
    }
    const int64_t rows = c->src->ne[1] * c->src->ne[2] * c->src->ne[3];
    if (row0 + nrows == rows && c->opts->progress)
        c->opts->progress(c->opts->progress_ctx, c->index, c->count, c->src, c->to);
    return LT_OK;
}

/* ---- the file ------------------------------------------------------------------------ */

static bool is_float(lt_dtype t) { return t == LT_F32 || t == LT_F16 || t == LT_BF16; }

int lt_quantize_file(const char *in, const char *out, const lt_quantize_opts *o) {
    const lt_quant_target *tg = &o->target;
    if ((unsigned)tg->type >= LT_DTYPE_COUNT || tg->mix < 0 || tg->mix > N_MIXES)
        return lt_error(LT_EINVAL, "quantize: bad target");
    /* writing the input would truncate the mapping the rows are read from */
    struct stat si, so;
    if (strcmp(in, out) == 0 || (stat(in, &si) == 0 && stat(out, &so) == 0 &&
                                 si.st_dev == so.st_dev && si.st_ino == so.st_ino))
        return lt_error(LT_EINVAL, "%s: the output must be another file than the input", out);
    lt_gguf *g = NULL;
    int st = lt_gguf_open(&g, in);
    if (st) return st;
    const int64_t n = lt_gguf_n_tensors(g);

    /* the types first, so every problem shows before anything is written */
    lt__mix_state ms = {.has_output = lt_gguf_find_tensor(g, "output.weight") != NULL};
    for (int64_t i = 0; i < n; i++) {
        const char *name = lt_gguf_tensor_at(g, i)->name;
        ms.n_attn_v += strstr(name, "attn_v.weight") != NULL;
        ms.n_ffn_down += strstr(name, "ffn_down") != NULL;
    }
    const size_t nt = n > 0 ? (size_t)n : 1; /* the reader bounds n by the file size */
    lt_dtype *to = calloc(nt, sizeof *to);
    convert_ctx *ctx = calloc(nt, sizeof *ctx);
    int64_t max_ne0 = 1;
    if (!to || !ctx) st = lt_error(LT_ENOMEM, "%s: out of memory", in);
    for (int64_t i = 0; i < n && !st; i++) {
        const lt_gguf_tensor *t = lt_gguf_tensor_at(g, i);
        to[i] = lt__quant_tensor_type(tg, t->name, t->n_dims, t->ne[0], t->dtype, &ms);
        if (to[i] != t->dtype && !is_float(t->dtype) && t->dtype != LT_Q8_0 && !is_float(to[i]))
            st = lt_error(LT_EUNSUPPORTED, "%s: tensor '%s' is %s: looptune quantises "
                          "from f32, f16, bf16 or q8_0 (or dequantises to a float type)", in,
                          t->name, lt_dtype_name(t->dtype));
        if (t->ne[0] > max_ne0) max_ne0 = t->ne[0];
    }
    int nth = o->threads > 0 ? o->threads : lt_cpu()->logical_cpus;
    if (nth < 1) nth = 1;
    if (nth > MAX_THREADS) nth = MAX_THREADS;
    lt_pool *pool = NULL;
    if (!st) st = lt_pool_init(&pool, nth);
    float *row = st ? NULL : malloc((size_t)nth * (size_t)max_ne0 * sizeof *row);
    if (!st && !row) st = lt_error(LT_ENOMEM, "%s: out of memory", in);

    lt_gguf_writer *w = NULL;
    if (!st) st = lt_gguf_writer_open(&w, out);
    for (int64_t i = 0; i < lt_gguf_n_kv(g) && !st; i++) {
        lt_gguf_kv_raw kv;
        st = lt_gguf_kv_raw_at(g, i, &kv);
        /* the writer sets its own alignment; the file type is the target's */
        static const char *const own[] = {"general.alignment", "general.file_type",
                                          "general.quantization_version"};
        bool skip = false;
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
            skip |= kv.key_len == strlen(own[k]) && memcmp(kv.key, own[k], kv.key_len) == 0;
        if (!st && !skip) st = lt_gguf_writer_raw(w, &kv);
    }
    if (!st) st = lt_gguf_writer_u32(w, "general.file_type", lt_quant_target_file_type(tg));
    /* ggml's current block layouts, as llama.cpp's quantiser writes */
    if (!st) st = lt_gguf_writer_u32(w, "general.quantization_version", 2);
    for (int64_t i = 0; i < n && !st; i++) {
        const lt_gguf_tensor *t = lt_gguf_tensor_at(g, i);
        ctx[i] = (convert_ctx){.src = t, .to = to[i], .pool = pool, .f32 = row, .path = in,
                               .opts = o, .index = i, .count = n};
        st = lt__gguf_writer_tensor_fill(w, t->name, to[i], t->n_dims, t->ne, convert_rows,
                                         &ctx[i]);
    }
    if (w) {
        if (st) lt_gguf_writer_abort(w);
        else st = lt_gguf_writer_close(w);
    }
    free(row);
    lt_pool_free(pool);
    free(ctx);
    free(to);
    lt_gguf_close(g);
    return st;
}
