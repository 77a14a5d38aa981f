/* Weights resident in anonymous memory backed by transparent huge pages,
 * laid out in the order decode streams them. A file mapping has 4 KiB
 * pages: the hardware prefetcher stops at every page boundary and every
 * page costs a TLB miss, which keeps decode well below the bandwidth a
 * plain sequential read reaches. 2 MiB pages remove both. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model/model_internal.h"

#define HUGE_PAGE (2u << 20)

typedef struct {
    void *base;
    size_t bytes;
} resident_region;

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* The weight matrices in decode order: each layer's projections as the
 * program calls them, then the classifier, then the embedding table. */
static int collect(lt_model *m, lt_tensor **list, int cap) {
    int n = 0;
    for (int64_t l = 0; l < m->cfg.n_layers; l++) {
        lt_llama_layer *y = &m->layers[l];
        lt_tensor *t[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
        for (size_t k = 0; k < sizeof t / sizeof t[0] && n < cap; k++) list[n++] = t[k];
    }
    if (n < cap) list[n++] = &m->output;
    if (n < cap && m->tok_embd.data != m->output.data) list[n++] = &m->tok_embd;
    return n;
}

int lt_model_make_resident(lt_model *m) {
    lt__model_priv *p = m->priv;
    if (p->resident) return LT_OK;
    int cap = (int)(m->cfg.n_layers * 7 + 2);
    lt_tensor **list = malloc((size_t)cap * sizeof *list);
    if (!list) return lt_error(LT_ENOMEM, "out of memory");
    int n = collect(m, list, cap);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += align_up(lt_tensor_nbytes(list[i]), LT_CACHE_LINE);
    size_t bytes = align_up(total, HUGE_PAGE) + HUGE_PAGE; /* room to align the start */
    char *raw = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        free(list);
        return lt_error(LT_ENOMEM, "cannot allocate %zu bytes for the weights", bytes);
    }
    char *base = (char *)align_up((size_t)raw, HUGE_PAGE);
#ifdef MADV_HUGEPAGE
    madvise(base, bytes - (size_t)(base - raw), MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
    bool tied = m->output.data == m->tok_embd.data;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t sz = lt_tensor_nbytes(list[i]);
        memcpy(base + off, list[i]->data, sz);
        list[i]->data = base + off;
        off += align_up(sz, LT_CACHE_LINE);
    }
    if (tied) m->tok_embd.data = m->output.data;
    free(list);
    p->resident = raw;
    p->resident_bytes = bytes;
    return LT_OK;
}
