/* matvec with int16 activations: the portable quantiser of x and the
 * per-thread cache that lets a thread quantise x once per node and step,
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

/* ---- per-thread cache ------------------------------------------------------ */

typedef struct {
    const lt_call *call; /* key: the node ... */
    const float *x;      /* ... its x ... */
    uint64_t seq;        /* ... and the execution (0: nothing cached) */
    lt__xq_quant_fn quant;
    char *buf; /* q then s */
    size_t cap;
} xq_cache;

static _Thread_local xq_cache tl_xq;
static pthread_key_t xq_key; /* its destructor frees a thread's buffer at exit */
static pthread_once_t xq_once = PTHREAD_ONCE_INIT;

static void xq_free(void *p) { lt_aligned_free(p); }
static void xq_make_key(void) { LT_ASSERT(pthread_key_create(&xq_key, xq_free) == 0); }

bool lt__xq_get(const lt_call *call, const lt_step *step, lt__xq_quant_fn quant,
                const int16_t **q, const float **s) {
    xq_cache *c = &tl_xq;
    const float *x = call->op[2]->data;
    const int64_t n = call->op[2]->ne[0], nblk = n / LT__XQ_BLOCK;
    const size_t qbytes = ((size_t)n * sizeof(int16_t) + 63) & ~(size_t)63;
    const size_t sbytes = (size_t)(nblk + 15) / 16 * 16 * sizeof(float);
    const uint64_t seq = step ? step->seq : 0;
    if (seq == 0 || c->seq != seq || c->call != call || c->x != x || c->quant != quant) {
        if (qbytes + sbytes > c->cap) {
            pthread_once(&xq_once, xq_make_key);
            size_t cap = (qbytes + sbytes + 4095) & ~(size_t)4095;
            char *p = lt_aligned_alloc(LT_CACHE_LINE, cap);
            if (!p) return false;
            lt_aligned_free(c->buf);
            c->buf = p;
            c->cap = cap;
            pthread_setspecific(xq_key, p);
        }
        float *sv = (float *)(c->buf + qbytes);
        quant(x, n, (int16_t *)c->buf, sv);
        memset(sv + nblk, 0, sbytes - (size_t)nblk * sizeof(float));
        c->call = call;
        c->x = x;
        c->seq = seq;
        c->quant = quant;
    }
    *q = (const int16_t *)c->buf;
    *s = (const float *)(c->buf + qbytes);
    return true;
}
