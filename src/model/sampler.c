/* Token sampler: greedy argmax, or softmax at a temperature with optional
 * nucleus (top-p) truncation, drawing from a seeded xorshift64* generator. */
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
    float temp;      /* 0 = greedy */
    float top_p;     /* 1 = no truncation */
    uint64_t state;  /* xorshift64* state, never 0 */
    prob_id *cands;  /* [n] scratch for top-p */
    double hist[4][LT__NUCLEUS_RADIX]; /* top-p's bucket sums */
};

int lt_sampler_init(lt_sampler **out, int64_t vocab_size, float temp, float top_p,
                    uint64_t seed) {
    if (!out) return lt_error(LT_EINVAL, "sampler: NULL argument");
    *out = NULL;
    if (vocab_size <= 0 || vocab_size > INT32_MAX)
        return lt_error(LT_EINVAL, "sampler: vocabulary size %lld out of range",
                        (long long)vocab_size);
    if (!(temp >= 0.0f) || isinf(temp))
        return lt_error(LT_EINVAL, "sampler: temperature %g must be finite and >= 0",
                        (double)temp);
    if (!(top_p > 0.0f && top_p <= 1.0f))
        return lt_error(LT_EINVAL, "sampler: top_p %g must lie in (0, 1]", (double)top_p);
    lt_sampler *s = calloc(1, sizeof *s);
    if (s) s->cands = malloc((size_t)vocab_size * sizeof *s->cands);
    if (!s || !s->cands) {
        free(s);
        return lt_error(LT_ENOMEM, "sampler: out of memory for %lld candidates",
                        (long long)vocab_size);
    }
    s->n = vocab_size;
    s->temp = temp;
    s->top_p = top_p;
    s->state = seed ? seed : SEED_FOR_ZERO;
    *out = s;
    return LT_OK;
}

void lt_sampler_free(lt_sampler *s) {
    if (!s) return;
    free(s->cands);
    free(s);
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

/* The largest value of x[0..n), NaNs skipped; -INFINITY if there is none. */
static float max_of(const float *x, int64_t n) {
    float m[LANES];
    for (int l = 0; l < LANES; l++) m[l] = -INFINITY;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
    for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
    float mx = m[0];
    for (int l = 1; l < LANES; l++) mx = m[l] > mx ? m[l] : mx;
    return mx;
}

/* The lowest id of the largest logit (NaNs skipped; 0 if all are NaN). */
static int32_t argmax(const float *x, int64_t n) {
    const float mx = max_of(x, n);
    for (int64_t i = 0; i < n; i++)
        if (x[i] == mx) return (int32_t)i;
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

static int32_t sample_top_p(lt_sampler *s, const float *probs, int32_t best) {
    /* Tokens with p < (1 - top_p) / (n - 1) cannot be in the nucleus: as
     * long as the most probable token is kept, at most n - 1 are dropped and
     * together they hold less than 1 - top_p, so the kept ones reach top_p
     * first. Dropping them shortens the selection. */
    const float cutoff = s->n > 1 ? (1.0f - s->top_p) / (float)(s->n - 1) : 0.0f;
    const double target = s->top_p;
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
    int64_t last_id = -1;
    double cum = above;
    for (int64_t j = 0; j < m && cum < target; j++) {
        cum += c[j].p;
        last_id = c[j].id;
    }
    /* any fixed order of the nucleus draws each token with probability
     * p / cum: id order */
    const double r = (double)next_f32(s) * cum;
    double cdf = 0.0;
    int64_t last = best;
    for (int64_t i = 0; i < s->n; i++) {
        const uint32_t b = bits_of(probs[i]);
        if ((b > v || (b == v && i <= last_id)) && candidate(probs, i, cutoff, best)) {
            cdf += probs[i];
            last = i;
            if (r < cdf) return (int32_t)i;
        }
    }
    return (int32_t)last; /* rounding left r at the very top */
}

/* Picks the next token. logits [n] are overwritten with probabilities
 * unless the sampler is greedy. */
int32_t lt_sampler_sample(lt_sampler *s, float *logits) {
    if (s->temp == 0.0f) return argmax(logits, s->n);
    int32_t best;
    if (!softmax_temp(logits, s->n, s->temp, &best)) return best; /* no distribution: greedy */
    if (s->top_p < 1.0f) return sample_top_p(s, logits, best);
    return draw(logits, s->n, 1.0, next_f32(s));
}
