/* Byte-level BPE (GPT-2 style, tokenizer.ggml.model = gpt2): the mapping of
 * the 256 bytes to printable characters the pieces are written in, the
 * merge table (rank = position in tokenizer.ggml.merges), and the encoding
 * of text: pre-tokenizer words, each word's bytes as characters, merged by
 * rank with the merge engine of tokenizer.c. */
#include "model/vocab_internal.h"

#include <stdlib.h>
#include <string.h>

#define NO_ID LT__NO_ID
#define EMPTY_SLOT UINT64_MAX
/* Ranks become float scores in the merge engine: exact below 2^24. */
#define MAX_MERGES (1 << 24)
#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */

/* GPT-2's bytes_to_unicode: the printable bytes ('!'..'~', U+00A1..U+00AC,
 * U+00AE..U+00FF) stand for themselves; the other 68, in byte order, for
 * U+0100 onwards: 0x00..0x20, then 0x7F..0xA0, then 0xAD. */
static bool printable(uint32_t c) {
    return (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff);
}

static uint32_t byte_cp(unsigned b) {
    if (printable(b)) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b <= 0xa0) return 0x121 + (b - 0x7f);
    return 0x143; /* 0xAD */
}

/* The byte codepoint cp stands for, or -1. */
static int cp_byte(uint32_t cp) {
    if (cp < 0x100) return printable(cp) ? (int)cp : -1;
    if (cp <= 0x120) return (int)(cp - 0x100);
    if (cp <= 0x142) return (int)(cp - 0x121 + 0x7f);
    return cp == 0x143 ? 0xad : -1;
}

/* UTF-8 of codepoint cp < 0x800; returns the length. */
static size_t put_cp(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* ---- merge table ------------------------------------------------------------- */

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

bool lt__bpe_pair(const lt_vocab *v, int32_t a, int32_t b, int32_t *rank, int32_t *merged) {
    uint64_t key = pair_key(a, b);
    for (size_t i = (size_t)mix(key) & v->merge_mask;; i = (i + 1) & v->merge_mask) {
        const lt__bpe_merge *m = &v->merges[i];
        if (m->key == EMPTY_SLOT) return false;
        if (m->key == key) {
            *rank = m->rank;
            *merged = m->merged;
            return true;
        }
    }
}

/* The id of `len` bytes of a merges line, or an error naming the merge. */
static int merge_side(const lt_vocab *v, int64_t i, const char *s, size_t len, int32_t *id) {
    *id = lt__vocab_lookup(v, s, len);
    if (*id == NO_ID)
        return lt_error(LT_EFORMAT, "tokenizer.ggml.merges[%lld] names '%.*s', which is not a "
                        "token", (long long)i, (int)(len > 64 ? 64 : len), s);
    return LT_OK;
}

int lt__bpe_init(lt_vocab *v, int64_t n_merges,
                 int (*get)(const void *ctx, int64_t i, const char **s, size_t *len),
                 const void *ctx) {
    v->kind = LT__VOCAB_BPE;
    for (unsigned b = 0; b < 256; b++) {
        char c[2];
        v->byte_id[b] = lt__vocab_lookup(v, c, put_cp(c, byte_cp(b)));
    }
    if (n_merges <= 0)
        return lt_error(LT_EFORMAT, "tokenizer.ggml.merges is empty: a gpt2 vocabulary needs "
                        "its merges");
    if (n_merges > MAX_MERGES)
        return lt_error(LT_EFORMAT, "tokenizer.ggml.merges has %lld entries, more than %d",
                        (long long)n_merges, MAX_MERGES);
    size_t nslots = 16;
    while (nslots < 2 * (size_t)n_merges) nslots *= 2;
    v->merges = malloc(nslots * sizeof *v->merges);
    if (!v->merges)
        return lt_error(LT_ENOMEM, "out of memory for %lld merges", (long long)n_merges);
    v->merge_mask = nslots - 1;
    for (size_t i = 0; i < nslots; i++) v->merges[i].key = EMPTY_SLOT;
    for (int64_t i = 0; i < n_merges; i++) {
        const char *s;
        size_t len;
        int st = get(ctx, i, &s, &len);
        if (st) return st;
        /* "LEFT RIGHT": the first space after the first byte separates them
         * (a side never holds a space: the mapping writes it as U+0120) */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp || sp + 1 == s + len || memchr(sp + 1, ' ', (size_t)(s + len - sp - 1)))
            return lt_error(LT_EFORMAT, "tokenizer.ggml.merges[%lld] '%.*s' is not two tokens "
                            "separated by one space", (long long)i, (int)(len > 64 ? 64 : len),
                            s);
        size_t la = (size_t)(sp - s), lb = len - la - 1;
        int32_t a, b, m;
        if ((st = merge_side(v, i, s, la, &a)) || (st = merge_side(v, i, sp + 1, lb, &b)))
            return st;
        char *cat = malloc(la + lb);
        if (!cat) return lt_error(LT_ENOMEM, "out of memory");
        memcpy(cat, s, la);
        memcpy(cat + la, sp + 1, lb);
        m = lt__vocab_lookup(v, cat, la + lb);
        free(cat);
        if (m == NO_ID)
            return lt_error(LT_EFORMAT, "tokenizer.ggml.merges[%lld] '%.*s' makes '%.*s%.*s', "
                            "which is not a token", (long long)i, (int)(len > 64 ? 64 : len), s,
                            (int)(la > 32 ? 32 : la), s, (int)(lb > 32 ? 32 : lb), sp + 1);
        uint64_t key = pair_key(a, b);
        size_t k = (size_t)mix(key) & v->merge_mask;
        while (v->merges[k].key != EMPTY_SLOT && v->merges[k].key != key)
            k = (k + 1) & v->merge_mask;
        if (v->merges[k].key == key) continue; /* a repeated pair keeps its first rank */
        v->merges[k] = (lt__bpe_merge){.key = key, .rank = (int32_t)i, .merged = m};
    }
    v->n_merges = n_merges;
    return LT_OK;
}

/* ---- encoding ------------------------------------------------------------------ */

/* Appends the ids of one pre-tokenizer word (raw bytes). */
static int encode_word(const lt_vocab *v, const char *w, size_t len, lt__sym *sym, char *mapped,
                       lt__merge_buf *buf, lt__ids *out) {
    if (v->ignore_merges) { /* a word that is a token is that token */
        size_t m = 0;
        for (size_t i = 0; i < len; i++) m += put_cp(mapped + m, byte_cp((unsigned char)w[i]));
        int32_t id = lt__vocab_lookup(v, mapped, m);
        if (id != NO_ID) return lt__ids_push(out, id);
    }
    for (size_t i = 0; i < len; i++) sym[i].id = v->byte_id[(unsigned char)w[i]];
    lt__merge(v, sym, (int32_t)len, buf);
    int rc = LT_OK;
    /* a byte without a token stays unmerged and is dropped, as llama.cpp does */
    for (int32_t i = len ? 0 : -1; i >= 0 && rc == LT_OK; i = sym[i].next)
        if (sym[i].id != NO_ID) rc = lt__ids_push(out, sym[i].id);
    return rc;
}

int lt__bpe_encode(const lt_vocab *v, const char *text, size_t len, lt__ids *out) {
    if (len == 0) return LT_OK;
    if (len > (size_t)INT32_MAX / 4)
        return lt_error(LT_ERANGE, "tokenize: text of %zu bytes too long", len);
    /* The regexes see valid UTF-8: a byte that starts no well-formed
     * sequence reads as U+FFFD, as llama.cpp reads it. */
    size_t n = 0;
    for (size_t i = 0, u; i < len; i += u) {
        u = lt__utf8_unit((const unsigned char *)text + i, len - i);
        n += u == 1 && (unsigned char)text[i] >= 0x80 ? 3 : u;
    }
    char *clean = malloc(n);
    int64_t *offs = malloc(n * sizeof *offs), *lens = malloc(n * sizeof *lens);
    lt__sym *sym = NULL;
    char *mapped = NULL;
    lt__merge_buf buf = {0};
    int rc = LT_OK;
    if (!clean || !offs || !lens) {
        rc = lt_error(LT_ENOMEM, "tokenize: out of memory for %zu bytes", len);
        goto done;
    }
    n = 0;
    for (size_t i = 0, u; i < len; i += u) {
        u = lt__utf8_unit((const unsigned char *)text + i, len - i);
        bool bad = u == 1 && (unsigned char)text[i] >= 0x80;
        memcpy(clean + n, bad ? REPLACEMENT : text + i, bad ? 3 : u);
        n += bad ? 3 : u;
    }
    int64_t n_words = 0, longest = 0;
    if ((rc = lt__pretok_split(v->pretok, clean, (int64_t)n, offs, lens, &n_words))) goto done;
    for (int64_t i = 0; i < n_words; i++)
        if (lens[i] > longest) longest = lens[i];
    /* scratch for the longest word serves every word */
    sym = malloc((size_t)longest * sizeof *sym);
    mapped = malloc(2 * (size_t)longest);
    if (!sym || !mapped) {
        rc = lt_error(LT_ENOMEM, "tokenize: out of memory for a word of %lld bytes",
                      (long long)longest);
        goto done;
    }
    if ((rc = lt__merge_scratch(&buf, longest))) goto done;
    for (int64_t i = 0; i < n_words && rc == LT_OK; i++)
        rc = encode_word(v, clean + offs[i], (size_t)lens[i], sym, mapped, &buf, out);
done:
    free(clean);
    free(offs);
    free(lens);
    free(sym);
    free(mapped);
    lt__merge_scratch_free(&buf);
    return rc;
}

/* ---- decoding ------------------------------------------------------------------ */

size_t lt__bpe_decode(const char *piece, size_t len, char *out, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        const unsigned char *s = (const unsigned char *)piece + i;
        size_t u = lt__utf8_unit(s, len - i);
        uint32_t cp = u == 1 ? s[0] : u == 2 ? (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f)
                                             : UINT32_MAX;
        int b = cp_byte(cp);
        if (b >= 0) {
            if (k < n) out[k] = (char)b;
            k++;
        } else { /* not a mapped character: kept as written */
            for (size_t j = 0; j < u; j++, k++)
                if (k < n) out[k] = (char)s[j];
        }
        i += u;
    }
    return k;
}
