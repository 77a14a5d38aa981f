/* looptune tokenize: the token ids of a text under a model's vocabulary,
 * printed as llama.cpp's llama-tokenize prints them (its flags and
 * defaults: special tokens parsed, the model's BOS/EOS added, escapes
 * processed). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "looptune/model.h"

static const char *const tokenize_help =
    "usage: looptune tokenize -m MODEL (-p TEXT | -f FILE | --stdin) [options]\n"
    "\n"
    "Prints the token ids of a text under the model's vocabulary as llama.cpp's\n"
    "llama-tokenize --ids does: [id, id, ...] on one line.\n"
    "\n"
    "  -m, --model FILE      GGUF with a vocabulary (tokenizer.ggml.*; a vocabulary-only\n"
    "                        file will do): llama (SentencePiece) or gpt2 (byte-level BPE)\n"
    "  -p, --prompt TEXT     the text\n"
    "  -f, --file FILE       the text is this file's bytes; repeat -f to tokenize several\n"
    "                        files, one output (line, or --pieces block) per file\n"
    "      --stdin           the text is standard input\n"
    "      --no-bos          add neither BOS nor EOS, even where the model adds them\n"
    "      --no-parse-special  special tokens written in the text (<|im_start|>, ...) stay text\n"
    "      --no-escape       take \\n, \\t, \\\\, \\xHH ... literally (default: processed)\n"
    "      --pieces          one line per token: id -> 'piece'\n"
    "      --show-count      then print the number of tokens\n"
    "  -h, --help            this help\n";

/* Reads all of f (path for messages): malloc'd, NUL-terminated, *n bytes. */
static int read_all(const char *cmd, FILE *f, const char *path, char **out, size_t *n) {
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap + 1);
    for (;;) {
        if (!b) return lt_cli_fail(cmd, "out of memory reading %s", path);
        len += fread(b + len, 1, cap - len, f);
        if (len < cap) break;
        cap *= 2;
        char *nb = realloc(b, cap + 1);
        if (!nb) free(b);
        b = nb;
    }
    if (ferror(f)) {
        free(b);
        return lt_cli_fail(cmd, "cannot read %s: %s", path, strerror(errno));
    }
    b[len] = '\0';
    *out = b;
    *n = len;
    return 0;
}

static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* llama.cpp's escapes in place: \n \r \t \' \" \\ and \xHH; any other
 * backslash stays. Returns the new length. */
static size_t unescape(char *s, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            s[o++] = s[i];
            continue;
        }
        char c = s[++i];
        switch (c) {
        case 'n': s[o++] = '\n'; break;
        case 'r': s[o++] = '\r'; break;
        case 't': s[o++] = '\t'; break;
        case '\'': case '"': case '\\': s[o++] = c; break;
        case 'x':
            if (i + 2 < n && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
                s[o++] = (char)(hex(s[i + 1]) * 16 + hex(s[i + 2]));
                i += 2;
                break;
            }
            /* fall through */
        default:
            s[o++] = '\\';
            s[o++] = c;
        }
    }
    return o;
}

typedef struct {
    bool pieces, show_count, escape;
    lt_tokenize_opts to;
} print_opts;

/* Tokenizes text[0, len) (modified in place by the escapes) and prints the
 * ids or pieces. Returns 0 or 1 after a one-line error. */
static int tokenize_one(const char *cmd, const lt_vocab *v, char *text, size_t len,
                        const print_opts *po) {
    if (po->escape) len = unescape(text, len);
    int64_t cap = 2 * (int64_t)len + 3, n = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    int st = ids ? lt_tokenize_text(v, text, len, &po->to, ids, cap, &n) : LT_ENOMEM;
    if (st) {
        free(ids);
        return lt_cli_fail_status(cmd, st, "cannot tokenize the text");
    }
    if (po->pieces) {
        char buf[1024];
        for (int64_t i = 0; i < n; i++) {
            size_t m = lt_detokenize(v, -1, ids[i], buf, sizeof buf);
            printf("%6d -> '", ids[i]);
            fwrite(buf, 1, m < sizeof buf ? m : sizeof buf - 1, stdout);
            printf("'\n");
        }
    } else {
        printf("[");
        for (int64_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        printf("]\n");
    }
    if (po->show_count) printf("Total number of tokens: %lld\n", (long long)n);
    free(ids);
    return 0;
}

#define MAX_FILES 4096

int lt_cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize";
    const char *model = NULL, *prompt = NULL;
    const char **files = calloc(MAX_FILES, sizeof *files);
    int n_files = 0;
    bool use_stdin = false, no_bos = false;
    print_opts po = {.escape = true, .to = {.parse_special = true}};
    enum { O_STDIN = 256, O_NO_BOS, O_NO_PARSE, O_NO_ESCAPE, O_PIECES, O_COUNT, O_IDS };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"prompt", required_argument, 0, 'p'},
        {"file", required_argument, 0, 'f'},    {"stdin", no_argument, 0, O_STDIN},
        {"no-bos", no_argument, 0, O_NO_BOS},   {"no-parse-special", no_argument, 0, O_NO_PARSE},
        {"no-escape", no_argument, 0, O_NO_ESCAPE}, {"pieces", no_argument, 0, O_PIECES},
        {"show-count", no_argument, 0, O_COUNT}, {"ids", no_argument, 0, O_IDS},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    if (!files) return lt_cli_fail(cmd, "out of memory");
    int rc = 1, st;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":m:p:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'p': prompt = optarg; break;
        case 'f':
            if (n_files == MAX_FILES) {
                lt_cli_fail(cmd, "more than %d -f files", MAX_FILES);
                goto out;
            }
            files[n_files++] = optarg;
            break;
        case O_STDIN: use_stdin = true; break;
        case O_NO_BOS: no_bos = true; break;
        case O_NO_PARSE: po.to.parse_special = false; break;
        case O_NO_ESCAPE: po.escape = false; break;
        case O_PIECES: po.pieces = true; break;
        case O_COUNT: po.show_count = true; break;
        case O_IDS: po.pieces = false; break; /* llama-tokenize's spelling of the default */
        case 'h':
            fputs(tokenize_help, stdout);
            rc = 0;
            goto out;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto out;
        }
    }
    if (optind < argc) {
        lt_cli_fail(cmd, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (!model) {
        lt_cli_fail(cmd, "no model: give -m MODEL");
        goto out;
    }
    if ((prompt != NULL) + (n_files > 0) + use_stdin != 1) {
        lt_cli_fail(cmd, "give exactly one of -p TEXT, -f FILE and --stdin");
        goto out;
    }
    /* files that cannot be read fail before the model loads */
    for (int i = 0; i < n_files; i++) {
        FILE *f = fopen(files[i], "rb");
        if (!f) {
            lt_cli_fail(cmd, "cannot open %s: %s", files[i], strerror(errno));
            goto out;
        }
        fclose(f);
    }

    lt_gguf *g = NULL;
    lt_vocab *v = NULL;
    char *text = NULL;
    size_t len = 0;
    lt_gguf_type type;
    int64_t n_tokens;
    const void *data;
    if ((st = lt_gguf_open(&g, model))) {
        lt_cli_fail_status(cmd, st, "cannot open the model");
        goto done;
    }
    if (lt_gguf_get_arr(g, "tokenizer.ggml.tokens", &type, &n_tokens, &data) == LT_ENOTFOUND) {
        lt_cli_fail(cmd, "%s has no vocabulary (no tokenizer.ggml.tokens)", model);
        goto done;
    }
    if ((st = lt_vocab_load_gguf(&v, g))) {
        lt_cli_fail_status(cmd, st, "cannot load the vocabulary");
        goto done;
    }
    /* as llama-tokenize: --no-bos drops what add_special adds, EOS included */
    po.to.add_special = lt_vocab_add_bos(v) && !no_bos;
    if (prompt) {
        len = strlen(prompt);
        if (!(text = malloc(len + 1))) {
            lt_cli_fail(cmd, "out of memory");
            goto done;
        }
        memcpy(text, prompt, len + 1);
        if (tokenize_one(cmd, v, text, len, &po)) goto done;
    } else if (use_stdin) {
        if (read_all(cmd, stdin, "standard input", &text, &len) ||
            tokenize_one(cmd, v, text, len, &po))
            goto done;
    }
    for (int i = 0; i < n_files; i++) {
        FILE *f = fopen(files[i], "rb");
        if (!f) {
            lt_cli_fail(cmd, "cannot open %s: %s", files[i], strerror(errno));
            goto done;
        }
        free(text);
        text = NULL;
        int bad = read_all(cmd, f, files[i], &text, &len);
        fclose(f);
        if (bad || tokenize_one(cmd, v, text, len, &po)) goto done;
    }
    rc = 0;
done:
    free(text);
    lt_vocab_free(v);
    lt_gguf_close(g);
out:
    free(files);
    return rc;
}
