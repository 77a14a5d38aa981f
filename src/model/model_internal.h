/* Internal interfaces of the model file layer: generic GGUF metadata
 * writers, the streaming tensor path the model generator uses, the format
 * loaders behind lt_model_open, the shared Llama config check, and the
 * vocabularies the generator embeds. Not part of looptune/model.h. */
#ifndef LT_MODEL_INTERNAL_H
#define LT_MODEL_INTERNAL_H

#include "looptune/model.h"
#include "looptune/program.h"

#include <stdio.h>

/* GGUF's default data alignment and the longest tensor name ggml accepts
 * (GGML_MAX_NAME is 64 bytes including the NUL). */
#define LT_GGUF_DEFAULT_ALIGNMENT 32
#define LT_GGUF_MAX_NAME 63

/* The path the file was opened with, for error messages. */
const char *lt__gguf_path(const lt_gguf *g);

/* Bytes of one scalar of a GGUF metadata type (0 for STRING and ARRAY). */
size_t lt__gguf_type_size(lt_gguf_type t);
const char *lt__gguf_type_name(lt_gguf_type t);

/* ggml type number <-> looptune dtype. lt__ggml_to_dtype returns false for
 * types looptune does not read. */
int lt__dtype_to_ggml(lt_dtype t);
bool lt__ggml_to_dtype(uint32_t ggml_type, lt_dtype *out);

/* Any scalar metadata value: val points to one value of `type` (a
 * NUL-terminated string for LT_GGUF_STRING). */
int lt__gguf_writer_kv(lt_gguf_writer *w, const char *key, lt_gguf_type type, const void *val);
/* An array of n scalars of elem_type (not STRING or ARRAY: use
 * lt_gguf_writer_arr_str). Data is copied. */
int lt__gguf_writer_arr(lt_gguf_writer *w, const char *key, lt_gguf_type elem_type, int64_t n,
                        const void *data);

/* Produces rows [row0, row0 + nrows) of a tensor (rows of ne[0] elements in
 * its dtype, contiguous) into dst. Returns LT_OK or a negative status. */
typedef int (*lt__gguf_fill_fn)(void *ctx, int64_t row0, int64_t nrows, void *dst);
/* A tensor whose data is produced at close time, a chunk of rows at a time,
 * so a writer never holds a large model in memory. ctx must stay valid until
 * lt_gguf_writer_close or _abort. */
int lt__gguf_writer_tensor_fill(lt_gguf_writer *w, const char *name, lt_dtype dtype, int n_dims,
                                const int64_t *ne, lt__gguf_fill_fn fill, void *ctx);

/* Loads a legacy llama2.c checkpoint into m: config, the file mapping in
 * m->priv, f32 tensors pointing into it. On failure m->priv may be partly
 * set: lt__model_priv_free releases whatever is there. */
int lt__llama2c_load(lt_model *m, const char *path);
/* Loads a GGUF Llama model into m (without vocabulary). Same ownership. */
int lt__gguf_model_load(lt_model *m, const char *path);

/* What m->priv points to: the file the tensors live in and owned buffers. */
typedef struct {
    lt_gguf *gguf;     /* GGUF files: the open file */
    void *map;         /* llama2.c files: the mapping */
    size_t map_bytes;
    float *norms;      /* owned f32 copies of every norm weight, bias and rope factor */
    void *resident;    /* lt_model_make_resident: the huge-page copy of the weights */
    size_t resident_bytes;
    char page_note[160]; /* why the resident copy has no huge pages; "" if it has */
} lt__model_priv;
void lt__model_priv_free(lt__model_priv *p);

/* Checks a Llama config for consistency (positive, sane sizes; heads divide
 * dim; kv heads divide heads; even head_dim). `what` names the file. */
int lt__llama_config_check(const lt_llama_config *c, const char *what);

/* Converts n norm weights of any dtype to f32 at dst (a slice of the
 * caller's p->norms block); returns dst. */
float *lt__norm_copy(float *dst, const void *src, lt_dtype dtype, int64_t n);

/* ---- the tuning context's runtime side (tuning.c) ------------------------------ */

/* A context for m's runtime on a pool of pool_threads. */
int lt__tuning_init(lt_tuning **out, const lt_model *m, int pool_threads);
void lt__tuning_free(lt_tuning *t); /* NULL is a no-op */
int lt__tuning_add_key(lt_tuning *t, const char *name, const char *key, bool fallback);
/* Learns the keys of p's calls without attaching it (a program built only
 * to know them). */
int lt__tuning_learn(lt_tuning *t, const lt_program *p);
/* A program the runtime built (finalized): its keys are learned, the values
 * in force put on its nodes, and every check of a later set covers it. */
int lt__tuning_attach(lt_tuning *t, lt_program *p);
void lt__tuning_detach(lt_tuning *t, const lt_program *p); /* before freeing it */
/* Puts the values in force on p's nodes; returns how many nodes changed. */
int lt__tuning_apply(const lt_tuning *t, lt_program *p);
/* The thread count of regime r (0: the whole pool) and the looped
 * executor's parameters in force. */
int lt__tuning_threads(const lt_tuning *t, lt_regime r);
void lt__tuning_exec_params(const lt_tuning *t, lt_params *out);

/* ---- vocabularies the model generator embeds ---------------------------- */

/* llama.cpp's token types. */
#define LT__TOKEN_NORMAL 1
#define LT__TOKEN_UNKNOWN 2
#define LT__TOKEN_CONTROL 3
#define LT__TOKEN_BYTE 6
/* 3 specials, 256 byte tokens and the 95 printable ASCII characters. */
#define LT__SYNTH_VOCAB_MIN (3 + 256 + 95)

/* A vocabulary in GGUF form: pieces with U+2581 for ' ', NUL-terminated. */
typedef struct {
    int64_t n;
    char **pieces;  /* [n] owned */
    size_t *lens;   /* [n] */
    float *scores;  /* [n] */
    int32_t *types; /* [n] LT__TOKEN_* */
} lt__vocab_arrays;

/* Synthetic vocabulary of n >= LT__SYNTH_VOCAB_MIN tokens: <unk> <s> </s>,
 * the byte tokens, single characters, then space-prefixed word pieces whose
 * prefixes are all pieces (so merges reach them), scored by order. */
int lt__vocab_synth(lt__vocab_arrays *a, int64_t n);
/* A llama2.c tokenizer.bin of exactly n tokens, with ids 0..2 named
 * <unk> <s> </s> and <0xXX> pieces typed as bytes. */
int lt__vocab_llama2c(lt__vocab_arrays *a, const char *path, int64_t n);
void lt__vocab_arrays_free(lt__vocab_arrays *a); /* NULL and zeroed arrays are fine */

/* ---- quantisation types per tensor (quantize.c) ------------------------------ */

/* What llama.cpp's choice of types per tensor counts as it walks a file's
 * tensors in order: the attn_v and ffn_down tensors (n_ set before, i_
 * advanced by each call), and whether output.weight exists (else
 * token_embd is the classifier and is chosen as output). */
typedef struct {
    int64_t n_attn_v, n_ffn_down, i_attn_v, i_ffn_down;
    bool has_output;
} lt__mix_state;

/* The type tg gives the tensor (name, n_dims, ne0) now of dtype `from`:
 * from itself unless it is a weight matrix (2-d or more, *weight, not a
 * norm); else tg's type or the mix's choice, with llama.cpp's fallback
 * where its block does not divide ne0. */
lt_dtype lt__quant_tensor_type(const lt_quant_target *tg, const char *name, int n_dims,
                               int64_t ne0, lt_dtype from, lt__mix_state *s);

#endif
