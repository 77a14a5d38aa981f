/* Small pieces of the telemetry interface: the null sink, run ids, and the
 * detail level's names. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "looptune/telemetry.h"

typedef struct {
    lt_tel_sink_stats st;
} null_sink;

static int null_emit(void *ctx, const lt_tel_record *r) {
    (void)r;
    ((null_sink *)ctx)->st.emitted++;
    return LT_OK;
}

static void null_stats(void *ctx, lt_tel_sink_stats *out) { *out = ((null_sink *)ctx)->st; }

static void null_close(void *ctx) { free(ctx); }

int lt_tel_sink_null(lt_tel_sink *out) {
    null_sink *s = calloc(1, sizeof *s);
    if (!s) return lt_error(LT_ENOMEM, "telemetry: out of memory");
    *out = (lt_tel_sink){.emit = null_emit, .stats = null_stats, .close = null_close, .ctx = s};
    return LT_OK;
}

int lt_tel_run_id(char buf[33]) {
    unsigned char r[16];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = getrandom(r + got, sizeof r - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    if (got < sizeof r) {
        /* no getrandom: the clock and the pid still make a collision unlikely */
        uint64_t a = lt_now_ns() ^ ((uint64_t)getpid() << 32), b = a * 0x9e3779b97f4a7c15ull;
        memcpy(r, &a, 8);
        memcpy(r + 8, &b, 8);
    }
    for (int i = 0; i < 16; i++) snprintf(buf + 2 * i, 3, "%02x", r[i]);
    return LT_OK;
}

int lt_tel_detail_parse(const char *s, lt_tel_detail *out) {
    if (!strcmp(s, "window")) *out = LT_TEL_DETAIL_WINDOW;
    else if (!strcmp(s, "per-call")) *out = LT_TEL_DETAIL_PER_CALL;
    else return lt_error(LT_EINVAL, "telemetry detail '%s': expected window or per-call", s);
    return LT_OK;
}
