/* looptune chat: a conversation in the terminal, formatted with the model's
 * chat template. The KV cache keeps every turn: each new turn prefills only
 * what the template writes after the model's last reply (the end of that
 * reply's turn, the user's message, the assistant's opener); the reply's own
 * tokens are already there, as the model generated them. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "looptune/model.h"
#include "sampler_cli.h"

static const char *const chat_help =
    "usage: looptune chat -m MODEL [options]\n"
    "\n"
    "Chats with the model: reads a message per line from stdin (prompting with \"> \"\n"
    "on a terminal), streams the reply to stdout, and keeps the conversation in the\n"
    "KV cache. End of input or /exit ends the chat.\n"
    "\n"
    "  -m, --model FILE        GGUF or llama2.c checkpoint (.bin)\n"
    "  -z, --tokenizer FILE    llama2.c tokenizer.bin (overrides a GGUF's vocabulary)\n"
    "      --chat-template T   a template name (chatml, llama2, llama3, mistral-v1,\n"
    "                          mistral-v7, zephyr, phi3) or a Jinja template to recognise\n"
    "                          (default: the model's tokenizer.chat_template; none: chatml)\n"
    "      --system TEXT       the system message (default: none)\n"
    "  -n, --n-tokens N        most tokens per reply, -1 = until an end of generation or the\n"
    "                          end of the context (default -1)\n"
    "  -t, --threads T         threads (default 2 or the CPU count, whichever is smaller)\n"
    "      --ctx N             context length to allocate (default: the model's)\n"
    "      --isa ISA           force kernels to portable, avx2 or avx512 (default: best)\n"
    "      --no-warm-start     run with the kernels' default parameters (default: the\n"
    "                          tuned ones of the config store in the user's cache)\n"
    "      --print-ids         print the replies' token ids (each end of generation too)\n"
    "                          instead of their text\n"
    "      --verbose-prompt    before each reply, print on stderr the text and token ids\n"
    "                          prefilled for the turn\n"
    "  -h, --help              this help\n"
    "\n";

/* A reply as it streams: its bytes (the assistant's message for the
 * template), how many of them are on stdout, and its ids. */
typedef struct {
    const lt_vocab *vocab;
    bool print_ids;
    char *text;
    size_t n, cap, shown;
    int32_t last;      /* the last token drawn */
    int64_t count;     /* tokens drawn */
    bool ended;        /* by an end-of-generation token */
    bool oom;
} reply;

/* Bytes of s[0..n) up to the last complete UTF-8 character (a byte-level
 * token may end inside one: the rest waits for the next token). */
static size_t complete_utf8(const char *s, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xc0) == 0x80) continue;
        const size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

static int on_token(void *user, int32_t prev, int32_t tok) {
    reply *r = user;
    r->last = tok;
    r->ended = lt_vocab_is_eog(r->vocab, tok);
    if (r->print_ids) printf(r->count ? " %d" : "%d", tok);
    r->count++;
    if (!r->ended) {
        char piece[256];
        size_t k = lt_detokenize(r->vocab, prev, tok, piece, sizeof piece);
        if (k >= sizeof piece) k = sizeof piece - 1;
        if (r->n + k + 1 > r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 1024;
            while (cap < r->n + k + 1) cap *= 2;
            char *t = realloc(r->text, cap);
            if (!t) {
                r->oom = true;
                return 1;
            }
            r->text = t, r->cap = cap;
        }
        memcpy(r->text + r->n, piece, k);
        r->n += k;
        r->text[r->n] = 0;
        if (!r->print_ids) {
            const size_t upto = complete_utf8(r->text, r->n);
            fwrite(r->text + r->shown, 1, upto - r->shown, stdout);
            r->shown = upto;
        }
    }
    fflush(stdout);
    return r->ended;
}

/* The messages so far: system (optional), then user, assistant, ... */
typedef struct {
    lt_chat_msg *m;
    char **owned; /* [n] the contents this owns (NULL for --system's) */
    int64_t n, cap;
} history;

static bool history_add(history *h, const char *role, char *content, bool own) {
    if (h->n == h->cap) {
        int64_t cap = h->cap ? h->cap * 2 : 16;
        lt_chat_msg *m = realloc(h->m, (size_t)cap * sizeof *m);
        if (m) h->m = m;
        char **o = m ? realloc(h->owned, (size_t)cap * sizeof *o) : NULL;
        if (o) h->owned = o;
        if (!m || !o) return false;
        h->cap = cap;
    }
    h->m[h->n] = (lt_chat_msg){role, content};
    h->owned[h->n++] = own ? content : NULL;
    return true;
}

static void history_free(history *h) {
    for (int64_t i = 0; i < h->n; i++) free(h->owned[i]);
    free(h->m);
    free(h->owned);
}

/* The text of a control token for the template's bos_token / eos_token. */
static const char *special_text(const lt_vocab *v, int32_t id) {
    size_t len;
    return id >= 0 && id < lt_vocab_size(v) ? lt_vocab_piece(v, id, &len) : "";
}

static void print_escaped(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputs("\"\n", f);
}

int lt_cmd_chat(int argc, char **argv) {
    const char *cmd = "chat";
    const char *model_path = NULL, *tok_path = NULL, *tmpl_arg = NULL, *system_msg = NULL;
    int64_t n_new = -1, threads = 0, ctx = 0;
    bool print_ids = false, verbose = false, no_warm = false;
    lt_cli_sampler smp;
    lt_cli_sampler_init(&smp);
    enum { O_TMPL = 256, O_SYS, O_CTX, O_ISA, O_NOWARM, O_PIDS, O_VERBOSE };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},     {"tokenizer", required_argument, 0, 'z'},
        {"chat-template", required_argument, 0, O_TMPL},
        {"system", required_argument, 0, O_SYS},  {"n-tokens", required_argument, 0, 'n'},
        {"threads", required_argument, 0, 't'},   {"ctx", required_argument, 0, O_CTX},
        {"isa", required_argument, 0, O_ISA},     {"no-warm-start", no_argument, 0, O_NOWARM},
        {"print-ids", no_argument, 0, O_PIDS},    {"verbose-prompt", no_argument, 0, O_VERBOSE},
        LT_CLI_SAMPLER_OPTIONS,                   {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int exit_code = 1, rc;
    lt_model *m = NULL;
    lt_pool *pool = NULL;
    lt_llama *l = NULL;
    lt_sampler *s = NULL;
    history h = {0};
    reply r = {0};
    char *line = NULL, *text = NULL;
    int32_t *ids = NULL;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":m:z:n:t:h", opts, NULL)) != -1) {
        int k = lt_cli_sampler_option(cmd, c, optarg, &smp);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'z': tok_path = optarg; break;
        case O_TMPL: tmpl_arg = optarg; break;
        case O_SYS: system_msg = optarg; break;
        case 'n':
            if (!lt_cli_parse_i64(optarg, -1, INT32_MAX, &n_new) || n_new == 0)
                FAIL("bad -n '%s': expected a number of tokens >= 1, or -1", optarg);
            break;
        case 't':
            if (!lt_cli_parse_i64(optarg, 1, 64, &threads))
                FAIL("bad --threads '%s': expected 1..64", optarg);
            break;
        case O_CTX:
            if (!lt_cli_parse_i64(optarg, 1, INT32_MAX, &ctx))
                FAIL("bad --ctx '%s': expected a positive number", optarg);
            break;
        case O_ISA:
            if (lt_isa_select(optarg)) FAIL("--isa: %s", lt_errmsg());
            break;
        case O_NOWARM: no_warm = true; break;
        case O_PIDS: print_ids = true; break;
        case O_VERBOSE: verbose = true; break;
        case 'h':
            fputs(chat_help, stdout);
            lt_cli_sampler_help();
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc) FAIL("unexpected argument '%s' (see looptune chat --help)", argv[optind]);
    if (!model_path) FAIL("no model: give -m MODEL (see looptune chat --help)");

    if ((rc = lt_model_open(&m, model_path, tok_path))) {
        lt_cli_fail_status(cmd, rc, "cannot load model");
        goto done;
    }
    if (!m->vocab) FAIL("%s has no tokenizer: give -z TOKENIZER", model_path);
    /* the template: named or given, else the model's */
    lt_chat_template tmpl = {.bos = special_text(m->vocab, lt_vocab_bos(m->vocab)),
                             .eos = special_text(m->vocab, lt_vocab_eos(m->vocab))};
    size_t tlen = 0;
    const char *tsrc = tmpl_arg ? tmpl_arg : lt_model_chat_template(m, &tlen);
    if (tmpl_arg) tlen = strlen(tmpl_arg);
    /* a name (no Jinja in it) is looked up as one; a template is recognised */
    if (tmpl_arg && !strchr(tmpl_arg, '{')) {
        if (lt_chat_style_parse(tmpl_arg, &tmpl.style)) FAIL("--chat-template: %s", lt_errmsg());
    } else if (lt_chat_detect(tsrc, tlen, &tmpl.style))
        FAIL("%s: %s: give --chat-template NAME", tmpl_arg ? "--chat-template" : model_path,
             lt_errmsg());
    int64_t ctx_len = ctx ? ctx : m->cfg.seq_len;
    if (ctx > m->cfg.seq_len)
        FAIL("--ctx %lld exceeds the model's context length %lld", (long long)ctx,
             (long long)m->cfg.seq_len);
    lt_cli_load_stats ls = {0};
    if ((rc = lt_cli_load_weights(cmd, model_path, m, &ls))) goto done;
    if (!threads) threads = lt_cpu()->logical_cpus < 2 ? 1 : 2;
    if ((rc = lt_pool_init(&pool, (int)threads))) {
        lt_cli_fail_status(cmd, rc, "cannot start threads");
        goto done;
    }
    lt_llama_opts lo = {.ctx_len = ctx_len, .executor = LT_EXEC_LOOPED};
    if ((rc = lt_llama_init(&l, m, pool, &lo))) {
        lt_cli_fail_status(cmd, rc, "cannot build the program");
        goto done;
    }
    lt_cli_kafka no_kafka = {0}; /* the file store alone */
    if (lt_cli_warm_start(cmd, l, NULL, &no_kafka, no_warm)) goto done;
    if (lt_cli_sampler_make(cmd, &smp, m->cfg.vocab_size, ctx_len, &s)) goto done;
    if (system_msg && *system_msg && !history_add(&h, "system", (char *)system_msg, false))
        FAIL("out of memory");

    const bool tty = isatty(STDIN_FILENO);
    int64_t n_past = 0;        /* tokens in the KV cache */
    int32_t pending = -1;      /* the last reply's final token, drawn but not fed yet */
    size_t line_cap = 0;
    for (;;) {
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break; /* end of input */
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        if (!strcmp(line, "/exit")) break;
        if (got == 0) continue;
        char *msg = strdup(line);
        if (!msg || !history_add(&h, "user", msg, true)) {
            free(msg);
            FAIL("out of memory");
        }
        /* the turn's text: the whole conversation first, then what follows the last reply */
        size_t len;
        const bool first = n_past == 0;
        rc = first ? lt_chat_format(&tmpl, h.m, h.n, true, &text, &len)
                   : lt_chat_format_after(&tmpl, h.m, h.n, h.n - 2, &text, &len);
        if (rc) FAIL("%s", lt_errmsg());
        /* as llama.cpp: a template's own BOS gives way to the one the vocabulary adds */
        const char *t = text;
        const size_t blen = strlen(tmpl.bos);
        const bool add_bos = first && lt_vocab_add_bos(m->vocab);
        if (add_bos && blen && len >= blen && !memcmp(t, tmpl.bos, blen)) t += blen, len -= blen;
        const int64_t cap = 2 * (int64_t)len + 4;
        free(ids);
        if (!(ids = malloc((size_t)cap * sizeof *ids))) FAIL("out of memory");
        int64_t n_ids = 0;
        if (pending >= 0) ids[n_ids++] = pending;
        lt_tokenize_opts to = {.add_special = first, .parse_special = true};
        int64_t n_text;
        if ((rc = lt_tokenize_text(m->vocab, t, len, &to, ids + n_ids, cap - n_ids, &n_text))) {
            lt_cli_fail_status(cmd, rc, "cannot tokenize the turn");
            goto done;
        }
        n_ids += n_text;
        if (verbose) {
            fputs("prompt: ", stderr);
            print_escaped(stderr, t, len);
            fputs("prompt ids:", stderr);
            for (int64_t i = 0; i < n_ids; i++) fprintf(stderr, "%s%d", i ? "," : " ", ids[i]);
            fputc('\n', stderr);
        }
        free(text);
        text = NULL;
        const int64_t room = ctx_len - n_past;
        if (n_ids > room)
            FAIL("the conversation no longer fits the context (%lld tokens in it, %lld more for "
                 "this turn, %lld in all): start again, or give --ctx", (long long)n_past,
                 (long long)n_ids, (long long)ctx_len);
        /* the reply may take every position left (its last token needs none) */
        int64_t n_turn = room - n_ids + 1;
        if (n_new > 0 && n_new < n_turn) n_turn = n_new;
        r = (reply){.vocab = m->vocab, .print_ids = print_ids, .last = -1};
        lt_gen_opts go = {.n_new = n_turn, .n_past = n_past, .stop_token = -1};
        lt_gen_stats st;
        rc = lt_generate(l, s, ids, n_ids, &go, on_token, &r, &st);
        if (!rc && r.oom) rc = lt_error(LT_ENOMEM, "out of memory for the reply");
        if (!print_ids && r.text) fwrite(r.text + r.shown, 1, r.n - r.shown, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        if (rc) {
            free(r.text);
            lt_cli_fail_status(cmd, rc, "generation failed");
            goto done;
        }
        /* the cache holds the turn and the reply but its last token (lt_generate's contract):
         * an end of generation gives way to the template's end of turn, another goes in next */
        n_past += n_ids + st.n_generated - 1;
        pending = r.ended || st.n_generated == 0 ? -1 : r.last;
        if (!r.text) r.text = strdup("");
        if (!r.text || !history_add(&h, "assistant", r.text, true)) {
            free(r.text);
            FAIL("out of memory");
        }
    }
    exit_code = 0;
done:
    free(line);
    free(text);
    free(ids);
    history_free(&h);
    lt_sampler_free(s);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
    return exit_code;
}
