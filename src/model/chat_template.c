/* Chat templates: which style a model's tokenizer.chat_template is, decided
 * by the substrings llama.cpp's built-in list looks for (src/llama-chat.cpp,
 * in its order), and each style's rendering of a conversation, byte for byte
 * what the style's published Jinja template gives (as Hugging Face renders
 * it: trim_blocks, lstrip_blocks; Jinja's trim and Python's strip remove
 * Unicode whitespace). */
#include "looptune/model.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    lt_chat_style style;
} style_names[] = {
    {"chatml", LT_CHAT_CHATML},        {"llama2", LT_CHAT_LLAMA2},
    {"llama3", LT_CHAT_LLAMA3},        {"mistral-v1", LT_CHAT_MISTRAL_V1},
    {"mistral-v7", LT_CHAT_MISTRAL_V7}, {"zephyr", LT_CHAT_ZEPHYR},
    {"phi3", LT_CHAT_PHI3},
    /* llama.cpp's name for the template Meta published with Llama 2 chat */
    {"llama2-sys-strip", LT_CHAT_LLAMA2},
};
#define N_STYLE_NAMES (sizeof style_names / sizeof style_names[0])
_Static_assert(LT_CHAT_STYLE_COUNT == 7, "a name per style");

const char *lt_chat_style_name(lt_chat_style s) {
    return s >= 0 && s < LT_CHAT_STYLE_COUNT ? style_names[s].name : "?";
}

const char *lt_chat_style_list(void) {
    return "chatml, llama2, llama3, mistral-v1, mistral-v7, zephyr, phi3";
}

int lt_chat_style_parse(const char *name, lt_chat_style *out) {
    for (size_t i = 0; i < N_STYLE_NAMES; i++)
        if (!strcmp(name, style_names[i].name)) {
            *out = style_names[i].style;
            return LT_OK;
        }
    return lt_error(LT_ENOTFOUND, "unknown chat template '%s' (known: %s)", name,
                    lt_chat_style_list());
}

/* ---- detection --------------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t n;
} span;

static bool has(span t, const char *needle) {
    const size_t k = strlen(needle);
    if (k > t.n) return false;
    for (size_t i = 0; i + k <= t.n; i++)
        if (t.s[i] == needle[0] && memcmp(t.s + i, needle, k) == 0) return true;
    return false;
}

/* The style of t, or NULL with *other the name llama.cpp gives a style
 * looptune does not render (NULL too when llama.cpp knows none). Same tests
 * in the same order as llama.cpp's, up to the last supported style. */
static bool detect(span t, lt_chat_style *out, const char **other) {
    *other = NULL;
#define IS(st) return (*out = (st)), true
#define NOT(name) return (*other = (name)), false
    if (has(t, "<|im_start|>")) {
        if (has(t, "<|im_sep|>")) NOT("phi4");
        if (has(t, "<end_of_utterance>")) NOT("smolvlm");
        IS(LT_CHAT_CHATML);
    }
    if ((t.n >= 7 && !memcmp(t.s, "mistral", 7)) || has(t, "[INST]")) {
        if (has(t, "[SYSTEM_PROMPT]")) IS(LT_CHAT_MISTRAL_V7);
        if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
            if (has(t, " [INST]")) IS(LT_CHAT_MISTRAL_V1);
            NOT(has(t, "\"[INST]\"") ? "mistral-v3-tekken" : "mistral-v3");
        }
        /* Llama 2's variants: Meta's own template strips the messages */
        if (has(t, "content.strip()")) IS(LT_CHAT_LLAMA2);
        if (has(t, "bos_token + '[INST]")) NOT("llama2-sys-bos");
        NOT(has(t, "<<SYS>>") ? "llama2-sys" : "llama2");
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) IS(LT_CHAT_PHI3);
    if (has(t, "[gMASK]<sop>")) NOT("chatglm4");
    if (has(t, "<|assistant|>") && has(t, "<|user|>")) {
        if (has(t, "<|tool_declare|>")) NOT("exaone-moe");
        /* Zephyr's published template (HuggingFaceH4/zephyr-7b-beta) ends
         * every message with eos_token; llama.cpp takes it for GLM-Edge's,
         * whose template ends none, and Falcon 3's, which writes </s> */
        if (has(t, "eos_token") && !has(t, "</s>")) IS(LT_CHAT_ZEPHYR);
        NOT(has(t, "</s>") ? "falcon3" : "glmedge");
    }
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>")) NOT("glmedge");
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) IS(LT_CHAT_ZEPHYR);
    if (has(t, "bos_token + message['role']")) NOT("monarch");
    if (has(t, "<start_of_turn>")) NOT("gemma");
    if (has(t, "'\\n\\nAssistant: ' + eos_token")) NOT("orion");
    if (has(t, "GPT4 Correct ")) NOT("openchat");
    if (has(t, "USER: ") && has(t, "ASSISTANT: "))
        NOT(has(t, "SYSTEM: ") ? "vicuna-orca" : "vicuna");
    if (has(t, "### Instruction:") && has(t, "<|EOT|>")) NOT("deepseek");
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>")) NOT("command-r");
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) IS(LT_CHAT_LLAMA3);
    return false;
#undef IS
#undef NOT
}

int lt_chat_detect(const char *tmpl, size_t len, lt_chat_style *out) {
    if (!tmpl || len == 0) { /* llama.cpp's default */
        *out = LT_CHAT_CHATML;
        return LT_OK;
    }
    for (size_t i = 0; i < N_STYLE_NAMES; i++)
        if (strlen(style_names[i].name) == len && !memcmp(tmpl, style_names[i].name, len)) {
            *out = style_names[i].style;
            return LT_OK;
        }
    const char *other;
    if (detect((span){tmpl, len}, out, &other)) return LT_OK;
    if (other)
        return lt_error(LT_ENOTFOUND, "the chat template is llama.cpp's '%s', which looptune "
                        "does not render (it renders %s)", other, lt_chat_style_list());
    return lt_error(LT_ENOTFOUND, "the chat template is none of the styles looptune renders (%s)",
                    lt_chat_style_list());
}

/* ---- rendering ----------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} buf;

static void put_n(buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void put(buf *b, const char *s) { put_n(b, s, strlen(s)); }

/* Length of the UTF-8 character ending at s[n-1] (1 for a stray byte). */
static size_t last_char_len(const char *s, size_t n) {
    size_t k = 1;
    while (k < n && k < 4 && ((unsigned char)s[n - k] & 0xc0) == 0x80) k++;
    return ((unsigned char)s[n - k] & 0xc0) == 0x80 ? 1 : k;
}

/* The code point of the UTF-8 character at s (k bytes), or -1. */
static long code_point(const char *s, size_t k) {
    const unsigned char *u = (const unsigned char *)s;
    if (k == 1) return u[0] < 0x80 ? u[0] : -1;
    long c = u[0] & (0x7f >> k);
    for (size_t i = 1; i < k; i++) c = (c << 6) | (u[i] & 0x3f);
    return c;
}

static size_t char_len(const char *s, size_t n) {
    const unsigned char c = (unsigned char)s[0];
    size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return k <= n ? k : 1;
}

/* Python's str.isspace: what strip() and Jinja's trim remove. */
static bool py_space(long c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* s[0..n) without leading and trailing whitespace, as Python's strip(). */
static span strip(const char *s, size_t n) {
    while (n > 0) {
        size_t k = char_len(s, n);
        if (!py_space(code_point(s, k))) break;
        s += k, n -= k;
    }
    while (n > 0) {
        size_t k = last_char_len(s, n);
        if (!py_space(code_point(s + n - k, k))) break;
        n -= k;
    }
    return (span){s, n};
}

static bool is(const lt_chat_msg *m, const char *role) { return !strcmp(m->role, role); }

static int refuse(const char *style, const char *why) {
    return lt_error(LT_EINVAL, "the %s chat template refuses this conversation: %s", style, why);
}

static int render_chatml(const lt_chat_msg *m, int64_t n, bool gen, buf *b) {
    for (int64_t i = 0; i < n; i++) {
        put(b, "<|im_start|>"), put(b, m[i].role), put(b, "\n"), put(b, m[i].content);
        put(b, "<|im_end|>\n");
    }
    if (gen) put(b, "<|im_start|>assistant\n");
    return LT_OK;
}

/* Meta's Llama 2 chat template: an optional first system message goes into
 * the first user turn between <<SYS>> markers; the turns must alternate
 * user, assistant, ...; every user turn starts with BOS. */
static int render_llama2(const lt_chat_template *t, const lt_chat_msg *m, int64_t n, buf *b) {
    const bool sys = n > 0 && is(&m[0], "system");
    const lt_chat_msg *loop = m + sys;
    for (int64_t i = 0; i < n - sys; i++) {
        if (is(&loop[i], "user") != (i % 2 == 0))
            return refuse("llama2", "roles must alternate user/assistant/user/assistant/...");
        buf c = {0};
        if (i == 0 && sys) put(&c, "<<SYS>>\n"), put(&c, m[0].content), put(&c, "\n<</SYS>>\n\n");
        put(&c, loop[i].content);
        if (c.oom) return lt_error(LT_ENOMEM, "chat template: out of memory");
        span s = strip(c.p ? c.p : "", c.n);
        if (is(&loop[i], "user")) {
            put(b, t->bos), put(b, "[INST] "), put_n(b, s.s, s.n), put(b, " [/INST]");
        } else if (is(&loop[i], "assistant")) {
            put(b, " "), put_n(b, s.s, s.n), put(b, " "), put(b, t->eos);
        }
        free(c.p);
    }
    return LT_OK;
}

static int render_llama3(const lt_chat_template *t, const lt_chat_msg *m, int64_t n, bool gen,
                         buf *b) {
    for (int64_t i = 0; i < n; i++) {
        if (i == 0) put(b, t->bos);
        span s = strip(m[i].content, strlen(m[i].content));
        put(b, "<|start_header_id|>"), put(b, m[i].role), put(b, "<|end_header_id|>\n\n");
        put_n(b, s.s, s.n), put(b, "<|eot_id|>");
    }
    if (gen) put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return LT_OK;
}

/* Mistral's v1 template: the optional first system message joins the first
 * user turn; then user and assistant alternate. */
static int render_mistral_v1(const lt_chat_template *t, const lt_chat_msg *m, int64_t n, buf *b) {
    const bool sys = n > 0 && is(&m[0], "system");
    const lt_chat_msg *loop = m + sys;
    put(b, t->bos);
    for (int64_t i = 0; i < n - sys; i++) {
        if (is(&loop[i], "user") != (i % 2 == 0))
            return refuse("mistral-v1", "after the optional system message, roles must "
                                        "alternate user/assistant/user/assistant/...");
        if (is(&loop[i], "user")) {
            put(b, " [INST] ");
            if (i == 0 && sys) put(b, m[0].content), put(b, "\n\n");
            put(b, loop[i].content), put(b, " [/INST]");
        } else if (is(&loop[i], "assistant")) {
            put(b, " "), put(b, loop[i].content), put(b, t->eos);
        } else {
            return refuse("mistral-v1", "only user and assistant roles are supported, with the "
                                        "exception of an initial optional system message");
        }
    }
    return LT_OK;
}

static int render_mistral_v7(const lt_chat_template *t, const lt_chat_msg *m, int64_t n, buf *b) {
    put(b, t->bos);
    for (int64_t i = 0; i < n; i++) {
        if (is(&m[i], "user")) put(b, "[INST] "), put(b, m[i].content), put(b, "[/INST]");
        else if (is(&m[i], "system"))
            put(b, "[SYSTEM_PROMPT] "), put(b, m[i].content), put(b, "[/SYSTEM_PROMPT]");
        else if (is(&m[i], "assistant")) put(b, " "), put(b, m[i].content), put(b, t->eos);
        else return refuse("mistral-v7", "only user, system and assistant roles are supported");
    }
    return LT_OK;
}

static int render_zephyr(const lt_chat_template *t, const lt_chat_msg *m, int64_t n, bool gen,
                         buf *b) {
    for (int64_t i = 0; i < n; i++) {
        if (is(&m[i], "user") || is(&m[i], "system") || is(&m[i], "assistant")) {
            put(b, "<|"), put(b, m[i].role), put(b, "|>\n"), put(b, m[i].content);
            put(b, t->eos), put(b, "\n");
        }
        if (i == n - 1 && gen) put(b, "<|assistant|>\n");
    }
    return LT_OK;
}

/* Phi-3's (Phi-3-mini's and Phi-3.5-mini's): an empty system message is left
 * out, and a conversation not opened for the assistant ends with EOS. */
static int render_phi3(const lt_chat_template *t, const lt_chat_msg *m, int64_t n, bool gen,
                       buf *b) {
    for (int64_t i = 0; i < n; i++) {
        if ((is(&m[i], "system") && m[i].content[0]) || is(&m[i], "user") ||
            is(&m[i], "assistant")) {
            put(b, "<|"), put(b, m[i].role), put(b, "|>\n"), put(b, m[i].content);
            put(b, "<|end|>\n");
        }
    }
    put(b, gen ? "<|assistant|>\n" : t->eos);
    return LT_OK;
}

int lt_chat_format(const lt_chat_template *t, const lt_chat_msg *msgs, int64_t n,
                   bool add_generation_prompt, char **out, size_t *len) {
    *out = NULL;
    if (n < 0 || (n > 0 && !msgs)) return lt_error(LT_EINVAL, "chat template: bad message list");
    for (int64_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return lt_error(LT_EINVAL, "chat template: message %lld has no role or content",
                            (long long)i);
    lt_chat_template tt = *t;
    if (!tt.bos) tt.bos = "";
    if (!tt.eos) tt.eos = "";
    buf b = {0};
    const bool gen = add_generation_prompt;
    int rc;
    switch (t->style) {
    case LT_CHAT_CHATML: rc = render_chatml(msgs, n, gen, &b); break;
    case LT_CHAT_LLAMA2: rc = render_llama2(&tt, msgs, n, &b); break;
    case LT_CHAT_LLAMA3: rc = render_llama3(&tt, msgs, n, gen, &b); break;
    case LT_CHAT_MISTRAL_V1: rc = render_mistral_v1(&tt, msgs, n, &b); break;
    case LT_CHAT_MISTRAL_V7: rc = render_mistral_v7(&tt, msgs, n, &b); break;
    case LT_CHAT_ZEPHYR: rc = render_zephyr(&tt, msgs, n, gen, &b); break;
    case LT_CHAT_PHI3: rc = render_phi3(&tt, msgs, n, gen, &b); break;
    default: rc = lt_error(LT_EINVAL, "chat template: unknown style %d", (int)t->style);
    }
    if (!rc && b.oom) rc = lt_error(LT_ENOMEM, "chat template: out of memory");
    if (!rc && !b.p) put(&b, ""); /* an empty rendering is still a string */
    if (rc || b.oom) {
        free(b.p);
        return rc ? rc : lt_error(LT_ENOMEM, "chat template: out of memory");
    }
    *out = b.p;
    *len = b.n;
    return LT_OK;
}

/* Stands in for the reply's content: no template writes it, strips it or
 * finds it empty. */
#define REPLY_MARK "\x01looptune-reply\x02"

int lt_chat_format_after(const lt_chat_template *t, const lt_chat_msg *msgs, int64_t n,
                         int64_t reply, char **out, size_t *len) {
    *out = NULL;
    if (reply < 0 || reply >= n || !is(&msgs[reply], "assistant"))
        return lt_error(LT_EINVAL, "chat template: message %lld is not an assistant reply",
                        (long long)reply);
    lt_chat_msg *m = malloc((size_t)n * sizeof *m);
    if (!m) return lt_error(LT_ENOMEM, "chat template: out of memory");
    memcpy(m, msgs, (size_t)n * sizeof *m);
    m[reply].content = REPLY_MARK;
    char *text;
    size_t tlen;
    int rc = lt_chat_format(t, m, n, true, &text, &tlen);
    free(m);
    if (rc) return rc;
    const char *at = strstr(text, REPLY_MARK);
    LT_ASSERT(at != NULL); /* every style writes an assistant's content */
    const size_t from = (size_t)(at - text) + strlen(REPLY_MARK);
    memmove(text, text + from, tlen - from + 1);
    *out = text;
    *len = tlen - from;
    return LT_OK;
}
