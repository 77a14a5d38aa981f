/* Weights resident in anonymous memory backed by transparent huge pages,
 * laid out in the order decode streams them. A file mapping has 4 KiB
 * pages: the hardware prefetcher stops at every page boundary and every
 * page costs a TLB miss, which keeps decode well below the bandwidth a
 * plain sequential read reaches. 2 MiB pages remove both. */
#include <errno.h>
#include <stdio.h>
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

/* Whether t is interleaved (core.h): q8_0, q4_0 .. q5_1, q4_k and q6_k projections of
 * whole groups of 16 rows, on every ISA (qdot.h's sums are the same in both
 * layouts).
 * The vector dots then hold 16 (or 8) rows in a register and end a block
 * in one int32 per row; the embedding table (and a classifier tied to it)
 * stays plain for the lookup. */
static bool interleaves(const lt_model *m, const lt_tensor *t) {
    return lt_x16_has(t->dtype) && t->ne[1] % LT_X16_ROWS == 0 &&
           t->data != m->tok_embd.data && t->ne[2] == 1 && t->ne[3] == 1 &&
           t->nb[1] == lt_dtype_row_bytes(t->dtype, t->ne[0]);
}

/* Whether t is repacked split (core.h): q8_0 projections that do not
 * interleave (not whole groups of 16 rows) when the AVX-512 or AVX2 kernels
 * run. The AVX-512 int8 dot then reads a pair of blocks as
 * one cache line and a group's scales without a gather; the AVX2 one reads
 * aligned quants and 8 blocks' scales in one load. looptune bench, A/B of processes
 * in alternation, looped executor: 1B-shaped q8_0 at 2 threads 29.0-33.2
 * -> 30.2-34.6 tokens/s (11 of 11 pairs faster), at 1 thread 16.5-17.4 ->
 * 17.8-18.6 (6 of 6); stories15M q8_0 at 2 threads +2-8% (6 of 6);
 * stories110M q8_0, held in the last-level cache, within noise. Not the
 * embedding table, whose lookup reads plain blocks, nor a classifier tied
 * to it. */
static bool splits(const lt_model *m, const lt_tensor *t) {
    return t->dtype == LT_Q8_0 && !interleaves(m, t) && lt_isa_active() >= LT_ISA_AVX2 &&
           t->data != m->tok_embd.data && t->ne[2] == 1 && t->ne[3] == 1;
}

/* Bytes of t in the resident copy: split rows start on a cache line. */
static size_t resident_bytes(const lt_model *m, const lt_tensor *t) {
    if (!splits(m, t)) return lt_tensor_nbytes(t);
    return align_up(t->nb[1], LT_CACHE_LINE) * (size_t)t->ne[1];
}

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

/* Asks for transparent huge pages on [base, base + bytes); a hint whose
 * failure costs speed only, so it leaves a note of why, not an error. */
static void huge_page_hint(void *base, size_t bytes, char *note, size_t n) {
    /* LT_THP_SYSFS stands in for the kernel's file in tests */
    const char *sys = getenv("LT_THP_SYSFS") ? getenv("LT_THP_SYSFS")
                                             : "/sys/kernel/mm/transparent_hugepage/enabled";
    static const char *const cost = "the weights sit on 4 KiB pages and decode reads them slower";
    note[0] = 0;
    char mode[128] = "";
    FILE *f = fopen(sys, "r");
    if (!f) {
        snprintf(note, n, "this kernel has no transparent huge pages (%s is missing): %s", sys,
                 cost);
        return;
    }
    if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
    fclose(f);
    if (strstr(mode, "[never]")) {
        snprintf(note, n, "transparent huge pages are off (%s: never): %s", sys, cost);
        return;
    }
#ifdef MADV_HUGEPAGE
    if (madvise(base, bytes, MADV_HUGEPAGE) != 0)
        snprintf(note, n, "madvise(MADV_HUGEPAGE) failed (%s): %s", strerror(errno), cost);
#else
    (void)base;
    (void)bytes;
    snprintf(note, n, "this system has no MADV_HUGEPAGE: %s", cost);
#endif
}

const char *lt_model_page_note(const lt_model *m) {
    const lt__model_priv *p = m->priv;
    return p && p->resident && p->page_note[0] ? p->page_note : NULL;
}

int lt_model_make_resident(lt_model *m) { return lt_model_make_resident_progress(m, NULL, NULL); }

int lt_model_make_resident_progress(lt_model *m, lt_load_progress_fn progress, void *user) {
    lt__model_priv *p = m->priv;
    if (p->resident) return LT_OK;
    int cap = (int)(m->cfg.n_layers * 7 + 2);
    lt_tensor **list = malloc((size_t)cap * sizeof *list);
    if (!list) return lt_error(LT_ENOMEM, "out of memory");
    int n = collect(m, list, cap);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += align_up(resident_bytes(m, list[i]), LT_CACHE_LINE);
    size_t bytes = align_up(total, HUGE_PAGE) + HUGE_PAGE; /* room to align the start */
    char *raw = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        free(list);
        return lt_error(LT_ENOMEM, "cannot allocate %zu bytes for the weights", bytes);
    }
    char *base = (char *)align_up((size_t)raw, HUGE_PAGE);
    huge_page_hint(base, bytes - (size_t)(base - raw), p->page_note, sizeof p->page_note);
    bool tied = m->output.data == m->tok_embd.data;
    size_t off = 0;
    if (progress) progress(user, 0, total);
    for (int i = 0; i < n; i++) {
        lt_tensor *t = list[i];
        size_t sz = resident_bytes(m, t);
        if (splits(m, t)) {
            const size_t ld = align_up(t->nb[1], LT_CACHE_LINE);
            for (int64_t r = 0; r < t->ne[1]; r++)
                lt_q8_0_split_row(lt_tensor_row(t, r), base + off + (size_t)r * ld,
                                  t->ne[0] / LT_QK8_0);
            t->nb[1] = ld;
            t->nb[2] = t->nb[3] = ld * (size_t)t->ne[1];
            t->layout = LT_LAYOUT_Q8_SPLIT;
        } else if (interleaves(m, t)) {
            const size_t group = LT_X16_ROWS * t->nb[1];
            for (int64_t r = 0; r < t->ne[1]; r += LT_X16_ROWS)
                lt_x16_pack(t->dtype, lt_tensor_row(t, r), t->nb[1], LT_X16_ROWS,
                            t->ne[0] / lt_dtype_block(t->dtype),
                            base + off + (size_t)r / LT_X16_ROWS * group);
            t->layout = LT_LAYOUT_X16;
        } else {
            memcpy(base + off, t->data, sz);
        }
        t->data = base + off;
        off += align_up(sz, LT_CACHE_LINE);
        if (progress) progress(user, off, total);
    }
    if (tied) m->tok_embd.data = m->output.data;
    free(list);
    p->resident = raw;
    p->resident_bytes = bytes;
    return LT_OK;
}
