/* The tokenizer's front, for both kinds of vocabulary, as llama.cpp's
 * llama_tokenize does it: special tokens written in the text are cut out
 * first (control and unknown ones only when asked, user-defined ones
 * always), each stretch of text between them is encoded by the
 * vocabulary's kind, and BOS/EOS are added. */
#include "model/vocab_internal.h"

#include <stdlib.h>
#include <string.h>

#define NO_ID LT__NO_ID

typedef struct {
    int64_t off, len; /* bytes of the text */
    int32_t id;       /* a special token, or NO_ID: text to encode */
} fragment;

/* First occurrence of needle in hay, or NULL. */
static const char *find(const char *hay, size_t hl, const char *needle, size_t nl) {
    if (nl == 0 || nl > hl) return NULL;
    for (const char *p = hay, *end = hay + hl - nl + 1; p < end; p++) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p) return NULL;
        if (memcmp(p, needle, nl) == 0) return p;
    }
    return NULL;
}

/* Cuts the text fragments of *fr at every occurrence of each special token,
 * the longest tokens first. *fr holds at most 2 * len + 1 entries. */
static void partition(const lt_vocab *v, const char *text, int64_t len, bool parse_special,
                      fragment *fr, fragment *tmp, int64_t *n) {
    for (int64_t s = 0; s < v->n_special; s++) {
        int32_t id = v->special[s];
        if (!parse_special && (v->attr[id] & (LT__ATTR_CONTROL | LT__ATTR_UNKNOWN))) continue;
        size_t tl;
        const char *t = lt_vocab_piece(v, id, &tl);
        if (!find(text, (size_t)len, t, tl)) continue; /* most tokens appear nowhere */
        int64_t k = 0;
        for (int64_t f = 0; f < *n; f++) {
            if (fr[f].id != NO_ID) {
                tmp[k++] = fr[f];
                continue;
            }
            int64_t pos = fr[f].off, end = fr[f].off + fr[f].len;
            for (;;) {
                const char *m = find(text + pos, (size_t)(end - pos), t, tl);
                if (!m) break;
                int64_t at = m - text;
                if (at > pos) tmp[k++] = (fragment){.off = pos, .len = at - pos, .id = NO_ID};
                tmp[k++] = (fragment){.off = at, .len = (int64_t)tl, .id = id};
                pos = at + (int64_t)tl;
            }
            if (pos < end) tmp[k++] = (fragment){.off = pos, .len = end - pos, .id = NO_ID};
        }
        memcpy(fr, tmp, (size_t)k * sizeof *fr);
        *n = k;
    }
}

/* Encodes text[0, len) into ids: BOS first if bos, EOS last if eos. */
static int encode(const lt_vocab *v, const char *text, size_t len, bool bos, bool eos,
                  bool parse_special, int32_t *ids, int64_t max_ids, int64_t *n_ids) {
    if (!v || !text || !n_ids || (max_ids > 0 && !ids))
        return lt_error(LT_EINVAL, "tokenize: NULL argument");
    *n_ids = 0;
    if (bos && v->bos == NO_ID)
        return lt_error(LT_EINVAL, "tokenize: BOS requested but the vocabulary has none");
    if (eos && v->eos == NO_ID)
        return lt_error(LT_EINVAL, "tokenize: EOS requested but the vocabulary has none");
    if (len > (size_t)INT32_MAX / 4)
        return lt_error(LT_ERANGE, "tokenize: text of %zu bytes too long", len);
    size_t nfr = 2 * len + 1;
    fragment *fr = malloc(nfr * sizeof *fr), *tmp = malloc(nfr * sizeof *tmp);
    lt__ids out = {0};
    int rc = LT_OK;
    if (!fr || !tmp) {
        rc = lt_error(LT_ENOMEM, "tokenize: out of memory for %zu bytes", len);
        goto done;
    }
    int64_t n = 0;
    if (len) fr[n++] = (fragment){.off = 0, .len = (int64_t)len, .id = NO_ID};
    partition(v, text, (int64_t)len, parse_special, fr, tmp, &n);
    if (bos) rc = lt__ids_push(&out, v->bos);
    bool after_special = true; /* SentencePiece: the start counts as after a special token */
    for (int64_t f = 0; f < n && rc == LT_OK; f++) {
        if (fr[f].id != NO_ID) {
            rc = lt__ids_push(&out, fr[f].id);
            after_special = true;
        } else if (v->kind == LT__VOCAB_BPE) {
            rc = lt__bpe_encode(v, text + fr[f].off, (size_t)fr[f].len, &out);
        } else {
            rc = lt__spm_encode(v, text + fr[f].off, (size_t)fr[f].len,
                                v->add_space_prefix && after_special, &out);
            after_special = false;
        }
    }
    if (rc == LT_OK && eos) rc = lt__ids_push(&out, v->eos);
    if (rc == LT_OK && out.n > max_ids) {
        rc = lt_error(LT_ERANGE, "tokenize: %lld tokens do not fit in %lld ids",
                      (long long)out.n, (long long)max_ids);
    } else if (rc == LT_OK) {
        if (out.n) memcpy(ids, out.a, (size_t)out.n * sizeof *ids);
        *n_ids = out.n;
    }
done:
    free(fr);
    free(tmp);
    free(out.a);
    return rc;
}

int lt_tokenize(const lt_vocab *v, const char *text, bool add_bos, int32_t *ids,
                int64_t max_ids, int64_t *n_ids) {
    if (!text) return lt_error(LT_EINVAL, "tokenize: NULL argument");
    return encode(v, text, strlen(text), add_bos, false, false, ids, max_ids, n_ids);
}

int lt_tokenize_text(const lt_vocab *v, const char *text, size_t len, const lt_tokenize_opts *o,
                     int32_t *ids, int64_t max_ids, int64_t *n_ids) {
    if (!v || !o) return lt_error(LT_EINVAL, "tokenize: NULL argument");
    return encode(v, text, len, o->add_special && v->add_bos, o->add_special && v->add_eos,
                  o->parse_special, ids, max_ids, n_ids);
}
