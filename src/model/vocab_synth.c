/* Vocabularies the model generator embeds, in GGUF form (U+2581 for a space,
 * token types as llama.cpp reads them): a synthetic SentencePiece-style
 * vocabulary under which any text tokenizes, or a llama2.c tokenizer.bin. */
#include "model/model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPM_SPACE "\xe2\x96\x81"
#define N_SPECIAL 3
#define N_BYTES 256
#define N_PRINTABLE 95 /* ' ' .. '~' */
#define MAX_SYNTH_PIECE 64

/* Frequent words of simple English stories, most frequent first. Their
 * space-prefixed prefixes become pieces, so every one is reachable by
 * best-score merges. */
static const char *const story_words[] = {
    "the", "and", "a", "to", "was", "he", "she", "it", "they", "her", "his", "of", "in",
    "said", "with", "you", "on", "that", "had", "I", "him", "day", "Once", "upon", "time",
    "there", "little", "girl", "boy", "named", "Lily", "Tom", "Ben", "Sue", "Tim", "Max", "Mia",
    "play", "played", "happy", "big", "very", "saw", "went", "wanted", "liked", "loved", "mom",
    "dad", "friend", "friends", "park", "tree", "dog", "cat", "bird", "ball", "toy", "sun",
    "home", "house", "car", "box", "fun", "together", "smiled", "looked", "found", "help",
    "helped", "good", "sad", "were", "is", "not", "one", "for", "so", "all", "but", "at",
    "them", "did", "do", "can", "could", "would", "be", "have", "are", "we", "me", "my", "your",
    "this", "what", "when", "then", "up", "down", "out", "into", "from", "an", "no", "yes",
    "too", "new", "red", "blue", "green", "small", "nice", "kind", "sky", "water", "food",
    "cake", "book", "run", "ran", "jump", "jumped", "came", "come", "go", "get", "got", "see",
    "look", "make", "made", "thought", "knew", "know", "learned", "lesson", "always", "never",
    "every", "after", "before", "again", "away", "back", "because", "felt", "feel", "best",
    "other", "some", "many", "more", "also", "just", "like", "how", "why", "where", "who",
    "The", "She", "He", "They", "It", "One", "But", "When", "Then", "After",
};

void lt__vocab_arrays_free(lt__vocab_arrays *a) {
    if (!a) return;
    for (int64_t i = 0; a->pieces && i < a->n; i++) free(a->pieces[i]);
    free(a->pieces);
    free(a->lens);
    free(a->scores);
    free(a->types);
    memset(a, 0, sizeof *a);
}

static int arrays_alloc(lt__vocab_arrays *a, int64_t n) {
    memset(a, 0, sizeof *a);
    a->pieces = calloc((size_t)n, sizeof *a->pieces);
    a->lens = calloc((size_t)n, sizeof *a->lens);
    a->scores = calloc((size_t)n, sizeof *a->scores);
    a->types = calloc((size_t)n, sizeof *a->types);
    a->n = n;
    if (!a->pieces || !a->lens || !a->scores || !a->types) {
        lt__vocab_arrays_free(a);
        return lt_error(LT_ENOMEM, "vocabulary: out of memory for %lld tokens", (long long)n);
    }
    return LT_OK;
}

static int set_piece(lt__vocab_arrays *a, int64_t id, const char *s, size_t len, float score,
                     int32_t type) {
    if (!(a->pieces[id] = malloc(len + 1)))
        return lt_error(LT_ENOMEM, "vocabulary: out of memory");
    memcpy(a->pieces[id], s, len);
    a->pieces[id][len] = 0;
    a->lens[id] = len;
    a->scores[id] = score;
    a->types[id] = type;
    return LT_OK;
}

/* The specials every Llama vocabulary starts with (ids 0, 1, 2). */
static int fill_specials(lt__vocab_arrays *a) {
    static const char *const special[N_SPECIAL] = {"<unk>", "<s>", "</s>"};
    static const int32_t special_type[N_SPECIAL] = {LT__TOKEN_UNKNOWN, LT__TOKEN_CONTROL,
                                                    LT__TOKEN_CONTROL};
    int st = LT_OK;
    for (int i = 0; i < N_SPECIAL && !st; i++)
        st = set_piece(a, i, special[i], strlen(special[i]), 0.0f, special_type[i]);
    return st;
}

/* The 256 byte-fallback tokens <0x00>..<0xFF> after the specials. */
static int fill_bytes(lt__vocab_arrays *a) {
    int st = LT_OK;
    for (int b = 0; b < N_BYTES && !st; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        st = set_piece(a, N_SPECIAL + b, name, 6, 0.0f, LT__TOKEN_BYTE);
    }
    return st;
}

/* ---- a small string set for the synthetic pieces ------------------------------ */

typedef struct {
    const lt__vocab_arrays *a;
    int64_t *slot; /* ids, -1 = empty */
    size_t mask;
} piece_set;

static uint64_t hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

/* True if (s, n) is already piece of the set; otherwise *slot is where it goes. */
static bool set_find(const piece_set *ps, const char *s, size_t n, size_t *slot) {
    size_t i = (size_t)hash(s, n) & ps->mask;
    for (; ps->slot[i] >= 0; i = (i + 1) & ps->mask) {
        int64_t id = ps->slot[i];
        if (ps->a->lens[id] == n && memcmp(ps->a->pieces[id], s, n) == 0) return true;
    }
    *slot = i;
    return false;
}

/* Appends (s, n) as the next piece unless present; *next advances. */
static int add_piece(piece_set *ps, lt__vocab_arrays *a, int64_t *next, const char *s, size_t n) {
    size_t slot;
    if (*next >= a->n || set_find(ps, s, n, &slot)) return LT_OK;
    /* earlier pieces merge first: the score falls with the id */
    int st = set_piece(a, *next, s, n, -(float)(*next - N_SPECIAL - N_BYTES), LT__TOKEN_NORMAL);
    if (st) return st;
    ps->slot[slot] = *next;
    (*next)++;
    return LT_OK;
}

/* Adds "▁" + word's prefixes of length 1..len, shortest first. */
static int add_word(piece_set *ps, lt__vocab_arrays *a, int64_t *next, const char *w, size_t len) {
    char buf[MAX_SYNTH_PIECE];
    memcpy(buf, SPM_SPACE, 3);
    int st = LT_OK;
    for (size_t k = 1; k <= len && !st && *next < a->n; k++) {
        memcpy(buf + 3, w, k);
        st = add_piece(ps, a, next, buf, 3 + k);
    }
    return st;
}

int lt__vocab_synth(lt__vocab_arrays *a, int64_t n) {
    if (n < LT__SYNTH_VOCAB_MIN || n > INT32_MAX)
        return lt_error(LT_EINVAL, "synthetic vocabulary: vocab_size %lld must be at least %d "
                        "(3 specials, 256 bytes, the printable ASCII characters)",
                        (long long)n, LT__SYNTH_VOCAB_MIN);
    int st = arrays_alloc(a, n);
    if (st) return st;
    piece_set ps = {.a = a};
    size_t nslots = 64;
    while (nslots < 2 * (size_t)n) nslots *= 2;
    ps.slot = malloc(nslots * sizeof *ps.slot);
    ps.mask = nslots - 1;
    if (!ps.slot) {
        lt__vocab_arrays_free(a);
        return lt_error(LT_ENOMEM, "synthetic vocabulary: out of memory");
    }
    for (size_t i = 0; i < nslots; i++) ps.slot[i] = -1;
    st = fill_specials(a);
    if (!st) st = fill_bytes(a);
    int64_t next = N_SPECIAL + N_BYTES;
    /* single characters: the word boundary first, then printable ASCII */
    if (!st) st = add_piece(&ps, a, &next, SPM_SPACE, 3);
    for (int ch = '!'; ch <= '~' && !st; ch++) {
        char c = (char)ch;
        st = add_piece(&ps, a, &next, &c, 1);
    }
    for (size_t i = 0; i < sizeof story_words / sizeof story_words[0] && !st; i++)
        st = add_word(&ps, a, &next, story_words[i], strlen(story_words[i]));
    /* then every lowercase string by length: "▁a".."▁z", "▁aa".., prefix-closed */
    char w[MAX_SYNTH_PIECE];
    for (size_t len = 1; next < n && !st && len < sizeof w; len++) {
        memset(w, 'a', len);
        for (;;) {
            char buf[MAX_SYNTH_PIECE + 3];
            memcpy(buf, SPM_SPACE, 3);
            memcpy(buf + 3, w, len);
            if ((st = add_piece(&ps, a, &next, buf, 3 + len)) || next >= n) break;
            size_t k = len; /* odometer increment over 'a'..'z' */
            while (k > 0 && w[k - 1] == 'z') w[--k] = 'a';
            if (k == 0) break;
            w[k - 1]++;
        }
    }
    free(ps.slot);
    if (st) lt__vocab_arrays_free(a);
    return st;
}

/* ---- llama2.c tokenizer.bin ------------------------------------------------------ */

static bool is_byte_piece(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    return n == 6 && memcmp(s, "<0x", 3) == 0 && strchr(hex, s[3]) && strchr(hex, s[4]) &&
           s[3] && s[4] && s[5] == '>';
}

int lt__vocab_llama2c(lt__vocab_arrays *a, const char *path, int64_t n) {
    lt_vocab *v;
    int st = lt_vocab_load_llama2c(&v, path, n);
    if (st) return st;
    if ((st = arrays_alloc(a, n))) {
        lt_vocab_free(v);
        return st;
    }
    st = fill_specials(a); /* llama2.c stores "\n<s>\n" for <s>: use the names */
    for (int64_t id = N_SPECIAL; id < n && !st; id++) {
        size_t len;
        const char *p = lt_vocab_piece(v, (int32_t)id, &len);
        size_t spaces = 0;
        for (size_t k = 0; k < len; k++) spaces += p[k] == ' ';
        char *buf = malloc(len + 2 * spaces + 1);
        if (!buf) {
            st = lt_error(LT_ENOMEM, "%s: out of memory", path);
            break;
        }
        size_t o = 0;
        for (size_t k = 0; k < len; k++) {
            if (p[k] == ' ') {
                memcpy(buf + o, SPM_SPACE, 3);
                o += 3;
            } else {
                buf[o++] = p[k];
            }
        }
        int32_t type = is_byte_piece(p, len) ? LT__TOKEN_BYTE : LT__TOKEN_NORMAL;
        st = set_piece(a, id, buf, o, lt_vocab_score(v, (int32_t)id), type);
        free(buf);
    }
    lt_vocab_free(v);
    if (st) lt__vocab_arrays_free(a);
    return st;
}
