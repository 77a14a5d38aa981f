/* The file telemetry sink: every record as a length-delimited
 * looptune.Envelope (a varint length, then the bytes), the framing protobuf
 * tools call "delimited", so a file is a stream any protobuf reader can walk.
 * Also the reader for such files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/telemetry_sinks.h"

typedef struct {
    FILE *f;
    char *path;
    lt_tel_pb pb;
    uint8_t *buf;
    size_t cap;
    lt_tel_sink_stats st;
    bool warned;
} file_sink;

static int fail(file_sink *s, int err) {
    s->st.failed++;
    if (!s->warned) {
        s->warned = true;
        lt_log(LT_LOG_WARN, "telemetry file %s: cannot write: %s (further failures are only counted)",
               s->path, strerror(err));
    }
    return LT_OK; /* counted here, not an error for the caller to count again */
}

static int file_emit(void *ctx, const lt_tel_record *r) {
    file_sink *s = ctx;
    Looptune__Envelope *env;
    int rc = lt_tel_record_to_envelope(r, &s->pb, &env);
    if (rc) return rc;
    size_t need = lt_envelope_packed_size(env) + 10, len;
    if (need > s->cap) {
        uint8_t *b = realloc(s->buf, need);
        if (!b) return lt_error(LT_ENOMEM, "telemetry file: out of memory");
        s->buf = b;
        s->cap = need;
    }
    if ((rc = lt_envelope_pack(env, s->buf + 10, s->cap - 10, &len))) return rc;
    uint8_t head[10];
    size_t h = 0;
    for (uint64_t v = len; ; v >>= 7) {
        head[h++] = (uint8_t)(v & 0x7f) | (v >= 0x80 ? 0x80 : 0);
        if (v < 0x80) break;
    }
    if (fwrite(head, 1, h, s->f) != h || fwrite(s->buf + 10, 1, len, s->f) != len)
        return fail(s, errno ? errno : EIO);
    s->st.emitted++;
    return LT_OK;
}

static int file_flush(void *ctx, int timeout_ms) {
    (void)timeout_ms;
    file_sink *s = ctx;
    if (fflush(s->f)) fail(s, errno);
    return LT_OK;
}

static void file_stats(void *ctx, lt_tel_sink_stats *out) { *out = ((file_sink *)ctx)->st; }

static void file_close(void *ctx) {
    file_sink *s = ctx;
    if (fclose(s->f)) fail(s, errno);
    lt_tel_pb_free(&s->pb);
    free(s->buf);
    free(s->path);
    free(s);
}

int lt_tel_sink_file_open(lt_tel_sink *out, const char *path) {
    file_sink *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return lt_error(LT_ENOMEM, "telemetry file: out of memory");
    }
    if (!(s->f = fopen(path, "wb"))) {
        int e = errno;
        free(s->path);
        free(s);
        return lt_error(LT_EIO, "telemetry file %s: %s", path, strerror(e));
    }
    *out = (lt_tel_sink){.emit = file_emit, .flush = file_flush, .stats = file_stats,
                         .close = file_close, .ctx = s};
    return LT_OK;
}

int lt_tel_file_next(FILE *f, Looptune__Envelope **env) {
    *env = NULL;
    long at = ftell(f);
    uint64_t len = 0;
    int c, shift = 0;
    for (;;) {
        c = fgetc(f);
        if (c == EOF) {
            if (shift == 0) return 0;
            return lt_error(LT_EFORMAT, "telemetry file: truncated length at byte %ld", at);
        }
        if (shift > 56) return lt_error(LT_EFORMAT, "telemetry file: over-long length at byte %ld", at);
        len |= (uint64_t)(c & 0x7f) << shift;
        shift += 7;
        if (!(c & 0x80)) break;
    }
    if (len > (64u << 20))
        return lt_error(LT_EFORMAT, "telemetry file: record of %llu bytes at byte %ld",
                        (unsigned long long)len, at);
    uint8_t *buf = malloc(len ? (size_t)len : 1);
    if (!buf) return lt_error(LT_ENOMEM, "telemetry file: out of memory");
    if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        return lt_error(LT_EFORMAT, "telemetry file: record at byte %ld: %llu bytes announced, "
                        "the file ends first", at, (unsigned long long)len);
    }
    int rc = lt_envelope_decode(buf, (size_t)len, env);
    free(buf);
    if (rc) return lt_error(rc, "telemetry file: record at byte %ld: %s", at, lt_errmsg());
    return 1;
}
