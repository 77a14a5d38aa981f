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

/* A growing list of fragments. */
typedef struct {
    fragment *a;
    int64_t n, cap;
} fragments;

static int frag_push(fragments *f, fragment x) {
    if (f->n == f->cap) {
        int64_t cap = f->cap ? 2 * f->cap : 16;
        fragment *a = realloc(f->a, (size_t)cap * sizeof *a);
        if (!a) return lt_error(LT_ENOMEM, "tokenize: out of memory for %lld fragments",
                                (long long)cap);
        f->a = a;
        f->cap = cap;
    }
    f->a[f->n++] = x;
    return LT_OK;
}

/* Cuts the text fragments of *fr at every occurrence of each special token,
 * the longest tokens first (tmp: scratch, swapped with *fr). */
static int partition(const lt_vocab *v, const char *text, int64_t len, bool parse_special,
                     fragments *fr, fragments *tmp) {
    int rc = LT_OK;
    for (int64_t s = 0; s < v->n_special && rc == LT_OK; s++) {
        int32_t id = v->special[s];
        if (!parse_special && (v->attr[id] & (LT__ATTR_CONTROL | LT__ATTR_UNKNOWN))) continue;
        size_t tl;
        const char *t = lt_vocab_piece(v, id, &tl);
        if (!find(text, (size_t)len, t, tl)) continue; /* most tokens appear nowhere */
        tmp->n = 0;
        for (int64_t f = 0; f < fr->n && rc == LT_OK; f++) {
            fragment x = fr->a[f];
            if (x.id != NO_ID) {
                rc = frag_push(tmp, x);
                continue;
            }
            int64_t pos = x.off, end = x.off + x.len;
            const char *m;
            while (rc == LT_OK && (m = find(text + pos, (size_t)(end - pos), t, tl))) {
                int64_t at = m - text;
                if (at > pos) rc = frag_push(tmp, (fragment){pos, at - pos, NO_ID});
                if (rc == LT_OK) rc = frag_push(tmp, (fragment){at, (int64_t)tl, id});
                pos = at + (int64_t)tl;
            }
            if (rc == LT_OK && pos < end) rc = frag_push(tmp, (fragment){pos, end - pos, NO_ID});
        }
        fragments swap = *fr;
        *fr = *tmp;
        *tmp = swap;
    }
    return rc;
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
    fragments fr = {0}, tmp = {0};
    lt__ids out = {0};
    int rc = len ? frag_push(&fr, (fragment){0, (int64_t)len, NO_ID}) : LT_OK;
    if (rc == LT_OK) rc = partition(v, text, (int64_t)len, parse_special, &fr, &tmp);
    if (rc == LT_OK && bos) rc = lt__ids_push(&out, v->bos);
    bool after_special = true; /* SentencePiece: the start counts as after a special token */
    for (int64_t f = 0; f < fr.n && rc == LT_OK; f++) {
        const fragment *x = &fr.a[f];
        if (x->id != NO_ID) {
            rc = lt__ids_push(&out, x->id);
            after_special = true;
        } else if (v->kind == LT__VOCAB_BPE) {
            rc = lt__bpe_encode(v, text + x->off, (size_t)x->len, &out);
        } else {
            rc = lt__spm_encode(v, text + x->off, (size_t)x->len,
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
    free(fr.a);
    free(tmp.a);
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
