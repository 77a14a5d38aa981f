/* The wire codec: looptune.Envelope to and from bytes. Decoding first walks
 * the protobuf wire format against the schema's descriptors, so malformed
 * input is reported precisely (which field, which byte, what is wrong)
 * instead of protobuf-c's bare failure, then unpacks with protobuf-c and
 * checks the envelope's own rules (a known version, one payload). */
#include "looptune/kafka.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "utf8.h"

#define MAX_DEPTH 32

void lt_envelope_init(Looptune__Envelope *env) {
    looptune__envelope__init(env);
    env->version = LT_PROTO_VERSION;
    env->time_ns = lt_wall_ns();
}

/* The oneof member field of the envelope's current payload, or NULL. */
static const ProtobufCFieldDescriptor *payload_field(const Looptune__Envelope *env) {
    if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD__NOT_SET) return NULL;
    return protobuf_c_message_descriptor_get_field(&looptune__envelope__descriptor,
                                                   (unsigned)env->payload_case);
}

const char *lt_envelope_kind(const Looptune__Envelope *env) {
    const ProtobufCFieldDescriptor *f = payload_field(env);
    return f ? f->name : "none";
}

/* ---- encoding ------------------------------------------------------------------- */

static int check_for_pack(const Looptune__Envelope *env) {
    if (env->base.descriptor != &looptune__envelope__descriptor)
        return lt_error(LT_EINVAL, "envelope: not initialised: start with lt_envelope_init");
    if (env->version == 0)
        return lt_error(LT_EINVAL, "envelope: no schema version: start with lt_envelope_init");
    const ProtobufCFieldDescriptor *f = payload_field(env);
    if (!f)
        return lt_error(LT_EINVAL, "envelope: no payload (payload_case %d)",
                        (int)env->payload_case);
    if (!*(void *const *)((const char *)env + f->offset))
        return lt_error(LT_EINVAL, "envelope: payload_case says %s but its pointer is NULL",
                        f->name);
    if (!protobuf_c_message_check(&env->base))
        return lt_error(LT_EINVAL, "envelope: %s: a NULL where the schema needs a value",
                        f->name);
    return LT_OK;
}

size_t lt_envelope_packed_size(const Looptune__Envelope *env) {
    return looptune__envelope__get_packed_size(env);
}

int lt_envelope_pack(const Looptune__Envelope *env, uint8_t *buf, size_t cap, size_t *len) {
    int rc = check_for_pack(env);
    if (rc) return rc;
    size_t need = looptune__envelope__get_packed_size(env);
    if (need > cap)
        return lt_error(LT_ERANGE, "envelope: needs %zu bytes, buffer has %zu", need, cap);
    *len = looptune__envelope__pack(env, buf);
    LT_ASSERT(*len == need);
    return LT_OK;
}

int lt_envelope_pack_sized(const Looptune__Envelope *env, uint8_t *buf, size_t need,
                           size_t *len) {
    int rc = check_for_pack(env);
    if (rc) return rc;
    *len = looptune__envelope__pack(env, buf);
    LT_ASSERT(*len == need);
    return LT_OK;
}

int lt_envelope_encode(const Looptune__Envelope *env, uint8_t **buf, size_t *len) {
    *buf = NULL;
    int rc = check_for_pack(env);
    if (rc) return rc;
    size_t need = looptune__envelope__get_packed_size(env);
    uint8_t *b = malloc(need ? need : 1);
    if (!b) return lt_error(LT_ENOMEM, "envelope: out of memory for %zu bytes", need);
    if ((rc = lt_envelope_pack(env, b, need, len))) {
        free(b);
        return rc;
    }
    *buf = b;
    return LT_OK;
}

/* ---- wire-format walk -------------------------------------------------------------- */

typedef struct {
    const uint8_t *data; /* the whole record, for absolute byte offsets */
    char path[256];      /* "kernel_window.params" of the message being walked */
} walker;

/* Reads a varint at p[*i] (i < end). Returns false if truncated or longer than 10 bytes. */
static bool read_varint(const uint8_t *p, size_t end, size_t *i, uint64_t *out, bool *too_long) {
    uint64_t v = 0;
    *too_long = false;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*i >= end) return false;
        uint8_t b = p[(*i)++];
        v |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    *too_long = true;
    return false;
}

static const char *wire_name(unsigned wt) {
    static const char *const names[8] = {"varint", "64-bit", "length-delimited", "group start",
                                         "group end", "32-bit", "invalid (6)", "invalid (7)"};
    return names[wt & 7];
}

/* The wire type a singular field of this type uses. */
static unsigned wire_type_of(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 1;
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return 5;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return 2;
    default: return 0;
    }
}

static int bad(const walker *w, size_t at, const char *what) {
    return lt_error(LT_EFORMAT, "%s: %s at byte %zu", w->path[0] ? w->path : "envelope", what, at);
}

/* Checks a packed repeated numeric field's body [i, end). */
static int walk_packed(walker *w, const ProtobufCFieldDescriptor *f, size_t i, size_t end) {
    unsigned wt = wire_type_of(f->type);
    char what[160];
    if (wt != 0) {
        size_t each = wt == 1 ? 8 : 4;
        if ((end - i) % each) {
            snprintf(what, sizeof what, "packed field '%s': %zu bytes is not a multiple of %zu",
                     f->name, end - i, each);
            return bad(w, i, what);
        }
        return LT_OK;
    }
    while (i < end) {
        size_t at = i;
        uint64_t v;
        bool too_long;
        if (!read_varint(w->data, end, &i, &v, &too_long)) {
            snprintf(what, sizeof what, "packed field '%s': %s varint", f->name,
                     too_long ? "over-long" : "truncated");
            return bad(w, at, what);
        }
    }
    return LT_OK;
}

/* Walks the message of descriptor d in data[begin, end). */
static int walk(walker *w, const ProtobufCMessageDescriptor *d, size_t begin, size_t end,
                int depth) {
    char what[200];
    if (depth > MAX_DEPTH) return bad(w, begin, "messages nested too deeply");
    size_t i = begin;
    while (i < end) {
        size_t at = i;
        uint64_t tag, v;
        bool too_long;
        if (!read_varint(w->data, end, &i, &tag, &too_long))
            return bad(w, at, too_long ? "over-long field tag" : "truncated field tag");
        uint64_t num = tag >> 3;
        unsigned wt = (unsigned)(tag & 7);
        if (num == 0 || num > 536870911u) {
            snprintf(what, sizeof what, "field number %llu out of range", (unsigned long long)num);
            return bad(w, at, what);
        }
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(d, (unsigned)num);
        if (f) {
            unsigned want = wire_type_of(f->type);
            bool packed_ok = f->label == PROTOBUF_C_LABEL_REPEATED && want != 2 && wt == 2;
            if (wt != want && !packed_ok) {
                snprintf(what, sizeof what,
                         "field '%s' (%llu) has wire type %s, the schema says %s", f->name,
                         (unsigned long long)num, wire_name(wt), wire_name(want));
                return bad(w, at, what);
            }
        }
        size_t body = i;
        switch (wt) {
        case 0:
            if (!read_varint(w->data, end, &i, &v, &too_long)) {
                snprintf(what, sizeof what, "field %llu: %s varint", (unsigned long long)num,
                         too_long ? "over-long" : "truncated");
                return bad(w, body, what);
            }
            break;
        case 1:
        case 5: {
            size_t n = wt == 1 ? 8 : 4;
            if (end - i < n) {
                snprintf(what, sizeof what, "field %llu: %zu-byte value truncated",
                         (unsigned long long)num, n);
                return bad(w, body, what);
            }
            i += n;
            break;
        }
        case 2: {
            uint64_t len;
            if (!read_varint(w->data, end, &i, &len, &too_long)) {
                snprintf(what, sizeof what, "field %llu: %s length", (unsigned long long)num,
                         too_long ? "over-long" : "truncated");
                return bad(w, body, what);
            }
            if (len > end - i) {
                snprintf(what, sizeof what, "field %llu: length %llu past the end (%zu bytes left)",
                         (unsigned long long)num, (unsigned long long)len, end - i);
                return bad(w, body, what);
            }
            size_t sub = i;
            i += (size_t)len;
            if (!f) break;
            int rc = LT_OK;
            if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                size_t plen = strlen(w->path);
                snprintf(w->path + plen, sizeof w->path - plen, "%s%s", plen ? "." : "", f->name);
                rc = walk(w, f->descriptor, sub, i, depth + 1);
                w->path[plen] = 0;
            } else if (f->type == PROTOBUF_C_TYPE_STRING) {
                if (!lt__utf8_valid(w->data + sub, (size_t)len)) {
                    snprintf(what, sizeof what, "string field '%s' is not valid UTF-8", f->name);
                    rc = bad(w, sub, what);
                }
            } else if (f->type != PROTOBUF_C_TYPE_BYTES) {
                rc = walk_packed(w, f, sub, i);
            }
            if (rc) return rc;
            break;
        }
        default:
            snprintf(what, sizeof what, "field %llu: wire type %s, which looptune never writes",
                     (unsigned long long)num, wire_name(wt));
            return bad(w, at, what);
        }
    }
    return LT_OK;
}

/* ---- decoding ------------------------------------------------------------------ */

int lt_envelope_decode(const void *buf, size_t len, Looptune__Envelope **out) {
    *out = NULL;
    if (len == 0) return lt_error(LT_EFORMAT, "empty record: not a looptune envelope");
    walker w = {.data = buf, .path = ""};
    int rc = walk(&w, &looptune__envelope__descriptor, 0, len, 0);
    if (rc) return rc;
    Looptune__Envelope *env = looptune__envelope__unpack(NULL, len, buf);
    if (!env)
        return lt_error(LT_EFORMAT, "%zu-byte record does not match the looptune schema", len);
    if (env->version == 0)
        rc = lt_error(LT_EFORMAT, "%zu-byte record has no schema version: not a looptune "
                                  "envelope", len);
    else if (env->version > LT_PROTO_VERSION)
        rc = lt_error(LT_EFORMAT, "schema version %u is newer than this reader's %d",
                      env->version, LT_PROTO_VERSION);
    else if (!payload_field(env))
        rc = lt_error(LT_EFORMAT, "envelope (version %u) carries no message this reader knows",
                      env->version);
    if (rc) {
        looptune__envelope__free_unpacked(env, NULL);
        return rc;
    }
    *out = env;
    return LT_OK;
}

void lt_envelope_free(Looptune__Envelope *env) {
    if (env) looptune__envelope__free_unpacked(env, NULL);
}

/* ---- keys ------------------------------------------------------------------------ */

size_t lt_envelope_key(const Looptune__Envelope *env, char *buf, size_t n) {
    const char *k = "";
    int len;
    const ProtobufCFieldDescriptor *f = payload_field(env);
    if (!f || !*(void *const *)((const char *)env + f->offset)) {
        if (n) buf[0] = 0;
        return 0;
    }
    switch (env->payload_case) {
    case LOOPTUNE__ENVELOPE__PAYLOAD_HOST: k = env->host->host_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START: k = env->run_start->run_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END: k = env->run_end->run_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW: k = env->kernel_window->run_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE: k = env->call_sample->run_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_CONTROL: k = env->control->run_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_CONFIG: {
        const Looptune__Config *c = env->config;
        len = snprintf(buf, n, "%s|%s|%s", c->kernel ? c->kernel : "", c->shape ? c->shape : "",
                       c->host_class ? c->host_class : "");
        return len < 0 ? 0 : (size_t)len;
    }
    case LOOPTUNE__ENVELOPE__PAYLOAD_TASK: k = env->task->job_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_RESULT: k = env->result->job_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_TRIAL: k = env->trial->study_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_CHUNK: k = env->chunk->job_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_HEARTBEAT: k = env->heartbeat->worker; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_DEAD_LETTER:
        k = env->dead_letter->task ? env->dead_letter->task->job_id : "";
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_REQUEST: k = env->request->request_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_CANCEL: k = env->cancel->request_id; break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_COMPLETION: k = env->completion->request_id; break;
    default: break;
    }
    len = snprintf(buf, n, "%s", k ? k : "");
    return len < 0 ? 0 : (size_t)len;
}
