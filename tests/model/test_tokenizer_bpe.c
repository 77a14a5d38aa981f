/* Byte-level BPE vocabularies from GGUF files written here: the merge
 * engine against a brute-force BPE written independently in this file
 * (lowest-rank adjacent pair first, the leftmost on ties, GPT-2's
 * bytes_to_unicode built as its Python original does), special tokens in
 * text, BOS/EOS, decoding, and every kind of bad vocabulary refused at load
 * with a message naming the problem. */
#include "looptune/model.h"
#include "model/model_internal.h"
#include "test.h"

#include <unistd.h>

static char gguf_path[1100];

/* ---- GPT-2's byte mapping, as bytes_to_unicode() builds it ---------------- */

static uint32_t ref_map[256];

static void ref_map_init(void) {
    bool listed[256] = {0};
    for (int b = '!'; b <= '~'; b++) listed[b] = true;
    for (int b = 0xa1; b <= 0xac; b++) listed[b] = true;
    for (int b = 0xae; b <= 0xff; b++) listed[b] = true;
    uint32_t n = 0;
    for (int b = 0; b < 256; b++) ref_map[b] = listed[b] ? (uint32_t)b : 256 + n++;
}

/* The mapped text of bytes s[0, len) into out (NUL-terminated). */
static void ref_mapped(const char *s, size_t len, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t c = ref_map[(unsigned char)s[i]];
        if (c < 0x80) {
            out[k++] = (char)c;
        } else {
            out[k++] = (char)(0xc0 | (c >> 6));
            out[k++] = (char)(0x80 | (c & 0x3f));
        }
    }
    out[k] = '\0';
}

/* ---- a vocabulary under construction ---------------------------------------- */

#define MAX_TOK 2048
#define MAX_MERGES 1024

typedef struct {
    char *tok[MAX_TOK];
    int32_t type[MAX_TOK];
    int n_tok;
    char *merge[MAX_MERGES];
    int n_merges;
} spec;

static int add_token(spec *s, const char *t, int32_t type) {
    s->tok[s->n_tok] = strdup(t);
    s->type[s->n_tok] = type;
    return s->n_tok++;
}

static int find_token(const spec *s, const char *t) {
    for (int i = 0; i < s->n_tok; i++)
        if (strcmp(s->tok[i], t) == 0) return i;
    return -1;
}

/* The 256 byte tokens, in byte order (ids 0..255). */
static void byte_tokens(spec *s) {
    for (int b = 0; b < 256; b++) {
        char c = (char)b, m[4];
        ref_mapped(&c, 1, m);
        add_token(s, m, 1);
    }
}

static void add_merge(spec *s, const char *a, const char *b) {
    char *m = malloc(strlen(a) + strlen(b) + 2);
    sprintf(m, "%s %s", a, b);
    s->merge[s->n_merges++] = m;
    char *cat = malloc(strlen(a) + strlen(b) + 1);
    sprintf(cat, "%s%s", a, b);
    if (find_token(s, cat) < 0) add_token(s, cat, 1);
    free(cat);
}

static void spec_free(spec *s) {
    for (int i = 0; i < s->n_tok; i++) free(s->tok[i]);
    for (int i = 0; i < s->n_merges; i++) free(s->merge[i]);
    memset(s, 0, sizeof *s);
}

/* What to write besides the spec, to break a file on purpose. */
typedef struct {
    const char *model, *pre;
    bool no_merges, merges_as_ints, types_as_f32;
    int types_delta;     /* token_type length minus the token count */
    int64_t bos, eos;    /* -1: not written */
    int add_bos, add_eos; /* -1: not written; 2: written as u32 */
} extras;

static const extras DEFAULTS = {.model = "gpt2", .pre = "gpt-2", .bos = -1, .eos = -1,
                                .add_bos = -1, .add_eos = -1};

static void write_bool(lt_gguf_writer *w, const char *key, int v) {
    if (v == 2) {
        lt_gguf_writer_u32(w, key, 1);
    } else if (v >= 0) {
        bool b = v;
        lt__gguf_writer_kv(w, key, LT_GGUF_BOOL, &b);
    }
}

static void write_vocab(const spec *s, const extras *x) {
    lt_gguf_writer *w;
    ASSERT_EQ(lt_gguf_writer_open(&w, gguf_path), LT_OK);
    lt_gguf_writer_str(w, "general.architecture", "llama");
    lt_gguf_writer_str(w, "tokenizer.ggml.model", x->model);
    if (x->pre) lt_gguf_writer_str(w, "tokenizer.ggml.pre", x->pre);
    lt_gguf_writer_arr_str(w, "tokenizer.ggml.tokens", s->n_tok, (const char *const *)s->tok,
                           NULL);
    int n_types = s->n_tok + x->types_delta;
    if (x->types_as_f32) {
        float *f = calloc((size_t)n_types, sizeof *f);
        lt_gguf_writer_arr_f32(w, "tokenizer.ggml.token_type", n_types, f);
        free(f);
    } else {
        int32_t *t = calloc((size_t)n_types + 1, sizeof *t);
        for (int i = 0; i < n_types; i++) t[i] = i < s->n_tok ? s->type[i] : 1;
        lt_gguf_writer_arr_i32(w, "tokenizer.ggml.token_type", n_types, t);
        free(t);
    }
    if (x->merges_as_ints) {
        int32_t z[2] = {0, 1};
        lt_gguf_writer_arr_i32(w, "tokenizer.ggml.merges", 2, z);
    } else if (!x->no_merges) {
        lt_gguf_writer_arr_str(w, "tokenizer.ggml.merges", s->n_merges,
                               (const char *const *)s->merge, NULL);
    }
    if (x->bos >= 0) lt_gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)x->bos);
    if (x->eos >= 0) lt_gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)x->eos);
    write_bool(w, "tokenizer.ggml.add_bos_token", x->add_bos);
    write_bool(w, "tokenizer.ggml.add_eos_token", x->add_eos);
    ASSERT_EQ(lt_gguf_writer_close(w), LT_OK);
}

/* Loads the file; on failure returns NULL with st and the message set. */
static lt_vocab *load(int *st) {
    lt_gguf *g = NULL;
    lt_vocab *v = NULL;
    *st = lt_gguf_open(&g, gguf_path);
    if (*st == LT_OK) *st = lt_vocab_load_gguf(&v, g);
    lt_gguf_close(g);
    return v;
}

/* ---- the brute-force reference ------------------------------------------------ */

/* Ids of text (one word: the caller keeps it to one pre-tokenizer word). */
static int ref_encode(const spec *s, const char *text, int32_t *ids) {
    int n = (int)strlen(text);
    char **sym = malloc((size_t)n * sizeof *sym);
    for (int i = 0; i < n; i++) {
        sym[i] = malloc(4);
        ref_mapped(text + i, 1, sym[i]);
    }
    for (;;) {
        int best = -1, at = -1;
        for (int i = 0; i + 1 < n; i++) {
            char pair[256];
            snprintf(pair, sizeof pair, "%s %s", sym[i], sym[i + 1]);
            for (int r = 0; r < s->n_merges && (best < 0 || r < best); r++)
                if (strcmp(s->merge[r], pair) == 0) {
                    best = r;
                    at = i;
                }
        }
        if (best < 0) break;
        char *m = malloc(strlen(sym[at]) + strlen(sym[at + 1]) + 1);
        sprintf(m, "%s%s", sym[at], sym[at + 1]);
        free(sym[at]);
        free(sym[at + 1]);
        sym[at] = m;
        memmove(sym + at + 1, sym + at + 2, (size_t)(n - at - 2) * sizeof *sym);
        n--;
    }
    for (int i = 0; i < n; i++) {
        ids[i] = find_token(s, sym[i]);
        free(sym[i]);
    }
    free(sym);
    return n;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* Random merges over the letters a..d (ties and chains of every kind), then
 * random words of those letters: the engine must agree with brute force. */
static void test_merge_engine(void) {
    for (int round = 0; round < 20; round++) {
        spec s = {0};
        byte_tokens(&s);
        int first = s.n_tok;
        while (s.n_merges < 40) {
            const char *a = s.tok['a' + rnd(4)], *b = s.tok['a' + rnd(4)];
            if (s.n_tok > first && rnd(2)) a = s.tok[first + (int)rnd((uint32_t)(s.n_tok - first))];
            if (s.n_tok > first && rnd(2)) b = s.tok[first + (int)rnd((uint32_t)(s.n_tok - first))];
            if (strlen(a) + strlen(b) > 12) continue;
            char pair[64];
            snprintf(pair, sizeof pair, "%s %s", a, b);
            bool dup = false;
            for (int i = 0; i < s.n_merges; i++) dup |= strcmp(s.merge[i], pair) == 0;
            if (!dup) add_merge(&s, a, b);
        }
        write_vocab(&s, &DEFAULTS);
        int st;
        lt_vocab *v = load(&st);
        ASSERT_EQ(st, LT_OK);
        if (!v) {
            spec_free(&s);
            continue;
        }
        for (int t = 0; t < 50; t++) {
            char text[40];
            int len = 1 + (int)rnd(30);
            for (int i = 0; i < len; i++) text[i] = (char)('a' + rnd(4));
            text[len] = '\0';
            int32_t want[40], got[80];
            int nw = ref_encode(&s, text, want);
            int64_t ng;
            ASSERT_EQ(lt_tokenize(v, text, false, got, 80, &ng), LT_OK);
            bool same = ng == nw;
            for (int i = 0; same && i < nw; i++) same = got[i] == want[i];
            if (!same) {
                LT__FAIL("round %d text '%s': %lld ids, reference %d", round, text,
                         (long long)ng, nw);
                break;
            }
            lt_test_checks++;
        }
        lt_vocab_free(v);
        spec_free(&s);
    }
}

/* A vocabulary with words, control and user-defined tokens. */
static void chat_spec(spec *s, int *ctl, int *user) {
    byte_tokens(s);
    add_merge(s, "h", "i");
    add_merge(s, "\xc4\xa0", "hi"); /* "Ġ" "hi" */
    *ctl = add_token(s, "<|im_end|>", 3);
    *user = add_token(s, "<u>", 4);
}

static void expect_ids(lt_vocab *v, const char *text, bool special, bool parse,
                       const int32_t *want, int64_t nw) {
    int32_t got[64];
    int64_t n = -1;
    lt_tokenize_opts o = {.add_special = special, .parse_special = parse};
    ASSERT_EQ(lt_tokenize_text(v, text, strlen(text), &o, got, 64, &n), LT_OK);
    ASSERT_EQ(n, nw);
    for (int64_t i = 0; i < n && i < nw; i++) ASSERT_EQ(got[i], want[i]);
}

/* Control tokens only when parsing specials; user-defined ones always; the
 * text between them encodes as text; BOS/EOS as the file says. */
static void test_special_tokens(void) {
    spec s = {0};
    int ctl, user;
    chat_spec(&s, &ctl, &user);
    extras x = DEFAULTS;
    x.bos = ctl;
    x.eos = ctl;
    write_vocab(&s, &x);
    int st;
    lt_vocab *v = load(&st);
    ASSERT_EQ(st, LT_OK);
    if (!v) return;
    int hi = find_token(&s, "hi"), ghi = find_token(&s, "\xc4\xa0hi");
    int32_t parsed[] = {hi, ctl, ghi, user, ghi};
    expect_ids(v, "hi<|im_end|> hi<u> hi", false, true, parsed, 5);
    /* as text: '<' '|' 'im' ... are byte tokens (no merges); <u> still matches */
    int32_t text_ids[32];
    int n = ref_encode(&s, "hi", text_ids);
    n += ref_encode(&s, "<|", text_ids + n);
    n += ref_encode(&s, "im", text_ids + n);
    n += ref_encode(&s, "_", text_ids + n);
    n += ref_encode(&s, "end", text_ids + n);
    n += ref_encode(&s, "|>", text_ids + n);
    text_ids[n++] = user;
    expect_ids(v, "hi<|im_end|><u>", false, false, text_ids, n);
    ASSERT_TRUE(lt_vocab_is_eog(v, ctl));
    ASSERT_TRUE(!lt_vocab_add_bos(v)); /* gpt-2 adds nothing */
    int32_t bare[] = {hi};
    expect_ids(v, "hi", true, true, bare, 1);
    lt_vocab_free(v);

    x.pre = "llama-bpe"; /* Llama 3 adds BOS */
    write_vocab(&s, &x);
    v = load(&st);
    ASSERT_TRUE(v && lt_vocab_add_bos(v) && !lt_vocab_add_eos(v));
    int32_t with_bos[] = {ctl, hi};
    if (v) expect_ids(v, "hi", true, true, with_bos, 2);
    lt_vocab_free(v);
    x.add_bos = 0; /* the file's word wins */
    x.add_eos = 1;
    write_vocab(&s, &x);
    v = load(&st);
    ASSERT_TRUE(v && !lt_vocab_add_bos(v) && lt_vocab_add_eos(v));
    int32_t with_eos[] = {hi, ctl};
    if (v) expect_ids(v, "hi", true, true, with_eos, 2);
    lt_vocab_free(v);
    spec_free(&s);
}

/* Every byte decodes to itself, a token ending inside a UTF-8 sequence
 * included; control tokens read as written. */
static void test_decode(void) {
    spec s = {0};
    int ctl, user;
    chat_spec(&s, &ctl, &user);
    write_vocab(&s, &DEFAULTS);
    int st;
    lt_vocab *v = load(&st);
    ASSERT_EQ(st, LT_OK);
    if (!v) return;
    for (int b = 0; b < 256; b++) {
        char out[8];
        ASSERT_EQ(lt_detokenize(v, -1, b, out, sizeof out), 1);
        ASSERT_EQ((unsigned char)out[0], b);
    }
    char out[32];
    ASSERT_EQ(lt_detokenize(v, -1, find_token(&s, "\xc4\xa0hi"), out, sizeof out), 3);
    ASSERT_STREQ(out, " hi");
    ASSERT_EQ(lt_detokenize(v, -1, ctl, out, sizeof out), 10);
    ASSERT_STREQ(out, "<|im_end|>");
    ASSERT_EQ(lt_detokenize(v, -1, ctl, out, 4), 10); /* truncated, full length returned */
    ASSERT_STREQ(out, "<|i");
    const char *text = "caf\xc3\xa9 \xf0\x9f\xa6\x99!"; /* each byte its own token */
    int32_t ids[32];
    int64_t n;
    ASSERT_EQ(lt_tokenize(v, text, false, ids, 32, &n), LT_OK);
    char back[64];
    size_t k = 0;
    for (int64_t i = 0; i < n; i++) k += lt_detokenize(v, -1, ids[i], back + k, sizeof back - k);
    back[k] = '\0';
    ASSERT_STREQ(back, text);
    /* a byte that starts no UTF-8 sequence reads as U+FFFD, as in llama.cpp */
    ASSERT_EQ(lt_tokenize(v, "a\xff", false, ids, 32, &n), LT_OK);
    int32_t want[] = {'a', 0xef, 0xbf, 0xbd}; /* the bytes; their tokens below */
    for (int i = 0; i < 4; i++) {
        char c = (char)want[i], m[4];
        ref_mapped(&c, 1, m);
        want[i] = find_token(&s, m);
    }
    ASSERT_EQ(n, 4);
    for (int i = 0; i < 4 && i < n; i++) ASSERT_EQ(ids[i], want[i]);
    lt_vocab_free(v);
    spec_free(&s);
}

/* ---- bad vocabularies --------------------------------------------------------- */

static void expect_refused(const char *what, const spec *s, const extras *x, int want_st,
                           const char *want_msg) {
    write_vocab(s, x);
    int st;
    lt_vocab *v = load(&st);
    ASSERT_TRUE(v == NULL);
    lt_vocab_free(v);
    if (st != want_st) LT__FAIL("%s: status %d, expected %d (%s)", what, st, want_st, lt_errmsg());
    if (!strstr(lt_errmsg(), want_msg))
        LT__FAIL("%s: message \"%s\" lacks \"%s\"", what, lt_errmsg(), want_msg);
    if (!strstr(lt_errmsg(), gguf_path)) LT__FAIL("%s: message does not name the file", what);
    lt_test_checks += 3;
    printf("  refused (%s): %s\n", what, lt_errmsg());
}

static void test_bad_vocabs(void) {
    spec s = {0};
    int ctl, user;
    chat_spec(&s, &ctl, &user);
    extras x = DEFAULTS;
    x.no_merges = true;
    expect_refused("no merges", &s, &x, LT_EFORMAT,
                   "a gpt2 vocabulary without tokenizer.ggml.merges");
    x = DEFAULTS;
    x.merges_as_ints = true;
    expect_refused("merges of ints", &s, &x, LT_EFORMAT,
                   "tokenizer.ggml.merges is an array of i32, not of strings");
    x = DEFAULTS;
    x.types_delta = -1;
    expect_refused("short token_type", &s, &x, LT_EFORMAT, "tokenizer.ggml.token_type has");
    x.types_delta = 3;
    expect_refused("long token_type", &s, &x, LT_EFORMAT, "tokenizer.ggml.token_type has");
    x = DEFAULTS;
    x.types_as_f32 = true;
    expect_refused("token_type of floats", &s, &x, LT_EFORMAT, "f32 values for");
    x = DEFAULTS;
    x.pre = "no-such-pre";
    expect_refused("unknown pre", &s, &x, LT_EUNSUPPORTED, "unknown pre-tokenizer 'no-such-pre'");
    x.pre = "gpt-4o";
    expect_refused("pre not carried", &s, &x, LT_EUNSUPPORTED,
                   "pre-tokenizer 'gpt-4o' is not supported");
    x = DEFAULTS;
    x.model = "bert";
    expect_refused("model", &s, &x, LT_EUNSUPPORTED,
                   "tokenizer.ggml.model 'bert' is not supported");
    x = DEFAULTS;
    x.bos = s.n_tok;
    expect_refused("bos past the end", &s, &x, LT_EFORMAT, "bos_token_id");
    x = DEFAULTS;
    x.add_bos = 2;
    expect_refused("add_bos_token not a bool", &s, &x, LT_EFORMAT, "expected bool");

    /* merges lines */
    static const struct {
        const char *what, *line, *msg;
    } lines[] = {
        {"merge without a space", "hi", "is not two tokens separated by one space"},
        {"merge with two spaces", "h  i", "is not two tokens separated by one space"},
        {"merge of three", "h i h", "is not two tokens separated by one space"},
        {"merge ending in a space", "h ", "is not two tokens separated by one space"},
        {"empty merge", "", "is not two tokens separated by one space"},
        {"merge of an unknown token", "h zz", "names 'zz', which is not a token"},
        {"merge making no token", "i h", "makes 'ih', which is not a token"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        spec b = {0};
        chat_spec(&b, &ctl, &user);
        free(b.merge[1]);
        b.merge[1] = strdup(lines[i].line);
        char want[160];
        snprintf(want, sizeof want, "tokenizer.ggml.merges[1]");
        expect_refused(lines[i].what, &b, &DEFAULTS, LT_EFORMAT, lines[i].msg);
        ASSERT_TRUE(strstr(lt_errmsg(), want) != NULL);
        spec_free(&b);
    }
    spec_free(&s);
}

int main(void) {
    const char *w = getenv("LT_WORK_DIR");
    snprintf(gguf_path, sizeof gguf_path, "%s/bpe_vocab_%d.gguf", w && *w ? w : ".",
             (int)getpid());
    ref_map_init();
    test_merge_engine();
    test_special_tokens();
    test_decode();
    test_bad_vocabs();
    remove(gguf_path);
    return lt_test_finish();
}
