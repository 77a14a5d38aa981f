/* Random numbers of the samplers: xoshiro256** seeded through splitmix64,
 * uniform and normal variates, and Halton's low-discrepancy sequence for
 * the quasi-random first trials. */
#include <math.h>
#include <stdlib.h>

#include "hpo/hpo_internal.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void lt_hpo_rng_seed(lt_hpo_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t lt_hpo_rng_next(lt_hpo_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double lt_hpo_rng_uniform(lt_hpo_rng *r) { return (double)(lt_hpo_rng_next(r) >> 11) * 0x1p-53; }

double lt_hpo_rng_normal(lt_hpo_rng *r) {
    /* Box-Muller; u1 in (0, 1] so the log is finite. */
    double u1 = 1.0 - lt_hpo_rng_uniform(r), u2 = lt_hpo_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double lt_hpo_halton(uint64_t index, int base) {
    double f = 1.0, x = 0.0;
    while (index > 0) {
        f /= base;
        x += f * (double)(index % (uint64_t)base);
        index /= (uint64_t)base;
    }
    return x;
}

/* The first primes, one Halton base per dimension (dimensions beyond them
 * reuse bases, shifted differently). */
static const int primes[] = {2,  3,  5,  7,  11, 13, 17, 19, 23, 29, 31, 37, 41,
                             43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97};

void lt__hpo_quasi_point(const lt_hpo_space *s, uint64_t i, const double *shift, double *values) {
    int n = lt_hpo_space_size(s);
    double *u = malloc((size_t)n * sizeof *u);
    LT_ASSERT(u);
    for (int d = 0; d < n; d++) {
        double x = lt_hpo_halton(i + 1, primes[d % (int)(sizeof primes / sizeof *primes)]) +
                   shift[d];
        u[d] = x - floor(x);
    }
    lt_hpo_space_decode(s, u, values);
    free(u);
}
