/* Tokenizer: known Llama 2 encodings, byte fallback derived from the
 * vocabulary file, round trips, agreement with a brute-force reference BPE
 * written independently here, synthetic merge-order cases, and rejection of
 * corrupt tokenizer files. */
#include "looptune/model.h"
#include "test.h"

#include <stdint.h>
#include <time.h>

#define LLAMA2_VOCAB 32000

static char data_path[1024];
static char work_dir[1024];

/* ---- an independent reading of the file, for references ------------------- */

typedef struct {
    int64_t n;
    char **piece;   /* NUL-terminated copies */
    size_t *len;
    float *score;
    int32_t *sorted; /* ids sorted by piece bytes, for bsearch */
} ref_vocab;

static ref_vocab R;

static int cmp_bytes(const char *a, size_t la, const char *b, size_t lb) {
    size_t m = la < lb ? la : lb;
    int c = memcmp(a, b, m);
    if (c) return c;
    return (la > lb) - (la < lb);
}

static int cmp_ids(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int c = cmp_bytes(R.piece[x], R.len[x], R.piece[y], R.len[y]);
    return c ? c : (x > y) - (x < y);
}

static unsigned char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

static int ref_load(const char *path) {
    size_t size;
    unsigned char *b = slurp(path, &size);
    if (!b) return -1;
    R.n = LLAMA2_VOCAB;
    R.piece = calloc((size_t)R.n, sizeof *R.piece);
    R.len = calloc((size_t)R.n, sizeof *R.len);
    R.score = calloc((size_t)R.n, sizeof *R.score);
    R.sorted = calloc((size_t)R.n, sizeof *R.sorted);
    size_t pos = 4;
    for (int64_t i = 0; i < R.n; i++) {
        int32_t len;
        memcpy(&R.score[i], b + pos, 4);
        memcpy(&len, b + pos + 4, 4);
        pos += 8;
        R.piece[i] = calloc((size_t)len + 1, 1);
        memcpy(R.piece[i], b + pos, (size_t)len);
        R.len[i] = (size_t)len;
        pos += (size_t)len;
        R.sorted[i] = (int32_t)i;
    }
    free(b);
    qsort(R.sorted, (size_t)R.n, sizeof *R.sorted, cmp_ids);
    return pos == size ? 0 : -1;
}

/* Lowest id of the piece with these bytes, or -1. */
static int32_t ref_find(const char *s, size_t len) {
    int64_t lo = 0, hi = R.n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        int32_t id = R.sorted[mid];
        if (cmp_bytes(R.piece[id], R.len[id], s, len) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < R.n && cmp_bytes(R.piece[R.sorted[lo]], R.len[R.sorted[lo]], s, len) == 0)
        return R.sorted[lo];
    return -1;
}

static int32_t ref_find_str(const char *s) { return ref_find(s, strlen(s)); }

static int32_t ref_byte(unsigned b) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    return ref_find_str(name);
}

/* Length of the code point at s if well formed, else 1: decode, then reject
 * overlongs, surrogates and values past U+10FFFF by value. */
static size_t ref_unit(const unsigned char *s, size_t rem) {
    size_t n;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    else if ((s[0] & 0xe0) == 0xc0) n = 2, cp = s[0] & 0x1f;
    else if ((s[0] & 0xf0) == 0xe0) n = 3, cp = s[0] & 0x0f;
    else if ((s[0] & 0xf8) == 0xf0) n = 4, cp = s[0] & 0x07;
    else return 1;
    if (rem < n) return 1;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 1;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 1;
    return n;
}

/* The merge rule done the slow way: scan every pair, merge the first best. */
static int64_t ref_encode(const char *text, bool bos, int32_t *out) {
    size_t tlen = strlen(text);
    int32_t *t = malloc((tlen + 2) * sizeof *t);
    int64_t n = 0;
    char *units = malloc(tlen + 2);
    if (tlen) {
        units[0] = ' ';
        memcpy(units + 1, text, tlen);
    }
    size_t ulen = tlen ? tlen + 1 : 0;
    for (size_t i = 0; i < ulen;) {
        size_t u = ref_unit((const unsigned char *)units + i, ulen - i);
        int32_t id = ref_find(units + i, u);
        if (id >= 0) t[n++] = id;
        else
            for (size_t k = 0; k < u; k++) t[n++] = ref_byte((unsigned char)units[i + k]);
        i += u;
    }
    char buf[256];
    for (;;) {
        float best = -INFINITY;
        int64_t at = -1;
        int32_t best_id = -1;
        for (int64_t i = 0; i + 1 < n; i++) {
            size_t la = R.len[t[i]], lb = R.len[t[i + 1]];
            if (la + lb >= sizeof buf) continue;
            memcpy(buf, R.piece[t[i]], la);
            memcpy(buf + la, R.piece[t[i + 1]], lb);
            int32_t id = ref_find(buf, la + lb);
            if (id >= 0 && (at < 0 || R.score[id] > best)) {
                best = R.score[id];
                at = i;
                best_id = id;
            }
        }
        if (at < 0) break;
        t[at] = best_id;
        memmove(t + at + 1, t + at + 2, (size_t)(n - at - 2) * sizeof *t);
        n--;
    }
    int64_t k = 0;
    if (bos) out[k++] = 1;
    for (int64_t i = 0; i < n; i++) out[k++] = t[i];
    free(t);
    free(units);
    return k;
}

/* ---- helpers ------------------------------------------------------------------ */

static lt_vocab *V;

static int64_t enc(const char *text, bool bos, int32_t *ids) {
    int64_t n = -1;
    int rc = lt_tokenize(V, text, bos, ids, (int64_t)strlen(text) + 3, &n);
    ASSERT_EQ(rc, LT_OK);
    return n;
}

/* Decodes ids (after an optional BOS) back to text. */
static char *dec(const int32_t *ids, int64_t n) {
    size_t cap = 64, len = 0;
    char *out = malloc(cap);
    out[0] = '\0';
    int32_t prev = -1;
    for (int64_t i = 0; i < n; i++) {
        char piece[64];
        size_t m = lt_detokenize(V, prev, ids[i], piece, sizeof piece);
        if (!(prev < 0 && ids[i] == lt_vocab_bos(V))) { /* a leading BOS prints nothing */
            while (len + m + 1 > cap) out = realloc(out, cap *= 2);
            memcpy(out + len, piece, m);
            len += m;
            out[len] = '\0';
        }
        prev = ids[i];
    }
    return out;
}

static void expect_ids(const char *text, bool bos, const int32_t *want, int64_t nwant) {
    int32_t ids[512];
    int64_t n = enc(text, bos, ids);
    ASSERT_EQ(n, nwant);
    for (int64_t i = 0; i < n && i < nwant; i++) {
        if (ids[i] != want[i]) fprintf(stderr, "text \"%s\": token %lld\n", text, (long long)i);
        ASSERT_EQ(ids[i], want[i]);
    }
}

/* ---- cases --------------------------------------------------------------------- */

static void test_load(void) {
    ASSERT_EQ(lt_vocab_size(V), LLAMA2_VOCAB);
    ASSERT_EQ(lt_vocab_bos(V), 1);
    ASSERT_EQ(lt_vocab_eos(V), 2);
    int bad = 0;
    for (int32_t i = 0; i < LLAMA2_VOCAB; i++) {
        size_t len;
        const char *p = lt_vocab_piece(V, i, &len);
        if (len != R.len[i] || memcmp(p, R.piece[i], len) != 0 || p[len] != '\0' ||
            lt_vocab_score(V, i) != R.score[i])
            bad++;
    }
    ASSERT_EQ(bad, 0);
    size_t len;
    ASSERT_STREQ(lt_vocab_piece(V, 9038, &len), " Once");
    ASSERT_EQ(len, 5);
    ASSERT_STREQ(lt_vocab_piece(V, LLAMA2_VOCAB, &len), "");
    ASSERT_EQ(len, 0);
}

static void test_known_answers(void) {
    /* llama2.c and llama.cpp both give this for the Llama 2 vocabulary */
    const int32_t once[] = {1, 9038, 2501, 263, 931};
    expect_ids("Once upon a time", true, once, 5);
    expect_ids("Once upon a time", false, once + 1, 4);
    const int32_t bos_only[] = {1};
    expect_ids("", true, bos_only, 1);
    expect_ids("", false, NULL, 0);
    /* " " plus the dummy prefix is two spaces, a piece of its own (259) */
    int32_t two = ref_find_str("  ");
    ASSERT_EQ(two, 259);
    const int32_t space[] = {1, two};
    expect_ids(" ", true, space, 2);
    /* \x01 is no piece: dummy prefix, then the byte token <0x01> = 1 + 3 */
    ASSERT_EQ(ref_find_str("\x01"), -1);
    ASSERT_EQ(ref_byte(0x01), 0x01 + 3);
    const int32_t ctl[] = {1, ref_find_str(" "), 0x01 + 3};
    expect_ids("\x01", true, ctl, 3);
    /* an emoji absent from the vocabulary falls back to its four bytes */
    const char *flamingo = "\xf0\x9f\xa6\xa9"; /* U+1F9A9 */
    ASSERT_EQ(ref_find_str(flamingo), -1);
    const int32_t emoji[] = {1, 29871, 0xf0 + 3, 0x9f + 3, 0xa6 + 3, 0xa9 + 3};
    ASSERT_EQ(ref_find_str(" "), 29871);
    expect_ids(flamingo, true, emoji, 6);
    /* invalid UTF-8: 0xff alone, and a truncated 3-byte sequence byte by byte */
    const int32_t bad[] = {1, ref_find_str(" a"), 0xff + 3};
    expect_ids("a\xff", true, bad, 3);
    const int32_t trunc[] = {1, 29871, 0xe4 + 3, 0xb8 + 3, ref_find_str("a")};
    ASSERT_TRUE(ref_find_str("\xe4\xb8") < 0);
    expect_ids("\xe4\xb8" "a", true, trunc, 5);
    /* a lone lead byte must not swallow the ASCII after it */
    const int32_t lead[] = {1, 29871, 0xe4 + 3, ref_find_str("ab")};
    ASSERT_TRUE(lead[3] >= 0);
    expect_ids("\xe4" "ab", true, lead, 4);
    /* a CJK character that is a piece stays one token ("中" alone) */
    int32_t zh = ref_find_str("\xe4\xb8\xad");
    ASSERT_TRUE(zh >= 0);
    if (ref_find_str(" \xe4\xb8\xad") < 0) {
        const int32_t cjk[] = {1, 29871, zh};
        expect_ids("\xe4\xb8\xad", true, cjk, 3);
    }
}

static const char *const FRAGMENTS[] = {
    "the", " ", "  ", "\n", "\n\n", "Once", "upon", "a", "time", "\xc3\xa9", "\xe4\xb8\xad",
    "\xe6\x96\x87", "\xf0\x9f\x98\x80", "\xf0\x9f\xa6\xa9", "\x01", "\xff", "\xe4\xb8", "\xc3",
    "\xc3\xbc", "'", ".", ",", "123", "\t", "ing", "tion", "Hello", "world", "\xc3\x9f",
    "\xd0\x96", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "don't", "!", "?", "x", "Z",
};

static uint64_t rng = 0x1234567887654321ull;
static uint32_t rnd(uint32_t n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33) % n;
}

static void random_text(char *buf, size_t cap) {
    size_t len = 0;
    uint32_t k = 1 + rnd(24);
    for (uint32_t i = 0; i < k; i++) {
        const char *f = FRAGMENTS[rnd(sizeof FRAGMENTS / sizeof FRAGMENTS[0])];
        size_t fl = strlen(f);
        if (len + fl + 1 > cap) break;
        memcpy(buf + len, f, fl);
        len += fl;
    }
    buf[len] = '\0';
}

static void test_round_trip(void) {
    static const char *const texts[] = {
        "Hello, world!", "  leading", "trailing  ", "double  space", "a\nb\n\nc\n",
        "\n", "   ", "\t tab", "caf\xc3\xa9 na\xc3\xafve \xc3\xbc\xc3\x9f",
        "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97", "emoji \xf0\x9f\x98\x80\xf0\x9f\xa6\xa9!",
        "bad \xff\xfe bytes \xc3", "x", "It's 42 degrees; isn't it?", "Once upon a time",
    };
    int32_t ids[512];
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int64_t n = enc(texts[i], true, ids);
        char *back = dec(ids, n);
        ASSERT_STREQ(back, texts[i]);
        free(back);
    }
    char text[200];
    int bad = 0;
    for (int i = 0; i < 300; i++) {
        random_text(text, sizeof text);
        int64_t n = enc(text, true, ids);
        char *back = dec(ids, n);
        if (strcmp(back, text) != 0) bad++;
        free(back);
    }
    ASSERT_EQ(bad, 0);
}

static void test_reference_bpe(void) {
    char text[200];
    int32_t got[256], want[256];
    int mismatches = 0;
    for (int i = 0; i < 250; i++) {
        random_text(text, sizeof text);
        bool bos = i % 2 == 0;
        int64_t n = enc(text, bos, got);
        int64_t m = ref_encode(text, bos, want);
        if (n != m || memcmp(got, want, (size_t)n * sizeof *got) != 0) {
            if (mismatches++ < 3) fprintf(stderr, "reference disagrees on \"%s\"\n", text);
        }
    }
    ASSERT_EQ(mismatches, 0);
}

static void test_long_prompt(void) {
    /* a few thousand characters: the heap keeps this far below quadratic */
    size_t cap = 64 * 1024;
    char *text = malloc(cap + 200);
    size_t len = 0;
    while (len < cap) {
        random_text(text + len, 200);
        len += strlen(text + len);
    }
    int32_t *ids = malloc((len + 3) * sizeof *ids);
    int64_t n = 0;
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    ASSERT_EQ(lt_tokenize(V, text, true, ids, (int64_t)len + 3, &n), LT_OK);
    double dt = (double)clock() / CLOCKS_PER_SEC - t0;
    printf("tokenized %zu bytes into %lld tokens in %.2f ms\n", len, (long long)n, dt * 1e3);
    ASSERT_TRUE(dt < 2.0);
    char *back = dec(ids, n);
    ASSERT_TRUE(strcmp(back, text) == 0);
    /* a 2000-byte prefix against the brute-force reference */
    text[2000] = '\0';
    while (((unsigned char)text[1999] & 0xc0) == 0x80) text[1999] = 'x';
    int32_t *want = malloc(2003 * sizeof *want);
    n = enc(text, true, ids);
    int64_t m = ref_encode(text, true, want);
    ASSERT_EQ(n, m);
    ASSERT_TRUE(n == m && memcmp(ids, want, (size_t)n * sizeof *ids) == 0);
    free(want);
    free(back);
    free(ids);
    free(text);
}

static void test_errors(void) {
    int32_t ids[8];
    int64_t n = 99;
    ASSERT_EQ(lt_tokenize(V, "Once upon a time", true, ids, 4, &n), LT_ERANGE);
    ASSERT_EQ(n, 0);
    ASSERT_EQ(lt_tokenize(V, "Once upon a time", true, ids, 5, &n), LT_OK);
    ASSERT_EQ(n, 5);
    char buf[4];
    /* snprintf-like: truncated to n-1, full length returned */
    ASSERT_EQ(lt_detokenize(V, 2, 9038, buf, sizeof buf), 5);
    ASSERT_STREQ(buf, " On");
    ASSERT_EQ(lt_detokenize(V, 1, 9038, buf, sizeof buf), 4);
    ASSERT_STREQ(buf, "Onc");
    ASSERT_EQ(lt_detokenize(V, 1, 0x41 + 3, buf, sizeof buf), 1);
    ASSERT_STREQ(buf, "A");
    ASSERT_EQ(lt_detokenize(V, 1, -5, buf, sizeof buf), 0);
    ASSERT_STREQ(buf, "");
}

/* Merge order on a tiny vocabulary: highest score first, leftmost on ties. */
static void test_synthetic(void) {
    const char *pieces[] = {"<unk>", "<s>", "</s>", " ", "a", "b", "ab", "ba", " a", "<0x63>"};
    float scores[] = {0, 0, 0, -5, -1, -1, 1, 1, -3, 0};
    lt_vocab *v;
    ASSERT_EQ(lt_vocab_from_arrays(&v, 10, pieces, NULL, scores, 1, 2), LT_OK);
    int32_t ids[16];
    int64_t n;
    /* " aba": " a" (-3) loses to "ab" (1) and "ba" (1); tie -> leftmost "ab" */
    ASSERT_EQ(lt_tokenize(v, "aba", false, ids, 16, &n), LT_OK);
    ASSERT_EQ(n, 3);
    ASSERT_EQ(ids[0], 3);
    ASSERT_EQ(ids[1], 6);
    ASSERT_EQ(ids[2], 4);
    lt_vocab_free(v);
    scores[7] = 2; /* now "ba" wins first, then " a" */
    ASSERT_EQ(lt_vocab_from_arrays(&v, 10, pieces, NULL, scores, 1, 2), LT_OK);
    ASSERT_EQ(lt_tokenize(v, "aba", true, ids, 16, &n), LT_OK);
    ASSERT_EQ(n, 3);
    ASSERT_EQ(ids[0], 1);
    ASSERT_EQ(ids[1], 8);
    ASSERT_EQ(ids[2], 7);
    /* byte fallback through the byte piece; a byte without one is an error */
    ASSERT_EQ(lt_tokenize(v, "c", false, ids, 16, &n), LT_OK);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(ids[1], 9);
    ASSERT_EQ(lt_tokenize(v, "d", false, ids, 16, &n), LT_ENOTFOUND);
    lt_vocab_free(v);
    ASSERT_EQ(lt_vocab_from_arrays(&v, 10, pieces, NULL, scores, 10, 2), LT_EINVAL);
    ASSERT_EQ(lt_vocab_from_arrays(&v, 0, pieces, NULL, scores, 0, 0), LT_EINVAL);
    ASSERT_EQ(lt_vocab_from_arrays(&v, 10, pieces, NULL, scores, -1, 2), LT_OK);
    ASSERT_EQ(lt_tokenize(v, "a", true, ids, 16, &n), LT_EINVAL);
    lt_vocab_free(v);
    lt_vocab_free(NULL);
}

/* ---- corrupt files ------------------------------------------------------------- */

static void write_file(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    if (!f) return;
    fwrite(b, 1, n, f);
    fclose(f);
}

static void expect_reject(const unsigned char *b, size_t n, int64_t vocab, int want,
                          const char *what) {
    char path[1200];
    snprintf(path, sizeof path, "%s/bad-tokenizer.bin", work_dir);
    write_file(path, b, n);
    lt_vocab *v = (lt_vocab *)&v; /* must be reset to NULL */
    int rc = lt_vocab_load_llama2c(&v, path, vocab);
    if (rc != want) fprintf(stderr, "case: %s\n", what);
    ASSERT_EQ(rc, want);
    ASSERT_TRUE(v == NULL);
    ASSERT_TRUE(strstr(lt_errmsg(), path) != NULL);
    printf("  rejected (%s): %s\n", what, lt_errmsg());
    remove(path);
}

static void test_bad_files(void) {
    size_t size;
    unsigned char *b = slurp(data_path, &size);
    ASSERT_TRUE(b != NULL);
    if (!b) return;
    unsigned char *m = malloc(size);
    /* offset of token 5's length field: header, then 5 records before it */
    size_t rec5 = 4;
    for (int i = 0; i < 5; i++) rec5 += 8 + R.len[i];
    int32_t x;

    expect_reject(b, size / 2, LLAMA2_VOCAB, LT_EFORMAT, "truncated in the middle");
    expect_reject(b, 2, LLAMA2_VOCAB, LT_EFORMAT, "truncated header");
    expect_reject(b, rec5 + 8 + 2, LLAMA2_VOCAB, LT_EFORMAT, "truncated inside a piece");
    expect_reject(b, size, LLAMA2_VOCAB + 1, LT_EFORMAT, "vocab_size larger than the file");
    expect_reject(b, size, LLAMA2_VOCAB - 1, LT_EFORMAT, "vocab_size smaller than the file");
    memcpy(m, b, size);
    x = -1;
    memcpy(m + rec5 + 4, &x, 4);
    expect_reject(m, size, LLAMA2_VOCAB, LT_EFORMAT, "negative length");
    x = 1 << 30;
    memcpy(m + rec5 + 4, &x, 4);
    expect_reject(m, size, LLAMA2_VOCAB, LT_EFORMAT, "huge length");
    memcpy(m, b, size);
    x = 0;
    memcpy(m, &x, 4);
    expect_reject(m, size, LLAMA2_VOCAB, LT_EFORMAT, "max_token_length 0");
    memcpy(m, b, size);
    float nan = NAN;
    memcpy(m + rec5, &nan, 4);
    expect_reject(m, size, LLAMA2_VOCAB, LT_EFORMAT, "NaN score");

    lt_vocab *v = NULL;
    char missing[1200];
    snprintf(missing, sizeof missing, "%s/no-such-tokenizer.bin", work_dir);
    ASSERT_EQ(lt_vocab_load_llama2c(&v, missing, LLAMA2_VOCAB), LT_EIO);
    ASSERT_TRUE(strstr(lt_errmsg(), missing) != NULL);
    ASSERT_EQ(lt_vocab_load_llama2c(&v, data_path, 0), LT_EINVAL);
    free(m);
    free(b);
}

int main(void) {
    const char *dir = getenv("LT_DATA_DIR");
    const char *work = getenv("LT_WORK_DIR");
    snprintf(data_path, sizeof data_path, "%s/llama2-tokenizer.bin", dir ? dir : "tests/data");
    snprintf(work_dir, sizeof work_dir, "%s", work ? work : "/tmp");
    if (ref_load(data_path) != 0) {
        fprintf(stderr, "cannot read %s (set LT_DATA_DIR)\n", data_path);
        return 1;
    }
    int rc = lt_vocab_load_llama2c(&V, data_path, LLAMA2_VOCAB);
    ASSERT_EQ(rc, LT_OK);
    if (rc != LT_OK) {
        fprintf(stderr, "%s\n", lt_errmsg());
        return lt_test_finish();
    }
    test_load();
    test_known_answers();
    test_round_trip();
    test_reference_bpe();
    test_long_prompt();
    test_errors();
    test_synthetic();
    test_bad_files();
    lt_vocab_free(V);
    for (int64_t i = 0; i < R.n; i++) free(R.piece[i]);
    free(R.piece);
    free(R.len);
    free(R.score);
    free(R.sorted);
    return lt_test_finish();
}
