/* Loading a model for a command: the file opened, then its weights copied
 * into memory, and the times for the command's summary. A large model (a
 * file of LARGE_BYTES or more, seconds to load) shows the bytes copied of
 * the total on a terminal (a line that rewrites itself) and one line per
 * stage otherwise; a small one loads in silence, so a command's error stays
 * its one line. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define LARGE_BYTES (256ull << 20)

#include "cli.h"

typedef struct {
    const char *cmd;
    bool tty;
    int shown; /* the last percentage drawn, -1 none */
    size_t total;
} progress_state;

static void on_progress(void *user, size_t done, size_t total) {
    progress_state *ps = user;
    ps->total = total;
    if (!ps->tty || total == 0) return;
    const int pct = (int)(100.0 * (double)done / (double)total);
    if (pct == ps->shown) return;
    ps->shown = pct;
    fprintf(stderr, "\rlooptune %s: loading weights %.1f of %.1f MB (%d%%)", ps->cmd,
            (double)done / 1e6, (double)total / 1e6, pct);
    if (done >= total) fputc('\n', stderr);
    fflush(stderr);
}

static bool is_large(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && (uint64_t)sb.st_size >= LARGE_BYTES;
}

int lt_cli_load_weights(const char *cmd, const char *path, lt_model *m, lt_cli_load_stats *st) {
    const bool large = is_large(path), tty = isatty(STDERR_FILENO) == 1;
    progress_state ps = {cmd, large && tty, -1, 0};
    const double t0 = lt_now_s();
    int rc = lt_model_make_resident_progress(m, on_progress, &ps);
    if (rc) {
        lt_cli_fail_status(cmd, rc, "cannot load the weights into memory");
        return rc;
    }
    st->weights_s = lt_now_s() - t0;
    st->bytes = ps.total;
    if (large && !tty)
        fprintf(stderr, "looptune %s: %.1f MB of weights in memory in %.0f ms\n", cmd,
                (double)st->bytes / 1e6, 1e3 * st->weights_s);
    return LT_OK;
}

int lt_cli_load_model(const char *cmd, const char *path, const char *tokenizer, bool use_mmap,
                      lt_model **out, lt_cli_load_stats *st) {
    *out = NULL;
    *st = (lt_cli_load_stats){0};
    lt_model *m;
    const double t0 = lt_now_s();
    int rc = lt_model_open(&m, path, tokenizer);
    if (rc) {
        lt_cli_fail_status(cmd, rc, "cannot load model");
        return rc;
    }
    st->open_s = lt_now_s() - t0;
    if (is_large(path) && isatty(STDERR_FILENO) != 1)
        fprintf(stderr, "looptune %s: opened %s in %.0f ms (%s, %s)\n", cmd, path,
                1e3 * st->open_s, m->format, lt_dtype_name(m->wtype));
    if (!use_mmap && (rc = lt_cli_load_weights(cmd, path, m, st))) {
        lt_model_close(m);
        return rc;
    }
    *out = m;
    return LT_OK;
}
