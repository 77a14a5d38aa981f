/* Pre-tokenizers of byte-level BPE vocabularies: the regexes that cut text
 * into words before merging, one set per tokenizer.ggml.pre name, matched
 * with PCRE2 in UTF + UCP mode. The regexes are the published ones
 * (llama.cpp's src/llama-vocab.cpp, the models' tokenizer.json); each
 * regex of a set cuts the fragments the previous one left, and text between
 * matches stays a fragment of its own, as llama.cpp and Hugging Face's
 * Split(behavior = Isolated) do. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/pretok.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REGEXES 6

/* The regex sets, by the names llama.cpp gives them. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                                  \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"     \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                   \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"     \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                                  \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|"                                 \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|"                                                   \
    "\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* DeepSeek LLM's Latin, Greek, Cyrillic, ... letters (its tokenizer.json, as llama.cpp has it) */
#define RE_DEEPSEEK_LLM_LETTERS \
    "\\s?[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}" \
    "\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}" \
    "\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}\\x{3f7}-" \
    "\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}" \
    "\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}\\x{1d6b}-" \
    "\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}" \
    "\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}\\x{1f5f}-\\x{1f7d}" \
    "\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}\\x{1fc6}-\\x{1fcc}" \
    "\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{1ff4}\\x{1ff6}-" \
    "\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}\\x{2124}" \
    "\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}\\x{2139}\\x{213c}-\\x{213f}" \
    "\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}" \
    "\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-" \
    "\\x{a76f}\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}" \
    "\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}" \
    "\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}" \
    "\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}]+"

typedef struct {
    const char *name; /* the set, as llama.cpp names its pre-tokenizer type */
    const char *re[MAX_REGEXES];
} regex_set;

static const regex_set SETS[] = {
    {"default",
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"gpt2", {RE_GPT2}},
    {"llama3", {RE_LLAMA3}},
    {"starcoder", {"\\p{N}", RE_GPT2}},
    {"qwen2", {RE_QWEN2}},
    {"qwen35", {RE_QWEN35}},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {"deepseek-llm",
     {"[\\r\\n]", RE_DEEPSEEK_LLM_LETTERS,
      "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-\\x{3002}]+",
      "\\s+$",
      "[\\x{4e00}-\\x{9fa5}\\x{0800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+", "\\p{N}+"}},
    {"deepseek-coder",
     {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
      "[\\x{4e00}-\\x{9fa5}\\x{0800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+", "\\p{N}"}},
};

/* tokenizer.ggml.pre names and what they mean (llama.cpp's table, for the
 * sets above). ignore_merges: a word that is a token is not merged;
 * add_bos: the vocabulary adds BOS unless the file says otherwise. */
static const struct {
    const char *pre;
    const char *set;
    bool ignore_merges, add_bos, no_bos;
} NAMES[] = {
    {"default", "default", false, false, false},
    {"llama3", "llama3", true, true, false},
    {"llama-v3", "llama3", true, true, false},
    {"llama-bpe", "llama3", true, true, false},
    {"falcon3", "llama3", true, true, false},
    {"falcon-h1", "llama3", true, true, false},
    {"pixtral", "llama3", true, true, false},
    {"midm-2.0", "llama3", true, true, false},
    {"lfm2", "llama3", true, true, false},
    {"jina-v5-nano", "llama3", true, true, false},
    {"dbrx", "llama3", false, false, false},
    {"smaug-bpe", "llama3", false, false, false},
    {"chatglm-bpe", "llama3", false, false, true},
    {"glm4", "llama3", true, false, true},
    {"glm5", "llama3", true, false, true},
    {"gpt-2", "gpt2", false, false, false},
    {"phi-2", "gpt2", false, false, false},
    {"jina-es", "gpt2", false, false, false},
    {"jina-de", "gpt2", false, false, false},
    {"gigachat", "gpt2", false, false, false},
    {"jina-v2-es", "gpt2", false, false, false},
    {"jina-v2-de", "gpt2", false, false, false},
    {"a.x-4.0", "gpt2", false, false, false},
    {"mellum", "gpt2", false, false, false},
    {"exaone4", "gpt2", false, false, false},
    {"mpt", "gpt2", false, false, false},
    {"olmo", "gpt2", false, false, false},
    {"jais", "gpt2", false, false, false},
    {"trillion", "gpt2", false, false, false},
    {"granite-docling", "gpt2", false, false, false},
    {"starcoder", "starcoder", false, false, false},
    {"refact", "starcoder", false, false, false},
    {"command-r", "starcoder", false, false, false},
    {"smollm", "starcoder", false, false, false},
    {"codeshell", "starcoder", false, false, false},
    {"exaone", "starcoder", false, false, false},
    {"minerva-7b", "starcoder", false, false, false},
    {"mellum2", "starcoder", false, false, false},
    {"qwen2", "qwen2", false, false, false},
    {"deepseek-r1-qwen", "qwen2", false, false, false},
    {"kormo", "qwen2", false, false, false},
    {"f2llmv2", "qwen2", false, false, false},
    {"megrez", "qwen2", false, false, false},
    {"stablelm2", "qwen2", false, false, false},
    {"hunyuan", "qwen2", false, false, false},
    {"solar-open", "qwen2", false, false, false},
    {"qwen35", "qwen35", false, false, false},
    {"falcon", "falcon", false, false, false},
    {"deepseek-coder", "deepseek-coder", false, false, false},
    {"deepseek-llm", "deepseek-llm", false, false, false},
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Names llama.cpp knows whose regexes looptune does not carry. */
static const char *const KNOWN_ELSEWHERE[] = {
    "minicpm5", "deepseek-v3", "spark2_5", "youtu", "jais-2", "gemma4",
    "granite-embed-multi-311m", "sarvam-moe", "jina-v1-en", "jina-v2-code", "roberta-bpe",
    "whitespace", "viking", "tekken", "bloom", "gpt3-finnish", "poro-chat", "exaone-moe",
    "chameleon", "gpt-4o", "llama4", "kanana2", "talkie", "granite-embed-multi-97m", "tiny_aya",
    "cohere2moe", "superbpe", "bailingmoe", "bailingmoe2", "llada-moe", "seed-coder",
    "hunyuan-dense", "hy_v4", "joyai-llm", "kimi-k2", "ufakzeka", "grok-2", "afmoe", "laguna",
    "minimax-m2", "modern-bert",
};

struct lt__pretok {
    const char *name;
    int n;
    pcre2_code *re[MAX_REGEXES];
};

void lt__pretok_free(lt__pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->re[i]);
    free(p);
}

/* The regex as PCRE2 should read it: \s and \S become Unicode's White_Space
 * property, the set llama.cpp and Hugging Face's tokenizers use (PCRE2's own
 * \s also takes U+180E). Returns a malloc'd string. */
static char *with_white_space(const char *re) {
    static const char WS[] = "\\p{White_Space}", NWS[] = "\\P{White_Space}";
    size_t n = strlen(re);
    char *out = malloc(n * sizeof WS + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (re[i] == '\\' && i + 1 < n) {
            char c = re[++i];
            if (c == 's' || c == 'S') {
                const char *w = c == 's' ? WS : NWS;
                memcpy(o, w, sizeof WS - 1);
                o += sizeof WS - 1;
            } else {
                *o++ = '\\';
                *o++ = c;
            }
        } else {
            *o++ = re[i];
        }
    }
    *o = '\0';
    return out;
}

int lt__pretok_init(lt__pretok **out, const char *pre, size_t pre_len, lt__pretok_info *info) {
    *out = NULL;
    int k = -1;
    for (size_t i = 0; i < COUNT(NAMES) && k < 0; i++)
        if (strlen(NAMES[i].pre) == pre_len && memcmp(NAMES[i].pre, pre, pre_len) == 0)
            k = (int)i;
    if (k < 0) {
        int shown = (int)(pre_len > 64 ? 64 : pre_len);
        for (size_t i = 0; i < COUNT(KNOWN_ELSEWHERE); i++)
            if (strlen(KNOWN_ELSEWHERE[i]) == pre_len &&
                memcmp(KNOWN_ELSEWHERE[i], pre, pre_len) == 0)
                return lt_error(LT_EUNSUPPORTED, "pre-tokenizer '%.*s' is not supported",
                                shown, pre);
        return lt_error(LT_EUNSUPPORTED, "unknown pre-tokenizer '%.*s'", shown, pre);
    }
    const regex_set *set = NULL;
    for (size_t i = 0; i < COUNT(SETS); i++)
        if (strcmp(SETS[i].name, NAMES[k].set) == 0) set = &SETS[i];
    LT_ASSERT(set != NULL);
    lt__pretok *p = calloc(1, sizeof *p);
    if (!p) return lt_error(LT_ENOMEM, "pre-tokenizer: out of memory");
    p->name = set->name;
    for (int i = 0; i < MAX_REGEXES && set->re[i]; i++) {
        char *re = with_white_space(set->re[i]);
        if (!re) {
            lt__pretok_free(p);
            return lt_error(LT_ENOMEM, "pre-tokenizer: out of memory");
        }
        int err;
        PCRE2_SIZE at;
        /* $ is the fragment's end, as with llama.cpp's std::regex */
        uint32_t flags = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | PCRE2_DOLLAR_ENDONLY;
        p->re[i] = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, flags, &err, &at, NULL);
        free(re);
        if (!p->re[i]) {
            PCRE2_UCHAR why[120];
            pcre2_get_error_message(err, why, sizeof why);
            lt__pretok_free(p);
            return lt_error(LT_EINVAL, "pre-tokenizer %s: regex %d: %s at offset %zu", set->name,
                            i, (const char *)why, (size_t)at);
        }
        pcre2_jit_compile(p->re[i], PCRE2_JIT_COMPLETE); /* faster where JIT exists */
        p->n = i + 1;
    }
    if (info) {
        info->set = set->name;
        info->ignore_merges = NAMES[k].ignore_merges;
        info->add_bos = NAMES[k].add_bos;
        info->no_bos = NAMES[k].no_bos;
    }
    *out = p;
    return LT_OK;
}

const char *lt__pretok_name(const lt__pretok *p) { return p->name; }

/* Cuts the fragments [0, *n) of offs/lens (byte offsets into text) with one
 * regex, writing the result to noffs/nlens; returns the new count. */
static int64_t cut(const pcre2_code *re, pcre2_match_data *md, const char *text,
                   const int64_t *offs, const int64_t *lens, int64_t n, int64_t *noffs,
                   int64_t *nlens) {
    int64_t k = 0;
    for (int64_t f = 0; f < n; f++) {
        PCRE2_SPTR s = (PCRE2_SPTR)(text + offs[f]);
        PCRE2_SIZE len = (PCRE2_SIZE)lens[f], pos = 0, prev = 0;
        while (pos <= len) {
            /* the fragment is the whole subject: lookaheads stop at its end */
            int rc = pcre2_match(re, s, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc < 0) break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            if (ov[1] == ov[0]) { /* empty match: step one codepoint on */
                pos = ov[0] + 1;
                while (pos < len && (s[pos] & 0xc0) == 0x80) pos++;
                continue;
            }
            if (ov[0] > prev) {
                noffs[k] = offs[f] + (int64_t)prev;
                nlens[k++] = (int64_t)(ov[0] - prev);
            }
            noffs[k] = offs[f] + (int64_t)ov[0];
            nlens[k++] = (int64_t)(ov[1] - ov[0]);
            prev = pos = ov[1];
        }
        if (prev < len) {
            noffs[k] = offs[f] + (int64_t)prev;
            nlens[k++] = (int64_t)(len - prev);
        }
    }
    return k;
}

int lt__pretok_split(const lt__pretok *p, const char *text, int64_t len, int64_t *offs,
                     int64_t *lens, int64_t *n_words) {
    *n_words = 0;
    if (len == 0) return LT_OK;
    int64_t *tmp = malloc(2 * (size_t)len * sizeof *tmp);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!tmp || !md) {
        free(tmp);
        pcre2_match_data_free(md);
        return lt_error(LT_ENOMEM, "pre-tokenizer: out of memory for %lld bytes", (long long)len);
    }
    /* ping-pong between the caller's arrays and tmp; every fragment is at
     * least one byte, so len entries always suffice */
    int64_t *ao = offs, *al = lens, *bo = tmp, *bl = tmp + len, n = 1;
    ao[0] = 0;
    al[0] = len;
    for (int i = 0; i < p->n; i++) {
        n = cut(p->re[i], md, text, ao, al, n, bo, bl);
        int64_t *t = ao;
        ao = bo;
        bo = t;
        t = al;
        al = bl;
        bl = t;
    }
    if (ao != offs) {
        memcpy(offs, ao, (size_t)n * sizeof *offs);
        memcpy(lens, al, (size_t)n * sizeof *lens);
    }
    free(tmp);
    pcre2_match_data_free(md);
    *n_words = n;
    return LT_OK;
}
