/* Any protobuf-c message as canonical proto3 JSON on one line, driven by the
 * message descriptors (so new message kinds need no code here): field names
 * as in the .proto, 64-bit integers as strings, enums by name, bytes in
 * base64, non-finite doubles as "NaN"/"Infinity", fields at their default
 * value left out. The output parses with any JSON reader and matches what
 * protobuf's own JSON printers write. Its string escaping is also offered on
 * its own, for the CLI's other JSON output. */
#include "looptune/kafka.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_reserve(sbuf *b, size_t more) {
    if (b->oom || b->len + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = true;
        return;
    }
    b->s = s;
    b->cap = cap;
}

static void sb_put(sbuf *b, const char *s, size_t n) {
    sb_reserve(b, n);
    if (b->oom) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    LT_ASSERT(n >= 0 && (size_t)n < sizeof tmp); /* only used for numbers */
    sb_put(b, tmp, (size_t)n);
}

/* A JSON string: escapes quotes, backslashes and control characters; bytes
 * that are not UTF-8 become U+FFFD so the line stays valid JSON. */
static void put_string(sbuf *b, const uint8_t *s, size_t n) {
    sb_put(b, "\"", 1);
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = lt__utf8_next(s + i, n - i, &cp);
        if (!l) {
            sb_puts(b, "\\ufffd");
            i++;
            continue;
        }
        if (cp == '"') sb_puts(b, "\\\"");
        else if (cp == '\\') sb_puts(b, "\\\\");
        else if (cp == '\n') sb_puts(b, "\\n");
        else if (cp == '\r') sb_puts(b, "\\r");
        else if (cp == '\t') sb_puts(b, "\\t");
        else if (cp < 0x20) sb_printf(b, "\\u%04x", (unsigned)cp);
        else sb_put(b, (const char *)s + i, l);
        i += l;
    }
    sb_put(b, "\"", 1);
}

static void put_base64(sbuf *b, const uint8_t *s, size_t n) {
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n) v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n) v |= s[i + 2];
        char q[4] = {tbl[v >> 18], tbl[(v >> 12) & 63], i + 1 < n ? tbl[(v >> 6) & 63] : '=',
                     i + 2 < n ? tbl[v & 63] : '='};
        sb_put(b, q, 4);
    }
    sb_put(b, "\"", 1);
}

/* The shortest "%.Ng" that reads back as exactly v. */
static void put_double(sbuf *b, double v) {
    if (isnan(v)) {
        sb_puts(b, "\"NaN\"");
        return;
    }
    if (isinf(v)) {
        sb_puts(b, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        return;
    }
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    sb_puts(b, tmp);
}

static size_t elem_size(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return 8;
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_FLOAT: return sizeof(float);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM: return sizeof(int);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    default: return 4; /* 32-bit integers */
    }
}

static void put_message(sbuf *b, const ProtobufCMessage *m, int depth);

/* One value of field f stored at p. */
static void put_value(sbuf *b, const ProtobufCFieldDescriptor *f, const void *p, int depth) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: sb_printf(b, "%d", (int)*(const int32_t *)p); break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: sb_printf(b, "%u", (unsigned)*(const uint32_t *)p); break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        sb_printf(b, "\"%lld\"", (long long)*(const int64_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        sb_printf(b, "\"%llu\"", (unsigned long long)*(const uint64_t *)p);
        break;
    case PROTOBUF_C_TYPE_FLOAT: put_double(b, *(const float *)p); break;
    case PROTOBUF_C_TYPE_DOUBLE: put_double(b, *(const double *)p); break;
    case PROTOBUF_C_TYPE_BOOL: sb_puts(b, *(const protobuf_c_boolean *)p ? "true" : "false"); break;
    case PROTOBUF_C_TYPE_ENUM: {
        int v = *(const int *)p;
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, v);
        if (ev) put_string(b, (const uint8_t *)ev->name, strlen(ev->name));
        else sb_printf(b, "%d", v);
        break;
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)p;
        if (s) put_string(b, (const uint8_t *)s, strlen(s));
        else sb_puts(b, "\"\"");
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *d = p;
        put_base64(b, d->data, d->len);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
        if (sub) put_message(b, sub, depth + 1);
        else sb_puts(b, "{}");
        break;
    }
    }
}

/* Whether a proto3 singular field without presence differs from its default. */
static bool non_default(const ProtobufCFieldDescriptor *f, const void *p) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)p;
        return s && *s;
    }
    case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)p)->len > 0;
    case PROTOBUF_C_TYPE_MESSAGE: return *(const void *const *)p != NULL;
    default: {
        /* numbers, bools, enums: any set bit (so -0.0 counts, as protobuf says) */
        static const uint8_t zero[8];
        return memcmp(p, zero, elem_size(f->type)) != 0;
    }
    }
}

static void put_message(sbuf *b, const ProtobufCMessage *m, int depth) {
    LT_ASSERT(depth < 64);
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    bool first = true;
    sb_put(b, "{", 1);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const void *p = base + f->offset;
        size_t count = 1;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            count = *(const size_t *)(base + f->quantifier_offset);
            if (!count) continue;
        } else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *)(base + f->quantifier_offset) != f->id) continue;
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
            bool has = f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING
                           ? *(const void *const *)p != NULL
                           : *(const protobuf_c_boolean *)(base + f->quantifier_offset);
            if (!has) continue;
        } else if (f->label == PROTOBUF_C_LABEL_NONE) {
            if (!non_default(f, p)) continue;
        }
        if (!first) sb_put(b, ",", 1);
        first = false;
        put_string(b, (const uint8_t *)f->name, strlen(f->name));
        sb_put(b, ":", 1);
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            const char *arr = *(const char *const *)p;
            size_t sz = elem_size(f->type);
            sb_put(b, "[", 1);
            for (size_t k = 0; k < count; k++) {
                if (k) sb_put(b, ",", 1);
                put_value(b, f, arr + k * sz, depth);
            }
            sb_put(b, "]", 1);
        } else {
            put_value(b, f, p, depth);
        }
    }
    sb_put(b, "}", 1);
}

int lt_message_to_json(const ProtobufCMessage *msg, char **json) {
    sbuf b = {0};
    put_message(&b, msg, 0);
    if (b.oom) {
        free(b.s);
        *json = NULL;
        return lt_error(LT_ENOMEM, "json: out of memory");
    }
    *json = b.s;
    return LT_OK;
}

int lt_envelope_to_json(const Looptune__Envelope *env, char **json) {
    return lt_message_to_json(&env->base, json);
}

int lt_json_quote(const char *s, size_t n, char **json) {
    sbuf b = {0};
    put_string(&b, (const uint8_t *)s, n);
    if (b.oom) {
        free(b.s);
        *json = NULL;
        return lt_error(LT_ENOMEM, "json: out of memory");
    }
    *json = b.s;
    return LT_OK;
}
