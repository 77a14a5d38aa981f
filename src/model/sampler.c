/* Token sampler: greedy argmax, or softmax at a temperature with optional
 * nucleus (top-p) truncation, drawing from a seeded xorshift64* generator. */
#include "looptune/model.h"

#include <math.h>
#include <stdlib.h>

/* xorshift64* must not start from 0 (it would stay there). */
#define SEED_FOR_ZERO 0x9e3779b97f4a7c15ull

typedef struct {
    float p;
    int32_t id;
} prob_id;

struct lt_sampler {
    int64_t n;       /* vocabulary size */
    float temp;      /* 0 = greedy */
    float top_p;     /* 1 = no truncation */
    uint64_t state;  /* xorshift64* state, never 0 */
    prob_id *cands;  /* [n] scratch for top-p */
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

static int32_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i; /* strict: lowest id wins ties */
    return (int32_t)best;
}

/* In place: x becomes softmax(x / temp). */
static void softmax_temp(float *x, int64_t n, float temp) {
    float mx = x[argmax(x, n)];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf((x[i] - mx) / temp);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
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

/* The nucleus order: probability descending, then id ascending (total). */
static bool before(prob_id a, prob_id b) { return a.p != b.p ? a.p > b.p : a.id < b.id; }

/* The k first of c[0..m) in that order, for the smallest k whose
 * probabilities sum to >= target, or k = m if they
 * never do: reorders c so that those are c[0..k) (in no particular order,
 * except that c[k - 1] is the k-th) and returns k; *sum is their sum.
 * Quickselect on the running sum: linear time, where sorting a near-uniform
 * distribution (a random model's: the nucleus holds most of the vocabulary)
 * cost milliseconds per token. */
static int64_t select_prefix(prob_id *c, int64_t m, double target, double *sum) {
    int64_t lo = 0, hi = m; /* c[0..lo) are in the prefix; k lies in (lo, hi] */
    double acc = 0.0;       /* their sum, which has not reached target */
    while (hi - lo > 1) {
        prob_id t = c[lo + (hi - lo) / 2];
        c[lo + (hi - lo) / 2] = c[hi - 1];
        c[hi - 1] = t;
        int64_t i = lo;
        double sb = 0.0;
        for (int64_t j = lo; j < hi - 1; j++)
            if (before(c[j], t)) {
                sb += c[j].p;
                prob_id x = c[i];
                c[i++] = c[j];
                c[j] = x;
            }
        c[hi - 1] = c[i];
        c[i] = t; /* the pivot at its sorted place */
        double with_before = acc + sb, with_pivot = with_before + t.p;
        if (with_before >= target) {
            hi = i;
        } else if (with_pivot >= target) {
            *sum = with_pivot;
            return i + 1;
        } else {
            acc = with_pivot;
            lo = i + 1;
        }
    }
    if (lo < hi) acc += c[lo].p; /* the one left: the k-th */
    *sum = acc;
    return hi;
}

static int32_t sample_top_p(lt_sampler *s, const float *probs) {
    /* Tokens with p < (1 - top_p) / (n - 1) cannot be in the nucleus: as
     * long as the most probable token is kept, at most n - 1 are dropped and
     * together they hold less than 1 - top_p, so the kept ones reach top_p
     * first. Dropping them shortens the selection. */
    float cutoff = s->n > 1 ? (1.0f - s->top_p) / (float)(s->n - 1) : 0.0f;
    int32_t best = argmax(probs, s->n);
    int64_t m = 0;
    for (int64_t i = 0; i < s->n; i++)
        if (probs[i] >= cutoff || i == best) s->cands[m++] = (prob_id){probs[i], (int32_t)i};
    /* the nucleus: the smallest most-probable prefix reaching top_p */
    double cum;
    int64_t keep = select_prefix(s->cands, m, s->top_p, &cum);
    /* any fixed order of the nucleus draws each token with probability
     * p / cum: the selection's order, one pass */
    double r = (double)next_f32(s) * cum, c = 0.0;
    for (int64_t i = 0; i < keep; i++) {
        c += s->cands[i].p;
        if (r < c) return s->cands[i].id;
    }
    return s->cands[keep - 1].id; /* rounding left r at the very top */
}

/* Picks the next token. logits [n] are overwritten with probabilities
 * unless the sampler is greedy. */
int32_t lt_sampler_sample(lt_sampler *s, float *logits) {
    if (s->temp == 0.0f) return argmax(logits, s->n);
    softmax_temp(logits, s->n, s->temp);
    if (s->top_p < 1.0f) return sample_top_p(s, logits);
    return draw(logits, s->n, 1.0, next_f32(s));
}
