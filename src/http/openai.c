/* OpenAI's request and response bodies: /v1/completions and
 * /v1/chat/completions parsed and validated into lt_oai_request (an error
 * names the field, as OpenAI's own do), and the response objects and
 * streamed chunks written back. JSON by Jansson. Fields a client may send
 * that change nothing here (user, logit_bias of {}) are accepted; fields
 * whose meaning looptune cannot honour (n > 1, logprobs, a non-zero
 * frequency penalty) are refused rather than silently ignored. */
#include "looptune/http.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS_LIMIT (1 << 20) /* above any context looptune runs */

int lt_oai_fail(lt_oai_error *err, int http_status, const char *type, const char *param,
                const char *code, const char *fmt, ...) {
    err->http_status = http_status;
    snprintf(err->type, sizeof err->type, "%s", type ? type : "invalid_request_error");
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    snprintf(err->code, sizeof err->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}

static int bad(lt_oai_error *err, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(lt_oai_error *err, const char *param, const char *fmt, ...) {
    char msg[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return lt_oai_fail(err, 400, "invalid_request_error", param, "", "%s", msg);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* A text field: a JSON string (any length, NUL bytes refused). */
static int get_text(json_t *v, const char *param, char **out, lt_oai_error *err) {
    if (!json_is_string(v)) return bad(err, param, "'%s' must be a string", param);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return bad(err, param, "'%s' holds a NUL character", param);
    if (!(*out = dup_str(json_string_value(v))))
        return lt_oai_fail(err, 500, "server_error", param, "", "out of memory");
    return 0;
}

static int get_number(json_t *o, const char *key, double lo, double hi, float *out,
                      lt_oai_error *err) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return bad(err, key, "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return bad(err, key, "'%s' is %g, not within [%g, %g]", key, x, lo, hi);
    *out = (float)x;
    return 0;
}

static int get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
                   lt_oai_error *err) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) return bad(err, key, "'%s' must be an integer", key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return bad(err, key, "'%s' is %lld, not within [%lld, %lld]", key, (long long)x,
                   (long long)lo, (long long)hi);
    *out = (int64_t)x;
    return 0;
}

static int get_bool(json_t *o, const char *key, bool *out, lt_oai_error *err) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return bad(err, key, "'%s' must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

static int parse_prompt(json_t *o, lt_oai_request *r, lt_oai_error *err) {
    json_t *v = json_object_get(o, "prompt");
    if (!v || json_is_null(v)) return bad(err, "prompt", "'prompt' is required");
    if (json_is_array(v)) {
        if (json_array_size(v) != 1)
            return bad(err, "prompt", "'prompt' must be one string (%zu given): one prompt per request",
                       json_array_size(v));
        v = json_array_get(v, 0);
        if (json_is_integer(v) || json_is_array(v))
            return bad(err, "prompt", "'prompt' as token ids is not supported: send text");
    }
    return get_text(v, "prompt", &r->prompt, err);
}

/* A message's content: a string, or an array of {"type": "text", "text": ...}
 * parts, concatenated. */
static int parse_content(json_t *v, char **out, lt_oai_error *err) {
    if (json_is_string(v)) return get_text(v, "messages", out, err);
    if (!json_is_array(v)) return bad(err, "messages", "a message's 'content' must be a string or text parts");
    size_t total = 1, i;
    json_t *part;
    json_array_foreach(v, i, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text))
            return bad(err, "messages", "content part %zu: only {\"type\": \"text\", \"text\": ...} parts are supported", i);
        total += json_string_length(text);
    }
    char *s = malloc(total);
    if (!s) return lt_oai_fail(err, 500, "server_error", "messages", "", "out of memory");
    size_t n = 0;
    json_array_foreach(v, i, part) {
        json_t *text = json_object_get(part, "text");
        memcpy(s + n, json_string_value(text), json_string_length(text));
        n += json_string_length(text);
    }
    s[n] = 0;
    if (strlen(s) != n) {
        free(s);
        return bad(err, "messages", "a message's content holds a NUL character");
    }
    *out = s;
    return 0;
}

static int parse_messages(json_t *o, lt_oai_request *r, lt_oai_error *err) {
    json_t *v = json_object_get(o, "messages");
    if (!json_is_array(v) || json_array_size(v) == 0)
        return bad(err, "messages", "'messages' must be a non-empty array");
    size_t n = json_array_size(v);
    if (!(r->messages = calloc(n, sizeof *r->messages)))
        return lt_oai_fail(err, 500, "server_error", "messages", "", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(v, i);
        if (!json_is_object(m)) return bad(err, "messages", "messages[%zu] must be an object", i);
        r->n_messages = (int64_t)i + 1;
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) return bad(err, "messages", "messages[%zu].role must be a string", i);
        const char *rs = json_string_value(role);
        if (!strcmp(rs, "developer")) rs = "system"; /* OpenAI's newer name for it */
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant"))
            return bad(err, "messages", "messages[%zu].role '%s' is not system, user or assistant", i,
                       json_string_value(role));
        if (!(r->messages[i].role = dup_str(rs)))
            return lt_oai_fail(err, 500, "server_error", "messages", "", "out of memory");
        json_t *content = json_object_get(m, "content");
        if (!content) return bad(err, "messages", "messages[%zu].content is required", i);
        if (parse_content(content, &r->messages[i].content, err)) return -1;
    }
    return 0;
}

static int parse_stop(json_t *o, lt_oai_request *r, lt_oai_error *err) {
    json_t *v = json_object_get(o, "stop");
    if (!v || json_is_null(v)) return 0;
    if (json_is_string(v)) {
        if (json_string_length(v) == 0) return 0;
        r->n_stop = 1;
        return get_text(v, "stop", &r->stop[0], err);
    }
    if (!json_is_array(v)) return bad(err, "stop", "'stop' must be a string or an array of strings");
    if (json_array_size(v) > LT_OAI_MAX_STOP)
        return bad(err, "stop", "'stop' holds %zu sequences, at most %d", json_array_size(v),
                   LT_OAI_MAX_STOP);
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s) {
        if (json_is_string(s) && json_string_length(s) == 0) continue;
        if (get_text(s, "stop", &r->stop[r->n_stop], err)) return -1;
        r->n_stop++;
    }
    return 0;
}

/* Fields that would change the answer in ways looptune does not produce. */
static int refuse_unsupported(json_t *o, lt_oai_error *err) {
    json_t *v;
    int64_t n = 1;
    if (get_int(o, "n", 1, 128, &n, err)) return -1;
    if (n != 1) return bad(err, "n", "'n' must be 1: one choice per request");
    if ((v = json_object_get(o, "best_of")) && !json_is_null(v) &&
        !(json_is_integer(v) && json_integer_value(v) == 1))
        return bad(err, "best_of", "'best_of' must be 1");
    if ((v = json_object_get(o, "echo")) && json_is_true(v))
        return bad(err, "echo", "'echo' is not supported");
    if ((v = json_object_get(o, "logprobs")) && !json_is_null(v) && !json_is_false(v))
        return bad(err, "logprobs", "'logprobs' is not supported");
    if ((v = json_object_get(o, "suffix")) && !json_is_null(v))
        return bad(err, "suffix", "'suffix' is not supported");
    if ((v = json_object_get(o, "tools")) && !json_is_null(v) && json_array_size(v) > 0)
        return bad(err, "tools", "'tools' is not supported");
    const char *zero_only[] = {"frequency_penalty", "presence_penalty"};
    for (size_t i = 0; i < sizeof zero_only / sizeof *zero_only; i++) {
        float x = 0;
        if (get_number(o, zero_only[i], -2, 2, &x, err)) return -1;
        if (x != 0)
            return bad(err, zero_only[i], "'%s' is not supported (use repeat_penalty)", zero_only[i]);
    }
    if ((v = json_object_get(o, "response_format")) && json_is_object(v)) {
        json_t *t = json_object_get(v, "type");
        if (json_is_string(t) && strcmp(json_string_value(t), "text"))
            return bad(err, "response_format", "'response_format' %s is not supported",
                       json_string_value(t));
    }
    return 0;
}

int lt_oai_request_parse(lt_oai_kind kind, const char *body, size_t len, lt_oai_request *r,
                         lt_oai_error *err) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    r->repeat_penalty = 1.0f;
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!o) return bad(err, "", "the body is not valid JSON (line %d, column %d: %s)", je.line, je.column, je.text);
    int rc = -1;
    if (!json_is_object(o)) {
        bad(err, "", "the body must be a JSON object");
        goto done;
    }
    json_t *model = json_object_get(o, "model");
    if (!model) {
        bad(err, "model", "'model' is required");
        goto done;
    }
    if (get_text(model, "model", &r->model, err)) goto done;
    if (kind == LT_OAI_COMPLETION ? parse_prompt(o, r, err) : parse_messages(o, r, err)) goto done;
    if (refuse_unsupported(o, err)) goto done;
    /* chat's newer name wins over the deprecated one when both are given */
    if (get_int(o, "max_tokens", 1, MAX_TOKENS_LIMIT, &r->max_tokens, err)) goto done;
    if (kind == LT_OAI_CHAT &&
        get_int(o, "max_completion_tokens", 1, MAX_TOKENS_LIMIT, &r->max_tokens, err))
        goto done;
    if (get_number(o, "temperature", 0, 2, &r->temperature, err)) goto done;
    if (get_number(o, "top_p", 0, 1, &r->top_p, err)) goto done;
    if (get_number(o, "min_p", 0, 1, &r->min_p, err)) goto done;
    if (get_number(o, "repeat_penalty", 0.01, 100, &r->repeat_penalty, err)) goto done;
    int64_t top_k = 0, seed = 0;
    if (get_int(o, "top_k", 0, 1 << 20, &top_k, err)) goto done;
    r->top_k = (int32_t)top_k;
    json_t *sv = json_object_get(o, "seed");
    if (sv && !json_is_null(sv)) {
        if (get_int(o, "seed", INT64_MIN, INT64_MAX, &seed, err)) goto done;
        r->has_seed = true;
        r->seed = (uint64_t)seed;
    }
    if (get_bool(o, "stream", &r->stream, err)) goto done;
    if (get_bool(o, "ignore_eos", &r->ignore_eos, err)) goto done;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) {
            bad(err, "stream_options", "'stream_options' must be an object");
            goto done;
        }
        if (get_bool(so, "include_usage", &r->include_usage, err)) goto done;
    }
    if (parse_stop(o, r, err)) goto done;
    json_t *user = json_object_get(o, "user");
    if (user && !json_is_null(user) && get_text(user, "user", &r->user, err)) goto done;
    rc = 0;
done:
    json_decref(o);
    if (rc) lt_oai_request_free(r);
    return rc;
}

void lt_oai_request_free(lt_oai_request *r) {
    if (!r) return;
    free(r->model);
    free(r->prompt);
    for (int64_t i = 0; i < r->n_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
    }
    free(r->messages);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->user);
    lt_oai_kind kind = r->kind;
    memset(r, 0, sizeof *r);
    r->kind = kind;
}

static char *dump(json_t *o) {
    if (!o) return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

char *lt_oai_error_json(const lt_oai_error *err) {
    return dump(json_pack("{s:{s:s, s:s, s:s*, s:s*}}", "error", "message", err->message, "type",
                          err->type, "param", err->param[0] ? err->param : NULL, "code",
                          err->code[0] ? err->code : NULL));
}

static json_t *usage_json(const lt_oai_usage *u) {
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)u->prompt_tokens,
                     "completion_tokens", (json_int_t)u->completion_tokens, "total_tokens",
                     (json_int_t)(u->prompt_tokens + u->completion_tokens));
}

char *lt_oai_response_json(const lt_oai_request *r, const char *id, int64_t created,
                           const char *text, const lt_oai_usage *u) {
    json_t *choice =
        r->kind == LT_OAI_CHAT
            ? json_pack("{s:i, s:{s:s, s:s}, s:s, s:n}", "index", 0, "message", "role", "assistant",
                        "content", text, "finish_reason", u->finish_reason, "logprobs")
            : json_pack("{s:i, s:s, s:s, s:n}", "index", 0, "text", text, "finish_reason",
                        u->finish_reason, "logprobs");
    return dump(json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", id, "object",
                          r->kind == LT_OAI_CHAT ? "chat.completion" : "text_completion", "created",
                          (json_int_t)created, "model", r->model, "choices", choice, "usage",
                          usage_json(u)));
}

char *lt_oai_chunk_json(const lt_oai_request *r, const char *id, int64_t created,
                        const char *text, const lt_oai_usage *u, bool usage_only) {
    bool chat = r->kind == LT_OAI_CHAT;
    json_t *o = json_pack("{s:s, s:s, s:I, s:s}", "id", id, "object",
                          chat ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)created, "model", r->model);
    if (!o) return NULL;
    json_t *choices = json_array();
    if (!usage_only) {
        const char *reason = u ? u->finish_reason : NULL;
        json_t *choice;
        if (chat) {
            json_t *delta = json_object();
            if (text && text[0]) {
                json_object_set_new(delta, "role", json_string("assistant"));
                json_object_set_new(delta, "content", json_string(text));
            }
            choice = json_pack("{s:i, s:o, s:o, s:n}", "index", 0, "delta", delta,
                               "finish_reason", reason ? json_string(reason) : json_null(), "logprobs");
        } else {
            choice = json_pack("{s:i, s:s, s:o, s:n}", "index", 0, "text", text ? text : "",
                               "finish_reason", reason ? json_string(reason) : json_null(), "logprobs");
        }
        json_array_append_new(choices, choice);
    }
    json_object_set_new(o, "choices", choices);
    if (usage_only && u) json_object_set_new(o, "usage", usage_json(u));
    return dump(o);
}
