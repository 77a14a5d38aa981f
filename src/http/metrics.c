/* The gateway's Prometheus metrics: requests by endpoint and status, tokens,
 * requests in flight, and latency histograms (time to first token, the gap
 * between tokens, the whole request), rendered in the text exposition format
 * (version 0.0.4). One mutex: updates come a few per token, far from any
 * compute path. */
#include "looptune/http.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SERIES 64 /* (endpoint, status) pairs; more fold into "other" */

typedef struct {
    const double *bounds; /* upper bounds, seconds, ascending */
    int n;
    uint64_t counts[16]; /* [n]: observations <= bounds[i] (not cumulative) */
    uint64_t count;
    double sum;
} histogram;

static const double TTFT_BOUNDS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                     0.25,  0.5,    1,     2.5,  5,     10,   30};
static const double GAP_BOUNDS[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                    0.1,    0.25,  0.5,    1,     2.5,  5};
static const double LATENCY_BOUNDS[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                        2.5,  5,     10,   30,  60,   120, 300};

struct lt_metrics {
    pthread_mutex_t mu;
    struct {
        char endpoint[32];
        int status;
        uint64_t n;
    } series[MAX_SERIES];
    int n_series;
    uint64_t prompt_tokens, completion_tokens;
    int64_t inflight;
    histogram ttft, gap, latency;
};

static void hist_init(histogram *h, const double *bounds, int n) {
    h->bounds = bounds;
    h->n = n;
}

int lt_metrics_init(lt_metrics **out) {
    lt_metrics *m = calloc(1, sizeof *m);
    if (!m) return lt_error(LT_ENOMEM, "metrics");
    pthread_mutex_init(&m->mu, NULL);
    hist_init(&m->ttft, TTFT_BOUNDS, (int)(sizeof TTFT_BOUNDS / sizeof *TTFT_BOUNDS));
    hist_init(&m->gap, GAP_BOUNDS, (int)(sizeof GAP_BOUNDS / sizeof *GAP_BOUNDS));
    hist_init(&m->latency, LATENCY_BOUNDS, (int)(sizeof LATENCY_BOUNDS / sizeof *LATENCY_BOUNDS));
    *out = m;
    return 0;
}

void lt_metrics_free(lt_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void lt_metrics_request(lt_metrics *m, const char *endpoint, int http_status) {
    pthread_mutex_lock(&m->mu);
    int i;
    for (i = 0; i < m->n_series; i++)
        if (m->series[i].status == http_status && !strcmp(m->series[i].endpoint, endpoint)) break;
    if (i == m->n_series) {
        if (m->n_series == MAX_SERIES) {
            i = MAX_SERIES - 1; /* the last series counts whatever does not fit */
            snprintf(m->series[i].endpoint, sizeof m->series[i].endpoint, "other");
        } else {
            m->n_series++;
            snprintf(m->series[i].endpoint, sizeof m->series[i].endpoint, "%s", endpoint);
            m->series[i].status = http_status;
        }
    }
    m->series[i].n++;
    pthread_mutex_unlock(&m->mu);
}

void lt_metrics_tokens(lt_metrics *m, int64_t prompt_tokens, int64_t completion_tokens) {
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += (uint64_t)(prompt_tokens > 0 ? prompt_tokens : 0);
    m->completion_tokens += (uint64_t)(completion_tokens > 0 ? completion_tokens : 0);
    pthread_mutex_unlock(&m->mu);
}

void lt_metrics_inflight(lt_metrics *m, int delta) {
    pthread_mutex_lock(&m->mu);
    m->inflight += delta;
    pthread_mutex_unlock(&m->mu);
}

static void observe(lt_metrics *m, histogram *h, double s) {
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < h->n && s > h->bounds[i]) i++;
    if (i < h->n) h->counts[i]++;
    h->count++;
    h->sum += s;
    pthread_mutex_unlock(&m->mu);
}

void lt_metrics_ttft(lt_metrics *m, double s) { observe(m, &m->ttft, s); }
void lt_metrics_token_gap(lt_metrics *m, double s) { observe(m, &m->gap, s); }
void lt_metrics_latency(lt_metrics *m, double s) { observe(m, &m->latency, s); }

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...) {
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = true;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n + 64;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->oom = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

static void render_hist(text *t, const char *name, const char *help, const histogram *h) {
    add(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        add(t, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    add(t, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->count);
    add(t, "%s_sum %.9g\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->count);
}

char *lt_metrics_render(lt_metrics *m) {
    text t = {.s = malloc(4096), .cap = 4096};
    if (!t.s) return NULL;
    t.s[0] = 0;
    pthread_mutex_lock(&m->mu);
    add(&t, "# HELP looptune_http_requests_total HTTP requests answered, by endpoint and status.\n"
            "# TYPE looptune_http_requests_total counter\n");
    for (int i = 0; i < m->n_series; i++)
        add(&t, "looptune_http_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
            m->series[i].endpoint, m->series[i].status, (unsigned long long)m->series[i].n);
    add(&t, "# HELP looptune_prompt_tokens_total Prompt tokens of finished requests.\n"
            "# TYPE looptune_prompt_tokens_total counter\nlooptune_prompt_tokens_total %llu\n",
        (unsigned long long)m->prompt_tokens);
    add(&t, "# HELP looptune_completion_tokens_total Tokens generated for finished requests.\n"
            "# TYPE looptune_completion_tokens_total counter\nlooptune_completion_tokens_total %llu\n",
        (unsigned long long)m->completion_tokens);
    add(&t, "# HELP looptune_requests_in_flight Requests queued or generating.\n"
            "# TYPE looptune_requests_in_flight gauge\nlooptune_requests_in_flight %lld\n",
        (long long)m->inflight);
    render_hist(&t, "looptune_time_to_first_token_seconds",
                "Seconds from a request's arrival to its first token.", &m->ttft);
    render_hist(&t, "looptune_inter_token_seconds", "Seconds between a stream's tokens.", &m->gap);
    render_hist(&t, "looptune_request_duration_seconds",
                "Seconds from a request's arrival to its last byte.", &m->latency);
    pthread_mutex_unlock(&m->mu);
    if (t.oom) {
        free(t.s);
        return NULL;
    }
    return t.s;
}
