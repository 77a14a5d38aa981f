/* Pre-tokenizers of byte-level BPE vocabularies (pretok.c): the regex sets
 * named by tokenizer.ggml.pre, compiled once per vocabulary. Internal to
 * the model layer. */
#ifndef LT_PRETOK_H
#define LT_PRETOK_H

#include "looptune/model.h"

typedef struct lt__pretok lt__pretok;

/* What a pre-tokenizer name implies beyond its regexes (llama.cpp's rules). */
typedef struct {
    const char *set;    /* the regex set: "llama3", "gpt2", ... */
    bool ignore_merges; /* a word that is a token is emitted whole */
    bool add_bos;       /* adds BOS unless tokenizer.ggml.add_bos_token says otherwise */
    bool no_bos;        /* the vocabulary has no BOS whatever the file says */
} lt__pretok_info;

/* Compiles the regexes of pre-tokenizer `pre` (pre_len bytes, not
 * NUL-terminated). LT_EUNSUPPORTED naming the name if it is unknown or its
 * regexes are not carried. info may be NULL. Free with lt__pretok_free. */
int lt__pretok_init(lt__pretok **out, const char *pre, size_t pre_len, lt__pretok_info *info);
void lt__pretok_free(lt__pretok *p); /* NULL is a no-op */
const char *lt__pretok_name(const lt__pretok *p);
/* Cuts text[0, len) (valid UTF-8) into words: word i is
 * text[offs[i], offs[i] + lens[i]). offs and lens hold len entries each (a
 * word is at least one byte). Thread-safe: p is only read. */
int lt__pretok_split(const lt__pretok *p, const char *text, int64_t len, int64_t *offs,
                     int64_t *lens, int64_t *n_words);

#endif
