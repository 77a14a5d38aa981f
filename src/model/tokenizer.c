/* SentencePiece-style BPE tokenizer for Llama vocabularies: the vocabulary
 * (from llama2.c's tokenizer.bin or from arrays) with a hash table for piece
 * lookup, encoding with byte fallback and best-score pair merges driven by a
 * heap, and decoding of one token. */
#include "model/vocab_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama2.c's tokenizer.bin carries no special ids: Llama vocabularies put
 * <unk>, <s>, </s> at 0, 1, 2. */
#define LLAMA2C_BOS 1
#define LLAMA2C_EOS 2
/* A piece longer than this is not a token but a corrupt length field. */
#define MAX_PIECE_LEN (1 << 16)
#define NO_ID LT__NO_ID

/* ---- piece hash table ------------------------------------------------------ */

/* FNV-1a, continued over a second string so a pair needs no concatenation. */
static uint64_t fnv1a(uint64_t h, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

/* Id of the piece equal to a ++ b (b may be empty), or NO_ID. */
static int32_t lookup2(const lt_vocab *v, const char *a, size_t la, const char *b, size_t lb) {
    if (la + lb > v->max_len || la + lb == 0) return NO_ID;
    uint64_t h = fnv1a(fnv1a(FNV_INIT, a, la), b, lb);
    for (size_t i = (size_t)h & v->slot_mask;; i = (i + 1) & v->slot_mask) {
        int32_t id = v->slots[i];
        if (id == NO_ID) return NO_ID;
        const char *p = v->blob + v->off[id];
        if (v->len[id] == la + lb && memcmp(p, a, la) == 0 && memcmp(p + la, b, lb) == 0)
            return id;
    }
}

static int32_t lookup(const lt_vocab *v, const char *s, size_t len) {
    return lookup2(v, s, len, "", 0);
}

int32_t lt__vocab_lookup(const lt_vocab *v, const char *s, size_t len) {
    return lookup(v, s, len);
}

void lt_vocab_free(lt_vocab *v) {
    if (!v) return;
    free(v->blob);
    free(v->off);
    free(v->len);
    free(v->scores);
    free(v->attr);
    free(v->slots);
    free(v->special);
    free(v->merges);
    lt__pretok_free(v->pretok);
    free(v);
}

/* Builds a vocabulary from validated arrays (copied). Duplicate pieces map
 * to their lowest id. */
static int vocab_build(lt_vocab **out, int64_t n, const char *const *pieces, const size_t *lens,
                       const float *scores, int32_t bos, int32_t eos) {
    *out = NULL;
    lt_vocab *v = calloc(1, sizeof *v);
    if (!v) return lt_error(LT_ENOMEM, "vocabulary: out of memory");
    v->kind = LT__VOCAB_SPM;
    v->n = n;
    v->bos = bos;
    v->eos = eos;
    v->eot = v->eom = v->pad = v->fim_pad = v->fim_rep = v->fim_sep = NO_ID;
    v->add_bos = true; /* SentencePiece's defaults, as llama.cpp's */
    v->add_space_prefix = true;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total += lens[i] + 1;
    size_t nslots = 16;
    while (nslots < 2 * (size_t)n) nslots *= 2;
    v->blob = malloc(total);
    v->off = malloc((size_t)n * sizeof *v->off);
    v->len = malloc((size_t)n * sizeof *v->len);
    v->scores = malloc((size_t)n * sizeof *v->scores);
    v->attr = malloc((size_t)n);
    v->slots = malloc(nslots * sizeof *v->slots);
    if (!v->blob || !v->off || !v->len || !v->scores || !v->attr || !v->slots) {
        lt_vocab_free(v);
        return lt_error(LT_ENOMEM, "vocabulary: out of memory for %lld pieces", (long long)n);
    }
    v->slot_mask = nslots - 1;
    for (size_t i = 0; i < nslots; i++) v->slots[i] = NO_ID;
    size_t pos = 0;
    for (int64_t i = 0; i < n; i++) {
        v->off[i] = pos;
        v->len[i] = lens[i];
        v->scores[i] = scores ? scores[i] : 0.0f;
        v->attr[i] = LT__ATTR_NORMAL;
        if (lens[i]) memcpy(v->blob + pos, pieces[i], lens[i]);
        v->blob[pos + lens[i]] = '\0';
        pos += lens[i] + 1;
        if (lens[i] > v->max_len) v->max_len = lens[i];
    }
    for (int64_t i = 0; i < n; i++) {
        if (v->len[i] == 0 || lookup(v, v->blob + v->off[i], v->len[i]) != NO_ID) continue;
        uint64_t h = fnv1a(FNV_INIT, v->blob + v->off[i], v->len[i]);
        size_t s = (size_t)h & v->slot_mask;
        while (v->slots[s] != NO_ID) s = (s + 1) & v->slot_mask;
        v->slots[s] = (int32_t)i;
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        v->byte_id[b] = lookup(v, name, 6);
    }
    /* without token types nothing becomes a control token: the pieces
     * encode as text, as they always have */
    lt__vocab_mark_eog(v, false);
    *out = v;
    return LT_OK;
}

int lt_vocab_from_arrays(lt_vocab **out, int64_t n, const char *const *pieces,
                         const size_t *lens, const float *scores, int32_t bos, int32_t eos) {
    if (!out || !pieces) return lt_error(LT_EINVAL, "vocabulary: NULL argument");
    *out = NULL;
    if (n <= 0 || n > INT32_MAX)
        return lt_error(LT_EINVAL, "vocabulary: size %lld out of range", (long long)n);
    if (bos < NO_ID || bos >= n || eos < NO_ID || eos >= n)
        return lt_error(LT_EINVAL, "vocabulary: bos %d / eos %d outside [0, %lld)", (int)bos,
                        (int)eos, (long long)n);
    size_t *tmp = NULL;
    if (!lens) { /* NUL-terminated pieces */
        tmp = malloc((size_t)n * sizeof *tmp);
        if (!tmp) return lt_error(LT_ENOMEM, "vocabulary: out of memory");
        for (int64_t i = 0; i < n; i++) tmp[i] = pieces[i] ? strlen(pieces[i]) : 0;
        lens = tmp;
    }
    int rc = LT_OK;
    for (int64_t i = 0; i < n && rc == LT_OK; i++) {
        if (lens[i] > MAX_PIECE_LEN || (lens[i] && !pieces[i]))
            rc = lt_error(LT_EINVAL, "vocabulary: piece %lld: length %zu invalid", (long long)i,
                          lens[i]);
        else if (scores && isnan(scores[i]))
            rc = lt_error(LT_EINVAL, "vocabulary: piece %lld: score is NaN", (long long)i);
    }
    if (rc == LT_OK) rc = vocab_build(out, n, pieces, lens, scores, bos, eos);
    free(tmp);
    return rc;
}

/* ---- llama2.c tokenizer.bin -------------------------------------------------- */

static int read_file(const char *path, unsigned char **data, size_t *size) {
    *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return lt_error(LT_EIO, "%s: cannot open: %s", path, strerror(errno));
    long end = -1;
    if (fseek(f, 0, SEEK_END) == 0) end = ftell(f);
    if (end < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return lt_error(LT_EIO, "%s: cannot determine size", path);
    }
    unsigned char *buf = malloc(end ? (size_t)end : 1);
    if (!buf) {
        fclose(f);
        return lt_error(LT_ENOMEM, "%s: out of memory for %ld bytes", path, end);
    }
    size_t got = fread(buf, 1, (size_t)end, f);
    fclose(f);
    if (got != (size_t)end) {
        free(buf);
        return lt_error(LT_EIO, "%s: short read (%zu of %ld bytes)", path, got, end);
    }
    *data = buf;
    *size = (size_t)end;
    return LT_OK;
}

static int32_t get_i32(const unsigned char *p) {
    int32_t x;
    memcpy(&x, p, 4); /* the format is little-endian, as is every host we build for */
    return x;
}

/* Reads tokenizer.bin: int32 max_token_length, then vocab_size records of
 * float32 score, int32 length, bytes. The file must hold exactly vocab_size
 * records. */
int lt_vocab_load_llama2c(lt_vocab **out, const char *path, int64_t vocab_size) {
    if (!out || !path) return lt_error(LT_EINVAL, "tokenizer: NULL argument");
    *out = NULL;
    if (vocab_size <= LLAMA2C_EOS || vocab_size > INT32_MAX)
        return lt_error(LT_EINVAL, "%s: vocab_size %lld out of range", path,
                        (long long)vocab_size);
    unsigned char *data = NULL;
    size_t size = 0;
    int rc = read_file(path, &data, &size);
    if (rc < 0) return rc;
    const char **pieces = malloc((size_t)vocab_size * sizeof *pieces);
    size_t *lens = malloc((size_t)vocab_size * sizeof *lens);
    float *scores = malloc((size_t)vocab_size * sizeof *scores);
    if (!pieces || !lens || !scores) {
        rc = lt_error(LT_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (size < 4) {
        rc = lt_error(LT_EFORMAT, "%s: truncated header (%zu bytes)", path, size);
        goto done;
    }
    int32_t max_len = get_i32(data);
    if (max_len <= 0 || max_len > MAX_PIECE_LEN) {
        rc = lt_error(LT_EFORMAT, "%s: max_token_length %d out of range", path, (int)max_len);
        goto done;
    }
    size_t pos = 4;
    for (int64_t i = 0; i < vocab_size; i++) {
        if (size - pos < 8) {
            rc = lt_error(LT_EFORMAT, "%s: truncated: holds %lld tokens, expected vocab_size %lld",
                          path, (long long)i, (long long)vocab_size);
            goto done;
        }
        memcpy(&scores[i], data + pos, 4);
        int32_t len = get_i32(data + pos + 4);
        pos += 8;
        if (len < 0 || len > max_len) {
            rc = lt_error(LT_EFORMAT, "%s: token %lld: length %d outside [0, %d]", path,
                          (long long)i, (int)len, (int)max_len);
            goto done;
        }
        if (isnan(scores[i])) {
            rc = lt_error(LT_EFORMAT, "%s: token %lld: score is NaN", path, (long long)i);
            goto done;
        }
        if (size - pos < (size_t)len) {
            rc = lt_error(LT_EFORMAT, "%s: truncated inside token %lld (length %d)", path,
                          (long long)i, (int)len);
            goto done;
        }
        pieces[i] = (const char *)data + pos;
        lens[i] = (size_t)len;
        pos += (size_t)len;
    }
    if (pos != size) {
        rc = lt_error(LT_EFORMAT, "%s: %zu bytes after token %lld: file holds more than "
                      "vocab_size %lld tokens", path, size - pos, (long long)vocab_size - 1,
                      (long long)vocab_size);
        goto done;
    }
    rc = vocab_build(out, vocab_size, pieces, lens, scores, LLAMA2C_BOS, LLAMA2C_EOS);
done:
    free(pieces);
    free(lens);
    free(scores);
    free(data);
    return rc;
}

/* ---- accessors --------------------------------------------------------------- */

int64_t lt_vocab_size(const lt_vocab *v) { return v->n; }
int32_t lt_vocab_bos(const lt_vocab *v) { return v->bos; }
int32_t lt_vocab_eos(const lt_vocab *v) { return v->eos; }
bool lt_vocab_add_bos(const lt_vocab *v) { return v->add_bos; }
bool lt_vocab_add_eos(const lt_vocab *v) { return v->add_eos; }

/* Piece text, NUL-terminated, owned by v. An id outside the vocabulary gives
 * "" (length 0). */
const char *lt_vocab_piece(const lt_vocab *v, int32_t id, size_t *len) {
    if (id < 0 || id >= v->n) {
        if (len) *len = 0;
        return "";
    }
    if (len) *len = v->len[id];
    return v->blob + v->off[id];
}

float lt_vocab_score(const lt_vocab *v, int32_t id) {
    return id >= 0 && id < v->n ? v->scores[id] : -INFINITY;
}

/* ---- encoding ---------------------------------------------------------------- */

/* Length of the well-formed UTF-8 sequence at s (Unicode table 3-7), or 1
 * when the byte at s does not start one: a bad byte is a unit of its own. */
size_t lt__utf8_unit(const unsigned char *s, size_t rem) {
    unsigned c = s[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0) lo = 0xa0;       /* no overlongs */
        else if (c == 0xed) hi = 0x9f;  /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0) lo = 0x90;
        else if (c == 0xf4) hi = 0x8f;  /* nothing past U+10FFFF */
    } else
        return 1;
    if (rem < n || s[1] < lo || s[1] > hi) return 1;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 1;
    return n;
}

/* A candidate merge of symbol `left` with its right neighbour, valid while
 * both still hold the ids it was made from. */
struct lt__cand {
    float score;
    int32_t left, right;
    int32_t lid, rid, merged;
};
typedef struct lt__cand cand;

/* Heap order: higher score first, then the leftmost pair. Symbols never
 * move and a merge keeps the left index, so index order is text order. */
static int cand_before(const cand *a, const cand *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct {
    cand *a;
    size_t n;
} heap;

static void heap_push(heap *h, cand c) {
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_before(&c, &h->a[p])) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = c;
}

static cand heap_pop(heap *h) {
    cand top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && cand_before(&h->a[c + 1], &h->a[c])) c++;
        if (!cand_before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = last;
    return top;
}

/* Pushes the merge of symbol l with symbol r if the vocabulary merges their
 * ids: SentencePiece vocabularies when the concatenation is a piece (its
 * score ranks it), byte-level BPE vocabularies by the merge list (the
 * earlier merge first). */
static void try_pair(const lt_vocab *v, const lt__sym *sym, heap *h, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    int32_t a = sym[l].id, b = sym[r].id, m;
    float score;
    if (a == NO_ID || b == NO_ID) return;
    if (v->kind == LT__VOCAB_BPE) {
        int32_t rank;
        if (!lt__bpe_pair(v, a, b, &rank, &m)) return;
        score = -(float)rank; /* exact: ranks stay below 2^24 */
    } else {
        m = lookup2(v, v->blob + v->off[a], v->len[a], v->blob + v->off[b], v->len[b]);
        if (m == NO_ID) return;
        score = v->scores[m];
    }
    heap_push(h, (cand){.score = score, .left = l, .right = r, .lid = a, .rid = b, .merged = m});
}

int lt__merge_scratch(lt__merge_buf *buf, int64_t n_symbols) {
    size_t need = 3 * (size_t)n_symbols + 3;
    if (need <= buf->cap) return LT_OK;
    cand *a = realloc(buf->a, need * sizeof *a);
    if (!a) return lt_error(LT_ENOMEM, "tokenize: out of memory for %lld symbols",
                            (long long)n_symbols);
    buf->a = a;
    buf->cap = need;
    return LT_OK;
}

void lt__merge_scratch_free(lt__merge_buf *buf) {
    free(buf->a);
    buf->a = NULL;
    buf->cap = 0;
}

void lt__merge(const lt_vocab *v, lt__sym *sym, int32_t n, lt__merge_buf *buf) {
    LT_ASSERT(buf->cap >= 3 * (size_t)n + 3);
    heap h = {.a = buf->a, .n = 0};
    for (int32_t i = 0; i < n; i++) {
        sym[i].prev = i - 1;
        sym[i].next = i + 1 < n ? i + 1 : -1;
    }
    for (int32_t i = 0; i + 1 < n; i++) try_pair(v, sym, &h, i, i + 1);
    /* Merge the best pair until none is left; stale candidates (a side was
     * merged away or changed since) are dropped as they surface. Each merge
     * adds at most two candidates, so the heap holds at most 3n. */
    while (h.n) {
        cand c = heap_pop(&h);
        lt__sym *l = &sym[c.left], *r = &sym[c.right];
        if (l->id != c.lid || r->id != c.rid || l->next != c.right) continue;
        l->id = c.merged;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = c.left;
        r->id = NO_ID;
        r->prev = r->next = -1;
        try_pair(v, sym, &h, l->prev, c.left);
        try_pair(v, sym, &h, c.left, l->next);
    }
}

int lt__ids_push(lt__ids *o, int32_t id) {
    if (o->n == o->cap) {
        int64_t cap = o->cap ? 2 * o->cap : 64;
        int32_t *a = realloc(o->a, (size_t)cap * sizeof *a);
        if (!a) return lt_error(LT_ENOMEM, "tokenize: out of memory for %lld ids", (long long)cap);
        o->a = a;
        o->cap = cap;
    }
    o->a[o->n++] = id;
    return LT_OK;
}

/* Appends the symbols of one text unit: its piece, else one byte token per byte. */
static int push_unit(const lt_vocab *v, lt__sym *sym, int32_t *n, const char *s, size_t len) {
    int32_t id = lookup(v, s, len);
    if (id != NO_ID) {
        sym[(*n)++].id = id;
        return LT_OK;
    }
    for (size_t i = 0; i < len; i++) {
        int32_t b = v->byte_id[(unsigned char)s[i]];
        if (b == NO_ID)
            return lt_error(LT_ENOTFOUND, "tokenize: byte 0x%02X has no piece and the "
                            "vocabulary has no <0x%02X> byte token", (unsigned char)s[i],
                            (unsigned char)s[i]);
        sym[(*n)++].id = b;
    }
    return LT_OK;
}

int lt__spm_encode(const lt_vocab *v, const char *text, size_t tlen, bool prefix, lt__ids *out) {
    /* every byte gives at most one symbol, plus the dummy prefix */
    lt__sym *sym = malloc((tlen + 1) * sizeof *sym);
    lt__merge_buf buf = {0};
    int rc = sym ? lt__merge_scratch(&buf, (int64_t)tlen + 1)
                 : lt_error(LT_ENOMEM, "tokenize: out of memory for %zu bytes", tlen);
    int32_t n = 0;
    if (rc == LT_OK && prefix) rc = push_unit(v, sym, &n, " ", 1); /* the dummy prefix */
    for (size_t i = 0; i < tlen && rc == LT_OK;) {
        size_t u = lt__utf8_unit((const unsigned char *)text + i, tlen - i);
        rc = push_unit(v, sym, &n, text + i, u);
        i += u;
    }
    if (rc == LT_OK) {
        lt__merge(v, sym, n, &buf);
        for (int32_t i = n ? 0 : -1; i >= 0 && rc == LT_OK; i = sym[i].next)
            rc = lt__ids_push(out, sym[i].id);
    }
    free(sym);
    lt__merge_scratch_free(&buf);
    return rc;
}

/* ---- decoding ---------------------------------------------------------------- */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Writes the text of `id` into buf (truncated to n-1 bytes, NUL-terminated
 * when n > 0) and returns its full length, as snprintf does. An id outside
 * the vocabulary decodes to "". */
size_t lt_detokenize(const lt_vocab *v, int32_t prev, int32_t id, char *buf, size_t n) {
    size_t len;
    const char *p = lt_vocab_piece(v, id, &len);
    if (v->kind == LT__VOCAB_BPE && len > 0) {
        /* control and user-defined tokens read as written, the others
         * through the byte mapping */
        if (v->attr[id] & (LT__ATTR_CONTROL | LT__ATTR_USER_DEFINED)) {
            if (n > 0) memcpy(buf, p, len < n ? len : n);
        } else {
            len = lt__bpe_decode(p, len, buf, n);
        }
        if (n > 0) buf[len < n - 1 ? len : n - 1] = '\0';
        return len;
    }
    /* the dummy prefix space belongs to no text after BOS */
    if (prev != NO_ID && prev == v->bos && len > 0 && p[0] == ' ') {
        p++;
        len--;
    }
    char byte;
    if (len == 6 && memcmp(p, "<0x", 3) == 0 && p[5] == '>' && hexval(p[3]) >= 0 &&
        hexval(p[4]) >= 0) {
        byte = (char)(hexval(p[3]) * 16 + hexval(p[4]));
        p = &byte;
        len = 1;
    }
    if (n > 0) {
        size_t w = len < n - 1 ? len : n - 1;
        memcpy(buf, p, w);
        buf[w] = '\0';
    }
    return len;
}
