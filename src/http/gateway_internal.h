/* What the gateway's two halves share: the HTTP server (server.c) waits on a
 * request's stream, the Kafka side (gateway.c) fills it from the
 * completions topic. */
#ifndef LT_HTTP_GATEWAY_INTERNAL_H
#define LT_HTTP_GATEWAY_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "looptune/http.h"

#define LT__GW_ID_MAX 48

/* One request in flight: the completion's bytes as they arrive, de-duplicated
 * by token index (a request served twice streams the same tokens twice).
 * mu guards every field below it; cv signals new bytes and the end. */
typedef struct lt__gw_stream {
    char id[LT__GW_ID_MAX];
    int refs; /* the table's and the HTTP handler's; guarded by the table's lock */
    struct lt__gw_stream *next; /* hash chain */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *text; /* [text_len] every token's bytes so far, in order */
    size_t text_len, text_cap;
    uint32_t tokens;  /* tokens received: the next index expected */
    bool done;
    char finish_reason[16];
    char error[256];
    char error_code[48];
    uint32_t prompt_tokens, completion_tokens;
    double t_first; /* lt_now_s() of the first token, 0 before */
} lt__gw_stream;

typedef struct lt_gateway lt_gateway;

/* Puts r on the requests topic under a new id and returns its stream
 * (*out, released with lt__gw_release). An OpenAI-style error (503 when the
 * producer's queue is full, 429 when too many requests are in flight). */
int lt__gw_submit(lt_gateway *g, const lt_oai_request *r, lt__gw_stream **out, lt_oai_error *err);
/* The client went away: a Cancel record for the request. */
void lt__gw_cancel(lt_gateway *g, lt__gw_stream *s);
void lt__gw_release(lt_gateway *g, lt__gw_stream *s);
/* The models a client may name (for /v1/models and the 404). */
size_t lt__gw_models(lt_gateway *g, const char ***names);
bool lt__gw_knows_model(lt_gateway *g, const char *name);
lt_metrics *lt__gw_metrics(lt_gateway *g);
const char *lt__gw_api_key(lt_gateway *g); /* NULL: none */
double lt__gw_timeout_s(lt_gateway *g);

/* server.c: the HTTP daemon over g; *port receives the bound port. */
typedef struct lt__gw_server lt__gw_server;
int lt__gw_server_start(lt__gw_server **out, lt_gateway *g, const char *addr, int max_conns,
                        int *port);
void lt__gw_server_stop(lt__gw_server *s);

#endif
