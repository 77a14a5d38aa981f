/* Shared internals of the non-linear kernels (rmsnorm, rope, kv_store,
 * attention, softmax, swiglu, add, embed): how threads split work, and the
 * per-ISA primitive tables each family's generic driver calls.
 *
 * Layout of a family: <family>.c holds the descriptor, check(), cost(), the
 * driver that decides thread ith's share, and the portable primitives;
 * <family>_avx2.c / <family>_avx512.c hold only vectorised primitives with
 * the same contract. The drivers are shared, so every ISA splits work the
 * same way and differs only in arithmetic order. */
#ifndef LT_KERNELS_OPS_INTERNAL_H
#define LT_KERNELS_OPS_INTERNAL_H

#include "looptune/kernels.h"

#include <stdint.h>

/* ---- work splitting -------------------------------------------------------- */

/* Thread ith's share [*lo, *hi) of [0, n) split into nth near-equal parts
 * whose boundaries are multiples of unit (the last share ends at n). Shares
 * are contiguous, disjoint, ascending in ith, and cover [0, n). When there
 * are fewer units than parts, the non-empty shares are spread evenly over
 * ith (not the first ones): the looped executor hands out runs of
 * consecutive tasks, and a run of the first tasks must not hold every unit. */
static inline void lt__split(int64_t n, int64_t unit, int ith, int nth, int64_t *lo,
                             int64_t *hi) {
    int64_t units = (n + unit - 1) / unit;
    int64_t u0 = units * ith / nth, u1 = units * (ith + 1) / nth;
    *lo = u0 * unit < n ? u0 * unit : n;
    *hi = u1 * unit < n ? u1 * unit : n;
}

/* Threads that take part when `work` elements are shared out so that each
 * active thread gets at least min_chunk of them: 1..nth. Threads ith >=
 * the result do nothing. */
static inline int lt__active_threads(int64_t work, int32_t min_chunk, int nth) {
    int64_t a = min_chunk > 0 ? work / min_chunk : nth;
    if (a < 1) a = 1;
    return a < nth ? (int)a : nth;
}

/* Whether the byte ranges of two tensors' data overlap (contiguous extents). */
static inline int lt__overlap(const lt_tensor *a, const lt_tensor *b) {
    const char *pa = a->data, *pb = b->data;
    if (!pa || !pb) return 0;
    /* a cache's planes (slots) are part of it */
    size_t na = (size_t)(a->ne[1] - 1) * a->nb[1] + (size_t)a->ne[0] * sizeof(float);
    size_t nb = (size_t)(b->ne[1] - 1) * b->nb[1] + (size_t)b->ne[0] * sizeof(float);
    if (a->ne[2] > 1) na += (size_t)(a->ne[2] - 1) * a->nb[2];
    if (b->ne[2] > 1) nb += (size_t)(b->ne[2] - 1) * b->nb[2];
    return pa < pb + nb && pb < pa + na;
}

/* Row r of an f32 tensor. */
static inline float *lt__row_f32(const lt_tensor *t, int64_t r) {
    return (float *)((char *)t->data + (size_t)r * t->nb[1]);
}

/* The KV cache row of token t of step s: row lt_step_pos of plane
 * lt_step_slot (kernels.h). */
static inline float *lt__kv_row(const lt_tensor *cache, const lt_step *s, int64_t t) {
    const int64_t pos = lt_step_pos(s, t), slot = lt_step_slot(s, t);
    LT_ASSERT(pos >= 0 && pos < cache->ne[1] && slot >= 0 && slot < cache->ne[2]);
    return (float *)((char *)cache->data + (size_t)slot * cache->nb[2] + (size_t)pos * cache->nb[1]);
}

/* Shared weight check: the layout is one W's dtype has (split is q8_0's;
 * interleaved q4_0's and q4_k's, in whole groups of 16 rows). */
static inline int lt__check_layout(const lt_tensor *w, const char *kernel) {
    if (w->layout == LT_LAYOUT_PLAIN || (w->layout == LT_LAYOUT_Q8_SPLIT && w->dtype == LT_Q8_0))
        return LT_OK;
    if (w->layout == LT_LAYOUT_X16 && lt_x16_has(w->dtype)) {
        if (w->ne[1] % LT_X16_ROWS == 0 && w->nb[1] == lt_dtype_row_bytes(w->dtype, w->ne[0]))
            return LT_OK;
        return lt_error(LT_EINVAL, "%s: interleaved %s W has %lld rows of %zu bytes, not whole "
                        "groups of %d plain rows", kernel, lt_dtype_name(w->dtype),
                        (long long)w->ne[1], w->nb[1], LT_X16_ROWS);
    }
    return lt_error(LT_EINVAL, "%s: W has layout %d, which %s weights do not have", kernel,
                    (int)w->layout, lt_dtype_name(w->dtype));
}

/* Shared operand check: present, f32, a 2-d matrix of rows (ne[2] = ne[3]
 * = 1) with contiguous elements and rows at least ne[0] apart. `kernel` and
 * `what` name the operand in the message. */
static inline int lt__check_f32_rows(const lt_tensor *t, const char *kernel, const char *what) {
    if (!t) return lt_error(LT_EINVAL, "%s: operand %s is missing", kernel, what);
    if (!t->data) return lt_error(LT_EINVAL, "%s: operand %s has no data", kernel, what);
    if (t->dtype != LT_F32)
        return lt_error(LT_EINVAL, "%s: operand %s is %s, expected f32", kernel, what,
                        lt_dtype_name(t->dtype));
    if (t->ne[0] < 1 || t->ne[1] < 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return lt_error(LT_EINVAL, "%s: operand %s has shape {%lld, %lld, %lld, %lld}, expected "
                        "a non-empty 2-d matrix", kernel, what, (long long)t->ne[0],
                        (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    if (t->nb[0] != sizeof(float) || t->nb[1] < (size_t)t->ne[0] * sizeof(float) ||
        t->nb[1] % sizeof(float) != 0)
        return lt_error(LT_EINVAL, "%s: operand %s has strides {%zu, %zu}, expected contiguous "
                        "f32 rows", kernel, what, t->nb[0], t->nb[1]);
    return LT_OK;
}

/* A KV cache: f32 rows in planes, one plane per sequence slot ([d][ctx][slots]). */
static inline int lt__check_f32_cache(const lt_tensor *t, const char *kernel, const char *what) {
    if (!t) return lt_error(LT_EINVAL, "%s: operand %s is missing", kernel, what);
    lt_tensor plane = *t;
    plane.ne[2] = 1;
    int rc = lt__check_f32_rows(&plane, kernel, what);
    if (rc != LT_OK) return rc;
    if (t->ne[2] < 1 || t->ne[3] != 1 || t->nb[2] < (size_t)t->ne[1] * t->nb[1])
        return lt_error(LT_EINVAL, "%s: cache %s has %lld planes of stride %zu, expected slots of "
                        "%lld rows", kernel, what, (long long)t->ne[2], t->nb[2],
                        (long long)t->ne[1]);
    return LT_OK;
}

/* Element split unit: 32 floats = two cache lines, and one q8_0 block. */
#define LT__SPLIT_UNIT 32

/* The element-split kernels' parameter: each taking part thread gets at
 * least min_chunk elements (fewer threads take part on small calls).
 * Default 1024: not yet measured with threads (the shared host was too
 * noisy); one thread adds 1024 floats in about 80 ns, near the cost of
 * handing a cache line to another core, so smaller shares gain little. */
#define LT__MIN_CHUNK_PARAM                                                    \
    {.name = "min_chunk",                                                      \
     .n_values = 7,                                                            \
     .values = {1, 64, 256, 1024, 4096, 16384, 65536},                         \
     .def = 1024}

/* Largest head_dim rope and attention accept (bounds their stack tables). */
#define LT__MAX_HEAD_DIM 512
/* Largest heads_per_task value of attention. */
#define LT__MAX_HEADS_PER_TASK 8

/* ---- per-ISA primitive tables ---------------------------------------------- */

/* rmsnorm. sumsq returns sum x[i]^2 over [0, n); scale_mul writes
 * y[i] = w[i] * (r * x[i]) over [0, n). */
typedef struct {
    float (*sumsq)(const float *x, int64_t n);
    void (*scale_mul)(float *y, const float *x, const float *w, float r, int64_t n);
} lt__norm_ops;

/* rope. rotate applies the NORM rotation in place over n (even) floats of a
 * head: x[2i], x[2i+1] -> x[2i]*c[2i] + x[2i+1]*s[2i],
 * x[2i+1]*c[2i+1] + x[2i]*s[2i+1], with the tables from lt__rope_tables
 * (c holds cos at both elements of a pair, s holds -sin then +sin); n may
 * be a part of a head that starts on a pair. rotate_neox applies the NEOX
 * rotation over one whole head of n floats, h = n/2: x[i], x[i+h] ->
 * x[i]*c[i] + x[i+h]*s[i], x[i+h]*c[i+h] + x[i]*s[i+h]. */
typedef struct {
    void (*rotate)(float *x, const float *c, const float *s, int64_t n);
    void (*rotate_neox)(float *x, const float *c, const float *s, int64_t n);
} lt__rope_ops;

/* The rotation tables of one head at position p (head_dim hd, base, mode,
 * factors[hd/2] or NULL), laid out for the mode's pairs, built by the same
 * scalar code for every ISA and kept per thread until the next call with
 * other arguments: valid until then. */
void lt__rope_tables(int64_t hd, float base, lt_rope_mode mode, const float *factors, int64_t p,
                     const float **c, const float **s);
/* Checks a rope factors operand (NULL is fine): f32 {hd/2}. */
int lt__rope_check_factors(const lt_tensor *f, int64_t hd, const char *kernel);

/* Element-wise and row-reduction primitives over [0, n):
 * add y = a + b; swiglu y = a * sigmoid(a) * b (y may alias a or b);
 * max returns max x[i]; exp_sum sets x[i] = exp(x[i] - m) and returns the
 * sum; scale sets x[i] *= c; copy y = a. */
typedef struct {
    void (*add)(float *y, const float *a, const float *b, int64_t n);
    void (*swiglu)(float *y, const float *a, const float *b, int64_t n);
    float (*max)(const float *x, int64_t n);
    float (*exp_sum)(float *x, int64_t n, float m);
    void (*scale)(float *x, float c, int64_t n);
    void (*copy)(float *y, const float *a, int64_t n);
} lt__act_ops;

/* attention blocks. scores: s[j] = dot(q, k + j*kstride) over hd floats,
 * j in [0, nk). accum: acc[i] += sum_j s[j] * v[j*vstride + i], i in [0, hd). */
typedef struct {
    void (*scores)(float *s, const float *q, const float *k, size_t kstride, int64_t nk,
                   int64_t hd);
    void (*accum)(float *acc, const float *s, const float *v, size_t vstride, int64_t nk,
                  int64_t hd);
} lt__attn_ops;

/* embed: dequantise n elements of a row into f32 (q8_0: n multiple of 32,
 * src at a block boundary). */
typedef struct {
    void (*f16)(float *y, const uint16_t *x, int64_t n);
    void (*bf16)(float *y, const uint16_t *x, int64_t n);
    void (*q8_0)(float *y, const lt_block_q8_0 *x, int64_t n);
} lt__embed_ops;

extern const lt__norm_ops lt__norm_portable, lt__norm_avx2, lt__norm_avx512;
extern const lt__rope_ops lt__rope_portable, lt__rope_avx2, lt__rope_avx512;
extern const lt__act_ops lt__act_portable, lt__act_avx2, lt__act_avx512;
extern const lt__attn_ops lt__attn_portable, lt__attn_avx2, lt__attn_avx512;
extern const lt__embed_ops lt__embed_portable, lt__embed_avx2, lt__embed_avx512;

/* ---- vector exp, shared by the ISA files ----------------------------------- */

/* exp(x) = 2^n * e^r with n = round(x / ln2), r = x - n*ln2 (ln2 split in a
 * 16-bit head, so n*LN2_HI is exact, and a tail), e^r by its Taylor series to
 * r^7 (|r| <= 0.347: truncation < 1e-8 relative, below float rounding).
 * Inputs are clamped to [-87, 88] so 2^n stays a normal float; below -87
 * (e^x < 2e-38) the result is 0. NaN propagates. */
#define LT__EXP_LO -87.0f
#define LT__EXP_HI 88.0f
#define LT__LOG2E 1.44269504088896341f
#define LT__LN2_HI 0.693145751953125f      /* 45426 / 65536 */
#define LT__LN2_LO 1.42860682030941723e-6f /* ln2 - LT__LN2_HI */

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

static inline __m256 lt__exp_avx2(__m256 x) {
    __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(LT__EXP_LO), _CMP_LT_OQ);
    /* operand order keeps NaN: max/min return the second operand on NaN */
    x = _mm256_max_ps(_mm256_set1_ps(LT__EXP_LO), x);
    x = _mm256_min_ps(_mm256_set1_ps(LT__EXP_HI), x);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(LT__LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LT__LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LT__LN2_LO), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
                                  23);
    return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

static inline float lt__hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float lt__hmax_avx2(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Lane mask for the first n (0..8) lanes, for maskload/maskstore tails. */
static inline __m256i lt__tail_mask_avx2(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

#if defined(__AVX512F__)
#include <immintrin.h>

static inline __m512 lt__exp_avx512(__m512 x) {
    __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(LT__EXP_LO), _CMP_LT_OQ);
    x = _mm512_max_ps(_mm512_set1_ps(LT__EXP_LO), x);
    x = _mm512_min_ps(_mm512_set1_ps(LT__EXP_HI), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(LT__LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LT__LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LT__LN2_LO), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)),
                                  23);
    return _mm512_maskz_mul_ps((__mmask16)~tiny, p, _mm512_castsi512_ps(e));
}

/* Mask of the first n (0..16) lanes. */
static inline __mmask16 lt__tail_mask_avx512(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}
#endif

#endif
