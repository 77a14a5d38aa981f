/* The sampler's cost per row: lt_sampler_sample (with lt_sampler_accept, as
 * the batcher and lt_generate call them) on rows of VOCAB logits drawn
 * uniformly from [-3, 3] (a random-weight model's kind: near-uniform, the
 * nucleus holds most of the vocabulary), for greedy, temperature alone,
 * top-p, top-k and the three with a repetition penalty. The row is copied
 * in before every call (the sampler overwrites it); the copy's own time is
 * subtracted. min/median/max of the per-call mean over BATCHES batches.
 *
 * usage: bench_sampler [vocab [calls_per_batch]]   (defaults 32000, 200) */
#include "looptune/core.h"
#include "looptune/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 11

int main(int argc, char **argv) {
    const int64_t n = argc > 1 ? atoll(argv[1]) : 32000;
    const int calls = argc > 2 ? atoi(argv[2]) : 200;
    if (n < 2 || calls < 1) {
        fprintf(stderr, "usage: bench_sampler [vocab >= 2 [calls_per_batch >= 1]]\n");
        return 1;
    }
    float *row = malloc((size_t)n * sizeof *row), *x = malloc((size_t)n * sizeof *x);
    if (!row || !x) return 1;
    uint64_t r = 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        row[i] = (float)(r >> 40) * (6.0f / 16777216.0f) - 3.0f;
    }
    const struct {
        const char *name;
        float temp, top_p, pen;
        int32_t top_k;
    } cases[] = {
        {"greedy", 0.0f, 1.0f, 1.0f, 0},
        {"temperature 0.8", 0.8f, 1.0f, 1.0f, 0},
        {"temperature 0.8, top-p 0.9", 0.8f, 0.9f, 1.0f, 0},
        {"temperature 0.8, top-k 40", 0.8f, 1.0f, 1.0f, 40},
        {"top-k 40, top-p 0.9, penalty 1.1", 0.8f, 0.9f, 1.1f, 40},
    };
    printf("# %lld logits per row, %d calls per batch, %d batches; us per call\n", (long long)n,
           calls, BATCHES);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        lt_sampler_opts o = lt_sampler_defaults();
        o.temp = cases[c].temp, o.top_p = cases[c].top_p, o.top_k = cases[c].top_k;
        o.repeat_penalty = cases[c].pen, o.seed = 7;
        lt_sampler *s;
        if (lt_sampler_init_opts(&s, n, &o)) return 1;
        double us[BATCHES];
        for (int b = 0; b < BATCHES; b++) {
            uint64_t t0 = lt_now_ns();
            for (int k = 0; k < calls; k++) {
                memcpy(x, row, (size_t)n * sizeof *x);
                lt_sampler_accept(s, lt_sampler_sample(s, x));
            }
            uint64_t t1 = lt_now_ns();
            for (int k = 0; k < calls; k++) {
                memcpy(x, row, (size_t)n * sizeof *x);
                __asm__ volatile("" : : "r"(x) : "memory"); /* the copy is not dropped */
            }
            uint64_t t2 = lt_now_ns();
            us[b] = ((double)(t1 - t0) - (double)(t2 - t1)) * 1e-3 / calls;
        }
        lt_summary sm = lt_summarize(us, BATCHES);
        printf("%-36s min %8.1f  median %8.1f  max %8.1f\n", cases[c].name, sm.min, sm.median,
               sm.max);
        lt_sampler_free(s);
    }
    free(row);
    free(x);
    return 0;
}
