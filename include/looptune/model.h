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
/* From GGUF metadata (tokenizer.ggml.tokens / scores / bos / eos). */
int lt_vocab_load_gguf(lt_vocab **out, const lt_gguf *g);
/* From arrays (copied). bos/eos ids must be < n. */
int lt_vocab_from_arrays(lt_vocab **out, int64_t n, const char *const *pieces,
                         const size_t *lens, const float *scores, int32_t bos, int32_t eos);
void lt_vocab_free(lt_vocab *v);
int64_t lt_vocab_size(const lt_vocab *v);
int32_t lt_vocab_bos(const lt_vocab *v);
int32_t lt_vocab_eos(const lt_vocab *v);
/* Piece i as stored (' ' for U+2581), with its length. */
const char *lt_vocab_piece(const lt_vocab *v, int32_t id, size_t *len);
float lt_vocab_score(const lt_vocab *v, int32_t id);
/* Encodes text as llama2.c and llama.cpp do for Llama 2 vocabularies:
 * optional BOS, a dummy prefix space when text is non-empty, pieces by
 * codepoint, unknown bytes as <0xXX> byte tokens, then greedy best-score
 * pair merges. ids must hold at least strlen(text) + 3 entries. */
int lt_tokenize(const lt_vocab *v, const char *text, bool add_bos, int32_t *ids,
                int64_t max_ids, int64_t *n_ids);
/* Text of token `id` following token `prev` (leading space stripped after
 * BOS, <0xXX> as the raw byte). Writes at most n-1 bytes, NUL-terminated;
 * returns the byte length. */
size_t lt_detokenize(const lt_vocab *v, int32_t prev, int32_t id, char *buf, size_t n);

/* ---- sampler --------------------------------------------------------------- */

typedef struct lt_sampler lt_sampler;
/* temp 0 = greedy (argmax, lowest id on ties); otherwise softmax(logits/temp),
 * then nucleus (top-p) if 0 < top_p < 1; xorshift RNG seeded with seed. */
int lt_sampler_init(lt_sampler **out, int64_t vocab_size, float temp, float top_p, uint64_t seed);
void lt_sampler_free(lt_sampler *s);
int32_t lt_sampler_sample(lt_sampler *s, float *logits); /* logits may be modified */

/* ---- Llama model ----------------------------------------------------------- */

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
} lt_llama_config;

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
} lt_llama_layer;

typedef struct lt_model {
    lt_llama_config cfg;
    lt_tensor tok_embd;    /* {dim, vocab} */
    lt_tensor output_norm; /* {dim} f32 */
    lt_tensor output;      /* {dim, vocab}; shares data with tok_embd when tied */
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
/* Why the resident weights are not on huge pages (transparent huge pages
 * off or missing in the kernel, or refused), in one line; NULL when they
 * are, or before lt_model_make_resident. */
const char *lt_model_page_note(const lt_model *m);
/* Bytes of weights read per decoded token (every projection, one embedding
 * row, norms, the classifier). */
size_t lt_model_weight_bytes_per_token(const lt_model *m);

/* ---- random-weight model generator ------------------------------------------ */

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

/* Fills cfg for a preset: stories260K, stories15M, stories110M, 1B. */
int lt_modelgen_preset(const char *name, lt_llama_config *cfg);
typedef struct {
    lt_llama_config cfg;
    lt_dtype dtype;          /* projection and embedding dtype ... */
    int mix;                 /* ... or, > 0, a llama.cpp mix (lt_quant_target.mix, dtype
                                its base): the mix's type per tensor */
    uint64_t seed;
    const char *vocab_path;  /* llama2.c tokenizer.bin to embed, or NULL: synthetic */
} lt_modelgen_opts;
/* Writes a GGUF Llama model that llama.cpp loads, deterministic for a seed. */
int lt_modelgen_write(const lt_modelgen_opts *opts, const char *path);




/* ---- Llama runtime: the decoder as a program ---------------------------------- */

struct lt_program;
struct lt_exec;
typedef struct lt_llama lt_llama;

typedef struct {
    int64_t max_batch;  /* largest prefill batch (default min(seq_len, 256)) */
    int64_t ctx_len;    /* KV cache length (default and maximum: the model's seq_len) */
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
/* Logits of the last eval: rows of vocab_size floats; *n_rows gets the count. */
const float *lt_llama_logits(const lt_llama *l, int64_t *n_rows);
/* The program that evaluates n tokens (built if needed), for printing. */
int lt_llama_program(lt_llama *l, int64_t n, struct lt_program **out);
/* The executor every eval runs on, decode and prefill alike (opts.executor;
 * created by lt_llama_init, freed by lt_llama_free), with its schedules. Its
 * parameters are the tuning context's LT_TUNING_LOOPED values, which it
 * takes at the next eval: read them here (or time a node as it splits it),
 * set them in the context. */
struct lt_exec *lt_llama_exec(lt_llama *l);
/* Threads of decode steps (one token) or of prefill steps in effect:
 * 1..pool size. They are values of the tuning context (LT_TUNING_THREADS
 * under the regime's step key: the first nth of the pool, 0 = all, the
 * default); the logits do not depend on them. */
int lt_llama_threads(const lt_llama *l, bool prefill);
int lt_llama_pool_size(const lt_llama *l);
/* Synchronisation counters summed over every eval so far. */
typedef struct {
    uint64_t steps, sync_points, wait_ns, busy_ns;
} lt_llama_sync;
void lt_llama_sync_stats(const lt_llama *l, lt_llama_sync *out);
void lt_llama_set_timing(lt_llama *l, bool on); /* collect sync counters (off by default) */

/* Key of a model's whole step of regime r on a pool of nth threads, what
 * the regime's thread count is keyed by: "llama:d288:h768:l6:q8_0:t2:decode". */
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

typedef struct {
    int64_t n_new;          /* tokens to generate */
    int64_t prefill_batch;  /* prompt batch size (0 = as large as allowed) */
    int32_t stop_token;     /* generation stops after this token (-1: never) */
    FILE *dump_logits;      /* if set: float32 rows for every position fed */
} lt_gen_opts;

/* Processes the prompt in batches, then samples n_new tokens one at a time.
 * Fails (before any work) if prompt + n_new exceeds the context. */
int lt_generate(lt_llama *l, lt_sampler *s, const int32_t *prompt, int64_t n_prompt,
                const lt_gen_opts *opts, lt_token_cb cb, void *user, lt_gen_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
