/* Shared command-line helpers: errors, strict parsing. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lt_cli_fail(const char *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "looptune %s: %s\n", cmd, msg);
    return 1;
}

int lt_cli_fail_status(const char *cmd, int status, const char *what) {
    const char *detail = lt_errmsg();
    if (!detail[0]) detail = lt_strerror(status);
    return lt_cli_fail(cmd, "%s: %s", what, detail);
}

bool lt_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool lt_cli_parse_f32(const char *s, float lo, float hi, float *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* A prompt file larger than this is not a prompt. */
#define LT_CLI_MAX_TEXT (64u << 20)

int lt_cli_read_text(const char *cmd, const char *path, char **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return lt_cli_fail(cmd, "cannot read %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1 || n >= LT_CLI_MAX_TEXT) break;
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown, cap *= 2;
    }
    const bool failed = ferror(f);
    fclose(f);
    if (!buf) return lt_cli_fail(cmd, "%s: out of memory", path);
    const char *why = failed ? "cannot read it" : n >= LT_CLI_MAX_TEXT ? "larger than 64 MiB"
                      : memchr(buf, 0, n) ? "it holds a NUL byte, not text" : NULL;
    if (why) {
        free(buf);
        return lt_cli_fail(cmd, "%s: %s", path, why);
    }
    if (n > 0 && buf[n - 1] == '\n') n--;
    buf[n] = 0;
    *out = buf;
    return 0;
}

bool lt_cli_parse_ids(const char *s, int32_t **ids, int64_t *n) {
    size_t len = strlen(s);
    int32_t *v = malloc((len / 2 + 1) * sizeof *v);
    if (!v) return false;
    int64_t k = 0;
    const char *p = s;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t l = comma ? (size_t)(comma - p) : strlen(p);
        char tok[32];
        int64_t id;
        if (l == 0 || l >= sizeof tok) goto bad;
        memcpy(tok, p, l);
        tok[l] = 0;
        if (!lt_cli_parse_i64(tok, 0, INT32_MAX, &id)) goto bad;
        v[k++] = (int32_t)id;
        if (!comma) break;
        p = comma + 1;
        if (!*p) goto bad;
    }
    if (k == 0) goto bad;
    *ids = v;
    *n = k;
    return true;
bad:
    free(v);
    return false;
}

int lt_cli_bad_option(const char *cmd, int opt, const char *arg0) {
    if (opt == ':')
        return lt_cli_fail(cmd, "option '%s' needs a value (see looptune %s --help)", arg0, cmd);
    return lt_cli_fail(cmd, "unknown option '%s' (see looptune %s --help)", arg0, cmd);
}

_Atomic bool lt_cli_stop;

static void on_stop_signal(int sig) {
    (void)sig;
    atomic_store(&lt_cli_stop, true);
}

void lt_cli_catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
