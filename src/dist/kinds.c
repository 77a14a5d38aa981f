/* The registry of task kinds: noop (inputs sent back) and matmul, one output tile
 * C[m][n] = A[m][k] B from A's row panel "a" [m][k] and B's column panel
 * sent transposed, "b_t" [n][k] (the layout of the library's matmul kernel,
 * Y = X W^T), run with that kernel on the worker's thread pool. Panels that
 * travel converted (f16, bf16, q8_0) are computed from as they came: b_t is
 * the kernel's weight operand in its dtype, a is widened to f32 (the
 * kernel's activations) first. */
#include "looptune/dist.h"
#include "looptune/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MATMUL_MAX_ELEMS (1ll << 28) /* per operand: 1 GiB of f32 */

typedef struct {
    lt_kernel_fn fn;
    const lt_call *call;
} matmul_job;

static void matmul_thread(void *arg, int ith, int nth) {
    const matmul_job *j = arg;
    lt_step step = {.pos = 0, .n_tokens = j->call->op[0]->ne[1]};
    j->fn(j->call, &step, ith, nth);
}

int lt_dist_matmul_dt(lt_pool *pool, const float *a, const void *bt, lt_dtype bt_dtype,
                      int64_t m, int64_t n, int64_t k, float *c) {
    const lt_kernel *kern = lt_kernel_get(LT_K_MATMUL);
    lt_tensor ty, tw, tx;
    if (k % lt_dtype_block(bt_dtype))
        return lt_error(LT_EINVAL, "matmul: %s rows of %lld elements: a multiple of %lld expected",
                        lt_dtype_name(bt_dtype), (long long)k, (long long)lt_dtype_block(bt_dtype));
    lt_tensor_init(&ty, LT_F32, n, m, 1, 1, c);
    lt_tensor_init(&tw, bt_dtype, k, n, 1, 1, (void *)bt);
    lt_tensor_init(&tx, LT_F32, k, m, 1, 1, (void *)a);
    lt_call call = {.op = {&ty, &tw, &tx}};
    lt_params_default(kern, &call.params);
    int rc = lt_call_check(LT_K_MATMUL, &call);
    if (rc) return rc;
    matmul_job j = {.fn = lt_kernel_fn_for(kern, lt_isa_active()), .call = &call};
    lt_pool_run(pool, matmul_thread, &j);
    return LT_OK;
}

int lt_dist_matmul(lt_pool *pool, const float *a, const float *bt, int64_t m, int64_t n,
                   int64_t k, float *c) {
    return lt_dist_matmul_dt(pool, a, bt, LT_F32, m, n, k, c);
}

static const lt_dist_tensor *input(const lt_dist_task_in *in, const char *name) {
    for (size_t i = 0; i < in->n_inputs; i++)
        if (!strcmp(in->inputs[i].name, name)) return &in->inputs[i];
    return NULL;
}

static int matmul_run(const lt_dist_task_in *in, lt_dist_tensor *outs, size_t *n_outs) {
    *n_outs = 0;
    const lt_dist_tensor *a = input(in, "a"), *bt = input(in, "b_t");
    if (!a || !bt) return lt_error(LT_EFORMAT, "matmul task: inputs 'a' and 'b_t' expected");
    if (a->ndim != 2 || bt->ndim != 2)
        return lt_error(LT_EFORMAT, "matmul task: 'a' and 'b_t' must be 2-D");
    const int64_t m = a->shape[0], k = a->shape[1], n = bt->shape[0];
    if (bt->shape[1] != k)
        return lt_error(LT_EFORMAT, "matmul task: 'a' is %lldx%lld, 'b_t' %lldx%lld: inner "
                        "dimensions differ", (long long)m, (long long)k, (long long)n,
                        (long long)bt->shape[1]);
    if (m * n > MATMUL_MAX_ELEMS)
        return lt_error(LT_EFORMAT, "matmul task: output tile %lldx%lld too large",
                        (long long)m, (long long)n);
    /* a converted row panel is widened to the kernel's f32 activations */
    float *af = a->data;
    if (a->dtype != LT_F32) {
        if (!(af = malloc((size_t)(m * k) * sizeof *af)))
            return lt_error(LT_ENOMEM, "matmul task: out of memory");
        const size_t rb = lt_dtype_row_bytes(a->dtype, k);
        for (int64_t i = 0; i < m; i++)
            lt_row_to_f32(a->dtype, (const char *)a->data + (size_t)i * rb, af + i * k, k);
    }
    lt_dist_tensor *c = &outs[0];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "c");
    c->ndim = 2;
    c->shape[0] = m;
    c->shape[1] = n;
    c->data = malloc((size_t)(m * n) * sizeof(float));
    int rc = c->data ? lt_dist_matmul_dt(in->pool, af, bt->data, bt->dtype, m, n, k, c->data)
                     : lt_error(LT_ENOMEM, "matmul task: out of memory");
    if (af != a->data) free(af);
    if (rc) {
        free(c->data);
        c->data = NULL;
        return rc;
    }
    *n_outs = 1;
    return LT_OK;
}

/* noop: every input back as the output of the same name, for measuring the
 * protocol itself (round trip, throughput). */
static int noop_run(const lt_dist_task_in *in, lt_dist_tensor *outs, size_t *n_outs) {
    *n_outs = 0;
    if (in->n_inputs > LT_DIST_MAX_OUTPUTS)
        return lt_error(LT_EFORMAT, "noop task: %zu inputs, at most %d", in->n_inputs,
                        LT_DIST_MAX_OUTPUTS);
    for (size_t i = 0; i < in->n_inputs; i++) {
        const lt_dist_tensor *x = &in->inputs[i];
        size_t bytes = lt_dist_tensor_bytes(x);
        outs[i] = *x;
        outs[i].data = malloc(bytes ? bytes : 1);
        if (!outs[i].data) {
            for (size_t k = 0; k < i; k++) free(outs[k].data);
            return lt_error(LT_ENOMEM, "noop task: out of memory");
        }
        memcpy(outs[i].data, x->data, bytes);
    }
    *n_outs = in->n_inputs;
    return LT_OK;
}

static const lt_dist_kind kinds[] = {
    {.name = "matmul", .run = matmul_run},
    {.name = "noop", .run = noop_run},
    {.name = "tune", .answer = lt_dist_tune_run}, /* kind_tune.c */
    {.name = "hpo", .answer = lt_dist_hpo_run},   /* kind_hpo.c */
};

const lt_dist_kind *lt_dist_kind_find(const char *name) {
    for (size_t i = 0; name && i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(kinds[i].name, name)) return &kinds[i];
    return NULL;
}

const lt_dist_kind *lt_dist_kind_at(size_t i) {
    return i < sizeof kinds / sizeof kinds[0] ? &kinds[i] : NULL;
}
