/* matvec with int16 / int8 activations: the portable quantisers of x and
 * the per-thread cache that lets a thread quantise x once per node and step,
 * however many of the node's tasks it runs (contract in linear.h). */
#include "kernels/linear.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

void lt__xq_quant_portable(const float *x, int64_t n, int16_t *q, float *s) {
    for (int64_t b = 0; b < n / LT__XQ_BLOCK; b++) {
        const float *xb = x + b * LT__XQ_BLOCK;
        int16_t *qb = q + b * LT__XQ_BLOCK;
        float amax = 0.0f;
        bool finite = true;
        for (int j = 0; j < LT__XQ_BLOCK; j++) {
            float a = fabsf(xb[j]);
            finite &= a <= FLT_MAX; /* false for NaN and infinity */
            amax = a > amax ? a : amax;
        }
        const float inv = (float)LT__XQ_MAX / amax;
        if (!finite || !(inv <= FLT_MAX)) {
            s[b] = finite ? 0.0f : NAN;
            memset(qb, 0, LT__XQ_BLOCK * sizeof *qb);
            continue;
        }
        s[b] = amax / (float)LT__XQ_MAX;
        for (int j = 0; j < LT__XQ_BLOCK; j++) {
            long v = lrintf(xb[j] * inv); /* |v| <= 32767: xb[j] * inv <= 32767 (1 + 2^-24) */
            qb[j] = (int16_t)(v > INT16_MAX ? INT16_MAX : v < INT16_MIN ? INT16_MIN : v);
        }
    }
}

void lt__xq8_quant_portable(const float *x, int64_t n, int8_t *q, float *s, int32_t *bias) {
    for (int64_t b = 0; b < n / LT__XQ_BLOCK; b++) {
        const float *xb = x + b * LT__XQ_BLOCK;
        int8_t *qb = q + b * LT__XQ_BLOCK;
        float amax = 0.0f;
        bool finite = true;
        for (int j = 0; j < LT__XQ_BLOCK; j++) {
            float a = fabsf(xb[j]);
            finite &= a <= FLT_MAX;
            amax = a > amax ? a : amax;
        }
        const float inv = (float)LT__XQ8_MAX / amax;
        if (!finite || !(inv <= FLT_MAX)) {
            s[b] = finite ? 0.0f : NAN;
            memset(qb, 0, LT__XQ_BLOCK);
        } else {
            s[b] = amax / (float)LT__XQ8_MAX;
            for (int j = 0; j < LT__XQ_BLOCK; j++) {
                long v = lrintf(xb[j] * inv); /* |v| <= 127 as for int16 */
                qb[j] = (int8_t)(v > LT__XQ8_MAX ? LT__XQ8_MAX
                                 : v < -LT__XQ8_MAX ? -LT__XQ8_MAX
                                                    : v);
            }
        }
        for (int l = 0; l < LT__XQ8_LANES; l++)
            bias[b * LT__XQ8_LANES + l] =
                -128 * (qb[4 * l] + qb[4 * l + 1] + qb[4 * l + 2] + qb[4 * l + 3]);
    }
}

/* ---- per-thread cache ------------------------------------------------------ */

typedef void (*xq_any_fn)(void); /* either quantiser's type, as a cache key */

typedef struct {
    const lt_call *call; /* key: the node ... */
    const float *x;      /* ... its x (of n tokens) ... */
    int64_t n;
    uint64_t seq;        /* ... and the execution (0: nothing cached) ... */
    xq_any_fn quant;     /* ... by which quantiser (int16 and int8 layouts differ) */
    char *buf;           /* the layout of that quantiser */
    size_t cap;
} xq_cache;

static _Thread_local xq_cache tl_xq;
static pthread_key_t xq_key; /* its destructor frees a thread's buffer at exit */
static pthread_once_t xq_once = PTHREAD_ONCE_INIT;

static void xq_free(void *p) { lt_aligned_free(p); }
static void xq_make_key(void) { LT_ASSERT(pthread_key_create(&xq_key, xq_free) == 0); }

bool lt__tl_reserve(char **buf, size_t *cap, size_t bytes, pthread_once_t *once,
                    pthread_key_t *key, void (*make_key)(void)) {
    if (bytes <= *cap) return true;
    pthread_once(once, make_key);
    size_t n = (bytes + 4095) & ~(size_t)4095;
    char *p = lt_aligned_alloc(LT_CACHE_LINE, n);
    if (!p) return false;
    lt_aligned_free(*buf);
    *buf = p;
    *cap = n;
    pthread_setspecific(*key, p);
    return true;
}

/* This thread's buffer of at least `bytes` for (call, x, n, seq, quant);
 * *fill is true if the caller must (re)compute its content (the key is then
 * already recorded). NULL if out of memory (nothing is cached then). */
static char *xq_slot(const lt_call *call, const lt_step *step, const float *x, int64_t n,
                     xq_any_fn quant, size_t bytes, bool *fill) {
    xq_cache *c = &tl_xq;
    const uint64_t seq = step ? step->seq : 0;
    *fill = seq == 0 || c->seq != seq || c->call != call || c->x != x || c->n != n ||
            c->quant != quant;
    if (!*fill) return c->buf;
    if (!lt__tl_reserve(&c->buf, &c->cap, bytes, &xq_once, &xq_key, xq_make_key)) {
        c->seq = 0;
        return NULL;
    }
    c->call = call;
    c->x = x;
    c->n = n;
    c->seq = seq;
    c->quant = quant;
    return c->buf;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool lt__xq_get(const lt_call *call, const lt_step *step, const float *x, lt__xq_quant_fn quant,
                const int16_t **q, const float **s) {
    const int64_t n = call->op[2]->ne[0], nblk = n / LT__XQ_BLOCK;
    const size_t qbytes = round_up((size_t)n * sizeof(int16_t), 64);
    const size_t sbytes = round_up((size_t)nblk, 16) * sizeof(float);
    bool fill;
    char *buf = xq_slot(call, step, x, 1, (xq_any_fn)quant, qbytes + sbytes, &fill);
    if (!buf) return false;
    float *sv = (float *)(buf + qbytes);
    if (fill) {
        quant(x, n, (int16_t *)buf, sv);
        memset(sv + nblk, 0, sbytes - (size_t)nblk * sizeof(float));
    }
    *q = (const int16_t *)buf;
    *s = sv;
    return true;
}

/* One token's x quantised into buf in lt__xq8_get's layout, padding zeroed:
 * the padding is read (the missing half of a row's last block pair, the
 * masked tail of its scales) and must not hold stale values. */
static void xq8_fill(const float *x, int64_t n, lt__xq8_quant_fn quant, char *buf,
                     size_t qbytes, size_t sbytes, size_t bbytes) {
    memset(buf, 0, qbytes + sbytes + bbytes);
    quant(x, n, (int8_t *)buf, (float *)(buf + qbytes), (int32_t *)(buf + qbytes + sbytes));
}

static void xq8_sizes(int64_t n, size_t *qbytes, size_t *sbytes, size_t *bbytes) {
    const int64_t nblk = n / LT__XQ_BLOCK;
    *qbytes = round_up((size_t)n, 64);
    *sbytes = round_up((size_t)nblk, 16) * sizeof(float);
    *bbytes = round_up((size_t)nblk * LT__XQ8_LANES, 16) * sizeof(int32_t);
}

bool lt__xq8_get(const lt_call *call, const lt_step *step, const float *x, lt__xq8_quant_fn quant,
                 const int8_t **q, const float **s, const int32_t **bias) {
    const int64_t n = call->op[2]->ne[0];
    size_t qbytes, sbytes, bbytes;
    xq8_sizes(n, &qbytes, &sbytes, &bbytes);
    bool fill;
    char *buf = xq_slot(call, step, x, 1, (xq_any_fn)quant, qbytes + sbytes + bbytes, &fill);
    if (!buf) return false;
    if (fill) xq8_fill(x, n, quant, buf, qbytes, sbytes, bbytes);
    *q = (const int8_t *)buf;
    *s = (const float *)(buf + qbytes);
    *bias = (const int32_t *)(buf + qbytes + sbytes);
    return true;
}

const char *lt__xq8_tokens_get(const lt_call *call, const lt_step *step, lt__xq8_quant_fn quant,
                               size_t *per_tok, size_t *s_off, size_t *b_off) {
    const lt_tensor *X = call->op[2];
    const int64_t n = X->ne[0], tokens = X->ne[1];
    size_t qbytes, sbytes, bbytes;
    xq8_sizes(n, &qbytes, &sbytes, &bbytes);
    const size_t pt = qbytes + sbytes + bbytes;
    bool fill;
    char *buf = xq_slot(call, step, X->data, tokens, (xq_any_fn)quant, pt * (size_t)tokens, &fill);
    if (!buf) return NULL;
    if (fill)
        for (int64_t i = 0; i < tokens; i++)
            xq8_fill((const float *)((const char *)X->data + (size_t)i * X->nb[1]), n, quant,
                     buf + (size_t)i * pt, qbytes, sbytes, bbytes);
    *per_tok = pt;
    *s_off = qbytes;
    if (b_off) *b_off = qbytes + sbytes;
    return buf;
}
