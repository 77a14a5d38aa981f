/* Internal view of a vocabulary (struct lt_vocab), shared by the files that
 * build, load and use one: tokenizer.c (the table, the merge engine,
 * SentencePiece encoding), tokenizer_bpe.c (byte-level BPE), tokenize.c
 * (special tokens in text, BOS/EOS), vocab_special.c (end-of-generation
 * tokens), vocab_gguf.c (the GGUF loader). Not part of looptune/model.h. */
#ifndef LT_VOCAB_INTERNAL_H
#define LT_VOCAB_INTERNAL_H

#include "looptune/model.h"
#include "model/pretok.h"

#define LT__NO_ID (-1)

/* Token attributes, one byte per token: GGUF's tokenizer.ggml.token_type
 * values (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)
 * as bits, plus the end-of-generation mark. */
#define LT__ATTR_NORMAL 0x01
#define LT__ATTR_UNKNOWN 0x02
#define LT__ATTR_CONTROL 0x04
#define LT__ATTR_USER_DEFINED 0x08
#define LT__ATTR_UNUSED 0x10
#define LT__ATTR_BYTE 0x20
#define LT__ATTR_EOG 0x40

typedef enum {
    LT__VOCAB_SPM, /* SentencePiece-style: best-score merges, byte fallback */
    LT__VOCAB_BPE, /* byte-level BPE (GPT-2): pre-tokenizer regexes, ranked merges */
} lt__vocab_kind;

/* One merge of a byte-level BPE vocabulary, keyed by its two ids. */
typedef struct {
    uint64_t key;   /* left id << 32 | right id; UINT64_MAX = empty slot */
    int32_t rank;   /* position in tokenizer.ggml.merges: lower merges first */
    int32_t merged; /* id of the concatenation */
} lt__bpe_merge;

struct lt_vocab {
    lt__vocab_kind kind;
    int64_t n;
    char *blob;          /* every piece back to back, each NUL-terminated */
    size_t *off;         /* [n] offset of piece i in blob */
    size_t *len;         /* [n] piece length in bytes */
    float *scores;       /* [n] merge priority: higher merges first */
    uint8_t *attr;       /* [n] LT__ATTR_* bits */
    int32_t *slots;      /* [slot_mask + 1] open-addressing table of ids, LT__NO_ID = empty */
    size_t slot_mask;
    size_t max_len;      /* longest piece */
    /* the token of a lone byte: SentencePiece's "<0xXX>", byte-level BPE's
     * mapped character; LT__NO_ID where there is none */
    int32_t byte_id[256];
    /* special ids, LT__NO_ID when the vocabulary has none */
    int32_t bos, eos, eot, eom, pad;
    int32_t fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos;   /* what tokenizing with add_special adds */
    bool add_space_prefix;   /* SentencePiece: a space before text that follows BOS,
                                a special token or the start */
    /* tokens matched in text before encoding (control, user-defined, unknown
     * types), longest text first */
    int32_t *special;        /* [n_special] */
    int64_t n_special;
    /* byte-level BPE */
    lt__pretok *pretok;
    bool ignore_merges;      /* a word that is a token is not merged */
    lt__bpe_merge *merges;   /* [merge_mask + 1] open-addressing table */
    size_t merge_mask;
    int64_t n_merges;
};

/* Id of the piece with these bytes, or LT__NO_ID. */
int32_t lt__vocab_lookup(const lt_vocab *v, const char *s, size_t len);
/* Length of the well-formed UTF-8 sequence at s, or 1 for a bad byte. */
size_t lt__utf8_unit(const unsigned char *s, size_t rem);

/* A growing list of ids. */
typedef struct {
    int32_t *a;
    int64_t n, cap;
} lt__ids;
int lt__ids_push(lt__ids *o, int32_t id);

/* The merge engine both kinds share: symbols hold ids, the best-ranked
 * adjacent pair merges first (ties: the leftmost), until no pair merges. */
typedef struct {
    int32_t id;
    int32_t prev, next; /* neighbours in the live list, -1 at the ends */
} lt__sym;
typedef struct {
    struct lt__cand *a;
    size_t cap;
} lt__merge_buf;
/* Grows buf for n_symbols symbols; lt__merge_scratch_free releases it. */
int lt__merge_scratch(lt__merge_buf *buf, int64_t n_symbols);
void lt__merge_scratch_free(lt__merge_buf *buf);
/* Merges sym[0, n) in place; the result is the list from sym[0] along next
 * (empty when n == 0). */
void lt__merge(const lt_vocab *v, lt__sym *sym, int32_t n, lt__merge_buf *buf);

/* SentencePiece encoding of text[0, len) (with the dummy prefix space when
 * prefix), appended to out. */
int lt__spm_encode(const lt_vocab *v, const char *text, size_t len, bool prefix, lt__ids *out);

/* Byte-level BPE (tokenizer_bpe.c). */
/* Whether ids a, b merge: the merge's rank and the merged id. */
bool lt__bpe_pair(const lt_vocab *v, int32_t a, int32_t b, int32_t *rank, int32_t *merged);
/* Encodes text[0, len) (any bytes): pre-tokenizer words, each merged. */
int lt__bpe_encode(const lt_vocab *v, const char *text, size_t len, lt__ids *out);
/* Turns v (built from the file's token texts) into a byte-level BPE
 * vocabulary: the byte tokens, and the merges "LEFT RIGHT" (n strings, rank =
 * index), each side and their concatenation a token. Errors name the
 * merge. get(ctx, i, &s, &len) returns merge i. */
int lt__bpe_init(lt_vocab *v, int64_t n_merges,
                 int (*get)(const void *ctx, int64_t i, const char **s, size_t *len),
                 const void *ctx);
/* Text of a byte-level piece: each character back to its byte. Writes at
 * most n bytes to out; returns the decoded length. */
size_t lt__bpe_decode(const char *piece, size_t len, char *out, size_t n);

/* The special-token list from the attributes (call after setting them). */
int lt__vocab_index_special(lt_vocab *v);

/* Marks the end-of-generation tokens as llama.cpp determines them: the
 * FIM pad/repo/separator tokens, every token whose text is one of the known
 * end-of-turn texts (<|eot_id|>, <|im_end|>, <|endoftext|>, </s>, ...),
 * then eos, eot and eom; the FIM, eot and eom ids it detects by text where
 * they are unset. With mark_control, a detected token that is not of
 * control type becomes one (as llama.cpp overrides it). Recomputes from
 * scratch: call again after changing special ids. */
void lt__vocab_mark_eog(lt_vocab *v, bool mark_control);

#endif
