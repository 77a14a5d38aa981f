/* The HTTP gateway's options, shared by `looptune gateway` and `looptune
 * serve --http`: one parser, one help text, one start-up line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char lt_cli_http_help[] =
    "      --api-key KEY       clients must send 'Authorization: Bearer KEY'\n"
    "      --api-key-file F    the key is F's first line (keeps it out of `ps`)\n"
    "      --max-inflight N    requests queued or generating before 429 (default 256)\n"
    "      --max-connections N HTTP connections at once (default 512)\n"
    "      --max-tokens N      tokens of a request that names none (default 256)\n"
    "      --timeout S         a request's deadline in seconds (default 300)\n";

void lt_cli_http_init(lt_cli_http *h, const char *default_addr) {
    memset(h, 0, sizeof *h);
    h->go.http_addr = default_addr;
}

void lt_cli_http_free(lt_cli_http *h) {
    free(h->key_buf);
    h->key_buf = NULL;
}

/* The key in file path: its first line, without the newline. */
static int read_key(const char *cmd, const char *path, char **out) {
    char *text = NULL;
    if (lt_cli_read_text(cmd, path, &text)) return 1;
    text[strcspn(text, "\r\n")] = 0;
    if (!text[0]) {
        free(text);
        return lt_cli_fail(cmd, "--api-key-file %s: the first line is empty", path);
    }
    *out = text;
    return 0;
}

int lt_cli_http_option(const char *cmd, int c, const char *arg, lt_cli_http *h) {
    int64_t v;
    float f;
    switch (c) {
    case LT_CLI_O_HTTP:
        if (!strchr(arg, ':')) {
            lt_cli_fail(cmd, "bad --http '%s': expected HOST:PORT (for example 127.0.0.1:8080)", arg);
            return LT_CLI_OPT_ERROR;
        }
        h->go.http_addr = arg;
        h->given = true;
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_API_KEY:
        if (!*arg) {
            lt_cli_fail(cmd, "bad --api-key '': expected a key");
            return LT_CLI_OPT_ERROR;
        }
        h->go.api_key = arg;
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_API_KEY_FILE:
        free(h->key_buf);
        h->key_buf = NULL;
        if (read_key(cmd, arg, &h->key_buf)) return LT_CLI_OPT_ERROR;
        h->go.api_key = h->key_buf;
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_MAX_INFLIGHT:
        if (!lt_cli_parse_i64(arg, 1, 1000000, &v)) {
            lt_cli_fail(cmd, "bad --max-inflight '%s': expected 1..1000000", arg);
            return LT_CLI_OPT_ERROR;
        }
        h->go.max_inflight = v;
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_MAX_CONNS:
        if (!lt_cli_parse_i64(arg, 1, 100000, &v)) {
            lt_cli_fail(cmd, "bad --max-connections '%s': expected 1..100000", arg);
            return LT_CLI_OPT_ERROR;
        }
        h->go.max_connections = (int)v;
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_MAX_TOKENS:
        if (!lt_cli_parse_i64(arg, 1, 1 << 20, &v)) {
            lt_cli_fail(cmd, "bad --max-tokens '%s': expected 1..1048576", arg);
            return LT_CLI_OPT_ERROR;
        }
        h->go.default_max_tokens = v;
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_TIMEOUT:
        if (!lt_cli_parse_f32(arg, 0.1f, 86400.0f, &f)) {
            lt_cli_fail(cmd, "bad --timeout '%s': expected seconds 0.1..86400", arg);
            return LT_CLI_OPT_ERROR;
        }
        h->go.timeout_s = f;
        return LT_CLI_OPT_HANDLED;
    default: return LT_CLI_OPT_NOT_MINE;
    }
}

int lt_cli_http_start(const char *cmd, lt_cli_http *h, const lt_kafka_conn *conn,
                      const char *prefix, lt_gateway **out) {
    h->go.conn = *conn;
    h->go.topic_prefix = prefix;
    int rc = lt_gateway_open(out, &h->go);
    if (rc) return lt_cli_fail_status(cmd, rc, "cannot start the HTTP gateway");
    const char *colon = strrchr(h->go.http_addr, ':');
    fprintf(stderr, "%s: listening on http://%.*s:%d (OpenAI's API under /v1; /health, /metrics)\n",
            cmd, (int)(colon - h->go.http_addr), h->go.http_addr, lt_gateway_port(*out));
    return 0;
}
