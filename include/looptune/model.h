/* looptune model: GGUF reader/writer, llama2.c checkpoint reader, the Llama
 * weights, tokenizer, sampler, random-weight model generator, and (built on
 * the program layer) the Llama program builder and generation loop. */
#ifndef LOOPTUNE_MODEL_H
#define LOOPTUNE_MODEL_H

#include <stdio.h>

#include "looptune/core.h"
#include "looptune/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GGUF (v2/v3) ---------------------------------------------------------- */

typedef enum {
    LT_GGUF_U8 = 0, LT_GGUF_I8, LT_GGUF_U16, LT_GGUF_I16, LT_GGUF_U32, LT_GGUF_I32,
    LT_GGUF_F32, LT_GGUF_BOOL, LT_GGUF_STRING, LT_GGUF_ARRAY, LT_GGUF_U64,
    LT_GGUF_I64, LT_GGUF_F64, LT_GGUF_TYPE_COUNT
} lt_gguf_type;

/* GGML tensor type numbers for the dtypes looptune reads. */
#define LT_GGML_F32 0
#define LT_GGML_F16 1
#define LT_GGML_Q4_0 2
#define LT_GGML_Q4_1 3
#define LT_GGML_Q5_0 6
#define LT_GGML_Q5_1 7
#define LT_GGML_Q8_0 8
#define LT_GGML_Q2_K 10
#define LT_GGML_Q3_K 11
#define LT_GGML_Q4_K 12
#define LT_GGML_Q5_K 13
#define LT_GGML_Q6_K 14
#define LT_GGML_BF16 30

typedef struct lt_gguf lt_gguf; /* an opened, validated, mmapped GGUF file */

typedef struct {
    const char *name; /* NUL-terminated copy */
    lt_dtype dtype;
    int n_dims;
    int64_t ne[4];
    const void *data; /* inside the mapping, bounds-checked */
    size_t nbytes;
} lt_gguf_tensor;

/* Maps and validates the whole file: magic, version 2 or 3, every key,
 * string and array length, every tensor's type, dims, offset and size
 * against the file. Errors name the file and the offending item. */
int lt_gguf_open(lt_gguf **out, const char *path);
void lt_gguf_close(lt_gguf *g); /* NULL is a no-op; invalidates all pointers */
uint32_t lt_gguf_version(const lt_gguf *g);
/* Metadata lookups. Return LT_ENOTFOUND if the key is absent, LT_EFORMAT if
 * it has another type. Integer getters accept any integer type that fits. */
int lt_gguf_get_i64(const lt_gguf *g, const char *key, int64_t *out);
int lt_gguf_get_f32(const lt_gguf *g, const char *key, float *out);
int lt_gguf_get_bool(const lt_gguf *g, const char *key, bool *out);
/* The string is not NUL-terminated inside the file: *len gives its length. */
int lt_gguf_get_str(const lt_gguf *g, const char *key, const char **s, size_t *len);
/* Arrays: element type and count; lt_gguf_arr_str returns element i. */
int lt_gguf_get_arr(const lt_gguf *g, const char *key, lt_gguf_type *type, int64_t *n,
                    const void **data);
int lt_gguf_arr_str(const lt_gguf *g, const char *key, int64_t i, const char **s, size_t *len);
/* Metadata pair i (0 <= i < lt_gguf_n_kv, file order) as the file encodes
 * it, for copying into another file (lt_gguf_writer_raw): the key (key_len
 * bytes, not NUL-terminated), the type and the value's bytes after the type.
 * Pointers into the mapping, valid until lt_gguf_close. */
typedef struct {
    const char *key;
    size_t key_len;
    lt_gguf_type type;
    const void *raw;
    size_t raw_len;
} lt_gguf_kv_raw;
int64_t lt_gguf_n_kv(const lt_gguf *g);
int lt_gguf_kv_raw_at(const lt_gguf *g, int64_t i, lt_gguf_kv_raw *out); /* LT_ERANGE */
int64_t lt_gguf_n_tensors(const lt_gguf *g);
const lt_gguf_tensor *lt_gguf_tensor_at(const lt_gguf *g, int64_t i);
const lt_gguf_tensor *lt_gguf_find_tensor(const lt_gguf *g, const char *name); /* NULL */

/* Writer: collects metadata and tensors in memory, then lt_gguf_writer_close
 * writes a v3 file (alignment 32) and frees the writer. Data is copied. */
typedef struct lt_gguf_writer lt_gguf_writer;
int lt_gguf_writer_open(lt_gguf_writer **out, const char *path);
int lt_gguf_writer_u32(lt_gguf_writer *w, const char *key, uint32_t v);
int lt_gguf_writer_f32(lt_gguf_writer *w, const char *key, float v);
int lt_gguf_writer_str(lt_gguf_writer *w, const char *key, const char *v);
int lt_gguf_writer_arr_str(lt_gguf_writer *w, const char *key, int64_t n,
                           const char *const *v, const size_t *lens);
int lt_gguf_writer_arr_f32(lt_gguf_writer *w, const char *key, int64_t n, const float *v);
int lt_gguf_writer_arr_i32(lt_gguf_writer *w, const char *key, int64_t n, const int32_t *v);
int lt_gguf_writer_tensor(lt_gguf_writer *w, const char *name, lt_dtype dtype, int n_dims,
                          const int64_t *ne, const void *data);
/* A pair read by lt_gguf_kv_raw_at, copied as it is (the reader validated
 * its encoding). */
int lt_gguf_writer_raw(lt_gguf_writer *w, const lt_gguf_kv_raw *kv);
int lt_gguf_writer_close(lt_gguf_writer *w); /* writes; frees w even on error */
void lt_gguf_writer_abort(lt_gguf_writer *w); /* frees without writing */

/* ---- tokenizer: SentencePiece-style BPE with byte fallback ---------------- */

typedef struct lt_vocab lt_vocab;

/* Pieces use ' ' for SentencePiece's U+2581 internally (as llama2.c's
 * tokenizer.bin does); GGUF readers and writers translate. */
int lt_vocab_load_llama2c(lt_vocab **out, const char *path, int64_t vocab_size);
/* From GGUF metadata: tokenizer.ggml.model llama (SentencePiece) or gpt2
 * (byte-level BPE with tokenizer.ggml.merges and the pre-tokenizer named by
 * tokenizer.ggml.pre), tokens, scores, token_type, the special ids
 * (bos/eos/eot/eom/padding, FIM) and add_bos/add_eos_token. */
int lt_vocab_load_gguf(lt_vocab **out, const lt_gguf *g);
/* From arrays (copied). bos/eos ids must be < n. */
int lt_vocab_from_arrays(lt_vocab **out, int64_t n, const char *const *pieces,
                         const size_t *lens, const float *scores, int32_t bos, int32_t eos);
void lt_vocab_free(lt_vocab *v);
int64_t lt_vocab_size(const lt_vocab *v);
int32_t lt_vocab_bos(const lt_vocab *v);
int32_t lt_vocab_eos(const lt_vocab *v);
/* Whether generating `id` ends the generation, as llama.cpp decides: eos,
 * the file's eot/eom ids, the FIM pad/repo/separator tokens and the tokens
 * whose text is a known end of turn (<|eot_id|>, <|im_end|>, <|end|>,
 * <|endoftext|>, </s>, ...). False for ids outside the vocabulary. */
bool lt_vocab_is_eog(const lt_vocab *v, int32_t id);
/* Piece i as stored (' ' for U+2581), with its length. */
const char *lt_vocab_piece(const lt_vocab *v, int32_t id, size_t *len);
float lt_vocab_score(const lt_vocab *v, int32_t id);
/* What tokenizing with add_special adds: BOS first, EOS last (the file's
 * tokenizer.ggml.add_bos_token / add_eos_token, else llama.cpp's default
 * for the vocabulary: Llama 2 and Llama 3 add BOS, GPT-2 and Qwen2 do not). */
bool lt_vocab_add_bos(const lt_vocab *v);
bool lt_vocab_add_eos(const lt_vocab *v);
/* Encodes text as llama2.c and llama.cpp do. Llama 2 (SentencePiece)
 * vocabularies: optional BOS, a dummy prefix space when text is non-empty,
 * pieces by codepoint, unknown bytes as <0xXX> byte tokens, then greedy
 * best-score pair merges. Byte-level BPE (gpt2) vocabularies: the
 * pre-tokenizer's words, each merged by merge rank. User-defined tokens
 * written in the text are matched first; control tokens are not. ids
 * should hold strlen(text) + 3 entries (LT_ERANGE if they do not suffice). */
int lt_tokenize(const lt_vocab *v, const char *text, bool add_bos, int32_t *ids,
                int64_t max_ids, int64_t *n_ids);
typedef struct {
    bool add_special;   /* BOS / EOS as lt_vocab_add_bos / _add_eos say */
    bool parse_special; /* control tokens written in the text (<|im_start|>,
                           <|eot_id|>, ...) become their ids */
} lt_tokenize_opts;
/* lt_tokenize for len bytes of text (any bytes; invalid UTF-8 reads as
 * U+FFFD in byte-level vocabularies, as in llama.cpp), as llama.cpp's
 * llama_tokenize(add_special, parse_special). 2 * len + 3 ids always
 * suffice (LT_ERANGE if max_ids is less than the count). */
int lt_tokenize_text(const lt_vocab *v, const char *text, size_t len, const lt_tokenize_opts *o,
                     int32_t *ids, int64_t max_ids, int64_t *n_ids);
/* Text of token `id` following token `prev`: SentencePiece pieces with the
 * leading space stripped after BOS and <0xXX> as the raw byte; byte-level
 * pieces through the inverse byte mapping (a token may end inside a UTF-8
 * sequence: a printer joins the bytes of successive tokens), control and
 * user-defined tokens as written. Writes at most n-1 bytes, NUL-terminated;
 * returns the full byte length. */
size_t lt_detokenize(const lt_vocab *v, int32_t prev, int32_t id, char *buf, size_t n);

/* ---- sampler --------------------------------------------------------------- */

typedef struct lt_sampler lt_sampler;
/* The sampler's settings, with llama.cpp's meanings and order: the
 * repetition penalty on the logits of every id among the last
 * repeat_last_n tokens accepted (a positive logit divided by it, a negative
 * one multiplied), then top-k, then top-p (the smallest set of most
 * probable tokens that reaches top_p) and min-p (tokens of probability >=
 * min_p times the largest), both on the distribution at temperature 1, then
 * softmax(logits / temp) over what is left, and a draw. temp 0 = greedy
 * (the argmax of the penalised logits, lowest id on ties). */
typedef struct {
    float temp;            /* >= 0; 0 = greedy */
    float top_p;           /* (0, 1]; 1 = off */
    int32_t top_k;         /* >= 0; 0 = off */
    float min_p;           /* [0, 1]; 0 = off */
    float repeat_penalty;  /* > 0; 1 = off */
    int32_t repeat_last_n; /* >= 0 tokens the penalty looks back; 0 = off */
    uint64_t seed;         /* of the xorshift64* generator */
} lt_sampler_opts;
/* looptune's defaults: temp 0.8, top-p 0.9, top-k off, min-p off, repeat
 * penalty off (1) over the last 64 tokens, seed 0. */
lt_sampler_opts lt_sampler_defaults(void);
/* Validates o (a named error for a value out of range). Free with lt_sampler_free. */
int lt_sampler_init_opts(lt_sampler **out, int64_t vocab_size, const lt_sampler_opts *o);
/* Temperature and top-p alone (no top-k, min-p or penalty). */
int lt_sampler_init(lt_sampler **out, int64_t vocab_size, float temp, float top_p, uint64_t seed);
void lt_sampler_free(lt_sampler *s);
int32_t lt_sampler_sample(lt_sampler *s, float *logits); /* logits are overwritten */
/* The distribution the next draw would use, in place of the logits
 * (0 outside the candidates; greedy: 1 at the argmax). Draws nothing. */
void lt_sampler_probs(lt_sampler *s, float *logits);
/* Token seen (prompt or generated): enters the repetition penalty's window. */
void lt_sampler_accept(lt_sampler *s, int32_t token);
/* Empties the penalty's window. */
void lt_sampler_reset(lt_sampler *s);

/* ---- chat templates ---------------------------------------------------------- */

/* The template styles looptune renders (names as llama.cpp's --chat-template). */
typedef enum {
    LT_CHAT_CHATML = 0, /* <|im_start|>role\n...<|im_end|>\n (Qwen2, SmolLM2, OpenHermes) */
    LT_CHAT_LLAMA2,     /* Meta's Llama 2 chat: <s>[INST] <<SYS>>...<</SYS>> ... [/INST] */
    LT_CHAT_LLAMA3,     /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    LT_CHAT_MISTRAL_V1, /* Mistral's v1:  [INST] ... [/INST] ...</s> */
    LT_CHAT_MISTRAL_V7, /* Mistral's v7: [SYSTEM_PROMPT] ...[/SYSTEM_PROMPT][INST] ...[/INST] */
    LT_CHAT_ZEPHYR,     /* <|user|>\n...</s>\n<|assistant|>\n */
    LT_CHAT_PHI3,       /* <|user|>\n...<|end|>\n<|assistant|>\n */
    LT_CHAT_STYLE_COUNT
} lt_chat_style;

typedef struct {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content;
} lt_chat_msg;

typedef struct {
    lt_chat_style style;
    const char *bos, *eos; /* the texts of the vocabulary's BOS and EOS (the templates'
                              bos_token / eos_token); NULL = "" */
} lt_chat_template;

const char *lt_chat_style_name(lt_chat_style s);
/* "chatml, llama2, ...": every style's name. */
const char *lt_chat_style_list(void);
/* A style by name; LT_ENOTFOUND naming the known ones. */
int lt_chat_style_parse(const char *name, lt_chat_style *out);
/* The style of a Jinja chat template (a GGUF's tokenizer.chat_template) or
 * a style's name, by the substrings llama.cpp looks for; NULL or empty:
 * chatml, llama.cpp's default. LT_ENOTFOUND (naming what llama.cpp would
 * call it, if anything) for a template of no style looptune renders. */
int lt_chat_detect(const char *tmpl, size_t len, lt_chat_style *out);
/* The conversation msgs[0..n) as the style's template renders it, with the
 * assistant's opener if add_generation_prompt: *out malloc'd,
 * NUL-terminated, *len bytes; the caller frees. LT_EINVAL naming why when
 * the template refuses the conversation (roles out of order). */
int lt_chat_format(const lt_chat_template *t, const lt_chat_msg *msgs, int64_t n,
                   bool add_generation_prompt, char **out, size_t *len);
/* What the rendering with add_generation_prompt holds after the content of
 * msgs[reply], an assistant reply: the end of that turn, the messages after
 * it and the opener. A conversation whose earlier turns are in a KV cache
 * (the reply as the model generated it) feeds just this. */
int lt_chat_format_after(const lt_chat_template *t, const lt_chat_msg *msgs, int64_t n,
                         int64_t reply, char **out, size_t *len);

/* ---- Llama model ----------------------------------------------------------- */

/* The decoder architectures looptune runs (GGUF general.architecture), as
 * llama.cpp reads them: llama (Llama 1-3, Mistral, TinyLlama, SmolLM2: NORM
 * rope) and qwen2 (q, k, v biases, NEOX rope). */
typedef enum { LT_ARCH_LLAMA = 0, LT_ARCH_QWEN2, LT_ARCH_COUNT } lt_arch;
const char *lt_arch_name(lt_arch a); /* "llama", "qwen2" */
/* By name; LT_ENOTFOUND (with the names known in the message) otherwise. */
int lt_arch_parse(const char *name, size_t len, lt_arch *out);
/* The arch's rope pairs: llama.cpp's LLAMA_ROPE_TYPE_NORM / _NEOX. */
lt_rope_mode lt_arch_rope_mode(lt_arch a);

typedef struct {
    int64_t dim;        /* model width */
    int64_t hidden_dim; /* FFN width */
    int64_t n_layers;
    int64_t n_heads;
    int64_t n_kv_heads; /* < n_heads: grouped-query attention */
    int64_t vocab_size;
    int64_t seq_len;    /* context length */
    float rms_eps;
    float rope_base;
    lt_arch arch;       /* LT_ARCH_LLAMA (0) unless the file says otherwise */
} lt_llama_config;

/* The context a runtime allocates when not told: the model's, at most this
 * (llama.cpp's default too; Llama 3.x and Qwen2 train 32-128K, whose KV cache
 * would take gigabytes). */
#define LT_DEFAULT_CTX_MAX 4096
int64_t lt_llama_default_ctx(const lt_llama_config *c); /* min(seq_len, LT_DEFAULT_CTX_MAX) */

typedef struct {
    lt_tensor attn_norm; /* {dim} f32 */
    lt_tensor wq;        /* {dim, n_heads*head_dim} */
    lt_tensor wk;        /* {dim, n_kv_heads*head_dim} */
    lt_tensor wv;        /* {dim, n_kv_heads*head_dim} */
    lt_tensor wo;        /* {n_heads*head_dim, dim} */
    lt_tensor ffn_norm;  /* {dim} f32 */
    lt_tensor w_gate;    /* {dim, hidden_dim}  (llama2.c w1) */
    lt_tensor w_down;    /* {hidden_dim, dim}  (llama2.c w2) */
    lt_tensor w_up;      /* {dim, hidden_dim}  (llama2.c w3) */
    /* Biases of the q, k, v projections, added before the rope (qwen2; any
     * llama file may carry them): {n_heads*head_dim}, {kv_dim}, {kv_dim} f32;
     * data NULL when the file has none. */
    lt_tensor bq, bk, bv;
} lt_llama_layer;

typedef struct lt_model {
    lt_llama_config cfg;
    lt_tensor tok_embd;    /* {dim, vocab} */
    lt_tensor output_norm; /* {dim} f32 */
    lt_tensor output;      /* {dim, vocab}; shares data with tok_embd when tied */
    /* rope_freqs.weight (llama files only, as llama.cpp): {head_dim/2} f32,
     * each pair's rope angle divided by its factor (Llama 3's frequency
     * scaling); data NULL when absent. */
    lt_tensor rope_freqs;
    lt_llama_layer *layers; /* [n_layers] */
    lt_vocab *vocab;       /* NULL when the file carries none */
    lt_dtype wtype;        /* dtype of the projection weights (of blk.0.attn_q in a mix) */
    char format[16];       /* "gguf" or "llama2c" */
    void *priv;            /* mapping and owned buffers */
} lt_model;

/* Opens a GGUF (by magic) or llama2.c checkpoint; tokenizer_path (may be
 * NULL) loads a llama2.c tokenizer.bin, overriding a GGUF's vocabulary.
 * Norm weights are converted to f32 copies; everything else is mapped.
 * Validates names, dtypes, shapes and sizes; errors name file and item. */
int lt_model_open(lt_model **out, const char *path, const char *tokenizer_path);
void lt_model_close(lt_model *m); /* NULL is a no-op */
/* Copies the weight matrices out of the file mapping into memory backed by
 * transparent huge pages, in the order decode streams them (fewer TLB
 * misses, and hardware prefetchers that do not stop every 4 KiB). Where
 * the active ISA is AVX-512 or AVX2, q8_0 projections are repacked in the split
 * layout (core.h) with rows on cache lines: the same values, read faster by
 * the int8 matvec. Tensor data pointers, strides and layouts change; call
 * after lt_isa_force and before building programs. */
int lt_model_make_resident(lt_model *m);
/* The same, calling progress(user, done, total) with the weight bytes copied
 * so far: once with 0 before the first tensor, then after each (progress
 * may be NULL). */
typedef void (*lt_load_progress_fn)(void *user, size_t done, size_t total);
int lt_model_make_resident_progress(lt_model *m, lt_load_progress_fn progress, void *user);
/* Why the resident weights are not on huge pages (transparent huge pages
 * off or missing in the kernel, or refused), in one line; NULL when they
 * are, or before lt_model_make_resident. */
const char *lt_model_page_note(const lt_model *m);
/* The GGUF's tokenizer.chat_template (not NUL-terminated: *len bytes), or
 * NULL when the file has none (llama2.c checkpoints never do). */
const char *lt_model_chat_template(const lt_model *m, size_t *len);
/* Bytes of weights read per decoded token (every projection, one embedding
 * row, norms, the classifier). */
size_t lt_model_weight_bytes_per_token(const lt_model *m);

/* ---- random-weight model generator ------------------------------------------ */

/* Llama 3's rope scaling (Meta's rope_scaling config): the factors
 * rope_freqs.weight carries, as llama.cpp's converter computes them. */
typedef struct {
    float factor;           /* 0: no scaling, no rope_freqs tensor */
    float low_freq_factor, high_freq_factor;
    int64_t original_context; /* original_max_position_embeddings */
} lt_rope_scaling;
/* Fills factors[head_dim/2] for rope base `base` (the converter's formula on
 * float32 frequencies, in double). LT_EINVAL for a scaling that is not well
 * formed. */
int lt_rope_scaling_factors(const lt_rope_scaling *s, float base, int64_t head_dim,
                            float *factors);

/* ---- quantising a model file (src/model/quantize.c) ------------------------------ */

/* llama.cpp's general.file_type (LLAMA_FTYPE_*) of a file of one type; a
 * K-quant alone counts as its _S mix. */
uint32_t lt_file_type(lt_dtype t);

/* What lt_quantize_file makes: every weight matrix in `type` (mix 0), or a
 * llama.cpp mix (mix > 0, type its base: q3_k_m q3_k, q4_k_m q4_k, q5_k_m
 * q5_k) with llama.cpp's type per tensor (output q6_k, some attn_v and
 * ffn_down layers q6_k or q5_k, ...). */
typedef struct {
    lt_dtype type;
    int mix; /* 0, or 1..LT_QUANT_N_MIXES */
} lt_quant_target;
#define LT_QUANT_N_MIXES 3
/* A type name ("q4_k") or a mix name ("q4_k_m", either case). LT_EINVAL
 * naming the choices otherwise. */
int lt_quant_target_parse(const char *s, lt_quant_target *out);
const char *lt_quant_target_name(const lt_quant_target *t);
uint32_t lt_quant_target_file_type(const lt_quant_target *t);

typedef struct {
    lt_quant_target target;
    int threads; /* rows converted in parallel; 0: one thread per logical CPU (the
                    file is the same for any count) */
    /* Called once per tensor when its rows are written (i of n, in file
     * order), may be NULL. */
    void (*progress)(void *ctx, int64_t i, int64_t n, const lt_gguf_tensor *t, lt_dtype to);
    void *progress_ctx;
} lt_quantize_opts;

/* Writes `out`: in's metadata (general.file_type and
 * general.quantization_version set for the target) and tensors, the weight
 * matrices (2-d or more, named *weight, not norms) in the target's types,
 * the others as they are. A width the chosen type's block does not divide
 * takes llama.cpp's fallback (q4_0, q5_0, q5_1, q8_0, or f16). Inputs are
 * f32, f16, bf16 or q8_0 (any type may be dequantised to a float type).
 * Nothing is left at `out` on failure. */
int lt_quantize_file(const char *in, const char *out, const lt_quantize_opts *opts);

/* ---- random-weight models of a preset (src/model/modelgen.c) ---------------------- */

/* A preset's shape and what it carries (lt_modelgen_preset_opts fills all). */
typedef struct {
    lt_llama_config cfg;
    lt_dtype dtype;          /* projection and embedding dtype ... */
    int mix;                 /* ... or, > 0, a llama.cpp mix (lt_quant_target.mix, dtype
                                its base): the mix's type per tensor */
    uint64_t seed;
    const char *vocab_path;  /* llama2.c tokenizer.bin to embed, or NULL: synthetic */
    bool tied;               /* no output.weight: the classifier is token_embd */
    lt_rope_scaling rope_scaling; /* factor > 0: write rope_freqs.weight (llama only) */
} lt_modelgen_opts;
/* Fills cfg for a preset: stories260K, stories15M, stories110M, 1B,
 * smollm2-135M, qwen2-0.5B, llama3.2-1B. */
int lt_modelgen_preset(const char *name, lt_llama_config *cfg);
/* The same, with the preset's output tying and rope scaling (opts->dtype,
 * mix, seed and vocab_path are left as they are). */
int lt_modelgen_preset_opts(const char *name, lt_modelgen_opts *opts);
/* Writes a GGUF model of cfg.arch that llama.cpp loads, deterministic for a
 * seed (qwen2: with q, k, v biases). */
int lt_modelgen_write(const lt_modelgen_opts *opts, const char *path);



/* ---- Llama runtime: the decoder as a program ---------------------------------- */

struct lt_program;
struct lt_exec;
typedef struct lt_llama lt_llama;

typedef struct {
    int64_t max_batch;  /* largest prefill batch (default min(seq_len, 256)) */
    int64_t ctx_len;    /* KV cache length (maximum: the model's seq_len; 0: lt_llama_default_ctx) */
    int64_t n_slots;    /* sequences the KV cache holds at once, ctx_len each (<= 0: 1) */
    bool all_logits;    /* prefill computes logits for every token, not only the last */
    int executor;       /* lt_executor: 0 dispatch, 1 looped */
    bool no_loop_pass;  /* skip the kernel-looping pass (programs stay flat) */
    bool no_fuse_pass;  /* skip the prologue-fusion pass (norms and gates stay nodes) */
    FILE *dump_program; /* if set: every program built is printed before and after the pass */
} lt_llama_opts;

/* Builds the decode program (one token) and allocates the KV cache; prefill
 * programs are built on first use per batch size. The model and pool must
 * outlive the runtime. opts may be NULL. Free with lt_llama_free. */
int lt_llama_init(lt_llama **out, const lt_model *m, lt_pool *pool, const lt_llama_opts *opts);
void lt_llama_free(lt_llama *l);
const lt_model *lt_llama_model(const lt_llama *l);
int64_t lt_llama_ctx_len(const lt_llama *l);
int64_t lt_llama_max_batch(const lt_llama *l);
/* Feeds tokens[0..n) at positions pos..pos+n-1 (1 <= n <= max_batch,
 * pos + n <= ctx_len, ids < vocab: validated). Logits of the last token (or
 * of every token with all_logits) are then in lt_llama_logits. */
int lt_llama_eval(lt_llama *l, const int32_t *tokens, int64_t n, int64_t pos);
/* The same in sequence slot `slot` (0 .. n_slots - 1): its prompt's prefill. */
int lt_llama_eval_slot(lt_llama *l, int32_t slot, const int32_t *tokens, int64_t n, int64_t pos);
/* A batched step over several sequences: token t at position pos[t] of slot
 * slots[t], every token's logits then in lt_llama_logits (n rows). A step
 * reads the weights once for all its tokens. Any mix works: one token of
 * each of several sequences (decode), several consecutive tokens of one
 * (its prefill, causal within the step), both at once; a slot's positions
 * must not repeat in a step. Validated as lt_llama_eval (and slots < n_slots). */
int lt_llama_eval_batch(lt_llama *l, const int32_t *tokens, const int64_t *pos,
                        const int32_t *slots, int64_t n);
int64_t lt_llama_n_slots(const lt_llama *l);
/* Logits of the last eval: rows of vocab_size floats; *n_rows gets the count. */
const float *lt_llama_logits(const lt_llama *l, int64_t *n_rows);
/* The program that evaluates n tokens (built if needed), for printing. */
int lt_llama_program(lt_llama *l, int64_t n, struct lt_program **out);
/* The program of a batched decode step of n tokens (2 <= n <= max_batch,
 * what lt_llama_eval_batch of n tokens runs; built if needed). It lives in
 * the runtime's program cache: valid until a later eval or program call
 * evicts it (four programs are kept, the decode one for good). */
int lt_llama_program_batch(lt_llama *l, int64_t n, struct lt_program **out);
/* The executor every eval runs on, decode and prefill alike (opts.executor;
 * created by lt_llama_init, freed by lt_llama_free), with its schedules. Its
 * parameters are the tuning context's LT_TUNING_LOOPED values, which it
 * takes at the next eval: read them here (or time a node as it splits it),
 * set them in the context. */
struct lt_exec *lt_llama_exec(lt_llama *l);
/* Threads of decode steps (one token), of prefill steps or of batched
 * decode steps (lt_llama_eval_batch of several tokens) in effect: 1..pool
 * size. They are values of the tuning context (LT_TUNING_THREADS under the
 * regime's step key: the first nth of the pool, 0 = all, the default); the
 * logits do not depend on them. */
int lt_llama_threads(const lt_llama *l, lt_regime r);
int lt_llama_pool_size(const lt_llama *l);
/* Synchronisation counters summed over every eval so far. */
typedef struct {
    uint64_t steps, sync_points, wait_ns, busy_ns;
} lt_llama_sync;
void lt_llama_sync_stats(const lt_llama *l, lt_llama_sync *out);
void lt_llama_set_timing(lt_llama *l, bool on); /* collect sync counters (off by default) */

/* Key of a model's whole step of regime r on a pool of nth threads, what
 * the regime's thread count is keyed by: "llama:d288:h768:l6:q8_0:t2:decode"
 * (the architecture's name first). */
size_t lt_step_shape_format(const lt_model *m, int nth, lt_regime r, char *buf, size_t n);
/* Key of the looped executor's parameters: the decode step's. */
size_t lt_exec_shape_format(const lt_model *m, int nth, char *buf, size_t n);

/* ---- the tuning context: every parameter value in force ------------------------- */

/* One per runtime (lt_llama_tuning), created and freed with it. A value
 * belongs to a name and a key: a kernel's calls of one shape key
 * (lt_call_key), the looped executor under the decode step key, or a
 * regime's thread count under that regime's step key (lt_tuning_step_key).
 * Every source of values goes through lt_tuning_set / lt_tuning_pin: one
 * validation (the name's declared space, then the kernel's constraints on
 * every call it would reach, with a named error and nothing changed), and
 * every program the runtime builds, at any time and for any batch size,
 * takes its values from here; a change reaches programs already built at
 * the next token boundary (the next lt_llama_eval). */
typedef struct lt_tuning lt_tuning;
#define LT_TUNING_LOOPED "looped"   /* the looped executor's parameters */
#define LT_TUNING_THREADS "threads" /* a regime's thread count: parameter "threads" */

lt_tuning *lt_llama_tuning(lt_llama *l);
/* The declared space of name (a kernel, LT_TUNING_LOOPED or
 * LT_TUNING_THREADS on a pool of pool_threads; <= 0: every count known) into
 * defs; LT_ENOTFOUND for an unknown name. */
int lt_tuning_space(const char *name, int pool_threads, lt_param_def defs[LT_MAX_PARAMS], int *n);
/* Sets the values of (name, key) (p's first n entries, n the space's size).
 * LT_ENOTFOUND for an unknown name or a key this runtime has no call (or
 * step) of; LT_ECONFIG for a value outside the space or a call it does not
 * fit. */
int lt_tuning_set(lt_tuning *t, const char *name, const char *key, const lt_params *p);
/* Drops the value set for (name, key): its calls go back to the defaults. */
int lt_tuning_unset(lt_tuning *t, const char *name, const char *key);
/* The values in force for (name, key): set (by the key, or the fallback
 * keys of a fused matvec), else the active ISA's defaults; pins on top. */
int lt_tuning_get(const lt_tuning *t, const char *name, const char *key, lt_params *out);
/* Whether a value is set for exactly (name, key) (not a fallback's). */
bool lt_tuning_has(const lt_tuning *t, const char *name, const char *key);
/* Pins parameter param of name at value for key (NULL: every key), over
 * any value set (--param). Validated like a set. */
int lt_tuning_pin(lt_tuning *t, const char *name, const char *key, const char *param,
                  int32_t value);
/* Whether this runtime has calls of name under key (or fallback calls). */
bool lt_tuning_uses(const lt_tuning *t, const char *name, const char *key);
/* The keys in use, i in 0..lt_tuning_n_keys-1: kernels with parameters (each
 * distinct shape key once), the looped executor, every regime's threads. */
int lt_tuning_n_keys(const lt_tuning *t);
void lt_tuning_key(const lt_tuning *t, int i, const char **name, const char **key);
/* The step key of regime r ("llama:d288:h768:l6:q8_0:t2:decode"). */
const char *lt_tuning_step_key(const lt_tuning *t, lt_regime r);
int lt_tuning_pool_threads(const lt_tuning *t);
/* Puts the values in force on the nodes of every program built so far now,
 * between steps (the runtime's next eval would): for a caller that reads
 * the nodes' values before it (a run start's record of them, telemetry
 * retagging its windows). The executor and the thread count take theirs at
 * the eval. */
void lt_tuning_sync(lt_tuning *t);
/* Counts the changes: programs compare it with what they carry. */
uint64_t lt_tuning_generation(const lt_tuning *t);

/* ---- generation loop ------------------------------------------------------------ */

typedef struct {
    int64_t n_prompt, n_generated;
    double prefill_s, decode_s; /* wall time of prompt processing and of decoding */
    double eval_s;              /* of decode_s: the evaluations alone (no sampling, no callback) */
} lt_gen_stats;

/* Called for every generated token; a non-zero return stops generation. */
typedef int (*lt_token_cb)(void *user, int32_t prev, int32_t token);
/* Called after every prefill batch: n prompt tokens at positions pos..,
 * evaluated from t_begin_ns to t_end_ns (lt_now_ns). Between evals, so it
 * may change the tuning context (the next eval brings it in). */
typedef void (*lt_prefill_cb)(void *user, int64_t pos, int64_t n, uint64_t t_begin_ns,
                              uint64_t t_end_ns);

typedef struct {
    int64_t n_new;          /* tokens to generate */
    int64_t n_past;         /* tokens the KV cache already holds (a conversation's earlier
                               turns): the prompt goes at positions n_past.. (0: a new sequence) */
    int64_t prefill_batch;  /* prompt batch size (0 = as large as allowed) */
    int32_t stop_token;     /* generation stops after this token (-1: never) */
    FILE *dump_logits;      /* if set: float32 rows for every position fed */
    lt_prefill_cb on_prefill; /* may be NULL */
    void *prefill_user;
} lt_gen_opts;

/* Processes the prompt in batches, then samples n_new tokens one at a time;
 * prompt and drawn tokens enter the sampler's repetition window
 * (lt_sampler_accept). The last token drawn is not fed back: a caller that
 * continues the sequence feeds it first (n_past + n_prompt + n_generated - 1
 * tokens are in the cache afterwards). Fails (before any work) if n_past +
 * prompt + n_new exceeds the context. */
int lt_generate(lt_llama *l, lt_sampler *s, const int32_t *prompt, int64_t n_prompt,
                const lt_gen_opts *opts, lt_token_cb cb, void *user, lt_gen_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
