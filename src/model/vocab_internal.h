/* Internal view of a vocabulary (struct lt_vocab), shared by the files that
 * build, load and use one: tokenizer.c (the table, SentencePiece encoding),
 * vocab_special.c (special ids, end-of-generation tokens), vocab_gguf.c (the
 * GGUF loader). Not part of looptune/model.h. */
#ifndef LT_VOCAB_INTERNAL_H
#define LT_VOCAB_INTERNAL_H

#include "looptune/model.h"

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
} lt__vocab_kind;

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
    int32_t byte_id[256]; /* id of piece "<0xXX>" or LT__NO_ID */
    /* special ids, LT__NO_ID when the vocabulary has none */
    int32_t bos, eos, eot, eom;
    int32_t fim_pad, fim_rep, fim_sep;
};

/* Id of the piece with these bytes, or LT__NO_ID. */
int32_t lt__vocab_lookup(const lt_vocab *v, const char *s, size_t len);

/* Marks the end-of-generation tokens as llama.cpp determines them: the
 * FIM pad/repo/separator tokens, every token whose text is one of the known
 * end-of-turn texts (<|eot_id|>, <|im_end|>, <|endoftext|>, </s>, ...),
 * then eos, eot and eom; the FIM, eot and eom ids it detects by text where
 * they are unset. With mark_control, a detected token that is not of
 * control type becomes one (as llama.cpp overrides it). Recomputes from
 * scratch: call again after changing special ids. */
void lt__vocab_mark_eog(lt_vocab *v, bool mark_control);

#endif
