/* Token sampler, in llama.cpp's order: repetition penalty over the last
 * tokens, then top-k, top-p (nucleus) and min-p on the penalised logits,
 * then the temperature, and a draw from a seeded xorshift64* generator
 * (temperature 0: the argmax of the penalised logits). */
#include "looptune/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* xorshift64* must not start from 0 (it would stay there). */
#define SEED_FOR_ZERO 0x9e3779b97f4a7c15ull

typedef struct {
    float p;
    int32_t id;
} prob_id;

/* top-p's radix selection: rounds, and buckets per round */
#define LT__NUCLEUS_LEVELS 3
#define LT__NUCLEUS_RADIX (1 << 11)

struct lt_sampler {
    int64_t n;       /* vocabulary size */
    lt_sampler_opts o;
    uint64_t state;  /* xorshift64* state, never 0 */
    prob_id *cands;  /* [n] scratch for top-p */
    float *work;     /* [n] the logits kept while top-p overwrites them with probabilities */
    double hist[4][LT__NUCLEUS_RADIX]; /* top-p's bucket sums */
    /* the repetition penalty's window: the last o.repeat_last_n tokens accepted */
    int32_t *recent;  /* [repeat_last_n] ring */
    int64_t n_recent, next_recent; /* entries held, slot of the next one */
    uint32_t *count;  /* [n] occurrences of each id in the window */
};

lt_sampler_opts lt_sampler_defaults(void) {
    return (lt_sampler_opts){.temp = 0.8f, .top_p = 0.9f, .top_k = 0, .min_p = 0.0f,
                             .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0};
}

int lt_sampler_init_opts(lt_sampler **out, int64_t vocab_size, const lt_sampler_opts *o) {
    if (!out || !o) return lt_error(LT_EINVAL, "sampler: NULL argument");
    *out = NULL;
    if (vocab_size <= 0 || vocab_size > INT32_MAX)
        return lt_error(LT_EINVAL, "sampler: vocabulary size %lld out of range",
                        (long long)vocab_size);
    if (!(o->temp >= 0.0f) || isinf(o->temp))
        return lt_error(LT_EINVAL, "sampler: temperature %g must be finite and >= 0",
                        (double)o->temp);
    if (!(o->top_p > 0.0f && o->top_p <= 1.0f))
        return lt_error(LT_EINVAL, "sampler: top_p %g must lie in (0, 1]", (double)o->top_p);
    if (o->top_k < 0) return lt_error(LT_EINVAL, "sampler: top_k %d must be >= 0", o->top_k);
    if (!(o->min_p >= 0.0f && o->min_p <= 1.0f))
        return lt_error(LT_EINVAL, "sampler: min_p %g must lie in [0, 1]", (double)o->min_p);
    if (!(o->repeat_penalty > 0.0f) || isinf(o->repeat_penalty))
        return lt_error(LT_EINVAL, "sampler: repeat penalty %g must be finite and > 0",
                        (double)o->repeat_penalty);
    if (o->repeat_last_n < 0)
        return lt_error(LT_EINVAL, "sampler: repeat_last_n %d must be >= 0", o->repeat_last_n);
    lt_sampler *s = calloc(1, sizeof *s);
    bool ok = s != NULL;
    if (ok) {
        s->cands = malloc((size_t)vocab_size * sizeof *s->cands);
        s->work = malloc((size_t)vocab_size * sizeof *s->work);
        ok = s->cands && s->work;
    }
    if (ok && o->repeat_last_n > 0) {
        s->recent = malloc((size_t)o->repeat_last_n * sizeof *s->recent);
        s->count = calloc((size_t)vocab_size, sizeof *s->count);
        ok = s->recent && s->count;
    }
    if (!ok) {
        lt_sampler_free(s);
        return lt_error(LT_ENOMEM, "sampler: out of memory for %lld candidates",
                        (long long)vocab_size);
    }
    s->n = vocab_size;
    s->o = *o;
    if (o->top_k >= vocab_size) s->o.top_k = 0; /* keeps everything: off */
    s->state = o->seed ? o->seed : SEED_FOR_ZERO;
    *out = s;
    return LT_OK;
}

int lt_sampler_init(lt_sampler **out, int64_t vocab_size, float temp, float top_p,
                    uint64_t seed) {
    lt_sampler_opts o = {.temp = temp, .top_p = top_p, .repeat_penalty = 1.0f, .seed = seed};
    return lt_sampler_init_opts(out, vocab_size, &o);
}

void lt_sampler_free(lt_sampler *s) {
    if (!s) return;
    free(s->cands);
    free(s->work);
    free(s->recent);
    free(s->count);
    free(s);
}

void lt_sampler_accept(lt_sampler *s, int32_t token) {
    const int64_t cap = s->o.repeat_last_n;
    if (cap == 0 || token < 0 || token >= s->n) return;
    if (s->n_recent == cap) s->count[s->recent[s->next_recent]]--; /* the oldest leaves */
    else s->n_recent++;
    s->recent[s->next_recent] = token;
    s->count[token]++;
    s->next_recent = (s->next_recent + 1) % cap;
}

void lt_sampler_reset(lt_sampler *s) {
    for (int64_t i = 0; i < s->n_recent; i++) s->count[s->recent[i]] = 0;
    s->n_recent = s->next_recent = 0;
}

static uint64_t next_u64(lt_sampler *s) {
    s->state ^= s->state >> 12;
    s->state ^= s->state << 25;
    s->state ^= s->state >> 27;
    return s->state * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, 1) from the top 24 bits: exactly representable floats. */
static float next_f32(lt_sampler *s) {
    return (float)(next_u64(s) >> 40) * (1.0f / 16777216.0f);
}

/* Lanes of the passes below: independent accumulators the compiler turns
 * into vector registers (a single running max or sum is a chain of
 * dependent instructions: 3-4 cycles per logit). */
#define LANES 16

/* The lowest id of the largest logit (NaNs skipped; 0 if all are NaN). One
 * pass: each lane keeps its largest value and the first id of it (a strict
 * >, so a later equal value does not replace it), then the lanes' maxima,
 * ties to the lowest id. A lane that saw only NaN and -inf has no id; if no
 * lane has one, the largest is -inf (or nothing): the first -inf, else 0,
 * found by a scan as before. */
static int32_t argmax(const float *x, int64_t n) {
    float m[LANES];
    int32_t id[LANES];
    for (int l = 0; l < LANES; l++) m[l] = -INFINITY, id[l] = -1;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) {
            const bool gt = x[i + l] > m[l];
            m[l] = gt ? x[i + l] : m[l];
            id[l] = gt ? (int32_t)(i + l) : id[l];
        }
    for (; i < n; i++)
        if (x[i] > m[0]) m[0] = x[i], id[0] = (int32_t)i;
    int32_t best = -1;
    float mx = -INFINITY;
    for (int l = 0; l < LANES; l++)
        if (id[l] >= 0 && (m[l] > mx || (m[l] == mx && id[l] < best))) mx = m[l], best = id[l];
    if (best >= 0) return best;
    for (i = 0; i < n; i++)
        if (x[i] == -INFINITY) return (int32_t)i;
    return 0;
}

/* e^t for t <= 0 within 1.1e-7 relative (every float in [-87, 0] checked
 * against exp in double); 0 below -87 (near where e^t leaves
 * the normal floats) and for NaN (a NaN logit is never drawn). t = k ln 2 +
 * y with k an integer and |y| <= ln 2 / 2: 2^k is built in the exponent
 * bits, e^y by its Taylor series to degree 7, and y = t - k ln 2 with ln 2
 * in two parts (the first exact in k ln 2), so the error does not grow with
 * |t|. Straight-line float arithmetic, so a loop over it vectorises, where
 * libm's expf is a call per logit. exp(0) is exactly 1. */
static inline float exp_nonpos(float t) {
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float tc = t < -87.0f ? -87.0f : t;
    const float zr = tc * 1.44269504f + magic;
    uint32_t zb;
    memcpy(&zb, &zr, sizeof zb);
    const float kf = zr - magic;
    const float y = (tc - kf * 0.693359375f) + kf * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * y + 1.0f / 720.0f;
    p = p * y + 1.0f / 120.0f;
    p = p * y + 1.0f / 24.0f;
    p = p * y + 1.0f / 6.0f;
    p = p * y + 0.5f;
    p = p * y + 1.0f;
    p = p * y + 1.0f;
    /* 2^k: the rounded integer k (-126..0) sits in zr's low bits */
    const uint32_t sb = (zb - 0x4b400000u + 127u) << 23;
    float scale;
    memcpy(&scale, &sb, sizeof scale);
    return t >= -87.0f ? p * scale : 0.0f; /* NaN: 0 as well */
}

/* In place: x becomes softmax(x / temp), unless its largest logit is not
 * finite (nothing to normalise: x is left as it is). *best = that logit's
 * id; returns whether x was normalised. */
static bool softmax_temp(float *x, int64_t n, float temp, int32_t *best) {
    *best = argmax(x, n);
    const float mx = x[*best];
    if (!isfinite(mx)) return false;
    /* a division, not a multiplication by 1 / temp: the largest logit's
     * argument stays 0 even for a temperature whose inverse is infinite */
    for (int64_t i = 0; i < n; i++) x[i] = exp_nonpos((x[i] - mx) / temp);
    double sum[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) sum[l] += x[i + l];
    for (; i < n; i++) sum[0] += x[i];
    double total = 0.0;
    for (int l = 0; l < LANES; l++) total += sum[l];
    const float inv = (float)(1.0 / total);
    for (i = 0; i < n; i++) x[i] *= inv;
    return true;
}

/* Draws index i with probability p[i] / total, given u in [0, 1). */
static int32_t draw(const float *p, int64_t n, double total, float u) {
    double r = (double)u * total, cdf = 0.0;
    int64_t last = 0;
    for (int64_t i = 0; i < n; i++) {
        if (p[i] <= 0.0f) continue;
        cdf += p[i];
        last = i;
        if (r < cdf) return (int32_t)i;
    }
    return (int32_t)last; /* rounding left r at the very top */
}

/* A probability's bits: for p >= 0 they order as the values do. */
static inline uint32_t bits_of(float p) {
    uint32_t b;
    memcpy(&b, &p, sizeof b);
    return b;
}

/* The nucleus by radix selection on the bits of the probabilities: three
 * rounds, each bucketing the candidates still undecided by their next bits
 * (sign, exponent and 2 mantissa bits, then 11, then 10) with each bucket's
 * sum, and walking the buckets from the top until the sum reaches top_p.
 * What is left are the candidates of the boundary value, taken in id order.
 * Quickselect did the same with pairwise comparisons and swaps, and on a
 * near-uniform distribution (a random model's: the nucleus holds most of
 * the vocabulary) that cost more than a small model's whole token. */
static const int level_shift[LT__NUCLEUS_LEVELS] = {21, 10, 0};

/* Whether token i may be in the nucleus at all (see the cutoff below). */
static inline bool candidate(const float *probs, int64_t i, float cutoff, int32_t best) {
    return probs[i] >= cutoff || i == best;
}

/* The bucket of bits b at a level whose digit is `width` bits from `sh`. */
#define DIGIT(b, sh, width) (((b) >> (sh)) & ((1u << (width)) - 1u))

/* The nucleus of probs (which sum to 1): token i is in it iff
 * in_nucleus(probs, i, ...) with the boundary value *v and *last_id. */
typedef struct {
    float cutoff;    /* below it no token can be in the nucleus */
    uint32_t v;      /* the boundary probability's bits */
    int64_t last_id; /* the last id of value v in it (-1: none) */
    int32_t best;    /* the most probable token, always in it */
} nucleus;

static inline bool in_nucleus(const nucleus *nc, const float *probs, int64_t i) {
    const uint32_t b = bits_of(probs[i]);
    return (b > nc->v || (b == nc->v && i <= nc->last_id)) &&
           candidate(probs, i, nc->cutoff, nc->best);
}

static nucleus find_nucleus(lt_sampler *s, const float *probs, int32_t best) {
    /* Tokens with p < (1 - top_p) / (n - 1) cannot be in the nucleus: as
     * long as the most probable token is kept, at most n - 1 are dropped and
     * together they hold less than 1 - top_p, so the kept ones reach top_p
     * first. Dropping them shortens the selection. */
    const float cutoff = s->n > 1 ? (1.0f - s->o.top_p) / (float)(s->n - 1) : 0.0f;
    const double target = s->o.top_p;
    prob_id *c = s->cands;
    int64_t m = 0;
    /* v: the boundary value, its bits decided from the top; above: the sum
     * of the candidates greater than every value with v's decided bits */
    uint32_t v = 0, decided = 0;
    double above = 0.0;
    for (int lv = 0; lv < LT__NUCLEUS_LEVELS; lv++) {
        const int sh = level_shift[lv], width = (lv ? level_shift[lv - 1] : 32) - sh;
        const uint32_t top = (1u << width) - 1u;
        /* four interleaved histograms: consecutive tokens of one bucket
         * (all of them, near-uniform) do not wait for each other's add */
        double(*h)[LT__NUCLEUS_RADIX] = s->hist;
        memset(h, 0, sizeof s->hist);
        if (lv == 0) {
            for (int64_t i = 0; i < s->n; i++)
                if (candidate(probs, i, cutoff, best))
                    h[i & 3][DIGIT(bits_of(probs[i]), sh, width)] += probs[i];
        } else {
            for (int64_t j = 0; j < m; j++) h[j & 3][DIGIT(bits_of(c[j].p), sh, width)] += c[j].p;
        }
        uint32_t b = top;
        for (;; b--) {
            const double hb = h[0][b] + h[1][b] + h[2][b] + h[3][b];
            if (b == 0 || above + hb >= target) break;
            above += hb;
        }
        v |= b << sh;
        decided |= top << sh;
        /* keep the boundary bucket's candidates, in id order */
        int64_t k = 0;
        if (lv == 0) {
            for (int64_t i = 0; i < s->n; i++)
                if ((bits_of(probs[i]) & decided) == v && candidate(probs, i, cutoff, best))
                    c[k++] = (prob_id){probs[i], (int32_t)i};
        } else {
            for (int64_t j = 0; j < m; j++)
                if ((bits_of(c[j].p) & decided) == v) c[k++] = c[j];
        }
        m = k;
    }
    /* c[0..m): the candidates equal to v, in id order; the nucleus holds
     * those up to the one that reaches top_p (all if rounding left the sum
     * short) and every candidate above v */
    nucleus nc = {.cutoff = cutoff, .v = v, .last_id = -1, .best = best};
    double cum = above;
    for (int64_t j = 0; j < m && cum < target; j++) {
        cum += c[j].p;
        nc.last_id = c[j].id;
    }
    return nc;
}

/* Repetition penalty (llama.cpp's): every id in the window, however often,
 * has its logit divided by the penalty if positive, multiplied if not. */
#define COUNT_MARK 0x80000000u
static void penalize(lt_sampler *s, float *x) {
    const float r = s->o.repeat_penalty;
    if (r == 1.0f || s->n_recent == 0) return;
    for (int64_t j = 0; j < s->n_recent; j++) {
        const int32_t id = s->recent[j];
        if (s->count[id] & COUNT_MARK) continue; /* an earlier entry of the same id did it */
        x[id] = x[id] <= 0.0f ? x[id] * r : x[id] / r;
        s->count[id] |= COUNT_MARK; /* cleared below */
    }
    for (int64_t j = 0; j < s->n_recent; j++) s->count[s->recent[j]] &= ~COUNT_MARK;
}

/* The k-th largest of x[0..n) by quickselect with three-way partitions
 * (many equal logits cost nothing), on a copy in w; NaN counts as -inf. */
static float kth_largest(const float *x, float *w, int64_t n, int64_t k) {
    for (int64_t i = 0; i < n; i++) w[i] = isnan(x[i]) ? -INFINITY : x[i];
    int64_t lo = 0, hi = n; /* the answer is the (k-1)-th of w[lo..hi) in descending order */
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (;;) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        const float piv = w[lo + (int64_t)(r % (uint64_t)(hi - lo))];
        /* [lo, gt) > piv, [gt, i) == piv, [lt_, hi) < piv */
        int64_t gt = lo, i = lo, lt_ = hi;
        while (i < lt_) {
            if (w[i] > piv) {
                float t = w[i]; w[i] = w[gt]; w[gt] = t;
                gt++, i++;
            } else if (w[i] < piv) {
                lt_--;
                float t = w[i]; w[i] = w[lt_]; w[lt_] = t;
            } else {
                i++;
            }
        }
        if (k - 1 < gt - lo) hi = gt;
        else if (k - 1 < i - lo) return piv;
        else k -= i - lo, lo = i;
    }
}

/* Restores the min-heap order of h[0..k) below node i. */
static void sift_down(float *h, int64_t k, int64_t i) {
    const float v = h[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= k) break;
        if (c + 1 < k && h[c + 1] < h[c]) c++;
        if (!(h[c] < v)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

/* The same value as kth_largest, for a small k: a min-heap in w[0..k) of
 * the k largest seen so far (with repeats: the multiset quickselect orders),
 * one pass over x in which most values are below the heap's least and only
 * compared with it. NaN counts as -inf: in the first k it is stored as -inf,
 * after them it is never greater than the least. */
static float kth_largest_heap(const float *x, float *w, int64_t n, int64_t k) {
    for (int64_t i = 0; i < k; i++) w[i] = isnan(x[i]) ? -INFINITY : x[i];
    for (int64_t i = k / 2; i-- > 0;) sift_down(w, k, i);
    for (int64_t i = k; i < n; i++)
        if (x[i] > w[0]) {
            w[0] = x[i];
            sift_down(w, k, 0);
        }
    return w[0];
}

/* Up to this k, the heap (n compares and about k ln(n / k) insertions on
 * logits in no particular order); above, quickselect (a copy of the row and
 * a few passes over it), which does not grow with k. */
#define TOP_K_HEAP_MAX 1024

/* top-k: keeps the k largest logits (of equal ones at the boundary, the
 * lowest ids), sets the rest to -inf. */
static void keep_top_k(lt_sampler *s, float *x) {
    const int64_t k = s->o.top_k;
    const float kth = k <= TOP_K_HEAP_MAX ? kth_largest_heap(x, s->work, s->n, k)
                                          : kth_largest(x, s->work, s->n, k);
    int64_t above = 0;
    for (int64_t i = 0; i < s->n; i++) above += x[i] > kth;
    int64_t equal_left = k - above;
    for (int64_t i = 0; i < s->n; i++) {
        if (x[i] > kth) continue;
        if (x[i] == kth && equal_left > 0) equal_left--;
        else x[i] = -INFINITY;
    }
}

/* The draw's weights, in place: x becomes e^((x - max) / temp) on the tokens
 * top-k, top-p and min-p keep (top-p and min-p on the distribution at
 * temperature 1, as llama.cpp applies the temperature last) and 0 elsewhere.
 * *best = the largest logit's id; *total = the weights' sum. Returns false
 * (x then unspecified) if the largest logit is not finite: no distribution. */
static bool weigh(lt_sampler *s, float *x, int32_t *best, double *total) {
    if (s->o.top_k > 0) keep_top_k(s, x);
    *best = argmax(x, s->n);
    const float mx = x[*best], temp = s->o.temp;
    if (!isfinite(mx)) return false;
    /* min-p keeps p >= min_p * p_max, that is x >= max + ln(min_p) */
    const float min_x = s->o.min_p > 0.0f ? mx + logf(s->o.min_p) : -INFINITY;
    if (s->o.top_p < 1.0f) {
        memcpy(s->work, x, (size_t)s->n * sizeof *x);
        int32_t b;
        softmax_temp(x, s->n, 1.0f, &b); /* mx is finite: it normalises */
        const nucleus nc = find_nucleus(s, x, *best);
        /* a division, not a multiplication by 1 / temp: the largest logit's
         * argument stays 0 even for a temperature whose inverse is infinite */
        for (int64_t i = 0; i < s->n; i++)
            x[i] = in_nucleus(&nc, x, i) && s->work[i] >= min_x
                       ? exp_nonpos((s->work[i] - mx) / temp) : 0.0f;
    } else {
        for (int64_t i = 0; i < s->n; i++)
            x[i] = x[i] >= min_x ? exp_nonpos((x[i] - mx) / temp) : 0.0f;
    }
    double sum[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= s->n; i += LANES)
        for (int l = 0; l < LANES; l++) sum[l] += x[i + l];
    for (; i < s->n; i++) sum[0] += x[i];
    *total = 0.0;
    for (int l = 0; l < LANES; l++) *total += sum[l];
    return true;
}

int32_t lt_sampler_sample(lt_sampler *s, float *logits) {
    penalize(s, logits);
    if (s->o.temp == 0.0f) return argmax(logits, s->n);
    int32_t best;
    double total;
    if (!weigh(s, logits, &best, &total)) return best; /* no distribution: greedy */
    return draw(logits, s->n, total, next_f32(s));
}

void lt_sampler_probs(lt_sampler *s, float *logits) {
    penalize(s, logits);
    int32_t best;
    double total;
    if (s->o.temp == 0.0f || !weigh(s, logits, &best, &total)) {
        best = argmax(logits, s->n);
        for (int64_t i = 0; i < s->n; i++) logits[i] = i == best ? 1.0f : 0.0f;
        return;
    }
    for (int64_t i = 0; i < s->n; i++) logits[i] = (float)(logits[i] / total);
}
