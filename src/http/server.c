/* The gateway's HTTP half, on libmicrohttpd: a thread per connection (a
 * handler blocks on its request's stream, which is what the thread is for;
 * the connection limit bounds them), OpenAI's routes, bearer keys, and
 * server-sent events for streams.
 *
 *   POST /v1/completions, /v1/chat/completions   (stream or not)
 *   GET  /v1/models, /health, /metrics
 *
 * A request's headers wait for its first token or its error, so an error
 * the workers find (an unknown model, a prompt longer than the context)
 * is an HTTP status, not a broken stream. A client that goes away (its
 * socket closes) cancels its request. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "gateway_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "kafka/utf8.h"

#define MAX_BODY (4u << 20)   /* request bodies: prompts up to a few MiB */
#define WAIT_SLICE_MS 100     /* how often a waiting handler looks at its client */
#define SSE_BLOCK 4096

struct lt__gw_server {
    struct MHD_Daemon *d;
    lt_gateway *g;
};

/* The state of one HTTP request, from its first byte to its end. */
typedef struct {
    char *body;
    size_t len;
    bool too_large;
    /* a stream being sent */
    lt_gateway *g;
    lt_oai_request req;
    lt__gw_stream *s;
    int fd;               /* the client's socket */
    double t_arrival, t_last_token;
    int64_t created;
    size_t taken;         /* bytes of s->text turned into events */
    uint32_t tokens_seen; /* tokens counted for the gap metric */
    char *out;            /* the event being written */
    size_t out_len, out_pos;
    int phase;            /* 0 streaming, 1 final written, 2 [DONE] written */
    bool cancelled;
    char endpoint[16];
} conn_ctx;

/* ---- text: UTF-8 whole characters only --------------------------------- */

/* The bytes at s[0..n) that begin a well-formed sequence but stop short of
 * completing it (Unicode's "maximal subpart"): 1..3, or 0 when s[0] can
 * begin none. *complete_possible: the whole of s[0..n) is such a prefix, so
 * more bytes could still complete it. */
static size_t maximal_subpart(const uint8_t *s, size_t n, bool *complete_possible) {
    uint8_t b = s[0];
    size_t need = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    *complete_possible = false;
    if (!need) return 0;
    size_t k = 1;
    for (; k < need && k < n; k++) {
        uint8_t lo = 0x80, hi = 0xBF, c = s[k];
        if (k == 1) { /* the second byte's narrower ranges: no overlongs, surrogates, > U+10FFFF */
            if (b == 0xE0) lo = 0xA0;
            else if (b == 0xED) hi = 0x9F;
            else if (b == 0xF0) lo = 0x90;
            else if (b == 0xF4) hi = 0x8F;
        }
        if (c < lo || c > hi) return k;
    }
    *complete_possible = k == n && k < need;
    return k;
}

/* Appends to *dst the valid UTF-8 of src[0..n), each ill-formed part as one
 * U+FFFD (maximal subparts, as Python's and WHATWG's decoders replace); an
 * incomplete character at the end is held back (not consumed) unless
 * final. Returns the bytes consumed; *dst grows by realloc. */
static size_t utf8_take(const uint8_t *src, size_t n, bool final, char **dst, size_t *dlen) {
    char *d = realloc(*dst, *dlen + n * 3 + 1);
    if (!d) return 0;
    *dst = d;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = lt__utf8_next(src + i, n - i, &cp);
        if (k) {
            memcpy(d + *dlen, src + i, k);
            *dlen += k;
            i += k;
            continue;
        }
        bool more;
        size_t bad = maximal_subpart(src + i, n - i, &more);
        if (more && !final) break; /* its continuation has not arrived yet */
        memcpy(d + *dlen, "\xEF\xBF\xBD", 3);
        *dlen += 3;
        i += bad ? bad : 1;
    }
    d[*dlen] = 0;
    return i;
}

/* ---- responses ------------------------------------------------------------ */

static enum MHD_Result send_text(struct MHD_Connection *c, conn_ctx *x, int status,
                                 const char *type, char *text) {
    if (!text) {
        text = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}");
        status = 500;
        if (!text) return MHD_NO;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == 429 || status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    if (x) lt_metrics_request(lt__gw_metrics(x->g), x->endpoint, status);
    return rc;
}

static enum MHD_Result send_error(struct MHD_Connection *c, conn_ctx *x, const lt_oai_error *e) {
    return send_text(c, x, e->http_status, "application/json", lt_oai_error_json(e));
}

/* An error record from a worker, as the HTTP status a client acts on. */
static void worker_error(const lt__gw_stream *s, lt_oai_error *e) {
    const char *code = s->error_code;
    int status = !strcmp(code, "model_not_found")           ? 404
                 : !strcmp(code, "context_length_exceeded") ? 413
                 : !strcmp(code, "invalid_request")         ? 400
                                                            : 500;
    lt_oai_fail(e, status, status == 500 ? "server_error" : "invalid_request_error",
                status == 404 ? "model" : status == 413 ? "messages" : "", code, "%s",
                s->error[0] ? s->error : "the worker failed the request");
}

/* ---- waiting on a stream, watching the client ----------------------------------- */

/* True when the client has closed its end (or the socket failed). */
static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Waits (s->mu held) until the stream has more than `have` bytes or has
 * ended, the client is gone, or the deadline passes. 1 = something new,
 * 0 = the client went away, -1 = deadline. */
static int wait_for(conn_ctx *x, size_t have) {
    lt__gw_stream *s = x->s;
    double deadline = x->t_arrival + lt__gw_timeout_s(x->g) + 5;
    while (!s->done && s->text_len <= have && s->tokens <= x->tokens_seen) {
        if (client_gone(x->fd)) return 0;
        if (lt_now_s() > deadline) return -1;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WAIT_SLICE_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    return 1;
}

static void cancel_once(conn_ctx *x) {
    if (x->cancelled || !x->s) return;
    x->cancelled = true;
    lt__gw_cancel(x->g, x->s);
}

static void count_tokens(conn_ctx *x) {
    lt_metrics *m = lt__gw_metrics(x->g);
    lt__gw_stream *s = x->s;
    if (s->tokens > x->tokens_seen) {
        double now = lt_now_s();
        if (!x->tokens_seen) lt_metrics_ttft(m, s->t_first - x->t_arrival);
        else lt_metrics_token_gap(m, (now - x->t_last_token) / (s->tokens - x->tokens_seen));
        x->t_last_token = now;
        x->tokens_seen = s->tokens;
    }
}

static void finish_metrics(conn_ctx *x) {
    lt_metrics *m = lt__gw_metrics(x->g);
    lt_metrics_latency(m, lt_now_s() - x->t_arrival);
    lt_metrics_tokens(m, x->s->prompt_tokens, x->s->completion_tokens);
}

/* ---- streams: server-sent events -------------------------------------------------- */

static void set_out(conn_ctx *x, char *json, bool done_marker) {
    free(x->out);
    x->out = NULL;
    x->out_len = x->out_pos = 0;
    if (done_marker) {
        x->out = strdup("data: [DONE]\n\n");
    } else if (json) {
        size_t n = strlen(json);
        x->out = malloc(n + 9);
        if (x->out) {
            memcpy(x->out, "data: ", 6);
            memcpy(x->out + 6, json, n);
            memcpy(x->out + 6 + n, "\n\n", 3);
        }
    }
    free(json);
    if (x->out) x->out_len = strlen(x->out);
}

/* The next event of the stream into x->out: new text, then the final chunk,
 * the usage chunk when asked, and [DONE]. false at the end or on failure. */
static bool next_event(conn_ctx *x, bool *error) {
    lt__gw_stream *s = x->s;
    *error = false;
    if (x->phase == 2) return false;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (x->phase == 0 && s->text_len > x->taken) {
            char *piece = NULL;
            size_t plen = 0;
            x->taken += utf8_take(s->text + x->taken, s->text_len - x->taken, s->done, &piece, &plen);
            count_tokens(x);
            if (plen) {
                pthread_mutex_unlock(&s->mu);
                set_out(x, lt_oai_chunk_json(&x->req, s->id, x->created, piece, NULL, false), false);
                free(piece);
                return x->out != NULL || (*error = true, false);
            }
            free(piece);
        }
        if (s->done && x->phase == 0 && x->taken >= s->text_len) {
            lt_oai_usage u = {s->finish_reason, s->prompt_tokens, s->completion_tokens};
            x->phase = 1;
            finish_metrics(x);
            char *j = lt_oai_chunk_json(&x->req, s->id, x->created, NULL, &u, false);
            if (x->req.include_usage) {
                char *k = lt_oai_chunk_json(&x->req, s->id, x->created, NULL, &u, true);
                size_t a = j ? strlen(j) : 0, b = k ? strlen(k) : 0;
                char *both = j && k ? malloc(a + b + 16) : NULL;
                if (both) sprintf(both, "%s\n\ndata: %s", j, k);
                free(j);
                free(k);
                j = both;
            }
            pthread_mutex_unlock(&s->mu);
            set_out(x, j, false);
            return x->out != NULL || (*error = true, false);
        }
        if (x->phase == 1) {
            x->phase = 2;
            pthread_mutex_unlock(&s->mu);
            set_out(x, NULL, true);
            return x->out != NULL;
        }
        int w = wait_for(x, s->text_len);
        if (w <= 0) {
            pthread_mutex_unlock(&s->mu);
            *error = true;
            return false;
        }
    }
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    conn_ctx *x = cls;
    if (x->out_pos == x->out_len) {
        bool error;
        if (!next_event(x, &error)) {
            if (error) cancel_once(x);
            return error ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
        }
    }
    size_t n = x->out_len - x->out_pos;
    if (n > max) n = max;
    memcpy(buf, x->out + x->out_pos, n);
    x->out_pos += n;
    return (ssize_t)n;
}

/* ---- completions ------------------------------------------------------------------ */

static enum MHD_Result completion(struct MHD_Connection *c, conn_ctx *x, lt_oai_kind kind) {
    lt_oai_error e;
    if (lt_oai_request_parse(kind, x->body ? x->body : "", x->len, &x->req, &e))
        return send_error(c, x, &e);
    if (!lt__gw_knows_model(x->g, x->req.model)) {
        lt_oai_fail(&e, 404, "invalid_request_error", "model", "model_not_found",
                    "the model '%s' does not exist (GET /v1/models lists them)", x->req.model);
        return send_error(c, x, &e);
    }
    if (lt__gw_submit(x->g, &x->req, &x->s, &e)) return send_error(c, x, &e);
    x->created = (int64_t)time(NULL);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    x->fd = ci ? ci->connect_fd : -1;

    /* the first token or the end, before any header */
    lt__gw_stream *s = x->s;
    pthread_mutex_lock(&s->mu);
    int w = wait_for(x, 0);
    if (w <= 0) {
        pthread_mutex_unlock(&s->mu);
        cancel_once(x);
        if (w == 0) return MHD_NO; /* nobody to answer */
        lt_oai_fail(&e, 504, "server_error", "", "timeout",
                    "no worker answered within %.0f s", lt__gw_timeout_s(x->g));
        return send_error(c, x, &e);
    }
    if (s->done && !strcmp(s->finish_reason, "error") && s->tokens == 0) {
        worker_error(s, &e);
        pthread_mutex_unlock(&s->mu);
        return send_error(c, x, &e);
    }
    if (x->req.stream) {
        pthread_mutex_unlock(&s->mu);
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK, sse_read, x, NULL);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        lt_metrics_request(lt__gw_metrics(x->g), x->endpoint, 200);
        return rc;
    }
    while (!s->done) {
        count_tokens(x);
        if ((w = wait_for(x, s->text_len)) <= 0) {
            pthread_mutex_unlock(&s->mu);
            cancel_once(x);
            if (w == 0) return MHD_NO;
            lt_oai_fail(&e, 504, "server_error", "", "timeout", "the request timed out");
            return send_error(c, x, &e);
        }
    }
    count_tokens(x);
    finish_metrics(x);
    char *text = NULL;
    size_t tlen = 0;
    utf8_take(s->text ? s->text : (const uint8_t *)"", s->text_len, true, &text, &tlen);
    lt_oai_usage u = {s->finish_reason, s->prompt_tokens, s->completion_tokens};
    char *j = text ? lt_oai_response_json(&x->req, s->id, x->created, text, &u) : NULL;
    pthread_mutex_unlock(&s->mu);
    free(text);
    return send_text(c, x, 200, "application/json", j);
}

/* ---- routes -------------------------------------------------------------------------- */

static bool authorized(struct MHD_Connection *c, lt_gateway *g) {
    const char *key = lt__gw_api_key(g);
    if (!key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    /* the same time whatever the prefix that matches */
    const char *t = h + 7;
    size_t n = strlen(key), m = strlen(t);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < m; i++) diff |= (unsigned)(uint8_t)t[i] ^ (unsigned)(uint8_t)key[i % (n ? n : 1)];
    return diff == 0;
}

static char *models_json(lt_gateway *g) {
    const char **names;
    size_t n = lt__gw_models(g, &names);
    size_t cap = 64;
    for (size_t i = 0; i < n; i++) cap += strlen(names[i]) * 6 + 96;
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t k = (size_t)snprintf(s, cap, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; i < n; i++) {
        char *q = NULL;
        if (lt_json_quote(names[i], strlen(names[i]), &q)) {
            free(s);
            return NULL;
        }
        k += (size_t)snprintf(s + k, cap - k, "%s{\"id\":%s,\"object\":\"model\",\"created\":0,\"owned_by\":\"looptune\"}",
                              i ? "," : "", q);
        free(q);
    }
    snprintf(s + k, cap - k, "]}");
    return s;
}

static enum MHD_Result route(void *cls, struct MHD_Connection *c, const char *url,
                             const char *method, const char *version, const char *upload,
                             size_t *upload_size, void **con_cls) {
    (void)version;
    lt__gw_server *srv = cls;
    conn_ctx *x = *con_cls;
    if (!x) {
        if (!(x = calloc(1, sizeof *x))) return MHD_NO;
        x->g = srv->g;
        x->fd = -1;
        x->t_arrival = lt_now_s();
        *con_cls = x;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!x->too_large && x->len + *upload_size <= MAX_BODY) {
            char *b = realloc(x->body, x->len + *upload_size + 1);
            if (b) {
                memcpy(b + x->len, upload, *upload_size);
                x->body = b;
                x->len += *upload_size;
                b[x->len] = 0;
            } else {
                x->too_large = true;
            }
        } else {
            x->too_large = true;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    lt_oai_error e;
    bool post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
    bool chat = !strcmp(url, "/v1/chat/completions"), compl = !strcmp(url, "/v1/completions");
    snprintf(x->endpoint, sizeof x->endpoint, "%s",
             chat ? "chat" : compl ? "completions" : !strcmp(url, "/v1/models") ? "models"
             : !strcmp(url, "/health") ? "health" : !strcmp(url, "/metrics") ? "metrics" : "other");
    if (!strcmp(url, "/health")) {
        if (!get) goto method;
        return send_text(c, x, 200, "application/json", strdup("{\"status\":\"ok\"}"));
    }
    if (!strcmp(url, "/metrics")) {
        if (!get) goto method;
        lt_metrics_request(lt__gw_metrics(x->g), "metrics", 200); /* counted in what it shows */
        char *t = lt_metrics_render(lt__gw_metrics(x->g));
        struct MHD_Response *r = t ? MHD_create_response_from_buffer(strlen(t), t, MHD_RESPMEM_MUST_FREE) : NULL;
        if (!r) {
            free(t);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
        enum MHD_Result rc = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return rc;
    }
    if (strncmp(url, "/v1/", 4)) goto not_found;
    if (!authorized(c, x->g)) {
        lt_oai_fail(&e, 401, "invalid_request_error", "", "invalid_api_key",
                    "a valid API key is required: send 'Authorization: Bearer KEY'");
        return send_error(c, x, &e);
    }
    if (!strcmp(url, "/v1/models")) {
        if (!get) goto method;
        return send_text(c, x, 200, "application/json", models_json(x->g));
    }
    if (chat || compl) {
        if (!post) goto method;
        if (x->too_large) {
            lt_oai_fail(&e, 413, "invalid_request_error", "", "request_too_large",
                        "the request body is larger than %u bytes", MAX_BODY);
            return send_error(c, x, &e);
        }
        return completion(c, x, chat ? LT_OAI_CHAT : LT_OAI_COMPLETION);
    }
not_found:
    lt_oai_fail(&e, 404, "invalid_request_error", "", "not_found", "no route %s %s", method, url);
    return send_error(c, x, &e);
method:
    lt_oai_fail(&e, 405, "invalid_request_error", "", "method_not_allowed",
                "%s is not allowed on %s", method, url);
    return send_error(c, x, &e);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
    (void)c;
    lt__gw_server *srv = cls;
    conn_ctx *x = *con_cls;
    if (!x) return;
    if (x->s) {
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
            pthread_mutex_lock(&x->s->mu);
            bool done = x->s->done;
            pthread_mutex_unlock(&x->s->mu);
            if (!done) cancel_once(x);
        }
        lt__gw_release(srv->g, x->s);
    }
    lt_oai_request_free(&x->req);
    free(x->body);
    free(x->out);
    free(x);
    *con_cls = NULL;
}

static void log_mhd(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n') line[--n] = 0;
    lt_log(LT_LOG_WARN, "gateway: http: %s", line);
}

/* "HOST:PORT" or "[V6]:PORT" into a socket address. */
static int parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len) {
    char host[128];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || !colon[1])
        return lt_error(LT_EINVAL, "--http '%s': expected HOST:PORT (for example 127.0.0.1:8080)", addr);
    size_t hl = (size_t)(colon - addr);
    if (hl >= sizeof host) return lt_error(LT_EINVAL, "--http '%s': host too long", addr);
    memcpy(host, addr, hl);
    host[hl] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        return lt_error(LT_EINVAL, "--http '%s': port must be 0..65535", addr);
    memset(ss, 0, sizeof *ss);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        host[hl - 1] = 0;
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
            return lt_error(LT_EINVAL, "--http '%s': not an IPv6 address", addr);
        *len = sizeof *a6;
        return 0;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    if (!strcmp(host, "localhost")) strcpy(host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
        return lt_error(LT_EINVAL, "--http '%s': '%s' is not an IPv4 address", addr, host);
    *len = sizeof *a4;
    return 0;
}

int lt__gw_server_start(lt__gw_server **out, lt_gateway *g, const char *addr, int max_conns,
                        int *port) {
    struct sockaddr_storage ss;
    socklen_t sl;
    int rc = parse_addr(addr, &ss, &sl);
    if (rc) return rc;
    lt__gw_server *s = calloc(1, sizeof *s);
    if (!s) return lt_error(LT_ENOMEM, "gateway");
    s->g = g;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ERROR_LOG | (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, route, s, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(max_conns > 0 ? max_conns : 512),
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_END);
    if (!s->d) {
        free(s);
        return lt_error(LT_EIO, "--http %s: cannot listen there (in use, or not this machine's address)", addr);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    *port = di ? (int)di->port : 0;
    *out = s;
    return 0;
}

void lt__gw_server_stop(lt__gw_server *s) {
    if (!s) return;
    MHD_stop_daemon(s->d);
    free(s);
}
