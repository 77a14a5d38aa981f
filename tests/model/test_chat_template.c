/* Chat templates against the real thing: the published Jinja templates of
 * real models, rendered by the jinja2 package as Hugging Face renders them
 * (tests/reference/chat_jinja.py), byte for byte against lt_chat_format for
 * conversations with and without a system message, one and several turns,
 * whitespace the templates strip, non-ASCII text, with and without the
 * assistant's opener; the same refusals; lt_chat_format_after against the
 * tail of the full rendering; and detection: each template is recognised
 * as its style, llama.cpp's other styles are named in the error. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "looptune/model.h"
#include "test.h"

typedef struct {
    const char *model; /* whose published template */
    lt_chat_style style;
    const char *tmpl;
    const char *bos, *eos;
    bool needs_system; /* it adds a default system message to conversations without one */
} tmpl_case;

static const tmpl_case cases[] = {
    {"teknium/OpenHermes-2.5-Mistral-7B", LT_CHAT_CHATML,
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
     " + "
     "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n"
     "' "
     "}}{% endif %}",
     "<s>", "<|im_end|>", false},
    {"llama.cpp's default (chatml)", LT_CHAT_CHATML,
     "{%- for message in messages -%}\n"
     "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
     "{%- endfor -%}\n"
     "{%- if add_generation_prompt -%}\n"
     "  {{- '<|im_start|>assistant\n' -}}\n"
     "{%- endif -%}",
     "", "", false},
    {"Qwen/Qwen2-7B-Instruct", LT_CHAT_CHATML,
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
     "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|"
     ">' "
     "+ message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
     "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     "", "<|im_end|>", true},
    {"meta-llama/Llama-2-7b-chat-hf", LT_CHAT_LLAMA2,
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
     "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set "
     "system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] "
     "== 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
     "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message !"
     "= "
     "false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
     "message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
     "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% eli"
     "f "
     "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% "
     "endfor %}",
     "<s>", "</s>", false},
    {"meta-llama/Meta-Llama-3-8B-Instruct", LT_CHAT_LLAMA3,
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
     "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
     "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif "
     "%}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
     "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
     "<|begin_of_text|>", "<|eot_id|>", false},
    {"mistralai/Mistral-7B-Instruct-v0.2 (Mistral's v1 template)", LT_CHAT_MISTRAL_V1,
     "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = "
     "messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- "
     "set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in "
     "loop_messages %}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n     "
     "  "
     " {{- raise_exception('After the optional system message, conversation roles must alternate "
     "user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == 'use"
     "r' "
     "%}\n        {%- if loop.first and system_message is defined %}\n            {{- ' [INST] ' + "
     "system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n       "
     "  "
     "   {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif "
     "message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    "
     "{%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with "
     "the exception of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n",
     "<s>", "</s>", false},
    {"mistralai/Mistral-Large-Instruct-2411 (Mistral's v7 template)", LT_CHAT_MISTRAL_V7,
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
     "message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] '"
     " + "
     "message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + "
     "message['content'] + eos_token }}{% else %}{{ raise_exception('Only user, system and "
     "assistant roles are supported!') }}{% endif %}{% endfor %}",
     "<s>", "</s>", false},
    {"HuggingFaceH4/zephyr-7b-beta", LT_CHAT_ZEPHYR,
     "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
     "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' "
     "+ message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ "
     "'<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and "
     "add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}",
     "<s>", "</s>", false},
    {"microsoft/Phi-3.5-mini-instruct", LT_CHAT_PHI3,
     "{% for message in messages %}{% if message['role'] == 'system' and message['content'] "
     "%}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' "
     "%}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' "
     "%}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if "
     "add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}\n",
     "<s>", "<|endoftext|>", false},
};
#define N_CASES (sizeof cases / sizeof cases[0])

#define MAXM 8
typedef struct {
    int n;
    lt_chat_msg m[MAXM];
} conv;

static const conv convs[] = {
    {1, {{"user", "Hello"}}},
    {2, {{"system", "You are a helpful assistant"}, {"user", "Hello"}}},
    {4,
     {{"system", "You are a helpful assistant"},
      {"user", "Hello"},
      {"assistant", "Hi there"},
      {"user", "Who are you"}}},
    {5,
     {{"user", "One"},
      {"assistant", "Two"},
      {"user", "Three"},
      {"assistant", "Four"},
      {"user", "Five?"}}},
    /* whitespace the stripping templates remove: ASCII, NBSP, ideographic space */
    {4,
     {{"system", "  Be brief.\n"},
      {"user", " \tHi there \n"},
      {"assistant", "   I am an assistant   "},
      {"user", "\xc2\xa0What is 2+2?\xe3\x80\x80"}}},
    {3,
     {{"system", ""},
      {"user", "Gr\xc3\xbc\xc3\x9f" "e, \xe4\xb8\x96\xe7\x95\x8c"},
      {"assistant", "\xf0\x9f\x91\x8b"}}},
};
#define N_CONVS (sizeof convs / sizeof convs[0])

/* JSON string of s. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static char script[1024];
static bool have_jinja;
/* The reference renderer, started once (chat_jinja.py --serve): requests
 * on its stdin, renderings on its stdout. */
static FILE *jin_w, *jin_r;
static pid_t jin_pid = -1;

static bool jinja_start(void) {
    int in[2], out[2];
    if (pipe(in) || pipe(out)) return false;
    jin_pid = fork();
    if (jin_pid < 0) return false;
    if (jin_pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        if (!freopen("/dev/null", "w", stderr)) _exit(127);
        execlp("python3", "python3", script, "--serve", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    jin_w = fdopen(in[1], "wb");
    jin_r = fdopen(out[0], "rb");
    return jin_w && jin_r;
}

static void jinja_stop(void) {
    if (jin_w) fclose(jin_w); /* end of its stdin: it exits */
    if (jin_r) fclose(jin_r);
    if (jin_pid > 0) waitpid(jin_pid, NULL, 0);
}

/* Jinja's rendering into *out (malloc'd); returns the script's status (0,
 * 3 = refused, 4 = no jinja2), -1 if the renderer is gone. */
static int jinja(const tmpl_case *t, const lt_chat_msg *m, int n, bool gen, char **out,
                 size_t *len) {
    *out = NULL;
    *len = 0;
    FILE *f = jin_w;
    if (!f) return -1;
    /* one line: json_str escapes every control character */
    fputs("{\"template\": ", f);
    json_str(f, t->tmpl);
    fputs(", \"bos_token\": ", f);
    json_str(f, t->bos);
    fputs(", \"eos_token\": ", f);
    json_str(f, t->eos);
    fprintf(f, ", \"add_generation_prompt\": %s, \"messages\": [", gen ? "true" : "false");
    for (int i = 0; i < n; i++) {
        fputs(i ? ", {\"role\": " : "{\"role\": ", f);
        json_str(f, m[i].role);
        fputs(", \"content\": ", f);
        json_str(f, m[i].content);
        fputs("}", f);
    }
    fputs("]}\n", f);
    int st;
    size_t want;
    if (fflush(f) || fscanf(jin_r, "%d %zu", &st, &want) != 2 || fgetc(jin_r) != '\n' ||
        want > (1u << 20))
        return -1;
    *out = malloc(want + 1);
    *len = fread(*out, 1, want, jin_r);
    (*out)[*len] = 0;
    return *len == want ? st : -1;
}

static void test_render(void) {
    int compared = 0;
    for (size_t c = 0; c < N_CASES; c++) {
        const tmpl_case *t = &cases[c];
        const lt_chat_template lt = {.style = t->style, .bos = t->bos, .eos = t->eos};
        for (size_t k = 0; k < N_CONVS; k++) {
            if (t->needs_system && strcmp(convs[k].m[0].role, "system")) continue;
            for (int gen = 0; gen < 2; gen++) {
                char *want, *got = NULL;
                size_t wn, gn = 0;
                int st = jinja(t, convs[k].m, convs[k].n, gen, &want, &wn);
                ASSERT_TRUE(st == 0 || st == 3);
                int rc = lt_chat_format(&lt, convs[k].m, convs[k].n, gen, &got, &gn);
                if (st == 3) {
                    ASSERT_EQ(rc, LT_EINVAL); /* both refuse */
                } else if (st == 0) {
                    ASSERT_EQ(rc, LT_OK);
                    const bool same = rc == LT_OK && gn == wn && memcmp(got, want, wn) == 0;
                    if (!same)
                        fprintf(stderr,
                                "%s, conversation %zu, gen %d:\n jinja   [%s]\n looptune [%s]\n",
                                t->model, k, gen, want, got ? got : "(error)");
                    ASSERT_TRUE(same);
                    compared++;
                }
                free(want);
                free(got);
            }
        }
    }
    ASSERT_TRUE(compared >= 90);
}

/* Conversations some templates refuse: looptune refuses exactly those. */
static void test_refusals(void) {
    static const conv bad[] = {
        {2, {{"user", "a"}, {"user", "b"}}},
        {2, {{"system", "s"}, {"assistant", "a"}}},
        {3, {{"user", "a"}, {"assistant", "b"}, {"tool", "c"}}},
    };
    int refused = 0;
    for (size_t c = 0; c < N_CASES; c++) {
        const lt_chat_template lt = {cases[c].style, cases[c].bos, cases[c].eos};
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            if (cases[c].needs_system && strcmp(bad[k].m[0].role, "system")) continue;
            char *want, *got = NULL;
            size_t wn, gn;
            int st = jinja(&cases[c], bad[k].m, bad[k].n, true, &want, &wn);
            int rc = lt_chat_format(&lt, bad[k].m, bad[k].n, true, &got, &gn);
            ASSERT_TRUE(st == 0 || st == 3);
            ASSERT_EQ(rc == LT_OK, st == 0);
            if (st == 0 && rc == LT_OK && !(gn == wn && memcmp(got, want, wn) == 0))
                fprintf(stderr, "%s, bad conversation %zu:\n jinja   [%s]\n looptune [%s]\n",
                        cases[c].model, k, want, got);
            if (st == 0 && rc == LT_OK) ASSERT_TRUE(gn == wn && memcmp(got, want, wn) == 0);
            refused += st == 3;
            free(want);
            free(got);
        }
    }
    ASSERT_TRUE(refused >= 4);
}

/* What follows a reply's content in the full rendering is what
 * lt_chat_format_after gives. */
static void test_after_reply(void) {
    const lt_chat_msg m[5] = {{"system", "Sys"}, {"user", "Q1"}, {"assistant", "R-E-P-L-Y"},
                              {"user", "Q2"}};
    for (size_t c = 0; c < N_CASES; c++) {
        const lt_chat_template lt = {cases[c].style, cases[c].bos, cases[c].eos};
        char *want, *got;
        size_t wn, gn;
        ASSERT_EQ(jinja(&cases[c], m, 4, true, &want, &wn), 0);
        ASSERT_EQ(lt_chat_format_after(&lt, m, 4, 2, &got, &gn), LT_OK);
        const char *at = want ? strstr(want, "R-E-P-L-Y") : NULL;
        ASSERT_TRUE(at != NULL);
        if (at) ASSERT_STREQ(got, at + strlen("R-E-P-L-Y"));
        ASSERT_EQ(gn, strlen(got));
        free(want);
        free(got);
        ASSERT_EQ(lt_chat_format_after(&lt, m, 4, 1, &got, &gn), LT_EINVAL); /* not a reply */
    }
}

static void test_detect(void) {
    lt_chat_style s;
    for (size_t c = 0; c < N_CASES; c++) {
        s = LT_CHAT_STYLE_COUNT;
        ASSERT_EQ(lt_chat_detect(cases[c].tmpl, strlen(cases[c].tmpl), &s), LT_OK);
        if (s != cases[c].style)
            fprintf(stderr, "%s detected as %s\n", cases[c].model, lt_chat_style_name(s));
        ASSERT_EQ(s, cases[c].style);
    }
    /* no template: llama.cpp's default */
    ASSERT_EQ(lt_chat_detect(NULL, 0, &s), LT_OK);
    ASSERT_EQ(s, LT_CHAT_CHATML);
    ASSERT_EQ(lt_chat_detect("", 0, &s), LT_OK);
    ASSERT_EQ(s, LT_CHAT_CHATML);
    /* names */
    for (int i = 0; i < LT_CHAT_STYLE_COUNT; i++) {
        const char *name = lt_chat_style_name((lt_chat_style)i);
        ASSERT_EQ(lt_chat_detect(name, strlen(name), &s), LT_OK);
        ASSERT_EQ(s, i);
        ASSERT_EQ(lt_chat_style_parse(name, &s), LT_OK);
        ASSERT_EQ(s, i);
        ASSERT_TRUE(strstr(lt_chat_style_list(), name) != NULL);
    }
    ASSERT_EQ(lt_chat_style_parse("llama2-sys-strip", &s), LT_OK);
    ASSERT_EQ(s, LT_CHAT_LLAMA2);
    ASSERT_EQ(lt_chat_style_parse("gemma", &s), LT_ENOTFOUND);
    ASSERT_TRUE(strstr(lt_errmsg(), "chatml, llama2") != NULL);
    /* llama.cpp's styles looptune does not render are named */
    const char *gemma = "{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + "
                        "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}";
    ASSERT_EQ(lt_chat_detect(gemma, strlen(gemma), &s), LT_ENOTFOUND);
    ASSERT_TRUE(strstr(lt_errmsg(), "'gemma'") != NULL);
    const char *old_mistral = "{{ bos_token }}{% for message in messages %}{% if message['role'] "
                              "== 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% eli"
                              "f "
                              "message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
                              "{% endif %}{% endfor %}";
    ASSERT_EQ(lt_chat_detect(old_mistral, strlen(old_mistral), &s), LT_ENOTFOUND);
    ASSERT_TRUE(strstr(lt_errmsg(), "'llama2'") != NULL);
    const char *junk = "{{ messages }}";
    ASSERT_EQ(lt_chat_detect(junk, strlen(junk), &s), LT_ENOTFOUND);
}

int main(void) {
    test_detect();
    const char *data = getenv("LT_DATA_DIR");
    snprintf(script, sizeof script, "%s/../reference/chat_jinja.py", data ? data : "tests/data");
    signal(SIGPIPE, SIG_IGN); /* a renderer gone is an error return, not the test's death */
    char *out = NULL;
    size_t n;
    const lt_chat_msg hi = {"user", "hi"};
    const int st = jinja_start() ? jinja(&cases[0], &hi, 1, true, &out, &n) : -1;
    free(out);
    have_jinja = st == 0;
    if (!have_jinja) {
        lt_test_skip("rendering against jinja2",
                     st == 4 ? "the jinja2 package is not installed (scripts/deps.sh installs it)"
                             : "python3 cannot run tests/reference/chat_jinja.py");
    } else {
        test_render();
        test_refusals();
        test_after_reply();
    }
    jinja_stop();
    return lt_test_finish();
}
