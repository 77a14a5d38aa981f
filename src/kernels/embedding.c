/* EMBED: row t of the output is the token-embedding table's row
 * step->tokens[t], dequantised to f32 (table of any dtype). Conversion is
 * exact for f16/bf16, d * q for q8_0 and lt_row_to_f32's for the other
 * quantisation types, so every ISA gives bit-identical rows. Threads share
 * the n x dim output elements as contiguous runs in 32-element units (one
 * q8_0 block), so a single token's row is split too. */
#include "kernels/ops_internal.h"

#include <string.h>

enum { P_MIN_CHUNK };

/* Columns [c0, c1) of a q4_0 .. q6_k row as f32, dequantised a block at a
 * time by the one portable dequantisation (shares are 32-aligned, so a
 * share starts and ends inside a K-quant's super-block of 256): the same
 * bits on every ISA. */
static void quant_cols(lt_dtype t, const void *row, int64_t c0, int64_t c1, float *y) {
    const int64_t blk = lt_dtype_block(t);
    const size_t bb = lt_dtype_block_bytes(t);
    float tmp[LT_QK_K];
    LT_ASSERT(blk <= LT_QK_K);
    for (int64_t b = c0 / blk; b * blk < c1; b++) {
        lt_row_to_f32(t, (const char *)row + (size_t)b * bb, tmp, blk);
        const int64_t lo = b * blk > c0 ? b * blk : c0;
        const int64_t hi = (b + 1) * blk < c1 ? (b + 1) * blk : c1;
        memcpy(y + (lo - c0), tmp + (lo - b * blk), (size_t)(hi - lo) * sizeof *y);
    }
}

static void embed_drive(const lt_call *c, const lt_step *step, int ith, int nth,
                        const lt__embed_ops *ops) {
    const lt_tensor *out = c->op[0], *table = c->op[1];
    const int64_t dim = out->ne[0], n = out->ne[1], vocab = table->ne[1];
    LT_ASSERT(step->n_tokens >= n);
    int active = lt__active_threads(n * dim, c->params.v[P_MIN_CHUNK], nth);
    if (ith >= active) return;
    int64_t lo, hi;
    lt__split(n * dim, LT__SPLIT_UNIT, ith, active, &lo, &hi);
    for (int64_t f = lo; f < hi;) {
        int64_t r = f / dim, c0 = f % dim, c1 = c0 + (hi - f) < dim ? c0 + (hi - f) : dim;
        const int64_t id = step->tokens[r];
        LT_ASSERT(id >= 0 && id < vocab);
        const void *src = (const char *)table->data + (size_t)id * table->nb[1];
        float *y = lt__row_f32(out, r) + c0;
        switch (table->dtype) {
        case LT_F32: memcpy(y, (const float *)src + c0, (size_t)(c1 - c0) * sizeof *y); break;
        case LT_F16: ops->f16(y, (const uint16_t *)src + c0, c1 - c0); break;
        case LT_BF16: ops->bf16(y, (const uint16_t *)src + c0, c1 - c0); break;
        case LT_Q8_0:
            /* dim % 32 == 0 and shares are 32-aligned, so c0 starts a block */
            ops->q8_0(y, (const lt_block_q8_0 *)src + c0 / LT_QK8_0, c1 - c0);
            break;
        default: quant_cols(table->dtype, src, c0, c1, y); break;
        }
        f += c1 - c0;
    }
}

static void embed_portable(const lt_call *c, const lt_step *s, int ith, int nth) {
    embed_drive(c, s, ith, nth, &lt__embed_portable);
}
#if LT_HAVE_X86
static void embed_avx2(const lt_call *c, const lt_step *s, int ith, int nth) {
    embed_drive(c, s, ith, nth, &lt__embed_avx2);
}
static void embed_avx512(const lt_call *c, const lt_step *s, int ith, int nth) {
    embed_drive(c, s, ith, nth, &lt__embed_avx512);
}
#endif

static void embed_cost(const lt_call *c, const lt_step *s, double *bytes, double *flops) {
    (void)s;
    const lt_tensor *table = c->op[1];
    double n = (double)c->op[0]->ne[1], dim = (double)c->op[0]->ne[0];
    *bytes = n * (double)lt_dtype_row_bytes(table->dtype, table->ne[0]) + 4.0 * n * dim;
    /* d * q (and + m); conversions are not FLOPs */
    *flops = lt_dtype_is_quant(table->dtype) ? n * dim : 0.0;
}

static int embed_check(const lt_call *c) {
    const lt_tensor *out = c->op[0], *table = c->op[1];
    int rc;
    if ((rc = lt__check_f32_rows(out, "embed", "out")) != LT_OK) return rc;
    if (!table) return lt_error(LT_EINVAL, "embed: operand table is missing");
    if ((unsigned)table->dtype >= LT_DTYPE_COUNT)
        return lt_error(LT_EINVAL, "embed: table has unknown dtype %d", (int)table->dtype);
    if (table->layout != LT_LAYOUT_PLAIN)
        return lt_error(LT_EINVAL, "embed: the table must be in its dtype's plain layout");
    if (table->ne[0] != out->ne[0] || table->ne[1] < 1 || table->ne[2] != 1 || table->ne[3] != 1)
        return lt_error(LT_EINVAL,
                        "embed: table is {%lld, %lld, %lld, %lld}, expected {%lld, vocab}",
                        (long long)table->ne[0], (long long)table->ne[1], (long long)table->ne[2],
                        (long long)table->ne[3], (long long)out->ne[0]);
    if (table->ne[0] % lt_dtype_block(table->dtype) != 0)
        return lt_error(LT_EINVAL, "embed: %s rows of %lld are not whole blocks of %lld",
                        lt_dtype_name(table->dtype), (long long)table->ne[0],
                        (long long)lt_dtype_block(table->dtype));
    if (table->nb[0] != lt_dtype_block_bytes(table->dtype) ||
        table->nb[1] < lt_dtype_row_bytes(table->dtype, table->ne[0]))
        return lt_error(LT_EINVAL, "embed: table strides {%zu, %zu} are not contiguous %s rows",
                        table->nb[0], table->nb[1], lt_dtype_name(table->dtype));
    if (out->data && table->data) {
        const char *po = out->data, *pt = table->data;
        size_t no = (size_t)out->ne[1] * out->nb[1], nt = (size_t)table->ne[1] * table->nb[1];
        if (po < pt + nt && pt < po + no) return lt_error(LT_EINVAL, "embed: out overlaps table");
    }
    return LT_OK;
}

/* ---- portable primitives (the scalar reference) ---------------------------- */

static void f16_p(float *y, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = lt_f16_to_f32(x[i]);
}

static void bf16_p(float *y, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = lt_bf16_to_f32(x[i]);
}

static void q8_0_p(float *y, const lt_block_q8_0 *x, int64_t n) {
    for (int64_t b = 0; b < n / LT_QK8_0; b++) {
        float d = lt_f16_to_f32(x[b].d);
        for (int i = 0; i < LT_QK8_0; i++) y[b * LT_QK8_0 + i] = d * (float)x[b].qs[i];
    }
}

const lt__embed_ops lt__embed_portable = {f16_p, bf16_p, q8_0_p};

const lt_kernel lt__k_embed = {
    .name = "embed",
    .id = LT_K_EMBED,
    .n_params = 1,
    .params = {LT__MIN_CHUNK_PARAM},
    .run = {[LT_ISA_PORTABLE] = embed_portable, [LT_ISA_AVX2] = LT_X86_ONLY(embed_avx2),
            [LT_ISA_AVX512] = LT_X86_ONLY(embed_avx512)},
    .cost = embed_cost,
    .check = embed_check,
};
