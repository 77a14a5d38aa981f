/* looptune http: the OpenAI-compatible gateway of the inference service.
 * Requests in OpenAI's JSON (completions and chat completions, streaming or
 * not) become inference requests for a backend (the Kafka requests and
 * completions topics, or a worker in the same process); the tokens that come
 * back go out as JSON or as server-sent events. Prometheus metrics on
 * /metrics. */
#ifndef LOOPTUNE_HTTP_H
#define LOOPTUNE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "looptune/core.h"
#include "looptune/kafka.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- OpenAI requests (openai.c) ---------------------------------------- */

#define LT_OAI_MAX_STOP 4 /* OpenAI's limit on stop sequences */

typedef enum { LT_OAI_COMPLETION, LT_OAI_CHAT } lt_oai_kind;

typedef struct {
    char *role;    /* "system", "user", "assistant" */
    char *content; /* UTF-8 text */
} lt_oai_message;

/* A parsed and validated request body. Strings are malloc'd; free with
 * lt_oai_request_free (NULL is a no-op). Sampling fields the body leaves
 * out keep OpenAI's defaults (temperature 1, top_p 1) or looptune's
 * "off" (top_k 0, min_p 0, repeat_penalty 1). */
typedef struct {
    lt_oai_kind kind;
    char *model;
    char *prompt;              /* LT_OAI_COMPLETION */
    lt_oai_message *messages;  /* LT_OAI_CHAT: [n_messages] */
    int64_t n_messages;
    int64_t max_tokens;        /* 0: the server's default */
    float temperature, top_p, min_p, repeat_penalty;
    int32_t top_k;
    bool has_seed;
    uint64_t seed;
    bool stream;
    bool include_usage;        /* stream_options.include_usage */
    bool ignore_eos;           /* llama.cpp's server's extension: generate past end-of-generation */
    char *stop[LT_OAI_MAX_STOP];
    int n_stop;
    char *user;
} lt_oai_request;

/* An error a client can act on: its HTTP status and OpenAI's error object
 * fields. */
typedef struct {
    int http_status;   /* 400, 401, 404, 405, 413, 429, 500, 503 */
    char type[32];     /* "invalid_request_error", ... */
    char param[32];    /* the offending field, "" if none */
    char code[32];     /* "model_not_found", ... ("" if none) */
    char message[256];
} lt_oai_error;

/* Parses body (len bytes) as a request of kind. 0, or -1 with *err set
 * (http_status 400) naming the field. *out is owned by the caller. */
int lt_oai_request_parse(lt_oai_kind kind, const char *body, size_t len, lt_oai_request *out,
                         lt_oai_error *err);
void lt_oai_request_free(lt_oai_request *r);

/* Fills err. Returns -1, so handlers read `return lt_oai_fail(err, 404, ...)`. */
int lt_oai_fail(lt_oai_error *err, int http_status, const char *type, const char *param,
                const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* {"error": {...}} (malloc'd, caller frees; NULL out of memory). */
char *lt_oai_error_json(const lt_oai_error *err);

/* What a finished generation reports. */
typedef struct {
    const char *finish_reason; /* "stop", "length", "cancelled", "deadline", "error" */
    int64_t prompt_tokens, completion_tokens;
} lt_oai_usage;

/* The non-streaming response object (malloc'd JSON, caller frees). */
char *lt_oai_response_json(const lt_oai_request *r, const char *id, int64_t created,
                           const char *text, const lt_oai_usage *u);
/* One streamed chunk: a piece of text (u NULL), or the last one with its
 * finish reason (text NULL or ""), or the usage chunk (text NULL, usage_only). */
char *lt_oai_chunk_json(const lt_oai_request *r, const char *id, int64_t created,
                        const char *text, const lt_oai_usage *u, bool usage_only);

/* ---- metrics (metrics.c) ------------------------------------------------ */

/* Prometheus counters, gauges and histograms of the gateway, safe to update
 * from any thread. */
typedef struct lt_metrics lt_metrics;

int lt_metrics_init(lt_metrics **out);
void lt_metrics_free(lt_metrics *m);
/* Requests finished, by endpoint and HTTP status. */
void lt_metrics_request(lt_metrics *m, const char *endpoint, int http_status);
void lt_metrics_tokens(lt_metrics *m, int64_t prompt_tokens, int64_t completion_tokens);
/* Requests waiting for or in generation (gauge). */
void lt_metrics_inflight(lt_metrics *m, int delta);
/* Seconds from the request to its first token, and between tokens. */
void lt_metrics_ttft(lt_metrics *m, double seconds);
void lt_metrics_token_gap(lt_metrics *m, double seconds);
void lt_metrics_latency(lt_metrics *m, double seconds); /* the whole request */
/* The text exposition format (malloc'd, caller frees). */
char *lt_metrics_render(lt_metrics *m);

/* ---- the gateway (gateway.c, server.c) ------------------------------------ */

typedef struct {
    lt_kafka_conn conn;         /* the cluster of the requests and completions topics */
    const char *topic_prefix;   /* NULL: "looptune." */
    int32_t partitions;         /* of the topics it creates; 0: 6 */
    lt_devbroker *devbroker;    /* the embedded broker the topics are on, or NULL */
    const char *http_addr;      /* "HOST:PORT" (port 0: any free one), "[V6]:PORT" */
    const char *api_key;        /* clients must send "Authorization: Bearer KEY"; NULL: none */
    const char *const *models;  /* [n_models] the model names served; none: any name
                                   goes to the workers, which refuse unknown ones */
    size_t n_models;
    int64_t max_inflight;       /* requests in flight before 429; 0: 256 */
    int max_connections;        /* HTTP connections at once; 0: 512 */
    int64_t default_max_tokens; /* a request without max_tokens; 0: 256 */
    double timeout_s;           /* a request's deadline, from its arrival; 0: 300 */
} lt_gateway_opts;

typedef struct lt_gateway lt_gateway;

/* Makes sure the topics exist, starts following completions, then serves
 * HTTP on its own threads until lt_gateway_close. */
int lt_gateway_open(lt_gateway **out, const lt_gateway_opts *opts);
int lt_gateway_port(const lt_gateway *g); /* the bound TCP port */
/* Records on the completions topic that were not completions (counted). */
int64_t lt_gateway_rejected(const lt_gateway *g);
/* Stops serving (connections in progress are closed) and frees. NULL is a no-op. */
void lt_gateway_close(lt_gateway *g);

#ifdef __cplusplus
}
#endif
#endif
