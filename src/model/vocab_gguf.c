/* lt_vocab_load_gguf: the Llama (SentencePiece) vocabulary stored in GGUF
 * metadata, with U+2581 turned back into ' ' as looptune's pieces use. */
#include "model/model_internal.h"
#include "model/vocab_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's word boundary */
#define SPM_SPACE_LEN 3
#define LLAMA_DEFAULT_BOS 1
#define LLAMA_DEFAULT_EOS 2

/* Optional token id key: default when absent, must fit int32. */
static int token_id(const lt_gguf *g, const char *key, int32_t def, int32_t *out) {
    int64_t v;
    int st = lt_gguf_get_i64(g, key, &v);
    if (st == LT_ENOTFOUND) {
        *out = def;
        return LT_OK;
    }
    if (st) return st;
    if (v < 0 || v > INT32_MAX)
        return lt_error(LT_EFORMAT, "%s: %s = %lld is not a token id", lt__gguf_path(g), key,
                        (long long)v);
    *out = (int32_t)v;
    return LT_OK;
}

/* The optional special ids beyond bos/eos, then the end-of-generation set
 * they and the token texts give. */
static int special_ids(lt_vocab *v, const lt_gguf *g) {
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"tokenizer.ggml.eot_token_id", offsetof(lt_vocab, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(lt_vocab, eom)},
        {"tokenizer.ggml.fim_pad_token_id", offsetof(lt_vocab, fim_pad)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(lt_vocab, fim_rep)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(lt_vocab, fim_sep)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int32_t *id = (int32_t *)((char *)v + keys[i].off);
        int st = token_id(g, keys[i].key, LT__NO_ID, id);
        if (st) return st;
        if (*id >= v->n)
            return lt_error(LT_EFORMAT, "%s: %s = %d is outside the vocabulary of %lld tokens",
                            lt__gguf_path(g), keys[i].key, (int)*id, (long long)v->n);
    }
    lt__vocab_mark_eog(v, true);
    return LT_OK;
}

int lt_vocab_load_gguf(lt_vocab **out, const lt_gguf *g) {
    *out = NULL;
    const char *path = lt__gguf_path(g), *model;
    size_t len;
    int st = lt_gguf_get_str(g, "tokenizer.ggml.model", &model, &len);
    if (st && st != LT_ENOTFOUND) return st;
    if (st == LT_OK && (len != 5 || memcmp(model, "llama", 5) != 0))
        return lt_error(LT_EUNSUPPORTED, "%s: tokenizer.ggml.model '%.*s' is not supported "
                        "(only 'llama' SentencePiece vocabularies)", path,
                        (int)(len > 64 ? 64 : len), model);
    lt_gguf_type type;
    int64_t n, n_scores = 0;
    const void *data;
    if ((st = lt_gguf_get_arr(g, "tokenizer.ggml.tokens", &type, &n, &data))) return st;
    if (type != LT_GGUF_STRING || n == 0)
        return lt_error(LT_EFORMAT, "%s: tokenizer.ggml.tokens is not a non-empty array of "
                        "strings", path);
    const float *scores = NULL;
    st = lt_gguf_get_arr(g, "tokenizer.ggml.scores", &type, &n_scores, &data);
    if (st == LT_OK) {
        if (type != LT_GGUF_F32 || n_scores != n)
            return lt_error(LT_EFORMAT, "%s: tokenizer.ggml.scores has %lld %s values for %lld "
                            "tokens", path, (long long)n_scores, lt__gguf_type_name(type),
                            (long long)n);
        scores = data;
    } else if (st != LT_ENOTFOUND) {
        return st;
    }
    int32_t bos = LLAMA_DEFAULT_BOS, eos = LLAMA_DEFAULT_EOS;
    if ((st = token_id(g, "tokenizer.ggml.bos_token_id", LLAMA_DEFAULT_BOS, &bos)) ||
        (st = token_id(g, "tokenizer.ggml.eos_token_id", LLAMA_DEFAULT_EOS, &eos)))
        return st;

    /* Translated pieces are never longer than the originals: one blob holds them all. */
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *s;
        if ((st = lt_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s, &len))) return st;
        total += len;
    }
    char *blob = malloc(total ? total : 1);
    const char **pieces = malloc((size_t)n * sizeof *pieces);
    size_t *lens = malloc((size_t)n * sizeof *lens);
    if (!blob || !pieces || !lens) {
        st = lt_error(LT_ENOMEM, "%s: out of memory for %lld tokens", path, (long long)n);
        goto done;
    }
    size_t pos = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *s;
        lt_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s, &len);
        pieces[i] = blob + pos;
        size_t start = pos;
        for (size_t k = 0; k < len;) {
            if (len - k >= SPM_SPACE_LEN && memcmp(s + k, SPM_SPACE, SPM_SPACE_LEN) == 0) {
                blob[pos++] = ' ';
                k += SPM_SPACE_LEN;
            } else {
                blob[pos++] = s[k++];
            }
        }
        lens[i] = pos - start;
    }
    st = lt_vocab_from_arrays(out, n, pieces, lens, scores, bos, eos);
    if (st) {
        char why[256];
        snprintf(why, sizeof why, "%s", lt_errmsg());
        st = lt_error(st, "%s: tokenizer: %s", path, why);
        goto done;
    }
    if ((st = special_ids(*out, g))) {
        lt_vocab_free(*out);
        *out = NULL;
    }
done:
    free(blob);
    free(pieces);
    free(lens);
    return st;
}
