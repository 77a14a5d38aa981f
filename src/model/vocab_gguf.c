/* lt_vocab_load_gguf: the vocabulary stored in GGUF metadata, as llama.cpp
 * reads it. tokenizer.ggml.model llama: a SentencePiece vocabulary, with
 * U+2581 turned back into ' ' as looptune's pieces use; gpt2: a byte-level
 * BPE vocabulary with its merges and pre-tokenizer. Then token types,
 * special ids and what tokenizing adds, every value checked. */
#include "model/model_internal.h"
#include "model/vocab_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's word boundary */
#define SPM_SPACE_LEN 3
/* llama.cpp's default special ids where a file names none. */
#define LLAMA_DEFAULT_BOS 1
#define LLAMA_DEFAULT_EOS 2
#define GPT2_DEFAULT_BOS 11
#define GPT2_DEFAULT_EOS 11
/* tokenizer.ggml.token_type values */
enum { TYPE_UNDEFINED, TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER_DEFINED, TYPE_UNUSED,
       TYPE_BYTE };

#define TOKENS_KEY "tokenizer.ggml.tokens"
#define MERGES_KEY "tokenizer.ggml.merges"
#define TYPES_KEY "tokenizer.ggml.token_type"

/* Optional token id key: def when absent, else an id below n. */
static int token_id(const lt_gguf *g, const char *key, int32_t def, int64_t n, int32_t *out) {
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
    if (v >= n)
        return lt_error(LT_EFORMAT, "%s: %s = %lld is outside the vocabulary of %lld tokens",
                        lt__gguf_path(g), key, (long long)v, (long long)n);
    *out = (int32_t)v;
    return LT_OK;
}

/* Optional bool key: unchanged when absent. */
static int flag(const lt_gguf *g, const char *key, bool *out) {
    int st = lt_gguf_get_bool(g, key, out);
    return st == LT_ENOTFOUND ? LT_OK : st;
}

/* Token types as attributes; the array, if present, has one int32 per token. */
static int token_types(lt_vocab *v, const lt_gguf *g) {
    lt_gguf_type type;
    int64_t n;
    const void *data;
    int st = lt_gguf_get_arr(g, TYPES_KEY, &type, &n, &data);
    if (st == LT_ENOTFOUND) return LT_OK;
    if (st) return st;
    if (type != LT_GGUF_I32 || n != v->n)
        return lt_error(LT_EFORMAT, "%s: %s has %lld %s values for %lld tokens (one int32 per "
                        "token expected)", lt__gguf_path(g), TYPES_KEY, (long long)n,
                        lt__gguf_type_name(type), (long long)v->n);
    for (int64_t i = 0; i < n; i++) {
        int32_t t;
        memcpy(&t, (const char *)data + 4 * i, 4);
        switch (t) {
        case TYPE_NORMAL: v->attr[i] = LT__ATTR_NORMAL; break;
        case TYPE_UNKNOWN: v->attr[i] = LT__ATTR_UNKNOWN; break;
        case TYPE_CONTROL: v->attr[i] = LT__ATTR_CONTROL; break;
        case TYPE_USER_DEFINED: v->attr[i] = LT__ATTR_USER_DEFINED; break;
        case TYPE_UNUSED: v->attr[i] = LT__ATTR_UNUSED; break;
        case TYPE_BYTE: v->attr[i] = LT__ATTR_BYTE; break;
        default: v->attr[i] = 0; break; /* undefined, as llama.cpp reads unknown values */
        }
    }
    return LT_OK;
}

/* The last error again, prefixed with the file and what was read. */
static int wrap(int st, const char *path, const char *what) {
    char why[512];
    snprintf(why, sizeof why, "%s", lt_errmsg());
    return lt_error(st, "%s: %s%s", path, what, why);
}

static int merge_at(const void *g, int64_t i, const char **s, size_t *len) {
    return lt_gguf_arr_str(g, MERGES_KEY, i, s, len);
}

/* The byte-level BPE parts: pre-tokenizer, merges and what the pre-tokenizer
 * name implies for BOS. */
static int bpe_setup(lt_vocab *v, const lt_gguf *g) {
    const char *path = lt__gguf_path(g), *pre = "default";
    size_t pre_len = 7;
    int st = lt_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len);
    if (st == LT_ENOTFOUND) {
        /* llama.cpp warns and uses its default regexes */
        lt_log(LT_LOG_WARN, "%s: no tokenizer.ggml.pre: using the default pre-tokenizer (the "
                            "model's own may cut text differently)", path);
        pre = "default";
        pre_len = 7;
    } else if (st) {
        return st;
    }
    lt__pretok_info info;
    if ((st = lt__pretok_init(&v->pretok, pre, pre_len, &info)))
        return wrap(st, path, "tokenizer.ggml.pre: ");
    v->ignore_merges = info.ignore_merges;
    v->add_bos = info.add_bos;
    int64_t id;
    if (info.no_bos && lt_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &id) == LT_ENOTFOUND)
        v->bos = LT__NO_ID; /* no default BOS; a file's own still counts */
    lt_gguf_type type;
    int64_t n_merges;
    const void *data;
    st = lt_gguf_get_arr(g, MERGES_KEY, &type, &n_merges, &data);
    if (st == LT_ENOTFOUND)
        return lt_error(LT_EFORMAT, "%s: a gpt2 vocabulary without %s", path, MERGES_KEY);
    if (st) return st;
    if (type != LT_GGUF_STRING)
        return lt_error(LT_EFORMAT, "%s: %s is an array of %s, not of strings", path, MERGES_KEY,
                        lt__gguf_type_name(type));
    if ((st = lt__bpe_init(v, n_merges, merge_at, g))) return wrap(st, path, "");
    return LT_OK;
}

/* Everything after the pieces: types, ids, flags, the end-of-generation set. */
static int finish(lt_vocab *v, const lt_gguf *g) {
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"tokenizer.ggml.eot_token_id", offsetof(lt_vocab, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(lt_vocab, eom)},
        {"tokenizer.ggml.padding_token_id", offsetof(lt_vocab, pad)},
        {"tokenizer.ggml.fim_pad_token_id", offsetof(lt_vocab, fim_pad)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(lt_vocab, fim_rep)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(lt_vocab, fim_sep)},
    };
    int st = token_types(v, g);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && st == LT_OK; i++)
        st = token_id(g, keys[i].key, LT__NO_ID, v->n, (int32_t *)((char *)v + keys[i].off));
    if (st == LT_OK) st = flag(g, "tokenizer.ggml.add_bos_token", &v->add_bos);
    if (st == LT_OK) st = flag(g, "tokenizer.ggml.add_eos_token", &v->add_eos);
    if (st == LT_OK && v->kind == LT__VOCAB_SPM)
        st = flag(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
    if (st) return st;
    if (v->add_bos && v->bos == LT__NO_ID)
        return lt_error(LT_EFORMAT, "%s: the vocabulary adds BOS but has no BOS token",
                        lt__gguf_path(g));
    if (v->add_eos && v->eos == LT__NO_ID)
        return lt_error(LT_EFORMAT, "%s: the vocabulary adds EOS but has no EOS token",
                        lt__gguf_path(g));
    lt__vocab_mark_eog(v, true);
    return lt__vocab_index_special(v);
}

int lt_vocab_load_gguf(lt_vocab **out, const lt_gguf *g) {
    *out = NULL;
    const char *path = lt__gguf_path(g), *model;
    size_t len;
    bool bpe = false;
    int st = lt_gguf_get_str(g, "tokenizer.ggml.model", &model, &len);
    if (st && st != LT_ENOTFOUND) return st;
    if (st == LT_OK) {
        bpe = len == 4 && memcmp(model, "gpt2", 4) == 0;
        if (!bpe && !(len == 5 && memcmp(model, "llama", 5) == 0))
            return lt_error(LT_EUNSUPPORTED, "%s: tokenizer.ggml.model '%.*s' is not supported "
                            "(only 'llama' SentencePiece and 'gpt2' byte-level BPE "
                            "vocabularies)", path, (int)(len > 64 ? 64 : len), model);
    }
    lt_gguf_type type;
    int64_t n, n_scores = 0;
    const void *data;
    if ((st = lt_gguf_get_arr(g, TOKENS_KEY, &type, &n, &data))) return st;
    if (type != LT_GGUF_STRING || n == 0)
        return lt_error(LT_EFORMAT, "%s: %s is not a non-empty array of strings", path,
                        TOKENS_KEY);
    if (n > INT32_MAX)
        return lt_error(LT_EFORMAT, "%s: %s holds %lld tokens, more than an int32 id reaches",
                        path, TOKENS_KEY, (long long)n);
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
    /* llama.cpp's defaults, dropped where they fall outside the vocabulary */
    int32_t bos = bpe ? GPT2_DEFAULT_BOS : LLAMA_DEFAULT_BOS;
    int32_t eos = bpe ? GPT2_DEFAULT_EOS : LLAMA_DEFAULT_EOS;
    if (bos >= n) bos = LT__NO_ID;
    if (eos >= n) eos = LT__NO_ID;
    if ((st = token_id(g, "tokenizer.ggml.bos_token_id", bos, n, &bos)) ||
        (st = token_id(g, "tokenizer.ggml.eos_token_id", eos, n, &eos)))
        return st;

    /* Translated pieces are never longer than the originals: one blob holds them all. */
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *s;
        if ((st = lt_gguf_arr_str(g, TOKENS_KEY, i, &s, &len))) return st;
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
        lt_gguf_arr_str(g, TOKENS_KEY, i, &s, &len);
        pieces[i] = blob + pos;
        size_t start = pos;
        for (size_t k = 0; k < len;) {
            if (!bpe && len - k >= SPM_SPACE_LEN && memcmp(s + k, SPM_SPACE, SPM_SPACE_LEN) == 0) {
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
        st = wrap(st, path, "tokenizer: ");
        goto done;
    }
    if (bpe) {
        (*out)->add_bos = false; /* byte-level BPE's default; a pre-tokenizer may say otherwise */
        (*out)->add_space_prefix = false;
        st = bpe_setup(*out, g);
    }
    if (st == LT_OK) st = finish(*out, g);
    if (st) {
        lt_vocab_free(*out);
        *out = NULL;
    }
done:
    free(blob);
    free(pieces);
    free(lens);
    return st;
}
